"""Selective recomputation by module: Megatron-LM's ``--recompute-modules`` (and the library's
``"activation"`` policy), as what one layer redoes in backward and what it stops keeping.

Megatron-Core wraps each module in one of two checkpoints (``megatron/core/transformer``):

* **whole-module** (``tensor_parallel.checkpoint``): forward runs without saving anything inside
  the module and keeps only its input; backward runs the module's forward again, its
  collectives included, then its backward.
* **output-discarding** (``CheckpointWithoutOutput``): the module's output is freed once the next
  operation has consumed it, and rebuilt from the module's input (kept anyway) before backward
  needs it.

============== ================== ============================== =============================
module         checkpoint         redone                         no longer kept (kept instead)
============== ================== ============================== =============================
core_attn      whole-module       the attention core's rows      the core's (Q, K, V:
                                  (``Cost.recompute``             ``blocks.latent_attention.
                                  ``"selective"``), or the fused ``core_input_bytes``); a fused
                                  kernel                         kernel's log-sum-exp
moe_act        output-discarding  ``expert_act`` (and the clamps ``expert_fc2``'s input
                                  before it, ``expert_clamp``)
layernorm      output-discarding  the norms Transformer Engine   what their consumers keep:
                                  does not fuse into the next    the router, the shared
                                  product: an MoE layer's norm,  experts' products (MoE), the
                                  latent attention's first norm  first query projection (MLA)
mla_up_proj    output-discarding  the latent norms, the up-      their own, and the kernel's
               (inputs to the     projections, the rotary row    Q, K, V (the latents and the
               up-projections)                                   rotary key)
mlp            whole-module       a dense MLP: its norm, ``fc1``, all of them (the MLP's input)
                                  ``act``, ``dpr1``, ``fc2``
moe            whole-module       every row from the router to   all of them (the layer's
                                  ``moe_sum``, the all-to-alls   input, unless ``layernorm``
                                  again                          discards it too)
shared_experts whole-module       the shared experts and their   all of them (their input is
                                  gate                           the router's, kept)
activation     output-discarding  every activation function      each second product's input
               (the library's)    and ``dpr1`` (``Cost.recompute`` (``Cost.rebuilt``
                                  ``"activation"``)              ``"activation"``)
============== ================== ============================== =============================

Transformer Engine's spec fuses a dense layer's norms into the following product
(``LayerNormLinear``: ``input_layernorm`` and ``pre_mlp_layernorm`` are ``IdentityOp``), so
``layernorm`` leaves dense attention and dense MLPs as they are (``transformer_layer.py``: only a
norm that is not ``IdentityOp`` is recomputed); a mixture of experts' norm and latent attention's
input norm are separate modules (``gpt_layer_specs.py``).  Megatron-LM refuses ``moe_act`` without
grouped experts and ``mla_up_proj`` without latent attention; ``mlp`` skips mixture-of-experts
layers.  A module that applies to no layer of the model is refused (``check_modules``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Integer

from symbolic_cost.blocks import Block
from symbolic_cost.blocks.latent_attention import core_input_bytes, rotary_key_bytes
from symbolic_cost.blocks.moe import ROUTED_ROWS, SHARED_ROWS
from symbolic_cost.checks import InputError

MLP_ROWS = ("fc1", "act", "dpr1", "fc2")
UP_PROJECTIONS = ("q_a_norm", "q_b_proj", "kv_a_norm", "kv_b_proj", "rotary")
KERNEL = "flash_attention"
SEPARATE_NORMS = (("router", "_norm_2", ("router", "shared_fc1", "shared_gate")),
                  ("kv_a_proj", "_norm_1", ("q_a_proj", "q_proj")))
"""The norms Transformer Engine's spec leaves separate: ``(a row that marks the block, the norm's
name ending, the rows that keep its output)``: a mixture of experts' norm, latent attention's."""


@dataclass(frozen=True)
class Selection:
    """What recomputation does to one layer: the rows (by position) whose forward runs again
    (``redone``), those of them whose collectives do not (``quiet``: a norm recomputed on its
    sequence shard, the gather into the tensor region left to the product that needs it), the
    rows whose ``act_buffer`` is not kept (``rebuilt``), and the bytes kept instead (``kept``: a
    checkpoint's inputs, less any part of a row's buffer it frees)."""

    redone: frozenset = frozenset()
    rebuilt: frozenset = frozenset()
    kept: Expr = Integer(0)
    quiet: frozenset = frozenset()

    def __or__(self, other: "Selection") -> "Selection":
        loud = (self.redone - self.quiet) | (other.redone - other.quiet)
        return Selection(self.redone | other.redone, self.rebuilt | other.rebuilt, self.kept + other.kept,
                         (self.quiet | other.quiet) - loud)


def selection(layer: Block, units) -> Selection:
    """The union of what each of ``units`` (``Recompute.units``) does to ``layer``.

    >>> from symbolic_cost.blocks import transformer_layer
    >>> from symbolic_cost.symbols import b, l, e, f, h
    >>> layer = transformer_layer(b, l, e, f, h)
    >>> [layer.names[i] for i in sorted(selection(layer, {"mlp"}).redone)]
    ['layer_norm_2', 'fc1', 'act', 'fc2']
    """
    out = Selection()
    for unit in sorted(units):
        out = out | UNITS[unit](layer, units)
    return out


def _at(layer: Block, names) -> frozenset:
    """Positions of the rows named ``names``."""
    return frozenset(i for i, name in enumerate(layer.names) if name in names)


def _tagged(tag: str):
    """The unit of rows marked in the blocks (``Cost.recompute``, ``Cost.rebuilt``)."""
    def unit(layer: Block, units) -> Selection:
        rows = list(layer)
        return Selection(frozenset(i for i, r in enumerate(rows) if r.recompute == tag),
                         frozenset(i for i, r in enumerate(rows) if r.rebuilt == tag))
    return unit


def _core_attn(layer: Block, units) -> Selection:
    """The attention core; Q, K and V kept to redo it (Korthikanti et al. 2022).  A fused kernel
    is redone too: Megatron-Core checkpoints ``core_attention`` whatever it runs
    (``attention.py``'s ``checkpoint_core_attention``; it warns that a fused one needs no
    recomputation, and runs it again).  The checkpoint keeps the kernel's inputs Q, K, V, and
    ``linear_proj`` its output O; the log-sum-exp is what it frees."""
    tagged = _tagged("selective")(layer, units)
    fused = frozenset(i for i, row in enumerate(layer) if row.fused)      # the kernel, or its context-parallel run
    if tagged.rebuilt or not fused:
        return Selection(tagged.redone, tagged.rebuilt, core_input_bytes(layer) if tagged.rebuilt else Integer(0))
    kept = sum((row.act_in + row.act_in_other + row.act_out for i, row in enumerate(layer) if i in fused), Integer(0))
    return Selection(fused, fused, kept)


def _moe_act(layer: Block, units) -> Selection:
    """The routed experts' activation (``experts.py``: ``moe_act``, whose checkpoint wraps
    ``bias_act_func``, the clamps of a clamped unit included), rebuilding ``expert_fc2``'s input."""
    return Selection(_at(layer, ("expert_clamp", "expert_act")), _at(layer, ("expert_fc2",)))


