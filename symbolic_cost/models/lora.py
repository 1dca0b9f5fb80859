"""LoRA and QLoRA (Hu et al. 2021; Dettmers et al. 2023): a frozen base with trainable
low-rank adapters, as a value (``LoRA``) and as the blocks it changes (``adapt_stack``).

An adapter of rank ``r`` on a linear layer ``in -> out`` adds ``h = s x (X A) B`` to the
layer's output, with ``A (in, r)``, ``B (r, out)`` and the scale ``s = alpha / r``
(``peft``'s ``LoraLayer``; ``lora_dropout = 0``, its default, so ``A`` reads ``X`` itself).
Per adapted layer and ``t = b l`` tokens:

=============== ================================================================================
parameters      ``r (in + out)``, trainable; the base's weights frozen
forward         the products ``(t, in) x (in, r)`` and ``(t, r) x (r, out)``; ``t out`` multiplies
                by ``s`` and ``t out`` adds into the base output
backward        ``dB = Z^T (s dY)``: ``(r, t) x (t, out)``; ``dZ = (s dY) B^T``: ``(t, out) x
                (out, r)``; ``dA = X^T dZ``: ``(in, t) x (t, r)``; ``dX += dZ A^T``: ``(t, r) x
                (r, in)`` and ``t in`` adds; ``t out`` multiplies by ``s``
split           weight gradient (``flops_wgrad``): the ``dB`` and ``dA`` products; activation
                gradient: ``dZ``, ``dX`` and its adds, the multiplies by ``s`` (``dZ`` needs them)
kept            ``X`` (once per base layer, however many of its slices are adapted: the same
                tensor; none where the row before keeps it, as a fused attention kernel keeps
                its output ``O``) and each adapter's ``Z = X A`` (``t r``)
=============== ================================================================================

Under tensor parallelism (``m1``, without sequence parallelism) the adapters follow ``peft``'s
Megatron-LM layer (``LoraParallelLinear``): on a column-parallel product (``q, k, v, qkv, gate,
up, gate_up``, whose output is split) ``A`` is whole on every rank and ``B`` is split by its
output, ``(r, out/m1)``, and backward sums the ``m1`` partial gradients of ``Z`` (an allreduce
of ``t r`` values); on a row-parallel product (``o, down``, whose input is split) ``A`` is
split by its input, ``(in/m1, r)``, forward sums the ``m1`` partial ``Z`` (an allreduce of
``t r``) and ``B`` is whole on every rank.  The table above holds per rank with those shapes.
With sequence parallelism (Megatron-LM's ``s1 = m1``, whose parallel layers the adapters are)
a column-parallel ``A`` reads the rank's ``t/s1`` tokens and its ``Z`` is allgathered for ``B``
(backward: reduce-scattered), and a row-parallel ``A``'s ``Z`` is reduce-scattered to the
shard where ``B`` runs (backward: allgathered).

A frozen linear layer computes only ``dX = dY W^T`` in backward: no weight-gradient product,
no bias gradient, and it keeps no input (PyTorch saves ``X`` only for ``dW``); a frozen
embedding has no backward at all.  So the weight-gradient FLOPs (``Cost.flops_wgrad``) of
the products are the adapters' ``dA`` and ``dB`` alone.  Frozen norms keep their inputs (the
gradient flows through them to earlier adapters); their ``gamma``/``beta`` reductions stay in
the count (``b l e`` adds each, an over-count the library accepts), as weight-gradient FLOPs,
and so do the first layer's operations before its first adapter, which PyTorch would not
record.

Targets name slices of the library's fused products (``TARGETS``): ``q``, ``k``, ``v`` and
``qkv`` of ``qkv_proj``; ``o`` (the output projection, row ``v_proj``); ``gate``, ``up`` and
``gate_up`` of ``fc1`` (gated MLPs; ``up`` is all of ``fc1`` otherwise); ``down`` (``fc2``).
Llama's ``q_proj``, ..., ``down_proj`` are ``q, k, v, o, gate, up, down``; GPT-2's ``c_attn``
is ``qkv``, ``c_fc`` is ``up``, its two ``c_proj`` are ``o`` and ``down``.

The frozen base is stored in ``base`` precision (``BASES``), bytes per weight element of the
transformer layers' products; embeddings, norms, biases and the head stay 16-bit, as
``bitsandbytes`` leaves them:

=========== =============================================================================
``16-bit``  the training precision's element (2 bytes in bf16)
``fp32``    a model loaded in fp32 and trained under 16-bit autocast (TRL's default
            ``dtype``): 4 bytes, and every frozen weight with it (embeddings, norms, head)
``int8``    LLM.int8 (Dettmers et al. 2022): 1 byte plus an fp32 scale per output row,
            ``1 + 4/in``
``nf4``     QLoRA's 4-bit NormalFloat with an fp32 absmax per block of 64: ``1/2 + 4/64``;
            with double quantisation the absmax is 8-bit per block and has an fp32 scale
            per 256 blocks: ``1/2 + 1/64 + 4/(64 x 256)`` (``models.number_formats.NF4``,
            ``NF4_DOUBLE``)
=========== =============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, Integer, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Block
from symbolic_cost.blocks.layout import Layout, attach
from symbolic_cost.cost import Cost, Gemm, exact, make_cost
from symbolic_cost.models.number_formats import NF4, NF4_DOUBLE
from symbolic_cost.ops.matmul import product_flops
from symbolic_cost.checks import InputError

TARGETS = ("q", "k", "v", "qkv", "o", "gate", "up", "gate_up", "down")
PEFT_NAMES = {"q_proj": ("q",), "k_proj": ("k",), "v_proj": ("v",), "o_proj": ("o",), "qkv_proj": ("qkv",),
              "gate_proj": ("gate",), "up_proj": ("up",), "gate_up_proj": ("gate_up",), "down_proj": ("down",),
              "c_attn": ("qkv",), "c_fc": ("up",), "c_proj": ("o", "down")}
"""peft's ``target_modules`` (the models' own module names: Llama's, Phi-3's fused ones, GPT-2's) as
``TARGETS``; a name matches every module it ends (peft's rule), so GPT-2's ``c_proj`` is both the
attention's output projection and the MLP's ``fc2``."""
BASES = ("16-bit", "fp32", "int8", "nf4")
LINEAR_ROWS = ("qkv_proj", "v_proj", "fc1", "fc2")
"""The transformer layer's linear products (``v_proj`` is the output projection)."""
ROW_PARALLEL = ("v_proj", "fc2")
"""The products whose input is split under tensor parallelism (the others split their output)."""
_ROW = {"q": "qkv_proj", "k": "qkv_proj", "v": "qkv_proj", "qkv": "qkv_proj", "o": "v_proj",
        "gate": "fc1", "up": "fc1", "gate_up": "fc1", "down": "fc2"}


@dataclass(frozen=True)
class LoRA:
    """Adapters of rank ``rank`` on ``targets`` over a frozen base stored as ``base``
    (``nf4`` with ``double_quant`` is QLoRA)."""

    rank: Expr = 8
    targets: tuple = ("q", "v")
    base: str = "16-bit"
    double_quant: bool = True

    def __post_init__(self):
        rank = exact(self.rank, "lora rank")
        if rank.is_number and not (rank.is_integer and rank > 0):
            raise InputError(f"lora rank must be a positive integer, got {self.rank!r}", "lora_rank")
        object.__setattr__(self, "rank", rank)
        given = (self.targets,) if isinstance(self.targets, str) else self.targets     # one name, not its letters
        targets = tuple(x for t in given for x in (PEFT_NAMES.get(t, (t,)) if isinstance(t, str) else (t,)))
        unknown = [t for t in targets if t not in TARGETS]
        if unknown or not targets:
            raise InputError(f"lora targets must be a non-empty list of {', '.join(TARGETS)} or peft's module "
                             f"names {', '.join(PEFT_NAMES)}; "
                             f"unknown: {', '.join(map(repr, unknown)) or 'none given'}", "lora_targets")
        if len(set(targets)) != len(targets) or _overlap(targets):
            raise InputError(f"lora targets must not adapt a slice twice (qkv covers q, k, v; gate_up "
                             f"covers gate, up), got {', '.join(targets)}", "lora_targets")
        if self.base not in BASES:
            raise InputError(f"lora base must be one of {', '.join(BASES)}, got {self.base!r}", "lora_base")
        object.__setattr__(self, "targets", targets)

    def base_bytes(self, es, fan_in) -> Expr:
        """Bytes per frozen weight element of a product with ``fan_in`` inputs (module table)."""
        if self.base == "16-bit":
            return exact(es, "es")
        if self.base == "fp32":
            return Integer(4)
        if self.base == "int8":
            return 1 + 4 / exact(fan_in, "fan_in")
        return NF4_DOUBLE if self.double_quant else NF4


def _overlap(targets) -> bool:
    return ("qkv" in targets and {"q", "k", "v"} & set(targets)) or \
        ("gate_up" in targets and {"gate", "up"} & set(targets))


def is_linear(row: Cost) -> bool:
    """Whether ``row`` multiplies by a weight matrix (a weight-gradient product in backward)."""
    return row.engine == "matrix" and (row.name in LINEAR_ROWS or row.name == "lm_head" or
                                       (row.weights != 0 and len(row.gemms) == 3))


def weight_matrix(row: Cost) -> tuple[Expr, Expr]:
    """``(in, out)`` of a linear row's weight: its forward product's ``k`` and ``n``."""
    fwd = next(g for g in row.gemms if g.pass_ == "fwd")
    return fwd.k, fwd.n


def frozen(row: Cost, conventions=conv.DEFAULT) -> Cost:
    """``row`` with its weights frozen: a linear keeps no input and skips ``dW`` (and ``dB``):
    its backward is its ``dX`` product alone, no weight-gradient FLOPs; an embedding has no
    backward; any other row writes no weight gradient (its FLOPs unchanged, module docstring)."""
    if is_linear(row):
        kept = tuple(g for g in row.gemms if not (g.pass_ == "bwd" and g.grad == "weight"))
        return replace(row, gemms=kept, flops_bwd=product_flops(kept, "bwd", conventions), flops_wgrad=Integer(0),
                       act_buffer=Integer(0), weight_grads=Integer(0), mem_bwd=row.act_grads + row.weights)
    if row.name.endswith("embeddings") and row.weights != 0:
        return replace(row, flops_bwd=Integer(0), flops_wgrad=Integer(0), act_buffer=Integer(0),
                       weight_grads=Integer(0), act_grads=Integer(0), mem_bwd=Integer(0))
    return replace(row, weight_grads=Integer(0), mem_bwd=row.mem_bwd - row.weight_grads)


def slices(layer: Block, row: str, targets) -> list[tuple[Expr, Expr]]:
    """``(in, out)`` on one rank of the product each adapter ``targets`` puts on ``row`` of
    ``layer`` (under ``m1``: the output of a column-parallel product split, the input of a
    row-parallel one)."""
    if row not in layer.names:
        return []
    fan_in, fan_out = weight_matrix(layer[row])
    dims = layer.dims
    m1 = dims.get("m1", 1)
    head = dims.get("head_dim", dims["e"] / dims["h"]) if "h" in dims else None
    gated = row == "fc1" and "f" in dims and fan_out == 2 * dims["f"] / m1
    size = {"qkv": fan_out, "o": fan_out, "down": fan_out, "gate_up": fan_out,
            "up": fan_out / 2 if gated else fan_out, "gate": fan_out / 2}
    if head is not None:
        q, k = dims["h"] * head / m1, dims.get("kv_heads", dims["h"]) * head / m1
        size.update(q=q, k=k, v=fan_out - q - k)
    out = []
    for target in targets:
        if _ROW[target] != row:
            continue
        if target in ("gate", "gate_up") and not gated:
            raise InputError(f"lora target {target!r} needs a gated MLP (fc1 makes a gate and a value)", "lora_targets")
        out.append((fan_in, size[target]))
    return out


def adapter(name: str, b, l, pairs, r, es, conventions, m1=1, s1=1, input_kept=False) -> Cost:
    """The adapters ``pairs`` (``(in, out)`` of the base product on one rank) of one base row,
    reading one input ``X`` (module docstring); ``input_kept``: ``X`` is already kept by the
    row before (a fused attention kernel keeps its output ``O``, the output projection's input),
    so the adapters keep only their ``Z``: autograd saves one tensor once.  Under ``m1`` the
    ``t r`` values of each ``Z`` cross the tensor region as the layer's activations do
    (``blocks.layout``): a column-parallel ``A`` reads the ``t/s1`` tokens of the sequence shard
    and its ``Z`` is allgathered for ``B`` (backward: its gradient reduced back to the shards); a
    row-parallel ``A``'s partial ``Z`` is reduced to the shards for ``B`` (backward:
    allgathered).  With ``s1 = 1`` both are one allreduce, in backward and in forward."""
    tokens, r = exact(b, "b") * exact(l, "l"), exact(r, "r")
    at = Layout(exact(b, "b"), exact(l, "l"), len(pairs) * r, exact(m1, "m1"), _shards(m1, s1, conventions),
                exact(es, "es"), 1, conventions)
    if name in ROW_PARALLEL:     # A on every token, B on the shard
        rows_a, rows_b = tokens, tokens / at.s
        reduced = at.reduce_to_shards("fwd") + at.collective("allgather", tokens * at.e, at.s, "bwd")
    else:                        # A on the shard, B on every token
        rows_a, rows_b = tokens / at.s, tokens
        reduced = at.collective("allgather", tokens * at.e, at.s, "fwd") + at.reduce_to_shards("bwd")
    fan_in = pairs[0][0]
    fwd = [(rows_a, i, r) for i, _ in pairs] + [(rows_b, r, o) for _, o in pairs]
    bwd = [step for i, o in pairs for step in (((r, rows_b, o), "weight"), ((rows_b, o, r), "input"),
                                                ((i, rows_a, r), "weight"), ((rows_a, r, i), "input"))]
    gemms = tuple(Gemm("fwd", *shape, element_bytes=es) for shape in fwd) + tuple(
        Gemm("bwd", *shape, element_bytes=es, grad=grad) for shape, grad in bwd)
    outs = sum(o for _, o in pairs)
    weights = sum(r * (i + o) for i, o in pairs) * es
    return attach(make_cost(
        f"{name}.lora", "matrix",
        flops_fwd=product_flops(gemms, "fwd", conventions) + 2 * rows_b * outs,
        flops_bwd=product_flops(gemms, "bwd", conventions) + rows_b * outs + len(pairs) * rows_a * fan_in,
        flops_wgrad=product_flops(gemms, "bwd", conventions, grad="weight"),
        act_in=rows_a * fan_in * es, act_out=rows_b * outs * es,
        act_buffer=((0 if input_kept else rows_a * fan_in) + len(pairs) * rows_b * r) * es,
        act_grads=(rows_b * outs + len(pairs) * rows_a * fan_in) * es,
        weights=weights, gemms=gemms), reduced, conventions)


def _shards(m1, s1, conventions):
    """The degree that shards the sequence outside the tensor region (``blocks.layout``)."""
    return exact(m1, "m1") if conv.get(conventions).sequence_shard == "m1" else exact(s1, "s1")


def adapt_layer(layer: Block, lora: LoRA, es, conventions) -> tuple[Block, bool]:
    """A transformer layer with every row frozen and each adapted row followed by its
    adapters, captured in the CUDA graph its row is in (``Cost.graph``: Megatron-Bridge's adapters
    wrap the linear layer the graph holds; they launched from the host before, inside the graph);
    and whether any target was found in it."""
    rows, found = [], False
    for before, row in zip((None, *layer), layer):
        rows.append(frozen(row, conventions))
        pairs = slices(layer, row.name, lora.targets) if row.name in LINEAR_ROWS else []
        if pairs:
            found = True
            added = adapter(row.name, layer.dims["b"], layer.dims["l"], pairs, lora.rank, es, conventions,
                            layer.dims.get("m1", 1), layer.dims.get("s1", 1),
                            input_kept=before is not None and before.fused)
            rows.append(replace(added, graph="captured") if row.graph else added)
    return replace(layer, rows=tuple(rows)), found


def adapt_stack(stack, lora: LoRA, es, conventions):
    """The model's ``(block, count)`` stack under LoRA: the ends frozen, every layer group
    adapted (``adapt_layer``); refuses targets no layer has."""
    conventions = conv.get(conventions)
    out, found = [], False
    for blk, _ in stack:
        _check_rank(lora, blk.dims.get("e"))
    for i, (blk, count) in enumerate(stack):
        if 0 < i < len(stack) - 1 and any(r.name in LINEAR_ROWS for r in blk):
            blk, hit = adapt_layer(blk, lora, es, conventions)
            found = found or hit
        else:
            blk = replace(blk, rows=tuple(frozen(r, conventions) for r in blk))
        out.append((blk, count))
    if not found:
        raise InputError(f"lora targets {', '.join(lora.targets)} match no product of the model's layers",
                         "lora_targets")
    return tuple(out)


def _check_rank(lora: LoRA, e) -> None:
    """Refuse a rank above the hidden size ``e``: every product an adapter targets has ``e`` on one
    side (q, k, v, o, gate, up, down), so ``A B`` has rank at most ``e`` and a larger ``r`` adds
    ``r (in + out)`` parameters and no rank."""
    if e is not None and lora.rank.is_number and sympify(e).is_number and lora.rank > e:
        raise InputError(f"lora rank {lora.rank} exceeds the hidden size e={e}: every adapted product has e on one "
                         f"side, so the update's rank is at most e (a larger rank adds parameters, no rank)",
                         "lora_rank")


def check_low_precision_base(lora: LoRA, fp8: str) -> None:
    """LoRA over a base whose products run in a low-precision recipe (Megatron-Bridge's FP8 and
    MXFP8 PEFT recipes): the frozen products at the recipe's rate, each keeping no input (no weight
    gradient) and its quantised weight copies, the adapters in 16-bit (Megatron-Core's parallel
    linear layers, outside Transformer Engine's autocast).  Refused: a quantised base (its products
    dequantise to 16-bit; QLoRA's recipe is its own) and FP8 primary weights (``fp8-params``: no
    16-bit copy of a frozen base to count)."""
    if lora.base != "16-bit":
        raise InputError(f"a {lora.base} LoRA base with fp8={fp8!r}: a quantised base dequantises to 16-bit for its "
                         f"products; choose one of them", "fp8")
    if fp8.endswith("-params"):
        raise InputError(f"fp8={fp8!r} with lora: FP8 primary weights of a frozen base are not modelled (its "
                         f"master copy is what the recipe keeps); use tensorwise, delayed or mxfp8", "fp8")


def is_adapter(row: Cost) -> bool:
    """Whether ``row`` is a LoRA adapter (its weights are the trainable parameters)."""
    return row.name.endswith(".lora")
