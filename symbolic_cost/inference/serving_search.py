"""The serving layouts of a model on a number of devices, ranked by the request rate each holds
under a service-level objective: the question aiconfigurator answers.

A layout puts the ``devices`` into copies of one deployment of ``m1`` tensor-parallel devices
times ``p`` pipeline stages, and serves either **aggregated** (every copy a replica running
prefill and decode, the requests taken in turn: ``load.serve(..., replicas=)``; over ``p``
stages a copy runs ``p`` batches at once, one a stage) or **disaggregated** (``P`` copies
prefill, ``D`` decode, the KV cache sent between them: ``disaggregated.serve_disaggregated``;
single-stage copies only).
A mixture of experts may also serve with **attention data parallelism** (TensorRT-LLM's
``enable_attention_dp``, vLLM's and SGLang's DP attention): every device a replica of the
attention with its own requests, the routed experts split over all of them (``d`` = ``ep`` = the
devices, expert TP 1), each step's token dispatch and combine an all-to-all among them.
For each, ``load.sustained_rate`` finds the highest Poisson rate whose percentile TTFT and ITL
meet the SLO; the layouts are ranked by that rate (per device, since every layout uses all of
them).  Under ``capped`` engines, each layout is tried again under each cap on the sequences an
engine runs at once (its ``max_batch``): a lower cap trades a queue, a longer time to first token,
for a shorter step, where the inter-token objective is the one that binds.  A tensor degree whose
weights do not fit, or that the model cannot split, is reported with its reason, not ranked.
Pipeline stages are how a copy spans more devices than a node's tensor degrees: they split the
weights and the cache as tensor parallelism does, with no collective in each layer, and a request
waits for each stage in turn.

The search is bounded, since its work grows with the copies and so with the devices (one of 64
devices ran past the command line's time budget, and held the web page's server as long): its load
tests run about ``SEARCH_STEPS`` engine steps in all, the layouts tried from the fewest engines up
(the largest tensor degree first), each layout's search whole or not at all, and the layouts past
the budget are listed as not tried.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from symbolic_cost.checks import InputError, InputTypeError, count, instance, shown
from symbolic_cost.inference.disaggregated import MAX_INSTANCES, Pools, serve_disaggregated
from symbolic_cost.inference.lengths import FIXED, Lengths
from symbolic_cost.inference.load import (LIMITS, MAX_REQUESTS, Runtime, StepModel, check_gaps, check_level,
                                          check_slo, serve, sustained_rate)
from symbolic_cost.inference.serving import SERVING_MADE_BY, Serving
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.timing.hardware import calibrated

TENSOR = (1, 2, 4, 8)
"""Tensor-parallel degrees tried: within one NVLink node of eight."""

PIPELINE = (1, 2, 4, 8)
"""Pipeline degrees tried (aggregated copies only: ``serve_disaggregated`` refuses stages)."""

SPLITS = 6
"""Most prefill:decode splits tried for one tensor degree (evenly spread when there are more)."""


@dataclass(frozen=True)
class Layout:
    """``copies`` deployments of ``m1`` devices times ``p`` stages, aggregated, or split into
    ``pools``; with ``attention_dp``, replicas of the attention sharing their experts, split over
    every device."""

    m1: int
    copies: int
    pools: Pools | None = None
    attention_dp: bool = False
    p: int = 1

    def __str__(self) -> str:
        if self.attention_dp:
            return f"TP{self.m1} x {self.copies}, attention data-parallel, experts over {self.m1 * self.copies}"
        kind = f"{self.pools.prefill}:{self.pools.decode} disaggregated" if self.pools else \
            f"{self.copies} replica{'s' if self.copies > 1 else ''}"
        stages = f" PP{self.p}" if self.p > 1 else ""
        return f"TP{self.m1}{stages} x {self.copies}, {kind}"

    def serving(self, serving):
        """The ``Serving`` of one copy: its tensor and pipeline degrees, alone (``d`` 1), or under
        attention data parallelism the ``copies`` replicas with the experts over every device
        (``ep`` the devices, ``etp`` 1)."""
        if self.attention_dp:
            return replace(serving, m1=self.m1, d=self.copies, ep=self.m1 * self.copies, etp=1)
        return replace(serving, m1=self.m1, p=self.p, d=1)

    def sent(self, requests: int) -> int:
        """The requests each of its load tests sends: ``requests`` to each copy, at most
        ``load.MAX_REQUESTS`` (see ``rank``)."""
        return min(requests * self.copies, MAX_REQUESTS)

    @property
    def engines(self) -> int:
        """The engines its load test simulates, each a batch of its own: a copy's ``p`` batches in
        flight, one a stage, for each of the ``copies`` (``load.serve``), ``devices / m1``."""
        return self.copies * self.p


def layouts(devices: int, tensor=TENSOR, splits: int = SPLITS, experts: bool = False,
            pipeline=PIPELINE) -> list[Layout]:
    """Every layout of ``devices`` devices: for each tensor degree of ``tensor`` that divides
    them, the aggregated one and up to ``splits`` prefill:decode splits of the copies (all of
    them when there are that few, else evenly spread over ``1 .. copies - 1``), then aggregated
    copies over each pipeline degree of ``pipeline`` past 1 that divides what is left; for a model
    with routed ``experts``, also attention data parallelism over every device (tensor degree 1).

    >>> [str(x) for x in layouts(4)]
    ['TP1 x 4, 4 replicas', 'TP1 x 4, 1:3 disaggregated', 'TP1 x 4, 2:2 disaggregated', 'TP1 x 4, 3:1 disaggregated', 'TP1 PP2 x 2, 2 replicas', 'TP1 PP4 x 1, 1 replica', 'TP2 x 2, 2 replicas', 'TP2 x 2, 1:1 disaggregated', 'TP2 PP2 x 1, 1 replica', 'TP4 x 1, 1 replica']
    >>> str(layouts(4, experts=True)[-1])
    'TP1 x 4, attention data-parallel, experts over 4'
    """
    if isinstance(devices, bool) or not isinstance(devices, int) or not 1 <= devices <= MAX_INSTANCES:
        raise InputError(f"devices must be an integer from 1 to {MAX_INSTANCES:,} (each layout's copies are "
                         f"simulated one by one), got {devices!r}", "devices")
    tensor, pipeline = degrees(tensor, "tensor"), degrees(pipeline, "pipeline")
    if isinstance(splits, bool) or not isinstance(splits, int) or splits < 0:
        raise InputError(f"splits must be an integer at least 0, got {splits!r}", "splits")
    if not any(devices % t == 0 for t in tensor):     # no layout at all: an empty ranking, said nowhere
        raise InputError(f"tensor: none of the tensor degrees {', '.join(map(str, tensor))} divides devices={devices} "
                         f"(each layout's copies are devices / tensor degree): give a degree that divides it",
                         "tensor")
    found = []
    for m1 in (t for t in tensor if devices % t == 0):
        copies = devices // m1
        found.append(Layout(m1, copies))
        prefill = list(range(1, copies))
        if len(prefill) > splits:
            prefill = sorted({max(1, min(copies - 1, round(copies * (k + 1) / (splits + 1)))) for k in range(splits)})
        found += [Layout(m1, copies, Pools(p, copies - p)) for p in prefill]
        found += [Layout(m1, copies // p, p=p) for p in pipeline if p > 1 and copies % p == 0]
    if experts and devices > 1 and 1 in tensor:
        found.append(Layout(1, devices, attention_dp=True))
    return found


def degrees(values, name: str) -> tuple:
    """``values`` checked as the degrees a search tries: positive integers, each once, in order.

    >>> degrees([2, 1, 2], "tensor")
    (2, 1)
    """
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise InputTypeError(f"{name} must be a tuple of degrees, got {values!r}", name)
    found = tuple(dict.fromkeys(values))
    if not found or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in found):
        raise InputError(f"{name} must hold positive integer degrees, got {values!r}", name)
    return found


BATCH_LIMITS = 8
"""Most caps on the batch a search tries besides the engine's own (each is a load test of every
layout)."""


def capped(runtime_of, batches):
    """``runtime_of`` for ``rank`` whose every deployment is tried under the engine's own runtime and
    under each cap of ``batches`` on its batch (``Runtime.max_batch``): ``runtime_of(step, m1)`` (a
    ``load.Runtime``; ``None``: ``load.Runtime()`` for each) made a tuple of runtimes.

    >>> [r.max_batch for r in capped(None, [64, 32, 64])(None, 1)]
    [2048, 64, 32]
    """
    caps = batch_limits(batches)

    def runtimes(step, m1):
        engine = runtime_of(step, m1) if runtime_of else Runtime()
        return (engine, *(replace(engine, max_batch=cap) for cap in caps))
    return runtimes


def batch_limits(batches) -> tuple:
    """``batches`` checked: at most ``BATCH_LIMITS`` integers, each a ``Runtime``'s ``max_batch``
    (``load.LIMITS``), each once (none: the engine's own cap alone).

    >>> batch_limits([64, 32, 64]), batch_limits(())
    ((64, 32), ())
    """
    if isinstance(batches, (str, bytes)) or not hasattr(batches, "__iter__"):
        raise InputTypeError(f"batches must be a tuple of the engine's batch caps to try, got {batches!r}", "batches")
    found = tuple(dict.fromkeys(batches))
    if len(found) > BATCH_LIMITS:
        raise InputError(f"batches must hold at most {BATCH_LIMITS} caps, got {len(found)}", "batches")
    for limit in found:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIMITS["max_batch"]:
            raise InputError(f"batches must be positive integers of at most {LIMITS['max_batch']:,} (a Runtime's "
                             f"max_batch), got {limit!r}", "batches")
    return found


SEARCH_STEPS = 8_000_000
"""Most engine steps the load tests of one search run in all (``Effort.steps``; ``steps_run``
counts each test's once it has run, so the last may pass it).  The searches of
``docs/inference.md`` on eight H100s are whole within it: Llama 3 70B ran 3.0 million (8 CPU-seconds
on a 2-core machine), with three batch caps at 200 requests a copy 6.5 million (15 s), Qwen3-30B-A3B
2.4 million (11 s); Llama 3 70B on 64 devices, which ran past the command line's 120 s (and held
the web page's server as long), stops at it after 25 s with 11 layouts tried.  The test that passes
it runs whole (at most ``load.MAX_REQUESTS`` requests, 20-30 s): on 512 devices the search ends
after 26 s with one layout, on 4,096 after 46 s with none (each of their load tests sends 100,000)."""


@dataclass(frozen=True)
class Effort:
    """How much a layout search (``rank``) simulates: ``requests``, what each copy of a deployment
    takes in its load test (at most ``load.MAX_REQUESTS``), and ``steps``, the most engine steps the
    search's load tests run in all (``Budget``; ``None``: ``SEARCH_STEPS`` as it is when the search runs).

    >>> Effort(200).budget() == SEARCH_STEPS, Effort(200, 0).budget()
    (True, 0)
    """

    requests: int = 500
    steps: int | None = None

    def __post_init__(self):
        count(self.requests, "requests", 1, MAX_REQUESTS)
        if self.steps is not None and (isinstance(self.steps, bool) or not isinstance(self.steps, int)
                                       or self.steps < 0):
            raise InputError(f"budget must be a whole number of engine steps, at least 0, got {shown(self.steps)}",
                             "budget")

    def budget(self) -> int:
        """The engine steps the search may run."""
        return SEARCH_STEPS if self.steps is None else self.steps


class Spent(Exception):
    """The search's ``Budget`` is spent, and a load test is not run (not an ``InputError``: ``rank``
    reads those as the layout's own, a cache that cannot hold one request)."""


class Budget:
    """What is ``left`` of a search's ``steps`` (``SEARCH_STEPS``), less each load test's once it
    has run; once none is left it is ``spent``, and no test runs again."""

    def __init__(self, steps: int):
        self.steps = self.left = steps
        self.spent = False

    def charged(self, simulate, engines: int):
        """``simulate`` (a load test called as ``load.serve`` is) that raises ``Spent`` instead of
        running once nothing is left, and takes its steps from what is left: a layout's search runs
        whole or not at all, its figures those of a search without a budget; the budget is passed by
        one test at most."""
        def run(step, tokens, rate, requests, *rest, **named):
            if self.spent or self.left <= 0:
                self.spent = True
                raise Spent
            load = simulate(step, tokens, rate, requests, *rest, **named)
            self.left -= steps_run(load, requests, engines)
            return load
        return run

    def reason(self) -> str:
        """Why a layout was not tried."""
        return (f"not tried: the search's budget of {self.steps:,} simulated engine steps was spent on the "
                f"layouts tried before (the fewest engines, copies x stages, first)")


def steps_run(load, requests: int, engines: int = 1) -> int:
    """About how many steps a load test of ``engines`` engines (``Layout.engines``) ran: its span
    (``requests`` over the request throughput) over the mean inter-token gap (a step's duration,
    each decoding sequence's gap), for each engine, and at least one a request.  The work of a
    simulation follows its steps, not its tokens: a batch of 200 sequences yields 200 tokens a
    step, and a model whose objective holds its batches small takes a step a token.  Busy or idle
    alike: a run with idle stretches counts more than it ran.

    >>> from types import SimpleNamespace as Measured      # a load.Load's two figures
    >>> steps_run(Measured(mean_itl=0.02, request_throughput=10.0), 100, engines=2)     # 2 x 10 s / 20 ms
    1000
    """
    span = requests / load.request_throughput
    return max(requests, engines * round(span / load.mean_itl)) if load.mean_itl else requests


CHOSEN = (("m1", 1, "tensor degree"),
          ("p", 1, "pipeline degree (1, 2, 4 and 8 are tried where they divide the copies)"),
          ("d", 1, "copies (devices / (m1 p))"), ("ep", 1, "expert split (attention data parallelism's)"),
          ("etp", None, "expert split (attention data parallelism's)"))
"""What ``rank`` chooses for each layout (``Layout.serving``): a ``Serving``'s field, its default and
what sets it instead."""


def check_request(serving: Serving) -> None:
    """Refuse a ``serving`` that is not one request's shape: ``l_in`` and ``l_out`` not integers
    (the load tests run numbers), or any field of ``CHOSEN`` set, which each layout would replace
    without a word (``Serving(m1=8)`` ranked TP1, TP2 and TP4 layouts too)."""
    for name in ("l_in", "l_out"):
        if not getattr(serving, name).is_Integer:
            raise InputError(f"serving.{name} must be a number for a layout search (its load tests run numbers), got "
                             f"{getattr(serving, name)}", name)
    for name, default, chooser in CHOSEN:
        if getattr(serving, name) != default:
            hint = f" (tensor=({serving.m1},) tries that degree alone)" if name == "m1" else ""
            raise InputError(f"serving.{name}={getattr(serving, name)}: rank chooses each layout's {chooser}; leave "
                             f"{name}={default}{hint}", name)


def rank(arch, serving, system: str, devices: int, slo: tuple, level: int = 90, effort: Effort = Effort(),
         runtime_of=None, conventions=None, tensor=TENSOR, speculation=None,
         lengths: Lengths = FIXED) -> tuple[list[dict], list[dict]]:
    """``(ranked, left out)``: each layout of ``layouts(devices)`` with its sustained rate, best
    first (``rate``, ``rate_per_device``, the percentile TTFT and ITL there), and the tensor
    degrees left out with the reason.  ``serving`` gives the request (``l_in``, ``l_out``, numbers) and
    the formats; its ``m1``, ``p``, ``d``, ``ep`` and ``etp`` are each layout's to choose, and one set
    is refused by name, not replaced (``check_request``; ``tensor`` names the tensor degrees tried).
    ``runtime_of(step, m1)``: the engine's
    ``load.Runtime`` for a deployment (default: ``load.Runtime()``), or a tuple of them, each tried
    (``capped``: the engine's own and caps on its batch); each row says its ``max_batch``.  ``speculation``
    (``speculative.Speculation``): every deployment decodes speculatively, its draft on the same
    ``m1`` devices; disaggregated pools, which do not, are left out with that reason.  ``lengths``:
    the requests' prompt and output lengths (``load.serve``'s).

    ``effort`` (an ``Effort``): ``requests`` is what each copy of the deployment takes: a layout of
    ``c`` copies is tested with ``c x requests`` (at most ``load.MAX_REQUESTS``), so that every
    engine runs as long a test whatever the layout.  Split over the copies, a short test per engine
    keeps the queues shorter at the same rate per device, and the layouts of many copies looked
    faster.

    ``effort.steps``: the most engine steps the search's load tests run in all (``Budget``,
    ``SEARCH_STEPS`` unless given).  The layouts are tried from the fewest engines (``Layout.engines``, ``devices
    / m1``: the largest tensor degree first) up, in ``layouts``' order among equals, and once the
    budget is spent no load test runs again: the layouts not tried are left out with ``not_tried``
    and the reason, and the figures of those tried are those of a search without a budget.

    The caller's own arguments are checked before any layout is tried: a layout is left out for
    what it cannot hold, never for a wrong percentile, SLO, request count or system."""
    instance(arch, Architecture, "arch", " (models.config.preset or load)")
    instance(serving, Serving, "serving", SERVING_MADE_BY)
    instance(lengths, Lengths, "lengths", " (inference.lengths.Lengths)")
    check_request(serving)
    calibrated(system)
    check_level(level), check_gaps(check_slo(slo), serving.l_out)
    instance(effort, Effort, "effort", " (serving_search.Effort(requests, steps))")
    if runtime_of is not None and not callable(runtime_of):
        raise InputTypeError(f"runtime_of must be a function of (step, m1) giving a load.Runtime, or None, got "
                             f"{shown(runtime_of)}", "runtime_of")
    found, steps, rows, spent = layouts(devices, tensor, experts=arch.moe is not None), {}, {}, Budget(effort.budget())
    for index in sorted(range(len(found)), key=lambda k: found[k].engines):     # the fewest engines first
        layout = found[index]
        key = (layout.m1, layout.p, layout.attention_dp)
        if key not in steps:
            steps[key] = _step(arch, layout.serving(serving), system, conventions, speculation)
        rows[index] = _rows(layout, steps[key], runtime_of, int(serving.l_out), slo, level, effort.requests,
                            lengths, devices, spent)
    ranked = [row for k in range(len(found)) for row in rows[k][0]]
    ranked.sort(key=lambda row: -row["rate"])
    return ranked, [row for k in range(len(found)) for row in rows[k][1]]


def _step(arch, serving: Serving, system, conventions, speculation):
    """The ``StepModel`` of one deployment, or the ``InputError`` that says why it cannot serve
    (the model does not split so, or its weights leave no room for a KV cache)."""
    try:
        step = StepModel(arch, serving, system, conventions, speculation)
        if step.cache_blocks(1, 1) == 0:
            raise InputError("the weights fill each device's memory, leaving none for the KV cache", "m1")
        return step
    except InputError as error:
        return error


def _rows(layout: Layout, step, runtime_of, output_tokens: int, slo, level: int, requests: int, lengths,
          devices: int, spent: Budget) -> tuple[list, list]:
    """``(ranked, left out)`` rows of one layout: its rate under each runtime, or why it is left out
    (its deployment cannot serve, its cache cannot hold one request, or the search's ``spent``
    budget would be passed: not tried)."""
    if isinstance(step, InputError):
        named = layout.attention_dp or layout.p > 1
        return [], [] if layout.pools else [{"m1": layout.m1, "p": layout.p,
                                             **({"layout": str(layout)} if named else {}), "reason": str(step)}]
    engines = runtime_of(step, layout.m1) if runtime_of else Runtime()
    engines = engines if isinstance(engines, tuple) else (engines,)
    if not all(isinstance(e, Runtime) for e in engines):
        raise InputTypeError(f"runtime_of must give a load.Runtime or a tuple of them, gave {shown(engines)}",
                             "runtime_of")
    simulate = spent.charged(partial(serve_disaggregated, pools=layout.pools) if layout.pools else
                             partial(serve, replicas=layout.copies), layout.engines)
    ranked, left = [], []
    for runtime in engines:
        where = {"m1": layout.m1, "p": layout.p, "layout": str(layout), "max_batch": runtime.max_batch}
        try:
            rate, at = sustained_rate(step, output_tokens, slo, level, layout.sent(requests), runtime,
                                      simulate=simulate, lengths=lengths)
        except InputError as error:              # the cache cannot hold one request
            left.append({**where, "reason": str(error)})
            continue
        except Spent:
            left.append({**where, "not_tried": True, "reason": spent.reason()})
            continue
        ranked.append({"layout": str(layout), "m1": layout.m1, "p": layout.p, "copies": layout.copies,
                       "attention_dp": layout.attention_dp,
                       "prefill": layout.pools.prefill if layout.pools else None,
                       "decode": layout.pools.decode if layout.pools else None, "max_batch": runtime.max_batch,
                       "rate": rate, "rate_per_device": rate / devices,
                       f"p{level}_ttft": getattr(at, f"p{level}_ttft") if at else None,
                       f"p{level}_itl": getattr(at, f"p{level}_itl") if at else None})
    return ranked, left
