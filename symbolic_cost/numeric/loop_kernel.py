"""The ``numba`` backend: a set of expressions as one generated loop over the configurations.

``source(values, count)`` writes Python for numba: after SymPy's common-subexpression
elimination, each configuration's formulas are straight-line scalar code inside one loop
over the rows (``prange``: the rows are shared between the cores), reading each input from
its own contiguous array and writing each output to its own contiguous row of one
``(outputs, rows)`` array.  Nothing is packed or strided, and ``Max``/``Min``, ``Piecewise``
and comparisons are selects without a branch, so LLVM can vectorise the loop across rows.

``kernel(values, symbols)`` compiles it with ``numba.njit`` (``error_model="numpy"``: a
division by zero gives ``inf``/``nan`` as numpy does, instead of an exception), or returns
``None`` when numba is not installed (``pip install 'symbolic_cost[fast]'``) or the set has
a function the printer does not know: then another backend runs.  The source goes into the
kernel cache (``numeric.kernel_cache``) under a hash of the expressions, and numba keeps its
machine code beside it (``cache=True``), so a second process neither generates nor compiles.

The module has a second loop, ``scan``, for a Dask task that keeps only its best rows
(``numeric.dask_sweep.best``): ``best_rows`` runs it over a range of a grid's rows, the inputs
made from the axes, evaluated, filtered and ranked ``SCAN_ROWS`` at a time, and returns the
count kept and the ``top`` rows' columns.  numba compiles it only when it is first called.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import tempfile
from pathlib import Path

import numpy as np
from sympy import Symbol, cse, numbered_symbols, srepr, sympify
from sympy.core.parameters import evaluate
from sympy.printing.pycode import PythonCodePrinter

from symbolic_cost.numeric import kernel_cache

UNROLL = 4
"""Integer powers up to this one are written as products (``x*x*x``), as numpy computes ``x**2``."""


def numba():
    """The numba module, or ``None`` where it is not installed (or cannot start)."""
    try:
        import numba as module
    except Exception:           # ImportError, or numba refusing this numpy version
        return None
    return module


class _Printer(PythonCodePrinter):
    """Scalar float code for numba: numbers as float literals, choices as conditional
    expressions on boolean selects (``&``, ``|`` instead of Python's short-circuit)."""

    def _print_Integer(self, expr):
        return repr(float(expr))

    _print_Rational = _print_Integer

    def _print_Float(self, expr):
        return repr(float(expr))

    def _print_Pow(self, expr, rational=False):
        base, power = self._print(expr.base), expr.exp
        if power.is_Integer and 0 < abs(int(power)) <= UNROLL:
            product = "*".join([f"({base})"] * abs(int(power)))
            return f"({product})" if power > 0 else f"(1.0/({product}))"
        if power == sympify(1) / 2:
            return f"math.sqrt({base})"
        return f"(({base})**{self._print(power)})"

    def _print_Max(self, expr):
        return self._fold(expr.args, ">")

    def _print_Min(self, expr):
        return self._fold(expr.args, "<")

    def _fold(self, args, better):
        """``args`` folded left with ``v if v <better> a else a`` (the LLVM backend's select)."""
        code = self._print(args[0])
        for arg in args[1:]:
            other = self._print(arg)
            code = f"(({code}) if ({code}) {better} ({other}) else ({other}))"
        return code

    def _print_Piecewise(self, expr):
        code = "math.nan"
        for value, condition in reversed(expr.args):
            code = self._print(value) if condition == True else \
                f"(({self._print(value)}) if ({self._print(condition)}) else ({code}))"  # noqa: E712
        return code

    def _print_And(self, expr):
        return "(" + " & ".join(f"({self._print(a)})" for a in expr.args) + ")"

    def _print_Or(self, expr):
        return "(" + " | ".join(f"({self._print(a)})" for a in expr.args) + ")"

    def _print_Not(self, expr):
        return f"(not ({self._print(expr.args[0])}))"

    def _print_floor(self, expr):
        return f"np.floor({self._print(expr.args[0])})"

    def _print_ceiling(self, expr):
        return f"np.ceil({self._print(expr.args[0])})"


def source(values, count: int) -> str:
    """The numba module of ``values`` over the inputs ``x0 ... x{count-1}`` (SymPy expressions
    in those symbols, written with functions the printer knows)."""
    inputs = [f"x{i}" for i in range(count)]
    replacements, reduced = cse(list(values), symbols=numbered_symbols("t"), order="none")
    printer = _Printer({"fully_qualified_modules": True, "allow_unknown_functions": False, "strict": True})
    body = [f"        {x} = {x}_[i]" for x in inputs]
    body += [f"        {name} = {printer.doprint(value)}" for name, value in replacements]
    body += [f"        y{j}[i] = {printer.doprint(value)}" for j, value in enumerate(reduced)]
    arguments = ", ".join([f"y{j}" for j in range(len(reduced))] + [f"{x}_" for x in inputs])
    return "\n".join(["import math", "import numpy as np", "from numba import njit", "",
                      "ON_DISK = CACHE", "", "",
                      '@njit(nogil=True, cache=ON_DISK, error_model="numpy")',
                      f"def kernel({arguments}):",
                      "    for i in range(y0.shape[0]):", *body, "", "",
                      _SCAN.replace("KERNEL_CALL", _block_call(len(reduced), count))])


def _block_call(outputs: int, count: int) -> str:
    """``kernel(...)`` on the first ``n`` columns of ``scan``'s buffers ``y`` and ``x``."""
    return "kernel(" + ", ".join([f"y[{j}, :n]" for j in range(outputs)] + [f"x[{i}, :n]" for i in range(count)]) + ")"


_SCAN = '''@njit(nogil=True, cache=ON_DISK, error_model="numpy")
def scan(y, x, axes, sizes, strides, cycles, periods, order, start, stop, by, checks, top):
    """Grid rows start to stop, a block of y.shape[1] at a time through the kernel (its buffers
    y, x stay in the core's cache): the number of rows whose outputs checks.. are all > 0.5, and
    of those the top of least output by (ties in row order) and the first top whose by is NaN.
    An input whose axis has a period (values x stride) of periods[a] > 0 rows is copied from
    cycles[a], its column over at least y.shape[1] + periods[a] rows; any other in runs."""
    width = y.shape[1]
    values = np.empty(top)
    rows = np.empty(top, np.int64)
    nans = np.empty(top, np.int64)
    held = 0
    nan_held = 0
    kept = 0
    for first in range(start, stop, width):
        n = min(width, stop - first)
        for j in range(x.shape[0]):             # input j: axis order[j], each value in runs of its stride
            a = order[j]
            if periods[a] > 0:                  # a short period: one copy from the axis's repeated cycle
                shift = first % periods[a]
                for r in range(n):
                    x[j, r] = cycles[a, shift + r]
                continue
            run = strides[a]
            at = (first // run) % sizes[a]
            left = run - first % run
            i = 0
            while i < n:
                m = min(left, n - i)
                value = axes[a, at]
                for r in range(i, i + m):
                    x[j, r] = value
                i += m
                left = run
                at = at + 1 if at + 1 < sizes[a] else 0
        KERNEL_CALL
        for i in range(n):
            ok = True
            for c in range(checks, y.shape[0]):
                ok = ok and y[c, i] > 0.5
            if not ok:
                continue
            kept += 1
            value = y[by, i]
            if value != value:
                if nan_held < top:
                    nans[nan_held] = first + i
                    nan_held += 1
            elif held < top or value < values[top - 1]:
                p = min(held, top - 1)
                while p > 0 and values[p - 1] > value:    # after every equal value: ties keep row order
                    values[p] = values[p - 1]
                    rows[p] = rows[p - 1]
                    p -= 1
                values[p] = value
                rows[p] = first + i
                held = min(held + 1, top)
    return kept, rows[:held].copy(), nans[:nan_held].copy()
'''
"""The search loop of ``source``'s module, for a task of ``best`` (``numeric.grid_tasks.best_of``):
the inputs made from the grid's axes, evaluated and reduced a cache-sized block at a time, so
that only the counts and ``top`` row numbers leave it."""


SCAN_ROWS = 2**11
"""Rows ``scan`` evaluates at a time: its inputs and outputs (16 columns for GPT-3's totals,
256 KB) stay in one core's L2 cache, so that no column streams through memory."""


def best_rows(function, axes, inputs, outputs, start: int, stop: int, by: int, checks: int, top: int):
    """Rows ``start`` to ``stop`` of the grid of ``axes`` (``(name, values)``, the last varying
    fastest) through ``function``'s module's ``scan``: the count of rows whose last ``checks``
    outputs are all 1, and ``{column: values}`` of the ``top`` of them of least output ``by``
    (ties in row order, NaN last, as a stable sort), the axes then ``outputs``.  The chosen rows
    go through the kernel again for their columns: the same scalar code, so the same values."""
    scan = sys.modules[function.py_func.__module__].scan
    names = [name for name, _ in axes]
    sizes = np.array([len(values) for _, values in axes], dtype=np.int64)
    table = np.zeros((len(axes), int(sizes.max(initial=1))))
    for k, (_, values) in enumerate(axes):
        table[k, :len(values)] = values
    strides = np.array([int(np.prod(sizes[k + 1:])) for k in range(len(axes))], dtype=np.int64)
    width = max(min(SCAN_ROWS, stop - start), 1)
    cycles, periods = _cycles(table, sizes, strides, width)
    order = np.array([names.index(name) for name in inputs], dtype=np.int64)
    kept, rows, nans = scan(np.empty((len(outputs), width)), np.empty((len(inputs), width)), table, sizes, strides,
                            cycles, periods, order, start, stop, by, len(outputs) - checks, top)
    chosen = np.concatenate([rows, nans])[:top]
    columns = {name: table[k, (chosen // strides[k]) % sizes[k]] for k, name in enumerate(names)}
    out = np.empty((len(outputs), len(chosen)))
    function(*out, *(np.ascontiguousarray(columns[name]) for name in inputs))
    return int(kept), {**columns, **dict(zip(outputs, out))}


CYCLE_ROWS = 2**14
"""The longest period (an axis's values times its stride) ``scan`` copies from a cycle: the
fastest axes written in runs of one value would be copied value by value, which is slower."""


def _cycles(table, sizes, strides, width: int):
    """Each axis's column over whole periods, at least ``width`` rows past any start within
    one, for the axes of a period of at most ``CYCLE_ROWS`` rows (0 for the others).

    >>> cycles, periods = _cycles(np.array([[1.0, 2.0], [5.0, 6.0]]), np.array([2, 2]), np.array([2, 1]), 3)
    >>> periods, cycles[0, :8], cycles[1, :6]
    (array([4, 2]), array([1., 1., 2., 2., 1., 1., 2., 2.]), array([5., 6., 5., 6., 5., 6.]))
    """
    periods = np.where(sizes * strides <= CYCLE_ROWS, sizes * strides, 0)
    reps = [-(-(width + int(p)) // int(p)) if p else 0 for p in periods]
    cycles = np.zeros((len(sizes), max([int(p) * r for p, r in zip(periods, reps)] + [1])))
    for k, (p, r) in enumerate(zip(periods, reps)):
        if p:
            cycles[k, :p * r] = np.tile(np.repeat(table[k, :sizes[k]], strides[k]), r)
    return cycles, periods


def kernel(values, symbols):
    """The compiled numba kernel ``kernel(out, *inputs)`` of ``values`` over ``symbols``, or
    ``None`` (no numba, or a function the printer cannot write)."""
    module = numba()
    if module is None:
        return None
    path = _path(values, symbols, module)
    if path is not None and path.exists():
        try:
            return _import(path)
        except Exception:               # a damaged file: generate it again
            path.unlink(missing_ok=True)
    try:
        text = module_text(values, symbols)
    except (TypeError, ValueError, NotImplementedError, AttributeError):   # unknown functions
        return None
    return _load(text, path)


def module_text(values, symbols) -> str:
    """``source`` of ``values`` with ``symbols`` renamed to its inputs; ``CACHE`` left to set."""
    names = dict(zip(symbols, (Symbol(f"x{i}") for i in range(len(symbols)))))
    # a renaming only: evaluated again, each Min and Max searched its arguments anew for ones it
    # could drop (with the names' fewer assumptions, to the same values), most of a kernel's build
    with evaluate(False):
        renamed = [sympify(v).xreplace(names) for v in values]
    return source(renamed, len(symbols))


_COUNTER = itertools.count()


def cached(values, symbols) -> bool:
    """Whether the kernel of ``values`` is in the disk cache (so it loads in a fraction of a second)."""
    module = numba()
    path = None if module is None else _path(values, symbols, module)
    return path is not None and path.exists()


def _path(values, symbols, module):
    return kernel_cache.source_path(kernel_cache.key("numba", map(srepr, values), [module.__version__, *symbols]))


def _import(path):
    """The kernel of a generated file, imported under a name numba's cache finds again."""
    return import_module(path).kernel


def import_module(path):
    """The generated module at ``path``, imported once per process as ``symbolic_cost_kernels.<stem>``
    (a failed import leaves no half-made module behind)."""
    name = f"symbolic_cost_kernels.{path.stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def _load(text: str, path):
    """``kernel`` of ``text``: from its file in the cache (numba's machine code beside it), or,
    with the cache off or not writable, compiled from the text in memory."""
    if path is not None and kernel_cache.write_text(path, text.replace("CACHE", "True", 1)):
        return _import(path)
    with tempfile.TemporaryDirectory(prefix="symbolic-cost-kernel-") as folder:   # imported, never exec'd
        file = Path(folder) / f"uncached_{next(_COUNTER)}.py"
        file.write_text(text.replace("CACHE", "False", 1))
        return _import(file)
