"""A model trained on a cluster: the fastest layout that fits (``numeric.search``, calibrated time
model) turned into step time, MFU, days, GPU-hours, energy and cost (``symbolic-cost plan``;
``analysis.planning`` chooses the model)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from sympy import Expr, Rational, sympify

from symbolic_cost.analysis.planning import MAX_BUDGET, per_token, plan
from symbolic_cost.checks import InputError, InputTypeError, count, shown
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.utilisation import utilisation
from symbolic_cost.numeric.search import search
from symbolic_cost.timing.hardware import calibrated

__all__ = ["RunPlan", "run_plan", "plan_for_days", "check_amounts", "default_global_batch", "SECONDS_A_DAY",
           "ASSUMED_MFU"]

SECONDS_A_DAY = 86400


@dataclass(frozen=True)
class RunPlan:
    """A model trained on ``devices`` devices of ``system``: the fastest layout that fits
    (``layout``, a row of ``numeric.search``'s table), its ``step_time`` (s) for ``global_batch``
    sequences, ``mfu`` (model FLOPs over the devices' dense 16-bit peak), and for ``tokens``
    tokens: ``days``, ``gpu_hours``, ``energy_kwh`` (every device at the system's board power for
    the whole run: an upper bound that leaves out hosts, network and cooling; ``None`` where the
    system states none) and ``cost`` (``gpu_hours x price``; ``None`` without a price)."""

    devices: int
    system: str
    global_batch: int
    layout: dict
    step_time: float
    mfu: float
    tokens_per_second: float
    tokens: float
    days: float
    gpu_hours: float
    energy_kwh: float | None
    cost: float | None


def default_global_batch(seq: int) -> int:
    """Sequences a step: 4M tokens (2**22) a step, as Llama 3's first stage (Dubey et al. 2024,
    section 3.4.1: 4M tokens of 4,096-token sequences), at least one sequence."""
    return max(1, 2**22 // seq)


FLASH = True
"""Whether a plan's layouts run fused (flash) attention: what every framework it plans for runs
by default on the GPUs it knows; the plan says so beside its layout."""


def run_plan(arch: Architecture, flops_per_token, devices: int, system="h100", seq: int = 8192,
             tokens=None, days=None, global_batch: int | None = None, price=None, workers: int | None = 1,
             recompute: bool = False) -> RunPlan:
    """Train ``arch`` (``flops_per_token`` its exact FLOPs a token, ``analysis.planning.per_token``) on
    ``devices`` devices of ``system`` (calibrated time model) for ``tokens`` tokens, or for ``days``
    days (the tokens they allow): the fastest layout that fits, and what the run costs.  With
    ``recompute`` (the FLOPs a token count full recomputation's forward), only layouts that
    recompute every layer are searched, and the MFU still counts the model's FLOPs alone."""
    if (tokens is None) == (days is None):
        raise InputError("give the tokens to train or the days the cluster has, one of them", "days")
    check_amounts(flops_per_token=flops_per_token, tokens=tokens, days=days, price=price, global_batch=global_batch)
    timed = calibrated(system)
    batch = global_batch or default_global_batch(seq)
    found = search(arch, devices, timed, global_batch=batch, seq=seq, top=1, workers=workers, flash=FLASH,
                   **({"recompute": ("full",)} if recompute else {}))
    if found.best.empty:
        raise InputError(f"no layout of {arch.name} fits {devices} {timed.name} devices ({found.evaluated:,} tried)",
                         "devices")
    row = {**found.best.iloc[0].to_dict(), "flash": FLASH}
    step = float(row["total"])
    rate = batch * seq / step
    trained = _double(tokens) if tokens is not None else rate * _double(days) * SECONDS_A_DAY
    spent = trained * float(flops_per_token)
    if not math.isfinite(spent * devices) or spent > MAX_BUDGET:      # printed as inf, or past any run
        _too_large(*(("tokens", tokens) if tokens is not None else ("days", days)))
    if trained < batch * seq:
        given = ("tokens", f"tokens={tokens}") if tokens is not None else ("days", f"days={days} allow {trained:.4g} tokens")
        raise InputError(f"{given[1]}, less than one step of the global batch ({batch:,} sequences of {seq:,} tokens, "
                         f"{step:.4g} s a step): give more {given[0]} or a smaller --global-batch", given[0])
    seconds = trained / rate
    hours = devices * seconds / 3600
    power = float(timed.board_power)
    if price is not None and not math.isfinite(hours * float(price)):
        raise InputError(f"price={sympify(price).evalf(4)} is too large: the run's cost ({hours:.4g} GPU-hours at "
                         f"it) passes a double's range (about 1.8e308)", "price")
    # the model's FLOPs of one step over the devices' peak; the step time read exactly as printed
    model = per_token(arch, seq).train if recompute else sympify(flops_per_token)
    mfu = float(utilisation(model * batch * seq, Rational(repr(step)), devices, timed))
    return RunPlan(devices, timed.name, batch, row, step, mfu, rate, trained, seconds / SECONDS_A_DAY, hours,
                   hours * power / 1000 if power else None, None if price is None else hours * float(price))


ASSUMED_MFU = Rational(2, 5)
"""``plan_for_days``' first guess: a model FLOP utilisation of 40 %."""


def plan_for_days(devices: int, days, system="h100", law: str = "hoffmann-2022", shape: str = "llama-3",
                  seq: int = 8192, recompute: bool = False, global_batch: int | None = None, price=None):
    """``(plan, run)``: the compute-optimal model (``analysis.planning.plan``) for the FLOPs that
    ``devices`` devices of ``system`` deliver in ``days`` days, and its run (``run_plan``).  From a
    first guess at ``ASSUMED_MFU``, the budget becomes what each plan's predicted speed delivers in
    those days, until it moves by less than 1 % (at most 6 rounds)."""
    check_amounts(days=days, price=price, global_batch=global_batch)
    budget = devices * calibrated(system).matrix_flops * ASSUMED_MFU * sympify(days) * SECONDS_A_DAY
    if not math.isfinite(_double(budget)) or budget > MAX_BUDGET:
        _too_large("days", days)
    for _ in range(6):
        chosen = plan(budget, law, shape, seq, recompute)
        ran = run_plan(chosen.architecture, chosen.flops_per_token, devices, system, seq, days=days,
                       global_batch=global_batch, price=price, recompute=recompute)
        delivered = chosen.flops_per_token * Rational(repr(ran.tokens))
        if abs(float(delivered / budget) - 1) < 0.01:
            break
        budget = delivered
    return chosen, ran


def check_amounts(**given) -> None:
    """Refuse what a run cannot be priced at, as the command line's ``plan`` refuses it:
    ``flops_per_token``, ``tokens``, ``days`` and ``price`` (USD a GPU-hour: a negative one printed a
    negative cost) other than a positive finite number (a float is taken, as budgets are: ``1e12``
    tokens), ``global_batch`` other than a positive integer (0 was taken as the default batch);
    ``None`` is not given.  Text, booleans and symbols are refused: a plan computes numbers
    (``days="3"`` was parsed, a symbolic FLOPs count ended in a ``TypeError``)."""
    for name, value in given.items():
        if value is None:
            continue
        if name == "global_batch":
            count(value, name)
            continue
        rule = f"{name} must be a positive finite number, got {shown(value)}"
        if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, Expr)):
            raise InputTypeError(rule, name)
        number = sympify(value)
        if not (number.is_number and number.is_finite and number.is_positive):
            raise InputError(rule, name)


def _double(value) -> float:
    """``value`` as a double, ``inf`` past a double's range (where ``float`` of an integer raises)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _too_large(name: str, value) -> None:
    """Refuse ``name``'s ``value``: the FLOPs of the run it asks for pass a double's range, so every
    figure printed from them would read ``inf``."""
    raise InputError(f"{name}={_double(sympify(value)):.4g} is too large: the run's FLOPs pass 1e40, the most a plan "
                     f"takes (a double ends near 1.8e308)", name)
