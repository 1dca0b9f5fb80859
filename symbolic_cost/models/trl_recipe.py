"""The fields a TRL recipe adds to its ``TrainingArguments`` (TRL's ``ModelConfig``,
``ScriptArguments`` and ``SFTConfig``, the alignment handbook's data arguments): one YAML file that
``trl sft --config`` or the handbook's ``run_sft.py`` splits into those dataclasses, launched with
``accelerate launch --config_file``.  ``recipe_fields`` takes them out of the recipe and reads
those that change a count:

=================================  =======================================================
field                              library field
=================================  =======================================================
``max_length`` (``max_seq_length``  ``l``: every sequence counted at the longest a batch
of older TRL)                      holds (packed, or padded to it; noted)
``attn_implementation`` (the       ``flash``: ``flash_attention_2``, ``flash_attention_3`` and
handbook's older
``use_flash_attention_2: true``)
                                   ``sdpa`` (PyTorch's fused kernel on GPU) on, ``eager`` off;
                                   ``attention_kernel``: ``flash-attention-2`` for
                                   ``flash_attention_2`` and ``sdpa`` (whose backends PyTorch
                                   tries FlashAttention-2 first), ``flash-attention-3``
``torch_dtype`` (``dtype``)        ``bfloat16``/``float16``: the parameters are 16-bit, so
                                   AdamW keeps its moments in 16 bits and there is no fp32
                                   master (``master_weights`` false; the precision too where
                                   ``bf16``/``fp16`` do not set it), but under LoRA only the
                                   frozen base is (PEFT keeps the adapters in fp32, as the
                                   fp32 master counts them); under FSDP in mixed precision
                                   and DeepSpeed the master stays (their fp32 copy:
                                   ``hf_trainer.FP32_COPY``); ``float32`` as is;
                                   ``auto``: the checkpoint's, as the model's config.json
                                   states it (``auto_dtype``; bfloat16 where it states
                                   none, noted)
``use_peft`` with ``lora_r`` (16),  LoRA (``lora_rank``, ``lora_targets``: PEFT's module names,
``lora_target_modules`` (PEFT's    read as ``models.lora.PEFT_NAMES`` reads them,
default ``q_proj, v_proj``),       ``all-linear`` as every projection of a Llama layer;
``load_in_4bit``, ``load_in_8bit``,  ``lora_base`` nf4 with ``load_in_4bit``, int8 with
``use_bnb_nested_quant`` (false)   ``load_in_8bit``, else fp32 unless ``torch_dtype`` is
                                   16-bit (TRL's ``ModelConfig.dtype``: ``float32``);
                                   ``double_quant`` as
                                   ``use_bnb_nested_quant``)
``use_liger`` (SFTConfig's name    ``use_liger_kernel`` (``models.liger``)
before ``use_liger_kernel``)
=================================  =======================================================

The model's name, the data, the chat template and LoRA's scalars change no count (``NO_COST``);
a preference recipe's fields (DPO, ORPO: their chosen and rejected sequences, DPO's reference model)
are read by ``models.preference`` for the trainer that runs the recipe; a reference model loaded
with its own options, DoRA, ``lora_modules_to_save``, ``activation_offloading`` and a 4-bit type
other than NF4 are refused by name (``REFUSED``).
"""

from __future__ import annotations

from symbolic_cost import symbols as S
from symbolic_cost.checks import LARGEST_COUNT, InputError, text_flag
from symbolic_cost.models.lora import PEFT_NAMES
from symbolic_cost.models.preference import FIELDS as PREFERENCE_FIELDS, preference_fields

NO_COST = {
    "model_name_or_path", "model_revision", "trust_remote_code", "tokenizer_name_or_path", "chat_template",
    "chat_template_path", "dataset_name", "dataset_config", "dataset_mixture", "dataset_mixer", "dataset_splits",
    "dataset_train_split", "dataset_test_split", "dataset_text_field", "dataset_num_proc", "dataset_kwargs",
    "dataset_streaming", "dataset_configs", "preprocessing_num_workers", "overwrite_output_dir", "packing",
    "packing_strategy", "padding_free", "pad_to_multiple_of", "eval_packing", "shuffle_dataset", "eos_token",
    "pad_token",
    "completion_only_loss", "assistant_only_loss", "lora_alpha", "lora_dropout", "lora_task_type", "use_rslora",
    "gradient_checkpointing_use_reentrant", "ignore_bias_buffers", "system_prompt", "hub_model_revision",
    "datasets", "streaming", "test_split_size",
}
"""Recipe fields that change no count: the model's name (the model is ``--preset``/``--hf-config``),
the data and its template (TRL's ``DatasetMixtureConfig``: ``datasets``, ``streaming``,
``test_split_size``), packing (the sequences are counted at ``max_length`` either way), LoRA's
scaling and dropout."""

