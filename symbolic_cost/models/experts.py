"""Whole-model totals of mixture-of-experts training: the expert degrees of a ``Training``, the
model state split into the routed experts' part (sharded over the ``edp`` expert replicas,
``parallel.expert``) and the rest (over the ``d`` data replicas), the collectives of each
part, the active parameters per token and the all-to-all bytes of a step.

Each part's state is ``models.recipes.state_bytes`` of its own parameters, with its own
data-parallel degree: ZeRO, the distributed optimizer and offload apply to both alike.
"""

from __future__ import annotations

from dataclasses import replace

from sympy import Expr, Integer, sympify

from symbolic_cost.blocks import Block
from symbolic_cost.blocks.moe import EXPERT_COMM_ROWS, EXPERT_ROWS
from symbolic_cost.cost import exact
from symbolic_cost.models.recipes import data_collectives, state_bytes
from symbolic_cost.parallel.expert import expert_data_degree, expert_shard_degree

STATE_KEYS = ("weight_bytes", "gradient_bytes", "optimizer_bytes")


def expert_degrees(t, m1) -> tuple[Expr, Expr]:
    """``(ep, etp)`` of a training: ``etp`` defaults to ``m1`` (Megatron-LM)."""
    return exact(t.ep, "ep"), exact(m1 if t.etp is None else t.etp, "etp")


def experts_only(blk: Block, experts: bool = True) -> Block:
    """The block's routed-expert rows (``blocks.moe.EXPERT_ROWS``), or every other row."""
    return replace(blk, rows=tuple(r for r in blk if (r.name in EXPERT_ROWS) == experts))


def block_dimension(row) -> str:
    """The dimension a row's collectives are reported under: ``"expert"`` for the all-to-all
    rows of an MoE layer, ``"tensor"`` for every other block collective."""
    return "expert" if row.name in EXPERT_COMM_ROWS else "tensor"


def split_state_bytes(t, m1, es, per_device, on_stage, tied, e, conventions) -> dict:
    """``recipes.state_bytes`` of the device's dense parameters over ``d`` plus that of its
    routed-expert parameters over ``edp`` (``t`` is the data group, ``models.totals.data_group``:
    its ``d`` counts the context-parallel ranks, so ``edp = m1 cp d/(ep etp)``); also ``expert_parameters_per_device`` and, under
    ``"parts"``, both parts' states with the expert data-parallel degree (``None`` without
    experts)."""
    experts = on_stage(lambda blk: experts_only(blk).total("weights")) / es
    if sympify(experts) == 0:
        return {**state_bytes(t, es, per_device, on_stage, tied, e, conventions),
                "expert_parameters_per_device": Integer(0), "parts": None}
    edp = expert_data_degree(m1, t.d, *expert_degrees(t, m1))
    dense = state_bytes(t, es, per_device - experts, lambda of, copy=0: on_stage(
        lambda blk: of(experts_only(blk, False)), copy), tied, e, conventions)
    routed = state_bytes(expert_group(t, m1, edp), es, experts, lambda of, copy=0: on_stage(
        lambda blk: of(experts_only(blk)), 0), 0, e, conventions)
    total = {k: dense[k] + routed[k] for k in dense}
    return {**total, "expert_parameters_per_device": experts, "parts": (dense, routed, edp)}


def expert_data_collectives(t, m1, states: dict, es_w, es_g, n, conventions) -> list:
    """The routed experts' gradient (and ZeRO parameter) collectives of a step over their
    ``edp`` replicas, ``ep etp`` ranks apart (``t``: the data group, ``models.totals.data_group``;
    under HSDP ``expert_group``'s shard groups); none without experts or with one replica."""
    if states["parts"] is None:
        return []
    _, routed, edp = states["parts"]
    if edp == 1:
        return []
    ep, etp = expert_degrees(t, m1)
    return data_collectives(expert_group(t, m1, edp), states["expert_parameters_per_device"], routed, es_w, es_g, edp,
                            n, ep * etp, conventions)


def expert_group(t, m1, edp):
    """The data group ``t`` (``models.totals.data_group``: ``d`` and ``shard`` counting the CP
    ranks) as the routed experts see it: ``edp`` replicas, sharded under HSDP over
    ``edp_shard = m1 shard/(ep etp)`` of them (``parallel.expert.expert_shard_degree``)."""
    ep, etp = expert_degrees(t, m1)
    shard = None if t.shard is None else expert_shard_degree(m1, t.shard, ep, etp)
    return replace(t, d=edp, shard=shard)


def dense_state(states: dict, per_device) -> tuple[Expr, dict]:
    """The parameters and states data parallelism over ``d`` keeps in step: the dense part's
    (everything without experts)."""
    if states["parts"] is None:
        return per_device, states
    return per_device - states["expert_parameters_per_device"], states["parts"][0]


def active_parameters(whole, parameters, moe=None) -> Expr:
    """Parameters one token goes through: all of them but, in each MoE layer, the ``E - k``
    routed experts it is not sent to (``whole``: the model's blocks on one device, 1-byte
    elements, so weights are parameters; ``moe``: the model's ``MoE``, for expert rows in a
    block of other kind, as the multi-token-prediction layer in the head's).

    >>> from symbolic_cost.models.config import from_config
    >>> from symbolic_cost.models import Training, model_cost
    >>> mixtral = dict(model_type="mixtral", sliding_window=None, max_position_embeddings=32768)
    >>> model_cost(from_config(mixtral), Training(b=1, l=4096)).active_parameters   # 12.9 B of 46.7 B
    12879925248
    """
    if moe is None:
        return parameters
    idle = (1 - exact(moe.top_k, "top_k") / exact(moe.experts, "experts")) * sum(
        (count * experts_only(blk).total("weights") for blk, count in whole), Integer(0))
    return parameters - idle


def alltoall_bytes(cost) -> Expr:
    """Bytes the busiest device sends in the all-to-alls of one step (``"expert"`` collectives
    of kind ``alltoall``, as the conventions report volumes)."""
    return sum((c.volume for dim, c in cost.collectives if dim == "expert" and c.kind == "alltoall"), Integer(0))
