"""The values a ``Training`` is made of, one concern each, each refusing what it cannot be.

- ``Pipeline``: the pipeline degree ``p``, its schedule and virtual stages, and how layers are split
  over the stages (first/last stage sizes, the embedding or loss as a slot, a layout)
- ``Recompute``: activation recomputation: the mode, for ``"selective"`` Megatron-LM's modules, and for
  ``"full"`` the method and group size
- ``Sharding``: ZeRO/FSDP: the stage, Megatron's distributed optimizer, the HSDP shard group,
  resharding after forward, offload to the host
- ``Precision``: the element type, the master weights, a low-precision recipe (FP8, MXFP8, NVFP4)
  with its amax history, and the layers kept out of it
- ``Batch``: the micro-batch ``b`` of sequences of ``l`` tokens (an encoder-decoder's decoder:
  ``l_dec``), micro-batches a step, and whether sequences may exceed the context
- ``Degrees``: the tensor ``m1``, sequence ``s1`` and data ``d`` degrees, or a tensor grid
- ``Execution``: fused attention (FlashAttention), the dropout-mask element, and the communication
  run behind compute (``Overlap``)
- ``Trainable``: what is trained: LoRA adapters over a frozen base, the multi-token-prediction
  modules

Expert parallelism is ``blocks.wiring.Experts`` and context parallelism ``blocks.context.Context``:
the blocks' own values, which ``Training`` holds as they are.

Refusals keep the names of ``Training``'s keywords (``recompute_layers``, ``pipeline_layout``…),
which are what a user types.

>>> Pipeline(p=4, schedule="interleaved", virtual_stages=2).p
4
>>> Recompute("selective", layers=2)
Traceback (most recent call last):
...
symbolic_cost.checks.InputError: recompute_method and recompute_layers apply to recompute='full' only, got recompute='selective'
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, sympify

from symbolic_cost import symbols as S
from symbolic_cost.blocks.heads import TP_ENDS
from symbolic_cost.blocks.graphs import check_scopes
from symbolic_cost.checks import InputError, choice, count, element_size, flag, instance, positive_dims, settle
from symbolic_cost.models.lora import LoRA
from symbolic_cost.models.optimizers import check_recipe
from symbolic_cost.models.recipes import check_16bit_layers, check_offload
from symbolic_cost.parallel.grid import Grid
from symbolic_cost.parallel.pipeline import Schedule
from symbolic_cost.parallel.splits import check_layout_ends, layout_stages

__all__ = ["Batch", "Degrees", "Pipeline", "Recompute", "Sharding", "Precision", "Execution", "Overlap", "Trainable",
           "MEGATRON_OVERLAP", "PRECISIONS", "TP_ENDS", "RECOMPUTE", "RECOMPUTE_METHODS", "RECOMPUTE_MODULES"]

PRECISIONS = ("fp32", "fp16", "bf16")
RECOMPUTE = ("none", "selective", "activation", "full", "op")
RECOMPUTE_METHODS = ("uniform", "block")
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")
"""Megatron-LM's ``--recompute-modules`` the library models (``models.recompute_modules``)."""
UNMODELLED_MODULES = ("gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc")
"""Megatron-LM's other modules: parts of architectures the library does not build (gated delta
nets and products, manifold hyper-connections)."""


def _flags(value, *names: str) -> None:
    for name in names:
        flag(getattr(value, name), name)


