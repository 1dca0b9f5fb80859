"""A collective kind is one entry of ``collective_kinds.KINDS`` (issue 61, docs/contributing.md's
recipe "Add a collective").

Two checks: each kind's bytes and steps against a message-by-message simulation of its algorithm
(written here from the algorithms, not from the library), and every kind registered again under
a new name, which every model must price exactly as the original: nothing may ask for a kind by
its name.  Then the recipe itself: a gather added as one entry."""

from dataclasses import replace
from fractions import Fraction

import pytest
from sympy import Integer, Rational, Symbol

from symbolic_cost import collective_kinds
from symbolic_cost.collective_kinds import KINDS, Kind
from symbolic_cost.conventions import DEFAULT
from symbolic_cost.cost import Collective, collective
from symbolic_cost.checks import InputError
from symbolic_cost.parallel import collectives
from symbolic_cost.timing import nccl, nccl_nvls
from symbolic_cost.timing.hardware import calibrated, comm_time
from symbolic_cost.timing.step import hidden_by_tensor_overlap


def _ring(n, reduce_scatter, allgather):
    """The ring algorithm run on numbers: ``n`` devices, each holding a tensor cut into ``n``
    chunks (device ``i``'s chunk ``j`` is ``10 i + j``).  A reduce-scatter runs ``n - 1`` rounds in
    which device ``i`` passes its running sum of chunk ``(i - r) mod n`` to device ``i + 1``, which
    adds it to its own; an allgather then passes the finished chunks on for ``n - 1`` more rounds.
    Returns the tensors device 0 sends (a chunk is ``1/n`` of one) and the rounds, after checking
    that every device ends with the sums (allreduce), its own sum (reduce-scatter) or every
    chunk (allgather)."""
    held = [[10 * i + j for j in range(n)] for i in range(n)]
    sent, rounds = Fraction(0), 0
    for r in range(n - 1 if reduce_scatter else 0):
        passed = [(i, (i - r) % n, held[i][(i - r) % n]) for i in range(n)]
        for i, j, value in passed:
            held[(i + 1) % n][j] += value
        sent, rounds = sent + Fraction(1, n), rounds + 1
    owned = [(i + 1) % n if reduce_scatter else i for i in range(n)]     # the chunk a device finished
    for r in range(n - 1 if allgather else 0):
        passed = [(i, (owned[i] - r) % n, held[i][(owned[i] - r) % n]) for i in range(n)]
        for i, j, value in passed:
            held[(i + 1) % n][j] = value
        sent, rounds = sent + Fraction(1, n), rounds + 1
    total = [sum(10 * i + j for i in range(n)) for j in range(n)]
    for i in range(n):
        if reduce_scatter and allgather:
            assert held[i] == total
        elif reduce_scatter:
            assert held[i][owned[i]] == total[owned[i]]
        else:                           # each device's own chunk, from each device
            assert held[i] == [11 * j for j in range(n)]
    return sent, rounds


def _pairwise(n):
    """An all-to-all: device 0 sends its ``1/n`` share to each of the ``n - 1`` others, one a round."""
    return sum((Fraction(1, n) for _ in range(n - 1)), Fraction(0)), n - 1


def _chain(n):
    """A pipelined chain from the root (a broadcast, or a reduce the other way): every device but
    the last forwards the whole tensor once, so a device sends ``(n-1)/n`` of it on average."""
    forwarded = [Fraction(1) if i < n - 1 else Fraction(0) for i in range(n)]
    return sum(forwarded, Fraction(0)) / n, n - 1


SIMULATED = {"allgather": lambda n: _ring(n, False, True), "reducescatter": lambda n: _ring(n, True, False),
             "allreduce": lambda n: _ring(n, True, True), "alltoall": _pairwise,
             "p2p": lambda n: (Fraction(1), 1), "broadcast": _chain, "reduce": _chain}


@pytest.mark.parametrize("name", sorted(KINDS))
@pytest.mark.parametrize("n", [1, 2, 3, 8, 24])
def test_each_kind_sends_what_its_algorithm_sends(name, n):
    sent, rounds = SIMULATED[name](n)
    assert KINDS[name].share(n) == Rational(sent.numerator, sent.denominator)
    assert KINDS[name].steps(n) == rounds


def test_the_kinds_that_add_are_the_reductions():
    assert sorted(k for k, kind in KINDS.items() if kind.reduces) == ["allreduce", "reduce", "reducescatter"]
    assert Collective("reduce", 12, 2, 4, "bwd", volume=0).reduction_flops == 9       # (n-1)/n of 12
    assert Collective("broadcast", 12, 2, 4, "bwd", volume=0).reduction_flops == 0


