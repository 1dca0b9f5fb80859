"""A kernel not told its rows climbs its tiers as its calls grow: symengine's closures, made with it,
then LLVM's machine code, the optimised code at a first call of ``OPTIMIZED_ROWS``; where LLVM cannot
compile the set the closures go on, and where neither can, ``compile_exprs`` runs numpy (the numbers
of every tier written out by hand below)."""

import pickle

import numpy as np
import pytest
from sympy import Max

from symbolic_cost import symbols as S
from symbolic_cost.numeric import compile as compiled
from symbolic_cost.numeric import symengine_kernel

pytestmark = pytest.mark.skipif(symengine_kernel.symengine() is None, reason="symengine not installed")

EXPRS = {"t": S.b * S.l / 8 + 3, "m": Max(S.b, 7 - S.l)}


def _by_hand(b, l):
    return [x * l / 8 + 3 for x in b], [max(x, 7 - l) for x in b]


def _fresh(monkeypatch):
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")
    compiled._MEMORY.clear()
    return compiled.compile_exprs(EXPRS, backend="llvm")


def _fails(*args):
    raise RuntimeError("cannot compile this")


def test_a_first_large_call_compiles_the_optimised_code(monkeypatch):
    kernel = _fresh(monkeypatch)
    assert kernel.function.level == "closures"
    b = np.arange(symengine_kernel.OPTIMIZED_ROWS, dtype=float) % 101 + 1
    got = kernel({"b": b, "l": 2})
    t, m = _by_hand(b[:50], 2)
    assert kernel.function.level == "optimized"
    assert got["t"][:50].tolist() == t and got["m"][:50].tolist() == m


def test_a_first_small_call_runs_on_the_closures(monkeypatch):
    kernel = _fresh(monkeypatch)
    got = kernel({"b": np.array([1.0, 4.0, 9.0]), "l": 5})
    assert kernel.function.level == "closures"
    assert (got["t"].tolist(), got["m"].tolist()) == _by_hand([1, 4, 9], 5)


def test_a_pickled_kernel_makes_its_own_closures(monkeypatch):
    shipped = pickle.loads(pickle.dumps(_fresh(monkeypatch).function))
    assert shipped.level == "closures" and shipped.function is not None
    assert shipped(np.array([[4.0, 8.0]]))[0].tolist() == [7.0, 4.0]     # 4*8/8 + 3; max(4, -1)


def test_a_large_call_llvm_cannot_compile_stays_on_the_closures(monkeypatch):
    kernel = _fresh(monkeypatch)
    monkeypatch.setattr(symengine_kernel, "_lambdify", _fails)
    b = np.arange(symengine_kernel.OPTIMIZED_ROWS, dtype=float) % 7 + 1
    got = kernel({"b": b, "l": 1})
    assert kernel.function.level == "closures only"
    assert (got["t"][:7].tolist(), got["m"][:7].tolist()) == _by_hand(b[:7], 1)


def test_a_set_neither_closures_nor_llvm_express_runs_on_numpy(monkeypatch):
    """DeepFlow's LSTM step time is such a set (``docs/kernels.md``): the kernel must fall back
    when it is made, not fail at its first call."""
    monkeypatch.setattr(symengine_kernel, "_closures", lambda *args: None)
    monkeypatch.setattr(symengine_kernel, "_lambdify", _fails)
    kernel = _fresh(monkeypatch)
    assert kernel.backend == "numpy"
    got = kernel({"b": np.array([2.0, 16.0]), "l": 4})
    assert (got["t"].tolist(), got["m"].tolist()) == _by_hand([2, 16], 4)
