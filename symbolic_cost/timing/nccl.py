"""Collectives as NCCL's own cost model prices them (``src/graph/tuning.cc``'s
``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``), for the calibrated time model
(``timing.efficiency``, ``hardware.comm_time``).

For each algorithm and protocol NCCL predicts ``latency + bytes / algorithm bandwidth`` and
runs the cheapest it has enabled:

* **ring** (every collective, ``nccl_time``): latency ``base + steps x hop`` per protocol, the
  ring's bytes per device at the bus bandwidth; protocols ``LL`` (8-byte flag+data words: a
  quarter of the bus bandwidth for an allreduce, a third otherwise), ``LL128`` (``ll128_share``)
  and ``Simple``;
* **tree** (an allreduce across NVLink domains, ``tree_time``): the devices of a domain chained,
  the domains in a double binary tree; latency ``2((n/nodes - 1) hop_nvlink + floor(log2 nodes)
  hop_net)`` on top of the base, half of ``min(0.9 bus, 80/110 GB/s)`` as bandwidth, corrected
  for medium messages (``tree_correction``);
* **NVLS** (NVLink SHARP, the switch reduces) within a domain and **NVLS tree** across domains,
  on systems whose switches can (``timing.nccl_nvls``).

``LL128`` is a candidate only where NCCL enables it by default: all devices of one generation,
Volta, Ampere or Hopper (``LL128_ARCHS``), joined by NVLink (every system here joins a domain
by NVLink; the network path is taken as NCCL's PXB/PXN, a NIC beside each GPU).

Sources.  The ring and tree constants (LL, LL128, Simple) are those of NCCL 2.8's
``tuning.cc`` (github.com/NVIDIA/nccl, blob 01afd20a, the file with ``ll128MaxBwPerCh =
{18.8, 12.0, 18.3, 15.2, 16.7}`` and the compute-capability 8.0 caps), the version the
calibration was fitted with.  Two rules come from a later ``tuning.cc`` (commit b6475625,
NCCL 2.19/2.20, the one with NVLS and MNNVL): LL128 on by default for Hopper too, and
everything NVLS.  NCCL's per-channel bandwidth of one NVLink (``NVLINK_CHANNEL``) is
``src/graph/topo.h``'s ``SM80/SM90/SM100_NVLINK_BW``.  CollNet, PAT and NCCL 2.19's other
changes to ring and tree (LL caps, per-channel tree caps, network overheads) are not
modelled.  The latencies are in seconds (``MICRO``: one µs).
"""

from __future__ import annotations

from sympy import Basic, Expr, Function, Integer, Piecewise, Rational, S, StrictLessThan, Tuple, sympify
from sympy.functions.elementary.piecewise import ExprCondPair

from symbolic_cost.checks import InputTypeError, choice as one_of, instance, shown
from symbolic_cost.collective_kinds import kind_of
from symbolic_cost.cost import COLLECTIVE_MADE_BY, Collective
from symbolic_cost.extrema import choice, maximum, minimum
from symbolic_cost.parallel.collectives import Log2, network_share
from symbolic_cost.rounding import round_down

MICRO = Rational(1, 10**6)
GIGA = Integer(10) ** 9


# the ring's base latency per protocol and latency per ring step on NVLink and on the network
LINKS = ("nvlink", "ib")
"""The links a collective runs on: the NVLink domain, or the network between nodes."""

BASE = {"LL": Rational(36, 10) * MICRO, "LL128": 10 * MICRO, "Simple": Rational(84, 10) * MICRO}
HOP = {("nvlink", "LL"): Rational(47, 100) * MICRO, ("nvlink", "LL128"): Rational(19, 10) * MICRO,
       ("nvlink", "Simple"): Rational(34, 10) * MICRO,
       ("ib", "LL"): Rational(27, 10) * MICRO, ("ib", "LL128"): 4 * MICRO, ("ib", "Simple"): Rational(96, 10) * MICRO}

LL128_ARCHS = ("volta", "ampere", "hopper")
"""Where NCCL enables LL128 by default (``pEnable``: compute capability 7.0 or 8.0 in 2.8, 9.0 too
from the later file; any other, Blackwell included in that version, off)."""
NVLINK_CHANNEL = {"volta": 20 * GIGA, "ampere": 20 * GIGA, "hopper": Rational("20.6") * GIGA,
                  "blackwell": Rational("40.1") * GIGA, "other": 20 * GIGA}
