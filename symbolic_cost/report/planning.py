"""The isoFLOP curves of a plan: the predicted loss against the parameters of a family's
buildable shapes at the plan's budget, a tenth and ten times it, the chosen model marked.  Needs
matplotlib (``pip install 'symbolic_cost[report]'``)."""

from __future__ import annotations

from symbolic_cost.analysis.planning import Plan, per_depth_table
from symbolic_cost.checks import InputError
from symbolic_cost.files import report_file


def isoflop_plot(chosen: Plan, path) -> None:
    """Write the isoFLOP curves of ``chosen`` (a ``analysis.planning.Plan`` under a loss law) to
    ``path`` (any format matplotlib writes: ``.png``, ``.svg``, ``.pdf``)."""
    if chosen.loss is None:
        raise InputError(f"{chosen.law.name} gives no loss to draw (use a loss law)", "--plot")
    try:
        import matplotlib
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'symbolic_cost[report]'", "--plot") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    spent = chosen.serving["training_flops"] if chosen.serving else float(chosen.budget)
    for scale in (0.1, 1, 10):
        budget = spent * scale
        rows = per_depth_table(chosen, budget)
        ax.semilogx([n for n, _ in rows], [loss for _, loss in rows], label=f"{budget:.2g} FLOPs")
    ax.plot([chosen.parameters], [chosen.loss], "k*", markersize=12, label=chosen.architecture.name)
    ax.set(xlabel="parameters", ylabel=f"predicted loss ({chosen.law.name})",
           title=f"isoFLOP curves, {chosen.shape.name} shapes, exact FLOPs at {chosen.seq:,} tokens")
    ax.legend()
    fig.tight_layout()
    fig.savefig(report_file(path))
    plt.close(fig)