LAUNCH = ("accelerate_config", "num_processes")
"""Keys of a recipe that ``trl <command> --config`` passes to ``accelerate launch`` (TRL's
``training.py`` hands the keys outside its dataclasses to the launcher; ``accelerate_config.py``
turns ``accelerate_config`` into ``--config_file``): the launch config and the processes, read
beside the recipe (``cli.frameworks``)."""

TRL_LAUNCH_CONFIGS = {
    "zero1": dict(distributed_type="DEEPSPEED", deepspeed_config=dict(zero_stage=1, gradient_accumulation_steps=1)),
    "zero2": dict(distributed_type="DEEPSPEED", deepspeed_config=dict(zero_stage=2, offload_optimizer_device="none",
                                                                      offload_param_device="none")),
    "zero3": dict(distributed_type="DEEPSPEED", deepspeed_config=dict(zero_stage=3, offload_optimizer_device="none",
                                                                      offload_param_device="none")),
    "fsdp1": dict(distributed_type="FSDP", fsdp_config=dict(fsdp_version=1, fsdp_sharding_strategy="FULL_SHARD")),
    "fsdp2": dict(distributed_type="FSDP", fsdp_config=dict(fsdp_version=2, fsdp_reshard_after_forward=True)),
    "multi_gpu": dict(distributed_type="MULTI_GPU"),
    "single_gpu": dict(distributed_type="NO"),
}
"""TRL's packaged accelerate configs (``trl/accelerate_configs/<name>.yaml`` at f2cd577, which
``accelerate_config: <name>`` names), their keys that change a count; each runs ``num_processes`` 8
on one machine in ``mixed_precision`` bf16, FSDP without activation checkpointing or offload."""


def trl_launch_config(name: str) -> dict:
    """The accelerate config of TRL's packaged ``name`` (``TRL_LAUNCH_CONFIGS``), as a YAML mapping."""
    if name not in TRL_LAUNCH_CONFIGS:
        raise InputError(f"accelerate_config {name!r}: neither a file nor one of TRL's packaged configs "
                         f"({', '.join(TRL_LAUNCH_CONFIGS)})", "accelerate_config")
    return dict(TRL_LAUNCH_CONFIGS[name], mixed_precision="bf16", num_machines=1, num_processes=8)

REFUSED = {
    "ref_model_init_kwargs": "a reference model loaded otherwise than the trained one is not modelled",
    "use_dora": "DoRA's magnitude vectors and their products are not modelled",
    "lora_modules_to_save": "modules trained whole beside the adapters are not modelled",
    "activation_offloading": "activations offloaded to the host are not modelled",
}
"""Recipe fields that change the cost in ways not modelled, refused where set (true or non-empty)."""

READ = {"use_liger", "max_length", "max_seq_length", "attn_implementation", "use_flash_attention_2", "torch_dtype",
        "dtype", "use_peft", "lora_r", "lora_target_modules", "load_in_4bit", "load_in_8bit", "use_bnb_nested_quant",
        "bnb_4bit_quant_type", "model_init_kwargs"}
"""Recipe fields read (the module's table)."""

FIELDS = NO_COST | set(REFUSED) | READ | set(LAUNCH) | PREFERENCE_FIELDS
"""Every recipe field ``recipe_fields`` takes out of a TrainingArguments file."""

ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""PEFT's ``all-linear`` on a Llama-family layer: every projection (the head left out)."""

FLASH = {"flash_attention_2": True, "flash_attention_3": True, "sdpa": True, "eager": False}

KERNEL = {"flash_attention_2": "flash-attention-2", "flash_attention_3": "flash-attention-3",
          "sdpa": "flash-attention-2"}
"""The fused attention library each ``attn_implementation`` runs (``Training.attention_kernel``):
PyTorch's ``scaled_dot_product_attention`` takes its FlashAttention-2 backend first."""


