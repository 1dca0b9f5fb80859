"""Compiled evaluation, sweeps and layout search against slow exact evaluation."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from sympy import Eq, Max, Mod, Piecewise, floor

from symbolic_cost.models.peak import peak_bytes
from symbolic_cost import symbols as S
from symbolic_cost.numeric.compile import compile_exprs
from symbolic_cost.models.config import preset
from symbolic_cost.models import Training, model_cost
from symbolic_cost.timing.step import step_time_breakdown
from symbolic_cost.numeric.search import layouts, search
from symbolic_cost.numeric.sweep import sweep

SYMBOLIC = Training(b=S.b, l=S.l, m1=S.m1, s1=S.s1, d=S.d, p=S.p, micro_batches=S.n_micro, zero=1)
COST = model_cost(preset("gpt2"), SYMBOLIC)
EXPRS = {"parameters": COST.parameters, "memory": COST.memory_bytes,
         "flops": COST.model_flops_fwd + COST.model_flops_bwd, **step_time_breakdown(COST, "h100")}
INTEGER_FIELDS = ("parameters", "memory", "flops")


@st.composite
def configs(draw):
    m1 = draw(st.sampled_from([1, 2, 3, 4, 6, 12]))
    return {S.b: draw(st.integers(1, 8)), S.l: draw(st.sampled_from([128, 256, 1024])) * m1, S.m1: m1,
            S.s1: draw(st.sampled_from([1, m1])), S.d: draw(st.integers(1, 64)),
            S.p: draw(st.sampled_from([1, 2, 3, 4, 6, 12])), S.n_micro: draw(st.integers(1, 64))}


@settings(max_examples=15, deadline=None)
@given(config=configs())
def test_compiled_equals_subs(config):
    compiled = compile_exprs(EXPRS)(config)
    for name, expr in EXPRS.items():
        exact = expr.xreplace(config)          # exact substitution, as subs, without its overhead
        if name in INTEGER_FIELDS and exact.is_Integer and abs(int(exact)) < 2**53:
            assert compiled[name] == int(exact), name
        else:
            assert compiled[name] == pytest.approx(float(exact), rel=1e-12), name


def test_compile_is_cached_and_vectorised():
    first = compile_exprs(EXPRS)
    assert compile_exprs(dict(EXPRS)) is first                       # the second call is a lookup
    grid = {"b": np.arange(1, 40001) % 8 + 1, "l": 1024, "m1": 2, "s1": 2, "d": 8, "p": 2, "n_micro": 16}
    out = first(grid)                                                # more rows than one block
    one = first({**grid, "b": int(grid["b"][2])})
    assert out["total"].shape == (40000,) and out["total"][2] == one["total"]


def test_max_and_piecewise_broadcast_with_scalars():
    f = compile_exprs({"m": Max(S.b, 3), "p": Piecewise((S.b, S.b > 2), (0, True))})
    got = f({"b": [1, 5]})
    assert list(got["m"]) == [3, 5] and list(got["p"]) == [0, 5]


def test_chunked_and_unchunked_sweeps_agree(tmp_path):
    grid = {"b": [1, 2, 4], "m1": [1, 2, 4], "d": [1, 8], "l": [512, 1024], "s1": [1], "p": [1, 2], "n_micro": [8]}
    whole = sweep(EXPRS, grid=grid, chunk_size=10**6)
    pieces = sweep(EXPRS, grid=grid, chunk_size=7)
    pd.testing.assert_frame_equal(whole, pieces)
    assert len(whole) == 3 * 3 * 2 * 2 * 2
    written = sweep(EXPRS, grid=grid, chunk_size=5, out=tmp_path / "grid.csv")
    pd.testing.assert_frame_equal(pd.read_csv(written), whole)
    table = whole[list(grid)]
    pd.testing.assert_frame_equal(sweep(EXPRS, table=table, chunk_size=4)[list(EXPRS)], whole[list(EXPRS)])


@pytest.mark.parametrize("runs", [64, 1, 10**6])
def test_grid_rows_are_the_cartesian_product_in_order_from_any_row(runs, monkeypatch):
    """Any range of rows of a grid (last axis fastest) equals ``itertools.product``'s, whether
    a column is written run by run, repeated from its runs, or copied from a period onto itself;
    written into given columns, the same."""
    import itertools
    from symbolic_cost.numeric import sweep as sweeping
    monkeypatch.setattr(sweeping, "RUNS", runs)
    grid = {"b": [3.0, 1.0, 2.0], "l": [5.0, 7.0], "m1": [11.0, 13.0, 17.0, 19.0, 23.0], "d": [29.0, 31.0, 37.0]}
    every = np.array(list(itertools.product(*grid.values())))
    for start, stop in ((0, 90), (0, 1), (7, 8), (13, 77), (44, 90), (89, 90), (29, 61)):
        got = sweeping.grid_rows(grid, start, stop)
        filled = sweeping.grid_rows(grid, start, stop, {n: np.full(stop - start, np.nan) for n in grid})
        for k, name in enumerate(grid):
            assert got[name].tolist() == filled[name].tolist() == every[start:stop, k].tolist(), (name, start, stop)


def test_constraints_drop_exactly_the_invalid_rows():
    grid = {"b": [1, 2, 3], "m1": [1, 2, 3, 4, 5, 6], "h": [12]}
    kept = sweep({"work": S.b * S.h / S.m1}, grid=grid, constraints=[Eq(Mod(S.h, S.m1), 0), S.b <= 2])
    expected = [(b, m) for b in (1, 2, 3) for m in range(1, 7) if 12 % m == 0 and b <= 2]
    assert list(zip(kept["b"].astype(int), kept["m1"].astype(int))) == expected


def test_sweep_errors():
    with pytest.raises(ValueError, match="exactly one of grid= or table="):
        sweep(EXPRS)
    with pytest.raises(ValueError, match="must end in .csv or .parquet"):
        sweep({"x": S.b}, grid={"b": [1]}, out="result.txt")


def test_search_best_is_the_brute_force_best():
    arch = preset("gpt2")
    found = search(arch, 8, "h100", global_batch=32, seq=1024, top=3, micro_batch_sizes=(1, 2))
    # brute force: build every valid layout with numbers and time it exactly, one by one
    times = []
    for row in layouts(arch, 8, 32, 1024, micro_batch_sizes=(1, 2), recompute=("none", "full")).itertuples():
        training = Training(b=row.b, l=1024, m1=row.m1, s1=row.s1, d=row.d, p=row.p, micro_batches=row.n_micro,
                            zero=1, recompute=row.recompute, flash=True)
        cost = model_cost(arch, training)
        if float(peak_bytes(cost)) <= 80e9:          # the step's peak fits
            times.append((float(step_time_breakdown(cost, "h100")["total"]), row))
    best_time, best = min(times, key=lambda t: t[0])
    top = found.best.iloc[0]
    assert top["total"] == pytest.approx(best_time, rel=1e-12)
    assert (top["m1"], top["s1"], top["d"], top["p"], top["b"]) == (best.m1, best.s1, best.d, best.p, best.b)
    assert found.fitting == len(times)


def test_a_search_where_half_the_layouts_fit_finds_the_brute_force_fitting_rows_and_best():
    """A search times only the layouts whose peak fits; with the capacity at the median peak of
    every layout under ZeRO 0 and 3 (each built with numbers), it counts the same fitting layouts
    and returns the fastest of them, each with its own peak.  The two stages are one family
    (one kernel for both), and each fits in layouts the other does not."""
    from symbolic_cost.timing.hardware import calibrated
    arch, system = preset("gpt2"), calibrated("h100")
    peaks, totals = {0: [], 3: []}, {0: [], 3: []}
    for row in layouts(arch, 8, 32, 1024, micro_batch_sizes=(1, 2, 4), recompute=("none", "full")).itertuples():
        for zero in (0, 3):
            cost = model_cost(arch, Training(b=row.b, l=1024, m1=row.m1, s1=row.s1, d=row.d, p=row.p,
                                             micro_batches=row.n_micro, zero=zero, recompute=row.recompute, flash=True))
            peaks[zero].append(float(peak_bytes(cost)))
            totals[zero].append(float(step_time_breakdown(cost, system)["total"]))
    capacity = float(np.median(peaks[0] + peaks[3]))
    fits = {z: [m <= capacity for m in peaks[z]] for z in (0, 3)}
    assert any(a and not b for a, b in zip(fits[0], fits[3])) and any(b and not a for a, b in zip(fits[0], fits[3]))
    fit = [(t, m) for z in (0, 3) for t, m in zip(totals[z], peaks[z]) if m <= capacity]
    found = search(arch, 8, system.but(hbm_capacity=capacity), global_batch=32, seq=1024, top=4,
                   micro_batch_sizes=(1, 2, 4), zero=(0, 3))
    peaks = peaks[0] + peaks[3]
    assert (found.evaluated, found.fitting) == (len(peaks), len(fit))
    best = sorted(fit)[:4]
    assert list(found.best["total"]) == pytest.approx([t for t, _ in best], rel=1e-12)
    assert list(found.best["memory"]) == pytest.approx([m for _, m in best], rel=1e-12)
    assert (found.best["memory"] <= capacity).all()


def test_search_and_sweep_commands(capsys):
    from symbolic_cost.cli import main
    assert main(["search", "--preset", "gpt2", "--devices", "4", "--global-batch", "16", "--top", "2"]) == 0
    assert "gpt2 on 4 x h100" in capsys.readouterr().out
    assert main(["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--field", "memory_bytes",
                 "--where", "memory_bytes <= 3e9"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "b,memory_bytes"
    assert main(["sweep", "--preset", "gpt2", "--grid", "q=1"]) == 2


def test_dask_sweep_equals_the_local_sweep():
    pytest.importorskip("dask.dataframe")
    from symbolic_cost.numeric.dask_sweep import sweep_dask
    grid = {"b": [1, 2, 4], "m1": [1, 2, 4], "d": [1, 8], "l": [512, 1024], "s1": [1], "p": [1, 2], "n_micro": [8]}
    lazy = sweep_dask(EXPRS, grid, constraints=[S.b <= 2], chunk_size=5)
    assert lazy.npartitions == 15                       # 72 configurations in chunks of 5
    local = sweep(EXPRS, grid=grid, constraints=[S.b <= 2])
    pd.testing.assert_frame_equal(lazy.compute().reset_index(drop=True), local)


DASK_GRID = {"b": [1, 2, 4], "m1": [1, 2, 4], "d": [1, 8], "l": [512, 1024], "s1": [1], "p": [1, 2], "n_micro": [8]}


def plain_best(top, by, constraints):
    """The plain sweep's kept rows, sorted by ``by`` (stable: ties in grid order), cut to ``top``."""
    kept = sweep(EXPRS, grid=DASK_GRID, constraints=constraints)
    return len(kept), kept.sort_values(by, kind="stable").head(top).reset_index(drop=True)


