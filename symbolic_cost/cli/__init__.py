"""The ``symbolic-cost`` command: tables, formulas and reproductions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sympy import Integer, simplify, sympify
from sympy.parsing.sympy_parser import parse_expr, rationalize, standard_transformations

from symbolic_cost import conventions as conv
from symbolic_cost import reproduce
from symbolic_cost import symbols as S
from symbolic_cost.blocks import BUILDERS
from symbolic_cost.cost import EXPRESSION_FIELDS
from symbolic_cost.numeric.tables import COST_COLUMNS, comm_fraction, table, totals_table
from symbolic_cost import analysis
from symbolic_cost.timing.hardware import SYSTEMS, TIME_FIELDS, comm_time, get_system, step_time, times
from symbolic_cost.analysis.latex import latex, paper_form, tabular

SEED_CONFIG = {S.b: 1, S.l: 2048, S.e: 12288, S.f: 4 * S.e, S.h: 96, S.m1: 4, S.s1: S.m1,
               S.n_layers: 96, S.es: 2, S.es_mask: 1}
"""Default configuration of ``table``: the GPT-3-scale layer of the LBNL 2024 tables,
with Megatron's sequence parallelism ``s1 = m1``."""

FORMULA_CONFIG = {S.es: 2, S.es_mask: 1}
"""Default of ``formula``, ``crossover``: every dimension symbolic, 2-byte values and
1-byte masks (``--set es=es`` keeps element sizes symbolic too)."""

_ADDITIVE_TIMES = [name for name in TIME_FIELDS if name != "intensity" and not name.startswith("frac")]


def parse_set(text: str) -> tuple:
    """``"e=4096"`` -> ``(e, 4096)``; decimals become exact Rationals.

    >>> parse_set("f=4*e")
    (f, 4*e)
    >>> parse_set("es=0.5")
    (es, 1/2)
    """
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not value.strip():
        raise ValueError(f"--set expects name=value, got {text!r}")
    if name not in S.BY_NAME:
        raise ValueError(f"--set: unknown name {name!r}; known: {', '.join(S.BY_NAME)}")
    try:
        expr = parse_expr(value, local_dict=dict(S.BY_NAME),
                          transformations=standard_transformations + (rationalize,))
    except Exception:
        raise ValueError(f"--set {name}: cannot read {value!r} as a number or formula") from None
    unknown = sympify(expr).free_symbols - set(S.ALL)
    if unknown:
        raise ValueError(f"--set {name}: unknown name(s) {', '.join(map(str, unknown))} in {value!r}")
    return S.BY_NAME[name], expr


def resolve(base: dict, sets: list[str]) -> dict:
    """Apply ``--set`` overrides to ``base`` and resolve values that refer to others
    (``f = 4*e`` follows ``--set e=...``)."""
    values = dict(base)
    values.update(parse_set(text) for text in sets)
    for _ in range(len(values)):
        values = {k: sympify(v).subs(values) for k, v in values.items()}
    return values


def build(block: str, values: dict, conventions, bias: bool, qkv_bias: bool, flash: bool = False):
    """A block from a value map; symbols without a value stay symbols."""
    get = lambda s: values.get(s, s)  # noqa: E731
    common = dict(b=get(S.b), l=get(S.l), e=get(S.e), m1=get(S.m1), s1=get(S.s1),
                  es=get(S.es), es_mask=get(S.es_mask), conventions=conventions)
    if block == "mlp":
        return BUILDERS["mlp"](f=get(S.f), bias=bias, **common)
    if block == "layer":
        return BUILDERS["layer"](f=get(S.f), h=get(S.h), bias=bias, qkv_bias=qkv_bias, flash=flash,
                                 **common)
    return BUILDERS["attention"](h=get(S.h), qkv_bias=qkv_bias, out_bias=bias, flash=flash, **common)


def _build(args, values):
    return build(args.block, values, conv.get(args.conventions), not args.no_bias,
                 not args.no_qkv_bias, args.flash)


