"""A linear layer ``Y = X W (+ B)`` on one device of a 2-D, 2.5-D or 3-D tensor-parallel grid.

``X`` is ``(T, K)`` (``T`` tokens), ``W`` is ``(K, N)``.  Per device (``R = rows``, ``C = cols``
of the grid, ``m`` the local rows):

=========== ====================================== ============================================
layout      forward                                backward
=========== ====================================== ============================================
2d (SUMMA,  for each of ``K/w`` panels: broadcast  the same broadcasts again; ``dX`` panels
R x C)      ``X``'s panel ``(m, w)`` along the     ``dY W_p^T`` reduced along the row to their
            row (``C`` devices) and ``W``'s        owners, ``dW`` panels ``X_p^T dY`` along the
            ``(w, N/C)`` along the column          column; the bias gradient allreduced along
            (``R``); multiply-accumulate           the column
2.5d        the 2-D algorithm in each of the       as 2-D, then ``dW`` (and the bias gradient)
            ``md`` layers on ``T/md`` tokens       allreduced over the ``md`` copies
3d          allgather ``X`` along ``j`` to         allgather ``dY`` along ``k``; ``dX``
            ``(T/q, K/q)``, ``W`` along ``i`` to   reduce-scattered along ``j``, ``dW`` along
            ``(K/q, N/q)``; multiply;              ``i``; the bias gradient allreduced along
            reduce-scatter ``Y`` along ``k``       ``i`` and ``k``
=========== ====================================== ============================================

(a 3-D layer whose input is the output of another, ``flip=True``, swaps ``j`` and ``k``).
SUMMA keeps its own blocks only (the panels are broadcast again in backward, as Optimus
does); 3-D keeps the gathered ``X`` and ``W`` (as Colossal-AI does).  Every product's FLOPs
come from ``ops.linear`` on the local shapes: the panels of a SUMMA product accumulate into
one ``(m, K) x (K, N/C)`` product, the same count; the reductions add their own adds
(``Collective.reduction_flops``).  A bias lives with its output columns, one copy on every
device that holds them.  ``act_in_other`` is what a device receives to multiply (the other
devices' panels or shards).

The backward splits as ``ops.linear``'s: ``dX`` and the reductions of its panels or shards
are activation gradient; ``dW``, the bias gradient and the reductions that sum them (SUMMA's
``dW`` panels, 2.5-D's depth allreduce, 3-D's reduce-scatter along ``i``, the bias
allreduces) are weight gradient (``Cost.flops_wgrad``).
"""

from __future__ import annotations

from sympy import Expr, Integer

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.layout import attach
from symbolic_cost.checks import InputError
from symbolic_cost.cost import Cost, exact, make_cost
from symbolic_cost.ops import linear
from symbolic_cost.parallel.grid import Grid, panels


def grid_linear(grid: Grid, tokens, k, n, *, bias=True, flip=False, es=2, conventions=conv.DEFAULT,
                name="linear") -> Cost:
    """``Y = X W (+ B)`` with ``X (tokens, k)`` and ``W (k, n)`` on one device of ``grid``
    (see the module table); ``flip`` marks a 3-D layer that takes another's output.

    >>> from symbolic_cost.parallel.grid import make_grid
    >>> [c.kind for c in grid_linear(make_grid("2d", m1=2, m2=2), 8, 8, 8).collectives]
    ['broadcast', 'broadcast', 'broadcast', 'broadcast', 'reduce', 'reduce', 'allreduce']
    """
    tokens, k, n, es = (exact(v, x) for v, x in ((tokens, "tokens"), (k, "k"), (n, "n"), (es, "es")))
    conventions = conv.get(conventions)
    _check_blocks(grid, tokens, k, n, name)
    build = _cube if grid.kind == "3d" else _summa
    cost, collectives, weight_grads = build(grid, tokens, k, n, bias, flip, es, conventions, name)
    return attach(cost, collectives, conventions, weight_grads)


def _check_blocks(grid: Grid, tokens, k, n, name) -> None:
    """Every block of ``X``, ``W`` and ``Y`` must be whole (when decidable)."""
    r, c = grid.rows, grid.cols
    w_rows = grid.size("rows") if grid.kind != "3d" else grid.size("i") * grid.size("k")
    for value, split, what in ((tokens, r, "tokens"), (k, c, f"{name}'s input width k"),
                               (k, w_rows, f"{name}'s weight rows k"), (n, c, f"{name}'s output width n")):
        if (value / split).is_integer is False:
            raise InputError(f"{what}={value} must split evenly over {split} devices of the {grid.kind} grid",
                             what.split()[-1])


