"""The keys of a torchtitan job TOML: which ``models.torchtitan`` reads (``READ``), which change no
count (``NO_COST``, accepted), and ``Job``, the file's sections read with torchtitan's defaults; any
other section or key is refused, naming it."""

from __future__ import annotations

import tomllib

from symbolic_cost.checks import InputError, file_text

NO_COST = {
    "job": "*", "profiling": "*", "metrics": "*", "lr_scheduler": "*", "checkpoint": "*", "comm": "*",
    "memory_estimation": "*", "validation": "*", "compile": "*", "float8": "*", "quantize": "*", "mx": "*",
    "fault_tolerance": "*",
    "model": {"tokenizer_path", "hf_assets_path", "print_after_conversion"},
    "optimizer": {"lr", "beta1", "beta2", "eps", "weight_decay"},
    "training": {"max_norm", "steps", "dataset", "dataset_path", "compile", "gc_freq", "gc_debug", "seed",
                 "deterministic", "warmup_steps", "mixed_precision_reduce"},
    "parallelism": {"enable_compiled_autograd"},
    "activation_checkpoint": {"preserve_rng_state", "per_op_sac_force_recompute_mm_shapes_by_fqns", "early_stop"},
}
"""Keys that change no count (``"*"``: every key of the section).  The float8, quantize and mx
sections only configure a converter; ``models.torchtitan.float8`` reads float8's when
``[model] converters`` names it, and refuses the others.  ``[fault_tolerance]`` configures torchft,
which acts only with its ``enable``, refused when true (``models.torchtitan.job_setup``), so that a
torchft file is told so, not refused for a key such as ``sync_steps``."""

READ = {
    "model": {"name", "flavor", "converters", "moe_comm_backend"},
    "optimizer": {"name", "early_step_in_backward", "implementation"},
    "training": {"local_batch_size", "batch_size", "global_batch_size", "seq_len", "mixed_precision_param",
                 "enable_cpu_offload"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
                    "pipeline_parallel_degree", "context_parallel_degree", "pipeline_parallel_schedule",
                    "pipeline_parallel_microbatch_size", "pipeline_parallel_first_stage_less_layers",
                    "pipeline_parallel_last_stage_less_layers", "enable_async_tensor_parallel",
                    "disable_loss_parallel", "fsdp_reshard_after_forward", "expert_parallel_degree",
                    "expert_tensor_parallel_degree", "pipeline_parallel_split_points", "module_fqns_per_model_part",
                    "pipeline_parallel_layers_per_stage", "pipeline_parallel_schedule_csv",
                    "context_parallel_rotate_method", "context_parallel_load_balancer", "expert_parallel_comm_backend"},
    "activation_checkpoint": {"mode", "selective_ac_option"},
    "fault_tolerance": {"enable"},
    "experimental": set(),
}
"""Keys ``torchtitan_setup`` reads (see the module docstring's table)."""

FIRST_GENERATION = {("training", "data_parallel_degree"): "data_parallel_shard_degree",
                    ("training", "data_parallel_replicate_degree"): "data_parallel_replicate_degree",
                    ("training", "data_parallel_shard_degree"): "data_parallel_shard_degree",
                    ("training", "tensor_parallel_degree"): "tensor_parallel_degree",
                    ("training", "enable_async_tensor_parallel"): "enable_async_tensor_parallel",
                    ("training", "pipeline_parallel_degree"): "pipeline_parallel_degree",
                    ("experimental", "pipeline_parallel_degree"): "pipeline_parallel_degree",
                    ("experimental", "context_parallel_degree"): "context_parallel_degree",
                    ("experimental", "enable_async_tensor_parallel"): "enable_async_tensor_parallel",
                    ("training", "fsdp_reshard_after_forward"): "fsdp_reshard_after_forward"}
"""Layout keys of torchtitan's first TOML generation (2024 to 2025-03-18, before its ``[parallelism]``
section; ``torchtitan/config_manager.py`` at 34fa017b8 and 57387af0e) and their names under
``[parallelism]``, where the same key means the same (``data_parallel_degree``, the FSDP degree of
mid-2024, is the later shard degree, -1 the rest of the world): read as the later keys, noted.  The
pipeline degree sat under ``[training]`` from c22d1a8d1 (2024-04-11) until the pipeline came in
aafe0e870 (2024-05-21), 1 meaning none (above 1, ``parallelize_llama`` raised "PP not implemented
yet" at 5e84866e3)."""

