"""The time model's kernels against kernels timed on one H200: ``reports/gpu-kernels.md``.

``python benchmarks/gpu_report.py [reports/gpu-kernels.md]`` reads the committed measurements
(``tests/gpu_measured/h200.json`` and ``h200-shapes.json``, taken by ``benchmarks/gpu_kernels.py``,
and ``h200-decode.json``, by ``benchmarks/gpu_decode.py``)
and sets beside each the calibrated model's seconds for the same kernel on ``h200``
(``timing.efficiency.pass_times``: no launch floor, which is a step's per-kernel cost, not a kernel's
own time).  Nothing here is fitted: the measurements check the model; they do not enter it.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from symbolic_cost import conventions as conv
from symbolic_cost.ops import Keys, flash_attention, linear
from symbolic_cost.ops.routing import grouped_linear
from symbolic_cost.timing import attention_kernels as ak
from symbolic_cost.timing.efficiency import pass_times
from symbolic_cost.timing.hardware import calibrated

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "tests" / "gpu_measured"
BACKENDS = {"FLASH_ATTENTION": "flash-attention-2-hopper", "CUDNN_ATTENTION": "cudnn-hopper"}
H200 = calibrated("h200")
PEAK = float(H200.matrix_flops)


def seconds(cost, pass_="fwd") -> float:
    """The calibrated model's seconds of one row's pass on the H200, without the launch floor."""
    compute, memory = pass_times(cost, pass_, H200, conv.DEFAULT)
    return max(float(compute), float(memory))


def attention_seconds(kernel, head_dim, length, causal, pass_) -> float:
    row = flash_attention(16384 // length, length, head_dim, 2048 // head_dim, Keys(causal=causal))
    return float(ak.kernel(kernel).time(row, {"forward": "fwd", "backward": "bwd"}[pass_], PEAK))


def pct(x) -> str:
    return f"{100 * x:+.1f} %"


def spread(errors) -> str:
    """``median |e| (max |e|)`` of relative errors."""
    return f"{100 * statistics.median(abs(e) for e in errors):.1f} % ({100 * max(abs(e) for e in errors):.1f} %)"


def attention_lines(record) -> list[str]:
    lines = ["## Fused attention", "",
             "PyTorch's `scaled_dot_product_attention` backends are the two kernels the model names: FlashAttention-2 "
             "(`flash-attention-2-hopper`) and cuDNN's (`cudnn-hopper`, cuDNN 9.19 here). Their constants were fitted "
             "on the FlashAttention-3 paper's H100 bars (`timing/attention_kernels.json`), which give no causal "
             "backward. Error of the model's time per bar, median (max) over head dimensions 64 and 128 and six "
             "lengths (512 to 16K), and of the causal kernel's time over the unmasked one's at the same length; "
             "beside it the two naive counts of a causal kernel's work (every tile run; exactly half).", "",
             "| kernel | pass | unmasked | causal | causal / unmasked | every tile | half |",
             "|---|---|---|---|---|---|---|"]
    for backend, kernel in BACKENDS.items():
        bars = {(r["head_dim"], r["length"], r["causal"]): r for r in record["attention"] if r["backend"] == backend}
        for pass_ in ("forward", "backward"):
            key = f"{pass_}_s"
            own = {c: [attention_seconds(kernel, d, n, c, pass_) / r[key] - 1 for (d, n, cc), r in bars.items()
                       if cc == c] for c in (False, True)}
            seen = [bars[d, n, True][key] / bars[d, n, False][key] for d, n, c in bars if c]
            model = [attention_seconds(kernel, d, n, True, pass_) / attention_seconds(kernel, d, n, False, pass_)
                     for d, n, c in bars if c]
            lines.append(f"| {kernel} | {pass_} | {spread(own[False])} | {spread(own[True])} | "
                         f"{spread([m / s - 1 for m, s in zip(model, seen)])} | {spread([1 / s - 1 for s in seen])} | "
                         f"{spread([0.5 / s - 1 for s in seen])} |")
    return lines


def dense_lines(record) -> list[str]:
    rows = record["dense"]
    errors = [(r["m"], seconds(linear(1, r["m"], r["k"], r["n"], bias=False)) / r["seconds"] - 1) for r in rows]
    skinny = [e for m, e in errors if m <= 64]
    large = [e for m, e in errors if m >= 1024]
    best = max(r["tflops"] for r in rows)
    return ["## Dense products", "",
            f"`(m, 8192) x (8192, 8192)` BF16. With at most 64 rows a product reads its weights at "
            f"{min(r['weight_bytes_per_s'] for r in rows if r['m'] <= 64) / 1e12:.2f} to "
            f"{max(r['weight_bytes_per_s'] for r in rows if r['m'] <= 64) / 1e12:.2f} TB/s "
            f"(the model: `memory` x 4.8 TB/s = {float(H200.efficiency.memory * H200.hbm_bandwidth) / 1e12:.2f}); "
            f"model error {spread(skinny)}. From 1,024 rows the products run at "
            f"{min(r['tflops'] for r in rows if r['m'] >= 1024):.0f} to {best:.0f} TFLOP/s, the slowest the "
            f"longest (sustained large products lower the clock); the steps of wave quantisation the model draws do "
            f"not show through that drift (4,224 rows, eight whole waves of 128 x 256 tiles, ran slower than 4,096). "
            f"Model error {spread(large)}, the model slower, as its `matrix` fraction is a step's, not a lone "
            f"kernel's. A device-to-device copy moved "
            f"{record['copy']['bytes_per_s'] / 1e12:.2f} TB/s (read and written)."]


def grouped_lines(record) -> list[str]:
    lines = ["## Grouped products (experts)", "",
             "`torch.nn.functional.grouped_mm`, `experts` weight matrices `(k, n)`, `m` rows each; the model times "
             "one product an expert on its own tiles (`Gemm.launched`). Model / measured, by tokens an expert:", "",
             "| expert shape | experts | 16 | 64 | 256 | 1,024 | 4,096 |", "|---|---|---|---|---|---|---|"]
    table = {}
    for r in record["grouped"]:
        model = seconds(grouped_linear(r["experts"] * r["m"], r["k"], r["n"], r["experts"]))
        table.setdefault((r["shape"], r["experts"]), {})[r["m"]] = model / r["seconds"]
    for (shape, experts), by_m in table.items():
        lines.append(f"| {shape} | {experts} | " + " | ".join(f"{by_m[m]:.2f}" for m in (16, 64, 256, 1024, 4096))
                     + " |")
    lines += ["", "With a thousand tokens an expert or more (a training micro-batch's) the model is within about "
              "10 % for GPT-OSS's and DeepSeek-V3's expert shapes; below that the grouped kernel is slower than the "
              "model's bound: it reads the experts' weights at well under the dense products' rate (below), and the "
              "model times a grouped product's weights at the dense rate. Qwen3-30B-A3B's narrow experts (768 "
              "wide) run slower than the model at every size: a short reduction (below)."]
    return lines


def shape_lines(shapes) -> list[str]:
    red = shapes["reductions"]
    lines = ["## Short reductions and FP8", "",
             "`(16384, k) x (k, 4096)` dense, the same in FP8 (E4M3, one scale a tensor), and 16 experts' grouped "
             "`(k, 4096)` products of 2,048 rows each, then the widths `n` at `k = 4096`: TFLOP/s, and the FP8 "
             "product's speed-up over BF16 (the model takes 2, the datasheets' ratio).", "",
             "| k | n | dense | grouped | FP8 | FP8 / BF16 | model / measured (dense; grouped) |",
             "|---|---|---|---|---|---|---|"]
    for dense, grouped, fp8 in zip(red["dense"], red["grouped"], red["fp8"]):
        flops = 2 * dense["m"] * dense["k"] * dense["n"]
        gflops = 2 * grouped["experts"] * grouped["m"] * grouped["k"] * grouped["n"]
        md = seconds(linear(1, dense["m"], dense["k"], dense["n"], bias=False)) / dense["seconds"]
        mg = seconds(grouped_linear(grouped["experts"] * grouped["m"], grouped["k"], grouped["n"],
                                    grouped["experts"])) / grouped["seconds"]
        lines.append(f"| {dense['k']} | {dense['n']} | {flops / dense['seconds'] / 1e12:.0f} | "
                     f"{gflops / grouped['seconds'] / 1e12:.0f} | {flops / fp8['seconds'] / 1e12:.0f} | "
                     f"{dense['seconds'] / fp8['seconds']:.2f} | {md:.2f}; {mg:.2f} |")
    few = shapes["few_rows"]
    lines += ["", "A product's tile pays a fixed cost (filling its pipeline, writing its output) beside the steps "
              "of its reduction, so a short reduction runs slower, and an FP8 product, whose steps take half the "
              "time, gains less than 2x unless the reduction is long: 1.4x at k = 512, 1.75x at 2,048, 2x only from "
              "about 5,760. Timing each product as `(1 + kappa / k)` times its FLOPs, with `kappa` ~ 96 "
              "(doubled in FP8), fits these bars roughly; refitted on the calibration runs it moved their errors "
              "by under 1 % (median over all 70: 4.7 % to 4.6 %; MoE on Hopper 26.1 % either way), so the model "
              "does not take it: the mixtures of experts' misses are not their products' shapes.", "",
              "Grouped products with few rows an expert, `(4096, 4096)` experts, bytes of weights read a second:",
              "", "| experts | rows an expert | TB/s | model / measured |", "|---|---|---|---|"]
    for r in few:
        model = seconds(grouped_linear(r["experts"] * r["m"], r["k"], r["n"], r["experts"])) / r["seconds"]
        lines.append(f"| {r['experts']} | {r['m']} | {r['experts'] * r['k'] * r['n'] * 2 / r['seconds'] / 1e12:.2f} "
                     f"| {model:.2f} |")
    return lines


def decode_lines(record) -> list[str]:
    """The model's decode step (``inference --preset llama-3-8b --system h200 --flash``, its TPOT:
    no engine overheads) beside the CUDA-graph step of ``benchmarks/gpu_decode.py``."""
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.throughput import inference_cost
    from symbolic_cost.models.config import preset
    arch = preset("llama-3-8b")
    lines = ["## A decode step", "",
             "One decode step of a Llama 3 8B-shaped model written in PyTorch from its published shape "
             "(`benchmarks/gpu_decode.py`: BF16, every kernel captured in one CUDA graph, no rotary embedding), "
             "beside the model's decode step at the same batch and cached tokens (TPOT without the serving "
             "engine's fitted overheads).", "",
             "| batch | cached tokens | measured (ms) | model (ms) | model / measured - 1 |", "|---|---|---|---|---|"]
    for row in record["decode"]:
        served = Serving(b=row["batch"], l_in=512, l_out=2, flash=True, allow_long=True)
        model = float(inference_cost(arch, served, H200, l_ctx=row["context"]).tpot)
        lines.append(f"| {row['batch']} | {row['context']:,} | {1e3 * row['seconds']:.2f} | {1e3 * model:.2f} | "
                     f"{pct(model / row['seconds'] - 1)} |")
    lines += ["", "From 64 sequences the step is within 9 %. Below, the measured step is slower than the weights' "
              "bytes at the model's rate: its about 400 kernels (13 a layer) each cost a few microseconds even in "
              "a graph (the model prices none in a decode step; the serving engines' fitted overheads carry that "
              "time), and PyTorch's fused attention reads one sequence's cache slowly: 8,192 cached tokens take "
              "2.9 ms more than 1,024 for 0.9 GiB more, about 0.3 TB/s, as if few thread blocks shared the work, "
              "where serving engines split the cached keys among many (flash decoding). A check of the model's "
              "bytes and FLOPs at large batch, then, not of an engine's small-batch step."]
    return lines


def main(path):
    record = json.loads((MEASURED / "h200.json").read_text())
    shapes = json.loads((MEASURED / "h200-shapes.json").read_text())
    machine = record["machine"]
    lines = ["# Kernels on one H200 against the time model", "",
             f"Generated by `python benchmarks/gpu_report.py` from `tests/gpu_measured/` ({machine['device']}, "
             f"{machine['sms']} SMs; PyTorch {machine['torch']}, CUDA {machine['cuda']}, cuDNN {machine['cudnn']}; "
             f"measured {machine['date']} by `benchmarks/gpu_kernels.py`). The model is the calibrated one on "
             f"`h200` (H100's fitted factors: the same chip with more memory bandwidth). Errors are model / "
             f"measured - 1. `tests/test_gpu_measured.py` asserts the attention rows.", ""]
    lines += attention_lines(record) + [""] + dense_lines(record) + [""] + grouped_lines(record)
    lines += [""] + shape_lines(shapes)
    lines += [""] + decode_lines(json.loads((MEASURED / "h200-decode.json").read_text()))
    Path(path).write_text("\n".join(lines) + "\n")
    return path


if __name__ == "__main__":
    print(main(sys.argv[1] if len(sys.argv) > 1 else ROOT / "reports" / "gpu-kernels.md"))
