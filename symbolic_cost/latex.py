"""LaTeX for formulas and tables, with symbols typeset as papers write them."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from dataclasses import fields as dataclass_fields
from typing import TYPE_CHECKING

from sympy import Expr, Mul, Piecewise, Poly, PolynomialError, expand, factor_terms, fraction, nan, together, zoo
from sympy import latex as _sympy_latex, sympify

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, InputTypeError, exact, shown

if TYPE_CHECKING:                     # pandas is imported where a table is made, not with the module
    import pandas as pd

SYMBOL_NAMES = {
    S.m1: "m_{1}", S.s1: "s_{1}", S.n_layers: r"n_{\mathrm{layers}}",
    S.es: r"\mathrm{es}", S.es_mask: r"\mathrm{es}_{\mathrm{mask}}",
}


def latex(expr, mul_symbol=None) -> str:
    """LaTeX of an expression with ``m1`` as ``m_{1}``, ``s1`` as ``s_{1}``.

    ``mul_symbol="dot"`` writes products with ``\\cdot``: longer, but a LaTeX
    parser reads it back unambiguously.

    >>> from symbolic_cost.symbols import b, l, e, m1
    >>> latex(2 * b * l * e / m1)
    '\\\\frac{2 b e l}{m_{1}}'
    """
    try:
        return _sympy_latex(sympify(_not_text(expr)), symbol_names=SYMBOL_NAMES, mul_symbol=mul_symbol)
    except ValueError as error:           # Python prints no integer of more than 4,300 digits
        if "integer string conversion" not in str(error):
            raise
        raise InputError(f"expr holds an integer of more than {sys.get_int_max_str_digits():,} digits, which Python "
                         f"does not print (sys.set_int_max_str_digits)", "expr") from None


def _not_text(expr):
    """``expr``, refused where it is text (``sympify`` would run it as Python, and make symbols of its
    own, not the package's) or ``None``."""
    if isinstance(expr, (str, bytes)) or expr is None:
        hint = "; read text with symbolic_cost.reader.read" if expr is not None else ""
        raise InputTypeError(f"expr must be a SymPy expression or a number, got {shown(expr)}{hint}", "expr")
    return expr


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


def common_monomial(expr):
    """The largest monomial (in the dimension symbols) dividing every term of the numerator.

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> common_monomial(34*b*l*e + 5*b*h*l**2)
    b*l
    """
    numerator, _ = fraction(together(sympify(_not_text(expr))))
    symbols = sorted(numerator.free_symbols & set(S.DIMENSIONS + (S.n_layers,)), key=str)
    if not symbols:
        return sympify(1)
    try:
        terms = Poly(expand(numerator), *symbols).monoms()
    except PolynomialError:
        return sympify(1)
    powers = [min(m[i] for m in terms) for i in range(len(symbols))]
    return Mul(*(s**p for s, p in zip(symbols, powers)))


def monomial(by, argument: str = "by", text=None) -> Expr:
    """``by`` checked to be a monomial: a product of symbols (to number powers) and numbers, not
    0 (it divides), as ``paper_form`` factors out; ``text`` is how the caller was given it.

    >>> from symbolic_cost.symbols import b, l, e
    >>> monomial(b*l**2*e / 2)
    b*e*l**2/2
    """
    by = sympify(by)
    if by == 0:
        raise InputError(f"{argument} must not be 0: it divides the expression", argument)
    factors = by.args if by.is_Mul else (by,)
    if not all(f.is_Symbol or f.is_Number or (f.is_Pow and f.base.is_Symbol and f.exp.is_Number) for f in factors):
        raise InputError(f"{argument} factors out a monomial (a product of symbols and numbers, e.g. b*l*e), "
                         f"got {text if text is not None else shown(by)}", argument)
    return by


def paper_form(expr, by=None):
    r"""``expr`` as ``by * (rest)``, the way papers write costs.

    ``by`` defaults to the common monomial; pass ``b*l*e`` to get
    Korthikanti-style ``b l e (34 + 5 h l / e)``.

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> print(latex(paper_form(34*b*l*e + 5*b*h*l**2, by=b*l*e)))
    b e l \left(34 + \frac{5 h l}{e}\right)
    """
    for name, value in (("expr", expr), ("by", by)):
        if isinstance(value, str):
            raise InputTypeError(f"paper_form takes SymPy expressions, not text: {name} is {shown(value)} "
                                 f"(reader.read it)", name)
    if by is not None:          # by divides: exact, finite, not 0, and a monomial
        monomial(exact(by, "by"))
    expr = _formula(expr)
    if isinstance(expr, Piecewise):      # each piece in the paper's form, under its own condition
        return Piecewise(*((paper_form(piece, by), condition) for piece, condition in expr.args), evaluate=False)
    by = common_monomial(expr) if by is None else sympify(by)
    if by == 1:
        return expand(expr) if expr.is_polynomial() else factor_terms(expr)
    rest = expand(expr / by)
    if rest.is_number or rest.is_Mul or rest.is_Pow or rest.is_Symbol:
        return rest * by
    return Mul(by, rest, evaluate=False)


def _formula(expr) -> Expr:
    """``expr`` as a SymPy expression (``checks.exact`` for anything else: never a boolean, ``None``,
    a list or a float); an undefined one (NaN, ``zoo``) is refused, an infinite arm of a choice (an
    impossible layout's time) stays."""
    expr = expr if isinstance(expr, Expr) else exact(expr, "expr")
    if expr.has(nan, zoo):
        raise InputError(f"expr must be a formula or a number, got {expr} (undefined: a division by zero?)", "expr")
    return expr


def formula_frame(block, fields=("flops_fwd", "flops_bwd", "act_buffer", "weights"), by=None):
    """A DataFrame of formulas: one row per operation, one column per field (each a field of the
    block's rows, ``cost.Cost``)."""
    if not callable(getattr(block, "total", None)) or not isinstance(block, Iterable):     # a Block (blocks sit above)
        raise InputTypeError(f"block must be a Block (mlp(...), attention(...), model_blocks(...)[i] ...), got "
                             f"{shown(block)}", "block")
    if isinstance(fields, (str, bytes)) or not isinstance(fields, Iterable) or not fields or \
            not all(isinstance(f, str) for f in fields):
        raise InputTypeError(f"fields must be a list of field names, at least one, got {shown(fields)}", "fields")
    known = {f.name for row in block for f in dataclass_fields(row)}
    unknown = [f for f in fields if f not in known]
    if unknown:
        raise InputError(f"fields: unknown {', '.join(unknown)}; a row's fields are {', '.join(sorted(known))}",
                         "fields")
    rows = [{"operation": row.name, **{f: paper_form(getattr(row, f), by) for f in fields}}
            for row in block]
    rows.append({"operation": "total", **{f: paper_form(block.total(f), by) for f in fields}})
    import pandas as pd
    return pd.DataFrame(rows, columns=["operation", *fields])


def formula_table(block, fields=("flops_fwd", "flops_bwd", "act_buffer", "weights"), by=None) -> str:
    """A whole block as a LaTeX ``tabular`` of formulas (rows = operations)."""
    return tabular(formula_frame(block, fields, by))


def formula_markdown(block, fields=("flops_fwd", "flops_bwd", "act_buffer", "weights"), by=None) -> str:
    """The same table in Markdown with inline ``$...$`` math."""
    frame = formula_frame(block, fields, by)
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    for row in frame.itertuples(index=False):
        cells = [row[0]] + [f"${latex(v)}$" for v in row[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
