"""The parallel degree that minimises a block's cost (by default its step time), exactly
over the valid degrees and relaxed to reals."""

from __future__ import annotations

from symbolic_cost import analysis
from symbolic_cost import symbols as S
from symbolic_cost.cli import options
from symbolic_cost.cli.building import MODEL_FIXED, model_label, named_model
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
    options.option(parser, "--over", default="m1", metavar="SYMBOL",
                   help="the degree (or other count: b, l, a width the default model leaves to --set) to choose: "
                        "a whole-number symbol of the block that neither the model named nor --set fixes")
    field(parser, "time")
    options.option(parser, "--max", type=options.integer(1, analysis.MAX_CANDIDATES), default=64,
                   help=f"largest degree tried (at most {analysis.MAX_CANDIDATES:,}: each is checked and evaluated)")
    options.latex(parser)


def choosable(args, arch, used: set) -> list:
    """The symbols ``--over`` may choose: those of the block (``used``) that take whole values
    1, 2, ... (``analysis.valid_values`` tries them so; not the element sizes ``es`` and
    ``es_mask``, bytes that ``--precision`` sets), less the dimensions of a model named on the
    command line (``MODEL_FIXED``: its own) and what ``--set`` fixes."""
    fixed = set(assignments(args.set)) | (set(MODEL_FIXED) if named_model(args) else set())
    return [s for s in S.ALL if s in used and s.is_integer and s not in fixed]


def refuse_unchoosable(args, arch, over, used: set) -> None:
    """Refuse an ``--over`` that ``choosable`` leaves out, naming why and what it takes: ``--over
    es`` tried element sizes of 1 to 64 bytes and printed the cheapest as an optimum, and ``--over
    e`` of a named model was refused as a ``--set`` the command line did not hold."""
    if over in assignments(args.set):
        raise InputError(f"--set {over}: --over {over} chooses it; give it one way", "--set")
    if over not in used:
        why = f"the {args.block} block does not depend on {over}"
    elif not over.is_integer:
        why = f"{over} is an element's bytes, which --precision sets, not a count to choose"
    elif named_model(args) and over in MODEL_FIXED:
        why = f"{over} is a dimension of {arch.name}, which the model fixes (another width is another model)"
    else:
        return
    names = ", ".join(map(str, choosable(args, arch, used))) or "none"
    raise InputError(f"--over {over}: {why}; --over takes one of {names}", "--over")


def run(args) -> int:
    honour_system(args, args.field)
    over = symbol_name(args.over, "--over")
    arch = architecture(args)
    refuse_unchoosable(args, arch, over, honour_blocks(args, arch, args.block))
    if over == S.l and named_model(args):      # the candidates run to --max: keep them within the context
        check_context(arch, (("--over l --max", args.max),), args.allow_long, "--allow-long", argument="--max")
    args.set = [*args.set, f"{over}={over}"]
    block = build_block(args, block_values(args, arch), arch)
    expr = field_expr(block, args.field, None, get_system(args.system), conventions(args),
                      rows_option=False)
    candidates = analysis.valid_values(block, over, args.max)
    if not candidates:
        raise InputError(f"--over {over}: no value from 1 to --max {args.max} meets the {args.block} block's rules "
                         f"(each is checked as --set checks a value: m1 | h, h | e, ...): raise --max",
                         "--over")
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
