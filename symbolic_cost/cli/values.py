"""What the options mean: ``--set`` values, the model and its default configuration, the
block a block command builds, the fields it can report, and numbers in the chosen units.

Every formula typed on the command line (``--set``, ``--at``, ``--by``, ``--where``) is
read by the safe reader (``symbolic_cost.reader``), never evaluated as Python.  Options a
command cannot honour are refused, never ignored (``honour``).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from types import SimpleNamespace

from sympy import Integer, simplify, sympify

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.blocks import BUILDERS, Projections
from symbolic_cost.checks import InputError, fits
from symbolic_cost.cli.options import PLAIN, given as on_command_line
from symbolic_cost.cost import EXPRESSION_FIELDS
from symbolic_cost.models import config as hf
from symbolic_cost.models import hub
from symbolic_cost.models.training import element_bytes
from symbolic_cost.parallel.grid import DEGREES, make_grid
from symbolic_cost.parallel.grid_blocks import GRID_BUILDERS
from symbolic_cost.numeric.tables import COST_COLUMNS, UNITS, column_kind
from symbolic_cost.reader import bounded, read, read_number
from symbolic_cost.timing.hardware import TIME_FIELDS, step_time, times

DEFAULT_SEQUENCE = 2048
"""Sequence length of a model that states no context length."""

TRAINING_SYMBOLS = (S.b, S.l, S.m1, S.s1, S.d, S.p, S.n_micro, S.ep, S.etp, S.l_dec, S.cp)
"""What ``--set`` may fix for a whole model (the model fixes the rest; ``l_dec``: an
encoder-decoder's decoder length, ``l`` unless set)."""

FIELDS = tuple(dict.fromkeys([*EXPRESSION_FIELDS, *COST_COLUMNS, "comm_fwd", "comm_bwd", "time",
                              *TIME_FIELDS]))
"""What ``--field`` may name: a Cost field, its table name, a collective volume
(``comm_fwd``, ``comm_bwd``), a time column, or ``time`` (forward plus backward seconds)."""

_RATIOS = {name for name in TIME_FIELDS if column_kind(name) is None}


def parse_set(text: str, option: str = "--set") -> tuple:
    """``"e=4096"`` -> ``(e, 4096)``: a symbol's name and a value the safe reader reads
    (decimals exact), checked against what the symbol promises (``checks.fits``).

    >>> parse_set("f=4*e")
    (f, 4*e)
    >>> parse_set("es=0.5")
    (es, 1/2)
    >>> parse_set("b=0")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: --set b must be a positive integer, got 0
    """
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not value.strip():
        raise InputError(f"{option} expects name=value, got {text!r}", option)
    if name not in S.BY_NAME:
        raise InputError(f"{option}: unknown name {name!r}; known: {', '.join(S.BY_NAME)}", option)
    symbol = S.BY_NAME[name]
    return symbol, fits(symbol, read(value, argument=f"{option} {name}"), f"{option} {name}")


def assignments(texts: list[str], option: str = "--set", allowed=None) -> dict:
    """``NAME=VALUE`` pairs as ``{symbol: value}``; a name given twice is refused, and so is
    one outside ``allowed`` (when given)."""
    given = {}
    for text in texts:
        symbol, value = parse_set(text, option)
        if allowed is not None and symbol not in allowed:
            raise InputError(f"{option} {symbol}: not settable here; settable: {', '.join(map(str, allowed))} "
                             f"(the model fixes the rest: to change it, pass your own config.json with --hf-config)",
                             option)
        if symbol in given:
            raise InputError(f"{option} {symbol}: given twice ({symbol}={given[symbol]} and {symbol}={value}); "
                             f"give each name once", option)
        given[symbol] = value
    return given


def parse_condition(text: str, names: dict):
    """A ``--where`` condition over the symbols and the named expressions ``names``.

    >>> from symbolic_cost.symbols import b
    >>> parse_condition("work <= 8", {"work": 2 * b})
    2*b <= 8
    """
    return read(text, argument="--where", names=names, condition=True)


def substituted(values: dict, option: str = "--set") -> dict:
    """Each value with the values it refers to put in, once (``f = 4*e`` follows ``e``).
    ``x = x`` keeps ``x`` a symbol; a value that refers back to itself (``b = 2*b``, or ``b = l``
    with ``l = b``) is refused."""
    done, trail = {}, []

    def visit(key):
        if key in done:
            return done[key]
        if key in trail:
            loop = trail[trail.index(key):]
            said = ", ".join(f"{k}={values[k]}" for k in loop)
            what = "refers to itself" if len(loop) == 1 else "refer to each other"
            raise InputError(f"{option} {loop[0]}: {said} {what}; give a number or other names", option)
        trail.append(key)
        value = sympify(values[key])
        refs = [] if value == key else [s for s in value.free_symbols if s in values]
        done[key] = bounded(value.subs({s: visit(s) for s in refs}, simultaneous=True), f"{option} {key}") \
            if refs else value
        trail.pop()
        return done[key]

    return {key: visit(key) for key in values}


def resolve(base: dict, sets: list[str], allowed=None, option: str = "--set") -> dict:
    """Apply ``--set`` overrides to ``base`` and resolve values that refer to others
    (``substituted``); ``allowed`` limits which symbols may be set.  A set value is checked
    again once resolved (``f=e/3`` with ``e=4096`` is not an integer)."""
    given = assignments(sets, option, allowed)
    values = substituted({**base, **given}, option)
    for symbol in given:
        fits(symbol, values[symbol], f"{option} {symbol}")
    return values


MAX_GRID = 10**8
"""Most configurations one ``--grid`` may describe (a sweep of about two minutes); split a
larger grid, or use ``numeric.sweep.sweep_dask`` on a cluster."""


def grid_option(allowed, option: str = "--grid"):
    """An argparse type for ``NAME=V1,V2,...`` with NAME one of ``allowed``: each value a number
    the safe reader reads and the symbol admits (``checks.fits``); returns ``(name, values)``."""
    known = ", ".join(map(str, allowed))

    def grid_type(text: str) -> tuple[str, list]:
        name, sep, values = text.partition("=")
        name = name.strip()
        if not sep or name not in map(str, allowed):
            raise argparse.ArgumentTypeError(f"expects NAME=V1,V2,... with NAME one of {known}; got {text!r}")
        try:
            read = [fits(S.BY_NAME[name], read_number(v, argument=name), name) for v in values.split(",")]
        except InputError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return name, [int(v) if v.is_Integer else v for v in read]
    return grid_type


def grid_values(pairs, given: dict, option: str = "--grid") -> dict:
    """``--grid`` pairs as ``{symbol: values}``: each name once, none also given by ``--set``
    (``given``), and at most ``MAX_GRID`` configurations in all."""
    grid = {}
    for name, values in pairs:
        symbol = S.BY_NAME[name]
        if symbol in grid:
            raise InputError(f"{option} {name}: given twice; give each name once (V1,V2,... in one pair)", option)
        if symbol in given:
            raise InputError(f"--set {name}: {name} is swept by {option}; give it one way", "--set")
        grid[symbol] = values
    size = math.prod(len(values) for values in grid.values())
    if size > MAX_GRID:
        raise InputError(f"{option}: {size:,} configurations, more than {MAX_GRID:,}; split the grid "
                         f"(or use numeric.sweep.sweep_dask on a cluster)", option)
    return grid


def symbol_names(text: str, option: str) -> list:
    """Comma-separated symbol names (``--leading e,l``, ``--diff l``) as symbols."""
    names = [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in S.BY_NAME]
    if unknown or not names:
        raise InputError(f"{option}: unknown name(s) {', '.join(map(repr, unknown))}; known: "
                         f"{', '.join(S.BY_NAME)}", option)
    return [S.BY_NAME[name] for name in names]


def symbols_of(*blocks) -> set:
    """Every symbol the rows, collectives and dimensions of ``blocks`` depend on."""
    found = set()
    for block in blocks:
        for row in block:
            for name in EXPRESSION_FIELDS:
                found |= getattr(row, name).free_symbols
            for c in row.collectives:
                found |= c.volume.free_symbols | c.group.free_symbols
        for value in block.dims.values():
            found |= sympify(value).free_symbols
    return found


def honour(args, used: set, what: str, attention: bool = True) -> None:
    """Refuse what ``what`` (say ``"the mlp block"``) cannot honour: a ``--set`` of a symbol
    outside ``used``, and ``--flash`` or ``--no-qkv-bias`` without an attention block."""
    for symbol in assignments(args.set):
        if symbol not in used:
            raise InputError(f"--set {symbol}: {what} does not depend on {symbol}; it would be ignored", "--set")
    if not attention:
        for flag, on in (("--flash", getattr(args, "flash", False)), ("--no-qkv-bias", getattr(args, "no_qkv_bias", False))):
            if on:
                raise InputError(f"{flag}: {what} has no attention; it would be ignored", flag)


def block_symbols(args, arch, *names) -> set:
    """The symbols the blocks ``names`` depend on, built with every dimension a symbol."""
    return symbols_of(*(build_block(args, {}, arch, name) for name in names))


def honour_blocks(args, arch, *names, also=()) -> set:
    """``honour`` for a command that builds the blocks ``names`` (and reads ``also``); returns
    the symbols they depend on."""
    what = f"the {' and '.join(dict.fromkeys(names))} block{'s' if len(set(names)) > 1 else ''}"
    used = block_symbols(args, arch, *names) | set(also)
    honour(args, used, what, attention=any(name != "mlp" for name in names))
    return used


def honour_mtp(args, arch) -> None:
    """Refuse ``--no-mtp`` for a model without multi-token-prediction modules (it would be ignored)."""
    if getattr(args, "mtp", True) is False and not arch.mtp_layers:
        raise InputError(f"--no-mtp: {arch.name} has no multi-token-prediction modules; it would be ignored",
                         "--no-mtp")


def honour_system(args, *fields: str) -> None:
    """Refuse ``--system`` and ``--kernel-time`` when none of ``fields`` is a time (or a ratio
    of times): counts of FLOPs and bytes do not depend on the hardware, so they would be ignored."""
    timed = any(f == "time" or COST_COLUMNS.get(f, f) in TIME_FIELDS for f in fields)
    for flag, used in (("--system", on_command_line(args, "system")), ("--kernel-time", getattr(args, "kernel_time", None))):
        if used and not timed:
            raise InputError(f"{flag} applies to time fields only (FLOPs and bytes do not depend on the "
                             f"hardware); it would be ignored", flag)


def present(expr, symbols, option: str) -> None:
    """Refuse symbols (``--at``, ``--diff``, ...) the formula does not contain: the model or
    ``--set`` fixed them, or the field never depends on them."""
    missing = [str(s) for s in symbols if s not in sympify(expr).free_symbols]
    if missing:
        raise InputError(f"{option} {missing[0]}: the formula has no {missing[0]} (the model or --set fixed "
                         f"it, or the field does not depend on it); it would be ignored", option)


def numbers_needed(values: dict, used: set, command: str) -> None:
    """Refuse a symbol ``used`` that a numeric command (``command``) has no number for."""
    missing = sorted(str(s) for s in used if not sympify(values.get(s, s)).is_number)
    if missing:
        raise InputError(f"{command} needs numbers; {', '.join(missing)} has none (a symbol stays a symbol only "
                         f"in formula commands): --set {missing[0]}=VALUE", "--set")


def architecture(args):
    """The model of ``--hf-config``, ``--hf-model`` or ``--preset`` (``None`` when none is given)."""
    if getattr(args, "revision", None) and not getattr(args, "hf_model", None):
        raise InputError("--revision applies to --hf-model only; it would be ignored", "--revision")
    if getattr(args, "hf_config", None) is not None:
        return hf.load(args.hf_config)
    if getattr(args, "hf_model", None):
        return hub.load(args.hf_model, revision=args.revision)
    return hf.preset(args.preset) if getattr(args, "preset", None) else None


def sequence_length(arch) -> int:
    """The default ``l``: the model's context length (``DEFAULT_SEQUENCE`` if it states none)."""
    return arch.context or DEFAULT_SEQUENCE


def training_values(arch) -> dict:
    """The default training configuration: one sequence of the model's context on one device."""
    return {S.b: 1, S.l: sequence_length(arch), S.m1: PLAIN.m1, S.s1: PLAIN.s1, S.d: PLAIN.d, S.p: PLAIN.p,
            S.n_micro: PLAIN.micro_batches, S.ep: PLAIN.ep, S.etp: S.m1, S.cp: PLAIN.cp}


def block_values(args, arch, base: dict | None = None) -> dict:
    """Values of a block command: element sizes of ``--precision``; with a model, its
    dimensions and ``training_values`` too; then ``--set``.  Unset symbols stay symbols."""
    values = {S.es: element_bytes(args.precision), S.es_mask: PLAIN.mask_bytes, **(base or {})}
    if arch is not None:
        values.update({S.e: arch.e, S.f: arch.f, S.h: arch.h, S.n_layers: arch.n_layers})
        values.update({k: v for k, v in training_values(arch).items() if k in (S.b, S.l, S.m1, S.s1)})
        if arch.moe is not None:
            values[S.ep] = PLAIN.ep
    return resolve(values, args.set)


def conventions(args) -> conv.Conventions:
    """``--conventions``, with ``--kernel-time`` applied when given."""
    chosen = conv.get(args.conventions)
    kernel_time = getattr(args, "kernel_time", None)
    return chosen.but(kernel_time=kernel_time) if kernel_time else chosen


def conventions_text(args) -> str:
    """``--conventions`` as printed: the preset's name and what ``--kernel-time`` changed."""
    kernel_time = getattr(args, "kernel_time", None)
    return args.conventions + (f" but kernel_time={kernel_time!r}" if kernel_time else "")


def build_block(args, values: dict, arch, name: str | None = None):
    """The block ``name`` (default ``--block``) from a value map; symbols without a value stay
    symbols.  With a model (and no ``--tensor`` grid) it is that part of the model's own layer,
    of the layer group ``--layer-group`` picks (``model_block``); without one, the plain
    builder with ``--no-bias`` and ``--no-qkv-bias``."""
    get = lambda s: values.get(s, s)  # noqa: E731
    name = name or args.block
    if arch is not None and getattr(args, "tensor", "1d") == "1d":
        return model_block(args, values, arch, name)[0]
    if getattr(args, "layer_group", None):
        raise InputError("--layer-group picks a group of a model's layers: it needs a model (--preset, --hf-config) "
                         "and the 1d layout; it would be ignored", "--layer-group")
    structure = {}
    bias = qkv_bias = True
    if arch is not None:
        structure = dict(kv_heads=arch.kv_heads, rotary_pos=arch.rotary, causal=arch.causal,
                         gated_act=arch.mlp != "gelu", dropouts=arch.dropouts, norm=arch.norm)
        bias, qkv_bias = arch.bias, arch.qkv_bias
    bias, qkv_bias = bias and not args.no_bias, qkv_bias and not args.no_qkv_bias
    common = dict(b=get(S.b), l=get(S.l), e=get(S.e), m1=get(S.m1), s1=get(S.s1), es=get(S.es),
                  es_mask=get(S.es_mask), conventions=conventions(args), dropouts=structure.get("dropouts", True),
                  norm=structure.get("norm", "layer"))
    attention = {k: structure[k] for k in ("kv_heads", "rotary_pos", "causal") if k in structure}
    builders = BUILDERS
    if getattr(args, "tensor", "1d") != "1d":
        builders = tensor_grid_builders(args, values, common)
    if name == "mlp":
        return builders["mlp"](f=get(S.f), bias=bias, gated_act=structure.get("gated_act", False), **common)
    if builders is BUILDERS:                 # no model here: the plain heads and scores
        what = dict(heads=get(S.h), projections=Projections(qkv_bias=qkv_bias, out_bias=bias), flash=args.flash)
        return builders[name](**({"f": get(S.f)} if name == "layer" else {}), **what, **common)
    if name == "layer":
        return builders["layer"](f=get(S.f), h=get(S.h), bias=bias, qkv_bias=qkv_bias, flash=args.flash,
                                 gated_act=structure.get("gated_act", False), **attention, **common)
    return builders["attention"](h=get(S.h), qkv_bias=qkv_bias, out_bias=bias, flash=args.flash,
                                 **attention, **common)


def model_block(args, values: dict, arch, name: str):
    """``(block, count, groups)``: the part ``name`` (``layer``, ``attention``, ``mlp``: the MLP
    or the mixture of experts) of the model's layer group ``--layer-group`` (1-based, in model
    order: ``models.stack.group_options``), the layers in that group and how many groups there
    are.  ``--set`` may change ``e``, ``f``, ``h``; ``--no-bias`` and ``--no-qkv-bias`` drop
    the model's biases; a mixture of experts takes ``ep`` and ``etp`` (default ``m1``)."""
    from symbolic_cost.models.stack import layer_groups     # the model layer, on demand
    get = lambda s: values.get(s, s)  # noqa: E731
    no_bias = getattr(args, "no_bias", False)
    # the MLP does not read the heads: keep their size, so that h need not divide a new e
    heads = dict(head_dim=arch.head_size) if name == "mlp" and arch.head_dim is None else {}
    model = replace(arch, e=get(S.e), f=get(S.f), h=get(S.h), **heads, bias=arch.bias and not no_bias,
                    mlp_bias=False if no_bias else arch.mlp_bias,
                    qkv_bias=arch.qkv_bias and not getattr(args, "no_qkv_bias", False))
    t = SimpleNamespace(b=get(S.b), l=get(S.l), flash=getattr(args, "flash", False), l_dec=None)
    kw = dict(es=get(S.es), es_mask=get(S.es_mask), conventions=conventions(args))
    experts = dict(ep=get(S.ep), etp=values.get(S.etp, get(S.m1))) if arch.moe is not None else None
    groups = layer_groups(model, t, get(S.m1), get(S.s1), kw, experts, part=name)
    chosen = getattr(args, "layer_group", None) or 1
    if chosen > len(groups):
        raise InputError(f"--layer-group {chosen}: {arch.name} has {len(groups)} layer group"
                         f"{'s' if len(groups) > 1 else ''} (profile lists them)", "--layer-group")
    block, count = groups[chosen - 1]
    return block, count, len(groups)


def tensor_grid_builders(args, values: dict, common: dict) -> dict:
    """The block builders on ``--tensor``'s grid (``parallel.grid_blocks``), its degrees from
    ``values`` (symbols when unset); takes ``m1`` and ``s1`` out of ``common``: a grid splits
    every activation already, so ``s1`` must be 1."""
    s1 = common.pop("s1")
    common.pop("m1")
    if sympify(s1).is_number and s1 != 1:
        raise InputError(f"--tensor {args.tensor}: s1 must be 1 (a grid splits every activation already), got s1={s1}",
                         "s1")
    grid = tensor_grid(args, values)
    return {name: (lambda build: lambda **kw: build(grid=grid, **kw))(build) for name, build in GRID_BUILDERS.items()}


def tensor_grid(args, values: dict):
    """``--tensor``'s grid (``parallel.grid.make_grid``): its degrees from ``values`` (symbols
    when unset), ``--grid-order`` and ``--panel``."""
    degrees = {name: values.get(S.BY_NAME[name], S.BY_NAME[name]) for name in DEGREES[args.tensor]}
    order = tuple(args.grid_order.split(",")) if getattr(args, "grid_order", None) else None
    return make_grid(args.tensor, order=order, panel=getattr(args, "panel", None), **degrees)


def field_type(text: str) -> str:
    """``--field``'s check: one of ``FIELDS``."""
    if text not in FIELDS:
        raise argparse.ArgumentTypeError(f"unknown --field {text!r}; known: {', '.join(FIELDS)}")
    return text


def field_expr(block, field: str, row: str | None, system, conventions):
    """A field summed over the block's rows (or of one row): a Cost field, its table
    name, ``comm_fwd``/``comm_bwd`` (reported collective volume), a time column, or
    ``time`` (forward plus backward seconds, the quantity ``optimize`` minimises)."""
    field = COST_COLUMNS.get(field, field)
    rows = [block[row]] if row else list(block)
    if field in EXPRESSION_FIELDS:
        return sum((getattr(r, field) for r in rows), Integer(0))
    if field in ("comm_fwd", "comm_bwd"):
        return sum((c.volume for r in rows for c in r.collectives if c.pass_ == field[-3:]), Integer(0))
    if field == "time":
        return step_time(rows, system, conventions)
    if field in TIME_FIELDS:
        if not row and field in _RATIOS:
            raise InputError(f"--field {field} is a ratio; choose one row with --row")
        return sum((times(r, system, conventions)[field] for r in rows), Integer(0))
    raise InputError(f"unknown --field {field!r}; known: {', '.join(FIELDS)}")


def field_kind(field: str) -> str | None:
    """What a ``--field`` measures: ``"flops"``, ``"bytes"``, ``"seconds"`` or ``None``."""
    if field == "time":
        return "seconds"
    if field in EXPRESSION_FIELDS:
        return "flops" if field.startswith("flops") else "bytes"
    return column_kind(field)


def number(expr):
    """JSON value of an expression: an int, a float, or the formula as a string."""
    expr = simplify(sympify(expr))
    if expr.is_Integer:
        return int(expr)
    return finite(float(expr)) if expr.is_number else str(expr)


def finite(value: float) -> float:
    """``value``, refused when the inputs made it overflow a float (or NaN)."""
    if not math.isfinite(value):
        raise InputError(f"a result is {value} in floating point: the inputs are too large to print", "--set")
    return value


def amount(value, kind: str | None, units: str, digits: int = 4) -> str:
    """``value`` (FLOPs, bytes or seconds; a number or a formula) as text in ``units``."""
    divisor, label = UNITS[units].per(kind)
    scaled = sympify(value) / divisor
    text = f"{finite(float(scaled)):.{digits}g}" if scaled.is_number else str(simplify(scaled))
    return f"{text} {label}".rstrip()


def header(column: str, units: str) -> str:
    """A column name with its unit: ``flops_fwd (TFLOP)``."""
    label = UNITS[units].label(column)
    return f"{column} ({label})" if label else column
