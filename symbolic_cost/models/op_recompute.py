"""torchtitan's op-level selective activation checkpointing (``recompute="op"``).

torchtitan (``selective_ac_option = "op"``, ``apply_ac`` in its ``activation_checkpoint.py``)
wraps every transformer block in non-reentrant ``torch.utils.checkpoint`` with
``create_selective_checkpoint_contexts(policy)``: the outputs of the ops of its save list (the
scaled-dot-product-attention kernels, ``aten._scaled_mm``, ``reduce_scatter``, ``aten.max``, and
``aten.mm``) are saved, except every second ``aten.mm`` of the block (a per-block count: the
products with an even count are recomputed); every other op is recomputed in backward.

A Llama block calls its seven products in the order ``wq, wk, wv, wo, w1, w3, w2``, so it keeps
the outputs of ``wq``, ``wv``, ``w1`` and ``w2`` and the attention kernel's outputs (``O`` and the
log-sum-exp), besides its input (the checkpoint's argument); ``wk``, ``wo``, ``w3``, the norms,
the rotary positions, the activation and its product, and the residual adds run again.

The library's rows fuse some of these products: ``qkv_proj`` is ``wq, wk, wv`` (widths
``(h/m1) q``, ``(kv/m1) q``, ``(kv/m1) v``), a gated ``fc1`` is ``w1, w3`` (``f/m1`` each), an
ungated one a single product; ``v_proj`` is ``wo`` and ``fc2`` is ``w2`` (``PRODUCTS``).  The
products are counted in the rows' order, so the parity follows the block's own sequence.
The kernel's log-sum-exp is counted in fp32, as ``ops.attention.flash_attention`` keeps it.
The rule is torchtitan's count of ``aten.mm`` beside its ``_op_sac_save_list``
(``models/llama3/infra/parallelize.py``); its newest code names the saved tensors per model
instead (``sac_save_list``), which this does not read.

Latent attention (DeepSeek's ``wq`` or ``wq_a``, ``wq_b``, then ``wkv_a``, ``wkv_b`` and ``wo``:
rows ``q_proj`` or ``q_a_proj``, ``q_b_proj``, ``kv_a_proj``, ``kv_b_proj``, ``v_proj``) is counted
the same way, in the same order.  torchtitan's mixture of experts (``models/common/moe.py``) runs
its router's gate, ``topk``, the token dispatch, the experts' ``torch._grouped_mm`` products, the
combine, then the shared experts' ``w1``, ``w3``, ``w2``.  Under the policy:

* the gate's product is recomputed and left out of the count (``SelectiveAC``'s
  ``force_recompute_mm_shapes_by_fqns``, ``["moe.router.gate"]`` by default);
* ``aten.topk`` is on the save list: its values (fp32, the gate runs in fp32) and indices (int64),
  12 bytes a token's choice, are kept;
* the experts' grouped products are not on it (``aten._grouped_mm``): backward runs all three again;
* under expert parallelism the ``all_to_all_single`` outputs are saved (the token-count exchange,
  ``E`` int64, and the dispatch and combine exchanges, a routed token's hidden vector each), so
  backward sends nothing again, and its copies of the split sizes to the host are kept on the host;
* the shared experts' products continue the count of ``aten.mm``.

Defined for a block whose only products are those rows, without biases (a biased linear is
``aten.addmm``, which the count does not see), around the fused kernel (``flash_attention``: an
eager core's batched products are ``aten.bmm``), on one tensor-parallel rank (under tensor
parallelism torchtitan also saves the reduce-scatter outputs and gathers the norms' outputs
again); ``Training`` refuses LoRA (its adapters' products shift the count), context parallelism
and a tensor grid with it.  A mixture of experts under a low-precision recipe (torchtitan's
scaled grouped products) is refused.

Under a low-precision recipe (torchtitan's float8 and MX training: ``Float8Linear`` calls
``aten._scaled_mm``, on the save list) every product's output is saved, and none enters the count
of ``aten.mm``; the casts of their inputs (``<product>_cast`` rows) are element-wise ops, off the
list, so backward runs them again, as it does the norms.
"""

from __future__ import annotations

from dataclasses import replace

from sympy import Expr, Integer, Min, Symbol, simplify

from symbolic_cost.checks import InputError
from symbolic_cost.cost import Cost
from symbolic_cost.ops import linear

PRODUCTS = ("qkv_proj", "q_proj", "q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "v_proj", "fc1", "fc2",
            "shared_fc1", "shared_fc2")
