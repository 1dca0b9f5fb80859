"""The fastest parallel layouts of a model on N devices that fit in memory, with their step
time by part."""

from __future__ import annotations

import argparse
import json

from sympy import lambdify

from symbolic_cost import symbols as S
from symbolic_cost.blocks.context import VARIANTS as CP_VARIANTS
from symbolic_cost.checks import InputError, listed_once
from symbolic_cost.cli import frameworks, options
from symbolic_cost.cli.parse import grid_range
from symbolic_cost.cli.values import architecture, conventions, sequence_length
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.training import check_context
from symbolic_cost.models.utilisation import model_flops, utilisation
from symbolic_cost.numeric.layouts import pipeline_degrees
from symbolic_cost.numeric.ranking import PARTS
from symbolic_cost.numeric.search import MAX_DEVICES, SPACE, search
from symbolic_cost.numeric.tables import UNITS
from symbolic_cost.timing import error_bands
from symbolic_cost.timing.efficiency import CALIBRATION

EXAMPLES = [
    "symbolic-cost search --preset gpt2 --devices 8 --global-batch 64",
    "symbolic-cost search --preset gpt3-175b --devices 1024 --global-batch 1536 --zero 1 --flash",
    "symbolic-cost search --preset gpt2 --devices 64 --global-batch 512 --tensor 1d 2d 2.5d 3d",
    "symbolic-cost search --preset gpt3-175b --devices 1024 --global-batch 1536 --everything --progress",
    "symbolic-cost search --preset mistral-7b --devices 64 --global-batch 64 --seq 32768 --flash --cp 1,2,4,8",
    "symbolic-cost search --preset llama-2-7b --devices 64 --global-batch 256 --flash --zero 3 --hsdp",
    "symbolic-cost search --megatron-args train_llama3_8b_h100_fp8.sh --devices 64",
]

GLOBAL_BATCH = 1024
"""``--global-batch`` without a framework file."""

FIXED = ("distributed_optimizer", "fp8", "fp8_gather", "overlap", "capacity_factor", "optimizer", "shard",
         "reshard_after_forward", "attention_kernel", "loss_chunks", "fused_loss", "reference", "cuda_graphs")
"""The ``Training`` fields a framework file decides that every searched layout keeps (the precision
and flash attention are ``search``'s own arguments, and a torchtitan file's ZeRO stage its
``--zero``; ``--attention-kernel`` is kept too, file or not); the degrees, the micro-batch,
recomputation and the schedule are what the search varies."""


def degrees(text: str) -> tuple:
    """The type of ``--cp`` and ``--shard``: degrees as a list (``1,2,4,8``), ranges
    (``1:8:x2``, ``cli.parse.grid_range``) or both, each an integer from 1 to ``MAX_DEVICES`` and
    listed once (``checks.listed_once``: ``1,1`` was read as ``1``, the repeat dropped unsaid)."""
    one = options.integer(1, MAX_DEVICES)
    try:
        items = [v for item in text.split(",") for v in (grid_range(item, "degrees") if ":" in item else [item])]
        found = [one(str(v).strip()) for v in items]
        listed_once(found, "degrees")
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return found


