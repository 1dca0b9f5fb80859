"""The backward pass split into its activation-gradient and weight-gradient FLOPs
(``Cost.flops_agrad`` and ``Cost.flops_wgrad``, issue 26).

Every expected value here is counted by hand from the operation's arithmetic, read from
PyTorch's ``FlopCounterMode`` with gradients asked for only of the input or only of the
weights, or is a structural fact (the parts are not negative, they sum to the whole, an
operation without parameters has no weight gradient); none is read back from the library.
"""

from dataclasses import replace
from functools import cache

import pytest
from hypothesis import given, settings, strategies as st
from sympy import Symbol, expand, simplify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Feedforward, Heads, Projections, attention, mlp, transformer_layer
from symbolic_cost.blocks.latent_attention import Latent, latent_attention
from symbolic_cost.blocks.moe import MoE, moe
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.models.lora import LoRA, adapter, frozen
from symbolic_cost.ops import (Keys, add, attend, attention_core, cross_entropy, dropout, embedding, flash_attention,
                               gated, gelu, layer_norm, linear, logits, rms_norm, rotary, softmax)
from symbolic_cost.ops.routing import combine, grouped_linear, permute, router_probabilities, topk_weights
from symbolic_cost.ops.scores import attention_sinks, score_bias, softcap
from symbolic_cost.parallel.grid import make_grid
from symbolic_cost.parallel.grid_blocks import grid_layer, grid_norm
from symbolic_cost.parallel.grid_linear import grid_linear
from symbolic_cost.symbols import b, e, f, h, l, m1, s1, v
from symbolic_cost.blocks.wiring import Experts, Residual, Run, Wiring

q, t, E = (Symbol(name, positive=True, integer=True) for name in ("q", "t", "E"))
TWO = conv.DEFAULT.but(matmul_flops="2mnk")          # PyTorch's count of a product
GRIDS = {"2d": make_grid("2d", m1=2, m2=2), "2.5d": make_grid("2.5d", mq=2, md=2), "3d": make_grid("3d", mq=2)}


# ---------------------------------------------------------------- the parts of every operation

@cache
def primitives() -> dict:
    """Every primitive, symbolic in its sizes (``t`` tokens, ``E`` experts, ``q`` a head)."""
    core = attention_core(b, l, q, h, Keys(score_ops=(score_bias(b, l, h * l, learned=True),)))
    rows = {
        "linear": linear(b, l, e, f), "linear no bias": linear(b, l, e, f, bias=False),
        "logits": logits(b, l, q, h), "logits gqa": logits(b, l, q, h, kv_heads=1, causal=True),
        "attend": attend(b, l, q, h), "attend cross": attend(b, l, q, h, l_kv=t),
        "flash": flash_attention(b, l, q, h, Keys(score_ops=(score_bias(b, l, h * l, learned=True),))),
        "softmax": softmax(b, l, h), "dropout": dropout(b, l, e), "gelu": gelu(b, l, f), "gated": gated(b, l, f),
        "rotary": rotary(b, l, h, q), "add": add(b, l, e),
        "layer_norm": layer_norm(b, l, e), "layer_norm no bias": layer_norm(b, l, e, bias=False),
        "layer_norm no gamma": layer_norm(b, l, e, weight=False),
        "layer_norm no affine": layer_norm(b, l, e, weight=False, bias=False),
        "rms_norm": rms_norm(b, l, e), "rms_norm no gain": rms_norm(b, l, e, weight=False),
        "embedding": embedding(b, l, v, e), "cross_entropy": cross_entropy(b, l, v),
        "alibi": score_bias(b, l, h * l), "relative bias": score_bias(b, l, h * l, learned=True),
        "softcap": softcap(b, l, v), "sinks": attention_sinks(b, l, h),
        "router softmax": router_probabilities(t, E), "router sigmoid": router_probabilities(t, E, kind="sigmoid"),
        "router sparsemixer": router_probabilities(t, E, kind="sparsemixer", top_k=2),
        "topk": topk_weights(t, 2, normalise=True, scale=True), "permute": permute(t, 2, e),
        "combine": combine(t, 2, e), "grouped_linear": grouped_linear(t, e, f, E, bias=True),
        "adapter": adapter("fc1", b, l, [(e, f)], 8, 2, conv.DEFAULT),
        "adapter row-parallel": adapter("fc2", b, l, [(f, e)], 8, 2, conv.DEFAULT, m1=2, s1=2),
        "frozen linear": frozen(linear(b, l, e, f)), "frozen embedding": frozen(embedding(b, l, v, e, name="word_embeddings")),
        "frozen norm": frozen(layer_norm(b, l, e)),
    }
    rows.update({f"core {r.name}": r for r in core})
    for kind, grid in GRIDS.items():
        rows[f"grid_linear {kind}"] = grid_linear(grid, 8 * t, 8 * e, 8 * f)
        rows[f"grid_linear {kind} flipped"] = grid_linear(grid, 8 * t, 8 * f, 8 * e, bias=False, flip=True)
        rows[f"grid_norm {kind}"] = grid_norm(grid, 8 * b, l, 8 * e)
    return rows