@pytest.mark.parametrize("machine_code", ["numpy's run of the operations", "vector kernel", "symengine's"])
def test_dask_best_keeps_the_plain_sweeps_top_rows_on_the_workers(monkeypatch, machine_code):
    """Tasks of several blocks or of one, each evaluated into the task's buffer by numpy's run of
    the set's operations (what 72 rows get), or, compiled whatever the rows, by the vector kernel
    or by symengine's LLVM kernel (the vector kernel left out)."""
    pytest.importorskip("dask.dataframe")
    from symbolic_cost.numeric import compile as compiled, dask_sweep, grid_tasks, vector_kernel
    if machine_code == "vector kernel" and vector_kernel.llvmlite() is None:
        pytest.skip("llvmlite is not installed")
    if machine_code != "numpy's run of the operations":
        monkeypatch.setattr(compiled, "PROGRAM_ROWS", 0)
    if machine_code == "symengine's":
        monkeypatch.setattr(vector_kernel, "compile_vector", lambda *args: None)
        monkeypatch.setattr(compiled, "_MEMORY", {})
        monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")          # no vector kernel from disk
    kind = type(grid_tasks.plan(EXPRS, DASK_GRID, ["memory <= 3e9"], 5, "total").kernel().function).__name__
    assert kind == {"numpy's run of the operations": "ProgramKernel", "vector kernel": "VectorKernel",
                    "symengine's": "LLVMDouble"}[machine_code]
    constraints = ["memory <= 3e9"]
    for top, chunk, fan_in, block in ((5, 7, 2, 3), (80, 72, 8, 2**16), (1, 1, 3, 1), (3, 20, 2, 4)):
        monkeypatch.setattr(grid_tasks, "BLOCK", block)         # tasks of several blocks, or of one
        found = dask_sweep.best(EXPRS, DASK_GRID, by="total", top=top, constraints=constraints, chunk_size=chunk,
                                fan_in=fan_in, scheduler="sync")
        kept, expected = plain_best(top, "total", constraints)
        assert (found.evaluated, found.kept) == (72, kept) and 0 < kept < 72
        pd.testing.assert_frame_equal(found.best, expected, check_exact=True)
    lazy = dask_sweep.sweep_dask(EXPRS, DASK_GRID, constraints, chunk_size=10)     # blocks of 4 rows
    pd.testing.assert_frame_equal(lazy.compute(scheduler="sync").reset_index(drop=True),
                                  sweep(EXPRS, grid=DASK_GRID, constraints=constraints), check_exact=True)


