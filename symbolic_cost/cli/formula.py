"""One field of a block as an exact, simplified formula (FLOPs, bytes or seconds).

Without a model every dimension is a symbol; ``--set`` fixes some, ``--preset``
fixes the model's and the training defaults.  ``--total FIELD`` takes a whole-model
total instead (``sweep``'s fields: parameters, memory, the step's peak, the step-time
parts) of the model given, with the training degrees (``b``, ``l``, ``m1``, ``s1``,
``d``, ``p``, ``n_micro``, ...) symbols unless ``--set`` fixes them, under the
``Training`` defaults (``--flash`` and ``--precision`` apply); times at the
``--system``'s peak, as the block fields'.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from sympy import Basic, factor_terms, simplify, sympify

from symbolic_cost import analysis
from symbolic_cost import symbols as S
from symbolic_cost.latex import latex, monomial, paper_form
from symbolic_cost.blocks.block import check_dims
from symbolic_cost.cli import options
from symbolic_cost.cli.sweep import SWEEP_FIELDS, TIMES, model_fields
from symbolic_cost.cli.bookkeeping import is_timed
from symbolic_cost.cli.values import (FIELDS, TRAINING_SYMBOLS, architecture, assignments, block_values, build_block,
                                      conventions, field_expr, field_type, honour_blocks, honour_system, present,
                                      resolve, symbol_name, symbol_names)
from symbolic_cost.budget import time_limit
from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.numeric.exact import check_numbers
from symbolic_cost.reader import read
from symbolic_cost.cli.parse import substituted
from symbolic_cost.timing.hardware import get_system

EXAMPLES = [
    "symbolic-cost formula --block mlp --field flops_fwd --set m1=1 s1=1",
    "symbolic-cost formula --block layer --set f=4*e m1=1 s1=1 --leading e,l --remainder",
    "symbolic-cost formula --block attention --field act_buffer --set m1=1 s1=1 --elasticity l --at l=4096",
    "symbolic-cost formula --preset llama-2-7b --total memory_bytes --set l=4096 s1=m1 --elasticity m1",
]


def field(parser, default: str):
    """``--field``: one of ``values.FIELDS``."""
    options.option(parser, "--field", type=field_type, choices=FIELDS, default=default, metavar="FIELD",
                   action=options.Given, help="what to compute, one of: %(choices)s")


def add_arguments(parser) -> None:
    options.model(parser, default=None)
    options.settings(parser)
    options.long_sequences(parser)
    options.precision(parser)
    options.block(parser)
    options.counting(parser)
    field(parser, "flops_fwd")
    options.option(parser, "--total", choices=SWEEP_FIELDS, metavar="FIELD",
                   help="a whole-model total of the model given instead of a block's field, its degrees symbols "
                        "but context parallelism, left out unless --set cp= (cp=cp keeps it a symbol), one of: "
                        "%(choices)s")
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


SIMPLIFY_SECONDS = 5
"""CPU seconds SymPy's ``simplify`` gets on a formula (``simplified``): a whole model's step time
with every degree a symbol is a chain of maxima and piecewise terms on which it runs for minutes
and gains little."""


def simplified(expr, notes: list):
    """``simplify(expr)`` within ``SIMPLIFY_SECONDS`` of CPU; past them ``expr`` with its common
    factors taken out (``factor_terms``: the same value, as built), and a note in ``notes`` saying
    so (printed once the formula is, so that a refusal stays one line)."""
    try:
        with time_limit(SIMPLIFY_SECONDS, "simplify"):
            return simplify(expr)
    except InputError:
        notes.append(f"SymPy's simplify ran past {SIMPLIFY_SECONDS} s of CPU on this formula: printed as built, "
                     f"common factors taken out (fix symbols with --set or --at for a smaller one)")
        return factor_terms(expr)


def point(at: dict, expr) -> dict:
    """``--at``'s values with those they refer to put in (``l=2*b b=3`` is ``l = 6``, ``b = 3``;
    ``b=l l=b`` is refused, as ``--set`` refuses it), each naming only the formula's own symbols:
    ``l=es`` where ``--precision`` fixed ``es`` would bring back a symbol the formula has as a
    number."""
    at = substituted(at, "--at")
    for symbol, value in at.items():
        absent = sorted(map(str, sympify(value).free_symbols - expr.free_symbols))
        if absent:
            raise InputError(f"--at {symbol}={value} refers to {', '.join(absent)}, which the formula does not hold "
                             f"(fixed by the model, --precision or --set, or absent from it); give a number or the "
                             f"formula's own symbols, {', '.join(sorted(map(str, expr.free_symbols)))}", "--at")
    return at


def run(args) -> int:
    refuse_combinations(args)
    for flag, dest in (("--block", "block"), ("--layer-group", "layer_group")):
        if args.total and (options.given(args, dest) if dest == "block" else getattr(args, dest) is not None):
            raise InputError(f"{flag} chooses a block's formula, and --total asks for the whole model's; it would be "
                             f"ignored", flag)
    notes = []
    expr, check_point = whole_model(args, notes) if args.total else block_field(args, notes)
    if is_timed("time" if args.total in TIMES else "", args.field or ""):
        notes.append("times at the datasheet's peak rates (the roofline, a lower bound); summary, sweep and search "
                     "time on the calibrated model unless --ideal")
    at = point(assignments(args.at, "--at"), expr)
    asked = asked_symbols(args)
    for option, symbols in asked.items():
        present(expr, symbols, option)
    present(expr, at, "--at")
    try:                    # the dimension rules (h | e, ...) hold at the point too
        check_point(at)
    except InputError as error:
        raise InputError(f"--at: {error}", "--at") from None
    if args.leading:
        lead, rest = analysis.leading_terms(expr, asked["--leading"], with_remainder=True)
        show(lead, args)
        if args.remainder:
            show(rest, args)
        return noted(notes)
    if args.diff and args.elasticity:       # one transform: chained, the second would act on the first's result
        raise InputError("--diff and --elasticity together: give one (the elasticity is d log C / d log x "
                         "of the formula itself)", "--elasticity")
    if args.diff or args.elasticity:
        # the other symbols' values go in first: d/dx commutes with fixing y, and a derivative of
        # the formula with every symbol in it is far costlier to simplify than one in x alone
        varied = set(asked.get("--diff", ())) | set(asked.get("--elasticity", ()))
        expr = expr.subs({k: v for k, v in at.items() if k not in varied}, simultaneous=True)
        at = {k: v for k, v in at.items() if k in varied}
    if args.diff:
        expr = analysis.derivative(expr, args.diff)
    if args.elasticity:
        expr = analysis.elasticity(expr, args.elasticity)
    if at:
        expr = simplified(expr.subs(at, simultaneous=True), notes)
    if args.by:
        by = monomial(read(args.by, argument="--by"), "--by", repr(args.by))
        if expr.is_number:
            raise InputError(f"--by factors a formula, and this one is the number {expr}; it would be ignored", "--by")
        absent = sorted(map(str, by.free_symbols - expr.free_symbols))
        if absent:      # factoring them out would put back symbols --set (or the model) fixed
            raise InputError(f"--by names {', '.join(absent)}, which the formula does not hold (fixed by --set or "
                             f"absent from it): factor out a monomial of its own symbols, "
                             f"{', '.join(sorted(map(str, expr.free_symbols)))}", "--by")
        expr = paper_form(expr, by)
    show(expr, args)
    if expr.is_number and not expr.is_Integer:
        print(f"= {float(expr):.6g}")
    return noted(notes)


def noted(notes: list) -> int:
    """Print ``notes`` on stderr, once the formula is printed (a refusal before it stays one line),
    and answer the exit status 0."""
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def asked_symbols(args) -> dict:
    """``{option: symbols}`` of the given ``--leading``, ``--diff`` and ``--elasticity``: what the
    formula is asked about, so it must keep them (a model's defaults fix ``l`` otherwise)."""
    asked = (("--leading", args.leading), ("--diff", args.diff), ("--elasticity", args.elasticity))
    return {option: symbol_names(names, option) if option == "--leading" else [symbol_name(names, option)]
            for option, names in asked if names}


def block_field(args, notes: list):
    """``--field`` of ``--block`` (or of its ``--row``), simplified, and the check of a point:
    the block's dimension rules."""
    honour_system(args, args.field)
    arch = architecture(args)
    honour_blocks(args, arch, args.block)
    free = [s for symbols in asked_symbols(args).values() for s in symbols]
    block = build_block(args, block_values(args, arch, free=free), arch)
    if args.row:
        block[args.row]  # a clear KeyError message for an unknown row
    expr = simplified(field_expr(block, args.field, args.row, get_system(args.system), conventions(args)), notes)
    return expr, lambda at: check_dims({name: sympify(value).subs(at) for name, value in block.dims.items()},
                                       block.conventions)


BLOCK_ONLY = (("--row", "row", None), ("--layer-group", "layer_group", None), ("--no-bias", "no_bias", False),
              ("--no-qkv-bias", "no_qkv_bias", False), ("--tensor", "tensor", "1d"))
"""Options of a block that a whole-model ``--total`` has no use for (refused beside it)."""


def whole_model(args, notes: list):
    """``--total`` of the model given (``sweep.model_fields``), simplified, with the training's
    degrees symbols unless ``--set`` fixes them, and the check of a point: the rules ``model_cost``
    applies to numbers (``numeric.exact.check_numbers``)."""
    for flag, name, default in BLOCK_ONLY:
        if getattr(args, name, default) != default:
            raise InputError(f"{flag} applies to a block's --field; --total is the whole model's", flag)
    if options.given(args, "field"):
        raise InputError("--field names a block's field; --total replaces it (give one of them)", "--field")
    honour_system(args, *(["time"] if args.total in TIMES else []))
    arch = architecture(args)
    if arch is None:
        raise InputError("--total needs a model: --preset, --hf-config or --hf-model", "--total")
    fixed = resolve({}, args.set, allowed=TRAINING_SYMBOLS)
    training = whole_training(arch, fixed, args.precision, args.flash, args.allow_long)
    chosen = conventions(args)
    cost = model_cost(arch, training, chosen)
    expr = simplified(model_fields(cost, (args.total,), get_system(args.system), chosen)[args.total], notes)
    return expr, lambda at: check_numbers(arch, replace(training, **{
        k: sympify(v).subs(at) for k, v in training.flat().items() if isinstance(v, Basic)}))


def whole_training(arch, fixed: dict, precision: str, flash: bool, allow_long: bool = False) -> Training:
    """A ``Training`` whose degrees are ``fixed``'s values or their symbols (the expert degrees only
    for a mixture of experts, context parallelism only when set: its ring runs flash attention);
    ``allow_long`` lets the sequence pass the model's context."""
    value = lambda sym: fixed.get(sym, sym)  # noqa: E731
    experts = dict(ep=value(S.ep), etp=fixed.get(S.etp)) if arch.moe is not None else {}
    return Training(b=value(S.b), l=value(S.l), m1=value(S.m1), s1=value(S.s1), d=value(S.d), p=value(S.p),
                    micro_batches=value(S.n_micro), cp=fixed.get(S.cp, 1), flash=flash, precision=precision,
                    allow_long=allow_long, **experts)
