"""Communication overlap, collective by collective: tensor parallelism's and a context-parallel ring's
(``timing.step.tensor_comm_exposed``), and the MoE all-to-alls' 1F1B overlap with the flex dispatcher's
share of the SMs (``timing.step.all_to_all_exposed``, ``dispatch_sm_share``; at the end).

Transformer Engine's userbuffers overlap (Megatron-LM ``--tp-comm-overlap``) runs each tensor-parallel
all-gather or reduce-scatter under the chunks of one GEMM: the one that consumes the gathered input or
produces the scattered output (``transformer_engine.pytorch.module.base.initialize_ub``: ring exchange
for qkv/fc1 fprop and proj/fc2 dgrad, pipelined for proj/fc2 fprop, bulk for qkv/fc1 dgrad and wgrad).
The expected values here pair the collectives with their products by the layers' names, written out
by hand from that list, and price each side with the row-level functions (``row_seconds``, ``comm_time``)
that do not know about the pairing."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sympy import Integer, Max

from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.models.training import Context, Execution, Overlap
from symbolic_cost.timing import attention_kernels
from symbolic_cost.timing.hardware import calibrated, comm_time, row_seconds
from symbolic_cost.timing.step import all_to_all_exposed, step_time_breakdown, tensor_comm_exposed

PAIRS = {
    # the product a collective runs under, by the row it is attached to and its pass
    ("rms_norm_1", "fwd"): "qkv_proj",      # sequence-parallel gather of the norm's output: qkv fprop
    ("v_proj", "fwd"): "v_proj",            # the projection's reduce-scatter: its own fprop
    ("rms_norm_2", "fwd"): "fc1",
    ("fc2", "fwd"): "fc2",
    ("qkv_proj", "bwd"): "qkv_proj",        # input re-gather for wgrad, dgrad's reduce-scatter
    ("fc1", "bwd"): "fc1",
    ("residual", "bwd"): None,              # the output gradient's gather: the dgrad of the linear before
}


def _layer(m1: int, l: int = 4096, cp: int = 1, hidden=None):
    arch = preset("llama-3-70b")
    if hidden is not None:
        arch = replace(arch, e=hidden, f=hidden * 4, h=hidden // 128, kv_heads=8)
    training = Training(b=1, l=l, m1=m1, s1=m1, d=1, p=1, micro_batches=1, context=Context(cp, "ring"),
                        execution=Execution(flash=True, overlap=Overlap(tensor=True)))
    cost = model_cost(arch, training)
    system = attention_kernels.for_training(calibrated("h100"), training)
    return cost, cost.stack[1][0], system


def _by_hand(rows, system, pass_: str):
    """Exposure with the pairs of ``PAIRS``, the gradient's gathers on a residual row under the
    linear that precedes that residual in the forward order."""
    names = [r.name for r in rows]
    times = {i: row_seconds(r, system)[f"t_{pass_}"] for i, r in enumerate(rows)}
    comm = {}
    for i, r in enumerate(rows):
        mine = [comm_time(c, system) for c in r.collectives if c.pass_ == pass_ and c.kind != "alltoall"]
        if not mine:
            continue
        target = PAIRS[(r.name, pass_)] if (r.name, pass_) in PAIRS else r.name
        if target is None:                      # the linear just before this residual
            j = max(k for k in range(i) if names[k] in ("v_proj", "fc2"))
        else:
            j = next(k for k in range(i, len(rows)) if names[k] == target) if pass_ == "fwd" \
                else next(k for k in range(i, -1, -1) if names[k] == target)
        comm[j] = comm.get(j, Integer(0)) + sum(mine, Integer(0))
    return sum((Max(0, c - times[j]) for j, c in comm.items()), Integer(0)), sum(comm.values(), Integer(0))


@pytest.mark.parametrize("m1, hidden", [(8, None), (8, 1024), (4, 2048)])
@pytest.mark.parametrize("pass_", ["fwd", "bwd"])
def test_each_collective_is_hidden_behind_its_own_product(m1, hidden, pass_):
    _, rows, system = _layer(m1, hidden=hidden)
    seconds = [row_seconds(r, system) for r in rows]
    expected, total = _by_hand(rows, system, pass_)
    got = tensor_comm_exposed(rows, seconds, pass_, system)
    assert float(total) > 0
    assert float(got) == pytest.approx(float(expected), rel=1e-12, abs=1e-15)


def test_small_products_leave_communication_exposed_that_the_whole_pass_would_hide():
    """A 1,024-wide model over 8 tensor ranks: its products are shorter than their collectives, so
    some communication shows, though the layer's compute is longer than all of it."""
    _, rows, system = _layer(8, hidden=1024)
    seconds = [row_seconds(r, system) for r in rows]
    shown = float(tensor_comm_exposed(rows, seconds, "fwd", system))
    comm = sum(float(comm_time(c, system)) for r in rows for c in r.collectives if c.pass_ == "fwd")
    compute = sum(float(s["t_fwd"]) for s in seconds)
    assert 0 < shown < comm
    assert compute > comm                     # the old rule (all behind the pass) would show nothing


