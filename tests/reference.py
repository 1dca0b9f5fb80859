"""Independent numeric reference for the property tests.

Plain Python on integers and Fractions; nothing here imports symbolic_cost.
Each operation is described by the tensors it reads, writes and keeps (as
shape tuples with an element size) and by the products it computes; FLOPs of
a product come from counting the operations of one dot product in a loop,
bytes from the shapes.  Ring collectives are simulated chunk by chunk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction


@dataclass
class Flags:
    """The counting choices the library calls conventions, as plain booleans."""

    two_mnk: bool = False
    grad_both: bool = True          # pointwise backward touches dY and dX
    attend_both: bool = True        # AV backward touches dV and dY
    ln_stats: bool = True           # layer norm keeps mean and 1/std
    ln_bwd_reads_params: bool = True
    seq_by_m1: bool = False         # LBNL: sequence sharded by m1
    full_volume: bool = False       # LBNL: report whole tensors
    reduction_adds: bool = True
    norm_in_attention: bool = False
    act_dropout: bool = False       # LBNL: a dropout after the MLP activation
    shard_inputs: bool = True       # Megatron: the entering matmul keeps its sequence shard


LBNL = Flags(grad_both=False, attend_both=False, ln_stats=False, ln_bwd_reads_params=False,
             seq_by_m1=True, full_volume=True, reduction_adds=False, norm_in_attention=True,
             act_dropout=True, shard_inputs=False)


def dot_ops(k: int, two_mnk: bool) -> int:
    """Operations of one length-k dot product, counted by running the loop."""
    if two_mnk:
        return 2 * k
    ops = 1                      # acc = x0 * y0
    for _ in range(k - 1):
        ops += 2                 # acc += xi * yi
    return ops


def product_ops(m: int, k: int, n: int, flags: Flags) -> int:
    return m * n * dot_ops(k, flags.two_mnk)


@dataclass
class Op:
    """One operation: tensors as (shape, bytes per element)."""

    products_fwd: list = field(default_factory=list)   # (batch, m, k, n)
    products_bwd: list = field(default_factory=list)
    pointwise_fwd: int = 0
    pointwise_bwd: int = 0
    inputs: list = field(default_factory=list)
    other: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    saved: list = field(default_factory=list)
    params: list = field(default_factory=list)
    grads: list = field(default_factory=list)
    bwd_reads_params: bool = True


def nbytes(tensors) -> Fraction:
    return sum((Fraction(math.prod(shape)) * size for shape, size in tensors), Fraction(0))


def fields_of(op: Op, flags: Flags) -> dict:
    """The library's eleven fields, computed from an Op."""
    flops = lambda products: sum(batch * product_ops(m, k, n, flags)  # noqa: E731
                                 for batch, m, k, n in products)
    weights = nbytes(op.params)
    out = dict(flops_fwd=flops(op.products_fwd) + op.pointwise_fwd,
               flops_bwd=flops(op.products_bwd) + op.pointwise_bwd,
               act_in=nbytes(op.inputs), act_in_other=nbytes(op.other), act_out=nbytes(op.outputs),
               act_buffer=nbytes(op.saved), weights=weights, weight_grads=weights,
               act_grads=nbytes(op.grads))
    out["mem_fwd"] = out["act_in"] + out["act_in_other"] + out["act_out"] + weights
    out["mem_bwd"] = out["act_buffer"] + out["act_grads"] + weights + (
        weights if op.bwd_reads_params else 0)
    return out


def linear(b, l, k, n, bias, es, flags):
    X, Y = (b, l, k), (b, l, n)
    params = [((k, n), es)] + ([((n,), es)] if bias else [])
    adds = b * l * n if bias else 0
    return Op(products_fwd=[(1, b * l, k, n)], products_bwd=[(1, b * l, n, k), (1, k, b * l, n)],
              pointwise_fwd=adds, pointwise_bwd=adds, inputs=[(X, es)], outputs=[(Y, es)],
              saved=[(X, es)], params=params, grads=[(X, es), (Y, es)])


def logits(b, l, q, h, es, flags, l_kv=None):
    k = l if l_kv is None else l_kv
    Q, K, A = (b, h, l, q), (b, h, k, q), (b, h, l, k)
    return Op(products_fwd=[(b * h, l, q, k)], products_bwd=[(b * h, l, k, q), (b * h, k, l, q)],
              inputs=[(Q, es)], other=[(K, es)], outputs=[(A, es)], saved=[(Q, es), (K, es)],
              grads=[(Q, es), (K, es), (A, es)])


def attend(b, l, q, h, es, flags, l_kv=None):
    k = l if l_kv is None else l_kv
    A, V, Y = (b, h, l, k), (b, h, k, q), (b, h, l, q)
    grads = [(A, es), (V, es)] + ([(Y, es)] if flags.attend_both else [])
    return Op(products_fwd=[(b * h, l, k, q)], products_bwd=[(b * h, l, q, k), (b * h, k, l, q)],
              inputs=[(A, es)], other=[(V, es)], outputs=[(Y, es)], saved=[(A, es), (V, es)],
              grads=grads)


