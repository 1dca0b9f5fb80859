"""A DeepSpeed configuration (``ds_config.json``) as the training of a model given apart.

``deepspeed_setup`` reads the JSON with DeepSpeed's own rules (``deepspeed/runtime/config.py``,
``zero/config.py``); the model comes from ``--hf-config``/``--preset`` (DeepSpeed's config does
not say it), and the sequence length from ``--set l=`` (the model's context otherwise):

============================================= ===================================================
DeepSpeed key (default)                       library field
============================================= ===================================================
``train_micro_batch_size_per_gpu``,           ``b``, ``micro_batches``, ``d`` (the data-parallel
``gradient_accumulation_steps``,              world); DeepSpeed's rule ``train = micro x accum x
``train_batch_size``                          world``, the missing one derived as DeepSpeed does
                                              (accumulation 1 when only one is given); the world
                                              from ``--devices`` unless all three are given
``zero_optimization.stage`` (0)               ``zero``
``zero_optimization.offload_optimizer.device``  ``offload``: optimizer (cpu; also the older
(none), ``cpu_offload`` (false)               ``cpu_offload: true``); nvme refused
``zero_optimization.offload_param.device``    with the optimizer's: ``offload`` parameters (cpu,
(none), ``cpu_offload_param(s)`` (false)      stage 3); alone or nvme refused; also the older
                                              ``cpu_offload_params: true`` (DeepSpeed 0.3's
                                              name) and ``cpu_offload_param: true`` (today's
                                              deprecated name)
``zero_optimization: true`` / ``false``       ZeRO-1 / none, as DeepSpeed's
                                              ``read_zero_config_deprecated`` reads the old
                                              boolean form (noted)
``zero_optimization.overlap_comm`` (true at   ``overlap``: gradient reduction (and, stage 3, the
stage 3, false otherwise)                     parameter gathers) behind compute
``fp16.enabled``, ``bf16.enabled`` (false)    ``precision`` fp16, bf16 (fp32 without either)
``bf16.bf16_master_weights_and_grads``,       ``optimizer``: ``adam-16bit-master-bf16-moments``
``bf16.bf16_optimizer_states`` (false)        (bf16 states), or ``adam-16bit-master`` (fp32 states,
                                              offloaded as DeepSpeed requires): ``bf16_masters``
``torch_autocast.enabled`` (false)            false accepted; true refused (not modelled)
``optimizer.type``                            ``optimizer``: Adam, AdamW, any case as DeepSpeed
                                              reads them (absent: the command line's, as the
                                              client's optimizer); Lamb as Adam's moments
                                              (noted); 1-bit Adam, 0/1 Adam, 1-bit LAMB refused
``activation_checkpointing``                  configures DeepSpeed's checkpointing, which the
                                              model's code turns on (``--recompute``);
                                              ``cpu_checkpointing`` refused
============================================= ===================================================

A value ``"auto"`` (filled in by the Hugging Face Trainer from its own arguments) is taken from
the command line: ``--set b=``, ``--set n_micro=``, ``--devices``, ``--precision``, ``--zero``;
refused by name when the command line does not give it.  Booleans are read as DeepSpeed's
pydantic config reads them (``"false"`` is false; ``_boolean``).  Keys that change no count are accepted
(``NO_COST``); a top-level key DeepSpeed itself does not read is ignored, as DeepSpeed ignores it,
and noted (``DEEPSPEED_KEYS``); any other key is refused, naming it.  At stage 3 DeepSpeed keeps parameters under
``stage3_param_persistence_threshold`` (100,000 elements unless the file sets it) whole on every rank;
the library shards them (noted with the file's value; at 0 none is kept whole).
"""

from __future__ import annotations

import json
from fractions import Fraction

from sympy import sympify

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, given_counts, instance, within_count
from symbolic_cost.models.config import DEEPSPEED_DUPLICATES, read_json
from symbolic_cost.models.megatron_args import Setup, model_for
from symbolic_cost.models.training import Overlap

