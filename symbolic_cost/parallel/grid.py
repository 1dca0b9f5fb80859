"""Tensor-parallel grids beyond 1-D: the 2-D (SUMMA), 2.5-D and 3-D layouts, their axes and
divisibility rules, and the collectives along one axis of a grid.

============ ============== ======================= ======================= =====================
layout       devices        activation ``(b, l, e)`` weight ``(K, N)``      after
============ ============== ======================= ======================= =====================
``2d``       ``m1 x m2``    ``b/m1, l, e/m2``       ``K/m1 x N/m2``         Optimus (Xu et al.
                                                                             2021), SUMMA (van de
                                                                             Geijn, Watts 1997)
``2.5d``     ``mq mq md``   ``b/(md mq), l, e/mq``  ``K/mq x N/mq``, one    Tesseract (Wang et
                                                     copy per depth layer    al. 2021)
``3d``       ``mq mq mq``   ``b/mq^2, l, e/mq``     ``K/mq^2 x N/mq``       Bian et al. 2021
============ ============== ======================= ======================= =====================

Rows of the activations (whole sequences, so attention stays local) are split over ``rows``
devices, its columns (the width, whole heads) over ``cols``; ``rows x cols`` is every device of
the grid.  A grid records the order of its axes in the rank numbering, innermost first: an
axis's members are ``stride`` ranks apart, which decides whether its collectives stay inside
an NVLink domain (``Collective.stride``).  ``panel`` is SUMMA's panel width (2-D and 2.5-D):
each product runs as ``K/panel`` panel broadcasts; by default one panel per block of the finer
split, ``K / lcm(row and column degree)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Function, Integer, ilcm, integer_nthroot, sympify

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, count, divides, positive_dims
from symbolic_cost.cost import Collective, collective, exact

KINDS = ("1d", "2d", "2.5d", "3d")
"""Tensor layouts: Megatron's 1-D (``blocks``) and the grids of this module."""

AXES = {"2d": ("rows", "cols"), "2.5d": ("rows", "cols", "depth"), "3d": ("i", "j", "k")}
"""Each grid's axes.  3-D: a device ``(i, j, k)``; its activations' rows are split over
``(i, j)`` and columns over ``k`` before a linear layer, and over ``(i, k)`` and ``j`` after
it (consecutive linear layers swap the roles of ``j`` and ``k``)."""

ORDER = {"2d": ("cols", "rows"), "2.5d": ("cols", "rows", "depth"), "3d": ("j", "k", "i")}
"""Default rank order, innermost axis first: a row of the 2-D grid (the activations' panel
broadcasts) and the 3-D activation axes ``j, k`` are neighbours."""

DEGREES = {"2d": ("m1", "m2"), "2.5d": ("mq", "md"), "3d": ("mq",)}
"""The degree symbols each grid is written in (``symbols``)."""


@dataclass(frozen=True)
class Grid:
    """A tensor-parallel grid: ``kind``, the size of each axis, the rank order and the panel."""

    kind: str
    sizes: tuple[tuple[str, Expr], ...]
    order: tuple[str, ...]
    panel: Expr | None = None

    def size(self, axis: str) -> Expr:
        return dict(self.sizes)[axis]

    def stride(self, axis: str) -> Expr:
        """Ranks between neighbours along ``axis``: the product of the axes inside it."""
        out = Integer(1)
        for inner in self.order[:self.order.index(axis)]:
            out *= self.size(inner)
        return out

    @property
    def devices(self) -> Expr:
        out = Integer(1)
        for _, size in self.sizes:
            out *= size
        return out

    @property
    def rows(self) -> Expr:
        """Devices the activations' rows (the batch) are split over."""
        return self.devices / self.cols

    @property
    def cols(self) -> Expr:
        """Devices the activations' columns (the width, whole heads) are split over."""
        return self.size("cols" if self.kind != "3d" else "k")

    @property
    def degrees(self) -> dict:
        """The degree symbols' values: ``{"m1": ..., "m2": ...}`` for a 2-D grid, and so on."""
        if self.kind == "2d":
            return {"m1": self.size("rows"), "m2": self.size("cols")}
        if self.kind == "2.5d":
            return {"mq": self.size("rows"), "md": self.size("depth")}
        return {"mq": self.size("i")}

    def along(self, axis: str, kind: str, elements, es, pass_: str, conventions, repeats=1) -> list[Collective]:
        """One collective among the devices that differ only in ``axis`` (the one volume rule,
        ``cost.collective``, with the axis's size as group and its stride)."""
        return collective(kind, elements, es, self.size(axis), pass_, conventions, repeats=repeats,
                          stride=self.stride(axis))

    def subs(self, values) -> "Grid":
        values = S.resolve_names(values)
        panel = None if self.panel is None else sympify(self.panel).subs(values)
        return Grid(self.kind, tuple((a, sympify(s).subs(values)) for a, s in self.sizes), self.order, panel)


