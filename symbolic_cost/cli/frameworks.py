"""Starting from a framework's settings: ``--megatron-args FILE`` (a Megatron-LM launch script or
arguments file, ``models.megatron_args``) or ``--torchtitan FILE`` (a torchtitan job TOML,
``models.torchtitan``) or ``--nemo-recipe FILE`` (a Megatron-Bridge ``ConfigContainer`` YAML,
``models.megatron_bridge``) in place of ``--preset``/``--hf-config`` and ``--set``; ``--deepspeed FILE``
(a DeepSpeed config, ``models.deepspeed``) or ``--accelerate FILE`` (an accelerate config,
``models.accelerate``) or ``--hf-training-args FILE`` (a Trainer's ``TrainingArguments`` JSON,
``models.hf_trainer``) beside ``--preset``/``--hf-config`` in place of ``--set`` and the training
options (``DEEPSPEED_OPTIONS``, ``ACCELERATE_OPTIONS``, ``TRAINER_OPTIONS``).

The file decides the model and the training.  On the command line beside it:

* ``--devices N`` gives the world size (the launcher's ``--nproc_per_node x --nnodes`` otherwise;
  given, it replaces them; torchtitan's TOML does not say it, and its shard degree -1 needs it) and
  ``--vocab-size N`` the vocabulary a tokenizer file holds;
* ``--set NAME=VALUE`` replaces a value the file gives (``b``, ``l``, ``m1``, ``s1``, ``d``, ``p``,
  ``n_micro``, ``ep``, ``etp``), explicitly: each replacement is listed in the output's notes;
* the options the file decides (``FILE_OPTIONS``: precision, recomputation, schedule, overlap,
  FP8, flash attention, the distributed optimizer, the capacity factor; with Megatron-LM,
  Megatron-Bridge and NeMo 1.x also ``--optimizer`` and ``--cuda-graphs``; with torchtitan also
  ``--zero``, ``--shard``, ``--reshard-after-forward``, ``--optimizer`` and ``--offload``) set
  away from their defaults are refused: change the file (one typed at its default value cannot be
  told from none);
* what the file does not say (Megatron-LM: ``--zero``, ``--optimizer``, ``--offload``; both: LoRA,
  ``--conventions``, ``--system``, ...) is taken from the command line as usual.
"""

from __future__ import annotations

from pathlib import Path

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, shown
from symbolic_cost.files import input_file
from symbolic_cost.cli import options
from symbolic_cost.cli.values import architecture, assignments, model_type
from symbolic_cost.cli.building import model_config

FILE_OPTIONS = ("--precision", "--distributed-optimizer", "--recompute", "--recompute-modules", "--recompute-method",
                "--recompute-layers", "--schedule", "--virtual-stages", "--first-stage-layers", "--last-stage-layers", "--embedding-in-split",
                "--loss-in-split", "--pipeline-layout", "--overlap", "--fp8", "--fp8-amax-history",
                "--fp8-16bit-layers", "--flash", "--capacity-factor", "--cp-variant")
"""Options whose choice the Megatron arguments make (refused beside ``--megatron-args`` when set away
from their defaults)."""

MEGATRON_OPTIONS = FILE_OPTIONS + ("--optimizer", "--cuda-graphs")
"""Options Megatron-LM's arguments decide: ``FILE_OPTIONS``, its optimizer (``--optimizer``, adam
by default) and its CUDA graphs (``--cuda-graphs``: none by default); ``--zero`` too where the
script shards with Megatron-FSDP or FSDP2 (``setup``)."""

TORCHTITAN_OPTIONS = FILE_OPTIONS + ("--zero", "--shard", "--reshard-after-forward", "--optimizer", "--offload",
                                     "--fp8-gather", "--attention-kernel", "--loss-chunks")
"""Options a torchtitan TOML decides (FSDP's sharding, the optimizer, CPU offload, and with the GPU the
attention kernel: ``models.torchtitan.SDPA_LIBRARY``)."""

DEEPSPEED_OPTIONS = ("--zero", "--offload", "--distributed-optimizer", "--precision", "--optimizer")
"""Options a DeepSpeed config decides (``--precision`` and ``--zero`` fill its "auto" values instead;
``--optimizer`` only when it names an optimizer)."""

