"""The words of Megatron-LM's command line: which options ``models.megatron_args`` reads, which
change no count (accepted), and their values read with Megatron-LM's rules; any other option is
refused, naming it (``parse``).  Also the world size a launcher starts (``world_size``)."""

from __future__ import annotations

import re
from fractions import Fraction

from symbolic_cost.checks import LARGEST_COUNT, InputError, shown
from symbolic_cost.models.launch_script import known

IGNORED = frozenset("""
train-iters train-samples weight-decay clip-grad adam-beta1 adam-beta2 adam-eps
init-method-std lr min-lr decoupled-lr decoupled-min-lr split seed exit-duration-in-mins exit-interval
mock-data vocab-file merge-file tiktoken-pattern num-workers no-mmap-bin-files
no-create-attention-mask-in-dataloader norm-epsilon apply-layernorm-1p rotary-base rotary-interleaved
use-rope-scaling rope-scaling-factor rotary-seq-len-interpolation-factor cross-entropy-loss-fusion
cross-entropy-fusion-impl calculate-per-token-loss manual-gc manual-gc-interval empty-unused-memory-level
use-mcore-models transformer-impl fp8-amax-compute-algo distributed-timeout-minutes
use-legacy-models spec moe-grouped-gemm moe-aux-loss-coeff moe-z-loss-coeff moe-router-load-balancing-type
moe-router-dtype moe-permute-fusion moe-router-fusion no-gradient-accumulation-fusion
no-masked-softmax-fusion no-bias-gelu-fusion no-bias-swiglu-fusion no-bias-dropout-fusion no-rope-fusion
no-persist-layer-norm bias-gelu-fusion bias-swiglu-fusion apply-rope-fusion masked-softmax-fusion
untie-embeddings-and-output-weights-dummy use-cpu-initialization no-async-tensor-model-parallel-allreduce
data-parallel-random-init check-for-nan-in-loss-and-grad no-check-for-nan-in-loss-and-grad
loss-scale initial-loss-scale min-loss-scale loss-scale-window hysteresis fp16-lm-cross-entropy
attention-softmax-in-fp32 accumulate-allreduce-grads-in-fp32 bf16-dummy train-data-path valid-data-path
test-data-path dataloader-type reset-position-ids reset-attention-mask eod-mask-loss distributed-backend
override-lr-scheduler use-checkpoint-lr-scheduler fsdp-double-buffer fsdp-manual-registration init-model-with-meta-device
use-nccl-ub sgd-momentum logging-level rotary-scaling-factor mscale mscale-all-dim moe-token-drop-policy
rope-type enable-experimental fp8-margin fp8-interval disable-gloo-process-groups export-force-local-attention
disable-bf16-reduced-precision-matmul moe-per-layer-logging exit-on-missing-checkpoint use-dist-ckpt warmup
exit-signal-handler num-dataset-builder-threads cuda-graph-warmup-steps
mtp-loss-scaling-factor trust-remote-code relative-attention-max-distance mask-prob short-seq-prob max-preds-per-seq presplit-sentences lazy-loader
""".split())
"""Options that change no count of the library (read, not used)."""

IGNORED_PREFIXES = ("--log-", "--no-log-", "--save", "--load", "--eval-", "--tensorboard-", "--wandb-", "--profile",
                    "--lr-", "--data-", "--tokenizer-", "--ckpt-", "--timing-", "--no-load-", "--no-save-",
                    "--inprocess-", "--one-logger", "--straggler", "--use-checkpoint-", "--dist-ckpt-",
                    "--async-save", "--finetune", "--pretrained-checkpoint", "--auto-detect-ckpt-format",
                    "--rerun-", "--start-weight-decay", "--end-weight-decay", "--weight-decay-incr-style",
                    "--optimizer-cpu", "--ddp-bucket-size",
                    "--ddp-average-in-collective", "--tp-comm-", "--moe-aux-", "--moe-router-bias-update",
                    "--moe-router-enable-expert-bias", "--yarn-", "--no-yarn-")
"""Families of options that change no count: data and tokenizer files, learning-rate schedule,
checkpoints, logging, profiling, restarts, bucket sizes."""

