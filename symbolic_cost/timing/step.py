"""Step time of a whole model: seconds per iteration on the busiest device, by part."""

from __future__ import annotations

from sympy import Expr, Integer

from symbolic_cost import conventions as conv
from symbolic_cost.cost import exact
from symbolic_cost.models import ModelCost
from symbolic_cost.models.memory import recomputed_rows, redone_layers
from symbolic_cost.parallel.pipeline import per_stage
from symbolic_cost.timing.hardware import comm_time, get_system, times


def step_time_breakdown(cost: ModelCost, system, conventions=conv.DEFAULT) -> dict[str, Expr]:
    """Seconds per iteration on the busiest device, by part (equal stages):

    * ``compute``: micro-batches x the stage's roofline times (forward, backward, and the
      forward its recomputed layers redo);
    * ``tensor_comm``: micro-batches x the stage's tensor/sequence collectives (those of
      a recomputed forward again);
    * ``bubble``: ``(p - 1)/v`` more micro-batch slots of the stage, idle or warming up
      (``v`` chunks per rank under the interleaved schedule, else 1);
    * ``pipeline_comm``: the stage's p2p sends; ``data_comm``: the gradient and
      parameter collectives of data parallelism (not overlapped);
    * ``total``: their sum.
    """
    system, conventions = get_system(system), conv.get(conventions)
    t = cost.training
    p, n = exact(t.p, "p"), exact(t.micro_batches, "micro_batches")
    depth = exact(cost.architecture.n_layers, "n_layers")

    def parts(blk, rows=None):
        rows = [blk[r] for r in rows] if rows is not None else list(blk)
        compute = sum((times(r, system, conventions)[k] for r in rows for k in ("t_fwd", "t_bwd")), Integer(0))
        comm = sum((times(r, system, conventions)[k] for r in rows for k in ("t_comm_fwd", "t_comm_bwd")),
                   Integer(0))
        return compute, comm

    (s_comp, s_comm), (l_comp, l_comm), (e_comp, e_comm) = parts(cost.embedding), parts(cost.layer), parts(cost.head)
    redone = [times(cost.layer[r], system, conventions) for r in recomputed_rows(cost.layer, t.recompute)]
    layers = redone_layers(t, depth / p)            # of the stage, each redoing ``redone``
    compute = per_stage(p, s_comp, e_comp, depth * l_comp) + layers * sum((r["t_fwd"] for r in redone), Integer(0))
    tensor = per_stage(p, s_comm, e_comm, depth * l_comm) + layers * sum((r["t_comm_fwd"] for r in redone), Integer(0))
    per_micro = compute + tensor
    by_dim = lambda dim: sum((comm_time(c, system, conventions) for d_, c in cost.collectives if d_ == dim),  # noqa: E731
                             Integer(0))
    idle_slots = (p - 1) / t.virtual_stages         # interleaving shrinks the warm-up by v
    out = {"compute": n * compute, "tensor_comm": n * tensor, "bubble": idle_slots * per_micro,
           "pipeline_comm": by_dim("pipeline"), "data_comm": by_dim("data")}
    out["total"] = sum(out.values(), Integer(0))
    return out
