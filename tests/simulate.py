"""Step-by-step simulations of a training step: pipeline schedules, ZeRO sharding, recomputation.

Plain Python on integers and Fractions, written from the algorithms (nothing here imports
symbolic_cost); ``tests/test_simulations.py`` holds the library's expressions against them.

* Pipelines (Huang et al. 2019, GPipe; Narayanan et al. 2021, 1F1B "PipeDream-flush" and
  Megatron's interleaved 1F1B with ``v`` model chunks per rank): each rank runs its own
  order of forward and backward slots; a clock ticks one slot at a time and a rank starts
  its next slot as soon as the slot it depends on has finished on the neighbouring rank.
* ZeRO stages 0-3 (Rajbhandari et al. 2020) and Megatron's distributed optimizer: ``d``
  ranks, parameters cut into ``d`` shards; a step of ``n`` micro-batches is run on integer
  gradients and every collective a rank needs, because it lacks a shard, is logged.
* Recomputation: a layer is a list of operations with the named tensors each reads, writes
  and saves for backward; a policy marks some operations as recomputed, and the tensors
  live at the end of the forward follow from checkpointing rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from reference import ring_allgather, ring_reduce_scatter

# ----------------------------------------------------------------------------- pipelines

F, B = "F", "B"


def _alternate(forwards, backwards, warmup):
    """Warm-up forwards, then one forward and one backward in turn, then the rest of the backwards."""
    steady = len(forwards) - warmup
    order = list(forwards[:warmup])
    for i in range(steady):
        order += [forwards[warmup + i], backwards[i]]
    return order + list(backwards[steady:])


def _interleaved_slot(k, p, v, forward):
    """Micro-batch and model chunk of a rank's ``k``-th forward (or backward): groups of ``p``
    micro-batches go through chunk 0, then chunk 1, ... (backwards through the chunks in reverse)."""
    group, within = divmod(k, p * v)
    chunk = within // p
    return group * p + within % p, (chunk if forward else v - 1 - chunk)


def rank_order(schedule, p, n, rank, v=1):
    """The slots one rank runs, in order, as ``(F or B, micro-batch, virtual stage)``; the
    virtual stage of chunk ``c`` on rank ``r`` is ``c p + r``."""
    if schedule == "gpipe":
        return [(F, m, rank) for m in range(n)] + [(B, m, rank) for m in range(n)]
    if schedule == "1f1b":       # warm-up: as many forwards as stages after this one
        return _alternate([(F, m, rank) for m in range(n)], [(B, m, rank) for m in range(n)],
                          min(p - rank - 1, n))
    if schedule != "interleaved":
        raise ValueError(f"schedule must be gpipe, 1f1b or interleaved, got {schedule!r}")
    if n % p:
        raise ValueError(f"the interleaved schedule needs p | n, got p={p}, n={n}")
    def slots(forward):
        chunks = (_interleaved_slot(k, p, v, forward) for k in range(n * v))
        return [(F if forward else B, m, c * p + rank) for m, c in chunks]
    # Megatron-LM core: two slots per later rank plus a round of p micro-batches per other chunk
    # (its 2021 version ran every forward first when n = p)
    warmup = min(2 * (p - rank - 1) + (v - 1) * p, n * v)
    return _alternate(slots(True), slots(False), warmup)


def _after(slot, stages):
    """The slot that must finish first: the previous stage's forward, the next stage's backward
    (the last stage's backward waits for its own forward)."""
    kind, m, s = slot
    if kind == F:
        return (F, m, s - 1) if s > 0 else None
    return (B, m, s + 1) if s < stages - 1 else (F, m, s)


def _sends(target, p, v, rank):
    """Whether a slot of ``rank`` sends to virtual stage ``target``: it exists, on another rank."""
    return 0 <= target < p * v and target % p != rank


@dataclass
class Timeline:
    """What the simulated step did on each rank (slots of unit forward time)."""

    length: int                     # slots from the first forward to the last backward
    busy: list                      # slots each rank computed
    peak: list                      # most micro-batch (chunk) activations a rank held at once
    sent: list                      # most outputs a rank had sent and not yet seen the backward of
    sends: list                     # (forward, backward) sends of each rank to another rank
    starts: dict = field(repr=False, default_factory=dict)

    @property
    def idle(self):
        return [self.length - b for b in self.busy]

    def bubble(self, rank=0) -> Fraction:
        """Idle fraction of the step on ``rank``."""
        return Fraction(self.idle[rank], self.length)


def simulate_pipeline(schedule, p, n, v=1, forward=1, backward=1) -> Timeline:
    """Run the step slot by slot: at each tick a free rank starts its next slot if the slot it
    waits for has finished; a forward allocates one activation (and, unless on the last virtual
    stage, sends an output), its backward frees both."""
    if schedule != "interleaved" and v != 1:
        raise ValueError(f"v={v} model chunks need the interleaved schedule")
    orders = [rank_order(schedule, p, n, r, v) for r in range(p)]
    finish, starts = {}, {}
    pos, free, busy, held, peak, out, most = ([0] * p for _ in range(7))
    sends = [[0, 0] for _ in range(p)]
    t = 0
    while any(pos[r] < len(orders[r]) for r in range(p)):
        for r in range(p):
            if pos[r] == len(orders[r]) or free[r] > t:
                continue
            slot = orders[r][pos[r]]
            before = _after(slot, p * v)
            if before is not None and finish.get(before, math.inf) > t:
                continue
            span = forward if slot[0] == F else backward
            starts[slot], finish[slot], free[r] = t, t + span, t + span
            busy[r], pos[r] = busy[r] + span, pos[r] + 1
            kind, _, s = slot
            step = 1 if kind == F else -1
            held[r] += step
            peak[r] = max(peak[r], held[r])
            if _sends(s + 1, p, v, r):               # its output leaves for the next stage's rank
                out[r] += step
                most[r] = max(most[r], out[r])
            if _sends(s + step, p, v, r):            # forward: the output; backward: the input gradient
                sends[r][kind == B] += 1
        if all(f <= t for f in free) and not any(s == t for s in starts.values()):
            raise RuntimeError(f"{schedule} deadlocks at slot {t} (p={p}, n={n}, v={v})")
        t += 1
    assert all(h == 0 for h in held)
    return Timeline(max(finish.values()), busy, peak, most, [tuple(s) for s in sends], starts)


def stage_loads(p, n_layers, first, last, per_layer, last_copy=0):
    """A quantity on each of ``p`` pipeline stages: layer ``j`` goes to stage ``j // (L/p)``,
    the first stage adds ``first``, the last ``last`` (and ``last_copy`` if it is not the first)."""
    if n_layers % p:
        raise ValueError(f"p={p} must divide n_layers={n_layers}")
    loads = [0] * p
    for j in range(n_layers):
        loads[j // (n_layers // p)] += per_layer
    loads[0] += first
    loads[-1] += last + (last_copy if p > 1 else 0)
    return loads


# ----------------------------------------------------------------------------- ZeRO

STATES = ("weights", "gradients", "optimizer")


def sharded_states(zero, distributed_optimizer=False):
    """The states each rank keeps only one shard of: ZeRO-1 the optimizer (as Megatron's
    distributed optimizer), ZeRO-2 also the gradients, ZeRO-3 also the weights."""
    return {"weights": zero >= 3, "gradients": zero >= 2, "optimizer": zero >= 1 or distributed_optimizer}


@dataclass
class Comm:
    """One collective of the simulated step; ``when`` is fwd, bwd or step (after the last backward)."""

    kind: str
    state: str
    when: str
    micro: int | None
    elements: int
    element_bytes: int
    sent: Fraction               # bytes each rank sends in a ring


def _ring_bytes(kind, d, elements, element_bytes):
    """Bytes one rank sends: the ring run on ``d`` chunks of ``elements/d`` each."""
    chunks = {"allgather": lambda: ring_allgather(d, d),
              "reducescatter": lambda: ring_reduce_scatter(d, d)[0],
              "allreduce": lambda: ring_reduce_scatter(d, d)[0] + ring_allgather(d, d)}[kind]()
    return chunks * Fraction(elements, d) * element_bytes


def zero_step(parameters, d, zero, distributed_optimizer=False, n=1, nbytes=(2, 2, 12)):
    """Simulate one step over ``d`` ranks; return (bytes per rank of each state, collectives).

    Shard ``c`` is held by rank ``c``.  Forward and backward need every weight shard; a
    backward leaves a full local gradient, kept if gradients are not sharded, else reduced at
    once to the shard owners; the optimizer of a shard needs the gradient summed over ranks;
    a rank that keeps all weights needs every updated shard.  Gradients are integers and the
    updated weights are checked against the sum of all contributions.
    """
    sharded, size = sharded_states(zero, distributed_optimizer), dict(zip(STATES, nbytes))
    holds = {s: [{r} if sharded[s] else set(range(d)) for r in range(d)] for s in STATES}
    comms = []

    def run(kind, state, when, micro=None):
        es = size["weights" if state == "weights" else "gradients"]
        comms.append(Comm(kind, state, when, micro, parameters, es,
                          _ring_bytes(kind, d, parameters, es) if d > 1 else Fraction(0)))

    grad = lambda r, m, c: (r + 1) * 10 + (m + 1) * (c + 1)  # noqa: E731  (rank r, micro m, shard c)
    local = [dict.fromkeys(range(d), 0) for _ in range(d)]     # unreduced full gradients
    summed = [{} for _ in range(d)]                             # shard -> gradient summed over ranks
    for m in range(n):
        for when in ("fwd", "bwd"):
            if any(len(h) < d for h in holds["weights"]):
                run("allgather", "weights", when, m)
        for r in range(d):
            for c in range(d):
                local[r][c] += grad(r, m, c)
        if sharded["gradients"]:
            run("reducescatter", "gradients", "bwd", m)
            for c in range(d):
                summed[c][c] = summed[c].get(c, 0) + sum(local[r][c] for r in range(d))
            local = [dict.fromkeys(range(d), 0) for _ in range(d)]
    if not sharded["gradients"]:
        kind = "reducescatter" if sharded["optimizer"] else "allreduce"
        run(kind, "gradients", "step")
        for r in range(d):
            for c in (holds["optimizer"][r]):
                summed[r][c] = sum(local[q][c] for q in range(d))
    total = {c: sum(grad(r, m, c) for r in range(d) for m in range(n)) for c in range(d)}
    updated = [{c: -summed[r][c] for c in holds["optimizer"][r]} for r in range(d)]
    if any(holds["weights"][r] - set(updated[r]) for r in range(d)):
        run("allgather", "weights", "step")
        owners = {c: updated[r][c] for r in range(d) for c in updated[r]}
        updated = [{c: owners[c] for c in holds["weights"][r]} for r in range(d)]
    assert all(updated[r][c] == -total[c] for r in range(d) for c in holds["weights"][r])
    per_rank = {s: [len(holds[s][r]) * Fraction(parameters, d) * size[s] for r in range(d)] for s in STATES}
    return per_rank, comms


# ----------------------------------------------------------------------------- recomputation

@dataclass(frozen=True)
class Op:
    """One operation of a layer: the tensors it reads, writes and saves for backward."""

    name: str
    reads: tuple
    writes: tuple
    saves: tuple


CORE = ("logits", "softmax", "dropout_softmax", "attend")


def gpt_layer(b, l, e, h, f, m1=1, s1=1, es=2, mask=1, dropouts=True, act_dropout=True,
              ln_stats=True, keep_gathered=True, tag="", x="x", y="y"):
    """A pre-norm GPT layer under Megatron tensor (``m1``) and sequence (``s1``) parallelism:
    its operations and the bytes of every tensor (Korthikanti et al. 2022, section 4.1).

    Outside the tensor region tensors hold ``l/s1`` tokens; the QKV projection and fc1 read
    their input all-gathered to ``l`` tokens and save it gathered (``keep_gathered``) or save
    the shard and gather it again in backward (Megatron-LM).  ``act_dropout``: a dropout after
    the activation (LBNL 2024); ``dropouts=False`` removes every dropout.  The closing dropouts
    add the residual (``x + dropout(attn)``).
    """
    tok, shard, scores = Fraction(b * l), Fraction(b * l, s1), Fraction(b * h * l * l, m1)
    t = lambda name: tag + name  # noqa: E731
    size = {x: shard * e * es, y: shard * e * es}
    ops = []

    def op(name, reads, writes, saves):
        ops.append(Op(name, tuple(reads), tuple(writes), tuple(saves)))

    def norm(name, inp, out):
        stats = [t(name + ".stats")] if ln_stats else []
        size.update({out: shard * e * es, **{s: 2 * shard * es for s in stats}})
        op(name, [inp], [out] + stats, [inp] + stats)

    def entering(name, inp, outs):
        kept = inp if s1 == 1 or not keep_gathered else inp + ".gathered"
        size.update({inp + ".gathered": tok * e * es, **outs})
        op(name, [inp], list(outs), [kept])

    def dropout(name, inp, out, elements, residual=None):
        if not dropouts:
            if residual:
                size[out] = elements * es
                op("residual", [inp, residual], [out], [])
                return out
            return inp
        size.update({out: elements * es, t(name + ".mask"): elements * mask})
        op(name, [inp] + ([residual] if residual else []), [out, t(name + ".mask")], [t(name + ".mask")])
        return out

    norm("layer_norm_1", x, t("ln1"))
    entering("qkv_proj", t("ln1"), {t(c): tok * e / m1 * es for c in "qkv"})
    size.update({t("scores"): scores * es, t("probs"): scores * es, t("ctx"): tok * e / m1 * es,
                 t("attn"): shard * e * es, t("fc2"): shard * e * es})
    op("logits", [t("q"), t("k")], [t("scores")], [t("q"), t("k")])
    op("softmax", [t("scores")], [t("probs")], [t("probs")])
    probs = dropout("dropout_softmax", t("probs"), t("probs.dropped"), scores)
    op("attend", [probs, t("v")], [t("ctx")], [probs, t("v")])
    op("v_proj", [t("ctx")], [t("attn")], [t("ctx")])
    h1 = dropout("dropout", t("attn"), t("h1"), shard * e, residual=x)
    norm("layer_norm_2", h1, t("ln2"))
    entering("fc1", t("ln2"), {t("fc1"): tok * f / m1 * es})
    size[t("act")] = tok * f / m1 * es
    op("act", [t("fc1")], [t("act")], [t("fc1")])
    hidden = dropout("dpr1", t("act"), t("act.dropped"), tok * f / m1) if act_dropout else t("act")
    op("fc2", [hidden], [t("fc2")], [hidden])
    dropout("dpr2", t("fc2"), y, shard * e, residual=h1)
    return ops, size


def live_tensors(ops, segments):
    """Tensors held at the end of the forward when ``segments`` are recomputed.

    A segment is ``(operation names, discard)``: its operations save nothing; it keeps its
    inputs written outside it (the checkpoint).  Its outputs stay if an operation outside saves
    them (``torch.utils.checkpoint``), unless ``discard`` (Megatron's checkpoint-without-output:
    the output is freed after use and recomputed before the backward that needs it).
    """
    redo = {name for names, _ in segments for name in names}
    discarded = {t for names, drop in segments if drop for o in ops if o.name in names for t in o.writes}
    live = {t for o in ops if o.name not in redo for t in o.saves if t not in discarded}
    for names, _ in segments:
        inside = {t for o in ops if o.name in names for t in o.writes}
        live |= {t for o in ops if o.name in names for t in o.reads if t not in inside}
    return live


def policy(ops, recompute):
    """Segments of one layer for a recomputation policy: none, selective (the attention core,
    Korthikanti et al. 2022), full (the whole layer) or activation (the activation function only)."""
    names = [o.name for o in ops]
    act = [a for a in ("act", "dpr1") if a in names]
    return {"none": [], "full": [(names, False)], "activation": [(act, True)],
            "selective": [([c for c in CORE if c in names], False)]}[recompute]


def kept(ops, size, segments) -> Fraction:
    """Bytes live at the end of the forward."""
    return sum((size[t] for t in live_tensors(ops, segments)), Fraction(0))


def redone(ops, segments, work: dict):
    """The extra forward work: the sum of ``work[name]`` over the recomputed operations
    (``work`` maps an operation to its forward FLOPs, or to its forward collectives' bytes)."""
    redo = {name for names, _ in segments for name in names}
    return sum(work.get(o.name, 0) for o in ops if o.name in redo)


def stage(n_layers, method, k, **layer):
    """``n_layers`` layers in a row (layer ``i`` reads ``x{i}``, writes ``x{i+1}``) and the
    segments of full recomputation with ``k`` layers (Megatron-LM): ``uniform`` checkpoints the
    input of every group of ``k`` layers and recomputes all; ``block`` recomputes the first ``k``
    layers, one checkpoint each, and keeps everything of the others."""
    ops, size, per_layer = [], {}, []
    for i in range(n_layers):
        o, s = gpt_layer(**layer, tag=f"L{i}.", x=f"x{i}", y=f"x{i + 1}")
        ops += [Op(f"L{i}.{op.name}", op.reads, op.writes, op.saves) for op in o]
        size.update(s)
        per_layer.append([f"L{i}.{op.name}" for op in o])
    if method == "uniform":
        segments = [(sum(per_layer[i:i + k], []), False) for i in range(0, n_layers, k)]
    elif method == "block":
        segments = [(per_layer[i], False) for i in range(min(k, n_layers))]
    else:
        raise ValueError(f"method must be uniform or block, got {method!r}")
    return ops, size, segments