NOTED = {"grad-reduce-in-bf16": "--grad-reduce-in-bf16: gradients are reduced in bf16; the gradient bytes "
                                "follow --conventions (mixed_precision 'zero' counts 2 per parameter)",
         "megatron-fsdp-grad-comm-dtype": "--megatron-fsdp-grad-comm-dtype, --megatron-fsdp-main-grads-dtype: "
                                           "Megatron-FSDP's gradients kept and reduced in the dtype given; the "
                                           "gradient bytes follow --conventions (mixed_precision 'zero' counts 2 "
                                           "per parameter)",
         "megatron-fsdp-main-grads-dtype": None,
         "fp8-amax-history-len": None,
         "rampup-batch-size": "--rampup-batch-size: the step is timed at --global-batch-size, the batch the ramp "
                              "ends at; the ramp's first steps run smaller batches",
         "moe-router-num-groups": "--moe-router-num-groups, --moe-router-group-topk: counted as the router's plain "
                                  "top-k; the group-limited choice (a score a group, a top-k over the groups) is not "
                                  "counted",
         "moe-router-group-topk": None,
         "glu-linear-offset": "--glu-linear-offset, --activation-func-clamp-value (GPT-OSS's gated unit): counted "
                              "as a SwiGLU; the clamps, the gate's scale and the value's offset are a few element-wise "
                              "operations more, not counted as FLOPs (the experts' clamps are timed as the passes "
                              "Megatron-Core runs them in: blocks.moe's expert_clamp)",
         "activation-func-clamp-value": None,
         "moe-router-force-load-balancing": "--moe-router-force-load-balancing: tokens go to the experts evenly "
                                            "(a benchmark's routing), as the library counts them unless "
                                            "expert_imbalance is set",
         "deterministic-mode": "--deterministic-mode: deterministic kernels; the counts are the same (their "
                               "speed is not modelled)",
         "use-fused-weighted-squared-relu": None,
         "moe-flex-dispatcher-backend": "--moe-flex-dispatcher-backend: DeepEP's and HybridEP's kernels are timed as "
                                        "the flex dispatcher's exchanges where --moe-token-dispatcher-type is flex (a "
                                        "token crosses the network once for each other node holding one of its "
                                        "experts); their own speed is not modelled"}

READ = {
    "model-parallel-size", "batch-size", "null-tokenizer-vocab-includes-eod",
    "num-layers", "hidden-size", "ffn-hidden-size", "num-attention-heads", "group-query-attention",
    "num-query-groups", "kv-channels", "swiglu", "openai-gelu", "normalization", "qk-layernorm",
    "untie-embeddings-and-output-weights", "position-embedding-type", "use-rotary-position-embeddings",
    "rotary-percent", "max-position-embeddings", "disable-bias-linear", "add-bias-linear", "add-qkv-bias",
    "hidden-dropout", "attention-dropout", "vocab-size", "make-vocab-size-divisible-by", "num-experts",
    "moe-router-topk", "moe-ffn-hidden-size", "moe-shared-expert-intermediate-size", "moe-layer-freq",
    "moe-router-pre-softmax", "moe-router-score-function", "micro-batch-size", "global-batch-size",
    "seq-length", "tensor-model-parallel-size", "pipeline-model-parallel-size", "sequence-parallel",
    "decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers",
    "account-for-embedding-in-pipeline-split", "account-for-loss-in-pipeline-split", "pipeline-model-parallel-layout",
    "num-layers-per-virtual-pipeline-stage", "num-virtual-stages-per-pipeline-rank",
    "virtual-pipeline-model-parallel-size", "context-parallel-size", "expert-model-parallel-size",
    "expert-tensor-parallel-size", "moe-expert-capacity-factor", "moe-token-dispatcher-type", "bf16", "fp16", "fp8-format", "fp8-recipe",
    "fp8-param-gather", "fp4-format", "fp4-recipe", "use-distributed-optimizer", "recompute-granularity", "recompute-method",
    "recompute-num-layers", "recompute-activations", "recompute-modules", "moe-layer-recompute", "overlap-moe-expert-parallel-comm",
    "moe-shared-expert-overlap", "overlap-grad-reduce", "no-overlap-p2p-communication",
    "overlap-param-gather", "tp-comm-overlap", "attention-backend", "use-flash-attn", "tokenizer-type",
    "make-vocab-size-divisible-by", "fp8-amax-history-len", "cp-comm-type",
    "first-last-layers-bf16", "num-layers-at-start-in-bf16", "num-layers-at-end-in-bf16",
    "checkpoint-activations", "checkpoint-num-layers", "activations-checkpoint-method",
    "activations-checkpoint-num-layers", "no-position-embedding", "use-megatron-fsdp", "use-custom-fsdp",
    "use-torch-fsdp2", "data-parallel-sharding-strategy", "optimizer", "multi-latent-attention", "q-lora-rank",
    "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim", "moe-router-topk-scaling-factor",
    "step-batch-size-schedule", "quick-geglu", "softmax-type", "window-size", "window-attn-skip-freq",
    "padded-vocab-size", "enable-gpt-oss", "mtp-num-layers", "squared-relu", "bert-no-binary-head",
    "vocab-extra-ids", "encoder-num-layers", "decoder-num-layers", "encoder-seq-length", "decoder-seq-length",
    "relative-attention-num-buckets", "use-precision-aware-optimizer", "main-params-dtype", "exp-avg-dtype",
    "exp-avg-sq-dtype", "main-grads-dtype", "cuda-graph-impl", "cuda-graph-scope", "cuda-graph-modules",
    "enable-cuda-graph", "external-cuda-graph"}
