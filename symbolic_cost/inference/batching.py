"""In-flight batching step by step, for the engines that reserve a request's KV-cache blocks when
they admit it (TensorRT-LLM's ``GUARANTEED_NO_EVICT``): prompts prefilled whole
(``WholePrompts``) or in chunks beside the decodes (``ChunkedPrompts``).

An engine is a state that, at each step, plans what it runs (``plan``: the prompts it admits,
the sequences it decodes) and prices it with the step model, then applies the step's end
(``apply``: first tokens, inter-token gaps, finished requests); it also says whether it is
``done``, ``idle`` at a time (nothing to run), and when its ``next_arrival`` comes
(``inference.paged.OnDemand``, vLLM's engine, is one too).  ``alone`` runs one engine at its own
pace (``load.serve``'s replicas of a dense model, each its own deployment).  ``lockstep`` runs the
replicas of an attention-data-parallel deployment of a mixture of experts together: every layer's
token dispatch and combine is an all-to-all among them (TensorRT-LLM's ``enable_attention_dp``,
vLLM's and SGLang's DP attention, where a replica with nothing to run joins with an empty batch),
so each step lasts as long as the slowest replica's, and a prompt one replica prefills holds up
the decodes of all the others.  ``pipelined`` runs the batches in flight of a pipeline, one engine
each, through its stages.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

from symbolic_cost.checks import timed


def mean_context(prompt, steps: int, admitted_sum, decoding: int) -> float:
    """The mean cached tokens of ``decoding`` sequences before a step: each holds its ``prompt``
    and one token for each step run since it was admitted, ``steps`` less its step of admission
    (``admitted_sum`` sums those); 0 with none decoding.

    >>> mean_context(100, 10, 4 + 8, 2)        # admitted at steps 4 and 8: 106 and 102 tokens
    104.0
    """
    return (prompt + steps - admitted_sum / decoding) if decoding else 0.0


def next_time(times: list[float], arrived: int) -> float:
    """When the next request arrives: ``times[arrived]``, or never (``inf``) once all have.

    >>> next_time([0.5, 2.0], 1), next_time([0.5, 2.0], 2)
    (2.0, inf)
    """
    return times[arrived] if arrived < len(times) else math.inf


class Decoding:
    """The sequences an engine decodes, by the step their last token comes at (a sequence of ``O``
    tokens that yielded its first at step ``s`` yields its last at ``s + O - 1``), with the sums of
    their prompts and of the steps they started at (``mean_context``)."""

    def __init__(self, outputs: list[int], prompts: list[int]):
        self.outputs, self.prompts, self.heap, self.admitted_sum, self.prompt_sum = outputs, prompts, [], 0, 0

    def __len__(self) -> int:
        return len(self.heap)

    def start(self, request: int, steps: int) -> None:
        """``request`` yielded its first token at the end of step ``steps``."""
        heapq.heappush(self.heap, (steps + self.outputs[request] - 1, steps, request))
        self.admitted_sum += steps
        self.prompt_sum += self.prompts[request]

    def context(self, steps: int) -> float:
        """The mean cached tokens before the next step (``mean_context`` of the mean prompt)."""
        return mean_context(self.prompt_sum / len(self.heap), steps, self.admitted_sum, len(self.heap)) \
            if self.heap else 0.0

    def finish(self, steps: int) -> list[int]:
        """The requests whose last token came at the end of step ``steps``, removed."""
        done = []
        while self.heap and self.heap[0][0] <= steps:
            _, started, request = heapq.heappop(self.heap)
            self.admitted_sum -= started
            self.prompt_sum -= self.prompts[request]
            done.append(request)
        return done


def priced(step, chunks, decoding: int, context: float) -> float:
    """Seconds of a step that prefills ``chunks`` (``(offset, take)``: ``take`` prompt tokens after
    ``offset`` already cached) beside ``decoding`` sequences: ``step(t / P, decoding, context)`` for
    the ``t`` tokens, plus each chunk's attention at its place in its prompt where the step model
    states it (``load.StepModel.attention_shift``; a stand-in without it prices tokens alike)."""
    shift = getattr(step, "attention_shift", None)
    tokens = sum(take for _, take in chunks)
    return step(tokens / step.prompt, decoding, context) + (shift(chunks) if shift is not None and chunks else 0.0)


def decoder(step, decoding: int, none=None):
    """The price of a step of ``step`` that only decodes ``decoding`` sequences, as a function of
    their mean ``context``: ``step(none, decoding, context)``, to the bit (``none``: the zero of
    prompts passed; default ``0 / step.prompt``, what ``priced`` passes for a step with no chunk).
    A step model that has its own (``load.StepModel.decoder``, the terms that read the batch alone
    computed once) gives it; it is looked up on the class, so that a wrapper that forwards its
    attributes (``load.WithDraftLaunches``, ``load.CheckedStep``) is called as it is.

    >>> class Step:
    ...     prompt = 100
    ...     def __call__(self, prompts, decoding, context): return prompts + decoding * context
    >>> decoder(Step(), 3)(10.0)
    30.0
    """
    if none is None:
        none = 0 / step.prompt           # ``priced``'s tokens over ``P``, of no tokens
    own = getattr(type(step), "decoder", None)
    return own(step, decoding, none) if own is not None else lambda context: step(none, decoding, context)


class Reserving:
    """What both engines hold: requests arriving at ``times`` with ``prompts`` tokens, ``outputs``
    tokens (decode steps) and ``needs`` KV blocks each, from a pool of ``blocks``; the step model
    ``step`` prices a step of ``t`` prompt tokens as ``t / step.prompt`` prompts.  ``result``:
    ``(first token times, last token times, [(step seconds, sequences decoding)], the last token's
    time)``."""

    def __init__(self, step, outputs, times, runtime, blocks, needs, prompts):
        self.step, self.size, self.runtime, self.blocks = step, step.prompt, runtime, blocks
        self.times, self.needs, self.prompts = times, needs, prompts
        self.running = Decoding(outputs, prompts)
        requests = len(times)
        self.first, self.finished, self.steps_run = [0.0] * requests, [0.0] * requests, []
        self.steps, self.nxt, self.last, self.reserved, self.decoding = 0, 0, 0.0, 0, 0
        self.decoders = {}

    def waiting(self) -> bool:
        """Whether the engine holds nothing to run (no sequence decoding or prefilling)."""
        return not self.running

    def done(self) -> bool:
        return self.nxt >= len(self.times) and self.waiting()

    def idle(self, now: float) -> bool:
        """Nothing to run at ``now``: nothing held and the next request not arrived."""
        return self.waiting() and self.next_arrival() > now

    def next_arrival(self) -> float:
        return next_time(self.times, self.nxt)

    def fits(self, request: int, now: float, held: int) -> bool:
        """Whether ``request`` has arrived by ``now`` and fits beside ``held`` sequences: the
        engine's ``max_batch`` and the KV blocks left."""
        return self.times[request] <= now and held < self.runtime.max_batch \
            and self.reserved + self.needs[request] <= self.blocks

    def finish(self, now: float) -> None:
        for request in self.running.finish(self.steps):
            self.finished[request], self.last, self.reserved = now, now, self.reserved - self.needs[request]

    def result(self) -> tuple:
        return self.first, self.finished, self.steps_run, self.last

    def decoding_price(self, decoding: int):
        """``decoder(self.step, decoding)``, kept for every later step at that batch: ``priced``
        of a step with no chunk, to the bit."""
        price = self.decoders.get(decoding)
        if price is None:
            price = self.decoders[decoding] = decoder(self.step, decoding)
        return price

    def decode_run(self, now: float, overhead: float) -> float | None:
        """``decode_together`` of this engine alone (``alone``'s runs of steps that only decode)."""
        return decode_together([self], now, overhead)


