"""``Max`` and ``Min`` built without SymPy's assumption queries.

SymPy's ``Max(x, y)`` tries to prove ``x >= y`` or ``y >= x`` from the
symbols' assumptions before it settles for an unevaluated ``Max``.  For the
arguments of a cost (compute time against memory time, the first pipeline
stage against the last) neither is provable, and the attempt costs
milliseconds a pair: it was 80 % of building a whole model with symbolic
degrees.  ``maximum`` and ``minimum`` decide only what is cheap to decide:

* numbers are compared exactly and only the largest (smallest) is kept;
* nested extrema of the same kind are flattened and repeated arguments merged;
* an argument is dropped when its difference from another has a sign that the
  structure shows (``sign``, from ``bounds``): a number, or, as written or
  expanded, a sum whose terms all have one sign since each is a number times
  powers, ceilings and extrema of positive symbols (``2*b*l - b*l`` is
  ``b*l >= 0``; an integer degree is at least 1, so ``m1 - 1 >= 0``).

Everything else stays an unevaluated ``Max``/``Min``; substituting numbers
evaluates it as usual.

>>> from symbolic_cost.symbols import b, l
>>> maximum(b * l, 2 * b * l, 3)
Max(3, 2*b*l)
>>> minimum(4, 7), maximum(b, minimum(b, l)), maximum(b, maximum(l, b))
(4, Max(b, Min(b, l)), Max(b, l))
"""

from __future__ import annotations

from sympy import Add, Basic, Expr, Function, Max, Min, Mul, Piecewise, Pow, S, cse, expand_mul, sympify
from sympy.core.relational import GreaterThan, LessThan, Relational
from sympy.logic.boolalg import Boolean
from sympy.functions.elementary.piecewise import ExprCondPair

from symbolic_cost.bounds import highest, lowest
from symbolic_cost.checks import InputError
from symbolic_cost.sampled import changes_sign, changes_sign_alone
from symbolic_cost.trees import argument_order, remembered, remembered_call


def maximum(*args) -> Expr:
    """The largest of ``args``, as an exact number or an unevaluated ``Max``."""
    return remembered_call(_EXTREMA, _extremum, Max, *args)


def minimum(*args) -> Expr:
    """The smallest of ``args``, as an exact number or an unevaluated ``Min``."""
    return remembered_call(_EXTREMA, _extremum, Min, *args)


_EXTREMA: dict = {}
"""Extrema by their kind and arguments (``trees.remembered_call``): a search asks the same
extrema of every ZeRO stage and offload of a layout (ZB-H1's bubble of the stage's passes,
which they share)."""


def _extremum(kind, *args) -> Expr:
    direction = 1 if kind is Max else -1
    if not args:
        raise InputError(f"{kind.__name__} needs at least one argument")
    flat = []
    for arg in map(sympify, args):
        for part in (arg.args if isinstance(arg, kind) else (arg,)):
            if part not in flat:
                flat.append(part)
    numbers = [a for a in flat if a.is_Number]
    rest = [a for a in flat if not a.is_Number]
    if numbers:
        rest.insert(0, max(numbers) if direction > 0 else min(numbers))
    kept = []
    for arg in rest:
        survivors = []
        for other in kept:
            # one comparison per pair; none where the samples already show no sign holds
            order = None if changes_sign(arg, other) else sign(arg - other)
            if order == -direction:           # ``other`` is at least as extreme: drop ``arg``
                survivors = None
                break
            if order != direction:            # undecided: keep ``other``
                survivors.append(other)
        if survivors is not None:
            kept = survivors + [arg]
    return kept[0] if len(kept) == 1 else unevaluated(kind, kept)


