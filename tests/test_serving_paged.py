"""KV-cache blocks on demand with preemption by recomputation (``inference.paged``), against a case
worked by hand and against vLLM V1's scheduling loop written out request by request below (every
running request in turn, its blocks counted from its cached tokens each step), not from the
library's bookkeeping."""

import math
import random
from collections import deque
from dataclasses import replace

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.inference import paged
from symbolic_cost.inference.load import Runtime, serve

from serving_steps import Constant

ON_DEMAND = Runtime(step_overhead=0, request_overhead=0, kernel_overhead=0, chunked=True, allocation="on-demand",
                    block_tokens=2, max_batch=8, max_tokens=64)


class Pooled(Constant):
    """A constant step whose KV cache holds ``blocks`` blocks, whatever their size."""

    def __init__(self, seconds, prompt, blocks):
        super().__init__(seconds, prompt)
        self.blocks = blocks

    def cache_blocks(self, block_tokens, memory_fraction, memory_of="free"):
        return self.blocks


def test_two_requests_in_four_blocks_by_hand():
    """P = 4, O = 3, blocks of 2 tokens, a pool of 4, 1 s a step, both at t = 0.  Reserving, the
    second waits for the first's 4 blocks: first tokens at 1 and 4 s, done at 3 and 6 s.  On
    demand both prefill in step 1 (2 blocks each: first tokens at 1 s); step 2's tokens open a
    block each, none is free, so the second is preempted (its 2 blocks freed) and the first
    writes on; the second needs 3 blocks for its 5 tokens, free once the first leaves at 3 s
    (3 blocks freed): recomputed in step 4 (its second token at 4 s, 3 s after its first) and
    done at 5 s.  Mean inter-token gap (1 + 1 + 3 + 1) / 4."""
    step = Pooled(1.0, 4, 4)
    reserved = serve(step, 3, None, 2, replace(ON_DEMAND, allocation="reserve"))
    assert (reserved.mean_ttft, reserved.mean_e2e) == (2.5, 4.5)
    load = serve(step, 3, None, 2, ON_DEMAND)
    assert (load.mean_ttft, load.mean_e2e, load.mean_itl) == (1.0, 4.0, 1.5)
    assert load.p99_itl == pytest.approx(3.0, abs=0.1)


def test_a_step_that_preempts_admits_none():
    """Blocks of one token, P = 2, O = 6, 4 tokens a step, a pool of 10: both prompts fill in
    step 1 (4 blocks) and decode in steps 2-4 (2 blocks a step), leaving none.  Step 5 preempts
    the second (5 blocks back: its 2 + 3 tokens) and the first writes its token.  The freed
    blocks would hold a 3-token chunk of the second's 6 to recompute, but a step that preempted
    admits none (vLLM's ``if not preempted_reqs``): step 5 decodes the first alone (over its 5
    tokens), and step 6 takes 3 of the second's tokens."""
    step = Pooled(1.0, 2, 10)
    serve(step, 6, None, 2, replace(ON_DEMAND, block_tokens=1, max_tokens=4))
    assert step.calls[4:6] == [(0.0, 1, 5.0), (1.5, 1, 6.0)]


