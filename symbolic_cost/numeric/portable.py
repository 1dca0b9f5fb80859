"""Expressions rewritten into functions every backend has (LLVM has no ``Mod``, no ``ceil(log2)``
and none of the library's step functions): ``portable``."""

from __future__ import annotations

from sympy import Function, Mod, ceiling, floor, log, sympify

from symbolic_cost.extrema import swap
from symbolic_cost.parallel.collectives import Log2


def portable(expr):
    """``expr`` with the functions LLVM lacks written in ones it has: ``Mod(a, n)`` as
    ``a - n floor(a/n)``, ``Log2(n)`` (``ceil(log2 n)``) with ``log``; exact up to n = 2^28; a
    step function with ``as_piecewise`` as its pieces."""
    expr = sympify(expr)          # a plain number (a part that is 0) as well
    calls = _calls(expr)
    swaps = {a: a.args[0] - a.args[1] * floor(a.args[0] / a.args[1]) if isinstance(a, Mod)
             else ceiling(log(a.args[0]) / log(2)) for a in calls if isinstance(a, (Mod, Log2))}
    # step functions of the library (timing.efficiency.TreeCorrection) as their pieces
    swaps.update({a: a.as_piecewise() for a in calls if hasattr(a, "as_piecewise")})
    return swap(expr, swaps) if swaps else expr


def _calls(expr) -> set:
    """The function applications in ``expr``, each shared part visited once (``atoms`` walks a
    part once per path to it: a step time's collectives share parts so widely that this took
    half of a search's conversion)."""
    seen, found, todo = set(), set(), [expr]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            if isinstance(node, Function):
                found.add(node)
            todo.extend(node.args)
    return found