NO_COST = {
    "": {"steps_per_print", "wall_clock_breakdown", "gradient_clipping", "scheduler", "zero_allow_untested_optimizer",
         "tensorboard", "wandb", "csv_monitor", "comet", "flops_profiler", "comms_logger", "memory_breakdown",
         "dump_state", "prescale_gradients", "gradient_predivide_factor", "sparse_gradients", "aio", "checkpoint",
         "zero_force_ds_cpu_optimizer", "activation_checkpointing", "fp16", "bf16", "zero_optimization", "optimizer",
         "torch_autocast", "tensor_parallel",
         "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "steps_per_print",
         "allgather_size"},
    "fp16": {"enabled", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
             "consecutive_hysteresis", "min_loss_scale", "auto_cast"},
    "bf16": {"enabled", "immediate_grad_update", "bf16_master_weights_and_grads", "bf16_optimizer_states"},
    "torch_autocast": {"enabled", "dtype", "lower_precision_safe_modules"},
    "optimizer": {"type", "params"},
    "activation_checkpointing": {"partition_activations", "cpu_checkpointing", "contiguous_memory_optimization",
                                 "number_checkpoints", "synchronize_checkpoint_boundary", "profile"},
    "zero_optimization": {
        "stage", "offload_optimizer", "offload_param", "cpu_offload", "overlap_comm", "contiguous_gradients",
        "reduce_bucket_size", "allgather_bucket_size", "reduce_scatter", "allgather_partitions", "sub_group_size",
        "round_robin_gradients", "stage3_max_live_parameters", "stage3_max_reuse_distance",
        "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
        "stage3_gather_16bit_weights_on_model_save",
        "stage3_gather_fp16_weights_on_model_save", "elastic_checkpoint", "ignore_unused_parameters",
        "load_from_fp32_weights", "memory_efficient_linear", "cpu_offload_params", "cpu_offload_param",
        "cpu_offload_use_pin_memory",
        "stage3_model_persistence_threshold", "stage3_param_persitence_threshold",
        "stage3_param_persitance_threshold",
        # the same fields by their own names, which DeepSpeed's pydantic model also reads (populate_by_name)
        "max_live_parameters", "max_reuse_distance", "prefetch_bucket_size", "param_persistence_threshold",
        "model_persistence_threshold", "gather_16bit_weights_on_model_save"},
    "offload": {"device", "pin_memory", "buffer_count", "buffer_size", "fast_init", "nvme_path", "pipeline_read",
                "pipeline_write", "max_in_cpu", "pipeline"},
}
"""The keys read or accepted, by section (``""``: the top level; ``offload``: both offload sections).
The bucket sizes, loss scaling, logging and the scheduler change no count, nor does ``fp16.auto_cast``
(DeepSpeed's engine casts the floating-point inputs of the model's forward to fp16: a language model's
are token ids, which it leaves alone; ``_cast_inputs_half``); the misspelt
``stage3_param_persitence_threshold`` and ``..._persitance_...`` of DeepSpeedExamples' files are
accepted as DeepSpeed of their time accepted them."""

DEEPSPEED_KEYS = frozenset({
    "activation_checkpointing", "aio", "allgather_size", "amp", "autotuning", "bf16", "bfloat16", "checkpoint",
    "comet", "comms_logger", "communication_data_type", "compile", "compression_training", "csv_monitor",
    "curriculum_learning", "data_efficiency", "data_types", "dataloader_drop_last", "datastates_ckpt",
    "disable_allgather", "dump_state", "elasticity", "expert_parallel", "flops_profiler", "fp16",
    "gradient_accumulation_steps", "gradient_allreduce_op", "gradient_clipping", "gradient_predivide_factor",
    "graph_harvesting", "hybrid_engine", "log_level", "managed_gradient_accumulation", "memory_breakdown", "nebula",
    "optimizer", "pipeline", "prescale_gradients", "progressive_layer_drop", "quantize_training", "scheduler",
    "seq_parallel_communication_data_type", "sequence_parallel_size", "sparse_attention", "sparse_gradients",
    "steps_per_print", "tensor_parallel", "tensorboard", "timers", "torch_autocast", "train_batch_size",
    "train_micro_batch_size_per_gpu", "use_data_before_expert_parallelism", "wall_clock_breakdown", "wandb",
    "weight_quantization", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "zero_optimization"})
"""The top-level keys DeepSpeed's own config reads (deepspeedai/DeepSpeed at edaa722, 2026-08-22:
``DeepSpeedConfig.__init__`` and ``_initialize_params`` in ``deepspeed/runtime/config.py`` and the
getters and config classes they hand the dictionary to; ``monitor/config.py`` reads ``tensorboard``,
``wandb``, ``csv_monitor`` and ``comet``).  DeepSpeed checks no other top-level key: one it does not
read (``"cuda_visible_devices"`` in DeepSpeedExamples' ImageNet configs, or a misspelt section) is
ignored without a word.  The reader ignores it too, as DeepSpeed runs the file, and notes it; a key
DeepSpeed reads and the reader does not is refused."""

OPTIMIZERS = {"adam": "adam", "adamw": "adamw", "lamb": "adam"}
"""``optimizer.type`` as DeepSpeed reads it, case-insensitively (its ``DeepSpeedConfig`` lowercases
a name of its own optimizers: ``"Adam"`` and ``"adam"`` alike), to the library's optimizers.
DeepSpeed's LAMB (``FusedLamb``) keeps Adam's two moments; its per-tensor trust ratios, a few
norms a step, are not counted (noted)."""

COMPRESSED = {"onebitadam": "onebit-adam", "onebitlamb": "onebit-lamb"}
"""DeepSpeed's optimizers that compress the momentum exchange after their warm-up (1-bit Adam,
1-bit LAMB), to the library's (``models.optimizers``: the step after ``freeze_step``, a sign an
element, error-feedback buffers beside the moments).  DeepSpeed asserts they run without ZeRO."""

