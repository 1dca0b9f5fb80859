"""Requests of their own lengths (inference.lengths, issue 63): the geometric draw against its
closed-form distribution function, schedules of requests of their own prompt and output lengths
worked by hand, SGLang's admission by each request's length (vLLM's: tests/test_serving_paged.py),
and a one-sequence engine against the M/G/1 queue's mean wait (Pollaczek-Khinchine), a textbook
closed form."""

import json
import math

import pytest

from serving_steps import NO_OVERHEAD, Constant
from symbolic_cost.checks import InputError, InputTypeError
from symbolic_cost.cli import main
from symbolic_cost.inference import estimated
from symbolic_cost.inference.disaggregated import Pools, serve_disaggregated
from symbolic_cost.inference.lengths import Lengths, drawn, requests_of
from symbolic_cost.inference.batching import chunked_steps, whole_prompt_steps
from symbolic_cost.inference.load import Runtime, serve

GEOMETRIC = Lengths(outputs="geometric")
from symbolic_cost.reproduce.measured import serving_cases


@pytest.mark.parametrize("mean", [2, 7, 214, 1000])
def test_geometric_lengths_follow_the_distribution_function(mean):
    # P(O <= k) = 1 - (1 - 1/mean)^k; n draws at the midpoints of n equal shares are within 1/n of it
    n = 4000
    lengths = drawn(mean, n, "geometric", seed=3)
    for k in (1, 2, mean // 2 + 1, mean, 3 * mean, 6 * mean):
        share = sum(1 for o in lengths if o <= k) / n
        assert abs(share - (1 - (1 - 1 / mean) ** k)) <= 1 / n
    assert min(lengths) == 1 and sum(lengths) / n == pytest.approx(mean, rel=0.01)


def test_the_draw_is_a_seeded_order_of_the_same_lengths():
    one, again, other = (drawn(50, 300, "geometric", seed=s) for s in (1, 1, 2))
    assert one == again and one != other and sorted(one) == sorted(other)
    assert drawn(50, 300, "geometric", stream="prompt") != one         # prompts and outputs drawn apart
    assert drawn(50, 300) == [50] * 300 and drawn(1, 5, "geometric") == [1] * 5


def test_the_context_cuts_only_the_longest():
    # a prompt past 300 tokens is cut to 300, an output to what its prompt leaves: p + o - 1 <= 300
    both = Lengths("geometric", "geometric")
    (free_p, free_o), (prompts, outputs) = requests_of(100, 50, 500, both), requests_of(100, 50, 500, both, context=300)
    assert prompts == [min(p, 300) for p in free_p] and max(free_p) > 300
    assert outputs == [min(o, 300 - p + 1) for p, o in zip(prompts, free_o)] and outputs != free_o


def test_an_unknown_shape_is_refused_by_name():
    with pytest.raises(InputError, match="lengths' outputs must be one of fixed, geometric") as error:
        Lengths(outputs="poisson")
    assert error.value.argument == "outputs"
    with pytest.raises(InputTypeError, match="lengths must be a Lengths") as error:
        serve(Constant(0.01), 5, None, requests=2, runtime=NO_OVERHEAD, lengths="geometric")
    assert error.value.argument == "lengths"


@pytest.mark.parametrize("call, message", [
    # a mean of 0 divided by zero; one of -1 drew ones, one of True drew booleans, -1 requests none
    (lambda: drawn(0, 3, "geometric"), "mean must be an integer >= 1, got 0"),
    (lambda: drawn(-1, 10, "geometric"), "mean must be an integer >= 1, got -1"),
    (lambda: drawn(True, 10, "geometric"), "mean must be an integer, got the boolean True"),
    (lambda: drawn(float("inf"), 3, "geometric"), "mean must be an integer, got the float inf"),
    (lambda: drawn("8", 3, "geometric"), "mean must be an integer, got the string '8'"),
    (lambda: drawn(100, -1, "geometric"), "requests must be an integer between 0 and 100,000, got -1"),
    (lambda: drawn(100, 3, "geometric", stream="answers"), "stream must be one of prompt, output"),
    # zero-token prompts, a negative context that made every prompt -10 tokens
    (lambda: requests_of(0, 20, 3), "prompt must be an integer >= 1, got 0"),
    (lambda: requests_of(100, "x", 2), "output must be an integer, got the string 'x'"),
    (lambda: requests_of(100, 50, 3, context=-10), "context must be an integer >= 1, got -10"),
    (lambda: requests_of(100, 50, 3, "geometric"), "lengths must be an inference.lengths.Lengths"),
])
def test_a_length_argument_is_refused_by_name(call, message):
    with pytest.raises(InputError) as refused:
        call()
    assert message in str(refused.value)


@pytest.mark.parametrize("run", [whole_prompt_steps, chunked_steps])
def test_each_request_leaves_after_its_own_tokens_and_frees_its_own_blocks(run):
    """One-second steps; three requests at once of 5, 2 and 5 tokens, each reserving its prompt
    (2) and its tokens in one-token blocks (7, 4, 7) of a pool of 12.  The first two fit (11);
    the third waits: the second leaves after its 2 tokens (t = 2), leaving 7 reserved, too many
    for 7 more, and the first after its 5 (t = 5); the third is prefilled at step 6 and ends at
    t = 10.  Reserving the longest request's 7 blocks for each would have kept the second out."""
    runtime = Runtime(0, 0, block_tokens=1)
    first, finished, _, last = run(Constant(1.0, prompt=2), [5, 2, 5], [0.0, 0.0, 0.0], runtime, 0.0, 12, [7, 4, 7],
                                   [2, 2, 2])
    assert (first, finished, last) == ([1.0, 1.0, 6.0], [5.0, 2.0, 10.0], 10.0)


def test_prompts_of_their_own_lengths_fill_the_budget_and_the_context_by_their_tokens():
    """A budget of 10 tokens a step, prompts of 4, 5 and 3 tokens (the step model's prompt is 4),
    two output tokens each, all at once: the first two fit (9), the third waits a step, beside the
    two decoding.  The first step prefills 9 tokens, priced as 9/4 prompts; the second prefills 3
    (3/4) beside two sequences whose cache holds 4 and 5 tokens (a mean of 4.5); the third decodes
    alone at the third step over its 3 tokens."""
    step = Constant(1.0, prompt=4)
    first, finished, _, _ = whole_prompt_steps(step, [2, 2, 2], [0.0] * 3, Runtime(0, 0, max_tokens=10), 0.0,
                                               math.inf, [0, 0, 0], [4, 5, 3])
    assert (first, finished) == ([1.0, 1.0, 2.0], [2.0, 2.0, 3.0])
    assert step.calls == [(9 / 4, 0, 0.0), (3 / 4, 2, 4.5), (0, 1, 3.0)]


def test_a_prompt_that_does_not_fit_beside_the_decodes_holds_the_line():
    """A budget of 100 tokens; prompts of 60, 60 and 10, three output tokens each, all at once: the
    first step prefills the first (the second does not fit beside it, and the third, behind it,
    waits too: first come first served, as TensorRT-LLM's scheduler stops at the first that does
    not fit); the second step decodes the first and takes the second (60 + 1 <= 100) and the third
    (71 + 10 <= 100); the first's last token comes at the third step."""
    step = Constant(1.0, prompt=60)
    first, finished, _, _ = whole_prompt_steps(step, [3, 3, 3], [0.0] * 3, Runtime(0, 0, max_tokens=100), 0.0,
                                               math.inf, [0, 0, 0], [60, 60, 10])
    assert (first, finished) == ([1.0, 2.0, 2.0], [3.0, 4.0, 4.0])
    assert step.calls[:2] == [(1.0, 0, 0.0), (70 / 60, 1, 60.0)]


def test_the_throughput_counts_every_drawn_token():
    # output tokens over requests, per second each: the mean of the lengths drawn, in every engine
    both = Lengths("geometric", "geometric")
    prompts, outputs = drawn(100, 60, "geometric", 4, "prompt"), drawn(20, 60, "geometric", 4, "output")
    runs = [serve(Constant(0.01), 20, 50.0, requests=60, runtime=Runtime(0, 0, allocation=allocation), seed=4,
                  lengths=both) for allocation in ("reserve", "on-demand", "estimate")]
    runs.append(serve(Constant(0.01), 20, 50.0, requests=60, runtime=Runtime(0, 0, chunked=True), seed=4, lengths=both))
    runs.append(serve_disaggregated(Constant(0.01), 20, 50.0, requests=60, runtime=NO_OVERHEAD, seed=4,
                                    pools=Pools(1, 2), transfer=0.001, lengths=both))
    for load in runs:
        assert load.output_token_throughput / load.request_throughput == pytest.approx(sum(outputs) / 60)
        assert load.total_token_throughput / load.request_throughput == pytest.approx(sum(prompts + outputs) / 60)


def test_sglang_charges_each_running_request_its_own_remaining_tokens():
    """Two running requests of 10 and 30 tokens, one written each: charged 0.7 x (9 + 29)."""
    engine = estimated.Scheduler([0.0, 0.0], Runtime(0, 0), 10_000, [10, 30], [2, 2])
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
                 lengths=GEOMETRIC)
    q = 1 / mean
    wait = rate * tau ** 2 * (2 - q) / q ** 2 / (2 * (1 - load_factor))
    assert load.mean_ttft == pytest.approx(tau + wait, rel=0.05)


