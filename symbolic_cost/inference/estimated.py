"""SGLang's scheduler: requests admitted by an estimate of the tokens they will still write,
prefill before decode, and retraction when the KV cache runs short.

``load.Runtime.allocation = "estimate"``.  SGLang gives KV-cache slots a token at a time (pages of
one token), as a request writes them, and admits a waiting request when its prompt and its whole
(clipped) output fit in what the running requests are expected to leave: each running request is
charged only ``r`` of the tokens it may still write, where the ratio ``r`` starts at 0.7, falls by
``(0.7 - 0.098) / 600`` every decode step to 0.098 (0.7 x 0.14), and jumps back up when the
estimate proved wrong.  When a decode step finds fewer free slots than decoding requests, the
scheduler retracts requests (the one with the fewest generated tokens first) until the rest fit,
frees their slots, puts them back at the head of the queue (they prefill their prompt and the
tokens they had generated again) and resets the ratio to what the remaining requests have shown:
``(tokens generated + 20 x requests) / tokens asked``, at most 1.

Sources (``sgl-project/sglang``, ``python/sglang/srt``): ``environ.py`` (``SGLANG_INIT_NEW_TOKEN_RATIO``
0.7, ``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR`` 0.14, ``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS`` 600,
``SGLANG_RETRACT_DECODE_STEPS`` 20, ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION`` 4,096);
``managers/schedule_policy.py`` (``PrefillAdder``: the running requests' offset
``min(max_new - generated, 4096) x r``; a request is refused once its extend plus its clipped
``max_new`` reaches what remains; one chunked request a batch); ``managers/schedule_batch.py``
(``retract_decode``: sorted by generated tokens, the fewest retracted first).

A scheduling round, as ``Scheduler.get_next_batch_to_run`` runs it with its defaults (mixed
chunks off):

* a prefill batch if any waiting request (or the chunked one) can run: the chunked request's next
  chunk, then waiting requests in order while ``max_batch`` sequences, the chunk budget
  (``max_tokens``, SGLang's ``chunked_prefill_size``) and the estimate allow, the first that does
  not fit whole in the budget cut to it (the chunked request); the decoding requests wait;
* else a decode step of every decoding request, one slot each, retracting first if short.

A request decoding while prefill batches ran waited for them: its next inter-token gap is their
seconds and the decode step's together (SGLang's known inter-token spikes under arrivals).

A prefill step of ``t`` tokens costs ``step(t / P, 0, c)``, a decode step ``step(0, B, c)``
(``load.chunked_steps``' pricing; a re-prefilled request longer than ``P`` at the per-token price of
``P``).  A prompt's last chunk yields its first token (a re-prefilled one its next, a gap of its
own).  The radix (prefix) cache is not modelled: the load tests' prompts share no prefix.

Sliding-window layers are counted whole, a slot of every layer a token: SGLang's own pool where
it turns its hybrid SWA memory off (Gemma 2 and 3 always, GPT-OSS under the ``trtllm_mha``
backend, Blackwell's default).  Where it keeps it on, its window layers have a pool of their own,
``swa_full_tokens_ratio`` (0.8) of the full layers' tokens, freed as the window passes
(``model_runner``'s ``full_max_total_num_tokens = memory / (full bytes + 0.8 window bytes)``):
more tokens than counted here, which this engine does not model.
"""

from __future__ import annotations

from collections import deque

from symbolic_cost.checks import InputError
from symbolic_cost.inference.batching import alone, next_time, priced
from symbolic_cost.inference.paged import Pages, Running

INIT_RATIO = 0.7
MIN_RATIO = INIT_RATIO * 0.14
DECAY = (INIT_RATIO - MIN_RATIO) / 600
RETRACT_STEPS = 20
CLIP = 4096


