"""Search of parallel layouts: which degrees, micro-batch and memory policy train a model
fastest on ``N`` devices, among those that fit in memory.

The degrees ``m1, s1, d, p``, the micro-batch ``b`` and micro-batches ``n_micro`` (with
experts ``ep, etp``), the interleaved schedule's chunks per rank ``vp`` and the layers a
stage recomputes ``n_rec`` are symbols: the model is built once per discrete choice that
changes its formulas (a ``variants.Variant``: recomputation, ZeRO stage, offload, schedule), the
step's peak memory (``models.peak``, what must fit) compiled into one kernel and evaluated on every
layout of that variant at once, its step time (``timing.step.step_time_breakdown``) into another,
evaluated on the layouts that fit (the memory kernel costs a tenth of the step time's).  ``SPACE``
spans everything the library can express (Calculon's search space: tensor, pipeline, data degrees, micro-batch,
interleaving, recomputation, sequence parallelism, optimizer sharding, offload); the
defaults search a smaller one.  With ``tensor`` the search also considers tensor grids
(``layouts.GRIDS``), whose ``m1 = s1`` are the grid's devices (``models.grid_stack``).
Variants can run in worker processes (``workers``) or as Dask tasks (``dask=True``).
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from sympy import Max, sympify

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, count
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.ranks import placed_by_p
from symbolic_cost.models.peak import peak_bytes
from symbolic_cost.parallel.grid import Lcm
from symbolic_cost.models.grid_stack import on_grid, unsupported
from symbolic_cost.numeric.compile import compile_exprs, default_backend
from symbolic_cost.numeric.kernel_cache import built
from symbolic_cost.numeric.layouts import (GRIDS, by_stage, context_choices, grid_layouts, groups, layouts, row_count,
                                           shard_rows, virtual_stages)
from symbolic_cost.numeric.variants import Variant, labelled, offload_allowed, variant_rows, variants
from symbolic_cost.timing.hardware import get_system
from symbolic_cost.timing.step import step_time_breakdown

PARTS = ("compute", "tensor_comm", "bubble", "pipeline_comm", "data_comm", "host_comm", "host_step", "total")
"""The step-time parts a search reports (``host_comm`` and ``host_step`` are 0 without offload)."""

MAX_DEVICES = 2**20
"""Most devices a search takes: the layouts of ``N`` devices grow with the divisors of ``N``."""
RERUNS = 32
"""A search's kernels are filed on disk for the searches after it, so it asks for an optimised
kernel as if each would run ``RERUNS`` times: from 16,384 layouts, where one run alone would
need ``symengine_kernel.OPTIMIZED_ROWS`` (524,288)."""

SPACE = dict(zero=(0, 1, 2, 3), offload=("none", "optimizer", "parameters"), schedules=("gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe"),
             recompute=("none", "selective", "activation", "full"), recompute_layers="all", micro_batch_sizes="all",
             sequence="all")
"""Every choice ``search`` can vary: pass ``**SPACE`` for the whole space."""


@dataclass(frozen=True)
class SearchResult:
    evaluated: int
    fitting: int
    best: pd.DataFrame


def _chosen(values: dict, capacity: float, top: int) -> tuple[int, np.ndarray]:
    """(fitting rows, the positions of the ``top`` fastest of them, fastest first: ``_fastest``)."""
    fits = np.flatnonzero(values["memory"] <= capacity)
    return len(fits), fits[_fastest(values["total"][fits], top)]


def _fastest(total: np.ndarray, top: int) -> np.ndarray:
    """The positions of the ``top`` least of ``total``, least first, ties in row order (as a
    stable sort of it), found among the rows as fast as the ``top``-th alone."""
    keep = np.flatnonzero(total <= np.partition(total, top - 1)[top - 1]) if len(total) > top else \
        np.arange(len(total))
    return keep[np.argsort(total[keep], kind="stable")[:top]]


def _best(rows: pd.DataFrame, values: dict, capacity: float, top: int):
    """(rows, fitting rows, the ``top`` fastest fitting rows with their ``values``)."""
    fitting, order = _chosen(values, capacity, top)
    best = rows.iloc[order].assign(**{k: np.asarray(v)[order] for k, v in values.items()})
    return len(rows), fitting, best


def run_variant(task) -> tuple[int, int, pd.DataFrame]:
    """Build, compile and evaluate one variant on its layouts (a task of ``search``); once per
    ``p`` (and ``vp``) where the layers a rank holds depend on it (``models.ranks.placed_by_p``),
    apart for ``cp > 1`` and ``shard < d`` (``variant.shard``: ``layouts.shard_groups``)."""
    arch, variant, base, seq, system, conventions, fixed, recompute_layers, top = task
    columns = variant_rows(base, variant, arch.n_layers + arch.decoder_layers, recompute_layers)
    if variant.shard is not None:
        columns = shard_rows(arch, columns, variant.shard)
    if not row_count(columns):
        return 0, 0, labelled(columns, variant)
    by_p = [columns["p"], columns["vp"]] if placed_by_p(arch, fixed) else []
    apart = np.zeros(row_count(columns), dtype=bool)
    kinds = [_sequence_kind(columns), columns["cp"] > 1 if "cp" in columns else apart,
             columns["shard"] < columns["d"] if "shard" in columns else apart]
    training = variant.training(seq, arch.moe is not None, **fixed)
    results = [_evaluate(arch, variant, columns, at, training, system, conventions, top, *_stage_keys(key, by_p),
                         SHARDS[shards], context=bool(context), hsdp=bool(hsdp))
               for (shards, context, hsdp, *key), at in groups([*kinds, *by_p])]
    chosen = {c: np.concatenate([b[c] for _, _, b in results]) for c in results[0][2]}
    order = np.argsort(chosen["total"], kind="stable")[:top]         # the groups' fastest, ties in their order
    best = {c: v[order] for c, v in chosen.items()}
    return sum(n for n, _, _ in results), sum(k for _, k, _ in results), labelled(best, variant)


SHARDS = ("none", "tensor", "partial")


def _sequence_kind(rows) -> np.ndarray:
    """How each layout shards the sequence, as an index of ``SHARDS``: ``"none"`` (``s1 = 1``),
    ``"tensor"`` (``s1 = m1``, Megatron's sequence parallelism) or ``"partial"``.  Each kind is built apart with ``s1`` set
    (1, or ``m1`` itself), so that the collectives are the ones that layout sends: with ``s1``
    a free symbol, the tensor group's allreduce of ``s1 = 1`` is booked as its reduce-scatter
    and allgather (``blocks.layout.reduce_to_shards``), which the calibrated model (NCCL's
    latencies) prices apart."""
    return np.where(rows["s1"] == 1, 0, np.where(rows["s1"] == rows["m1"], 1, 2))


def _stage_keys(key, by_p) -> tuple:
    return tuple(int(k) for k in key) if by_p else (None, None)


def _evaluate(arch, variant: Variant, columns: dict, at, training, system, conventions, top, p=None, vp=None,
              shards="partial", context=False, hsdp=False):
    """Step time and memory of the rows at positions ``at`` of ``columns`` under ``variant``
    (``training``: its ``Variant.training``), the model compiled with the layout's degrees as
    symbols (``p`` and ``vp`` numbers when given; ``s1`` set by ``shards``, ``_sequence_kind``;
    ``cp`` a symbol with ``context``, ``shard`` one with ``hsdp``): (rows, fitting rows, the
    ``top`` fastest fitting with their values, as columns)."""
    names, changes = variant.symbols(arch.moe is not None), {}
    if shards != "partial":
        changes["s1"] = 1 if shards == "none" else training.m1
        names = [n for n in names if n != "s1"]
    if p is not None:
        changes.update(p=p, **({"virtual_stages": vp} if variant.schedule == "interleaved" else {}))
        names = [n for n in names if n not in ("p", "vp")]
    symbolic = {**(dict(cp=S.cp, cp_variant=variant.cp_variant) if context else {}), **(dict(shard=S.shard) if hsdp else {})}
    training = replace(training, **changes, **symbolic) if changes or symbolic else training   # checked once
    names = names + [n for n in ("cp", "shard") if n in symbolic]

    symbols, key = [S.BY_NAME[k] for k in names], (arch, training, system, conventions, names, default_backend())
    cost = functools.cache(lambda: model_cost(arch, training, conventions))      # built only for a kernel not on disk
    memory = built(("memory", *key), lambda: compile_exprs({"memory": peak_bytes(cost(), conventions)},
                                                           symbols=symbols, rows=len(at) * RERUNS))
    values = {k: columns[k] for k in names}
    needed = memory(values, at=at)["memory"]
    fits = np.flatnonzero(needed <= float(system.hbm_capacity))      # only these rows are timed

    def step():
        parts = step_time_breakdown(cost(), system, conventions)
        return compile_exprs({k: parts.get(k, 0) for k in PARTS}, symbols=symbols, rows=fits.size * RERUNS)
    times = built((PARTS, *key), step)(values, at=at[fits]) if fits.size else {k: np.empty(0) for k in PARTS}
    order = _fastest(times["total"], top)
    picked = at[fits[order]]
    return len(at), fits.size, {**{c: v[picked] for c, v in columns.items()},
                                **{k: np.asarray(v)[order] for k, v in times.items()}, "memory": needed[fits[order]]}


def search(arch: Architecture, devices: int, system="h100", global_batch: int = 1024, seq: int = 2048,
           top: int = 10, zero=1, flash: bool = True, precision: str = "bf16", conventions=conv.DEFAULT,
           tensor=("1d",), micro_batch_sizes=(1, 2, 4, 8), recompute=None, offload=("none",),
           schedules=("1f1b",), recompute_layers="full", sequence="ends", progress=False,
           workers: int | None = 1, dask: bool = False, policy: dict | None = None, cp=(1,), cp_variant: str = "ring",
           shard=None) -> SearchResult:
    """The ``top`` fastest layouts that fit in the system's memory, with their time breakdown.

    ``zero`` is a stage or a tuple of stages; ``recompute`` defaults to none and full (and
    selective without ``flash``, which keeps no attention core); ``**SPACE`` searches everything.
    ``cp`` lists context-parallel degrees of ``cp_variant`` (1-D layouts only); ``shard`` ZeRO-3's
    shard groups (``layouts.shard_groups``; a ``shard`` column, ``d`` below ZeRO-3).  Not in ``SPACE``.
    ``policy`` holds further ``Training`` fields every layout keeps (a framework file's distributed
    optimizer, FP8, overlap: ``cli.search.FIXED``), never one the search varies.  ``workers``:
    processes the variants are split over (``None``: ``auto_workers``, the command line's default).
    """
    count(devices, "devices", maximum=MAX_DEVICES)
    for name, value in (("global_batch", global_batch), ("seq", seq), ("top", top)):
        count(value, name)
    if workers is not None:
        count(workers, "workers")
    system = get_system(system)
    if not system.hbm_capacity:
        raise InputError(f"system {system.name} states no memory capacity to fit layouts into", "system")
    zeros = (zero,) if isinstance(zero, int) else tuple(zero)
    if recompute_layers not in ("full", "all"):
        raise InputError(f"recompute_layers must be 'full' (every layer of a stage) or 'all' (1 to all of "
                         f"them), got {recompute_layers!r}", "recompute_layers")
    cp, shard = context_choices(cp, cp_variant, shard, zeros)
    recompute = recompute or (("none", "full") if flash else ("none", "selective", "full"))
    if flash:                               # flash keeps no attention core: selective = none
        recompute = tuple(r for r in recompute if r != "selective")
    base = layouts(arch, devices, global_batch, seq, micro_batch_sizes, recompute, sequence, cp, cp_variant) \
        if "1d" in tensor else pd.DataFrame()
    grids = grid_layouts(arch, devices, global_batch, seq, tensor, micro_batch_sizes, recompute)
    if base.empty and grids.empty:
        refused = unsupported(arch)
        if "1d" not in tensor and refused:
            raise InputError(f"no valid layout of {arch.name}: a tensor grid does not model "
                             f"{', '.join(refused)}; add 1d to tensor", "tensor")
        raise InputError(f"no valid layout of {arch.name} on {devices} devices with global batch {global_batch}",
                         "devices")
    varied = set(policy or {}) & {"b", "m1", "s1", "d", "p", "micro_batches", "recompute", "recompute_method",
                                  "recompute_layers", "zero", "offload", "schedule", "virtual_stages", "precision",
                                  "flash", "l", "ep", "etp", "cp", "cp_variant", *(["shard"] if shard else [])}
    if varied:
        raise InputError(f"policy fixes {', '.join(sorted(varied))}, which the search varies or takes as arguments",
                         "policy")
    fixed = dict(precision=precision, flash=flash, **(policy or {}))
    tasks = [(arch, v, base, seq, system, conventions, fixed, recompute_layers, top)
             for v in variants(zeros, offload, schedules, recompute, cp_variant, shard)] if not base.empty else []
    results = list(_run_all(tasks, progress, auto_workers(len(tasks)) if workers is None else workers, dask))
    if not grids.empty:
        results = [(n, k, f.assign(tensor="1d", grid="")) for n, k, f in results]
        results += [grid_frames(arch, grids, seq, system, conventions, top, zero=z, offload=o, schedule=s, **fixed)
                    for z, o, s in itertools.product(zeros, offload, schedules) if offload_allowed(o, z)]
    every = pd.concat([f for _, _, f in results], ignore_index=True)
    every = every.assign(cp=every["cp"].fillna(1).astype(int)) if "cp" in every else every   # grids: cp = 1
    every = every.assign(shard=every["shard"].fillna(every["d"]).astype(int)) if "shard" in every else every  # below ZeRO-3: d
    best = every.sort_values("total", kind="stable").head(top).reset_index(drop=True)
    return SearchResult(sum(n for n, _, _ in results), sum(k for _, k, _ in results), best)


AUTO_TASKS = 8
"""Variants from which ``workers=None`` splits a search over every core: a smaller search builds
in a second or two in this process, which keeps what it built for the next one."""


def auto_workers(tasks: int) -> int:
    """Processes a search of ``tasks`` variants runs in when ``workers`` is ``None`` (the command
    line's default): one per core from ``AUTO_TASKS`` variants, else 1.

    >>> auto_workers(2), auto_workers(120) == (os.cpu_count() or 1)
    (1, True)
    """
    return (os.cpu_count() or 1) if tasks >= AUTO_TASKS else 1


def _run_all(tasks, progress, workers: int, dask: bool):
    """Each task's result, in order: in this process, in ``workers`` processes (at most one per task
    and per core), or as Dask tasks."""
    say = progress if callable(progress) else (lambda m: print(m, file=sys.stderr)) if progress else None
    if dask:        # the layouts once, one node of the graph, not inside every task
        import dask as dask_
        shared = {id(t[2]): dask_.delayed(t[2], pure=True, traverse=False) for t in tasks}
        results = dask_.compute(*[dask_.delayed(run_variant)((*t[:2], shared[id(t[2])], *t[3:])) for t in tasks])
    elif min(workers, len(tasks), os.cpu_count() or 1) > 1:     # never more processes than kernels or cores
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(min(workers, len(tasks), os.cpu_count() or 1)) as pool:
            results = list(pool.map(run_variant, tasks))
    else:
        results = map(run_variant, tasks)
    start, done = time.perf_counter(), 0
    for i, result in enumerate(results, 1):
        done += result[0]
        if say:
            say(f"search: {i}/{len(tasks)} kernels, {done:,} layouts, {time.perf_counter() - start:.1f} s")
        yield result


def grid_frames(arch: Architecture, grids: pd.DataFrame, seq, system, conventions, top, zero=1, offload="none",
                schedule="1f1b", **training):
    """Step time by part and memory of the layouts of ``grids`` under one ZeRO stage, offload and
    schedule (``interleaved``: each ``vp`` of ``layouts.virtual_stages`` where ``p > 1`` and
    ``p`` divides ``n_micro``, as ``variant_rows``): the model built once per grid kind and
    recomputation policy with ``b, mq, md, d, p, n_micro`` (and ``vp``) as symbols, compiled,
    evaluated; ``grid`` names each grid (``rows x cols``, ``mq x mq x md``, ``mq x mq x mq``).  Returns
    (layouts, fitting layouts, the ``top`` fastest fitting) as ``run_variant``."""
    results = []
    interleaved = schedule == "interleaved"
    symbols = ["b", "mq", "md", "d", "p", "n_micro"] + (["vp"] if interleaved else [])
    depth = arch.n_layers + arch.decoder_layers
    for (kind, policy), group in grids.groupby(["tensor", "recompute"], sort=False):
        if interleaved:
            group = by_stage(group[(group["p"] > 1) & (group["n_micro"] % group["p"] == 0)], "vp",
                             lambda p: virtual_stages(depth, p))
            if group.empty:
                continue
        chunks = dict(virtual_stages=S.vp) if interleaved else {}
        plain = Training(b=S.b, l=seq, d=S.d, p=S.p, micro_batches=S.n_micro, recompute=policy, zero=zero,
                         offload=offload, schedule=schedule, **chunks, **training)
        cost = model_cost(arch, on_grid(plain, GRIDS[kind](S.mq, S.md)), conventions)
        parts = step_time_breakdown(cost, system, conventions)
        exprs = {**{k: parts.get(k, 0) for k in PARTS}, "memory": peak_bytes(cost, conventions)}
        if kind == "2d":         # one side divides the other (layouts._grid_degrees): lcm is the larger
            exprs = {k: sympify(v).replace(Lcm, Max) for k, v in exprs.items()}
        compiled = compile_exprs(exprs, symbols=[S.BY_NAME[k] for k in symbols], rows=len(group) * RERUNS)
        names = [{"2d": f"{q}x{d}", "2.5d": f"{q}x{q}x{d}", "3d": f"{q}x{q}x{q}"}[kind]
                 for q, d in zip(group["mq"], group["md"])]
        rows = group.assign(grid=names, n_rec=np.where(policy == "full", depth // group["p"], 0), zero=zero,
                            offload=offload, schedule=schedule, **({} if interleaved else {"vp": 1}))
        results.append(_best(rows, compiled({k: group[k].to_numpy() for k in symbols}), float(system.hbm_capacity), top))
    if not results:
        return 0, 0, pd.DataFrame()
    frames = [f.drop(columns=["mq", "md"]) for _, _, f in results]
    return sum(n for n, _, _ in results), sum(k for _, k, _ in results), pd.concat(frames, ignore_index=True)
