"""The whole search space (``numeric.search.SPACE``): its layouts counted by an independent
enumeration, and every kind of kernel equal to models built with the numbers."""

import random
from dataclasses import replace

import pytest

from symbolic_cost.models.peak import peak_bytes
from symbolic_cost import conventions as conv
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.numeric.layouts import layouts
from symbolic_cost.numeric.search import SPACE, run_family, run_variant, search, variants
from symbolic_cost.numeric.variants import families
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
                    # chunks a rank of each schedule: GPipe, 1F1B and ZB-H1 on every layout (one),
                    # interleaved with every vp that fits, DualPipe with p and n even, n >= 2p (one)
                    chunks = [1, 1, 1] + [v for v in _divisors(12 // p) if v >= 2 and p > 1 and n % p == 0]
                    chunks += [1] if p % 2 == 0 and n % 2 == 0 and n >= 2 * p else []
                    for policy in policies:   # full: the first N = 1 .. all of a chunk's layers redone
                        total += len(stages) * sum(12 // (p * v) if policy == "full" else 1 for v in chunks)
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
    # ZeRO stages and offloads, with GPipe, 1F1B and ZB-H1 (the same layouts): one family
    assert [len(family) for family in families(kinds)] == [24, 8, 8] * 4
    for family in families(kinds):          # one kernel a group of layouts for the family's variants
        task = (GPT2, family, base, SEQ, system, conv.DEFAULT, dict(precision="bf16", flash=False), "all", 10**9)
        for variant, (_, _, rows) in zip(family, run_family(task)):
            for row in pick.sample(list(rows.itertuples()), 2):
                training = Training(b=row.b, l=SEQ, m1=row.m1, s1=row.s1, d=row.d, p=row.p, micro_batches=row.n_micro,
                                    recompute=row.recompute, zero=row.zero, offload=row.offload, flash=False,
                                    schedule=row.schedule, virtual_stages=int(row.vp),
                                    **(dict(recompute_method="block", recompute_layers=int(row.n_rec))
                                       if row.recompute == "full" else {}))
                cost = model_cost(GPT2, training)
                assert (row.zero, row.offload) == (variant.zero, variant.offload)
                assert float(peak_bytes(cost)) == pytest.approx(row.memory, rel=1e-12), (variant, row)
                assert float(step_time_breakdown(cost, system)["total"]) == pytest.approx(row.total, rel=1e-12), \
                    (variant, row)


@pytest.mark.parametrize("numbers", [False, True])
def test_variants_built_one_after_another_equal_each_built_alone(numbers):
    """A search builds every ZeRO stage, offload and schedule of one layout in turn, and they
    share the parts that do not depend on those (the stage's passes and totals, the busiest
    rank's activations, the whole stack's totals: ``trees.remembered_on``; extrema and a stage's
    sums by their arguments).  Each must equal the same variant built with
    nothing remembered, every step-time part and the peak memory, tree for tree."""
    from symbolic_cost import extrema
    from symbolic_cost.models import ranks, stack, totals
    from symbolic_cost.parallel import pipeline
    from symbolic_cost.timing import step
    tables = (totals._STAGES, step._PASSES, ranks._ACTIVATIONS, stack._STACKS, extrema._EXTREMA, pipeline._STAGES)
    system = get_system("h100")
    kinds = variants((0, 1, 2, 3), SPACE["offload"], SPACE["schedules"], ("none", "activation", "full"))
    degrees = dict(b=2, m1=2, s1=2, d=2, p=2, micro_batches=4, virtual_stages=2, recompute_layers=3)

    def training(variant):
        t = variant.training(SEQ, False, precision="bf16", flash=True)
        if not numbers:
            return t
        return replace(t, **{k: v for k, v in degrees.items() if (k != "virtual_stages" or t.schedule == "interleaved")
                             and (k != "recompute_layers" or t.recompute == "full")})

    def built(variant):
        cost = model_cost(GPT2, training(variant))
        return peak_bytes(cost), step_time_breakdown(cost, system)
    in_turn = [built(variant) for variant in kinds]
    for variant, shared in zip(kinds, in_turn):
        for table in tables:
            table.clear()
        assert built(variant) == shared, variant


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


def test_progress_names_each_family_of_variants():
    """Recomputation none and full, each with ZeRO 0 and 1: two families (one kernel of layouts
    for both stages), each said when done, with the variants and layouts so far."""
    said = []
    found = search(GPT2, 8, "h100", global_batch=32, seq=SEQ, top=1, zero=(0, 1), progress=said.append)
    assert len(said) == 2 and said[0].startswith("search: 2/4 variants, ")
    assert said[-1].startswith(f"search: 4/4 variants, {found.evaluated:,} layouts")


def test_a_second_search_loads_its_kernels_without_building(tmp_path, monkeypatch):
    """The kernels are filed under what they were built from: the same search again builds
    nothing; another system, or an edited package (its digest), builds afresh."""
    from symbolic_cost.numeric import kernel_cache, search as module
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path))
    first = search(GPT2, 8, "h100", global_batch=32, seq=SEQ, top=5)
    # recompute none, full x s1 = 1, m1: each a memory kernel and, where a layout fits, a step time's
    assert len(list(tmp_path.glob("kernel_build_*.pickle"))) == 2 * 4
    monkeypatch.setattr(module, "model_cost", _no_build)
    again = search(GPT2, 8, "h100", global_batch=32, seq=SEQ, top=5)
    assert again.evaluated == first.evaluated and again.best.equals(first.best)
    with pytest.raises(AssertionError, match="built"):
        search(GPT2, 8, "a100", global_batch=32, seq=SEQ, top=5)
    monkeypatch.setattr(kernel_cache, "_DIGEST", ["an edited formula"])
    with pytest.raises(AssertionError, match="built"):
        search(GPT2, 8, "h100", global_batch=32, seq=SEQ, top=5)


def _no_build(*args):
    raise AssertionError("built although the kernel is on disk")


# Context parallelism and FSDP/HSDP shard groups (issue 28): off by default, varied when asked.

def count_cp_and_shard_by_hand(variant, cp_degrees, devices, batch, seq, heads=12, kv=12, width=3072, layers=12):
    """Layouts of the search with cp and every shard group (zero 1 and 3, 1F1B, no or full
    recomputation of all of a stage's layers, b in 1, 2, 4, 8, s1 in {1, m1}), from the rules:
    devices = m1 cp p d; ring/all-gather of a causal model cut the sequence into 2 cp chunks,
    Ulysses into cp and splits the heads of a tensor rank; a rank's l/cp tokens split over s1;
    ZeRO-3 shards over any divisor of d, ZeRO-1 over all of d."""
    total = 0
    for m1 in (m for m in _divisors(devices) if heads % m == 0 and kv % m == 0 and width % m == 0):
        for cp in (c for c in cp_degrees if (devices // m1) % c == 0):
            for p in (p for p in _divisors(devices // (m1 * cp)) if layers % p == 0):
                d = devices // (m1 * cp * p)
                for s1 in sorted({1, m1}):
                    chunks = cp if variant == "ulysses" else 2 * cp
                    if cp > 1 and (seq % chunks or (seq // cp) % s1):
                        continue
                    if cp > 1 and variant == "ulysses" and ((heads // m1) % cp or (kv // m1) % cp):
                        continue
                    for b in (b for b in (1, 2, 4, 8) if batch % (b * d) == 0):
                        total += 2 * (1 + len(_divisors(d)))      # none, full; zero 1, zero 3 x shard groups
    return total


@pytest.mark.parametrize("variant", ["ring", "ulysses"])
def test_context_parallel_and_hsdp_layouts_are_those_the_rules_allow(variant):
    found = search(GPT2, 16, "h100", global_batch=64, seq=1024, flash=True, top=3, zero=(1, 3), cp=(1, 2, 4, 8),
                   cp_variant=variant, shard="all")
    assert found.evaluated == count_cp_and_shard_by_hand(variant, (1, 2, 4, 8), 16, 64, 1024)
    assert {"cp", "shard"} <= set(found.best.columns)


def test_by_default_neither_cp_nor_shard_is_searched():
    plain = layouts(GPT2, DEVICES, BATCH, SEQ)
    assert "cp" not in plain and len(plain) == len(layouts(GPT2, DEVICES, BATCH, SEQ, cp=(1,)))
    assert len(layouts(GPT2, DEVICES, BATCH, SEQ, cp=(1, 2))) > len(plain)
    assert all(v.shard is None and v.cp_variant == "ring" for v in variants((1, 3)))


def test_cp_and_shard_refusals_name_their_argument():
    from symbolic_cost.checks import InputError
    from symbolic_cost.models.config import load
    import pathlib
    for kw, name in ((dict(shard="all"), "shard"), (dict(cp_variant="ulysses"), "cp_variant"),
                     (dict(cp=(0, 2)), "cp"), (dict(cp=()), "cp"), (dict(zero=3, shard="some"), "shard"),
                     (dict(cp_variant="tree", cp=(2,)), "cp_variant")):
        with pytest.raises(InputError) as error:
            search(GPT2, 8, "h100", global_batch=16, seq=SEQ, **{"zero": 1, **kw})
        assert error.value.argument == name, kw
    # a mixture of experts: context parallelism folds the expert grid onto m1 cp d ranks (parallel.expert)
    moe = load(pathlib.Path(__file__).parent / "hf_configs" / "OLMoE-1B-7B-0924.json")
    table = layouts(moe, 8, 16, 2048, (1,), ("none",), cp=(1, 2))
    assert set(table["cp"]) == {1, 2}
    assert all((r.m1 * r.cp * r.d) % (r.ep * r.etp) == 0 for r in table.itertuples())
    assert any(r.ep * r.etp > r.m1 * r.d for r in table.itertuples())    # only the CP ranks make room


def _built(arch, row, seq, system, variant):
    """Peak memory and step time of the search's row built by model_cost with its numbers."""
    cp, shard = int(row.cp), int(row.shard) if row.zero == 3 else None
    t = Training(b=row.b, l=seq, m1=row.m1, s1=row.s1, d=row.d, p=row.p, micro_batches=row.n_micro,
                 recompute=row.recompute, zero=row.zero, flash=True, cp=cp, cp_variant=variant if cp > 1 else "ring",
                 shard=shard, **(dict(recompute_method="block", recompute_layers=int(row.n_rec))
                                 if row.recompute == "full" else {}))
    cost = model_cost(arch, t)
    return float(peak_bytes(cost)), float(step_time_breakdown(cost, system)["total"])


@pytest.mark.parametrize("model, variant, zero, recompute", [("gpt2", "ring", 3, "none"),
                                                             ("Llama-3.2-1B", "ulysses", 3, "full"),
                                                             ("gpt2", "all-gather", 1, "none")])
def test_cp_and_shard_kernels_equal_models_built_with_the_numbers(model, variant, zero, recompute):
    """Two layouts of every kind (sequence sharding, cp > 1 or not, a shard group below d or not)
    evaluated by the search's kernels equal model_cost with the numbers, on the peak and on the
    calibrated time model."""
    from symbolic_cost.models.config import load
    from symbolic_cost.timing.hardware import calibrated
    import pathlib
    arch = load(pathlib.Path(__file__).parent / "hf_configs" / f"{model}.json")
    seq = 1024
    base = layouts(arch, 8, 16, seq, (1, 2), (recompute,), cp=(1, 2, 4), cp_variant=variant)
    for system in (get_system("h100"), calibrated("h100")):
        (variant_,) = variants((zero,), ("none",), ("1f1b",), (recompute,), variant, "all")
        task = (arch, variant_, base, seq, system, conv.DEFAULT, dict(precision="bf16", flash=True), "full", 10**9)
        _, _, rows = run_variant(task)
        if zero != 3:
            rows = rows.assign(shard=rows["d"])        # search() fills it so: no shard group below d
        kinds = rows.assign(kind=[(s1 == 1, s1 == m1, cp > 1, int(shard) < d) for s1, m1, cp, shard, d in
                                  zip(rows["s1"], rows["m1"], rows["cp"], rows["shard"], rows["d"])])
        assert kinds["cp"].max() > 1 and (zero != 3 or (kinds["shard"] < kinds["d"]).any())
        for row in kinds.groupby("kind").head(2).itertuples():
            memory, total = _built(arch, row, seq, system, variant)
            assert memory == pytest.approx(row.memory, rel=1e-12), row
            assert total == pytest.approx(row.total, rel=1e-12), row


def test_the_command_searches_cp_and_shard_groups(capsys):
    """search --cp and --shard give the library's search of the same arguments (peak time model, --ideal)."""
    import json
    from symbolic_cost.cli import main
    assert main(["search", "--preset", "gpt2", "--devices", "4", "--global-batch", "8", "--seq", "1024", "--flash",
                 "--zero", "3", "--cp", "1:4:x2", "--shard", "1,2", "--ideal", "--top", "3", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    same = search(GPT2, 4, "h100", global_batch=8, seq=1024, zero=3, cp=(1, 2, 4), shard=(1, 2), top=3)
    assert got["evaluated"] == same.evaluated
    assert [(r["cp"], r["shard"]) for r in got["best"]] == list(zip(same.best["cp"], same.best["shard"]))
    assert [r["total"] for r in got["best"]] == pytest.approx(list(same.best["total"]), abs=1e-10)   # JSON: 10 decimals
