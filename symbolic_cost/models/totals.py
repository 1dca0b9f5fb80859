"""Whole-model totals: ``model_cost`` composes the blocks of ``models.stack`` (the embedding,
the groups of transformer layers, the head) into parameters, FLOPs, memory by category and
collectives per iteration.

Memory categories per device (bytes):

================ ===============================================================
weights          parameters on the device x bytes per weight (ZeRO-3: / d)
gradients        parameters x bytes per gradient (ZeRO-2, 3: / d)
optimizer        parameters x optimizer bytes (ZeRO-1, 2, 3 and Megatron's
                 distributed optimizer: / d)
activations      what the busiest pipeline rank keeps for backward: its micro-batches
                 in flight (``Schedule.in_flight``) x its layers' kept activations,
                 with the embedding's on the first rank and the head's on the last
                 (``rank_activation_bytes``)
================ ===============================================================
"""

from __future__ import annotations

from dataclasses import replace

from sympy import Expr, Integer, Rational, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Block
from symbolic_cost.blocks.context import CONTEXT_ROWS
from symbolic_cost.checks import InputError, INTERLEAVED_RULES, PIPELINE_RULES, check_rules, instance
from symbolic_cost.collector import paused
from symbolic_cost.cost import Collective, collective, exact
from symbolic_cost.extrema import maximum
from symbolic_cost.models.architecture import MADE_BY, Architecture
from symbolic_cost.models.experts import (active_parameters, block_dimension, dense_state, expert_data_collectives,
                                          expert_degrees, split_state_bytes)
from symbolic_cost.models.memory import recompute_flops, recomputed_rows
from symbolic_cost.models.optimizers import get_optimizer
from symbolic_cost.models.placement import SPLIT, placement, rank_layers
from symbolic_cost.models.ranks import boundary_elements, busiest_activation_bytes, cost_placement, tied_copy
from symbolic_cost.models.recompute_modules import check_modules
from symbolic_cost.models.recipes import (data_collectives, recipe_stack, reference_flops, reference_gathers,
                                         trainable)
from symbolic_cost.models.stack import model_stack
from symbolic_cost.models.training import TRAINING_MADE_BY, Training, bytes_per_parameter, check_model, element_bytes
from symbolic_cost.models.whole_model import ModelCost, model_cost_of  # noqa: F401 (model_cost_of: re-exported)
from symbolic_cost.trees import remembered_on
from symbolic_cost.parallel.pipeline import dualpipe_gradient_sum, dualpipe_rules, stage_layers, stage_sends
from symbolic_cost.parallel.zero import compressed_exchange


def model_blocks(arch: Architecture, t: Training, m1, s1, es, conventions) -> tuple[Block, Block, Block]:
    """The embedding, the first layer (group's) block and the head of ``arch`` on one device
    (every block: ``models.stack.model_stack``)."""
    stack = model_stack(arch, t, m1, s1, es, conventions)
    return stack[0][0], stack[1][0], stack[-1][0]


def _middle(stack, field: str) -> Expr:
    """A field summed over every block between the embedding and the head, times its count."""
    return sum((count * blk.total(field) for blk, count in stack[1:-1]), exact(0))


def _whole(stack, field: str) -> Expr:
    """A field summed over every block of the stack, times its count (remembered by the stack,
    as the stage totals)."""
    return remembered_on(_STAGES, stack, field, lambda: sum((count * blk.total(field) for blk, count in stack), exact(0)))


_STAGES: dict = {}
"""Stage totals by stack, placement and field, whole-stack totals by stack and field, and the
blocks' collectives by stack, placement and recomputation (``trees.remembered_on``): every ZeRO
stage, offload and schedule a search compares on one layout has the same."""


def _degrees(t: Training):
    return tuple(exact(x, name) for x, name in ((t.m1, "m1"), (t.s1, "s1"), (t.d, "d"), (t.p, "p"),
                                                (t.micro_batches, "micro_batches")))