def _cmd_table(args) -> int:
    values = resolve(SEED_CONFIG, args.set)
    conventions = conv.get(args.conventions)
    block = _build(args, values)
    frame = table(block, args.system, conventions)
    if args.format == "csv":
        print(frame.to_csv(index=False), end="")
    elif args.format == "json":
        print(frame.to_json(orient="records", indent=1))
    elif args.format == "latex":
        print(tabular(frame))
    else:
        depth = values[S.n_layers]
        print(f"{args.block}: " + ", ".join(f"{k}={v}" for k, v in values.items()))
        print(f"conventions {args.conventions}, system {args.system}; TFLOP, GB (1e9 B), ms\n")
        print(frame.to_string(index=False, float_format=lambda x: f"{x:.6f}"))
        print(f"\nsum x depth ({depth}):")
        print(totals_table(block, args.system, conventions, depth).to_string(
            float_format=lambda x: f"{x:.6f}"))
        print(f"\ntime spent in comms (forward): {float(comm_fraction(block, args.system, conventions)):.6f}")
    return 0


def _field_expr(block, field: str, row: str | None, system, conventions):
    """A field summed over the block's rows (or of one row): a Cost field, its table
    name, ``comm_fwd``/``comm_bwd`` (reported collective volume), a time column, or
    ``time`` (forward plus backward seconds, the quantity ``optimize`` minimises)."""
    field = COST_COLUMNS.get(field, field)
    rows = [block[row]] if row else list(block)
    if field in EXPRESSION_FIELDS:
        return sum((getattr(r, field) for r in rows), Integer(0))
    if field in ("comm_fwd", "comm_bwd"):
        return sum((c.volume for r in rows for c in r.collectives if c.pass_ == field[-3:]),
                   Integer(0))
    if field == "time":
        return step_time(rows, system, conventions)
    if field in TIME_FIELDS:
        if not row and field not in _ADDITIVE_TIMES:
            raise ValueError(f"--field {field} is a ratio; choose one row with --row")
        return sum((times(r, system, conventions)[field] for r in rows), Integer(0))
    known = dict.fromkeys([*EXPRESSION_FIELDS, *COST_COLUMNS, "comm_fwd", "comm_bwd", "time",
                           *TIME_FIELDS])
    raise ValueError(f"unknown --field {field!r}; known: {', '.join(known)}")


def _show(expr, args) -> None:
    print(latex(expr) if args.latex else expr)


def _cmd_formula(args) -> int:
    values = resolve(FORMULA_CONFIG, args.set)
    conventions = conv.get(args.conventions)
    block = _build(args, values)
    if args.row:
        block[args.row]  # a clear KeyError message for an unknown row
    expr = simplify(_field_expr(block, args.field, args.row, get_system(args.system), conventions))
    at = dict(parse_set(text) for text in args.at)
    if args.leading:
        lead, rest = analysis.leading_terms(expr, args.leading.split(","), with_remainder=True)
        _show(lead, args)
        if args.remainder:
            _show(rest, args)
        return 0
    if args.diff:
        expr = analysis.derivative(expr, args.diff)
    if args.elasticity:
        expr = analysis.elasticity(expr, args.elasticity)
    if at:
        expr = simplify(expr.subs(at))
    if args.by:
        expr = paper_form(expr, parse_set(f"b={args.by}")[1])
    _show(expr, args)
    if expr.is_number and not expr.is_Integer:
        print(f"= {float(expr):.6g}")
    return 0


def _cmd_crossover(args) -> int:
    values = resolve(FORMULA_CONFIG, args.set)
    conventions = conv.get(args.conventions)
    system = get_system(args.system)
    sides = []
    for name in (args.a, args.b):
        args.block = name
        sides.append(_field_expr(_build(args, values), args.field, None, system, conventions))
    root = analysis.crossover(*sides, args.solve_for)
    print(f"{args.a} {args.field} = {args.b} {args.field} at {args.solve_for} =")
    _show(root, args)
    if root.is_number:
        print(f"= {float(root):.6g}")
    return 0


def _cmd_optimize(args) -> int:
    over = S.BY_NAME.get(args.over)
    if over is None:
        raise ValueError(f"--over: unknown name {args.over!r}; known: {', '.join(S.BY_NAME)}")
    values = resolve(SEED_CONFIG, args.set + [f"{over}={over}"])
    conventions = conv.get(args.conventions)
    block = _build(args, values)
    expr = _field_expr(block, args.field, None, get_system(args.system), conventions)
    candidates = analysis.valid_values(block, over, args.max)
    found = analysis.optimum(expr, over, candidates)
    print(f"minimise {args.field} of {args.block} over {over} (system {args.system})")
    for value in candidates:
        mark = "  <- best" if value == found.best else ""
        print(f"  {over} = {value:>4}: {float(found.values[value]):.6g}{mark}")
    print(f"d/d{over} on the branch active at {over} = {found.best}:")
    _show(found.derivative, args)
    if found.relaxed is None:
        print(f"relaxed: no interior minimum on that branch")
    else:
        region = "same branch" if found.same_region else "outside that branch (e.g. past the NVLink domain)"
        print(f"relaxed optimum {over} = {found.relaxed} = {float(found.relaxed):.6g} ({region})")
    return 0


