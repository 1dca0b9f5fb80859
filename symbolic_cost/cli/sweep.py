"""Whole-model totals over a grid of configurations, as CSV (or Parquet) rows.

Values are in base units, which the column names state: ``*_bytes`` in bytes,
``flops_*`` in FLOPs, the step-time parts (``*_s``) in seconds.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import sys

from sympy import And, lambdify, sympify

from symbolic_cost import symbols as S
from symbolic_cost.blocks.block import layer_rules
from symbolic_cost.checks import INTERLEAVED_RULES, PIPELINE_RULES, InputError, grid_rules
from symbolic_cost.files import output_file
from symbolic_cost.cli import frameworks, options
from symbolic_cost.cli.summary import SETTABLE
from symbolic_cost.cli.values import (TRAINING_SYMBOLS, architecture, assignments, conventions, grid_option, honour_mtp,
                                      grid_values, numbers_needed, parse_condition, resolve, training_values)
from symbolic_cost.cli.building import refuse_expert_tensor_degree
from symbolic_cost.blocks.moe import MOE_RULES, routed_rows
from symbolic_cost.blocks.wiring import Experts, check_dispatcher
from symbolic_cost.parallel.expert import EXPERT_GRID_RULES, expert_shard_degree
from symbolic_cost.parallel.pipeline import dualpipe_rules
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.placement import SPLIT, placed_by_p
from symbolic_cost.models.training import (check_context, check_context_parallel, check_loss_chunks,
                                            check_reference_pipeline)
from symbolic_cost.models.experts import alltoall_bytes
from symbolic_cost.models.peak import peak_bytes
from symbolic_cost.models.totals import check_block_recompute
from symbolic_cost.numeric.sweep import grid_size, sweep
from symbolic_cost.timing.step import step_time_breakdown

TOTALS = ("parameters", "flops_fwd", "flops_bwd", "weight_bytes", "gradient_bytes", "optimizer_bytes",
          "activation_bytes", "memory_bytes")
TIMES = ("total", "compute", "tensor_comm", "bubble", "pipeline_comm", "data_comm")
EXPERTS = ("active_parameters", "alltoall_bytes")
DEFAULT_FIELDS = TOTALS + TIMES
SWEEP_FIELDS = DEFAULT_FIELDS + ("peak_bytes",) + EXPERTS
"""What ``--field`` may name: ``ModelCost`` totals, the parts of ``step_time_breakdown``, the step's
peak memory (``models.peak``), and for mixtures of experts the active parameters and the all-to-all
bytes of a step (the last three not by default)."""

EXAMPLES = [
    "symbolic-cost sweep --preset gpt2 --grid b=1,2,4,8 --grid m1=1,2,4 --field memory_bytes,total",
    "symbolic-cost sweep --preset gpt2 --grid b=1,2,4,8 l=512,1024,2048 --where 'memory_bytes <= 80e9' "
    "--out sweep.csv --progress",
    "symbolic-cost sweep --hf-config Mixtral-8x7B/config.json --set l=4096 m1=2 s1=2 d=32 etp=1 --grid ep=1,2,4,8 "
    "--field memory_bytes,alltoall_bytes,total",
    "symbolic-cost sweep --megatron-args train_llama3_8b_h100_fp8.sh --grid b=1,2,4 --field memory_bytes,total",
    "symbolic-cost sweep --preset gpt3-175b --grid b=1:64 l=256:2048:x2 m1=1:8:x2 --where 'memory_bytes <= 80e9' "
    "--field total --dask 2 --out sweep.parquet",
    "symbolic-cost sweep --preset gpt3-175b --set b=1 l=2048 d=8 n_micro=64 --zero 1 --grid m1=1:8:x2 p=1:32:x2 "
    "--where 'memory_bytes <= 80e9' --field memory_bytes,total --top 5 --by total",
]


CHUNK = 1_000_000
"""Configurations a chunk of the rows ``sweep`` prints or writes (``--chunk``), with or without Dask."""

grid_type = grid_option(TRAINING_SYMBOLS)
"""``--grid``'s check: ``NAME=V1,V2,...`` with NAME in ``TRAINING_SYMBOLS`` (``values.grid_option``)."""


