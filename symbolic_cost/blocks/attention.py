"""The attention block (self- or cross-attention): every attention variant's projections around one core."""

from __future__ import annotations

from dataclasses import replace

from sympy import Expr, sympify

from symbolic_cost.checks import InputError, positive, positive_dims
from symbolic_cost.extrema import minimum
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.context import check_attention, check_variant, context_core
from symbolic_cost.blocks.latent_attention import latent_attention
from symbolic_cost.blocks.layout import NORMS, Layout
from symbolic_cost.blocks.specs import Heads, Projections, Scores, as_heads, objects
from symbolic_cost.blocks.wiring import Residual, Run
from symbolic_cost.ops import Keys, attention_core, flash_attention, gelu, linear, rotary
from symbolic_cost.ops.attention import reads_flash_output
from symbolic_cost.ops.matmul import Chunk, stored_keys
from symbolic_cost.ops.scores import attention_sinks, score_bias as bias_row, softcap as softcap_row


def attention(b, l, e, heads, m1=1, s1=1, *, scores: Scores | None = None, projections: Projections | None = None,
              residual: Residual | None = None, run: Run | None = None) -> Block:
    """Multi-head attention on one device, heads split over ``m1`` devices.

    Rows: ``layer_norm_1`` -> ``qkv_proj (e -> (h + 2 kv) q / m1)`` -> ``logits`` ->
    ``softmax`` -> ``dropout_softmax`` -> ``attend`` -> ``v_proj ((h/m1) q -> e)``
    -> ``dropout`` (and ``layer_norm_2`` when ``norm_placement="attention"``).
    Each device holds ``h/m1`` query heads and ``kv/m1`` key/value heads.

    What the attention is comes in three values (``blocks.specs``): ``heads`` (a ``Heads``,
    or a number of query heads: their sizes, norms, rotary positions; with ``Heads.latent``
    the block is ``latent_attention``), ``scores`` (a ``Scores``: mask, window or chunk, bias,
    soft cap, sinks, dropout, the keys a query reads) and ``projections`` (a ``Projections``:
    biases, clip, cross-attention).  How it runs (``run``, a ``blocks.wiring.Run``) and where it sits
    (``residual``, a ``Residual``):

    * ``Run.flash``: one ``flash_attention`` row replaces ``logits`` to ``attend``; it keeps
      ``O``, the input of ``v_proj``, which then keeps nothing (``ops.attention.reads_flash_output``).
    * ``Run.context`` (a ``blocks.context.Context``): this rank holds ``l`` tokens of a sequence
      of ``l cp`` split over a context-parallel group; the core is ``blocks.context.context_core``.
    * ``Residual.norm`` (a kind of ``ops.norm.NORMS``) is the kind of the block's norms, the
      per-head ones included (``"projection"`` q/k norms allreduce their row statistics over
      ``m1``); ``Residual.dropouts=False`` as in ``mlp`` (also the scores' unless
      ``Scores.dropout`` says).
    * ``Residual.post_norm`` adds a norm of the output on the sequence shard (Gemma 2 and 3's
      four norms per layer); ``Residual.branch`` leaves the output projection unreduced and
      drops the closing row (a parallel block sums and reduces both branches once).
    * Cross-attention (``Projections.cross``, T5's decoder): ``q_proj`` on this stream,
      ``kv_proj`` on the encoder output of ``Scores.keys`` tokens (allgathered like a norm
      output); rows ``cross_*``.  Decoding over a cache: ``Scores.keys`` cached keys (a sliding
      ``window`` of ``w`` reads at most ``w`` of them, all its cache keeps).

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> attention(b, l, e, h).total("flops_fwd").expand().coeff(l**2)
    4*b*e + 3*b*h
    >>> attention(b, l, e, Heads(h, kv_heads=1), scores=Scores(causal=True)).names[1:3]
    ['qkv_proj', 'logits']
    """
    objects(scores=(scores, Scores), projections=(projections, Projections), residual=(residual, Residual),
            run=(run, Run))
    heads, scores, projections = as_heads(heads), scores or Scores(), projections or Projections()
    residual, run = residual or Residual(), run or Run()
    if heads.latent is not None:
        return _latent(b, l, e, heads, m1, s1, scores, projections, residual, run)
    dims = dict(b=b, l=l, e=e, h=heads.h, m1=m1, s1=s1, **heads.sizes, **scores.sizes)
    at = Layout.of(dims, run.es, run.es_mask, run.conventions)
    heads, scores = heads.checked(dims), scores.checked(dims)
    keys = at.l if scores.keys is None else _cached_keys(positive_dims(keys=scores.keys)["keys"], scores.span)
    context, norm, dropouts = run.context, residual.norm, residual.dropouts
    if context is not None:     # windows and sinks: as Transformer Engine runs them (context.RUNS_UNDER)
        if scores.window is not None and not isinstance(scores.window, Chunk):
            check_variant(context.variant, "a sliding window")
        if scores.sinks:
            check_variant(context.variant, "attention sinks")
        check_attention(context, window=scores.window if isinstance(scores.window, Chunk) else None,
                        score_bias=scores.bias, softcap=scores.softcap, cross=projections.cross, keys=scores.keys)
    rows = [at.norm(f"{norm}_norm_1", norm), *_inputs(at, heads, projections, norm, keys, run.split_inputs)]
    rows += _core(at, heads, scores, keys, run.flash, context, dropouts if scores.dropout is None else scores.dropout)
    rows += _output(at, heads, projections, run.flash and getattr(context, "variant", None) != "ulysses", residual)
    if projections.cross:        # selective recomputation redoes the self-attention core only
        rows = [replace(row, name=f"cross_{row.name}", recompute=None, rebuilt=None) for row in rows]
    return Block("cross_attention" if projections.cross else "attention", tuple(rows), dims, at.conventions)


