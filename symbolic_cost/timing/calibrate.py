"""Fit the calibrated time model's factors (``efficiency.FITTED``) on measured runs.

``predict(case, system)`` times one measured case (a ``reproduce.measured.Case``: an
architecture, a training, conventions and what was measured); ``fit(cases)`` finds, per GPU
family, the factors that minimise the sum of squared log errors ``log(predicted / measured)``
over the cases (scipy's ``least_squares``, each factor within its ``RANGES``), and then the matrix
fraction of Blackwell's chips (``MATRIX_ONLY``) on theirs; ``write`` stores
them, rounded to three significant digits, with their provenance in ``calibration.json``.
``symbolic-cost calibrate`` runs the three on the project's calibration rows.

The serving runtime's two overheads (``inference.load.Runtime``) are fitted the same way by
``inference.load.fit_serving`` on the serving rows; ``write`` stores them under ``"serving"``
(``symbolic-cost calibrate --serving``).

The fit runs on symbols: each case's time is built once as an expression in the factors
(``matrix_a100``, ...) and ``lambdify`` evaluates it for the optimiser.
"""

from __future__ import annotations

import json
from pathlib import Path

from sympy import Rational, Symbol, lambdify

from symbolic_cost.models.totals import model_cost
from symbolic_cost.timing import efficiency
from symbolic_cost.timing.hardware import calibrated
from symbolic_cost.timing.step import layer_time, step_time_breakdown

FAMILIES = ("a100", "h100")
"""GPU families with all their factors fitted (H200 shares H100's chip, A100-Perlmutter A100's)."""

MATRIX_ONLY = {"b200": "h100", "b300": "h100"}
"""GPU families whose matrix fraction is fitted on their own runs, after ``FAMILIES``, the other
factors taken from the family named (the memory fraction, the per-kernel and per-step costs are the
framework's and the memory system's, which the runs on them do not tell apart): Blackwell's two
chips, B200 (B200, GB200) and B300 (B300, GB300, Blackwell Ultra, which holds higher clocks at its
higher power), fitted on Megatron-Bridge's dense runs on them (``reproduce.measured.fit_cases``).
The fit there is robust (soft L1, a scale of 0.1 in log error): one run the time model misses is a
miss of its own, which a plain least squares would spread over every run on the chip."""


def predict(case, system):
    """Predicted seconds of what ``case`` measured (a step, or one layer's forward and backward)."""
    cost = model_cost(case.architecture, case.training, case.conventions)
    if case.quantity == "layer":
        return layer_time(cost, system, case.conventions)["total"]
    return step_time_breakdown(cost, system, case.conventions)["total"]


def symbolic_time(case):
    """``predict`` on the case's calibrated system with every fitted factor a symbol
    ``<factor>_<family>``."""
    family = efficiency.family(case.system)
    names = {k: Symbol(f"{k}_{family}", positive=True) for k in efficiency.FITTED}
    system = calibrated(case.system)
    return predict(case, system.but(efficiency=system.efficiency.but(**names)))


def fit(cases, grouped=()) -> dict:
    """``{family: {factor: value}}``: the factors of ``FAMILIES`` minimising the squared log errors
    over their ``cases`` (a factor no case constrains takes the other family's value), then the
    matrix fraction of each of ``MATRIX_ONLY`` over its cases (``fit_matrix``), then, where
    ``grouped`` cases are given (runs with grouped GEMMs: the mixtures of experts), the cost of a
    grouped product's further launches, one value for every family (``fit_group_kernel``)."""
    values = _fit_families([c for c in cases if efficiency.family(c.system) in FAMILIES])
    for family, source in MATRIX_ONLY.items():
        mine = [c for c in cases if efficiency.family(c.system) == family]
        values[family] = dict(values[source], **({"matrix": fit_matrix(mine, values[source])} if mine else {}))
    if grouped:
        group_kernel = fit_group_kernel(grouped, values)
        values = {family: dict(factors, group_kernel=group_kernel) for family, factors in values.items()}
    return values


def fit_matrix(cases, others: dict) -> float:
    """The matrix fraction that minimises the soft-L1 loss (scale 0.1) of the log errors over
    ``cases``, the other factors at ``others``."""
    return _fit_one("matrix", cases, lambda case: others)


def fit_group_kernel(cases, values: dict) -> float:
    """The seconds a grouped GEMM's further launches cost (``Efficiency.group_kernel``) that
    minimise the soft-L1 loss (scale 0.1) of the log errors over ``cases``, each on its family's
    ``values``."""
    return _fit_one("group_kernel", cases, lambda case: values[efficiency.family(case.system)])


def _fit_one(name: str, cases, others) -> float:
    """The value of the factor ``name`` that minimises the soft-L1 loss (scale 0.1, in log error: a
    run the model misses for a reason of its own pulls no harder than a few) over ``cases``, each
    case's other factors at ``others(case)``."""
    import numpy as np
    from scipy.optimize import least_squares
    factor = Symbol(name, positive=True)
    functions = []
    for case in cases:
        fixed = {k: Rational(str(v)) for k, v in others(case).items() if k != name}
        system = calibrated(case.system)
        expr = predict(case, system.but(efficiency=system.efficiency.but(**{name: factor}, **fixed)))
        functions.append((lambdify([factor], expr, "math"), float(case.seconds)))
    start, low, high, unit = RANGES[name]

    def residuals(x):
        return [np.log(fn(x[0] * unit) / seconds) for fn, seconds in functions]

    fitted = least_squares(residuals, [start], bounds=([low], [high]), loss="soft_l1", f_scale=0.1).x[0]
    return float(fitted * unit)


