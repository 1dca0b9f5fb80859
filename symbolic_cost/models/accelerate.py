"""A Hugging Face accelerate configuration (``accelerate config``'s ``default_config.yaml``, the
file of ``accelerate launch --config_file``) as the training of a model given apart.

``accelerate_setup`` reads the YAML (PyYAML: the optional extra ``symbolic_cost[yaml]``) with
accelerate's own defaults (``accelerate/commands/config/config_args.py``, ``utils/dataclasses.py``
``FullyShardedDataParallelPlugin``); the model comes from ``--hf-config``/``--preset``, the batch
from ``--set b= n_micro=`` (the training script's arguments, not the launcher's):

=============================================== ===================================================
accelerate key (default)                        library field
=============================================== ===================================================
``distributed_type``                            NO (one process), MULTI_GPU (DDP: ``zero`` 0,
                                                gradient all-reduce behind backward), FSDP,
                                                DEEPSPEED (``deepspeed_config`` below)
``num_processes`` (-1), ``num_machines`` (1)    ``d`` = ``num_processes`` (every machine's);
                                                devices per node ``num_processes / num_machines``;
                                                absent: ``--devices`` (``accelerate launch``
                                                asks for ``--num_processes``), one process for
                                                distributed_type NO
``mixed_precision`` (no)                        ``precision``: fp32, fp16, bf16; fp8 with
                                                ``fp8_config`` (``fp8_policy``): bf16 with FP8
                                                products
``fsdp_config.fsdp_sharding_strategy``          FULL_SHARD (1): ``zero`` 3; SHARD_GRAD_OP (2):
(FULL_SHARD)                                    ``zero`` 3 keeping the gathered weights until
                                                backward (``reshard_after_forward`` off, FSDP's
                                                ZeRO-2-like strategy); NO_SHARD (3): ``zero`` 0;
                                                HYBRID_SHARD (4): ``zero`` 3 sharded within a
                                                machine (``shard`` = devices per node)
``fsdp_config.fsdp_version`` (1),               FSDP2: ``fsdp_reshard_after_forward`` true is
``fsdp_reshard_after_forward`` (true)           FULL_SHARD, false SHARD_GRAD_OP
``fsdp_config.fsdp_offload_params`` (false)     ``offload`` parameters (and the optimizer step)
``fsdp_config.fsdp_activation_checkpointing``   ``recompute`` full (every transformer layer)
(false)
``parallelism_config`` (FSDP2)                  ``parallelism``: ``d`` = replicate x shard, ``cp``
                                                (PyTorch's context parallelism), HSDP's ``shard``
``parallelism_config_sp_size`` (DEEPSPEED)      ``sequence_parallel``: ``cp`` = sp, Ulysses (ALST),
                                                ``d`` = processes / sp
``deepspeed_config`` (under DEEPSPEED)          ``deepspeed_plugin``: ``zero`` and ``offload`` of
                                                ``zero_stage`` (2) and the offload devices,
                                                accumulation steps as ``n_micro`` (the values a
                                                Trainer checks: ``plugin_config``)
=============================================== ===================================================

FSDP prefetches its gathers and reduce-scatters behind compute (``overlap`` grad, param).  FSDP's
mixed precision keeps fp32 sharded parameters: counted as the 16-bit recipe with an fp32 master
copy, the same 16 bytes per parameter (noted).  Keys that change no count are accepted
(``NO_COST``); any other key, or a wrap policy other than ``TRANSFORMER_BASED_WRAP``, is refused,
naming it.
"""

from __future__ import annotations

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, count, given_counts
from symbolic_cost.models.megatron_args import Setup, model_for
from symbolic_cost.models.deepspeed import tensor_divides, zero_policy
from symbolic_cost.models.megatron_bridge import load_yaml
from symbolic_cost.models.torchtitan import CP_ROTATIONS
from symbolic_cost.models.trl_recipe import KERNEL
from symbolic_cost.models.training import Overlap

FP32_MASTER = ("FSDP's mixed precision keeps fp32 sharded parameters: counted as the 16-bit recipe with an "
               "fp32 master copy, the same 16 bytes per parameter")
"""The note of FSDP's mixed precision over fp32 parameters (``models.hf_trainer.launched`` drops it
for a model a recipe loads in 16 bits)."""

NO_COST = {
    "": {"compute_environment", "debug", "downcast_bf16", "enable_cpu_affinity", "machine_rank", "main_process_ip",
         "main_process_port", "main_training_function", "rdzv_backend", "same_network", "tpu_env", "tpu_use_cluster",
         "tpu_use_sudo", "tpu_name", "tpu_zone", "commands", "command_file", "gpu_ids", "dynamo_config",
         "distributed_type", "num_processes", "num_machines", "mixed_precision", "fsdp_config", "deepspeed_config",
         "use_cpu", "parallelism_config", "fp8_config"},
    "parallelism_config": {"parallelism_config_dp_replicate_size", "parallelism_config_dp_shard_size",
                           "parallelism_config_tp_size", "parallelism_config_cp_size", "parallelism_config_cp_backend",
                           "parallelism_config_cp_comm_strategy", "parallelism_config_sp_size",
                           "parallelism_config_sp_backend", "parallelism_config_sp_seq_length",
                           "parallelism_config_sp_seq_length_is_variable", "parallelism_config_sp_attn_implementation"},
    "fsdp_config": {"fsdp_auto_wrap_policy", "fsdp_backward_prefetch", "fsdp_backward_prefetch_policy",
                    "fsdp_forward_prefetch", "fsdp_cpu_ram_efficient_loading", "fsdp_state_dict_type",
                    "fsdp_sync_module_states", "fsdp_use_orig_params", "fsdp_transformer_layer_cls_to_wrap",
                    "fsdp_sharding_strategy", "fsdp_version", "fsdp_reshard_after_forward", "fsdp_offload_params",
                    "fsdp_activation_checkpointing"},
}
"""The keys read or accepted: launcher settings (addresses, ranks, TPU names and pod commands,
compilation) change no count; ``deepspeed_config`` is read under DEEPSPEED (``deepspeed_plugin``)
and noted elsewhere; the ``fsdp_config`` keys other than sharding, offload and checkpointing only
choose loading, saving and prefetching."""

