"""Training recipes on the whole model: FP8 and LoRA applied to the blocks, the model state
per device (trainable and frozen parameters, optimizer, FP8 copies and scales), and CPU
offload of the optimizer state (and the parameters) with its host-device traffic.

Model state per device, ``P`` the device's parameters, ``T`` its trainable ones (``P``
without LoRA, the adapters with it), ``G`` the elements of its layers' weight matrices,
``(w, g, o)`` from ``optimizers.bytes_per_parameter``, ``es`` the 16-bit element:

============ ====================================================================================
weights      ``T w + (P - T) es`` (LoRA's frozen base: ``G`` at ``LoRA.base_bytes``); a
             low-precision recipe (``optimizers.FP8_RECIPES``): ``+ G x weight_copies`` (the
             cached quantised copies: ``delayed``, ``tensorwise`` 1, ``mxfp8`` 2 (1 + 1/32),
             ``nvfp4`` 2 (1/2 + 1/16)), ``fp8-params``: ``- G (w - 1)``; its scaling state
             ``Fp8Recipe.scale_bytes`` per product; ZeRO-3: ``/ d``
gradients    ``T g`` (ZeRO-2, 3: ``/ d``)
optimizer    ``T o`` plus Adafactor's ``4 x factored_elements`` and a compressed optimizer's
             error feedback, ``T x error_feedback_bytes`` (ZeRO-1, 2, 3: ``/ d``)
============ ====================================================================================

Offload (ZeRO-Offload, Ren et al. 2021; ZeRO-Infinity, Rajbhandari et al. 2021) moves the
sharded state to the host's memory and the optimizer step to the CPU:

============== ====================== ================================ ===========================
``offload``    on the host (per       host -> device per step          device -> host per step
               device)
============== ====================== ================================ ===========================
``optimizer``  the optimizer shard;   the updated weights' shard       the gradient shard, every
               the gradient shard     ``T w / d``                      micro-batch under ZeRO-2/3
               under ZeRO-2, 3                                         (accumulated on the host),
                                                                       once under ZeRO-1
``parameters`` also the weight shard  the weight shard in forward and  as ``optimizer``
(ZeRO-3 only)  (device: none)         backward of every micro-batch
``weights``    the weight shard only  as ``parameters``                the updated weights' shard
(ZeRO-3 only)  (device: none)                                          ``T w / d``, once
============== ====================== ================================ ===========================

``weights`` is DeepSpeed's ``offload_param`` without ``offload_optimizer``: the 16-bit partitions
live on the host and are copied to the device on use (``partitioned_param_coordinator``), while
the optimizer, its state and the gradient shard stay on the device, where the step runs; the
updated 16-bit partition is copied back after it (``optimizer_on_host`` is false: no host step).

The device keeps no gradient shard under ZeRO-2/3 offload (the reduce buckets in flight are
not counted); the host's gradient is in the gradients' precision (the paper's ``2M`` fp16).
"""

from __future__ import annotations

from dataclasses import replace

from sympy import Add, Expr, Integer, sympify

from symbolic_cost.cost import collective
from symbolic_cost.models.lora import LINEAR_ROWS, adapt_stack, is_adapter, is_linear, weight_matrix
from symbolic_cost.models.stack import units
from symbolic_cost.models.optimizers import bytes_per_parameter, error_feedback_bytes, factored_state_bytes, get_fp8
from symbolic_cost.ops.quantise import dynamic_casts, quantise
from symbolic_cost.parallel.zero import data_parallel_collectives, shard_degree
from symbolic_cost.checks import InputError, exact

OFFLOAD = ("none", "optimizer", "parameters", "weights")


def optimizer_on_host(offload: str) -> bool:
    """Whether the optimizer step runs on the host (ZeRO-Offload's CPU Adam) under ``offload``."""
    return offload in ("optimizer", "parameters")


