"""The calibrated time model: what real kernels and NCCL achieve, as a few named factors.

The peak-only model (``hardware.times`` with a plain ``System``) is a lower bound: every
product at the datasheet's dense rate, every byte at the full HBM and link bandwidth.
A system that carries an ``Efficiency`` (``calibrated("a100")``) is timed as real runs are:

* **matrix products** ``(m, k) x (k, n)``, ``count`` of them: at ``matrix`` (a sustained
  fraction of peak, fitted) times the **wave quantisation** of their output tiles over the
  SMs (``wave_efficiency``: a product of ``tiles`` tiles runs in ``ceiling(tiles / sms)``
  waves, and partial tiles and waves do no useful work; a side shorter than the tile takes a
  narrow kernel, ``kernel_tile``);
* **fused attention** (flash) by the tiles its kernel executes, at the rate the kernel's
  published benchmarks show (``timing.attention_kernels``: not fitted on training runs);
* **memory-bound work** at ``memory`` of the HBM bandwidth (fitted), taking the larger of
  that and the compute time, as the roofline does;
* **fixed costs**: every kernel adds ``kernel`` seconds (its launch and the framework's
  dispatch of it, the gap between two kernels of an eager step; ``launches`` counts them), and
  every step pays ``step`` seconds of framework work outside the kernels (both fitted);
* **collectives** as NCCL's own cost model prices them (``timing.nccl``): a ring's bus
  bandwidth per link and a latency ``base + steps x hop`` per protocol, the cheapest of its
  low-latency ``LL``, ``LL128`` (where NCCL enables it: ``arch``) and bandwidth ``Simple``
  protocols; an allreduce across NVLink domains also as NCCL's double binary tree, and on
  NVLink SHARP systems (``nvls``) NCCL's NVLS and NVLS tree, the cheapest algorithm winning
  as NCCL's tuner chooses.

Every factor is exact (a ``Rational`` or a symbol), so times stay SymPy expressions that
can be differentiated, solved and compiled.  The fitted values come from
``symbolic_cost.report.calibrate`` on the published runs of ``reproduce.measured``
(``calibration.json`` beside this module, with its provenance); the rest are datasheet or
NCCL constants with their source beside each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from importlib import resources

from sympy import Add, Expr, Min, Mul, Pow, Rational

from symbolic_cost.checks import InputError, exact, within_double
from symbolic_cost.extrema import minimum, sign, unevaluated
from symbolic_cost.sampled import changes_sign
from symbolic_cost.trees import remembered
from symbolic_cost.ops.matmul import matmul_flops
from symbolic_cost.rounding import round_up
from symbolic_cost.timing import attention_kernels
from symbolic_cost.timing.systems import CALIBRATED, product_rate

MICRO = Rational(1, 10**6)


@dataclass(frozen=True)
class Efficiency:
    """Named factors of the calibrated time model for one system (see the module docstring).

    ============== =====================================================================
    field          meaning (source)
    ============== =====================================================================
    matrix         sustained fraction of the dense matrix peak on a full-wave product
                   (fitted)
    attention_kernel the fused attention kernel the system's frameworks run
                   (``timing.attention_kernels.KERNELS``: ``flash-attention-2`` on Ampere,
                   Transformer Engine's ``cudnn-hopper`` on Hopper (and, assumed, MI300X),
                   ``cudnn-blackwell`` on Blackwell)
    memory         fraction of HBM bandwidth a memory-bound kernel achieves (fitted)
    kernel         seconds each kernel adds: launch and host dispatch (fitted)
    step           seconds of framework work a training step pays outside its kernels
                   (the data loader, the optimizer's bookkeeping, logging; fitted)
    sms            streaming multiprocessors (datasheet: A100 108, H100 SXM 132)
    tile_m, tile_n output tile of the product kernels (CUTLASS/cuBLAS: 128 x 128 on
                   Ampere, 128 x 256 on Hopper's warp-group kernels)
    nvlink_bus     NCCL ring bus bandwidth over NVLink, bytes/s (NCCL's tuning model caps
                   compute capability 8.0 at 235 GB/s; Hopper: the same fraction of its
                   NVLink bandwidth, an assumption)
    ib_bus         NCCL ring bus bandwidth across nodes, bytes/s per device (the NIC's
                   line rate: one HDR 200 Gb/s NIC per A100, one NDR 400 Gb/s per H100)
    arch           the GPU generation NCCL's tuner keys on (``volta``, ``ampere``,
                   ``hopper``, ``blackwell``; ``other`` for a non-NVIDIA part): it decides
                   whether LL128 is on by default and its caps (``timing.nccl``)
    nvls           whether the NVLink domain reduces in its switches (NVLink SHARP:
                   NVSwitch gen 3 or later with multicast, one host), so that NCCL offers
                   its NVLS algorithms (``timing.nccl_nvls``)
    group_kernel   seconds each further product of a grouped GEMM adds where the kernel library
                   launches one a group (``Cost.kernel_per_group``: Transformer Engine's
                   ``GroupedLinear`` issues a cuBLAS GEMM a local expert from one C++ loop, so only
                   the first pays the framework's dispatch, ``kernel``; fitted on the mixtures of
                   experts' runs, ``timing.calibrate.fit_group_kernel``); ``None``: ``kernel`` (and
                   ``but(kernel=...)`` moves it with ``kernel``)
    ============== =====================================================================

    NCCL's latency constants (``src/graph/tuning.cc``, µs) are module constants of
    ``timing.nccl``, the same for every system.
    """

    matrix: Expr
    memory: Expr
    kernel: Expr
    step: Expr
    sms: Expr
    tile_m: Expr
    tile_n: Expr
    nvlink_bus: Expr
    ib_bus: Expr
    arch: str = "other"
    nvls: bool = False
    attention_kernel: str = "flash-attention-2"
    group_kernel: Expr | None = None
    follows_kernel: bool = field(default=False, init=False, repr=False, compare=False)
    """``group_kernel`` was not given: it is ``kernel``, and ``but(kernel=...)`` moves it too (it
    stayed at the old ``kernel``, a value nobody gave)."""

    def __post_init__(self):
        object.__setattr__(self, "follows_kernel", self.group_kernel is None)
        if self.group_kernel is None:
            object.__setattr__(self, "group_kernel", self.kernel)
        if not isinstance(self.arch, str) or self.arch not in ARCHS:
            raise InputError(f"efficiency arch must be one of {', '.join(ARCHS)}, got {self.arch!r}", "arch")
        if not isinstance(self.nvls, bool):
            raise InputError(f"efficiency nvls must be True or False, got {self.nvls!r}", "nvls")
        if not isinstance(self.attention_kernel, str):
            raise InputError(f"efficiency attention_kernel must be a kernel's name, got {self.attention_kernel!r}",
                             "attention_kernel")
        attention_kernels.kernel(self.attention_kernel)          # refuses an unknown kernel
        for item in fields(self):
            if item.name in ("arch", "nvls", "attention_kernel", "follows_kernel"):
                continue
            value = exact(getattr(self, item.name), item.name)
            # a symbol's sign too: a negative one (Symbol("g", negative=True), -kernel) was taken
            if value.is_negative or item.name not in FIXED_COSTS and value.is_nonpositive:
                rule = "at least 0" if item.name in FIXED_COSTS else "positive"
                raise InputError(f"efficiency {item.name} must be {rule}, got {value}", item.name)
            if item.name in FRACTIONS and value.is_number and value > 1:
                raise InputError(f"efficiency {item.name} is a fraction of the peak: at most 1, got {value}", item.name)
            within_double(value, item.name, "efficiency ")     # past it a step time prints as inf
            if item.name in COUNTED and value.is_number and not (value.is_integer and value <= COUNTED[item.name]):
                raise InputError(f"efficiency {item.name} counts {COUNTED_WHAT[item.name]}: a whole number up to "
                                 f"{COUNTED[item.name]:,}, got {value}", item.name)
            object.__setattr__(self, item.name, value)

    def but(self, **changes) -> "Efficiency":
        known = {item.name for item in fields(self) if item.init}
        unknown = set(changes) - known
        if unknown:
            raise InputError(f"unknown efficiency field(s): {', '.join(sorted(unknown))}; "
                             f"fields: {', '.join(sorted(known))}", sorted(unknown)[0])
        if self.follows_kernel and "kernel" in changes and "group_kernel" not in changes:
            changes = dict(changes, group_kernel=None)
        return replace(self, **changes)


ARCHS = ("volta", "ampere", "hopper", "blackwell", "other")
"""The GPU generations NCCL's tuning model tells apart (``Efficiency.arch``)."""

FITTED = ("matrix", "memory", "kernel", "step")
"""The factors ``report.calibrate`` fits per GPU family; the others are datasheet or NCCL constants."""

GROUP_FITTED = ("group_kernel",)
"""The factor ``timing.calibrate.fit_group_kernel`` fits once, on the mixtures of experts' runs, for
every family (the host's cost of one more cuBLAS call, the same framework code on every GPU)."""

COUNTED = {"sms": 2**16, "tile_m": 1024, "tile_n": 1024}
"""The factors that count something, each a whole number up to its bound: a device's streaming
multiprocessors (132 on H100, 148 on B200; the bound is far past any device), and a product
kernel's output tile sides (128 or 256 on the tensor-core kernels of every generation; a side
of more than 1,024 outputs is no kernel's)."""

COUNTED_WHAT = {"sms": "streaming multiprocessors", "tile_m": "a tile's rows", "tile_n": "a tile's columns"}

FRACTIONS = ("matrix", "memory")
"""The factors that are a fraction of a datasheet peak, in (0, 1]: no kernel beats the peak (the fit
keeps them within ``timing.calibrate.RANGES``)."""

FIXED_COSTS = ("kernel", "step", "group_kernel")
"""The fitted factors that are seconds, not fractions: 0 is a value they may take."""


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
    return remembered(_TILES, (exact(size, "size"), exact(tile, "tile")), _tile)


_TILES: dict = {}
"""Tile sides already chosen: every layer's products ask for the same few (an assumption query each)."""


def _tile(sides) -> Expr:
    size, tile = sides
    if not changes_sign(size, tile) and sign(size - tile) == 1:      # a size that is at times short: no proof
        return tile
    return minimum(tile, MMA_ROWS * round_up(size / MMA_ROWS))


def wave_efficiency(m, n, count, sms, tile_m, tile_n) -> Expr:
    """Useful fraction of the tile slots a batch of ``count`` ``(m, k) x (k, n)`` products
    occupies, on the best of the kernel's tiles: ``m n count / wave_slots(...)``.

    >>> # 128 x 128: 16 x 36 = 576 tiles in 6 waves of 108 SMs (8/9); 128 x 64: 1,152 in 11 (32/33)
    >>> wave_efficiency(2048, 4608, 1, 108, 128, 128)
    32/33
    >>> # 100 rows take a narrow 112-row tile; two 112 x 64 tiles in one wave fill 2/108 of it best
    >>> wave_efficiency(100, 128, 1, 108, 128, 128)
    25/1512
    """
    slots = wave_slots(m, n, count, sms, tile_m, tile_n)       # checks the sizes first
    return m * n * count * _reciprocal(slots)


def wave_slots(m, n, count, sms, tile_m, tile_n) -> Expr:
    """Output slots a batch of ``count`` ``(m, k) x (k, n)`` products occupies on the best of the
    kernel's tiles (``tile_shapes``).  On a tile of sides ``T_m = kernel_tile(m, t_m)`` and
    ``T_n = kernel_tile(n, t_n)``, ``tiles = ceiling(m/T_m) ceiling(n/T_n) count`` output tiles run
    in ``ceiling(tiles/sms)`` waves of ``sms`` tiles, which hold ``waves x sms x T_m x T_n``
    outputs; the best tile holds the fewest.  A product's time is its ``2 m k n count`` FLOPs
    over the rate, times ``slots / (m n count)``: written so, it needs no division by the
    extremum (what the compiled kernels spend most on).

    >>> wave_slots(2048, 4608, 1, 108, 128, 128)       # 11 waves of 108 128 x 64 tiles
    9732096
    """
    sides = tuple(exact(v, name) for v, name in ((m, "m"), (n, "n"), (count, "count"), (sms, "sms"),
                                                 (tile_m, "tile_m"), (tile_n, "tile_n")))
    for value, name in zip(sides, ("m", "n", "count", "sms", "tile_m", "tile_n")):
        # a product of no rows, no SMs: NaN or a share past 1 (a routed expert's mean rows may be a fraction)
        least, rule = (0, "positive") if name in ("m", "n", "count") else (1, "at least 1")
        if value.is_number and not (value > least if least == 0 else value >= least):
            raise InputError(f"wave_slots' {name} must be {rule}, got {value}", name)
    return remembered(_WAVES, sides, _slots)


_WAVES: dict = {}
"""Wave slots already built: a layer's products share their shapes (DeepSeek-V3's step time
asks 45 times for 31 of them; ``(b l, 7168)`` nine times)."""


def _slots(key) -> Expr:
    m, n, count, sms, tile_m, tile_n = key
    # ``ceiling(m / T_m)`` is ``ceiling(m / t_m)``: a side shorter than the tile is one tile either
    # way; written with the constant ``t_m``, the kernels need no division for it.  One product a
    # shape, not a chain of them: each ``*`` flattens the whole product again
    slots = [Mul(round_up(round_up(m / t_m) * round_up(n / t_n) * count / sms), sms, kernel_tile(m, t_m),
                 kernel_tile(n, t_n)) for t_m, t_n in tile_shapes(tile_m, tile_n)]
    if all(v.is_Number for v in slots):
        return minimum(*slots)
    # kept whole, without ``minimum``'s proofs: which tile fills the SMs best turns on ceilings of
    # different sizes (``ceiling(56 x/132)`` against ``2 ceiling(28 x/132)``), which no structural
    # sign compares: none of the pairs DeepSeek-V3's step time asks is decided, so asking only costs
    return unevaluated(Min, slots)


def _reciprocal(x) -> Expr:
    """``1/x``; of a ceiling or an extremum (never 0 here) built as written: SymPy's evaluation
    of the power changes nothing but asks the base's assumptions first."""
    return Pow(x, -1) if x.is_Number else Pow(x, -1, evaluate=False)


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


def pass_times(cost, pass_: str, system, conventions) -> tuple[Expr, Expr]:
    """``(compute, memory)`` seconds of one row's pass under the calibrated model: each of its
    products at ``rate x matrix x wave_efficiency`` (a grouped GEMM's on the tiles of its
    experts' products, ``Gemm.launched``), the rest of a matrix row's FLOPs at
    ``matrix`` of the rate, a fused attention row by the tiles its kernel executes
    (``attention_kernels.AttentionKernel.time``), a vector row at the vector rate; its bytes at
    ``memory`` of the HBM bandwidth."""
    eff = system.efficiency
    flops = getattr(cost, f"flops_{pass_}")
    memory = getattr(cost, f"mem_{pass_}") / (system.hbm_bandwidth * eff.memory)
    if cost.engine == "vector":
        return flops / system.vector_flops, memory
    rate = product_rate(cost, system)
    if cost.fused:
        return attention_kernels.kernel(eff.attention_kernel).time(cost, pass_, rate), memory
    gemms = [(g, g.launched()) for g in cost.gemms if g.pass_ == pass_]
    products = [(g.count * matmul_flops(g.m, g.k, g.n, conventions), run.m * run.n * run.count,
                 wave_slots(run.m, run.n, run.count, eff.sms, eff.tile_m, eff.tile_n)) for g, run in gemms]
    rest = flops - Add(*(fl for fl, _, _ in products))
    at_rate = Pow(rate * eff.matrix, -1)
    # flops / wave_efficiency, as flops x slots / useful: the useful outputs cancel with the FLOPs
    compute = Add(*(Mul(fl, Pow(useful, -1), at_rate, slots) for fl, useful, slots in products)) \
        + rest / (rate * eff.matrix)
    return compute, memory


def launches(cost, pass_: str) -> Expr | int:
    """Kernels one row launches in ``pass_`` through the framework, each paying ``kernel``: one a
    matrix product (a fused kernel: one), one for a row that computes or moves anything else, none
    for a row with nothing to do in the pass (a cast fused into the norm before it, an exchange
    that only communicates); none for a row captured in a CUDA graph, one for the row that replays
    the graph (``Cost.graph``); times ``Cost.runs`` for a row that runs or not by a symbol.

    >>> from dataclasses import replace
    >>> from symbolic_cost.ops import linear, gelu
    >>> launches(linear(2, 3, 4, 5), "bwd"), launches(gelu(2, 3, 4), "fwd")
    (2, 1)
    >>> launches(replace(gelu(2, 3, 4), graph="captured"), "fwd"), launches(replace(gelu(2, 3, 4), graph="replay"), "fwd")
    (0, 1)
    """
    return _as_run(cost, _launched(cost, pass_))


def group_launches(cost, pass_: str) -> Expr | int:
    """The further kernels a row of grouped products launches in ``pass_``, each paying
    ``group_kernel``: ``groups - 1`` a product where the library runs one a group
    (``Cost.kernel_per_group``: Transformer Engine's ``GroupedLinear``, a cuBLAS GEMM a local expert,
    the first of them counted in ``launches``); none where one kernel runs them all, or the row
    replays from a CUDA graph.

    >>> from dataclasses import replace
    >>> from symbolic_cost.ops.routing import grouped_linear
    >>> experts = replace(grouped_linear(4096, 2048, 1536, 8), kernel_per_group=True)   # dX and dW
    >>> launches(experts, "bwd"), group_launches(experts, "bwd")
    (2, 14)
    """
    if not cost.kernel_per_group or cost.graph is not None:
        return 0
    return _as_run(cost, Add(*(g.groups - 1 for g in cost.gemms if g.pass_ == pass_)))


def _as_run(cost, count):
    """``count`` kernels of a row, times ``Cost.runs`` where the row runs or not by a symbol."""
    return count if cost.runs is None else cost.runs * count


def _launched(cost, pass_: str) -> int:
    """``launches`` of a row that runs."""
    if cost.graph is not None:
        return int(cost.graph == "replay")
    if cost.fused:
        return 1
    products = sum(1 for g in cost.gemms if g.pass_ == pass_)
    if products:
        return products
    return int(getattr(cost, f"flops_{pass_}") != 0 or getattr(cost, f"mem_{pass_}") != 0)


def _load() -> dict:
    text = resources.files("symbolic_cost.timing").joinpath("calibration.json").read_text()
    return json.loads(text)


CALIBRATION = _load()
"""The fitted factors with their provenance, as ``report.calibrate`` wrote them."""

def family(name: str) -> str:
    """Whose fitted factors a system takes (its file's ``calibrated.family``): A100's or H100's, or
    one of Blackwell's two chips, B200's (B200, GB200) or B300's (B300, GB300), whose matrix fraction
    is fitted on their own runs and the rest is H100's (``timing.calibrate.MATRIX_ONLY``).  H200 is
    H100's chip; H100 PCIe, H20, GH200 and the AMD parts (MI300X, MI325X, MI350X, MI355X) have no run
    in the calibration set and borrow H100's factors (an assumption, stated in each file, to be
    replaced by a fit when runs on them are added)."""
    return _calibrated(name)["family"]


def _calibrated(name: str) -> dict:
    calibrated = CALIBRATED.get(name)
    if calibrated is None:
        raise InputError(f"no calibrated efficiency for system {name!r}; calibrated: {', '.join(CALIBRATED)} "
                         f"(or a --system-file with a calibrated block; System.but(efficiency=Efficiency(...)) "
                         f"in Python)", "system")
    if not isinstance(calibrated["family"], str) or calibrated["family"] not in CALIBRATION["fitted"]:
        raise InputError(f"system {name}: calibrated.family must be one of {', '.join(CALIBRATION['fitted'])} "
                         f"(the families with fitted factors), got {calibrated['family']!r}", "system")
    return calibrated


def efficiency(name: str) -> Efficiency:
    """The calibrated ``Efficiency`` of a system preset: its own constants (SMs, tiles, NCCL's
    bus bandwidths, from the ``calibrated`` section of its file, ``systems.SYSTEM_FILES``) and
    the fitted factors of its ``family``.

    >>> efficiency("a100").sms, efficiency("h100").tile_n, efficiency("gb200").matrix == efficiency("b200").matrix
    (108, 256, True)
    """
    calibrated = _calibrated(name)
    mine = CALIBRATION["fitted"][calibrated["family"]]
    fitted = {k: Rational(mine[k]) for k in FITTED + GROUP_FITTED if k in mine}
    return Efficiency(**fitted, **{k: v for k, v in calibrated.items() if k not in ("family", "source")})