STRATEGIES = {"FULL_SHARD": "FULL_SHARD", 1: "FULL_SHARD", "SHARD_GRAD_OP": "SHARD_GRAD_OP", 2: "SHARD_GRAD_OP",
              "NO_SHARD": "NO_SHARD", 3: "NO_SHARD", "HYBRID_SHARD": "HYBRID_SHARD", 4: "HYBRID_SHARD"}
"""``fsdp_sharding_strategy`` by name or by PyTorch's ``ShardingStrategy`` number."""

PRECISIONS = {"no": "fp32", "fp16": "fp16", "bf16": "bf16"}

UNSET_ONLY = {"fsdp_ignored_modules": "modules FSDP leaves unsharded, whole on every device, are not modelled"}
"""``fsdp_config`` keys accepted only unset (``null``, as accelerate's own ``latest_fsdp.yaml`` test
fixture writes them: the plugin acts only on a value that is not ``None``), refused with the reason
when they hold one."""


MEGATRON_PLUGIN = ("accelerate's Megatron-LM plugin is not read: give its layout with "
                   "the command line's options (--set m1=TP p=PP n_micro=N, --recompute, --distributed-optimizer) "
                   "beside the model, or a Megatron-LM launch with --megatron-args")
"""What to do with a configuration of accelerate's ``MegatronLMPlugin``, whose defaults the reader
does not follow (its environment variables, as ``accelerate launch`` sets them)."""

EMPTY_SECTIONS = {"megatron_lm_config": MEGATRON_PLUGIN,
                  "ipex_config": "CPU training is not modelled", "mpirun_config": "an MPI launch is not modelled"}
"""Sections ``accelerate config`` writes for other backends: accepted empty (``{}``, as its own
documented output has them), refused with what to do when they hold settings."""


SECTION_OF = {"deepspeed_config": "DEEPSPEED", "fsdp_config": "FSDP"}
"""The sections a ``distributed_type`` reads (``accelerate launch`` acts on ``deepspeed_config`` and
``fsdp_config`` only under their own type, and ignores them otherwise)."""


def _check_keys(config: dict, name: str, notes: list) -> None:
    for key, instead in EMPTY_SECTIONS.items():
        if config.get(key):
            raise InputError(f"{key}: the reader does not read settings inline here; {instead}", key)
    for key, kind in SECTION_OF.items():         # under its own type, deepspeed_plugin's or fsdp_policy's
        if config.get(key) and config.get("distributed_type", "NO") != kind:
            notes.append(f"{key}: accelerate reads it under distributed_type {kind} only, not "
                         f"{config.get('distributed_type', 'NO')}; ignored, as accelerate ignores it")
    for key in config:
        if key not in NO_COST[""] and key not in EMPTY_SECTIONS:
            raise InputError(f"{key}: an accelerate key this reader does not read (it may change the cost); remove "
                             f"it or give the training with the command line's options", key)
    fsdp = config.get("fsdp_config") or {}
    if not isinstance(fsdp, dict):
        raise InputError(f"{name}: fsdp_config must be a mapping", "fsdp_config")
    for key in fsdp:
        if key in UNSET_ONLY and fsdp[key] is None:       # as accelerate's own files write it: nothing set
            continue
        if key in UNSET_ONLY:
            raise InputError(f"fsdp_config.{key} {fsdp[key]!r}: {UNSET_ONLY[key]}", f"fsdp_config.{key}")
        if key not in NO_COST["fsdp_config"]:
            raise InputError(f"fsdp_config.{key}: an accelerate key this reader does not read", f"fsdp_config.{key}")


def _count(config: dict, key: str) -> int:
    value = config.get(key, 1)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**53:
        raise InputError(f"{key} must be an integer from 1 to 2**53, as --devices, got {value!r}", key)
    return value


def _scalar(value):
    """``value`` where YAML gave one value, else a key no table holds (a list or a mapping where
    accelerate takes a name is refused as a name it does not know, not looked up)."""
    return value if isinstance(value, (str, int, float, bool, type(None))) else ()


def fsdp_version(fsdp: dict) -> int:
    """``fsdp_config.fsdp_version`` (1 unless given) as accelerate reads it: ``accelerate launch``
    exports ``str(value)`` as ``FSDP_VERSION`` and the plugin takes ``int()`` of it, so ``"2"`` is
    FSDP2, and ``true`` (``"True"``), ``2.0`` and ``null`` are refused, naming the key.

    >>> fsdp_version({"fsdp_version": "2"}), fsdp_version({})
    (2, 1)
    """
    value = fsdp.get("fsdp_version", 1)
    try:
        version = int(str(value))
    except ValueError:
        version = None
    if version not in (1, 2):
        raise InputError(f"fsdp_config.fsdp_version must be 1 or 2, got {value!r} (accelerate reads int() of its "
                         f"text)", "fsdp_config.fsdp_version")
    return version


