"""Routing primitives of a mixture-of-experts layer: the router's probabilities and top-k
weights, the copy of each token to its experts (``permute``) and back (``combine``), the regrouping
of the rows a rank receives by local expert (``sort_chunks``), and the
experts' products grouped over several weight matrices (``grouped_linear``).

``t`` is the number of tokens a device routes, ``E`` the routed experts, ``k`` the experts
each token goes to.  Choosing the top ``k`` of ``E`` scores compares and moves values; it
does no floating-point arithmetic and counts no FLOPs here.
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost import conventions as conv
from symbolic_cost.cost import Cost, exact, make_cost
from symbolic_cost.ops.matmul import linear
from symbolic_cost.ops.pointwise import gelu, softmax
from symbolic_cost.checks import InputError

ROUTERS = ("softmax", "sigmoid", "topk_softmax", "topk_sigmoid", "sparsemixer")
"""How a router turns its ``E`` logits per token into scores: a softmax over the experts
(Mixtral, Qwen-MoE, DeepSeek-V2), an element-wise sigmoid (DeepSeek-V3), either over the
``k`` largest logits only, after choosing them (a softmax: GPT-OSS, Granite MoE; a sigmoid:
Llama 4), or SparseMixer's ``k`` softmaxes over the experts, one per choice, each over the
logits near the best remaining one (Phi-3.5-MoE; its sampling and straight-through gradient
are comparisons and copies, not counted)."""


def router_probabilities(tokens, experts, *, kind="softmax", top_k=None, es=2, conventions=conv.DEFAULT,
                         name="router_probs") -> Cost:
    """Scores of ``tokens`` rows of ``experts`` logits (of their ``top_k`` chosen ones for the
    ``topk_`` kinds): ``ops.softmax`` over each row (``top_k`` times for ``sparsemixer``), or
    ``ops.gelu``'s one FLOP per element each way for a sigmoid.  Keeps its output or input.
    No parameters (the router's weights are its ``linear`` row): the backward is all activation
    gradient (``flops_wgrad = 0``).

    >>> router_probabilities(4, 8).flops_fwd       # 2 x 32 + 4 rows x 7 adds
    92
    >>> router_probabilities(4, 8, kind="topk_softmax", top_k=2).flops_fwd     # 2 x 8 + 4 x 1
    20
    >>> router_probabilities(4, 8, kind="topk_sigmoid", top_k=2).flops_fwd     # 4 x 2
    8
    """
    if kind not in ROUTERS:
        raise InputError(f"router must be one of {', '.join(ROUTERS)}, got {kind!r}", "router")
    if kind == "sparsemixer":
        return softmax(1, tokens * exact(top_k, "top_k"), 1, l_kv=experts, es=es, conventions=conventions, name=name)
    width = top_k if kind.startswith("topk_") else experts
    if kind.endswith("sigmoid"):
        return gelu(1, tokens, width, es=es, conventions=conventions, name=name)
    return softmax(1, tokens, 1, l_kv=width, es=es, conventions=conventions, name=name)


def topk_weights(tokens, k, *, normalise=False, scale=False, es=2, name="router_topk") -> Cost:
    """The ``k`` chosen scores of each token, renormalised to sum to one (``normalise``:
    ``k - 1`` adds and ``k`` divides forward; backward ``dx_j = (dy_j - sum_i dy_i y_i) / S``,
    ``4k - 1`` per token) and multiplied by a constant (``scale``: ``k`` multiplies each way).
    Keeps the ``t k`` chosen weights.  No parameters (the scale is a constant): the backward
    is all activation gradient (``flops_wgrad = 0``).

    >>> topk_weights(10, 2, normalise=True, scale=True).flops_bwd     # 10 x (7 + 2)
    90
    """
    tokens, k, es = exact(tokens, "tokens"), exact(k, "k"), exact(es, "es")
    fwd = (2 * k - 1 if normalise else 0) + (k if scale else 0)
    bwd = (4 * k - 1 if normalise else 0) + (k if scale else 0)
    n = tokens * k
    return make_cost(name, "vector", flops_fwd=tokens * fwd, flops_bwd=tokens * bwd, act_in=n * es,
                     act_out=n * es, act_buffer=n * es, act_grads=2 * n * es)


def permute(tokens, k, width, rows=None, *, es=2, name="dispatch") -> Cost:
    """Copy each of ``tokens`` rows of ``width`` values to its ``k`` experts, grouped by expert:
    ``rows`` buffer rows out (default ``t k``; more when padded to a capacity).  No arithmetic
    forward; backward sums the ``k`` gradient copies of each token, ``t (k - 1) width`` adds.
    Keeps nothing (the routing indices are small and not counted).  No parameters: the
    backward's adds are activation gradient (``flops_wgrad = 0``).

    >>> permute(6, 2, 4).flops_bwd
    24
    """
    tokens, k, width, es = exact(tokens, "tokens"), exact(k, "k"), exact(width, "width"), exact(es, "es")
    rows = tokens * k if rows is None else exact(rows, "rows")
    return make_cost(name, "vector", flops_fwd=0, flops_bwd=tokens * (k - 1) * width, act_in=tokens * width * es,
                     act_out=rows * width * es, act_buffer=0, act_grads=(rows + tokens) * width * es)


def sort_chunks(rows, width, *, es=2, runs=1, name="dispatch_sort") -> Cost:
    """Reorder ``rows`` rows of ``width`` values by chunk, without arithmetic: Megatron-Core's
    all-to-all token dispatcher receives a rank's rows grouped by the rank that sent them and
    regroups them by local expert for the grouped products (``sort_chunks_by_idxs``, its
    "permutation 2", after the all-to-all), and sorts the experts' outputs back before the
    reverse all-to-all.  Forward reads and writes every row; backward sorts the gradient back
    (a read and a write).  Keeps nothing (the chunk sizes are small and not counted).  ``runs``
    (0 or 1, or an expression of those values): whether it runs at all (``Cost.runs``); its bytes
    are counted that many times, and the time models scale its kernel's launch by it.

    >>> sort_chunks(6, 4).mem_fwd, sort_chunks(6, 4).mem_bwd, sort_chunks(6, 4).act_buffer
    (96, 96, 0)
    >>> sort_chunks(6, 4, runs=0).mem_fwd, sort_chunks(6, 4, runs=0).runs
    (0, 0)
    """
    rows, width, es, runs = exact(rows, "rows"), exact(width, "width"), exact(es, "es"), exact(runs, "runs")
    moved = runs * rows * width * es
    return replace(make_cost(name, "vector", flops_fwd=0, flops_bwd=0, act_in=moved, act_out=moved, act_buffer=0,
                             act_grads=2 * moved), runs=runs)


def combine(tokens, k, width, *, es=2, name="combine") -> Cost:
    """``y = sum_j w_j x_j``: each token's ``k`` expert outputs of ``width`` values weighted by
    its routing weights and summed: ``t k width`` multiplies and ``t (k - 1) width`` adds.
    Backward ``dx_j = w_j dy`` (``t k width``) and ``dw_j = <dy, x_j>`` (``t k (2 width - 1)``).
    Keeps the expert outputs and the weights.  With ``k = 1`` it is a gate scaling a branch
    (Qwen-MoE's shared expert).  The routing weights are activations (the router's output),
    not parameters: both gradients are activation gradient (``flops_wgrad = 0``).

    >>> combine(1, 2, 3).flops_fwd, combine(1, 2, 3).flops_bwd
    (9, 16)
    """
    tokens, k, width, es = exact(tokens, "tokens"), exact(k, "k"), exact(width, "width"), exact(es, "es")
    copies = tokens * k * width
    return make_cost(name, "vector", flops_fwd=tokens * width * (2 * k - 1), flops_bwd=tokens * k * (3 * width - 1),
                     act_in=copies * es, act_in_other=tokens * k * es, act_out=tokens * width * es,
                     act_buffer=(copies + tokens * k) * es, act_grads=(copies + tokens * width + tokens * k) * es)


def grouped_linear(rows, e_in, e_out, groups, *, bias=False, es=2, conventions=conv.DEFAULT,
                   name="expert_fc1") -> Cost:
    """``rows`` token rows through ``groups`` weight matrices ``(e_in, e_out)``, each with an
    ``e_out`` bias when ``bias`` (GPT-OSS's experts), each row through one of them (a grouped
    GEMM): the FLOPs, saved input and gradient traffic of ``ops.linear`` over all the rows, and
    the weights of every group.  Split of the backward as ``ops.linear``'s over the rows:
    ``dX`` is activation gradient, ``matmul_flops(rows, e_out, e_in)``; the groups' ``dW``
    (one ``(e_in, rows_g) x (rows_g, e_out)`` product each, ``matmul_flops(e_in, rows, e_out)``
    counted as one product over all the rows) and ``dB`` (``rows e_out`` adds) are weight gradient.

    >>> grouped_linear(10, 4, 3, 5).weights, grouped_linear(10, 4, 3, 5, bias=True).weights
    (120, 150)
    """
    one = linear(1, rows, e_in, e_out, bias=bias, es=es, conventions=conventions, name=name)
    per_group = exact(e_in, "e_in") * exact(e_out, "e_out") + (exact(e_out, "e_out") if bias else 0)
    weights = exact(groups, "groups") * per_group * exact(es, "es")
    return make_cost(name, "matrix", flops_fwd=one.flops_fwd, flops_bwd=one.flops_bwd, flops_wgrad=one.flops_wgrad,
                     act_in=one.act_in, act_out=one.act_out, act_buffer=one.act_buffer, act_grads=one.act_grads,
                     weights=weights,
                     gemms=tuple(replace(g, groups=exact(groups, "groups")) for g in one.gemms))
