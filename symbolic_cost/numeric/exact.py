"""Exact numbers for one configuration at a time, without ``subs`` on the expression tree.

``exact_function`` compiles an expression set once into plain Python over
integers and exact rationals (``rationals.RATIONAL``: GMP's ``mpq`` with the
``fast`` extra, else ``fractions.Fraction``; common subexpressions computed once,
those that read one or two symbols remembered by their numbers, rational constants built once, ``Max``/``Min`` as ``max``/``min``, ceilings,
floors and ``Log2`` on exact numbers); calling it with exact values returns
SymPy ``Integer``/``Rational`` results equal to substituting them, in well
under a millisecond for a whole model.  Only what is irrational by nature
(a ``log`` or a fractional power) comes back as a float.

``model_function`` does this for a whole model: the model is built once with
the batch, sequence and parallel degrees as symbols, and each call checks the
numbers with the same rules ``model_cost`` applies before evaluating.
"""

from __future__ import annotations

import keyword
import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Mapping, Sequence

from sympy import Expr, Integer, Rational, Symbol, cse, lambdify, numbered_symbols, sympify
from sympy.printing.pycode import PythonCodePrinter

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.blocks.moe import MOE_RULES, check_sequence_parallel
from symbolic_cost.models.placement import placed_by_p
from symbolic_cost.checks import MODEL_RULES, InputError, InputTypeError, check_rules, exact, instance, shown
from symbolic_cost.collector import paused
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.architecture import MADE_BY
from symbolic_cost.models.experts import expert_degrees
from symbolic_cost.models.totals import check_schedule
from symbolic_cost.models.training import check_model
from symbolic_cost.numeric.compile import expression
from symbolic_cost.parallel.expert import expert_data_degree
from symbolic_cost.rationals import RATIONAL, is_whole, to_sympy
from symbolic_cost.symbols import resolve_names
from symbolic_cost.timing.step import step_time_breakdown

_MEMORY: dict = {}


def _log2(n):
    """``ceil(log2 n)`` exactly for an integer ``n`` (``parallel.collectives.Log2``)."""
    if is_whole(n):
        return (int(n) - 1).bit_length()
    return math.ceil(math.log2(n))


NAMESPACE = {"math": math, "_log2": _log2}
"""What the generated code calls besides Python's built-ins."""


class _Printer(PythonCodePrinter):
    """Python over ints and ``RATIONAL``: rationals become named constants, ``x**-k`` a ``RATIONAL`` quotient."""

    def __init__(self, settings=None):
        super().__init__(settings)
        self.constants: dict[str, object] = {"_one": RATIONAL(1)}

    def _print_Rational(self, expr):
        name = f"_q{len(self.constants)}"
        self.constants[name] = RATIONAL(int(expr.p), int(expr.q))
        return name

    def _print_Integer(self, expr):
        return str(int(expr))

    def _print_Mul(self, expr):
        return "*".join(f"({self._print(factor)})" for factor in expr.args)   # no float '/'

    def _print_Pow(self, expr, rational=False):
        if expr.exp.is_Integer and expr.exp < 0:         # an exact quotient, inline (no call)
            power = "" if expr.exp == -1 else f"**{-int(expr.exp)}"
            return f"(_one/({self._print(expr.base)}){power})"
        if expr.exp.is_Integer:
            return f"({self._print(expr.base)})**{int(expr.exp)}"
        return super()._print_Pow(expr, rational)

    def _print_Max(self, expr):
        return f"max({', '.join(map(self._print, expr.args))})"

    def _print_Min(self, expr):
        return f"min({', '.join(map(self._print, expr.args))})"

    # ceiling(p/q x) = -floor(-p x / q) and floor(p/q x) = floor(p x / q): Python's floor division,
    # exact on ints and rationals alike, where ``math`` would first build the rational p/q x
    def _print_ceiling(self, expr):
        p, q, rest = self._fraction(expr.args[0])
        return f"math.ceil({self._print(expr.args[0])})" if q == 1 else f"(-((-{p}*({rest}))//{q}))"

    def _print_floor(self, expr):
        p, q, rest = self._fraction(expr.args[0])
        return f"math.floor({self._print(expr.args[0])})" if q == 1 else f"(({p}*({rest}))//{q})"

    def _fraction(self, expr):
        """``expr`` as ``p/q`` times the printed rest (``q`` 1 where its coefficient is whole)."""
        coefficient, rest = expr.as_coeff_Mul()
        if not coefficient.is_Rational or coefficient.is_Integer:
            return None, 1, None
        return int(coefficient.p), int(coefficient.q), self._print(rest)

    def _print_Log2(self, expr):
        return f"_log2({self._print(expr.args[0])})"


