"""``recompute="op"`` on DeepSeek's blocks (latent attention, a mixture of experts) against PyTorch.

A small Hugging Face ``DeepseekV3ForCausalLM`` (bf16, CPU, ``attn_implementation="sdpa"``) keeps
its latent attention, whose products run in torchtitan's order (``wq``, ``wkv_a``, ``wkv_b``,
``wo``); its mixture of experts is replaced here by one written from torchtitan's
(``models/common/moe.py`` and ``token_dispatcher.py`` without expert parallelism): the gate in fp32,
``topk`` of the sigmoid scores, the tokens sorted by expert, the experts' three
``torch._grouped_mm`` products, the weighted ``scatter_add`` back, then the shared experts' ``w1``,
``w3``, ``w2``.  Every layer runs under non-reentrant ``torch.utils.checkpoint`` with a policy
written from torchtitan's ``SelectiveAC``: a count of ``aten.mm`` that skips the products whose
weight has the gate's shape (``force_recompute_mm_shapes_by_fqns``, ``["moe.router.gate"]``); the
save list's outputs (``aten.mm``, the attention kernel, ``aten.topk``) ``MUST_SAVE`` except every
second counted ``aten.mm``; everything else ``PREFER_RECOMPUTE``.  On CPU the attention kernel is
``aten._scaled_dot_product_flash_attention_for_cpu``, saved in the CUDA kernel's place (see
``test_op_recompute``).

Measured: the bytes of every output the policy saves; the FLOPs of the products backward runs
again (``FlopCounterMode`` for ``aten.mm``; the grouped products, which it does not count, by the
``2 m k n`` of their shapes); which ops backward runs again.
"""

from collections import Counter, defaultdict
from dataclasses import replace

import pytest
from sympy import Symbol

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from symbolic_cost import conventions as conv  # noqa: E402
from symbolic_cost.checks import InputError  # noqa: E402
from symbolic_cost.models import Training, model_cost  # noqa: E402
from symbolic_cost.models.config import from_config  # noqa: E402
from symbolic_cost.models.memory import recomputed_costs  # noqa: E402
from symbolic_cost.timing.step import step_time_breakdown  # noqa: E402

MM = torch.ops.aten.mm.default
TOPK = torch.ops.aten.topk.default
GROUPED = torch.ops.aten._grouped_mm.default
CPU_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
SAVE = {MM, CPU_FLASH, TOPK}
E, DENSE_F, EXPERT_F, H, EXPERTS, TOP_K, LAYERS, DENSE, VOCAB = 64, 96, 32, 4, 8, 2, 3, 1, 100
CONFIG = {"model_type": "deepseek_v3", "hidden_size": E, "intermediate_size": DENSE_F,
          "moe_intermediate_size": EXPERT_F, "num_attention_heads": H, "num_key_value_heads": H,
          "num_hidden_layers": LAYERS, "first_k_dense_replace": DENSE, "n_routed_experts": EXPERTS,
          "num_experts_per_tok": TOP_K, "n_shared_experts": 1, "vocab_size": VOCAB, "q_lora_rank": None,
          "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 24,
          "max_position_embeddings": 64, "tie_word_embeddings": False, "n_group": 1, "topk_group": 1,
          "scoring_func": "sigmoid", "norm_topk_prob": True, "routed_scaling_factor": 1.0,
          "rope_interleave": True, "attention_bias": False}
TWO_MNK = replace(conv.DEFAULT, matmul_flops="2mnk")