def fsdp_policy(fsdp: dict, per_node: int, world: int, notes: list) -> dict:
    """``zero``, ``shard``, ``reshard_after_forward``, offload and recomputation of ``fsdp_config``
    (``per_node`` devices a machine of ``world``).

    >>> fsdp_policy({"fsdp_sharding_strategy": "SHARD_GRAD_OP"}, 8, 16, [])
    {'zero': 3, 'reshard_after_forward': False}
    >>> fsdp_policy({"fsdp_version": 2, "fsdp_offload_params": True}, 8, 16, [])
    {'zero': 3, 'offload': 'parameters'}
    """
    wrap = fsdp.get("fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP")
    if wrap != "TRANSFORMER_BASED_WRAP":
        raise InputError(f"fsdp_config.fsdp_auto_wrap_policy {wrap!r}: the library gathers one transformer layer at "
                         f"a time (TRANSFORMER_BASED_WRAP)", "fsdp_config.fsdp_auto_wrap_policy")
    version = fsdp_version(fsdp)
    if version == 2:
        if "fsdp_sharding_strategy" in fsdp:
            raise InputError("fsdp_config.fsdp_sharding_strategy is FSDP1's; FSDP2 takes fsdp_reshard_after_forward "
                             "(accelerate refuses both)", "fsdp_config.fsdp_sharding_strategy")
        reshard = switch(fsdp.get("fsdp_reshard_after_forward", True), "fsdp_config.fsdp_reshard_after_forward")
        strategy = "FULL_SHARD" if reshard else "SHARD_GRAD_OP"
    else:
        if "fsdp_reshard_after_forward" in fsdp:      # FSDP1 defaults its sharding_strategy, which wins over it
            notes.append("fsdp_config.fsdp_reshard_after_forward: FSDP1 (fsdp_version 1) takes its strategy from "
                         "fsdp_sharding_strategy (FULL_SHARD unless given), as accelerate's plugin does")
        strategy = STRATEGIES.get(_scalar(fsdp.get("fsdp_sharding_strategy", "FULL_SHARD")))
    if strategy is None:
        raise InputError("fsdp_config.fsdp_sharding_strategy: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD "
                         "(HYBRID_SHARD_ZERO2 is not modelled)", "fsdp_config.fsdp_sharding_strategy")
    policy = dict(zero=0 if strategy == "NO_SHARD" else 3)
    if strategy == "SHARD_GRAD_OP":
        policy["reshard_after_forward"] = False
    if strategy == "HYBRID_SHARD" and per_node < world:
        policy["shard"] = per_node
    flags = {key: switch(fsdp.get(key, False), f"fsdp_config.{key}")
             for key in ("fsdp_offload_params", "fsdp_activation_checkpointing")}
    if flags["fsdp_offload_params"]:
        policy["offload"] = "parameters"
    if flags["fsdp_activation_checkpointing"]:
        policy["recompute"] = "full"
    return policy


