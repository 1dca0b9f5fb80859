"""The two compile backends give the same numbers on every expression set the library compiles,
and compiled kernels come back from the disk cache.

The sets are recorded from the library's own entry points (layout search over 1-D and 2-D tensor
layouts for dense, grouped-query, mixture-of-experts and latent-attention models; sweeps with
constraints; the inference report's curves), then evaluated by both backends at the same random
points.
"""

import importlib
import pathlib

import numpy as np
import pytest
from sympy import Eq, Max, Mod

from symbolic_cost import symbols as S
from symbolic_cost.models.config import load, preset
from symbolic_cost.numeric import compile as compiled
from symbolic_cost.numeric import kernel_cache, symengine_kernel, vector_kernel
from symbolic_cost.numeric.search import search
from symbolic_cost.numeric.sweep import sweep

pytest.importorskip("symengine")
CONFIGS = pathlib.Path(__file__).parent / "hf_configs"
RNG = np.random.default_rng(7)


def _record(monkeypatch) -> list:
    sets, original = [], compiled.compile_exprs

    def recording(exprs, symbols=None, backend=None, **options):
        sets.append((dict(exprs), symbols))
        return original(exprs, symbols, backend, **options)
    for module in ("symbolic_cost.numeric.search", "symbolic_cost.numeric.sweep", "symbolic_cost.report.inference"):
        monkeypatch.setattr(importlib.import_module(module), "compile_exprs", recording)
    return sets


@pytest.fixture(scope="module")
def library_sets(tmp_path_factory):
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path_factory.mktemp("builds")))  # every set built here
        sets = _record(monkeypatch)
        search(preset("gpt2"), 16, "h100", global_batch=64, seq=1024, tensor=("1d", "2d"))
        for name in ("Llama-3.2-1B", "Mixtral-8x7B-v0.1", "DeepSeek-V2-Lite"):
            search(load(CONFIGS / f"{name}.json"), 64, "h100", global_batch=128, seq=2048)
        sweep({"work": 2 * S.b * S.l / S.m1}, grid={"b": [1, 2], "l": [64], "m1": [1, 2, 3], "h": [12]},
              constraints=[Eq(Mod(S.h, S.m1), 0), "work <= 100"])
        from symbolic_cost.report.inference import _curves
        _curves(preset("llama-2-7b"), 2, 256, "h100")
    return sets


def _points(symbols, rows=257):
    return {str(s): RNG.choice([1, 2, 3, 4, 8, 16, 64, 1024], rows).astype(float) for s in symbols}


@pytest.mark.parametrize("machine_code", ["vector kernel", "symengine's"])
def test_every_recorded_set_gives_the_same_numbers_on_both_backends(library_sets, machine_code, monkeypatch):
    """Not told the rows: symengine's closures; told fewer than PROGRAM_ROWS: numpy's run of the
    set's operations (``numeric.vector_program``); told fewer than OPTIMIZED_ROWS: machine code at
    opt_level 0, the vector kernel (``numeric.vector_kernel``) where llvmlite is installed, else
    symengine's LLVM kernel (made here by leaving the vector kernel out)."""
    assert len(library_sets) >= 10
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")
    if machine_code != "vector kernel":
        monkeypatch.setattr(vector_kernel, "compile_vector", lambda *args: None)
    elif vector_kernel.llvmlite() is None:
        pytest.skip("llvmlite is not installed")
    compiled._MEMORY.clear()
    backends_seen, kernels = set(), set()
    for exprs, symbols in library_sets:
        slow = compiled.compile_exprs(exprs, symbols, backend="numpy")
        for rows in (None, symengine_kernel.PROGRAM_ROWS - 1, symengine_kernel.PROGRAM_ROWS):
            fast = compiled.compile_exprs(exprs, symbols, backend="llvm", rows=rows)
            backends_seen.add(fast.backend)
            if rows is not None:                # numpy's run of the operations, or machine code
                kernels.add(type(fast.function).__name__)
            values = _points(fast.symbols)
            got, want = fast(values), slow(values)
            for name in exprs:
                np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=0, equal_nan=True,
                                           err_msg=f"{name} rows={rows}")
    compiled._MEMORY.clear()
    assert backends_seen == {"llvm"}           # every set converts: none fell back to numpy
    assert kernels == {"ProgramKernel", "VectorKernel" if machine_code == "vector kernel" else "LLVMDouble"}


