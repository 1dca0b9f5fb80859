"""``Training``: how a model is trained (batch, sequence, degrees, precision, sharding,
recomputation, and the recipe: optimizer, master weights, FP8, offload, LoRA), and the
precision rule: bytes per element and per parameter.

Bytes per parameter (weights, gradients, optimizer) by precision, ``mixed_precision`` and
optimizer: ``models.optimizers`` (Adam: fp32 4, 4, 8; fp16 / bf16 under ``"zero"`` 2, 2, 12,
Rajbhandari et al. 2020; under ``"megatron"`` fp16 2, 2, 16 and bf16 2, 4, 12).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, sympify

from symbolic_cost.checks import InputError, positive_dims
from symbolic_cost.flat import FlatNames, with_flat
from symbolic_cost.models.op_recompute import check_training
from symbolic_cost.models.lora import check_low_precision_base
from symbolic_cost.models.optimizers import bytes_per_parameter, get_optimizer
from symbolic_cost.models.recipes import sixteen_bit
from symbolic_cost.models.training_values import (MEGATRON_OVERLAP, PRECISIONS, RECOMPUTE, RECOMPUTE_METHODS,
                                                  RECOMPUTE_MODULES, Batch, Degrees, Execution, Overlap, Pipeline,
                                                  Precision, Recompute, Sharding, Trainable)
from symbolic_cost.blocks.graphs import check_dropout, check_recompute, for_model
from symbolic_cost.blocks.context import Context, check_variant
from symbolic_cost.blocks.wiring import Experts, check_expert_training
from symbolic_cost.parallel.expert import expert_data_degree, expert_shard_degree
from symbolic_cost.parallel.pipeline import Schedule
from symbolic_cost.parallel.splits import layout_stages

__all__ = ["Training", "Overlap", "overlaps_sends", "check_context", "check_loss_chunks", "check_context_parallel", "check_shared_expert_overlap", "check_sharding", "check_model", "MEGATRON_OVERLAP", "element_bytes", "bytes_per_parameter", "PRECISIONS", "RECOMPUTE", "RECOMPUTE_METHODS", "RECOMPUTE_MODULES", "FLAT", "TRAINING_MADE_BY"]

FLAT = {
    "b": ("batch", "b"), "l": ("batch", "l"), "l_dec": ("batch", "l_dec"),
    "micro_batches": ("batch", "micro_batches"), "allow_long": ("batch", "allow_long"),
    "m1": ("degrees", "m1"), "s1": ("degrees", "s1"), "d": ("degrees", "d"), "tensor": ("degrees", "tensor"),
    "tp_ends": ("degrees", "ends"),
    "p": ("pipeline", "p"), "schedule": ("pipeline", "schedule"),
    "virtual_stages": ("pipeline", "virtual_stages"), "first_stage_layers": ("pipeline", "first_stage_layers"),
    "last_stage_layers": ("pipeline", "last_stage_layers"), "embedding_in_split": ("pipeline", "embedding_in_split"),
    "loss_in_split": ("pipeline", "loss_in_split"), "pipeline_layout": ("pipeline", "layout"),
    "recompute": ("recomputation", "mode"), "recompute_method": ("recomputation", "method"),
    "recompute_layers": ("recomputation", "layers"), "recompute_modules": ("recomputation", "modules"),
    "zero": ("sharding", "zero"), "distributed_optimizer": ("sharding", "distributed_optimizer"),
    "shard": ("sharding", "shard"), "reshard_after_forward": ("sharding", "reshard_after_forward"),
    "offload": ("sharding", "offload"),
    "precision": ("numerics", "dtype"), "optimizer": ("numerics", "optimizer"),
    "master_weights": ("numerics", "master_weights"), "fp8": ("numerics", "fp8"),
    "fp8_amax_history": ("numerics", "fp8_amax_history"), "first_layers_16bit": ("numerics", "first_layers_16bit"),
    "last_layers_16bit": ("numerics", "last_layers_16bit"), "fp8_gather": ("numerics", "fp8_gather"),
    "ep": ("experts", "ep"), "etp": ("experts", "etp"), "capacity_factor": ("experts", "capacity_factor"),
    "expert_imbalance": ("experts", "imbalance"), "dispatcher": ("experts", "dispatcher"),
    "cp": ("context", "cp"), "cp_variant": ("context", "variant"),
    "flash": ("execution", "flash"), "mask_bytes": ("execution", "mask_bytes"), "overlap": ("execution", "overlap"),
    "attention_kernel": ("execution", "attention_kernel"), "loss_chunks": ("execution", "loss_chunks"),
    "fused_loss": ("execution", "fused_loss"), "cuda_graphs": ("execution", "cuda_graphs"),
    "lora": ("trainable", "lora"), "mtp": ("trainable", "mtp"), "reference": ("trainable", "reference"),
}
"""``Training``'s flat keywords (its fields before the tree): each names one attribute of one of
its values.  ``Training(zero=3)``, ``replace(t, cp=2)`` and ``t.zero`` go through it."""

_VALUES = {"batch": Batch, "degrees": Degrees, "pipeline": Pipeline, "recomputation": Recompute,
           "sharding": Sharding, "numerics": Precision, "experts": Experts, "context": Context,
           "execution": Execution, "trainable": Trainable}
"""The value fields of ``Training`` and their types."""

NO_EXPERTS = Experts(etp=None)
"""A training's experts when unset: no expert parallelism, the expert tensor degree ``m1``."""


