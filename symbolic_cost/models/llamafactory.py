"""LLaMA-Factory's training YAML (``llamafactory-cli train config.yaml``, hiyouga/LLaMA-Factory at
ff6d4d1, 2026-08): ``TrainingArguments`` beside LLaMA-Factory's model, data and fine-tuning
arguments, read as the TRL recipe it amounts to (``models.trl_recipe``) and run by the trainer its
``stage`` names (``models.preference``).

======================================= ==============================================================
LLaMA-Factory field (default)           read as
======================================= ==============================================================
``stage`` (``sft``)                     ``pt``, ``sft``: a language-model loss; ``dpo``: DPO's pairs and
                                        reference (``pref_loss`` ``orpo``, ``simpo``: pairs without a
                                        reference, ``use_ref_model`` false); ``rm``, ``ppo``, ``kto``
                                        refused
``finetuning_type`` (``lora``)          ``lora``: TRL's ``use_peft``; ``full``; ``freeze``, ``oft``
                                        refused
``lora_rank`` (8), ``lora_target``      ``lora_r``, ``lora_target_modules`` (``all``: every linear
(``all``)                               layer but the head, PEFT's ``all-linear``)
``quantization_bit`` (none) with        4: ``load_in_4bit`` (``quantization_type`` nf4,
``quantization_method`` ``bnb``         ``double_quantization`` true: QLoRA's double quantisation);
                                        8: ``load_in_8bit``; other bits and methods refused
``cutoff_len`` (2048)                   ``max_length``: every sequence counted at it
``flash_attn`` (``auto``)               ``attn_implementation``: ``fa2`` flash_attention_2, ``fa3``
                                        flash_attention_3, ``sdpa``, ``disabled`` eager; ``auto``
                                        transformers' default
``disable_gradient_checkpointing``      gradient checkpointing on unless true (``prepare_model_for_
(false)                                 training``)
``pure_bf16`` (false)                   bf16 parameters without an fp32 copy
``pissa_init`` (false), ``pissa_iter``  LoRA's step (PiSSA changes the adapters' initialisation only:
(16), ``pissa_convert`` (false)         an SVD at load, a conversion when saving), noted; refused
                                        where LLaMA-Factory refuses it
======================================= ==============================================================

The weights load in the checkpoint's dtype (``model/loader.py`` passes ``torch_dtype="auto"``): the one
the model's ``config.json`` states, bfloat16 where the model given states none (noted,
``trl_recipe.auto_dtype``); the
trainable parameters are cast to fp32 unless ``pure_bf16`` (``adapter.init_adapter``: an fp32 master
for a full fine-tune, fp32 adapters under LoRA, as PEFT's); DPO's reference is loaded as the model
(``trainer_utils.create_ref_model``: a 16-bit copy for a full fine-tune, the base with the adapters
off under LoRA).  The data, the template, evaluation, logging and the loss's scalars change no count
(``NO_COST``); what changes a count and is not modelled is refused by name (``REFUSED``).
"""

from __future__ import annotations

import re

from symbolic_cost.checks import InputError, count, text_flag
from symbolic_cost.models.trl_recipe import auto_dtype

MARKS = ("stage", "finetuning_type", "template", "cutoff_len", "infer_backend", "export_dir", "model_class",
         "dist_config")
"""Fields only LLaMA-Factory's configurations hold: a YAML with one of them is LLaMA-Factory's."""

MEGATRON = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "expert_model_parallel_size",
            "context_parallel_size", "sequence_parallel")
"""Megatron-Core's layout fields: a configuration of LLaMA-Factory's Megatron backends
(``USE_MCA=1``: mcore_adapter; ``use_megatron_bridge``), refused."""

MULTIMODAL = ("image_max_pixels", "image_min_pixels", "video_max_pixels", "video_min_pixels", "video_fps",
              "video_maxlen", "freeze_vision_tower", "freeze_multi_modal_projector", "use_audio_in_video")
"""Fields of a model with vision or audio inputs, which the library does not model (refused)."""

