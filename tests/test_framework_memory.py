"""Activation memory as Megatron-LM keeps it, against Korthikanti et al. 2022 ("Reducing
Activation Recomputation in Large Transformer Models"): Table 2's six regimes, the first
pipeline stage with the interleaving factor, and the recomputation variants by hand.

The paper writes ``s`` sequence, ``b`` batch, ``h`` hidden, ``a`` heads, ``t`` tensor degree,
``p`` pipeline degree, ``L`` layers, 16-bit activations and 1-byte dropout masks, a GELU MLP
of ``4h`` and LayerNorm statistics left out.  Our names: ``l``, ``b``, ``e``, ``h`` (heads),
``m1`` (= ``s1`` under sequence parallelism).
"""

import pytest
from sympy import Rational, simplify, symbols

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import mlp, transformer_layer
from symbolic_cost.blocks.moe import MoE
from symbolic_cost.models import Architecture, Training, model_cost, stage_parameters
from symbolic_cost.models.memory import kept_bytes
from symbolic_cost.models.ranks import busiest_activation_bytes, rank_activation_bytes, rank_parameters
from symbolic_cost.parallel.pipeline import GPIPE, ONE_F_ONE_B, interleaved
from symbolic_cost.symbols import b, e, h, l, m1
from symbolic_cost.blocks.wiring import Run

MEGATRON = conv.DEFAULT.but(mlp_activation_dropout=False, sequence_parallel_inputs="shard")
PAPER = MEGATRON.but(layer_norm_keeps_stats=False)     # the paper ignores LayerNorm statistics
t = m1


def _layer(m, s, conventions=PAPER):
    return transformer_layer(b, l, e, 4 * e, h, m, s, run=Run(conventions=conventions))


def _kept(m, s, recompute="none", conventions=PAPER):
    return kept_bytes(_layer(m, s, conventions), recompute, 2 * b * l * e / s)


# Table 2 of the paper, per layer (bytes); s b h = l b e, a s / h = h l / e
TABLE_2 = {
    "no parallelism": ((1, 1, "none"), l * b * e * (34 + 5 * h * l / e)),
    "tensor": ((t, 1, "none"), l * b * e * (10 + 24 / t + 5 * h * l / (e * t))),
    "tensor + sequence": ((t, t, "none"), l * b * e / t * (34 + 5 * h * l / e)),
    "tensor + selective": ((t, 1, "selective"), l * b * e * (10 + 24 / t)),
    "tensor + sequence + selective": ((t, t, "selective"), l * b * e * 34 / t),
}


@pytest.mark.parametrize("regime", TABLE_2)
def test_table_2_per_layer_activations(regime):
    (m, s, recompute), paper = TABLE_2[regime]
    assert simplify(_kept(m, s, recompute) - paper) == 0


def test_table_2_full_recomputation_keeps_the_layer_input():
    """``2sbh`` per layer (``2sbh/t`` with sequence parallelism): the difference that one more
    layer makes to the whole model's activations."""
    for m, s in ((1, 1), (4, 1), (4, 4)):
        def total(layers):
            arch = Architecture("gpt", layers, 1024, 16, 4096, 1000)
            return model_cost(arch, Training(b=2, l=512, m1=m, s1=s, recompute="full"), PAPER).activation_bytes
        assert total(3) - total(2) == 2 * 512 * 2 * 1024 // s


def test_layer_norm_statistics_are_the_only_difference_from_the_paper():
    """Each of the two norms keeps a mean and a reciprocal deviation per token (2 bytes each)."""
    for m, s in ((1, 1), (t, 1), (t, t)):
        assert simplify(_kept(m, s, conventions=MEGATRON) - _kept(m, s) - 2 * 2 * 2 * b * l / s) == 0


