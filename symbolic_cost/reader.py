"""The safe expression reader: text a user types (``--set``, ``--at``, ``--by``, ``--where``,
``--grid``, sweep constraints) to a SymPy expression, by walking Python's syntax tree.

Nothing is evaluated as Python: the text is parsed by ``ast.parse`` and each node is turned
into SymPy by hand.  Admitted:

* numbers: integers, decimals and scientific notation, kept exact (``0.5`` is ``1/2``,
  ``80e9`` is ``80000000000``), at most ``MAX_DIGITS`` digits in any value;
* names: the library's symbols (``symbols.BY_NAME``, looked up at each call, so a new
  symbol is readable as soon as ``symbols.py`` declares it) and those the caller adds;
* ``+ - * / **`` (the exponent a number of size at most ``MAX_EXPONENT``), unary ``-`` and
  ``+``, parentheses, and the ``FUNCTIONS``;
* formulas small once expanded (``bounded``, estimated before expanding anything): at most
  ``MAX_TERMS`` terms of degree ``MAX_DEGREE`` (``(e+f+h+b)**64`` has 47,905 terms);
* where a condition is expected (``condition=True``): comparisons (``<= < >= > == !=``,
  chained), ``and``, ``or``, ``not`` and ``Eq``, ``Ne``.

Anything else (attributes, calls of other names, subscripts, strings, ``True``, lambdas, ...)
is refused with the position of the first offending token, and so are results that are not
finite real numbers (``1/0``, ``log(0)``, ``(-1)**(1/2)``).

>>> read("4*e + l/2")
4*e + l/2
>>> from sympy import Symbol
>>> read("memory <= 80e9 and m1 < 8", names={"memory": Symbol("memory")}, condition=True)
(memory <= 80000000000) & (m1 < 8)
>>> read("__import__('os')")
Traceback (most recent call last):
...
symbolic_cost.checks.InputError: expression: calling '__import__' is not allowed (functions: ceiling, floor, Max, Min, log, sqrt, Mod) at position 1 of "__import__('os')"
"""

from __future__ import annotations

import ast
import json
import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from math import comb, prod

from sympy import (And, Dummy, Eq, Expr, Ge, Gt, Integer, Le, Lt, Max, Min, Mod, Ne, Not, Or, Rational, ceiling, floor,
                   log, nan, oo, sqrt, sympify, zoo)
from sympy.logic.boolalg import Boolean

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError

MAX_LENGTH, MAX_DIGITS, MAX_EXPONENT, MAX_DEGREE, MAX_TERMS = 1000, 30, 64, 64, 100
"""Longest text read (characters); largest number in any step of a reading (decimal digits: a
dimension is never near it); largest exponent of ``**``; largest degree in the symbols, and
most terms, of a formula read once expanded (``bounded``)."""

FUNCTIONS = {"ceiling": (ceiling, 1, 1), "floor": (floor, 1, 1), "Max": (Max, 1, 16), "Min": (Min, 1, 16),
             "log": (log, 1, 2), "sqrt": (sqrt, 1, 1), "Mod": (Mod, 2, 2)}
"""Named functions: ``name: (SymPy function, fewest, most arguments)``."""

CONDITIONS = {"Eq": (Eq, 2, 2), "Ne": (Ne, 2, 2)}
"""Named functions of a condition."""

_ARITHMETIC = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.Div: lambda a, b: a / b}
_COMPARE = {ast.Lt: Lt, ast.LtE: Le, ast.Gt: Gt, ast.GtE: Ge, ast.Eq: Eq, ast.NotEq: Ne}
_SPELLING = {ast.FloorDiv: "'//' (write floor(a/b))", ast.Mod: "'%' (write Mod(a, b))",
             ast.MatMult: "'@'", ast.BitAnd: "'&' (write 'and')", ast.BitOr: "'|' (write 'or')",
             ast.BitXor: "'^' (powers are '**')", ast.LShift: "'<<'", ast.RShift: "'>>'",
             ast.Invert: "'~' (write 'not')", ast.Is: "'is'", ast.IsNot: "'is not'", ast.In: "'in'",
             ast.NotIn: "'not in'"}


class _Refused(Exception):
    """A node the reader does not admit: what it is, and where."""

    def __init__(self, what: str, node=None, offset: int | None = None):
        super().__init__(what)
        self.what, self.node, self.offset = what, node, offset


