"""``symbolic-cost report``: regenerate everything under ``reports/``.

* every reproduced table (``reproduce``),
* ``formulas.md`` / ``formulas.tex``: the formula sheet of every primitive and block (``formulas``),
* ``analysis.md``: the scaling questions answered for a few well-known layer shapes (``scaling``),
* ``sequence-parallel.md``: Megatron SP, Ulysses and ring attention compared, with crossovers
  (``sequence``),
* ``tensor-grids.md``: 1-D, 2-D, 2.5-D and 3-D tensor parallelism on a GPT-3-sized layer, with
  crossovers (``grids``),
* ``kernel-model.md``: the roofline against the kernel-level (tiled) model, per row and by size,
  and seed 002's LSTM stages (``kernel_model``; the seed's configuration is passed in here),
* ``memory.md``: activation bytes per layer, the library against Korthikanti et al. 2022 and
  PyTorch autograd's saved tensors (``memory``; the PyTorch numbers are data, ``memory_measured``),
* ``inference.md``, ``kv-cache.png``, ``decode-throughput.png``: the KV cache of a few public models,
  decode throughput against the batch, the crossover and largest batches per system (``inference``),
* ``peak-memory.png``: one training step's memory timeline for two runs (``peak``),
* ``validation.md``, ``validation.png``: the calibrated time model against the published measured
  runs of ``reproduce.measured`` (``validation``),
* ``<model>.png``: FLOPs, memory and time against ``l`` and ``m1``, crossovers marked (``plots``).

Plots need matplotlib (``pip install 'symbolic_cost[report]'``); it is imported
inside ``plots.plot``, ``inference.plot_inference`` and ``peak.plot_peak``, nowhere else in the library.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from symbolic_cost import reproduce
from symbolic_cost.reproduce import measured
from symbolic_cost.report.formulas import formula_sheet
from symbolic_cost.report.grids import grids_markdown
from symbolic_cost.report.kernel_model import LSTMCase, kernel_markdown
from symbolic_cost.report.inference import inference_markdown, plot_inference
from symbolic_cost.report.memory import memory_markdown
from symbolic_cost.report.peak import plot_peak
from symbolic_cost.report.plots import plot, plot_name
from symbolic_cost.report.scaling import SHAPES, analysis_markdown
from symbolic_cost.report.sequence import sequence_markdown
from symbolic_cost.report import validation
from symbolic_cost.files import report_file

__all__ = ["generate", "seed_002_lstm", "LSTMCase", "SHAPES"]


def seed_002_lstm() -> LSTMCase:
    """Seed 002's LSTM configuration (``reproduce.deepflow_lstm``: its model, power-budget
    chip and the step time it printed) under the ``deepflow-2019`` conventions."""
    from symbolic_cost.reproduce import deepflow_lstm as seed, deepflow_lstm_printed as printed
    step_time = re.search(r"^Time: (\S+)", printed.SUMMARY, re.MULTILINE).group(1)
    return LSTMCase("Seed 002: the LSTM language model on its power-budget chip", seed.MODEL, seed.SYSTEM,
                    "deepflow-2019", step_time)


def _write(path: Path, text: str, written: list[Path]) -> None:
    report_file(path).write_text(text)
    written.append(path)


def generate(out: Path, small: bool = False, progress: Callable[[str], None] = print) -> list[Path]:
    """Write every report under ``out``; ``small`` does one model with few points (CI)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in reproduce.names():
        progress(reproduce.run(name, out).line)
        written.append(out / f"{name}.md")
    md, tex = formula_sheet()
    _write(out / "formulas.md", md, written)
    _write(out / "formulas.tex", tex, written)
    progress("formula sheet: formulas.md, formulas.tex")
    shapes = SHAPES[-1:] if small else SHAPES
    _write(out / "analysis.md", analysis_markdown(shapes), written)
    progress("analysis: analysis.md")
    _write(out / "sequence-parallel.md", sequence_markdown(), written)
    progress("sequence parallelism: sequence-parallel.md")
    _write(out / "tensor-grids.md", grids_markdown(), written)
    progress("tensor grids: tensor-grids.md")
    _write(out / "kernel-model.md", kernel_markdown(seed_002_lstm()), written)
    progress("kernel-level model: kernel-model.md")
    _write(out / "memory.md", memory_markdown(), written)
    progress("activation memory against Korthikanti et al. and PyTorch: memory.md")
    _write(out / "inference.md", inference_markdown(), written)
    written += plot_inference(out, points=12 if small else 40)
    progress("inference: inference.md, kv-cache.png, decode-throughput.png")
    written.append(plot_peak(out / "peak-memory.png"))
    progress("peak memory of a step: peak-memory.png")
    written.append(validation.write(out, measured.cases(), measured.excluded(),
                                   serving_cases=measured.serving_cases()))
    written.append(out / "validation.png")
    progress("time model against measured runs: validation.md, validation.png")
    for shape in shapes:
        path = out / plot_name(shape)
        plot(shape, path, points=12 if small else 60)
        written.append(path)
        progress(f"plot: {path.name}")
    return written
