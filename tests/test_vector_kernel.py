"""The vector kernel (``numeric.vector_kernel``: symengine's CSE written as LLVM IR over
vectors of rows, compiled by llvmlite), and numpy's run of the same operations
(``numeric.vector_program``), against numbers written here by hand with numpy, for
every kind of node it writes, at row counts around its vector width and past the size from
which it splits rows between threads; its pickling, on this CPU and as if on another; and the
fallback to symengine's own kernel where it is missing."""

import json
import os
import pickle
import subprocess
import sys
import zlib

import numpy as np
import pytest
from sympy import And, Eq, Integer, Max, Min, Mod, Ne, Not, Or, Piecewise, Rational, ceiling, floor, log, sin, sqrt

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError
from symbolic_cost.numeric import compile as compiled
from symbolic_cost.numeric import symengine_kernel, vector_kernel, vector_program

pytest.importorskip("symengine")
if vector_kernel.llvmlite() is None:
    pytest.skip("llvmlite is not installed", allow_module_level=True)

b, l = S.b, S.l
EXPRS = {
    "mod": b * l / 8 + Mod(b, 3),
    "max": Max(b, l, 3), "min": Min(b, 2 * l),
    "choice": Piecewise((b, b < l), (l**2, Eq(b, 4)), (sqrt(b), True)),
    "rounding": ceiling(b / l) + floor(l / b),
    "powers": log(b) + b**-2 + b**3 + b ** Rational(5, 2),
    "logic": Piecewise((1, And(b < 3, Not(Eq(l, 2)))), (2, Or(b > 5, Ne(l, 1))), (3, True)),
    "partial": Piecewise((b, b < 2)),
    "shared": Piecewise((b, b < l), (l, True)) * Piecewise((3, b < l), (l - 2, True))    # CSE keeps b < l apart
    + Piecewise((1, Eq(l, 3)), (0, True)) + Piecewise((l, Eq(l, 3)), (b, True)),
    "constant": Integer(7),
}


def _by_hand(b, l):
    """``EXPRS`` in numpy, written from the formulas above."""
    with np.errstate(all="ignore"):
        return {
            "mod": b * l / 8 + np.mod(b, 3), "max": np.maximum(np.maximum(b, l), 3), "min": np.minimum(b, 2 * l),
            "choice": np.where(b < l, b, np.where(b == 4, l**2, np.sqrt(b))),
            "rounding": np.ceil(b / l) + np.floor(l / b),
            "powers": np.log(b) + b**-2.0 + b**3 + b**2.5,
            "logic": np.where((b < 3) & (l != 2), 1.0, np.where((b > 5) | (l != 1), 2.0, 3.0)),
            "partial": np.where(b < 2, b, np.nan),
            "shared": np.where(b < l, b, l) * np.where(b < l, 3, l - 2) + (l == 3) + np.where(l == 3, l, b),
            "constant": np.full(b.shape, 7.0),
        }


ROWS = {"vector kernel": symengine_kernel.PROGRAM_ROWS, "optimised vector kernel": symengine_kernel.OPTIMIZED_ROWS,
        "numpy's run of its operations": 1}


@pytest.fixture(scope="module", params=list(ROWS))
def kernel(request):
    """The vector kernel (told of ``PROGRAM_ROWS`` rows: LLVM's quick code generation; of
    ``OPTIMIZED_ROWS``: its optimised one, whose numbers are loaded from a table), or the same
    operations run by numpy (``numeric.vector_program``: told of one row)."""
    machine = request.param != "numpy's run of its operations"
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")
        made = compiled.compile_exprs(EXPRS, symbols=[b, l], backend="llvm", rows=ROWS[request.param])
    assert isinstance(made.function, vector_kernel.VectorKernel if machine else vector_program.ProgramKernel)
    if machine:                       # the optimised code reads its numbers from the table
        pooled = "@numbers" in zlib.decompress(made.function.source).decode()
        assert (made.function.level, pooled) == ((1, True) if request.param.startswith("optimised") else (0, False))
    return made


def _rows_of(kernel) -> int:
    """The rows ``kernel``'s fixture told ``compile_exprs`` of."""
    if not isinstance(kernel.function, vector_kernel.VectorKernel):
        return ROWS["numpy's run of its operations"]
    return ROWS["optimised vector kernel" if kernel.function.level else "vector kernel"]


