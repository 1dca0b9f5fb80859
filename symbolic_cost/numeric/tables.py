"""From expressions to numbers: per-row tables, sums over depth, unit conversion.

Everything is computed exactly in FLOPs, bytes and seconds; ``Units`` divide
at the very end, and only numbers become floats.  A table of a block that
still has free symbols keeps those cells as SymPy expressions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from sympy import Expr, Integer, Rational, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Block
from symbolic_cost.cost import Cost, substituted
from symbolic_cost.symbols import resolve_names
from symbolic_cost.timing.hardware import TIME_FIELDS, System, get_system, times, topology

if TYPE_CHECKING:
    import pandas

COST_COLUMNS = {
    "flops_fwd": "flops_fwd", "activation_in_mem": "act_in",
    "activation_in_other_mem": "act_in_other", "activation_out_mem": "act_out",
    "activation_buffer": "act_buffer", "weights_mem": "weights", "total_mem_fwd": "mem_fwd",
    "flops_bwd": "flops_bwd", "activation_grad_mem": "act_grads",
    "weights_grad_mem": "weight_grads", "total_mem_bwd": "mem_bwd",
}
"""Table column -> Cost field (the LBNL 2024 column names)."""

COLUMNS = ["layer", *COST_COLUMNS, "comm_bwd", "comm_bwd_type", "comm_size", "comm_fwd",
           "comm_fwd_type", "t_comp_fwd", "t_mem_fwd", "t_comp_bwd", "t_mem_bwd", "intensity",
           "t_fwd", "t_bwd", "comm_topology", "t_comm_fwd", "t_comm_bwd", "t_total_fwd",
           "t_total_bwd", "frac_t_comm_fwd", "frac_t_comm_bwd"]
"""The 31 columns of the LBNL 2024 per-layer table, in its order."""

SUM_COLUMNS = ["activation_buffer", "weights_mem", "weights_grad_mem", "flops_fwd", "flops_bwd",
               "t_total_fwd", "t_total_bwd", "t_comm_fwd", "t_comm_bwd"]
"""Columns the LBNL notebook sums over a block and multiplies by depth."""

_FLOPS = {"flops_fwd", "flops_bwd"}
_TIMES = set(TIME_FIELDS) - {"intensity", "frac_t_comm_fwd", "frac_t_comm_bwd"}
_TEXT = {"layer", "comm_bwd_type", "comm_fwd_type", "comm_topology"}


@dataclass(frozen=True)
class Units:
    """Divisors applied at the edge: FLOPs, bytes and seconds per printed unit."""

    flops: Expr
    bytes: Expr
    seconds: Expr
    labels: tuple[str, str, str]

    def per(self, kind: str | None) -> tuple[Expr, str]:
        """Divisor and label of a quantity: ``"flops"``, ``"bytes"``, ``"seconds"``, or
        ``None`` for counts and ratios (``(1, "")``)."""
        if kind is None:
            return Integer(1), ""
        index = ("flops", "bytes", "seconds").index(kind)
        return (self.flops, self.bytes, self.seconds)[index], self.labels[index]

    def divisor(self, column: str) -> Expr:
        return self.per(column_kind(column))[0]

    def label(self, column: str) -> str:
        """The unit a column is printed in (``""`` for text, counts and ratios)."""
        return self.per(column_kind(column))[1]


def column_kind(column: str) -> str | None:
    """What a table column measures: ``"flops"``, ``"bytes"``, ``"seconds"`` or ``None``."""
    if column in _FLOPS:
        return "flops"
    if column in _TIMES:
        return "seconds"
    if column in COST_COLUMNS or column in ("comm_fwd", "comm_bwd"):
        return "bytes"
    return None


UNITS = {
    "lbnl": Units(Integer(10) ** 12, Integer(10) ** 9, Rational(1, 1000), ("TFLOP", "GB", "ms")),
    "si": Units(Integer(1), Integer(1), Integer(1), ("FLOP", "B", "s")),
    "gib": Units(Integer(10) ** 12, Integer(2) ** 30, Integer(1), ("TFLOP", "GiB", "s")),
}
"""Unit presets: the LBNL notebook's (its reproduction prints these), base SI units, and
the command line's default (TFLOP, GiB = 2^30 bytes, seconds)."""