class Scheduler:
    """One SGLang scheduler's state (see the module docstring): ``steps`` drives it."""

    def __init__(self, times, runtime, tokens, outputs, prompts):
        self.prompts, self.times, self.runtime, self.outputs = prompts, times, runtime, outputs
        self.free, self.ratio = tokens, INIT_RATIO
        self.clipped = max(outputs) > CLIP     # some request's estimate is clipped
        self.running = Running(prompts, Pages(1), outputs)
        self.waiting = deque()                 # (request, tokens generated before), retracted first
        self.chunked = None                    # [request, tokens left, tokens cached, generated before]
        self.batch = []                        # this prefill's requests, as ``chunked``
        self.last_token = {}
        self.arrived, self.decodes, self.now = 0, 0, 0.0     # decode steps run: the decoding requests' clock

    def generated(self, request: int) -> int:
        return self.decodes - self.running.start[request] + 1

    def remaining_estimate(self) -> float:
        """Slots the scheduler counts as still free: the free ones less ``r`` of what each decoding
        request may still write (``PrefillAdder``'s ``rem_total_tokens``)."""
        if not self.clipped:                    # sum(O - g) from the running sums of lengths and starts
            ahead = self.running.length_sum - len(self.running) * (self.decodes + 1) + self.running.start_sum
        else:
            ahead = sum(min(self.outputs[request] - self.generated(request), CLIP) for request in self.running.start)
        return self.free - ahead * self.ratio

    def prefill(self) -> int:
        """The tokens of the prefill batch this round (0: none can run): the chunked request's next
        chunk, then waiting requests while the limits and the estimate allow."""
        while self.arrived < len(self.times) and self.times[self.arrived] <= self.now:
            self.waiting.append((self.arrived, 0))
            self.arrived += 1
        self.batch = []
        if not self.waiting and self.chunked is None:
            return 0
        room, left = self.runtime.max_tokens, self.remaining_estimate()
        if self.chunked is not None:
            take = min(self.chunked[1], room)
            self.batch.append(self._take(self.chunked, take))
            room, left = room - take, left - take
        while self.waiting and room > 0 and len(self.running) + len(self.batch) < self.runtime.max_batch:
            request, before = self.waiting[0]
            extend, ahead = self.prompts[request] + before, min(self.outputs[request] - before, CLIP)
            if extend + ahead >= left or (self.chunked is not None and extend > room):
                break
            self.waiting.popleft()
            entry = [request, extend, 0, before]
            self.batch.append(self._take(entry, min(extend, room)))
            room, left = room - min(extend, room), left - extend - ahead
        return sum(taken for _, taken in self.batch)

    def _take(self, entry: list, take: int) -> tuple:
        entry[1], entry[2] = entry[1] - take, entry[2] + take
        self.free -= take
        self.chunked = entry if entry[1] else None
        return entry, take

    def retract(self) -> bool:
        """Room for every decoding request's next slot, retracting the one with the fewest generated
        tokens while short; the ratio reset where any was (else decayed).  Whether any was."""
        retracted = False
        while len(self.running) > 1 and self.free < len(self.running):
            request = max(self.running.start, key=lambda r: (self.running.start[r], r))   # fewest generated
            generated = self.generated(request)
            self.free += self.running.cached(request, self.decodes)
            self.running.remove(request)
            self.waiting.appendleft((request, generated))
            self.last_token[request] = self.now
            retracted = True
        if retracted:
            asked = self.running.length_sum
            done = sum(self.generated(r) for r in self.running.start)
            self.ratio = min(1.0, (done + RETRACT_STEPS * len(self.running)) / asked)
        else:
            self.ratio = max(self.ratio - DECAY, MIN_RATIO)
        return retracted

    def yielded(self, first: list, gaps: list, finished: list) -> bool:
        """The batch's requests whose prefill ended: fresh ones yield their first token,
        re-prefilled ones their next (a gap of their own); they start decoding, or leave where
        that token was their last (their prompt and tokens freed).  Whether any left."""
        left_now = False
        for entry, _ in self.batch:
            request, left, cached, before = entry
            if left:
                continue
            if before == 0:
                first[request] = self.now
            else:
                gaps.append((self.now - self.last_token.pop(request), 1))
            if before + 1 >= self.outputs[request]:
                finished[request], left_now = self.now, True
                self.free += cached
            else:
                self.running.add(request, self.decodes - before, self.decodes)
        return left_now


def waited(stalls: list, decoding: int, duration: float) -> list:
    """The inter-token gaps of a decode step of ``duration`` after prefill steps ``stalls``
    (``(requests decoding when it ran, its seconds)``, in order): the requests that were decoding
    at a prefill waited for it and every later one (those that joined later, for the later ones
    alone), counted among the ``decoding`` that remain (a retraction takes the latest first).

    >>> waited([(1, 2.0), (3, 0.5)], 4, 1.0)
    [(3.5, 1), (1.5, 2), (1.0, 1)]
    """
    out, before, left = [], 0, sum(seconds for _, seconds in stalls)
    for count, seconds in stalls:
        group = min(count, decoding) - min(before, decoding)
        out.append((left + duration, group))
        before, left = count, left - seconds
    return out + [(duration, decoding - min(before, decoding))]


