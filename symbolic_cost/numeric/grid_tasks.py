"""A grid's sweep as tasks of row ranges: what ``numeric.dask_sweep`` sends to Dask's workers,
and ``top_rows``, the same tasks one after another in this process without Dask.

``plan`` compiles the expressions and constraints once (``numeric.compile``, the backend the
plain ``sweep`` of the whole grid would use) and writes a ``Plan``: the kernel's cache key and
the text it loads from (the generated numba or numpy module, or symengine's pickled LLVM
kernel), the grid's axes and what to keep.  A task is ``(plan, start, stop)``, a range of the
grid's row numbers.  A process loads the kernel once by its key (from the disk cache, where the
client already wrote it on a shared machine, numba's machine code beside it; from the plan's
text elsewhere), never rebuilding a SymPy formula; it builds its rows from the axes, evaluates
them in one thread, drops the rows that break a constraint (``rows``) and, for the best rows,
keeps only its ``top`` (``best_of``: with the vector kernel, only the ranked field and the
constraints get columns of their own, and the chosen rows are evaluated again, by the same
machine code, for the other fields); ``combine`` joins tasks' results.  With numba's kernel
``best_of`` does all of that inside the generated loop (``loop_kernel.best_rows``), a
cache-sized block of rows at a time: no column of the task's rows is ever made or streamed
through memory.  The kernel's text travels as ``numeric.shipped`` writes it.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple

import numpy as np
import pandas as pd

from symbolic_cost.checks import InputError, count
from symbolic_cost.numeric import loop_kernel, shipped
from symbolic_cost.numeric.compile import Compiled, compile_exprs, sweep_backend
from symbolic_cost.numeric.pages import keep_freed_pages
from symbolic_cost.numeric.sweep import Progress, check_grid, grid_layout, grid_size, keep_exprs, write_rows
from symbolic_cost.numeric.vector_kernel import CORES, VectorKernel
from symbolic_cost.symbols import resolve_names

_LOADED: dict = {}
"""Kernels this process loaded, by key (a worker loads each once)."""


@dataclass(frozen=True)
class Plan:
    """What a worker needs: the kernel by key and text, the grid's axes, what to keep."""

    key: str
    backend: str
    code: bytes
    outputs: tuple[str, ...]            # the kernel's outputs: the fields, then one per constraint
    inputs: tuple[str, ...]             # the kernel's inputs, by name
    axes: tuple[tuple[str, tuple], ...]
    fields: tuple[str, ...]
    constraints: int
    top: int | None = None
    by: str | None = None

    def kernel(self) -> Compiled:
        """The compiled kernel: loaded once per process (``shipped.load``)."""
        if self.key not in _LOADED:
            _LOADED[self.key] = Compiled(self.outputs, tuple(resolve_names(dict.fromkeys(self.inputs))),
                                         shipped.load(self.backend, self.key, self.code), self.backend)
        return _LOADED[self.key]

    @property
    def columns(self) -> list[str]:
        return [name for name, _ in self.axes] + list(self.fields)

    @property
    def size(self) -> int:
        return grid_size(dict(self.axes))


def plan(exprs: Mapping, grid: Mapping, constraints=(), top: int | None = None, by: str | None = None) -> Plan:
    """Compile ``exprs`` and ``constraints`` (as ``numeric.sweep.sweep`` does) for the sweep of
    ``grid``, and describe them for the workers; with ``top``, each task keeps its ``top`` rows
    of least ``by``."""
    check_grid(grid)
    exprs = {str(k): v for k, v in exprs.items()}
    keep = keep_exprs(exprs, constraints)
    axes = tuple((str(k), tuple(float(x) for x in v)) for k, v in resolve_names(grid).items())
    symbols = list(resolve_names(grid))
    every = {**exprs, **keep}
    size = grid_size(grid)
    compiled = compile_exprs(every, symbols=symbols, backend=sweep_backend(size, every, symbols), rows=size)
    compiled({str(s): np.ones(1) for s in compiled.symbols})     # numba compiles (and caches) at the first call
    key, code = shipped.text(compiled, list(every.values()))
    _LOADED.setdefault(key, compiled)       # this process has it already (tasks run here with scheduler="sync")
    found = Plan(key, compiled.backend, code, compiled.names, tuple(map(str, compiled.symbols)), axes,
                 tuple(map(str, exprs)), len(keep), top, by)
    if compiled.backend == "numba" and top is not None:
        _scanned(found, 0, 1)               # numba compiles the scan here, once, into the cache the workers read
    return found


