"""What one serving device holds, shared by the throughput and the peak (``inference.throughput``,
``inference.peak``): the busiest device's weights, and a memory written as a part fixed and a
part per sequence of the batch.
"""

from __future__ import annotations

from sympy import Expr

from symbolic_cost.checks import InputError
from symbolic_cost.inference.phases import Phase
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.placement import placement
from symbolic_cost.models.ranks import tied_copy
from symbolic_cost.models.training import Training
from symbolic_cost.parallel.splits import engine_layout, uneven_stages


def busiest_weights(arch: Architecture, phase: Phase) -> Expr:
    """Weight bytes on the busiest device (``models.placement.Placement``): a stage's layers and its
    end, the last stage with its own copy of a tied word table; stages of unequal layers where ``p``
    does not divide them, as an engine splits them (``parallel.splits.engine_layout``)."""
    stack, p = phase.stack, phase.serving.p
    copy = tied_copy(arch, stack[0][0]) if p != 1 else 0
    depth = arch.depth
    uneven = uneven_stages(depth, p) is not None
    split = Training(p=p, pipeline_layout=engine_layout(int(depth), int(p))) if uneven else Training(p=p)
    return placement(arch, split, stack, p).busiest(
        stack[0][0].total("weights"), stack[-1][0].total("weights"), [blk.total("weights") for blk, _ in stack[1:-1]],
        copy)


def affine_in_batch(expr: Expr, b, what: str) -> tuple[Expr, Expr]:
    """``(a_0, a_1)`` of an expression ``a_0 + b a_1`` in the batch; refused when it is not one
    (a mixture of experts reads more experts as the batch grows)."""
    zero = expr.subs(b, 0)
    one = expr.subs(b, 1) - zero
    if (expr.subs(b, 2) - zero - 2 * one).equals(0) is False:
        raise InputError(f"{what} is not affine in the batch b (a mixture of experts reads the experts its "
                         f"tokens reach): solve it from the expressions of inference_cost with b symbolic", "b")
    return zero, one