NEMO_OPTIONS = FILE_OPTIONS + ("--optimizer", "--cuda-graphs")
"""Options a Megatron-Bridge or NeMo 1.x YAML decides (its optimizer and its CUDA graphs too: NeMo 1.x's
``model.enable_cuda_graph``)."""

ACCELERATE_OPTIONS = ("--zero", "--offload", "--distributed-optimizer", "--precision", "--shard",
                      "--reshard-after-forward", "--overlap")
"""Options an accelerate config decides (``--recompute`` too when it turns FSDP's activation
checkpointing on)."""

TRAINER_OPTIONS = ACCELERATE_OPTIONS + ("--optimizer", "--recompute")
"""Options a ``TrainingArguments`` JSON decides (``--shard`` gives the devices of a machine to its
``hybrid_shard`` instead)."""

FILES = {"megatron_args": "--megatron-args", "torchtitan": "--torchtitan", "deepspeed": "--deepspeed",
         "nemo_recipe": "--nemo-recipe", "accelerate": "--accelerate", "hf_training_args": "--hf-training-args",
         "megatron_bridge_recipe": "--megatron-bridge-recipe"}
"""The framework files (``options.model``'s options) and their flags."""

ONLY_WITH = ("--devices", "--vocab-size", "--trl-trainer")
"""Options that apply to a framework file only (refused without one; ``search`` takes ``--devices``
alone)."""


def add_arguments(parser) -> None:
    """``--devices`` and ``--vocab-size`` (the files themselves are model options: ``options.model``)."""
    options.option(parser, "--devices", type=int, help="with a framework file: the world size (default: the launcher's "
                   "--nproc_per_node x --nnodes; torchtitan's degrees; 1 for --hf-training-args)")
    options.option(parser, "--vocab-size", type=int, help="with --megatron-args or --torchtitan: the tokenizer's "
                   "vocabulary when the file reads it from a tokenizer file (before Megatron pads it)")


def recipe_fields(args) -> dict:
    """The recipe a framework file decides (FP8, offload, optimizer), for a command without the
    recipe options (``sweep``)."""
    found = getattr(args, "framework", None)
    return {k: found.policy[k] for k in ("fp8", "fp8_amax_history", "first_layers_16bit", "last_layers_16bit",
                                         "offload", "optimizer", "fp8_gather", "reference")
            if k in found.policy} if found else {}


def _given(args, flags: tuple) -> str | None:
    """The first option of ``flags`` set away from its default, or typed at it where the option
    notes that (``options.Given``, ``GivenSwitch``: ``--no-flash`` beside a file that turns flash on)."""
    plain = options.PLAIN
    defaults = dict(precision=plain.precision, distributed_optimizer=plain.distributed_optimizer,
                    recompute=plain.recompute, recompute_modules=[], recompute_method=plain.recompute_method,
                    recompute_layers=plain.recompute_layers, schedule=plain.schedule,
                    virtual_stages=plain.virtual_stages, first_stage_layers=None, last_stage_layers=None,
                    embedding_in_split=False, loss_in_split=False, pipeline_layout=None,
                    overlap=[], fp8=None, fp8_amax_history=None, fp8_16bit_layers=[0, 0], fp8_gather=False,
                    flash=plain.flash, loss_chunks=plain.loss_chunks, fused_loss=plain.fused_loss,
                    capacity_factor=None, cp_variant=None, attention_kernel=None, zero=plain.zero,
                    optimizer=plain.optimizer, offload=plain.offload, shard=plain.shard,
                    reshard_after_forward=plain.reshard_after_forward, reference=None, lora_rank=None,
                    lora_targets="q,v", lora_base="16-bit", cuda_graphs=[])
    for name, default in defaults.items():
        flag = "--" + name.replace("_", "-")
        if flag in flags and hasattr(args, name) and (getattr(args, name) != default or options.given(args, name)):
            return flag
    return None


