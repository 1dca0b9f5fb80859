"""CUDA graphs and the experts' launches: which rows a graph captures, what it launches, what it costs.

The expected rows are written here from Megatron-Core's definitions of its capture scopes
(``CudaGraphScope`` in ``megatron/core/transformer/enums.py``; the MoE layer's partial capture ends
at ``route`` or, with ``moe_preprocess``, after the dispatcher's preprocessing, which for the
all-to-all dispatcher permutes the tokens), and the launches from what the kernels are: a Megatron
MLP is five kernels (norm, fc1, activation, fc2, bias-dropout-add), a graph is one replay, and
Transformer Engine's ``GroupedLinear`` issues one cuBLAS GEMM per local expert and product.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from sympy import Rational

from symbolic_cost.blocks.graphs import captured, check_scopes, graph_scopes
from symbolic_cost.blocks.layer import transformer_layer
from symbolic_cost.blocks.moe import MoE
from symbolic_cost.blocks.specs import Feedforward, Heads
from symbolic_cost.blocks.wiring import Experts, Run, Wiring
from symbolic_cost.checks import InputError
from symbolic_cost.models.training import Training
from symbolic_cost.ops import gelu
from symbolic_cost.timing.efficiency import group_launches, launches
from symbolic_cost.timing.hardware import calibrated, row_seconds

ATTENTION = ["rms_norm_1", "qkv_proj", "flash_attention", "v_proj", "residual"]
ROUTER = ["rms_norm_2", "router", "router_probs", "router_topk"]


def _moe_layer(graphs=(), dispatcher="alltoall", capacity=None, kernels="megatron-core"):
    experts = Experts(ep=16, dispatcher=dispatcher, capacity_factor=capacity, kernels=kernels)
    ffn = Feedforward(gated=True, moe=MoE(128, 8, 768), experts=experts)     # Qwen3-30B-A3B's experts
    return transformer_layer(2, 4096, 2048, 6144, Heads(32, 4, 128), ffn=ffn, wiring=Wiring("rms", False),
                             run=Run(flash=True, graphs=graphs))


def _dense_layer(graphs=()):
    return transformer_layer(2, 4096, 4096, 14336, Heads(32, 8, 128), ffn=Feedforward(gated=True),
                             wiring=Wiring("rms", False), run=Run(flash=True, graphs=graphs))


def _captured_names(layer):
    return [r.name for r in layer if r.graph is not None]


def test_attention_router_and_preprocess_capture_megatron_cores_rows():
    layer = _moe_layer(("attn", "moe_router", "moe_preprocess"))
    assert _captured_names(layer) == ATTENTION + ROUTER + ["dispatch"]
    # one graph: the attention runs straight into the router, so one replay
    assert [r.graph for r in layer].count("replay") == 1 and layer.rows[0].graph == "replay"


def test_the_flex_dispatcher_permutes_outside_the_graph():
    assert _captured_names(_moe_layer(("moe_router", "moe_preprocess"), dispatcher="flex")) == ROUTER


def test_router_without_attention_is_its_own_graph():
    layer = _moe_layer(("moe_router",))
    assert _captured_names(layer) == ROUTER
    assert layer["rms_norm_2"].graph == "replay"


def test_mlp_scope_replays_a_dense_mlps_five_kernels_as_one():
    eager, graphed = _dense_layer(), _dense_layer(("mlp",))
    saved = sum(launches(r, "fwd") for r in eager) - sum(launches(r, "fwd") for r in graphed)
    assert saved == 5 - 1
    assert _captured_names(graphed) == ["rms_norm_2", "fc1", "act", "fc2", "residual"]


def test_mlp_scope_leaves_an_moe_layer_eager():
    assert _captured_names(_moe_layer(("mlp",))) == []


def test_whole_step_captures_every_row():
    layer = _moe_layer(("full_iteration",), capacity=Rational(5, 4))
    assert all(r.graph is not None for r in layer)


def test_moe_scope_needs_fixed_shapes():
    with pytest.raises(InputError, match="cuda_graphs 'moe'.*dropless") as caught:
        _moe_layer(("moe",))
    assert caught.value.argument == "cuda_graphs"
    layer = _moe_layer(("moe",), capacity=1)
    assert _captured_names(layer)[-1] == "residual" and "expert_fc1" in _captured_names(layer)


def _kernels(row, pass_):
    return launches(row, pass_) + group_launches(row, pass_)


def test_grouped_linear_launches_a_gemm_per_local_expert():
    layer = _moe_layer()              # 128 experts over ep=16: 8 a rank; forward, then dX and dW
    assert (_kernels(layer["expert_fc1"], "fwd"), _kernels(layer["expert_fc1"], "bwd")) == (8, 16)
    # the first of each product is the framework's dispatch, the rest TE's C++ loop
    assert (launches(layer["expert_fc2"], "fwd"), launches(layer["expert_fc2"], "bwd")) == (1, 2)
    fused = _moe_layer(kernels="fused")      # a serving engine's one fused kernel a product
    assert (_kernels(fused["expert_fc1"], "fwd"), _kernels(fused["expert_fc1"], "bwd")) == (1, 2)
    graphed = replace(layer["expert_fc1"], graph="captured")
    assert _kernels(graphed, "fwd") == 0


def test_a_grouped_products_further_launches_cost_group_kernel():
    system = calibrated("h100")
    cheap = system.but(efficiency=system.efficiency.but(group_kernel=Rational(3, 10**6)))
    row = _moe_layer()["expert_fc1"]          # 7 further GEMMs forward, 14 backward
    for pass_, further in (("fwd", 7), ("bwd", 14)):
        assert row_seconds(row, system)[f"t_{pass_}"] - row_seconds(row, cheap)[f"t_{pass_}"] == \
            further * (system.efficiency.group_kernel - Rational(3, 10**6))


def test_the_group_kernel_fit_recovers_a_cost_it_was_given():
    """``calibrate.fit_group_kernel`` on mixture-of-experts runs whose 'measured' seconds are the
    model's own at a cost chosen here (9 us) finds that cost, whatever the committed one is."""
    pytest.importorskip("scipy")
    from fractions import Fraction
    from symbolic_cost.reproduce import measured
    from symbolic_cost.timing import calibrate, efficiency
    chosen = Rational(9, 10**6)
    values = {f: {k: Rational(v) for k, v in factors.items() if k != "group_kernel"}
              for f, factors in efficiency.CALIBRATION["fitted"].items()}
    picked = [c for c in measured.grouped_cases() if "Qwen3_30B" in c.id][:3]

    def at(case):
        system = calibrated(case.system)
        factors = dict(values[efficiency.family(case.system)], group_kernel=chosen)
        seconds = calibrate.predict(case, system.but(efficiency=system.efficiency.but(**factors)))
        return replace(case, seconds=Fraction(str(float(seconds))))
    assert calibrate.fit_group_kernel([at(c) for c in picked], values) == pytest.approx(9e-6, rel=1e-3)


