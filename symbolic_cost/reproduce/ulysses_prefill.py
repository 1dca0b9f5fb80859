"""Seed 001: PyComm's Ulysses prefill experiment (60,000 tokens, 16 GPUs, bf16).

Shapes, element counts, sizes (decimal MB/GB) and FLOPs come from
``sequence.ulysses`` (and ``blocks.mlp`` for the 2-D MLP) under the ``2mnk``
convention, FLOPs summed over the 16 GPUs as the script prints them.  The
allocator readings are modelled as the live-tensor sum (which tensors are
live at each print is the script's allocation order, recorded below) plus an
explicit overhead: the 32 MiB cuBLAS workspace once a GEMM has run, and for
peaks a transient of ``TRANSIENT_BYTES``, the one fitted constant.  The fitted
constant is not a printed number, so it is not a compared cell; the report's
preamble gives the whole interval of transients that fits every reading
(``admissible_transients``).
"""

from __future__ import annotations

import re

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Run, mlp
from symbolic_cost.parallel.sequence import Tensor, ulysses
from symbolic_cost.reproduce import Cell
from symbolic_cost.reproduce import ulysses_prefill_printed as printed

TITLE = "Seed 001: PyComm Ulysses prefill (sfc-gh-mhidayetoglu/PyComm prefill.py)"
CONVENTIONS = conv.get("pycomm-prefill")
WORKSPACE_BYTES = 32 * 2**20
"""cuBLAS workspace on Hopper, allocated by the first GEMM and counted by the allocator."""
TRANSIENT_BYTES = 9_500_000
"""Fitted: extra bytes at each peak after the first GEMM (temporaries of the kernels)."""

TENSOR_ORDER = ["input", "Wq", "Wk", "Wv", "Wo", "q", "k", "v", "q_", "k_", "v_", "q_ gathered",
                "k_ gathered", "v_ gathered", "A", "c", "c transposed", "c_", "c_ gathered", "O",
                "output", "input_", "W1", "W2", "inter"]
"""Our tensor behind each printed tensor line, in print order."""

FLOP_ROWS = {"qkv_proj": "qkv_proj", "logits": "logits", "attend": "attend", "out_proj": "v_proj"}
"""Each printed FLOP line's label and our row (the attention block's output projection is ``v_proj``)."""

_Q = ["q", "k", "v"]
LIVE = [  # (overhead after a GEMM?, live tensors) at each allocator print, in order
    (False, ["input", "Wq", "Wk", "Wv", "Wo"]),
    (True, ["input", "Wq", "Wk", "Wv", "Wo", *_Q]),
    (True, ["input", "Wq", "Wk", "Wv", "Wo", *_Q, "q_", "k_", "v_"]),
    (True, ["input", "Wq", "Wk", "Wv", "Wo", *_Q, "q_", "k_", "v_", "q_ gathered"]),  # reshape copy
    (True, ["input", "Wq", "Wk", "Wv", "Wo", *_Q, "q_", "k_", "v_", "A"]),
    (True, ["input", "Wq", "Wk", "Wv", "Wo", *_Q, "q_", "k_", "v_", "A", "c"]),
    (True, ["input", "Wq", "Wk", "Wv", "Wo", *_Q, "q_", "k_", "v_", "A", "c", "c transposed"]),
    (True, ["input", "Wq", "Wk", "Wv", "Wo", *_Q, "q_", "k_", "v_", "A", "c_", "c transposed"]),
    (True, ["input", "Wq", "Wk", "Wv", "Wo", *_Q, "q_", "k_", "v_", "A", "c_", "c transposed",
            "c_ gathered"]),
    (True, ["input", "Wq", "Wk", "Wv", "Wo", *_Q, "q_", "k_", "v_", "A", "c_", "c transposed",
            "c_ gathered"]),
]
"""Peak readings during attention; then the MLP prints ``current`` and the (unreset) peak."""
MLP_CURRENT = ["output", "input_", "W1", "W2", "inter"]



def tensors(conventions=CONVENTIONS) -> tuple[dict[str, Tensor], object]:
    """Every tensor the seed prints, built by the library (batch dimension of 1 dropped),
    and the Ulysses scheme.  The MLP's tensors take their extents from the bytes its
    costs count (``input_``: ``act_in`` of ``fc1`` over ``d`` elements per token), so
    a convention that counts other bytes shows as other shapes."""
    c = printed.CONFIG
    p = c["TP"] * c["DP"]
    scheme = ulysses(1, c["N"], c["d"], c["h"], p, es=c["bytes"], conventions=conventions)
    found = {t.name: _drop_batch(t) for t in scheme.tensors}
    block = mlp(1, c["N"] // c["DP"], c["d"], c["d_ff"], c["TP"], bias=False, run=Run(es=c["bytes"],
                                                                                      conventions=conventions))
    fc1, fc2, d, es = block["fc1"], block["fc2"], block.dims["e"], c["bytes"]
    tokens = fc1.act_in / (d * es)
    found["input_"] = Tensor("input_", (("N/DP", tokens), ("d", d)), es)
    found["W1"] = Tensor("W1", (("L", c["layers"]), ("d", d), ("d'/TP", fc1.weights / (d * es))), es)
    found["W2"] = Tensor("W2", (("L", c["layers"]), ("d'/TP", fc2.weights / (d * es)), ("d", d)), es)
    found["inter"] = Tensor("inter", (("N/DP", tokens), ("d'/TP", fc1.act_out / (tokens * es))), es)
    return found, scheme


