"""Which of the model's layers each pipeline rank holds (``Placement``, as Megatron-Core places
them: ``parallel.splits``), and which of them full recomputation's block method redoes: the
first ``recompute_layers`` of each model chunk (``first_layers``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from sympy import Add, Eq, Expr, Integer, Piecewise

from symbolic_cost.cost import exact
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.models.recipes import sixteen_bit, stack_units
from symbolic_cost.models.training import Training
from symbolic_cost.models.stack import units
from symbolic_cost.parallel.pipeline import per_stage
from symbolic_cost.parallel.splits import chunk_layers, layout_layers
from symbolic_cost.checks import InputError


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

    Under full recomputation's block method, ``redone_chunks`` (enumerated: the layers of each
    group among the first ``recompute_layers`` of each model chunk of every rank,
    ``first_layers``) or ``redone_even`` (the closed form: each group's share of a rank's redone
    layers) say which layers redo their forward in backward; otherwise every layer does.
    """

    p: Expr
    groups: tuple
    rows: tuple | None = None
    every: tuple | None = None        # the counts of every rank, when enumerated
    chunks: tuple | None = None       # the counts of each model chunk of every rank, when enumerated
    redone_chunks: tuple | None = None  # block method, enumerated: the redone counts of each chunk of every rank
    redone_even: tuple | None = None    # block method, closed form: the redone counts of every rank

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
                + _dot(self.counts(rank), per_layer))

    def busiest(self, first, last, per_layer, last_copy=0) -> Expr:
        """``holds`` on the busiest rank (``parallel.pipeline.per_stage`` for an even split)."""
        if self.rows is None:
            return per_stage(self.p, first, last, _dot(self.groups, per_layer), last_copy)
        return self.worst(lambda rank, *_: self.holds(rank, first, last, per_layer, last_copy),
                          Add(first, last, _dot(self.groups, per_layer)))

    def paired(self, first, last, per_layer, last_copy=0) -> Expr:
        """``holds`` of the two stages a DualPipe rank holds, ``r`` and ``p - 1 - r``
        (``parallel.pipeline``), on the busiest rank: an even split's rank 0, with both ends and
        two stages' layers (``p`` is even, at least 2)."""
        if self.rows is None:
            return first + last + last_copy + 2 * _dot(self.groups, per_layer) / self.p
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

    def redone(self, rank: int) -> tuple:
        """The layers of each group whose forward rank ``rank`` runs again in backward: every
        layer it holds but under the block method."""
        if self.redone_chunks is not None:
            return tuple(sum(group, Integer(0)) for group in zip(*self.redone_chunks[rank]))
        return self.counts(rank) if self.redone_even is None else self.redone_even

    def chunk_redone(self, rank: int) -> tuple:
        """``redone`` of each model chunk of rank ``rank`` (enumerated placements)."""
        return self.chunks[rank] if self.redone_chunks is None else self.redone_chunks[rank]

    def busiest_redoing(self, first, last, per_layer, redo) -> Expr:
        """``busiest`` with each redone layer's ``redo`` (one layer's, group by group) added,
        rank by rank (``redone``): the ranks' recomputation differs under the block method."""
        if self.redone_chunks is None and self.redone_even is None:
            return self.busiest(first, last, [w + r for w, r in zip(per_layer, redo)])
        if self.rows is None:               # the closed form: each rank redoes alike
            return self.busiest(first, last, per_layer) + _dot(self.redone_even, redo)
        return maximum(*(self.holds(r, first, last, per_layer) + _dot(self.redone(r), redo) for r, *_ in self.rows))

    def most_redone(self, group: int) -> Expr:
        """The most layers of ``group`` any rank redoes (``most`` but under the block method)."""
        if self.redone_chunks is None:
            return self.most(group) if self.redone_even is None else self.redone_even[group]
        return maximum(*(self.redone(r)[group] for r, *_ in self.rows))

    def all_redone(self, group: int) -> Expr:
        """The layers of ``group`` whose forward runs again, over all ``p`` ranks."""
        if self.redone_chunks is not None:
            return sum((self.redone(r)[group] for r in range(int(self.p))), Integer(0))
        return self.groups[group] if self.redone_even is None else self.p * self.redone_even[group]


