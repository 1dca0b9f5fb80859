"""Whole-model totals over a grid of configurations, as CSV (or Parquet) rows.

Values are in base units, which the column names state: ``*_bytes`` in bytes,
``flops_*`` in FLOPs, the step-time parts (``*_s``) in seconds.
"""

from __future__ import annotations

import argparse

from symbolic_cost import symbols as S
from symbolic_cost.cli import options
from symbolic_cost.cli.summary import SETTABLE
from symbolic_cost.cli.values import (TRAINING_SYMBOLS, architecture, conventions, parse_condition, resolve,
                                      training_values)
from symbolic_cost.models import Training, model_cost
from symbolic_cost.numeric.sweep import sweep
from symbolic_cost.timing.step import step_time_breakdown

TOTALS = ("parameters", "flops_fwd", "flops_bwd", "weight_bytes", "gradient_bytes", "optimizer_bytes",
          "activation_bytes", "memory_bytes")
TIMES = ("total", "compute", "tensor_comm", "bubble", "pipeline_comm", "data_comm")
SWEEP_FIELDS = TOTALS + TIMES
"""What ``--field`` may name: ``ModelCost`` totals and the parts of ``step_time_breakdown``."""

EXAMPLES = [
    "symbolic-cost sweep --preset gpt2 --grid b=1,2,4,8 --grid m1=1,2,4 --field memory_bytes,total",
    "symbolic-cost sweep --preset gpt2 --grid b=1,2,4,8 l=512,1024,2048 --where 'memory_bytes <= 80e9' "
    "--out sweep.csv --progress",
]


def fields_type(text: str) -> list[str]:
    """``--field``'s check: comma-separated names from ``SWEEP_FIELDS``."""
    names = [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in SWEEP_FIELDS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}; known: {', '.join(SWEEP_FIELDS)}")
    return names


def grid_type(text: str) -> tuple[str, list[float]]:
    """``--grid``'s check: ``NAME=V1,V2,...`` with NAME in ``TRAINING_SYMBOLS``."""
    name, sep, values = text.partition("=")
    known = ", ".join(map(str, TRAINING_SYMBOLS))
    if not sep or name.strip() not in map(str, TRAINING_SYMBOLS):
        raise argparse.ArgumentTypeError(f"expects NAME=V1,V2,... with NAME one of {known}; got {text!r}")
    try:
        return name.strip(), [float(v) for v in values.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: values must be numbers, got {values!r}") from None


def add_arguments(parser) -> None:
    options.model(parser)
    options.option(parser, "--grid", type=grid_type, action="extend", nargs="+", required=True,
                   metavar="NAME=V1,V2,...", help="swept symbols (b, l, m1, s1, d, p, n_micro) and their "
                   "values; several after one --grid or repeated")
    options.settings(parser, help=SETTABLE)
    options.option(parser, "--field", type=fields_type, default=list(SWEEP_FIELDS), metavar="F1,F2,...",
                   help="comma-separated outputs, any of: " + ", ".join(SWEEP_FIELDS) + " (default: all)")
    options.option(parser, "--where", action="append", default=[], metavar="EXPR",
                   help="keep rows where EXPR holds, e.g. 'memory_bytes <= 80e9' or 'Eq(Mod(96, m1), 0)'")
    options.option(parser, "--out", help="write to a .csv or .parquet file instead of stdout")
    options.option(parser, "--chunk", type=int, default=1_000_000, help="configurations per chunk")
    options.option(parser, "--progress", action="store_true", help="report progress on stderr")
    options.training(parser)
    options.counting(parser)


def column(field: str) -> str:
    """The output column of a field: the step-time parts get ``_s`` (seconds)."""
    return f"{field}_s" if field in TIMES else field


def run(args) -> int:
    grid = dict(args.grid)
    arch = architecture(args)
    fixed = resolve(training_values(arch), args.set, allowed=TRAINING_SYMBOLS)
    value = lambda sym: sym if str(sym) in grid else fixed[sym]  # noqa: E731
    training = Training(b=value(S.b), l=value(S.l), m1=value(S.m1), s1=value(S.s1), d=value(S.d),
                        p=value(S.p), micro_batches=value(S.n_micro), **options.training_policy(args))
    chosen = conventions(args)
    cost = model_cost(arch, training, chosen)
    exprs = {name: getattr(cost, name) for name in TOTALS}
    exprs.update(step_time_breakdown(cost, args.system, chosen))
    constraints = [parse_condition(text, exprs) for text in args.where]
    result = sweep({column(f): exprs[f] for f in args.field}, grid=grid, constraints=constraints,
                   chunk_size=args.chunk, out=args.out, progress=args.progress)
    if args.out is None:
        print(result.to_csv(index=False), end="")
    return 0
