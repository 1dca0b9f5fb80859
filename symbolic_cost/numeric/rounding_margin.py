"""``floor`` and ``ceiling`` of a ratio of integers, written so that a float evaluation rounds them
exactly, whatever order a backend takes the operations in: ``rounded``.

Compiled code evaluates ``floor(d/ceiling(d m1/8))`` as ``floor(d * (1/c))``, and a product with
a rounded reciprocal can land just below a whole quotient: ``4048 * (1/2024)`` is
``1.9999999999999998``, whose floor is 1, not 2.  The same holds for a constant that is not a
power of two (``49 * (1/49) < 1``).

For whole numbers ``N`` and ``D > 0`` the quotient ``N/D`` is either whole or at least ``1/D``
from the next whole number, so a half-step margin changes nothing exactly and everything
numerically::

    floor(N/D)   = floor((N + 1/2)/D)     (N = qD + r, 0 <= r < D: q + (r + 1/2)/D)
    ceiling(N/D) = ceiling((N - 1/2)/D)

The margin is ``1/(2D)`` either side of every whole number, while evaluating ``(N ± 1/2)/D`` in
doubles, by a division or by a product with ``1/D``, errs by a few units in the last place of
the quotient, or, where SymPy distributes a numeric ``D`` over the terms of ``N``, of its largest
term over ``D``: the rounding is exact while ``D`` times the largest term of ``N`` stays below
``2^50``, far beyond any count of bytes, FLOPs or devices here.  Only arguments that are
provably ratios of whole numbers (``integer_ratio``) are rewritten; others (``log(n)/log(2)``)
are left as they are.

>>> from sympy import ceiling, floor
>>> from symbolic_cost.symbols import d, m1
>>> rounded(floor(d / ceiling(d * m1 / 8, evaluate=False), evaluate=False))
floor((d + 1/2)/ceiling(d*m1/8 - 1/16))
"""

from __future__ import annotations

from math import lcm

from sympy import Add, Integer, Max, Min, Mul, Piecewise, Pow, Rational, ceiling, floor

from symbolic_cost.parallel.collectives import Log2

_WHOLE_CALLS = (floor, ceiling, Log2)
"""Functions whose value is a whole number wherever it is defined."""


def rounded(call):
    """``call`` (a ``floor`` or ``ceiling``) with its argument, where it is a ratio of whole
    numbers ``N/D`` with ``D`` not 1, moved half a step off the whole numbers (the module's
    rule), and every ``floor``/``ceiling`` inside it rewritten the same way.  Built
    unevaluated (SymPy's ``ceiling`` would ask assumption queries of the whole argument)."""
    inner = {c: rounded(c) for c in _calls_in(call.args[0])}
    argument = margin_argument(call)
    return type(call)(argument.xreplace(inner) if inner else argument, evaluate=False)


def margin_argument(call):
    """The argument ``rounded`` gives ``call``, the calls inside it left as they are (for a
    converter that rewrites each node as it reaches it, ``llvm_form.to_symengine``)."""
    ratio = integer_ratio(call.args[0])
    if ratio is None or ratio[1] == 1:
        return call.args[0]
    top, bottom = ratio
    return (top + (Rational(1, 2) if isinstance(call, floor) else Rational(-1, 2))) / bottom


def _calls_in(expr) -> set:
    """The outermost ``floor``/``ceiling`` nodes of ``expr``."""
    found, todo = set(), [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, (floor, ceiling)):
            found.add(node)
        else:
            todo.extend(node.args)
    return found


def integer_ratio(expr):
    """``(N, D)`` with ``expr = N/D``, ``N`` and ``D`` whole-number expressions and ``D``
    provably positive; ``None`` where the structure does not show one (a ``log``, a symbol
    not declared integer, a symbolic denominator inside a sum).

    >>> from symbolic_cost.symbols import b, l, es
    >>> integer_ratio(3 * b / (2 * l)), integer_ratio(b / 3 + l / 2), integer_ratio(b * es)
    ((3*b, 2*l), (2*b + 3*l, 6), None)
    """
    if expr.is_Rational:
        return Integer(expr.p), Integer(expr.q)
    if _whole(expr):
        return expr, Integer(1)
    if isinstance(expr, Mul):
        return _product_ratio(expr.args)
    if isinstance(expr, Pow):
        return _product_ratio([expr])
    if isinstance(expr, Add):
        return _sum_ratio(expr.args)
    return None


def _product_ratio(factors):
    tops, bottoms = [], []
    for factor in factors:
        base, power = factor.as_base_exp() if isinstance(factor, Pow) else (factor, Integer(1))
        if not power.is_Integer:
            return None
        ratio = integer_ratio(base)
        if ratio is None:
            return None
        top, bottom = ratio if power > 0 else ratio[::-1]
        if power < 0 and not _positive(base):
            return None
        tops.append(top ** abs(int(power)))
        bottoms.append(bottom ** abs(int(power)))
    return Mul(*tops), Mul(*bottoms)


def _sum_ratio(terms):
    ratios = [integer_ratio(t) for t in terms]
    if any(r is None or not r[1].is_Integer for r in ratios):
        return None
    common = lcm(*(int(bottom) for _, bottom in ratios))
    return Add(*(top * (common // int(bottom)) for top, bottom in ratios)), Integer(common)


def _whole(expr) -> bool:
    """Whether ``expr`` is a whole number by its structure alone (no assumption queries)."""
    if expr.is_Integer or isinstance(expr, _WHOLE_CALLS):
        return True
    if expr.is_Symbol:
        return bool(expr.is_integer)
    if isinstance(expr, Pow):
        return expr.exp.is_Integer and expr.exp > 0 and _whole(expr.base)
    if isinstance(expr, (Add, Mul, Max, Min)):
        return all(_whole(a) for a in expr.args)
    if isinstance(expr, Piecewise):
        return all(_whole(arm) for arm, _ in expr.args)
    return False


def _positive(expr) -> bool:
    """Whether ``expr`` is positive by its structure alone (no assumption queries)."""
    if expr.is_Number:
        return bool(expr > 0)
    if expr.is_Symbol:
        return bool(expr.is_positive)
    if isinstance(expr, (Add, Mul, Min)):
        return all(_positive(a) for a in expr.args)
    if isinstance(expr, Max):
        return any(_positive(a) for a in expr.args)
    if isinstance(expr, Pow):
        return _positive(expr.base)
    if isinstance(expr, ceiling):
        return _positive(expr.args[0])
    if isinstance(expr, Piecewise):
        return all(_positive(arm) for arm, _ in expr.args)
    return False
