"""The calibrated time model (timing.efficiency) against independent numbers: tiles and waves
counted by a step-by-step simulation, NCCL's own cost formula evaluated by hand, the measured
cases' FLOP counts cross-checked between two printed figures, and the committed fit."""

import json
import math
import pathlib
from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st
from sympy import Rational

from symbolic_cost import mlp, attention
from symbolic_cost.checks import InputError
from symbolic_cost.conventions import DEFAULT
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.models.training import Overlap
from symbolic_cost.reproduce import measured
from symbolic_cost.timing import efficiency as eff
from symbolic_cost.timing import nccl
from symbolic_cost.timing.hardware import calibrated, comm_time, get_system, times
from symbolic_cost.timing.step import step_time_breakdown


def simulated_waves(m, n, count, sms, tm, tn):
    """Hand out output tiles to SMs one wave at a time, counting the useful outputs; a side
    shorter than its tile runs a narrow kernel whose side is that length rounded up to 16."""
    tm = tm if m >= tm else -(-m // 16) * 16
    tn = tn if n >= tn else -(-n // 16) * 16
    tiles = [(min(tm, m - i), min(tn, n - j)) for _ in range(count)
             for i in range(0, m, tm) for j in range(0, n, tn)]
    waves = 0
    while tiles:
        tiles, waves = tiles[sms:], waves + 1
    return Fraction(m * n * count, waves * sms * tm * tn)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 3000), st.integers(1, 4), st.sampled_from([108, 132]),
       st.sampled_from([(128, 128), (128, 256), (64, 64)]))
def test_wave_efficiency_equals_a_tile_by_tile_simulation(m, n, count, sms, tile):
    assert eff.wave_efficiency(m, n, count, sms, *tile) == Rational(best_waves(m, n, count, sms, *tile))


