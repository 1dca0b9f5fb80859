"""The mixture-of-experts block: a router sends each token to ``k`` of ``E`` routed experts
(and every token through the shared experts), under tensor, sequence and expert parallelism.

Layout (Megatron-LM's all-to-all token dispatcher, with its "parallel folding" of the expert
grid onto the tensor and data-parallel ranks)::

    (b, l/s, e) --router, top-k--> permute --A2A over ep--> [AG over etp] --> sort --> experts
    (b, l/s, e) <--combine---- unpermute <--A2A over ep--- [RS over etp] <--- sort <---

* Each device routes the ``t = b l / s`` tokens of its sequence shard (under context
  parallelism ``l`` is the rank's ``l/cp`` tokens of a sequence, ``parallel.expert``); with tensor parallelism
  the layer needs sequence parallelism (``s1 = m1``, as Megatron-LM requires), so no token is
  routed twice.
* The ``E`` experts are split over ``ep`` ranks (``E/ep`` each, ranks ``etp`` apart); each
  expert's width ``f_x`` is split over ``etp`` ranks (expert tensor parallelism, adjacent ranks).
  The all-to-all (``dispatch``) sends every routed copy to the rank of its expert; the ``etp``
  ranks of an expert then allgather their tokens and reduce-scatter the outputs; the reverse
  all-to-all (``combine``) brings them home.  A rank with several experts regroups what it
  receives by expert and sorts the outputs back (``dispatch_sort``, ``combine_sort``:
  Megatron-Core's ``sort_chunks_by_idxs``; a flex dispatcher permutes once, in ``dispatch``).
  Backward runs the mirror images (an all-to-all for each all-to-all, a reduce-scatter for the
  allgather and the reverse).
* The router and the shared experts' gate are replicated (computed on the local shard); the
  shared experts are a tensor-parallel MLP of width ``f_s`` (allgather in, reduce-scatter out).
* Routing is token-balanced by default: the busiest rank receives ``t k`` rows.  ``imbalance``
  names how many times the mean its experts receive (``1 <= imbalance <= ep``; one rank holds
  every expert when ``ep = 1``).  A ``capacity_factor`` ``C`` pads (or drops) every expert's
  rows from every rank to ``ceil(C t k / E)`` (GShard, Switch; Megatron-LM's
  ``--moe-expert-capacity-factor`` with ``--moe-pad-expert-input-to-capacity``); ``None`` is
  dropless.

Serving under plain tensor parallelism (``replicated=True``, vLLM's fused MoE with or without
its expert parallelism): no sequence parallelism, so every one of the ``m1`` ranks holds the
same ``t = b l`` tokens and routes them alike.  The expert grid is the tensor group
(``ep etp = m1``); each rank picks, without any exchange, the rows routed to its ``E/ep``
experts (``t k / ep`` balanced, ``imbalance`` times that on the busiest rank, or
``E/ep ceil(C t k / E)`` with a capacity), runs its ``f_x/etp`` slices on them, and the
partial outputs of the ``m1`` ranks are summed by one allreduce of ``(b, l, e)`` (together
with the shared experts' partial output, when there are any), as a tensor-parallel MLP's.

The backward splits row by row (``Cost.flops_wgrad``): the weight gradients are the router's
``dW`` (and bias), the experts' ``dW`` (``ops.routing.grouped_linear``), the shared experts'
and their gate's ``dW`` and the norm's gain; everything else is activation gradient: every
``dX``, the router's probabilities and top-k weights, ``dispatch``'s sums of the ``k`` copies,
``combine``'s gradients (the routing weights are activations), and the adds the all-to-alls'
reductions count.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Eq, Expr, Piecewise, ceiling, floor, sympify

from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.graphs import check_fixed_shapes
from symbolic_cost.blocks.layout import NORMS, Layout
from symbolic_cost.blocks.wiring import Experts, Residual, Run, check_dispatcher
from symbolic_cost.checks import InputError, check_rules, count, counts, positive_dims
from symbolic_cost.cost import collective, exact
from symbolic_cost.rounding import round_down
from symbolic_cost.ops import add, gated, gelu, linear
from symbolic_cost.ops.routing import (ROUTERS, clamped_halves, combine, grouped_linear, permute, router_probabilities,
                                       sort_chunks, topk_weights, weighted_bias)

EXPERT_ROWS = ("expert_fc1", "expert_fc2")
"""Rows whose weights are routed experts (sharded over expert data parallelism)."""
EXPERT_COMM_ROWS = ("dispatch", "combine")
"""Rows that carry the expert-parallel collectives."""
ROUTED_ROWS = ("router", "router_probs", "router_topk", "dispatch", "dispatch_sort", "expert_fc1", "expert_clamp",
               "expert_act", "expert_fc2", "expert_bias", "combine_sort", "combine")
"""Rows of the router and the routed experts, from the router's product to the combine."""
SHARED_ROWS = ("shared_fc1", "shared_act", "shared_fc2", "shared_gate", "shared_gate_act", "shared_gate_scale")
"""Rows of the shared experts and their gate (Megatron-Core's ``SharedExpertMLP``)."""
MOE_RULES = (("ep", "experts"), ("etp", "expert_f"), ("m1", "shared_f"))
"""``(divisor, dividend)``: whole experts per rank, whole expert slices, whole shared slices."""