def v1_reference(prompts, outputs, block, pool, runtime, times, size, groups=(1, 0), window=None):
    """vLLM V1's ``Scheduler.schedule`` loop (recompute preemption, FCFS), request by request, each
    request of ``prompts`` tokens ending after its ``outputs`` tokens (a step of ``t`` prompt tokens
    priced as ``t / size`` prompts): ``(first token times, last token times, inter-token gaps, the
    step calls)``.  ``groups``: the KV-cache groups of its hybrid manager, ``(full, sliding)`` layer
    groups, a pool block holding one block of each, the sliding ones' at most the blocks a window of
    ``window - 1`` tokens can touch, ``cdiv(window - 1, block) + 1``; every request's blocks counted
    again from its cached tokens at every step."""
    n = len(times)
    cached, generated = [0] * n, [0] * n
    running, waiting = [], deque()
    first, finished, gaps, calls, last_token = [0.0] * n, [0.0] * n, [], [], {}
    now, arrived = 0.0, 0
    full, sliding = groups
    pool *= full + sliding

    def pages(tokens):
        opened = math.ceil(tokens / block)
        return full * opened + (sliding * min(opened, math.ceil((window - 1) / block) + 1) if sliding else 0)

    def held(r):
        return pages(cached[r])

    while arrived < n or waiting or running:
        if not running and not waiting and times[arrived] > now:
            now = times[arrived]
        while arrived < n and times[arrived] <= now:
            waiting.append(arrived)
            arrived += 1
        budget, scheduled, preempted = runtime.max_tokens, {}, False
        free = pool - sum(held(r) for r in running)
        index = 0
        while index < len(running) and budget > 0:
            r = running[index]
            take = min(prompts[r] + generated[r] - cached[r], budget)
            more = pages(cached[r] + take) - held(r)
            while more > free:
                victim = running.pop()
                preempted = True
                free += held(victim)              # the tail: not yet scheduled this step
                if generated[victim] and victim not in last_token:
                    last_token[victim] = now
                cached[victim] = 0
                waiting.appendleft(victim)
                if victim == r:
                    break
            if r not in running:
                break
            free -= more
            scheduled[r], budget, index = take, budget - take, index + 1
        if not preempted:
            while waiting and budget > 0 and len(running) < runtime.max_batch:
                r = waiting[0]
                todo = prompts[r] + generated[r]
                if not runtime.chunked and todo > budget:
                    break
                take = min(todo, budget)
                if pages(take) > free:
                    break
                waiting.popleft()
                free -= pages(take)
                running.append(r)
                scheduled[r], budget = take, budget - take
        decoding = [r for r in running if cached[r] >= prompts[r] + generated[r] - 1 and generated[r]]
        prefilled = sum(t for r, t in scheduled.items() if r not in decoding)
        context = sum(cached[r] for r in decoding) / len(decoding) if decoding else 0.0
        calls.append((prefilled / size, len(decoding), context))
        now += 1.0
        gaps.append((1.0, len(decoding)))
        for r, take in scheduled.items():
            cached[r] += take
            if cached[r] == prompts[r] + generated[r]:            # its last computed token: a new one sampled
                if generated[r] == 0:
                    first[r] = now
                elif r not in decoding:
                    gaps.append((now - last_token.pop(r), 1))
                generated[r] += 1
        for r in [r for r in running if generated[r] == outputs[r]]:
            running.remove(r)
            finished[r] = now
    return first, finished, gaps, calls


@pytest.mark.parametrize("seed", range(40))
def test_the_engine_is_vllms_loop(seed):
    rng = random.Random(seed)
    prompt, output, block = rng.randint(1, 40), rng.randint(1, 30), rng.choice([1, 2, 4, 16])
    runtime = replace(ON_DEMAND, block_tokens=block, max_batch=rng.randint(1, 12), max_tokens=rng.randint(48, 120),
                      chunked=rng.random() < 0.7)
    requests = rng.randint(1, 25)
    times = sorted(round(rng.uniform(0, 10), 1) for _ in range(requests))
    # half the engines serve requests of one length, half of lengths of their own
    outputs = [output] * requests if seed % 2 else [rng.randint(1, 30) for _ in range(requests)]
    prompts = [prompt] * requests if seed % 2 else [rng.randint(1, 40) for _ in range(requests)]
    needs = [math.ceil((p + o) / block) for p, o in zip(prompts, outputs)]
    pool = rng.randint(max(needs), 4 * max(needs))
    step = Pooled(1.0, prompt, pool)
    first, finished, gaps, last = paged.steps(step, outputs, times, runtime, 0.0, pool, needs, prompts)
    want_first, want_finished, want_gaps, want_calls = v1_reference(prompts, outputs, block, pool, runtime, times,
                                                                    prompt)
    assert (first, finished) == (want_first, want_finished)
    assert sorted(g for g in gaps if g[1]) == sorted(g for g in want_gaps if g[1])
    assert [(p, d) for p, d, _ in step.calls] == [(p, d) for p, d, _ in want_calls]
    assert [c for _, _, c in step.calls] == pytest.approx([c for _, _, c in want_calls])


