"""A cost expression's exact value at a few sample points: a quick look that can only spare work.

Proving that a difference of two costs keeps one sign (``extrema.sign``) means expanding it, and
most differences of a calibrated step time (one NCCL protocol against another, one kernel tile
against another) have no sign: each wins for some sizes.  ``changes_sign`` finds that out
first, from the expression's value at ``POINTS``: every symbol 1, every symbol ``2**20``, and a
few mixed points where each symbol takes one of ``SCALES``, picked by a hash of its name (the
same in every process, so a formula is built the same way everywhere).

The values are exact rationals (GMP's ``mpq`` or ``Fraction``: ``rationals.RATIONAL``), never
floats, and they only ever say "undecided".

>>> from symbolic_cost.symbols import b, l
>>> changes_sign(b - l), changes_sign(b * l - 1), changes_sign(2 * b - b)
(True, False, False)
"""

from __future__ import annotations

import math
import operator
import zlib

from sympy import Add, Function, Max, Min, Mul, Piecewise, Pow, Rational, ceiling, floor
from sympy.core.function import AppliedUndef
from sympy.core.relational import Relational

from symbolic_cost.rationals import RATIONAL

SCALES = (1, 2, 16, 2**10, 2**20)
"""The values a symbol takes at a mixed point: a degree's, a batch's, a sequence's, a byte count's."""
MIXED = 6
"""How many mixed points ``POINTS`` holds."""


def _uniform(x: int):
    return lambda symbol: x


def _mixed(k: int):
    return lambda symbol: SCALES[zlib.crc32(f"{k}:{symbol.name}".encode()) % len(SCALES)]


POINTS = (_uniform(1), _uniform(2**20)) + tuple(_mixed(k) for k in range(MIXED))
"""The sample points, each a function from a symbol to its value."""


def changes_sign(expr, minus=None) -> bool:
    """Whether ``expr`` (less ``minus``, if given) is positive at one of ``POINTS`` and negative
    at another: then it has no sign, and proving one is wasted work.  With ``minus`` the
    difference is never built: each side's values are remembered, a SymPy ``Add`` of two step
    times is not."""
    found = values(expr)
    if minus is not None:
        found = [None if v is None or w is None else v - w for v, w in zip(found, values(minus))]
    return len({v > 0 for v in found if v}) == 2          # ``if v``: neither unknown nor 0


def values(expr) -> tuple:
    """``expr``'s exact value at each of ``POINTS`` (``rationals.RATIONAL``), ``None`` at a point
    where it does not know it.  No SymPy arithmetic: one walk of the tree for all the points,
    each shared part evaluated once (and remembered across calls).  Exact, since a float's
    rounding of a difference that is 0 at a point (``2b/3 + 10/3 - 4 m1`` at ``b = m1 = 1``)
    would see a sign that is not there.

    >>> from sympy import Rational
    >>> from symbolic_cost.symbols import b, l, m1
    >>> int(values(ceiling(b / 3) + l)[1]), values(2 * b / 3 + Rational(10, 3) - 4 * m1)[0] == 0
    (1398102, True)
    """
    found = _VALUES.get(expr)
    if found is None:
        if len(_VALUES) >= _KEPT:
            _VALUES.clear()
        found = _VALUES[expr] = _values(expr)
    return found


_VALUES: dict = {}
"""Values already taken: the differences a build compares share most of their parts."""
_KEPT = 2**18
"""Values ``_VALUES`` holds before it starts again."""

_EXACT = {Add: sum, Mul: math.prod, Max: max, Min: min}
_POWER = 64
"""The largest power taken exactly; a larger one, ``(31/32)**(32768*b)``, is left unknown."""
_UNKNOWN = (None,) * len(POINTS)


def _values(expr) -> tuple:
    if expr.is_Rational:
        return (RATIONAL(int(expr.p), int(expr.q)),) * len(POINTS)
    if expr.is_Symbol:
        return tuple(RATIONAL(point(expr)) for point in POINTS)
    if type(expr) in _EXACT:
        combine, columns = _EXACT[type(expr)], list(zip(*map(values, expr.args)))
        try:
            return tuple(map(combine, columns))
        except TypeError:              # a part unknown at some point: that point is unknown
            return tuple(None if None in column else combine(column) for column in columns)
    if isinstance(expr, Pow):
        return tuple(map(_power, values(expr.base), values(expr.exp)))
    if isinstance(expr, (ceiling, floor)):
        rounded = math.ceil if isinstance(expr, ceiling) else math.floor
        return tuple(None if v is None else RATIONAL(rounded(v)) for v in values(expr.args[0]))
    if isinstance(expr, Piecewise):
        return tuple(_arm(expr, point) for point in range(len(POINTS)))
    if isinstance(expr, Function) and not isinstance(expr, AppliedUndef):
        return _applied(expr)
    return _UNKNOWN


def _applied(expr) -> tuple:
    """A function of numbers (``Log2``, NCCL's ``TreeCorrection``) at each point: SymPy's own
    value of it at its arguments' values, where that is a rational number (arguments without
    symbols, such as a table, passed as they are)."""
    columns = [values(a) if a.free_symbols else (a,) * len(POINTS) for a in expr.args]
    return tuple(_rational(expr.func, args) for args in zip(*columns))


def _rational(func, args):
    if None in args:
        return None
    try:
        value = func(*(Rational(int(a.numerator), int(a.denominator)) if isinstance(a, RATIONAL) else a for a in args))
    except (ArithmeticError, ValueError, TypeError):      # no value there: unknown, as for any other part
        return None
    return RATIONAL(int(value.p), int(value.q)) if value.is_Rational else None


def _power(base, power):
    if base is None or power is None or power.denominator != 1 or abs(power) > _POWER:
        return None
    try:
        return base ** int(power)
    except ZeroDivisionError:
        return None


def _arm(expr, point: int):
    """A ``Piecewise``'s value at ``POINTS[point]``: its first arm whose condition holds."""
    for arm, condition in expr.args:
        holds = _holds(condition, point)
        if holds is None or holds:
            return None if holds is None else values(arm)[point]
    return None


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
            "!=": operator.ne}


def _holds(condition, point: int):
    """Whether ``condition`` (``True``, ``False`` or a comparison) holds at ``POINTS[point]``;
    ``None`` where a side's value is not known."""
    if condition in (True, False):
        return bool(condition)
    if isinstance(condition, Relational) and condition.rel_op in _COMPARE:
        sides = [values(side)[point] for side in condition.args]
        return None if None in sides else _COMPARE[condition.rel_op](sides[0], sides[1])
    return None
