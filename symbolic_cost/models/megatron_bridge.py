"""A NeMo Framework / Megatron-Bridge training configuration (``ConfigContainer.to_yaml()``, the
``Task Configuration`` a run prints, or a recipe's fields written in its layout) as an
``Architecture`` and a ``Training``.

``megatron_bridge_setup`` reads the YAML (PyYAML: the optional extra ``symbolic_cost[yaml]``) with
the defaults of Megatron-Bridge's dataclasses (``GPTModelProvider``, Megatron-Core's
``TransformerConfig``, ``TrainingConfig``, ``DistributedDataParallelConfig``, ``OptimizerConfig``,
``MixedPrecisionConfig``); the fields are Megatron-LM's options under their dataclass names:

============================================ =====================================================
Megatron-Bridge field (default)              library field
============================================ =====================================================
``model.num_layers``, ``hidden_size``,       ``n_layers``, ``e``, ``h`` (required)
``num_attention_heads``
``model.ffn_hidden_size`` (``4 e``)          ``f``
``model.num_query_groups`` (``h``),          ``kv_heads``, ``head_dim``
``kv_channels`` (``e/h``)
``model.activation_func`` (gelu),            ``mlp``: silu gated is ``swiglu``, gelu gated
``gated_linear_unit`` (false)                ``geglu``, gelu alone ``gelu``
``model.normalization`` (LayerNorm)          ``norm``: ``layer``, RMSNorm ``rms``
``model.add_bias_linear`` (true),            ``bias``, ``qkv_bias``
``add_qkv_bias`` (false)
``model.share_embeddings_and_output_weights`` ``tied``
(true)
``model.position_embedding_type``            ``rotary`` (rope; ``rotary_percent``: ``rotary_dim``),
(learned_absolute)                           learned positions ``model.seq_length``, none
``model.vocab_size``, ``should_pad_vocab``   ``vocab``; padded to ``make_vocab_size_divisible_by x
(false), ``make_vocab_size_divisible_by``    m1`` only with ``should_pad_vocab`` (``vocab_multiple``)
(128)
``model.seq_length`` (1024)                  the model's ``context``
``model.hidden_dropout``,                    ``dropouts``, ``attention_dropout`` when nonzero
``attention_dropout`` (0.1, 0.1)
``model.qk_layernorm`` (false)               ``qk_norm``: ``head``
``model.tensor_model_parallel_size``,        ``m1``; ``s1 = m1`` with ``sequence_parallel`` (off at
``sequence_parallel`` (1, false)             ``m1 = 1``, as Megatron-Core turns it off)
``model.pipeline_model_parallel_size`` (1),  ``p``; ``virtual_stages`` with the ``interleaved``
``virtual_pipeline_model_parallel_size``     schedule above 1 (1F1B otherwise); uneven stages:
(null), ``num_layers_in_first/last_...``     ``first/last_stage_layers``
``model.context_parallel_size`` (1),         ``cp``; ``cp_variant``: p2p ``ring``, all_gather,
``cp_comm_type`` (p2p)                       a2a ``ulysses``
``model.recompute_granularity`` (null),      ``recompute`` none, selective (``core_attn`` only),
``recompute_method``, ``recompute_num_layers`` full (``recompute_method``, ``recompute_layers``)
``model.attention_backend`` (auto)           ``flash``: auto, flash, fused (Transformer Engine's
                                             ``AttnBackend`` 5, 1, 2); unfused, local keep scores
``model.tp_comm_overlap``,                   ``overlap`` tensor
``comm_overlap.tp_comm_overlap`` (false)
``comm_overlap.overlap_p2p_comm`` (with      ``overlap`` pipeline (counts only under the
the section: on under virtual stages),       interleaved schedule)
``model.overlap_p2p_comm`` (false)
``train.micro_batch_size``,                  ``b``; ``micro_batches = global / (b d)``
``global_batch_size`` (required)
``dataset.sequence_length`` (or              ``l`` (the model's ``seq_length`` without a dataset)
``seq_length``)
``ddp.use_distributed_optimizer``,           ``distributed_optimizer``, ``overlap`` grad and param
``overlap_grad_reduce``, ``overlap_param_    (``comm_overlap``'s, when set, win, as Megatron-Bridge
gather`` (false)                             applies them)
``optimizer.optimizer`` (adam)               ``optimizer``: adam, sgd
``optimizer.use_precision_aware_optimizer``  ``optimizer`` by the state's dtypes
(false), ``main_params_dtype``,              (``megatron_precision.precision_aware_adam``:
``exp_avg_dtype``, ``exp_avg_sq_dtype``      ``adam-16bit-master``, ``adam-bf16-moments``, ...);
(fp32), ``store_param_remainders`` (true)    without it each dtype fp32 (else refused)
``mixed_precision`` (a config or a recipe    ``precision`` bf16, fp16 (fp32 without either);
name: bf16_mixed, fp16_mixed), its ``bf16``, ``fp8``: the ``fp8_recipe`` (delayed, tensorwise,
``fp16``, ``fp8`` (hybrid, e4m3),            mxfp8; with ``fp8_param_gather``: ``fp8-params``,
``fp8_recipe`` (tensorwise),                 ``tensorwise-params``, ``mxfp8-params``), or ``nvfp4`` (``fp4: e2m1``,
``fp8_param_gather``, ``fp4``, ``fp4_recipe`` ``fp4_recipe: nvfp4``); ``first_layers_16bit``,
(nvfp4), ``first_last_layers_bf16`` with     ``last_layers_16bit`` (not under delayed scaling;
``num_layers_at_start/end_in_bf16`` (0)      ``models.megatron_precision``)
``model.moe_token_dispatcher_type``          with experts: ``dispatcher`` flex (deepep, hybridep;
(alltoall), ``moe_flex_dispatcher_backend``  no backend: alltoall), alltoall; ``capacity_factor``;
(deepep), ``moe_expert_capacity_factor``     the keys restating the model compared with it
                                             (``megatron_bridge_keys.MOE_MODEL``)
``model.cuda_graph_impl`` (none),            ``cuda_graphs`` (``blocks.graphs.graph_scopes``): the
``cuda_graph_scope`` (or ``cuda_graph_       scopes given, the whole layer without one, the whole
modules``), ``enable_cuda_graph``,           step for full_iteration (local: the whole step only,
``external_cuda_graph`` (false)              as Megatron-Bridge); the switches: local and
                                             transformer_engine of the whole layer
world size (``--devices``)                   ``d = world / (m1 p cp)``, Megatron-LM's rules
============================================ =====================================================

The file does not say how many processes run it (torchrun's); ``--devices`` gives it.  Keys that
change no count are accepted (``megatron_bridge_keys.NO_COST``); those that act only away from one
value (CPU offload, experts, multi-token prediction, latent attention, FP4 primary weights:
``fp4_param``, or ``fp4_param_gather``, which sets it, ``megatron_precision.fp4_primary_weights``,
Megatron FSDP, a batch ramp, PEFT, ...) are refused at any other (``INERT``), and any other key is refused, naming it.
"""

