"""Cost of one operation, and Collective, one communication it needs.

Both are immutable records of exact SymPy expressions.  A ``Cost`` counts
FLOPs and bytes, never TFLOP or GB: units belong to tables and reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from sympy import Expr, Integer, Piecewise, Symbol, sympify

from symbolic_cost.bounds import lowest
from symbolic_cost.checks import InputError, exact, positive_dims  # noqa: F401  (the exactness rule, here where Costs use it)
from symbolic_cost.collective_kinds import kind_of, ring_share
from symbolic_cost import sampled

PASSES = ("fwd", "bwd")
ENGINES = ("matrix", "vector")
GRADS = ("input", "weight")
GRAPHED = (None, "captured", "replay")
"""How a row's kernels reach the GPU (``Cost.graph``): launched one by one from the host (``None``), or
captured in a CUDA graph (``"captured"``), the row that starts the graph paying its one replay
(``"replay"``)."""


def _exact_sizes(record, what: str) -> None:
    """Check a record's pass and make its ``_SIZES`` fields exact expressions: none negative, and
    its group (a collective's devices, a grouped product's weights) at least 1 and its element
    size positive where they are numbers (a collective of -2**28 elements took -5 ms; a group of 0
    devices, complex infinity)."""
    if record.pass_ not in PASSES:
        raise InputError(f"{what} pass must be 'fwd' or 'bwd', got {record.pass_!r}", "pass_")
    for name in record._SIZES:
        value = exact(getattr(record, name), name)
        least = 1 if name in ("group", "groups") else 0
        if _negative(value) or (value.is_number and (value < least or name == "element_bytes" and value == 0
                                      or least and not value.is_integer)):
            rule = "positive" if name == "element_bytes" else f"a whole number at least {least}" if least \
                else f"at least {least}"
            raise InputError(f"{what} {name} must be {rule}, got {value}", name)
        object.__setattr__(record, name, value)


def _negative(value) -> bool:
    """Whether SymPy proves ``value`` negative (``is_negative``), asked only where neither its
    lower bound (``bounds.lowest``, read off the tree) nor its exact value at a sample point
    (``sampled.values``: every symbol a positive whole number, as each symbol here may be) shows
    it at least 0 somewhere, either of which rules out a proof: SymPy's assumption query deduces
    every fact of every node of the size, the costliest part of making a record."""
    low = lowest(value)
    if low is not None and low >= 0:
        return False
    if all(_sampled(s) for s in value.free_symbols) and any(v is not None and v >= 0 for v in sampled.values(value)):
        return False
    return bool(value.is_negative)


_RESTRICTED = ("even", "odd", "prime", "composite", "noninteger", "irrational", "transcendental")
"""Assumptions a positive whole number, as ``sampled.POINTS`` give each symbol, may break."""


def _sampled(symbol) -> bool:
    """Whether every positive whole number is a value ``symbol`` may take (its assumptions)."""
    return symbol.is_positive is True and not any(getattr(symbol, f"is_{k}") for k in _RESTRICTED)


def substituted(expr, values: Mapping) -> Expr:
    """``expr`` with ``values`` (symbol -> number or expression) put in, as SymPy's ``subs`` puts
    them.  Where every key is a symbol and every value a number, ``xreplace``: the same expression
    (a number holds no symbol that a later key could replace, so the order ``subs`` takes the keys
    in cannot matter, and a symbol matches only itself), without ``subs`` comparing each key with
    every subexpression, which took most of a substitution of a model's costs.

    >>> from sympy import Max
    >>> from symbolic_cost.symbols import b, l
    >>> substituted(b * l + Max(b, 3), {b: 2, l: 5})
    13
    >>> substituted(b * l, {b: l, l: 3})
    9
    """
    expr = sympify(expr)
    numbers = {key: sympify(value) for key, value in values.items()}
    if all(isinstance(key, Symbol) and value.is_Number for key, value in numbers.items()):
        return expr.xreplace(numbers)
    return expr.subs(values)


def _subs_sizes(record, values: Mapping):
    named = [name for name in (*record._SIZES, "reshard", "reach", "ranks") if getattr(record, name, None) is not None]
    return replace(record, **{name: substituted(getattr(record, name), values) for name in named})


COLLECTIVE_MADE_BY = " (cost.collective(...), or a ModelCost's collectives)"
"""Where a ``Collective`` comes from, for the refusal of anything else where one belongs."""

@dataclass(frozen=True)
class Collective:
    """One communication: ``kind`` over ``group`` devices in pass ``pass_``.

    The logical tensor has ``elements`` values of ``element_bytes`` each (the gathered result,
    or the tensor being reduced).  ``volume`` is the byte count the conventions report: the ring
    share per device by default, the whole tensor for the LBNL 2024 preset.  Time models use
    ``ring_bytes``, which does not depend on the reporting convention.  ``repeats`` counts
    identical collectives run one after another (ring attention passes K and V ``c - 1``
    times); ``volume`` covers all of them.  ``stride`` is the rank distance between members
    (Megatron orders ranks tensor first, then data, then pipeline: a data-parallel group has
    stride ``m1``), so the group spans ``group x stride`` consecutive devices, which decides its link.
    ``reshard``: a re-sharding pair's symbolic sequence degree ``s`` (``blocks.layout.reduce_to_shards``;
    ``s = 1`` makes the two one allreduce, as ``timing.hardware.comm_time`` prices them), else ``None``.
    ``routing``: for an all-to-all of routed tokens whose dispatcher sends a token once to each
    NVLink domain holding one of its experts (``blocks.wiring.Experts.dispatcher`` ``"flex"``),
    the routed experts and the experts a token picks ``(E, k)``; the bytes that cross the network
    follow (``parallel.collectives.network_share``), the volume does not change.
    ``reach``: where the same collective runs at once in side-by-side groups that wait for the
    slowest, the consecutive devices all of them span, which then decides the link in place of
    ``group x stride`` (a pipeline's sends: every stage boundary at once, ``p x stride`` devices,
    so that one boundary between two nodes paces them all), else ``None``.  ``chain``: the repeats
    are sends along a chain, one after another, the ``k``-th between ranks ``k x stride`` and
    ``(k + 1) x stride`` (a served request's hidden states through the pipeline's stages), each
    on the link its own pair crosses (``timing.hardware.comm_time``).  ``ranks``: the share of the
    job's devices that run it (the embedding's and the head's collectives: the first or the last
    pipeline stage's, ``1/p``), for its job total (``models.totals.cluster_volume``).
    """

    kind: str
    elements: Expr
    element_bytes: Expr
    group: Expr
    pass_: str
    volume: Expr
    repeats: Expr = Integer(1)
    stride: Expr = Integer(1)
    reshard: Expr | None = None
    routing: tuple | None = None
    reach: Expr | None = None
    chain: bool = False
    ranks: Expr = Integer(1)

    _SIZES = ("elements", "element_bytes", "group", "volume", "repeats", "stride")

    def __post_init__(self):
        kind_of(self.kind)
        _exact_sizes(self, "collective")
        if self.reach is not None:
            object.__setattr__(self, "reach", exact(self.reach, "reach"))

    @property
    def span(self) -> Expr:
        """Consecutive devices the group spans (``reach`` where it is given), which decide its link."""
        return self.group * self.stride if self.reach is None else self.reach

    @property
    def tensor_bytes(self) -> Expr:
        return self.elements * self.element_bytes

    @property
    def ring_bytes(self) -> Expr:
        """Bytes each device sends in a ring implementation, over all repeats."""
        return self.repeats * ring_share(self.kind, self.group) * self.tensor_bytes

    @property
    def reduction_flops(self) -> Expr:
        """Adds each device performs: a reduce-scatter, allreduce or reduce of ``N``
        elements over ``n`` devices sums ``(n-1)/n * N`` of them on every device
        (a reduce: on average, exactly when the root takes turns)."""
        if kind_of(self.kind).reduces:
            return self.repeats * (self.group - 1) / self.group * self.elements
        return Integer(0)

    def subs(self, values: Mapping) -> "Collective":
        return _subs_sizes(self, values)

    def repeated(self, times) -> "Collective":
        """The same collective run ``times`` times as often (volume scales with it)."""
        return replace(self, repeats=self.repeats * times, volume=self.volume * times)


def collective(kind, elements, es, group, pass_, conventions, repeats=1, stride=1, routing=None,
               reach=None, chain=False) -> list[Collective]:
    """One collective with the volume the conventions report; none when the group is one device.

    This is the one volume rule of the package: ``collective_volume="ring"`` reports
    what one device sends in a ring, ``repeats x ring_share(kind, n) x elements x es``;
    ``"tensor"`` reports the whole tensor ``repeats x elements x es`` (zero when a
    symbolic group turns out to be one device).

    ``routing``: ``Collective.routing`` (an all-to-all of routed tokens deduplicated by domain);
    ``reach``: ``Collective.reach`` (side-by-side groups paced by the slowest); ``chain``:
    ``Collective.chain`` (sends one after another along a pipeline).

    >>> from symbolic_cost.conventions import DEFAULT
    >>> [c.volume for c in collective("allreduce", 100, 2, 4, "fwd", DEFAULT)]
    [300]
    """
    group = positive_dims(group=group)["group"]
    elements, es, repeats = exact(elements, "elements"), exact(es, "es"), exact(repeats, "repeats")
    if group == 1:
        return []
    tensor_bytes = repeats * elements * es
    if conventions.collective_volume == "ring":
        volume = ring_share(kind, group) * tensor_bytes
    elif group.is_number:
        volume = tensor_bytes
    else:  # the whole tensor moves only if there is someone to move it to
        volume = Piecewise((tensor_bytes, group > 1), (0, True))
    return [Collective(kind=kind, elements=elements, element_bytes=es, group=group, pass_=pass_,
                       volume=volume, repeats=repeats, stride=stride, routing=routing, reach=reach,
                       chain=chain)]


@dataclass(frozen=True)
class Gemm:
    """``count`` matrix products ``(m, k) x (k, n)`` that one operation runs in pass ``pass_``
    (``count = b*h`` for the batched products of attention), of ``element_bytes`` values.

    ``grad`` says what a backward product forms: ``"input"``, a gradient of an activation
    (``dX = dY W^T``, both products of attention's backward), or ``"weight"``, a gradient of
    a parameter (``dW = X^T dY``); ``ops.matmul.product_flops`` sums either kind.  A forward
    product keeps the default.  The kernel-level time model (``kernel_time="tiled"``) reads
    the shapes: the tiled traffic of a product depends on them, not only on its FLOPs.  ``groups``:
    the ``k x n`` weights a grouped GEMM's rows spread over (``ops.routing``); its FLOPs are
    counted as one product's, its time as the ``groups`` products a kernel library runs
    (``launched``).
    """

    pass_: str
    m: Expr
    k: Expr
    n: Expr
    count: Expr = Integer(1)
    element_bytes: Expr = Integer(2)
    grad: str = "input"
    groups: Expr = Integer(1)

    _SIZES = ("m", "k", "n", "count", "element_bytes", "groups")

    def __post_init__(self):
        if self.grad not in GRADS:
            raise InputError(f"gemm grad must be 'input' or 'weight', got {self.grad!r}", "grad")
        _exact_sizes(self, "gemm")

    def subs(self, values: Mapping) -> "Gemm":
        return _subs_sizes(self, values)

    def launched(self) -> "Gemm":
        """The products a kernel library runs for this record: itself, or for a grouped GEMM one
        product per weight matrix over that matrix's share of the rows, ``count x groups`` of
        them: ``m/groups`` rows of an activation product (``(m, k) x (k, n)``: forward and
        ``dX``), a ``k/groups``-row reduction of a weight gradient (``dW = X^T dY``, ``(m, k) x
        (k, n)`` with ``k`` the rows).  Rows spread evenly: ``m`` is already the busiest rank's
        rows (``blocks.moe.routed_rows``: imbalance and capacity included).  Transformer Engine's
        ``GroupedLinear`` runs them as one cuBLAS product per expert (``general_grouped_gemm``);
        CUTLASS's and cuBLASLt's grouped kernels as one launch over all of them.  Either way each
        expert's product is tiled on its own rows: few tokens an expert make short, narrow tiles.

        >>> Gemm("fwd", 4096, 2048, 1536, groups=8).launched()
        Gemm(pass_='fwd', m=512, k=2048, n=1536, count=8, element_bytes=2, grad='input', groups=1)
        >>> Gemm("bwd", 2048, 4096, 1536, grad="weight", groups=8).launched().k
        512
        """
        if self.groups == 1:
            return self
        share = {"k": self.k / self.groups} if self.grad == "weight" else {"m": self.m / self.groups}
        return replace(self, count=self.count * self.groups, groups=Integer(1), **share)


@dataclass(frozen=True)
class ScoreShape:
    """The score matrix a fused attention kernel (flash) tiles, for timing the work it executes.

    ``queries`` rows of scores on this device, each counted in the row's FLOPs as ``counted``
    keys (``ops.matmul.scored_keys``: every key, or under ``causal_flops="exact"`` the unmasked
    mean).  ``causal_length``: ``L`` when the queries are spread evenly over a causal square of
    ``L`` tokens (self-attention: ``L = l``; a context-parallel rank's balanced chunks: the
    whole sequence), so the kernel skips the key tiles above the diagonal; ``None`` when every
    query sees its ``counted`` keys (no mask, or a decode step that sees the whole cache).
    ``window``: a causal sliding window's size or an ``ops.matmul.Chunk``.  The tiles that
    follow from it are the time model's (``timing.attention_kernels.executed_keys``): the
    kernel's tile is a property of the kernel, not of the model.  ``head_dim``: the width of the
    products each score runs, the mean of the query and value head dimensions (``None``: timed
    as 128, ``timing.attention_kernels.head_factor``).
    """

    queries: Expr
    counted: Expr
    causal_length: Expr | None = None
    window: object = None
    head_dim: Expr | None = None

    def subs(self, values: Mapping) -> "ScoreShape":
        def put(x):
            return None if x is None else substituted(x, values)
        window = self.window
        window = replace(window, size=put(window.size)) if hasattr(window, "size") else put(window)    # a Chunk
        return replace(self, queries=put(self.queries), counted=put(self.counted),
                       causal_length=put(self.causal_length), window=window, head_dim=put(self.head_dim))


EXPRESSION_FIELDS = ("flops_fwd", "flops_bwd", "act_in", "act_in_other", "act_out",
                     "act_buffer", "weights", "weight_grads", "act_grads", "mem_fwd", "mem_bwd")
"""The exact-expression fields of a Cost, in the order tables show them."""

SPLIT_FIELDS = ("flops_wgrad",)
"""Exact-expression fields of a Cost that tables do not show: ``flops_wgrad``, the part of
``flops_bwd`` that forms parameter gradients."""

TOTAL_FIELDS = EXPRESSION_FIELDS + SPLIT_FIELDS + ("flops_agrad",)
"""What ``Block.total`` sums: the expression fields and the two parts of ``flops_bwd``."""


@dataclass(frozen=True)
class Cost:
    """What one operation costs on one device.

    ============== ==========================================================
    field          meaning
    ============== ==========================================================
    flops_fwd      floating-point operations of the forward pass
    flops_bwd      floating-point operations of the backward pass (all of them)
    act_in         bytes of the main input activation
    act_in_other   bytes of a second input (K for QK^T, V for AV, a mask)
    act_out        bytes of the output activation
    act_buffer     bytes kept from forward for backward
    weights        bytes of parameters
    weight_grads   bytes of parameter gradients
    act_grads      bytes of activation gradients read and written in backward
    mem_fwd        bytes moved to and from memory in the forward pass
    mem_bwd        bytes moved to and from memory in the backward pass
    collectives    the communications this operation needs
    gemms          its matrix products (shapes for the tiled kernel model)
    engine         ``"matrix"`` (tensor cores) or ``"vector"`` units
    fp8, fp4       its products read FP8 (a recipe) or 4-bit (NVFP4) inputs: timed at the
                   system's rate for them (``timing.systems.product_rate``)
    fused          its ``gemms`` run in one fused kernel (flash): counted, not timed apart
    scores         a fused attention kernel's ``ScoreShape``: the tiles it executes are timed
    runs           1 where the row runs, 0 where it does not, or an expression of those values
                   where that turns on a symbol (the dispatcher's sorts: not for one expert a
                   rank); ``None``: it runs.  Its fields already hold it; the time models scale
                   what a row pays beyond them by it (its kernels' launches and latency)
    graph          ``None``: its kernels are launched from the host one by one; ``"captured"``:
                   they replay inside a CUDA graph (``GRAPHED``), no launch of their own;
                   ``"replay"``: captured, and the first row of its graph, which pays the
                   graph's one launch (``blocks.graphs``)
    kernel_per_group its grouped products launch one kernel per group (Transformer Engine's
                   ``GroupedLinear``: a cuBLAS GEMM per local expert); ``False``: one kernel each
    flops_wgrad    the part of ``flops_bwd`` that forms parameter gradients
                   (``dW``, a bias's, a norm's ``gamma``/``beta``, a table's)
    ============== ==========================================================

    ``flops_agrad = flops_bwd - flops_wgrad`` is the rest of the backward pass: the activation gradients
    (``dX``) and what leads to them.  Zero-bubble pipeline schedules and overlap models run the two parts
    apart (Calculon's ``agrad_flops`` and ``wgrad_flops``).  ``flops_wgrad`` is not one of
    ``EXPRESSION_FIELDS`` (the columns tables show); ``subs``, ``plus`` and ``Block.total`` handle it alike.
    """

    name: str
    engine: str
    flops_fwd: Expr
    flops_bwd: Expr
    act_in: Expr
    act_in_other: Expr
    act_out: Expr
    act_buffer: Expr
    weights: Expr
    weight_grads: Expr
    act_grads: Expr
    mem_fwd: Expr
    mem_bwd: Expr
    collectives: tuple[Collective, ...] = field(default=())
    gemms: tuple[Gemm, ...] = field(default=())
    fp8: bool = False
    flops_wgrad: Expr = Integer(0)
    fp4: bool = False
    fused: bool = False
    recompute: str | None = None    # the recomputation that redoes its forward in backward (models.memory)
    rebuilt: str | None = None      # the recomputation that rebuilds what it keeps for backward, not keeping it
    scores: ScoreShape | None = None
    runs: Expr | None = None
    graph: str | None = None
    kernel_per_group: bool = False

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise InputError(f"engine must be 'matrix' or 'vector', got {self.engine!r}", "engine")
        if self.graph not in GRAPHED:
            raise InputError(f"graph must be one of {GRAPHED}, got {self.graph!r}", "graph")
        if not isinstance(self.kernel_per_group, bool):
            raise InputError(f"kernel_per_group must be True or False, got {self.kernel_per_group!r}",
                             "kernel_per_group")
        for name in EXPRESSION_FIELDS + SPLIT_FIELDS:
            object.__setattr__(self, name, exact(getattr(self, name), name))
        object.__setattr__(self, "collectives", tuple(self.collectives))
        object.__setattr__(self, "gemms", tuple(self.gemms))
        if self.runs is not None:
            object.__setattr__(self, "runs", exact(self.runs, "runs"))

    @property
    def flops_agrad(self) -> Expr:
        """FLOPs of the backward pass that form activation gradients: ``flops_bwd - flops_wgrad``."""
        return self.flops_bwd - self.flops_wgrad

    @property
    def matrix_elements(self) -> Expr:
        """Elements of the operation's weight matrices: a ``k x n`` matrix for each of the
        ``groups`` of each forward product (a grouped GEMM's experts); the rest of ``weights`` is
        its bias (what low-precision recipes and served weight formats leave in the precision).

        >>> from symbolic_cost.ops import linear
        >>> linear(2, 3, 4, 5, bias=True).matrix_elements        # 4 x 5, the bias of 5 apart
        20
        """
        return sum((g.groups * g.k * g.n for g in self.gemms if g.pass_ == "fwd"), Integer(0))

    def fields(self) -> dict[str, Expr]:
        """The expression fields as a name -> expression dict."""
        return {name: getattr(self, name) for name in EXPRESSION_FIELDS}

    def subs(self, values: Mapping) -> "Cost":
        """Substitute ``values`` (symbol or name -> number or expression) everywhere."""
        from symbolic_cost.symbols import resolve_names
        values = resolve_names(values)
        changed = {name: substituted(getattr(self, name), values) for name in EXPRESSION_FIELDS + SPLIT_FIELDS}
        scores = None if self.scores is None else self.scores.subs(values)
        runs = None if self.runs is None else self.runs.subs(values)
        return replace(self, collectives=tuple(c.subs(values) for c in self.collectives),
                       gemms=tuple(g.subs(values) for g in self.gemms), scores=scores, runs=runs, **changed)

    def _repr_latex_(self) -> str:
        """Jupyter shows a Cost as an aligned list of its formulas."""
        from symbolic_cost.latex import latex
        lines = [r"\mathrm{%s} &= %s" % (name.replace("_", r"\_"), latex(value))
                 for name, value in self.fields().items()]
        return r"$\begin{aligned}" + r" \\ ".join(lines) + r"\end{aligned}$"

    def plus(self, **extra) -> "Cost":
        """A copy with ``extra`` added to the named fields and collectives appended.

        >>> from symbolic_cost.ops import gelu
        >>> gelu(1, 2, 3).plus(flops_fwd=1).flops_fwd
        7

        Backward FLOPs that form parameter gradients go in both ``flops_bwd`` and
        ``flops_wgrad``: ``plus(flops_bwd=adds, flops_wgrad=adds)``.
        """
        collectives = tuple(extra.pop("collectives", ()))
        changed = {name: getattr(self, name) + exact(value, name) for name, value in extra.items()}
        return replace(self, collectives=self.collectives + collectives, **changed)


def make_cost(name: str, engine: str, *, flops_fwd, flops_bwd, act_in, act_out, act_buffer,
              act_grads, act_in_other=0, weights=0, gemms=(), flops_wgrad=0) -> Cost:
    """Build a Cost whose memory traffic follows the common rule (``flops_wgrad``: the part of
    ``flops_bwd`` that forms parameter gradients, zero for an operation without parameters).

    Every weight is trained here, so its gradient is as large as it is (``weight_grads = weights``);
    a frozen weight (LoRA's base) loses its gradient where the freezing is decided
    (``models.lora.frozen``).

    Forward reads every input and the weights and writes the output:
    ``mem_fwd = act_in + act_in_other + act_out + weights``.
    Backward reads the saved buffer and the weights, reads and writes the activation gradients
    and writes the weight gradients:
    ``mem_bwd = act_buffer + act_grads + weight_grads + weights``.
    ``gemms``: the matrix products it runs (``Gemm``).  Collectives are attached by those who
    send them (``blocks.layout.attach``); a count that departs from the rule adjusts the result
    where it is owned (the norms' ``layer_norm_bwd_reads_weights``: ``ops.norm``).
    """
    mem_fwd = exact(act_in) + exact(act_in_other) + exact(act_out) + exact(weights)
    mem_bwd = exact(act_buffer) + exact(act_grads) + 2 * exact(weights)
    return Cost(name=name, engine=engine, flops_fwd=flops_fwd, flops_bwd=flops_bwd,
                act_in=act_in, act_in_other=act_in_other, act_out=act_out, act_buffer=act_buffer,
                weights=weights, weight_grads=weights, act_grads=act_grads,
                mem_fwd=mem_fwd, mem_bwd=mem_bwd, gemms=gemms, flops_wgrad=flops_wgrad)