def _cmd_reproduce(args) -> int:
    failed = False
    for name in args.names or reproduce.names():
        outcome = reproduce.run(name, Path(args.reports))
        print(outcome.line)
        failed |= not outcome.ok
    return 1 if failed else 0


def _cmd_scheme(args) -> int:
    from symbolic_cost.parallel.sequence import megatron_sp, ring_attention, ulysses
    values = resolve({**FORMULA_CONFIG, S.m1: 1}, args.set)
    get = lambda sym: values.get(sym, sym)  # noqa: E731
    conventions = conv.get(args.conventions)
    dims = dict(b=get(S.b), l=get(S.l), e=get(S.e), h=get(S.h), es=get(S.es), conventions=conventions)
    if args.scheme == "ulysses":
        scheme = ulysses(s1=get(S.s1), m1=get(S.m1), flash=args.flash, es_mask=get(S.es_mask), **dims)
    elif args.scheme == "ring-attention":
        scheme = ring_attention(c=get(S.c), m1=get(S.m1), causal=not args.no_causal,
                                balanced=not args.contiguous, **dims)
    else:
        scheme = megatron_sp(m1=get(S.m1), flash=args.flash, es_mask=get(S.es_mask), **dims)
    system = get_system(args.system)
    show = lambda x: latex(x) if args.latex else str(simplify(x))  # noqa: E731
    print(f"{scheme.name} over {scheme.degree} devices; per device unless noted")
    print("tensors (shape; bytes):")
    for t in scheme.tensors:
        print(f"  {t.name}: ({', '.join(map(str, t.shape))}); {show(t.bytes)}")
    for pass_ in ("fwd", "bwd"):
        print(f"flops_{pass_}: {show(scheme.flops(pass_))}; summed over devices: "
              f"{show(scheme.degree * scheme.flops(pass_))}")
    print(f"activations kept: {show(scheme.block.total('act_buffer'))}")
    print(f"weights: {show(scheme.block.total('weights'))}")
    print("collectives (kind, group, pass, row: volume; time on " + args.system + "):")
    for row in scheme.block:
        for c in row.collectives:
            repeat = f" x{c.repeats}" if c.repeats != 1 else ""
            print(f"  {c.kind}{repeat}, {c.group}, {c.pass_}, {row.name}: {show(c.volume)}; "
                  f"{show(comm_time(c, system, conventions))}")
    return 0


def _number(expr):
    """JSON value of an expression: an int, a float, or the formula as a string."""
    expr = simplify(sympify(expr))
    if expr.is_Integer:
        return int(expr)
    return float(expr) if expr.is_number else str(expr)


def _architecture(args):
    """The model of ``--preset`` or ``--hf-config``."""
    from symbolic_cost.models import config as hf
    return hf.load(args.hf_config) if args.hf_config else hf.preset(args.preset)


def _training_defaults(arch) -> dict:
    """One sequence of the model's context (or 2048) on one device."""
    return {S.b: 1, S.l: arch.context or 2048, S.m1: 1, S.s1: 1, S.d: 1, S.p: 1, S.n_micro: 1}


def _summary(args):
    from symbolic_cost.models import Training, model_cost
    arch = _architecture(args)
    values = resolve(_training_defaults(arch), args.set)
    training = Training(b=values[S.b], l=values[S.l], m1=values[S.m1], s1=values[S.s1], d=values[S.d],
                        p=values[S.p], micro_batches=values[S.n_micro], precision=args.precision,
                        zero=args.zero, distributed_optimizer=args.distributed_optimizer,
                        recompute=args.recompute, flash=args.flash)
    conventions = conv.get(args.conventions)
    return arch, training, model_cost(arch, training, conventions), conventions


