"""Our formulas against PyTorch's own accounting: FlopCounterMode, parameter numel, and
the tensors autograd saves.  Skipped without torch (CI installs torch==2.13.0, CPU)."""

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings, strategies as st  # noqa: E402
from sympy import simplify  # noqa: E402

from symbolic_cost import Heads, Projections, attention, conventions as conv, mlp  # noqa: E402
from symbolic_cost import symbols as S  # noqa: E402
from symbolic_cost.blocks import Residual, Run  # noqa: E402
from symbolic_cost.models import Architecture, Training, model_cost  # noqa: E402
from torch_reference import (BERT, GPT, MLP, Attention, count_flops,  # noqa: E402
                                      parameter_count, saved_bytes)

# PyTorch counts a product as 2mnk and no reduction adds of our collectives; fp32 (4 bytes);
# its CPU dropout keeps a float mask, so masks are 4 bytes too; eager silu(G) * U keeps G, U and act(G).
TORCH = conv.DEFAULT.but(matmul_flops="2mnk", reduction_flops=False, gated_activation="eager")
FP32 = Run(es=4, es_mask=4, conventions=TORCH)


def matrix_flops(rows, pass_):
    return sum(getattr(r, f"flops_{pass_}") for r in rows if r.engine == "matrix")


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def shapes(draw):
    heads = draw(st.integers(1, 4))
    m1 = draw(st.sampled_from(divisors(heads)))
    return dict(b=draw(st.integers(1, 2)), l=draw(st.integers(1, 6)), h=heads,
                q=draw(st.integers(1, 4)), m1=m1, f=m1 * draw(st.integers(1, 4)))


