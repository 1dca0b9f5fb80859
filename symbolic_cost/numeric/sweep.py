"""Design-space sweeps: evaluate compiled expressions over a grid or a table of configurations.

``sweep`` walks a cartesian grid (``{name: [values]}``) or a table (DataFrame
or CSV path) in chunks of ``chunk_size`` rows, so memory stays bounded for
any number of configurations; drops the rows that break a constraint (SymPy
relations such as ``Eq(Mod(h, m1), 0)`` or ``memory <= capacity``, compiled
with the rest); reports progress on long runs (a tqdm bar on a terminal); and returns a DataFrame or
appends to a CSV or Parquet file.  On a Dask cluster, ``numeric.dask_sweep.sweep_dask`` (and
``numeric.dask_sweep.best``, which keeps only the top rows) run the chunks as tasks that load
the compiled kernel by its key.
"""

from __future__ import annotations

import math
import sys
import time
from numbers import Integral
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np
import pandas as pd
from sympy import Basic, Integer, Piecewise, S, Symbol, sympify
from sympy.logic.boolalg import Boolean
from sympy.functions.elementary.piecewise import ExprCondPair

from symbolic_cost.checks import InputError, InputTypeError, instance, progress_flag, shown
from symbolic_cost.files import output_file
from symbolic_cost.numeric.compile import compile_exprs, sweep_backend
from symbolic_cost.numeric.pages import keep_freed_pages
from symbolic_cost.reader import read
from symbolic_cost.symbols import BY_NAME, resolve_names


def _grid_chunks(grid: Mapping, chunk_size: int) -> Iterator[dict]:
    total = grid_size(grid)
    for start in range(0, total, chunk_size):
        yield grid_rows(grid, start, min(start + chunk_size, total))


def grid_rows(grid: Mapping, start: int, stop: int, out=None) -> dict:
    """Rows ``start`` to ``stop`` of the cartesian product of ``grid``'s axes, the last axis
    varying fastest: ``{name: column}``, written into ``out``'s columns (``{name: column}``,
    each ``stop - start`` long) where given.

    >>> grid_rows({"b": [1, 2], "m1": [1, 2, 4]}, 2, 4)
    {'b': array([1., 2.]), 'm1': array([4., 1.])}
    """
    if not (isinstance(start, Integral) and isinstance(stop, Integral) and 0 <= start <= stop <= grid_size(grid)):
        raise InputError(f"start and stop must be integers with 0 <= start <= stop <= {grid_size(grid):,} (the grid's "
                         f"rows), got {shown(start)} and {shown(stop)}", "start")
    layout = grid_layout(grid)
    out = {n: np.empty(stop - start) for n, _, _ in layout} if out is None else out
    write_rows(layout, start, out)
    return {n: out[n] for n, _, _ in layout}


def grid_layout(grid: Mapping) -> list[tuple[str, np.ndarray, int]]:
    """``(name, values, stride)`` of each axis of ``grid``: its values as floats, and the rows
    each value lasts (the product of the later axes' lengths)."""
    names = list(grid)
    axes = [np.asarray(grid[n], dtype=np.float64) for n in names]
    strides = np.cumprod([1] + [len(a) for a in axes[:0:-1]])[::-1]
    return [(n, axis, int(stride)) for n, axis, stride in zip(names, axes, strides)]


def write_rows(layout, start: int, out: Mapping) -> None:
    """The grid's rows from row ``start`` into ``out``'s columns (``{name: column}``), its axes
    as ``grid_layout`` gives them: a caller writing block after block takes the layout once."""
    for name, axis, stride in layout:
        _axis_rows(axis, stride, start, out[name])


RUNS = 64
"""Runs of one value up to which a column is written run by run, a slice each."""


