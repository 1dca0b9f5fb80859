"""``Serving``: how a model is served (batch, prompt and output lengths, degrees, number formats,
paging), the checks it must pass against the model, and the token counts of generation.

Generation as transformers' ``generate`` runs it: the prefill feeds the prompt (an
encoder-decoder's encoder reads the prompt and its decoder one start token) and yields the
first token; each of the ``l_out - 1`` decode steps then feeds the last token and yields the
next.  The decoder's cache holds ``P`` tokens after the prefill (``P = l_in``, or 1 for an
encoder-decoder), ``P + j - 1`` before decode step ``j`` and ``P + l_out - 1`` at the end (the
last token generated is never fed back).
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, sympify

from symbolic_cost import symbols as S
from symbolic_cost.blocks.moe import check_tensor_group_grid
from symbolic_cost.checks import InputError, choice, flag, instance, positive_dims
from symbolic_cost.inference.kv_cache import MLA_FORMS, KVFormat, check_decoder, kv_format, stages_rule
from symbolic_cost.inference.weight_formats import weight_format
from symbolic_cost.models.architecture import MADE_BY, Architecture
from symbolic_cost.blocks.context import VARIANTS
from symbolic_cost.models.training import PRECISIONS, Training, element_bytes
from symbolic_cost.models.training import check_context as shared_context_rule
from symbolic_cost.models.training import check_context_parallel as shared_context_parallel
from symbolic_cost.parallel.expert import expert_data_degree


SERVING_MADE_BY = " (inference.Serving(b=..., l_in=..., l_out=...))"
"""How a ``Serving`` is made, for the refusal of anything else where one belongs."""

@dataclass(frozen=True)
class Serving:
    """``b`` sequences of ``l_in`` prompt tokens each generating ``l_out`` tokens, on ``m1``
    tensor-parallel devices times ``p`` pipeline stages, ``d`` replicas (a mixture of experts
    splits its experts over ``ep`` of the ``m1 d`` ranks of a stage and each expert over
    ``etp``, as in training: ``blocks.moe``; under ``m1`` the tensor ranks share their tokens
    and the expert grid is the tensor group, ``ep etp = m1``, so ``etp`` defaults to ``m1/ep``
    as vLLM slices every expert over its tensor ranks); weights and
    activations in ``precision``, the cache in ``kv_dtype`` (``None``: the precision; a name
    of ``kv_cache.KV_FORMATS`` or a ``KVFormat``) paged in ``page`` tokens (``None``:
    contiguous); ``flash`` attention; ``allow_long`` lets the tokens exceed the model's context;
    ``mla``: how multi-head latent attention caches and decodes (``kv_cache.MLA_FORMS``:
    ``"absorbed"``, ``"recompute"`` as transformers does, ``"decompressed"``; ``latent``);
    ``weights``: the number format of the layers' matrix weights (``weight_formats.WEIGHT_FORMATS``:
    ``"fp8"``, ``"mxfp8"``, ``"nvfp4"``, ``"int4"``, ``"fp8-block"``, ``"mxfp4-experts"``; ``None``: the
    precision; ``models.config.stored_weights`` reads a checkpoint's own); ``cp``: context parallelism
    of the prefill over ``cp`` ranks of each replica, ``cp_variant`` one of ``blocks.context.VARIANTS``
    (``check_context_parallel``; decode under CP is refused)."""

    b: Expr = S.b
    l_in: Expr = S.l_in
    l_out: Expr = S.l_out
    m1: Expr = 1
    p: Expr = 1
    d: Expr = 1
    ep: Expr = 1
    etp: Expr | None = None
    precision: str = "bf16"
    kv_dtype: str | KVFormat | None = None
    page: Expr | None = None
    flash: bool = False
    allow_long: bool = False
    mla: str = "absorbed"
    weights: str | None = None
    cp: Expr = 1
    cp_variant: str = "ring"

    def __post_init__(self):
        if self.mla not in MLA_FORMS:
            raise InputError(f"mla must be one of {', '.join(MLA_FORMS)}, got {self.mla!r}", "mla")
        if self.precision not in PRECISIONS:
            raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}", "precision")
        flag(self.flash, "flash"), flag(self.allow_long, "allow_long")
        self.kv                                   # refuses an unknown kv_dtype
        weight_format(self.weights)               # refuses an unknown weight format
        choice(self.cp_variant, "cp_variant", VARIANTS)
        sizes = dict(b=self.b, l_in=self.l_in, l_out=self.l_out, m1=self.m1, p=self.p, d=self.d, ep=self.ep,
                     cp=self.cp)
        if self.page is not None:
            sizes["page"] = self.page
        for name, value in positive_dims(**sizes).items():
            object.__setattr__(self, name, value)
        if self.etp is None and self.m1 != 1 and (self.m1 / self.ep).is_integer is False:
            raise InputError(f"ep must divide m1 under tensor parallelism (the tensor ranks split the experts "
                             f"ep x etp = m1 ways), got ep={self.ep}, m1={self.m1}", "ep")
        if self.etp is not None:
            object.__setattr__(self, "etp", positive_dims(etp=self.etp)["etp"])
        expert_data_degree(self.m1, self.d, self.ep, self.expert_tensor)     # the grid folds onto the ranks

    @property
    def expert_tensor(self) -> Expr:
        """The expert tensor-parallel degree: ``etp``, by default ``m1/ep`` (1 without ``m1``)."""
        if self.etp is not None:
            return self.etp
        return sympify(1) if self.m1 == 1 else self.m1 / self.ep

    @property
    def kv(self) -> KVFormat:
        """The cache's format."""
        return kv_format(self.precision if self.kv_dtype is None else self.kv_dtype)

    @property
    def replicated_experts(self) -> bool:
        """Whether the tensor ranks route the same tokens (``m1 != 1``: no sequence parallelism
        in serving; ``blocks.moe`` with ``replicated=True``)."""
        return self.m1 != 1

    @property
    def es(self) -> int:
        """Bytes of a weight or activation element (``models.training.element_bytes``)."""
        return element_bytes(self.precision)

    @property
    def replica_devices(self) -> Expr:
        """Devices of one replica: ``m1 cp p``."""
        return self.m1 * self.cp * self.p

    @property
    def job_devices(self) -> Expr:
        """Devices of the job: ``m1 cp p d``."""
        return self.m1 * self.cp * self.p * self.d

    @property
    def training(self) -> Training:
        """The prefill's forward as a ``Training`` sees it: ``b`` prompts of ``l_in`` tokens under
        ``m1`` and ``cp`` (``models.stack`` builds one CP rank's blocks from it)."""
        return Training(b=self.b, l=self.l_in, m1=self.m1, flash=self.flash, mtp=False, cp=self.cp,
                        cp_variant=self.cp_variant)


