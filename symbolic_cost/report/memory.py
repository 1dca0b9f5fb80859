"""``memory.md``: activation memory per layer side by side: the library, Korthikanti et al.'s
formulas and what PyTorch autograd saved in Hugging Face models, the differences term by term.

The PyTorch numbers are data (``memory_measured``, with the command that measured them), so
the report is reproduced without torch.  The paper's formulas (Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models", Table 2, bytes per layer with
2-byte activations, 1-byte dropout masks and LayerNorm statistics left out) are written here
as the paper prints them: ``s`` sequence, ``b`` batch, ``h`` hidden, ``a`` heads, ``t`` tensor
degree.
"""

from __future__ import annotations

from sympy import Expr, factor, simplify, symbols

from symbolic_cost import conventions as conv
from symbolic_cost.latex import latex
from symbolic_cost.blocks import Run, transformer_layer
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import from_config
from symbolic_cost.models.memory import kept_bytes
from symbolic_cost.report import memory_measured
from symbolic_cost.symbols import b, e, h, l
from symbolic_cost.tools import pytorch_eager as eager

t = symbols("t", positive=True, integer=True)
TABLE_2 = {   # regime: ((m1, s1, recompute), bytes per layer), the paper's s b h = l b e, a s / h = h l / e
    "no parallelism": ((1, 1, "none"), l * b * e * (34 + 5 * h * l / e)),
    "tensor": ((t, 1, "none"), l * b * e * (10 + 24 / t + 5 * h * l / (e * t))),
    "tensor + sequence": ((t, t, "none"), l * b * e / t * (34 + 5 * h * l / e)),
    "tensor + selective": ((t, 1, "selective"), l * b * e * (10 + 24 / t)),
    "tensor + sequence + selective": ((t, t, "selective"), l * b * e * 34 / t),
    "full recomputation": ((1, 1, "full"), 2 * l * b * e),
}
"""Korthikanti et al. 2022, Table 2 (and section 5 for full recomputation), per layer."""
PAPER = {"mlp_activation_dropout": False, "sequence_parallel_inputs": "shard", "layer_norm_keeps_stats": False}
"""The paper's layer as conventions: Megatron-LM's (no dropout after the MLP activation,
sequence-parallel inputs kept as shards), no LayerNorm statistics counted."""


def _regime(conventions, m, s, recompute) -> Expr:
    layer = transformer_layer(b, l, e, 4 * e, h, m, s, run=Run(conventions=conventions))
    return kept_bytes(layer, recompute, 2 * b * l * e / s)


def _steps(start: conv.Conventions, target: dict):
    """The conventions from ``start`` to ``start.but(**target)``, one changed field at a time."""
    here, out = start, []
    for field, value in target.items():
        if getattr(here, field) != value:
            out.append((f"`{field}={value}`", here, here.but(**{field: value})))
            here = here.but(**{field: value})
    return out, here


def paper_section() -> list[str]:
    """Table 2 against the library with default conventions, with the difference by convention."""
    steps, paper = _steps(conv.DEFAULT, PAPER)
    lines = ["## Per layer as formulas: the library (default conventions) against Korthikanti et al.", "",
             "Bytes one layer keeps (`l` sequence, `b` batch, `e` hidden, `h` heads, `t` tensor degree; "
             "2-byte activations, 1-byte masks). The last columns are what each convention the paper's "
             "layer differs in adds, and what remains.", "",
             "| regime | paper | library | " + " | ".join(s[0] for s in steps) + " | remaining |",
             "|---|---|---|" + "---|" * (len(steps) + 1)]
    for regime, ((m, s, recompute), printed) in TABLE_2.items():
        ours = _regime(conv.DEFAULT, m, s, recompute)
        deltas = [simplify(_regime(a, m, s, recompute) - _regime(z, m, s, recompute)) for _, a, z in steps]
        rest = simplify(_regime(paper, m, s, recompute) - printed)
        cells = [f"${latex(factor(x))}$" for x in (printed, ours, *deltas, rest)]
        lines.append(f"| {regime} | " + " | ".join(cells) + " |")
    return lines + [""]


def _run(name):
    run = memory_measured.MEASURED[name]
    key = "n_layer" if run["config"]["model_type"] == "gpt2" else "num_hidden_layers"
    return run, (lambda layers: {**run["config"], key: layers})


def _layer_bytes(config, training, conventions) -> Expr:
    return model_cost(from_config(config), training, conventions).layer.total("act_buffer")


def _layer_numbers(name) -> dict:
    """One layer of the measured model ``name``: the library's bytes under default conventions
    (bf16, 1-byte masks), at fp32, with CPU masks, under ``pytorch-eager``; the measurement."""
    run, config = _run(name)
    one, bsz, length = config(1), run["b"], run["l"]
    return dict(default=_layer_bytes(one, Training(b=bsz, l=length), conv.DEFAULT),
                fp32=_layer_bytes(one, Training(b=bsz, l=length, precision="fp32"), conv.DEFAULT),
                cpu=_layer_bytes(one, eager.training(bsz, length), conv.DEFAULT),
                preset=_layer_bytes(one, eager.training(bsz, length), eager.PRESET),
                terms=[t for t in eager.hf_terms(one, bsz, length, 4) if t.per_layer and t.bytes != 0],
                measured=run["saved"][2] - run["saved"][1])


