"""Pipeline parallelism over ``p`` stages (1F1B, equal stages): what the busiest stage holds,
how many micro-batches it keeps in flight, the bubble, and the sends between stages."""

from __future__ import annotations

from sympy import Eq, Expr, Max, Min, Piecewise, sympify

from symbolic_cost.cost import Collective, collective


def per_stage(p, first, last, layers, last_copy=0) -> Expr:
    """A field on the busiest pipeline stage: everything when ``p = 1``; otherwise the
    layers of one stage plus the larger of the first stage's and the last stage's ends
    (``last_copy``: what the last stage holds only when it is not the first, such as
    its copy of a tied embedding)."""
    p = sympify(p)
    one = first + last + layers
    if p == 1:
        return one
    many = Max(first, last + last_copy) + layers / p
    return many if p.is_number else Piecewise((one, Eq(p, 1)), (many, True))


def in_flight(p, micro_batches) -> Expr:
    """Micro-batches whose activations the first stage holds at once under 1F1B: ``min(p, n)``."""
    return Min(p, micro_batches)


def bubble(p, micro_batches) -> Expr:
    """Idle fraction of a 1F1B step: ``(p - 1) / (n + p - 1)``."""
    return (p - 1) / (micro_batches + p - 1)


def stage_sends(boundary_elements, es, p, micro_batches, stride, conventions) -> list[Collective]:
    """The activation (forward) and gradient (backward) sends of one stage per step:
    one p2p of the ``boundary_elements`` per micro-batch, none when there is one stage;
    neighbouring stages are ``stride`` ranks apart."""
    sends = micro_batches * Min(sympify(p) - 1, 1)
    return [c for pass_ in ("fwd", "bwd")
            for c in collective("p2p", boundary_elements, es, 2, pass_, conventions, repeats=sends, stride=stride)]
