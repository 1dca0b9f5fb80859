"""Context parallelism (CP) of one attention layer inside a whole model: the ``cp`` ranks of a
context-parallel group each hold ``l/cp`` tokens of every sequence for the whole layer (norms,
projections, MLP: the block's own ``l`` is that shard) and cooperate only in the attention core.

========== ================================================ ==========================================
variant    how the core sees the whole sequence             per layer and rank
========== ================================================ ==========================================
ring       K, V blocks passed point to point round the ring forward ``cp - 1`` sends of the local K, V;
           (Megatron-LM ``--context-parallel-size``,        backward ``2(cp - 1)`` (K, V again and
           Transformer Engine ``cp_comm_type="p2p"``)        their gradients dK, dV)
all-gather K, V of the whole sequence all-gathered          forward an allgather of K, V; backward
           (Llama 3, Dubey et al. 2024 section 3.3.2;       the allgather again and a reduce-scatter
           Transformer Engine ``cp_comm_type="all_gather"``) of dK, dV
ulysses    all-to-all trades the token split for a head     four all-to-alls (q, k, v, o) each way
           split (DeepSpeed-Ulysses, Jacobs et al. 2023)     (``ulysses_exchange``)
========== ================================================ ==========================================

Causal load balancing (ring, all-gather): the sequence is cut into ``2 cp`` chunks and rank ``i``
holds chunks ``i`` and ``2 cp - 1 - i`` (Megatron-LM ``get_batch_on_this_cp_rank``), so every rank
scores the same number of (query, key) pairs: ``(l/cp)(l + 1)/2`` unmasked ones.  The CP group's
ranks are ``m1`` apart (Megatron-LM's rank order tp, cp, dp, pp).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError, choice, settle
from symbolic_cost.cost import Collective, Cost, collective, exact, make_cost
from symbolic_cost.blocks.layout import attach
from symbolic_cost.ops import Keys, attention_core, flash_attention
from symbolic_cost.ops.matmul import Chunk, scored_keys

VARIANTS = ("ring", "all-gather", "ulysses")
"""The context-parallel variants ``Training.cp_variant`` names."""
CONTEXT_ROWS = ("context_attention", "context_exchange")
"""The rows that carry the CP collectives (reported under the ``"context"`` dimension)."""


@dataclass(frozen=True)
class Context:
    """A context-parallel group: ``cp`` ranks, one of ``VARIANTS``."""

    cp: Expr
    variant: str = "ring"

    def __post_init__(self):
        settle(self, "cp")
        exact(self.cp, "cp")
        choice(self.variant, "cp_variant", VARIANTS)


def ring_exchange(kv_elements, cp, es, conventions, stride=1) -> list[Collective]:
    """The ring's point-to-point traffic of one layer on one rank, ``kv_elements`` being its own
    K and V (``b (l/cp) kv (q + v)`` elements): forward ``cp - 1`` sends of them; backward
    ``2(cp - 1)`` K, V-sized messages.  Transformer Engine's ``AttnFuncWithCPAndKVP2P``
    (``transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py``): the
    forward loop sends ``p2p_comm_buffers[i]`` (``cat(k, v)``) at steps ``0 .. cp - 2``; the
    backward sends ``kv`` at step 0, ``[kv, dkv]`` at steps ``1 .. cp - 2`` and ``dkv`` at step
    ``cp - 1``: ``1 + 2(cp - 2) + 1``.  Liu et al. 2023's ring attention moves the same."""
    return (collective("p2p", kv_elements, es, cp, "fwd", conventions, repeats=cp - 1, stride=stride)
            + collective("p2p", 2 * kv_elements, es, cp, "bwd", conventions, repeats=cp - 1, stride=stride))


def gather_exchange(kv_elements, cp, es, conventions, stride=1) -> list[Collective]:
    """All-gather CP of one layer on one rank, ``kv_elements`` the K and V of the whole sequence
    (``b l kv (q + v)``): forward an allgather of them; backward the allgather again (only the
    local shard is kept) and a reduce-scatter of dK, dV.  Llama 3 (Dubey et al. 2024, section
    3.3.2: "we first all-gather the key (K) and value (V) tensors, and then compute attention
    output for the local query (Q) tensor chunk"); Transformer Engine's
    ``AttnFuncWithCPAndKVAllGather`` re-gathers in backward and reduce-scatters ``dk, dv``."""
    return [c for kind, pass_ in (("allgather", "fwd"), ("allgather", "bwd"), ("reducescatter", "bwd"))
            for c in collective(kind, kv_elements, es, cp, pass_, conventions, stride=stride)]