def test_dask_best_counts_the_threads_of_dask_s_local_schedulers(monkeypatch):
    """The synchronous scheduler runs one task at a time, Dask's thread and process pools as many
    as they are told or one a core the process may use; ``best``'s default tasks are four a
    thread (``TASKS_A_THREAD``) of at least 2^20 rows."""
    pytest.importorskip("dask")
    from symbolic_cost.numeric import dask_sweep
    assert dask_sweep.threads(scheduler="sync") == 1
    assert dask_sweep.threads(scheduler="threads", num_workers=3) == 3
    import dask.system
    monkeypatch.setattr(dask.system, "CPU_COUNT", 5)         # the cores Dask's pools count: its own
    assert dask_sweep.threads(scheduler="processes") == dask_sweep.threads() == 5
    assert dask_sweep.task_rows(3 * 2**23, threads=3) == 2**21 and dask_sweep.task_rows(2**22, threads=2) == 2**20


RANKED = {"rank": Piecewise((floor(S.b / 2) + floor(S.m1 / 3), S.b > 1)), "work": S.b * S.l / S.m1}
RANKED_GRID = {"b": [3, 1, 2, 5, 4, 7, 6], "l": [512, 1024, 256], "m1": [1, 2, 4, 3]}


def ranked_best(top, constraints):
    """The plain sweep of ``RANKED``: its kept rows sorted by rank (stable, NaN last), cut to ``top``."""
    kept = sweep(RANKED, grid=RANKED_GRID, constraints=constraints)
    return len(kept), kept.sort_values("rank", kind="stable").head(top).reset_index(drop=True)


