"""``maximum``/``minimum`` against Python's ``max``/``min`` of the substituted arguments; ``round_up``
and ``round_down`` against ``math.ceil``/``math.floor``; ``changes_sign`` against SymPy's values."""

import math
import os
import subprocess
import sys
from fractions import Fraction

from hypothesis import given, settings, strategies as st
from sympy import Float, Function, Integer, Max, Min, Mod, Piecewise, Rational, ceiling, floor, nan, oo, srepr

from symbolic_cost.bounds import lower_bound, upper_bound
from symbolic_cost.extrema import at_least, at_most, choice, maximum, minimum, sign, unevaluated
from symbolic_cost.rounding import round_down, round_up
from symbolic_cost import sampled
from symbolic_cost.sampled import POINTS, changes_sign, changes_sign_alone
from symbolic_cost.parallel.collectives import Log2
from symbolic_cost.symbols import b, ep, l, m1, s1
from symbolic_cost.timing.nccl import tree_correction

SYMBOLS = (b, l, m1)
values = st.fixed_dictionaries({s: st.integers(1, 64).map(Integer) for s in SYMBOLS})
"""A point: an integer for each symbol, put in with ``xreplace`` (every symbol at once, so each
``Max`` and ``Min`` compares numbers; ``subs``, one symbol after another, compared expressions)."""
coefficients = st.fractions(-5, 5, max_denominator=7).map(Rational)
monomials = st.sampled_from([1, b, l, m1, b * l, l**2, 1 / m1, b * l / m1, m1 - 1, ceiling(l / m1),
                             Max(b, l), l * (2 * l - 1)])
terms = st.lists(st.tuples(coefficients, monomials), min_size=1, max_size=4).map(
    lambda pairs: sum(c * m for c, m in pairs))


@settings(max_examples=300, deadline=None)
@given(st.lists(terms, min_size=1, max_size=4), values)
def test_extrema_equal_the_numbers_of_their_arguments(args, at):
    numbers = [a.xreplace(at) for a in args]
    assert maximum(*args).xreplace(at) == max(numbers)
    assert minimum(*args).xreplace(at) == min(numbers)


shapes = st.one_of(terms, st.tuples(terms, terms).map(lambda pair: pair[0] * pair[1]),
                   st.tuples(terms, terms).map(lambda pair: Min(*pair)),
                   st.tuples(terms, terms).map(lambda pair: ceiling(pair[0]) - pair[1]),
                   st.tuples(terms, st.sampled_from([b, l, b * l, m1])).map(lambda pair: pair[0] / pair[1]))
"""Sums of terms, and products, minima, ceilings and quotients of them: factors that may be
negative, for the bounds' interval arithmetic."""


@settings(max_examples=500, deadline=None)
@given(shapes, values)
def test_a_decided_sign_holds_at_every_point(expr, at):
    value, decided = expr.xreplace(at), sign(expr)
    low, high = lower_bound(expr), upper_bound(expr)
    if decided is not None:
        assert decided * value >= 0
    if low is not None:
        assert value >= low
    if high is not None:
        assert value <= high


@settings(max_examples=200, deadline=None)
@given(terms, terms, terms, terms, values)
def test_a_choice_is_sympys_piecewise(small, big, then, otherwise, at):
    """``choice`` against the arm its condition picks at every point, and against SymPy's own
    ``Piecewise`` of the same arms: where SymPy's canonical relation is the one given, the same tree."""
    condition = at_most(small, big)
    ours = choice(condition, then, otherwise)
    assert _chosen(ours, at) == (then if bool(condition.xreplace(at)) else otherwise).xreplace(at)
    try:
        sympys = Piecewise((then, condition), (otherwise, True))
    except RecursionError:        # SymPy's own constructor never ends on some conditions
        return
    if isinstance(sympys, Piecewise) and sympys.args[0].cond == condition:
        assert srepr(ours) == srepr(sympys)


def _chosen(expr, at):
    """``expr`` at ``at``, a ``Piecewise`` arm by arm: SymPy's ``subs`` of a whole ``Piecewise``
    rebuilds it, and its constructor recurses without end on some conditions (``7 ceiling(l/m1)/4
    - 24 Max(b, l)/5 <= ...`` at ``l = 4, m1 = 7``)."""
    if not isinstance(expr, Piecewise):
        return expr.xreplace(at)
    return next(arm.xreplace(at) for arm, cond in expr.args if bool(cond.xreplace(at)))