def ulysses_exchange(shards, cp, es, conventions, stride=1) -> tuple[list[Collective], list[Collective]]:
    """DeepSpeed-Ulysses' all-to-alls of one layer on one rank, ``shards`` the local elements of
    ``(q, k, v, o)`` (``b (l/cp) width``): ``(before, after)`` attention, each an all-to-all per
    tensor forward and its mirror backward (Jacobs et al. 2023, section 3.1; DeepSpeed's
    ``_SeqAllToAll``): the attention block's ``context_exchange`` row, which ``parallel.sequence.ulysses``
    and the whole model both build."""
    a2a = lambda n, pass_: collective("alltoall", n, es, cp, pass_, conventions, stride=stride)  # noqa: E731
    *qkv, out = shards
    before = [c for pass_ in ("fwd", "bwd") for n in qkv for c in a2a(n, pass_)]
    return before, a2a(out, "fwd") + a2a(out, "bwd")


def context_keys(l, cp, variant, causal, conventions) -> Expr:
    """Keys per query that one rank's kernel calls cover over the whole sequence of ``l``
    tokens, ring or all-gather, under the causal balance (rank ``i``: chunks ``i`` and
    ``2 cp - 1 - i`` of ``C = l/(2 cp)`` tokens).  Without a mask: ``l``.  With one and
    ``causal_flops="exact"``: the unmasked pairs, ``(l + 1)/2`` on every rank.  Under ``"full"``
    (each kernel call counted as its whole score tile, as the library counts a causal flash
    kernel): the ring's diagonal step scores ``2C x 2C`` and each of its ``cp - 1`` other steps
    ``2C x C`` (Transformer Engine: half the queries or half the keys), ``(cp + 1) l/(2 cp)``
    keys a query; all-gather scores chunk ``j`` against keys ``0 .. (j + 1) C``,
    ``(2 cp + 1) l/(4 cp)`` (a formula for ``cp >= 2``: one rank holds no CP)."""
    if not causal:
        return l
    if conv.get(conventions).causal_flops == "exact":
        return (l + 1) / 2
    return l * (cp + 1) / (2 * cp) if variant == "ring" else l * (2 * cp + 1) / (4 * cp)


RUNS_UNDER = {"latent attention": ("ring", "cp_comm_type p2p: \"MLA CP currently only support KV P2P\""),
              "a sliding window": ("all-gather", "ulysses", "cp_comm_type all_gather or a2a: no window with p2p"),
              "attention sinks": ("ulysses", "cp_comm_type a2a: a learnable softmax offset")}
"""The context-parallel variants Transformer Engine runs each of these attention features under
(the last item: its own terms), and no other: latent attention (query and value heads of
different sizes) passes the heads' K and V around the ring; a causal sliding window needs the
gathered or exchanged whole sequence; sinks (GPT-OSS) need every key of a head on one rank."""


def check_variant(variant: str, feature: str, model: str = "") -> None:
    """Refuse context parallelism ``variant`` for an attention ``feature`` of ``RUNS_UNDER`` that
    Transformer Engine does not run under it, naming the variants that run it.

    >>> check_variant("ring", "latent attention")
    >>> check_variant("ring", "a sliding window", "mistral")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: ring context parallelism with a sliding window (mistral): Transformer Engine runs it under all-gather or ulysses only (cp_comm_type all_gather or a2a: no window with p2p); set cp_variant (--cp-variant) to one of them
    """
    *variants, terms = RUNS_UNDER[feature]
    if variant not in variants:
        raise InputError(f"{variant} context parallelism with {feature}{f' ({model})' if model else ''}: Transformer "
                         f"Engine runs it under {' or '.join(variants)} only ({terms}); set cp_variant "
                         f"(--cp-variant) to {'it' if len(variants) == 1 else 'one of them'}", "cp_variant")