@pytest.mark.parametrize("backend", ["llvm", "program", "numpy"])
def test_dask_best_in_blocks_ranks_ties_and_nan_as_the_plain_sweep_sorts(monkeypatch, backend):
    """Without numba a task of ``best`` ranks block by block, only rows below the ``top``-th
    value so far entering the later blocks: its top rows still equal the plain sweep's kept rows
    sorted by pandas (stable, NaN last), with ties, NaN values of ``by`` and more ``top`` than
    numbers, whatever the blocks' and tasks' rows, with Dask or without (``top_rows``, on one
    thread or several); each block evaluated into the task's buffer by the vector kernel
    (compiled whatever the rows), numpy's run of its operations (what 84 rows get) or the numpy
    backend's kernel."""
    from symbolic_cost.numeric import compile as compiled, dask_sweep, grid_tasks, vector_kernel
    if backend == "llvm" and vector_kernel.llvmlite() is None:
        pytest.skip("llvmlite is not installed")
    monkeypatch.setenv("SYMBOLIC_COST_BACKEND", "numpy" if backend == "numpy" else "llvm")
    if backend == "llvm":
        monkeypatch.setattr(compiled, "PROGRAM_ROWS", 0)
    kinds = {"llvm": "VectorKernel", "program": "ProgramKernel", "numpy": "function"}
    assert type(grid_tasks.plan(RANKED, RANKED_GRID, top=1, by="rank").kernel().function).__name__ == kinds[backend]
    for top, chunk, block, constraints in ((5, 7, 3, []), (40, 84, 5, ["work <= 2048"]), (1, 1, 1, ["work >= 700"]),
                                           (84, 13, 4, ["l >= 512"]), (3, 84, 2, ["work <= 1"]), (4, 30, 7, [])):
        monkeypatch.setattr(grid_tasks, "BLOCK", block)
        found = dask_sweep.best(RANKED, RANKED_GRID, by="rank", top=top, constraints=constraints, chunk_size=chunk,
                                fan_in=2, scheduler="sync")
        kept, expected = ranked_best(top, constraints)
        assert (found.evaluated, found.kept) == (84, kept)
        pd.testing.assert_frame_equal(found.best, expected, check_exact=True)
        for threads in (1, 3):                  # the same tasks without Dask, on one thread or three
            said = []
            here = grid_tasks.top_rows(RANKED, RANKED_GRID, by="rank", top=top, constraints=constraints,
                                       chunk_size=chunk, threads=threads, progress=said.append)
            assert (here.evaluated, here.kept) == (84, kept)
            pd.testing.assert_frame_equal(here.best, expected, check_exact=True)
            done = [int(line.split()[1].split("/")[0].replace(",", "")) for line in said]    # "sweep: 30/84 ..."
            assert done == [min(rows, 84) for rows in range(chunk, 84 + chunk, chunk)]       # after each task
    monkeypatch.setattr(grid_tasks, "BLOCK", 2)     # after [12, 10] [8, 2] the third least is 10: 9 enters
    found = dask_sweep.best({"v": S.b}, {"b": [12, 10, 8, 2, 9, 14]}, by="v", top=3, chunk_size=6, scheduler="sync")
    assert found.best["v"].tolist() == [2, 8, 9]


