"""A cost expression's exact value at a few sample points: a quick look that can only spare work.

Proving that a difference of two costs keeps one sign (``extrema.sign``) means expanding it, and
most differences of a calibrated step time (one NCCL protocol against another, one kernel tile
against another) have no sign: each wins for some sizes.  ``changes_sign`` finds that out
first, from the expression's value at ``POINTS``: every symbol 1, every symbol ``2**20``, and a
few mixed points where each symbol takes one of ``SCALES``, picked by a hash of its name (the
same in every process, so a formula is built the same way everywhere).

The values are Python's exact rationals, never floats, and they only ever say "undecided".

>>> from symbolic_cost.symbols import b, l
>>> changes_sign(b - l), changes_sign(b * l - 1), changes_sign(2 * b - b)
(True, False, False)
"""

from __future__ import annotations

import math
import operator
import zlib
from fractions import Fraction

from sympy import Add, Max, Min, Mul, Piecewise, Pow, ceiling, floor
from sympy.core.relational import Relational

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
    seen = set()
    for point, memo in zip(POINTS, _SEEN):
        if len(memo) > _KEPT:
            memo.clear()
        value = value_at(expr, point, memo)
        if minus is not None and value is not None:
            other = value_at(minus, point, memo)
            value = None if other is None else value - other
        if value:                      # neither None nor 0
            seen.add(value > 0)
            if len(seen) == 2:
                return True
    return False


_SEEN = tuple({} for _ in POINTS)
"""Values already taken at each point: the differences a build compares share most of their parts."""
_KEPT = 2**18
"""Values a table of ``_SEEN`` holds before it starts again."""

_EXACT = {Add: sum, Mul: math.prod, Max: max, Min: min}
_POWER = 64
"""The largest power taken exactly; a larger one, ``(31/32)**(32768*b)``, is left unknown."""


def value_at(expr, point, memo=None):
    """``expr``'s exact value (a ``Fraction``) with each symbol ``point(symbol)``; ``None`` for
    what it does not know.  Python's own rationals, no SymPy arithmetic; each shared part is
    evaluated once (``memo``).  Exact, since a float's rounding of a difference that is 0 at a
    point (``2b/3 + 10/3 - 4 m1`` at ``b = m1 = 1``) would see a sign that is not there.

    >>> from sympy import Rational
    >>> from symbolic_cost.symbols import b, l
    >>> value_at(ceiling(b / 3) + l, POINTS[1]), value_at(2 * b / 3 + Rational(10, 3) - 4 * l, POINTS[0])
    (Fraction(1398102, 1), Fraction(0, 1))
    """
    memo = {} if memo is None else memo
    if expr not in memo:
        memo[expr] = _value(expr, point, memo)
    return memo[expr]


def _value(expr, point, memo):
    try:
        if expr.is_Rational:
            return Fraction(int(expr.p), int(expr.q))
        if expr.is_Symbol:
            return Fraction(point(expr))
        if type(expr) in _EXACT:
            parts = [value_at(a, point, memo) for a in expr.args]
            return None if None in parts else _EXACT[type(expr)](parts)
        if isinstance(expr, Pow):
            base, power = value_at(expr.base, point, memo), value_at(expr.exp, point, memo)
            whole = power is not None and power.denominator == 1 and abs(power) <= _POWER
            return base ** int(power) if base is not None and whole else None
        if isinstance(expr, (ceiling, floor)):
            inner = value_at(expr.args[0], point, memo)
            return None if inner is None else Fraction((math.ceil if isinstance(expr, ceiling) else math.floor)(inner))
        if isinstance(expr, Piecewise):             # the first arm whose condition holds
            for arm, condition in expr.args:
                holds = _holds(condition, point, memo)
                if holds is None or holds:
                    return None if holds is None else value_at(arm, point, memo)
    except ZeroDivisionError:
        return None
    return None


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
            "!=": operator.ne}


def _holds(condition, point, memo):
    """Whether ``condition`` (``True``, ``False`` or a comparison) holds at ``point``; ``None``
    where ``value_at`` does not know a side."""
    if condition in (True, False):
        return bool(condition)
    if isinstance(condition, Relational) and condition.rel_op in _COMPARE:
        sides = [value_at(side, point, memo) for side in condition.args]
        return None if None in sides else _COMPARE[condition.rel_op](sides[0], sides[1])
    return None
