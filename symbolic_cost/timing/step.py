"""Step time of a whole model: seconds per iteration on the busiest device, by part."""

from __future__ import annotations

from sympy import Add, Expr, Integer, Rational

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.moe import SHARED_ROWS
from symbolic_cost.checks import InputError
from symbolic_cost.collective_kinds import kind_of
from symbolic_cost.collector import paused
from symbolic_cost.cost import exact
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.models import ModelCost
from symbolic_cost.models.whole_model import model_cost_of
from symbolic_cost.models.ranks import cost_placement
from symbolic_cost.models.memory import recomputed_costs
from symbolic_cost.models.recipes import reference_rows
from symbolic_cost.models.training import overlaps_sends
from symbolic_cost.parallel.pipeline import dualpipe_bubble
from symbolic_cost.timing import attention_kernels
from symbolic_cost.timing.hardware import comm_time, get_system, row_seconds
from symbolic_cost.timing.systems import check_block_scaling
from symbolic_cost.timing.host import host_step_time, host_time
from symbolic_cost.trees import remembered_on


@paused()
def step_time_breakdown(cost: ModelCost, system, conventions=conv.DEFAULT) -> dict[str, Expr]:
    """Seconds per iteration on the busiest device, by part (the busiest rank of
    ``models.placement.Placement``):

    * ``compute``: micro-batches x the stage's roofline times (forward, backward, and the
      forward its recomputed layers redo);
    * ``tensor_comm``: micro-batches x the stage's tensor/sequence collectives (those of
      a recomputed forward again); of a context-parallel ring's sends, and under ``Overlap.tensor``
      of the others, only what outlasts the product each runs under (``tensor_comm_exposed``);
    * ``bubble``: ``(p - 1)/v`` more micro-batch slots of the stage, idle or warming up
      (``v`` chunks per rank under the interleaved schedule, else 1); under ZB-H1
      ``(p - 1)(T_F + T_B - min(T_W, T_F, T_B))`` with ``T_W`` the stage's weight-gradient
      time and ``T_B`` the rest of its backward (``parallel.pipeline``); under DualPipe
      ``parallel.pipeline.dualpipe_bubble`` of the same ``T_F``, ``T_B``, ``T_W`` (a stage chunk
      of the busiest stage; an overlapped forward and backward chunk takes their sum: the
      communication it hides is ``Training.overlap``'s);
    * ``pipeline_comm``: the stage's p2p sends (under the interleaved schedule with
      ``Overlap.pipeline`` what outlasts the stage's compute: ``_pipeline_time``); ``data_comm``: the gradient and
      parameter collectives of data parallelism, and of expert data parallelism for
      the routed experts, less what ``Training.overlap`` hides behind the backward
      (gradients) or forward (parameters): a once-a-step collective behind one micro-batch's, one
      repeated every micro-batch (ZeRO-2/3, FSDP) behind each micro-batch's own (``_data_time``),
      and a compressed optimizer's momentum exchange (dimension ``"optimizer"``:
      ``parallel.zero.compressed_exchange``), in the optimizer step, whole; the all-to-alls of MoE layers are block
      collectives, in ``tensor_comm``, which ``overlap.tensor`` does not hide (``hidden_by_tensor_overlap``) and
      ``overlap.expert`` does, each behind its slot of another micro-batch (``all_to_all_exposed``);
    * ``reference`` (only with ``Trainable.reference``): micro-batches x the stage's forward
      of a frozen reference model (``models.recipes.reference_rows``: the layers' rows but LoRA's
      adapters) with its tensor collectives, run in turn with the rest (TRL runs it between the
      trained model's forward and backward), and its ZeRO-3 gathers less what ``Overlap.param_gather``
      hides behind it (``_reference_time``);
    * ``optimizer`` (calibrated systems only, ``timing.hardware.calibrated``): the
      memory-bound optimizer step (``optimizer_time``); ``framework``, the same systems' fixed
      seconds of a step outside its kernels (``Efficiency.step``);
    * ``host_comm`` and ``host_step`` (only when the training offloads): the offload traffic
      on the host link (``timing.host.host_time``) and the optimizer step on the host
      (``timing.host.host_step_time``), not overlapped with the rest (an upper bound: DeepSpeed
      overlaps part of the traffic with backward);
    * ``total``: their sum.
    """
    cost, system, conventions = model_cost_of(cost), get_system(system), conv.get(conventions)
    t = cost.training
    check_block_scaling(t.fp8, system)
    system = attention_kernels.for_training(system, t)
    p, n = exact(t.p, "p"), exact(t.micro_batches, "micro_batches")
    place = cost_placement(cost)
    compute, tensor, unhidden, exposed, expert = {}, {}, {}, {}, {}
    for pass_ in ("fwd", "bwd"):
        compute[pass_], tensor[pass_], unhidden[pass_], exposed[pass_], expert[pass_] = \
            _stage_pass(cost, place, system, conventions, pass_)
    compute_all, alltoall = compute["fwd"] + compute["bwd"], unhidden["fwd"] + unhidden["bwd"]
    # what an overlap hides shows only where it outlasts the compute it runs beside: a ring's sends
    # and with Overlap.tensor the layers' collectives but the all-to-alls behind their own products
    # (tensor_comm_exposed), with Overlap.expert each all-to-all behind its slot of another
    # micro-batch (all_to_all_exposed)
    tensor_all = exposed["fwd"] + exposed["bwd"] + (expert["bwd"] if t.overlap.expert else alltoall)
    if t.overlap.shared_expert:     # the all-to-alls under the shared experts' stream, as far as it lasts
        tensor_all = tensor_all - minimum(alltoall, _shared_expert_seconds(cost, place, system, conventions))
    per_micro = compute_all + tensor_all
    if p == 1:      # no pipeline, no bubble: not 0 x the stage's time, a sum SymPy would ask is finite
        bubble = Integer(0)
    elif t.schedule not in ("zb-h1", "dualpipe"):
        bubble = (p - 1) / t.virtual_stages * per_micro     # interleaving shrinks the warm-up by v
    else:                                           # the weight gradients fill the cool-down
        w = _weight_gradient_time(cost, place, system, conventions)
        f = compute["fwd"] + tensor["fwd"]
        bubble = (p - 1) * (per_micro - w - minimum(w, f, per_micro - f - w)) if t.schedule == "zb-h1" \
            else dualpipe_bubble(p, f, per_micro - f - w, w)
    out = {"compute": n * compute_all, "tensor_comm": n * tensor_all, "bubble": bubble,
           "pipeline_comm": _pipeline_time(cost, system, conventions, n * compute_all),
           "data_comm": _data_time(cost, system, conventions, compute)
           + _dimension_time(cost, "optimizer", system, conventions)}     # a compressed exchange, never hidden
    if t.reference is not None:     # its forward after the trained model's, before the backward (TRL's DPOTrainer)
        out["reference"] = _reference_time(cost, place, system, conventions)
    if system.efficiency is not None:
        out["optimizer"] = optimizer_time(cost, system)
        out["framework"] = system.efficiency.step
    if t.offload != "none":
        out["host_comm"] = host_time(cost, system)
        out["host_step"] = host_step_time(cost, system)
    out["total"] = sum(out.values(), Integer(0))
    return out


