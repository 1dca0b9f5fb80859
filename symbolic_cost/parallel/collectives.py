"""Collectives as expressions: what one device sends and receives, and how long it takes.

For ``n`` devices and a tensor of ``V`` bytes (the gathered result of an
allgather, the input of a reduce-scatter or allreduce, the buffer each
device holds for an all-to-all, the message of a p2p send, a broadcast or a reduce), by the
shape of the kind (``collective_kinds``):

============== ============ ================== ================== =====================
shape          algorithm    sent per device    received           latency steps
============== ============ ================== ================== =====================
ring           ring         passes (n-1)/n V   passes (n-1)/n V   passes (n - 1)
ring (tree)    tree         2(n-1)/n V         2(n-1)/n V         2 log2 n
pairwise       pairwise     (n-1)/n V          (n-1)/n V          n - 1
send           -            V                  V                  1
rooted         tree         V                  V                  log2 n
============== ============ ================== ================== =====================

The tree allreduce (a kind with ``tree``) is the bandwidth-optimal logarithmic one (recursive
halving then doubling, Rabenseifner 2004; NCCL's double binary tree has the
same bandwidth term): the ring's bytes in ``2 log2 n`` steps.  Time is
``steps * alpha + sent / B`` (links are full duplex, so sending and
receiving overlap).  ``hierarchical_time`` splits a group that spans
NVLink domains of ``k`` devices into the phases NCCL uses across nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Function, Integer, ff, log, sympify

from symbolic_cost.collective_kinds import kind_of
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.checks import InputError, exact, positive_dims

ALGORITHMS = ("ring", "tree")


@dataclass(frozen=True)
class Traffic:
    """Bytes one device sends and receives, and the sequential message rounds."""

    sent: Expr
    received: Expr
    steps: Expr


def traffic(kind: str, n, tensor_bytes, algorithm: str = "ring") -> Traffic:
    """Per-device traffic of one collective (see the module table).

    >>> from sympy import Symbol
    >>> n, V = Symbol("n", positive=True, integer=True), Symbol("V", positive=True)
    >>> traffic("allgather", n, V)
    Traffic(sent=V*(n - 1)/n, received=V*(n - 1)/n, steps=n - 1)
    >>> traffic("allreduce", 8, 1, "tree").steps
    6
    """
    form = kind_of(kind)
    if algorithm not in ALGORITHMS:
        raise InputError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}", "algorithm")
    n, volume = _sizes(n=n, tensor_bytes=tensor_bytes)
    if form.shape == "rooted":       # the root sends (receives) V; nothing with one device
        return Traffic(minimum(n - 1, 1) * volume, minimum(n - 1, 1) * volume, _log2(n))
    moved = form.share(n) * volume
    steps = 2 * _log2(n) if form.tree and algorithm == "tree" else form.steps(n)
    return Traffic(moved, moved, steps)


def _sizes(**values) -> tuple[Expr, ...]:
    """The arguments as exact expressions: devices (``n``, ``k``) positive integers, bytes and
    seconds not negative, bandwidths positive (as far as SymPy can tell)."""
    out = []
    for name, value in values.items():
        if name in ("n", "k"):
            out.append(positive_dims(**{name: value})[name])
            continue
        expr = exact(value, name)
        wrong = expr.is_positive is False if "bandwidth" in name else expr.is_negative
        if wrong or (expr.is_number and not expr.is_real):
            raise InputError(f"{name} must be {'positive' if 'bandwidth' in name else 'non-negative'}, got {expr}",
                             name)
        out.append(expr)
    return tuple(out)


class Log2(Function):
    """``log2 n`` rounded up: the rounds of a tree over ``n`` devices (a number as soon as ``n``
    is one).  Relaxed to reals (a derivative, a numeric root) it is ``log2 n``.

    >>> from sympy import Symbol
    >>> n = Symbol("n", positive=True, integer=True)
    >>> Log2(n).subs(n, 5), Log2(n).diff(n)
    (3, 1/(n*log(2)))
    """

    def _at_integer(cls, n):
        if n.is_Integer:
            return Integer((int(n) - 1).bit_length())
        return None

    eval = classmethod(_at_integer)   # SymPy's hook for a Function's value at its arguments (no text)

    def fdiff(self, argindex=1):
        return 1 / (self.args[0] * log(2))

    def _numpycode(self, printer):
        return f"numpy.ceil(numpy.log2({printer._print(self.args[0])}))"

    def _mpmathcode(self, printer):
        return f"(log({printer._print(self.args[0])})/log(2))"


def _log2(n) -> Expr:
    """``log2 n``, exact for powers of two and rounded up for other numbers (``Log2``)."""
    return Log2(sympify(n))


def time(kind: str, n, tensor_bytes, bandwidth, latency, algorithm: str = "ring") -> Expr:
    """``steps * latency + sent / bandwidth`` seconds on one kind of link.

    >>> time("allreduce", 4, 8 * 10**9, 100 * 10**9, 0)
    3/25
    """
    moved = traffic(kind, n, tensor_bytes, algorithm)
    bandwidth, latency = _sizes(bandwidth=bandwidth, latency=latency)
    return moved.steps * latency + moved.sent / bandwidth


def network_share(n, domains, routing=None) -> Expr:
    """The share of an all-to-all's buffer ``V`` (a device's sends to ``n`` ranks spread evenly over
    ``domains`` NVLink domains) that crosses the network between domains.

    * Pairwise sends (NCCL's all-to-all, Megatron-Core's all-to-all token dispatcher): the
      pairs in other domains, ``(n - n/domains)/n``.
    * ``routing = (E, k)``: a token dispatcher that deduplicates by domain (DeepEP's normal
      kernels, HybridEP: Megatron-Core's ``flex`` dispatcher; DeepSeek-V3's report, section
      3.2.2): ``V`` holds ``k`` copies of each token, one for each of its ``k`` distinct experts
      among ``E`` (``E/domains`` a domain); a token crosses the network once to each other
      domain holding one of them, then fans out over NVLink.  With the ``k`` experts a uniform
      draw (balanced routing), a given domain holds none with probability
      ``C(E - E/domains, k) / C(E, k)``, so the share is
      ``(domains - 1) (1 - C(E - E/domains, k) / C(E, k)) / k``.

    >>> network_share(16, 2)            # EP 16 over two 8-GPU nodes: half the pairs
    1/2
    >>> network_share(16, 2, (128, 8))  # Qwen3-30B-A3B: about once a token, not four times
    31404823/252018800
    """
    n, domains = positive_dims(n=n, domains=domains).values()
    if routing is None:
        return (n - n / domains) / n
    experts, k = _routing(routing)
    missed = ff(experts - experts / domains, k) / ff(experts, k)
    return (domains - 1) * (1 - missed) / k


def _routing(routing) -> tuple[Expr, Expr]:
    """``routing`` checked as ``network_share`` reads it: ``(E, k)``, ``k`` of ``E`` experts a token."""
    if isinstance(routing, (str, bytes)) or not isinstance(routing, (tuple, list)) or len(routing) != 2:
        raise InputError(f"routing must be a pair (experts, top_k) or None, got {routing!r}", "routing")
    experts, k = positive_dims(experts=routing[0], top_k=routing[1]).values()
    if (k - experts).is_positive:
        raise InputError(f"routing's top_k={k} must be at most its experts={experts}", "routing")
    return experts, k


def _pair(value, name: str) -> tuple:
    """``value`` checked as a link's ``(bandwidth, latency)``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InputError(f"{name} must be a pair (bandwidth, latency), got {value!r}", name)
    return tuple(value)


