"""Element-wise work on attention scores and logits: position biases (ALiBi, T5's relative bias),
the ``tanh`` soft cap (Gemma 2) and learned attention sinks (GPT-OSS).

Both act on a ``(b, l, x)`` tensor: for attention scores ``x = h * keys`` (the stored keys
per query, ``ops.matmul.stored_keys``), for the LM logits ``x = vocab``.
"""

from __future__ import annotations

from symbolic_cost.cost import Cost, exact, make_cost


def score_bias(b, l, x, *, learned=False, es=2, name="position_bias") -> Cost:
    """``S + B``: a bias ``B (l, x)`` shared by the batch added to the scores ``S (b, l, x)``.

    ``n = b*l*x``.  Forward: ``n`` adds.  Backward passes ``dS`` through unchanged; a
    ``learned`` bias (T5's relative attention bias) also sums ``dS`` over the batch into
    ``dB``: ``(b - 1) l x`` adds, and writes ``dB``.  ALiBi's bias is fixed (not learned).
    Nothing is kept.  The bias is the second input.  Split of the backward: the learned
    bias's ``(b - 1) l x`` adds lead only to a parameter's gradient (the bias table's), so all
    of it is weight gradient (``flops_wgrad``); passing ``dS`` through costs nothing
    (``flops_agrad = 0``).

    >>> from symbolic_cost.symbols import b, l, h
    >>> score_bias(b, l, h * l, learned=True).flops_bwd
    h*l**2*(b - 1)
    """
    b, l, x, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (x, "x"), (es, "es")))
    n, bias = b * l * x, l * x
    into_bias = (b - 1) * bias if learned else 0
    return make_cost(name, "vector", flops_fwd=n, flops_bwd=into_bias, flops_wgrad=into_bias,
                     act_in=n * es, act_in_other=bias * es, act_out=n * es, act_buffer=0,
                     act_grads=(n + (bias if learned else 0)) * es)


def softcap(b, l, x, *, es=2, name="softcap") -> Cost:
    """Soft cap ``Y = c tanh(X / c)`` on ``X (b, l, x)`` (Gemma 2's attention and final logits).

    ``n = b*l*x``.  Forward: divide, ``tanh``, multiply: ``3n``.  Backward
    ``dX = dY (1 - tanh^2)``: square, subtract, multiply: ``3n``.  Keeps ``tanh(X / c)``.
    No parameters: the backward's ``3n`` is activation gradient (``flops_wgrad = 0``).

    >>> softcap(2, 3, 5).flops_fwd
    90
    """
    b, l, x, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (x, "x"), (es, "es")))
    n = b * l * x
    return make_cost(name, "vector", flops_fwd=3 * n, flops_bwd=3 * n, act_in=n * es, act_out=n * es,
                     act_buffer=n * es, act_grads=2 * n * es)


def attention_sinks(b, l, heads, *, flash=False, es=2, name="attention_sinks") -> Cost:
    """A learned sink logit per head (GPT-OSS): one more column of every softmax row, which
    takes probability and gives no value.  ``(b, heads, l)`` softmax rows.

    ``n = b*l*heads``.  Forward: the sink's exponential (less the row maximum) and its add to
    the row's sum: ``2n``.  Backward: the sink's probability times the row's ``<dP, P>``
    (which the softmax backward forms anyway), summed over ``b`` and ``l`` into the ``heads``
    gradients: ``2n``, all of it weight gradient (``flops_wgrad = 2n``: the scores' own
    gradient is the softmax's, whose ``<dP, P>`` the sink's zero ``dP`` does not change;
    ``flops_agrad = 0``).  Weights: ``heads`` logits (split with the heads over ``m1``).  Keeps the
    sink column of the probabilities (``n``; eager attention keeps the ``l + 1``-wide softmax
    output), nothing under flash attention (the sink enters the row's log-sum-exp, kept
    already).

    >>> attention_sinks(2, 3, 4).flops_fwd, attention_sinks(2, 3, 4).weights
    (48, 8)
    """
    b, l, heads, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (heads, "heads"), (es, "es")))
    n = b * l * heads
    return make_cost(name, "vector", flops_fwd=2 * n, flops_bwd=2 * n, flops_wgrad=2 * n, act_in=n * es,
                     act_out=n * es, act_buffer=0 if flash else n * es, act_grads=n * es, weights=heads * es)