@pytest.mark.parametrize("scan_rows, cycle_rows", [(1, 2**14), (5, 0), (4096, 12)])
def test_dask_best_with_numba_ranks_in_its_own_loop_as_the_plain_sweep_sorts(monkeypatch, scan_rows, cycle_rows):
    """With the numba backend a task of ``best`` makes, evaluates, filters and ranks its rows in
    the generated ``scan`` loop, a few rows at a time, its inputs copied from cycles or written
    in runs: its top rows equal, to the last bit, the numba plain sweep's kept rows sorted by
    pandas (stable, NaN last), here with many ties, NaN values of ``by`` (``b = 1`` is no piece
    of the ``Piecewise``) and more ``top`` than numbers."""
    pytest.importorskip("numba")
    from symbolic_cost.numeric import dask_sweep, grid_tasks, loop_kernel
    monkeypatch.setenv("SYMBOLIC_COST_BACKEND", "numba")
    monkeypatch.setattr(loop_kernel, "SCAN_ROWS", scan_rows)
    monkeypatch.setattr(loop_kernel, "CYCLE_ROWS", cycle_rows)     # every input in runs; some (m1's, l's) copied
    scanned, calls = grid_tasks._scanned, []
    monkeypatch.setattr(grid_tasks, "_scanned", lambda *task: calls.append(task[1:]) or scanned(*task))
    for top, chunk, constraints in ((5, 7, []), (40, 84, ["work <= 2048"]), (1, 1, ["work >= 700"]),
                                    (84, 13, ["l >= 512"]), (3, 84, ["work <= 1"])):
        found = dask_sweep.best(RANKED, RANKED_GRID, by="rank", top=top, constraints=constraints, chunk_size=chunk,
                                fan_in=2, scheduler="sync")
        kept, expected = ranked_best(top, constraints)
        assert (found.evaluated, found.kept) == (84, kept)
        tasks = {(a, min(a + chunk, 84)) for a in range(0, 84, chunk)}
        assert set(calls) == tasks | {(0, 1)}          # every task scanned, and the plan's first row (numba compiles)
        calls.clear()
        pd.testing.assert_frame_equal(found.best, expected, check_exact=True)


