"""A pipeline timetable written from the zero-bubble paper's algorithm (Qi et al. 2024, ZB-H1),
independent of the library: each stage runs its passes in a fixed order, each as soon as its
inputs are ready and the stage is free.

Order on stage ``s`` of ``p``: the 1F1B warm-up (``min(p - s, n)`` forwards), then for each
micro-batch ``j`` its activation backward ``B_j``, the weight backward ``W_{j-s}`` deferred by
``s`` places, and the next forward; the deferred ``W`` close the step.  Dependencies: ``F(s, i)``
after ``F(s-1, i)``; ``B(s, i)`` after ``F(s, i)`` and ``B(s+1, i)``; ``W(s, i)`` after ``B(s, i)``.
"""


def zb_h1_order(p: int, n: int, s: int) -> list[tuple[str, int]]:
    warm = min(p - s, n)
    order, following = [("F", i) for i in range(warm)], warm
    for j in range(n):
        order.append(("B", j))
        if j >= s:
            order.append(("W", j - s))
        if following < n:
            order.append(("F", following))
            following += 1
    return order + [("W", j) for j in range(max(0, n - s), n)]


def timetable(p: int, n: int, seconds: dict) -> tuple:
    """(makespan, the most micro-batches each stage holds activations of at once: forwards
    done whose ``W`` is not)."""
    done, free, position = {}, [0] * p, [0] * p
    orders = [zb_h1_order(p, n, s) for s in range(p)]
    held, peak = [0] * p, [0] * p
    while any(position[s] < len(orders[s]) for s in range(p)):
        moved = False
        for s in range(p):
            if position[s] == len(orders[s]):
                continue
            kind, i = orders[s][position[s]]
            needs = {"F": [("F", s - 1, i)] if s else [],
                     "B": [("F", s, i)] + ([("B", s + 1, i)] if s < p - 1 else []),
                     "W": [("B", s, i)]}[kind]
            if all(x in done for x in needs):
                start = max([free[s]] + [done[x] for x in needs])
                done[(kind, s, i)] = free[s] = start + seconds[kind]
                held[s] += {"F": 1, "B": 0, "W": -1}[kind]
                peak[s] = max(peak[s], held[s])
                position[s] += 1
                moved = True
        assert moved, "the order deadlocks"
    return max(done.values()), peak
