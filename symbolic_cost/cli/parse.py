"""Reading what the command line sets: ``--set NAME=VALUE`` (each value read by the safe
reader and checked against what its symbol promises), values that refer to others, ``--where``
conditions, ``--grid NAME=V1,V2,...`` sweeps (and ranges, ``b=1:64:x2``) and lists of symbol names.

Every formula typed on the command line is read by ``symbolic_cost.reader``, never evaluated as
Python.  ``cli.values`` gathers this module with the others the commands read.
"""

from __future__ import annotations

import argparse
import math

from sympy import sympify

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, InputTypeError, fits, listed_once, shown
from symbolic_cost.reader import bounded, read, read_number


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
        raise InputError(f"{option} expects name=value, got {shown(text)}", option)
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


def resolve(base: dict, sets: list[str], allowed=None, option: str = "--set", fixed=()) -> dict:
    """Apply ``--set`` overrides to ``base`` and resolve values that refer to others
    (``substituted``); ``allowed`` limits which symbols may be set and referred to, and a value
    may not refer to one of ``fixed`` (what the command fixes: the element sizes of
    ``--precision``) unless that is set too.  A set value is checked again once resolved
    (``f=e/3`` with ``e=4096`` is not an integer)."""
    given = assignments(sets, option, allowed)
    values = substituted({**base, **given}, option)
    for symbol in given:
        fits(symbol, values[symbol], f"{option} {symbol}")
        refused_reference(symbol, given, allowed, fixed, option)
    return values


def refused_reference(symbol, given: dict, allowed, fixed, option: str) -> None:
    """Refuse a ``--set`` value that refers to a symbol the model or the command fixes: left a
    symbol it would not be the model's (a whole-model command), put in it would be a number the
    value does not show (``l=es`` turning into ``l=2``).  Checked on the value as typed, so a
    block command and a whole-model command answer ``l=es`` alike."""
    refs = sympify(given[symbol]).free_symbols
    foreign = sorted(str(s) for s in refs if (allowed is not None and s not in allowed)
                     or (s in fixed and s not in given))
    if not foreign:
        return
    settable = "give a number, or --set it too" if allowed is None else f"settable: {', '.join(map(str, allowed))}"
    raise InputError(f"{option} {symbol}={given[symbol]} refers to {', '.join(foreign)}, which the model "
                     f"fixes here; {settable}", option)


MAX_GRID = 10**8
"""Most configurations one ``--grid`` may describe (a sweep of about two minutes); split a
larger grid, or use ``numeric.dask_sweep.sweep_dask`` on a cluster."""


MAX_RANGE = 10**5
"""Most values one ``--grid`` range (``grid_range``), or one axis in all, may hold: each is checked
before the sweep."""


def grid_range(text: str, name: str) -> list:
    """The values of one range of ``--grid``, ``STOP`` included when the steps reach it:
    ``START:STOP:xK`` multiplies by ``K`` (geometric), ``START:STOP:+K`` (or ``:K``) adds ``K``
    (arithmetic), ``START:STOP`` adds 1.  Integers only (list other values one by one), at most
    ``MAX_RANGE`` values.

    >>> grid_range("1:64:x2", "b"), grid_range("2:9:+3", "p"), grid_range("3:5", "d")
    ([1, 2, 4, 8, 16, 32, 64], [2, 5, 8], [3, 4, 5])
    """
    if not isinstance(text, str):
        raise InputTypeError(f"{name}: a range is text (START:STOP, START:STOP:+STEP or START:STOP:xFACTOR), got "
                             f"{shown(text)}", name)
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(part.strip() for part in parts):
        raise InputError(f"{name}: a range is START:STOP, START:STOP:+STEP or START:STOP:xFACTOR, got {shown(text)}",
                         name)
    step = parts[2].strip() if len(parts) == 3 else "+1"
    geometric = step[0] in "x*"
    start, stop, by = (read_number(part.strip(), argument=f"{name} ({what})") for part, what in
                       ((parts[0], "start"), (parts[1], "stop"), (step.lstrip("x*+"), "step")))
    if not all(v.is_Integer for v in (start, stop, by)):
        raise InputError(f"{name}: a range's start, stop and step are integers, got {shown(text)}; list other values "
                         f"one by one (V1,V2,...)", name)
    if start > stop or by < (2 if geometric else 1) or (geometric and start < 1):
        rule = "from a START of at least 1 by a factor of at least 2" if geometric else "by a step of at least 1"
        raise InputError(f"{name}: a range goes up to STOP {rule}, got {shown(text)}", name)
    values, value = [], start
    while value <= stop:            # each step grows the value, so MAX_RANGE bounds the work
        if len(values) == MAX_RANGE:
            raise InputError(f"{name}: the range {text!r} holds more than {MAX_RANGE:,} values; use a larger "
                             f"step or factor", name)
        values.append(value)
        value = value * by if geometric else value + by
    return values


def grid_option(allowed, option: str = "--grid"):
    """An argparse type for ``NAME=V1,V2,...`` with NAME one of ``allowed``: each value a number
    the safe reader reads, or a range (``grid_range``), that the symbol admits (``checks.fits``);
    returns ``(name, values)``."""
    known = ", ".join(map(str, allowed))

    def grid_type(text: str) -> tuple[str, list]:
        name, sep, values = text.partition("=")
        name = name.strip()
        if not sep or name not in map(str, allowed):
            raise argparse.ArgumentTypeError(f"expects NAME=V1,V2,... with NAME one of {known}; got {shown(text)}")
        items = values.split(",")
        if len(items) > MAX_RANGE:      # each value is read and checked before the sweep, as a range's
            raise argparse.ArgumentTypeError(f"{name}: {len(items):,} values listed, more than {MAX_RANGE:,}; use "
                                             f"a range (START:STOP:+STEP) with a larger step")
        try:
            read = [fits(S.BY_NAME[name], v, name) for item in items
                    for v in (grid_range(item, name) if ":" in item else [read_number(item, argument=name)])]
            if len(read) > MAX_RANGE:
                raise InputError(f"{name}: {len(read):,} values, more than {MAX_RANGE:,} an axis", name)
            listed_once(read, name)      # each would be a row again, the same configuration answered twice
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
                         f"(or use numeric.dask_sweep.sweep_dask on a cluster)", option)
    return grid


def symbol_names(text: str, option: str) -> list:
    """Comma-separated symbol names (``--leading e,l``, ``--diff l``) as symbols."""
    names = [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in S.BY_NAME]
    if unknown or not names:
        raise InputError(f"{option}: unknown name(s) {', '.join(map(repr, unknown))}; known: "
                         f"{', '.join(S.BY_NAME)}", option)
    listed_once(names, option, "named", "name each once")
    return [S.BY_NAME[name] for name in names]


def symbol_name(text: str, option: str):
    """The one symbol an option names (``--over m1``, ``--for l``, ``--diff l``): a list is refused
    by name (it was unpacked into one, a Python error, or read as one unknown name)."""
    names = symbol_names(text, option)
    if len(names) != 1:
        raise InputError(f"{option} takes one symbol, got {shown(text)}", option)
    return names[0]
