"""Decoding multi-head latent attention: over its compressed cache in the absorbed form, or
up-projecting the cached latents again at every step, or over decompressed keys and values.

``kv_cache.MLA_FORMS``: ``"decompressed"`` decodes as any attention over cached keys and values
(the layer's own rows at one token); ``"recompute"`` (transformers 5.23) caches the latent and
runs ``kv_b_proj`` over every cached token at each step, reading the cache through it.
The absorbed form (``"absorbed"``):

DeepSeek-V2 (§2.1.2) folds the key up-projection ``W_uk`` into the query and the value
up-projection ``W_uv`` into the output, so that each head attends to the cached latent itself
(DeepSeek's inference, vLLM, SGLang, FlashMLA).  One token per sequence, ``H = h/m1`` heads on
a device, latent rank ``r_kv``, rotary dims ``d_r``, no-rotary dims ``d_n``, value dims ``d_v``:

============== ================================================ ==============================
row            product                                          replaces
============== ================================================ ==============================
``q_absorb``   ``b H`` products ``(1, d_n) x (d_n, r_kv)``,      ``kv_b_proj``'s key half
               one matrix a head
core           multi-query attention over the latent: queries    the core over ``H`` key and
               ``(b, H, 1, r_kv + d_r)``, one key head            value heads
               ``(b, 1, keys, r_kv + d_r)``, values its first
               ``r_kv`` dims (read once, with the keys)
``o_absorb``   ``b H`` products ``(1, r_kv) x (r_kv, d_v)``      ``kv_b_proj``'s value half
============== ================================================ ==============================

The two absorbed products hold ``kv_b_proj``'s weights between them, ``r_kv H (d_n + d_v)``.
Everything else (the query path, ``kv_a_proj`` and its norm on the new token, the rotary
positions, the output projection) is the layer's own rows at one token.
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.blocks import Block
from symbolic_cost.cost import exact
from symbolic_cost.ops import Keys, attention_core, flash_attention, linear
from symbolic_cost.ops.routing import grouped_linear

CORE = ("logits", "score_softcap", "position_bias", "softmax", "dropout_softmax", "attend", "flash_attention")


def absorbed(layer: Block, latent, keys, *, flash=False, es=2, conventions=None, tokens=1) -> Block:
    """A decode layer of ``transformer_layer`` (latent attention at ``tokens`` new tokens a sequence,
    one for a decode step, ``k + 1`` for a speculative verification, over ``keys`` keys) rewritten in
    the absorbed form of the module docstring: ``b H tokens`` rows through each absorbed product,
    ``tokens`` queries a head over the latent.

    >>> from symbolic_cost.blocks.specs import Latent
    >>> from symbolic_cost.inference.phases import decode
    >>> from symbolic_cost.inference.serving import Serving
    >>> from symbolic_cost.models.architecture import Architecture
    >>> mla = Architecture("mla", 2, 256, 4, 512, 1000, latent=Latent(64, 16, 32, 32), norm="rms", rotary=True,
    ...                    mlp="swiglu", bias=False, qkv_bias=False)
    >>> three = decode(mla, Serving(b=2, l_in=8, l_out=2, flash=True), l_ctx=8, tokens=3)
    >>> three.layer["q_absorb"].flops_fwd    # 2 x 4 heads x 3 tokens = 24 rows of (1, 32) x (32, 64): 24 x 64 x 63
    96768
    """
    names = layer.names
    first = min(names.index(n) for n in CORE if n in names)
    last = max(names.index(n) for n in CORE if n in names)
    b, heads = layer.dims["b"], layer.dims["h"] / layer.dims["m1"]
    rank, rope = exact(latent.kv_rank, "kv_rank"), exact(latent.rope_dim, "rope_dim")
    nope, v_dim = exact(latent.nope_dim, "nope_dim"), exact(latent.v_dim, "v_dim")
    kw = dict(es=es, conventions=conventions or layer.conventions)
    shape = Keys(l_kv=keys, kv_heads=1, v_dim=rank)
    core = [flash_attention(b, tokens, rank + rope, heads, shape, **kw)] if flash else \
        attention_core(b, tokens, rank + rope, heads, shape, dropouts=False, **kw)
    once = b * keys * rank * es                 # the values are the keys' latent part: read with them
    core[-1] = core[-1].plus(act_in_other=-once, mem_fwd=-once)
    rows = ([r for r in layer.rows[:first] if r.name != "kv_b_proj"]
            + [grouped_linear(b * heads * tokens, nope, rank, heads, name="q_absorb", **kw), *core,
               grouped_linear(b * heads * tokens, rank, v_dim, heads, name="o_absorb", **kw)]
            + list(layer.rows[last + 1:]))
    return replace(layer, rows=tuple(rows))


def recompute(layer: Block, latent, keys, *, es=2, conventions=None) -> Block:
    """A decode layer whose ``kv_b_proj`` up-projects all ``keys`` cached latents again
    (``(b keys, r_kv) x (r_kv, H (d_n + d_v))``), as transformers' DeepSeek models do; the cache
    read is that product's input (the rotary keys, ``d_r`` a token, go with the keys it makes)."""
    b, heads = layer.dims["b"], layer.dims["h"] / layer.dims["m1"]
    width = heads * (exact(latent.nope_dim, "nope_dim") + exact(latent.v_dim, "v_dim"))
    again = linear(b, keys, exact(latent.kv_rank, "kv_rank"), width, bias=False, name="kv_b_proj", es=es,
                   conventions=conventions or layer.conventions)
    return replace(layer, rows=tuple(again if r.name == "kv_b_proj" else r for r in layer.rows))


def decode_layers(groups, latent, form: str, keys, *, flash=False, es=2, conventions=None, tokens=1):
    """The decode layer groups ``(block, count)`` of a latent-attention model in ``form`` (``tokens``
    new tokens a sequence over ``keys`` keys), and the rows that read the cache with the field that
    holds the bytes they read from it."""
    if form == "absorbed":
        return [(absorbed(blk, latent, keys, flash=flash, es=es, conventions=conventions, tokens=tokens), n)
                for blk, n in groups], None
    if form == "recompute":
        return [(recompute(blk, latent, keys, es=es, conventions=conventions), n) for blk, n in groups], \
            {"kv_b_proj": "act_in"}
    return list(groups), None