def add_arguments(parser) -> None:
    options.model(parser, megatron=True)
    options.option(parser, "--grid", type=grid_type, action="extend", nargs="+", required=True,
                   metavar="NAME=V1,V2,...", help="swept symbols (b, l, m1, s1, d, p, n_micro, ep, etp, cp) and their "
                   "values, listed or as ranges (b=1:64:x2 doubles, p=1:8:+1 adds 1); several after one --grid "
                   "or repeated")
    options.settings(parser, help=SETTABLE)
    columns = {column(f): f for f in SWEEP_FIELDS if column(f) != f}       # the CSV's heading: total_s
    options.option(parser, "--field", type=options.field_list(SWEEP_FIELDS, columns), default=list(DEFAULT_FIELDS),
                   metavar="F1,F2,...",
                   help="comma-separated outputs, any of: " + ", ".join(SWEEP_FIELDS) + " (default: all but "
                   + ", ".join(tuple(f for f in SWEEP_FIELDS if f not in DEFAULT_FIELDS)) + ")")
    options.option(parser, "--where", action="append", default=[], metavar="EXPR",
                   help="keep rows where EXPR holds, e.g. 'memory_bytes <= 80e9' or 'Eq(Mod(96, m1), 0)'")
    options.option(parser, "--out", help="write to a new .csv or .parquet file instead of stdout")
    options.option(parser, "--overwrite", action="store_true", help="with --out: replace an existing file")
    options.option(parser, "--chunk", type=int, help=f"configurations per chunk (default: {CHUNK:,}; with --top, "
                   "the default of numeric.grid_tasks.top_rows, or of numeric.dask_sweep.best with --dask)")
    options.option(parser, "--top", type=int, metavar="N", help="only the N rows of least --by: each task keeps "
                   "its own N, in the memory of a block of rows a core however large the grid "
                   "(numeric.grid_tasks.top_rows on this machine's cores; numeric.dask_sweep.best with --dask)")
    options.option(parser, "--by", choices=SWEEP_FIELDS, metavar="FIELD", help="with --top: the field to rank by, "
                   "least first (one of --field's)")
    options.option(parser, "--progress", action="store_true", help="report progress on stderr")
    options.option(parser, "--dask", metavar="WORKERS|ADDRESS",
                   help="evaluate the chunks as Dask tasks (numeric.dask_sweep: compiled once, loaded by key on "
                   "each worker) on a LocalCluster of WORKERS processes, or on the scheduler at ADDRESS "
                   "(tcp://host:8786); needs the dask extra")
    options.training(parser)
    options.experts(parser)
    options.counting(parser)
    options.time_model(parser)
    frameworks.add_arguments(parser)


def column(field: str) -> str:
    """The output column of a field: the step-time parts get ``_s`` (seconds)."""
    return f"{field}_s" if field in TIMES else field