def _values(draw, names) -> dict:
    """Random positive sizes for ``names`` (symbols); the grid rows take 8 times theirs, whole blocks."""
    return {symbol: draw(st.integers(1, 96)) for symbol in names}


def assert_parts(cost, where: str, values=None) -> None:
    """A Cost's two backward parts, at ``values`` when given: not negative, summing to the backward."""
    agrad, wgrad, bwd = ((x if values is None else x.subs(values))
                         for x in (cost.flops_agrad, cost.flops_wgrad, cost.flops_bwd))
    assert wgrad.is_number and bwd.is_number, (where, wgrad, bwd)
    assert agrad + wgrad == bwd, where
    assert wgrad >= 0 and agrad >= 0, (where, agrad, wgrad)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_primitive_splits_its_backward(data):
    values = _values(data.draw, (b, l, e, f, h, q, t, E, v))
    for name, cost in primitives().items():
        assert_parts(cost, name, values)


def test_subs_plus_and_copies_carry_the_weight_gradient():
    """``Cost.subs`` substitutes ``flops_wgrad``, ``plus`` adds to it, ``Block.subs`` and
    ``Block.total`` carry it (``dW`` of ``(e, b l) x (b l, f)``: ``e f (2 b l - 1)``)."""
    cost = linear(b, l, e, f, bias=False).subs({b: 2, l: 3, e: 4})
    assert expand(cost.flops_wgrad - 4 * f * 11) == 0
    assert expand(cost.plus(flops_bwd=1, flops_wgrad=1).flops_wgrad - 4 * f * 11 - 1) == 0
    assert cost.plus(flops_bwd=1).flops_agrad - cost.flops_agrad == 1
    block = mlp(b, l, e, f, bias=False, residual=Residual(dropouts=False)).subs({b: 1, l: 2, e: 3, f: 4})
    # fc1 (3 -> 4) and fc2 (4 -> 3) on 2 tokens: 12 weights each, 2 x 2 - 1 = 3 FLOPs a weight;
    # the layer norm's gamma and beta sums: 2 + 2 per element of the 6 (test_layer_norm_by_hand)
    assert block.total("flops_wgrad") == 2 * 12 * 3 + 4 * 6


def test_operations_without_parameters_have_no_weight_gradient():
    """Only what holds parameters forms their gradients: score products, pointwise
    operations, the routing of tokens and the loss have ``flops_wgrad = 0``."""
    free = ["logits", "logits gqa", "attend", "attend cross", "softmax", "dropout", "gelu", "gated", "rotary", "add",
            "layer_norm no affine", "rms_norm no gain", "cross_entropy", "alibi", "softcap", "router softmax",
            "router sigmoid", "router sparsemixer", "topk", "permute", "combine", "frozen linear",
            "frozen embedding", "core logits", "core softmax", "core dropout_softmax", "core attend"]
    for name in free:
        cost = primitives()[name]
        assert cost.weights == 0 or name.startswith("frozen"), name
        assert cost.flops_wgrad == 0, name