def _cmd_summary(args) -> int:
    import json
    arch, training, cost, conventions = _summary(args)
    system = get_system(args.system)
    fields = ["parameters", "parameters_per_device", "flops_fwd", "flops_bwd", "flops_recompute",
              "model_flops_fwd", "model_flops_bwd", "weight_bytes", "gradient_bytes", "optimizer_bytes",
              "activation_bytes", "memory_bytes", "bubble"]
    report = {name: _number(getattr(cost, name)) for name in fields}
    from symbolic_cost.models import cluster_volume, world_size
    report["world_size"] = _number(world_size(training))
    report["collectives"] = [
        {"dimension": dim, "kind": c.kind, "group": _number(c.group), "pass": c.pass_,
         "count": _number(c.repeats), "volume_bytes": _number(c.volume),
         "cluster_volume_bytes": _number(cluster_volume(cost, dim, c)),
         "time_s": _number(comm_time(c, system, conventions))} for dim, c in cost.collectives]
    if args.json:
        print(json.dumps({"model": arch.name, **report}, indent=1))
        return 0
    gib = lambda x: f"{x / 2**30:.3f} GiB" if isinstance(x, (int, float)) else x  # noqa: E731
    tf = lambda x: f"{x / 1e12:.3f} TFLOP" if isinstance(x, (int, float)) else x  # noqa: E731
    t = training
    print(f"{arch.name}: b={t.b} l={t.l} m1={t.m1} s1={t.s1} d={t.d} p={t.p} micro-batches="
          f"{t.micro_batches} {t.precision} zero={t.zero} recompute={t.recompute} flash={t.flash}")
    print(f"parameters: {report['parameters']:,}" if isinstance(report["parameters"], int)
          else f"parameters: {report['parameters']}")
    print(f"parameters per device: {report['parameters_per_device']}")
    print("FLOPs per iteration, busiest device: forward {}, backward {}, recompute {}".format(
        tf(report["flops_fwd"]), tf(report["flops_bwd"]), tf(report["flops_recompute"])))
    print("model FLOPs per iteration (all devices): forward {}, backward {}".format(
        tf(report["model_flops_fwd"]), tf(report["model_flops_bwd"])))
    print("memory per device: weights {}, gradients {}, optimizer {}, activations {}; total {}".format(
        *(gib(report[k]) for k in ("weight_bytes", "gradient_bytes", "optimizer_bytes",
                                    "activation_bytes", "memory_bytes"))))
    print(f"pipeline bubble: {report['bubble']}")
    print(f"collectives per iteration: busiest device (time on {args.system}); "
          f"whole job of {report['world_size']} devices")
    for c in report["collectives"]:
        print(f"  {c['dimension']:8} {c['kind']:13} group {c['group']} {c['pass']} x{c['count']}: "
              f"{gib(c['volume_bytes'])}, {c['time_s']} s; job {gib(c['cluster_volume_bytes'])}")
    return 0


def _cmd_profile(args) -> int:
    """MACs are counted as ``mnk`` per product (the ``2mnk`` convention, halved)."""
    from symbolic_cost.tools.deepspeed_profiler import model_tree, render
    args.conventions = conv.get(args.conventions).but(matmul_flops="2mnk")
    _, _, cost, _ = _summary(args)
    print(render(model_tree(cost), args.depth, args.top))
    return 0


SWEEP_FIELDS = ("parameters", "flops_fwd", "flops_bwd", "weight_bytes", "gradient_bytes", "optimizer_bytes",
                "activation_bytes", "memory_bytes", "total", "compute", "tensor_comm", "bubble",
                "pipeline_comm", "data_comm")


def _parse_grid(text: str):
    name, sep, values = text.partition("=")
    if not sep or name.strip() not in ("b", "l", "m1", "s1", "d", "p", "n_micro"):
        raise ValueError(f"--grid expects NAME=V1,V2,... with NAME one of b, l, m1, s1, d, p, n_micro; got {text!r}")
    try:
        return name.strip(), [float(v) for v in values.split(",")]
    except ValueError:
        raise ValueError(f"--grid {name}: values must be numbers, got {values!r}") from None


