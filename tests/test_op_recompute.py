"""``recompute="op"`` (torchtitan's op-level selective checkpointing) against PyTorch itself.

A small Hugging Face ``LlamaForCausalLM`` (fp32 and bf16, CPU, ``attn_implementation="sdpa"``) has every
decoder layer wrapped in non-reentrant ``torch.utils.checkpoint`` with
``create_selective_checkpoint_contexts``, under a policy written here from torchtitan's rule
(``apply_ac`` in torchtitan's ``activation_checkpoint.py``): a per-block count of ``aten.mm``
calls; the outputs of the save list's ops are ``MUST_SAVE`` except every second ``aten.mm`` (an
even count); everything else ``PREFER_RECOMPUTE``.

The save list is torchtitan's ``aten.mm`` and its attention kernels.  On CPU, causal and
without a mask, PyTorch's SDPA dispatches to ``aten._scaled_dot_product_flash_attention_for_cpu``
(checked below), which torchtitan's list does not name: it is the CPU counterpart of the CUDA
``aten._scaled_dot_product_flash_attention`` the list saves on GPU, with the same two outputs that
matter, ``O (b, h, l, q)`` and the fp32 log-sum-exp ``(b, h, l)``, so the test saves it in its
place.  (On GPU the flash kernel also returns a few scalar tensors, its RNG seed and offset,
which the library leaves out.)  In bf16 the log-sum-exp stays fp32, as the library counts it
(``ops.attention.LSE_BYTES``).

Measured inside the policy: the bytes of every output it marks ``MUST_SAVE`` (``ctx.op_output``);
the checkpoint's input is the layer input both sides count alike.  The redone work: PyTorch's
``FlopCounterMode`` over forward and backward, with the policy and without checkpointing (it counts
the products, ``2 m n k`` each), and the ops backward runs again (a dispatch mode's count).
"""

from collections import Counter, defaultdict
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch import nn  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from symbolic_cost import conventions as conv  # noqa: E402
from symbolic_cost.checks import InputError  # noqa: E402
from symbolic_cost.models import Training, model_cost  # noqa: E402
from symbolic_cost.models.config import from_config  # noqa: E402
from symbolic_cost.models.lora import LoRA  # noqa: E402
from symbolic_cost.models.memory import recomputed_costs  # noqa: E402

