"""Search of parallel layouts: which ``(m1, s1, d, p, b, micro-batches, recompute)`` trains a
model fastest on ``N`` devices, among those that fit in memory.

The model is built once per recomputation policy with the degrees as
symbols; its step time (``model.step_time_breakdown``) and memory are
compiled once and evaluated on every valid layout at the same time.  With ``tensor`` the
search also considers tensor grids (``GRIDS``: square 2-D ``mq x mq``, 2.5-D ``mq x mq x md``,
3-D ``mq^3``; ``grid_layouts``), whose ``m1 = s1`` are the grid's devices (``models.grid_stack``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.checks import count
from symbolic_cost.numeric.compile import compile_exprs
from symbolic_cost.timing.hardware import get_system
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.checks import InputError
from symbolic_cost.models.grid_stack import on_grid, unsupported
from symbolic_cost.parallel.grid import check_grid, make_grid
from symbolic_cost.timing.step import step_time_breakdown

PARTS = ("compute", "tensor_comm", "bubble", "pipeline_comm", "data_comm", "total")

MAX_DEVICES = 2**20
"""Most devices a search takes: the layouts of ``N`` devices grow with the divisors of ``N``."""


def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, int(n**0.5) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


def expert_layouts(arch: Architecture, m1: int, d: int) -> list[tuple[int, int]]:
    """``(ep, etp)`` of a mixture of experts on ``m1 x d`` ranks: ``ep`` whole experts a rank,
    ``etp`` 1 or ``m1`` whole slices of each expert, ``ep etp`` folding onto the ranks
    (``parallel.expert``); ``(1, 1)`` for a dense model."""
    if arch.moe is None:
        return [(1, 1)]
    experts, width = int(arch.moe.experts), int(arch.moe.expert_f)
    return [(ep, etp) for ep in _divisors(m1 * d) if experts % ep == 0 for etp in sorted({1, m1})
            if (m1 * d) % (ep * etp) == 0 and width % etp == 0]


def layouts(arch: Architecture, devices: int, global_batch: int, seq: int,
            micro_batch_sizes=(1, 2, 4, 8), recompute=("none", "selective", "full")) -> pd.DataFrame:
    """Every layout whose degrees divide what they split: ``m1`` the heads, key/value heads and
    MLP width; ``p`` the layers; ``s1`` (1 or ``m1``; ``m1`` with experts) the sequence; ``b d``
    the global batch; with experts ``ep`` and ``etp`` (``expert_layouts``, columns only then)."""
    kv = arch.kv_heads or arch.h
    shared = int(arch.moe.shared_f) if arch.moe is not None else 0
    rows = []
    for m1 in _divisors(devices):
        if arch.h % m1 or kv % m1 or arch.f % m1 or shared % m1:
            continue
        for p in _divisors(devices // m1):
            if arch.n_layers % p:
                continue
            d = devices // (m1 * p)
            for s1 in (sorted({1, m1}) if arch.moe is None else [m1]):
                if seq % s1:
                    continue
                for (ep, etp), b in ((x, b) for x in expert_layouts(arch, m1, d) for b in micro_batch_sizes):
                    if global_batch % (b * d):
                        continue
                    for policy in recompute:
                        rows.append((m1, s1, d, p, ep, etp, b, global_batch // (b * d), policy))
    table = pd.DataFrame(rows, columns=["m1", "s1", "d", "p", "ep", "etp", "b", "n_micro", "recompute"])
    return table if arch.moe is not None else table.drop(columns=["ep", "etp"])


@dataclass(frozen=True)
class SearchResult:
    evaluated: int
    fitting: int
    best: pd.DataFrame


def search(arch: Architecture, devices: int, system="h100", global_batch: int = 1024, seq: int = 2048,
           top: int = 10, zero: int = 1, flash: bool = True, precision: str = "bf16",
           conventions=conv.DEFAULT, tensor=("1d",), **choices) -> SearchResult:
    """The ``top`` fastest layouts that fit in the system's memory, with their time breakdown."""
    count(devices, "devices", maximum=MAX_DEVICES)
    for name, value in (("global_batch", global_batch), ("seq", seq), ("top", top)):
        count(value, name)
    system = get_system(system)
    if not system.hbm_capacity:
        raise ValueError(f"system {system.name} states no memory capacity to fit layouts into")
    if flash and "recompute" not in choices:    # flash keeps no attention core: selective = none
        choices["recompute"] = ("none", "full")
    table = layouts(arch, devices, global_batch, seq, **choices)
    table = table if "1d" in tensor else table.iloc[:0]
    grids = grid_layouts(arch, devices, global_batch, seq, tensor, **choices)
    if table.empty and grids.empty:
        raise ValueError(f"no valid layout of {arch.name} on {devices} devices with global batch {global_batch}")
    frames = []
    degrees = [S.b, S.m1, S.s1, S.d, S.p, S.n_micro] + ([S.ep, S.etp] if arch.moe is not None else [])
    experts = dict(ep=S.ep, etp=S.etp) if arch.moe is not None else {}
    for policy, group in table.groupby("recompute", sort=False):
        training = Training(b=S.b, l=seq, m1=S.m1, s1=S.s1, d=S.d, p=S.p, micro_batches=S.n_micro,
                            precision=precision, zero=zero, recompute=policy, flash=flash, **experts)
        cost = model_cost(arch, training, conventions)
        parts = step_time_breakdown(cost, system, conventions)
        compiled = compile_exprs({**{k: parts[k] for k in PARTS}, "memory": cost.memory_bytes}, symbols=degrees)
        values = compiled({str(k): group[str(k)].to_numpy() for k in degrees})
        frames.append(group.assign(**values))
    if not grids.empty:
        frames = [f.assign(tensor="1d", grid="") for f in frames] + grid_frames(
            arch, grids, seq, system, conventions, precision=precision, zero=zero, flash=flash)
    every = pd.concat(frames, ignore_index=True)
    fits = every[every["memory"] <= float(system.hbm_capacity)]
    return SearchResult(len(every), len(fits), fits.sort_values("total").head(top).reset_index(drop=True))