def unevaluated(kind, args) -> Expr:
    """``kind(*args, evaluate=False)`` for ``Max`` or ``Min``, its arguments in
    ``trees.argument_order``: SymPy's order (fewest nodes first), but large arguments with as
    many nodes by their ``trees.digest``.  A ``Max`` SymPy builds from such tied arguments may
    order them otherwise: the same value, and printed alone the same (printers sort the
    arguments); a sum holding it may print its terms in another order.

    >>> from symbolic_cost.symbols import b, l
    >>> unevaluated(Max, [b * l + 1, l]) == Max(b * l + 1, l, evaluate=False)
    True
    >>> unevaluated(Min, [b + 2, l + 1]) == unevaluated(Min, [l + 1, b + 2])
    True
    """
    args = frozenset(args)
    if len(args) == 1:
        return next(iter(args))
    node = Expr.__new__(kind, *argument_order(args))
    node._argset = args            # as SymPy's MinMaxBase.__new__ keeps it
    return node


def swap(expr, swaps: dict, done: dict | None = None) -> Expr:
    """``expr.xreplace(swaps)``, but every ``Max``/``Min``/``Piecewise`` and relation on the way
    rebuilt unevaluated (``done``: the parts already rebuilt, to share them across expressions).

    SymPy's ``xreplace`` rebuilds each ancestor of a swapped part with evaluation:
    ``Min.__new__`` compares every pair of its arguments (``factor_terms`` of each difference),
    and ``Piecewise.__new__`` folds the ``Piecewise`` inside it outwards, rebuilding every ``Min``
    on the way: minutes for a step time whose collectives take the least of several NCCL
    algorithms.  Shared parts are rebuilt once.

    >>> from symbolic_cost.symbols import b, l
    >>> swap(minimum(b + 1, l), {b: l})
    Min(l, l + 1)
    """
    return _walked(expr, swaps.get, _rebuilt, done)


def _walked(expr, swapped, rebuilt, done: dict | None = None) -> Expr:
    """``expr`` rebuilt from its leaves up: a node ``swapped`` gives a value for (not ``None``)
    becomes it, every other node with arguments ``rebuilt(node, its walked arguments)``, each
    shared part once (``done``: the parts already walked)."""
    done = {} if done is None else done

    def walk(node):
        found = swapped(node)
        if found is not None:
            return found
        if not node.args:
            return node
        if node not in done:
            done[node] = rebuilt(node, tuple(walk(a) for a in node.args))
        return done[node]

    return walk(sympify(expr))


def kept_cse(exprs, **options):
    """``sympy.cse(exprs, **options)`` with every ``Max`` and ``Min`` left as written: SymPy's
    elimination rebuilds each node it passes, and a rebuilt ``Max`` compares its arguments pair by
    pair (``Max._find_localzeros``), two thirds of making a serving step model's functions.  The
    extrema go through it as functions without such rules (``Max_``, ``Min_``), and come back
    unevaluated.  A single expression gives a single reduced one, as ``lambdify``'s ``cse`` takes.

    >>> from symbolic_cost.symbols import b, l
    >>> kept_cse([maximum(b, l) + 1, maximum(b, l) * 2])
    ([(x0, Max(b, l))], [x0 + 1, 2*x0])
    """
    single = isinstance(exprs, Basic)
    hidden = [swap_extrema(e, _HIDDEN) for e in ([exprs] if single else exprs)]
    replacements, reduced = cse(hidden, **options)
    shown = {}
    replacements = [(name, swap_extrema(value, _SHOWN, shown)) for name, value in replacements]
    reduced = [swap_extrema(e, _SHOWN, shown) for e in reduced]
    return replacements, reduced[0] if single else reduced


_HIDDEN = {Max: Function("Max_"), Min: Function("Min_")}
_SHOWN = {hidden: kind for kind, hidden in _HIDDEN.items()}


def swap_extrema(expr, kinds: dict, done: dict | None = None) -> Expr:
    """``expr`` with each node whose function is a key of ``kinds`` rebuilt as that key's value
    (a ``Max`` or ``Min`` unevaluated, ``unevaluated``), the rest as ``swap`` rebuilds them."""
    def rebuilt(node, args):
        kind = kinds.get(node.func)
        if kind is None:
            return _rebuilt(node, args)
        return unevaluated(kind, args) if kind in (Max, Min) else kind(*args)

    return _walked(expr, lambda node: None, rebuilt, done)


