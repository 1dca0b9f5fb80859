"""Values derived by hand (or printed by the seed's reference notes), not by the library."""

from sympy import Rational, simplify, symbols

from symbolic_cost import Projections, attention, conventions as conv, mlp
from symbolic_cost.cost import Collective, ring_share
from symbolic_cost.timing.hardware import SYSTEMS, comm_time, times
from symbolic_cost.symbols import b, e, f, h, l, m1, s1
from symbolic_cost.blocks.wiring import Run

TWO_MNK = conv.DEFAULT.but(matmul_flops="2mnk")


def test_mlp_forward_flops_by_hand():
    # norm 9ble; fc1 blf(2e-1) + blf bias; gelu blf; fc2 ble(2f-1) + ble; dropout ble
    hand = 9*b*l*e + 2*b*l*e*f + b*l*f + 2*b*l*e*f + b*l*e
    assert simplify(mlp(b, l, e, f).total("flops_fwd") - hand) == 0
    # the LBNL layout's dropout after the GELU multiplies b l f more elements by its mask
    assert simplify(mlp(b, l, e, f, activation_dropout=True).total("flops_fwd") - hand - b*l*f) == 0


def test_layer_forward_flops_leading_terms_2mnk():
    """With f = 4e and 2mnk, a layer's forward is 24 b l e^2 + 4 b l^2 e plus lower terms."""
    layer = (mlp(b, l, e, 4 * e, bias=False, run=Run(conventions=TWO_MNK)).total("flops_fwd")
             + attention(b, l, e, h, projections=Projections(False, False),
                         run=Run(conventions=TWO_MNK)).total("flops_fwd"))
    # lower terms by hand: norms 18ble, gelu 4ble, dropouts 2ble,
    # softmax 2bhl^2 + bhl(l-1), attention dropout bhl^2
    lower = 18*b*l*e + 4*b*l*e + 2*b*l*e + 2*b*h*l**2 + b*h*l*(l - 1) + b*h*l**2
    assert simplify(layer - (24*b*l*e**2 + 4*b*l**2*e + lower)) == 0


def test_seed_reference_values():
    """Values listed in shared/reference/seed003_formulas.md section 7 (in FLOPs and bytes)."""
    m = mlp(1, 2048, 12288, 49152, 4, run=Run(conventions="lbnl-2024"))
    a = attention(1, 2048, 12288, 96, 4, projections=Projections(qkv_bias=False), run=Run(conventions="lbnl-2024"))
    assert (m["fc1"].flops_fwd, m["fc1"].flops_bwd) == (618475290624, 1236799586304)
    assert (a["qkv_proj"].flops_fwd, a["qkv_proj"].flops_bwd) == (463837593600, 927574523904)
    assert a["logits"].flops_fwd == 25669140480
    assert (a["attend"].flops_fwd, a["attend"].flops_bwd) == (25763512320, 51432652800)
    assert (a["v_proj"].flops_fwd, a["v_proj"].flops_bwd) == (154618822656, 309218770944)
    assert (a["layer_norm_1"].flops_fwd, a["layer_norm_1"].flops_bwd) == (56623104, 81786880)
    assert [c.volume for c in m.collectives] == [50331648] * 3
    t = times(m["fc1"], SYSTEMS["a100-perlmutter"], conv.get("lbnl-2024"))
    assert round(float(t["t_comp_fwd"]) * 1000, 6) == 1.982293
    assert t["t_comm_bwd"] * 1000 == Rational("0.08388608")


def test_ring_shares():
    n = symbols("n", positive=True, integer=True)
    assert simplify(ring_share("allreduce", n) - 2 * (n - 1) / n) == 0
    assert ring_share("reducescatter", 4) == Rational(3, 4)
    assert ring_share("p2p", 8) == 1


def test_alpha_beta_times_by_hand():
    system = SYSTEMS["a100"]  # NVLink 300 GB/s a direction (600 both ways), 2 us; IB 25 GB/s, 5 us; 8 a domain
    gb = 10**9
    allreduce_8 = Collective("allreduce", gb, 1, 8, "fwd", volume=0)
    # 2(n-1) = 14 steps of 2 us, and 2*7/8 GB sent one way at 300 GB/s
    assert comm_time(allreduce_8, system) == 14 * Rational(2, 10**6) + Rational(7, 4) / 300
    allgather_16 = Collective("allgather", gb, 1, 16, "bwd", volume=0)
    assert comm_time(allgather_16, system) == 15 * Rational(5, 10**6) + Rational(15, 16) / 25
    # the LBNL model ignores the kind and the group: reported volume over bandwidth
    assert comm_time(Collective("allreduce", gb, 1, 8, "fwd", volume=gb), system,
                     conv.get("lbnl-2024")) == Rational(1, 300)


def test_overlap_takes_the_longer_of_compute_and_comm():
    row = mlp(1, 2048, 12288, 49152, 4, 4)["fc2"]
    serial = times(row, "a100")
    overlapped = times(row, "a100", conv.DEFAULT.but(overlap_comm=True))
    assert serial["t_total_fwd"] == serial["t_fwd"] + serial["t_comm_fwd"]
    assert overlapped["t_total_fwd"] == max(serial["t_fwd"], serial["t_comm_fwd"])


def test_megatron_sequence_parallel_volumes():
    """s1 = m1: the MLP moves one allgather and one reduce-scatter of b l e each way
    (Korthikanti et al. 2022), each (m1-1)/m1 of the tensor per device, 2 bytes/elem;
    Megatron-LM's backward also allgathers again the fc1 input shard it kept."""
    moved = 2 * b * l * e * (m1 - 1) / m1
    for inputs, extra in (("gathered", 0), ("shard", 1)):
        block = mlp(b, l, e, f, m1, m1, run=Run(conventions=conv.DEFAULT.but(sequence_parallel_inputs=inputs)))
        for pass_, again in (("fwd", 0), ("bwd", extra)):
            kinds = sorted(c.kind for c in block.collectives if c.pass_ == pass_
                           if simplify(c.volume) != 0)
            assert kinds == ["allgather"] * (1 + again) + ["reducescatter"]
            volume = sum(c.volume for c in block.collectives if c.pass_ == pass_)
            assert simplify(volume - (2 + again) * moved) == 0


def test_plain_tensor_parallel_is_one_allreduce_each_way():
    block = mlp(b, l, e, f, 8, 1)
    assert [(c.kind, c.pass_, c.group) for c in block.collectives] == [
        ("allreduce", "bwd", 8), ("allreduce", "fwd", 8)]


def test_sequence_parallelism_moves_no_more_than_tensor_parallelism():
    """Korthikanti et al. 2022: allgather + reduce-scatter move what one allreduce moves,
    so a block's volume per pass is 2 b l e es (m1-1)/m1 whatever s1 is (es = 2 here),
    when the gathered input is kept; keeping only its shard (Megatron-LM) costs one more
    allgather over s1 in backward, 2 b l e (s1-1)/s1."""
    gathered = mlp(b, l, e, f, m1, s1, run=Run(conventions=conv.DEFAULT.but(sequence_parallel_inputs="gathered")))
    shard = mlp(b, l, e, f, m1, s1)
    for pass_ in ("fwd", "bwd"):
        volume = sum(c.volume for c in gathered.collectives if c.pass_ == pass_)
        assert simplify(volume - 2 * 2 * b * l * e * (m1 - 1) / m1) == 0
        extra = sum(c.volume for c in shard.collectives if c.pass_ == pass_) - volume
        assert simplify(extra - (2 * b * l * e * (s1 - 1) / s1 if pass_ == "bwd" else 0)) == 0
