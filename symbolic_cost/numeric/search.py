"""Search of parallel layouts: which degrees, micro-batch and memory policy train a model
fastest on ``N`` devices, among those that fit in memory.

The degrees ``m1, s1, d, p``, the micro-batch ``b`` and micro-batches ``n_micro`` (with
experts ``ep, etp``), the interleaved schedule's chunks per rank ``vp`` and the layers a
stage recomputes ``n_rec`` are symbols: the model is built once per discrete choice that
changes its formulas (a ``variants.Variant``: recomputation, ZeRO stage, offload, schedule).
Variants that run the same layouts (a family: ZeRO stages, offloads, and GPipe, 1F1B and
ZB-H1; ``variants.families``) share their kernels: the step's peak memory of each
(``models.peak``, what must fit) compiled into one kernel and evaluated on every layout of the
family at once, their step times (``timing.step.step_time_breakdown``) into another, evaluated
on the layouts where any fits (the memory kernel costs a tenth of the step time's).  ``SPACE``
spans everything the library can express (Calculon's search space: tensor, pipeline, data degrees, micro-batch,
interleaving, recomputation, sequence parallelism, optimizer sharding, offload); the
defaults search a smaller one.  With ``tensor`` the search also considers tensor grids
(``layouts.GRIDS``), whose ``m1 = s1`` are the grid's devices (``models.grid_stack``).
Families can run in worker processes (``workers``) or as Dask tasks (``dask=True``).
"""

from __future__ import annotations

import functools
import itertools
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace

import numpy as np
import pandas as pd

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, InputTypeError, count, flag, instance, listed_once, progress_flag, shown
from symbolic_cost.collector import paused
from symbolic_cost.models import Architecture, model_cost
from symbolic_cost.models.architecture import MADE_BY
from symbolic_cost.models.training import Training, check_graphs, chunks_divide
from symbolic_cost.models.placement import placed_by_p
from symbolic_cost.models.peak import peak_bytes
from symbolic_cost.models.grid_stack import unsupported
from symbolic_cost.numeric.compile import compile_exprs, default_backend
from symbolic_cost.numeric.kernel_cache import built
from symbolic_cost.numeric.ranking import PARTS, RERUNS, fastest
from symbolic_cost.numeric.layouts import (context_choices, grid_layouts, groups, layouts, row_count, shard_rows,
                                           uneven_split, why_no_layout)
from symbolic_cost.numeric.variants import families, labelled, offload_allowed, variant_rows, variants
from symbolic_cost.numeric.vector_kernel import CORES
from symbolic_cost.timing.hardware import get_system
from symbolic_cost.timing.step import step_time_breakdown

MAX_DEVICES = 2**20
"""Most devices a search takes: the layouts of ``N`` devices grow with the divisors of ``N``."""
SPACE = dict(zero=(0, 1, 2, 3), offload=("none", "optimizer", "parameters"), schedules=("gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe"),
             recompute=("none", "selective", "activation", "full"), recompute_layers="all", micro_batch_sizes="all",
             sequence="all")
"""Every choice ``search`` can vary: pass ``**SPACE`` for the whole space."""


@dataclass(frozen=True)
class SearchResult:
    evaluated: int
    fitting: int
    best: pd.DataFrame


@paused()
def run_variant(task) -> tuple[int, int, pd.DataFrame]:
    """One variant on its layouts: ``run_family`` of a task whose variant is alone."""
    return run_family((task[0], (task[1],), *task[2:]))[0]


