"""A NeMo 1.x training configuration (``examples/nlp/language_modeling/conf/megatron_*_config.yaml``
of NVIDIA/NeMo until 2024: ``trainer:``, ``exp_manager:`` and ``model:`` sections, read by
``megatron_gpt_pretraining.py``) as the Megatron-LM arguments it stands for.

NeMo 1.x builds Megatron-Core's ``GPTModel`` from ``model:`` (``MegatronGPTModel`` with ``mcore_gpt``:
``megatron_base_model.build_transformer_config`` and ``model_provider_func``, at NeMo fec8221) with
Transformer Engine's layer spec, the same model Megatron-LM's ``pretrain_gpt.py`` builds from its
options.  ``nemo1_setup`` writes each key it reads as that option (``OPTIONS``, with NeMo's own
defaults where a key is absent) and reads them with ``megatron_args.megatron_setup``:

=============================================== ===================================================
NeMo 1.x key (NeMo's default)                   Megatron-LM option
=============================================== ===================================================
``trainer.devices`` x ``trainer.num_nodes``     the world size (``--devices`` replaces it)
``trainer.precision`` (16) with                 32: fp32; bf16, 16 (and ``-mixed``) with O2:
``model.megatron_amp_O2`` (false)               ``--bf16``, ``--fp16`` (fp32 main weights and
                                                gradients, as Megatron's); without O2: refused
``model.num_layers``, ``hidden_size``,          ``--num-layers``, ``--hidden-size``,
``num_attention_heads`` (required)              ``--num-attention-heads``
``model.ffn_hidden_size`` (4 x hidden)          ``--ffn-hidden-size``
``model.num_query_groups``, ``kv_channels``     ``--group-query-attention --num-query-groups``,
(null: the heads, hidden / heads)               ``--kv-channels``
``model.activation`` (gelu)                     swiglu, fast-swiglu: ``--swiglu``; squared-relu
``model.normalization`` (layernorm)             rmsnorm: ``--normalization RMSNorm``
``model.bias`` (true)                           false: ``--disable-bias-linear``
``model.qkv_bias`` (false)                      true: ``--add-qkv-bias`` (``add_qkv_bias``)
``model.position_embedding_type``               rope: ``--position-embedding-type rope``,
(learned_absolute), ``rotary_percentage`` (1)   ``--rotary-percent``
``model.share_embeddings_and_output_weights``   false: ``--untie-embeddings-and-output-weights``
(true)
``model.encoder_seq_length`` (512),             ``--max-position-embeddings``, ``--seq-length``
``model.data.seq_length``                       (the model's length without one)
``model.hidden_dropout``,                       ``--hidden-dropout``, ``--attention-dropout``
``attention_dropout`` (0.1, 0.1)
``model.make_vocab_size_divisible_by`` (128)    ``--make-vocab-size-divisible-by``
``model.tokenizer`` (library, type)             megatron GPT2BPETokenizer: GPT-2's 50,257;
                                                others: ``--vocab-size`` on the command line
``model.override_vocab_size`` (null)            ``--padded-vocab-size``: the model's vocabulary
                                                as given, not padded; the tokenizer's unused
``model.micro_batch_size``,                     ``--micro-batch-size``, ``--global-batch-size``
``global_batch_size`` (required)
``model.tensor_model_parallel_size``,           ``--tensor-model-parallel-size``,
``pipeline_model_parallel_size``,               ``--pipeline-model-parallel-size``,
``virtual_pipeline_model_parallel_size``,       ``--num-virtual-stages-per-pipeline-rank``,
``context_parallel_size``,                      ``--context-parallel-size``,
``sequence_parallel``                           ``--sequence-parallel``
``model.activations_checkpoint_granularity``,   ``--recompute-granularity``, ``--recompute-method``,
``_method``, ``_num_layers`` (null)             ``--recompute-num-layers``
``model.optim.name``                            fused_adam, adam, adamw: Adam;
                                                distributed_fused_adam: Adam with
                                                ``--use-distributed-optimizer``;
``model.optim.overlap_grad_sync`` (true),       ``--overlap-grad-reduce``,
``overlap_param_sync`` (false)                  ``--overlap-param-gather`` (with distributed Adam)
``model.enable_cuda_graph`` (false; with        ``--enable-cuda-graph``: Megatron-Core's local graph
``use_te_rng_tracker`` true, as NeMo asserts)   of each whole layer (``blocks.graphs.graph_scopes``)
=============================================== ===================================================

Keys that change no count (logging, checkpoints, initialisation, fusions, the data pipeline, the
learning-rate schedule) are accepted (``NO_COST``); keys that act only away from one value (FP8,
FSDP, CPU offload, a batch ramp, tensor-parallel overlap, NeMo's legacy model) are refused at any
other (``INERT``); any other key is refused, naming it.  OmegaConf's interpolations
``${.key}`` and ``${section.key}`` are resolved in the keys read; any other is refused.
"""