TRL_DEFAULTS = {"gradient_checkpointing": True, "max_length": 1024}
"""The defaults TRL's configurations give a recipe that leaves these fields out (huggingface/trl at
f2cd577, 2026-07: ``_BaseConfig`` in ``trl/trainer/base_config.py`` and ``SFTConfig``; since TRL
0.22, August 2025), where ``TrainingArguments`` would give no checkpointing and no length: every
layer recomputed, sequences of 1,024 tokens; and ``bf16`` on unless ``fp16`` is (``bf16 = not
fp16`` in ``__post_init__``)."""


def trl_defaults(args: dict) -> list:
    """Fill in ``args`` (a YAML recipe, which ``trl sft --config`` or the alignment handbook parses into
    TRL's ``SFTConfig``) the fields TRL defaults otherwise than ``TrainingArguments`` does
    (``TRL_DEFAULTS``); the notes saying which.

    >>> args = {"per_device_train_batch_size": 4, "fp16": True}
    >>> trl_defaults(args)[0]
    "TRL's defaults where the recipe leaves them out: gradient_checkpointing true, max_length 1024"
    >>> args["gradient_checkpointing"], args["bf16"], args["max_length"]
    (True, False, 1024)
    """
    filled = []
    if "activation_checkpointing" not in args and "gradient_checkpointing" not in args:
        args["gradient_checkpointing"] = TRL_DEFAULTS["gradient_checkpointing"]
        filled.append("gradient_checkpointing true")
    if "max_length" not in args and "max_seq_length" not in args:
        args["max_length"] = TRL_DEFAULTS["max_length"]
        filled.append("max_length 1024")
    if "bf16" not in args:
        args["bf16"] = str(args.get("fp16", False)).lower() != "true"
        filled += ["bf16 true (fp16 unset)"] if args["bf16"] else []
    return [f"TRL's defaults where the recipe leaves them out: {', '.join(filled)}"] if filled else []


def recipe_fields(args: dict, trainer: str = "sft", sixteen_bit: bool | None = None,
                  checkpoint: str | None = None) -> tuple[dict, dict, list]:
    """Take the recipe's own fields out of ``args`` (a recipe as read; changed in place) and read
    them: ``(values, policy, notes)`` over what the TrainingArguments say, for the TRL ``trainer``
    that runs the recipe (``models.preference``: ``pairs`` and ``reference`` in the policy for DPO
    and ORPO); ``sixteen_bit``: whether the model loads in 16 bits, where the recipe's dtype does not
    say it (LLaMA-Factory's checkpoint dtype); ``checkpoint``: the dtype the model's ``config.json``
    states (``checkpoint_dtype``), which ``torch_dtype: auto`` loads (``auto_dtype``).

    >>> args = {"max_length": 2048, "attn_implementation": "flash_attention_2", "per_device_train_batch_size": 4}
    >>> recipe_fields(args)[:2], args
    (({l: 2048}, {'flash': True, 'attention_kernel': 'flash-attention-2'}), {'per_device_train_batch_size': 4})
    """
    recipe = {key: args.pop(key) for key in list(args) if key in FIELDS}
    for key, why in REFUSED.items():
        if recipe.get(key) not in (None, False, [], {}, ""):
            raise InputError(f"{key}: {why}", key)
    if recipe.get("use_liger") not in (None, False):      # SFTConfig's name before use_liger_kernel
        if "use_liger_kernel" in args and args["use_liger_kernel"] != recipe["use_liger"]:
            raise InputError("use_liger and use_liger_kernel disagree: give one", "use_liger")
        args["use_liger_kernel"] = recipe["use_liger"]
    if recipe.get("model_init_kwargs"):
        raise InputError("model_init_kwargs: give the model's loading options as the recipe's own fields "
                         "(torch_dtype, attn_implementation)", "model_init_kwargs")
    values, policy, notes = {}, {}, []
    auto = recipe.get("torch_dtype", recipe.get("dtype")) == "auto"
    if auto:
        recipe["torch_dtype"] = auto_dtype(checkpoint, notes, "the base" if recipe.get("use_peft") else "the model")
        recipe.pop("dtype", None)
    length = recipe.get("max_length", recipe.get("max_seq_length"))
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= LARGEST_COUNT:
            raise InputError(f"max_length must be a positive integer of at most 2**53, got {length!r}", "max_length")
        values[S.l] = length
        notes.append(f"every sequence counted at max_length {length} (packed, or padded to the longest of a batch)")
    attention = recipe.get("attn_implementation")
    if recipe.get("use_flash_attention_2") is not None:
        attention = _older_flash(recipe, attention)
    if attention is not None:
        if not isinstance(attention, str) or attention not in FLASH:
            raise InputError(f"attn_implementation {attention!r}: one of {', '.join(FLASH)}", "attn_implementation")
        policy["flash"] = FLASH[attention]
        if attention in KERNEL:
            policy["attention_kernel"] = KERNEL[attention]
    lora = _lora(recipe)
    if lora:        # PEFT keeps the adapters in fp32 whatever the base's dtype: 16 bytes a parameter with AdamW
        policy.update(lora)
        if recipe.get("torch_dtype", recipe.get("dtype")) not in (None, "float32"):
            notes.append("the LoRA adapters are trained in fp32 (PEFT's autocast_adapter_dtype), the base frozen "
                         f"as {lora['lora_base']}")
        elif lora["lora_base"] == "fp32" and not auto:     # auto's own note says what it loaded
            notes.append(FP32_BASE)
    else:
        policy.update(_dtype(recipe, notes))
    loaded = _loaded_16bit(recipe) if sixteen_bit is None else sixteen_bit
    preference, preference_notes = preference_fields(recipe, trainer, bool(lora), loaded)
    policy.update(preference)
    notes += preference_notes
    if "model_name_or_path" in recipe:
        notes.append(f"model_name_or_path {recipe['model_name_or_path']}: the model counted is the one of "
                     f"--preset/--hf-config")
    return values, policy, notes


