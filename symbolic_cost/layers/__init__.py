"""Primitive operations: each returns the ``Cost`` of one operation on one device."""

from .embedding import cross_entropy, embedding
from .matmul import attend, flash_attention, linear, logits, matmul_flops
from .norm import layer_norm, rms_norm
from .pointwise import add, dropout, gated, gelu, rotary, softmax

__all__ = ["linear", "logits", "attend", "flash_attention", "matmul_flops", "softmax", "dropout",
           "gelu", "gated", "rotary", "add", "layer_norm", "rms_norm", "embedding", "cross_entropy"]