def chunks_divide(tokens, cp, chunks):
    """Whether ``chunks`` equal pieces of the chunked loss (torchtitan's ``ChunkedLossWrapper``)
    divide a rank's ``tokens / cp`` tokens of a micro-batch: ``tokens`` a multiple of ``cp x chunks``
    (numbers, or a search's columns of them).

    >>> chunks_divide(1024, 1, 3), chunks_divide(8 * 1024, 2, 8)
    (False, True)
    """
    return tokens % (cp * chunks) == 0


def check_loss_chunks(tokens, cp, chunks) -> None:
    """Refuse ``chunks`` pieces of the chunked loss that do not divide a rank's ``tokens / cp``
    tokens of a micro-batch (``chunks_divide``; numbers only): ``Training``'s rule, and a sweep's at
    each point."""
    tokens, cp = sympify(tokens), sympify(cp)
    if chunks > 1 and tokens.is_number and cp.is_number and not chunks_divide(tokens, cp, chunks):
        raise InputError(f"loss_chunks={chunks} must divide the {tokens / cp} tokens of a micro-batch on a rank "
                         f"(b x sequence / cp): the chunked loss (torchtitan's ChunkedLossWrapper) runs equal chunks "
                         f"and refuses a length they do not divide", "loss_chunks")


@dataclass(frozen=True, init=False)
class Training(FlatNames):
    """How the model is trained, one value per concern (``models.training_values``):

    * ``batch`` (``Batch``: ``b``, ``l``, ``l_dec``, ``micro_batches``, ``allow_long``), ``degrees``
      (``Degrees``: ``m1``, ``s1``, ``d`` or a tensor grid), ``pipeline`` (``Pipeline``: ``p``,
      schedule, stage split), ``context`` (``blocks.context.Context``: ``cp`` and its variant),
      ``experts`` (``blocks.wiring.Experts``: ``ep``, ``etp`` (``None``: ``m1``, as Megatron-LM),
      capacity, imbalance);
    * ``recomputation`` (``Recompute``), ``sharding`` (``Sharding``: ZeRO/FSDP, offload),
      ``numerics`` (``Precision``: element type, optimizer, low-precision recipe), ``execution``
      (``Execution``: flash attention, the dropout mask, ``Overlap``), ``trainable``
      (``Trainable``: LoRA, the multi-token-prediction modules, DPO's reference model).

    Every attribute of a value is also a keyword and an attribute of ``Training`` under its flat
    name (``FLAT``): ``Training(p=4, zero=3).pipeline.p == Training(p=4, zero=3).p == 4``.

    >>> t = Training(b=2, p=4, schedule="interleaved", virtual_stages=2, zero=1)
    >>> t.pipeline
    Pipeline(p=4, schedule='interleaved', virtual_stages=2, first_stage_layers=None, last_stage_layers=None, embedding_in_split=False, loss_in_split=False, layout=None)
    >>> t.b, t.zero, replace(t, zero=3).sharding.zero
    (2, 1, 3)
    """

    FLAT = FLAT                  # the flat names (FlatNames reads them)

    batch: Batch
    degrees: Degrees
    pipeline: Pipeline
    context: Context
    experts: Experts
    recomputation: Recompute
    sharding: Sharding
    numerics: Precision
    execution: Execution
    trainable: Trainable

    def __init__(self, batch: Batch = Batch(), degrees: Degrees = Degrees(), pipeline: Pipeline = Pipeline(),
                 context: Context = Context(1), experts: Experts = NO_EXPERTS, recomputation: Recompute = Recompute(),
                 sharding: Sharding = Sharding(), numerics: Precision = Precision(), execution: Execution = Execution(),
                 trainable: Trainable = Trainable(), **flat):
        if "expert_imbalance" in flat and isinstance(experts, Experts):   # refused under the keyword given
            check_expert_training(*(flat.get(k, getattr(experts, FLAT[k][1])) for k in
                                    ("ep", "etp", "capacity_factor", "expert_imbalance")))
        values = with_flat(dict(batch=batch, degrees=degrees, pipeline=pipeline, context=context, experts=experts,
                                recomputation=recomputation, sharding=sharding, numerics=numerics,
                                execution=execution, trainable=trainable), flat, FLAT, _VALUES, "Training")
        for name, value in values.items():
            object.__setattr__(self, name, value)
        self._check()

    def _check(self) -> None:
        """The rules that span more than one value."""
        positive_dims(cp=self.cp)           # every count at most 2**53 (checks.positive_dims), as --set bounds them
        if self.cp_variant != "ring" and sympify(self.cp) == 1:
            raise InputError(f"cp_variant applies to context parallelism (cp > 1), got cp=1 and "
                             f"cp_variant={self.cp_variant!r}; it would be ignored", "cp_variant")
        check_loss_chunks(sympify(self.b) * sympify(self.decoder_tokens), self.cp, self.loss_chunks)
        if self.recompute == "op":
            check_training(self)
        check_recompute(self.cuda_graphs, self.recompute)
        check_sharding(self)
        if self.reference is not None:
            check_reference(self)
        if self.lora is not None and self.fp8 is not None:
            check_low_precision_base(self.lora, self.fp8)

    def flat(self) -> dict:
        """Every setting under its flat keyword (``FLAT``): what ``Training(**t.flat())`` rebuilds."""
        return {name: getattr(self, name) for name in FLAT}

    @property
    def shard_group(self) -> Expr:
        """Ranks one copy of the sharded state is spread over: ``shard``, or ``d`` when unset."""
        return sympify(self.d if self.shard is None else self.shard)

    @property
    def decoder_tokens(self) -> Expr:
        """Tokens per sequence through an encoder-decoder's decoder: ``l_dec``, or ``l``."""
        return self.l if self.l_dec is None else self.l_dec

    def own_counts(self) -> "Training":
        """The training whose counts are the model's own (model FLOPs, parameters): without
        context parallelism, which does not change them, and with every routed token computed
        once, dropless: the slots a capacity factor pads are work of the hardware, not of the model
        (Megatron-LM's ``num_floating_point_operations`` counts ``moe_router_topk`` tokens an expert
        layer, whatever the capacity); and with attention unfused: a fused kernel's backward
        recomputes the scores, work of the kernel, as recomputation is (PaLM's and Megatron-LM's
        model FLOPs count attention's backward at twice its forward, whatever the kernel); and through
        the all-to-all dispatcher, the one every grid (the counts' one rank too) runs: a dispatcher
        moves tokens, it computes none; and without CUDA graphs, which change launches, not counts
        (kept, a dropless count of an MoE module captured whole was refused)."""
        own = self if sympify(self.cp) == 1 else replace(self, context=Context(1))
        if own.cuda_graphs:
            own = replace(own, cuda_graphs=())
        if own.flash:
            own = replace(own, flash=False, attention_kernel=None)
        if self.capacity_factor is None and self.dispatcher == "alltoall":
            return own
        return replace(own, experts=replace(self.experts, capacity_factor=None, dispatcher="alltoall"))

    def pipeline_schedule(self) -> Schedule:
        """The pipeline schedule as a value (``parallel.pipeline.Schedule``)."""
        return self.pipeline.schedule_value()