def softmax(b, l, h, es, flags, l_kv=None):
    k = l if l_kv is None else l_kv
    A = (b, h, l, k)
    n, rows = math.prod(A), b * h * l
    row_sum = rows * (k - 1)
    return Op(pointwise_fwd=2 * n + row_sum, pointwise_bwd=3 * n + row_sum, inputs=[(A, es)],
              outputs=[(A, es)], saved=[(A, es)], grads=[(A, es), (A, es)])


def flash(b, l, q, h, es, flags, l_kv=None):
    """Fused attention: the arithmetic of logits, softmax, dropout and attend; backward
    redoes the first three forward; keeps Q, K, V, O and the row log-sum-exp (fp32, 4 bytes, as
    FlashAttention and PyTorch's flash kernels return it)."""
    k = l if l_kv is None else l_kv
    parts = [logits(b, l, q, h, es, flags, k), softmax(b, l, h, es, flags, k),
             pointwise(b, l, k * h, es, flags, 1), attend(b, l, q, h, es, flags, k)]
    Q, KV, lse = (b, h, l, q), (b, h, k, q), (b, h, l)
    recompute = Op(products_fwd=[], products_bwd=parts[0].products_fwd,
                   pointwise_bwd=parts[1].pointwise_fwd + parts[2].pointwise_fwd)
    ops = parts + [recompute]
    return Op(products_fwd=sum((p.products_fwd for p in parts), []),
              products_bwd=sum((p.products_bwd for p in ops), []),
              pointwise_fwd=sum(p.pointwise_fwd for p in parts),
              pointwise_bwd=sum(p.pointwise_bwd for p in ops),
              inputs=[(Q, es)], other=[(KV, es), (KV, es)], outputs=[(Q, es)],
              saved=[(Q, es), (KV, es), (KV, es), (Q, es), (lse, 4)],
              grads=[(Q, es), (KV, es), (KV, es), (Q, es)])


def pointwise(b, l, x, es, flags, mask_bytes=None):
    """GELU (no mask) or dropout (mask of mask_bytes per element)."""
    T = (b, l, x)
    n = math.prod(T)
    grads = [(T, es)] * (2 if flags.grad_both else 1)
    if mask_bytes is None:
        return Op(pointwise_fwd=n, pointwise_bwd=n, inputs=[(T, es)], outputs=[(T, es)],
                  saved=[(T, es)], grads=grads)
    return Op(pointwise_fwd=n, pointwise_bwd=n, inputs=[(T, es)], other=[(T, mask_bytes)],
              outputs=[(T, es)], saved=[(T, mask_bytes)], grads=grads)


def layer_norm(b, l, e, es, flags):
    X = (b, l, e)
    n = math.prod(X)
    stats = [((b, l), es), ((b, l), es)] if flags.ln_stats else []
    return Op(pointwise_fwd=9 * n, pointwise_bwd=9 * n + 4 * b * l * (e - 1),
              inputs=[(X, es)], other=stats, outputs=[(X, es)], saved=[(X, es)] + stats,
              params=[((e,), es), ((e,), es)], grads=[(X, es), (X, es)],
              bwd_reads_params=flags.ln_bwd_reads_params)


# ----------------------------------------------------------------------------- collectives

def ring_reduce_scatter(n: int, elements: int):
    """Simulate a ring reduce-scatter; return (elements sent per device, adds per device)."""
    chunk = elements // n
    contributions = [[{i} for _ in range(n)] for i in range(n)]   # device -> chunk -> sources
    sent = [0] * n
    adds = [0] * n
    for step in range(n - 1):
        messages = [((i - step) % n, set(contributions[i][(i - step) % n])) for i in range(n)]
        for i, (c, sources) in enumerate(messages):
            sent[i] += chunk
            target = (i + 1) % n
            contributions[target][c] |= sources
            adds[target] += chunk
    for i in range(n):   # device i ends with chunk i+1 reduced over everybody
        assert contributions[i][(i + 1) % n] == set(range(n))
    assert len(set(sent)) == 1 and len(set(adds)) == 1
    return sent[0], adds[0]


def ring_allgather(n: int, elements: int):
    """Simulate a ring allgather; return elements sent per device."""
    chunk = elements // n
    held = [{i} for i in range(n)]
    sent = [0] * n
    for step in range(n - 1):
        messages = [(i - step) % n for i in range(n)]
        for i, c in enumerate(messages):
            assert c in held[i]
            held[(i + 1) % n].add(c)
            sent[i] += chunk
    assert all(h == set(range(n)) for h in held)
    return sent[0]


def comm(kind, group, elements, es, pass_, flags):
    """(pass, reported bytes, ring bytes sent per device, adds per device) or None."""
    if group == 1:
        return None
    if kind == "allgather":
        sent, adds = ring_allgather(group, elements), 0
    elif kind == "reducescatter":
        sent, adds = ring_reduce_scatter(group, elements)
    else:  # allreduce = reduce-scatter + allgather
        rs, adds = ring_reduce_scatter(group, elements)
        sent = rs + ring_allgather(group, elements)
    ring = Fraction(sent) * es
    reported = Fraction(elements) * es if flags.full_volume else ring
    return pass_, reported, ring, adds


