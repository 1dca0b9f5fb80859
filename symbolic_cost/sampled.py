"""A cost expression in floats at a few sample points: a quick look that can only spare work.

Proving that a difference of two costs keeps one sign (``extrema.sign``) means expanding it, and
most differences of a calibrated step time (one NCCL protocol against another, one kernel tile
against another) have no sign: each wins for some sizes.  ``changes_sign`` finds that out
first, from the expression's value at ``POINTS``: every symbol 1, every symbol ``2**20``, and a
few mixed points where each symbol takes one of ``SCALES``, picked by a hash of its name (the
same in every process, so a formula is built the same way everywhere).

A float only ever says "undecided": the expressions themselves stay exact.

>>> from symbolic_cost.symbols import b, l
>>> changes_sign(b - l), changes_sign(b * l - 1), changes_sign(2 * b - b)
(True, False, False)
"""

from __future__ import annotations

import math
import zlib

from sympy import Add, Max, Min, Mul, Piecewise, Pow, ceiling, floor
from sympy.core.relational import Relational

SCALES = (1.0, 2.0, 16.0, 2.0**10, 2.0**20)
"""The values a symbol takes at a mixed point: a degree's, a batch's, a sequence's, a byte count's."""
MIXED = 6
"""How many mixed points ``POINTS`` holds."""


def _uniform(x: float):
    return lambda symbol: x


def _mixed(k: int):
    return lambda symbol: SCALES[zlib.crc32(f"{k}:{symbol.name}".encode()) % len(SCALES)]


POINTS = (_uniform(1.0), _uniform(2.0**20)) + tuple(_mixed(k) for k in range(MIXED))
"""The sample points, each a function from a symbol to its value."""


def changes_sign(expr) -> bool:
    """Whether ``expr`` is positive at one of ``POINTS`` and negative at another: then it has
    no sign, and proving one is wasted work."""
    seen = set()
    for point, memo in zip(POINTS, _SEEN):
        if len(memo) > _KEPT:
            memo.clear()
        value = value_at(expr, point, memo)
        if value:                      # neither None nor 0
            seen.add(value > 0)
            if len(seen) == 2:
                return True
    return False


_SEEN = tuple({} for _ in POINTS)
"""Values already taken at each point: the differences a build compares share most of their parts."""
_KEPT = 2**18
"""Values a table of ``_SEEN`` holds before it starts again."""

_FLOAT = {Add: sum, Mul: math.prod, Max: max, Min: min}


def value_at(expr, point, memo=None):
    """``expr`` in floats with each symbol ``point(symbol)`` (``None`` for what it does not
    know): no SymPy arithmetic, so ``(31/32)**(32768*b)`` costs nothing.  Each shared part is
    evaluated once (``memo``).

    >>> from symbolic_cost.symbols import b, l
    >>> value_at(ceiling(b / 3) + l, POINTS[1])
    1398102.0
    """
    memo = {} if memo is None else memo
    if expr not in memo:
        memo[expr] = _value(expr, point, memo)
    return memo[expr]


def _value(expr, point, memo):
    try:
        if expr.is_Number:
            return float(expr)
        if expr.is_Symbol:
            return point(expr)
        if type(expr) in _FLOAT:
            parts = [value_at(a, point, memo) for a in expr.args]
            return None if None in parts else _FLOAT[type(expr)](parts)
        if isinstance(expr, Pow):
            base, power = value_at(expr.base, point, memo), value_at(expr.exp, point, memo)
            return None if base is None or power is None else float(base ** power)
        if isinstance(expr, (ceiling, floor)):
            inner = value_at(expr.args[0], point, memo)
            return None if inner is None else float((math.ceil if isinstance(expr, ceiling) else math.floor)(inner))
        if isinstance(expr, Piecewise):             # the first arm whose condition holds
            for arm, condition in expr.args:
                holds = _holds(condition, point, memo)
                if holds is None or holds:
                    return None if holds is None else value_at(arm, point, memo)
    except (OverflowError, ZeroDivisionError, TypeError, ValueError):
        return None
    return None


_COMPARE = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__, "==": float.__eq__,
            "!=": float.__ne__}


def _holds(condition, point, memo):
    """Whether ``condition`` (``True``, ``False`` or a comparison) holds at ``point``; ``None``
    where ``value_at`` does not know a side."""
    if condition in (True, False):
        return bool(condition)
    if isinstance(condition, Relational) and condition.rel_op in _COMPARE:
        sides = [value_at(side, point, memo) for side in condition.args]
        return None if None in sides else _COMPARE[condition.rel_op](float(sides[0]), float(sides[1]))
    return None