@paused()
def run_family(task) -> list[tuple[int, int, pd.DataFrame]]:
    """Build, compile and evaluate variants that run the same layouts (a task of ``search``:
    ``variants.families``), each group of layouts through one kernel of their peak memories and
    one of their step times (``_evaluate``); once per ``p`` (and ``vp``) where the layers a rank
    holds depend on it (``models.placement.placed_by_p``), apart for ``cp > 1`` and ``shard < d``
    (``Variant.shard``: ``layouts.shard_groups``).  For each variant: (layouts, fitting
    layouts, its ``top`` fastest fitting layouts)."""
    arch, family, base, seq, system, conventions, fixed, recompute_layers, top = task
    columns = variant_rows(base, family[0], arch.depth, recompute_layers)
    if family[0].shard is not None:
        columns = shard_rows(arch, columns, family[0].shard)
    if not row_count(columns):
        return [(0, 0, labelled(columns, variant)) for variant in family]
    uneven = (arch.n_layers % columns["p"]) != 0             # ``layouts.uneven_split``: a build for each such p
    by_p = [columns["p"], columns["vp"]] if placed_by_p(arch, fixed) else \
        [np.where(uneven, columns["p"], 0), np.where(uneven, columns["vp"], 0)] if uneven.any() else []
    apart = np.zeros(row_count(columns), dtype=bool)
    kinds = [_sequence_kind(columns), columns["cp"] > 1 if "cp" in columns else apart,
             columns["shard"] < columns["d"] if "shard" in columns else apart]
    trainings = [variant.training(seq, arch.moe is not None, **fixed) for variant in family]
    results = [_evaluate(arch, family, columns, at, trainings, system, conventions, top, *_stage_keys(key, by_p),
                         SHARDS[shards], context=bool(context), hsdp=bool(hsdp))
               for (shards, context, hsdp, *key), at in groups([*kinds, *by_p])]
    return [_fastest_of_groups([group[i] for group in results], variant, top) for i, variant in enumerate(family)]


def _fastest_of_groups(results, variant, top: int) -> tuple[int, int, pd.DataFrame]:
    """One variant's (layouts, fitting layouts, ``top`` fastest) over its groups' results."""
    chosen = {c: np.concatenate([b[c] for _, _, b in results]) for c in results[0][2]}
    order = np.argsort(chosen["total"], kind="stable")[:top]         # the groups' fastest, ties in their order
    best = {c: v[order] for c, v in chosen.items()}
    return sum(n for n, _, _ in results), sum(k for _, k, _ in results), labelled(best, variant)


SHARDS = ("none", "tensor", "partial")


def _sequence_kind(rows) -> np.ndarray:
    """How each layout shards the sequence, as an index of ``SHARDS``: ``"none"`` (``s1 = 1``),
    ``"tensor"`` (``s1 = m1``, Megatron's sequence parallelism) or ``"partial"``.  Each kind is built apart with ``s1`` set
    (1, or ``m1`` itself), so that each kernel holds the collectives its layouts send: with
    ``s1`` a free symbol every tensor-parallel reduction is a choice between the allreduce of
    ``s1 = 1`` and the reduce-scatter and allgather of the others (``blocks.layout.reduce_to_shards``,
    ``timing.hardware.comm_time``), both arms evaluated on every row."""
    return np.where(rows["s1"] == 1, 0, np.where(rows["s1"] == rows["m1"], 1, 2))


def _stage_keys(key, by_p) -> tuple:
    """``(p, vp)`` of a group built for its pipeline degree, or ``(None, None)`` (``p`` a symbol)."""
    return tuple(int(k) for k in key) if by_p and int(key[0]) else (None, None)