def _deepspeed(path: str, args, launched: dict | None = None):
    """The ``Setup`` of ``--deepspeed`` with the model of ``--hf-config``/``--preset``; refuses what the
    config decides when the command line sets it too.  ``launched``: the ``world`` and ``precision``
    of the accelerate config that names the JSON (``_accelerate_deepspeed``), which then fill its
    "auto" precision in place of the command line."""
    given = {k: int(v) for k, v in assignments(getattr(args, "set", [])).items() if getattr(v, "is_Integer", False)}
    command = dict(zero=args.zero, precision=args.precision, precision_given=options.given(args, "precision"),
                   zero_given=options.given(args, "zero"))
    if launched is not None:
        command.update(precision=launched["precision"], precision_given=True)
    from symbolic_cost.models.deepspeed import command_line_fills, deepspeed_setup    # _read's note
    text = input_file(path, "--deepspeed")
    if launched is not None and '"auto"' in text:
        import json
        zero = json.loads(text).get("zero_optimization")
        if isinstance(zero, dict) and zero.get("stage") == "auto":
            raise InputError("zero_optimization.stage is \"auto\": under accelerate without a Trainer nothing fills "
                             "it, and DeepSpeed refuses it; write the stage in the file", "zero_optimization.stage")
    world = args.devices if launched is None else launched["world"]
    found = deepspeed_setup(text, Path(path).stem, architecture(args), world, given, command)
    decided = tuple(f for f in DEEPSPEED_OPTIONS if f not in command_line_fills(text)
                    or launched is not None and f == "--precision")
    flag = _given(args, decided) or ("--precision" if "--precision" in decided and options.given(args, "precision")
                                     else None)
    if flag:
        raise InputError(f"{flag}: the DeepSpeed config of --deepspeed decides it; change the file (it would be "
                         f"overridden otherwise)", flag)
    return found


def _accelerate_deepspeed(args):
    """The ``Setup`` of ``--accelerate`` beside ``--deepspeed``: an accelerate config whose
    ``deepspeed_config.deepspeed_config_file`` is the DeepSpeed JSON of ``--deepspeed``
    (``models.accelerate.config_file_launch``): DeepSpeed's settings from the JSON, the processes
    from the accelerate config (``--devices`` replaces them)."""
    from symbolic_cost.models.accelerate import accelerate_setup     # _read's note
    if options.given(args, "precision"):
        raise InputError("--precision: the DeepSpeed config of --deepspeed decides it, and accelerate fills its "
                         "\"auto\" precision with fp32 (no mixed_precision beside a deepspeed_config_file); change "
                         "the file", "--precision")

    def deepspeed(world: int, precision: str, notes: list):
        found = _deepspeed(args.deepspeed, args, dict(world=world, precision=precision))
        found.notes[:0] = notes
        return found
    path = args.accelerate
    found = accelerate_setup(input_file(path, "--accelerate"), Path(path).stem, architecture(args), args.devices,
                             deepspeed=deepspeed)
    flag = _given(args, ACCELERATE_OPTIONS)
    if flag:
        raise InputError(f"{flag}: the accelerate config and the DeepSpeed config decide it; change the files (it "
                         f"would be overridden otherwise)", flag)
    return found


def _accelerate(path: str, args, text: str | None = None, world: int | None = None):
    """The ``Setup`` of ``--accelerate`` (or of ``text``, a recipe's launch config) with the model of
    ``--hf-config``/``--preset`` on ``world`` processes (``--devices`` unless given); refuses what the
    config decides when the command line sets it too."""
    from symbolic_cost.models.accelerate import accelerate_setup     # _read's note
    text = input_file(path, "--accelerate") if text is None else text
    found = accelerate_setup(text, Path(path).stem, architecture(args), world or args.devices)
    given = assignments(getattr(args, "set", []))      # the script's batch: --set b= n_micro= (1 and 1 without)
    stated = found.values.get(S.n_micro)                # an inline deepspeed_config's gradient_accumulation_steps
    if stated is not None and given.get(S.n_micro, stated) != stated:
        raise InputError(f"--set n_micro={given[S.n_micro]}: the accelerate config's deepspeed_config."
                         f"gradient_accumulation_steps is {stated} (accelerate refuses two values)", "--set")
    found.values.update({k: given.get(k, found.values.get(k, 1)) for k in (S.b, S.n_micro)})
    decided = ACCELERATE_OPTIONS + (("--recompute",) if "recompute" in found.policy else ()) + \
        (("--flash", "--cp-variant") if "cp_variant" in found.policy else ())      # its parallelism_config's CP
    flag = _given(args, decided) or ("--precision" if options.given(args, "precision") else None)
    if flag:
        raise InputError(f"{flag}: the accelerate config of --accelerate decides it; change the file (it would be "
                         f"overridden otherwise)", flag)
    return found