def test_the_mlp_keeps_19_sbh_without_a_dropout_after_the_activation():
    """fc1 input 2sbh, GELU input 8sbh, fc2 input 8sbh, dropout mask sbh (the paper's 19sbh);
    the LBNL layout's extra dropout adds a 4sbh mask."""
    rows = mlp(b, l, e, 4 * e, run=Run(conventions=PAPER))
    assert "dpr1" not in rows.names
    assert rows.total("act_buffer") - rows["layer_norm_2"].act_buffer == 19 * l * b * e
    lbnl = mlp(b, l, e, 4 * e, run=Run(conventions="lbnl-2024"))
    assert lbnl["dpr1"].act_buffer == 4 * l * b * e


def test_sequence_parallel_inputs_are_gathered_again_in_backward():
    """Megatron-LM keeps the l/t shard of the QKV and fc1 inputs and allgathers it in backward:
    one more backward allgather of ``b l e`` over ``t`` for each of the two."""
    def backward_allgathers(conventions):
        return [c for c in _layer(t, t, conventions).collectives if c.kind == "allgather" and c.pass_ == "bwd"]
    gathered = backward_allgathers(PAPER.but(sequence_parallel_inputs="gathered"))
    again = backward_allgathers(PAPER)
    assert len(again) - len(gathered) == 2
    assert all(c.elements == b * l * e and c.group == t for c in again)


def test_first_stage_with_the_interleaving_factor():
    """Korthikanti et al. §4.2.3: the first stage keeps ``(s b h L / t) 34`` bytes with 1F1B
    (L/p layers x p micro-batches), times ``1 + (p - 1)/(p v)`` interleaved (selective
    recomputation and sequence parallelism; the embedding's own bytes aside)."""
    layers, width, heads, seq, batch, tp, p = 16, 1024, 16, 512, 2, 4, 4
    arch = Architecture("gpt", layers, width, heads, 4 * width, 51200)
    for schedule, v in (("1f1b", 1), ("interleaved", 2), ("interleaved", 4)):
        training = Training(b=batch, l=seq, m1=tp, s1=tp, p=p, micro_batches=8, recompute="selective",
                            schedule=schedule, virtual_stages=v)
        cost = model_cost(arch, training, PAPER)
        held = training.pipeline_schedule().in_flight(p, 8, 0)
        layers_only = rank_activation_bytes(cost, 0) - held * cost.embedding.total("act_buffer")
        factor = 1 + Rational(p - 1, p * v) if v > 1 else 1
        assert layers_only == Rational(seq * batch * width * layers * 34, tp) * factor


def test_schedules_by_hand():
    p_, n_ = symbols("p n", positive=True, integer=True)
    assert [ONE_F_ONE_B.in_flight(4, 8, r) for r in range(4)] == [4, 3, 2, 1]
    assert ONE_F_ONE_B.in_flight(4, 2, 0) == 2 and GPIPE.in_flight(4, 8, 3) == 8
    # Megatron's warm-up on rank r: 2(p - r - 1) + (v - 1)p chunk forwards, plus one
    assert [interleaved(2).in_flight(4, 8, r) for r in range(4)] == [Rational(11, 2), 9 / Rational(2), 7 / Rational(2),
                                                                     Rational(5, 2)]
    assert ONE_F_ONE_B.bubble(p_, n_) == (p_ - 1) / (n_ + p_ - 1)
    assert simplify(interleaved(3).bubble(p_, n_) - (p_ - 1) / (3 * n_ + p_ - 1)) == 0


def test_recomputation_variants_by_hand():
    """Activation-only drops fc2's input (8 s b h / t bytes for a 4h GELU MLP); full with the
    block method keeps N layer inputs and the other layers whole."""
    full, act = _kept(t, t), _kept(t, t, "activation")
    assert simplify(full - act - 8 * l * b * e / t) == 0
    arch = Architecture("gpt", 8, 512, 8, 2048, 1000)
    base = dict(b=1, l=256, p=2, micro_batches=4)
    none = model_cost(arch, Training(**base), PAPER)
    block = model_cost(arch, Training(**base, recompute="full", recompute_method="block", recompute_layers=1), PAPER)
    uniform = model_cost(arch, Training(**base, recompute="full", recompute_method="uniform",
                                        recompute_layers=2), PAPER)
    one_layer = none.layer.total("act_buffer")
    layer_input = 256 * 512 * 2
    # rank 0 holds min(p, n) = 2 micro-batches of its 4 layers
    assert rank_activation_bytes(none, 0) - rank_activation_bytes(block, 0) == 2 * (one_layer - layer_input)
    assert rank_activation_bytes(none, 0) - rank_activation_bytes(uniform, 0) == 2 * (4 * one_layer - 2 * layer_input)
    assert block.flops_recompute == 4 * 1 * none.layer.total("flops_fwd")     # n x N layers
    assert uniform.flops_recompute == 4 * 4 * none.layer.total("flops_fwd")   # n x all 4 layers


