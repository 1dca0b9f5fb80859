"""The keys of a Megatron-Bridge ``ConfigContainer`` YAML (``models.megatron_bridge``): which are
read (``READ``), which act only away from one value (``INERT``: refused, naming the key and why,
at any other), and which change no count (``NO_COST``, accepted); any other key is refused.

``Container`` holds the file's sections, checks every key and reads typed values with
Megatron-Bridge's dataclass defaults (``ConfigContainer`` and Megatron-Core's ``TransformerConfig``).
"""

from __future__ import annotations

from fractions import Fraction

from symbolic_cost.checks import InputError, within_count

FP4_PARAMS = "FP4 primary weights are not modelled (nvfp4 keeps the 16-bit weights and caches FP4 copies)"
MOE = "mixture of experts is not read from a Megatron-Bridge file (give it with --megatron-args or --hf-config)"
INERT = {
    "model": {
        "cpu_offloading": (False, "activation and weight offload to the host is not modelled"),
        "teacher": (None, "knowledge distillation (a teacher model's forward beside the student's) is not modelled"),
        "kd_config": (None, "knowledge distillation (a teacher model's forward beside the student's) is not modelled"),
        "distribute_saved_activations": (None, "checkpoints split over the tensor ranks are not modelled"),
        "fp32_residual_connection": (False, "an fp32 residual stream is not modelled"),
        "fp4_param": (False, FP4_PARAMS),
        "mtp_enabled": (False, "multi-token prediction is not read from a Megatron-Bridge file"),
        "mtp_num_layers": (None, "multi-token prediction is not read from a Megatron-Bridge file"),
        "multi_latent_attention": (False, "latent attention is not read from a Megatron-Bridge file"),
        "num_moe_experts": (None, MOE), "expert_model_parallel_size": (1, MOE),
        "heterogeneous_block_specs": (False, "layers of different shapes are not modelled"),
        "is_hybrid_model": (False, "Mamba layers are not modelled"),
        "window_size": (None, "sliding-window attention is not read from a Megatron-Bridge file"),
        "hierarchical_context_parallel_sizes": (None, "hierarchical context parallelism (a2a+p2p) is not modelled"),
        "softmax_type": ("vanilla", "attention sinks are not modelled"),
        "num_microbatches_with_partial_activation_checkpoints": (None, "recomputation in some micro-batches only "
                                                                  "is not modelled"),
        "delay_wgrad_compute": (False, "the weight gradients' deferral (zero-bubble split) is not modelled"),
        "use_kitchen": (False, "kitchen quantisation is not modelled"),
        "quant_recipe": (None, "quantised layers are not modelled"),
        "fine_grained_activation_offloading": (False, "activation offload to the host is not modelled"),
        "offload_modules": (None, "activation offload to the host is not modelled"),
        "freeze_language_model": (False, "a frozen language model (no gradients) is not read"),
        "freeze_vision_model": (False, "vision towers are not modelled"),
        "freeze_vision_projection": (False, "vision towers are not modelled"),
        "freeze_sound_encoder": (False, "sound encoders are not modelled"),
        "freeze_sound_projection": (False, "sound encoders are not modelled"),
        "vit_gradient_checkpointing": (False, "vision towers are not modelled"),
        "freeze_audio_model": (False, "audio towers are not modelled"),
        "freeze_mtp_model": (False, "frozen multi-token-prediction layers are not read"),
        "keep_mtp_spec_in_bf16": (False, "multi-token-prediction layers kept in bf16 under FP8 are not read"),
    },
    "ddp": {
        "use_custom_fsdp": (False, "the custom FSDP of older Megatron-Core is not read (use_megatron_fsdp is)"),
        "use_torch_fsdp2": (False, "PyTorch FSDP2 is not read from a Megatron-Bridge file"),
        "num_distributed_optimizer_instances": (1, "several distributed-optimizer instances are not modelled"),
        "fp4_param_gather": (False, "the parameters' all-gather in FP4 goes with FP4 primary weights (mixed_precision."
                             "fp4_param_gather sets it): " + FP4_PARAMS),
    },
    "dist": {"use_torch_fsdp2": (False, "PyTorch FSDP2 is not read from a Megatron-Bridge file")},
    "optimizer": {"optimizer_cpu_offload": (False, "the optimizer's host offload is not read from a Megatron-Bridge "
                                             "file")},
    "train": {"rampup_batch_size": (None, "a batch-size ramp changes the batch during the run")},
    "mixed_precision": {"fp4_param": (False, FP4_PARAMS)},
}
"""Keys with no effect at one value (the dump's default), and why another value is refused."""

