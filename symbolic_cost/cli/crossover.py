"""Where two blocks cost the same: the value of one symbol at which their fields are equal."""

from __future__ import annotations

from symbolic_cost import analysis
from symbolic_cost import symbols as S
from symbolic_cost.blocks import BUILDERS
from symbolic_cost.checks import InputError
from symbolic_cost.models.config import preset
from symbolic_cost.cli import options
from symbolic_cost.cli.formula import field, show
from symbolic_cost.cli.values import (architecture, block_values, build_block, conventions, field_expr,
                                      honour_blocks, honour_system, present, symbol_name)
from symbolic_cost.models.training import context_limit
from symbolic_cost.timing.hardware import get_system

EXAMPLES = [
    "symbolic-cost crossover --set f=4*e m1=1 s1=1",
    "symbolic-cost crossover --set f=4*e m1=1 s1=1 e=4096 h=32 --field act_buffer",
]


def add_arguments(parser) -> None:
    options.model(parser, default=None)
    options.settings(parser)
    options.long_sequences(parser)
    options.precision(parser)
    options.block(parser, default=None)
    options.counting(parser)
    options.option(parser, "--a", choices=sorted(BUILDERS), default="attention", help="first block")
    options.option(parser, "--b", choices=sorted(BUILDERS), default="mlp", help="second block")
    field(parser, "flops_fwd")
    options.option(parser, "--for", dest="solve_for", default="l", metavar="SYMBOL", help="solve for SYMBOL")
    options.latex(parser)


WIDTHS = ("gpt2", "llama-2-7b", "gpt3-175b")
"""Presets whose widths (``e``, ``h``, ``f``) a symbolic crossover is looked at (``refuse_negative``),
each with tensor and sequence degrees 1 and 8, micro-batches 1 and 8, sequences of 1,024 and 8,192
tokens."""


def refuse_negative(root, args) -> None:
    """Refuse a crossover at no size: one negative at every real width of ``WIDTHS`` (the two
    blocks never cost the same at a positive size there), or, solved for a size that counts (a
    positive integer: ``b``, ``l``, ``e``, a degree), one below 1 at each of them (``flops_bwd`` of
    gpt2 crosses at ``b = 64/86123``).  SymPy keeps such a root, since it cannot tell that
    ``h s1 - 8 e^2 s1`` is negative without knowing that ``h <= e``.  A crossover between two
    sizes (``l = 256/3``) is kept."""
    x = args.solve_for
    counted = getattr(S.BY_NAME.get(x), "is_integer", False)
    if root.free_symbols:
        values, where = _at_widths(root), f" at every real width tried ({', '.join(WIDTHS)}, with degrees 1 and 8)"
    else:
        values, where = [root], f" ({float(root):.6g})" if root.is_extended_real else ""
    for bound, at_least in ((0, f"a positive {x}"), (1, f"a {x} of 1 or more")):
        if (bound == 0 or counted) and all(_below(v, bound) for v in values):
            raise InputError(f"--for {x}: {args.a} and {args.b} never have equal {args.field} at {at_least}: the "
                             f"crossover {x} = {root} is below {bound}{where}", "--for")


def _at_widths(root) -> list:
    """``root`` at each width of ``WIDTHS`` (tensor and sequence degrees 1 and 8, micro-batches 1
    and 8, sequences of 1,024 and 8,192 tokens), any other symbol at 1."""
    free = {str(s): s for s in root.free_symbols}
    points = [{"e": a.e, "h": a.h, "f": a.f, "m1": m, "s1": m, "b": b, "l": l} for a in map(preset, WIDTHS)
              for m in (1, 8) for b in (1, 8) for l in (1024, 8192)]
    return [root.subs({free[k]: v for k, v in point.items() if k in free}).subs({s: 1 for s in root.free_symbols})
            for point in points]


def _below(value, bound) -> bool:
    """Whether ``value`` is a real number below ``bound`` (a complex one, a root of a negative
    number, is no size either way: not below)."""
    return bool(value.is_number and value.is_extended_real and value < bound)


def run(args) -> int:
    if args.a == args.b:
        raise InputError(f"--b {args.b} is the block --a names: a block equals itself at every size; compare two "
                         f"blocks", "--b")
    honour_system(args, args.field)
    arch = architecture(args)
    solve_for = symbol_name(args.solve_for, "--for")
    honour_blocks(args, arch, args.a, args.b)
    values = block_values(args, arch, free=(solve_for,))
    system, chosen = get_system(args.system), conventions(args)
    def both(a, values):
        return [field_expr(build_block(a, values, arch, name), a.field, None, system, chosen,
                           rows_option=False) for name in (a.a, a.b)]
    sides = both(args, values)
    options.refuse_unchanged(args, {"precision": "bf16", "flash": False}, sides,
                             lambda plain: both(plain, block_values(plain, arch, free=(solve_for,))),
                             f"{args.field} of {args.a} or {args.b}")
    present(sides[0] - sides[1], [solve_for], "--for")
    try:        # its refusal names the symbol (the library's argument); here that is --for's
        root = analysis.crossover(*sides, solve_for)
    except InputError as error:
        raise InputError(f"--for {solve_for}: {error}", "--for") from None
    refuse_negative(root, args)
    past = _past_context(root, solve_for, arch)
    if getattr(args, "allow_long", False) and not past:
        raise InputError(f"--allow-long: the crossover is no sequence past {arch.name + chr(39) + 's' if arch else 'a model'}"
                         f" context; it would be ignored", "--allow-long")
    print(f"{args.a} {args.field} = {args.b} {args.field} at {args.solve_for} =")
    show(root, args)
    if root.is_number:
        print(f"= {float(root):.6g}")
    if past and not getattr(args, "allow_long", False):
        print(f"note: l = {float(root):.6g} is past {arch.name}'s context of {context_limit(arch)} tokens: the "
              f"formulas cross there, but the model runs no such sequence (--allow-long: no note)")
    return 0


def _past_context(root, solve_for, arch) -> bool:
    """Whether the crossover is a sequence length past ``arch``'s stated context."""
    if arch is None or str(solve_for) != "l" or not root.is_number:
        return False
    limit = context_limit(arch)
    return bool(limit.is_number and limit != 0 and root > limit)
