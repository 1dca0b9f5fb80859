"""Chunked prefill and the engines' named defaults (issue 63): the chunked schedule against token
budgets worked by hand, the KV-cache pool of an engine that counts its fraction of the whole
device against a hand count, and each engine's defaults against its source (the values and the
release are in ``inference.engines``' docstrings; the numbers here are typed from those sources,
not read from the module)."""

import json
from pathlib import Path

import pytest
from sympy import Rational

from serving_steps import Constant
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.inference import engines
from symbolic_cost.inference.load import Runtime, StepModel, request_blocks, serve
from symbolic_cost.inference.serving import Serving
from symbolic_cost.models.config import from_config, preset


CHUNKED = Runtime(step_overhead=0, request_overhead=0, max_tokens=8, chunked=True)


def test_chunked_prefill_by_hand():
    """Two requests of 12 prompt tokens and 3 output tokens at time 0, 8 tokens a step:

    step 1: 8 tokens of request 0 (4 left);
    step 2: request 0's last 4, then 4 of request 1 (8 left): request 0's first token;
    step 3: request 0 decodes (1 token), 7 of request 1 (1 left);
    step 4: request 0 decodes its third token and leaves; request 1's last token: its first token;
    step 5, 6: request 1 decodes its second and third.
    """
    step = Constant(0.01, prompt=12)
    load = serve(step, 3, None, requests=2, runtime=CHUNKED)
    assert [(round(prompts * 12), decoding) for prompts, decoding, _ in step.calls] == \
        [(8, 0), (8, 0), (7, 1), (1, 1), (0, 1), (0, 1)]
    assert load.mean_ttft == pytest.approx((0.02 + 0.04) / 2)
    assert load.request_throughput == pytest.approx(2 / 0.06)
    # request 0's context at step 3 is its prompt (12 tokens), at step 4 one more
    assert [context for _, _, context in step.calls[2:4]] == [12, 13]


def test_without_chunking_a_prompt_over_the_budget_is_refused():
    """The same two requests without chunked prefill: a 12-token prompt over an 8-token budget is
    what neither engine runs (TensorRT-LLM's max_num_tokens >= max_input_len without chunked
    context, vLLM's max_num_batched_tokens >= max_model_len without chunked prefill); 12 fits."""
    for allocation in ("reserve", "on-demand"):
        with pytest.raises(InputError, match="a prompt of 12 tokens is longer than max_tokens=8 .*--chunked-prefill"):
            serve(Constant(0.01, prompt=12), 3, None, requests=2, runtime=Runtime(0, 0, max_tokens=8,
                                                                                  allocation=allocation))
        step = Constant(0.01, prompt=12)
        serve(step, 3, None, requests=2, runtime=Runtime(0, 0, max_tokens=12, allocation=allocation))
        assert step.calls[0] == (1, 0, 0.0)          # the first prompt whole; the second waits for room


def test_decodes_take_the_budget_first():
    """Nine requests of 4 prompt and 3 output tokens at time 0, 8 tokens a step:

    step 1: requests 0 and 1 whole (8 tokens): both yield their first token;
    step 2: 0 and 1 decode (2 tokens), 6 left: request 2 whole, 2 of request 3;
    step 3: 0, 1 and 2 decode (3), 5 left: request 3's last 2, 3 of request 4 (0 and 1 leave);
    step 4: 2 and 3 decode (2), 6 left: request 4's last 1, request 5 whole, 1 of request 6.
    """
    step = Constant(0.01, prompt=4)
    serve(step, 3, None, requests=9, runtime=CHUNKED)
    first = [(round(prompts * 4), decoding) for prompts, decoding, _ in step.calls[:4]]
    assert first == [(8, 0), (6, 2), (5, 3), (6, 2)]


def test_an_engine_fraction_of_the_whole_device_by_hand():
    """vLLM's 0.9 of an H100 (81,559 MiB as nvidia-smi reports it, 85.5 GB) holding 16 GB of weights
    leaves 77.0 - 16.1 = 60.9 GB; TensorRT-LLM's 0.9 of the 69.5 GB left free leaves 62.5 GB."""
    step = StepModel(preset("llama-3-8b"), Serving(b=1, l_in=512, l_out=128), "h100")
    device = 81_559 * 2**20
    weights = 2 * 8_030_261_248                          # bf16, every parameter on the one device
    per_token = 2 * 32 * 8 * 128 * 2                     # K and V, 32 layers, 8 heads of 128, bf16
    total = step.cache_blocks(16, Rational(9, 10), "total")
    free = step.cache_blocks(16, Rational(9, 10), "free")
    assert total == (Rational(9, 10) * device - weights) // (16 * per_token)
    assert free == (Rational(9, 10) * (device - weights)) // (16 * per_token)