@paused()
def model_cost(arch: Architecture, training: Training = Training(), conventions=conv.DEFAULT) -> ModelCost:
    """Whole-model totals per iteration (``micro_batches`` micro-batches of ``b`` sequences
    on each of ``d`` replicas).

    >>> from symbolic_cost.models.config import preset
    >>> cost = model_cost(preset("gpt2"), Training(b=8, l=1024))
    >>> cost.parameters
    124439808
    """
    instance(arch, Architecture, "arch", MADE_BY)
    t = instance(training, Training, "training", TRAINING_MADE_BY)
    conventions = conv.get(conventions)
    check_model(arch, t)
    m1, s1, d, p, n = _degrees(t)
    es_w, es_g, _ = bytes_per_parameter(t.precision, conventions, t.optimizer, t.master_weights)
    es = element_bytes(t.precision)
    plain = t.own_counts()                  # the model's own counts (parameters, model FLOPs)
    stack = recipe_stack(model_stack(arch, t, m1, s1, es, conventions, *expert_degrees(t, m1), t.tensor), t, es,
                         conventions, arch)
    (start, _), (layer, _), (end, _) = stack[0], stack[1], stack[-1]
    depth = exact(arch.n_layers, "n_layers") + exact(arch.decoder_layers, "decoder_layers")
    laid_out = padded_whole(arch, m1)
    whole = recipe_stack(model_stack(laid_out, plain, 1, 1, 1, conventions), t, 1, conventions, laid_out)   # 1-byte: weights = parameters
    parameters = _whole(whole, "weights")
    place = placement(arch, t, stack, p)
    layers = stack[1:-1]
    check_modules([blk for blk, _ in layers], t.recompute_modules, t.flash, arch.name)
    schedule = check_schedule(t, depth, p, n)
    # DualPipe: a rank holds two stages, state and all, and runs n/2 micro-batches through each
    held, share = (place.paired, Rational(1, 2)) if schedule.name == "dualpipe" else (place.busiest, 1)
    on_stage = lambda of, copy=0: held(of(start), of(end), [of(b) for b, _ in layers], copy)  # noqa: E731

    def held_total(field: str, unit=None, copy=0):     # a field (in ``unit``s) on the busiest rank
        of = (lambda blk: blk.total(field)) if unit is None else (lambda blk: blk.total(field) / unit)
        return remembered_on(_STAGES, stack, (place, held.__name__, field, unit, copy), lambda: on_stage(of, copy))
    stage = lambda field: share * held_total(field)  # noqa: E731
    per_device = held_total("weights", es, tied_copy(arch, start) / es)
    states = split_state_bytes(data_group(t), m1, es, per_device, on_stage, tied_copy(arch, start) / es, arch.e, conventions)
    # the model's FLOPs on one device: the 1-byte stack's, as a FLOP does not depend on element bytes
    model = lambda f: n * d * _whole(whole, f)  # noqa: E731
    cost = ModelCost(
        architecture=arch, training=t, embedding=start, layer=layer, head=end, stack=stack,
        parameters=parameters, parameters_per_device=per_device,
        flops_fwd=n * stage("flops_fwd"), flops_bwd=n * stage("flops_bwd"),
        flops_recompute=n * place.busiest_redoing(0, 0, [0] * len(layers),
                                                  [recompute_flops(blk, t.recomputation) for blk, _ in layers]),
        model_flops_fwd=model("flops_fwd"), model_flops_bwd=model("flops_bwd"),
        flops_wgrad=n * stage("flops_wgrad"), flops_agrad=n * stage("flops_agrad"),
        model_flops_wgrad=model("flops_wgrad"), model_flops_agrad=model("flops_agrad"),
        **{k: states[k] for k in ("weight_bytes", "gradient_bytes", "optimizer_bytes", "optimizer_step_bytes",
                                  "host_bytes",
                                  "host_to_device", "device_to_host")},
        trainable_parameters=sum((count * trainable(blk, 1, t.lora) for blk, count in whole), exact(0)),
        active_parameters=active_parameters(whole, parameters, arch.moe),
        expert_parameters_per_device=states["expert_parameters_per_device"],
        flops_reference=n * share * on_stage(reference_flops) if t.reference is not None else Integer(0),
        reference_bytes=states.get("reference_device_bytes", Integer(0)),
        activation_bytes=Integer(0),          # the busiest rank's, set below
        bubble=schedule.bubble(p, n))
    cost = ranked_states(replace(cost, activation_bytes=busiest_activation_bytes(cost)), place)
    return replace(cost, collectives=tuple(_collectives(cost, es, es_w, es_g, conventions, states)))


