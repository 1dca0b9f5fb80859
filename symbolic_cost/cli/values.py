"""What the options mean: ``--set`` values, the model and its default configuration, the
block a block command builds, the fields it can report, and numbers in the chosen units.

``parse_set`` (a ``NAME=VALUE`` pair) and ``parse_condition`` (a ``--where``
condition) are the only places the command line reads an expression.
"""

from __future__ import annotations

import argparse

from sympy import Integer, simplify, sympify
from sympy.parsing.sympy_parser import parse_expr, rationalize, standard_transformations

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.blocks import BUILDERS
from symbolic_cost.cli.options import PLAIN
from symbolic_cost.cost import EXPRESSION_FIELDS
from symbolic_cost.models import config as hf
from symbolic_cost.models import hub
from symbolic_cost.models.training import element_bytes
from symbolic_cost.numeric.tables import COST_COLUMNS, UNITS, column_kind
from symbolic_cost.timing.hardware import TIME_FIELDS, step_time, times

DEFAULT_SEQUENCE = 2048
"""Sequence length of a model that states no context length."""

TRAINING_SYMBOLS = (S.b, S.l, S.m1, S.s1, S.d, S.p, S.n_micro)
"""What ``--set`` may fix for a whole model (the model fixes the rest)."""

FIELDS = tuple(dict.fromkeys([*EXPRESSION_FIELDS, *COST_COLUMNS, "comm_fwd", "comm_bwd", "time",
                              *TIME_FIELDS]))
"""What ``--field`` may name: a Cost field, its table name, a collective volume
(``comm_fwd``, ``comm_bwd``), a time column, or ``time`` (forward plus backward seconds)."""

_RATIOS = {name for name in TIME_FIELDS if column_kind(name) is None}


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


def parse_condition(text: str, names: dict):
    """A ``--where`` condition over the symbols and the named expressions ``names``.

    >>> from symbolic_cost.symbols import b
    >>> parse_condition("work <= 8", {"work": 2 * b})
    2*b <= 8
    """
    try:
        return parse_expr(text, local_dict={**S.BY_NAME, **names})
    except Exception:
        raise ValueError(f"--where: cannot read {text!r} (e.g. 'memory_bytes <= 80e9')") from None


def resolve(base: dict, sets: list[str], allowed=None) -> dict:
    """Apply ``--set`` overrides to ``base`` and resolve values that refer to others
    (``f = 4*e`` follows ``--set e=...``); ``allowed`` limits which symbols may be set."""
    values = dict(base)
    for text in sets:
        symbol, value = parse_set(text)
        if allowed is not None and symbol not in allowed:
            raise ValueError(f"--set {symbol}: not settable here; settable: {', '.join(map(str, allowed))} "
                             f"(the model fixes the rest)")
        values[symbol] = value
    for _ in range(len(values)):
        values = {k: sympify(v).subs(values) for k, v in values.items()}
    return values


def architecture(args):
    """The model of ``--hf-config``, ``--hf-model`` or ``--preset`` (``None`` when none is given)."""
    if getattr(args, "hf_config", None):
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
            S.n_micro: PLAIN.micro_batches}


def block_values(args, arch, base: dict | None = None) -> dict:
    """Values of a block command: element sizes of ``--precision``; with a model, its
    dimensions and ``training_values`` too; then ``--set``.  Unset symbols stay symbols."""
    values = {S.es: element_bytes(args.precision), S.es_mask: PLAIN.mask_bytes, **(base or {})}
    if arch is not None:
        values.update({S.e: arch.e, S.f: arch.f, S.h: arch.h, S.n_layers: arch.n_layers})
        values.update({k: v for k, v in training_values(arch).items() if k in (S.b, S.l, S.m1, S.s1)})
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
    symbols.  A model contributes its structure (gates, grouped heads, norm, rotary, ...)."""
    get = lambda s: values.get(s, s)  # noqa: E731
    name = name or args.block
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
    if name == "mlp":
        return BUILDERS["mlp"](f=get(S.f), bias=bias, gated_act=structure.get("gated_act", False), **common)
    if name == "layer":
        return BUILDERS["layer"](f=get(S.f), h=get(S.h), bias=bias, qkv_bias=qkv_bias, flash=args.flash,
                                 gated_act=structure.get("gated_act", False), **attention, **common)
    return BUILDERS["attention"](h=get(S.h), qkv_bias=qkv_bias, out_bias=bias, flash=args.flash,
                                 **attention, **common)


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
            raise ValueError(f"--field {field} is a ratio; choose one row with --row")
        return sum((times(r, system, conventions)[field] for r in rows), Integer(0))
    raise ValueError(f"unknown --field {field!r}; known: {', '.join(FIELDS)}")


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
    return float(expr) if expr.is_number else str(expr)


def amount(value, kind: str | None, units: str, digits: int = 4) -> str:
    """``value`` (FLOPs, bytes or seconds; a number or a formula) as text in ``units``."""
    divisor, label = UNITS[units].per(kind)
    scaled = sympify(value) / divisor
    text = f"{float(scaled):.{digits}g}" if scaled.is_number else str(simplify(scaled))
    return f"{text} {label}".rstrip()


def header(column: str, units: str) -> str:
    """A column name with its unit: ``flops_fwd (TFLOP)``."""
    label = UNITS[units].label(column)
    return f"{column} ({label})" if label else column
