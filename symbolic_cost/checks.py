"""The one validation layer: the library's own error (``InputError``, a ``ValueError``, and
``InputTypeError``, also a ``TypeError``) and the rules every entrance applies, each naming the
argument and the rule it broke.

The rules: an exact, finite expression (``exact``: never a string, a boolean, ``None``, NaN or
infinity); a positive integer size (``positive_dims``, ``counts``, ``count`` for plain ints); a
positive element size (``positive``); what a symbol promises (``fits``); divisibility
(``divides``, ``check_rules``, ``grid_rules``); ``flag``, ``choice``.  Files to read and write
are checked in ``files``.

A check that SymPy cannot decide (``m1`` divides ``f`` while both are symbols) is skipped
here and made again when numbers are substituted (``Block.subs``).  This module imports
nothing from the package, so every other module may use it.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import sys
from fractions import Fraction

from sympy import Expr, Float, I, Integer, Symbol, nan, oo, sympify, zoo
from sympy.core.sympify import SympifyError


class InputError(ValueError):
    """Bad input: the message names the argument (also kept as ``argument``) and the rule."""

    def __init__(self, message: str, argument: str | None = None):
        super().__init__(message)
        self.argument = argument


class InputTypeError(InputError, TypeError):
    """Input of the wrong type: a string, a boolean or ``None`` where a number belongs, ..."""


def shown(value, limit: int = 60) -> str:
    """``repr(value)`` for a message, cut to ``limit`` characters; never fails."""
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def listed(names) -> str:
    """Names a refusal lists: the first five in order, each cut (``shown``; an empty one quoted, so
    that it shows), and how many more (a request of 50,000 unknown keys, or one key of a megabyte,
    was listed whole; so was ``--cuda-graphs`` of a megabyte's unknown name).

    >>> listed(["b", "a"]), listed(str(i) for i in range(7)), listed(["x" * 99])[:12], listed(["", "a"])
    ('a, b', '0, 1, 2, 3, 4 and 2 more', "'xxxxxxxxxxx", "'', a")
    """
    names = sorted(names)
    head = ", ".join(name if 0 < len(name) <= 40 else shown(name, 40) for name in names[:5])
    return head + (f" and {len(names) - 5:,} more" if len(names) > 5 else "")


def _type_error(name: str, value, wanted: str) -> InputTypeError:
    kind = {bool: "the boolean", str: "the string", type(None): ""}.get(type(value), f"the {type(value).__name__}")
    return InputTypeError(f"{name} must be {wanted}, got {kind + ' ' if kind else ''}{shown(value)}", name)


def exact(value, name: str = "value") -> Expr:
    """``value`` as an exact, finite SymPy expression, or ``InputError`` naming ``name``.

    Integral floats (``4096.0``) are integers; any other float is refused (a float turns every
    later result into an approximation).  Text is never parsed: ``symbolic_cost.reader.read`` it.

    >>> exact(3), exact(4096.0)
    (3, 4096)
    >>> exact(0.5, "es")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: es must be exact (an int, a fractions.Fraction, a SymPy Rational or a symbol), got the float 0.5; write Rational(1, 2) instead
    >>> exact("b", "b")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputTypeError: b must be a number or a SymPy expression, got the string 'b'; read text with symbolic_cost.reader.read
    """
    wanted = "a number or a SymPy expression"
    if type(value) is int:                   # the common case, with nothing to check
        return Integer(value)
    if isinstance(value, Expr):              # the other common one: nothing to convert
        return _checked(value, name)
    if isinstance(value, complex):
        raise InputTypeError(f"{name} must be a real number, got the complex {value!r}", name)
    if isinstance(value, (bool, str)) or value is None:
        hint = "; read text with symbolic_cost.reader.read" if isinstance(value, str) else ""
        raise InputTypeError(str(_type_error(name, value, wanted)) + hint, name)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"{name} must be finite, got {value}", name)
        if value.is_integer():
            return Integer(int(value))
        fraction = Fraction(value).limit_denominator(10**6)
        if fraction == 0 or abs(fraction - Fraction(value)) > abs(Fraction(value)) / 10**6:
            fraction = Fraction(repr(value))        # the decimal as typed: 1e-09 is 1/1000000000
        raise InputError(
            f"{name} must be exact (an int, a fractions.Fraction, a SymPy Rational "
            f"or a symbol), got the float {value!r}; write Rational({fraction.numerator}, "
            f"{fraction.denominator}) instead", name)
    try:
        expr = sympify(value, strict=True)
    except (SympifyError, TypeError, ValueError):
        raise _type_error(name, value, wanted) from None
    if not isinstance(expr, Expr):
        raise _type_error(name, value, wanted)
    return _checked(expr, name)


def _checked(expr: Expr, name: str) -> Expr:
    """``expr``, or ``InputError`` naming ``name`` where it holds a float, an infinity or an
    imaginary part."""
    if expr.is_Rational or expr.is_Symbol and expr.is_real:
        return expr                           # nothing inside to check
    found = _inside(expr)
    if "float" in found:
        raise InputError(f"{name} must be exact, got {expr} which contains a float", name)
    if "infinite" in found:
        raise InputError(f"{name} must be finite, got {expr}", name)
    # real symbols and no imaginary unit make a real expression: ask SymPy only otherwise
    if found and expr.is_real is False:
        raise InputError(f"{name} must be a real number, got {expr}", name)
    return expr


_NOTHING = frozenset()
_INFINITE = frozenset({nan, zoo, oo, -oo})


@functools.lru_cache(maxsize=1 << 16)
def _inside(expr) -> frozenset:
    """What ``exact`` refuses or asks about inside ``expr``: ``"float"``, ``"infinite"``,
    ``"imaginary"`` (``I``), ``"unreal symbol"`` (one not known to be real).  Remembered per
    subexpression: a model's formulas are sums of parts already checked, and walking each whole
    tree again was a sixth of building DeepSeek-V3."""
    if isinstance(expr, Float):
        return frozenset({"float"})
    if not expr.args:
        if expr in _INFINITE:
            return frozenset({"infinite"})
        if expr is I:
            return frozenset({"imaginary"})
        return frozenset({"unreal symbol"}) if expr.is_Symbol and expr.is_real is not True else _NOTHING
    return _NOTHING.union(*map(_inside, expr.args))


def _integer(value, name: str, nonnegative: bool = False) -> Expr:
    """One size: exact, and a positive (or non-negative) integer as far as SymPy can tell, of at
    most ``LARGEST_COUNT`` where it is a number."""
    if type(value) is int and (value >= 0 if nonnegative else value > 0) and value <= LARGEST_COUNT:
        return Integer(value)                # the common case, decided without SymPy's assumptions
    expr = exact(value, name)
    sign = expr.is_nonnegative if nonnegative else expr.is_positive
    if (expr.is_number and not (expr.is_integer and sign)) or sign is False or expr.is_integer is False:
        raise InputError(f"{name} must be a {'non-negative' if nonnegative else 'positive'} integer, "
                         f"got {shown(expr)}", name)
    if expr.is_Integer and expr > LARGEST_COUNT:
        raise _too_large(name, int(expr))
    return expr


def within_count(value: int, name: str) -> int:
    """``value`` (an ``int`` already checked positive) where it is at most ``LARGEST_COUNT``: a
    reader names a file's key here, not the symbol the value becomes later.

    >>> within_count(2**70, "model.hidden_size")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: model.hidden_size must be at most 2**53 (a count a double holds exactly), got one of 71 bits
    """
    if value > LARGEST_COUNT:
        raise _too_large(name, value)
    return value


LARGEST_DOUBLE = sys.float_info.max
"""The largest finite double: a figure past it (or a non-zero one below ``sys.float_info.min``)
turns every time or size computed from it into inf (or 0)."""


def within_double(value: Expr, name: str, owner: str = "") -> Expr:
    """``value`` where, if a number, it lies within a double's range; ``owner`` opens the message
    (``"system h100: "``).

    >>> within_double(Integer(10)**400, "kernel", "efficiency ")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: efficiency kernel must be within a double's range (about 2.2e-308 to 1.8e308), got 1.000E+400
    """
    if value.is_number and (value > LARGEST_DOUBLE or 0 < value < sys.float_info.min):
        raise InputError(f"{owner}{name} must be within a double's range (about 2.2e-308 to 1.8e308), got "
                         f"{value.evalf(4)}", name)
    return value


def _too_large(name: str, value: int) -> InputError:
    """The refusal of a count past ``LARGEST_COUNT``, its size in bits (printing it may take long)."""
    return InputError(f"{name} must be at most 2**53 (a count a double holds exactly), got one of "
                      f"{value.bit_length():,} bits", name)


def whole(value):
    """``value`` where it is an integral float or a numpy integer as the Python ``int`` it is
    (``4096.0`` and ``numpy.int64(4096)`` are 4096); anything else as given, for the rules to
    check.  A float kept in a value would turn every result built from it into an approximation,
    and SymPy's cache would hand that approximation to equal inputs built later.

    >>> whole(4096.0), whole(2.5), whole(True), whole("b")
    (4096, 2.5, True, 'b')
    """
    if isinstance(value, float):                 # numpy's float64 too
        return int(value) if value.is_integer() else value
    if isinstance(value, numbers.Integral) and hasattr(value, "dtype"):
        return int(value)                        # numpy's integers (a SymPy Integer stays exact as it is)
    return value


def settle(record, *names: str) -> None:
    """``whole`` of each field ``names`` of the frozen dataclass ``record``, stored in place: what a
    value's ``__post_init__`` does first, so that its rules and every reader see exact numbers."""
    for name in names:
        value = getattr(record, name)
        settled = whole(value)
        if settled is not value:
            object.__setattr__(record, name, settled)


def positive_dims(**dims) -> dict[str, Expr]:
    """The dimensions as exact expressions, refusing decidable non-positive or non-integer values.

    >>> positive_dims(b=2, l=0)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: l must be a positive integer, got 0
    """
    return {name: _integer(value, name) for name, value in dims.items()}


def counts(**dims) -> dict[str, Expr]:
    """Like ``positive_dims`` for numbers that may be zero (rows of a position table, ...).

    >>> counts(positions=0, token_types=-1)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: token_types must be a non-negative integer, got -1
    """
    return {name: _integer(value, name, nonnegative=True) for name, value in dims.items()}


def positive(value, name: str) -> Expr:
    """An element size (bytes per value): exact, finite and positive, not necessarily integral
    (a 4-bit value is ``1/2`` byte).

    >>> positive(-2, "es")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: es must be positive, got -2
    """
    expr = exact(value, name)
    if expr.is_positive is False or (expr.is_number and not expr.is_positive):
        raise InputError(f"{name} must be positive, got {expr}", name)
    return expr


WIDEST_ELEMENT = 16
"""The most bytes an element takes: a complex128 (the widest type a PyTorch tensor holds; the
models' widest is fp32 or fp64)."""


def element_size(value, name: str) -> Expr:
    """A tensor's bytes per element: ``positive``, and at most ``WIDEST_ELEMENT``.

    >>> element_size(2**53 + 1, "mask_bytes")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: mask_bytes is bytes per element: at most 16 (a complex128, the widest type a tensor holds), got 9007199254740993
    """
    expr = positive(value, name)
    if expr.is_number and expr > WIDEST_ELEMENT:
        raise InputError(f"{name} is bytes per element: at most {WIDEST_ELEMENT} (a complex128, the widest type a "
                         f"tensor holds), got {expr}", name)
    return expr


def fits(symbol: Symbol, value, name: str | None = None) -> Expr:
    """``value`` checked against what ``symbol`` promises (positive, integer), as far as it is
    decidable; new symbols of ``symbols.py`` are checked by their own assumptions.

    >>> from sympy import Symbol
    >>> fits(Symbol("b", positive=True, integer=True), Integer(3) / 2)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: b must be a positive integer, got 3/2
    """
    name = name or str(symbol)
    if symbol.is_integer:
        return _integer(value, name, nonnegative=not symbol.is_positive)
    return positive(value, name) if symbol.is_positive else exact(value, name)


def count(value, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    """A plain Python ``int`` (not a boolean) in ``[minimum, maximum]``: a number of devices,
    of rows to list, of layers to show.

    >>> count(0, "devices")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: devices must be an integer >= 1, got 0
    """
    value = int(value) if isinstance(value, Integer) else value if isinstance(value, (bool, float)) \
        else whole(value)                    # numpy's integers and SymPy's are integers
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(name, value, "an integer")
    if value < minimum or (maximum is not None and value > maximum):
        largest = "2**53" if maximum == 2**53 else f"{maximum:,}" if maximum is not None else None
        bound = f"between {minimum} and {largest}" if largest is not None else f">= {minimum}"
        raise InputError(f"{name} must be an integer {bound}, got {value}", name)
    if value > LARGEST_COUNT:
        raise InputError(f"{name} must be an integer of at most {LARGEST_COUNT:,} (2**53), got one of "
                         f"{value.bit_length():,} bits", name)
    return value


LARGEST_COUNT = 2**53
"""The largest count ``count`` takes where no smaller maximum applies, and the largest number
``positive_dims`` and ``counts`` take: a double holds every integer up to it, and the numeric
paths (sweeps, compiled kernels) compute in doubles.  No model or step comes near it (a NeMo
YAML's hidden_size of 10^21 printed 10^17 GiB collectives, ``b = 10**30`` a step of 10^27 s)."""


def given_counts(**values) -> tuple:
    """Each of ``values`` that is given (not ``None``) as a ``count``: what a framework reader
    takes beside its file (the world size, a vocabulary, devices per node), checked as the
    command line checks them, so that a Python caller gets the same refusal.

    >>> given_counts(world=8, vocab=None)
    (8, None)
    >>> given_counts(world=0)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: world must be an integer between 1 and 2**53, got 0
    """
    return tuple(None if value is None else count(value, name, maximum=2**53) for name, value in values.items())


def flag(value, name: str) -> bool:
    """A boolean that is a boolean (``1`` or ``"false"`` is refused)."""
    if not isinstance(value, bool):
        raise _type_error(name, value, "True or False")
    return value


def progress_flag(value, name: str = "progress"):
    """What a long run says of its progress: ``True`` (a bar or lines on stderr), ``False``
    (nothing) or a callable given each line; text is no flag (``"no"`` would turn it on)."""
    if not isinstance(value, bool) and not callable(value):
        raise InputTypeError(f"{name} must be True, False or a callable taking a line, got {shown(value)}", name)
    return value


def text_flag(value, name: str) -> bool:
    """A boolean as a configuration file written by hand holds one, and as transformers' argument
    parser reads it: ``true``/``false``, or their text in any case (``1`` or ``"yes"`` refused).

    >>> text_flag("True", "bf16"), text_flag(False, "bf16")
    (True, False)
    """
    text = str(value).lower()
    if not isinstance(value, (bool, str)) or text not in ("true", "false"):
        raise InputError(f"{name} must be true or false, got {value!r}", name)
    return text == "true"


def instance(value, kind: type, name: str, how: str = ""):
    """``value`` if it is a ``kind``, else ``InputTypeError`` naming ``name`` and, in ``how``, where
    a ``kind`` comes from: what a public entry point says for a preset's name, a dict or ``None``
    passed where its model, training or cost belongs (rather than an ``AttributeError`` deep inside).

    >>> instance("gpt2", int, "arch", " (models.config.preset builds one)")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputTypeError: arch must be an int (models.config.preset builds one), got the string 'gpt2'
    """
    if not isinstance(value, kind):
        article = "an" if kind.__name__[0].lower() in "aeiou" else "a"
        raise _type_error(name, value, f"{article} {kind.__name__}{how}")
    return value


def file_text(text, option: str, name: str = "") -> str:
    """A file's contents as a ``str``, what every framework reader takes: ``option`` (the
    command-line option that gives such a file) and ``name`` (the file's) name it in a refusal.

    >>> file_text(b"{}", "--deepspeed", "ds.json")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputTypeError: --deepspeed ds.json's text must be a str (the file's contents: Path(...).read_text()), got the bytes b'{}'
    """
    if not isinstance(text, str):
        raise _type_error(f"{option} {name}'s text" if name else f"{option}'s text", text,
                          "a str (the file's contents: Path(...).read_text())")
    return text


def choice(value, name: str, allowed) -> object:
    """One of ``allowed`` (compared by equality and type, so ``True`` is not ``1``)."""
    if not any(value == a and type(value) is type(a) for a in allowed):
        raise InputError(f"{name} must be one of {', '.join(map(str, allowed))}, got {shown(value)}", name)
    return value


def divides(dims: dict, divisor: str, dividend: str, why: str = "") -> None:
    """Raise unless ``dims[divisor]`` divides ``dims[dividend]`` (when decidable; ``check_rules``)."""
    top, bottom = sympify(dims[dividend]), sympify(dims[divisor])
    whole = top.p % bottom.p == 0 if top.is_Integer and bottom.is_Integer else _whole(top, bottom)
    if not whole:
        raise InputError(f"{divisor} must divide {dividend} (got {divisor}={dims[divisor]}, {dividend}="
                         f"{dims[dividend]}){f'; {why}' if why else ''}", divisor)


@functools.lru_cache(maxsize=4096)
def _whole(top: Expr, bottom: Expr) -> bool:
    """Whether ``top / bottom`` may be an integer (an assumption query, asked once per pair: every
    layer of a model asks the same).  A positive integer symbol may divide any integer or integer
    symbol: no query (the first one a process asks is slow)."""
    if bottom.is_Symbol and (top.is_Integer or top.is_Symbol):
        return True
    return (top / bottom).is_integer is not False


WHY = {
    ("h", "e"): "h, the attention heads, split e, the hidden size, into whole head dimensions",
    ("m1", "h"): "each tensor-parallel rank (m1 of them) runs whole attention heads (h)",
    ("m1", "f"): "each tensor-parallel rank (m1 of them) holds whole columns of the MLP's hidden size (f)",
    ("s1", "m1"): "sequence shards live inside the tensor-parallel group",
    ("m1", "s1"): "a mixture-of-experts layer under tensor parallelism runs with s1 = m1",
    ("kv_heads", "h"): "each key/value head serves a whole group of query heads",
    ("m1", "kv_heads"): "each device needs whole key/value heads",
    ("p", "n_layers"): "each pipeline stage holds whole layers",
    ("shard", "d"): "each of the d/shard replica groups of ZeRO-3/FSDP (HSDP) holds shard whole ranks",
    ("p", "micro_batches"): "Megatron-LM's interleaved schedule runs the micro-batches in rounds of p",
    ("p x virtual_stages", "n_layers"): "each of a rank's virtual_stages chunks holds whole layers",
    ("p x virtual_stages x recompute_layers", "n_layers"): "full recomputation's uniform groups of recompute_layers "
                                                            "divide a model chunk's layers",
}
"""The reason printed with a broken divisibility rule (none needed for the obvious ones)."""

MODEL_RULES = (("h", "e"), ("m1", "h"), ("m1", "f"), ("s1", "l"), ("s1", "m1"), ("kv_heads", "h"),
               ("m1", "kv_heads"))
"""``(divisor, dividend)`` rules of a transformer layer under 1-D tensor and sequence parallelism."""

PIPELINE_RULES = (("p", "n_layers"),)
"""Pipeline stages of an even split hold whole layers."""

INTERLEAVED_RULES = (("p", "micro_batches"), ("p x virtual_stages", "n_layers"))
"""The interleaved schedule's: micro-batches in whole rounds of ``p``, whole layers in each chunk."""


def check_rules(dims: dict[str, Expr], rules=MODEL_RULES) -> dict[str, Expr]:
    """Make ``dims`` positive and exact, then apply every ``(divisor, dividend)`` rule whose
    two dimensions are present; returns the exact dimensions.

    >>> check_rules(dict(e=64, h=8, m1=3))
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: m1 must divide h (got m1=3, h=8); each tensor-parallel rank (m1 of them) runs whole attention heads (h)
    """
    dims = positive_dims(**dims)
    for divisor, dividend in rules:
        if divisor in dims and dividend in dims:
            divides(dims, divisor, dividend, WHY.get((divisor, dividend), ""))
    return dims


def grid_rules(dims: dict, grid: dict, rules=MODEL_RULES, what: str = "--grid") -> None:
    """Apply ``rules`` to every combination of the ``grid`` values (``{symbol: [ints]}``) that
    ``dims`` (``{name: expression}``) depend on, and make each of those sizes a positive
    integer; a rule is tried on the product of the axes it involves only, never on the whole grid.

    >>> from sympy import Symbol
    >>> m1 = Symbol("m1", positive=True, integer=True)
    >>> grid_rules({"h": 12, "m1": m1}, {m1: [1, 2, 5]}, rules=[("m1", "h")])
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: --grid at m1=5: m1 must divide h (got m1=5, h=12); each tensor-parallel rank (m1 of them) runs whole attention heads (h)
    """
    tests = [((name,), None) for name in dims] + [((a, b), (a, b)) for a, b in rules if a in dims and b in dims]
    for names, rule in tests:
        exprs = {name: sympify(dims[name]) for name in names}
        axes = [s for s in grid if any(expr.has(s) for expr in exprs.values())]
        if not axes:
            continue                      # no swept symbol: checked where the numbers are used
        for point in itertools.product(*(grid[s] for s in axes)):
            at = dict(zip(axes, map(Integer, point)))
            values = {name: expr.subs(at) for name, expr in exprs.items()}
            try:
                if rule is None:
                    positive_dims(**values)
                else:
                    divides(values, *rule, WHY.get(rule, ""))
            except InputError as error:
                shown_at = ", ".join(f"{s}={v}" for s, v in at.items())
                raise InputError(f"{what} at {shown_at}: {error}", what) from None


def repeated_keys(pairs) -> set:
    """The keys named more than once among ``pairs`` (a JSON object's, as ``object_pairs_hook`` gets
    them), found with a set: counting each key in the list made an object of many keys quadratic.

    >>> sorted(repeated_keys([("a", 1), ("b", 2), ("a", 3)]))
    ['a']
    """
    seen, twice = set(), set()
    for key, _ in pairs:
        (twice if key in seen else seen).add(key)
    return twice


def listed_once(values, argument: str, said: str = "listed", rule: str = "list each value once") -> None:
    """Refuse a value that ``values`` (an option's list: ``--cp 1,1``, ``--grid b=1,1``, a search
    ``Space`` field) holds twice, naming ``argument`` and each such value: a list read into a set, or
    tried value by value, dropped the repeat silently or answered it twice.  Values are compared as
    Python compares them (``1`` and ``1.0`` are one value); the set keeps a long list linear.

    >>> listed_once([1, 2, 4], "--cp")
    >>> listed_once([1, 2, 1, 2], "--cp")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: --cp: 1, 2 listed twice: list each value once
    """
    seen, twice, loose = set(), {}, []
    for value in values:
        try:
            if value in seen:
                twice[value] = None       # a dict: each value said once, in the order listed
            seen.add(value)
        except TypeError:                 # unhashable (a list in the list): compared one by one
            if value in loose:
                raise InputError(f"{argument}: {shown(value)} {said} twice: {rule}", argument) from None
            loose.append(value)
    if twice:
        raise InputError(f"{argument}: {', '.join(map(str, twice))} {said} twice: {rule}", argument)


def timed(duration: float) -> float:
    """A simulated step's ``duration`` (seconds), refused unless finite and positive: a step model
    may be any callable (``inference.load.serve``, ``docs/inference.md``), and a NaN step never let
    the simulation's clock pass an arrival.

    >>> timed(0.25)
    0.25
    >>> timed(float("nan"))
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: step: a step must take a finite positive time, got nan s
    """
    if type(duration) is not float and (isinstance(duration, bool) or not isinstance(duration, numbers.Real)) \
            or not 0 < duration < math.inf:       # a float, the simulation's every step, skips the ABC's check
        raise InputError(f"step: a step must take a finite positive time, got {duration!r} s", "step")
    return duration