BLOCK = 2**16
"""Rows a task evaluates at a time: the grid's columns and the outputs in one buffer every
block and task of the thread reuses (``_buffer``: 8 MB for GPT-3's 7 inputs and 9 outputs), so
that a task's memory stays bounded however large its chunk and its rows stay in the caches:
a larger block leaves the caches, a smaller one pays the call more often."""
def rows(plan: Plan, start: int, stop: int) -> pd.DataFrame:
    """The kept rows of grid rows ``start`` to ``stop``: inputs then fields, as ``sweep``'s."""
    parts = [{name: columns[name][kept] for name in plan.columns} for _, columns, kept in _blocks(plan, start, stop)]
    return pd.DataFrame({name: np.concatenate([part[name] for part in parts]) for name in plan.columns})


def _blocks(plan: Plan, start: int, stop: int, read=None):
    """For each ``BLOCK`` of grid rows ``start`` to ``stop``: its first row, every column (the
    grid's and the outputs, in a buffer the next block reuses) and the positions of the rows
    kept.  ``read``: the only outputs the caller reads (default: all); the others are written,
    one over another, into one column (``_spare``)."""
    kernel = plan.kernel()
    keep_freed_pages()                  # a worker's glibc trims at 64 KiB: every block would fault anew
    layout = grid_layout(dict(plan.axes))
    width = len(layout)
    buffer = _buffer(width + len(plan.outputs), min(BLOCK, stop - start))
    rows = {name: buffer[k] for k, (name, _, _) in enumerate(layout)}
    inputs, outputs = [rows[name] for name in plan.inputs], _spare(buffer[width:], plan.outputs, read)
    evaluate = kernel.bound(inputs, outputs)
    for first in range(start, stop, BLOCK):
        size = min(first + BLOCK, stop) - first
        write_rows(layout, first, {name: column[:size] for name, column in rows.items()})
        evaluate(size)                  # on this thread: Dask gives each task a core
        results = {name: column[:size] for name, column in zip(plan.outputs, outputs)}
        mask = None
        for name in plan.outputs[len(plan.outputs) - plan.constraints:]:
            held = results.pop(name) > 0.5
            mask = held if mask is None else mask & held
        yield first, {**{name: column[:size] for name, column in rows.items()}, **results}, \
            np.arange(size) if mask is None else np.flatnonzero(mask)


def _spare(outputs: np.ndarray, names, read) -> list[np.ndarray]:
    """The columns of ``outputs`` the kernel writes ``names`` into: its own for each name in
    ``read`` (all of them for ``None``), one shared column for the rest.  Their stores then stay in
    the caches, so that two tasks side by side on two cores do not compete for memory bandwidth
    over outputs nobody reads.

    >>> columns = np.zeros((3, 4))
    >>> [np.shares_memory(c, columns[0]) for c in _spare(columns, ["a", "b", "c"], {"b"})]
    [True, False, True]
    """
    spare = [k for k, name in enumerate(names) if read is not None and name not in read]
    return [outputs[spare[0] if k in spare else k] for k in range(len(names))]


_THREAD = threading.local()


def _buffer(columns: int, rows: int) -> np.ndarray:
    """A ``(columns, rows)`` buffer for a task's blocks, the same one for every task this thread
    runs (a fresh one is ``columns`` x 8 MB of new pages per task); callers copy what they keep.
    Its columns start 64 bytes apart modulo 4 KiB (``STAGGER``), not all at one offset."""
    kept = getattr(_THREAD, "buffer", None)
    if kept is None or kept.shape[0] != columns or kept.shape[1] < rows:
        kept = _THREAD.buffer = np.empty((columns, rows + STAGGER + -rows % 512))[:, :rows]
    return kept[:, :rows]


STAGGER = 8
"""Doubles between a column's end and the next one's start past a whole number of 4 KiB pages.
Columns of ``BLOCK`` rows (512 KiB) one after another all start at one offset in their pages:
the kernel's 16 streams then fall in one set of the first-level cache and each load after a
store to another column looks to the CPU as if it might read it (4K aliasing), which stalls
it; staggered, the columns fall in different sets."""


class Best(NamedTuple):
    """Configurations evaluated, kept (every constraint held), and the ``top`` of least ``by``."""

    evaluated: int
    kept: int
    best: pd.DataFrame


