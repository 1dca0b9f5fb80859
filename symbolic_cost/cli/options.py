"""The command line's parser and the option groups several commands share, each declared once.

A command module calls the groups it needs (``model``, ``settings``, ``training``,
``counting``, ``block``, ``units``, ``latex``) and adds its own options with
``option``, which appends ``(default: ...)`` to the help of every option that has
a default.  The shared defaults are the plain, physical ones: the ``default``
conventions, an H100 system, and the training defaults of ``models.Training``.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from fractions import Fraction

from symbolic_cost import conventions as conv
from symbolic_cost.cli.parser import MAX_INTEGER, Parser, UsageError, exact, integer, text  # noqa: F401  (options.*)
from symbolic_cost.blocks import BUILDERS
from symbolic_cost.blocks.graphs import SCOPES as GRAPH_SCOPES
from symbolic_cost.models.config import PRESETS as MODELS
from symbolic_cost.models.training import (PRECISIONS, RECOMPUTE, RECOMPUTE_METHODS, RECOMPUTE_MODULES, Overlap,
                                           Training, overlaps_sends)
from symbolic_cost.blocks.context import VARIANTS as CP_VARIANTS
from symbolic_cost.models.training_values import ATTENTION_KERNELS
from symbolic_cost.blocks.wiring import DISPATCHERS
from symbolic_cost.parallel.grid import KINDS as TENSOR_LAYOUTS
from symbolic_cost.parallel.pipeline import SCHEDULES
from symbolic_cost.numeric.tables import UNITS
from symbolic_cost.timing.hardware import SYSTEMS

PLAIN = Training()
"""Plain training (no sharding, no recomputation, bf16): the source of the training defaults."""

SYSTEM = "h100"
CONVENTIONS = "default"
MODEL = "gpt3-175b"
UNIT = "gib"
"""Defaults of ``--system``, ``--conventions``, ``--preset`` and ``--units``."""


class Given(argparse.Action):
    """Store the value and note that it was given, so that ``given`` can tell an explicit
    choice from the default (a starting point such as ``lstm --from`` yields to it)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        setattr(namespace, f"given_{self.dest}", True)


class GivenSwitch(argparse.BooleanOptionalAction):
    """``--x`` / ``--no-x`` that notes it was given, as ``Given`` does: ``--no-flash`` typed at the
    default is still a choice a framework file's setting would override."""

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        setattr(namespace, f"given_{self.dest}", True)


class GivenOff(argparse.Action):
    """A ``--no-x`` switch (``store_false``) that notes it was given, as ``Given`` does: a framework
    file's reader may set the same value without it being typed."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, default=True, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, False)
        setattr(namespace, f"given_{self.dest}", True)


def refuse_idle_schedule(args, p_values, framework, remedy: str = "") -> None:
    """Refuse ``--schedule`` set on the command line away from its default where a ``p`` of
    ``p_values`` is 1 (no pipeline): it would change nothing there, as ``--virtual-stages`` with
    ``p = 1`` (refused by ``Pipeline``).  A framework file's own settings are its own."""
    from symbolic_cost.checks import InputError
    if not framework and args.schedule != PLAIN.schedule and 1 in p_values:
        raise InputError(f"--schedule {args.schedule} schedules a pipeline, and p=1 has none; it would be "
                         f"ignored{remedy}", "--schedule")


def given(args, dest: str) -> bool:
    """Whether option ``dest`` (declared with ``action=Given`` or ``GivenSwitch``) was on the
    command line."""
    return getattr(args, f"given_{dest}", False)


def refuse_unchanged(args, defaults: dict, result, compute, what: str) -> None:
    """Refuse by name each option of ``defaults`` (``{dest: default}``) set away from its default
    when ``compute`` of the same arguments with it at its default gives the same ``result``:
    it cannot act on ``what`` here, so it would be ignored."""
    from symbolic_cost.checks import InputError
    for dest, default in defaults.items():
        if getattr(args, dest, default) != default and compute(argparse.Namespace(**{**vars(args), dest: default})) \
                == result:
            flag = "--" + dest.replace("_", "-")
            raise InputError(f"{flag} does not change {what} here; it would be ignored", flag)


def option(parser, *flags, **kw):
    """``parser.add_argument`` that shows the default in the help (when there is one)."""
    action = parser.add_argument(*flags, **kw)
    shown = action.default not in (None, [], argparse.SUPPRESS) and kw.get("action") != "store_true"
    if shown and action.help and "%(default)" not in action.help and "(default" not in action.help:
        action.help += " (default: %(default)s)"
    return action


