"""Seed 002: DeepFlow's summary of an LSTM language model on a power-budget chip.

The chip is ``power.system_from_power`` of the run's TDP split; the model is
``lstm.LSTM`` under the ``deepflow-2019`` conventions.  The seed was printed
with DeepFlow's debug output on, so besides the summary it shows every
kernel's FLOPs, bytes and time, the reload factors of both orientations of
every GEMM, and each roofline's inflection point and intensity.  This module
walks the kernels in the order ``perf.py`` printed them and pairs each
printed number with ours; the formulas all live in ``lstm``, ``kernels`` and
``power``.  Under other conventions a printed quantity we do not have (the
memory of a projection that is not counted) is a ``(missing)`` mismatch.
"""

from __future__ import annotations

from sympy import Integer

from symbolic_cost import conventions as conv
from symbolic_cost.timing.kernels import gemm_orientations, kernel_time, reloads, roofline, tiles
from symbolic_cost.tools.lstm import (LSTM, all_kernels, apply_gradient, gradient_clip, memory, memory_overflow, parameters,
                    products, stage_times, step_time, time_per_step, weight_elements)
from symbolic_cost.timing.power import PowerBudget, Technology, peak_dram_bandwidth, system_from_power
from symbolic_cost.reproduce import Cell
from symbolic_cost.reproduce import deepflow_lstm_printed as printed

TITLE = "Seed 002: DeepFlow (2019), LSTM language model on a chip derived from a power budget"
CONVENTIONS = conv.get("deepflow-2019")
PREAMBLE = f"""
Model: {", ".join(f"{k} {v}" for k, v in printed.CONFIG.items())}.
Chip: {", ".join(f"{k} {float(v):g}" for k, v in printed.POWER.items())} (TDP in W, the rest shares of
it), launch overhead 37 us, memory latency 50 ns, derate 0.7; conventions `deepflow-2019`. Units as printed: FLOPs and bytes as integers,
seconds, GiB (2^30) for memory, Tflops (10^12) and GB/s (2^30) before the derate, TB/s (2^40), MB (2^20).
Rule: an integer must be equal; a number printed with 12 or more decimals (Python's float
repr) must agree to a relative 1e-12 (DeepFlow summed in floats, we in exact rationals); any other
number must round to the printed text. The two `dp: ...` lines echo the inputs and are not compared.
"""

MODEL = LSTM(**printed.CONFIG)
BUDGET = PowerBudget(**printed.POWER, compute_derate=printed.DERATE, dram_derate=printed.DERATE)
TECHNOLOGY = Technology(**printed.TECHNOLOGY)
SYSTEM = system_from_power("deepflow-seed-002", BUDGET, TECHNOLOGY, memory_latency=printed.MEMORY_LATENCY,
                           launch_overhead=printed.LAUNCH_OVERHEAD, link_latency=printed.LINE_LATENCY)

# perf.py's names: GEMM label, pointwise label (its FLOPs line, its time line), weight group label
_GEMMS = {"cell_fwd": "Cf", "cell_bwd_act": "Cb_act", "cell_bwd_wt": "Cb_wt", "softmax_fwd": "softmax_f",
          "softmax_bwd_wt": "softmax_b_wt", "softmax_bwd_act": "softmax_b_act",
          "projection_fwd": "projection", "projection_bwd_wt": "projection_b_wt",
          "projection_bwd_act": "projection_b_act"}
_POINTWISE = {"cell_fwd_pointwise": ("Hidden", "Hidden"), "cell_bwd_pointwise": ("(gr) Hidden", "Hidden"),
              "softmax_fwd_pointwise": ("Softmax", ""), "softmax_bwd_pointwise": ("(gr) Softmax", "(gr) Softmax")}