def _block_values(draw) -> dict:
    """Sizes a tensor-parallel block accepts: ``m1 | h``, ``m1 | f``, ``s1 | m1``, ``m1 | l``."""
    tp = draw(st.sampled_from([1, 2, 4]))
    heads = tp * draw(st.integers(1, 3))
    return {m1: tp, s1: draw(st.sampled_from([1, tp])), h: heads, e: heads * draw(st.integers(1, 8)),
            f: tp * draw(st.integers(1, 32)), l: tp * draw(st.integers(1, 16)), b: draw(st.integers(1, 4))}


@cache
def blocks() -> dict:
    spec = MoE(4, 2, f)
    return {
        "mlp": mlp(b, l, e, f, m1, s1), "mlp gated": mlp(b, l, e, f, m1, s1, gated_act=True,
                                                         residual=Residual(norm="rms")),
        "attention": attention(b, l, e, h, m1, s1), "attention flash": attention(b, l, e, h, m1, s1,
                                                                                 run=Run(flash=True)),
        "layer": transformer_layer(b, l, e, f, h, m1, s1),
        "layer rotary gqa": transformer_layer(b, l, e, f, Heads(h, kv_heads=m1, rotary=True), m1, s1,
                                              ffn=Feedforward(gated=True), projections=Projections(out_bias=False),
                                              wiring=Wiring(norm="rms")),
        "moe": moe(b, l, e, spec, m1, m1),
        "moe ep": moe(b, l, e, MoE(4, 2, f, shared_f=f), m1, m1, experts=Experts(ep=2, etp=1)),
        "latent attention": latent_attention(b, l, e, h, Latent(kv_rank=e, rope_dim=4, nope_dim=8, v_dim=8, q_rank=e),
                                             m1, s1),
    }


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_every_block_splits_its_backward(data):
    values = _block_values(data.draw)          # the MoE blocks are built with s1 = m1
    for name, block in blocks().items():
        for row in block:
            assert_parts(row, f"{name}: {row.name}", values)
        total = block.total("flops_agrad") + block.total("flops_wgrad") - block.total("flops_bwd")
        assert expand(total) == 0, name


@pytest.mark.parametrize("kind", sorted(GRIDS))
def test_grid_layer_splits_its_backward(kind):
    layer = grid_layer(8, 16, 64, 128, 8, GRIDS[kind])
    for row in layer:
        assert_parts(row, row.name)


@st.composite
def trainings(draw):
    return Training(b=draw(st.integers(1, 2)), l=draw(st.sampled_from([16, 32])), m1=draw(st.sampled_from([1, 2])),
                    s1=1, d=draw(st.integers(1, 2)), p=draw(st.sampled_from([1, 2])),
                    micro_batches=draw(st.sampled_from([2, 4])),
                    recompute=draw(st.sampled_from(["none", "selective", "full"])),
                    lora=draw(st.sampled_from([None, LoRA(4, ("q", "v"))])))


MOE = Architecture("toy-moe", 2, 64, 4, 128, 256, mlp="swiglu", norm="rms", rotary=True, tied=False, qkv_bias=False,
                   bias=False, dropouts=False, moe=MoE(4, 2, 32))