KINDS = {"enable_async_tensor_parallel": bool, "fsdp_reshard_after_forward": str}
"""The first-generation layout keys that are not integers.  ``[training] fsdp_reshard_after_forward``
(5940ddeb5, 2025-02-06, until the ``[parallelism]`` section) took the later key's ``default``,
``always`` and ``never``, applied as later (``apply_fsdp`` of ``torchtitan/models/llama/
parallelize_llama.py`` at 82afc842e)."""


def _check_kind(section: str, key: str, value, kind) -> None:
    """A first-generation layout key's value is of ``kind`` (``bool`` is not an ``int`` here)."""
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        words = {bool: "true or false", int: "an integer", str: "a string"}[kind]
        raise InputError(f"[{section}] {key} must be {words}, got {value!r}", f"[{section}] {key}")


PIPELINE_KEYS = ("pipeline_parallel_microbatches", "pipeline_parallel_split_points", "pipeline_parallel_schedule")
"""First-generation ``[experimental]`` keys of a pipeline: without one (degree 1) they do nothing."""


SWITCHES = (("training", "enable_loss_parallel"), ("training", "disable_loss_parallel"),
            ("float8", "enable_float8_linear"), ("training", "fp8_linear"), ("training", "enable_fp8_linear"),
            ("training", "enable_float8_linear"), ("training", "enable_fsdp_fp8_all_gather"),
            ("training", "enable_fsdp_float8_all_gather"), ("training", "precompute_float8_dynamic_scale_for_fsdp"))
"""First-generation switches ``_switch`` reads (``fp8_linear``: a string, ``_fp8_linear``; the
``[training]`` float8 switches of July 2024: ``_training_float8``)."""

TRAINING_FLOAT8 = {"enable_fp8_linear": "a4b2ee3c0 (2024-07-16) to 69fe8defc (2024-07-17)",
                   "enable_float8_linear": "69fe8defc (2024-07-17) to 40f79d79f (2024-07-31)"}
"""The ``[training]`` switches of float8 in the weeks between ``fp8_linear`` and the ``[float8]`` section
(``torchtitan/config_manager.py`` there), with their span; beside them ``[training]
enable_fsdp_fp8_all_gather`` (``enable_fsdp_float8_all_gather`` from 69fe8defc) and
``precompute_float8_dynamic_scale_for_fsdp``, which act only on float8's layers."""


def first_generation(data: dict) -> tuple[dict, list]:
    """``data``, the sections of a TOML, with the keys of torchtitan's first generation written as the
    reader's generation writes them (``FIRST_GENERATION``, each checked for its kind first, so that a
    refusal names the key the file holds; ``SWITCHES``: ``_switch``), and a note naming what moved.
    A pipeline of that generation is refused: it cut the layers evenly and ran as many micro-batches
    as stages unless told otherwise, which the reader does not read."""
    moved = [(section, key) for (section, key) in [*FIRST_GENERATION, *SWITCHES] if key in data.get(section, {})]
    data = {section: dict(table) for section, table in data.items()}
    if not moved:
        return data, []
    later, origin = data.setdefault("parallelism", {}), {}
    for section, key in moved:
        value = data[section].pop(key)
        if (section, key) in SWITCHES:
            _switch(data, section, key, value)
            continue
        name = FIRST_GENERATION[section, key]
        _check_kind(section, key, value, KINDS.get(name, int))
        if name in later:
            raise InputError(f"[{section}] {key} beside {origin.get(name, '[parallelism] ' + name)}: one setting "
                             f"written twice; give one", f"[{section}] {key}")
        if name == "pipeline_parallel_degree" and value != 1:
            raise InputError(f"[{section}] {key} {value!r}: a pipeline of torchtitan's first TOML generation (before "
                             f"2025-03-18) cut the layers evenly and ran pipeline_parallel_microbatches micro-batches "
                             f"(by default one a stage), which the reader does not read; give the layout with "
                             f"--preset/--hf-config and --set", f"[{section}] {key}")
        later[name], origin[name] = value, f"[{section}] {key}"
    for key in PIPELINE_KEYS:
        data.get("experimental", {}).pop(key, None)
    return data, [f"a TOML of torchtitan's first generation (before 2025-03-18): "
                  f"{', '.join(f'[{s}] {k}' for s, k in moved)} read as the later generation's keys"]


