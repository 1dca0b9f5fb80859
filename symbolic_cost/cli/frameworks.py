"""Starting from a framework's settings: ``--megatron-args FILE`` (a Megatron-LM launch script or
arguments file, ``models.megatron_args``) in place of ``--preset``/``--hf-config`` and ``--set``.

The file decides the model and the training.  On the command line beside it:

* ``--devices N`` gives the world size (the launcher's ``--nproc_per_node x --nnodes`` otherwise;
  given, it replaces them) and ``--vocab-size N`` the vocabulary a tokenizer file holds;
* ``--set NAME=VALUE`` replaces a value the file gives (``b``, ``l``, ``m1``, ``s1``, ``d``, ``p``,
  ``n_micro``, ``ep``, ``etp``), explicitly: each replacement is listed in the output's notes;
* the options the file decides (``FILE_OPTIONS``: precision, recomputation, schedule, overlap,
  FP8, flash attention, the distributed optimizer, the capacity factor) set away from their defaults
  are refused: change the file (one typed at its default value cannot be told from none);
* what Megatron-LM's arguments do not say (``--zero``, ``--optimizer``, ``--offload``, LoRA,
  ``--conventions``, ``--system``, ...) is taken from the command line as usual.
"""

from __future__ import annotations

from pathlib import Path

from symbolic_cost.checks import InputError, input_file
from symbolic_cost.cli import options
from symbolic_cost.cli.values import assignments
from symbolic_cost.models.launch_script import read_launch
from symbolic_cost.models.megatron_args import megatron_setup

FILE_OPTIONS = ("--precision", "--distributed-optimizer", "--recompute", "--recompute-method", "--recompute-layers",
                "--schedule", "--virtual-stages", "--first-stage-layers", "--last-stage-layers", "--overlap", "--fp8",
                "--flash", "--capacity-factor")
"""Options whose choice the Megatron arguments make (refused beside ``--megatron-args`` when set away
from their defaults)."""

ONLY_WITH = ("--devices", "--vocab-size")


def add_arguments(parser) -> None:
    """``--devices`` and ``--vocab-size`` (``--megatron-args`` itself is a model option: ``options.model``)."""
    options.option(parser, "--devices", type=int, help="with --megatron-args: the world size (default: the "
                   "launcher's --nproc_per_node x --nnodes)")
    options.option(parser, "--vocab-size", type=int, help="with --megatron-args: the tokenizer's vocabulary when "
                   "the arguments read it from a tokenizer file (before Megatron pads it)")


def _given(args) -> str | None:
    """The first option of ``FILE_OPTIONS`` set away from its default (one typed at its default value cannot
    be told from none)."""
    defaults = dict(precision=options.PLAIN.precision, distributed_optimizer=options.PLAIN.distributed_optimizer,
                    recompute=options.PLAIN.recompute, recompute_method=options.PLAIN.recompute_method,
                    recompute_layers=options.PLAIN.recompute_layers, schedule=options.PLAIN.schedule,
                    virtual_stages=options.PLAIN.virtual_stages, first_stage_layers=None, last_stage_layers=None,
                    overlap=[], fp8=None, flash=options.PLAIN.flash, capacity_factor=None,
                    cp_variant=None)
    for name, default in defaults.items():
        if hasattr(args, name) and getattr(args, name) != default:
            return "--" + name.replace("_", "-")
    return None


def setup(args, only_with: tuple = ONLY_WITH):
    """The ``models.megatron_args.Setup`` of ``--megatron-args`` (None without it; ``args.framework``
    too), its notes with the ``--set`` replacements; refuses ``FILE_OPTIONS`` and, without the file,
    the options of ``only_with`` (``--devices`` and ``--vocab-size``; ``search`` takes ``--devices``
    without one)."""
    path = getattr(args, "megatron_args", None)
    if path is None:
        for flag in only_with:
            if getattr(args, flag[2:].replace("-", "_"), None) is not None:
                raise InputError(f"{flag} applies to --megatron-args; it would be ignored", flag)
        args.framework = None
        return None
    if getattr(args, "framework", None) is not None:
        return args.framework
    flag = _given(args)
    if flag:
        raise InputError(f"{flag}: the Megatron arguments of --megatron-args decide it; change the file "
                         f"(it would be overridden otherwise)", flag)
    if getattr(args, "tensor", "1d") not in ("1d", ["1d"]):       # search takes a list
        raise InputError("--tensor: Megatron-LM's tensor parallelism is 1d; --megatron-args reads it", "--tensor")
    launch = read_launch(input_file(path, "--megatron-args"), f"--megatron-args {Path(path).name}")
    found = megatron_setup(launch, Path(path).stem, world=args.devices, vocab=args.vocab_size)
    for symbol, value in assignments(getattr(args, "set", [])).items():
        if symbol in found.values:
            found.notes.append(f"--set {symbol}={value} replaces the arguments' {symbol}={found.values[symbol]}")
    policy = dict(found.policy)
    overlap = policy.pop("overlap")
    args.overlap = [name for name, on in (("grad", overlap.grad_reduce), ("param", overlap.param_gather),
                                          ("tensor", overlap.tensor)) if on]
    for name, value in policy.items():     # read by options.training_policy and recipe_policy as if typed
        setattr(args, name, value)
    args.framework = found
    return found
