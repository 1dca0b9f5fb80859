"""Expert parallelism as Megatron-LM folds it: the expert grid ``etp x ep x edp`` laid over the
``m1 x d`` tensor- and data-parallel ranks of each pipeline stage, and the collectives and
sharding of the routed experts' model state.

Within a stage, the dense layers see ranks as ``m1`` tensor ranks (adjacent) times ``d`` data
replicas; the MoE layers see the same ``m1 d`` ranks as

=============== ====================== =================================== ===============
group           degree                 what its members share              rank stride
=============== ====================== =================================== ===============
expert tensor   ``etp``                slices of the same experts          1
expert          ``ep``                 all-to-all of their routed tokens   ``etp``
expert data     ``edp = m1 d/(ep etp)`` the same expert slices: their       ``etp ep``
                                       gradients are reduced, their states
                                       sharded (ZeRO, distributed optimizer)
=============== ====================== =================================== ===============

The routed experts' weights, gradients and optimizer states follow ``parallel.zero`` with
``edp`` in place of ``d``, their gradient collectives too, ``ep etp`` ranks apart; every other
parameter (attention, norms, router, shared experts, embeddings) with ``d``
(``models.experts`` applies the training recipe to each part).  The all-to-alls of each MoE
layer are in its block (``blocks.moe``).
"""

from __future__ import annotations

from sympy import Expr

from symbolic_cost.checks import divides
from symbolic_cost.cost import exact

EXPERT_GRID_RULES = (("ep x etp", "m1 x d"),)
"""``(divisor, dividend)``: the expert grid ``ep x etp`` folds onto a stage's ``m1 x d`` ranks
(``checks.check_rules`` applies it; the layout search and ``--grid`` sweeps too)."""


def expert_data_degree(m1, d, ep, etp) -> Expr:
    """``edp = m1 d / (ep etp)``: the replicas of each expert slice, refusing an expert grid
    that does not fold onto the ``m1 x d`` ranks (``ep etp`` must divide ``m1 d``).

    >>> expert_data_degree(2, 8, 8, 1), expert_data_degree(8, 4, 4, 8)
    (2, 1)
    """
    ranks, grid = exact(m1, "m1") * exact(d, "d"), exact(ep, "ep") * exact(etp, "etp")
    for divisor, dividend in EXPERT_GRID_RULES:
        divides({"ep x etp": grid, "m1 x d": ranks}, divisor, dividend,
                "the expert grid folds onto the tensor and data-parallel ranks of a stage")
    return ranks / grid