@dataclass(frozen=True)
class MoE:
    """A mixture-of-experts MLP: ``experts`` routed experts of width ``expert_f``, ``top_k`` per
    token, shared experts of total width ``shared_f`` (0: none) with an optional sigmoid gate
    (Qwen-MoE), the router's scores (``ROUTERS``) and whether the chosen weights are
    renormalised (``normalise``) or scaled by a constant (``scale``); ``router_bias`` and
    ``expert_bias`` put biases on the router and on both products of every expert (GPT-OSS);
    ``clamp``: the experts' gated unit clamps its gate and value (GPT-OSS's ``swiglu_limit``,
    Megatron-Core's ``activation_func_clamp_value``).

    Which layers are MoE: layer ``i`` (0-based) is when ``i >= first_dense``,
    ``i % every == phase`` and ``i`` is not in ``dense_layers``; the others are dense MLPs.
    """

    experts: Expr
    top_k: Expr
    expert_f: Expr
    shared_f: Expr = 0
    shared_gate: bool = False
    router: str = "softmax"
    normalise: bool = False
    scale: bool = False
    first_dense: Expr = 0
    every: int = 1
    phase: int = 0
    dense_layers: tuple = ()
    router_bias: bool = False
    expert_bias: bool = False
    clamp: bool = False

    def __post_init__(self):
        if self.router not in ROUTERS:
            raise InputError(f"moe router must be one of {', '.join(ROUTERS)}, got {self.router!r}", "router")
        count(self.phase, "phase", minimum=0, maximum=count(self.every, "every") - 1)
        sizes = positive_dims(experts=self.experts, top_k=self.top_k, expert_f=self.expert_f)
        counts(shared_f=self.shared_f, first_dense=self.first_dense)
        k, experts = sizes["top_k"], sizes["experts"]
        if (experts - k).is_negative:
            raise InputError(f"moe top_k must be at most experts, got top_k={k}, experts={experts}", "top_k")

    def layers(self, depth) -> Expr:
        """How many of the first ``depth`` layers are MoE layers.

        >>> MoE(64, 6, 1408, first_dense=1).layers(27), MoE(8, 2, 64, every=2, phase=1).layers(5)
        (26, 2)
        """
        depth, first = positive_dims(n_layers=depth)["n_layers"], exact(self.first_dense, "first_dense")
        if depth.is_number and first.is_number:     # counted, not walked (a walk takes as long as depth)
            first = min(first, depth)
            count = floor((depth - 1 - self.phase) / self.every) - floor((first - 1 - self.phase) / self.every)
            return count - sum(1 for i in set(self.dense_layers) if first <= i < depth and i % self.every == self.phase)
        count = floor((depth - 1 - self.phase) / self.every) - floor((first - 1 - self.phase) / self.every)
        return count - sum(1 for i in self.dense_layers if i >= first and i % self.every == self.phase)

    def is_moe(self, i: int) -> bool:
        """Whether layer ``i`` (0-based) is an MoE layer (numbers only; see the class docstring).

        >>> [MoE(8, 2, 64, first_dense=1, every=2).is_moe(i) for i in range(4)]
        [False, False, True, False]
        """
        return i >= self.first_dense and i % self.every == self.phase and i not in self.dense_layers