class TitanMoE(nn.Module):
    """torchtitan's mixture of experts without expert parallelism, written from its algorithm."""

    def __init__(self, dim, hidden, experts, top_k, shared_hidden):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(dim, experts, bias=False)
        scale = dim ** -0.5
        self.w1 = nn.Parameter(torch.randn(experts, hidden, dim) * scale)
        self.w3 = nn.Parameter(torch.randn(experts, hidden, dim) * scale)
        self.w2 = nn.Parameter(torch.randn(experts, dim, hidden) * hidden ** -0.5)
        self.shared_w1 = nn.Linear(dim, shared_hidden, bias=False)
        self.shared_w3 = nn.Linear(dim, shared_hidden, bias=False)
        self.shared_w2 = nn.Linear(shared_hidden, dim, bias=False)

    def forward(self, x):
        shape, x = x.shape, x.reshape(-1, x.shape[-1])
        scores = torch.sigmoid(F.linear(x.float(), self.gate.weight.float()))      # the gate in fp32
        _, chosen = torch.topk(scores, k=self.top_k, dim=-1, sorted=False)
        weights = scores.gather(-1, chosen)
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        counts = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, chosen, True).sum(dim=0)
        order = torch.argsort(chosen.view(-1), stable=True)
        sorted_weights, tokens = weights.view(-1)[order], order // self.top_k
        routed = x[tokens]
        offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)
        hidden = F.silu(torch._grouped_mm(routed, self.w1.transpose(-2, -1), offs=offsets))
        hidden = hidden * torch._grouped_mm(routed, self.w3.transpose(-2, -1), offs=offsets)
        out = torch._grouped_mm(hidden, self.w2.transpose(-2, -1), offs=offsets)
        out = (out.float() * sorted_weights.reshape(-1, 1)).to(out.dtype)
        combined = torch.zeros_like(x).scatter_add(0, tokens.reshape(-1, 1).expand(-1, x.shape[-1]), out)
        shared = self.shared_w2(F.silu(self.shared_w1(x)) * self.shared_w3(x))
        return (combined + shared).reshape(shape)


class Checkpointed(nn.Module):
    """A decoder layer under torchtitan's ``SelectiveAC``; ``saved`` logs what it saves."""

    def __init__(self, layer, saved, forced):
        super().__init__()
        self.layer, self.saved, self.forced = layer, saved, forced

    def forward(self, hidden_states, *args, **kwargs):
        return checkpoint(self.layer, hidden_states, *args, use_reentrant=False, context_fn=self._context, **kwargs)

    def _context(self):
        count = defaultdict(int)

        def policy(ctx, func, *args, **kwargs):
            if func == MM:
                if tuple(args[1].shape) in self.forced:
                    return CheckpointPolicy.PREFER_RECOMPUTE
                count["mm"] += 1
            if func in SAVE and not (func == MM and count["mm"] % 2 == 0):
                outputs = ctx.op_output if isinstance(ctx.op_output, (tuple, list)) else (ctx.op_output,)
                self.saved.append((func, sum(t.numel() * t.element_size() for t in outputs
                                             if isinstance(t, torch.Tensor))))
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE
        return create_selective_checkpoint_contexts(policy)


class OpCount(TorchDispatchMode):
    """How often each op runs, and the FLOPs of the grouped products (``2 m k n`` each)."""

    def __init__(self):
        super().__init__()
        self.ops, self.grouped_flops = Counter(), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func] += 1
        out = func(*args, **(kwargs or {}))
        if func == GROUPED:
            self.grouped_flops += 2 * args[0].shape[0] * args[0].shape[1] * out.shape[-1]
        return out


def _run(b, l, policy):
    """(saved log, FlopCounterMode's FLOPs, backward's op counts and grouped FLOPs) of one step."""
    torch.manual_seed(0)
    config = transformers.DeepseekV3Config(**{k: v for k, v in CONFIG.items() if k != "model_type"})
    model = transformers.DeepseekV3ForCausalLM._from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
    for layer in model.model.layers[DENSE:]:
        layer.mlp = TitanMoE(E, EXPERT_F, EXPERTS, TOP_K, EXPERT_F).to(torch.bfloat16)
    model.train()
    saved = []
    if policy:
        model.model.layers = nn.ModuleList(Checkpointed(layer, saved, {(E, EXPERTS)}) for layer in model.model.layers)
    ids = torch.randint(0, VOCAB, (b, l))
    with FlopCounterMode(display=False) as flops:
        loss = model(ids, labels=ids, use_cache=False).loss
        with OpCount() as backward:
            loss.backward()
    return saved, flops.get_total_flops(), backward


def _library(b, l, recompute, **given):
    return model_cost(from_config(CONFIG), Training(b=b, l=l, precision="bf16", flash=True, recompute=recompute,
                                                    **given), TWO_MNK)


