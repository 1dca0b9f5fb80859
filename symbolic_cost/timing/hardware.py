"""Systems and the per-operation time model.

A ``System`` holds throughputs in FLOP/s, bandwidths in bytes/s, latencies
in seconds and capacity in bytes, all exact (or symbols).  Times are
expressions in seconds; tables convert to ms.

Per operation and pass::

    t_comp  = flops / (matrix or vector FLOP/s)      t_mem = bytes moved / HBM bandwidth
    t       = max(t_comp, t_mem)                      (roofline)
    t_comm  = sum of the pass's collective times
    t_total = t + t_comm    (or max(t, t_comm) with ``overlap_comm``)

Collective time, with bandwidth ``B`` and latency ``a`` of the link the group
uses (NVLink when the group fits in one NVLink domain, else InfiniBand, unless
``comm_time``'s ``link`` pins one):

* ``"alpha-beta"`` (default), a ring: ``steps * a + ring_bytes / B`` where a
  reduce-scatter, allgather or all-to-all takes ``n - 1`` steps and moves
  ``(n-1)/n`` of the tensor, an allreduce ``2(n - 1)`` steps and ``2(n-1)/n``,
  a p2p send 1 step and the whole tensor.
* ``"hierarchical"``: the ring within one NVLink domain; a group spanning
  domains runs the two-level algorithms of ``collectives.hierarchical_time``.
* ``"bandwidth"`` (LBNL 2024): ``volume / B``; kind, group and latency ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from sympy import Expr, Integer, Piecewise, Rational, ceiling, floor, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.extrema import maximum
from symbolic_cost.parallel import collectives
from symbolic_cost.timing import efficiency, kernels
from symbolic_cost.cost import Collective, Cost, exact
from symbolic_cost.checks import InputError

TERA, GIGA, MICRO = Integer(10) ** 12, Integer(10) ** 9, Rational(1, 10**6)


@dataclass(frozen=True)
class System:
    """One accelerator and its links.

    ``nvlink_size`` is the number of devices that share an NVLink domain;
    bandwidths are per device and direction as the vendors quote them.  The
    memory-hierarchy fields (``l2_*``, ``shared_memory_capacity`` summed over
    the chip, ``memory_latency``, ``launch_overhead``) feed only the kernel-level
    model (``kernel_time="tiled"``, see ``kernels``).  A field that may be 0
    means "not stated" (capacities, latencies) or "no such link" (bandwidths of
    links, L2).  ``host_bandwidth`` is the device's link to its host's memory, which
    offloaded state crosses (``timing.host``): PCIe Gen4 x16 on A100 boards, 32 GB/s per
    direction (half the datasheet's 64 GB/s both ways), PCIe Gen5 x16 on H100/H200 SXM,
    64 GB/s (128 GB/s both ways); a Grace Hopper's NVLink-C2C is 450 GB/s per direction
    (900 GB/s both ways): ``.but(host_bandwidth=450 * GIGA)``.  ``host_memory_bandwidth`` is a
    node's host memory (all its sockets), which an offloaded optimizer step streams
    (``timing.host.host_step_time``): 8 channels of DDR5-4800 per Xeon 8480C, two per DGX
    H100 / HGX H200 node (614.4 GB/s); 8 of DDR4-3200 per EPYC 7742, two per DGX A100
    (409.6 GB/s), one EPYC 7763 per Perlmutter GPU node (204.8 GB/s): channels x transfers/s x
    8 bytes, the vendors' peak.
    """

    name: str
    matrix_flops: Expr       # FLOP/s on matrix units (dense, 16-bit)
    vector_flops: Expr       # FLOP/s on vector units (16-bit)
    hbm_bandwidth: Expr      # bytes/s
    nvlink_bandwidth: Expr   # bytes/s per device
    ib_bandwidth: Expr       # bytes/s per device
    nvlink_size: Expr        # devices per NVLink domain
    nvlink_latency: Expr = 2 * MICRO   # s per ring step (assumed, order of NCCL's)
    ib_latency: Expr = 5 * MICRO       # s per ring step (assumed)
    hbm_capacity: Expr = 0             # bytes; 0 when not stated
    l2_bandwidth: Expr = 0             # bytes/s
    l2_capacity: Expr = 0              # bytes
    shared_memory_capacity: Expr = 0   # bytes, all SMs together
    memory_latency: Expr = 0           # s added to a memory-bound kernel
    launch_overhead: Expr = 0          # s per kernel launch
    host_bandwidth: Expr = 0           # bytes/s per device and direction to host memory (PCIe, NVLink-C2C)
    fp8_flops: Expr = 0                # FLOP/s of dense FP8 products on matrix units; 0: none (matrix_flops)
    host_memory_bandwidth: Expr = 0    # bytes/s of a node's host memory (all sockets); 0: not stated
    efficiency: object = None          # a timing.efficiency.Efficiency: the calibrated model; None: peak only

    _REQUIRED = ("matrix_flops", "vector_flops", "hbm_bandwidth", "nvlink_size")

    def __post_init__(self):
        for item in fields(self)[1:]:
            if item.name == "efficiency":
                continue
            value = exact(getattr(self, item.name), item.name)
            if value.is_number and (value < 0 or (value == 0 and item.name in self._REQUIRED)):
                raise InputError(f"system {self.name}: {item.name} must be positive, got {value}")
            object.__setattr__(self, item.name, value)

    def but(self, **changes) -> "System":
        known = {item.name for item in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise InputError(f"unknown system field(s): {', '.join(sorted(unknown))}; "
                             f"fields: {', '.join(sorted(known - {'name'}))}")
        return replace(self, **changes)

    def require(self, purpose: str, *names: str) -> None:
        """Raise a ``ValueError`` if a field ``purpose`` needs is stated as 0."""
        for name in names:
            if getattr(self, name) == 0:
                raise InputError(f"system {self.name}: {purpose} needs {name}, which is 0 (not stated); "
                                 f"set it with .but({name}=...)")


KIB, MIB = Integer(2) ** 10, Integer(2) ** 20

_AMPERE_CHIP = dict(
    l2_capacity=40 * MIB, shared_memory_capacity=108 * 164 * KIB,   # 108 SMs x 164 KiB
    l2_bandwidth=5120 * Rational(141, 100) * GIGA,   # 5120 B/clock at 1.41 GHz (whitepaper)
    memory_latency=Rational(1, 2) * MICRO,           # assumed, order of a DRAM round trip
    launch_overhead=4 * MICRO)                        # assumed, order of a CUDA launch
_HOPPER_CHIP = dict(
    l2_capacity=50 * MIB, shared_memory_capacity=132 * 228 * KIB,   # 132 SMs x 228 KiB
    l2_bandwidth=5120 * Rational(198, 100) * GIGA,   # 5120 B/clock at 1.98 GHz (assumed)
    memory_latency=Rational(1, 2) * MICRO, launch_overhead=4 * MICRO)

_DDR4_3200, _DDR5_4800 = 8 * 3200 * 10**6 * 8, 8 * 4800 * 10**6 * 8
"""Peak bytes/s of one socket's 8 memory channels (channels x transfers/s x 8 bytes)."""

SYSTEMS = {
    # The numbers of seed 003 (LBNL, Perlmutter: 4 x A100-40GB per node).
    "a100-perlmutter": System("a100-perlmutter", 312 * TERA, 78 * TERA, 1555 * GIGA,
                              600 * GIGA, 100 * GIGA, 4, hbm_capacity=40 * GIGA, host_bandwidth=32 * GIGA,
                              host_memory_bandwidth=_DDR4_3200, **_AMPERE_CHIP),
    # DGX A100 80GB: 8 GPUs on NVSwitch, one 200 Gb/s HDR NIC per GPU.
    "a100": System("a100", 312 * TERA, 78 * TERA, 2039 * GIGA, 600 * GIGA, 25 * GIGA, 8,
                   hbm_capacity=80 * GIGA, host_bandwidth=32 * GIGA, host_memory_bandwidth=2 * _DDR4_3200,
                   **_AMPERE_CHIP),
    # DGX H100 (SXM): 989.4 TFLOP/s dense bf16 (1978.9 FP8), 8 GPUs, one 400 Gb/s NDR NIC per GPU.
    "h100": System("h100", Rational("989.4") * TERA, Rational("133.8") * TERA, 3350 * GIGA,
                   900 * GIGA, 50 * GIGA, 8, hbm_capacity=80 * GIGA, host_bandwidth=64 * GIGA,
                   fp8_flops=Rational("1978.9") * TERA, host_memory_bandwidth=2 * _DDR5_4800, **_HOPPER_CHIP),
    # H200 (SXM): H100 compute, 141 GB HBM3e at 4.8 TB/s.
    "h200": System("h200", Rational("989.4") * TERA, Rational("133.8") * TERA, 4800 * GIGA,
                   900 * GIGA, 50 * GIGA, 8, hbm_capacity=141 * GIGA, host_bandwidth=64 * GIGA,
                   fp8_flops=Rational("1978.9") * TERA, host_memory_bandwidth=2 * _DDR5_4800, **_HOPPER_CHIP),
}


def get_system(name: str | System) -> System:
    """Look up a system preset by name (a ``System`` passes through)."""
    if isinstance(name, System):
        return name
    try:
        return SYSTEMS[name]
    except KeyError:
        raise InputError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}") from None


