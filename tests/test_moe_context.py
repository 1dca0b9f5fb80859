"""Context parallelism with routed experts, as Megatron-Core folds them: attention split over the
``cp`` ranks of each sequence, the expert layers seeing the ``m1 cp d`` ranks of a stage as
``etp x ep x edp``.  Oracles: the step-by-step routing simulation of ``tests/simulate_moe.py``
(with its ``cp`` ranks), the groups found there from what each rank holds, the ZeRO
simulation of ``tests/simulate.py``, and hand counts of a small Mixtral-like model."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import example, given, settings, strategies as st

import simulate_fsdp
import simulate_moe as sim
from simulate import zero_step
from symbolic_cost import conventions as conv
from symbolic_cost.blocks.moe import MoE
from symbolic_cost.checks import InputError
from symbolic_cost.models import Architecture, Training, model_cost, world_size

TORCH = conv.DEFAULT.but(matmul_flops="2mnk", reduction_flops=False)
BYTES = (2, 2, 12)           # bf16 weights, gradients, optimizer (ZeRO's mixed precision)
MIXTRAL = Path(__file__).parent / "hf_configs" / "Mixtral-8x7B-v0.1.json"


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


@st.composite
def layouts(draw):
    """``m1 x cp x d`` ranks, an expert grid folding onto them, ``2 cp m1 E | l`` (the causal
    chunks, whole sequence shards, balanced routing)."""
    m1, cp, d = draw(st.sampled_from([1, 2])), draw(st.sampled_from([2, 3, 4])), draw(st.integers(1, 2))
    ep = draw(st.sampled_from(divisors(m1 * cp * d)))
    etp = draw(st.sampled_from(divisors(m1 * cp * d // ep)))
    experts = ep * draw(st.integers(1, 2))
    return dict(m1=m1, cp=cp, d=d, ep=ep, etp=etp, experts=experts, k=draw(st.integers(1, experts)),
                b=draw(st.integers(1, 2)), l=2 * cp * m1 * experts, h=2 * m1, e=4 * m1,
                f=etp * draw(st.integers(1, 2)), zero=draw(st.integers(0, 3)), dist=draw(st.booleans()))


def toy(x: dict, conventions=conv.DEFAULT):
    """One MoE layer (RMS norms, rotary, no biases, untied head), flash attention, ring CP."""
    arch = Architecture("toy", 1, x["e"], x["h"], x["m1"], 8 * x["m1"], mlp="swiglu", norm="rms", rotary=True,
                        tied=False, qkv_bias=False, bias=False, dropouts=False, moe=MoE(x["experts"], x["k"], x["f"]))
    t = Training(b=x["b"], l=x["l"], m1=x["m1"], s1=x["m1"], d=x["d"], cp=x["cp"], ep=x["ep"], etp=x["etp"],
                 zero=x["zero"], distributed_optimizer=x["dist"], flash=True)
    return model_cost(arch, t, conventions)


def booked(block, row: str) -> dict:
    """``(kind, pass) -> volume`` of a row's collectives."""
    out = {}
    for c in block[row].collectives:
        out[(c.kind, c.pass_)] = out.get((c.kind, c.pass_), 0) + c.volume
    return out


def span(groups) -> set:
    """``(size, stride)`` of rank groups (evenly spaced members, as every group here is)."""
    return {(len(g), g[1] - g[0] if len(g) > 1 else 1) for g in groups}


@settings(max_examples=30, deadline=None)
@given(x=layouts())
@example(x=dict(m1=2, cp=2, d=2, ep=4, etp=2, experts=4, k=2, b=1, l=16, h=4, e=8, f=2, zero=1, dist=False))
def test_a_context_rank_routes_its_own_tokens_to_the_simulated_ranks(x):
    """Per rank: elements sent in the all-to-alls and the expert-tensor rings, rows through the
    expert slices (their FLOPs), every state; each from the simulation of ``m1 cp d`` ranks."""
    ranks = sim.moe_layer(x["m1"], x["d"], x["ep"], x["etp"], x["experts"], x["k"], x["b"], x["l"], x["e"],
                          x["f"], zero=x["zero"], distributed_optimizer=x["dist"], cp=x["cp"])
    cost = toy(x, TORCH)
    layer = cost.blocks[1][0]
    dispatch, combine = booked(layer, "dispatch"), booked(layer, "combine")
    phases = {"dispatch": (dispatch, "alltoall"), "gather": (dispatch, "allgather"),
              "scatter": (combine, "reducescatter"), "combine": (combine, "alltoall")}
    for rank in ranks.values():
        for phase, (table, kind) in phases.items():
            assert table.get((kind, "fwd"), 0) == 2 * rank.sent.get(phase, 0), phase      # bf16
        assert layer["expert_fc1"].flops_fwd + layer["expert_fc2"].flops_fwd == sim.expert_flops(
            rank, x["e"], x["f"], x["etp"])
        assert cost.expert_parameters_per_device == rank.expert_parameters
    edp = len(ranks) // (x["ep"] * x["etp"])
    e, m1, replicas = x["e"], x["m1"], x["cp"] * x["d"]            # dense weights: by hand (test_moe)
    dense_parameters = 2 * 8 * e + e + 2 * e + 4 * e * e // m1 + x["experts"] * e
    dense, _ = zero_step(dense_parameters, replicas, x["zero"], x["dist"], 1, BYTES)
    experts, _ = zero_step(ranks[0].expert_parameters, edp, x["zero"], x["dist"], 1, BYTES)
    for state, field in (("weights", "weight_bytes"), ("gradients", "gradient_bytes"),
                         ("optimizer", "optimizer_bytes")):
        assert getattr(cost, field) == dense[state][0] + experts[state][0], state


