"""One transformer layer: attention then MLP (sequential), or both on one input (parallel)."""

from __future__ import annotations

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.attention import attention
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.latent_attention import latent_attention
from symbolic_cost.blocks.layout import Layout
from symbolic_cost.blocks.mlp import mlp
from symbolic_cost.blocks.moe import moe as moe_block
from symbolic_cost.ops import add
from symbolic_cost.checks import InputError

NORMS_PER_LAYER = {False: (2, 4), True: (1, 2)}
"""Norms a layer may have: sequential 2 (pre- or post-norm) or 4 (Gemma 2 and 3's sandwich);
parallel 1 (GPT-J, Falcon-7B, Phi) or 2 (GPT-NeoX, Falcon-40B)."""
PARTS = ("layer", "attention", "mlp")
"""What ``transformer_layer`` builds: the whole layer or one of its blocks."""


def transformer_layer(b, l, e, f, h, m1=1, s1=1, *, kv_heads=None, bias=True, qkv_bias=True, mlp_bias=None,
                      flash=False, rotary_pos=False, causal=False, gated_act=False, dropouts=True,
                      activation_dropout=None, norm="layer", norms=2, parallel=False, cross=False, es=2,
                      es_mask=1, conventions=conv.DEFAULT, cross_keys=None, latent=None, moe=None, experts=None,
                      part="layer", **attention_options) -> Block:
    """One transformer layer.

    Sequential (default): the attention rows, then (with ``cross``, T5's decoder) the
    cross-attention rows ``cross_*`` (over ``cross_keys`` encoder tokens, default ``l``), then
    the MLP rows; ``norms=4`` adds a norm after each of the two (Gemma 2 and 3).
    ``parallel``: ``y = x + attention(n1(x)) + mlp(n2(x))`` (GPT-J, GPT-NeoX, Falcon, Phi):
    with ``norms=1`` both branches read the one norm's output (``n2 = n1``: one allgather in,
    one reduction of the input gradient); the two partial outputs are summed (``branch_sum``)
    and reduced once, then the residual add.
    With dropouts each branch keeps its own closing dropout (so its own reduction).

    ``bias`` biases the attention output projection and, unless ``mlp_bias`` says
    otherwise, the MLP; ``qkv_bias`` the Q, K, V projection.  ``dropouts`` are the closing
    (residual) dropouts and, unless ``score_dropout`` or ``activation_dropout`` say otherwise,
    those of the attention probabilities and after the activation.  Other keywords
    (``head_dim``, ``v_head_dim``, ``rotary_dim``, ``qk_norm``, ``window``, ``score_bias``,
    ``softcap``, ``clip_qkv``, ``score_dropout``) go to ``attention``; the rest as in
    ``attention`` and ``mlp``.  ``latent`` (a ``latent_attention.Latent``) makes the attention
    multi-head latent attention; ``moe`` (a ``moe.MoE``) replaces the MLP by a mixture of
    experts, with ``experts`` the keywords of ``moe.moe`` (``ep``, ``etp``, ``capacity_factor``,
    ``imbalance``); neither in a parallel layer.  ``part``: the whole ``"layer"``, or only its
    ``"attention"`` (self-attention) or its ``"mlp"`` (the MLP or mixture of experts) block.

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> transformer_layer(b, l, e, 4 * e, h).names[:4]
    ['layer_norm_1', 'qkv_proj', 'logits', 'softmax']
    >>> transformer_layer(b, l, e, 4 * e, h, parallel=True, norms=1, dropouts=False).names[-3:]
    ['fc2', 'branch_sum', 'residual']
    """
    if part not in PARTS:
        raise InputError(f"part must be one of {', '.join(PARTS)}, got {part!r}", "part")
    if norms not in NORMS_PER_LAYER[bool(parallel)]:
        raise InputError(f"norms must be one of {NORMS_PER_LAYER[bool(parallel)]} for a "
                         f"{'parallel' if parallel else 'sequential'} layer, got {norms!r}")
    if parallel and (latent is not None or moe is not None):
        raise InputError("a parallel layer has neither latent attention nor a mixture of experts")
    common = dict(es=es, es_mask=es_mask, conventions=conventions, dropouts=dropouts, norm=norm)
    joined = parallel and not dropouts            # branches summed before one reduction
    blocks = []
    if part != "mlp":
        blocks.append(_attention(b, l, e, h, m1, s1, kv_heads, qkv_bias, bias, flash, rotary_pos, causal,
                                 norms, joined, latent, attention_options, common))
    if part == "attention":
        return blocks[0]
    if cross:
        blocks.append(attention(b, l, e, h, m1, s1, kv_heads=kv_heads, qkv_bias=qkv_bias, out_bias=bias,
                                flash=flash, cross=True, keys=cross_keys,
                                **{k: v for k, v in attention_options.items()
                                   if k in ("head_dim", "v_head_dim", "score_dropout")},
                                **common))
    if moe is not None:
        blocks.append(moe_block(b, l, e, moe, m1, s1, gated_act=gated_act, bias=bool(mlp_bias), **(experts or {}),
                                **common))
    else:
        blocks.append(mlp(b, l, e, f, m1, s1, bias=bias if mlp_bias is None else mlp_bias, gated_act=gated_act,
                          activation_dropout=activation_dropout, post_norm=norms == 4,
                          shared_input=parallel and norms == 1, branch=joined, **common))
    if part == "mlp":
        return blocks[-1]
    rows = tuple(row for blk in blocks for row in blk.rows)
    dims = {k: v for blk in blocks for k, v in blk.dims.items()}
    if joined:
        at = Layout.of(dict(dims), es, es_mask, conventions)
        rows += (at.leaving(add(at.b, at.l, at.e, name="branch_sum", es=at.es)),
                 at.closing_dropout("residual", False))
    return Block("layer", rows, dims, blocks[0].conventions)


def _attention(b, l, e, h, m1, s1, kv_heads, qkv_bias, bias, flash, rotary_pos, causal, norms, joined, latent,
               options, common) -> Block:
    """The layer's self-attention: multi-head latent attention with ``latent``, else ``attention``."""
    if latent is not None:
        if options.get("context") is not None:
            raise InputError("context parallelism with multi-head latent attention is not modelled", "latent")
        return latent_attention(b, l, e, h, latent, m1, s1, bias=bias, flash=flash, causal=causal,
                                post_norm=norms == 4, score_dropout=options.get("score_dropout"),
                                keys=options.get("keys"), **common)
    return attention(b, l, e, h, m1, s1, kv_heads=kv_heads, qkv_bias=qkv_bias, out_bias=bias, flash=flash,
                     rotary_pos=rotary_pos, causal=causal, post_norm=norms == 4, branch=joined, **options, **common)