STATES = ("weight_bytes", "gradient_bytes", "optimizer_bytes", "optimizer_step_bytes", "host_bytes", "host_to_device",
          "device_to_host")
"""The state a rank holds, each category its busiest rank's."""


def ranked_states(cost: ModelCost, place) -> ModelCost:
    """``cost`` with each of ``STATES`` the largest of the ranks' own (``rank_state_bytes``) where
    the ranks are enumerated (uneven stages, a layout; not DualPipe's paired stages).  Built by
    category, a model with experts adds the busiest rank's dense parameters to another rank's
    routed ones: DeepSeek-V3 over stages of 16, 15, 15 and 15 layers held 8.5 billion parameters'
    gradients, more than any rank's 8.0 billion."""
    t = cost.training
    if place.rows is None or t.schedule == "dualpipe" or not sympify(t.p).is_Integer or cost.architecture.moe is None:
        return cost
    ranks = [rank_state_bytes(cost, rank) for rank in range(int(t.p))]
    return replace(cost, **{k: maximum(*(r[k] for r in ranks)) for k in STATES})


def _collectives(cost: ModelCost, es, es_w, es_g, conventions, states):
    """Every collective of one iteration on the busiest device, with its dimension; each layer
    group's as often as the rank holding the most layers of that group runs them, and the
    recomputed forward's as often as the rank redoing the most of them (``Placement.most`` and
    ``most_redone``: a bound when the groups' busiest ranks differ)."""
    t = cost.training
    m1, s1, d, p, n = _degrees(t)
    place = cost_placement(cost)
    out = list(remembered_on(_STAGES, cost.stack, (place, n, t.recomputation),
                             lambda: _block_collectives(cost.stack, place, t, n)))
    if p != 1:   # neighbouring stages are m1 d ranks apart; each of the v chunks sends
        boundary = boundary_elements(cost)
        if conventions.pipeline_sends == "scatter-gather":   # 1/m1 each, gathered over m1/s1 on arrival
            boundary = boundary * s1 / m1
            for pass_ in ("fwd", "bwd"):
                out += [("pipeline", c) for c in collective("allgather", boundary * m1 / s1, es, m1 / s1, pass_,
                                                            conventions, repeats=n * t.virtual_stages)]
        sends = stage_sends(boundary, es, p, n * t.virtual_stages, m1 * d * exact(t.cp, "cp"), conventions)
        out += [("pipeline", c) for c in sends]
    if t.schedule == "dualpipe":   # the two copies of a stage sum their gradients, rank 0 with rank p - 1
        out += [("pipeline", c) for c in dualpipe_gradient_sum(cost.parameters_per_device, es_g, conventions,
                                                               (p - 1) * m1 * d * exact(t.cp, "cp"))]
    dense, dense_states = dense_state(states, cost.parameters_per_device)
    group = data_group(t)
    if group.d != 1 and get_optimizer(t.optimizer).compressed:      # no gradient all-reduce after the warm-up
        out += [("optimizer", c) for c in compressed_exchange(dense_states["trainable_per_device"], group.d, m1,
                                                              conventions)]
    elif group.d != 1:   # data-parallel members (with the CP ranks: Megatron's dp-cp group) are m1 ranks apart
        out += [("data", c) for c in data_collectives(group, dense, dense_states, es_w, es_g, group.d, n, m1,
                                                      conventions)]
        out += [("reference", c) for c in reference_gathers(group, dense_states, n, m1, conventions)]
    out += [("expert_data", c) for c in expert_data_collectives(group, m1, states, es_w, es_g, n, conventions)]
    return out


def _block_collectives(stack, place, t: Training, n) -> tuple:
    """``(dimension, collective)`` of every row of ``stack``, each as often as the busiest rank
    runs it in ``n`` micro-batches, its forward again where ``t`` recomputes it."""
    out, last = [], len(stack) - 1
    # the ends run on the first or the last stage (DualPipe: a rank holds both of each direction)
    ends = (2 if t.schedule == "dualpipe" else 1) / exact(t.p, "p")
    for i, (blk, count) in enumerate(stack):
        end = i in (0, last)                  # the embedding and the head run once per micro-batch
        times = count if end else place.most(i - 1)
        redone = 0 if end else place.most_redone(i - 1)        # which layers redo (models.placement), which rows
        again_rows = () if end else recomputed_rows(blk, t.recomputation)
        for row in blk:
            for c in row.collectives:
                again = redone if c.pass_ == "fwd" and row.name in again_rows else 0   # its forward runs again
                dimension = "context" if row.name in CONTEXT_ROWS else block_dimension(row)
                c = c.repeated(n * (times + again))
                out.append((dimension, replace(c, ranks=ends) if end and ends != 1 else c))
    return tuple(out)


