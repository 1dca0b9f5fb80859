"""The serving simulator's fast paths give the times of the step-by-step schedule, to the bit.

``batching.decode_together`` runs the steps that only decode in one call (one engine alone, or
replicas in lockstep), a step model's ``decoder`` prices them from terms computed once for the
batch, and ``batching.pipelined`` keeps each engine's start until it steps.  Each is compared here
with the schedule it replaces, written out below from the runners' docstrings: one ``plan`` and
``apply`` at a time (``alone``, ``lockstep``), the engine ready first of every live engine asked
anew at each step (``pipelined``), and a step model called as ``step(prompts, decoding, context)``.
Equality is exact (``==`` on floats): a path that reorders one addition fails.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symbolic_cost.checks import InputError, timed
from symbolic_cost.inference.batching import ChunkedPrompts, WholePrompts, alone, decoder, lockstep, pipelined
from symbolic_cost.inference.load import Runtime, StepModel
from symbolic_cost.inference.serving import Serving
from symbolic_cost.inference.speculative import Speculation
from symbolic_cost.models.config import preset


class Curved:
    """A step whose price reads all three of its arguments, nonlinearly, with no exact sum in
    floats: any change in what a step is asked, or in the order of the clock's additions, shows."""

    prompt = 64

    def __call__(self, prompts, decoding, context):
        return 1e-3 / 3 + prompts * 7e-4 + decoding * 1e-5 * (1 + math.sqrt(context) / 7)


class Second:
    """A step of one second, whatever it runs."""

    prompt = 64

    def __call__(self, prompts, decoding, context):
        return 1.0


def alone_as_stated(engine, overhead):
    """``batching.alone`` as its docstring states it: each step ``plan``'s seconds plus
    ``overhead``, one at a time, the clock moved to the next arrival where nothing runs."""
    now = 0.0
    while not engine.done():
        if engine.idle(now):
            now = engine.next_arrival()
        duration = timed(engine.plan(now) + overhead)
        now += duration
        engine.apply(now, duration)
    return engine.result()


requests = st.integers(1, 30).flatmap(lambda n: st.tuples(
    st.lists(st.floats(0, 0.05, allow_nan=False), min_size=n, max_size=n),        # gaps between arrivals
    st.lists(st.integers(1, 40), min_size=n, max_size=n),                          # tokens out
    st.lists(st.integers(1, 130), min_size=n, max_size=n),                         # prompts
    st.lists(st.integers(1, 6), min_size=n, max_size=n)))                          # blocks each


@pytest.mark.parametrize("kind", [WholePrompts, ChunkedPrompts])
@settings(max_examples=120, deadline=None)
@given(drawn=requests, max_batch=st.integers(1, 12), max_tokens=st.integers(130, 400), blocks=st.integers(6, 40))
def test_a_run_of_decodes_gives_the_times_of_one_step_at_a_time(kind, drawn, max_batch, max_tokens, blocks):
    gaps, outputs, prompts, needs = drawn
    times = [sum(gaps[:i + 1]) for i in range(len(gaps))]
    runtime = Runtime(max_batch=max_batch, max_tokens=max_tokens)

    def engine():
        return kind(Curved(), outputs, times, runtime, blocks, needs, prompts)
    assert alone(engine(), 1e-4 / 3) == alone_as_stated(engine(), 1e-4 / 3)


@pytest.mark.parametrize("arrival", [2.5, 3.0])
def test_a_run_of_decodes_stops_at_an_arrival_it_could_admit(arrival):
    """Two requests of 5 tokens, 64-token prompts, a constant step of 1 s: the first yields its
    tokens at 1 to 5 s; the second arrives at 2.5 s or 3 s, while the first decodes, and is admitted
    by the step that starts at 3 s (its tokens at 4 to 8 s); a run that went on to the first's last
    token would admit it at 5 s."""
    first, finished, _, _ = alone(WholePrompts(Second(), [5, 5], [0.0, arrival], Runtime(), 10, [1, 1], [64, 64]),
                                  0.0)
    assert first == [1.0, 4.0] and finished == [5.0, 8.0]