@settings(max_examples=25, deadline=None)
@given(s=shapes(), gated=st.booleans(), bias=st.booleans())
def test_mlp_shard_against_pytorch(s, gated, bias):
    b, l, e, f, m1 = s["b"], s["l"], s["h"] * s["q"], s["f"], s["m1"]
    torch.manual_seed(0)
    module = MLP(e, f, m1, gated=gated, norm="rms" if gated else "layer", p=0.0 if gated else 0.1, bias=bias)
    x = torch.randn(b, l, e, requires_grad=True)
    block = mlp(b, l, e, f, m1, 1, bias=bias, gated_act=gated,
                residual=Residual(norm="rms" if gated else "layer", dropouts=not gated), run=FP32)
    bias_adds = b * l * ((2 if gated else 1) * f // m1 + e) if bias else 0
    fwd, bwd = count_flops(module, x)
    # by design: PyTorch counts no bias adds, forward nor dB
    assert (fwd, bwd) == (matrix_flops(block, "fwd") - bias_adds, matrix_flops(block, "bwd") - bias_adds)
    assert parameter_count(module) * 4 == block.total("weights")
    # by design: PyTorch's composite RMSNorm also keeps x * rstd
    extra = b * l * e * 4 if gated else 0
    assert saved_bytes(module, x) == block.total("act_buffer") + extra


@settings(max_examples=25, deadline=None)
@given(s=shapes(), grouped=st.booleans(), bias=st.booleans())
def test_attention_shard_against_pytorch(s, grouped, bias):
    b, l, h, q, m1 = s["b"], s["l"], s["h"], s["q"], s["m1"]
    kv = m1 if grouped else h                     # fewest key/value heads the shard allows
    e = h * q
    torch.manual_seed(0)
    p = 0.0 if grouped else 0.1
    module = Attention(e, h, m1, kv_heads=kv, p=p, bias=bias)
    x = torch.randn(b, l, e, requires_grad=True)
    block = attention(b, l, e, Heads(h, kv_heads=kv), m1, 1, projections=Projections(bias, bias),
                      residual=Residual(dropouts=not grouped), run=FP32)
    local_h, local_kv = h // m1, kv // m1
    bias_adds = b * l * ((local_h + 2 * local_kv) * q + e) if bias else 0
    group_sums = 2 * b * (local_h - local_kv) * l * q   # dK, dV summed over query groups: elementwise
    fwd, bwd = count_flops(module, x)
    assert fwd == matrix_flops(block, "fwd") - bias_adds
    assert bwd == matrix_flops(block, "bwd") - bias_adds - group_sums
    assert parameter_count(module) * 4 == block.total("weights")
    # by design: an unfused grouped-query matmul materialises K and V for all local heads
    expanded = 2 * b * (local_h - local_kv) * l * q * 4
    assert saved_bytes(module, x) == block.total("act_buffer") + expanded


def _rows(cost):
    depth = int(cost.architecture.n_layers)
    return list(cost.embedding) + list(cost.layer) * depth + list(cost.head)


@settings(max_examples=10, deadline=None)
@given(layers=st.integers(1, 2), vocab=st.integers(2, 12), b=st.integers(1, 2), l=st.integers(1, 6),
       h=st.integers(1, 3), q=st.integers(1, 3))
def test_small_gpt_against_pytorch(layers, vocab, b, l, h, q):
    e, f, positions = h * q, 4 * h * q, 8
    torch.manual_seed(0)
    module = GPT(vocab, positions, layers, e, h, f)
    ids = torch.randint(0, vocab, (b, l))
    cost = model_cost(Architecture("gpt", layers, e, h, f, vocab, positions=positions),
                      Training(b=b, l=l, precision="fp32", mask_bytes=4), TORCH)
    rows = _rows(cost)
    bias_adds = layers * b * l * (3 * e + e + f + e)
    fwd, bwd = count_flops(module, ids)
    assert (fwd, bwd) == (matrix_flops(rows, "fwd") - bias_adds, matrix_flops(rows, "bwd") - bias_adds)
    assert parameter_count(module) == cost.parameters
    # by design: int64 token ids and position indices, and the loss's scalar weight
    assert saved_bytes(module, ids) == sum(r.act_buffer for r in rows) + 8 * b * l + 8 * l + 4


@settings(max_examples=10, deadline=None)
@given(layers=st.integers(1, 2), b=st.integers(1, 2), l=st.integers(1, 6), h=st.integers(1, 3),
       q=st.integers(1, 3))
def test_small_bert_against_pytorch(layers, b, l, h, q):
    e, f, vocab, positions = h * q, 4 * h * q, 13, 8
    torch.manual_seed(0)
    module = BERT(vocab, positions, 2, layers, e, h, f)
    ids = torch.randint(0, vocab, (b, l))
    arch = Architecture("bert", layers, e, h, f, vocab, positions=positions, token_types=2, causal=False,
                        embedding_norm=True, final_norm=False, lm_head=False, pooler=True, tied=False)
    cost = model_cost(arch, Training(b=b, l=l, precision="fp32", mask_bytes=4), TORCH)
    rows = _rows(cost)
    bias_adds = layers * b * l * (3 * e + e + f + e) + b * e          # and the pooler's
    fwd, bwd = count_flops(module, ids)
    assert (fwd, bwd) == (matrix_flops(rows, "fwd") - bias_adds, matrix_flops(rows, "bwd") - bias_adds)
    assert parameter_count(module) == cost.parameters
    # by design: three int64 index tensors, and the pooler's first-token slice pins the
    # whole last hidden state (b (l - 1) e more than the b e it reads)
    ids_bytes = 8 * b * l + 8 * l + 8 * b * l
    assert saved_bytes(module, ids) == sum(r.act_buffer for r in rows) + ids_bytes + b * (l - 1) * e * 4


def _symbolic(module, b, l, e):
    """PyTorch's FLOPs with ``b`` and ``l`` symbolic (FakeTensorMode + ShapeEnv), as SymPy."""
    fake = pytest.importorskip("torch._subclasses.fake_tensor")
    shapes_mod = pytest.importorskip("torch.fx.experimental.symbolic_shapes")
    from torch.utils.flop_counter import FlopCounterMode
    mode = fake.FakeTensorMode(shape_env=shapes_mod.ShapeEnv())
    dynamic = shapes_mod.DimDynamic
    context = shapes_mod.StatelessSymbolicContext(dynamic_sizes=[dynamic.DYNAMIC, dynamic.DYNAMIC, dynamic.STATIC])
    x = mode.from_tensor(torch.randn(b, l, e), symbolic_context=context)
    with mode:
        built = module()
        with FlopCounterMode(display=False) as counter:
            built(x)
    total = counter.get_total_flops()
    names = {x.shape[0].node.expr: S.b, x.shape[1].node.expr: S.l}
    return total.node.expr.subs(names) if hasattr(total, "node") else total


@pytest.mark.parametrize("which", ["mlp", "attention"])
def test_symbolic_flops_equal_ours_as_expressions(which):
    e, h, f = 8, 2, 32
    try:
        if which == "mlp":
            theirs = _symbolic(lambda: MLP(e, f, p=0.0, bias=False), 3, 5, e)
            ours = matrix_flops(mlp(S.b, S.l, e, f, bias=False, run=FP32), "fwd")
        else:
            theirs = _symbolic(lambda: Attention(e, h, p=0.0, bias=False), 3, 5, e)
            ours = matrix_flops(attention(S.b, S.l, e, h, projections=Projections(False, False), run=FP32), "fwd")
    except (RuntimeError, NotImplementedError, AttributeError) as error:   # pragma: no cover
        pytest.skip(f"PyTorch could not count symbolically here: {error}")
    assert simplify(theirs - ours) == 0
