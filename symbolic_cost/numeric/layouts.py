"""The layouts a search compares: which degrees divide what they split, by the rules a model
applies (``checks.MODEL_RULES``, ``PIPELINE_RULES``, ``blocks.moe.MOE_RULES``,
``parallel.expert.EXPERT_GRID_RULES``).

``layouts`` lists the 1-D layouts ``(m1, s1, d, p, b, n_micro)`` (with ``ep, etp`` for a
mixture of experts, ``cp`` when context parallelism is searched) of a model on ``N`` devices;
``shard_groups`` the FSDP/HSDP shard groups of ZeRO-3 on ``d`` data-parallel ranks; ``expand`` multiplies them by the discrete
choices of ``numeric.search`` (ZeRO stage, offload, schedule with its virtual stages,
recomputation with the layers it redoes); ``grid_layouts`` lists the layouts on 2-D, 2.5-D
and 3-D tensor grids.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
from sympy import divisors

from symbolic_cost.blocks.moe import MOE_RULES
from symbolic_cost.checks import MODEL_RULES, PIPELINE_RULES, InputError, check_rules, count
from symbolic_cost.models import Architecture
from symbolic_cost.models.grid_stack import unsupported
from symbolic_cost.models.training import Training, check_model
from symbolic_cost.parallel.expert import EXPERT_GRID_RULES
from symbolic_cost.parallel.grid import check_grid, make_grid


RULES = MODEL_RULES + PIPELINE_RULES + MOE_RULES + EXPERT_GRID_RULES
"""Every rule a layout of the search meets: those ``model_cost`` applies to the same numbers."""


def allowed(dims: dict) -> bool:
    """Whether ``checks.check_rules(dims, RULES)`` accepts ``dims``: what a model would refuse,
    the search skips.

    >>> allowed(dict(h=8, m1=4)), allowed(dict(h=8, m1=3))
    (True, False)
    """
    try:
        check_rules(dims, RULES)
    except InputError:
        return False
    return True


def accepts(arch: Architecture, **training) -> bool:
    """Whether ``model_cost`` accepts ``Training(**training)`` for ``arch``: the training's own
    checks (``Training``, ``check_sharding``) and the model's (``models.training.check_model``:
    context parallelism's splits, HSDP shard groups the expert grid folds into), the context
    length aside.

    >>> from symbolic_cost.models.config import preset
    >>> accepts(preset("gpt2"), l=1024, cp=4), accepts(preset("gpt2"), l=1024, cp=3)
    (True, False)
    """
    try:
        check_model(arch, Training(allow_long=True, **training))
    except InputError:
        return False
    return True


def uneven_split(depth: int, p: int) -> tuple[int, int] | None:
    """The first and last stages' layers of Megatron-LM's uneven split of ``depth`` layers over
    ``p`` stages (``--decoder-first-pipeline-num-layers``, ``--decoder-last-pipeline-num-layers``:
    the ``p - 2`` middle stages even), where ``p`` does not divide the layers: the middle stages
    hold ``m = ceil(depth / p)``, the ends share the rest, the last one the larger half, each
    between 1 and ``m``; ``None`` where ``p`` divides the layers (an even split) or no such split
    exists.  DeepSeek-V3's 61 layers over 16 stages: 2, fourteen stages of 4, then 3.

    >>> uneven_split(61, 16), uneven_split(61, 2), uneven_split(61, 32), uneven_split(96, 8)
    ((2, 3), (30, 31), None, None)
    """
    depth, p = count(depth, "depth"), count(p, "p")
    if p < 2 or depth % p == 0:
        return None
    middle = -(-depth // p)
    rest = depth - (p - 2) * middle
    first, last = rest // 2, rest - rest // 2
    return (first, last) if 1 <= first and last <= middle else None


def pipeline_degrees(arch: Architecture, candidates) -> list[int]:
    """The pipeline degrees of ``candidates`` the search tries: those that divide the layers, and
    for a decoder-only model those with an ``uneven_split``."""
    whole = [p for p in candidates if allowed(dict(p=p, n_layers=arch.n_layers))]
    if arch.encoder_decoder:
        return whole
    return sorted(set(whole) | {p for p in candidates if uneven_split(int(arch.n_layers), p) is not None})


def _divisors(n: int) -> list[int]:
    """The divisors of ``n``, in increasing order (from its factors: trying every number up to
    ``sqrt(n)`` took as long as ``sqrt(n)``)."""
    return [int(k) for k in divisors(n)]


def _split_by_tensor(arch: Architecture) -> dict:
    """What the ``m1`` tensor ranks split, named as the rules name it: query and key/value
    heads, the MLP width and the shared experts' width (when there are any)."""
    shared = {"shared_f": arch.moe.shared_f} if arch.moe is not None and arch.moe.shared_f else {}
    return dict(h=arch.h, kv_heads=arch.kv, f=arch.f, **shared)


