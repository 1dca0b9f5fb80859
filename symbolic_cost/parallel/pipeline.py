"""Pipeline parallelism over ``p`` ranks: schedules (GPipe, 1F1B, interleaved 1F1B), what each
rank keeps in flight, the bubble, what the busiest stage holds, and the sends between stages.

A schedule runs ``n`` micro-batches through ``p`` ranks; with ``v`` model chunks per rank
(interleaved 1F1B, Narayanan et al. 2021) each rank holds ``v`` chunks of ``L/(p v)`` layers.

============== ======================================== ===================================
schedule       micro-batches in flight on rank ``r``     bubble (idle share of the step)
               (in units of the rank's whole layers)
============== ======================================== ===================================
GPipe          ``n``                                    ``(p - 1) / (n + p - 1)``
1F1B           ``min(p - r, n)``                        ``(p - 1) / (n + p - 1)``
interleaved    ``min(2(p - r - 1) + (v - 1) p + 1,      ``(p - 1) / (v n + p - 1)``
               n v) / v``  (chunks of ``1/v``)
ZB-H1          ``min(p, n)``                            ``(p - 1) / (3 n + p - 1)`` when
                                                        ``T_F = T_B = T_W``
DualPipe       ``p + 1`` (stage chunks, both directions) ``(p - 2) / (3 n + p - 2)`` when
                                                        ``T_F = T_B = T_W``
============== ======================================== ===================================

ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism") splits each backward into ``B``
(activation gradients, which the previous stage waits for) and ``W`` (weight gradients, which
nobody waits for) and lets rank ``r`` run each ``W`` ``r`` places later than 1F1B would, into
the cool-down's idle time: the step takes ``n (T_F + T_B + T_W) + (p - 1)(T_F + T_B - T_W)``
(the paper's expression, for ``T_W`` at most ``T_F`` and ``T_B``; in general ``min(T_W, T_F,
T_B)`` for the last ``T_W``, as the timetable of ``tests/simulate_zb.py`` runs) instead of
1F1B's ``(n + p - 1)(T_F + T_B + T_W)``.  Rank ``r`` holds ``p - r`` micro-batches as 1F1B
does and ``r`` more whose ``W`` waits: counted whole, ``p`` on every rank (an upper bound: a
waiting ``W`` needs only its products' inputs).  The step time takes the stage's own ``T_W``
(``timing.step``: the weight-gradient share of each row's backward).

DualPipe (DeepSeek-V3 technical report, 2024, section 3.2.1, Figure 5 and Table 2; DeepSeek's
reference ``DualPipe.step``) feeds ``n/2`` micro-batches at each end of the pipeline: rank ``r``
holds stage ``r`` of the direction that enters at rank 0 and stage ``p - 1 - r`` of the one that
enters at rank ``p - 1``, and overlaps a forward chunk of one direction with a backward chunk of
the other.  It needs ``p`` even and ``n`` even with ``n >= 2p`` (the reference asserts these;
the report names only the evenness).  The timetable of ``tests/simulate_dualpipe.py``, run from
the algorithm's eight steps, takes ``n (T_F + T_B + T_W) + q max(0, T_B - T_W) + max(2 q T_F,
(q - 1) T_F + q T_B)`` with ``q = p/2 - 1``, ``T_B`` the activation-gradient part of a chunk's
backward and an overlapped forward and backward timed as their sum.  The report's Table 2 writes
the bubble ``(p/2 - 1)(F&B + B - 3W)`` with ``B`` the whole backward: the same where ``T_F =
T_B >= T_W``; elsewhere the two differ (the timetable idles ``q (T_F - T_B)`` longer where
``T_F > T_B >= T_W``); the step time follows the timetable.  At its peak a rank holds ``p``
micro-batches' chunks, the two middle ranks ``p + 1`` (the report's ``PP + 1``; ``in_flight``), in
units of one stage's layers; of them at most ``p - h`` of the direction entering on its half
(``h = min(r, p - 1 - r)``) and ``h + 1`` of the other, so an end rank keeps the embedding's for
``p`` and the head's for one (``models.ranks``).

The interleaved count is Megatron-LM's warm-up (``2(p - r - 1) + (v - 1) p`` chunk forwards)
plus the one forward of the steady state before the first backward; on rank 0 it is
``p (1 + (p - 1)/(p v))`` micro-batches, Korthikanti et al. 2022's interleaving factor.
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Add, Eq, Expr, Piecewise, Symbol, sympify

from symbolic_cost.cost import Collective, collective
from symbolic_cost.bounds import upper_bound
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.checks import InputError, count, counts, divides, exact, positive_dims
from symbolic_cost.trees import remembered_call


def stage_layers(depth, p, first=None, last=None) -> tuple[Expr, Expr, Expr]:
    """Layers on the first rank, on each middle rank and on the last rank: ``depth/p`` each,
    or Megatron-LM's ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-...`` with
    the other layers split evenly over the other ranks (numbers only).

    >>> stage_layers(32, 4), stage_layers(30, 4, first=6)
    ((8, 8, 8), (6, 8, 8))
    """
    depth, p = positive_dims(n_layers=depth, p=p).values()
    if first is None and last is None:
        divides({"p": p, "n_layers": depth}, "p", "n_layers", "each pipeline stage holds whole layers")  # 12/13 a rank
        return depth / p, depth / p, depth / p
    given = list(counts(**{name: x for name, x in (("first_stage_layers", first), ("last_stage_layers", last))
                           if x is not None}).values())
    if not (p.is_number and depth.is_number and p >= len(given) and all(sympify(x).is_number for x in given)):
        raise InputError(f"uneven pipeline stages need numbers: p={p}, n_layers={depth}, first={first}, last={last}",
                         "first_stage_layers" if first is not None else "last_stage_layers")
    others, rest = p - len(given), depth - sum(given)
    share = rest / others if others else sympify(0)
    if not (share.is_integer and share >= (1 if others else 0) and (rest >= 0 if others else rest == 0)
            and all(x >= 1 for x in given)):
        raise InputError(f"first_stage_layers={first} and last_stage_layers={last} must leave "
                         f"n_layers={depth} - their sum to split evenly, at least one layer each, "
                         f"over the other {others} of p={p} ranks",
                         "first_stage_layers" if first is not None else "last_stage_layers")
    return (sympify(first) if first is not None else share, share,
            sympify(last) if last is not None else share)


def chunk_in_flight(p: int, n, v: int, rank: int) -> list:
    """Micro-batches rank ``rank`` holds in each of its ``v`` model chunks at its peak under
    Megatron-LM's interleaved 1F1B: its first ``min(W, n v)`` forwards, ``W = 2(p - r - 1) + (v - 1) p
    + 1`` (``Schedule.in_flight`` times ``v``), forward ``j`` running chunk ``(j mod p v) // p``
    (Megatron's ``get_model_chunk_id``).  With ``p`` dividing ``n`` (the schedule's rule) the first
    ``n v`` forwards run every chunk ``n`` times, so chunk ``c`` holds ``min(its share of W, n)``:
    ``n`` may be a symbol.

    >>> chunk_in_flight(4, 8, 2, 0), chunk_in_flight(4, 8, 2, 3)
    ([7, 4], [4, 1])

    Of the first ``W`` forwards, each whole round of ``p v`` runs every chunk ``p`` times and the
    rest ``W mod p v`` runs chunk ``c`` ``min(max(W mod p v - c p, 0), p)`` times: counted, not
    walked (a walk takes as long as ``W``).  ``p``, ``v`` and ``rank`` are counts (``v`` at most
    ``MAX_CHUNKS``), ``rank`` below ``p``.
    """
    p, v = count(p, "p"), count(v, "virtual_stages", maximum=MAX_CHUNKS)
    rank = count(rank, "rank", minimum=0, maximum=p - 1)
    n = positive_dims(micro_batches=n)["micro_batches"]
    rounds, rest = divmod(2 * (p - rank - 1) + (v - 1) * p + 1, p * v)
    return [minimum(rounds * p + min(max(rest - c * p, 0), p), n) for c in range(v)]


MAX_CHUNKS = 10**5
"""The most model chunks a rank may hold (``virtual_stages``): each holds at least one layer, and
a model holds at most ``models.architecture.MAX_LAYERS`` of them."""


def per_stage(p, first, last, layers, last_copy=0) -> Expr:
    """A field on the busiest pipeline stage: everything when ``p = 1``; otherwise the
    layers of one stage plus the larger of the first stage's and the last stage's ends
    (``last_copy``: what the last stage holds only when it is not the first, such as
    its copy of a tied embedding).  Uneven stages are placed layer by layer instead
    (``models.placement``).  Remembered by its arguments and their types: a search asks each
    stage's sums again for every ZeRO stage, offload and schedule of a layout."""
    return remembered_call(_STAGES, _per_stage, p, first, last, layers, last_copy)


