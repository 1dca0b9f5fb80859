"""ZB-H1 (parallel.pipeline, timing.step) against a timetable written from the zero-bubble
paper's algorithm (tests/simulate_zb.py) and the paper's own bubble expression."""

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulate_zb import timetable
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.parallel.pipeline import Schedule
from symbolic_cost.timing.hardware import calibrated, times
from symbolic_cost.timing.step import step_time_breakdown


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.integers(0, 12), st.integers(1, 5), st.integers(1, 5), st.integers(1, 5))
def test_the_timetable_gives_the_papers_bubble_and_its_memory(p, extra, f, b, w):
    n = p + extra
    makespan, peak = timetable(p, n, {"F": f, "B": b, "W": w})
    if w <= min(f, b):                          # Qi et al. 2024's ZB-H1 expression, in its regime
        assert makespan == n * (f + b + w) + (p - 1) * (f + b - w)
    assert makespan == n * (f + b + w) + (p - 1) * (f + b - min(w, f, b))
    assert peak == [Schedule("zb-h1").in_flight(p, n, r) for r in range(p)] == [p] * p


def test_equal_passes_give_the_tabled_bubble_share():
    p, n = 4, 8
    makespan, _ = timetable(p, n, {"F": 1, "B": 1, "W": 1})
    assert Fraction(makespan - 3 * n, makespan) == Schedule("zb-h1").bubble(p, n)


def test_the_step_saves_twice_the_stages_weight_gradients_per_idle_slot():
    # GPT-2 small on 4 stages of 3 layers, 8 micro-batches: the 1F1B bubble is 3 slots of a
    # micro-batch's stage time; ZB-H1 fills 2 T_W of each (the W moved into the cool-down and
    # the B that no longer waits for it; here T_W is below T_F and T_B); T_W from each row's
    # backward time and its weight-gradient share of the backward FLOPs
    gpt2, system = preset("gpt2"), calibrated("h100")
    plain, zb = (step_time_breakdown(model_cost(gpt2, Training(b=4, l=256, p=4, micro_batches=8, schedule=s)), system)
                 for s in ("1f1b", "zb-h1"))
    cost = model_cost(gpt2, Training(b=4, l=256, p=4, micro_batches=8, schedule="zb-h1"))
    layer = cost.stack[1][0]
    t_w = sum(times(r, system)["t_bwd"] * r.flops_wgrad / r.flops_bwd for r in layer if r.flops_bwd != 0)
    ends = {"first": cost.embedding, "last": cost.head}
    stage_w = {k: 3 * t_w + sum(times(r, system)["t_bwd"] * r.flops_wgrad / r.flops_bwd for r in rows
                                if r.flops_bwd != 0) for k, rows in ends.items()}
    saved = plain["bubble"] - zb["bubble"]
    assert any(float(saved) == pytest.approx(float(2 * 3 * w), rel=1e-9) for w in stage_w.values())
    assert plain["compute"] == zb["compute"] and 0 < zb["bubble"] < plain["bubble"]
    # every rank holds p micro-batches: at least what 1F1B's busiest rank holds
    assert cost.activation_bytes >= model_cost(gpt2, Training(b=4, l=256, p=4, micro_batches=8)).activation_bytes
