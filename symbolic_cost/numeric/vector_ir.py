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
``floor``, ``log``, ``sqrt``, ``pow``), ``select`` and ``log2up`` (``log2_up_ir``)."""
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
    symengine's CSE; a common subexpression written where it is first read, so one that only a
    recognised form read is never written); ``NotImplementedError`` for a node it does not write.

    The last set's program is remembered (``_LAST``): a kernel that tiers up from LLVM's quick
    machine code to its optimised code would otherwise write the same program twice."""
    last = _LAST[0] if _LAST else None
    if last is not None and last[0] is converted and last[1] == tuple(arguments):
        return last[2]
    made = _written(converted, arguments)
    _LAST[:] = [(converted, tuple(arguments), made)]
    return made


_LAST: list = []
"""``[(converted, arguments, Program)]`` of the last set ``program`` wrote: the set is held, so
that ``is`` names it (a set gone could leave its ``id`` to another); one entry, read and replaced
whole, so a thread reading it while another writes sees one set's or the other's."""


def _written(converted, arguments) -> Program:
    import symengine as se
    replacements, reduced = se.cse(list(converted))
    writer = _Writer(len(arguments))
    for k, symbol in enumerate(arguments):
        writer.names[symbol] = k
    writer.definitions, writer.inverse_ln2 = dict(replacements), 1 / se.log(se.Integer(2))
    outputs = [writer.number(e) for e in reduced]
    return Program(len(arguments), writer.ops, outputs, writer.booleans)


def ir_text(made: Program, lanes: int, pooled: bool = False) -> str:
    """LLVM IR of ``kernel(n, stream, a0.., o0..)``: a loop over ``n`` rows, ``lanes`` at a time,
    that runs ``made`` and writes each output into its column.  Where ``stream`` is not 0 the
    outputs are written past the caches (non-temporal stores, ``vmovntpd``), and each output
    column must then start on a 64-byte boundary: a call whose columns outgrow the caches
    spares reading every line of them before writing it (``VectorKernel.STREAM_ROWS``).  The
    choice is a branch taken the same way on every row.

    ``pooled``: each number an operation reads is loaded where it is read, from a table of the
    program's numbers (``_pooled``), rather than written in as a constant vector."""
    vector, bits = f"<{lanes} x double>", f"<{lanes} x i1>"
    names = [f"%a{k}" for k in range(made.inputs)]
    lines = [f"  %p{k} = getelementptr double, ptr %in{k}, i64 %i\n  %a{k} = load {vector}, ptr %p{k}, align 8"
             for k in range(made.inputs)]
    calls, pool = {}, {}
    for op, *operands in made.ops:
        if op == "const":
            names.append(_splat(operands[0]))
            continue
        args = [names[r] for r in operands]
        if pooled:
            args = [_pooled(a, pool, lines, lanes) if a.startswith("splat (double") else a for a in args]
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
        elif op == "log2up":
            lines.append(log2_up_ir(f"%v{len(names)}", args[0], lanes))
            names.append(f"%v{len(names)}")
            continue
        else:
            calls[op] = len(args)
            text = f"call {vector} @llvm.{op}.v{lanes}f64({', '.join(f'{vector} {a}' for a in args)})"
        names.append(f"%v{len(names)}")
        lines.append(f"  {names[-1]} = {text}")
    stores = {"near": [], "far": []}
    for k, r in enumerate(made.outputs):
        lines.append(f"  %q{k} = getelementptr double, ptr %out{k}, i64 %i")
        stores["near"].append(f"  store {vector} {names[r]}, ptr %q{k}, align 8")
        stores["far"].append(f"  store {vector} {names[r]}, ptr %q{k}, align 64, !nontemporal !0")
    parameters = ", ".join([f"ptr noalias %in{k}" for k in range(made.inputs)]
                           + [f"ptr noalias %out{k}" for k in range(len(made.outputs))])
    head = [f"declare {vector} @llvm.{name}.v{lanes}f64({', '.join([vector] * arity)})"
            for name, arity in sorted(calls.items())]
    if pool:          # the table, and its address made opaque in each round (see ``_pooled``)
        head.append(f"@numbers = private unnamed_addr constant [{len(pool)} x double] "
                    f"[{', '.join(v[7:-1] for v in pool)}], align 64")
        lines.insert(0, '  %numbers = call ptr asm "", "=r,0"(ptr @numbers)')
    return "\n".join(head + [
        f"define void @kernel(i64 %n, i64 %stream{', ' if parameters else ''}{parameters}) {{",
        "entry:", "  %none = icmp sle i64 %n, 0", "  %far = icmp ne i64 %stream, 0",
        "  br i1 %none, label %done, label %loop",
        "loop:", "  %i = phi i64 [0, %entry], [%next, %latch]", *lines,
        "  br i1 %far, label %far_stores, label %near_stores",
        "near_stores:", *stores["near"], "  br label %latch",
        "far_stores:", *stores["far"], "  br label %latch",
        "latch:", f"  %next = add i64 %i, {lanes}", "  %more = icmp slt i64 %next, %n",
        "  br i1 %more, label %loop, label %done",
        "done:", "  fence seq_cst", "  ret void", "}",      # streamed stores seen by every thread after
        "!0 = !{i32 1}"])


EXPONENT_BIAS = 1023
MANTISSA = (1 << 52) - 1
TWO_52 = 0x4330000000000000
"""The bits of the double 2**52: or-ed with a whole number below 2**52, the double 2**52 plus it."""