NO_COST = {
    "ray_init_kwargs", "master_addr", "master_port",
    "model_name_or_path", "trust_remote_code", "do_train", "dataset", "eval_dataset", "dataset_dir", "media_dir",
    "template", "max_samples", "overwrite_cache", "preprocessing_num_workers", "preprocessing_batch_size",
    "tokenized_path", "val_size", "eval_num_beams", "ignore_pad_token_for_loss", "mix_strategy", "interleave_probs",
    "buffer_size", "streaming", "train_on_prompt", "mask_history", "tool_format", "default_system", "enable_thinking",
    "preserve_thinking", "eval_on_each_dataset", "data_shared_file_system", "packing", "neat_packing",
    "lora_alpha", "lora_dropout", "use_rslora", "loraplus_lr_ratio", "loraplus_lr_embedding", "adapter_name_or_path",
    "adapter_folder", "create_new_adapter", "pref_beta", "pref_ftx", "pref_loss", "dpo_label_smoothing",
    "simpo_gamma", "ld_alpha", "plot_loss", "compute_accuracy", "disable_shuffling", "early_stopping_steps",
    "include_effective_tokens_per_second", "do_train", "predict_with_generate", "generation_max_length",
    "generation_num_beams", "generation_config", "sortish_sampler", "model_revision", "cache_dir", "use_fast_tokenizer",
    "split_special_tokens", "hf_hub_token", "ms_hub_token", "om_hub_token", "print_param_status",
    "low_cpu_mem_usage", "infer_backend", "infer_dtype", "use_kv_cache", "moe_aux_loss_coef", "use_reentrant_gc",
    "upcast_layernorm", "rope_scaling", "train_from_scratch", "use_swanlab", "swanlab_project", "swanlab_workspace",
    "swanlab_run_name", "swanlab_mode", "swanlab_api_key", "swanlab_logdir", "finetuning_type", "stage",
    "lora_rank", "lora_target", "quantization_bit", "quantization_method", "quantization_type",
    "double_quantization", "cutoff_len", "flash_attn", "disable_gradient_checkpointing", "pure_bf16",
    "enable_liger_kernel", "pissa_init", "pissa_iter", "pissa_convert",
}
"""LLaMA-Factory fields that change no count, and those this module reads into the recipe's own
(all taken out before the ``TrainingArguments`` are read)."""

REFUSED = {
    "use_galore": "GaLore's projected optimizer state is not modelled",
    "use_apollo": "APOLLO's projected optimizer state is not modelled",
    "use_badam": "BAdam's block-wise updates are not modelled",
    "use_adam_mini": "Adam-mini's shared second moments are not modelled",
    "use_muon": "Muon's optimizer state is not modelled",
    "use_llama_pro": "LLaMA Pro's expanded blocks are not modelled",
    "use_dora": "DoRA's magnitude vectors and their products are not modelled",
    "use_unsloth": "Unsloth's kernels are not modelled",
    "use_unsloth_gc": "Unsloth's offloaded checkpoints are not modelled",
    "shift_attn": "LongLoRA's shifted sparse attention is not modelled",
    "mixture_of_depths": "a mixture of depths is not modelled",
    "additional_target": "modules trained whole beside the adapters are not modelled",
    "upcast_lmhead_output": "fp32 logits are not modelled",
    "resize_vocab": "a resized vocabulary is not the model's",
    "add_tokens": "added tokens change the vocabulary, which is the model's",
    "add_special_tokens": "added tokens change the vocabulary, which is the model's",
    "ref_model": "a reference model other than the trained one is not modelled",
    "use_asft_loss": "ASFT's reference model is not modelled",
    "use_eaft_loss": "EAFT's loss is not modelled (it copies the fp32 logits of every labelled token to weigh its "
                     "loss by their top-20 entropy)",
    "use_mca": "the Megatron-Core backend (mcore_adapter) is not read here: give its layout with --set",
    "use_megatron_bridge": "the Megatron-Bridge backend is not read here: give its recipe with "
                           "--megatron-bridge-recipe",
    "use_hyper_parallel": "hyper-parallel training is not modelled",
    "use_kt": "KTransformers' CPU experts are not modelled",
    "use_v1_kernels": "LLaMA-Factory's fused kernels are not modelled",
    "fp8": "LLaMA-Factory's FP8 through accelerate (which linear layers accelerate converts) is not modelled",
}
"""Fields that change the cost in ways not modelled, refused where set (true or non-empty)."""