def _evaluate(arch, family, columns: dict, at, trainings, system, conventions, top, p=None, vp=None,
              shards="partial", context=False, hsdp=False) -> list:
    """Step time and memory of the rows at positions ``at`` of ``columns`` under each variant of
    ``family`` (``trainings``: their ``Variant.training``), the models compiled with the layout's
    degrees as symbols (``p`` and ``vp`` numbers when given; ``s1`` set by ``shards``,
    ``_sequence_kind``; ``cp`` a symbol with ``context``, ``shard`` one with ``hsdp``).  The
    family's peak memories are one kernel, evaluated on every row; the step times of the
    variants that fit anywhere another, evaluated on the rows where any fits: one kernel's
    common subexpressions shared (the compute, the bubble, a layer's collectives), where a kernel
    each compiled the same operations again.  For each variant: (rows, fitting rows, the ``top``
    fastest fitting with their values, as columns)."""
    names, changes = family[0].symbols(arch.moe is not None), {}
    if shards != "partial":
        changes["s1"] = 1 if shards == "none" else trainings[0].m1
        names = [n for n in names if n != "s1"]
    if p is not None:
        changes.update(p=p, **({"virtual_stages": vp} if family[0].schedule == "interleaved" else {}))
        split = uneven_split(int(arch.n_layers), p)
        if split is not None:
            changes.update(first_stage_layers=split[0], last_stage_layers=split[1])
        names = [n for n in names if n not in ("p", "vp")]
    symbolic = {**(dict(cp=S.cp, cp_variant=family[0].cp_variant) if context else {}),
                **(dict(shard=S.shard) if hsdp else {})}
    if changes or symbolic:
        trainings = [replace(training, **changes, **symbolic) for training in trainings]   # checked once
    names = names + [n for n in ("cp", "shard") if n in symbolic]

    symbols, key = [S.BY_NAME[k] for k in names], (arch, *trainings, system, conventions, names, default_backend())
    costs = [functools.cache(lambda t=t: model_cost(arch, t, conventions)) for t in trainings]   # only when compiled
    memory = built(("memory", *key), lambda: compile_exprs(
        {f"memory{i}": peak_bytes(cost(), conventions) for i, cost in enumerate(costs)}, symbols=symbols,
        rows=len(at) * RERUNS))
    values = {k: columns[k] for k in names}
    needed = memory(values, at=at)
    fits = [needed[f"memory{i}"] <= float(system.hbm_capacity) for i in range(len(costs))]
    timed = tuple(i for i, fit in enumerate(fits) if fit.any())     # a variant that fits nowhere is never timed
    anywhere = functools.reduce(np.logical_or, [fits[i] for i in timed], np.zeros(len(at), dtype=bool))
    union, place = np.flatnonzero(anywhere), np.cumsum(anywhere) - 1     # a row's place among those timed

    def step():
        parts = {i: step_time_breakdown(costs[i](), system, conventions) for i in timed}
        return compile_exprs({f"{k}{i}": parts[i].get(k, 0) for i in timed for k in PARTS}, symbols=symbols,
                             rows=union.size * RERUNS)
    times = built((PARTS, timed, *key), step)(values, at=at[union]) if timed else {}
    results = []
    for i, fit in enumerate(fits):
        rows = np.flatnonzero(fit)
        where = place[rows]                               # its fitting rows among those timed
        mine = {k: times[f"{k}{i}"][where] for k in PARTS} if i in timed else {k: np.empty(0) for k in PARTS}
        order = fastest(mine["total"], top)
        picked = at[rows[order]]
        results.append((len(at), rows.size, {**{c: v[picked] for c, v in columns.items()},
                                             **{k: v[order] for k, v in mine.items()},
                                             "memory": needed[f"memory{i}"][rows[order]]}))
    return results


def _beside_graphs(arch: Architecture, recompute: tuple, graphs) -> tuple:
    """The recomputations a search tries beside CUDA ``graphs``: those Megatron-Core takes with
    them for ``arch`` (``Training``'s and ``models.training.check_graphs``' rules: never ``full``
    beside per-layer graphs, nor ``selective`` where its attention core's dropout would be inside
    the graph); every layout of ``--cuda-graphs attn`` was refused before.  Refused, as the first
    refused one is, where none is left."""
    if not graphs:
        return recompute
    kept, refused = [], None
    for mode in recompute:
        try:
            check_graphs(arch, Training(recompute=mode, cuda_graphs=graphs))
            kept.append(mode)
        except InputError as error:
            refused = refused or error
    if not kept:
        raise refused
    return tuple(kept)


SPACE_SCALARS = {"micro_batch_sizes": ("all",), "zero": (int,), "offload": (), "schedules": (), "recompute": (None,),
                 "tensor": (), "cp": (int,), "shard": (None, int, "all")}
"""``Space``'s fields of values to try, each with what it also takes alone (``int``: one integer)."""


def _taken_alone(value, alone: tuple) -> bool:
    """Whether ``value`` is one of the scalars ``alone`` a field of ``Space`` also takes (``int``: any integer)."""
    if type(value) is int:
        return int in alone
    return isinstance(value, (str, type(None))) and value in alone


