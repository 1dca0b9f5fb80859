"""Multi-head latent attention (DeepSeek-V2 and V3): queries and keys/values through low-rank
latents, each head's query/key split into a part without and a part with rotary positions.

Per token (``h`` heads, ``d_n`` no-rotary and ``d_r`` rotary dims per query/key head, ``d_v``
per value head, latent ranks ``r_q`` and ``r_kv``)::

    q  = W_qb norm(W_qa x)              (r_q = None: q = W_q x)       h (d_n + d_r)
    c, k_r = W_kva x                    c: r_kv, k_r: d_r (one rotary key shared by all heads)
    k_n, v = W_kvb norm(c)              h d_n and h d_v
    y  = W_o attention(q, [k_n, k_r], v)

The latent ``c`` and the rotary key ``k_r`` are all a layer caches per token
(``latent_cache_elements``).  Tensor parallelism splits the heads over ``m1``: the
up-projections ``W_qb``, ``W_kvb`` and ``W_o`` by heads; the down-projections ``W_qa`` and
``W_kva`` and the latent norms are replicated on every tensor rank, on the gathered sequence
(the hidden states enter the tensor region as for every attention; gathering the smaller
latents instead is not modelled).

The backward splits row by row (``Cost.flops_wgrad``): the weight gradients are the
projections' ``dW`` (and biases) and the norms' weights, the latent norms' included
(``ops.linear``, ``ops.norm``); the rest is activation gradient: every ``dX``, the rotary row
and the attention core.
"""

from __future__ import annotations

from sympy import Expr

from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.context import check_variant, context_core
from symbolic_cost.blocks.layout import NORMS, Layout
from symbolic_cost.blocks.specs import Latent, Scores
from symbolic_cost.blocks.wiring import Residual, Run
from symbolic_cost.checks import InputError
from symbolic_cost.cost import exact
from symbolic_cost.ops import Keys, attention_core, flash_attention, linear, rotary
from symbolic_cost.ops.attention import reads_flash_output


def latent_cache_elements(latent: Latent) -> Expr:
    """Elements one layer caches per token for inference: the latent and the rotary key,
    ``r_kv + d_r`` (576 for DeepSeek-V2 and V3, where full keys and values would be
    ``h (d_n + d_r + d_v)``).

    >>> latent_cache_elements(Latent(kv_rank=512, rope_dim=64, nope_dim=128, v_dim=128))
    576
    """
    return exact(latent.kv_rank, "kv_rank") + exact(latent.rope_dim, "rope_dim")


__all__ = ["Latent", "latent_attention", "latent_cache_elements", "core_input_bytes", "rotary_key_bytes"]

CAUSAL = Scores(causal=True)
"""The scores of ``latent_attention`` by default: causal (DeepSeek's)."""
RMS = Residual(norm="rms")
"""The residual placement of ``latent_attention`` by default: RMS norms, dropouts."""