STAGES = {"rm": "the reward model is TRL's AutoModelForCausalLMWithValueHead (model/loader.py): the whole LM head "
                "runs its forward (logits the pairwise loss does not use, so no backward) beside a value head of one "
                "output; an LM head without its backward is not modelled (TRL's RewardTrainer, --trl-trainer "
                "reward, replaces the head instead)",
          "ppo": "PPO's generation, reward and value models are not modelled",
          "kto": "KTO's unpaired examples and their KL batch are not modelled"}
"""Stages refused, and why."""

PREQUANTIZED = ("awq", "gptq", "aqlm", "exl2", "hqq", "eetq", "quanto")
"""Quantisation methods a checkpoint's name carries (``...-AWQ``): LLaMA-Factory trains LoRA over
such a base as stored, in its own format (refused)."""

PREFERENCE_LOSSES = ("sigmoid", "hinge", "ipo", "kto_pair", "orpo", "simpo")
"""``pref_loss``'s values (``FinetuningArguments``); ``orpo`` and ``simpo`` need no reference."""

ATTENTION = {"auto": None, "disabled": "eager", "sdpa": "sdpa", "fa2": "flash_attention_2", "fa3": "flash_attention_3"}
"""``flash_attn`` as transformers' ``attn_implementation`` (``None``: transformers' default)."""


def _dft(stage: str, out: dict) -> str:
    """The note on ``use_dft_loss``: Dynamic Fine-Tuning weighs each labelled token's loss by its own
    probability, taken without gradient (LLaMA-Factory's ``dft_loss_func``: the fp32 logits and the
    token-wise cross-entropy of transformers' own loss, then a product a token), so it is counted as
    that loss.  Only the SFT trainer runs it; beside Liger's kernels (whose fused loss it turns off:
    the model is called without labels) it is refused."""
    if stage != "sft":
        return f"use_dft_loss: only stage sft's trainer runs it; stage {stage} ignores it"
    if out.get("enable_liger_kernel"):
        raise InputError("use_dft_loss with enable_liger_kernel: the trainer then calls the model without labels, "
                         "so Liger's fused linear cross-entropy does not run and the logits are formed beside Liger's "
                         "other kernels; that pairing is not modelled", "use_dft_loss")
    return ("use_dft_loss: each token's loss weighed by its probability (LLaMA-Factory's dft_loss_func): the same "
            "fp32 logits and cross-entropy as transformers' loss, counted as it")


def is_llamafactory(args: dict) -> bool:
    """Whether a ``TrainingArguments`` file is LLaMA-Factory's (``MARKS``)."""
    return bool(set(MARKS) & set(args))


V1 = ("model_class", "dist_config", "kernel_config", "train_dataset", "peft_config", "quant_config")
"""Sections of LLaMA-Factory's second configuration format (``examples/v1``, ``llamafactory.v1``):
``model``, ``micro_batch_size`` and nested ``peft_config``/``dist_config`` in place of the
``TrainingArguments`` fields (refused, as a whole)."""


def check_training(args: dict) -> None:
    """Refuse a LLaMA-Factory YAML that is not a training run of a text model this module reads:
    its v1 format, inference, export and evaluation configurations, its Megatron backends,
    multimodal models."""
    if "model" in args and set(V1) & set(args):
        raise InputError(f"LLaMA-Factory's v1 configuration ({', '.join(k for k in V1 if k in args)}: "
                         f"llamafactory.v1) is not read; its first format (examples/train_*) is", "model")
    if not _flag(args, "do_train", False):     # LLaMA-Factory's workflows train only with it (TrainingArguments: false)
        raise InputError("a LLaMA-Factory configuration without do_train: true (inference, export, merge, "
                         "prediction or evaluation) is not a training run", "do_train")
    for key in MEGATRON:
        if key in args:
            raise InputError(f"{key}: a configuration of LLaMA-Factory's Megatron backends (mcore_adapter, "
                             f"Megatron-Bridge) is not read; give its layout with --set", key)
    for key in MULTIMODAL:
        if key in args:
            raise InputError(f"{key}: a model's vision or audio inputs are not modelled", key)
    name = str(args.get("model_name_or_path", ""))
    marks = [m for m in re.split(r"[-_./]", name.lower()) if m in PREQUANTIZED]
    if marks:
        raise InputError(f"model_name_or_path {name}: a checkpoint quantized with {marks[0].upper()}, whose stored "
                         f"weights the library does not count (its config.json's quantization_config)",
                         "model_name_or_path")