def _inputs(at: Layout, heads: Heads, projections: Projections, norm, keys, split=False) -> list:
    """Q, K and V on this device: the projections, their clip, q/k norms and rotary positions;
    ``split`` (``Run.split_inputs``): ``q``, ``k`` and ``v`` three modules, each reducing its input
    gradient."""
    q, v, local, kv = heads.size(at.e), heads.value_size(at.e), heads.h / at.m1, heads.kv / at.m1
    rows = _projections(at, q, v, local, kv, projections.qkv_bias, projections.cross, keys, 3 if split else 1)
    if projections.clip:
        rows.append(gelu(at.b, at.l, local * q + kv * (q + v), name="qkv_clip", **at.kw))
    rows += _qk_norms(at, heads.qk_norm, norm, q, local, kv)
    if heads.rotary:
        rows.append(rotary(at.b, at.l, local + kv, q if heads.rotary_dim is None else _rotated(heads.rotary_dim, q),
                           es=at.es))
    return rows


def _rotated(dim, q) -> Expr:
    """``rotary_dim``, a positive share of each head's ``q`` dims, refused past them (1,000 rotated
    dims of an 8-dim head were counted 125 times the rotation)."""
    dim = positive(dim, "rotary_dim")
    if (sympify(dim) - sympify(q)).is_positive:
        raise InputError(f"rotary_dim={dim} exceeds the head size q={q}: rotary positions turn a share of each "
                         f"head's dims", "rotary_dim")
    return dim


