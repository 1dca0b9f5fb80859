"""DualPipe (parallel.pipeline, models.totals, models.ranks, timing.step) against a timetable
written from the algorithm (tests/simulate_dualpipe.py) and DeepSeek-V3's Table 2."""

import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulate_dualpipe import phase_peaks, rank_order, timetable
from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.models.ranks import rank_activation_bytes, rank_parameters
from symbolic_cost.parallel.pipeline import Schedule, dualpipe_bubble
from symbolic_cost.timing.hardware import calibrated, times
from symbolic_cost.timing.step import step_time_breakdown

passes = st.fractions(min_value=0, max_value=8, max_denominator=4)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.integers(0, 6), passes, passes, passes)
def test_the_timetable_takes_the_formula_and_holds_p_plus_one(half, extra, f, b, w):
    p = 2 * half
    n = 2 * p + 2 * extra
    makespan, peak, _ = timetable(p, n, {"F": f, "B": b, "W": w, "FB": f + b + w})
    assert makespan == n * (f + b + w) + dualpipe_bubble(p, f, b, w)
    # the report's "PP + 1": the two middle ranks, p on the others
    assert peak == [p + 1 if min(r, p - 1 - r) == p // 2 - 1 else p for r in range(p)]
    assert max(peak) == Schedule("dualpipe").in_flight(p, n) == p + 1
    # of which the direction entering on the rank's half holds at most p - h, the other h + 1
    assert phase_peaks(p, n) == [(p - min(r, p - 1 - r), min(r, p - 1 - r) + 1) for r in range(p)]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(0, 6), st.integers(1, 6), st.integers(0, 6))