@dataclass(frozen=True)
class Pipeline:
    """Pipeline parallelism: ``p`` stages run ``schedule`` (``parallel.pipeline.SCHEDULES``) with
    ``virtual_stages`` model chunks a rank (interleaved only).  The layers are split evenly unless
    ``first_stage_layers``/``last_stage_layers`` size the end stages, ``embedding_in_split`` and
    ``loss_in_split`` count the embedding and the loss as a layer's slot (Megatron-LM's
    ``--account-for-embedding/loss-in-pipeline-split``, ``parallel.pipeline``), or ``layout`` places
    every layer (Megatron-LM's ``--pipeline-model-parallel-layout``, ``parallel.splits``)."""

    p: Expr = 1
    schedule: str = "1f1b"
    virtual_stages: int = 1
    first_stage_layers: Expr | None = None
    last_stage_layers: Expr | None = None
    embedding_in_split: bool = False
    loss_in_split: bool = False
    layout: str | None = None

    def __post_init__(self):
        settle(self, "p", "virtual_stages", "first_stage_layers", "last_stage_layers")
        sizes = {k: getattr(self, k) for k in ("first_stage_layers", "last_stage_layers")
                 if getattr(self, k) is not None}
        positive_dims(p=self.p, **sizes)
        _flags(self, "embedding_in_split", "loss_in_split")
        for name, value in (*self._placing(), ("pipeline_layout", self.layout)):
            if value not in (None, False) and self.p == 1:
                raise InputError(f"{name} sizes a pipeline stage, and p=1 has none; it would be ignored", name)
        if self.virtual_stages != 1 and self.p == 1:      # Megatron-LM asserts a pipeline for virtual stages
            raise InputError(f"virtual_stages={self.virtual_stages}: virtual stages split each pipeline rank's layers "
                             f"into chunks, and p=1 has no pipeline to interleave; it would be ignored",
                             "virtual_stages")
        self._check_split()
        self.schedule_value()     # refuses an unknown schedule or a bad number of virtual stages

    def _placing(self) -> tuple:
        return (("first_stage_layers", self.first_stage_layers), ("last_stage_layers", self.last_stage_layers),
                ("embedding_in_split", self.embedding_in_split), ("loss_in_split", self.loss_in_split))

    def schedule_value(self) -> Schedule:
        """The schedule as a ``parallel.pipeline.Schedule``."""
        return Schedule(self.schedule, self.virtual_stages)

    def _check_split(self) -> None:
        """Refuse the embedding or the loss counted as a layer together with first/last stage sizes
        (Megatron-Core asserts against the two together), and a layout beside any of them, whose
        ends Megatron-Core refuses (``parallel.splits.check_layout_ends``) or whose stage count is
        not ``p x virtual_stages``."""
        for name in ("embedding_in_split", "loss_in_split"):
            if getattr(self, name) and (self.first_stage_layers, self.last_stage_layers) != (None, None):
                raise InputError(f"{name} cannot go with first_stage_layers or last_stage_layers (Megatron-Core "
                                 "asserts: no embedding or loss slot with uneven stages)", name)
        if self.layout is None:
            return
        other = next((name for name, value in self._placing() if value not in (None, False)), None)
        if other:
            raise InputError(f"pipeline_layout places every layer itself; {other} cannot go with it (Megatron-LM "
                             "takes one or the other)", other)
        check_layout_ends(layout_stages(self.layout))
        stages, p = len(layout_stages(self.layout)), sympify(self.p)
        if not p.is_number or stages % p or stages // p != self.virtual_stages:
            raise InputError(f"pipeline_layout has {stages} stages: p={p} must divide them and virtual_stages "
                             f"(got {self.virtual_stages}) be their number per rank", "virtual_stages")


@dataclass(frozen=True)
class Recompute:
    """Activation recomputation: ``mode`` one of ``RECOMPUTE`` (``"selective"``: Korthikanti et
    al. 2022's attention core, or Megatron-LM's ``modules``; ``"full"``: whole layers; ``"op"``:
    torchtitan's op-level policy, ``models.op_recompute``).  Full recomputation checkpoints
    ``layers`` layers a group (``method="uniform"``) or recomputes the first ``layers`` layers
    (``"block"``), as Megatron-LM's ``--recompute-method`` and ``--recompute-num-layers``.

    ``modules`` (selective only) are Megatron-LM's ``--recompute-modules``, any of
    ``RECOMPUTE_MODULES`` (``models.recompute_modules`` says what each redoes and drops); empty
    is Megatron-LM's default, ``core_attn``.

    >>> sorted(Recompute("selective", modules=("moe_act", "layernorm")).units)
    ['layernorm', 'moe_act']
    >>> Recompute("selective").units, Recompute("none").units
    (frozenset({'core_attn'}), frozenset())
    """

    mode: str = "none"
    method: str = "uniform"
    layers: Expr = 1
    modules: tuple = ()

    def __post_init__(self):
        settle(self, "layers")
        positive_dims(recompute_layers=self.layers)
        if self.mode not in RECOMPUTE:
            raise InputError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {self.mode!r}", "recompute")
        if self.mode != "full" and (self.method, self.layers) != ("uniform", 1):
            raise InputError("recompute_method and recompute_layers apply to recompute='full' only, got "
                             f"recompute={self.mode!r}", "recompute_layers")
        if self.method not in RECOMPUTE_METHODS:
            raise InputError(f"recompute_method must be one of {', '.join(RECOMPUTE_METHODS)}, "
                             f"got {self.method!r}", "recompute_method")
        object.__setattr__(self, "modules", _modules(self.modules, self.mode))

    @property
    def units(self) -> frozenset:
        """What a selective policy recomputes: its ``modules`` (``core_attn`` when none are
        named); ``{"activation"}`` for ``"activation"``; empty otherwise (``full`` and ``op``
        recompute by layer and by operation, ``models.memory``)."""
        if self.mode == "selective":
            return frozenset(self.modules or ("core_attn",))
        return frozenset({"activation"}) if self.mode == "activation" else frozenset()


