"""Hugging Face ``TrainingArguments`` as a JSON (``TrainingArguments.to_json_string()``, or the same
field names typed as a dictionary) as the training of a model given apart.

``trainer_setup`` reads the fields with ``transformers``' own defaults (``training_args.py``, 5.x:
``DEFAULTS``, checked against ``dataclasses.fields(TrainingArguments)`` by the tests); the model
comes from ``--hf-config``/``--preset``, the world size from ``--devices`` (1 without it: the JSON
does not hold the launcher's), the sequence length from ``--set l=``:

=============================================== ===================================================
field (default)                                 library field
=============================================== ===================================================
``per_device_train_batch_size`` (8)             ``b``
``gradient_accumulation_steps`` (1)             ``n_micro`` (micro-batches a step)
``bf16``, ``fp16`` (false)                      ``precision`` bf16, fp16 (fp32 without either;
                                                both refused, as transformers refuses them)
``activation_checkpointing`` (its deprecated    ``recompute`` full (every transformer layer);
alias ``gradient_checkpointing``),              the ``_kwargs`` only ``use_reentrant``
``fsdp_config.activation_checkpointing``
``optim`` (adamw_torch_fused)                   ``adamw_torch``, ``adamw_torch_fused``,
                                                ``adamw_hf``: ``optimizer`` adamw; ``adafactor``
                                                (transformers' Adafactor, no first moment):
                                                adafactor; bitsandbytes' (``OPTIMIZERS``);
                                                any other refused by name
``fsdp`` (none) with ``fsdp_config.version``    FSDP2 (the default): ``reshard_after_forward``
(2), ``reshard_after_forward`` (true;           true (``full_shard``): ``zero`` 3; false
FSDP1: ``full_shard``)                          (``shard_grad_op``): ``zero`` 3 keeping the
                                                gathered weights until backward. FSDP1 also
                                                ``no_shard``: ``zero`` 0, ``hybrid_shard``:
                                                ``zero`` 3 sharded over ``--shard N`` (the
                                                devices of a machine). As ``models.accelerate``
``fsdp`` ``offload``, ``fsdp_config.cpu_offload``  ``offload`` parameters (and the optimizer step)
``deepspeed`` (none)                            the DeepSpeed JSON given with ``--deepspeed``
                                                beside (``models.trainer_deepspeed``); refused
                                                without it
=============================================== ===================================================

A TRL recipe's own fields are ``models.trl_recipe``'s (run by the trainer ``--trl-trainer``
names: ``models.preference``), a LLaMA-Factory YAML's ``models.llamafactory``'s; an axolotl
configuration is refused saying whose it is.

The data-parallel gradient all-reduce (DDP) and FSDP's gathers and reduce-scatters run behind
compute (``overlap``), as in ``models.accelerate``; the 16-bit mixed precision of autocast (or of
FSDP) keeps fp32 parameters: counted as the 16-bit recipe with an fp32 master copy, the same 16
bytes per parameter with Adam (noted).  Fields that change no count (``NO_COST``: schedules,
logging, saving, evaluation, the hub, data loading) are accepted, with three fields of older
``transformers`` (``RETIRED``); the fields of ``MUST_BE`` act only away from their default and are
refused there, and any other key is refused by name.
"""

from __future__ import annotations

import json
from fractions import Fraction

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, count, file_text, given_counts, text_flag
from symbolic_cost.models.config import read_json
from symbolic_cost.models.megatron_bridge import load_yaml
from symbolic_cost.models.trl_recipe import (AUTO_DTYPE, FLASH, FP32_BASE, KERNEL, SIXTEEN_BIT, recipe_fields,
                                            trl_defaults)
from symbolic_cost.models.preference import COPY_NOTE, reward_model
from symbolic_cost.models.llamafactory import is_llamafactory, recipe as llamafactory_recipe
from symbolic_cost.models.accelerate import FP32_MASTER, fsdp_policy
from symbolic_cost.models.liger import FACTORY_PATCHED, liger_policy
from symbolic_cost.models.megatron_args import Setup, model_for
from symbolic_cost.models.training import Overlap