_WEIGHTS = {"hidden": "Hidden", "projection": "Projection", "softmax": "Softmax"}
_PRINT_ORDER = (["update:hidden", "update:projection", "update:softmax", "cell_fwd", "cell_fwd_pointwise",
                 "cell_bwd_act", "cell_bwd_wt", "cell_bwd_pointwise", "softmax_fwd", "softmax_fwd_pointwise",
                 "softmax_bwd_wt", "softmax_bwd_act", "softmax_bwd_pointwise", "projection_fwd",
                 "projection_bwd_wt", "projection_bwd_act"])


def parse(text: str) -> list[tuple[str, str]]:
    """The printed ``(label, number)`` pairs in order: ``key: value`` pairs split at
    ``", "``, reload triples from the line after their header, the unit dropped
    (``perf.py`` also prints ``key:; value`` and ``key:value``)."""
    items, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if "reload_AB: {}" in line:
            level = line.split(":")[0]
            items += [(f"{level} {name}", value)
                      for name, value in zip(("reload_AB", "reload_AC", "reload_BC"), lines[i + 1].split())]
        elif ": " in line.replace(":;", ": ") and not line.startswith("dp:"):
            for pair in line.split(", "):
                key, value = pair.rsplit(":", 1)
                items.append((key.strip(), value.lstrip("; ").split()[0]))
    return items


def _roofline_lines(kernel) -> list[tuple[str, object]]:
    return [("inflection_point", SYSTEM.matrix_flops / SYSTEM.hbm_bandwidth), ("comp_int", kernel.intensity)]


def _gemm_lines(name: str, kernel, conventions) -> list[tuple[str, object]]:
    m, k, n = products(MODEL)[name]
    lines = []
    for shape in ((m, k, n), (n, k, m)):
        for level, tile in zip(("gmem", "l2mem"), tiles(SYSTEM, MODEL.element_bytes)):
            r = reloads(*shape, tile)
            lines += [(f"{level} reload_AB", r.a), (f"{level} reload_AC", r.c), (f"{level} reload_BC", r.b)]
    for orientation in gemm_orientations(m, k, n, SYSTEM, conventions, MODEL.element_bytes):
        lines += _roofline_lines(orientation)
    label = _GEMMS[name]
    return lines + [(f"{label} GEMM_flop", kernel.flops), ("GEMM_gmem", kernel.dram_bytes),
                    ("GEMM_l2mem", kernel.l2_bytes), (f"{label} GEMM_time", kernel_time(kernel, SYSTEM))]


def _pointwise_lines(name: str, kernel) -> list[tuple[str, object]]:
    flops_label, time_label = _POINTWISE[name]
    return _roofline_lines(kernel) + [(f"{flops_label} point_flop", kernel.flops), ("point_mem", kernel.dram_bytes),
                                      (f"{time_label} point_time".strip(), kernel_time(kernel, SYSTEM))]


def _update_lines(weights: str) -> list[tuple[str, object]]:
    n, label = weight_elements(MODEL)[weights], f"({_WEIGHTS[weights]})"
    clip, apply = gradient_clip(n, MODEL.element_bytes), apply_gradient(n, MODEL.element_bytes)
    return _roofline_lines(apply) + _roofline_lines(clip) + [
        (f"{label} gradclip_flop", clip.flops), ("gradclip_mem", clip.dram_bytes),
        (f"{label} gradclip_time", roofline(clip, SYSTEM)),
        (f"{label} applyGrad_flop", apply.flops), ("applyGrad_mem", apply.dram_bytes),
        (f"{label} applyGrad_time", roofline(apply, SYSTEM))]


def _memory_lines(parts) -> tuple[list, list]:
    """Memory by part and by kind in GiB; a part the conventions do not count is ``None``."""
    gib = Integer(2) ** 30
    total = sum(sum(kinds.values()) for kinds in parts.values()) / gib
    by_part = [("Total Memory", total)] + [(f"{p.title()} Memory", sum(parts[p].values()) / gib if p in parts else None)
                                           for p in ("embedding", "hidden", "softmax", "projection")]
    by_kind = [("Total Memory", total)] + [(f"{label} Memory", sum(kinds[kind] for kinds in parts.values()) / gib)
                                           for kind, label in (("weights", "Weight"), ("activations", "Activation"),
                                                               ("pointwise", "Pointwise"))]
    return by_part, by_kind