def _older_flash(recipe: dict, attention):
    """``attn_implementation`` of the alignment handbook's ``use_flash_attention_2`` (its
    ``ModelArguments`` before ``attn_implementation``, 2023-24: true loads the model with
    ``attn_implementation="flash_attention_2"``, false leaves transformers' default)."""
    flag = recipe["use_flash_attention_2"]
    if not isinstance(flag, bool):
        raise InputError(f"use_flash_attention_2 must be true or false, got {flag!r}", "use_flash_attention_2")
    if flag and attention not in (None, "flash_attention_2"):
        raise InputError(f"use_flash_attention_2 true beside attn_implementation {attention!r}: one attention",
                         "use_flash_attention_2")
    return "flash_attention_2" if flag else attention


FP32_BASE = ("the model loaded in float32 (TRL's ModelConfig.dtype unless the recipe gives one): the frozen base "
             "kept in fp32, its products run in 16 bits under autocast")
"""The note of a LoRA base left in fp32 (``_lora``), which a DeepSpeed launch casts to 16 bits."""

AUTO_DTYPE = "torch_dtype auto loads the checkpoint's dtype"
"""The start of the note of ``torch_dtype: auto`` (``auto_dtype``)."""

CHECKPOINT_DTYPES = ("bfloat16", "float16", "float32")
AUTO_GUESS = "bfloat16"
"""The dtype ``torch_dtype: auto`` is counted in where the model given does not state its checkpoint's
(a preset, a ``config.json`` without ``torch_dtype``): noted."""


def checkpoint_dtype(config) -> str | None:
    """The dtype a model's ``config.json`` states for its checkpoint (``torch_dtype``; ``dtype``, its
    name since transformers v5), ``None`` where it states none or the model came without one.

    >>> checkpoint_dtype({"torch_dtype": "bfloat16"}), checkpoint_dtype({"dtype": "float32"}), checkpoint_dtype(None)
    ('bfloat16', 'float32', None)
    """
    if not isinstance(config, dict):
        return None
    value = config.get("dtype", config.get("torch_dtype"))
    return value if value in CHECKPOINT_DTYPES else None


