"""Full recomputation's block method, chunk by chunk and kind by kind.

Megatron-LM builds one ``TransformerBlock`` per model chunk and its block method checkpoints
the first ``recompute_num_layers`` of that block's own layers (all of them where it holds
fewer; ``megatron/core/transformer/transformer_block.py``, ``_checkpointed_forward``).  So a
rank of the interleaved schedule redoes ``N`` layers in each of its ``v`` chunks, and a model
whose first layers differ (DeepSeek's dense layers before its experts) redoes the kinds that
come first on each rank.  Every expected value below is counted by hand from the layer
indices each rank holds; one layer's forward FLOPs and kept bytes are the library's own
(checked against PyTorch elsewhere), and only which layers are redone is under test.
"""

import pytest
from sympy import Integer

from symbolic_cost.blocks.moe import MoE
from symbolic_cost.checks import InputError
from symbolic_cost.models.config import preset
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.memory import kept_bytes
from symbolic_cost.models.ranks import rank_activation_bytes
from symbolic_cost.models.utilisation import recompute_flops
from symbolic_cost.parallel.pipeline import chunk_in_flight
from symbolic_cost.symbols import n_rec

BLOCK = dict(recompute="full", recompute_method="block")
N_MICRO = 4


def _dense_first(depth, first_dense=2):
    """A toy DeepSeek: ``first_dense`` dense SwiGLU layers, then MoE layers (8 experts of 16)."""
    return Architecture("toy", depth, 32, 4, 64, 100, mlp="swiglu", norm="rms", rotary=True, tied=False,
                        qkv_bias=False, bias=False, dropouts=False, moe=MoE(8, 2, 16, first_dense=first_dense))


def _layers(cost):
    """(forward FLOPs, bytes kept without recomputation) of one dense and one MoE layer, and the
    bytes of a layer's input (b l e, bf16)."""
    (dense, _), (moe, _) = cost.stack[1:-1]
    tokens = cost.training.b * cost.training.l * cost.architecture.e * 2
    return ([blk.total("flops_fwd") for blk in (dense, moe)],
            [kept_bytes(blk, "none", tokens) for blk in (dense, moe)], tokens)


def _saved(cost, plain, rank):
    """Activation bytes rank ``rank`` saves against no recomputation at all."""
    return rank_activation_bytes(plain, rank) - rank_activation_bytes(cost, rank)


def test_interleaved_ranks_redo_the_first_layers_of_each_chunk():
    """8 layers, p = 2, v = 2: each rank holds two chunks of 2 layers.  N = 1 redoes one layer a
    chunk, two a rank; N = 2 and N = 3 (more than a chunk holds) redo all four."""
    arch = Architecture("gpt", 8, 512, 8, 2048, 1000)
    base = dict(b=1, l=256, p=2, micro_batches=N_MICRO, schedule="interleaved", virtual_stages=2)
    plain = model_cost(arch, Training(**base))
    layer_fwd = plain.layer.total("flops_fwd")
    for n, redone in ((1, 2), (2, 4), (3, 4)):
        cost = model_cost(arch, Training(**base, **BLOCK, recompute_layers=n))
        assert cost.flops_recompute == N_MICRO * redone * layer_fwd
    cost = model_cost(arch, Training(**base, **BLOCK, recompute_layers=1))
    tokens = 256 * 512 * 2
    one_layer = kept_bytes(plain.layer, "none", tokens)
    for rank in (0, 1):                        # each chunk in flight keeps one input instead of a layer
        in_flight = sum(chunk_in_flight(2, N_MICRO, 2, rank))
        assert _saved(cost, plain, rank) == in_flight * (one_layer - tokens)


def test_uneven_stages_redo_the_kind_each_rank_holds_first():
    """7 layers, 2 dense, as 1 | 3 | 3 (first_stage_layers=1): rank 0 holds layer 0 (dense),
    rank 1 layers 1-3 (dense, MoE, MoE), rank 2 layers 4-6 (MoE).  With N = 1 ranks 0 and 1
    redo a dense layer and rank 2 an MoE one: the busiest rank redoes the larger, the job
    both dense layers and one MoE layer, and rank 2 keeps one MoE layer's input instead of it
    (no dense layer's bytes taken off a rank that holds none)."""
    arch = _dense_first(7)
    base = dict(b=1, l=8, p=3, micro_batches=N_MICRO, first_stage_layers=1)
    plain = model_cost(arch, Training(**base))
    cost = model_cost(arch, Training(**base, **BLOCK, recompute_layers=1))
    (dense_fwd, moe_fwd), (dense_kept, moe_kept), tokens = _layers(cost)
    assert cost.flops_recompute == N_MICRO * max(dense_fwd, moe_fwd)
    assert recompute_flops(cost) == N_MICRO * (2 * dense_fwd + moe_fwd)          # d = 1
    held = [cost.training.pipeline_schedule().in_flight(3, N_MICRO, r) for r in range(3)]
    assert [_saved(cost, plain, r) for r in range(3)] == [
        held[0] * (dense_kept - tokens), held[1] * (dense_kept - tokens), held[2] * (moe_kept - tokens)]