def check_offload(offload: str, zero: int) -> None:
    """Offload needs the state ZeRO shards: the optimizer from ZeRO-1, the parameters ZeRO-3."""
    if offload not in OFFLOAD:
        raise InputError(f"offload must be one of {', '.join(OFFLOAD)}, got {offload!r}", "offload")
    if offload == "optimizer" and zero < 1:
        raise InputError("offload='optimizer' needs ZeRO (zero >= 1): ZeRO-Offload moves each rank's "
                         "optimizer shard to the host", "offload")
    if offload in ("parameters", "weights") and zero != 3:
        raise InputError(f"offload={offload!r} needs ZeRO-3 (zero=3): only sharded parameters are "
                         "fetched from the host on use", "offload")


KEPT_16BIT = ("router", "shared_gate")
"""Linear products of a layer that a low-precision recipe leaves in 16-bit: plain PyTorch
parameters in Megatron-Core (the MoE router's ``TopKRouter.weight``, the shared experts'
``gate_weight``), not Transformer Engine modules, so its FP8 autocast does not reach them."""

NORM_FUSED = ("qkv_proj", "fc1", "q_b_proj", "kv_b_proj")
"""Products that read their input quantised by the norm before them (Megatron-Core's
``TELayerNormColumnParallelLinear``: the attention's and the dense MLP's input norms, latent
attention's ``q_layernorm`` and ``kv_layernorm``); every other low-precision product casts its
forward input (``ops.quantise``)."""


def recipe_stack(stack, t, es, conventions, arch):
    """``arch``'s blocks under ``t``'s recipe: a low-precision recipe's products keep their
    inputs in its ``kept_bytes`` (``_low_precision_layer``), except on the first and last layers
    ``t`` keeps in 16-bit (``precision_groups``); LoRA freezes the base and adds the adapters
    (``lora.adapt_stack``)."""
    recipe = get_fp8(t.fp8)
    if recipe is not None:
        middle = tuple((_low_precision_layer(blk, es, recipe, t) if low else blk, count)
                       for blk, low, count in precision_groups(t, units(arch), stack[1:-1]))
        stack = (stack[0], *middle, stack[-1])
    if t.lora is not None:
        stack = adapt_stack(stack, t.lora, es, conventions)
    return stack


def check_16bit_layers(t) -> None:
    """``first_layers_16bit`` and ``last_layers_16bit`` are whole numbers of layers, and only
    under a recipe that can leave layers out: Megatron-Core refuses them under delayed scaling
    (its amax reduction spans every layer's FP8 context)."""
    for name in ("first_layers_16bit", "last_layers_16bit"):
        value = getattr(t, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"{name} must be a whole number of layers >= 0, got {value!r}", name)
        if value and (t.fp8 is None or get_fp8(t.fp8).amax_history):
            raise InputError(f"{name} keeps layers in 16-bit under a low-precision recipe other than delayed "
                             f"scaling (Megatron-LM: 'Delayed scaling does not support first / last layer in "
                             f"BF16'), got fp8={t.fp8!r}", name)


def sixteen_bit(t) -> bool:
    """Whether ``t`` keeps its first or last layers out of its low-precision recipe."""
    return bool(getattr(t, "first_layers_16bit", 0) or getattr(t, "last_layers_16bit", 0))


def precision_groups(t, kinds, middle) -> list:
    """``(block, low precision, layers)`` of each layer group of ``middle`` (the stack's
    ``(block, count)`` groups; ``kinds``, ``models.stack.units``, says which layer is which), in
    the order ``stack_units`` numbers them: every group low precision; when ``t`` keeps its first
    ``first_layers_16bit`` and last ``last_layers_16bit`` layers (Megatron-Core's global layer
    numbers, ``is_first_last_bf16_layer``) in 16-bit, each group's low-precision layers, then its
    16-bit ones.  A model that does not record which layer is which has one group (a symbolic
    depth): its 16-bit layers are the sum."""
    if not sixteen_bit(t):
        return [(blk, True, count) for blk, count in middle]
    kept = t.first_layers_16bit + t.last_layers_16bit
    base = _base_units(kinds, len(middle))
    if base is None:
        if len(middle) != 1:
            raise InputError("first_layers_16bit, last_layers_16bit: the model's layers differ and which layer is "
                             "which is not recorded", "first_layers_16bit")
        (blk, count), = middle
        if (count - kept).is_negative:
            raise InputError(f"first_layers_16bit + last_layers_16bit = {kept} exceeds the {count} layers",
                             "first_layers_16bit")
        return [(blk, low, n) for low, n in ((True, count - kept), (False, sympify(kept))) if n != 0]
    order, layers = _split(t, base)
    return [(middle[g][0], low, Integer(sum(1 for j, _ in layers if j == k))) for k, (g, low) in enumerate(order)]