from __future__ import annotations

from fractions import Fraction

from symbolic_cost import symbols as S
from symbolic_cost.blocks.graphs import check_recompute, for_model, graph_scopes, switched_implementation
from symbolic_cost.checks import InputError, file_text, given_counts, instance
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.megatron_args import CP_COMM_TYPES, DISPATCHER_TYPES, SHARDING, Setup, layer_flags
from symbolic_cost.models.megatron_bridge_peft import peft_policy
from symbolic_cost.models.megatron_bridge_keys import MOE_MODEL, Container
from symbolic_cost.models.megatron_precision import fp4_primary_weights, precision
from symbolic_cost.models.training import Overlap
from symbolic_cost.parallel.splits import layout_stages

ACTIVATIONS = {"torch.nn.functional.silu": "silu", "torch.nn.functional.gelu": "gelu",
               "megatron.core.fusions.fused_bias_gelu.bias_gelu_impl": "gelu",
               "megatron.core.activations.fast_gelu": "gelu", "megatron.core.activations.openai_gelu": "gelu",
               "torch.nn.functional.relu": "relu"}
"""``model.activation_func`` (its ``_target_``) as the activation; gated: silu ``swiglu``, gelu
``geglu``, relu ``reglu``."""

GATED = {"silu": "swiglu", "gelu": "geglu", "relu": "reglu"}

ATTENTION_BACKENDS = {1: "flash", 2: "fused", 3: "unfused", 4: "local", 5: "auto"}
"""Megatron-Core's ``AttnBackend`` enumeration, serialised by its value."""


YAML_NODES = 100_000
"""Most nodes a YAML file may hold once its aliases are expanded: a configuration holds hundreds;
a file of a kilobyte whose aliases nest (``a: &a [x, x]``, ``b: &b [*a, *a]``, ...) expands to
billions, and a reader walking it would never end."""


def load_yaml(text: str, name: str, flag: str):
    """The YAML's content (PyYAML's safe loader; the optional extra ``symbolic_cost[yaml]``),
    refused when its aliases expand it past ``YAML_NODES`` nodes (counted on the composed graph,
    each shared node once, before anything is expanded)."""
    file_text(text, flag, name)
    try:
        import yaml
    except ImportError:
        raise InputError(f"{flag} needs PyYAML: pip install 'symbolic_cost[yaml]'", flag) from None
    loader = None
    try:
        loader = yaml.SafeLoader(text)      # refuses characters YAML does not take (a NUL) already
        node = loader.get_single_node()
        if node is None:
            return None
        size = expanded_nodes(node)
        if size > YAML_NODES:
            raise InputError(f"{flag}: {name} expands to {size:,} nodes through its aliases (at most "
                             f"{YAML_NODES:,}): not a configuration", flag)
        twice = repeated_key(node)
        if twice is not None:
            raise InputError(f"{flag}: {name} names {twice!r} twice in one mapping; YAML's loaders keep the last, "
                             f"and which one the file meant is not known", flag)
        return loader.construct_document(node)
    except RecursionError:
        raise InputError(f"{flag}: {name} is nested too deeply to be a configuration", flag) from None
    except yaml.YAMLError as error:
        raise InputError(f"{name}: not a YAML file ({error})", flag) from None
    except InputError:                  # the expansion's own refusal (an InputError is a ValueError too)
        raise
    except ValueError:                  # Python reads no integer of more than 4,300 digits
        raise InputError(f"{flag}: {name} holds a number of more than 4,300 digits, which no configuration "
                         f"needs", flag) from None
    finally:
        if loader is not None:
            loader.dispose()


