"""The parallel degree that minimises a block's cost (by default its step time), exactly
over the valid degrees and relaxed to reals."""

from __future__ import annotations

from symbolic_cost import analysis
from symbolic_cost import symbols as S
from symbolic_cost.cli import options
from symbolic_cost.cli.building import model_label, named_model
from symbolic_cost.cli.formula import field, show
from symbolic_cost.checks import InputError
from symbolic_cost.latex import latex
from symbolic_cost.cli.values import (architecture, assignments, block_values, build_block, conventions, field_expr,
                                      field_kind, honour_blocks, honour_system, symbol_name)
from symbolic_cost.models.training import check_context
from symbolic_cost.numeric.tables import UNITS
from symbolic_cost.timing.hardware import get_system

EXAMPLES = [
    "symbolic-cost optimize --set s1=m1",
    "symbolic-cost optimize --preset llama-2-7b --over m1 --max 32 --system a100",
]


def add_arguments(parser) -> None:
    options.model(parser)
    options.settings(parser)
    options.long_sequences(parser)
    options.precision(parser)
    options.block(parser, default="layer")
    options.counting(parser)
    options.units(parser)
    options.option(parser, "--over", default="m1", metavar="SYMBOL", help="the degree to choose")
    field(parser, "time")
    options.option(parser, "--max", type=options.integer(1, analysis.MAX_CANDIDATES), default=64,
                   help=f"largest degree tried (at most {analysis.MAX_CANDIDATES:,}: each is checked and evaluated)")
    options.latex(parser)


def run(args) -> int:
    honour_system(args, args.field)
    over = symbol_name(args.over, "--over")
    if over in assignments(args.set):
        raise InputError(f"--set {over}: --over {over} chooses it; give it one way", "--set")
    arch = architecture(args)
    if over not in honour_blocks(args, arch, args.block):
        raise InputError(f"--over {over}: the {args.block} block does not depend on {over}", "--over")
    if over == S.l and named_model(args):      # the candidates run to --max: keep them within the context
        check_context(arch, (("--over l --max", args.max),), args.allow_long, "--allow-long", argument="--max")
    args.set = [*args.set, f"{over}={over}"]
    block = build_block(args, block_values(args, arch), arch)
    expr = field_expr(block, args.field, None, get_system(args.system), conventions(args),
                      rows_option=False)
    candidates = analysis.valid_values(block, over, args.max)
    found = analysis.optimum(expr, over, candidates)
    divisor, label = UNITS[args.units].per(field_kind(args.field))
    unit = f" ({label})" if label else ""
    print(f"minimise {args.field}{unit} of {args.block} of {model_label(args, arch)} over {over} (system {args.system})")
    for value in candidates:
        mark = "  <- best" if value == found.best else ""
        print(f"  {over} = {value:>4}: {float(found.values[value] / divisor):.6g}{mark}")
    print(f"d/d{over} on the branch active at {over} = {found.best}:")
    show(found.derivative, args)
    if found.relaxed is None:
        print("relaxed: no interior minimum on that branch")
    else:
        region = "same branch" if found.same_region else "outside that branch (e.g. past the NVLink domain)"
        relaxed = latex(found.relaxed) if args.latex else found.relaxed       # --latex: every formula
        print(f"relaxed optimum {over} = {relaxed} = {float(found.relaxed):.6g} ({region})")
    return 0
