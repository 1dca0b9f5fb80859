"""LaTeX for formulas and tables, with symbols typeset as papers write them."""

from __future__ import annotations

import math

import pandas as pd
from sympy import latex as _sympy_latex, sympify

from . import symbols as S

SYMBOL_NAMES = {
    S.m1: "m_{1}", S.s1: "s_{1}", S.n_layers: r"n_{\mathrm{layers}}",
    S.es: r"\mathrm{es}", S.es_mask: r"\mathrm{es}_{\mathrm{mask}}",
}


def latex(expr) -> str:
    """LaTeX of an expression with ``m1`` as ``m_{1}``, ``s1`` as ``s_{1}``.

    >>> from symbolic_cost.symbols import b, l, e, m1
    >>> latex(2 * b * l * e / m1)
    '\\\\frac{2 b e l}{m_{1}}'
    """
    return _sympy_latex(sympify(expr), symbol_names=SYMBOL_NAMES)


def _escape(text: str) -> str:
    return str(text).replace("_", r"\_")


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        return _escape(value)
    return f"${latex(value)}$"


def tabular(frame: pd.DataFrame) -> str:
    """A ``tabular`` environment of a DataFrame: numbers to 6 significant
    digits, expressions as inline math, text escaped."""
    header = " & ".join(_escape(column) for column in frame.columns)
    body = [" & ".join(_cell(v) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    spec = "l" + "r" * (len(frame.columns) - 1)
    return "\n".join([rf"\begin{{tabular}}{{{spec}}}", r"\hline", header + r" \\", r"\hline",
                      *body, r"\hline", r"\end{tabular}"])
