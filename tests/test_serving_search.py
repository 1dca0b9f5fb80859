"""The serving layouts of N devices ranked by the rate an SLO allows (issue 63):
the layouts enumerated by hand, the ranking against each layout's own load test, and what is left
out and refused."""

import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from symbolic_cost.cli import main
from symbolic_cost.inference.disaggregated import Pools, serve_disaggregated
from symbolic_cost.checks import InputError
from symbolic_cost.inference.load import Runtime, StepModel, serve, sustained_rate
from symbolic_cost.inference.serving import Serving
from symbolic_cost.inference.serving_search import Effort, Layout, layouts, rank
from symbolic_cost.inference.serving_search import capped as capped_runtimes
from symbolic_cost.models.config import preset

HF_CONFIGS = Path(__file__).parent / "hf_configs"


def test_eight_devices_by_hand():
    """TP1: 8 copies, aggregated and 6 of the 7 splits (round(8 k / 7), k = 1..6: 1, 2, 3, 5, 6, 7),
    then PP2 x 4, PP4 x 2, PP8 x 1; TP2: 4 copies, aggregated and 1:3, 2:2, 3:1, then PP2 x 2, PP4 x 1;
    TP4: 2 copies, aggregated and 1:1, then PP2 x 1; TP8: one.  7 + 3, 4 + 2, 2 + 1, 1: 20."""
    found = layouts(8)
    assert len(found) == 20
    assert [x.pools.prefill for x in found if x.m1 == 1 and x.pools] == [1, 2, 3, 5, 6, 7]
    assert [(x.copies, x.p) for x in found if x.m1 == 1 and x.p > 1] == [(4, 2), (2, 4), (1, 8)]
    assert [x for x in found if x.m1 == 4] == [Layout(4, 2), Layout(4, 2, Pools(1, 1)), Layout(4, 1, p=2)]
    assert found[-1] == Layout(8, 1)
    assert layouts(6) == [Layout(1, 6)] + [Layout(1, 6, Pools(p, 6 - p)) for p in range(1, 6)] + \
        [Layout(1, 3, p=2), Layout(2, 3), Layout(2, 3, Pools(1, 2)), Layout(2, 3, Pools(2, 1))]   # 4, 8 ∤ 6
    assert layouts(8, pipeline=(1,)) == [x for x in found if x.p == 1]


def test_each_rank_is_its_layouts_own_load_test():
    arch, serving = preset("gpt2"), Serving(l_in=256, l_out=32)
    ranked, left = rank(arch, serving, "h100", 2, (0.05, 0.01), effort=Effort(100), tensor=(1, 2))
    assert left == [] and [row["rate"] for row in ranked] == sorted((row["rate"] for row in ranked), reverse=True)
    step = StepModel(arch, Serving(l_in=256, l_out=32, m1=1), "h100")
    for simulate, name in ((partial(serve, replicas=2), "TP1 x 2, 2 replicas"),
                           (partial(serve_disaggregated, pools=Pools(1, 1)), "TP1 x 2, 1:1 disaggregated")):
        rate, _ = sustained_rate(step, 32, (0.05, 0.01), 90, 2 * 100, simulate=simulate)   # 100 for each copy
        assert next(row["rate"] for row in ranked if row["layout"] == name) == rate
        assert next(row["rate_per_device"] for row in ranked if row["layout"] == name) == rate / 2


def test_copies_of_an_engine_serve_copies_times_its_rate():
    """Each copy takes ``requests``: ``c`` copies of an engine, the requests sent in turn, are ``c``
    engines each running the one-engine test, so where the rate is the engine's capacity (every
    request at once, the SLO loose) the layout of ``c`` copies sustains exactly ``c`` times one
    engine's rate.  Split over the copies instead, each ran a shorter test, and the copies' rate
    differed from ``c`` times the single engine's."""
    arch, serving, slo = preset("llama-3-8b"), Serving(l_in=512, l_out=128, flash=True), (10.0, 1.0)
    one = {row["layout"]: row["rate"] for row in rank(arch, serving, "h100", 1, slo, effort=Effort(200))[0]}
    four = {row["layout"]: row["rate"]
            for row in rank(arch, serving, "h100", 4, slo, effort=Effort(200), tensor=(1,))[0]}
    assert four["TP1 x 4, 4 replicas"] == pytest.approx(4 * one["TP1 x 1, 1 replica"], rel=1e-12)


