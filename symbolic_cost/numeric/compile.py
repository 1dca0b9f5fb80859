"""Compiled evaluation: a set of expressions becomes one fused kernel, once.

``compile_exprs`` turns ``{name: expression}`` into a function of arrays, on
one of three backends:

* ``"llvm"``: machine code of the whole set, after symengine's common-subexpression
  elimination, as one loop over the configurations; nothing is allocated per operation.
  Where llvmlite is installed (a dependency where it has wheels) the loop computes
  ``vector_kernel.width()`` rows per instruction from contiguous columns
  (``numeric.vector_kernel``), else it is symengine's ``Lambdify``, a row at a time.  It compiles without
  LLVM's optimisations (half the time) unless told of ``OPTIMIZED_ROWS`` configurations or
  more, and recompiles optimised the first time a call passes that many.  Not told how many,
  it starts as symengine's closure evaluator and compiles machine code once its calls have
  passed ``CLOSURE_ROWS`` configurations (``numeric.symengine_kernel``).
* ``"numba"``: numba (``pip install symbolic_cost[fast]``) compiles a generated loop over
  the rows (``numeric.loop_kernel``): every input and output a contiguous column, the
  formulas straight-line code LLVM vectorises across rows, the rows split between the
  cores (``numba.get_num_threads()``, ``NUMBA_NUM_THREADS``) by threads that release the
  interpreter lock.  Faster than the LLVM backend's vector kernel on some formulas, slower on
  others, and seconds to compile: it runs where asked, and in sweeps of ``NUMBA_CACHED_ROWS``
  configurations or more where its kernel is in the disk cache and measured faster on that
  formula (``sweep_backend``).
* ``"numpy"``: SymPy's ``lambdify`` with CSE, ``Max``/``Min`` printed as
  ``numpy.maximum``/``minimum`` (element-wise, so scalars and arrays broadcast)
  and ``Piecewise`` as ``numpy.select``; evaluated in blocks of ``BLOCK`` rows
  so that the temporaries stay in cache.

Every backend takes ``floor`` and ``ceiling`` of a ratio of whole numbers in the form doubles
round exactly (``numeric.rounding_margin``): computed as a product with a rounded reciprocal,
``floor(4048/2024)`` would otherwise come out as 1.

The default is ``"llvm"`` where symengine is installed and the set converts
(``Mod`` and the library's own functions are rewritten first), ``"numpy"``
otherwise; the environment variable ``SYMBOLIC_COST_BACKEND`` pins one.  A backend
that is missing or cannot express a set falls back to the next (numba, then LLVM, then
numpy).  All give the same numbers (``tests/test_backends.py`` checks every expression set
the library builds).  Compiled kernels are kept in memory per expression set
and on disk (``numeric.kernel_cache``), so a second process skips the
compilation.  Inputs are broadcast float64 arrays; outputs come back as arrays
or as a pandas DataFrame with one row per configuration.
"""

from __future__ import annotations

import numbers
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Mapping

import numpy as np
from sympy import Basic, Expr, S, Symbol, lambdify, nan, sympify, zoo
from sympy.core.function import AppliedUndef
from sympy.printing.numpy import NumPyPrinter

from symbolic_cost.checks import LARGEST_DOUBLE, InputError, InputTypeError, instance, shown
from symbolic_cost.collector import paused
from symbolic_cost.numeric import kernel_cache, loop_kernel, symengine_kernel
from symbolic_cost.numeric.pages import keep_freed_pages
from symbolic_cost.numeric.symengine_kernel import OPTIMIZED_ROWS, PROGRAM_ROWS, QuickKernel, symengine
from symbolic_cost.numeric.vector_kernel import ColumnKernel, VectorKernel
from symbolic_cost.numeric.portable import exactly_rounded, free_symbols_of, parts, portable_all
from symbolic_cost.symbols import resolve_names

BACKENDS = ("llvm", "numba", "numpy")
BLOCK = 8192
"""Configurations the numpy backend evaluates at a time: small enough that the temporaries
of thousands of operations stay in cache (one pass over a million rows, whose temporaries do
not, runs several times slower)."""
LLVM_BLOCK = 16384
"""Configurations the LLVM kernel reads at a time through one reused input buffer (a fresh
input matrix for millions of rows costs more in page faults than the kernel itself; 16384
rows keep the buffer and the block of outputs within a megabyte each)."""
NUMBA_CACHED_ROWS = 2 * 10**8
"""Configurations from which a sweep considers numba's kernel, when it is in the disk cache: loading
it costs more than half a CPU-second, repaid from about 2 x 10^8 where it runs faster
(``sweep_backend``)."""
SAMPLE_ROWS = 2**17
"""Configurations each backend's kernel runs when ``sweep_backend`` measures which is faster."""
_MEMORY: dict = {}
_POOL: dict = {}