LORA_OPTIONS = ("--lora-rank", "--lora-targets", "--lora-base")
"""The LoRA options, which a file with adapters decides (a TRL recipe's ``use_peft``, a Bridge ``peft``)."""


def recipe_options(found) -> tuple:
    """The options a TRL recipe's own fields decide (``models.trl_recipe``): ``--flash`` and
    ``--attention-kernel`` by its ``attn_implementation``, the LoRA options by ``use_peft``, and
    ``--reference`` always (the trainer that runs it, ``--trl-trainer``, decides whether it has one)."""
    return (("--flash",) if "flash" in found.policy else ()) + \
        (("--attention-kernel",) if "attention_kernel" in found.policy else ()) + \
        (LORA_OPTIONS if "lora_rank" in found.policy else ()) + \
        ("--reference",)


def _trainer(path: str, args):
    """The ``Setup`` of ``--hf-training-args`` with the model of ``--hf-config``/``--preset``; refuses
    what the arguments decide when the command line sets it too (``--shard``: a machine's devices for
    ``hybrid_shard``, refused otherwise)."""
    from symbolic_cost.models.hf_trainer import trainer_setup     # _read's note
    per_node = args.shard if isinstance(getattr(args, "shard", None), int) else None
    if getattr(args, "deepspeed", None) is not None:        # the Trainer's deepspeed: models.trainer_deepspeed
        from symbolic_cost.models.trainer_deepspeed import trainer_with_deepspeed
        found = trainer_with_deepspeed(input_file(path, "--hf-training-args"), Path(path).stem,
                                       input_file(args.deepspeed, "--deepspeed"), Path(args.deepspeed).stem,
                                       architecture(args), args.devices, per_node, trainer=args.trl_trainer,
                                       model_type=model_type(args), checkpoint=checkpoint_dtype(args))
    else:
        found = trainer_setup(input_file(path, "--hf-training-args"), Path(path).stem, architecture(args),
                              args.devices, per_node, trainer=args.trl_trainer, model_type=model_type(args),
                              checkpoint=checkpoint_dtype(args))
    decided = tuple(f for f in TRAINER_OPTIONS if f != "--shard" or "shard" not in found.policy) + recipe_options(found)
    flag = _given(args, decided) or ("--precision" if options.given(args, "precision") else None)
    if flag:
        raise InputError(f"{flag}: the TrainingArguments of --hf-training-args decide it; change the file (it would "
                         f"be overridden otherwise)", flag)
    return transformers_attention(found, args)


def _recipe_launch(args) -> tuple:
    """A TRL recipe's launch (``models.trl_recipe.LAUNCH``): ``(path or name, text, processes,
    notes)`` of the accelerate config to launch with (``--accelerate``, else the recipe's
    ``accelerate_config``: a file, or TRL's packaged config of that name; ``None`` without one) and
    the processes (``--devices``, else the recipe's ``num_processes``)."""
    import yaml
    from symbolic_cost.models.hf_trainer import read_arguments
    from symbolic_cost.models.trl_recipe import trl_launch_config
    recipe, _ = read_arguments(input_file(args.hf_training_args, "--hf-training-args"),
                               Path(args.hf_training_args).stem)
    named, processes, notes = recipe.get("accelerate_config"), recipe.get("num_processes"), []
    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int) or processes < 1):
        raise InputError(f"num_processes must be a positive integer, got {shown(processes)}", "num_processes")
    if processes is not None and args.devices is None:
        notes.append(f"num_processes {processes}: the processes trl passes to accelerate launch")
    world = args.devices or processes
    if getattr(args, "accelerate", None) is not None:
        notes += [f"accelerate_config {named}: --accelerate replaces it"] if named is not None else []
        return args.accelerate, None, world, notes
    if named is None:
        return None, None, world, notes
    if not isinstance(named, str):
        raise InputError(f"accelerate_config must be a file or the name of TRL's packaged config, got {shown(named)}",
                         "accelerate_config")
    if Path(named).is_file():           # trl's rule: a path first, then a name of its package
        return named, None, world, notes + [f"accelerate_config {named}: launched with that file"]
    text = yaml.safe_dump(trl_launch_config(named))
    return named, text, world, notes + [f"accelerate_config {named}: TRL's packaged trl/accelerate_configs/"
                                        f"{named}.yaml (trl at f2cd577)"]