def test_per_rank_memory_and_the_busiest_rank():
    arch = Architecture("gpt", 8, 512, 8, 2048, 50000)
    cost = model_cost(arch, Training(b=1, l=256, p=4, micro_batches=8), PAPER)
    ranks = [rank_activation_bytes(cost, r) for r in range(4)]
    layers = 2 * cost.layer.total("act_buffer")
    emb, head = cost.embedding.total("act_buffer"), cost.head.total("act_buffer")
    assert ranks == [4 * (layers + emb), 3 * layers, 2 * layers, layers + head]
    assert busiest_activation_bytes(cost) == max(ranks)
    kept = model_cost(arch, Training(b=1, l=256, p=4, micro_batches=8),
                      PAPER.but(deallocate_pipeline_outputs=False))
    assert rank_activation_bytes(kept, 1) - ranks[1] == 3 * 256 * 512 * 2   # 3 outputs in flight
    assert rank_activation_bytes(kept, 3) == ranks[3]                          # the last sends none


def test_bad_schedules_are_refused():
    arch = Architecture("gpt", 8, 512, 8, 2048, 1000)
    with pytest.raises(ValueError, match="virtual stages"):
        Training(schedule="interleaved", virtual_stages=1)
    with pytest.raises(ValueError, match="schedule must be one of"):
        Training(schedule="zigzag")
    with pytest.raises(ValueError, match="p must divide micro_batches"):
        model_cost(arch, Training(p=4, micro_batches=6, schedule="interleaved", virtual_stages=2))
    with pytest.raises(ValueError, match="recompute_layers must divide"):
        model_cost(arch, Training(p=2, recompute="full", recompute_layers=3))
    with pytest.raises(ValueError, match="rank must be an integer"):
        rank_activation_bytes(model_cost(arch, Training(p=2)), 2)


