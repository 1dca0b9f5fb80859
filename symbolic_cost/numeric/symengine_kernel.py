"""symengine's kernels of an expression set, in the tiers a call's size repays: its closure
evaluator (``Lambdify(backend="lambda")``), numpy over whole columns (``vector_program``), LLVM's
machine code without optimisations and with them, and the ``QuickKernel`` that climbs from
closures to machine code as its calls grow.  LLVM's kernels
are kept on disk (``kernel_cache``); the closures are not (finding them there would cost about
what making them does: the key's digests and the branch-free rewrite, against symengine's CSE).

>>> import numpy as np
>>> from symbolic_cost.symbols import b, l
>>> tiers = kernel([b * l, b + l], [b, l], "auto")
>>> tiers.level, tiers(np.array([[2.0, 3.0]]))[0].tolist()
('closures', [6.0, 5.0])
"""

from __future__ import annotations

from symbolic_cost.numeric import kernel_cache, vector_ir, vector_kernel, vector_program
from symbolic_cost.numeric.llvm_form import machine_form, symengine_form

OPTIMIZED_ROWS = 2**19
"""Configurations from which the machine code is compiled with LLVM's optimisations
(``opt_level`` 3; the ``vector_kernel``'s code generation at level 1) rather than without (0).
On a calibrated step time the optimised code takes two to three times as long to compile and
runs from a third to two and a half times as fast, so it repays its compile from some hundreds
of thousands to a few million configurations (``benchmarks/bench.py`` measures both).  A kernel compiled for fewer, or for a
number ``compile_exprs`` is not told, recompiles itself optimised when a call passes this many
(``QuickKernel``)."""
PROGRAM_ROWS = 2**15
"""Configurations below which a kernel compiled for a number of rows it is told is not compiled
but run by numpy, an operation at a time over every row (``vector_program``; not filed on disk
by itself: a search files it with the rest of its kernel, ``kernel_cache.built``).  On a
calibrated step time of some 1,200 operations, LLVM's compile without its optimisations costs
about what numpy takes for 30,000 configurations, and its code then runs some ten times as
fast as numpy.  A search tells its kernels four runs of each group of layouts
(``ranking.RERUNS``): four numpy runs of 8,192 cost what one compile and four runs do."""
CLOSURE_ROWS = 2**11
"""Configurations a kernel compiled for a number ``compile_exprs`` is not told evaluates in all
through symengine's closure evaluator (``Lambdify(backend="lambda")``: each common subexpression
a C++ closure) before it compiles machine code.  The closures cost a fifth of
the vector kernel's compile at level 0 to make (most of it symengine's CSE, which the machine
code needs too) and run a hundred times slower, so machine code repays its compile from one
to two thousand configurations."""


def symengine():
    """The ``symengine`` module, or ``None`` where it is not installed."""
    try:
        import symengine
    except ImportError:
        return None
    return symengine


def kernel(values, symbols, level: str):
    """symengine's kernel of the SymPy ``values`` over ``symbols``: LLVM's optimised at ``level``
    ``"optimized"`` or where it is on disk, else compiled without LLVM's optimisations
    (``"quick"``); at ``level`` ``"program"`` numpy's run of its operations; at ``level``
    ``"auto"`` a ``QuickKernel`` (closures first); ``None`` when
    symengine is missing or cannot express the set (then the numpy backend runs)."""
    se = symengine()
    if se is None:
        return None
    try:
        converted = symengine_form(values, se)
        arguments = [se.sympify(s) for s in symbols]
        if level == "auto":
            return QuickKernel(converted, arguments)
        if level == "program":
            return _program(converted, arguments)
        return _machine_code(converted, arguments, level)[0]
    except _UNCOMPILED + (se.SympifyError,):
        return None         # e.g. a constraint's ITE that symengine cannot convert: the numpy kernel runs


_UNCOMPILED = (RuntimeError, TypeError, NotImplementedError, AttributeError)
"""What symengine raises for a set it cannot convert or compile."""