@settings(max_examples=30, deadline=None)
@given(x=layouts())
def test_every_group_is_the_ranks_that_hold_or_share_the_same(x):
    """Group sizes and strides of the collectives against the simulation's groups: the
    all-to-all over the ranks exchanging tokens, the ring's sends over a sequence's ranks,
    the dense gradients over the ranks holding the same dense weights (``d cp``), the experts'
    over those holding the same expert slices (``m1 cp d/(ep etp)``)."""
    groups = sim.holders(x["m1"], x["cp"], x["d"], x["ep"], x["etp"])
    cost = toy(dict(x, zero=0, dist=False))
    found = {}
    for dimension, c in cost.collectives:
        if dimension != "tensor" and c.group != 1:
            found.setdefault((dimension, c.kind), set()).add((c.group, c.stride))
    expected = {("context", "p2p"): groups["context"], ("data", "allreduce"): groups["dense"],
                ("expert_data", "allreduce"): groups["expert_data"], ("expert", "alltoall"): groups["expert"],
                ("expert", "allgather"): groups["expert_tensor"], ("expert", "reducescatter"): groups["expert_tensor"]}
    assert found == {key: span(g) for key, g in expected.items() if len(g[0]) > 1}
    assert sum(len(g) for g in groups["tensor"]) == world_size(cost.training)


TINY_MIXTRAL = Architecture("tiny-mixtral", 2, 64, 4, 128, 128, kv_heads=2, mlp="swiglu", norm="rms", rotary=True,
                            tied=False, qkv_bias=False, bias=False, dropouts=False, moe=MoE(4, 2, 96))


def test_a_small_mixtral_by_hand():
    """Two layers, e = 64, 4 query / 2 key-value heads of 16, 4 experts of width 96, top-2,
    vocabulary 128; b = 1, l = 64, TP 2 with SP, CP 2 (ring), d = 2, EP 4, ETP 1, ZeRO-1, bf16.
    A rank holds 64/2/2 = 16 tokens; the 8 ranks of the stage fold into EP 4 x edp 2."""
    t = Training(b=1, l=64, m1=2, s1=2, cp=2, d=2, ep=4, etp=1, zero=1, flash=True)
    cost = model_cost(TINY_MIXTRAL, t, TORCH)
    layer = cost.blocks[1][0]
    # each of 16 tokens sends 2 copies of 64 values; balanced, 3 of the 4 expert ranks are elsewhere
    assert booked(layer, "dispatch")[("alltoall", "fwd")] == 16 * 2 * 64 * 2 * 3 // 4 == 3072
    # the expert rank receives 8 rows from each of its 4 ranks: 32 rows through [gate, up] and down
    assert layer["expert_fc1"].flops_fwd == 2 * 32 * 64 * 192
    assert layer["expert_fc2"].flops_fwd == 2 * 32 * 96 * 64
    # the ring sends the rank's own K, V (32 tokens x 1 key/value head x 32) once forward, twice backward
    context = [c for dim, c in cost.collectives if dim == "context"]
    assert {(c.pass_, c.volume, c.group, c.stride) for c in context} == {("fwd", 2 * 2048, 2, 2),
                                                                           ("bwd", 2 * 4096, 2, 2)}
    expert = 64 * 192 + 96 * 64                              # one whole expert a rank
    dense = 64 + (64 * 64 + 2 * 64 * 32) // 2 + 64 * 64 // 2 + 64 + 64 * 4    # norms, qkv, o, router
    ends = 2 * 128 // 2 * 64 + 64                            # word table and head over m1, final norm
    assert (expert, dense, ends) == (18432, 6528, 8256)
    assert cost.expert_parameters_per_device == 2 * expert
    assert cost.parameters_per_device == 2 * dense + ends + 2 * expert == 58176
    # ZeRO-1, bf16: optimizer 12 bytes a parameter over d cp = 4 (dense), over edp = 2 (experts)
    assert cost.optimizer_bytes == 12 * (2 * dense + ends) // 4 + 12 * 2 * expert // 2 == 285120
    groups = {(dim, c.group, c.stride) for dim, c in cost.collectives if dim in ("data", "expert_data")}
    assert groups == {("data", 4, 2), ("expert_data", 2, 4)}


