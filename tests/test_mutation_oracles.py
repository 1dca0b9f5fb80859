"""Independent oracles for the eight mutations that survived the whole suite (issue 32, item 3),
each listed in ``tests/mutations.py`` under "issue 32 item 3".

Every expected value here is a hand count written out with its arithmetic, a step-by-step
simulation written from the algorithm, or a published number; none is copied from the library.

* step time and HFU under recomputation: a toy layer whose matrix products are counted by hand
  on a system where they alone take time (1 FLOP/s; vector units and memory 10^30 times faster);
* Megatron-LM's bytes per parameter: the table of its distributed optimizer's documentation;
* the hierarchical all-to-all: a schedule of the messages, round by round, on both links;
* the router's top-k weights: the arithmetic of the renormalisation run on counting numbers,
  its backward checked against PyTorch's autograd;
* the quantised latent cache: DeepSeek-V2-Lite's latent counted by hand, one fp32 scale a layer
  (vLLM's ``concat_and_cache_mla`` takes one ``k_scale`` for a layer's latent cache);
* Ulysses: its all-to-alls run on ``s1`` simulated ranks in PyTorch, the gradients that cross
  ranks in backward counted by autograd hooks;
* the search's layouts: Llama-3.2-1B's layouts on 64 devices enumerated from the rules and
  counted by hand.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from symbolic_cost import conventions as conv
from symbolic_cost.inference.kv_cache import kv_cache_bytes
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.config import load
from symbolic_cost.models.optimizers import bytes_per_parameter
from symbolic_cost.models.utilisation import hardware_flops, model_flops
from symbolic_cost.numeric.layouts import layouts
from symbolic_cost.ops.routing import topk_weights
from symbolic_cost.parallel import collectives
from symbolic_cost.parallel.sequence import ulysses
from symbolic_cost.timing.step import step_time_breakdown
from symbolic_cost.timing.systems import System

CONFIGS = Path(__file__).parent / "hf_configs"

# ------------------------------------------------------------------ recomputation: step time and HFU

TOY = Architecture("toy", 4, 64, 4, 256, 512, rotary=True, mlp="swiglu", norm="rms", bias=False, qkv_bias=False,
                   dropouts=False, tied=False)
TWO_MNK = conv.DEFAULT.but(matmul_flops="2mnk")
B, L = 2, 32
# one layer's forward matrix products, b = 2, l = 32 (t = 64 tokens), e = 64, h = 4 (q = 16), f = 256:
LAYER_FWD = (2 * 64 * 64 * 192          # Q, K, V: 2 t e (3e)            = 1,572,864
             + 2 * 2 * 4 * 32 * 32 * 16  # scores Q K^T: 2 b h l l q     =   262,144
             + 2 * 2 * 4 * 32 * 32 * 16  # scores x V                     =   262,144
             + 2 * 64 * 64 * 64          # output projection: 2 t e e     =   524,288
             + 2 * 64 * 64 * 512         # gate and up (SwiGLU): 2 t e 2f = 4,194,304
             + 2 * 64 * 256 * 64)        # down: 2 t f e                  = 2,097,152
assert LAYER_FWD == 8_912_896
# matrix products at 1 FLOP/s; vector units and memory so fast that they add under 1e-20 s a row
UNIT = System("unit", matrix_flops=1, vector_flops=10**30, hbm_bandwidth=10**30, nvlink_bandwidth=10**30,
              ib_bandwidth=10**30, nvlink_size=8, nvlink_latency=0, ib_latency=0)


def _compute_seconds(**training):
    cost = model_cost(TOY, Training(b=B, l=L, micro_batches=2, flash=False, **training), TWO_MNK)
    return float(step_time_breakdown(cost, UNIT, TWO_MNK)["compute"])


@pytest.mark.parametrize("training, redone", [
    (dict(recompute="full"), 4),                                                   # every layer of 4
    (dict(recompute="full", recompute_method="block", recompute_layers=1), 1),    # the first one
    (dict(recompute="full", recompute_method="block", recompute_layers=3), 3),
])
def test_step_time_adds_the_forward_each_redone_layer_runs_again(training, redone):
    """Full recomputation redoes a layer's forward in backward: 2 micro-batches x the redone
    layers x one layer's forward products, at 1 FLOP/s."""
    added = _compute_seconds(**training) - _compute_seconds()
    assert added == pytest.approx(2 * redone * LAYER_FWD, rel=1e-12)