@settings(max_examples=15, deadline=None)
@given(training=trainings(), name=st.sampled_from(["gpt2", "llama-2-7b", "bert-base-uncased", "moe"]))
def test_a_model_splits_its_backward(training, name):
    if name == "moe" and training.m1 != 1:
        training = replace(training, s1=training.m1)
    arch = MOE if name == "moe" else preset(name)
    cost = model_cost(arch, training)
    assert cost.model_flops_agrad + cost.model_flops_wgrad == cost.model_flops_bwd
    assert cost.model_flops_wgrad > 0 and cost.model_flops_agrad > 0
    assert cost.flops_wgrad > 0 and cost.flops_agrad > 0
    if training.p == 1:         # one rank: the busiest for every field
        assert cost.flops_agrad + cost.flops_wgrad == cost.flops_bwd


def test_lora_keeps_the_adapters_weight_gradients_and_the_norms():
    """Under LoRA the frozen base's products form no weight gradient: what is left is the
    adapters' ``dA`` and ``dB`` and the frozen norms' ``gamma``/``beta`` sums, which the
    library keeps in the count (``models.lora``)."""
    cost = model_cost(preset("gpt2"), Training(b=1, l=16, lora=LoRA(4, ("q", "v"))))
    for blk, _ in cost.blocks:
        for row in blk:
            if row.engine == "matrix" and not row.name.endswith(".lora"):
                assert row.flops_wgrad == 0, row.name


# ---------------------------------------------------------------- hand counts

def test_linear_by_hand():
    """``X (2, 3, 4) -> Y (2, 3, 5)``, exact products: ``dX = dY W^T`` is ``(6, 5) x (5, 4)``:
    24 outputs of 5 multiplies and 4 adds, 216; ``dW = X^T dY`` is ``(4, 6) x (6, 5)``: 20
    outputs of 6 multiplies and 5 adds, 220; ``dB`` sums 6 rows of 5 into the bias: 30 adds."""
    plain, biased = linear(2, 3, 4, 5, bias=False), linear(2, 3, 4, 5)
    assert (plain.flops_agrad, plain.flops_wgrad) == (216, 220)
    assert (biased.flops_agrad, biased.flops_wgrad) == (216, 250)


def test_exact_weight_gradient_is_affine_in_batch_by_the_weights():
    """``dW = X^T dY`` sums ``b l`` products per weight with ``b l - 1`` adds, so doubling ``b``
    adds one add per weight element; ``dX`` sums over the width, whatever the batch."""
    cost = linear(b, l, e, f, bias=False)
    assert expand(cost.flops_agrad.subs(b, 2 * b) - 2 * cost.flops_agrad) == 0
    assert expand(cost.flops_wgrad.subs(b, 2 * b) - 2 * cost.flops_wgrad) == e * f


def test_attention_scores_have_only_activation_gradients_by_hand():
    """``b = h = 1``, ``l = 4``, ``q = 2``, exact products: ``dQ = dA K``, ``(4, 4) x (4, 2)``,
    8 outputs of 7: 56; ``dK = dA^T Q`` the same: 112; ``dA = dY V^T``, ``(4, 2) x (2, 4)``,
    16 outputs of 3: 48; ``dV = A^T dY`` 56: 104.  No weights anywhere."""
    assert (logits(1, 4, 2, 1).flops_agrad, logits(1, 4, 2, 1).flops_wgrad) == (112, 0)
    assert (attend(1, 4, 2, 1).flops_agrad, attend(1, 4, 2, 1).flops_wgrad) == (104, 0)


def test_rms_norm_by_hand():
    """``X (2, 3, 4)``: ``n = 24`` elements, ``r = 6`` rows.  ``dg = sum_t dY x_hat``: a multiply
    and an add into the gain's accumulator per element, 48.  ``dX = rstd (g dY - x_hat
    mean(g dY x_hat))``: ``g dY`` 24, times ``x_hat`` 24, row sums 6 x 3 = 18, ``x_hat`` times
    the mean 24, the subtract 24, times ``rstd`` 24: 138 (without a gain, 114)."""
    assert (rms_norm(2, 3, 4).flops_wgrad, rms_norm(2, 3, 4).flops_agrad) == (48, 138)
    assert (rms_norm(2, 3, 4, weight=False).flops_wgrad, rms_norm(2, 3, 4, weight=False).flops_agrad) == (0, 114)