def _launched_trainer(args, recipe_launch: tuple):
    """``--hf-training-args`` launched with an accelerate config (``recipe_launch``, ``_recipe_launch``'s:
    ``--accelerate``, or the recipe's ``accelerate_config``: TRL's and the alignment handbook's
    recipes): the world size from the launch config, the rest merged as ``models.hf_trainer.launched``
    says; refuses what either file decides when the command line sets it too."""
    from symbolic_cost.models.hf_trainer import trainer_setup     # _read's note
    path, text, processes, notes = recipe_launch
    launch = _accelerate(path, args, text, processes)
    launch.notes[:0] = notes
    per_node = args.shard if isinstance(getattr(args, "shard", None), int) else None
    world = int(launch.values[S.d] * launch.values[S.m1] * launch.values[S.p])
    found = trainer_setup(input_file(args.hf_training_args, "--hf-training-args"), Path(args.hf_training_args).stem,
                          architecture(args), world, per_node, launch=launch, trainer=args.trl_trainer,
                          model_type=model_type(args), checkpoint=checkpoint_dtype(args))
    flag = _given(args, tuple(f for f in TRAINER_OPTIONS if f != "--shard" or "shard" not in found.policy)
                  + recipe_options(found))
    if flag:
        raise InputError(f"{flag}: the TrainingArguments of --hf-training-args and the accelerate config decide it; "
                         f"change the files (it would be overridden otherwise)", flag)
    return transformers_attention(found, args)


def checkpoint_dtype(args) -> str | None:
    """The dtype the model's ``config.json`` states for its checkpoint (``--hf-config``,
    ``--hf-model``; ``None`` for a preset), which a recipe's ``torch_dtype: auto`` loads."""
    from symbolic_cost.models.trl_recipe import checkpoint_dtype as stated
    return stated(model_config(args))


def transformers_attention(found, args):
    """``found`` (a Trainer's run) with transformers' attention when nothing names one
    (``models.hf_trainer.default_attention``); ``--no-flash`` counts ``eager``, and
    ``--attention-kernel`` names another library."""
    from symbolic_cost.models.hf_trainer import default_attention
    from symbolic_cost.models.trl_recipe import KERNEL
    library = getattr(args, "attention_kernel", None)
    if "flash" not in found.policy:         # transformers' default, sdpa: typed as it is, a flag changes nothing
        if options.given(args, "flash") and args.flash:
            raise InputError("--flash: transformers' default attention, sdpa, is fused already (it would change "
                             "nothing); --no-flash counts eager", "--flash")
        if library == KERNEL["sdpa"]:
            raise InputError(f"--attention-kernel {library}: transformers' default attention, sdpa, runs it already "
                             f"(it would change nothing); name another library, or leave it", "--attention-kernel")
    return default_attention(found, eager=options.given(args, "flash") and not args.flash, library=library)


def same_devices(values: dict, typed: dict, args, name: str, said: str = "--set") -> None:
    """Refuse ``--set`` degrees (or, ``said`` naming it, a ``sweep`` grid point) that change the
    devices the layout runs on (``m1 cp p d``) from those of the file or of ``--devices``: the
    answer would be for another job than the one asked."""
    degrees = (S.m1, S.cp, S.p, S.d)
    if not any(s in typed for s in degrees) or not all(s in values or s in typed for s in (S.m1, S.p, S.d)):
        return
    from symbolic_cost.models import Training
    from symbolic_cost.models.totals import world_size

    def product(of: dict):
        return world_size(Training(**{str(s): of[s] for s in degrees if s in of}))
    before, after = product(values), product({**values, **typed})
    if not (getattr(after, "is_number", True) and getattr(before, "is_number", True)) or after == before:
        return
    changed = " ".join(f"{s}={typed[s]}" for s in degrees if s in typed)
    runs = f"--devices {args.devices}" if getattr(args, "devices", None) else f"{name}"
    raise InputError(f"{said} {changed} makes the layout m1 x cp x p x d = {after} devices, and {runs} runs "
                     f"{before}: set d (or the other degrees) so that they multiply to {before}", said.split()[0])