def command(sub, module) -> argparse.ArgumentParser:
    """The subcommand of ``module``: named after it, described by its docstring's first
    paragraph, with its ``EXAMPLES`` as the epilog and its ``add_arguments`` options."""
    name = module.__name__.rsplit(".", 1)[-1]
    summary = " ".join(module.__doc__.strip().split("\n\n")[0].split())
    parser = sub.add_parser(name, help=summary, description=summary,
                            epilog="examples:\n" + "\n".join(f"  {line}" for line in module.EXAMPLES),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(parser)
    parser.set_defaults(run=module.run)
    return parser


def pairs(parser, flag: str, help: str):
    """A ``NAME=VALUE`` option taking several pairs after one flag, or repeated flags."""
    return option(parser, flag, action="extend", nargs="+", default=[], metavar="NAME=VALUE", help=help)


def settings(parser, help: str = "fix symbols: NAME=VALUE pairs, several after one --set or repeated; "
                                  "values may be formulas (f=4*e)"):
    """``--set``: values of the symbols (``symbols.BY_NAME``)."""
    return pairs(parser, "--set", help)


def long_sequences(group):
    """``--allow-long``: sequences past the model's stated context (refused without it)."""
    option(group, "--allow-long", action="store_true", help="allow sequences longer than the model's context")


def model(parser, default: str | None = MODEL, megatron: bool = False):
    """``--preset``, ``--hf-config`` or ``--hf-model`` (or, with ``megatron``, a framework file:
    ``--megatron-args`` or ``--torchtitan``, ``cli.frameworks``): the model whose dimensions are used."""
    group = parser.add_argument_group("model")
    source = group.add_mutually_exclusive_group()
    text = "a bundled model" if default else "a bundled model (default: none, every dimension a symbol)"
    option(source, "--preset", choices=MODELS, default=default, help=text, action=Given)
    option(source, "--hf-config", metavar="PATH", help="a Hugging Face config.json instead of --preset")
    option(source, "--hf-model", metavar="ID",
           help="a Hugging Face model id (e.g. meta-llama/Llama-2-7b-hf): its config.json through the hub "
                "client's cache (pip install 'symbolic_cost[hub]'; HF_HUB_OFFLINE=1 reads the cache only)")
    if megatron:
        option(source, "--megatron-args", metavar="FILE",
               help="a Megatron-LM launch script (its pretrain_gpt.py line) or arguments file: the model and the "
                    "training as Megatron-LM builds them (README: Starting from a framework's settings)")
        option(source, "--torchtitan", metavar="FILE",
               help="a torchtitan job TOML (train_configs/*.toml) or Python file of configurations "
                    "(config_registry.py, torchtitan_recipes/*.py; with --torchtitan-config): the llama3 flavour and "
                    "the training as torchtitan builds them (docs/frameworks.md)")
        option(group, "--torchtitan-config", metavar="NAME",
               help="with a --torchtitan Python file: the function returning the Trainer.Config, as torchtitan's "
                    "--config names it (llama3_8b, ...); read without running the file")
        option(group, "--nemo-recipe", metavar="FILE",
               help="a NeMo Framework / Megatron-Bridge ConfigContainer YAML (to_yaml(), a run's printed task "
                    "configuration): the model and the training as Megatron-Bridge builds them; beside "
                    "--megatron-bridge-recipe, the YAML that overrides it; or a NeMo 1.x megatron_*_config.yaml "
                    "(trainer:, model:), read as the Megatron-LM options it stands for (docs/frameworks.md)")
        option(group, "--megatron-bridge-recipe", metavar="NAME",
               help="a Megatron-Bridge recipe by its function's name (llama31_405b_pretrain_config, "
                    "llama3_70b_pretrain_64gpu_gb200_fp8cs_config, ...): its layout as published, on the Hugging "
                    "Face model it names (or --preset/--hf-config/--hf-model), overridden by a --nemo-recipe YAML "
                    "(docs/frameworks.md)")
        option(group, "--accelerate", metavar="FILE",
               help="a Hugging Face accelerate config YAML beside --hf-config/--preset: its processes, FSDP or DDP, "
                    "precision, offload and checkpointing; with --deepspeed, the DeepSpeed JSON its "
                    "deepspeed_config_file names (docs/frameworks.md)")
        option(group, "--hf-training-args", metavar="FILE",
               help="a Hugging Face TrainingArguments JSON (to_json_string()) or a TRL / alignment-handbook recipe "
                    "YAML beside --hf-config/--preset: its batch, accumulation, precision, FSDP, checkpointing and "
                    "optimizer (and a recipe's sequence length, attention and LoRA); the world size from --devices, "
                    "or from the launch config of --accelerate given with it (docs/frameworks.md)")
        option(group, "--trl-trainer", choices=("sft", "dpo", "orpo", "reward"),
               help="with --hf-training-args: the TRL trainer that runs the recipe (trl sft|dpo|orpo|reward, the "
                    "alignment handbook's scripts/<trainer>.py): dpo, orpo and reward run each example's chosen and "
                    "rejected sequences, dpo a reference model's forward too, reward the model as a classifier of "
                    "one label (default: sft)")
        option(group, "--deepspeed", metavar="FILE",
               help="a DeepSpeed config JSON beside --hf-config/--preset: its ZeRO stage, offload, batch and precision "
                    "(docs/frameworks.md)")
    option(group, "--revision", help="with --hf-model: a branch, tag or commit")


def precision(parser):
    """``--precision``: bytes per element (``models.training.element_bytes``)."""
    option(parser, "--precision", action=Given, choices=PRECISIONS, default=PLAIN.precision,
           help="number format of weights and activations")


def flash(parser):
    """``--flash`` / ``--no-flash``: fused attention that keeps no ``l^2`` scores."""
    option(parser, "--flash", action=GivenSwitch, default=PLAIN.flash,
           help="fused flash attention (keeps no l^2 scores)")


def training(parser, distributed_optimizer: bool = True, recompute: bool = True, shard: bool = True):
    """How the model is trained: precision, ZeRO stage, recomputation, flash attention
    (a command that chooses some of these itself leaves them out)."""
    group = parser.add_argument_group("training")
    precision(group)
    option(group, "--zero", type=integer(0), choices=[0, 1, 2, 3], default=PLAIN.zero, action=Given, help="ZeRO stage")
    if shard:
        option(group, "--shard", type=integer(1), metavar="N", default=PLAIN.shard,
               help="with --zero 3: shard the state over groups of N data-parallel ranks, replicated over d/N "
                    "groups (HSDP: FSDP2 on a 2-D mesh; gradients all-reduced across the groups; default: all of d)")
    option(group, "--reshard-after-forward", action=GivenSwitch,
           default=PLAIN.reshard_after_forward,
           help="with --zero 3: free each layer's gathered weights after its forward and gather them again in "
                "backward (FSDP2's default); --no-reshard-after-forward keeps them until backward")
    if distributed_optimizer:
        option(group, "--distributed-optimizer", action="store_true", default=PLAIN.distributed_optimizer,
               help="shard the optimizer state over data parallelism (Megatron)")
    if recompute:
        option(group, "--recompute", choices=RECOMPUTE, default=PLAIN.recompute, action=Given,
               help="activation recomputation: selective (the attention core), activation (every activation "
                    "function: the MLP's, the experts' as Megatron-LM's moe_act), full (whole layers)")
        option(group, "--recompute-modules", nargs="+", metavar="MODULE", default=list(PLAIN.recompute_modules),
               help="with --recompute selective: Megatron-LM's modules to recompute, any of "
                    f"{', '.join(RECOMPUTE_MODULES)} (default core_attn)")
        option(group, "--recompute-method", choices=RECOMPUTE_METHODS, default=PLAIN.recompute_method, action=Given,
               help="full recomputation: checkpoint every group of N layers, or the first N of each model chunk")
        option(group, "--recompute-layers", type=int, default=PLAIN.recompute_layers, action=Given,
               help="N for --recompute-method")
        option(group, "--schedule", choices=SCHEDULES, default=PLAIN.schedule, action=Given,
               help="pipeline schedule (zb-h1: zero-bubble H1; dualpipe: DeepSeek-V3's bidirectional schedule, "
                    "two stages a rank, p even, n_micro even and at least 2p)")
        option(group, "--virtual-stages", type=int, default=PLAIN.virtual_stages, action=Given,
               help="model chunks per pipeline rank (interleaved schedule)")
        option(group, "--first-stage-layers", type=int, help="layers on the first pipeline rank "
               "(default: an even split; the other layers split evenly)")
        option(group, "--last-stage-layers", type=int, help="layers on the last pipeline rank")
        option(group, "--embedding-in-split", action="store_true", help="count the embedding as a layer of the "
               "first rank's first model chunk (Megatron-LM's --account-for-embedding-in-pipeline-split)")
        option(group, "--loss-in-split", action="store_true", help="count the loss as a layer of the last "
               "rank's last model chunk (Megatron-LM's --account-for-loss-in-pipeline-split)")
        option(group, "--pipeline-layout", metavar="LAYOUT", help="every pipeline stage's layers, as Megatron-LM's "
               "--pipeline-model-parallel-layout (E embedding, t layer, L loss, | between stages, (..)*n and x*n "
               "repeats; stage s is chunk s // p of rank s mod p: --virtual-stages = stages / p)")
        long_sequences(group)
        option(group, "--cp-variant", choices=CP_VARIANTS, help="context parallelism (--set cp=N): ring (K, V "
               "passed point to point, Megatron-LM; default; latent attention runs under it only), all-gather "
               "(Llama 3) or ulysses (all-to-all of heads); a sliding window runs under the last two, sinks under "
               "ulysses, as Transformer Engine runs them")
        option(group, "--overlap", type=field_list(OVERLAPS), default=[],
               help="communication run behind compute: grad (--overlap-grad-reduce), param "
                    "(--overlap-param-gather), tensor (--tp-comm-overlap), expert (the MoE all-to-alls behind "
                    "another micro-batch's compute: --overlap-moe-expert-parallel-comm), shared (the same "
                    "all-to-alls behind the layer's shared experts: --moe-shared-expert-overlap), no-p2p (the "
                    "interleaved schedule's stage sends not behind the next chunk: --no-overlap-p2p-communication), "
                    "comma-separated (default: only the interleaved schedule's sends, as Megatron-LM)")
    flash(group)
    option(group, "--attention-kernel", choices=ATTENTION_KERNELS, action=Given,
           help="the fused attention library your framework runs, for the time model: cudnn (Transformer "
                "Engine: Megatron-LM, NeMo), flash-attention-2 (PyTorch's scaled_dot_product_attention, Hugging "
                "Face's sdpa and flash_attention_2), flash-attention-3 (Hopper only) (default: the system's, "
                "cudnn on Hopper and Blackwell, flash-attention-2 on A100); needs --flash")
    option(group, "--loss-chunks", type=integer(1), metavar="N", default=PLAIN.loss_chunks, action=Given,
           help="the LM head and its loss run a piece of the sequence at a time, each piece's backward before "
                "the next, so one piece's logits are alive at once (torchtitan's chunked loss) (default: 1, the "
                "whole logits)")
    option(group, "--cuda-graphs", type=field_list(GRAPH_SCOPES), default=[], metavar="SCOPE[,SCOPE...]",
           action=Given,
           help="parts of each layer replayed from CUDA graphs, for the time model (a replayed graph is one "
                "kernel launch): Megatron-Core's --cuda-graph-scope, any of attn, mlp (a dense layer's), moe (a "
                "capacity factor's MoE module), moe_router, moe_preprocess (with moe_router), or full_iteration "
                "(the whole step); FLOPs and bytes stay the same (default: none)")
    option(group, "--fused-loss", action="store_true", default=PLAIN.fused_loss,
           help="the LM head and its loss as one function that forms both gradients in the forward, a chunk of "
                "tokens' logits at a time, keeping the gradients of the head's input and weights instead of the "
                "logits (Liger-Kernel's fused linear cross-entropy, transformers' use_liger_kernel)")


def experts(parser):
    """``--capacity-factor``, ``--expert-imbalance``, ``--dispatcher``: how tokens reach the experts
    of an MoE model (``blocks.moe``; the degrees ``ep`` and ``etp`` are set with ``--set``)."""
    group = parser.add_argument_group("mixture of experts")
    option(group, "--capacity-factor", type=exact(), metavar="C",
           help="pad or drop every expert's rows from each rank to ceil(C t k / E) (default: dropless)")
    option(group, "--expert-imbalance", type=exact(), default=Fraction(PLAIN.expert_imbalance), metavar="X",
           help="rows the busiest expert-parallel rank receives over the mean (1: token-balanced routing)")
    option(group, "--dispatcher", choices=DISPATCHERS, default=PLAIN.dispatcher,
           help="the token dispatcher: alltoall (the default: every routed copy sent to its expert's "
                "rank) or flex (DeepEP or HybridEP: a token crosses the network once for each other NVLink "
                "domain holding one of its experts; --moe-token-dispatcher-type flex)")
    option(group, "--no-mtp", dest="mtp", action="store_false",
           help="leave out the model's multi-token-prediction modules (DeepSeek-V3's; trained by default)")


OVERLAPS = tuple(word for word, _ in Overlap.WORDS + Overlap.NEGATED)


def refuse_unread(args) -> None:
    """Refuse an option typed at its default where the training it sets is never read (away from it,
    ``Training`` refuses it itself):
    ``--recompute-method``/``--recompute-layers`` without full recomputation, ``--reshard-after-forward``
    without ZeRO-3, ``--no-master-weights`` in fp32 (no 16-bit recipe keeps a master copy there),
    ``--distributed-optimizer`` beside ``--zero`` 1 to 3 (which shard the optimizer state already)."""
    from symbolic_cost.checks import InputError
    at_default = lambda name: given(args, name) and getattr(args, name) == getattr(PLAIN, name)  # noqa: E731
    unread = [("--recompute-method", at_default("recompute_method"), getattr(args, "recompute", None) != "full",
               "applies to --recompute full only"),      # away from the default, Training refuses it itself
              ("--recompute-layers", at_default("recompute_layers"), getattr(args, "recompute", None) != "full",
               "applies to --recompute full only"),
              ("--reshard-after-forward", given(args, "reshard_after_forward") and args.reshard_after_forward,
               getattr(args, "zero", 3) != 3, "applies to --zero 3 (FSDP's gathers) only"),
              ("--no-master-weights", getattr(args, "master_weights", True) is False,
               getattr(args, "precision", None) == "fp32", "drops the fp32 copy of a 16-bit recipe; fp32 keeps none"),
              ("--distributed-optimizer", getattr(args, "distributed_optimizer", False)     # typed, not a file's
               and getattr(args, "framework", None) is None, getattr(args, "zero", 0) >= 1,
               "shards the optimizer state over the data-parallel ranks, which --zero 1 and above do already")]
    for flag, typed, unused, why in unread:
        if typed and unused:
            raise InputError(f"{flag} {why}; it would be ignored", flag)


DATA_DIMENSIONS = ("data", "expert_data", "reference")
"""The collective dimensions of data parallelism (``models.totals``), whose gradients and
parameters ``--overlap grad`` and ``param`` hide (``"reference"``: a reference model's ZeRO-3
gathers)."""

OVERLAP_HIDES = {
    "grad": ("gradient reduction over data-parallel ranks",
             lambda dim, c: dim in DATA_DIMENSIONS and c.kind in ("allreduce", "reducescatter")),
    "param": ("parameter all-gather over data-parallel ranks",
              lambda dim, c: dim in DATA_DIMENSIONS and c.kind == "allgather"),
    "tensor": ("tensor- or context-parallel collective in its layers",
               lambda dim, c: dim not in DATA_DIMENSIONS + ("pipeline", "optimizer") and c.kind != "alltoall"),
    "expert": ("MoE all-to-all", lambda dim, c: c.kind == "alltoall" and dim not in DATA_DIMENSIONS),
}
"""What each ``--overlap`` word hides (``timing.step``): the step's collectives it would run
behind compute, as ``(words, test on (dimension, collective))``."""


def refuse_idle_overlap(args, cost) -> None:
    """Refuse an ``--overlap`` word typed on the command line (a framework file's are its own)
    where the step has nothing it hides (``OVERLAP_HIDES``: ``grad`` at ``d = 1``, ``tensor`` at
    ``m1 = cp = 1``, ...); it would be ignored.  Decided only where every collective's group is a
    number: a symbolic degree may be 1 or not."""
    from symbolic_cost.checks import InputError
    typed = getattr(args, "overlap", None) if getattr(args, "framework", None) is None else None
    if not typed or any(not c.group.is_number for _, c in cost.collectives):
        return
    for word in typed:
        if word in OVERLAP_HIDES:
            what, hidden = OVERLAP_HIDES[word]
            if not any(hidden(dim, c) for dim, c in cost.collectives):
                raise InputError(f"--overlap {word}: this step has no {what} to hide; it would be ignored",
                                 "--overlap")
    if "no-p2p" in typed and not overlaps_sends(replace(cost.training, overlap=Overlap())):
        raise InputError("--overlap no-p2p: only the interleaved schedule runs its stage sends behind compute "
                         "(Megatron-LM turns overlap_p2p_comm off outside it); it would be ignored", "--overlap")


def refuse_idle_allow_long(args, arch, training) -> None:
    """Refuse ``--allow-long`` where every sequence of ``training`` is within ``arch``'s context
    (the limit ``models.training.check_context`` applies; it would be ignored).  Decided only
    where the lengths and the limit are numbers."""
    from sympy import sympify
    from symbolic_cost.checks import InputError
    from symbolic_cost.models.training import context_limit
    if not getattr(args, "allow_long", False):
        return
    limit = context_limit(arch)
    spans = [sympify(training.l)] + ([sympify(training.decoder_tokens)] if arch.encoder_decoder else [])
    if limit.is_number and limit != 0 and all(s.is_number and s <= limit for s in spans):
        raise InputError(f"--allow-long: l = {', '.join(str(s) for s in spans)} is within the context of "
                         f"{arch.name} ({limit} tokens); it would be ignored", "--allow-long")


def training_policy(args) -> dict:
    """The ``Training`` fields the training options set (those a command offers); an option typed
    where the training never reads it (``refuse_unread``) is refused."""
    refuse_unread(args)
    policy = {}
    if getattr(args, "overlap", None):
        policy["overlap"] = Overlap.of_words(set(args.overlap))
    if getattr(args, "recompute_modules", None):
        policy["recompute_modules"] = tuple(args.recompute_modules)
    if getattr(args, "cp_variant", None) is not None:
        policy["cp_variant"] = args.cp_variant
    return policy | {name: getattr(args, name) for name in TRAINING_POLICY if hasattr(args, name)}


TRAINING_POLICY = ("precision", "zero", "distributed_optimizer", "recompute", "recompute_method", "recompute_layers",
                   "schedule", "virtual_stages", "first_stage_layers", "last_stage_layers", "embedding_in_split",
                   "loss_in_split", "pipeline_layout", "flash", "capacity_factor",
                   "expert_imbalance", "dispatcher", "mtp", "allow_long", "shard", "reshard_after_forward",
                   "attention_kernel", "loss_chunks", "fused_loss", "tp_ends", "cuda_graphs")
"""The options ``training_policy`` passes on to ``Training`` as typed (besides ``overlap``,
``recompute_modules`` and ``cp_variant``, which it reads apart)."""


def counting(parser, conventions: str = CONVENTIONS, kernel_time: bool = True):
    """``--conventions``, ``--system`` (and ``--kernel-time``): how to count and on what."""
    group = parser.add_argument_group("counting")
    option(group, "--conventions", action=Given, choices=list(conv.PRESETS), default=conventions,
           help="counting conventions preset")
    option(group, "--system", action=Given, choices=list(SYSTEMS), default=SYSTEM, help="the hardware")
    option(group, "--system-file", metavar="FILE",
           help="your own system: a JSON file as those of symbolic_cost/timing/system_files/ (datasheet fields, "
                "and under calibrated the calibrated model's constants and the family whose fitted factors it "
                "takes), used in place of --system")
    if kernel_time:
        option(group, "--kernel-time", choices=["roofline", "tiled"],
               help="override the conventions' time model: tiled GEMM traffic, latency, launches")


def time_model(parser):
    """``--ideal``: time at peak instead of on the calibrated model (``timed_system``)."""
    option(parser, "--ideal", action="store_true",
           help="time at 100%% of peak FLOP/s and bandwidth (a lower bound) instead of the calibrated model "
                "(timing.efficiency, fitted on published measured runs)")


def timed_system(args):
    """The ``--system`` to time on: calibrated unless ``--ideal``.  ``--kernel-time`` is a
    peak-side model (tiled kernels at the datasheet's rates), so it needs ``--ideal``."""
    from symbolic_cost.checks import InputError
    from symbolic_cost.timing.hardware import calibrated, get_system
    if args.ideal:
        if given(args, "attention_kernel"):
            raise InputError("--attention-kernel times fused attention on the calibrated model; --ideal runs every "
                             "kernel at peak, so it would be ignored: drop one", "--attention-kernel")
        if given(args, "cuda_graphs"):
            raise InputError("--cuda-graphs saves kernel launches, which the calibrated model prices; --ideal "
                             "launches none, so it would be ignored: drop one", "--cuda-graphs")
        return get_system(args.system)
    if getattr(args, "kernel_time", None):
        raise InputError("--kernel-time chooses a peak-side time model; add --ideal to use it (the default "
                         "calibrated model prices kernels itself)", "kernel-time")
    return calibrated(args.system)


def block(parser, default: str | None = "mlp"):
    """``--block`` and the block's switches (bias, flash attention)."""
    group = parser.add_argument_group("block")
    if default:
        option(group, "--block", choices=sorted(BUILDERS), default=default, action=Given, help="which block")
    option(group, "--layer-group", type=int, metavar="N",
           help="with a model: which group of identical layers (in model order, as profile lists them; "
                "e.g. Gemma 2's sliding-window and global layers, DeepSeek's dense and MoE layers) (default: 1)")
    option(group, "--no-bias", action="store_true", help="linear layers without bias")
    option(group, "--no-qkv-bias", action="store_true", help="QKV projection without bias")
    flash(group)
    tensor(group)


def tensor(parser):
    """``--tensor``, ``--panel``, ``--grid-order``: the tensor-parallel layout (``parallel.grid``)."""
    option(parser, "--tensor", choices=TENSOR_LAYOUTS, default="1d",
           help="tensor parallelism: 1d (Megatron, over m1), 2d (SUMMA on an m1 x m2 grid), 2.5d (mq x mq x md), "
                "3d (mq x mq x mq); the degrees with --set")
    option(parser, "--panel", type=int, help="SUMMA's panel width on a 2d or 2.5d grid (default: one block)")
    option(parser, "--grid-order", metavar="AXES",
           help="a grid's axes in rank order, innermost (neighbouring ranks) first: rows,cols or cols,rows "
                "(2d); cols,rows,depth ... (2.5d); j,k,i ... (3d) (default: the activations' axes innermost)")


def honour_system_file(args) -> None:
    """Read ``--system-file`` into a system preset and answer on it (``args.system``); refused
    beside an explicit ``--system``."""
    path = getattr(args, "system_file", None)
    if path is None:
        return
    from symbolic_cost.checks import InputError
    if given(args, "system"):
        raise InputError("--system-file and --system name the hardware twice; keep one", "--system-file")
    from symbolic_cost.timing.systems import load_system_file
    args.system = load_system_file(path)


def honour_overheads(args) -> None:
    """Refuse ``--overheads`` measured on another GPU generation than ``--system``'s."""
    name = getattr(args, "overheads", None)
    if name in (None, "none") or not hasattr(args, "system"):
        return
    from symbolic_cost.models.overheads import check_overheads
    from symbolic_cost.timing.systems import CALIBRATED
    check_overheads(name, CALIBRATED.get(args.system, {}).get("arch"), args.system)


def honour_tensor(args) -> None:
    """Refuse ``--panel`` and ``--grid-order`` without a tensor grid (``--tensor 1d``, the default,
    has no grid to shape: they would be ignored)."""
    if getattr(args, "tensor", "1d") != "1d":
        return
    from symbolic_cost.checks import InputError
    for flag, name in (("--panel", "panel"), ("--grid-order", "grid_order")):
        if getattr(args, name, None) is not None:
            raise InputError(f"{flag} shapes a tensor grid (--tensor 2d, 2.5d or 3d); with 1d tensor parallelism "
                             f"it would be ignored", flag)


def overheads(parser):
    """``--overheads``: the GPU's memory besides the tensors (``models.overheads.OVERHEADS``)."""
    from symbolic_cost.models.overheads import OVERHEADS
    option(parser, "--overheads", choices=list(OVERHEADS), default="none", action=Given,
           help="memory the device holds besides the tensors, added to the peak before it is compared with the "
                "system's memory: none (the tensors alone, as a CPU run checks them) or hopper (the CUDA "
                "context, cuBLAS's workspace and NCCL's buffers, sources in models.overheads)")


def units(parser):
    """``--units``: what FLOPs, bytes and seconds are printed in (``numeric.tables.UNITS``)."""
    option(parser, "--units", choices=list(UNITS), default=UNIT, action=Given,
           help=f"printed units: {'; '.join(f'{k}: ' + ', '.join(u.labels) for k, u in UNITS.items())}")


def honour_json_units(args) -> None:
    """Refuse ``--units`` beside ``--json``, which is in FLOPs, bytes and seconds whatever it says."""
    if getattr(args, "json", False) and given(args, "units"):
        from symbolic_cost.checks import InputError
        raise InputError("--units does not apply to --json (JSON is in FLOPs, bytes and seconds); it would be ignored",
                         "--units")


def latex(parser):
    """``--latex``: formulas as LaTeX."""
    option(parser, "--latex", action="store_true", help="print formulas as LaTeX")


def recipe(parser):
    """The training recipe: optimizer, master weights, FP8, offload, LoRA (``models.optimizers``,
    ``models.recipes``, ``models.lora``)."""
    from symbolic_cost.models.lora import BASES, TARGETS
    from symbolic_cost.models.optimizers import FP8_RECIPES, OPTIMIZERS
    from symbolic_cost.models.recipes import OFFLOAD
    from symbolic_cost.models.training_values import REFERENCES
    group = parser.add_argument_group("recipe")
    option(group, "--optimizer", choices=list(OPTIMIZERS), default=PLAIN.optimizer, action=Given,
           help="the optimizer's state")
    option(group, "--no-master-weights", dest="master_weights", action="store_false",
           help="16-bit training without an fp32 master copy (states in the parameters' precision)")
    option(group, "--fp8", choices=list(FP8_RECIPES), help="low-precision recipe of the layers' products: Transformer "
           "Engine's FP8 delayed, tensorwise, mxfp8 (Blackwell, CDNA 4), fp8-params, or FP4 nvfp4 (Blackwell); torchao's "
           "float8 (torchtitan's) torchao-tensorwise, torchao-rowwise, and its MXFP8Linear torchao-mxfp8 (Blackwell) "
           "(default: none)")
    option(group, "--fp8-amax-history", type=int, metavar="N",
           help="delayed scaling's amax history per scaled tensor (default: Transformer Engine's 1024; "
                "Megatron-LM's --fp8-amax-history-len is 1)")
    option(group, "--fp8-16bit-layers", type=integer(0), nargs=2, metavar=("FIRST", "LAST"), default=[0, 0],
           help="keep the first FIRST and last LAST layers' products in 16-bit under --fp8 (Megatron-LM's "
                "--first-last-layers-bf16; not with delayed scaling) (default: 0 0)")
    option(group, "--fp8-gather", action="store_true",
           help="under --zero 3 and --fp8 tensorwise or delayed: FSDP all-gathers the FP8 products' weights in FP8, "
                "one byte an element (torchtitan's enable_fsdp_float8_all_gather)")
    option(group, "--offload", choices=list(OFFLOAD), default=PLAIN.offload, action=Given,
           help="move the optimizer state (and the parameters, ZeRO-3) to host memory")
    option(group, "--lora-rank", type=int, help="LoRA adapters of this rank over a frozen base (default: none)")
    option(group, "--lora-targets", action=Given, default="q,v",
           help=f"comma-separated LoRA targets of {', '.join(TARGETS)}")
    option(group, "--lora-base", action=Given, choices=BASES, default="16-bit",
           help="storage of the frozen base (nf4: QLoRA)")
    option(group, "--no-double-quant", dest="double_quant", action=GivenOff,
           help="nf4 without QLoRA's double quantisation of the block scales")
    option(group, "--reference", choices=[r for r in REFERENCES if r is not None],
           help="a frozen reference model's forward each micro-batch, without gradients (DPO): a copy held in "
                "16-bit or fp32, or adapters (LoRA's base with the adapters off, no copy); count b in sequences, "
                "the chosen and the rejected of each example (default: none)")


def recipe_policy(args) -> dict:
    """The ``Training`` fields the recipe options set."""
    from symbolic_cost.checks import InputError
    from symbolic_cost.models.lora import LoRA
    if not hasattr(args, "optimizer"):
        return {}
    lora = None
    if args.lora_rank is None:      # the adapters' options act on adapters only
        for flag, used in (("--lora-targets", given(args, "lora_targets")), ("--lora-base", given(args, "lora_base")),
                           ("--no-double-quant", not args.double_quant)):
            if used:
                raise InputError(f"{flag} applies to LoRA adapters; add --lora-rank (it would be ignored)", flag)
    else:
        if given(args, "double_quant") and args.lora_base != "nf4":
            raise InputError(f"--no-double-quant drops QLoRA's double quantisation of an nf4 base's block scales, "
                             f"and the base is {args.lora_base} (--lora-base nf4); it would be ignored",
                             "--no-double-quant")
        lora = LoRA(args.lora_rank, tuple(t.strip() for t in args.lora_targets.split(",") if t.strip()),
                    args.lora_base, args.double_quant)
    return dict(optimizer=args.optimizer, master_weights=args.master_weights, fp8=args.fp8,
                fp8_amax_history=args.fp8_amax_history, first_layers_16bit=args.fp8_16bit_layers[0],
                last_layers_16bit=args.fp8_16bit_layers[1], offload=args.offload, lora=lora,
                fp8_gather=getattr(args, "fp8_gather", False), reference=getattr(args, "reference", None))


RECIPE_POLICY = ("optimizer", "master_weights", "fp8", "fp8_amax_history", "offload", "lora_rank", "lora_targets",
                 "lora_base", "double_quant", "fp8_gather", "reference")
"""The options ``recipe_policy`` reads."""

READ_AS_TYPED = frozenset(TRAINING_POLICY + RECIPE_POLICY + ("overlap", "recompute_modules", "cp_variant"))
"""Every option a framework reader may set as if typed (``cli.frameworks.setup``): what
``training_policy`` and ``recipe_policy`` read."""


def field_list(known, aliases=None):
    """An option type reading comma-separated names, each one of ``known`` or of ``aliases`` (another
    spelling of a known name: a column as the output heads it, ``total_s`` for ``total``), each once."""
    from symbolic_cost.checks import InputError, listed, listed_once

    def names(text: str) -> list[str]:
        chosen = [(aliases or {}).get(name.strip(), name.strip()) for name in text.split(",")]
        unknown = [name for name in chosen if name not in known]
        if unknown:         # listed: a megabyte's name, or 20,000 of them, was echoed whole
            raise argparse.ArgumentTypeError(f"unknown {listed(unknown)}; known: {', '.join(known)}")
        try:
            listed_once(chosen, "names", "named", "name each once")
        except InputError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return chosen
    return names