@pytest.mark.parametrize("overlap", [True, False])
def test_a_ring_exchange_pairs_with_its_attention_whatever_the_tensor_overlap(overlap):
    """Context parallelism's ring sends K and V under the attention chunks (Transformer Engine's
    ``AttnFuncWithCPAndKVP2P`` posts the next block's send before computing on the one it holds),
    with or without Megatron-LM's ``--tp-comm-overlap``: that pair, priced alone, is what the
    attention row contributes."""
    _, rows, system = _layer(1, l=2048, cp=8)
    attention = next(r for r in rows if any(c.kind == "p2p" for c in r.collectives))
    assert attention.engine == "matrix"
    for pass_ in ("fwd", "bwd"):
        sends = sum((comm_time(c, system) for c in attention.collectives if c.pass_ == pass_), Integer(0))
        alone = tensor_comm_exposed([attention], [row_seconds(attention, system)], pass_, system, overlap=overlap)
        assert float(alone) == pytest.approx(max(0.0, float(sends - row_seconds(attention, system)[f"t_{pass_}"])))


def test_a_ring_over_slow_links_shows_what_outlasts_its_attention_and_no_more():
    """A 16-way ring over 16 H100 nodes (one rank a node, TP 8 within it) on 512 tokens a rank: the
    sends outlast the attention in a pass; without the tensor overlap the step's tensor
    communication is the TP collectives whole plus the ring's excess, by hand."""
    arch = preset("llama-3-8b")
    training = Training(b=1, l=8192, m1=8, s1=8, d=1, p=1, micro_batches=1,
                        context=Context(16, "ring"), execution=Execution(flash=True))
    cost = model_cost(arch, training)
    system = calibrated("h100")
    timed = attention_kernels.for_training(system, training)
    expected, ring_total, excess = Integer(0), Integer(0), Integer(0)
    for blk, count in cost.stack:
        for row in blk:
            t = row_seconds(row, timed)
            for pass_ in ("fwd", "bwd"):
                comm = sum((comm_time(c, timed) for c in row.collectives if c.pass_ == pass_), Integer(0))
                ring = sum((comm_time(c, timed) for c in row.collectives if c.pass_ == pass_ and c.kind == "p2p"),
                           Integer(0))
                expected += count * (comm - ring + Max(0, ring - t[f"t_{pass_}"]))
                ring_total += count * ring
                excess += count * Max(0, ring - t[f"t_{pass_}"])
    got = step_time_breakdown(cost, system)["tensor_comm"]
    assert float(got) == pytest.approx(float(expected), rel=1e-9)
    assert 0 < float(excess) < float(ring_total)        # some of the ring shows, not all


def test_the_step_takes_the_exposed_part_not_the_whole():
    cost, _, system = _layer(8, hidden=1024)
    on = step_time_breakdown(cost, calibrated("h100"))
    off = step_time_breakdown(model_cost(cost.architecture, replace(cost.training, overlap=Overlap())), calibrated("h100"))
    assert 0 < float(on["tensor_comm"]) < float(off["tensor_comm"])
    assert float(on["compute"]) == pytest.approx(float(off["compute"]))


def test_an_embedding_collective_with_no_product_after_it_shows_whole():
    from types import SimpleNamespace as Row
    from symbolic_cost.cost import Collective
    scatter = Collective("reducescatter", 2**24, 2, 8, "fwd", 0)
    rows = [Row(engine="matrix", collectives=()), Row(engine="vector", collectives=(scatter,))]
    got = tensor_comm_exposed(rows, [{"t_fwd": Integer(1)}, {"t_fwd": Integer(0)}], "fwd", "h100")
    assert got == comm_time(scatter, "h100")


# Megatron-Core's combined 1F1B schedule (``--overlap-moe-expert-parallel-comm``) runs a layer's forward of
# one micro-batch beside the same layer's backward of another, in four slots (its ``schedule_chunk_1f1b``):
# the backward's combine under the forward's attention, the forward's dispatch under the backward's
# experts, the backward's dispatch under the forward's experts, the forward's combine under the
# backward's attention.  The phases here are named by hand: attention up to the dispatch row and from
# the last residual, the experts from the dispatch's sort to the combine.
EXPERTS = {"alltoall": ("dispatch_sort", "expert_fc1", "expert_act", "expert_fc2", "combine_sort", "combine"),
           "flex": ("expert_fc1", "expert_act", "expert_fc2", "combine")}     # DeepEP permutes in its kernels


