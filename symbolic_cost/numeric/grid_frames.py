"""A search's tensor grids (``numeric.search`` with ``tensor``): each grid kind and
recomputation policy built once with the grid's sides as symbols, compiled, and evaluated on
its layouts (``layouts.grid_layouts``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sympy import Max, evaluate, sympify

from symbolic_cost import symbols as S
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.grid_stack import on_grid
from symbolic_cost.models.peak import peak_bytes
from symbolic_cost.numeric.compile import compile_exprs
from symbolic_cost.numeric.layouts import GRIDS, by_stage, virtual_stages
from symbolic_cost.numeric.ranking import PARTS, RERUNS, fastest
from symbolic_cost.parallel.grid import Lcm
from symbolic_cost.timing.step import step_time_breakdown


def _chosen(values: dict, capacity: float, top: int) -> tuple[int, np.ndarray]:
    """(fitting rows, the positions of the ``top`` fastest of them, fastest first: ``ranking.fastest``)."""
    fits = np.flatnonzero(values["memory"] <= capacity)
    return len(fits), fits[fastest(values["total"][fits], top)]


def _best(rows: pd.DataFrame, values: dict, capacity: float, top: int):
    """(rows, fitting rows, the ``top`` fastest fitting rows with their ``values``)."""
    fitting, order = _chosen(values, capacity, top)
    best = rows.iloc[order].assign(**{k: np.asarray(v)[order] for k, v in values.items()})
    return len(rows), fitting, best


def _lcm_as_max(expr):
    """``expr`` with each ``Lcm(a, b)`` written ``Max(a, b)``, its equal where one side divides the
    other.  The nodes above a replaced one are rebuilt as they are, unevaluated: evaluating them
    again (SymPy's ``replace``) re-sorts every ``Max`` and ``Min`` above, seconds per grid for
    the same numbers."""
    expr = sympify(expr)
    with evaluate(False):
        return expr.xreplace({lcm: Max(*lcm.args) for lcm in expr.atoms(Lcm)})


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
    depth = arch.depth
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
            exprs = {k: _lcm_as_max(v) for k, v in exprs.items()}
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
