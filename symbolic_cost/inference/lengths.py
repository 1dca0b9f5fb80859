"""How many tokens each request of a load test generates: all the same, or drawn.

A benchmark that prints one output length ``O`` ran one of two workloads.  A synthetic one sets
every request's ``max_tokens`` to ``O`` and ignores the end-of-sequence token (TensorRT-LLM's and
vLLM's random datasets): every request generates ``O`` tokens (``"fixed"``).  A dataset of real
conversations (ShareGPT) lets each answer stop where it ends, and ``O`` is then the mean of very
different lengths.  Their spread matters under load: the short requests leave early and the long
ones hold the engine at a small batch for the end of the run, so throughput falls and the
inter-token gaps shrink, although the mean is the same.

Knowing only the mean, ``"geometric"`` draws each length from the geometric distribution on
1, 2, 3, ... with that mean, ``P(O = k) = q (1 - q)^(k - 1)`` with ``q = 1 / O``: of all
distributions on the positive integers with a given mean, the one of largest entropy (the
discrete counterpart of the exponential), so it assumes nothing the mean does not say.  A length
past what the model's context leaves after the prompt is cut to it, as an engine ends a sequence
at its ``max_seq_len``.
"""

from __future__ import annotations

import math
import random

from symbolic_cost.checks import InputError

LENGTHS = ("fixed", "geometric")
"""The output-length workloads ``output_lengths`` draws (``--output-lengths``)."""


def output_lengths(mean: int, requests: int, shape: str = "fixed", seed: int = 0, most: int | None = None) -> list[int]:
    """Output tokens of each of ``requests`` requests whose mean is ``mean`` (see the module
    docstring), in arrival order; ``seed`` seeds the draw (a stream of its own, apart from the
    arrivals'), and ``most`` caps a drawn length (``None``: no cap).

    >>> output_lengths(3, 4)
    [3, 3, 3, 3]
    >>> draws = output_lengths(200, 20_000, "geometric", seed=1)
    >>> min(draws), round(sum(draws) / len(draws) / 200, 1)
    (1, 1.0)
    >>> max(output_lengths(200, 1_000, "geometric", most=256))
    256
    """
    if shape not in LENGTHS:
        raise InputError(f"output lengths must be one of {', '.join(LENGTHS)}, got {shape!r}", "lengths")
    if shape == "fixed" or mean == 1:
        return [mean] * requests
    log_stay = math.log1p(-1 / mean)
    # the inverse of the distribution function 1 - (1 - q)^k at the midpoints (i + 1/2) / n
    lengths = [max(1, math.ceil(math.log1p(-(i + 0.5) / requests) / log_stay)) for i in range(requests)]
    random.Random(f"output lengths {seed}").shuffle(lengths)
    return [min(k, most) for k in lengths] if most is not None else lengths