def test_the_expert_grid_must_fold_onto_the_context_ranks_too():
    """Megatron-Core refuses a world the expert grid does not divide: EP 8 over 2 x 2 x 1 ranks."""
    with pytest.raises(InputError, match=r"ep x etp must divide m1 x cp x d \(got ep x etp=8, m1 x cp x d=4\)"):
        model_cost(TINY_MIXTRAL, Training(b=1, l=64, m1=2, s1=2, cp=2, ep=8, etp=1, flash=True))


@pytest.mark.parametrize("m1, cp, d, shard, ep, etp", [(2, 2, 4, 2, 4, 1), (1, 2, 4, 2, 2, 1), (2, 1, 4, 2, 2, 2),
                                                      (1, 1, 8, 4, 4, 1), (2, 2, 2, 1, 4, 1)])
def test_hsdp_shards_the_experts_within_each_replica_group(m1, cp, d, shard, ep, etp):
    """HSDP with routed experts: the FSDP simulation run on the expert-data ranks (``edp`` of
    them, ``edp_shard = m1 cp shard/(ep etp)`` a shard group) and on the dense ranks (``d cp``,
    ``shard cp`` a group), per layer unit, gives each collective's bytes, group and spacing; the
    spacing in global ranks is the simulation's times ``ep etp`` (experts) or ``m1`` (dense), as
    ``simulate_moe.holders`` places them; the states are the simulated shards."""
    t = Training(b=1, l=64, m1=m1, s1=m1, cp=cp, d=d, ep=ep, etp=etp, zero=3, shard=shard, flash=True)
    cost = model_cost(TINY_MIXTRAL, t)
    edp, edp_shard = m1 * cp * d // (ep * etp), m1 * cp * shard // (ep * etp)
    groups = sim.holders(m1, cp, d, ep, etp)
    assert span(groups["expert_data"]) == {(edp, ep * etp)}           # the expert-data ranks, ep etp apart
    expert = cost.expert_parameters_per_device // 2                    # a layer's routed experts on a rank
    dense = cost.parameters_per_device - 2 * expert
    # the rings' bytes are linear in a unit's size: simulate one element a rank, scale to the unit
    for dimension, ranks, group, parameters, stride in (("expert_data", edp, edp_shard, 2 * expert, ep * etp),
                                                          ("data", d * cp, shard * cp, dense, m1)):
        step = simulate_fsdp.hsdp_step([ranks], ranks, group, 1, True, es_w=2, es_g=2)
        members = lambda kind: step.groups["replica" if kind == "allreduce" else "shard"]  # noqa: E731
        spacing = lambda ranks: ranks[1] - ranks[0] if len(ranks) > 1 else 1           # noqa: E731
        expected = {key: (sent * Fraction(parameters, ranks), len(members(key[0])), stride * spacing(members(key[0])))
                    for key, sent in step.sent.items() if sent}
        assert {(c.kind, c.pass_): (c.volume, c.group, c.stride) for dim, c in cost.collectives
                if dim == dimension} == expected, dimension
    assert cost.weight_bytes == 2 * (Fraction(dense, shard * cp) + Fraction(2 * expert, edp_shard))


def test_summary_of_mixtral_with_context_parallelism(capsys):
    """``summary`` prints memory per rank, the context, expert and expert-data collectives and a
    step time; the JSON's ``edp`` is ``m1 cp d/(ep etp)`` = 4 x 2 x 4/8."""
    from symbolic_cost.cli import main
    layout = ["--hf-config", str(MIXTRAL), "--set", "l=32768", "m1=4", "s1=4", "cp=2", "d=4", "p=4", "ep=8",
              "etp=1", "n_micro=8", "--flash", "--zero", "1"]
    assert main(["summary", *layout]) == 0
    out = capsys.readouterr().out
    for needle in ("cp=2 (ring)", "edp=4", "memory per device:", "activations per pipeline rank:", "context  p2p",
                   "expert   alltoall      group 8", "expert_data reducescatter group 4", "step time per iteration"):
        assert needle in out, needle
    assert main(["summary", *layout, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["experts"]["edp"] == 4