def _read(dest: str, path: str, args):
    """The ``Setup`` of one framework file.  Each reader is imported here, when its file is given:
    a command without one (most) does not load them (a thirtieth of a cold ``summary``)."""
    flag = FILES[dest]
    if dest in ("hf_training_args", "deepspeed", "accelerate") and getattr(args, "vocab_size", None) is not None:
        raise InputError(f"--vocab-size gives the vocabulary of a Megatron-LM script or a torchtitan file; beside "
                         f"{flag} the model (--preset, --hf-config) states its own: it would be ignored", "--vocab-size")
    if dest == "hf_training_args":
        return _trainer(path, args)
    if dest == "deepspeed":
        return _deepspeed(path, args)
    if dest == "accelerate":
        return _accelerate_deepspeed(args) if getattr(args, "deepspeed", None) is not None else \
            _accelerate(path, args)
    if dest == "megatron_bridge_recipe":
        return _bridge_recipe(args)
    if dest == "nemo_recipe":
        from symbolic_cost.models.megatron_bridge import load_yaml, megatron_bridge_setup
        from symbolic_cost.models.nemo1 import is_nemo1, nemo1_setup
        text = input_file(path, flag)
        data = load_yaml(text, Path(path).stem, flag)
        if is_nemo1(data):          # NeMo 1.x: Megatron-LM's options under NeMo's names (models.nemo1)
            return nemo1_setup(data, Path(path).stem, world=args.devices, vocab=args.vocab_size)
        if args.vocab_size is not None and isinstance(data, dict):    # an empty file: the reader names it
            raise InputError("--vocab-size: a Megatron-Bridge configuration states model.vocab_size; change the file",
                             "--vocab-size")
        return megatron_bridge_setup(text, Path(path).stem, world=args.devices)
    if dest == "torchtitan":
        return _torchtitan(path, flag, args)
    from symbolic_cost.models.launch_script import read_launch
    from symbolic_cost.models.megatron_args import megatron_setup
    from symbolic_cost.models.megatron_words import inert
    launch = read_launch(input_file(path, flag), f"{flag} {Path(path).name}", inert=inert)
    return megatron_setup(launch, Path(path).stem, world=args.devices, vocab=args.vocab_size)


def _torchtitan(path: str, flag: str, args):
    """The ``Setup`` of ``--torchtitan``: a job TOML, or a Python file's configuration named by
    ``--torchtitan-config`` (``models.torchtitan_python``)."""
    function = getattr(args, "torchtitan_config", None)
    text = input_file(path, flag)
    if Path(path).suffix == ".py":
        from symbolic_cost.models.torchtitan_python import python_setup
        return python_setup(text, Path(path), Path(path).name, function, world=args.devices, vocab=args.vocab_size)
    if function is not None:
        raise InputError(f"--torchtitan-config {function}: names a function of a Python file of torchtitan "
                         f"configurations; {Path(path).name} is a job TOML", "--torchtitan-config")
    from symbolic_cost.models.torchtitan import torchtitan_setup
    from symbolic_cost.timing.systems import CALIBRATED
    return torchtitan_setup(text, Path(path).stem, world=args.devices, vocab=args.vocab_size,
                            gpu=CALIBRATED.get(getattr(args, "system", None), {}).get("arch"))