@pytest.mark.parametrize("speculative", [False, True])
def test_a_step_model_s_decoder_prices_as_the_step_model_does(speculative):
    serving = Serving(b=1, l_in=512, l_out=64, flash=True)
    draft = Speculation(preset("gpt2"), 3, 1) if speculative else None
    model = preset("gpt2")
    step = StepModel(model, serving, "h100", speculation=draft)
    for decoding in (0, 1, 7, 64):
        for none in (0.0, 0):
            price = decoder(step, decoding, none)
            for context in (0.0, 1.0, 513.25, 4096.0):
                assert price(context) == step(none, decoding, context)
    with pytest.raises(InputError, match="finite numbers"):
        decoder(step, 3)(math.inf)


def in_turn(kind, drawn, engines: int, runtime):
    """``engines`` engines of ``kind`` (a pool of 30 blocks each) sharing the ``drawn`` requests in
    turn, as ``load.serve`` deals them to replicas and to the batches in flight of a pipeline."""
    gaps, outputs, prompts, needs = drawn
    times = [sum(gaps[:i + 1]) for i in range(len(gaps))]
    mine = [range(e, len(times), engines) for e in range(min(engines, len(times)))]
    return [kind(Curved(), [outputs[i] for i in m], [times[i] for i in m], runtime, 30,
                 [needs[i] for i in m], [prompts[i] for i in m]) for m in mine]


def lockstep_as_stated(engines, overhead):
    """``batching.lockstep`` as its docstring states it, one step at a time: every live replica
    plans the step (an idle one at no price), which lasts the longest of them plus ``overhead``;
    when none holds anything, the clock moves to the next arrival among them."""
    now = 0.0
    while live := [engine for engine in engines if not engine.done()]:
        if all(engine.idle(now) for engine in live):
            now = min(engine.next_arrival() for engine in live)
        duration = timed(max(engine.plan(now) for engine in live) + overhead)
        now += duration
        for engine in live:
            engine.apply(now, duration)
    return [engine.result() for engine in engines]


@pytest.mark.parametrize("kind", [WholePrompts, ChunkedPrompts])
@settings(max_examples=80, deadline=None)
@given(drawn=requests, replicas=st.integers(2, 4), max_batch=st.integers(1, 8))
def test_replicas_in_lockstep_keep_the_schedule_of_its_docstring(kind, drawn, replicas, max_batch):
    runtime = Runtime(max_batch=max_batch, max_tokens=200)
    assert lockstep(in_turn(kind, drawn, replicas, runtime), 1e-4 / 3) == \
        lockstep_as_stated(in_turn(kind, drawn, replicas, runtime), 1e-4 / 3)


def pipelined_as_stated(engines, overhead, stages):
    """``batching.pipelined`` as its docstring states it, every live engine's start found anew at
    each step: the first of the earliest, ``max(ready or next arrival, first stage free)``."""
    free, ready = [0.0] * stages, [0.0] * len(engines)

    def start(i):
        at = ready[i] if not engines[i].idle(ready[i]) else engines[i].next_arrival()
        return max(at, free[0])
    while live := [i for i, engine in enumerate(engines) if not engine.done()]:
        i = min(live, key=start)
        now = start(i)
        seconds = timed(engines[i].plan(now) + overhead)
        end = now
        for stage in range(stages):
            end = max(end, free[stage]) + seconds * (1 / stages)
            free[stage] = end
        ready[i] = end
        engines[i].apply(end, end - now)
    return [engine.result() for engine in engines]


@settings(max_examples=60, deadline=None)
@given(drawn=requests, stages=st.integers(2, 5), max_batch=st.integers(1, 8))
def test_the_pipeline_keeps_the_schedule_of_its_docstring(drawn, stages, max_batch):
    runtime = Runtime(max_batch=max_batch, max_tokens=200)
    assert pipelined(in_turn(WholePrompts, drawn, stages, runtime), 1e-4 / 3, stages) == \
        pipelined_as_stated(in_turn(WholePrompts, drawn, stages, runtime), 1e-4 / 3, stages)


@pytest.mark.parametrize("decoding, prompts, said", [(-1, 0.0, "finite numbers at least 0"),
                                                     (float("nan"), 0.0, "finite numbers at least 0"),
                                                     (2, 3, "prompts must be 0")])
def test_a_decoder_of_a_step_it_cannot_price_is_refused(decoding, prompts, said):
    step = StepModel(preset("gpt2"), Serving(b=1, l_in=512, l_out=64, flash=True), "h100")
    with pytest.raises(InputError, match=said):
        step.decoder(decoding, prompts)