def accelerate_setup(text: str, name: str, arch, world: int | None, notes: list | None = None,
                     deepspeed=None) -> Setup:
    """The values and policy of an accelerate config for ``arch``; ``world`` (``--devices``)
    replaces ``num_processes``.  ``deepspeed``: the reader of the DeepSpeed JSON a
    ``deepspeed_config.deepspeed_config_file`` names (``--deepspeed`` beside ``--accelerate``), called
    with the processes and the precision accelerate launches (``config_file_launch``)."""
    world, arch = given_counts(world=world)[0], model_for(arch)
    config, notes = load_yaml(text, name, "--accelerate"), list(notes or [])
    if not isinstance(config, dict):
        raise InputError(f"{name}: an accelerate config is a YAML mapping", "--accelerate")
    if config.get("use_cpu", False) is not False:   # before the sections a CPU launch writes (mpirun_config)
        raise InputError("use_cpu: training on the host is not modelled", "use_cpu")
    if config.get("distributed_type") == "MULTI_CPU":
        raise InputError("distributed_type MULTI_CPU: training on the host is not modelled", "distributed_type")
    _check_keys(config, name, notes)
    kind = config.get("distributed_type", "NO")
    for key in ("distributed_type", "mixed_precision"):
        if isinstance(config.get(key), bool):       # accelerate refuses it too (DistributedType(False))
            raise InputError(f"{key} {config[key]}: YAML reads an unquoted NO or no as false; quote it ('NO', as "
                             f"accelerate config writes it)", key)
    if kind == "MEGATRON_LM":
        raise InputError(f"distributed_type MEGATRON_LM: {MEGATRON_PLUGIN}", "distributed_type")
    if kind not in ("NO", "MULTI_GPU", "FSDP", "DEEPSPEED"):
        raise InputError(f"distributed_type {kind!r}: the reader reads NO, MULTI_GPU, FSDP and DEEPSPEED",
                         "distributed_type")
    if "num_processes" not in config and world is None and kind != "NO":
        raise InputError("num_processes is not in the file (accelerate's default -1: `accelerate launch` asks for "
                         "--num_processes, as SLURM templates leave it to the job); give --devices", "--devices")
    stated, machines = config.get("num_processes", world or 1), _count(config, "num_machines")
    stated = _count({"num_processes": stated}, "num_processes")
    if stated % machines:
        raise InputError(f"num_processes {stated} is not a multiple of num_machines {machines}", "num_processes")
    if kind == "NO" and world is None and stated != 1:      # accelerate launch's simple launcher: one process
        notes.append(f"num_processes {stated}: distributed_type NO runs one process (accelerate launch's simple "
                     f"launcher), whatever the count")
        stated = 1
    if world is not None and world != stated:
        notes.append(f"--devices {world} replaces the {stated} processes of num_processes")
    world = world or stated
    if kind == "NO" and world != 1:
        raise InputError(f"distributed_type NO runs one process, not {world}", "--devices")
    if deepspeed is not None or (config.get("deepspeed_config") or {}).get("deepspeed_config_file") is not None \
            and kind == "DEEPSPEED":
        return config_file_launch(config, world, notes, deepspeed)
    precision = config.get("mixed_precision", "no")
    fsdp = fsdp_policy(config.get("fsdp_config") or {}, stated // machines, world, notes) if kind == "FSDP" else {}
    if _scalar(precision) == "fp8":
        policy = dict(fp8_policy(config.get("fp8_config"), notes, fsdp.get("zero") == 3), zero=0)
    elif _scalar(precision) not in PRECISIONS:
        raise InputError(f"mixed_precision {precision!r}: the reader reads no, fp16, bf16 and fp8",
                         "mixed_precision")
    else:
        policy = dict(precision=PRECISIONS[precision], zero=0)
        if config.get("fp8_config"):
            notes.append("fp8_config: accelerate reads it with mixed_precision fp8 only; it changes nothing here")
    if kind == "FSDP":
        policy.update(fsdp)
        if policy["precision"] != "fp32":
            notes.append(FP32_MASTER)
    values = {S.d: world, S.m1: 1, S.s1: 1, S.p: 1}
    mesh = parallelism(config, kind, world, notes, arch)
    if mesh:
        values.update(mesh.pop("values"))
        policy.update(mesh)
    if kind == "DEEPSPEED":
        plugin, steps = deepspeed_plugin(config.get("deepspeed_config") or {}, notes)
        policy.update(plugin)
        values.update({} if steps is None else {S.n_micro: steps})
        return Setup(arch, values, policy, notes, launcher=kind,
                     plugin=plugin_config(config.get("deepspeed_config") or {}, steps, _scalar(precision), name))
    sharded = policy["zero"] == 3
    policy["overlap"] = Overlap(grad_reduce=world > 1, param_gather=sharded and world > 1)
    return Setup(arch, values, policy, notes, launcher=kind)


MESH = ("dp_replicate", "dp_shard", "tp", "cp", "sp")
"""The sizes of accelerate's ``ParallelismConfig`` (``accelerate/parallelism_config.py``), each 1
unless given, as ``parallelism_config_<name>_size`` in the YAML."""


def parallelism(config: dict, kind: str, world: int, notes: list, arch=None) -> dict:
    """The layout of accelerate's ``parallelism_config`` (FSDP2's device mesh): ``d`` the replicate x
    shard ranks, ``cp`` the context ranks (PyTorch's ``context_parallel``, which accelerate's
    ``_prepare_cp`` hooks into the attention: each sequence split head-tail, keys and values
    all-gathered or rotated, ``cp_comm_strategy``, as ``models.torchtitan.CP_ROTATIONS`` names
    them; its SDPA kernels are fused, so ``flash``), FSDP over the shard x context ranks and
    replicated over ``dp_replicate`` (HSDP: ``shard`` = ``dp_shard``).  The sizes must multiply to
    the processes (accelerate's ``_validate_accelerator``; all 1: every process a replica).
    ``tp`` (``tensor_parallel``): ``m1`` tensor ranks as transformers' ``tp_plan`` lays out the model;
    DeepSpeed's sequence parallelism (``sp_size``) is ``sequence_parallel``'s; ``{}`` without the
    section."""
    section = config.get("parallelism_config") or {}
    if not section:
        return {}
    if not isinstance(section, dict):
        raise InputError("parallelism_config must be a mapping", "parallelism_config")
    for key in section:
        if key not in NO_COST["parallelism_config"]:
            raise InputError(f"parallelism_config.{key}: an accelerate key this reader does not read",
                             f"parallelism_config.{key}")
    size = {name: _count(section, f"parallelism_config_{name}_size") for name in MESH}
    if size["sp"] > 1:
        return sequence_parallel(section, size, kind, world, notes)
    if kind != "FSDP" or fsdp_version(config.get("fsdp_config") or {}) != 2:
        raise InputError("parallelism_config needs distributed_type FSDP with fsdp_version 2 (accelerate launch "
                         "refuses it otherwise)", "parallelism_config")
    total = size["dp_replicate"] * size["dp_shard"] * size["tp"] * size["cp"]
    if total == 1:
        size["dp_replicate"] = total = world
    if total != world:
        raise InputError(f"parallelism_config: dp_replicate x dp_shard x tp x cp x sp = {total} is not the {world} "
                         f"processes (accelerate's rule)", "parallelism_config")
    out = {"values": {S.d: size["dp_replicate"] * size["dp_shard"], S.cp: size["cp"]}}
    if size["tp"] > 1:
        out.update(tensor_parallel(size, arch, notes))
        out["values"].update({S.m1: size["tp"], S.s1: 1})
    if size["dp_replicate"] > 1:
        out["shard"] = size["dp_shard"]
    if size["cp"] > 1:
        strategy = section.get("parallelism_config_cp_comm_strategy", "allgather")
        backend = section.get("parallelism_config_cp_backend", "torch")
        if backend != "torch" or _scalar(strategy) not in CP_ROTATIONS:
            raise InputError(f"parallelism_config: context parallelism by PyTorch (cp_backend torch) with "
                             f"cp_comm_strategy {' or '.join(CP_ROTATIONS)}, got {backend!r}, {strategy!r}",
                             "parallelism_config_cp_comm_strategy")
        out.update(cp_variant=CP_ROTATIONS[strategy], flash=True)
        notes.append("parallelism_config: PyTorch's context parallelism runs SDPA's fused attention kernels "
                     "(counted as flash attention)")
    return out


def tensor_parallel(size: dict, arch, notes: list) -> dict:
    """The policy of ``parallelism_config_tp_size`` > 1: ``m1`` = tp ranks laid out as transformers'
    ``tp_plan`` lays out a causal LM (accelerate's ``_prepare_tp`` takes the model as
    ``from_pretrained(..., tp_plan="auto")`` split it; ``LlamaConfig.base_model_tp_plan`` and
    ``Qwen2Config``'s: ``q/k/v_proj`` and ``gate/up_proj`` ``"colwise"``, ``o_proj`` and ``down_proj``
    ``"rowwise"``, an allreduce of the partial outputs; ``LlamaForCausalLM._tp_plan``: ``lm_head``
    ``"colwise_gather_output"``; ``init_parallel_plans`` adds ``embed_tokens``
    ``"embedding_rowwise"``; transformers 5.23, ``transformers/distributed/``): Megatron-LM's split of
    the layers without sequence parallelism (``s1 = 1``), each of ``q``, ``k``, ``v``, ``gate``,
    ``up`` reducing its own input gradient (``blocks.wiring.Run.split_inputs``), the word table split
    by vocabulary, the LM head split by vocabulary with its logits all-gathered (``tp_ends``
    ``"gathered"``, ``blocks.heads.gathered_rows``; a tied head shares the table's shard).  Refused
    where accelerate refuses (``ParallelismConfig.__post_init__`` and ``_validate_accelerator``,
    accelerate 1.15: replicas without shards beside ``tp``; FSDP with nothing to shard over,
    ``dp_shard`` and ``cp`` both 1), and a ``tp`` that does not divide the model's heads, key/value
    heads or MLP width (transformers' uneven shards are not modelled)."""
    tp, key = size["tp"], "parallelism_config_tp_size"
    if size["dp_replicate"] > 1 and size["dp_shard"] == 1:
        raise InputError(f"{key} {tp} with dp_replicate_size {size['dp_replicate']} and dp_shard_size 1: accelerate "
                         f"refuses tensor parallelism beside pure replicas (give dp_shard_size > 1)", key)
    if size["dp_shard"] == 1 and size["cp"] == 1:
        raise InputError(f"{key} {tp} under FSDP with dp_shard_size and cp_size 1: accelerate refuses FSDP with no "
                         f"dimension to shard over (lower tp_size, or launch without FSDP)", key)
    tensor_divides(arch, tp, key, "transformers' uneven tensor-parallel shards")
    notes.append(f"{key} {tp}: transformers' tp_plan over {tp} ranks as transformers 5.23 applies it (no sequence "
                 f"parallelism; the word table split by vocabulary, the LM head split with its logits all-gathered: "
                 f"tp_ends gathered)")
    return {"tp_ends": "gathered"}


SP_KERNELS = ("sdpa", "flash_attention_2", "flash_attention_3")
"""The core attention ``sp_attn_implementation`` names (accelerate's ``DeepSpeedSequenceParallelConfig``
takes these three, ``sdpa`` unless given); each runs the fused kernel ``models.trl_recipe.KERNEL``
names for it."""

SP_REDUCE = ("DeepSpeed reduces the gradients in fp32 under sequence parallelism (its "
             "seq_parallel_communication_data_type, fp32 unless its config says otherwise; accelerate's plugin "
             "passes no such key): the gradients' bytes follow --conventions")
"""The note of ALST's gradient reductions: ``DeepSpeedEngine`` takes the sequence-parallel data type
(``SEQ_PARALLEL_COMMUNICATION_DATA_TYPE_DEFAULT``, ``"fp32"``) as its ``communication_data_type`` once
``sequence_parallel_size > 1``."""


def sequence_parallel(section: dict, size: dict, kind: str, world: int, notes: list) -> dict:
    """The layout of DeepSpeed's sequence parallelism (ALST, Arctic Long Sequence Training:
    ``sp_backend`` deepspeed, the only one): ``cp`` = ``sp_size`` ranks, each holding ``1/sp`` of
    every sequence (``UlyssesSPDataLoaderAdapter`` shards each rank's micro-batch over the group in
    turn), with Ulysses' all-to-alls around the attention core (``UlyssesSPAttentionHF``: the
    sequence gathered, the heads scattered; ``cp_variant`` ulysses), and ``d`` = world / ``sp``
    data-parallel ranks, DeepSpeed's own groups (accelerate leaves its mesh sizes unchecked under
    it; ZeRO shards over every rank, as over ``d cp``).  The core attention is
    ``sp_attn_implementation``'s (``SP_KERNELS``).  accelerate refuses ``cp_size`` beside it, and
    runs it under DeepSpeed only.

    >>> sequence_parallel({"parallelism_config_sp_size": 2}, dict(dp_replicate=1, dp_shard=1, tp=1, cp=1, sp=2),
    ...                   "DEEPSPEED", 8, [])["cp_variant"]
    'ulysses'
    """
    sp, world = size["sp"], count(world, "world")
    if kind != "DEEPSPEED":
        raise InputError(f"parallelism_config_sp_size {sp}: DeepSpeed's sequence parallelism (ALST) runs under "
                         f"distributed_type DEEPSPEED, not {kind}", "parallelism_config_sp_size")
    backend = section.get("parallelism_config_sp_backend", "deepspeed")
    if backend != "deepspeed":
        raise InputError(f"parallelism_config_sp_backend {backend!r}: accelerate's only sequence-parallel backend "
                         f"is deepspeed", "parallelism_config_sp_backend")
    for other in ("cp", "tp"):
        if size[other] > 1:
            raise InputError(f"parallelism_config_{other}_size {size[other]} beside sp_size {sp}: "
                             + ("accelerate refuses context and sequence parallelism together" if other == "cp" else
                                "tensor parallelism is not modelled"), f"parallelism_config_{other}_size")
    if world % sp:
        raise InputError(f"parallelism_config_sp_size {sp} does not divide the {world} processes (DeepSpeed's "
                         f"sequence-parallel groups)", "parallelism_config_sp_size")
    kernel = _scalar(section.get("parallelism_config_sp_attn_implementation") or "sdpa")
    if kernel not in SP_KERNELS:
        raise InputError(f"parallelism_config_sp_attn_implementation {kernel!r}: the reader reads "
                         f"{', '.join(SP_KERNELS)}", "parallelism_config_sp_attn_implementation")
    mesh = size["dp_replicate"] * size["dp_shard"] * sp
    if mesh != world:
        notes.append(f"parallelism_config: dp_replicate x dp_shard x sp = {mesh}, not the {world} processes; "
                     f"DeepSpeed's groups take {world // sp} data-parallel ranks (accelerate leaves the sizes "
                     f"unchecked under it)")
    notes += [f"parallelism_config: DeepSpeed's sequence parallelism (ALST) over {sp} ranks, Ulysses' all-to-alls "
              f"around {kernel}'s attention core", SP_REDUCE]
    return {"values": {S.d: world // sp, S.cp: sp}, "cp_variant": "ulysses", "flash": True,
            "attention_kernel": KERNEL[kernel]}


FP8_TE_KEYS = {"use_autocast_during_eval", "margin", "interval", "fp8_format", "amax_history_len", "amax_compute_algo",
               "override_linear_precision", "use_mxfp8_block_scaling"}
"""``fp8_config`` keys of Transformer Engine's recipe (accelerate's ``TERecipeKwargs``): the evaluation
autocast, the scaling's margin, interval, format and amax algorithm change no count;
``amax_history_len`` is the history's length (1,024 unless given), ``use_mxfp8_block_scaling`` MXFP8
instead of delayed scaling, ``override_linear_precision`` must keep every product in FP8."""

FP8_UNPASSED = {"amax_history_length": "amax_history_len", "amax_compute_algorithm": "amax_compute_algo",
                "optimization_level": "opt_level"}
"""``fp8_config`` keys ``accelerate config`` writes under names its recipes do not read (``accelerate
launch`` passes them as ``ACCELERATE_FP8_<KEY>``, and ``TERecipeKwargs`` reads the names here): noted,
the recipe's default applying."""

FP8_AO_KEYS = {"enable_fsdp_float8_all_gather", "pad_inner_dim"}
"""``fp8_config`` keys of torchao's recipe (accelerate's ``AORecipeKwargs``): FSDP2's FP8 all-gather
(on unless false) and the inner dimension padded to 16 (no count)."""


def fp8_policy(section, notes: list, fsdp_sharded: bool = False) -> dict:
    """``mixed_precision: fp8`` as accelerate runs it, by ``fp8_config.backend``: bf16 autocast for
    what stays in 16 bits and

    * ``TE``: ``convert_model`` swaps every ``nn.Linear`` whose sizes are multiples of 16 for
      Transformer Engine's under ``fp8_autocast`` with ``DelayedScaling`` (``fp8`` delayed, its amax
      history ``amax_history_len``, 1,024 unless given), or ``MXFP8BlockScaling`` with
      ``use_mxfp8_block_scaling``; the LM head, which it swaps too, is counted in 16 bits (noted);
    * ``AO``: torchao's ``Float8Linear`` with tensor-wise dynamic scales (``fp8``
      torchao-tensorwise) on every linear layer but the first and the last (the head), the first
      counted in FP8 (noted), and where FSDP shards the weights (``fsdp_sharded``) its FP8
      all-gather (``fp8_gather``) unless ``enable_fsdp_float8_all_gather`` is false (elsewhere it
      gathers nothing: noted).

    MS-AMP, and a config that names no backend (accelerate then picks one by what is installed),
    are refused.

    >>> sorted(fp8_policy({"backend": "TE", "amax_history_len": 16}, []).items())
    [('fp8', 'delayed'), ('fp8_amax_history', 16), ('precision', 'bf16')]
    """
    section = section or {}
    if not isinstance(section, dict):
        raise InputError(f"fp8_config must be a mapping, got {section!r}", "fp8_config")
    backend = _scalar(section.get("backend"))
    if backend not in ("TE", "AO"):
        why = "MS-AMP's FP8 weights and optimizer states are not modelled" if backend in ("MSAMP", "MS-AMP") else \
            "give TE or AO (without one accelerate picks by what is installed)"
        raise InputError(f"fp8_config.backend {section.get('backend')!r}: {why}", "fp8_config.backend")
    keys = FP8_TE_KEYS if backend == "TE" else FP8_AO_KEYS
    for key in section:
        if key in FP8_UNPASSED:
            notes.append(f"fp8_config.{key}: accelerate passes it as ACCELERATE_FP8_{key.upper()}, which its recipe "
                         f"does not read ({FP8_UNPASSED[key]} it reads); the recipe's default applies")
        elif key != "backend" and key not in keys:
            raise InputError(f"fp8_config.{key}: not a key of accelerate's {backend} recipe this reader reads",
                             f"fp8_config.{key}")
    if backend == "AO":
        notes.append("fp8_config backend AO: torchao's Float8Linear on every linear layer but the first and the last; "
                     "the first (the first layer's first projection) counted in FP8")
        gather = _fp8_switch(section, "enable_fsdp_float8_all_gather", True)
        if gather and not fsdp_sharded:
            notes.append("fp8_config.enable_fsdp_float8_all_gather: FSDP2 gathers no sharded weights here; it "
                         "changes nothing")
        return dict(precision="bf16", fp8="torchao-tensorwise", fp8_gather=gather and fsdp_sharded)
    override = section.get("override_linear_precision")
    if any(_flags_of(override)):
        raise InputError(f"fp8_config.override_linear_precision {override!r}: products kept in 16 bits for some "
                         f"passes are not modelled", "fp8_config.override_linear_precision")
    form = section.get("fp8_format", "HYBRID")
    if not isinstance(form, str) or form.upper() not in FP8_FORMATS:
        raise InputError(f"fp8_config.fp8_format must be one of {', '.join(FP8_FORMATS)} (accelerate's "
                         f"TERecipeKwargs), got {form!r}", "fp8_config.fp8_format")
    notes.append("fp8_config backend TE: accelerate's convert_model swaps every linear layer (sizes multiples of 16) "
                 "for Transformer Engine's, the LM head too; the head counted in 16 bits")
    if _fp8_switch(section, "use_mxfp8_block_scaling", False):
        return dict(precision="bf16", fp8="mxfp8")
    history = section.get("amax_history_len", 1024)
    if isinstance(history, bool) or not isinstance(history, int) or history < 1:
        raise InputError(f"fp8_config.amax_history_len must be a positive integer, got {history!r}",
                         "fp8_config.amax_history_len")
    return dict(precision="bf16", fp8="delayed", fp8_amax_history=history)


FP8_FORMATS = ("HYBRID", "E4M3", "E5M2")
"""``fp8_config.fp8_format`` as accelerate's ``TERecipeKwargs`` takes it (any case): E4M3 in the
forward and E5M2 in the backward (HYBRID), or one of them throughout; each is one byte an
element, so the counts are the same."""

SWITCH_WORDS = {"true": True, "yes": True, "y": True, "t": True, "on": True, "1": True,
                "false": False, "no": False, "n": False, "f": False, "off": False, "0": False}
"""Text accelerate reads as a switch (``utils.environment.str_to_bool``, which lowers its case,
strips nothing and refuses anything else)."""


def switch(value, where: str) -> bool:
    """A switch of the YAML (``fsdp_config.fsdp_offload_params``, ``fp8_config.use_mxfp8_block_scaling``,
    ...) as ``accelerate launch`` hands it to the training script: ``str(value)`` in an environment
    variable (``utils/launch.py``: ``FSDP_OFFLOAD_PARAMS``, ``ACCELERATE_FP8_*``) that the plugin
    reads with ``str_to_bool`` (``FullyShardedDataParallelPlugin.__post_init__``, the FP8 recipes'
    ``parse_flag_from_env``).  So a YAML boolean, the text ``"true"``/``"false"`` in any case,
    ``"yes"``, ``"on"``, ``"1"`` and the number 1 or 0 are switches; text with spaces around it,
    ``2``, ``1.0`` and ``null`` (``"None"``) are refused there, and here, naming ``where``.

    >>> switch("True", "fp8_config.use_mxfp8_block_scaling"), switch(0, "fsdp_config.fsdp_offload_params")
    (True, False)
    """
    text = str(value).lower()
    if text in SWITCH_WORDS:
        return SWITCH_WORDS[text]
    raise InputError(f"{where} must be true or false, got {value!r} (accelerate's str_to_bool reads "
                     f"{', '.join(SWITCH_WORDS)}, in any case)", where)


def _fp8_switch(section: dict, key: str, default: bool) -> bool:
    """``fp8_config.key`` read as ``switch``, ``default`` where absent or ``null`` (``accelerate
    launch`` exports no ``ACCELERATE_FP8_*`` variable for a value of ``None``, so the recipe's own
    default applies)."""
    value = section.get(key)
    return default if value is None else switch(value, f"fp8_config.{key}")


def _flags_of(value) -> list:
    """``override_linear_precision`` as accelerate reads it: ``accelerate launch`` hands on items 0, 1
    and 2 of the YAML value as text (``utils/launch.py``: ``setup_fp8_env``, ``str(value[0])`` ...) and
    ``TERecipeKwargs.__post_init__`` reads each with ``str_to_bool``; null leaves all three off.  So a
    YAML list of three booleans is read, while the text ``(false, false, false)`` (whose item 0 is
    ``(``) and a list short of three are refused there, and here.

    >>> _flags_of([False, "true", 0])
    [False, True, False]
    """
    where = "fp8_config.override_linear_precision"
    if value is None:
        return [False, False, False]
    rule = (f"{where} must be three flags (forward, data gradient, weight gradient) as a YAML list, e.g. "
            f"[false, false, false]: accelerate launch takes its items 0, 1, 2 and reads each with str_to_bool")
    try:
        parts = [value[index] for index in range(3)]
    except (IndexError, KeyError, TypeError):
        raise InputError(f"{rule}; got {value!r}", where) from None
    try:
        return [switch(part, where) for part in parts]
    except InputError:
        raise InputError(f"{rule}; got {value!r}, whose items 0, 1, 2 are {parts!r}", where) from None


PLUGIN_NO_COST = {"gradient_clipping", "zero3_init_flag", "zero3_save_16bit_model", "deepspeed_multinode_launcher",
                  "deepspeed_hostfile", "deepspeed_exclusion_filter", "deepspeed_inclusion_filter",
                  "offload_optimizer_nvme_path", "offload_param_nvme_path", "deepspeed_moe_layer_cls_names",
                  "transformer_moe_cls_names"}
"""``deepspeed_config`` keys of accelerate's ``DeepSpeedPlugin`` that change no count: clipping,
how the model is built and saved, how the launcher reaches the hosts, which modules are MoE
layers to ZeRO-3's leaf hooks."""


LAUNCH_DROPS = {"seq_parallel_communication_data_type": "accelerate launch passes DeepSpeed only the keys its "
                "plugin knows (utils/launch.py: zero_stage, the offloads, ...), not this one; DeepSpeed's default "
                "applies"}
"""``deepspeed_config`` keys of an accelerate config that accelerate sets aside without passing them to
DeepSpeed (TRL's ALST example writes one): noted, as they change nothing."""


def plugin_config(section: dict, steps: int | None, mixed: str, name: str) -> dict:
    """The values of the DeepSpeed config accelerate's ``DeepSpeedPlugin`` builds without a file
    (``utils/dataclasses.py``, from the variables ``accelerate launch`` exports: ``utils/launch.py``)
    that transformers' Trainer compares with its TrainingArguments (``HfTrainerDeepSpeedConfig.
    trainer_config_process``'s ``fill_match``; ``models.hf_trainer.launched``): the micro-batch and
    the global batch ``"auto"``, ``gradient_accumulation_steps`` (``"auto"`` unless given),
    ``gradient_clipping`` (only where given and nonzero), and the mixed precision
    (``set_mixed_precision``: a ``bf16`` or ``fp16`` section); ``file``: the config's name.

    >>> plugin_config({"gradient_accumulation_steps": 1}, 1, "bf16", "zero1")["gradient_accumulation_steps"]
    1
    """
    clipping = section.get("gradient_clipping")
    return {"file": name, "train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
            "gradient_accumulation_steps": "auto" if steps is None else steps,
            **({"gradient_clipping": clipping} if clipping not in (None, "auto") and clipping else {}),
            "mixed_precision": mixed}


FILE_IGNORES = ("gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
                "offload_param_device", "offload_param_nvme_path", "offload_optimizer_nvme_path",
                "zero3_save_16bit_model", "mixed_precision")
"""The accelerate settings that ``DeepSpeedPlugin._deepspeed_config_checks`` refuses beside a
``deepspeed_config_file`` (accelerate 1.15, ``utils/dataclasses.py``: "When using
`deepspeed_config_file`, the following accelerate config variables will be ignored"): the
DeepSpeed JSON says them."""


def config_file_launch(config: dict, world: int, notes: list, deepspeed) -> Setup:
    """An accelerate config whose ``deepspeed_config`` names a ``deepspeed_config_file``, with that
    JSON read by ``deepspeed(world, precision, notes)`` (``--deepspeed``; ``None``: refused, naming
    it).  accelerate then passes DeepSpeed the JSON as written (``DeepSpeedPlugin.__post_init__``):
    the YAML gives the processes only, and ``FILE_IGNORES`` in it are refused as accelerate refuses
    them.  The launch's mixed precision is ``"no"`` (the YAML may not set it), which fills a
    ``"auto"`` ``fp16.enabled``/``bf16.enabled`` with false (``set_mixed_precision``): fp32.
    ``gradient_accumulation_steps`` absent is 1 (accelerate writes it)."""
    section = config.get("deepspeed_config") or {}
    if not isinstance(section, dict):
        raise InputError(f"deepspeed_config must be a mapping, got {section!r}", "deepspeed_config")
    if config.get("distributed_type", "NO") != "DEEPSPEED" or section.get("deepspeed_config_file") is None:
        raise InputError("--deepspeed beside --accelerate: the accelerate config must be distributed_type DEEPSPEED "
                         "with a deepspeed_config.deepspeed_config_file (then accelerate reads that DeepSpeed JSON); "
                         "give this DeepSpeed config alone with --devices, or the accelerate config alone",
                         "--deepspeed")
    if deepspeed is None:
        raise InputError("deepspeed_config.deepspeed_config_file: give that DeepSpeed JSON with --deepspeed beside "
                         "this file (its settings, not the plugin's, are DeepSpeed's then)",
                         "deepspeed_config.deepspeed_config_file")
    for key in [*section, *(["mixed_precision"] if config.get("mixed_precision") is not None else [])]:
        where = key if key == "mixed_precision" else f"deepspeed_config.{key}"
        if key in FILE_IGNORES:
            raise InputError(f"{where} beside deepspeed_config.deepspeed_config_file: accelerate refuses it (the "
                             f"DeepSpeed JSON decides it; DeepSpeedPlugin's _deepspeed_config_checks)", where)
        if key not in PLUGIN_NO_COST | {"deepspeed_config_file"}:
            raise InputError(f"{where}: an accelerate DeepSpeed key this reader does not read (it may change the "
                             f"cost)", where)
    for key in ("parallelism_config", "fp8_config"):
        if config.get(key):
            raise InputError(f"{key} beside deepspeed_config.deepspeed_config_file is not read; give the layout in "
                             f"the DeepSpeed JSON", key)
    notes.append(f"deepspeed_config.deepspeed_config_file {section['deepspeed_config_file']}: read from --deepspeed "
                 f"(accelerate passes DeepSpeed that JSON as written); {world} processes")
    found = deepspeed(world, "fp32", notes)
    found.launcher = "DEEPSPEED"
    return found


def deepspeed_plugin(section: dict, notes: list) -> tuple[dict, int | None]:
    """The policy of an inline ``deepspeed_config`` as accelerate's ``DeepSpeedPlugin`` builds its
    DeepSpeed config without a file (``utils/dataclasses.py``): ``zero_stage`` (2 unless given),
    ``offload_optimizer_device`` and ``offload_param_device`` (none unless given) as
    ``zero_optimization``, whose overlap DeepSpeed defaults (``deepspeed.zero_policy``); and
    ``gradient_accumulation_steps`` (``None``: "auto", the script's, ``--set n_micro=``).  A
    ``deepspeed_config_file`` is DeepSpeed's own JSON, read with ``--deepspeed`` (``config_file_launch``).

    >>> deepspeed_plugin({"zero_stage": 3, "offload_optimizer_device": "cpu"}, [])[0]["offload"]
    'optimizer'
    """
    if not isinstance(section, dict):
        raise InputError(f"deepspeed_config must be a mapping, got {section!r}", "deepspeed_config")
    read = {"zero_stage", "offload_optimizer_device", "offload_param_device", "gradient_accumulation_steps"}
    for key in section:
        if key in LAUNCH_DROPS:
            notes.append(f"deepspeed_config.{key}: {LAUNCH_DROPS[key]}")
        elif key not in read | PLUGIN_NO_COST:
            raise InputError(f"deepspeed_config.{key}: an accelerate DeepSpeed key this reader does not read (it may "
                             f"change the cost)", f"deepspeed_config.{key}")
    stage = section.get("zero_stage", 2)
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        raise InputError(f"deepspeed_config.zero_stage must be 0, 1, 2 or 3, got {stage!r}",
                         "deepspeed_config.zero_stage")
    zero = {key: {"device": section.get(f"{key}_device", "none")} for key in ("offload_optimizer", "offload_param")}
    steps = section.get("gradient_accumulation_steps", "auto")
    if steps != "auto" and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise InputError(f"deepspeed_config.gradient_accumulation_steps must be a positive integer or \"auto\", "
                         f"got {steps!r}", "deepspeed_config.gradient_accumulation_steps")
    return dict(zero=stage, **zero_policy(zero, stage, notes)), None if steps == "auto" else steps