def log2_up_ir(name: str, x: str, lanes: int) -> str:
    """LLVM IR of ``name = ceil(log2 x)`` for positive normal doubles ``x``, from the bits of
    ``x`` (no ``log``): with ``x = 2**(E - 1023) * (1 + m / 2**52)``, ``floor(log2 x)`` is
    ``E - 1023``, one more where the mantissa ``m`` is not 0.  Exact for every such ``x``,
    where ``ceil(log(x) / log(2))`` rounds one too high at some powers of two past 2**28; and
    no ``log`` call, the costliest operation a kernel would otherwise run.  The whole number
    ``E + [m != 0]`` becomes a double by or-ing it into the bits of 2**52 (exact below 2**52,
    and any instruction set has it, where converting 64-bit integers needs AVX-512)."""
    words, bits, vector = f"<{lanes} x i64>", f"<{lanes} x i1>", f"<{lanes} x double>"
    t = f"{name}_"
    return "\n".join([
        f"  {t}b = bitcast {vector} {x} to {words}",
        f"  {t}e = lshr {words} {t}b, splat (i64 52)",
        f"  {t}m = and {words} {t}b, splat (i64 {MANTISSA})",
        f"  {t}z = icmp ne {words} {t}m, zeroinitializer",
        f"  {t}c = zext {bits} {t}z to {words}",
        f"  {t}k = add {words} {t}e, {t}c",
        f"  {t}o = or {words} {t}k, splat (i64 {TWO_52})",
        f"  {t}f = bitcast {words} {t}o to {vector}",
        f"  {name} = fsub {vector} {t}f, {_splat(float(2 ** 52 + EXPONENT_BIAS))}"])


def log2_up(x):
    """numpy's ``ceil(log2 x)`` of a column of doubles, bit for bit as ``log2_up_ir`` computes
    it (every double, not only positive ones: the same bits in, the same number out).

    >>> import numpy as np
    >>> log2_up(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 2.0 ** 40, 2.0 ** 40 + 1, 0.75])).tolist()
    [0.0, 1.0, 2.0, 2.0, 3.0, 40.0, 41.0, 0.0]
    """
    import numpy as np
    bits = np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)
    whole = (bits >> np.uint64(52)) + ((bits & np.uint64(MANTISSA)) != 0)
    return (whole | np.uint64(TWO_52)).view(np.float64) - float(2 ** 52 + EXPONENT_BIAS)


def _pooled(splat: str, pool: dict, lines: list, lanes: int) -> str:
    """A number (``splat``'s text) loaded from the table ``@numbers`` where an operation reads it,
    into every lane: the load folds into that operation as a broadcast operand (``{1to8}``).
    Written in as constants, LLVM hoists the program's two hundred numbers out of the loop into
    vector registers it does not have, and reads them back from the stack, 64 bytes each time;
    the table's address goes through an empty ``asm`` in each round so that it cannot.  The
    loaded numbers leave the registers to the program's values, and the stack is read less than
    half as often.  LLVM's quick code generation (level 0) gains nothing from it."""
    k = pool.setdefault(splat, len(pool))
    name = f"%n{len(lines)}"
    lines.append(f"  {name}p = getelementptr double, ptr %numbers, i64 {k}\n"
                 f"  {name}s = load double, ptr {name}p, align 8\n"
                 f"  {name}i = insertelement <{lanes} x double> poison, double {name}s, i64 0\n"
                 f"  {name} = shufflevector <{lanes} x double> {name}i, <{lanes} x double> poison, "
                 f"<{lanes} x i32> zeroinitializer")
    return name


def _splat(value) -> str:
    """A constant in every lane, as LLVM 19's ``splat``: half the text of writing each lane
    out, which LLVM parses faster (a search parses hundreds of kernels)."""
    if isinstance(value, bool):
        return f"splat (i1 {'true' if value else 'false'})"
    return f"splat (double 0x{struct.unpack('<Q', struct.pack('<d', value))[0]:016X})"


class _Writer:
    """The operations of ``program``: each node of the expressions once, a number or (its
    register in ``booleans``) a condition."""

    def __init__(self, inputs: int):
        self.inputs, self.names, self.ops, self.booleans, self.constants = inputs, {}, [], set(), {}
        self.definitions: dict = {}       # symengine's common subexpressions, by their symbols
        self.inverse_ln2 = None           # symengine's 1/log(2), set by ``program``

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
                register = names[arg] = self._write(self.definitions.get(arg, arg))
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
        whole = self._log2_of(args[0]) if kind == "ceiling" else None
        if whole is not None:
            return self.emit("log2up", self.number(whole))
        return self.emit(_CALLS[kind], self.number(args[0]))

    def _log2_of(self, x):
        """``n`` where ``x`` is ``log(n)/log(2)`` (``portable``'s form of ``Log2(n)``, the rounds of
        a tree, whose ceiling is ``log2up``), else ``None``.

        >>> import symengine
        >>> n = symengine.symbols("n")
        >>> made = program([symengine.ceiling(symengine.log(n) / symengine.log(2)), symengine.ceiling(n / 2)], [n])
        >>> [op for op, *_ in made.ops]
        ['log2up', 'const', 'mul', 'ceil']
        """
        if type(x).__name__ != "Mul" or len(x.args) != 2:
            return None
        one, two = (self.definitions.get(f, f) for f in x.args)
        for log, scale in ((one, two), (two, one)):
            if type(log).__name__ == "log" and scale == self.inverse_ln2:
                return log.args[0]
        return None

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
