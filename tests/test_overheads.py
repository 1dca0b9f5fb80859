"""GPU overheads (``models.overheads``): none by default, and ``--overheads hopper`` adds the
CUDA context (723 MiB), cuBLAS's Hopper workspace (32 MiB) and one ring's NCCL buffers over two
channels (2 channels x 2 connections x 4 MiB = 16 MiB), 771 MiB, counted here by hand."""

import json

from symbolic_cost.cli import main
from symbolic_cost.models.overheads import OVERHEADS, Overheads, nccl_buffers

MIB = 2**20
HOPPER = (723 + 32 + 2 * 2 * 4) * MIB
H100 = 81_559 * MIB
"""An H100's memory as nvidia-smi reports it."""


def _json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_hopper_overheads_by_hand():
    assert OVERHEADS["hopper"].device_bytes(0) == HOPPER and nccl_buffers(3, 8) == 3 * 8 * 2 * 4 * MIB
    assert OVERHEADS["none"].device_bytes(12345) == 12345
    doubled = Overheads(workspace=1, context=10, nccl=100, fragmentation=2)
    assert doubled.device_bytes(1000) == 2 * 1001 + 110 and doubled.room(2 * 1001 + 110) == 1000


def test_summary_counts_none_by_default_and_hopper_when_asked(capsys):
    base = ["summary", "--preset", "gpt2", "--set", "b=4", "l=1024"]
    plain, hopper = _json(capsys, base)["peak"], _json(capsys, base + ["--overheads", "hopper"])["peak"]
    assert plain["overheads"] == "none" and "device_bytes" not in plain
    assert hopper["overheads"] == "hopper" and hopper["device_bytes"] == plain["bytes"] + HOPPER
    assert hopper["largest_micro_batch"] < plain["largest_micro_batch"]
    assert main(base) == 0
    assert "GPU overheads not counted (--overheads hopper)" in capsys.readouterr().out


def test_the_largest_micro_batch_leaves_room_for_the_overheads():
    """With the overheads the batch is the one whose peak fits an H100 (81,559 MiB) less 771 MiB."""
    from symbolic_cost.models import Training, model_cost
    from symbolic_cost.models.config import preset
    from symbolic_cost.models.peak import largest_micro_batch, peak_bytes
    n = largest_micro_batch(preset("gpt2"), Training(l=1024), H100, overheads="hopper")
    peak = lambda b: peak_bytes(model_cost(preset("gpt2"), Training(b=b, l=1024)))  # noqa: E731
    assert peak(n) + HOPPER <= H100 < peak(n + 1) + HOPPER


def test_inference_counts_the_overheads_in_the_largest_batch(capsys):
    base = ["inference", "--preset", "llama-2-7b", "--set", "b=8", "l_in=2048", "l_out=256"]
    plain, hopper = _json(capsys, base), _json(capsys, base + ["--overheads", "hopper"])
    assert "device_bytes" not in plain and hopper["device_bytes"] == hopper["peak_bytes"] + HOPPER
    assert hopper["max_batch"] <= plain["max_batch"]
    from symbolic_cost.inference import Serving
    from symbolic_cost.inference.peak import serving_peak
    from symbolic_cost.models.config import preset
    peak = lambda b: serving_peak(preset("llama-2-7b"), Serving(b=b, l_in=2048, l_out=256))  # noqa: E731
    n = hopper["max_batch"]
    assert peak(n) + HOPPER <= H100 < peak(n + 1) + HOPPER


def test_overheads_beside_fields_that_do_not_use_them_are_refused(capsys):
    assert main(["inference", "--preset", "gpt2", "--field", "tpot_s", "--overheads", "hopper"]) == 2
    assert "--overheads" in capsys.readouterr().err
    assert main(["inference", "--preset", "llama-2-7b", "--set", "l_in=4096", "cp=4", "--flash",
                 "--overheads", "hopper"]) == 2
    assert "--overheads" in capsys.readouterr().err