def _machine_code(converted, arguments, level: str) -> tuple[object, str]:
    """The LLVM kernel of the symengine expressions ``converted`` at ``level`` and the level it
    has (``"quick"``: the optimised one where it is on disk, else compiled or loaded at
    ``opt_level`` 0)."""
    digests = kernel_cache.dag_digests(converted)
    best = _optimized(converted, arguments, digests, make=level == "optimized")
    if best is not None:
        return best, "optimized"
    return kernel_cache.llvm_kernel(lambda: _lambdify(converted, arguments, 0), digests, arguments, "quick"), "quick"


def _lambdify(converted, arguments, opt_level: int):
    """Machine code of the set at ``opt_level`` (0 or 3): the ``vector_kernel`` where llvmlite
    is installed and writes every node, else symengine's LLVM kernel of its branch-free form."""
    vector = vector_kernel.compile_vector(converted, arguments, opt_level)
    if vector is not None:
        return vector
    se = symengine()
    return se.Lambdify(arguments, machine_form(converted, se), backend="llvm", cse=True, opt_level=opt_level)


def _program(converted, arguments):
    """numpy's run of the set's operations (``vector_program``); LLVM's machine code where it has
    a node ``vector_ir`` does not write."""
    try:
        return vector_program.ProgramKernel(vector_ir.program(converted, arguments))
    except NotImplementedError:
        return _machine_code(converted, arguments, "quick")[0]


def _closures(converted, arguments):
    """symengine's closure evaluator of the set, or ``None`` where it cannot express it."""
    try:
        return symengine().Lambdify(arguments, converted, backend="lambda", cse=True)
    except _UNCOMPILED:
        return None


def _optimized(converted, arguments, digests, make: bool = True):
    """The optimised kernel, from disk or (``make``) compiled; ``None`` if neither."""
    return kernel_cache.llvm_kernel((lambda: _lambdify(converted, arguments, 3)) if make else None, digests, arguments)


class QuickKernel:
    """The kernel ``compile_exprs`` makes when it is not told how many configurations it will
    evaluate; it compiles further as its calls grow, as a JIT compiler tiers: symengine's closure
    evaluator first (``_closures``, made with the kernel: where neither they nor LLVM can express the
    set, ``kernel`` answers ``None`` and the numpy backend runs), LLVM's machine code without
    optimisations once its calls have passed ``CLOSURE_ROWS`` configurations in all (the optimised
    kernel instead where it is on disk), the optimised kernel the first time one call passes ``OPTIMIZED_ROWS``.  ``level``
    says which runs (``"closures"``, ``"quick"``, ``"optimized"``).  It pickles with its
    expressions, so a Dask worker does the same (closures do not pickle: a worker makes its own)."""

    def __init__(self, converted, arguments):
        self.converted, self.arguments, self.rows = converted, arguments, 0
        self._start()

    def _start(self):
        # made now, not at the first call: a set that neither the closures nor LLVM express must
        # fail here, where ``kernel`` hands it to the numpy backend (DeepFlow's LSTM step time)
        self.function, self.level = _closures(self.converted, self.arguments), "closures"
        if self.function is None:                 # a set only LLVM expresses: compile it now
            self._compile("quick")

    @property
    def optimized(self) -> bool:
        return self.level == "optimized"

    def for_rows(self, rows: int):
        """The kernel to run ``rows`` configurations with."""
        self.rows += rows
        if rows >= OPTIMIZED_ROWS and self.level in ("closures", "quick"):
            self._compile("optimized")
        elif self.rows >= CLOSURE_ROWS and self.level == "closures":
            self._compile("quick")
        return self.function

    def _compile(self, level: str):
        try:
            self.function, self.level = _machine_code(self.converted, self.arguments, level)
        except _UNCOMPILED:
            if self.function is None:
                raise
            self.level = "closures only"        # what LLVM cannot compile, the closures still evaluate

    def __getstate__(self):
        closures = self.level.startswith("closures")
        return {k: v for k, v in vars(self).items() if k != "function" or not closures}

    def __setstate__(self, state):
        vars(self).update(state)
        if "function" not in state:
            self._start()

    def __call__(self, inputs, out=None):
        return self.function(inputs, out=out)