def reduce_to_shards(elements, es, m1, s, pass_, flags):
    """Sum m1 partial tensors; each device keeps its 1/s sequence shard."""
    if s == 1:
        return [comm("allreduce", m1, elements, es, pass_, flags)]
    return [comm("reducescatter", m1, elements, es, pass_, flags),
            comm("allgather", m1 // s, elements // s, es, pass_, flags)]


# ----------------------------------------------------------------------------- blocks

def _row(name, op, flags, comms=()):
    values = fields_of(op, flags)
    comms = [c for c in comms if c is not None]
    for pass_, _, _, adds in comms:
        if flags.reduction_adds:
            values[f"flops_{pass_}"] += adds
    values["comms"] = comms
    return name, values


def _entering_row(name, b, l, e, n, bias, es, m1, s, flags):
    """The first matmul of the tensor region: its input gradient is summed over m1 and
    re-sharded; keeping only the l/s shard of its input (Megatron), it gathers it again
    in backward before forming dW (so backward still reads the whole gathered input)."""
    comms = reduce_to_shards(b * l * e, es, m1, s, "bwd", flags)
    shard = flags.shard_inputs and s > 1
    if shard:
        comms = [comm("allgather", s, b * l * e, es, "bwd", flags)] + comms
    name, values = _row(name, linear(b, l, e, n, bias, es, flags), flags, comms)
    if shard:
        values["act_buffer"] = nbytes([((b, l // s, e), es)])
    return name, values


def _norm_row(name, b, l, e, s, es, flags):
    return _row(name, layer_norm(b, l // s, e, es, flags), flags,
                [comm("allgather", s, b * l * e, es, "fwd", flags)])


def _dropout_row(name, b, l, e, s, es, es_mask, flags):
    return _row(name, pointwise(b, l // s, e, es, flags, es_mask), flags,
                [comm("allgather", s, b * l * e, es, "bwd", flags)])


def mlp(b, l, e, f, m1, s1, es, es_mask, flags, bias=True):
    s = m1 if flags.seq_by_m1 else s1
    n = b * l * e
    rows = [] if flags.norm_in_attention else [_norm_row("layer_norm_2", b, l, e, s, es, flags)]
    rows += [
        _entering_row("fc1", b, l, e, f // m1, bias, es, m1, s, flags),
        _row("act", pointwise(b, l, f // m1, es, flags), flags),
        *([_row("dpr1", pointwise(b, l, f // m1, es, flags, es_mask), flags)] if flags.act_dropout else []),
        _row("fc2", linear(b, l, f // m1, e, bias, es, flags), flags,
             reduce_to_shards(n, es, m1, s, "fwd", flags)),
        _dropout_row("dpr2", b, l, e, s, es, es_mask, flags),
    ]
    return dict(rows)


def attention(b, l, e, h, m1, s1, es, es_mask, flags, qkv_bias=True):
    s = m1 if flags.seq_by_m1 else s1
    n, q, hd = b * l * e, e // h, h // m1
    rows = [
        _norm_row("layer_norm_1", b, l, e, s, es, flags),
        _entering_row("qkv_proj", b, l, e, 3 * e // m1, qkv_bias, es, m1, s, flags),
        _row("logits", logits(b, l, q, hd, es, flags), flags),
        _row("softmax", softmax(b, l, hd, es, flags), flags),
        _row("dropout_softmax", pointwise(b, l, l * hd, es, flags, es_mask), flags),
        _row("attend", attend(b, l, q, hd, es, flags), flags),
        _row("v_proj", linear(b, l, e // m1, e, True, es, flags), flags,
             reduce_to_shards(n, es, m1, s, "fwd", flags)),
        _dropout_row("dropout", b, l, e, s, es, es_mask, flags),
    ]
    if flags.norm_in_attention:
        rows.append(_norm_row("layer_norm_2", b, l, e, s, es, flags))
    return dict(rows)


def tile_walk_loads(m: int, k: int, n: int, tile: int) -> tuple[int, int, int]:
    """Elements of A (m, k), B (k, n) and C (m, n) moved by a blocked matmul loop.

    The loop walks output tiles row by row; for each it streams the k blocks,
    loading an A tile unless it is the one already resident (one A tile fits
    beside the streamed B tile and the output tile) and always loading the B
    tile; each output tile is written once.
    """
    a = b = c = 0
    resident = None
    for i in range(0, m, tile):
        rows = min(tile, m - i)
        for j in range(0, n, tile):
            cols = min(tile, n - j)
            for kk in range(0, k, tile):
                depth = min(tile, k - kk)
                if resident != (i, kk):
                    a, resident = a + rows * depth, (i, kk)
                b += depth * cols
            c += rows * cols
    return a, b, c