from __future__ import annotations

import re

from symbolic_cost.checks import InputError, instance, within_count
from symbolic_cost.models.launch_script import Launch
from symbolic_cost.models.megatron_args import Setup, megatron_setup

GENERATION = ("a NeMo 1.x configuration (trainer:, exp_manager: and model: sections, NeMo's "
              "examples/nlp/language_modeling/conf/megatron_*_config.yaml of 2023-2024)")
"""What the file is, in the reader's notes and refusals."""

TOP = {"name", "restore_from_path", "trainer", "exp_manager", "model", "defaults"}
"""The top-level keys: the run's name, a ``.nemo`` file to start from (weights only), the Lightning
trainer, the experiment manager (logs, checkpoints), the model; Hydra's ``defaults`` list (its
``tp_overlap`` entry fills ``ub_tp_comm_overlap_cfg``, read only with ``ub_tp_comm_overlap``)."""

TRAINER_NO_COST = {"accelerator", "logger", "enable_checkpointing", "use_distributed_sampler", "max_epochs",
                   "max_steps", "max_time", "log_every_n_steps", "val_check_interval", "limit_val_batches",
                   "limit_test_batches", "limit_train_batches", "gradient_clip_val", "benchmark",
                   "enable_model_summary", "num_sanity_val_steps", "check_val_every_n_epoch",
                   "replace_sampler_ddp", "devices", "num_nodes", "precision", "accumulate_grad_batches"}
"""``trainer:`` keys: the world size and precision (read), Lightning's loop and logging settings."""

READ = {"micro_batch_size", "global_batch_size", "tensor_model_parallel_size", "pipeline_model_parallel_size",
        "virtual_pipeline_model_parallel_size", "context_parallel_size", "sequence_parallel", "encoder_seq_length",
        "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
        "num_query_groups", "kv_channels", "hidden_dropout", "attention_dropout", "normalization", "bias", "qkv_bias",
        "activation", "position_embedding_type", "rotary_percentage", "share_embeddings_and_output_weights",
        "make_vocab_size_divisible_by", "override_vocab_size", "tokenizer", "megatron_amp_O2",
        "activations_checkpoint_granularity", "activations_checkpoint_method", "activations_checkpoint_num_layers", "optim", "data", "mcore_gpt",
        "enable_cuda_graph", "use_te_rng_tracker"}
"""``model:`` keys read into options (``OPTIONS``)."""

