"""Matrix products: linear layers, attention logits ``QK^T`` and ``AV``.

All three run on matrix (tensor-core) units.  The forward/backward counts
follow from ``matmul_flops`` applied to each product the pass computes; the
set of products, the saved tensors and the gradient traffic are those of the
LBNL 2024 primitives (arXiv 2410.00273), the usual chain-rule accounting.
A backward product that forms a parameter gradient is marked ``grad="weight"``
(``Gemm``); ``product_flops(..., grad="weight")`` sums those, the one rule for the
weight-gradient FLOPs of products (``Cost.flops_wgrad``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Integer, floor

from symbolic_cost import conventions as conv
from symbolic_cost.cost import Cost, Gemm, exact, make_cost
from symbolic_cost.extrema import minimum
from symbolic_cost.checks import InputError, positive, positive_dims


def matmul_flops(m, k, n, conventions=conv.DEFAULT) -> Expr:
    """FLOPs of one ``(m, k) x (k, n)`` product.

    Each of the ``m*n`` outputs takes ``k`` multiplies and ``k - 1`` adds, so the
    exact count is ``m*n*(2k - 1)``; the ``"2mnk"`` convention (PyTorch's
    counter, most papers) counts ``2*m*n*k``.

    >>> from symbolic_cost.symbols import b, e
    >>> matmul_flops(b, e, 3)
    3*b*(2*e - 1)
    >>> matmul_flops(b, e, 3, conv.DEFAULT.but(matmul_flops="2mnk"))
    6*b*e
    """
    m, k, n = exact(m, "m"), exact(k, "k"), exact(n, "n")
    if conv.get(conventions).matmul_flops == "2mnk":
        return 2 * m * n * k
    return m * n * (2 * k - 1)


def _products(fwd, bwd, es, count=1, wgrad=()) -> tuple[Gemm, ...]:
    """The shapes ``(m, k, n)`` of one operation's forward products, its backward products that
    form activation gradients (``bwd``) and those that form parameter gradients (``wgrad``),
    as ``Gemm`` in that order."""
    return tuple(Gemm(pass_, *shape, count=count, element_bytes=es, grad=grad)
                 for pass_, grad, shapes in (("fwd", "input", fwd), ("bwd", "input", bwd), ("bwd", "weight", wgrad))
                 for shape in shapes)


def product_flops(gemms, pass_: str, conventions=conv.DEFAULT, grad=None) -> Expr:
    """FLOPs of the products ``gemms`` runs in ``pass_`` (``matmul_flops`` each, times its count);
    with ``grad`` (``"input"`` or ``"weight"``) only the backward products so marked (``Gemm.grad``).

    >>> gemms = linear(2, 3, 4, 5).gemms          # dX (6, 5) x (5, 4), dW (4, 6) x (6, 5)
    >>> product_flops(gemms, "bwd", grad="input"), product_flops(gemms, "bwd", grad="weight")
    (216, 220)
    """
    return sum((g.count * matmul_flops(g.m, g.k, g.n, conventions) for g in gemms
                if g.pass_ == pass_ and grad in (None, g.grad)), Integer(0))


def linear(b, l, e, f, *, bias=True, es=2, conventions=conv.DEFAULT, name="linear") -> Cost:
    """``Y = X W (+ B)``: ``X (b, l, e)``, ``W (e, f)``, ``B (f)``, ``Y (b, l, f)``.

    Forward: the product ``(b*l, e) x (e, f)`` plus ``b*l*f`` bias adds.
    Backward: ``dX = dY W^T``, a ``(b*l, f) x (f, e)`` product; ``dW = X^T dY``,
    an ``(e, b*l) x (b*l, f)`` product; ``dB``: ``b*l*f`` adds of ``dY`` rows
    into the bias gradient.  Keeps ``X`` for backward.  Gradients read ``dY``
    and write ``dX``: ``(b*l*e + b*l*f)`` elements.  ``bias`` may also give the
    number of bias elements to store (Megatron's training-info tool counts the
    fused QKV bias as ``e`` rather than ``3e``: its ``qkv_bias_elements`` quirk).

    Split of the backward: activation gradient ``dX``, ``matmul_flops(b*l, f, e)``
    (``b*l*e*(2f - 1)``); weight gradient ``dW`` and ``dB``, ``matmul_flops(e, b*l, f)
    + b*l*f`` (``e*f*(2*b*l - 1) + b*l*f``; without a bias the adds go).

    >>> from symbolic_cost.symbols import b, l, e, f
    >>> linear(b, l, e, f).flops_fwd.factor()
    2*b*e*f*l
    >>> linear(b, l, e, f, bias=False).flops_fwd
    b*f*l*(2*e - 1)
    >>> linear(b, l, e, f, bias=False).flops_wgrad
    e*f*(2*b*l - 1)
    """
    b, l, e, f, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (e, "e"), (f, "f"), (es, "es")))
    tokens = b * l
    bias_adds = tokens * f if bias else 0
    bias_elements = (f if bias is True else exact(bias, "bias")) if bias else 0
    weights = (e * f + bias_elements) * es
    gemms = _products([(tokens, e, f)], [(tokens, f, e)], es, wgrad=[(e, tokens, f)])
    return make_cost(
        name, "matrix",
        flops_fwd=product_flops(gemms, "fwd", conventions) + bias_adds,
        flops_bwd=product_flops(gemms, "bwd", conventions) + bias_adds,
        flops_wgrad=product_flops(gemms, "bwd", conventions, grad="weight") + bias_adds,
        act_in=tokens * e * es, act_out=tokens * f * es, act_buffer=tokens * e * es,
        weights=weights, act_grads=(tokens * e + tokens * f) * es, gemms=gemms)


def key_length(l, l_kv):
    """Keys each query attends over, exact: ``l_kv``, or ``l`` (self-attention) when not given."""
    return exact(l, "l") if l_kv is None else exact(l_kv, "l_kv")


@dataclass(frozen=True)
class Chunk:
    """Chunked attention (Llama 4): the sequence is cut into aligned blocks of ``size`` tokens
    and each query attends only the keys of its own block.  Passed as the ``window`` of the
    attention rows; a kernel stores at most ``size`` scores per query, as for a window."""

    size: object

    def __post_init__(self):
        positive_dims(size=self.size)


def stored_keys(keys, window, conventions):
    """Keys per query whose scores a kernel computes and stores: all ``keys``; with a sliding
    ``window`` of ``w`` keys (or a ``Chunk`` of ``w``) and ``window_count="windowed"`` (a
    windowed kernel) ``min(w, keys)``; ``window_count="dense"`` counts all of them (eager
    attention scores every key, then masks)."""
    if window is None or conv.get(conventions).window_count == "dense":
        return keys
    return minimum(exact(window.size if isinstance(window, Chunk) else window, "window"), keys)


def scored_keys(l, keys, causal, conventions, window=None):
    """Keys per query that the FLOP count covers: ``stored_keys``, or with a causal mask and
    ``causal_flops="exact"`` the mean ``(l + 1)/2`` of a query at position ``t`` seeing ``t + 1``;
    in a causal window of ``k = min(w, l)`` keys, query ``t`` sees ``min(t + 1, k)``: the mean
    is ``k - k(k - 1)/(2l)``; in chunks of ``c``, query ``t`` sees ``t mod c + 1``: with
    ``n = floor(l/c)`` whole chunks and ``r = l - n c`` left, the mean is
    ``(n c (c + 1)/2 + r (r + 1)/2) / l``.

    >>> from symbolic_cost.conventions import DEFAULT
    >>> exact_count = DEFAULT.but(causal_flops="exact")
    >>> scored_keys(10, 10, True, exact_count, Chunk(4)), scored_keys(10, 10, True, exact_count, 4)
    (23/10, 17/5)
    """
    l, keys = positive(l, "l"), positive(keys, "keys")        # keys may be a mean (a ring's causal share)
    counted = stored_keys(keys, window, conventions)
    if causal and conv.get(conventions).causal_flops == "exact":
        if keys != l:
            raise InputError("causal counting needs square scores (l_kv = l)", "l_kv")
        if counted == keys:
            return (l + 1) / 2
        if isinstance(window, Chunk):
            c = exact(window.size, "window")
            whole = floor(l / c)
            rest = l - whole * c
            return (whole * c * (c + 1) / 2 + rest * (rest + 1) / 2) / l
        return counted - counted * (counted - 1) / (2 * l)
    return counted


def key_value_heads(h, kv_heads):
    """Key/value heads, exact: ``kv_heads``, or ``h`` (one per query head) when not given."""
    return exact(h, "h") if kv_heads is None else exact(kv_heads, "kv_heads")


def _scores(b, l, q, h, l_kv, kv_heads, causal, es, conventions, window=None):
    """Exact sizes shared by ``logits`` and ``attend``: ``(b, l, q, h, es, keys, kv heads,
    keys counted in FLOPs, b*h, query-side elements, key/value elements, score elements)``;
    a sliding ``window`` bounds the scores per query (``stored_keys``)."""
    b, l, q, h, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (q, "q"), (h, "h"), (es, "es")))
    keys, groups = key_length(l, l_kv), key_value_heads(h, kv_heads)
    return (b, l, q, h, es, keys, groups, scored_keys(l, keys, causal, conventions, window), b * h,
            b * h * l * q, b * groups * keys * q, b * h * l * stored_keys(keys, window, conventions))


def _group_sum(b, h, groups, keys, q):
    """Adds that sum the ``h/kv`` query heads' gradients into each key (or value) head."""
    return b * (h - groups) * keys * q