def test_numpys_run_of_the_operations_gives_the_vector_kernels_doubles(library_sets):
    """The program (``numeric.vector_program``) takes the vector kernel's operations in its
    order: on every recorded set, at the same points, the same doubles, bit for bit."""
    if vector_kernel.llvmlite() is None:
        pytest.skip("llvmlite is not installed")
    for exprs, symbols in library_sets:
        program = compiled.compile_exprs(exprs, symbols, backend="llvm", rows=1)
        machine = compiled.compile_exprs(exprs, symbols, backend="llvm", rows=symengine_kernel.PROGRAM_ROWS)
        assert type(program.function).__name__ == "ProgramKernel"
        values = _points(program.symbols, rows=1000)
        got, want = program(values), machine(values)
        for name in exprs:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_rows_at_positions_are_the_rows_taken_first(library_sets):
    """``compiled(values, at=positions)`` of integer columns (the search's), on the LLVM kernel
    that reads them a block at a time and on numpy's that takes them first, equals the same
    kernel on the rows taken and made floats beforehand, bit for bit; across LLVM blocks."""
    exprs, symbols = library_sets[0]
    rows = compiled.LLVM_BLOCK + 1000
    columns = {str(s): RNG.choice([1, 2, 4, 8, 16], rows) for s in compiled.compile_exprs(exprs, symbols).symbols}
    at = np.sort(RNG.choice(rows, rows - 7, replace=False))[::-1].copy()        # out of order, some left out
    for backend in ("llvm", "numpy"):
        kernel = compiled.compile_exprs(exprs, symbols, backend=backend)
        got, want = kernel(columns, at=at), kernel({k: v[at].astype(float) for k, v in columns.items()})
        for name in exprs:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{backend} {name}")


def test_a_kernel_comes_back_from_disk_without_compiling(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path))
    exprs = {"t": S.b * S.l / 8 + Mod(S.b, 3), "m": S.b ** 2}
    for backend, rows in (("numpy", None), ("llvm", symengine_kernel.PROGRAM_ROWS)):   # compiled at opt_level 0
        compiled._MEMORY.clear()
        first = compiled.compile_exprs(exprs, backend=backend, rows=rows)
        compiled._MEMORY.clear()                       # a new process: only the disk remembers
        monkeypatch.setattr(compiled, "lambdify", _refuse)
        monkeypatch.setattr(symengine_kernel.symengine(), "Lambdify", _refuse)
        again = compiled.compile_exprs(exprs, backend=backend, rows=rows)
        monkeypatch.undo()
        monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path))
        assert again is not first and again({"b": [4, 5], "l": 8})["t"].tolist() == [5.0, 7.0]
    assert len(list(tmp_path.glob("kernel_*.py"))) == 1 and len(list(tmp_path.glob("kernel_*.pickle"))) == 1


def test_a_kernel_not_told_its_rows_compiles_as_its_calls_grow(tmp_path, monkeypatch):
    """Without ``rows`` the LLVM backend starts as symengine's closure evaluator and files nothing;
    once its calls pass ``CLOSURE_ROWS`` configurations in all it compiles at LLVM's opt_level 0,
    and the first call of ``OPTIMIZED_ROWS`` swaps in the optimised kernel (and files it), which
    a new process then takes from disk at its own ``CLOSURE_ROWS`` without compiling; ``rows``
    at the threshold compiles optimised at once.  Every tier gives the same numbers."""
    import pickle
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path))
    exprs = {"t": S.b * S.l / 8 + Mod(S.b, 3), "m": Max(S.b, 7 - S.l)}
    compiled._MEMORY.clear()
    kernel = compiled.compile_exprs(exprs, backend="llvm")
    tiers = kernel.function
    assert isinstance(tiers, symengine_kernel.QuickKernel) and tiers.level == "closures"
    assert not list(tmp_path.iterdir())                              # closures are not filed
    shipped = pickle.loads(pickle.dumps(tiers))                      # as a Dask worker gets it
    assert shipped.level == "closures" and shipped(np.array([[4.0, 8.0]]))[0].tolist() == [5.0, 4.0]
    levels = []
    for size in (2, symengine_kernel.CLOSURE_ROWS - 3, 1, symengine_kernel.OPTIMIZED_ROWS):
        b = np.arange(size, dtype=float) % 97 + 1
        got = kernel({"b": b, "l": 3})
        assert got["t"].tolist() == [3 * x / 8 + x % 3 for x in b] and got["m"].tolist() == [max(x, 4) for x in b]
        levels.append(tiers.level)
    assert levels == ["closures", "closures", "quick", "optimized"]   # 2 + 2,045 rows, then 2,048 in all
    shipped = pickle.loads(pickle.dumps(tiers))
    assert shipped.optimized and shipped(np.array([[4.0, 8.0]]))[0].tolist() == [5.0, 4.0]
    compiled._MEMORY.clear()                                        # a new process: the optimised one is on disk
    again = compiled.compile_exprs(exprs, backend="llvm")
    monkeypatch.setattr(symengine_kernel, "_lambdify", _refuse)
    again({"b": np.ones(symengine_kernel.CLOSURE_ROWS), "l": 3})
    assert again.function.level == "optimized"
    monkeypatch.undo()
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")
    levels, lambdify = [], symengine_kernel._lambdify
    monkeypatch.setattr(symengine_kernel, "_lambdify", lambda *a: levels.append(a[-1]) or lambdify(*a))
    for rows in (symengine_kernel.OPTIMIZED_ROWS, symengine_kernel.OPTIMIZED_ROWS - 1):     # told: that level, no wrapper
        compiled._MEMORY.clear()
        assert not isinstance(compiled.compile_exprs(exprs, backend="llvm", rows=rows).function, symengine_kernel.QuickKernel)
    assert levels == [3, 0]