def recipe(args: dict, trainer: str | None, checkpoint: str | None = None,
           world: int | None = None) -> tuple[dict, str, bool | None, list]:
    """``(recipe, trainer, sixteen_bit, notes)``: ``args`` (a LLaMA-Factory YAML as read; its own fields
    taken out in place) as the TRL recipe fields it amounts to, the trainer its stage runs, whether
    a reference's copy loads in 16 bits (the checkpoint's dtype: ``checkpoint``, the one the model's
    ``config.json`` states, ``trl_recipe.auto_dtype``; ``None`` where the recipe's ``torch_dtype``
    says it), and the notes.  ``trainer``: the ``--trl-trainer`` given, refused (the stage decides it);
    ``world``: the devices given (``--devices``), which a Ray launch's ``ray_num_workers`` needs (``_ray``).

    >>> args = {"stage": "sft", "do_train": True, "finetuning_type": "lora", "output_dir": "x", "bf16": True}
    >>> recipe(args, None)[:3], args
    (({'max_length': 2048, 'gradient_checkpointing': True, 'use_peft': True, 'lora_r': 8, 'lora_target_modules': ['all-linear'], 'torch_dtype': 'auto'}, 'sft', None), {'output_dir': 'x', 'bf16': True})
    """
    if trainer is not None:
        raise InputError(f"--trl-trainer {trainer}: a LLaMA-Factory configuration's stage decides the trainer",
                         "--trl-trainer")
    check_training(args)
    own = {key: args.pop(key) for key in list(args)
           if key in NO_COST or key in REFUSED or key in ("use_dft_loss", "ray_num_workers")}
    for key, why in REFUSED.items():
        if own.get(key) not in (None, False, "", [], {}):
            raise InputError(f"{key}: {why}", key)
    stage = _word(own, "stage", "sft")
    if stage in STAGES:
        raise InputError(f"stage {stage}: {STAGES[stage]}", "stage")
    if stage not in ("pt", "sft", "dpo"):
        raise InputError(f"stage {stage!r}: one of pt, sft, dpo (rm, ppo, kto refused)", "stage")
    out = {"max_length": _count(own, "cutoff_len", 2048),
           "gradient_checkpointing": not _flag(own, "disable_gradient_checkpointing", False)}
    attention = _word(own, "flash_attn", "auto")
    if attention not in ATTENTION:
        raise InputError(f"flash_attn {attention!r}: one of {', '.join(ATTENTION)}", "flash_attn")
    if ATTENTION[attention] is not None:
        out["attn_implementation"] = ATTENTION[attention]
    out.update(_tuning(own, args))
    if _flag(own, "enable_liger_kernel", False):     # models.liger, with LLaMA-Factory's own list of models
        out["enable_liger_kernel"] = True
        if stage not in ("pt", "sft"):              # its trainer needs the logits: Liger's cross-entropy instead
            out["liger_kernel_config"] = {"fused_linear_cross_entropy": False, "cross_entropy": True}
    notes = [f"LLaMA-Factory's stage {stage}, {own.get('finetuning_type', 'lora')} fine-tuning"] + _ray(own, world)
    if _flag(own, "use_dft_loss", False):
        notes.append(_dft(stage, out))
    loss = _word(own, "pref_loss", "sigmoid")
    if loss not in PREFERENCE_LOSSES:
        raise InputError(f"pref_loss {loss!r}: one of {', '.join(PREFERENCE_LOSSES)}", "pref_loss")
    pairs = stage == "dpo"
    reference_free = pairs and loss in ("orpo", "simpo")
    if reference_free:
        notes.append(f"pref_loss {loss}: no reference model (use_ref_model false)")
    notes += _pissa(own, out, pairs and not reference_free)
    sixteen_bit = None if out.get("use_peft") else True
    if out.get("load_in_4bit") or out.get("load_in_8bit"):
        notes.append(_quantised_note(out))
    elif pairs and not reference_free and not out.get("use_peft"):     # the reference, loaded with auto
        sixteen_bit = auto_dtype(checkpoint, notes, "the reference") in ("bfloat16", "float16")
    return out, "orpo" if reference_free else "dpo" if pairs else "sft", sixteen_bit, notes