"""The bus bandwidth of one NCCL channel over NVLink (one link), bytes/s (``topo.h``)."""


def protocols(arch: str, kind: str = "allreduce") -> tuple[str, ...]:
    """The protocols NCCL runs a ``kind`` with by default on a GPU generation ``arch``.

    >>> protocols("ampere"), protocols("blackwell"), protocols("hopper", "alltoall")
    (('LL', 'LL128', 'Simple'), ('LL', 'Simple'), ('LL', 'Simple'))
    """
    runs_ll128 = arch in LL128_ARCHS and kind_of(kind).ll128_channel is not None
    return ("LL", "LL128", "Simple") if runs_ll128 else ("LL", "Simple")


def ll128_share(kind: str, link: str, arch: str, n, nodes=1) -> Expr:
    """LL128's bus bandwidth as a share of the ring's: its 120 of every 128 bytes carry data,
    ``0.92`` in NCCL's model (``0.7`` when a domain holds one device of the group, ``ppn < 2``,
    whose NIC then both sends and receives), and over NVLink at most ``ll128MaxBwPerCh`` per
    channel (``Kind.ll128_channel``) of ``NVLINK_CHANNEL`` (the channel count is
    ``bus / NVLINK_CHANNEL``, so the cap is a share).  Across the network NCCL's channel count is not modelled and its cap is left out.

    >>> # A100 on NVLink: 16.7 (allreduce) and 18.3 (allgather) of a 20 GB/s channel, below 0.92
    >>> ll128_share("allreduce", "nvlink", "ampere", 8), ll128_share("allgather", "nvlink", "ampere", 8)
    (167/200, 183/200)
    >>> # Hopper: 16.7 of 20.6 GB/s; across the network with one device per domain, 0.7
    >>> ll128_share("allreduce", "nvlink", "hopper", 8), ll128_share("allreduce", "ib", "ampere", 16, 16)
    (167/206, 7/10)
    """
    if link == "nvlink":
        return minimum(Rational(92, 100), kind_of(kind).ll128_channel / NVLINK_CHANNEL[arch])
    return _by_nic(LL128_NET, n, nodes)


LL128_NET = (Rational(7, 10), Rational(92, 100))
"""LL128's share of the bus across the network: with one device of the group in a domain (its
NIC sends and receives), and with more."""


def ll128_inverse_share(kind: str, link: str, arch: str, n, nodes=1) -> Expr:
    """``1 / ll128_share(...)``: across the network the share is one of two values (``_by_nic``),
    so its reciprocal is the same choice between their reciprocals, exactly.  Written so, no
    power of a sum is built: SymPy asks of such a power whether each term may be infinite, a
    cascade of assumption queries through the floor and extrema of the choice, a sizeable share
    of building a calibrated step time.

    >>> from symbolic_cost.symbols import m1
    >>> ll128_inverse_share("allreduce", "ib", "hopper", 16, 16), ll128_inverse_share("allreduce", "ib", "hopper", 16, 2)
    (10/7, 25/23)
    >>> [(1 / ll128_share("allgather", "ib", "hopper", m1, 2) - ll128_inverse_share("allgather", "ib", "hopper", m1, 2)
    ...   ).subs(m1, k) for k in (2, 3, 4, 8)], ll128_inverse_share("allgather", "nvlink", "hopper", 8)
    ([0, 0, 0, 0], 206/183)
    """
    if link == "nvlink":
        return 1 / ll128_share(kind, link, arch, n, nodes)
    return _by_nic(tuple(1 / v for v in LL128_NET), n, nodes)


def _by_nic(values, n, nodes) -> Expr:
    """``values[0]`` where each of the ``nodes`` domains holds one of the group's ``n`` devices,
    ``values[1]`` where they hold more: ``a + (c - a) min(1, max(0, floor(n / nodes) - 1))``, the
    clipped count being 0 or 1."""
    alone, shared = values
    return alone + (shared - alone) * minimum(1, maximum(0, round_down(sympify(n) / sympify(nodes)) - 1))


