"""The canonical symbols of symbolic_cost.

Every dimension is a SymPy symbol declared positive and integer, so SymPy can
simplify ``(m1 - 1)/m1`` or ``sqrt(l**2)`` the way a reader expects.  Element
sizes are positive but not necessarily integer (a 4-bit value is ``1/2`` byte).

============ ============ ==================================================
Python       printed as   meaning
============ ============ ==================================================
``b``        b            batch size (sequences per step on one replica)
``l``        l            sequence length (tokens per sequence)
``e``        e            embedding (hidden) dimension
``f``        f            MLP hidden dimension (usually ``4*e``)
``h``        h            attention heads; head dimension is ``e/h``
``m1``       m_1          tensor-parallel degree (1-D, Megatron style)
``s1``       s_1          sequence-parallel degree (shards ``l`` outside the
                          tensor-parallel region; divides ``m1``)
``c``        c            context-parallel degree of the per-layer schemes (ring attention)
``cp``       cp           context-parallel degree of whole-model training
                          (``Training.cp``: ranks that share each sequence)
``d``        d            data-parallel degree
``shard``    shard        ZeRO-3/FSDP shard group (``Training.shard``, HSDP: the
                          state is sharded over ``shard`` ranks and replicated
                          over ``d/shard`` groups; ``d`` unless set)
``p``        p            pipeline-parallel degree (stages)
``n_micro``  n_micro      micro-batches per step and pipeline (gradient accumulation)
``v``        v            vocabulary (padded)
``n_layers`` n_layers     depth: number of transformer layers
``es``       es           bytes per activation / weight element (2 for fp16)
``es_mask``  es_mask      bytes per dropout-mask element (1 for a byte mask)
``l_dec``    l_dec        decoder tokens per sequence of an encoder-decoder
                          (T5's targets; the encoder reads ``l``)
``l_in``     l_in         inference: prompt tokens per sequence (prefill)
``l_out``    l_out        inference: tokens generated per sequence
``l_ctx``    l_ctx        inference: tokens already cached at a decode step
``B``        B            inference: tokens per page of a paged KV cache
``ep``       ep           expert-parallel degree: ranks the routed experts of an
                          MoE layer are split over (``blocks.moe``)
``etp``      etp          expert tensor-parallel degree: ranks each expert's
                          width is split over (Megatron-LM's default: ``m1``)
``m2``       m_2          2-D tensor parallelism (SUMMA): the grid is ``m1 x m2``
                          (``m1`` rows split the batch, ``m2`` columns the width)
``mq``       mq           side of the square grid of 2.5-D (``mq x mq x md``) and
                          of the cube of 3-D (``mq x mq x mq``) tensor parallelism
``md``       md           depth of the 2.5-D grid (copies of the ``mq x mq`` layer)
``vp``       vp           model chunks per pipeline rank of the interleaved
                          schedule (Megatron-LM's virtual pipeline stages)
``n_rec``    n_rec        layers of each model chunk whose forward is redone
                          (full recomputation of the first ``n_rec``, "block")
============ ============ ==================================================

>>> from symbolic_cost.symbols import e, h
>>> (e / h).is_positive
True
"""

from collections.abc import Mapping

from sympy import Symbol

from symbolic_cost.checks import InputError, InputTypeError, shown

_DIM = dict(positive=True, integer=True)

b = Symbol("b", **_DIM)
l = Symbol("l", **_DIM)  # noqa: E741  (the field's name for sequence length)
e = Symbol("e", **_DIM)
f = Symbol("f", **_DIM)
h = Symbol("h", **_DIM)
m1 = Symbol("m1", **_DIM)
s1 = Symbol("s1", **_DIM)
c = Symbol("c", **_DIM)
d = Symbol("d", **_DIM)
p = Symbol("p", **_DIM)
n_micro = Symbol("n_micro", **_DIM)
v = Symbol("v", **_DIM)
n_layers = Symbol("n_layers", **_DIM)
es = Symbol("es", positive=True)
es_mask = Symbol("es_mask", positive=True)
l_in = Symbol("l_in", **_DIM)
l_out = Symbol("l_out", **_DIM)
l_ctx = Symbol("l_ctx", **_DIM)
B = Symbol("B", **_DIM)
ep = Symbol("ep", **_DIM)
etp = Symbol("etp", **_DIM)
m2 = Symbol("m2", **_DIM)
mq = Symbol("mq", **_DIM)
md = Symbol("md", **_DIM)
vp = Symbol("vp", **_DIM)
n_rec = Symbol("n_rec", **_DIM)
l_dec = Symbol("l_dec", **_DIM)
cp = Symbol("cp", **_DIM)
shard = Symbol("shard", **_DIM)

DIMENSIONS = (b, l, e, f, h, m1, s1)
"""The model and parallelism symbols every block is written in."""

ALL = DIMENSIONS + (c, d, p, n_micro, v, n_layers, es, es_mask, l_in, l_out, l_ctx, B, m2, mq, md)

ALL = ALL + (ep, etp)   # the degrees of mixture-of-experts layers

ALL = ALL + (vp, n_rec)   # the pipeline schedule's chunks and the recomputed layers (numeric.search)

ALL = ALL + (l_dec,)   # an encoder-decoder's decoder length

ALL = ALL + (cp,)   # whole-model context parallelism (Training.cp)

ALL = ALL + (shard,)   # the ZeRO-3/FSDP shard group of hybrid sharding (Training.shard)

BY_NAME = {str(s): s for s in ALL}
"""Look up a symbol by the name a user types (``--set m1=4``)."""



def resolve_names(values) -> dict:
    """Turn ``{"m1": 4}`` or ``{m1: 4}`` into ``{m1: 4}`` with the canonical symbols.

    A name must be one of ours: a plain ``Symbol("m1")`` lacks our assumptions
    and would silently fail to substitute.

    >>> resolve_names({"m1": 4, l: 2048})
    {m1: 4, l: 2048}
    """
    if not isinstance(values, Mapping) and not callable(getattr(values, "items", None)):   # a pandas row has items
        raise InputTypeError(f"values must be a mapping of symbols (or their names) to values, got {shown(values)}",
                             "values")
    out = {}
    for key, value in values.items():
        if isinstance(key, str):
            if key not in BY_NAME:
                raise InputError(f"unknown symbol name {key!r}; known: {', '.join(BY_NAME)}", str(key))
            key = BY_NAME[key]
        out[key] = value
    return out


__all__ = ["resolve_names", "b", "l", "e", "f", "h", "m1", "s1", "c", "d", "p", "n_micro", "v", "n_layers", "es", "es_mask",
           "l_in", "l_out", "l_ctx", "B", "m2", "mq", "md", "ep", "etp", "vp", "n_rec", "l_dec", "cp", "shard", "DIMENSIONS", "ALL", "BY_NAME"]