def check_reference(t: "Training") -> None:
    """Refuse a reference model (``Trainable.reference``) where its cost is not modelled: inside a
    pipeline schedule (``check_reference_pipeline``) and beside offload (the reference's shards
    would be fetched from the host as well)."""
    check_reference_pipeline(t.reference, t.p)
    if t.offload != "none":
        raise InputError(f"reference {t.reference!r} with offload {t.offload!r}: a reference model's state on the "
                         "host is not modelled", "reference")


def check_reference_pipeline(reference, p) -> None:
    """Refuse a reference model at a pipeline degree ``p`` other than 1 (a symbolic ``p`` is left to
    its values: ``sweep`` and ``search`` check theirs): the frameworks that run DPO's reference,
    TRL's trainers, do not pipeline, and its forward inside a schedule is not modelled."""
    if reference is not None and sympify(p).is_number and sympify(p) != 1:
        raise InputError(f"reference {reference!r} with p={p}: a reference model's forward inside a pipeline "
                         "schedule is not modelled", "reference")


TRAINING_MADE_BY = " (models.Training(b=..., l=..., ...))"
"""How a ``Training`` is made, for the refusal of anything else where one belongs."""


def check_sharding(t: Training) -> None:
    """Refuse a shard group that does not apply or does not divide: ``shard`` (HSDP, PyTorch
    FSDP2's 2-D device mesh ``(d/shard, shard)``) belongs to ZeRO-3 (FSDP) and must divide ``d``
    (each replica group is ``shard`` whole ranks); a compressed optimizer (1-bit Adam) with a
    sharded optimizer state.  The rules of ``Sharding`` alone are its own."""
    if t.shard is not None:
        positive_dims(shard=t.shard)
        replicas = sympify(t.d) / sympify(t.shard)
        if replicas.is_integer is False:
            raise InputError(f"shard must divide d (got shard={t.shard} and d={t.d})", "shard")
        if t.zero != 3 and replicas != 1:
            raise InputError(f"shard sizes the shard group of ZeRO-3/FSDP (zero=3), got zero={t.zero}; "
                             "it would be ignored", "shard")
    if get_optimizer(t.optimizer).compressed and (t.zero != 0 or t.distributed_optimizer):
        raise InputError(f"optimizer={t.optimizer!r} averages the whole momentum on every rank, which a sharded "
                         f"optimizer state does not hold (DeepSpeed asserts it is not compatible with ZeRO); got "
                         f"zero={t.zero}, distributed_optimizer={t.distributed_optimizer}", "optimizer")
    if t.fp8_gather and t.lora is not None:
        raise InputError("fp8_gather with lora: the frozen base's gathers in FP8 are not modelled", "fp8_gather")
    if t.fp8_gather and t.zero != 3:
        raise InputError(f"fp8_gather is FSDP's all-gather of the weights in FP8 (zero=3), got zero={t.zero}; it "
                         f"would be ignored", "fp8_gather")