GRIDS = {"2d": lambda q, depth: make_grid("2d", m1=q, m2=q), "2.5d": lambda q, depth: make_grid("2.5d", mq=q, md=depth),
         "3d": lambda q, depth: make_grid("3d", mq=q)}
"""The grids ``search`` considers by side ``mq`` and depth ``md``: square 2-D grids (as Optimus)."""


def grid_layouts(arch: Architecture, devices: int, global_batch: int, seq: int, tensor=("1d",),
                 micro_batch_sizes=(1, 2, 4, 8), recompute=("none", "selective", "full")) -> pd.DataFrame:
    """The layouts on the grids of ``tensor`` (``GRIDS``) with more than one device: ``m1 = s1``
    the grid's devices (dividing the sequence), ``p`` the layers, ``b d`` the global batch, and the
    grid's rules (``parallel.grid.check_grid``) met by the model and the micro-batch ``b``;
    columns as ``layouts`` plus ``tensor``, ``mq``, ``md``.  None for a model the grid layer does
    not model (``models.grid_stack.unsupported``)."""
    unknown = set(tensor) - {"1d", *GRIDS}
    if unknown:
        raise InputError(f"tensor must name layouts among 1d, {', '.join(GRIDS)}, got {sorted(unknown)}", "tensor")
    rows = []
    for kind in [k for k in GRIDS if k in tensor and not unsupported(arch)]:
        power = 3 if kind == "3d" else 2
        for q in range(2, int(round(devices ** (1 / power))) + 1):
            depths = _divisors(devices // q ** power)[1:] if kind == "2.5d" and devices % q ** power == 0 else [1]
            for grid, depth in ((GRIDS[kind](q, depth), depth) for depth in depths):
                if devices % grid.devices or seq % grid.devices:
                    continue
                for p in (p for p in _divisors(devices // grid.devices) if arch.n_layers % p == 0):
                    d = devices // (grid.devices * p)
                    rows += [(grid.devices, grid.devices, d, p, b, global_batch // (b * d), policy, kind, q, depth)
                             for b in micro_batch_sizes if global_batch % (b * d) == 0 and _meets(arch, grid, b)
                             for policy in recompute]
    return pd.DataFrame(rows, columns=["m1", "s1", "d", "p", "b", "n_micro", "recompute", "tensor", "mq", "md"])


def _meets(arch: Architecture, grid, b) -> bool:
    """Whether micro-batches of ``b`` sequences of ``arch`` split evenly over ``grid``."""
    try:
        check_grid(dict(b=b, e=arch.e, f=arch.f, h=arch.h, kv_heads=arch.kv_heads or arch.h), grid)
    except InputError:
        return False
    return True


def grid_frames(arch: Architecture, grids: pd.DataFrame, seq, system, conventions, **training) -> list:
    """Step time by part and memory of every layout of ``grids``: the model built once per grid
    kind and recomputation policy with ``b, mq, md, d, p, n_micro`` as symbols, compiled, evaluated;
    ``grid`` names each grid (``mq x mq``, ``mq x mq x md``, ``mq^3``)."""
    frames = []
    symbols = ["b", "mq", "md", "d", "p", "n_micro"]
    for (kind, policy), group in grids.groupby(["tensor", "recompute"], sort=False):
        plain = Training(b=S.b, l=seq, d=S.d, p=S.p, micro_batches=S.n_micro, recompute=policy, **training)
        cost = model_cost(arch, on_grid(plain, GRIDS[kind](S.mq, S.md)), conventions)
        parts = step_time_breakdown(cost, system, conventions)
        compiled = compile_exprs({**{k: parts[k] for k in PARTS}, "memory": cost.memory_bytes},
                                 symbols=[S.BY_NAME[k] for k in symbols])
        names = [f"{q}x{q}" + {"2d": "", "2.5d": f"x{depth}", "3d": f"x{q}"}[kind]
                 for q, depth in zip(group["mq"], group["md"])]
        frames.append(group.assign(grid=names, **compiled({k: group[k].to_numpy() for k in symbols}))
                      .drop(columns=["mq", "md"]))
    return frames