READ = {
    "model": {
        "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
        "activation_func", "gated_linear_unit", "normalization", "add_bias_linear", "add_qkv_bias",
        "share_embeddings_and_output_weights", "position_embedding_type", "rotary_percent", "vocab_size",
        "make_vocab_size_divisible_by", "should_pad_vocab", "seq_length", "hidden_dropout", "attention_dropout",
        "qk_layernorm", "tensor_model_parallel_size", "pipeline_model_parallel_size",
        "virtual_pipeline_model_parallel_size", "context_parallel_size", "cp_comm_type", "sequence_parallel",
        "pipeline_model_parallel_layout",
        "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage", "recompute_granularity",
        "recompute_method", "recompute_num_layers", "recompute_modules", "moe_layer_recompute", "attention_backend",
        "tp_comm_overlap",
        "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
        "overlap_moe_expert_parallel_comm", "moe_shared_expert_overlap", "overlap_p2p_comm",
        "fp4", "fp4_recipe", "cuda_graph_impl", "cuda_graph_scope", "cuda_graph_modules", "enable_cuda_graph",
        "external_cuda_graph"},
    "train": {"micro_batch_size", "global_batch_size"},
    "dataset": {"sequence_length", "seq_length"},
    "ddp": {"use_distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather", "grad_reduce_in_fp32",
            "use_megatron_fsdp", "data_parallel_sharding_strategy"},
    "optimizer": {"optimizer", "use_distributed_optimizer", "use_precision_aware_optimizer", "main_params_dtype",
                  "exp_avg_dtype", "exp_avg_sq_dtype", "store_param_remainders", "main_grads_dtype"},
    "mixed_precision": {"bf16", "fp16", "fp8", "fp8_recipe", "fp8_param", "fp8_param_gather", "fp4", "fp4_recipe",
                        "fp8_amax_history_len", "first_last_layers_bf16", "num_layers_at_start_in_bf16",
                        "num_layers_at_end_in_bf16"},
    "comm_overlap": {"tp_comm_overlap", "overlap_grad_reduce", "overlap_param_gather",
                     "overlap_moe_expert_parallel_comm", "overlap_p2p_comm"},
}
"""Keys ``megatron_bridge_setup`` reads (the table of ``models.megatron_bridge``)."""

