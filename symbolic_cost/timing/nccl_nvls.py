"""NCCL's NVLS algorithms (NVLink SHARP: the NVSwitch reduces and multicasts) as its tuning
model prices them, beside the ring and tree of ``timing.nccl``.

Source: ``src/graph/tuning.cc`` of github.com/NVIDIA/nccl at commit b6475625 (NCCL 2.19/2.20,
the version with NVLS, NVLS tree and MNNVL), and its ``ncclNvlsInit`` (``src/transport/nvls.cc``:
no NVLS where a host holds two GPUs of the communicator or fewer).  Both are Simple only:

* **NVLS** (allreduce, allgather, reduce-scatter within one NVLink domain): latency
  ``hwLat[NVLINK][NVLS] = 23`` µs and nothing else, algorithm bandwidth ``5/6`` of the bus
  bandwidth (NCCL's ratio for NVLS; the ring's is ``n / (2(n - 1))`` for an allreduce);
* **NVLS tree** (an allreduce across domains: NVLS inside each, a tree between them): latency
  ``23 + 2 floor(log2 nodes) x 14`` µs, bandwidth ``5/6`` of ``min(bus_nvlink, bus_net)`` (the
  network's halved beyond two nodes).

Assumed: the NVLS graph's channels carry the ring's bus bandwidth (``nvlink_bus``), and the
network adds no latency of its own (``latencyInter``, 0 unless a network plugin sets it).  In
the version followed NVLS is off on a multi-node NVLink domain (GB200 NVL72), and CollNet is
not modelled, so NVLS alone never spans domains.
"""

from __future__ import annotations

from sympy import Expr, Rational, S, sympify

from symbolic_cost.collective_kinds import kind_of
from symbolic_cost.extrema import at_least, maximum, minimum
from symbolic_cost.parallel.collectives import Log2

MICRO = Rational(1, 10**6)

NVLS_HOP = 23 * MICRO            # hwLat[NVLINK][NVLS][SIMPLE], also NVLS tree's intra-domain latency
NVLS_TREE_NET = 14 * MICRO       # hwLat[NET][NVLS_TREE][SIMPLE], per tree level, up and down
NVLS_RATIO = Rational(5, 6)      # algorithm bandwidth per bus bandwidth of NVLS and NVLS tree


def nvls_enabled(n, nodes=1):
    """Where NCCL sets NVLS up: more than two of the ``n`` devices in each of the ``nodes``
    domains (``ncclNvlsInit`` refuses a host with two GPUs or fewer), i.e. ``n >= 3 nodes``;
    ``true``/``false`` for numbers, a relation for symbols.

    >>> nvls_enabled(8), nvls_enabled(2), nvls_enabled(16, 16), nvls_enabled(32, 4)
    (True, False, False, True)
    """
    return at_least(n, 3 * sympify(nodes))


def nvls_time(n, tensor_bytes, bus) -> Expr:
    """Seconds of an NVLS collective of ``V = tensor_bytes`` within one NVLink domain (the
    allreduce's ``V``, or the whole gathered / scattered tensor): ``23 µs + V / (5/6 bus)``.

    >>> nvls_time(8, 10**9, 600 * 10**9) == Rational(23, 10**6) + Rational(10**9 * 6, 5 * 600 * 10**9)
    True
    """
    return NVLS_HOP + sympify(tensor_bytes) / (NVLS_RATIO * bus)


def nvls_tree_time(tensor_bytes, nvlink_bus, net_bus, nodes) -> Expr:
    """Seconds of an allreduce of ``V = tensor_bytes`` as NCCL's NVLS tree over ``nodes``
    domains: ``23 + 2 floor(log2 nodes) x 14`` µs plus ``V`` at ``5/6`` of the smaller of the
    NVLink bus and the network's (halved beyond two nodes).

    >>> # 1 GB over 4 domains of H100 (352.5 GB/s NVLink, 50 GB/s network): 23 + 2 x 2 x 14 us + 1 GB / (5/6 x 25 GB/s)
    >>> t = nvls_tree_time(10**9, Rational(705, 2) * 10**9, 50 * 10**9, 4)
    >>> t == Rational(23 + 56, 10**6) + Rational(10**9 * 6, 5 * 25 * 10**9)
    True
    """
    nodes = sympify(nodes)
    few = minimum(1, maximum(0, 3 - nodes))      # 1 up to two nodes, else 0
    bus = minimum(nvlink_bus, net_bus * (1 + few) / 2)
    levels = Log2(nodes + 1) - 1                 # floor(log2 nodes), as in timing.nccl.tree_time
    return NVLS_HOP + 2 * levels * NVLS_TREE_NET + sympify(tensor_bytes) / (NVLS_RATIO * bus)


def nvls_candidate(kind: str, n, tensor_bytes, eff, link: str, nodes):
    """``(where, seconds)``: the NVLS algorithm NCCL weighs for a ``kind`` over ``n`` devices on
    ``link`` (``eff``: the system's ``Efficiency``) and where it is set up (``nvls_enabled``: true,
    or a relation for a symbolic group), or ``None`` where it never is: NVLS for a group in one
    domain, NVLS tree for an allreduce across ``nodes > 1`` domains.
    (23 µs + 1 GB / (5/6 x 500 GB/s) = 2.423 ms below.)

    >>> from types import SimpleNamespace
    >>> from symbolic_cost.symbols import m1
    >>> nvls_candidate("allreduce", m1, 10**9, SimpleNamespace(nvlink_bus=5 * 10**11), "nvlink", 1)
    (m1 >= 3, 2423/1000000)
    """
    form = kind_of(kind)
    if not form.nvls:
        return None
    if link == "nvlink":
        on, time = nvls_enabled(n), nvls_time(n, tensor_bytes, eff.nvlink_bus)
    elif form.tree and nodes != 1:
        on, time = nvls_enabled(n, nodes), nvls_tree_time(tensor_bytes, eff.nvlink_bus, eff.ib_bus, nodes)
    else:
        return None
    return None if on is S.false else (on, time)
