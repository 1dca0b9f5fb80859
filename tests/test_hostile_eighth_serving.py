"""Issue 66, an eighth probe: serving (the ``inference`` command and ``symbolic_cost.inference``'s
Serving, Runtime, engines, load tests, disaggregated pools, speculative decoding, SLO searches and
the layout search) fed hostile values: 0, -1, 1e400, NaN, inf, 2**60, text, empty strings, huge
request counts and rates, one-token requests, contexts past the model's, SLOs of 0, options that do
not apply or that conflict, ``--json`` in every mode.  Most were already refused by name; what
follows ended in a ``TypeError``, a limit the command line keeps and the Python API did not, an
option silently ignored, or a wrong reason printed.  The expectations follow from the rules, not
from the library's output."""

import json

import pytest

from test_refusals import refused
from test_hostile_seventh import refusal

LLAMA = ["inference", "--preset", "llama-2-7b", "--system", "h100"]
"""Llama 2 7B (13.5 GB of bf16 weights, 512 KiB of cache a token) on an H100 (80 GiB)."""


@pytest.fixture(scope="module")
def step():
    from symbolic_cost.inference.load import StepModel
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.models.config import preset
    return StepModel(preset("llama-2-7b"), Serving(l_in=512, l_out=128), "h100")


# engines.runtime


def test_an_engine_setting_that_runtime_has_not_is_refused_by_name(step):
    """``engines.runtime("vllm", step, "h100", 1, 4096, bogus=1)`` ended in a ``TypeError`` from
    ``Runtime.__init__``."""
    from symbolic_cost.inference import engines
    refusal(lambda: engines.runtime("vllm", step, "h100", 1, 4096, bogus=1), "bogus")
    assert engines.runtime("vllm", step, "h100", 1, 4096, max_batch=64).max_batch == 64


def test_an_engines_system_is_the_steps_own(step):
    """With an H100 step, ``system="a100"`` gave vLLM's A100 limits (256 sequences, 2,048 tokens)
    beside the H100's memory, and ``system="nosuch"`` was taken without a word."""
    from symbolic_cost.inference import engines
    refusal(lambda: engines.runtime("vllm", step, "a100", 1, 4096), "system")
    refusal(lambda: engines.runtime("vllm", step, "nosuch", 1, 4096), "system")
    refusal(lambda: engines.runtime("vllm", None, "nosuch", 1, 4096), "system")
    assert engines.runtime("vllm", step, "h100", 1, 4096).max_batch == 1024     # vLLM's on 70 GiB and more


def test_vllms_defaults_take_a_system_as_well_as_its_name():
    """``engines.vllm(None, System, ...)`` ended in "argument of type 'System' is not iterable"; an
    A100 gets vLLM's smaller pair, 256 sequences and 2,048 tokens, by its name."""
    from symbolic_cost.inference import engines
    from symbolic_cost.timing.systems import get_system
    a100 = engines.vllm(None, get_system("a100"), 1, 8192)
    assert (a100["max_batch"], a100["max_tokens"]) == (256, 2048)


# Runtime: the command line's limits where the value is made


@pytest.mark.parametrize("name, most", [("max_batch", 10**6), ("max_tokens", 10**7), ("block_tokens", 4096)])
def test_a_runtimes_limits_are_the_command_lines(name, most):
    """``Runtime(block_tokens=2**60)`` was made (and refused later as ``tokens``, an argument no caller
    gave), ``Runtime(max_batch=2**60)`` ran, where ``--max-batch``, ``--max-tokens`` and
    ``--block-tokens`` stop at a million, ten million and 4,096."""
    from symbolic_cost.inference.load import Runtime
    refusal(lambda: Runtime(**{name: most + 1}), name)
    refusal(lambda: Runtime(**{name: 2**60}), name)
    assert getattr(Runtime(**{name: most}), name) == most


def test_the_layout_searchs_caps_are_a_runtimes():
    """``serving_search.batch_limits([2**60])`` was kept, each cap a ``Runtime``'s ``max_batch``."""
    from symbolic_cost.inference.serving_search import batch_limits
    refusal(lambda: batch_limits([2**60]), "batches")
    assert batch_limits([10**6]) == (10**6,)


# the command line


