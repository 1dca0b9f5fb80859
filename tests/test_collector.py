"""``collector.paused``: the cycle collector off while the library builds, back on after as it
was before, across nesting, errors and threads; and a whole build runs no collection."""

import gc
import threading

import pytest

from symbolic_cost import symbols as S
from symbolic_cost.collector import paused
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.numeric.compile import compile_exprs
from symbolic_cost.timing.step import step_time_breakdown


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


def test_off_inside_on_after():
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_process_turned_off_stays_off():
    gc.disable()
    with paused():
        pass
    assert not gc.isenabled()


def test_nested_pauses_end_with_the_outermost():
    with paused():
        with paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_still_turns_it_back_on():
    with pytest.raises(KeyError):
        with paused():
            raise KeyError("x")
    assert gc.isenabled()


def test_as_a_decorator():
    @paused()
    def inside():
        return gc.isenabled()
    assert inside() is False and inside() is False and gc.isenabled()


def test_overlapping_threads_turn_it_on_when_the_last_ends():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second():
        first_in.wait(5)
        with paused():
            second_in.set()
            first_out.wait(5)
            seen["after the first left"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after the first left": False} and gc.isenabled()


def test_a_build_and_its_compilation_run_no_collection():
    """GPT-3's totals with the step time: tens of thousands of allocations, which without the
    pause set off a collection every 700 (``gc.get_threshold()``)."""
    runs = []

    def count(phase, info):
        if phase == "start":
            runs.append(info["generation"])

    gc.callbacks.append(count)
    try:
        cost = model_cost(preset("gpt3-175b"), Training(b=S.b, l=S.l, m1=S.m1, d=S.d, p=S.p, zero=1))
        compile_exprs({**step_time_breakdown(cost, "h100"), "memory": cost.memory_bytes})
    finally:
        gc.callbacks.remove(count)
    assert len(runs) <= 3, runs       # the pass that meets each of the three pauses' objects after it
