"""Issue 66, a tenth probe: the serving layout search and the SLOs of the Python API.

A layout search of many devices (``inference --devices 64``) ran to the command line's 120
CPU-second budget, and held the web page's server as long: it is bounded now by a budget of
simulated engine steps, the layouts tried from the fewest engines up and the others listed as not
tried.  ``serve``, ``sustained_rate``, ``serve_disaggregated`` and ``rank`` took a bound on the
inter-token latency for requests of one output token, which have no gap to bound (the command line
refused it).  ``rank`` replaced a ``Serving``'s own tensor, pipeline and data degrees without a
word.  The expectations follow from the rules, not from the library's output."""

import math

import pytest

from test_refusals import refused
from test_hostile_seventh import refusal

SLO = (1, 0.05)
"""A first token within a second, 50 ms between tokens."""


@pytest.fixture(scope="module")
def llama():
    from symbolic_cost.models.config import preset
    return preset("llama-2-7b")


@pytest.fixture(scope="module")
def one_token(llama):
    from symbolic_cost.inference.load import StepModel
    from symbolic_cost.inference.serving import Serving
    return StepModel(llama, Serving(l_in=512, l_out=1), "h100")


# an inter-token bound for requests of one token: refused by the API as by the command line


def test_a_load_test_of_one_token_requests_refuses_an_itl_bound(one_token):
    """One output token a request: no gap between tokens, so a bound on them was met by nothing
    measured (``serve`` counted every request within it, ``sustained_rate`` ranked by the TTFT)."""
    from symbolic_cost.inference.disaggregated import Pools, serve_disaggregated
    from symbolic_cost.inference.load import serve, sustained_rate
    for call in (lambda: serve(one_token, 1, None, 3, slo=SLO),
                 lambda: sustained_rate(one_token, 1, SLO, requests=3),
                 lambda: serve_disaggregated(one_token, 1, None, 3, slo=SLO, pools=Pools(1, 1))):
        assert "l_out=1" in str(refusal(call, "slo"))
    assert serve(one_token, 1, None, 3, slo=(1, math.inf)).mean_itl is None     # the TTFT alone: taken


def test_rank_refuses_an_itl_bound_for_one_token_requests(llama):
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.serving_search import Effort, rank
    refusal(lambda: rank(llama, Serving(l_in=512, l_out=1), "h100", 1, SLO, effort=Effort(3)), "slo")
    ranked, _ = rank(llama, Serving(l_in=512, l_out=1), "h100", 1, (1, math.inf), effort=Effort(3))
    assert [row["layout"] for row in ranked] == ["TP1 x 1, 1 replica"]


def test_the_command_line_and_the_api_refuse_by_one_rule(capsys, one_token):
    """The command line's refusal is the API's rule, named by its option."""
    from symbolic_cost.inference.load import serve
    err = refused(capsys, ["inference", "--preset", "llama-2-7b", "--system", "h100", "--set", "l_out=1",
                           "--rate", "1", "--requests", "3", "--slo-itl", "0.05"], "--slo-itl", "--slo-ttft alone")
    api = str(refusal(lambda: serve(one_token, 1, None, 3, slo=SLO), "slo"))
    rule = "bounds the gaps between a request's output tokens, and requests of l_out=1 have none"
    assert rule in err and rule in api


# rank chooses the degrees: a Serving's own are refused by name


@pytest.mark.parametrize("field, value", [("m1", 2), ("p", 2), ("d", 2), ("etp", 1)])
def test_rank_refuses_the_degrees_each_layout_chooses(llama, field, value):
    """``rank`` is documented to choose each layout's ``m1``, ``p``, ``d``, ``ep`` and ``etp``; a
    ``Serving(m1=2)`` was ranked as TP1 and TP2 layouts alike."""
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.serving_search import Effort, rank
    error = refusal(lambda: rank(llama, Serving(l_in=512, l_out=64, **{field: value}), "h100", 2, SLO,
                                 effort=Effort(3)), field)
    assert f"serving.{field}={value}" in str(error)


def test_a_tensor_degree_of_ones_own_is_rank_s_tensor_argument(llama):
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.serving_search import Effort, rank
    assert "tensor=(2,)" in str(refusal(lambda: rank(llama, Serving(l_in=512, l_out=64, m1=2), "h100", 2, SLO,
                                                     effort=Effort(3)), "m1"))
    ranked, left = rank(llama, Serving(l_in=512, l_out=64), "h100", 2, SLO, effort=Effort(3), tensor=(2,))
    assert [row["layout"] for row in ranked] == ["TP2 x 1, 1 replica"] and left == []