def expert_layouts(arch: Architecture, m1: int, d: int, cp: int = 1) -> list[tuple[int, int]]:
    """``(ep, etp)`` of a mixture of experts on ``m1 x cp x d`` ranks: ``ep`` whole experts a
    rank, ``etp`` 1 or ``m1`` whole slices of each expert, ``ep etp`` folding onto the ranks
    (``parallel.expert``); ``(1, 1)`` for a dense model."""
    if arch.moe is None:
        return [(1, 1)]
    grid = dict(experts=arch.moe.experts, expert_f=arch.moe.expert_f, **{"m1 x cp x d": m1 * cp * d})
    return [(ep, etp) for ep in _divisors(m1 * cp * d) for etp in sorted({1, m1})
            if allowed(dict(grid, ep=ep, etp=etp, **{"ep x etp": ep * etp}))]


def micro_batches(sizes, global_batch: int, d: int) -> list[int]:
    """The micro-batch sizes ``b`` of ``sizes`` (``"all"``: every one) with ``b d`` dividing the
    global batch."""
    if global_batch % d:
        return []
    return _divisors(global_batch // d) if sizes == "all" else [b for b in sizes if global_batch % (b * d) == 0]


def layouts(arch: Architecture, devices: int, global_batch: int, seq: int,
            micro_batch_sizes=(1, 2, 4, 8), recompute=("none", "selective", "full"), sequence="ends",
            cp=(1,), cp_variant="ring") -> pd.DataFrame:
    """Every layout whose degrees divide what they split: ``m1`` the heads, key/value heads and
    MLP width; ``p`` the layers; ``s1`` the sequence (``sequence="ends"``: 1 or ``m1``, as
    Megatron-LM; ``"all"``: every divisor of ``m1``; ``m1`` with experts; ``p`` the layers, or
    unevenly, ``uneven_split``); ``b d`` the global
    batch (``micro_batch_sizes``, or ``"all"``); with experts ``ep`` and ``etp``
    (``expert_layouts``, columns only then).  ``cp`` lists the context-parallel degrees tried
    (of ``cp_variant``): the devices are ``m1 cp p d`` (``models.totals.world_size``), and a
    ``cp > 1`` is kept where the model splits the sequence so (``accepts``:
    ``models.training.check_context_parallel``); a ``cp`` column only when ``cp`` is not ``(1,)``."""
    if isinstance(micro_batch_sizes, str) and micro_batch_sizes != "all":
        raise InputError(f"micro_batch_sizes must be 'all' or a list of sizes, got {micro_batch_sizes!r}",
                         "micro_batch_sizes")
    for size in () if micro_batch_sizes == "all" else micro_batch_sizes:
        count(size, "micro_batch_sizes")
    if sequence not in ("ends", "all"):
        raise InputError(f"sequence must be 'ends' (s1 = 1 or m1) or 'all' (every divisor of m1), got {sequence!r}",
                         "sequence")
    cps = tuple(dict.fromkeys(count(c, "cp") for c in cp))
    devices, global_batch, seq = count(devices, "devices"), count(global_batch, "global_batch"), count(seq, "seq")
    split, rows = _split_by_tensor(arch), []
    for m1 in (m1 for m1 in _divisors(devices) if allowed(dict(split, m1=m1))):
        for c in (c for c in cps if (devices // m1) % c == 0):
            for p in pipeline_degrees(arch, _divisors(devices // (m1 * c))):
                d = devices // (m1 * c * p)
                for s1 in ([m1] if arch.moe is not None else _divisors(m1) if sequence == "all" else sorted({1, m1})):
                    if not allowed(dict(s1=s1, l=seq, m1=m1)) or (
                            c > 1 and not accepts(arch, l=seq, m1=m1, s1=s1, cp=c, cp_variant=cp_variant)):
                        continue
                    for (ep, etp), b in ((x, b) for x in expert_layouts(arch, m1, d, c)
                                         for b in micro_batches(micro_batch_sizes, global_batch, d)):
                        for policy in recompute:
                            rows.append((m1, s1, c, d, p, ep, etp, b, global_batch // (b * d), policy))
    table = pd.DataFrame(rows, columns=["m1", "s1", "cp", "d", "p", "ep", "etp", "b", "n_micro", "recompute"])
    return table.drop(columns=([] if arch.moe is not None else ["ep", "etp"]) + (["cp"] if cps == (1,) else []))


def why_no_layout(arch: Architecture, devices: int, global_batch: int, seq: int, micro_batch_sizes=(1, 2, 4, 8),
                  cp=(1,), cp_variant="ring") -> str:
    """The rule that left ``layouts`` empty, in words: the context-parallel degrees' refusal by the
    model (``accepts``' message), no expert grid, or no data-parallel degree and micro-batch size
    whose product divides the global batch.

    >>> from symbolic_cost.models.config import preset
    >>> why_no_layout(preset("gpt2"), 13, 64, 1024)
    'global batch 64: no micro-batch size of 1, 2, 4, 8 times a data-parallel degree (13) divides it'
    """
    devices, global_batch, seq = count(devices, "devices"), count(global_batch, "global_batch"), count(seq, "seq")
    split, sizes = _split_by_tensor(arch), "every size" if micro_batch_sizes == "all" else \
        ", ".join(map(str, micro_batch_sizes))
    tensors = [m1 for m1 in _divisors(devices) if allowed(dict(split, m1=m1))]
    degrees = [(m1, c, p) for m1 in tensors for c in cp if (devices // m1) % c == 0
               for p in pipeline_degrees(arch, _divisors(devices // (m1 * c)))]
    refusals = []
    for m1, c, _ in degrees:
        if c > 1:
            try:
                check_model(arch, Training(allow_long=True, l=seq, m1=m1, s1=m1 if arch.moe is not None else 1,
                                           cp=c, cp_variant=cp_variant))
            except InputError as refused:
                refusals.append(str(refused))
    if degrees and len(refusals) == sum(c > 1 for _, c, _ in degrees) == len(degrees):
        return f"context parallelism: {refusals[0]}"
    if not degrees:
        return (f"no tensor, context and pipeline degrees multiply to {devices} devices (m1 must divide the heads, "
                f"key/value heads and MLP width; cp the devices left; p the layers)")
    data = sorted({devices // (m1 * c * p) for m1, c, p in degrees})
    if not any(micro_batches(micro_batch_sizes, global_batch, d) for d in data):
        return (f"global batch {global_batch}: no micro-batch size of {sizes} times a data-parallel degree "
                f"({', '.join(map(str, data))}) divides it")
    return f"no expert-parallel degree ep (with etp 1 or m1) divides {arch.name}'s experts on these devices"


def shard_groups(arch: Architecture, d: int, shard) -> list[int]:
    """The shard groups ZeRO-3 (FSDP) may take on ``d`` data-parallel ranks: ``shard="all"``
    every divisor of ``d`` (HSDP, ``--hsdp``), else ``d`` itself (plain FSDP) and each size of
    ``shard`` that divides it; those the model accepts (``accepts``).

    >>> from symbolic_cost.models.config import preset
    >>> shard_groups(preset("gpt2"), 8, "all"), shard_groups(preset("gpt2"), 8, (2, 3, 16))
    ([1, 2, 4, 8], [2, 8])
    """
    d = count(d, "d")
    sizes = _divisors(d) if shard == "all" else sorted({d, *(s for s in shard if d % s == 0)})
    return [s for s in sizes if s == d or _accepts_shard(arch, d, s)]


def _accepts_shard(arch: Architecture, d: int, shard: int) -> bool:
    """``accepts`` of ZeRO-3 over ``d`` ranks in groups of ``shard``, remembered (where the model
    hashes): a search asks again for every ``d`` of every ZeRO-3 variant, a ``Training`` each."""
    try:
        return _remembered_shard(arch, d, shard)
    except TypeError:                   # an architecture that does not hash
        return accepts(arch, d=d, zero=3, shard=shard)


@functools.lru_cache(maxsize=4096)
def _remembered_shard(arch: Architecture, d: int, shard: int) -> bool:
    return accepts(arch, d=d, zero=3, shard=shard)


def shard_rows(arch: Architecture, rows, shard):
    """``rows`` (a table, as ``by_stage``) with one row per shard group of its ``d``
    (``shard_groups``); with routed experts only the groups each row's expert grid folds into,
    ``ep etp | m1 cp shard`` (``parallel.expert.expert_shard_degree``).

    >>> from symbolic_cost.blocks.moe import MoE
    >>> toy = Architecture("toy-moe", 2, 64, 4, 128, 128, mlp="swiglu", norm="rms", moe=MoE(8, 2, 64))
    >>> table = pd.DataFrame({"m1": [1, 1], "d": [8, 8], "ep": [1, 8], "etp": [1, 1]})
    >>> shard_rows(toy, table, "all")[["ep", "shard"]].values.tolist()
    [[1, 1], [1, 2], [1, 4], [1, 8], [8, 8]]
    """
    rows = by_stage(rows, "shard", lambda d: shard_groups(arch, d, shard), key="d")
    if arch.moe is None or not row_count(rows):
        return rows
    ranks = rows["m1"] * (rows["cp"] if "cp" in rows else 1) * rows["shard"]
    return where(rows, ranks % (rows["ep"] * rows["etp"]) == 0)


def context_choices(cp, cp_variant: str, shard, zeros) -> tuple:
    """``(cp, shard)`` of a search, checked: ``cp`` a degree or a list of them (a ``cp_variant``
    that applies: ``Training``'s checks), ``shard`` None, ``"all"`` or sizes, with ZeRO-3 in ``zeros``.

    >>> context_choices([1, 2, 2], "ring", 4, (1, 3))
    ((1, 2), (4,))
    """
    cp = tuple(dict.fromkeys((cp,) if isinstance(cp, int) else cp))
    if not cp:
        raise InputError("cp must list at least one context-parallel degree (1: none)", "cp")
    Training(cp=max(count(c, "cp") for c in cp), cp_variant=cp_variant)
    if shard is None:
        return cp, None
    shard = (shard,) if isinstance(shard, int) else shard if shard == "all" or isinstance(shard, str) else tuple(shard)
    if not shard or shard != "all" and (isinstance(shard, str) or not all(count(s, "shard") for s in shard)):
        raise InputError("shard must be 'all' (every divisor of d) or a list of shard-group sizes", "shard")
    if 3 not in zeros:
        raise InputError(f"shard varies the shard group of ZeRO-3/FSDP (zero=3), got zero={', '.join(map(str, zeros))}; "
                         "it would be ignored", "shard")
    return cp, shard


def by_stage(table, column: str, options, key="p"):
    """``table`` with one row per value of ``column`` among ``options(p)`` (a list that depends on
    the row's pipeline degree; ``options(*values)`` of the ``key`` columns, a name or a tuple of
    names): rows with no option are dropped.  ``table`` is a DataFrame, or a dict of equal-length
    numpy columns (a search's own form: each taken once, no frame made), answered in that form.

    >>> by_stage(pd.DataFrame({"p": [1, 2, 4]}), "n_rec", lambda p: list(range(1, 4 // p)))
       p  n_rec
    0  1      1
    1  1      2
    2  1      3
    3  2      1
    >>> by_stage({"p": np.array([1, 2, 4])}, "n_rec", lambda p: list(range(1, 4 // p)))["n_rec"].tolist()
    [1, 2, 3, 1]
    """
    columns = isinstance(table, dict)
    found = [(at, np.asarray(options(*values), dtype=np.int64)) for values, at in
             groups([table[k] if columns else table[k].to_numpy() for k in ((key,) if isinstance(key, str) else key)])]
    if not any(chosen.size for _, chosen in found):
        return {**{c: v[:0] for c, v in table.items()}, column: np.zeros(0, dtype=np.int64)} if columns \
            else table.iloc[:0].assign(**{column: []})
    # each row repeated once per option of its group, group after group: one take of each column
    positions = np.concatenate([np.repeat(at, chosen.size) for at, chosen in found])
    values = np.concatenate([np.tile(chosen, at.size) for at, chosen in found])
    if columns:
        return {**{c: v[positions] for c, v in table.items()}, column: values}
    return table.iloc[positions].reset_index(drop=True).assign(**{column: values})


def row_count(table) -> int:
    """Rows of a DataFrame or of a dict of equal-length columns (``by_stage``)."""
    return len(next(iter(table.values()), ())) if isinstance(table, dict) else len(table)


def where(table, mask):
    """The rows of ``table`` (a DataFrame or a dict of columns, ``by_stage``) where ``mask`` holds."""
    return {c: v[mask] for c, v in table.items()} if isinstance(table, dict) else table[mask]


def groups(keys: list) -> list[tuple[tuple, np.ndarray]]:
    """``(key, positions)`` of each distinct row of the non-negative integer columns ``keys``, in
    order of first appearance, positions ascending: pandas' ``groupby(sort=False)`` without
    making a frame of each group (which copies every column: a seventh of a search), by one
    stable sort of a code per row.

    >>> [(k, at.tolist()) for k, at in groups([np.array([1, 0, 1, 0]), np.array([5, 5, 5, 6])])]
    [((1, 5), [0, 2]), ((0, 5), [1]), ((0, 6), [3])]
    """
    columns = [np.asarray(k, dtype=np.int64) for k in keys]
    code, span = np.zeros(len(columns[0]), dtype=np.int64), 1
    for column in columns:             # one number a row: mixed radix over the columns' ranges
        size = int(column.max()) + 1 if column.size else 1
        code, span = code * size + column, span * size
    if not code.size:
        return []
    # one stable sort of the codes (a radix sort where they fit 16 bits: one pass over the rows
    # whatever the number of groups), cut where the code changes
    ranks = code.astype(np.uint16) if span <= 2**16 else np.unique(code, return_inverse=True)[1]
    counts = np.bincount(ranks)
    parts = np.split(np.argsort(ranks, kind="stable"), np.cumsum(counts[counts > 0])[:-1])
    at = sorted(parts, key=lambda rows: rows[0])
    return [(tuple(int(c[rows[0]]) for c in columns), rows) for rows in at]


def virtual_stages(depth: int, p: int) -> list[int]:
    """Chunks ``vp >= 2`` a rank of the interleaved schedule can hold: ``p vp`` divides the layers."""
    return [v for v in _divisors(depth // p) if v >= 2] if p > 1 and depth % p == 0 else []


GRIDS = {"2d": lambda rows, cols: make_grid("2d", m1=rows, m2=cols),
         "2.5d": lambda q, depth: make_grid("2.5d", mq=q, md=depth), "3d": lambda q, depth: make_grid("3d", mq=q)}
"""The grids ``search`` considers by two degrees (``mq``, ``md`` in its kernels): 2-D grids of
``rows x cols`` (SUMMA, square or not), 2.5-D of side ``mq`` and depth ``md``, 3-D cubes."""


def grid_layouts(arch: Architecture, devices: int, global_batch: int, seq: int, tensor=("1d",),
                 micro_batch_sizes=(1, 2, 4, 8), recompute=("none", "selective", "full")) -> pd.DataFrame:
    """The layouts on the grids of ``tensor`` (``GRIDS``, ``_grid_degrees``): ``m1 = s1``
    the grid's devices (dividing the sequence), ``p`` the layers, ``b d`` the global batch, and the
    grid's rules (``parallel.grid.check_grid``) met by the model and the micro-batch ``b``;
    columns as ``layouts`` plus ``tensor``, ``mq``, ``md``.  None for a model the grid layer does
    not model (``models.grid_stack.unsupported``)."""
    unknown = set(tensor) - {"1d", *GRIDS}
    if unknown:
        raise InputError(f"tensor must name layouts among 1d, {', '.join(GRIDS)}, got {sorted(unknown)}", "tensor")
    rows = []
    for kind in [k for k in GRIDS if k in tensor and not unsupported(arch)]:
        for q, depth in _grid_degrees(kind, devices):
            grid = GRIDS[kind](q, depth)
            size = int(grid.devices)          # a SymPy integer: the frame's columns hold machine integers
            if devices % size or not allowed(dict(s1=size, l=seq)):
                continue
            for p in (p for p in _divisors(devices // size) if allowed(dict(p=p, n_layers=arch.n_layers))):
                d = devices // (size * p)
                rows += [(size, size, d, p, b, global_batch // (b * d), policy, kind, q, depth)
                         for b in micro_batches(micro_batch_sizes, global_batch, d) if _meets(arch, grid, b)
                         for policy in recompute]
    return pd.DataFrame(rows, columns=["m1", "s1", "d", "p", "b", "n_micro", "recompute", "tensor", "mq", "md"])


def _grid_degrees(kind: str, devices: int) -> list[tuple[int, int]]:
    """The two degrees of each grid of ``kind`` on at most ``devices`` devices (``GRIDS``): every
    ``rows x cols`` with both at least 2 and one dividing the other for 2-D (so that SUMMA's
    ``lcm(rows, cols)`` panels are the larger side, ``numeric.grid_frames``); every side
    ``q >= 2`` (and depth dividing what is left, beyond 1) for 2.5-D; every side for 3-D."""
    if kind == "2d":
        return [(r, c) for r in range(2, devices // 2 + 1) for c in range(2, devices // r + 1)
                if r % c == 0 or c % r == 0]
    power = 3 if kind == "3d" else 2
    sides = range(2, int(round(devices ** (1 / power))) + 1)
    if kind == "3d":
        return [(q, 1) for q in sides]
    return [(q, depth) for q in sides if devices % q ** 2 == 0 for depth in _divisors(devices // q ** 2)[1:]]


def _meets(arch: Architecture, grid, b) -> bool:
    """Whether micro-batches of ``b`` sequences of ``arch`` split evenly over ``grid``."""
    try:
        check_grid(dict(b=b, e=arch.e, f=arch.f, h=arch.h, kv_heads=arch.kv), grid)
    except InputError:
        return False
    return True
