"""Scaling analysis: the questions a formula answers and a calculator cannot.

* ``leading_terms``: the dominant part of a cost as one symbol, or several
  together, grow; the exact remainder on request.
* ``derivative`` and ``elasticity`` (``d log C / d log x``): how fast a cost grows.
* ``crossover``: where two costs are equal, solved for one symbol.
* ``optimum``: the degree that minimises a cost, relaxed to a real number
  (with the derivative that proves it) and restricted to valid degrees.
* ``share`` and ``limit``: ratios such as attention's part of the FLOPs.

Time expressions contain ``Max`` (roofline) and ``Piecewise`` (NVLink or
InfiniBand).  ``smooth_at`` replaces each by the branch active at a point, so
the calculus happens inside one smooth region; ``optimum`` reports whether its
answer stays in that region.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sympy import (Derivative, Dummy, Expr, Max, Min, Piecewise, Poly, PolynomialError, Pow, Symbol, ceiling, diff,
                   floor, expand, false, fraction, limit as _limit, log, nan, nsolve, oo, simplify, solve, sympify,
                   together, true, zoo)

from symbolic_cost.symbols import resolve_names
from symbolic_cost.checks import InputError, InputTypeError, count, exact, fits, flag, shown


def _real(x: Symbol) -> Symbol:
    """A positive real stand-in for ``x``: dimensions are integers, but a relaxed
    optimum or a crossover is a real number, and SymPy drops non-integer roots
    of an integer symbol."""
    return Dummy(x.name, positive=True, real=True)


def _solve_positive(expr, x) -> list:
    r = _real(x)
    try:
        roots = solve(sympify(expr).subs(x, r), r)
    except NotImplementedError:       # SymPy has no closed form (Max, Piecewise, mixed powers)
        raise InputError(f"no closed-form solution in {x}: SymPy cannot solve it (a time field has Max and "
                         f"Piecewise; try a FLOPs or bytes field, or fix more symbols)", str(x)) from None
    return [root.subs(r, x) for root in roots
            if root.is_positive is not False and root.is_real is not False and root != 0]


def _symbols(grow, name: str = "grow") -> list[Symbol]:
    """The symbols ``grow`` names: one symbol (or its name) or a list of them."""
    if isinstance(grow, (str, Symbol)):
        grow = [grow]
    if not isinstance(grow, (list, tuple, set, frozenset)) or not grow \
            or not all(isinstance(s, (str, Symbol)) for s in grow):
        raise InputTypeError(f"{name} must be a symbol, its name, or a list of them, got {shown(grow)}", name)
    return list(resolve_names({s: None for s in grow}))


def _symbol(x) -> Symbol:
    """The one symbol ``x`` names (a ``Symbol`` or its name)."""
    if not isinstance(x, (str, Symbol)):
        raise InputTypeError(f"x must be one symbol or its name, got {shown(x)}", "x")
    return _symbols(x, "x")[0]


MAX_POWER = 100
"""The largest whole power ``leading_terms`` expands: a cost's powers are a few (``l**2`` of the
scores, a tensor grid's ``m**3``); ``l**(10**9)`` would make a polynomial of a billion terms."""


def _check_powers(expr) -> None:
    """Refuse a whole power beyond ``MAX_POWER`` before anything expands it."""
    for power in expr.atoms(Pow):
        if power.exp.is_Integer and abs(power.exp) > MAX_POWER:
            raise InputError(f"leading_terms expands powers up to {MAX_POWER}; got {shown(power)}", "expr")


