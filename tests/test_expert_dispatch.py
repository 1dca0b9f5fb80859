"""The token dispatchers of a mixture of experts (``blocks.wiring.Experts.dispatcher``): the bytes an
all-to-all of routed tokens puts on the network between NVLink domains (``parallel.collectives.network_share``),
against a count over every routing of a token, made here from the algorithm:

* the all-to-all dispatcher (Megatron-Core's ``alltoall``) sends each of a token's ``k`` copies to the rank of
  its expert, so a copy crosses the network when its expert lives in another domain;
* DeepEP's and HybridEP's dispatch (Megatron-Core's ``flex``; DeepSeek-V3's report, section 3.2.2) sends a token
  once to each other domain holding at least one of its experts, and fans it out there over NVLink.

A token picks ``k`` distinct experts of ``E``, every set alike (balanced routing); expert ``j`` lives in domain
``j // (E / domains)``; the token starts in domain 0."""

import pathlib
from fractions import Fraction
from itertools import combinations

import pytest
from sympy import Rational

from symbolic_cost.blocks.moe import MoE, moe
from symbolic_cost.blocks.wiring import Experts
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import load, preset
from symbolic_cost.parallel.collectives import network_share
from symbolic_cost.timing.hardware import calibrated, comm_time
from symbolic_cost.timing.nccl import nccl_time


def _crossings(experts: int, k: int, domains: int) -> tuple[Fraction, Fraction]:
    """(copies that cross, domains a token is sent to) on average over every set of ``k`` experts."""
    per_domain = experts // domains
    copies = sends = count = 0
    for chosen in combinations(range(experts), k):
        homes = [j // per_domain for j in chosen]
        copies += sum(home != 0 for home in homes)
        sends += len(set(homes) - {0})
        count += 1
    return Fraction(copies, count), Fraction(sends, count)


@pytest.mark.parametrize("experts, k, domains", [(8, 2, 2), (8, 2, 4), (12, 3, 3), (16, 4, 2), (16, 8, 4), (6, 5, 2)])
def test_the_network_share_is_the_count_over_every_routing(experts, k, domains):
    """``V`` holds ``k`` copies of each token, so the share of ``V`` on the network is the copies that cross
    over ``k`` (all-to-all) or the domains a token is sent to over ``k`` (flex)."""
    copies, sends = _crossings(experts, k, domains)
    ranks = 4 * domains                     # any number of ranks, the same in each domain
    assert network_share(ranks, domains) == Rational(copies.numerator, copies.denominator) / k
    assert network_share(ranks, domains, (experts, k)) == Rational(sends.numerator, sends.denominator) / k


def test_within_one_domain_nothing_crosses():
    assert network_share(8, 1) == network_share(8, 1, (64, 6)) == 0


def test_the_flex_dispatch_prices_only_the_bytes_it_sends_across():
    """NCCL's model of the all-to-all is linear in the bytes on the network: the flex dispatch of ``V`` costs
    what the pairwise all-to-all of ``V`` scaled by the counted ratio of sends to crossing copies costs, across
    two nodes; inside one NVLink domain the two are the same collective."""
    routing, volume, bus = (16, 4), 8 * 2 ** 20, 40 * 10 ** 9
    copies, sends = _crossings(*routing, 2)
    scaled = volume * Rational(sends / copies)
    assert nccl_time("alltoall", 16, volume, bus, "ib", 2, "nvlink", "hopper", routing) == \
        nccl_time("alltoall", 16, scaled, bus, "ib", 2, "nvlink", "hopper")
    assert nccl_time("alltoall", 8, volume, bus, "nvlink", 1, None, "hopper", routing) == \
        nccl_time("alltoall", 8, volume, bus, "nvlink", 1, None, "hopper")


def test_the_block_marks_its_all_to_alls_and_only_those():
    """A flex dispatcher changes what the network carries, not what is sent: the all-to-alls of ``dispatch``
    and ``combine`` carry ``(E, k)``, with the volume of the all-to-all dispatcher's."""
    spec = MoE(64, 6, 1408)
    plain, flex = (moe(1, 4096, 2048, spec, experts=Experts(ep=16, etp=2, dispatcher=d)) for d in ("alltoall", "flex"))
    for name in ("dispatch", "combine"):
        a, b = plain[name].collectives, flex[name].collectives
        assert [(c.kind, c.volume) for c in a] == [(c.kind, c.volume) for c in b]
        assert {c.routing for c in b if c.kind == "alltoall"} == {(64, 6)}
        assert {c.routing for c in a} == {c.routing for c in b if c.kind != "alltoall"} == {None}


def test_across_nodes_flex_is_faster_and_alone_in_a_node_the_same():
    """Mixtral's 8 experts, top 2, over 8 expert ranks 2 apart (etp 2) on 16 H100, two 8-GPU nodes of 4 experts:
    a token reaches the other node with probability 1 - C(4, 2)/C(8, 2) = 11/14, against 1 copy of 2 for the
    all-to-all dispatcher; 4 expert ranks on 8 GPUs (one node) take the same time either way."""
    arch = load(pathlib.Path(__file__).parent / "hf_configs" / "Mixtral-8x7B-v0.1.json")
    h100 = calibrated("h100")

    def alltoall_seconds(ep, dispatcher):
        cost = model_cost(arch, Training(b=1, l=4096, d=2 * ep, ep=ep, etp=2, flash=True, dispatcher=dispatcher))
        return sum(comm_time(c, h100) for dim, c in cost.collectives if c.kind == "alltoall")
    assert network_share(8, 2, (8, 2)) * 2 == Rational(11, 14)
    assert alltoall_seconds(8, "flex") < alltoall_seconds(8, "alltoall")
    assert alltoall_seconds(4, "flex") == alltoall_seconds(4, "alltoall")


def test_a_dispatcher_is_refused_where_it_cannot_apply(capsys):
    with pytest.raises(InputError, match="dispatcher must be one of"):
        Experts(dispatcher="ring")
    with pytest.raises(InputError, match="dispatcher applies to a mixture of experts"):
        model_cost(preset("gpt2"), Training(dispatcher="flex"))
    assert main(["summary", "--preset", "gpt2", "--dispatcher", "flex"]) == 2
    assert "gpt2 has none (got dispatcher=flex)" in capsys.readouterr().err
