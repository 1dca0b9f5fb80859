"""The attention block (self- or cross-attention): every attention variant's projections around one core."""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError, positive_dims
from symbolic_cost.extrema import minimum
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.context import check_attention, context_core
from symbolic_cost.blocks.layout import NORMS, Layout
from symbolic_cost.ops import attention_core, flash_attention, gelu, linear, rotary
from symbolic_cost.ops.attention import reads_flash_output
from symbolic_cost.ops.matmul import Chunk, stored_keys
from symbolic_cost.ops.scores import attention_sinks, score_bias as bias_row, softcap as softcap_row

SCORE_BIASES = (None, "alibi", "relative")
QK_NORMS = (None, "head", "projection", "l2", "head_each")


def attention(b, l, e, h, m1=1, s1=1, *, kv_heads=None, head_dim=None, v_head_dim=None, qkv_bias=True,
              out_bias=True, flash=False, rotary_pos=False, rotary_dim=None, qk_norm=None, window=None,
              score_bias=None, softcap=False, sinks=False, clip_qkv=False, causal=False, cross=False,
              dropouts=True, score_dropout=None, norm="layer", keys=None,
              post_norm=False, branch=False, es=2, es_mask=1, conventions=conv.DEFAULT, context=None) -> Block:
    """Multi-head attention on one device, heads split over ``m1`` devices.

    Rows: ``layer_norm_1`` -> ``qkv_proj (e -> (h + 2 kv) q / m1)`` -> ``logits`` ->
    ``softmax`` -> ``dropout_softmax`` -> ``attend`` -> ``v_proj ((h/m1) q -> e)``
    -> ``dropout`` (and ``layer_norm_2`` when ``norm_placement="attention"``).
    Each device holds ``h/m1`` query heads and ``kv/m1`` key/value heads.

    * ``head_dim`` (default ``e/h``) is the query/key head size ``q``, ``v_head_dim``
      (default ``q``) the value head size; ``kv_heads`` (grouped-query attention; 1 is
      multi-query) shrinks K and V.
    * ``qkv_bias`` biases the fused Q, K, V projection, ``out_bias`` the output projection;
      ``clip_qkv`` clamps its output element-wise (OLMo; ``qkv_clip``, one FLOP an element).
    * ``flash=True``: one ``flash_attention`` row replaces ``logits`` to ``attend``; it keeps
      ``O``, the input of ``v_proj``, which then keeps nothing (``ops.attention.reads_flash_output``).
    * ``rotary_pos`` adds a ``rotary`` row on Q and K over ``rotary_dim`` of each head's
      ``q`` dims (partial rotary; default all); ``qk_norm="head"`` normalises each query and
      key head over its ``q`` dims (``q_norm``, ``k_norm``: Qwen3, Gemma 3, Phi; ``"l2"``
      without weights: Llama 4; ``"head_each"`` with weights for every head: Cohere),
      ``"projection"`` the whole Q and K projections (OLMo 2; the row statistics are then
      allreduced over ``m1``), with the block's ``norm`` kind.
    * ``window``: sliding-window attention of ``window`` keys (``ops.matmul.stored_keys``), or
      a ``ops.matmul.Chunk``: attention within aligned chunks (Llama 4).
    * ``score_bias``: ``"alibi"`` adds a fixed bias to the scores, ``"relative"`` a learned
      one (T5; its table belongs to the model, ``ends.relative_bias``); ``softcap`` caps the
      scores with ``tanh`` (Gemma 2); ``sinks`` gives each head a learned sink logit
      (``attention_sinks``: GPT-OSS).
    * ``cross``: cross-attention (T5's decoder): ``q_proj`` on this stream, ``kv_proj`` on
      the encoder output of ``l`` tokens (allgathered like a norm output); rows ``cross_*``.
    * ``post_norm`` adds a norm of the output on the sequence shard (Gemma 2 and 3's
      four norms per layer); ``branch=True`` leaves the output projection unreduced and
      drops the closing row (a parallel block sums and reduces both branches once).
    * ``causal`` matters for the FLOPs under ``causal_flops="exact"``; ``dropouts=False``
      and ``norm`` (a kind of ``ops.norm.NORMS``) as in ``mlp``; ``score_dropout`` (default
      ``dropouts``) is the dropout of the attention probabilities alone.
    * ``context`` (a ``blocks.context.Context``): this rank holds ``l`` tokens of a sequence of
      ``l cp`` split over a context-parallel group; the core is ``blocks.context.context_core``.
    * ``keys`` (default ``l``): the keys each query attends, when they are not the block's own
      ``l`` tokens: decoding one token over a cache (``inference.phases``; a sliding ``window``
      of ``w`` reads at most ``w`` of them, all its cache keeps), or cross-attention over an
      encoder output of another length (``kv_proj`` then reads ``keys`` tokens).

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> attention(b, l, e, h).total("flops_fwd").expand().coeff(l**2)
    4*b*e + 3*b*h
    """
    if score_bias not in SCORE_BIASES or qk_norm not in QK_NORMS:
        raise InputError(f"score_bias must be one of {SCORE_BIASES} and qk_norm one of {QK_NORMS}, "
                         f"got {score_bias!r}, {qk_norm!r}")
    span = window.size if isinstance(window, Chunk) else window
    dims = dict(b=b, l=l, e=e, h=h, m1=m1, s1=s1, **{k: v for k, v in (("kv_heads", kv_heads),
                ("head_dim", head_dim), ("v_head_dim", v_head_dim), ("window", span)) if v is not None})
    at = Layout.of(dims, es, es_mask, conventions)
    window = Chunk(dims["window"]) if isinstance(window, Chunk) else dims.get("window")
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    q = dims.get("head_dim", e / dims["h"])
    v = dims.get("v_head_dim", q)
    heads, kv = dims["h"] / m1, dims.get("kv_heads", dims["h"]) / m1
    keys = l if keys is None else _cached_keys(positive_dims(keys=keys)["keys"], dims.get("window"))
    rows = [at.norm(f"{norm}_norm_1", norm)]
    rows += _projections(at, q, v, heads, kv, qkv_bias, cross, keys)
    if clip_qkv:
        rows.append(gelu(b, l, heads * q + kv * (q + v), name="qkv_clip", **at.kw))
    rows += _qk_norms(at, qk_norm, norm, q, heads, kv)
    if rotary_pos:
        rows.append(rotary(b, l, heads + kv, q if rotary_dim is None else rotary_dim, es=at.es))
    scores = heads * stored_keys(keys, window, at.conventions)
    score_ops = ([bias_row(b, l, scores, learned=score_bias == "relative", es=at.es)] if score_bias else []) + \
        ([softcap_row(b, l, scores, es=at.es, name="score_softcap")] if softcap else [])
    grouped = dict(l_kv=keys, kv_heads=kv, v_dim=v, causal=causal, window=window, score_ops=score_ops,
                   **at.kw)
    drop = dropouts if score_dropout is None else score_dropout
    if context is not None:
        check_attention(context, window=window, score_bias=score_bias, softcap=softcap, sinks=sinks, cross=cross,
                        keys=keys if keys is not l else None)
        rows += context_core(b, l, q, heads, kv, v, context, causal=causal, flash=flash, dropouts=drop,
                             es_mask=at.es_mask, stride=m1, **at.kw)
    else:
        rows += ([flash_attention(b, l, q, heads, **grouped)] if flash else
                 attention_core(b, l, q, heads, dropouts=drop, es_mask=at.es_mask, **grouped))
    if sinks:
        rows.append(attention_sinks(b, l, heads, flash=flash, es=at.es))
    out = linear(b, l, heads * v, e, bias=out_bias, name="v_proj", **at.kw)
    out = reads_flash_output(out) if flash and getattr(context, "variant", None) != "ulysses" else out
    rows.append(out if branch else at.leaving(out))
    if post_norm:
        rows.append(NORMS[norm](b, l / at.s, e, name=f"{norm}_norm_post_attention", **at.kw))
    if not branch:
        rows.append(at.closing_dropout("dropout", dropouts))
    if at.conventions.norm_placement == "attention":
        rows.append(at.norm(f"{norm}_norm_2", norm))
    if cross:
        rows = [replace(row, name=f"cross_{row.name}") for row in rows]
    return Block("cross_attention" if cross else "attention", tuple(rows), dims, at.conventions)