def test_summary_prints_memory_per_rank(capsys):
    import json

    from symbolic_cost.cli import main
    assert main(["summary", "--preset", "gpt2", "--set", "p=4", "n_micro=8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    per_rank = out["activation_bytes_per_rank"]
    assert len(per_rank) == 4 and max(per_rank) == out["activation_bytes"]
    assert per_rank[0] > per_rank[1] > per_rank[2]        # 1F1B: p - r micro-batches in flight
    assert main(["summary", "--preset", "gpt2", "--set", "p=4", "n_micro=8"]) == 0
    assert "activations per pipeline rank: 0: " in capsys.readouterr().out


def test_uneven_first_and_last_stages():
    """Megatron-LM's --decoder-first/last-pipeline-num-layers: the given counts on the end ranks,
    the other layers split evenly; memory and parameters per rank follow the counts."""
    from symbolic_cost.parallel.pipeline import stage_layers
    assert stage_layers(30, 4, first=6) == (6, 8, 8)
    assert stage_layers(32, 4, first=5, last=3) == (5, 12, 3)
    with pytest.raises(ValueError, match="split evenly"):
        stage_layers(31, 4, first=6)
    arch = Architecture("gpt", 26, 256, 4, 1024, 1000)
    cost = model_cost(arch, Training(b=1, l=128, p=4, micro_batches=8, first_stage_layers=2), PAPER)
    layer = cost.layer.total("act_buffer")
    emb, head = cost.embedding.total("act_buffer"), cost.head.total("act_buffer")
    ranks = [rank_activation_bytes(cost, r) for r in range(4)]
    assert ranks == [4 * (2 * layer + emb), 3 * 8 * layer, 2 * 8 * layer, 8 * layer + head]
    assert cost.activation_bytes == ranks[1] == max(ranks)           # the second rank is the busiest
    weights = lambda blk: blk.total("weights") / 2                    # noqa: E731  (bf16 elements)
    tied = cost.embedding["word_embeddings"].weights / 2
    assert cost.parameters_per_device == max(weights(cost.embedding) + 2 * weights(cost.layer),
                                             weights(cost.head) + tied + 8 * weights(cost.layer))


def test_activation_recomputation_redoes_the_experts_activations():
    """Megatron-LM's ``moe_act`` (and the shared experts' activation): per layer the input of
    ``expert_fc2``, t k rows of f_x values (dropless, one device), and of ``shared_fc2``, t rows
    of f_s, are dropped and rebuilt by the gated activations again, 2 FLOPs an element."""
    b, l, e, h, experts, k, f_x, f_s = 2, 16, 32, 4, 8, 2, 24, 48
    arch = Architecture("toy", 3, e, h, 64, 128, mlp="swiglu", norm="rms", rotary=True, tied=False, qkv_bias=False,
                        bias=False, dropouts=False, moe=MoE(experts, k, f_x, shared_f=f_s))
    none, act = (model_cost(arch, Training(b=b, l=l, recompute=policy)) for policy in ("none", "activation"))
    t = b * l
    assert none.activation_bytes - act.activation_bytes == 3 * (t * k * f_x + t * f_s) * 2      # bf16
    assert act.flops_recompute == 3 * (2 * t * k * f_x + 2 * t * f_s)


def _dense_first(depth, first_dense=2):
    """A toy DeepSeek: ``first_dense`` dense SwiGLU layers, then MoE layers (8 experts of 16)."""
    return Architecture("toy", depth, 32, 4, 64, 100, mlp="swiglu", norm="rms", rotary=True, tied=False,
                        qkv_bias=False, bias=False, dropouts=False, moe=MoE(8, 2, 16, first_dense=first_dense))


def test_dense_layers_sit_on_the_first_stages():
    """Megatron-LM places layers in order, so DeepSeek's dense layers are all on the first
    stage: 6 layers on 3 ranks are 2 dense | 2 MoE | 2 MoE; with 7 and first_stage_layers=1,
    1 dense | 1 dense + 2 MoE | 3 MoE.  Parameters by hand: a dense layer 4 e^2 + 2 e + 3 e f,
    an MoE layer 4 e^2 + 2 e + E e (router) + E 3 e f_x; the word table V e on rank 0, the
    final norm and the untied head e + V e on the last."""
    e, f, experts, f_x, vocab = 32, 64, 8, 16, 100
    dense, moe = 4 * e * e + 2 * e + 3 * e * f, 4 * e * e + 2 * e + experts * e + experts * 3 * e * f_x
    start, end = vocab * e, e + vocab * e
    for depth, extra, ranks in ((6, {}, [start + 2 * dense, 2 * moe, 2 * moe + end]),
                                (7, {"first_stage_layers": 1}, [start + dense, dense + 2 * moe, 3 * moe + end])):
        cost = model_cost(_dense_first(depth), Training(b=1, l=8, p=3, micro_batches=4, **extra))
        assert cost.parameters_per_device == max(ranks)
        assert [rank_parameters(cost, r) for r in range(3)] == ranks
        assert cost.weight_bytes == 2 * max(ranks)                         # bf16
        if not extra:
            assert [stage_parameters(_dense_first(depth), 3, s) for s in range(3)] == ranks
    # interleaved, 2 chunks of 2 layers a rank: chunks 0 and 2 (layers 0-1 dense, 4-5) on rank 0
    interleaved = model_cost(_dense_first(8), Training(b=1, l=8, p=2, micro_batches=4, schedule="interleaved",
                                                       virtual_stages=2))
    assert interleaved.parameters_per_device == max(start + 2 * dense + 2 * moe, 4 * moe + end)
    # the even split with the dense layers spread alike is the closed form in p
    cost = model_cost(_dense_first(6, first_dense=0), Training(b=1, l=8, p=3))
    assert cost.parameters_per_device == max(start, end) + 2 * moe


def test_each_rank_keeps_its_own_layers_activations():
    """1F1B on 3 ranks (rank r holds 3 - r micro-batches): rank 0 keeps the embedding's and two
    dense layers', rank 1 two MoE layers', rank 2 two MoE layers' and the head's, each times
    its micro-batches in flight (outputs deallocated); the busiest is their largest."""
    arch = _dense_first(6)
    training = Training(b=1, l=8, p=3, micro_batches=4)
    chosen = conv.DEFAULT.but(deallocate_pipeline_outputs=True)
    cost = model_cost(arch, training, chosen)
    dense_layer, moe_layer = (blk for blk, _ in cost.stack[1:-1])
    kept = [3 * (cost.embedding.total("act_buffer") + 2 * dense_layer.total("act_buffer")),
            2 * 2 * moe_layer.total("act_buffer"),
            1 * (2 * moe_layer.total("act_buffer") + cost.head.total("act_buffer"))]
    assert [rank_activation_bytes(cost, r) for r in range(3)] == kept
    assert cost.activation_bytes == max(kept)


def test_window_pattern_places_the_global_layers():
    """Gemma 3 1B (its config.json): five sliding-window layers, then a global one (layers 5, 11,
    17 and 23 of 26). On 13 ranks of two layers, ranks 2, 5, 8 and 11 hold a global layer, and
    the busiest forward is the larger of the first rank's (embedding and two windowed layers),
    a rank with a global layer and the last rank's (two windowed layers and the head)."""
    import json
    from pathlib import Path
    from symbolic_cost.models.config import from_config
    from symbolic_cost.models.ranks import cost_placement
    config = json.loads((Path(__file__).parent / "hf_configs" / "gemma-3-1b-pt.json").read_text())
    cost = model_cost(from_config(config), Training(b=1, l=8192, p=13, micro_batches=16))
    place = cost_placement(cost)
    assert [r for r in range(13) if place.counts(r)[1]] == [2, 5, 8, 11]
    windowed, full = (blk.total("flops_fwd") for blk, _ in cost.stack[1:-1])
    start, end = cost.embedding.total("flops_fwd"), cost.head.total("flops_fwd")
    assert full > windowed
    assert cost.flops_fwd == 16 * max(start + 2 * windowed, windowed + full, 2 * windowed + end)


def test_recomputation_groups_divide_every_uneven_stage():
    """7 layers as 1 | 3 | 3: whole stages although 7/3 is not, so uniform recomputation of
    single layers runs; groups of 3 do not fit the first stage's one layer."""
    arch = _dense_first(7)
    model_cost(arch, Training(b=1, l=8, p=3, micro_batches=4, first_stage_layers=1, recompute="full"))
    with pytest.raises(ValueError, match=r"recompute_layers must divide a stage's layers \(got 3 and 1\)"):
        model_cost(arch, Training(b=1, l=8, p=3, micro_batches=4, first_stage_layers=1, recompute="full",
                                  recompute_layers=3))
    with pytest.raises(ValueError, match=r"recompute_layers must be at most a stage's layers \(got 2 and 1\)"):
        model_cost(arch, Training(b=1, l=8, p=3, micro_batches=4, first_stage_layers=1, recompute="full",
                                  recompute_method="block", recompute_layers=2))


def test_uneven_stages_need_to_know_which_layer_is_which():
    """Windows on 2 of 4 layers without saying which (no window_pattern): uneven stages refused."""
    arch = Architecture("w", 4, 32, 4, 64, 100, window=8, windowed_layers=2, dropouts=False)
    with pytest.raises(ValueError, match="need a model that records which layer is which"):
        model_cost(arch, Training(b=1, l=16, p=2, micro_batches=2, first_stage_layers=1))
    with_pattern = Architecture("w", 4, 32, 4, 64, 100, window=8, windowed_layers=2, dropouts=False,
                                window_pattern=(True, False, True, False))
    model_cost(with_pattern, Training(b=1, l=16, p=2, micro_batches=2, first_stage_layers=1))
