"""``ceiling`` and ``floor`` built without SymPy's assumption queries.

SymPy's ``ceiling(x)`` first asks whether ``x`` is an integer, finite, real, and splits a sum
into its integer and other terms, each an assumption query: the calibrated step time takes
hundreds of them (kernel tiles, waves of tiles, NVLink domains) and they were a third of its
build.  ``round_up`` and ``round_down`` decide what the structure shows:

* a number is rounded exactly;
* a whole expression (``is_whole``) is its own rounding;
* the whole terms of a sum move outside: ``ceiling(b + x) = b + ceiling(x)`` for an integer ``b``;

and leave the rest an unevaluated ``ceiling``/``floor`` (substituting numbers evaluates it).

>>> from sympy import Rational
>>> from symbolic_cost.symbols import b, l
>>> round_up(b * l / 16), round_up(b * l + Rational(1, 2)), round_down(Rational(7, 2)), round_up(2 * b)
(ceiling(b*l/16), b*l + 1, 3, 2*b)
"""

from __future__ import annotations

import functools

from sympy import Add, Expr, Max, Min, Mul, Pow, ceiling, floor, sympify


def round_up(x) -> Expr:
    """``ceiling(x)``: exact for a number, ``x`` itself when whole, whole terms of a sum outside."""
    return _rounded(ceiling, sympify(x))


def round_down(x) -> Expr:
    """``floor(x)``: exact for a number, ``x`` itself when whole, whole terms of a sum outside."""
    return _rounded(floor, sympify(x))


def _rounded(kind, x) -> Expr:
    if x.is_Number:
        return kind(x)
    if is_whole(x):
        return x
    if isinstance(x, Add):
        whole = [t for t in x.args if is_whole(t)]
        if whole:
            rest = Add(*(t for t in x.args if not is_whole(t)))
            return Add(*whole) + _rounded(kind, rest)
    return kind(x, evaluate=False)


@functools.lru_cache(maxsize=4096)
def is_whole(x) -> bool:
    """Whether ``x`` is an integer for every value of its symbols, as its structure shows: integers,
    integer symbols, ``ceiling``/``floor``, and sums, products, whole powers and extrema of them.

    >>> from symbolic_cost.symbols import b, l
    >>> is_whole(2 * b * l + 1), is_whole(b / 2), is_whole(b ** 2)
    (True, False, True)
    """
    if x.is_Number:
        return x.is_Integer
    if x.is_Symbol:
        return bool(x.is_integer)
    if isinstance(x, (ceiling, floor)):
        return True
    if isinstance(x, (Add, Mul, Max, Min)):
        return all(is_whole(a) for a in x.args)
    if isinstance(x, Pow):
        return x.exp.is_Integer and x.exp >= 0 and is_whole(x.base)
    return False