def _dot(counts, per_layer) -> Expr:
    """A field over layer groups: ``counts[g]`` layers of ``per_layer[g]`` each."""
    return Add(*(c * v for c, v in zip(counts, per_layer)))      # one flatten, not one a group


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
    decoder, or layer groups that the block method redoes in their order), the even split's
    closed form otherwise."""
    p = exact(p, "p")
    groups = tuple(count for _, count in stack[1:-1])
    split = next((k for k in SPLIT if getattr(t, k) not in (None, False)), None)
    kinds = stack_units(units(arch), t, len(groups))      # kinds that cost the same are one group
    if sixteen_bit(t) and p != 1:     # the 16-bit layers sit on the first and last ranks
        split = split or "first_layers_16bit"
    if split in SPLIT[2:] + ("first_layers_16bit",) and not p.is_number:
        raise InputError(f"{split} needs a numeric p, got p={p}", split)
    block = t.recompute == "full" and t.recompute_method == "block"
    ordered = block and len(groups) > 1 and kinds is not None       # the first layers of a chunk: which kinds
    if not p.is_number or (p == 1 and not ordered) or not (split or (len(groups) > 1 and kinds is not None)):
        return _even(p, groups, t, block)
    if kinds is None:
        raise InputError(f"{split}: uneven pipeline ranks need a model that records which layer is which (one kind of layer, dense and "
                         "MoE layers, a window_pattern, an encoder-decoder)", split)
    depth = max(i for _, i in kinds) + 1
    count = lambda held: tuple(sum(1 for g2, i in kinds if g2 == g and i in held) for g in range(len(groups)))  # noqa: E731
    held = rank_layers(t, depth, int(p))
    chunks = [tuple(count(set(c)) for c in rank) for rank in held]
    every = [tuple(map(sum, zip(*rank))) for rank in chunks]
    if not (split or ordered) and all(c == tuple(n / p for n in groups) for c in every):
        return _even(p, groups, t, block)
    redone = [tuple(first_layers(kinds, c, len(groups), t.recompute_layers) for c in rank) for rank in held] \
        if block else None
    rows, seen = [], set()
    for r, counts in enumerate(every):
        kind = (r == 0, r == p - 1, counts, chunks[r], redone and redone[r])
        if kind not in seen:
            seen.add(kind)
            rows.append((r, *kind[:3]))
    return Placement(p, groups, tuple(rows), tuple(every), tuple(chunks), redone and tuple(redone))


def _even(p, groups: tuple, t: Training, block: bool) -> Placement:
    """The even split's closed form; under the block method each of a rank's ``v`` model chunks
    redoes ``min(N, n_layers/(p v))`` layers, shared among the groups as the rank holds them."""
    if not block:
        return Placement(p, groups)
    v, depth = exact(t.virtual_stages, "virtual_stages"), sum(groups, Integer(0))
    per_chunk = minimum(exact(t.recompute_layers, "recompute_layers"), depth / (p * v))
    return Placement(p, groups, redone_even=tuple(v * per_chunk * c / depth for c in groups))


def first_layers(kinds, held, groups: int, n) -> tuple:
    """The units of each of ``groups`` groups among the first ``n`` layers of a model chunk that
    holds the layers ``held`` (``kinds``: ``(group, layer)`` of every unit, in model order).
    Megatron-LM's block method checkpoints these: each ``TransformerBlock`` (one model chunk)
    redoes its first ``recompute_num_layers`` layers, all of them where it holds fewer.  A run of
    ``k`` units of one group from ``a`` layers into the chunk counts ``min(max(n - a, 0), k)``,
    so ``n`` may be a symbol.

    >>> first_layers([(0, 0), (0, 1), (1, 2), (1, 3), (1, 4)], range(5), 2, 3)
    (2, 1)
    >>> first_layers([(0, 0), (1, 1), (1, 2), (1, 3)], range(1, 4), 2, 5)
    (0, 3)
    """
    counts = [Integer(0)] * groups
    start = min(held, default=0)
    at = [(i - start, g) for g, i in kinds if i in held]
    for g, run in groupby(at, key=lambda unit: unit[1]):
        run = list(run)
        counts[g] += minimum(maximum(n - run[0][0], 0), len(run))
    return tuple(counts)


def rank_layers(t: Training, depth: int, p: int) -> list[list[range]]:
    """The indices of the layers of each model chunk of each rank, Megatron-Core's placement
    (``parallel.splits.chunk_layers``) of ``t``'s stages, virtual stages and slots, or of its layout
    (``parallel.splits.layout_layers``)."""
    if t.pipeline_layout is not None:
        return layout_layers(t.pipeline_layout, depth, p)
    return chunk_layers(depth, p, t.virtual_stages, t.first_stage_layers, t.last_stage_layers,
                        t.embedding_in_split, t.loss_in_split)


