"""Collectives as NCCL's own cost model prices them (``src/graph/tuning.cc``'s
``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``, NCCL 2.x), for the calibrated time model
(``timing.efficiency``, ``hardware.comm_time``).

For each algorithm and protocol NCCL predicts ``latency + bytes / algorithm bandwidth`` and
runs the cheapest:

* **ring** (every collective, ``nccl_time``): latency ``base + steps x hop`` per protocol, the
  ring's bytes per device at the bus bandwidth; protocols ``LL`` (8-byte flag+data words: a
  quarter of the bus bandwidth for an allreduce, a third otherwise) and ``Simple``;
* **tree** (an allreduce across NVLink domains, ``tree_time``): the devices of a domain chained,
  the domains in a double binary tree; latency ``2((n/nodes - 1) hop_nvlink + floor(log2 nodes)
  hop_net)`` on top of the base, half of ``min(0.9 bus, 80/110 GB/s)`` as bandwidth, corrected
  for medium messages (``tree_correction``).

``LL128`` (enabled by default only on some NVLink systems) and NVLS/CollNet are not modelled.
The latencies are in seconds (``MICRO``: one µs).
"""

from __future__ import annotations

from sympy import Expr, Function, Integer, Min, Piecewise, Rational, Tuple, floor, sympify

from symbolic_cost.cost import Collective
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.parallel.collectives import Log2

MICRO = Rational(1, 10**6)


# the ring's base latency per protocol and latency per ring step on NVLink and on the network
BASE = {"LL": Rational(36, 10) * MICRO, "Simple": Rational(84, 10) * MICRO}
HOP = {("nvlink", "LL"): Rational(47, 100) * MICRO, ("nvlink", "Simple"): Rational(34, 10) * MICRO,
       ("ib", "LL"): Rational(27, 10) * MICRO, ("ib", "Simple"): Rational(96, 10) * MICRO}


def nccl_time(kind: str, n, tensor_bytes, bus, link: str, nodes=1, intra: str | None = None) -> Expr:
    """Seconds of one ring collective as NCCL's tuning model prices it: for each protocol
    ``p``, ``base_p + steps_intra x hop(link_intra, p) + steps_inter x hop(ib, p)`` plus
    ``sent / bus_p`` (``sent = ring_share x V``: the ring's bytes per device, which is how NCCL
    converts bus to algorithm bandwidth), and the cheaper protocol wins.  ``steps`` is
    ``n - 1`` for allgather, reduce-scatter and all-to-all, ``2(n - 1)`` for allreduce, 1 for
    a send (a group of one device costs nothing); ``nodes`` is how many NVLink domains the group
    spans, whose ``nodes - 1`` (twice for an allreduce) steps cross the network; the other steps
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
    """
    from symbolic_cost.cost import ring_share
    n, nodes, volume = sympify(n), sympify(nodes), sympify(tensor_bytes)
    if kind == "p2p":
        steps, inter = Integer(1), Integer(1 if link == "ib" else 0)
    else:
        per = 2 if kind == "allreduce" else 1
        steps, inter = per * (n - 1), per * (nodes - 1)
    sent = ring_share(kind, n) * volume
    # a group of one device runs no collective (a symbolic group keeps the factor: 0 at n = 1)
    active = Integer(1) if kind == "p2p" else Min(1, n - 1)
    ll_share = Rational(1, 4) if kind == "allreduce" else Rational(1, 3)
    times = []
    near = _hop_link(intra or link)
    for protocol, bandwidth in (("LL", bus * ll_share), ("Simple", bus)):
        latency = BASE[protocol] + (steps - inter) * HOP[(near, protocol)] + inter * HOP[("ib", protocol)]
        times.append(active * latency + sent / bandwidth)
    if kind == "allreduce" and link == "ib" and nodes != 1:
        times.extend(tree_time(n, volume, bus, nodes, near))
    return minimum(*times)


def _hop_link(link: str) -> str:
    return "nvlink" if link == "nvlink" else "ib"


