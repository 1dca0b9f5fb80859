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
    "symbolic-cost calibrate --serving --write",
    "symbolic-cost calibrate --attention",
    "symbolic-cost calibrate --bands --write",
]


def add_arguments(parser) -> None:
    options.option(parser, "--write", action="store_true",
                   help="store the fitted factors, with their provenance, in timing/calibration.json")
    options.option(parser, "--serving", action="store_true",
                   help="also fit the serving runtime's step and request overheads on the TensorRT-LLM load "
                        "tests (each fit step simulates all 36; about two minutes)")
    options.option(parser, "--attention", action="store_true",
                   help="fit only the fused attention kernels' constants on their published benchmarks "
                        "(timing/attention_kernels.json); refit the training factors after writing them")
    options.option(parser, "--bands", action="store_true",
                   help="measure the committed model's error on every measured run, by family (with --write, "
                        "store the bands summary and search print; run after a --write of the factors)")


SOURCE = ("symbolic_cost/reproduce/measured/calibration-{}.json (the project's calibration rows; "
          "no other measurement)")


def _fit_serving(calibrate, measured) -> tuple:
    """Fit the serving overheads, printing each trial; ``(values, case ids, source)``."""
    import sys
    from symbolic_cost.inference import load
    from symbolic_cost.timing import efficiency
    cases = measured.serving_cases()
    print(f"fitting the serving overheads on {len(cases)} load tests ...", file=sys.stderr)
    values = load.fit_serving(cases, progress=lambda ms: print(
        "  trying " + ", ".join(f"{k} {v:.3f} {unit}" for k, v, unit in zip(load.SERVING, ms, ("ms", "us", "ms"))),
        file=sys.stderr))
    committed = efficiency.CALIBRATION.get("serving", {})
    print("serving: " + ", ".join(f"{k} {calibrate.rounded(v)} s (committed {committed.get(k, 'none')})"
                                  for k, v in values.items()))
    return values, [c.id for c in cases], SOURCE.format("inference")


def _fit_attention(write: bool) -> int:
    """Fit, print (against the committed constants) and with ``write`` store the kernels' constants."""
    from symbolic_cost.timing import attention_kernels
    values = attention_kernels.fit_all()
    committed = attention_kernels.BENCHMARKS.get("fitted", {})
    for name, fitted in values.items():
        print(f"{name}: " + ", ".join(f"{k} {v:.3g} (committed {committed.get(name, {}).get(k, 'none')})"
                                      for k, v in fitted.items()))
    if write:
        print(f"wrote {attention_kernels.write(values)}")
    return 0


def _store_bands(write: bool) -> int:
    """Time every measured case on the committed model, print its error bands by family, and with
    ``write`` store them."""
    from symbolic_cost.report.validation import timed
    from symbolic_cost.reproduce import measured
    from symbolic_cost.timing import calibrate, error_bands
    from symbolic_cost.timing.hardware import calibrated
    cases = measured.cases()
    bands = error_bands.measure(timed(cases), lambda case: calibrated(case.system), error_bands.case_parameters)
    for key, found in bands.items():
        print(f"{key}: {found['runs']} runs, median {100 * found['median']:.1f} %, p90 {100 * found['p90']:.1f} %")
    if write:
        print(f"wrote {calibrate.write_bands(bands, [c.id for c in cases])}")
    return 0


def run(args) -> int:
    if importlib.util.find_spec("scipy") is None:      # checked here so the message is ours
        raise InputError("the fit needs scipy: python -m pip install 'symbolic_cost[fit]'")
    alone = [flag for flag, on in (("--attention", args.attention), ("--bands", args.bands)) if on]
    others = [flag for flag, on in (("--attention", args.attention), ("--bands", args.bands),
                                    ("--serving", args.serving)) if on]
    if alone and len(others) > 1:       # each is a run of its own: the others would be dropped
        raise InputError(f"{alone[0]} runs alone (with --write only); give {' and '.join(f for f in others if f != alone[0])} "
                         f"in a run of its own", alone[0])
    if args.attention:
        return _fit_attention(args.write)
    if args.bands:
        return _store_bands(args.write)
    from symbolic_cost.report.validation import summary_lines, timed
    from symbolic_cost.reproduce import measured
    from symbolic_cost.timing import calibrate, efficiency
    cases = measured.fit_cases()          # NOT_FITTED's rows are timed in the report, not fitted
    grouped = measured.grouped_cases()    # and the grouped GEMMs' launch cost on the mixtures of experts
    values = calibrate.fit(cases, grouped)
    for family, fitted in values.items():
        committed = efficiency.CALIBRATION["fitted"][family]
        print(f"{family}: " + ", ".join(f"{k} {calibrate.rounded(v)} (committed {committed.get(k, 'none')})"
                                        for k, v in fitted.items()))
    serving = _fit_serving(calibrate, measured) if args.serving else None
    if args.write:
        path = calibrate.write(values, [c.id for c in cases], SOURCE.format("training"), serving=serving,
                               grouped_ids=[c.id for c in grouped])
        print(f"wrote {path}")
    print(f"{len(cases)} cases, {len(measured.excluded())} rows not expressible; the committed model's errors:")
    print("\n".join(summary_lines(timed(cases))))
    return 0