@pytest.mark.parametrize("engine, system, tensor, expected", [
    # TensorRT-LLM since 0.14 ("[BREAKING CHANGE] The default max_batch_size of the trtllm-build command is
    # set to 2048", its release notes; 256 from 0.11): max_num_tokens 8192, free_gpu_memory_fraction 0.9,
    # 32 tokens a block
    ("trtllm", "h100", 1, dict(max_batch=2048, max_tokens=8192, memory_fraction=Rational(9, 10), memory_of="free",
                               block_tokens=32, chunked=False, allocation="reserve")),
    # vLLM V1, vllm serve on an H100 (>= 70 GiB, not an A100): 8192 tokens, 1024 sequences, 0.9 of the device,
    # blocks allocated as tokens come (KVCacheManager.allocate_slots), preemption by recomputation
    ("vllm", "h100", 1, dict(max_batch=1024, max_tokens=8192, memory_fraction=Rational(9, 10), memory_of="total",
                             block_tokens=16, chunked=True, allocation="on-demand")),
    # ... and on an A100: 2048 tokens, 256 sequences
    ("vllm", "a100", 1, dict(max_batch=256, max_tokens=2048, block_tokens=16, chunked=True)),
    # SGLang 0.4 on an H100 at TP 8: chunked_prefill_size 8192, mem_fraction_static 0.81, pages of 1 token
    ("sglang", "h100", 8, dict(max_tokens=8192, memory_fraction=Rational(81, 100), memory_of="total",
                               block_tokens=1, chunked=True)),
    # ... on an MI300X (192 GB): 16384 tokens, TP 1: 0.88
    ("sglang", "mi300x", 1, dict(max_tokens=16384, memory_fraction=Rational(88, 100))),
])
def test_each_engine_starts_from_its_documented_defaults(engine, system, tensor, expected):
    runtime = engines.runtime(engine, None, system, tensor, 8192)
    assert {name: getattr(runtime, name) for name in expected} == expected


def test_sglang_sizes_its_request_pool_from_the_cache():
    """``min(max(pool tokens x 512 / context, 2048), 4096)`` for an 8192-token model: 100,000 tokens
    give 6,250, capped at 4,096; 20,000 give 1,250, raised to 2,048; 40,000 give 2,500."""
    class Tokens:
        system = type("S", (), {"hbm_capacity": 80 * 10**9})()

        def __init__(self, tokens):
            self.tokens = tokens

        def cache_blocks(self, block_tokens, fraction, memory_of):
            return self.tokens
    assert engines.runtime("sglang", Tokens(100_000), "h100", 1, 8192).max_batch == 4096
    assert engines.runtime("sglang", Tokens(20_000), "h100", 1, 8192).max_batch == 2048
    assert engines.runtime("sglang", Tokens(40_000), "h100", 1, 8192).max_batch == 2500


def test_a_given_limit_replaces_the_engines_and_a_bad_engine_is_named():
    assert engines.runtime("vllm", None, "h100", 1, 8192, max_tokens=512, chunked=None).max_tokens == 512
    with pytest.raises(InputError, match="engine must be one of trtllm, vllm, sglang"):
        engines.runtime("tgi", None, "h100", 1, 8192)


def test_the_engine_options_need_a_load_test(capsys):
    assert main(["inference", "--preset", "llama-3-8b", "--engine", "vllm"]) == 2
    assert "--engine sets the --rate simulation" in capsys.readouterr().err
    assert main(["inference", "--preset", "llama-3-8b", "--chunked-prefill"]) == 2
    assert "--chunked-prefill sets the --rate simulation" in capsys.readouterr().err


def test_sliding_window_layers_reserve_their_window_only():
    """gpt-oss-20b (its config.json): 24 layers of 8 key/value heads of 64, bf16, every other one
    a 128-token sliding window, which keeps at most 127 earlier tokens.  A request of 9,216 tokens
    holds ``12 x 9,216 + 12 x 127`` layer-tokens of ``2 x 8 x 64 x 2`` bytes, 229,613,568; a block
    of 32 tokens is every layer's, ``32 x 24 x 2,048`` = 1,572,864; so the request reserves
    ``ceil(229,613,568 / 1,572,864)`` = 146 blocks, not the 288 its tokens fill in full layers.
    Llama 3 8B (no window) fills ``ceil(9,216 / 32)`` = 288."""
    configs = Path(__file__).parent / "hf_configs"
    oss = from_config(json.loads((configs / "gpt-oss-20b.json").read_text()))
    runtime = Runtime(block_tokens=32)
    windowed = StepModel(oss, Serving(l_in=8192, l_out=1024, flash=True), "h100")
    assert windowed.kv_bytes(9216) == 12 * (9216 + 127) * 2 * 8 * 64 * 2
    assert request_blocks(windowed, runtime, [9216])[1] == [146]
    full = StepModel(preset("llama-3-8b"), Serving(l_in=7168, l_out=1024, flash=True), "h100")
    assert request_blocks(full, runtime, [9216, 9217])[1] == [288, 289]