def nccl_time(kind: str, n, tensor_bytes, bus, link: str, nodes=1, intra: str | None = None,
              arch: str = "other", routing=None) -> Expr:
    """Seconds of one ring collective as NCCL's tuning model prices it: for each protocol
    ``p``, ``base_p + steps_intra x hop(link_intra, p) + steps_inter x hop(ib, p)`` plus
    ``sent / bus_p`` (``sent = ring_share x V``: the ring's bytes per device, which is how NCCL
    converts bus to algorithm bandwidth), and the cheapest protocol wins (LL128 only on an
    ``arch`` of ``LL128_ARCHS``).  ``steps`` is
    ``n - 1`` for allgather, reduce-scatter and all-to-all, ``2(n - 1)`` for allreduce, 1 for
    a send (a group of one device costs nothing); ``nodes`` is how many NVLink domains the group
    spans, whose ``nodes - 1`` (twice for an allreduce) steps cross the network (an all-to-all's
    bytes on the network are only those of the pairs in other domains, or with ``routing`` those of
    a dispatcher that sends a token once a domain: ``parallel.collectives.network_share``); the other steps
    run on ``intra`` (default ``link``: a group pinned to one link runs every step on it; a group
    spread over NVLink domains takes its intra-domain steps on NVLink, as NCCL's ``intraLat``).
    An allreduce spread over several domains (``nodes > 1`` on ``ib``) may run as NCCL's tree
    instead (``tree_time``), whichever is cheaper.  Two refinements of NCCL's model are left out: the
    ``x 1.8`` on LL's NVLink hop latency in multi-node groups and the ``x 1.9`` ring-plateau
    latency of large multi-node Simple allreduces.

    >>> from sympy import Rational
    >>> # 8 GPUs on NVLink, 1 GB allreduce at 235 GB/s: Simple, 8.4 + 14 x 3.4 us + 1.75 GB / 235 GB/s
    >>> t = nccl_time("allreduce", 8, 10**9, 235 * 10**9, "nvlink")
    >>> t == Rational(84 + 14 * 34, 10**7) + Rational(7, 4) * 10**9 / (235 * 10**9)
    True
    >>> # on A100 (LL128 on) 10 MB takes LL128: 10 + 14 x 1.9 us + 17.5 MB / (0.835 x 235 GB/s)
    >>> t = nccl_time("allreduce", 8, 10**7, 235 * 10**9, "nvlink", arch="ampere")
    >>> t == Rational(100 + 14 * 19, 10**7) + Rational(7, 4) * 10**7 / (Rational(167, 200) * 235 * 10**9)
    True
    """
    form = kind_of(kind)
    n, nodes, volume = sympify(n), sympify(nodes), sympify(tensor_bytes)
    steps, send = form.steps(n), form.shape == "send"
    inter = Integer(1 if link == "ib" else 0) if send else form.passes * (nodes - 1)
    sent = form.share(n) * volume
    if form.shape == "pairwise" and link == "ib" and nodes != 1:
        # an all-to-all is point-to-point sends: only the pairs in other NVLink domains cross the
        # network, (n - n/nodes)/n of V a device, while a domain's own pairs move over NVLink at the
        # same time (seven or more times faster on every system here)
        sent = network_share(n, nodes, routing) * volume
    # a group of one device runs no collective (a symbolic group keeps the factor: 0 at n = 1)
    active = Integer(1) if send else minimum(1, n - 1)
    share = {"LL": form.ll_share, "Simple": Integer(1)}
    times = []
    near, near_steps, per_byte = _hop_link(intra or link), steps - inter, sent / bus   # every protocol's
    for protocol in protocols(arch, kind):
        inverse = 1 / share[protocol] if protocol != "LL128" else ll128_inverse_share(kind, link, arch, n, nodes)
        latency = BASE[protocol] + near_steps * HOP[(near, protocol)] + inter * HOP[("ib", protocol)]
        times.append(active * latency + per_byte * inverse)
    if form.tree and link == "ib" and nodes != 1:
        times.extend(tree_time(n, volume, bus, nodes, near, arch))
    return minimum(*times)


def _hop_link(link: str) -> str:
    return "nvlink" if link == "nvlink" else "ib"


# NCCL's double binary tree (the same src/graph/tuning.cc as BASE and HOP; allreduce only): its
# base latency and latency per tree level, its bus-bandwidth caps (LL128's higher on compute
# capability 8.0), LL and LL128's share of the bus, and the static correction of its bandwidth for
# medium messages, by log2(bytes / 64) from 0 to 21 (1 above).
TREE_BASE = {"LL": Rational(44, 10) * MICRO, "LL128": Rational(44, 10) * MICRO, "Simple": Integer(0)}
TREE_HOP = {("nvlink", "LL"): Rational(52, 100) * MICRO, ("nvlink", "LL128"): Rational(12, 10) * MICRO,
            ("nvlink", "Simple"): 28 * MICRO,
            ("ib", "LL"): 5 * MICRO, ("ib", "LL128"): Rational(85, 10) * MICRO, ("ib", "Simple"): 50 * MICRO}
