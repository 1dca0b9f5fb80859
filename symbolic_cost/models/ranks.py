"""Memory per pipeline rank: the layers each rank holds (``models.placement``), the
micro-batches it keeps in flight under its schedule, and the activation bytes that makes;
``busiest_activation_bytes`` is ``ModelCost.activation_bytes``.
"""

from __future__ import annotations


from sympy import Eq, Expr, Integer, Piecewise

from symbolic_cost.cost import exact
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.models.memory import stage_kept_bytes
from symbolic_cost.models.placement import Placement, placement
from symbolic_cost.models.training import Training, element_bytes
from symbolic_cost.parallel.pipeline import chunk_in_flight
from symbolic_cost.checks import InputError
from symbolic_cost.models.whole_model import model_cost_of
from symbolic_cost.trees import remembered_on


def stage_kept(stack, t: Training, counts, redone, tokens_bytes) -> Expr:
    """Bytes one rank's ``counts`` layers of each layer group (``stack[1:-1]``), ``redone`` of
    them recomputed (``Placement.redone``), keep for one micro-batch; ``tokens_bytes`` of a
    layer's input (a T5 decoder layer's: its own ``l_dec`` tokens, ``layer_input_bytes``)."""
    return sum((stage_kept_bytes(blk, t, c, layer_input_bytes(blk, tokens_bytes, t.l), r)
                for (blk, _), c, r in zip(stack[1:-1], counts, redone)), exact(0))


def layer_input_bytes(block, tokens_bytes, l) -> Expr:
    """Bytes of a layer's input: ``tokens_bytes`` of ``l`` tokens, scaled to the block's own
    sequence (a T5 decoder over ``l_dec`` tokens)."""
    return tokens_bytes * block.dims["l"] / l if "l" in block.dims else tokens_bytes


def layer_tokens_bytes(cost) -> Expr:
    """Bytes of one layer's input on one device for one micro-batch: ``b l/s1 e`` elements of
    the activations' size (what a full recomputation keeps of each checkpoint)."""
    t = cost.training
    return t.b * t.l / exact(t.s1, "s1") * cost.architecture.e * element_bytes(t.precision)


def boundary_elements(cost) -> Expr:
    """Elements one micro-batch sends across a pipeline stage boundary on one device: the hidden
    states ``b l/s1 e``; an encoder-decoder's decoder stages send the encoder's output with the
    decoder's hidden states, ``b (l + l_dec)/s1 e`` (Megatron-LM), the larger."""
    t, arch = cost.training, cost.architecture
    tokens = t.l + t.decoder_tokens if arch.encoder_decoder else t.l
    return t.b * tokens / (exact(t.s1, "s1") * exact(getattr(t, "cp", 1), "cp")) * arch.e   # a CP rank's l/cp


def _rank_activations(cost, held, first, last, counts, redone, chunks=None) -> Expr:
    """Activation bytes of a pipeline rank holding ``held`` micro-batches' worth of its layers
    (``counts`` of each group, ``redone`` of them recomputed), with the embedding if it is the
    ``first`` rank and the head if it is the ``last``; ``chunks``: ``(micro-batches, counts,
    redone)`` of each of its model chunks, when they differ (``_chunks``), for its layers instead."""
    t, layer = cost.training, cost.layer
    p = exact(t.p, "p")
    es = element_bytes(t.precision)
    tokens_bytes = layer_tokens_bytes(cost)
    layers = held * stage_kept(cost.stack, t, counts, redone, tokens_bytes) if chunks is None else sum(
        (k * stage_kept(cost.stack, t, c, r, tokens_bytes) for k, c, r in chunks), exact(0))
    sent = boundary_elements(cost) * es
    kept = layers + (held * cost.embedding.total("act_buffer") if first else 0) + (
        held * cost.head.total("act_buffer") if last else 0)
    if layer.conventions.deallocate_pipeline_outputs or (first and last):
        return kept
    return kept + _outputs_sent(held, t.virtual_stages, p, exact(t.micro_batches, "micro_batches"), last) * sent


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
    t = model_cost_of(cost).training
    p, n = exact(t.p, "p"), exact(t.micro_batches, "micro_batches")
    if not (p.is_number and isinstance(rank, int) and 0 <= rank < p):
        raise InputError(f"rank must be an integer in [0, p) with a numeric p, got rank={rank!r}, p={p}", "rank")
    schedule = cost.training.pipeline_schedule()
    if schedule.name == "dualpipe":
        return _dualpipe_activations(cost, cost_placement(cost), rank)
    held, place = schedule.in_flight(p, n, rank), cost_placement(cost)
    return _rank_activations(cost, held, rank == 0, rank == p - 1, place.counts(rank), place.redone(rank),
                             _chunks(place, schedule, n, rank))


def _chunks(place: Placement, schedule, n, rank):
    """``(micro-batches in flight, counts, redone)`` of each model chunk of rank ``rank`` under the
    interleaved schedule when the placement is enumerated (its chunks may differ: the embedding's
    or the loss's slot, uneven stages, layer groups), else ``None``."""
    if place.chunks is None or schedule.name != "interleaved":
        return None
    return list(zip(chunk_in_flight(int(place.p), n, schedule.v, rank), place.chunks[rank], place.chunk_redone(rank)))


