"""The kinds of collective, each described once (``KINDS``): what a device sends and in how many
message rounds (``share``, ``steps``), how NCCL runs it (its protocols' shares, NVLS, the tree),
and which window of a step hides it.  Every module that prices a collective reads its kind's
``Kind`` here, none asks for a kind by name, so a new collective is one entry of ``KINDS``
(``docs/contributing.md``).

The byte counts are those of the ring algorithm, for a tensor of ``V`` bytes over ``n`` devices:

============== ========= ====================== ============= ============================
kind           shape     sent per device        ring steps    runs as
============== ========= ====================== ============= ============================
allgather      ring      (n-1)/n V              n - 1         one pass of a ring
reducescatter  ring      (n-1)/n V              n - 1         one pass, adding on the way
allreduce      ring      2(n-1)/n V             2(n - 1)      reduce-scatter, then allgather
alltoall       pairwise  (n-1)/n V              n - 1         a send to every other device
p2p            send      V                      1             one device to another
broadcast      rooted    (n-1)/n V              n - 1         a chain from the root
reduce         rooted    (n-1)/n V              n - 1         a chain into the root, adding
============== ========= ====================== ============= ============================

A broadcast or reduce as a pipelined chain: every member but one forwards ``V``, so
``(n-1)/n V`` a device on average, and exactly that on every device when the root takes turns
over the group (SUMMA's panel broadcasts).

>>> KINDS["allreduce"].share(8), KINDS["allgather"].steps(8), KINDS["p2p"].steps(8)
(7/4, 7, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Integer, Rational

from symbolic_cost.checks import InputError, positive_dims

SHAPES = ("ring", "pairwise", "rooted", "send")
"""How the devices of a group exchange a kind's bytes: around a ring; each pair directly (an
all-to-all); from or into one root; or from one device to one other."""


@dataclass(frozen=True)
class Kind:
    """One kind of collective.

    ``shape``: one of ``SHAPES``.  ``passes``: times a ring runs around the group (2 for an
    allreduce, a reduce-scatter then an allgather).  ``reduces``: the devices add what they
    receive (a reduction's FLOPs, ``cost.Collective.reduction_flops``).  ``tree``: NCCL's tree
    algorithms run it across NVLink domains (the double binary tree, NVLS tree; the
    bandwidth-optimal logarithmic algorithm in ``parallel.collectives.traffic``): the allreduce
    only.  ``ll_share``: NCCL's ``LL`` protocol's share of the bus (8-byte flag+data words: a
    quarter for an allreduce, a third otherwise; ``timing.nccl``).  ``ll128_channel``: LL128's bus
    bandwidth a channel at most, bytes/s (NCCL's ``ll128MaxBwPerCh``), ``None`` where NCCL does
    not run LL128.  ``nvls``: NCCL runs it with NVLink SHARP where the switches can
    (``timing.nccl_nvls``).  ``window``: the data-parallel overlap window that hides it
    (``"grad"``: behind the backward; ``"param"``: behind the forward; ``timing.step``), ``None``
    for a kind data parallelism does not send.  ``tensor_overlap``: Megatron-LM's
    ``--tp-comm-overlap`` hides it when a layer sends it (the layers' all-gathers and
    reduce-scatters; not the MoE token all-to-alls, nor Ulysses' head exchange).
    """

    name: str
    shape: str
    passes: int = 1
    reduces: bool = False
    tree: bool = False
    ll_share: Rational = Rational(1, 3)
    ll128_channel: Rational | None = None
    nvls: bool = False
    window: str | None = None
    tensor_overlap: bool = True

    def share(self, group) -> Expr:
        """Fraction of the full tensor each device sends in the ring algorithm:
        ``passes x (n - 1)/n``, the whole tensor for a send."""
        n = positive_dims(group=group)["group"]
        return Integer(1) if self.shape == "send" else self.passes * (n - 1) / n

    def steps(self, group) -> Expr:
        """Steps of the ring algorithm, each one message a device: ``passes x (n - 1)``, one for a
        send.  The one count that ``parallel.collectives.traffic`` and NCCL's latency
        (``timing.nccl``) both take."""
        n = positive_dims(group=group)["group"]
        return Integer(1) if self.shape == "send" else self.passes * (n - 1)


GIGA = Integer(10) ** 9

KINDS = {kind.name: kind for kind in (
    Kind("allgather", "ring", ll128_channel=Rational("18.3") * GIGA, nvls=True, window="param"),
    Kind("reducescatter", "ring", reduces=True, ll128_channel=Rational("15.2") * GIGA, nvls=True, window="grad"),
    Kind("allreduce", "ring", passes=2, reduces=True, tree=True, ll_share=Rational(1, 4),
         ll128_channel=Rational("16.7") * GIGA, nvls=True, window="grad"),
    Kind("alltoall", "pairwise", tensor_overlap=False),
    Kind("p2p", "send"),
    Kind("broadcast", "rooted", ll128_channel=Rational("18.8") * GIGA),
    Kind("reduce", "rooted", reduces=True, ll128_channel=Rational("12.0") * GIGA),
)}
"""Every kind of collective, by name.  The LL128 caps are NCCL 2.8's ``ll128MaxBwPerCh``
(``src/graph/tuning.cc``, ``{18.8, 12.0, 18.3, 15.2, 16.7}`` GB/s for broadcast, reduce,
allgather, reduce-scatter and allreduce); NVLS runs allreduce, allgather and reduce-scatter
(NCCL 2.19's ``tuning.cc``)."""


def kind_of(name: str) -> Kind:
    """The ``Kind`` named ``name``, or an ``InputError`` naming the kinds there are.

    >>> kind_of("alltoall").shape
    'pairwise'
    """
    if name not in KINDS:
        raise InputError(f"collective kind must be one of {', '.join(KINDS)}, got {name!r}", "kind")
    return KINDS[name]


def ring_share(kind: str, group) -> Expr:
    """``kind_of(kind).share(group)``: the fraction of the full tensor each device sends in a ring
    collective (the module's table).

    >>> from sympy import Symbol
    >>> n = Symbol("n", positive=True, integer=True)
    >>> ring_share("allreduce", n).factor()
    2*(n - 1)/n
    >>> ring_share("allgather", 1)
    0
    """
    return kind_of(kind).share(group)


def ring_steps(kind: str, group) -> Expr:
    """``kind_of(kind).steps(group)``.

    >>> ring_steps("allreduce", 8), ring_steps("allgather", 8), ring_steps("p2p", 8)
    (14, 7, 1)
    """
    return kind_of(kind).steps(group)