def hidden_by_tensor_overlap(c) -> bool:
    """Whether ``Overlap.tensor`` may hide a layer's collective ``c``
    (``Kind.tensor_overlap``): Megatron-LM's ``--tp-comm-overlap`` overlaps Transformer Engine's
    tensor-parallel all-gathers and reduce-scatters with their products; the MoE token dispatch and
    combine (and Ulysses' head exchange) are all-to-alls outside it, with a switch of their own, the
    1F1B all-to-all overlap (``Overlap.expert``; ``models.training`` refuses it beside Ulysses,
    whose exchange it would hide too)."""
    return kind_of(c.kind).tensor_overlap


def _pipeline_time(cost: ModelCost, system, conventions, compute) -> Expr:
    """Seconds the stage's sends add: all of them, or under an interleaved schedule that posts them
    behind the next chunk (``models.training.overlaps_sends``) what outlasts the stage's ``compute``."""
    sends = _dimension_time(cost, "pipeline", system, conventions)
    return maximum(0, sends - compute) if overlaps_sends(cost.training) else sends


def _stage_pass(cost: ModelCost, place, system, conventions, pass_: str) -> tuple[Expr, ...]:
    """(compute, tensor-communication, its part ``hidden_by_tensor_overlap`` leaves, what
    ``tensor_comm_exposed`` leaves of the rest under ``Overlap.tensor``, and on the backward what
    ``all_to_all_exposed`` leaves of both passes' all-to-alls under ``Overlap.expert``) seconds of one
    micro-batch's ``pass_`` on the busiest stage; the backward includes the forward its recomputed
    layers redo.  Remembered by stack (``trees.remembered_on``): a search's ZeRO stages, offloads and
    schedules share it."""
    overlap = cost.training.overlap
    return remembered_on(_PASSES, cost.stack, (place, cost.training.recomputation, system, conventions, pass_,
                                               overlap.tensor, overlap.expert),
                         lambda: _stage_seconds(cost, place, system, conventions, pass_))