def test_interleaved_chunks_of_two_kinds():
    """8 layers, 2 dense, p = 2, v = 2: rank 0's chunks are layers 0-1 (dense) and 4-5 (MoE),
    rank 1's 2-3 and 6-7 (MoE).  N = 1 redoes layers 0 and 4 on rank 0, 2 and 6 on rank 1;
    N = 3 redoes every layer (each chunk holds 2)."""
    arch = _dense_first(8)
    base = dict(b=1, l=8, p=2, micro_batches=N_MICRO, schedule="interleaved", virtual_stages=2)
    plain = model_cost(arch, Training(**base))
    cost = model_cost(arch, Training(**base, **BLOCK, recompute_layers=1))
    (dense_fwd, moe_fwd), (dense_kept, moe_kept), tokens = _layers(cost)
    assert cost.flops_recompute == N_MICRO * max(dense_fwd + moe_fwd, 2 * moe_fwd)
    assert recompute_flops(cost) == N_MICRO * (dense_fwd + 3 * moe_fwd)
    first, second = chunk_in_flight(2, N_MICRO, 2, 0)
    assert _saved(cost, plain, 0) == first * (dense_kept - tokens) + second * (moe_kept - tokens)
    assert _saved(cost, plain, 1) == sum(chunk_in_flight(2, N_MICRO, 2, 1)) * (moe_kept - tokens)
    every = model_cost(arch, Training(**base, **BLOCK, recompute_layers=3))
    assert every.flops_recompute == N_MICRO * max(2 * dense_fwd + 2 * moe_fwd, 4 * moe_fwd)
    assert recompute_flops(every) == N_MICRO * (2 * dense_fwd + 6 * moe_fwd)


def test_a_symbolic_count_of_redone_layers_substitutes_to_each_number():
    """The redone layers of each chunk as a formula in ``n_rec`` (``min(max(n_rec - a, 0), k)``
    a run of ``k`` layers of one kind ``a`` layers in) equal the model built with each number."""
    arch = _dense_first(8, first_dense=3)
    base = dict(b=1, l=8, p=2, micro_batches=N_MICRO)
    formula = model_cost(arch, Training(**base, **BLOCK, recompute_layers=n_rec))
    for n in (1, 2, 3, 4):
        cost = model_cost(arch, Training(**base, **BLOCK, recompute_layers=n))
        assert formula.flops_recompute.subs(n_rec, n) == cost.flops_recompute
        assert formula.activation_bytes.subs(n_rec, n) == cost.activation_bytes
    assert formula.flops_recompute.subs(n_rec, 2) != formula.flops_recompute.subs(n_rec, 1) != Integer(0)


def test_the_collectives_a_redone_forward_repeats():
    """A redone forward runs its tensor-parallel collectives again, each layer group's as often as
    the rank redoing the most of that group (the bound ``_collectives`` states).  8 layers, p = 2,
    v = 2, N = 1: one kind of layer, each rank redoes 2 of its 4; two dense then MoE layers, rank
    0 redoes a dense and an MoE layer of its 2 and 2, rank 1 2 MoE layers of its 4: either way
    the forward collectives added are half of those that redoing every layer adds."""
    base = dict(b=1, l=256, m1=2, s1=2, p=2, micro_batches=N_MICRO, schedule="interleaved", virtual_stages=2)
    for arch in (Architecture("gpt", 8, 512, 8, 2048, 1000), _dense_first(8)):
        def forward_repeats(**recompute):
            cost = model_cost(arch, Training(**base, **recompute))
            return sum(c.repeats for _, c in cost.collectives if c.pass_ == "fwd")

        plain = forward_repeats()
        block, every = forward_repeats(**BLOCK, recompute_layers=1) - plain, forward_repeats(recompute="full") - plain
        assert every != 0 and 2 * block == every, arch.name


def test_uniform_groups_stay_inside_a_model_chunk():
    """The uniform method checkpoints groups of ``N`` of one ``TransformerBlock``'s layers
    (``_checkpointed_forward``: ``custom(l, l + N)`` over the block's own layers), and a block is
    a model chunk: 80 layers on p=4 ranks of v=5 chunks are chunks of 4 layers, so N=2 and N=4
    are taken, while N=5 and N=10, which divide a rank's 20 layers, are refused by the chunk's."""
    arch = preset("llama-3-70b")
    layout = dict(b=1, l=8192, m1=8, s1=8, p=4, micro_batches=16, schedule="interleaved", virtual_stages=5,
                  recompute="full")
    for n in (2, 4):
        model_cost(arch, Training(**layout, recompute_layers=n))
    for n in (5, 10):
        with pytest.raises(InputError, match=f"must divide a model chunk's layers \\(got {n} and 4\\)"):
            model_cost(arch, Training(**layout, recompute_layers=n))