def _core(at: Layout, heads: Heads, scores: Scores, keys, flash, context, dropout) -> list:
    """The attention core on this device (``ops.attention``, or ``blocks.context`` under
    context parallelism), the scores' bias and soft cap inside it, the sinks after it."""
    b, l, q, v = at.b, at.l, heads.size(at.e), heads.value_size(at.e)
    local, kv = heads.h / at.m1, heads.kv / at.m1
    stored = local * stored_keys(keys, scores.window, at.conventions)
    score_ops = ([bias_row(b, l, stored, learned=scores.bias == "relative", es=at.es)] if scores.bias else []) + \
        ([softcap_row(b, l, stored, es=at.es, name="score_softcap")] if scores.softcap else [])
    if context is not None:
        rows = context_core(b, l, q, local, Keys(kv_heads=kv, v_dim=v, causal=scores.causal, window=scores.window),
                            context, flash=flash, dropouts=dropout, es_mask=at.es_mask, stride=at.m1, **at.kw)
    else:
        seen = Keys(l_kv=keys, kv_heads=kv, v_dim=v, causal=scores.causal, window=scores.window, score_ops=score_ops)
        rows = ([flash_attention(b, l, q, local, seen, **at.kw)] if flash else
                attention_core(b, l, q, local, seen, dropouts=dropout, es_mask=at.es_mask, **at.kw))
    if scores.sinks:
        rows.append(attention_sinks(b, l, local, flash=flash, es=at.es))
    return rows


def _output(at: Layout, heads: Heads, projections: Projections, reads_flash, residual: Residual) -> list:
    """The output projection (reduced unless ``residual.branch``), the post-norm, the closing
    row (unless ``residual.branch``) and, under ``norm_placement="attention"``, the second norm."""
    norm, branch = residual.norm, residual.branch
    out = linear(at.b, at.l, heads.h / at.m1 * heads.value_size(at.e), at.e, bias=projections.out_bias,
                 name="v_proj", **at.kw)
    out = reads_flash_output(out) if reads_flash else out
    rows = [out if branch else at.leaving(out)]
    if residual.post_norm:
        rows.append(NORMS[norm](at.b, at.l / at.s, at.e, name=f"{norm}_norm_post_attention", **at.kw))
    if not branch:
        rows.append(at.closing_dropout("dropout", residual.dropouts))
    if at.conventions.norm_placement == "attention":
        rows.append(at.norm(f"{norm}_norm_2", norm))
    return rows


def _latent(b, l, e, heads: Heads, m1, s1, scores: Scores, projections: Projections, residual: Residual,
            run: Run) -> Block:
    """Multi-head latent attention (``latent_attention``) for ``Heads.latent``: its biases are
    the output projection's, its scores causal or not, with their dropout and keys (it refuses
    context parallelism but the ring's, and a parallel layer's branch)."""
    return latent_attention(b, l, e, heads.h, heads.latent, m1, s1, bias=projections.out_bias,
                            scores=Scores(causal=scores.causal, dropout=scores.dropout, keys=scores.keys),
                            residual=residual, run=run)


def _cached_keys(keys, span):
    """Keys a query over a cache reads: all ``keys``, or in a sliding (or chunked) layer of
    ``w`` keys at most ``w``: the ``min(T, w - 1)`` tokens its cache keeps
    (``inference.kv_cache``, transformers' ``DynamicSlidingWindowLayer``) and its own."""
    return keys if span is None else minimum(span, keys)


def _projections(at: Layout, q, v, heads, kv, qkv_bias, cross, keys, products=1):
    """The fused ``qkv_proj`` (``products``: the modules it stands for, each reducing its input
    gradient, ``Layout.entering``), or for cross-attention ``q_proj`` on this stream and ``kv_proj``
    on the encoder output of ``keys`` tokens (which enters the tensor region like a norm output)."""
    b, l, e, m1 = at.b, at.l, at.e, at.m1
    quirk = at.conventions.qkv_bias_elements == "e"         # Megatron training-info stores e, not 3e
    if not cross:
        width = (heads + 2 * kv) * q if v == q else heads * q + kv * (q + v)
        return [at.entering(linear(b, l, e, width, name="qkv_proj", **at.kw,
                                   bias=(e / m1 if qkv_bias and quirk else qkv_bias)), products)]
    if products != 1:
        raise InputError("cross-attention with its projections reducing their input gradients one by one "
                         "(split_inputs) is not modelled", "split_inputs")
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
