"""Regenerate every report: reproduced tables, formula sheets, analysis and plots."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from symbolic_cost.checks import InputError
from symbolic_cost.files import output_folder
from symbolic_cost.cli import options

EXAMPLES = [
    "symbolic-cost report",
    "symbolic-cost report --out my-reports --small",
]


def add_arguments(parser) -> None:
    options.option(parser, "--out", default="reports", help="folder")
    options.option(parser, "--small", action="store_true", help="one model, few points (for CI)")


def run(args) -> int:
    out = output_folder(args.out, "--out")
    if importlib.util.find_spec("matplotlib") is None:      # checked here so the message is ours
        raise InputError("the report's plots need matplotlib: python -m pip install 'symbolic_cost[report]'")
    from symbolic_cost.report import generate
    generate(Path(out), small=args.small)
    return 0