def _axis_rows(axis: np.ndarray, stride: int, start: int, out: np.ndarray) -> np.ndarray:
    """One axis's column from row ``start`` into ``out``: each value repeated ``stride`` times,
    the whole cycled.  A column of few runs is written a run at a time; one of many, from one
    period (``np.repeat``) copied again and again onto itself, each copy twice as long: memory
    written once, with no column made and copied (``np.resize`` of a cycle took three times as
    long, and gathering row by row two thirds of a sweep's time beside the numba kernel).

    >>> _axis_rows(np.array([1.0, 2.0, 3.0]), 2, 3, np.empty(7))
    array([2., 3., 3., 1., 1., 2., 2.])
    """
    size, period = len(out), len(axis) * stride
    first, last = start // stride, (start + size - 1) // stride
    if last - first < RUNS:                         # few runs: a slice each
        for k in range(first, last + 1):
            out[max(k * stride - start, 0):(k + 1) * stride - start] = axis[k % len(axis)]
        return out
    if period > size:                               # many runs, not one whole period: repeated
        counts = np.full(last - first + 1, stride)
        counts[0] -= start - first * stride
        counts[-1] -= (last + 1) * stride - start - size
        out[:] = np.repeat(axis[np.arange(first, last + 1) % len(axis)], counts)
        return out
    cycle, offset = np.repeat(axis, stride), start % period
    head = period - offset                          # up to the period's end, then whole periods
    out[:head] = cycle[offset:]
    done = min(head + period, size)
    out[head:done] = cycle[:done - head]
    while done < size:                              # a copy of the periods written so far
        more = min(done - head, size - done)
        out[done:done + more] = out[head:head + more]
        done += more
    return out


def _table_chunks(table, chunk_size: int) -> Iterator[dict]:
    frames = pd.read_csv(table, chunksize=chunk_size) if isinstance(table, (str, Path)) else \
        (table.iloc[i:i + chunk_size] for i in range(0, len(table), chunk_size))
    for frame in frames:      # a column named after a symbol holds values it admits, as a grid's axis does
        yield {c: _check_axis(BY_NAME[c], frame[c], "table column") if c in BY_NAME else
               frame[c].to_numpy(dtype=np.float64) for c in frame.columns}


def _check_table(table) -> None:
    """A table is a DataFrame, or the path of a CSV file that exists (read a chunk at a time)."""
    if isinstance(table, (str, Path)):
        if not Path(table).is_file():
            raise InputError(f"table {str(table)!r} is not a CSV file (it does not exist, or is not a regular file)",
                             "table")
    elif not isinstance(table, pd.DataFrame):
        raise InputTypeError(f"table must be a pandas DataFrame or the path of a CSV file, got {shown(table)}", "table")


def check_grid(grid: Mapping) -> None:
    """Each axis of a grid: a non-empty list of finite numbers that its symbol admits (positive;
    integral for an integer symbol)."""
    axes = resolve_names(grid)
    if len({str(k) for k in axes}) != len(grid):      # "b" and the symbol b (or a plain b): one axis would be dropped
        raise InputError(f"grid names a symbol twice (by its name and as a symbol): {', '.join(map(str, grid))}",
                         "grid")
    for symbol, values in axes.items():
        _check_axis(symbol, values, "grid")


def _check_axis(symbol, values, what: str) -> np.ndarray:
    """One axis of a grid, or one column of a table (``what``), as float64 values its symbol admits."""
    try:
        kind = np.asarray(values).dtype.kind
        if isinstance(values, (str, bytes)) or kind in "USb" or \
                (kind == "O" and any(isinstance(v, (str, bytes, bool)) for v in np.asarray(values).ravel())):
            raise TypeError                 # text is never parsed here, nor among objects (Fractions are numbers)
        axis = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        values = list(values) if isinstance(values, pd.Series) else values       # a column, shown as its values
        raise InputTypeError(f"{what} {symbol} must be a list of numbers, got {shown(values)}", str(symbol)) from None
    if axis.ndim != 1 or axis.size == 0:
        raise InputError(f"{what} {symbol} must be a non-empty list of numbers, got {shown(values)}", str(symbol))
    bad = ~np.isfinite(axis)
    if getattr(symbol, "is_positive", False):
        bad |= ~(axis > 0)
    if getattr(symbol, "is_integer", False):         # from 2**53 on, a double skips integers
        bad |= (axis != np.round(axis)) | (np.abs(axis) >= 2.0 ** 53)
    if bad.any():
        kind = "positive integers below 2**53 (a double's whole numbers)" if symbol.is_integer \
            else "positive numbers" if symbol.is_positive else "finite"
        raise InputError(f"{what} {symbol} must be {kind}, got {axis[bad][0]}", str(symbol))
    return axis