def add_arguments(parser) -> None:
    options.model(parser, megatron=True)
    options.option(parser, "--devices", type=int, help="number of devices (required without a framework file; "
                   "with one, it replaces the launch's world size)")
    options.option(parser, "--vocab-size", type=int, help="with --megatron-args or --torchtitan: the tokenizer's "
                   "vocabulary when the file reads it from a tokenizer file (before Megatron pads it)")
    options.option(parser, "--global-batch", type=int, help=f"sequences per step (default: {GLOBAL_BATCH}, or the "
                   f"framework file's global batch)")
    options.option(parser, "--seq", type=int, help="sequence length (default: the framework file's, or the model's "
                   "context, 2048 if it states none)")
    options.option(parser, "--top", type=int, default=10, help="layouts listed")
    options.option(parser, "--tensor", nargs="+", choices=options.TENSOR_LAYOUTS, default=["1d"],
                   help="tensor layouts to consider: 1d (Megatron, m1) and the grids 2d (rows x cols), "
                        "2.5d (mq x mq x md), 3d (mq x mq x mq)")
    options.option(parser, "--everything", action="store_true",
                   help="search every choice the library expresses (numeric.search.SPACE): ZeRO 0-3, optimizer "
                        "and parameter offload, GPipe, 1F1B, ZB-H1, DualPipe and interleaved schedules with every chunk count, "
                        "selective, activation and full recomputation of the first 1..all layers of each model chunk, "
                        "every micro-batch size and every sequence-parallel degree dividing m1")
    options.option(parser, "--cp", type=degrees, default="1", metavar="N,...",
                   help="context-parallel degrees to try (1,2,4,8 or 1:8:x2; 1: none): the devices are "
                        "m1 x cp x p x d, and a cp > 1 is kept where the model splits the sequence so (2 cp chunks "
                        "of a causal model's sequence for ring and all-gather, cp dividing h/m1 and kv_heads/m1 for "
                        "ulysses; 1-D tensor layouts only; not part of --everything)")
    options.option(parser, "--cp-variant", choices=CP_VARIANTS,
                   help="context parallelism of the layouts with cp > 1: ring (K, V passed point to point, "
                        "Megatron-LM; default), all-gather (Llama 3) or ulysses (all-to-all of heads)")
    hsdp = parser.add_mutually_exclusive_group()
    options.option(hsdp, "--shard", type=degrees, metavar="N,...",
                   help="ZeRO-3 (--zero 3 or --everything): besides sharding over all d data-parallel ranks, try "
                        "these shard groups where they divide d (HSDP: FSDP2 on a 2-D mesh, replicated over d/N "
                        "groups; not with routed experts)")
    options.option(hsdp, "--hsdp", action="store_true",
                   help="ZeRO-3: try every shard group that divides d (as --shard with every divisor)")
    options.option(parser, "--progress", action="store_true", help="report each compiled kernel on stderr")
    options.option(parser, "--json", action="store_true",
                   help="JSON (seconds, bytes) instead of the table: the counts, the time model and every layout")
    options.option(parser, "--workers", type=options.integer(1), default=None,
                   help="processes the kernels are split over (default: one per core this process may use, "
                        "for a search of 8 variants or more, else 1)")
    options.option(parser, "--dask", action="store_true",
                   help="run the kernels as Dask tasks (on the active Dask scheduler or cluster)")
    options.training(parser, distributed_optimizer=False, recompute=False, shard=False)
    options.counting(parser)
    options.time_model(parser)
    options.units(parser)


def predicted(arch, args, system, start, best) -> dict:
    """Predicted MFU and tokens/s per device of each layout found: the model FLOPs of its
    iteration (``models.utilisation.model_flops``: exact, so they depend on the micro-batch
    size ``b`` as well as on the global batch) over its step time."""
    if best.empty:
        return {}
    seq, devices = start["seq"], start["devices"]
    run = Training(b=S.b, l=seq, d=S.d, micro_batches=S.n_micro, flash=args.flash, precision=args.precision)
    at_one_second = utilisation(model_flops(model_cost(arch, run)), 1, devices, system)
    per_second = lambdify([S.b, S.d, S.n_micro], at_one_second, "numpy")
    columns = (best[name].to_numpy(dtype=float) for name in ("b", "d", "n_micro"))     # doubles, whatever the frame
    return {"mfu": per_second(*columns) / best["total"].to_numpy(dtype=float),
            "tokens_per_s_per_device": start["global_batch"] * seq / devices / best["total"]}


