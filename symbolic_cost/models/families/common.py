"""What the Llama-style readers share (``families.llama`` and ``families.moe``): the reading of
a Llama-style decoder's sizes, heads and head (``llama_style``), the attention biases most of them
take from ``attention_bias``, which layers rotate (SmolLM3, Llama 4) and Granite's scalings.

A new Llama-style family is a reader that calls ``llama_style`` with its config class's defaults
and its own ``Architecture`` fields.
"""

from __future__ import annotations

from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.families.keys import Keys, check_heads, gated_mlp, head_fields, plain_mlp, rotary_dim

LLAMA = dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
             num_attention_heads=32, head_dim=None, hidden_act="silu", max_position_embeddings=2048,
             tie_word_embeddings=False)


def llama_style(k: Keys, name: str, defaults: dict, act_key="hidden_act", **fields) -> Architecture:
    """A Llama-style decoder read from ``k`` over ``LLAMA``'s defaults updated by ``defaults``:
    sizes (the dense MLP's width from ``f_key``, ``intermediate_size`` by default), heads, head
    size, gated activation (``gated``: true by default) read from ``act_key``, tied head, rotary
    share (``rotary_share`` by default, or the first of ``rotary_keys``), the head the
    ``architectures`` names; ``fields`` are the family's own ``Architecture`` fields."""
    d = {**LLAMA, **defaults}
    e, h = k.int("hidden_size", d["hidden_size"]), k.int("num_attention_heads", d["num_attention_heads"])
    kv = k.int("num_key_value_heads", d.get("num_key_value_heads"), nullable=True) or h
    hd = k.int("head_dim", d["head_dim"], nullable=True)
    check_heads(k, e, h, kv, hd)
    k.known("rms_norm_eps", "rope_theta", "initializer_range")
    part = rotary_dim(hd or e // h, k.rotary_fraction(d.get("rotary_share", 1), *d.get("rotary_keys", ())))
    for site, value in k.dropout_fields(attention=[("attention_dropout", 0)]).items():
        fields.setdefault(site, value)
    f_key = d.get("f_key", "intermediate_size")
    return Architecture(name, k.int("num_hidden_layers", d["num_hidden_layers"]), e, h,
                        k.int(f_key, d[f_key]), k.int("vocab_size", d["vocab_size"]),
                        kv_heads=kv, head_dim=hd, mlp=(gated_mlp if d.get("gated", True) else plain_mlp)(
                            k.activation(act_key, d["hidden_act"])),
                        norm=fields.pop("norm", "rms"), rotary=d.get("rotary", True), rotary_dim=part,
                        tied=k.flag("tie_word_embeddings", d["tie_word_embeddings"]),
                        context=k.int("max_position_embeddings", d["max_position_embeddings"]),
                        **fields, **head_fields(k))


def attention_biases(k: Keys) -> dict:
    """``attention_bias``: biases on q, k, v and o (the MLP has none)."""
    attention = k.flag("attention_bias", False)
    return dict(qkv_bias=attention, bias=attention, mlp_bias=False)


GRANITE_SCALES = ("embedding_multiplier", "logits_scaling", "residual_multiplier", "attention_multiplier")
"""Granite's scalar multipliers of the embeddings, the logits, each residual branch and the
attention scores (instead of ``1/sqrt(d)``): element-wise scalings, not counted."""


def rotating_layers(k: Keys, depth: int) -> tuple[bool, ...]:
    """Which layers rotate: ``no_rope_layers`` (1 where a layer rotates, 0 where it does not;
    by default 0 on every ``no_rope_layer_interval``-th layer), as SmolLM3 and Llama 4 read it."""
    interval = k.int("no_rope_layer_interval", 4)
    listed = k.raw("no_rope_layers", None, True)
    if not listed:                                   # the config classes take an empty list as none
        listed = [int((i + 1) % interval != 0) for i in range(depth)]
    if not (isinstance(listed, list) and len(listed) == depth and all(type(x) is int and x in (0, 1) for x in listed)):
        raise k.error(f"no_rope_layers must list {depth} values of 0 or 1, got {listed!r}")
    return tuple(x == 1 for x in listed)
