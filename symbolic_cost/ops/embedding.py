"""Embedding lookups and the language-model loss."""

from __future__ import annotations

from dataclasses import replace

from sympy import ceiling, log

from symbolic_cost import conventions as conv
from symbolic_cost.cost import Cost, Gemm, exact, make_cost
from symbolic_cost.checks import positive_dims
from symbolic_cost.extrema import minimum
from symbolic_cost.ops.matmul import matmul_flops


def embedding(b, l, rows, e, *, share=1, es=2, conventions=conv.DEFAULT, name="embedding") -> Cost:
    """Table lookup ``Y[i, t] = W[ids[i, t]]``: ``W (rows, e)``, ``Y (b, l, e)``.

    Forward moves data and does no arithmetic.  Backward scatter-adds ``dY``
    into ``dW``: ``b*l*e`` adds.  Keeps only the token ids (integers, not
    counted).  ``rows`` is the (padded) vocabulary or the number of positions.
    Split of the backward: the scatter-add forms the table's gradient, so all of it
    is weight gradient (``flops_wgrad = b*l*e``); the ids take no gradient (``flops_agrad = 0``).

    What the forward reads of the table (``mem_fwd``, besides writing ``Y``), by
    ``embedding_reads``: ``"rows"`` (default) the rows it gathers, ``share * b*l*e`` elements,
    ``share`` being the part of the ids that fall in this table (``1/m1`` of a vocabulary
    split over ``m1`` devices, ids spread evenly: Megatron-LM's ``VocabParallelEmbedding``
    looks up only its own range and zeroes the rest), and never more than the table (more
    lookups than rows, as ``l^2`` relative positions in a few buckets, repeat rows);
    ``"table"``: all of it, ``rows*e``.
    The table's bytes (``weights``) are the same under both.

    >>> from symbolic_cost.symbols import b, l, e
    >>> embedding(b, l, 50304, e).weights
    100608*e
    >>> embedding(8, 1, 50304, e).mem_fwd          # a decode step: 8 rows read, 8 written
    32*e
    """
    b, l, rows, e, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (rows, "rows"), (e, "e"), (es, "es")))
    n = b * l * e
    table = rows * e * es
    cost = make_cost(name, "vector", flops_fwd=0, flops_bwd=n, flops_wgrad=n, act_in=0, act_out=n * es,
                     act_buffer=0, weights=table, act_grads=n * es)
    if conv.get(conventions).embedding_reads == "table":
        return cost
    return cost.plus(mem_fwd=minimum(exact(share, "share") * n * es, table) - table)


def cross_entropy(b, l, v, *, es=2, name="loss") -> Cost:
    """Mean cross-entropy of logits ``Z (b, l, v)`` against target ids.

    With ``n = b*l*v`` and ``r = b*l`` rows, forward: row max ``r(v-1)``,
    subtract ``n``, exp ``n``, row sum ``r(v-1)``, log, pick the target and
    the mean ``3r``: ``2n + 2r(v-1) + 3r``.  Backward ``softmax(Z) - onehot``
    scaled by ``1/r``: subtract and exp again ``2n``, the one-hot ``r``, the
    scale ``n``: ``3n + r``.  Keeps the logits.  No parameters: all of the backward is
    activation gradient (``flops_wgrad = 0``).
    """
    b, l, v, es = (exact(x, n) for x, n in ((b, "b"), (l, "l"), (v, "v"), (es, "es")))
    rows, n = b * l, b * l * v
    return make_cost(name, "vector", flops_fwd=2 * n + 2 * rows * (v - 1) + 3 * rows,
                     flops_bwd=3 * n + rows, act_in=n * es, act_out=0, act_buffer=n * es,
                     act_grads=n * es)


def flce_chunk(tokens, width, v):
    """Tokens of one chunk of Liger-Kernel's fused linear cross-entropy (``fused_linear_cross_entropy_forward``,
    ``chunk_mem_const`` 1): ``inc = ceil(v / width)``, ``c = min(2^ceil(log2 ceil(tokens / inc)), tokens)``,
    so that a chunk's logits hold about as many elements as the ``(tokens, width)`` input.

    >>> flce_chunk(16384, 4096, 128256), flce_chunk(16384, 4096, 32000), flce_chunk(100, 4096, 32000)
    (512, 2048, 16)
    """
    tokens, width, v = positive_dims(tokens=tokens, width=width, v=v).values()
    share = ceiling(tokens / ceiling(v / width))
    return minimum(2 ** ceiling(log(share, 2)), tokens)


def fused_linear_cross_entropy(b, l, e, v, *, es=2, conventions=conv.DEFAULT, name="lm_head") -> Cost:
    """The LM head ``Z = X W^T`` (``X (b, l, e)``, ``W (v, e)``) and the mean cross-entropy of ``Z``
    as one autograd function that forms both gradients in its forward, a chunk of ``c`` of the
    ``T = b l`` tokens at a time (``flce_chunk``; Liger-Kernel's ``LigerFusedLinearCrossEntropyFunction``,
    which transformers' ``use_liger_kernel`` puts in a causal LM's forward): the chunk's logits
    ``(c, v)``, the cross-entropy kernel writing its gradient over them in place, then
    ``dX = dZ W`` into the input's gradient and ``dW += dZ^T X``.

    Forward: three products, ``(T, e) x (e, v)``, ``(T, v) x (v, e)`` and ``(v, T) x (T, e)``, and
    the cross-entropy's arithmetic, forward and backward (``cross_entropy``'s counts); the backward
    does nothing more (it scales the two gradients only where the loss's gradient is not 1, left
    out).  Keeps ``dX (T, e)`` and ``dW (v, e)`` from its forward to its backward (``act_buffer``),
    not ``X``; the logits live one chunk at a time (``act_out``, ``c v``).  Bytes moved in the
    forward: ``X`` read by two products, each chunk's logits written by the first product, read
    and written by the loss kernel and read by the two gradient products (``5 T v``), ``dX``
    written, and per chunk ``W`` read twice and ``dW`` read and written (``4 n v e``, ``n =
    ceil(T/c)`` chunks).

    >>> row = fused_linear_cross_entropy(2, 8, 16, 100)
    >>> row.flops_bwd, row.act_buffer, row.act_out, row.flops_fwd - 3 * 2 * 16 * 16 * 100
    (0, 3712, 800, 7776)
    """
    b, l, e, v, es = (exact(x, n) for x, n in ((b, "b"), (l, "l"), (e, "e"), (v, "v"), (es, "es")))
    tokens = b * l
    chunk = flce_chunk(tokens, e, v)
    gemms = (Gemm("fwd", tokens, e, v, element_bytes=es), Gemm("fwd", tokens, v, e, element_bytes=es),
             Gemm("fwd", v, tokens, e, element_bytes=es, grad="weight"))
    loss = cross_entropy(b, l, v, es=es)
    flops = sum((matmul_flops(g.m, g.k, g.n, conventions) for g in gemms), loss.flops_fwd + loss.flops_bwd)
    chunks = ceiling(tokens / chunk)
    moved = es * (2 * tokens * e + 5 * tokens * v + tokens * e + 4 * chunks * v * e)
    row = make_cost(name, "matrix", flops_fwd=flops, flops_bwd=0, act_in=tokens * e * es, act_out=chunk * v * es,
                    act_buffer=(tokens + v) * e * es, act_grads=0, weights=v * e * es, gemms=gemms)
    return replace(row, mem_fwd=moved, mem_bwd=0)
