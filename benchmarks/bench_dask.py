"""Benchmark of sweeps on Dask: ``python benchmarks/bench_dask.py [--rows 1e8] [--repeat 3] [--rounds 2] [--backend numba]``.

GPT-3 175B's totals with the step-time breakdown (``bench.whole_model_exprs``) over a grid of
``--rows`` configurations (10^8 by default), kept where the memory fits 80 GB, reduced to the
10 of least step time (``numeric.dask_sweep.best``, tasks of its default size for the
scheduler's threads unless ``--chunk`` says), three ways:

* one process: the tasks one after another in this process (``scheduler="sync"``);
* a ``distributed.LocalCluster`` of 1 worker process, 1 thread, started as ``symbolic-cost sweep
  --dask 1`` starts it (``numeric.dask_cluster.cluster``);
* a ``LocalCluster`` of 2 worker processes, 1 thread each.

The three take turns, ``--rounds`` times, each alone on the machine: a cluster is started for
its turn and closed after it (an idle cluster's processes, left running beside the others, took
a share of the two cores).  Each is timed on the first run of a turn (the workers load the
kernel) and as the median of the ``--repeat`` further runs of every turn.  CPU time is
``time.process_time`` of this process
(client and scheduler) plus each worker's, next to wall time; the machine, its cores and
its load average are printed with them.  Every run's counts and top rows are asserted equal
to the one process's.  The tasks' own compute seconds (Dask's task stream) are shown beside the
wall time, and at the end, without Dask, one task alone and two side by side in forked
processes: what the two cores give this work at the time.  Targets (2 workers >= 1.8x one
process) are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("SYMBOLIC_COST_CACHE", tempfile.mkdtemp(prefix="bench_dask_"))

import pandas as pd  # noqa: E402

from bench import loadavg, machine, whole_model_exprs  # noqa: E402

CONSTRAINTS = ["memory <= 80e9"]
SAID: list[str] = []
"""What this run printed, for ``--report``."""


def say(text: str) -> None:
    """Print ``text`` and keep it for the report."""
    print(text)
    SAID.append(text)

CHUNK = None
"""Rows a task: the library's default for the scheduler's threads (``numeric.dask_sweep.task_rows``)
unless ``--chunk`` says."""


def grid_of(rows: float) -> dict:
    """10 x 10 x 10 x 1 x 100 x 10 x ``rows / 10^6`` configurations of GPT-3 175B."""
    micro = max(int(rows // 10**6), 1)
    return {"b": list(range(1, 11)), "l": [512 * k for k in range(1, 11)], "m1": list(range(1, 11)), "s1": [1],
            "d": list(range(1, 101)), "p": list(range(1, 11)), "n_micro": list(range(1, micro + 1))}


def cpu_of(client) -> float:
    """CPU seconds of this process plus every worker process of ``client`` so far."""
    workers = client.run(time.process_time) if client is not None else {}
    return time.process_time() + sum(workers.values())


def run(exprs, grid, client, chunk):
    """CPU s, wall s, the answer, and the seconds the tasks computed (added over the workers;
    the wall time in this process)."""
    from symbolic_cost.numeric.dask_sweep import best
    _forgotten(client)
    with _task_stream(client) as stream:     # the clocks inside: reading the stream and the workers' CPU
        cpu = cpu_of(client)                 # are round trips to the scheduler, not the sweep's
        wall = time.perf_counter()
        found = best(exprs, grid, by="total", top=10, constraints=CONSTRAINTS, chunk_size=chunk,
                     scheduler="sync" if client is None else client)      # each run on its own cluster
        wall = time.perf_counter() - wall
    cpu = cpu_of(client) - cpu
    busy = wall if stream is None else sum(part["stop"] - part["start"] for task in stream.data
                                           for part in task["startstops"] if part["action"] == "compute")
    return cpu, wall, found, busy


def _forgotten(client, wait: float = 5.0) -> None:
    """Wait until the scheduler holds no task: the last run's keys are the next run's (the tasks
    are pure), and a result not yet released would be reused, not computed (runs of 0.01 s)."""
    deadline = time.perf_counter() + wait
    while client is not None and time.perf_counter() < deadline and \
            client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)):
        time.sleep(0.01)


@contextmanager
def _task_stream(client):
    if client is None:
        yield None
        return
    import distributed
    with distributed.get_task_stream(client) as stream:
        yield stream


def same(found, reference) -> None:
    assert (found.evaluated, found.kept) == (reference.evaluated, reference.kept)
    pd.testing.assert_frame_equal(found.best, reference.best, check_exact=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e8)
    parser.add_argument("--repeat", type=int, default=3, help="runs after the first, each round")
    parser.add_argument("--rounds", type=int, default=2, help="turns of the three, each on clusters of its own")
    parser.add_argument("--chunk", type=int, default=CHUNK, help="configurations a task")
    parser.add_argument("--backend", choices=("llvm", "numba", "numpy"),
                        help="the kernel's backend (default: the one the sweep would choose)")
    parser.add_argument("--report", metavar="FILE.md", help="also write what is printed to FILE.md "
                        "(reports/benchmark-dask.md is the committed one)")
    args = parser.parse_args()
    if args.backend:
        os.environ["SYMBOLIC_COST_BACKEND"] = args.backend
    from symbolic_cost.numeric.dask_sweep import task_rows
    from symbolic_cost.numeric.grid_tasks import plan
    exprs, grid = whole_model_exprs(), grid_of(args.rows)
    rows = 1
    for values in grid.values():
        rows *= len(values)
    say(f"machine: {machine()}")
    chunks = args.chunk or f"{task_rows(rows, 1):,} on one thread, {task_rows(rows, 2):,} on two"
    say(f"sweep: GPT-3 175B totals + step-time breakdown, {rows:,} configurations, chunks of {chunks}, "
        f"kept where {CONSTRAINTS[0]}, top 10 by total; load average before: {loadavg()}")
    start = time.process_time()
    compiled = plan(exprs, grid, CONSTRAINTS, 10, "total")
    say(f"compile on the client ({compiled.backend}; the kernel cache in $SYMBOLIC_COST_CACHE, else a new "
        f"temporary folder): {time.process_time() - start:.1f} CPU-s")
    timings, reference = {}, None
    for _ in range(args.rounds):                  # the three in turn, each alone on the machine
        for label, workers in (("one process", 0), ("1 worker", 1), ("2 workers", 2)):
            with _client(workers) as client:
                for repeat in range(args.repeat + 1):    # the first run: the workers load the kernel
                    cpu, wall, found, busy = run(exprs, grid, client, args.chunk)
                    reference = reference or found
                    same(found, reference)
                    timings.setdefault(label, []).append((cpu, wall, loadavg(), repeat == 0, busy))
    report(timings, rows, reference)
    alone, pair = side_by_side(compiled, task_rows(rows, 2) if args.chunk is None else args.chunk)
    say(f"the machine's ceiling, no Dask: one task of those rows in a forked process, alone {alone:.3f} s, two side "
        f"by side {pair:.3f} s (medians of 3): {2 * alone / pair:.2f}x")
    if args.report:
        command = " ".join(["python benchmarks/bench_dask.py", *sys.argv[1:]])
        text = f"# Benchmark: sweeps on Dask\n\nGenerated by `{command}` on {time.strftime('%Y-%m-%d')}."
        for last, line in zip(["# "] + SAID, SAID):      # table rows one to a line, other lines paragraphs
            text += ("\n" if line.startswith("|") and last.startswith("|") else "\n\n") + line.strip()
        Path(args.report).write_text(text + "\n")


def _timed_task(plan, stop, results) -> None:
    from symbolic_cost.numeric.grid_tasks import best_of
    best_of(plan, 0, min(stop, 1000))                    # the kernel loaded
    start = time.perf_counter()
    best_of(plan, 0, stop)
    results.put(time.perf_counter() - start)


def side_by_side(plan, stop: int, repeat: int = 3) -> tuple[float, float]:
    """Wall seconds of one task of rows 0 to ``stop`` in a forked process alone, and of the
    slower of two such processes at once (medians of ``repeat``): what two cores give this
    work now, with no Dask in the way."""
    import multiprocessing
    context = multiprocessing.get_context("fork")
    times = {1: [], 2: []}
    for _ in range(repeat):
        for copies in (1, 2):
            results = context.Queue()
            processes = [context.Process(target=_timed_task, args=(plan, stop, results)) for _ in range(copies)]
            for process in processes:
                process.start()
            times[copies].append(max(results.get() for _ in processes))
            for process in processes:
                process.join()
    return statistics.median(times[1]), statistics.median(times[2])


@contextmanager
def _client(workers: int):
    """A ``distributed.Client`` on a new ``LocalCluster`` of ``workers`` processes of one thread
    each as the library starts it (``numeric.dask_cluster.cluster``: its ``QUIET`` settings),
    closed after the body; ``None`` (this process) for 0."""
    from symbolic_cost.numeric.dask_cluster import cluster
    if not workers:
        yield None
        return
    with cluster(str(workers)) as client:
        yield client


def report(timings, rows, reference) -> None:
    say(f"evaluated {reference.evaluated:,}, kept {reference.kept:,}; every run's counts and top 10 equal")
    say("| run | first run: CPU s, wall s | later runs (median): CPU s, wall s | tasks computing (median, s, "
        "all workers) | configurations per wall-s | wall speed-up over one process | load average during the runs |")
    say("|---|---|---|---|---|---|---|")
    base = statistics.median(w for _, w, _, first, _ in timings["one process"] if not first)
    for label, runs in timings.items():
        cpu0, wall0 = statistics.median(c for c, _, _, first, _ in runs if first), \
            statistics.median(w for _, w, _, first, _ in runs if first)
        later = [(c, w, busy) for c, w, _, first, busy in runs if not first]
        cpu, wall, busy = (statistics.median(column) for column in zip(*later))
        loads = ", ".join(sorted({load.split()[0] for _, _, load, _, _ in runs}))
        say(f"| {label} | {cpu0:.2f}, {wall0:.2f} | {cpu:.2f}, {wall:.2f} | {busy:.2f} | {rows / wall / 1e6:.1f} million "
            f"| {base / wall:.2f}x | {loads} |")
    walls = {label: statistics.median(w for _, w, _, first, _ in runs if not first) for label, runs in timings.items()}
    say(f"\ntwo workers against one worker: {walls['1 worker'] / walls['2 workers']:.2f}x (wall, later runs)")
    say(f"load average after: {loadavg()}; target: 2 workers >= 1.8x one process (wall)")


if __name__ == "__main__":
    main()
