"""Which products and layers a low-precision recipe reaches, counted by hand.

Megatron-Core runs every Transformer Engine linear module of a layer under the recipe: the
attention's projections (latent attention's too), the dense MLP's, and the routed experts'
grouped GEMM (``TEGroupedLinear``) and the shared experts'.  The MoE router's weight and the
shared-expert gate are plain PyTorch parameters and stay 16-bit.  With
``--first-last-layers-bf16`` the layers whose global number is below
``--num-layers-at-start-in-bf16`` or among the last ``--num-layers-at-end-in-bf16`` run
without the recipe (``is_first_last_bf16_layer``), refused under delayed scaling.

Mixtral 8x7B (its Hugging Face config): 32 layers, E = 4096, 32 query and 8 KV heads of 128,
8 experts of width F = 14336 (gated), top 2.  Per layer the low-precision products are
``qkv_proj`` (E -> 6144), ``v_proj`` (E -> E), ``expert_fc1`` (8 matrices E -> 2F) and
``expert_fc2`` (8 matrices F -> E): 18 weight matrices, each with its own scaling state.
"""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from sympy import Symbol

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import load, preset
from symbolic_cost.models.ranks import cost_placement, rank_activation_bytes
from symbolic_cost.timing.step import step_time_breakdown
from test_low_precision import SMALL as LOW_PRECISION_SMALL, SMALL_GPT2, _summary

CONFIGS = Path(__file__).resolve().parent / "hf_configs"
MIXTRAL = load(CONFIGS / "Mixtral-8x7B-v0.1.json")
L, E, F, KV, EXPERTS, TOP = 32, 4096, 14336, 8 * 128, 8, 2
TOKENS = 256
ROWS = TOKENS * TOP                               # routed rows through the experts (dropless)
MATRICES = E * (E + 2 * KV) + E * E + EXPERTS * (E * 2 * F + F * E)
SCALED = 2 + 2 * EXPERTS                          # weight matrices with their own scaling state


def _mixtral(**kw):
    return model_cost(MIXTRAL, Training(b=1, l=TOKENS, precision="bf16", **kw))


def test_the_experts_products_run_the_recipe_and_the_router_does_not():
    """Tensorwise scaling: an FP8 copy of every weight matrix (the experts' too) and a scale and
    an amax for each of the 3 tensors of each matrix; the kept inputs of the four products in one
    byte instead of two: E (qkv), E (v_proj), E per routed row (expert_fc1), F per routed row
    (expert_fc2)."""
    plain, got = _mixtral(), _mixtral(fp8="tensorwise")
    assert got.weight_bytes - plain.weight_bytes == L * (MATRICES + SCALED * 3 * 2 * 4)
    assert plain.activation_bytes - got.activation_bytes == L * (TOKENS * 2 * E + ROWS * (E + F))
    layer = got.layer
    assert [r.name for r in layer if r.fp8] == ["qkv_proj", "v_proj", "expert_fc1", "expert_fc2"]
    assert "router_cast" not in layer.names and not layer["router"].fp8


def test_the_experts_cast_their_inputs_and_output_gradients():
    """Forward casts the inputs of v_proj (E), expert_fc1 (E per routed row) and expert_fc2 (F
    per routed row; qkv_proj's input leaves the norm quantised); backward every output gradient:
    6144 (qkv), E, 2F and E per routed row.  Tensorwise reads each element twice (the amax pass)
    and writes two FP8 copies: 6 bytes."""
    layer = _mixtral(fp8="tensorwise").layer
    casts = [r for r in layer if r.name.endswith("_cast")]
    assert sum(r.mem_fwd for r in casts) == (TOKENS * E + ROWS * (E + F)) * 6
    assert sum(r.mem_bwd for r in casts) == (TOKENS * (E + 2 * KV + E) + ROWS * (2 * F + E)) * 6


def test_latent_attention_products_and_the_norms_they_read():
    """DeepSeek-V2-Lite: q_proj and kv_a_proj read the layer's input norm's output and cast it
    (Megatron-Core's MLA runs them as plain TE linears); kv_b_proj reads kv_layernorm's output,
    fused (``TELayerNormColumnParallelLinear``): no forward cast.  Its MoE layers run the routed
    and the shared experts in FP8, the router in 16-bit."""
    cost = model_cost(load(CONFIGS / "DeepSeek-V2-Lite.json"), Training(b=1, l=128, fp8="tensorwise"))
    dense, moe = (blk for blk, _ in cost.stack[1:-1])
    fp8 = ["q_proj", "kv_a_proj", "kv_b_proj", "v_proj"]
    assert [r.name for r in dense if r.fp8] == fp8 + ["fc1", "fc2"]
    assert [r.name for r in moe if r.fp8] == fp8 + ["expert_fc1", "expert_fc2", "shared_fc1", "shared_fc2"]
    e = 2048
    assert moe["q_proj_cast"].mem_fwd == moe["kv_a_proj_cast"].mem_fwd == 128 * e * 6
    assert moe["kv_b_proj_cast"].mem_fwd == dense["fc1_cast"].mem_fwd == 0


