"""Seeds 000 (Megatron training-info) and 004 (DeepSpeed flops profiler), and the profile view."""

import pytest

from symbolic_cost.tools import megatron_info as mi
from symbolic_cost.cli import main
from symbolic_cost.models.config import preset
from symbolic_cost.tools.deepspeed_profiler import Module, aggregate, hf_bert, macs_text, params_text
from symbolic_cost.reproduce import deepspeed_profiler, megatron_training_info


def test_every_printed_number_of_seed_000_matches():
    cells = megatron_training_info.compare()
    assert len(cells) == 50 and [c for c in cells if not c.match] == []


def test_every_printed_number_of_seed_004_matches():
    cells = deepspeed_profiler.compare()
    assert len(cells) == 219 and [c for c in cells if not c.match] == []


def test_seed_004_is_four_sequences_not_one():
    """The caption says batch 1; only 4 x 128 tokens give the printed 44.7 GMACs."""
    assert macs_text(hf_bert(preset("bert-base-uncased"), 1, 128).total("macs")) == "11.17 GMACs"
    assert macs_text(hf_bert(preset("bert-base-uncased"), 4, 128).total("macs")) == "44.7 GMACs"


def test_bert_macs_by_hand():
    # per layer: 4 e^2 + 2 e f MACs per token for the linears, plus 2 b h l^2 q for QK^T and AV
    b, l, e, f, h, layers = 4, 128, 768, 3072, 12, 12
    per_layer = b * l * (4 * e * e + 2 * e * f) + 2 * b * h * l * l * (e // h)
    pooler = b * e * e
    assert hf_bert(preset("bert-base-uncased"), b, l).total("macs") == layers * per_layer + pooler


def test_megatron_info_formulas_by_hand():
    s, b, h, f, v, L = 1024, 4, 1280, 3392, 50304, 36
    assert mi.swiglu_ffn(1280) == 3392
    assert mi.activations(s, b, h, f, v, L) == L * (10 * s * b * h + 4 * s * b * f) + 3 * s * b * h // 2 \
        + 9 * s * b * v // 2 == 4_823_187_456               # the reference's element count
    assert mi.activations_per_gpu(s, b, h, f, L, 1, 1) == 3_895_984_128
    assert mi.data_parallel_groups(2, 2, 2, 8) == [["n0_g0", "n0_g2"], ["n0_g1", "n0_g3"],
                                                   ["n0_g4", "n0_g6"], ["n0_g5", "n0_g7"]]
    with pytest.raises(ValueError, match="unknown module 'attention'"):
        mi.module_elements("attention", s, b, h, f)


def test_aggregation_and_formats():
    root = Module("", "Root", children=[Module("a", "Linear", params=1536), Module("b", "Linear", params=10**6),
                                        Module("c", "Tanh")])
    assert aggregate(root, 1, "params") == [("Linear", 1001536), ("Tanh", 0)]
    assert (params_text(1536), params_text(109_482_240), params_text(0)) == ("1.54 k", "109.48 M", "0")
    assert (macs_text(0), macs_text(2_359_296)) == ("0 MACs", "2.36 MMACs")


def test_profile_command(capsys):
    assert main(["profile", "--preset", "gpt2", "--set", "b=4", "--set", "l=128", "--depth", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gpt2 (gpt2): 124.44 M, 100.00% params")
    assert "(1..11): layer as above" in out and "depth 1: params {ModuleList: 85.05 M" in out
    assert "depth 2: params" in out and "depth 3:" not in out        # DeepSpeed stops at module_depth


def test_profile_depth_0_shows_the_model_alone(capsys):
    """``--depth 0`` printed the top modules of depths 1 to 3 below the one-line tree."""
    assert main(["profile", "--preset", "gpt2", "--depth", "0"]) == 0
    out = capsys.readouterr().out
    assert "depth 0: params {gpt2: 124.44 M}" in out and "depth 1:" not in out


def test_reproduce_command_for_seeds_000_and_004(tmp_path, capsys):
    assert main(["reproduce", "megatron-training-info", "deepspeed-profiler", "--reports", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [   # distinct counts: tests/test_reproduce_honesty.py
        "megatron-training-info: matched 50/50 (24 distinct numeric values)",
        "deepspeed-profiler: matched 219/219 (63 distinct numeric values)"]