def _switch(data: dict, section: str, key: str, value) -> None:
    """A first-generation switch: ``[float8] enable_float8_linear`` true is the float8 converter (refused
    beside a ``converters`` of the next generation); loss parallelism turned off
    (``enable_loss_parallel`` false, or ``disable_loss_parallel`` true) is refused; ``[training]
    fp8_linear``: ``_fp8_linear``."""
    if key == "fp8_linear":
        return _fp8_linear(value)
    if not isinstance(value, bool):
        raise InputError(f"[{section}] {key} must be true or false, got {value!r}", f"[{section}] {key}")
    if section == "training" and ("float8" in key or "fp8" in key):
        return _training_float8(key, value)
    if key.endswith("loss_parallel") and (key == "enable_loss_parallel") != value:
        raise InputError(f"[{section}] {key} = {str(value).lower()}: the library keeps the logits split over the "
                         f"tensor ranks (loss parallel, that generation's default)", f"[{section}] {key}")
    if key == "enable_float8_linear":
        if "converters" in data.get("model", {}):
            raise InputError(f"[{section}] {key} beside [model] converters: the first generation's float8 switch "
                             f"and the next one's converters together; give one", f"[{section}] {key}")
        if value:
            data.setdefault("model", {})["converters"] = ["float8"]


def _fp8_linear(value) -> None:
    """``[training] fp8_linear`` (torchtitan's float8 switch from c22d1a8d1, 2024-04-11, until
    a4b2ee3c0, 2024-07-16): ``""``, its default, is none; ``"dynamic"`` swapped every ``nn.Linear``
    of the model, the output head too, for float8_experimental's ``Float8DynamicLinear``
    (``torchtitan/float8_linear.py`` at 5e84866e3 calls ``swap_linear_with_float8_linear(model, ...)``
    with no module skipped), where the later float8 converter keeps the head in 16-bit: refused."""
    if not isinstance(value, str):
        raise InputError(f"[training] fp8_linear must be a string, got {value!r}", "[training] fp8_linear")
    if value:
        raise InputError(f"[training] fp8_linear {value!r}: torchtitan of 2024-04 to 2024-07 swapped every linear "
                         f"layer, the output head too, for float8_experimental's Float8DynamicLinear, which the "
                         f"reader does not model (its float8 keeps the head in 16-bit); remove it or give the layout "
                         f"with --preset/--hf-config and --set", "[training] fp8_linear")


def _training_float8(key: str, value: bool) -> None:
    """A ``[training]`` float8 switch of July 2024 (``TRAINING_FLOAT8``): false, the default, is no float8;
    true swapped every ``nn.Linear`` of the model, the output head too, for float8_experimental's
    ``Float8Linear`` with dynamic scaling (``maybe_build_fp8_linear`` of ``torchtitan/float8_linear.py``
    at 69fe8defc calls ``swap_linear_with_float8_linear(model, ...)`` with no module skipped), where the
    later float8 converter keeps the head in 16-bit: refused, as ``fp8_linear = "dynamic"``.  The FSDP
    all-gather and scale switches act on float8's layers alone: with float8 off they change nothing."""
    if value and key in TRAINING_FLOAT8:
        raise InputError(f"[training] {key} = true: torchtitan of {TRAINING_FLOAT8[key]} swapped every linear layer, "
                         f"the output head too, for float8_experimental's Float8Linear, which the reader does not "
                         f"model (its float8 keeps the head in 16-bit); remove it or give the layout with "
                         f"--preset/--hf-config and --set", f"[training] {key}")


