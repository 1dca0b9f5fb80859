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


def case_parameters(case) -> int:
    """The parameters of a measured case's model (``size_of`` of ``measure``)."""
    from symbolic_cost.models.totals import model_cost
    return int(model_cost(case.architecture, case.training, case.conventions).parameters)


def measure(rows, system_of, size_of=None) -> dict:
    """``{key: {"runs", "median", "p90"}}`` of the validation ``rows`` (``(case, peak, calibrated,
    measured)`` seconds, ``report.validation.timed``) by ``kind/generation``, by ``kind`` and
    ``"all"``; ``system_of(case)`` is the calibrated system a case ran on.  With ``size_of(case)``
    (a model's parameters) each band also holds ``"parameters"``: the smallest and the largest of
    its runs."""
    groups: dict[str, list[float]] = {}
    sizes: dict[str, list[int]] = {}
    for case, _, real, seconds in rows:
        kind, generation = family(case.architecture, case.training, system_of(case))
        size = None if size_of is None else int(size_of(case))
        for key in (f"{kind}/{generation}", kind, "all"):
            groups.setdefault(key, []).append(real / seconds - 1)
            if size is not None:
                sizes.setdefault(key, []).append(size)
    return {key: {**_band(errors), **({"parameters": [min(sizes[key]), max(sizes[key])]} if key in sizes else {})}
            for key, errors in sorted(groups.items())}


def band(architecture, training, system, bands: dict, parameters=None) -> dict | None:
    """The band of a run: ``{"family", "p90", "median", "runs", "of"}`` where ``of`` names the
    runs it comes from (its family, its kind on every GPU, or all runs); None without bands.
    Given the run's ``parameters``, a model smaller or larger than every run of the band adds
    ``"outside": {"parameters", "range"}``: the band was measured on models unlike it (a small
    model's step is mostly the fixed costs a kernel pays, fitted on large ones)."""
    if not bands:
        return None
    kind, generation = family(architecture, training, system)
    for key, of in ((f"{kind}/{generation}", f"{kind} runs on {generation}"), (kind, f"{kind} runs on any GPU"),
                    ("all", "all calibration runs")):
        found = bands.get(key)
        if found and found["runs"] >= MIN_RUNS:
            found = {"family": f"{kind}/{generation}", **found, "of": of}
            span = found.get("parameters")
            if span and _whole(parameters) and not span[0] <= int(parameters) <= span[1]:
                found["outside"] = {"parameters": int(parameters), "range": list(span)}
            return found
    return None


def _whole(value) -> bool:
    """Whether ``value`` is a number of parameters (not None, not a symbolic count)."""
    return value is not None and getattr(value, "is_Integer", isinstance(value, int))


def _size(n: int) -> str:
    return next(f"{n / 10 ** k:.3g}{unit}" for k, unit in ((12, "T"), (9, "B"), (6, "M"), (0, "")) if n >= 10 ** k
                or k == 0)


def describe(found: dict | None) -> str:
    """One line for a band: ``expected error ±7.8 % (90th percentile over 9 dense runs on hopper)``,
    and where the run's model is outside the band's sizes, so."""
    if found is None:
        return "expected error: no calibration runs to say"
    line = (f"expected error ±{100 * found['p90']:.1f} % (90th percentile of |error| over {found['runs']} "
            f"{found['of']}; median {100 * found['median']:.1f} %)")
    if "outside" in found:
        low, high = found["outside"]["range"]
        line += (f"; but this model's {_size(found['outside']['parameters'])} parameters lie outside those runs' "
                 f"{_size(low)} to {_size(high)}: the band may not hold")
    return line