def grid_size(grid: Mapping) -> int:
    """Rows of the cartesian product of ``grid``'s axes, exactly (numpy's product of 64-bit
    integers wraps past 2**63).

    >>> grid_size({"b": [1, 2], "m1": [1, 2, 4]}), grid_size({f"x{i}": range(10**6) for i in range(4)})
    (6, 1000000000000000000000000)
    """
    return math.prod(len(v) for v in grid.values())


def sweep(exprs: Mapping, grid: Mapping | None = None, table=None, constraints=(), chunk_size=1_000_000,
          out=None, progress: bool | Callable[[str], None] = False) -> pd.DataFrame | Path:
    """Evaluate ``{name: expression}`` on every configuration; see the module docstring.

    >>> from sympy import Eq, Mod
    >>> from symbolic_cost.symbols import b, h, m1
    >>> sweep({"work": 2 * b / m1}, grid={"b": [1, 2], "m1": [1, 2, 3], "h": [4]},
    ...       constraints=[Eq(Mod(h, m1), 0)])
         b   m1    h  work
    0  1.0  1.0  4.0   2.0
    1  1.0  2.0  4.0   1.0
    2  2.0  1.0  4.0   4.0
    3  2.0  2.0  4.0   2.0
    """
    instance(exprs, Mapping, "exprs", " of names to expressions ({'flops': cost.flops_fwd, ...})")
    if (grid is None) == (table is None):
        raise InputError("sweep needs exactly one of grid= or table=", "grid")
    if table is not None:
        _check_table(table)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise InputError(f"chunk_size must be a positive integer, got {chunk_size!r}", "chunk_size")
    if grid is not None:
        check_grid(grid)
        axes, grid = grid, {str(k): v for k, v in grid.items()}   # keyed by a symbol: its name, as a column's
    keep = keep_exprs(exprs, constraints)
    inputs = list(grid) if grid is not None else None
    given = inputs if inputs is not None else list(table.columns) if isinstance(table, pd.DataFrame) else []
    clash = sorted(set(map(str, exprs)) & set(map(str, given)))
    if clash:                           # the output's column would replace the input's
        raise InputError(f"exprs names {', '.join(clash)}, an input of the sweep: name the output otherwise", "exprs")
    symbols = None if grid is None else [s for s in resolve_names(axes)]
    rows = grid_size(grid) if grid is not None else len(table) if isinstance(table, pd.DataFrame) else None
    compiled = compile_exprs({**exprs, **keep}, symbols=symbols,
                             backend=sweep_backend(rows, {**exprs, **keep}, symbols), rows=rows)
    chunks = _grid_chunks(grid, chunk_size) if grid is not None else _table_chunks(table, chunk_size)
    total = grid_size(grid) if grid is not None else None
    report = Progress(total, progress)
    writer = _Writer(output_file(out, "out", overwrite=True, suffixes=(".csv", ".parquet"))) if out else None
    frames = []
    keep_freed_pages()                  # each chunk's columns reuse the last one's pages
    for chunk in chunks:
        values = {s: chunk[str(s)] for s in compiled.symbols if str(s) in chunk}   # by symbol: a user's own too
        results = compiled(values)
        mask = np.ones(len(next(iter(chunk.values()))), dtype=bool)
        for name in keep:
            mask &= results.pop(name) > 0.5
        columns = {**chunk, **results}
        names = list(columns) if inputs is None else inputs + list(exprs)
        rows = np.flatnonzero(mask) if keep else slice(None)
        # the kept rows of each column, then one frame: not a frame of every row, then its rows
        frame = pd.DataFrame({k: columns[k][rows] for k in names})
        if writer is None:
            frames.append(frame)
        else:
            writer.write(frame)
        report.update(len(mask))
    report.close()
    if writer is not None:
        writer.close()
        return writer.path
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(exprs))


