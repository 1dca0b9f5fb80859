"""Sequence and context parallelism for long contexts: Megatron SP, DeepSpeed-Ulysses,
ring attention.  Each is combinable with tensor parallelism ``m1``.

=============== ============================================ ===================================
scheme          what is split                                communication per layer, forward
=============== ============================================ ===================================
Megatron SP     norms/dropouts by ``l/m1``; heads and ``f``  allgather + reduce-scatter of
                by ``m1``                                    ``b l e`` around attention and MLP
Ulysses         tokens ``l/s1``; around attention heads      four all-to-alls (q, k, v, output)
                ``h/s1`` with the whole sequence             of ``b (l/s1) e`` each
ring attention  tokens ``l/c`` everywhere; K and V travel    ``c - 1`` sends of the K, V chunk
                the ring (Liu et al. 2023)                   (backward also dK, dV)
=============== ============================================ ===================================

A ``Scheme`` holds the attention block on one device (rows with their
collectives, from the same primitives as ``blocks``) and the per-device
tensors with labelled shapes, in the order the scheme creates them.
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Integer, Rational, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Block, Projections, Run, attention, transformer_layer
from symbolic_cost.blocks.context import Context, ring_exchange
from symbolic_cost.checks import InputError, check_rules, count, divides
from symbolic_cost.cost import exact
from symbolic_cost.ops import Keys, flash_attention


@dataclass(frozen=True)
class Tensor:
    """A per-device tensor: labelled extents and the bytes of one element."""

    name: str
    dims: tuple[tuple[str, Expr], ...]
    element_bytes: Expr

    @property
    def shape(self) -> tuple[Expr, ...]:
        return tuple(extent for _, extent in self.dims)

    @property
    def elements(self) -> Expr:
        out = Integer(1)
        for extent in self.shape:
            out *= extent
        return out

    @property
    def bytes(self) -> Expr:
        return self.elements * self.element_bytes

    def subs(self, values) -> "Tensor":
        return Tensor(self.name, tuple((k, sympify(v).subs(values)) for k, v in self.dims),
                      sympify(self.element_bytes).subs(values))


@dataclass(frozen=True)
class Scheme:
    """One sequence-parallel scheme on one device of a group of ``degree`` devices."""

    name: str
    degree: Expr
    block: Block
    tensors: tuple[Tensor, ...]
    weights_replicated: bool

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(f"{self.name} has no tensor {name!r}; tensors: "
                       f"{', '.join(t.name for t in self.tensors)}")

    def volume(self, pass_: str = "fwd") -> Expr:
        """Bytes one device sends in a pass (all collectives, as the conventions report)."""
        return sum((c.volume for c in self.block.collectives if c.pass_ == pass_), Integer(0))

    def flops(self, pass_: str = "fwd") -> Expr:
        """FLOPs of one device (the busiest one) in a pass."""
        return self.block.total(f"flops_{pass_}")

    def scores_bytes(self) -> Expr:
        """Bytes of attention scores kept on one device (zero with flash attention)."""
        return sum((t.bytes for t in self.tensors if t.name == "A"), Integer(0))


def _projected(block: Block) -> tuple:
    """The rows of an attention ``block`` from its Q, K, V projection to its output projection
    (``v_proj``): the scheme's layer without the norms and the closing dropout around it."""
    names = block.names
    return block.rows[names.index("qkv_proj"):names.index("v_proj") + 1]


def megatron_sp(b, l, e, h, m1, *, flash=False, es=2, es_mask=1, conventions=conv.DEFAULT) -> Scheme:
    """Megatron sequence parallelism: ``attention(b, l, e, h, m1, s1=m1)`` (Korthikanti et al. 2022)."""
    block = attention(b, l, e, h, m1, m1, run=Run(flash=flash, es=es, es_mask=es_mask, conventions=conventions))
    d = block.dims
    es = exact(es, "es")
    q, heads = d["e"] / d["h"], d["h"] / d["m1"]
    tensors = [Tensor("input", (("b", d["b"]), ("l/m1", d["l"] / d["m1"]), ("e", d["e"])), es),
               Tensor("input gathered", (("b", d["b"]), ("l", d["l"]), ("e", d["e"])), es),
               *(Tensor(n, (("b", d["b"]), ("h/m1", heads), ("l", d["l"]), ("q", q)), es) for n in "qkv")]
    if not flash:
        tensors.append(Tensor("A", (("b", d["b"]), ("h/m1", heads), ("l", d["l"]), ("l", d["l"])), es))
    return Scheme("megatron-sp", d["m1"], block, tuple(tensors), weights_replicated=False)