def test_the_layout_search_refuses_an_itl_objective_for_one_token_requests(capsys):
    """``--devices 2 --slo-itl 1 --set l_out=1`` ranked layouts by a bound no request has a gap to
    meet ("ITL -" on every row), where ``--slo-itl`` with ``--rate`` or alone is refused."""
    refused(capsys, LLAMA + ["--devices", "2", "--slo-itl", "1", "--requests", "5", "--set", "l_out=1"],
            "--slo-itl", "l_out=1")


def test_a_page_of_the_report_is_the_load_tests_block(capsys):
    """``--set B=16 --rate 1`` paged the report's cache in 16 tokens and ran the load test in the
    engine's blocks of 32 without a word; ``B`` now sets the blocks (``--block-tokens`` beside it
    must agree), and a page past a block's 4,096 tokens is refused under load."""
    from symbolic_cost.cli import main
    load = LLAMA + ["--rate", "1", "--requests", "5", "--json"]
    assert main(load + ["--set", "B=16"]) == 0
    assert json.loads(capsys.readouterr().out)["load"]["block_tokens"] == 16
    assert main(load) == 0
    assert json.loads(capsys.readouterr().out)["load"]["block_tokens"] == 32                  # TensorRT-LLM's
    refused(capsys, load + ["--set", "B=16", "--block-tokens", "32"], "--block-tokens", "B=16")
    refused(capsys, load + ["--set", "B=5000"], "B=5000", "4,096")


def test_no_batch_fitting_names_the_true_reason(capsys):
    """Pages of a million tokens (488 GiB a sequence) printed "the weights alone exceed the device's
    memory" for Llama 2 7B's 12.6 GiB of weights on an 80 GiB H100."""
    from symbolic_cost.cli import main
    assert main(LLAMA + ["--set", "B=1000000"]) == 0
    last = capsys.readouterr().out.splitlines()
    line = next(row for row in last if row.startswith("largest batch"))
    assert "none" in line and "weights alone" not in line and "KV cache" in line
    assert main(["inference", "--preset", "gpt3-175b", "--system", "h100"]) == 0       # 350 GB of weights
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("largest batch"))
    assert "the weights alone exceed" in line


def test_a_prompt_of_the_whole_context_generating_one_token_is_load_tested(capsys):
    """GPT-2 (1,024 tokens of context), ``l_in=1024 l_out=1``: the report takes it (the prompt and
    its one token, ``l_in + l_out - 1 = 1024``), and ``--rate`` refused it as "1025 tokens exceed"
    (the step priced its phases with ``l_out=2``); a longer prompt, or a second token, is still
    refused."""
    from symbolic_cost.cli import main
    from symbolic_cost.inference.load import StepModel, serve
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.models.config import preset
    gpt2 = ["inference", "--preset", "gpt2", "--system", "h100", "--requests", "3"]
    assert main(gpt2 + ["--set", "l_in=1024", "l_out=1", "--rate", "inf", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["load"]["mean_itl"] is None            # one token: no gap
    refused(capsys, gpt2 + ["--set", "l_in=1025", "l_out=1", "--rate", "inf"], "l_in = 1025")
    refused(capsys, gpt2 + ["--set", "l_in=1024", "l_out=2", "--rate", "inf"], "1025 tokens")
    step = StepModel(preset("gpt2"), Serving(l_in=1024, l_out=1), "h100")
    assert serve(step, 1, None, 3).mean_itl is None
    refusal(lambda: serve(step, 2, None, 3), "output_tokens")
    refusal(lambda: StepModel(preset("gpt2"), Serving(l_in=1025, l_out=1), "h100"), "l_in")


@pytest.mark.parametrize("model", [0, None, "deepseek-v3", 1.5])
def test_an_mtp_draft_refuses_what_is_not_a_model(model):
    """``MtpDraft(0)`` ended in "'int' object has no attribute 'mtp_layers'"."""
    from symbolic_cost.inference.drafts import MtpDraft
    refusal(lambda: MtpDraft(model), "model")


def test_a_percentile_at_a_given_rate_is_refused_as_ignored(capsys):
    """``--rate 1 --slo-ttft 1 --slo-percentile 50`` printed the goodput, which counts each request
    against the SLO, and dropped the percentile, which only the search for the highest sustained
    rate (no ``--rate``) reads."""
    refused(capsys, LLAMA + ["--rate", "1", "--requests", "5", "--slo-ttft", "1", "--slo-percentile", "50"],
            "--slo-percentile", "--rate")