def sweep_backend(rows: int | None, exprs: Mapping, symbols=None) -> str | None:
    """The backend a sweep of ``rows`` configurations uses: ``"numba"`` where numba is installed,
    no backend is pinned, the sweep is large (``NUMBA_CACHED_ROWS``), numba's kernel of these
    expressions is in the disk cache, and it is measured faster than the LLVM backend's on this
    formula (``numba_is_faster``); otherwise ``None`` (the default).  Which is faster depends on
    the formula: numba's loop ran GPT-3 175B's totals on the peak step time at 1.3 times the vector
    kernel's rate, and on the calibrated step time, which every command uses, at half of it
    (``reports/benchmark.md``).  A kernel not on disk is not compiled for the choice: numba takes
    seconds to a minute where LLVM takes a tenth of a second."""
    if os.environ.get("SYMBOLIC_COST_BACKEND") or rows is None or rows < NUMBA_CACHED_ROWS \
            or loop_kernel.numba() is None:
        return None
    values = portable_all(exprs.values())
    if symbols is None:
        symbols = free_symbols_of(values)
    names = tuple(resolve_names({s: None for s in symbols}))
    if not loop_kernel.cached(values, names):
        return None
    key = (tuple(exprs), tuple(sympify(v) for v in exprs.values()), names)
    if key not in _FASTER:
        _FASTER[key] = numba_is_faster(exprs, names)
    return "numba" if _FASTER[key] else None


_FASTER: dict = {}
"""``numba_is_faster``'s verdicts in this process, by expression set."""


def numba_is_faster(exprs: Mapping, symbols) -> bool:
    """Whether numba's kernel of ``exprs`` runs ``SAMPLE_ROWS`` configurations (each symbol 2, a
    whole number every formula takes) in less CPU time than the LLVM backend's optimised kernel,
    each timed on its second call (the first loads it)."""
    import time
    sample = {str(s): np.full(SAMPLE_ROWS, 2.0) for s in symbols}
    spent = {}
    for backend in ("numba", "llvm"):
        kernel = compile_exprs(exprs, symbols, backend=backend, rows=OPTIMIZED_ROWS)
        kernel(sample)
        start = time.process_time()
        kernel(sample)
        spent[kernel.backend] = time.process_time() - start
    return "numba" in spent and spent["numba"] < spent.get("llvm", float("inf"))


def default_backend() -> str:
    """``SYMBOLIC_COST_BACKEND`` if set, else ``"llvm"`` where symengine imports, else ``"numpy"``."""
    pinned = os.environ.get("SYMBOLIC_COST_BACKEND")
    if pinned:
        if pinned not in BACKENDS:
            raise InputError(f"SYMBOLIC_COST_BACKEND must be one of {', '.join(BACKENDS)}, got {pinned!r}",
                             "SYMBOLIC_COST_BACKEND")
        return pinned
    return "llvm" if symengine() is not None else "numpy"


def _numbers(value, name: str) -> None:
    """Refuse a value that is not numbers (an int, a float, a numpy array of them): text is never
    parsed here (``reader.read`` it), and ``None`` or a boolean is no size."""
    try:
        numbers = not isinstance(value, (str, bytes, bool)) and value is not None and \
            np.asarray(value).dtype.kind != "U" and np.asarray(value, dtype=np.float64) is not None
    except (TypeError, ValueError, OverflowError):      # text in a list, a structure, past a double
        numbers = False
    if not numbers:
        raise InputTypeError(f"{name} must be numbers (an int, a float or a numpy array of them, within a "
                             f"double's range), got {type(value).__name__} {shown(value)}", name)


