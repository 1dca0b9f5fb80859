"""The 1-D tensor (``m1``) and sequence (``s1``) parallel layout every block shares.

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
are reported as one; a symbolic ``s1`` keeps the two, each marked with it
(``Collective.reshard``), and the time model prices them as that allreduce where
``s1 = 1`` (``timing.hardware.comm_time``: NCCL's allreduce has its own latency,
NVLS and tree).  Sequence shards live inside the tensor group, so ``s1`` must
divide ``m1``.  Collectives are booked on the row next to them,
as the LBNL 2024 tables do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.block import check_dims
from symbolic_cost.checks import InputError, element_size
from symbolic_cost.cost import Collective, Cost, collective
from symbolic_cost.ops import add, dropout
from symbolic_cost.ops.norm import NORMS

def attach(cost: Cost, collectives: list[Collective], conventions: conv.Conventions,
           weight_grads: list[Collective] = ()) -> Cost:
    """``cost`` with ``collectives`` attached and, if the conventions count them
    (``reduction_flops``), the adds of their reductions in the pass they run in.
    ``weight_grads`` are collectives that sum parameter gradients (a grid's ``dW`` and bias
    gradients), attached after ``collectives``: their backward adds are also weight-gradient
    FLOPs (``flops_wgrad``); every other backward reduction sums activation gradients."""
    extra = {"flops_fwd": 0, "flops_bwd": 0, "flops_wgrad": 0}
    if conventions.reduction_flops:
        for c in collectives:
            extra[f"flops_{c.pass_}"] += c.reduction_flops
        for c in weight_grads:
            extra[f"flops_{c.pass_}"] += c.reduction_flops
            if c.pass_ == "bwd":
                extra["flops_wgrad"] += c.reduction_flops
    return cost.plus(collectives=[*collectives, *weight_grads], **extra)


@dataclass(frozen=True)


class Layout:
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
    def of(cls, dims: dict, es, es_mask, conventions) -> "Layout":
        conventions = conv.get(conventions)
        check_dims(dims, conventions)
        # the LBNL 2024 code ties sequence sharding to the tensor degree
        s = dims["m1"] if conventions.sequence_shard == "m1" else dims["s1"]
        return cls(dims["b"], dims["l"], dims["e"], dims["m1"], s, element_size(es, "es"),
                   element_size(es_mask, "es_mask"), conventions)

    @property
    def kw(self) -> dict:
        return dict(es=self.es, conventions=self.conventions)

    def collective(self, kind, elements, group, pass_) -> list[Collective]:
        return collective(kind, elements, self.es, group, pass_, self.conventions)

    def reduce_to_shards(self, pass_) -> list[Collective]:
        """Sum the ``m1`` partial ``(b, l, e)`` results; leave each device its ``l/s`` shard."""
        n, s = self.b * self.l * self.e, sympify(self.s)
        if s == 1:
            return self.collective("allreduce", n, self.m1, pass_)
        pair = (self.collective("reducescatter", n, self.m1, pass_)
                + self.collective("allgather", n / s, self.m1 / s, pass_))
        # s = m1 is 1 only where the group is one device, and then nothing is sent either way
        return pair if s.is_number or s == self.m1 else [replace(c, reshard=s) for c in pair]

    def attach(self, cost: Cost, collectives: list[Collective]) -> Cost:
        """Attach collectives and, if the conventions say so, their reduction FLOPs."""
        return attach(cost, collectives, self.conventions)

    def entering(self, cost: Cost, products: int = 1) -> Cost:
        """The first matmul of the tensor region: backward reduces its input gradient.

        With ``sequence_parallel_inputs="shard"`` (Megatron-LM) the matmul keeps only
        the ``l/s`` sequence shard of its input, ``1/s`` of what it would keep, and
        allgathers it again in backward to form its weight gradient.

        ``products``: the row stands for that many column-split modules reading the same input,
        each reducing its own ``(b, l, e)`` input gradient over ``m1`` in backward (``Run.split_inputs``:
        ``q``, ``k``, ``v`` of transformers' ``tp_plan`` and DeepSpeed's AutoTP), ``products - 1``
        allreduces more than one fused product's; only without sequence shards (``s = 1``), as
        those frameworks run them."""
        if products != 1 and self.s != 1:
            raise InputError(f"{products} products each reducing its input gradient beside a sequence split over "
                             f"s={self.s} ranks is not modelled (transformers' tp_plan and DeepSpeed's AutoTP keep "
                             f"the sequence whole)", "s1")
        collectives = self.reduce_to_shards("bwd") * products
        if self.conventions.sequence_parallel_inputs == "shard" and self.s != 1:
            cost = cost.plus(act_buffer=-cost.act_buffer * (1 - 1 / self.s))
            collectives = self.collective("allgather", self.b * self.l * self.e, self.s, "bwd") + collectives
        return self.attach(cost, collectives)

    def leaving(self, cost: Cost) -> Cost:
        """The last matmul of the tensor region: forward reduces its partial output."""
        return self.attach(cost, self.reduce_to_shards("fwd"))

    def norm(self, name: str, kind: str = "layer") -> Cost:
        """Layer (or RMS) norm on the sequence shard, then the allgather into the tensor region."""
        if kind not in NORMS:
            raise InputError(f"norm must be one of {', '.join(NORMS)}, got {kind!r}", "norm")
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