def test_a_set_llvm_cannot_compile_stays_on_its_closures(monkeypatch):
    """Where LLVM fails to compile what the closures evaluate, the kernel keeps its closures
    (``level`` ``"closures only"``), answers every call, and still pickles."""
    import pickle
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")
    compiled._MEMORY.clear()
    kernel = compiled.compile_exprs({"t": S.b * S.l + 1}, backend="llvm")

    def fails(*args):
        raise RuntimeError("LLVM cannot compile this")
    monkeypatch.setattr(symengine_kernel, "_lambdify", fails)
    for size in (symengine_kernel.CLOSURE_ROWS, symengine_kernel.OPTIMIZED_ROWS):
        got = kernel({"b": np.arange(size, dtype=float), "l": 2})["t"]
        assert kernel.function.level == "closures only" and got.tolist() == [2 * x + 1 for x in range(size)]
    assert pickle.loads(pickle.dumps(kernel.function))(np.array([[3.0, 4.0]]))[0].tolist() == [13.0]


def _refuse(*args, **kwargs):
    raise AssertionError("compiled again although the kernel is on disk")


def test_a_damaged_kernel_is_compiled_again_and_an_off_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path))
    compiled._MEMORY.clear()
    compiled.compile_exprs({"x": S.b + 11}, backend="numpy")
    (damaged,) = tmp_path.glob("kernel_*.py")
    damaged.write_text("this is not python")
    compiled._MEMORY.clear()
    assert compiled.compile_exprs({"x": S.b + 11}, backend="numpy")({"b": 1})["x"] == 12
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")
    assert kernel_cache.cache_dir() is None
    compiled._MEMORY.clear()
    compiled.compile_exprs({"x": S.b + 12})
    assert len(list(tmp_path.glob("kernel_*"))) == 1     # (Python may keep the loaded one's bytecode beside it)


def test_the_backend_is_chosen_by_environment_and_checked(monkeypatch):
    monkeypatch.setenv("SYMBOLIC_COST_BACKEND", "numpy")
    assert compiled.default_backend() == "numpy"
    monkeypatch.setenv("SYMBOLIC_COST_BACKEND", "fortran")
    with pytest.raises(ValueError, match="SYMBOLIC_COST_BACKEND must be one of llvm, numba, numpy"):
        compiled.default_backend()
    with pytest.raises(ValueError, match="backend must be one of"):
        compiled.compile_exprs({"x": S.b}, backend="cuda")


def test_functions_llvm_lacks_are_rewritten_exactly():
    from symbolic_cost.parallel.collectives import Log2
    n = np.arange(1, 2**16 + 1, dtype=float)
    fast = compiled.compile_exprs({"rounds": Log2(S.m1), "left": Mod(S.b, S.m1)}, backend="llvm")
    got = fast({"m1": n, "b": 1000})
    assert fast.backend == "llvm"
    assert got["rounds"].tolist() == [(k - 1).bit_length() for k in range(1, 2**16 + 1)]
    assert got["left"].tolist() == [1000 % k for k in range(1, 2**16 + 1)]


