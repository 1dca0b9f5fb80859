"""The numba backend (``numeric.loop_kernel``) gives the numbers of the exact path and of the
LLVM backend on every row, falls back where numba is missing, and loads from the disk cache.

Oracles: ``numeric.exact.exact_function`` (integers and Fractions, equal to substitution) for
whole models' fields and step times, row by row over every configuration of a grid; the LLVM
backend for the search, sweep and inference kernels the library builds (recorded from its entry
points, as tests/test_backends.py does), on every row of a random set; Python's own ``max``,
``%`` and ``bit_length`` for the functions rewritten for the loop.
"""

import importlib
import pathlib

import numpy as np
import pytest
from sympy import Eq, Max, Min, Mod, Piecewise, Rational, oo

from symbolic_cost import symbols as S
from symbolic_cost.models.config import load, preset
from symbolic_cost.numeric import compile as compiled
from symbolic_cost.numeric import loop_kernel
from symbolic_cost.numeric.exact import DEGREES, FIELDS, exact_function
from symbolic_cost.numeric.search import search
from symbolic_cost.numeric.sweep import sweep

pytest.importorskip("numba")
pytest.importorskip("symengine")
CONFIGS = pathlib.Path(__file__).parent / "hf_configs"
RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path_factory.getbasetemp() / "kernels"))


def _model_exprs(arch, **policy):
    """A whole model's ``FIELDS`` and step time by part with the degrees symbolic, as
    ``exact.model_function`` builds them."""
    from symbolic_cost.models import Training, model_cost
    from symbolic_cost.timing.step import step_time_breakdown
    extra = dict(ep=S.ep, etp=S.etp) if arch.moe is not None else {}
    cost = model_cost(arch, Training(b=S.b, l=S.l, m1=S.m1, s1=S.s1, d=S.d, p=S.p, micro_batches=S.n_micro,
                                     **extra, **policy))
    return {**{f: getattr(cost, f) for f in FIELDS},
            **{f"step_{k}": v for k, v in step_time_breakdown(cost, "h100").items()}}


@pytest.mark.parametrize("name, policy, grid", [
    ("gpt2", dict(zero=1, flash=True), dict(b=(1, 3, 8), l=(512, 1024), m1=(1, 2, 4), s1=(1,), d=(1, 4, 6),
                                             p=(1, 2, 3), n_micro=(1, 6))),
    ("Mixtral-8x7B-v0.1", dict(zero=3, recompute="full"),
     dict(b=(1, 2), l=(2048, 4096), m1=(1, 2), s1=(1,), d=(2, 8), p=(1, 2, 4), n_micro=(4, 8), ep=(1, 2), etp=(1,))),
])
def test_a_whole_model_equals_the_exact_path_on_every_row(name, policy, grid):
    arch = preset(name) if name == "gpt2" else load(CONFIGS / f"{name}.json")
    exprs = _model_exprs(arch, **policy)
    fast = compiled.compile_exprs(exprs, backend="numba")
    exact = exact_function(exprs, fast.symbols)
    assert fast.backend == "numba"
    axes = np.meshgrid(*(np.array(v, dtype=float) for v in grid.values()), indexing="ij")
    values = {k: a.ravel() for k, a in zip(grid, axes)}
    got = fast(values)
    for row in range(len(values["b"])):
        want = exact({k: int(v[row]) for k, v in values.items() if k in {str(s) for s in fast.symbols}})
        for field, value in want.items():
            assert got[field][row] == pytest.approx(float(value), rel=1e-12, abs=0), (field, row)
    assert set(grid) - {"ep", "etp"} <= set(DEGREES)


@pytest.fixture(scope="module")
def library_sets(tmp_path_factory):
    """One kernel of each kind the library compiles: a search's (dense with 1-D and 2-D tensor
    layouts, grouped-query, experts, latent attention), a sweep's with constraints, the
    inference report's curves."""
    sets, original = [], compiled.compile_exprs

    def recording(exprs, symbols=None, backend=None, **options):
        sets.append((dict(exprs), symbols))
        return original(exprs, symbols, backend, **options)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path_factory.mktemp("builds")))  # every set built here
        for module in ("symbolic_cost.numeric.search", "symbolic_cost.numeric.sweep",
                       "symbolic_cost.report.inference"):
            monkeypatch.setattr(importlib.import_module(module), "compile_exprs", recording)
        search(preset("gpt2"), 16, "h100", global_batch=64, seq=1024, tensor=("2d",), recompute=("none",))
        for name in ("Llama-3.2-1B", "Mixtral-8x7B-v0.1", "DeepSeek-V2-Lite"):
            search(load(CONFIGS / f"{name}.json"), 64, "h100", global_batch=128, seq=2048, recompute=("none",))
        sweep({"work": 2 * S.b * S.l / S.m1}, grid={"b": [1, 2], "l": [64], "m1": [1, 2, 3], "h": [12]},
              constraints=[Eq(Mod(S.h, S.m1), 0), "work <= 100"])
        from symbolic_cost.report.inference import _curves
        _curves(preset("llama-2-7b"), 2, 256, "h100")
    return sets


