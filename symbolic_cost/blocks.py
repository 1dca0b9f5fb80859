"""MLP and self-attention blocks with 1-D tensor (``m1``) and sequence (``s1``) parallelism.

Layout (Megatron-LM, generalised so that ``s1`` is its own symbol)::

    sequence region          tensor-parallel region                      sequence region
    (b, l/s1, e)   --AG-->   heads / f split m1 ways, full l   --RS(+AG)-->  (b, l/s1, e)

* Entering the tensor region, the ``s1`` sequence shards are allgathered
  (forward).  The backward of that entry sums the ``m1`` partial input
  gradients and re-shards them by sequence.
* Leaving the tensor region, the ``m1`` partial sums are reduced and
  re-sharded by sequence (forward); backward allgathers the output gradient.

"Reduce and re-shard" is a reduce-scatter over ``m1`` devices followed by an
allgather among the ``m1/s1`` devices that share a sequence shard.  With
``s1 = m1`` (Megatron sequence parallelism) the allgather is empty; with
``s1 = 1`` (plain tensor parallelism) the two together are an allreduce and
are reported as one.  Sequence shards live inside the tensor group, so
``s1`` must divide ``m1``.  Collectives are booked on the row next to them,
as the LBNL 2024 tables do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator, Mapping

from sympy import Expr, Piecewise, sympify

from . import conventions as conv
from .checks import divides, positive_dims
from .cost import EXPRESSION_FIELDS, Collective, Cost, exact, ring_share
from .layers import (add, attend, cross_entropy, dropout, embedding, flash_attention, gated, gelu,
                     layer_norm, linear, logits, rms_norm, rotary, softmax)
from .symbols import resolve_names


@dataclass(frozen=True)
class Block:
    """An ordered, named list of per-device Costs, the dimensions they were built
    from and the conventions they were counted with."""

    name: str
    rows: tuple[Cost, ...]
    dims: dict
    conventions: conv.Conventions = conv.DEFAULT

    def __iter__(self) -> Iterator[Cost]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, name: str) -> Cost:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"{self.name} has no row {name!r}; rows: {', '.join(self.names)}")

    @property
    def names(self) -> list[str]:
        return [row.name for row in self.rows]

    def total(self, field: str) -> Expr:
        """Sum of one field over all rows, e.g. ``block.total("flops_fwd")``."""
        if field not in EXPRESSION_FIELDS:
            raise ValueError(f"unknown field {field!r}; fields: {', '.join(EXPRESSION_FIELDS)}")
        return sum((getattr(row, field) for row in self.rows), sympify(0))

    @property
    def collectives(self) -> list[Collective]:
        return [c for row in self.rows for c in row.collectives]

    def to_frame(self, fields=EXPRESSION_FIELDS):
        """A pandas DataFrame of the rows' expressions (one row per operation)."""
        import pandas as pd
        return pd.DataFrame([{"operation": r.name, **{f: getattr(r, f) for f in fields}}
                             for r in self.rows])

    def _repr_latex_(self) -> str:
        """Jupyter shows a Block as a LaTeX table of its main formulas."""
        from .latex import formula_table
        return formula_table(self)

    def subs(self, values: Mapping) -> "Block":
        """Substitute numbers or expressions, re-checking the dimension rules."""
        values = {k: exact(v, str(k)) for k, v in resolve_names(values).items()}
        dims = {name: sympify(value).subs(values) for name, value in self.dims.items()}
        _check(dims, self.conventions)
        return replace(self, rows=tuple(row.subs(values) for row in self.rows), dims=dims)


def _check(dims: dict, conventions: conv.Conventions) -> None:
    """The rules every block shares, applied to whichever dimensions it has."""
    dims.update(positive_dims(**dims))
    rules = [("h", "e", ""), ("m1", "h", ""), ("m1", "f", ""), ("s1", "l", ""),
             ("s1", "m1", "sequence shards live inside the tensor-parallel group"),
             ("kv_heads", "h", "each key/value head serves a whole group of query heads"),
             ("m1", "kv_heads", "each device needs whole key/value heads")]
    if conventions.sequence_shard == "m1":
        rules.append(("m1", "l", "these conventions shard the sequence by m1"))
    for divisor, dividend, why in rules:
        if divisor in dims and dividend in dims:
            divides(dims, divisor, dividend, why)


