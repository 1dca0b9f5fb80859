"""A system derived from a power budget (DeepFlow's technology model, arXiv 2211.03309).

Each unit of the chip gets a share of the thermal design power ``TDP`` and
turns it into throughput at a technology's energy per operation; memories
get their capacity by stacking as many parts as their bandwidth needs::

    peak          = share_core * TDP / E_flop                (FLOP/s)
    B_dram        = share_dram * TDP / (8 E_dram_bit)         (bytes/s; 8 bits a byte)
    hbm_capacity  = B_dram / B_stack * C_stack               (stacks needed for B_dram)
    B_l2          = share_l2 * TDP / (8 E_l2_bit),    l2_capacity = B_l2 / B_bank * C_bank
    B_smem        = share_smem * TDP / (8 E_smem_bit), smem_capacity = B_smem / B_bank * C_bank
    B_link        = share_link * TDP / (8 E_link_bit)        (0 without links)

Achieved compute and DRAM bandwidth are the peaks times derates (DeepFlow:
0.7 each); the capacities come from the peak DRAM bandwidth.  Everything is
exact: pass Rationals (``Rational("0.2592")``) or symbols.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from sympy import Expr, Integer, Rational

from symbolic_cost.cost import exact
from symbolic_cost.timing.hardware import System
from symbolic_cost.checks import InputError, instance


def _exact_fields(record, positive=(), unit_interval=()):
    for item in fields(record):
        value = exact(getattr(record, item.name), item.name)
        if value.is_number:
            if item.name in positive and not value > 0:
                raise InputError(f"{item.name} must be positive, got {value}", item.name)
            if item.name in unit_interval and not 0 <= value <= 1:
                raise InputError(f"{item.name} must lie in [0, 1], got {value}", item.name)
        object.__setattr__(record, item.name, value)


@dataclass(frozen=True)
class Technology:
    """Energies (J per FLOP, J per bit) and memory building blocks of a process node."""

    flop_energy: Expr
    dram_bit_energy: Expr
    l2_bit_energy: Expr
    shared_memory_bit_energy: Expr
    hbm_stack_capacity: Expr      # bytes per HBM stack
    hbm_stack_bandwidth: Expr     # bytes/s per HBM stack
    bank_capacity: Expr           # bytes per SRAM bank (L2 and shared memory)
    bank_bandwidth: Expr          # bytes/s per SRAM bank
    link_bit_energy: Expr = Integer(0)

    def __post_init__(self):
        _exact_fields(self, positive=[f.name for f in fields(self) if f.name != "link_bit_energy"])


@dataclass(frozen=True)
class PowerBudget:
    """``tdp`` watts split into shares of the core, DRAM, L2, shared memory and links."""

    tdp: Expr
    core: Expr
    dram: Expr
    l2: Expr
    shared_memory: Expr
    links: Expr = Integer(0)
    compute_derate: Expr = Rational(7, 10)
    dram_derate: Expr = Rational(7, 10)

    def __post_init__(self):
        shares = ("core", "dram", "l2", "shared_memory", "links")
        _exact_fields(self, positive=("tdp", "core", "dram", "l2", "shared_memory"),
                      unit_interval=shares + ("compute_derate", "dram_derate"))
        spent = sum(getattr(self, name) for name in shares)
        if spent.is_number and spent > 1:
            raise InputError(f"power shares must sum to at most 1, got {spent} "
                             f"({' + '.join(str(getattr(self, n)) for n in shares)})", shares[0])

    def watts(self, share: str) -> Expr:
        return self.tdp * getattr(self, share)


def peak_flops(budget: PowerBudget, tech: Technology) -> Expr:
    """FLOP/s the core's share buys before the derate: ``share * TDP / E_flop``."""
    return budget.watts("core") / tech.flop_energy


def peak_dram_bandwidth(budget: PowerBudget, tech: Technology) -> Expr:
    """Bytes/s the DRAM share buys before the derate: ``share * TDP / (8 E_bit)``."""
    return budget.watts("dram") / (8 * tech.dram_bit_energy)


def system_from_power(name: str, budget: PowerBudget, tech: Technology, *, memory_latency=0,
                      launch_overhead=0, link_latency=0, nvlink_size=1) -> System:
    """The ``System`` a power budget buys (module docstring).

    >>> from sympy import Rational as R
    >>> tech = Technology(R(10, 10**12), R(5, 10**12), R(1, 10**15), R(1, 10**15),
    ...                   4 * 2**30, 200 * 2**30, 2**15, 4000 * 2**30)
    >>> chip = system_from_power("toy", PowerBudget(300, R(1, 2), R(1, 4), R(1, 8), R(1, 8)), tech)
    >>> chip.matrix_flops, chip.hbm_bandwidth    # 150 W / 10 pJ * 0.7; 75 W / 40 pJ * 0.7
    (10500000000000, 1312500000000)
    """
    instance(budget, PowerBudget, "budget", " (timing.power.PowerBudget(tdp, core, dram, l2, shared_memory))")
    instance(tech, Technology, "tech", " (timing.power.Technology(...))")
    dram = peak_dram_bandwidth(budget, tech)
    compute = peak_flops(budget, tech) * budget.compute_derate
    l2 = budget.watts("l2") / (8 * tech.l2_bit_energy)
    smem = budget.watts("shared_memory") / (8 * tech.shared_memory_bit_energy)
    links = budget.watts("links") / (8 * tech.link_bit_energy) if tech.link_bit_energy != 0 else Integer(0)
    return System(
        name, compute, compute, dram * budget.dram_derate, links, links, nvlink_size,
        nvlink_latency=link_latency, ib_latency=link_latency,
        hbm_capacity=dram / tech.hbm_stack_bandwidth * tech.hbm_stack_capacity,
        l2_bandwidth=l2, l2_capacity=l2 / tech.bank_bandwidth * tech.bank_capacity,
        shared_memory_capacity=smem / tech.bank_bandwidth * tech.bank_capacity,
        memory_latency=memory_latency, launch_overhead=launch_overhead)
