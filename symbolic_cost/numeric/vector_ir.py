"""LLVM IR of an expression set over vectors of rows (``ir_text``), which ``vector_kernel``
compiles: symengine's common-subexpression elimination of the set, each node written once as
an instruction on ``lanes`` doubles, or for a condition ``lanes`` bits.

>>> import symengine
>>> b, l = symengine.symbols("b l")
>>> text = ir_text([symengine.Max(b, l) / 2], [b, l], 4)
>>> [line.split()[2] for line in text.splitlines() if line.startswith("  %v")]
['fcmp', 'select', 'fmul']
"""

from __future__ import annotations

import struct


def ir_text(converted, arguments, lanes: int) -> str:
    """LLVM IR of ``kernel(n, a0.., o0..)``: a loop over ``n`` rows, ``lanes`` at a time, that
    writes each expression of ``converted`` (after symengine's CSE) into its output column."""
    import symengine as se
    replacements, reduced = se.cse(list(converted))
    ir = _Writer(lanes)
    for k, symbol in enumerate(arguments):
        ir.line(f"%p{k} = getelementptr double, ptr %in{k}, i64 %i", f"%a{k} = load {ir.vector}, ptr %p{k}, align 8")
        ir.names[symbol] = (f"%a{k}", False)
    for symbol, expr in replacements:
        ir.names[symbol] = ir.value(expr)
    stores = [ir.number(e) for e in reduced]
    for k, value in enumerate(stores):
        ir.line(f"%q{k} = getelementptr double, ptr %out{k}, i64 %i", f"store {ir.vector} {value}, ptr %q{k}, align 8")
    parameters = ", ".join([f"ptr noalias %in{k}" for k in range(len(arguments))]
                           + [f"ptr noalias %out{k}" for k in range(len(reduced))])
    head = [f"declare {ir.vector} @llvm.{name}.v{lanes}f64({', '.join([ir.vector] * arity)})"
            for name, arity in sorted(ir.intrinsics.items())]
    return "\n".join(head + [
        f"define void @kernel(i64 %n{', ' if parameters else ''}{parameters}) {{",
        "entry:", "  %none = icmp sle i64 %n, 0", "  br i1 %none, label %done, label %loop",
        "loop:", "  %i = phi i64 [0, %entry], [%next, %loop]", *ir.lines,
        f"  %next = add i64 %i, {lanes}", "  %more = icmp slt i64 %next, %n",
        "  br i1 %more, label %loop, label %done", "done:", "  ret void", "}"])


_RELATIONS = {"StrictLessThan": "olt", "LessThan": "ole", "Equality": "oeq", "Unequality": "une"}
_INTRINSICS = {"ceiling": "ceil", "floor": "floor", "log": "log"}