def stack_units(kinds, t, groups: int):
    """``(group, layer)`` of every layer (``models.stack.units``' ``kinds``) numbered as the
    stack's ``groups`` layer groups: ``kinds`` as they are, or all one group where kinds that
    cost the same are one block; with ``t``'s 16-bit layers, the groups ``precision_groups``
    splits them into.  ``None`` where neither numbering fits."""
    if not sixteen_bit(t):
        return _base_units(kinds, groups)
    for base in _bases(kinds):
        order, layers = _split(t, base)
        if len(order) == groups:
            return layers
    return None


def _bases(kinds) -> list:
    return [] if kinds is None else [kinds, [(0, i) for _, i in kinds]]


def _base_units(kinds, groups: int):
    return next((base for base in _bases(kinds) if max(g for g, _ in base) + 1 == groups), None)


def _split(t, base) -> tuple[list, list]:
    """``(order, units)``: each new group's ``(group, low precision)`` in order (a group's
    low-precision layers first), and each layer's new group."""
    depth = max(i for _, i in base) + 1
    keyed = [((g, t.first_layers_16bit <= i < depth - t.last_layers_16bit), i) for g, i in base]
    order = sorted({key for key, _ in keyed}, key=lambda key: (key[0], not key[1]))
    return order, [(order.index(key), i) for key, i in keyed]


def _low_precision_layer(blk, es, recipe, t):
    """A layer whose linear products (all but ``KEPT_16BIT``) keep their input in
    ``recipe.kept_bytes`` per element (``act_buffer x kept_bytes / es``: the quantised copy the
    weight gradient reads) and run on its tensor cores in both passes (``Cost.fp8`` or
    ``Cost.fp4``), each followed by its cast kernels (row ``<product>_cast``): under Transformer
    Engine's recipes ``ops.quantise``, backward casting every output gradient and forward the input
    of every product but the ``NORM_FUSED`` ones; under torchao's (``recipe.dynamic``) the 16-bit
    input kept as it is and ``_dynamic_casts``, the grouped experts left in 16-bit (torchtitan converts
    them with a converter of their own, ``Float8GroupedExpertsConverter``, which the library does not
    model).  A cast is in the CUDA graph its product is in (``Cost.graph``; it launched from the
    host before, inside the graph)."""
    def rows(r):
        if not (is_linear(r) and r.name not in KEPT_16BIT):
            return (r,)
        forward = _forward(r)
        if recipe.dynamic and any(g.groups != 1 for g in forward):
            return (r,)          # torchao's Float8Linear converts linear layers: grouped experts stay 16-bit
        outputs = sum((g.count * g.m * g.n for g in forward), Integer(0))
        if recipe.dynamic:
            kept, cast = r.act_buffer, _dynamic_casts(forward, outputs, r.matrix_elements, es, recipe, t,
                                                      f"{r.name}_cast")
        else:
            kept = r.act_buffer * recipe.kept_bytes / es
            inputs = 0 if r.name in NORM_FUSED else sum((g.count * g.m * g.k for g in forward), Integer(0))
            cast = quantise(inputs, outputs, es=es, quantised=recipe.kept_bytes, amax_pass=recipe.amax_pass,
                            name=f"{r.name}_cast")
        return (replace(r, act_buffer=kept, mem_bwd=r.mem_bwd - r.act_buffer + kept,
                        fp8=recipe.products == "fp8", fp4=recipe.products == "fp4"),
                replace(cast, recompute=r.recompute, graph="captured" if r.graph else None))   # in r's graph
    return replace(blk, rows=tuple(row for r in blk for row in rows(r)))