@dataclass(frozen=True)
class Exact:
    """An expression set compiled for exact evaluation: call it with exact values for ``symbols``."""

    names: tuple[str, ...]
    symbols: tuple[Symbol, ...]
    function: object

    def __call__(self, values: Mapping) -> dict[str, Expr]:
        values = resolve_names(values)
        missing = [str(s) for s in self.symbols if s not in values]
        if missing:
            raise InputError(f"exact evaluation needs values for {', '.join(missing)}", missing[0])
        return self.at([_exact_number(values[s], s.name) for s in self.symbols])

    def at(self, numbers) -> dict[str, Expr]:
        """The results at exact ``numbers``, one for each of ``symbols`` in order; refused where an
        expression has no value there (a division by zero, a logarithm of 0) or an integer past the
        digits Python converts."""
        if isinstance(numbers, (str, bytes)) or not isinstance(numbers, Sequence) or len(numbers) != len(self.symbols):
            raise InputTypeError(f"numbers must be a list of {len(self.symbols)} exact numbers, one for each of "
                                 f"{', '.join(map(str, self.symbols)) or 'no symbol'}, got {shown(numbers)}", "numbers")
        # text would be repeated ("1" * 2), a float rounded: each an exact number, as __call__ makes it
        numbers = [n if type(n) is int or isinstance(n, RATIONAL) else _exact_number(n, str(s))
                   for s, n in zip(self.symbols, numbers)]
        try:
            return dict(zip(self.names, map(to_sympy, self.function(*numbers))))
        except (ZeroDivisionError, ValueError, OverflowError) as error:
            given = ", ".join(f"{s}={n}" for s, n in zip(self.symbols, numbers))
            raise InputError(f"the expressions have no exact value at {given}: {error}", "values") from None


def _exact_number(value, name: str):
    if type(value) is int:                # the common case, with nothing to check
        return value
    if isinstance(value, bool) or not isinstance(value, (int, Fraction, Integer, Rational)):
        raise InputTypeError(f"{name} must be an exact number (an int, a Fraction or a SymPy Rational) "
                             f"for exact evaluation, got {value!r}", name)
    if isinstance(value, Rational):
        return int(value) if value.is_Integer else RATIONAL(int(value.p), int(value.q))
    return RATIONAL(value.numerator, value.denominator) if isinstance(value, Fraction) else value


def exact_function(exprs: Mapping[str, object], symbols=None) -> Exact:
    """Compile ``{name: expression}`` for exact evaluation over ``symbols`` (default: every free
    symbol, by name); cached per expression set.

    >>> from sympy import Max
    >>> from symbolic_cost.symbols import b, l
    >>> f = exact_function({"share": Max(b, l) / 3, "tokens": b * l})
    >>> f({"b": 2, "l": 5})
    {'share': 5/3, 'tokens': 10}
    """
    instance(exprs, Mapping, "exprs", " of names to expressions ({'flops': cost.flops_fwd, ...})")
    names = tuple(exprs)
    values = tuple(expression(exprs[n], f"exprs[{n!r}]") for n in names)
    if symbols is None:
        symbols = sorted(set().union(*(v.free_symbols for v in values)), key=str)
    symbols = tuple(resolve_names({s: None for s in symbols}))
    key = (names, values, symbols)
    if key not in _MEMORY:
        printer = _Printer({"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": False})
        if all(s.name.isidentifier() and not keyword.iskeyword(s.name) and not s.name.startswith("_")
               for s in symbols):
            function = _grouped_function(symbols, values, printer)
        else:                                # names Python cannot take as arguments: lambdify's own
            function = lambdify(symbols, list(values), modules=[dict(NAMESPACE)], printer=printer, cse=True)
            function.__globals__.update(printer.constants)     # the rational constants, built once
        _MEMORY[key] = Exact(names, symbols, function)
    return _MEMORY[key]


