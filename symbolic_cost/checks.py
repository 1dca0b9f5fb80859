"""Input checks that name the argument and the rule it broke.

A check that SymPy cannot decide (``m1`` divides ``f`` while both are
symbols) is skipped here and made again when numbers are substituted
(``Block.subs``).
"""

from __future__ import annotations

from sympy import Expr, sympify

from .cost import exact


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
