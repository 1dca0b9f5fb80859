"""Primitive operations: each returns the ``Cost`` of one operation on one device."""

from symbolic_cost.ops.embedding import cross_entropy, embedding
from symbolic_cost.ops.matmul import attend, linear, logits, matmul_flops
from symbolic_cost.ops.norm import layer_norm, rms_norm
from symbolic_cost.ops.pointwise import add, dropout, gated, gelu, rotary, softmax
from symbolic_cost.ops.attention import Keys, attention_core, flash_attention

__all__ = ["linear", "logits", "attend", "flash_attention", "attention_core", "Keys", "matmul_flops", "softmax",
           "dropout", "gelu", "gated", "rotary", "add", "layer_norm", "rms_norm", "embedding", "cross_entropy"]