def _fits(group, system: System):
    """Whether ``group`` devices fit one NVLink domain: True, False or, with
    symbols, the undecided relation."""
    fits = sympify(group) <= system.nvlink_size
    return bool(fits) if fits in (True, False) else fits


def _on_link(group, system: System, nvlink, ib):
    """``nvlink`` if the group fits one NVLink domain, else ``ib``."""
    fits = _fits(group, system)
    if isinstance(fits, bool):
        return nvlink if fits else ib
    return Piecewise((nvlink, fits), (ib, True))


def topology(group, system: System) -> str:
    """The link a group uses, as tables print it.

    >>> topology(4, SYSTEMS["a100-perlmutter"]), topology(8, SYSTEMS["a100-perlmutter"])
    ('nvlink', 'ib')
    """
    fits = _fits(group, system)
    if isinstance(fits, bool):
        return "nvlink" if fits else "ib"
    return f"nvlink if {fits} else ib"


LINKS = ("nvlink", "ib")
"""Links a collective may be pinned to (``comm_time``'s ``link``)."""


def _link(c: Collective, system: System, link: str | None) -> tuple[Expr, Expr]:
    """``(bandwidth, latency)`` of the link ``c`` runs on: ``link`` when given
    (``"nvlink"`` or ``"ib"``), else chosen by the group's span."""
    if link is None:
        return (_on_link(c.span, system, system.nvlink_bandwidth, system.ib_bandwidth),
                _on_link(c.span, system, system.nvlink_latency, system.ib_latency))
    if link not in LINKS:
        raise InputError(f"link must be one of {', '.join(LINKS)} or None (chosen by the group's span), "
                         f"got {link!r}")
    return getattr(system, f"{link}_bandwidth"), getattr(system, f"{link}_latency")


