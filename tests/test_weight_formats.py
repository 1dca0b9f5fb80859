"""Quantised serving weights (inference.weight_formats) against hand counts of Llama 3 8B from its
published shape: 8,030,261,248 parameters, of which the word table and the LM head hold
128,256 x 4,096 each and the 65 RMS norms 4,096 each; the rest are the layers' matrices."""

import json
from pathlib import Path

import pytest
from sympy import Rational

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.inference.serving import Serving
from symbolic_cost.inference.throughput import inference_cost
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.config import from_config
from symbolic_cost.timing.hardware import get_system

LLAMA3_8B = Architecture("llama-3-8b", 32, 4096, 32, 14336, 128256, kv_heads=8, positions=0, mlp="swiglu",
                         norm="rms", rotary=True, tied=False, qkv_bias=False, bias=False, dropouts=False)
TOTAL = 8_030_261_248
ENDS = 2 * 128256 * 4096                 # word table and LM head: kept in bf16
NORMS = 65 * 4096                        # 2 per layer and the final one: kept in bf16
MATRICES = TOTAL - ENDS - NORMS          # 6,979,321,856: the quantised part


def published(name):
    return from_config(json.loads((Path(__file__).parent / "hf_configs" / f"{name}.json").read_text()), name)


@pytest.mark.parametrize("fmt, per_element", [
    (None, 2), ("fp8", 1), ("mxfp8", 1 + Rational(1, 32)), ("nvfp4", Rational(9, 16)), ("int4", Rational(133, 256))])
def test_weight_bytes_by_hand(fmt, per_element):
    cost = inference_cost(LLAMA3_8B, Serving(b=1, l_in=16, l_out=2, weights=fmt), get_system("b200"))
    assert MATRICES == 6_979_321_856
    assert cost.weight_bytes == MATRICES * per_element + 2 * (ENDS + NORMS)


def test_fp8_halves_the_weights_a_decode_step_reads():
    # peak-only roofline on H100: the step reads MATRICES bytes fewer, at 3.35 TB/s
    h100 = get_system("h100")
    bf16, fp8 = (inference_cost(LLAMA3_8B, Serving(b=1, l_in=16, l_out=2, weights=w), h100) for w in (None, "fp8"))
    saved = (bf16.decode_time["memory"] - fp8.decode_time["memory"]) * 3350 * 10**9
    assert saved == MATRICES


def test_fp8_products_run_at_the_fp8_rate():
    # the prefill's layer products: 2 x MATRICES FLOPs a token, at 989.4 TFLOP/s in bf16 and
    # 1978.9 in FP8; the rest of the compute time is the same in both
    h100 = get_system("h100")
    tokens = 1024
    bf16, fp8 = (inference_cost(LLAMA3_8B, Serving(b=1, l_in=tokens, l_out=2, weights=w), h100)
                 for w in (None, "fp8"))
    products = 2 * MATRICES * tokens     # the projections' bias-free products: m n (2k - 1) each
    saving = bf16.prefill_time["compute"] - fp8.prefill_time["compute"]
    rows = tokens * (6144 + 4096 + 2 * 14336 + 4096) * 32   # one add fewer per output element
    exact = (products - rows) * (Rational(1, 989400 * 10**9) - Rational(1, 1978900 * 10**9))
    assert saving == exact


def test_nvfp4_needs_fp4_tensor_cores():
    with pytest.raises(InputError, match="no FP4 tensor cores"):
        inference_cost(LLAMA3_8B, Serving(b=1, l_in=16, l_out=2, weights="nvfp4"), get_system("h100")).ttft
    b200 = inference_cost(LLAMA3_8B, Serving(b=1, l_in=1024, l_out=2, weights="nvfp4"), get_system("b200"))
    fp8 = inference_cost(LLAMA3_8B, Serving(b=1, l_in=1024, l_out=2, weights="fp8"), get_system("b200"))
    assert b200.prefill_time["compute"] < fp8.prefill_time["compute"]


def test_refusals():
    with pytest.raises(InputError, match="weights must be one of fp8, mxfp8, nvfp4, int4"):
        Serving(weights="fp6")
    with pytest.raises(InputError, match="encoder-decoder"):
        inference_cost(published("t5-small"), Serving(b=1, l_in=8, l_out=2, weights="fp8"), "h100")


def test_the_command_line_takes_a_weight_format(capsys):
    assert main(["inference", "--preset", "llama-2-7b", "--set", "b=1", "l_in=64", "l_out=2", "--weights", "fp8",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # Llama 2 7B: 6,738,415,616 parameters; word table and head 32,000 x 4,096 each, 65 norms
    ends, norms = 2 * 32000 * 4096, 65 * 4096
    assert report["weight_bytes"] == (6738415616 - ends - norms) + 2 * (ends + norms)
    assert main(["inference", "--preset", "llama-2-7b", "--weights", "nvfp4"]) == 2
    assert "FP4" in capsys.readouterr().err