class _Writer:
    """The loop body of ``ir_text``: each node of the expressions written once as an instruction
    on ``lanes`` doubles (or, for a condition, ``lanes`` bits)."""

    def __init__(self, lanes: int):
        self.lanes, self.vector, self.bits = lanes, f"<{lanes} x double>", f"<{lanes} x i1>"
        self.names, self.lines, self.intrinsics, self.count = {}, [], {}, 0

    def line(self, *texts):
        self.lines.extend("  " + t for t in texts)

    def emit(self, text: str) -> str:
        self.count += 1
        self.line(f"%v{self.count} = {text}")
        return f"%v{self.count}"

    def splat(self, x: float, kind: str = "double") -> str:
        """A constant in every lane, as LLVM 19's ``splat``: half the text of writing each lane
        out, which LLVM parses a fifth faster (a search's 324 kernels: 0.53 against 0.67 CPU-s)."""
        bits = ("true" if x else "false") if kind == "i1" else f"0x{struct.unpack('<Q', struct.pack('<d', x))[0]:016X}"
        return f"splat ({kind} {bits})"

    def number(self, expr) -> str:
        return self._typed(expr, False)

    def condition(self, expr) -> str:
        return self._typed(expr, True)

    def _typed(self, expr, boolean: bool) -> str:
        """The vector of ``expr``, which must be a condition (``boolean``) or a number."""
        name, kind = self.value(expr)
        if kind != boolean:
            raise NotImplementedError(f"{'a number' if boolean else 'a condition'} where the other belongs")
        return name

    def value(self, expr) -> tuple[str, bool]:
        """(the vector holding ``expr``, whether it is a condition)."""
        known = self.names.get(expr)
        if known is None:
            known = self.names[expr] = self._write(expr)
        return known

    def _write(self, expr) -> tuple[str, bool]:
        kind, args = type(expr).__name__, expr.args
        if expr.is_Number:
            return self.splat(float(expr)), False
        if kind in ("BooleanTrue", "BooleanFalse"):
            return self.splat(kind == "BooleanTrue", "i1"), True
        if kind in ("Add", "Mul"):
            return self._fold("fadd" if kind == "Add" else "fmul", [self.number(a) for a in args]), False
        if kind == "Pow":
            return self._power(*args), False
        if kind in ("Max", "Min"):
            return self._extreme("ogt" if kind == "Max" else "olt", [self.number(a) for a in args]), False
        if kind in _RELATIONS and any(self.value(a)[1] for a in args):     # symengine's ``x == True``
            if kind not in ("Equality", "Unequality"):
                raise NotImplementedError(f"{kind} of conditions")
            left, right = (self.condition(a) for a in args)
            return self.emit(f"icmp {'eq' if kind == 'Equality' else 'ne'} {self.bits} {left}, {right}"), True
        if kind in _RELATIONS:
            left, right = (self.number(a) for a in args)
            return self.emit(f"fcmp {_RELATIONS[kind]} {self.vector} {left}, {right}"), True
        if kind in _INTRINSICS:
            return self.call(_INTRINSICS[kind], self.number(args[0])), False
        if kind in ("And", "Or"):
            return self._fold(kind.lower(), [self.condition(a) for a in args], self.bits), True
        if kind == "Not":
            return self.emit(f"xor {self.bits} {self.condition(args[0])}, {self.splat(True, 'i1')}"), True
        if kind == "Piecewise":
            return self._choice(args[0::2], args[1::2]), False
        raise NotImplementedError(kind)

    def _fold(self, op: str, parts, kind=None) -> str:
        """``parts`` combined left to right (a sum or product in symengine's order of its terms)."""
        value = parts[0]
        for part in parts[1:]:
            value = self.emit(f"{op} {kind or self.vector} {value}, {part}")
        return value

    def _extreme(self, compare: str, parts) -> str:
        """``Max``/``Min`` folded left as ``a > b ? a : b`` (``a < b ? a : b``)."""
        value = parts[0]
        for part in parts[1:]:
            larger = self.emit(f"fcmp {compare} {self.vector} {value}, {part}")
            value = self.emit(f"select {self.bits} {larger}, {self.vector} {value}, {self.vector} {part}")
        return value

    def _power(self, base, exponent) -> str:
        """``1/x`` for ``x**-1``, repeated products for other small integer powers, else LLVM's."""
        if exponent.is_Integer and 0 < abs(int(exponent)) <= 4:
            x = self.number(base)
            value = self._fold("fmul", [x] * abs(int(exponent)))
            return value if int(exponent) > 0 else self.emit(f"fdiv {self.vector} {self.splat(1.0)}, {value}")
        if str(exponent) == "1/2":
            return self.call("sqrt", self.number(base))
        return self.call("pow", self.number(base), self.number(exponent))

    def _choice(self, arms, conditions) -> str:
        """``Piecewise`` as selects from the last arm back (NaN where no condition holds)."""
        value = self.splat(float("nan"))
        for arm, condition in reversed(list(zip(arms, conditions))):
            if type(condition).__name__ == "BooleanTrue":
                value = self.number(arm)
            else:
                value = self.emit(f"select {self.bits} {self.condition(condition)}, {self.vector} "
                                  f"{self.number(arm)}, {self.vector} {value}")
        return value

    def call(self, name: str, *values) -> str:
        """LLVM's intrinsic ``name`` (``ceil``, ``pow``, ...) on ``lanes`` doubles."""
        self.intrinsics[name] = len(values)
        return self.emit(f"call {self.vector} @llvm.{name}.v{self.lanes}f64("
                         f"{', '.join(f'{self.vector} {v}' for v in values)})")