def test_every_kind_of_library_kernel_equals_the_llvm_backend_on_every_row(library_sets):
    assert len(library_sets) >= 6
    for exprs, symbols in library_sets:
        fast = compiled.compile_exprs(exprs, symbols, backend="numba")
        reference = compiled.compile_exprs(exprs, symbols, backend="llvm")
        assert (fast.backend, reference.backend) == ("numba", "llvm")
        values = {str(s): RNG.choice([1, 2, 3, 4, 8, 16, 64, 1024], 40_000).astype(float) for s in fast.symbols}
        got, want = fast(values), reference(values)      # 40,000 rows: split between threads
        for name in exprs:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=0, equal_nan=True, err_msg=name)


def test_rewritten_functions_and_choices_are_exact():
    from symbolic_cost.parallel.collectives import Log2
    exprs = {"rounds": Log2(S.m1), "left": Mod(S.b, S.m1), "max": Max(S.b - 3, S.l - 3, 2 - S.m1),
             "min": Min(S.b, S.l, 5), "third": Piecewise((Rational(1, 3), S.m1 <= 4), (Rational(1, 7), True)),
             "capped": Piecewise((oo, Eq(S.m1, 1)), (S.b, True))}
    fast = compiled.compile_exprs(exprs, backend="numba")
    rows = [(b, l, m) for b in range(1, 40) for l in range(1, 7) for m in range(1, 70)]
    b, l, m = (np.array(c, dtype=float) for c in zip(*rows))
    got = fast({"b": b, "l": l, "m1": m})
    assert fast.backend == "numba"
    assert got["rounds"].tolist() == [(m - 1).bit_length() for b, l, m in rows]
    assert got["left"].tolist() == [b % m for b, l, m in rows]
    assert got["max"].tolist() == [max(b - 3, l - 3, 2 - m) for b, l, m in rows]
    assert got["min"].tolist() == [min(b, l, 5) for b, l, m in rows]
    assert got["third"].tolist() == [1 / 3 if m <= 4 else 1 / 7 for b, l, m in rows]
    assert got["capped"].tolist() == [float("inf") if m == 1 else b for b, l, m in rows]


def test_without_numba_the_llvm_backend_runs(monkeypatch):
    monkeypatch.setattr(loop_kernel, "numba", lambda: None)
    compiled._MEMORY.clear()
    assert compiled.compile_exprs({"x": S.b * 5}, backend="numba").backend == "llvm"
    assert compiled.sweep_backend(10**12, {"x": S.b * 5}) is None


def test_a_kernel_comes_back_from_disk_and_large_sweeps_take_it_where_it_is_faster(tmp_path, monkeypatch):
    """A large sweep takes numba's kernel only from the disk cache and where it is measured faster
    on the formula (the measurement stands in for a verdict here: timings are not asserted)."""
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path))
    exprs = {"t": S.b * S.l / 8 + Mod(S.b, 3)}
    between = compiled.NUMBA_CACHED_ROWS
    assert compiled.sweep_backend(10**12, exprs) is None                    # nothing cached: not compiled for it
    compiled._MEMORY.clear()
    compiled.compile_exprs(exprs, backend="numba")
    for faster in (True, False):
        compiled._FASTER.clear()
        monkeypatch.setattr(compiled, "numba_is_faster", lambda exprs, symbols, faster=faster: faster)
        assert compiled.sweep_backend(between, exprs) == ("numba" if faster else None)
    assert compiled.sweep_backend(between - 1, exprs) is None              # small: loading it is not repaid
    compiled._FASTER.clear()
    compiled._MEMORY.clear()
    monkeypatch.setattr(loop_kernel, "source", _refuse)
    again = compiled.compile_exprs(exprs, backend="numba")
    assert again.backend == "numba" and again({"b": [4, 5], "l": 8})["t"].tolist() == [5.0, 7.0]
    monkeypatch.setenv("SYMBOLIC_COST_BACKEND", "llvm")
    assert compiled.sweep_backend(10**12, exprs) is None                   # a pinned backend wins


def test_the_measurement_times_both_kernels_of_the_formula(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path))
    monkeypatch.setattr(compiled, "SAMPLE_ROWS", 1024)
    compiled._MEMORY.clear()
    compiled.numba_is_faster({"t": S.b * S.l + 1}, (S.b, S.l))
    assert {key[3] for key in compiled._MEMORY} == {"numba", "llvm"}     # each backend's kernel of it, timed


def _refuse(*args, **kwargs):
    raise AssertionError("generated again although the kernel is on disk")


def test_with_the_cache_off_the_kernel_is_imported_from_a_temporary_file(monkeypatch):
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")
    kernel = compiled.compile_exprs({"x": S.b * S.l + Max(S.b, 3)}, [S.b, S.l], backend="numba")
    assert kernel.backend == "numba"
    assert kernel({S.b: np.array([1.0, 5.0]), S.l: np.array([2.0, 2.0])})["x"].tolist() == [5.0, 15.0]   # 2+3, 10+5
