"""The passes Megatron-Core's ``TEGroupedMLP`` runs around a routed expert's products outside its
kernels (Megatron-LM 2edffadb5, the one of Megatron-Bridge v0.4.2): the clamps of GPT-OSS's gated
unit (``fused_bias_geglu.weighted_bias_quick_geglu_impl``) and the second product's bias
(``experts.TEGroupedMLP._apply_bias``).  Expected bytes are counted kernel by kernel from that
code, each tensor a kernel reads or writes listed, not from the library's formula."""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.blocks.moe import MoE, moe
from symbolic_cost.blocks.wiring import Experts
from symbolic_cost.models.config import from_config

ES = 2                         # bf16
T, K, E, F = 4, 2, 5, 6        # tokens a rank routes, experts a token, hidden, expert width
ROWS = T * K                   # one rank holds every expert: it receives every routed copy
SPEC = MoE(8, K, F, router="topk_softmax", router_bias=True, expert_bias=True, clamp=True)


def _bytes(kernels) -> int:
    """Bytes of ``kernels``: ``(elements read, elements written)`` each, at ``ES`` an element."""
    return sum(read + written for read, written in kernels) * ES


def _rows(spec=SPEC, **experts):
    return {r.name: r for r in moe(1, T, E, spec, experts=Experts(**experts)).rows}


def test_clamps_counted_kernel_by_kernel():
    half = ROWS * F                                  # G or U: (rows, F), halves of fc1's (rows, 2F)
    forward = [(half, half),                         # x_glu.clamp(max=v)
               (half, half),                         # x_linear.clamp(-v, v)
               (2 * half, 2 * half)]                 # torch.cat((G', U'), -1)
    backward = [(2 * half, half),                    # clamp_backward of G: dY's half and G read, dG written
                (2 * half, half),                    # the same for U
                (2 * half, 2 * half)]                # chunk's backward: dG, dU joined into fc1's dY
    clamp = _rows()["expert_clamp"]
    assert clamp.mem_fwd == _bytes(forward) == 8 * ROWS * F * ES
    assert clamp.mem_bwd == _bytes(backward) == 10 * ROWS * F * ES
    assert clamp.act_buffer == 2 * half * ES         # fc1's output, which clamp_backward reads
    assert clamp.flops_fwd == clamp.flops_bwd == 0 and clamp.weights == 0
    assert clamp.recompute == "activation"           # inside moe_act's checkpoint, as bias_act_func is


def test_bias_counted_kernel_by_kernel():
    out = ROWS * E                                   # fc2's output, (rows, E), summed over the local experts
    forward = [(0, out),                             # b_i * p_i (the bias and the probabilities: not counted)
               (2 * out, out),                       # t_i + b_i p_i
               (out, out)]                           # torch.cat of the pieces
    backward = [(out, out), (out, 0),                # dY p_i, then its sum over the rows (the bias's gradient)
                (out, out), (out, 0),                # dY b_i, then its sum over the width (the probabilities')
                (out, out)]                          # split's backward: the pieces' gradients joined
    bias = _rows()["expert_bias"]
    assert bias.mem_fwd == _bytes(forward)
    assert bias.mem_bwd == _bytes(backward) + ROWS * ES      # and the kept probabilities, read
    assert bias.weights == 0 and bias.flops_fwd == 0          # the bias and its add stay expert_fc2's
    assert _rows()["expert_fc2"].weights == 8 * (F * E + E) * ES


def test_order_and_what_has_none():
    names = list(_rows())
    assert names[names.index("expert_fc1"):names.index("expert_bias") + 1] == [
        "expert_fc1", "expert_clamp", "expert_act", "expert_fc2", "expert_bias"]
    fused = _rows(kernels="fused")                   # a serving engine's fused MoE does both inside
    assert "expert_clamp" not in fused and "expert_bias" not in fused
    plain = _rows(replace(SPEC, clamp=False, expert_bias=False))
    assert "expert_clamp" not in plain and "expert_bias" not in plain


def test_gpt_oss_reads_its_clamp():
    config = dict(model_type="gpt_oss", num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                  intermediate_size=32, vocab_size=100, sliding_window=8)
    assert from_config(config).moe.clamp
    assert from_config({**config, "swiglu_limit": 7.0}).moe.clamp
    assert not from_config({**config, "swiglu_limit": None}).moe.clamp