DEFAULTS = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "bf16": False, "fp16": False,
            "activation_checkpointing": None, "gradient_checkpointing": None, "activation_checkpointing_kwargs": None,
            "gradient_checkpointing_kwargs": None, "optim": "adamw_torch_fused", "fsdp": None, "fsdp_config": None,
            "deepspeed": None, "tf32": None, "use_liger_kernel": False, "liger_kernel_config": None}
"""The fields read, at ``TrainingArguments``' defaults."""

MUST_BE = {"use_cpu": False, "parallelism_config": None, "auto_find_batch_size": False, "optim_args": None,
           "optim_target_modules": None}
"""Fields that change the cost away from their default (training on the host, tensor or context
parallelism, a batch found at run time, optimizer arguments): refused there."""

NO_COST = {
    "output_dir", "num_train_epochs", "max_steps", "learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs",
    "warmup_steps", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "average_tokens_across_devices",
    "max_grad_norm", "label_smoothing_factor", "bf16_full_eval", "fp16_full_eval", "torch_compile",
    "torch_compile_backend", "torch_compile_mode", "use_cache", "neftune_noise_alpha", "torch_empty_cache_steps",
    "logging_strategy", "logging_steps", "logging_first_step", "log_on_each_node", "logging_nan_inf_filter",
    "include_num_input_tokens_seen", "log_level", "log_level_replica", "disable_tqdm", "report_to", "run_name",
    "project", "trackio_space_id", "trackio_bucket_id", "trackio_static_space_id", "eval_strategy", "eval_steps",
    "eval_delay", "per_device_eval_batch_size", "prediction_loss_only", "eval_on_start", "eval_do_concat_batches",
    "eval_use_gather_object", "eval_accumulation_steps", "include_for_metrics", "batch_eval_metrics",
    "save_only_model", "save_strategy", "save_steps", "save_on_each_node", "save_total_limit",
    "enable_jit_checkpoint", "push_to_hub", "hub_token", "hub_private_repo", "hub_model_id", "hub_strategy",
    "hub_always_push", "hub_revision", "load_best_model_at_end", "metric_for_best_model", "greater_is_better",
    "ignore_data_skip", "restore_callback_states_from_checkpoint", "full_determinism", "seed", "data_seed",
    "accelerator_config", "dataloader_drop_last", "dataloader_num_workers", "dataloader_pin_memory",
    "dataloader_persistent_workers", "dataloader_prefetch_factor", "dataloader_multiprocessing_context",
    "dataloader_in_order", "remove_unused_columns", "label_names", "train_sampling_strategy", "length_column_name",
    "ddp_find_unused_parameters", "ddp_bucket_cap_mb", "ddp_broadcast_buffers", "ddp_static_graph", "ddp_backend",
    "ddp_timeout", "debug", "skip_memory_metrics", "do_train", "do_eval", "do_predict", "resume_from_checkpoint",
    "local_rank"}
"""The step count, the schedule and the optimizer's scalars, logging, evaluation, saving, the hub,
data loading and DDP's buckets: no count changes (``accelerator_config.split_batches`` is refused)."""

RETIRED = {"evaluation_strategy", "warmup_ratio", "fsdp_transformer_layer_cls_to_wrap", "push_to_hub_model_id",
           "push_to_hub_organization", "push_to_hub_token"}
"""Fields of older ``transformers`` that change no count (``eval_strategy``, the warm-up as a
fraction, the wrapped layer's class name, the hub's names and token of 4.x)."""

FSDP_CONFIG = {"version", "reshard_after_forward", "cpu_offload", "activation_checkpointing", "auto_wrap_policy",
               "min_num_params", "transformer_layer_cls_to_wrap", "backward_prefetch", "forward_prefetch",
               "limit_all_gathers", "use_orig_params", "sync_module_states", "cpu_ram_efficient_loading",
               "state_dict_type", "xla", "xla_fsdp_v2", "xla_fsdp_grad_ckpt"}
"""``fsdp_config`` keys (a ``fsdp_`` prefix dropped, as transformers drops it)."""

OPTIMIZERS = {"adamw_torch": "adamw", "adamw_torch_fused": "adamw", "adamw_hf": "adamw", "adafactor": "adafactor",
              "adamw_bnb_8bit": "adam-8bit", "adamw_8bit": "adam-8bit", "paged_adamw_32bit": "adamw",
              "paged_adamw_8bit": "adam-8bit", "rmsprop": "rmsprop"}
