"""Input checks that name the argument and the rule it broke.

A check that SymPy cannot decide (``m1`` divides ``f`` while both are
symbols) is skipped here and made again when numbers are substituted
(``Block.subs``).
"""

from __future__ import annotations

from sympy import Expr, sympify

from symbolic_cost.cost import exact


def positive_dims(**dims) -> dict[str, Expr]:
    """Return the dimensions as exact expressions, refusing decidable non-positive
    or non-integer values.

    >>> positive_dims(b=2, l=0)
    Traceback (most recent call last):
    ...
    ValueError: l must be a positive integer, got 0
    """
    out = {}
    for name, value in dims.items():
        expr = exact(value, name)
        if expr.is_number and not (expr.is_integer and expr.is_positive):
            raise ValueError(f"{name} must be a positive integer, got {expr}")
        if expr.is_positive is False or expr.is_integer is False:
            raise ValueError(f"{name} must be a positive integer, got {expr}")
        out[name] = expr
    return out


def divides(dims: dict[str, Expr], divisor: str, dividend: str, why: str = "") -> None:
    """Raise unless ``dims[divisor]`` divides ``dims[dividend]`` (when decidable).

    >>> divides({"h": 3, "e": 100}, "h", "e")
    Traceback (most recent call last):
    ...
    ValueError: h must divide e (got h=3, e=100)
    """
    ratio = sympify(dims[dividend]) / sympify(dims[divisor])
    if ratio.is_integer is False:
        reason = f"; {why}" if why else ""
        raise ValueError(f"{divisor} must divide {dividend} "
                         f"(got {divisor}={dims[divisor]}, {dividend}={dims[dividend]}){reason}")


WHY = {
    ("s1", "m1"): "sequence shards live inside the tensor-parallel group",
    ("kv_heads", "h"): "each key/value head serves a whole group of query heads",
    ("m1", "kv_heads"): "each device needs whole key/value heads",
}
"""The reason printed with a broken divisibility rule (none needed for the obvious ones)."""

MODEL_RULES = (("h", "e"), ("m1", "h"), ("m1", "f"), ("s1", "l"), ("s1", "m1"), ("kv_heads", "h"),
               ("m1", "kv_heads"))
"""``(divisor, dividend)`` rules of a transformer layer under 1-D tensor and sequence parallelism."""


def check_rules(dims: dict[str, Expr], rules=MODEL_RULES) -> dict[str, Expr]:
    """Make ``dims`` positive and exact, then apply every ``(divisor, dividend)`` rule whose
    two dimensions are present; returns the exact dimensions.

    >>> check_rules(dict(e=64, h=8, m1=3))
    Traceback (most recent call last):
    ...
    ValueError: m1 must divide h (got m1=3, h=8)
    """
    dims = positive_dims(**dims)
    for divisor, dividend in rules:
        if divisor in dims and dividend in dims:
            divides(dims, divisor, dividend, WHY.get((divisor, dividend), ""))
    return dims