def _modules(modules, mode: str) -> tuple:
    """``modules`` as a tuple of names, refusing names Megatron-LM does not have or the library
    does not model, repeats, and modules beside a mode other than ``"selective"``."""
    if isinstance(modules, str) or not isinstance(modules, (tuple, list)):
        raise InputError(f"recompute_modules must be a list of Megatron-LM module names, got {modules!r}",
                         "recompute_modules")
    for name in modules:
        if name in UNMODELLED_MODULES:
            raise InputError(f"recompute_modules {name!r} recomputes part of an architecture the library does not "
                             f"build; it models {', '.join(RECOMPUTE_MODULES)}", "recompute_modules")
        if name not in RECOMPUTE_MODULES:
            raise InputError(f"recompute_modules must be among {', '.join(RECOMPUTE_MODULES)} (Megatron-LM's "
                             f"names), got {name!r}", "recompute_modules")
    if len(set(modules)) != len(modules):
        raise InputError(f"recompute_modules names a module twice: {list(modules)}", "recompute_modules")
    if modules and mode != "selective":
        raise InputError(f"recompute_modules apply to recompute='selective' (Megatron-LM's selective granularity), "
                         f"got recompute={mode!r}; they would be ignored", "recompute_modules")
    return tuple(modules)


@dataclass(frozen=True)
class Sharding:
    """Sharded data parallelism: ``zero`` the ZeRO stage (3: FSDP), ``distributed_optimizer``
    Megatron-LM's ZeRO-1, ``shard`` the ZeRO-3 shard group (HSDP: replicated over ``d/shard``
    groups; ``None``: all of ``d``), ``reshard_after_forward`` frees the gathered weights after
    forward (FSDP2; gathered again in backward), ``offload`` ``"optimizer"`` or ``"parameters"``
    to the host (``models.recipes``).  Whether ``shard`` divides ``d`` is ``Training``'s check
    (``models.training.check_sharding``): the degree is not this value's."""

    zero: int = 0
    distributed_optimizer: bool = False
    shard: Expr | None = None
    reshard_after_forward: bool = True
    offload: str = "none"

    def __post_init__(self):
        settle(self, "zero", "shard")
        choice(self.zero, "zero", (0, 1, 2, 3))
        _flags(self, "distributed_optimizer", "reshard_after_forward")
        if self.shard is not None:
            object.__setattr__(self, "shard", positive_dims(shard=self.shard)["shard"])
        if not self.reshard_after_forward and self.zero != 3:
            raise InputError(f"reshard_after_forward=False applies to ZeRO-3/FSDP (zero=3), got zero={self.zero}; "
                             "it would be ignored", "reshard_after_forward")
        check_offload(self.offload, self.zero)


