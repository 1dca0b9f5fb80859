"""Whole-model totals: ``model_cost`` composes the embedding, ``n_layers`` transformer layers
and the head into parameters, FLOPs, memory by category and collectives per iteration.

Memory categories per device (bytes):

================ ===============================================================
weights          parameters on the device x bytes per weight (ZeRO-3: / d)
gradients        parameters x bytes per gradient (ZeRO-2, 3: / d)
optimizer        parameters x optimizer bytes (ZeRO-1, 2, 3 and Megatron's
                 distributed optimizer: / d)
activations      what the busiest stage keeps for backward: micro-batches in
                 flight (``p`` under 1F1B) x its layers' kept activations
================ ===============================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sympy import Eq, Expr, Max, Piecewise

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Block, embedding_block, head_block, transformer_layer
from symbolic_cost.cost import Collective, exact
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.memory import redone_layers, stage_kept_bytes, stage_recompute_flops
from symbolic_cost.models.training import Training, bytes_per_parameter, element_bytes
from symbolic_cost.parallel.pipeline import per_stage, stage_sends
from symbolic_cost.parallel.zero import data_parallel_collectives, shard_degree


@dataclass(frozen=True)
class ModelCost:
    """Every whole-model total, as expressions (bytes, FLOPs, per device unless named)."""

    architecture: Architecture
    training: Training
    embedding: Block
    layer: Block
    head: Block
    parameters: Expr
    parameters_per_device: Expr
    flops_fwd: Expr
    flops_bwd: Expr
    flops_recompute: Expr
    model_flops_fwd: Expr
    model_flops_bwd: Expr
    weight_bytes: Expr
    gradient_bytes: Expr
    optimizer_bytes: Expr
    activation_bytes: Expr
    bubble: Expr
    collectives: tuple = field(default=())   # (dimension, Collective) pairs per iteration

    @property
    def memory_bytes(self) -> Expr:
        return self.weight_bytes + self.gradient_bytes + self.optimizer_bytes + self.activation_bytes


def model_blocks(arch: Architecture, t: Training, m1, s1, es, conventions) -> tuple[Block, Block, Block]:
    """The embedding, one transformer layer and the head of ``arch`` on one device."""
    vocab = arch.padded_vocab(m1)
    kw = dict(es=es, es_mask=t.mask_bytes, conventions=conventions)
    layer = transformer_layer(
        t.b, t.l, arch.e, arch.f, arch.h, m1, s1, kv_heads=arch.kv_heads, bias=arch.bias,
        qkv_bias=arch.qkv_bias, flash=t.flash, rotary_pos=arch.rotary, causal=arch.causal,
        gated_act=arch.mlp != "gelu", dropouts=arch.dropouts, norm=arch.norm, **kw)
    start = embedding_block(t.b, t.l, arch.e, vocab, m1, s1, positions=arch.positions,
                            token_types=arch.token_types, dropouts=arch.dropouts,
                            norm=arch.norm if arch.embedding_norm else None, **kw)
    end = head_block(t.b, t.l, arch.e, vocab, m1, s1, tied=arch.tied, loss=arch.lm_head,
                     final_norm=arch.norm if arch.final_norm else None, pooler=arch.pooler, **kw)
    return start, layer, end


def tied_copy(arch: Architecture, start: Block) -> Expr:
    """Weights the last pipeline stage holds only when it is not the first: its own copy of a
    tied word embedding (the word table only)."""
    return start["word_embeddings"].weights if arch.tied and arch.lm_head else 0


def _degrees(t: Training):
    return tuple(exact(x, name) for x, name in ((t.m1, "m1"), (t.s1, "s1"), (t.d, "d"), (t.p, "p"),
                                                (t.micro_batches, "micro_batches")))


def model_cost(arch: Architecture, training: Training = Training(), conventions=conv.DEFAULT) -> ModelCost:
    """Whole-model totals per iteration (``micro_batches`` micro-batches of ``b`` sequences
    on each of ``d`` replicas).

    >>> from symbolic_cost.models.config import preset
    >>> cost = model_cost(preset("gpt2"), Training(b=8, l=1024))
    >>> cost.parameters
    124439808
    """
    conventions = conv.get(conventions)
    t = training
    m1, s1, d, p, n = _degrees(t)
    es_w, es_g, es_o = bytes_per_parameter(t.precision, conventions)
    es = element_bytes(t.precision)
    start, layer, end = model_blocks(arch, t, m1, s1, es, conventions)
    depth = exact(arch.n_layers, "n_layers")
    params = lambda blk: blk.total("weights") / es  # noqa: E731  (weights in elements)
    whole = model_blocks(arch, t, 1, 1, 1, conventions)        # 1-byte elements: weights = parameters
    parameters = whole[0].total("weights") + depth * whole[1].total("weights") + whole[2].total("weights")
    per_device = per_stage(p, params(start), params(end), depth * params(layer), tied_copy(arch, start) / es)
    stage = lambda field: per_stage(p, start.total(field), end.total(field), depth * layer.total(field))  # noqa: E731
    schedule = _check_schedule(t, depth, p, n)
    tokens_bytes = t.b * t.l / s1 * arch.e * es
    kept = stage_kept_bytes(layer, t, depth / p, tokens_bytes)
    activations = schedule.in_flight(p, n) * (kept + start.total("act_buffer")) + end.total("act_buffer")
    one = model_blocks(arch, t, 1, 1, es, conventions)     # the model on one device: its own FLOPs
    model = lambda f: n * d * (one[0].total(f) + depth * one[1].total(f) + one[2].total(f))  # noqa: E731
    cost = ModelCost(
        architecture=arch, training=t, embedding=start, layer=layer, head=end,
        parameters=parameters, parameters_per_device=per_device,
        flops_fwd=n * stage("flops_fwd"), flops_bwd=n * stage("flops_bwd"),
        flops_recompute=stage_recompute_flops(layer, t, depth / p) * n,
        model_flops_fwd=model("flops_fwd"), model_flops_bwd=model("flops_bwd"),
        weight_bytes=per_device * es_w / shard_degree("weights", t.zero, d, t.distributed_optimizer),
        gradient_bytes=per_device * es_g / shard_degree("gradients", t.zero, d, t.distributed_optimizer),
        optimizer_bytes=per_device * es_o / shard_degree("optimizer", t.zero, d, t.distributed_optimizer),
        activation_bytes=activations,
        bubble=schedule.bubble(p, n))
    return replace(cost, collectives=tuple(_collectives(cost, depth, es, es_w, es_g, conventions)))


def _collectives(cost: ModelCost, depth, es, es_w, es_g, conventions):
    """Every collective of one iteration on the busiest device, with its dimension."""
    t = cost.training
    m1, s1, d, p, n = _degrees(t)
    out = []
    redone = redone_layers(t, depth / p) if t.recompute == "full" else 0
    for blk, times in ((cost.layer, depth / p), (cost.embedding, 1), (cost.head, 1)):
        for c in blk.collectives:
            again = redone if (blk is cost.layer and c.pass_ == "fwd") else 0   # full recompute redoes them
            out.append(("tensor", c.repeated(n * (times + again))))
    if p != 1:   # neighbouring stages are m1 d ranks apart; each of the v chunks sends
        boundary = t.b * t.l / s1 * cost.architecture.e
        sends = stage_sends(boundary, es, p, n * t.virtual_stages, m1 * d, conventions)
        out += [("pipeline", c) for c in sends]
    if d != 1:   # data-parallel members are m1 ranks apart
        out += [("data", c) for c in data_parallel_collectives(
            cost.parameters_per_device, es_w, es_g, d, t.zero, t.distributed_optimizer, n, m1, conventions)]
    return out


def _rank_activations(cost: ModelCost, held, first, last) -> Expr:
    """Activation bytes of a pipeline rank holding ``held`` micro-batches' worth of its layers,
    with the embedding if it is the ``first`` rank and the head if it is the ``last``."""
    t, layer = cost.training, cost.layer
    depth, p = exact(cost.architecture.n_layers, "n_layers"), exact(t.p, "p")
    es = element_bytes(t.precision)
    tokens_bytes = t.b * t.l / exact(t.s1, "s1") * cost.architecture.e * es
    per_micro = stage_kept_bytes(layer, t, depth / p, tokens_bytes)
    if first:
        per_micro += cost.embedding.total("act_buffer")
    if not last and not layer.conventions.deallocate_pipeline_outputs:
        per_micro += tokens_bytes                  # the output it sent, kept until its backward
    return held * per_micro + (held * cost.head.total("act_buffer") if last else 0)


def rank_activation_bytes(cost: ModelCost, rank: int) -> Expr:
    """Activation bytes pipeline rank ``rank`` (0-based, numbers only) keeps at its peak:
    its in-flight micro-batches (``Schedule.in_flight``) x its layers' kept bytes, plus the
    embedding's on the first rank, the head's (logits, loss) on the last, and the outputs
    it sent when they are not deallocated.

    >>> from symbolic_cost.models.config import preset
    >>> cost = model_cost(preset("gpt2"), Training(b=1, l=1024, p=4, micro_batches=8))
    >>> [rank_activation_bytes(cost, r) > 0 for r in range(4)]
    [True, True, True, True]
    """
    p, n = exact(cost.training.p, "p"), exact(cost.training.micro_batches, "micro_batches")
    if not (p.is_number and isinstance(rank, int) and 0 <= rank < p):
        raise ValueError(f"rank must be an integer in [0, p) with a numeric p, got rank={rank!r}, p={p}")
    held = cost.training.pipeline_schedule().in_flight(p, n, rank)
    return _rank_activations(cost, held, rank == 0, rank == p - 1)


def busiest_activation_bytes(cost: ModelCost) -> Expr:
    """The largest ``rank_activation_bytes`` over the ranks, for any ``p``: the first or the last
    rank (a middle rank holds no more micro-batches than the first and neither end)."""
    p, n = exact(cost.training.p, "p"), exact(cost.training.micro_batches, "micro_batches")
    schedule = cost.training.pipeline_schedule()
    one = _rank_activations(cost, schedule.in_flight(1, n), True, True)
    if p == 1:
        return one
    many = Max(_rank_activations(cost, schedule.in_flight(p, n, 0), True, False),
               _rank_activations(cost, schedule.in_flight(p, n, p - 1), False, True))
    return many if p.is_number else Piecewise((one, Eq(p, 1)), (many, True))


def _check_schedule(t: Training, depth, p, n):
    """The schedule, refusing layouts it cannot run (when the numbers are known)."""
    schedule = t.pipeline_schedule()
    rules = [("recompute_layers", t.recompute_layers, depth / p, "a stage's layers")]
    if schedule.name == "interleaved":
        rules += [("p", p, n, "micro_batches (Megatron-LM's interleaved schedule)"),
                  ("p x virtual_stages", p * schedule.v, depth, "n_layers")]
    for name, divisor, dividend, what in rules:
        if t.recompute != "full" and name == "recompute_layers":
            continue
        ratio = dividend / divisor
        if ratio.is_integer is False or (ratio.is_number and ratio < 1):
            raise ValueError(f"{name} must divide {what} (got {divisor} and {dividend})")
    return schedule


def stage_parameters(arch: Architecture, p: int, stage: int, m1=1, conventions=conv.DEFAULT) -> Expr:
    """Parameters on one device of pipeline stage ``stage`` (0-based) of ``p``: its
    ``n_layers/p`` layers, the embedding on the first stage, the head on the last
    (with its own copy of a tied embedding when the two stages differ)."""
    if not 0 <= stage < p:
        raise ValueError(f"stage must be in [0, {p}), got {stage}")
    start, layer, end = model_blocks(arch, Training(), m1, 1, 1, conventions)
    total = exact(arch.n_layers, "n_layers") / p * layer.total("weights")
    if stage == 0:
        total += start.total("weights")
    if stage == p - 1:
        total += end.total("weights")
        if p > 1:
            total += tied_copy(arch, start)
    return total


def world_size(training: Training) -> Expr:
    """Devices in the job: ``m1 x d x p`` (sequence shards live inside the tensor group)."""
    return exact(training.m1, "m1") * exact(training.d, "d") * exact(training.p, "p")


def cluster_volume(cost: ModelCost, dimension: str, collective: Collective) -> Expr:
    """Bytes a collective of the busiest device moves summed over the whole job: tensor
    and data collectives run on every device alike; pipeline sends cross ``p - 1`` of
    every ``p`` stage boundaries (the busiest device is an interior stage)."""
    world = world_size(cost.training)
    if dimension == "pipeline":
        p = exact(cost.training.p, "p")
        return collective.volume * world * (p - 1) / p
    return collective.volume * world