_PASSES: dict = {}
"""A stage's pass and weight-gradient seconds by stack, placement and system."""


def _stage_seconds(cost: ModelCost, place, system, conventions, pass_: str) -> tuple[Expr, ...]:
    t = cost.training

    def parts(rows, passes):
        seconds = [row_seconds(r, system, conventions) for r in rows]
        unhidden = Add(*(comm_time(c, system, conventions) for r in rows for c in r.collectives
                         if not hidden_by_tensor_overlap(c) and c.pass_ in passes))
        exposed = Add(*(tensor_comm_exposed(rows, seconds, p_, system, conventions, t.overlap.tensor)
                        for p_ in passes))
        return tuple(Add(*(s[f"{kind}{p_}"] for s in seconds for p_ in passes))    # one flatten, not one a row
                     for kind in ("t_", "t_comm_")) + (unhidden, exposed)

    def expert(blk):        # what Overlap.expert leaves of a block's all-to-alls, both passes, on the backward
        return all_to_all_exposed(blk, [row_seconds(r, system, conventions) for r in blk], system, conventions) \
            if pass_ == "bwd" and t.overlap.expert else Integer(0)

    middle = cost.stack[1:-1]                       # every layer group (and T5's middle ends)
    if pass_ == "reference":                        # the reference model's forward: no adapters, nothing redone
        rows, pass_ = reference_rows, "fwd"
    else:
        rows = lambda blk: blk  # noqa: E731
    start = parts(rows(cost.embedding), (pass_,)) + (expert(rows(cost.embedding)),)
    end = parts(rows(cost.head), (pass_,)) + (expert(rows(cost.head)),)     # MTP's layers with it
    layers = [parts(rows(blk), (pass_,)) + (expert(rows(blk)),) for blk, _ in middle]
    redo = [(0,) * 5] * len(middle)
    if pass_ == "bwd":      # a redone forward's all-to-alls (MoE layers recomputed whole) have no partner: whole
        redone = (parts(recomputed_costs(blk, t.recomputation), ("fwd",)) for blk, _ in middle)
        redo = [(*part, part[2]) for part in redone]
    return tuple(place.busiest_redoing(start[i], end[i], [w[i] for w in layers], [r[i] for r in redo])
                 for i in range(5))


def _reference_time(cost: ModelCost, place, system, conventions) -> Expr:
    """Seconds of a step's reference-model forwards (``Trainable.reference``) on the busiest device:
    each micro-batch's forward of ``models.recipes.reference_rows`` with its tensor collectives, and
    its ZeRO-3 gathers (dimension ``"reference"``), each micro-batch's behind that forward where
    ``Overlap.param_gather`` is on (the prefetch FSDP and ZeRO-3 run for any module they wrap)."""
    n = exact(cost.training.micro_batches, "micro_batches")
    compute, tensor, *_ = _stage_pass(cost, place, system, conventions, "reference")
    gathers = _dimension_time(cost, "reference", system, conventions)
    exposed = n * maximum(0, gathers / n - compute) if cost.training.overlap.param_gather else gathers
    return n * (compute + tensor) + exposed


def _shared_expert_seconds(cost: ModelCost, place, system, conventions) -> Expr:
    """Seconds of one micro-batch's shared experts (``blocks.moe.SHARED_ROWS``: their products and
    collectives, forward, backward and any forward recomputation redoes) on the busiest stage:
    what Megatron-Core's ``--moe-shared-expert-overlap`` runs on its own stream while the token
    dispatch and combine all-to-alls of the same layer are in flight (``SharedExpertMLP``: fc1
    under the dispatch, fc2 under the combine; backward on the stream of its forward)."""
    def part(rows):
        seconds = [row_seconds(r, system, conventions) for r in rows if r.name in SHARED_ROWS]
        return Add(*(s[f"t_total_{p_}"] for s in seconds for p_ in ("fwd", "bwd")))

    def redone(rows):
        return Add(*(row_seconds(r, system, conventions)["t_total_fwd"] for r in rows if r.name in SHARED_ROWS))
    t = cost.training
    return remembered_on(_PASSES, cost.stack, (place, t.recomputation, system, conventions, "shared"),
                         lambda: place.busiest_redoing(0, 0, [part(blk) for blk, _ in cost.stack[1:-1]],
                                                       [redone(recomputed_costs(blk, t.recomputation))
                                                        for blk, _ in cost.stack[1:-1]]))


