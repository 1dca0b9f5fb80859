"""Expert parallelism as Megatron-LM folds it: the expert grid ``etp x ep x edp`` laid over the
``m1 x cp x d`` tensor-, context- and data-parallel ranks of each pipeline stage, and the
collectives and sharding of the routed experts' model state.

Within a stage, the dense layers see ranks as ``m1`` tensor ranks (adjacent) times ``cp``
context ranks (``m1`` apart) times ``d`` data replicas (Megatron-LM's order tp-cp-dp); the MoE
layers see the same ``m1 cp d`` ranks as

=============== ====================== =================================== ===============
group           degree                 what its members share              rank stride
=============== ====================== =================================== ===============
expert tensor   ``etp``                slices of the same experts          1
expert          ``ep``                 all-to-all of their routed tokens   ``etp``
expert data     ``edp = m1 cp d/(ep etp)`` the same expert slices: their   ``etp ep``
                                       gradients are reduced, their states
                                       sharded (ZeRO, distributed optimizer)
=============== ====================== =================================== ===============

Megatron-Core builds the expert groups with a rank generator of ``tp = etp``, ``ep``,
``dp = edp`` and ``cp = 1`` over the same ranks (``parallel_state.initialize_model_parallel``:
``expert_data_parallel_size = decoder_world_size // (etp ep pp)``, refusing a world it does
not divide), so a context-parallel rank's ``b l/cp`` tokens are routed, dispatched and
computed like any other rank's, and the CP ranks count as expert data replicas.

Under hybrid sharding (HSDP, ``Training.shard``: ZeRO-3 within groups of ``shard`` data ranks,
replicated across ``d/shard`` of them) each replica group's ``m1 cp shard`` ranks fold the same
way, so the routed experts are sharded over ``edp_shard = m1 cp shard/(ep etp)`` expert-data
ranks and all-reduced over the ``d/shard`` replicas (torchtitan shards them with FSDP2 over the
expert-data mesh ``dp_shard_mod_ep`` inside ``dp_replicate``; ``expert_shard_degree``).

The routed experts' weights, gradients and optimizer states follow ``parallel.zero`` with
``edp`` in place of ``d`` (and ``edp_shard`` in place of ``shard``), their gradient collectives
too, ``ep etp`` ranks apart; every other
parameter (attention, norms, router, shared experts, embeddings) with ``d cp``
(``models.experts`` applies the training recipe to each part).  The all-to-alls of each MoE
layer are in its block (``blocks.moe``).
"""

from __future__ import annotations

from sympy import Expr

from symbolic_cost.checks import divides, positive_dims
from symbolic_cost.cost import exact

EXPERT_GRID_RULES = (("ep x etp", "m1 x cp x d"),)
"""``(divisor, dividend)``: the expert grid ``ep x etp`` folds onto a stage's ``m1 x cp x d``
ranks (``checks.check_rules`` applies it; the layout search and ``--grid`` sweeps too)."""


def expert_data_degree(m1, d, ep, etp, cp=1) -> Expr:
    """``edp = m1 cp d / (ep etp)``: the replicas of each expert slice, refusing an expert grid
    that does not fold onto the ``m1 x cp x d`` ranks (``ep etp`` must divide ``m1 cp d``;
    the message says ``m1 x d`` without context parallelism).

    >>> expert_data_degree(2, 8, 8, 1), expert_data_degree(8, 4, 4, 8), expert_data_degree(2, 1, 8, 1, cp=4)
    (2, 1, 1)
    >>> expert_data_degree(2, 1, 8, 1, cp=2)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: ep x etp must divide m1 x cp x d (got ep x etp=8, m1 x cp x d=4); the expert grid folds onto the tensor-, context- and data-parallel ranks of a stage
    """
    positive_dims(m1=m1, cp=cp, d=d, ep=ep, etp=etp)       # a 0 ended in a ZeroDivisionError
    cp = exact(cp, "cp")
    ranks, grid = exact(m1, "m1") * cp * exact(d, "d"), exact(ep, "ep") * exact(etp, "etp")
    for divisor, dividend in EXPERT_GRID_RULES:
        named = dividend if cp != 1 else "m1 x d"
        divides({"ep x etp": grid, named: ranks}, divisor, named,
                f"the expert grid folds onto the tensor-{', context-' if cp != 1 else ''} and data-parallel "
                "ranks of a stage")
    return ranks / grid


def expert_shard_degree(m1, shard, ep, etp, cp=1) -> Expr:
    """``edp_shard = m1 cp shard/(ep etp)``: the expert-data ranks one copy of the routed experts'
    state is sharded over under HSDP (``shard`` data ranks a shard group), refusing an expert
    grid that does not fold into a shard group's ``m1 cp shard`` ranks.

    >>> expert_shard_degree(2, 4, 8, 1), expert_shard_degree(2, 2, 4, 1, cp=2)
    (1, 2)
    >>> expert_shard_degree(2, 2, 8, 1)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: ep x etp must divide m1 x cp x shard (got ep x etp=8, m1 x cp x shard=4); under HSDP the expert grid folds into each replica group (its shard group of data ranks)
    """
    positive_dims(m1=m1, cp=cp, shard=shard, ep=ep, etp=etp)
    ranks = exact(m1, "m1") * exact(cp, "cp") * exact(shard, "shard")
    grid = exact(ep, "ep") * exact(etp, "etp")
    divides({"ep x etp": grid, "m1 x cp x shard": ranks}, "ep x etp", "m1 x cp x shard",
            "under HSDP the expert grid folds into each replica group (its shard group of data ranks)")
    return ranks / grid