def _dynamic_casts(forward, outputs, weights, es, recipe, t, name):
    """torchao's casts of one product (``ops.quantise.dynamic_casts``): forward the input ``X`` and
    the weight ``W``, backward the output gradient twice, ``W`` and ``X``.  Under ``fp8_gather``
    the weight arrives in FP8 (torchao's float8 all-gather): each rank casts only its shard,
    ``W / shard``, once a gather (backward's only where FSDP gathers again, ``reshard_after_forward``)."""
    inputs = sum((g.count * g.m * g.k for g in forward), Integer(0))
    weight_fwd = weight_bwd = weights
    if t.fp8_gather:
        weight_fwd = weights / shard_degree("weights", t.zero, t.d, t.distributed_optimizer, t.shard)
        weight_bwd = weight_fwd if t.reshard_after_forward else Integer(0)
    return dynamic_casts(inputs + weight_fwd, 2 * outputs + weight_bwd + inputs, es=es, quantised=recipe.cast_bytes,
                         amax_pass=recipe.amax_pass, name=name)


def matrix_elements(blk) -> Expr:
    """Elements of the weight matrices of a layer's low-precision products (biases excluded;
    every group's of a grouped product): the tensors a recipe caches quantised copies of."""
    return sum((r.matrix_elements for r in blk if r.fp8 or r.fp4), Integer(0))


def fp8_products(blk) -> Expr:
    """Weight matrices of a layer's low-precision products: each has its own scaling state
    (Transformer Engine's grouped linear keeps one per expert)."""
    return sum((g.groups for r in blk if r.fp8 or r.fp4 for g in _forward(r)), Integer(0))


def _forward(row) -> list:
    return [g for g in row.gemms if g.pass_ == "fwd"]


def trainable(blk, es, lora) -> Expr:
    """Trainable parameters of a block: its adapters' under LoRA, else all its weights."""
    rows = [r for r in blk if is_adapter(r)] if lora is not None else list(blk)
    return Add(*(r.weights for r in rows)) / es


def factored_elements(blk, es, lora) -> Expr:
    """Adafactor's second-moment elements of a block's trainable parameters: ``r + c`` for
    each ``r x c`` weight matrix (the forward products' ``k x n``; an embedding table is
    ``(elements / e) x e``), every element of the vectors (biases, norms)."""
    total = Integer(0)
    for r in blk:
        if r.weights == 0 or (lora is not None and not is_adapter(r)):
            continue
        elements = r.weights / es
        if r.gemms and (is_linear(r) or is_adapter(r)):
            pairs = [(g.k, g.n) for g in r.gemms if g.pass_ == "fwd"]
            total += sum(k + n for k, n in pairs) + elements - sum(k * n for k, n in pairs)
        elif r.name.endswith("embeddings"):
            e = blk.dims["e"]
            total += elements / e + e
        else:
            total += elements
    return total