def context_limit(arch) -> Expr:
    """The tokens a sequence of ``arch`` may hold: its stated context, else the rows of its learned
    position table (0: no limit known)."""
    return sympify(arch.context) or sympify(arch.positions)


def check_context(arch, spans, allow_long: bool, flag: str = "allow_long=True (--allow-long)",
                  remedy: str | None = None, argument: str | None = None) -> None:
    """Refuse (unless ``allow_long``) a span of tokens beyond the model's context (``Architecture.context``
    when stated, else the rows of its learned position table, ``positions``); ``spans`` are
    ``(what, tokens)`` pairs.  Training and serving share the rule.  The refusal says ``flag`` goes
    beyond it, or ``remedy`` where the caller has no such flag, and names ``argument`` (default:
    ``what``, where it is a name)."""
    limit = context_limit(arch)
    for text, tokens in ((text, sympify(tokens)) for text, tokens in spans):
        if not allow_long and limit != 0 and tokens.is_number and limit.is_number and tokens > limit:
            raise InputError(f"{text} = {tokens} tokens exceed the context of {arch.name} ({limit} tokens); "
                             f"{remedy or flag + ' goes beyond it'}",
                             argument or (text if text.isidentifier() else None))


def _check_sixteen_bit_layers(arch, t: Training) -> None:
    """Refuse more 16-bit layers at either end than a pipeline stage holds, as Megatron-Core's
    ``TransformerConfig`` does (``num_layers_at_start_in_bf16`` and ``..._at_end_...`` at most
    ``num_layers // pipeline_model_parallel_size``)."""
    most = sympify(arch.n_layers) // sympify(t.p) if sympify(t.p).is_number and sympify(arch.n_layers).is_number \
        else None
    for name in ("first_layers_16bit", "last_layers_16bit"):
        if most is not None and getattr(t, name) > most:
            raise InputError(f"{name}={getattr(t, name)} exceeds the {most} layers of a pipeline stage of {arch.name} "
                             f"({arch.n_layers} layers over p={t.p}); Megatron-Core refuses more", name)