def _weight_gradient_time(cost: ModelCost, place, system, conventions) -> Expr:
    """``T_W``: seconds of one micro-batch's weight gradients on the busiest stage, each row's
    backward time times its weight-gradient share of the backward FLOPs (``Cost.flops_wgrad``)."""
    def part(rows):
        return Add(*(row_seconds(r, system, conventions)["t_bwd"] * r.flops_wgrad / r.flops_bwd
                     for r in rows if r.flops_bwd != 0))

    return remembered_on(_PASSES, cost.stack, (place, system, conventions, "wgrad"), lambda: place.busiest(
        part(cost.embedding), part(cost.head), [part(blk) for blk, _ in cost.stack[1:-1]]))


def _dimension_time(cost: ModelCost, dimension: str, system, conventions, kinds=None) -> Expr:
    """Seconds of the step's collectives of one dimension (of some kinds only, if given)."""
    return Add(*(comm_time(c, system, conventions) for d_, c in cost.collectives
                 if d_ == dimension and (kinds is None or c.kind in kinds)))


def _data_time(cost: ModelCost, system, conventions, compute: dict) -> Expr:
    """Data-parallel (and expert data-parallel) collectives, less what ``Training.overlap``
    hides: the gradient reductions behind the backward, the parameter all-gathers behind the
    forward (the window Megatron-LM's buckets and FSDP's prefetch have), and ZeRO-3's backward
    re-gathers behind the backward (FSDP2 prefetches the previous unit while one computes its
    gradients, on an all-gather stream of its own beside the reduce-scatters').  A collective run once
    a step (DDP's all-reduce, the distributed optimizer's) has one micro-batch's pass to hide
    behind; one run every micro-batch (ZeRO-2's reduce-scatter, FSDP's gathers and reductions)
    has each micro-batch's own, the last one's shared with the once-a-step ones: per group,
    ``(n - 1) max(0, P - W) + max(0, P + O - W)`` with ``P`` a micro-batch's share, ``O`` the
    once-a-step seconds and ``W`` one micro-batch's compute of the window's pass (with ``n = 1``
    the single window ``max(0, P + O - W)``)."""
    t = cost.training
    n = exact(t.micro_batches, "micro_batches")
    each, once = ({group: Integer(0) for group in ("grad", "param", "regather")} for _ in range(2))
    for dim, c in cost.collectives:
        group = kind_of(c.kind).window
        if dim in ("data", "expert_data") and group is not None:
            seconds = comm_time(c, system, conventions)
            if group == "param" and c.pass_ == "bwd" and t.zero == 3:
                group = "regather"      # FSDP's backward re-gather: behind the backward, not the forward
            if n != 1 and c.repeats == n:
                each[group] += seconds / n
            else:
                once[group] += seconds
    exposed = Integer(0)
    for group, hidden, window in (("grad", t.overlap.grad_reduce, compute["bwd"]),
                                  ("param", t.overlap.param_gather, compute["fwd"]),
                                  ("regather", t.overlap.param_gather, compute["bwd"])):
        if hidden:
            exposed += (n - 1) * maximum(0, each[group] - window) + maximum(0, each[group] + once[group] - window)
        else:
            exposed += n * each[group] + once[group]
    return exposed


def optimizer_time(cost: ModelCost, system) -> Expr:
    """Seconds of the optimizer step on the busiest device, memory bound: it reads the
    gradients and the optimizer state (master weights, moments) and writes the state and the
    working weights back, ``2 x optimizer + gradient + weight`` bytes of the trained parameters
    it updates (``ModelCost.optimizer_step_bytes``: under ZeRO-1 and 2, and Megatron-LM's
    distributed optimizer, its shard of them; none of a frozen base or a reference model; none
    where the host runs the step) at the calibrated HBM bandwidth (``Efficiency.memory``).  Only
    the calibrated model times it."""
    cost, system = model_cost_of(cost), get_system(system)
    if system.efficiency is None:
        raise InputError(f"optimizer_time times on the calibrated model, and {system.name} is the datasheet's "
                         f"alone: give timing.hardware.calibrated({system.name!r})", "system")
    return cost.optimizer_step_bytes / (system.hbm_bandwidth * system.efficiency.memory)