@dataclass(frozen=True)
class Compiled:
    """A compiled expression set: call it with values for ``symbols``."""

    names: tuple[str, ...]
    symbols: tuple[Symbol, ...]
    function: object
    backend: str

    def __call__(self, values: Mapping, at=None, threads: int = 2) -> dict[str, np.ndarray]:
        """Every expression at ``values`` (numbers or arrays, broadcast together); with ``at``,
        at the rows ``at`` of ``values``' columns (the LLVM kernel reads them a block at a time:
        no copy of a column's rows, nor of their floats).  The LLVM kernel splits a large call
        between ``threads`` cores (1 or 2; numba's loop between ``numba.get_num_threads()``)."""
        if type(threads) is not int or threads not in (1, 2):
            raise InputError(f"threads must be 1 or 2, got {threads!r}", "threads")
        instance(values, Mapping, "values", " of symbols (or their names) to numbers or arrays")
        values = resolve_names(values)
        missing = [str(s) for s in self.symbols if s not in values]
        if missing:
            raise InputError(f"compiled expressions need values for {', '.join(missing)}", missing[0])
        for s in self.symbols:
            _numbers(values[s], str(s))
        if at is not None:
            columns = [np.asarray(values[s]) for s in self.symbols]
            at = _rows(at, min((c.shape[0] for c in columns if c.ndim), default=1))
            if self.backend == "llvm" and columns and all(c.ndim == 1 for c in columns):
                return dict(zip(self.names, self._llvm(columns, np.asarray(at), threads=threads)))
            values = {s: np.asarray(values[s])[at] for s in self.symbols}
        try:
            arrays = np.broadcast_arrays(*(np.asarray(values[s], dtype=np.float64) for s in self.symbols)) \
                if self.symbols else [np.zeros(())]
        except ValueError:
            shapes = ", ".join(f"{s} {np.shape(values[s])}" for s in self.symbols)
            raise InputError(f"the values do not broadcast together: {shapes}", "values") from None
        shape = arrays[0].shape
        flat = [a.ravel() for a in arrays]
        out = self._llvm(flat, threads=threads) if self.backend == "llvm" else \
            {"numba": self._numba, "numpy": self._numpy}[self.backend](flat)
        return {name: column.reshape(shape) for name, column in zip(self.names, out)}

    def _numpy(self, flat) -> list[np.ndarray]:
        size = flat[0].size
        out = [np.empty(size) for _ in self.names]
        for start in range(0, size, BLOCK):
            part = [a[start:start + BLOCK] for a in flat] if self.symbols else []
            for column, result in zip(out, self.function(*part)):
                column[start:start + BLOCK] = result
        return out

    def _numba(self, flat) -> list[np.ndarray]:
        """The generated loop on contiguous columns; with several threads, each its share of rows.
        Each output is a block of its own (one ``(outputs, rows)`` block is over glibc's largest
        mmap threshold at a million rows: fresh pages, zeroed by the kernel, on every call)."""
        keep_freed_pages()
        size = flat[0].size
        out = [np.empty(size) for _ in self.names]
        inputs = [np.ascontiguousarray(a) for a in flat] if self.symbols else []
        parts = min(loop_kernel.numba().get_num_threads(), max(size // LLVM_BLOCK, 1))
        if parts == 1:
            self.function(*out, *inputs)
            return out
        pool = _POOL.get(parts) or _POOL.setdefault(parts, ThreadPoolExecutor(parts))
        cuts = np.linspace(0, size, parts + 1).astype(int)
        jobs = [pool.submit(self.function, *(c[a:z] for c in out), *(c[a:z] for c in inputs))
                for a, z in zip(cuts[:-1], cuts[1:])]
        for job in jobs:
            job.result()
        return out

    def into(self, out, flat) -> None:
        """Every output at the rows of the contiguous float64 columns ``flat`` (one per symbol),
        into the rows of ``out`` (one per output, as long), on this thread alone: a Dask task's
        (``numeric.grid_tasks``), which has a core of its own."""
        if self.backend == "numba":
            self.function(*out, *flat)
        elif self.backend == "llvm":
            self._llvm(flat, out=out, threads=1)
        else:
            for column, result in zip(out, self._numpy(flat)):
                column[:] = result

    def bound(self, inputs, out):
        """``evaluate(size)``: the kernel on the first ``size`` rows of the contiguous float64
        columns ``inputs`` (one per symbol) into ``out``'s, on this thread, again and again (a
        Dask task's blocks, ``numeric.grid_tasks``).  The vector kernel is called with the
        columns' addresses, taken once (each call otherwise takes 16 of them and checks each
        column, a cost that a block of a few thousand rows notices); any other kernel through ``into``."""
        function = self.function
        if isinstance(function, VectorKernel):
            addresses = function.addresses(inputs, out)

            def evaluate(size: int):
                if size % function.lanes == 0:
                    function.run_at(size, addresses)
                else:
                    self.into([o[:size] for o in out], [i[:size] for i in inputs])
            return evaluate
        return lambda size: self.into([o[:size] for o in out], [i[:size] for i in inputs])

    def _llvm(self, flat, at=None, out=None, threads: int = 2) -> list[np.ndarray]:
        """Rows through the kernel a block at a time, into one reused ``(rows, outputs)`` block,
        then into each output's own contiguous column (as ``_numba``: no block over glibc's mmap
        threshold, and columns a reader takes without a stride), or into ``out``'s; with ``at``,
        the rows at those positions of ``flat``.  The vector kernel writes the columns itself,
        on ``threads`` (``VectorKernel.columns``)."""
        keep_freed_pages()
        size, width = (flat[0].size if at is None else at.size), max(len(self.symbols), 1)
        function = self.function.for_rows(size) if isinstance(self.function, QuickKernel) else self.function
        if isinstance(function, ColumnKernel):              # the vector kernel, or numpy's run of a program
            return function.columns(flat if self.symbols else [], size, at, out, threads)
        out = [np.empty(size) for _ in self.names] if out is None else out
        block = np.empty((min(size, LLVM_BLOCK), len(self.names)))
        inputs = np.zeros((min(size, LLVM_BLOCK), width))
        for start in range(0, size, LLVM_BLOCK):
            rows = min(LLVM_BLOCK, size - start)
            for j, column in enumerate(flat if self.symbols else []):
                inputs[:rows, j] = column[start:start + rows] if at is None else column[at[start:start + rows]]
            function(inputs[:rows], out=block[:rows])
            for i, column in enumerate(out):
                column[start:start + rows] = block[:rows, i]
        return out

    def frame(self, values: Mapping):
        """Inputs and outputs as a DataFrame, one row per configuration."""
        import pandas as pd
        out = self(values)
        inputs = {str(k): np.broadcast_to(np.asarray(v, dtype=np.float64), next(iter(out.values())).shape)
                  for k, v in resolve_names(values).items()}
        return pd.DataFrame({**inputs, **out})


@paused()
def compile_exprs(exprs: Mapping[str, object], symbols=None, backend: str | None = None,
                  rows: int | None = None) -> Compiled:
    """Compile ``{name: expression}`` over ``symbols`` (default: every free symbol, by name).
    ``rows``: how many configurations the kernel will evaluate, where the caller knows: from
    ``OPTIMIZED_ROWS`` the LLVM kernel is compiled optimised, from ``PROGRAM_ROWS`` without
    LLVM's optimisations, below it not compiled at all (numpy runs its operations,
    ``numeric.vector_program``); not told, it starts as closures and compiles as its calls grow.

    >>> from sympy import Max
    >>> from symbolic_cost.symbols import b, l
    >>> f = compile_exprs({"tokens": b * l, "bigger": Max(b, l)})
    >>> f({"b": [1, 2], "l": 3})["bigger"]
    array([3., 3.])
    """
    instance(exprs, Mapping, "exprs", " of names to expressions ({'flops': cost.flops_fwd, ...})")
    names = tuple(exprs)
    values, nodes = expressions(exprs, names)
    if symbols is None:
        symbols = sorted((s for s in nodes if s.is_Symbol), key=str)      # ``free_symbols_of``, walked once
    symbols = tuple(resolve_names({s: None for s in symbols}))
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
        raise InputTypeError(f"rows must be a whole number of configurations (or None), got {rows!r}", "rows")
    backend = backend or default_backend()
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}", "backend")
    level = "auto" if rows is None else "optimized" if rows >= OPTIMIZED_ROWS else "quick" if rows >= PROGRAM_ROWS \
        else "program"
    key = (names, values, symbols, backend, level)
    if key not in _MEMORY:
        _refuse_uncomputable(names, values, symbols, nodes)
        _MEMORY[key] = _build(names, values, symbols, backend, level)
    return _MEMORY[key]


def _rows(at, count: int) -> np.ndarray:
    """``at`` as the row numbers of columns of ``count`` rows: whole numbers from 0 to ``count - 1``
    (a negative one read from the end, a fraction or one past the end raised ``IndexError``)."""
    rows = np.asarray(at)
    if rows.dtype.kind not in "iu" or (rows.size and (rows.min() < 0 or rows.max() >= count)):
        raise InputError(f"at must be row numbers from 0 to {count - 1:,}, got {shown(at)}", "at")
    return rows


def expressions(exprs: Mapping, names) -> tuple[tuple[Expr, ...], set]:
    """``expression`` of each of ``exprs``' entries ``names``, and every node of them
    (``portable.parts``): their shared parts walked once, not once per expression, and the
    first undefined one refused as ``expression`` refuses it."""
    values = tuple(expression(exprs[n], f"exprs[{n!r}]", walk=False) for n in names)
    nodes = parts(values)
    if {nan, zoo} & nodes:
        for n, value in zip(names, values):
            expression(value, f"exprs[{n!r}]")
    return values, nodes


def expression(value, name: str, walk: bool = True) -> Expr:
    """``value`` as a SymPy expression a kernel can compute: a number or an expression, finite;
    text is refused (read it with ``symbolic_cost.reader.read``: ``sympify`` would make symbols of
    its own, not the package's ``b`` and ``l``), as are ``None`` and undefined values (``b/0``).

    >>> expression(3, "x")
    3

    ``walk=False`` leaves out the look for undefined parts (``expressions`` looks once for a set).
    """
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Basic)):
        hint = "; read text with symbolic_cost.reader.read" if isinstance(value, str) else ""
        raise InputTypeError(f"{name} must be a number or a SymPy expression, got {shown(value)}{hint}", name)
    value = sympify(value)
    nodes = parts([value]) if walk else ()
    if {nan, zoo} & set(nodes):     # an infinite arm of a choice is a value (an impossible layout's time)
        raise InputError(f"{name} must be a real number or formula, got {value} (undefined: a division by zero?)",
                         name)
    refuse_undefined(nodes, name, name)
    return value


