"""An LSTM language model on the kernel-level time model (DeepFlow, arXiv 2211.03309).

The model: an embedding table ``(V, D)``; ``L`` LSTM layers of hidden size
``D`` with ``G`` gates run over ``S`` time steps; an optional projection
``D -> Pj``; a softmax output layer over ``V`` words whose input width is
``K = Pj`` with the projection and ``D`` without.  One data shard holds the
mini-batch ``B = ceil(batch / dp)``.

Every kernel is a ``kernels.Kernel``; GEMMs are tiled and take the faster
orientation.  The pointwise counts (FLOPs and bytes per gate element, the
launches of a cell) are DeepFlow's:

================== ===================== ========================================== ====================== ========
kernel             product ``(m, k, n)`` pointwise FLOPs                             pointwise bytes        launches
================== ===================== ========================================== ====================== ========
cell forward       ``(B, 2D, G D)``      ``13/4 B G D``                             ``17/2 es B G D``      15
cell backward      ``(B, G D, 2D)`` and  ``13/4 B D + 2D G D`` (gates, and the      ``17/2 es B D +        15
                   ``(2D, B, G D)``      sum of weight gradients over steps)        3 es 2D G D``
softmax forward    ``(B S, K, V)``       ``B S (3V - 1)`` (exp, sum, divide)        ``7 es B S V``         4
softmax backward   ``(K, B S, V)`` and   ``5 B S V``                                ``11 es B S V``        4
                   ``(B S, V, K)``
projection fwd     ``(B S, D, Pj)``
projection bwd     ``(Pj, B S, D)`` and
                   ``(B S, Pj, D)``
embedding fwd/bwd                        0 (a gather)                               ``2 es B D S``         1
================== ===================== ========================================== ====================== ========

An update of ``n`` weights clips the gradient (``4n`` FLOPs, ``3 es n``
bytes) and applies it (``3n`` FLOPs, ``7 es n`` bytes), both fused (no
launch), after a ring allreduce over ``dp`` replicas.  Data- and layer-parallel
transfers are ``hardware.comm_time`` of their collective, pinned to InfiniBand.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from sympy import Expr, Integer, Rational, ceiling, floor

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError, positive_dims
from symbolic_cost.cost import Gemm, collective, exact
from symbolic_cost.timing.hardware import comm_time
from symbolic_cost.timing.kernels import Kernel, choose, gemm, kernel_time, product_times, roofline
from symbolic_cost.symbols import b, e, l, n_layers, v


@dataclass(frozen=True)
class LSTM:
    """An LSTM language model and its parallel degrees (defaults: our symbols).

    ``projection`` is ``Pj``; ``projected`` says whether the projection layer
    runs (DeepFlow's ``proj`` flag).  ``dp`` shards the batch, ``lp`` places
    layers on different devices, ``hlp`` is the number of layer groups that
    pipeline over time steps.
    """

    batch: Expr = b
    steps: Expr = l
    hidden: Expr = e
    vocab: Expr = v
    layers: Expr = n_layers
    gates: Expr = Integer(4)
    projection: Expr = Integer(0)
    projected: bool = False
    element_bytes: Expr = Integer(4)
    dp: Expr = Integer(1)
    lp: Expr = Integer(1)
    hlp: Expr = Integer(1)

    def __post_init__(self):
        sizes = {item.name: getattr(self, item.name) for item in fields(self)
                 if item.name not in ("projected", "projection", "element_bytes")}
        for name, value in positive_dims(**sizes).items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "element_bytes", exact(self.element_bytes, "element_bytes"))
        projection = exact(self.projection, "projection")
        if self.projected and projection.is_number and not projection > 0:
            raise InputError(f"projection must be a positive width when projected, got {projection}", "projection")
        object.__setattr__(self, "projection", projection)
        # a group or a device of no whole layer would speed the step up; a replica of no sequence
        # would be given one by ceil(batch / dp)
        for name, whole, each in (("lp", "layers", "each holds at least one layer"),
                                  ("hlp", "layers", "each holds at least one layer"),
                                  ("dp", "batch", "each replica holds at least one sequence")):
            more = getattr(self, name) - getattr(self, whole)
            if more.is_number and more > 0:
                raise InputError(f"{name} must be at most {whole} (got {name}={getattr(self, name)}, "
                                 f"{whole}={getattr(self, whole)}): {each}", name)

    @property
    def mini_batch(self) -> Expr:
        """Sequences on one data shard: ``ceil(batch / dp)``."""
        return ceiling(self.batch / self.dp)

    @property
    def softmax_input(self) -> Expr:
        """``K``: the projection width with a projection, else the hidden size."""
        return self.projection if self.projected else self.hidden


def products(m: LSTM) -> dict[str, tuple[Expr, Expr, Expr]]:
    """Every matrix product ``(m, k, n)`` of one step of one layer (cell) or of the whole
    sequence (softmax, projection), by kernel name (module table)."""
    B, D, G, S, V, K, Pj = m.mini_batch, m.hidden, m.gates, m.steps, m.vocab, m.softmax_input, m.projection
    tokens = B * S
    return {
        "cell_fwd": (B, 2 * D, G * D), "cell_bwd_act": (B, G * D, 2 * D), "cell_bwd_wt": (2 * D, B, G * D),
        "softmax_fwd": (tokens, K, V), "softmax_bwd_wt": (K, tokens, V), "softmax_bwd_act": (tokens, V, K),
        "projection_fwd": (tokens, D, Pj), "projection_bwd_wt": (Pj, tokens, D),
        "projection_bwd_act": (tokens, Pj, D),
    }


def pointwise(m: LSTM, conventions=conv.DEFAULT) -> dict[str, Kernel]:
    """The non-GEMM kernels by name (module table)."""
    B, D, G, S, V, es = m.mini_batch, m.hidden, m.gates, m.steps, m.vocab, m.element_bytes
    accumulate = weight_elements(m)["hidden"]   # weight-gradient elements summed over time steps
    accumulate_bytes = 3 * accumulate * (es if conv.get(conventions).lstm_grad_accumulate_bytes else 1)
    vector = dict(engine="vector")
    return {
        "cell_fwd_pointwise": Kernel("cell_fwd_pointwise", Rational(13, 4) * B * G * D,
                                     Rational(17, 2) * es * B * G * D, launches=15, **vector),
        "cell_bwd_pointwise": Kernel("cell_bwd_pointwise", Rational(13, 4) * B * D + accumulate,
                                     Rational(17, 2) * es * B * D + accumulate_bytes, launches=15, **vector),
        "softmax_fwd_pointwise": Kernel("softmax_fwd_pointwise", B * S * (3 * V - 1), 7 * es * B * S * V,
                                        launches=4, **vector),
        "softmax_bwd_pointwise": Kernel("softmax_bwd_pointwise", 5 * B * S * V, 11 * es * B * S * V,
                                        launches=4, **vector),
        "embedding": Kernel("embedding", 0, 2 * es * B * D * S, **vector),
    }


def all_kernels(m: LSTM, system, conventions=conv.DEFAULT) -> dict[str, Kernel]:
    """``products`` as tiled GEMM kernels, and the pointwise kernels."""
    out = {name: gemm(*shape, system, conventions, m.element_bytes, name=name)
           for name, shape in products(m).items()}
    return {**out, **pointwise(m, conventions)}


STAGES = {
    "cell_fwd": ("cell_fwd", "cell_fwd_pointwise"),
    "cell_bwd": ("cell_bwd_act", "cell_bwd_wt", "cell_bwd_pointwise"),
    "softmax_fwd": ("softmax_fwd", "softmax_fwd_pointwise"),
    "softmax_bwd": ("softmax_bwd_wt", "softmax_bwd_act", "softmax_bwd_pointwise"),
    "projection_fwd": ("projection_fwd",),
    "projection_bwd": ("projection_bwd_wt", "projection_bwd_act"),
    "embedding_fwd": ("embedding",),
    "embedding_bwd": ("embedding",),
}
"""The kernels each stage runs, in order."""


def weight_elements(m: LSTM) -> dict[str, Expr]:
    """Weights one update touches: a layer's gate matrices ``2D x G D`` (input and
    recurrent weights stacked), the projection ``D x Pj``, the softmax ``K x V``."""
    return {"hidden": 2 * m.hidden * m.gates * m.hidden, "projection": m.hidden * m.projection,
            "softmax": m.softmax_input * m.vocab}


def gradient_clip(n, es) -> Kernel:
    """Clip a gradient of ``n`` elements by its norm: ``4n`` FLOPs, ``3 es n`` bytes, fused."""
    return Kernel("gradient_clip", 4 * n, 3 * es * n, launches=0, engine="vector")


def apply_gradient(n, es) -> Kernel:
    """The optimizer's update of ``n`` weights: ``3n`` FLOPs, ``7 es n`` bytes, fused."""
    return Kernel("apply_gradient", 3 * n, 7 * es * n, launches=0, engine="vector")


