"""SymPy expressions in the form symengine's LLVM backend compiles best: written
in functions every backend has (``numeric.portable``), converted to symengine once per shared
part (``to_symengine``, ``symengine_form``), and without a branch a random input can mispredict
(``branch_free``, ``machine_form``)."""

from __future__ import annotations

from sympy import Function, ceiling, floor, sympify

from symbolic_cost.numeric.portable import rewritten
from symbolic_cost.numeric.rounding_margin import margin_argument


MEMO_LIMIT = 1 << 18
"""Parts ``symengine_form`` (and ``machine_form``) remembers across calls before it forgets them
all (a process that compiles for hours stays bounded; a search of every layout of GPT-3 175B
remembers about 6,000)."""
_MEMOS: dict = {}


def symengine_form(values, se) -> list:
    """The symengine expressions of the SymPy ``values``, shared parts converted once across all
    of them, and across calls: a search's kernels are built from the same layers, collectives and
    stages, so most of each kernel's conversion is already done."""
    converted = _memo(se, 0)
    return [to_symengine(sympify(v), se, converted) for v in values]


def machine_form(converted, se) -> list:
    """The symengine expressions ``converted`` as ``branch_free`` rewrites them for machine code,
    shared parts rewritten once across calls (as ``symengine_form``)."""
    selects = _memo(se, 1)
    return [branch_free(c, se, selects) for c in converted]


def _memo(se, which: int) -> dict:
    """The parts converted (``which`` 0) or rewritten (1) so far, forgotten past ``MEMO_LIMIT``."""
    memo = _MEMOS.setdefault(se, ({}, {}))[which]
    if len(memo) > MEMO_LIMIT:
        memo.clear()
    return memo


def to_symengine(expr, se, memo: dict):
    """``se.sympify(expr)``, each shared part converted once: symengine's own converter walks a
    part once per path to it, and a step time's collectives share parts so widely that this was a
    quarter of a search's cold builds.  A function LLVM lacks converts in its portable form
    (``portable.rewritten``), a ``floor`` or ``ceiling`` of a ratio of whole numbers in the form
    doubles round exactly (``rounding_margin``); nodes of another kind ``_NODES`` does not name
    convert whole.

    >>> import symengine
    >>> from sympy import Max, Piecewise, ceiling
    >>> from symbolic_cost.symbols import b, l
    >>> to_symengine(Piecewise((ceiling(b / l), b < l), (Max(b, 2 * l), True)), symengine, {})
    Piecewise((ceiling((-1/2 + b)/l), b < l), (max(b, 2*l), True))
    >>> from sympy import ITE, Eq
    >>> to_symengine(ITE(Eq(b, 1), l < 3, l < b), symengine, {})
    Or(And(1 != b, l < b), And(1 == b, l < 3))
    """
    known = memo.get(expr)            # not ``in`` then ``[]``: another thread may clear the memo between
    if known is not None:
        return known
    build = _NODES.get(type(expr).__name__) if expr.args else None
    portable = rewritten(expr) if build is None and isinstance(expr, Function) else None
    if isinstance(expr, (floor, ceiling)):
        result = build(se, [to_symengine(margin_argument(expr), se, memo)])
    elif portable is not None:
        result = to_symengine(portable, se, memo)
    elif build is None:
        result = se.sympify(expr)
    else:
        result = build(se, [to_symengine(a, se, memo) for a in expr.args])
    memo[expr] = result
    return result


_NODES = {
    "Add": lambda se, a: se.Add(*a), "Mul": lambda se, a: se.Mul(*a), "Pow": lambda se, a: se.Pow(*a),
    "Max": lambda se, a: se.Max(*a), "Min": lambda se, a: se.Min(*a), "ceiling": lambda se, a: se.ceiling(*a),
    "floor": lambda se, a: se.floor(*a), "log": lambda se, a: se.log(*a),
    "Piecewise": lambda se, a: se.Piecewise(*a), "ExprCondPair": lambda se, a: tuple(a),
    "StrictLessThan": lambda se, a: se.Lt(*a), "LessThan": lambda se, a: se.Le(*a),
    "StrictGreaterThan": lambda se, a: se.Gt(*a), "GreaterThan": lambda se, a: se.Ge(*a),
    "Equality": lambda se, a: se.Eq(*a), "Unequality": lambda se, a: se.Ne(*a),
    "And": lambda se, a: se.And(*a), "Or": lambda se, a: se.Or(*a), "Not": lambda se, a: se.Not(*a),
    # symengine has no if-then-else of booleans: (c and a) or (not c and b)
    "ITE": lambda se, a: se.Or(se.And(a[0], a[1]), se.And(se.Not(a[0]), a[2])),
}
"""SymPy's node kinds (by class name) and the symengine constructor of each from converted arguments."""


def branch_free(expr, se, memo):
    """``expr`` (symengine) with ``Max``/``Min`` as selects on a strict comparison and choices
    between two constants as arithmetic on a 0/1 indicator, so that the machine code has no
    branch a random input can mispredict.

    ``Max(a, b)`` becomes ``a if a > b else b``: the same number for every input that is not
    NaN, and the exact pattern of x86's ``maxsd`` (LLVM's own ``maxnum`` adds four
    instructions for NaN).  ``Piecewise((a, c), (b, True))`` with finite numbers ``a``, ``b``
    becomes ``a*[c] + b*(1 - [c])``: exact, since ``a*1 + b*0 = a``.  Larger choices keep
    their branch (computing both sides costs more than a misprediction).
    """
    known = memo.get(expr)
    if known is not None:
        return known
    old = expr.args
    args = [branch_free(a, se, memo) for a in old]
    if isinstance(expr, (se.Max, se.Min)):
        result = _select(args, se.Gt if isinstance(expr, se.Max) else se.Lt, se)
    elif isinstance(expr, se.Piecewise):
        result = _choice(args[0::2], args[1::2], se)
    else:
        result = expr if all(a == b for a, b in zip(args, old)) else _rebuild(expr, args, se)
    memo[expr] = result
    return result


def _select(args, better, se):
    """``args`` folded left with ``v if better(v, a) else a``."""
    value = args[0]
    for arg in args[1:]:
        value = se.Piecewise((value, better(value, arg)), (arg, True))
    return value


def _choice(arms, conditions, se):
    """A two-way choice between finite numbers as indicator arithmetic, else the Piecewise."""
    if len(arms) == 2 and conditions[1] == se.true and all(a.is_Number and a.is_finite for a in arms):
        chosen = se.Piecewise((1, conditions[0]), (0, True))
        return arms[0] * chosen + arms[1] * (1 - chosen)
    return se.Piecewise(*zip(arms, conditions))


def _rebuild(expr, args, se):
    """``expr``'s node with new ``args``; relations and logic have no ``func`` in symengine."""
    relations = {se.LessThan: se.Le, se.StrictLessThan: se.Lt, se.Equality: se.Eq,
                 se.Unequality: se.Ne, se.And: se.And, se.Or: se.Or, se.Not: se.Not}
    build = relations.get(type(expr))
    return build(*args) if build else expr.func(*args)