"""transformers' ``optim`` names and the library's optimizers: bitsandbytes' 8-bit AdamW keeps its
moments block-wise in one byte (``adam-8bit``), its 32-bit one as torch's; ``rmsprop`` is
``torch.optim.RMSprop`` at its defaults (transformers passes only the learning rate); "paged" state is in
memory the device can page out to the host under pressure, counted on the device (``PAGED``)."""

PAGED = ("optim {}: bitsandbytes' paged optimizer state is paged to the host only when the device runs out of "
         "memory: counted on the device")


def read_arguments(text: str, name: str) -> tuple[dict, list]:
    """The fields of a TrainingArguments file, an object either way: JSON (``to_json_string()``),
    or YAML (a TRL or alignment-handbook recipe, which also holds ``trl_recipe``'s fields and takes
    TRL's defaults, ``trl_recipe.trl_defaults``); and the notes of the defaults filled in."""
    if file_text(text, "--hf-training-args", name).lstrip()[:1] in ("{", "["):          # JSON (a YAML recipe is a block mapping)
        return read_json(text, name, "--hf-training-args", "TrainingArguments"), []
    args = load_yaml(text, name, "--hf-training-args")
    if not isinstance(args, dict):
        raise InputError(f"--hf-training-args: {name}: TrainingArguments are a mapping of field names to values",
                         "--hf-training-args")
    return args, [] if is_llamafactory(args) else trl_defaults(args)       # LLaMA-Factory's defaults are its own


def count_field(args: dict, key: str) -> int:
    """The positive integer of field ``key`` (transformers' default where absent)."""
    return count(args.get(key, DEFAULTS[key]), key)


def _check_keys(args: dict) -> None:
    for key, value in args.items():
        if key in MUST_BE and value not in (MUST_BE[key], {}, []):
            raise InputError(f"{key} {json.dumps(value)}: it changes the cost and is not modelled; leave it at "
                             f"{json.dumps(MUST_BE[key])}", key)
        if key not in DEFAULTS and key not in MUST_BE and key not in NO_COST and key not in RETIRED:
            raise InputError(f"{key}: a TrainingArguments field this reader does not read (it may change the cost); "
                             f"remove it or give the training with the command line's options", key)
    for key in ("fsdp_config", "accelerator_config", "activation_checkpointing_kwargs",
                "gradient_checkpointing_kwargs"):
        if not isinstance(args.get(key) or {}, dict):       # transformers also takes a path to a JSON file
            raise InputError(f"{key}: give its contents as a JSON object, not {args[key]!r}", key)
    if (args.get("accelerator_config") or {}).get("split_batches"):
        raise InputError("accelerator_config.split_batches: the batch split over the processes is not modelled; "
                         "give per_device_train_batch_size", "accelerator_config.split_batches")


def _liger(args: dict, model_type: str | None, trainer: str, notes: list, factory: bool) -> dict:
    """Liger's kernels where ``use_liger_kernel`` turns them on (``models.liger``), or LLaMA-Factory's
    ``enable_liger_kernel`` (``factory``: its list of models, its stage's settings in
    ``liger_kernel_config``); the config alone is noted."""
    if factory:
        return liger_policy(model_type, args.get("liger_kernel_config"), "sft", notes, "enable_liger_kernel",
                            FACTORY_PATCHED)
    on = args.get("use_liger_kernel") or False        # null reads as off, as the Trainer's test of it does
    if not isinstance(on, bool):
        raise InputError(f"use_liger_kernel must be true or false, got {on!r}", "use_liger_kernel")
    if not on:
        if args.get("liger_kernel_config") is not None:
            notes.append("liger_kernel_config without use_liger_kernel: transformers applies no Liger kernel")
        return {}
    return liger_policy(model_type, args.get("liger_kernel_config"), trainer, notes, "use_liger_kernel")


def _checkpointing(args: dict) -> bool:
    """``activation_checkpointing``, else its deprecated alias (transformers' ``__post_init__``)."""
    for key in ("activation_checkpointing_kwargs", "gradient_checkpointing_kwargs"):
        extra = set(args.get(key) or {}) - {"use_reentrant"}
        if extra:
            raise InputError(f"{key}: {', '.join(sorted(extra))} not modelled (only use_reentrant)", key)
    value = args.get("activation_checkpointing")
    key = "activation_checkpointing" if value is not None else "gradient_checkpointing"
    value = args.get(key)
    return False if value is None else text_flag(value, key)


