"""Reproductions of published tables: one module per table, a common report format.

Each reproduction returns a list of ``Cell`` (printed value, our value, match);
``run`` writes ``reports/<name>.md`` and returns an ``Outcome`` whose ``line`` is
what ``symbolic-cost reproduce`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cell:
    """One printed value against ours."""

    table: str
    row: str
    column: str
    printed: str
    ours: str
    match: bool


def write_report(path: Path, title: str, preamble: str, cells: list[Cell]) -> None:
    """A Markdown report: a summary line, then every cell grouped by table."""
    matched = sum(cell.match for cell in cells)
    lines = [f"# {title}", "", preamble.strip(), "",
             f"**matched {matched}/{len(cells)}** (regenerate: `symbolic-cost reproduce`)", ""]
    for table in dict.fromkeys(cell.table for cell in cells):
        lines += [f"## {table}", "", "| row | column | printed | ours | match |",
                  "|---|---|---|---|---|"]
        lines += [f"| {c.row} | {c.column} | {c.printed} | {c.ours} | {'yes' if c.match else '**NO**'} |"
                  for c in cells if c.table == table]
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def names() -> list[str]:
    return list(_REGISTRY)


@dataclass(frozen=True)
class Outcome:
    """How one reproduction went: cells matched out of cells compared."""

    name: str
    matched: int
    total: int

    @property
    def ok(self) -> bool:
        return self.matched == self.total

    @property
    def line(self) -> str:
        return f"{self.name}: matched {self.matched}/{self.total}"


def run(name: str, reports: Path) -> Outcome:
    """Run one reproduction, write its report, return its ``Outcome``."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown reproduction {name!r}; known: {', '.join(_REGISTRY)}")
    module = _REGISTRY[name]
    cells = module.compare()
    write_report(reports / f"{name}.md", module.TITLE, module.PREAMBLE, cells)
    return Outcome(name, sum(cell.match for cell in cells), len(cells))


from symbolic_cost.reproduce import (deepflow_lstm, deepspeed_profiler, lbnl_2024,  # noqa: E402  (needs Cell)
               megatron_training_info, ulysses_prefill)

_REGISTRY = {"lbnl-2024": lbnl_2024, "ulysses-prefill": ulysses_prefill,
             "megatron-training-info": megatron_training_info, "deepspeed-profiler": deepspeed_profiler, "deepflow-lstm": deepflow_lstm}
