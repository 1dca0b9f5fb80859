"""A kernel not told its rows makes symengine's closures only at a call that runs on them: a first
call of ``OPTIMIZED_ROWS`` compiles the optimised machine code without them, a small first call
makes them, an unpickled kernel makes its own at its first call; every tier gives the numbers
written out by hand below."""

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


def _no_closures(*args):
    raise AssertionError("closures made")


def test_nothing_is_made_before_the_first_call(monkeypatch):
    monkeypatch.setattr(symengine_kernel, "_closures", _no_closures)
    tiers = _fresh(monkeypatch).function
    assert isinstance(tiers, symengine_kernel.QuickKernel) and tiers.level == "closures" and tiers.function is None


def test_a_first_large_call_compiles_the_optimised_code_without_closures(monkeypatch):
    kernel = _fresh(monkeypatch)
    monkeypatch.setattr(symengine_kernel, "_closures", _no_closures)
    b = np.arange(symengine_kernel.OPTIMIZED_ROWS, dtype=float) % 101 + 1
    got = kernel({"b": b, "l": 2})
    t, m = _by_hand(b[:50], 2)
    assert kernel.function.level == "optimized"
    assert got["t"][:50].tolist() == t and got["m"][:50].tolist() == m


def test_a_first_small_call_makes_the_closures(monkeypatch):
    kernel = _fresh(monkeypatch)
    got = kernel({"b": np.array([1.0, 4.0, 9.0]), "l": 5})
    assert kernel.function.level == "closures" and kernel.function.function is not None
    assert (got["t"].tolist(), got["m"].tolist()) == _by_hand([1, 4, 9], 5)


def test_a_kernel_pickled_before_its_first_call_makes_its_own_closures(monkeypatch):
    tiers = _fresh(monkeypatch).function
    shipped = pickle.loads(pickle.dumps(tiers))
    assert shipped.level == "closures" and shipped.function is None
    assert shipped(np.array([[4.0, 8.0]]))[0].tolist() == [7.0, 4.0]     # 4*8/8 + 3; max(4, -1)


def test_a_large_first_call_llvm_cannot_compile_falls_back_to_closures(monkeypatch):
    kernel = _fresh(monkeypatch)

    def fails(*args):
        raise RuntimeError("LLVM cannot compile this")
    monkeypatch.setattr(symengine_kernel, "_lambdify", fails)
    b = np.arange(symengine_kernel.OPTIMIZED_ROWS, dtype=float) % 7 + 1
    got = kernel({"b": b, "l": 1})
    assert kernel.function.level == "closures only"
    assert (got["t"][:7].tolist(), got["m"][:7].tolist()) == _by_hand(b[:7], 1)