def test_max_min_and_constant_choices_compile_without_branches_to_the_same_numbers():
    """The LLVM kernel writes ``Max``/``Min`` as selects and a choice between two constants as
    indicator arithmetic; ties, signs, exact constants and an infinite arm (which must keep its
    branch: ``inf * 0`` is NaN) all come out as Python computes them."""
    from sympy import Max, Min, Piecewise, Rational, oo
    exprs = {"max": Max(S.b - 3, S.l - 3, 2 - S.m1), "min": Min(S.b, S.l, 5),
             "third": Piecewise((Rational(1, 3), S.m1 <= 4), (Rational(1, 7), True)),
             "capped": Piecewise((oo, Eq(S.m1, 1)), (S.b, True))}
    fast = compiled.compile_exprs(exprs, backend="llvm")
    assert fast.backend == "llvm"
    rows = [(b, l, m) for b in range(1, 7) for l in range(1, 7) for m in (1, 2, 4, 8)]
    b, l, m = (np.array(c, dtype=float) for c in zip(*rows))
    got = fast({"b": b, "l": l, "m1": m})
    assert got["max"].tolist() == [max(b - 3, l - 3, 2 - m) for b, l, m in rows]
    assert got["min"].tolist() == [min(b, l, 5) for b, l, m in rows]
    assert got["third"].tolist() == [1 / 3 if m <= 4 else 1 / 7 for b, l, m in rows]
    assert got["capped"].tolist() == [float("inf") if m == 1 else b for b, l, m in rows]


def test_a_constraint_symengine_cannot_convert_falls_back_to_numpy(capsys):
    # issue 33's report: a --where on a piecewise memory (p = 1 has no pipeline) ended in exit 3
    # when symengine was installed; the rows kept are those whose memory the library computes
    # within the bound, counted here from model_cost one configuration at a time
    from symbolic_cost.cli import main
    from symbolic_cost.models import Training, model_cost
    bound = 3 * 10**12
    assert main(["sweep", "--preset", "gpt3-175b", "--grid", "b=1,2", "p=1,2", "--field", "memory_bytes",
                 "--where", f"memory_bytes <= {bound}"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()[1:]
    kept = {(int(float(r.split(",")[0])), int(float(r.split(",")[1]))) for r in rows}
    expected = {(b, p) for b in (1, 2) for p in (1, 2)
                if model_cost(preset("gpt3-175b"), Training(b=b, l=2048, p=p)).memory_bytes <= bound}
    assert kept == expected and expected


def test_conversions_are_remembered_across_calls_and_forgotten_past_the_limit(monkeypatch):
    """A part converted for one kernel is the same object for the next; past ``MEMO_LIMIT`` the
    memo starts again, and a fresh conversion equals symengine's own of the same formula."""
    import symengine as se
    from symbolic_cost.numeric import llvm_form
    formula = (S.b * S.l + S.m1) ** 2 / S.d + S.b * S.l
    first = llvm_form.symengine_form([formula], se)[0]
    assert llvm_form.symengine_form([formula], se)[0] is first
    monkeypatch.setattr(llvm_form, "MEMO_LIMIT", 0)
    again = llvm_form.symengine_form([formula], se)[0]
    assert again is not first and again == first == se.sympify(str(formula))
    from sympy import preorder_traversal
    converted, _ = llvm_form._MEMOS[se]               # forgotten, then this formula's parts only
    assert formula in converted and set(converted) <= set(preorder_traversal(formula))


def test_a_key_digest_is_the_sha256_of_each_part_over_its_arguments(monkeypatch):
    """``dag_digests`` by hand: a leaf's digest is the SHA-256 of its kind and text, a node's that
    of its kind and its arguments' digests in order; the same whether remembered or not, and with
    room for one part the table starts again as it fills, keeping fewer parts than the formula has."""
    import hashlib
    import symengine as se
    b, l = se.symbols("b l")

    def by_hand(node):
        text = f"{type(node).__name__}({','.join(map(by_hand, node.args))})" if node.args else \
            f"{type(node).__name__}:{node}"
        return hashlib.sha256(text.encode()).hexdigest()
    formula = (b + l) ** 2 * b + 3
    assert kernel_cache.dag_digests([formula, b]) == [by_hand(formula), hashlib.sha256(b"Symbol:b").hexdigest()]
    monkeypatch.setattr(kernel_cache, "_PARTS", {})
    monkeypatch.setattr(kernel_cache, "PARTS_LIMIT", 1)
    assert kernel_cache.dag_digests([formula]) == [by_hand(formula)]

    def parts(node):
        return {node}.union(*map(parts, node.args))
    assert formula in kernel_cache._PARTS and len(kernel_cache._PARTS) < len(parts(formula)) == 8
    assert kernel_cache.dag_digests([formula + 1]) != kernel_cache.dag_digests([formula])