"""Options ``megatron_setup`` reads (see the module docstring's table)."""

def parse(words: list, notes: list | None = None) -> dict:
    """``{option name: [values]}`` from the program's words.  An option given again replaces what it
    was given before, as argparse (Megatron-LM's parser) takes the last; where a read option's
    values differ, ``notes`` says which stand."""
    options, name, given = {}, None, {}
    for word in words:
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            if name in options:
                given[name] = given.get(name, [options[name]])
            options[name] = [value] if value else []
            if name in given:
                given[name].append(options[name])
        elif name is None:
            known(word, "the first Megatron argument")
            raise InputError(f"the Megatron arguments start with {word!r}, not an option", "--megatron-args")
        else:
            options[name].append(word)
    for name, each in given.items():
        if name in READ and notes is not None and any(v != options[name] for v in each):
            notes.append(f"--{name} is given {len(each)} times; the last stands, as in Megatron-LM's parser: "
                         f"--{' '.join([name, *options[name]])}")
    for name in options:
        known(name, "an option's name")         # built from a value the script leaves open
        if name not in READ and name not in NOTED and not _no_cost(name):
            raise InputError(f"--{name}: a Megatron-LM option this reader does not read (it may change the cost); "
                             f"remove it or give the layout with --preset/--hf-config and --set", f"--{name}")
    return options


def inert(words: list) -> bool:
    """Whether ``words`` are options that change no count, with their values (``IGNORED``,
    ``IGNORED_PREFIXES``): what a script may set under a test the reader cannot decide."""
    return bool(words) and words[0].startswith("--") and all(
        _no_cost(word[2:].partition("=")[0]) for word in words if word.startswith("--"))


def _no_cost(name: str) -> bool:
    return name in IGNORED or any(f"--{name}".startswith(p) for p in IGNORED_PREFIXES)


class Options:
    def __init__(self, options: dict):
        self.options = options

    def flag(self, name: str) -> bool:
        if name in self.options and self.options[name]:
            known(" ".join(self.options[name]), f"the word after --{name}")
            raise InputError(f"--{name} is a switch and takes no value, got {shown(self.options[name])}", f"--{name}")
        return name in self.options

    def text(self, name: str, default=None) -> str | None:
        if name not in self.options:
            return default
        values = self.options[name]
        if len(values) != 1:
            raise InputError(f"--{name} takes one value, got {len(values)}", f"--{name}")
        return known(values[0], f"--{name}")

    def integer(self, name: str, default=None, minimum: int = 1):
        text = self.text(name)
        if text is None:
            if default is None:
                raise InputError(f"--{name} is required by Megatron-LM and is not given", f"--{name}")
            return default
        digits = text.strip()
        if not (digits.isascii() and digits.isdigit()) or (len(digits) < 17 and int(digits) < minimum):
            raise InputError(f"--{name} must be an integer of at least {minimum}, got {shown(text)}", f"--{name}")
        if len(digits) > 16 or int(digits) > LARGEST_COUNT:     # a size the option names, not the symbol it feeds
            raise InputError(f"--{name} must be at most 2**53, got one of {len(digits)} digits", f"--{name}")
        return int(digits)

    def fraction(self, name: str, default: str) -> Fraction:
        text = self.text(name, default)
        try:
            value = Fraction(text)
        except (ValueError, ZeroDivisionError):
            raise InputError(f"--{name} must be a number, got {shown(text)}", f"--{name}") from None
        if not 0 <= value <= 1:
            raise InputError(f"--{name} must be from 0 to 1, got {shown(text)}", f"--{name}")
        return value

    def choice(self, name: str, default: str, allowed: tuple) -> str:
        text = self.text(name, default)
        if text not in allowed:
            said = text if len(text) <= 60 else shown(text)      # a value of a megabyte was echoed whole
            raise InputError(f"--{name} {said}: the library reads {', '.join(allowed)}", f"--{name}")
        return text


