"""Memory per pipeline rank: the layers each rank holds (even or uneven stages), the
micro-batches it keeps in flight under its schedule, and the activation bytes that makes;
``busiest_activation_bytes`` is ``ModelCost.activation_bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from sympy import Eq, Expr, Integer, Piecewise

from symbolic_cost.cost import exact
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.models.memory import stage_kept_bytes
from symbolic_cost.models.recipes import sixteen_bit, stack_units
from symbolic_cost.models.training import Training, element_bytes
from symbolic_cost.models.stack import units
from symbolic_cost.parallel.pipeline import chunk_in_flight, per_stage
from symbolic_cost.parallel.splits import chunk_layers, layout_layers
from symbolic_cost.checks import InputError
from symbolic_cost.trees import remembered_on


def stage_kept(stack, t: Training, counts, tokens_bytes) -> Expr:
    """Bytes one rank's ``counts`` layers of each layer group (``stack[1:-1]``) keep for one
    micro-batch; ``tokens_bytes`` of a layer's input (a T5 decoder layer's: its own ``l_dec``
    tokens, ``layer_input_bytes``)."""
    return sum((stage_kept_bytes(blk, t, c, layer_input_bytes(blk, tokens_bytes, t.l))
                for (blk, _), c in zip(stack[1:-1], counts)), exact(0))


def layer_input_bytes(block, tokens_bytes, l) -> Expr:
    """Bytes of a layer's input: ``tokens_bytes`` of ``l`` tokens, scaled to the block's own
    sequence (a T5 decoder over ``l_dec`` tokens)."""
    return tokens_bytes * block.dims["l"] / l if "l" in block.dims else tokens_bytes


def boundary_elements(cost) -> Expr:
    """Elements one micro-batch sends across a pipeline stage boundary on one device: the hidden
    states ``b l/s1 e``; an encoder-decoder's decoder stages send the encoder's output with the
    decoder's hidden states, ``b (l + l_dec)/s1 e`` (Megatron-LM), the larger."""
    t, arch = cost.training, cost.architecture
    tokens = t.l + t.decoder_tokens if arch.encoder_decoder else t.l
    return t.b * tokens / (exact(t.s1, "s1") * exact(getattr(t, "cp", 1), "cp")) * arch.e   # a CP rank's l/cp