def precision(args: dict) -> str:
    """``bf16``/``fp16`` (fp32 without either).

    >>> precision({"bf16": True}), precision({})
    ('bf16', 'fp32')
    """
    bf16, fp16 = (text_flag(args.get(k, False), k) for k in ("bf16", "fp16"))
    if bf16 and fp16:
        raise InputError("bf16 and fp16 together (transformers refuses them: at most one)", "fp16")
    if args.get("tf32") and not (bf16 or fp16):
        raise InputError("tf32 with fp32 training: TF32 matrix products are not modelled", "tf32")
    return "bf16" if bf16 else "fp16" if fp16 else "fp32"


def fsdp_options(fsdp, config: dict) -> dict:
    """``fsdp`` (true, or FSDPOption words) and ``fsdp_config`` as an accelerate ``fsdp_config``
    (``models.accelerate.fsdp_policy`` maps it), by transformers' ``_process_fsdp_args``.

    >>> fsdp_options("full_shard auto_wrap", {})
    {'fsdp_version': 2, 'fsdp_reshard_after_forward': True, 'fsdp_offload_params': False}
    >>> fsdp_options("hybrid_shard offload", {"fsdp_version": 1})["fsdp_sharding_strategy"]
    'HYBRID_SHARD'
    """
    config = {k[5:] if k.startswith("fsdp_") else k: v for k, v in (config or {}).items()}
    for key in config:
        if key not in FSDP_CONFIG:
            raise InputError(f"fsdp_config.{key}: an FSDP key this reader does not read", f"fsdp_config.{key}")
    for key in ("xla", "xla_fsdp_v2"):
        if text_flag(config.get(key, False), f"fsdp_config.{key}"):
            raise InputError(f"fsdp_config.{key}: FSDP on XLA is not modelled", f"fsdp_config.{key}")
    version = config.get("version", 2)
    if version not in (1, 2):
        raise InputError(f"fsdp_config.version must be 1 or 2, got {version!r}", "fsdp_config.version")
    words = fsdp.split() if isinstance(fsdp, str) else list(fsdp) if isinstance(fsdp, list) else []
    for word in words:
        if word in ("full_shard", "shard_grad_op") and version == 2:
            config.setdefault("reshard_after_forward", word == "full_shard")
        elif word in ("full_shard", "shard_grad_op", "no_shard", "hybrid_shard", "hybrid_shard_zero2"):
            if version == 2:
                raise InputError(f"fsdp {word}: FSDP1 only (transformers refuses it without fsdp_config version 1)",
                                 "fsdp")
            config.setdefault("reshard_after_forward", word)
        elif word == "offload":
            config.setdefault("cpu_offload", True)
        elif word != "auto_wrap":
            raise InputError(f"fsdp: unknown option {word!r} (full_shard, shard_grad_op, no_shard, hybrid_shard, "
                             f"offload, auto_wrap)", "fsdp")
    options = {"fsdp_version": version}
    if version == 2:
        options["fsdp_reshard_after_forward"] = text_flag(config.get("reshard_after_forward", True),
                                                      "fsdp_config.reshard_after_forward")
    else:
        strategy = str(config.get("reshard_after_forward", "full_shard")).upper()
        if strategy not in ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"):
            raise InputError(f"fsdp {strategy.lower()}: full_shard, shard_grad_op, no_shard or hybrid_shard "
                             f"(hybrid_shard_zero2 is not modelled)", "fsdp")
        options["fsdp_sharding_strategy"] = strategy
    options["fsdp_offload_params"] = text_flag(config.get("cpu_offload", False), "fsdp_config.cpu_offload")
    if "activation_checkpointing" in config:
        options["fsdp_activation_checkpointing"] = text_flag(config["activation_checkpointing"],
                                                         "fsdp_config.activation_checkpointing")
    if config.get("auto_wrap_policy", "TRANSFORMER_BASED_WRAP") != "TRANSFORMER_BASED_WRAP":
        raise InputError(f"fsdp_config.auto_wrap_policy {config['auto_wrap_policy']!r}: the library gathers one "
                         f"transformer layer at a time (TRANSFORMER_BASED_WRAP)", "fsdp_config.auto_wrap_policy")
    return options