class Windowed(Pooled):
    """``Pooled`` for a model whose ``sliding`` of every ``full + sliding`` layers hold a window."""

    def __init__(self, seconds, prompt, blocks, full, sliding, window):
        super().__init__(seconds, prompt, blocks)
        self.full, self.sliding, self.window = full, sliding, window

    def pages(self, block_tokens):
        return paged.Pages(block_tokens, self.full, self.sliding, -(-(self.window - 1) // block_tokens) + 1)


@pytest.mark.parametrize("seed", range(30))
def test_sliding_window_layers_hold_their_windows_blocks_as_vllms_loop(seed):
    """vLLM's hybrid KV-cache manager: a model's sliding-window layers hold only their window's
    blocks, so far more of its requests run at once (on-demand blocks once counted every layer's
    blocks for every token: GPT-OSS-20B, 2,000 + 2,000 tokens, preempted 901 times where reserving
    the same pool served 25 % more)."""
    rng = random.Random(1000 + seed)
    block = rng.choice([1, 2, 4])
    full, sliding, window = rng.choice([(0, 1), (1, 1), (1, 2), (1, 5)]) + (rng.randint(block + 1, 12),)
    runtime = replace(ON_DEMAND, block_tokens=block, max_batch=rng.randint(1, 12), max_tokens=rng.randint(48, 120),
                      chunked=rng.random() < 0.7)
    requests = rng.randint(1, 25)
    times = sorted(round(rng.uniform(0, 10), 1) for _ in range(requests))
    outputs, prompts = [rng.randint(1, 30) for _ in range(requests)], [rng.randint(1, 40) for _ in range(requests)]
    most = max(math.ceil((p + o) / block) for p, o in zip(prompts, outputs))
    pool = rng.randint(most, 2 * most)
    step = Windowed(1.0, prompts[0], pool, full, sliding, window)
    got = paged.steps(step, outputs, times, runtime, 0.0, pool, [0] * requests, prompts)
    want = v1_reference(prompts, outputs, block, pool, runtime, times, prompts[0], (full, sliding), window)
    assert got[:2] == want[:2]
    assert sorted(g for g in got[2] if g[1]) == sorted(g for g in want[2] if g[1])
    assert [(p, d) for p, d, _ in step.calls] == [(p, d) for p, d, _ in want[3]]


def test_the_pages_of_a_published_model_with_windows():
    """GPT-OSS-20B (tests/hf_configs): 24 layers, every other one attending a window of 128 tokens;
    in blocks of 16 tokens its pool block holds one full layer's block for each sliding one's, and a
    sliding layer holds at most cdiv(127, 16) + 1 = 9 blocks.  A sequence of 4,000 tokens: 250 blocks
    in each full layer and 9 in each sliding one, 259 of the pair, where 500 were counted."""
    from symbolic_cost.inference.load import StepModel
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.models.config import load
    from pathlib import Path
    step = StepModel(load(Path(__file__).parent / "hf_configs" / "gpt-oss-20b.json"), Serving(l_in=2000, l_out=2000),
                     "h100")
    assert step.pages(16) == paged.Pages(16, full=1, sliding=1, cap=9) and step.pages(16).of(4000) == 259


def test_an_unknown_allocation_is_refused_by_name():
    with pytest.raises(InputError, match="allocation must be one of reserve, on-demand"):
        Runtime(allocation="lazy")


def test_disaggregated_pools_refuse_blocks_on_demand():
    from symbolic_cost.inference.disaggregated import Pools, serve_disaggregated
    with pytest.raises(InputError, match="--kv-allocation reserve"):
        serve_disaggregated(Pooled(1.0, 4, 64), 3, None, 2, ON_DEMAND, pools=Pools(1, 1))


def test_disaggregated_pools_refuse_a_speculative_step():
    from sympy import Rational
    from symbolic_cost.inference.disaggregated import Pools, serve_disaggregated
    step = Pooled(1.0, 4, 64)
    step.tokens_per_step = Rational(5, 2)
    with pytest.raises(InputError, match="speculative decoding in disaggregated pools"):
        serve_disaggregated(step, 3, None, 2, replace(ON_DEMAND, allocation="reserve"), pools=Pools(1, 1))