def layer_time(cost: ModelCost, system, conventions=conv.DEFAULT, group: int = 0) -> dict[str, Expr]:
    """Seconds of one layer of layer group ``group`` for one micro-batch, as Korthikanti et al.
    2022 (Table 4) time it: ``fwd``, its rows' forward with their collectives; ``bwd``, their
    backward plus the forward its recomputed rows redo; ``total``, both."""
    cost, system, conventions = model_cost_of(cost), get_system(system), conv.get(conventions)
    check_block_scaling(cost.training.fp8, system)
    system = attention_kernels.for_training(system, cost.training)
    groups = len(cost.stack) - 2            # between the embedding and the head
    if isinstance(group, bool) or not isinstance(group, int) or not 0 <= group < groups:
        raise InputError(f"group must be the index of a layer group, 0 to {groups - 1}, got {group!r}", "group")
    layer = cost.stack[1 + group][0]
    recomputed = recomputed_costs(layer, cost.training.recomputation)
    seconds = lambda rows, p_: sum((row_seconds(r, system, conventions)[f"t_total_{p_}"] for r in rows), Integer(0))  # noqa: E731
    out = {"fwd": seconds(layer, "fwd"), "bwd": seconds(layer, "bwd") + seconds(recomputed, "fwd")}
    out["total"] = out["fwd"] + out["bwd"]
    return out


def tensor_comm_exposed(rows, seconds, pass_: str, system, conventions=conv.DEFAULT, overlap: bool = True) -> Expr:
    """Seconds of ``rows``' ``pass_`` collectives but the all-to-alls (``hidden_by_tensor_overlap``)
    that show, each hidden only behind the product it runs under (``seconds``: each row's
    ``row_seconds``); with ``overlap`` off (``Overlap.tensor``) only a context-parallel ring's.

    A ring's sends (kind ``p2p`` on the attention row) run under the attention itself whatever the
    switches: Transformer Engine's ``AttnFuncWithCPAndKVP2P`` (and PyTorch's ring attention) sends
    the next K and V block while it computes on the one it holds.  Transformer Engine's userbuffers
    overlap (Megatron-LM's ``--tp-comm-overlap``, ``overlap``) splits a tensor-parallel linear's
    GEMM into chunks and runs its own all-gather or reduce-scatter under them: the all-gather of a
    norm's output under the next linear's forward (ring exchange), the reduce-scatter of a linear's
    output under its own forward (pipelined), and in the backward the gradient's all-gather under
    the dgrad of the linear before it, the input's re-gather and the dgrad's reduce-scatter under the
    linear's own backward (bulk).  So each such collective pairs with the nearest ``"matrix"`` row at
    or after its own in the pass's order (the rows' order forward, the reverse backward), and shows
    for ``max(0, T_comm - T_row)`` of each pair; a collective with no product after it (an
    embedding's) shows whole, as every one does without ``overlap``.  The micro-batch's total compute
    does not hide them: a chunk's communication cannot wait for later layers.

    >>> from types import SimpleNamespace as Row
    >>> from symbolic_cost.cost import Collective
    >>> gather = Collective("allgather", 2**24, 2, 8, "fwd", 0)      # 32 MiB over 8 GPUs
    >>> rows = [Row(engine="vector", collectives=(gather,)), Row(engine="matrix", collectives=())]
    >>> tensor_comm_exposed(rows, [{"t_fwd": 0}, {"t_fwd": 1}], "fwd", "h100")   # a second's product
    0
    >>> tensor_comm_exposed(rows, [{"t_fwd": 0}, {"t_fwd": 0}], "fwd", "h100") > 0
    True
    """
    order = list(zip(rows, seconds))
    if pass_ == "bwd":
        order.reverse()
    pending, exposed, whole = [], [], []
    for row, row_time in order:
        mine = [c for c in row.collectives if hidden_by_tensor_overlap(c) and c.pass_ == pass_]
        ring = [comm_time(c, system, conventions) for c in mine if c.kind == "p2p"]
        others = [comm_time(c, system, conventions) for c in mine if c.kind != "p2p"]
        (pending if overlap else whole).extend(others)
        if row.engine == "matrix" and (pending or ring):
            exposed.append(maximum(0, Add(*pending, *ring) - row_time[f"t_{pass_}"]))
            pending = []
        else:
            whole.extend(ring)      # a send with no kernel of its own to run under
    return Add(*exposed, *pending, *whole)


