"""Memory per pipeline rank: the layers each rank holds (even or uneven stages), the
micro-batches it keeps in flight under its schedule, and the activation bytes that makes;
``busiest_activation_bytes`` is ``ModelCost.activation_bytes``.
"""

from __future__ import annotations

from sympy import Eq, Expr, Integer, Piecewise

from symbolic_cost.cost import exact
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.models.memory import stage_kept_bytes
from symbolic_cost.models.training import Training, element_bytes
from symbolic_cost.parallel.pipeline import stage_layers
from symbolic_cost.checks import InputError


def stage_kept(stack, t: Training, share, tokens_bytes) -> Expr:
    """Bytes one rank's ``share`` (``1/p`` of the layers, or its fraction of uneven stages)
    of each layer group keeps for one micro-batch."""
    return sum((stage_kept_bytes(blk, t, count * share, tokens_bytes) for blk, count in stack[1:-1]), exact(0))


def layer_shares(t: Training, stack, depth, p):
    """The fractions of the layers on the first, a middle and the last pipeline rank:
    ``1/p`` each, or those of ``first_stage_layers`` / ``last_stage_layers``."""
    if t.first_stage_layers is None and t.last_stage_layers is None:
        return (1 / p,) * 3
    if len(stack) != 3:
        raise InputError("first_stage_layers and last_stage_layers need a model of one kind of layer")
    return tuple(x / depth for x in stage_layers(depth, p, t.first_stage_layers, t.last_stage_layers))


def busiest_share(t: Training, stack, depth, p):
    """The largest fraction of the layers on one rank (numbers, or ``1/p``)."""
    shares = layer_shares(t, stack, depth, p)
    return shares[0] if len(set(shares)) == 1 else max(shares)


def _rank_activations(cost, held, first, last) -> Expr:
    """Activation bytes of a pipeline rank holding ``held`` micro-batches' worth of its layers,
    with the embedding if it is the ``first`` rank and the head if it is the ``last``."""
    t, layer = cost.training, cost.layer
    p = exact(t.p, "p")
    es = element_bytes(t.precision)
    tokens_bytes = t.b * t.l / exact(t.s1, "s1") * cost.architecture.e * es
    depth = sum((count for _, count in cost.stack[1:-1]), exact(0))
    share = layer_shares(t, cost.stack, depth, p)[0 if first else 2 if last else 1]
    per_micro = stage_kept(cost.stack, t, share, tokens_bytes)
    if first:
        per_micro += cost.embedding.total("act_buffer")
    kept = held * per_micro + (held * cost.head.total("act_buffer") if last else 0)
    if layer.conventions.deallocate_pipeline_outputs or (first and last):
        return kept
    return kept + _outputs_sent(held, t.virtual_stages, p, exact(t.micro_batches, "micro_batches"), last) * tokens_bytes


def _outputs_sent(held, v, p, n, last) -> Expr:
    """Outputs a rank has sent and still keeps at its peak when they are not deallocated: one
    per model chunk in flight (``held x v``), except that the last rank's last chunk sends
    none: with ``v`` chunks it keeps those of its first ``v - 1``, ``(v - 1) p``, plus one more
    once a second round of micro-batches overlaps the first (``n > p``)."""
    if not last:
        return held * v
    return minimum(held * v, (v - 1) * p + minimum(n - p, 1)) if v != 1 else Integer(0)


def rank_activation_bytes(cost, rank: int) -> Expr:
    """Activation bytes pipeline rank ``rank`` (0-based, numbers only) keeps at its peak:
    its in-flight micro-batches (``Schedule.in_flight``) x its layers' kept bytes, plus the
    embedding's on the first rank, the head's (logits, loss) on the last, and the outputs
    it sent when they are not deallocated.

    >>> from symbolic_cost.models.config import preset
    >>> from symbolic_cost.models import Training, model_cost
    >>> cost = model_cost(preset("gpt2"), Training(b=1, l=1024, p=4, micro_batches=8))
    >>> [rank_activation_bytes(cost, r) > 0 for r in range(4)]
    [True, True, True, True]
    """
    p, n = exact(cost.training.p, "p"), exact(cost.training.micro_batches, "micro_batches")
    if not (p.is_number and isinstance(rank, int) and 0 <= rank < p):
        raise InputError(f"rank must be an integer in [0, p) with a numeric p, got rank={rank!r}, p={p}")
    held = cost.training.pipeline_schedule().in_flight(p, n, rank)
    return _rank_activations(cost, held, rank == 0, rank == p - 1)


def busiest_activation_bytes(cost) -> Expr:
    """The largest ``rank_activation_bytes`` over the ranks, for any ``p``: the first or the last
    rank (a middle rank holds no more micro-batches than the first and neither end), or with
    uneven stages also the second (the middle rank with the most in flight)."""
    p, n = exact(cost.training.p, "p"), exact(cost.training.micro_batches, "micro_batches")
    schedule = cost.training.pipeline_schedule()
    one = _rank_activations(cost, schedule.in_flight(1, n), True, True)
    if p == 1:
        return one
    ranks = [_rank_activations(cost, schedule.in_flight(p, n, 0), True, False),
             _rank_activations(cost, schedule.in_flight(p, n, p - 1), False, True)]
    t = cost.training
    if (t.first_stage_layers, t.last_stage_layers) != (None, None) and p > 2:
        ranks.append(_rank_activations(cost, schedule.in_flight(p, n, 1), False, False))
    many = maximum(*ranks)
    return many if p.is_number else Piecewise((one, Eq(p, 1)), (many, True))