def test_a_captured_row_pays_no_launch_and_the_replay_one():
    system = calibrated("h100")
    no_launch = system.but(efficiency=system.efficiency.but(kernel=0))
    row = _dense_layer()["fc1"]
    for pass_ in ("fwd", "bwd"):
        assert row_seconds(replace(row, graph="captured"), system)[f"t_{pass_}"] == \
            row_seconds(row, no_launch)[f"t_{pass_}"]
        assert row_seconds(replace(row, graph="replay"), system)[f"t_{pass_}"] == \
            row_seconds(row, no_launch)[f"t_{pass_}"] + system.efficiency.kernel


@pytest.mark.parametrize("scopes, rule", [
    (("moe_preprocess",), "give 'moe_router' with it"),
    (("attn", "attn"), "twice"),
    (("full_iteration", "attn"), "no other scope"),
    (("moe", "moe_router"), "give one"),
    (("atn",), "must be one of"),
    ("attn", "tuple of scopes"),
])
def test_scopes_megatron_refuses_are_refused(scopes, rule):
    with pytest.raises(InputError, match=rule) as caught:
        check_scopes(scopes)
    assert caught.value.argument == "cuda_graphs"
    with pytest.raises(InputError, match=rule):
        Training(cuda_graphs=scopes)


def test_implementations_as_megatron_bridge_writes_them():
    assert graph_scopes("none", ["attn"]) == () and graph_scopes(None, None) == ()
    assert graph_scopes("transformer_engine", ["attn", "moe_router", "moe_preprocess"]) == \
        ("attn", "moe_router", "moe_preprocess")
    assert graph_scopes("full_iteration", []) == ("full_iteration",)
    assert set(graph_scopes("transformer_engine", [])) == {"attn", "mlp", "moe"}      # no scope: the layer
    with pytest.raises(InputError) as caught:
        graph_scopes("cudagraph", ["attn"])
    assert caught.value.argument == "cuda_graph_impl"


def test_runs_in_a_row_are_separate_graphs():
    rows = [gelu(1, 2, 3, name=n) for n in "abcde"]
    assert [r.graph for r in captured(rows, [False, True, True, False, True])] == \
        [None, "replay", "captured", None, "replay"]


def test_bridge_rows_take_the_v042_workloads_graphs():
    from symbolic_cost.reproduce import measured
    cases = {c.id: c for c in measured.cases()}

    def one(part):
        return next(c for key, c in cases.items() if part in key)
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1 (and its FP8 aliases): attn, moe_router, moe_preprocess
    assert one("Qwen3_30B_a3B-DGX-B200").training.cuda_graphs == ("attn", "moe_router", "moe_preprocess")
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 sets none: the recipe's "none"
    assert one("Qwen3_30B_a3B-DGX-H100").training.cuda_graphs == ()
    # LLAMA3_70B_PRETRAIN_CONFIG_GB200_NVFP4_V2: cuda_graph_impl="none", whatever later recipes say
    assert one("LLAMA3_70B-DGX-GB200-NVFP4").training.cuda_graphs == ()


def test_a_tensor_grid_with_graphs_is_refused_not_ignored():
    from symbolic_cost.models import model_cost
    from symbolic_cost.models.config import preset
    from symbolic_cost.models.grid_stack import on_grid
    from symbolic_cost.parallel.grid import make_grid
    grid = make_grid("2d", m1=2, m2=2)
    with pytest.raises(InputError, match="tensor grid is not modelled") as caught:
        model_cost(preset("gpt2"), on_grid(Training(b=1, l=512, cuda_graphs=("attn",)), grid))
    assert caught.value.argument == "cuda_graphs"
