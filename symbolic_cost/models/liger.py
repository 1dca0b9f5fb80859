"""Liger-Kernel as a Trainer applies it: ``use_liger_kernel`` (transformers' ``TrainingArguments``, TRL's
and the alignment handbook's recipes) and ``liger_kernel_config``, LLaMA-Factory's ``enable_liger_kernel``.

transformers' ``Trainer`` calls Liger's ``_apply_liger_kernel_to_instance`` on the model
(``integrations/liger.py``), which patches the model types Liger lists (``PATCHED``) and leaves any
other untouched, logging it.  For a causal LM it swaps in, by default:

* RMSNorm, SwiGLU (GeGLU for Gemma) and rotary embeddings as fused kernels: they keep what the
  library's count already keeps for them (the norm's input and statistics, the gate and up
  projections, nothing for the rotation), so the count does not change;
* the LM head and its loss as one function, the fused linear cross-entropy
  (``Training.fused_loss``: ``ops.fused_linear_cross_entropy``), where the model is given labels
  (``lce_forward`` skips the logits in training then): an SFT step.  ORPO's trainer takes the
  logits to score its pairs, so the head runs as before; TRL's DPO trainer runs Liger's fused
  linear DPO loss instead (``LigerFusedLinearDPOLoss``: the policy's and the reference's heads a
  chunk at a time), which is refused.  Granite's patch leaves the fused loss off by default (it
  scales its logits).

``liger_kernel_config`` passes its keys to the patch (``fused_linear_cross_entropy``,
``cross_entropy``, ``rms_norm``, ``swiglu``, ``geglu``, ``rope``, ``layer_norm``): the fused loss
follows ``fused_linear_cross_entropy``; Liger's separate cross-entropy kernel (``cross_entropy``) is
noted and counted as the library's loss; Liger refuses both together.

The model types and defaults are Liger-Kernel 0.8.5's (``transformers/monkey_patch.py``:
``MODEL_TYPE_TO_APPLY_LIGER_FN``, the ``apply_liger_kernel_to_*`` defaults).
"""

from __future__ import annotations

from symbolic_cost.checks import InputError

PATCHED = frozenset({
    "deepseek_v2", "deepseek_v3", "deepseek_v4", "gemma", "gemma2", "gemma3_text", "gemma3", "gemma4_text", "gemma4",
    "glm4", "glm4v", "glm4v_moe", "gpt_oss", "internvl", "llama", "llama4_text", "llama4", "llava", "granite",
    "mllama", "mllama_text_model", "ministral", "mistral", "mixtral", "muse_glimmer", "nemotron", "olmo2", "pixtral",
    "olmo3", "qwen2", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text",
    "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_vl", "qwen3_vl_text",
    "qwen3_vl_moe", "qwen3_vl_moe_text", "smollm3", "phi3", "paligemma", "falcon_h1", "smolvlm", "hunyuan_v1_dense",
    "hunyuan_v1_moe", "exaone4"})
"""The ``model_type``s Liger patches (Liger-Kernel 0.8.5's ``MODEL_TYPE_TO_APPLY_LIGER_FN``)."""

FACTORY_PATCHED = frozenset({
    "gemma", "gemma2", "gemma3", "gemma3_text", "glm", "glm4", "glm4v", "granite", "llama", "llava", "mistral",
    "mixtral", "mllama", "olmo2", "paligemma", "phi3", "qwen2", "qwen2_vl", "qwen2_5_vl", "qwen3", "qwen3_moe",
    "qwen3_next", "qwen3_5", "qwen3_5_moe", "gpt_oss"})
"""The ``model_type``s LLaMA-Factory's ``enable_liger_kernel`` patches (its
``model/model_utils/liger_kernel.py``, LLaMA-Factory at its mirror's head): its own list, which
leaves the fused loss off (Liger's cross-entropy kernel instead) in stages other than pt and sft,
whose trainers need the logits."""

NO_FUSED_LOSS = frozenset({"granite"})
"""Model types whose patch leaves the fused linear cross-entropy off unless asked
(``apply_liger_kernel_to_granite``: ``fused_linear_cross_entropy=False``, ``cross_entropy=True``)."""

