"""Routing primitives of a mixture-of-experts layer: the router's probabilities and top-k
weights, the copy of each token to its experts (``permute``) and back (``combine``), the regrouping
of the rows a rank receives by local expert (``sort_chunks``), the
experts' products grouped over several weight matrices (``grouped_linear``), and the passes
Megatron-Core runs around them outside its kernels (``clamped_halves``, ``weighted_bias``).

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


MEGATRON_LM = "2edffadb528ea07e261b0c02cdc42a7bb9c3197a"
"""The Megatron-LM commit of Megatron-Bridge v0.4.2 (``3rdparty/Megatron-LM``), the release whose
performance summary prints the 26.04.01 container's runs: where ``clamped_halves`` and
``weighted_bias`` read Megatron-Core's expert code."""


def clamped_halves(rows, width, *, es=2, name="expert_clamp") -> Cost:
    """The clamps of a clamped gated unit (GPT-OSS's: the gate at most ``v``, the value within
    ``[-v, v]``) as Megatron-Core runs them, outside its fused activation: the first product's
    output ``(rows, 2 width)`` is cut into ``G, U (rows, width)``, each is clamped by a kernel of
    its own, and the two results are joined again by ``torch.cat`` before the fused, weighted
    quick-GeGLU reads them (``weighted_bias_quick_geglu_impl`` in
    ``megatron/core/fusions/fused_bias_geglu.py`` at ``MEGATRON_LM``; ``TEGroupedMLP.bias_act_func``
    calls it under ``bias_activation_fusion``, which Megatron-Bridge's GPT-OSS provider sets).

    ``n = rows width``.  Forward: each clamp reads and writes its ``n`` (``4n``), the join reads
    and writes ``2n`` (``4n``): ``8n`` elements.  Backward (autograd): each clamp's gradient reads
    its half of ``dY`` and its kept input and writes its ``dX`` (``6n``), and the halves'
    gradients are joined into the product's output gradient (``4n``): ``10n``.  It keeps its
    input, the product's output (``2n``: the clamps' backward reads it; the join's output is the
    activation's input, kept there).  Comparisons only: no FLOPs counted.

    >>> c = clamped_halves(3, 4)
    >>> c.mem_fwd, c.mem_bwd, c.act_buffer, c.flops_fwd
    (192, 240, 48, 0)
    """
    rows, width, es = exact(rows, "rows"), exact(width, "width"), exact(es, "es")
    n = rows * width
    return make_cost(name, "vector", flops_fwd=0, flops_bwd=0, act_in=2 * n * es, act_out=2 * n * es,
                     act_buffer=2 * n * es, act_grads=8 * n * es).plus(mem_fwd=4 * n * es)  # the clamps' outputs, joined


def weighted_bias(rows, width, *, es=2, name="expert_bias") -> Cost:
    """The routed experts' second bias as Megatron-Core adds it: ``expert_fc2`` is built with
    ``skip_bias_add`` and hands its biases back (one a local expert), and ``TEGroupedMLP._apply_bias``
    (``megatron/core/transformer/moe/experts.py`` at ``MEGATRON_LM``) adds each expert's bias,
    weighted by each row's routing probability, to that expert's rows, ``t_i + b_i p_i``, one
    expert at a time, joining the pieces with ``torch.cat``.  The probabilities are in the
    activations' type (the router's logits'; Transformer Engine's fused top-k writes them so), so
    nothing is widened.  The bias's parameters and its add's FLOPs are ``expert_fc2``'s
    (``grouped_linear``'s ``bias``); this row counts the passes over the ``(rows, width)``
    output that running it outside the product costs: bytes only.

    ``N = rows width``.  Forward: ``b_i p_i`` is written (``N``), the add reads ``t_i`` and it
    and writes the sum (``3N``), the join reads and writes (``2N``): ``6N`` elements.  Backward
    (autograd): the bias's gradient ``sum_rows(dY p)`` writes and reads the product and reads
    ``dY`` (``3N``), the probabilities' ``sum_width(dY b)`` likewise (``3N``), and the pieces'
    gradients are joined into the product's output gradient (``2N``): ``8N``.  Keeps the
    probabilities (``rows``).  It runs a few kernels an expert; the time model charges a row one
    launch a pass (``timing.efficiency.launches``), so these launches are under-counted.

    >>> c = weighted_bias(3, 4)
    >>> c.mem_fwd, c.mem_bwd, c.act_buffer, c.weights
    (144, 198, 6, 0)
    """
    rows, width, es = exact(rows, "rows"), exact(width, "width"), exact(es, "es")
    n = rows * width
    return make_cost(name, "vector", flops_fwd=0, flops_bwd=0, act_in=3 * n * es, act_out=3 * n * es,
                     act_buffer=rows * es, act_grads=8 * n * es)


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