# GPT-2 small: 12 layers, four products each; the same hand counts as tests/test_low_precision.
GPT2 = preset("gpt2")
G_E, G_F, G_TOKENS = 768, 3072, 1024
G_MATRICES = 4 * G_E * G_E + 2 * G_E * G_F        # one layer's
G_KEPT = G_TOKENS * (3 * G_E + G_F)               # one layer's kept input elements


def _gpt2(**kw):
    return model_cost(GPT2, Training(b=1, l=G_TOKENS, **kw))


@pytest.mark.parametrize("first, last", [(1, 1), (2, 0), (0, 3), (12, 0)])
def test_first_and_last_layers_keep_16bit(first, last):
    """The layers kept 16-bit have no FP8 copies, no scaling state, no casts and keep 16-bit
    inputs; the others run the recipe as before."""
    plain = _gpt2()
    low = 12 - first - last
    got = _gpt2(fp8="tensorwise", first_layers_16bit=first, last_layers_16bit=last)
    assert got.weight_bytes - plain.weight_bytes == low * (G_MATRICES + 4 * 3 * 2 * 4)
    assert plain.activation_bytes - got.activation_bytes == low * G_KEPT
    groups = [(any(r.fp8 for r in blk), count) for blk, count in got.stack[1:-1]]
    assert groups == [(fp8, n) for fp8, n in ((True, low), (False, 12 - low)) if n]
    kept16 = [blk for blk, _ in got.stack[1:-1] if not any(r.fp8 for r in blk)]
    assert all(not r.name.endswith("_cast") for blk in kept16 for r in blk)


def test_the_16bit_layers_sit_on_the_first_and_last_pipeline_ranks():
    """Megatron-Core numbers layers globally: with p = 4 (3 layers each), layer 0 is on rank 0
    and layer 11 on rank 3; with 2 virtual stages of 3 layers on p = 2, rank 0 holds layers 0-2
    and 6-8, rank 1 layers 3-5 and 9-11.  Counts are (FP8 layers, 16-bit layers)."""
    got = _gpt2(fp8="tensorwise", first_layers_16bit=1, last_layers_16bit=1, p=4, micro_batches=8)
    assert cost_placement(got).every == ((2, 1), (3, 0), (3, 0), (2, 1))
    chunks = _gpt2(fp8="tensorwise", first_layers_16bit=1, last_layers_16bit=1, p=2, micro_batches=4,
                   schedule="interleaved", virtual_stages=2)
    assert cost_placement(chunks).every == ((5, 1), (5, 1))


def test_a_16bit_layer_keeps_its_inputs_in_16bit_on_its_rank():
    """1F1B on p = 4 with 8 micro-batches: rank r holds 4 - r in flight.  Against the all-FP8
    run, rank 0 (layer 0) keeps one layer's inputs in 2 bytes instead of 1 for each of its 4
    micro-batches, rank 3 (layer 11) for its 1; ranks 1 and 2 keep the same."""
    kw = dict(fp8="tensorwise", p=4, micro_batches=8)
    fp8, mixed = _gpt2(**kw), _gpt2(first_layers_16bit=1, last_layers_16bit=1, **kw)
    extra = [rank_activation_bytes(mixed, r) - rank_activation_bytes(fp8, r) for r in range(4)]
    assert extra == [4 * G_KEPT, 0, 0, 1 * G_KEPT]


def test_a_16bit_layer_takes_a_16bit_layers_time():
    """One device: the compute time of 2 layers kept 16-bit over 10 in FP8 is the all-FP8 time plus
    2/12 of the difference between the all-16-bit and the all-FP8 runs (each layer takes its own)."""
    compute = {name: step_time_breakdown(cost, "h100")["compute"] for name, cost in (
        ("16", _gpt2()), ("8", _gpt2(fp8="tensorwise")),
        ("mixed", _gpt2(fp8="tensorwise", first_layers_16bit=1, last_layers_16bit=1)))}
    assert compute["mixed"] - compute["8"] == (compute["16"] - compute["8"]) * 2 / 12


def test_a_symbolic_depth_splits_its_one_group():
    n = Symbol("n_layers", positive=True, integer=True)
    got = model_cost(replace(GPT2, n_layers=n), Training(b=1, l=G_TOKENS, fp8="tensorwise", first_layers_16bit=1,
                                                         last_layers_16bit=2))
    assert [count for _, count in got.stack[1:-1]] == [n - 3, 3]


