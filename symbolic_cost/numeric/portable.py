"""Expressions rewritten into functions every backend has (LLVM has no ``Mod``, no ``ceil(log2)``
and none of the library's step functions): ``portable``."""

from __future__ import annotations

from sympy import Function, Mod, ceiling, floor, log, sympify

from symbolic_cost.extrema import swap
from symbolic_cost.numeric.rounding_margin import rounded
from symbolic_cost.parallel.collectives import Log2


def portable(expr):
    """``expr`` with the functions LLVM lacks written in ones it has: ``Mod(a, n)`` as
    ``a - n floor(a/n)``, ``Log2(n)`` (``ceil(log2 n)``) with ``log``; exact up to n = 2^28; a
    step function with ``as_piecewise`` as its pieces; and a ``floor``/``ceiling`` of a ratio of
    whole numbers in the form doubles round exactly (``rounding_margin``).

    >>> from sympy import Mod
    >>> from symbolic_cost.symbols import b, l
    >>> portable(Mod(b, l))
    b - l*floor((b + 1/2)/l)
    """
    return portable_all([expr])[0]


def portable_all(exprs) -> list:
    """``portable`` of each of ``exprs``, the parts they share rewritten once."""
    exprs = [sympify(e) for e in exprs]          # a plain number (a part that is 0) as well
    swaps = {a: rewritten(a) for a in parts(exprs) if isinstance(a, Function)}
    swaps = {a: form for a, form in swaps.items() if form is not None}
    if swaps:
        done: dict = {}
        exprs = [swap(e, swaps, done) for e in exprs]
    return exactly_rounded(exprs)


def exactly_rounded(exprs) -> list:
    """``exprs`` with each ``floor``/``ceiling`` of a ratio of whole numbers in the form doubles
    round exactly (``rounding_margin``), the parts they share rewritten once."""
    swaps = {a: rounded(a) for a in parts(exprs) if isinstance(a, (floor, ceiling))}
    swaps = {a: form for a, form in swaps.items() if form != a}
    if not swaps:
        return exprs
    done: dict = {}
    return [swap(e, swaps, done) for e in exprs]


def rewritten(call):
    """The portable form of one function application ``call`` (its arguments as they are), or
    ``None`` when every backend has it.  Built unevaluated: SymPy's ``ceiling`` and ``log`` ask
    assumption queries about their whole argument.

    >>> from symbolic_cost.parallel.collectives import Log2
    >>> from symbolic_cost.symbols import b
    >>> rewritten(Log2(b)), rewritten(ceiling(b))
    (ceiling(log(b)/log(2)), None)
    """
    if isinstance(call, Mod):
        top, bottom = call.args
        return top - bottom * floor(top / bottom, evaluate=False)
    if isinstance(call, Log2):
        return ceiling(log(call.args[0], evaluate=False) / log(2), evaluate=False)
    if hasattr(call, "as_piecewise"):   # step functions of the library (timing.nccl.TreeCorrection)
        return call.as_piecewise()
    return None


def parts(exprs) -> set:
    """Every distinct node of ``exprs``, each shared part visited once (``atoms`` and
    ``free_symbols`` walk a part once per path to it: a step time's collectives share parts so
    widely that walking each path would dominate a search's conversion).

    >>> from symbolic_cost.symbols import b, l
    >>> sorted(map(str, parts([b * l + b, b * l])))
    ['b', 'b*l', 'b*l + b', 'l']
    """
    seen, todo = set(), list(exprs)
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(node.args)
    return seen


def free_symbols_of(exprs) -> list:
    """The symbols of ``exprs``, sorted by name (``free_symbols`` of each, shared parts walked once).

    >>> from symbolic_cost.symbols import b, l
    >>> free_symbols_of([b * l + 1, l])
    [b, l]
    """
    return sorted((s for s in parts([sympify(e) for e in exprs]) if s.is_Symbol), key=str)