def test_a_choice_tested_again_inside_is_folded_as_sympy_folds_it():
    inner = Piecewise((b, l <= 8), (2 * b, True))
    assert choice(at_most(l, 8), inner, 3 * b) == Piecewise((b, l <= 8), (3 * b, True))
    assert choice(at_most(m1, 8), inner, 3 * b).args[0] == (inner, m1 <= 8)


def test_bounds_of_floats_and_infinities():
    """An integer symbol is at least 1; a ``Float`` bounds exactly as stored (0.1 is
    3602879701896397/2**55, not 1/10); an infinite term bounds nothing; a ceiling of a bound is
    the bound's ceiling (each counted by hand)."""
    assert lower_bound(b + Float(0.1)) == 1 + Rational(3602879701896397, 2**55)
    assert lower_bound(b + oo) is None and lower_bound(b * nan) is None
    assert lower_bound(ceiling(b / 3) + 2 * floor(Rational(7, 2) * m1)) == 1 + 2 * 3
    assert lower_bound((b + Rational(1, 2)) ** 3 * (m1 - 1)) == 0 and lower_bound((b + 1) ** 2) == 4


@settings(max_examples=300, deadline=None)
@given(terms, terms, values)
def test_a_comparison_holds_as_decided_and_is_the_relation_otherwise(first, second, at):
    """``at_least``/``at_most`` against the substituted numbers: ``true`` only where the numbers
    compare so, ``false`` only where they do not, and an undecided relation the same relation."""
    for got, holds in ((at_least(first, second), first.xreplace(at) >= second.xreplace(at)),
                       (at_most(first, second), first.xreplace(at) <= second.xreplace(at))):
        if got in (True, False):
            assert bool(got) == bool(holds)
        else:
            assert bool(got.xreplace(at)) == bool(holds)


def test_what_is_decided_and_what_is_left():
    assert maximum(b * l, 2 * b * l) == 2 * b * l              # b l >= 0
    assert minimum(m1 - 1, 0) == 0                            # an integer degree is at least 1
    assert maximum(b, l) == Max(b, l) and maximum(7, 3, Rational(15, 2)) == Rational(15, 2)
    assert sign(b - l) is None and sign(l * (2 * l - 1) - 3 * l**2 / 2) is None    # l**2/2 - l: -1/2 at l = 1
    assert sign(l * (2 * l - 1) - l**2) == 1            # l (l - 1), once the common l is out of the sum
    assert sign(3 * ceiling(8 / m1) - 1) == 1           # a ceiling of a positive quotient is at least 1
    assert sign(4 * Min(1, b) / m1 - 7) == -1           # Min(1, b) <= 1 and 1/m1 <= 1
    assert sign(Min(1, 5 - b) - 1) == -1                # the least of the arguments' upper bounds: 1, not 4
    assert sign(1 / (m1 + 1) - Rational(1, 2)) == -1    # m1 + 1 >= 2, so its reciprocal is at most 1/2
    assert sign((16 * b * l * m1 / s1 - 1) / m1 + 2) == 1    # a factor at least -1, over m1 >= 1


@settings(max_examples=300, deadline=None)
@given(terms, values)
def test_rounding_equals_the_rounded_number(expr, at):
    """``round_up``/``round_down`` against ``math.ceil``/``math.floor`` of the exact value."""
    value = Fraction(str(expr.xreplace(at)))
    assert round_up(expr).xreplace(at) == math.ceil(value)
    assert round_down(expr).xreplace(at) == math.floor(value)


def test_rounding_takes_whole_terms_out_and_leaves_the_rest():
    assert round_up(b * l + Rational(1, 3)) == b * l + 1 and round_down(b * l + Rational(1, 3)) == b * l
    assert round_up(2 * b * m1) == 2 * b * m1 and round_up(Rational(7, 2)) == 4
    assert round_up(b / m1) == ceiling(b / m1) and round_down(b / 2 + l) == l + floor(b / 2)


@settings(max_examples=300, deadline=None)
@given(terms)
def test_a_sign_change_seen_at_the_points_is_there(expr):
    """Where ``changes_sign`` answers yes, SymPy's values at its points take both signs."""
    if changes_sign(expr):
        signs = {(v > 0) for v in (_exact_at(expr, point) for point in POINTS) if v != 0}
        assert signs == {True, False}