def ours(conventions=CONVENTIONS) -> list[tuple[str, object]]:
    """Our values under ``conventions``, labelled and ordered as ``perf.py`` printed them
    (``None`` where the conventions leave a printed quantity out)."""
    kernels = all_kernels(MODEL, SYSTEM, conventions)
    lines = []
    for name in _PRINT_ORDER:
        if name.startswith("update:"):
            lines += _update_lines(name.split(":")[1])
        elif name in _GEMMS:
            lines += _gemm_lines(name, kernels[name], conventions)
        else:
            lines += _pointwise_lines(name, kernels[name])
    embedding = kernels["embedding"].dram_bytes
    lines += [("Embedding_mem", embedding), ("(gr) Embedding_mem", embedding)]
    t = stage_times(MODEL, SYSTEM, conventions)
    lines += [("Cf", t["cell_fwd"]), ("Cb", t["cell_bwd"]), ("R", t["update_hidden"]),
              ("softmax_f", t["softmax_fwd"]), ("softmax_b", t["softmax_bwd"]),
              ("embedding_f", t["embedding_fwd"]), ("embedding_b", t["embedding_bwd"]),
              ("projection_f", t["projection_fwd"]), ("projection_b", t["projection_bwd"]),
              ("#Parameters", parameters(MODEL, conventions) / 10**9)]
    gib, derate = Integer(2) ** 30, printed.DERATE
    lines += [("Throughput", SYSTEM.matrix_flops / derate / 10**12),
              ("Memory Bandwidth", peak_dram_bandwidth(BUDGET, TECHNOLOGY) / gib),
              ("Memory Size", SYSTEM.hbm_capacity / gib), ("L2 Bandwidth", SYSTEM.l2_bandwidth / 2**40),
              ("L2 Size", SYSTEM.l2_capacity / 2**20), ("Shared Memory Size", SYSTEM.shared_memory_capacity / 2**20),
              ("Interconnection Bandwidth", SYSTEM.ib_bandwidth / gib)]
    by_part, by_kind = _memory_lines(memory(MODEL, conventions))
    overflow = [("Memory Overflow Rate (Total Memory Required per Data Shard / Memory capacity per node)",
                 memory_overflow(MODEL, SYSTEM, conventions))]
    # the "per Model Shard" block repeats the same values: every kernel-parallel degree is 1
    lines += by_part + by_kind + overflow + by_part + overflow + by_kind
    budget = printed.BUDGET
    lines += [("Time", step_time(MODEL, SYSTEM, conventions)),
              ("time_per_step", time_per_step(budget["budget_seconds"], budget["tokens"], budget["batch"],
                                              MODEL.steps, budget["epochs"]))]
    return lines


def _decimals(text: str) -> int | None:
    return len(text.split(".")[1]) if "." in text else None


def _same(text: str, value) -> bool:
    decimals = _decimals(text)
    if decimals is None:
        return Integer(text.replace(",", "")) == value
    if decimals >= 12:
        expected = float(text)
        return abs(float(value) - expected) <= 1e-12 * abs(expected)
    return f"{float(value):.{decimals}f}" == text


def _show(text: str, value) -> str:
    decimals = _decimals(text)
    if decimals is None:
        return f"{int(value):,}" if value.is_integer else str(value)
    return repr(float(value)) if decimals >= 12 else f"{float(value):.{decimals}f}"


def compare(conventions=CONVENTIONS) -> list[Cell]:
    """Every printed number of seed 002 against ours (271 cells), in printed order, under
    ``conventions``."""
    seen, mine = parse(printed.SUMMARY), ours(conventions)
    cells = []
    for i, (label, text) in enumerate(seen):
        have = i < len(mine) and mine[i][0] == label and mine[i][1] is not None
        value = mine[i][1] if have else None
        cells.append(Cell("summary.txt", str(i + 1), label, text,
                          _show(text, value) if have else "(missing)", have and _same(text, value)))
    return cells