def layer_chain(name) -> list[tuple[str, Expr]]:
    """From the library's layer (default conventions, bf16, 1-byte masks) to the measured one:
    (step, bytes it adds), ending with what remains (0 when every difference is explained)."""
    x = _layer_numbers(name)
    chain = [("library, default conventions, bf16, 1-byte masks", x["default"]),
             ("fp32 elements", x["fp32"] - x["default"]), ("CPU dropout masks of 4 bytes", x["cpu"] - x["fp32"]),
             ("`pytorch-eager` conventions", x["preset"] - x["cpu"])]
    chain += [(f"Hugging Face: {term.name}", term.bytes) for term in x["terms"]]
    return chain + [("remaining", x["measured"] - sum(v for _, v in chain))]


def _paper_layer(config, bsz, length):
    arch = from_config(config)
    if arch.mlp != "gelu" or arch.f != 4 * arch.e or not arch.dropouts:
        return None                                     # the paper's layer: a 4h GELU MLP with dropout
    return TABLE_2["no parallelism"][1].subs({l: length, b: bsz, e: arch.e, h: arch.h})


def _n(x) -> str:
    return f"{int(x):,}"


def layers_section() -> list[str]:
    """Per layer at real shapes: the paper, the library and the measurement, and the chain."""
    lines = ["## Per layer at real shapes: paper, library, PyTorch", "",
             "PyTorch: what autograd saved for one more layer (the 2-layer model minus the 1-layer one), "
             "fp32 on the CPU, eager attention, train mode. Bytes.", "",
             "| model | b | l | paper (2-byte) | library default (bf16) | library `pytorch-eager` (fp32) "
             "| PyTorch | PyTorch / library default (fp32, CPU masks) |", "|---|---|---|---|---|---|---|---|"]
    for name in memory_measured.MEASURED:
        run, config = _run(name)
        x = _layer_numbers(name)
        paper = _paper_layer(config(1), run["b"], run["l"])
        lines.append(f"| {name} | {run['b']} | {run['l']} | {'—' if paper is None else _n(paper)} | {_n(x['default'])} "
                     f"| {_n(x['preset'])} | {_n(x['measured'])} | {float(x['measured'] / x['cpu']):.3f} |")
    lines += ["", "The paper's formula assumes a GELU MLP of width `4h` with dropouts: no Llama column.", "",
              "Term by term, from the library's layer to the measured one:", ""]
    for name in memory_measured.MEASURED:
        lines += [f"**{name}**", "", "| step | bytes |", "|---|---|"]
        lines += [f"| {step} | {_n(value)} |" for step, value in layer_chain(name)] + [""]
    return lines


def model_section() -> list[str]:
    """The whole measured models: the library under the preset, the bookkeeping and the Hugging
    Face terms against the measured total, for 1 and 2 layers."""
    lines = ["## Whole models (1 and 2 layers)", "",
             "The library's activation bytes under `pytorch-eager` with CPU masks, plus what autograd "
             "keeps outside them (`tools.pytorch_eager`: integer ids and targets, the loss's total "
             "weight, and how Hugging Face writes each model).", ""]
    for name in memory_measured.MEASURED:
        run, config = _run(name)
        lines += [f"**{name}** (b = {run['b']}, l = {run['l']})", "", "| | 1 layer | 2 layers |", "|---|---|---|"]
        rows = {}
        for layers in (1, 2):
            arch = from_config(config(layers))
            terms = eager.bookkeeping(arch, run["b"], run["l"], 4) + eager.hf_terms(config(layers), run["b"], run["l"], 4)
            parts = [("library, `pytorch-eager`",
                      model_cost(arch, eager.training(run["b"], run["l"]), eager.PRESET).activation_bytes)]
            parts += [(term.name, term.total(layers)) for term in terms]
            parts += [("sum", sum(v for _, v in parts)), ("PyTorch", run["saved"][layers])]
            for key, value in parts:
                rows.setdefault(key, []).append(value)
        lines += [f"| {k} | " + " | ".join(_n(x) for x in v) + " |" for k, v in rows.items()] + [""]
    return lines


def nodes_section() -> list[str]:
    """What autograd saved for one layer, by the node that saved it."""
    lines = ["## One layer as autograd saved it, by node", "",
             "A storage saved by several nodes is listed under all their names (`A+B`).", ""]
    for name, run in memory_measured.MEASURED.items():
        lines += [f"**{name}**", "", "| node | bytes |", "|---|---|"]
        lines += [f"| {node} | {_n(v)} |" for node, v in run["layer_by_node"].items()] + [""]
    return lines


def memory_markdown() -> str:
    """The whole ``memory.md``."""
    head = ["# Activation memory: the library, Korthikanti et al. 2022 and PyTorch autograd", "",
            "Generated by `symbolic-cost report`. The PyTorch numbers were measured with "
            f"`{memory_measured.COMMAND}` (torch {memory_measured.VERSIONS['torch']}, transformers "
            f"{memory_measured.VERSIONS['transformers']}) and are stored as data; "
            "`tests/test_saved_tensors_hf.py` checks them, and small models live, against hand counts.", ""]
    return "\n".join(head + paper_section() + layers_section() + model_section() + nodes_section())