def check_block_recompute(layers, recompute_layers) -> None:
    """Refuse block recomputation (the first ``recompute_layers`` of a stage) of more layers than the
    stage's ``layers`` (numbers only): ``check_schedule``'s rule, and a sweep's at each ``p``."""
    ratio = sympify(layers) / recompute_layers
    if ratio.is_number and ratio < 1:
        raise InputError(f"recompute_layers must be at most a stage's layers (got {recompute_layers} and {layers})",
                         "recompute_layers")


def check_schedule(t: Training, depth, p, n):
    """The schedule, refusing layouts it cannot run (when the numbers are known)."""
    schedule = t.pipeline_schedule()
    uneven = any(getattr(t, k) not in (None, False) for k in SPLIT)     # Megatron-Core's placement decides
    if uneven and not (depth.is_number and p.is_number):
        stage_layers(depth, p, t.first_stage_layers, t.last_stage_layers)    # refuses symbolic stage sizes by name
    stages = sorted({Integer(sum(map(len, rank))) for rank in rank_layers(t, int(depth), int(p))}) if uneven \
        else [depth / p]
    # uniform groups are checkpointed inside one model chunk (Megatron-Core's TransformerBlock is a chunk)
    v = schedule.v if schedule.name == "interleaved" else 1
    chunks = sorted({Integer(len(chunk)) for rank in rank_layers(t, int(depth), int(p)) for chunk in rank}) \
        if uneven else [depth / (p * v)]
    unit = "a model chunk's layers" if v != 1 else "a stage's layers"
    rules = [("recompute_layers", t.recompute_layers, layers, unit) for layers in chunks]
    if t.recompute == "full" and t.recompute_method == "block":     # the first N layers of a stage
        for layers in stages:
            check_block_recompute(layers, t.recompute_layers)
        rules = []
    if not uneven:     # an even split: whole layers (else rank_layers has refused what Megatron refuses)
        check_rules(dict(p=p, n_layers=depth), PIPELINE_RULES)
    if schedule.name == "interleaved":
        check_rules({"p": p, "micro_batches": n, "p x virtual_stages": p * schedule.v, "n_layers": depth},
                    INTERLEAVED_RULES[:1] if uneven else INTERLEAVED_RULES)
    if schedule.name == "dualpipe":
        dualpipe_rules(p, n)
    for name, divisor, dividend, what in rules:
        if t.recompute != "full" and name == "recompute_layers":
            continue
        ratio = dividend / divisor
        if ratio.is_integer is False or (ratio.is_number and ratio < 1):
            raise InputError(f"{name} must divide {what} (got {divisor} and {dividend})", name)
    return schedule


def padded_whole(arch: Architecture, m1) -> Architecture:
    """``arch`` with the vocabulary the layout pads it to (``Architecture.padded_vocab(m1)``), for
    the whole model's count: Megatron-LM builds every rank's embedding from one vocabulary padded
    to ``vocab_multiple x m1`` rows (``_vocab_size_with_padding``), so its model has those rows
    whichever rank holds them.  Without a multiple (Hugging Face's models) the count is the
    vocabulary's own."""
    if sympify(arch.vocab_multiple) == 1 or sympify(m1) == 1:
        return arch
    return replace(arch, vocab=arch.padded_vocab(m1), vocab_multiple=1)