def check_grid(arch, fixed: dict, grid: dict, chosen, policy: dict) -> None:
    """Every grid point fits the model's context (``models.training.check_context``) and obeys
    the layer rules (``blocks.block.layer_rules``), the pipeline's (``checks.PIPELINE_RULES``),
    the interleaved schedule's (``checks.INTERLEAVED_RULES``), DualPipe's
    (``parallel.pipeline.dualpipe_rules``) and a ``--shard`` group's (``shard | d``):
    ``m1 | h``, ``s1 | m1``, ``p | n_layers``, ...; sizes that follow a swept symbol
    (``--set s1=m1/2``) stay positive integers."""
    get = lambda sym: fixed.get(sym, sym)  # noqa: E731
    dims = dict(e=arch.e, h=arch.h, f=arch.f, kv_heads=arch.kv,
                n_layers=arch.depth,
                **{str(s): get(s) for s in TRAINING_SYMBOLS})
    rules = layer_rules(chosen, arch.head_dim is not None) + PIPELINE_RULES
    v = policy["virtual_stages"] if policy.get("schedule") == "interleaved" else 1
    if v != 1:                                      # rounds of p micro-batches, whole layers a chunk
        dims.update({"micro_batches": get(S.n_micro), "p x virtual_stages": get(S.p) * v})
        rules += INTERLEAVED_RULES
    uneven = any(policy.get(k) not in (None, False) for k in SPLIT)
    if policy.get("recompute") == "full" and policy.get("recompute_method", "uniform") == "uniform" and not uneven:
        # groups of recompute_layers inside a model chunk (models.totals.check_schedule)
        dims.update({"recompute_layers": policy.get("recompute_layers", 1),
                     "p x virtual_stages x recompute_layers": get(S.p) * v * policy.get("recompute_layers", 1)})
        rules += (("p x virtual_stages x recompute_layers", "n_layers"),)
    if arch.moe is not None:      # whole experts and slices, an expert grid that folds, s1 = m1 (blocks.moe)
        dims.update({"experts": arch.moe.experts, "expert_f": arch.moe.expert_f, "ep x etp": get(S.ep) * get(S.etp),
                     "m1 x cp x d": get(S.m1) * get(S.cp) * get(S.d)}, **({"shared_f": arch.moe.shared_f} if arch.moe.shared_f else {}))
        rules += MOE_RULES + EXPERT_GRID_RULES + (("m1", "s1"),)
    if policy.get("shard") is not None:            # HSDP's replica groups of shard whole ranks (Training's rule)
        dims["shard"] = policy["shard"]
        rules += (("shard", "d"),)
    grid_rules(dims, grid, rules)
    for tokens in grid.get(S.l, []):                # the model's context, which summary holds it to
        try:
            check_context(arch, (("l", tokens),), policy.get("allow_long", False))
        except InputError as error:
            raise InputError(f"--grid at l={tokens}: {error}", error.argument) from None
    _check_context_parallel(arch, get, grid, policy)
    _check_imbalance(arch, grid, policy)
    _check_dispatcher(arch, get, grid, policy)
    _check_loss_chunks(arch, get, grid, policy)
    _check_expert_shard(arch, get, grid, policy)
    if policy.get("recompute") == "full" and policy.get("recompute_method") == "block" and not uneven:
        for p in grid.get(S.p, []):                 # the first recompute_layers of each stage
            try:
                check_block_recompute(arch.depth / p, policy.get("recompute_layers", 1))
            except InputError as error:
                raise InputError(f"--grid at p={p}: {error}", error.argument) from None
    for p in grid.get(S.p, []):                     # a reference model's forward is modelled at p = 1 only
        try:
            check_reference_pipeline(policy.get("reference"), p)
        except InputError as error:
            raise InputError(f"--grid at p={p}: {error}", error.argument) from None
    if policy.get("schedule") == "dualpipe":        # p and n_micro even, n_micro >= 2p at every point
        for p, n in itertools.product(grid.get(S.p, [get(S.p)]), grid.get(S.n_micro, [get(S.n_micro)])):
            try:
                dualpipe_rules(p, n)
            except InputError as error:
                raise InputError(f"--grid at p={p}, n_micro={n}: {error}", error.argument) from None


def _check_imbalance(arch, grid: dict, policy: dict) -> None:
    """An ``--expert-imbalance`` at every swept ``ep`` as ``summary`` checks it at one (between 1 and
    ``ep``: ``blocks.moe.routed_rows``, its home; moot at ep = 1, where one rank holds every expert)."""
    imbalance = policy.get("expert_imbalance")
    if arch.moe is None or imbalance in (None, 1):
        return
    for ep in grid.get(S.ep, []):
        try:
            routed_rows(1, 1, 1, ep=ep, imbalance=imbalance)
        except InputError as error:
            raise InputError(f"--grid at ep={ep}: {error}", error.argument) from None