def best_of(plan: Plan, start: int, stop: int) -> Best:
    """A task of ``best``: rows ``start`` to ``stop`` reduced to their counts and ``top`` rows
    (``_least``); only those rows are ever put in a frame.  A numba kernel does it in its own
    loop (``_scanned``)."""
    kernel = plan.kernel()
    if kernel.backend == "numba":
        return _scanned(plan, start, stop)
    again = isinstance(kernel.function, VectorKernel)       # each row alone the same doubles
    read = {plan.by, *plan.outputs[len(plan.outputs) - plan.constraints:]} if again else None
    kept_columns = [plan.by] if again else plan.columns
    tops, kept, bound, least = [], 0, np.inf, np.empty(0)
    for first, columns, rows_kept in _blocks(plan, start, stop, read):
        kept += len(rows_kept)
        if np.isfinite(bound):          # `top` rows before these are at most `bound`: only less can enter
            rows_kept = rows_kept[columns[plan.by][rows_kept] < bound]
        chosen = rows_kept[_least(columns[plan.by][rows_kept], plan.top)]
        tops.append({"row": first + chosen, **{name: columns[name][chosen] for name in kept_columns}})
        bound, least = _bound(least, tops[-1][plan.by], plan.top, bound)
    every = {name: np.concatenate([top[name] for top in tops]) for name in tops[0]}   # blocks in row order
    chosen = _least(every[plan.by], plan.top)
    if again:                           # the other fields of the chosen rows, by the same machine code
        return Best(stop - start, kept, rows_at(plan, every["row"][chosen]))
    return Best(stop - start, kept, pd.DataFrame({name: every[name][chosen] for name in plan.columns}))