@pytest.mark.parametrize("rows", [1, 7, 8, 13, vector_kernel.THREAD_ROWS + 5, vector_kernel.STREAM_ROWS + 13])
def test_every_node_kind_gives_the_numbers_written_by_hand(kernel, rows):
    rng = np.random.default_rng(rows)
    values = {"b": rng.choice([1.0, 2, 3, 4, 5, 6, 9], rows), "l": rng.choice([1.0, 2, 3, 7], rows)}
    want = _by_hand(values["b"], values["l"])
    got = kernel(values)
    for name in EXPRS:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-14, atol=0, equal_nan=True, err_msg=name)
    at = rng.permutation(rows)[: max(rows - 3, 1)]                # the rows at positions, out of order
    taken = kernel({k: v.astype(np.int64) for k, v in values.items()}, at=at)
    for name in EXPRS:
        np.testing.assert_array_equal(taken[name], got[name][at], err_msg=f"{name} at positions")


def test_the_kernel_pickles_and_compiles_its_ir_again_on_another_cpu(kernel):
    function = kernel.function
    values = np.array([[3.0, 7.0], [9.0, 2.0]])
    want = function(values)
    again = pickle.loads(pickle.dumps(function))
    np.testing.assert_array_equal(again(values), want)
    if not isinstance(function, vector_kernel.VectorKernel):        # numpy's run: no machine code to move
        return
    elsewhere = pickle.loads(pickle.dumps(function))
    elsewhere.target, code = "another CPU", elsewhere.code
    moved = pickle.loads(pickle.dumps(elsewhere))                # its object code is not this CPU's
    assert moved.target == vector_kernel.host() and moved.code is not code
    np.testing.assert_array_equal(moved(values), want)