def _check_dispatcher(arch, get, grid: dict, policy: dict) -> None:
    """The flex dispatcher's expert grid of two ranks or more at every swept point of ``ep``,
    ``etp`` and ``m1`` (which an unset ``etp`` follows), as ``summary`` checks it at one
    (``blocks.wiring.check_dispatcher``, its home)."""
    axes = [s for s in (S.ep, S.etp, S.m1) if s in grid]
    if arch.moe is None or policy.get("dispatcher", "alltoall") != "flex" or not axes:
        return
    for point in itertools.product(*(grid[s] for s in axes)):
        at = dict(zip(axes, point))
        ep, etp = (at[s] if s in at else sympify(get(s)).subs(at) for s in (S.ep, S.etp))
        try:
            check_dispatcher(Experts(ep, etp, dispatcher="flex"))
        except InputError as error:
            raise InputError(f"--grid at {', '.join(f'{s}={v}' for s, v in at.items())}: {error}",
                             error.argument) from None


def _check_loss_chunks(arch, get, grid: dict, policy: dict) -> None:
    """A ``--loss-chunks`` at every swept point of the tokens a rank holds (``b``, the sequence, ``cp``)
    as ``summary`` checks it at one (``models.training.check_loss_chunks``, its home)."""
    chunks = policy.get("loss_chunks") or 1
    sequence = S.l_dec if arch.encoder_decoder and get(S.l_dec) != S.l_dec else S.l
    axes = [s for s in (S.b, sequence, S.cp) if s in grid]
    if chunks == 1 or not axes:
        return
    for point in itertools.product(*(grid[s] for s in axes)):
        at = dict(zip(axes, point))
        b, tokens, cp = (at.get(s, get(s)) for s in (S.b, sequence, S.cp))
        try:
            check_loss_chunks(sympify(b) * sympify(tokens), cp, chunks)
        except InputError as error:
            shown_at = ", ".join(f"{s}={v}" for s, v in at.items())
            raise InputError(f"--grid at {shown_at}: {error}", error.argument) from None


def _check_expert_shard(arch, get, grid: dict, policy: dict) -> None:
    """Under ``--shard`` (HSDP), the expert grid folding into each replica group at every swept point
    of ``m1``, ``cp``, ``ep`` and ``etp`` (``etp`` unset: ``m1``), as ``summary`` checks it at one
    (``parallel.expert.expert_shard_degree``, its home)."""
    axes = [s for s in (S.m1, S.cp, S.ep, S.etp) if s in grid]
    if arch.moe is None or policy.get("shard") is None or not axes:
        return
    for point in itertools.product(*(grid[s] for s in axes)):
        at = dict(zip(axes, point))
        m1, cp, ep, etp = (at.get(s, get(s)) for s in (S.m1, S.cp, S.ep, S.etp))
        try:
            expert_shard_degree(m1, policy["shard"], ep, m1 if etp == S.etp else etp, cp)
        except InputError as error:
            shown_at = ", ".join(f"{s}={v}" for s, v in at.items())
            raise InputError(f"--grid at {shown_at}: {error}", "--shard") from None


CP_READS = (S.cp, S.l, S.s1, S.m1, S.d, S.ep, S.etp)
"""The symbols context parallelism's rules read (``models.training.check_context_parallel``)."""


def _check_context_parallel(arch, get, grid: dict, policy: dict) -> None:
    """Every grid point's context parallelism as ``summary`` checks it: the sequence cut into its
    chunks, a rank's tokens into ``s1``, Ulysses' heads, the expert grid folding onto the ranks;
    each combination of the swept symbols those rules read, once."""
    if S.cp not in grid and get(S.cp) == 1:
        return
    swept = [s for s in CP_READS if s in grid]
    for point in itertools.product(*(grid[s] for s in swept)):
        at = dict(zip(swept, point))
        value = lambda s: at.get(s, get(s))  # noqa: E731
        try:
            run = Training(cp=value(S.cp), l=value(S.l), s1=value(S.s1), m1=value(S.m1), d=value(S.d), ep=value(S.ep),
                           etp=value(S.etp) if value(S.etp) != S.etp else None, allow_long=True,
                           cp_variant=policy.get("cp_variant") or "ring")
            check_context_parallel(arch, run)
        except InputError as error:
            shown = ", ".join(f"{s}={v}" for s, v in at.items())
            raise InputError(f"--grid at {shown}: {error}", error.argument) from None