NO_COST = {
    "": {"_target_", "checkpoint", "logger", "rng", "scheduler", "rerun_state_machine", "profiling", "ft", "validation",
         "straggler", "nvrx_straggler", "inprocess_restart", "tokenizer", "model", "train", "dataset", "ddp",
         "dist", "optimizer", "mixed_precision", "comm_overlap", "peft"},
    "train": "*", "dataset": "*", "dist": "*", "mixed_precision": "*",
    "ddp": {"_target_", "align_param_gather", "average_in_collective", "bucket_size", "check_for_large_grads",
            "check_for_nan_in_grad", "disable_symmetric_registration", "fsdp_double_buffer",
            "gradient_reduce_div_fusion", "keep_fp8_transpose_cache", "nccl_ub", "outer_dp_sharding_strategy",
            "pad_buckets_for_high_nccl_busbw", "preserve_fp32_weights", "reuse_grad_buf_for_mxfp8_param_ag",
            "suggested_communication_unit_size", "delay_wgrad_compute", "fp8_param_gather", "fsdp_manual_registration",
            "megatron_fsdp_max_pool_double_buffer"},
    "optimizer": {"_target_", "adam_beta1", "adam_beta2", "adam_eps", "barrier_with_L1_time", "bf16", "fp16",
                  "clip_grad", "config_logger_dir", "decoupled_lr", "decoupled_min_lr", "decoupled_weight_decay",
                  "fp8_recipe", "hysteresis", "initial_loss_scale",
                  "log_num_zeros_in_grad", "loss_scale", "loss_scale_window", "lr",
                  "min_loss_scale", "min_lr", "optimizer_offload_fraction",
                  "overlap_cpu_optimizer_d2h_h2d", "overlap_param_gather", "overlap_param_gather_with_optimizer_step",
                  "params_dtype", "pin_cpu_grads", "pin_cpu_params", "reuse_grad_buf_for_mxfp8_param_ag",
                  "sgd_momentum", "timers", "use_torch_optimizer_for_cpu_offload",
                  "weight_decay", "apply_wd_to_qk_layernorm"},
    "comm_overlap": {"_target_", "tp_comm_overlap_cfg", "tp_comm_bootstrap_backend",
                     "batch_p2p_comm", "overlap_param_gather_with_optimizer_step", "align_param_gather",
                     "bucket_size", "defer_embedding_wgrad_compute", "wgrad_deferral_limit", "data_parallel_size",
                     "delay_wgrad_compute"},
    "model": {
        "_target_", "activation_func_clamp_value", "activation_func_fp8_input_store", "apply_query_key_layer_scaling",
        "apply_residual_connection_post_layernorm", "apply_rope_fusion", "async_tensor_model_parallel_allreduce",
        "attention_softmax_in_fp32", "autocast_dtype", "barrier_with_L1_time", "batch_p2p_comm", "batch_p2p_sync",
        "bf16", "fp16", "fp8", "fp8_amax_compute_algo", "fp8_amax_history_len", "fp8_dot_product_attention",
        "fp8_interval", "fp8_margin", "fp8_multi_head_attention", "fp8_param", "fp8_recipe", "fp8_wgrad",
        "num_layers_at_end_in_bf16", "num_layers_at_start_in_bf16", "first_last_layers_bf16",
        "bias_activation_fusion", "bias_dropout_fusion", "calculate_per_token_loss",
        "clone_scatter_output_in_embedding",
        "config_logger_dir", "cpu_offloading_activations", "cpu_offloading_double_buffering",
        "cpu_offloading_num_layers", "cpu_offloading_weights", "cross_entropy_fusion_impl", "cross_entropy_loss_fusion",
        "cuda_graph_retain_backward_graph", "cuda_graph_use_single_mempool",
        "cuda_graph_warmup_steps", "deallocate_pipeline_outputs", "defer_embedding_wgrad_compute",
        "deterministic_mode", "disable_bf16_reduced_precision_matmul", "disable_parameter_transpose_cache",
        "embedding_init_method", "embedding_init_method_std", "enable_autocast", "expert_tensor_parallel_size",
        "finalize_model_grads_func", "flash_decode", "fp16_lm_cross_entropy", "fused_single_qkv_rope",
        "generation_config", "glu_linear_offset", "grad_scale_func", "grad_sync_func", "gradient_accumulation_fusion",
        "hetereogenous_dist_checkpoint", "high_freq_factor", "low_freq_factor", "old_context_len", "scale_factor",
        "inference_rng_tracker", "inference_sampling_seed", "init_method", "init_method_std",
        "init_model_with_meta_device", "layernorm_epsilon", "layernorm_zero_centered_gamma", "mamba_head_dim",
        "mamba_num_groups", "mamba_num_heads", "mamba_state_dim", "use_mamba_mem_eff_path", "masked_softmax_fusion",
        "memory_efficient_layer_norm", "microbatch_group_size_per_vp_stage", "mlp_chunks_for_prefill",
        "mrope_section", "mtp_loss_scaling_factor", "no_rope_freq", "no_sync_func", "output_layer_init_method",
        "overlap_p2p_comm_warmup_flush", "parallel_output",
        "param_sync_func", "params_dtype", "perform_initialization", "persist_layer_norm", "pipeline_dtype",
        "pipeline_model_parallel_comm_backend", "restore_modelopt_state", "rotary_base", "rotary_interleaved",
        "scatter_embedding_sequence_parallel", "seq_len_interpolation_factor", "softmax_scale", "symmetric_ar_type",
        "test_mode", "timers", "tp_comm_atomic_ag", "tp_comm_atomic_rs", "tp_comm_bootstrap_backend",
        "tp_comm_bulk_dgrad", "tp_comm_bulk_wgrad", "tp_comm_overlap_ag", "tp_comm_overlap_cfg",
        "tp_comm_overlap_disable_fc1", "tp_comm_overlap_disable_qkv", "tp_comm_overlap_rs", "tp_comm_overlap_rs_dgrad",
        "tp_comm_split_ag", "tp_comm_split_rs", "tp_only_amax_red", "transformer_impl", "transformer_layer_spec",
        "use_cpu_initialization", "use_fused_weighted_squared_relu", "use_ring_exchange_p2p", "use_te_activation_func",
        "use_te_rng_tracker", "use_transformer_engine_full_layer_spec", "use_transformer_engine_op_fuser",
        "variable_seq_lengths", "wgrad_deferral_limit", "window_attn_skip_freq",
        "rotary_scaling_factor", "yarn_original_max_position_embeddings",
        "yarn_beta_fast", "yarn_beta_slow", "yarn_mscale", "yarn_mscale_all_dim", "yarn_correction_range_round_to_int",
        "apply_dsa_kernel_fusion", "dsa_kernel_backend", "use_fused_mhc", "fp8_output_proj",
        "high_priority_a2a_comm_stream", "min_offloaded_tensor_size", "fine_grained_offloading_max_inflight_offloads",
        "overlap_dispatch_backward_with_experts_wgrad", "dsa_indexer_loss_coeff", "dsa_indexer_use_sparse_loss",
        "qk_clip", "rotary_base_per_layer", "vision_cuda_graph_impl", "vision_cuda_graph_scope",
        "max_vision_cuda_graph_seq_length", "mtp_eval_in_bf16"},
}
"""Keys that change no count (``"*"``: every key of the section but those ``READ`` and ``INERT``):
logging, checkpoints, data loading, initialisation, learning rate and loss scaling, kernels'
fusions, rotary scaling, CUDA-graph and user-buffer settings, the model's own precision flags
(``mixed_precision`` writes them), and the ``mamba_*`` settings while no Mamba layer exists
(``is_hybrid_model`` is ``INERT``).  The ``moe_*`` settings are accepted while no expert layer
exists (``num_moe_experts`` is ``INERT``); with experts each is read (``MOE_READ``), compared with
the model (``MOE_MODEL``), noted (``MOE_NOTED``) or of no cost (``MOE_NO_COST``) (``_known``)."""