ANOTHER_CPU = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_vector_kernel import EXPRS, b, l
from symbolic_cost.numeric import compile as compiled, symengine_kernel, vector_kernel
made = compiled.compile_exprs(EXPRS, symbols=[b, l], backend="llvm", rows=symengine_kernel.PROGRAM_ROWS)
values = {"b": np.array(json.loads(sys.argv[2])), "l": np.array(json.loads(sys.argv[3]))}
got = made(values)
print(json.dumps([vector_kernel.host(), made.function.lanes, {k: [repr(float(x)) for x in v] for k, v in got.items()}]))
"""


def test_machine_code_for_a_cpu_the_environment_names():
    """``SYMBOLIC_COST_LLVM_CPU=x86-64-v3``: AVX2 code, four rows an operation, on a machine with
    AVX-512 or without, and the numbers written by hand."""
    if "+avx2" not in vector_kernel.host():
        pytest.skip("x86-64-v3 needs a CPU with AVX2")
    rng = np.random.default_rng(5)
    values = {"b": rng.choice([1.0, 2, 3, 4, 5, 6, 9], 37), "l": rng.choice([1.0, 2, 3, 7], 37)}
    env = {**os.environ, vector_kernel.TARGET_CPU: "x86-64-v3", "SYMBOLIC_COST_CACHE": "off"}
    done = subprocess.run([sys.executable, "-c", ANOTHER_CPU, os.path.dirname(__file__),
                           json.dumps(values["b"].tolist()), json.dumps(values["l"].tolist())],
                          capture_output=True, text=True, env=env, check=True)
    target, lanes, got = json.loads(done.stdout)
    assert (target.split("|")[0], lanes) == ("x86-64-v3", 4)
    want = _by_hand(values["b"], values["l"])
    for name in EXPRS:
        np.testing.assert_allclose([float(x) for x in got[name]], want[name], rtol=1e-14, atol=0, equal_nan=True,
                                   err_msg=name)


@pytest.mark.parametrize("name, needs, message", [
    ("haswell", None, "must be one of x86-64, x86-64-v2, x86-64-v3, x86-64-v4, got 'haswell'"),
    ("x86-64-v3", ("an-extension-no-cpu-has",), "x86-64-v3 needs an-extension-no-cpu-has, which this CPU"),
])
def test_a_cpu_the_environment_names_is_a_level_this_machine_runs(monkeypatch, name, needs, message):
    """Code for a CPU LLVM does not know, or for instructions this one lacks, stops the process
    (LLVM aborts, or the CPU faults): the name is refused first."""
    monkeypatch.delitem(vector_kernel._STATE, "host", raising=False)
    monkeypatch.setenv(vector_kernel.TARGET_CPU, name)
    if needs:
        monkeypatch.setitem(vector_kernel.LEVELS, name, needs)
    with pytest.raises(InputError, match=message):
        vector_kernel.host()
    monkeypatch.delitem(vector_kernel._STATE, "host", raising=False)


def test_a_node_it_does_not_write_and_a_missing_llvmlite_fall_back_to_symengine(monkeypatch):
    """``sin`` has no LLVM vector intrinsic here: the set compiles with symengine's own kernel,
    as every set does where llvmlite is missing; both give the numbers written by hand."""
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")
    import symengine
    assert vector_kernel.compile_vector([symengine.sin(symengine.Symbol("b"))], [symengine.Symbol("b")], 0) is None
    values = {"b": np.array([1.0, 2.0, 5.0]), "l": np.array([2.0, 2.0, 3.0])}
    compiled._MEMORY.clear()
    trig = compiled.compile_exprs({"s": sin(b) * l}, symbols=[b, l], backend="llvm", rows=1)   # no program either
    assert not isinstance(trig.function, vector_kernel.VectorKernel)
    np.testing.assert_allclose(trig(values)["s"], np.sin(values["b"]) * values["l"], rtol=1e-14)
    monkeypatch.setattr(vector_kernel, "compile_vector", lambda *args: None)
    compiled._MEMORY.clear()
    written = {k: v for k, v in EXPRS.items() if k != "partial"}    # symengine's LLVM refuses a choice without an otherwise
    plain = compiled.compile_exprs(written, symbols=[b, l], backend="llvm", rows=symengine_kernel.PROGRAM_ROWS)
    assert plain.backend == "llvm" and not isinstance(plain.function, vector_kernel.VectorKernel)
    want = _by_hand(values["b"], values["l"])
    got = plain(values)
    for name in written:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-14, atol=0, equal_nan=True, err_msg=name)
    compiled._MEMORY.clear()


def test_a_kernel_not_told_its_rows_climbs_to_the_vector_kernel(monkeypatch):
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")
    compiled._MEMORY.clear()
    kernel = compiled.compile_exprs({"t": b * l + 1}, backend="llvm")
    kernel({"b": np.ones(symengine_kernel.CLOSURE_ROWS), "l": 2})
    assert kernel.function.level == "quick" and isinstance(kernel.function.function, vector_kernel.VectorKernel)
    compiled._MEMORY.clear()


def test_log2_rounded_up_is_exact_at_every_power_of_two_a_double_holds(kernel):
    """``Log2(n)`` (the rounds of a tree) from the bits of ``n``, against Python's
    ``(n - 1).bit_length()``: at 2**j - 1, 2**j and 2**j + 1 up to 2**52, where
    ``ceil(log(n) / log(2))`` once rounded 2**29 up to 30, and at fractions."""
    from symbolic_cost.parallel.collectives import Log2
    n = sorted({2**j + k for j in range(53) for k in (-1, 0, 1) if 2**j + k >= 1})
    made = compiled.compile_exprs({"rounds": Log2(b)}, symbols=[b], backend="llvm", rows=_rows_of(kernel))
    got = made({"b": np.array(n, dtype=float)})["rounds"]
    assert got.tolist() == [(k - 1).bit_length() for k in n]
    halves = np.array([0.75, 1.5, 2.5, 3.0, 1000.5])
    assert made({"b": halves})["rounds"].tolist() == [0, 1, 2, 2, 10]          # ceil(log2 x) of each, by hand


def test_streamed_stores_need_aligned_columns_and_give_the_same_numbers(kernel):
    """From ``STREAM_ROWS`` rows the kernel writes past the caches, which needs each output column
    on a 64-byte boundary: columns a caller gives one double off are written the usual way, with
    the same numbers (and no fault)."""
    if not isinstance(kernel.function, vector_kernel.VectorKernel):
        pytest.skip("numpy's run has no stores of its own")
    rows = vector_kernel.STREAM_ROWS + 64
    rng = np.random.default_rng(5)
    values = {"b": rng.choice([1.0, 2, 3, 4, 5, 6, 9], rows), "l": rng.choice([1.0, 2, 3, 7], rows)}
    want = _by_hand(values["b"], values["l"])
    for shift in (0, 1):
        out = [vector_kernel.aligned_empty(rows + 1)[shift:shift + rows] for _ in EXPRS]
        kernel.into(out, [values["b"], values["l"]])
        for name, column in zip(EXPRS, out):
            np.testing.assert_allclose(column, want[name], rtol=1e-14, atol=0, equal_nan=True, err_msg=f"{name} {shift}")


def test_threads_is_one_or_two():
    made = compiled.compile_exprs({"x": b * l}, backend="llvm")
    assert made({"b": np.ones(9), "l": np.ones(9)}, threads=1)["x"].tolist() == [1.0] * 9
    with pytest.raises(InputError, match="threads must be 1 or 2, got 3"):
        made({"b": 1, "l": 2}, threads=3)


def test_the_program_of_the_set_last_written_is_written_once():
    """The quick and the optimised tier of one kernel share its program; an equal set that is
    another object, or the same set over other arguments, is written anew (its own registers)."""
    import symengine as se
    from symbolic_cost.numeric import vector_ir
    x, y = se.symbols("x y")
    converted = [se.Max(x, y) / 2, x * y + 1]
    made = vector_ir.program(converted, [x, y])
    assert vector_ir.program(converted, [x, y]) is made
    again = vector_ir.program(list(converted), [x, y])
    assert again is not made and again.ops == made.ops
    swapped = vector_ir.program(converted, [y, x])
    assert swapped is not made and swapped.ops != made.ops