def trainer_setup(text: str, name: str, arch, world: int | None, per_node: int | None = None,
                  launch: Setup | None = None, trainer: str | None = None, deepspeed: str | None = None,
                  model_type: str | None = None, checkpoint: str | None = None) -> Setup:
    """The values and policy of a TrainingArguments JSON for ``arch`` on ``world`` devices
    (``--devices``; 1 without), ``per_node`` the devices of a machine (``--shard``, for
    ``hybrid_shard``); ``launch``: the ``Setup`` of the accelerate config the script is launched
    with (``launched``); ``trainer``: the TRL trainer that runs a recipe (``models.preference``:
    DPO and ORPO run two sequences an example; ``None``: ``sft``, or a LLaMA-Factory stage's); ``deepspeed``: the name of the DeepSpeed config that
    ``launch`` reads, which replaces the arguments' own ``deepspeed`` (``models.trainer_deepspeed``);
    ``model_type``: the model's ``config.json`` type, which decides what ``use_liger_kernel`` patches
    (``models.liger``); ``checkpoint``: the dtype that ``config.json`` states, which ``torch_dtype: auto``
    loads (``models.trl_recipe.auto_dtype``)."""
    world, per_node = given_counts(world=world, per_node=per_node)
    arch = model_for(arch)
    args, defaults = read_arguments(text, name)
    if {"base_model", "sequence_len"} & set(args) and not is_llamafactory(args):    # axolotl's own names
        raise InputError(f"{name}: an axolotl configuration (base_model, micro_batch_size, sequence_len, adapter) is "
                         f"not read; give its batch, length and LoRA with the command line's options (--set b= "
                         f"n_micro= l=, --lora-rank, --lora-base), its DeepSpeed file with --deepspeed",
                         "--hf-training-args")
    sixteen_bit = None
    pissa = is_llamafactory(args) and text_flag(args.get("pissa_init", False), "pissa_init")
    if is_llamafactory(args):           # its own fields as the TRL recipe they amount to (models.llamafactory)
        own, trainer, sixteen_bit, factory_notes = llamafactory_recipe(args, trainer, checkpoint, world)
        args.update(own)
        defaults = factory_notes
    trainer = trainer or "sft"
    recipe_values, recipe_policy, recipe_notes = recipe_fields(args, trainer, sixteen_bit, checkpoint)
    pairs = recipe_policy.pop("pairs", False)
    if recipe_policy.pop("reward_model", False) and arch is not None:
        arch = reward_model(arch)
    recipe_notes = defaults + recipe_notes
    factory = args.pop("enable_liger_kernel", False)       # LLaMA-Factory's switch (models.llamafactory)
    _check_keys(args)
    if args.get("deepspeed") and deepspeed is None:
        raise InputError(f"deepspeed {args['deepspeed']!r}: give that DeepSpeed config with --deepspeed beside "
                         f"--hf-training-args", "deepspeed")
    if deepspeed is not None:
        recipe_notes.append(f"deepspeed {args['deepspeed']}: the DeepSpeed config read is --deepspeed's {deepspeed}"
                            if args.get("deepspeed") else f"run with the DeepSpeed config {deepspeed}")
    notes = [] if world is not None else ["the world size is 1 (TrainingArguments do not hold it; give --devices)"]
    world = world or 1
    policy = dict(precision=precision(args), zero=0)
    optim = args.get("optim", DEFAULTS["optim"])
    if not isinstance(optim, str) or optim not in OPTIMIZERS:       # a list or an object is no optimizer's name
        raise InputError(f"optim {optim!r}: the reader reads {', '.join(OPTIMIZERS)}", "optim")
    policy["optimizer"] = OPTIMIZERS[optim]
    if optim.startswith("paged_"):
        notes.append(PAGED.format(optim))
    fsdp = args.get("fsdp")
    if fsdp not in (None, False, "", []):
        if fsdp is not True and not isinstance(fsdp, (str, list)):
            raise InputError(f"fsdp must be true or FSDP options, got {fsdp!r}", "fsdp")
        options = fsdp_options(fsdp, args.get("fsdp_config"))
        if options.get("fsdp_sharding_strategy") == "HYBRID_SHARD" and per_node is None:
            raise InputError("fsdp hybrid_shard shards within a machine: give its devices with --shard N",
                             "--shard")
        policy.update(fsdp_policy(options, per_node or world, world, notes))
    elif args.get("fsdp_config"):
        notes.append("fsdp_config without fsdp: transformers uses it only with FSDP")
    if _checkpointing(args):
        if policy["zero"] == 3 and policy.get("reshard_after_forward", True) and "recompute" not in policy:
            # transformers' own warning (its issue 30404): the checkpointed forward gathers again
            notes.append("activation_checkpointing under FSDP gathers the weights once more in backward "
                         "(fsdp_config.activation_checkpointing does not): counted with FSDP's gathers only")
        policy["recompute"] = "full"
    notes += recipe_notes
    if "precision" in recipe_policy:          # a model loaded in 16 bits: autocast's dtype where bf16/fp16 set it
        dtype = recipe_policy.pop("precision")
        policy["precision"] = dtype if policy["precision"] == "fp32" else policy["precision"]
    policy.update(recipe_policy)
    policy.update(_liger(args, model_type, trainer, notes, factory))
    notes = kept_in_fp32(policy, notes, "FSDP" if fsdp not in (None, False, "", []) else "")
    if policy["precision"] != "fp32" and policy.get("master_weights", True):
        notes.append("16-bit mixed precision keeps fp32 parameters: counted as the 16-bit recipe with an fp32 master "
                     "copy, the same 16 bytes per parameter with Adam")
    policy["overlap"] = Overlap(grad_reduce=world > 1, param_gather=policy["zero"] == 3 and world > 1)
    values = {S.b: count_field(args, "per_device_train_batch_size") * (2 if pairs else 1),
              S.n_micro: count_field(args, "gradient_accumulation_steps"),
              S.d: world, S.m1: 1, S.s1: 1, S.p: 1, **recipe_values}
    found = Setup(arch, values, policy, notes)
    if pissa and launch is not None and launch.launcher == "DEEPSPEED" and launch.policy.get("zero") == 3:
        raise InputError("pissa_init under DeepSpeed ZeRO-3: LLaMA-Factory refuses it (\"Please use "
                         "scripts/pissa_init.py to initialize PiSSA in DeepSpeed ZeRO-3\")", "pissa_init")
    return found if launch is None else launched(args, found, launch, name)