def starting_point(args) -> tuple:
    """``(model, search arguments)``: with a framework file (``cli.frameworks``) its model, world
    size, global batch, sequence length, precision and flash attention, the fields of ``FIXED`` kept
    by every layout, and its own micro-batch size, recomputation and schedule added to those searched
    (``--devices``, ``--global-batch`` and ``--seq`` replace the file's, with a note); without one,
    the options; a file's context-parallel degree (and variant) joins ``--cp``."""
    context = dict(cp=tuple(args.cp), shard="all" if args.hsdp else args.shard,
                   **({"cp_variant": args.cp_variant} if args.cp_variant else {}))
    if frameworks.setup(args, only_with=("--vocab-size", "--trl-trainer")) is None:
        if args.devices is None:
            raise InputError("search needs --devices (or a framework file: --megatron-args, --torchtitan)", "--devices")
        arch, seq = architecture(args), args.seq or sequence_length(architecture(args))
        check_context(arch, [("--seq", seq)], False,
                      remedy="give a --seq within it (search keeps to the model's context)")
        kept = {} if args.reshard_after_forward else {"policy": dict(reshard_after_forward=False)}
        if kept and (args.everything or args.zero != 3):
            raise InputError("--no-reshard-after-forward keeps FSDP's gathered weights, which only ZeRO-3 gathers: "
                             "give --zero 3 (and not --everything, which varies the stage)", "--reshard-after-forward")
        if args.attention_kernel:
            kept.setdefault("policy", {})["attention_kernel"] = args.attention_kernel
        if args.loss_chunks != options.PLAIN.loss_chunks:
            kept.setdefault("policy", {})["loss_chunks"] = args.loss_chunks
        if args.fused_loss:
            kept.setdefault("policy", {})["fused_loss"] = True
        if args.cuda_graphs:
            kept.setdefault("policy", {})["cuda_graphs"] = tuple(args.cuda_graphs)
        return arch, dict(devices=args.devices, global_batch=args.global_batch or GLOBAL_BATCH, seq=seq, **context,
                          **kept), []
    found = args.framework
    v, policy = found.values, found.policy
    if policy.get("tp_ends", "vocab") != "vocab":
        raise InputError(f"the file's tensor parallelism keeps the word table whole (tp_ends {policy['tp_ends']!r}: "
                         f"transformers' tp_plan, DeepSpeed's AutoTP), with no sequence parallelism; a search over "
                         f"Megatron-LM's layouts beside it is not modelled: use summary or sweep", "tp_ends")
    cp = int(v.get(S.cp, 1))
    if cp != 1:
        context.update(cp=tuple(dict.fromkeys(sorted({1, cp, *args.cp}))),
                       cp_variant=args.cp_variant or policy.get("cp_variant", "ring"))
    stated = dict(devices=int(v[S.m1] * cp * v[S.p] * v[S.d]), global_batch=int(v[S.b] * v[S.d] * v[S.n_micro]),
                  seq=int(v[S.l]) if S.l in v else sequence_length(found.arch))      # DeepSpeed's says none
    notes = [f"--{name.replace('_', '-')} {getattr(args, key)} replaces the file's {stated[name]}"
             for name, key in (("devices", "devices"), ("global_batch", "global_batch"), ("seq", "seq"))
             if key != "devices" and getattr(args, key) not in (None, stated[name]) and (key != "seq" or S.l in v)
             and not (key == "global_batch" and getattr(args, "accelerate", None))]      # accelerate states no batch
    chosen = {name: getattr(args, name) or stated[name] for name in stated}
    kept = {name: policy[name] for name in FIXED if name in policy}
    if args.attention_kernel:            # a file that decides it refuses the option (cli.frameworks)
        kept["attention_kernel"] = args.attention_kernel
    if args.everything and {"shard", "reshard_after_forward"} & set(kept):
        raise InputError("--everything varies the ZeRO stage; the file's FSDP sharding (HSDP or keeping the gathered "
                         "weights) holds at ZeRO-3 only", "--everything")
    searched = ("none", "full") if args.flash else ("none", "selective", "full")
    recompute = tuple(dict.fromkeys(searched + (policy.get("recompute", "none"),)))
    if policy.get("recompute_modules"):
        notes.append(f"the file recomputes Megatron-LM's modules {', '.join(policy['recompute_modules'])}; the search "
                     f"tries recompute {', '.join(recompute)} (selective: the attention core), not that list")
    extra = dict(micro_batch_sizes=tuple(sorted({1, 2, 4, 8, int(v[S.b])})), recompute=recompute,
                 schedules=tuple(dict.fromkeys(("1f1b", policy.get("schedule", "1f1b")))),
                 offload=(policy.get("offload", "none"),))
    return found.arch, dict(chosen, policy=kept, **extra, **context), notes + found.notes