def test_dask_sweep_on_worker_processes_loads_the_kernel_and_compiles_nothing(monkeypatch):
    """One cluster of two worker processes, as ``sweep --dask 2`` starts it: the kept rows and
    the top rows equal the plain sweep's, and no worker compiled a formula (each loaded the
    kernels by key); with numba's kernel, the workers rank in its module's ``scan``.  The
    workers run without Dask's task profiler and poll their memory once a second, while the
    caller's own Dask settings stay as they were.  ``best`` counts the cluster's threads, passed or
    current."""
    pytest.importorskip("distributed")
    import dask
    from symbolic_cost.numeric.dask_cluster import cluster
    from symbolic_cost.numeric.dask_sweep import best, threads
    from symbolic_cost.numeric.loop_kernel import numba
    from symbolic_cost.numeric.dask_sweep import sweep_dask
    numba_here = numba() is not None
    settings = ("distributed.worker.profile.enabled", "distributed.worker.memory.monitor-interval",
                "distributed.admin.tick.interval")
    before = [dask.config.get(name) for name in settings]
    with cluster("2") as client:
        assert list(client.run(lambda: [dask.config.get(name) for name in settings]).values()) == [[False, "1s", "1s"]] * 2
        assert [dask.config.get(name) for name in settings] == before
        assert threads(scheduler=client) == threads() == 2      # the default tasks' count: its two threads'
        lazy = sweep_dask(EXPRS, DASK_GRID, constraints=[S.b <= 2], chunk_size=9)
        pd.testing.assert_frame_equal(client.compute(lazy).result().reset_index(drop=True),
                                      sweep(EXPRS, grid=DASK_GRID, constraints=[S.b <= 2]), check_exact=True)
        found = best(EXPRS, DASK_GRID, by="total", top=4, constraints=["memory <= 2e9"], chunk_size=10)
        pd.testing.assert_frame_equal(found.best, plain_best(4, "total", ["memory <= 2e9"])[1], check_exact=True)
        if numba_here:
            monkeypatch.setenv("SYMBOLIC_COST_BACKEND", "numba")    # the client's choice: the plan names it
            found = best(RANKED, RANKED_GRID, by="rank", top=30, constraints=["work <= 2048"], chunk_size=20)
            kept, expected = ranked_best(30, ["work <= 2048"])
            assert found.kept == kept
            pd.testing.assert_frame_equal(found.best, expected, check_exact=True)
        state = client.run(lambda: (len(__import__("symbolic_cost.numeric.compile").numeric.compile._MEMORY),
                                    len(__import__("symbolic_cost.numeric.grid_tasks").numeric.grid_tasks._LOADED),
                                    sum(len(getattr(m, "scan").signatures) for name, m in list(sys.modules.items())
                                        if name.startswith("symbolic_cost_kernels.") and hasattr(m, "scan"))))
    assert [compiled for compiled, _, _ in state.values()] == [0, 0]        # no worker compiled a formula
    assert sum(loaded for _, loaded, _ in state.values()) >= 2               # they loaded both kernels by key
    assert sum(scans for _, _, scans in state.values()) >= numba_here      # with numba, a worker ran the scan


