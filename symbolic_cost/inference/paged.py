"""KV-cache blocks on demand, and preemption by recomputation when they run out.

``load.Runtime.allocation = "reserve"`` admits a request only when the pool holds the blocks of its
whole length (TensorRT-LLM's ``GUARANTEED_NO_EVICT`` scheduler), so nothing is ever evicted.
vLLM allocates instead as tokens are written: a request takes the blocks of the tokens it has, one
more block every ``block_tokens`` tokens, so far more requests run at once, until a step finds no
free block for the tokens it must write.  Then the scheduler preempts the running request of
lowest priority, the one scheduled last (first come first served), frees its blocks and puts it
back at the head of the waiting queue; when it is scheduled again its prompt and the tokens it had
generated are prefilled anew (vLLM V1's ``Scheduler.schedule`` with ``preemption_mode``
recompute, ``KVCacheManager.allocate_slots``; V1 has no swap).  ``steps`` runs that engine for
``load.serve`` (``allocation="on-demand"``).

A step, as V1 schedules it, within a budget of ``max_tokens`` tokens:

* every decoding sequence writes one token (a new block where its last one is full); while the free
  blocks fall short, the request scheduled last is preempted;
* the prompts being prefilled take their next chunks, oldest first, preempting from the tail when
  their blocks do not fit (a prompt may preempt itself);
* unless the step preempted, waiting requests are admitted in order, preempted ones first, while
  ``max_batch``, the budget and the free blocks allow (none is preempted to admit another); a
  waiting request prefills its prompt and the tokens it had generated (``P + g``), in chunks, or
  whole without chunked prefill (a recomputed prompt and its tokens longer than ``max_tokens`` then
  alone, chunk by chunk; a fresh prompt longer than it is refused, ``load.check_budget``).

The running requests are always the decoding ones, in the order they were scheduled, then the
prompts being prefilled (a prompt admitted later finishes its prefill later), so the decodes are
served together and the tail is always the last prompt admitted.  vLLM's prefix cache (on by
default in V1) would let a recomputed prompt reuse its blocks where no other request took them;
that is not modelled: a recomputation prefills every token again.

A fresh prompt's last chunk yields its first token; a recomputed one yields its next token, and
the time since its previous token is one inter-token gap of its own.  A step of ``t`` prefilled
tokens is priced as ``load.chunked_steps`` prices it, ``step(t / P, B, c)``: a recomputed prompt
longer than ``P`` at the per-token price of ``P`` (its attention over the longer context is not
priced apart).
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
from dataclasses import dataclass

from symbolic_cost.checks import count
from symbolic_cost.inference.batching import alone, next_time, priced


@dataclass(frozen=True)
class Pages:
    """How a sequence fills the pool, as vLLM's hybrid KV-cache manager pages it, in blocks of one
    layer's ``block`` tokens: ``full`` layers (in the least whole numbers of their share) take a block
    for every ``block`` tokens cached; ``sliding`` layers hold at most ``cap`` blocks, those of their
    window, ``cdiv(w - 1, block) + 1`` (its ``SlidingWindowManager`` frees the blocks wholly before
    the window; a window of ``w - 1`` tokens spans at most that many).  A block of the pool (every
    layer's ``block`` tokens, ``load.StepModel.cache_blocks``) is ``full + sliding`` of these.  Without
    sliding layers, ``Pages(block)``: one a block of the pool, ``ceil(tokens / block)`` a sequence.

    >>> Pages(16).of(33), Pages(16, full=1, sliding=1, cap=9).of(4000)     # GPT-OSS: half its layers slide
    (3, 259)
    """

    block: int
    full: int = 1
    sliding: int = 0
    cap: int = 0

    def __post_init__(self):
        count(self.block, "block")
        for name in ("full", "sliding", "cap"):
            count(getattr(self, name), name, minimum=0)

    @property
    def per_pool_block(self) -> int:
        return self.full + self.sliding

    def of(self, tokens: int) -> int:
        """Blocks a sequence of ``tokens`` cached tokens holds."""
        if type(tokens) is not int or tokens < 0:       # the simulation's every step passes a plain int
            tokens = count(tokens, "tokens", minimum=0)
        opened = -(-tokens // self.block)
        return self.full * opened + self.sliding * min(opened, self.cap)


class Running:
    """The decoding sequences: for each, the step ``start`` such that it had ``steps - start + 1``
    tokens after step ``steps`` (``load.Decoding``'s convention: a recomputed request with ``g``
    tokens resumed at step ``s`` has ``start = s - g``), so that a request of ``outputs[request]``
    tokens ends at step ``start + outputs[request] - 1``; the order they were scheduled in (the
    preemption order), per block phase how many start a new block at a step, and the sums of their
    prompts (``prompt_sum``) and output lengths (``length_sum``)."""

    def __init__(self, prompts: list[int], pages: Pages, outputs: list[int]):
        self.prompts, self.block, self.outputs, self.pages = prompts, pages.block, outputs, pages
        self.start, self.order, self.heap = {}, deque(), []
        self.start_sum, self.prompt_sum, self.length_sum, self.phases = 0, 0, 0, Counter()
        # the sequences whose sliding layers still open blocks (fewer than ``pages.cap`` each), by
        # phase, and when each stops: ``cap x block`` tokens cached
        self.young, self.young_phases, self.ageing = {}, Counter(), []

    def __len__(self) -> int:
        return len(self.start)

    def add(self, request: int, start: int, steps: int = 0) -> None:
        """``request`` decodes from step ``steps + 1`` (what its sliding layers hold is counted from
        there), ``start`` as the class says."""
        self.start[request] = start
        self.order.append(request)
        heapq.heappush(self.heap, (start + self.outputs[request] - 1, start, request))
        self.start_sum += start
        self.length_sum += self.outputs[request]
        self.prompt_sum += self.prompts[request]
        phase = (self.prompts[request] - start) % self.block
        self.phases[phase] += 1
        old_at = self.pages.cap * self.block - self.prompts[request] + start     # the step its cache reaches cap blocks
        if self.pages.sliding and old_at > steps:
            self.young[request] = phase
            self.young_phases[phase] += 1
            heapq.heappush(self.ageing, (old_at, start, request))

    def remove(self, request: int) -> None:
        start = self.start.pop(request)
        self.start_sum -= start
        self.length_sum -= self.outputs[request]
        self.prompt_sum -= self.prompts[request]
        self.phases[(self.prompts[request] - start) % self.block] -= 1      # its heap entry is dropped when met
        if request in self.young:
            self.young_phases[self.young.pop(request)] -= 1

    def cached(self, request: int, steps: int) -> int:
        """Tokens in the cache of ``request`` before step ``steps + 1``."""
        return self.prompts[request] + steps - self.start[request]

    def new_blocks(self, steps: int) -> int:
        """Blocks step ``steps + 1`` opens: for each sequence whose next token starts a block, one in
        each full layer, and one in each sliding layer while its window's blocks are not all open."""
        while self.ageing and self.ageing[0][0] <= steps:
            _, start, request = heapq.heappop(self.ageing)
            if request in self.young and self.start.get(request) == start:
                self.young_phases[self.young.pop(request)] -= 1
        phase = (-steps) % self.block
        return self.pages.full * self.phases[phase] + self.pages.sliding * self.young_phases[phase]

    def context(self, steps: int) -> float:
        """Mean cached tokens before step ``steps + 1`` (0 with none)."""
        return self.prompt_sum / len(self) + steps - self.start_sum / len(self) if self.start else 0.0

    def finish(self, steps: int) -> list[int]:
        """The requests whose last token came at step ``steps``, removed."""
        done = []
        while self.heap and self.heap[0][0] <= steps:
            _, start, request = heapq.heappop(self.heap)
            if self.start.get(request) == start:
                self.remove(request)
                done.append(request)
        return done


class Engine:
    """One engine's scheduler state (see the module docstring): ``steps`` drives it; its pool of
    ``blocks`` whole blocks counted in the ``pages`` (``Pages``) a sequence fills."""

    def __init__(self, times, runtime, blocks, outputs, prompts, pages: Pages | None = None):
        self.prompts, self.times, self.runtime = prompts, times, runtime
        self.pages = pages or Pages(runtime.block_tokens)
        self.blocks_of = self.pages.of
        self.free = blocks * self.pages.per_pool_block
        self.running = Running(prompts, self.pages, outputs)
        self.prefilling = []                   # [request, tokens left, tokens cached, tokens generated before]
        self.waiting = deque()                 # (request, tokens generated before), preempted first
        self.last_token = {}                   # a preempted request's last token time
        self.arrived, self.steps, self.now, self.preempted = 0, 0, 0.0, False
        self.chunks = []                       # (offset, take) of the step's prompt tokens

    def held(self) -> int:
        return len(self.running) + len(self.prefilling)

    def victim(self) -> int:
        """The request scheduled last (a prefilling one if any: they were scheduled after every
        decoding sequence), preempted: its blocks freed, back at the head of the queue."""
        self.preempted = True
        if self.prefilling:
            request, _, cached, before = self.prefilling.pop()
            self.free += self.blocks_of(cached)
            self.waiting.appendleft((request, before))
            return request
        while self.running.order[-1] not in self.running.start:      # dropped entries of finished requests
            self.running.order.pop()
        request = self.running.order.pop()
        cached = self.running.cached(request, self.steps)
        generated = self.steps - self.running.start[request] + 1
        self.running.remove(request)
        self.free += self.blocks_of(cached)
        self.waiting.appendleft((request, generated))
        self.last_token[request] = self.now           # its last token came at the end of the last step
        return request

    def decode(self) -> None:
        """Room for every decoding sequence's token, preempting from the tail while it is short."""
        while len(self.running) and self.running.new_blocks(self.steps) > self.free:
            self.victim()
        self.free -= self.running.new_blocks(self.steps)

    def prefill(self, room: int) -> int:
        """The chunks of the prompts being prefilled within ``room`` tokens, oldest first, preempting
        from the tail where their blocks do not fit: the tokens scheduled."""
        chunk, index = 0, 0
        while index < len(self.prefilling) and chunk < room:
            entry = self.prefilling[index]
            take = min(entry[1], room - chunk)
            more = self.blocks_of(entry[2] + take) - self.blocks_of(entry[2])
            while more > self.free and entry in self.prefilling:
                self.victim()
            if entry not in self.prefilling:
                break
            self.free -= more
            self.chunks.append((entry[2], take))
            entry[1], entry[2], chunk, index = entry[1] - take, entry[2] + take, chunk + take, index + 1
        return chunk

    def admit(self, room: int, chunk: int, chunked: bool) -> int:
        """Waiting requests admitted while the limits and the free blocks allow: the tokens added.
        None is admitted in a step that preempted (vLLM's ``if not preempted_reqs``), nor, without
        chunked prefill, beside a long prompt still being prefilled chunk by chunk."""
        while self.arrived < len(self.times) and self.times[self.arrived] <= self.now:
            self.waiting.append((self.arrived, 0))
            self.arrived += 1
        if self.preempted or (not chunked and any(entry[1] for entry in self.prefilling)):
            return chunk
        while self.waiting and chunk < room and self.held() < self.runtime.max_batch:
            request, before = self.waiting[0]
            todo = self.prompts[request] + before
            alone = todo > self.runtime.max_tokens and not self.prefilling and chunk == 0
            if not chunked and not alone and todo > room - chunk:
                break
            take = min(todo, room - chunk)
            if self.blocks_of(take) > self.free:
                break
            self.waiting.popleft()
            self.free -= self.blocks_of(take)
            self.prefilling.append([request, todo - take, take, before])
            self.chunks.append((0, take))
            chunk += take
        return chunk

    def yielded(self, first: list, gaps: list) -> list:
        """Prompts whose last chunk ran: fresh ones yield their first token, recomputed ones their
        next (a gap of their own); all start decoding.  Returns the requests that started."""
        started = []
        while self.prefilling and self.prefilling[0][1] == 0:
            request, _, _, before = self.prefilling.pop(0)
            if before == 0:
                first[request] = self.now
            else:
                gaps.append((self.now - self.last_token.pop(request), 1))
            self.running.add(request, self.steps - before, self.steps)
            started.append(request)
        return started


class OnDemand:
    """The engine of the module docstring as ``inference.batching`` drives engines: ``plan`` a step
    at a time and ``apply`` its end, alone or in lockstep with other replicas; ``needs`` (the
    blocks of each whole request) is not reserved."""

    def __init__(self, step, outputs, times, runtime, blocks, needs, prompts):
        self.step, self.outputs, self.prompts = step, outputs, prompts
        pages = getattr(step, "pages", None)
        self.engine = Engine(times, runtime, blocks, outputs, prompts, pages(runtime.block_tokens) if pages else None)
        requests = len(times)
        self.first, self.finished, self.gaps, self.last, self.decoding = [0.0] * requests, [0.0] * requests, [], 0.0, 0

    def done(self) -> bool:
        engine = self.engine
        return engine.arrived >= len(engine.times) and not engine.waiting and not engine.held()

    def idle(self, now: float) -> bool:
        """Nothing held or waiting, and the next request not arrived by ``now``."""
        engine = self.engine
        return not engine.held() and not engine.waiting and self.next_arrival() > now

    def next_arrival(self) -> float:
        return next_time(self.engine.times, self.engine.arrived)

    def plan(self, now: float) -> float:
        """Seconds of the step that starts at ``now``: the decodes' blocks (preempting where they
        are short), the prompts' chunks and the admissions (0 for an ``idle`` engine)."""
        engine, self.decoding = self.engine, 0
        if self.idle(now):
            return 0.0
        engine.now, engine.preempted = now, False
        engine.decode()
        self.decoding, context = len(engine.running), engine.running.context(engine.steps)
        room, engine.chunks = engine.runtime.max_tokens - self.decoding, []
        engine.admit(room, engine.prefill(room), engine.runtime.chunked)
        return priced(self.step, engine.chunks, self.decoding, context)

    def apply(self, now: float, duration: float) -> None:
        """The step ran and ended at ``now`` after ``duration`` seconds."""
        engine = self.engine
        engine.now, engine.steps = now, engine.steps + 1
        self.gaps.append((duration, self.decoding))       # one inter-token gap for each sequence decoding
        engine.yielded(self.first, self.gaps)
        for request in engine.running.finish(engine.steps):
            self.finished[request] = self.last = now
            engine.free += engine.blocks_of(self.prompts[request] + self.outputs[request] - 1)

    def result(self) -> tuple:
        return self.first, self.finished, self.gaps, self.last


def steps(step, outputs, times, runtime, overhead, blocks, needs, prompts):
    """The steps of an engine that allocates KV blocks on demand and preempts by recomputation (see
    the module docstring), for requests of ``prompts`` and ``outputs`` tokens each, run alone
    (``inference.batching.alone``); ``needs`` (the blocks of each whole request) is not reserved.
    Returns as ``load.whole_prompt_steps``."""
    return alone(OnDemand(step, outputs, times, runtime, blocks, needs, prompts), overhead)