def default_attention(setup: Setup, eager: bool = False, library: str | None = None) -> Setup:
    """``setup`` (a Trainer's run) with the attention transformers picks when nothing names one (no
    recipe's ``attn_implementation``): ``sdpa``, PyTorch's fused kernel, which keeps no score matrix
    and tries FlashAttention-2 first (``trl_recipe.FLASH``, ``KERNEL``); noted.  ``eager`` (asked
    for apart) leaves flash off, and a ``library`` named apart takes sdpa's kernel's place."""
    if "flash" in setup.policy or eager:
        return setup
    setup.policy["flash"] = FLASH["sdpa"]
    if library is None:
        setup.policy["attention_kernel"] = KERNEL["sdpa"]
    setup.notes.append("attention as transformers runs it when attn_implementation is unset, sdpa: PyTorch's fused "
                       "kernel (no score matrix kept; FlashAttention-2 tried first); --no-flash counts eager")
    return setup


RECIPE_POLICY = ("flash", "attention_kernel", "master_weights", "lora_rank", "lora_targets", "lora_base", "double_quant",
                 "reference", "fused_loss")
"""The policy keys of a TRL recipe's own fields (``trl_recipe``) and of Liger's kernels (``models.liger``)."""

DISTRIBUTION = ("zero", "overlap", "offload", "shard", "reshard_after_forward")
"""The policy keys of how the data-parallel ranks share the model (FSDP or DDP)."""


FP32_COPY = {"DEEPSPEED": "DeepSpeed keeps fp32 partitions of the trainable parameters and its optimizer state on "
                          "them (ZeRO's _create_fp32_partitions; its bf16 and fp16 optimizers likewise)",
             "FSDP": "accelerate upcasts FSDP's trainable parameters to fp32 under mixed precision "
                     "(fsdp2_prepare_model; FSDP1's flat parameters in prepare_model)"}
"""The launchers that keep an fp32 copy of the trainable parameters whatever dtype the model loads
in, and where they do it (accelerate at 16cb6eb, DeepSpeed at edaa722)."""


