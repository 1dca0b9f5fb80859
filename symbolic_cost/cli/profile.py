"""The model as a module tree, as DeepSpeed's flops profiler prints it: parameters, MACs and
their shares per module, and the top modules per depth.

MACs are half the FLOPs of a product counted as ``2mnk``: the default conventions
here are the ``deepspeed-profiler`` preset (shown in ``--help``); another
``--conventions`` is used as given.
"""

from __future__ import annotations

import argparse

from symbolic_cost.checks import InputError
from symbolic_cost.cli import options
from symbolic_cost.cli.summary import SETTABLE, whole_model
from symbolic_cost.tools.deepspeed_profiler import model_tree, render

EXAMPLES = [
    "symbolic-cost profile --preset gpt2 --set b=4 l=128 --depth 2",
    "symbolic-cost profile --preset bert-base-uncased --set b=4 l=128 --top 5",
]

CONVENTIONS = "deepspeed-profiler"
"""The registered preset whose ``2mnk`` products make whole MACs (``tools.deepspeed_profiler``)."""


UNCOUNTED = {}
"""``{dest: default}`` of the training and timing options, filled from the parser: those that do
not change this model's tree (parameters and MACs) are refused by name."""


def add_arguments(parser) -> None:
    options.model(parser)
    options.settings(parser, help=SETTABLE)
    options.training(parser)
    options.counting(parser, conventions=CONVENTIONS)
    options.option(parser, "--depth", type=options.integer(-1), default=-1, help="deepest level shown (-1: all)")
    options.option(parser, "--top", type=int, default=3, help="modules listed per depth")
    UNCOUNTED.update({dest: parser.get_default(dest) for dest in ("precision", "zero", "distributed_optimizer",
                      "recompute", "schedule", "first_stage_layers", "last_stage_layers", "system", "kernel_time",
                      "attention_kernel", "overlap", "loss_chunks", "fused_loss", "cuda_graphs")})


def run(args) -> int:
    def tree(a):
        root = model_tree(whole_model(a)[2])
        free = sorted(map(str, root.total("params").free_symbols | root.total("macs").free_symbols))
        if free:        # the profiler's table holds numbers: b=b or a symbolic l leaves formulas
            raise InputError(f"profile prints numbers, and {', '.join(free)} stayed symbols: give numbers with --set "
                             f"(e.g. b=4 l=128)", "--set")
        return render(root, a.depth, a.top)
    text = tree(args)
    what = "the parameters and MACs per module"
    options.refuse_unchanged(args, UNCOUNTED, text, tree, what)
    if options.given(args, "system"):           # typed at its default, which refuse_unchanged lets pass
        raise InputError(f"--system does not change {what} here; it would be ignored", "--system")
    for name in LAYOUT_ONLY:        # degrees that place the model, typed with --set: the tree is the whole model's
        kept = [word for word in args.set if word.split("=", 1)[0].strip() != name]
        if len(kept) < len(args.set) and tree(argparse.Namespace(**{**vars(args), "set": kept})) == text:
            raise InputError(f"--set {name}: it does not change {what} here; it would be ignored", "--set")
    print(text)
    return 0


LAYOUT_ONLY = ("d", "p", "n_micro")
"""``--set`` names that place the model on devices (data parallel, pipeline stages, micro-batches a
step) rather than size it: the module tree is the whole model's, the same for any of them."""