def best_waves(m, n, count, sms, tm, tn):
    """The simulation on the best of the full tile and its halves along either side."""
    return max(simulated_waves(m, n, count, sms, a, b) for a, b in ((tm, tn), (tm, tn // 2), (tm // 2, tn)))


def test_wave_efficiency_by_hand():
    # 1000 x 1000 on Hopper tiles: 128 x 256 makes 8 x 4 = 32 tiles, 128 x 128 (or 64 x 256) 64:
    # one wave of 132 SMs either way, the smaller tile wastes half as many slots
    assert eff.wave_efficiency(1000, 1000, 1, 132, 128, 256) == Rational(10**6, 132 * 128 * 128)
    # one decode token through a 4096-wide projection: 32 narrow 16 x 128 tiles in one wave
    assert eff.wave_efficiency(1, 4096, 1, 132, 128, 256) == Rational(4096, 132 * 16 * 128)


def test_wave_efficiency_of_a_symbolic_token_count_is_exact_where_substituted():
    from sympy import Symbol
    t = Symbol("t", positive=True, integer=True)
    expr = eff.wave_efficiency(t, 4096, 1, 132, 128, 256)
    for tokens in (1, 17, 127, 128, 3000):
        assert expr.subs(t, tokens) == Rational(best_waves(tokens, 4096, 1, 132, 128, 256))


def test_a_grouped_gemm_is_timed_on_the_tiles_of_its_experts_products():
    """8 experts, 72 rows each, (2880 -> 4096), GPT-OSS's hidden size: each expert's forward and dX
    are products of its own 72 rows, its dW a full 2880 x 4096 output; the tiles of all 8 share the
    waves.  The tile-by-tile simulation gives 0.873, 0.614 and 0.992 of the slots useful; timed as
    one product of 576 rows (and one dW output) they would be 0.545, 0.767 and 0.909."""
    from symbolic_cost.ops.matmul import matmul_flops
    from symbolic_cost.ops.routing import grouped_linear
    from symbolic_cost.timing.systems import product_rate
    h100 = calibrated("h100")
    row = grouped_linear(576, 2880, 4096, 8, bias=False)
    at = product_rate(row, h100) * h100.efficiency.matrix
    forward, _ = eff.pass_times(row, "fwd", h100, DEFAULT)
    assert forward == matmul_flops(576, 2880, 4096) / at / Rational(best_waves(72, 4096, 8, 132, 128, 256))
    backward, _ = eff.pass_times(row, "bwd", h100, DEFAULT)
    assert backward == (matmul_flops(576, 4096, 2880) / Rational(best_waves(72, 2880, 8, 132, 128, 256))
                        + matmul_flops(2880, 576, 4096) / Rational(best_waves(2880, 4096, 8, 132, 128, 256))) / at
    # the few rows an expert gets make its dX slower than one product's, its forward faster (narrow tiles)
    assert best_waves(72, 2880, 8, 132, 128, 256) < best_waves(576, 2880, 1, 132, 128, 256)
    assert best_waves(72, 4096, 8, 132, 128, 256) > best_waves(576, 4096, 1, 132, 128, 256)


def test_the_tiled_kernel_model_reads_every_experts_weights():
    """Under ``kernel_time="tiled"`` a grouped GEMM runs one product per expert, each reading its own
    2048 x 4096 weights: at least 8 x 16 MiB from memory in the forward (one product would read one)."""
    from symbolic_cost.conventions import get
    from symbolic_cost.ops.routing import grouped_linear
    from symbolic_cost.timing import kernels
    h100 = get_system("h100")
    t_mem, _ = kernels.pass_times(grouped_linear(576, 2048, 4096, 8, bias=False), "fwd", h100,
                                  get(DEFAULT).but(kernel_time="tiled"))
    assert t_mem >= 8 * 2048 * 4096 * 2 / h100.hbm_bandwidth


# NCCL 2.8's tuning.cc (the file with ll128MaxBwPerCh = {18.8, 12.0, 18.3, 15.2, 16.7}), its LL128
# default rule as the later file (NCCL 2.19/2.20, with NVLS) writes it, and topo.h's NVLink GB/s per channel
LL128_ON = {"volta", "ampere", "hopper"}                  # pEnable: compute capability 7.0, 8.0, 9.0
LL128_MAX_BW_PER_CH = {"broadcast": 18.8, "reduce": 12.0, "allgather": 18.3, "reducescatter": 15.2,
                       "allreduce": 16.7}
NVLINK_BW = {"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1, "other": 20.0}


def nccl_reference(kind, n, nbytes, bus, link, nodes=1, intra=None, arch="other"):
    """NCCL's ncclTopoTuneModel + ncclTopoGetAlgoTime for a ring (src/graph/tuning.cc), in µs,
    written from that file: latency = baseLat + intra steps x hwLat[intraHw] + inter steps x hwLat[NET];
    bandwidth = busBw x nRanks / nsteps (LL: busBw / 4 for an allreduce, / 3 otherwise; LL128, where
    enabled: min(busBw x (ppn < 2 ? 0.7 : 0.92), ll128MaxBwPerCh x nChannels), nChannels = busBw over
    one NVLink's channel bandwidth, the cap only on NVLink)."""
    base = {"LL": 3.6, "LL128": 10.0, "Simple": 8.4}
    hw = {"nvlink": {"LL": 0.47, "LL128": 1.9, "Simple": 3.4}, "net": {"LL": 2.7, "LL128": 4.0, "Simple": 9.6}}
    near = "nvlink" if (intra or link) == "nvlink" else "net"
    nsteps = 2 * (n - 1) if kind == "allreduce" else n - 1
    inter = 2 * (nodes - 1) if kind == "allreduce" else nodes - 1
    protocols = ["LL", "Simple"] + (["LL128"] if arch in LL128_ON and kind in LL128_MAX_BW_PER_CH else [])
    best = math.inf
    for p in protocols:
        bus_gbs = bus / 1e9
        if p == "LL":
            bus_gbs *= 0.25 if kind == "allreduce" else 1 / 3
        if p == "LL128":
            ppn = n / nodes
            capped = bus_gbs * (0.7 if ppn < 2 else 0.92)
            if link == "nvlink":
                capped = min(capped, LL128_MAX_BW_PER_CH[kind] * bus_gbs / NVLINK_BW[arch])
            bus_gbs = capped
        algbw = bus_gbs * n / nsteps                    # NCCL: bandwidths[coll][RING][p], GB/s
        lat = base[p] + (nsteps - inter) * hw[near][p] + inter * hw["net"][p]
        best = min(best, lat + nbytes / (1000 * algbw))  # ncclTopoGetAlgoTime
    return best


TREE_CORRECTION = {                                       # tuning.cc's treeCorrectionFactor
    "LL": [1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0],
    "LL128": [1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, 1.0],
    "Simple": [.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9]}


def nccl_tree_reference(n, nbytes, bus, nodes, arch="other"):
    """The same file's tree allreduce, in µs: baseLat[TREE] + 2 x ((nRanks/nNodes - 1) x
    hwLat[NVLINK][TREE] + log2i(nNodes) x hwLat[NET][TREE]); busBw = min(0.9 busBw, maxTreeBw)
    (LL: / 3.8; LL128: x 0.915 across nodes, maxTreeBw 130/105 on compute capability 8.0), algorithm
    bandwidth busBw / 2, times treeCorrectionFactor[log2i(nBytes >> 6)]."""
    base = {"LL": 4.4, "LL128": 4.4, "Simple": 0.0}
    intra, net = {"LL": 0.52, "LL128": 1.2, "Simple": 28.0}, {"LL": 5.0, "LL128": 8.5, "Simple": 50.0}
    log2i = lambda v: v.bit_length() - 1 if v > 0 else 0        # noqa: E731  (NCCL's log2i)
    best = math.inf
    for p in ["LL", "Simple"] + (["LL128"] if arch in LL128_ON else []):
        compcap80_ll128 = arch == "ampere" and p == "LL128"
        max_tree_bw = (105.0 if compcap80_ll128 else 80.0) if nodes > 2 else (130.0 if compcap80_ll128 else 110.0)
        bus_gbs = min(bus / 1e9 * 0.9, max_tree_bw)
        if p == "LL":
            bus_gbs /= 3.8
        if p == "LL128":
            bus_gbs *= 0.915                                     # nNodes > 1
        algbw = bus_gbs * 0.5
        size = log2i(nbytes >> 6)
        if size < 22:
            algbw *= TREE_CORRECTION[p][size]
        lat = base[p] + 2 * ((n // nodes - 1) * intra[p] + log2i(nodes) * net[p])
        best = min(best, lat + nbytes / (1000 * algbw))
    return best


def nvls_reference(kind, n, nbytes, nvlink_bus, net_bus, nodes=1):
    """NCCL 2.19/2.20's NVLS (one node) and NVLS tree (allreduce across nodes), Simple only, in µs:
    latency hwLat[NVLINK][NVLS] = 23 (+ 2 x log2i(nNodes) x hwLat[NET][NVLS_TREE] = 14 for the tree);
    busBw = nChannels x min(bwIntra, bwInter (/2 beyond two nodes)), algorithm bandwidth 5/6 of it;
    none where a node holds two GPUs or fewer (ncclNvlsInit) or for another collective."""
    log2i = lambda v: v.bit_length() - 1 if v > 0 else 0        # noqa: E731
    if n // nodes <= 2 or kind not in ("allreduce", "allgather", "reducescatter"):
        return math.inf
    if nodes == 1:
        return 23.0 + nbytes / (1000 * nvlink_bus / 1e9 * 5 / 6)
    if kind != "allreduce":
        return math.inf
    bus_gbs = min(nvlink_bus, net_bus if nodes <= 2 else net_bus / 2) / 1e9
    return 23.0 + 2 * log2i(nodes) * 14.0 + nbytes / (1000 * bus_gbs * 5 / 6)


def nccl_cheapest_reference(kind, n, nbytes, system, link, nodes=1):
    """NCCL picks the cheapest enabled algorithm and protocol: ring, tree (an allreduce across
    nodes), NVLS and NVLS tree (NVLink SHARP systems), in µs; LL128 where NCCL enables it."""
    e = system.efficiency
    bus = float(e.nvlink_bus if link == "nvlink" else e.ib_bus)
    intra = "nvlink" if link == "ib" and nodes > 1 else None
    best = nccl_reference(kind, n, nbytes, bus, link, nodes, intra, e.arch)
    if kind == "allreduce" and link == "ib" and nodes > 1:
        best = min(best, nccl_tree_reference(n, nbytes, bus, nodes, e.arch))
    if e.nvls and (link == "nvlink" or nodes > 1):
        best = min(best, nvls_reference(kind, n, nbytes, float(e.nvlink_bus), float(e.ib_bus), nodes))
    return best


@pytest.mark.parametrize("n,nodes,nbytes", [(16, 2, 2**10), (128, 16, 2**20), (1024, 128, 2**16),
                                            (1024, 128, 2**30), (64, 8, 3 * 10**6), (256, 32, 100)])
def test_an_allreduce_across_nodes_takes_nccls_cheaper_of_ring_and_tree(n, nodes, nbytes):
    from symbolic_cost.cost import Collective
    system = calibrated("a100")                         # 8 per NVLink domain, 25 GB/s per NIC
    c = Collective("allreduce", nbytes, 1, n, "bwd", volume=0)
    ours = float(comm_time(c, system)) * 1e6
    bus = float(system.efficiency.ib_bus)
    ring = nccl_reference("allreduce", n, nbytes, bus, "ib", nodes, intra="nvlink", arch="ampere")
    assert ours == pytest.approx(min(ring, nccl_tree_reference(n, nbytes, bus, nodes, "ampere")), rel=1e-9)


def test_the_tree_wins_small_allreduces_over_many_nodes_and_the_ring_large_ones():
    bus = 25e9
    assert nccl_tree_reference(1024, 2**16, bus, 128) < nccl_reference("allreduce", 1024, 2**16, bus, "ib", 128,
                                                                        intra="nvlink") / 3
    assert nccl_tree_reference(16, 2**30, bus, 2) > nccl_reference("allreduce", 16, 2**30, bus, "ib", 2,
                                                                   intra="nvlink")


@pytest.mark.parametrize("kind,n,nbytes,link,nodes", [
    ("allreduce", 8, 16 * 1024, "nvlink", 1), ("allreduce", 8, 2**30, "nvlink", 1),
    ("allgather", 4, 2**20, "nvlink", 1), ("reducescatter", 32, 2**28, "ib", 4), ("allreduce", 64, 2**26, "ib", 8)])
def test_collectives_follow_nccls_cost_model(kind, n, nbytes, link, nodes):
    bus = 235 * 10**9
    ours = nccl.nccl_time(kind, n, nbytes, bus, link, nodes)
    assert float(ours) * 1e6 == pytest.approx(nccl_reference(kind, n, nbytes, bus, link, nodes), rel=1e-9)


NCCL_SYSTEMS = ["a100", "h100", "h200", "h20", "h100-pcie", "b200", "gb200", "mi300x", "mi355x"]


@settings(max_examples=60, deadline=None)
@given(system=st.sampled_from(NCCL_SYSTEMS), kind=st.sampled_from(["allreduce", "allgather", "reducescatter"]),
       per_domain=st.integers(1, 8), nodes=st.sampled_from([1, 1, 2, 3, 4, 16, 128]),
       nbytes=st.integers(1, 2**31))
def test_collectives_take_the_cheapest_of_nccls_enabled_algorithms_and_protocols(system, kind, per_domain,
                                                                                  nodes, nbytes):
    from symbolic_cost.cost import Collective
    system = calibrated(system)
    n = per_domain * nodes
    if n == 1:
        return
    link, intra = ("nvlink", None) if nodes == 1 else ("ib", "nvlink")
    ours = nccl.collective_time(Collective(kind, nbytes, 1, n, "bwd", volume=0), system, link, nodes, intra)
    assert float(ours) * 1e6 == pytest.approx(nccl_cheapest_reference(kind, n, nbytes, system, link, nodes),
                                              rel=1e-9)


@pytest.mark.parametrize("system,per_domain,nodes,nbytes", [
    ("a100", 8, 1, 4 * 10**6),       # ring LL128 at its per-channel cap
    ("a100", 1, 16, 2**22),          # ring LL128 at 0.7 (one GPU per node)
    ("a100", 8, 16, 2**20),          # tree LL128
    ("h100", 2, 8, 2**22),           # ring LL128 on Hopper (NVLS off: two GPUs per node)
    ("h100", 8, 1, 10**9),           # NVLS
    ("h100", 2, 1, 2**28),           # no NVLS for two GPUs
    ("h100", 8, 2, 2**30),           # NVLS tree
    ("h100", 2, 2, 2**30),           # no NVLS tree with two GPUs per node (it would win: 25.8 ms vs 32.3)
    ("h100", 8, 4, 2**30),           # NVLS tree at half the network bandwidth: the ring wins
    ("b200", 8, 1, 4 * 10**6),       # NVLS; LL128 off on Blackwell
])
def test_each_algorithm_and_protocol_where_nccl_picks_it(system, per_domain, nodes, nbytes):
    from symbolic_cost.cost import Collective
    system = calibrated(system)
    n = per_domain * nodes
    link, intra = ("nvlink", None) if nodes == 1 else ("ib", "nvlink")
    ours = nccl.collective_time(Collective("allreduce", nbytes, 1, n, "bwd", volume=0), system, link, nodes, intra)
    assert float(ours) * 1e6 == pytest.approx(nccl_cheapest_reference("allreduce", n, nbytes, system, link, nodes),
                                              rel=1e-9)


def test_nvls_takes_a_large_allreduce_on_h100_and_ll128_a_medium_one_on_a100():
    h100, a100, b200 = (calibrated(s).efficiency for s in ("h100", "a100", "b200"))
    assert (h100.nvls, a100.nvls, b200.nvls, calibrated("gb200").efficiency.nvls) == (True, False, True, False)
    # 1 GB over 8 H100s (bus 352.5 GB/s): ring Simple 8.4 + 14 x 3.4 us + 1.75 GB / 352.5 GB/s = 5,020.5 us;
    # NVLS 23 us + 1 GB / (5/6 x 352.5 GB/s) = 3,427.3 us
    assert nccl_cheapest_reference("allreduce", 8, 10**9, calibrated("h100"), "nvlink") == pytest.approx(3427.26, abs=0.01)
    # 16 MB over 8 A100s (235 GB/s): LL128 10 + 14 x 1.9 us + 28 MB / (16.7/20 x 235 GB/s) = 179.3 us;
    # Simple 56 + 28 MB / 235 GB/s = 175.2 us wins; at 4 MB LL128's 36.6 + 35.7 = 72.3 us beats Simple's 85.8
    assert nccl_cheapest_reference("allreduce", 8, 4 * 10**6, calibrated("a100"), "nvlink") == pytest.approx(72.27, abs=0.01)
    assert nccl_reference("allreduce", 8, 4 * 10**6, 235e9, "nvlink", arch="blackwell") == pytest.approx(85.79, abs=0.01)
    from symbolic_cost.cost import Collective
    for system, nbytes, expected in (("h100", 10**9, 3427.26), ("a100", 4 * 10**6, 72.27)):
        ours = nccl.collective_time(Collective("allreduce", nbytes, 1, 8, "bwd", volume=0), calibrated(system), "nvlink")
        assert float(ours) * 1e6 == pytest.approx(expected, abs=0.01)


def test_a_symbolic_group_keeps_nvls_off_where_nccl_sets_it_up_for_two_devices_or_fewer():
    from sympy import Symbol
    from symbolic_cost.cost import Collective
    n = Symbol("n", positive=True, integer=True)
    system = calibrated("h100")
    expr = nccl.collective_time(Collective("allreduce", 2**28, 1, n, "bwd", volume=0), system, "nvlink")
    for size in (1, 2, 3, 4, 8):
        numeric = nccl.collective_time(Collective("allreduce", 2**28, 1, size, "bwd", volume=0), system, "nvlink")
        assert expr.subs(n, size) == numeric
    assert float(expr.subs(n, 2)) * 1e6 == pytest.approx(nccl_cheapest_reference("allreduce", 2, 2**28, system,
                                                                               "nvlink"), rel=1e-9)


def test_a_small_tp8_allreduce_costs_what_nccl_says_not_a_28_us_ring():
    # a decode step's all-reduce of one token's hidden states (8192 x 2 bytes) over 8 H100s
    from symbolic_cost.cost import Collective
    c = Collective("allreduce", 8192, 2, 8, "fwd", volume=0)
    ideal, real = comm_time(c, get_system("h100")), comm_time(c, calibrated("h100"))
    assert float(ideal) > 28e-6                      # 14 steps x 2 us, the peak-only ring
    assert 9e-6 < float(real) < 11e-6                # NCCL LL: 3.6 + 14 x 0.47 us + the bytes


sizes = st.sampled_from([256, 512, 1024, 2048])


@settings(max_examples=25, deadline=None)
@given(sizes, sizes, st.sampled_from([1, 2, 4, 8]), st.sampled_from(["a100", "h100"]))
def test_calibrated_compute_is_never_faster_than_the_peak(l, e, m1, system):
    block = list(mlp(2, l, e, 4 * e, m1, m1)) + list(attention(2, l, e, 8, m1, m1))
    for row in block:
        ideal, real = times(row, get_system(system)), times(row, calibrated(system))
        for pass_ in ("fwd", "bwd"):
            assert real[f"t_{pass_}"] >= ideal[f"t_{pass_}"]


def test_overlap_hides_data_parallel_communication_up_to_one_micro_batch():
    arch = preset("gpt2")
    plain = Training(b=4, l=1024, d=8, micro_batches=4)
    hidden = Training(b=4, l=1024, d=8, micro_batches=4, overlap=Overlap(grad_reduce=True))
    system = calibrated("h100")
    before = step_time_breakdown(model_cost(arch, plain), system)
    after = step_time_breakdown(model_cost(arch, hidden), system)
    assert after["compute"] == before["compute"] and after["data_comm"] < before["data_comm"]
    # what is hidden is one micro-batch's backward, summed row by row (or all of it, if shorter)
    cost = model_cost(arch, hidden)
    backward = sum(count * times(row, system)["t_total_bwd"] for blk, count in cost.stack for row in blk)
    assert float(before["data_comm"] - after["data_comm"]) == pytest.approx(
        min(float(backward), float(before["data_comm"])), rel=1e-9)


@pytest.mark.parametrize("b", [1, 4])
def test_zero2_reduces_every_micro_batch_behind_that_micro_batchs_own_backward(b):
    # ZeRO-2 keeps a gradient shard only, so each of the n micro-batches reduce-scatters its
    # gradients (P seconds each), bucket by bucket during its own backward (B): with the overlap,
    # n min(P, B) is hidden, not min(n P, B) (b=1: P > B; b=4: P < B < n P)
    arch, n = preset("gpt2"), 4
    plain = Training(b=b, l=1024, d=64, micro_batches=n, zero=2)
    hidden = Training(b=b, l=1024, d=64, micro_batches=n, zero=2, overlap=Overlap(grad_reduce=True))
    system = calibrated("a100")
    before = step_time_breakdown(model_cost(arch, plain), system)
    after = step_time_breakdown(model_cost(arch, hidden), system)
    cost = model_cost(arch, hidden)
    scatters = [c for dim, c in cost.collectives if dim == "data" and c.kind == "reducescatter"]
    assert [c.repeats for c in scatters] == [n]
    each = float(comm_time(scatters[0], system)) / n
    backward = float(sum(count * times(row, system)["t_total_bwd"] for blk, count in cost.stack for row in blk))
    assert float(before["data_comm"] - after["data_comm"]) == pytest.approx(n * min(each, backward), rel=1e-9)


def test_scatter_gather_sends_a_tensor_shard_and_gathers_it():
    # GPT-2 small, b = 2, l = 128, TP 4 without SP, 2 stages: Megatron-LM (2021) sends b l e / m1
    # = 2 x 128 x 768 / 4 = 49,152 elements per rank, then all-gathers them over the 4 ranks
    t = Training(b=2, l=128, m1=4, p=2, micro_batches=3)
    legacy = model_cost(preset("gpt2"), t, DEFAULT.but(pipeline_sends="scatter-gather"))
    pipeline = [c for dim, c in legacy.collectives if dim == "pipeline"]
    sends = [c for c in pipeline if c.kind == "p2p"]
    gathers = [c for c in pipeline if c.kind == "allgather"]
    assert {c.elements for c in sends} == {49152} and {c.group for c in gathers} == {4}
    assert {c.elements for c in gathers} == {2 * 128 * 768}
    plain = model_cost(preset("gpt2"), t)
    assert {c.elements for dim, c in plain.collectives if dim == "pipeline"} == {2 * 128 * 768}


def test_two_printed_figures_of_the_megatron_a100_example_agree_under_narayanans_count():
    # the README prints ~32 s and 138 TFLOP/s per GPU for GPT-3 175B on 1,024 A100: Eq. 3 of
    # Narayanan et al. (recomputation counted) turns one into the other
    row = next(r for r in measured.rows() if r["id"] == "mlm-a100-gpt3-1024")
    flops = measured.source_flops({**row, "group": "narayanan2021_table1"})
    assert float(flops / (138 * 10**12 * 1024)) == pytest.approx(32, rel=0.01)


def test_llama3s_tflops_are_read_under_palms_count_of_llama_3_405b():
    # Llama 3 reports "MFU; Chowdhery et al. (2023)": PaLM's 6N + 12 L H Q T a token, N the
    # 405,853,388,800 parameters of Llama-3.1-405B's checkpoint, L = 126, H Q = 16,384; the
    # 8K-GPU row runs 64 x 32 sequences of 8,192 tokens at 430 TFLOP/s a GPU
    case = next(c for c in measured.cases() if c.id == "llama3-405b-8192-seq8192")
    per_token = 6 * 405_853_388_800 + 12 * 126 * 16_384 * 8_192
    assert case.seconds == Fraction(64 * 32 * 8_192 * per_token, 430 * 10**12 * 8_192)


def test_every_row_is_a_case_or_excluded_with_a_reason():
    ids = {r["id"] for r in measured.rows()}
    cases, excluded = {c.id for c in measured.cases()}, dict(measured.excluded())
    assert cases | set(excluded) == ids and not cases & set(excluded) and len(ids) == 88
    assert all(reason for reason in excluded.values())


KNOWN = {"a100": dict(matrix="0.62", memory="0.9", kernel="0.00002", step="0.02"),
         "h100": dict(matrix="0.7", memory="0.85", kernel="0.00003", step="0.01"),
         "b200": dict(matrix="0.55"), "b300": dict(matrix="0.66")}
"""Factors given to the fit's synthetic runs (inside ``calibrate.RANGES``; Blackwell's others are H100's,
as ``calibrate.MATRIX_ONLY`` takes them)."""


def test_the_fit_recovers_the_factors_that_made_its_runs():
    """``calibrate.fit`` on the calibration rows' configurations, each 'measured' at the model's own time
    under ``KNOWN``'s factors, gives those factors back: the fitting code checked on data whose answer is
    known, whatever the time model is (the committed fit is the same code on the measured times)."""
    pytest.importorskip("scipy")
    from dataclasses import replace
    from symbolic_cost.timing import calibrate
    assert eff.CALIBRATION["provenance"]["cases"] == [c.id for c in measured.fit_cases()]

    def given(case):
        family = eff.family(case.system)
        factors = {**KNOWN["h100"], **KNOWN[family]} if family in calibrate.MATRIX_ONLY else KNOWN[family]
        system = calibrated(case.system)
        return system.but(efficiency=system.efficiency.but(**{k: Rational(v) for k, v in factors.items()}))
    runs = [replace(case, seconds=calibrate.predict(case, given(case))) for case in measured.fit_cases()]
    for family, values in calibrate.fit(runs).items():
        want = {**KNOWN["h100"], **KNOWN[family]} if family in calibrate.MATRIX_ONLY else KNOWN[family]
        assert {k: float(v) for k, v in values.items()} == pytest.approx({k: float(v) for k, v in want.items()},
                                                                         rel=1e-4), family


def test_bad_efficiency_is_refused_by_name():
    from symbolic_cost.checks import InputError
    with pytest.raises(InputError, match="matrix must be positive"):
        eff.efficiency("a100").but(matrix=0)
    with pytest.raises(InputError, match="no calibrated efficiency"):
        eff.efficiency("tpu")


def test_calibrate_command_prints_the_fit_and_the_errors(capsys):
    pytest.importorskip("scipy")
    from symbolic_cost.cli import main
    assert main(["calibrate"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("a100: matrix ") and "| all | 46 |" in text and "18 rows not expressible" in text


@pytest.mark.parametrize("kind", ["allreduce", "allgather", "reducescatter", "alltoall"])
def test_a_group_of_one_device_costs_nothing(kind):
    from sympy import Symbol
    assert nccl.nccl_time(kind, 1, 10**9, 235 * 10**9, "nvlink") == 0
    n = Symbol("n", positive=True, integer=True)         # a symbolic degree set to 1 later
    assert nccl.nccl_time(kind, n, 10**6, 235 * 10**9, "nvlink").subs(n, 1) == 0
    assert nccl.nccl_time(kind, n, 10**6, 235 * 10**9, "nvlink").subs(n, 8) == \
        nccl.nccl_time(kind, 8, 10**6, 235 * 10**9, "nvlink")


@pytest.mark.parametrize("system", ["h100", "b200"])
def test_a_symbolic_s1_at_1_is_the_allreduce_a_model_with_s1_1_sends(system):
    """Under the calibrated model NCCL prices an allreduce apart from the reduce-scatter and
    allgather it is made of (its own latency, NVLS, the tree).  A model built with ``s1`` a symbol
    and evaluated at ``s1 = 1`` is the model built with ``s1 = 1``; it once priced the pair there
    (Llama-3.2-1B, m1 = 4, on B200: 0.00749 s of tensor-parallel time against 0.00507)."""
    from symbolic_cost.models.config import load
    from symbolic_cost.numeric.exact import model_function
    llama = load(pathlib.Path(__file__).parent / "hf_configs" / "Llama-3.2-1B.json")
    system = calibrated(system)
    evaluate = model_function(llama, system, zero=0)
    for s1 in (1, 2, 4):
        values = dict(b=2, l=1024, m1=4, s1=s1, d=8, p=2, n_micro=4)
        cost = model_cost(llama, Training(b=2, l=1024, m1=4, s1=s1, d=8, p=2, micro_batches=4, zero=0))
        want = step_time_breakdown(cost, system)
        got = evaluate(**values)
        assert {k: got[f"step_{k}"] for k in want} == want, s1


def test_tensor_overlap_hides_no_moe_all_to_all():
    """Megatron-LM's ``--tp-comm-overlap`` overlaps Transformer Engine's tensor-parallel collectives
    with their products, not the MoE dispatch and combine all-to-alls.  With the overlap on and the
    products outlasting the tensor-parallel collectives, what shows of a step's tensor communication
    is every all-to-all of its layers, summed here from the stack's own collectives, and what the
    overlap leaves of the rest, collective by collective (``tensor_comm_exposed``, checked by hand in
    ``test_overlap_pairs``)."""
    from symbolic_cost.models.config import load
    arch = load(pathlib.Path(__file__).parent / "hf_configs" / "Mixtral-8x7B-v0.1.json")
    system = calibrated("h100")
    run = dict(b=1, l=4096, m1=2, s1=2, d=4, ep=4, micro_batches=2, flash=True)
    on = step_time_breakdown(model_cost(arch, Training(**run, overlap=Overlap(tensor=True))), system)
    off = step_time_breakdown(model_cost(arch, Training(**run)), system)
    cost = model_cost(arch, Training(**run))
    all_to_all = sum(count * comm_time(c, system) for blk, count in cost.stack[1:-1] for row in blk
                     for c in row.collectives if c.kind == "alltoall")
    assert float(all_to_all) > 0
    assert float(on["tensor_comm"]) == pytest.approx(2 * float(all_to_all + _tensor_exposed(cost, system)), rel=1e-9)
    assert float(off["tensor_comm"]) > float(on["tensor_comm"])


def _tensor_exposed(cost, system):
    """What ``Overlap.tensor`` leaves of one micro-batch's tensor-parallel collectives, block by block."""
    from symbolic_cost.timing.hardware import row_seconds
    from symbolic_cost.timing.step import tensor_comm_exposed
    return sum(count * tensor_comm_exposed(blk, [row_seconds(r, system) for r in blk], pass_, system)
               for blk, count in cost.stack for pass_ in ("fwd", "bwd"))


def test_the_expert_overlap_hides_the_all_to_alls_up_to_the_compute():
    """Megatron-Core's 1F1B all-to-all overlap runs one micro-batch's dispatch and combine behind
    another's compute: with it alone, the all-to-alls show only where they outlast the compute, and
    the tensor-parallel collectives all show; with both switches, the all-to-alls' part that outlasts
    the compute and what the tensor overlap leaves of the rest."""
    from symbolic_cost.models.config import load
    arch = load(pathlib.Path(__file__).parent / "hf_configs" / "Mixtral-8x7B-v0.1.json")
    system = calibrated("h100")
    run = dict(b=1, l=4096, m1=2, s1=2, d=4, ep=4, micro_batches=2, flash=True)
    off = step_time_breakdown(model_cost(arch, Training(**run)), system)
    cost = model_cost(arch, Training(**run))
    all_to_all = 2 * sum(count * comm_time(c, system) for blk, count in cost.stack[1:-1] for row in blk
                         for c in row.collectives if c.kind == "alltoall")       # two micro-batches
    rest, compute = off["tensor_comm"] - all_to_all, off["compute"]
    expert = step_time_breakdown(model_cost(arch, Training(**run, overlap=Overlap(expert=True))), system)
    assert float(expert["tensor_comm"]) == pytest.approx(float(rest + max(0, all_to_all - compute)), rel=1e-9)
    both = step_time_breakdown(model_cost(arch, Training(**run, overlap=Overlap(expert=True, tensor=True))), system)
    exposed = 2 * _tensor_exposed(cost, system)
    assert float(both["tensor_comm"]) == pytest.approx(float(exposed + max(0, all_to_all - compute)), rel=1e-9)
    with pytest.raises(InputError, match="beside Ulysses"):
        model_cost(arch, Training(**{**run, "ep": 1}, cp=2, cp_variant="ulysses", overlap=Overlap(expert=True)))


def test_fsdp_regathers_hide_behind_the_backward_not_the_forward():
    """FSDP2 (ZeRO-3) gathers a unit's weights before its forward and again before its backward
    (``reshard_after_forward``), prefetching the next unit behind the current one's compute: the
    forward gathers hide behind the forward, the backward re-gathers and the gradient
    reduce-scatters behind the backward.  One micro-batch, each window as wide as its pass (a 7B
    model on 256 tokens, so that the re-gathers outlast the forward)."""
    from symbolic_cost.models.ranks import cost_placement
    from symbolic_cost.timing.step import _stage_pass
    system = calibrated("h100")
    run = Training(b=1, l=256, d=64, zero=3, flash=True, overlap=Overlap(grad_reduce=True, param_gather=True))
    cost = model_cost(preset("llama-2-7b"), run)
    forward, backward = (_stage_pass(cost, cost_placement(cost), system, DEFAULT, p)[0] for p in ("fwd", "bwd"))
    seconds = {}
    for dimension, c in cost.collectives:
        if dimension == "data":
            key = (c.kind, c.pass_)
            seconds[key] = seconds.get(key, 0) + comm_time(c, system)
    gathers, regathers = seconds[("allgather", "fwd")], seconds[("allgather", "bwd")]
    reductions = sum(v for (kind, _), v in seconds.items() if kind in ("reducescatter", "allreduce"))
    expected = max(0, gathers - forward) + max(0, regathers - backward) + max(0, reductions - backward)
    assert float(step_time_breakdown(cost, system)["data_comm"]) == pytest.approx(float(expected), rel=1e-9)
    assert float(regathers) > float(forward)        # the old window would have shown them


def test_the_expert_data_parallel_gradient_reduce_is_in_the_step():
    """Issue 66's blind spot: dropping the routed experts' gradient reduce from the step changed
    Mixtral's step time and no test failed.  Hand count: Mixtral-8x7B (46,702,792,704 parameters,
    its model card) has 32 layers of 8 experts of 3 x 4096 x 14336 weights; on d = 16 ranks with
    ep = 8, each rank holds an eighth of them and reduces their gradients over the 2 ranks of its
    expert-data group, 8 ranks apart (Megatron-Core's expert grid); the rest, 1,605,636,096
    parameters, over all 16.  With no overlap, one micro-batch, the step's data time is both."""
    from symbolic_cost.models.config import load
    arch = load(pathlib.Path(__file__).parent / "hf_configs" / "Mixtral-8x7B-v0.1.json")
    cost = model_cost(arch, Training(b=1, l=4096, d=16, ep=8, flash=True))
    routed = 32 * 8 * 3 * 4096 * 14336
    experts = [c for dimension, c in cost.collectives if dimension == "expert_data"]
    dense = [c for dimension, c in cost.collectives if dimension == "data"]
    assert [(c.kind, c.elements, c.group, c.stride) for c in experts] == [("allreduce", routed // 8, 2, 8)]
    assert [(c.kind, c.elements, c.group) for c in dense] == [("allreduce", 46702792704 - routed, 16)]
    system = calibrated("h100")
    expected = sum(float(comm_time(c, system)) for c in experts + dense)
    assert float(step_time_breakdown(cost, system)["data_comm"]) == pytest.approx(expected, rel=1e-12)
    assert float(comm_time(experts[0], system)) > 0


def test_an_all_to_all_across_hosts_sends_only_the_other_hosts_share_over_the_network():
    """16 H100 on two hosts, 1 GiB a device: NCCL's all-to-all is a send to every other rank, so
    8/16 of the bytes cross InfiniBand (the other host's 8 ranks) while the 7 on the same host go
    over NVLink at once; Simple protocol, 15 steps, one of them across the network."""
    from sympy import Rational
    from symbolic_cost.cost import Collective
    volume, system = 2**30, calibrated("h100")
    a2a = Collective("alltoall", volume, 1, 16, "fwd", volume=0)
    latency = nccl.BASE["Simple"] + 14 * nccl.HOP[("nvlink", "Simple")] + nccl.HOP[("ib", "Simple")]
    assert comm_time(a2a, system) == latency + Rational(8, 16) * volume / system.efficiency.ib_bus