def stage_parameters(arch: Architecture, p: int, stage: int, m1=1, conventions=conv.DEFAULT) -> Expr:
    """Parameters on one device of pipeline stage ``stage`` (0-based) of ``p``: its layers
    (``models.placement.Placement``: ``n_layers/p`` of them, DeepSeek's dense ones on the first
    stages), the embedding on the first stage, the head on the last (with its own copy of a
    tied embedding when the two stages differ).  Refuses what ``model_cost`` refuses of the same
    ``p`` and ``m1``, with the same ``InputError`` (``check_schedule``: whole layers a stage)."""
    if not 0 <= stage < p:
        raise InputError(f"stage must be in [0, {p}), got {stage}", "stage")
    t = Training(p=p)
    stack = model_stack(arch, Training(), m1, m1, 1, conventions, 1, m1)   # any s1; experts: etp = m1, ep = 1
    start, end = stack[0][0], stack[-1][0]
    place = placement(arch, t, stack, p)                  # model_cost's order: the placement, then the schedule
    check_schedule(t, exact(arch.n_layers, "n_layers") + exact(arch.decoder_layers, "decoder_layers"),
                   exact(p, "p"), exact(t.micro_batches, "micro_batches"))
    return place.holds(stage, start.total("weights"), end.total("weights"),
                       [blk.total("weights") for blk, _ in stack[1:-1]], tied_copy(arch, start))


def world_size(training: Training) -> Expr:
    """Devices in the job: ``m1 x cp x d x p`` (sequence shards live inside the tensor group)."""
    return exact(training.m1, "m1") * exact(training.cp, "cp") * exact(training.d, "d") * exact(training.p, "p")


def rank_state_bytes(cost: ModelCost, rank: int) -> dict:
    """``split_state_bytes`` of what one device of pipeline rank ``rank`` holds (its layers, the
    embedding on the first rank, the head and a tied table's copy on the last:
    ``Placement.holds``): its ``weight_bytes``, ``gradient_bytes`` and ``optimizer_bytes``, which
    ``model_cost`` takes each of its busiest rank (numbers only; not under DualPipe, whose ranks
    hold two stages)."""
    t, arch = cost.training, cost.architecture
    es = element_bytes(t.precision)
    start, end, layers = cost.embedding, cost.head, cost.stack[1:-1]
    place, copy = cost_placement(cost), tied_copy(arch, start)
    on_rank = lambda of, last_copy=0: place.holds(rank, of(start), of(end), [of(b) for b, _ in layers],  # noqa: E731
                                                  last_copy)
    per_device = on_rank(lambda blk: blk.total("weights") / es, copy / es)
    return split_state_bytes(data_group(t), exact(t.m1, "m1"), es, per_device, on_rank, copy / es, arch.e,
                             cost.layer.conventions)


def data_group(t: Training) -> Training:
    """The training as its gradient reduction and ZeRO / distributed-optimizer sharding see it:
    over ``d cp`` ranks, the context-parallel ranks holding the same weights as data replicas
    do (Megatron-LM reduces gradients over ``get_data_parallel_group(with_context_parallel=True)``
    and its distributed optimizer shards over that group); ``t`` itself without CP."""
    cp = exact(t.cp, "cp")
    if cp == 1:
        return t
    shard = None if t.shard is None else exact(t.shard, "shard") * cp   # FSDP shards over dp_shard x cp (torchtitan)
    return replace(t, d=exact(t.d, "d") * cp, shard=shard)


def cluster_volume(cost: ModelCost, dimension: str, collective: Collective) -> Expr:
    """Bytes a collective of the busiest device moves summed over the whole job: tensor
    and data collectives run on the devices that hold their rows (``Collective.ranks``: every one
    for a layer's, a stage's for the ends'); pipeline sends cross ``k - 1`` of every ``k``
    chunk boundaries, ``k = p v`` chunks in a chain (``v`` of each rank under the interleaved
    schedule: the busiest device is an interior one, which sends from each of its chunks); DualPipe's gradient
    sum runs on every device; the experts' exchanges are the most loaded rank's under an
    ``expert_imbalance`` of ``X`` (``X`` times a rank's mean), so the job moves ``1/X`` of them on
    every device (an imbalance moves tokens between ranks, not more of them)."""
    world = world_size(cost.training) * collective.ranks
    if dimension == "pipeline" and collective.kind == "p2p":    # not DualPipe's gradient sum: every device
        chain = exact(cost.training.p, "p") * exact(cost.training.virtual_stages, "virtual_stages")
        return collective.volume * world * (chain - 1) / chain
    if dimension == "expert" and collective.kind == "alltoall":
        return collective.volume * world / exact(getattr(cost.training, "expert_imbalance", 1), "expert_imbalance")
    return collective.volume * world