def _cached_keys(keys, span):
    """Keys a query over a cache reads: all ``keys``, or in a sliding (or chunked) layer of
    ``w`` keys at most ``w``: the ``min(T, w - 1)`` tokens its cache keeps
    (``inference.kv_cache``, transformers' ``DynamicSlidingWindowLayer``) and its own."""
    return keys if span is None else minimum(span, keys)


def _projections(at: Layout, q, v, heads, kv, qkv_bias, cross, keys):
    """The fused ``qkv_proj``, or for cross-attention ``q_proj`` on this stream and ``kv_proj``
    on the encoder output of ``keys`` tokens (which enters the tensor region like a norm output)."""
    b, l, e, m1 = at.b, at.l, at.e, at.m1
    quirk = at.conventions.qkv_bias_elements == "e"         # Megatron training-info stores e, not 3e
    if not cross:
        width = (heads + 2 * kv) * q if v == q else heads * q + kv * (q + v)
        return [at.entering(linear(b, l, e, width, name="qkv_proj", **at.kw,
                                   bias=(e / m1 if qkv_bias and quirk else qkv_bias)))]
    gathered = at.collective("allgather", b * keys * e, at.s, "fwd")
    return [at.entering(linear(b, l, e, heads * q, bias=qkv_bias, name="q_proj", **at.kw)),
            at.attach(at.entering(linear(b, keys, e, kv * (q + v), bias=qkv_bias, name="kv_proj", **at.kw)),
                      gathered)]