@dataclass(frozen=True)
class Space:
    """What a layout search varies, and what every layout it tries keeps.

    * the step: ``global_batch`` sequences of ``seq`` tokens; ``micro_batch_sizes`` the
      micro-batches ``b`` tried (``"all"``: every divisor that fits the batch);
    * memory policy: ``zero`` a ZeRO stage or a tuple of them, ``offload``, ``recompute`` (default
      none and full, and selective without ``flash``, which keeps no attention core; beside CUDA
      graphs in ``policy`` only those Megatron-Core takes with them) and
      ``recompute_layers`` (``"full"``: every layer of a stage; ``"all"``: 1 to all of them);
    * pipeline: ``schedules``, and ``sequence`` (``"ends"``: sequence parallelism at ``s1 = m1``
      or 1; ``"all"``: every divisor);
    * tensor: ``tensor`` the tensor layouts (``"1d"`` and the grids of ``layouts.GRIDS``);
      ``cp`` context-parallel degrees of ``cp_variant`` (1-D layouts only); ``shard`` ZeRO-3's
      shard groups (``layouts.shard_groups``);
    * kept: ``flash``, ``precision``, and ``policy``, further ``Training`` keywords every layout
      keeps (a framework file's distributed optimizer, FP8, overlap: ``cli.search.FIXED``), never
      one the search varies.

    ``SPACE`` holds every choice the library can express.
    """

    global_batch: int = 1024
    seq: int = 2048
    micro_batch_sizes: object = (1, 2, 4, 8)
    zero: object = 1
    offload: tuple = ("none",)
    schedules: tuple = ("1f1b",)
    recompute: tuple | None = None
    recompute_layers: str = "full"
    sequence: str = "ends"
    tensor: tuple = ("1d",)
    cp: tuple = (1,)
    cp_variant: str = "ring"
    shard: tuple | None = None
    flash: bool = True
    precision: str = "bf16"
    policy: dict | None = None

    def __post_init__(self):
        for name in ("global_batch", "seq"):
            count(getattr(self, name), name)
        for name, alone in SPACE_SCALARS.items():       # a field of values to try, or the scalar it takes alone
            value = getattr(self, name)
            if _taken_alone(value, alone):
                continue
            if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable) or not value:
                words = " or ".join("an integer" if a is int else repr(a) for a in alone)
                raise InputTypeError(f"{name} must be a non-empty tuple of the values to try"
                                     f"{' (or ' + words + ')' if alone else ''}, got {shown(value)}", name)
            value = tuple(value)
            listed_once(value, name)       # each layout would be tried, and listed, twice
            object.__setattr__(self, name, value)
        if self.policy is not None and not isinstance(self.policy, Mapping):
            raise InputTypeError(f"policy must be a dict of Training keywords every layout keeps, got {shown(self.policy)}",
                                 "policy")
        if self.recompute_layers not in ("full", "all"):
            raise InputError(f"recompute_layers must be 'full' (every layer of a stage) or 'all' (1 to all of "
                             f"them), got {self.recompute_layers!r}", "recompute_layers")


@paused()
def chunked(frame: pd.DataFrame, seq: int, chunks: int) -> pd.DataFrame:
    """The layouts of ``frame`` whose micro-batch on a rank, ``b x seq / cp`` tokens, ``chunks``
    equal pieces of the loss divide (``models.training.Training``'s rule, which a search's
    symbolic ``b`` does not meet until its rows are numbers)."""
    if frame.empty:
        return frame
    return frame[chunks_divide(frame["b"] * seq, frame["cp"] if "cp" in frame else 1, chunks)]