def make_grid(kind: str, *, m1=None, m2=None, mq=None, md=None, order=None, panel=None) -> Grid:
    """The grid of ``kind`` from its degrees (``DEGREES``): ``make_grid("2d", m1=4, m2=2)``.

    ``order`` lists the axes innermost first (default ``ORDER``); ``panel`` is SUMMA's panel
    width.  A 3-D grid is a cube of side ``mq``, a 2.5-D grid ``mq x mq x md``.

    >>> make_grid("2.5d", mq=2, md=3).devices
    12
    >>> make_grid("3d", mq=2, m1=4)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: a 3d grid takes mq only (a cube mq x mq x mq); got m1=4
    """
    if not isinstance(kind, str) or kind not in AXES:
        raise InputError(f"tensor grid must be one of {', '.join(AXES)}, got {kind!r}", "kind")
    given = {name: value for name, value in dict(m1=m1, m2=m2, mq=mq, md=md).items() if value is not None}
    wanted = DEGREES[kind]
    shape = {"2d": "rows m1 x columns m2", "2.5d": "a square mq x mq, md deep", "3d": "a cube mq x mq x mq"}[kind]
    extra, missing = set(given) - set(wanted), [name for name in wanted if name not in given]
    if extra or missing:
        wrong = "; ".join(filter(None, [f"got {', '.join(f'{k}={given[k]}' for k in sorted(extra))}" if extra else "",
                                        f"missing {', '.join(missing)}" if missing else ""]))
        raise InputError(f"a {kind} grid takes {' and '.join(wanted)} only ({shape}); {wrong}", "kind")
    degrees = positive_dims(**given)
    sizes = {"2d": (("rows", degrees.get("m1")), ("cols", degrees.get("m2"))),
             "2.5d": (("rows", degrees.get("mq")), ("cols", degrees.get("mq")), ("depth", degrees.get("md"))),
             "3d": tuple((axis, degrees.get("mq")) for axis in AXES["3d"])}[kind]
    order = tuple(order or ORDER[kind])
    if sorted(order) != sorted(AXES[kind]):
        raise InputError(f"order must list the axes {', '.join(AXES[kind])} once each, got {order}", "order")
    if panel is not None and kind == "3d":
        raise InputError("panel is SUMMA's panel width: 2d and 2.5d grids only", "panel")
    return Grid(kind, sizes, order, None if panel is None else positive_dims(panel=panel)["panel"])


def symbolic_grid(kind: str, order=None, panel=None) -> Grid:
    """The grid of ``kind`` in its degree symbols (``m1 x m2``, ``mq x mq x md``, ``mq^3``)."""
    return make_grid(kind, order=order, panel=panel, **{name: S.BY_NAME[name] for name in DEGREES[kind]})


def grid_for(kind: str, devices: int, depth: int = 1) -> Grid:
    """A grid of ``kind`` on exactly ``devices`` devices: 3-D needs a cube, 2.5-D a square times
    ``depth``, 2-D a square (Optimus' ``q x q``; ``make_grid`` takes any ``m1 x m2``).

    >>> grid_for("3d", 27).degrees
    {'mq': 3}
    >>> grid_for("3d", 12)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: a 3d grid needs a cube number of devices (mq x mq x mq), got 12
    """
    if not isinstance(kind, str) or kind not in AXES:
        raise InputError(f"tensor grid must be one of {', '.join(AXES)}, got {kind!r}", "kind")
    power, devices, depth = 3 if kind == "3d" else 2, count(devices, "devices"), count(depth, "md")
    if kind == "2.5d":
        if depth < 1 or devices % depth:
            raise InputError(f"the 2.5d depth md={depth} must divide the {devices} devices", "md")
        devices //= depth
    side, exact_root = integer_nthroot(devices, power)
    if not exact_root:
        what = "a cube" if power == 3 else "a square"
        extra = f" times the depth md={depth}" if kind == "2.5d" else ""
        shape = "mq x mq x mq" if power == 3 else ("mq x mq x md" if kind == "2.5d" else "m1 x m2 with m1 = m2")
        raise InputError(f"a {kind} grid needs {what} number of devices{extra} ({shape}), "
                         f"got {devices * (depth if kind == '2.5d' else 1)}", "devices")
    degrees = {"2d": dict(m1=side, m2=side), "2.5d": dict(mq=side, md=depth), "3d": dict(mq=side)}[kind]
    return make_grid(kind, **degrees)


