"""The ``symbolic-cost`` command: tables, formulas and reproductions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sympy import Integer, simplify, sympify
from sympy.parsing.sympy_parser import parse_expr, rationalize, standard_transformations

from . import conventions as conv
from . import reproduce
from . import symbols as S
from .blocks import BUILDERS
from .cost import EXPRESSION_FIELDS
from .evaluate import COST_COLUMNS, comm_fraction, table, totals_table
from .hardware import SYSTEMS, TIME_FIELDS, get_system, times
from .latex import latex, tabular

SEED_CONFIG = {S.b: 1, S.l: 2048, S.e: 12288, S.f: 4 * S.e, S.h: 96, S.m1: 4, S.s1: S.m1,
               S.n_layers: 96, S.es: 2, S.es_mask: 1}
"""Default configuration of ``table``: the GPT-3-scale layer of the LBNL 2024 tables,
with Megatron's sequence parallelism ``s1 = m1``."""

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


def build(block: str, values: dict, conventions, bias: bool, qkv_bias: bool):
    """A block from a value map; symbols without a value stay symbols."""
    get = lambda s: values.get(s, s)  # noqa: E731
    common = dict(b=get(S.b), l=get(S.l), e=get(S.e), m1=get(S.m1), s1=get(S.s1),
                  es=get(S.es), es_mask=get(S.es_mask), conventions=conventions)
    if block == "mlp":
        return BUILDERS["mlp"](f=get(S.f), bias=bias, **common)
    if block == "layer":
        return BUILDERS["layer"](f=get(S.f), h=get(S.h), bias=bias, qkv_bias=qkv_bias, **common)
    return BUILDERS["attention"](h=get(S.h), qkv_bias=qkv_bias, out_bias=bias, **common)


def _cmd_table(args) -> int:
    values = resolve(SEED_CONFIG, args.set)
    conventions = conv.get(args.conventions)
    block = build(args.block, values, conventions, not args.no_bias, not args.no_qkv_bias)
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
    name, ``comm_fwd``/``comm_bwd`` (reported collective volume) or a time column."""
    field = COST_COLUMNS.get(field, field)
    rows = [block[row]] if row else list(block)
    if field in EXPRESSION_FIELDS:
        return sum((getattr(r, field) for r in rows), Integer(0))
    if field in ("comm_fwd", "comm_bwd"):
        return sum((c.volume for r in rows for c in r.collectives if c.pass_ == field[-3:]),
                   Integer(0))
    if field in TIME_FIELDS:
        if not row and field not in _ADDITIVE_TIMES:
            raise ValueError(f"--field {field} is a ratio; choose one row with --row")
        return sum((times(r, system, conventions)[field] for r in rows), Integer(0))
    known = dict.fromkeys([*EXPRESSION_FIELDS, *COST_COLUMNS, "comm_fwd", "comm_bwd", *TIME_FIELDS])
    raise ValueError(f"unknown --field {field!r}; known: {', '.join(known)}")


def _cmd_formula(args) -> int:
    values = resolve({}, args.set)
    conventions = conv.get(args.conventions)
    block = build(args.block, values, conventions, not args.no_bias, not args.no_qkv_bias)
    if args.row:
        block[args.row]  # a clear KeyError message for an unknown row
    expr = _field_expr(block, args.field, args.row, get_system(args.system), conventions)
    expr = simplify(expr)
    print(latex(expr) if args.latex else expr)
    return 0


def _cmd_reproduce(args) -> int:
    failed = False
    for name in args.names or reproduce.names():
        matched, total = reproduce.run(name, Path(args.reports))
        print(f"{name}: matched {matched}/{total}")
        failed |= matched != total
    return 1 if failed else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="symbolic-cost", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def block_options(p):
        p.add_argument("--block", choices=sorted(BUILDERS), default="mlp")
        p.add_argument("--conventions", default="default", help=f"one of {', '.join(conv.PRESETS)}")
        p.add_argument("--system", default="a100", help=f"one of {', '.join(SYSTEMS)}")
        p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                       help=f"fix a symbol ({', '.join(S.BY_NAME)}); values may be formulas")
        p.add_argument("--no-bias", action="store_true", help="linear layers without bias")
        p.add_argument("--no-qkv-bias", action="store_true", help="QKV projection without bias")

    p = sub.add_parser("table", help="per-row table for one configuration")
    block_options(p)
    p.add_argument("--format", choices=["text", "csv", "json", "latex"], default="text")
    p.set_defaults(run=_cmd_table)

    p = sub.add_parser("formula", help="one field of a block as a simplified formula")
    block_options(p)
    p.add_argument("--field", default="flops_fwd")
    p.add_argument("--row", help="one row instead of the block total")
    p.add_argument("--latex", action="store_true")
    p.set_defaults(run=_cmd_formula)

    p = sub.add_parser("reproduce", help="recompute reproduced tables and rewrite their reports")
    p.add_argument("names", nargs="*", help=f"default: all ({', '.join(reproduce.names())})")
    p.add_argument("--reports", default="reports", help="folder for the reports (default: reports)")
    p.set_defaults(run=_cmd_reproduce)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, KeyError) as error:
        message = error.args[0] if error.args else str(error)
        print(f"symbolic-cost: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
