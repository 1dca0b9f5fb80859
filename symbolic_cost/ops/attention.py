"""The attention core, ``softmax(Q K^T) V``, assembled once: unfused rows or one fused kernel.

Every attention layout (plain, grouped-query, flash, Ulysses, ring) takes its
core from here, so the order of the operations and what they keep are
written in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from symbolic_cost import conventions as conv
from symbolic_cost.cost import Cost, ScoreShape, exact, make_cost
from symbolic_cost.ops.matmul import attend, key_length, key_value_heads, logits, scored_keys, stored_keys
from symbolic_cost.ops.pointwise import dropout, softmax


@dataclass(frozen=True)
class Keys:
    """What each query of an attention core scores and reads.

    - ``l_kv``: keys per query row (default ``l``, self-attention; the cache in a decode step);
    - ``kv_heads``: key/value heads (default ``h``; fewer under grouped-query attention);
    - ``v_dim``: the value head size (default the query size ``q``);
    - ``causal``: the causal mask (a query sees the keys up to its own position);
    - ``window``: a sliding window's size or an ``ops.matmul.Chunk`` (``stored_keys``);
    - ``score_ops``: element-wise rows on the scores (a position bias, a soft cap) that run
      between ``logits`` and ``softmax``.

    >>> Keys(l_kv=512, kv_heads=8).causal
    False
    """

    l_kv: object = None
    kv_heads: object = None
    v_dim: object = None
    causal: bool = False
    window: object = None
    score_ops: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "score_ops", tuple(self.score_ops))


SELF = Keys()
"""Self-attention without a mask: every query scores all ``l`` keys of its ``h`` heads."""


def attention_core(b, l, q, h, keys: Keys = SELF, *, dropouts=True, fused=False, es=2, es_mask=1,
                   conventions=conv.DEFAULT) -> list[Cost]:
    """The unfused core on one device: ``logits -> softmax -> dropout_softmax -> attend``.

    ``Q (b, h, l, q)``, ``K, V (b, kv, l_kv, q)``, scores ``(b, h, l, l_kv)`` (``keys``: ``Keys``).
    The dropout covers every score of the stored ``(l, l_kv)`` tensor; with
    ``fused`` (the arithmetic inside a flash kernel) only the scores the kernel
    computes (``scored_keys``).  Without dropout, ``attend`` keeps the very
    tensor ``softmax`` keeps, so it is held once.  A sliding ``window`` bounds the scores
    per query (``stored_keys``) in every row.  ``v_dim`` (default ``q``) is the value head
    size (``V (b, kv, l_kv, v_dim)``); ``score_ops`` run between ``logits`` and ``softmax``.  The four rows
    are what selective recomputation redoes and keeps nothing of (``Cost.recompute``,
    ``Cost.rebuilt``: ``"selective"``; the ``score_ops`` are not marked).

    >>> from symbolic_cost.symbols import b, l, h
    >>> [row.name for row in attention_core(b, l, 64, h)]
    ['logits', 'softmax', 'dropout_softmax', 'attend']
    """
    length, causal, window, score_ops = key_length(l, keys.l_kv), keys.causal, keys.window, keys.score_ops
    kw = dict(es=es, conventions=conventions)
    grouped = dict(l_kv=length, kv_heads=keys.kv_heads, causal=causal, window=window, **kw)
    rows = [logits(b, l, q, h, **grouped), *score_ops,
            softmax(b, l, h, l_kv=length, causal=causal, window=window, **kw)]
    if dropouts:
        width = (scored_keys(exact(l, "l"), length, causal, conventions, window) if fused
                 else stored_keys(length, window, conventions))
        rows.append(dropout(b, l, width * exact(h, "h"), es_mask=es_mask, name="dropout_softmax", **kw))
    av = attend(b, l, q if keys.v_dim is None else keys.v_dim, h, **grouped)
    rows += [av if dropouts else av.plus(act_buffer=-rows[1 + len(score_ops)].act_buffer)]
    ops = {id(op) for op in score_ops}
    return [row if id(row) in ops else replace(row, recompute="selective", rebuilt="selective") for row in rows]


LSE_BYTES = 4
"""Bytes of one row's log-sum-exp a flash kernel keeps for backward: fp32 whatever the inputs'
type (FlashAttention-2's ``softmax_lse``, PyTorch's ``logsumexp`` output of
``_scaled_dot_product_flash_attention`` on CUDA and on CPU, cuDNN's softmax statistics)."""


def flash_attention(b, l, q, h, keys: Keys = SELF, *, es=2, conventions=conv.DEFAULT,
                    name="flash_attention") -> Cost:
    """Fused ``softmax(Q K^T) V`` with dropout (FlashAttention): no ``(l, l_kv)`` tensor is stored.

    ``Q, O (b, h, l, q)``, ``K, V (b, h, l_kv, q)`` (``keys``: ``Keys``); keeps ``Q, K, V, O``
    and the row log-sum-exp ``(b, h, l)`` in fp32 (``LSE_BYTES``) whatever the element size.
    Forward does the arithmetic of ``logits``, ``softmax``, ``dropout`` and ``attend``
    (``attention_core``); backward recomputes the scores, the softmax and the dropout mask
    (their forward again) and then does the backward of all four.  Gradients touch ``dQ, dK,
    dV, dO``.  A sliding ``window`` bounds the scores each query computes (``scored_keys``);
    what is kept does not change.  ``v_dim`` and ``score_ops`` (done inside the kernel, and
    again in backward) as in ``attention_core``.
    Split of the backward: the four parts' own (``flops_wgrad``: a learned position bias's
    among the ``score_ops``, 0 otherwise); the recomputed forward leads to ``dQ, dK, dV`` and
    counts as activation gradient.
    """
    b, l, q, h, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (q, "q"), (h, "h"), (es, "es")))
    length, groups = key_length(l, keys.l_kv), key_value_heads(h, keys.kv_heads)
    v = q if keys.v_dim is None else exact(keys.v_dim, "v_dim")
    parts = attention_core(b, l, q, h, replace(keys, l_kv=length, kv_heads=groups, v_dim=v), fused=True, es=es,
                           conventions=conventions)
    recompute = sum(p.flops_fwd for p in parts[:-1])          # everything before attend
    queries, out, kv = b * h * l * q * es, b * h * l * v * es, b * groups * length * (q + v) * es
    cost = make_cost(
        name, "matrix",
        flops_fwd=sum(p.flops_fwd for p in parts), flops_bwd=recompute + sum(p.flops_bwd for p in parts),
        flops_wgrad=sum(p.flops_wgrad for p in parts),
        act_in=queries, act_in_other=kv, act_out=out,
        act_buffer=queries + out + kv + b * h * l * LSE_BYTES, act_grads=queries + out + kv)
    return replace(cost, gemms=_kernel_products(parts), fused=True,
                   scores=score_shape(l, length, keys.causal, keys.window, conventions, (q + v) / 2))