def test_layer_norm_by_hand():
    """``X (2, 3, 4)``, ``n = 24``.  ``dgamma = sum_t dY x_hat``: a multiply and an add per
    element, 48.  ``beta`` does not enter ``dX``: every FLOP its gradient costs is weight
    gradient, so adding ``beta`` moves the backward and its weight-gradient part alike, and
    a norm without parameters forms no weight gradient."""
    gamma, both, none = layer_norm(2, 3, 4, bias=False), layer_norm(2, 3, 4), layer_norm(2, 3, 4, weight=False, bias=False)
    assert gamma.flops_wgrad == 48
    assert none.flops_wgrad == 0
    assert both.flops_wgrad - gamma.flops_wgrad == both.flops_bwd - gamma.flops_bwd
    assert both.flops_agrad == gamma.flops_agrad
    # gamma's multiply inside dX (g dY, 24) is activation gradient: dX without gamma has 24 fewer
    assert gamma.flops_agrad - none.flops_agrad == 24


def test_embedding_by_hand():
    """``ids (2, 3)`` into a ``(10, 4)`` table: backward scatter-adds the 24 values of ``dY``
    into the table's gradient, all weight gradient; the integer ids take no gradient."""
    cost = embedding(2, 3, 10, 4)
    assert (cost.flops_wgrad, cost.flops_agrad) == (24, 0)


def test_grid_linear_by_hand():
    """SUMMA on a 2 x 2 grid, ``X (8, 8)``, ``W (8, 8)``, a bias: each device holds ``(4, 4)``
    blocks, panels ``w = 4``, two steps.  ``dX``: ``(4, 4) x (4, 8)`` summed over the panels, 32
    outputs of 7: 224, and its panels reduced along the row (2 steps x 1/2 x 16): 16.  ``dW``:
    ``(8, 4) x (4, 4)``, 32 outputs of 7: 224; ``dB``: 16 adds; the ``dW`` panels reduced along
    the column (2 x 1/2 x 16): 16; the bias gradient allreduced along the rows (1/2 x 4): 2."""
    cost = grid_linear(GRIDS["2d"], 8, 8, 8)
    assert (cost.flops_agrad, cost.flops_wgrad) == (240, 258)


def test_lora_adapter_by_hand():
    """One adapter, rank 2, on ``(3, 4) -> (3, 5)`` (``t = 3`` tokens), exact products: ``dB =
    Z^T (s dY)``, ``(2, 3) x (3, 5)``: 10 x 5 = 50; ``dA = X^T dZ``, ``(4, 3) x (3, 2)``: 8 x 5 = 40,
    weight gradient 90.  ``dZ = (s dY) B^T``, ``(3, 5) x (5, 2)``: 6 x 9 = 54; ``dX += dZ A^T``,
    ``(3, 2) x (2, 4)``: 12 x 3 = 36 and 12 adds; ``s dY``: 15: activation gradient 117."""
    cost = adapter("fc1", 1, 3, [(4, 5)], 2, 2, conv.DEFAULT)
    assert (cost.flops_wgrad, cost.flops_agrad) == (90, 117)


# ---------------------------------------------------------------- PyTorch's own counter

def _backward_flops(torch, module, x):
    """``FlopCounterMode``'s count of one backward pass (it counts products as ``2mnk``)."""
    from torch.utils.flop_counter import FlopCounterMode
    out = module(x)
    with FlopCounterMode(display=False) as counter:
        out.sum().backward()
    return counter.get_total_flops()


def _inputs_only(torch, module, shape):
    """Backward FLOPs with gradients asked of the input alone (the weights frozen)."""
    module.requires_grad_(False)
    return _backward_flops(torch, module, torch.randn(*shape, requires_grad=True))