def search(arch: Architecture, devices: int, system="h100", space: Space | None = None, *, top: int = 10,
           conventions=conv.DEFAULT, progress=False, workers: int | None = 1, dask: bool = False,
           **ranges) -> SearchResult:
    """The ``top`` fastest layouts of ``arch`` on ``devices`` devices of ``system`` that fit in its
    memory, with their time breakdown, over ``space`` (a ``Space``; ``**ranges`` replace its
    fields: ``search(arch, 8, zero=(1, 3))``, ``search(arch, 8, **SPACE)`` searches everything).
    ``workers``: processes the variants are split over (``None``: ``auto_workers``, the command
    line's default); ``dask``: as Dask tasks; ``progress``: said to stderr or to a callable.
    """
    unknown = sorted(set(ranges) - {f.name for f in fields(Space)})
    if unknown:
        raise InputTypeError(f"search() got an unexpected keyword argument {unknown[0]!r} (a Space field or one "
                             "of search's own)", unknown[0])
    instance(arch, Architecture, "arch", MADE_BY)
    if space is not None:
        instance(space, Space, "space", " (numeric.search.Space(...), or its fields as keywords)")
    space = replace(space or Space(), **ranges)
    count(devices, "devices", maximum=MAX_DEVICES)
    count(top, "top")
    flag(dask, "dask")
    progress_flag(progress)
    if workers is not None:
        count(workers, "workers")
    system = get_system(system)
    if not system.hbm_capacity:
        raise InputError(f"system {system.name} states no memory capacity to fit layouts into", "system")
    zeros = (space.zero,) if isinstance(space.zero, int) else tuple(space.zero)
    global_batch, seq, flash, tensor = space.global_batch, space.seq, space.flash, space.tensor
    cp, shard = context_choices(space.cp, space.cp_variant, space.shard, zeros)
    recompute = space.recompute or (("none", "full") if flash else ("none", "selective", "full"))
    if flash:                               # flash keeps no attention core: selective = none
        recompute = tuple(r for r in recompute if r != "selective")
    recompute = _beside_graphs(arch, recompute, (space.policy or {}).get("cuda_graphs", ()))
    base = layouts(arch, devices, global_batch, seq, space.micro_batch_sizes, recompute, space.sequence, cp,
                   space.cp_variant) if "1d" in tensor else pd.DataFrame()
    grids = grid_layouts(arch, devices, global_batch, seq, tensor, space.micro_batch_sizes, recompute)
    if (space.policy or {}).get("reference") is not None:    # a reference model: unpipelined layouts only
        base, grids = (frame[frame["p"] == 1] if not frame.empty else frame for frame in (base, grids))
    chunks = (space.policy or {}).get("loss_chunks", 1)
    if chunks != 1 and not (base.empty and grids.empty):
        base, grids = (chunked(frame, seq, chunks) for frame in (base, grids))
        if base.empty and grids.empty:
            raise InputError(f"loss_chunks={chunks} divides the tokens of no layout's micro-batch (b x {seq:,} / cp): "
                             f"the chunked loss runs equal chunks", "loss_chunks")
    if base.empty and grids.empty:
        refused = unsupported(arch)
        if "1d" not in tensor and refused:
            raise InputError(f"no valid layout of {arch.name}: a tensor grid does not model "
                             f"{', '.join(refused)}; add 1d to tensor", "tensor")
        why = why_no_layout(arch, devices, global_batch, seq, space.micro_batch_sizes, cp, space.cp_variant)
        raise InputError(f"no valid layout of {arch.name} on {devices} devices with global batch {global_batch}: "
                         f"{why}", "devices")
    varied = set(space.policy or {}) & {"b", "m1", "s1", "d", "p", "micro_batches", "recompute", "recompute_method",
                                        "recompute_layers", "zero", "offload", "schedule", "virtual_stages",
                                        "precision", "flash", "l", "ep", "etp", "cp", "cp_variant",
                                        *(["shard"] if shard else [])}
    if varied:
        raise InputError(f"policy fixes {', '.join(sorted(varied))}, which the search varies or takes as arguments",
                         "policy")
    if (space.policy or {}).get("fused_loss"):      # its row is built for one tensor degree, 1 (blocks.heads)
        raise InputError("policy fused_loss: Liger's fused loss runs the whole vocabulary on one device (m1 = 1), "
                         "and the search varies the tensor degree; cost its layouts with summary or sweep",
                         "fused_loss")
    fixed = dict(precision=space.precision, flash=flash, **(space.policy or {}))
    offload, schedules = space.offload, space.schedules
    kinds = variants(zeros, offload, schedules, recompute, space.cp_variant, shard) if not base.empty else []
    tasks = [(arch, family, base, seq, system, conventions, fixed, space.recompute_layers, top)
             for family in families(kinds)]
    found = dict(zip([v for t in tasks for v in t[1]], itertools.chain.from_iterable(
        _run_all(tasks, progress, auto_workers(len(kinds)) if workers is None else workers, dask))))
    results = [found[v] for v in kinds]              # in the variants' order: ties stay in it
    if not grids.empty:
        from symbolic_cost.numeric.grid_frames import grid_frames
        results = [(n, k, f.assign(tensor="1d", grid="")) for n, k, f in results]
        results += [grid_frames(arch, grids, seq, system, conventions, top, zero=z, offload=o, schedule=s, **fixed)
                    for z, o, s in itertools.product(zeros, offload, schedules) if offload_allowed(o, z)]
    if not sum(n for n, _, _ in results):
        raise InputError(f"no layout of {arch.name} on {devices} devices with global batch {global_batch} runs the "
                         f"schedules {', '.join(schedules)} (interleaved: p > 1 dividing n_micro, vp dividing a stage's "
                         f"layers; dualpipe: p and n_micro even, n_micro >= 2p)", "schedules")
    every = pd.concat([f for _, _, f in results], ignore_index=True)
    every = every.assign(cp=every["cp"].fillna(1).astype(int)) if "cp" in every else every   # grids: cp = 1
    every = every.assign(shard=every["shard"].fillna(every["d"]).astype(int)) if "shard" in every else every  # below ZeRO-3: d
    every = _one_schedule_without_a_pipeline(every)
    best = every.sort_values("total", kind="stable").head(top).reset_index(drop=True)
    return SearchResult(sum(n for n, _, _ in results), sum(k for _, k, _ in results), stages(best, int(arch.n_layers)))


