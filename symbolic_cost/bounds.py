"""Bounds of a cost expression read off its structure, for every positive value of its
symbols (integer ones at least 1): ``lower_bound`` and ``upper_bound``, the facts
``extrema.sign`` decides a ``Max``/``Min`` with.  Only what the tree shows is used (a number, a
sum of bounded terms, a product of non-negative ones, ``ceiling``/``floor`` of a bound), never
SymPy's assumption queries, and the answer is ``None`` where that is not enough.

>>> from symbolic_cost.symbols import b, m1
>>> lower_bound(b * (m1 - 1) + 1), upper_bound(2 - b * m1)
(1, 1)
"""

from __future__ import annotations

import math

from sympy import Add, Max, Min, Mul, Piecewise, Pow, ceiling, floor

from symbolic_cost.rationals import RATIONAL, to_sympy
from symbolic_cost.trees import remembered


def lower_bound(expr):
    """A number ``L`` with ``expr >= L`` for every positive value of its symbols (integer ones
    at least 1), read off the expression's structure; ``None`` where it is not that simple.

    >>> from symbolic_cost.symbols import b, m1
    >>> lower_bound(3 * b * (m1 - 1) + 2), lower_bound(b - m1)
    (2, None)
    """
    low = lowest(expr)
    return None if low is None else to_sympy(low)


def lowest(expr):
    """``lower_bound`` as an exact ``rationals.RATIONAL`` (``None`` where there is none): a
    bound is a number, and GMP's arithmetic on it costs a fraction of SymPy's (a calibrated
    step time asks for thousands)."""
    return remembered(_LOWER, expr, _lower_bound)


_LOWER: dict = {}
"""Bounds remembered (a step time asks for the same shared parts' bounds millions of times)."""


def _lower_bound(expr):
    if expr.is_Number:
        return _exact_number(expr)
    if expr.is_Symbol:
        return (RATIONAL(1) if expr.is_integer else RATIONAL(0)) if expr.is_positive else None
    if isinstance(expr, (Add, Min, Piecewise)):
        parts = [lowest(a) for a in _operands(expr)]
        return None if None in parts else (sum(parts) if expr.is_Add else min(parts))
    if isinstance(expr, Max):
        parts = [x for x in map(lowest, expr.args) if x is not None]
        return max(parts) if parts else None
    if isinstance(expr, Mul):
        parts = [lowest(a) for a in expr.args]
        return None if None in parts or any(x < 0 for x in parts) else math.prod(parts)
    if isinstance(expr, Pow) and expr.exp.is_Number:
        base = lowest(expr.base)
        if base is None or base < 0:
            return None
        return base ** int(expr.exp) if expr.exp.is_Integer and expr.exp > 0 else RATIONAL(0)
    if isinstance(expr, (ceiling, floor)):
        inner = lowest(expr.args[0])
        return None if inner is None else RATIONAL((math.ceil if isinstance(expr, ceiling) else math.floor)(inner))
    return None


def _exact_number(number):
    """A SymPy number as a ``RATIONAL`` (a ``Float`` exactly as it is stored); ``None`` for an
    infinity or NaN, which bounds nothing."""
    if number.is_Rational:
        return RATIONAL(int(number.p), int(number.q))
    return RATIONAL(float(number)) if number.is_finite else None


def upper_bound(expr):
    """A number ``U`` with ``expr <= U`` for every positive value of its symbols, where the
    structure shows one: a number, a sum of such, a negative number times factors whose
    ``lower_bound`` is not negative; ``None`` otherwise.

    >>> from symbolic_cost.symbols import b, m1
    >>> upper_bound(1 - 3 * b * m1), upper_bound(b - m1)
    (-2, None)
    """
    if expr.is_Number:
        return expr
    if isinstance(expr, Add):
        parts = [upper_bound(a) for a in expr.args]
        return None if None in parts else sum(parts)
    if isinstance(expr, Mul):
        coefficient, rest = expr.as_coeff_Mul()
        if coefficient < 0:
            low = lower_bound(rest)
            return None if low is None or low < 0 else coefficient * low
    return None


def _operands(expr):
    return [e for e, _ in expr.args] if isinstance(expr, Piecewise) else expr.args