def _cmd_sweep(args) -> int:
    from symbolic_cost.models import Training, model_cost
    from symbolic_cost.timing.step import step_time_breakdown
    from symbolic_cost.numeric.sweep import sweep
    grid = dict(_parse_grid(g) for g in args.grid)
    arch = _architecture(args)
    fixed = _training_defaults(arch)
    fixed.update(parse_set(t) for t in args.set)
    value = lambda sym: sym if str(sym) in grid else fixed[sym]  # noqa: E731
    training = Training(b=value(S.b), l=value(S.l), m1=value(S.m1), s1=value(S.s1), d=value(S.d),
                        p=value(S.p), micro_batches=value(S.n_micro), precision=args.precision,
                        zero=args.zero, recompute=args.recompute, flash=args.flash)
    conventions = conv.get(args.conventions)
    cost = model_cost(arch, training, conventions)
    exprs = {name: getattr(cost, name) for name in SWEEP_FIELDS[:8]}
    exprs.update(step_time_breakdown(cost, args.system, conventions))
    fields = args.field.split(",") if args.field else list(SWEEP_FIELDS)
    unknown = [f for f in fields if f not in exprs]
    if unknown:
        raise ValueError(f"--field: unknown {', '.join(unknown)}; known: {', '.join(SWEEP_FIELDS)}")
    names = {**S.BY_NAME, **exprs}
    constraints = []
    for text in args.where:
        try:
            constraints.append(parse_expr(text, local_dict=names))
        except Exception:
            raise ValueError(f"--where: cannot read {text!r} (e.g. 'memory_bytes <= 80e9')") from None
    result = sweep({f: exprs[f] for f in fields}, grid=grid, constraints=constraints, chunk_size=args.chunk,
                   out=args.out, progress=args.progress)
    if args.out is None:
        print(result.to_csv(index=False), end="")
    return 0


def _cmd_search(args) -> int:
    from symbolic_cost.numeric.search import search
    arch = _architecture(args)
    found = search(arch, args.devices, args.system, global_batch=args.global_batch,
                   seq=args.seq or arch.context or 2048, top=args.top, zero=args.zero, flash=not args.no_flash,
                   conventions=conv.get(args.conventions))
    print(f"{arch.name} on {args.devices} x {args.system}: {found.evaluated} layouts, {found.fitting} fit; "
          f"best {len(found.best)} by step time (s), memory in GB")
    table = found.best.assign(memory=found.best["memory"] / 1e9)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    return 0


def _cmd_lstm(args) -> int:
    from symbolic_cost.tools.lstm import LSTM, memory, memory_overflow, parameters, stage_times, step_time
    conventions = conv.get(args.conventions)
    if args.system == "deepflow-seed-002":
        from symbolic_cost.reproduce.deepflow_lstm import SYSTEM as system
    else:
        system = get_system(args.system)
    model = LSTM(batch=args.batch, steps=args.steps, hidden=args.hidden, vocab=args.vocab, layers=args.layers,
                 gates=args.gates, projection=args.projection, projected=args.projected,
                 element_bytes=args.element_bytes, dp=args.dp, lp=args.lp, hlp=args.hlp)
    print(f"LSTM language model on {system.name}: {float(parameters(model, conventions)) / 1e9:.4g} billion "
          f"parameters, step time {float(step_time(model, system, conventions)):.6g} s")
    print("stage times (s):")
    for name, value in stage_times(model, system, conventions).items():
        print(f"  {name:<16} {float(value):.6g}")
    print("memory per data shard (GiB): weights, activations, pointwise")
    for part, kinds in memory(model, conventions).items():
        print(f"  {part:<16} " + ", ".join(f"{float(v) / 2**30:.4g}" for v in kinds.values()))
    if system.hbm_capacity != 0:
        print(f"memory overflow (needed / capacity): {float(memory_overflow(model, system, conventions)):.4g}")
    return 0


