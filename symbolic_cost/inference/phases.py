"""Prefill and decode as the library's blocks, and each phase's totals on the latency path.

* **prefill**: the forward pass over the prompt, ``models.stack.model_stack`` at ``l = l_in``
  (an encoder-decoder: its encoder over ``l_in`` tokens, its decoder over the one start token
  with cross-attention over the ``l_in`` encoder tokens, whose keys and values it computes
  once), ending in the generation head;
* **decode**: one token per sequence, the blocks at ``l = 1`` with every self-attention over
  the ``l_ctx`` cached tokens and its own (``keys = l_ctx + 1``; a sliding window reads at most
  ``w``, ``ops.matmul.stored_keys``), cross-attention over the cached encoder output without
  its key/value projection, the cached keys and values read at the cache format's bytes;
  multi-head latent attention in the form ``Serving.mla`` names (``latent``: absorbed over the
  compressed cache by default).  A mixture of experts reads the routed experts its tokens reach (``experts``),
  in both phases.

The generation head: the final norm (and OPT's ``project_out``) on every token, then the LM
head on the last token of each sequence only (transformers' ``logits_to_keep=1``), no loss;
under ``m1`` the vocabulary shards of those logits are allgathered for sampling (Megatron-LM).
Inference runs in evaluation mode: every dropout is off.  A decode step's one query sits at
the newest position, so the causal mask keeps every cached key, and the cache holds only a
sliding window's keys: decode counts with ``causal_flops="full"`` and
``window_count="windowed"`` whatever the conventions say of the prefill.

A phase's totals add its blocks as they run one after another: with ``p`` pipeline stages that
is one device of each stage (each holding ``1/m1`` of every layer), plus the ``p - 1`` sends of
the hidden states between stages.  No backward, no optimizer.

Context parallelism (``Serving.cp``): the prefill runs on one rank of the CP group as training's
does (``models.stack`` with ``Serving.training``: ``l_in/cp`` tokens of each prompt through every
block, the attention core and its forward exchange from ``blocks.context``: ring sends, an
all-gather of K and V, or Ulysses' all-to-alls); the head's last token sits on one rank.  Each
rank caches the keys and values of its own tokens (``throughput.prefill_fields``).  Decode under
CP is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, Integer, Rational

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.blocks import Block, Experts
from symbolic_cost.cost import Collective, collective, exact
from symbolic_cost.extrema import maximum
from symbolic_cost.inference.kv_cache import replicated_kv
from symbolic_cost.inference.latent import decode_layers
from symbolic_cost.inference.experts import routed_reads, touched_share
from symbolic_cost.inference.weight_formats import quantized, weight_format
from symbolic_cost.inference.serving import (Serving, check_context, check_context_parallel, check_experts,
                                             check_generative, prompt_tokens)
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.stack import build_layer, layer_groups, layer_options, model_stack
from symbolic_cost.models.training import Training
from symbolic_cost.ops import embedding
from symbolic_cost.checks import InputError

CACHE_READS = {name: "act_in_other" for name in ("logits", "attend", "flash_attention")}
"""The rows that read the cache in a decode step, and the field holding the bytes they read: the
keys and values are the second input of the attention core (also as ``cross_*``)."""


def evaluation(arch: Architecture) -> Architecture:
    """``arch`` as it runs in inference: a generative model with every dropout off."""
    check_generative(arch)
    return replace(arch, dropouts=False, attention_dropout=False, embedding_dropout=False, activation_dropout=False)


@dataclass(frozen=True)
class Phase:
    """One phase (``"prefill"`` or ``"decode"``): its ``(block, count)`` groups in model order on
    the latency path, the ``tokens`` per sequence whose hidden states (``width`` wide) it carries
    (the prompt's ``l_in``, or the one new token), the pipeline sends, the rows that read the
    cache (``reads``: name and field) and the share of routed experts a step reads."""

    name: str
    stack: tuple
    serving: Serving
    tokens: Expr
    width: Expr
    sends: tuple[Collective, ...] = ()
    reads: tuple = ()
    expert_share: Expr = Integer(1)

    def total(self, field: str) -> Expr:
        """A ``Cost`` field summed over every block times its count (``flops_fwd``, ``mem_fwd``, ...)."""
        return sum((count * blk.total(field) for blk, count in self.stack), Integer(0))

    def rows(self):
        """``(row, count)`` for every row of the phase."""
        return [(row, count) for blk, count in self.stack for row in blk]

    @property
    def layer(self) -> Block:
        """The first transformer layer group's block (per-layer costs)."""
        return self.stack[1][0]

    @property
    def flops(self) -> Expr:
        return self.total("flops_fwd")

    @property
    def matrix_flops(self) -> Expr:
        """FLOPs on matrix units (the products, with their bias adds and reductions)."""
        return sum((n * r.flops_fwd for r, n in self.rows() if r.engine == "matrix"), Integer(0))

    @property
    def bytes_moved(self) -> Expr:
        """Bytes read and written: every row's ``mem_fwd`` (its inputs, output and weights)."""
        return self.total("mem_fwd")

    @property
    def weight_bytes_read(self) -> Expr:
        """The weights a step reads, each once: every row's ``weights_read``."""
        return sum((n * weights_read(r) for r, n in self.rows()), Integer(0))

    @property
    def cache_bytes_read(self) -> Expr:
        """Bytes of cached keys and values the phase reads (decode; 0 for the prefill)."""
        reads = dict(self.reads)
        return sum((n * getattr(r, reads[_base(r.name)]) for r, n in self.rows() if _base(r.name) in reads),
                   Integer(0))

    @property
    def working_bytes(self) -> Expr:
        """Activations alive at the peak: the hidden states ``b T e`` the layers pass on, and the
        largest input plus output of any one operation (what an eager run allocates at once)."""
        s = self.serving
        peak = maximum(*(r.act_in + r.act_out for r, _ in self.rows()))
        return s.b * self.tokens * self.width * s.es + peak

    @property
    def collectives(self) -> list[tuple[Collective, Expr]]:
        """``(collective, count)``: every forward collective of the blocks, then the sends."""
        out = [(c, count) for blk, count in self.stack for c in blk.collectives if c.pass_ == "fwd"]
        return out + [(c, Integer(1)) for c in self.sends]


def weights_read(row) -> Expr:
    """Bytes of weights one row reads in a forward pass: its ``mem_fwd`` less its activations
    (``cost.make_cost``: ``mem_fwd = act_in + act_in_other + act_out + weights``): all of a
    product's weights, the rows a lookup gathers (``ops.embedding``), the ``expert_share`` of
    the routed experts' (``experts.routed_reads``)."""
    return row.mem_fwd - row.act_in - row.act_in_other - row.act_out


def _base(name: str) -> str:
    """A row's name without the ``cross_`` of cross-attention."""
    return name.removeprefix("cross_")


def _stack(arch: Architecture, s: Serving, l, conventions, context=False) -> tuple:
    """The blocks over ``l`` tokens; ``context``: the prompt's on one rank of the CP group
    (``Serving.training``: ``l_in/cp`` tokens, the attention core of ``blocks.context``)."""
    t = s.training if context else Training(b=s.b, l=l, flash=s.flash, mtp=False)
    return model_stack(arch, t, s.m1, 1, s.es, conventions, ep=s.ep, etp=s.expert_tensor,
                       replicated=s.replicated_experts, kernels="fused")


def _routed(stack, arch: Architecture, s: Serving, tokens) -> dict:
    """The ``stack`` (and ``expert_share``) of a phase whose layer groups read the routed experts
    their ``ep b tokens`` tokens reach (``experts.routed_reads``; ``b tokens`` when the tensor
    ranks share their tokens); dense models as they are."""
    stack = _formatted(stack, s)
    if arch.moe is None:
        return dict(stack=tuple(stack))
    routed = (1 if s.replicated_experts else s.ep) * s.b * tokens
    return dict(stack=(stack[0], *((routed_reads(blk, arch.moe, routed), n) for blk, n in stack[1:-1]), stack[-1]),
                expert_share=touched_share(arch.moe, routed))


def _formatted(stack, s: Serving) -> tuple:
    """The layer groups with their weights in ``s.weights`` (``weight_formats.quantized``); the
    ends (word table, head) keep the precision."""
    fmt = weight_format(s.weights)
    if fmt is None:
        return tuple(stack)
    if fmt.rows is not None and not any(fmt.applies(row) for blk, _ in stack[1:-1] for row in blk.rows):
        raise InputError(f"weights {fmt.name!r} stores only the rows {', '.join(fmt.rows)}, which this model has "
                         f"none of: it would change nothing", "weights")
    return (stack[0], *((quantized(blk, fmt, s.es), n) for blk, n in stack[1:-1]), stack[-1])


def _head(prompt: Block, last: Block, s: Serving, vocab, conventions, tokens=1) -> Block:
    """The generation head: ``prompt``'s rows before the LM head (final norm, ``project_out``),
    then ``last``'s (the head at ``tokens`` tokens: one, or a verification's q) from the LM head on
    without the loss, the LM head allgathering the ``b x tokens x vocab`` logits over ``m1``."""
    rows = list(prompt.rows[:prompt.names.index("lm_head")])
    lm = [r for r in last.rows[last.names.index("lm_head"):] if r.name != "loss"]
    lm[0] = lm[0].plus(collectives=collective("allgather", s.b * tokens * vocab, s.es, s.m1, "fwd", conventions))
    return Block("head", tuple(rows + lm), prompt.dims, prompt.conventions)


def _sends(arch: Architecture, s: Serving, tokens, conventions) -> tuple[Collective, ...]:
    """The hidden states ``b T e`` cross ``p - 1`` stage boundaries, ``m1`` ranks apart, in turn
    (``Collective.chain``: each on the link its boundary crosses)."""
    return tuple(collective("p2p", s.b * tokens * arch.e, s.es, 2, "fwd", conventions, repeats=s.p - 1,
                            stride=s.m1, chain=True)) if s.p != 1 else ()


def _check(arch: Architecture, s: Serving) -> Architecture:
    """``arch`` as the phases build it: in evaluation (no dropout), its key/value heads copied
    where the tensor ranks outnumber them (``kv_cache.replicated_kv``), after the serving checks."""
    inference = evaluation(arch)
    check_context(arch, s)
    check_experts(arch, s)
    inference = replicated_kv(inference, s.m1)  # after the checks of the serving's type
    check_context_parallel(inference, s)        # the heads a rank holds, copies included
    if arch.encoder_decoder and s.p != 1:
        raise InputError("p: pipeline stages of an encoder-decoder are not modelled (use p=1)", "p")
    if arch.encoder_decoder and s.weights is not None:
        raise InputError("weights: quantised weights of an encoder-decoder are not modelled (decoder-only models)",
                         "weights")
    return inference


def prefill(arch: Architecture, s: Serving = Serving(), conventions=conv.DEFAULT) -> Phase:
    """The prefill of ``b`` prompts of ``l_in`` tokens (see the module docstring).

    >>> from symbolic_cost.models.config import preset
    >>> phase = prefill(preset("gpt2"), Serving(b=1, l_in=8, l_out=2))
    >>> phase.stack[-1][0].names
    ['final_layer_norm', 'lm_head']
    """
    conventions = conv.get(conventions)
    inference = _check(arch, s)
    vocab = arch.padded_vocab(s.m1)
    prompt, one = _stack(inference, s, s.l_in, conventions, context=True), _stack(inference, s, 1, conventions)
    head = (_head(prompt[-1][0], one[-1][0], s, vocab, conventions), Integer(1))
    if not arch.encoder_decoder:
        local = s.l_in / s.cp                   # a CP rank's share of each prompt
        return Phase("prefill", serving=s, tokens=local, width=arch.e, sends=_sends(arch, s, local, conventions),
                     **_routed(prompt[:-1] + (head,), arch, s, s.l_in))
    kw = dict(es=s.es, es_mask=1, conventions=conventions)
    options = layer_options(inference, Training(b=s.b, l=1, flash=s.flash), s.m1, 1, cross=s.l_in)
    decoder = build_layer(options, kw)
    stack = prompt[:3] + (one[3], (decoder, exact(arch.decoder_layers, "decoder_layers")), head)
    return Phase("prefill", stack, s, s.l_in, arch.e)


def decode(arch: Architecture, s: Serving = Serving(), l_ctx=S.l_ctx, conventions=conv.DEFAULT,
           tokens: int = 1) -> Phase:
    """One decode step: ``b`` sequences, one token each, over ``l_ctx`` cached tokens; with
    ``tokens`` = q > 1, a speculative decoder's verification (``inference.speculative``): q new
    tokens a sequence through every layer, each query over the ``l_ctx + q`` keys (the cache and
    the q new ones, counted whole: the mask's q(q-1)/2 hidden pairs sit in the kernel's one tile
    of queries), and the logits of all q positions.

    >>> from symbolic_cost.models.config import preset
    >>> step = decode(preset("llama-2-7b"), Serving(b=1, l_in=8, l_out=2), l_ctx=8)
    >>> step.layer["logits"].flops_fwd            # 32 heads x (1, 128) x (128, 9)
    73440
    >>> verify = decode(preset("llama-2-7b"), Serving(b=1, l_in=8, l_out=2), l_ctx=8, tokens=3)
    >>> verify.layer["logits"].flops_fwd          # 32 heads x (3, 128) x (128, 11): 32 x 3 x 11 x 255
    269280
    """
    conventions = conv.get(conventions)
    inference = _check(arch, s)
    tokens = exact(tokens, "tokens")
    if tokens != 1 and arch.encoder_decoder:
        raise InputError(f"a step of {tokens} tokens a sequence (speculative verification) is modelled for decoders; "
                         f"{arch.name} has an encoder", "tokens")
    if s.cp != 1:
        raise InputError(f"decode under context parallelism (cp={s.cp}, {s.cp_variant}) is not modelled: each CP "
                         f"rank holds 1/cp of the cache, and splitting one token's attention over them (pass-Q "
                         f"ring, partial-attention merges) is not counted; the prefill is (prefill, "
                         f"throughput.prefill_fields)", "cp")
    l_ctx = exact(l_ctx, "l_ctx")
    one = _stack(inference, s, tokens, conventions)
    head = (_head(one[-1][0], one[-1][0], s, arch.padded_vocab(s.m1), conventions, tokens), Integer(1))
    step = conventions.but(causal_flops="full", window_count="windowed")
    kw = dict(es=s.es, es_mask=1, conventions=step)
    t = Training(b=s.b, l=tokens, flash=s.flash)
    if not arch.encoder_decoder:
        experts = (Experts(s.ep, s.expert_tensor, replicated=s.replicated_experts, kernels="fused")
                   if arch.moe is not None else None)
        layers, reads = layer_groups(inference, t, s.m1, 1, kw, experts, attended=l_ctx + tokens), None
        if arch.latent is not None:
            layers, reads = decode_layers(layers, arch.latent, s.mla, l_ctx + tokens, flash=s.flash, es=s.es,
                                          conventions=step, tokens=tokens)
        reads = tuple((reads or CACHE_READS).items())
        stack = (one[0], *((_cached(blk, s, reads), count) for blk, count in layers), head)
        return Phase("decode", serving=s, tokens=Integer(tokens), width=arch.e,
                     sends=_sends(arch, s, tokens, conventions), reads=reads, **_routed(stack, arch, s, tokens))
    layer = build_layer(layer_options(inference, t, s.m1, 1, cross=s.l_in, keys=l_ctx + 1), kw)
    layer = replace(layer, rows=tuple(r for r in layer.rows if r.name != "cross_kv_proj"))
    start = _relative_lookups(one[3][0], arch, s, l_ctx + 1)
    reads = tuple(CACHE_READS.items())
    return Phase("decode", ((start, Integer(1)), (_cached(layer, s, reads), exact(arch.decoder_layers,
                                                                                   "decoder_layers")),
                            head), s, Integer(1), arch.e, (), reads)


def mean_decode(arch: Architecture, s: Serving = Serving(), conventions=conv.DEFAULT, tokens: int = 1) -> Phase:
    """The mean of the ``l_out - 1`` decode steps of a generation, over ``P`` to ``P + l_out - 2``
    cached tokens (``serving``): the first and the last step at half weight each (``mean_step``),
    which is the mean of every step for costs linear in the context (full attention; a sliding
    window that stays full or never fills).  With ``l_out = 1`` (no step): the step over ``P`` that
    would come next.  A symbolic ``l_out`` is taken to be at least 2.  ``tokens``: each step's new
    tokens a sequence (``decode``; a speculative verification's ``k + 1``)."""
    first = decode(arch, s, prompt_tokens(arch, s), conventions, tokens)
    if s.l_out == 1:
        return first
    return mean_step(first, decode(arch, s, prompt_tokens(arch, s) + s.l_out - 2, conventions, tokens))


def mean_step(first: Phase, last: Phase) -> Phase:
    """The mean of two steps of the same shape over different contexts: each block at half weight."""
    half = Rational(1, 2)
    return replace(first, stack=tuple((blk, count * half) for blk, count in first.stack + last.stack))


def _cached(block: Block, s: Serving, reads) -> Block:
    """The block with the cache read at its format's bytes per element: the field of ``reads``
    (and ``mem_fwd``) of the rows that read it scaled by ``es_kv / es``."""
    reads, scale = dict(reads), s.kv.element_bytes / s.es - 1

    def at_format(row):
        extra = getattr(row, reads[_base(row.name)]) * scale
        return row.plus(**{reads[_base(row.name)]: extra, "mem_fwd": extra})

    return replace(block, rows=tuple(at_format(r) if _base(r.name) in reads else r for r in block.rows))


def _relative_lookups(start: Block, arch: Architecture, s: Serving, keys) -> Block:
    """T5's decoder start with its relative-bias lookups for the one query against ``keys`` keys
    (``(1, keys)`` pairs; the training stack looks up ``l x l``)."""
    if "relative_attention_bias" not in start.names:
        return start
    rows = tuple(embedding(1, keys, arch.relative_buckets, exact(arch.h, "h") / s.m1, es=s.es,
                           conventions=start.conventions, name=r.name)
                 if r.name == "relative_attention_bias" else r for r in start.rows)
    return replace(start, rows=rows)
