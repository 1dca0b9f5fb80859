"""Benchmark of fast evaluation: run ``python benchmarks/bench.py`` (after ``pip install .``).

Measures, in one run, and writes ``reports/benchmark.md`` (times are medians of repeats):
compiled evaluation of whole-model totals with the time model; the same compiled path
against hand-written numpy of one layer's formulas (results asserted equal), against
SymPy ``subs`` and against a per-row ``pandas.apply`` pipeline like the LBNL notebook's;
building and compiling a full model; ``import symbolic_cost``; the search of layouts of a
GPT-3 175B model on 1024 devices.  Targets are reported, never asserted.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")          # one core, as the targets say

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import sympy  # noqa: E402

from symbolic_cost.numeric import compile as compiled_mod  # noqa: E402
from symbolic_cost import symbols as S  # noqa: E402
from symbolic_cost.blocks import transformer_layer  # noqa: E402
from symbolic_cost.numeric.compile import compile_exprs  # noqa: E402
from symbolic_cost.timing.hardware import SYSTEMS, step_time  # noqa: E402
from symbolic_cost.models.config import preset  # noqa: E402
from symbolic_cost.models import Training, model_cost  # noqa: E402
from symbolic_cost.timing.step import step_time_breakdown
from symbolic_cost.numeric.search import search  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(0)


def timed(fn, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} logical cores (one used), {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, NumPy {np.__version__}, SymPy {sympy.__version__}, "
            f"pandas {pd.__version__}")


def import_overhead() -> float:
    def run(code):
        return min(float(subprocess.run([sys.executable, "-c", f"import time; t=time.perf_counter(); {code}; "
                                         "print(time.perf_counter()-t)"], capture_output=True, text=True,
                                        check=True).stdout) for _ in range(5))
    return run("import sympy; import symbolic_cost") - run("import sympy")


# ---------------------------------------------------------------- whole model

def whole_model():
    compiled_mod._CACHE.clear()
    def build():
        training = Training(b=S.b, l=S.l, m1=S.m1, s1=S.s1, d=S.d, p=S.p, micro_batches=S.n_micro,
                            zero=1, flash=True)
        cost = model_cost(preset("gpt3-175b"), training)
        return {**step_time_breakdown(cost, "h100"), "memory": cost.memory_bytes,
                "flops": cost.model_flops_fwd + cost.model_flops_bwd}
    build_time, exprs = timed(build, repeat=1)
    compile_time, fn = timed(lambda: compile_exprs(exprs), repeat=1)
    n = 2_000_000
    values = {"b": RNG.choice([1, 2, 4, 8], n), "l": RNG.choice([1024, 2048, 4096], n),
              "m1": RNG.choice([1, 2, 4, 8], n), "d": RNG.choice([1, 2, 4, 8, 16, 32], n),
              "p": RNG.choice([1, 2, 4, 8, 16], n), "n_micro": RNG.choice([16, 32, 64], n)}
    values["s1"] = values["m1"]
    eval_time, out = timed(lambda: fn(values))
    one = {k: int(v[0]) for k, v in values.items()}
    subs_time, exact = timed(lambda: float(exprs["total"].subs(S.resolve_names(one))), repeat=3)
    assert abs(exact - out["total"][0]) <= 1e-12 * abs(exact)
    return dict(build=build_time, compile=compile_time, rate=n / eval_time, subs_rate=1 / subs_time, ops=sum(
        sympy.count_ops(e) for e in exprs.values()))


# ---------------------------------------------------------------- one layer, three ways

H100 = SYSTEMS["h100"]


def layer_numpy(b, l, e, f, h):
    """One transformer layer's forward+backward time at m1 = s1 = 1, default conventions, written
    by hand from the docstrings (roofline per operation; no communication at one device)."""
    F_mat, F_vec, B = 989.4e12, 133.8e12, 3350e9
    q, es = e / h, 2.0
    t = b * l
    def row(flops_f, flops_b, mem_f, mem_b, matrix):
        rate = F_mat if matrix else F_vec
        return np.maximum(flops_f / rate, mem_f / B) + np.maximum(flops_b / rate, mem_b / B)
    def linear(k, n):
        w = (k * n + n) * es
        return row(t * n * (2 * k - 1) + t * n, t * k * (2 * n - 1) + k * n * (2 * t - 1) + t * n,
                   t * k * es + t * n * es + w, t * k * es + (t * k + t * n) * es + 2 * w, True)
    def norm(x):
        n = t * x
        return row(9 * n, 13 * n - 4 * t, 2 * n * es + 2 * t * es + 2 * x * es,
                   (n + 2 * t) * es + 2 * n * es + 4 * x * es, False)
    def pointwise(n, masked):
        other = n if masked else 0
        buf = n if masked else n * es
        return row(n, n, 2 * n * es + other, buf + 2 * n * es, False)
    s = b * h * l * l
    heads = b * h
    logits = row(heads * l * l * (2 * q - 1), 2 * heads * l * q * (2 * l - 1), 2 * heads * l * q * es + s * es,
                 2 * heads * l * q * es + (2 * heads * l * q + s) * es, True)
    softmax = row(2 * s + heads * l * (l - 1), 3 * s + heads * l * (l - 1), 2 * s * es, 3 * s * es, False)
    attend = row(heads * l * q * (2 * l - 1), heads * l * l * (2 * q - 1) + heads * l * q * (2 * l - 1),
                 s * es + 2 * heads * l * q * es, (s + heads * l * q) * es + (s + 2 * heads * l * q) * es, True)
    return (norm(e) + linear(e, 3 * e) + logits + softmax + pointwise(s, True) + attend + linear(e, e)
            + pointwise(t * e, True) + norm(e) + linear(e, f) + pointwise(t * f, False)
            + pointwise(t * f, True) + linear(f, e) + pointwise(t * e, True))


def one_layer():
    expr = step_time(transformer_layer(S.b, S.l, S.e, S.f, S.h), H100)
    fn = compile_exprs({"time": expr})
    n = 2_000_000
    h = RNG.choice([8, 16, 32, 64], n).astype(float)
    values = {"b": RNG.integers(1, 9, n).astype(float), "l": RNG.choice([512, 1024, 2048, 4096], n).astype(float),
              "e": h * 128, "f": h * 512, "h": h}
    ours_time, ours = timed(lambda: fn(values)["time"])
    hand_time, hand = timed(lambda: layer_numpy(values["b"], values["l"], values["e"], values["f"], values["h"]))
    np.testing.assert_allclose(ours, hand, rtol=1e-12)          # the same formulas, the same numbers
    rows = 20_000
    frame = pd.DataFrame({k: v[:rows] for k, v in values.items()})
    apply_time, applied = timed(lambda: frame.apply(lambda r: float(layer_numpy(r.b, r.l, r.e, r.f, r.h)), axis=1),
                                repeat=1)
    np.testing.assert_allclose(applied.to_numpy(), ours[:rows], rtol=1e-12)
    return dict(rate=n / ours_time, hand_rate=n / hand_time, apply_rate=rows / apply_time)


def main():
    print("benchmark: whole model ...", file=sys.stderr)
    whole = whole_model()
    print("benchmark: one layer vs numpy and pandas.apply ...", file=sys.stderr)
    layer = one_layer()
    print("benchmark: search ...", file=sys.stderr)
    search_time, found = timed(lambda: search(preset("gpt3-175b"), 1024, "h100", global_batch=1536, seq=2048),
                               repeat=1)
    overhead = import_overhead()
    rows = [
        ("whole-model totals with time model, configurations/s (one core)", f"{whole['rate']:,.0f}", ">= 5,000,000",
         whole["rate"] >= 5e6),
        ("compiled vs hand-written numpy, time ratio (one layer)", f"{layer['hand_rate'] / layer['rate']:.2f}",
         "<= 1.0", layer["hand_rate"] / layer["rate"] <= 1.0),
        ("compiled vs SymPy subs (whole model)", f"{whole['rate'] / whole['subs_rate']:,.0f}x", ">= 100,000x",
         whole["rate"] / whole["subs_rate"] >= 1e5),
        ("compiled vs pandas.apply pipeline (one layer)", f"{layer['rate'] / layer['apply_rate']:,.0f}x",
         ">= 1,000x", layer["rate"] / layer["apply_rate"] >= 1e3),
        ("build + compile a full model's expressions (s)", f"{whole['build'] + whole['compile']:.2f} "
         f"({whole['build']:.2f} + {whole['compile']:.2f})", "< 1", whole["build"] + whole["compile"] < 1),
        ("import symbolic_cost beyond SymPy's own import (s)", f"{overhead:.3f}", "< 0.5", overhead < 0.5),
        ("search of all layouts, GPT-3 175B on 1024 devices (s)", f"{search_time:.2f} "
         f"({found.evaluated} layouts, {found.fitting} fit)", "< 10", search_time < 10),
    ]
    lines = ["# Benchmark", "", "Generated by `python benchmarks/bench.py`. Machine: " + machine() + ".", "",
             f"The whole model is GPT-3 175B with the degrees symbolic: {whole['ops']:,} operations before "
             "common-subexpression elimination. Rates: compiled "
             f"{layer['rate']:,.0f}/s and hand-written numpy {layer['hand_rate']:,.0f}/s for one layer; SymPy subs "
             f"{whole['subs_rate']:.1f}/s; pandas.apply {layer['apply_rate']:,.0f} rows/s. Compiled results equal "
             "the hand-written numpy's and subs' (asserted).", "",
             "| measure | measured | target | met |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {'yes' if d else '**no**'} |" for a, b, c, d in rows]
    (ROOT / "reports" / "benchmark.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