NO_COST = {"init_method_std", "use_scaled_init_method", "apply_query_key_layer_scaling", "layernorm_epsilon",
           "do_layer_norm_weight_decay", "pre_process", "post_process", "persist_layer_norm", "openai_gelu",
           "normalize_attention_scores", "batch_p2p_comm", "native_amp_init_scale", "native_amp_growth_interval",
           "hysteresis", "grad_allreduce_chunk_size_mb", "grad_div_ar_fusion", "gradient_accumulation_fusion",
           "bias_activation_fusion", "bias_dropout_add_fusion", "masked_softmax_fusion",
           "get_attention_mask_from_fusion", "apply_rope_fusion", "seed", "resume_from_checkpoint",
           "use_cpu_initialization", "onnx_safe", "apex_transformer_log_level", "gradient_as_bucket_view",
           "sync_batch_comm", "nsys_profile", "rotary_base", "transformer_engine", "use_flash_attention",
           "fp8_e4m3", "fp8_hybrid", "fp8_margin", "fp8_interval", "fp8_amax_history_len", "fp8_amax_compute_algo",
           "reduce_amax", "nccl_communicator_config_path", "fsdp_sharding_strategy", "fsdp_grad_reduce_dtype",
           "fsdp_sharded_checkpoint", "cpu_offloading_num_layers", "cpu_offloading_activations",
           "cpu_offloading_weights", "sharp", "ub_tp_comm_overlap_cfg", "overlap_p2p_comm", "gc_interval",
           "enable_megatron_timers", "megatron_timer_kwargs", "max_position_embeddings", "rotary_interleaved"}
"""``model:`` keys that change no count: initialisation, loss scaling, fusions of the same work,
logging, Python's garbage-collection interval; the rotary base; ``transformer_engine`` and
``use_flash_attention`` (Megatron-Core's GPT is built with Transformer Engine's layer spec either
way: ``get_specs``; they choose NeMo's legacy model's layers); the FP8, FSDP and offload details (read only with their switch, ``INERT``);
``rotary_interleaved`` (ChatGLM's rotation of adjacent channel pairs, not halves: the same work);
``overlap_p2p_comm`` (timed only under the interleaved schedule, as Megatron-LM's
``--overlap-p2p-communication``; noted there); ``max_position_embeddings`` (the legacy model's:
Megatron-Core's GPT takes ``encoder_seq_length``, ``model_provider_func``)."""

INERT = {"fp8": (False, "FP8 training through NeMo's Transformer Engine recipe is not read; give the layout with "
                        "--megatron-args (--fp8-format) or --preset and --fp8"),
         "fp8_params": (False, "FP8 weights are not read"),
         "fsdp": (False, "NeMo's FSDP strategy is not read"),
         "cpu_offloading": (False, "activation and weight offload to the host is not modelled"),
         "rampup_batch_size": (None, "a batch-size ramp changes the batch from step to step; give one step's"),
         "ub_tp_comm_overlap": (False, "userbuffers' tensor-parallel overlap is not read"),
         "headscale": (False, "learned per-head scales (NeMo's legacy model) are not modelled"),
         "transformer_block_type": ("pre_ln", "post-LN and NormFormer blocks are not modelled"),
         "attention_type": ("multihead", "only multi-head attention is read"),
         "fp32_residual_connection": (False, "fp32 residuals are not modelled"),
         "fp16_lm_cross_entropy": (False, "a 16-bit cross-entropy is not modelled"),
         "use_emha": (False, "NeMo's fused multi-head attention (not supported, says the file) is not read"),
         "seq_len_interpolation_factor": (None, "rotary interpolation is read as plain rotary positions; unset it"),
         "apply_embedding_scaling": (False, "the embedding's scaling by the root of the hidden size is not read"),
         "num_micro_batches_with_partial_activation_checkpoints": (None, "partial recomputation over micro-batches "
                                                                   "is not modelled"),
         "activations_checkpoint_layers_per_pipeline": (None, "recomputation that shrinks along the pipeline is not "
                                                        "modelled"),
         "ffn_dropout": (0.0, "Megatron-Core's GPT has no dropout inside the MLP (NeMo's legacy model's); set it "
                              "to 0"),
         "megatron_legacy": (False, "NeMo's legacy Megatron model is not read"),
         "restore_from_path": (None, "a .nemo file restored into the model (its own configuration, which may "
                                     "differ from this file's, travels with it) is not read; give the layout with "
                                     "--preset and --set"),
         "restore_from_ckpt": (None, "a checkpoint restored into the model (its own configuration, which may "
                                     "differ from this file's, travels with it) is not read; give the layout with "
                                     "--preset and --set"),
         "num_moe_experts": (None, "NeMo 1.x experts are not read; give the model with --hf-config"),
         "moe_router_topk": (None, "NeMo 1.x experts are not read; give the model with --hf-config")}
