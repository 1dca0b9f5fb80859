"""The self-attention block: every attention variant's projections around one core."""

from __future__ import annotations

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.layout import Layout
from symbolic_cost.ops import attention_core, flash_attention, linear, rotary

def attention(b, l, e, h, m1=1, s1=1, *, kv_heads=None, qkv_bias=True, out_bias=True, flash=False,
              rotary_pos=False, causal=False, dropouts=True, norm="layer", es=2, es_mask=1,
              conventions=conv.DEFAULT) -> Block:
    """Multi-head self-attention on one device, heads split over ``m1`` devices.

    Rows: ``layer_norm_1`` -> ``qkv_proj (e -> 3e/m1)`` -> ``logits`` ->
    ``softmax`` -> ``dropout_softmax`` -> ``attend`` -> ``v_proj (e/m1 -> e)``
    -> ``dropout`` (and ``layer_norm_2`` when ``norm_placement="attention"``).
    Head dimension ``q = e/h``; each device holds ``h/m1`` heads.  With
    ``flash=True`` one ``flash_attention`` row replaces ``logits`` to ``attend``.
    ``kv_heads`` (grouped-query attention; 1 is multi-query) shrinks K and V;
    ``rotary_pos`` adds a ``rotary`` row on Q and K; ``causal`` matters for the
    FLOPs under ``causal_flops="exact"``; ``dropouts=False`` and ``norm="rms"``
    as in ``mlp``.

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> attention(b, l, e, h).total("flops_fwd").expand().coeff(l**2)
    4*b*e + 3*b*h
    """
    dims = dict(b=b, l=l, e=e, h=h, m1=m1, s1=s1, **({} if kv_heads is None else {"kv_heads": kv_heads}))
    at = Layout.of(dims, es, es_mask, conventions)
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    q, heads = e / dims["h"], dims["h"] / m1
    kv = dims.get("kv_heads", dims["h"]) / m1
    grouped = dict(kv_heads=kv, causal=causal, **at.kw)
    core = ([flash_attention(b, l, q, heads, **grouped)] if flash else
            attention_core(b, l, q, heads, dropouts=dropouts, es_mask=at.es_mask, **grouped))
    rows = [
        at.norm(f"{norm}_norm_1", norm),
        at.entering(linear(b, l, e, (heads + 2 * kv) * q, name="qkv_proj", **at.kw,
                           bias=(e / m1 if qkv_bias and at.conventions.qkv_bias_elements == "e" else qkv_bias))),
        *([rotary(b, l, heads + kv, q, es=at.es)] if rotary_pos else []),
        *core,
        at.leaving(linear(b, l, e / m1, e, bias=out_bias, name="v_proj", **at.kw)),
        at.closing_dropout("dropout", dropouts),
    ]
    if at.conventions.norm_placement == "attention":
        rows.append(at.norm(f"{norm}_norm_2", norm))
    return Block("attention", tuple(rows), dims, at.conventions)