MOE_READ = {"moe_token_dispatcher_type", "moe_flex_dispatcher_backend", "moe_expert_capacity_factor"}
"""``model.moe_*`` keys ``models.megatron_bridge`` reads for a model with experts: the dispatcher
(``dispatcher``) and the capacity factor (``Training.capacity_factor``)."""

MOE_MODEL = {"num_moe_experts": "experts", "moe_router_topk": "top_k", "moe_ffn_hidden_size": "expert_f",
             "moe_shared_expert_intermediate_size": "shared_f", "moe_layer_freq": "layers"}
"""``model.moe_*`` keys that restate the model (its ``MoE``): compared with the model the recipe
builds, refused by name where they disagree (``models.megatron_bridge.check_experts``)."""

MOE_NOTED = {"moe_router_force_load_balancing", "moe_router_padding_for_fp8", "moe_router_padding_for_quantization",
             "moe_expert_rank_capacity_factor", "moe_pad_expert_input_to_capacity", "moe_paged_stash",
             "moe_paged_stash_buffer_size_factor_cpu"}
"""``model.moe_*`` keys accepted with a note saying how they are counted, or refused at a value not
counted (``models.megatron_bridge.expert_notes``)."""

MOE_NO_COST = {
    "moe_grouped_gemm", "moe_permute_fusion", "moe_router_fusion", "moe_permute_fusion_into_hybridep",
    "moe_aux_loss_coeff", "moe_z_loss_coeff", "moe_router_load_balancing_type", "moe_router_dtype",
    "moe_router_bias_update_rate", "moe_router_enable_expert_bias", "moe_per_layer_logging", "moe_token_drop_policy",
    "moe_hybridep_num_sms", "moe_hybridep_num_sms_preprocessing", "moe_hybridep_num_blocks_permute",
    "moe_hybridep_num_blocks_unpermute", "moe_deepep_num_sms", "moe_flex_dispatcher_num_sms",
    "moe_hybridep_pad_uneven_dispatch_inputs", "moe_mlp_glu_interleave_size", "moe_pad_experts_for_cuda_graph_inference",
    "moe_paged_stash_page_size", "moe_paged_stash_buffer_size_factor_cuda", "moe_a2a_overlap"}