# NCCL's double binary tree (the same src/graph/tuning.cc as BASE and HOP; allreduce only): its
# base latency and latency per tree level, its bus-bandwidth caps, and the static correction of
# its bandwidth for medium messages, by log2(bytes / 64) from 0 to 21 (1 above).
TREE_BASE = {"LL": Rational(44, 10) * MICRO, "Simple": Integer(0)}
TREE_HOP = {("nvlink", "LL"): Rational(52, 100) * MICRO, ("nvlink", "Simple"): 28 * MICRO,
            ("ib", "LL"): 5 * MICRO, ("ib", "Simple"): 50 * MICRO}
TREE_CAP = {"few": 110 * 10**9, "many": 80 * 10**9}      # bytes/s: up to 2 nodes, more
TREE_CORRECTION = {
    "LL": (1, 1, 1, 1, ".9", ".8", ".7", ".7", ".7", ".7", ".6", ".5", ".4", ".4", ".5", ".6", ".7", ".8", ".9",
           1, 1, 1),
    "Simple": (".9", ".9", ".9", ".9", ".9", ".9", ".9", ".8", ".7", ".6", ".6", ".5", ".5", ".5", ".5", ".5",
               ".5", ".6", ".6", ".7", ".8", ".9"),
}


def tree_time(n, tensor_bytes, bus, nodes, intra: str = "nvlink") -> list[Expr]:
    """Seconds of an allreduce of ``V = tensor_bytes`` run as NCCL's tree over ``n`` devices in
    ``nodes`` NVLink domains, one time per protocol (LL, Simple), as ``ncclTopoTuneModel`` and
    ``ncclTopoGetAlgoTime`` price it: latency ``base + 2 ((n/nodes - 1) hop_intra +
    floor(log2 nodes) hop_net)`` (up the tree and down again: the devices of a domain chained,
    the domains in a binary tree); bandwidth ``min(0.9 bus, cap) x 1/2`` (LL: ``/ 3.8`` more),
    the cap 110 GB/s up to two nodes and 80 GB/s beyond, times the tree's correction for a
    message of ``V`` bytes (``tree_correction``).

    >>> from sympy import Rational
    >>> # 1 MiB over 16 nodes of 8, Simple: 2 (7 x 28 + 4 x 50) us + 2^20 B / (0.5 x 0.9 x 25 GB/s x 0.5)
    >>> ll, simple = tree_time(128, 2**20, 25 * 10**9, 16)
    >>> simple == Rational(2 * (7 * 28 + 4 * 50), 10**6) + Rational(2**20 * 2 * 10, 9 * 25 * 10**9) / Rational(1, 2)
    True
    """
    n, nodes, volume = sympify(n), sympify(nodes), sympify(tensor_bytes)
    few = minimum(1, maximum(0, 3 - nodes))      # 1 up to two nodes, else 0 (a whole number of them)
    cap = TREE_CAP["many"] + (TREE_CAP["few"] - TREE_CAP["many"]) * few
    levels = Log2(nodes + 1) - 1      # floor(log2 nodes) for a whole number of nodes (Log2 rounds up)
    times = []
    for protocol, share in (("LL", Rational(10, 38)), ("Simple", Integer(1))):
        bandwidth = minimum(bus * Rational(9, 10), cap) * share / 2 * tree_correction(protocol, volume)
        latency = TREE_BASE[protocol] + 2 * ((floor(n / nodes) - 1) * TREE_HOP[(_hop_link(intra), protocol)]
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
        pieces = [(factor, volume < 64 * 2 ** (i + 1)) for i, factor in enumerate(factors[:-1])
                  if factor != factors[i + 1]]
        return Piecewise(*pieces, (Integer(1), True))

    def _numpycode(self, printer):
        table = ", ".join(str(float(f)) for f in list(self.args[0]) + [1])
        volume = printer._print(self.args[1])
        last = len(self.args[0])
        return (f"numpy.asarray([{table}])[numpy.clip(numpy.floor(numpy.log2(numpy.maximum({volume}, 64) / 64)), "
                f"0, {last}).astype(numpy.int64)]")

    def _pythoncode(self, printer):
        return printer._print(self.as_piecewise())


def collective_time(c: Collective, system, link: str, nodes=1, intra: str | None = None) -> Expr:
    """``nccl_time`` of ``c`` (all its repeats) on ``link`` with the system's bus bandwidth."""
    eff = system.efficiency
    bus = eff.nvlink_bus if link == "nvlink" else eff.ib_bus
    return c.repeats * nccl_time(c.kind, c.group, c.tensor_bytes, bus, link, nodes, intra)