def score_shape(l, keys, causal, window, conventions, head_dim=None) -> ScoreShape:
    """The ``ScoreShape`` of a flash kernel over ``l`` queries and ``keys`` keys, whose scores each
    run products ``head_dim`` wide: a causal square when the mask is causal and the scores are
    square (``keys = l``), else every query sees its counted keys (``scored_keys``)."""
    square = causal and keys == l
    return ScoreShape(l, scored_keys(l, keys, causal, conventions, window),
                      causal_length=l if square else None, window=window if square else None, head_dim=head_dim)


def _kernel_products(parts) -> tuple:
    """The products a flash kernel runs, for counting: ``Q K^T`` and ``P V`` forward; backward
    ``Q K^T`` again (the recomputed scores) and the four gradient products of the two."""
    forward = [g for p in parts for g in p.gemms if g.pass_ == "fwd"]
    backward = [g for p in parts for g in p.gemms if g.pass_ == "bwd"]
    again = [replace(g, pass_="bwd") for g in parts[0].gemms if g.pass_ == "fwd"]
    return tuple(forward + again + backward)


def reads_flash_output(proj: Cost) -> Cost:
    """The output projection right after ``flash_attention``: its input ``X (b, l, h v)`` is the
    kernel's ``O`` (a view of the same storage), which the flash row keeps already, so the
    projection keeps nothing of its own and ``O`` is counted once.  Megatron-Core's
    ``SelfAttention`` hands ``core_attention``'s output (Transformer Engine's
    ``DotProductAttention``, whose flash backends save ``out`` for backward) to ``linear_proj``
    as its input, and PyTorch's CPU flash kernel (``scaled_dot_product_attention``) saves
    ``output`` while ``o_proj`` saves a view of it (``tests/test_memory_fixes.py``).  An eager
    core keeps no ``O`` (``attend`` keeps ``A`` and ``V``), so there the projection keeps its
    input."""
    return proj.plus(act_buffer=-proj.act_in)
