"""Mixture of experts, expert parallelism and latent attention: the library against the routing
simulation (``tests/simulate_moe.py``) over hypothesis-drawn layouts, and against hand counts
and published numbers.

Dense parameters are counted by hand from the layer's tensors; their ZeRO shards come from the
ZeRO simulation of ``tests/simulate.py``; the routed experts' from the routing simulation.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import assume, example, given, settings, strategies as st
from sympy import Rational, Symbol

import simulate_moe as sim
from simulate import zero_step
from symbolic_cost import conventions as conv
from symbolic_cost.blocks.latent_attention import Latent, latent_attention, latent_cache_elements
from symbolic_cost.blocks.moe import MoE, moe, routed_rows
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.experts import alltoall_bytes
from symbolic_cost.parallel.expert import expert_data_degree
from symbolic_cost.timing.hardware import SYSTEMS, comm_time
from symbolic_cost.blocks.wiring import Experts, Run

TORCH = conv.DEFAULT.but(matmul_flops="2mnk", reduction_flops=False)
BYTES = (2, 2, 12)           # bf16 weights, gradients, optimizer (ZeRO's mixed precision)


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


@st.composite
def layouts(draw):
    """``m1 x d`` ranks, an expert grid that folds onto them, ``E | t k`` (balanced routing)."""
    m1, d = draw(st.sampled_from([1, 2, 4])), draw(st.integers(1, 3))
    ep = draw(st.sampled_from(divisors(m1 * d)))
    etp = draw(st.sampled_from(divisors(m1 * d // ep)))
    experts = ep * draw(st.integers(1, 3))
    k = draw(st.integers(1, experts))
    h = m1 * draw(st.integers(1, 2))
    return dict(m1=m1, d=d, ep=ep, etp=etp, experts=experts, k=k, b=draw(st.integers(1, 2)),
                l=m1 * experts * draw(st.integers(1, 2)), h=h, e=h * draw(st.integers(1, 3)),
                f=etp * draw(st.integers(1, 3)), zero=draw(st.integers(0, 3)), dist=draw(st.booleans()))


def toy(x: dict, capacity=None, imbalance=1, conventions=conv.DEFAULT, n=1):
    """One MoE layer (RMS norms, rotary, no biases, untied head) under the layout ``x``."""
    return model_cost(*toy_parts(x, capacity, imbalance, n), conventions)


def toy_parts(x: dict, capacity=None, imbalance=1, n=1, dispatcher="alltoall"):
    """``toy``'s architecture and training."""
    arch = Architecture("toy", 1, x["e"], x["h"], x["m1"], 8 * x["m1"], mlp="swiglu", norm="rms", rotary=True,
                        tied=False, qkv_bias=False, bias=False, dropouts=False, moe=MoE(x["experts"], x["k"], x["f"]))
    training = Training(b=x["b"], l=x["l"], m1=x["m1"], s1=x["m1"], d=x["d"], ep=x["ep"], etp=x["etp"],
                        zero=x["zero"], distributed_optimizer=x["dist"], micro_batches=n, capacity_factor=capacity,
                        expert_imbalance=imbalance, dispatcher=dispatcher)
    return arch, training


def dense_parameters(x: dict) -> int:
    """Parameters per rank without the routed experts, by hand: the word table and the head
    split by vocabulary (``8 m1`` rows), the final norm; the layer's two RMS norms, Q, K, V and
    the output projection split by heads, the router replicated."""
    e, m1 = x["e"], x["m1"]
    return 2 * 8 * e + e + 2 * e + 4 * e * e // m1 + x["experts"] * e


def simulate(x: dict, **kw):
    return sim.moe_layer(x["m1"], x["d"], x["ep"], x["etp"], x["experts"], x["k"], x["b"], x["l"], x["e"], x["f"],
                         zero=x["zero"], distributed_optimizer=x["dist"], **kw)


def booked(block, row: str) -> dict:
    """``(kind, pass) -> volume`` of a row's collectives."""
    out = {}
    for c in block[row].collectives:
        out[(c.kind, c.pass_)] = out.get((c.kind, c.pass_), 0) + c.volume
    return out


# ------------------------------------------------------------------ the routing simulation

