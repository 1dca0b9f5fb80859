"""Reproductions of published tables: one module per table, a common report format.

Each reproduction has ``compare(conventions=CONVENTIONS)`` returning a list of
``Cell`` (printed value, our value, match) under its tool's preset or any other
conventions (a cell that cannot be computed under them is a mismatch, never an
error); ``run`` writes ``reports/<name>.md`` and returns an ``Outcome`` whose
``line`` is what ``symbolic-cost reproduce`` prints.

Next to ``matched X/Y`` both print how many *distinct numeric values* the Y
printed cells hold (``distinct_numbers``), so that a table of repeated zeros
does not read as hundreds of independent checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from symbolic_cost.checks import InputError
from symbolic_cost.files import report_file


@dataclass(frozen=True)
class Cell:
    """One printed value against ours."""

    table: str
    row: str
    column: str
    printed: str
    ours: str
    match: bool


_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")
_UNIT = re.compile(r"\s*[A-Za-z%]+")


def printed_number(text: str) -> Decimal | None:
    """The number a printed cell shows, or ``None`` when it is not one number.

    A number is an optional sign, digits (optionally grouped by commas in threes),
    optional decimals and exponent, optionally followed by one unit word
    (``MB``, ``GMACs``, ``M``, ``%``), which is dropped.  Blanks, ``-``, words and
    lists (``3750, 16384``, ``[n0_g0 n0_g1]``) are not numbers.

    >>> printed_number("771,106,304"), printed_number("44.7 GMACs"), printed_number("2.5e-05")
    (Decimal('771106304'), Decimal('44.7'), Decimal('0.000025'))
    >>> printed_number(""), printed_number("-"), printed_number("3750, 16384"), printed_number("nvlink")
    (None, None, None, None)
    """
    text = text.strip()
    number = _NUMBER.match(text).group(0)
    rest = text[len(number):]
    if not any(ch.isdigit() for ch in number.split("e")[0].split("E")[0]):
        return None
    if rest and not _UNIT.fullmatch(rest):
        return None
    return Decimal(number.replace(",", "")).normalize()


def distinct_numbers(cells: list[Cell]) -> int:
    """How many different numbers the printed cells show: cells whose printed text is a
    number (``printed_number``), each value counted once across all tables of the
    reproduction; equal values are one value whatever their printed form or unit
    (``0``, ``0.0`` and ``0.00 MB`` count once)."""
    return len({value for value in map(printed_number, (c.printed for c in cells)) if value is not None})


def summary(matched: int, total: int, distinct: int) -> str:
    """``matched X/Y (N distinct numeric values)``."""
    return f"matched {matched}/{total} ({distinct} distinct numeric values)"


def write_report(path: Path, title: str, preamble: str, cells: list[Cell]) -> None:
    """A Markdown report: a summary line, then every cell grouped by table."""
    matched = sum(cell.match for cell in cells)
    lines = [f"# {title}", "", preamble.strip(), "",
             f"**{summary(matched, len(cells), distinct_numbers(cells))}** "
             "(regenerate: `symbolic-cost reproduce`)", ""]
    for table in dict.fromkeys(cell.table for cell in cells):
        lines += [f"## {table}", "", "| row | column | printed | ours | match |",
                  "|---|---|---|---|---|"]
        lines += [f"| {c.row} | {c.column} | {c.printed} | {c.ours} | {'yes' if c.match else '**NO**'} |"
                  for c in cells if c.table == table]
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    report_file(path).write_text("\n".join(lines))


def names() -> list[str]:
    """The registered reproductions, in the order ``symbolic-cost reproduce`` runs them."""
    return list(_REGISTRY)


def chosen(asked) -> list[str]:
    """The reproductions ``asked`` (all, in ``names`` order, when none), each known and named once:
    checked before any runs (an unknown name was refused after the ones before it had written
    their reports, and one named twice ran twice).

    >>> chosen([]) == names(), chosen(["deepflow-lstm"])
    (True, ['deepflow-lstm'])
    """
    for name in asked:
        module(name)
    twice = sorted({name for name in asked if list(asked).count(name) > 1})
    if twice:
        raise InputError(f"reproduction {twice[0]!r} is named twice; name each once", "name")
    return list(asked) or names()


def module(name: str):
    """The reproduction module registered as ``name``."""
    if name not in _REGISTRY:
        raise InputError(f"unknown reproduction {name!r}; known: {', '.join(_REGISTRY)}", "name")
    return _REGISTRY[name]


@dataclass(frozen=True)
class Outcome:
    """How one reproduction went: cells matched out of cells compared, and how many
    distinct numeric values the compared printed cells hold."""

    name: str
    matched: int
    total: int
    distinct: int

    @property
    def ok(self) -> bool:
        return self.matched == self.total

    @property
    def line(self) -> str:
        return f"{self.name}: {summary(self.matched, self.total, self.distinct)}"


def run(name: str, reports: Path) -> Outcome:
    """Run one reproduction under its tool's preset, write its report, return its ``Outcome``."""
    reproduction = module(name)
    cells = reproduction.compare()
    write_report(reports / f"{name}.md", reproduction.TITLE, reproduction.PREAMBLE, cells)
    return Outcome(name, sum(cell.match for cell in cells), len(cells), distinct_numbers(cells))


from symbolic_cost.reproduce import (deepflow_lstm, deepspeed_profiler, lbnl_2024,  # noqa: E402  (needs Cell)
                                     megatron_training_info, ulysses_prefill)

_REGISTRY = {"lbnl-2024": lbnl_2024, "ulysses-prefill": ulysses_prefill,
             "megatron-training-info": megatron_training_info, "deepspeed-profiler": deepspeed_profiler,
             "deepflow-lstm": deepflow_lstm}