@dataclass(frozen=True)
class Precision:
    """Numbers of the run: ``dtype`` one of ``PRECISIONS`` (weights and activations), the
    ``optimizer`` (``models.optimizers.OPTIMIZERS``), ``master_weights`` (an fp32 copy in the
    optimizer under 16-bit training), ``fp8`` a low-precision recipe of
    ``models.optimizers.FP8_RECIPES`` with ``fp8_amax_history`` (delayed scaling's history;
    ``None``: Transformer Engine's 1024, Megatron-LM's is 1), and ``first_layers_16bit``/
    ``last_layers_16bit`` layers kept out of the recipe (Megatron-LM's
    ``--first-last-layers-bf16``, ``models.recipes.precision_groups``), and ``fp8_gather``: FSDP
    all-gathers the low-precision products' weights in FP8, one byte an element, cast on each shard
    before the gather (torchtitan's ``enable_fsdp_float8_all_gather``; ``Training`` asks for ZeRO-3)."""

    dtype: str = "bf16"
    optimizer: str = "adam"
    master_weights: bool = True
    fp8: str | None = None
    fp8_amax_history: int | None = None
    first_layers_16bit: int = 0
    last_layers_16bit: int = 0
    fp8_gather: bool = False

    def __post_init__(self):
        settle(self, "fp8_amax_history", "first_layers_16bit", "last_layers_16bit")
        if self.dtype not in PRECISIONS:
            raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.dtype!r}", "precision")
        _flags(self, "master_weights", "fp8_gather")
        if self.fp8_gather and self.fp8 not in FP8_GATHERS:
            raise InputError(f"fp8_gather gathers the weights of FP8 products cast with one scale a tensor "
                             f"(fp8 {' or '.join(FP8_GATHERS)}), got fp8={self.fp8!r}", "fp8_gather")
        check_recipe(self.dtype, self.optimizer, self.master_weights, self.fp8, amax_history=self.fp8_amax_history)
        check_16bit_layers(self)


FP8_GATHERS = ("torchao-tensorwise", "tensorwise", "delayed")
"""Recipes whose weights FSDP can gather in FP8: one scale a tensor, known before the gather
(torchao's float8 with dynamic or delayed scaling); block-scaled formats (MXFP8, NVFP4) and
torchao's row-wise scales (its float8 all-gather is tensor-wise only) are not gathered so here."""


@dataclass(frozen=True)
class Batch:
    """What a step trains on: micro-batches of ``b`` sequences of ``l`` tokens (``l_dec`` through an
    encoder-decoder's decoder; ``None``: ``l``), ``micro_batches`` of them a step and rank, and
    ``allow_long``: sequences may exceed the model's context (``models.training.check_model``)."""

    b: Expr = S.b
    l: Expr = S.l
    l_dec: Expr | None = None
    micro_batches: Expr = 1
    allow_long: bool = False

    def __post_init__(self):
        settle(self, "b", "l", "l_dec", "micro_batches")
        decoder = {} if self.l_dec is None else {"l_dec": self.l_dec}
        positive_dims(b=self.b, l=self.l, micro_batches=self.micro_batches, **decoder)
        _flags(self, "allow_long")


@dataclass(frozen=True)
class Degrees:
    """The tensor ``m1``, sequence ``s1`` and data ``d`` degrees, or ``tensor``, a 2-D/2.5-D/3-D
    tensor grid (``parallel.grid``; set with ``models.grid_stack.on_grid``).  The pipeline,
    context and expert degrees are their values' (``Pipeline``, ``Context``, ``Experts``).
    ``ends``: how the word table and the LM head are laid over the ``m1`` tensor ranks
    (``TP_ENDS``; ``blocks.ends.embedding_block``, ``blocks.heads.lm_rows``)."""

    m1: Expr = 1
    s1: Expr = 1
    d: Expr = 1
    tensor: object = None
    ends: str = "vocab"

    def __post_init__(self):
        settle(self, "m1", "s1", "d")
        positive_dims(m1=self.m1, s1=self.s1, d=self.d)
        if self.tensor is not None:
            instance(self.tensor, Grid, "tensor", " (parallel.grid.make_grid(...), set with models.grid_stack.on_grid)")
        choice(self.ends, "tp_ends", TP_ENDS)
        if self.ends != "vocab" and sympify(self.s1) != 1:
            raise InputError(f"tp_ends {self.ends!r} keeps the embedding's output whole on every tensor rank (no "
                             f"sequence parallelism: transformers' tp_plan, DeepSpeed's AutoTP); got s1={self.s1}",
                             "tp_ends")
        if self.ends != "vocab" and self.tensor is not None:
            raise InputError(f"tp_ends {self.ends!r} on a tensor grid is not modelled (a grid's ends are "
                             f"vocabulary-parallel)", "tp_ends")


