"""Structural invariants of the blocks, checked symbolically."""

import pytest
from sympy import expand, simplify

from symbolic_cost import Projections, attention, conventions as conv, mlp
from symbolic_cost.symbols import b, e, f, h, l, m1, s1
from symbolic_cost.blocks.wiring import Run

# traffic (mem_fwd, mem_bwd) also reads weights, so it is affine in b, not linear
SCALING = ["act_in", "act_in_other", "act_out", "act_buffer", "act_grads"]
TP_ROWS = {"mlp": ["fc1", "act", "fc2"],
           "attention": ["qkv_proj", "logits", "softmax", "dropout_softmax", "attend", "v_proj"]}


def blocks(**kw):
    return [mlp(b, l, e, f, m1, s1, run=Run(**kw)), attention(b, l, e, h, m1, s1, run=Run(**kw))]


def _batch_defect(expr):
    """f(2b) - 2 f(b): zero for a quantity linear in b."""
    return expand(expr.subs(b, 2 * b) - 2 * expr)


@pytest.mark.parametrize("preset", ["default", "lbnl-2024"])
def test_activations_and_volumes_are_linear_in_batch(preset):
    for block in blocks(conventions=preset):
        for row in block:
            for name in SCALING:
                assert _batch_defect(getattr(row, name)) == 0, (row.name, name)
            for c in row.collectives:
                assert simplify(c.volume.subs(b, 2 * b) - 2 * c.volume) == 0, row.name


def test_flops_are_linear_in_batch_under_2mnk():
    for block in blocks(conventions=conv.DEFAULT.but(matmul_flops="2mnk")):
        for row in block:
            assert _batch_defect(row.flops_fwd) == 0 and _batch_defect(row.flops_bwd) == 0, row.name


def test_exact_flops_are_affine_in_batch_by_the_weight_gradient():
    """dW = X^T dY sums b*l products per weight with b*l - 1 adds, so doubling b
    adds one more add per weight element: the defect is the weight matrix size."""
    weight_elements = {"fc1": e * f / m1, "fc2": f * e / m1, "qkv_proj": 3 * e * e / m1,
                       "v_proj": e * e / m1}
    for block in blocks():
        for row in block:
            assert _batch_defect(row.flops_fwd) == 0, row.name
            assert simplify(_batch_defect(row.flops_bwd) - weight_elements.get(row.name, 0)) == 0


def test_no_collectives_and_no_reduction_flops_without_parallelism():
    plain = conv.DEFAULT.but(reduction_flops=False)
    for with_red, without in zip(blocks(), blocks(conventions=plain)):
        one = with_red.subs({m1: 1, s1: 1})
        built = (mlp(b, l, e, f, 1, 1) if with_red.name == "mlp" else attention(b, l, e, h, 1, 1))
        assert built.collectives == []
        for row, other in zip(built, without.subs({m1: 1, s1: 1})):
            assert row.flops_fwd == other.flops_fwd and row.flops_bwd == other.flops_bwd
        assert all(simplify(c.volume) == 0 for c in one.collectives)


@pytest.mark.parametrize("sp", [1, "m1"])
def test_tensor_parallel_shards_add_up_to_the_unsharded_flops(sp):
    """m1 devices' FLOPs (matmuls plus the adds of their reductions) equal one device's,
    under the exact count; without biases (a row-parallel bias is added on every device)."""
    s = m1 if sp == "m1" else 1
    for name, build in (("mlp", lambda m, s_: mlp(b, l, e, f, m, s_, bias=False)),
                        ("attention", lambda m, s_: attention(b, l, e, h, m, s_,
                                                              projections=Projections(False, False)))):
        sharded, whole = build(m1, s), build(1, 1)
        for pass_ in ("flops_fwd", "flops_bwd"):
            total = sum(getattr(sharded[r], pass_) for r in TP_ROWS[name])
            single = sum(getattr(whole[r], pass_) for r in TP_ROWS[name])
            assert simplify(m1 * total - single) == 0, (name, pass_)


def test_row_parallel_bias_is_added_on_every_device():
    """Hand count: with biases, m1 devices add the fc2 bias m1 times: (m1 - 1) b l e extra."""
    sharded, whole = mlp(b, l, e, f, m1, 1), mlp(b, l, e, f, 1, 1)
    extra = m1 * sharded["fc2"].flops_fwd - whole["fc2"].flops_fwd
    assert simplify(extra - (m1 - 1) * b * l * e) == 0


def test_two_mnk_does_not_add_up_but_exact_does():
    """Under 2mnk a row-parallel product already counts k adds per output, so its
    shards plus the reduction over-count by (m1 - 1) b l e; the exact count does not."""
    two = conv.DEFAULT.but(matmul_flops="2mnk")
    sharded = mlp(b, l, e, f, m1, 1, bias=False, run=Run(conventions=two))["fc2"].flops_fwd
    whole = mlp(b, l, e, f, 1, 1, bias=False, run=Run(conventions=two))["fc2"].flops_fwd
    assert simplify(m1 * sharded - whole - (m1 - 1) * b * l * e) == 0


def test_sequence_parallel_shards_cover_the_sequence():
    """Norm and dropout rows on s1 devices together cover the unsharded tensor once."""
    sharded, whole = mlp(b, l, e, f, m1, s1), mlp(b, l, e, f, 1, 1)
    for row in ("layer_norm_2", "dpr2"):
        assert simplify(s1 * sharded[row].act_in - whole[row].act_in) == 0
