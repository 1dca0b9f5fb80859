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

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, choice, flag, positive, positive_dims
from symbolic_cost.models.lora import LoRA
from symbolic_cost.models.op_recompute import check_training
from symbolic_cost.models.optimizers import bytes_per_parameter, check_recipe
from symbolic_cost.models.recipes import check_16bit_layers, check_offload, sixteen_bit
from symbolic_cost.blocks.context import VARIANTS
from symbolic_cost.blocks.wiring import check_expert_training
from symbolic_cost.parallel.expert import expert_data_degree, expert_shard_degree
from symbolic_cost.parallel.pipeline import Schedule
from symbolic_cost.parallel.splits import layout_stages

__all__ = ["Training", "Overlap", "check_context", "check_context_parallel", "check_sharding", "check_model", "MEGATRON_OVERLAP", "element_bytes", "bytes_per_parameter", "PRECISIONS", "RECOMPUTE", "RECOMPUTE_METHODS"]

PRECISIONS = ("fp32", "fp16", "bf16")
RECOMPUTE = ("none", "selective", "activation", "full", "op")
RECOMPUTE_METHODS = ("uniform", "block")


@dataclass(frozen=True)
class Overlap:
    """Communication the framework runs behind compute (``timing.step``): ``grad_reduce``, the
    data-parallel gradient reduction behind the last micro-batch's backward (Megatron-LM
    ``--overlap-grad-reduce``, PyTorch DDP's buckets), or each micro-batch's where it reduces every
    micro-batch (ZeRO-2/3, FSDP); ``param_gather``, the distributed optimizer's parameter
    all-gather behind the first micro-batch's forward (``--overlap-param-gather``), FSDP's gathers
    behind each micro-batch's; ``tensor``, the tensor/sequence-parallel collectives behind the
    products (``--tp-comm-overlap``, Transformer Engine).  All off, as Megatron-LM's defaults."""

    grad_reduce: bool = False
    param_gather: bool = False
    tensor: bool = False

    def __post_init__(self):
        for name in ("grad_reduce", "param_gather", "tensor"):
            flag(getattr(self, name), name)


MEGATRON_OVERLAP = Overlap(grad_reduce=True, param_gather=True, tensor=True)
"""The three switches on, as Megatron-LM's performance recipes launch (its README's H100 table)."""