LINK = "ib"   # DeepFlow sends data- and layer-parallel traffic over InfiniBand, whatever the group
LAYER_TRANSFER_TIME = "bandwidth"   # and times a hidden-state send by bandwidth alone (no latency)


def allreduce_time(elements, m: LSTM, system, conventions=conv.DEFAULT, *, link=LINK) -> Expr:
    """Seconds of the allreduce of ``elements`` gradients over the ``dp`` replicas:
    ``hardware.comm_time`` of it on ``link`` (a ring by default), and ``dp - 1`` reduction
    kernels of ``elements/dp`` adds each (DeepFlow's: ``3 es`` bytes per add, one launch)."""
    conventions = conv.get(conventions)
    found = collective("allreduce", elements, m.element_bytes, m.dp, "bwd", conventions)
    if not found:   # one replica
        return Integer(0)
    share = elements / m.dp
    reduce = Kernel("reduce", share, 3 * m.element_bytes * share, engine="vector")
    return comm_time(found[0], system, conventions, link=link) + (m.dp - 1) * kernel_time(reduce, system)


def update_time(weights: str, m: LSTM, system, conventions=conv.DEFAULT) -> Expr:
    """Allreduce, clip and apply for one weight group of ``weight_elements``."""
    n, es = weight_elements(m)[weights], m.element_bytes
    return (allreduce_time(n, m, system, conventions) + roofline(gradient_clip(n, es), system)
            + roofline(apply_gradient(n, es), system))