def leading_terms(expr, grow, *, with_remainder: bool = False):
    """Terms of highest degree as the symbols in ``grow`` grow together.

    Every symbol in ``grow`` is scaled by ``t`` and the coefficient of the top
    power of ``t`` is kept (for a ratio: top of numerator over top of denominator).

    >>> from symbolic_cost.symbols import b, l, e
    >>> leading_terms(24*b*l*e**2 + 4*b*l**2*e + 10*b*l*e, [e, l])
    24*b*e**2*l + 4*b*e*l**2
    >>> leading_terms(24*b*l*e**2 + 4*b*l**2*e + 10*b*l*e, l, with_remainder=True)
    (4*b*e*l**2, 24*b*e**2*l + 10*b*e*l)
    """
    expr = exact(expr, "expr")
    flag(with_remainder, "with_remainder")
    _check_powers(expr)
    t = Dummy("t", positive=True)
    scaled = together(expr.subs({s: t * s for s in _symbols(grow)}, simultaneous=True))
    numerator, denominator = fraction(scaled)
    try:
        top = Poly(expand(numerator), t).LC() / Poly(expand(denominator), t).LC()
    except PolynomialError:
        raise InputError("leading_terms needs a polynomial or ratio of polynomials in "
                         f"{', '.join(map(str, _symbols(grow)))}; got {expr}", "expr") from None
    tidy = lambda v: expand(v) if v.is_polynomial() else simplify(v)  # noqa: E731
    top = tidy(top)
    return (top, tidy(expr - top)) if with_remainder else top


def between_steps(expr, x) -> Expr:
    """``d expr/dx`` with every ``floor`` and ``ceiling`` of ``x`` held at its value: a rounding
    is a step, flat between its jumps, so this is the derivative wherever it exists (SymPy would
    leave ``Derivative(ceiling(x/8), x)`` unevaluated).

    >>> from sympy import ceiling
    >>> from symbolic_cost.symbols import m1
    >>> between_steps(m1 * ceiling(1024 / m1), "m1")
    ceiling(1024/m1)
    """
    return _between_steps(exact(expr, "expr"), _symbol(x))


def _between_steps(expr, x) -> Expr:
    """``between_steps`` of a checked expression and symbol."""
    held = {step: Dummy("step") for step in expr.atoms(floor, ceiling) if step.has(x)}
    return diff(expr.xreplace(held), x).xreplace({d: step for step, d in held.items()})


def derivative(expr, x) -> Expr:
    """``dC/dx``, simplified; roundings of ``x`` are flat between their steps (``between_steps``)."""
    x = _symbol(x)
    return simplify(_between_steps(exact(expr, "expr"), x))


def elasticity(expr, x, at: dict | None = None) -> Expr:
    """``d log C / d log x = x C'/C``: a cost growing like ``x**k`` has elasticity ``k``.

    >>> from symbolic_cost.symbols import l, e
    >>> elasticity(4*l**2*e + 24*l*e**2, l)
    2*(3*e + l)/(6*e + l)
    """
    x = _symbol(x)
    expr = _nonzero(expr, "expr", "an elasticity of nothing")
    value = simplify(x * _between_steps(expr, x) / expr)
    if not at:
        return value
    found = simplify(value.subs(_point(at, "at")))
    if found.has(zoo, oo, -oo, nan):
        raise InputError(f"the elasticity is not finite at {at}: the cost is 0 there", "at")
    return found


def crossover(a, b, x) -> Expr:
    """The positive ``x`` at which ``a == b``.

    Dimensions are positive symbols, so the roots SymPy can rule out are
    dropped; if more than one could be meaningful they are all named in the error.

    >>> from symbolic_cost.symbols import l, e
    >>> crossover(4*l**2*e, 24*l*e**2, l)
    6*e
    """
    x = _symbol(x)
    difference = exact(a, "a") - exact(b, "b")
    if simplify(difference) == 0:       # solve answers [] for an identity: "none" would be untrue
        raise InputError(f"b is a again: the two are equal at every {x}, so there is no crossover to give", "b")
    roots = _solve_positive(difference, x)
    if len(roots) != 1:
        found = ", ".join(map(str, roots)) or "none"
        raise InputError(f"expected one positive crossover in {x}; found {found}", str(x))
    return simplify(roots[0])


def share(part, whole) -> Expr:
    """``part / whole``, simplified (e.g. attention's share of a layer's FLOPs)."""
    return simplify(exact(part, "part") / _nonzero(whole, "whole", "a share of nothing"))