@settings(max_examples=200, deadline=None)
@given(terms, terms)
def test_a_pair_is_looked_at_as_its_difference(first, second):
    """``changes_sign(a, b)``, from each side's remembered values, is ``changes_sign(a - b)``
    (every value here is known), and where it says yes the difference takes both signs there."""
    assert changes_sign(first, second) == changes_sign(first - second)
    if changes_sign(first, second):
        signs = {(v > 0) for v in (_exact_at(first - second, point) for point in POINTS) if v != 0}
        assert signs == {True, False}


def test_a_value_is_unknown_only_at_the_points_where_a_part_is():
    """``b**l`` is left unknown where ``l`` is over 64: ``m1 + b**l`` there, known elsewhere."""
    for point, value in zip(POINTS, sampled.values(m1 + b**l)):
        assert value == (None if point(l) > 64 else point(m1) + point(b) ** point(l))


def test_large_tied_arguments_take_one_order_whatever_order_they_come_in():
    """Arguments of as many nodes, past ``trees.DIGESTED``, are ordered by their digests: the
    same node from any order and in processes whose string hashes differ (``PYTHONHASHSEED``),
    SymPy's ``Max`` in value and in print."""
    from itertools import permutations
    from symbolic_cost.trees import DIGESTED, node_count
    big = eval(_BIG)
    assert len({node_count(a) for a in big}) == 1 and node_count(big[0]) >= DIGESTED
    nodes = {srepr(unevaluated(Max, list(order))) for order in permutations(big)}
    script = f"from sympy import *; from symbolic_cost.symbols import b, l, m1; " \
             f"from symbolic_cost.extrema import unevaluated; print(srepr(unevaluated(Max, {_BIG})))"
    for seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed})
        nodes.add(done.stdout.strip())
    assert len(nodes) == 1
    built = unevaluated(Max, big)
    assert str(built) == str(Max(*big, evaluate=False)) and built.subs({b: 3, l: 5, m1: 2}) == Max(*big).subs(
        {b: 3, l: 5, m1: 2})


_BIG = "[sum((k + i) * b**i * l / (m1 + k) for i in range(1, 4)) + ceiling(b * l / (k + 2)) for k in (1, 2, 3)]"


def test_functions_of_numbers_are_valued_at_the_points_as_sympy_values_them():
    """NCCL's tree correction (a table look-up by message size) and ``Log2`` (rounded up), at
    each point, against SymPy's own value of the expression with the point's numbers put in;
    a function SymPy cannot value at numbers stays unknown."""
    expr = 3 * tree_correction("Simple", 96 * b * l / m1) + Log2(m1 + l)
    for point, value in zip(POINTS, sampled.values(expr)):
        assert value == _exact_at(expr, point)
    assert set(sampled.values(Function("f")(b) + 1)) == {None}
    for point, value in zip(POINTS, sampled.values(Mod(l + 3, b - 1))):       # modulo 0 where b = 1: unknown
        assert value == (None if point(b) == 1 else (point(l) + 3) % (point(b) - 1))



@settings(max_examples=300, deadline=None)
@given(terms)
def test_a_sign_change_seen_with_one_symbol_apart_is_there(expr):
    """Where ``changes_sign_alone`` answers yes, SymPy's values take both signs at the points
    written out here: each symbol 2**20 with the others 1, and 1 with the others 2**20."""
    if changes_sign_alone(expr):
        names = sorted(expr.free_symbols, key=str)
        points = [{t: Integer(2**20 if (t == s) == big else 1) for t in names} for s in names for big in (True, False)]
        assert {expr.xreplace(at) > 0 for at in points if expr.xreplace(at) != 0} == {True, False}


def test_a_degree_that_alone_drives_a_cost_down_is_seen_apart():
    """A term that only ``ep`` makes large (``-floor(ep/2048)``, beside terms without it) is
    negative only where ``ep`` is large and the rest small: no point of ``POINTS`` is such (the
    largest ``ep`` with ``b = l = 1`` there is 1,024, where the floor is 0), and ``sign`` finds
    no sign without expanding (at ``ep = 2**20, b = l = 1`` the value is ``2 - 512 < 0``, at
    ``b = l = ep = 1`` it is ``2``)."""
    expr = b * (l + 1) - floor(ep / 2048)
    assert not changes_sign(expr) and changes_sign_alone(expr) and sign(expr) is None
    assert not changes_sign_alone(b * (l + 1) - l) and sign(b * (l + 1) - b * l) == 1