def _groups(replacements, reads) -> dict:
    """``_grouped_function``'s groups, ``{symbols read: names}`` in the order they are computed
    (fewer symbols first): the subexpressions that read only those one or two symbols and,
    besides each other, only the groups before, where they hold ``GROUP_OPERATIONS`` or more."""
    wanted: dict = {}
    for name, _ in replacements:
        if 0 < len(reads[name]) <= 2:
            wanted.setdefault(reads[name], []).append(name)
    uses = {name: value.free_symbols for name, value in replacements}
    groups, ready = {}, set()
    for k in sorted(wanted, key=lambda k: (len(k), sorted(map(str, k)))):
        members = set(wanted[k])
        while True:                  # drop what reads a subexpression computed after the group
            late = {m for m in members if any(u in reads and u not in members and u not in ready for u in uses[m])}
            if not late:
                break
            members -= late
        if sum(value.count_ops() for name, value in replacements if name in members) >= GROUP_OPERATIONS:
            groups[k] = members
            ready |= members
    return groups


GROUP_OPERATIONS = 8
"""Operations of the common subexpressions that read the same one or two symbols from which
their values are remembered by those symbols' numbers (``_grouped_function``): fewer cost less
than the look-up."""
GROUP_MEMORY = 4096
"""Numbers a group remembers its values for before it forgets them all."""


def _grouped_function(symbols, values, printer):
    """A function of exact numbers for ``symbols`` that computes ``values``: SymPy's common
    subexpressions in order, those that read only one or two of the symbols in groups by the
    symbols they read (``_groups``), each group a function of its own computed once for each of
    its symbols' numbers and remembered (a model's tile and wave counts read ``m1`` alone, its
    token counts ``b`` and ``l``: a sweep or a search asks for the same few numbers of each again
    and again); then the rest, with the groups' values as arguments.

    >>> from symbolic_cost.symbols import b, l
    >>> f = _grouped_function((b, l), [b * l + (b * l) ** 2, b + 1], _Printer())
    >>> f(2, 3), f.groups
    ([42, 3], [])
    """
    replacements, reduced = cse(list(values), symbols=numbered_symbols("_x"))
    inputs, reads = set(symbols), {}
    for name, value in replacements:
        reads[name] = frozenset().union(*({s} if s in inputs else reads.get(s, frozenset()) for s in value.free_symbols))
    groups = _groups(replacements, reads)
    grouped = set().union(*groups.values()) if groups else set()
    parts, exports = [], []
    for k, members in groups.items():
        inner = [(n, v) for n, v in replacements if n in members]
        outside = set().union(*(r.free_symbols for r in reduced),
                              *(v.free_symbols for n, v in replacements if n not in members))
        kept = [n for n, _ in inner if n in outside]
        earlier = sorted(set().union(*(v.free_symbols for _, v in inner)) - members - inputs, key=str)
        at = [i for i, s in enumerate(symbols) if s in k]
        function = _lambdified([symbols[i] for i in at] + earlier, kept, inner, printer)
        parts.append((at, [exports.index(e) for e in earlier], function, {}))
        exports += kept
    rest = [(n, v) for n, v in replacements if n not in grouped]
    main = _lambdified(list(symbols) + exports, list(reduced), rest, printer)

    def exact(*numbers):
        found = []
        for at, earlier, function, memory in parts:
            key = tuple(numbers[i] for i in at)
            got = memory.get(key)
            if got is None:
                got = function(*key, *(found[i] for i in earlier))
                if len(memory) >= GROUP_MEMORY:
                    memory.clear()
                memory[key] = got
            found.extend(got)
        return main(*numbers, *found)
    exact.groups = [tuple(str(symbols[i]) for i in at) for at, *_ in parts]     # what each group reads
    return exact