def _cmd_report(args) -> int:
    try:
        import matplotlib  # noqa: F401  (checked here so the message is ours)
    except ImportError:
        raise ValueError("the report's plots need matplotlib: "
                         "python -m pip install 'symbolic_cost[report]'") from None
    from symbolic_cost.report import generate
    generate(Path(args.out), small=args.small)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="symbolic-cost", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def block_options(p, with_block=True, default_block="mlp"):
        if with_block:
            p.add_argument("--block", choices=sorted(BUILDERS), default=default_block)
        p.add_argument("--conventions", default="default", help=f"one of {', '.join(conv.PRESETS)}")
        p.add_argument("--system", default="a100", help=f"one of {', '.join(SYSTEMS)}")
        p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                       help=f"fix a symbol ({', '.join(S.BY_NAME)}); values may be formulas")
        p.add_argument("--no-bias", action="store_true", help="linear layers without bias")
        p.add_argument("--no-qkv-bias", action="store_true", help="QKV projection without bias")
        p.add_argument("--flash", action="store_true", help="fused flash attention (no l^2 kept)")
        p.add_argument("--kernel-time", choices=["roofline", "tiled"],
                       help="override the conventions' time model: tiled GEMM traffic, latency, launches")

    p = sub.add_parser("table", help="per-row table for one configuration")
    block_options(p)
    p.add_argument("--format", choices=["text", "csv", "json", "latex"], default="text")
    p.set_defaults(run=_cmd_table)

    p = sub.add_parser("formula", help="one field of a block as a simplified formula")
    block_options(p)
    p.add_argument("--field", default="flops_fwd")
    p.add_argument("--row", help="one row instead of the block total")
    p.add_argument("--leading", metavar="SYMBOLS", help="leading terms as these (comma-separated) grow")
    p.add_argument("--remainder", action="store_true", help="with --leading: also the exact rest")
    p.add_argument("--diff", metavar="SYMBOL", help="derivative with respect to SYMBOL")
    p.add_argument("--elasticity", metavar="SYMBOL", help="d log C / d log SYMBOL")
    p.add_argument("--at", action="append", default=[], metavar="NAME=VALUE",
                   help="evaluate the result at a point")
    p.add_argument("--by", metavar="MONOMIAL", help="factor out MONOMIAL, e.g. b*l*e")
    p.add_argument("--latex", action="store_true")
    p.set_defaults(run=_cmd_formula)

    p = sub.add_parser("crossover", help="where two blocks' costs are equal")
    block_options(p, with_block=False)
    p.add_argument("--a", choices=sorted(BUILDERS), default="attention")
    p.add_argument("--b", choices=sorted(BUILDERS), default="mlp")
    p.add_argument("--field", default="flops_fwd")
    p.add_argument("--for", dest="solve_for", default="l", metavar="SYMBOL")
    p.add_argument("--latex", action="store_true")
    p.set_defaults(run=_cmd_crossover)

    p = sub.add_parser("optimize", help="the parallel degree that minimises a block's time")
    block_options(p, default_block="layer")
    p.add_argument("--over", default="m1", metavar="SYMBOL")
    p.add_argument("--field", default="time")
    p.add_argument("--max", type=int, default=64, help="largest degree tried (default 64)")
    p.add_argument("--latex", action="store_true")
    p.set_defaults(run=_cmd_optimize)

    p = sub.add_parser("reproduce", help="recompute reproduced tables and rewrite their reports")
    p.add_argument("names", nargs="*", help=f"default: all ({', '.join(reproduce.names())})")
    p.add_argument("--reports", default="reports", help="folder for the reports (default: reports)")
    p.set_defaults(run=_cmd_reproduce)

    p = sub.add_parser("scheme", help="a sequence-parallel scheme: shapes, FLOPs, memory, collectives")
    p.add_argument("--scheme", choices=["megatron-sp", "ulysses", "ring-attention"], default="ulysses")
    p.add_argument("--conventions", default="default", help=f"one of {', '.join(conv.PRESETS)}")
    p.add_argument("--system", default="h100", help=f"one of {', '.join(SYSTEMS)}")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="fix a symbol; m1 defaults to 1 (no tensor parallelism)")
    p.add_argument("--flash", action="store_true", help="fused attention (Ulysses, Megatron SP)")
    p.add_argument("--no-causal", action="store_true", help="ring attention without a causal mask")
    p.add_argument("--contiguous", action="store_true", help="ring attention without zig-zag balancing")
    p.add_argument("--latex", action="store_true")
    p.set_defaults(run=_cmd_scheme)

    p = sub.add_parser("summary", help="whole-model totals for one configuration")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", help="gpt2, gpt3-175b, bert-base-uncased, llama-2-7b, mistral-7b")
    source.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="b, l, m1, s1, d, p, n_micro (defaults: 1, the model's context or 2048, 1...)")
    p.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="bf16")
    p.add_argument("--zero", type=int, choices=[0, 1, 2, 3], default=0)
    p.add_argument("--distributed-optimizer", action="store_true")
    p.add_argument("--recompute", choices=["none", "selective", "full"], default="none")
    p.add_argument("--flash", action="store_true")
    p.add_argument("--conventions", default="default", help=f"one of {', '.join(conv.PRESETS)}")
    p.add_argument("--system", default="h100", help=f"one of {', '.join(SYSTEMS)}")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_cmd_summary)
    p = sub.add_parser("profile", parents=[], help="the model as a module tree: params, MACs, shares")
    for action in sub.choices["summary"]._actions[1:]:
        if action.dest not in ("json",):
            p._add_action(action)
    p.add_argument("--depth", type=int, default=-1, help="deepest level shown (default: all)")
    p.add_argument("--top", type=int, default=3, help="modules listed per depth (default 3)")
    p.set_defaults(run=_cmd_profile)

    p = sub.add_parser("sweep", help="whole-model totals over a grid of configurations, to CSV")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset")
    source.add_argument("--hf-config", metavar="PATH")
    p.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...", required=True,
                   help="a swept symbol (b, l, m1, s1, d, p, n_micro) and its values; repeatable")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="fixed values")
    p.add_argument("--field", help=f"comma-separated outputs (default all: {', '.join(SWEEP_FIELDS)})")
    p.add_argument("--where", action="append", default=[], metavar="EXPR",
                   help="keep rows where EXPR holds, e.g. 'memory_bytes <= 80e9' or 'Eq(Mod(96, m1), 0)'")
    p.add_argument("--out", help="write to a .csv or .parquet file instead of stdout")
    p.add_argument("--chunk", type=int, default=1_000_000, help="configurations per chunk")
    p.add_argument("--progress", action="store_true", help="report progress on stderr")
    p.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="bf16")
    p.add_argument("--zero", type=int, choices=[0, 1, 2, 3], default=0)
    p.add_argument("--recompute", choices=["none", "selective", "full"], default="none")
    p.add_argument("--flash", action="store_true")
    p.add_argument("--conventions", default="default")
    p.add_argument("--system", default="h100")
    p.set_defaults(run=_cmd_sweep)

    p = sub.add_parser("search", help="the fastest parallel layouts that fit in memory")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset")
    source.add_argument("--hf-config", metavar="PATH")
    p.add_argument("--devices", type=int, required=True)
    p.add_argument("--system", default="h100")
    p.add_argument("--global-batch", type=int, default=1024, help="sequences per step (default 1024)")
    p.add_argument("--seq", type=int, help="sequence length (default: the model's context)")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--zero", type=int, choices=[0, 1, 2, 3], default=1)
    p.add_argument("--no-flash", action="store_true")
    p.add_argument("--conventions", default="default")
    p.set_defaults(run=_cmd_search)

    p = sub.add_parser("lstm", help="an LSTM language model on the kernel-level time model (DeepFlow)")
    for name, default in (("batch", 512), ("steps", 20), ("hidden", 19968), ("vocab", 800000), ("layers", 2),
                          ("gates", 4), ("projection", 2048), ("element-bytes", 4), ("dp", 1), ("lp", 1), ("hlp", 1)):
        p.add_argument(f"--{name}", type=int, default=default, help=f"default {default}")
    p.add_argument("--projected", action="store_true", help="run the projection layer (width --projection)")
    p.add_argument("--conventions", default="deepflow-2019", help=f"one of {', '.join(conv.PRESETS)}")
    p.add_argument("--system", default="deepflow-seed-002",
                   help=f"deepflow-seed-002 (the power-budget chip of seed 002) or one of {', '.join(SYSTEMS)}")
    p.set_defaults(run=_cmd_lstm)

    p = sub.add_parser("report", help="regenerate every report: tables, formula sheets, plots")
    p.add_argument("--out", default="reports", help="folder (default: reports)")
    p.add_argument("--small", action="store_true", help="one model, few points (for CI)")
    p.set_defaults(run=_cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if getattr(args, "kernel_time", None):
            args.conventions = conv.get(args.conventions).but(kernel_time=args.kernel_time)
        return args.run(args)
    except BrokenPipeError:            # output piped into `head` and closed: not an error
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, KeyError) as error:
        message = error.args[0] if error.args else str(error)
        print(f"symbolic-cost: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