def logits(b, l, q, h, *, l_kv=None, kv_heads=None, causal=False, window=None, es=2,
           conventions=conv.DEFAULT, name="logits") -> Cost:
    """``A = Q K^T``: ``Q (b, h, l, q)``, ``K (b, kv, l_kv, q)``, ``A (b, h, l, l_kv)``.

    ``q`` is the head dim; ``l_kv`` (default ``l``) the number of keys.
    Forward: ``b*h`` products ``(l, q) x (q, l_kv)``.  Backward: ``dQ = dA K``,
    ``b*h`` products ``(l, l_kv) x (l_kv, q)``, and ``dK = dA^T Q``, ``b*h``
    products ``(l_kv, l) x (l, q)``.  Keeps ``Q`` and ``K``; gradients touch
    ``dQ``, ``dK`` and ``dA``.  The ``1/sqrt(q)`` scale is assumed folded into
    ``Q`` (not counted).  With grouped-query attention (``kv_heads`` < ``h``)
    each K head serves ``h/kv`` query heads: K is smaller and backward sums
    the groups' ``dK``, ``b (h - kv) l_kv q`` adds.  ``causal`` only matters
    for the FLOPs under ``causal_flops="exact"``.  A sliding ``window`` of ``w`` keys computes
    and stores at most ``w`` scores per query (``stored_keys``).  No parameters: all of the
    backward (both products and the group sum) is activation gradient, ``flops_wgrad = 0``.
    """
    b, l, q, h, es, keys, groups, counted, heads, queries, kv, scores = _scores(
        b, l, q, h, l_kv, kv_heads, causal, es, conventions, window)
    gemms = _products([(l, q, counted)], [(l, counted, q), (counted, l, q)], es, heads)
    return make_cost(
        name, "matrix",
        flops_fwd=product_flops(gemms, "fwd", conventions),
        flops_bwd=product_flops(gemms, "bwd", conventions) + _group_sum(b, h, groups, keys, q),
        act_in=queries * es, act_in_other=kv * es, act_out=scores * es,
        act_buffer=(queries + kv) * es, act_grads=(queries + kv + scores) * es, gemms=gemms)


