"""``peak-memory.png``: one training step's memory timeline (``models.peak``) for two runs, the
moments as stacked bars of state, kept activations and transients, against the device's memory."""

from __future__ import annotations

from pathlib import Path

from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.models.peak import MOMENTS, step_terms
from symbolic_cost.timing.systems import get_system
from symbolic_cost.tools import pytorch_eager as eager
from symbolic_cost.files import report_file

RUNS = (
    ("Llama-2-7B, b=2, l=4096, flash, ZeRO-1 over 64 devices (Megatron-LM)", "llama-2-7b",
     Training(b=2, l=4096, d=64, zero=1, flash=True), "default"),
    ("GPT-2 small, one device, b=16, l=1024, fp32 (PyTorch eager)", "gpt2",
     Training(b=16, l=1024, precision="fp32"), eager.PRESET),
)


def parts(cost, conventions) -> list[tuple[str, float, float, float]]:
    """``(moment, state, kept, transient)`` in bytes for every moment of ``step_timeline``, from
    ``models.peak.step_terms``: the gradients backward makes count as state once made, the kept
    activations until backward has freed them.  A moment that frees some of the kept activations
    (the head's, before a recomputed layer's backward) and adds less than it frees shows the
    difference as fewer kept bytes and no transient, so that every bar stacks upwards."""
    state, kept, made, during, after = step_terms(cost, conventions)
    rows = [(state, kept, t) for t in during] + [(state + made, 0, t) for t in after]
    return [(name, float(a), float(k) + min(float(t), 0.0), max(float(t), 0.0))
            for name, (a, k, t) in zip(MOMENTS, rows)]


def plot_peak(path: Path, system="h100") -> Path:
    """Write the figure to ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    capacity = float(get_system(system).hbm_capacity) / 2**30
    fig, axes = plt.subplots(1, len(RUNS), figsize=(12, 4.5))
    for ax, (title, model, training, conventions) in zip(axes, RUNS):
        rows = parts(model_cost(preset(model), training, conventions), conventions)
        names = [r[0].replace(" ", "\n") for r in rows]
        bottom = [0.0] * len(rows)
        for i, label in ((1, "weights, optimizer, gradients"), (2, "kept activations"), (3, "transients")):
            values = [r[i] / 2**30 for r in rows]
            ax.bar(names, values, bottom=bottom, label=label)
            bottom = [a + v for a, v in zip(bottom, values)]
        ax.axhline(capacity, ls="--", c="gray", label=f"{system} memory")
        ax.set(title=title, ylabel="GiB on the busiest device")
        ax.title.set_fontsize(9)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(report_file(path), dpi=90)
    plt.close(fig)
    return path