def _one_schedule_without_a_pipeline(every: pd.DataFrame) -> pd.DataFrame:
    """``every`` with one row for each layout without a pipeline (``p = 1``): every schedule runs it
    alike, and the same layout under each schedule's name would fill the ranking with copies.  The
    first schedule searched keeps it."""
    if "schedule" not in every or "p" not in every:
        return every
    same = every.duplicated(subset=[c for c in every.columns if c != "schedule"])
    return every[~((every["p"] == 1) & same)].reset_index(drop=True)


def stages(best: pd.DataFrame, depth: int) -> pd.DataFrame:
    """``best`` with the first and last stages' layers after ``p`` where a layout splits the
    layers unevenly (``layouts.uneven_split``; an even one's ends hold ``depth / p``; a layout
    without a pipeline has no stages: none), else as it is."""
    if best.empty or "p" not in best or not (depth % best["p"] != 0).any():
        return best
    ends = [(uneven_split(depth, int(p)) or (depth // int(p),) * 2) if p > 1 else (None, None) for p in best["p"]]
    at = list(best.columns).index("p") + 1
    best = best.copy()
    best.insert(at, "last_stage_layers", pd.array([last for _, last in ends], dtype="Int64"))
    best.insert(at, "first_stage_layers", pd.array([first for first, _ in ends], dtype="Int64"))
    return best


AUTO_TASKS = 8
"""Variants from which ``workers=None`` splits a search over every core: a smaller search builds
in a second or two in this process, which keeps what it built for the next one."""


def auto_workers(tasks: int) -> int:
    """Processes a search of ``tasks`` variants runs in when ``workers`` is ``None`` (the command
    line's default): one per core this process may run on (``vector_kernel.CORES``: its CPU
    affinity, which a batch scheduler or ``taskset`` narrows below the machine's cores) from
    ``AUTO_TASKS`` variants, else 1.

    >>> auto_workers(2), auto_workers(120) == CORES
    (1, True)
    """
    return CORES if tasks >= AUTO_TASKS else 1


def _run_all(tasks, progress, workers: int, dask: bool):
    """Each task's results (``run_family``), in order: in this process, in ``workers`` processes
    (at most one per task and per core; each said as it comes), or as Dask tasks."""
    say = progress if callable(progress) else (lambda m: print(m, file=sys.stderr)) if progress else None
    if dask:        # the layouts once, one node of the graph, not inside every task
        import dask as dask_
        shared = {id(t[2]): dask_.delayed(t[2], pure=True, traverse=False) for t in tasks}
        yield from _said(dask_.compute(*[dask_.delayed(run_family)((*t[:2], shared[id(t[2])], *t[3:])) for t in tasks]),
                         tasks, say)
    elif min(workers, len(tasks), CORES) > 1:     # never more processes than kernels or cores
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(min(workers, len(tasks), CORES)) as pool:
            yield from _said(pool.map(run_family, tasks), tasks, say)
    else:
        yield from _said(map(run_family, tasks), tasks, say)


def _said(results, tasks, say):
    """``results`` as they come, each family's told to ``say`` (the variants and layouts so far)."""
    start, done, variants_done, every = time.perf_counter(), 0, 0, sum(len(t[1]) for t in tasks)
    for result in results:
        done += sum(n for n, _, _ in result)
        variants_done += len(result)
        if say:
            say(f"search: {variants_done}/{every} variants, {done:,} layouts, {time.perf_counter() - start:.1f} s")
        yield result