@dataclass(frozen=True)
class Training:
    """How the model is trained: micro-batch ``b``, sequence ``l``, degrees, memory policy."""

    b: Expr = S.b
    l: Expr = S.l
    l_dec: Expr | None = None    # an encoder-decoder's decoder tokens per sequence (None: l)
    m1: Expr = 1
    s1: Expr = 1
    d: Expr = 1
    p: Expr = 1
    micro_batches: Expr = 1
    precision: str = "bf16"
    zero: int = 0
    distributed_optimizer: bool = False
    shard: Expr | None = None    # ZeRO-3's shard group (HSDP: replicated over d/shard groups; None: all of d)
    reshard_after_forward: bool = True   # ZeRO-3/FSDP2: free the gathered weights after forward (gather again)
    recompute: str = "none"
    recompute_method: str = "uniform"   # full recomputation: "uniform" groups or the first "block" layers
    recompute_layers: Expr = 1   # full: layers per checkpointed group (uniform) or recomputed (block)
    schedule: str = "1f1b"       # pipeline schedule: "gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe"
    virtual_stages: int = 1      # model chunks per pipeline rank (interleaved only)
    first_stage_layers: Expr | None = None   # layers on the first pipeline rank (None: an even split)
    last_stage_layers: Expr | None = None    # layers on the last pipeline rank (None: an even split)
    embedding_in_split: bool = False   # the embedding takes a layer's slot on the first rank (parallel.pipeline)
    loss_in_split: bool = False        # the loss takes a layer's slot on the last rank (parallel.pipeline)
    pipeline_layout: str | None = None  # Megatron's --pipeline-model-parallel-layout (parallel.splits)
    flash: bool = False
    mask_bytes: Expr = 1         # dropout-mask element (CUDA keeps bytes; PyTorch's CPU path, floats)
    ep: Expr = 1                 # expert-parallel degree of MoE layers (blocks.moe)
    etp: Expr | None = None      # expert tensor-parallel degree (None: m1, as Megatron-LM)
    capacity_factor: Expr | None = None   # expert capacity factor (None: dropless)
    expert_imbalance: Expr = 1   # routed rows of the busiest expert-parallel rank over the mean
    optimizer: str = "adam"      # models.optimizers.OPTIMIZERS
    master_weights: bool = True  # 16-bit training keeps an fp32 master copy in the optimizer
    fp8: str | None = None       # a low-precision recipe (FP8, MXFP8, NVFP4) of models.optimizers.FP8_RECIPES
    fp8_amax_history: int | None = None   # delayed scaling's amax history (None: TE's 1024; Megatron-LM's is 1)
    first_layers_16bit: int = 0  # layers at the start kept out of the fp8 recipe (Megatron --first-last-layers-bf16)
    last_layers_16bit: int = 0   # layers at the end kept out of it (models.recipes.precision_groups)
    offload: str = "none"        # "optimizer" or "parameters" to the host (models.recipes)
    lora: LoRA | None = None     # adapters over a frozen base (models.lora)
    mtp: bool = True             # train the model's multi-token-prediction modules (blocks.mtp), if any
    tensor: object = None        # a 2-D/2.5-D/3-D tensor grid (parallel.grid; set with models.grid_stack.on_grid)
    overlap: Overlap = Overlap()  # communication behind compute (timing.step)
    allow_long: bool = False     # sequences may exceed the model's context (check_model)
    cp: Expr = 1                 # context-parallel degree: ranks sharing each sequence (blocks.context)
    cp_variant: str = "ring"     # blocks.context.VARIANTS: "ring", "all-gather", "ulysses"

    def __post_init__(self):
        uneven = {k: getattr(self, k) for k in ("first_stage_layers", "last_stage_layers", "l_dec")
                  if getattr(self, k) is not None}
        positive_dims(b=self.b, l=self.l, m1=self.m1, s1=self.s1, d=self.d, p=self.p, micro_batches=self.micro_batches,
                      recompute_layers=self.recompute_layers, cp=self.cp, **uneven)
        choice(self.cp_variant, "cp_variant", VARIANTS)
        if self.cp_variant != "ring" and sympify(self.cp) == 1:
            raise InputError(f"cp_variant applies to context parallelism (cp > 1), got cp=1 and "
                             f"cp_variant={self.cp_variant!r}; it would be ignored", "cp_variant")
        positive(self.mask_bytes, "mask_bytes")
        choice(self.zero, "zero", (0, 1, 2, 3))
        for name in ("distributed_optimizer", "flash", "master_weights", "mtp", "allow_long", "reshard_after_forward",
                     "embedding_in_split", "loss_in_split"):
            flag(getattr(self, name), name)
        if self.recompute != "full" and (self.recompute_method, self.recompute_layers) != ("uniform", 1):
            raise InputError("recompute_method and recompute_layers apply to recompute='full' only, got "
                             f"recompute={self.recompute!r}", "recompute_layers")
        if self.precision not in PRECISIONS:
            raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.zero not in (0, 1, 2, 3):
            raise InputError(f"zero must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.recompute not in RECOMPUTE:
            raise InputError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")
        if self.recompute == "op":
            check_training(self)
        if self.recompute_method not in RECOMPUTE_METHODS:
            raise InputError(f"recompute_method must be one of {', '.join(RECOMPUTE_METHODS)}, "
                             f"got {self.recompute_method!r}")
        for name in ("first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split", "pipeline_layout"):
            if getattr(self, name) not in (None, False) and self.p == 1:
                raise InputError(f"{name} sizes a pipeline stage, and p=1 has none; it would be ignored", name)
        check_split(self)
        self.pipeline_schedule()     # refuses an unknown schedule or a bad number of virtual stages
        check_expert_training(self.ep, self.etp, self.capacity_factor, self.expert_imbalance)
        check_recipe(self.precision, self.optimizer, self.master_weights, self.fp8, amax_history=self.fp8_amax_history)
        check_offload(self.offload, self.zero)
        check_16bit_layers(self)
        check_sharding(self)
        if self.lora is not None and not isinstance(self.lora, LoRA):
            raise InputError(f"lora must be a models.lora.LoRA value or None, got {self.lora!r}")
        if not isinstance(self.overlap, Overlap):
            raise InputError(f"overlap must be a models.training.Overlap value, got {self.overlap!r}", "overlap")
        if self.lora is not None and self.fp8 is not None:
            raise InputError("fp8 with lora is not modelled: choose one of them")

    @property
    def shard_group(self) -> Expr:
        """Ranks one copy of the sharded state is spread over: ``shard``, or ``d`` when unset."""
        return sympify(self.d if self.shard is None else self.shard)

    @property
    def decoder_tokens(self) -> Expr:
        """Tokens per sequence through an encoder-decoder's decoder: ``l_dec``, or ``l``."""
        return self.l if self.l_dec is None else self.l_dec

    def without_cp(self) -> "Training":
        """The same training without context parallelism: the model's own per-sequence counts
        (model FLOPs, parameters), which CP does not change."""
        return self if sympify(self.cp) == 1 else replace(self, cp=1, cp_variant="ring")

    def pipeline_schedule(self) -> Schedule:
        """The pipeline schedule as a value (``parallel.pipeline.Schedule``)."""
        return Schedule(self.schedule, self.virtual_stages)


def check_split(t: Training) -> None:
    """Refuse the embedding or the loss counted as a layer (Megatron-LM's
    ``--account-for-embedding/loss-in-pipeline-split``) together with first/last stage sizes
    (Megatron-Core asserts against the two together), and a ``pipeline_layout`` beside any of them
    or whose stage count is not ``p x virtual_stages``."""
    for name in ("embedding_in_split", "loss_in_split"):
        if getattr(t, name) and (t.first_stage_layers, t.last_stage_layers) != (None, None):
            raise InputError(f"{name} cannot go with first_stage_layers or last_stage_layers (Megatron-Core "
                             "asserts: no embedding or loss slot with uneven stages)", name)
    if t.pipeline_layout is None:
        return
    other = next((k for k in ("first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split")
                  if getattr(t, k) not in (None, False)), None)
    if other:
        raise InputError(f"pipeline_layout places every layer itself; {other} cannot go with it (Megatron-LM "
                         "takes one or the other)", other)
    stages, p = len(layout_stages(t.pipeline_layout)), sympify(t.p)
    if not p.is_number or stages % p or stages // p != t.virtual_stages:
        raise InputError(f"pipeline_layout has {stages} stages: p={p} must divide them and virtual_stages "
                         f"(got {t.virtual_stages}) be their number per rank", "virtual_stages")


def check_sharding(t: Training) -> None:
    """Refuse a shard group that does not apply or does not divide: ``shard`` (HSDP, PyTorch
    FSDP2's 2-D device mesh ``(d/shard, shard)``) and ``reshard_after_forward=False`` belong to
    ZeRO-3 (FSDP); ``shard`` must divide ``d`` (each replica group is ``shard`` whole ranks)."""
    if t.shard is not None:
        positive_dims(shard=t.shard)
        replicas = sympify(t.d) / sympify(t.shard)
        if replicas.is_integer is False:
            raise InputError(f"shard must divide d (got shard={t.shard} and d={t.d})", "shard")
        if t.zero != 3 and replicas != 1:
            raise InputError(f"shard sizes the shard group of ZeRO-3/FSDP (zero=3), got zero={t.zero}; "
                             "it would be ignored", "shard")
    if not t.reshard_after_forward and t.zero != 3:
        raise InputError(f"reshard_after_forward=False applies to ZeRO-3/FSDP (zero=3), got zero={t.zero}; "
                         "it would be ignored", "reshard_after_forward")


def check_context(arch, spans, allow_long: bool, flag: str = "allow_long=True (--allow-long)") -> None:
    """Refuse (unless ``allow_long``) a span of tokens beyond the model's context (``Architecture.context``,
    when stated); ``spans`` are ``(what, tokens)`` pairs.  Training and serving share the rule."""
    limit = sympify(arch.context)
    for text, tokens in ((text, sympify(tokens)) for text, tokens in spans):
        if not allow_long and limit != 0 and tokens.is_number and limit.is_number and tokens > limit:
            raise InputError(f"{text} = {tokens} tokens exceed the context of {arch.name} ({limit} tokens); "
                             f"{flag} goes beyond it", text if text.isidentifier() else None)


def check_model(arch, t: Training) -> None:
    """Refuse a training the model cannot honour: sequences beyond its context (unless
    ``allow_long``), what context parallelism cannot split (``check_context_parallel``), HSDP
    shard groups the expert grid does not fold into (``parallel.expert.expert_shard_degree``),
    and expert parallelism, a capacity factor or an imbalance without experts."""
    spans = (("l", t.l), ("l_dec", t.decoder_tokens)) if arch.encoder_decoder else (("l", t.l),)
    check_context(arch, spans, t.allow_long)
    check_context_parallel(arch, t)
    if arch.moe is not None and t.shard is not None:    # HSDP: the expert grid folds into a replica group
        expert_shard_degree(t.m1, t.shard, t.ep, t.m1 if t.etp is None else t.etp, t.cp)
    if sixteen_bit(t) and arch.encoder_decoder:
        raise InputError(f"first_layers_16bit, last_layers_16bit: {arch.name} is an encoder-decoder, whose layers are "
                         "not numbered as one stack (Megatron-Core's global layer number)", "first_layers_16bit")
    if arch.moe is None:
        for name, value, plain in (("ep", t.ep, 1), ("capacity_factor", t.capacity_factor, None),
                                   ("expert_imbalance", t.expert_imbalance, 1)):
            if value != plain:
                raise InputError(f"{name} applies to a mixture of experts, and {arch.name} has none "
                                 f"(got {name}={value}); it would be ignored", name)


def check_context_parallel(arch, t: Training) -> None:
    """Refuse what context parallelism (``cp != 1``, ``blocks.context``) does not model or cannot
    split: an encoder-decoder, latent attention, sliding windows, a tensor grid; routed experts
    whose grid ``ep x etp`` does not fold onto the ``m1 x cp x d`` ranks (``parallel.expert``, as
    Megatron-Core refuses); ``l``
    not cut into ``2 cp`` chunks (ring and all-gather of a causal model: the causal balance) or
    ``cp`` shards, each a multiple of ``s1``; Ulysses with ``cp`` not dividing the query and the
    key/value heads of a tensor rank (``h/m1``, ``kv_heads/m1``)."""
    cp = sympify(t.cp)
    if cp == 1:
        return
    unmodelled = dict(encoder_decoder=arch.encoder_decoder, latent=arch.latent is not None,
                      window=arch.window is not None and arch.windowed_layers != 0, tensor=t.tensor is not None)
    for name, on in unmodelled.items():
        if on:
            raise InputError(f"cp={cp} ({t.cp_variant} context parallelism) with {name} ({arch.name}) is not "
                             f"modelled; use cp=1", name)
    if arch.moe is not None:    # the expert layers see the m1 cp d ranks of a stage (parallel.expert)
        expert_data_degree(t.m1, t.d, t.ep, t.m1 if t.etp is None else t.etp, cp)
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


def element_bytes(precision: str) -> int:
    """Bytes of one activation (and weight) element: 4 in fp32, 2 in fp16 or bf16."""
    return 4 if precision == "fp32" else 2