def _fit_families(cases) -> dict:
    import numpy as np
    from scipy.optimize import least_squares
    params = [f"{k}_{fam}" for fam in FAMILIES for k in efficiency.FITTED]
    functions = []
    for case in cases:
        expr = symbolic_time(case)
        free = sorted(expr.free_symbols, key=str)
        functions.append((lambdify(free, expr, "numpy"), [params.index(str(s)) for s in free], float(case.seconds)))
    used = sorted({i for _, idx, _ in functions for i in idx})

    ranges = [RANGES[params[i].rsplit("_", 1)[0]] for i in used]
    unit = np.array([r[3] for r in ranges])

    def residuals(x):
        full = np.ones(len(params))
        full[used] = x * unit
        return [np.log(fn(*full[idx]) / seconds) for fn, idx, seconds in functions]

    result = least_squares(residuals, [r[0] for r in ranges], bounds=([r[1] for r in ranges], [r[2] for r in ranges]))
    values = dict(zip([params[i] for i in used], result.x * unit))
    return {fam: {k: values.get(f"{k}_{fam}", values.get(f"{k}_{FAMILIES[1 - FAMILIES.index(fam)]}"))
                  for k in efficiency.FITTED} for fam in FAMILIES}


RANGES = {"matrix": (0.7, 0.05, 1.0, 1.0), "memory": (0.9, 0.8, 1.0, 1.0),
          "kernel": (5.0, 0.0, 100.0, 1e-6), "step": (0.05, 0.0, 5.0, 1.0),
          "group_kernel": (5.0, 0.0, 100.0, 1e-6)}
"""Each fitted factor's ``(start, lower bound, upper bound, unit)``, the bounds in its unit: the
matrix fraction of peak within ``[0.05, 1]``; HBM's within ``[0.8, 1]`` (streaming kernels reach 80 to
93 % of the datasheet bandwidth on these parts: below that the fit would use memory as a stand-in for
fixed costs); the per-kernel cost in microseconds within ``[0, 100]``, a grouped GEMM's further launches' too; the
step's framework seconds within ``[0, 5]``."""


def rounded(value: float) -> str:
    """Three significant digits, as ``calibration.json`` stores a factor; 0 below a nanosecond
    (a fixed cost the fit leaves at its lower bound, 0, to rounding)."""
    return f"{value:.3g}" if abs(value) >= 1e-9 else "0"


PROVENANCE = {
    "command": "symbolic-cost calibrate",
    "method": "scipy.optimize.least_squares on log(predicted / measured), one residual per case, each factor "
              "within its bounds (timing.calibrate.RANGES: matrix in [0.05, 1], memory in [0.8, 1], the kernel "
              "cost in [0, 100] us, the step's framework time in [0, 5] s), rounded to 3 significant digits",
    "note": "fused attention is not fitted: timing.attention_kernels takes it from published kernel benchmarks",
    "matrix_only": "b200 and b300 (Blackwell's two chips): only the matrix fraction is fitted, on the "
                   "Megatron-Bridge dense rows run on them, after a100 and h100 (soft L1 loss, scale 0.1, on the "
                   "log errors; timing.calibrate.fit_matrix); their other factors are h100's",
    "group_kernel": "one value for every family, fitted last on the mixtures of experts' rows (every family's "
                    "other factors as fitted; soft L1 loss, scale 0.1, on the log errors; "
                    "timing.calibrate.fit_group_kernel): the cost of each further cuBLAS GEMM a grouped GEMM "
                    "launches, a local expert's; those rows fit nothing else"}
SERVING_PROVENANCE = {
    "command": "symbolic-cost calibrate --serving",
    "method": "scipy.optimize.least_squares, soft-L1 loss with f_scale 0.1, on log(predicted / measured) of "
              "mean TTFT and mean ITL of every load test (inference.load.serve), rounded to 3 significant digits"}


def write(values: dict | None, case_ids: list[str], source: str, path: Path | None = None,
          serving: tuple | None = None, grouped_ids: list[str] = ()) -> Path:
    """Store fitted factors (``values``; ``case_ids`` the cases of the families' fits, ``grouped_ids``
    those of ``fit_group_kernel``) and/or serving overheads (``serving``: ``(values, case ids,
    source)``) with their provenance, keeping what is not refitted."""
    path = path or Path(efficiency.__file__).with_name("calibration.json")
    record = json.loads(path.read_text()) if path.exists() else {}
    if values is not None:
        record["fitted"] = {fam: {k: rounded(v) for k, v in values[fam].items()} for fam in (*FAMILIES, *MATRIX_ONLY)}
        record["provenance"] = dict(PROVENANCE, data=source, cases=case_ids,
                                    **({"group_kernel_cases": list(grouped_ids)} if grouped_ids else {}))
    if serving is not None:
        fitted, ids, data = serving
        record["serving"] = {k: rounded(v) for k, v in fitted.items()}
        record["serving_provenance"] = dict(SERVING_PROVENANCE, data=data, cases=ids)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def write_bands(bands: dict, case_ids: list[str], path: Path | None = None) -> Path:
    """Store the committed model's error bands (``timing.error_bands.measure``) with the cases
    they were measured on, keeping the rest of ``calibration.json``."""
    path = path or Path(efficiency.__file__).with_name("calibration.json")
    record = json.loads(path.read_text())
    record["bands"] = bands
    record["bands_provenance"] = {"command": "symbolic-cost calibrate --bands --write",
                                  "method": "|predicted / measured - 1| of every measured case (fitted or not) on the "
                                            "committed model, by kind (moe, context-parallel, fsdp, dense) and GPU "
                                            "generation: median and 90th percentile",
                                  "cases": case_ids}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path
