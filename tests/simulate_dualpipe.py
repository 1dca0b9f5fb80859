"""A DualPipe timetable written from the algorithm (DeepSeek-V3 technical report, 2024, section
3.2.1 and Figure 5; the eight steps of DeepSeek's reference ``DualPipe.step``), independent of
the library.

``p`` ranks (even) run ``n`` micro-batches (even), ``n/2`` fed at each end: direction 0 enters
at rank 0 and leaves at rank ``p - 1``, direction 1 the other way round, so rank ``r`` holds
stage ``r`` of direction 0 and stage ``p - 1 - r`` of direction 1 (two copies of the stages'
parameters).  On rank ``r`` with ``h = min(r, p - 1 - r)``, phase 0 is the direction that
enters on its own half of the pipeline.  Its order of chunks (F forward, B backward, W a
deferred weight gradient, FB a forward of one phase overlapped with the full backward of the
other):

1. ``2(p/2 - h - 1)`` F0;  2. ``h + 1`` times F0 F1;  3. ``p/2 - h - 1`` times B1 (W deferred)
   W F1;  4. ``n/2 - p + h + 1`` times FB(F0, B1) FB(F1, B0) (the middle ranks run the first
   F0 and B1 apart);  5. ``p/2 - h - 1`` times B1 FB(F1, B0);  6. ``h + 1`` times B1 B0, the
   later half deferring their W;  7. ``p/2 - h - 1`` times W B0 (W deferred);  8. ``h + 1`` W.

Each chunk starts once its inputs are there and its rank is free: a forward after the same
micro-batch's forward on the previous rank of its direction, a backward after its own forward
and the next rank's backward; W in first-in-first-out order of the deferred backwards.
Communication takes no time.  Durations: ``F``, ``B`` (the activation-gradient part of a
backward), ``W`` (its weight-gradient part; a full backward takes ``B + W``) and ``FB`` (an
overlapped forward and full backward).
"""

from __future__ import annotations


def direction(p: int, r: int, phase: int) -> int:
    """The direction a rank's phase runs: phases swap on the second half of the ranks."""
    return phase ^ (r >= p // 2)


def rank_order(p: int, n: int, r: int) -> list[tuple]:
    """Rank ``r``'s chunks in order: ``("F", phase)``, ``("B", phase, deferred)``, ``("W",)``,
    ``("FB", forward_phase, backward_phase)``."""
    half, h = p // 2, min(r, p - 1 - r)
    middle = h == half - 1
    order = [("F", 0)] * (2 * (half - h - 1))
    order += [("F", 0), ("F", 1)] * (h + 1)
    order += [("B", 1, True), ("W",), ("F", 1)] * (half - h - 1)
    for i in range(n // 2 - p + h + 1):
        order += [("F", 0), ("B", 1, False)] if i == 0 and middle else [("FB", 0, 1)]
        order += [("FB", 1, 0)]
    order += [("B", 1, False), ("FB", 1, 0)] * (half - h - 1)
    deferred = False
    for i in range(h + 1):
        if i == (h + 1) // 2 and h % 2 == 1:
            deferred = True
        order.append(("B", 1, deferred))
        if i == (h + 1) // 2 and h % 2 == 0:
            deferred = True
        order.append(("B", 0, deferred))
    order += [("W",), ("B", 0, True)] * (half - h - 1)
    return order + [("W",)] * (h + 1)


def _neighbour(p: int, r: int, d: int, step: int) -> int | None:
    """The rank ``step`` places along direction ``d`` from ``r`` (``None`` past the end)."""
    other = r + step if d == 0 else r - step
    return other if 0 <= other < p else None


def timetable(p: int, n: int, seconds: dict) -> tuple:
    """(makespan, each rank's peak of micro-batches' chunks whose activations it holds: forwards
    done whose backward, or deferred weight gradient, is not; each rank's busy seconds)."""
    orders = [rank_order(p, n, r) for r in range(p)]
    done, free, position = {}, [0] * p, [0] * p
    count = {(r, d, k): 0 for r in range(p) for d in (0, 1) for k in "FB"}
    queue = [[] for _ in range(p)]
    held, peak, busy = [0] * p, [0] * p, [0] * p
    full = seconds["B"] + seconds["W"]

    def needs(r, kind, d):
        i = count[(r, d, kind)]
        if kind == "F":
            before = _neighbour(p, r, d, -1)
            return i, [] if before is None else [("F", before, d, i)]
        after = _neighbour(p, r, d, 1)
        return i, [("F", r, d, i)] + ([] if after is None else [("B", after, d, i)])

    while any(position[r] < len(orders[r]) for r in range(p)):
        moved = False
        for r in range(p):
            if position[r] == len(orders[r]):
                continue
            chunk = orders[r][position[r]]
            if chunk[0] == "W":
                parts, wait, length = [], [queue[r][0]], seconds["W"]
            elif chunk[0] == "FB":
                parts = [("F", direction(p, r, chunk[1])), ("B", direction(p, r, chunk[2]))]
                wait, length = [], seconds["FB"]
            else:
                parts, wait = [(chunk[0], direction(p, r, chunk[1]))], []
                length = seconds["F"] if chunk[0] == "F" else (seconds["B"] if chunk[2] else full)
            keys = []
            for kind, d in parts:
                i, deps = needs(r, kind, d)
                keys.append((kind, r, d, i))
                wait += deps
            if not all(x in done for x in wait):
                continue
            start = max([free[r]] + [done[x] for x in wait])
            free[r] = start + length
            busy[r] += length
            for kind, _, d, i in keys:
                done[(kind, r, d, i)] = free[r]
                count[(r, d, kind)] += 1
            if chunk[0] == "W":
                queue[r].pop(0)
                held[r] -= 1
            for kind, _, d, i in keys:
                if kind == "F":
                    held[r] += 1
                elif chunk[0] == "B" and chunk[2]:
                    queue[r].append(("B", r, d, i))
                else:
                    held[r] -= 1
            peak[r] = max(peak[r], held[r])
            position[r] += 1
            moved = True
        assert moved, "the order deadlocks"
    assert all(not q for q in queue)
    return max(free), peak, busy


def phase_peaks(p: int, n: int) -> list[tuple[int, int]]:
    """Per rank, the most chunks of each phase (0: the direction entering on the rank's half of
    the pipeline; 1: the other) whose activations it holds at once, following its order."""
    out = []
    for r in range(p):
        held, most, deferred = [0, 0], [0, 0], []
        for chunk in rank_order(p, n, r):
            if chunk[0] in ("F", "FB"):
                held[chunk[1]] += 1
            if chunk[0] == "FB":
                held[chunk[2]] -= 1
            elif chunk[0] == "B" and chunk[2]:
                deferred.append(chunk[1])
            elif chunk[0] == "B":
                held[chunk[1]] -= 1
            elif chunk[0] == "W":
                held[deferred.pop(0)] -= 1
            most = [max(m, h) for m, h in zip(most, held)]
        out.append(tuple(most))
    return out