class Estimated:
    """The scheduler of the module docstring as ``inference.batching`` drives engines: each step a
    prefill round or a decode round, ``plan``'d and ``apply``'d, alone or in lockstep with other
    replicas (a decode round beside another replica's prefill lasts as long as that prefill);
    ``needs`` (the blocks of each whole request) is only the admission's bound through the
    estimate."""

    def __init__(self, step, outputs, times, runtime, blocks, needs, prompts):
        self.step, self.outputs, self.prompts = step, outputs, prompts
        self.engine = Scheduler(times, runtime, blocks * runtime.block_tokens, outputs, prompts)
        prompt, output_tokens = max(zip(prompts, outputs), key=lambda pair: pair[0] + min(pair[1], CLIP))
        if prompt + min(output_tokens, CLIP) >= self.engine.free:
            raise InputError(f"a request of {prompt:,} prompt and {output_tokens:,} output tokens never fits SGLang's "
                             f"admission, which needs them below the {self.engine.free:,} slots of the KV cache: a "
                             f"larger tensor or pipeline degree, a smaller KV format (--kv-dtype) or a shorter "
                             f"request", "memory_fraction")
        requests = len(times)
        self.first, self.finished, self.gaps, self.last = [0.0] * requests, [0.0] * requests, [], 0.0
        self.stalls = []                       # (requests decoding, seconds) of each prefill since a decode
        self.round, self.decoding = None, 0

    def held(self) -> bool:
        engine = self.engine
        return bool(len(engine.running) or engine.waiting or engine.chunked is not None)

    def done(self) -> bool:
        return self.engine.arrived >= len(self.engine.times) and not self.held()

    def idle(self, now: float) -> bool:
        """Nothing running, waiting or being prefilled, and the next request not arrived by ``now``."""
        return not self.held() and self.next_arrival() > now

    def next_arrival(self) -> float:
        return next_time(self.engine.times, self.engine.arrived)

    def plan(self, now: float) -> float:
        """Seconds of the round that starts at ``now``: a prefill if any waiting request (or the
        chunked one) can run, else a decode of every decoding request (0 for an ``idle`` engine)."""
        engine, step, self.round = self.engine, self.step, None
        if self.idle(now):
            return 0.0
        engine.now = now
        tokens = engine.prefill()
        if tokens:                             # the decoding requests wait: they write nothing
            self.round = "prefill"
            chunks = [(entry[2] - take, take) for entry, take in engine.batch]
            return priced(step, chunks, 0, engine.running.context(engine.decodes))
        if not len(engine.running):             # an empty engine that admits nothing never will
            stuck = engine.waiting[0][0] if engine.waiting else 0
            raise InputError(f"a retracted request of {self.prompts[stuck]:,} prompt and {self.outputs[stuck]:,} "
                             f"output tokens no longer fits SGLang's admission in the {engine.free:,} slots of the "
                             f"KV cache (its clipped estimate grew with the tokens it had written): a larger KV "
                             f"cache or a shorter request", "memory_fraction")
        engine.retract()
        self.round, self.decoding = "decode", len(engine.running)
        context = engine.running.context(engine.decodes)
        engine.free -= self.decoding
        return step(0, self.decoding, context)

    def apply(self, now: float, duration: float) -> None:
        """The round ran and ended at ``now`` after ``duration`` seconds."""
        engine = self.engine
        engine.now = now
        if self.round == "prefill":
            self.stalls.append((len(engine.running), duration))
            if engine.yielded(self.first, self.gaps, self.finished):
                self.last = now
        elif self.round == "decode":
            engine.decodes += 1
            self.gaps += waited(self.stalls, self.decoding, duration)
            self.stalls = []
            for request in engine.running.finish(engine.decodes):
                self.finished[request] = self.last = now
                engine.free += self.prompts[request] + self.outputs[request] - 1

    def result(self) -> tuple:
        return self.first, self.finished, self.gaps, self.last


def steps(step, outputs, times, runtime, overhead, blocks, needs, prompts):
    """The steps of an SGLang scheduler (see the module docstring), for requests of ``prompts`` and
    ``outputs`` tokens each, run alone (``inference.batching.alone``); ``needs`` (the blocks of
    each whole request) is only the admission's bound through the estimate.  Returns as
    ``load.whole_prompt_steps``."""
    return alone(Estimated(step, outputs, times, runtime, blocks, needs, prompts), overhead)