def _bridge_recipe(args):
    """The ``Setup`` of ``--megatron-bridge-recipe``: on the model of ``--preset``/``--hf-config``/
    ``--hf-model`` when one is given, else on the Hugging Face model the recipe names (through the hub
    client, as ``--hf-model``); a ``--nemo-recipe`` YAML beside it overrides the recipe's fields."""
    from symbolic_cost.models import bridge_recipes, hub
    from symbolic_cost.models.megatron_bridge import load_yaml
    if args.vocab_size is not None:
        raise InputError("--vocab-size: a Megatron-Bridge recipe's model states its vocabulary", "--vocab-size")
    name, given = args.megatron_bridge_recipe, None
    r = bridge_recipes.recipe(name)
    if args.hf_config or args.hf_model or options.given(args, "preset"):
        given = args.hf_config or args.hf_model or f"--preset {args.preset}"
        arch = architecture(args)
    else:
        try:
            arch = hub.load(r["hf_model"], revision=r["hf_revision"])
        except InputError as error:       # say which model the recipe asked the Hub for
            raise InputError(f"--megatron-bridge-recipe {name} builds {r['hf_model']} from the Hugging Face Hub: "
                             f"{error.args[0]}", "--megatron-bridge-recipe") from None
    overrides = None
    if args.nemo_recipe is not None:
        overrides = load_yaml(input_file(args.nemo_recipe, "--nemo-recipe"), Path(args.nemo_recipe).name,
                              "--nemo-recipe")
        if overrides is None:       # a file of comments only: OmegaConf.load gives an empty config, no override
            overrides = {}
        if isinstance(overrides, dict) and "ConfigContainer" in overrides:
            # Megatron-Bridge's performance script (scripts/performance/run_script.py) merges only this subtree
            beside = [key for key in overrides if key != "ConfigContainer"]
            if "perf_matrix" in beside:
                raise InputError(f"{args.nemo_recipe}: perf_matrix: Megatron-Bridge's performance script applies "
                                 f"one of its entries (by GPU, GPU count and compute dtype: its command line's "
                                 f"choice, which the file does not make) over ConfigContainer, changing the "
                                 f"layout and batch; the reader does not choose one: give that entry's values with "
                                 f"--set, or write them under ConfigContainer", "--nemo-recipe")
            if beside:
                raise InputError(f"{args.nemo_recipe}: {beside[0]} beside ConfigContainer: the performance script "
                                 f"merges ConfigContainer alone, and the reader does not read {beside[0]!r}",
                                 "--nemo-recipe")
            overrides = overrides["ConfigContainer"] or {}
        if not isinstance(overrides, dict):
            raise InputError(f"{args.nemo_recipe}: a Megatron-Bridge override YAML is a mapping of sections",
                             "--nemo-recipe")
    return bridge_recipes.recipe_setup(name, arch, args.devices, overrides, model_given=given)