def world_size(launcher: list) -> int | None:
    """Processes the launcher starts (torchrun's ``--nproc_per_node x --nnodes``; ``srun``'s
    tasks without torchrun, ``_srun_tasks``; DeepSpeed's, ``_deepspeed_processes``; one for a plain
    ``python``, ``single_process``), or None."""
    if single_process(launcher):
        return 1
    if not launcher:
        return None
    if launcher[0] == "srun" and not any(w.rsplit("/", 1)[-1] == "torchrun" for w in launcher):
        return _srun_tasks(launcher)
    if launcher[0].rsplit("/", 1)[-1] == "deepspeed":
        return _deepspeed_processes(launcher)
    values = _counts(launcher, "torchrun", {"--nproc_per_node": "per_node", "--nproc-per-node": "per_node",
                                            "--nnodes": "nodes"})
    per_node, nodes = values.get("per_node", 1 if torchrun_default(launcher) else None), values.get("nodes", 1)
    return None if per_node is None else per_node * nodes


def _srun_tasks(launcher: list) -> int | None:
    """The tasks ``srun`` starts, one process each: ``--ntasks`` (``-n``), else ``--ntasks-per-node``
    times ``--nodes`` (``-N``, 1), or None."""
    values = _counts(launcher, "srun", {"-n": "ntasks", "--ntasks": "ntasks", "--ntasks-per-node": "per_node",
                                        "-N": "nodes", "--nodes": "nodes"})
    if "ntasks" in values:
        return values["ntasks"]
    return values["per_node"] * values.get("nodes", 1) if "per_node" in values else None


def _deepspeed_processes(launcher: list) -> int | None:
    """The processes DeepSpeed's launcher starts: ``--num_gpus`` (``--num_accelerators``) a node times
    ``--num_nodes`` (one node without a hostfile: its local run); None where it takes every GPU a
    host has (no ``--num_gpus``), the hosts of a hostfile, or the GPUs ``--include``/``--exclude``
    name; those beside a count are refused, as DeepSpeed refuses them (``deepspeed/launcher/runner.py``)."""
    values = _counts(launcher, "deepspeed", {"--num_gpus": "per_node", "--num_accelerators": "per_node",
                                             "--num_nodes": "nodes"})
    words = {w.partition("=")[0] for w in launcher}
    chosen = words & {"--include", "-i", "--exclude", "-e"}
    if chosen and values:
        raise InputError(f"deepspeed {sorted(chosen)[0]} beside --num_gpus/--num_nodes: DeepSpeed's runner refuses "
                         f"the pair (it cannot specify num_nodes/gpus with include/exclude)", "--devices")
    if chosen:
        return None
    hostfile = bool(words & {"--hostfile", "-H"})
    if "per_node" not in values or ("nodes" not in values and hostfile):
        return None
    return values["per_node"] * values.get("nodes", 1)


def _counts(launcher: list, program: str, names: dict) -> dict:
    """``{key: count}`` of the launcher's options ``names`` (option -> key), each given as
    ``--name N`` or ``--name=N``; a value that is not a positive whole number is refused."""
    values = {}
    for i, word in enumerate(launcher):
        name, equals, value = word.partition("=")
        if name in names:
            text = known(value if equals else (launcher[i + 1] if i + 1 < len(launcher) else ""), f"{program} {name}")
            if not text.isdigit() or int(text) < 1:
                raise InputError(f"{program} {name} {text!r}: the reader needs a number of processes (give "
                                 f"--devices)", "--devices")
            values[names[name]] = int(text)
    return values


def torchrun_default(launcher: list) -> bool:
    """Whether the launch is ``torchrun`` (or ``python -m torch.distributed.run``/``launch``) without
    a count of processes a node: one a node, its default (``--nproc-per-node 1``)."""
    runs = any(w.rsplit("/", 1)[-1] == "torchrun" or w in ("torch.distributed.run", "torch.distributed.launch")
               for w in launcher)
    return runs and not any(w.partition("=")[0] in ("--nproc_per_node", "--nproc-per-node") for w in launcher)


def single_process(launcher: list) -> bool:
    """Whether the launch is the interpreter alone (``python pretrain_gpt.py``, ``python3 -u ...``):
    one process, whatever ``RANK`` or ``WORLD_SIZE`` the script exports (Megatron-LM's own
    single-GPU examples)."""
    return bool(launcher) and re.fullmatch(r"(.*/)?python(3(\.\d+)?)?", launcher[0]) is not None and \
        all(word in ("-u", "-O", "-B") for word in launcher[1:])
