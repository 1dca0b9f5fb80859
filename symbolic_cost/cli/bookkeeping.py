"""Symbol bookkeeping: which symbols the blocks a command builds depend on, and the options
a command cannot honour, refused, never ignored (``--set`` of a symbol the blocks do not read,
``--flash`` without attention, ``--system`` for counts, ``--at`` of a symbol the formula lacks).
"""

from __future__ import annotations

from sympy import sympify

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError
from symbolic_cost.cli.building import build_block
from symbolic_cost.cli.options import given as on_command_line
from symbolic_cost.cli.parse import assignments
from symbolic_cost.cost import EXPRESSION_FIELDS
from symbolic_cost.numeric.tables import COST_COLUMNS
from symbolic_cost.timing.hardware import TIME_FIELDS


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
            raise InputError(f"--set {symbol}: nothing in {what} depends on {symbol}; it would be ignored", "--set")
    if not attention:
        for flag, on in (("--flash", getattr(args, "flash", False)), ("--no-qkv-bias", getattr(args, "no_qkv_bias", False))):
            if on:
                raise InputError(f"{flag}: {what} has no attention; it would be ignored", flag)


def block_symbols(args, arch, *names) -> set:
    """The symbols the blocks ``names`` depend on, built with every dimension a symbol (a mixture
    of experts' ``etp`` its own, where it would otherwise follow ``m1``)."""
    free = {S.etp: S.etp} if arch is not None and arch.moe is not None else {}
    return symbols_of(*(build_block(args, free, arch, name) for name in names))


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


def is_timed(*fields: str) -> bool:
    """Whether one of ``fields`` is a time (or a ratio of times): ``"time"``, or a row's time field."""
    return any(f == "time" or COST_COLUMNS.get(f, f) in TIME_FIELDS for f in fields)


def honour_system(args, *fields: str) -> None:
    """Refuse ``--system`` and ``--kernel-time`` when none of ``fields`` is a time (or a ratio
    of times): counts of FLOPs and bytes do not depend on the hardware, so they would be ignored."""
    timed = is_timed(*fields)
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
