"""The fields a command reports and numbers in the chosen units: ``--field`` (a ``Cost``
field, its table name, a collective volume, a time column or ``time``), its value summed over a
block's rows, what it measures, and numbers as JSON values or text in ``--units``.
"""

from __future__ import annotations

import argparse
import math
import sys

from sympy import Integer, simplify, sympify

from symbolic_cost.checks import InputError
from symbolic_cost.cost import EXPRESSION_FIELDS
from symbolic_cost.numeric.tables import COST_COLUMNS, UNITS, column_kind
from symbolic_cost.timing.hardware import TIME_FIELDS, step_time, times

FIELDS = tuple(dict.fromkeys([*EXPRESSION_FIELDS, *COST_COLUMNS, "comm_fwd", "comm_bwd", "time",
                              *TIME_FIELDS]))
"""What ``--field`` may name: a Cost field, its table name, a collective volume
(``comm_fwd``, ``comm_bwd``), a time column, or ``time`` (forward plus backward seconds)."""

_RATIOS = {name for name in TIME_FIELDS if column_kind(name) is None}


def field_type(text: str) -> str:
    """``--field``'s check: one of ``FIELDS``."""
    if text not in FIELDS:
        raise argparse.ArgumentTypeError(f"unknown --field {text!r}; known: {', '.join(FIELDS)}")
    return text


def field_expr(block, field: str, row: str | None, system, conventions, rows_option: bool = True):
    """A field summed over the block's rows (or of one row): a Cost field, its table
    name, ``comm_fwd``/``comm_bwd`` (reported collective volume), a time column, or
    ``time`` (forward plus backward seconds, the quantity ``optimize`` minimises).
    ``rows_option``: whether the command offers ``--row`` (a ratio asks for one)."""
    field = COST_COLUMNS.get(field, field)
    rows = [block[row]] if row else list(block)
    if field in EXPRESSION_FIELDS:
        return sum((getattr(r, field) for r in rows), Integer(0))
    if field in ("comm_fwd", "comm_bwd"):
        return sum((c.volume for r in rows for c in r.collectives if c.pass_ == field[-3:]), Integer(0))
    if field == "time":
        return step_time(rows, system, conventions)
    if field in TIME_FIELDS:
        if not row and field in _RATIOS:
            raise InputError(f"--field {field} is a ratio of one row's times, which a sum over the block's rows "
                             f"does not give; " + ("choose one row with --row" if rows_option
                                                   else "choose a time or a count"), "--field")
        return sum((times(r, system, conventions)[field] for r in rows), Integer(0))
    raise InputError(f"unknown --field {field!r}; known: {', '.join(FIELDS)}", "--field")


def field_kind(field: str) -> str | None:
    """What a ``--field`` measures: ``"flops"``, ``"bytes"``, ``"seconds"`` or ``None``."""
    if field == "time":
        return "seconds"
    if field in EXPRESSION_FIELDS:
        return "flops" if field.startswith("flops") else "bytes"
    return column_kind(field)


def number(expr):
    """JSON value of an expression: an int, a float, or the formula as a string."""
    expr = simplify(sympify(expr))
    if expr.is_Integer:
        if abs(expr) > sys.float_info.max:     # the reader's doubles would take it as inf, as the text does
            finite(math.inf)
        return int(expr)
    return finite(float(expr)) if expr.is_number else str(expr)


def finite(value: float) -> float:
    """``value``, refused when the inputs made it overflow a float (or NaN)."""
    if not math.isfinite(value):
        raise InputError(f"a result is {value} in floating point: the inputs are too large to print", "--set")
    return value


def amount(value, kind: str | None, units: str, digits: int = 4) -> str:
    """``value`` (FLOPs, bytes or seconds; a number or a formula) as text in ``units``."""
    divisor, label = UNITS[units].per(kind)
    scaled = sympify(value) / divisor
    text = f"{finite(float(scaled)):.{digits}g}" if scaled.is_number else str(simplify(scaled))
    return f"{text} {label}".rstrip()


def header(column: str, units: str) -> str:
    """A column name with its unit: ``flops_fwd (TFLOP)``."""
    label = UNITS[units].label(column)
    return f"{column} ({label})" if label else column