def test_each_batch_cap_is_its_own_load_test():
    """``capped``: every layout tried under the engine's own cap (the same rows as a search without
    caps) and under each cap given, each its own load test with the engine's ``max_batch`` at the cap; a
    cap of 1 runs one sequence at a time, so the rate can only fall."""
    arch, serving, slo = preset("gpt2"), Serving(l_in=256, l_out=32), (0.05, 0.01)
    plain, _ = rank(arch, serving, "h100", 2, slo, effort=Effort(100), tensor=(1, 2))
    capped, _ = rank(arch, serving, "h100", 2, slo, effort=Effort(100), tensor=(1, 2),
                     runtime_of=capped_runtimes(None, [1]))
    own = [row for row in capped if row["max_batch"] == Runtime().max_batch]
    assert [(r["layout"], r["rate"]) for r in own] == [(r["layout"], r["rate"]) for r in plain]
    step = StepModel(arch, Serving(l_in=256, l_out=32, m1=1), "h100")
    rate, _ = sustained_rate(step, 32, slo, 90, 2 * 100, replace(Runtime(), max_batch=1),
                             simulate=partial(serve, replicas=2))
    one = {row["layout"]: row["rate"] for row in capped if row["max_batch"] == 1}
    assert one["TP1 x 2, 2 replicas"] == rate
    assert all(one[r["layout"]] <= r["rate"] for r in plain)


@pytest.mark.parametrize("batches, said", [(tuple(range(1, 10)), "at most 8 caps"), ((0,), "positive integers"),
                                           ((True,), "positive integers"), ((None,), "positive integers"),
                                           ("64", "a tuple of the engine's batch caps")])
def test_batch_caps_are_checked(batches, said):
    with pytest.raises(InputError, match=said):
        capped_runtimes(None, batches)