def routed_rows(tokens, experts, k, ep=1, capacity_factor=None, imbalance=1) -> Expr:
    """Token rows the experts of the busiest expert-parallel rank receive from its ``ep`` group
    (each rank routing ``tokens``): ``E ceil(C t k / E)`` with a capacity factor ``C``; dropless,
    ``imbalance x t k`` (exactly ``t k`` when one rank holds every expert).

    >>> routed_rows(100, 8, 2), routed_rows(100, 8, 2, 4, imbalance=2), routed_rows(100, 8, 2, capacity_factor=1)
    (200, 400, 200)
    """
    tokens, experts, k = exact(tokens, "tokens"), exact(experts, "experts"), exact(k, "top_k")
    if capacity_factor is not None:
        factor = exact(capacity_factor, "capacity_factor")
        _check_capacity(factor, experts, k)
        return experts * ceiling(factor * tokens * k / experts)
    ep, load = exact(ep, "ep"), exact(imbalance, "imbalance")
    if ep == 1 or load == 1:
        return tokens * k
    if load.is_number and ep.is_number and not 1 <= load <= ep:
        raise InputError(f"expert_imbalance must be between 1 and ep (the busiest rank receives at most every "
                         f"routed token of its group), got expert_imbalance={load}, ep={ep}", "expert_imbalance")
    return tokens * k * (load if ep.is_number else Piecewise((1, Eq(ep, 1)), (load, True)))


def _check_capacity(factor, experts, k) -> None:
    """Refuse a capacity factor ``C`` past ``E / k``: an expert's capacity ``ceil(C t k / E)``
    would pass the ``t`` tokens it routes from, and an expert receives each token at most once
    (Megatron-Core keeps the top ``capacity`` of the ``t`` tokens, ``torch.topk`` over the tokens,
    which refuses more); symbols pass.

    >>> _check_capacity(4, 8, 2)
    >>> _check_capacity(5, 8, 2)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: capacity_factor must be at most experts / top_k (8 / 2 = 4: a capacity of ceil(C t k / E) past the t tokens routed, where an expert receives each token at most once), got capacity_factor=5
    """
    most = sympify(experts) / sympify(k)
    if (sympify(factor) - most).is_positive:
        raise InputError(f"capacity_factor must be at most experts / top_k ({experts} / {k} = {most}: a capacity of "
                         f"ceil(C t k / E) past the t tokens routed, where an expert receives each token at most "
                         f"once), got capacity_factor={factor}", "capacity_factor")