def test_hardware_flops_under_block_recomputation_count_the_redone_layers_only():
    """p = 2 stages of 2 layers, the first layer of each redone (block, 1 layer): per micro-batch
    and replica 2 redone layers; 2 micro-batches x d = 3 replicas x 2 x one layer's forward."""
    t = Training(b=B, l=L, p=2, d=3, micro_batches=2, flash=False, recompute="full", recompute_method="block",
                 recompute_layers=1)
    cost = model_cost(TOY, t, TWO_MNK)
    assert hardware_flops(cost, "matrix") - model_flops(cost, "matrix") == 2 * 3 * 2 * LAYER_FWD


# ------------------------------------------------------------------ Megatron-LM's bytes per parameter

@pytest.mark.parametrize("precision, unsharded, sharded", [("bf16", 6, 12), ("fp16", 4, 16), ("fp32", 8, 8)])
def test_megatron_bytes_per_parameter_are_its_distributed_optimizer_table(precision, unsharded, sharded):
    """Megatron-LM, docs/source/api-guide/dist_optimizer.md: bytes per parameter with the
    distributed optimizer over d ranks, "fp16 param, fp16 grads: 4 + 16/d; bf16 param, fp32
    grads: 6 + 12/d; fp32 param, fp32 grads: 8 + 8/d" (20, 18 and 16 without it): the weights
    and (main) gradients stay whole, the optimizer state (fp32 master, Adam's two moments, and
    for fp16 the fp32 main gradient) is sharded."""
    weights, gradients, optimizer = bytes_per_parameter(precision, conv.DEFAULT.but(mixed_precision="megatron"))
    assert (weights + gradients, optimizer) == (unsharded, sharded)


# ------------------------------------------------------------------ the hierarchical all-to-all

def _all_to_all_schedule(n: int, k: int, volume: Fraction, nvlink: tuple, ib: tuple) -> Fraction:
    """Device ``(node, local)`` holds ``n`` chunks of ``V/n``, one for each device.  NVLink rounds
    ``r = 1 .. k-1``: each device sends one chunk to ``(node, local + r)``; InfiniBand rounds
    ``r = 1 .. n/k - 1``, meanwhile: each device sends the ``k`` chunks for domain ``node + r``,
    one to each of its devices.  A link's time is its rounds x latency + the bytes one device
    sends / bandwidth; the two links run at once."""
    nodes, chunk = n // k, volume / n
    delivered = set()
    rounds, sent = {"nvlink": 0, "ib": 0}, {"nvlink": Fraction(0), "ib": Fraction(0)}
    for r in range(1, k):
        rounds["nvlink"] += 1
        for node, local in itertools.product(range(nodes), range(k)):
            delivered.add(((node, local), (node, (local + r) % k)))
            sent["nvlink"] += chunk if (node, local) == (0, 0) else 0
    for r in range(1, nodes):
        rounds["ib"] += 1
        for node, local, target in itertools.product(range(nodes), range(k), range(k)):
            delivered.add(((node, local), ((node + r) % nodes, target)))
            sent["ib"] += chunk if (node, local) == (0, 0) else 0
    devices = list(itertools.product(range(nodes), range(k)))
    pairs = {(a, b) for a in devices for b in devices if a != b}
    assert delivered == pairs                      # every chunk reaches its device, once a pair
    return max(rounds[x] * link[1] + sent[x] / link[0] for x, link in (("nvlink", nvlink), ("ib", ib)))


@pytest.mark.parametrize("n, k, nvlink, ib", [
    (16, 8, (10**11, 1), (10**10, Fraction(1, 2))),      # NVLink's 7 latencies dominate
    (16, 8, (10**11, Fraction(1, 1000)), (10**10, 1)),   # InfiniBand's latency dominates
    (32, 8, (10**11, Fraction(1, 100)), (10**10, 1)),    # 3 InfiniBand rounds
    (32, 4, (10**11, 2), (10**10, Fraction(1, 10))),
])
def test_hierarchical_all_to_all_counts_the_latency_of_every_round(n, k, nvlink, ib):
    volume = 16 * 10**9
    expected = _all_to_all_schedule(n, k, Fraction(volume), nvlink, ib)
    assert collectives.hierarchical_time("alltoall", n, k, volume, nvlink, ib) == expected