def run(args) -> int:
    if args.overwrite and args.out is None:
        raise InputError("--overwrite applies to --out only; it would be ignored", "--overwrite")
    if args.out is not None:
        output_file(args.out, "--out", overwrite=args.overwrite, suffixes=(".csv", ".parquet"))
    check_top(args)
    grid = grid_values(args.grid, assignments(args.set, allowed=TRAINING_SYMBOLS))
    framework = frameworks.setup(args)      # a framework file: its values are the defaults the grid replaces
    arch = framework.arch if framework else architecture(args)
    honour_mtp(args, arch)
    refuse_expert_tensor_degree(arch, {**grid, **assignments(args.set, allowed=TRAINING_SYMBOLS)})
    stated = {**training_values(arch), **(framework.values if framework else {})}
    for note in (framework.notes if framework else []) + [
            f"--grid {k} replaces the file's {k}={stated[k]}" for k in grid if framework and k in framework.values]:
        print(f"note: {note}", file=sys.stderr)
    base = {k: v for k, v in stated.items() if k not in grid}
    fixed = resolve(base, args.set, allowed=TRAINING_SYMBOLS)
    chosen = conventions(args)
    grid = _axes_where(args.where, arch, fixed, grid)
    if framework:
        _same_devices(args, framework, arch, fixed, grid)
    check_grid(arch, fixed, grid, chosen, {**frameworks.recipe_fields(args), **options.training_policy(args)})
    options.refuse_idle_schedule(args, grid.get(S.p, [fixed.get(S.p)]), framework,
                                 " there (sweep p from 2, or leave --schedule)")
    with _scheduler(args):
        if S.p in grid and placed_by_p(arch, {**frameworks.recipe_fields(args), **options.training_policy(args)}):
            # which layers a rank holds depends on p (models.placement.Placement): one build per p
            import pandas as pd
            frames = [_sweep(args, arch, {**fixed, S.p: p}, {**grid, S.p: [p]}, chosen, None) for p in grid[S.p]]
            result = _write(_least(pd.concat(frames, ignore_index=True), args), args.out)
        else:
            result = _sweep(args, arch, fixed, grid, chosen, args.out)
    if args.where and (result.empty if args.out is None else _no_rows(result)):
        print(f"note: none of the {grid_size(grid):,} configurations meets "
              f"{' and '.join(args.where)}", file=sys.stderr)
    if args.out is None:
        print(result.to_csv(index=False), end="")
    return 0


def model_sizes(arch) -> dict:
    """The sizes the model fixes, by their symbols: what a ``--where`` may name beside the swept ones."""
    return {S.e: arch.e, S.f: arch.f, S.h: arch.h, S.n_layers: arch.n_layers, S.v: arch.vocab}


def _axes_where(where, arch, fixed: dict, grid: dict) -> dict:
    """``grid`` with each axis cut to the values that meet the ``--where`` conditions of that swept
    symbol alone (``Eq(Mod(96, m1), 0)``), before the grid's points are checked: a point such a
    condition drops is never built, so a rule it would break (5 tensor ranks of 96 heads) refuses
    nothing.  The other conditions (of the fields, of two swept symbols) filter the rows after."""
    names = {str(k): v for k, v in {**model_sizes(arch), **fixed}.items()}
    cut = dict(grid)
    for text in where:
        try:
            condition = parse_condition(text, names)
        except InputError:              # names a field: read once the model is built
            continue
        alone = condition.free_symbols & set(grid)
        if len(alone) == 1 and condition.free_symbols <= alone:
            (symbol,) = alone
            kept = [v for v in cut[symbol] if bool(condition.subs(symbol, v))]
            cut[symbol] = kept or cut[symbol]          # none left: the rows say so after
    return cut