def rows_at(plan: Plan, numbers: np.ndarray) -> pd.DataFrame:
    """The grid's rows ``numbers`` (row numbers of the whole grid) with every field, as ``rows``
    gives them.

    >>> from symbolic_cost.symbols import b, m1
    >>> found = rows_at(plan({"work": b * m1}, {"b": [1, 2, 3], "m1": [1, 2]}), np.array([5, 0]))
    >>> found.values.tolist()
    [[3.0, 2.0, 6.0], [1.0, 1.0, 1.0]]
    """
    inputs = {name: axis[(numbers // stride) % len(axis)] for name, axis, stride in grid_layout(dict(plan.axes))}
    fields = plan.kernel()(inputs)
    return pd.DataFrame({**inputs, **{name: fields[name] for name in plan.fields}})


def _bound(least: np.ndarray, chosen: np.ndarray, top: int, bound: float) -> tuple[float, np.ndarray]:
    """The ``top``-th least of the values kept so far (``least``, the ``top`` least of the blocks
    before, and this block's ``chosen``), once they are ``top`` or more (NaN while fewer of them
    are numbers: a bound that keeps nothing out), ``bound`` before; and the ``top`` least of them."""
    values = np.concatenate([least, chosen])
    if len(values) < top:
        return bound, values
    values = np.partition(values, top - 1)[:top]
    return float(values[top - 1]), values


def _scanned(plan: Plan, start: int, stop: int) -> Best:
    """``best_of`` by the numba module's own loop (``loop_kernel.best_rows``): the inputs made
    from the axes, evaluated, filtered and ranked a cache-sized block at a time."""
    kept, columns = loop_kernel.best_rows(plan.kernel().function, plan.axes, plan.inputs, plan.outputs, start, stop,
                                          plan.outputs.index(plan.by), plan.constraints, plan.top)
    return Best(stop - start, kept, pd.DataFrame({name: columns[name] for name in plan.columns}))


def _least(values: np.ndarray, top: int) -> np.ndarray:
    """Positions of the ``top`` least ``values`` in the order of a stable sort (ties in
    position order, NaN last): the rows up to the ``top``-th value (``np.partition``), sorted.

    >>> _least(np.array([3.0, 1.0, np.nan, 1.0, 2.0]), 3)
    array([1, 3, 4])
    """
    if len(values) > top:
        bound = np.partition(values, top - 1)[top - 1]
        if not np.isnan(bound):              # else fewer than top numbers: NaN rows are needed too
            candidates = np.flatnonzero(values <= bound)
            return candidates[np.argsort(values[candidates], kind="stable")[:top]]
    return np.argsort(values, kind="stable")[:top]


def combine(parts, top: int, by: str) -> Best:
    """Tasks' results, in row order, as one: counts added, the ``top`` of least ``by`` (ties in
    row order, as a stable sort of the whole sweep)."""
    parts = list(parts)
    frames = [p.best for p in parts if len(p.best)]
    best = ranked(pd.concat(frames), by, top) if frames else parts[0].best
    return Best(sum(p.evaluated for p in parts), sum(p.kept for p in parts), best)


def ranked(frame: pd.DataFrame, by: str, top: int) -> pd.DataFrame:
    """The ``top`` rows of ``frame`` of least ``by``, as a stable sort orders them (ties in row
    order, NaN last)."""
    return frame.sort_values(by, kind="stable").head(top)


MAX_TASKS = 10**6
"""Most tasks a sweep is split into (``row_ranges``): each is a Python object, and a Dask task
graph, kept at once; a million of the default ``chunk_size`` (2**22 rows) is past any grid."""


def row_ranges(rows: int, chunk_size: int) -> list[tuple[int, int]]:
    """The tasks of a sweep of ``rows`` rows, ``chunk_size`` rows each (the last one fewer); more
    than ``MAX_TASKS`` of them are refused before any is made.

    >>> row_ranges(10, 4)
    [(0, 4), (4, 8), (8, 10)]
    >>> row_ranges(10**12, 1)        # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: chunk_size: ... is 1,000,000,000,000 tasks, more than 1,000,000: give a ...
    """
    rows, chunk_size = count(rows, "rows", minimum=0), count(chunk_size, "chunk_size")
    tasks = -(-rows // chunk_size)
    if tasks > MAX_TASKS:
        raise InputError(f"chunk_size: a sweep of {rows:,} rows in chunks of {chunk_size:,} rows is {tasks:,} tasks, "
                         f"more than {MAX_TASKS:,}: give a larger chunk_size", "chunk_size")
    return [(start, min(start + chunk_size, rows)) for start in range(0, rows, chunk_size)]


def check_best(exprs: Mapping, by: str, **counts) -> None:
    """``by`` names one of ``exprs``; each of ``counts`` (``top``, ``chunk_size``, ``threads``,
    ``fan_in``) is an integer of at least 1 (``fan_in`` at least 2)."""
    if by not in map(str, exprs):
        raise InputError(f"by must name one of the swept expressions ({', '.join(map(str, exprs))}), got {by!r}", "by")
    for name, value in counts.items():
        least = 2 if name == "fan_in" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InputError(f"{name} must be an integer of at least {least}, got {value!r}", name)


def top_rows(exprs: Mapping, grid: Mapping, by: str, top: int = 10, constraints=(), chunk_size: int = 2**22,
             threads: int | None = None, progress: bool | Callable[[str], None] = False) -> Best:
    """``dask_sweep.best`` without Dask: its tasks of ``chunk_size`` rows in this process, on
    ``threads`` threads (default: ``vector_kernel.CORES``; the kernels run without the interpreter's
    lock), each reduced to its counts and ``top`` rows of least ``by`` (memory: a block of rows,
    ``BLOCK``, a thread, whatever the grid's size), then combined in the grid's order.  The frame
    equals ``sweep(...)``'s rows sorted by ``by`` (stable, NaN last) and cut to ``top``.
    ``progress`` is reported after each task as ``sweep``'s (``numeric.sweep.Progress``).

    >>> from symbolic_cost.symbols import b, m1
    >>> found = top_rows({"work": 2 * b / m1}, {"b": [1, 2, 3], "m1": [1, 2]}, by="work", top=2,
    ...                  constraints=["work >= 1.5"], chunk_size=4)
    >>> found.evaluated, found.kept, found.best["work"].tolist()
    (6, 5, [2.0, 2.0])
    """
    threads = CORES if threads is None else threads
    check_best(exprs, by, top=top, chunk_size=chunk_size, threads=threads)
    job = plan(exprs, grid, constraints, top, by)
    report, parts = Progress(job.size, progress), []
    with ThreadPoolExecutor(threads) as pool:
        for found in pool.map(lambda task: best_of(job, *task), row_ranges(job.size, chunk_size)):   # in order
            parts.append(found)
            report.update(found.evaluated)
    report.close()
    found = combine(parts, top, by)
    return Best(found.evaluated, found.kept, found.best.reset_index(drop=True))