@settings(max_examples=40, deadline=None)
@given(x=layouts())
@example(x=dict(m1=2, d=4, ep=4, etp=2, experts=8, k=2, b=1, l=32, h=2, e=4, f=4, zero=1, dist=False))
@example(x=dict(m1=1, d=2, ep=2, etp=1, experts=2, k=2, b=2, l=2, h=1, e=2, f=1, zero=3, dist=False))
@example(x=dict(m1=4, d=1, ep=1, etp=4, experts=3, k=1, b=1, l=12, h=4, e=4, f=4, zero=0, dist=True))
def test_dispatch_and_combine_are_the_simulated_ones(x):
    """Elements each rank sends and receives in the all-to-alls and the expert-tensor rings,
    forward and (the mirror images) backward, as the library books them (ring volumes)."""
    ranks = simulate(x)
    layer = toy(x).blocks[1][0]
    dispatch, combine = booked(layer, "dispatch"), booked(layer, "combine")
    phases = {"dispatch": (dispatch, "alltoall"), "gather": (dispatch, "allgather"),
              "scatter": (combine, "reducescatter"), "combine": (combine, "alltoall")}
    for rank in ranks.values():
        for phase, (table, kind) in phases.items():
            assert rank.sent.get(phase, 0) == rank.received.get(phase, 0)
            assert table.get((kind, "fwd"), 0) == 2 * rank.sent.get(phase, 0), phase      # bf16
        # backward: an all-to-all for each all-to-all, a reduce-scatter for the allgather and back
        assert dispatch.get(("alltoall", "bwd"), 0) == 2 * rank.sent.get("dispatch", 0)
        assert dispatch.get(("reducescatter", "bwd"), 0) == 2 * rank.sent.get("gather", 0)
        assert combine.get(("allgather", "bwd"), 0) == 2 * rank.sent.get("scatter", 0)
        assert combine.get(("alltoall", "bwd"), 0) == 2 * rank.sent.get("combine", 0)


@settings(max_examples=40, deadline=None)
@given(x=layouts())
@example(x=dict(m1=2, d=3, ep=3, etp=2, experts=6, k=4, b=2, l=12, h=2, e=4, f=2, zero=2, dist=False))
def test_expert_rows_parameters_and_states_are_the_simulated_ones(x):
    """Rows through each rank's experts (their FLOPs), expert parameters per rank, and the
    weights, gradients and optimizer state per rank: dense by hand and the ZeRO simulation
    over ``d``, experts from the routing simulation over ``edp``."""
    ranks = simulate(x)
    cost = toy(x, conventions=TORCH)
    layer = cost.blocks[1][0]
    edp = x["m1"] * x["d"] // (x["ep"] * x["etp"])
    assert expert_data_degree(x["m1"], x["d"], x["ep"], x["etp"]) == edp
    for rank in ranks.values():
        assert layer["expert_fc1"].flops_fwd + layer["expert_fc2"].flops_fwd == sim.expert_flops(
            rank, x["e"], x["f"], x["etp"])
        assert (layer["expert_fc1"].weights + layer["expert_fc2"].weights) / 2 == rank.expert_parameters
        assert cost.expert_parameters_per_device == rank.expert_parameters
    dense, _ = zero_step(dense_parameters(x), x["d"], x["zero"], x["dist"], 1, BYTES)
    experts, _ = zero_step(ranks[0].expert_parameters, edp, x["zero"], x["dist"], 1, BYTES)
    assert cost.parameters_per_device == dense_parameters(x) + ranks[0].expert_parameters
    for state, field in (("weights", "weight_bytes"), ("gradients", "gradient_bytes"),
                         ("optimizer", "optimizer_bytes")):
        assert getattr(cost, field) == dense[state][0] + experts[state][0], state
    assert all(rank.optimizer_shard * 12 == experts["optimizer"][0] for rank in ranks.values())


@settings(max_examples=25, deadline=None)
@given(x=layouts(), capacity=st.sampled_from([Fraction(1, 2), Fraction(1), Fraction(5, 4), Fraction(2)]))
def test_capacity_pads_or_drops_to_the_simulated_rows(x, capacity):
    """With a capacity factor every rank sends ``ceil(C t k / E)`` rows to every expert (``C`` at
    most ``E / k``: a capacity past the ``t`` tokens is refused)."""
    assume(capacity <= Fraction(x["experts"], x["k"]))
    ranks = simulate(x, capacity=capacity)
    layer = toy(x, capacity=capacity, conventions=TORCH).blocks[1][0]
    for rank in ranks.values():
        assert booked(layer, "dispatch").get(("alltoall", "fwd"), 0) == 2 * rank.sent.get("dispatch", 0)
        assert layer["expert_fc1"].flops_fwd + layer["expert_fc2"].flops_fwd == sim.expert_flops(
            rank, x["e"], x["f"], x["etp"])