def _weights_per_head(row, heads, conventions):
    """A per-head norm with its own weights for each of ``heads`` heads (Cohere): the same
    arithmetic (its weight gradient is counted per element), ``heads`` times the weights and
    their gradients, and the traffic of both (``ops.norm``'s rule)."""
    more = (heads - 1) * row.weights
    read = 2 if conventions.layer_norm_bwd_reads_weights else 1
    return row.plus(weights=more, weight_grads=more, mem_fwd=more, mem_bwd=read * more)


def _qk_norms(at: Layout, qk_norm, kind, q, heads, kv):
    """``q_norm`` and ``k_norm``: per head over ``q`` dims (weights ``q`` each; ``"l2"``: an RMS
    norm without weights, Llama 4; ``"head_each"``: weights ``q`` for every head, Cohere), or
    over the whole projections (weights ``(h/m1) q`` and ``(kv/m1) q``, row statistics
    allreduced)."""
    if qk_norm is None:
        return []
    b, l = at.b, at.l
    if qk_norm in ("head", "l2", "head_each"):
        kind = "rms_noaffine" if qk_norm == "l2" else kind
        rows = [NORMS[kind](b, l * width, q, name=name, **at.kw) for name, width in (("q_norm", heads), ("k_norm", kv))]
        if qk_norm == "head_each":
            rows = [_weights_per_head(row, width, at.conventions) for row, width in zip(rows, (heads, kv))]
        return rows
    stats = (2 if kind.startswith("layer") else 1) * b * l
    return [at.attach(NORMS[kind](b, l, width * q, name=name, **at.kw),
                      at.collective("allreduce", stats, at.m1, "fwd") + at.collective("allreduce", stats, at.m1, "bwd"))
            for name, width in (("q_norm", heads), ("k_norm", kv))]