def stage_times(m: LSTM, system, conventions=conv.DEFAULT) -> dict[str, Expr]:
    """Seconds of every stage in ``STAGES`` and of the three updates (``update_<weights>``).
    The embedding backward adds an allreduce of its ``B S D`` gradient rows."""
    shapes, others = products(m), pointwise(m, conventions)

    def seconds(name):   # a GEMM's time is the faster orientation's (no Piecewise inside a condition)
        if name in shapes:
            return product_times(Gemm("fwd", *shapes[name], element_bytes=m.element_bytes), system, conventions)[1]
        return kernel_time(others[name], system)

    out = {stage: sum((seconds(k) for k in names), Integer(0)) for stage, names in STAGES.items()}
    rows = m.mini_batch * m.steps * m.hidden
    out["embedding_bwd"] += allreduce_time(rows, m, system, conventions)
    out.update({f"update_{w}": update_time(w, m, system, conventions) for w in weight_elements(m)})
    return out


def layer_transfer_time(m: LSTM, system, conventions=conv.DEFAULT) -> Expr:
    """``W``: seconds to pass one step's hidden state ``(B, D)`` to the next layer's
    device when layers are spread (``lp > 1``), else 0: ``hardware.comm_time`` of that
    p2p send on ``LINK`` under the ``LAYER_TRANSFER_TIME`` model, ``es B D / B_ib``."""
    if m.lp == 1:
        return Integer(0)
    conventions = conv.get(conventions).but(comm_time=LAYER_TRANSFER_TIME)
    send, = collective("p2p", m.mini_batch * m.hidden, m.element_bytes, 2, "fwd", conventions)
    return comm_time(send, system, conventions, link=LINK)


def recurrent_time(cf, cb, r, w, layers, steps, hlp) -> Expr:
    """Seconds of the LSTM layers over all steps, forward and backward, with the ``L``
    layers in ``hlp`` pipelined groups (a wavefront over layers and time steps).

    ``cf``, ``cb``: one cell's forward and backward; ``r``: one layer's weight
    update; ``w``: one hidden-state transfer between groups.  The forward
    wavefront takes ``M1 = L + (L/hlp)(S - 1)`` cell times when compute hides
    the transfers; the backward too, then the last update ``r`` (if a
    backward cell hides an update) or ``M2 = L + (L/hlp)(S - 2) + 1`` cells and
    ``L/hlp`` updates.  When transfers dominate, ``S + hlp - 2`` of them set
    the pace.  DeepFlow's six cases, in this order.
    """
    group = layers / hlp
    m1 = layers + group * (steps - 1)
    m2 = layers + group * (steps - 2) + 1
    transfers = (steps + hlp - 2) * w
    pipelined = choose(cb >= r, m1 * cb + w * (hlp - 1) + r, m2 * cb + group * r)
    transfer_bound = choose(cb >= r, layers * cb + transfers + r,
                            (layers - group + 1) * cb + transfers + group * r)
    hidden = w == 0 or (w <= cf * group)   # times are never negative: no transfer is always hidden
    return choose(hidden, m1 * cf + w * (hlp - 1) + pipelined,
                  choose(w >= cb * group, layers * cf + transfers + transfer_bound,
                         layers * cf + transfers + pipelined))