@pytest.fixture
def again(monkeypatch):
    """Every kind registered a second time, as ``<name>_again`` with the same facts."""
    for name, kind in list(KINDS.items()):
        monkeypatch.setitem(KINDS, f"{name}_again", replace(kind, name=f"{name}_again"))
    return sorted(k for k in KINDS if not k.endswith("_again"))


def _prices(kind: str) -> list:
    """What every model says of a collective of ``kind``: its bytes, steps and the seconds of
    each time model, on one link and across domains, on each GPU generation NCCL tells apart."""
    n = Symbol("n", positive=True, integer=True)
    volume, bus = 3 * 10**9, 200 * 10**9
    out = [collectives.traffic(kind, size, volume, algorithm) for size in (1, 8, n) for algorithm in ("ring", "tree")]
    out.append(collectives.hierarchical_time(kind, 16, 8, volume, (bus, Rational(2, 10**6)), (bus / 8, Rational(5, 10**6))))
    for arch in ("ampere", "hopper", "blackwell"):
        out += [nccl.nccl_time(kind, 16, volume, bus, "ib", nodes=2, arch=arch, intra="nvlink"),
                nccl.nccl_time(kind, 8, 10**6, bus, "nvlink", arch=arch), nccl.protocols(arch, kind)]
    for link, nodes in (("nvlink", 1), ("ib", 4)):
        out.append(nccl_nvls.nvls_candidate(kind, 16, volume, calibrated("gb200").efficiency, link, nodes))
    made = collective(kind, 10**8, 2, 16, "bwd", DEFAULT)[0]
    out += [made.volume, made.ring_bytes, made.reduction_flops, hidden_by_tensor_overlap(made)]
    for system in ("h100", "a100", "gb200"):
        out += [comm_time(made, calibrated(system))] + [
            comm_time(made, system, replace(DEFAULT, comm_time=model)) for model in ("alpha-beta", "hierarchical")]
    return out


def test_a_kind_registered_again_is_priced_as_the_original(again):
    for name in again:
        assert _prices(f"{name}_again") == _prices(name), name


def test_the_recipe_adds_a_collective_in_one_entry(monkeypatch):
    """docs/contributing.md's example: ring attention's exchange, each device sending its block
    to the next while it receives the previous one's, added as one ``Kind`` of the ``send`` shape.
    By hand: a device sends the whole block ``V`` in one message, so ``latency + V / bandwidth``
    on NVLink, and NCCL's ring model prices it as the send it is."""
    monkeypatch.setitem(KINDS, "sendrecv", Kind("sendrecv", "send"))
    made = collective("sendrecv", 8 * 10**6, 2, 8, "fwd", DEFAULT)[0]
    assert made.volume == 16 * 10**6 and made.reduction_flops == 0
    assert collectives.traffic("sendrecv", 8, 16 * 10**6) == collectives.Traffic(16 * 10**6, 16 * 10**6, 1)
    h100 = calibrated("h100")
    assert comm_time(made, "h100") == h100.nvlink_latency + Rational(16 * 10**6) / h100.nvlink_bandwidth
    send = Collective("p2p", 8 * 10**6, 2, 8, "fwd", volume=16 * 10**6)
    assert comm_time(made, h100) == comm_time(send, h100)


def test_an_unknown_kind_is_refused_by_name():
    with pytest.raises(InputError, match="collective kind must be one of allgather, .*got 'gathr'"):
        Collective("gathr", 1, 2, 4, "fwd", volume=1)
    with pytest.raises(InputError, match="got 'gathr'"):
        collective_kinds.ring_share("gathr", 4)
    assert Integer(0) == KINDS["allgather"].share(1)


def test_a_group_inside_one_domain_runs_flat_under_the_hierarchical_model():
    """The two-level model splits a group that spans NVLink domains; 16 GPUs of a GB200 NVL72
    domain span none (it used to divide them into 16/72 domains and fail)."""
    made = collective("allgather", 10**8, 2, 16, "bwd", DEFAULT)[0]
    flat, two_level = (comm_time(made, "gb200", replace(DEFAULT, comm_time=m)) for m in ("alpha-beta", "hierarchical"))
    assert two_level == flat == Rational(15, 16) * 2 * 10**8 / calibrated("gb200").nvlink_bandwidth \
        + 15 * calibrated("gb200").nvlink_latency