def expanded_nodes(node) -> int:
    """Nodes of a composed YAML graph as if every alias were expanded: a node counts once for each
    path to it (mapping keys and values, sequence items), each shared node summed once."""
    import yaml
    counted: dict = {}

    def count(item) -> int:
        if id(item) not in counted:
            counted[id(item)] = 1      # a node that holds itself counts once (PyYAML refuses to build it)
            if isinstance(item, yaml.MappingNode):
                children = [part for pair in item.value for part in pair]
            else:
                children = item.value if isinstance(item, yaml.SequenceNode) else []
            counted[id(item)] = 1 + sum(count(child) for child in children)
        return counted[id(item)]
    return count(node)


def repeated_key(node):
    """The first scalar key a mapping of the composed YAML graph names twice (``None``: none), each
    node visited once (aliases share theirs).

    >>> import yaml
    >>> repeated_key(yaml.compose("a: 1\\nb: {c: 2, c: 3}")), repeated_key(yaml.compose("a: 1\\nb: 2"))
    ('c', None)
    """
    import yaml
    seen, todo = set(), [node]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, yaml.MappingNode):
            named = set()             # a set: a hostile mapping may hold tens of thousands of keys
            for key, _ in item.value:
                if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                    if key.value in named:
                        return key.value
                    named.add(key.value)
            todo.extend(part for pair in item.value for part in pair)
        elif isinstance(item, yaml.SequenceNode):
            todo.extend(item.value)
    return None


def load(text: str, name: str) -> dict:
    """The ``ConfigContainer``'s mapping (``Container`` checks its sections, ``check_sizes`` that it
    states the model's)."""
    data = load_yaml(text, name, "--nemo-recipe")
    if not isinstance(data, dict):
        raise InputError(f"{name}: a Megatron-Bridge ConfigContainer YAML is a mapping of sections", "--nemo-recipe")
    return data


def check_sizes(c: Container, name: str) -> None:
    """Refuse a ``ConfigContainer`` without the model's sizes: it overrides a recipe (Megatron-Bridge's
    ``--config-file``), which ``--megatron-bridge-recipe`` names."""
    model = c.section("model")
    if not any(k in model for k in ("num_layers", "hidden_size")):
        raise InputError(f"{name}: a YAML that overrides a recipe (no model sizes: model.num_layers, hidden_size); "
                         f"give the recipe it overrides with --megatron-bridge-recipe NAME beside it", "--nemo-recipe")


def megatron_bridge_setup(text: str, name: str, world: int | None) -> Setup:
    """The model, values and policy of a ``ConfigContainer`` YAML on ``world`` processes."""
    world, = given_counts(world=world)
    c = Container(load(text, name), name)
    check_sizes(c, name)
    if world is None:
        raise InputError("a Megatron-Bridge configuration does not say how many processes run it (torchrun's "
                         "--nproc_per_node x --nnodes); give --devices", "--devices")
    return container_setup(c, architecture(c, name), world)