def decode_together(engines: list, now: float, overhead: float) -> float | None:
    """The clock after the steps from ``now`` that only decode, run in one call, on ``engines``
    that step together (one alone, or ``lockstep``'s live replicas): the steps ``plan`` and
    ``apply`` would run one by one, each lasting the most an engine's ``decoder`` prices it at
    plus ``overhead`` (an engine ``idle`` at ``now`` steps with an empty batch, at no price), the
    clock advanced by the same additions, so every time is the same to the bit.  The run ends
    with the first step in which a sequence finishes, or before the first that starts once a
    request has arrived that an engine could then admit (an idle one's next); ``None`` where an
    engine prefills at ``now``, runs otherwise than by reserving (``Reserving``), or none runs.
    Between those events only the steps and the clock move: each engine's batch, blocks
    reserved and running sums stay as they are."""
    run = _decode_plan(engines, now)
    if run is None:
        return None
    price, steps, arrival = run
    durations = []
    while True:
        ran = len(durations)
        duration = timed(price(ran) + overhead)
        now += duration
        durations.append(duration)
        if ran + 1 >= steps or arrival <= now:
            break
    for engine in engines:
        decoding = engine.decoding = len(engine.running)
        engine.steps_run.extend((duration, decoding) for duration in durations)
        engine.steps += len(durations)
        engine.finish(now)
    return now


