"""Fit the calibrated time model's factors on the published measured runs, and show how well it predicts them.

Without ``--write`` it prints the fitted factors next to the committed ones (``timing/calibration.json``)
and the errors of the committed model per source; with ``--write`` it stores the new fit there.
"""

from __future__ import annotations

import importlib.util

from symbolic_cost.checks import InputError
from symbolic_cost.cli import options

EXAMPLES = [
    "symbolic-cost calibrate",
    "symbolic-cost calibrate --write",
]


def add_arguments(parser) -> None:
    options.option(parser, "--write", action="store_true",
                   help="store the fitted factors, with their provenance, in timing/calibration.json")


def run(args) -> int:
    if importlib.util.find_spec("scipy") is None:      # checked here so the message is ours
        raise InputError("the fit needs scipy: python -m pip install 'symbolic_cost[fit]'")
    from symbolic_cost.report.validation import summary_lines, timed
    from symbolic_cost.reproduce import measured
    from symbolic_cost.timing import calibrate, efficiency
    cases = measured.cases()
    values = calibrate.fit(cases)
    for family, fitted in values.items():
        committed = efficiency.CALIBRATION["fitted"][family]
        print(f"{family}: " + ", ".join(f"{k} {calibrate.rounded(v)} (committed {committed[k]})"
                                        for k, v in fitted.items()))
    if args.write:
        path = calibrate.write(values, [c.id for c in cases], "symbolic_cost/reproduce/measured/"
                               "calibration-training.json (the project's calibration rows; no other measurement)")
        print(f"wrote {path}")
    print(f"{len(cases)} cases, {len(measured.excluded())} rows not expressible; the committed model's errors:")
    print("\n".join(summary_lines(timed(cases))))
    return 0