@pytest.mark.parametrize("field", ["l_in", "l_out"])
def test_rank_needs_numbers_for_the_request(llama, field):
    """A symbolic ``l_in`` left every layout out with the simulator's reason; ``l_out`` ended in a
    ``TypeError`` from ``int()``."""
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.serving_search import Effort, rank
    numbers = {"l_in": 512, "l_out": 64}
    del numbers[field]
    refusal(lambda: rank(llama, Serving(**numbers), "h100", 2, SLO, effort=Effort(3)), field)


# the search's budget


def test_with_no_budget_no_layout_is_simulated_and_those_that_cannot_serve_keep_their_reason():
    """Llama 3 70B (140 GB of bf16 weights) on two 80 GB H100s: TP1 cannot hold the weights (left
    out with that reason, the 1:1 split of its copies unlisted as before); TP1 over two stages and
    TP2 can, and under a budget of no steps are not tried."""
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.serving_search import Effort, rank
    from symbolic_cost.models.config import preset
    ranked, left = rank(preset("llama-3-70b"), Serving(l_in=512, l_out=64), "h100", 2, SLO, effort=Effort(3, 0))
    assert ranked == []
    assert [(row.get("layout"), bool(row.get("not_tried"))) for row in left] == [
        (None, False), ("TP1 PP2 x 1, 1 replica", True), ("TP2 x 1, 1 replica", True)]
    assert "memory" in left[0]["reason"] and all("not tried" in row["reason"] for row in left[1:])


def test_a_budget_of_the_first_layout_s_steps_tries_it_whole_and_no_other(llama):
    """The layouts are tried from the fewest engines up: of two devices, TP2 (one engine) before
    the TP1 layouts (two: two copies, or one over two stages).  A budget of exactly the steps of
    TP2's own search (``steps_run`` of each of its load tests) tries TP2 with the figures of a
    search without a budget, and no TP1 layout."""
    from functools import partial
    from symbolic_cost.inference.load import Runtime, StepModel, serve, sustained_rate
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.serving_search import Effort, rank, steps_run
    request = Serving(l_in=512, l_out=16)
    taken = []

    def counted(step, tokens, rate, requests, *rest, **named):
        load = partial(serve, replicas=1)(step, tokens, rate, requests, *rest, **named)
        taken.append(steps_run(load, requests))
        return load
    alone = sustained_rate(StepModel(llama, Serving(l_in=512, l_out=16, m1=2), "h100"), 16, SLO, 90, 4, Runtime(),
                           simulate=counted)[0]
    whole, _ = rank(llama, request, "h100", 2, SLO, effort=Effort(4))
    ranked, left = rank(llama, request, "h100", 2, SLO, effort=Effort(4, sum(taken)))
    assert [(row["layout"], row["rate"]) for row in ranked] == [("TP2 x 1, 1 replica", alone)]
    assert alone == next(row["rate"] for row in whole if row["m1"] == 2) > 0
    assert [row["layout"] for row in left] == ["TP1 x 2, 2 replicas", "TP1 x 2, 1:1 disaggregated",
                                               "TP1 PP2 x 1, 1 replica"]
    assert all(row["not_tried"] and row["m1"] == 1 for row in left)


def test_the_budget_is_checked(llama):
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.serving_search import Effort, rank
    for budget in (-1, 1.5, True, "1"):
        refusal(lambda: rank(llama, Serving(l_in=512, l_out=16), "h100", 2, SLO, effort=Effort(3, budget)),
                "budget")


def test_the_command_line_lists_the_layouts_not_tried(capsys, monkeypatch):
    """Past the budget (here none), the layouts not tried are named on one line with the reason and
    what tries them; ``--json`` marks each ``not_tried``."""
    import json
    from symbolic_cost.cli import main
    from symbolic_cost.inference import serving_search
    monkeypatch.setattr(serving_search, "SEARCH_STEPS", 0)
    words = ["inference", "--preset", "llama-2-7b", "--system", "h100", "--set", "l_out=16", "--slo-ttft", "1",
             "--requests", "3", "--devices", "2"]
    assert main(words) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("not tried"))
    assert "--requests" in line and "TP2 x 1, 1 replica" in line and "TP1 PP2 x 1, 1 replica" in line
    assert main(words + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["layouts"] == [] and len(out["left_out"]) == 4 and all(row["not_tried"] for row in out["left_out"])