def _lambdified(arguments, outputs, replacements, printer):
    """SymPy's ``lambdify`` of ``outputs`` over ``arguments`` with ``printer``, computing the
    common subexpressions ``replacements`` (already found) first."""
    function = lambdify(arguments, list(outputs), modules=[dict(NAMESPACE)], printer=printer,
                        cse=lambda _: (replacements, list(outputs)))
    function.__globals__.update(printer.constants)     # the rational constants, built once
    return function


DEGREES = ("b", "l", "m1", "s1", "d", "p", "n_micro")
FIELDS = ("parameters", "parameters_per_device", "flops_fwd", "flops_bwd", "flops_recompute",
          "model_flops_fwd", "model_flops_bwd", "weight_bytes", "gradient_bytes", "optimizer_bytes",
          "activation_bytes", "memory_bytes", "bubble")
"""The ``ModelCost`` totals ``model_function`` returns, besides the step time by part (``step_*``)."""
CHECKED = 65536
"""Configurations whose numbers ``model_function`` remembers as checked (building a ``Training``
to check them costs more than evaluating a whole model)."""


def model_function(arch, system="h100", conventions=None, **policy):
    """``evaluate(b=..., l=..., m1=..., s1=..., d=..., p=..., n_micro=...)`` (and ``ep``, ``etp``
    for a mixture of experts): exact ``FIELDS`` and step time by part (``step_compute`` ...
    ``step_total``) of ``arch`` trained with ``policy`` (``Training``'s other fields: ``zero``,
    ``recompute``, ``flash``, ``precision`` ...) on ``system``, equal to ``model_cost`` with those
    numbers.  The model is built and compiled once; each call checks the numbers with the rules
    ``model_cost`` applies (``check_numbers``) and evaluates.  Where which layers a pipeline
    rank holds depends on ``p`` (dense and MoE layers, global and windowed ones, uneven
    stages: ``models.placement.Placement``) the model is built once for each ``p`` asked for.

    >>> from symbolic_cost.models.config import preset
    >>> evaluate = model_function(preset("gpt2"), zero=1)
    >>> evaluate(b=8, l=1024, d=4)["parameters"]
    124439808
    """
    instance(arch, Architecture, "arch", MADE_BY)
    chosen = conv.get(conv.DEFAULT if conventions is None else conventions)
    names = DEGREES + (("ep", "etp") if arch.moe is not None else ())
    fixed = sorted(set(policy) & {*names, "micro_batches"}, key=str)
    if fixed:                   # Training would take it twice: once from the policy, once from evaluate's numbers
        raise InputError(f"model_function's policy fixes {fixed[0]}, a number evaluate() takes: pass it there "
                         f"(evaluate({'n_micro' if fixed[0] == 'micro_batches' else fixed[0]}=...))", fixed[0])
    symbolic = {n: S.BY_NAME[n] for n in names}
    by_stage = placed_by_p(arch, policy)
    functions = {}

    def function_for(p):
        """The compiled totals, with ``p`` a symbol, or (``by_stage``: which layers a rank holds
        depends on ``p``, ``models.placement.Placement``) built for each ``p`` asked for."""
        key = p if by_stage else None
        if key not in functions:
            with paused():
                degrees = {**symbolic, "p": p} if by_stage else symbolic
                cost = model_cost(arch, Training(**_training_degrees(degrees), **policy), chosen)
                exprs = {**{f: getattr(cost, f) for f in FIELDS},
                         **{f"step_{k}": v for k, v in step_time_breakdown(cost, system, chosen).items()}}
                functions[key] = exact_function(exprs, [symbolic[n] for n in names if n != "p" or not by_stage])
        return functions[key]

    if not by_stage:
        function_for(None)
    checked: set = set()
    check = _Checks(arch, policy)
    defaults = {"b": 1, "l": arch.context or 2048, "m1": 1, "s1": 1, "d": 1, "p": 1, "n_micro": 1, "ep": 1}
    allowed, start = frozenset(names), {n: defaults.get(n) for n in names}

    def evaluate(**values):
        if not allowed.issuperset(values):
            unknown = sorted(set(values) - allowed)
            raise InputTypeError(f"model_function takes {', '.join(names)}, got {', '.join(unknown)}", unknown[0])
        chosen_values = {**start, **values}
        if "etp" in names and chosen_values["etp"] is None:
            chosen_values["etp"] = chosen_values["m1"]       # Megatron-LM's default, as Training's
        seen = tuple(chosen_values.values())
        try:
            new = seen not in checked
        except TypeError:            # an unhashable value (a list): refused by kind, as any inexact one is
            for name, value in chosen_values.items():
                _exact_number(value, name)
            raise
        if new:                      # the rules depend on these numbers only: checked once each
            check(chosen_values)
            checked.add(seen) if len(checked) < CHECKED else None
        function = function_for(chosen_values["p"])
        return function.at([_exact_number(chosen_values[s.name], s.name) for s in function.symbols])
    return evaluate