def _decode_plan(engines: list, now: float):
    """``(price, steps, arrival)`` of ``decode_together``'s run from ``now``: the price of its
    step ``k`` (from 0), the steps to the first in which a sequence finishes, and the first
    arrival that ends it; ``None`` where the step at ``now`` is not one that only decodes.  One
    engine, ``alone``'s every run (a few steps each, between events), is set up without the lists."""
    if len(engines) == 1:
        engine = engines[0]
        if not isinstance(engine, Reserving) or not engine.running or engine.prefills(now):
            return None
        running = engine.running
        cost, start = engine.decoding_price(len(running)), engine.steps
        arrival = engine.next_arrival() if engine.prefills(math.inf) else math.inf
        return (lambda ran: cost(running.context(start + ran))), running.heap[0][0] - start, arrival
    if not all(isinstance(engine, Reserving) for engine in engines):
        return None
    busy = [engine for engine in engines if not engine.idle(now)]
    if not busy or any(not engine.running or engine.prefills(now) for engine in busy):
        return None
    prices = [(engine.decoding_price(len(engine.running)), engine.running, engine.steps) for engine in busy]
    steps = min(engine.running.heap[0][0] - engine.steps for engine in busy)       # to the first finish
    arrival = min([engine.next_arrival() for engine in engines if engine not in busy]
                  + [engine.next_arrival() for engine in busy if engine.prefills(math.inf)], default=math.inf)
    return (lambda ran: max(cost(running.context(start + ran)) for cost, running, start in prices)), steps, arrival


class WholePrompts(Reserving):
    """An engine that prefills each prompt whole (``load.serve``): a step admits waiting prompts,
    first come first served, while the budget of ``max_tokens`` tokens (one a sequence decoding)
    holds them whole; the first that does not fit waits, and every prompt behind it, as
    TensorRT-LLM's micro-batch scheduler stops at it (a prompt longer than the budget is refused
    before: ``load.check_budget``)."""

    def __init__(self, step, outputs, times, runtime, blocks, needs, prompts):
        super().__init__(step, outputs, times, runtime, blocks, needs, prompts)
        self.admitted = 0

    def prefills(self, now: float) -> bool:
        """Whether the step that starts at ``now`` admits a prompt: the next has arrived and fits
        whole beside the sequences decoding (``plan``'s first admission)."""
        decoding = len(self.running)
        return self.nxt < len(self.times) and self.runtime.max_tokens - decoding >= self.prompts[self.nxt] \
            and self.fits(self.nxt, now, decoding)

    def plan(self, now: float) -> float:
        """Seconds of the step that starts at ``now``, before the step's fixed overhead (0 for an
        ``idle`` engine: a replica of a lockstep group with nothing to run)."""
        step, prompts, nxt = self.step, self.prompts, self.nxt
        decoding, context = len(self.running), self.running.context(self.steps)
        self.decoding, self.admitted, tokens = decoding, 0, 0
        if self.idle(now):
            return 0.0
        if not self.prefills(now):
            return self.decoding_price(decoding)(context)
        room, whole = self.runtime.max_tokens - decoding, []
        while (nxt + self.admitted < len(self.times) and room >= prompts[nxt + self.admitted]
               and self.fits(nxt + self.admitted, now, decoding + self.admitted)):
            room, whole = room - prompts[nxt + self.admitted], whole + [(0, prompts[nxt + self.admitted])]
            self.admitted, self.reserved = self.admitted + 1, self.reserved + self.needs[nxt + self.admitted]
        return priced(step, whole, decoding, context)

    def apply(self, now: float, duration: float) -> None:
        """The step ran and ended at ``now`` after ``duration`` seconds."""
        self.steps += 1
        self.steps_run.append((duration, self.decoding))       # one inter-token gap for each sequence decoding
        for request in range(self.nxt, self.nxt + self.admitted):   # their first token
            self.first[request] = now
            self.running.start(request, self.steps)
        self.nxt += self.admitted
        self.finish(now)