"""``model.moe_*`` keys that change no count of a model with experts: kernels' fusions and SM
counts, the auxiliary losses and their coefficients (a reduction over the router's scores), the
router's dtype, logging, the weights' interleaved layout, inference-only padding, the stash's page
size and device headroom, and ``moe_a2a_overlap``, which no Megatron-Bridge or Megatron-Core class
reads (the performance recipes set it beside ``comm_overlap.overlap_moe_expert_parallel_comm``, the
switch ``overlap`` reads).  Any other ``moe_*`` key of a model with experts is refused."""

SECTIONS_OF_DICTS = ("model", "train", "dataset", "ddp", "dist", "optimizer", "mixed_precision", "comm_overlap")


def _known(section: str, key: str, experts: bool = False) -> bool:
    """Whether ``section.key`` is read, inert or of no cost; ``model.moe_*`` keys act only with
    experts: any is accepted without them, only those classified above with them."""
    allowed = NO_COST.get(section, "*")
    if section == "model" and key.startswith("moe_") and key not in READ["model"]:
        return not experts or key in MOE_READ | set(MOE_MODEL) | MOE_NOTED | MOE_NO_COST
    return allowed == "*" or key in allowed or key in READ.get(section, ()) or key in INERT.get(section, {})


class Container:
    """The file's sections: every key checked against ``READ``, ``INERT`` and ``NO_COST``.

    >>> Container({"model": {"num_layers": 2}}, "x").get("model", "num_layers", None)
    2
    >>> Container({"model": {"cpu_offloading": True}}, "x")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: model.cpu_offloading = True: activation and weight offload to the host is not modelled
    """

    def __init__(self, data: dict, name: str, experts: bool = False):
        """``experts``: the model has experts (it comes from elsewhere: a recipe's Hugging Face
        model), so the experts' parallel sizes are read rather than refused."""
        self.data, self.name = data, name
        if "trainer" in data and ("exp_manager" in data or "model" in data and "train" not in data):
            raise InputError(f"{name}: a NeMo 1.x configuration (its trainer and exp_manager sections, NeMo's "
                             f"megatron_gpt_config.yaml of 2023-2024), not an override of a Megatron-Bridge (NeMo 2) "
                             f"recipe; give it alone with --nemo-recipe", "--nemo-recipe")
        for key in data:
            if not _known("", key):
                raise InputError(f"{key}: a Megatron-Bridge section this reader does not read (it may change the "
                                 f"cost); remove it", key)
        for section in SECTIONS_OF_DICTS:
            table = data.get(section)
            if table is None or isinstance(table, str) and section == "mixed_precision":
                continue
            if not isinstance(table, dict):
                raise InputError(f"{section} must be a mapping, got {table!r}", section)
            for key in table:
                if not _known(section, key, experts):
                    raise InputError(f"{section}.{key}: a Megatron-Bridge key this reader does not read (it may "
                                     f"change the cost); remove it or give the layout with --set", f"{section}.{key}")
        for section, keys in INERT.items():
            for key, (inert, why) in keys.items():
                if experts and why == MOE:
                    continue
                table = data if section == "" else data.get(section)
                value = table.get(key, inert) if isinstance(table, dict) else inert   # a recipe's name: its defaults
                if value != inert and (value or inert):     # [] or None where the default is None: off too
                    where = f"{section}.{key}" if section else key
                    raise InputError(f"{where} = {value!r}: {why}", where)

    def section(self, name: str) -> dict:
        return self.data.get(name) or {}

    def get(self, section: str, key: str, default, kind=int, minimum=1):
        """``section.key`` typed (``kind``: int, at least ``minimum``, bool, str), ``default`` when
        absent or null."""
        value = self.section(section).get(key)
        if value is None:
            return default
        wrong = isinstance(value, bool) != (kind is bool) or not isinstance(value, kind)
        if wrong:
            raise InputError(f"{section}.{key} must be {kind.__name__}, got {value!r}", f"{section}.{key}")
        if kind is int and value < minimum:
            raise InputError(f"{section}.{key} must be at least {minimum}, got {value}", f"{section}.{key}")
        if kind is int:                 # named here, not as the symbol it becomes (e, f, l)
            within_count(value, f"{section}.{key}")
        return value

    def fraction(self, section: str, key: str, default: str) -> Fraction:
        """``section.key`` as an exact number (a probability, a percentage), ``default`` when absent."""
        value = self.section(section).get(key)
        try:
            return Fraction(str(default if value is None else value))
        except (ValueError, ZeroDivisionError):
            raise InputError(f"{section}.{key} must be a number, got {value!r}", f"{section}.{key}") from None

    def probability(self, section: str, key: str, default: str) -> Fraction:
        """``section.key`` as ``fraction`` reads it, from 0 to 1 (a dropout's probability, which
        PyTorch refuses outside them; a share of the head's channels), as ``--megatron-args`` reads
        the same option."""
        value = self.fraction(section, key, default)
        if not 0 <= value <= 1:
            raise InputError(f"{section}.{key} must be from 0 to 1, got {self.section(section).get(key)!r}",
                             f"{section}.{key}")
        return value

    def target(self, section: str, key: str) -> str | None:
        """The ``_target_`` of a serialised object (``activation_func``), or its name written alone;
        ``None`` when absent."""
        value = self.section(section).get(key)
        return _name(value.get("_target_") if isinstance(value, dict) else value, f"{section}.{key}")

    def argument(self, section: str, key: str) -> int | str | None:
        """The first of ``_args_`` of a serialised enum (``attention_backend``: ``AttnBackend(5)``),
        or the value written alone; ``None`` when absent or empty (``null``, ``0``, ``{}``)."""
        value = self.section(section).get(key)
        if not value:
            return None
        if isinstance(value, dict):
            arguments = value.get("_args_")
            if not isinstance(arguments, list) or not arguments or arguments[0] is None:
                raise InputError(f"{section}.{key} must hold its member in _args_ (a list of one), got {value!r}",
                                 f"{section}.{key}")
            value = arguments[0]
        return _name(value, f"{section}.{key}")


def _name(value, where: str) -> int | str | None:
    """A value that names something in a file (a function's path, an enum's member): text or an
    integer; a list or a mapping is refused naming ``where``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, str))):
        raise InputError(f"{where} must name one (text or an integer), got {value!r}", where)
    return value