def even_split_note(arch, devices: int) -> list[str]:
    """A note where no pipeline degree between 2 and the layer count divides the devices and
    splits the layers as the search splits them (``layouts.pipeline_degrees``: evenly, or with
    Megatron-LM's uneven first and last stages, ``layouts.uneven_split``): then no layout is
    pipelined, and other splits are for summary and sweep.

    >>> from symbolic_cost.models.config import preset
    >>> even_split_note(preset("gpt3-175b"), 1024)
    []
    >>> even_split_note(preset("gpt3-175b"), 97 * 101)[0][:60]
    "no pipeline degree splits gpt3-175b's 96 layers over 9797 de"
    """
    depth = arch.n_layers
    if devices < 2 or pipeline_degrees(arch, [p for p in range(2, depth) if devices % p == 0]):
        return []
    return [f"no pipeline degree splits {arch.name}'s {depth} layers over {devices} devices as search splits "
            "them (evenly, or Megatron-LM's uneven first and last stages); summary and sweep take other splits "
            "(--first-stage-layers, --last-stage-layers, --embedding-in-split, --loss-in-split, --pipeline-layout)"]


def run(args) -> int:
    options.honour_json_units(args)
    arch, start, notes = starting_point(args)
    notes = notes + even_split_note(arch, start["devices"])
    system = options.timed_system(args)
    sizes = start.get("shard")
    for size in sizes if isinstance(sizes, (tuple, list)) else [sizes] if isinstance(sizes, int) else []:
        if start["devices"] % size:          # every d divides the devices: a group of d's ranks would too
            raise InputError(f"--shard {size} divides no data-parallel degree of {start['devices']} devices; it would "
                             f"be ignored", "--shard")
    if args.everything and (args.zero != options.PLAIN.zero or options.given(args, "zero")):
        raise InputError(f"--zero {args.zero}: --everything tries every ZeRO stage; it would be ignored (give one of "
                         f"them)", "--zero")
    space = dict(SPACE) if args.everything else dict(zero=args.zero)
    found = search(arch, system=system, top=args.top, flash=args.flash,
                   precision=args.precision, conventions=conventions(args), tensor=tuple(args.tensor),
                   progress=args.progress, workers=args.workers, dask=args.dask, **{**start, **space})
    model = "peak-only bound" if args.ideal else "calibrated time model"
    devices = start["devices"]
    if args.json:
        layouts = found.best.assign(**predicted(arch, args, system, start, found.best))
        out = {"model": arch.name, "devices": devices, "system": args.system,
               "time_model": "ideal" if args.ideal else "calibrated", "evaluated": int(found.evaluated),
               "fitting": int(found.fitting), "best": json.loads(layouts.to_json(orient="records"))}
        if args.framework is not None:
            out.update(global_batch=start["global_batch"], seq=start["seq"])
        if args.framework is not None or notes:
            out.update(notes=notes)
        if not args.ideal:
            out.update(expected_error=_band(arch, system))
        print(json.dumps(out, indent=1))
        return 0
    print(f"{arch.name} on {devices} x {args.system}: {found.evaluated} layouts, {found.fitting} fit; "
          f"best {len(found.best)} by step time ({model})")
    for note in notes:
        print(f"note: {note}")
    if found.best.empty:
        print(nothing_fits(found.evaluated, system, args))
        return 0
    seconds, time_unit = UNITS[args.units].per("seconds")
    size, size_unit = UNITS[args.units].per("bytes")
    memory = found.best["memory"] / float(size)
    scaled = found.best.assign(**{part: found.best[part] / float(seconds) for part in PARTS},
                               memory=memory.round().astype("int64") if size == 1 else memory,   # bytes: whole
                               **predicted(arch, args, system, start, found.best))
    names = {part: f"{part} ({time_unit})" for part in PARTS} | {"memory": f"memory ({size_unit})",
                                                                 "tokens_per_s_per_device": "tokens/s/device"}
    print(scaled.rename(columns=names).to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    if not args.ideal:
        print(error_bands.describe(_band(arch, system)))
    return 0


def _band(arch, system) -> dict | None:
    """The error band of the model's family on ``system`` (its kind: MoE or not; the layouts'
    context parallelism and sharding vary row by row, so the band is the architecture's)."""
    return error_bands.band(arch, Training(), system, CALIBRATION.get("bands"),
                            model_cost(arch, Training(l=1)).parameters)


def nothing_fits(evaluated: int, system, args) -> str:
    """The line a search prints where no layout fits one device's memory, with what
    ``--everything`` would add."""
    size, unit = UNITS[args.units].per("bytes")
    wider = "" if args.everything else "; --everything also tries every ZeRO stage, offload, schedule and recomputation"
    return f"none of the {evaluated:,} layouts fits in the {float(system.hbm_capacity / size):.1f} {unit} of one " \
           f"{args.system}{wider}"