def _nonzero(value, name: str, what: str) -> Expr:
    """``value`` exact, refused where it is 0 (``what`` it would be: a division by it)."""
    value = exact(value, name)
    if value.is_zero:
        raise InputError(f"{name} is 0: {what}", name)
    return value


def _point(point, name: str) -> dict:
    """``point``: a dict of symbols (or their names) to exact values."""
    if not isinstance(point, dict):
        raise InputTypeError(f"{name} must be a dict of symbols to numbers, got {shown(point)}", name)
    values = {k: exact(v, f"{name}[{k}]") for k, v in resolve_names(point).items()}
    for k, v in values.items():         # the library's sizes are positive symbols: a point outside is no size
        if getattr(k, "is_positive", False) and v.is_number and not v.is_positive:
            raise InputError(f"{name}[{k}] must be positive ({k} is a size), got {v}", f"{name}[{k}]")
    return values


def limit(expr, x, to=oo) -> Expr:
    """The limit of ``expr`` as ``x`` goes to ``to`` (infinity by default; ``-oo`` or an exact
    value otherwise)."""
    x = _symbol(x)
    to = to if to in (oo, -oo) else exact(to, "to")
    if x.is_nonnegative and (to == -oo or to.is_negative):        # a size never goes there
        raise InputError(f"to must be oo or a value {x} may take (at least 0: {x} is a size), got {to}", "to")
    return simplify(_limit(exact(expr, "expr"), x, to))


def smooth_at(expr, point: dict) -> Expr:
    """``expr`` with every ``Max``, ``Min`` and ``Piecewise`` replaced by the branch
    active at ``point`` (which must fix every free symbol of the branch tests).

    >>> from symbolic_cost.symbols import m1
    >>> smooth_at(Max(1/m1, m1/16), {m1: 2})
    1/m1
    """
    point = _point(point, "point")
    expr = exact(expr, "expr")
    if isinstance(expr, (Max, Min)):
        pick = max if isinstance(expr, Max) else min
        values = [_decided(arg.subs(point), expr, point) for arg in expr.args]
        return smooth_at(expr.args[values.index(pick(values))], point)
    if isinstance(expr, Piecewise):
        for branch, condition in expr.args:
            if _decided(condition.subs(point), expr, point):
                return smooth_at(branch, point)
        raise InputError(f"no branch of {expr} holds at {point}", "point")
    if expr.args:
        return expr.func(*(smooth_at(arg, point) for arg in expr.args))
    return expr


def _decided(value, expr, point):
    """``value`` (an argument of ``expr`` or a branch's test, at ``point``) as a real number or a
    truth value; refused where ``point`` leaves it undecided or complex."""
    if value in (true, false):
        return bool(value)
    if not (value.is_number and value.is_real):
        raise InputError(f"{point} does not decide {expr}: its branch is {value} there (fix every symbol of the "
                         f"branch tests, with real values)", "point")
    return value


@dataclass(frozen=True)
class Optimum:
    """The answer of ``optimum``.

    ``best`` is the candidate with the smallest value (exact); ``relaxed`` the
    real minimiser of the smooth branch active at ``best`` (a root of
    ``derivative``, positive curvature ``second`` there), ``None`` if the
    branch has no interior minimum; ``same_region`` tells whether ``relaxed``
    lies where the same branches are active.
    """

    symbol: Symbol
    best: Expr
    values: dict = field(repr=False)
    smooth: Expr = field(repr=False)
    derivative: Expr = field(repr=False)
    relaxed: Expr | None
    second: Expr | None = field(repr=False)
    same_region: bool | None


