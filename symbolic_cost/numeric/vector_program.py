"""A ``vector_ir.Program`` run by numpy over whole columns (``ProgramKernel``): each operation one
numpy call on every row at once, nothing compiled.  For an expression set evaluated on few rows,
where LLVM's compile would cost more than the rows: the calibrated step time of a search's group
of layouts is some 1,250 operations, which LLVM compiles (without its optimisations) in about
24 ms, where numpy runs them in about 2 ms plus 1 µs a row (``compile.PROGRAM_ROWS``).  The
operations and their order are the vector kernel's, so are the doubles (``log`` and ``pow``
aside, whose last bit may differ).

>>> import numpy as np, symengine
>>> from symbolic_cost.numeric.vector_ir import program
>>> b, l = symengine.symbols("b l")
>>> kernel = ProgramKernel(program([b * l, symengine.Max(b, l) / 2], [b, l]))
>>> kernel(np.array([[2.0, 3.0], [5.0, 4.0]])).tolist()
[[6.0, 1.5], [20.0, 2.5]]
"""

from __future__ import annotations

import numpy as np

from symbolic_cost.numeric.vector_ir import Program

BLOCK = 1 << 15
"""Rows run at a time: the registers alive at once (a hundred or so) stay within tens of MB."""
_UFUNCS = {"add": np.add, "mul": np.multiply, "div": np.divide, "lt": np.less, "le": np.less_equal,
           "eq": np.equal, "ne": np.not_equal, "gt": np.greater, "ieq": np.equal, "ine": np.not_equal,
           "and": np.logical_and, "or": np.logical_or, "not": np.logical_not, "select": np.where,
           "ceil": np.ceil, "floor": np.floor, "log": np.log, "sqrt": np.sqrt, "pow": np.power}


def _freed(made: Program) -> dict:
    """For each operation that is the last to read registers past the inputs (and not outputs),
    those registers."""
    last = {}
    for k, (op, *operands) in enumerate(made.ops):
        if op != "const":
            for r in operands:
                last[r] = k
    freed: dict = {}
    kept = set(made.outputs)
    for r, k in last.items():
        if r >= made.inputs and r not in kept:
            freed.setdefault(k, []).append(r)
    return freed


class ProgramKernel:
    """``made`` run by numpy; called as ``VectorKernel`` is (``columns``, or a matrix of rows)."""

    def __init__(self, made: Program):
        self.program = made
        self.inputs, self.outputs = made.inputs, len(made.outputs)
        freed = _freed(made)
        self._steps = [(None if op == "const" else _UFUNCS[op], operands, freed.get(k, ()))
                       for k, (op, *operands) in enumerate(made.ops)]

    def __getstate__(self):
        return {"program": self.program}

    def __setstate__(self, state):
        self.__init__(state["program"])

    def columns(self, flat, size: int, at=None, out=None, threads: int = 1) -> list[np.ndarray]:
        """Every output at the ``size`` rows of the input columns ``flat`` (those at positions
        ``at``), into ``out``'s columns where given (``threads`` is ``VectorKernel``'s: one here)."""
        out = [np.empty(size) for _ in range(self.outputs)] if out is None else out
        for start in range(0, size, BLOCK):
            rows = slice(start, min(start + BLOCK, size))
            inputs = [np.asarray(c[rows] if at is None else np.take(c, at[rows]), dtype=np.float64) for c in flat]
            for column, value in zip(out, self._run(inputs)):
                column[rows] = value
        return out

    def _run(self, inputs) -> list:
        registers = inputs + [None] * len(self._steps)
        at = self.inputs
        with np.errstate(all="ignore"):
            for ufunc, operands, freed in self._steps:
                registers[at] = operands[0] if ufunc is None else ufunc(*[registers[r] for r in operands])
                for r in freed:                     # its last reader: give the memory back
                    registers[r] = None
                at += 1
        return [registers[r] for r in self.program.outputs]

    def __call__(self, inputs, out=None):
        """symengine's calling convention: ``inputs`` one row per configuration, ``out`` the same."""
        inputs = np.atleast_2d(np.asarray(inputs, dtype=np.float64))
        columns = self.columns([inputs[:, j] for j in range(self.inputs)], len(inputs))
        result = np.stack(columns, axis=1) if columns else np.empty((len(inputs), 0))
        if out is None:
            return result
        out[...] = result
        return out
