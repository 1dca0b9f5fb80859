"""Element-wise operations on vector units: softmax, dropout, GELU.

The per-element counts are those of the LBNL 2024 primitives
(transformer-perf-estimates, arXiv 2410.00273), derived there from the
arithmetic of each kernel; the backward-gradient traffic follows their
later fix (commit 5a89ee8) unless ``pointwise_grad_both`` is off.
"""

from __future__ import annotations

from symbolic_cost import conventions as conv
from symbolic_cost.cost import Cost, exact, make_cost
from symbolic_cost.ops.matmul import scored_keys, stored_keys


def _grad_elements(n, conventions):
    """Gradient elements a pointwise backward touches: read ``dY``, write ``dX``
    (the LBNL 2024 primitives count one of the two)."""
    return 2 * n if conv.get(conventions).pointwise_grad_both else n


def softmax(b, l, h, *, l_kv=None, causal=False, window=None, es=2, conventions=conv.DEFAULT,
            name="softmax") -> Cost:
    """Row softmax of the scores ``A (b, h, l, l_kv)`` over the last axis (``l_kv`` keys,
    default ``l``).

    With ``n = b*h*l*l_kv`` elements and ``b*h*l`` rows of length ``l_kv``:
    forward is an exp and a multiply (by the reciprocal row sum) per element
    plus ``l_kv - 1`` adds per row sum: ``2n + b*h*l*(l_kv - 1)``.
    Backward ``dX = Y * (dY - sum(dY * Y))``: a multiply, the row sums, a
    subtract and a multiply: ``3n + b*h*l*(l - 1)``.  Keeps ``Y``.  With
    ``causal`` and ``causal_flops="exact"`` the FLOPs cover the unmasked half; a sliding
    ``window`` bounds the stored and counted scores per query (``stored_keys``).  No
    parameters: the backward is all activation gradient (``flops_wgrad = 0``).

    >>> from symbolic_cost.symbols import b, l, h
    >>> softmax(b, l, h).flops_fwd.factor()
    b*h*l*(3*l - 1)
    """
    b, l, h, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (h, "h"), (es, "es")))
    keys = l if l_kv is None else exact(l_kv, "l_kv")
    counted = scored_keys(l, keys, causal, conventions, window)
    n, scored = b * h * l * stored_keys(keys, window, conventions), b * h * l * counted
    row_sums = b * h * l * (counted - 1)
    return make_cost(
        name, "vector", flops_fwd=2 * scored + row_sums, flops_bwd=3 * scored + row_sums,
        act_in=n * es, act_out=n * es, act_buffer=n * es, act_grads=2 * n * es)


def dropout(b, l, x, *, es=2, es_mask=1, conventions=conv.DEFAULT, name="dropout") -> Cost:
    """Dropout on a ``(b, l, x)`` tensor with a stored mask of ``es_mask``-byte elements.

    ``n = b*l*x``.  Forward and backward each multiply by the (pre-scaled)
    mask: ``n`` FLOPs.  The mask is the second input and the only thing kept.
    For attention probabilities pass ``x = h*l``.  No parameters: the backward's ``n``
    is activation gradient (``flops_wgrad = 0``).

    >>> from symbolic_cost.symbols import b, l, e
    >>> dropout(b, l, e).act_buffer
    b*e*l
    """
    b, l, x, es, es_mask = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (x, "x"), (es, "es"), (es_mask, "es_mask")))
    n = b * l * x
    return make_cost(
        name, "vector", flops_fwd=n, flops_bwd=n,
        act_in=n * es, act_in_other=n * es_mask, act_out=n * es, act_buffer=n * es_mask,
        act_grads=_grad_elements(n, conventions) * es)


