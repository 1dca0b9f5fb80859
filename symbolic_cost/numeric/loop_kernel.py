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
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import tempfile
from pathlib import Path

from sympy import Symbol, cse, numbered_symbols, srepr, sympify
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
    return "\n".join(["import math", "import numpy as np", "from numba import njit", "", "",
                      '@njit(nogil=True, cache=CACHE, error_model="numpy")',
                      f"def kernel({arguments}):",
                      "    for i in range(y0.shape[0]):", *body, ""])


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
    names = [Symbol(f"x{i}") for i in range(len(symbols))]
    return source([sympify(v).xreplace(dict(zip(symbols, names))) for v in values], len(symbols))


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
