"""A step-by-step simulation of one mixture-of-experts layer under tensor, sequence, data and
expert parallelism: tokens routed to experts on ``ep x etp x edp`` ranks, the dispatch and the
combine, and what each rank sends, receives, computes and stores.

Plain Python on integers and Fractions, written from Megatron-LM's description of its MoE
"parallel folding" and all-to-all token dispatcher (nothing here imports symbolic_cost);
``tests/test_moe.py`` holds the library's expressions against it.

* ``m1 cp d`` ranks (one pipeline stage, Megatron-Core's order tp-cp-dp): rank ``r`` is tensor
  rank ``r % m1`` of context rank ``(r // m1) % cp`` of data replica ``r // (m1 cp)`` and holds
  the ``t = b l / (m1 cp)`` tokens of its sequence shard (context parallelism gives it ``l/cp``
  tokens of each sequence, sequence parallelism ``1/m1`` of those).  The same ranks form the
  expert grid (Megatron-Core's expert rank generator: ``tp = etp``, ``ep``, ``dp = edp``,
  ``cp = 1``): expert-tensor rank ``r % etp``, expert rank ``(r // etp) % ep``, expert-data
  rank ``r // (etp ep)``.
* Expert ``x`` lives on expert rank ``x // (E / ep)``; each of its ``etp`` slices holds
  ``f / etp`` of its width on the rank of that expert-tensor index.
* Each token picks ``k`` experts (a router function); each rank packs, for every expert, the
  rows routed to it (with a capacity, exactly ``ceil(C t k / E)`` rows: padded or dropped) and
  sends each pack to the rank of its expert in its expert group (the all-to-all); the ranks of
  an expert-tensor group then allgather their packs (a ring), regroup the rows by expert (the
  all-to-all dispatcher's sort: the chunks arrive by sender), run the expert slices, and
  reduce-scatter the outputs (a ring); the reverse all-to-all sends each row home.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from fractions import Fraction


def balanced(rank: int, token: int, experts: int, k: int) -> list[int]:
    """Token ``i`` goes to experts ``i k, ..., i k + k - 1`` (mod ``E``): with ``E | t k`` every
    expert receives the same number of rows from every rank."""
    return [(token * k + j) % experts for j in range(k)]


def seeded(seed: int):
    """A router drawing ``k`` distinct experts per token at random (reproducibly)."""
    def route(rank: int, token: int, experts: int, k: int) -> list[int]:
        return random.Random(f"{seed}-{rank}-{token}").sample(range(experts), k)
    return route


@dataclass
class Rank:
    """What one rank did and holds in the layer's forward pass (elements, not bytes)."""

    sent: dict = field(default_factory=dict)        # phase -> elements sent to other ranks
    received: dict = field(default_factory=dict)    # phase -> elements received from other ranks
    rows: int = 0                                   # rows through this rank's expert slices
    regrouped: int = 0                              # elements moved regrouping them by expert
    expert_parameters: int = 0
    optimizer_shard: Fraction = Fraction(0)         # expert parameters whose optimizer state it keeps


def _add(table: dict, phase: str, amount: int) -> None:
    table[phase] = table.get(phase, 0) + amount


def _ring(ranks: list[int], blocks: dict, width: int, phase: str, out: dict, reduce=False) -> None:
    """A ring over ``ranks``: at step ``s`` rank ``i`` sends block ``i - s`` to rank ``i + 1``
    (an allgather: each rank starts with its own block), or partial sums of block ``i - s - 1``
    (a reduce-scatter: each rank ends with its own block summed)."""
    n = len(ranks)
    for step in range(n - 1):
        for i, rank in enumerate(ranks):
            block = blocks[ranks[(i - step - (1 if reduce else 0)) % n]] * width
            _add(out[rank].sent, phase, block)
            _add(out[ranks[(i + 1) % n]].received, phase, block)