def _ray(own: dict, world: int | None) -> list:
    """``ray_num_workers`` (``RayArguments``, 1): under ``USE_RAY=1`` LLaMA-Factory starts that many
    workers, one a device (``train/tuner.py``: ``_ray_training_function``); without it the launcher's
    processes train and the field does nothing.  The file does not say which launch runs it, so above 1
    it needs ``--devices`` (refused without), and is noted beside it."""
    workers = own.get("ray_num_workers", 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"ray_num_workers must be a count of at least 1, got {workers!r}", "ray_num_workers")
    if workers == 1:
        return []
    if world is None:
        raise InputError(f"ray_num_workers {workers}: LLaMA-Factory starts {workers} workers, one a device, under Ray "
                         f"(USE_RAY=1), and the launcher's processes without it; the file does not say which launch "
                         f"runs it: give --devices ({workers} under Ray)", "ray_num_workers")
    return [f"ray_num_workers {workers}: the workers of a Ray launch (USE_RAY=1), one a device; counted on --devices "
            f"{world}" + ("" if world == workers else f" (the launch without Ray: not the {workers} of Ray's)")]


def _tuning(own: dict, args: dict) -> dict:
    """The recipe fields of ``finetuning_type``, LoRA's and quantisation's, and the load dtype."""
    kind = _word(own, "finetuning_type", "lora")
    if kind in ("freeze", "oft"):
        raise InputError(f"finetuning_type {kind}: "
                         f"{'training some layers whole' if kind == 'freeze' else 'OFT adapters'} is not modelled",
                         "finetuning_type")
    if kind not in ("lora", "full"):
        raise InputError(f"finetuning_type {kind!r}: one of lora, full (freeze, oft refused)", "finetuning_type")
    bits = own.get("quantization_bit")
    if bits is not None and kind != "lora":
        raise InputError(f"quantization_bit {bits} with finetuning_type {kind}: LLaMA-Factory quantizes for LoRA only",
                         "quantization_bit")
    pure = _flag(own, "pure_bf16", False)
    if kind == "full":
        if pure:                    # bf16 parameters kept so: no fp32 copy
            return {"torch_dtype": "bfloat16"}
        return {}                   # trainable parameters cast to fp32 (adapter.init_adapter)
    if pure:
        raise InputError("pure_bf16 with LoRA: bf16 adapters without an fp32 copy are not modelled", "pure_bf16")
    target = _word(own, "lora_target", "all")
    modules = ["all-linear"] if target == "all" else [m.strip() for m in target.split(",") if m.strip()]
    out = {"use_peft": True, "lora_r": _count(own, "lora_rank", 8), "lora_target_modules": modules}
    out.update(_quantised(own, bits))
    if not out.get("load_in_4bit") and not out.get("load_in_8bit"):
        out["torch_dtype"] = "auto"     # the frozen base in the checkpoint's dtype (models.trl_recipe.auto_dtype)
    return out