class _Checks:
    """``model_function``'s check of a configuration's numbers: the ``Training`` they make with
    the policy, and the rules ``model_cost`` applies (``check_numbers``), each part checked once
    for the numbers it reads.  A ``Training``'s values are built once each (``Batch`` from ``b``,
    ``l``, ``n_micro``; ``Degrees`` from ``m1``, ``s1``, ``d``; ``Pipeline`` from ``p``; ``Experts``
    from ``ep``, ``etp``) on the policy's own values, so a new configuration that shares a part
    with an earlier one validates only what differs; the ``Training`` itself (its rules across
    values) is built only where one of the numbers' three spans (``_spans``) is new: a new
    configuration made of spans that passed costs a few set lookups.  A policy that does not make a ``Training`` at the default
    numbers builds each one from the flat keywords, as ``Training(**...)`` does."""

    def __init__(self, arch, policy: dict):
        self.arch, self.policy, self.parts, self.passed = arch, policy, {}, set()
        self.heads = _heads(arch)
        try:
            self.base = Training(**policy)
        except InputError:
            self.base = None

    def _part(self, kind: str, key: tuple, build):
        if (kind, key) not in self.parts:
            made = build()                  # refused numbers raise here, and are not remembered
            if len(self.parts) < CHECKED:
                self.parts[(kind, key)] = made
            return made
        return self.parts[(kind, key)]

    def training(self, v: Mapping) -> Training:
        """The ``Training`` of the numbers ``v`` with the policy."""
        base = self.base
        if base is None:
            return Training(**_training_degrees(v), **self.policy)
        experts = base.experts
        if "ep" in v:
            experts = self._part("experts", (v["ep"], v["etp"]), lambda: replace(base.experts, ep=v["ep"], etp=v["etp"]))
        return Training(batch=self._part("batch", (v["b"], v["l"], v["n_micro"]),
                                         lambda: replace(base.batch, b=v["b"], l=v["l"], micro_batches=v["n_micro"])),
                        degrees=self._part("degrees", (v["m1"], v["s1"], v["d"]),
                                           lambda: replace(base.degrees, m1=v["m1"], s1=v["s1"], d=v["d"])),
                        pipeline=self._part("pipeline", (v["p"],), lambda: replace(base.pipeline, p=v["p"])),
                        context=base.context, experts=experts, recomputation=base.recomputation,
                        sharding=base.sharding, numerics=base.numerics, execution=base.execution,
                        trainable=base.trainable)

    def __call__(self, v: Mapping) -> None:
        spans = self._spans(v)
        if self.passed.issuperset(spans):     # every part seen and passed: no Training to build
            return
        t = self.training(v)
        for name, key, run in _number_checks(self.arch, t, self.heads):
            if (name, key) not in self.passed:
                run()
                self.passed.add((name, key)) if len(self.passed) < CHECKED else None
        self.passed.update(spans) if len(self.passed) < CHECKED else None

    @staticmethod
    def _spans(v: Mapping) -> tuple:
        """What every rule reads, in three spans: the ``Batch`` (``b``, ``l``, ``n_micro``), the
        schedule (``p``, ``n_micro``: the ``Pipeline`` and ``check_schedule``), and the grid with
        the sequence (``l``, ``m1``, ``s1``, ``d``, ``ep``, ``etp``: the ``Degrees`` and ``Experts``,
        ``Training``'s own rules across values, and the layer's, the model's and the expert grid's
        rules).  A configuration whose three spans each passed with the policy passes as a whole:
        every rule reads the numbers of one span only."""
        return (("batch span", (v["b"], v["l"], v["n_micro"])), ("schedule span", (v["p"], v["n_micro"])),
                ("grid span", (v["l"], v["m1"], v["s1"], v["d"], v.get("ep"), v.get("etp"))))