def refuse_undefined(nodes, what: str, argument: str) -> None:
    """Refuse an undefined function among ``nodes`` (``Function("g")(b)``): no kernel, exact or
    compiled, has code for it (the printers' own error escaped as a traceback)."""
    unknown = sorted({str(n.func) for n in nodes if isinstance(n, AppliedUndef)})
    if unknown:
        raise InputError(f"{what} holds the undefined function {', '.join(unknown)}, which no kernel can compute "
                         f"(give it as a formula of numbers and symbols)", argument)


def _refuse_uncomputable(names, values, symbols, nodes) -> None:
    """Refuse an expression the kernels cannot compute: one holding a symbol ``symbols`` does not
    give (generated code would meet an undefined name), an undefined function (``Function("g")(b)``:
    no kernel has code for it; the printer's own error escaped as a traceback), or the imaginary
    unit (a real kernel would drop the imaginary part and print 0).  ``nodes``: every node of
    ``values`` (``portable.parts``)."""
    given = {str(s) for s in symbols}
    huge = [n for n in nodes if n.is_Number and _past_double(n)]
    undefined = [n for n in nodes if isinstance(n, AppliedUndef)]
    if S.ImaginaryUnit not in nodes and not huge and not undefined \
            and all(str(n) in given for n in nodes if n.is_Symbol):
        return                          # one walk of the shared parts; the name is looked for below
    for name, value in zip(names, values):
        own = parts([value])
        refuse_undefined(own, f"expression {name!r}", str(name))
        missing = sorted({str(n) for n in own if n.is_Symbol} - given)
        if missing:
            raise InputError(f"expression {name!r} holds {', '.join(missing)}, for which no value is given (the "
                             f"symbols compiled over, a sweep's grid or table: {', '.join(sorted(given)) or 'none'})",
                             str(name))
        if S.ImaginaryUnit in own:
            raise InputError(f"expression {name!r} is complex (it holds I): the kernels compute real numbers",
                             str(name))
        past = [n for n in huge if n in own]
        if past:                        # the kernels compute it as inf, or inf / inf: nan
            raise InputError(f"expression {name!r} holds the number {shown(past[0])}, past a double's range (about "
                             f"1.8e308), which the kernels compute in", str(name))