def read(text: str, *, argument: str = "expression", names: dict | None = None,
         condition: bool = False) -> Expr | Boolean:
    """The expression (or, with ``condition``, the condition) written in ``text``; ``names``
    adds named expressions to the symbols.  Errors are ``InputError`` naming ``argument``."""
    if not isinstance(text, str):
        raise InputError(f"{argument} must be text, got {type(text).__name__}", argument)
    known = {**S.BY_NAME, **(names or {})}
    lead = 0
    try:
        if len(text) > MAX_LENGTH:
            raise _Refused(f"text longer than {MAX_LENGTH} characters", offset=MAX_LENGTH)
        if not text.strip():
            raise _Refused("nothing to read", offset=0)
        foreign = next((i for i, c in enumerate(text) if not c.isascii()), None)
        if foreign is not None:       # Python folds "ℯ" and "ｂ" into the names e and b (NFKC): not here
            raise _Refused(f"the non-ASCII character {text[foreign]!r} (U+{ord(text[foreign]):04X})", offset=foreign)
        lead = len(text) - len(text.lstrip())      # "b=1, 2": Python's parser takes no leading space
        tree = _parse(text[lead:], lead)
        placeholders = {name: Dummy(name, positive=True) for name in names or ()}  # the caller's: one symbol each
        result = _Reader({**known, **placeholders}, condition, text[lead:]).top(tree.body)
        bounded(result, argument)
        result = _Reader(known, condition, text[lead:]).top(tree.body) if names else result
    except _Refused as refused:
        where = _position(text[lead:], refused, lead)
        more = f"; known: {', '.join(known)}" if refused.what.startswith("unknown name") else ""
        raise InputError(f"{argument}: {refused.what}{where} of {_quoted(text)}{more}", argument) from None
    except RecursionError:
        raise InputError(f"{argument}: nested too deeply in {_quoted(text[:60])}", argument) from None
    return result


