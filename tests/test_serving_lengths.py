"""Requests of different output lengths (inference.lengths, issue 63): the geometric draw against
its closed-form distribution function, schedules of requests of their own lengths worked by hand,
vLLM's and SGLang's admissions by each request's length, and a one-sequence engine against the
M/G/1 queue's mean wait (Pollaczek-Khinchine), a textbook closed form."""

import json

import pytest

from serving_steps import NO_OVERHEAD, Constant
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.inference import estimated
from symbolic_cost.inference.disaggregated import Pools, serve_disaggregated
from symbolic_cost.inference.lengths import output_lengths
from symbolic_cost.inference.load import Runtime, chunked_steps, serve, whole_prompt_steps
from symbolic_cost.reproduce.measured import serving_cases


@pytest.mark.parametrize("mean", [2, 7, 214, 1000])
def test_geometric_lengths_follow_the_distribution_function(mean):
    # P(O <= k) = 1 - (1 - 1/mean)^k; n draws at the midpoints of n equal shares are within 1/n of it
    n = 4000
    drawn = output_lengths(mean, n, "geometric", seed=3)
    for k in (1, 2, mean // 2 + 1, mean, 3 * mean, 6 * mean):
        share = sum(1 for o in drawn if o <= k) / n
        assert abs(share - (1 - (1 - 1 / mean) ** k)) <= 1 / n
    assert min(drawn) == 1 and sum(drawn) / n == pytest.approx(mean, rel=0.01)


def test_the_draw_is_a_seeded_order_of_the_same_lengths():
    one, again, other = (output_lengths(50, 300, "geometric", seed=s) for s in (1, 1, 2))
    assert one == again and one != other and sorted(one) == sorted(other)
    assert output_lengths(50, 300) == [50] * 300 and output_lengths(1, 5, "geometric") == [1] * 5


def test_a_cap_cuts_only_the_longest():
    free, capped = output_lengths(100, 500, "geometric"), output_lengths(100, 500, "geometric", most=150)
    assert capped == [min(o, 150) for o in free] and max(free) > 150


def test_an_unknown_shape_is_refused_by_name():
    with pytest.raises(InputError, match="lengths must be one of fixed, geometric") as error:
        serve(Constant(0.01), 5, None, requests=2, runtime=NO_OVERHEAD, lengths="poisson")
    assert error.value.argument == "lengths"


@pytest.mark.parametrize("run", [whole_prompt_steps, chunked_steps])
def test_each_request_leaves_after_its_own_tokens_and_frees_its_own_blocks(run):
    """One-second steps; three requests at once of 5, 2 and 5 tokens, each reserving its prompt
    (2) and its tokens in one-token blocks (7, 4, 7) of a pool of 12.  The first two fit (11);
    the third waits: the second leaves after its 2 tokens (t = 2), leaving 7 reserved, too many
    for 7 more, and the first after its 5 (t = 5); the third is prefilled at step 6 and ends at
    t = 10.  Reserving the longest request's 7 blocks for each would have kept the second out."""
    runtime = Runtime(0, 0, block_tokens=1)
    first, finished, _, last = run(Constant(1.0, prompt=2), [5, 2, 5], [0.0, 0.0, 0.0], runtime, 0.0, 12, [7, 4, 7])
    assert (first, finished, last) == ([1.0, 1.0, 6.0], [5.0, 2.0, 10.0], 10.0)


def test_the_throughput_counts_every_drawn_token():
    # output tokens over requests, per second each: the mean of the lengths drawn, in every engine
    drawn = output_lengths(20, 60, "geometric", seed=4)
    runs = [serve(Constant(0.01), 20, 50.0, requests=60, runtime=Runtime(0, 0, allocation=allocation), seed=4,
                  lengths="geometric") for allocation in ("reserve", "on-demand", "estimate")]
    runs.append(serve_disaggregated(Constant(0.01), 20, 50.0, requests=60, runtime=NO_OVERHEAD, seed=4,
                                    pools=Pools(1, 2), transfer=0.001, lengths="geometric"))
    for load in runs:
        assert load.output_token_throughput / load.request_throughput == pytest.approx(sum(drawn) / 60)


def test_sglang_charges_each_running_request_its_own_remaining_tokens():
    """Two running requests of 10 and 30 tokens, one written each: charged 0.7 x (9 + 29)."""
    engine = estimated.Scheduler(Constant(1.0, prompt=2), [0.0, 0.0], Runtime(0, 0), 10_000, [10, 30])
    engine.running.add(0, 0)
    engine.running.add(1, 0)
    assert engine.remaining_estimate() == pytest.approx(10_000 - 0.7 * (9 + 29))


@pytest.mark.parametrize("load_factor", [0.3, 0.6])
def test_a_one_sequence_engine_of_geometric_requests_queues_as_m_g_1(load_factor):
    """Poisson arrivals, one sequence at a time, a request of O tokens holding the engine O steps of
    ``tau``: service S = O tau, O geometric with mean m (q = 1/m), E[O^2] = (2 - q) / q^2.
    Pollaczek-Khinchine's mean wait is lambda E[S^2] / (2 (1 - rho)), rho = lambda m tau; the mean
    time to first token adds the prefill step, tau."""
    tau, mean = 0.01, 4
    rate = load_factor / (mean * tau)
    load = serve(Constant(tau), mean, rate, requests=40_000, runtime=Runtime(0, 0, max_batch=1), seed=5,
                 lengths="geometric")
    q = 1 / mean
    wait = rate * tau ** 2 * (2 - q) / q ** 2 / (2 * (1 - load_factor))
    assert load.mean_ttft == pytest.approx(tau + wait, rel=0.05)


def test_the_measured_load_tests_of_a_datasets_mean_draw_their_lengths():
    shapes = {(case.output_tokens, case.lengths) for case in serving_cases()}
    assert shapes == {(256, "fixed"), (16, "fixed"), (214, "geometric")}


def test_the_command_line_draws_lengths_under_load(capsys):
    words = ["inference", "--preset", "llama-2-7b", "--set", "l_in=100", "l_out=20", "--system", "h100",
             "--rate", "5", "--requests", "40", "--output-lengths", "geometric", "--json"]
    assert main(words) == 0
    assert json.loads(capsys.readouterr().out)["load"]["output_lengths"] == "geometric"
    assert main(["inference", "--preset", "llama-2-7b", "--output-lengths", "geometric"]) == 2
    assert "--output-lengths sets the --rate simulation" in capsys.readouterr().err