def test_sweep_dask_on_the_command_line_prints_the_plain_sweeps_rows(tmp_path, capsys):
    """``sweep --dask 1`` (a LocalCluster of one worker process, chunks of 3 rows) prints the
    rows of the plain sweep, a constraint applied on the worker; with ``--out`` it writes them."""
    pytest.importorskip("distributed")
    from symbolic_cost.cli import main
    line = ["sweep", "--preset", "gpt2", "--grid", "b=1:4", "m1=1,2,4", "--field", "memory_bytes,total",
            "--where", "memory_bytes <= 3e9"]
    assert main(line) == 0
    plain = capsys.readouterr().out
    assert main(line + ["--dask", "1", "--chunk", "3"]) == 0
    assert capsys.readouterr().out == plain and plain.count("\n") > 2
    out = tmp_path / "rows.csv"
    assert main(line + ["--dask", "1", "--chunk", "5", "--out", str(out)]) == 0
    assert out.read_text() == plain


@pytest.mark.parametrize("value", ["0", "-2", "two", "host:8786"])
def test_sweep_dask_refuses_what_is_neither_a_worker_count_nor_an_address(value, capsys):
    pytest.importorskip("distributed")
    from symbolic_cost.cli import main
    assert main(["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--field", "total", f"--dask={value}"]) == 2
    err = capsys.readouterr().err
    assert "--dask must be a number of local worker processes" in err and err.count("\n") == 1


