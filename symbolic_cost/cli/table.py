"""Per-row table of one block (MLP, attention or a whole layer) for one configuration.

The configuration is a model's (``--preset``, ``--hf-config``) with the plain
training defaults, changed by ``--set``; every column header states its unit.
"""

from __future__ import annotations

from symbolic_cost import symbols as S
from symbolic_cost.latex import tabular
from symbolic_cost.cli import options
from symbolic_cost.cli.building import model_label
from symbolic_cost.cli.values import (architecture, block_values, build_block, conventions, conventions_text,
                                      header, honour_blocks, model_block, numbers_needed)
from symbolic_cost.numeric.tables import UNITS, comm_fraction, table, totals_table

EXAMPLES = [
    "symbolic-cost table --block attention --set l=8192 m1=8",
    "symbolic-cost table --preset llama-2-7b --block layer --set m1=8 s1=8 --format csv",
    "symbolic-cost table --block mlp --units si --format json",
    "symbolic-cost table --block mlp --tensor 2d --set m1=4 m2=2 b=8",
]


def add_arguments(parser) -> None:
    options.model(parser)
    options.settings(parser)
    options.long_sequences(parser)
    options.precision(parser)
    options.block(parser)
    options.counting(parser)
    options.units(parser)
    options.option(parser, "--format", choices=["text", "csv", "json", "latex"], default="text",
                   help="text, csv, json (field names as keys, values in --units) or a LaTeX tabular")


def run(args) -> int:
    arch = architecture(args)
    values = block_values(args, arch)
    numbers_needed(values, honour_blocks(args, arch, args.block, also=[S.n_layers]), "table")
    chosen = conventions(args)
    block = build_block(args, values, arch)
    depth, where, group = values[S.n_layers], "depth", ""
    if args.tensor == "1d":                  # the model's own layer: one group of its layers
        _, depth, groups = model_block(args, values, arch, args.block)
        if groups > 1:
            where = f"the layers of group {args.layer_group or 1} of {groups}"
            group = f" (layer group {args.layer_group or 1} of {groups}: {depth} layers)"
    frame = table(block, args.system, chosen, UNITS[args.units])
    headed = frame.rename(columns=lambda column: header(column, args.units))
    if args.format == "csv":
        print(headed.to_csv(index=False), end="")
    elif args.format == "json":
        print(frame.to_json(orient="records", indent=1))
    elif args.format == "latex":
        print(tabular(headed))
    else:
        shown = sorted(values, key=lambda symbol: S.ALL.index(symbol) if symbol in S.ALL else len(S.ALL))
        print(f"{args.block} of {model_label(args, arch)}{group}: " + ", ".join(f"{k}={values[k]}" for k in shown))
        print(f"conventions {conventions_text(args)}, system {args.system}; units "
              + ", ".join(UNITS[args.units].labels) + "\n")
        print(headed.to_string(index=False, float_format=lambda x: f"{x:.6f}", na_rep="-"))   # "-": no collective
        print(f"\nsum x {where} ({depth}):")
        sums = totals_table(block, args.system, chosen, depth, UNITS[args.units])
        print(sums.rename(index=lambda column: header(column, args.units)).to_string(
            float_format=lambda x: f"{x:.6f}"))
        print(f"\ntime spent in comms (forward, share): {float(comm_fraction(block, args.system, chosen)):.6f}")
    return 0