class ChunkedPrompts(Reserving):
    """An engine with chunked prefill (``load.serve``), as vLLM's V1 scheduler runs it: each step
    has a budget of ``max_tokens`` tokens; every running sequence decodes one token first, and what
    is left goes to prefill, to the prompts already begun (oldest first), then to newly admitted
    requests (first come first served, while ``max_batch`` sequences and the KV cache's blocks
    allow), each taking as many of its remaining prompt tokens as the budget leaves.  A step of
    ``t`` prompt tokens beside ``B`` decodes costs ``step(t / P, B, c)``: the prefill's price for
    ``t / P`` prompts (its products and activations in proportion, the weights read once).  A
    prompt's first token comes at the end of the step that prefills its last chunk; it decodes
    from the next."""

    def __init__(self, step, outputs, times, runtime, blocks, needs, prompts):
        super().__init__(step, outputs, times, runtime, blocks, needs, prompts)
        self.prefilling = deque()                  # [request, prompt tokens left], in admission order

    def waiting(self) -> bool:
        return not self.running and not self.prefilling

    def prefills(self, now: float) -> bool:
        """Whether the step that starts at ``now`` prefills: a prompt begun, or the next request
        arrived with budget and room left beside the sequences decoding (``plan``'s admission)."""
        decoding = len(self.running)
        return bool(self.prefilling) or (decoding < self.runtime.max_tokens and self.nxt < len(self.times)
                                         and self.fits(self.nxt, now, decoding))

    def plan(self, now: float) -> float:
        """Seconds of the step that starts at ``now``, as ``WholePrompts.plan``."""
        decoding, context = len(self.running), self.running.context(self.steps)
        self.decoding = decoding
        if self.idle(now):
            return 0.0
        room, chunk, chunks = self.runtime.max_tokens - decoding, 0, []
        for begun in self.prefilling:
            take = min(begun[1], room - chunk)
            chunks.append((self.prompts[begun[0]] - begun[1], take))
            begun[1], chunk = begun[1] - take, chunk + take
        while (chunk < room and self.nxt < len(self.times)
               and self.fits(self.nxt, now, decoding + len(self.prefilling))):
            take = min(self.prompts[self.nxt], room - chunk)
            chunks.append((0, take))
            self.prefilling.append([self.nxt, self.prompts[self.nxt] - take])
            chunk, self.nxt, self.reserved = chunk + take, self.nxt + 1, self.reserved + self.needs[self.nxt]
        return priced(self.step, chunks, decoding, context) if chunks else self.decoding_price(decoding)(context)

    def apply(self, now: float, duration: float) -> None:
        """The step ran and ended at ``now`` after ``duration`` seconds."""
        self.steps += 1
        self.steps_run.append((duration, self.decoding))       # one inter-token gap for each sequence decoding
        while self.prefilling and self.prefilling[0][1] == 0:  # prompts fill in order: the done ones lead
            request = self.prefilling.popleft()[0]
            self.first[request] = now
            self.running.start(request, self.steps)
        self.finish(now)


def alone(engine, overhead: float) -> tuple:
    """Run ``engine`` at its own pace, each step ``plan``'s seconds plus ``overhead``; its
    ``result``."""
    now, run = 0.0, getattr(engine, "decode_run", None)
    while not engine.done():
        if engine.idle(now):
            now = engine.next_arrival()
        after = run(now, overhead) if run is not None else None
        if after is not None:           # a run of steps that only decode (``Reserving.decode_run``)
            now = after
            continue
        duration = timed(engine.plan(now) + overhead)
        now += duration
        engine.apply(now, duration)
    return engine.result()