"""The rows whose products torchtitan's policy counts (``aten.mm``); a block calls them in the rows' order."""
KERNEL = "flash_attention"
"""The fused attention kernel, whose outputs the policy saves."""
FORCED = ("router",)
"""Products recomputed outside the count (``force_recompute_mm_shapes_by_fqns``: the router's gate)."""
GROUPED = ("expert_fc1", "expert_fc2")
"""The experts' ``torch._grouped_mm`` products: off the save list, recomputed."""
TOPK = "router_topk"
"""The router's ``aten.topk``, whose outputs the policy saves."""
EXCHANGES = ("dispatch", "combine")
"""The rows around the experts that hold the expert-parallel all-to-alls, whose outputs it saves."""
SINGLE = {"q_proj": "wq", "q_a_proj": "wq_a", "q_b_proj": "wq_b", "kv_a_proj": "wkv_a", "kv_b_proj": "wkv_b",
          "v_proj": "wo", "fc1": "w1", "fc2": "w2", "shared_fc1": "shared_w1", "shared_fc2": "shared_w2"}
"""torchtitan's name of the one product each row stands for (a gated ``fc1`` stands for two)."""
_GATED = {"fc1": ("fc2", "w1", "w3"), "shared_fc1": ("shared_fc2", "shared_w1", "shared_w3")}
"""A first feed-forward row, the row after its activation, and its two products' names (gate, value)."""


def _widths(layer, row: Cost) -> list[tuple[str, Expr]]:
    """The separate products one fused row stands for, as (name, output width), in call order."""
    dims, n = layer.dims, row.gemms[0].n
    m1 = dims["m1"]
    if row.name == "qkv_proj":
        q = dims.get("head_dim", dims["e"] / dims["h"])
        v, kv = dims.get("v_head_dim", q), dims.get("kv_heads", dims["h"])
        return [("wq", dims["h"] / m1 * q), ("wk", kv / m1 * q), ("wv", kv / m1 * v)]
    if row.name in _GATED:
        after, gate, value = _GATED[row.name]
        if simplify(n - 2 * layer[after].gemms[0].k) == 0:      # gated: twice the width the next product reads
            return [(gate, n / 2), (value, n / 2)]
    return [(SINGLE[row.name], n)]


def products(layer) -> list[tuple[Cost, bool]]:
    """Each product of the block as its own ``linear`` Cost, in call order, with whether the
    policy saves its output: the 1st, 3rd, 5th, ... (every second one is recomputed).

    >>> from symbolic_cost.blocks.layer import transformer_layer
    >>> from symbolic_cost.blocks.specs import Feedforward, Heads, Projections
    >>> from symbolic_cost.blocks.wiring import Run, Wiring
    >>> layer = transformer_layer(1, 8, 64, 96, Heads(4, kv_heads=2, rotary=True), ffn=Feedforward(gated=True),
    ...                           projections=Projections(qkv_bias=False, out_bias=False),
    ...                           wiring=Wiring(norm="rms", dropouts=False), run=Run(flash=True))
    >>> [(p.name, saved) for p, saved in products(layer)][:4]
    [('wq', True), ('wk', False), ('wv', True), ('wo', False)]
    >>> [(p.name, p.act_out) for p, saved in products(layer) if saved][2:]
    [('w1', 1536), ('w2', 1024)]
    """
    check_layer(layer)
    out, counted = [], 0
    for row in layer:
        if row.name in PRODUCTS:
            g = row.gemms[0]
            for name, width in _widths(layer, row):
                product = linear(g.m, 1, g.k, width, bias=False, es=g.element_bytes, conventions=layer.conventions,
                                 name=name)
                if row.fp8 or row.fp4:          # aten._scaled_mm: always saved, outside the count of aten.mm
                    out.append((product, True))
                    continue
                out.append((product, counted % 2 == 0))      # torchtitan's count starts at 1
                counted += 1
    return out


def kept_bytes(layer, tokens_bytes) -> Expr:
    """Bytes one layer keeps for backward: its input (``tokens_bytes``), the outputs of the
    saved products, the kernel's outputs (what it keeps beyond its inputs Q, K, V: ``O`` and the
    log-sum-exp, ``ops.attention.flash_attention``) and a router's (``saved_routing``)."""
    kernel = layer[KERNEL]
    saved = sum((p.act_out for p, keep in products(layer) if keep), Integer(0))
    return tokens_bytes + saved + kernel.act_buffer - kernel.act_in - kernel.act_in_other + saved_routing(layer)


