"""An expression set as a straight-line program over columns of rows (``program``): symengine's
common-subexpression elimination of the set, each node once as an operation.  Two back ends run
it: LLVM IR over vectors of ``lanes`` rows (``ir_text``), which ``vector_kernel`` compiles, and
numpy over whole columns (``vector_program``), which needs no compiler.  Both take the same
operations in the same order, so they give the same doubles (LLVM's ``log`` and ``pow`` and
numpy's may differ in the last bit).

>>> import symengine
>>> b, l = symengine.symbols("b l")
>>> made = program([symengine.Max(b, l) / 2], [b, l])
>>> [op for op, *_ in made.ops]
['const', 'gt', 'select', 'mul']
>>> text = ir_text(made, 4)
>>> [line.split()[2] for line in text.splitlines() if line.startswith("  %v")]
['fcmp', 'select', 'fmul']
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

ARITHMETIC = {"add": "fadd", "mul": "fmul", "div": "fdiv"}
COMPARISONS = {"lt": "olt", "le": "ole", "eq": "oeq", "ne": "une", "gt": "ogt"}
"""A program's comparisons of numbers and LLVM's ``fcmp`` predicate of each (ordered: false
where either side is NaN, as numpy's; ``une`` true there, as numpy's ``!=``)."""
LOGIC = {"ieq": "icmp eq", "ine": "icmp ne", "and": "and", "or": "or"}
"""Operations on conditions (``not`` apart); the rest are LLVM's intrinsics (``ceil``,
``floor``, ``log``, ``sqrt``, ``pow``) and ``select``."""
_RELATIONS = {"StrictLessThan": "lt", "LessThan": "le", "Equality": "eq", "Unequality": "ne"}
_CALLS = {"ceiling": "ceil", "floor": "floor", "log": "log"}


@dataclass
class Program:
    """``ops[k]`` is ``(name, operand, ...)`` and writes register ``inputs + k``; registers
    ``0 .. inputs - 1`` are the input columns; a ``"const"`` holds its number (a ``bool`` for a
    condition).  ``outputs`` are the registers of the expressions, ``booleans`` the registers
    holding conditions."""

    inputs: int
    ops: list
    outputs: list
    booleans: set


def program(converted, arguments) -> Program:
    """The ``Program`` of the symengine expressions ``converted`` over ``arguments`` (after
    symengine's CSE); ``NotImplementedError`` for a node it does not write."""
    import symengine as se
    replacements, reduced = se.cse(list(converted))
    writer = _Writer(len(arguments))
    for k, symbol in enumerate(arguments):
        writer.names[symbol] = k
    for symbol, expr in replacements:
        writer.names[symbol] = writer.operands((expr,), None)[0]
    outputs = [writer.number(e) for e in reduced]
    return Program(len(arguments), writer.ops, outputs, writer.booleans)


def ir_text(made: Program, lanes: int) -> str:
    """LLVM IR of ``kernel(n, a0.., o0..)``: a loop over ``n`` rows, ``lanes`` at a time, that
    runs ``made`` and writes each output into its column."""
    vector, bits = f"<{lanes} x double>", f"<{lanes} x i1>"
    names = [f"%a{k}" for k in range(made.inputs)]
    lines = [f"  %p{k} = getelementptr double, ptr %in{k}, i64 %i\n  %a{k} = load {vector}, ptr %p{k}, align 8"
             for k in range(made.inputs)]
    calls = {}
    for op, *operands in made.ops:
        if op == "const":
            names.append(_splat(operands[0]))
            continue
        args = [names[r] for r in operands]
        if op in ARITHMETIC:
            text = f"{ARITHMETIC[op]} {vector} {args[0]}, {args[1]}"
        elif op in COMPARISONS:
            text = f"fcmp {COMPARISONS[op]} {vector} {args[0]}, {args[1]}"
        elif op in LOGIC:
            text = f"{LOGIC[op]} {bits} {args[0]}, {args[1]}"
        elif op == "not":
            text = f"xor {bits} {args[0]}, splat (i1 true)"
        elif op == "select":
            text = f"select {bits} {args[0]}, {vector} {args[1]}, {vector} {args[2]}"
        else:
            calls[op] = len(args)
            text = f"call {vector} @llvm.{op}.v{lanes}f64({', '.join(f'{vector} {a}' for a in args)})"
        names.append(f"%v{len(names)}")
        lines.append(f"  {names[-1]} = {text}")
    for k, r in enumerate(made.outputs):
        lines.append(f"  %q{k} = getelementptr double, ptr %out{k}, i64 %i\n  store {vector} {names[r]}, ptr %q{k}, align 8")
    parameters = ", ".join([f"ptr noalias %in{k}" for k in range(made.inputs)]
                           + [f"ptr noalias %out{k}" for k in range(len(made.outputs))])
    head = [f"declare {vector} @llvm.{name}.v{lanes}f64({', '.join([vector] * arity)})"
            for name, arity in sorted(calls.items())]
    return "\n".join(head + [
        f"define void @kernel(i64 %n{', ' if parameters else ''}{parameters}) {{",
        "entry:", "  %none = icmp sle i64 %n, 0", "  br i1 %none, label %done, label %loop",
        "loop:", "  %i = phi i64 [0, %entry], [%next, %loop]", *lines,
        f"  %next = add i64 %i, {lanes}", "  %more = icmp slt i64 %next, %n",
        "  br i1 %more, label %loop, label %done", "done:", "  ret void", "}"])


def _splat(value) -> str:
    """A constant in every lane, as LLVM 19's ``splat``: half the text of writing each lane
    out, which LLVM parses a fifth faster (a search's 324 kernels: 0.53 against 0.67 CPU-s)."""
    if isinstance(value, bool):
        return f"splat (i1 {'true' if value else 'false'})"
    return f"splat (double 0x{struct.unpack('<Q', struct.pack('<d', value))[0]:016X})"


class _Writer:
    """The operations of ``program``: each node of the expressions once, a number or (its
    register in ``booleans``) a condition."""

    def __init__(self, inputs: int):
        self.inputs, self.names, self.ops, self.booleans, self.constants = inputs, {}, [], set(), {}

    def emit(self, op: str, *operands, boolean: bool = False) -> int:
        self.ops.append((op, *operands))
        register = self.inputs + len(self.ops) - 1
        if boolean:
            self.booleans.add(register)
        return register

    def constant(self, value) -> int:
        key = (type(value), repr(value))          # NaN is one constant; 0.0 and -0.0 two
        if key not in self.constants:
            self.constants[key] = self.emit("const", value, boolean=isinstance(value, bool))
        return self.constants[key]

    def operands(self, args, boolean: bool | None = False) -> list:
        """The registers of ``args``, each a condition (``boolean``), a number, or either
        (``None``), written first where they are new (one loop, not a call a node: a search
        writes some 200,000)."""
        names, booleans, out = self.names, self.booleans, []
        for arg in args:
            register = names.get(arg)
            if register is None:
                register = names[arg] = self._write(arg)
            if boolean is not None and (register in booleans) != boolean:
                raise NotImplementedError(f"{'a number' if boolean else 'a condition'} where the other belongs")
            out.append(register)
        return out

    def number(self, expr) -> int:
        return self.operands((expr,))[0]

    def condition(self, expr) -> int:
        return self.operands((expr,), True)[0]

    def _write(self, expr) -> int:
        if expr.is_Number:
            return self.constant(float(expr))
        kind = type(expr).__name__
        write = _WRITERS.get(kind)
        if write is not None:
            return write(self, kind, expr.args)
        if kind in _RELATIONS:
            return self._relation(kind, expr.args)
        if kind in ("BooleanTrue", "BooleanFalse"):
            return self.constant(kind == "BooleanTrue")
        raise NotImplementedError(kind)

    def _fold(self, op: str, parts, boolean: bool = False) -> int:
        """``parts`` combined left to right (a sum or product in symengine's order of its terms)."""
        value = parts[0]
        for part in parts[1:]:
            value = self.emit(op, value, part, boolean=boolean)
        return value

    def _arithmetic(self, kind: str, args) -> int:
        return self._fold("add" if kind == "Add" else "mul", self.operands(args))

    def _logic(self, kind: str, args) -> int:
        return self._fold(kind.lower(), self.operands(args, True), boolean=True)

    def _extreme(self, kind: str, args) -> int:
        """``Max``/``Min`` folded left as ``a > b ? a : b`` (``a < b ? a : b``)."""
        compare, parts = "gt" if kind == "Max" else "lt", self.operands(args)
        value = parts[0]
        for part in parts[1:]:
            value = self.emit("select", self.emit(compare, value, part, boolean=True), value, part)
        return value

    def _relation(self, kind: str, args) -> int:
        """A comparison of numbers; of conditions (symengine's ``x == True``) only (in)equality,
        ``c == True`` being ``c`` itself (no operation: GPT-3's calibrated totals wrote 29).

        >>> import symengine
        >>> b, l = symengine.symbols("b l")
        >>> made = program([symengine.Piecewise((b, symengine.Eq(b < l, True)), (l, True))], [b, l])
        >>> [op for op, *_ in made.ops]
        ['const', 'const', 'lt', 'select']
        """
        registers = self.operands(args, None)
        if not any(r in self.booleans for r in registers):
            return self.emit(_RELATIONS[kind], *registers, boolean=True)
        if kind not in ("Equality", "Unequality"):
            raise NotImplementedError(f"{kind} of conditions")
        conditions = self.operands(args, True)
        if kind == "Equality" and self.constants.get((bool, "True")) in conditions:
            return next((r for r in conditions if r != self.constants[(bool, "True")]), conditions[0])  # c == True: c
        return self.emit("ieq" if kind == "Equality" else "ine", *conditions, boolean=True)

    def _call(self, kind: str, args) -> int:
        return self.emit(_CALLS[kind], self.number(args[0]))

    def _not(self, kind: str, args) -> int:
        return self.emit("not", self.condition(args[0]), boolean=True)

    def _power(self, kind: str, args) -> int:
        """``1/x`` for ``x**-1``, repeated products for other small integer powers, else LLVM's."""
        base, exponent = args
        if exponent.is_Integer and 0 < abs(int(exponent)) <= 4:
            x = self.number(base)
            value = self._fold("mul", [x] * abs(int(exponent)))
            return value if int(exponent) > 0 else self.emit("div", self.constant(1.0), value)
        if str(exponent) == "1/2":
            return self.emit("sqrt", self.number(base))
        return self.emit("pow", self.number(base), self.number(exponent))

    def _choice(self, kind: str, args) -> int:
        """``Piecewise`` as selects from the last arm back (NaN where no condition holds)."""
        value = self.constant(float("nan"))
        for arm, condition in reversed(list(zip(args[0::2], args[1::2]))):
            if type(condition).__name__ == "BooleanTrue":
                value = self.number(arm)
            else:
                value = self.emit("select", self.condition(condition), self.number(arm), value)
        return value


_WRITERS = {"Add": _Writer._arithmetic, "Mul": _Writer._arithmetic, "Max": _Writer._extreme,
            "Min": _Writer._extreme, "And": _Writer._logic, "Or": _Writer._logic, "Not": _Writer._not,
            "Pow": _Writer._power, "Piecewise": _Writer._choice, **dict.fromkeys(_CALLS, _Writer._call)}
"""How ``_Writer`` writes each kind of node (relations apart: a comparison of numbers or of conditions)."""