@dataclass(frozen=True)
class Overlap:
    """Communication the framework runs behind compute (``timing.step``): ``grad_reduce``, the
    data-parallel gradient reduction behind the last micro-batch's backward (Megatron-LM
    ``--overlap-grad-reduce``, PyTorch DDP's buckets), or each micro-batch's where it reduces every
    micro-batch (ZeRO-2/3, FSDP); ``param_gather``, the distributed optimizer's parameter
    all-gather behind the first micro-batch's forward (``--overlap-param-gather``), FSDP's gathers
    behind each micro-batch's; ``tensor``, the tensor/sequence-parallel collectives behind the
    products (``--tp-comm-overlap``, Transformer Engine); ``expert``, the MoE token dispatch and
    combine all-to-alls behind another micro-batch's compute (Megatron-Core's 1F1B all-to-all
    overlap, ``--overlap-moe-expert-parallel-comm``, Megatron-Bridge's ``moe_a2a_overlap``), which
    ``tensor`` does not hide; ``shared_expert``, those all-to-alls behind the same layer's shared
    experts, run on a stream of their own (``--moe-shared-expert-overlap``; Megatron-Core asserts it
    off beside ``expert``); ``pipeline``, the interleaved schedule's stage sends and receives behind
    the next chunk's compute (Megatron-LM's ``overlap_p2p_comm``, which it turns off outside the
    interleaved schedule; PyTorch's pipelining posts its sends the same way).  As Megatron-LM's
    defaults: all off but ``pipeline``, on since Megatron-LM 4eeff55d1f (2023-10-12,
    ``--no-overlap-p2p-communication`` turns it off)."""

    grad_reduce: bool = False
    param_gather: bool = False
    tensor: bool = False
    expert: bool = False
    shared_expert: bool = False
    pipeline: bool = True

    WORDS = (("grad", "grad_reduce"), ("param", "param_gather"), ("tensor", "tensor"), ("expert", "expert"),
             ("shared", "shared_expert"))
    """The command line's word for each switch that is off by default (``--overlap grad,param``)."""

    NEGATED = (("no-p2p", "pipeline"),)
    """The command line's word for each switch that is on by default, to turn it off."""

    def __post_init__(self):
        _flags(self, "grad_reduce", "param_gather", "tensor", "expert", "shared_expert", "pipeline")
        if self.expert and self.shared_expert:
            raise InputError("overlap shared_expert (--moe-shared-expert-overlap) with expert (the 1F1B all-to-all "
                             "overlap): Megatron-Core asserts the first off under the second", "overlap")

    @classmethod
    def of_words(cls, words) -> "Overlap":
        """The switches ``words`` name (``WORDS``).

        >>> Overlap.of_words(["grad", "shared"]).words(), Overlap.of_words(["no-p2p"]).pipeline
        (['grad', 'shared'], False)
        """
        return cls(**{field: word in words for word, field in cls.WORDS},
                   **{field: word not in words for word, field in cls.NEGATED})

    def words(self) -> list:
        """The words that give these switches (``of_words``): those on, and ``NEGATED``'s for those off."""
        return ([word for word, field in self.WORDS if getattr(self, field)]
                + [word for word, field in self.NEGATED if not getattr(self, field)])


MEGATRON_OVERLAP = Overlap(grad_reduce=True, param_gather=True, tensor=True)
"""The three dense switches on, as Megatron-LM's performance recipes launch (its README's H100 table)."""


ATTENTION_KERNELS = ("cudnn", "flash-attention-2", "flash-attention-3")
"""The fused attention libraries a training can name (``Execution.attention_kernel``): cuDNN's
fused attention (Transformer Engine's, so Megatron-LM's and NeMo's), FlashAttention-2 (the flash
backend of PyTorch's ``scaled_dot_product_attention``, Hugging Face's ``sdpa`` and
``flash_attention_2``), FlashAttention-3 (Hopper only).  The time model runs each at its published
benchmarks on the system's GPU (``timing.attention_kernels.LIBRARIES``)."""