def test_the_measured_load_tests_of_a_datasets_mean_draw_their_lengths():
    shapes = {(case.output_tokens, case.lengths) for case in serving_cases()}
    assert shapes == {(256, Lengths()), (16, Lengths()), (214, GEOMETRIC)}


def test_the_command_line_draws_lengths_under_load(capsys):
    words = ["inference", "--preset", "llama-2-7b", "--set", "l_in=100", "l_out=20", "--system", "h100",
             "--rate", "5", "--requests", "40", "--output-lengths", "geometric", "--prompt-lengths", "geometric", "--json"]
    assert main(words) == 0
    load = json.loads(capsys.readouterr().out)["load"]
    assert (load["prompt_lengths"], load["output_lengths"]) == ("geometric", "geometric")
    assert main(["inference", "--preset", "llama-2-7b", "--output-lengths", "geometric"]) == 2
    assert "--output-lengths sets the --rate simulation" in capsys.readouterr().err


def test_a_drawn_output_stops_at_the_simulators_bound():
    # a mean of 2^19 tokens drawn geometric reaches past 2^20; each token is a step simulated
    from symbolic_cost.inference.load import MAX_OUTPUT, request_lengths
    _, outputs = request_lengths(Constant(0.01), 2**19, 40, GEOMETRIC, 0)
    assert max(outputs) == MAX_OUTPUT == 2**20