def _rebuilt(node, args) -> Expr:
    """``node`` with ``args``: extrema and relations unevaluated, a ``Piecewise`` (and a sum,
    product or power of one) as written, since their constructors compare pairs of arguments or
    fold a ``Piecewise`` outwards, asking assumption queries all the way."""
    if args == node.args:
        return node
    if isinstance(node, (Max, Min)):
        return unevaluated(type(node), args)
    if isinstance(node, Relational):
        return type(node)(*args, evaluate=False)
    if isinstance(node, (Piecewise, ExprCondPair)):
        return Basic.__new__(type(node), *args)
    if isinstance(node, (Add, Mul, Pow)) and any(isinstance(a, Piecewise) or
                                                 isinstance(a, Pow) and isinstance(a.base, Piecewise) for a in args):
        return node.func(*args, evaluate=False)       # a product would raise a Piecewise to a power
    return node.func(*args)


def choice(condition, then, otherwise) -> Expr:
    """``Piecewise((then, condition), (otherwise, True))``, built as written where SymPy's
    constructor would change nothing but the relation's form: ``condition`` an undecided
    relation (``at_least``, ``at_most``), ``then`` not a ``Piecewise`` that tests it again.  The
    constructor puts the relation in canonical form (``2 m1 <= 8`` as ``m1 <= 4``: the same
    condition), asking SymPy's assumptions of the difference, a cascade through the ceilings of
    a collective's span that was 4 % of building a calibrated step time.  A decided condition, or
    equal arms, give the arm.

    >>> from symbolic_cost.symbols import b, m1
    >>> choice(at_most(m1, 8), b, 2 * b), choice(at_most(1, m1), b, 2 * b), choice(m1 > 1, b, b)
    (Piecewise((b, m1 <= 8), (2*b, True)), b, b)
    """
    condition = sympify(condition)
    if condition in (S.true, S.false) or then == otherwise:
        return then if condition is not S.false else otherwise
    retested = isinstance(then, Piecewise) and condition in [c for _, c in then.args]
    if not isinstance(condition, Relational) or retested:
        return Piecewise((then, condition), (otherwise, True))
    return Basic.__new__(Piecewise, Basic.__new__(ExprCondPair, sympify(then), condition),
                         Basic.__new__(ExprCondPair, sympify(otherwise), S.true))


def at_least(lhs, rhs) -> Boolean:
    """``lhs >= rhs`` decided as ``maximum`` decides, without SymPy's assumption queries:
    ``true`` or ``false`` for numbers, ``true`` where ``sign`` shows ``lhs - rhs >= 0``, ``false``
    where ``rhs - lhs`` has a positive ``lower_bound``; else the relation, unevaluated.

    >>> from symbolic_cost.symbols import m1
    >>> at_least(8, 3), at_least(m1, 1), at_least(m1, 3), at_least(1, m1 + 1)
    (True, True, m1 >= 3, False)
    """
    return _compared(sympify(lhs), sympify(rhs), GreaterThan)


def at_most(lhs, rhs) -> Boolean:
    """``lhs <= rhs``, decided as ``at_least(rhs, lhs)``, else the relation unevaluated.

    >>> from symbolic_cost.symbols import m1
    >>> at_most(m1, 8), at_most(1, m1)
    (m1 <= 8, True)
    """
    return _compared(sympify(rhs), sympify(lhs), LessThan)


def _compared(big, small, relation) -> Boolean:
    if big.is_Number and small.is_Number:
        return S.true if big >= small else S.false
    if not changes_sign(big, small):
        if sign(big - small) == 1:
            return S.true
        low = lowest(small - big)
        if low is not None and low > 0:
            return S.false
    return relation(*((big, small) if relation is GreaterThan else (small, big)), evaluate=False)


def sign(expr) -> int | None:
    """``1`` where ``expr >= 0`` and ``-1`` where ``expr <= 0`` for every positive value of its
    symbols, as far as ``lower_bound`` and ``upper_bound`` see it on ``expr`` or on its
    expansion, each also with the monomial its terms share taken out; ``None`` when undecided
    (at once where ``sampled`` finds both signs).

    >>> from symbolic_cost.symbols import b, l
    >>> sign(2 * b * l - b * l), sign(b - l), sign(-3 / b), sign(b * (2 * l + 1) - 2 * b * l)
    (1, None, -1, 1)
    """
    return remembered(_SIGNS, sympify(expr), _sign)