TREE_CAP = {"few": 110 * GIGA, "many": 80 * GIGA}      # bytes/s: up to 2 nodes, more
TREE_CAP_LL128_AMPERE = {"few": 130 * GIGA, "many": 105 * GIGA}
TREE_SHARE = {"LL": Rational(10, 38), "LL128": Rational(915, 1000), "Simple": Integer(1)}
TREE_CORRECTION = {
    "LL": (1, 1, 1, 1, ".9", ".8", ".7", ".7", ".7", ".7", ".6", ".5", ".4", ".4", ".5", ".6", ".7", ".8", ".9",
           1, 1, 1),
    "LL128": (1, 1, 1, 1, 1, ".9", ".8", ".8", ".8", ".7", ".6", ".6", ".6", ".5", ".6", ".6", ".7", ".7", ".8",
              ".9", ".9", 1),
    "Simple": (".9", ".9", ".9", ".9", ".9", ".9", ".9", ".8", ".7", ".6", ".6", ".5", ".5", ".5", ".5", ".5",
               ".5", ".6", ".6", ".7", ".8", ".9"),
}


def tree_time(n, tensor_bytes, bus, nodes, intra: str = "nvlink", arch: str = "other") -> list[Expr]:
    """Seconds of an allreduce of ``V = tensor_bytes`` run as NCCL's tree over ``n`` devices in
    ``nodes`` NVLink domains, one time per protocol (``protocols(arch)``), as ``ncclTopoTuneModel``
    and ``ncclTopoGetAlgoTime`` price it: latency ``base + 2 ((n/nodes - 1) hop_intra +
    floor(log2 nodes) hop_net)`` (up the tree and down again: the devices of a domain chained,
    the domains in a binary tree); bandwidth ``min(0.9 bus, cap) x 1/2`` (LL: ``/ 3.8`` more,
    LL128: ``x 0.915``), the cap 110 GB/s up to two nodes and 80 GB/s beyond (LL128 on Ampere:
    130 and 105), times the tree's correction for a message of ``V`` bytes (``tree_correction``).
    LL128's per-channel cap is left out, as on the ring across the network.

    >>> from sympy import Rational
    >>> # 1 MiB over 16 nodes of 8, Simple: 2 (7 x 28 + 4 x 50) us + 2^20 B / (0.5 x 0.9 x 25 GB/s x 0.5)
    >>> ll, simple = tree_time(128, 2**20, 25 * 10**9, 16)
    >>> simple == Rational(2 * (7 * 28 + 4 * 50), 10**6) + Rational(2**20 * 2 * 10, 9 * 25 * 10**9) / Rational(1, 2)
    True
    >>> # LL128 on A100: 4.4 + 2 (7 x 1.2 + 4 x 8.5) us + 2^20 B / (0.9 x 25 GB/s x 0.915 / 2 x 0.6)
    >>> ll, ll128, simple = tree_time(128, 2**20, 25 * 10**9, 16, arch="ampere")
    >>> ll128 == Rational(44 + 2 * (7 * 12 + 4 * 85), 10**7) + 2**20 / (Rational(9, 10) * 25 * 10**9
    ...                                                                  * Rational(915, 1000) / 2 * Rational(6, 10))
    True
    """
    n, nodes, volume = sympify(n), sympify(nodes), sympify(tensor_bytes)
    few = minimum(1, maximum(0, 3 - nodes))      # 1 up to two nodes, else 0 (a whole number of them)
    levels = Log2(nodes + 1) - 1      # floor(log2 nodes) for a whole number of nodes (Log2 rounds up)
    times, chained, usable = [], round_down(n / nodes) - 1, bus * Rational(9, 10)     # every protocol's
    for protocol in protocols(arch):
        caps = TREE_CAP_LL128_AMPERE if protocol == "LL128" and arch == "ampere" else TREE_CAP
        cap = caps["many"] + (caps["few"] - caps["many"]) * few
        bandwidth = minimum(usable, cap) * TREE_SHARE[protocol] / 2 * tree_correction(protocol, volume)
        latency = TREE_BASE[protocol] + 2 * (chained * TREE_HOP[(_hop_link(intra), protocol)]
                                             + levels * TREE_HOP[("ib", protocol)])
        times.append(latency + volume / bandwidth)
    return times


