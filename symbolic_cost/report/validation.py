"""The calibrated time model against published measured runs: ``validation.md`` and its plot.

``write(folder, cases, excluded)`` times every measured case (``reproduce.measured``, passed in by
``report.generate``) under the calibrated model (``timing.hardware.calibrated``) and the peak-only
bound, and writes predicted against measured with the error statistics per source.  The fit
itself is ``timing.calibrate`` (``symbolic-cost calibrate``).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from symbolic_cost.timing import attention_kernels as ak
from symbolic_cost.timing import efficiency as eff_module
from symbolic_cost.timing import error_bands
from symbolic_cost.timing.calibrate import FAMILIES, MATRIX_ONLY, predict
from symbolic_cost.timing.hardware import calibrated, get_system
from symbolic_cost.files import report_file


def timed(cases) -> list[tuple]:
    """``(case, peak-only seconds, calibrated seconds, measured seconds)`` for every case."""
    out = []
    for case in cases:
        ideal = float(predict(case, get_system(case.system)))
        real = float(predict(case, calibrated(case.system)))
        out.append((case, ideal, real, float(case.seconds)))
    return out


def _stats(errors: list[float]) -> str:
    magnitudes = sorted(abs(e) for e in errors)
    p90 = magnitudes[min(len(magnitudes) - 1, int(round(0.9 * (len(magnitudes) - 1))))]
    return (f"{100 * statistics.median(magnitudes):.1f} % | {100 * statistics.fmean(magnitudes):.1f} % | "
            f"{100 * p90:.1f} % | {100 * max(magnitudes):.1f} %")


def summary_lines(rows, by=None, heading: str = "source") -> list[str]:
    """Errors of ``rows`` grouped by ``by(case)`` (sorted by its value; default: by source, in
    the order of the rows), then of all of them."""
    groups = {}
    for case, ideal, real, seconds in sorted(rows, key=lambda row: by(row[0])) if by else rows:
        groups.setdefault(by(case) if by else case.group, []).append((ideal / seconds - 1, real / seconds - 1))
    groups["all"] = [e for g in list(groups.values()) for e in g]
    lines = [f"| {heading} | cases | calibrated: median | mean | p90 | max abs. error | peak only: median | mean | "
             "p90 | max |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, errors in groups.items():
        lines.append(f"| {name} | {len(errors)} | {_stats([r for _, r in errors])} | {_stats([i for i, _ in errors])} |")
    return lines


def _length(case) -> str:
    """A case's sequence length as a bucket: up to 2K, 4K, 8K, or longer (names that sort in
    that order)."""
    tokens = int(case.training.l)
    return next((f"<= {k // 1024}K" for k in (2048, 4096, 8192) if tokens <= k), "> 8K")


def _family(case) -> str:
    """A case's family, ``kind/generation`` (``timing.error_bands.family``)."""
    return "/".join(error_bands.family(case.architecture, case.training, calibrated(case.system)))


def _precision(case) -> str:
    """A case's arithmetic: its FP8/FP4 recipe, or its 16-bit type."""
    return case.training.fp8 or str(case.training.precision)


SERVED = (("mean_ttft", "TTFT", 1000, "ms"), ("mean_itl", "ITL", 1000, "ms"),
          ("request_throughput", "requests/s", 1, ""), ("output_token_throughput", "output tokens/s", 1, ""))


def served(cases) -> list[tuple]:
    """``(case, load without the runtime's overheads, load)`` for every serving case."""
    from symbolic_cost.inference.load import Runtime, serve_case
    models: dict = {}
    return [(c, serve_case(c, Runtime(step_overhead=0, request_overhead=0), models), serve_case(c, Runtime(), models))
            for c in cases]


