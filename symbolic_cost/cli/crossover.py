"""Where two blocks cost the same: the value of one symbol at which their fields are equal."""

from __future__ import annotations

from symbolic_cost import analysis
from symbolic_cost.blocks import BUILDERS
from symbolic_cost.cli import options
from symbolic_cost.cli.formula import field, show
from symbolic_cost.cli.values import (architecture, block_values, build_block, conventions, field_expr,
                                      honour_blocks, honour_system, present, symbol_names)
from symbolic_cost.timing.hardware import get_system

EXAMPLES = [
    "symbolic-cost crossover --set f=4*e m1=1 s1=1",
    "symbolic-cost crossover --set f=4*e m1=1 s1=1 e=4096 h=32 --field act_buffer",
]


def add_arguments(parser) -> None:
    options.model(parser, default=None)
    options.settings(parser)
    options.precision(parser)
    options.block(parser, default=None)
    options.counting(parser)
    options.option(parser, "--a", choices=sorted(BUILDERS), default="attention", help="first block")
    options.option(parser, "--b", choices=sorted(BUILDERS), default="mlp", help="second block")
    field(parser, "flops_fwd")
    options.option(parser, "--for", dest="solve_for", default="l", metavar="SYMBOL", help="solve for SYMBOL")
    options.latex(parser)


def run(args) -> int:
    honour_system(args, args.field)
    arch = architecture(args)
    (solve_for,) = symbol_names(args.solve_for, "--for")
    honour_blocks(args, arch, args.a, args.b)
    values = block_values(args, arch, free=(solve_for,))
    system, chosen = get_system(args.system), conventions(args)
    def both(a, values):
        return [field_expr(build_block(a, values, arch, name), a.field, None, system, chosen) for name in (a.a, a.b)]
    sides = both(args, values)
    options.refuse_unchanged(args, {"precision": "bf16", "flash": False}, sides,
                             lambda plain: both(plain, block_values(plain, arch, free=(solve_for,))),
                             f"{args.field} of {args.a} or {args.b}")
    present(sides[0] - sides[1], [solve_for], "--for")
    root = analysis.crossover(*sides, solve_for)
    print(f"{args.a} {args.field} = {args.b} {args.field} at {args.solve_for} =")
    show(root, args)
    if root.is_number:
        print(f"= {float(root):.6g}")
    return 0