def _fp32_copy(launcher: str) -> bool:
    """Whether the launch keeps an fp32 copy of the trainable parameters (``FP32_COPY``)."""
    return launcher in FP32_COPY


def kept_in_fp32(policy: dict, notes: list, launcher: str) -> list:
    """The notes, and ``policy`` with the fp32 master back, where a model loaded in 16 bits
    (``master_weights`` false) trains under ``launcher``'s fp32 copy in mixed precision."""
    if not (_fp32_copy(launcher) and policy.get("master_weights") is False and policy["precision"] != "fp32"):
        return notes
    del policy["master_weights"]
    said = launcher == "FSDP"       # FSDP's notes say it (the launch config's, or the Trainer's own)
    return [n for n in notes if SIXTEEN_BIT not in n] + ([] if said else [
        f"{launcher}: {FP32_COPY[launcher]}, whatever dtype the model loads in: an fp32 master"])


def plugin_mismatches(args: dict, plugin: dict, name: str) -> list:
    """The notes of a Trainer run under an accelerate launch whose DeepSpeed config the plugin builds
    (``plugin``: ``models.accelerate.plugin_config``), as transformers joins them
    (``integrations/deepspeed.py``: ``propagate_args_to_deepspeed``, ``trainer_config_process``'s
    ``fill_match``, 5.23): each value ``"auto"`` there takes the TrainingArguments' (``name``); a value
    set in both that differs is refused by ``trainer_config_finalize`` ("Please correct the following
    DeepSpeed config values that mismatch TrainingArguments values").  A mismatch that changes the
    cost (the accumulation, the micro-batch, the mixed precision: ``set_mixed_precision`` writes the
    launch's ``bf16`` or ``fp16`` section where the arguments set neither) is refused here, naming
    the key, both values and both files; ``gradient_clipping`` against ``max_grad_norm`` changes no
    count: noted."""
    where = f"the accelerate config {plugin['file']}'s deepspeed_config"
    for key, field in (("train_micro_batch_size_per_gpu", "per_device_train_batch_size"),
                       ("gradient_accumulation_steps", "gradient_accumulation_steps")):
        theirs, ours = plugin[key], count_field(args, field)
        if theirs != "auto" and theirs != ours:
            raise InputError(f"{key} {theirs} of {where} and {field} {ours} of the TrainingArguments {name} differ: "
                             f"transformers refuses the mismatch (\"Please correct the following DeepSpeed config "
                             f"values that mismatch TrainingArguments values\"); leave it out of the accelerate "
                             f"config (\"auto\": the TrainingArguments' value) or make the two equal", key)
    mixed = plugin["mixed_precision"]
    section = "fp16" if mixed == "fp16" else "bf16" if mixed in ("bf16", "fp8") else None
    given = [k for k in ("bf16", "fp16") if text_flag(args.get(k, False), k)]
    if section is not None and not given and not text_flag(args.get(f"{section}_full_eval", False),
                                                           f"{section}_full_eval"):
        raise InputError(f"{section}.enabled true of {where} (mixed_precision {mixed}: accelerate's "
                         f"set_mixed_precision writes it) and {section}|{section}_full_eval false of the "
                         f"TrainingArguments {name}: transformers refuses the mismatch; set {section}: true in "
                         f"the TrainingArguments", f"{section}.enabled")
    notes = []
    clipping, norm = plugin.get("gradient_clipping"), args.get("max_grad_norm", 1.0)
    if clipping is not None and _number(clipping) != _number(norm):
        notes.append(f"gradient_clipping {clipping} of {where} and max_grad_norm {norm} of the TrainingArguments "
                     f"{name} differ: transformers refuses the mismatch at start-up (no count changes; make them "
                     f"equal)")
    return notes


def _number(value):
    """A clipping norm as a number (a YAML may quote it); the text itself where it is none."""
    try:
        return Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        return value


