"""Recompute the reproduced published tables and rewrite their reports; exit 1 on any mismatch."""

from __future__ import annotations

from pathlib import Path

from symbolic_cost import reproduce
from symbolic_cost.files import output_folder
from symbolic_cost.cli import options

EXAMPLES = [
    "symbolic-cost reproduce",
    f"symbolic-cost reproduce {reproduce.names()[0]} --reports my-reports",
]


def add_arguments(parser) -> None:
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"which reproductions (default: all of {', '.join(reproduce.names())})")
    options.option(parser, "--reports", default="reports", help="folder for the reports")


def run(args) -> int:
    reports = output_folder(args.reports, "--reports")
    failed = False
    for name in reproduce.chosen(args.names):
        outcome = reproduce.run(name, Path(reports))
        print(outcome.line)
        failed |= not outcome.ok
    return 1 if failed else 0