def collective(kind, elements, es, group, pass_, conventions, repeats=1) -> list[Collective]:
    """One collective as the conventions report it; none when the group is one device."""
    group, elements, repeats = sympify(group), sympify(elements), sympify(repeats)
    if group == 1:
        return []
    tensor_bytes = repeats * elements * es
    if conventions.collective_volume == "ring":
        volume = ring_share(kind, group) * tensor_bytes
    elif group.is_number:
        volume = tensor_bytes
    else:  # the whole tensor moves only if there is someone to move it to
        volume = Piecewise((tensor_bytes, group > 1), (0, True))
    return [Collective(kind=kind, elements=elements, element_bytes=es, group=group,
                       pass_=pass_, volume=volume, repeats=repeats)]


@dataclass(frozen=True)
class _Layout:
    """What every row of a block shares: batch, sequence, width, degrees, sizes."""

    b: Expr
    l: Expr
    e: Expr
    m1: Expr
    s: Expr            # degree that shards l outside the tensor region
    es: Expr
    es_mask: Expr
    conventions: conv.Conventions

    @classmethod
    def of(cls, dims: dict, es, es_mask, conventions) -> "_Layout":
        conventions = conv.get(conventions)
        _check(dims, conventions)
        # the LBNL 2024 code ties sequence sharding to the tensor degree
        s = dims["m1"] if conventions.sequence_shard == "m1" else dims["s1"]
        return cls(dims["b"], dims["l"], dims["e"], dims["m1"], s, exact(es, "es"),
                   exact(es_mask, "es_mask"), conventions)

    @property
    def kw(self) -> dict:
        return dict(es=self.es, conventions=self.conventions)

    def collective(self, kind, elements, group, pass_) -> list[Collective]:
        return collective(kind, elements, self.es, group, pass_, self.conventions)

    def reduce_to_shards(self, pass_) -> list[Collective]:
        """Sum the ``m1`` partial ``(b, l, e)`` results; leave each device its ``l/s`` shard."""
        n = self.b * self.l * self.e
        if self.s == 1:
            return self.collective("allreduce", n, self.m1, pass_)
        return (self.collective("reducescatter", n, self.m1, pass_)
                + self.collective("allgather", n / self.s, self.m1 / self.s, pass_))

    def attach(self, cost: Cost, collectives: list[Collective]) -> Cost:
        """Attach collectives and, if the conventions say so, their reduction FLOPs."""
        extra = {"flops_fwd": 0, "flops_bwd": 0}
        if self.conventions.reduction_flops:
            for c in collectives:
                extra[f"flops_{c.pass_}"] += c.reduction_flops
        return cost.plus(collectives=collectives, **extra)

    def entering(self, cost: Cost) -> Cost:
        """The first matmul of the tensor region: backward reduces its input gradient."""
        return self.attach(cost, self.reduce_to_shards("bwd"))

    def leaving(self, cost: Cost) -> Cost:
        """The last matmul of the tensor region: forward reduces its partial output."""
        return self.attach(cost, self.reduce_to_shards("fwd"))

    def norm(self, name: str, kind: str = "layer") -> Cost:
        """Layer (or RMS) norm on the sequence shard, then the allgather into the tensor region."""
        if kind not in NORMS:
            raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {kind!r}")
        cost = NORMS[kind](self.b, self.l / self.s, self.e, name=name, **self.kw)
        return self.attach(cost, self.collective("allgather", self.b * self.l * self.e, self.s, "fwd"))

    def closing_dropout(self, name: str, keep: bool = True) -> Cost:
        """Dropout on the sequence shard (or, for models without dropout, the residual add);
        its backward allgathers the output gradient."""
        if keep:
            cost = dropout(self.b, self.l / self.s, self.e, es_mask=self.es_mask, name=name, **self.kw)
        else:
            cost = add(self.b, self.l / self.s, self.e, name="residual", es=self.es)
        return self.attach(cost, self.collective("allgather", self.b * self.l * self.e, self.s, "bwd"))


NORMS = {"layer": layer_norm, "rms": rms_norm}


