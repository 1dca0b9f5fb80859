"""Quantised serving weights (inference.weight_formats) against hand counts of Llama 3 8B from its
published shape: 8,030,261,248 parameters, of which the word table and the LM head hold
128,256 x 4,096 each and the 65 RMS norms 4,096 each; the rest are the layers' matrices."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from sympy import Rational

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.inference.serving import Serving
from symbolic_cost.inference.throughput import inference_cost
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.inference.phases import decode
from symbolic_cost.models.config import from_config, stored_weights
from symbolic_cost.timing.hardware import get_system

HF = Path(__file__).parent / "hf_configs"
LLAMA3_8B = Architecture("llama-3-8b", 32, 4096, 32, 14336, 128256, kv_heads=8, positions=0, mlp="swiglu",
                         norm="rms", rotary=True, tied=False, qkv_bias=False, bias=False, dropouts=False)
TOTAL = 8_030_261_248
ENDS = 2 * 128256 * 4096                 # word table and LM head: kept in bf16
NORMS = 65 * 4096                        # 2 per layer and the final one: kept in bf16
MATRICES = TOTAL - ENDS - NORMS          # 6,979,321,856: the quantised part


def published(name):
    return from_config(json.loads((Path(__file__).parent / "hf_configs" / f"{name}.json").read_text()), name)


@pytest.mark.parametrize("fmt, per_element", [
    (None, 2), ("fp8", 1), ("mxfp8", 1 + Rational(1, 32)), ("nvfp4", Rational(9, 16)), ("int4", Rational(133, 256)),
    # QLoRA (Dettmers et al. 2023) Sec. 3: 4 bits and an fp32 absmax a block of 64; double-quantised,
    # an 8-bit absmax a block and an fp32 scale a 256 blocks (0.127 bits of scales a parameter)
    ("nf4", Rational(4, 8) + Rational(32, 8 * 64)), ("nf4-double", Rational(4, 8) + Rational(8, 8 * 64)
                                                     + Rational(32, 8 * 64 * 256))])
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


def test_mxfp8_needs_block_scaled_tensor_cores():
    """MXFP8 weights were priced at H100's FP8 rate without a word (training's MXFP8 recipe is refused
    there): no Hopper kernel applies a scale per 32 elements."""
    with pytest.raises(InputError, match="weights mxfp8 .--weights. needs block-scaled .MX. tensor cores, and system h100 has none"):
        inference_cost(LLAMA3_8B, Serving(b=1, l_in=16, l_out=2, weights="mxfp8"), get_system("h100"))
    assert inference_cost(LLAMA3_8B, Serving(b=1, l_in=16, l_out=2, weights="fp8"), get_system("h100")).weight_bytes


def test_nvfp4_needs_fp4_tensor_cores():
    with pytest.raises(InputError, match="weights nvfp4 .--weights. needs block-scaled .NVFP4. tensor cores, and "
                                         "system h100 has none"):
        inference_cost(LLAMA3_8B, Serving(b=1, l_in=16, l_out=2, weights="nvfp4"), get_system("h100")).ttft
    b200 = inference_cost(LLAMA3_8B, Serving(b=1, l_in=1024, l_out=2, weights="nvfp4"), get_system("b200"))
    fp8 = inference_cost(LLAMA3_8B, Serving(b=1, l_in=1024, l_out=2, weights="fp8"), get_system("b200"))
    assert b200.prefill_time["compute"] < fp8.prefill_time["compute"]


def test_cdna4_serves_mxfp8_at_its_fp8_rate_and_refuses_nvfp4():
    """AMD's MI355X datasheet and CDNA 4 ISA: MXFP8, MXFP6 and MXFP4 in the matrix cores, not NVFP4; FP8 at
    5,033.2 TFLOP/s dense.  MXFP8 weights were refused there; their products run at that rate."""
    mi355x = get_system("mi355x")
    mx = inference_cost(LLAMA3_8B, Serving(b=1, l_in=1024, l_out=2, weights="mxfp8"), mi355x)
    fp8 = inference_cost(LLAMA3_8B, Serving(b=1, l_in=1024, l_out=2, weights="fp8"), mi355x)
    assert mx.prefill_time["compute"] == fp8.prefill_time["compute"]      # the same products, the same rate
    bf16 = inference_cost(LLAMA3_8B, Serving(b=1, l_in=1024, l_out=2), mi355x)
    assert mx.prefill_time["compute"] < bf16.prefill_time["compute"]
    with pytest.raises(InputError, match="weights nvfp4 .--weights. needs block-scaled .NVFP4. tensor cores, and "
                                         "system mi355x runs mxfp8, mxfp4 only"):
        inference_cost(LLAMA3_8B, Serving(b=1, l_in=16, l_out=2, weights="nvfp4"), mi355x).ttft


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


def _gpt_oss_20b_bytes(expert_bytes):
    """gpt-oss-20b's weights by hand from OpenAI's config.json: 24 layers of hidden 2,880; 64 query
    and 8 key/value heads of 64 (biases on all four projections), a sink logit a head, a router of
    32 experts (bias), 32 experts with a gated 2 x 2,880 up projection and a 2,880 down one (biases),
    two norms; a word table and an untied head of 201,088 words and a final norm.  The experts'
    matrices take ``expert_bytes`` an element, everything else 2 (bf16)."""
    e, f, experts, layers, vocab = 2880, 2880, 32, 24, 201088
    q, kv = 64 * 64, 8 * 64
    attention = e * q + q + 2 * (e * kv + kv) + q * e + e + 64
    router = e * experts + experts
    expert_matrices = experts * (e * 2 * f + f * e)
    expert_biases = experts * (2 * f + e)
    rest = layers * (attention + router + expert_biases + 2 * e) + 2 * vocab * e + e
    assert rest + layers * expert_matrices == 20_914_757_184       # OpenAI's model card: 20.91B parameters
    return 2 * rest + expert_bytes * layers * expert_matrices


def test_a_checkpoint_s_own_format_is_the_serving_default(capsys):
    """gpt-oss-20b ships its routed experts in MXFP4 (E2M1 with an E8M0 scale per 32: 17/32 bytes), the
    rest in bf16, and an engine serves them so: the default without --weights, said in a note;
    --weights replaces it."""
    base = ["inference", "--hf-config", str(HF / "gpt-oss-20b.json"), "--set", "b=1", "l_in=64", "l_out=2", "--json"]
    assert main(base) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["weight_bytes"] == _gpt_oss_20b_bytes(Rational(17, 32))
    assert any("quantization_config): mxfp4-experts" in note for note in report["notes"])
    assert main([*base, "--weights", "fp8"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert not any("as the checkpoint stores them" in note for note in notes)
    assert any(note.startswith("quantization_config: how the checkpoint stores its weights") for note in notes)


def test_deepseek_v3_block_scaled_fp8_keeps_its_router():
    """DeepSeek-V3's checkpoint (its config.json's weight_block_size [128, 128]): E4M3 with one fp32
    scale per 128 x 128 block, 1 + 4/16384 bytes an element for every matrix of a layer (no biases)
    but the router (the gate), which stays in bf16; per-tensor fp8 takes the router too."""
    config = json.loads((HF / "DeepSeek-V3.json").read_text())
    assert stored_weights(config) == ("fp8-block", None)
    arch = from_config(config, "DeepSeek-V3")
    served = Serving(b=1, l_in=16, l_out=2, m1=8, ep=8)
    plain, block, tensor = (decode(arch, replace(served, weights=w), 16).stack[-2][0] for w in (None, "fp8-block", "fp8"))
    rows = [(p, b, t) for p, b, t in zip(plain.rows, block.rows, tensor.rows) if p.engine == "matrix" and p.weights]
    assert {p.name for p, _, _ in rows} >= {"router", "expert_fc1", "expert_fc2"}
    for p, b, t in rows:
        assert b.weights == (p.weights if p.name == "router" else p.weights / 2 * (1 + Rational(4, 128 * 128)))
        assert t.weights == p.weights / 2


CT_FP8 = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
          "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": {"num_bits": 8, "type": "float",
                                                                                     "strategy": "token", "dynamic": True},
                                        "weights": {"num_bits": 8, "type": "float", "strategy": "tensor",
                                                    "symmetric": True, "dynamic": False}}}}
"""An llm-compressor FP8 checkpoint's quantization_config, as its "FP8" and "FP8-dynamic" model cards
publish it (one group over every Linear but the head)."""


BNB_4BIT = {"_load_in_4bit": True, "_load_in_8bit": False, "bnb_4bit_compute_dtype": "bfloat16",
            "bnb_4bit_quant_storage": "uint8", "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
            "llm_int8_enable_fp32_cpu_offload": False, "llm_int8_has_fp16_weight": False,
            "llm_int8_skip_modules": None, "llm_int8_threshold": 6.0, "load_in_4bit": True, "load_in_8bit": False,
            "quant_method": "bitsandbytes"}
"""A bitsandbytes 4-bit checkpoint's quantization_config as transformers' ``BitsAndBytesConfig.to_dict``
writes it (QLoRA's NF4 with double quantisation, as the "-bnb-4bit" checkpoints ship)."""


@pytest.mark.parametrize("section, expected", [
    (CT_FP8, "fp8"),
    ({**CT_FP8, "config_groups": {"group_0": {**CT_FP8["config_groups"]["group_0"], "weights": {
        "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": False}}}}, "int4"),
    ({**CT_FP8, "config_groups": {"group_0": {**CT_FP8["config_groups"]["group_0"], "weights": {
        "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}}, "nvfp4"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "int4"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}, "int4"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}, "nvfp4"),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8"),
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8"),
    (BNB_4BIT, "nf4-double"),
    ({**BNB_4BIT, "bnb_4bit_use_double_quant": False, "llm_int8_skip_modules": ["lm_head"]}, "nf4"),
])
def test_published_quantization_configs_name_their_format(section, expected):
    assert stored_weights({"quantization_config": section})[0] == expected


@pytest.mark.parametrize("section", [
    {"quant_method": "gptq", "bits": 8, "group_size": 128},                    # 8-bit integers: not a format here
    {"quant_method": "awq", "bits": 4, "group_size": 64},                      # groups of 64
    {"quant_method": "fp8", "weight_block_size": [64, 64]},
    {**BNB_4BIT, "load_in_4bit": False, "load_in_8bit": True},                  # LLM.int8: int8 products, not here
    {**BNB_4BIT, "llm_int8_skip_modules": ["lm_head", "model.layers.1.mlp"]},  # a layer left in 16 bits
    {**CT_FP8, "ignore": ["lm_head", "re:.*self_attn.*"]},                     # attention left out: not one format
    {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.mlp.experts"]},
])
def test_a_format_not_modelled_is_noted_and_counted_in_the_precision(section):
    found, note = stored_weights({"quantization_config": section})
    assert found is None and "is not a modelled weight format" in note


def test_notes_of_a_format_counted_nearly():
    channel = {**CT_FP8, "config_groups": {"group_0": {**CT_FP8["config_groups"]["group_0"], "weights": {
        "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}}}}
    assert stored_weights({"quantization_config": channel}) == (
        "fp8", "its fp32 scale per output channel (4 bytes a row) is not counted")
    symmetric = {**CT_FP8, "config_groups": {"group_0": {**CT_FP8["config_groups"]["group_0"], "weights": {
        "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}}}}
    assert "1/256 byte an element more" in stored_weights({"quantization_config": symmetric})[1]


def test_a_quantised_checkpoint_of_any_family_is_read(tmp_path, capsys):
    """A Llama checkpoint that ships quantised (an AWQ 4-bit one) was refused as an unknown key; its
    quantization_config is noted, serving takes its format (int4: 1/2 + 5/256 bytes a layer weight)
    and training counts its own precision."""
    config = json.loads((HF / "Llama-3.1-8B.json").read_text())
    config["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm",
                                     "zero_point": True}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["inference", "--hf-config", str(path), "--set", "b=1", "l_in=64", "l_out=2", "--json"]) == 0
    served = json.loads(capsys.readouterr().out)
    assert served["weight_bytes"] == MATRICES * (Rational(1, 2) + Rational(5, 256)) + 2 * (ENDS + NORMS)
    assert main(["summary", "--hf-config", str(path), "--set", "l=2048", "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert any(note.startswith("quantization_config: how the checkpoint stores") for note in trained["notes"])


def test_a_format_of_experts_on_a_model_without_them_is_refused(capsys):
    assert main(["inference", "--preset", "llama-2-7b", "--weights", "mxfp4-experts"]) == 2
    assert "stores only the rows expert_fc1, expert_fc2, which this model has none of" in capsys.readouterr().err


def test_bitsandbytes_4_bit_float_is_stored_as_nf4_is():
    found, note = stored_weights({"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}})
    assert found == "nf4" and "4 bits and an absmax a block of 64" in note


def test_fp8_weights_without_fp8_tensor_cores_are_noted_and_timed_at_the_16_bit_rate(capsys):
    """A100 has no FP8 tensor cores: the products take bf16's 312 TFLOP/s, the weights still 1 byte."""
    a100 = get_system("a100")
    bf16, fp8 = (inference_cost(LLAMA3_8B, Serving(b=1, l_in=1024, l_out=2, weights=w), a100) for w in (None, "fp8"))
    assert fp8.prefill_time["compute"] == bf16.prefill_time["compute"]
    assert fp8.weight_bytes == MATRICES + 2 * (ENDS + NORMS)
    assert main(["inference", "--preset", "llama-3-8b", "--weights", "fp8", "--system", "a100", "--json"]) == 0
    assert any("no FP8 tensor cores" in n for n in json.loads(capsys.readouterr().out)["notes"])
    assert main(["inference", "--preset", "llama-3-8b", "--weights", "fp8", "--system", "h100", "--json"]) == 0
    assert not any("no FP8 tensor cores" in n for n in json.loads(capsys.readouterr().out).get("notes", []))
