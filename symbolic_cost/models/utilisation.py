"""Model-level FLOP conventions and utilisation: model and hardware FLOPs of one iteration
(all operations or matrix products only), and MFU and HFU from a measured step time.

=========================== ========================================================================
model FLOPs                 forward and backward of every operation of the model, over the job
                            (``micro_batches x d`` replicas' batches): ``ModelCost.model_flops_*``;
                            ``only="matrix"``: the matrix products alone (``Cost.gemms``, the count
                            papers and PyTorch's ``FlopCounterMode`` use; ``2mnk`` under the
                            ``matmul_flops="2mnk"`` convention); causal halving follows the
                            ``causal_flops`` convention
hardware FLOPs              model FLOPs plus the forward that recomputation redoes
                            (``accounting="library"``); ``"korthikanti-eq8"`` counts a selectively
                            recomputed attention core as its forward and backward again, as
                            Korthikanti et al. 2022's Eq. 8 does
MFU, HFU                    ``FLOPs / (step time x devices x peak FLOP/s)`` (Chowdhery et al. 2022,
                            App. B; Korthikanti et al. 2022, Sec. 6.3), ``devices = m1 d p``
=========================== ========================================================================
"""

from __future__ import annotations

from dataclasses import replace

from sympy import Expr, Integer

from symbolic_cost.cost import exact
from symbolic_cost.models.memory import recomputed_costs
from symbolic_cost.models.ranks import cost_placement
from symbolic_cost.models.recipes import recipe_stack
from symbolic_cost.models.stack import model_stack
from symbolic_cost.models.totals import ModelCost, world_size
from symbolic_cost.models.training import element_bytes
from symbolic_cost.models.whole_model import model_cost_of
from symbolic_cost.ops.matmul import product_flops
from symbolic_cost.checks import InputError, positive, positive_dims
from symbolic_cost.reader import read_number

ONLY = ("all", "matrix")
ACCOUNTING = ("library", "korthikanti-eq8")


def _choice(value, name, allowed):
    if value not in allowed:
        raise InputError(f"{name} must be one of {', '.join(allowed)}, got {value!r}", name)


def _row_flops(row, pass_, only, conventions) -> Expr:
    """One row's FLOPs in ``pass_``: all of them, or its matrix products only."""
    if only == "matrix":
        return product_flops(row.gemms, pass_, conventions)
    return getattr(row, f"flops_{pass_}")


def one_device_stack(cost: ModelCost, as_run: bool = False):
    """The model's blocks unsharded (``m1 = s1 = 1``; ``Training.own_counts``: no context
    parallelism, dropless experts, attention unfused), under the cost's recipe and conventions;
    ``as_run``: attention fused where the training fuses it (its kernel's backward recomputes
    the scores: hardware FLOPs)."""
    t, conventions = model_cost_of(cost).training.own_counts(), cost.layer.conventions
    if as_run and cost.training.flash:
        t = replace(t, flash=True, attention_kernel=cost.training.attention_kernel)
    es = element_bytes(t.precision)
    return recipe_stack(model_stack(cost.architecture, t, 1, 1, es, conventions), t, es, conventions,
                        cost.architecture)


def _replicas(cost: ModelCost) -> Expr:
    return exact(cost.training.micro_batches, "micro_batches") * exact(cost.training.d, "d")


def model_flops(cost: ModelCost, only: str = "all", as_run: bool = False) -> Expr:
    """FLOPs of one iteration over the job, forward and backward, without recomputation (with
    ``as_run``, a fused attention kernel's recomputed scores counted: ``one_device_stack``).

    >>> from symbolic_cost.models import Training, model_cost
    >>> from symbolic_cost.models.config import preset
    >>> cost = model_cost(preset("gpt2"), Training(b=1, l=8))
    >>> model_flops(cost) == cost.model_flops_fwd + cost.model_flops_bwd
    True
    """
    _choice(only, "only", ONLY)
    conventions = model_cost_of(cost).layer.conventions
    total = sum((count * _row_flops(row, p, only, conventions) for blk, count in one_device_stack(cost, as_run)
                 for row in blk for p in ("fwd", "bwd")), Integer(0))
    return _replicas(cost) * total


def recompute_flops(cost: ModelCost, only: str = "all", accounting: str = "library") -> Expr:
    """FLOPs recomputation adds to one iteration over the job: each redone layer's recomputed
    rows forward (``"korthikanti-eq8"``: a selectively recomputed core forward and backward)."""
    _choice(only, "only", ONLY)
    _choice(accounting, "accounting", ACCOUNTING)
    t, conventions = model_cost_of(cost).training, cost.layer.conventions
    passes = ("fwd", "bwd") if accounting == "korthikanti-eq8" and t.recompute == "selective" else ("fwd",)
    total, place = Integer(0), cost_placement(cost)
    for g, (blk, _) in enumerate(one_device_stack(cost)[1:-1]):
        rows = recomputed_costs(blk, t.recomputation)
        per_layer = sum((_row_flops(r, ps, only, conventions) for r in rows for ps in passes), Integer(0))
        total += place.all_redone(g) * per_layer
    return _replicas(cost) * total


def hardware_flops(cost: ModelCost, only: str = "all", accounting: str = "library") -> Expr:
    """Model FLOPs plus recomputation (``recompute_flops``) and a fused attention kernel's
    recomputed scores (``model_flops(as_run=True)``)."""
    return model_flops(cost, only, as_run=True) + recompute_flops(cost, only, accounting)


def seconds(step_time) -> Expr:
    """A step time as an exact number of seconds (``"1.10"`` reads as ``11/10``, by the safe reader)."""
    value = read_number(step_time, argument="step_time") if isinstance(step_time, str) else \
        exact(step_time, "step_time")
    if value.is_number and value <= 0:
        raise InputError(f"step_time must be positive seconds, got {step_time!r}", "step_time")
    return value


def utilisation(flops, step_time, devices, peak) -> Expr:
    """``flops / (step_time x devices x peak)``: the share of the peak FLOP/s one step used."""
    peak, flops = getattr(peak, "matrix_flops", peak), exact(flops, "flops")
    if flops.is_negative:
        raise InputError(f"flops must be non-negative, got {flops}", "flops")
    return flops / (seconds(step_time) * positive_dims(devices=devices)["devices"] * positive(peak, "peak"))


def mfu(cost: ModelCost, step_time, peak, only: str = "all") -> Expr:
    """Model FLOPs utilisation of one iteration that took ``step_time`` seconds on
    ``m1 d p`` devices of ``peak`` FLOP/s each (a number, or a ``System``: its matrix peak)."""
    return utilisation(model_flops(model_cost_of(cost), only), step_time, world_size(cost.training), peak)


def hfu(cost: ModelCost, step_time, peak, only: str = "all", accounting: str = "library") -> Expr:
    """Hardware FLOPs utilisation: ``mfu`` with the recomputed FLOPs counted."""
    return utilisation(hardware_flops(model_cost_of(cost), only, accounting), step_time, world_size(cost.training),
                       peak)