def mlp(b, l, e, f, m1=1, s1=1, *, bias=True, gated_act=False, dropouts=True, norm="layer", es=2,
        es_mask=1, conventions=conv.DEFAULT) -> Block:
    """The transformer MLP: ``dropout(fc2(dropout(gelu(fc1(norm(x))))))`` on one device.

    ``fc1 (e -> f)`` is split by columns and ``fc2 (f -> e)`` by rows over
    ``m1`` devices; the norm and the last dropout run on ``l/s1`` tokens.
    ``gated_act`` makes ``fc1`` produce a gate and a value (``e -> 2f``) for
    SwiGLU/GeGLU; ``dropouts=False`` drops both dropouts (the last row is then
    the residual add); ``norm="rms"`` uses RMS norm.

    >>> from symbolic_cost.symbols import b, l, e, f
    >>> mlp(b, l, e, f).names
    ['layer_norm_2', 'fc1', 'act', 'dpr1', 'fc2', 'dpr2']
    """
    dims = dict(b=b, l=l, e=e, f=f, m1=m1, s1=s1)
    at = _Layout.of(dims, es, es_mask, conventions)
    b, l, e, f, m1 = dims["b"], dims["l"], dims["e"], dims["f"], dims["m1"]
    rows = [] if at.conventions.norm_placement == "attention" else [at.norm(f"{norm}_norm_2", norm)]
    width = 2 * f / m1 if gated_act else f / m1
    rows += [
        at.entering(linear(b, l, e, width, bias=bias, name="fc1", **at.kw)),
        (gated if gated_act else gelu)(b, l, f / m1, name="act", **at.kw),
        *([dropout(b, l, f / m1, es_mask=at.es_mask, name="dpr1", **at.kw)] if dropouts else []),
        at.leaving(linear(b, l, f / m1, e, bias=bias, name="fc2", **at.kw)),
        at.closing_dropout("dpr2", dropouts),
    ]
    return Block("mlp", tuple(rows), dims, at.conventions)


def attention(b, l, e, h, m1=1, s1=1, *, kv_heads=None, qkv_bias=True, out_bias=True, flash=False,
              rotary_pos=False, causal=False, dropouts=True, norm="layer", es=2, es_mask=1,
              conventions=conv.DEFAULT) -> Block:
    """Multi-head self-attention on one device, heads split over ``m1`` devices.

    Rows: ``layer_norm_1`` -> ``qkv_proj (e -> 3e/m1)`` -> ``logits`` ->
    ``softmax`` -> ``dropout_softmax`` -> ``attend`` -> ``v_proj (e/m1 -> e)``
    -> ``dropout`` (and ``layer_norm_2`` when ``norm_placement="attention"``).
    Head dimension ``q = e/h``; each device holds ``h/m1`` heads.  With
    ``flash=True`` one ``flash_attention`` row replaces ``logits`` to ``attend``.
    ``kv_heads`` (grouped-query attention; 1 is multi-query) shrinks K and V;
    ``rotary_pos`` adds a ``rotary`` row on Q and K; ``causal`` matters for the
    FLOPs under ``causal_flops="exact"``; ``dropouts=False`` and ``norm="rms"``
    as in ``mlp``.

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> attention(b, l, e, h).total("flops_fwd").expand().coeff(l**2)
    4*b*e + 3*b*h
    """
    dims = dict(b=b, l=l, e=e, h=h, m1=m1, s1=s1, **({} if kv_heads is None else {"kv_heads": kv_heads}))
    at = _Layout.of(dims, es, es_mask, conventions)
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    q, heads = e / dims["h"], dims["h"] / m1
    kv = dims.get("kv_heads", dims["h"]) / m1
    grouped = dict(kv_heads=kv, causal=causal, **at.kw)
    core = [flash_attention(b, l, q, heads, **grouped)] if flash else [
        logits(b, l, q, heads, **grouped),
        softmax(b, l, heads, causal=causal, **at.kw),
        *([dropout(b, l, l * heads, es_mask=at.es_mask, name="dropout_softmax", **at.kw)]
          if dropouts else []),
        # without dropout, AV keeps the very tensor softmax keeps: hold it once
        attend(b, l, q, heads, **grouped).plus(
            act_buffer=0 if dropouts else -dims["b"] * heads * l * l * at.es)]
    rows = [
        at.norm(f"{norm}_norm_1", norm),
        at.entering(linear(b, l, e, (heads + 2 * kv) * q, name="qkv_proj", **at.kw,
                           bias=(e / m1 if qkv_bias and at.conventions.qkv_bias_elements == "e" else qkv_bias))),
        *([rotary(b, l, heads + kv, q, es=at.es)] if rotary_pos else []),
        *core,
        at.leaving(linear(b, l, e / m1, e, bias=out_bias, name="v_proj", **at.kw)),
        at.closing_dropout("dropout", dropouts),
    ]
    if at.conventions.norm_placement == "attention":
        rows.append(at.norm(f"{norm}_norm_2", norm))
    return Block("attention", tuple(rows), dims, at.conventions)


