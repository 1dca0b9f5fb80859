"""Substituted expressions against the independent numeric reference (tests/reference.py)."""

from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

import reference as ref
from symbolic_cost import Projections, attention, conventions as conv, mlp
from symbolic_cost.cost import EXPRESSION_FIELDS
from symbolic_cost.ops import (Keys, attend, dropout, flash_attention, gelu, layer_norm, linear, logits,
                                  softmax)
from symbolic_cost.symbols import b, c, e, es, es_mask, f, h, l, m1, s1
from symbolic_cost.blocks.wiring import Run

CASES = {
    "default": (conv.DEFAULT, ref.Flags()),
    "lbnl-2024": (conv.get("lbnl-2024"), ref.LBNL),
    "2mnk": (conv.DEFAULT.but(matmul_flops="2mnk"), ref.Flags(two_mnk=True)),
}


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def configs(draw, seq_by_m1=False):
    heads = draw(st.integers(1, 8))
    head_dim = draw(st.integers(1, 3))
    tp = draw(st.sampled_from(divisors(heads)))
    sp = draw(st.sampled_from(divisors(tp)))
    return {c: draw(st.integers(1, 5)),
            b: draw(st.integers(1, 3)), l: (tp if seq_by_m1 else sp) * draw(st.integers(1, 3)),
            e: heads * head_dim, f: tp * draw(st.integers(1, 6)), h: heads, m1: tp, s1: sp,
            es: draw(st.sampled_from([1, 2, 4, Fraction(1, 2)])), es_mask: draw(st.sampled_from([1, 2]))}


def assert_fields(cost, expected: dict, where: str):
    for name in EXPRESSION_FIELDS:
        assert cost.__getattribute__(name) == expected[name], f"{where}: {name}"


def _primitives(cv):
    """Each primitive built symbolically, paired with its reference at values v."""
    return [
        (linear(b, l, e, f, bias=True, es=es, conventions=cv),
         lambda v, F: ref.linear(v[b], v[l], v[e], v[f], True, v[es], F)),
        (linear(b, l, e, f, bias=False, es=es, conventions=cv),
         lambda v, F: ref.linear(v[b], v[l], v[e], v[f], False, v[es], F)),
        (logits(b, l, e, h, es=es, conventions=cv),
         lambda v, F: ref.logits(v[b], v[l], v[e], v[h], v[es], F)),
        (attend(b, l, e, h, es=es, conventions=cv),
         lambda v, F: ref.attend(v[b], v[l], v[e], v[h], v[es], F)),
        (softmax(b, l, h, es=es, conventions=cv),
         lambda v, F: ref.softmax(v[b], v[l], v[h], v[es], F)),
        (dropout(b, l, f, es=es, es_mask=es_mask, conventions=cv),
         lambda v, F: ref.pointwise(v[b], v[l], v[f], v[es], F, v[es_mask])),
        (gelu(b, l, f, es=es, conventions=cv),
         lambda v, F: ref.pointwise(v[b], v[l], v[f], v[es], F)),
        (layer_norm(b, l, e, es=es, conventions=cv),
         lambda v, F: ref.layer_norm(v[b], v[l], v[e], v[es], F)),
        # rectangular scores: l queries against c keys (ring attention's blocks)
        (logits(b, l, e, h, l_kv=c, es=es, conventions=cv),
         lambda v, F: ref.logits(v[b], v[l], v[e], v[h], v[es], F, v[c])),
        (attend(b, l, e, h, l_kv=c, es=es, conventions=cv),
         lambda v, F: ref.attend(v[b], v[l], v[e], v[h], v[es], F, v[c])),
        (softmax(b, l, h, l_kv=c, es=es, conventions=cv),
         lambda v, F: ref.softmax(v[b], v[l], v[h], v[es], F, v[c])),
        (flash_attention(b, l, e, h, es=es, conventions=cv),
         lambda v, F: ref.flash(v[b], v[l], v[e], v[h], v[es], F)),
        (flash_attention(b, l, e, h, Keys(l_kv=c), es=es, conventions=cv),
         lambda v, F: ref.flash(v[b], v[l], v[e], v[h], v[es], F, v[c])),
    ]


PRIMITIVES = {name: _primitives(cv) for name, (cv, _) in CASES.items()}
BLOCKS = {name: (mlp(b, l, e, f, m1, s1, run=Run(es=es, es_mask=es_mask, conventions=cv)),
                 attention(b, l, e, h, m1, s1, projections=Projections(qkv_bias=False), run=Run(es=es, es_mask=es_mask,
                                                                                                conventions=cv)))
          for name, (cv, _) in CASES.items()}


@pytest.mark.parametrize("case", CASES)
@given(values=configs())
def test_primitives_equal_reference(case, values):
    flags = CASES[case][1]
    for symbolic, reference in PRIMITIVES[case]:
        expected = ref.fields_of(reference(values, flags), flags)
        assert_fields(symbolic.subs(values), expected, f"{case} {symbolic.name}")


def _comm_sums(cost_or_ref, pass_):
    """(reported bytes, ring bytes) of one pass, ignoring empty collectives."""
    if isinstance(cost_or_ref, dict):
        comms = [c for c in cost_or_ref["comms"] if c[0] == pass_]
        return sum(c[1] for c in comms), sum(c[2] for c in comms)
    comms = [c for c in cost_or_ref.collectives if c.pass_ == pass_]
    return sum(c.volume for c in comms), sum(c.ring_bytes for c in comms)


@pytest.mark.parametrize("case", CASES)
@given(data=st.data())
def test_blocks_equal_reference(case, data):
    flags = CASES[case][1]
    values = data.draw(configs(seq_by_m1=flags.seq_by_m1))
    symbolic_mlp, symbolic_attention = BLOCKS[case]
    v = values
    expected = {
        "mlp": ref.mlp(v[b], v[l], v[e], v[f], v[m1], v[s1], v[es], v[es_mask], flags),
        "attention": ref.attention(v[b], v[l], v[e], v[h], v[m1], v[s1], v[es], v[es_mask], flags,
                                   qkv_bias=False),
    }
    for block in (symbolic_mlp.subs(values), symbolic_attention.subs(values)):
        assert block.names == list(expected[block.name])
        for row in block:
            want = expected[block.name][row.name]
            assert_fields(row, want, f"{case} {block.name}.{row.name}")
            for pass_ in ("fwd", "bwd"):
                assert _comm_sums(row, pass_) == _comm_sums(want, pass_), f"{row.name} {pass_}"