def test_a_degree_that_does_not_fit_is_left_out_with_its_reason(capsys):
    assert main(["inference", "--preset", "llama-3-70b", "--system", "h100", "--set", "l_in=512", "l_out=64",
                 "--slo-ttft", "1", "--devices", "2", "--requests", "50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    full = "the weights fill each device's memory, leaving none for the KV cache"
    assert out["left_out"] == [{"m1": 1, "p": 1, "reason": full}]
    # 141 GB of bf16 weights over 2 devices leave room, split by tensor or by pipeline
    assert {(row["m1"], row["p"]) for row in out["layouts"]} == {(2, 1), (1, 2)}


@pytest.mark.parametrize("words, refused", [
    (["--devices", "8"], "give --slo-ttft or --slo-itl"),
    (["--devices", "8", "--slo-ttft", "1", "--set", "m1=2"], "--devices chooses the tensor degree"),
    (["--devices", "8", "--slo-ttft", "1", "--rate", "2"], "--rate: --devices tries every layout"),
    (["--slo-ttft", "1", "--batch-limits", "32"], "--batch-limits sets the layout search's caps; give --devices"),
    (["--devices", "8", "--slo-ttft", "1", "--max-batch", "8", "--batch-limits", "32"], "give one"),
    (["--devices", "8", "--slo-ttft", "1", "--batch-limits", *map(str, range(1, 10))], "at most 8 caps"),
])
def test_refusals(capsys, words, refused):
    assert main(["inference", "--preset", "gpt2", *words]) == 2
    assert refused in capsys.readouterr().err


def test_a_speculative_search_ranks_each_layout_s_own_speculative_load_test():
    """With a draft, each aggregated layout's rate is its own load test decoding speculatively (the
    draft on the same devices); disaggregated pools, which do not decode so, are left out with their
    reason.  A draft whose proposals are never accepted (alpha = 0) only adds work: the rate falls."""
    from sympy import Rational
    from symbolic_cost.inference.speculative import Speculation
    arch, serving = preset("llama-2-7b"), Serving(l_in=256, l_out=32)
    draft = Speculation(preset("llama-2-7b"), 2, Rational(0))
    ranked, left = rank(arch, serving, "h100", 2, (0.5, 0.02), effort=Effort(60), tensor=(1,), speculation=draft)
    assert [row["layout"] for row in ranked] == ["TP1 x 2, 2 replicas"]
    assert [row["layout"] for row in left] == ["TP1 x 2, 1:1 disaggregated", "TP1 PP2 x 1, 1 replica"]
    assert "speculative" in left[0]["reason"] and "pipeline" in left[1]["reason"]
    step = StepModel(arch, Serving(l_in=256, l_out=32, m1=1), "h100", speculation=draft)
    rate, _ = sustained_rate(step, 32, (0.5, 0.02), 90, 2 * 60, simulate=partial(serve, replicas=2))
    assert ranked[0]["rate"] == rate
    plain, _ = rank(arch, serving, "h100", 2, (0.5, 0.02), effort=Effort(60), tensor=(1,))
    assert rate < next(row["rate"] for row in plain if row["layout"] == "TP1 x 2, 2 replicas")


def test_a_mixture_of_experts_also_serves_with_attention_data_parallelism(capsys):
    """A model with routed experts adds one layout, every device a replica of the attention with the
    experts split over all of them; its rate is the load test the command line runs for that
    deployment (``--set d=4 ep=4 etp=1``, requests taken in turn by the four replicas)."""
    from symbolic_cost.models.config import from_config
    assert [str(x) for x in layouts(4, experts=True)][-1] == "TP1 x 4, attention data-parallel, experts over 4"
    assert not any(x.attention_dp for x in layouts(4)) and not any(x.attention_dp for x in layouts(1, experts=True))
    arch = from_config(json.loads((HF_CONFIGS / "OLMoE-1B-7B-0924.json").read_text()))
    serving = Serving(l_in=256, l_out=32, flash=True)
    ranked, _ = rank(arch, serving, "h100", 4, (0.5, 0.02), effort=Effort(60), tensor=(1,))
    row = next(row for row in ranked if row["attention_dp"])
    step = StepModel(arch, Serving(l_in=256, l_out=32, flash=True, m1=1, d=4, ep=4, etp=1), "h100")
    rate, _ = sustained_rate(step, 32, (0.5, 0.02), 90, 4 * 60, simulate=partial(serve, replicas=4))
    assert row["rate"] == rate and row["layout"] == "TP1 x 4, attention data-parallel, experts over 4"
    assert all(not row["attention_dp"] for row in rank(preset("gpt2"), serving, "h100", 4, (0.5, 0.02),
                                                         effort=Effort(30), tensor=(1,))[0])


def test_experts_that_do_not_split_over_the_devices_leave_the_layout_out():
    # Mixtral's 8 experts over 16 devices: no whole expert a device; the layout is left out, named
    from symbolic_cost.models.config import from_config
    arch = from_config(json.loads((HF_CONFIGS / "Mixtral-8x7B-v0.1.json").read_text()))
    _, left = rank(arch, Serving(l_in=256, l_out=32, flash=True), "h100", 16, (1.0, 0.05), effort=Effort(30),
                   tensor=(1,))
    assert [(row["layout"], row["reason"]) for row in left if "layout" in row] == [
        ("TP1 x 16, attention data-parallel, experts over 16", "ep must divide experts (got ep=16, experts=8)")]