DEVICE_POINTS = 1_000_000
"""The most points of a framework file's grid of degrees that ``_same_devices`` checks: past it
(a grid of layouts no file runs) the sweep asks for a narrower grid instead of walking it."""


def _same_devices(args, framework, arch, fixed: dict, grid: dict) -> None:
    """Each point of a framework file's grid of degrees (``m1 cp p d``) runs on the file's devices
    (or ``--devices``), as ``summary --set`` must (``frameworks.same_devices``): a row for another
    world size answers another job.  A point that a ``--where`` of the swept symbols drops
    (``Eq(m1*d, 8)``) is never built, so it refuses nothing."""
    axes = [s for s in (S.m1, S.cp, S.p, S.d) if s in grid]
    if not axes:
        return
    points = math.prod(len(grid[s]) for s in axes)
    if points > DEVICE_POINTS:
        raise InputError(f"--grid: {points:,} points of {', '.join(map(str, axes))}, more than {DEVICE_POINTS:,} "
                         f"layouts to hold to the devices of {args.framework_name}; narrow the grid of degrees",
                         "--grid")
    keeps = _where_of(args, arch, fixed, axes)
    typed = assignments(args.set, allowed=TRAINING_SYMBOLS)
    for values in itertools.product(*(grid[s] for s in axes)):
        if keeps(*values):
            point = dict(zip(axes, values))
            frameworks.same_devices(framework.values, {**typed, **point}, args, args.framework_name, "--grid at")


def _where_of(args, arch, fixed: dict, axes: list):
    """Whether the ``--where`` conditions of the swept degrees ``axes`` alone keep a point, as
    one compiled function of their values (the conditions that name a field filter the rows after)."""
    names = {str(k): v for k, v in {**model_sizes(arch), **fixed}.items()}
    conditions = []
    for text in args.where:
        try:
            condition = parse_condition(text, names)
        except InputError:              # names a field: it filters the rows after
            continue
        if condition.free_symbols <= set(axes):
            conditions.append(condition)
    if not conditions:
        return lambda *values: True
    return lambdify(axes, And(*conditions), modules="math")


def _no_rows(path) -> bool:
    """Whether the file a sweep wrote holds no row: a CSV its header alone, a Parquet file
    whose footer counts none (neither read through)."""
    if str(path).endswith(".csv"):
        with open(path) as written:
            return len(list(itertools.islice(written, 2))) < 2
    import pyarrow.parquet as pq
    return pq.ParquetFile(path).metadata.num_rows == 0


def model_fields(cost, names, system, chosen) -> dict:
    """The ``SWEEP_FIELDS`` among ``names`` of a model's ``cost``: its totals, active parameters and
    all-to-all bytes (``models.experts``), the step's peak (``models.peak``) and the step-time parts
    on ``system`` (``timing.step``); each built only when asked for."""
    exprs = {name: getattr(cost, name) for name in TOTALS if name in names}
    makers = dict(active_parameters=lambda: cost.active_parameters, alltoall_bytes=lambda: alltoall_bytes(cost),
                  peak_bytes=lambda: peak_bytes(cost, chosen))
    exprs.update({name: make() for name, make in makers.items() if name in names})
    if set(TIMES) & set(names):
        exprs.update({k: v for k, v in step_time_breakdown(cost, system, chosen).items() if k in names})
    return exprs