def state_bytes(t, es, per_device, on_stage, tied, e, conventions) -> dict:
    """The model state of the busiest device and what offload puts on the host; see the
    module docstring.  ``on_stage(of, copy)`` sums ``of(block)`` over the busiest stage's
    blocks (and ``copy`` on a last stage that is not the first); ``tied`` is that stage's copy
    of a tied table (parameters, an ``(tied / e) x e`` matrix)."""
    d, n = sympify(t.d), sympify(t.micro_batches)
    w, g, o = bytes_per_parameter(t.precision, conventions, t.optimizer, t.master_weights)
    whole = t.lora is None and tied != 0         # the last stage's copy of a tied table is trained
    train = on_stage(lambda blk: trainable(blk, es, t.lora), tied if whole else 0)
    frozen = 4 if t.lora is not None and t.lora.base == "fp32" else es      # a base loaded in fp32: all of it
    weights = train * w + (per_device - train) * frozen
    if t.lora is not None:
        weights += on_stage(lambda blk: _quantised(blk, t.lora, es))
    fp8, matrices = get_fp8(t.fp8), Integer(0)
    if fp8 is not None:
        matrices = on_stage(matrix_elements)
        weights += matrices * fp8.weight_copies - (matrices * (w - 1) if fp8.primary_weights else 0)
        weights += on_stage(fp8_products) * fp8.scale_bytes(t.fp8_amax_history)
    optimizer = train * (o + error_feedback_bytes(t.optimizer, d))
    if factored_state_bytes(t.optimizer) != 0:        # Adafactor's factored second moment
        factored = on_stage(lambda blk: factored_elements(blk, es, t.lora), tied / e + e if whole else 0)
        optimizer += factored * factored_state_bytes(t.optimizer)
    shard = {s: shard_degree(s, t.zero, d, t.distributed_optimizer, t.shard) for s in ("weights", "gradients", "optimizer")}
    reference = reference_bytes(t, per_device, train)
    # the optimizer step of a rank updates its shard of the state: it reads that shard's gradients
    # and writes that shard's working weights (ZeRO-1 and 2 all-gather them after; frozen ones stay)
    step = (2 * optimizer + train * (g + w)) / shard["optimizer"]
    out = dict(weight_bytes=(weights + reference) / shard["weights"], gradient_bytes=train * g / shard["gradients"],
               optimizer_bytes=optimizer / shard["optimizer"], optimizer_step_bytes=step, trainable_per_device=train,
               frozen_bytes=weights - train * w, fp8_matrix_elements=matrices, reference_bytes=reference,
               reference_device_bytes=reference / shard["weights"],
               host_bytes=Integer(0), host_to_device=Integer(0), device_to_host=Integer(0))
    group = t.shard_group if t.zero == 3 else d          # a sharded state's ranks (ZeRO-1/2: d)
    return _offloaded(out, t, train * w / group, train * g / group, n) if t.offload != "none" else out


REFERENCE_BYTES = {"16-bit": 2, "fp32": 4}
"""Bytes an element of a reference model's copy (``Trainable.reference``) is held in."""


def reference_bytes(t, per_device, train) -> Expr:
    """Bytes of the stage's copy of a frozen reference model (``Trainable.reference``), before any
    sharding: every parameter of the stage but LoRA's adapters, at ``REFERENCE_BYTES``; none for
    ``"adapters"`` (LoRA's base with its adapters off) or without a reference.  The copy is sharded
    as the weights are (``shard_degree``): TRL prepares it with ZeRO-3 or FSDP when the trained model
    has them, and as a whole copy (DeepSpeed's stage 0) under ZeRO-1 and 2 (``prepare_deepspeed``).

    >>> from symbolic_cost.models import Training
    >>> reference_bytes(Training(reference="16-bit"), 1000, 1000), reference_bytes(Training(), 1000, 1000)
    (2000, 0)
    """
    if t.reference not in REFERENCE_BYTES:
        return Integer(0)
    per_device, train = exact(per_device, "per_device"), exact(train, "train")
    return (per_device - (train if t.lora is not None else 0)) * REFERENCE_BYTES[t.reference]


def _quantised(blk, lora, es) -> Expr:
    """Bytes a quantised base saves (negative) against 16-bit, over a layer's matrices."""
    if lora.base in ("16-bit", "fp32"):
        return Integer(0)
    return sum(((lora.base_bytes(es, k) - es) * k * n for k, n in
                (weight_matrix(r) for r in blk if r.name in LINEAR_ROWS and not is_adapter(r))), Integer(0))


def _offloaded(out: dict, t, weight_shard, grad_shard, n) -> dict:
    """Move the offloaded state to the host and count the host-device traffic."""
    out = dict(out)
    if not optimizer_on_host(t.offload):        # the weights alone: fetched on use, written back once
        out.update(host_bytes=out["weight_bytes"], host_to_device=2 * n * out["weight_bytes"],
                   device_to_host=weight_shard, weight_bytes=Integer(0))
        return out
    out["host_bytes"] = out["optimizer_bytes"]
    out["optimizer_bytes"] = out["optimizer_step_bytes"] = Integer(0)     # the host runs the step
    out["device_to_host"] = grad_shard * (n if t.zero >= 2 else 1)
    if t.zero >= 2:
        out["host_bytes"] += out["gradient_bytes"]
        out["gradient_bytes"] = Integer(0)
    else:
        out["host_bytes"] += grad_shard
    if t.offload == "parameters":
        out["host_bytes"] += out["weight_bytes"]
        out["host_to_device"] = 2 * n * out["weight_bytes"]
        out["weight_bytes"] = Integer(0)
    else:
        out["host_to_device"] = weight_shard
    return out


