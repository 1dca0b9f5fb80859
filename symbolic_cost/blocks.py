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
from .symbols import resolve_names
from .layers import attend, dropout, gelu, layer_norm, linear, logits, softmax


@dataclass(frozen=True)
class Block:
    """An ordered, named list of per-device Costs and the dimensions they were built from."""

    name: str
    rows: tuple[Cost, ...]
    dims: dict

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

    def subs(self, values: Mapping) -> "Block":
        """Substitute numbers or expressions, re-checking the dimension rules."""
        values = {k: exact(v, str(k)) for k, v in resolve_names(values).items()}
        dims = {name: sympify(value).subs(values) for name, value in self.dims.items()}
        _check(dims)
        return replace(self, rows=tuple(row.subs(values) for row in self.rows), dims=dims)


def _check(dims: dict) -> None:
    """The rules every block shares, applied to whichever dimensions it has."""
    dims.update(positive_dims(**dims))
    rules = [("h", "e", ""), ("m1", "h", ""), ("m1", "f", ""), ("s1", "l", ""),
             ("s1", "m1", "sequence shards live inside the tensor-parallel group")]
    for divisor, dividend, why in rules:
        if divisor in dims and dividend in dims:
            divides(dims, divisor, dividend, why)


def _sequence_degree(m1, s1, conventions) -> Expr:
    """The degree that shards ``l`` outside the tensor region (LBNL 2024 ties it to ``m1``)."""
    return m1 if conventions.sequence_shard == "m1" else s1


def _collective(kind, elements, es, group, pass_, conventions) -> list[Collective]:
    """One collective as the conventions report it; none when the group is one device."""
    if group == 1:
        return []
    tensor_bytes = elements * es
    if conventions.collective_volume == "ring":
        volume = ring_share(kind, group) * tensor_bytes
    elif group.is_number:
        volume = tensor_bytes
    else:  # the whole tensor moves only if there is someone to move it to
        volume = Piecewise((tensor_bytes, group > 1), (0, True))
    return [Collective(kind=kind, elements=elements, element_bytes=es, group=group,
                       pass_=pass_, volume=volume)]


def _reduce_to_shards(elements, es, m1, s, pass_, conventions) -> list[Collective]:
    """Sum ``m1`` partial results and leave each device its ``l/s`` sequence shard."""
    if s == 1:
        return _collective("allreduce", elements, es, m1, pass_, conventions)
    return (_collective("reducescatter", elements, es, m1, pass_, conventions)
            + _collective("allgather", elements / s, es, m1 / s, pass_, conventions))


def _with(cost: Cost, collectives: list[Collective], conventions) -> Cost:
    """Attach collectives and, if the conventions say so, their reduction FLOPs."""
    extra = {"flops_fwd": 0, "flops_bwd": 0}
    if conventions.reduction_flops:
        for c in collectives:
            extra[f"flops_{c.pass_}"] += c.reduction_flops
    return cost.plus(collectives=collectives, **extra)


def _entry_norm(name, b, l, e, s, es, conventions) -> Cost:
    """Layer norm on the sequence shard, then the allgather into the tensor region."""
    norm = layer_norm(b, l / s, e, es=es, conventions=conventions, name=name)
    return _with(norm, _collective("allgather", b * l * e, es, s, "fwd", conventions), conventions)


def _exit_dropout(name, b, l, e, s, es, es_mask, conventions) -> Cost:
    """Dropout on the sequence shard; its backward allgathers the output gradient."""
    drop = dropout(b, l / s, e, es=es, es_mask=es_mask, conventions=conventions, name=name)
    return _with(drop, _collective("allgather", b * l * e, es, s, "bwd", conventions), conventions)


