"""The expected error of a prediction (timing.error_bands): families by hand, bands of synthetic
errors worked by hand, the fallback when a family has too few runs, and the committed bands
measured again from the committed model."""

import json
from types import SimpleNamespace

import pytest

from symbolic_cost.models import Training
from symbolic_cost.models.config import preset
from symbolic_cost.timing import error_bands
from symbolic_cost.timing.efficiency import CALIBRATION
from symbolic_cost.timing.hardware import calibrated

DENSE = preset("llama-2-7b")


def test_a_run_is_filed_by_what_it_runs_and_where():
    h100, a100 = calibrated("h100"), calibrated("a100")
    assert error_bands.family(DENSE, Training(), h100) == ("dense", "hopper")
    assert error_bands.family(DENSE, Training(cp=2, l=4096, flash=True), a100) == ("context-parallel", "ampere")
    assert error_bands.family(DENSE, Training(zero=3, d=8), calibrated("b200")) == ("fsdp", "blackwell")


def _rows(errors_by_system):
    """Validation rows whose calibrated seconds are ``1 + error`` of a measured 1 s."""
    return [(SimpleNamespace(architecture=DENSE, training=Training(), system=system), None, 1 + e, 1.0)
            for system, errors in errors_by_system.items() for e in errors]


def test_bands_are_the_median_and_90th_percentile_of_the_absolute_errors():
    # ten hopper errors: |e| sorted 0.01 .. 0.10; the median (0.055) and the 90th percentile by
    # nearest rank, index round(0.9 x 9) = 8: 0.09
    errors = [0.01, -0.02, 0.03, -0.04, 0.05, -0.06, 0.07, -0.08, 0.09, -0.10]
    bands = error_bands.measure(_rows({"h100": errors}), lambda case: calibrated(case.system))
    assert bands["dense/hopper"] == {"runs": 10, "median": 0.055, "p90": 0.09}
    assert bands["dense"] == bands["all"] == bands["dense/hopper"]


def test_a_family_with_too_few_runs_takes_its_kinds_band_then_all_runs():
    rows = _rows({"h100": [0.1, 0.2, 0.3], "b200": [0.5]})
    bands = error_bands.measure(rows, lambda case: calibrated(case.system))
    on_blackwell = error_bands.band(DENSE, Training(), calibrated("b200"), bands)
    assert on_blackwell["of"] == "dense runs on any GPU" and on_blackwell["runs"] == 4
    sharded = error_bands.band(DENSE, Training(zero=3, d=4), calibrated("h100"), bands)     # no FSDP run at all
    assert sharded["of"] == "all calibration runs"
    assert error_bands.band(DENSE, Training(), calibrated("h100"), bands)["p90"] == 0.3
    assert "±30.0 %" in error_bands.describe(error_bands.band(DENSE, Training(), calibrated("h100"), bands))


def test_a_model_outside_the_sizes_of_its_bands_runs_is_said_to_be():
    # three hopper runs of 7B, 70B and 405B parameters: 1B and 1T lie outside, 70B inside
    rows = _rows({"h100": [0.1, 0.2, 0.3]})
    sizes = iter([7 * 10**9, 70 * 10**9, 405 * 10**9])
    bands = error_bands.measure(rows, lambda case: calibrated(case.system), lambda case: next(sizes))
    assert bands["dense/hopper"]["parameters"] == [7 * 10**9, 405 * 10**9]
    h100 = calibrated("h100")
    assert "outside" not in error_bands.band(DENSE, Training(), h100, bands, 70 * 10**9)
    assert "outside" not in error_bands.band(DENSE, Training(), h100, bands)          # no size given
    small = error_bands.band(DENSE, Training(), h100, bands, 10**9)
    assert small["outside"] == {"parameters": 10**9, "range": [7 * 10**9, 405 * 10**9]}
    assert "this model's 1B parameters lie outside those runs' 7B to 405B" in error_bands.describe(small)
    assert "outside" in error_bands.band(DENSE, Training(), h100, bands, 10**12)


def test_the_committed_bands_are_the_committed_models_errors():
    from symbolic_cost.report.validation import timed
    from symbolic_cost.reproduce import measured
    cases = measured.cases()
    assert CALIBRATION["bands_provenance"]["cases"] == [c.id for c in cases]
    assert CALIBRATION["bands"] == error_bands.measure(timed(cases), lambda case: calibrated(case.system),
                                                       error_bands.case_parameters)


def test_summary_prints_the_band_of_its_family(capsys):
    from symbolic_cost.cli import main
    settings = ["--preset", "gpt2", "--set", "b=8", "l=1024", "d=8"]
    assert main(["summary", *settings, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["predicted"]["expected_error"]
    # GPT-2 small's 124,439,808 parameters (OpenAI's release) are fewer than any calibration run's
    assert found == error_bands.band(preset("gpt2"), Training(), calibrated("h100"), CALIBRATION["bands"],
                                     124_439_808)
    assert found["outside"]["parameters"] == 124_439_808
    assert main(["summary", *settings]) == 0
    assert error_bands.describe(found) in capsys.readouterr().out
    assert main(["summary", *settings, "--json", "--ideal"]) == 0
    assert "expected_error" not in json.loads(capsys.readouterr().out)["predicted"]


def test_bands_are_stored_only_with_write(monkeypatch, capsys):
    """``calibrate --bands`` measured and stored in one go, into the installed package; it stores only
    with ``--write`` now, as every other fit of the command."""
    from symbolic_cost.cli import main
    from symbolic_cost.reproduce import measured
    from symbolic_cost.timing import calibrate, error_bands
    stored = []
    monkeypatch.setattr(measured, "cases", lambda: [])
    monkeypatch.setattr(error_bands, "measure", lambda *args: {"all": {"runs": 0, "median": 0.0, "p90": 0.0}})
    monkeypatch.setattr(calibrate, "write_bands", lambda *args: stored.append(args) or "calibration.json")
    assert main(["calibrate", "--bands"]) == 0 and not stored
    assert main(["calibrate", "--bands", "--write"]) == 0 and len(stored) == 1
    assert "wrote calibration.json" in capsys.readouterr().out