def gathered_bytes(t, parameters, states: dict, es_w) -> Expr:
    """Bytes an all-gathered parameter moves, on average over the ``parameters`` gathered: ``es_w``,
    or under ``fp8_gather``, or a recipe that stores its weights in FP8 (``fp8-params``,
    ``tensorwise-params``, ``mxfp8-params``: Megatron's ``--fp8-param-gather``, whose name says it),
    one for each element of the low-precision products' weight matrices
    (``states["fp8_matrix_elements"]``) and ``es_w`` for the rest (norms, embeddings, the head, the
    products kept in 16-bit), each rank casting its shard before the gather (torchao's float8
    all-gather; the scales, one number a tensor, left out).

    >>> from symbolic_cost.models import Training
    >>> t = Training(zero=3, d=8, fp8="tensorwise", fp8_gather=True)
    >>> gathered_bytes(t, 100, {"fp8_matrix_elements": 80}, 2)        # 80 elements at 1 byte, 20 at 2
    6/5
    """
    recipe = get_fp8(t.fp8)
    if not (t.fp8_gather or recipe is not None and recipe.primary_weights):
        return es_w
    parameters, es_w = exact(parameters, "parameters"), exact(es_w, "es_w")
    return es_w - sympify(states["fp8_matrix_elements"]) / parameters * (es_w - 1)


def data_collectives(t, per_device, states: dict, es_w, es_g, d, n, stride, conventions) -> list:
    """The data-parallel collectives of one step: ``zero.data_parallel_collectives`` over the
    trainable parameters; under LoRA with ZeRO-3 the frozen base's shards are gathered too,
    in their stored bytes, in forward and backward of every micro-batch."""
    train = states["trainable_per_device"]
    sharding = dict(shard=t.shard, reshard_after_forward=t.reshard_after_forward)
    if t.lora is None:
        return data_parallel_collectives(per_device, gathered_bytes(t, per_device, states, es_w), es_g, d, t.zero,
                                         t.distributed_optimizer, n, stride, conventions, **sharding)
    out = data_parallel_collectives(train, es_w, es_g, d, t.zero, t.distributed_optimizer, n, stride, conventions,
                                    **sharding)
    if t.zero == 3:
        base = states["frozen_bytes"]          # the frozen base's bytes on the stage
        for pass_ in ("fwd", "bwd") if t.reshard_after_forward else ("fwd",):
            out += collective("allgather", base, 1, t.shard_group, pass_, conventions, repeats=n, stride=stride)
    return out


def reference_rows(blk) -> list:
    """The rows of ``blk`` a reference model's forward runs (``Trainable.reference``): all but LoRA's
    adapters (a copy has none; with ``"adapters"`` PEFT switches them off)."""
    return [r for r in blk if not is_adapter(r)]


def reference_flops(blk) -> Expr:
    """Forward FLOPs of a block's ``reference_rows``: the reference model's share of the block."""
    return Add(*(r.flops_fwd for r in reference_rows(blk)))


def reference_gathers(t, states: dict, n, stride, conventions) -> list:
    """ZeRO-3's (FSDP's) all-gathers of a reference model's shards (``reference_bytes``): its whole
    stage copy, in the forward of every micro-batch, over the shard group; it has no backward.
    ``models.totals`` files them under the dimension ``"reference"``, which ``timing.step`` hides
    behind the reference's own forward."""
    if t.zero != 3 or states["reference_bytes"] == 0 or sympify(t.shard_group) == 1:
        return []
    return collective("allgather", states["reference_bytes"], 1, t.shard_group, "fwd", conventions, repeats=n,
                      stride=stride)