def _check_layout_mtp(arch, t: Training) -> None:
    """Refuse multi-token-prediction modules (``m``) in a pipeline layout other than the model's
    ``mtp_layers`` (Megatron-Core asserts the layout's ``m``s number ``mtp_num_layers``): on a
    model without them they would be ignored.  A layout without ``m`` keeps a model's modules with
    the head, on the last stage (``parallel.splits.layout_layers``)."""
    if t.pipeline_layout is None:
        return
    placed, own = "".join(layout_stages(t.pipeline_layout)).count("m"), sympify(arch.mtp_layers)
    if placed and own.is_number and placed != own:
        raise InputError(f"pipeline_layout places {placed} multi-token-prediction module(s) (m), and {arch.name} "
                         f"has {own} (Megatron-Core asserts the layout's m number mtp_num_layers)"
                         + ("; they would be ignored" if own == 0 else ""), "pipeline_layout")


def check_model(arch, t: Training) -> None:
    """Refuse a training the model cannot honour: sequences beyond its context (unless
    ``allow_long``), what context parallelism cannot split (``check_context_parallel``), HSDP
    shard groups the expert grid does not fold into (``parallel.expert.expert_shard_degree``),
    and expert parallelism, a capacity factor or an imbalance without experts (an imbalance on one
    expert-parallel rank too); CUDA graphs of a part the model does not have (``moe`` without
    experts, ``mlp`` where every layer is MoE: ignored before, Megatron-Core refuses them), or
    around a recomputed module's dropout (``check_graphs``)."""
    check_graphs(arch, t)
    spans = (("l", t.l), ("l_dec", t.decoder_tokens)) if arch.encoder_decoder else (("l", t.l),)
    check_context(arch, spans, t.allow_long)
    check_context_parallel(arch, t)
    if arch.moe is not None and t.shard is not None:    # HSDP: the expert grid folds into a replica group
        expert_shard_degree(t.m1, t.shard, t.ep, t.m1 if t.etp is None else t.etp, t.cp)
    if sixteen_bit(t) and arch.encoder_decoder:
        raise InputError(f"first_layers_16bit, last_layers_16bit: {arch.name} is an encoder-decoder, whose layers are "
                         "not numbered as one stack (Megatron-Core's global layer number)", "first_layers_16bit")
    if sixteen_bit(t):
        _check_sixteen_bit_layers(arch, t)
    _check_layout_mtp(arch, t)
    check_shared_expert_overlap(arch, t)
    if arch.moe is not None and get_optimizer(t.optimizer).compressed:
        raise InputError(f"optimizer={t.optimizer!r} with {arch.name}'s routed experts: their momentum exchanged "
                         "over the expert data-parallel group is not modelled", "optimizer")
    if arch.moe is not None and t.reference is not None:
        raise InputError(f"reference {t.reference!r} with {arch.name}'s routed experts: a reference model's expert "
                         "shards and their gathers are not modelled", "reference")
    if arch.moe is None and t.overlap.expert:
        raise InputError(f"overlap expert hides the MoE all-to-alls behind compute, and {arch.name} has none; it "
                         f"would be ignored", "overlap")
    if arch.moe is not None and sympify(t.ep) == 1 and sympify(t.expert_imbalance) != 1:
        raise InputError(f"expert_imbalance={t.expert_imbalance} names how many times the mean the busiest of the ep "
                         f"expert-parallel ranks receives, and ep=1 keeps every expert on one rank, which receives "
                         f"every routed token; it would be ignored", "expert_imbalance")
    if arch.moe is None:
        etp = t.m1 if t.etp is None or t.tensor is not None else t.etp    # equal to m1 (a grid's: none) is no setting
        for name, value, plain in (("ep", t.ep, 1), ("etp", sympify(etp), sympify(t.m1)),
                                   ("capacity_factor", t.capacity_factor, None),
                                   ("expert_imbalance", t.expert_imbalance, 1), ("dispatcher", t.dispatcher, "alltoall")):
            if value != plain:
                raise InputError(f"{name} applies to a mixture of experts, and {arch.name} has none "
                                 f"(got {name}={value}); it would be ignored", name)


