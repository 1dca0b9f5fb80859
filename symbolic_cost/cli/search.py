"""The fastest parallel layouts of a model on N devices that fit in memory, with their step
time by part."""

from __future__ import annotations

import json

from sympy import lambdify

from symbolic_cost import symbols as S
from symbolic_cost.cli import options
from symbolic_cost.cli.values import architecture, conventions, sequence_length
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.utilisation import model_flops, utilisation
from symbolic_cost.numeric.search import PARTS, SPACE, search
from symbolic_cost.numeric.tables import UNITS

EXAMPLES = [
    "symbolic-cost search --preset gpt2 --devices 8 --global-batch 64",
    "symbolic-cost search --preset gpt3-175b --devices 1024 --global-batch 1536 --zero 1 --flash",
    "symbolic-cost search --preset gpt2 --devices 64 --global-batch 512 --tensor 1d 2d 2.5d 3d",
    "symbolic-cost search --preset gpt3-175b --devices 1024 --global-batch 1536 --everything --progress",
]


def add_arguments(parser) -> None:
    options.model(parser)
    options.option(parser, "--devices", type=int, required=True, help="number of devices")
    options.option(parser, "--global-batch", type=int, default=1024, help="sequences per step")
    options.option(parser, "--seq", type=int,
                   help="sequence length (default: the model's context, 2048 if it states none)")
    options.option(parser, "--top", type=int, default=10, help="layouts listed")
    options.option(parser, "--tensor", nargs="+", choices=options.TENSOR_LAYOUTS, default=["1d"],
                   help="tensor layouts to consider: 1d (Megatron, m1) and the grids 2d (rows x cols), "
                        "2.5d (mq x mq x md), 3d (mq x mq x mq)")
    options.option(parser, "--everything", action="store_true",
                   help="search every choice the library expresses (numeric.search.SPACE): ZeRO 0-3, optimizer "
                        "and parameter offload, GPipe, 1F1B and interleaved schedules with every chunk count, "
                        "selective, activation and full recomputation of the first 1..all layers of a stage, "
                        "every micro-batch size and every sequence-parallel degree dividing m1")
    options.option(parser, "--progress", action="store_true", help="report each compiled kernel on stderr")
    options.option(parser, "--json", action="store_true",
                   help="JSON (seconds, bytes) instead of the table: the counts, the time model and every layout")
    options.option(parser, "--workers", type=options.integer(1), default=1,
                   help="processes the kernels are split over")
    options.option(parser, "--dask", action="store_true",
                   help="run the kernels as Dask tasks (on the active Dask scheduler or cluster)")
    options.training(parser, distributed_optimizer=False, recompute=False)
    options.counting(parser)
    options.time_model(parser)
    options.units(parser)


def predicted(arch, args, system, seq, best) -> dict:
    """Predicted MFU and tokens/s per device of each layout found: the model FLOPs of its
    iteration (``models.utilisation.model_flops``: exact, so they depend on the micro-batch
    size ``b`` as well as on the global batch) over its step time."""
    if best.empty:
        return {}
    run = Training(b=S.b, l=seq, d=S.d, micro_batches=S.n_micro, flash=args.flash, precision=args.precision)
    at_one_second = utilisation(model_flops(model_cost(arch, run)), 1, args.devices, system)
    per_second = lambdify([S.b, S.d, S.n_micro], at_one_second, "numpy")
    return {"mfu": per_second(best["b"], best["d"], best["n_micro"]) / best["total"],
            "tokens_per_s_per_device": args.global_batch * seq / args.devices / best["total"]}


def run(args) -> int:
    arch = architecture(args)
    system = options.timed_system(args)
    space = dict(SPACE) if args.everything else dict(zero=args.zero)
    seq = args.seq or sequence_length(arch)
    found = search(arch, args.devices, system, global_batch=args.global_batch,
                   seq=seq, top=args.top, flash=args.flash,
                   precision=args.precision, conventions=conventions(args), tensor=tuple(args.tensor),
                   progress=args.progress, workers=args.workers, dask=args.dask, **space)
    model = "peak-only bound" if args.ideal else "calibrated time model"
    if args.json:
        layouts = found.best.assign(**predicted(arch, args, system, seq, found.best))
        print(json.dumps({"model": arch.name, "devices": args.devices, "system": args.system,
                          "time_model": "ideal" if args.ideal else "calibrated", "evaluated": int(found.evaluated),
                          "fitting": int(found.fitting), "best": json.loads(layouts.to_json(orient="records"))},
                         indent=1))
        return 0
    print(f"{arch.name} on {args.devices} x {args.system}: {found.evaluated} layouts, {found.fitting} fit; "
          f"best {len(found.best)} by step time ({model})")
    seconds, time_unit = UNITS[args.units].per("seconds")
    size, size_unit = UNITS[args.units].per("bytes")
    scaled = found.best.assign(**{part: found.best[part] / float(seconds) for part in PARTS},
                               memory=found.best["memory"] / float(size), **predicted(arch, args, system, seq, found.best))
    names = {part: f"{part} ({time_unit})" for part in PARTS} | {"memory": f"memory ({size_unit})",
                                                                 "tokens_per_s_per_device": "tokens/s/device"}
    print(scaled.rename(columns=names).to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    return 0