def step_time(m: LSTM, system, conventions=conv.DEFAULT) -> Expr:
    """Seconds of one training step: softmax, embedding and (with a projection) projection
    forward and backward with their updates, plus ``recurrent_time``."""
    t = stage_times(m, system, conventions)
    total = (t["softmax_fwd"] + t["softmax_bwd"] + t["embedding_fwd"] + t["embedding_bwd"]
             + t["update_softmax"])
    if m.projected:
        total += t["projection_fwd"] + t["projection_bwd"] + t["update_projection"]
    return total + recurrent_time(t["cell_fwd"], t["cell_bwd"], t["update_hidden"],
                                  layer_transfer_time(m, system, conventions), m.layers, m.steps, m.hlp)


def _counts_projection(m: LSTM, conventions) -> bool:
    return m.projected or conv.get(conventions).lstm_count_disabled_projection


def _weight_parts(m: LSTM, conventions, softmax_rows, projection_bias) -> dict[str, Expr]:
    """Weights by part, in elements: embedding ``V D``, hidden ``L (2D + 1) G D`` (gates with
    bias), softmax ``(rows + 1) V`` (with bias), projection ``(D + bias) Pj`` when counted."""
    D, V, Pj = m.hidden, m.vocab, m.projection
    parts = {"embedding": V * D, "hidden": m.layers * (2 * D + 1) * m.gates * D,
             "softmax": (softmax_rows + 1) * V, "projection": (D + projection_bias) * Pj}
    if not _counts_projection(m, conventions):
        del parts["projection"]
    return parts


def parameters(m: LSTM, conventions=conv.DEFAULT) -> Expr:
    """``V D + L (2D + 1) G D + D Pj + (K + 1) V``: embedding, gates with bias,
    projection (without bias), softmax with bias.

    >>> parameters(LSTM(batch=1, steps=1, hidden=2, vocab=10, layers=1))   # 20 + 40 + 30
    90
    """
    return sum(_weight_parts(m, conventions, m.softmax_input, 0).values(), Integer(0))


MEMORY_KINDS = ("weights", "activations", "pointwise")


def memory(m: LSTM, conventions=conv.DEFAULT) -> dict[str, dict[str, Expr]]:
    """Bytes per data shard by part and kind (``weights``, ``activations`` kept for
    backward, ``pointwise`` intermediates), DeepFlow's accounting:

    * embedding: weights ``V D``, activations ``B S D``;
    * hidden: weights ``L (2D + 1) G D``, activations ``L S B 2D``, pointwise ``9 L S B D``;
    * softmax: weights ``(K + 1) V``, activations ``B S V``, pointwise ``2 B S V + B S``;
    * projection: weights ``(D + 1) Pj`` (a bias ``parameters`` leaves out), activations
      and pointwise ``B S Pj``.  Softmax weight rows: see ``lstm_softmax_weight_rows``.
    """
    B, D, L, S, V, Pj = (m.mini_batch, m.hidden, m.layers, m.steps, m.vocab, m.projection)
    rows = Pj if conv.get(conventions).lstm_softmax_weight_rows == "projection" else m.softmax_input
    others = {"embedding": (B * S * D, 0), "hidden": (L * S * B * 2 * D, 9 * L * S * B * D),
              "softmax": (B * S * V, 2 * B * S * V + B * S), "projection": (B * S * Pj, B * S * Pj)}
    es = m.element_bytes
    return {part: dict(zip(MEMORY_KINDS, (es * n for n in (weights, *others[part]))))
            for part, weights in _weight_parts(m, conventions, rows, 1).items()}


def memory_overflow(m: LSTM, system, conventions=conv.DEFAULT) -> Expr:
    """Total memory per data shard over one device's capacity (above 1: it does not fit)."""
    system.require("the memory overflow ratio", "hbm_capacity")
    total = sum(sum(kinds.values()) for kinds in memory(m, conventions).values())
    return total / system.hbm_capacity


def time_per_step(budget_seconds, tokens, batch, steps, epochs=1) -> Expr:
    """Seconds a step may take to train ``epochs`` passes over ``tokens`` tokens in
    ``budget_seconds``: ``budget / floor(epochs * tokens / (batch * steps))``.

    >>> time_per_step(86400, 10**6, 32, 20)    # 86400 s / 1562 steps
    43200/781
    """
    return exact(budget_seconds, "budget_seconds") / floor(exact(epochs, "epochs") * tokens / (batch * steps))
