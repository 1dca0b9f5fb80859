"""``<model>.png``: FLOPs, memory and time against ``l`` and ``m1``, crossovers marked.

Plots need matplotlib (``pip install 'symbolic_cost[report]'``); it is imported
here, inside ``plot``, and nowhere else in the library.
"""

from __future__ import annotations

from pathlib import Path

from sympy import lambdify

from symbolic_cost import symbols as S
from symbolic_cost.blocks import transformer_layer
from symbolic_cost.report.scaling import LayerShape, answers
from symbolic_cost.timing.hardware import step_time
from symbolic_cost.files import report_file


def plot_name(shape: LayerShape) -> str:
    """The file name of a shape's plot: its name before any parenthesis, as a slug."""
    return "".join(c if c.isalnum() else "-" for c in shape.name.split(" (")[0].lower()).strip("-") + ".png"


def plot(shape: LayerShape, path: Path, points: int = 60, system="h100") -> None:
    """Four panels: FLOPs, activation memory and time against l; time against m1."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    a = answers(shape, system)
    l = S.l
    fixed = {S.b: shape.b, S.e: shape.e, S.h: shape.h, S.f: shape.f}
    ls = np.unique(np.geomspace(128, 64 * shape.l, points).astype(int))
    curve = lambda expr: np.broadcast_to(lambdify(l, expr.subs(fixed), "numpy")(ls), ls.shape)  # noqa: E731
    fig, ax = plt.subplots(2, 2, figsize=(10, 7.5))
    att, ml = a["flops"]
    ax[0, 0].loglog(ls, curve(att) / 1e12, label="attention")
    ax[0, 0].loglog(ls, curve(ml) / 1e12, label="MLP")
    ax[0, 0].axvline(float(a["crossover"]), ls="--", c="gray")
    ax[0, 0].set(title=f"forward TFLOP; equal at l = {float(a['crossover']):.0f}", xlabel="l")
    for flash, label in ((False, "materialised"), (True, "flash")):
        ax[0, 1].loglog(ls, curve(a["memory"][flash]) / 1e9, label=label)
    ax[0, 1].set(title="attention activations kept (GB)", xlabel="l")
    per_l = step_time(transformer_layer(S.b, l, S.e, S.f, S.h), system).subs(fixed)
    ax[1, 0].loglog(ls, [float(per_l.subs(l, int(x))) * 1e3 for x in ls])
    ax[1, 0].set(title=f"layer step time (ms), m1 = 1, {system}", xlabel="l")
    opt = a["optimum"]
    ms = sorted(opt.values)
    ax[1, 1].plot(ms, [float(opt.values[m]) * 1e3 for m in ms], "o-")
    ax[1, 1].axvline(float(opt.best), ls="--", c="gray")
    ax[1, 1].set(title=f"layer step time (ms), s1 = m1; best m1 = {opt.best}", xlabel="m1",
                 xscale="log", yscale="log")
    for axis in ax.flat[:2]:
        axis.legend()
    fig.suptitle(f"{shape.name}: e={shape.e}, h={shape.h}, f={shape.f}, b={shape.b}, "
                 f"l={shape.l} for the m1 panel")
    fig.tight_layout()
    fig.savefig(report_file(path), dpi=90)
    plt.close(fig)