def check_graphs(arch, t: Training) -> None:
    """Refuse CUDA graphs Megatron-Core refuses for the model: of a part it lacks
    (``blocks.graphs.for_model``), or holding a selectively recomputed module whose dropout draws
    random numbers (``blocks.graphs.check_dropout``)."""
    if not t.cuda_graphs:
        return
    for_model(t.cuda_graphs, arch, t.capacity_factor, "cuda_graphs")
    if t.recompute == "selective":
        attention = arch.dropouts if arch.attention_dropout is None else arch.attention_dropout
        check_dropout(t.cuda_graphs, t.recomputation.units, bool(attention), bool(arch.dropouts))


def overlaps_sends(t: Training) -> bool:
    """Whether the stage sends run behind compute: ``Overlap.pipeline`` under the interleaved
    schedule, the only one Megatron-LM overlaps them in (it turns ``overlap_p2p_comm`` off
    elsewhere: ``megatron/training/arguments.py``)."""
    return t.overlap.pipeline and t.schedule == "interleaved"


def check_shared_expert_overlap(arch, t: Training) -> None:
    """Refuse ``Overlap.shared_expert`` where the model has no shared experts (it would be ignored,
    as Megatron-Core ignores ``--moe-shared-expert-overlap`` there) and beside the recomputed
    ``shared_experts`` module (Megatron-Core raises: the recompute cannot work with the overlap)."""
    if not t.overlap.shared_expert:
        return
    if arch.moe is None or sympify(arch.moe.shared_f) == 0:
        raise InputError(f"overlap shared_expert hides the all-to-alls behind shared experts, and {arch.name} has "
                         f"none; it would be ignored", "overlap")
    if "shared_experts" in t.recompute_modules:
        raise InputError("recompute_modules shared_experts with overlap shared_expert (Megatron-Core: shared_experts "
                         "recompute cannot work with --moe-shared-expert-overlap)", "recompute_modules")