def _moe_layer(name: str, ep: int, l: int, dispatcher: str = "alltoall"):
    from symbolic_cost.models.config import load
    import pathlib
    arch = load(pathlib.Path(__file__).parent / "hf_configs" / f"{name}.json")
    training = Training(b=1, l=l, m1=1, s1=1, d=ep, ep=ep, micro_batches=4, flash=True, dispatcher=dispatcher,
                        overlap=Overlap(expert=True))
    cost = model_cost(arch, training)
    return cost, cost.stack[1][0], attention_kernels.for_training(calibrated("h100"), training)


@pytest.mark.parametrize("name, ep, l, dispatcher", [
    ("Mixtral-8x7B-v0.1", 8, 4096, "alltoall"),      # in one H100 node: all hidden
    ("Qwen3-30B-A3B", 16, 8192, "alltoall"),         # over two nodes: some shows
    ("Qwen3-30B-A3B", 16, 8192, "flex")])            # DeepEP's kernels hold 20 of the 132 SMs meanwhile
def test_each_all_to_all_hides_behind_the_other_micro_batch_s_phase(name, ep, l, dispatcher):
    _, rows, system = _moe_layer(name, ep, l, dispatcher)
    rows = list(rows)
    names = [r.name for r in rows]
    experts_rows = EXPERTS[dispatcher]
    assert set(experts_rows) <= set(names)
    t = {(r.name, p): row_seconds(r, system)[f"t_{p}"] for r in rows if r.name not in ("residual",) for p in ("fwd", "bwd")}
    residuals = [row_seconds(r, system) for r in rows if r.name == "residual"]
    attention = {p: sum((v for (n, q), v in t.items() if q == p and n not in experts_rows), Integer(0))
                 + sum((s[f"t_{p}"] for s in residuals), Integer(0)) for p in ("fwd", "bwd")}
    experts = {p: sum((t[(n, p)] for n in experts_rows), Integer(0)) for p in ("fwd", "bwd")}
    row = {r.name: r for r in rows}

    def a2a(name, p):
        return sum((comm_time(c, system) for c in row[name].collectives if c.kind == "alltoall" and c.pass_ == p),
                   Integer(0))
    slots = [(a2a("combine", "bwd"), attention["fwd"]), (a2a("dispatch", "fwd"), experts["bwd"]),
             (a2a("dispatch", "bwd"), experts["fwd"]), (a2a("combine", "fwd"), attention["bwd"])]
    # beside a kernel holding k of the S SMs, compute W at (S - k)/S while the C seconds last: max(C, W + C k/S)
    share = 20 / 132 if dispatcher == "flex" else 0.0
    expected = sum(max(float(c - w), share * float(c), 0.0) for c, w in slots)
    got = all_to_all_exposed(rows, [row_seconds(r, system) for r in rows], system)
    assert float(got) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert all(float(c) > 0 for c, _ in slots)
    assert (expected > 0) == (ep > 8)


def test_an_all_to_all_longer_than_its_slot_shows_even_when_the_micro_batch_would_hide_it():
    """Qwen3-30B-A3B's 128 experts over 16 GPUs (two nodes), 8,192-token micro-batches: a dispatch
    outlasts the experts' phase it pairs with, though the layer's compute is longer than all its
    all-to-alls."""
    from symbolic_cost.models.config import load
    import pathlib
    arch = load(pathlib.Path(__file__).parent / "hf_configs" / "Qwen3-30B-A3B.json")
    training = Training(b=1, l=8192, d=16, ep=16, micro_batches=4, flash=True, overlap=Overlap(expert=True))
    cost = model_cost(arch, training)
    system = attention_kernels.for_training(calibrated("h100"), training)
    rows = list(cost.stack[1][0])
    seconds = [row_seconds(r, system) for r in rows]
    shown = float(all_to_all_exposed(rows, seconds, system))
    comm = sum(float(comm_time(c, system)) for r in rows for c in r.collectives if c.kind == "alltoall")
    compute = sum(float(s["t_fwd"] + s["t_bwd"]) for s in seconds)
    assert 0 < shown < comm
    assert compute > comm           # the micro-batch's compute as one window would hide them all
    step = step_time_breakdown(cost, calibrated("h100"))
    assert float(step["tensor_comm"]) > 0
