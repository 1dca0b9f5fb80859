"""Megatron-Bridge's ``peft`` section (``ConfigContainer.peft``) as LoRA's policy (``models.lora``).

A Bridge fine-tuning recipe sets ``cfg.peft = default_peft_config("lora")``: Megatron-Bridge's
``LoRA`` (``megatron/bridge/peft/lora.py`` at 067f987df), rank ``dim`` 32 on the four linear
products of a layer, ``linear_qkv``, ``linear_proj``, ``linear_fc1`` and ``linear_fc2``, unless the
recipe or the YAML sets other fields.  Each Bridge module is one fused product, so its adapter is
one ``A``/``B`` pair over the whole product (``models.lora.TARGETS``):

==================  ===========================================================
``linear_qkv``      ``qkv`` (one adapter over the fused query, key and value)
``linear_proj``     ``o``
``linear_fc1``      ``gate_up`` in a gated MLP, else ``up`` (all of ``fc1``)
``linear_fc2``      ``down``
==================  ===========================================================

``alpha`` and the initialisations change no count.  Refused by name: DoRA, adapters of other
modules (Mamba's ``in_proj``/``out_proj``, latent attention's projections, wildcards), an
``exclude_modules`` list, an adapter dropout above 0 (its mask and input copy are not modelled),
another adapter dtype, the regathered sequence-parallel input, the experimental all-to-all, and
adapters on a mixture of experts' MLPs (the experts' adapters are not modelled).
"""

from __future__ import annotations

from symbolic_cost.checks import InputError

LORA_DEFAULTS = {"target_modules": ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"], "dim": 32}
"""``LoRA``'s dataclass defaults that change a count."""

NO_COST = {"_target_", "alpha", "dropout_position", "lora_A_init_method", "lora_B_init_method",
           "share_expert_adapters", "experts_shared_outer_loras", "normalize_moe_lora"}
"""Keys of ``peft`` that change no count here (the expert ones: refused with the experts' targets)."""

OFF = {"exclude_modules": "modules excluded from a default set of targets are not read; list target_modules",
       "lora_dtype": "adapters in another dtype than the model's are not modelled",
       "sequence_parallel_input_regather": "the regathered sequence-parallel input of LoRA's A is not modelled",
       "a2a_experimental": "the experimental all-to-all adapters are not modelled"}
"""Keys read as refused unless at their off value (``None``, ``False``, ``[]``), with why."""

MODULES = {"linear_qkv": "qkv", "linear_proj": "o", "linear_fc2": "down"}
EXPERT_MODULES = ("linear_fc1", "linear_fc2")


def peft_policy(peft, arch, notes: list) -> dict:
    """``lora_rank``, ``lora_targets`` and ``lora_base`` of a ``peft`` section (none without one)."""
    if peft is None:
        return {}
    if not isinstance(peft, dict):
        raise InputError(f"peft must be a mapping (a serialised LoRA), got {peft!r}", "peft")
    kind = str(peft.get("_target_") or "")
    if kind.rsplit(".", 1)[-1] == "DoRA":
        raise InputError("peft: DoRA is not modelled (its magnitude vector and the weight it normalises each step); "
                         "LoRA is", "peft._target_")
    if kind.rsplit(".", 1)[-1] != "LoRA":
        raise InputError(f"peft._target_ {kind or 'missing'}: the reader reads Megatron-Bridge's LoRA "
                         f"(megatron.bridge.peft.lora.LoRA)", "peft._target_")
    for key, value in peft.items():
        if key in OFF and value not in (None, False, []):
            raise InputError(f"peft.{key} = {value!r}: {OFF[key]}", f"peft.{key}")
        if key not in NO_COST and key not in OFF and key not in ("dim", "target_modules", "dropout"):
            raise InputError(f"peft.{key}: a LoRA key this reader does not read (it may change the cost)",
                             f"peft.{key}")
    dropout = peft.get("dropout", 0.0)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or dropout != dropout:
        raise InputError(f"peft.dropout must be a number, got {dropout!r}", "peft.dropout")
    if dropout != 0:
        raise InputError(f"peft.dropout = {dropout!r}: an adapter dropout keeps its mask and a copy of the "
                         f"input, not modelled (0, LoRA's default, is)", "peft.dropout")
    rank = peft.get("dim") if peft.get("dim") is not None else LORA_DEFAULTS["dim"]
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise InputError(f"peft.dim must be a positive integer, got {rank!r}", "peft.dim")
    modules = peft.get("target_modules") or LORA_DEFAULTS["target_modules"]
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise InputError(f"peft.target_modules must be a list of module names, got {modules!r}", "peft.target_modules")
    targets = [_target(module, arch) for module in modules]
    latent = " (latent attention has no linear_qkv: it adapts nothing there)" \
        if arch.latent is not None and "linear_qkv" in modules else ""
    notes.append(f"peft: LoRA of rank {rank} on {', '.join(modules)} (as {', '.join(targets)}), the base "
                 f"frozen{latent}")
    return {"lora_rank": rank, "lora_targets": ",".join(targets), "lora_base": "16-bit"}


def _target(module, arch) -> str:
    """The library's target of a Bridge module name."""
    if arch.moe is not None and module in EXPERT_MODULES:
        raise InputError(f"peft.target_modules {module}: adapters on a mixture of experts' MLPs are not modelled; "
                         f"adapt linear_qkv and linear_proj only", "peft.target_modules")
    if module == "linear_fc1":
        return "gate_up" if arch.gated else "up"
    if module not in MODULES:
        raise InputError(f"peft.target_modules {module!r}: the reader adapts {', '.join((*MODULES, 'linear_fc1'))} "
                         f"(a layer's own products); other modules and wildcards are not modelled",
                         "peft.target_modules")
    return MODULES[module]