def _sweep(args, arch, fixed: dict, grid: dict, chosen, out):
    """Build the model with ``fixed`` values and the swept symbols, then evaluate ``--field`` over
    ``grid`` (``numeric.sweep.sweep``): the result, or the file ``out`` written."""
    value = lambda sym: fixed.get(sym, sym)  # noqa: E731
    training = Training(b=value(S.b), l=value(S.l), m1=value(S.m1), s1=value(S.s1), d=value(S.d),
                        p=value(S.p), micro_batches=value(S.n_micro), ep=value(S.ep), etp=value(S.etp),
                        l_dec=value(S.l_dec) if S.l_dec in {**fixed, **grid} else None, cp=value(S.cp),
                        **frameworks.recipe_fields(args), **options.training_policy(args))
    cost = model_cost(arch, training, chosen)
    exprs = model_fields(cost, SWEEP_FIELDS, options.timed_system(args), chosen)
    names = {**{str(k): v for k, v in {**model_sizes(arch), **fixed}.items()}, **exprs}
    constraints = [parse_condition(text, names) for text in args.where]
    chosen_exprs = {column(f): exprs[f] for f in args.field}
    used = set().union(*(x.free_symbols for x in [*chosen_exprs.values(), *constraints]))
    numbers_needed(dict.fromkeys(grid, 1), used, "sweep (every symbol swept or set)")
    grid = {str(k): v for k, v in grid.items()}
    if args.top is not None:
        return _write(_best(args, chosen_exprs, grid, constraints), out)
    chunk = args.chunk or CHUNK
    if args.dask is None:
        return sweep(chosen_exprs, grid=grid, constraints=constraints, chunk_size=chunk, out=out,
                     progress=args.progress)
    from symbolic_cost.numeric.dask_sweep import sweep_dask
    lazy = sweep_dask(chosen_exprs, grid, constraints, chunk_size=chunk)
    if args.progress:
        print(f"sweep: {lazy.npartitions:,} Dask tasks of up to {chunk:,} configurations on "
              f"{'a LocalCluster of ' + args.dask + ' worker processes' if args.dask.isdigit() else args.dask}",
              file=sys.stderr)
    return _write(lazy.compute().reset_index(drop=True), out)


def check_top(args) -> None:
    """``--top`` and ``--by`` come together, and ``--by`` names one of ``--field``'s fields."""
    if (args.top is None) != (args.by is None):
        raise InputError("--top N and --by FIELD go together: the N rows of least FIELD",
                         "--top" if args.by else "--by")
    if args.by is not None and args.by not in args.field:
        raise InputError(f"--by must name one of --field's fields ({', '.join(args.field)}), got {args.by!r}", "--by")


def _best(args, exprs: dict, grid: dict, constraints):
    """The ``--top`` rows of least ``--by`` and the counts (on stderr with ``--progress``): each
    task of the grid's rows keeps its own top rows, on the ``--dask`` cluster
    (``numeric.dask_sweep.best``) or on this machine's cores (``numeric.grid_tasks.top_rows``)."""
    chunk = {} if args.chunk is None else {"chunk_size": args.chunk}
    if args.dask is None:
        from symbolic_cost.numeric.grid_tasks import top_rows
        found = top_rows(exprs, grid, by=column(args.by), top=args.top, constraints=constraints,
                         progress=args.progress, **chunk)
    else:
        from symbolic_cost.numeric.dask_sweep import best
        found = best(exprs, grid, by=column(args.by), top=args.top, constraints=constraints, **chunk)
    if args.progress:
        print(f"sweep: {found.evaluated:,} configurations, {found.kept:,} kept, the {len(found.best):,} of least "
              f"{column(args.by)} written", file=sys.stderr)
    return found.best


def _least(frame, args):
    """With ``--top``: the ``--top`` rows of ``frame`` of least ``--by`` (stable: ties in row order)."""
    if args.top is None:
        return frame
    from symbolic_cost.numeric.grid_tasks import ranked
    return ranked(frame, column(args.by), args.top).reset_index(drop=True)


def _scheduler(args):
    """The Dask cluster of ``--dask`` while the sweeps run (``numeric.dask_cluster.cluster``), or nothing."""
    if args.dask is None:
        return contextlib.nullcontext()
    from symbolic_cost.numeric.dask_cluster import cluster
    return cluster(args.dask, "--dask")


def _write(frame, out):
    """``frame``, or the file ``out`` (.csv or .parquet) it was written to."""
    if out is None:
        return frame
    if out.endswith(".csv"):
        frame.to_csv(out, index=False)
    else:
        frame.to_parquet(out)
    return out
