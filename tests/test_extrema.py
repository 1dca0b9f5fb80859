"""``maximum``/``minimum`` against Python's ``max``/``min`` of the substituted arguments."""

from hypothesis import given, settings, strategies as st
from sympy import Max, Rational, ceiling

from symbolic_cost.extrema import lower_bound, maximum, minimum, sign
from symbolic_cost.symbols import b, l, m1

SYMBOLS = (b, l, m1)
values = st.fixed_dictionaries({s: st.integers(1, 64) for s in SYMBOLS})
coefficients = st.fractions(-5, 5, max_denominator=7).map(Rational)
monomials = st.sampled_from([1, b, l, m1, b * l, l**2, 1 / m1, b * l / m1, m1 - 1, ceiling(l / m1),
                             Max(b, l), l * (2 * l - 1)])
terms = st.lists(st.tuples(coefficients, monomials), min_size=1, max_size=4).map(
    lambda pairs: sum(c * m for c, m in pairs))


@settings(max_examples=300, deadline=None)
@given(st.lists(terms, min_size=1, max_size=4), values)
def test_extrema_equal_the_numbers_of_their_arguments(args, at):
    numbers = [a.subs(at) for a in args]
    assert maximum(*args).subs(at) == max(numbers)
    assert minimum(*args).subs(at) == min(numbers)


@settings(max_examples=300, deadline=None)
@given(terms, values)
def test_a_decided_sign_holds_at_every_point(expr, at):
    value, decided, bound = expr.subs(at), sign(expr), lower_bound(expr)
    if decided is not None:
        assert decided * value >= 0
    if bound is not None:
        assert value >= bound


def test_what_is_decided_and_what_is_left():
    assert maximum(b * l, 2 * b * l) == 2 * b * l              # b l >= 0
    assert minimum(m1 - 1, 0) == 0                            # an integer degree is at least 1
    assert maximum(b, l) == Max(b, l) and maximum(7, 3, Rational(15, 2)) == Rational(15, 2)
    assert sign(b - l) is None and sign(l * (2 * l - 1) - l**2) is None