def moe(b, l, e, spec: MoE, m1=1, s1=1, *, experts: Experts | None = None, gated_act=True, bias=False,
        residual: Residual | None = None, run: Run | None = None) -> Block:
    """The MoE block on the busiest device (see the module docstring for the layout): what the
    experts are is ``spec`` (a ``MoE``), how they are placed and fed ``experts`` (an
    ``Experts``: ``ep``, ``etp``, capacity, imbalance, replicated tokens).

    Rows: ``{norm}_norm_2``, ``router (e -> E)``, ``router_probs``, ``router_topk``,
    ``dispatch``, ``dispatch_sort``, ``expert_fc1``, ``expert_clamp``, ``expert_act``,
    ``expert_fc2``, ``expert_bias`` (``E/ep`` experts of width ``f_x/etp`` on ``etp`` x the rows
    received), ``combine_sort``, ``combine`` (the two sorts only under the all-to-all dispatcher,
    ``_sorts``; the clamp, for a ``clamp``-ed gated unit, and the bias, for ``expert_bias``, only
    where Megatron-Core's ``TEGroupedMLP`` runs them outside its kernels, ``Experts.kernels``:
    ``ops.routing.clamped_halves``, ``ops.routing.weighted_bias``); with shared experts
    ``shared_fc1``, ``shared_act``, ``shared_fc2`` (``bias`` on these three), then (Qwen-MoE)
    ``shared_gate``, ``shared_gate_act``, ``shared_gate_scale``, and ``moe_sum``; then the
    closing dropout (or residual add).  ``residual`` (a ``blocks.wiring.Residual``, default
    RMS norm): the norm kind and the closing dropout (``dropouts=False``: the residual add);
    ``run`` (a ``Run``): the element sizes and conventions.

    >>> from symbolic_cost.symbols import b, l, e
    >>> block = moe(b, l, e, MoE(8, 2, 14336), experts=Experts(ep=8))
    >>> block["expert_fc1"].weights / 2 == e * 2 * 14336     # one expert a rank, gated
    True
    """
    placed, residual, run = _placed(experts), residual or Residual(norm="rms"), run or Run()
    check_dispatcher(placed)
    check_fixed_shapes(run.graphs, placed.capacity_factor)
    _alone(residual)
    dims = dict(b=b, l=l, e=e, m1=m1, s1=s1, ep=placed.ep, etp=placed.etp, experts=spec.experts, top_k=spec.top_k,
                expert_f=spec.expert_f, **({"shared_f": spec.shared_f} if sympify(spec.shared_f) != 0 else {}))
    at = Layout.of(dims, run.es, run.es_mask, run.conventions)
    dims.update(check_rules(dims, MOE_RULES))
    tokens, k, experts = at.b * at.l / at.s, dims["top_k"], dims["experts"]
    ep, etp, width = dims["ep"], dims["etp"], dims["expert_f"] / dims["etp"]
    received = routed_rows(tokens, experts, k, ep, placed.capacity_factor, placed.imbalance)
    if placed.replicated:
        _check_replicated(at, ep, etp)
        received = through = received / ep
        exchange = {"dispatch": at.reduce_to_shards("bwd"),
                    "combine": [] if "shared_f" in dims else at.reduce_to_shards("fwd")}
    else:
        check_sequence_parallel(at.m1, at.s)
        routing = (experts, k) if placed.dispatcher == "flex" else None
        through, exchange = etp * received, _exchange(at, received * at.e, ep, etp, routing)
    sent = tokens * k if placed.capacity_factor is None and not placed.replicated else received
    sorts = [] if placed.replicated or placed.dispatcher != "alltoall" else _sorts(at, through, experts / ep)
    rows = _norm(at, residual.norm, "shared_f" in dims) + [
             linear(at.b, at.l / at.s, at.e, experts, bias=spec.router_bias, name="router", **at.kw),
             router_probabilities(tokens, experts, kind=spec.router, top_k=k, **at.kw),
             topk_weights(tokens, k, normalise=spec.normalise, scale=spec.scale, es=at.es)]
    rows.append(at.attach(permute(tokens, k, at.e, sent, es=at.es), exchange["dispatch"]))
    rows += sorts[:1]
    megatron = placed.kernels == "megatron-core"      # TEGroupedMLP: a cuBLAS GEMM a local expert
    rows.append(replace(grouped_linear(through, at.e, (2 if gated_act else 1) * width, experts / ep,
                                       bias=spec.expert_bias, name="expert_fc1", **at.kw), kernel_per_group=megatron))
    if megatron and spec.clamp and gated_act:     # redone with the activation, inside its recomputation
        rows.append(replace(clamped_halves(through, width, es=at.es), recompute="activation"))
    rows += [replace((gated if gated_act else gelu)(1, through, width, name="expert_act", **at.kw),
                     recompute="activation"),     # activation recomputation redoes it, rebuilding fc2's input
             replace(grouped_linear(through, width, at.e, experts / ep, bias=spec.expert_bias, name="expert_fc2",
                                    **at.kw), rebuilt="activation", kernel_per_group=megatron)]
    if megatron and spec.expert_bias:
        rows.append(weighted_bias(through, at.e, es=at.es))
    rows += sorts[1:]
    rows.append(at.attach(combine(tokens, k, at.e, es=at.es), exchange["combine"]))
    if "shared_f" in dims:
        rows += _shared(at, dims["shared_f"], spec.shared_gate, gated_act, bias, placed.replicated)
    rows.append(at.closing_dropout("dpr2", residual.dropouts))
    return Block("moe", tuple(rows), dims, at.conventions)


