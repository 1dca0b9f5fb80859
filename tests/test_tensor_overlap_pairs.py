"""Tensor-parallel communication overlap, collective by collective (``timing.step.tensor_comm_exposed``).

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
from symbolic_cost.timing.step import step_time_breakdown, tensor_comm_exposed

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


def test_a_ring_exchange_pairs_with_its_attention():
    """Context parallelism's ring sends K and V under the attention chunks (Transformer Engine's
    ``AttnFuncWithCPAndKVP2P``): that pair, priced alone, is what the attention row contributes."""
    _, rows, system = _layer(1, l=2048, cp=8)
    attention = next(r for r in rows if any(c.kind == "p2p" for c in r.collectives))
    assert attention.engine == "matrix"
    for pass_ in ("fwd", "bwd"):
        sends = sum((comm_time(c, system) for c in attention.collectives if c.pass_ == pass_), Integer(0))
        alone = tensor_comm_exposed([attention], [row_seconds(attention, system)], pass_, system)
        assert float(alone) == pytest.approx(max(0.0, float(sends - row_seconds(attention, system)[f"t_{pass_}"])))


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
