"""The whole search space (``numeric.search.SPACE``): its layouts counted by an independent
enumeration, and every kind of kernel equal to models built with the numbers."""

import random

import pytest

from symbolic_cost.models.peak import peak_bytes
from symbolic_cost import conventions as conv
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.numeric.layouts import layouts
from symbolic_cost.numeric.search import SPACE, run_variant, search, variants
from symbolic_cost.timing.hardware import get_system
from symbolic_cost.timing.step import step_time_breakdown

GPT2 = preset("gpt2")                  # 12 layers, 12 heads, f = 3072
DEVICES, BATCH, SEQ = 16, 64, 1024


def _divisors(n):
    return [k for k in range(1, n + 1) if n % k == 0]


def count_by_hand(flash):
    """Every layout of SPACE for GPT-2, written from the rules, one nested loop per choice."""
    policies = ["none", "activation", "full"] + ([] if flash else ["selective"])
    stages = [(z, o) for z in (0, 1, 2, 3) for o in ("none", "optimizer", "parameters")
              if o == "none" or (o == "optimizer" and z >= 1) or (o == "parameters" and z == 3)]
    total = 0
    for m1 in _divisors(DEVICES):
        if 12 % m1 or 3072 % m1:
            continue
        for p in _divisors(DEVICES // m1):
            if 12 % p:
                continue
            d = DEVICES // (m1 * p)
            for s1 in _divisors(m1):
                for b in (b for b in _divisors(BATCH) if BATCH % (b * d) == 0):
                    n = BATCH // (b * d)
                    # GPipe, 1F1B and ZB-H1 on every layout, interleaved with every vp that fits,
                    # DualPipe with p and n even, n >= 2p
                    schedules = 3 + sum(1 for v in _divisors(12 // p) if v >= 2 and p > 1 and n % p == 0)
                    schedules += p % 2 == 0 and n % 2 == 0 and n >= 2 * p
                    for policy in policies:
                        total += len(stages) * schedules * (12 // p if policy == "full" else 1)
    return total


@pytest.mark.parametrize("flash", [True, False])
def test_the_space_has_the_layouts_the_rules_allow(flash):
    found = search(GPT2, DEVICES, "h100", global_batch=BATCH, seq=SEQ, flash=flash, top=3, **SPACE)
    assert found.evaluated == count_by_hand(flash)
    assert found.fitting == found.evaluated          # GPT-2 fits 80 GB in every layout
    assert list(found.best["total"]) == sorted(found.best["total"])


def test_every_kind_of_kernel_equals_models_built_with_the_numbers():
    system, pick = get_system("h100"), random.Random(3)
    base = layouts(GPT2, DEVICES, BATCH, SEQ, "all", ("none", "selective", "activation", "full"), "all")
    kinds = variants((0, 1, 2, 3), SPACE["offload"], SPACE["schedules"], ("none", "selective", "activation", "full"))
    assert len(kinds) == 4 * 8 * 5
    for variant in kinds:
        task = (GPT2, variant, base, SEQ, system, conv.DEFAULT, dict(precision="bf16", flash=False), "all", 10**9)
        _, _, rows = run_variant(task)
        for row in pick.sample(list(rows.itertuples()), 2):
            training = Training(b=row.b, l=SEQ, m1=row.m1, s1=row.s1, d=row.d, p=row.p, micro_batches=row.n_micro,
                                recompute=row.recompute, zero=row.zero, offload=row.offload, flash=False,
                                schedule=row.schedule, virtual_stages=int(row.vp),
                                **(dict(recompute_method="block", recompute_layers=int(row.n_rec))
                                   if row.recompute == "full" else {}))
            cost = model_cost(GPT2, training)
            assert float(peak_bytes(cost)) == pytest.approx(row.memory, rel=1e-12), (variant, row)
            assert float(step_time_breakdown(cost, system)["total"]) == pytest.approx(row.total, rel=1e-12), (variant, row)


def test_kernels_of_a_model_placed_by_p_equal_models_built_with_the_numbers():
    """DeepSeek-V2-Lite (a dense layer, then 26 MoE layers) on 27 devices: its busiest rank
    depends on p, so the search compiles once per p (and vp); every kind of kernel's rows equal
    model_cost with the numbers."""
    from symbolic_cost.models.config import load
    import pathlib
    arch = load(pathlib.Path(__file__).parent / "hf_configs" / "DeepSeek-V2-Lite.json")
    system = get_system("h100")
    base = layouts(arch, 27, 54, 2048, (1, 2), ("none", "full"))
    assert set(base["p"]) == {1, 3, 9, 27}
    for variant in variants((1,), ("none",), ("1f1b", "interleaved"), ("none", "full")):
        task = (arch, variant, base, 2048, system, conv.DEFAULT, dict(precision="bf16", flash=True), "full", 10**9)
        _, _, rows = run_variant(task)
        for row in rows[rows["p"] > 1].groupby("p").head(1).itertuples():
            training = Training(b=row.b, l=2048, m1=row.m1, s1=row.s1, d=row.d, p=row.p, micro_batches=row.n_micro,
                                ep=row.ep, etp=row.etp, recompute=row.recompute, zero=1, flash=True,
                                schedule=row.schedule, virtual_stages=int(row.vp),
                                **(dict(recompute_method="block", recompute_layers=int(row.n_rec))
                                   if row.recompute == "full" else {}))
            cost = model_cost(arch, training)
            assert float(peak_bytes(cost)) == pytest.approx(row.memory, rel=1e-12), (variant, row)
            assert float(step_time_breakdown(cost, system)["total"]) == pytest.approx(row.total, rel=1e-12)


def test_processes_and_dask_give_the_same_answer():
    pytest.importorskip("dask")
    alone = search(GPT2, 8, "h100", global_batch=32, seq=SEQ, top=5, zero=(1, 3))
    for split in (dict(workers=2), dict(dask=True)):
        other = search(GPT2, 8, "h100", global_batch=32, seq=SEQ, top=5, zero=(1, 3), **split)
        assert alone.evaluated == other.evaluated and alone.best.equals(other.best), split


def test_progress_names_each_kernel():
    said = []
    search(GPT2, 8, "h100", global_batch=32, seq=SEQ, top=1, zero=(0, 1), progress=said.append)
    assert len(said) == 4 and said[-1].startswith("search: 4/4 kernels")
