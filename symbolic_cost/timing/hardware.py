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

from collections.abc import Iterable, Mapping
from dataclasses import replace

from sympy import Add, Eq, Expr, Integer, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.extrema import at_most, choice, maximum
from symbolic_cost.trees import remembered
from symbolic_cost.parallel import collectives
from symbolic_cost.rounding import round_down, round_up
from symbolic_cost.timing import attention_kernels, efficiency, kernels, nccl
from symbolic_cost.cost import COLLECTIVE_MADE_BY, Collective, Cost, collective
from symbolic_cost.checks import InputError, InputTypeError, instance, positive_dims, shown
from symbolic_cost.timing.systems import SYSTEMS, System, get_system, product_rate  # noqa: F401 (re-exported)


def _fits(group, system: System):
    """Whether ``group`` devices fit one NVLink domain: True, False or, with
    symbols, the undecided relation."""
    fits = at_most(group, system.nvlink_size)
    return bool(fits) if fits in (True, False) else fits


def _on_link(group, system: System, nvlink, ib):
    """``nvlink`` if the group fits one NVLink domain, else ``ib``."""
    return choice(_fits(group, system), nvlink, ib)


def topology(group, system: System) -> str:
    """The link a group uses, as tables print it.

    >>> topology(4, SYSTEMS["a100-perlmutter"]), topology(8, SYSTEMS["a100-perlmutter"])
    ('nvlink', 'ib')
    """
    fits = _fits(positive_dims(group=group)["group"], system)
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
                         f"got {link!r}", "link")
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
    instance(c, Collective, "c", COLLECTIVE_MADE_BY)
    system = get_system(system)
    if c.reshard is not None:
        return _resharded_time(c, system, conventions, link)
    links = chain_links(c, system) if link is None else None
    if links is not None:           # a chain of sends, each on its own pair's link
        one = replace(c, repeats=Integer(1), volume=c.volume / c.repeats, chain=False)
        return Add(*(count * comm_time(one, system, conventions, name) for name, count in links.items() if count))
    model = conv.get(conventions).comm_time
    if system.efficiency is not None and model != "bandwidth":
        return _nccl_time(c, system, link)
    bandwidth, latency = _link(c, system, link)
    if bandwidth == 0:
        if c.group == 1:
            return Integer(0)   # a group of one moves nothing
        raise InputError(f"system {system.name} has no {link + ' ' if link else ''}link for a {c.kind} "
                         f"over {c.group} devices (its bandwidth is 0)", "system")
    if model == "bandwidth":
        return c.volume / bandwidth
    flat = collectives.time(c.kind, c.group, c.tensor_bytes, bandwidth, latency)
    if model == "hierarchical" and link is None and _fits(c.span, system) is not True:   # else flat on NVLink
        nvlink = (system.nvlink_bandwidth, system.nvlink_latency)
        ib = (system.ib_bandwidth, system.ib_latency)
        # members of the group in one NVLink domain: a group of stride s holds nvlink_size / s of its
        # ranks in each domain (an expert-parallel group ``etp`` apart, a data-parallel one ``m1``)
        members = maximum(1, round_down(system.nvlink_size / c.stride))
        spread = collectives.hierarchical_time(c.kind, c.group, members, c.tensor_bytes, nvlink, ib, c.routing)
        flat = _on_link(c.span, system, flat, spread)
    return c.repeats * flat