def _pissa(own: dict, out: dict, reference: bool) -> list:
    """The note of ``pissa_init`` (PiSSA: the adapters start from the base's principal singular
    vectors, the base keeping the residual; ``model/adapter.py``: PEFT's ``init_lora_weights``
    ``pissa_niter_<pissa_iter>``, or ``pissa`` at ``pissa_iter`` -1): an SVD once at load and, with
    ``pissa_convert``, a conversion of the adapter when saving (``train/callbacks.py``'s
    ``PissaConvertCallback``); each step is LoRA's, the same shapes.  Refused where LLaMA-Factory
    refuses it: without LoRA, on a quantised base (``hparams/parser.py``), with a reference model
    (``FinetuningArguments``: "Cannot use PiSSA for current training stage"); under DeepSpeed ZeRO-3
    too (``models.hf_trainer``)."""
    if not _flag(own, "pissa_init", False):
        given = [k for k in ("pissa_iter", "pissa_convert") if k in own]
        return [f"{', '.join(given)} without pissa_init: LLaMA-Factory uses them only with PiSSA (no count "
                f"changes)"] if given else []
    if not out.get("use_peft"):
        raise InputError("pissa_init without finetuning_type lora: LLaMA-Factory refuses it (\"`pissa_init` is only "
                         "valid for LoRA training\")", "pissa_init")
    if out.get("load_in_4bit") or out.get("load_in_8bit"):
        raise InputError("pissa_init with quantization_bit: LLaMA-Factory refuses it (\"Please use "
                         "scripts/pissa_init.py to initialize PiSSA for a quantized model\")", "pissa_init")
    if reference:
        raise InputError("pissa_init with a reference model (stage dpo): LLaMA-Factory refuses it (\"Cannot use "
                         "PiSSA for current training stage\")", "pissa_init")
    steps = own.get("pissa_iter", 16)
    how = "a full SVD" if steps == -1 else f"{count(steps, 'pissa_iter')} fast-SVD iterations (pissa_iter)"
    convert = "; pissa_convert: the adapter converted to plain LoRA when saved" if _flag(own, "pissa_convert", False) \
        else ""
    return [f"pissa_init: PiSSA initialises the adapters from the base's principal singular vectors by {how}, once "
            f"at load{convert}: not counted; each step is LoRA's (the same adapters and base)"]


def _quantised_note(out: dict) -> str:
    """The note of the base bitsandbytes quantises on load (``quantization_bit``, ``_quantised``)."""
    if out.get("load_in_8bit"):
        return ("quantization_bit 8 (bitsandbytes' LLM.int8): the frozen base's linear layers counted in int8 with "
                "an fp32 scale per output row; the word table, norms and head 16-bit")
    scales = ("double quantisation: an 8-bit absmax per 64 weights and an fp32 scale per 256 blocks"
              if out["use_bnb_nested_quant"] else "an fp32 absmax per 64 weights (double_quantization false)")
    return (f"quantization_bit 4 (bitsandbytes, {out['bnb_4bit_quant_type']}): the frozen base's linear layers "
            f"counted in 4 bits with {scales}; the word table, norms and head 16-bit")


def _quantised(own: dict, bits) -> dict:
    """bitsandbytes' on-the-fly quantisation of the base (``quantization_bit``)."""
    if bits is None:
        return {}
    method = _word(own, "quantization_method", "bnb")
    if method not in ("bnb", "bitsandbytes"):
        raise InputError(f"quantization_method {method!r}: only bitsandbytes (bnb) is modelled", "quantization_method")
    if bits == 8:
        return {"load_in_8bit": True}
    if bits != 4:
        raise InputError(f"quantization_bit {bits!r}: bitsandbytes quantizes to 4 or 8 bits", "quantization_bit")
    return {"load_in_4bit": True, "bnb_4bit_quant_type": _word(own, "quantization_type", "nf4"),
            "use_bnb_nested_quant": _flag(own, "double_quantization", True)}


def _flag(fields: dict, key: str, default: bool) -> bool:
    """A boolean field (``true``/``false`` also as text, as a command line gives them)."""
    return text_flag(fields.get(key, default), key)


def _word(fields: dict, key: str, default: str) -> str:
    value = fields.get(key, default)
    if not isinstance(value, str):
        raise InputError(f"{key} must be a name, got {value!r}", key)
    return value


def _count(fields: dict, key: str, default: int) -> int:
    return count(fields.get(key, default), key)