def test_the_reports_table_2_where_forward_and_backward_match(half, extra, f, w):
    # DeepSeek-V3 Table 2: bubble (PP/2 - 1)(F&B + B - 3W), B the whole backward, F&B = F + B
    # when nothing overlaps; the timetable agrees where the forward equals the activation backward
    p, n, w = 2 * half, 2 * half * 2 + 2 * extra, min(w, f)
    whole = f + w
    makespan, _, _ = timetable(p, n, {"F": f, "B": f, "W": w, "FB": f + whole})
    assert makespan - n * (f + whole) == (p // 2 - 1) * ((f + whole) + whole - 3 * w)


def test_where_the_timetable_and_the_report_part():
    # p = 8, F = 3, B = 1, W = 1: the timetable idles q (F - B) = 6 longer than Table 2 says
    makespan, _, _ = timetable(8, 20, {"F": 3, "B": 1, "W": 1, "FB": 5})
    assert makespan - 20 * 5 == 3 * (5 + 2 - 3) + 3 * (3 - 1) == dualpipe_bubble(8, 3, 1, 1)


def test_each_rank_runs_every_micro_batch_of_both_its_stages():
    p, n = 6, 16
    for r in range(p):
        order = rank_order(p, n, r)
        forwards = sum(1 for c in order if c[0] == "F") + sum(1 for c in order if c[0] == "FB")
        backwards = sum(1 for c in order if c[0] == "B") + sum(1 for c in order if c[0] == "FB")
        deferred = sum(1 for c in order if c[0] == "B" and c[2])
        assert (forwards, backwards, deferred) == (n, n, sum(1 for c in order if c[0] == "W"))


def test_equal_passes_give_the_tabled_bubble_share():
    p, n = 8, 20
    makespan, _, _ = timetable(p, n, {"F": 1, "B": 1, "W": 1, "FB": 3})
    assert Fraction(makespan - 3 * n, makespan) == Schedule("dualpipe").bubble(p, n)


@pytest.mark.parametrize("p, n, name", [(3, 6, "p"), (4, 9, "micro_batches"), (4, 6, "micro_batches")])
def test_layouts_it_cannot_run_are_refused_by_name(p, n, name):
    with pytest.raises(InputError) as err:
        model_cost(preset("gpt2"), Training(b=1, l=128, p=p, micro_batches=n, schedule="dualpipe"))
    assert err.value.argument == name and name in str(err.value) and "dualpipe" in str(err.value)


def test_each_rank_holds_two_stages_and_their_state():
    gpt2 = preset("gpt2")
    plain = model_cost(gpt2, Training(b=2, l=128, p=4, micro_batches=8))
    dual = model_cost(gpt2, Training(b=2, l=128, p=4, micro_batches=8, schedule="dualpipe"))
    stages = [rank_parameters(plain, r) for r in range(4)]
    assert [rank_parameters(dual, r) for r in range(4)] == [stages[r] + stages[3 - r] for r in range(4)]
    assert dual.parameters_per_device == stages[0] + stages[3]
    # weights, gradients and optimizer state per parameter as before, on twice the stages
    for field in ("weight_bytes", "gradient_bytes", "optimizer_bytes"):
        assert getattr(dual, field) * plain.parameters_per_device == getattr(plain, field) * dual.parameters_per_device
    # the two copies sum their gradients: one allreduce of the rank's parameters between two ranks
    sums = [c for d, c in dual.collectives if d == "pipeline" and c.kind == "allreduce"]
    assert [(c.group, c.elements) for c in sums] == [(2, dual.parameters_per_device)]
    # the end ranks run n/2 micro-batches through each of the first and the last stage
    first, last = (sum(r.flops_fwd for r in blk) for blk in (plain.embedding, plain.head))
    layers = 3 * sum(r.flops_fwd for r in plain.layer)
    assert dual.flops_fwd == 8 * (layers + (first + last) / 2)


def test_the_end_ranks_keep_p_plus_one_chunks_with_both_ends():
    gpt2 = preset("gpt2")
    dual = model_cost(gpt2, Training(b=2, l=128, p=4, micro_batches=8, schedule="dualpipe"))
    one = model_cost(gpt2, Training(b=2, l=128, p=4, micro_batches=1))    # one chunk of each stage
    kept = [rank_activation_bytes(one, r) for r in range(4)]      # a stage's layers, with an end on 0 and 3
    # the timetable: an end rank holds p = 4 chunks, all 4 may be of the stage with the embedding and
    # one of the stage with the head; a middle rank p + 1 = 5 (tests/simulate_dualpipe.py)
    end = 4 * kept[0] + (kept[3] - kept[1])
    assert dual.activation_bytes == rank_activation_bytes(dual, 0) == rank_activation_bytes(dual, 3) == end
    assert rank_activation_bytes(dual, 1) == rank_activation_bytes(dual, 2) == 5 * kept[1]


def test_the_step_time_runs_the_timetable_of_the_stage_passes():
    gpt2, system = preset("gpt2"), calibrated("h100")
    cost = model_cost(gpt2, Training(b=4, l=256, p=4, micro_batches=8, schedule="dualpipe"))
    parts = step_time_breakdown(cost, system)
    rows = list(cost.embedding) + 3 * list(cost.layer)      # the first stage is the busiest here
    if sum(times(r, system)["t_fwd"] for r in cost.head) > sum(times(r, system)["t_fwd"] for r in cost.embedding):
        rows = list(cost.head) + 3 * list(cost.layer)
    t = [times(r, system) for r in rows]
    f = sum(x["t_fwd"] + x["t_comm_fwd"] for x in t)
    w = sum(x["t_bwd"] * r.flops_wgrad / r.flops_bwd for x, r in zip(t, rows) if r.flops_bwd != 0)
    b = sum(x["t_bwd"] + x["t_comm_bwd"] for x in t) - w
    makespan, _, _ = timetable(4, 8, {"F": f, "B": b, "W": w, "FB": f + b + w})
    assert float(parts["compute"] + parts["tensor_comm"] + parts["bubble"]) == pytest.approx(float(makespan), rel=1e-12)
    plain = step_time_breakdown(model_cost(gpt2, Training(b=4, l=256, p=4, micro_batches=8)), system)
    assert 0 < parts["bubble"] < plain["bubble"]


def test_the_commands_take_the_schedule_and_refuse_its_bad_layouts(capsys):
    from symbolic_cost.cli import main
    base = ["--preset", "gpt2", "--set", "b=1", "l=256", "--schedule", "dualpipe"]
    assert main(["summary", *base[:-2], "p=4", "n_micro=8", *base[-2:], "--json"]) == 0
    # stages 0 and 3 by hand: the word table twice (the last stage's tied copy), positions, 6 layers, ln_f
    word, layer = 50257 * 768, 12 * 768 * 768 + 13 * 768
    assert json.loads(capsys.readouterr().out)["parameters_per_device"] == 2 * word + 1024 * 768 + 6 * layer + 2 * 768
    assert main(["summary", *base[:-2], "p=4", "n_micro=6", *base[-2:]]) == 2
    assert "micro_batches must be at least 2p for the dualpipe schedule" in capsys.readouterr().err
    assert main(["sweep", *base[:-2], "n_micro=8", *base[-2:], "--grid", "p=2,3", "--field", "bubble"]) == 2
    assert "--grid at p=3, n_micro=8: p must be even for the dualpipe schedule" in capsys.readouterr().err


def test_uneven_stages_pair_up_too():
    # 6, 2, 2, 2 layers: ranks 0 and 3 hold stages 0 and 3 (8 layers and both ends), 1 and 2 four layers
    t = dict(b=1, l=128, p=4, micro_batches=8, first_stage_layers=6)
    plain, dual = (model_cost(preset("gpt2"), Training(**t, schedule=s)) for s in ("1f1b", "dualpipe"))
    stages = [rank_parameters(plain, r) for r in range(4)]
    assert [rank_parameters(dual, r) for r in range(4)] == [stages[r] + stages[3 - r] for r in range(4)]
    assert dual.parameters_per_device == stages[0] + stages[3]