def lockstep(engines: list, overhead: float) -> list[tuple]:
    """Run ``engines`` (the replicas of one expert-parallel group) in lockstep: every step starts on
    all of them at once and lasts the longest their ``plan`` gives, plus ``overhead``; when none
    holds anything to run, the clock moves to the next arrival among them.  The ``result`` of each."""
    now = 0.0
    while live := [engine for engine in engines if not engine.done()]:
        if all(engine.idle(now) for engine in live):
            now = min(engine.next_arrival() for engine in live)
        after = decode_together(live, now, overhead)
        if after is not None:           # a run of steps that only decode on every replica
            now = after
            continue
        duration = timed(max(engine.plan(now) for engine in live) + overhead)
        now += duration
        for engine in live:
            engine.apply(now, duration)
    return [engine.result() for engine in engines]


def pipelined(engines: list, overhead: float, stages: int | None = None, shares=None) -> list[tuple]:
    """Run ``engines`` as the batches in flight of one pipeline of ``stages`` stages (vLLM's virtual
    engines, TensorRT-LLM's micro-batches; default one stage an engine, and fewer engines than
    stages where fewer requests came): each engine's step is a batch that passes through every
    stage in turn, holding each for its share of its ``plan``'s seconds plus ``overhead``
    (``shares``: each stage's, its share of the layers; default even), a stage holding one batch
    at a time.  The engine ready first (its last batch out of the last
    stage, or, idle, its next arrival) starts the next batch when the first stage is free; a batch
    behind a slower one waits at each stage for it, so a step's gap runs from entering the first
    stage to leaving the last.  The ``result`` of each.

    Two batches of 4 s over 2 stages: the second enters at 2 s, when the first leaves the first
    stage, and leaves at 6 s; a lone engine's batches would take 4 s each, one after another:

    >>> class Batch:                       # one step of 4 s, then done
    ...     def __init__(self): self.ends = []
    ...     def done(self): return len(self.ends) == 1
    ...     def idle(self, now): return False
    ...     def plan(self, now): return 4.0
    ...     def apply(self, now, duration): self.ends.append((now, duration))
    ...     def result(self): return self.ends
    >>> pipelined([Batch(), Batch()], 0.0)
    [[(4.0, 4.0)], [(6.0, 4.0)]]
    """
    stages = stages or len(engines)
    shares = [float(x) for x in shares] if shares is not None else [1 / stages] * stages
    free, ready = [0.0] * stages, [0.0] * len(engines)      # when each stage is free; when each engine is

    def ready_at(j: int) -> float:      # when engine j can start, the first stage aside (inf: done)
        engine = engines[j]
        if engine.done():
            return math.inf
        return ready[j] if not engine.idle(ready[j]) else engine.next_arrival()
    starts = [ready_at(j) for j in range(len(engines))]     # an engine's changes only when it steps
    while True:
        i, now = None, math.inf         # the first live engine of the earliest start
        for j, at in enumerate(starts):
            at = max(at, free[0])
            if at < now:
                i, now = j, at
        if i is None:
            break
        seconds = timed(engines[i].plan(now) + overhead)
        end = now
        for stage in range(stages):
            end = max(end, free[stage]) + seconds * shares[stage]
            free[stage] = end
        ready[i] = end
        engines[i].apply(end, end - now)
        starts[i] = ready_at(i)
    return [engine.result() for engine in engines]


def whole_prompt_steps(step, outputs, times, runtime, overhead, blocks, needs, prompts) -> tuple:
    """``WholePrompts`` run ``alone``: ``(first token times, last token times, [(step seconds,
    sequences decoding)], the last token's time)``."""
    return alone(WholePrompts(step, outputs, times, runtime, blocks, needs, prompts), overhead)


def chunked_steps(step, outputs, times, runtime, overhead, blocks, needs, prompts) -> tuple:
    """``ChunkedPrompts`` run ``alone``; returns as ``whole_prompt_steps``."""
    return alone(ChunkedPrompts(step, outputs, times, runtime, blocks, needs, prompts), overhead)