@dataclass(frozen=True)
class Placement:
    """Which of the model's layers each pipeline rank holds (Megatron-LM places them in order:
    the first ``n_layers/p`` on rank 0, ...; with ``virtual_stages`` chunks, chunk ``c`` of
    ``n_layers/(p v)`` layers on rank ``c mod p``; uneven first and last stages, the embedding and
    the loss counted as layers, as ``parallel.splits.chunk_layers``).

    ``groups``: the layers of each layer group of the stack; ``rows``: ``(rank, first, last,
    counts)`` for each distinct kind of rank, the lowest-numbered of each (it holds the most
    micro-batches in flight), ``counts`` its layers of each group, and ``every`` the counts of
    every rank; both ``None`` when every rank holds ``1/p`` of every group (the even split's
    closed form, symbolic in ``p``).
    """

    p: Expr
    groups: tuple
    rows: tuple | None = None
    every: tuple | None = None        # the counts of every rank, when enumerated
    chunks: tuple | None = None       # the counts of each model chunk of every rank, when enumerated

    def ranks(self) -> tuple:
        """The ranks that can be the busiest (``rows``; an even split: the first and the last)."""
        if self.rows is not None:
            return self.rows
        even = tuple(c / self.p for c in self.groups)
        return (0, True, False, even), (self.p - 1, False, True, even)

    def worst(self, value, one) -> Expr:
        """The largest ``value(rank, first, last, counts)`` over ``ranks``; ``one`` when ``p = 1``
        (a Piecewise on ``p = 1`` for a symbolic ``p``)."""
        if self.p == 1:
            return one
        many = maximum(*(value(*row) for row in self.ranks()))
        return many if self.p.is_number else Piecewise((one, Eq(self.p, 1)), (many, True))

    def holds(self, rank, first, last, per_layer, last_copy=0) -> Expr:
        """A field on rank ``rank``: ``first`` on rank 0, ``last`` (and ``last_copy``, what only a
        last rank that is not the first holds) on rank ``p - 1``, ``per_layer[g]`` for each of
        its layers of group ``g`` (``counts``)."""
        is_first, is_last = rank == 0, rank == self.p - 1
        return ((first if is_first else 0) + (last if is_last else 0) + (last_copy if is_last and not is_first else 0)
                + sum((c * v for c, v in zip(self.counts(rank), per_layer)), exact(0)))

    def busiest(self, first, last, per_layer, last_copy=0) -> Expr:
        """``holds`` on the busiest rank (``parallel.pipeline.per_stage`` for an even split)."""
        if self.rows is None:
            return per_stage(self.p, first, last, sum((c * v for c, v in zip(self.groups, per_layer)), exact(0)),
                             last_copy)
        return self.worst(lambda rank, *_: self.holds(rank, first, last, per_layer, last_copy),
                          first + last + sum((c * v for c, v in zip(self.groups, per_layer)), exact(0)))

    def paired(self, first, last, per_layer, last_copy=0) -> Expr:
        """``holds`` of the two stages a DualPipe rank holds, ``r`` and ``p - 1 - r``
        (``parallel.pipeline``), on the busiest rank: an even split's rank 0, with both ends and
        two stages' layers (``p`` is even, at least 2)."""
        if self.rows is None:
            return first + last + last_copy + 2 * sum((c * v for c, v in zip(self.groups, per_layer)), exact(0)) / self.p
        return maximum(*(self.holds(r, first, last, per_layer, last_copy)
                         + self.holds(self.p - 1 - r, first, last, per_layer, last_copy) for r in range(self.p // 2)))

    def most(self, group: int) -> Expr:
        """The most layers of ``group`` any rank holds (``count/p`` for an even split)."""
        if self.rows is None:
            return self.groups[group] / self.p
        return max(counts[group] for *_, counts in self.rows)

    def counts(self, rank: int) -> tuple:
        """The layers of each group rank ``rank`` holds."""
        return tuple(c / self.p for c in self.groups) if self.every is None else self.every[rank]


def placed_by_p(arch, policy: dict) -> bool:
    """Whether the layers a rank holds depend on ``p`` beyond ``1/p`` of each group: layers of
    several recorded kinds (``units``), or uneven first and last stages in the ``Training``
    fields ``policy`` (``SPLIT``: stage sizes, the embedding or the loss counted as a layer; the
    first and last layers kept 16-bit, ``models.recipes.precision_groups``)."""
    kinds = units(arch)
    return (kinds is not None and len({g for g, _ in kinds}) > 1) or any(
        policy.get(k) not in (None, False, 0) for k in SPLIT + ("first_layers_16bit", "last_layers_16bit"))


SPLIT = ("first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split", "pipeline_layout")
"""The ``Training`` fields that make pipeline ranks differ beyond ``1/p`` of each layer group."""


def placement(arch, t: Training, stack, p) -> Placement:
    """Where ``arch``'s layers sit on ``p`` pipeline ranks (``Placement``): enumerated when the
    ranks differ (uneven stages, the embedding or the loss counted as a layer, layer groups not
    spread evenly, as DeepSeek's dense layers before its experts or a T5's encoder before its
    decoder), the even split's closed form otherwise."""
    p = exact(p, "p")
    groups = tuple(count for _, count in stack[1:-1])
    split = next((k for k in SPLIT if getattr(t, k) not in (None, False)), None)
    kinds = stack_units(units(arch), t, len(groups))      # kinds that cost the same are one group
    if sixteen_bit(t) and p != 1:     # the 16-bit layers sit on the first and last ranks
        split = split or "first_layers_16bit"
    if split in SPLIT[2:] + ("first_layers_16bit",) and not p.is_number:
        raise InputError(f"{split} needs a numeric p, got p={p}", split)
    if p == 1 or not p.is_number or not (split or (len(groups) > 1 and kinds is not None)):
        return Placement(p, groups)
    if kinds is None:
        raise InputError(f"{split}: uneven pipeline ranks need a model that records which layer is which (one kind of layer, dense and "
                         "MoE layers, a window_pattern, an encoder-decoder)", split)
    depth = max(i for _, i in kinds) + 1
    count = lambda held: tuple(sum(1 for g2, i in kinds if g2 == g and i in held) for g in range(len(groups)))  # noqa: E731
    chunks = [tuple(count(set(c)) for c in rank) for rank in rank_layers(t, depth, int(p))]
    every = [tuple(map(sum, zip(*rank))) for rank in chunks]
    if not split and all(c == tuple(n / p for n in groups) for c in every):
        return Placement(p, groups)
    rows, seen = [], set()
    for r, counts in enumerate(every):
        kind = (r == 0, r == p - 1, counts, chunks[r])
        if kind not in seen:
            seen.add(kind)
            rows.append((r, *kind[:3]))
    return Placement(p, groups, tuple(rows), tuple(every), tuple(chunks))


def rank_layers(t: Training, depth: int, p: int) -> list[list[range]]:
    """The indices of the layers of each model chunk of each rank, Megatron-Core's placement
    (``parallel.splits.chunk_layers``) of ``t``'s stages, virtual stages and slots, or of its layout
    (``parallel.splits.layout_layers``)."""
    if t.pipeline_layout is not None:
        return layout_layers(t.pipeline_layout, depth, p)
    return chunk_layers(depth, p, t.virtual_stages, t.first_stage_layers, t.last_stage_layers,
                        t.embedding_in_split, t.loss_in_split)


def _rank_activations(cost, held, first, last, counts, chunks=None) -> Expr:
    """Activation bytes of a pipeline rank holding ``held`` micro-batches' worth of its layers
    (``counts`` of each group), with the embedding if it is the ``first`` rank and the head if
    it is the ``last``; ``chunks``: ``(micro-batches, counts)`` of each of its model chunks, when
    they differ (``_chunks``), for its layers instead."""
    t, layer = cost.training, cost.layer
    p = exact(t.p, "p")
    es = element_bytes(t.precision)
    tokens_bytes = t.b * t.l / exact(t.s1, "s1") * cost.architecture.e * es
    layers = held * stage_kept(cost.stack, t, counts, tokens_bytes) if chunks is None else sum(
        (k * stage_kept(cost.stack, t, c, tokens_bytes) for k, c in chunks), exact(0))
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
    p, n = exact(cost.training.p, "p"), exact(cost.training.micro_batches, "micro_batches")
    if not (p.is_number and isinstance(rank, int) and 0 <= rank < p):
        raise InputError(f"rank must be an integer in [0, p) with a numeric p, got rank={rank!r}, p={p}")
    schedule = cost.training.pipeline_schedule()
    if schedule.name == "dualpipe":
        return _dualpipe_activations(cost, cost_placement(cost), rank)
    held, place = schedule.in_flight(p, n, rank), cost_placement(cost)
    return _rank_activations(cost, held, rank == 0, rank == p - 1, place.counts(rank), _chunks(place, schedule, n, rank))


def _chunks(place: Placement, schedule, n, rank):
    """``(micro-batches in flight, counts)`` of each model chunk of rank ``rank`` under the
    interleaved schedule when the placement is enumerated (its chunks may differ: the embedding's
    or the loss's slot, uneven stages, layer groups), else ``None``."""
    if place.chunks is None or schedule.name != "interleaved":
        return None
    return list(zip(chunk_in_flight(int(place.p), n, schedule.v, rank), place.chunks[rank]))


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
        return _rank_activations(cost, p + 1, False, False, place.counts(0))
    counts = tuple(maximum(a, b) for a, b in zip(place.counts(rank), place.counts(p - 1 - rank)))
    middle = Piecewise((1, Eq(p, 2)), (0, True)) if not p.is_number else int(min(rank, p - 1 - rank) == p // 2 - 1)
    kept = _rank_activations(cost, p + middle, False, False, counts)
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
    p = exact(cost.training.p, "p")
    if not (p.is_number and isinstance(rank, int) and 0 <= rank < p):
        raise InputError(f"rank must be an integer in [0, p) with a numeric p, got rank={rank!r}, p={p}")
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
    t = cost.training                 # every field but the two it does not read, which a search varies
    read = tuple(getattr(t, f.name) for f in fields(t) if f.name not in ("zero", "offload"))
    return remembered_on(_ACTIVATIONS, cost.stack, (cost.architecture, read), lambda: _busiest_activations(cost))


_ACTIVATIONS: dict = {}
"""``busiest_activation_bytes`` by stack and training (ZeRO stage and offload aside)."""


def _busiest_activations(cost) -> Expr:
    p, n = exact(cost.training.p, "p"), exact(cost.training.micro_batches, "micro_batches")
    schedule, place = cost.training.pipeline_schedule(), cost_placement(cost)
    if schedule.name == "dualpipe":       # an even split: an end rank or a middle one; else every pair
        ranks = [0, "middle"] if place.rows is None else range(int(p) // 2)
        return maximum(*(_dualpipe_activations(cost, place, r) for r in ranks))
    one = _rank_activations(cost, schedule.in_flight(1, n), True, True, place.groups)
    return place.worst(lambda rank, first, last, counts: _rank_activations(
        cost, schedule.in_flight(p, n, rank), first, last, counts, _chunks(place, schedule, n, rank)), one)


def cost_placement(cost) -> Placement:
    """The ``Placement`` of a ``ModelCost``'s layers."""
    return placement(cost.architecture, cost.training, cost.stack, cost.training.p)