LOCAL_STEPS = "zerooneadam"
"""0/1 Adam (``ZeroOneAdam``): besides the compressed exchange it skips the exchange on "local
steps" at an interval that grows with the learning rate's schedule, so no one step is the step
of the run: refused, saying so."""

UNMODELLED = {
    "compression_training": "DeepSpeed Compression quantizes, prunes or removes layers while it trains, which "
                            "changes the model's work",
    "sparse_attention": "sparse attention's block layouts change the attention's work",
    "progressive_layer_drop": "layers skipped at random while it trains change each step's work",
    "autotuning": "the autotuner picks the micro-batch and the ZeRO stage itself; give the ones it picked "
                  "(--set b=, --zero) without the section",
    "curriculum_learning": "the sequence length grows while it trains; give the length of the step to cost "
                           "(--set l=) without the section",
    "data_efficiency": "data sampling and routing change the tokens of each step; give the step to cost without "
                       "the section",
    "amp": "NVIDIA Apex's automatic mixed precision is not modelled; give fp16 or bf16",
    "compile": "torch.compile (or DeepSpeed's deepcompile, which reschedules ZeRO's gathers and frees) fuses and "
               "moves kernels, which the time model does not price",
    "quantize_training": "quantisation-aware training (MoQ) changes the products' precision while it trains",
    "fp16.fp16_master_weights_and_grads": "fp16 master weights (with fp16 training, the optimizer on the host) "
                                          "are not modelled",
    "zero_optimization.zenflow": "ZenFlow's optimizer steps on the host, overlapped with the next steps, are not "
                                 "modelled",
}
"""Sections that change what a step costs in a way the library does not model, and why."""

TRUE, FALSE = {"true", "1", "yes", "y", "on", "t"}, {"false", "0", "no", "n", "off", "f"}
"""Strings DeepSpeed's pydantic config reads as booleans (pydantic's ``bool`` coercion, any case)."""


def _boolean(value, where: str) -> bool:
    """A boolean as DeepSpeed's pydantic config reads it: ``true``/``false``, 0 or 1, or a string
    of ``TRUE``/``FALSE`` (``"false"`` is false, not a non-empty string's truth)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in TRUE | FALSE:
        return value.lower() in TRUE
    raise InputError(f"{where} must be a boolean (true, false, 0, 1 or a string DeepSpeed reads as one), "
                     f"got {value!r}", where)


SWITCHED = ("progressive_layer_drop", "autotuning", "curriculum_learning", "data_efficiency", "amp",
            "quantize_training")
"""The ``UNMODELLED`` sections DeepSpeed runs only with their ``enabled`` true (false when absent);
``compression_training`` runs a technique only where its ``shared_parameters.enabled`` (or, for
``layer_reduction``, its ``enabled``) is true; ``compile`` is off where it says ``disable: true``
without ``deepcompile``.  ``sparse_attention`` runs wherever it is given."""


def _switched_off(where: str, section) -> bool:
    """Whether an ``UNMODELLED`` section is there with everything in it off (``SWITCHED``):
    DeepSpeedExamples' compression configs list every technique with ``enabled: false``."""
    def off(part) -> bool:
        if not isinstance(part, dict):
            return False
        shared = part.get("shared_parameters") or {}
        return isinstance(shared, dict) and not _boolean(shared.get("enabled", False), f"{where} enabled") \
            and not _boolean(part.get("enabled", False), f"{where} enabled")
    if where in SWITCHED:
        return off(section)
    if where == "compression_training":
        return isinstance(section, dict) and all(off(part) for part in section.values())
    if where == "compile":
        return isinstance(section, dict) and _boolean(section.get("disable", False), "compile.disable") \
            and not _boolean(section.get("deepcompile", False), "compile.deepcompile")
    return False


def _check_keys(config: dict, name: str, notes: list) -> None:
    """Refuse a key outside ``NO_COST`` (by its path) and a section that is not a dictionary; a
    top-level key DeepSpeed does not read (``DEEPSPEED_KEYS``) is ignored, as DeepSpeed ignores it,
    and noted."""
    for section, table in [("", config)] + [(k, v) for k, v in config.items() if k in NO_COST and k]:
        if not isinstance(table, dict):
            raise InputError(f"{name}: {section} must be an object, got {table!r}", section)
        for key in table:
            if key not in NO_COST[section]:
                where = f"{section}.{key}" if section else key
                if where == "seq_parallel_communication_data_type" and config.get("sequence_parallel_size", 1) == 1:
                    notes.append(f"{where}: the data type of sequence parallelism's exchanges, and the file runs "
                                 f"none (sequence_parallel_size 1); it changes nothing")
                    continue
                if where in UNMODELLED and _switched_off(where, table[key]):
                    notes.append(f"{where}: every part of it off, as DeepSpeed reads it (enabled false, or "
                                 f"compile's disable true); it changes nothing")
                    continue
                if where in UNMODELLED:
                    raise InputError(f"{where}: {UNMODELLED[where]}", where)
                if not section and key not in DEEPSPEED_KEYS:
                    notes.append(f"{key}: not a key DeepSpeed reads; DeepSpeed ignores it, and so does this reading")
                    continue
                raise InputError(f"{where}: a DeepSpeed key this reader does not read (it may change the cost); "
                                 f"remove it or give the training with the command line's options", where)
    for key in ("offload_optimizer", "offload_param"):
        section = config.get("zero_optimization", {}).get(key, None) or {}
        if not isinstance(section, dict):
            raise InputError(f"zero_optimization.{key} must be an object, got {section!r}", f"zero_optimization.{key}")
        for sub in section:
            if sub not in NO_COST["offload"]:
                raise InputError(f"zero_optimization.{key}.{sub}: a DeepSpeed key this reader does not read",
                                 f"zero_optimization.{key}.{sub}")