def test_sweep_dask_refuses_an_address_where_no_scheduler_answers(capsys):
    """A server of another protocol at the address (here one that answers every connection with an
    HTTP reply, on 127.0.0.1): Dask's framing read its bytes as a message of exbibytes and ended in
    an internal MemoryError; now the address is refused by name."""
    pytest.importorskip("distributed")
    import socket
    import threading
    from symbolic_cost.cli import main
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(60)

    def answer():
        with server:
            for _ in range(4):
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" * 20)
    threading.Thread(target=answer, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    assert main(["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--field", "total", f"--dask={address}"]) == 2
    err = capsys.readouterr().err
    assert f"--dask {address}: no Dask scheduler answered there" in err and err.count("\n") == 1


def test_symbolic_tensor_degree_pads_the_vocabulary_as_numbers_do():
    """GPT-2's 50,257 rows are padded to a multiple of m1 (whole rows per device): a model built
    with a symbolic m1 and then given numbers equals the model built with those numbers."""
    arch = preset("gpt2")
    symbolic = model_cost(arch, Training(b=1, l=1024, m1=S.m1))
    for m in (1, 2, 3, 4):
        numeric = model_cost(arch, Training(b=1, l=1024, m1=m))
        for field in ("weight_bytes", "activation_bytes", "flops_fwd"):
            assert getattr(symbolic, field).subs(S.m1, m) == getattr(numeric, field), (field, m)
    assert arch.padded_vocab(S.m1).subs(S.m1, 4) == arch.padded_vocab(4) == 50260   # 4 x 12,565 rows


def test_sweep_progress_is_a_bar_on_a_terminal(monkeypatch):
    pytest.importorskip("tqdm")
    import io
    import sys

    from symbolic_cost.numeric.sweep import sweep
    from symbolic_cost.symbols import b

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    frame = sweep({"twice": 2 * b}, grid={"b": list(range(1, 11))}, chunk_size=4, progress=True)
    assert list(frame["twice"]) == [2.0 * v for v in range(1, 11)]
    shown = screen.getvalue()
    assert "sweep: 100%|" in shown and "10.0/10.0" in shown      # tqdm's bar, to the last chunk


_FAULTS = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from symbolic_cost.numeric.pages import keep_freed_pages
    assert keep_freed_pages()
np.ones(2**20).sum()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    np.ones(2**20).sum()             # a chunk's 8 MB column, freed at once
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_kept_pages_serve_the_next_chunk_without_page_faults():
    """Under Dask's ``MALLOC_TRIM_THRESHOLD_=65536`` every 8 MB column is a fresh mapping (its pages
    fault again: at least one per allocation); after ``keep_freed_pages`` the next one reuses the
    freed pages (the kernel's own page-fault count, ``getrusage``)."""
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    faults = {how: int(subprocess.run([sys.executable, "-c", _FAULTS, how], env=env, capture_output=True,
                                      text=True, check=True).stdout) for how in ("plain", "keep")}
    assert faults["plain"] >= 20 and faults["keep"] < 10, faults


_KERNEL_FAULTS = """
import resource
import numpy as np
from symbolic_cost.numeric.compile import compile_exprs
from symbolic_cost.symbols import b, l
kernel = compile_exprs({"a": b * l, "b": b + l, "c": b - l, "d": 2 * b}, backend="numba")
assert kernel.backend == "numba"
rows = {"b": np.ones(2**21), "l": np.ones(2**21)}
kernel(rows)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
kernel(rows)                         # four 16 MB outputs, the last call's freed
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_the_numba_kernel_reuses_its_outputs_pages(tmp_path):
    """A million-row call's outputs, one block each, come from the pages the last call freed
    (one ``(outputs, rows)`` block of 64 MB is over glibc's largest mmap threshold: every call
    faulted in fresh, zeroed pages, hundreds of faults and a fifth of the call's time)."""
    pytest.importorskip("numba")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "SYMBOLIC_COST_CACHE": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    faults = int(subprocess.run([sys.executable, "-c", _KERNEL_FAULTS], env=env, capture_output=True, text=True,
                                check=True).stdout)
    assert faults < 20, faults



@pytest.mark.parametrize("given, kept", [(None, "32768"), ("500", "500")])
def test_sympys_caches_hold_what_a_search_builds_again_unless_the_environment_says(given, kept):
    """Imported before SymPy, the package sets ``SYMPY_CACHE_SIZE`` to ``SYMPY_CACHE_SIZE``
    (32,768) where the environment has none, and keeps a size the environment gives."""
    env = {k: v for k, v in os.environ.items() if k != "SYMPY_CACHE_SIZE"}
    if given is not None:
        env["SYMPY_CACHE_SIZE"] = given
    code = "import symbolic_cost, sympy.core.cache as c; print({w.cache_info().maxsize for w in c.CACHE})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "{%s}" % kept


def test_search_splits_a_prime_depth_unevenly_as_a_model_built_with_numbers_does():
    """Seven layers over 2 or 4 stages: Megatron-LM's uneven split, middle stages of
    ``ceil(7/p)`` and the rest to the ends (3 | 4, and 1 | 2 | 2 | 2); over 8 stages none (one
    layer a middle stage leaves the first none); without a pipeline no stages are named.  Every
    layout the search returns equals a model built with the numbers and the split written out."""
    from dataclasses import replace
    import pandas as pd
    arch = replace(preset("gpt2"), n_layers=7)
    found = search(arch, 8, "h100", global_batch=16, seq=1024, top=10_000, micro_batch_sizes=(1, 2))
    assert set(found.best["p"]) == {1, 2, 4}
    ends = {2: (3, 4), 4: (1, 2)}
    for row in found.best.itertuples():
        if row.p == 1:
            assert pd.isna(row.first_stage_layers) and pd.isna(row.last_stage_layers)
        else:
            assert (row.first_stage_layers, row.last_stage_layers) == ends[row.p]
        split = dict(first_stage_layers=row.first_stage_layers, last_stage_layers=row.last_stage_layers) \
            if row.p > 1 else {}
        training = Training(b=row.b, l=1024, m1=row.m1, s1=row.s1, d=row.d, p=row.p, micro_batches=row.n_micro,
                            zero=1, recompute=row.recompute, flash=True, **split)
        assert row.total == pytest.approx(float(step_time_breakdown(model_cost(arch, training), "h100")["total"]),
                                          rel=1e-12), row