def optimum(expr, x, candidates) -> Optimum:
    """Minimise ``expr`` over ``x``: exactly over ``candidates`` and relaxed to reals.

    >>> from symbolic_cost.symbols import m1
    >>> found = optimum(64/m1 + m1, m1, [1, 2, 4, 8, 16])
    >>> found.best, found.relaxed, found.derivative
    (8, 8, 1 - 64/m1**2)
    """
    x = _symbol(x)
    expr = exact(expr, "expr")
    if not isinstance(candidates, (list, tuple, range)):     # a set or a mapping has no values of its own order
        raise InputTypeError(f"candidates must be a list of values of {x}, got {shown(candidates)}", "candidates")
    if not 1 <= len(candidates) <= MAX_CANDIDATES:
        raise InputError(f"optimum over {x} takes 1 to {MAX_CANDIDATES:,} candidate values (each is simplified), "
                         f"got {len(candidates):,}", "candidates")
    candidates = [fits(x, c, f"each of candidates ({x})") for c in candidates]
    values = {c: simplify(expr.subs(x, c)) for c in candidates}
    if any(not v.is_number for v in values.values()):
        raise InputError(f"optimum over {x}: fix every other symbol first "
                         f"(free: {', '.join(sorted(map(str, expr.free_symbols - {x})))})", "expr")
    for c, v in values.items():
        if not (v.is_real and v.is_finite):
            raise InputError(f"optimum over {x}: the expression is {v} at {x} = {c}, not a real number", "candidates")
    best = min(candidates, key=lambda c: values[c])
    smooth = smooth_at(expr, {x: best})
    slope = diff(smooth, x)
    slope = slope if slope.has(log) else simplify(slope)      # a tree's log2(n) steps: no exact root
    relaxed = _positive_root(slope, x, best)
    second = simplify(diff(smooth, x, 2).subs(x, relaxed)) if relaxed is not None else None
    if second is not None and not second.is_positive:
        relaxed = second = None
    same = None if relaxed is None else smooth_at(expr, {x: relaxed}) == smooth
    return Optimum(x, best, values, smooth, slope, relaxed, second, same)


def _positive_root(slope, x, start):
    """The positive root of ``slope`` nearest ``start``: exact if SymPy solves it; none where the
    slope keeps a derivative SymPy cannot take (of a ``floor`` or ``ceiling`` of ``x``: a step
    function, such as the experts a rank holds, has no root to relax to, and no numeric form)."""
    if slope.has(Derivative):
        return None
    try:   # an equation with log(x) (a tree collective's steps) is left to nsolve: solve may not end
        roots = [] if slope.has(log) else [r for r in _solve_positive(slope, x) if r.is_number]
    except NotImplementedError:
        roots = []
    if roots:
        return min(roots, key=lambda r: abs(float(r) - float(start)))
    try:
        root = nsolve(slope, x, float(start))
    except (ValueError, ZeroDivisionError, TypeError):
        return None
    return root if root.is_real and root > 0 else None


MAX_CANDIDATES = 4096
"""Most values ``valid_values`` tries and ``optimum`` takes: each costs a substitution (a millisecond),
and ``optimize`` then evaluates each that is valid."""


def valid_values(block, x, upto: int) -> list[int]:
    """The values ``1..upto`` of ``x`` that the block's rules accept (``m1`` dividing
    ``h`` and ``f``, ``s1`` dividing ``l`` and ``m1``, ...); ``upto`` at most ``MAX_CANDIDATES``.

    >>> from symbolic_cost import attention
    >>> from symbolic_cost.symbols import m1
    >>> valid_values(attention(1, 2048, 768, 12, m1, 1), m1, 16)
    [1, 2, 3, 4, 6, 12]
    >>> valid_values(attention(1, 2048, 768, 12, m1, m1), m1, 16)   # s1 = m1 must divide l too
    [1, 2, 4]
    """
    if not callable(getattr(block, "subs", None)):
        raise InputTypeError(f"block must be a block's or a layer's cost (symbolic_cost.attention, mlp, "
                             f"transformer_layer, ...), got {shown(block)}", "block")
    x = _symbol(x)
    good = []
    for value in range(1, count(upto, "upto", maximum=MAX_CANDIDATES) + 1):
        try:
            block.subs({x: value})
        except ValueError:
            continue
        good.append(value)
    return good
