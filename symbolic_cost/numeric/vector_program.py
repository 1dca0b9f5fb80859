"""A ``vector_ir.Program`` run by numpy over whole columns (``ProgramKernel``): each operation one
numpy call on every row at once, nothing compiled.  For an expression set evaluated on few rows,
where LLVM's compile would cost more than the rows: the calibrated step time of a search's group
of layouts is some 1,250 operations, which LLVM compiles (without its optimisations) in tens of
milliseconds, where numpy runs them in a few milliseconds plus about a microsecond a row
(``compile.PROGRAM_ROWS``).  The
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

from symbolic_cost.numeric.vector_ir import Program, log2_up
from symbolic_cost.numeric.vector_kernel import ColumnKernel

BLOCK = 1 << 15
"""Rows run at a time: the registers alive at once (a hundred or so) stay within tens of MB."""
_UFUNCS = {"add": np.add, "mul": np.multiply, "div": np.divide, "lt": np.less, "le": np.less_equal,
           "eq": np.equal, "ne": np.not_equal, "gt": np.greater, "ieq": np.equal, "ine": np.not_equal,
           "and": np.logical_and, "or": np.logical_or, "not": np.logical_not, "select": np.where,
           "ceil": np.ceil, "floor": np.floor, "log": np.log, "sqrt": np.sqrt, "pow": np.power,
           "log2up": log2_up}


def _freed(made: Program) -> list:
    """For each operation, the registers past the inputs (and not outputs) it is the last to
    read, or ``None``."""
    last = {}
    for k, op in enumerate(made.ops):
        if op[0] != "const":
            for r in op[1:]:
                last[r] = k
    freed = [None] * len(made.ops)
    kept = set(made.outputs)
    for r, k in last.items():
        if r >= made.inputs and r not in kept:
            freed[k] = (freed[k] or ()) + (r,)
    return freed


class ProgramKernel(ColumnKernel):
    """``made`` run by numpy; called as ``VectorKernel`` is (``columns``, or a matrix of rows)."""

    def __init__(self, made: Program):
        self.program = made
        self.inputs, self.outputs = made.inputs, len(made.outputs)
        self._ufuncs, self._freed = [_UFUNCS.get(op[0]) for op in made.ops], _freed(made)

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
        r = inputs + [None] * len(self._ufuncs)
        at = self.inputs
        with np.errstate(all="ignore"):
            for op, ufunc, freed in zip(self.program.ops, self._ufuncs, self._freed):
                if ufunc is None:                  # a constant
                    r[at] = op[1]
                elif len(op) == 3:
                    r[at] = ufunc(r[op[1]], r[op[2]])
                elif len(op) == 2:
                    r[at] = ufunc(r[op[1]])
                else:
                    r[at] = ufunc(r[op[1]], r[op[2]], r[op[3]])
                if freed is not None:              # its last reader: give the memory back
                    for k in freed:
                        r[k] = None
                at += 1
        return [r[k] for k in self.program.outputs]