@settings(max_examples=25, deadline=None)
@given(x=layouts(), seed=st.integers(0, 10**6))
def test_imbalance_names_the_busiest_ranks_rows(x, seed):
    """Random routing: with the imbalance measured as the busiest expert-tensor group's rows
    over the balanced ones, the library's rows (and FLOPs) are those of the busiest rank."""
    ranks = simulate(x, router=sim.seeded(seed))
    t, k = x["b"] * x["l"] // x["m1"], x["k"]
    busiest = max(rank.rows for rank in ranks.values())
    imbalance = Rational(busiest, x["etp"] * t * k)
    layer = toy(x, imbalance=imbalance, conventions=TORCH).blocks[1][0]
    assert layer["expert_fc1"].flops_fwd + layer["expert_fc2"].flops_fwd == max(
        sim.expert_flops(rank, x["e"], x["f"], x["etp"]) for rank in ranks.values())


@settings(max_examples=25, deadline=None)
@given(x=layouts())
def test_the_dispatchers_sorts_move_the_rows_the_simulation_regroups(x):
    """Megatron-Core's all-to-all dispatcher regroups a rank's rows by expert after the exchange and
    sorts the outputs back before the reverse one: each a read and a write of every row where a rank
    holds several experts (bf16), nothing where it holds one; the flex dispatcher sorts nothing."""
    busiest = max(rank.regrouped for rank in simulate(x).values())
    layer = toy(x, conventions=TORCH).blocks[1][0]
    for row in ("dispatch_sort", "combine_sort"):
        assert layer[row].mem_fwd == layer[row].mem_bwd == 2 * busiest * 2
        assert layer[row].act_buffer == 0 and layer[row].flops_fwd == 0
    if x["ep"] * x["etp"] == 1:         # the flex dispatcher needs an expert grid of two ranks or more
        return
    arch, training = toy_parts(x, dispatcher="flex")
    flex = model_cost(arch, training, TORCH).blocks[1][0]
    assert "dispatch_sort" not in flex.names and "combine_sort" not in flex.names


def test_the_sorts_by_hand():
    """Qwen3-30B-A3B's shapes, 4,096 tokens a rank, top 8 of 128 experts over EP 8: 16 experts a rank
    take 4,096 x 8 = 32,768 rows of 2,048 bf16 values, read and written by each sort (256 MiB); over
    EP 128 a rank holds one expert and sorts nothing; a symbolic ``ep`` gives both."""
    from sympy import Symbol
    from symbolic_cost.blocks.wiring import Experts
    spec = MoE(128, 8, 768)
    assert moe(1, 4096, 2048, spec, experts=Experts(ep=8))["dispatch_sort"].mem_fwd == 2 * 32768 * 2048 * 2
    assert moe(1, 4096, 2048, spec, experts=Experts(ep=128))["combine_sort"].mem_bwd == 0
    ep = Symbol("ep", positive=True, integer=True)
    moved = moe(1, 4096, 2048, spec, experts=Experts(ep=ep))["dispatch_sort"].mem_fwd
    assert (moved.subs(ep, 8), moved.subs(ep, 128)) == (2 * 32768 * 2048 * 2, 0)