def auto_dtype(checkpoint: str | None, notes: list, loaded: str = "the model") -> str:
    """The dtype ``from_pretrained(torch_dtype="auto")`` loads ``loaded`` in: the checkpoint's, as its
    ``config.json`` states it (transformers' ``_get_dtype``: the config's dtype; TRL's ``ModelConfig``
    documents auto as "derive the dtype from the model's weights"; LLaMA-Factory passes auto itself,
    ``model/loader.py``); ``AUTO_GUESS`` where the model given states none, noted."""
    if checkpoint in CHECKPOINT_DTYPES:
        notes.append(f"{AUTO_DTYPE}, {checkpoint} (the model's config.json): {loaded} loaded in {checkpoint}")
        return checkpoint
    notes.append(f"{AUTO_DTYPE}, which the model given does not state (a preset, or a config.json without "
                 f"torch_dtype): {loaded} counted in {AUTO_GUESS} (give the model's config.json, or torch_dtype)")
    return AUTO_GUESS

SIXTEEN_BIT = "the parameters are 16-bit, so AdamW keeps 16-bit moments and no fp32 master"
"""The note of a model loaded in 16 bits (``_dtype``), which a launcher keeping an fp32 copy drops
(``models.hf_trainer.FP32_COPY``)."""


def _dtype(recipe: dict, notes: list) -> dict:
    """``master_weights`` false for a model loaded in 16 bits (see the module docstring)."""
    dtype = recipe.get("torch_dtype", recipe.get("dtype"))
    if dtype in (None, "float32"):
        return {}
    if dtype not in ("bfloat16", "float16"):
        raise InputError(f"torch_dtype {dtype!r}: one of bfloat16, float16, float32, auto", "torch_dtype")
    notes.append(f"torch_dtype {dtype}: {SIXTEEN_BIT}")
    return {"master_weights": False, "precision": "bf16" if dtype == "bfloat16" else "fp16"}


def _lora(recipe: dict) -> dict:
    """LoRA's policy (``lora_rank``, ``lora_targets``, ``lora_base``, ``double_quant``) of
    ``use_peft``; the LoRA fields without it are refused (TRL ignores them: they would be)."""
    peft, four, eight, nested = (_switch(recipe, k) for k in
                                 ("use_peft", "load_in_4bit", "load_in_8bit", "use_bnb_nested_quant"))
    given = [k for k in ("lora_r", "lora_target_modules") if recipe.get(k)] + \
        [k for k, on in (("load_in_4bit", four), ("load_in_8bit", eight)) if on]
    if not peft:
        if given:
            raise InputError(f"{given[0]} without use_peft: TRL trains the whole model and ignores it", given[0])
        return {}
    rank = recipe.get("lora_r", 16)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise InputError(f"lora_r must be a positive integer, got {rank!r}", "lora_r")
    modules = recipe.get("lora_target_modules") or ["q_proj", "v_proj"]
    modules = [modules] if isinstance(modules, str) else modules
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise InputError(f"lora_target_modules must be a name or a list of names, got {modules!r}",
                         "lora_target_modules")
    if modules == ["all-linear"]:
        modules = list(ALL_LINEAR)
    unknown = [m for m in modules if m not in PEFT_NAMES]
    if unknown:
        raise InputError(f"lora_target_modules {unknown[0]!r}: one of {', '.join(PEFT_NAMES)} or all-linear",
                         "lora_target_modules")
    if four and eight:
        raise InputError("load_in_4bit and load_in_8bit together: at most one", "load_in_8bit")
    if four and recipe.get("bnb_4bit_quant_type", "nf4") != "nf4":
        raise InputError(f"bnb_4bit_quant_type {recipe['bnb_4bit_quant_type']!r}: NF4 only", "bnb_4bit_quant_type")
    loaded = "16-bit" if _loaded_16bit(recipe) else "fp32"
    base = "nf4" if four else "int8" if eight else loaded
    return {"lora_rank": rank, "lora_targets": ",".join(modules), "lora_base": base,      # models.lora maps them
            "double_quant": nested}


def _switch(recipe: dict, key: str) -> bool:
    """A switch of TRL's ``ModelConfig`` as its parser reads a recipe's YAML (``string_to_bool``):
    true or false, or their text (``"false"`` is off, not a non-empty string's truth); null is off."""
    value = recipe.get(key)
    return False if value is None else text_flag(value, key)


def _loaded_16bit(recipe: dict) -> bool:
    """Whether the recipe loads the model's weights in 16 bits (``torch_dtype``/``dtype``)."""
    return recipe.get("torch_dtype", recipe.get("dtype")) in ("bfloat16", "float16")