"""``model:`` keys accepted at one value (NeMo's default), refused at any other with the reason."""

ACTIVATIONS = {"gelu": [], "fast-gelu": [], "swiglu": ["--swiglu"], "fast-swiglu": ["--swiglu"],
               "squared-relu": ["--squared-relu"]}
"""``model.activation`` as Megatron-LM's options (NeMo's ``activation_to_func``: ``fast-`` names
are the same functions, fused)."""

PRECISIONS = {32: None, "32": None, "32-true": None, 16: "--fp16", "16": "--fp16", "16-mixed": "--fp16",
              "bf16": "--bf16", "bf16-mixed": "--bf16"}
"""``trainer.precision`` as Megatron-LM's switch (``None``: fp32)."""

OPTIMIZERS = {"fused_adam": [], "adam": [], "adamw": [], "distributed_fused_adam": ["--use-distributed-optimizer"]}
"""``model.optim.name`` as Megatron-LM's options: Adam (decoupled decay or not, the same state);
Apex's distributed Adam shards the optimizer state over data-parallel ranks as Megatron's
distributed optimizer does."""

OPTIM_NO_COST = {"name", "lr", "weight_decay", "betas", "sched", "eps", "bucket_cap_mb", "overlap_grad_sync",
                 "overlap_param_sync", "contiguous_grad_buffer", "contiguous_param_buffer"}
"""``model.optim`` keys read or of no cost: the learning rate and its schedule, Adam's constants,
the bucket size and the buffers' layout; the overlaps of Apex's distributed Adam are read
(``DISTRIBUTED_OVERLAPS``).  Any other (``grad_sync_dtype``, ``dtype``: the bytes exchanged and
kept) is refused."""

DISTRIBUTED_OVERLAPS = {"overlap_grad_sync": (True, "--overlap-grad-reduce"),
                        "overlap_param_sync": (False, "--overlap-param-gather")}
"""Apex's ``DistributedFusedAdam`` overlaps (its defaults: gradients reduced behind the backward,
parameters gathered after the step) as Megatron-LM's options; without distributed Adam they act on
nothing (noted)."""
DATA_NO_COST = {"data_prefix", "index_mapping_dir", "data_impl", "splits_string", "seq_length", "skip_warmup",
                "num_workers", "dataloader_type", "reset_position_ids", "reset_attention_mask", "eod_mask_loss",
                "validation_drop_last", "no_seqlen_plus_one_input_tokens", "pad_samples_to_global_batch_size",
                "shuffle_documents", "exchange_indices_distributed", "add_fim", "fim", "delay_data_mmap",
                "data_cache_generation_only", "data_cache_dir", "mock_dataset"}
TOKENIZER_KEYS = {"library", "type", "model", "vocab_file", "merge_file", "delimiter", "sentencepiece_legacy",
                  "trust_remote_code"}

_INTERPOLATION = re.compile(r"^\$\{(\.?)([A-Za-z_][\w.]*)\}$")


def is_nemo1(data) -> bool:
    """Whether a loaded YAML is a NeMo 1.x configuration: a ``trainer:`` beside ``exp_manager:``, or
    beside a ``model:`` without Megatron-Bridge's ``train:``."""
    return isinstance(data, dict) and "trainer" in data and (
        "exp_manager" in data or "model" in data and "train" not in data)


def _resolve(value, where: str, section: dict, root: dict):
    """``value`` with OmegaConf's ``${.key}`` (a key beside it) or ``${a.b}`` (from the top) resolved."""
    for _ in range(8):
        if not (isinstance(value, str) and value.startswith("${")):
            return value
        found = _INTERPOLATION.match(value)
        if not found:
            raise InputError(f"{where} = {value!r}: an OmegaConf interpolation the reader does not resolve; write "
                             f"the value", where)
        node = section if found.group(1) else root
        for part in found.group(2).split("."):
            if not isinstance(node, dict) or part not in node:
                raise InputError(f"{where} = {value!r} names a key the file does not hold", where)
            node = node[part]
        value = node
    raise InputError(f"{where}: interpolations nest too deeply", where)