def _weights_only(torch, module, shape):
    """Backward FLOPs with gradients asked of the weights alone (the input a constant)."""
    module.requires_grad_(True)
    return _backward_flops(torch, module, torch.randn(*shape))


sizes = st.integers(1, 6)


@settings(max_examples=20, deadline=None)
@given(b_=sizes, l_=sizes, e_=sizes, f_=sizes, bias=st.booleans())
def test_linear_against_pytorch(b_, l_, e_, f_, bias):
    """Only ``dX`` runs when only the input wants a gradient, only ``dW`` when only the weight
    does.  PyTorch counts no bias adds (``dB`` is a sum, not a product)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = torch.nn.Linear(e_, f_, bias=bias)
    cost = linear(b_, l_, e_, f_, bias=bias, conventions=TWO)
    assert _inputs_only(torch, module, (b_, l_, e_)) == cost.flops_agrad
    assert _weights_only(torch, module, (b_, l_, e_)) == cost.flops_wgrad - (b_ * l_ * f_ if bias else 0)


@settings(max_examples=15, deadline=None)
@given(b_=sizes, l_=sizes, e_=sizes, f_=sizes)
def test_mlp_against_pytorch(b_, l_, e_, f_):
    """``fc2(gelu(fc1(x)))``.  Input only: both ``dX`` products.  Weights only: both ``dW``
    products and ``fc2``'s ``dX`` (the gradient reaches ``fc1``'s weight through it), not
    ``fc1``'s ``dX``."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    nn = torch.nn
    module = nn.Sequential(nn.Linear(e_, f_, bias=False), nn.GELU(), nn.Linear(f_, e_, bias=False))
    block = mlp(b_, l_, e_, f_, bias=False, residual=Residual(dropouts=False), run=Run(conventions=TWO))
    fc1, fc2 = block["fc1"], block["fc2"]
    assert _inputs_only(torch, module, (b_, l_, e_)) == fc1.flops_agrad + fc2.flops_agrad
    assert _weights_only(torch, module, (b_, l_, e_)) == fc1.flops_wgrad + fc2.flops_wgrad + fc2.flops_agrad


@settings(max_examples=15, deadline=None)
@given(b_=st.integers(1, 2), l_=sizes, heads=st.integers(1, 3), head=st.integers(1, 4))
def test_attention_against_pytorch(b_, l_, heads, head):
    """``out(softmax(Q K^T) V)`` with ``Q, K, V = qkv(norm(x))``.  Input only: every ``dX`` and
    every score product's backward, the library's activation gradients.  Weights only: the
    norm's ``gamma`` wants a gradient, so every activation gradient runs as well as ``dW`` of
    ``qkv`` and ``out``: the difference is the weight-gradient part, the score products none."""
    torch = pytest.importorskip("torch")
    from torch_reference import Attention
    torch.manual_seed(0)
    e_ = heads * head
    module = Attention(e_, heads, p=0.0, bias=False)
    block = attention(b_, l_, e_, heads, projections=Projections(False, False), residual=Residual(dropouts=False),
                      run=Run(conventions=TWO))
    matrix = [row for row in block if row.engine == "matrix"]
    inputs = _inputs_only(torch, module, (b_, l_, e_))
    weights = _weights_only(torch, module, (b_, l_, e_))
    assert inputs == sum(row.flops_agrad for row in matrix)
    assert weights - inputs == sum(row.flops_wgrad for row in matrix)
    assert sum(block[name].flops_wgrad for name in ("logits", "attend")) == 0


def test_symbolic_split_is_exact():
    """The parts are exact expressions (no floats), also after substitution."""
    cost = layer_norm(b, l, e).subs({b: 2})
    assert simplify(cost.flops_agrad + cost.flops_wgrad - cost.flops_bwd) == 0
    assert not cost.flops_wgrad.atoms(float)