def hierarchical_time(kind: str, n, k, tensor_bytes, nvlink: tuple, ib: tuple, routing=None) -> Expr:
    """Seconds for a group of ``n`` devices spread over NVLink domains of ``k``
    (``nvlink`` and ``ib`` are ``(bandwidth, latency)`` pairs; ``k`` divides ``n``).

    * a ring kind, each pass (``Kind.passes``): within each domain over ``V``, then across
      the ``n/k`` domains over the ``V/k`` each device now holds (a reduce-scatter; an
      allgather is the mirror image, an allreduce both);
    * a pairwise kind (all-to-all): the ``(k-1)/n`` of the buffer bound for the same domain
      goes over NVLink while the ``(n-k)/n`` bound elsewhere goes over InfiniBand, at the
      same time (with ``routing``, a dispatcher that sends a token once a domain:
      ``network_share`` of it);
    * a send or a rooted kind (p2p, broadcast, reduce) crosses InfiniBand.

    >>> # 2 x (7/8 of 16 GB at 100 GB/s) + 2 x (1/2 of 2 GB at 10 GB/s) = 0.28 + 0.2 s
    >>> hierarchical_time("allreduce", 16, 8, 16 * 10**9, (10**11, 0), (10**10, 0))
    12/25
    """
    n, k, volume = _sizes(n=n, k=k, tensor_bytes=tensor_bytes)
    nvlink, ib = _pair(nvlink, "nvlink"), _pair(ib, "ib")
    _sizes(nvlink_bandwidth=nvlink[0], nvlink_latency=nvlink[1], ib_bandwidth=ib[0], ib_latency=ib[1])
    form = kind_of(kind)
    if form.shape in ("send", "rooted"):
        return time(kind, n, volume, *ib)
    if form.shape == "pairwise":
        near = (k - 1) / n * volume / nvlink[0] + (k - 1) * nvlink[1]
        far = network_share(n, n / k, routing) * volume / ib[0] + (n / k - 1) * ib[1]
        return maximum(near, far)
    inside = time("reducescatter", k, volume, *nvlink)
    across = time("reducescatter", n / k, volume / k, *ib)
    return form.passes * (inside + across)