def test_hierarchical_all_to_all_by_hand():
    # 16 devices in 2 domains of 8, 16 GB each: NVLink 7/16 x 16 GB / 100 GB/s + 7 x 1 s = 7.07 s;
    # InfiniBand 8/16 x 16 GB / 10 GB/s + 1 x 0.5 s = 1.3 s; at once: 7.07 s
    t = collectives.hierarchical_time("alltoall", 16, 8, 16 * 10**9, (10**11, 1), (10**10, Fraction(1, 2)))
    assert t == Fraction(707, 100)
    # the same with 1 ms per NVLink round and 1 s per InfiniBand round: max(0.077, 1.8) = 1.8 s
    t = collectives.hierarchical_time("alltoall", 16, 8, 16 * 10**9, (10**11, Fraction(1, 1000)), (10**10, 1))
    assert t == Fraction(9, 5)


# ------------------------------------------------------------------ the router's top-k weights

class Counted:
    """A number that counts the arithmetic done on it (one FLOP per +, -, * or /)."""

    flops = 0

    def __init__(self, value):
        self.value = float(value)

    def _op(self, other, fn):
        Counted.flops += 1
        return Counted(fn(self.value, other.value if isinstance(other, Counted) else float(other)))

    def __add__(self, other): return self._op(other, lambda a, b: a + b)
    def __sub__(self, other): return self._op(other, lambda a, b: a - b)
    def __mul__(self, other): return self._op(other, lambda a, b: a * b)
    def __truediv__(self, other): return self._op(other, lambda a, b: a / b)


def _sum(values):
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def _renormalise(x, dy, scale):
    """Forward ``y_j = c x_j / S`` (``S = sum x``) and backward, written from the derivative:
    ``g = c dy``; ``dx_j = (g_j - sum_i g_i (x_i / S)) / S``.  FLOPs of each, counted."""
    Counted.flops = 0
    s = _sum(x)
    ratio = [xj / s for xj in x]
    y = [r * scale for r in ratio] if scale is not None else ratio
    fwd, Counted.flops = Counted.flops, 0
    g = [d * scale for d in dy] if scale is not None else dy
    dot = _sum([gi * ri for gi, ri in zip(g, ratio)])
    dx = [(gj - dot) / s for gj in g]
    return y, dx, fwd, Counted.flops


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("scale", [None, 2.5])
def test_topk_weights_flops_are_the_counted_renormalisation(k, scale):
    torch.manual_seed(k)
    x, dy = torch.rand(k, dtype=torch.float64) + 0.1, torch.randn(k, dtype=torch.float64)
    y, dx, fwd, bwd = _renormalise([Counted(v) for v in x], [Counted(v) for v in dy], scale)
    leaf = x.clone().requires_grad_()
    reference = leaf / leaf.sum() * (1 if scale is None else scale)
    reference.backward(dy)
    assert [v.value for v in y] == pytest.approx(reference.tolist())
    assert [v.value for v in dx] == pytest.approx(leaf.grad.tolist())        # the backward is right
    tokens = 7
    cost = topk_weights(tokens, k, normalise=True, scale=scale is not None)
    assert (cost.flops_fwd, cost.flops_bwd) == (tokens * fwd, tokens * bwd)


# ------------------------------------------------------------------ a quantised latent cache

def test_fp8_latent_cache_holds_one_scale_per_layer():
    """DeepSeek-V2-Lite: 27 layers cache a latent of 512 and a rotary key of 64 elements a token;
    in fp8, 1 byte each and one fp32 scale per layer's latent cache.  Three sequences of 1,000
    tokens: 3 x 1,000 x 27 x 576 = 46,656,000 bytes + 27 x 4 = 108 bytes of scales."""
    arch = load(CONFIGS / "DeepSeek-V2-Lite.json")
    assert kv_cache_bytes(arch, 3, 1000, kv_dtype="fp8") == 46_656_000 + 108
    # int8 (one fp32 scale a tensor as well): the same; bf16: 2 bytes an element, no scales
    assert kv_cache_bytes(arch, 3, 1000, kv_dtype="int8") == 46_656_000 + 108
    assert kv_cache_bytes(arch, 3, 1000) == 2 * 46_656_000