@dataclass(frozen=True)
class Execution:
    """How the step runs, where it changes what is stored or hidden: ``flash`` (fused attention:
    no score matrix kept, the scores recomputed in backward), ``attention_kernel``, the fused
    attention library the framework runs (``ATTENTION_KERNELS``; ``None``: the system's, cuDNN's
    on Hopper and later, FlashAttention-2 on Ampere; only the time depends on it), ``mask_bytes``,
    the dropout-mask element (CUDA keeps bytes; PyTorch's CPU path, floats), ``overlap``
    (``Overlap``), ``loss_chunks``, the pieces of the sequence the LM head and its loss run
    in, one after the other, each with its backward (``blocks.heads.lm_rows``; torchtitan's
    ``ChunkedLossWrapper``; 1: the whole logits at once), and ``fused_loss``, the head and its
    loss as one function that forms their gradients in the forward, the logits a chunk at a time
    (Liger-Kernel's fused linear cross-entropy: ``ops.fused_linear_cross_entropy``), and
    ``cuda_graphs``, the parts of each layer replayed from CUDA graphs (``blocks.graphs.SCOPES``,
    Megatron-Core's ``--cuda-graph-scope``; only the kernels' launches change)."""

    flash: bool = False
    mask_bytes: Expr = 1
    overlap: Overlap = Overlap()
    attention_kernel: str | None = None
    loss_chunks: int = 1
    fused_loss: bool = False
    cuda_graphs: tuple = ()

    def __post_init__(self):
        settle(self, "mask_bytes", "loss_chunks")
        _flags(self, "flash", "fused_loss")
        object.__setattr__(self, "cuda_graphs", check_scopes(self.cuda_graphs))
        if self.fused_loss and self.loss_chunks != 1:
            raise InputError(f"fused_loss chunks the logits its own way; loss_chunks={self.loss_chunks} beside it "
                             f"is a second way: give one", "loss_chunks")
        element_size(self.mask_bytes, "mask_bytes")
        if isinstance(self.loss_chunks, bool) or not isinstance(self.loss_chunks, int) or self.loss_chunks < 1:
            raise InputError(f"loss_chunks must be a positive integer, got {self.loss_chunks!r}", "loss_chunks")
        count(self.loss_chunks, "loss_chunks")          # at most 2**53, as every count
        if not isinstance(self.overlap, Overlap):
            raise InputError(f"overlap must be a models.training.Overlap value, got {self.overlap!r}", "overlap")
        if self.attention_kernel is not None:
            if self.attention_kernel not in ATTENTION_KERNELS:
                raise InputError(f"attention_kernel must be one of {', '.join(ATTENTION_KERNELS)}, got "
                                 f"{self.attention_kernel!r}", "attention_kernel")
            if not self.flash:
                raise InputError(f"attention_kernel {self.attention_kernel!r} names a fused attention kernel, "
                                 "but flash is off (attention as separate products keeps the score matrix); "
                                 "turn flash on or leave attention_kernel unset", "attention_kernel")


REFERENCES = (None, "16-bit", "fp32", "adapters")
"""A frozen reference model beside the trained one (``Trainable.reference``): none; a copy held in
16-bit or fp32 elements; or LoRA's base with the adapters switched off (no copy)."""


@dataclass(frozen=True)
class Trainable:
    """What is trained: ``lora``, adapters over a frozen base (``models.lora.LoRA``; ``None``: every
    weight), and ``mtp``, the model's multi-token-prediction modules (``blocks.mtp``), if any; and
    ``reference``, a frozen reference model that runs one forward a micro-batch over the same
    sequences, without gradients, as DPO's loss compares the trained model's log-probabilities
    with it (Rafailov et al. 2023; TRL's ``DPOTrainer``): ``"16-bit"`` or ``"fp32"``, a second copy
    of the model held in those elements; ``"adapters"``, under LoRA, the base itself with the
    adapters off (TRL's default with PEFT: no copy); ``None`` (default), none."""

    lora: LoRA | None = None
    mtp: bool = True
    reference: str | None = None

    def __post_init__(self):
        if self.lora is not None and not isinstance(self.lora, LoRA):
            raise InputError(f"lora must be a models.lora.LoRA value or None, got {self.lora!r}", "lora")
        _flags(self, "mtp")
        choice(self.reference, "reference", REFERENCES)
        if self.reference == "adapters" and self.lora is None:
            raise InputError("reference 'adapters' is LoRA's base with the adapters off: it needs lora (a full "
                             "fine-tune's reference is a copy: '16-bit' or 'fp32')", "reference")
