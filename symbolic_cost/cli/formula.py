"""One field of a block as an exact, simplified formula (FLOPs, bytes or seconds).

Without a model every dimension is a symbol; ``--set`` fixes some, ``--preset``
fixes the model's and the training defaults.
"""

from __future__ import annotations

from sympy import simplify, sympify

from symbolic_cost import analysis
from symbolic_cost.analysis.latex import latex, paper_form
from symbolic_cost.blocks.block import check_dims
from symbolic_cost.cli import options
from symbolic_cost.cli.values import (FIELDS, architecture, assignments, block_values, build_block, conventions,
                                      field_expr, field_type, honour_blocks, honour_system, present,
                                      symbol_names)
from symbolic_cost.checks import InputError
from symbolic_cost.reader import read
from symbolic_cost.timing.hardware import get_system

EXAMPLES = [
    "symbolic-cost formula --block mlp --field flops_fwd --set m1=1 s1=1",
    "symbolic-cost formula --block layer --set f=4*e m1=1 s1=1 --leading e,l --remainder",
    "symbolic-cost formula --block attention --field act_buffer --set m1=1 s1=1 --elasticity l --at l=4096",
]


def field(parser, default: str):
    """``--field``: one of ``values.FIELDS``."""
    options.option(parser, "--field", type=field_type, choices=FIELDS, default=default, metavar="FIELD",
                   help="what to compute, one of: %(choices)s")


def add_arguments(parser) -> None:
    options.model(parser, default=None)
    options.settings(parser)
    options.precision(parser)
    options.block(parser)
    options.counting(parser)
    field(parser, "flops_fwd")
    options.option(parser, "--row", help="one row instead of the block total")
    options.option(parser, "--leading", metavar="SYMBOLS", help="leading terms as these (comma-separated) grow")
    options.option(parser, "--remainder", action="store_true", help="with --leading: also the exact rest")
    options.option(parser, "--diff", metavar="SYMBOL", help="derivative with respect to SYMBOL")
    options.option(parser, "--elasticity", metavar="SYMBOL", help="d log C / d log SYMBOL")
    options.pairs(parser, "--at", "evaluate the result at a point: NAME=VALUE pairs")
    options.option(parser, "--by", metavar="MONOMIAL", help="factor out MONOMIAL, e.g. b*l*e")
    options.latex(parser)


def show(expr, args) -> None:
    """Print a formula, as LaTeX with ``--latex``."""
    print(latex(expr) if args.latex else expr)


def refuse_combinations(args) -> None:
    """``--leading`` prints leading terms and nothing else; ``--remainder`` needs it."""
    if args.remainder and not args.leading:
        raise InputError("--remainder applies to --leading only; it would be ignored", "--remainder")
    others = [flag for flag, value in (("--at", args.at), ("--diff", args.diff), ("--elasticity", args.elasticity),
                                       ("--by", args.by)) if value]
    if args.leading and others:
        raise InputError(f"--leading cannot be combined with {', '.join(others)}; it would ignore them", "--leading")


def run(args) -> int:
    refuse_combinations(args)
    honour_system(args, args.field)
    arch = architecture(args)
    honour_blocks(args, arch, args.block)
    block = build_block(args, block_values(args, arch), arch)
    if args.row:
        block[args.row]  # a clear KeyError message for an unknown row
    expr = simplify(field_expr(block, args.field, args.row, get_system(args.system), conventions(args)))
    at = assignments(args.at, "--at")
    for option, names in (("--leading", args.leading), ("--diff", args.diff), ("--elasticity", args.elasticity)):
        if names:
            present(expr, symbol_names(names, option), option)
    present(expr, at, "--at")
    try:                    # the dimension rules (h | e, ...) hold at the point too
        check_dims({name: sympify(value).subs(at) for name, value in block.dims.items()}, block.conventions)
    except InputError as error:
        raise InputError(f"--at: {error}", "--at") from None
    if args.leading:
        lead, rest = analysis.leading_terms(expr, symbol_names(args.leading, "--leading"), with_remainder=True)
        show(lead, args)
        if args.remainder:
            show(rest, args)
        return 0
    if args.diff:
        expr = analysis.derivative(expr, args.diff)
    if args.elasticity:
        expr = analysis.elasticity(expr, args.elasticity)
    if at:
        expr = simplify(expr.subs(at))
    if args.by:
        by = read(args.by, argument="--by")
        if by == 0:
            raise InputError("--by must not be 0", "--by")
        expr = paper_form(expr, by)
    show(expr, args)
    if expr.is_number and not expr.is_Integer:
        print(f"= {float(expr):.6g}")
    return 0