def moe_layer(m1, d, ep, etp, experts, k, b, l, e, f, *, gated=True, capacity=None, router=balanced,
              zero=0, distributed_optimizer=False, cp=1) -> dict[int, Rank]:
    """Simulate one MoE layer's forward pass on every rank; see the module docstring.

    Phases: ``dispatch`` (the all-to-all out), ``gather`` (allgather over ``etp``),
    ``scatter`` (reduce-scatter over ``etp``), ``combine`` (the all-to-all home).  The
    optimizer shard follows ZeRO (stage >= 1) or the distributed optimizer over the ``edp``
    ranks that hold the same expert slices.
    """
    world = m1 * cp * d
    assert world % (ep * etp) == 0 and experts % ep == 0 and f % etp == 0 and l % (m1 * cp) == 0
    edp, local = world // (ep * etp), experts // ep
    tokens = b * l // (m1 * cp)
    grid = {r: (r % etp, (r // etp) % ep, r // (etp * ep)) for r in range(world)}
    rank_of = {coords: r for r, coords in grid.items()}
    out = {r: Rank() for r in range(world)}
    packs = {}                                       # (source, destination) -> rows
    for r in range(world):
        per_expert = [0] * experts
        for i in range(tokens):
            chosen = router(r, i, experts, k)
            assert len(set(chosen)) == k
            for x in chosen:
                per_expert[x] += 1
        if capacity is not None:
            per_expert = [math.ceil(capacity * tokens * k / experts)] * experts   # padded or dropped
        j, _, q = grid[r]
        for x, rows in enumerate(per_expert):
            target = rank_of[(j, x // local, q)]
            packs[(r, target)] = packs.get((r, target), 0) + rows
    for (source, target), rows in packs.items():
        if source != target:
            _add(out[source].sent, "dispatch", rows * e)
            _add(out[target].received, "dispatch", rows * e)
            _add(out[target].sent, "combine", rows * e)          # the same rows go home
            _add(out[source].received, "combine", rows * e)
    held = {r: sum(rows for (_, target), rows in packs.items() if target == r) for r in range(world)}
    for r in range(world):
        _, x_rank, q = grid[r]
        group = [rank_of[(j, x_rank, q)] for j in range(etp)]
        if r == group[0]:
            _ring(group, held, e, "gather", out)
            _ring(group, held, e, "scatter", out, reduce=True)
        out[r].rows = sum(held[g] for g in group)
        # the gathered rows arrive sender by sender, each sender's pack in expert order; the
        # grouped products take them expert by expert.  Megatron-Core sorts the chunks wherever the
        # rank holds more than one expert (``num_local_experts > 1``), even where one sender's
        # chunks already are in order: every row is copied once; with one expert, none
        out[r].regrouped = out[r].rows * e if local > 1 else 0
    width = f // etp
    for r in range(world):
        slices = [(x, grid[r][0]) for x in range(experts) if x // local == grid[r][1]]
        out[r].expert_parameters = sum(e * (2 if gated else 1) * width + width * e for _ in slices)
        sharded = zero >= 1 or distributed_optimizer
        out[r].optimizer_shard = Fraction(out[r].expert_parameters, edp if sharded else 1)
    return out


def holders(m1, cp, d, ep, etp) -> dict[str, list[list[int]]]:
    """The groups of a stage's ``m1 cp d`` ranks, each found from what its members hold or share
    (not from a stride): ``tensor`` the ranks of one sequence shard's tokens (same context and
    data rank); ``context`` the ranks of one sequence (same tensor and data rank); ``dense``
    the ranks holding the same dense weights (the same tensor rank: their gradients are
    summed); ``expert`` the ranks exchanging tokens (same expert-tensor and expert-data rank);
    ``expert_tensor`` the ranks holding slices of the same experts;
    ``expert_data`` the ranks holding the same expert slices (their gradients are summed)."""
    world = m1 * cp * d
    place = {r: (r % m1, (r // m1) % cp, r // (m1 * cp)) for r in range(world)}
    grid = {r: (r % etp, (r // etp) % ep, r // (etp * ep)) for r in range(world)}
    local = 1                                          # any E with ep | E: slices are (expert rank, j)
    slices = {r: frozenset((grid[r][1] * local + i, grid[r][0]) for i in range(local)) for r in range(world)}

    def classes(key):
        out = {}
        for r in range(world):
            out.setdefault(key(r), []).append(r)
        return sorted(out.values())
    return {"tensor": classes(lambda r: place[r][1:]), "context": classes(lambda r: (place[r][0], place[r][2])),
            "dense": classes(lambda r: place[r][0]), "expert": classes(lambda r: (grid[r][0], grid[r][2])),
            "expert_tensor": classes(lambda r: grid[r][1:]),
            "expert_data": classes(lambda r: slices[r])}


def expert_flops(rank: Rank, e, f, etp, gated=True) -> int:
    """Matrix FLOPs (``2 m n k``) of a rank's expert slices in forward: ``fc1`` and ``fc2`` on
    every row it holds after the allgather."""
    width = f // etp
    return rank.rows * (2 * e * (2 if gated else 1) * width + 2 * width * e)


def replicated_layer(m1, ep, etp, experts, k, b, l, e, f, *, gated=True, capacity=None, router=balanced) -> dict:
    """Simulate one MoE layer served on ``m1`` tensor ranks without sequence parallelism (vLLM's
    fused MoE): every rank holds the same ``t = b l`` tokens and routes them alike; rank ``r``
    holds slice ``r % etp`` of the experts of expert rank ``r // etp`` (``ep etp = m1``), picks
    the rows routed to them (a capacity pads or drops every expert to ``ceil(C t k / E)``),
    runs its slices, and the ``m1`` partial outputs ``(t, e)`` are summed by a ring allreduce
    (a reduce-scatter, then an allgather, of ``m1`` equal chunks).  Returns ``{rank: Rank}``."""
    assert ep * etp == m1 and experts % ep == 0 and f % etp == 0 and (b * l * e) % m1 == 0
    tokens, local = b * l, experts // ep
    per_expert = [0] * experts
    for i in range(tokens):
        chosen = router(0, i, experts, k)                 # the same choice on every rank
        assert len(set(chosen)) == k
        for x in chosen:
            per_expert[x] += 1
    if capacity is not None:
        per_expert = [math.ceil(capacity * tokens * k / experts)] * experts
    out = {r: Rank() for r in range(m1)}
    width = f // etp
    for r, rank in out.items():
        mine = range((r // etp) * local, (r // etp + 1) * local)
        rank.rows = sum(per_expert[x] for x in mine)
        rank.expert_parameters = local * (e * (2 if gated else 1) * width + width * e)
    chunk = {r: tokens * e // m1 for r in range(m1)}
    _ring(list(range(m1)), chunk, 1, "reduce", out, reduce=True)
    _ring(list(range(m1)), chunk, 1, "reduce", out)
    return out