def size(expr) -> tuple[int, int]:
    """``(degree, terms)``: bounds on the degree in the symbols and the terms of ``expr`` once
    expanded, from its tree (a sum adds terms, a product multiplies them, a power ``n`` of ``t``
    terms has at most ``C(t+n-1, n)``; a function counts as the sum of its arguments).

    >>> from symbolic_cost.symbols import b, e, f, h
    >>> size((e + f + h + b)**6), size(b * e**2 / 3)
    ((6, 84), (3, 1))
    """
    memo = {}

    def visit(node):
        if node not in memo:
            parts = [visit(a) for a in node.args]
            if node.is_Symbol or not parts:
                memo[node] = (int(node.is_Symbol), 1)
            elif node.is_Mul:
                memo[node] = (sum(d for d, _ in parts), prod(t for _, t in parts))
            elif node.is_Pow and node.exp.is_Rational:
                (degree, terms), n = parts[0], abs(node.exp)
                whole = int(n) if n.is_integer and terms > 1 else 1
                memo[node] = (degree * int(-(-n.p // n.q)), comb(terms + whole - 1, whole))
            else:
                memo[node] = (max(d for d, _ in parts), sum(t for _, t in parts))
        return memo[node]

    return visit(sympify(expr))


def bounded(expr, argument: str = "expression"):
    """``expr``, refused naming ``argument`` past ``MAX_TERMS``/``MAX_DEGREE``, or as a number or with a
    coefficient past 10**MAX_DIGITS."""
    degree, terms = size(expr)
    limit = Integer(10) ** MAX_DIGITS      # the value, and every coefficient of a formula (10**60*b)
    numbers = sympify(expr).atoms(Rational)
    big = (sympify(expr).is_number and abs(expr) > limit) or any(abs(n.p) > limit for n in numbers)
    fine = any(n.q > limit for n in numbers)        # a denominator past the limit: a number finer than 10**-30
    if degree > MAX_DEGREE or terms > MAX_TERMS or big or fine:
        what = f"is (or holds a number) larger than 10**{MAX_DIGITS} once the values it refers to are put in" if big \
            else f"holds a number written finer than 10**-{MAX_DIGITS} (a denominator past 10**{MAX_DIGITS})" if fine \
            else f"expands to up to {terms:,} terms of degree up to {degree:,} in the symbols (at most {MAX_TERMS} " \
            f"terms of degree {MAX_DEGREE}); write a smaller one"
        raise InputError(f"{argument}: the formula {what}", argument)
    return expr


def read_number(text: str, *, argument: str = "value") -> Expr:
    """A number written in ``text`` (``"4096"``, ``"2**12"``, ``"1.5e3"``), exact.

    >>> read_number("0.25")
    1/4
    """
    value = read(text, argument=argument, names={})
    if not value.is_number:
        raise InputError(f"{argument} must be a number, got {_quoted(text)}", argument)
    return value


def _quoted(text: str) -> str:
    """The text in double quotes, control characters escaped, cut to 80 characters."""
    return json.dumps(text if len(text) <= 80 else text[:77] + "...", ensure_ascii=False)


def _parse(text: str, lead: int = 0) -> ast.Expression:
    """``text``'s syntax tree; a refusal's offset counts ``lead`` characters before ``text``."""
    try:
        return ast.parse(text, mode="eval")
    except SyntaxError as error:
        offset = (error.offset or 1) - 1 + lead if (error.lineno or 1) == 1 else None
        raise _Refused("cannot read it (not a formula)", offset=offset) from None
    except (ValueError, MemoryError) as error:       # a literal with too many digits, a NUL byte
        raise _Refused(f"cannot read it ({error})", offset=0) from None


def _position(text: str, refused: _Refused, lead: int = 0) -> str:
    """`` at position N`` (1-based, in characters, ``lead`` of them before ``text``) of the refused
    node, or nothing."""
    offset = refused.offset
    node = refused.node
    if node is not None and hasattr(node, "col_offset"):
        lines = text.split("\n")
        before = sum(len(line) + 1 for line in lines[:node.lineno - 1])
        line = lines[node.lineno - 1].encode()
        offset = lead + before + len(line[:node.col_offset].decode(errors="ignore"))
    return "" if offset is None else f" at position {offset + 1}"


class _Reader:
    """Turns an admitted syntax tree into SymPy, one node kind at a time."""

    def __init__(self, names: dict, condition: bool, source: str = ""):
        self.names, self.condition, self.source = names, condition, source

    def top(self, node):
        if not self.condition:
            return self.value(node)
        result = self.truth(node)
        if isinstance(result, Expr):
            raise _Refused("a condition (a comparison, 'and', 'or', 'not') is expected", node)
        return result

    def truth(self, node):
        """A condition: comparisons joined by ``and``/``or``/``not``, or ``Eq``/``Ne``."""
        if isinstance(node, ast.BoolOp):
            parts = [self.truth(value) for value in node.values]
            return And(*parts) if isinstance(node.op, ast.And) else Or(*parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return Not(self.truth(node.operand))
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CONDITIONS:
            return self.call(node, CONDITIONS)
        self.value(node)                  # refused first where it is no value at all
        raise _Refused(f"{ast.unparse(node)} is not a condition (compare it: '<=', '==', ...)", node)

    def compare(self, node: ast.Compare):
        sides = [self.value(node.left)] + [self.value(c) for c in node.comparators]
        parts = []
        for op, left, right in zip(node.ops, sides, sides[1:]):
            if type(op) not in _COMPARE:
                raise _Refused(f"{_SPELLING.get(type(op), type(op).__name__)} is not allowed", node)
            parts.append(_COMPARE[type(op)](left, right))
        return And(*parts)

    def value(self, node):
        """An arithmetic expression; every step is checked to be a finite real number."""
        kind = type(node)
        if kind is ast.Constant:
            result = self.number(node)
        elif kind is ast.Name:
            result = self.name(node)
        elif kind is ast.BinOp and type(node.op) in _ARITHMETIC:
            left, right = self.value(node.left), self.value(node.right)
            try:
                result = _ARITHMETIC[type(node.op)](left, right)
            except ArithmeticError:
                raise _Refused("division by zero", node) from None
        elif kind is ast.BinOp and isinstance(node.op, ast.Pow):
            result = self.power(node)
        elif kind is ast.UnaryOp and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self.value(node.operand)
            result = -operand if isinstance(node.op, ast.USub) else operand
        elif kind is ast.Call and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
            result = self.call(node, FUNCTIONS)
        else:
            raise _Refused(_describe(node, self.condition), node)
        return _checked(result, node)

    def number(self, node: ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Refused(f"{value!r} is not a number", node)
        if isinstance(value, int):
            return Integer(value)
        return _exact(ast.get_source_segment(self.source, node) if self.source else None, value, node)

    def name(self, node: ast.Name):
        if node.id in self.names:            # a caller's value may be a plain int (a model's width)
            return sympify(self.names[node.id])
        if node.id.lower() in ("nan", "inf", "infinity", "oo", "zoo"):
            raise _Refused(f"{node.id} is not a finite number", node)
        if node.id in FUNCTIONS or node.id in CONDITIONS:
            raise _Refused(f"{node.id} is a function: call it, e.g. {node.id}(a, b)", node)
        raise _Refused(f"unknown name {node.id!r}", node)

    def power(self, node: ast.BinOp):
        base, exponent = self.value(node.left), self.value(node.right)
        if not exponent.is_number:
            raise _Refused(f"the exponent {exponent} must be a number", node.right)
        if base.is_number and exponent.is_integer and exponent > 0 and abs(base) > 1:
            # a number's power is bounded by its size, as the same number written out is (2**70 is
            # 1180591620717411303424): refused before it is computed where it would pass 10**MAX_DIGITS
            if float(exponent) * math.log10(float(abs(base))) > MAX_DIGITS + 1:
                raise _Refused(f"a number larger than 10**{MAX_DIGITS}", node)
            return base ** exponent
        if abs(exponent) > MAX_EXPONENT:
            raise _Refused(f"the exponent {exponent} is larger than {MAX_EXPONENT}", node.right)
        return base ** exponent

    def call(self, node: ast.Call, table: dict):
        function, fewest, most = table[node.func.id]
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise _Refused(f"{node.func.id} takes plain arguments", node)
        if not fewest <= len(node.args) <= most:
            raise _Refused(f"{node.func.id} takes {fewest}{'' if fewest == most else f' to {most}'} "
                           f"argument{'s' if most > 1 else ''}", node)
        arguments = [self.value(a) for a in node.args]
        try:
            return function(*arguments)
        except (ArithmeticError, ValueError, TypeError):     # Mod(b, 0), log(b, 1), ...
            raise _Refused(f"{node.func.id} cannot be computed here", node) from None


def _fail(node):
    raise _Refused("not a finite number", node)


def _exact(written: str | None, value: float, node):
    """The number a literal with a fraction or an exponent is written as (``written``; the
    float Python read, ``value``, where the text is not known): a float rounds
    ``1.0000000000000001`` to 1 and ``1e-400`` to 0, which a size then took as 1 or refused as 0.
    One past 10**MAX_DIGITS or finer than 10**-MAX_DIGITS is refused before its digits are
    made (``1e999999999`` would build a billion-digit integer)."""
    try:
        number = Decimal(written.replace("_", "")) if written else Decimal(repr(value))
    except (InvalidOperation, ValueError):
        number = Decimal(repr(value))
    if not number.is_finite():
        _fail(node)
    if number and number.adjusted() > MAX_DIGITS:
        raise _Refused(f"a number larger than 10**{MAX_DIGITS}", node)
    if number and number.adjusted() < -MAX_DIGITS:
        raise _Refused(f"a number written finer than 10**-{MAX_DIGITS}", node)
    return Rational(Fraction(number))


def _checked(result, node):
    """Refuse a step that is not a finite real number or is too large to be a size."""
    if not isinstance(result, Expr):
        raise _Refused("a comparison is allowed only in a condition", node)
    if result.has(nan, zoo, oo, -oo):
        raise _Refused("division by zero or another infinite value", node)
    if result.is_real is False:
        raise _Refused(f"{result} is not a real number", node)
    if result.is_number and abs(result) > Integer(10) ** MAX_DIGITS:
        raise _Refused(f"a number larger than 10**{MAX_DIGITS}", node)
    return result


def _describe(node, condition: bool) -> str:
    """What a refused node is, in the user's words."""
    if isinstance(node, (ast.BinOp, ast.UnaryOp)) and type(node.op) in _SPELLING:
        return f"{_SPELLING[type(node.op)]} is not allowed"
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        allowed = ", ".join([*FUNCTIONS, *(CONDITIONS if condition else ())])
        return f"{'calling ' + repr(name) if name else 'this call'} is not allowed (functions: {allowed})"
    if isinstance(node, (ast.Compare, ast.BoolOp)) or (isinstance(node, ast.UnaryOp)
                                                       and isinstance(node.op, ast.Not)):
        return "a comparison or 'and'/'or'/'not' is allowed only in a condition (--where)"
    words = {ast.Attribute: "an attribute ('.')", ast.Subscript: "an index ('[...]')", ast.List: "a list",
             ast.Tuple: "a tuple (',')", ast.Dict: "a dict", ast.Set: "a set", ast.Lambda: "a lambda",
             ast.IfExp: "'if ... else'", ast.JoinedStr: "a string", ast.Starred: "'*'",
             ast.NamedExpr: "':='", ast.Slice: "a slice"}
    return f"{words.get(type(node), type(node).__name__)} is not allowed"


__all__ = ["read", "read_number", "size", "bounded", "MAX_DEGREE", "MAX_TERMS", "FUNCTIONS", "CONDITIONS", "MAX_DIGITS", "MAX_EXPONENT", "MAX_LENGTH"]