@pytest.mark.parametrize("b, l", [(2, 16), (1, 32)])
def test_kept_and_redone_as_pytorch_runs_torchtitans_policy_on_deepseek_blocks(b, l):
    saved, flops, backward = _run(b, l, policy=True)
    _, plain_flops, plain = _run(b, l, policy=False)
    moe = LAYERS - DENSE
    # per layer: wq, wkv_b saved, the kernel; then w1, w2 (dense) or topk, shared w1, shared w2
    assert [func for func, _ in saved] == DENSE * [MM, MM, CPU_FLASH, MM, MM] + moe * [MM, MM, CPU_FLASH, TOPK, MM, MM]
    op, full = _library(b, l, "op"), _library(b, l, "full")
    assert op.activation_bytes - full.activation_bytes == sum(nbytes for _, nbytes in saved)
    # the counted products redone (wkv_a, wo, w3) and the gate: FlopCounterMode's aten.mm
    redone = [(count, recomputed_costs(blk, "op")) for blk, count in op.stack[1:-1]]      # the layers' blocks
    products = sum(n * sum(c.flops_fwd for c in rows if c.gemms and not c.name.startswith("expert_"))
                   for n, rows in redone)
    assert products == flops - plain_flops
    # the experts' three grouped products run again, their FLOPs by their shapes
    grouped = sum(n * sum(c.flops_fwd for c in rows if c.gemms and c.name.startswith("expert_")) for n, rows in redone)
    assert grouped == backward.grouped_flops - plain.grouped_flops > 0
    again = backward.ops - plain.ops
    assert again[GROUPED] == 3 * moe and again[TOPK] == 0 and again[CPU_FLASH] == 0
    assert again[MM] == 3 * DENSE + 4 * moe                       # wkv_a, wo, w3; and the gate


def test_expert_parallelism_keeps_the_exchanges():
    """Under ``ep = 2`` the all-to-alls' outputs are kept too (torchtitan's save list names
    ``all_to_all_single``): the token counts (8 experts, int64) and the dispatched and combined
    tokens, ``b l top_k`` hidden vectors of ``E`` bf16 each, per layer with experts."""
    b, l, moe = 2, 16, LAYERS - DENSE
    one, two = _library(b, l, "op", ep=1, d=2), _library(b, l, "op", ep=2, d=2)
    assert two.activation_bytes - one.activation_bytes == moe * (EXPERTS * 8 + 2 * b * l * TOP_K * E * 2)
    # kept, the exchanges are not sent again: the all-to-alls take as long as without recomputation
    costs = {r: _library(b, l, r, ep=2, d=2) for r in ("none", "op", "full")}
    exchanges = {r: step_time_breakdown(c, "h100")["tensor_comm"] for r, c in costs.items()}
    assert exchanges["op"] == exchanges["none"] < exchanges["full"]
    assert costs["op"].collectives == costs["none"].collectives != costs["full"].collectives
    ep = Symbol("ep", positive=True, integer=True)                # a symbolic degree, substituted, is either
    symbolic = _library(b, l, "op", ep=ep, d=2).activation_bytes
    assert (symbolic.subs(ep, 1), symbolic.subs(ep, 2)) == (one.activation_bytes, two.activation_bytes)


QWEN2_MOE = {"model_type": "qwen2_moe", "hidden_size": E, "intermediate_size": DENSE_F, "moe_intermediate_size": 32,
             "shared_expert_intermediate_size": 32, "num_experts": EXPERTS, "num_experts_per_tok": TOP_K,
             "num_attention_heads": H, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": VOCAB,
             "decoder_sparse_step": 1, "mlp_only_layers": [], "max_position_embeddings": 64,
             "tie_word_embeddings": False}


def test_refused_where_the_count_is_not_defined():
    with pytest.raises(InputError, match="low-precision"):
        model_cost(from_config(CONFIG), Training(b=1, l=16, flash=True, recompute="op", fp8="tensorwise"))
    qwen2_moe = from_config(QWEN2_MOE)
    with pytest.raises(InputError, match="qkv_proj has a bias"):
        model_cost(qwen2_moe, Training(b=1, l=16, flash=True, recompute="op"))
    with pytest.raises(InputError, match="'shared_gate' is a product it does not place"):    # the shared expert's
        model_cost(replace(qwen2_moe, qkv_bias=False), Training(b=1, l=16, flash=True, recompute="op"))