_SIGNS: dict = {}
"""Signs remembered: a calibrated step time compares the same pairs of NCCL protocols and kernel
tiles for row after row (171 differences asked 468 times for GPT-3's)."""


def _sign(expr) -> int | None:
    found = _bounded_sign(expr)
    if found is not None or changes_sign(expr):
        return found                          # found, or no bound can hold
    found = _divided_sign(expr)
    if found is not None or not _distributes(expr) or changes_sign_alone(expr):
        return found                          # found, or the expansion could not help: skip it
    form = expanded(expr)
    found = _bounded_sign(form)
    return _divided_sign(form) if found is None else found


def _bounded_sign(form) -> int | None:
    low = lowest(form)
    if low is not None and low >= 0:
        return 1
    high = highest(form)
    return -1 if high is not None and high <= 0 else None


def _divided_sign(form) -> int | None:
    divided = _without_common_monomial(form)
    return None if divided is None else _bounded_sign(divided)


def _without_common_monomial(expr) -> Expr | None:
    """``expr / M``, where ``M`` is the product of the positive symbols that every term of the
    sum ``expr`` holds (each to its least power), and so has ``expr``'s sign: a difference of two
    times that both grow with ``b*l`` is bounded once ``b*l`` is out of it
    (``8853 b l ceiling(129280/m1) / K - b l / K'``).  ``None`` where there is no such sum or
    product.

    >>> from sympy import ceiling
    >>> from symbolic_cost.symbols import b, l, m1
    >>> _without_common_monomial(3 * b * l * ceiling(8 / m1) - b**2 * l)
    -b + 3*ceiling(8/m1)
    """
    if not isinstance(expr, Add):
        return None
    powers = [term.as_powers_dict() for term in expr.args]
    common = {base: min(p.get(base, 0) for p in powers) for base in powers[0]
              if base.is_Symbol and base.is_positive}
    monomial = Mul(*(base**k for base, k in common.items() if k > 0))
    return None if monomial == 1 else Add(*(term / monomial for term in expr.args))


def _distributes(expr) -> bool:
    """Whether expanding ``expr`` multiplies a sum out at its top (a term with a factor
    ``(x + y)**k``, ``k`` a positive integer): only then can its terms cancel, which is what the
    expansion is for.  A difference of two tile efficiencies, ``A / ceiling(...) - B / ceiling(...)``,
    has none."""
    for term in Add.make_args(expr):
        for factor in Mul.make_args(term):
            base, power = factor.as_base_exp()
            if isinstance(base, Add) and power.is_Integer and power > 0:
                return True
    return False


def expanded(expr, memo=None) -> Expr:
    """``expand_mul(expr)``, with every ``Max``/``Min``/``Piecewise`` and relation rebuilt
    unevaluated (as ``swap``) and each shared part expanded once: SymPy's own expansion rebuilds
    every extremum with evaluation, and its pairwise comparisons are a large share of a search's
    builds (a DualPipe bubble compares two whole step times).

    >>> from symbolic_cost.symbols import b, l
    >>> expanded(b * (2 * l + 1) - maximum(b * (l + 1), l**2) * l)
    2*b*l + b - l*Max(l**2, b*l + b)
    """
    memo = {} if memo is None else memo
    if not expr.args:
        return expr
    if expr not in memo:
        node = _rebuilt(expr, tuple(expanded(a, memo) for a in expr.args))
        memo[expr] = expand_mul(node, deep=False) if isinstance(node, Mul) and _multiplies_out(node) else node
    return memo[expr]


def _multiplies_out(product) -> bool:
    """Whether ``expand_mul`` can change the product ``product``: a factor that is a sum, a power
    of one, or a ``Piecewise`` (``_rebuilt`` leaves a product of one unevaluated).  Any other
    product SymPy built comes back the same, from a rebuild of its numerator over its denominator
    that asks for both and divides them: most of an expansion's time."""
    return any(isinstance(f, (Add, Piecewise)) or isinstance(f, Pow) and isinstance(f.base, (Add, Piecewise))
               for f in product.args)