def saved_routing(layer) -> Expr:
    """Bytes a mixture of experts keeps beside its products: ``topk``'s values (fp32) and indices
    (int64) of every token's ``top_k`` choices, and under expert parallelism (``ep > 1``) the
    all-to-alls' outputs: the token counts (``E`` int64) and the dispatched and the combined
    tokens (``tokens x top_k`` hidden vectors each, evenly routed).  0 without experts."""
    if TOPK not in layer.names:
        return Integer(0)
    dims, router, expert = layer.dims, layer[FORCED[0]].gemms[0], layer[GROUPED[0]].gemms[0]
    choices = router.m * dims["top_k"]
    exchanged = dims["experts"] * 8 + 2 * choices * expert.k * expert.element_bytes
    return choices * (4 + 8) + exchanged * Min(1, dims.get("ep", 1) - 1)      # 0 at ep = 1, a symbol's too


def redone(layer) -> list[Cost]:
    """The forward work backward runs again: every row that is not a counted product, the
    kernel or ``topk`` (norms, rotary, activations, residual adds, the router's gate, the
    experts' grouped products, the token dispatch and combine without their all-to-alls), and
    the counted products whose output is not saved."""
    check_layer(layer)
    rows = [replace(row, collectives=()) if row.name in EXCHANGES else row
            for row in layer if row.name not in PRODUCTS + (KERNEL, TOPK)]
    return rows + [p for p, keep in products(layer) if not keep]


def whole_rows(layer) -> list[str]:
    """Names of the rows whose forward runs again whole (their collectives with it): the
    element-wise rows (not the exchanges, whose all-to-alls' outputs are kept) and the rows of
    the unsaved products torchtitan does not fuse (``v_proj``, ``fc2``, ...)."""
    names = [row.name for row in redone(layer) if row.name in layer.names and row.name not in EXCHANGES]
    singles = {p.name: keep for p, keep in products(layer)}
    return names + [row for row, name in SINGLE.items() if row not in _GATED and singles.get(name) is False]


def check_layer(layer) -> None:
    """Refuse a block the policy is not defined on here (see the module's docstring)."""
    if layer.dims.get("m1", 1) != 1 or layer.dims.get("s1", 1) != 1:
        raise InputError("recompute='op' (torchtitan's op-level policy) is counted on one tensor-parallel rank "
                         "(m1=1, s1=1): under tensor parallelism it also keeps the reduce-scatter outputs and "
                         "gathers the norms' outputs again", "recompute")
    if KERNEL not in layer.names:
        raise InputError("recompute='op' counts torchtitan's policy around the fused attention kernel (flash=True); "
                         "an eager core's products are aten.bmm, outside its save list", "recompute")
    for row in layer:
        if row.gemms and row.name not in PRODUCTS + FORCED + GROUPED + (KERNEL,):
            raise InputError(f"recompute='op' is defined on torchtitan's blocks (products "
                             f"{', '.join(PRODUCTS + FORCED + GROUPED)}); row {row.name!r} is a product it "
                             f"does not place (cross attention, a gated shared expert, ...)", "recompute")
        if row.name in PRODUCTS + FORCED and simplify(row.weights - row.gemms[0].k * row.gemms[0].n
                                                      * row.gemms[0].element_bytes) != 0:
            raise InputError(f"recompute='op': {row.name} has a bias (aten.addmm, which torchtitan's count of "
                             f"aten.mm does not see); the policy is defined on bias-free products", "recompute")
        if row.name in GROUPED and (row.fp8 or row.fp4):
            raise InputError(f"recompute='op' with experts under a low-precision recipe: torchtitan's scaled "
                             f"grouped products ({row.name}) are not counted here", "recompute")


def check_training(training) -> None:
    """Refuse ``recompute="op"`` with what changes torchtitan's count or its save list: tensor
    or context parallelism, a tensor grid, LoRA (its adapters' products)."""
    given = [name for name, on in (("m1", training.m1 != 1), ("s1", training.s1 != 1), ("cp", training.cp != 1),
                                   ("tensor", training.tensor is not None), ("lora", training.lora is not None)) if on]
    if not given:
        return
    name, value = given[0], getattr(training, given[0])
    if isinstance(value, Symbol):            # search varies the degree: say so, not "got m1=m1"
        raise InputError(f"recompute='op' (torchtitan's op-level policy) is counted on one tensor-parallel rank, "
                         f"and {name} is varied here (search tries every degree, sweep its --grid): search "
                         f"with recompute 'full' or 'selective', sweep {name} at 1 only, or give the layout to "
                         f"summary", "recompute")
    raise InputError(f"recompute='op' (torchtitan's op-level policy) is counted without {name} (got "
                     f"{name}={value!r}): it changes which products the policy counts or saves (see "
                     f"models.op_recompute)", "recompute")
