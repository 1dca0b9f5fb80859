"""The calibrated time model: what real kernels and NCCL achieve, as a few named factors.

The peak-only model (``hardware.times`` with a plain ``System``) is a lower bound: every
product at the datasheet's dense rate, every byte at the full HBM and link bandwidth.
A system that carries an ``Efficiency`` (``calibrated("a100")``) is timed as real runs are:

* **matrix products** ``(m, k) x (k, n)``, ``count`` of them: at ``matrix`` (a sustained
  fraction of peak, fitted) times the **wave quantisation** of their output tiles over the
  SMs (``wave_efficiency``: a product of ``tiles`` tiles runs in ``ceiling(tiles / sms)``
  waves, and partial tiles and waves do no useful work; a side shorter than the tile takes a
  narrow kernel, ``kernel_tile``);
* **fused attention** (a matrix row without product shapes: flash attention) at
  ``attention`` of peak (fitted);
* **memory-bound work** at ``memory`` of the HBM bandwidth (fitted), taking the larger of
  that and the compute time, as the roofline does;
* **collectives** as NCCL's own cost model prices them (``nccl_time``): a ring's bus
  bandwidth per link and a latency ``base + steps x hop`` per protocol, the cheaper of its
  low-latency ``LL`` and bandwidth ``Simple`` protocols; an allreduce across NVLink domains
  also as NCCL's double binary tree (``tree_time``), the cheaper algorithm winning as NCCL's
  tuner chooses.

Every factor is exact (a ``Rational`` or a symbol), so times stay SymPy expressions that
can be differentiated, solved and compiled.  The fitted values come from
``symbolic_cost.report.calibrate`` on the published runs of ``reproduce.measured``
(``calibration.json`` beside this module, with its provenance); the rest are datasheet or
NCCL constants with their source beside each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from importlib import resources

from sympy import Expr, Function, Integer, Min, Piecewise, Rational, Tuple, ceiling, floor, sympify

from symbolic_cost.checks import InputError, exact
from symbolic_cost.cost import Collective
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.ops.matmul import matmul_flops
from symbolic_cost.parallel.collectives import Log2
from symbolic_cost.timing.systems import product_rate

MICRO = Rational(1, 10**6)


@dataclass(frozen=True)
class Efficiency:
    """Named factors of the calibrated time model for one system (see the module docstring).

    ============== =====================================================================
    field          meaning (source)
    ============== =====================================================================
    matrix         sustained fraction of the dense matrix peak on a full-wave product
                   (fitted)
    attention      fraction of the matrix peak a fused attention kernel sustains (fitted)
    memory         fraction of HBM bandwidth a memory-bound kernel achieves (fitted)
    sms            streaming multiprocessors (datasheet: A100 108, H100 SXM 132)
    tile_m, tile_n output tile of the product kernels (CUTLASS/cuBLAS: 128 x 128 on
                   Ampere, 128 x 256 on Hopper's warp-group kernels)
    nvlink_bus     NCCL ring bus bandwidth over NVLink, bytes/s (NCCL's tuning model caps
                   compute capability 8.0 at 235 GB/s; Hopper: the same fraction of its
                   NVLink bandwidth, an assumption)
    ib_bus         NCCL ring bus bandwidth across nodes, bytes/s per device (the NIC's
                   line rate: one HDR 200 Gb/s NIC per A100, one NDR 400 Gb/s per H100)
    ============== =====================================================================

    NCCL's latency constants (``base_*``, ``hop_*``: ``src/graph/tuning.cc``, µs) are
    module constants of ``nccl_time``, the same for every system.
    """

    matrix: Expr
    attention: Expr
    memory: Expr
    sms: Expr
    tile_m: Expr
    tile_n: Expr
    nvlink_bus: Expr
    ib_bus: Expr

    def __post_init__(self):
        for item in fields(self):
            value = exact(getattr(self, item.name), item.name)
            if value.is_number and value <= 0:
                raise InputError(f"efficiency {item.name} must be positive, got {value}", item.name)
            object.__setattr__(self, item.name, value)

    def but(self, **changes) -> "Efficiency":
        known = {item.name for item in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise InputError(f"unknown efficiency field(s): {', '.join(sorted(unknown))}; "
                             f"fields: {', '.join(sorted(known))}")
        return replace(self, **changes)


FITTED = ("matrix", "attention", "memory")
"""The factors ``report.calibrate`` fits; the others are datasheet or NCCL constants."""


MMA_ROWS = 16
"""The smallest product a tensor-core instruction forms along one side (``mma.sync.m16n8k16``'s
16 rows; cuBLAS's skinny kernels swap the operands so either side can be the short one)."""


def kernel_tile(size, tile) -> Expr:
    """The output-tile side a product kernel uses along a dimension of ``size``: the full
    ``tile``, or for a dimension shorter than it (a decode step's few tokens, a LoRA rank) the
    ``size`` rounded up to ``MMA_ROWS``, as cuBLAS picks a narrow kernel for a skinny product.

    >>> kernel_tile(4096, 128), kernel_tile(1, 128), kernel_tile(40, 256)
    (128, 16, 48)
    """
    size, tile = exact(size, "size"), exact(tile, "tile")
    if (size >= tile) == True:       # noqa: E712  (a SymPy relation: True only when provable)
        return tile
    return Min(tile, MMA_ROWS * ceiling(size / MMA_ROWS))


def wave_efficiency(m, n, count, sms, tile_m, tile_n) -> Expr:
    """Useful fraction of the tile slots a batch of ``count`` ``(m, k) x (k, n)`` products
    occupies, on the best of the kernel's tiles (``tile_shapes``).  On a tile of sides
    ``T_m = kernel_tile(m, t_m)`` and ``T_n = kernel_tile(n, t_n)``,
    ``tiles = ceiling(m/T_m) ceiling(n/T_n) count`` output tiles run in ``ceiling(tiles/sms)``
    waves of ``sms`` tiles; the useful part is ``m n count`` of those ``waves x sms x T_m x T_n``
    outputs.

    >>> # 128 x 128: 16 x 36 = 576 tiles in 6 waves of 108 SMs (8/9); 128 x 64: 1,152 in 11 (32/33)
    >>> wave_efficiency(2048, 4608, 1, 108, 128, 128)
    32/33
    >>> # 100 rows take a narrow 112-row tile; two 112 x 64 tiles in one wave fill 2/108 of it best
    >>> wave_efficiency(100, 128, 1, 108, 128, 128)
    25/1512
    """
    m, n, count, sms = (exact(v, name) for v, name in ((m, "m"), (n, "n"), (count, "count"), (sms, "sms")))
    shapes = [(kernel_tile(m, t_m), kernel_tile(n, t_n)) for t_m, t_n in tile_shapes(tile_m, tile_n)]
    return maximum(*(m * n * count / (ceiling(ceiling(m / t_m) * ceiling(n / t_n) * count / sms) * sms * t_m * t_n)
                     for t_m, t_n in shapes))


def tile_shapes(tile_m, tile_n) -> list[tuple[Expr, Expr]]:
    """The output tiles a kernel library chooses among: the largest, ``tile_m x tile_n``, and
    its halves along either side (cuBLAS's heuristics pick the one that fills the SMs best; its
    Ampere kernels run 128 x 128, 128 x 64 and 64 x 128, its Hopper ones 128 x 256, 128 x 128 and
    64 x 256).

    >>> tile_shapes(128, 256)
    [(128, 256), (128, 128), (64, 256)]
    """
    tile_m, tile_n = exact(tile_m, "tile_m"), exact(tile_n, "tile_n")
    return [(tile_m, tile_n), (tile_m, tile_n / 2), (tile_m / 2, tile_n)]


# NCCL's ring latencies (src/graph/tuning.cc, NCCL 2.x), in seconds: a base per protocol and
# a latency per ring step on NVLink and on the network.  LL moves 8-byte flag+data words: its
# bus bandwidth is a quarter of Simple's for an allreduce, a third otherwise.
BASE = {"LL": Rational(36, 10) * MICRO, "Simple": Rational(84, 10) * MICRO}
HOP = {("nvlink", "LL"): Rational(47, 100) * MICRO, ("nvlink", "Simple"): Rational(34, 10) * MICRO,
       ("ib", "LL"): Rational(27, 10) * MICRO, ("ib", "Simple"): Rational(96, 10) * MICRO}


def nccl_time(kind: str, n, tensor_bytes, bus, link: str, nodes=1, intra: str | None = None) -> Expr:
    """Seconds of one ring collective as NCCL's tuning model prices it: for each protocol
    ``p``, ``base_p + steps_intra x hop(link_intra, p) + steps_inter x hop(ib, p)`` plus
    ``sent / bus_p`` (``sent = ring_share x V``: the ring's bytes per device, which is how NCCL
    converts bus to algorithm bandwidth), and the cheaper protocol wins.  ``steps`` is
    ``n - 1`` for allgather, reduce-scatter and all-to-all, ``2(n - 1)`` for allreduce, 1 for
    a send (a group of one device costs nothing); ``nodes`` is how many NVLink domains the group
    spans, whose ``nodes - 1`` (twice for an allreduce) steps cross the network; the other steps
    run on ``intra`` (default ``link``: a group pinned to one link runs every step on it; a group
    spread over NVLink domains takes its intra-domain steps on NVLink, as NCCL's ``intraLat``).
    An allreduce spread over several domains (``nodes > 1`` on ``ib``) may run as NCCL's tree
    instead (``tree_time``), whichever is cheaper.  Two refinements of NCCL's model are left out: the
    ``x 1.8`` on LL's NVLink hop latency in multi-node groups and the ``x 1.9`` ring-plateau
    latency of large multi-node Simple allreduces.

    >>> from sympy import Rational
    >>> # 8 GPUs on NVLink, 1 GB allreduce at 235 GB/s: Simple, 8.4 + 14 x 3.4 us + 1.75 GB / 235 GB/s
    >>> t = nccl_time("allreduce", 8, 10**9, 235 * 10**9, "nvlink")
    >>> t == Rational(84 + 14 * 34, 10**7) + Rational(7, 4) * 10**9 / (235 * 10**9)
    True
    """
    from symbolic_cost.cost import ring_share
    n, nodes, volume = sympify(n), sympify(nodes), sympify(tensor_bytes)
    if kind == "p2p":
        steps, inter = Integer(1), Integer(1 if link == "ib" else 0)
    else:
        per = 2 if kind == "allreduce" else 1
        steps, inter = per * (n - 1), per * (nodes - 1)
    sent = ring_share(kind, n) * volume
    # a group of one device runs no collective (a symbolic group keeps the factor: 0 at n = 1)
    active = Integer(1) if kind == "p2p" else Min(1, n - 1)
    ll_share = Rational(1, 4) if kind == "allreduce" else Rational(1, 3)
    times = []
    near = _hop_link(intra or link)
    for protocol, bandwidth in (("LL", bus * ll_share), ("Simple", bus)):
        latency = BASE[protocol] + (steps - inter) * HOP[(near, protocol)] + inter * HOP[("ib", protocol)]
        times.append(active * latency + sent / bandwidth)
    if kind == "allreduce" and link == "ib" and nodes != 1:
        times.extend(tree_time(n, volume, bus, nodes, near))
    return minimum(*times)


def _hop_link(link: str) -> str:
    return "nvlink" if link == "nvlink" else "ib"


# NCCL's double binary tree (the same src/graph/tuning.cc as BASE and HOP; allreduce only): its
# base latency and latency per tree level, its bus-bandwidth caps, and the static correction of
# its bandwidth for medium messages, by log2(bytes / 64) from 0 to 21 (1 above).
TREE_BASE = {"LL": Rational(44, 10) * MICRO, "Simple": Integer(0)}
TREE_HOP = {("nvlink", "LL"): Rational(52, 100) * MICRO, ("nvlink", "Simple"): 28 * MICRO,
            ("ib", "LL"): 5 * MICRO, ("ib", "Simple"): 50 * MICRO}
TREE_CAP = {"few": 110 * 10**9, "many": 80 * 10**9}      # bytes/s: up to 2 nodes, more
TREE_CORRECTION = {
    "LL": (1, 1, 1, 1, ".9", ".8", ".7", ".7", ".7", ".7", ".6", ".5", ".4", ".4", ".5", ".6", ".7", ".8", ".9",
           1, 1, 1),
    "Simple": (".9", ".9", ".9", ".9", ".9", ".9", ".9", ".8", ".7", ".6", ".6", ".5", ".5", ".5", ".5", ".5",
               ".5", ".6", ".6", ".7", ".8", ".9"),
}


def tree_time(n, tensor_bytes, bus, nodes, intra: str = "nvlink") -> list[Expr]:
    """Seconds of an allreduce of ``V = tensor_bytes`` run as NCCL's tree over ``n`` devices in
    ``nodes`` NVLink domains, one time per protocol (LL, Simple), as ``ncclTopoTuneModel`` and
    ``ncclTopoGetAlgoTime`` price it: latency ``base + 2 ((n/nodes - 1) hop_intra +
    floor(log2 nodes) hop_net)`` (up the tree and down again: the devices of a domain chained,
    the domains in a binary tree); bandwidth ``min(0.9 bus, cap) x 1/2`` (LL: ``/ 3.8`` more),
    the cap 110 GB/s up to two nodes and 80 GB/s beyond, times the tree's correction for a
    message of ``V`` bytes (``tree_correction``).

    >>> from sympy import Rational
    >>> # 1 MiB over 16 nodes of 8, Simple: 2 (7 x 28 + 4 x 50) us + 2^20 B / (0.5 x 0.9 x 25 GB/s x 0.5)
    >>> ll, simple = tree_time(128, 2**20, 25 * 10**9, 16)
    >>> simple == Rational(2 * (7 * 28 + 4 * 50), 10**6) + Rational(2**20 * 2 * 10, 9 * 25 * 10**9) / Rational(1, 2)
    True
    """
    n, nodes, volume = sympify(n), sympify(nodes), sympify(tensor_bytes)
    few = minimum(1, maximum(0, 3 - nodes))      # 1 up to two nodes, else 0 (a whole number of them)
    cap = TREE_CAP["many"] + (TREE_CAP["few"] - TREE_CAP["many"]) * few
    levels = Log2(nodes + 1) - 1      # floor(log2 nodes) for a whole number of nodes (Log2 rounds up)
    times = []
    for protocol, share in (("LL", Rational(10, 38)), ("Simple", Integer(1))):
        bandwidth = minimum(bus * Rational(9, 10), cap) * share / 2 * tree_correction(protocol, volume)
        latency = TREE_BASE[protocol] + 2 * ((floor(n / nodes) - 1) * TREE_HOP[(_hop_link(intra), protocol)]
                                             + levels * TREE_HOP[("ib", protocol)])
        times.append(latency + volume / bandwidth)
    return times


def tree_correction(protocol: str, tensor_bytes) -> Expr:
    """NCCL's static correction of the tree's bandwidth for a message of ``V`` bytes: the
    ``TREE_CORRECTION`` entry at ``floor(log2(floor(V / 64)))`` (0 below 128 bytes), 1 from
    ``64 x 2^22`` bytes (256 MiB) up (``TreeCorrection``).

    >>> tree_correction("Simple", 2**20), tree_correction("LL", 100), tree_correction("Simple", 2**30)
    (1/2, 1, 1)
    """
    table = Tuple(*(Rational(str(factor)) for factor in TREE_CORRECTION[protocol]))
    return TreeCorrection(table, sympify(tensor_bytes))


class TreeCorrection(Function):
    """``TreeCorrection(table, V)``: ``table[floor(log2(V / 64))]`` (index 0 below 128 bytes, 1
    past the table's end), a step function of the message size; a number as soon as ``V`` is one.
    The compiled backends read it as a table look-up (numpy) or its ``as_piecewise`` (LLVM, exact
    Python), since SymPy's ``numpy.select`` of folded conditions breaks under CSE."""

    is_extended_real = is_positive = is_finite = True      # every entry is a positive number

    @classmethod
    def eval(cls, table, volume):
        if volume.is_Number:
            return cls._entry(table, volume)
        return None

    @staticmethod
    def _entry(table, volume):
        index = (max(int(volume) // 64, 1)).bit_length() - 1
        return table[index] if index < len(table) else Integer(1)

    def _eval_derivative(self, symbol):      # SymPy's hook: constant between the sizes where it steps
        return Integer(0)

    def as_piecewise(self) -> Expr:
        """One piece per run of equal factors, each holding below the first size of the next run."""
        factors, volume = list(self.args[0]) + [Integer(1)], self.args[1]
        pieces = [(factor, volume < 64 * 2 ** (i + 1)) for i, factor in enumerate(factors[:-1])
                  if factor != factors[i + 1]]
        return Piecewise(*pieces, (Integer(1), True))

    def _numpycode(self, printer):
        table = ", ".join(str(float(f)) for f in list(self.args[0]) + [1])
        volume = printer._print(self.args[1])
        last = len(self.args[0])
        return (f"numpy.asarray([{table}])[numpy.clip(numpy.floor(numpy.log2(numpy.maximum({volume}, 64) / 64)), "
                f"0, {last}).astype(numpy.int64)]")

    def _pythoncode(self, printer):
        return printer._print(self.as_piecewise())


def collective_time(c: Collective, system, link: str, nodes=1, intra: str | None = None) -> Expr:
    """``nccl_time`` of ``c`` (all its repeats) on ``link`` with the system's bus bandwidth."""
    eff = system.efficiency
    bus = eff.nvlink_bus if link == "nvlink" else eff.ib_bus
    return c.repeats * nccl_time(c.kind, c.group, c.tensor_bytes, bus, link, nodes, intra)


def pass_times(cost, pass_: str, system, conventions) -> tuple[Expr, Expr]:
    """``(compute, memory)`` seconds of one row's pass under the calibrated model: each of its
    products at ``rate x matrix x wave_efficiency``, the rest of a matrix row's FLOPs at
    ``matrix`` of the rate (a fused attention row without product shapes: ``attention``), a vector
    row at the vector rate; its bytes at ``memory`` of the HBM bandwidth."""
    eff = system.efficiency
    flops = getattr(cost, f"flops_{pass_}")
    memory = getattr(cost, f"mem_{pass_}") / (system.hbm_bandwidth * eff.memory)
    if cost.engine == "vector":
        return flops / system.vector_flops, memory
    rate = product_rate(cost, system)
    gemms = [] if cost.fused else [g for g in cost.gemms if g.pass_ == pass_]
    products = [(g.count * matmul_flops(g.m, g.k, g.n, conventions),
                 wave_efficiency(g.m, g.n, g.count, eff.sms, eff.tile_m, eff.tile_n)) for g in gemms]
    rest = flops - sum((fl for fl, _ in products), Integer(0))
    compute = sum((fl / (rate * eff.matrix * wave) for fl, wave in products), Integer(0)) \
        + rest / (rate * (eff.matrix if gemms else eff.attention))
    return compute, memory


def _load() -> dict:
    text = resources.files("symbolic_cost.timing").joinpath("calibration.json").read_text()
    return json.loads(text)


CALIBRATION = _load()
"""The fitted factors with their provenance, as ``report.calibrate`` wrote them."""

GIGA = Integer(10) ** 9
_HOPPER_BUS = Rational(235, 600)
"""NCCL's ring bus bandwidth as a share of the NVLink bandwidth: 235 GB/s of A100's 600 (NCCL's
tuning model for compute capability 8.0), assumed the same on later parts."""
_CONSTANTS = {
    "a100": dict(sms=108, tile_m=128, tile_n=128, nvlink_bus=235 * GIGA, ib_bus=25 * GIGA),
    "h100": dict(sms=132, tile_m=128, tile_n=256, nvlink_bus=_HOPPER_BUS * 900 * GIGA, ib_bus=50 * GIGA),
    "h100-pcie": dict(sms=114, tile_m=128, tile_n=256, nvlink_bus=_HOPPER_BUS * 600 * GIGA, ib_bus=50 * GIGA),
    # Blackwell: 148 SMs; its 2-SM 256-wide tiles counted as Hopper's 128 x 256 per SM (assumed)
    "b200": dict(sms=148, tile_m=128, tile_n=256, nvlink_bus=_HOPPER_BUS * 1800 * GIGA, ib_bus=100 * GIGA),
    # MI300X: 304 compute units, hipBLASLt's 256 x 256 macro tiles; RCCL priced as NCCL (assumed)
    "mi300x": dict(sms=304, tile_m=256, tile_n=256, nvlink_bus=_HOPPER_BUS * 896 * GIGA, ib_bus=50 * GIGA),
}
_CONSTANTS["a100-perlmutter"] = _CONSTANTS["a100"]
_CONSTANTS["h200"] = _CONSTANTS["h100"]
_CONSTANTS["gb200"] = _CONSTANTS["b200"]

FAMILY = {"a100": "a100", "a100-perlmutter": "a100", "h100": "h100", "h200": "h100", "h100-pcie": "h100",
          "b200": "h100", "gb200": "h100", "mi300x": "h100"}
"""Whose fitted factors a system takes: A100's or H100's, the two families the calibration runs
cover.  H200 is H100's chip; H100 PCIe, B200, GB200 and MI300X have no run in the calibration set
and borrow H100's factors (an assumption, to be replaced by a fit when runs on them are added)."""


def efficiency(name: str) -> Efficiency:
    """The calibrated ``Efficiency`` of a system preset: its own constants (SMs, tiles, NCCL's
    bus bandwidths) and the fitted factors of its ``FAMILY``.

    >>> efficiency("a100").sms, efficiency("h100").tile_n, efficiency("b200").matrix == efficiency("h100").matrix
    (108, 256, True)
    """
    if name not in _CONSTANTS:
        raise InputError(f"no calibrated efficiency for system {name!r}; calibrated: {', '.join(_CONSTANTS)} "
                         f"(or pass a System with .but(efficiency=Efficiency(...)))", "system")
    fitted = {k: Rational(CALIBRATION["fitted"][FAMILY[name]][k]) for k in FITTED}
    return Efficiency(**fitted, **_CONSTANTS[name])