@pytest.mark.parametrize("kw, match", [
    (dict(fp8="delayed", first_layers_16bit=1), "Delayed scaling does not support"),
    (dict(fp8="fp8-params", last_layers_16bit=1), "Delayed scaling does not support"),
    (dict(first_layers_16bit=1), "fp8=None"),
    (dict(fp8="tensorwise", first_layers_16bit=-1), "whole number"),
    (dict(fp8="tensorwise", last_layers_16bit=True), "whole number"),
])
def test_16bit_layers_refusals(kw, match):
    with pytest.raises(InputError, match=match):
        Training(b=1, l=64, **kw)


def test_16bit_layers_need_a_numeric_p_and_a_decoder():
    with pytest.raises(InputError, match="numeric p"):
        _gpt2(fp8="tensorwise", first_layers_16bit=1, p=Symbol("p", positive=True, integer=True))
    with pytest.raises(InputError, match="encoder-decoder"):
        model_cost(load(CONFIGS / "t5-small.json"), Training(b=1, l=64, fp8="tensorwise", last_layers_16bit=1))


SMALL = LOW_PRECISION_SMALL + "--pipeline-model-parallel-size 2 --fp8-format hybrid --fp8-recipe tensorwise " \
                              "--first-last-layers-bf16 "


@pytest.mark.parametrize("words, layers", [("", "1 1"), ("--num-layers-at-start-in-bf16 2 --num-layers-at-end-in-bf16 0",
                                                          "2 0")])
def test_megatron_arguments_equal_the_typed_16bit_layers(tmp_path, capsys, words, layers):
    """Megatron-LM's defaults: one layer at each end."""
    args, config = tmp_path / "args.txt", tmp_path / "config.json"
    args.write_text(SMALL + words)
    config.write_text(json.dumps(SMALL_GPT2))
    got = _summary(capsys, "--megatron-args", str(args), "--devices", "4")
    typed = _summary(capsys, "--hf-config", str(config), "--set", "b=2", "l=64", "d=2", "p=2", "n_micro=4",
                     "--precision", "bf16", "--flash", "--fp8", "tensorwise", "--fp8-16bit-layers", *layers.split())
    assert got == typed
    assert got != _summary(capsys, "--hf-config", str(config), "--set", "b=2", "l=64", "d=2", "p=2", "n_micro=4",
                           "--precision", "bf16", "--flash", "--fp8", "tensorwise")


def test_bridge_16bit_layers(tmp_path, capsys):
    """Megatron-Bridge's ``mixed_precision`` keys, on the Llama 3.2 1B dump (16 layers, E = 2048,
    F = 8192, 8 KV heads of 64): one layer at each end kept 16-bit drops 2 layers' FP8 copies and
    scaling state (tensorwise: a scale and an amax for 3 tensors of 4 products)."""
    text = (Path(__file__).resolve().parent / "framework_inputs" / "megatron_bridge_llama32_1b.yaml").read_text()
    fp8 = (text.replace("  fp8: null\n  fp8_amax_compute_algo", "  fp8: e4m3\n  fp8_amax_compute_algo", 1))
    kept = (fp8.replace("  first_last_layers_bf16: false\n  fp16", "  first_last_layers_bf16: true\n  fp16", 1)
            .replace("  num_layers_at_end_in_bf16: 0\n  num_layers_at_start_in_bf16: 0",
                     "  num_layers_at_end_in_bf16: 1\n  num_layers_at_start_in_bf16: 1", 1))
    assert kept.count("in_bf16: 1") == 2
    path = tmp_path / "run.yaml"
    got = {}
    for name, content in (("fp8", fp8), ("kept", kept)):
        path.write_text(content)
        got[name] = _summary(capsys, "--nemo-recipe", str(path), "--devices", "8")
    e, f, kv = 2048, 8192, 8 * 64
    layer = 2 * e * e + 2 * e * kv + 3 * e * f + 4 * 3 * 2 * 4
    assert got["fp8"]["weight_bytes"] - got["kept"]["weight_bytes"] == 2 * layer
    path.write_text(kept.replace("  fp8_recipe: tensorwise\n  fp8_wgrad: true\n  grad_reduce_in_fp32",
                                 "  fp8_recipe: delayed\n  fp8_wgrad: true\n  grad_reduce_in_fp32", 1))
    assert main(["summary", "--nemo-recipe", str(path), "--devices", "8"]) == 2
    assert "mixed_precision.first_last_layers_bf16" in capsys.readouterr().err