def chain_links(c: Collective, system: System) -> dict | None:
    """``{"nvlink": sends, "ib": sends}`` of a chain of sends (``Collective.chain``): the ``k``-th,
    from ranks ``k stride .. k stride + stride - 1`` to the next ``stride``, crosses to another
    NVLink domain of ``nvlink_size`` consecutive ranks where any of its pairs does; ``None`` for
    anything else, or where the sizes are symbols (the group's span then chooses, as for a pair).

    >>> from symbolic_cost.cost import Collective
    >>> sends = Collective("p2p", 10, 2, 2, "fwd", volume=60, repeats=3, stride=4, chain=True)
    >>> chain_links(sends, SYSTEMS["h100"])        # stages 0-1 on one host, 2-3 on the next
    {'nvlink': 2, 'ib': 1}
    """
    repeats, stride, size = sympify(c.repeats), sympify(c.stride), sympify(system.nvlink_size)
    if not (c.chain and repeats.is_Integer and stride.is_Integer and size.is_Integer):
        return None
    repeats, stride, size = int(repeats), int(stride), int(size)
    if stride >= size:              # every pair a domain or more apart
        return {"nvlink": 0, "ib": repeats}
    crossing = sum(any((k * stride + r) // size != ((k + 1) * stride + r) // size for r in range(stride))
                   for k in range(repeats))
    return {"nvlink": repeats - crossing, "ib": crossing}


def _resharded_time(c: Collective, system: System, conventions, link: str | None) -> Expr:
    """A reduce-scatter or allgather of ``blocks.layout.reduce_to_shards`` whose sequence degree
    ``s`` (``c.reshard``) is a symbol: itself where ``s != 1``; where ``s = 1`` the two are one
    allreduce of the reduce-scatter's tensor, priced on the reduce-scatter (the allgather then
    adds nothing), so that the formula at ``s = 1`` is the time of a layout built with ``s1 = 1``."""
    alone = comm_time(replace(c, reshard=None), system, conventions, link)
    if c.kind != "reducescatter":
        return choice(Eq(c.reshard, 1), Integer(0), alone)
    allreduce = collective("allreduce", c.elements, c.element_bytes, c.group, c.pass_, conv.get(conventions),
                           c.repeats, c.stride)
    return choice(Eq(c.reshard, 1), Add(*(comm_time(r, system, conventions, link) for r in allreduce)), alone)


def _nccl_time(c: Collective, system: System, link: str | None) -> Expr:
    """The calibrated model's collective time (``nccl.collective_time``): on NVLink when
    the group fits one domain (or ``link`` pins it), else across ``ceiling(span / domain)``
    domains with the network's bus bandwidth.  Remembered by the fields it reads: a step sends
    the same collectives in both passes and in every kind of layer (22 distinct of DeepSeek-V3's 50)."""
    key = (c.kind, c.elements, c.element_bytes, c.group, c.repeats, c.span, c.routing, system, link)
    return remembered(_NCCL_TIMES, key, lambda _: _priced(c, system, link), kept=_ROWS_KEPT)


_NCCL_TIMES: dict = {}
"""Calibrated collective times already priced, by the fields ``_priced`` reads."""
_ROWS_KEPT = 4096
"""Answers ``_TIMES`` and ``_NCCL_TIMES`` hold before they start again (each a whole expression)."""


def _priced(c: Collective, system: System, link: str | None) -> Expr:
    if c.group == 1:
        return Integer(0)
    if link is not None:
        if getattr(system, f"{link}_bandwidth") == 0:      # as the peak model refuses it (comm_time)
            raise InputError(f"system {system.name} has no {link} link ({link}_bandwidth 0) for a {c.kind} over "
                             f"{c.group} devices", f"{link}_bandwidth")
        return nccl.collective_time(c, system, link)
    nodes = round_up(c.span / system.nvlink_size)
    if system.ib_bandwidth == 0 and (sympify(c.span) - system.nvlink_size).is_positive:
        raise InputError(f"system {system.name} has no network (ib_bandwidth 0) for a {c.kind} over {c.span} devices, "
                         f"past one NVLink domain of {system.nvlink_size}", "ib_bandwidth")
    if system.nvlink_bandwidth == 0 and system.nvlink_size != 1:     # NCCL's rings run on NVLink within a domain
        raise InputError(f"system {system.name} has no NVLink (nvlink_bandwidth 0) for a {c.kind} over {c.span} "
                         f"devices, whose NVLink domains hold {system.nvlink_size} (a system without NVLink has "
                         f"nvlink_size 1)", "nvlink_bandwidth")
    return _on_link(c.span, system, nccl.collective_time(c, system, "nvlink"),
                    nccl.collective_time(c, system, "ib", nodes, intra="nvlink"))


TIME_FIELDS = ("t_comp_fwd", "t_mem_fwd", "t_comp_bwd", "t_mem_bwd", "intensity", "t_fwd", "t_bwd",
               "t_comm_fwd", "t_comm_bwd", "t_total_fwd", "t_total_bwd",
               "frac_t_comm_fwd", "frac_t_comm_bwd")
"""Time columns of a table, in seconds (``intensity`` and fractions are ratios)."""


def times(cost: Cost, system: System, conventions=conv.DEFAULT) -> dict[str, Expr]:
    """The time model for one operation: every ``TIME_FIELDS`` entry as an expression.

    ``intensity`` is ``t_comp_fwd / t_mem_fwd`` (a ratio of times, as in LBNL 2024;
    above 1 the forward pass is compute bound; 0 for a forward with nothing to do).  With ``kernel_time="tiled"``,
    ``t_mem`` and ``t`` come from ``kernels.pass_times`` (tiled GEMM traffic,
    memory latency, launch overhead) instead of ``mem / B_hbm`` and the max.
    """
    t = row_seconds(cost, system, conventions)
    for pass_ in ("fwd", "bwd"):
        t[f"frac_t_comm_{pass_}"] = _share(t[f"t_comm_{pass_}"], t[f"t_total_{pass_}"])
    t["intensity"] = _share(t["t_comp_fwd"], t["t_mem_fwd"])
    return {name: t[name] for name in TIME_FIELDS}


def row_seconds(cost: Cost, system: System, conventions=conv.DEFAULT) -> dict[str, Expr]:
    """``times`` without its ratios (``intensity``, ``frac_t_comm_*``): what a step time adds
    up.  A ratio of two whole-pass times is a division SymPy checks with assumption queries, a
    fifth of building a model's step time for nothing."""
    system, conventions = get_system(system), conv.get(conventions)
    return dict(remembered(_TIMES, (cost, system, conventions), lambda key: _row_times(*key), kept=_ROWS_KEPT))


_TIMES: dict = {}
"""The time model of the last rows asked for: a search asks again for every ZeRO stage,
schedule and offload it compares, with the same rows."""


def _row_times(cost: Cost, system: System, conventions) -> dict[str, Expr]:
    t = {}
    for pass_ in ("fwd", "bwd"):
        t[f"t_comp_{pass_}"], t[f"t_mem_{pass_}"], t[f"t_{pass_}"] = _pass_seconds(cost, pass_, system, conventions)
        t[f"t_comm_{pass_}"] = sum((comm_time(c, system, conventions)
                                    for c in cost.collectives if c.pass_ == pass_), Integer(0))
        combine = maximum if conventions.overlap_comm else (lambda x, y: x + y)
        t[f"t_total_{pass_}"] = combine(t[f"t_{pass_}"], t[f"t_comm_{pass_}"])
    return t


def _pass_seconds(cost: Cost, pass_: str, system: System, conventions) -> tuple[Expr, Expr, Expr]:
    """``(compute, memory, both)`` seconds of one row's pass: the calibrated model's achieved
    rates (``efficiency.pass_times``), the tiled kernel model, or the datasheet roofline."""
    if system.efficiency is not None:       # and each kernel's launch (Efficiency.kernel)
        compute, memory = efficiency.pass_times(cost, pass_, system, conventions)
        eff = system.efficiency
        floor = (efficiency.launches(cost, pass_) * eff.kernel
                 + efficiency.group_launches(cost, pass_) * eff.group_kernel)
        return compute, memory, maximum(compute, memory) + floor
    flops_rate = product_rate(cost, system) if cost.engine == "matrix" else system.vector_flops
    compute = attention_kernels.executed_flops(cost, pass_) / flops_rate     # a flash kernel: its tiles
    if conventions.kernel_time == "tiled":
        return (compute, *kernels.pass_times(cost, pass_, system, conventions))
    memory = getattr(cost, f"mem_{pass_}") / system.hbm_bandwidth
    return compute, memory, maximum(compute, memory)


def _share(part, whole) -> Expr:
    """``part / whole``, 0 where both are 0 (a pass with nothing to do, not ``nan``)."""
    return Integer(0) if part == 0 and whole == 0 else part / whole


def step_time(costs, system: System | str, conventions=conv.DEFAULT, passes=("fwd", "bwd")) -> Expr:
    """Seconds for ``costs`` (a Block or any Costs) in the given passes: the sum of
    each row's ``t_total``, forward plus backward by default."""
    system, conventions = get_system(system), conv.get(conventions)
    if not isinstance(costs, Iterable) or isinstance(costs, (str, Mapping)):
        raise InputTypeError(f"costs must be a Block or other Costs, got {shown(costs)}", "costs")
    if not isinstance(passes, (tuple, list)) or not passes or not all(p in ("fwd", "bwd") for p in passes) \
            or len(set(passes)) != len(passes):              # none would time nothing, one twice count it twice
        raise InputError(f"passes must hold 'fwd' and/or 'bwd', each once, got {passes!r}", "passes")
    return Add(*(row_seconds(instance(cost, Cost, "costs' rows"), system, conventions)[f"t_total_{p}"]
                 for cost in costs for p in passes))


def calibrated(system: System | str) -> System:
    """A system timed by the calibrated model: its preset's ``timing.efficiency.efficiency``.

    >>> calibrated("a100").efficiency.sms
    108
    """
    system = get_system(system)
    return system if system.efficiency is not None else system.but(efficiency=efficiency.efficiency(system.name))
