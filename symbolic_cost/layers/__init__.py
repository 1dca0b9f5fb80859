"""Primitive operations: each returns the ``Cost`` of one operation on one device."""

from .matmul import attend, flash_attention, linear, logits, matmul_flops
from .norm import layer_norm
from .pointwise import dropout, gelu, softmax

__all__ = ["linear", "logits", "attend", "flash_attention", "matmul_flops", "softmax", "dropout", "gelu", "layer_norm"]