def comm_time(c: Collective, system: System, conventions=conv.DEFAULT, link: str | None = None) -> Expr:
    """Seconds one collective (all its repeats) takes; see the module docstring.

    ``link`` pins the collective to ``"nvlink"`` or ``"ib"`` whatever its span
    (a pinned group runs the flat algorithm on that link, also under
    ``"hierarchical"``); by default the span chooses.

    >>> from symbolic_cost.cost import Collective
    >>> ag = Collective("allgather", 10**9, 2, 4, "fwd", volume=2 * 10**9)
    >>> comm_time(ag, SYSTEMS["a100-perlmutter"], conv.get("lbnl-2024"))
    1/300
    >>> comm_time(ag, SYSTEMS["a100-perlmutter"].but(nvlink_latency=0))
    1/400
    >>> comm_time(ag, SYSTEMS["a100-perlmutter"].but(ib_latency=0), link="ib")   # 3/4 of 2 GB at 100 GB/s
    3/200
    """
    model = conv.get(conventions).comm_time
    if system.efficiency is not None and model != "bandwidth":
        return _nccl_time(c, system, link)
    bandwidth, latency = _link(c, system, link)
    if bandwidth == 0:
        if c.group == 1:
            return Integer(0)   # a group of one moves nothing
        raise InputError(f"system {system.name} has no {link + ' ' if link else ''}link for a {c.kind} "
                         f"over {c.group} devices (its bandwidth is 0)")
    if model == "bandwidth":
        return c.volume / bandwidth
    flat = collectives.time(c.kind, c.group, c.tensor_bytes, bandwidth, latency)
    if model == "hierarchical" and link is None:
        nvlink = (system.nvlink_bandwidth, system.nvlink_latency)
        ib = (system.ib_bandwidth, system.ib_latency)
        # members of the group in one NVLink domain: a group of stride s holds nvlink_size / s of its
        # ranks in each domain (an expert-parallel group ``etp`` apart, a data-parallel one ``m1``)
        members = maximum(1, floor(system.nvlink_size / c.stride))
        spread = collectives.hierarchical_time(c.kind, c.group, members, c.tensor_bytes, nvlink, ib)
        flat = _on_link(c.span, system, flat, spread)
    return c.repeats * flat


