"""What a layout search and its tensor grids share (``numeric.search``, ``numeric.grid_frames``):
the step-time parts reported, how many runs a kernel is compiled for, and the fastest rows."""

from __future__ import annotations

import numpy as np

PARTS = ("compute", "tensor_comm", "bubble", "pipeline_comm", "data_comm", "host_comm", "host_step", "optimizer",
         "framework", "total")
"""The step-time parts a search reports, which add up to its ``total`` (``host_comm`` and ``host_step``
are 0 without offload; ``optimizer`` and ``framework`` 0 on the peak-only time model)."""

RERUNS = 4
"""A search's kernels are filed on disk for the searches after it, so it asks for an optimised
kernel as if each would run ``RERUNS`` times: from 131,072 layouts, where one run alone would
need ``symengine_kernel.OPTIMIZED_ROWS`` (524,288).  The optimised compile costs about three
quick ones for twice the speed, which a group of fewer layouts would not repay."""

def fastest(total: np.ndarray, top: int) -> np.ndarray:
    """The positions of the ``top`` least of ``total``, least first, ties in row order (as a
    stable sort of it), found among the rows as fast as the ``top``-th alone."""
    keep = np.flatnonzero(total <= np.partition(total, top - 1)[top - 1]) if len(total) > top else \
        np.arange(len(total))
    return keep[np.argsort(total[keep], kind="stable")[:top]]
