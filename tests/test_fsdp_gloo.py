"""FSDP2 / HSDP against PyTorch itself: ``tests/fsdp_gloo.py`` runs ``fully_shard`` on a tiny
Llama over 2 and 4 gloo processes on the CPU and records every collective and the gathered
weights; the library's ``model_cost`` of the same model and layout must book the same.

Measured (torch 2.13, fp32, 8 tokens; units: embedding 1,024, 2 layers of 2,592, norm + head
1,040 parameters): per step and rank, all-gathers of 7,248 elements in forward and again in
backward, reduce-scatters of 7,248, and under HSDP 2 x 2 all-reduces of 3,624 (the gradient
shard) across ranks 2 apart; AdamW's moments 28,992 bytes a rank (its 3,624-parameter
shard); 20,736 bytes of gathered weights at most (two layers); without
resharding, 28,992 at the loss (every unit) and 0 after backward.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
import torch.distributed as dist  # noqa: E402

from symbolic_cost.cost import ring_share  # noqa: E402
from symbolic_cost.models import Training, model_cost  # noqa: E402
from symbolic_cost.models.config import from_config  # noqa: E402
from symbolic_cost.models.peak import gather_bytes  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from fsdp_gloo import CONFIG, LAYOUTS, TOKENS  # noqa: E402

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


@pytest.fixture(scope="module")
def measured():
    """Every layout's records, one run of the script (about 20 s)."""
    done = subprocess.run([sys.executable, str(HERE / "fsdp_gloo.py")], capture_output=True, text=True,
                          timeout=300, cwd=HERE.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    assert len(runs) == len(LAYOUTS)
    return {layout: records for layout, records in zip(LAYOUTS, runs)}


def library(world, shard, reshard):
    t = Training(b=1, l=TOKENS, d=world, zero=3, shard=None if shard == world else shard, precision="fp32",
                 reshard_after_forward=reshard)
    return model_cost(from_config(dict(CONFIG)), t)


def booked(cost) -> dict:
    """The library's data collectives: (kind, pass) -> (whole tensor bytes, group, stride)."""
    return {(c.kind, c.pass_): (c.tensor_bytes, c.group, c.stride) for dim, c in cost.collectives if dim == "data"}


def observed(calls) -> dict:
    """The same from PyTorch's calls: tensors summed over the units, one group and spacing each."""
    out = {}
    for call in calls:
        key = (call["kind"], call["pass_"])
        group = call["group"]
        spacing = {b - a for a, b in zip(group, group[1:])}
        assert len(spacing) == 1
        total, size, stride = out.get(key, (0, len(group), spacing.pop()))
        assert size == len(group)
        out[key] = (total + call["elements"] * call["bytes"], size, stride)
    return out


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: f"world{x[0]}-shard{x[1]}-reshard{x[2]}")
def test_collectives_are_fsdp2s(measured, layout):
    cost = library(*layout)
    for record in measured[layout]:
        assert booked(cost) == observed(record["calls"]), record["rank"]
    for (kind, pass_), (tensor, group, _) in observed(measured[layout][0]["calls"]).items():
        volume = sum(c.volume for dim, c in cost.collectives if dim == "data" and (c.kind, c.pass_) == (kind, pass_))
        assert volume == ring_share(kind, group) * tensor          # bytes a rank sends in a ring


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: f"world{x[0]}-shard{x[1]}-reshard{x[2]}")
def test_state_is_fsdp2s_shard(measured, layout):
    cost = library(*layout)
    record = measured[layout][0]
    assert cost.parameters == record["parameters"]
    assert cost.weight_bytes == cost.gradient_bytes == 4 * record["held"]     # fp32: the local shard
    assert cost.optimizer_bytes == record["moments"]                           # AdamW's two fp32 moments


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: f"world{x[0]}-shard{x[1]}-reshard{x[2]}")
def test_gathered_weights_are_fsdp2s(measured, layout):
    """Resharding: at most two layers gathered (the one computing, the next prefetched, or one
    being copied out of the flat all-gather output), as ``gather_bytes``.  Without: every unit
    at the loss, the library's layers plus the ends it leaves out, and none after backward."""
    cost = library(*layout)
    for record in measured[layout]:
        peak, sizes = record["peak"], record["sizes"]
        if layout[2]:
            assert max(peak.values()) == gather_bytes(cost) == gather_bytes(cost, kept=True)
        else:
            ends = 4 * (sizes["embedding"] + sizes["head"] + sizes["norm"])
            assert peak["loss"] == gather_bytes(cost, kept=True) + ends
            assert peak["after"] == gather_bytes(cost) == 0