def _drop_batch(t: Tensor) -> Tensor:
    return Tensor(t.name, tuple((k, v) for k, v in t.dims if k != "b"), t.element_bytes)


def _size(nbytes, unit: str) -> str:
    """Bytes in the decimal unit the script chose for that line, 2 decimals."""
    return f"{float(nbytes) / {'MB': 1e6, 'GB': 1e9}[unit]:.2f} {unit}"


def readings(found: dict, transient: int = TRANSIENT_BYTES) -> list[float]:
    """Allocator readings in GB: the running peak during attention, then the MLP's
    current allocation and the unreset peak."""
    live = lambda names: sum(int(found[n].bytes) for n in names)  # noqa: E731
    peak, out = 0, []
    for after_gemm, names in LIVE:
        peak = max(peak, live(names) + (WORKSPACE_BYTES + transient if after_gemm else 0))
        out.append(peak)
    out += [live(MLP_CURRENT) + WORKSPACE_BYTES, peak]
    return [v / 1e9 for v in out]


def admissible_transients(found: dict, printed_gb: list[float]) -> tuple[float, float]:
    """The interval of transients (bytes) for which every post-GEMM peak rounds as printed."""
    lo, hi = float("-inf"), float("inf")
    live = lambda names: sum(int(found[n].bytes) for n in names)  # noqa: E731
    for (after_gemm, names), value in zip(LIVE, printed_gb):
        if after_gemm:
            base = live(names) + WORKSPACE_BYTES
            lo, hi = max(lo, (value - 0.005) * 1e9 - base), min(hi, (value + 0.005) * 1e9 - base)
    return lo, hi


def compare(conventions=CONVENTIONS) -> list[Cell]:
    """Every printed number of seed 001 against ours (94 cells), under ``conventions``."""
    found, scheme = tensors(conventions)
    lines = printed.LINES.strip().splitlines()
    cells = []
    heads = found["q_ gathered"].shape[0]
    tokens = found["input"].shape[0]
    (per_gpu,) = [x for x in lines if x.startswith("head per GPU")]
    want = re.findall(r"\d+", per_gpu)
    cells.append(Cell("config", "head per GPU", "h/P", want[0], str(heads), want[0] == str(heads)))
    cells.append(Cell("config", "tokens per GPU", "N/P", want[1], str(tokens), want[1] == str(tokens)))
    (p_line,) = [x for x in lines if x.startswith("P: ")]
    cells.append(Cell("config", "P", "degree", p_line[3:], str(scheme.degree),
                      p_line[3:] == str(scheme.degree)))
    shape_lines = [x for x in lines if "torch.Size" in x]
    for name, line in zip(TENSOR_ORDER, shape_lines, strict=True):
        t = found[name]
        shape = re.search(r"torch\.Size\(\[([\d, ]+)\]\)", line).group(1)
        elements = re.search(r"elements: (\d+)", line).group(1)
        size = re.search(r"size:? ([\d.]+ [MG]B)", line).group(1)
        ours_shape = ", ".join(str(x) for x in t.shape)
        label = line.split(":")[0]
        cells += [Cell("tensors", label, "shape", shape, ours_shape, shape == ours_shape),
                  Cell("tensors", label, "elements", elements, str(t.elements), elements == str(t.elements)),
                  Cell("tensors", label, "size", size, _size(t.bytes, size[-2:]),
                       size == _size(t.bytes, size[-2:]))]
    flop_lines = [x for x in lines if x.startswith("flops:")]
    for (row, ours_row), line in zip(FLOP_ROWS.items(), flop_lines, strict=True):
        value = line.split()[1]
        ours = f"{float(scheme.degree * scheme.block[ours_row].flops_fwd) / 1e12:.2f}"
        cells.append(Cell("FLOPs (sum over GPUs)", row, "TFLOPs", value, ours, value == ours))
    memory_lines = [x for x in lines if "memory allocation" in x]
    for line, ours in zip(memory_lines, readings(found), strict=True):
        value = line.split()[-2]
        cells.append(Cell("allocator", line.split(":")[0], "GB", value, f"{ours:.2f}",
                          value == f"{ours:.2f}"))
    return cells


def _preamble() -> str:
    """The configuration, the units and the allocator model, with the interval of
    transients that fits every printed post-GEMM peak (information, not a cell)."""
    c = printed.CONFIG
    found, _ = tensors()
    peaks = [float(x.split()[-2]) for x in printed.LINES.splitlines() if "memory allocation" in x]
    lo, hi = admissible_transients(found, peaks)
    return f"""
Configuration: N={c['N']}, d={c['d']}, h={c['h']},
d'={c['d_ff']}, L={c['layers']}, TP={c['TP']},
DP={c['DP']}, bf16; Ulysses over all P = 16 GPUs with replicated weights; the MLP
as `mlp(1, N/DP, d, d', m1=TP)`. FLOPs use `2mnk`, summed over the 16 GPUs. Sizes in decimal
MB/GB, 2 decimals, as printed. Allocator readings: live tensors + {WORKSPACE_BYTES} B workspace
(after the first GEMM) + a fitted transient of {TRANSIENT_BYTES} B at peaks.
The fitted transient is not a printed number and is not compared: every transient in
[{lo / 1e6:.2f}, {hi / 1e6:.2f}] MB reproduces all nine post-GEMM peaks.
"""


PREAMBLE = _preamble()