def _dualpipe_activations(cost, place: Placement, rank) -> Expr:
    """Activation bytes of DualPipe rank ``rank``, which holds stage ``rank`` of one direction and
    stage ``p - 1 - rank`` of the other (``parallel.pipeline``), as the timetable of
    ``tests/simulate_dualpipe.py`` runs it: ``p`` stage chunks at its peak, ``p + 1`` on the two
    middle ranks (each counted as the larger of its two stages' layers); the end ranks hold both
    ends, the embedding's for at most ``p`` chunks (the direction entering there) and the head's
    for one (the other direction's loss backward follows its forward).  ``rank``: a number, or
    ``"middle"`` for a middle rank of a symbolic ``p``."""
    p = place.p
    if rank == "middle":
        return _rank_activations(cost, p + 1, False, False, place.counts(0), place.redone(0))
    counts = tuple(maximum(a, b) for a, b in zip(place.counts(rank), place.counts(p - 1 - rank)))
    redone = tuple(minimum(a, b) for a, b in zip(place.redone(rank), place.redone(p - 1 - rank)))
    middle = Piecewise((1, Eq(p, 2)), (0, True)) if not p.is_number else int(min(rank, p - 1 - rank) == p // 2 - 1)
    kept = _rank_activations(cost, p + middle, False, False, counts, redone)
    if rank == 0 or rank == p - 1:
        kept += p * cost.embedding.total("act_buffer") + cost.head.total("act_buffer")
    return kept


def tied_copy(arch, start) -> Expr:
    """Weights the last pipeline stage holds only when it is not the first: its own copy of a
    tied word embedding (the word table only; ``start`` is the embedding block)."""
    return start["word_embeddings"].weights if arch.tied and arch.lm_head else Integer(0)


def rank_parameters(cost, rank: int) -> Expr:
    """Parameters on one device of pipeline rank ``rank`` (0-based, numbers only): its layers
    (``Placement.counts``), the embedding on the first rank, the head on the last (with its own
    copy of a tied word table when the two differ), under DualPipe of both its stages ``rank`` and
    ``p - 1 - rank``; ``ModelCost.parameters_per_device`` is the largest.  1-byte weights over
    the element size, as ``model_cost`` counts them."""
    p = exact(model_cost_of(cost).training.p, "p")
    if not (p.is_number and isinstance(rank, int) and 0 <= rank < p):
        raise InputError(f"rank must be an integer in [0, p) with a numeric p, got rank={rank!r}, p={p}", "rank")
    es = element_bytes(cost.training.precision)
    weights = lambda blk: blk.total("weights") / es  # noqa: E731
    place = cost_placement(cost)
    stages = (rank, p - 1 - rank) if cost.training.schedule == "dualpipe" else (rank,)   # DualPipe's two
    return sum((place.holds(r, weights(cost.embedding), weights(cost.head), [weights(blk) for blk, _ in cost.stack[1:-1]],
                            tied_copy(cost.architecture, cost.embedding) / es) for r in stages), exact(0))


def busiest_activation_bytes(cost) -> Expr:
    """The largest ``rank_activation_bytes`` over the ranks that can be the busiest
    (``Placement.ranks``: an even split's first and last rank, a middle rank holding no more
    micro-batches than the first and neither end; else the lowest-numbered rank of each kind;
    DualPipe: ``_dualpipe_activations`` of each pair of stages)."""
    t = cost.training                 # every setting but the two it does not read, which a search varies
    read = tuple(v for k, v in t.flat().items() if k not in ("zero", "offload"))
    return remembered_on(_ACTIVATIONS, cost.stack, (cost.architecture, read), lambda: _busiest_activations(cost))


_ACTIVATIONS: dict = {}
"""``busiest_activation_bytes`` by stack and training (ZeRO stage and offload aside)."""


def _busiest_activations(cost) -> Expr:
    p, n = exact(cost.training.p, "p"), exact(cost.training.micro_batches, "micro_batches")
    schedule, place = cost.training.pipeline_schedule(), cost_placement(cost)
    if schedule.name == "dualpipe":       # an even split: an end rank or a middle one; else every pair
        ranks = [0, "middle"] if place.rows is None else range(int(p) // 2)
        return maximum(*(_dualpipe_activations(cost, place, r) for r in ranks))
    alone = place.redone(0) if p.is_number else tuple(r.xreplace({p: 1}) for r in place.redone(0))    # p = 1
    one = _rank_activations(cost, schedule.in_flight(1, n), True, True, place.groups, alone)
    return place.worst(lambda rank, first, last, counts: _rank_activations(
        cost, schedule.in_flight(p, n, rank), first, last, counts, place.redone(rank), _chunks(place, schedule, n, rank)),
        one)


def cost_placement(cost) -> Placement:
    """The ``Placement`` of a ``ModelCost``'s layers."""
    return placement(cost.architecture, cost.training, cost.stack, cost.training.p)