def _norm(layer: Block, suffix: str) -> frozenset:
    return frozenset(i for i, name in enumerate(layer.names) if name.endswith(suffix))


def _layernorm(layer: Block, units) -> Selection:
    """The separate norms (module docstring), their outputs dropped where their consumers keep
    them; only the norm runs again (``Selection.quiet``)."""
    out = Selection()
    for present, norm, consumers in SEPARATE_NORMS:
        if present in layer.names:
            norms = _norm(layer, norm)
            out = out | Selection(norms, _at(layer, consumers), quiet=norms)
    return out


def _mla_up_proj(layer: Block, units) -> Selection:
    """Latent attention's up-projections and rotary row (``multi_latent_attention.py``,
    ``qkv_up_proj_and_rope_apply``), run without saving; it keeps their inputs, the latents
    ``q_a_norm`` and ``kv_a_norm`` normalise and the rotary key, and frees the kernel's Q, K, V
    (rebuilt before the kernel's backward).  Without a query latent, ``q_proj`` is inside too,
    its input (the hidden states) kept as before."""
    if "kv_b_proj" not in layer.names:
        return Selection()
    rebuilt = _at(layer, UP_PROJECTIONS)
    kernel = layer[KERNEL if KERNEL in layer.names else "context_attention"]     # the ring's, under CP
    latents = sum((row.act_in for row in layer if row.name in ("q_a_norm", "kv_a_norm")), Integer(0))
    kept = latents + rotary_key_bytes(layer) - kernel.act_in - kernel.act_in_other
    return Selection(rebuilt | _at(layer, ("q_proj",)), rebuilt, kept)