def all_to_all_exposed(rows, seconds, system, conventions=conv.DEFAULT) -> Expr:
    """Seconds of a MoE layer's token all-to-alls that Megatron-Core's 1F1B all-to-all overlap
    (``--overlap-moe-expert-parallel-comm``, ``Overlap.expert``) leaves exposed, for one layer's
    forward of one micro-batch run beside another micro-batch's backward of the same layer.

    The combined 1F1B schedule cuts a layer into an attention phase (rows up to the dispatch's,
    and those after the combine's), the dispatch all-to-all, an MLP phase (the experts, between the
    two) and the combine all-to-all, and runs each communication of one micro-batch under a compute
    phase of the other: the backward's combine under the forward's attention, the forward's
    dispatch under the backward's MLP, the backward's dispatch under the forward's MLP, the
    forward's combine under the backward's attention.  Each shows for ``max(0, T_comm - T_compute)``
    of its slot, or, where the dispatcher's kernels hold SMs the compute then lacks
    (``dispatch_sm_share``), ``max(T_comm - T_compute, share x T_comm)``; the warm-up's forwards
    and the cool-down's backwards, which have no partner, are taken as paired too.  Where one row
    carries every all-to-all, nothing lies between them to hide one, and they show whole."""
    rows = list(rows)
    carrying = [i for i, r in enumerate(rows) if any(not hidden_by_tensor_overlap(c) for c in r.collectives)]
    if not carrying:
        return Integer(0)
    first, last = carrying[0], carrying[-1]

    def comm(i, pass_):
        return Add(*(comm_time(c, system, conventions) for c in rows[i].collectives
                     if not hidden_by_tensor_overlap(c) and c.pass_ == pass_))

    def phase(indices, pass_):
        return Add(*(seconds[i][f"t_{pass_}"] for i in indices))

    share = dispatch_sm_share(rows[first], system)

    def slot(sends, work):      # the compute beside a kernel that holds `share` of the SMs
        return maximum(sends - work, share * sends) if share else maximum(0, sends - work)

    mlp = [i for i, r in enumerate(rows) if first < i <= last or r.name in SHARED_ROWS]
    attention = [i for i in range(len(rows)) if i not in mlp]
    if first == last:           # one row carries both: no MLP between to hide them
        return comm(first, "fwd") + comm(first, "bwd")
    return (slot(comm(last, "bwd"), phase(attention, "fwd")) + slot(comm(first, "fwd"), phase(mlp, "bwd"))
            + slot(comm(first, "bwd"), phase(mlp, "fwd")) + slot(comm(last, "fwd"), phase(attention, "bwd")))


FLEX_DISPATCH_SMS = 20
"""SMs the flex dispatcher's kernels hold while they run: Megatron-Core's ``moe_deepep_num_sms``
default (DeepEP's ``Buffer.set_num_sms``; HybridEP's ``moe_hybridep_num_sms`` is 16 to 24 across
releases).  Its dispatch and combine are kernels of their own that move the tokens with SMs, not
copy engines."""


def dispatch_sm_share(row, system) -> Expr:
    """The share of the GPU's SMs a MoE dispatch on ``row`` takes from the compute running beside
    it: ``FLEX_DISPATCH_SMS / sms`` for the flex dispatcher (DeepEP, HybridEP: its all-to-alls carry
    ``routing``) on a calibrated system (``Efficiency.sms``), else 0 (NCCL's all-to-all: how many
    SMs its channels take is not stated where the step model could read it).

    Beside compute ``W``, a dispatch of ``C`` seconds leaves ``W`` running at ``1 - share`` of the
    SMs while it lasts, so the pair takes ``max(C, W + share * C)``: even a hidden dispatch costs
    ``share * C``.

    >>> from types import SimpleNamespace as Row
    >>> from symbolic_cost.cost import Collective
    >>> from symbolic_cost.timing.hardware import calibrated
    >>> dispatch = Collective("alltoall", 2**20, 2, 8, "fwd", 0, routing=(256, 8))   # DeepEP's
    >>> dispatch_sm_share(Row(collectives=(dispatch,)), calibrated("h100"))          # 20 of 132 SMs
    5/33
    """
    efficiency = system.efficiency
    if efficiency is None or not any(c.routing is not None for c in row.collectives):
        return Integer(0)
    return Rational(FLEX_DISPATCH_SMS, efficiency.sms)