def check_context_parallel(arch, t: Training) -> None:
    """Refuse what context parallelism (``cp != 1``, ``blocks.context``) does not model or cannot
    split: an encoder-decoder, a tensor grid, latent attention or sliding windows where Transformer
    Engine does not run them (``check_context_attention``); routed experts
    whose grid ``ep x etp`` does not fold onto the ``m1 x cp x d`` ranks (``parallel.expert``, as
    Megatron-Core refuses); ``l``
    not cut into ``2 cp`` chunks (ring and all-gather of a causal model: the causal balance) or
    ``cp`` shards, each a multiple of ``s1``; Ulysses with ``cp`` not dividing the query and the
    key/value heads of a tensor rank (``h/m1``, ``kv_heads/m1``)."""
    cp = sympify(t.cp)
    if cp == 1:
        return
    unmodelled = {"an encoder-decoder": ("encoder_decoder", arch.encoder_decoder),
                  "a tensor grid": ("tensor", t.tensor is not None),
                  "chunked attention": ("chunked", arch.window is not None and arch.windowed_layers != 0
                                        and arch.chunked)}
    for what, (name, on) in unmodelled.items():
        if on:
            raise InputError(f"cp={cp} ({t.cp_variant} context parallelism) with {what} ({arch.name}) is not "
                             f"modelled; use cp=1", name)
    check_context_attention(arch, t.cp_variant)
    if arch.moe is not None:    # the expert layers see the m1 cp d ranks of a stage (parallel.expert)
        expert_data_degree(t.m1, t.d, t.ep, t.m1 if t.etp is None else t.etp, cp)
    if t.cp_variant == "ulysses" and t.overlap.expert:
        raise InputError("the expert all-to-all overlap (Overlap.expert, --overlap expert) beside Ulysses context "
                         "parallelism is not modelled: it would hide Ulysses' head exchange too", "overlap")
    chunks = 2 * cp if arch.causal and t.cp_variant != "ulysses" else cp
    rules = [(f"{chunks} chunks (cp={cp}, {t.cp_variant})" if chunks != cp else "cp", chunks, t.l, "l"),
             ("s1", t.s1, t.l / cp, "l/cp, a rank's tokens")]
    if t.cp_variant == "ulysses":
        rules += [("cp", cp, arch.h / sympify(t.m1), "h/m1, the heads of a tensor rank (Ulysses splits them)"),
                  ("cp", cp, arch.kv / sympify(t.m1), "kv_heads/m1, the key/value heads of a tensor rank")]
    for name, divisor, dividend, what in rules:
        ratio = sympify(dividend) / divisor
        if ratio.is_integer is False:
            raise InputError(f"{name} must divide {what} (got {divisor} and {dividend})", "cp")


def check_context_attention(arch, variant: str) -> None:
    """Refuse the context-parallel variants Transformer Engine does not run the model's attention
    under (``blocks.context.RUNS_UNDER``): latent attention, attention sinks, a sliding window on
    any layer."""
    present = {"latent attention": arch.latent is not None, "attention sinks": bool(arch.sinks),
               "a sliding window": arch.window is not None and arch.windowed_layers != 0}
    for feature, on in present.items():
        if on:
            check_variant(variant, feature, arch.name)


def element_bytes(precision: str) -> int:
    """Bytes of one activation (and weight) element: 4 in fp32, 2 in fp16 or bf16."""
    return 4 if precision == "fp32" else 2