def graphed_rows(block: Block, scopes, dispatcher: str) -> list[bool]:
    """Which rows of an MoE ``block`` a CUDA graph of ``scopes`` captures (``blocks.graphs``):
    every row under ``moe``; under ``moe_router`` the rows before ``dispatch`` (the norm, the
    router and its top-k), and with ``moe_preprocess`` also ``dispatch``, whose permute the
    all-to-all dispatcher runs in its preprocessing (the flex dispatchers permute inside their
    dispatch kernel, not captured).  Shared experts stay outside (the router's graph holds them
    only without their overlap, which this leaves eager: an assumption)."""
    if "moe" in scopes or "full_iteration" in scopes:
        return [True] * len(block.rows)
    if "moe_router" not in scopes:
        return [False] * len(block.rows)
    last = block.names.index("dispatch")
    if "moe_preprocess" in scopes and dispatcher == "alltoall":
        last += 1
    return [i < last for i in range(len(block.rows))]


def _sorts(at: Layout, rows, local) -> list:
    """``dispatch_sort`` and ``combine_sort``: Megatron-Core's all-to-all dispatcher regroups the
    ``rows`` a rank's experts take (after the all-to-all and the ``etp`` allgather) from by-sender
    to by-expert, and sorts the experts' outputs back before the reverse exchange
    (``ops.routing.sort_chunks``), where the rank holds more than one expert (``local = E/ep``, a
    whole number: ``1 - floor(1/local)`` is 0 for one, 1 for more, a symbol's too; written so, not
    as ``Min(1, local - 1)``, whose sign every maximum over the rows would then ask, slowing every
    symbolic build).  The flex dispatchers (DeepEP, HybridEP) take the routing
    itself and permute once, in ``dispatch``."""
    runs = 1 - round_down(1 / local)      # SymPy's ``floor`` would ask whether ``ep/E`` is whole
    return [sort_chunks(rows, at.e, es=at.es, runs=runs, name="dispatch_sort"),
            sort_chunks(rows, at.e, es=at.es, runs=runs, name="combine_sort")]


def _placed(experts) -> Experts:
    """``experts`` as ``Experts`` (``None``: one rank holds every expert, dropless, balanced)."""
    if experts is None:
        return Experts()
    if not isinstance(experts, Experts):
        raise InputError(f"experts must be a blocks.wiring.Experts, got {experts!r}", "experts")
    return experts


def _alone(residual: Residual) -> None:
    """Refuse the placements a mixture of experts does not model (``transformer_layer``
    refuses it in a parallel layer)."""
    for name in ("post_norm", "branch", "shared_input"):
        if getattr(residual, name):
            raise InputError(f"residual {name} is not modelled for a mixture of experts "
                             f"(it closes its own residual branch)", name)


def _check_replicated(at: Layout, ep, etp) -> None:
    """Replicated tokens: no sequence shards, and the expert grid is the tensor group."""
    if at.s != 1:
        raise InputError(f"s1 must be 1 when every tensor rank routes the same tokens (replicated), got s1={at.s}",
                         "s1")
    check_tensor_group_grid(ep, etp, at.m1)


