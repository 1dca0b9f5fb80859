"""Tensor ranks that outnumber the key/value heads copy them (``inference.kv_cache.kv_heads_per_device``).

vLLM's ``QKVParallelLinear`` keeps one key/value head on each rank where the tensor-parallel size
is a multiple of the heads (``num_kv_head_replicas = tp / kv``); TensorRT-LLM and SGLang split the
same way.  Counted by hand for Llama 3 70B (80 layers of 8,192; 64 query heads and 8 key/value
heads of 128; MLP 28,672; 128,256 tokens, untied) at TP 16, bf16.
"""

import json

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.inference.kv_cache import kv_cache_bytes, kv_heads_per_device
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset

E, H, D, F, V, L = 8192, 64, 128, 28672, 128256, 80


def _inference(capsys, *words):
    assert main(["inference", "--preset", "llama-3-70b", "--flash", "--system", "h100", "--json", *words]) == 0
    return json.loads(capsys.readouterr().out)


def test_sixteen_ranks_hold_one_head_each(capsys):
    got = _inference(capsys, "--set", "m1=16", "l_in=1000", "l_out=200")
    # a layer: the query and output projections split 16 ways, one key and one value head whole on each
    # rank, the MLP split 16 ways, the two norms whole; the table and the head split 16 ways
    layer = E * H * D // 16 + 2 * E * D + H * D * E // 16 + 3 * E * F // 16 + 2 * E
    assert got["weight_bytes"] == 2 * (L * layer + 2 * (V * E // 16) + E) == 8_989_458_432
    # the cache at the last step: 1,199 tokens of one key and one value head of 128 in every layer
    assert got["kv_cache_bytes"] == L * 2 * D * 2 * 1199 == 49_111_040


def test_a_rank_holds_its_share_where_the_heads_divide():
    llama = preset("llama-3-70b")
    assert [kv_heads_per_device(8, m1) for m1 in (1, 2, 4, 8, 16, 32)] == [8, 4, 2, 1, 1, 1]
    assert kv_cache_bytes(llama, 1, 100, m1=4) == L * 2 * D * 2 * 100 * 2
    assert kv_cache_bytes(llama, 1, 100, m1=16) == kv_cache_bytes(llama, 1, 100, m1=8) == L * 2 * D * 2 * 100
    with pytest.raises(InputError, match="past kv_heads=8 key/value heads must be a multiple of them"):
        kv_heads_per_device(8, 12)
    with pytest.raises(InputError, match="m1 must divide kv_heads"):
        kv_heads_per_device(8, 3)
    with pytest.raises(InputError, match="kv_heads must be a positive integer, got 0"):
        kv_heads_per_device(0, 8)


def test_ranks_past_the_query_heads_are_refused_by_them(capsys):
    # 128 ranks copy the 8 key/value heads, but cannot split 64 query heads: the rule named is theirs
    assert main(["inference", "--preset", "llama-3-70b", "--set", "m1=128"]) == 2
    assert "m1 must divide h (got m1=128, h=64)" in capsys.readouterr().err


def test_a_moe_model_of_four_heads_serves_on_eight_ranks(capsys):
    assert main(["inference", "--hf-config", "tests/hf_configs/Qwen3-30B-A3B.json", "--system", "h100", "--set",
                 "l_in=1000", "l_out=200", "m1=8", "--flash", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    # 48 layers, one key and one value head of 128 a rank, 1,199 tokens at the last step
    assert got["kv_cache_bytes"] == 48 * 2 * 128 * 2 * 1199


def test_training_keeps_megatrons_rule():
    # Megatron-Core splits the query groups over the tensor ranks and asserts they divide
    with pytest.raises(InputError, match="m1 must divide kv_heads"):
        model_cost(preset("llama-3-70b"), Training(b=1, l=1024, m1=16, s1=16))