def _past_double(number) -> bool:
    """Whether a SymPy number (or a Rational's numerator or denominator) is past a double's range."""
    if number.is_Rational:
        return max(abs(number.p), number.q) > LARGEST_DOUBLE
    return number.is_finite is not False and abs(number) > LARGEST_DOUBLE


def _build(names, values, symbols, backend, level: str) -> Compiled:
    if backend == "numba" and names:
        function = loop_kernel.kernel(portable_all(values), symbols)
        if function is not None:
            return Compiled(names, symbols, function, "numba")
        backend = "llvm"
    if backend == "llvm":
        function = symengine_kernel.kernel(values, symbols, level)
        if function is not None:
            return Compiled(names, symbols, function, "llvm")
    return Compiled(names, symbols, _numpy_kernel(values, symbols), "numpy")


class _Printer(NumPyPrinter):
    """NumPy code with ``Max``/``Min`` as nested element-wise ``maximum``/``minimum``."""

    def _print_Max(self, expr):
        return self._nested("numpy.maximum", expr.args)

    def _print_Min(self, expr):
        return self._nested("numpy.minimum", expr.args)

    def _nested(self, function, args):
        code = self._print(args[0])
        for arg in args[1:]:
            code = f"{function}({code}, {self._print(arg)})"
        return code


def _numpy_kernel(values, symbols):
    def make():
        return lambdify(symbols, exactly_rounded(values), modules="numpy", printer=_Printer, cse=True)
    return kernel_cache.numpy_kernel(make, values, symbols)