def _boolean_zero(config: dict, notes: list) -> dict:
    """``config`` with the old boolean ``zero_optimization`` (DeepSpeed before 0.3) as DeepSpeed
    still reads it (``read_zero_config_deprecated`` in ``zero/config.py``): ``true`` is stage 1,
    ``false`` stage 0; its bucket size, ``allgather_size``, changes no count."""
    flag = config.get("zero_optimization")
    if not isinstance(flag, bool):
        return config
    notes.append(f"zero_optimization: {str(flag).lower()}: DeepSpeed's deprecated boolean form, read as it reads "
                 f"it: stage {int(flag)}")
    return {**config, "zero_optimization": {"stage": int(flag)}}


def _integer(value, where: str):
    """A positive integer of at most 2**53 (``LARGEST_COUNT``, the library's bound on a size),
    ``None`` (absent) or ``"auto"``; a larger one is refused here, by the key's name, not later as
    the ``b`` or ``n_micro`` it becomes."""
    if value is None or value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{where} must be a positive integer or \"auto\", got {value!r}", where)
    return within_count(value, where)


def batch(config: dict, world: int | None, given: dict) -> tuple[int, int, int]:
    """``(micro, accumulation, world)`` by DeepSpeed's ``_set_batch_related_parameters``: ``train =
    micro x accum x world``; "auto" values from ``given`` (``b``, ``n_micro``)."""
    train, micro, accum = (_integer(config.get(k), k) for k in
                           ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"))
    for key, symbol, flag in (("train_micro_batch_size_per_gpu", S.b, "--set b="),
                              ("gradient_accumulation_steps", S.n_micro, "--set n_micro=")):
        if config.get(key) == "auto":
            if symbol not in given:
                raise InputError(f"{key} is \"auto\" (the Trainer fills it in); give it with {flag}", key)
            micro, accum = (given[symbol], accum) if symbol == S.b else (micro, given[symbol])
    train = None if train == "auto" else train
    if train is not None and micro is not None and accum is not None:
        if train % (micro * accum):
            raise InputError(f"train_batch_size {train} is not train_micro_batch_size_per_gpu x "
                             f"gradient_accumulation_steps x world size = {micro} x {accum} x world (DeepSpeed's "
                             f"rule)", "train_batch_size")
        derived = train // (micro * accum)
        if world is not None and world != derived:
            raise InputError(f"train_batch_size {train} != {micro} x {accum} x {world} devices (DeepSpeed's rule)",
                             "--devices")
        return micro, accum, derived
    if world is None:
        raise InputError("the DeepSpeed config does not fix the world size (train_batch_size with the micro-batch "
                         "and the accumulation steps); give --devices", "--devices")
    if train is None and micro is None:
        raise InputError("DeepSpeed needs train_batch_size or train_micro_batch_size_per_gpu (its own rule): add one "
                         "to the file (\"auto\", where the Trainer fills it, with --set b=)", "train_batch_size")
    if train is not None:
        accum = accum or (1 if micro is None else None)
        share = micro * world if micro is not None else accum * world
        if train % share:
            raise InputError(f"train_batch_size {train} is not a multiple of {share} (DeepSpeed's rule)",
                             "train_batch_size")
        micro, accum = (micro, train // share) if micro is not None else (train // share, accum)
    return micro, accum or 1, world


def persistence_note(zero: dict) -> str:
    """The ZeRO-3 note of ``zero_optimization.stage3_param_persistence_threshold`` (its alias
    ``param_persistence_threshold``; DeepSpeed's default 100,000 elements): the parameters under it
    stay whole on every rank, the library shards them; at 0 none stays whole.

    >>> "keeps no parameter whole" in persistence_note({"stage3_param_persistence_threshold": 0})
    True
    """
    value = zero.get("stage3_param_persistence_threshold", zero.get("param_persistence_threshold"))
    if value is None:
        said = "100,000 elements by default: norms, biases"
    elif value == "auto":
        said = "auto: transformers' Trainer fills 10 x the hidden size"
    else:
        try:
            number = Fraction(str(value))
        except (ValueError, ZeroDivisionError):
            raise InputError(f"zero_optimization.stage3_param_persistence_threshold must be a number or \"auto\", "
                             f"got {value!r}", "zero_optimization.stage3_param_persistence_threshold") from None
        if number == 0:
            return ("ZeRO-3: stage3_param_persistence_threshold 0: DeepSpeed keeps no parameter whole on every rank; "
                    "every parameter sharded, as counted")
        said = f"{int(number):,} elements, the file's" if number.denominator == 1 else f"{value}, the file's"
    return (f"ZeRO-3: DeepSpeed keeps parameters under stage3_param_persistence_threshold ({said}) whole on every "
            f"rank; counted sharded")


def smallest_matrix(arch) -> int | None:
    """The elements of ``arch``'s smallest weight matrix among the key/value projections (``e x kv_heads x
    head_dim``) and the MLP's (``e x f``), or ``None`` where they are not plain numbers (latent attention,
    experts, symbols): the tensors a ZeRO-3 persistence threshold at or above it keeps whole."""
    if getattr(arch.attention, "latent", None) is not None or arch.feedforward.moe is not None:
        return None
    sizes = [sympify(arch.e) * arch.kv * arch.head_size, sympify(arch.e) * sympify(arch.feedforward.f)]
    sizes = [size for size in sizes if size.is_Integer]
    return int(min(sizes)) if sizes else None


def check_persistence(zero: dict, arch) -> None:
    """Refuse a ZeRO-3 ``stage3_param_persistence_threshold`` (or its alias) at or above ``arch``'s smallest
    weight matrix (``smallest_matrix``): DeepSpeed then keeps weight matrices whole on every rank, which the
    library shards (``persistence_note`` notes the small tensors, norms and biases, it also shards)."""
    value = zero.get("stage3_param_persistence_threshold", zero.get("param_persistence_threshold"))
    if value is None or value == "auto" or arch is None:
        return
    smallest, number = smallest_matrix(arch), Fraction(str(value))
    if smallest is not None and number >= smallest:
        said = f"{int(number):,}" if number.denominator == 1 else str(value)
        raise InputError(f"zero_optimization.stage3_param_persistence_threshold {said}: DeepSpeed keeps every "
                         f"parameter of fewer elements whole on every rank (never partitioned), here weight matrices "
                         f"too (the model's smallest has {smallest:,}), which the library shards: not modelled",
                         "zero_optimization.stage3_param_persistence_threshold")


def _old_switch(zero: dict, key: str) -> bool:
    """One of ZeRO's deprecated offload switches (``Optional[bool]`` in DeepSpeed's config): absent
    or null is off, else a boolean as pydantic reads it (``"true"`` and 1 on, -1 refused)."""
    value = zero.get(key)
    return value is not None and _boolean(value, f"zero_optimization.{key}")


def zero_policy(zero: dict, stage: int, notes: list) -> dict:
    """Offload and overlap of ``zero_optimization``."""
    devices = {key: (zero.get(key) or {}).get("device", "none") for key in ("offload_optimizer", "offload_param")}
    if _old_switch(zero, "cpu_offload"):         # DeepSpeed's older name of the optimizer's CPU offload
        devices["offload_optimizer"] = "cpu"
    if _old_switch(zero, "cpu_offload_params") | _old_switch(zero, "cpu_offload_param"):    # and the parameters'
        devices["offload_param"] = "cpu"
    for key, device in devices.items():
        if device not in ("none", "cpu"):
            raise InputError(f"zero_optimization.{key}.device {device!r}: the library models the host (cpu), "
                             f"not {device}", f"zero_optimization.{key}.device")
    if devices["offload_param"] != "none" and stage != 3:
        # DeepSpeed's engine passes offload_param to the ZeRO-3 optimizer only (its docs: "available
        # only with ZeRO stage 3"); stages 0-2 keep every parameter on the device
        notes.append(f"zero_optimization.offload_param: DeepSpeed offloads parameters under ZeRO stage 3 only; "
                     f"at stage {stage} it keeps them on the device (no cost)")
        devices["offload_param"] = "none"
    offload = {("none", "none"): "none", ("cpu", "none"): "optimizer", ("cpu", "cpu"): "parameters",
               ("none", "cpu"): "weights"}[(devices["offload_optimizer"], devices["offload_param"])]
    overlap = _boolean(zero.get("overlap_comm", stage == 3), "zero_optimization.overlap_comm")
    if stage == 3:
        notes.append(persistence_note(zero))
    return dict(offload=offload, overlap=Overlap(grad_reduce=bool(overlap) and stage > 0,
                                                 param_gather=bool(overlap) and stage == 3))


def deepspeed_setup(text: str, name: str, arch, world: int | None, given: dict, command: dict) -> Setup:
    """The values and policy of a DeepSpeed config for ``arch``; ``given`` holds ``--set`` values
    and ``command`` the command line's ``precision`` and ``zero`` (for "auto")."""
    world, arch = given_counts(world=world)[0], model_for(arch)
    instance(given, dict, "given", " of --set values")
    instance(command, dict, "command", " of the command line's precision and zero")
    config = read_json(text, name, "--deepspeed", "a DeepSpeed config", unique=DEEPSPEED_DUPLICATES)
    notes = []
    config = _boolean_zero(config, notes)
    zero = config.get("zero_optimization", {})
    _check_keys(config, name, notes)
    stage = zero.get("stage", 0)
    if stage == "auto":        # the Hugging Face Trainer's placeholder: DeepSpeed itself refuses it
        if not command.get("zero_given"):
            raise InputError("zero_optimization.stage is \"auto\" (the Trainer fills it in); give --zero",
                             "--zero")
        stage = command["zero"]
    if stage not in (0, 1, 2, 3):
        raise InputError(f"zero_optimization.stage must be 0, 1, 2 or 3, got {stage!r}", "zero_optimization.stage")
    if _boolean(config.get("torch_autocast", {}).get("enabled", False), "torch_autocast.enabled"):
        beside = [kind for kind in ("bf16", "fp16") if config.get(kind, {}).get("enabled", False) not in
                  (False, 0, "false", "False", "FALSE")]
        raise InputError("torch_autocast.enabled: DeepSpeed's autocast of the forward (the ops autocast keeps in "
                         "fp32 beside the 16-bit products) is not modelled; "
                         + (f"the file sets {beside[0]}.enabled too, whose 16-bit training the library models: "
                            f"remove torch_autocast to count that" if beside else
                            "give the precision with bf16 or fp16"), "torch_autocast.enabled")
    if _boolean(config.get("activation_checkpointing", {}).get("cpu_checkpointing", False),
                "activation_checkpointing.cpu_checkpointing"):
        raise InputError("activation_checkpointing.cpu_checkpointing: checkpoints moved to the host are not modelled",
                         "activation_checkpointing.cpu_checkpointing")
    micro, accum, dp = batch(config, world, given)
    tp, ends = autotp(config.get("tensor_parallel"), arch, dp, notes)
    policy = dict(zero=stage, precision=precision(config, command), **zero_policy(zero, stage, notes))
    if stage == 3:
        check_persistence(zero, arch)
    kind = config.get("optimizer", {}).get("type")
    if kind is not None:
        policy["optimizer"] = _optimizer(kind, config["optimizer"].get("params", {}), stage, notes)
    sixteen = bf16_masters(config.get("bf16", {}), stage, policy, notes)
    if sixteen is not None:
        policy["optimizer"] = sixteen
    if tp > 1:
        policy["tp_ends"] = ends
    values = {S.b: micro, S.n_micro: accum, S.d: dp // tp, S.m1: tp, S.s1: 1, S.p: 1}
    return Setup(arch, values, policy, notes)


def tensor_divides(arch, size: int, key: str, uneven: str) -> None:
    """Refuse ``size`` tensor ranks that do not divide ``arch``'s attention heads, key/value heads
    or MLP width (each rank holds ``1/size`` of each in the library; ``uneven``: what the framework
    does instead, named in the refusal).  Nothing to check without a model."""
    if arch is None:
        return
    for what, count in (("attention heads", arch.h), ("key/value heads", arch.kv), ("MLP width", arch.f)):
        if sympify(count).is_number and sympify(count) % size:
            raise InputError(f"{key} {size} does not divide {arch.name}'s {count} {what}: {uneven} is not modelled",
                             key)


AUTOTP_KEYS = {"autotp_size", "tp", "tp_grain_size", "keep_module_on_host"}
"""The keys of ``tensor_parallel`` (DeepSpeed's ``TPTrainingConfig``,
``deepspeed/runtime/tensor_parallel/config.py`` at edaa722) the reader takes: the size; ``tp``'s
``tp_size``, which DeepSpeed requires to be 1 or the size (``_apply_autotp_partitioning``);
``tp_grain_size`` ("not activated in training yet", its docstring) and ``keep_module_on_host`` (where
a checkpoint is loaded) change no count.  ``partition_config`` and ``preset_model`` choose other
layers to split, ``tp_overlap_comm`` runs the allreduces behind the products, ``dtype`` converts the
model: each refused by name."""


def autotp(section, arch, world: int, notes: list) -> tuple[int, str]:
    """``(m1, tp_ends)`` of DeepSpeed's AutoTP training (``"tensor_parallel": {"autotp_size": N}``,
    DeepSpeed >= 0.16.4; ``(1, "vocab")`` without it, or at a size of 0 or 1, which DeepSpeed reads as
    off).  With a Hugging Face model whose config carries a ``tp_plan`` (Llama, Qwen: ``q/k/v``,
    ``gate``/``up`` split by columns, ``o``/``down`` by rows) DeepSpeed follows that plan
    (``DeepSpeedEngine._apply_autotp_partitioning``, ``deepspeed/runtime/engine.py`` at edaa722):
    ``LinearLayer`` splits a product's output over the ``m1`` ranks and allreduces its input's gradient
    in backward, ``LinearAllreduce`` allreduces the partial outputs in forward
    (``deepspeed/module_inject/layers.py``): Megatron-LM's tensor parallelism without its sequence
    parallelism (``s1 = 1``), each column-split module reducing its own input gradient
    (``blocks.wiring.Run.split_inputs``).  The word table stays whole on every rank (AutoTP leaves
    ``nn.Embedding`` alone), an untied ``lm_head`` is split with its logits all-gathered
    (``colwise_gather_output``, DeepSpeed 0.19.4 and later; ``tp_ends`` ``"whole-table"``), a tied one
    left whole with the table (``"whole"``).  The ranks are the ``world`` of the batch rule, which counts
    every rank (``deepspeed.initialize`` builds ``DeepSpeedConfig`` without an ``mpu``, so its
    ``world_size`` is ``dist.get_world_size()``), ``d = world / m1`` of them data-parallel
    (``groups._init_tp_mesh_device``), the tensor ranks sharing their sequences.  Refused: a size that
    does not divide the ranks, or the model's heads, key/value heads or MLP width (AutoTP's uneven split, ranks
    beyond the key/value heads idle, is not modelled), and the keys ``AUTOTP_KEYS`` does not hold."""
    if section is None:
        return 1, "vocab"
    if not isinstance(section, dict):
        raise InputError(f"tensor_parallel must be an object, got {section!r}", "tensor_parallel")
    for key in section:
        if key not in AUTOTP_KEYS:
            raise InputError(f"tensor_parallel.{key}: the reader reads AutoTP as DeepSpeed lays out a Hugging Face "
                             f"model's tp_plan (autotp_size); {key} changes that layout or its timing and is not "
                             f"modelled", f"tensor_parallel.{key}")
    size = section.get("autotp_size", 0)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise InputError(f"tensor_parallel.autotp_size must be a whole number (0: off), got {size!r}",
                         "tensor_parallel.autotp_size")
    inner = section.get("tp") or {}
    if not isinstance(inner, dict) or set(inner) - {"tp_size"}:
        raise InputError(f"tensor_parallel.tp: the reader reads its tp_size only, got {inner!r}", "tensor_parallel.tp")
    if inner.get("tp_size", 1) not in (1, size):
        raise InputError(f"tensor_parallel.tp.tp_size {inner['tp_size']} is not autotp_size {size} (DeepSpeed "
                         f"refuses it)", "tensor_parallel.tp.tp_size")
    if size <= 1:
        notes.append(f"tensor_parallel.autotp_size {size}: AutoTP off, as DeepSpeed reads it")
        return 1, "vocab"
    if world % size:
        raise InputError(f"tensor_parallel.autotp_size {size} does not divide the {world} ranks",
                         "tensor_parallel.autotp_size")
    tensor_divides(arch, size, "tensor_parallel.autotp_size", "AutoTP's uneven split")
    tied = arch is None or bool(arch.tied)
    notes.append(f"tensor_parallel.autotp_size {size}: AutoTP over {size} ranks as DeepSpeed 0.19.4 and later lay out "
                 f"a Hugging Face tp_plan: no sequence parallelism, the word table whole on every rank, the LM head "
                 + ("whole too (tied to the word table" + (", taken as tied: no model given)" if arch is None else ")")
                    if tied else "split with its logits all-gathered (tp_ends whole-table; before 0.19.4 DeepSpeed "
                    "left it whole and refused ZeRO-3 beside AutoTP)"))
    return size, "whole" if tied else "whole-table"


def bf16_masters(section: dict, stage: int, policy: dict, notes: list) -> str | None:
    """The optimizer of ``bf16.bf16_master_weights_and_grads`` (and ``bf16_optimizer_states``), as
    DeepSpeed's ZeRO optimizers keep it (``runtime/base_optimizer.py``,
    ``_configure_master_weights``, at edaa72212): the master weights, and the partitioned
    gradients the step reads, in bf16 (2 bytes, no fp32 copy); the Adam moments in bf16 too with
    ``bf16_optimizer_states`` (on the device), else fp32 in ``DeepSpeedCPUAdam`` on the host, which
    DeepSpeed then requires (ZeRO-Offload of the optimizer).  ``adam-16bit-master-bf16-moments``
    (2 + 2 + 2 bytes a parameter) or ``adam-16bit-master`` (2 + 4 + 4); ``None`` without the flag.
    Refused where DeepSpeed refuses: without ZeRO 1-3, bf16 states without bf16 masters, bf16
    masters with fp32 states on the device; and beside any optimizer but Adam."""
    masters = _boolean(section.get("bf16_master_weights_and_grads", False), "bf16.bf16_master_weights_and_grads")
    states = _boolean(section.get("bf16_optimizer_states", False), "bf16.bf16_optimizer_states")
    if states and not masters:
        raise InputError("bf16.bf16_optimizer_states without bf16_master_weights_and_grads: DeepSpeed asserts that "
                         "bf16 optimizer states require bf16 master weights and gradients", "bf16.bf16_optimizer_states")
    if not masters:
        return None
    where = "bf16.bf16_master_weights_and_grads"
    if policy["precision"] != "bf16":
        raise InputError(f"{where} with {policy['precision']} training: bf16 masters of weights that are not bf16 are "
                         f"not modelled", where)
    if stage == 0:
        raise InputError(f"{where}: DeepSpeed supports it with ZeRO stage 1, 2 or 3 only, got stage 0", where)
    if not states and policy["offload"] == "none":
        raise InputError(f"{where} without bf16_optimizer_states: DeepSpeed then keeps the fp32 Adam moments on the "
                         f"host and requires zero_optimization.offload_optimizer (device cpu, DeepSpeedCPUAdam)", where)
    if policy.get("optimizer", "adam") not in ("adam", "adamw"):
        raise InputError(f"{where} beside optimizer {policy['optimizer']!r}: DeepSpeed keeps 16-bit masters for Adam "
                         f"(DeepSpeedCPUAdam where offloaded); the reader reads it with Adam or AdamW", where)
    chosen = "adam-16bit-master-bf16-moments" if states else "adam-16bit-master"
    notes.append(f"{where}: bf16 master weights and gradients (2 bytes, no fp32 copy), the Adam moments in "
                 + ("bf16 (bf16_optimizer_states)" if states else "fp32 on the host (DeepSpeedCPUAdam)")
                 + f": optimizer {chosen}" + ("" if "optimizer" in policy else " (the client's optimizer taken as Adam)"))
    return chosen


def _optimizer(kind, params, stage: int, notes: list) -> str:
    """The library's optimizer for DeepSpeed's ``optimizer.type`` (``OPTIMIZERS``, ``COMPRESSED``)."""
    name, params = (kind.lower() if isinstance(kind, str) else None), (params if isinstance(params, dict) else {})
    if name == LOCAL_STEPS:
        raise InputError(f"optimizer.type {kind!r}: 0/1 Adam skips the momentum exchange on local steps at an "
                         "interval its learning-rate schedule sets, so no one step is the run's; give OneBitAdam "
                         "or Adam", "optimizer.type")
    if name in COMPRESSED:
        if stage != 0:
            raise InputError(f"optimizer.type {kind!r} with zero_optimization.stage {stage}: DeepSpeed asserts it is "
                             "not compatible with ZeRO", "optimizer.type")
        backend = params.get("comm_backend_name", "nccl")        # OnebitAdam.__init__'s defaults
        notes.append(f"optimizer.type {kind}: the step after its warm-up of freeze_step "
                     f"{params.get('freeze_step', 100000)} steps, which all-reduce the gradients as Adam does; then "
                     f"the momentum is exchanged in signs"
                     + ("" if backend == "nccl" else f", timed as NCCL's (comm_backend_name {backend!r})"))
        return COMPRESSED[name]
    if name not in OPTIMIZERS:
        known = ", ".join([*OPTIMIZERS, "OneBitAdam", "OneBitLamb"])
        raise InputError(f"optimizer.type {kind!r}: the reader reads {known} (any case)", "optimizer.type")
    if name == "lamb":
        notes.append("optimizer.type Lamb: Adam's two moments (its per-tensor trust ratios are not counted)")
    return OPTIMIZERS[name]


def command_line_fills(text: str) -> set:
    """The flags whose "auto" values the command line fills (``--precision``, ``--zero``), and
    ``--optimizer`` when the config names no optimizer (the client's)."""
    config = json.loads(text)
    flags = {"--optimizer"} if "type" not in (config.get("optimizer") or {}) else set()
    if "auto" in (config.get(kind, {}).get("enabled") for kind in ("fp16", "bf16")):
        flags.add("--precision")
    zero = config.get("zero_optimization")       # the old boolean form fixes the stage
    if isinstance(zero, dict) and zero.get("stage") == "auto":
        flags.add("--zero")
    return flags


def precision(config: dict, command: dict) -> str:
    """``fp16.enabled`` or ``bf16.enabled`` (``"auto"``: the command line's ``--precision``)."""
    flags = {kind: config.get(kind, {}).get("enabled", False) for kind in ("fp16", "bf16")}
    flags = {kind: on if on == "auto" else _boolean(on, f"{kind}.enabled") for kind, on in flags.items()}
    if "auto" in flags.values():
        if not command.get("precision_given"):
            raise InputError("fp16.enabled or bf16.enabled is \"auto\" (the Trainer fills it in); give --precision",
                             "--precision")
        return command["precision"]
    if all(flags.values()):
        raise InputError("fp16.enabled and bf16.enabled together (DeepSpeed refuses them)", "bf16.enabled")
    return "fp16" if flags["fp16"] else "bf16" if flags["bf16"] else "fp32"
