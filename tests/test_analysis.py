"""Scaling analysis against hand derivations, and optimum against brute force."""

import pytest
from hypothesis import given, strategies as st
from sympy import Max, Rational, simplify, sqrt

from symbolic_cost import analysis, attention, mlp, transformer_layer
from symbolic_cost.timing.hardware import step_time
from symbolic_cost.symbols import b, e, h, l, m1
from symbolic_cost.blocks.wiring import Run


def test_layer_leading_terms_by_hand():
    # hand count (f = 4e, exact convention): attention 8ble^2 + 4bl^2e + 3bhl^2 + 9ble - bhl,
    # MLP bl(4ef + 10e + f) = 16ble^2 + 14ble (norm 9, fc1 2ef + f, GELU f, fc2 2ef + e, dropout e)
    layer = attention(b, l, e, h).total("flops_fwd") + mlp(b, l, e, 4 * e).total("flops_fwd")
    lead, rest = analysis.leading_terms(layer, [e, l], with_remainder=True)
    assert simplify(lead - (24*b*l*e**2 + 4*b*l**2*e)) == 0
    assert simplify(rest - (3*b*h*l**2 + 23*b*l*e - b*h*l)) == 0
    assert simplify(analysis.leading_terms(layer, l) - (4*b*e*l**2 + 3*b*h*l**2)) == 0


def test_leading_terms_of_a_ratio():
    assert analysis.leading_terms((2*e**2 + e) / (e + 3), e) == 2 * e


def test_attention_mlp_crossover_by_hand():
    # equate the hand counts above: l (4e + 3h) = 8e^2 + 5e + h
    root = analysis.crossover(attention(b, l, e, h).total("flops_fwd"),
                              mlp(b, l, e, 4 * e).total("flops_fwd"), l)
    assert simplify(root - (8*e**2 + 5*e + h) / (4*e + 3*h)) == 0
    assert analysis.crossover(4*l**2*e, 24*l*e**2, l) == 6 * e


def test_crossover_with_numbers_is_a_real_not_dropped_for_integrality():
    assert analysis.crossover(3 * l, 10, l) == Rational(10, 3)


def test_crossover_errors_name_the_roots():
    with pytest.raises(ValueError, match="expected one positive crossover in l; found none"):
        analysis.crossover(l + 1, l + 2, l)


def test_elasticities_by_hand():
    # materialised attention keeps 5 b h l^2 + (13 e + 4) b l bytes (2-byte values, byte masks);
    # flash keeps only l-linear tensors
    kept = attention(b, l, e, h).total("act_buffer")
    assert simplify(kept - b*l*(13*e + 5*h*l + 4)) == 0
    assert simplify(analysis.elasticity(kept, l) - (13*e + 10*h*l + 4) / (13*e + 5*h*l + 4)) == 0
    assert analysis.elasticity(attention(b, l, e, h, run=Run(flash=True)).total("act_buffer"), l) == 1
    assert analysis.limit(analysis.elasticity(kept, l), l) == 2


def test_attention_share_limits():
    layer = [attention(b, l, e, h).total("flops_fwd"), mlp(b, l, e, 4 * e).total("flops_fwd")]
    part = analysis.share(layer[0], sum(layer))
    assert analysis.limit(part, l) == 1
    assert analysis.limit(part, e) == Rational(1, 3)   # 8e^2 of 24e^2


def test_smooth_at_picks_the_active_branch():
    assert analysis.smooth_at(Max(1 / m1, m1 / 16), {m1: 8}) == m1 / 16


def test_optimum_by_hand():
    # A/m1 + c*m1 is smallest at sqrt(A/c); here A = 50, c = 2 -> 5
    found = analysis.optimum(50 / m1 + 2 * m1, m1, [1, 2, 4, 8])
    assert found.best == 4 and found.relaxed == 5 and found.same_region
    assert simplify(found.derivative - (2 - 50 / m1**2)) == 0 and found.second.is_positive


def test_optimum_relaxed_root_is_exact():
    found = analysis.optimum(3 / m1 + m1, m1, [1, 2, 3])
    assert found.relaxed == sqrt(3)


def test_optimum_needs_numbers():
    with pytest.raises(ValueError, match="fix every other symbol first"):
        analysis.optimum(e / m1 + m1, m1, [1, 2])


@given(heads=st.sampled_from([8, 12, 16, 32]), width=st.sampled_from([64, 128]),
       tokens=st.sampled_from([512, 2048, 8192]), batch=st.integers(1, 4),
       system=st.sampled_from(["a100", "h100", "a100-perlmutter"]))
def test_best_degree_equals_brute_force(heads, width, tokens, batch, system):
    e_ = heads * width
    block = transformer_layer(batch, tokens, e_, 4 * e_, heads, m1, m1)
    time = step_time(block, system)
    candidates = analysis.valid_values(block, m1, 64)
    found = analysis.optimum(time, m1, candidates)
    # brute force: build each layer with numbers and time it, independently of the symbolic path
    brute = {d: step_time(transformer_layer(batch, tokens, e_, 4 * e_, heads, d, d), system)
             for d in candidates}
    assert found.best == min(brute, key=brute.get)
    assert all(found.values[d] == brute[d] for d in candidates)
    if found.relaxed is not None and found.same_region:
        assert found.derivative.subs(m1, found.relaxed).evalf(30) == pytest.approx(0, abs=1e-18)


def test_between_steps_takes_a_symbol_by_its_name():
    """The name resolves to the package's symbol, as ``derivative`` resolves it: ``between_steps(m1**2, "m1")``
    was 0 (a plain ``Symbol("m1")``, another symbol), where d(m1^2)/dm1 is 2 m1."""
    from symbolic_cost.analysis.scaling import between_steps
    from symbolic_cost.symbols import m1
    assert between_steps(m1**2, "m1") == 2 * m1 == between_steps(m1**2, m1)