def container_setup(c: Container, arch: Architecture, world: int, notes: list | None = None,
                    etp_default: int | None = None) -> Setup:
    """The values and policy of a ``Container``'s training sections for ``arch`` on ``world``
    processes (``megatron_bridge_setup``'s, and a recipe's of ``models.bridge_recipes``, whose model
    providers give ``etp_default``)."""
    notes = list(notes or []) + fp32_gradients_note(c)
    fp4_primary_weights(c)
    tp, pp, cp = (c.get("model", k, 1) for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                                 "context_parallel_size"))
    if world % (tp * pp * cp):
        raise InputError(f"world size {world} is not a multiple of tensor x pipeline x context parallel = "
                         f"{tp * pp * cp} (Megatron-Core's rule)", "--devices")
    d, micro = world // (tp * pp * cp), c.get("train", "micro_batch_size", None)
    batch = c.get("train", "global_batch_size", None)
    if micro is None or batch is None:
        raise InputError("train.micro_batch_size and train.global_batch_size are required", "train.global_batch_size")
    if batch % (micro * d):
        raise InputError(f"train.global_batch_size {batch} is not a multiple of micro_batch_size x data-parallel "
                         f"size = {micro} x {d} (Megatron-Core's rule)", "train.global_batch_size")
    data = c.section("dataset")
    context = c.get("model", "seq_length", arch.context)
    seq = c.get("dataset", "sequence_length" if "sequence_length" in data else "seq_length", context)
    if seq != context:
        notes.append(f"dataset's sequence length {seq} is the training sequence; model.seq_length {context} "
                     f"is the model's context")
    if arch.positions and seq > arch.context:
        raise InputError(f"sequence length {seq} exceeds the learned positions of model.seq_length {arch.context}",
                         "dataset.sequence_length")
    sequence = c.get("model", "sequence_parallel", False, bool) and tp > 1
    values = {S.b: micro, S.l: seq, S.m1: tp, S.s1: tp if sequence else 1, S.d: d, S.p: pp,
              S.n_micro: batch // (micro * d), S.cp: cp, **experts(c, arch, etp_default)}
    policy = dict(precision(c), **pipeline(c, arch.n_layers, pp), **recompute(c, notes), **sharding(c),
                  **expert_policy(c, arch, notes))
    policy["overlap"] = overlap(c, policy["distributed_optimizer"] or policy.get("zero", 0) > 0, sequence, notes,
                                arch.moe is not None and arch.moe.shared_f != 0, policy.get("schedule") == "interleaved")
    if cp > 1:
        kind = c.get("model", "cp_comm_type", "p2p", str)
        if kind not in CP_COMM_TYPES:
            raise InputError(f"model.cp_comm_type {kind!r}: the reader reads {', '.join(CP_COMM_TYPES)}",
                             "model.cp_comm_type")
        policy["cp_variant"] = CP_COMM_TYPES[kind]
    number = c.argument("model", "attention_backend") or 5          # AttnBackend.auto, GPTModelProvider's default
    backend = number if number in ATTENTION_BACKENDS.values() else ATTENTION_BACKENDS.get(number)
    if backend is None:
        raise InputError(f"model.attention_backend {number!r}: the reader reads Megatron-Core's AttnBackend (1 to 5, "
                         f"or its name: {', '.join(ATTENTION_BACKENDS.values())})", "model.attention_backend")
    policy["flash"] = backend in ("flash", "fused", "auto")
    graphs = cuda_graphs(c, arch, policy.get("capacity_factor"), notes)
    impl = "transformer_engine" if c.get("model", "external_cuda_graph", False, bool) else \
        c.get("model", "cuda_graph_impl", "none", str)
    check_recompute(graphs, policy.get("recompute"), ("model.cuda_graph_impl", "model.recompute_granularity 'full'"),
                    policy.get("recompute_modules"), impl)
    if graphs:
        policy["cuda_graphs"] = graphs
    policy.update(peft_policy(c.data.get("peft"), arch, notes))
    return Setup(arch, values, policy, notes)


def cuda_graphs(c: Container, arch: Architecture, capacity, notes: list) -> tuple:
    """``cuda_graphs`` of ``model.cuda_graph_impl`` (none) and ``cuda_graph_scope`` or
    ``cuda_graph_modules`` (its name since Megatron-Core 0.18, which refuses both), read by
    ``blocks.graphs.graph_scopes`` and checked for the model (``for_model``), as Megatron-Bridge
    067f987 runs them: its ``validate_cuda_graph_configuration`` clears the scope of an
    implementation "none" before Megatron-Core's ``__post_init__`` turns the deprecated
    ``enable_cuda_graph`` and ``external_cuda_graph`` into ``local`` and ``transformer_engine``, so
    each captures the whole layer (a scope beside them noted as cleared); it runs ``local`` graphs
    only of the whole step (refused beside a scope, as it refuses them)."""
    impl = c.get("model", "cuda_graph_impl", "none", str)
    enable, external = (c.get("model", key, False, bool) for key in ("enable_cuda_graph", "external_cuda_graph"))
    model = c.section("model")
    scope, modules = model.get("cuda_graph_scope"), model.get("cuda_graph_modules")
    switched = switched_implementation(enable, external, impl, ("model.enable_cuda_graph",
                                       "model.external_cuda_graph", "cuda_graph_impl"), "Megatron-Core")
    if enable or external:
        key, impl_given = ("model.enable_cuda_graph" if enable else "model.external_cuda_graph"), switched
        if any(v not in (None, "full", []) for v in (scope, modules)):
            notes.append(f"{key}: Megatron-Bridge clears the CUDA graph scope while cuda_graph_impl is 'none', "
                         f"before Megatron-Core turns the switch into cuda_graph_impl {impl_given!r}: the whole layer")
        return for_model(graph_scopes(impl_given, None), arch, capacity, key)
    if scope is not None and modules not in (None, "full", []):
        raise InputError("model.cuda_graph_scope and cuda_graph_modules together: the first is the second's "
                         "deprecated name (Megatron-Core refuses both)", "model.cuda_graph_scope")
    key, given = ("model.cuda_graph_scope", scope) if scope is not None else ("model.cuda_graph_modules", modules)
    scopes = graph_scopes(impl, given, names=("model.cuda_graph_impl", key))
    if impl == "local" and scopes != ("full_iteration",):
        raise InputError(f"model.cuda_graph_impl 'local' with {key} {given!r}: Megatron-Bridge runs its own graphs "
                         f"only of the whole step (full_iteration), and refuses them per layer; transformer_engine "
                         f"captures a layer's parts", "model.cuda_graph_impl")
    return for_model(scopes, arch, capacity, key if given not in (None, "full", []) else "model.cuda_graph_impl",
                     c.get("model", "moe_pad_expert_input_to_capacity", False, bool),
                     c.get("model", "moe_token_dispatcher_type", "allgather", str))


def experts(c: Container, arch: Architecture, etp_default: int | None = None) -> dict:
    """``ep`` and ``etp`` of ``model.expert_model_parallel_size`` (1) and ``expert_tensor_parallel_size``
    (unset: ``etp_default``, or Megatron-Core's default, the tensor-parallel size), for a model with
    experts.  Whether they divide the experts and a stage's ranks is ``Training``'s and
    ``model_cost``'s rule, as for every other reader."""
    tp = c.get("model", "tensor_model_parallel_size", 1)
    if arch.moe is None:
        # no expert layer: the degree follows m1, a --set m1 too; still a degree (Megatron-Core's
        # initialize_model_parallel builds the expert groups of every model from it: -1 or 'x' was taken)
        c.get("model", "expert_tensor_parallel_size", tp)
        return {S.ep: 1, S.etp: S.m1}
    return {S.ep: c.get("model", "expert_model_parallel_size", 1),
            S.etp: c.get("model", "expert_tensor_parallel_size", etp_default or tp)}


def expert_policy(c: Container, arch: Architecture, notes: list) -> dict:
    """The ``model.moe_*`` keys of a model with experts (``megatron_bridge_keys``): those that restate
    the model checked against it (``check_experts``), the dispatcher (``dispatcher``), the capacity
    factor (``capacity_factor``, as ``--moe-expert-capacity-factor``), and the notes of the others
    (``expert_notes``).  Without experts none acts, as in Megatron-Core."""
    if arch.moe is None:
        return {}
    check_experts(c, arch)
    policy = dispatcher(c, notes)
    factor = c.section("model").get("moe_expert_capacity_factor")
    if factor is not None:
        policy["capacity_factor"] = c.fraction("model", "moe_expert_capacity_factor", "1")
    expert_notes(c, notes)
    return policy


def check_experts(c: Container, arch: Architecture) -> None:
    """Refuse a ``model.moe_*`` key (``megatron_bridge_keys.MOE_MODEL``) that disagrees with the model
    the recipe builds: Megatron-Bridge would build the model the key says, not the one counted.  A
    null value leaves the model's."""
    moe, model = arch.moe, c.section("model")
    shown = {"experts": moe.experts, "top_k": moe.top_k, "expert_f": moe.expert_f, "shared_f": moe.shared_f}
    for key, field in MOE_MODEL.items():
        value = model.get(key)
        if value is None or field == "layers":
            continue
        given = c.get("model", key, None, minimum=0 if field == "shared_f" else 1)
        if given != shown[field]:
            raise InputError(f"model.{key} = {given}, but the model {arch.name} has {shown[field]} ({field}); the "
                             f"reader counts the model as its configuration builds it: give that configuration "
                             f"(--hf-config) or drop the key", f"model.{key}")
    freq = model.get("moe_layer_freq")
    if freq is not None:
        text = str(freq) if isinstance(freq, (int, list)) and not isinstance(freq, bool) else repr(freq)
        flags = _moe_layers_flags(text, arch.n_layers)
        if flags != [int(moe.is_moe(i)) for i in range(arch.n_layers)]:
            raise InputError(f"model.moe_layer_freq {text}: not the expert layers of the model {arch.name}; the "
                             f"reader counts the model as its configuration builds it", "model.moe_layer_freq")


def _moe_layers_flags(text: str, n: int) -> list:
    """One 0 or 1 a layer of ``model.moe_layer_freq``: an integer ``N`` (every ``N``-th layer from
    layer 0, Megatron-Core's ``moe_freq_type``) or a list, one a layer."""
    if text.isdigit() and int(text) >= 1:
        return [int(i % int(text) == 0) for i in range(n)]
    return layer_flags(text, n, "model.moe_layer_freq")


FLEX_BACKENDS = ("deepep", "hybridep")
"""``model.moe_flex_dispatcher_backend`` values that run the flex dispatcher (a token sent once to each
node holding one of its experts, ``blocks.wiring.Experts``)."""


def dispatcher(c: Container, notes: list) -> dict:
    """``dispatcher`` of ``model.moe_token_dispatcher_type`` (unset: ``alltoall``, as Megatron-Bridge's
    MoE model bridges set it) and ``moe_flex_dispatcher_backend`` (Megatron-Core's default: deepep):
    ``flex`` with DeepEP or HybridEP; ``flex`` with no backend falls back to ``alltoall``
    (Megatron-Bridge's ``validate_flex_dispatcher_backend``); NCCL-EP's exchange is refused; allgather
    is timed as alltoall (noted), as from Megatron-LM's arguments; a backend beside a dispatcher other
    than flex is ignored, as Megatron-Core ignores it (noted)."""
    kind = c.get("model", "moe_token_dispatcher_type", "alltoall", str)
    if kind not in DISPATCHER_TYPES:
        raise InputError(f"model.moe_token_dispatcher_type {kind!r}: Megatron-Core's are "
                         f"{', '.join(DISPATCHER_TYPES)}", "model.moe_token_dispatcher_type")
    model = c.section("model")
    backend = model.get("moe_flex_dispatcher_backend", "deepep")
    if backend is not None and backend not in FLEX_BACKENDS + ("ncclep",):
        raise InputError(f"model.moe_flex_dispatcher_backend {backend!r}: Megatron-Core's are deepep, hybridep, "
                         f"ncclep", "model.moe_flex_dispatcher_backend")
    if kind != "flex":
        if model.get("moe_flex_dispatcher_backend") is not None:
            notes.append(f"model.moe_flex_dispatcher_backend {backend} beside moe_token_dispatcher_type {kind}: "
                         f"the backend acts with the flex dispatcher only; ignored, as Megatron-Core ignores it")
        if kind in ("allgather", "alltoall_seq"):
            notes.append(f"model.moe_token_dispatcher_type {kind}: the tokens' exchange is timed as the alltoall "
                         f"dispatcher's (its all-gather of the tokens over the expert ranks is not modelled)")
        return {}
    if backend is None:
        notes.append("model.moe_token_dispatcher_type flex with no moe_flex_dispatcher_backend: Megatron-Bridge "
                     "falls back to alltoall (validate_flex_dispatcher_backend); counted as alltoall")
        return {}
    if backend == "ncclep":
        raise InputError("model.moe_flex_dispatcher_backend 'ncclep': NCCL-EP's exchange is not modelled (the flex "
                         "dispatcher is counted for DeepEP and HybridEP)", "model.moe_flex_dispatcher_backend")
    notes.append(f"model.moe_token_dispatcher_type flex, moe_flex_dispatcher_backend {backend}: a token crosses the "
                 f"network once for each other node holding one of its experts; the kernels' own speed is not "
                 f"modelled")
    return {"dispatcher": "flex"}


def expert_notes(c: Container, notes: list) -> None:
    """Notes, or refusals, for ``megatron_bridge_keys.MOE_NOTED``: settings the count follows only
    so far."""
    model = c.section("model")
    if c.get("model", "moe_router_force_load_balancing", False, bool):
        notes.append("model.moe_router_force_load_balancing: tokens go to the experts evenly (a benchmark's "
                     "routing), as the library counts them unless expert_imbalance is set")
    padded = [k for k in ("moe_router_padding_for_fp8", "moe_router_padding_for_quantization")
              if c.get("model", k, False, bool)]
    if padded:
        notes.append(f"model.{', '.join(padded)}: each expert's rows padded to a multiple of 16 (32 for MXFP8); "
                     f"those few rows more an expert are not counted")
    rank = model.get("moe_expert_rank_capacity_factor")
    if rank is not None:
        if c.fraction("model", "moe_expert_rank_capacity_factor", "1") < 1:
            raise InputError(f"model.moe_expert_rank_capacity_factor {rank}: a budget below an expert rank's even "
                             f"share drops tokens, which is not modelled", "model.moe_expert_rank_capacity_factor")
        notes.append(f"model.moe_expert_rank_capacity_factor {rank}: a token budget an expert rank of at least its "
                     f"even share; the library's even routing stays within it (no token dropped)")
    if c.get("model", "moe_pad_expert_input_to_capacity", False, bool):
        if model.get("moe_expert_capacity_factor") is None:
            raise InputError("model.moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor "
                             "(Megatron-Core's rule)", "model.moe_pad_expert_input_to_capacity")
        notes.append("model.moe_pad_expert_input_to_capacity: each expert's rows padded to its capacity, as the "
                     "capacity factor is counted (the busiest rank at capacity)")
    if c.get("model", "moe_paged_stash", False, bool):
        if c.fraction("model", "moe_paged_stash_buffer_size_factor_cpu", "0") != 0:
            raise InputError(f"model.moe_paged_stash_buffer_size_factor_cpu "
                             f"{model['moe_paged_stash_buffer_size_factor_cpu']}: the paged stash's host buffer "
                             f"(routed experts' activations offloaded to the host) is not modelled",
                             "model.moe_paged_stash_buffer_size_factor_cpu")
        notes.append("model.moe_paged_stash: the routed experts' saved activations kept in pages of one buffer; "
                     "counted as the activations themselves (the buffer's headroom, "
                     "moe_paged_stash_buffer_size_factor_cuda, not counted)")


def sharding(c: Container) -> dict:
    """``zero`` of Megatron-FSDP (``ddp.use_megatron_fsdp`` or ``dist.use_megatron_fsdp``, either of
    which turns both on in Megatron-Bridge's ``ConfigContainer.validate``, with the sharding
    strategy), which replaces the distributed optimizer; nothing without it."""
    strategy = c.get("ddp", "data_parallel_sharding_strategy", "no_shard", str)
    if strategy not in SHARDING:
        raise InputError(f"ddp.data_parallel_sharding_strategy {strategy!r}: Megatron-FSDP's are "
                         f"{', '.join(SHARDING)}", "ddp.data_parallel_sharding_strategy")
    if not any(c.get(section, "use_megatron_fsdp", False, bool) for section in ("ddp", "dist")):
        return {}
    return {"zero": SHARDING[strategy], "distributed_optimizer": False}


def architecture(c: Container, name: str) -> Architecture:
    """The model of ``model:`` with ``TransformerConfig``'s and ``GPTModelProvider``'s defaults."""
    e, h, n = (c.get("model", k, None) for k in ("hidden_size", "num_attention_heads", "num_layers"))
    vocab = c.get("model", "vocab_size", None)
    for key, value in (("hidden_size", e), ("num_attention_heads", h), ("num_layers", n), ("vocab_size", vocab)):
        if value is None:
            raise InputError(f"model.{key} is required", f"model.{key}")
    target = c.target("model", "activation_func") or "torch.nn.functional.gelu"
    if target not in ACTIVATIONS:
        raise InputError(f"model.activation_func {target}: the reader reads {', '.join(ACTIVATIONS)}",
                         "model.activation_func")
    act = ACTIVATIONS[target]
    mlp = GATED[act] if c.get("model", "gated_linear_unit", False, bool) else act
    positions = c.get("model", "position_embedding_type", "learned_absolute", str)
    if positions not in ("learned_absolute", "rope", "none"):
        raise InputError(f"model.position_embedding_type {positions!r}: the reader reads learned_absolute, rope and "
                         f"none", "model.position_embedding_type")
    norm = c.get("model", "normalization", "LayerNorm", str)
    if norm not in ("LayerNorm", "RMSNorm"):
        raise InputError(f"model.normalization {norm!r}: the reader reads LayerNorm and RMSNorm", "model.normalization")
    head = c.get("model", "kv_channels", e // h if e % h == 0 else 1)
    percent = c.probability("model", "rotary_percent", "1")
    rotary_dim = None if percent == 1 or positions != "rope" else percent * head
    if rotary_dim is not None and rotary_dim.denominator != 1:
        raise InputError(f"model.rotary_percent {percent} of {head} channels is not a whole number",
                         "model.rotary_percent")
    bias = c.get("model", "add_bias_linear", True, bool)
    context = c.get("model", "seq_length", 1024)
    dropout = [c.probability("model", k, "0.1") for k in ("hidden_dropout", "attention_dropout")]
    pad = c.get("model", "should_pad_vocab", False, bool)
    return Architecture(
        name, n, e, h, c.get("model", "ffn_hidden_size", 4 * e), vocab, kv_heads=c.get("model", "num_query_groups", h),
        positions=context if positions == "learned_absolute" else 0, mlp=mlp,
        norm={"LayerNorm": "layer", "RMSNorm": "rms"}[norm], rotary=positions == "rope",
        rotary_dim=None if rotary_dim is None else int(rotary_dim),
        tied=c.get("model", "share_embeddings_and_output_weights", True, bool),
        qkv_bias=bias or c.get("model", "add_qkv_bias", False, bool), bias=bias, dropouts=dropout[0] != 0,
        attention_dropout=dropout[1] != 0, vocab_multiple=c.get("model", "make_vocab_size_divisible_by", 128)
        if pad else 1, context=context, head_dim=None if head * h == e else head,
        qk_norm="head" if c.get("model", "qk_layernorm", False, bool) else None)


def fp32_gradients_note(c: Container) -> list:
    """A note when Megatron-Core's fp32 main gradients are on: the bytes follow ``--conventions``
    (``mixed_precision`` megatron counts them), as from Megatron-LM's arguments.  The switch is
    ``ddp.grad_reduce_in_fp32``, unless a ``mixed_precision`` mapping states its own, which
    Megatron-Bridge copies onto the DDP config (``MixedPrecisionConfig.setup``:
    ``update_config_with_precision_overrides``), as the performance YAMLs' ``false`` does."""
    table = c.data.get("mixed_precision")
    ddp = c.get("ddp", "grad_reduce_in_fp32", False, bool)
    if isinstance(table, dict) and table.get("grad_reduce_in_fp32") is not None:
        on, where = c.get("mixed_precision", "grad_reduce_in_fp32", True, bool), "mixed_precision.grad_reduce_in_fp32"
        if ddp and not on:
            return ["mixed_precision.grad_reduce_in_fp32 false replaces ddp.grad_reduce_in_fp32 true (Megatron-Bridge "
                    "copies it onto the DDP config): gradients accumulated and reduced in 16 bits; their bytes follow "
                    "--conventions (mixed_precision 'zero' counts 2 per parameter)"]
    else:
        on, where = ddp, "ddp.grad_reduce_in_fp32"
    if not on:
        return []
    return [f"{where}: Megatron-Core accumulates and reduces fp32 main gradients; their bytes follow "
            "--conventions (the mixed_precision='megatron' convention counts them)"]


def pipeline(c: Container, layers: int, pp: int) -> dict:
    """The schedule and the stages of ``model``'s pipeline fields; an explicit
    ``pipeline_model_parallel_layout`` (Megatron-LM's string) decides the chunks, as Megatron-Core
    lets it."""
    chunks, policy = c.get("model", "virtual_pipeline_model_parallel_size", 1), {}
    layout = c.section("model").get("pipeline_model_parallel_layout")
    if layout:
        if not isinstance(layout, str):
            raise InputError(f"model.pipeline_model_parallel_layout {layout!r}: the reader reads Megatron-LM's layout "
                             f"string", "model.pipeline_model_parallel_layout")
        stages = Fraction(len(layout_stages(layout)), pp)
        if stages.denominator != 1:
            raise InputError(f"model.pipeline_model_parallel_layout: its stages must be a multiple of "
                             f"pipeline_model_parallel_size {pp} (Megatron-Core's rule)",
                             "model.pipeline_model_parallel_layout")
        policy["pipeline_layout"] = layout
        return dict(policy, schedule="interleaved", virtual_stages=int(stages)) if stages > 1 else policy
    for key, field in (("account_for_embedding_in_pipeline_split", "embedding_in_split"),
                       ("account_for_loss_in_pipeline_split", "loss_in_split")):
        if c.get("model", key, False, bool):
            policy[field] = True
    slots = layers + policy.get("embedding_in_split", 0) + policy.get("loss_in_split", 0)
    uneven = any(c.get("model", k, None) is not None for k in ("num_layers_in_first_pipeline_stage",
                                                                "num_layers_in_last_pipeline_stage"))
    if chunks > 1:
        if pp == 1 or slots % (pp * chunks) and not uneven:
            raise InputError(f"model.virtual_pipeline_model_parallel_size {chunks} needs a pipeline whose stages "
                             f"divide the {slots} layers (the embedding and loss counted where the split accounts "
                             f"for them) into {chunks} chunks", "model.virtual_pipeline_model_parallel_size")
        policy.update(schedule="interleaved", virtual_stages=chunks)
    for key, field in (("num_layers_in_first_pipeline_stage", "first_stage_layers"),
                       ("num_layers_in_last_pipeline_stage", "last_stage_layers")):
        if c.get("model", key, None) is not None:
            policy[field] = c.get("model", key, None)
    return policy


def recompute(c: Container, notes: list | None = None) -> dict:
    """``recompute`` of ``model.recompute_granularity`` (null: none) and, when selective,
    ``model.recompute_modules`` (``recompute_modules``; null: Megatron-Core's ``core_attn``), with
    the deprecated ``model.moe_layer_recompute``, which Megatron-Core turns into selective
    recomputation with ``moe`` added (refused beside full, as Megatron-Core refuses it).  Modules
    beside another granularity are ignored by Megatron-Core, and said so in ``notes``."""
    granularity = c.get("model", "recompute_granularity", "none", str)
    if granularity not in ("none", "selective", "full"):
        raise InputError(f"model.recompute_granularity {granularity!r}: the reader reads selective and full",
                         "model.recompute_granularity")
    modules = c.section("model").get("recompute_modules") or []
    if not isinstance(modules, (list, tuple)) or not all(isinstance(m, str) for m in modules):
        raise InputError(f"model.recompute_modules must be a list of module names, got {modules!r}",
                         "model.recompute_modules")
    if c.get("model", "moe_layer_recompute", False, bool):
        if granularity == "full":
            raise InputError("model.moe_layer_recompute with recompute_granularity full (Megatron-Core refuses them)",
                             "model.moe_layer_recompute")
        granularity, modules = "selective", list(modules or ["core_attn"]) + (["moe"] if "moe" not in modules else [])
    if granularity == "selective":
        return dict(recompute="selective", recompute_modules=tuple(modules))
    if modules and notes is not None:
        notes.append(f"model.recompute_modules {', '.join(modules)} with recompute_granularity {granularity}: "
                     f"Megatron-Core recomputes them only under selective granularity; ignored, as it does")
    if granularity != "full":
        return dict(recompute=granularity)
    method = c.get("model", "recompute_method", "uniform", str)
    if method not in ("uniform", "block"):
        raise InputError(f"model.recompute_method {method!r}: uniform or block", "model.recompute_method")
    return dict(recompute="full", recompute_method=method, recompute_layers=c.get("model", "recompute_num_layers", 1))


def overlap(c: Container, distributed: bool, sequence: bool, notes: list, shared_experts: bool = False,
            interleaved: bool = False) -> Overlap:
    """``ddp``'s overlap flags (``comm_overlap``'s when it sets them) and tensor-parallel overlap
    (which Megatron-Bridge turns off, warning, without sequence parallelism over 2 or more ranks)."""
    flags = {}
    for key in ("overlap_grad_reduce", "overlap_param_gather"):
        given = c.section("comm_overlap").get(key)
        flags[key] = c.get("ddp", key, False, bool) if given is None else c.get("comm_overlap", key, False, bool)
    tensor = c.get("model", "tp_comm_overlap", False, bool) or c.get("comm_overlap", "tp_comm_overlap", False, bool)
    if flags["overlap_param_gather"] and not distributed:
        raise InputError("ddp.overlap_param_gather needs ddp.use_distributed_optimizer or Megatron-FSDP "
                         "(Megatron-Core's rule)", "ddp.overlap_param_gather")
    expert = any(c.get(section, "overlap_moe_expert_parallel_comm", False, bool)
                 for section in ("comm_overlap", "model"))
    shared = c.get("model", "moe_shared_expert_overlap", False, bool)
    if shared and not shared_experts:       # Megatron-Core: only effective with shared experts
        notes.append("model.moe_shared_expert_overlap: the model has no shared experts; ignored, as Megatron-Core "
                     "ignores it")
        shared = False
    if tensor and not sequence:
        notes.append("tp_comm_overlap: Megatron-Bridge turns it off without sequence parallelism over 2 or more "
                     "tensor ranks; counted off")
    return Overlap(grad_reduce=flags["overlap_grad_reduce"], param_gather=flags["overlap_param_gather"],
                   tensor=tensor and sequence, expert=expert, shared_expert=shared,
                   pipeline=overlap_p2p_comm(c) if interleaved else True)    # elsewhere it counts for nothing


def overlap_p2p_comm(c: Container) -> bool:
    """``overlap_p2p_comm`` of an interleaved schedule (elsewhere it counts for nothing:
    ``models.training.overlaps_sends``): with a ``comm_overlap`` section, its value, or where it
    leaves it unset Megatron-Bridge's own choice, on under virtual stages (``CommOverlapConfig.setup``,
    which writes it into the model's config); without one, the model's (Megatron-Core's
    ``ModelParallelConfig``: off)."""
    if c.data.get("comm_overlap") is not None:      # a section, even an empty one, runs CommOverlapConfig.setup
        return c.get("comm_overlap", "overlap_p2p_comm", True, bool)
    return c.get("model", "overlap_p2p_comm", False, bool)
