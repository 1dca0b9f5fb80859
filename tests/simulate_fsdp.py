"""Step-by-step simulation of FSDP / HSDP: ZeRO-3 over shard groups, replicated across groups.

Plain Python on integers, written from the algorithm (nothing here imports symbolic_cost);
``tests/test_fsdp.py`` holds the library's expressions against it.

``d`` ranks form a mesh of ``d/shard`` replica groups by ``shard`` positions (rank
``q shard + i``: replica ``q``, position ``i``; PyTorch's ``init_device_mesh(..., (d/shard,
shard))`` and torchtitan's ``dp_replicate`` outside ``dp_shard``).  The model is a list of
units (FSDP's ``fully_shard`` modules, run in order), each a flat vector of weights cut into
``shard`` equal chunks; position ``i`` holds chunk ``i`` of every unit.  Per micro-batch:

* forward, unit by unit: its weights are all-gathered in the shard group (a ring, every
  value really moved) unless already gathered; the next unit is prefetched (gathered before
  this one computes); after its forward a unit is freed again (``reshard_after_forward``);
* backward, in reverse: gathered again if freed, the previous unit prefetched; every rank makes
  a full local gradient of the unit, the unit is freed, the gradient is reduce-scattered in the
  shard group (a ring), then each rank's reduced chunk is all-reduced across the replica
  group (ring reduce-scatter then ring all-gather) and added to the rank's gradient shard.

Every message is counted in bytes per sending rank; the gathered elements are tracked over the
step.  At the end each rank's gradient shard is checked against the sum of every rank's and
every micro-batch's contributions.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def ring_allgather(chunks):
    """All-gather ``chunks[i]`` (member ``i``'s list) around a ring; return (the gathered
    chunks each member ends with, values each member sent)."""
    n = len(chunks)
    held = [{i: list(chunks[i])} for i in range(n)]
    sent = [0] * n
    for step in range(n - 1):     # member i passes on the chunk it got last step (its own first)
        messages = [((i - step) % n, held[i][(i - step) % n]) for i in range(n)]
        for i, (c, values) in enumerate(messages):
            held[(i + 1) % n][c] = list(values)
            sent[i] += len(values)
    return [[held[i][c] for c in range(n)] for i in range(n)], sent


def ring_reduce_scatter(vectors):
    """Reduce-scatter ``vectors[i]`` (member ``i``'s full vector, ``n`` equal chunks) around a
    ring; return (the summed chunk ``i`` that member ``i`` ends with, values each member sent)."""
    n = len(vectors)
    size = len(vectors[0]) // n
    part = [[list(v[c * size:(c + 1) * size]) for c in range(n)] for v in vectors]
    sent = [0] * n
    for step in range(n - 1):     # the partial sum of chunk c starts at c + 1 and ends at c
        messages = [((i - step - 1) % n, part[i][(i - step - 1) % n]) for i in range(n)]
        for i, (c, values) in enumerate(messages):
            target = part[(i + 1) % n][c]
            part[(i + 1) % n][c] = [a + b for a, b in zip(target, values)]
            sent[i] += len(values)
    return [part[i][i] for i in range(n)], sent


def ring_allreduce(vectors):
    """All-reduce as a ring reduce-scatter then a ring all-gather; (the sums, values sent)."""
    chunks, first = ring_reduce_scatter(vectors)
    gathered, second = ring_allgather(chunks)
    return [[x for chunk in g for x in chunk] for g in gathered], [a + b for a, b in zip(first, second)]


@dataclass
class Step:
    """What the simulated step did: ``sent[(kind, pass)]`` bytes each rank sent, ``calls`` the
    collectives, ``groups[kind]`` the ranks of rank 0's group, ``held`` the elements of each
    unit a rank keeps, ``peak_kept``/``peak_freed`` the most gathered elements of the ``counted``
    units while activations are kept (forward and backward) and after the last backward."""

    sent: dict = field(default_factory=dict)
    calls: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)
    held: int = 0
    peak_kept: int = 0
    peak_freed: int = 0


def hsdp_step(units, d, shard, n=1, reshard_after_forward=True, es_w=2, es_g=2, counted=None) -> Step:
    """Simulate one step of ``n`` micro-batches over ``d`` ranks (see the module docstring);
    ``units`` are the weights of each FSDP unit, each a multiple of ``d`` (chunks the rings cut
    evenly); ``counted`` the
    indices of the units whose gathered copies are tracked (all by default)."""
    assert d % shard == 0 and all(u % d == 0 for u in units)
    counted = set(range(len(units))) if counted is None else set(counted)
    replicas = d // shard
    group = lambda r: [r // shard * shard + i for i in range(shard)]         # noqa: E731  its shard group
    across = lambda r: [q * shard + r % shard for q in range(replicas)]      # noqa: E731  its replica group
    weight = lambda u, j: 1000 * u + j                                          # noqa: E731  element j of unit u
    shards = [[[weight(u, (r % shard) * (size // shard) + j) for j in range(size // shard)]
               for u, size in enumerate(units)] for r in range(d)]
    grads = [[[0] * (size // shard) for size in units] for _ in range(d)]
    out = Step(held=sum(size // shard for size in units),
               groups={"shard": group(0), "replica": across(0)})
    gathered = [dict() for _ in range(d)]           # rank -> unit -> its full weights

    def count(kind, pass_, sent, es):
        assert len(set(sent)) == 1                  # every rank sends alike
        key = (kind, pass_)
        out.sent[key] = out.sent.get(key, 0) + sent[0] * es
        out.calls[key] = out.calls.get(key, 0) + 1

    def gather(u, pass_):
        if u < 0 or u >= len(units) or u in gathered[0]:
            return
        for start in range(0, d, shard):
            members = list(range(start, start + shard))
            full, sent = ring_allgather([shards[r][u] for r in members])
            for r, chunks in zip(members, full):
                gathered[r][u] = [x for chunk in chunks for x in chunk]
        count("allgather", pass_, sent, es_w)
        assert gathered[0][u] == [weight(u, j) for j in range(units[u])]

    def free(u):
        for r in range(d):
            gathered[r].pop(u, None)

    def live():
        return sum(units[u] for u in gathered[0] if u in counted)

    contribution = lambda r, m, u, j: (r + 1) * 7 + (m + 1) * (u + 2) + j   # noqa: E731  rank r's dL/dw_j
    for m in range(n):
        for u in range(len(units)):                 # forward
            gather(u, "fwd")
            gather(u + 1, "fwd")                    # prefetch the next unit
            out.peak_kept = max(out.peak_kept, live())
            if reshard_after_forward:
                free(u)
        for u in reversed(range(len(units))):       # backward
            gather(u, "bwd")
            gather(u - 1, "bwd") if reshard_after_forward else None    # prefetch the previous unit
            out.peak_kept = max(out.peak_kept, live())
            local = [[contribution(r, m, u, j) for j in range(units[u])] for r in range(d)]
            assert all(u in gathered[r] for r in range(d))   # the backward needs the full weights
            free(u)
            summed = [None] * d
            for start in range(0, d, shard):
                members = list(range(start, start + shard))
                chunks, sent = ring_reduce_scatter([local[r] for r in members])
                for r, chunk in zip(members, chunks):
                    summed[r] = chunk
            count("reducescatter", "bwd", sent, es_g)
            if replicas > 1:
                for i in range(shard):
                    members = across(i)
                    total, sent = ring_allreduce([summed[r] for r in members])
                    for r, chunk in zip(members, total):
                        summed[r] = chunk
                count("allreduce", "bwd", sent, es_g)
            for r in range(d):
                grads[r][u] = [a + b for a, b in zip(grads[r][u], summed[r])]
    out.peak_freed = live()
    for r in range(d):                              # each shard holds every rank's whole gradient
        for u, size in enumerate(units):
            c = size // shard
            expected = [sum(contribution(q, m, u, (r % shard) * c + j) for q in range(d) for m in range(n))
                        for j in range(c)]
            assert grads[r][u] == expected
    return out