# ------------------------------------------------------------------ Ulysses, backward

def _ulysses_bytes(b, l, e, h, s1, es=2):
    """One Ulysses attention layer on ``s1`` simulated ranks: rank ``r`` holds tokens
    ``r l/s1 .. (r+1) l/s1`` of every head of q, k, v; an all-to-all (plain tensor slicing) gives
    it every token of heads ``r h/s1 ..``; attention; the output goes back the same way.  Elements
    that move between ranks are counted forward; autograd hooks on each moved slice count the
    gradient elements that move back.  Returns bytes one rank sends, per pass."""
    torch.manual_seed(0)
    q_dim, tokens, heads = e // h, l // s1, h // s1
    moved = {"fwd": 0, "bwd": 0}

    def send(piece, src, dst):
        if src == dst:
            return piece
        moved["fwd"] += piece.numel()
        piece = piece * 1                                    # the copy on the receiving rank
        piece.register_hook(lambda grad: moved.__setitem__("bwd", moved["bwd"] + grad.numel()))
        return piece

    x = [torch.randn(b, tokens, e, dtype=torch.float64, requires_grad=True) for _ in range(s1)]
    w = [torch.randn(e, e, dtype=torch.float64) for _ in range(4)]
    qkv = [[(x[r] @ w[i]).view(b, tokens, h, q_dim) for i in range(3)] for r in range(s1)]
    gathered = [[torch.cat([send(qkv[src][i][:, :, dst * heads:(dst + 1) * heads], src, dst) for src in range(s1)], 1)
                 for i in range(3)] for dst in range(s1)]          # rank dst: (b, l, heads, q)
    context = []
    for q, k, v in gathered:
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k).softmax(-1)
        context.append(torch.einsum("bhqk,bkhd->bqhd", scores, v))
    out = [torch.cat([send(context[src][:, dst * tokens:(dst + 1) * tokens], src, dst) for src in range(s1)], 2)
           .reshape(b, tokens, e) @ w[3] for dst in range(s1)]
    sum(o.sum() for o in out).backward()
    return {p: n * es // s1 for p, n in moved.items()}


@pytest.mark.parametrize("s1", [2, 4])
def test_ulysses_backward_all_to_alls_are_the_gradients_that_cross_ranks(s1):
    b, l, e, h = 2, 16, 32, 4
    scheme = ulysses(b, l, e, h, s1)
    sent = _ulysses_bytes(b, l, e, h, s1)
    assert (scheme.volume("fwd"), scheme.volume("bwd")) == (sent["fwd"], sent["bwd"])


# ------------------------------------------------------------------ the search's layouts

def test_llama_3_2_1b_layouts_on_64_devices_by_hand():
    """Llama-3.2-1B: 32 heads, 8 key/value heads, f = 8192, 16 layers; 64 devices, 1,024
    sequences of 2,048, b in 1, 2, 4, 8, recomputation none or full.  m1 must divide 32, 8 and
    8192: 1, 2, 4 or 8 (16 and 32 divide the heads but not the 8 key/value heads); p divides
    64/m1 and 16; s1 is 1 or m1; b d (at most 512, a power of two) always divides 1,024.
      m1 = 1: p in 1, 2, 4, 8, 16 -> 5 x 1 (s1) x 4 (b) x 2 (recompute) = 40
      m1 = 2: p in 1, 2, 4, 8, 16 -> 5 x 2 x 4 x 2                      = 80
      m1 = 4: p in 1, 2, 4, 8, 16 -> 5 x 2 x 4 x 2                      = 80
      m1 = 8: p in 1, 2, 4, 8     -> 4 x 2 x 4 x 2                      = 64
    264 in all."""
    arch = load(CONFIGS / "Llama-3.2-1B.json")
    assert (arch.h, arch.kv_heads, arch.f, arch.n_layers) == (32, 8, 8192, 16)
    table = layouts(arch, 64, 1024, 2048, recompute=("none", "full"))
    assert len(table) == 40 + 80 + 80 + 64 == 264
    expected = {(m1, s1, 64 // (m1 * p), p, b, 1024 // (b * 64 // (m1 * p)), policy)
                for m1 in (1, 2, 4, 8) for p in (1, 2, 4, 8, 16) if 64 % (m1 * p) == 0
                for s1 in {1, m1} for b in (1, 2, 4, 8) for policy in ("none", "full")}
    assert set(map(tuple, table[["m1", "s1", "d", "p", "b", "n_micro", "recompute"]].itertuples(index=False))) \
        == expected


# ------------------------------------------------------------------ the largest batch (max_batch's doctest)

def test_llama_2_7b_largest_batch_by_hand():
    """``max_batch``'s doctest, ``(30, 53)``, counted by hand: Llama-2-7B (32 layers, e = 4,096,
    f = 11,008, vocabulary 32,000, untied head) serving prompts of 4,000 and 96 new tokens on an
    H100 of 81,559 MiB (85,520,809,984 bytes, as nvidia-smi reports it), with flash attention; the batch is the tightest moment's (``inference.peak``).
      weights: 2 x 32,000 x 4,096 (table and head) + 32 x (4 x 4,096^2 + 3 x 4,096 x 11,008
      + 2 x 4,096 norms) + 4,096 = 6,738,415,616 parameters, 13,476,831,232 bytes in bf16;
      cache per token: 32 layers x 2 (K, V) x 4,096 x 2 bytes = 524,288 (fp8: half, and
      32 x 2 fp32 scales = 256 bytes once);
      the prefill: the prompt's cache, 4,000 tokens, and the working set (``Phase.working_bytes``):
      the hidden states, 4,000 x 4,096 x 2 = 32,768,000, and the largest operation, SwiGLU's gate
      and up in (4,000 x 2 x 11,008 x 2 = 176,128,000) and its product out (88,064,000);
      the last decode step's sampling: the cache of 4,000 + 96 - 1 = 4,095 tokens, the logits
      (32,000 x 2) and two fp32 copies (2 x 32,000 x 4), 320,000 a sequence (the decode step's
      own working set, one token's, is below that).
      bf16: prefill (85,520,809,984 - 13,476,831,232) / (2,097,152,000 + 296,960,000) = 30.09 -> 30,
            decode sampling / (2,146,959,360 + 320,000) = 33.55 -> 33; the least: 30;
      fp8:  prefill (85,520,809,984 - 13,476,831,232 - 256) / (1,048,576,000 + 296,960,000) = 53.5 -> 53,
            decode sampling / (1,073,479,680 + 320,000) = 67.1 -> 67; the least: 53.
    Before the peak, the memory added the end's cache to the prefill's working set, two moments
    that never meet (on an H100 of 80e9 bytes: (27, 48) where it is (27, 49))."""
    from symbolic_cost.inference import Serving
    from symbolic_cost.inference.throughput import max_batch
    from symbolic_cost.models.config import preset
    weights = 2 * (2 * 32_000 * 4_096 + 32 * (4 * 4_096**2 + 3 * 4_096 * 11_008 + 2 * 4_096) + 4_096)
    assert weights == 13_476_831_232
    token, activations = 32 * 2 * 4_096 * 2, 4_000 * 4_096 * 2 + 4_000 * 11_008 * 2 * (2 + 1)
    sampling = 32_000 * (2 + 2 * 4)
    assert (token, activations) == (524_288, 296_960_000)
    room = 81_559 * 2**20 - weights
    bf16 = min(room // (4_000 * token + activations), room // (4_095 * token + sampling))
    fp8 = min((room - 256) // (4_000 * token // 2 + activations), (room - 256) // (4_095 * token // 2 + sampling))
    assert (bf16, fp8) == (30, 53)
    llama = preset("llama-2-7b")
    assert max_batch(llama, Serving(l_in=4000, l_out=96, flash=True)) == bf16
    assert max_batch(llama, Serving(l_in=4000, l_out=96, flash=True, kv_dtype="fp8")) == fp8