def _summa(grid: Grid, tokens, k, n, bias, flip, es, conventions, name):
    """SUMMA on the ``rows x cols`` grid (one layer of a 2.5-D grid: ``T/md`` tokens): the
    Cost, its collectives, and those that sum parameter gradients."""
    r, c = grid.size("rows"), grid.size("cols")
    m, cols = tokens / grid.rows, n / c
    w = panels(grid, k, name)
    steps = k / w
    own_x, own_w, vector = m * k / c, k / r * cols, cols if bias else Integer(0)
    received = m * (k - k / c) + (k - k / r) * cols
    along = lambda axis, kind, elements, pass_: grid.along(axis, kind, elements, es, pass_, conventions,  # noqa: E731
                                                            repeats=steps)
    panels_fwd = along("cols", "broadcast", m * w, "fwd") + along("rows", "broadcast", w * cols, "fwd")
    panels_bwd = along("cols", "broadcast", m * w, "bwd") + along("rows", "broadcast", w * cols, "bwd")
    input_sums, weight_sums = along("cols", "reduce", m * w, "bwd"), along("rows", "reduce", w * cols, "bwd")
    shared = shared_gradients(grid, "cols", vector, es, conventions)
    if grid.kind == "2.5d":            # one copy of W per depth layer
        shared = grid.along("depth", "allreduce", own_w, es, "bwd", conventions) + shared
    cost = _cost(linear(m, 1, k, cols, bias=bias, es=es, conventions=conventions, name=name), es,
                 own_x=own_x, own_w=own_w + vector, own_y=m * cols, received=received,
                 bwd_extra=2 * received)
    return cost, panels_fwd + panels_bwd + input_sums, weight_sums + shared


def _cube(grid: Grid, tokens, k, n, bias, flip, es, conventions, name):
    """3-D: gather ``X`` and ``W``, multiply, reduce-scatter ``Y`` (backward the mirror image):
    the Cost, its collectives, and those that sum parameter gradients."""
    q = grid.size("i")
    gather, scatter = ("k", "j") if flip else ("j", "k")
    m, kq, nq = tokens / q, k / q, n / q             # the gathered blocks' sides
    vector = nq if bias else Integer(0)
    own_x, own_w, own_y = m * kq / q, kq * nq / q, m * nq / q
    gathered = m * kq + kq * nq
    collectives = (grid.along(gather, "allgather", m * kq, es, "fwd", conventions)
                   + grid.along("i", "allgather", kq * nq, es, "fwd", conventions)
                   + grid.along(scatter, "reducescatter", m * nq, es, "fwd", conventions)
                   + grid.along(scatter, "allgather", m * nq, es, "bwd", conventions)
                   + grid.along(gather, "reducescatter", m * kq, es, "bwd", conventions))
    weight_grads = (grid.along("i", "reducescatter", kq * nq, es, "bwd", conventions)
                    + shared_gradients(grid, gather, vector, es, conventions))   # Y's columns: gather
    products = linear(m, 1, kq, nq, bias=False, es=es, conventions=conventions, name=name)
    cost = _cost(products, es, own_x=own_x, own_w=own_w + vector, own_y=own_y, received=gathered - own_x - own_w,
                 kept=gathered, bwd_extra=(m * nq - own_y) + (m * kq - own_x) + (kq * nq - own_w),
                 fwd_extra=m * nq - own_y)
    adds = own_y if bias else 0                       # the bias joins the scattered block; dB sums it back
    return cost.plus(flops_fwd=adds, flops_bwd=adds, flops_wgrad=adds), collectives, weight_grads


def _cost(products: Cost, es, *, own_x, own_w, own_y, received, bwd_extra, kept=None, fwd_extra=0) -> Cost:
    """The grid layer's Cost: the FLOPs and products of ``products`` (``ops.linear`` on the local
    shapes), the blocks the device stores (elements), and the traffic rule of ``make_cost`` plus
    what the grid adds (``received`` panels or shards read; partial sums written)."""
    cost = make_cost(products.name, "matrix", flops_fwd=products.flops_fwd, flops_bwd=products.flops_bwd,
                     flops_wgrad=products.flops_wgrad,
                     act_in=own_x * es, act_in_other=received * es, act_out=own_y * es,
                     act_buffer=(own_x if kept is None else kept) * es, weights=own_w * es,
                     act_grads=(own_y + own_x) * es, gemms=products.gemms)
    return cost.plus(mem_fwd=fwd_extra * es, mem_bwd=bwd_extra * es)


def vector_axes(grid: Grid, cols_axis: str) -> tuple[str, ...]:
    """The axes along which a vector of ``cols_axis``'s columns (a bias, a norm's gain) is
    copied: every axis but ``cols_axis``."""
    return tuple(axis for axis, _ in grid.sizes if axis != cols_axis)


def shared_gradients(grid: Grid, cols_axis: str, elements, es, conventions) -> list:
    """The backward allreduces that sum a copied vector's gradient: one along each axis of
    ``vector_axes`` (none for an empty vector)."""
    if elements == 0:
        return []
    return [c for axis in vector_axes(grid, cols_axis)
            for c in grid.along(axis, "allreduce", elements, es, "bwd", conventions)]


def local_rows(grid: Grid, tokens) -> Expr:
    """Rows of the activations on one device: ``tokens / rows``."""
    return exact(tokens, "tokens") / grid.rows
