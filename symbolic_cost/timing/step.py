"""Step time of a whole model: seconds per iteration on the busiest device, by part."""

from __future__ import annotations

from sympy import Expr, Integer

from symbolic_cost import conventions as conv
from symbolic_cost.cost import exact
from symbolic_cost.models import ModelCost
from symbolic_cost.models.ranks import cost_placement
from symbolic_cost.models.memory import recomputed_rows, redone_layers
from symbolic_cost.timing.hardware import comm_time, get_system, times
from symbolic_cost.timing.host import host_step_time, host_time


def step_time_breakdown(cost: ModelCost, system, conventions=conv.DEFAULT) -> dict[str, Expr]:
    """Seconds per iteration on the busiest device, by part (the busiest rank of
    ``models.ranks.Placement``):

    * ``compute``: micro-batches x the stage's roofline times (forward, backward, and the
      forward its recomputed layers redo);
    * ``tensor_comm``: micro-batches x the stage's tensor/sequence collectives (those of
      a recomputed forward again);
    * ``bubble``: ``(p - 1)/v`` more micro-batch slots of the stage, idle or warming up
      (``v`` chunks per rank under the interleaved schedule, else 1);
    * ``pipeline_comm``: the stage's p2p sends; ``data_comm``: the gradient and
      parameter collectives of data parallelism, and of expert data parallelism for
      the routed experts (not overlapped); the all-to-alls of MoE layers are block
      collectives, in ``tensor_comm``;
    * ``host_comm`` and ``host_step`` (only when the training offloads): the offload traffic
      on the host link (``timing.host.host_time``) and the optimizer step on the host
      (``timing.host.host_step_time``), not overlapped with the rest (an upper bound: DeepSpeed
      overlaps part of the traffic with backward);
    * ``total``: their sum.
    """
    system, conventions = get_system(system), conv.get(conventions)
    t = cost.training
    p, n = exact(t.p, "p"), exact(t.micro_batches, "micro_batches")

    def parts(rows, passes=("fwd", "bwd")):
        """(compute, communication) seconds of some rows over some passes."""
        seconds = [times(r, system, conventions) for r in rows]
        return tuple(sum((s[f"{kind}{p_}"] for s in seconds for p_ in passes), Integer(0))
                     for kind in ("t_", "t_comm_"))

    middle = cost.stack[1:-1]                       # every layer group (and T5's middle ends)
    start, end = parts(cost.embedding), parts(cost.head)
    place = cost_placement(cost)
    groups = [(parts(blk), parts([blk[r] for r in recomputed_rows(blk, t.recompute)], ("fwd",)),
               redone_layers(t, place.most(g))) for g, (blk, _) in enumerate(middle)]
    # each group's recomputed layers of the stage redo their forward (and its collectives)
    compute, tensor = (place.busiest(start[i], end[i], [whole[i] for whole, _, _ in groups])
                       + sum((k * redo[i] for _, redo, k in groups), Integer(0)) for i in (0, 1))
    per_micro = compute + tensor
    by_dim = lambda dim: sum((comm_time(c, system, conventions) for d_, c in cost.collectives if d_ == dim),  # noqa: E731
                             Integer(0))
    idle_slots = (p - 1) / t.virtual_stages         # interleaving shrinks the warm-up by v
    out = {"compute": n * compute, "tensor_comm": n * tensor, "bubble": idle_slots * per_micro,
           "pipeline_comm": by_dim("pipeline"), "data_comm": by_dim("data") + by_dim("expert_data")}
    if t.offload != "none":
        out["host_comm"] = host_time(cost, system)
        out["host_step"] = host_step_time(cost, system)
    out["total"] = sum(out.values(), Integer(0))
    return out
