"""Activation memory a layer keeps for backward, and the work recomputation redoes.

``recompute="full"`` keeps only each layer's input and redoes its forward;
``"selective"`` (Korthikanti et al. 2022) drops the attention core
(``CORE_ROWS``), keeps Q, K, V instead and redoes the core in backward.
"""

from __future__ import annotations

from sympy import Expr, Integer

from symbolic_cost.blocks import Block

CORE_ROWS = ("logits", "softmax", "dropout_softmax", "attend")
"""Rows selective recomputation drops (Korthikanti et al. 2022) and redoes in backward."""


def recomputed_rows(layer: Block, recompute: str) -> list[str]:
    """Names of the rows whose forward runs again in backward."""
    if recompute == "full":
        return layer.names
    if recompute == "selective":
        return [r for r in CORE_ROWS if r in layer.names]
    return []


def kept_bytes(layer: Block, recompute: str, tokens_bytes) -> Expr:
    """Activation bytes one layer keeps for backward under a recomputation policy."""
    if recompute == "full":
        return tokens_bytes                                    # only the layer's input
    kept = layer.total("act_buffer")
    if recompute == "selective" and any(r.name in CORE_ROWS for r in layer):
        core = sum(layer[r].act_buffer for r in CORE_ROWS if r in layer.names)
        kept = kept - core + layer["qkv_proj"].act_out         # keep Q, K, V to redo the core
    return kept


def recompute_flops(layer: Block, recompute: str) -> Expr:
    """FLOPs one layer redoes in backward."""
    return sum((layer[r].flops_fwd for r in recomputed_rows(layer, recompute)), Integer(0))