MM = torch.ops.aten.mm.default
CPU_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
SAVE = {MM, CPU_FLASH}
E, F, H, KV, LAYERS, VOCAB = 64, 96, 4, 2, 2, 100
CONFIG = {"model_type": "llama", "hidden_size": E, "intermediate_size": F, "num_attention_heads": H,
          "num_key_value_heads": KV, "num_hidden_layers": LAYERS, "vocab_size": VOCAB, "max_position_embeddings": 64,
          "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "hidden_act": "silu"}
TWO_MNK = replace(conv.DEFAULT, matmul_flops="2mnk")       # FlopCounterMode counts 2 m n k a product


class Checkpointed(nn.Module):
    """A decoder layer under torchtitan's op-level policy; ``saved`` logs what it saves."""

    def __init__(self, layer, saved):
        super().__init__()
        self.layer, self.saved = layer, saved

    def forward(self, hidden_states, *args, **kwargs):
        return checkpoint(self.layer, hidden_states, *args, use_reentrant=False, context_fn=self._context, **kwargs)

    def _context(self):
        count = defaultdict(int)          # a fresh count for each block's forward, as torchtitan's meta

        def policy(ctx, func, *args, **kwargs):
            if func == MM:
                count["mm"] += 1
            save = func in SAVE and not (func == MM and count["mm"] % 2 == 0)
            if save:
                outputs = ctx.op_output if isinstance(ctx.op_output, (tuple, list)) else (ctx.op_output,)
                self.saved.append((func, sum(t.numel() * t.element_size() for t in outputs
                                             if isinstance(t, torch.Tensor))))
            return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE
        return create_selective_checkpoint_contexts(policy)


class OpCount(TorchDispatchMode):
    """How often each aten op runs inside the block."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func] += 1
        return func(*args, **(kwargs or {}))


def _run(b, l, policy, dtype=torch.float32):
    """(saved log, forward+backward FLOPs, ops backward ran) of one step of the small model."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**{k: v for k, v in CONFIG.items() if k != "model_type"})
    model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa", dtype=dtype)
    model.train()
    saved = []
    if policy:
        model.model.layers = nn.ModuleList(Checkpointed(layer, saved) for layer in model.model.layers)
    ids = torch.randint(0, VOCAB, (b, l))
    with FlopCounterMode(display=False) as flops:
        loss = model(ids, labels=ids, use_cache=False).loss
        with OpCount() as backward:
            loss.backward()
    return saved, flops.get_total_flops(), backward.ops


def _library(b, l, recompute, precision="fp32"):
    return model_cost(from_config(CONFIG), Training(b=b, l=l, precision=precision, flash=True, recompute=recompute),
                      TWO_MNK)


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@pytest.mark.parametrize("b, l, precision", [(2, 16, "fp32"), (1, 24, "fp32"), (2, 16, "bf16")])
def test_kept_and_redone_as_pytorch_runs_torchtitans_policy(b, l, precision):
    saved, flops, backward = _run(b, l, policy=True, dtype=DTYPES[precision])
    _, plain_flops, plain_backward = _run(b, l, policy=False, dtype=DTYPES[precision])
    # what was saved: per layer the 1st, 3rd, 5th and 7th products and the CPU flash kernel
    assert [func for func, _ in saved] == LAYERS * [MM, MM, CPU_FLASH, MM, MM]
    op, full = _library(b, l, "op", precision), _library(b, l, "full", precision)
    # full recomputation keeps each layer's input only; op keeps that and the saved outputs
    assert op.activation_bytes - full.activation_bytes == sum(nbytes for _, nbytes in saved)
    # the products redone (wk, wo, w3 of each layer) are the FLOPs checkpointing adds
    products = sum((c.flops_fwd for c in recomputed_costs(op.layer, "op") if c.gemms), 0)
    assert LAYERS * products == flops - plain_flops
    assert op.flops_recompute > LAYERS * products                  # and the element-wise rows besides
    # backward reruns per layer three products, the two norms (rsqrt) and the activation, never the kernel
    again = backward - plain_backward
    assert (again[MM], again[torch.ops.aten.rsqrt.default], again[torch.ops.aten.silu.default]) == \
        (3 * LAYERS, 2 * LAYERS, LAYERS)
    assert again[CPU_FLASH] == 0 and backward[CPU_FLASH] == 0
    redone = [c.name for c in recomputed_costs(op.layer, "op")]
    assert sorted(redone) == sorted(["rms_norm_1", "rotary", "residual", "rms_norm_2", "act", "residual",
                                     "wk", "wo", "w3"])


def test_refused_where_the_count_is_not_defined():
    arch = from_config(CONFIG)
    with pytest.raises(InputError, match="flash=True"):
        model_cost(arch, Training(b=1, l=16, recompute="op"))
    for given in (dict(m1=2, s1=2), dict(lora=LoRA(4, ("q",)))):
        with pytest.raises(InputError, match="recompute='op'"):
            Training(b=1, l=16, flash=True, recompute="op", **given)
    biased = from_config({**CONFIG, "attention_bias": True})
    with pytest.raises(InputError, match="bias"):
        model_cost(biased, Training(b=1, l=16, flash=True, recompute="op"))


SCALED_MM = torch.ops.aten._scaled_mm.default


class _Float8Product(torch.autograd.Function):
    """``x W^T`` as torchtitan's float8 training runs it: both operands cast to e4m3 with one scale
    each (tensorwise), multiplied by ``aten._scaled_mm`` into bf16; backward in bf16 from the saved
    high-precision operands (what backward computes does not change what the policy saves)."""

    @staticmethod
    def forward(ctx, x, w):
        sx, sw = x.abs().max().float() / 448, w.abs().max().float() / 448
        xf, wf = (x / sx).to(torch.float8_e4m3fn), (w / sw).to(torch.float8_e4m3fn)
        ctx.save_for_backward(x, w)
        return torch._scaled_mm(xf, wf.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w, grad.t() @ x


class Float8Linear(nn.Module):
    def __init__(self, linear):
        super().__init__()
        self.weight = linear.weight

    def forward(self, x):
        return _Float8Product.apply(x.reshape(-1, x.shape[-1]), self.weight).reshape(*x.shape[:-1], -1)


def test_under_float8_every_product_is_saved_and_none_counted():
    """torchtitan's save list holds ``aten._scaled_mm``, and its count is of ``aten.mm`` alone: with
    every product of a block in float8 (``Float8Linear``), all seven outputs are saved, and no product
    runs again in backward; the library's ``recompute="op"`` under ``fp8`` keeps the same bytes."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**{k: v for k, v in CONFIG.items() if k != "model_type"})
    model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
    model.train()
    for layer in model.model.layers:
        for block, names in ((layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
                             (layer.mlp, ("gate_proj", "up_proj", "down_proj"))):
            for name in names:
                setattr(block, name, Float8Linear(getattr(block, name)))
    saved = []
    model.model.layers = nn.ModuleList(Checkpointed(layer, saved) for layer in model.model.layers)
    SAVE.add(SCALED_MM)
    try:
        ids = torch.randint(0, VOCAB, (2, 16))
        with OpCount() as forward:
            loss = model(ids, labels=ids, use_cache=False).loss
        with OpCount() as backward:
            loss.backward()
    finally:
        SAVE.discard(SCALED_MM)
    assert [func for func, _ in saved] == LAYERS * ([SCALED_MM] * 3 + [CPU_FLASH] + [SCALED_MM] * 4)
    assert backward.ops[SCALED_MM] == 0 and forward.ops[SCALED_MM] == 7 * LAYERS

    def kept(recompute):
        return model_cost(from_config(CONFIG), Training(b=2, l=16, precision="bf16", flash=True, fp8="tensorwise",
                                                         recompute=recompute)).activation_bytes
    assert kept("op") - kept("full") == sum(nbytes for _, nbytes in saved)