def prompt_tokens(arch: Architecture, s: Serving) -> Expr:
    """``P``: decoder tokens the prefill feeds, ``l_in`` (an encoder-decoder: its start token, 1)."""
    return sympify(1) if arch.encoder_decoder else s.l_in


def encoder_tokens(arch: Architecture, s: Serving) -> Expr:
    """Tokens of the encoder output cross-attention reads: ``l_in`` (0 without an encoder)."""
    return s.l_in if arch.encoder_decoder else sympify(0)


def cached_before(arch: Architecture, s: Serving, step) -> Expr:
    """Decoder tokens in the cache before decode step ``step`` (1 to ``l_out - 1``): ``P + step - 1``."""
    return prompt_tokens(arch, s) + sympify(step) - 1


def final_tokens(arch: Architecture, s: Serving) -> Expr:
    """Decoder tokens in the cache when generation ends: ``P + l_out - 1``."""
    return prompt_tokens(arch, s) + s.l_out - 1


def mean_context(arch: Architecture, s: Serving) -> Expr:
    """The mean of ``cached_before`` over the ``l_out - 1`` decode steps: ``P + (l_out - 2)/2``."""
    return prompt_tokens(arch, s) + (s.l_out - 2) / sympify(2)


def check_context(arch: Architecture, s: Serving) -> None:
    """Refuse what training refuses too (``models.training.check_context``, ``kv_cache.stages_rule``):
    more tokens than the model's context (unless ``allow_long``): ``l_in + l_out - 1`` through a
    decoder (and ``l_in`` alone, which a symbolic ``l_out`` leaves to be checked), ``l_in`` through
    an encoder and ``l_out`` through its decoder; pipeline stages that do not hold whole layers
    (``stages_rule``)."""
    instance(arch, Architecture, "arch", MADE_BY)
    instance(s, Serving, "serving", SERVING_MADE_BY)
    if arch.encoder_decoder:
        spans = (("l_in", s.l_in), ("l_out", s.l_out))
    else:       # l_in alone first: the prompt may be past the context whatever l_out is
        spans = (("l_in", s.l_in), ("l_in + l_out - 1", s.l_in + s.l_out - 1))
    for span in spans:      # each span names the length it grows with: l_in + l_out - 1 is l_out's to cut
        shared_context_rule(arch, (span,), s.allow_long, argument="l_out" if "l_out" in span[0] else "l_in")
    stages_rule(arch, s.p)


