"""Embedding lookups and the language-model loss."""

from __future__ import annotations

from symbolic_cost import conventions as conv
from symbolic_cost.cost import Cost, exact, make_cost
from symbolic_cost.extrema import minimum


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