def mlp(b, l, e, f, m1=1, s1=1, *, bias=True, es=2, es_mask=1, conventions=conv.DEFAULT) -> Block:
    """The transformer MLP: ``dropout(fc2(dropout(gelu(fc1(norm(x))))))`` on one device.

    ``fc1 (e -> f)`` is split by columns and ``fc2 (f -> e)`` by rows over
    ``m1`` devices; the norm and the last dropout run on ``l/s1`` tokens.

    >>> from symbolic_cost.symbols import b, l, e, f
    >>> mlp(b, l, e, f).names
    ['layer_norm_2', 'fc1', 'act', 'dpr1', 'fc2', 'dpr2']
    """
    conventions = conv.get(conventions)
    dims = dict(b=b, l=l, e=e, f=f, m1=m1, s1=s1)
    _check(dims)
    b, l, e, f, m1, s1 = dims.values()
    es, es_mask = exact(es, "es"), exact(es_mask, "es_mask")
    s = _sequence_degree(m1, s1, conventions)
    if conventions.sequence_shard == "m1":
        divides(dims, "m1", "l")
    tokens = b * l * e
    kw = dict(es=es, conventions=conventions)
    rows = [] if conventions.norm_placement == "attention" else [
        _entry_norm("layer_norm_2", b, l, e, s, es, conventions)]
    rows += [
        _with(linear(b, l, e, f / m1, bias=bias, name="fc1", **kw),
              _reduce_to_shards(tokens, es, m1, s, "bwd", conventions), conventions),
        gelu(b, l, f / m1, name="act", **kw),
        dropout(b, l, f / m1, es_mask=es_mask, name="dpr1", **kw),
        _with(linear(b, l, f / m1, e, bias=bias, name="fc2", **kw),
              _reduce_to_shards(tokens, es, m1, s, "fwd", conventions), conventions),
        _exit_dropout("dpr2", b, l, e, s, es, es_mask, conventions),
    ]
    return Block("mlp", tuple(rows), dims)


def attention(b, l, e, h, m1=1, s1=1, *, qkv_bias=True, out_bias=True, es=2, es_mask=1,
              conventions=conv.DEFAULT) -> Block:
    """Multi-head self-attention on one device, heads split over ``m1`` devices.

    Rows: ``layer_norm_1`` -> ``qkv_proj (e -> 3e/m1)`` -> ``logits`` ->
    ``softmax`` -> ``dropout_softmax`` -> ``attend`` -> ``v_proj (e/m1 -> e)``
    -> ``dropout`` (and ``layer_norm_2`` when ``norm_placement="attention"``).
    Head dimension ``q = e/h``; each device holds ``h/m1`` heads.

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> attention(b, l, e, h).total("flops_fwd").expand().coeff(l**2)
    4*b*e + 3*b*h
    """
    conventions = conv.get(conventions)
    dims = dict(b=b, l=l, e=e, h=h, m1=m1, s1=s1)
    _check(dims)
    b, l, e, h, m1, s1 = dims.values()
    es, es_mask = exact(es, "es"), exact(es_mask, "es_mask")
    s = _sequence_degree(m1, s1, conventions)
    if conventions.sequence_shard == "m1":
        divides(dims, "m1", "l")
    tokens, q, heads = b * l * e, e / h, h / m1
    kw = dict(es=es, conventions=conventions)
    rows = [
        _entry_norm("layer_norm_1", b, l, e, s, es, conventions),
        _with(linear(b, l, e, 3 * e / m1, bias=qkv_bias, name="qkv_proj", **kw),
              _reduce_to_shards(tokens, es, m1, s, "bwd", conventions), conventions),
        logits(b, l, q, heads, **kw),
        softmax(b, l, heads, **kw),
        dropout(b, l, l * heads, es_mask=es_mask, name="dropout_softmax", **kw),
        attend(b, l, q, heads, **kw),
        _with(linear(b, l, e / m1, e, bias=out_bias, name="v_proj", **kw),
              _reduce_to_shards(tokens, es, m1, s, "fwd", conventions), conventions),
        _exit_dropout("dropout", b, l, e, s, es, es_mask, conventions),
    ]
    if conventions.norm_placement == "attention":
        rows.append(_entry_norm("layer_norm_2", b, l, e, s, es, conventions))
    return Block("attention", tuple(rows), dims)


def transformer_layer(b, l, e, f, h, m1=1, s1=1, *, bias=True, qkv_bias=True, es=2, es_mask=1,
                      conventions=conv.DEFAULT) -> Block:
    """One transformer layer: the attention rows, then the MLP rows.

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> len(transformer_layer(b, l, e, 4 * e, h))
    14
    """
    common = dict(es=es, es_mask=es_mask, conventions=conventions)
    first = attention(b, l, e, h, m1, s1, qkv_bias=qkv_bias, out_bias=bias, **common)
    second = mlp(b, l, e, f, m1, s1, bias=bias, **common)
    return Block("layer", first.rows + second.rows, {**first.dims, **second.dims})


BUILDERS = {"mlp": mlp, "attention": attention, "layer": transformer_layer}