def _training_degrees(values: Mapping) -> dict:
    out = {k: values[k] for k in ("b", "l", "m1", "s1", "d", "p")}
    out["micro_batches"] = values["n_micro"]
    out.update({k: values[k] for k in ("ep", "etp") if k in values})
    return out


def check_numbers(arch, training) -> None:
    """The rules ``model_cost`` applies to the numbers of a training: the layer's divisibility
    rules (``checks.MODEL_RULES``), the model's (the context; ``models.training.check_model``),
    the pipeline's (whole layers a stage, the schedule's), and the expert grid's
    (``parallel.expert``, ``blocks.moe``)."""
    for _, _, run in _number_checks(arch, training):
        run()


def _number_checks(arch, t: Training, heads=None) -> list:
    """``check_numbers``' rules as ``(name, the numbers it reads, check)``: for one model and
    policy, a rule that passed for its numbers passes again for them.  The model's own rules
    (``models.training.check_model``: the context, what context parallelism splits, the expert
    grid's fold) read every degree but the batch, the pipeline and the micro-batches.  ``heads``:
    the model's sizes the layer's rules read (``_heads``), when the caller keeps them."""
    heads = heads or _heads(arch)
    batch, degrees, experts = t.batch, t.degrees, t.experts       # read once: a new configuration's cost
    l, m1, s1 = batch.l, degrees.m1, degrees.s1
    grid = (m1, s1, degrees.d, experts.ep, experts.etp)
    checks = [("layer", (l, m1, s1), lambda: check_rules(dict(**heads, l=l, m1=m1, s1=s1), MODEL_RULES)),
              ("model", (l, *grid), lambda: check_model(arch, t)),
              ("schedule", (t.pipeline.p, batch.micro_batches),
               lambda: check_schedule(t, exact(arch.depth), exact(t.p), exact(t.micro_batches)))]
    if arch.moe is not None:
        def expert_grid():
            ep, etp = expert_degrees(t, t.m1)
            expert_data_degree(t.m1, t.d, ep, etp, t.cp)
            check_sequence_parallel(exact(t.m1), exact(t.s1))
            check_rules(dict(ep=ep, experts=arch.moe.experts, etp=etp, expert_f=arch.moe.expert_f), MOE_RULES)
        checks.append(("experts", grid, expert_grid))
    return checks


def _heads(arch) -> dict:
    """The sizes of ``arch`` that the layer's divisibility rules read (``checks.MODEL_RULES``)."""
    return dict(**({"e": arch.e} if arch.head_dim is None else {}), h=arch.h, f=arch.f, kv_heads=arch.kv)
