"""An LSTM language model on the kernel-level time model: parameters, step time by stage,
memory per data shard.

Give the model's sizes, or ``--from NAME`` to start from the model, system and
conventions of a reproduction that defines an LSTM model (looked up by name in
the reproductions' registry); options given explicitly override what it sets.
"""

from __future__ import annotations

from dataclasses import fields, replace

from symbolic_cost import conventions as conv
from symbolic_cost import reproduce
from symbolic_cost.cli import options
from symbolic_cost.cli.values import amount
from symbolic_cost.numeric.tables import UNITS
from symbolic_cost.timing.hardware import get_system
from symbolic_cost.tools.lstm import LSTM, memory, memory_overflow, parameters, stage_times, step_time
from symbolic_cost.checks import InputError

SIZES = {"batch": "sequences per step", "steps": "time steps per sequence", "hidden": "hidden size D",
         "vocab": "vocabulary V", "layers": "LSTM layers L"}
"""Sizes without a default: given, or taken from ``--from``."""

_PLAIN = {item.name: item.default for item in fields(LSTM)}

def reproductions() -> dict:
    """The reproductions whose module defines an LSTM ``MODEL``, by registered name."""
    found = {}
    for name in reproduce.names():
        module = getattr(reproduce, name.replace("-", "_"), None)
        if isinstance(getattr(module, "MODEL", None), LSTM):
            found[name] = module
    return found


EXAMPLES = [
    "symbolic-cost lstm --batch 64 --steps 20 --hidden 4096 --vocab 50000 --layers 2",
    "symbolic-cost lstm --batch 64 --steps 20 --hidden 4096 --vocab 50000 --layers 2 --dp 8 --system a100",
    *(f"symbolic-cost lstm --from {name}" for name in reproductions()),
]


def add_arguments(parser) -> None:
    named = reproductions()
    options.option(parser, "--from", dest="source", choices=list(named), metavar="NAME",
                   help="start from the model, system and conventions of a reproduction: "
                        + (", ".join(named) or "none defines an LSTM model"))
    group = parser.add_argument_group("model (sizes: required unless --from)")
    for name, text in SIZES.items():
        options.option(group, f"--{name}", type=int, help=text)
    for name, text in (("gates", "gates per cell"), ("projection", "projection width Pj"),
                       ("element-bytes", "bytes per element"), ("dp", "data-parallel replicas"),
                       ("lp", "devices the layers are placed on"), ("hlp", "layer groups pipelined over steps")):
        plain = _PLAIN[name.replace("-", "_")]
        options.option(group, f"--{name}", type=int, help=f"{text} (default: {plain}, or --from's)")
    options.option(group, "--projected", action="store_true", help="run the projection layer (width --projection)")
    options.counting(parser, kernel_time=False)      # its kernels are tiled GEMMs always (tools.lstm)
    options.units(parser)


def setup(args):
    """The model, system and conventions: ``--from``'s, then the options given."""
    source = reproductions()[args.source] if args.source else None
    model = source.MODEL if source else LSTM()
    given = {item.name: getattr(args, item.name) for item in fields(LSTM)
             if item.name != "projected" and getattr(args, item.name) is not None}
    model = replace(model, **given, projected=args.projected or model.projected)
    if "projection" in given and not model.projected:
        raise InputError("--projection needs --projected (or a --from model with a projection layer); "
                         "it would be ignored", "--projection")
    missing = [f"--{name}" for name in SIZES if not getattr(model, name).is_number]
    if missing:
        raise InputError(f"lstm: {', '.join(missing)} required (or --from NAME)", missing[0])
    system = source.SYSTEM if source and not options.given(args, "system") else get_system(args.system)
    if model.dp != 1 and system.nvlink_bandwidth == 0 and system.ib_bandwidth == 0:
        whose = f" (the system of --from {args.source})" if source else ""
        raise InputError(f"--dp {model.dp}: {system.name}{whose} has no link between devices to reduce the "
                         "gradients over; give --system too (e.g. --system h100)", "--dp")
    chosen = source.CONVENTIONS if source and not options.given(args, "conventions") else conv.get(args.conventions)
    return model, system, chosen


def run(args) -> int:
    model, system, chosen = setup(args)
    counts = lambda a: (lambda m, s, c: (step_time(m, s, c), memory(m, c)))(*setup(a))  # noqa: E731
    options.refuse_unchanged(args, {"lp": None}, counts(args), counts,
                             "the step time or the memory (lp acts through the transfers between --hlp groups)")
    options.refuse_unchanged(args, {"conventions": options.CONVENTIONS}, counts(args), counts,
                             "the step time or the memory")
    seconds, label = UNITS[args.units].per("seconds")
    size, size_label = UNITS[args.units].per("bytes")
    print(f"LSTM language model on {system.name}: {float(parameters(model, chosen)) / 1e9:.4g} billion "
          f"parameters, step time {amount(step_time(model, system, chosen), 'seconds', args.units, 6)}")
    print(f"stage times ({label}):")
    for name, value in stage_times(model, system, chosen).items():
        if name.startswith(("projection", "update_projection")) and not model.projected:
            continue        # no projection layer: the step does not run these stages (step_time adds none)
        print(f"  {name:<16} {float(value / seconds):.6g}")
    print(f"memory per data shard ({size_label}): weights, activations, pointwise")
    for part, kinds in memory(model, chosen).items():
        print(f"  {part:<16} " + ", ".join(f"{float(v / size):.4g}" for v in kinds.values()))
    if system.hbm_capacity != 0:
        print(f"memory overflow (needed / capacity): {float(memory_overflow(model, system, chosen)):.4g}")
    return 0
