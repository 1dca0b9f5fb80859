"""Issue 66, a ninth probe: ``sweep`` and ``search`` as a user drives them.  ``sweep``: grids valid
at some points only (a degree dividing the heads at one point and not another), empty grids,
reversed ranges, duplicate values, a symbol given twice, ``--where`` always false or naming
unknown names, ``--out`` a folder, a folder named ``x.csv``, a missing folder or an existing file,
``--field`` names that do not exist, framework files (Megatron-LM, torchtitan) as the starting
point, and rows compared with ``summary`` at the same point.  ``search``: 1 device, a prime count,
a count past 2**53, global batches no data-parallel degree divides, a sequence past the context,
MoE models (Mixtral, Qwen3 MoE) and ``--json``.  Each finding is a test; the expectations follow
from the rule, not from the library's output."""

import csv
import io
import json
from pathlib import Path

from symbolic_cost.cli import main

INPUTS = Path(__file__).parent / "framework_inputs"
MEGATRON = str(INPUTS / "pretrain_gpt_345m_2021.sh")
"""python pretrain_gpt.py, no launcher: one process, so the layout m1 x cp x p x d is 1 device."""
TORCHTITAN = str(INPUTS / "llama3_8b.toml")
"""data_parallel_shard_degree = -1: d takes the world that --devices gives."""


def _rows(capsys, argv) -> list:
    """The CSV rows ``sweep`` prints."""
    assert main(argv) == 0
    return list(csv.DictReader(io.StringIO(capsys.readouterr().out)))


def _refused_after_notes(capsys, argv, *named) -> str:
    """Exit status 2 and, after the file's notes, one error line naming each of ``named``."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert "Traceback" not in err and last.startswith("symbolic-cost: error:"), err
    assert all(line.startswith("note: ") for line in err.splitlines()[:-1]), err
    for name in named:
        assert name in last, last
    return last


def _summary_total(capsys, argv) -> float:
    """``summary --json``'s step time at one point."""
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["step_time_s"]["total"]


def test_a_framework_grid_point_on_other_devices_is_refused_as_summary_refuses_it(capsys):
    """``sweep --megatron-args FILE --grid d=1,2`` printed a row at d=2, a job of 2 devices, while the
    script launches 1 process; ``summary --set d=2`` on the same file refuses that point (the answer
    would be for another job).  The grid's points now meet the same rule."""
    _refused_after_notes(capsys, ["summary", "--megatron-args", MEGATRON, "--set", "d=2"], "--set d=2", "runs 1")
    _refused_after_notes(capsys, ["sweep", "--megatron-args", MEGATRON, "--grid", "d=1,2", "--field", "total"],
            "--grid at d=2", "= 2 devices", "--megatron-args runs 1")
    assert len(_rows(capsys, ["sweep", "--megatron-args", MEGATRON, "--grid", "d=1", "--field", "total"])) == 1


def test_a_grid_of_degrees_must_keep_the_devices_given(capsys):
    """``sweep --torchtitan FILE --devices 8 --grid d=1,2,4`` printed rows for 1, 2 and 4 devices
    though ``--devices 8`` says the job has 8 (``summary --devices 8 --set d=2`` refuses)."""
    _refused_after_notes(capsys, ["summary", "--torchtitan", TORCHTITAN, "--devices", "8", "--set", "d=2"],
                         "--devices 8 runs 8")
    _refused_after_notes(capsys, ["sweep", "--torchtitan", TORCHTITAN, "--devices", "8", "--grid", "d=1,2,4", "--field", "total"],
            "--grid at d=1", "= 1 devices", "--devices 8 runs 8")


def test_a_where_of_the_degrees_keeps_only_the_points_on_the_devices(capsys):
    """A grid of two degrees whose ``--where`` keeps their product at the devices (``Eq(m1*d, 2)``)
    is not refused for the points it drops: the rows are the two layouts of 2 devices (m1, d) =
    (1, 2) and (2, 1), each the step time ``summary`` gives at that point."""
    base = ["--megatron-args", MEGATRON, "--devices", "2"]
    rows = _rows(capsys, ["sweep", *base, "--grid", "d=1,2", "m1=1,2", "--where", "Eq(m1*d, 2)", "--field", "total"])
    assert sorted((int(float(r["m1"])), int(float(r["d"]))) for r in rows) == [(1, 2), (2, 1)]
    for row in rows:
        point = [f"m1={int(float(row['m1']))}", f"d={int(float(row['d']))}"]
        total = _summary_total(capsys, ["summary", *base, "--set", *point])
        assert abs(float(row["total_s"]) - total) <= 1e-12 * total


def test_a_grid_of_degrees_too_large_to_hold_to_the_devices_is_refused_not_walked(capsys):
    """Holding each point of a framework file's degrees to its devices walks the grid's points of
    ``m1 cp p d``: 1,000 x 1,001 of them (a grid of layouts no file runs) are refused at once,
    naming ``--grid``, instead of checked one by one under a ``--where``."""
    last = _refused_after_notes(capsys, ["sweep", "--megatron-args", MEGATRON, "--devices", "2", "--grid",
                                         "d=1:1000:+1", "m1=1:1001:+1", "--where", "Eq(m1*d, 2)", "--field", "total"],
                                "--grid", "1,001,000 points")
    assert "narrow" in last


def test_a_sweep_of_tensor_degrees_under_op_recompute_is_refused_naming_the_sweep(capsys):
    """``sweep --torchtitan FILE --grid m1=1,2 d=4,8 --where 'Eq(m1*d, 8)'`` on torchtitan's
    op-level recomputation was refused with advice for ``search`` only ("search tries every
    degree"), a command the user did not run.  The refusal now names the sweep's ``--grid`` too."""
    last = _refused_after_notes(capsys, ["sweep", "--torchtitan", TORCHTITAN, "--devices", "8", "--grid", "m1=1,2",
                                         "d=4,8", "--where", "Eq(m1*d, 8)", "--field", "total"], "recompute='op'", "m1")
    assert "sweep its --grid" in last and "sweep m1 at 1 only" in last