def tree_correction(protocol: str, tensor_bytes) -> Expr:
    """NCCL's static correction of the tree's bandwidth for a message of ``V`` bytes: the
    ``TREE_CORRECTION`` entry at ``floor(log2(floor(V / 64)))`` (0 below 128 bytes), 1 from
    ``64 x 2^22`` bytes (256 MiB) up (``TreeCorrection``).

    >>> tree_correction("Simple", 2**20), tree_correction("LL", 100), tree_correction("Simple", 2**30)
    (1/2, 1, 1)
    """
    table = Tuple(*(Rational(str(factor)) for factor in TREE_CORRECTION[protocol]))
    return TreeCorrection(table, sympify(tensor_bytes))


class TreeCorrection(Function):
    """``TreeCorrection(table, V)``: ``table[floor(log2(V / 64))]`` (index 0 below 128 bytes, 1
    past the table's end), a step function of the message size; a number as soon as ``V`` is one.
    The compiled backends read it as a table look-up (numpy) or its ``as_piecewise`` (LLVM, exact
    Python), since SymPy's ``numpy.select`` of folded conditions breaks under CSE."""

    is_extended_real = is_positive = is_finite = True      # every entry is a positive number

    def _at_number(cls, table, volume):
        if not volume.is_Number:
            return None
        index = (max(int(volume) // 64, 1)).bit_length() - 1
        return table[index] if index < len(table) else Integer(1)

    eval = classmethod(_at_number)   # SymPy's hook for a Function's value at its arguments (no text)

    def _eval_derivative(self, symbol):      # SymPy's hook: constant between the sizes where it steps
        return Integer(0)

    def as_piecewise(self) -> Expr:
        """One piece per run of equal factors, each holding below the first size of the next run."""
        factors, volume = list(self.args[0]) + [Integer(1)], self.args[1]
        # built as written: each piece's bound is a number, so nothing folds, and SymPy's checks
        # of every pair of conditions (and its folding of a volume that holds a Piecewise into
        # each condition) would dominate compiling a calibrated step time
        pieces = [Basic.__new__(ExprCondPair, factor, StrictLessThan(volume, 64 * 2 ** (i + 1), evaluate=False))
                  for i, factor in enumerate(factors[:-1]) if factor != factors[i + 1]]
        return Basic.__new__(Piecewise, *pieces, Basic.__new__(ExprCondPair, Integer(1), S.true))

    def _numpycode(self, printer):
        table = ", ".join(str(float(f)) for f in list(self.args[0]) + [1])
        volume = printer._print(self.args[1])
        last = len(self.args[0])
        return (f"numpy.asarray([{table}])[numpy.clip(numpy.floor(numpy.log2(numpy.maximum({volume}, 64) / 64)), "
                f"0, {last}).astype(numpy.int64)]")

    def _pythoncode(self, printer):
        return printer._print(self.as_piecewise())


def collective_time(c: Collective, system, link: str, nodes=1, intra: str | None = None) -> Expr:
    """The cheapest of ``nccl_time`` and, on a system with NVLink SHARP where NCCL sets it up,
    ``nccl_nvls.nvls_candidate`` for ``c`` (all its repeats) on ``link`` with the system's bus
    bandwidth.  For a symbolic group that may be too small for NVLS it is a ``Piecewise``: the
    cheapest with NVLS where it is set up, the ring's and tree's elsewhere (the same ``ring``
    object twice, so neither a comparison nor the compiled kernel pays for it twice)."""
    from symbolic_cost.timing.nccl_nvls import nvls_candidate
    instance(c, Collective, "c", COLLECTIVE_MADE_BY)
    one_of(link, "link", LINKS)
    eff = getattr(system, "efficiency", None)
    if eff is None:
        raise InputTypeError(f"system must be a System with NCCL's factors (timing.hardware.calibrated('h100')), "
                             f"got {shown(system)}", "system")
    bus = eff.nvlink_bus if link == "nvlink" else eff.ib_bus
    ring = nccl_time(c.kind, c.group, c.tensor_bytes, bus, link, nodes, intra, eff.arch, c.routing)
    found = nvls_candidate(c.kind, c.group, c.tensor_bytes, eff, link, nodes) if eff.nvls else None
    if found is None:
        return c.repeats * ring
    on, nvls = found
    best = minimum(ring, nvls)
    return c.repeats * choice(on, best, ring)
