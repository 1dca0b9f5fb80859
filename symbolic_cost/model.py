"""Whole models: parameters, FLOPs, memory by category and communication per iteration.

A model is an ``Architecture`` (what the network is) trained under a
``Training`` setup (batch, sequence, precision, optimizer sharding,
recomputation and the degrees ``m1, s1, d, p``).  ``model_cost`` composes the
embedding, ``n_layers`` transformer layers and the head from ``blocks`` and
returns every total as an expression.

Memory categories per device (bytes):

================ ===============================================================
weights          parameters on the device x bytes per weight (ZeRO-3: / d)
gradients        parameters x bytes per gradient (ZeRO-2, 3: / d)
optimizer        parameters x optimizer bytes (ZeRO-1, 2, 3 and Megatron's
                 distributed optimizer: / d)
activations      what the busiest stage keeps for backward: micro-batches in
                 flight (``p`` under 1F1B) x its layers' kept activations
================ ===============================================================

Bytes per parameter (weights, gradients, optimizer) by ``mixed_precision``:

============ ====== ============================ =================================
precision    fp32   fp16 / bf16, ``"zero"``      ``"megatron"``
============ ====== ============================ =================================
bytes        4,4,8  2, 2, 12 (Rajbhandari et al. fp16: 2, 2, 16 (fp32 main grads
                    2020: fp32 master + 2 Adam   inside the optimizer); bf16: 2,
                    moments)                     4, 12 (grads accumulate in fp32)
============ ====== ============================ =================================
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sympy import Eq, Expr, Integer, Max, Min, Piecewise, ceiling, sympify

from . import conventions as conv
from . import symbols as S
from .blocks import Block, embedding_block, head_block, transformer_layer
from .cost import Collective, exact, ring_share

PRECISIONS = ("fp32", "fp16", "bf16")
RECOMPUTE = ("none", "selective", "full")
CORE_ROWS = ("logits", "softmax", "dropout_softmax", "attend")
"""Rows selective recomputation drops (Korthikanti et al. 2022) and redoes in backward."""


@dataclass(frozen=True)
class Architecture:
    """A transformer: sizes and the choices that change its cost."""

    name: str
    n_layers: Expr
    e: Expr
    h: Expr
    f: Expr
    vocab: Expr
    kv_heads: Expr | None = None
    positions: Expr = 0          # rows of a learned position table (0: none, e.g. rotary)
    token_types: Expr = 0        # BERT segment embeddings
    mlp: str = "gelu"            # "gelu", "swiglu", "geglu"
    norm: str = "layer"          # "layer", "rms"
    rotary: bool = False
    tied: bool = True
    qkv_bias: bool = True
    bias: bool = True
    dropouts: bool = True
    causal: bool = True
    embedding_norm: bool = False
    final_norm: bool = True
    lm_head: bool = True         # LM head and loss; False for an encoder's base model
    pooler: bool = False
    vocab_multiple: int = 1      # Megatron pads the vocabulary to a multiple of this x m1
    context: Expr = 0            # the context length the model was trained for (0: not stated)

    def __post_init__(self):
        for name, allowed in (("mlp", ("gelu", "swiglu", "geglu")), ("norm", ("layer", "rms"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"architecture {self.name}: {name} must be one of "
                                 f"{', '.join(allowed)}, got {getattr(self, name)!r}")

    def padded_vocab(self, m1=1) -> Expr:
        """Vocabulary rounded up to a multiple of ``vocab_multiple * m1`` (numbers only)."""
        vocab, unit = sympify(self.vocab), sympify(self.vocab_multiple) * sympify(m1)
        if vocab.is_number and unit.is_number:
            return ceiling(vocab / unit) * unit
        return vocab


@dataclass(frozen=True)
class Training:
    """How the model is trained: micro-batch ``b``, sequence ``l``, degrees, memory policy."""

    b: Expr = S.b
    l: Expr = S.l
    m1: Expr = 1
    s1: Expr = 1
    d: Expr = 1
    p: Expr = 1
    micro_batches: Expr = 1
    precision: str = "bf16"
    zero: int = 0
    distributed_optimizer: bool = False
    recompute: str = "none"
    flash: bool = False
    mask_bytes: Expr = 1         # dropout-mask element (CUDA keeps bytes; PyTorch's CPU path, floats)

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"zero must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")


def element_bytes(precision: str) -> int:
    """Bytes of one activation (and weight) element: 4 in fp32, 2 in fp16 or bf16."""
    return 4 if precision == "fp32" else 2


def bytes_per_parameter(precision: str, conventions=conv.DEFAULT) -> tuple[int, int, int]:
    """(weights, gradients, optimizer) bytes per parameter; see the module docstring."""
    if precision == "fp32":
        return 4, 4, 8
    if conv.get(conventions).mixed_precision == "megatron":
        return (2, 2, 16) if precision == "fp16" else (2, 4, 12)
    return 2, 2, 12


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


def _blocks(arch: Architecture, t: Training, m1, s1, es, conventions):
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


def _per_stage(p, first, last, layers, last_copy=0):
    """A field on the busiest pipeline stage: everything when ``p = 1``; otherwise the
    layers of one stage plus the larger of the first stage's and the last stage's ends
    (``last_copy``: what the last stage holds only when it is not the first, such as
    its copy of a tied embedding)."""
    p = sympify(p)
    one = first + last + layers
    if p == 1:
        return one
    many = Max(first, last + last_copy) + layers / p
    return many if p.is_number else Piecewise((one, Eq(p, 1)), (many, True))


def _kept(layer: Block, recompute: str, tokens_bytes) -> Expr:
    """Activation bytes one layer keeps for backward under a recomputation policy."""
    if recompute == "full":
        return tokens_bytes                                    # only the layer's input
    kept = layer.total("act_buffer")
    if recompute == "selective" and any(r.name in CORE_ROWS for r in layer):
        core = sum(layer[r].act_buffer for r in CORE_ROWS if r in layer.names)
        kept = kept - core + layer["qkv_proj"].act_out         # keep Q, K, V to redo the core
    return kept


def _recompute_flops(layer: Block, recompute: str) -> Expr:
    if recompute == "full":
        return layer.total("flops_fwd")
    if recompute == "selective":
        return sum((layer[r].flops_fwd for r in CORE_ROWS if r in layer.names), Integer(0))
    return Integer(0)


def model_cost(arch: Architecture, training: Training = Training(), conventions=conv.DEFAULT) -> ModelCost:
    """Whole-model totals per iteration (``micro_batches`` micro-batches of ``b`` sequences
    on each of ``d`` replicas).

    >>> from symbolic_cost.hf import preset
    >>> cost = model_cost(preset("gpt2"), Training(b=8, l=1024))
    >>> cost.parameters
    124439808
    """
    conventions = conv.get(conventions)
    t = training
    m1, s1, d, p, n = (exact(x, name) for x, name in ((t.m1, "m1"), (t.s1, "s1"), (t.d, "d"), (t.p, "p"),
                                                      (t.micro_batches, "micro_batches")))
    es_w, es_g, es_o = bytes_per_parameter(t.precision, conventions)
    es = element_bytes(t.precision)
    start, layer, end = _blocks(arch, t, m1, s1, es, conventions)
    depth = exact(arch.n_layers, "n_layers")
    params = lambda blk: blk.total("weights") / es  # noqa: E731  (weights in elements)
    whole = _blocks(arch, t, 1, 1, 1, conventions)        # 1-byte elements: weights = parameters
    parameters = whole[0].total("weights") + depth * whole[1].total("weights") + whole[2].total("weights")
    # the last stage keeps its own copy of a tied word embedding when p > 1
    tied_copy = start["word_embeddings"].weights / es if arch.tied and arch.lm_head else 0
    per_device = _per_stage(p, params(start), params(end), depth * params(layer), tied_copy)
    stage = lambda field: _per_stage(p, start.total(field), end.total(field), depth * layer.total(field))  # noqa: E731
    recompute = _recompute_flops(layer, t.recompute) * depth / p * n
    tokens_bytes = t.b * t.l / s1 * arch.e * es
    kept = _kept(layer, t.recompute, tokens_bytes)
    in_flight = Min(p, n)          # 1F1B: the first stage holds up to p micro-batches
    activations = in_flight * (depth / p * kept + start.total("act_buffer")) + end.total("act_buffer")
    zero_shard = lambda stage_: d if (t.zero >= stage_) else 1  # noqa: E731
    one = _blocks(arch, t, 1, 1, es, conventions)     # the model on one device: its own FLOPs
    model = lambda f: n * d * (one[0].total(f) + depth * one[1].total(f) + one[2].total(f))  # noqa: E731
    cost = ModelCost(
        architecture=arch, training=t, embedding=start, layer=layer, head=end,
        parameters=parameters, parameters_per_device=per_device,
        flops_fwd=n * stage("flops_fwd"), flops_bwd=n * stage("flops_bwd"), flops_recompute=recompute,
        model_flops_fwd=model("flops_fwd"), model_flops_bwd=model("flops_bwd"),
        weight_bytes=per_device * es_w / zero_shard(3),
        gradient_bytes=per_device * es_g / zero_shard(2),
        optimizer_bytes=per_device * es_o / (d if (t.zero >= 1 or t.distributed_optimizer) else 1),
        activation_bytes=activations,
        bubble=(p - 1) / (n + p - 1))
    return replace(cost, collectives=tuple(_collectives(cost, depth, p, d, n, s1, es, es_w, es_g, conventions)))


def _collectives(cost: ModelCost, depth, p, d, n, s1, es, es_w, es_g, conventions):
    """Every collective of one iteration on the busiest device, with its dimension."""
    t = cost.training
    out = []
    for blk, times in ((cost.layer, depth / p), (cost.embedding, 1), (cost.head, 1)):
        for c in blk.collectives:
            repeat = times * n * (2 if (t.recompute == "full" and blk is cost.layer and c.pass_ == "fwd") else 1)
            out.append(("tensor", replace(c, repeats=c.repeats * repeat, volume=c.volume * repeat)))
    if p != 1:
        boundary = t.b * t.l / s1 * cost.architecture.e
        sends = n * Min(p - 1, 1)          # none when one stage (p may be a symbol)
        for pass_ in ("fwd", "bwd"):
            # neighbouring stages are m1 d ranks apart
            out.append(("pipeline", Collective("p2p", boundary, es, 2, pass_, volume=sends * boundary * es,
                                               repeats=sends, stride=exact(t.m1, "m1") * d)))
    if d != 1:
        params = cost.parameters_per_device
        sharded = t.zero >= 1 or t.distributed_optimizer
        def dp(kind, nbytes, pass_, repeats=1):
            volume = repeats * ring_share(kind, d) * params * nbytes
            if conventions.collective_volume == "tensor":
                volume = repeats * params * nbytes
            # data-parallel members are m1 ranks apart
            return ("data", Collective(kind, params, nbytes, d, pass_, volume=volume, repeats=repeats,
                                       stride=exact(t.m1, "m1")))
        if not sharded:
            out.append(dp("allreduce", es_g, "bwd"))          # DDP: once per step
            return out
        # ZeRO-2/3 keep only a gradient shard, so they reduce-scatter every micro-batch
        out.append(dp("reducescatter", es_g, "bwd", repeats=n if t.zero >= 2 else 1))
        if t.zero == 3:                                      # parameters gathered on use
            out.append(dp("allgather", es_w, "fwd", repeats=n))
            out.append(dp("allgather", es_w, "bwd", repeats=n))
        else:                                                # updated shards gathered after the step
            out.append(dp("allgather", es_w, "bwd"))
    return out


def stage_parameters(arch: Architecture, p: int, stage: int, m1=1, conventions=conv.DEFAULT) -> Expr:
    """Parameters on one device of pipeline stage ``stage`` (0-based) of ``p``: its
    ``n_layers/p`` layers, the embedding on the first stage, the head on the last
    (with its own copy of a tied embedding when the two stages differ)."""
    if not 0 <= stage < p:
        raise ValueError(f"stage must be in [0, {p}), got {stage}")
    start, layer, end = _blocks(arch, Training(), m1, 1, 1, conventions)
    total = exact(arch.n_layers, "n_layers") / p * layer.total("weights")
    if stage == 0:
        total += start.total("weights")
    if stage == p - 1:
        total += end.total("weights")
        if p > 1 and arch.tied and arch.lm_head:
            total += start["word_embeddings"].weights
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


def step_time_breakdown(cost: ModelCost, system, conventions=conv.DEFAULT) -> dict[str, Expr]:
    """Seconds per iteration on the busiest device, by part (1F1B pipeline, equal stages):

    * ``compute``: micro-batches x the stage's roofline times (forward, backward, recompute);
    * ``tensor_comm``: micro-batches x the stage's tensor/sequence collectives;
    * ``bubble``: ``(p - 1)`` more micro-batch slots of the stage, idle or warming up;
    * ``pipeline_comm``: the stage's p2p sends; ``data_comm``: the gradient and
      parameter collectives of data parallelism (not overlapped);
    * ``total``: their sum.
    """
    from .hardware import comm_time, get_system, times
    system, conventions = get_system(system), conv.get(conventions)
    t = cost.training
    p, n = exact(t.p, "p"), exact(t.micro_batches, "micro_batches")
    depth = exact(cost.architecture.n_layers, "n_layers")

    def parts(blk, rows=None):
        rows = [blk[r] for r in rows] if rows is not None else list(blk)
        compute = sum((times(r, system, conventions)[k] for r in rows for k in ("t_fwd", "t_bwd")), Integer(0))
        comm = sum((times(r, system, conventions)[k] for r in rows for k in ("t_comm_fwd", "t_comm_bwd")),
                   Integer(0))
        return compute, comm

    (s_comp, s_comm), (l_comp, l_comm), (e_comp, e_comm) = parts(cost.embedding), parts(cost.layer), parts(cost.head)
    recompute_rows = {"full": cost.layer.names, "selective": [r for r in CORE_ROWS if r in cost.layer.names]}
    redo = sum((times(cost.layer[r], system, conventions)["t_fwd"] for r in recompute_rows.get(t.recompute, [])),
               Integer(0))
    compute = _per_stage(p, s_comp, e_comp, depth * (l_comp + redo))
    tensor = _per_stage(p, s_comm, e_comm, depth * l_comm)
    per_micro = compute + tensor
    by_dim = lambda dim: sum((comm_time(c, system, conventions) for d_, c in cost.collectives if d_ == dim),  # noqa: E731
                             Integer(0))
    out = {"compute": n * compute, "tensor_comm": n * tensor, "bubble": (p - 1) * per_micro,
           "pipeline_comm": by_dim("pipeline"), "data_comm": by_dim("data")}
    out["total"] = sum(out.values(), Integer(0))
    return out