def check_attention(context, **unmodelled) -> None:
    """Refuse, under context parallelism, attention options the CP kernels are not modelled with
    (``unmodelled``: name -> value, refused when set)."""
    for name, value in unmodelled.items():
        if value not in (None, False):
            raise InputError(f"context parallelism (cp={context.cp}, {context.variant}) with {name} is not "
                             f"modelled", name)


def context_core(b, l, q, heads, keys: Keys, context: Context, *, flash, dropouts=True, es_mask=1, es=2,
                 conventions=conv.DEFAULT, stride=1) -> list[Cost]:
    """The attention core of one rank of a CP group of ``context.cp``, ``l`` being its own tokens
    (``l cp`` the sequence), with ``heads`` query heads of size ``q`` and ``keys`` (``ops.attention.Keys``)
    their ``kv_heads``, value size ``v_dim``, mask (``causal``) and sliding ``window`` (the keys'
    length follows from the variant; score rows are refused before: ``check_attention``).

    * ring / all-gather: one fused row ``context_attention`` (flash only): the FLOPs of ``l``
      queries against ``context_keys`` keys; it keeps the local ``Q (b, heads, l, q)``, ``K, V
      (b, kv, l, q|v)``, ``O`` and the log-sum-exp, as ``flash_attention`` over ``l`` keys (TE
      saves ``q, kv, out, softmax_lse``; the gathered or passed K, V are transient).  A causal
      sliding window runs under all-gather only (Transformer Engine refuses it with the ring's
      ``p2p``): every rank still gathers the whole sequence's K and V, and its balanced chunks'
      queries each score the keys of the window, counted as without context parallelism
      (``ops.matmul.scored_keys`` over the whole sequence) and timed by the window's tiles.
    * ulysses: a row ``context_exchange`` with the all-to-alls (no arithmetic), then the core of
      ``heads/cp`` heads over the whole ``l cp`` tokens (flash or not), windowed or not.
    """
    cp = exact(context.cp, "cp")
    kw = dict(es=es, conventions=conventions)
    kv, v, causal, window = keys.kv_heads, keys.v_dim, keys.causal, keys.window
    kv_local = b * l * kv * (q + v)
    if context.variant == "ulysses":
        whole, split = l * cp, Keys(kv_heads=kv / cp, v_dim=v, causal=causal, window=window)
        rows = ([flash_attention(b, whole, q, heads / cp, split, **kw)] if flash else
                attention_core(b, whole, q, heads / cp, split, dropouts=dropouts, es_mask=es_mask, **kw))
        before, after = ulysses_exchange((b * l * heads * q, b * l * kv * q, b * l * kv * v, b * l * heads * v),
                                         cp, es, conventions, stride)
        exchange = make_cost("context_exchange", "vector", flops_fwd=0, flops_bwd=0, act_in=0, act_out=0,
                             act_buffer=0, act_grads=0)      # the all-to-alls (their copies are not counted)
        return [attach(exchange, before + after, conv.get(conventions)), *rows]
    if not flash:
        raise InputError(f"{context.variant} context parallelism runs a fused (flash) attention kernel per step "
                         f"(Transformer Engine); set flash=True (--flash)", "flash")
    if window is not None:
        check_variant(context.variant, "a sliding window")
        if not causal or isinstance(window, Chunk):
            raise InputError(f"context parallelism with a {'chunked' if causal else 'non-causal'} window is not "
                             f"modelled", "window")
    seen = (context_keys(l * cp, cp, context.variant, causal, conventions) if window is None
            else scored_keys(l * cp, l * cp, causal, conventions, window))
    grouped = Keys(kv_heads=kv, v_dim=v)
    work = flash_attention(b, l, q, heads, replace(grouped, l_kv=seen), name="context_attention", **kw)
    kept = flash_attention(b, l, q, heads, replace(grouped, l_kv=l), **kw)
    sent = (ring_exchange(kv_local, cp, es, conventions, stride) if context.variant == "ring"
            else gather_exchange(kv_local * cp, cp, es, conventions, stride))
    # the balanced chunks spread the rank's queries over the whole causal square: its kernels skip
    # the key tiles above the diagonal as one square's would (ScoreShape)
    shape = replace(work.scores, causal_length=l * cp, window=window) if causal else work.scores
    row = replace(work, act_in_other=kept.act_in_other, act_buffer=kept.act_buffer, act_grads=kept.act_grads,
                  scores=shape)
    return [attach(row, sent, conv.get(conventions))]
