"""Seed 004: DeepSpeed's flops-profiler README, its BERT-base and Megatron-LM GPT-2 profiles.

Our trees (``profile.hf_bert``, ``profile.megatron_gpt2``) with MACs from the
primitives and DeepSpeed's counting rules; printed in DeepSpeed's number
formats and compared cell by cell: the summary lines, the top modules per
depth (parameters and MACs) and every module of the detailed tree.  Latencies
and FLOPS rates are measurements and not compared.  Two corrections to the
captions, found by the numbers: the BERT profile is of 4 sequences of 128
tokens (at batch 1 its MACs would be 11.17 G, not 44.7 G), and the Megatron
example's MACs are of 4 sequences of 1024 tokens although its summary says
"batch size per device: 1024".  The Megatron example's parameter counts are
ZeRO-3 placeholders (1 per partitioned tensor) and are not compared.  Under
other conventions a printed module we do not have is a ``(missing)`` mismatch.
"""

from __future__ import annotations

import re

from symbolic_cost.models.config import preset
from symbolic_cost.models import Architecture
from symbolic_cost.tools.deepspeed_profiler import (PRESET, aggregate, flops_text, hf_bert, macs_text, megatron_gpt2,
                                                    params_text)
from symbolic_cost.reproduce import Cell
from symbolic_cost.reproduce import deepspeed_profiler_printed as printed

TITLE = "Seed 004: DeepSpeed flops profiler, BERT-base and Megatron-LM GPT-2 examples"
CONVENTIONS = PRESET
BERT_TOKENS = (4, 128)
MEGATRON = dict(layers=12, hidden=8192, heads=32, seq=1024, batch=4, vocab=50257)
PREAMBLE = """
BERT-base (`bert-base-uncased` config) at 4 x 128 tokens; the Megatron-LM example: 12 layers,
hidden 8192, 32 heads, 4 x 1024 tokens, GPT-2 vocabulary padded to 50304. The caption of the
BERT profile says batch 1, but only 4 x 128 tokens give its 44.7 GMACs (batch 1: 11.17 GMACs).
"""

_NUMBERS = re.compile(r"([\d.]+ [kM]|\d+), ([\d.]+)% Params, ([\d.]+ [GMK]?MACs|\d+ MACs), ([\d.]+)% MACs")


def _printed_modules(text: str):
    """(path, params, % params, MACs, % MACs) for every module of a printed tree."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^\w+\($", line))
    path, out = [], []
    for i in range(start, len(lines)):
        line = lines[i]
        head = re.match(r"^(\s*)(?:\((\S+)\): )?(\w+)\((.*)$", line)
        if not head or line.strip().endswith("(...)"):
            continue
        depth = len(head.group(1)) // 2
        path = path[:depth] + [head.group(2) or ""]
        found = _NUMBERS.search(head.group(4)) or _NUMBERS.search(lines[i + 1])
        if found:
            out.append((tuple(path), head.group(3), *found.groups()))
    return out


def _module(root, path):
    """The module at ``path`` below ``root``, or ``None`` when our tree has no such module."""
    node = root
    for name in path[1:]:
        node = next((c for c in node.children if c.name == name), None)
        if node is None:
            return None
    return node


def _tree_cells(table, root, text, with_params=True):
    total_params, total_macs = float(root.total("params")), float(root.total("macs"))
    cells = []
    for path, kind, params, params_pct, macs, macs_pct in _printed_modules(text):
        m = _module(root, path)
        label = ".".join(p for p in path if p) or kind
        if m is None:
            ours = dict.fromkeys(("params", "% params", "MACs", "% MACs"), "(missing)")
        else:
            p, k = float(m.total("params")), float(m.total("macs"))
            ours = {"params": params_text(p), "% params": f"{p / total_params:.2%}"[:-1],
                    "MACs": macs_text(k), "% MACs": f"{k / total_macs:.2%}"[:-1]}
        seen = {"params": params, "% params": params_pct, "MACs": macs, "% MACs": macs_pct}
        for column in (["params", "% params"] if with_params else []) + ["MACs", "% MACs"]:
            cells.append(Cell(table, label, column, seen[column], ours[column], seen[column] == ours[column]))
    return cells


def _depth_cells(table, root, text, whats):
    cells = []
    for depth, body in re.findall(r"depth (\d+):\n((?:    .*\n?)+)", text):
        for what, fmt, key in whats:
            entry = re.search(rf"{key}\s+- (\{{.*\}})", body).group(1)
            seen = re.findall(r"'(\w+)': '([^']+)'", entry)
            ours = aggregate(root, int(depth), what)[:len(seen)]
            for (kind, value), (our_kind, our_value) in zip(seen, ours):
                cells.append(Cell(table, f"depth {depth} {key}", kind, value,
                                  f"{our_kind}: {fmt(our_value)}", (kind, value) == (our_kind, fmt(our_value))))
    return cells


def _line(text, label):
    return re.search(rf"{re.escape(label)}:\s+(.+)", text).group(1).strip()


def compare(conventions=CONVENTIONS) -> list[Cell]:
    """Every compared number of seed 004 against ours (219 cells), under ``conventions``."""
    bert = hf_bert(preset("bert-base-uncased"), *BERT_TOKENS, conventions=conventions)
    c = MEGATRON
    gpt = megatron_gpt2(Architecture("gpt2-megatron", c["layers"], c["hidden"], c["heads"], 4 * c["hidden"],
                                     c["vocab"], positions=c["seq"], vocab_multiple=128), c["batch"], c["seq"],
                        conventions=conventions)
    cells = []
    summary = [("BERT", bert, printed.BERT, [
        ("params per device", params_text(bert.total("params"))),
        ("params of model = params per device * mp_size", params_text(bert.total("params"))),
        ("fwd MACs per device", macs_text(bert.total("macs"))),
        ("fwd flops per device", flops_text(bert.total("flops"))),
        ("fwd flops of model = fwd flops per device * mp_size", flops_text(bert.total("flops"))),
        ("Number of flops", flops_text(bert.total("flops"))),
        ("Number of MACs", macs_text(bert.total("macs"))),
        ("Number of parameters", params_text(bert.total("params")))]),
        ("Megatron GPT-2", gpt, printed.MEGATRON, [
        ("fwd MACs per device", macs_text(gpt.total("macs")).replace("MACs", "").strip()),
        ("fwd flops per device", flops_text(gpt.total("flops"))),
        ("fwd flops of model = fwd flops per device * mp_size", flops_text(gpt.total("flops")))])]
    for table, _, text, lines in summary:
        for label, ours in lines:
            seen = _line(text, label)
            cells.append(Cell(f"{table} summary", label, "", seen, ours, seen == ours))
    cells += _depth_cells("BERT per depth", bert, printed.BERT,
                          [("params", params_text, "params"), ("macs", macs_text, "MACs")])
    cells += _depth_cells("Megatron GPT-2 per depth", gpt, printed.MEGATRON, [("macs", macs_text, "MACs")])
    cells += _tree_cells("BERT detailed", bert, printed.BERT)
    cells += _tree_cells("Megatron GPT-2 detailed", gpt, printed.MEGATRON, with_params=False)
    return cells