def serving_lines(rows) -> list[str]:
    """The serving section: errors per quantity, then every load test."""
    fitted = eff_module.CALIBRATION.get("serving", {})
    lines = ["## Serving under load", "",
             "Every load test of `calibration-inference.json` (TensorRT-LLM 0.14 on H100, BF16), simulated by "
             "`inference.load.serve` (in-flight batching of Poisson arrivals, every step priced by the calibrated "
             "model) with the fitted runtime overheads (" + ", ".join(f"{k} {v} s" for k, v in fitted.items()) +
             ") and without them.  Output lengths as `reproduce.measured.serving_cases` reads the printed one: "
             "every request its 256 or 16 tokens (settings), or drawn geometric with the printed mean 214 (a "
             "dataset's; `inference.lengths`).", "",
             "| quantity | cases | with overheads: median | mean | p90 | max abs. error | without: median | mean | p90 "
             "| max |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, label, _, _ in SERVED:
        errors = [(getattr(bare, key) / float(c.measured[key]) - 1, getattr(load, key) / float(c.measured[key]) - 1)
                  for c, bare, load in rows]
        lines.append(f"| {label} | {len(errors)} | {_stats([e for _, e in errors])} | {_stats([e for e, _ in errors])} |")
    lines += ["", "| case | " + " | ".join(f"{label} measured | predicted" for _, label, _, _ in SERVED) + " |",
              "|---|" + "---|---|" * len(SERVED)]
    for c, _, load in rows:
        cells = [f"{float(c.measured[key]) * scale:.4g} | {getattr(load, key) * scale:.4g} ({100 * (getattr(load, key) / float(c.measured[key]) - 1):+.0f} %)"
                 for key, _, scale, _ in SERVED]
        lines.append(f"| {c.id} | " + " | ".join(cells) + " |")
    return lines


FACTORS = eff_module.FITTED + eff_module.GROUP_FITTED
"""The fitted factors the report shows, per family's and the one all share."""


def _factor(name: str, value) -> str:
    """A fitted factor as the table shows it: a fraction as is, the per-kernel costs in microseconds,
    the step's framework time in milliseconds."""
    if name in ("kernel", "group_kernel"):
        return f"{float(value) * 1e6:.3g} us"
    if name == "step":
        return f"{float(value) * 1e3:.3g} ms"
    return str(float(value))


def kernel_lines() -> list[str]:
    """The fused attention kernels' constants (``timing.attention_kernels``) with the model's
    errors on the published bars they were fitted on (a kernel with a published level apart,
    FlashAttention-2 on A100, is shown against its bars' own fit)."""
    lines = ["## Fused attention kernels (not fitted on runs)", "",
             "Fitted on the kernels' published TFLOP/s by sequence length, at head dimensions 64 and 128 "
             "(`timing/attention_kernels.json`, `symbolic-cost calibrate --attention`): level A (fraction of the matrix "
             "rate at head dimension 128), a query tile's fixed work c (in key tiles) and the share s of a head-128 "
             "key tile's time that does not scale with the head (the softmax); error on the bars, causal and not.", "",
             "| kernel | pass | A | c | s | bars | median abs. error | max |", "|---|---|---|---|---|---|---|---|"]
    for name in ak.KERNELS:
        kernel = ak.kernel(name)
        for pass_ in ak.PASSES:
            level, overhead, share = (getattr(kernel, f"{pass_}{part}") for part in ("", "_overhead", "_softmax"))
            record = ak.BENCHMARKS["kernels"][name]
            if "scaled_of" in record:          # another chip's curve at the ratio of paired bars
                pairs = sum(len(v) for v in record["paired"][pass_].values())
                lines.append(f"| {name} | {pass_} | {float(level):.3g} | {float(overhead):.3g} | {float(share):.3g} | "
                             f"{record['scaled_of']}'s x {ak.paired_ratio(name, pass_):.3g} (median of {pairs} "
                             f"paired bars) | | |")
                continue
            own = getattr(ak.kernel(ak.bars_of(name)), pass_)     # the bars' own level, a published one aside
            peak = ak.BENCHMARKS["kernels"][ak.bars_of(name)]["peak"]
            bars = ak.points(name, pass_)
            errors = [abs(ak.benchmark_rate(own, overhead, bar.length, bar.causal, peak, head_dim=bar.head,
                                            share=share, window=bar.window) / bar.tflops - 1) for bar in bars]
            lines.append(f"| {name} | {pass_} | {float(level):.3g} | {float(overhead):.3g} | {float(share):.3g} | "
                         f"{len(bars)} ({ak.bars_of(name)}) | {100 * statistics.median(errors):.1f} % | "
                         f"{100 * max(errors):.1f} % |")
    return lines


def write(folder: Path, cases, excluded, plot: bool = True, serving_cases=()) -> Path:
    """Write ``validation.md`` (and ``validation.png``) into ``folder``: every case, the
    ``(id, reason)`` rows that could not be expressed, and the load tests ``serving_cases``."""
    rows = timed(cases)
    lines = ["# Validation: predicted against measured time", "",
             "Regenerated by `symbolic-cost report`. Every calibration case of "
             "`symbolic_cost/reproduce/measured/` (published runs; the fit of `timing/calibration.json` used these "
             "and nothing else: A100's and H100's factors on all but the groups of `measured.NOT_FITTED`, "
             "expressible only since that fit; the matrix fraction of Blackwell's two chips, B200 and B300, on "
             "Megatron-Bridge's runs on them, `timing.calibrate.MATRIX_ONLY`; a grouped GEMM's further "
             "launches, `group_kernel`, one value for every system, on the mixtures of experts' runs, "
             "`timing.calibrate.fit_group_kernel`), "
             "timed by the calibrated model (`timing.hardware.calibrated`) and by the peak-only "
             "bound (`--ideal`). Errors are predicted / measured - 1.", "",
             "## Fitted factors", "", "| system | " + " | ".join(FACTORS) + " |",
             "|---|" + "---|" * len(FACTORS)]
    for fam in (*FAMILIES, *MATRIX_ONLY):
        e = eff_module.efficiency(fam)
        lines.append(f"| {fam} | " + " | ".join(_factor(k, getattr(e, k)) for k in FACTORS) + " |")
    lines += [""] + kernel_lines()
    lines += ["", "## Error by source", ""] + summary_lines(rows)
    lines += ["", "## Error by sequence length and by GPU", ""] + summary_lines(rows, _length, "tokens a sequence")
    lines += [""] + summary_lines(rows, lambda case: case.system, "GPU")
    lines += ["", "## Error by family and by precision", "",
              "Families as `timing.error_bands` files them (the bands `summary` and `search` print):", ""]
    lines += summary_lines(rows, _family, "family") + [""] + summary_lines(rows, _precision, "precision")
    lines += ["", "## Every case", "", "| case | measured | s | calibrated | error | peak only | error | assumptions |",
              "|---|---|---|---|---|---|---|---|"]
    for case, ideal, real, seconds in rows:
        lines.append(f"| {case.id} | {case.how} | {seconds:.4g} | {real:.4g} | {100 * (real / seconds - 1):+.1f} % | "
                     f"{ideal:.4g} | {100 * (ideal / seconds - 1):+.1f} % | {'; '.join(case.assumptions) or '-'} |")
    lines += ["", "## Rows not expressible", "", "| row | why |", "|---|---|"]
    lines += [f"| {i} | {why} |" for i, why in excluded]
    if serving_cases:
        lines += [""] + serving_lines(served(serving_cases))
    if plot:
        _plot(rows, folder / "validation.png")
        lines += ["", "![predicted against measured](validation.png)"]
    path = folder / "validation.md"
    report_file(path).write_text("\n".join(lines) + "\n")
    return path


def _plot(rows, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 5))
    measured_s = [s for _, _, _, s in rows]
    ax.loglog(measured_s, [i for _, i, _, _ in rows], "x", label="peak only", color="0.6")
    ax.loglog(measured_s, [r for _, _, r, _ in rows], "o", label="calibrated", fillstyle="none")
    lo, hi = min(measured_s) / 1.5, max(measured_s) * 1.5
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.set_xlabel("measured (s)")
    ax.set_ylabel("predicted (s)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(report_file(path), dpi=120)
    plt.close(fig)

