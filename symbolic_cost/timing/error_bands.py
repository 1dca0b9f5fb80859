"""How sure a prediction is: the calibrated model's error on published runs of the same family.

Every measured case of ``reproduce.measured`` (fitted or not) is timed by the calibrated model;
its error ``predicted / measured - 1`` is filed under the run's **family**, ``kind/generation``:

* ``kind``: ``moe`` (routed experts), else ``context-parallel`` (``cp > 1``), else ``fsdp``
  (parameters sharded, ZeRO-3), else ``dense``;
* ``generation``: the GPU generation of the system's calibrated efficiency (``ampere``,
  ``hopper``, ``blackwell``; ``Efficiency.arch``).

``measure(rows)`` turns the validation rows into bands, the median and 90th percentile of the
absolute errors of each family, of each kind over every generation, and of all runs;
``symbolic-cost calibrate --write`` stores them in ``calibration.json`` (``"bands"``) and
``band`` answers for a run: its own family's band where the calibration has at least
``MIN_RUNS`` runs of it, else its kind's, else all runs', and says which it used.
"""

from __future__ import annotations

import statistics

MIN_RUNS = 3
"""Fewest calibration runs a band is taken from: fewer say more about those runs than the family."""


def family(architecture, training, system) -> tuple[str, str]:
    """``(kind, generation)`` of a run on a calibrated ``system``."""
    if architecture.moe is not None:
        kind = "moe"
    elif training.cp != 1:
        kind = "context-parallel"
    elif training.zero == 3:
        kind = "fsdp"
    else:
        kind = "dense"
    return kind, system.efficiency.arch


def _p90(magnitudes: list[float]) -> float:
    ordered = sorted(magnitudes)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def _band(errors: list[float]) -> dict:
    magnitudes = [abs(e) for e in errors]
    return {"runs": len(errors), "median": round(statistics.median(magnitudes), 4), "p90": round(_p90(magnitudes), 4)}


def measure(rows, system_of) -> dict:
    """``{key: {"runs", "median", "p90"}}`` of the validation ``rows`` (``(case, peak, calibrated,
    measured)`` seconds, ``report.validation.timed``) by ``kind/generation``, by ``kind`` and
    ``"all"``; ``system_of(case)`` is the calibrated system a case ran on."""
    groups: dict[str, list[float]] = {}
    for case, _, real, seconds in rows:
        kind, generation = family(case.architecture, case.training, system_of(case))
        for key in (f"{kind}/{generation}", kind, "all"):
            groups.setdefault(key, []).append(real / seconds - 1)
    return {key: _band(errors) for key, errors in sorted(groups.items())}


def band(architecture, training, system, bands: dict) -> dict | None:
    """The band of a run: ``{"family", "p90", "median", "runs", "of"}`` where ``of`` names the
    runs it comes from (its family, its kind on every GPU, or all runs); None without bands."""
    if not bands:
        return None
    kind, generation = family(architecture, training, system)
    for key, of in ((f"{kind}/{generation}", f"{kind} runs on {generation}"), (kind, f"{kind} runs on any GPU"),
                    ("all", "all calibration runs")):
        found = bands.get(key)
        if found and found["runs"] >= MIN_RUNS:
            return {"family": f"{kind}/{generation}", **found, "of": of}
    return None


def describe(found: dict | None) -> str:
    """One line for a band: ``expected error ±7.8 % (90th percentile over 9 dense runs on hopper)``."""
    if found is None:
        return "expected error: no calibration runs to say"
    return (f"expected error ±{100 * found['p90']:.1f} % (90th percentile of |error| over {found['runs']} "
            f"{found['of']}; median {100 * found['median']:.1f} %)")