def _mlp(layer: Block, units) -> Selection:
    """A dense MLP (``transformer_layer.py``: not in a mixture-of-experts layer), its norm fused
    into ``fc1``; the checkpoint keeps the MLP's input."""
    if "router" in layer.names:
        return Selection()
    rows = _at(layer, MLP_ROWS) | _norm(layer, "_norm_2")
    norm = [r for r in layer if r.name.endswith("_norm_2")]
    kept = norm[0].act_in if norm else layer["fc1"].act_buffer
    return Selection(rows, rows, kept)


def _moe(layer: Block, units) -> Selection:
    """The whole MoE layer (``moe_layer.py``: ``moe_layer_recompute``), keeping its input (the
    norm's output, the router's input) unless ``layernorm`` discards that too."""
    if "router" not in layer.names:
        return Selection()
    rows = _at(layer, ROUTED_ROWS + SHARED_ROWS + ("moe_sum",))
    return Selection(rows, rows, Integer(0) if "layernorm" in units else layer["router"].act_in)


def _shared_experts(layer: Block, units) -> Selection:
    """The shared experts and their gate (``shared_experts.py``); their input is the router's."""
    rows = _at(layer, SHARED_ROWS)
    return Selection(rows, rows)


UNITS = {"core_attn": _core_attn, "activation": _tagged("activation"), "moe_act": _moe_act,
         "layernorm": _layernorm, "mla_up_proj": _mla_up_proj, "mlp": _mlp, "moe": _moe,
         "shared_experts": _shared_experts}
"""Each unit a policy can name (``training_values.Recompute.units``) and what it does to a layer."""


def check_modules(layers, modules, flash: bool, model: str) -> None:
    """Refuse ``modules`` (Megatron-LM's names) that apply to none of ``layers`` (would be
    ignored), ``mla_up_proj`` without latent attention (Megatron-LM refuses it) or without the
    fused kernel whose Q, K, V it frees (not modelled).  ``core_attn``, Megatron-LM's default, is
    taken on any core (a fused one is the kernel, run again)."""
    for name in modules:
        if name == "core_attn":        # the default: kept as it always was, whatever the core
            continue
        if name == "mla_up_proj" and not flash:
            raise InputError("recompute_modules mla_up_proj is modelled around the fused attention kernel "
                             "(flash=True), whose Q, K, V it frees", "recompute_modules")
        if not any(UNITS[name](layer, set(modules)).redone for layer in layers):
            raise InputError(f"recompute_modules {name!r} applies to no layer of {model} (Megatron-LM: "
                             f"{_WHERE[name]}); it would be ignored", "recompute_modules")


_WHERE = {"moe_act": "routed experts", "mla_up_proj":
          "multi-latent attention", "layernorm": "a norm Transformer Engine does not fuse: before routed experts "
          "or in latent attention", "mlp": "a dense MLP", "moe": "a mixture-of-experts layer",
          "shared_experts": "shared experts"}
