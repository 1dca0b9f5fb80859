"""Kernel-level time model: tiled GEMM traffic, memory latency and launch overhead.

The roofline of ``hardware.times`` charges a matmul "read every input once".
DeepFlow (Ardalani, Pal, Gupta, arXiv 2211.03309) refines it, and so does this
module, with every quantity an exact expression:

1. **Tiled traffic.**  A product ``(m, k) x (k, n)`` runs in square tiles of
   edge ``X``, one output tile at a time, streaming ``k``.  The ``(m, k)``
   operand A is read once per column of output tiles, ``ceil(n/X)`` times; the
   ``(k, n)`` operand B once per row of output tiles, ``ceil(m/X)`` times; the
   output C is written once.  When ``k <= X`` a row panel of A fits one tile
   and stays resident across its output row, so A is read once::

       bytes = es * (m*k*r_A + k*n*r_B + m*n*r_C)
       (r_A, r_B, r_C) = (1 if k <= X else ceil(n/X),  ceil(m/X),  1)

   DRAM traffic uses the tile three of which fill the L2 (``X1``); L2 traffic
   the tile three of which fill the shared memory (``X2``).
2. **Orientation.**  The product and its transpose ``(n, k) x (k, m)`` move
   different bytes; the faster one is kept (a tie keeps the original).
3. **Roofline with latency and launches.**  A kernel is memory bound when
   ``flops / dram_bytes < peak / bandwidth``; then it takes
   ``dram_bytes / B_hbm + memory_latency + l2_bytes / B_l2``, else
   ``flops / peak``.  Every launch adds ``launch_overhead``.

With ``gemm_output_overhead`` a GEMM also costs DeepFlow's
``15 + 5 ceil(k/X2)`` operations per output element (address arithmetic and
the reduction over ``k`` tiles).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from sympy import (And, Expr, GreaterThan, Heaviside, Integer, LessThan, Not, Or, Piecewise, ceiling,
                   floor, log)

from symbolic_cost import conventions as conv
from symbolic_cost.cost import Cost, Gemm, exact
from symbolic_cost.extrema import minimum
from symbolic_cost.ops.matmul import matmul_flops, product_flops
from symbolic_cost.checks import InputError, counts, element_size, positive, positive_dims
from symbolic_cost.timing import attention_kernels
from symbolic_cost.timing.systems import get_system


def tile_edge(capacity, element_bytes, operands=3) -> Expr:
    """Edge ``X`` of the largest power-of-two square tile such that ``operands``
    tiles of ``element_bytes`` values fit in ``capacity`` bytes:
    ``X = 2**floor(log2(sqrt(capacity / (operands * element_bytes))))``.

    >>> tile_edge(9 * 2**20, 4), tile_edge(12 * 2**20, 4)
    (512, 1024)
    """
    capacity, element_bytes = positive(capacity, "capacity"), element_size(element_bytes, "element_bytes")
    tiles = capacity / (positive_dims(operands=operands)["operands"] * element_bytes)
    if not tiles.is_number:
        return 2 ** floor(log(tiles, 2) / 2)
    if tiles < 1:
        raise InputError(f"capacity {capacity} B holds no {operands} tiles of one {element_bytes}-byte value",
                         "capacity")
    edge = Integer(1)
    while (2 * edge) ** 2 <= tiles:   # exact integer walk: no float log at powers of two
        edge *= 2
    return edge


class Reloads(NamedTuple):
    """How many times each matrix of a tiled product crosses a memory level."""

    a: Expr   # the (m, k) operand
    b: Expr   # the (k, n) operand
    c: Expr   # the (m, n) output


def choose(condition, then, otherwise):
    """``then`` or ``otherwise`` if ``condition`` is decided, else a Piecewise.

    A condition that contains a Piecewise makes SymPy fold it into boolean
    cases, which takes minutes on a whole model's times; a non-strict
    comparison ``x >= y`` of that kind becomes ``H(x - y)`` instead, with the
    Heaviside step ``H(0) = 1``.  The conditions of this module are written
    without Piecewise (the indicator in ``reloads``, the cases of
    ``_keeps_original``).
    """
    if condition in (True, False):
        return then if condition else otherwise
    if condition.has(Piecewise) and isinstance(condition, (GreaterThan, LessThan)):
        step = Heaviside(condition.gts - condition.lts, 1)
        return step * then + (1 - step) * otherwise
    return Piecewise((then, condition), (otherwise, True))


def reloads(m, k, n, tile) -> Reloads:
    """Reload factors of ``(m, k) x (k, n)`` in ``tile x tile`` output tiles (module docstring).

    ``r_A`` is ``1 + (ceil(n/X) - 1) [k > X]``, the indicator written
    ``min(1, ceil(k/X) - 1)`` so that a symbolic ``k`` gives no Piecewise.

    >>> reloads(512, 39936, 79872, 512)
    Reloads(a=156, b=1, c=1)
    >>> reloads(39936, 512, 79872, 512)
    Reloads(a=1, b=78, c=1)
    """
    m, k, n = counts(m=m, k=k, n=n).values()             # sizes of a product: never negative
    tile = positive_dims(tile=tile)["tile"]
    k_exceeds_tile = minimum(1, ceiling(k / tile) - 1)
    return Reloads(1 + (ceiling(n / tile) - 1) * k_exceeds_tile, ceiling(m / tile), Integer(1))


def tiled_traffic(m, k, n, tile, element_bytes) -> Expr:
    """Bytes a tiled ``(m, k) x (k, n)`` product moves across one memory level:
    ``es (m k r_A + k n r_B + m n r_C)``.

    >>> tiled_traffic(512, 39936, 79872, 512, 4)
    25681723392
    """
    r = reloads(m, k, n, tile)
    return element_size(element_bytes, "element_bytes") * (m * k * r.a + k * n * r.b + m * n * r.c)


def output_overhead(m, k, n, tile) -> Expr:
    """DeepFlow's extra operations of a tiled GEMM: ``15 + 5 ceil(k/X2)`` per output element.

    >>> output_overhead(512, 39936, 79872, 2048)
    4702863360
    """
    m, k, n = counts(m=m, k=k, n=n).values()
    return m * n * (15 + 5 * ceiling(k / positive_dims(tile=tile)["tile"]))


@dataclass(frozen=True)
class Kernel:
    """One launched kernel: its FLOPs, DRAM and L2 bytes, and launches (0 for a step
    fused into another kernel)."""

    name: str
    flops: Expr
    dram_bytes: Expr
    l2_bytes: Expr = Integer(0)
    launches: Expr = Integer(1)
    engine: str = "matrix"

    def __post_init__(self):
        for name in ("flops", "dram_bytes", "l2_bytes", "launches"):
            object.__setattr__(self, name, exact(getattr(self, name), name))

    @property
    def intensity(self) -> Expr:
        """FLOPs per DRAM byte."""
        return self.flops / self.dram_bytes


def _peak(system, engine: str) -> Expr:
    """FLOP/s of an engine: ``"matrix"``, ``"fp8"`` (FP8 products on the matrix units, at the
    system's FP8 rate where it has one) or the vector units."""
    if engine == "fp8" and system.fp8_flops:
        return system.fp8_flops
    return system.matrix_flops if engine in ("matrix", "fp8") else system.vector_flops


def memory_time(kernel: Kernel, system) -> Expr:
    """Seconds of the kernel's traffic: ``dram / B_hbm + l2 / B_l2`` (no latency)."""
    system = get_system(system)
    l2 = kernel.l2_bytes / system.l2_bandwidth if kernel.l2_bytes != 0 else Integer(0)
    return kernel.dram_bytes / system.hbm_bandwidth + l2


def _roofline_cases(kernel: Kernel, system) -> tuple:
    """``(memory_bound, memory_time_with_latency, compute_time)`` of one kernel."""
    system = get_system(system)
    if kernel.l2_bytes != 0:
        system.require("tiled L2 traffic", "l2_bandwidth")
    compute = kernel.flops / _peak(system, kernel.engine)
    memory_bound = compute < kernel.dram_bytes / system.hbm_bandwidth
    return memory_bound, memory_time(kernel, system) + system.memory_latency, compute


def roofline(kernel: Kernel, system) -> Expr:
    """Seconds without launch overhead: memory bound when ``flops/peak < dram/B_hbm``
    (``flops/dram`` below the inflection point ``peak/B_hbm``), then traffic plus
    ``memory_latency``; otherwise ``flops/peak``."""
    memory_bound, memory, compute = _roofline_cases(kernel, system)
    return choose(memory_bound, memory, compute)


def kernel_time(kernel: Kernel, system) -> Expr:
    """``roofline + launches * launch_overhead``."""
    system = get_system(system)
    return roofline(kernel, system) + kernel.launches * system.launch_overhead


def tiles(system, element_bytes) -> tuple[Expr, Expr]:
    """``(X1, X2)``: tile edges of DRAM traffic (three fit the L2) and of L2 traffic
    (three fit the shared memory)."""
    system = get_system(system)
    system.require("the tiled GEMM model", "l2_capacity", "shared_memory_capacity")
    return (tile_edge(system.l2_capacity, element_bytes),
            tile_edge(system.shared_memory_capacity, element_bytes))


def gemm_orientations(m, k, n, system, conventions=conv.DEFAULT, element_bytes=2, count=1,
                      name="gemm", engine="matrix") -> tuple[Kernel, Kernel]:
    """The kernels of ``count`` products ``(m, k) x (k, n)`` as written and transposed
    (``(n, k) x (k, m)``): same FLOPs, different tiled traffic."""
    conventions, system = conv.get(conventions), get_system(system)
    m, k, n, count = counts(m=m, k=k, n=n, count=count).values()
    x1, x2 = tiles(system, element_bytes)
    flops = matmul_flops(m, k, n, conventions)
    if conventions.gemm_output_overhead:
        flops += output_overhead(m, k, n, x2)
    count = exact(count, "count")
    return tuple(Kernel(name, count * flops, count * tiled_traffic(rows, k, cols, x1, element_bytes),
                        count * tiled_traffic(rows, k, cols, x2, element_bytes), engine=engine)
                 for rows, cols in ((m, n), (n, m)))


def _keeps_original(original: Kernel, transposed: Kernel, system):
    """Whether the original orientation is at least as fast as the transposed one, as a
    condition free of Piecewise: the four cases of which kernel is memory bound (both have the
    same FLOPs and one launch each)."""
    bound_o, memory_o, compute = _roofline_cases(original, system)
    bound_t, memory_t, _ = _roofline_cases(transposed, system)
    return Or(And(bound_o, bound_t, memory_o <= memory_t), And(bound_o, Not(bound_t), memory_o <= compute),
              And(Not(bound_o), bound_t, compute <= memory_t), And(Not(bound_o), Not(bound_t)))


def _choice(m, k, n, system, conventions, element_bytes, count, name, engine="matrix"):
    """Both orientations and the condition that keeps the original."""
    original, transposed = gemm_orientations(m, k, n, system, conventions, element_bytes, count, name, engine)
    return original, transposed, _keeps_original(original, transposed, system)


def gemm(m, k, n, system, conventions=conv.DEFAULT, element_bytes=2, count=1, name="gemm") -> Kernel:
    """The faster orientation of ``gemm_orientations`` (a tie keeps the original).

    >>> from symbolic_cost.timing.hardware import SYSTEMS
    >>> g = gemm(4096, 4096, 4096, SYSTEMS["a100"])
    >>> g.flops, g.dram_bytes
    (137422176256, 167772160)
    """
    original, transposed, keep = _choice(m, k, n, system, conventions, element_bytes, count, name)
    return Kernel(name, *(choose(keep, getattr(original, f), getattr(transposed, f))
                          for f in ("flops", "dram_bytes", "l2_bytes")))


def product_times(g: Gemm, system, conventions=conv.DEFAULT, name="gemm", engine="matrix") -> tuple[Expr, Expr]:
    """``(t_mem, t)`` of one ``Gemm`` record in its faster orientation: traffic time and kernel time.
    Times of the two orientations are chosen directly (not through ``gemm``'s chosen fields), so
    no condition ends up inside a roofline's condition."""
    original, transposed, keep = _choice(g.m, g.k, g.n, system, conventions, g.element_bytes, g.count, name, engine)
    return (choose(keep, memory_time(original, system), memory_time(transposed, system)),
            choose(keep, kernel_time(original, system), kernel_time(transposed, system)))


def pass_times(cost: Cost, pass_: str, system, conventions=conv.DEFAULT) -> tuple[Expr, Expr]:
    """``(t_mem, t)`` of one row of a block in ``pass_`` under the kernel-level model, times
    ``Cost.runs`` for a row that runs or not by a symbol (its kernels' latency and launch too).

    A row with matrix products runs one tiled GEMM kernel per product (a grouped GEMM one per
    expert, ``Gemm.launched``: each reads its own weights); its other
    FLOPs (bias adds, grouped-query sums) are fused into them and add
    ``rest / peak``.  A row without products is one kernel moving ``mem_<pass>``, none when it
    has neither FLOPs nor bytes in that pass (a cast fused into the norm before it).
    An FP8 recipe's products (``Cost.fp8``) run at the system's FP8 rate; 4-bit products
    (``Cost.fp4``) are refused: this model has no FP4 tiles.
    """
    if cost.fp4:
        raise InputError("kernel_time='tiled' does not time 4-bit (NVFP4) products; use the default "
                         "kernel_time", "kernel_time")
    times = _running_times(cost, pass_, system, conventions)
    return times if cost.runs is None else tuple(cost.runs * t for t in times)


def _running_times(cost: Cost, pass_: str, system, conventions) -> tuple[Expr, Expr]:
    """``pass_times`` of a row that runs."""
    flops, moved = getattr(cost, f"flops_{pass_}"), getattr(cost, f"mem_{pass_}")
    products = [] if cost.fused else [g for g in cost.gemms if g.pass_ == pass_]
    engine = "fp8" if cost.fp8 and cost.engine == "matrix" else cost.engine
    if not products:
        if flops == 0 and moved == 0:          # nothing to do in this pass: no kernel launched
            return Integer(0), Integer(0)
        work = attention_kernels.executed_flops(cost, pass_) if cost.fused else flops     # a flash kernel: its tiles
        kernel = Kernel(cost.name, work, moved, engine=engine)
        return memory_time(kernel, system), kernel_time(kernel, system)
    rest = (flops - product_flops(products, pass_, conventions)) / _peak(system, engine)
    each = [product_times(g.launched(), system, conventions, cost.name, engine) for g in products]
    return sum((m for m, _ in each), Integer(0)), sum((t for _, t in each), rest)