RMS_NORMS = ("rmsnorm", "fused_rmsnorm", "compiled_rmsnorm")
"""``[model] norm_type`` values that run the RMSNorm torchtitan's Llama flavours are built with (its
TOMLs wrote ``rmsnorm`` until 2025-04-17, after the ``[parallelism]`` section came on 2025-03-18):
implementations of the same norm, accepted; ``layernorm`` and ``np_layernorm`` change the model and
are refused."""


def _check_norm(norm) -> None:
    """``[model] norm_type`` (torchtitan's TOMLs until 2025-04-17): an implementation of the RMSNorm
    the Llama flavours are built with (``RMS_NORMS``) is read as the flavour; another norm is refused."""
    if norm not in RMS_NORMS:
        raise InputError(f"[model] norm_type {norm!r}: torchtitan's Llama flavours are built with RMSNorm "
                         f"({', '.join(RMS_NORMS)}); another norm changes the model, which the reader does not "
                         f"read; remove it", "[model] norm_type")


class Job:
    """The TOML's sections (or ``data``, the sections a Python configuration stands for): typed
    values with torchtitan's defaults; every key checked against ``READ`` and ``NO_COST`` (an
    unknown section or key is refused, naming it)."""

    def __init__(self, text: str, name: str, data: dict | None = None):
        if data is not None:        # the sections of a Python configuration (models.torchtitan_python)
            self.data = data
        else:
            try:
                self.data = tomllib.loads(file_text(text, "--torchtitan", name))
            except RecursionError:
                raise InputError(f"--torchtitan: {name} is nested too deeply to be a torchtitan job",
                                 "--torchtitan") from None
            except tomllib.TOMLDecodeError as error:
                raise InputError(f"{name}: not a TOML file ({error})", "--torchtitan") from None
        for section, table in self.data.items():
            if not isinstance(table, dict):
                raise InputError(f"{name}: {section} = ... outside a [section]; torchtitan reads sections",
                                 "--torchtitan")
        self.data, self.notes = first_generation(self.data) if data is None else (self.data, [])
        self.first = bool(self.notes)           # a file of torchtitan's first TOML generation
        for section, table in self.data.items():
            allowed = NO_COST.get(section)
            for key in table:
                if (section, key) == ("model", "norm_type"):
                    _check_norm(table[key])
                elif allowed != "*" and key not in (allowed or set()) and key not in READ.get(section, set()):
                    raise InputError(f"[{section}] {key}: a torchtitan key this reader does not read (it may change "
                                     f"the cost); remove it or give the layout with --preset/--hf-config and --set",
                                     f"[{section}] {key}")

    def get(self, section: str, key: str, default, kind=int, minimum=None):
        """``[section] key`` (``default`` when absent), of ``kind``, and at least ``minimum`` if given
        (a count of 0 is refused here, by name, not left to divide by)."""
        value = self.data.get(section, {}).get(key, default)
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(f"[{section}] {key} must be an integer, got {value!r}", f"[{section}] {key}")
        if kind is not int and not isinstance(value, kind):
            raise InputError(f"[{section}] {key} must be a {kind.__name__}, got {value!r}", f"[{section}] {key}")
        if minimum is not None and value < minimum:
            raise InputError(f"[{section}] {key} must be at least {minimum}, got {value}", f"[{section}] {key}")
        if kind is int and abs(value) > 2**53:      # as config.json's fields: past a double, no size or count
            raise InputError(f"[{section}] {key} must be at most 2**53, got one of {value.bit_length()} bits",
                             f"[{section}] {key}")
        return value

    def degree(self, key: str, default: int = 1, minimum: int = 1) -> int:
        value = self.get("parallelism", key, default)
        if value < minimum:
            raise InputError(f"[parallelism] {key} must be at least {minimum}, got {value}", f"[parallelism] {key}")
        return value

    def refuse(self, section: str, key: str, inert, why: str) -> None:
        """Refuse ``key`` unless absent or at ``inert`` (the value with no effect)."""
        value = self.data.get(section, {}).get(key, inert)
        if value != inert and not (inert is None and value in ([], "")):
            raise InputError(f"[{section}] {key} = {value!r}: {why}", f"[{section}] {key}")
