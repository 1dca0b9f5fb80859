"""Bounds of a cost expression read off its structure, for every positive value of its
symbols (integer ones at least 1): ``lower_bound`` and ``upper_bound``, the facts
``extrema.sign`` decides a ``Max``/``Min`` with.  Only what the tree shows is used (a number, a
sum of bounded terms, a product by interval arithmetic over its factors' bounds, the arguments
of an extremum, ``ceiling``/``floor`` of a bound, ``1/x`` of an ``x`` at least ``L > 0``),
never SymPy's assumption queries, and the answer is ``None`` where that is not enough.

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
        parts = _all(lowest, _operands(expr))
        return None if parts is None else (sum(parts) if expr.is_Add else min(parts))
    if isinstance(expr, Max):
        parts = [x for x in map(lowest, expr.args) if x is not None]
        return max(parts) if parts else None
    if isinstance(expr, Mul):
        low = _product(expr, lower=True)
        own = _over_own_ceiling(expr)
        return own if low is None or (own is not None and own > low) else low
    if isinstance(expr, Pow) and expr.exp.is_Number:
        base = lowest(expr.base)
        if base is None or base < 0:
            return None
        if expr.exp.is_Integer and expr.exp < 0:        # 1/x**k is at least 1/U**k where x <= U
            high = highest(expr.base)
            return RATIONAL(0) if high is None or high == 0 else high ** int(expr.exp)
        return base ** int(expr.exp) if expr.exp.is_Integer and expr.exp > 0 else RATIONAL(0)
    if isinstance(expr, (ceiling, floor)):
        inner = lowest(expr.args[0])
        if inner is None:
            return None
        if isinstance(expr, floor):
            return RATIONAL(math.floor(inner))
        rounded = math.ceil(inner)
        return RATIONAL(1 if rounded < 1 and _positive(expr.args[0]) else rounded)
    return None


def _over_own_ceiling(expr):
    """A lower bound of ``c x / ceiling(x / k)`` (``c >= 0``, ``x`` a product of integer symbols,
    ``k >= 1``): ``c``, since ``ceiling(x/k) <= ceiling(x) = x``; ``None`` for any other product.
    The channels NCCL splits ``m1`` devices into, ``floor(m1 / ceiling(m1/8))``, are then at
    least 1.

    >>> from sympy import ceiling
    >>> from symbolic_cost.symbols import m1, s1
    >>> _over_own_ceiling(m1 / ceiling(m1 / 8)) == 1, _over_own_ceiling(m1 / (s1 * ceiling(m1 / (8 * s1))))
    (True, None)
    """
    coefficient, factors = expr.as_coeff_mul()
    ceilings = [f for f in factors if isinstance(f, Pow) and f.exp == -1 and isinstance(f.base, ceiling)]
    if len(ceilings) != 1 or not coefficient.is_Rational or coefficient < 0:
        return None
    x = Mul(*(f for f in factors if f is not ceilings[0]))
    share = ceilings[0].base.args[0] / x
    integer = all(base.is_Symbol and base.is_integer and base.is_positive and k.is_Integer and k > 0
                  for base, k in x.as_powers_dict().items())
    return _exact_number(coefficient) if integer and share.is_Rational and 0 < share <= 1 else None


def _positive(expr) -> bool:
    """Whether ``expr`` is above 0 (not only at least 0) for every positive value of its
    symbols, as its tree shows: a positive number or symbol, and sums, products and powers of
    such (``ceiling(129280/m1)`` is then at least 1)."""
    if expr.is_Number or expr.is_Symbol:
        return bool(expr.is_positive)
    if isinstance(expr, (Add, Mul)):
        return all(_positive(a) for a in expr.args)
    if isinstance(expr, Pow):
        return _positive(expr.base) and expr.exp.is_real is True
    return isinstance(expr, ceiling) and _positive(expr.args[0])


def _exact_number(number):
    """A SymPy number as a ``RATIONAL`` (a ``Float`` exactly as it is stored); ``None`` for an
    infinity or NaN, which bounds nothing."""
    if number.is_Rational:
        return RATIONAL(int(number.p), int(number.q))
    return RATIONAL(float(number)) if number.is_finite else None


def upper_bound(expr):
    """A number ``U`` with ``expr <= U`` for every positive value of its symbols, where the
    structure shows one (``highest``); ``None`` otherwise.

    >>> from sympy import Min
    >>> from symbolic_cost.symbols import b, m1
    >>> upper_bound(1 - 3 * b * m1), upper_bound(b - m1), upper_bound(4 * Min(1, b) / m1 - 7)
    (-2, None, -3)
    """
    high = highest(expr)
    return None if high is None else to_sympy(high)


def highest(expr):
    """``upper_bound`` as an exact ``rationals.RATIONAL`` (``None`` where there is none), read as
    ``lowest`` reads its bound: a number; a sum of bounded terms; the least bounded argument of a
    ``Min``, the greatest of a ``Max`` or ``Piecewise`` whose arguments all are; a product by
    interval arithmetic (``_product``); ``x**k`` of a bounded ``x >= 0``, and ``1/x**k`` of an
    ``x`` at least ``L > 0`` (an integer degree's ``1/m1 <= 1``); ``ceiling``/``floor`` of a
    bound.  A symbol is unbounded."""
    return remembered(_UPPER, expr, _upper_bound)


_UPPER: dict = {}
"""Upper bounds remembered, as ``_LOWER``."""


def _upper_bound(expr):
    if expr.is_Number:
        return _exact_number(expr)
    if isinstance(expr, Min):
        parts = [x for x in map(highest, expr.args) if x is not None]
        return min(parts) if parts else None
    if isinstance(expr, (Add, Max, Piecewise)):
        parts = _all(highest, _operands(expr))
        return None if parts is None else (sum(parts) if expr.is_Add else max(parts))
    if isinstance(expr, Mul):
        return _product(expr, lower=False)
    if isinstance(expr, Pow) and expr.exp.is_Integer:
        base = lowest(expr.base)
        if base is None or base < 0 or (expr.exp < 0 and base == 0):
            return None
        if expr.exp < 0:
            return base ** int(expr.exp)        # 1/x**k is at most 1/L**k where x >= L > 0
        high = highest(expr.base)
        return None if high is None else high ** int(expr.exp)
    if isinstance(expr, (ceiling, floor)):
        inner = highest(expr.args[0])
        return None if inner is None else RATIONAL((math.ceil if isinstance(expr, ceiling) else math.floor)(inner))
    return None


def _product(expr, lower: bool):
    """A bound of the product ``expr`` (its lower one, or its upper one), by interval arithmetic
    over its factors' bounds: ``[lowest, highest]`` of each, an unknown side unbounded.  A factor
    that may be negative (``16 b l m1/s1 - 1``, at least -1) still bounds the product where the
    other factors are bounded on the side it needs."""
    coefficient, factors = expr.as_coeff_mul()
    number = _exact_number(coefficient)
    if number is None:
        return None
    lows = [lowest(f) for f in factors]
    if (number >= 0) == lower and None not in lows and min(lows, default=0) >= 0:
        return number * math.prod(lows)     # the usual product: factors at least 0, their lower bounds do
    low = high = number
    for factor in factors:
        ends = (_end(lowest(factor), -1), _end(highest(factor), 1))
        products = [_times(x, y) for x in (low, high) for y in ends]
        low, high = min(products), max(products)
    found = low if lower else high
    return None if found in (_INFINITE, -_INFINITE) else found


_INFINITE = math.inf
"""An unbounded side of an interval (compared with, never multiplied into, an exact bound)."""


def _end(bound, side: int):
    return side * _INFINITE if bound is None else bound


def _times(x, y):
    """``x * y`` of two interval ends, exact unless one is infinite (then the signed infinity;
    0 times an infinity is 0, the bound of a factor that is 0)."""
    if x == 0 or y == 0:
        return RATIONAL(0)
    if x in (_INFINITE, -_INFINITE) or y in (_INFINITE, -_INFINITE):
        return _INFINITE if (x > 0) == (y > 0) else -_INFINITE
    return x * y


def _all(bound, args) -> list | None:
    """``bound`` of every one of ``args``, or ``None`` from the first that has none (the rest
    not walked: a sum of a step time's terms stops at its first unbounded one)."""
    found = []
    for arg in args:
        value = bound(arg)
        if value is None:
            return None
        found.append(value)
    return found


def _operands(expr):
    return [e for e, _ in expr.args] if isinstance(expr, Piecewise) else expr.args