def transformer_layer(b, l, e, f, h, m1=1, s1=1, *, kv_heads=None, bias=True, qkv_bias=True,
                      flash=False, rotary_pos=False, causal=False, gated_act=False, dropouts=True,
                      norm="layer", es=2, es_mask=1, conventions=conv.DEFAULT) -> Block:
    """One transformer layer: the attention rows, then the MLP rows (options as there).

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> len(transformer_layer(b, l, e, 4 * e, h))
    14
    """
    common = dict(es=es, es_mask=es_mask, conventions=conventions, dropouts=dropouts, norm=norm)
    first = attention(b, l, e, h, m1, s1, kv_heads=kv_heads, qkv_bias=qkv_bias, out_bias=bias,
                      flash=flash, rotary_pos=rotary_pos, causal=causal, **common)
    second = mlp(b, l, e, f, m1, s1, bias=bias, gated_act=gated_act, **common)
    return Block("layer", first.rows + second.rows, {**first.dims, **second.dims}, first.conventions)


def embedding_block(b, l, e, vocab, m1=1, s1=1, *, positions=0, token_types=0, norm=None,
                    dropouts=True, es=2, es_mask=1, conventions=conv.DEFAULT) -> Block:
    """Token embedding split over ``m1`` by vocabulary (Megatron's VocabParallelEmbedding:
    each device looks up its rows, the partial outputs are summed and sequence-sharded),
    plus learned ``positions`` and BERT ``token_types`` tables, an optional norm and dropout."""
    dims = dict(b=b, l=l, e=e, m1=m1, s1=s1)
    at = _Layout.of(dims, es, es_mask, conventions)
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    tokens = l / at.s
    rows = [at.leaving(embedding(b, l, exact(vocab, "vocab") / m1, e, name="word_embeddings", es=at.es))]
    for table, name in ((positions, "position_embeddings"), (token_types, "token_type_embeddings")):
        if table != 0:
            rows += [embedding(b, tokens, table, e, name=name, es=at.es),
                     add(b, tokens, e, name=f"{name}_add", es=at.es)]
    if norm:
        rows.append(NORMS[norm](b, tokens, e, name=f"embedding_{norm}_norm", **at.kw))
    if dropouts:
        rows.append(dropout(b, tokens, e, es_mask=at.es_mask, name="embedding_dropout", **at.kw))
    return Block("embedding", tuple(rows), dims, at.conventions)


def head_block(b, l, e, vocab, m1=1, s1=1, *, tied=True, final_norm="layer", loss=True, pooler=False,
               es=2, es_mask=1, conventions=conv.DEFAULT) -> Block:
    """The end of the model: final norm, the LM head ``e -> vocab`` split over ``m1`` by
    vocabulary (no weights of its own when tied to the embedding) and the cross-entropy
    loss, whose vocabulary-parallel form allreduces a max, a sum and the target logit
    per token; or, for BERT, the pooler (``linear`` on the first token and ``tanh``)."""
    dims = dict(b=b, l=l, e=e, m1=m1, s1=s1)
    at = _Layout.of(dims, es, es_mask, conventions)
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    vocab = exact(vocab, "vocab")
    rows = [at.norm(f"final_{final_norm}_norm", final_norm)] if final_norm else []
    if loss:
        head = at.entering(linear(b, l, e, vocab / m1, bias=False, name="lm_head", **at.kw))
        if tied:
            head = replace(head, weights=sympify(0), weight_grads=sympify(0),
                           mem_fwd=head.mem_fwd - head.weights, mem_bwd=head.mem_bwd - head.weights)
        stats = at.collective("allreduce", 3 * b * l, m1, "fwd")
        rows += [head, at.attach(cross_entropy(b, l, vocab / m1, es=at.es), stats)]
    if pooler:
        rows += [linear(b, 1, e, e, name="pooler_dense", **at.kw), gelu(b, 1, e, name="pooler_activation", **at.kw)]
    return Block("head", tuple(rows), dims, at.conventions)


BUILDERS = {"mlp": mlp, "attention": attention, "layer": transformer_layer}
