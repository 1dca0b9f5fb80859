"""The discrete choices of a search (``numeric.search``) and the layouts each one runs.

A ``Variant`` is one choice of recomputation, ZeRO stage, offload and schedule (with context
parallelism's variant and ZeRO-3's shard groups): the choices that change a model's formulas,
so that each is built and compiled once and evaluated on every layout it runs
(``variant_rows``), the degrees, micro-batch and layers recomputed being symbols.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from symbolic_cost import symbols as S
from symbolic_cost.checks import choice
from symbolic_cost.models import RECOMPUTE, Training
from symbolic_cost.models.recipes import OFFLOAD, check_offload
from symbolic_cost.numeric.layouts import by_stage, row_count, virtual_stages, where
from symbolic_cost.parallel.pipeline import SCHEDULES


@dataclass(frozen=True)
class Variant:
    """The discrete choices one compiled kernel covers (``cp_variant`` where ``cp > 1``; ``shard``, ZeRO-3's)."""

    recompute: str
    zero: int
    offload: str
    schedule: str
    cp_variant: str = "ring"
    shard: object = None

    def training(self, seq, experts: bool, **fixed) -> Training:
        """The training with every layout choice a symbol: ``vp`` chunks when interleaved, the
        first ``n_rec`` layers of a stage recomputed under full recomputation."""
        extra = dict(ep=S.ep, etp=S.etp) if experts else {}
        if self.schedule == "interleaved":
            extra.update(schedule="interleaved", virtual_stages=S.vp)
        elif self.schedule in ("gpipe", "zb-h1", "dualpipe"):
            extra.update(schedule=self.schedule)
        if self.recompute == "full":
            extra.update(recompute_method="block", recompute_layers=S.n_rec)
        return Training(b=S.b, l=seq, m1=S.m1, s1=S.s1, d=S.d, p=S.p, micro_batches=S.n_micro,
                        recompute=self.recompute, zero=self.zero, offload=self.offload, **extra, **fixed)

    def symbols(self, experts: bool) -> list[str]:
        return (["b", "m1", "s1", "d", "p", "n_micro"] + (["ep", "etp"] if experts else [])
                + (["vp"] if self.schedule == "interleaved" else []) + (["n_rec"] if self.recompute == "full" else []))


def variants(zero=(1,), offload=("none",), schedules=("1f1b",), recompute=("none", "full"), cp_variant="ring",
             shard=None) -> list[Variant]:
    """Every combination the recipe allows (offloading the optimizer needs ZeRO, offloading the
    parameters ZeRO-3: ``models.recipes.check_offload``); each choice checked first.  ``shard``
    (``"all"`` or sizes, ``layouts.shard_groups``) goes to the ZeRO-3 variants only."""
    for name, values, allowed in (("zero", zero, (0, 1, 2, 3)), ("offload", offload, OFFLOAD),
                                  ("schedules", schedules, SCHEDULES), ("recompute", recompute, RECOMPUTE)):
        for value in values:
            choice(value, name, allowed)
    return [Variant(r, z, o, s, cp_variant, shard if z == 3 else None)
            for r, z, o, s in itertools.product(recompute, zero, offload, schedules) if offload_allowed(o, z)]


def families(kinds) -> list[tuple[Variant, ...]]:
    """The variants of ``kinds`` grouped by the layouts they run (``variant_rows``: the same
    recomputation, context parallelism's variant and shard groups, and the interleaved or
    DualPipe schedule or any other, ``_rows_of``), in the order each group first appears: a
    search compiles one kernel a group of layouts for a whole family.

    >>> kinds = variants((0, 1, 3), ("none", "optimizer"), ("1f1b", "gpipe", "interleaved"), ("none", "full"))
    >>> [len(f) for f in families(kinds)]
    [10, 5, 10, 5]
    """
    found: dict = {}
    for variant in kinds:
        key = (variant.recompute, _rows_of(variant.schedule), variant.cp_variant, variant.shard)
        found.setdefault(key, []).append(variant)
    return [tuple(family) for family in found.values()]


def _rows_of(schedule: str) -> str:
    """Which layouts ``variant_rows`` gives a schedule: the interleaved and DualPipe schedules'
    own, every other schedule the same ones."""
    return schedule if schedule in ("interleaved", "dualpipe") else "plain"


def offload_allowed(offload: str, zero: int) -> bool:
    """Whether ``offload`` runs under ZeRO stage ``zero`` (``models.recipes.check_offload``)."""
    try:
        check_offload(offload, zero)
    except ValueError:
        return False
    return True


def variant_rows(base: pd.DataFrame, variant: Variant, depth: int, recompute_layers="full") -> dict:
    """The layouts of ``base`` (``layouts.layouts``) a variant runs, as a dict of numpy columns
    (``layouts.by_stage``): interleaved ones with ``p > 1``,
    ``n_micro`` a multiple of ``p`` and each ``vp`` of ``layouts.virtual_stages``; DualPipe's with ``p``
    and ``n_micro`` even, ``n_micro >= 2p``; under full
    recomputation each ``n_rec`` from 1 to a model chunk's layers (``recompute_layers="all"``;
    the block method redoes the first ``n_rec`` of each chunk) or all of them (``"full"``,
    Megatron-LM's uniform recomputation of every layer).  Numbers only: the
    variant's own choices are written on the fastest rows alone (``labelled``), since a column
    of text costs more to copy than the kernel takes to evaluate its rows."""
    rows = _of_policy(base, variant.recompute)
    if variant.schedule == "interleaved":
        rows = by_stage(where(rows, (rows["p"] > 1) & (rows["n_micro"] % rows["p"] == 0)), "vp",
                        lambda p: virtual_stages(depth, p))
    elif variant.schedule == "dualpipe":      # parallel.pipeline.dualpipe_rules (``_rows_of`` names the two)
        even = (rows["p"] % 2 == 0) & (rows["n_micro"] % 2 == 0) & (rows["n_micro"] >= 2 * rows["p"]) \
            & (depth % rows["p"] == 0)                       # DualPipe's halves of even stages
        rows = _with(where(rows, even), vp=1)
    else:
        rows = _with(rows, vp=1)
    if variant.recompute == "full":
        rows = by_stage(rows, "n_rec", lambda p, vp: range(1, -(-depth // (p * vp)) + 1) if recompute_layers == "all"
                        else [-(-depth // (p * vp))], key=("p", "vp"))     # an uneven split's middle stages: the most
    else:
        rows = _with(rows, n_rec=0)
    return rows


def _with(rows: dict, **constants) -> dict:
    """``rows`` with a column of each constant (64-bit integers) after its own."""
    size = row_count(rows)
    return {**rows, **{name: np.full(size, value, dtype=np.int64) for name, value in constants.items()}}


def _of_policy(base: pd.DataFrame, recompute: str) -> dict:
    """The layouts of ``base`` under one recomputation policy, as numpy columns without that one:
    remembered for the last ``base`` (a search's variants take the same few slices of one table)."""
    if _SLICES[0] is not base:
        _SLICES[:] = [base, {}]
    kept = _SLICES[1]
    if recompute not in kept:
        mine = (base["recompute"] == recompute).to_numpy()
        kept[recompute] = {c: base[c].to_numpy()[mine] for c in base.columns if c != "recompute"}
    return kept[recompute]


_SLICES: list = [None, {}]
"""The last ``base`` and its slices by recomputation policy."""


def labelled(best: dict, variant: Variant) -> pd.DataFrame:
    """The fastest rows of a variant (a dict of columns) as one frame with its choices:
    ``recompute`` after the degrees, ``zero``, ``offload`` and ``schedule`` after ``n_rec``."""
    columns = {}
    for name in best:
        columns[name] = best[name]
        if name == "n_micro":
            columns["recompute"] = variant.recompute
        elif name == "n_rec":
            columns.update(zero=variant.zero, offload=variant.offload, schedule=variant.schedule)
    return pd.DataFrame(columns)