def test_a_ceiling_is_at_least_one_only_of_what_is_above_zero():
    """``ceiling(b/m1) >= 1`` (a positive quotient), but ``ceiling(m1 - 1)`` is 0 at ``m1 = 1``."""
    assert lower_bound(ceiling(b / m1)) == 1 and lower_bound(ceiling(m1 - 1)) == 0
    assert lower_bound(ceiling(b / m1 - Rational(1, 2))) == 0


def test_a_degree_over_its_own_rounded_share_is_at_least_one():
    """``m1 / ceiling(m1/8) >= 1`` for every integer ``m1 >= 1`` (checked to 4,096 by hand below),
    so NCCL's ``Max(0, floor(m1/ceiling(m1/8)) - 1)`` is the floor less 1; with ``s1`` beside ``m1``
    the share can be below 1 (``m1 = 1, s1 = 2``: 1/2) and the ``Max`` stays."""
    assert all(m // -(-m // 8) >= 1 for m in range(1, 4097))
    assert maximum(0, floor(m1 / ceiling(m1 / 8)) - 1) == floor(m1 / ceiling(m1 / 8)) - 1
    assert lower_bound(3 * b * l / ceiling(b * l / 2)) == 3 and lower_bound(m1 / ceiling(3 * m1 / 2)) == 0   # 1/2 at m1 = 1
    kept = maximum(0, floor(m1 / (s1 * ceiling(m1 / (8 * s1)))) - 1)
    assert isinstance(kept, Max) and kept.subs({m1: 1, s1: 2}) == 0

def _exact_at(expr, point):
    return expr.xreplace({s: Integer(point(s)) for s in expr.free_symbols})


def test_sign_changes_and_signs():
    assert changes_sign(b - l) and changes_sign(b * l - 4 * m1) and changes_sign(l * (2 * l - 1) - 3 * l**2 / 2)
    assert not changes_sign(b * l - 1) and not changes_sign(2 * b * l - b * l) and not changes_sign(m1 - 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(terms, min_size=1, max_size=5))
def test_unevaluated_extrema_are_sympys_own(args):
    """``unevaluated`` orders arguments from remembered node counts: the same node as SymPy's
    where no two arguments of ``trees.DIGESTED`` nodes or more tie (those follow their digests,
    as the next test shows), and printed the same in any case."""
    from symbolic_cost.trees import DIGESTED, node_count
    counts = [node_count(a) for a in set(args)]
    sympys_order = all(c < DIGESTED or counts.count(c) == 1 for c in counts)
    for kind in (Max, Min):
        ours, sympys = unevaluated(kind, args), kind(*args, evaluate=False)
        assert str(ours) == str(sympys) and set(ours.args) == set(sympys.args)
        assert srepr(ours) == srepr(sympys) or not sympys_order


# a serving step's shape: per row the larger of a compute and a memory time, tiles by ceilings of
# the batch, extrema shared between rows, one row reading the cache's length
STEP = (80 * maximum(3 * ceiling(b / 128) * 128 / 7 + 2, b * 5 + 11) + 80 * maximum(b * 5 + 11, minimum(b, 64) * 9)
        + maximum(ceiling(b / 16) * 16, 40) * (1 + 3 / (l + 1)) + 80 * maximum(b * l / 1000, b / 3 + 2))


@given(st.integers(1, 4096), st.integers(1, 200_000))
@settings(max_examples=60, deadline=None)
def test_step_functions_built_with_kept_extrema_equal_sympy_s_substitution(batch, context):
    """``kept_cse`` (common subexpressions with Max/Min left as written) and ``load.BatchFirst``
    (the batch-only terms remembered by batch) give what SymPy's exact substitution gives."""
    from sympy import lambdify
    from symbolic_cost.extrema import kept_cse
    from symbolic_cost.inference.load import BatchFirst
    exact = float(STEP.subs({b: batch, l: context}))
    assert math.isclose(lambdify([b, l], STEP, "math", cse=kept_cse)(batch, context), exact, rel_tol=1e-12)
    split = BatchFirst(STEP, b, l)
    assert math.isclose(split(batch, float(context)), exact, rel_tol=1e-12)
    assert math.isclose(split(batch, float(context)), exact, rel_tol=1e-12)      # the remembered batch terms


def test_kept_cse_leaves_the_extrema_unevaluated():
    from symbolic_cost.extrema import kept_cse
    replacements, reduced = kept_cse([STEP, 2 * STEP])
    shown = [value for _, value in replacements] + reduced
    assert any(isinstance(node, Max) for value in shown for node in value.atoms(Max))
    assert not any(str(node.func) in ("Max_", "Min_") for value in shown for node in value.atoms(Function))