def test_a_chunk_pays_the_attention_of_its_place_in_the_prompt():
    """A 32K-token prompt in chunks of 2,048: the chunk after ``a`` cached tokens attends ``a + 1`` to
    ``a + 2048`` keys, so its attention core is ``core(a + 2048) - core(a)``; the mean share
    ``step(t / P)`` gives each chunk the same.  The shifts telescope to nothing over the prompt, grow
    with the offset, and the first chunk's attention is a 2,048-token prompt's own (built with the
    length a number)."""
    from symbolic_cost.inference.latent import CORE
    from symbolic_cost.inference.load import StepModel
    from symbolic_cost.inference.phases import prefill
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.throughput import calibrated_run
    from symbolic_cost.models.config import preset
    from symbolic_cost.timing.hardware import calibrated
    P, t = 32768, 2048
    step = StepModel(preset("llama-3-8b"), Serving(l_in=P, l_out=16, flash=True, allow_long=True), "h100")
    shifts = [step.attention_shift([(a, t)]) for a in range(0, P, t)]
    assert abs(sum(shifts)) <= 1e-12 * step(1, 0, 0.0)
    assert all(x < y for x, y in zip(shifts, shifts[1:])) and shifts[0] < 0 < shifts[-1]
    short = prefill(preset("llama-3-8b"), Serving(b=1, l_in=t, l_out=2, flash=True))
    core = float(calibrated_run(short, calibrated("h100"), None, keep=CORE)[2])
    whole = float(calibrated_run(prefill(preset("llama-3-8b"), Serving(b=1, l_in=P, l_out=2, flash=True,
                                                                        allow_long=True)),
                                 calibrated("h100"), None, keep=CORE)[2])
    assert shifts[0] == pytest.approx(core - whole * t / P, rel=1e-9)


class Placed(Constant):
    """A constant step that states a chunk's attention by its place: ``offset`` microseconds."""

    def attention_shift(self, chunks):
        return sum(offset for offset, _ in chunks) * 1e-6


def test_each_chunk_is_priced_at_its_place():
    """A 30-token prompt over a budget of 10, chunked: three steps, after 0, 10 and 20 tokens cached,
    each the step's 10 ms plus what the step model says its place adds (here 0, 10 and 20 us)."""
    step = Placed(0.01, prompt=30)
    _, _, run, _ = chunked_steps(step, [1], [0.0], Runtime(0, 0, max_tokens=10, chunked=True), 0.0, math.inf,
                                 [0], [30])
    assert [duration for duration, _ in run] == pytest.approx([0.01, 0.01001, 0.01002], rel=1e-12)