def gelu(b, l, x, *, es=2, conventions=conv.DEFAULT, name="act") -> Cost:
    """GELU (any element-wise non-linearity) on ``(b, l, x)``, counted as one
    FLOP per element each way (the LBNL 2024 convention).  Keeps the input.  No
    parameters: the backward's ``n`` is activation gradient (``flops_wgrad = 0``).

    >>> from symbolic_cost.symbols import b, l, f
    >>> gelu(b, l, f).flops_bwd
    b*f*l
    """
    b, l, x, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (x, "x"), (es, "es")))
    n = b * l * x
    return make_cost(
        name, "vector", flops_fwd=n, flops_bwd=n,
        act_in=n * es, act_out=n * es, act_buffer=n * es,
        act_grads=_grad_elements(n, conventions) * es)


def gated(b, l, f, *, es=2, conventions=conv.DEFAULT, name="act") -> Cost:
    """Gated activation (SwiGLU ``silu(G) * U``, GeGLU ``gelu(G) * U``): ``G, U (b, l, f)``.

    ``n = b*l*f``.  Forward: the non-linearity (one FLOP per element, as for
    GELU) and the product: ``2n``.  Backward: ``dU = dY act(G)``, ``dG = dY U
    act'(G)``: ``3n``; gradients read ``dY`` and write ``dG``, ``dU``.  No parameters: the
    backward's ``3n`` is activation gradient (``flops_wgrad = 0``).  What it keeps
    (``gated_activation``; the product ``act(G) * U`` is the next projection's input, kept
    there):

    * ``"fused"``: the fused ``[G, U]`` input only, ``2n`` elements.  Megatron-LM's
      ``SwiGLUFunction`` / ``BiasSwiGLUFunction`` (``megatron/core/fusions/fused_bias_swiglu.py``,
      ``bias_swiglu_impl``) ``save_for_backward(input)`` and ``swiglu_back`` rebuilds
      ``silu(G)`` from the ``sigmoid(G)`` that ``act'(G)`` needs anyway (the FLOPs above count a
      non-linearity's derivative inside the backward's products, so they do not change);
      Transformer Engine's ``LayerNormMLP`` saves the fc1 output and the fc2 input alike.
    * ``"eager"``: ``G``, ``U`` and ``act(G)``, ``3n``: PyTorch eager autograd (``silu`` saves
      its input, the product both operands; ``tests/test_saved_tensors_hf.py``).
    """
    b, l, f, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (f, "f"), (es, "es")))
    n = b * l * f
    kept = 2 * n if conv.get(conventions).gated_activation == "fused" else 3 * n
    return make_cost(name, "vector", flops_fwd=2 * n, flops_bwd=3 * n, act_in=2 * n * es,
                     act_out=n * es, act_buffer=kept * es, act_grads=3 * n * es)


def rotary(b, l, heads, q, *, es=2, name="rotary") -> Cost:
    """Rotary position embedding of ``heads`` heads of ``(b, l, q)``: ``x cos + rot(x) sin``.

    ``n = b*l*heads*q``; 2 multiplies and an add per element each way (the
    backward rotates by minus the angle): ``3n``.  No parameters; nothing kept
    (the angles are recomputed from positions).  The backward's ``3n`` is activation
    gradient (``flops_wgrad = 0``).
    """
    b, l, heads, q, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (heads, "heads"), (q, "q"), (es, "es")))
    n = b * l * heads * q
    return make_cost(name, "vector", flops_fwd=3 * n, flops_bwd=3 * n, act_in=n * es,
                     act_out=n * es, act_buffer=0, act_grads=2 * n * es)


def add(b, l, x, *, es=2, name="add") -> Cost:
    """Element-wise sum of two ``(b, l, x)`` tensors (residual, position embedding):
    ``b*l*x`` adds forward; the backward passes ``dY`` to both inputs unchanged (no FLOPs,
    so none of either part: ``flops_wgrad = 0``)."""
    b, l, x, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (x, "x"), (es, "es")))
    n = b * l * x
    return make_cost(name, "vector", flops_fwd=n, flops_bwd=0, act_in=n * es, act_in_other=n * es,
                     act_out=n * es, act_buffer=0, act_grads=n * es)