_STAGES: dict = {}
"""``per_stage``'s answers by its arguments (``trees.remembered_call``)."""


def _per_stage(p, first, last, layers, last_copy) -> Expr:
    p = sympify(p)
    one = Add(first, last, layers)      # one flatten of the stage's sums, not two
    if p == 1:
        return one
    many = maximum(first, last + last_copy) + layers / p
    return many if p.is_number else Piecewise((one, Eq(p, 1)), (many, True))


@dataclass(frozen=True)
class Schedule:
    """A pipeline schedule: ``"gpipe"``, ``"1f1b"``, ``"interleaved"`` with ``v`` chunks per rank,
    ``"zb-h1"`` or ``"dualpipe"``."""

    name: str
    v: int | Symbol = 1

    def __post_init__(self):
        if self.name not in SCHEDULES:
            raise InputError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.name!r}", "schedule")
        whole = isinstance(self.v, int) and not isinstance(self.v, bool) and self.v >= 1
        symbolic = isinstance(self.v, Symbol) and self.v.is_integer and self.v.is_positive
        interleaved = self.name == "interleaved"
        if not ((whole and interleaved == (self.v > 1)) or (symbolic and interleaved)):
            raise InputError(f"virtual stages v must be an integer > 1 (or a positive integer symbol) for the "
                             f"interleaved schedule and 1 otherwise, got v={self.v!r} for {self.name}",
                             "virtual_stages")

    def in_flight(self, p, n, rank=0) -> Expr:
        """Micro-batches' worth of rank ``rank``'s layers whose activations it holds at its peak.

        >>> ONE_F_ONE_B.in_flight(4, 8), interleaved(2).in_flight(4, 8)
        (4, 11/2)
        """
        p, n = positive_dims(p=p, micro_batches=n).values()
        rank = counts(rank=rank)["rank"]
        if self.name == "gpipe":
            return n
        if self.name == "1f1b":
            return minimum(p - rank, n)
        if self.name == "zb-h1":
            return minimum(p, n)
        if self.name == "dualpipe":        # the two middle ranks' p + 1 (the most; the others hold p)
            return p + 1
        return minimum(2 * (p - rank - 1) + (self.v - 1) * p + 1, n * self.v) / self.v

    def bubble(self, p, n) -> Expr:
        """Idle share of a step: ``(p - 1)/(n + p - 1)``, or ``(p - 1)/(v n + p - 1)`` interleaved;
        ZB-H1's ``(p - 1)/(3 n + p - 1)`` and DualPipe's ``(p - 2)/(3 n + p - 2)`` when the three
        passes take equal time (``dualpipe_bubble`` with ``T_F = T_B = T_W = 1``)."""
        p, n = positive_dims(p=p, micro_batches=n).values()
        if self.name == "zb-h1":
            return (sympify(p) - 1) / (3 * sympify(n) + p - 1)
        if self.name == "dualpipe":
            idle = dualpipe_bubble(p, 1, 1, 1)
            return idle / (3 * sympify(n) + idle)
        return (sympify(p) - 1) / (self.v * sympify(n) + p - 1)


SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe")
GPIPE, ONE_F_ONE_B = Schedule("gpipe"), Schedule("1f1b")


def dualpipe_bubble(p, t_f, t_b, t_w) -> Expr:
    """Seconds a DualPipe step takes beyond ``n (T_F + T_B + T_W)`` on ``p`` ranks (even), with
    ``q = p/2 - 1``: ``q max(0, T_B - T_W) + max(2 q T_F, (q - 1) T_F + q T_B)`` (``T_B``: the
    activation-gradient part of a stage chunk's backward, ``T_W`` its weight-gradient part; an
    overlapped forward and backward chunk timed as the sum of the two).  Read off the timetable of
    the algorithm (module docstring); the report's ``(p/2 - 1)(F&B + B - 3W)`` where ``T_F = T_B
    >= T_W``.

    >>> dualpipe_bubble(8, 1, 1, 1), dualpipe_bubble(8, 2, 1, 1)
    (6, 12)
    """
    p = positive_dims(p=p)["p"]
    for name, value in (("t_f", t_f), ("t_b", t_b), ("t_w", t_w)):
        high = upper_bound(exact(value, name))      # structural: SymPy's is_negative on a whole step time is slow
        if high is not None and high < 0:
            raise InputError(f"{name} must be non-negative seconds, got {value}", name)
    q = p / 2 - 1
    return q * maximum(0, t_b - t_w) + maximum(2 * q * t_f, (q - 1) * t_f + q * t_b)


