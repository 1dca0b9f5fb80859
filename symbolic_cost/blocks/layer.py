"""One transformer layer: attention then MLP."""

from __future__ import annotations

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.attention import attention
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.mlp import mlp

def transformer_layer(b, l, e, f, h, m1=1, s1=1, *, kv_heads=None, bias=True, qkv_bias=True,
                      flash=False, rotary_pos=False, causal=False, gated_act=False, dropouts=True,
                      norm="layer", es=2, es_mask=1, conventions=conv.DEFAULT) -> Block:
    """One transformer layer: the attention rows, then the MLP rows (options as there).

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> len(transformer_layer(b, l, e, 4 * e, h))
    14
    """
    common = dict(es=es, es_mask=es_mask, conventions=conventions, dropouts=dropouts, norm=norm)
    first = attention(b, l, e, h, m1, s1, kv_heads=kv_heads, qkv_bias=qkv_bias, out_bias=bias,
                      flash=flash, rotary_pos=rotary_pos, causal=causal, **common)
    second = mlp(b, l, e, f, m1, s1, bias=bias, gated_act=gated_act, **common)
    return Block("layer", first.rows + second.rows, {**first.dims, **second.dims}, first.conventions)