KEYS = frozenset({"fused_linear_cross_entropy", "cross_entropy", "rms_norm", "swiglu", "geglu", "rope", "layer_norm"})
"""``liger_kernel_config`` keys of a causal LM's patch."""

PAIRED = ("orpo", "reward")
"""Trainers that read the logits to score their pairs (``models.preference``; a reward model's score
head, which has no LM head at all): no labels reach a causal LM's forward, so ``lce_forward``
computes the logits and the fused loss does not run."""

OWN_LOSS = {"dpo": "TRL's DPO trainer then runs Liger's fused linear DPO loss (LigerFusedLinearDPOLoss: the policy's "
                   "and the reference's LM heads a chunk of pairs at a time), which is not modelled"}
"""Trainers that swap in a fused loss of their own under ``use_liger_kernel`` (trl at f2cd577)."""


def liger_policy(model_type: str | None, config, trainer: str, notes: list, field: str,
                 patched=PATCHED) -> dict:
    """The policy of Liger's kernels, switched on by the recipe's ``field``, for a model of
    ``model_type`` (``patched``: the types the framework patches) trained by ``trainer`` (``sft``,
    or ``models.preference``'s): ``{"fused_loss": True}`` where the fused linear cross-entropy
    runs, else ``{}``; what changes nothing is noted.

    >>> notes = []
    >>> liger_policy("llama", None, "sft", notes, "use_liger_kernel"), len(notes)
    ({'fused_loss': True}, 1)
    >>> liger_policy("gpt2", None, "sft", [], "use_liger_kernel")
    {}
    """
    config = _config(config)
    if model_type is None:
        raise InputError(f"{field}: Liger patches the model types it lists, and this model's type is not known "
                         f"(give the model with --hf-config, --hf-model or --preset)", field)
    if model_type not in patched:
        notes.append(f"{field}: no Liger kernels are applied to model type {model_type}; transformers' own modules "
                     f"run (logged, and the run goes on)")
        return {}
    fused = config.get("fused_linear_cross_entropy", model_type not in NO_FUSED_LOSS)
    if fused and config.get("cross_entropy", False):
        raise InputError(f"liger_kernel_config: cross_entropy and fused_linear_cross_entropy both on; Liger refuses "
                         f"them together", "liger_kernel_config")
    if trainer in OWN_LOSS:
        raise InputError(f"{field} with the {trainer} trainer: {OWN_LOSS[trainer]}; set it to false", field)
    kernels = "its RMSNorm, SwiGLU and rotary kernels keep what the count keeps for them"
    if fused and trainer in PAIRED:
        notes.append(f"{field}: the {trainer} trainer scores its pairs from the logits (no labels reach the model), "
                     f"so Liger's fused loss does not run; {kernels}")
        return {}
    if not fused:
        loss = " and its cross-entropy kernel counted as the library's loss" if config.get(
            "cross_entropy", model_type in NO_FUSED_LOSS) else ""
        notes.append(f"{field}: Liger's fused loss off (liger_kernel_config or the patch's default); {kernels}{loss}")
        return {}
    notes.append(f"{field}: Liger's fused linear cross-entropy runs the LM head and its loss (fused_loss: both "
                 f"gradients formed in the forward, a chunk of tokens' logits at a time); {kernels}")
    return {"fused_loss": True}


def _config(config) -> dict:
    """``liger_kernel_config`` checked: a mapping of Liger's keys (``KEYS``) to booleans, or none."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise InputError(f"liger_kernel_config must be a mapping of Liger's switches to true or false, got "
                         f"{config!r}", "liger_kernel_config")
    for key, value in config.items():
        if key not in KEYS:
            raise InputError(f"liger_kernel_config.{key}: not a switch of Liger's causal-LM patches "
                             f"({', '.join(sorted(KEYS))})", f"liger_kernel_config.{key}")
        if not isinstance(value, bool):
            raise InputError(f"liger_kernel_config.{key} must be true or false, got {value!r}",
                             f"liger_kernel_config.{key}")
    return config