def test_one_expert_a_rank_times_alike_with_ep_a_number_or_a_symbol():
    """The sorts run only where a rank holds several experts.  By hand: 2 x 64 tokens, top 2, EP 2
    (4 experts a rank): 256 rows of 32 bf16 values, read and written, 32,768 bytes a sort a pass,
    at 0.8 of H100's 3.35 TB/s plus one kernel's fixed cost; EP 8 (one expert a rank): nothing.
    With ``ep`` a symbol, substituting 8 or 2 gives the time the block built with that number
    has, in the calibrated model and in the tiled kernel model, and the sorts' own time is 0 at 8."""
    from symbolic_cost.blocks.wiring import Experts
    from symbolic_cost.timing.hardware import calibrated, get_system, row_seconds
    ep, spec, sorts = Symbol("ep", positive=True, integer=True), MoE(8, 2, 64), ("dispatch_sort", "combine_sort")
    h100 = calibrated("h100")
    row = moe(2, 64, 32, spec, experts=Experts(ep=2))["dispatch_sort"]
    assert row_seconds(row, h100)["t_fwd"] == Rational(32768) / (Rational(4, 5) * 3_350_000_000_000) \
        + h100.efficiency.kernel
    tiled = conv.get(conv.DEFAULT).but(kernel_time="tiled")
    for system, conventions in ((h100, conv.DEFAULT), (get_system("h100"), tiled)):
        def seconds(rows, values=None):
            total = sum(row_seconds(r, system, conventions)[f"t_{p}"] for r in rows for p in ("fwd", "bwd"))
            return total.subs(values) if values else total
        symbolic = moe(2, 64, 32, spec, experts=Experts(ep=ep))
        assert seconds([symbolic[name] for name in sorts], {ep: 8}) == 0
        for n in (8, 2):
            assert seconds(symbolic, {ep: n}) == seconds(moe(2, 64, 32, spec, experts=Experts(ep=n)))
        assert seconds(moe(2, 64, 32, spec, experts=Experts(ep=2))) > seconds(
            moe(2, 64, 32, spec, experts=Experts(ep=2, dispatcher="flex")))


def test_alltoall_per_step_is_layers_micro_batches_and_both_passes():
    x = dict(m1=2, d=4, ep=4, etp=1, experts=8, k=2, b=1, l=32, h=2, e=4, f=4, zero=1, dist=False)
    ranks = simulate(x)
    per_layer = (ranks[0].sent["dispatch"] + ranks[0].sent["combine"]) * 2          # bf16
    assert alltoall_bytes(toy(x, n=3)) == 3 * 2 * per_layer                          # 3 micro-batches, fwd + bwd


# ------------------------------------------------------------------ hand counts and published numbers

def test_routed_rows_by_hand():
    assert routed_rows(100, 8, 2) == 200
    assert routed_rows(100, 8, 2, ep=4, imbalance=Rational(3, 2)) == 300
    assert routed_rows(100, 8, 2, ep=1, imbalance=2) == 200          # one rank holds every expert
    assert routed_rows(100, 8, 2, capacity_factor=Rational(5, 4)) == 8 * 32   # ceil(31.25) per expert
    ep = Symbol("ep", positive=True, integer=True)
    assert routed_rows(10, 8, 2, ep=ep, imbalance=2).subs(ep, 1) == 20
    with pytest.raises(ValueError, match="imbalance must be between 1 and ep"):
        routed_rows(100, 8, 2, ep=2, imbalance=3)


def test_padded_slots_are_the_hardwares_work_not_the_models():
    """Model FLOPs count every routed token once, whatever the capacity (Megatron-LM's
    num_floating_point_operations counts moe_router_topk tokens an expert layer): a capacity factor of 2,
    the most 4 experts with top-2 take (64 slots for 32 routed tokens: 4 experts x ceil(2 x 16 x 2 / 4))
    leaves them, and so the MFU of a given step time,
    as dropless, while the busiest device's FLOPs grow by the padded slots.  The capacity factor entered
    the model FLOPs, so MFU rose as the padded step ran slower (23.6 % dropless, 50.6 % at 1,000)."""
    from symbolic_cost.models.utilisation import mfu, model_flops
    arch = Architecture("m", 1, 64, 4, 128, 100, mlp="gelu", bias=False, moe=MoE(experts=4, top_k=2, expert_f=128))
    plain = model_cost(arch, Training(b=1, l=16))
    padded = model_cost(arch, Training(b=1, l=16, capacity_factor=2))
    assert padded.model_flops_fwd == plain.model_flops_fwd and model_flops(padded) == model_flops(plain)
    assert mfu(padded, 1, 10**12) == mfu(plain, 1, 10**12)
    assert padded.flops_fwd > plain.flops_fwd


