"""``Overlap.shared_expert``: Megatron-Core's ``--moe-shared-expert-overlap`` runs the shared experts
on a stream of their own while the same layer's dispatch and combine all-to-alls are in flight
(``megatron/core/transformer/moe/shared_experts.py``: fc1 under the dispatch, fc2 under the
combine; each backward on the stream of its forward).  What it hides is the smaller of the two:
the all-to-alls' seconds, or the shared experts' (their products and their tensor-parallel
collectives).  Each expected value below is built from those two, timed on their own.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import load
from symbolic_cost.models.training import Overlap
from symbolic_cost.timing.hardware import comm_time, get_system, row_seconds
from symbolic_cost.timing.step import step_time_breakdown
from test_megatron_scripts import _model, _setup

SHARED = ("shared_fc1", "shared_act", "shared_fc2", "shared_gate", "shared_gate_act", "shared_gate_scale")


@pytest.fixture(scope="module")
def qwen():
    return load("tests/hf_configs/Qwen1.5-MoE-A2.7B.json")      # 24 layers, every one MoE, shared width 5,632


def _seconds(qwen, ep, d, system, **overlap):
    t = Training(b=1, l=4096, ep=ep, d=d, flash=True, overlap=Overlap(**overlap))
    cost = model_cost(qwen, t)
    return cost, step_time_breakdown(cost, system)


def _layer_parts(cost, system):
    """One MoE layer's all-to-all seconds and shared experts' seconds, forward and backward."""
    layer, count = cost.stack[1]
    spec = get_system(system)
    alltoall = sum(comm_time(c, spec) for row in layer for c in row.collectives if c.kind == "alltoall")
    shared = sum(row_seconds(row, spec)[f"t_total_{p}"] for row in layer if row.name in SHARED
                 for p in ("fwd", "bwd"))
    return float(alltoall), float(shared), count


def test_the_all_to_alls_longer_than_the_shared_experts_hide_the_shared_experts_time(qwen):
    """Across two nodes' worth of expert ranks the all-to-alls outlast the shared experts: the
    step's layer communication falls by the shared experts' seconds, every layer, every micro-batch."""
    plain, before = _seconds(qwen, 12, 12, "h100")
    _, after = _seconds(qwen, 12, 12, "h100", shared_expert=True)
    alltoall, shared, layers = _layer_parts(plain, "h100")
    assert alltoall > shared
    assert float(before["tensor_comm"] - after["tensor_comm"]) == pytest.approx(layers * shared, rel=1e-12)


def test_shared_experts_longer_than_the_all_to_alls_hide_them_all(qwen):
    """Two expert ranks inside one NVLink domain: the all-to-alls are shorter than the shared
    experts and vanish, as the 1F1B all-to-all overlap makes them vanish behind the compute."""
    plain, before = _seconds(qwen, 2, 2, "h100")
    _, shared_on = _seconds(qwen, 2, 2, "h100", shared_expert=True)
    _, expert_on = _seconds(qwen, 2, 2, "h100", expert=True)
    alltoall, shared, layers = _layer_parts(plain, "h100")
    assert alltoall < shared
    assert float(before["tensor_comm"] - shared_on["tensor_comm"]) == pytest.approx(layers * alltoall, rel=1e-12)
    assert float(shared_on["tensor_comm"]) == pytest.approx(float(expert_on["tensor_comm"]), rel=1e-12)


def test_refused_where_megatron_refuses_or_ignores_it(qwen):
    with pytest.raises(InputError, match="asserts"):
        Overlap(expert=True, shared_expert=True)
    llama = load("tests/hf_configs/Llama-3.1-8B.json")
    with pytest.raises(InputError, match="it would be ignored"):
        model_cost(llama, Training(b=1, l=1024, overlap=Overlap(shared_expert=True)))
    with pytest.raises(InputError, match="cannot work"):
        model_cost(qwen, Training(b=1, l=1024, flash=True, overlap=Overlap(shared_expert=True), recompute="selective",
                                  recompute_modules=("shared_experts",)))


def _megatron(extra: str):
    return _setup(_model(f"--expert-model-parallel-size 8 {extra}"))


def test_the_megatron_options():
    s = _megatron("--moe-shared-expert-intermediate-size 128 --moe-shared-expert-overlap")
    assert s.policy["overlap"].shared_expert and not s.policy["overlap"].expert
    s = _megatron("--overlap-moe-expert-parallel-comm")
    assert s.policy["overlap"].expert
    s = _megatron("--moe-shared-expert-overlap")         # no shared experts: Megatron-Core never uses it
    assert not s.policy["overlap"].shared_expert
    assert any("--moe-shared-expert-overlap" in note and "ignored" in note for note in s.notes)
    with pytest.raises(InputError):
        _megatron("--moe-shared-expert-intermediate-size 128 --moe-shared-expert-overlap "
                  "--overlap-moe-expert-parallel-comm")


def test_a_bridge_recipe_that_sets_it():
    """``deepseek_v2_lite_pretrain_8gpu_h100_bf16_config`` (Megatron-Bridge 067f987df,
    ``recipes/deepseek/h100/deepseek_v2.py:118-120``): ``moe_shared_expert_overlap = True`` beside DeepSeek-V2-Lite's
    two shared experts, once silently dropped."""
    from symbolic_cost.models import bridge_recipes
    setup = bridge_recipes.recipe_setup("deepseek_v2_lite_pretrain_config", load("tests/hf_configs/DeepSeek-V2-Lite.json"))
    assert setup.policy["overlap"] == Overlap(grad_reduce=True, param_gather=True, shared_expert=True)
    unused = replace(setup.policy["overlap"], shared_expert=False)
    assert unused.words() == ["grad", "param"]