def latent_attention(b, l, e, h, latent: Latent, m1=1, s1=1, *, bias=False, scores: Scores = CAUSAL,
                     residual: Residual = RMS, run: Run | None = None) -> Block:
    """Multi-head latent attention on one device, heads split over ``m1`` (module docstring).

    Rows: ``{norm}_norm_1``, ``q_a_proj``, ``q_a_norm``, ``q_b_proj`` (or ``q_proj``),
    ``kv_a_proj``, ``kv_a_norm``, ``kv_b_proj``, ``rotary`` (the ``h/m1`` query heads and the
    shared key, ``d_r`` dims each), the core (``logits`` ... ``attend``, or ``flash_attention``),
    ``v_proj`` (the output projection, as the library names it; after ``flash_attention`` it keeps
    nothing, its input being the kernel's kept ``O``), the closing dropout.  ``bias``
    biases the two down-projections and the output (DeepSeek's ``attention_bias``).  The
    down-projections read one input: the first keeps it, ``kv_a_proj`` keeps nothing.  ``Scores.keys``
    (default ``l``): the keys and values each query attends when they are not the ``l`` new
    tokens' (decoding over a cache of decompressed keys and values, ``attention.attention``).
    ``scores`` (a ``blocks.specs.Scores``): causal or not, the probabilities' dropout
    (``None``: ``residual.dropouts``) and ``keys``; its window, bias, soft cap and sinks are not
    modelled here.  ``residual`` (``Residual``): the norms' kind, the closing dropout, the
    post-norm (``branch`` and ``shared_input`` are refused).  ``run`` (``Run``): ``flash``, the
    element sizes and conventions, and ``context``: ring context parallelism only, the core the
    ring's ``blocks.context.context_core`` over the heads' decompressed keys and values.

    >>> block = latent_attention(1, 8, 2048, 16, Latent(512, 64, 128, 128))
    >>> block.total("weights") / 2 == 2048 * 16 * 192 + 2048 * 576 + 512 + 512 * 16 * 256 + 16 * 128 * 2048 + 2048
    True
    """
    run = _checked(residual, run or Run(), scores.keys)
    norm, dropouts, flash, keys = residual.norm, residual.dropouts, run.flash, scores.keys
    dims = dict(b=b, l=l, e=e, h=h, m1=m1, s1=s1, head_dim=latent.qk_dim, v_head_dim=latent.v_dim)
    at = Layout.of(dims, run.es, run.es_mask, run.conventions)
    b, l, e, heads = at.b, at.l, at.e, dims["h"] / at.m1
    qk, v, rope = dims["head_dim"], dims["v_head_dim"], exact(latent.rope_dim, "rope_dim")
    kv_rank = exact(latent.kv_rank, "kv_rank")
    rows = [at.norm(f"{norm}_norm_1", norm)]
    if latent.q_rank is None:
        rows.append(at.entering(linear(b, l, e, heads * qk, bias=False, name="q_proj", **at.kw)))
    else:
        q_rank = exact(latent.q_rank, "q_rank")
        rows += [at.entering(linear(b, l, e, q_rank, bias=bias, name="q_a_proj", **at.kw)),
                 NORMS[norm](b, l, q_rank, name="q_a_norm", **at.kw),
                 linear(b, l, q_rank, heads * qk, bias=False, name="q_b_proj", **at.kw)]
    down = linear(b, l, e, kv_rank + rope, bias=bias, name="kv_a_proj", **at.kw)
    rows += [down.plus(act_buffer=-down.act_buffer),
             NORMS[norm](b, l, kv_rank, name="kv_a_norm", **at.kw),
             linear(b, l, kv_rank, heads * (qk - rope + v), bias=False, name="kv_b_proj", **at.kw),
             rotary(b, l, heads + 1, rope, es=at.es)]
    dropout = dropouts if scores.dropout is None else scores.dropout
    if run.context is not None:       # the ring passes the heads' decompressed K and V (blocks.context)
        rows += context_core(b, l, qk, heads, Keys(kv_heads=heads, v_dim=v, causal=scores.causal), run.context,
                             flash=flash, dropouts=dropout, es_mask=at.es_mask, stride=at.m1, **at.kw)
    else:
        core = Keys(l_kv=keys, kv_heads=heads, v_dim=v, causal=scores.causal)
        rows += ([flash_attention(b, l, qk, heads, core, **at.kw)] if flash else
                 attention_core(b, l, qk, heads, core, dropouts=dropout, es_mask=at.es_mask, **at.kw))
    out = linear(b, l, heads * v, e, bias=bias, name="v_proj", **at.kw)
    rows.append(at.leaving(reads_flash_output(out) if flash else out))
    if residual.post_norm:
        rows.append(NORMS[norm](b, l / at.s, e, name=f"{norm}_norm_post_attention", **at.kw))
    rows.append(at.closing_dropout("dropout", dropouts))
    if at.conventions.norm_placement == "attention":
        rows.append(at.norm(f"{norm}_norm_2", norm))
    return Block("latent_attention", tuple(rows), dims, at.conventions)


def _checked(residual: Residual, run: Run, keys) -> Run:
    """``run``, refusing what latent attention does not model: context parallelism but the ring's
    (Transformer Engine passes the heads' K and V around the ring, ``cp_comm_type="p2p"``, and
    refuses the other exchanges for query and value heads of different sizes) or over cached keys,
    a parallel layer's branch."""
    context = run.context
    if context is not None:
        check_variant(context.variant, "latent attention")
    if context is not None and keys is not None:
        raise InputError("context parallelism over cached keys with multi-head latent attention is not modelled",
                         "keys")
    if residual.branch or residual.shared_input:
        raise InputError("multi-head latent attention in a parallel layer is not modelled", "latent")
    return run


def core_input_bytes(layer: Block) -> Expr:
    """Bytes of Q, K and V entering the attention core of a layer (what selective
    recomputation keeps to redo the core): the fused ``qkv_proj``'s output, or for latent
    attention the queries, the keys and values ``kv_b_proj`` makes, and the rotary key shared
    by the heads (one of the ``h/m1 + 1`` heads the ``rotary`` row reads)."""
    if "qkv_proj" in layer.names:
        return layer["qkv_proj"].act_out
    query = layer["q_b_proj" if "q_b_proj" in layer.names else "q_proj"].act_out
    return query + layer["kv_b_proj"].act_out + rotary_key_bytes(layer)


def rotary_key_bytes(layer: Block) -> Expr:
    """Bytes of the rotary key ``k_r`` of a latent-attention layer, ``(b, l, d_r)``: one of the
    ``h/m1 + 1`` heads the ``rotary`` row reads (the key is shared by every query head)."""
    return layer["rotary"].act_in / (layer.dims["h"] / layer.dims["m1"] + 1)