def grid_rules(grid: Grid) -> tuple[tuple[str, str, str], ...]:
    """``(divisor, dividend, why)`` rules of a transformer layer on ``grid``; the divisors are
    the degree names (``"md*mq"``, ``"mq^2"`` for products) and dividends the layer's names."""
    heads = "each column of the grid computes whole attention heads"
    if grid.kind == "2d":
        return (("m1", "b", "the grid's rows split the batch (whole sequences)"),
                ("m2", "e", "the grid's columns split the width"),
                ("m1", "e", "each grid row holds e/m1 rows of a weight"),
                ("m1", "f", "each grid row holds f/m1 rows of fc2's weight"),
                ("m2", "f", "the grid's columns split the MLP width"),
                ("m2", "h", heads), ("m2", "kv_heads", heads))
    if grid.kind == "2.5d":
        return (("md*mq", "b", "the depth and rows of the grid split the batch (whole sequences)"),
                ("mq", "e", "the grid's rows and columns split the width"),
                ("mq", "f", "the grid's rows and columns split the MLP width"),
                ("mq", "h", heads), ("mq", "kv_heads", heads))
    return (("mq^2", "b", "two axes of the cube split the batch (whole sequences)"),
            ("mq^2", "e", "a weight's rows are split over two axes of the cube"),
            ("mq^2", "f", "fc2's weight rows are split over two axes of the cube"),
            ("mq", "h", heads), ("mq", "kv_heads", heads))


def check_grid(dims: dict, grid: Grid) -> dict:
    """Make ``dims`` (``b``, ``l``, ``e``, ...) exact and positive and apply ``grid_rules``
    wherever both sides are present and the answer is decidable; returns the exact dims.

    >>> check_grid(dict(b=4, e=64, h=8), make_grid("2d", m1=3, m2=2))
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: m1 must divide b (got m1=3, b=4); the grid's rows split the batch (whole sequences)
    """
    dims = positive_dims(**dims)
    degrees = dict(grid.degrees)
    if grid.kind == "2.5d":
        degrees["md*mq"] = degrees["md"] * degrees["mq"]
    if grid.kind == "3d":
        degrees["mq^2"] = degrees["mq"] ** 2
    values = {**dims, **degrees}
    for divisor, dividend, why in grid_rules(grid):
        if dividend in dims:
            divides(values, divisor, dividend, why)
    return dims


class Lcm(Function):
    """``lcm(a, b)`` of two degrees: exact once both are integers (or equal), left as it is
    before (SymPy's ``lcm`` of two symbols is their product, which numbers with a common factor
    substituted later would keep).  Relaxed to reals, for a derivative or a numeric root, it is
    ``a b`` (coprime values).

    >>> from symbolic_cost.symbols import m1, m2
    >>> Lcm(m1, m2).subs({m1: 4, m2: 6}), Lcm(m1, m1)
    (12, m1)
    """

    def _at_integers(cls, a, b):
        if a.is_Integer and b.is_Integer:
            return Integer(ilcm(int(a), int(b)))
        if a == b:
            return a
        return None

    eval = classmethod(_at_integers)   # SymPy's hook for a Function's value at its arguments (no text)

    def _eval_is_integer(self):
        return True

    def _eval_is_positive(self):
        return True

    def fdiff(self, argindex=1):
        return self.args[2 - argindex]

    def _numpycode(self, printer):
        a, b = (printer._print(x) for x in self.args)
        return f"numpy.lcm(numpy.asarray({a}).astype(numpy.int64), numpy.asarray({b}).astype(numpy.int64))"

    def _mpmathcode(self, printer):
        a, b = (printer._print(x) for x in self.args)
        return f"(({a})*({b}))"


def panels(grid: Grid, k, name: str) -> Expr:
    """SUMMA's panel width for a product over ``k`` (2-D, 2.5-D): the grid's ``panel``, which
    must divide both block widths ``k/rows`` and ``k/cols`` of the product, or by default
    ``k / Lcm(rows, cols)`` (one block when the grid is square)."""
    r, c = grid.size("rows"), grid.size("cols")
    if grid.panel is None:
        return exact(k, name) / Lcm(r, c)
    for split, side in ((r, "rows"), (c, "cols")):
        if (exact(k, name) / split / grid.panel).is_integer is False:
            raise InputError(f"panel must divide the block widths k/rows and k/cols of {name}'s product over "
                             f"k={k} (got panel={grid.panel}, {side}={split})", "panel")
    return grid.panel