@pytest.mark.parametrize("name, total, active", [
    # Mixtral: 2 of 8 experts of 3 x 4096 x 14336 in each of 32 layers (12.9 B active, Mistral AI)
    ("Mixtral-8x7B-v0.1", 46_702_792_704, 46_702_792_704 - 32 * 6 * 3 * 4096 * 14336),
    # DeepSeek-V2-Lite: 6 of 64 experts of 3 x 2048 x 1408 in 26 layers (15.7 B, 2.4 B active)
    ("DeepSeek-V2-Lite", 15_706_484_224, 15_706_484_224 - 26 * 58 * 3 * 2048 * 1408),
    # Qwen3-30B-A3B: 8 of 128 experts of 3 x 2048 x 768 in 48 layers (30.5 B, 3.3 B active)
    ("Qwen3-30B-A3B", 30_532_122_624, 30_532_122_624 - 48 * 120 * 3 * 2048 * 768),
])
def test_total_and_active_parameters(name, total, active):
    import json
    from pathlib import Path

    from symbolic_cost.models.config import from_config
    config = json.loads((Path(__file__).parent / "hf_configs" / f"{name}.json").read_text())
    cost = model_cost(from_config(config, name), Training(b=1, l=128))
    assert (cost.parameters, cost.active_parameters) == (total, active)


def test_latent_attention_parameters_and_cache_by_hand():
    """DeepSeek-V3's attention: q 7168 -> 1536 -> 128 x 192, kv 7168 -> 512 + 64, 512 -> 128 x 256,
    out 128 x 128 -> 7168, two latent norms; it caches 512 + 64 elements a token and layer."""
    latent = Latent(kv_rank=512, rope_dim=64, nope_dim=128, v_dim=128, q_rank=1536)
    block = latent_attention(1, 16, 7168, 128, latent, run=Run(es=1))
    by_hand = (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256
               + 128 * 128 * 7168 + 7168)
    assert block.total("weights") == by_hand
    assert latent_cache_elements(latent) == 576
    split = latent_attention(1, 16, 7168, 128, latent, m1=8, run=Run(es=1))
    assert split["q_b_proj"].weights * 8 == block["q_b_proj"].weights
    assert split["kv_a_proj"].weights == block["kv_a_proj"].weights          # replicated down-projection


def test_moe_needs_sequence_parallelism_under_tensor_parallelism():
    with pytest.raises(ValueError, match="s1 must equal m1"):
        moe(1, 8, 16, MoE(4, 2, 8), m1=2, s1=1)
    with pytest.raises(ValueError, match="ep must divide experts"):
        moe(1, 8, 16, MoE(4, 2, 8), experts=Experts(ep=3))
    with pytest.raises(ValueError, match="must divide m1 x d"):
        expert_data_degree(2, 2, 8, 1)


def test_two_tier_alltoall_crosses_the_slow_link_with_the_ranks_outside_the_domain():
    """An all-to-all over 16 expert ranks 2 apart on 8-GPU NVLink domains: 4 members share a
    domain, so 3/16 of the buffer stays on NVLink and 12/16 crosses InfiniBand, concurrently."""
    x = dict(m1=2, d=16, ep=16, etp=2, experts=16, k=2, b=1, l=32, h=2, e=4, f=4, zero=0, dist=False)
    a2a = next(c for c in toy(x).blocks[1][0]["dispatch"].collectives if c.kind == "alltoall")
    system = SYSTEMS["h100"].but(nvlink_latency=0, ib_latency=0)
    two_level = comm_time(a2a, system, conv.DEFAULT.but(comm_time="hierarchical"))
    V = a2a.tensor_bytes
    assert two_level == max(Rational(3, 16) * V / system.nvlink_bandwidth, Rational(12, 16) * V / system.ib_bandwidth)


# ------------------------------------------------------------------ the command line

