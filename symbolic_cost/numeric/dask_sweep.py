"""Sweeps on a Dask cluster: the tasks of ``numeric.grid_tasks`` as a Dask graph.

The client compiles the expressions and constraints once (``grid_tasks.plan``); the plan is one
node of the task graph, sent to each worker once, and a task is only ``(plan, start, stop)``, a
range of the grid's row numbers.  A worker loads the kernel once per process by its key, never
rebuilding a SymPy formula, and evaluates its rows in one thread (Dask runs one task per core);
for ``best`` it keeps only its ``top`` rows, and only those come back.  ``frame`` gives every
kept row instead, as a lazy ``dask.dataframe`` (``sweep_dask``).
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from symbolic_cost.checks import InputError
from symbolic_cost.numeric.dask_cluster import need_dask
from symbolic_cost.numeric.grid_tasks import Best, best_of, check_best, combine, plan, row_ranges, rows
from symbolic_cost.numeric.sweep import grid_size
from symbolic_cost.symbols import resolve_names

TASK_ROWS = (2**20, 2**24)
"""The fewest and most rows ``task_rows`` gives a task."""


def best(exprs: Mapping, grid: Mapping, by: str, top: int = 10, constraints=(), chunk_size: int | None = None,
         fan_in: int = 8, **compute) -> Best:
    """The ``top`` configurations of ``grid`` of least ``by`` among those that meet
    ``constraints``, with the counts, computed as Dask tasks (``compute`` goes to
    ``dask.compute``: ``scheduler="sync"`` runs them here, a ``distributed.Client`` on its
    cluster): each task evaluates, filters and ranks ``chunk_size`` rows; while more than
    ``fan_in ** 2`` results remain they are combined ``fan_in`` at a time on the workers, and
    the last ones in this process (a result is ``top`` rows; a combining task on a worker only
    added a step after the last task).  The frame equals ``sweep(...)``'s rows sorted by ``by``
    (stable) and cut to ``top``, index renumbered.  ``chunk_size`` defaults to ``task_rows`` of
    the scheduler's ``threads``.

    >>> from symbolic_cost.symbols import b, m1
    >>> found = best({"work": 2 * b / m1}, {"b": [1, 2, 3], "m1": [1, 2]}, by="work", top=2,
    ...              constraints=["work >= 1.5"], chunk_size=2, scheduler="sync")
    >>> found.evaluated, found.kept
    (6, 5)
    >>> found.best
         b   m1  work
    0  1.0  1.0   2.0
    1  2.0  2.0   2.0
    """
    dask = need_dask()
    chunk_size = task_rows(grid_size(grid), threads(**compute)) if chunk_size is None else chunk_size
    check_best(exprs, by, top=top, chunk_size=chunk_size, fan_in=fan_in)
    job = dask.delayed(plan(exprs, grid, constraints, top, by), pure=True, traverse=False)   # sent once a worker
    layer = [dask.delayed(best_of, pure=True)(job, start, stop)
             for start, stop in row_ranges(grid_size(grid), chunk_size)]
    while len(layer) > fan_in ** 2:         # a tree: only each task's top rows travel, fan_in at a time
        layer = [dask.delayed(combine, pure=True)(layer[i:i + fan_in], top, by) for i in range(0, len(layer), fan_in)]
    found = combine(dask.compute(*layer, **compute), top, by)
    return Best(found.evaluated, found.kept, found.best.reset_index(drop=True))


def task_rows(rows: int, threads: int = 4) -> int:
    """Rows a task of ``best`` reduces by default: ``TASKS_A_THREAD`` tasks for each of the
    scheduler's ``threads``, within ``TASK_ROWS`` (a task's memory is a block's whatever its
    rows, and only its ``top`` rows travel).

    >>> task_rows(10**8), task_rows(10**8, threads=2), task_rows(1000), task_rows(10**10)
    (6250000, 12500000, 1048576, 16777216)
    """
    return min(max(-(-rows // (TASKS_A_THREAD * threads)), TASK_ROWS[0]), TASK_ROWS[1])


TASKS_A_THREAD = 4
"""Tasks ``best`` gives each thread of its scheduler by default.  Each task costs its worker a
round trip to the scheduler, and the last tasks of the two workers end apart by up to a task:
more tasks balance the workers better and pay more round trips, and from 6 to 12 tasks on two
workers neither wins (``docs/fast.md``).  Two tasks a thread or fewer
are not spread: Dask's scheduler sends most of them to the worker that holds the plan (2 of 2,
3 of 4 tasks on two workers)."""


def threads(**compute) -> int:
    """Threads the tasks of ``dask.compute(..., **compute)`` run on: a ``distributed.Client``'s
    workers' (the one passed as ``scheduler`` or the current one), 1 for ``"sync"``, and for
    Dask's local pools their ``num_workers`` (passed, or Dask's setting, or the cores Dask
    counts: ``dask.system.CPU_COUNT``, which heeds the process's CPU affinity and quota)."""
    import dask.base
    import dask.local
    import dask.system
    get = dask.base.get_scheduler(scheduler=compute.get("scheduler"))
    client = getattr(get, "__self__", None)
    if callable(getattr(client, "nthreads", None)):
        return max(sum(client.nthreads().values()), 1)
    if get is dask.local.get_sync:
        return 1
    return compute.get("num_workers") or dask.config.get("num_workers", None) or dask.system.CPU_COUNT


def sweep_dask(exprs: Mapping, grid: Mapping, constraints=(), chunk_size=1_000_000):
    """The sweep of ``numeric.sweep.sweep`` as a lazy ``dask.dataframe.DataFrame`` of the kept
    rows, one partition per ``chunk_size`` rows of the grid, for a cluster (``pip install
    'symbolic_cost[dask]'``): nothing runs until ``.compute()``, ``.to_parquet()`` and friends.
    The kernel is compiled here once; each partition loads it by its key and evaluates and
    filters its own range of the grid's rows, so no configuration list is built in one place and
    no formula is rebuilt.  ``best`` keeps only the top rows on the workers."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise InputError(f"chunk_size must be a positive integer, got {chunk_size!r}", "chunk_size")
    dask = need_dask()
    import dask.dataframe as dd
    job = dask.delayed(plan(exprs, grid, constraints), pure=True, traverse=False)
    parts = [dask.delayed(rows, pure=True)(job, start, stop) for start, stop in row_ranges(grid_size(grid), chunk_size)]
    meta = pd.DataFrame({c: pd.Series(dtype="float64") for c in [str(k) for k in resolve_names(grid)] + list(exprs)})
    return dd.from_delayed(parts, meta=meta)
