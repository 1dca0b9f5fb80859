"""Seed 003: the per-layer MLP and self-attention tables of the LBNL 2024 notebook.

The blocks are built with the ``lbnl-2024`` conventions and the seed's system
(``a100-perlmutter``); the only model choice is the seed's (no bias on the
fused QKV projection).  Cells are compared at the printed precision: six
decimals for tables and sums (pandas' display), full ``repr`` for the two
"time spend in comms" lines, which the notebook computes as a ratio of float
column sums (so do we, from our table; the exact ratio is reported too).
"""

from __future__ import annotations

import io
import math

import pandas as pd

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Projections, Run, attention, mlp
from symbolic_cost.numeric.tables import comm_fraction, table, totals_table
from symbolic_cost.reproduce import Cell
from symbolic_cost.reproduce import lbnl_2024_printed as printed

TITLE = "Seed 003: LBNL transformer-perf-estimates, MLP and SA per-layer tables"
SYSTEM = "a100-perlmutter"
CONVENTIONS = conv.get("lbnl-2024")
PREAMBLE = f"""
Configuration: b={printed.CONFIG['b']}, l={printed.CONFIG['l']}, e={printed.CONFIG['e']},
f={printed.CONFIG['f']}, h={printed.CONFIG['h']}, m1={printed.CONFIG['m1']},
depth={printed.CONFIG['depth']}, fp16 (2-byte) values, 1-byte masks; system `{SYSTEM}`;
conventions `lbnl-2024`. Units as printed: TFLOP, GB (10^9 B), es_mask.
Rule: a numeric cell matches when both values round to the same 6 decimals; an empty printed
cell must be empty here; text cells must be equal; the comm lines must match the full `repr`.
"""


def build(conventions=CONVENTIONS):
    """The two blocks exactly as the seed configures them."""
    c = printed.CONFIG
    dims = dict(b=c["b"], l=c["l"], e=c["e"], m1=c["m1"],
                run=Run(es=c["es"], es_mask=c["es_mask"], conventions=conventions))
    return {"MLP": mlp(f=c["f"], **dims),
            "SA": attention(heads=c["h"], projections=Projections(qkv_bias=False), **dims)}


def _same(printed_text: str, ours) -> bool:
    if printed_text == "":
        return ours is None or (isinstance(ours, float) and math.isnan(ours))
    try:
        expected = float(printed_text)
    except ValueError:
        return printed_text == ours
    return isinstance(ours, float) and f"{expected:.6f}" == f"{ours:.6f}"


def _show(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def _table_cells(name: str, text: str, ours: pd.DataFrame) -> list[Cell]:
    """One cell per printed cell, matched by row position and column name
    (a row or column we do not have counts as a mismatch)."""
    seen = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    seen = seen.drop(columns="Unnamed: 0")
    cells = []
    for i in range(len(seen)):
        for column in seen.columns:
            have = i < len(ours) and column in ours.columns
            value = ours.at[i, column] if have else None
            match = have and _same(seen.at[i, column], value)
            cells.append(Cell(name, seen.at[i, "layer"], column, seen.at[i, column],
                              _show(value) if have else "(missing)", match))
    return cells


def _sum_cells(name: str, text: str, ours: pd.Series) -> list[Cell]:
    cells = []
    for line in text.strip().splitlines():
        column, value = line.split()
        have = column in ours
        cells.append(Cell(f"{name} sum x depth", "sum", column, value,
                          _show(ours[column]) if have else "(missing)", have and _same(value, ours[column])))
    return cells


def compare(conventions=CONVENTIONS) -> list[Cell]:
    """Every printed cell of seed 003 against ours (454 cells), under ``conventions``."""
    cells = []
    fractions = {"MLP": printed.MLP_COMM_FRACTION, "SA": printed.SA_COMM_FRACTION}
    for name, block in build(conventions).items():
        ours = table(block, SYSTEM, conventions)
        cells += _table_cells(name, getattr(printed, f"{name}_TABLE"), ours)
        cells += _sum_cells(name, getattr(printed, f"{name}_SUMS"),
                            totals_table(block, SYSTEM, conventions, printed.CONFIG["depth"]))
        as_printed = repr(float(ours["t_comm_fwd"].sum() / ours["t_total_fwd"].sum()))
        exact = float(comm_fraction(block, SYSTEM, conventions))
        cells.append(Cell(f"{name} time spend in comms", f"float sums (exact ratio {exact!r})",
                          "t_comm_fwd / t_total_fwd", fractions[name], as_printed,
                          as_printed == fractions[name]))
    return cells