def dualpipe_rules(p, n) -> None:
    """Refuse what DualPipe cannot run (numbers only): ``p`` even, ``micro_batches`` even and at
    least ``2p`` (DeepSeek's reference asserts all three)."""
    p, n = sympify(p), sympify(n)
    if p.is_number and p % 2 != 0:
        raise InputError(f"p must be even for the dualpipe schedule (its two directions pair rank r with "
                         f"rank p - 1 - r), got p={p}", "p")
    if n.is_number and n % 2 != 0:
        raise InputError(f"micro_batches must be even for the dualpipe schedule (half enter at each end), "
                         f"got micro_batches={n}", "micro_batches")
    if p.is_number and n.is_number and n < 2 * p:
        raise InputError(f"micro_batches must be at least 2p for the dualpipe schedule (DeepSeek's DualPipe "
                         f"asserts num_chunks >= 2 num_ranks), got micro_batches={n}, p={p}", "micro_batches")


def dualpipe_gradient_sum(parameters, es, conventions, stride=1) -> list[Collective]:
    """The gradient sum of DualPipe's two copies of each stage, once per step: an allreduce of
    the rank's ``parameters`` (both its stages) between rank ``r`` and rank ``p - 1 - r``, which
    hold the same two stages.  DeepSeek's reference leaves this sum to the caller (its example
    adds the partner's gradients before the step); the report does not say how it is done."""
    return collective("allreduce", parameters, es, 2, "bwd", conventions, stride=stride)


def interleaved(v: int) -> Schedule:
    """Megatron-LM's interleaved 1F1B with ``v`` model chunks per rank."""
    return Schedule("interleaved", v)


def in_flight(p, micro_batches) -> Expr:
    """Micro-batches whose activations the first stage holds at once under 1F1B: ``min(p, n)``."""
    return ONE_F_ONE_B.in_flight(p, micro_batches)


def bubble(p, micro_batches) -> Expr:
    """Idle fraction of a 1F1B step: ``(p - 1) / (n + p - 1)``."""
    return ONE_F_ONE_B.bubble(p, micro_batches)


def stage_sends(boundary_elements, es, p, micro_batches, stride, conventions) -> list[Collective]:
    """The activation (forward) and gradient (backward) sends of one stage per step:
    one p2p of the ``boundary_elements`` per micro-batch, none when there is one stage;
    neighbouring stages are ``stride`` ranks apart.  Every boundary sends at once and the stages
    wait for the slowest, so the sends reach over all ``p x stride`` ranks of the pipeline
    (``Collective.reach``): with ``stride`` under a node's size, the boundaries inside a node run
    on NVLink, but one between two nodes sets the pace on the network."""
    sends = micro_batches * minimum(sympify(p) - 1, 1)
    return [c for pass_ in ("fwd", "bwd")
            for c in collective("p2p", boundary_elements, es, 2, pass_, conventions, repeats=sends, stride=stride,
                                reach=sympify(p) * stride)]