def _nccl_time(c: Collective, system: System, link: str | None) -> Expr:
    """The calibrated model's collective time (``efficiency.collective_time``): on NVLink when
    the group fits one domain (or ``link`` pins it), else across ``ceiling(span / domain)``
    domains with the network's bus bandwidth."""
    if c.group == 1:
        return Integer(0)
    if link is not None:
        return efficiency.collective_time(c, system, link)
    nodes = ceiling(c.span / system.nvlink_size)
    return _on_link(c.span, system, efficiency.collective_time(c, system, "nvlink"),
                    efficiency.collective_time(c, system, "ib", nodes))


TIME_FIELDS = ("t_comp_fwd", "t_mem_fwd", "t_comp_bwd", "t_mem_bwd", "intensity", "t_fwd", "t_bwd",
               "t_comm_fwd", "t_comm_bwd", "t_total_fwd", "t_total_bwd",
               "frac_t_comm_fwd", "frac_t_comm_bwd")
"""Time columns of a table, in seconds (``intensity`` and fractions are ratios)."""


def times(cost: Cost, system: System, conventions=conv.DEFAULT) -> dict[str, Expr]:
    """The time model for one operation: every ``TIME_FIELDS`` entry as an expression.

    ``intensity`` is ``t_comp_fwd / t_mem_fwd`` (a ratio of times, as in LBNL 2024;
    above 1 the forward pass is compute bound).  With ``kernel_time="tiled"``,
    ``t_mem`` and ``t`` come from ``kernels.pass_times`` (tiled GEMM traffic,
    memory latency, launch overhead) instead of ``mem / B_hbm`` and the max.
    """
    system, conventions = get_system(system), conv.get(conventions)
    key = (cost, system, conventions)
    if key not in _TIMES:
        if len(_TIMES) >= 4096:
            _TIMES.pop(next(iter(_TIMES)))
        _TIMES[key] = _row_times(cost, system, conventions)
    return dict(_TIMES[key])


_TIMES: dict = {}
"""The time model of the last rows asked for: a search asks again for every ZeRO stage,
schedule and offload it compares, with the same rows."""


def _row_times(cost: Cost, system: System, conventions) -> dict[str, Expr]:
    flops_rate = system.matrix_flops if cost.engine == "matrix" else system.vector_flops
    if cost.fp8 and system.fp8_flops:      # an FP8 recipe's products, on FP8 tensor cores
        flops_rate = system.fp8_flops
    t = {}
    for pass_ in ("fwd", "bwd"):
        t[f"t_comp_{pass_}"] = getattr(cost, f"flops_{pass_}") / flops_rate
        if system.efficiency is not None:     # the calibrated model: achieved rates, then the roofline
            t[f"t_comp_{pass_}"], t[f"t_mem_{pass_}"] = efficiency.pass_times(cost, pass_, system, conventions)
            t[f"t_{pass_}"] = maximum(t[f"t_comp_{pass_}"], t[f"t_mem_{pass_}"])
        elif conventions.kernel_time == "tiled":
            t[f"t_mem_{pass_}"], t[f"t_{pass_}"] = kernels.pass_times(cost, pass_, system, conventions)
        else:
            t[f"t_mem_{pass_}"] = getattr(cost, f"mem_{pass_}") / system.hbm_bandwidth
            t[f"t_{pass_}"] = maximum(t[f"t_comp_{pass_}"], t[f"t_mem_{pass_}"])
        t[f"t_comm_{pass_}"] = sum((comm_time(c, system, conventions)
                                    for c in cost.collectives if c.pass_ == pass_), Integer(0))
        combine = maximum if conventions.overlap_comm else (lambda x, y: x + y)
        t[f"t_total_{pass_}"] = combine(t[f"t_{pass_}"], t[f"t_comm_{pass_}"])
        t[f"frac_t_comm_{pass_}"] = t[f"t_comm_{pass_}"] / t[f"t_total_{pass_}"]
    t["intensity"] = t["t_comp_fwd"] / t["t_mem_fwd"]
    return {name: t[name] for name in TIME_FIELDS}


def step_time(costs, system: System | str, conventions=conv.DEFAULT, passes=("fwd", "bwd")) -> Expr:
    """Seconds for ``costs`` (a Block or any Costs) in the given passes: the sum of
    each row's ``t_total``, forward plus backward by default."""
    system, conventions = get_system(system), conv.get(conventions)
    return sum((times(cost, system, conventions)[f"t_total_{p}"] for cost in costs for p in passes),
               Integer(0))


def calibrated(system: System | str) -> System:
    """A system timed by the calibrated model: its preset's ``timing.efficiency.efficiency``.

    >>> calibrated("a100").efficiency.sms
    108
    """
    system = get_system(system)
    return system if system.efficiency is not None else system.but(efficiency=efficiency.efficiency(system.name))