def keep_exprs(exprs: Mapping, constraints) -> dict:
    """``{"_keep0": 1 where the first constraint holds else 0, ...}``: constraints as text (naming
    symbols or ``exprs``) or SymPy relations, compiled with the expressions."""
    if isinstance(constraints, (str, Mapping)) or not isinstance(constraints, Iterable):
        raise InputTypeError(f"constraints must be a list of conditions (text or SymPy relations), got "
                             f"{shown(constraints)}", "constraints")
    constraints = list(constraints)
    for c in constraints:
        if isinstance(c, (bool, Symbol)) or not isinstance(c, (str, Boolean)):     # a SymPy symbol is a Boolean too
            raise InputTypeError(f"each of constraints must be a condition, as text ('b*l <= 8192') or a SymPy "
                                 f"relation (Eq(Mod(h, m1), 0)), got {shown(c)}", "constraints")
    constraints = [read(c, argument="constraints", names={str(k): v for k, v in exprs.items()}, condition=True)
                   if isinstance(c, str) else c for c in constraints]
    return {f"_keep{i}": indicator(sympify(c)) for i, c in enumerate(constraints)}


def indicator(condition) -> Piecewise:
    """``Piecewise((1, condition), (0, True))`` built as it stands.  SymPy's constructor folds a
    ``Piecewise`` inside the condition outwards, rebuilding every ``Min`` on the way (seconds for a
    step time whose collectives choose NCCL's NVLS where it is set up)."""
    return Basic.__new__(Piecewise, Basic.__new__(ExprCondPair, Integer(1), condition),
                         Basic.__new__(ExprCondPair, Integer(0), S.true))


class Progress:
    """A run's progress over ``total`` configurations (``None``: not known) on stderr, as
    ``progress`` asks: ``True``, a tqdm bar on a terminal (``progress_bar``) or else a line
    each step; a callable, that line given to it; false, nothing."""

    def __init__(self, total: int | None, progress: bool | Callable[[str], None]):
        progress_flag(progress)
        self.bar = progress_bar(total) if progress is True else None
        self.say = progress if callable(progress) else \
            (lambda line: print(line, file=sys.stderr)) if progress and self.bar is None else None
        self.total, self.done, self.start = total, 0, time.perf_counter()

    def update(self, rows: int) -> None:
        """``rows`` more configurations done."""
        self.done += rows
        if self.bar is not None:
            self.bar.update(rows)
        if self.say:
            rate = self.done / max(time.perf_counter() - self.start, 1e-9)
            total = f"/{self.total:,} configurations ({self.done / self.total:.0%})" if self.total else " configurations"
            self.say(f"sweep: {self.done:,}{total}, {rate:,.0f}/s")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def progress_bar(total: int | None):
    """A ``tqdm`` bar of configurations on a terminal's stderr (rate, share done, time left), or
    ``None`` (no terminal, or tqdm not installed): then progress is one line per chunk."""
    if not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit=" configurations", unit_scale=True, file=sys.stderr, desc="sweep")


class _Writer:
    """Appends chunks to a CSV or Parquet file (Parquet needs pyarrow)."""

    def __init__(self, path: Path):
        if path.suffix not in (".csv", ".parquet"):
            raise InputError(f"sweep output must end in .csv or .parquet, got {path.name!r}", "out")
        self.path, self.parquet, self.first = path, None, True

    def write(self, frame: pd.DataFrame) -> None:
        if self.path.suffix == ".csv":
            frame.to_csv(self.path, mode="w" if self.first else "a", header=self.first, index=False)
        else:
            try:
                import pyarrow as pa
                import pyarrow.parquet as pq
            except ImportError:
                raise InputError("Parquet output needs pyarrow: python -m pip install pyarrow") from None
            table = pa.Table.from_pandas(frame, preserve_index=False)
            self.parquet = self.parquet or pq.ParquetWriter(self.path, table.schema)
            self.parquet.write_table(table)
        self.first = False

    def close(self) -> None:
        if self.parquet is not None:
            self.parquet.close()