def ulysses(b, l, e, h, s1, m1=1, *, flash=False, es=2, es_mask=1, conventions=conv.DEFAULT) -> Scheme:
    """DeepSpeed-Ulysses (Jacobs et al. 2023): tokens split ``s1`` ways; all-to-alls trade
    the token split for a head split around attention.

    Per device: projections on ``l/s1`` tokens with ``h/m1`` heads (weights
    replicated over ``s1``, split over ``m1``); all-to-all q, k, v over ``s1``;
    attention over the whole sequence for ``h/(m1 s1)`` heads; all-to-all the
    output back.  Backward mirrors the four all-to-alls.  The rows are the attention
    block's under Ulysses context parallelism (``blocks.attention`` with
    ``Run(context=Context(s1, "ulysses"))``, no biases, ``blocks.context``), from ``qkv_proj``
    to the output projection ``v_proj``; the all-to-alls ride on ``context_exchange``.

    >>> from symbolic_cost.symbols import b, l, e, h, s1
    >>> ulysses(b, l, e, h, s1).volume("fwd")
    8*b*e*l*(s1 - 1)/s1**2
    """
    conventions = conv.get(conventions)
    d = check_rules(dict(b=b, l=l, e=e, h=h, s1=s1, m1=m1), (("h", "e"), ("s1", "l"), ("m1", "h")))
    divides({**d, "h/m1": d["h"] / d["m1"]}, "s1", "h/m1", "Ulysses scatters each device's heads over s1")
    b, l, e, h, s1, m1 = d.values()
    es = exact(es, "es")
    q, local, heads = e / h, l / s1, h / (m1 * s1)
    block = Block("ulysses", _projected(attention(b, local, e, h, m1, 1, projections=Projections(False, False),
                                                  run=Run(flash, Context(s1, "ulysses"), es, es_mask, conventions))),
                  dict(b=b, l=l, e=e, h=h, s1=s1, m1=m1), conventions)
    heads_dim = ("h/P" if m1 == 1 else "h/(m1 s1)", heads)
    tensors = [Tensor("input", (("b", b), ("N/P", local), ("d", e)), es),
               *(Tensor(w, (("h", h / m1), ("d", e), ("d/h", q)), es) for w in ("Wq", "Wk", "Wv")),
               Tensor("Wo", (("h", h / m1), ("d/h", q), ("d", e)), es),
               *(Tensor(n, (("b", b), ("h", h / m1), ("N/P", local), ("d/h", q)), es) for n in "qkv"),
               *(Tensor(f"{n}_", (("b", b), ("P", s1), heads_dim, ("N/P", local), ("d/h", q)), es)
                 for n in "qkv"),
               *(Tensor(f"{n}_ gathered", (("b", b), heads_dim, ("N", l), ("d/h", q)), es) for n in "qkv")]
    if not flash:
        tensors.append(Tensor("A", (("b", b), heads_dim, ("N", l), ("N", l)), es))
    tensors += [Tensor("c", (("b", b), heads_dim, ("N", l), ("d/h", q)), es),
                Tensor("c transposed", (("b", b), ("N", l), heads_dim, ("d/h", q)), es),
                Tensor("c_", (("b", b), ("P", s1), ("N/P", local), heads_dim, ("d/h", q)), es),
                Tensor("c_ gathered", (("b", b), ("N/P", local), ("d", e / m1)), es),
                Tensor("O", (("d", e / m1), ("d", e)), es),
                Tensor("output", (("b", b), ("N/P", local), ("d", e)), es)]
    return Scheme("ulysses", s1, block, tuple(tensors), weights_replicated=True)


