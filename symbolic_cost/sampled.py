"""A cost expression's exact value at a few sample points: a quick look that can only spare work.

Proving that a difference of two costs keeps one sign (``extrema.sign``) means expanding it, and
most differences of a calibrated step time (one NCCL protocol against another, one kernel tile
against another) have no sign: each wins for some sizes.  ``changes_sign`` finds that out
first, from the expression's value at ``POINTS``: every symbol 1, every symbol ``2**20``, and a
few mixed points where each symbol takes one of ``SCALES``, picked by a hash of its name (the
same in every process, so a formula is built the same way everywhere).  A difference that
survives them is looked at once more before it is expanded (``changes_sign_alone``): with one of
its symbols far from the others, where a term that one degree alone drives (``-floor(ep/2048)``)
changes its sign.

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
    if len(_STANDARD.known) >= _KEPT:
        _STANDARD.known.clear()
    return _STANDARD.values(expr)


def changes_sign_alone(expr) -> bool:
    """``changes_sign`` at the points where one of ``expr``'s symbols is ``2**20`` and the
    others 1, or one is 1 and the others ``2**20``: a cost that one degree alone drives down
    (a term ``-floor(ep/2048)`` beside terms without ``ep``) changes sign only there.  Asked
    just before a proof's expansion, which it spares where no proof can hold.  The values are
    remembered by the expression's symbols: the differences a build compares share their parts.

    >>> from sympy import floor
    >>> from symbolic_cost.symbols import b, ep, l
    >>> changes_sign(b * l + 1 - floor(ep / 2048)), changes_sign_alone(b * l + 1 - floor(ep / 2048))
    (False, True)
    """
    symbols = tuple(sorted(expr.free_symbols, key=str))
    walk = _ALONE.get(symbols)
    if walk is None or len(walk.known) >= _KEPT:
        walk = _ALONE[symbols] = _Walk(tuple(_alone(s, big) for s in symbols for big in (True, False)))
    return len({v > 0 for v in walk.values(expr) if v}) == 2


def _alone(chosen, big: bool):
    """The point where ``chosen`` is ``SCALES``' largest and every other symbol 1 (``big``), or
    the reverse."""
    small, large = SCALES[0], SCALES[-1]
    return lambda symbol: (large if big else small) if symbol == chosen else (small if big else large)


_EXACT = {Add: sum, Mul: math.prod, Max: max, Min: min}
_POWER = 64
"""The largest power taken exactly; a larger one, ``(31/32)**(32768*b)``, is left unknown."""


class _Walk:
    """Exact values of expressions at ``points`` (functions from a symbol to its value), each
    expression's remembered in ``known``."""

    def __init__(self, points: tuple):
        self.points, self.known, self.unknown = points, {}, (None,) * len(points)

    def values(self, expr) -> tuple:
        found = self.known.get(expr)
        if found is None:
            found = self.known[expr] = self._values(expr)
        return found

    def _values(self, expr) -> tuple:
        if expr.is_Rational:
            return (RATIONAL(int(expr.p), int(expr.q)),) * len(self.points)
        if expr.is_Symbol:
            return tuple(RATIONAL(point(expr)) for point in self.points)
        if type(expr) in _EXACT:
            combine, columns = _EXACT[type(expr)], list(zip(*map(self.values, expr.args)))
            try:
                return tuple(map(combine, columns))
            except TypeError:              # a part unknown at some point: that point is unknown
                return tuple(None if None in column else combine(column) for column in columns)
        if isinstance(expr, Pow):
            return tuple(map(_power, self.values(expr.base), self.values(expr.exp)))
        if isinstance(expr, (ceiling, floor)):
            rounded = math.ceil if isinstance(expr, ceiling) else math.floor
            return tuple(None if v is None else RATIONAL(rounded(v)) for v in self.values(expr.args[0]))
        if isinstance(expr, Piecewise):
            return tuple(self._arm(expr, point) for point in range(len(self.points)))
        if isinstance(expr, Function) and not isinstance(expr, AppliedUndef):
            return self._applied(expr)
        return self.unknown

    def _applied(self, expr) -> tuple:
        """A function of numbers (``Log2``, NCCL's ``TreeCorrection``) at each point: SymPy's own
        value of it at its arguments' values, where that is a rational number (arguments without
        symbols, such as a table, passed as they are)."""
        columns = [self.values(a) if a.free_symbols else (a,) * len(self.points) for a in expr.args]
        return tuple(_rational(expr.func, args) for args in zip(*columns))

    def _arm(self, expr, point: int):
        """A ``Piecewise``'s value at ``points[point]``: its first arm whose condition holds."""
        for arm, condition in expr.args:
            holds = self._holds(condition, point)
            if holds is None or holds:
                return None if holds is None else self.values(arm)[point]
        return None

    def _holds(self, condition, point: int):
        """Whether ``condition`` (``True``, ``False`` or a comparison) holds at ``points[point]``;
        ``None`` where a side's value is not known."""
        if condition in (True, False):
            return bool(condition)
        if isinstance(condition, Relational) and condition.rel_op in _COMPARE:
            sides = [self.values(side)[point] for side in condition.args]
            return None if None in sides else _COMPARE[condition.rel_op](sides[0], sides[1])
        return None


_STANDARD = _Walk(POINTS)
"""The walk at ``POINTS``, its values kept across calls: the differences a build compares share
most of their parts."""
_ALONE: dict = {}
"""``changes_sign_alone``'s walks, by the symbols their points set apart."""
_KEPT = 2**18
"""Values a walk holds before it starts again."""


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


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
            "!=": operator.ne}