def check_tensor_group_grid(ep, etp, m1, model: str = "") -> None:
    """Replicated tokens (serving: every tensor rank routes the same tokens) need the expert
    grid to be the tensor group, ``ep etp = m1`` (when decidable); ``model`` names the model
    in the message.  The one home of this refusal (``inference.serving.check_experts`` too)."""
    if (ep * etp - m1).is_number and ep * etp != m1:
        raise InputError(f"ep x etp must equal m1{model} when the tensor ranks share their tokens (serving without "
                         f"sequence parallelism: the m1 ranks split the experts among them, etp=m1 slicing every "
                         f"expert, ep=m1 spreading whole experts), got ep={ep}, etp={etp}, m1={m1}", "ep x etp")


def check_sequence_parallel(m1, s1) -> None:
    """Megatron-LM: MoE with tensor parallelism needs sequence parallelism (``s1 = m1``)."""
    if m1 != 1 and (m1 - s1).is_number and m1 != s1:
        raise InputError(f"s1 must equal m1 in a mixture-of-experts layer under tensor parallelism "
                         f"(got m1={m1}, s1={s1}): each device routes its own sequence shard, "
                         f"as Megatron-LM requires sequence parallelism with MoE", "s1")


def _norm(at: Layout, kind: str, shared: bool):
    """The layer's norm on the sequence shard; the allgather into the tensor region only
    feeds shared experts (the router works on the shard).  None under ``norm_placement=
    "attention"``: the attention block holds it."""
    if at.conventions.norm_placement == "attention":
        return []
    name = f"{kind}_norm_2"
    return [at.norm(name, kind) if shared else NORMS[kind](at.b, at.l / at.s, at.e, name=name, **at.kw)]


def _exchange(at: Layout, elements, ep, etp, routing=None) -> dict:
    """The expert-parallel collectives of ``dispatch`` and ``combine``: all-to-all of the
    busiest rank's ``elements`` over ``ep`` ranks ``etp`` apart (``routing``: ``(E, k)`` for a
    dispatcher that sends a token once to each NVLink domain, ``Collective.routing``); allgather
    (reduce-scatter) of the ``etp`` ranks' rows over adjacent ranks; backward the mirror images."""
    def a2a(pass_):
        return collective("alltoall", elements, at.es, ep, pass_, at.conventions, stride=etp, routing=routing)

    def etp_group(kind, pass_):
        return collective(kind, etp * elements, at.es, etp, pass_, at.conventions)
    return {"dispatch": a2a("fwd") + etp_group("allgather", "fwd") + etp_group("reducescatter", "bwd") + a2a("bwd"),
            "combine": etp_group("reducescatter", "fwd") + a2a("fwd") + a2a("bwd") + etp_group("allgather", "bwd")}


def _shared(at: Layout, width, gate: bool, gated_act: bool, bias, replicated=False):
    """Shared experts as one tensor-parallel MLP of ``width`` (split over ``m1``), an optional
    sigmoid gate per token (Qwen-MoE: ``linear (e -> 1)``, sigmoid, scale), the sum with the
    routed output; with ``replicated`` tokens the sum of the two partial outputs is reduced once."""
    b, l, e, m1, tokens = at.b, at.l, at.e, at.m1, at.l / at.s
    fc1 = linear(b, l, e, (2 if gated_act else 1) * width / m1, bias=bias, name="shared_fc1", **at.kw)
    fc2 = replace(linear(b, l, width / m1, e, bias=bias, name="shared_fc2", **at.kw), rebuilt="activation")
    rows = [fc1 if replicated else at.entering(fc1),
            replace((gated if gated_act else gelu)(b, l, width / m1, name="shared_act", **at.kw),
                    recompute="activation"),
            fc2 if replicated else at.leaving(fc2)]
    if gate:
        rows += [linear(b, tokens, e, 1, bias=False, name="shared_gate", **at.kw),
                 gelu(b, tokens, 1, name="shared_gate_act", **at.kw),
                 combine(b * tokens, 1, e, es=at.es, name="shared_gate_scale")]
    total = add(b, tokens, e, name="moe_sum", es=at.es)
    return rows + [at.leaving(total) if replicated else total]