def check_decode_context(arch: Architecture, s: Serving, l_ctx) -> None:
    """Refuse a decode step over ``l_ctx`` cached tokens whose token, the ``l_ctx + 1``-th, lies
    beyond the model's context (unless ``allow_long``), as ``check_context`` refuses a generation,
    and one over fewer tokens than the prompt (``l_in``): a decode step follows the whole prompt."""
    shared_context_rule(arch, (("l_ctx + 1", sympify(l_ctx) + 1),), s.allow_long)
    short = sympify(l_ctx) - sympify(s.l_in)
    if short.is_number and short < 0:
        raise InputError(f"l_ctx={l_ctx} is fewer cached tokens than the prompt's l_in={s.l_in}: a decode step runs "
                         f"over the whole prompt at least", "l_ctx")


def check_context_parallel(arch: Architecture, s: Serving) -> None:
    """Refuse a prefill under ``cp`` that training's context parallelism does not model or cannot
    split (``models.training.check_context_parallel``: latent attention, windows, an
    encoder-decoder; ``l_in`` in ``2 cp`` chunks, ...), routed experts (training folds them onto
    the CP ranks as Megatron-Core does; a serving engine's layout of them under CP is not
    modelled), and ring or all-gather without ``flash``."""
    if s.cp == 1:
        return
    if arch.moe is not None:
        raise InputError(f"cp={s.cp} (context parallelism of the prefill) with the routed experts of {arch.name} is "
                         "not modelled in serving; use cp=1", "cp")
    shared_context_parallel(arch, s.training)
    if s.cp_variant != "ulysses" and not s.flash:
        raise InputError(f"{s.cp_variant} context parallelism runs a fused (flash) attention kernel per step "
                         f"(Transformer Engine); set flash=True (--flash)", "flash")


def check_experts(arch: Architecture, s: Serving) -> None:
    """Refuse expert parallelism without experts, and, under tensor parallelism, an expert grid
    other than the tensor group: the ``m1`` ranks share their tokens (one decoded token has no
    sequence shards), so their experts are split ``ep etp = m1`` ways among them."""
    if arch.moe is None and (s.ep != 1 or s.etp not in (None, 1)):
        raise InputError(f"ep and etp split experts, and {arch.name} has none (got ep={s.ep}, etp={s.etp})", "ep")
    if arch.moe is not None and s.m1 != 1:
        check_tensor_group_grid(s.ep, s.expert_tensor, s.m1, f" for {arch.name} under tensor parallelism")


def check_generative(arch: Architecture) -> None:
    """Refuse a model that does not generate: a bidirectional encoder, or one without an LM head."""
    check_decoder(arch)
    if not arch.lm_head or arch.task:
        raise InputError(f"{arch.name} has no language-model head (task {arch.task or 'base model'!r}): "
                         f"inference generates tokens with one", "arch")