def attend(b, l, q, h, *, l_kv=None, kv_heads=None, causal=False, window=None, es=2,
           conventions=conv.DEFAULT, name="attend") -> Cost:
    """``Y = A V``: ``A (b, h, l, l_kv)``, ``V (b, kv, l_kv, q)``, ``Y (b, h, l, q)``.

    Forward: ``b*h`` products ``(l, l_kv) x (l_kv, q)``.  Backward: ``dA = dY V^T``,
    ``b*h`` products ``(l, q) x (q, l_kv)``; ``dV = A^T dY``, ``b*h`` products
    ``(l_kv, l) x (l, q)``.  Keeps ``A`` and ``V``.  Gradients touch ``dA``,
    ``dV`` and ``dY``; the LBNL 2024 quirk (``attend_grad_both_operands=False``)
    leaves out ``dY``.  Grouped-query attention and ``window`` as in ``logits`` (the group sum is of ``dV``).
    No parameters: all of the backward is activation gradient, ``flops_wgrad = 0``.
    """
    b, l, q, h, es, keys, groups, counted, heads, outputs, values, scores = _scores(
        b, l, q, h, l_kv, kv_heads, causal, es, conventions, window)
    incoming = outputs if conv.get(conventions).attend_grad_both_operands else 0
    gemms = _products([(l, counted, q)], [(l, q, counted), (counted, l, q)], es, heads)
    return make_cost(
        name, "matrix",
        flops_fwd=product_flops(gemms, "fwd", conventions),
        flops_bwd=product_flops(gemms, "bwd", conventions) + _group_sum(b, h, groups, keys, q),
        act_in=scores * es, act_in_other=values * es, act_out=outputs * es,
        act_buffer=(scores + values) * es, act_grads=(scores + values + incoming) * es, gemms=gemms)
