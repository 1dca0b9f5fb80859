"""Context parallelism in serving (inference.serving, inference.phases, inference.throughput,
the ``inference`` command): the prefill of one CP rank against the ring, all-gather and Ulysses
simulation of ``tests/simulate_cp.py``, hand counts, and the refusals of what is not modelled."""

import json
from pathlib import Path

import pytest

import simulate_cp as sim
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.conventions import DEFAULT
from symbolic_cost.inference import Serving
from symbolic_cost.inference.phases import decode, prefill
from symbolic_cost.inference.throughput import inference_cost, prefill_fields
from symbolic_cost.models.config import from_config, preset

L, CP = 1024, 4
LLAMA = preset("llama-2-7b")            # 32 layers, e = 4096, 32 heads of 128, no GQA
EXACT = DEFAULT.but(causal_flops="exact")


def serving(cp=CP, variant="ring", **kw):
    return Serving(b=1, l_in=L, l_out=1, flash=True, cp=cp, cp_variant=variant, **kw)


def per_layer_sent(phase) -> int:
    """Elements one rank sends in one layer's forward exchange (``volume`` is bytes: bf16)."""
    assert sum(n for c, n in phase.collectives) == 32 * len([c for c in phase.layer.collectives if c.pass_ == "fwd"])
    return sum(c.volume for c in phase.layer.collectives if c.pass_ == "fwd") / 2


@pytest.mark.parametrize("variant, simulate", [("ring", sim.ring), ("all-gather", sim.all_gather)])
def test_each_rank_sends_and_scores_what_the_simulation_does(variant, simulate):
    kv_local = L // CP * 2 * 4096              # a rank's own K and V, b = 1
    ranks = simulate(L, CP, kv_local)
    phase = prefill(LLAMA, serving(variant=variant), EXACT)
    assert per_layer_sent(phase) == ranks[0]["fwd"] == (CP - 1) * kv_local
    whole = prefill(LLAMA, serving(cp=1), EXACT)
    core = lambda ph: next(r for r in ph.layer if "attention" in r.name and r.flops_fwd != 0)  # noqa: E731
    # the causal balance: every rank scores 1/cp of the unmasked (query, key) pairs
    assert {r["unmasked"] for r in ranks} == {L * (L + 1) // 2 // CP}
    assert core(phase).flops_fwd * CP == core(whole).flops_fwd


def test_ulysses_sends_what_the_simulation_does():
    phase = prefill(LLAMA, serving(variant="ulysses"))
    assert per_layer_sent(phase) == sim.ulysses(L, CP, 1, 32, 32, 128, 128)["fwd"]


@pytest.mark.parametrize("variant", ["ring", "all-gather", "ulysses"])
def test_the_ranks_split_the_prefill_and_the_cache(variant):
    # every token's work runs on one rank: all but the head's last token (on one rank) splits cp ways
    one, many = (prefill_fields(LLAMA, s, "h100", EXACT) for s in (serving(cp=1), serving(variant=variant)))
    lm = sum(r.flops_fwd for r in prefill(LLAMA, serving(cp=1)).stack[-1][0] if r.name in ("lm_head", "lm_head_gather"))
    assert many["prefill_flops"] - lm == (one["prefill_flops"] - lm) / CP
    # a rank caches the keys and values of its own L/cp tokens: 2 x 32 layers x 4096 x 2 bytes a token
    assert many["kv_cache_bytes"] == L // CP * 2 * 32 * 4096 * 2 == one["kv_cache_bytes"] / CP
    assert many["weight_bytes"] == one["weight_bytes"]          # weights are replicated over CP
    assert many["ttft_s"] < one["ttft_s"]


def test_pipeline_stages_send_a_ranks_tokens():
    phase = prefill(LLAMA, serving(p=2))
    sends = [c for c, _ in phase.collectives if c.kind == "p2p" and c.group == 2]
    assert [(c.elements, c.repeats) for c in sends] == [(L // CP * 4096, 1)]


def test_decode_and_what_cp_cannot_split_are_refused_by_name():
    with pytest.raises(InputError) as err:
        decode(LLAMA, serving(), l_ctx=L)
    assert err.value.argument == "cp" and "decode under context parallelism" in str(err.value)
    with pytest.raises(InputError) as err:
        inference_cost(LLAMA, serving())
    assert err.value.argument == "cp"
    with pytest.raises(InputError) as err:
        prefill(LLAMA, Serving(b=1, l_in=L, l_out=1, cp=CP))          # ring without flash
    assert err.value.argument == "flash"
    with pytest.raises(InputError) as err:
        prefill(LLAMA, Serving(b=1, l_in=L + 4, l_out=1, flash=True, cp=CP))
    assert err.value.argument == "cp" and "8 chunks" in str(err.value)
    mixtral = json.loads((Path(__file__).parent / "hf_configs" / "Mixtral-8x7B-v0.1.json").read_text())
    with pytest.raises(InputError) as err:              # training folds experts onto CP; serving does not
        prefill(from_config(mixtral), Serving(b=1, l_in=L, l_out=1, flash=True, cp=CP))
    assert err.value.argument == "cp" and "routed experts" in str(err.value)
    with pytest.raises(InputError) as err:
        Serving(cp_variant="tree")
    assert err.value.argument == "cp_variant"


def test_the_command_reports_the_prefill_and_refuses_decode_fields(capsys):
    args = ["inference", "--preset", "llama-2-7b", "--set", f"l_in={L}", "l_out=2", f"cp={CP}", "--flash"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["cp"], out["cp_variant"], out["kv_cache_bytes"]) == (CP, "ring", L // CP * 2 * 32 * 4096 * 2)
    assert main(args) == 0
    assert "the prefill only (decode under CP is not modelled)" in capsys.readouterr().out
    assert main([*args, "--field", "tpot_s"]) == 2
    assert "tpot_s: decode under context parallelism (cp=4) is not modelled" in capsys.readouterr().err
    assert main(["inference", "--preset", "llama-2-7b", "--cp-variant", "ulysses"]) == 2
    assert "--cp-variant chooses how context parallelism splits the prefill" in capsys.readouterr().err