def setup(args, only_with: tuple = ONLY_WITH):
    """The ``models.megatron_args.Setup`` of ``--megatron-args`` or ``--torchtitan`` (None without
    one; ``args.framework`` too), its notes with the ``--set`` replacements; refuses the options the
    file decides and, without a file, the options of ``only_with`` (``--devices`` and
    ``--vocab-size``; ``search`` takes ``--devices`` without one)."""
    chosen = [d for d in FILES if getattr(args, d, None) is not None]
    pair = chosen in (["accelerate", "hf_training_args"],       # a Trainer script under accelerate launch
                      ["deepspeed", "hf_training_args"],         # or with a DeepSpeed config
                      ["deepspeed", "accelerate"])               # an accelerate config naming a DeepSpeed JSON
    if chosen == ["nemo_recipe", "megatron_bridge_recipe"]:    # a recipe and the YAML that overrides it
        chosen = ["megatron_bridge_recipe"]
    elif "nemo_recipe" in chosen and (getattr(args, "hf_config", None) or getattr(args, "hf_model", None)
                                      or options.given(args, "preset")):
        raise InputError("--nemo-recipe states its model (its model: section); --preset, --hf-config and --hf-model "
                         "go with --megatron-bridge-recipe, whose YAML overrides it", "--nemo-recipe")
    if len(chosen) > 1 and not pair:
        raise InputError(f"{' and '.join(FILES[d] for d in chosen)}: give one framework file (or --accelerate "
                         f"or --deepspeed with --hf-training-args, --accelerate with the --deepspeed JSON its "
                         f"deepspeed_config_file names, or --megatron-bridge-recipe with --nemo-recipe)",
                         FILES[chosen[-1]])
    dest = chosen[-1] if chosen else None
    if getattr(args, "torchtitan_config", None) is not None and dest != "torchtitan":
        raise InputError("--torchtitan-config names a function of the --torchtitan Python file; give the file",
                         "--torchtitan-config")
    if getattr(args, "trl_trainer", None) is not None and dest not in (None, "hf_training_args"):
        raise InputError(f"--trl-trainer names the TRL trainer of a --hf-training-args recipe; {FILES[dest]} has "
                         f"none (it would be ignored)", "--trl-trainer")
    if dest is None:
        for flag in only_with:
            if getattr(args, flag[2:].replace("-", "_"), None) is not None:
                raise InputError(f"{flag} applies to a framework file (--megatron-args, --torchtitan, --nemo-recipe, "
                                 f"--megatron-bridge-recipe, --deepspeed, --accelerate, --hf-training-args); it would "
                                 f"be ignored", flag)
        args.framework = None
        return None
    if getattr(args, "framework", None) is not None:
        return args.framework
    name = FILES[dest]
    decides = dict(torchtitan=TORCHTITAN_OPTIONS, nemo_recipe=NEMO_OPTIONS, megatron_bridge_recipe=NEMO_OPTIONS,
                   megatron_args=MEGATRON_OPTIONS).get(dest, FILE_OPTIONS)
    if dest == "torchtitan" and Path(str(args.torchtitan)).suffix == ".py":   # its attention has no bars: yours
        decides = tuple(flag for flag in decides if flag != "--attention-kernel")
    flag = None if dest in ("deepspeed", "accelerate", "hf_training_args") else _given(args, decides)
    if flag:
        raise InputError(f"{flag}: the settings of {name} decide it; change the file (it would be overridden "
                         f"otherwise)", flag)
    if getattr(args, "tensor", "1d") not in ("1d", ["1d"]):       # search takes a list
        raise InputError(f"--tensor: the framework's tensor parallelism is 1d; {name} reads it", "--tensor")
    recipe_launch = _recipe_launch(args) if dest == "hf_training_args" else (None, None, None, [])
    path, _, processes, launch_notes = recipe_launch      # a TRL recipe may name its launch itself
    if path is not None and getattr(args, "deepspeed", None) is not None:
        raise InputError(f"--deepspeed beside a recipe launched with the accelerate config {path}: give one launch "
                         f"(an accelerate config's deepspeed_config, or --deepspeed)", "--deepspeed")
    if path is None and processes is not None and args.devices is None:
        args.devices = processes            # accelerate launch --num_processes, one process a device
    found = _launched_trainer(args, recipe_launch) if path is not None else _read(dest, getattr(args, dest), args)
    if path is None:
        found.notes[:0] = launch_notes
    adapted = _given(args, LORA_OPTIONS) if "lora_rank" in found.policy else None
    if adapted:
        raise InputError(f"{adapted}: the LoRA of {name} decides it (its peft or use_peft settings); change the file "
                         f"(it would be overridden otherwise)", adapted)
    if dest == "megatron_args" and "zero" in found.policy and _given(args, ("--zero",)):
        raise InputError(f"--zero: the script's FSDP decides it (ZeRO-{found.policy['zero']}); change the file",
                         "--zero")
    if pair:
        name = f"{FILES[chosen[0]]} with {FILES[chosen[1]]}"
    typed = assignments(getattr(args, "set", []))
    for symbol, value in typed.items():
        if symbol in found.values and value != found.values[symbol]:
            found.notes.append(f"--set {symbol}={value} replaces the file's {symbol}={found.values[symbol]}")
    same_devices(found.values, typed, args, name)
    args.framework_name = name
    policy = dict(found.policy)
    overlap = policy.pop("overlap")
    args.overlap = overlap.words()
    args.fp8_16bit_layers = [policy.pop("first_layers_16bit", 0), policy.pop("last_layers_16bit", 0)]
    unread = sorted(set(policy) - options.READ_AS_TYPED)
    if unread:      # a reader's slip: a setting no command reads would vanish without a word
        raise RuntimeError(f"{name}'s reader gave {', '.join(unread)}, which no option reads")
    for name, value in policy.items():     # read by options.training_policy and recipe_policy as if typed
        setattr(args, name, value)
    args.framework = found
    return found