def ring_attention(b, l, e, h, c, m1=1, *, causal=True, balanced=True, es=2,
                   conventions=conv.DEFAULT) -> Scheme:
    """Ring attention / context parallelism (Liu et al. 2023): each of ``c`` devices keeps
    ``l/c`` tokens; K and V chunks go round the ring in ``c - 1`` p2p steps while
    blockwise (flash) attention runs.  Backward sends K, V and their gradients.

    Work per device is ``(l/c) x l_kv`` scores, ``l_kv`` being the mean number
    of keys a query sees: ``l`` without a causal mask; with one, a query at
    position ``t`` sees ``t + 1`` keys, so ``(l + 1)/2`` for every device under
    zig-zag balancing (chunks ``i`` and ``2c-1-i`` of ``2c``) and
    ``l - l/(2c) + 1/2`` for the last, busiest device with contiguous chunks.  The
    projections are the attention block's (``qkv_proj``, ``v_proj``: ``blocks.attention`` on
    the ``l/c`` tokens, no biases; ``v_proj`` reads the kernel's ``O``, which the kernel keeps:
    ``ops.attention.reads_flash_output``); the core is the ring's ``ring_flash_attention``
    (the whole-model ring, ``blocks.context``, counts a causal kernel's tiles under
    ``causal_flops="full"`` and has no contiguous chunks).

    >>> from symbolic_cost.symbols import b, l, e, h, c
    >>> ring_attention(b, l, e, h, c).volume("fwd")
    4*b*e*l*(c - 1)/c
    """
    conventions = conv.get(conventions)
    d = check_rules(dict(b=b, l=l, e=e, h=h, c=c, m1=m1), (("h", "e"), ("c", "l"), ("m1", "h")))
    if causal and balanced:
        divides({**d, "l/2": d["l"] / 2}, "c", "l/2", "zig-zag balancing cuts l into 2c chunks")
    b, l, e, h, c, m1 = d.values()
    es = exact(es, "es")
    q, local, heads = e / h, l / c, h / m1
    keys = l if not causal else ((l + 1) / 2 if balanced else l - l / (2 * c) + Rational(1, 2))
    chunk = b * local * e / m1                     # K (or V) of one device
    core = flash_attention(b, local, q, heads, Keys(l_kv=keys), name="ring_flash_attention", es=es,
                           conventions=conventions).plus(collectives=ring_exchange(2 * chunk, c, es, conventions))
    plain = attention(b, local, e, h, m1, 1, projections=Projections(False, False),
                      run=Run(flash=True, es=es, conventions=conventions))
    qkv, *_, out = _projected(plain)               # the block's projections around the ring's own core
    block = Block("ring-attention", (qkv, core, out), dict(b=b, l=l, e=e, h=h, c=c, m1=m1), conventions)
    per_head = (("b", b), ("h", heads), ("l/c", local), ("q", q))
    tensors = [Tensor("input", (("b", b), ("l/c", local), ("e", e)), es),
               *(Tensor(n, per_head, es) for n in ("q", "k", "v", "k in flight", "v in flight", "o"))]
    return Scheme("ring-attention", c, block, tuple(tensors), weights_replicated=True)


def layer_volumes(b, l, e, f, h, degree, *, es=2, conventions=conv.DEFAULT) -> dict:
    """Bytes one device sends per transformer layer, ``{scheme: (forward, backward)}``,
    with all ``degree`` devices on one sequence.

    Megatron SP counts the attention and MLP collectives; Ulysses and ring
    attention leave the MLP token-sharded with replicated weights, so it
    communicates nothing per layer (its weight gradients are reduced once per
    step, like data parallelism).

    >>> from symbolic_cost.symbols import b, l, e, f, h, s1
    >>> layer_volumes(b, l, e, f, h, s1)["ulysses"][0]
    8*b*e*l*(s1 - 1)/s1**2
    """
    megatron = transformer_layer(b, l, e, f, h, degree, degree, run=Run(es=es, conventions=conventions))
    sent = lambda blk, p: sum((c.volume for c in blk.collectives if c.pass_ == p), Integer(0))  # noqa: E731
    out = {"megatron-sp": (sent(megatron, "fwd"), sent(megatron, "bwd"))}
    for name, scheme in (("ulysses", ulysses(b, l, e, h, degree, es=es, conventions=conventions)),
                         ("ring-attention", ring_attention(b, l, e, h, degree, causal=False, es=es,
                                                          conventions=conventions))):
        out[name] = (scheme.volume("fwd"), scheme.volume("bwd"))
    return out


def sequence_shard(l: int, degree: int, rank: int, zigzag: bool = False) -> list[tuple[int, int]]:
    """Token ranges ``[start, stop)`` that device ``rank`` of ``degree`` holds: one contiguous
    chunk, or with ``zigzag`` chunks ``rank`` and ``2*degree - 1 - rank`` of ``2*degree``.

    >>> sequence_shard(16, 4, 1), sequence_shard(16, 4, 1, zigzag=True)
    ([(4, 8)], [(2, 4), (12, 14)])
    """
    count(l, "l"), count(degree, "degree")
    if not 0 <= count(rank, "rank", minimum=0) < degree:
        raise InputError(f"rank must be in [0, {degree}), got {rank}", "rank")
    parts = 2 * degree if zigzag else degree
    if l % parts:
        raise InputError(f"{parts} must divide l (got l={l})", "l")
    size = l // parts
    chunks = [rank, parts - 1 - rank] if zigzag else [rank]
    return [(i * size, (i + 1) * size) for i in chunks]


def head_shard(h: int, degree: int, rank: int) -> tuple[int, int]:
    """Heads ``[start, stop)`` that device ``rank`` holds once Ulysses scatters heads."""
    count(h, "h"), count(degree, "degree")
    if not 0 <= count(rank, "rank", minimum=0) < degree:
        raise InputError(f"rank must be in [0, {degree}), got {rank}", "rank")
    if h % degree:
        raise InputError(f"s1 must divide h (got s1={degree}, h={h})", "s1")
    size = h // degree
    return rank * size, (rank + 1) * size