def _check(table, allowed: set, where: str) -> dict:
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise InputError(f"{where} must be a mapping, got {table!r}", where)
    for key in table:
        if key not in allowed:
            raise InputError(f"{where}.{key}: a NeMo 1.x key this reader does not read (it may change the cost); "
                             f"remove it or give the layout with --preset and --set", f"{where}.{key}")
    return table


def _integer(value, where: str, minimum: int = 1) -> int:
    """A count of at least ``minimum`` and at most 2**53 (the library's bound on a size), named by its key."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{where} must be an integer of at least {minimum}, got {value!r}", where)
    return within_count(value, where)


def _among(value, table: dict) -> bool:
    """Whether ``value`` names an entry of ``table``: a list or a mapping names none (it is no key)."""
    return isinstance(value, (str, int, float)) and value in table


def _switch(value, where: str) -> bool:
    """A NeMo switch: YAML's true or false.  NeMo tests the value's truth (``cfg.get("bias", True)``),
    so 0 is off where ``is False`` would read it as on; anything not a boolean is refused, naming it."""
    if not isinstance(value, bool):
        raise InputError(f"{where} must be true or false, got {value!r}", where)
    return value


OTHER_MODELS = {"bert": "BERT (megatron_bert_pretraining.py)", "t5": "T5 (megatron_t5_pretraining.py)",
                "bart": "BART (megatron_bart_pretraining.py)", "ul2": "UL2, a T5 (megatron_t5_pretraining.py)",
                "t0": "T0, a T5 (megatron_t0_finetuning.py)", "retro": "RETRO (megatron_retro_pretraining.py)",
                "mamba": "Mamba hybrid (megatron_mamba_pretraining.py)",
                "griffin": "Griffin, RecurrentGemma's (megatron_griffin_pretraining.py)"}
"""NeMo 1.x models other than its GPT, by the word of the configuration's ``name`` (``megatron_bert``,
``fine_tune_retro``; ``examples/nlp/language_modeling/conf`` at NeMo 8cfedd7) and the program that trains
them; ``model.mcore_bert`` and ``mcore_t5`` name BERT and T5 too.  Refused by what they are."""


def other_model(data: dict, model: dict, name: str) -> None:
    """Refuse a NeMo 1.x configuration of a model other than GPT (``OTHER_MODELS``), naming it, before
    any key of its own is refused as unknown (Mamba's, Griffin's and RETRO's say ``mcore_gpt: true``)."""
    stated = data.get("name")
    words = re.findall(r"[a-z0-9]+", stated.lower()) if isinstance(stated, str) else []
    for word in [w for w in words if w in OTHER_MODELS] + [k[len("mcore_"):] for k in ("mcore_bert", "mcore_t5")
                                                            if k in model]:
        raise InputError(f"name {stated!r}: {name} is {GENERATION} of NeMo's {OTHER_MODELS[word]}, which is not "
                         f"read; the reader reads NeMo's GPT (megatron_gpt_pretraining.py, mcore_gpt: true)",
                         "name" if word in words else f"model.mcore_{word}")


def _world(trainer: dict, world: int | None, notes: list) -> int | None:
    """``trainer.devices x trainer.num_nodes`` (Lightning's), replaced by ``world`` (``--devices``)."""
    devices, nodes = trainer.get("devices", 1), trainer.get("num_nodes", 1)
    if devices in (-1, "auto", None) and world is None:
        raise InputError(f"trainer.devices {devices!r}: every visible device, which the file does not count; give "
                         f"--devices", "--devices")
    if world is not None:
        if devices not in (-1, "auto", None):
            stated = _integer(devices, "trainer.devices") * _integer(nodes, "trainer.num_nodes")
            if stated != world:
                notes.append(f"--devices {world} replaces trainer.devices x trainer.num_nodes = {stated}")
        return world
    return _integer(devices, "trainer.devices") * _integer(nodes, "trainer.num_nodes")


def nemo1_options(data: dict, name: str, vocab: int | None, notes: list) -> list:
    """Megatron-LM's options for the ``model:`` and ``trainer:`` of a NeMo 1.x configuration
    (``OPTIONS`` in the module's table), every key checked."""
    for key in data:
        if key not in TOP:
            raise InputError(f"{key}: a NeMo 1.x section this reader does not read (it may change the cost)", key)
    trainer = _check(data.get("trainer"), TRAINER_NO_COST, "trainer")
    model = data.get("model")
    if not model or not isinstance(model, dict):
        raise InputError(f"{name}: {GENERATION} without a model: mapping", "model")

    def get(key, default=None):
        return _resolve(model.get(key, default), f"model.{key}", model, data)
    other_model(data, model, name)
    if not _switch(get("mcore_gpt", False), "model.mcore_gpt"):
        raise InputError(f"model.mcore_gpt {get('mcore_gpt', False)!r}: {name} is {GENERATION} of NeMo's legacy (Apex) "
                         f"GPT model, which is not read; the reader reads Megatron-Core's (mcore_gpt: true)",
                         "model.mcore_gpt")
    _check(model, READ | NO_COST | set(INERT), "model")
    for key, (inert, why) in INERT.items():
        value = get(key, inert)
        if value != inert:
            raise InputError(f"model.{key} = {value!r}: {why}", f"model.{key}")
    accumulate = trainer.get("accumulate_grad_batches", 1)
    if accumulate != 1:
        raise InputError(f"trainer.accumulate_grad_batches {accumulate!r}: NeMo accumulates micro-batches itself "
                         f"(global_batch_size); it must be 1", "trainer.accumulate_grad_batches")
    if trainer.get("accelerator", "gpu") not in ("gpu", "auto"):
        raise InputError(f"trainer.accelerator {trainer['accelerator']!r}: the reader reads gpu", "trainer.accelerator")
    precision = trainer.get("precision", 16)
    if not _among(precision, PRECISIONS):
        raise InputError(f"trainer.precision {precision!r}: the reader reads 32, 16, bf16 (and their -mixed, -true "
                         f"names)", "trainer.precision")
    switch, o2 = PRECISIONS[precision], _switch(get("megatron_amp_O2", False), "model.megatron_amp_O2")
    if switch is not None and o2 is not True:
        raise InputError(f"trainer.precision {precision!r} without model.megatron_amp_O2: NeMo keeps fp32 weights and "
                         f"runs the forward under autocast (O1), which the reader does not model; set "
                         f"megatron_amp_O2: true (Megatron's 16-bit weights with fp32 main weights)",
                         "model.megatron_amp_O2")
    words = [] if switch is None else [switch]
    for key in ("num_layers", "hidden_size", "num_attention_heads", "micro_batch_size", "global_batch_size"):
        if get(key) is None:
            raise InputError(f"model.{key} is not given (NeMo requires it)", f"model.{key}")
    e, h = (_integer(get(k), f"model.{k}") for k in ("hidden_size", "num_attention_heads"))
    length = _integer(get("encoder_seq_length", 512), "model.encoder_seq_length")
    data_section = _check(model.get("data"), DATA_NO_COST, "model.data")
    seq = _integer(_resolve(data_section.get("seq_length", length), "model.data.seq_length", data_section, data),
                   "model.data.seq_length")
    numbers = {"num-layers": get("num_layers"), "hidden-size": e, "num-attention-heads": h,
               "ffn-hidden-size": get("ffn_hidden_size") if get("ffn_hidden_size") is not None else 4 * e,
               "max-position-embeddings": length, "seq-length": seq,
               "micro-batch-size": get("micro_batch_size"), "global-batch-size": get("global_batch_size"),
               "tensor-model-parallel-size": get("tensor_model_parallel_size", 1),
               "pipeline-model-parallel-size": get("pipeline_model_parallel_size", 1),
               "context-parallel-size": get("context_parallel_size", 1),
               "make-vocab-size-divisible-by": get("make_vocab_size_divisible_by", 128)}
    for option, value in numbers.items():
        key = {"ffn-hidden-size": "ffn_hidden_size", "max-position-embeddings": "encoder_seq_length",
               "seq-length": "data.seq_length"}.get(option, option.replace("-", "_"))
        words += [f"--{option}", str(_integer(value, f"model.{key}"))]
    virtual = get("virtual_pipeline_model_parallel_size")
    if virtual is not None and o2 is not True:
        raise InputError("model.virtual_pipeline_model_parallel_size without model.megatron_amp_O2: NeMo refuses it "
                         "(MegatronGPTModel: \"only supported when using megatron_amp_O2\")",
                         "model.virtual_pipeline_model_parallel_size")
    if virtual is not None and _integer(virtual, "model.virtual_pipeline_model_parallel_size") > 1:
        words += ["--num-virtual-stages-per-pipeline-rank", str(virtual)]
    groups = get("num_query_groups")
    if groups is not None and _integer(groups, "model.num_query_groups") != h:
        words += ["--group-query-attention", "--num-query-groups", str(groups)]
    if get("kv_channels") is not None:
        words += ["--kv-channels", str(_integer(get("kv_channels"), "model.kv_channels"))]
    for key, default in (("hidden_dropout", 0.1), ("attention_dropout", 0.1)):
        value = get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise InputError(f"model.{key} must be a probability below 1, got {value!r}", f"model.{key}")
        words += [f"--{key.replace('_', '-')}", str(value)]
    norm = get("normalization", "layernorm")
    if norm not in ("layernorm", "LayerNorm", "rmsnorm", "RMSNorm"):
        raise InputError(f"model.normalization {norm!r}: the reader reads layernorm and rmsnorm",
                         "model.normalization")
    words += ["--normalization", "RMSNorm" if norm.lower() == "rmsnorm" else "LayerNorm"]
    if not _switch(get("bias", True), "model.bias"):
        words.append("--disable-bias-linear")
    if _switch(get("qkv_bias", False), "model.qkv_bias"):      # build_transformer_config: add_qkv_bias
        words.append("--add-qkv-bias")
    activation = get("activation", "gelu")
    if not _among(activation, ACTIVATIONS):
        raise InputError(f"model.activation {activation!r}: the reader reads {', '.join(ACTIVATIONS)}",
                         "model.activation")
    words += ACTIVATIONS[activation]
    positions = get("position_embedding_type", "learned_absolute")
    if positions not in ("learned_absolute", "rope"):
        raise InputError(f"model.position_embedding_type {positions!r}: the reader reads learned_absolute and rope",
                         "model.position_embedding_type")
    words += ["--position-embedding-type", positions]
    if positions == "rope":
        words += ["--rotary-percent", str(get("rotary_percentage", 1.0))]
    if not _switch(get("share_embeddings_and_output_weights", True), "model.share_embeddings_and_output_weights"):
        words.append("--untie-embeddings-and-output-weights")
    if _switch(get("sequence_parallel", False), "model.sequence_parallel"):
        words.append("--sequence-parallel")
    granularity = get("activations_checkpoint_granularity")
    if granularity is not None:
        words += ["--recompute-granularity", str(granularity)]
        if get("activations_checkpoint_method") is not None:
            words += ["--recompute-method", str(get("activations_checkpoint_method"))]
        if get("activations_checkpoint_num_layers") is not None:
            words += ["--recompute-num-layers", str(get("activations_checkpoint_num_layers"))]
    optim = _check(model.get("optim"), OPTIM_NO_COST, "model.optim")
    kind = optim.get("name", "fused_adam")
    if not _among(kind, OPTIMIZERS):
        raise InputError(f"model.optim.name {kind!r}: the reader reads {', '.join(OPTIMIZERS)}", "model.optim.name")
    words += OPTIMIZERS[kind]
    if kind == "distributed_fused_adam":
        notes.append("model.optim.name distributed_fused_adam: Apex's distributed Adam shards the optimizer state "
                     "over the data-parallel ranks, counted as Megatron's distributed optimizer")
        for key, (default, option) in DISTRIBUTED_OVERLAPS.items():
            value = optim.get(key, default)
            if not isinstance(value, bool):
                raise InputError(f"model.optim.{key} must be true or false, got {value!r}", f"model.optim.{key}")
            words += [option] if value else []
    else:
        notes += [f"model.optim.{key}: Apex's distributed Adam's; {kind} ignores it" for key in DISTRIBUTED_OVERLAPS
                  if key in optim]
    tokenizer = _check(model.get("tokenizer"), TOKENIZER_KEYS, "model.tokenizer")
    override = get("override_vocab_size")
    if override is None:
        words += _tokenizer(tokenizer, vocab)
    else:       # MegatronGPTModel.model_provider_func: vocab_size=cfg.get('override_vocab_size', padded_vocab_size)
        words += ["--tokenizer-type", "NeMoTokenizer", "--padded-vocab-size",
                  str(_integer(override, "model.override_vocab_size"))]
        notes.append(f"model.override_vocab_size {override}: the model's vocabulary as NeMo builds it (not padded, "
                     f"the tokenizer's size unused)" + (f"; --vocab-size {vocab} changes nothing" if vocab else ""))
    return words + _graph_words(get)


def _graph_words(get) -> list:
    """``model.enable_cuda_graph`` as the option it stands for: NeMo 1.x's ``MegatronGPTModel.
    build_transformer_config`` copies it onto Megatron-Core's ``TransformerConfig`` (its deprecated
    switch for the local graph of each whole layer, ``--enable-cuda-graph``), asserting first that
    ``use_te_rng_tracker`` is on; the RNG tracker itself changes no count."""
    tracker = _switch(get("use_te_rng_tracker", False), "model.use_te_rng_tracker")
    if not _switch(get("enable_cuda_graph", False), "model.enable_cuda_graph"):
        return []
    if not tracker:
        raise InputError("model.enable_cuda_graph without model.use_te_rng_tracker: NeMo asserts Transformer "
                         "Engine's RNG tracker is on for CUDA graphs (set use_te_rng_tracker: true)",
                         "model.use_te_rng_tracker")
    return ["--enable-cuda-graph"]


def _tokenizer(tokenizer: dict, vocab: int | None) -> list:
    """The vocabulary: Megatron's GPT-2 BPE by name (Megatron-LM's rule: GPT-2's 50,257 tokens), any
    other from ``--vocab-size`` (a SentencePiece or Hugging Face tokenizer's file)."""
    library, kind = tokenizer.get("library", "megatron"), tokenizer.get("type")
    if library == "megatron" and kind == "GPT2BPETokenizer":
        return ["--tokenizer-type", "GPT2BPETokenizer"]
    if vocab is None:
        raise InputError(f"model.tokenizer (library {library!r}, model {tokenizer.get('model')!r}): the vocabulary "
                         f"comes from the tokenizer's file, which the reader does not open; give --vocab-size (its "
                         f"size before NeMo pads it)", "--vocab-size")
    return ["--tokenizer-type", "NeMoTokenizer"]


def nemo1_setup(data: dict, name: str, world: int | None = None, vocab: int | None = None) -> Setup:
    """The model, values and policy of a NeMo 1.x configuration (``data``: the loaded YAML), read as
    the Megatron-LM options it stands for; ``world`` (``--devices``) replaces the trainer's devices x
    nodes, ``vocab`` (``--vocab-size``) gives the tokenizer file's vocabulary."""
    instance(data, dict, "data", " (the configuration's YAML, loaded: a mapping)")
    notes = [f"{name}: {GENERATION}, read as the Megatron-LM options of Megatron-Core's GPT that NeMo builds"]
    words = nemo1_options(data, name, vocab, notes)
    world = _world(_check(data.get("trainer"), TRAINER_NO_COST, "trainer"), world, notes)
    overridden = "--padded-vocab-size" in words          # model.override_vocab_size decides the vocabulary
    found = megatron_setup(Launch(launcher=[], entry="pretrain_gpt.py", program=words), name, world=world,
                           vocab=None if overridden else vocab)
    found.notes[:0] = notes
    return found