def row_expressions(cost: Cost, system: System | str, conventions=conv.DEFAULT) -> dict:
    """Every table column of one row as an exact expression in FLOPs, bytes and
    seconds (strings for the text columns, ``None`` where the row has no value).

    ``comm_fwd``/``comm_bwd`` sum the volumes of the pass's collectives and the
    type columns join their kinds with ``+``; ``comm_size`` and
    ``comm_topology`` describe the row's first collective.
    """
    system = get_system(system)
    row: dict = {"layer": cost.name}
    row.update({column: getattr(cost, field) for column, field in COST_COLUMNS.items()})
    for pass_ in ("bwd", "fwd"):
        mine = [c for c in cost.collectives if c.pass_ == pass_]
        row[f"comm_{pass_}"] = sum((c.volume for c in mine), Integer(0)) if mine else None
        row[f"comm_{pass_}_type"] = "+".join(c.kind for c in mine) if mine else None
    first = cost.collectives[0] if cost.collectives else None
    row["comm_size"] = first.group if first else None
    row["comm_topology"] = topology(first.group, system) if first else None
    row.update(times(cost, system, conventions))
    return {column: row[column] for column in COLUMNS}


def to_value(expr, column: str, units: Units):
    """A cell in ``units``: a float for numbers, NaN for no value, an expression otherwise."""
    if expr is None:
        return None if column in _TEXT else math.nan
    if column in _TEXT:
        return expr
    value = sympify(expr) / units.divisor(column)
    return float(value) if value.is_number else value


def table(block: Block, system: System | str = "a100", conventions=conv.DEFAULT,
          units: Units | str = "lbnl") -> "pandas.DataFrame":
    """The per-row table of a block: the 31 LBNL columns (see ``COLUMNS``).

    >>> from symbolic_cost import mlp
    >>> t = table(mlp(1, 2048, 12288, 4 * 12288, 4, 4))
    >>> list(t["layer"])
    ['layer_norm_2', 'fc1', 'act', 'fc2', 'dpr2']
    """
    units = UNITS[units] if isinstance(units, str) else units
    rows = [{column: to_value(expr, column, units)
             for column, expr in row_expressions(cost, system, conventions).items()}
            for cost in block]
    import pandas as pd              # on use: a command line that prints no table never loads pandas
    return pd.DataFrame(rows, columns=COLUMNS)


def totals(block: Block, system: System | str = "a100", conventions=conv.DEFAULT,
           depth=1) -> dict[str, Expr]:
    """``SUM_COLUMNS`` summed over the rows and multiplied by ``depth``, exact."""
    rows = [row_expressions(cost, system, conventions) for cost in block]
    return {column: sympify(depth) * sum((row[column] for row in rows), Integer(0))
            for column in SUM_COLUMNS}


def comm_fraction(block: Block, system: System | str = "a100", conventions=conv.DEFAULT) -> Expr:
    """Share of forward time spent communicating: ``sum t_comm_fwd / sum t_total_fwd``."""
    sums = totals(block, system, conventions)
    return sums["t_comm_fwd"] / sums["t_total_fwd"]


def totals_table(block: Block, system: System | str = "a100", conventions=conv.DEFAULT,
                 depth=1, units: Units | str = "lbnl") -> "pandas.Series":
    """``totals`` converted to ``units`` as a pandas Series (the notebook's display)."""
    units = UNITS[units] if isinstance(units, str) else units
    sums = totals(block, system, conventions, depth)
    import pandas as pd
    return pd.Series({column: to_value(expr, column, units) for column, expr in sums.items()})


def substitute(expr, values: Mapping):
    """Substitute ``values`` (symbol or name -> number) into an expression."""
    return substituted(expr, resolve_names(values))