def test_cli_summary_sweep_and_search_handle_experts(capsys):
    import json
    from pathlib import Path

    from symbolic_cost.cli import main
    path = str(Path(__file__).parent / "hf_configs" / "Mixtral-8x7B-v0.1.json")
    layout = ["--set", "l=4096", "m1=2", "s1=2", "d=32", "ep=8", "etp=1", "--zero", "1"]
    assert main(["summary", "--hf-config", path, *layout, "--json"]) == 0
    experts = json.loads(capsys.readouterr().out)["experts"]
    assert (experts["routed"], experts["per_token"], experts["ep"], experts["edp"]) == (8, 2, 8, 8)
    assert experts["active_parameters"] == 46_702_792_704 - 32 * 6 * 3 * 4096 * 14336
    # per layer and pass: 2048 tokens x 2 copies x 4096 x 2 bytes, 7/8 of it leaving the rank, twice
    assert experts["alltoall_bytes"] == 32 * 2 * 2 * (2048 * 2 * 4096 * 2 * 7 // 8)
    assert main(["summary", "--hf-config", path, *layout]) == 0
    assert "all-to-all per iteration, busiest device: 3.5 GiB moved (received in dispatch, sent in combine) in 128 " \
        "all-to-alls" in capsys.readouterr().out
    assert main(["sweep", "--hf-config", path, "--set", "l=4096", "m1=2", "s1=2", "d=32", "etp=1",
                 "--grid", "ep=1,8", "--field", "alltoall_bytes"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["1.0,0.0", f"8.0,{float(experts['alltoall_bytes'])}"]
    assert main(["sweep", "--hf-config", path, "--set", "l=4096", "m1=2", "d=32", "etp=1", "--grid", "ep=8",
                 "s1=1,2"]) == 2
    assert "m1 must divide s1 (got m1=2, s1=1)" in capsys.readouterr().err
    assert main(["search", "--hf-config", path, "--devices", "16", "--global-batch", "64", "--seq", "1024",
                 "--top", "3"]) == 0
    header = capsys.readouterr().out.splitlines()[1].split()
    assert header[:6] == ["m1", "s1", "d", "p", "ep", "etp"]


def test_selective_recomputation_keeps_the_latent_attention_core_inputs():
    """Selective recomputation drops the core and keeps what enters it: the queries
    (``h (d_n + d_r)``), the keys and values ``kv_b_proj`` makes (``h (d_n + d_v)``) and the
    shared rotary key (``d_r``) of every token."""
    import json
    from pathlib import Path

    from symbolic_cost.blocks.latent_attention import core_input_bytes
    from symbolic_cost.models.config import from_config
    core_rows = ("logits", "softmax", "dropout_softmax", "attend")       # Korthikanti et al. 2022
    block = latent_attention(2, 16, 2048, 16, Latent(512, 64, 128, 128))
    assert core_input_bytes(block) == 2 * 16 * (16 * 192 + 16 * 256 + 64) * 2
    config = json.loads((Path(__file__).parent / "hf_configs" / "DeepSeek-V2-Lite.json").read_text())
    lite = from_config(config, "lite")
    kept = {rc: model_cost(lite, Training(b=1, l=512, recompute=rc)) for rc in ("none", "selective")}
    core = sum(count * (sum(blk[r].act_buffer for r in core_rows if r in blk.names) - core_input_bytes(blk))
               for blk, count in kept["none"].blocks[1:-1])
    assert kept["none"].activation_bytes - kept["selective"].activation_bytes == core


def test_stage_parameters_of_an_moe_model_under_tensor_parallelism():
    """Pipeline stages of Mixtral (32 layers, 4 stages) on 2 tensor ranks: the experts split by
    ``etp = m1`` like every other weight matrix, the stages add up to the model's parameters."""
    from symbolic_cost.models.config import from_config
    from symbolic_cost.models.totals import stage_parameters
    mixtral = from_config({"model_type": "mixtral", "sliding_window": None})
    stages = [stage_parameters(mixtral, 4, stage) for stage in range(4)]
    assert sum(stages) == model_cost(mixtral, Training(b=1, l=8)).parameters
    split = [stage_parameters(mixtral, 4, stage, m1=2) for stage in range(4)]
    assert split[1] * 2 == stages[1] + 8 * (2 + 8) * 4096    # a middle stage: all halves but 2 norms, the router


@pytest.mark.parametrize("volume", ["ring", "tensor"])
def test_every_collective_of_an_moe_model_and_latent_attention_has_the_rule_volume(volume):
    """The one volume rule, from its definition: a ring moves ``(n-1)/n`` of the tensor per device
    for allgather, reduce-scatter and all-to-all, ``2(n-1)/n`` for allreduce; ``"tensor"`` reports
    the whole tensor; times the repeats."""
    conventions = conv.DEFAULT.but(collective_volume=volume)
    x = dict(m1=2, d=8, ep=4, etp=2, experts=8, k=2, b=1, l=32, h=2, e=4, f=4, zero=1, dist=False)
    cost = toy(x, conventions=conventions, n=2)
    latent = latent_attention(2, 64, 128, 8, Latent(64, 16, 32, 32, 48), m1=4, s1=2, run=Run(conventions=conventions))
    collectives = cost.collectives + tuple(("latent", c) for c in latent.collectives)
    assert {dim for dim, _ in collectives} == {"tensor", "expert", "expert_data", "data", "latent"}
    for dim, c in collectives:
        n = c.group
        share = {"allgather": (n - 1) / n, "reducescatter": (n - 1) / n, "alltoall": (n - 1) / n,
                 "allreduce": 2 * (n - 1) / n}[c.kind]
        whole = c.repeats * c.elements * c.element_bytes
        assert c.volume == (share * whole if volume == "ring" else whole), (dim, c)


@st.composite
def serving_layouts(draw):
    """``m1`` tensor ranks sharing their tokens, the expert grid ``ep x etp = m1``."""
    m1 = draw(st.sampled_from([1, 2, 4, 8]))
    ep = draw(st.sampled_from(divisors(m1)))
    experts = ep * draw(st.integers(1, 3))
    return dict(m1=m1, ep=ep, etp=m1 // ep, experts=experts, k=draw(st.integers(1, experts)),
                b=draw(st.integers(1, 3)), l=experts * draw(st.integers(1, 3)), e=m1 * draw(st.integers(1, 3)),
                f=(m1 // ep) * draw(st.integers(1, 3)), shared=draw(st.sampled_from([0, 2 * m1])))


@settings(max_examples=40, deadline=None)
@given(x=serving_layouts(), capacity=st.sampled_from([None, Fraction(1, 2), Fraction(5, 4)]))
@example(x=dict(m1=4, ep=2, etp=2, experts=4, k=2, b=1, l=4, e=4, f=2, shared=8), capacity=None)
def test_replicated_tokens_under_tensor_parallelism_are_the_simulated_ones(x, capacity):
    """Serving without sequence parallelism: rows, expert parameters and the one allreduce of the
    partial outputs per rank (shared experts summed in before it), against the simulation."""
    assume(capacity is None or capacity <= Fraction(x["experts"], x["k"]))
    ranks = sim.replicated_layer(x["m1"], x["ep"], x["etp"], x["experts"], x["k"], x["b"], x["l"], x["e"], x["f"],
                                 capacity=capacity)
    spec = MoE(x["experts"], x["k"], x["f"], shared_f=x["shared"])
    layer = moe(x["b"], x["l"], x["e"], spec, x["m1"], 1, run=Run(conventions=TORCH),
                experts=Experts(x["ep"], x["etp"], capacity_factor=capacity, replicated=True))
    fwd = {}
    for row in layer.rows:
        for c in row.collectives:
            if c.pass_ == "fwd" and c.volume != 0:
                fwd[(row.name, c.kind)] = c.volume
    reducing = "moe_sum" if x["shared"] else "combine"
    for rank in ranks.values():
        assert layer["expert_fc1"].flops_fwd + layer["expert_fc2"].flops_fwd == sim.expert_flops(
            rank, x["e"], x["f"], x["etp"])
        assert (layer["expert_fc1"].weights + layer["expert_fc2"].weights) / 2 == rank.expert_parameters
        expected = {(reducing, "allreduce"): 2 * rank.sent["reduce"]} if x["m1"] > 1 else {}
        assert fwd == expected


def test_replicated_tokens_need_the_expert_grid_to_be_the_tensor_group():
    spec = MoE(8, 2, 64)
    with pytest.raises(ValueError, match="ep x etp must equal m1 when the tensor ranks share their tokens"):
        moe(1, 4, 8, spec, 4, 1, experts=Experts(ep=2, etp=1, replicated=True))
    with pytest.raises(ValueError, match="s1 must be 1 when every tensor rank routes the same tokens"):
        moe(1, 4, 8, spec, 4, 4, experts=Experts(ep=4, replicated=True))
    with pytest.raises(ValueError, match="s1 must equal m1 in a mixture-of-experts layer"):
        moe(1, 4, 8, spec, 4, 1, experts=Experts(ep=4))   # training: Megatron-LM needs sequence parallelism



def test_windows_on_some_layers_and_experts_on_others_need_the_window_pattern():
    """Without ``window_pattern`` nothing says which window layer is an MoE layer: refused;
    with it each (window, experts) combination is its own group of layers."""
    from symbolic_cost.models import Architecture, Training, model_cost
    from symbolic_cost.checks import InputError
    moe = MoE(4, 2, 32, first_dense=1)
    bare = Architecture("toy", 4, 64, 4, 128, 100, window=8, windowed_layers=2, moe=moe)
    with pytest.raises(InputError, match="which window layer is an MoE layer"):
        model_cost(bare, Training(b=1, l=16))
    known = Architecture("toy", 4, 64, 4, 128, 100, window=8, windowed_layers=2, moe=moe,
                         window_pattern=(True, False, True, False))
    assert [int(n) for _, n in model_cost(known, Training(b=1, l=16)).blocks[1:-1]] == [1, 1, 2]


def test_an_expert_tensor_degree_on_a_dense_model_is_refused():
    """A dense model has no expert layer to split: ``etp`` other than ``m1`` (its default) would
    change nothing, so it is refused as ``ep`` is; equal to ``m1`` it is no setting."""
    from symbolic_cost.checks import InputError
    from symbolic_cost.models.config import preset
    with pytest.raises(InputError, match="etp applies to a mixture of experts"):
        model_cost(preset("gpt2"), Training(b=1, l=128, m1=4, etp=2))
    assert model_cost(preset("gpt2"), Training(b=1, l=128, m1=4, etp=4)).parameters == \
        model_cost(preset("gpt2"), Training(b=1, l=128, m1=4)).parameters


def test_an_imbalance_moves_tokens_between_ranks_not_more_of_them():
    """Qwen3-30B-A3B on 8 expert ranks: under an imbalance of ``X`` the most loaded rank receives
    ``X`` times a rank's mean in dispatch (and sends as much back in combine), while the job's
    all-to-alls move what the balanced ones do: the 8 ranks' 4,096 tokens x 8 experts x 2,048 x 2
    bytes, 7/8 of it off their rank, per layer and pass."""
    import json
    from pathlib import Path
    from symbolic_cost.models import cluster_volume
    from symbolic_cost.models.config import from_config
    arch = from_config(json.loads((Path(__file__).parent / "hf_configs" / "Qwen3-30B-A3B.json").read_text()))
    mean = 4096 * 8 * 2048 * 2 * 7 // 8
    for imbalance in (1, 2, 8):
        cost = model_cost(arch, Training(b=1, l=4096, d=8, ep=8, flash=True, expert_imbalance=imbalance))
        exchanges = [c for dim, c in cost.collectives if dim == "expert" and c.kind == "alltoall"]
        assert exchanges and all(c.volume == imbalance * mean * c.repeats for c in exchanges)
        assert all(cluster_volume(cost, "expert", c) == 8 * mean * c.repeats for c in exchanges)


def test_a_layer_table_takes_the_expert_tensor_degree(capsys):
    """``table --set etp=`` on a mixture of experts: the expert products' weights follow it
    (Mixtral's expert gate and up, 2 x 14,336 x 4,096 bf16 values, one expert a rank at ep=8:
    0.21875 GiB whole at etp=1, half of it at etp=m1=2, the default), so it is taken, not refused
    as a degree nothing depends on; a dense model still refuses it."""
    import json
    from pathlib import Path
    from symbolic_cost.cli import main
    path = str(Path(__file__).parent / "hf_configs" / "Mixtral-8x7B-v0.1.json")
    layout = ["--set", "b=1", "l=4096", "m1=2", "s1=2", "ep=8"]
    gib = {}
    for etp in ("etp=1", "etp=2"):
        assert main(["table", "--hf-config", path, "--block", "layer", *layout, etp, "--flash", "--format",
                     "json"]) == 0
        gib[etp] = next(r["weights_mem"] for r in json.loads(capsys.readouterr().out) if r["layer"] == "expert_fc1")
    assert gib == {"etp=1": 2 * 14336 * 4096 * 2 / 2**30, "etp=2": 14336 * 4096 * 2 / 2**30}
    assert main(["table", "--preset", "gpt2", "--block", "layer", "--set", "etp=1"]) == 2
    assert "nothing in the layer block depends on etp" in capsys.readouterr().err
