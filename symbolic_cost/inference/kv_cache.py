"""The KV cache as expressions: what each attention layer keeps per token, per sequence and for
the batch; the formats its elements are stored in; paged allocation in blocks of ``B`` tokens.

Per layer, a cache holds a key of ``k`` and a value of ``v`` elements for each of its ``kv``
key/value heads and each token it keeps (``kv = h`` multi-head, ``1 < kv < h`` grouped-query,
``kv = 1`` multi-query attention; ``kv/m1`` heads on each of ``m1`` tensor-parallel devices):

========== =========================== ==================================================
layers     tokens kept per sequence    source
========== =========================== ==================================================
full       ``T``, every token so far   transformers' ``DynamicLayer``
sliding    ``min(T, w - 1)``           the next query attends ``w`` keys, itself included:
                                       ``DynamicSlidingWindowLayer`` keeps ``w - 1``
cross      ``l_enc``, the encoder's    the decoder's cross-attention (T5), computed once
           output                      at the first decoder step
latent     ``T``                       multi-head latent attention (DeepSeek-V2, V3): the
                                       latent and the rotary key, ``r_kv + d_r`` elements a
                                       token, the same on every tensor-parallel device
========== =========================== ==================================================

Multi-head latent attention (``mla``, ``MLA_FORMS``) caches its compressed latent, decoding in
the absorbed form (``"absorbed"``: DeepSeek's inference, vLLM, SGLang) or up-projecting every
cached latent again at each step (``"recompute"``: transformers 5.23); or it caches the
decompressed keys and values of every head (``"decompressed"``: ``h/m1`` heads of keys of
``d_n + d_r`` and values of ``d_v`` elements).

Bytes of ``n`` elements in ``tensors`` cache tensors (a K or a V of one layer each) in a format
(``KVFormat``): ``n bits/8 + (n/g) s_g + tensors s_t``, with a scale of ``s_g`` bytes per group
of ``g`` elements and ``s_t`` bytes per tensor.  Paged allocation rounds every sequence's
tokens of every layer up to whole pages: ``ceil(T/B) B`` tokens (vLLM's PagedAttention, Kwon
et al. 2023); the difference is the waste.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, Integer, ceiling, sympify

from symbolic_cost.blocks.latent_attention import latent_cache_elements
from symbolic_cost.checks import PIPELINE_RULES, InputError, check_rules, counts, instance, positive_dims
from symbolic_cost.cost import exact
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.models.architecture import MADE_BY, Architecture
from symbolic_cost.parallel.splits import engine_stages, uneven_stages


@dataclass(frozen=True)
class KVFormat:
    """How cache elements are stored: ``bits`` each, plus ``group_bytes`` of scale (and zero
    point) per ``group`` elements (0: no groups) and ``tensor_bytes`` per cache tensor."""

    name: str
    bits: Expr
    group: Expr = 0
    group_bytes: Expr = 0
    tensor_bytes: Expr = 0

    def __post_init__(self):
        for name in ("bits", "group", "group_bytes", "tensor_bytes"):
            value = exact(getattr(self, name), name)
            if value.is_negative or (name == "bits" and value.is_zero):
                raise InputError(f"KV format {self.name}: {name} must be positive, got {value}", name)
            object.__setattr__(self, name, value)
        if (self.group == 0) != (self.group_bytes == 0):
            raise InputError(f"KV format {self.name}: group and group_bytes go together, got "
                             f"group={self.group}, group_bytes={self.group_bytes}", "group")

    @property
    def element_bytes(self) -> Expr:
        """Bytes per element, its share of the group scales included: ``bits/8 + s_g/g``."""
        return self.bits / 8 + (self.group_bytes / self.group if self.group != 0 else 0)

    def bytes(self, elements, tensors=0) -> Expr:
        """``elements`` stored in ``tensors`` cache tensors: ``n bits/8 + (n/g) s_g + tensors s_t``."""
        return exact(elements, "elements") * self.element_bytes + exact(tensors, "tensors") * self.tensor_bytes


KV_FORMATS = {
    "fp32": KVFormat("fp32", 32),
    "bf16": KVFormat("bf16", 16),
    "fp16": KVFormat("fp16", 16),
    # e4m3 with one fp32 scale per K or V tensor of a layer (transformers' QuantizedCache("fp8"),
    # vLLM's k_scale and v_scale)
    "fp8": KVFormat("fp8", 8, tensor_bytes=4),
    # one fp32 scale per tensor, as fp8 (TensorRT-LLM's int8 KV cache)
    "int8": KVFormat("int8", 8, tensor_bytes=4),
    # groups of 64 elements with an fp16 scale and an fp16 zero point (KIVI, Liu et al. 2024;
    # transformers' QuantizedCache q_group_size=64; its residual of recent unquantised tokens
    # is not counted)
    "int4": KVFormat("int4", 4, group=64, group_bytes=4),
}
"""The named KV-cache formats (``--kv-dtype``)."""


def kv_format(fmt) -> KVFormat:
    """A format by name (``KV_FORMATS``); a ``KVFormat`` passes through.

    >>> kv_format("int4").element_bytes
    9/16
    >>> kv_format("fp4")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: kv_dtype must be one of fp32, bf16, fp16, fp8, int8, int4 (or a KVFormat), got 'fp4'
    """
    if isinstance(fmt, KVFormat):
        return fmt
    if not isinstance(fmt, str) or fmt not in KV_FORMATS:
        raise InputError(f"kv_dtype must be one of {', '.join(KV_FORMATS)} (or a KVFormat), got {fmt!r}", "kv_dtype")
    return KV_FORMATS[fmt]


KINDS = ("full", "sliding", "cross", "latent")
MLA_FORMS = ("absorbed", "recompute", "decompressed")


@dataclass(frozen=True)
class CacheGroup:
    """``layers`` attention layers that cache alike (``kind``, one of ``KINDS``), each holding
    ``heads`` key/value heads (on one device) with keys of ``k_dim`` and values of ``v_dim``
    elements per token; ``window`` for sliding layers."""

    kind: str
    layers: Expr
    heads: Expr
    k_dim: Expr
    v_dim: Expr
    window: Expr | None = None

    @property
    def per_token(self) -> Expr:
        """Elements one token adds to one layer: ``kv (k + v)``."""
        return self.heads * (self.k_dim + self.v_dim)

    @property
    def tensors(self) -> Expr:
        """Cache tensors a layer keeps (each with its own per-tensor scale): K and V, or one latent."""
        return self.layers * (1 if self.kind == "latent" else 2)

    def held(self, tokens, encoder) -> Expr:
        """Tokens one sequence keeps in one layer: ``T`` (full, latent), ``min(T, w - 1)`` or ``l_enc``."""
        if self.kind == "cross":
            return exact(encoder, "encoder tokens")
        if self.kind == "sliding":
            return minimum(exact(tokens, "tokens"), self.window - 1)
        return exact(tokens, "tokens")


def check_decoder(arch: Architecture) -> None:
    """Refuse a bidirectional encoder: it generates nothing and keeps no KV cache (the one home
    of this refusal: ``inference.serving.check_generative`` too); anything but an ``Architecture``
    is refused by type, as every serving entry point reaches here first."""
    instance(arch, Architecture, "arch", MADE_BY)
    if not (arch.causal or arch.encoder_decoder):
        raise InputError(f"{arch.name} is a bidirectional encoder: it generates nothing, has no decode phase "
                         f"and keeps no KV cache", "arch")


def cache_groups(arch: Architecture, m1=1, mla="absorbed") -> tuple[CacheGroup, ...]:
    """The cached attention layers of ``arch`` with ``kv/m1`` heads on each device: a
    decoder's full and sliding-window layers, or an encoder-decoder's decoder self-attention
    and cross-attention layers (its encoder caches nothing); multi-head latent attention's
    latent (or, ``mla="decompressed"``, its keys and values per head).

    >>> from symbolic_cost.models.config import preset
    >>> [(g.kind, g.layers, g.per_token) for g in cache_groups(preset("llama-2-7b"))]
    [('full', 32, 8192)]
    """
    check_decoder(arch)
    m1 = positive_dims(m1=m1)["m1"]          # every reader of the cache's heads divides by it
    if mla not in MLA_FORMS:
        raise InputError(f"mla must be one of {', '.join(MLA_FORMS)}, got {mla!r}", "mla")
    if arch.latent is not None:
        return (_latent_group(arch, m1, mla),)
    heads = kv_heads_per_device(arch.kv, m1)
    k_dim, v_dim = exact(arch.head_size, "head_dim"), exact(arch.value_size, "v_head_dim")
    shape = dict(heads=heads, k_dim=k_dim, v_dim=v_dim)
    if arch.encoder_decoder:
        depth = exact(arch.decoder_layers, "decoder_layers")
        return CacheGroup("full", depth, **shape), CacheGroup("cross", depth, **shape)
    depth = exact(arch.n_layers, "n_layers")
    if arch.window is None:
        return (CacheGroup("full", depth, **shape),)
    # a chunked layer (Llama 4) caches as a sliding one of the chunk's size: transformers keeps
    # its last c - 1 tokens, and a decode step reads them and its own
    sliding = depth if arch.windowed_layers is None else exact(arch.windowed_layers, "windowed_layers")
    groups = (CacheGroup("sliding", sliding, window=exact(arch.window, "window"), **shape),)
    return groups + ((CacheGroup("full", depth - sliding, **shape),) if depth != sliding else ())


def kv_heads_per_device(kv, m1) -> Expr:
    """Key/value heads one of ``m1`` tensor ranks serves: ``kv/m1``, or where ``m1`` is a multiple
    of ``kv`` one head, each copied on ``m1/kv`` ranks, as the serving engines split the key/value
    projection (vLLM's ``QKVParallelLinear``: ``num_kv_head_replicas``; TensorRT-LLM and SGLang
    alike).  Anything else is refused (``m1`` must divide ``kv_heads``).

    >>> kv_heads_per_device(8, 4), kv_heads_per_device(8, 16), kv_heads_per_device(1, 8)
    (2, 1, 1)
    """
    kv, m1 = positive_dims(kv_heads=exact(kv, "kv_heads"), m1=exact(m1, "m1")).values()
    if replicates_kv(kv, m1):
        return Integer(1)
    if kv.is_Integer and m1.is_Integer and m1 > kv:
        raise InputError(f"m1={m1} tensor ranks past kv_heads={kv} key/value heads must be a multiple of them (the "
                         f"engines copy each head on m1/kv_heads ranks); below them m1 must divide kv_heads", "m1")
    check_rules(dict(m1=m1, kv_heads=kv), (("m1", "kv_heads"),))
    return kv / m1


def replicates_kv(kv, m1) -> bool:
    """Whether ``m1`` tensor ranks copy the ``kv`` key/value heads (``kv_heads_per_device``)."""
    kv, m1 = sympify(kv), sympify(m1)
    return bool(kv.is_Integer and m1.is_Integer and m1 > kv and m1 % kv == 0)


def replicated_kv(arch: Architecture, m1) -> Architecture:
    """``arch`` as one of ``m1`` serving ranks sees it where they copy its key/value heads
    (``replicates_kv``): ``m1`` heads, one a rank (the copies' weights, cache and products are each
    rank's own); else ``arch``."""
    h = sympify(arch.h)
    if arch.latent is not None or not replicates_kv(arch.kv, m1) or not (h.is_Integer and h % sympify(m1) == 0):
        return arch     # with m1 not dividing the query heads, their own rule refuses it, naming m1 and h
    return replace(arch, kv_heads=sympify(m1))


def _latent_group(arch: Architecture, m1, mla) -> CacheGroup:
    """Every layer of multi-head latent attention: ``r_kv + d_r`` elements a token on every
    device (``blocks.latent_attention.latent_cache_elements``), or decompressed, ``h/m1`` heads of
    keys of ``d_n + d_r`` and values of ``d_v``."""
    depth, latent = exact(arch.n_layers, "n_layers"), arch.latent
    if mla != "decompressed":
        return CacheGroup("latent", depth, Integer(1), latent_cache_elements(latent), Integer(0))
    return CacheGroup("full", depth, exact(arch.h, "h") / exact(m1, "m1"), latent.qk_dim, exact(latent.v_dim, "v_dim"))


def paged(tokens, page) -> Expr:
    """Tokens a sequence's pages hold: ``ceil(T/B) B`` (``page=None``: exactly ``T``)."""
    if page is None:
        return exact(tokens, "tokens")
    page = positive_dims(page=page)["page"]
    return ceiling(exact(tokens, "tokens") / page) * page


def kv_elements(groups, b, tokens, encoder=0, page=None, p=1) -> Expr:
    """Elements the batch keeps on one device: ``b sum_layers paged(held) kv (k + v) / p``
    (a pipeline stage holds ``1/p`` of the layers)."""
    b, p = exact(b, "b"), exact(p, "p")
    return sum((b * g.layers / p * paged(g.held(tokens, encoder), page) * g.per_token for g in groups),
               Integer(0))


def kv_cache_bytes(arch: Architecture, b, tokens, *, encoder=0, m1=1, p=1, kv_dtype="bf16", page=None,
                   mla="absorbed") -> Expr:
    """Bytes of the KV cache on one device: ``b`` sequences with ``tokens`` tokens each so far
    (and an encoder output of ``encoder`` tokens for cross-attention), ``kv/m1`` heads per
    layer, ``1/p`` of the layers, in format ``kv_dtype`` (``KV_FORMATS``), paged in ``page``
    tokens when given; the per-tensor scales: one K and one V per layer, one per latent
    (``mla``: ``cache_groups``).

    >>> from symbolic_cost.models.config import preset
    >>> from symbolic_cost.symbols import b, l_ctx
    >>> kv_cache_bytes(preset("llama-2-7b"), b, l_ctx)      # 2 x 32 layers x 4096 x 2 bytes
    524288*b*l_ctx
    """
    _check_cache(arch, b, tokens, encoder, m1, p, page)
    fmt = kv_format(kv_dtype)
    return on_busiest_stage(arch, cache_groups(arch, m1, mla), p, lambda groups, share: fmt.bytes(
        kv_elements(groups, b, tokens, encoder, page, share), sum((g.tensors for g in groups), Integer(0)) / share))


def _check_cache(arch: Architecture, b, tokens, encoder, m1, p, page) -> None:
    """What ``kv_cache_bytes`` and ``paging_waste`` take, checked as ``Serving`` checks it: positive
    sizes, whole layers on each of the ``p`` stages, and an encoder's tokens only where there is
    an encoder (cross-attention caches its output)."""
    instance(arch, Architecture, "arch", MADE_BY)
    positive_dims(b=b, m1=m1, p=p, **({} if page is None else {"page": page}))
    counts(tokens=tokens, encoder=encoder)
    stages_rule(arch, p)
    if not arch.encoder_decoder and exact(encoder, "encoder") != 0:
        raise InputError(f"encoder={encoder}: {arch.name} has no encoder, whose output a cross-attention would cache; "
                         f"it would be ignored", "encoder")


def stages_rule(arch: Architecture, p) -> None:
    """Pipeline stages of a served model hold whole layers: ``p`` divides them, or, with both
    numbers, at most as many stages as layers, split as an engine splits them
    (``parallel.splits.engine_stages``: vLLM's rule); a symbolic ``p`` must divide them."""
    depth = arch.depth
    if arch.decoder_layers or not (sympify(p).is_number and depth.is_number):
        check_rules(dict(p=p, n_layers=depth), PIPELINE_RULES)
    else:
        engine_stages(int(depth), int(p))           # any p up to the layers: a stage without one refused


def on_busiest_stage(arch: Architecture, groups, p, value) -> Expr:
    """``value(groups, p)``: one pipeline stage's ``1/p`` of every cache group; where the stages
    hold different numbers of windowed and global layers (``Architecture.window_pattern``, ``p`` a
    number) the largest ``value(stage_groups, 1)`` over the stages; where ``p`` does not divide the
    layers, the stages an engine makes (``parallel.splits.engine_stages``) and the largest of them."""
    p = exact(p, "p")
    pattern, kinds = arch.window_pattern, {g.kind for g in groups}
    depth = arch.depth
    uneven = uneven_stages(depth, p)
    if uneven is None and (pattern is None or not p.is_number or p == 1 or len(pattern) % int(p)
                           or kinds != {"sliding", "full"}):
        return value(groups, p)
    sizes = uneven or [int(depth) // int(p)] * int(p)
    if pattern is not None and kinds == {"sliding", "full"}:
        starts = [sum(sizes[:r]) for r in range(len(sizes))]
        stages = {(sum(pattern[a:a + n]), n) for a, n in zip(starts, sizes)}
        return maximum(*(value(tuple(replace(g, layers=Integer(w if g.kind == "sliding" else n - w)) for g in groups),
                               Integer(1)) for w, n in sorted(stages)))
    if any(g.layers != depth for g in groups):
        raise InputError(f"p={p} stages of unequal layers, over a cache of layers of several kinds without a "
                         f"per-layer pattern, are not modelled: a p dividing the {depth} layers", "p")
    return value(tuple(replace(g, layers=Integer(max(sizes))) for g in groups), Integer(1))


def kv_bytes_per_token(arch: Architecture, *, m1=1, kv_dtype="bf16", mla="absorbed") -> Expr:
    """Bytes one more token of one sequence adds to the cache while no window is full: every
    self-attention layer's ``kv (k + v)`` elements (cross-attention caches the encoder once).

    >>> from symbolic_cost.models.config import preset
    >>> kv_bytes_per_token(preset("llama-2-7b")) / 2**10       # 512 KiB per token in bf16
    512
    """
    groups = [g for g in cache_groups(arch, m1, mla) if g.kind != "cross"]
    return kv_format(kv_dtype).bytes(sum((g.layers * g.per_token for g in groups), Integer(0)))


def paging_waste(arch: Architecture, b, tokens, page, *, encoder=0, m1=1, p=1, kv_dtype="bf16",
                 mla="absorbed") -> Expr:
    """Bytes paged allocation adds to the cache: the unused tail of every sequence's last page
    in every layer, ``b sum_layers (ceil(T/B) B - T) kv (k + v)`` at the format's bytes."""
    _check_cache(arch, b, tokens, encoder, m1, p, page)
    fmt = kv_format(kv_dtype)
    return on_busiest_stage(arch, cache_groups(arch, m1, mla), p, lambda groups, share: fmt.bytes(
        kv_elements(groups, b, tokens, encoder, page, share) - kv_elements(groups, b, tokens, encoder, None, share)))


__all__ = ["KVFormat", "KV_FORMATS", "kv_format", "CacheGroup", "cache_groups", "paged", "kv_elements",
           "kv_cache_bytes", "kv_bytes_per_token", "paging_waste", "MLA_FORMS"]