def launched(args: dict, trainer: Setup, launch: Setup, name: str = "given") -> Setup:
    """TrainingArguments (``args``, read as ``trainer``) run under ``accelerate launch
    --config_file`` (``launch``, ``models.accelerate``), as TRL's and the alignment handbook's
    recipes are: ``TrainingArguments.__post_init__`` writes its own mixed precision (``bf16``,
    ``fp16``) and, with ``fsdp`` set, its FSDP plugin into the environment accelerate reads, so
    those fields, where set, replace the launch config's; the processes, FSDP or DDP and offload
    are otherwise the launch config's.  The batch, the accumulation and the optimizer are the
    TrainingArguments'; activation checkpointing is on when either file turns it on.  Under a
    DeepSpeed config accelerate's plugin builds, the values transformers compares must agree
    (``plugin_mismatches``)."""
    plugin = launch.plugin                              # models.accelerate.plugin_config
    plugin_notes = [] if plugin is None else plugin_mismatches(args, plugin, name)
    mixed = trainer.policy["precision"] if args.get("bf16") or args.get("fp16") else launch.policy["precision"]
    copied = _fp32_copy(launch.launcher) and mixed != "fp32"     # the launcher's fp32 copy, in mixed precision
    sixteen = trainer.policy.get("master_weights") is False and not copied
    kept = [note for note in launch.notes if not (sixteen and note == FP32_MASTER)]
    policy, notes = dict(launch.policy), list(dict.fromkeys(kept + trainer.notes))
    if args.get("bf16") or args.get("fp16"):
        if policy.get("fp8") is not None:          # the launch config's mixed_precision fp8, replaced
            for key in ("fp8", "fp8_amax_history", "fp8_gather"):
                policy.pop(key, None)
            notes = [n for n in notes if not n.startswith("fp8_config")]
            notes.append(f"the TrainingArguments' {trainer.policy['precision']} replaces the launch config's "
                         f"mixed_precision fp8 (TrainingArguments sets ACCELERATE_MIXED_PRECISION): no FP8 products")
        elif policy["precision"] != trainer.policy["precision"]:
            notes.append(f"the TrainingArguments' {trainer.policy['precision']} replaces the launch config's "
                         f"mixed_precision {policy['precision']} (TrainingArguments sets ACCELERATE_MIXED_PRECISION)")
        policy["precision"] = trainer.policy["precision"]
    if args.get("fsdp") not in (None, False, "", []):        # no_shard too: FSDP1 without sharding
        notes.append("the TrainingArguments' fsdp replaces the launch config's distributed setting")
        for key in DISTRIBUTION:
            policy.pop(key, None)
            if key in trainer.policy:
                policy[key] = trainer.policy[key]
    policy["optimizer"] = trainer.policy["optimizer"]
    if "recompute" in trainer.policy:
        policy["recompute"] = "full"
    for key in RECIPE_POLICY:                 # what a TRL recipe's model and LoRA fields set
        if key in trainer.policy:
            policy[key] = trainer.policy[key]
    if launch.policy.get("cp_variant") == "ulysses":     # ALST swaps in its own attention, around its core
        core = ("flash", "attention_kernel")
        if any(policy.get(key) != launch.policy[key] for key in core):
            notes.append("the recipe's attn_implementation gives way to the launch config's "
                         "sp_attn_implementation: DeepSpeed's UlyssesSPAttentionHF replaces the model's attention "
                         "and runs that core")
        policy.update({key: launch.policy[key] for key in core})
    if sixteen:
        policy["precision"] = trainer.policy["precision"]
    else:
        notes = kept_in_fp32(policy, notes, launch.launcher)
    if launch.launcher == "DEEPSPEED" and policy.get("lora_base") == "fp32" and policy["precision"] != "fp32":
        policy["lora_base"] = "16-bit"      # its engine casts every floating parameter to the 16-bit type
        notes = [n for n in notes if FP32_BASE not in n and AUTO_DTYPE not in n] + [
            "DeepSpeed casts the model's parameters to the 16-bit type (_cast_module_mixed_precision): the frozen "
            "LoRA base in 16 bits"]
    if launch.launcher == "DEEPSPEED" and policy.get("reference") == "fp32" and policy["precision"] != "fp32":
        policy["reference"] = "16-bit"      # TRL prepares the reference with the same engine (prepare_deepspeed)
        notes = [n for n in notes if not n.startswith(COPY_NOTE)] + [
            "DeepSpeed casts the reference model's parameters to the 16-bit type, as the trained model's"]
    values = {**launch.values, **{k: v for k, v in trainer.values.items() if k in (S.b, S.n_micro, S.l)}}
    return Setup(trainer.arch, values, policy, notes + plugin_notes)
