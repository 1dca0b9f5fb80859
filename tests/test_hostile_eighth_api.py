"""Issue 66, an eighth probe: the Python API as a user calls it (the time model's ``System`` and
``Efficiency`` built by hand or with ``.but``, the numeric helpers, ``config.json`` dicts, the
analysis helpers) with hostile values (0, -1, 2**53 + 1, 10**400, NaN, text, ``None``, symbols).
Each finding is a test: an absurd answer or an error that was not an ``InputError`` is now an
``InputError`` naming the argument and the rule.  The expectations follow from the rule, not from
the library's output."""

import pytest
from sympy import Rational, Symbol

from symbolic_cost.checks import InputError
from test_hostile_seventh import refusal

HUGE = 10**400
"""Past a double's range (about 1.8e308): a time computed from it prints as inf."""


# the time model's factors


@pytest.mark.parametrize("factor", ["matrix", "memory"])
def test_an_efficiency_fraction_of_the_peak_is_at_most_one(factor):
    """``calibrated("h100").efficiency.but(matrix=1000)`` was taken: products ran at 1,000 times the
    datasheet's peak, and the step time shrank without a word.  A fraction of a peak is in (0, 1]
    (the fit keeps it there: ``timing.calibrate.RANGES``); 1 and a positive symbol stay."""
    from symbolic_cost.timing.hardware import calibrated
    efficiency = calibrated("h100").efficiency
    assert "at most 1" in str(refusal(lambda: efficiency.but(**{factor: 1000}), factor))
    refusal(lambda: efficiency.but(**{factor: Rational(1001, 1000)}), factor)
    assert getattr(efficiency.but(**{factor: 1}), factor) == 1
    x = Symbol("x", positive=True)
    assert getattr(efficiency.but(**{factor: x}), factor) == x


@pytest.mark.parametrize("factor", ["kernel", "step", "nvlink_bus", "ib_bus"])
def test_an_efficiency_figure_past_a_doubles_range_is_refused(factor):
    """``efficiency.but(kernel=10**400)`` was taken and ``step_time_breakdown`` printed a total of
    inf seconds; ``System`` refuses a figure past a double's range, and ``Efficiency`` now does too."""
    from symbolic_cost.timing.hardware import calibrated
    efficiency = calibrated("h100").efficiency
    assert "double's range" in str(refusal(lambda: efficiency.but(**{factor: HUGE}), factor))


# the numeric helpers


def test_a_sweep_grid_keyed_by_symbols_is_swept():
    """``sweep(exprs, grid={b: [1, 2], "l": [3]})`` (a grid keyed by the symbol, which ``check_grid``
    takes) ended in "compiled expressions need values for b": its chunks were looked up by name.
    Each row's value is the product written out here."""
    from symbolic_cost.numeric.sweep import sweep
    from symbolic_cost.symbols import b, l
    frame = sweep({"t": b * l}, grid={b: [1, 2], "l": [3]})
    assert list(frame.columns) == ["b", "l", "t"] and list(frame["t"]) == [1 * 3, 2 * 3]


def test_a_sweep_takes_a_symbol_of_the_users_own():
    """A symbol of the user's own (as ``compile_exprs`` takes, ``docs/kernels.md``) was refused by a
    sweep's grid ("need values for x") and table ("unknown symbol name 'x'")."""
    import pandas as pd
    from symbolic_cost.numeric.sweep import sweep
    x = Symbol("x", positive=True)
    assert list(sweep({"t": 2 * x}, grid={x: [1, 2]})["t"]) == [2, 4]
    assert list(sweep({"t": 2 * x}, table=pd.DataFrame({"x": [1.0, 5.0]}))["t"]) == [2, 10]


def test_a_sweep_grid_naming_one_symbol_twice_is_refused():
    """A grid keyed by ``"b"`` and by a plain ``Symbol("b")`` names one column twice."""
    from symbolic_cost.numeric.sweep import sweep
    from symbolic_cost.symbols import b
    assert "twice" in str(refusal(lambda: sweep({"t": b}, grid={"b": [1], Symbol("b"): [2]}), "grid"))


@pytest.mark.parametrize("fixed, named", [("b", "b"), ("micro_batches", "n_micro"), ("l", "l")])
def test_model_function_refuses_a_policy_that_fixes_a_number_evaluate_takes(fixed, named):
    """``model_function(preset("gpt2"), b=4)`` ended in Python's "Training() got multiple values
    for keyword argument 'b'" at the first call: the numbers are ``evaluate``'s."""
    from symbolic_cost.models.config import preset
    from symbolic_cost.numeric.exact import model_function
    error = refusal(lambda: model_function(preset("gpt2"), **{fixed: 4}), fixed)
    assert f"evaluate({named}=...)" in str(error)


@pytest.mark.parametrize("conventions", [0, "", False])
def test_model_function_refuses_conventions_that_name_none(conventions):
    """``model_function(arch, conventions=0)`` (or ``""``) was read as the default conventions
    without a word, where ``model_cost`` and ``step_time_breakdown`` refuse them."""
    from symbolic_cost.models.config import preset
    from symbolic_cost.numeric.exact import model_function
    refusal(lambda: model_function(preset("gpt2"), conventions=conventions), "conventions")


# element sizes


def test_a_training_mask_element_of_more_bytes_than_any_type_is_refused():
    """``Training(mask_bytes=2**53 + 1)`` was taken: GPT-2's step kept 8.7e22 bytes and took 5e10 s.
    An element is at most 16 bytes (a complex128); a mask's 1, 2 or 4 and a 4-bit 1/2 stay."""
    from symbolic_cost.models import Training
    for wide in (2**53 + 1, 17):
        assert "at most 16" in str(refusal(lambda: Training(mask_bytes=wide), "mask_bytes"))
    assert Training(mask_bytes=4).mask_bytes == 4 and Training(mask_bytes=Rational(1, 2)).mask_bytes == Rational(1, 2)


@pytest.mark.parametrize("size", ["es", "es_mask"])
def test_a_blocks_element_size_is_at_most_the_widest_type(capsys, size):
    """``mlp(..., run=Run(es=1000))`` and ``formula --set es=100`` priced 1,000-byte elements; a symbol
    stays a symbol (``es`` is the formulas' own)."""
    from symbolic_cost import mlp
    from symbolic_cost.blocks.wiring import Run
    from symbolic_cost.symbols import es
    from test_refusals import refused
    refusal(lambda: mlp(1, 8, 64, 256, run=Run(**{size: 1000})), size)
    refused(capsys, ["formula", "--block", "mlp", "--field", "weights", "--set", f"{size}=100"], size, "at most 16")
    assert mlp(1, 8, 64, 256, run=Run(es=es)).total("weights").free_symbols == {es}


# the LaTeX helpers


@pytest.mark.parametrize("helper", ["latex", "common_monomial"])
def test_latex_never_runs_text(helper):
    """``latex("__import__('os').getpid()")`` ran the text as Python (``sympify``) and printed the
    process id; text is never parsed outside ``reader.read``, which the refusal names."""
    from symbolic_cost import latex as module
    error = refusal(lambda: getattr(module, helper)("__import__('os').getpid()"), "expr")
    assert "reader.read" in str(error)
    refusal(lambda: getattr(module, helper)(None), "expr")


@pytest.mark.parametrize("expr, by, argument", [(True, None, "expr"), (None, None, "expr"), ([], None, "expr"),
                                                (float("nan"), None, "expr"), (Rational(1, 2), None, None),
                                                ("b", None, "expr"), (None, "b", "by"), (2, float("inf"), "by"),
                                                (2, True, "by"), (2, [], "by")])
def test_paper_form_names_what_is_no_formula(expr, by, argument):
    """``paper_form(True)`` ended in "'BooleanTrue' object has no attribute 'is_polynomial'",
    ``paper_form(None)`` in an ``AttributeError``, ``paper_form(b, by=[])`` in "unsupported operand
    type(s) for /", and ``paper_form(b, by=inf)`` answered ``nan``."""
    from symbolic_cost.latex import paper_form
    from symbolic_cost.symbols import b
    expr = b if expr is None and argument == "by" else expr
    if argument is None:
        assert paper_form(expr) == expr                     # a number stays itself
        return
    refusal(lambda: paper_form(expr, by=by), argument)


@pytest.mark.parametrize("call, argument", [
    (lambda t, mlp, b: t.formula_table(0), "block"),
    (lambda t, mlp, b: t.formula_table("8"), "block"),
    (lambda t, mlp, b: t.formula_markdown(None), "block"),
    (lambda t, mlp, b: t.formula_table(mlp(b, 8, 64, 256), fields=0), "fields"),
    (lambda t, mlp, b: t.formula_table(mlp(b, 8, 64, 256), fields=None), "fields"),
    (lambda t, mlp, b: t.formula_table(mlp(b, 8, 64, 256), fields=[]), "fields"),
])
def test_a_formula_table_names_a_block_or_fields_that_are_none(call, argument):
    """``formula_table(0)`` ended in "'int' object is not iterable" and ``formula_table("8")`` in
    "must be called with a dataclass type or instance"; ``fields=[]`` printed a table of no formula."""
    from symbolic_cost import latex as module, mlp
    from symbolic_cost.symbols import b
    refusal(lambda: call(module, mlp, b), argument)


@pytest.mark.parametrize("values", [None, [1], "b=1"])
def test_substituting_what_is_no_mapping_names_the_values(values):
    """``mlp(b, l, e, 4 * e).subs(None)`` ended in "'NoneType' object has no attribute 'items'"
    (``resolve_names``, which every ``subs`` reads its values through)."""
    from symbolic_cost import mlp
    from symbolic_cost.symbols import b, e, l
    refusal(lambda: mlp(b, l, e, 4 * e).subs(values), "values")
    assert mlp(b, l, e, 4 * e).subs({"b": 2}).dims["b"] == 2


# the time model's systems and helpers


def test_a_systems_nvlink_domain_is_a_count_of_at_most_2_53():
    """``get_system("h100").but(nvlink_size=10**30)`` was taken where every other count stops at
    2**53 (``checks.LARGEST_COUNT``)."""
    from symbolic_cost.timing.systems import get_system
    assert "2**53" in str(refusal(lambda: get_system("h100").but(nvlink_size=10**30), "nvlink_size"))
    assert get_system("h100").but(nvlink_size=2**53).nvlink_size == 2**53


@pytest.mark.parametrize("passes", [(), ("fwd", "fwd"), ["bwd", "fwd", "bwd"]])
def test_step_time_times_each_pass_once(passes):
    """``step_time(block, "h100", passes=())`` answered 0 s and ``passes=("fwd", "fwd")`` twice the
    forward time, without a word."""
    from symbolic_cost import mlp
    from symbolic_cost.timing.hardware import step_time
    block = mlp(1, 128, 1024, 4096)
    refusal(lambda: step_time(block, "h100", passes=passes), "passes")
    assert step_time(block, "h100", passes=("fwd", "bwd")) == step_time(block, "h100", passes=("fwd",)) + \
        step_time(block, "h100", passes=("bwd",))


@pytest.mark.parametrize("number", [10**400, Rational(10**400 + 1, 10**400), Rational(1, 10**400)])
def test_a_compiled_expression_holding_a_number_past_a_double_is_refused(number):
    """``compile_exprs({"r": Rational(10**400 + 1, 10**400) * b})`` computed nan (inf / inf) on the
    LLVM kernel where the value is about b, ``b * 10**400`` inf; numpy's kernel ended in
    ``OverflowError``.  The kernels compute in doubles: a number past their range is refused, by name;
    a large power of a symbol stays (it is computed, not written)."""
    from symbolic_cost.numeric.compile import compile_exprs
    from symbolic_cost.symbols import b
    for backend in ("llvm", "numpy"):
        assert "double's range" in str(refusal(lambda: compile_exprs({"r": number * b}, backend=backend), "r"))
    assert compile_exprs({"r": b**40})({"b": [2]})["r"][0] == 2.0**40


# the layout search


@pytest.mark.parametrize("field, values", [("zero", (1, 1)), ("schedules", ("1f1b", "1f1b")),
                                           ("recompute", ("full", "full")), ("offload", ("none", "none")),
                                           ("micro_batch_sizes", (1, 2, 1))])
def test_a_search_space_listing_a_value_twice_is_refused(field, values):
    """``search(arch, 8, zero=(1, 1))`` tried each layout twice (152 layouts evaluated, not 76) and
    listed it twice among the fastest, as ``sweep --grid b=1,1`` did before the sixth probe."""
    from symbolic_cost.numeric.search import Space
    assert "twice: list each value once" in str(refusal(lambda: Space(**{field: values}), field))


@pytest.mark.parametrize("keyword", ["progress", "dask"])
def test_searchs_flags_are_flags(keyword):
    """``search(..., dask="yes")`` and ``progress="yes"`` were read as true (any truthy value), and
    ``"no"`` would have been too."""
    from symbolic_cost.models.config import preset
    from symbolic_cost.numeric.search import search
    refusal(lambda: search(preset("gpt2"), 8, global_batch=8, seq=1024, **{keyword: "no"}), keyword)


# the analysis helpers


def test_a_limit_of_a_size_goes_where_the_size_may_go():
    """``limit(l, l, -oo)`` answered ``-oo`` for a sequence length, which is positive; a symbol of
    the user's own, without assumptions, may still go to ``-oo`` (``x**2`` grows without bound there)."""
    from sympy import oo
    from symbolic_cost.analysis.scaling import limit
    from symbolic_cost.symbols import l
    for to in (-oo, -1):
        refusal(lambda: limit(l, l, to), "to")
    x = Symbol("x")
    assert limit(x**2, x, -oo) == oo and limit(1 / l, l, oo) == 0


def test_leading_terms_with_remainder_is_a_flag():
    """``leading_terms(expr, l, with_remainder="no")`` answered the pair, as any truthy value did."""
    from symbolic_cost.analysis.scaling import leading_terms
    from symbolic_cost.symbols import b, l
    refusal(lambda: leading_terms(l * b + l, l, with_remainder="no"), "with_remainder")
    assert leading_terms(l * b + l, l, with_remainder=True) == (b * l + l, 0)


def test_the_calibrated_model_refuses_nvlink_collectives_on_a_system_without_nvlink():
    """``calibrated("h100").but(nvlink_bandwidth=0)`` priced GPT-2's data-parallel allreduce over 2
    devices on NVLink (0.72 ms, at the efficiency's NVLink bus bandwidth), where the peak model
    refuses it ("no link ... its bandwidth is 0").  A system without NVLink has domains of one
    device (``l40s``): its collectives run on the network, as before."""
    from symbolic_cost.models import Training, model_cost
    from symbolic_cost.models.config import preset
    from symbolic_cost.timing.hardware import calibrated
    from symbolic_cost.timing.step import step_time_breakdown
    cost = model_cost(preset("gpt2"), Training(b=2, l=256, d=2))
    refusal(lambda: step_time_breakdown(cost, calibrated("h100").but(nvlink_bandwidth=0)), "nvlink_bandwidth")
    assert step_time_breakdown(cost, calibrated("h100").but(nvlink_bandwidth=0, nvlink_size=1))["data_comm"] > 0
    assert step_time_breakdown(cost, calibrated("l40s"))["data_comm"] > 0


def test_the_tiled_kernel_model_takes_a_systems_name_and_an_element_size():
    """``gemm(4096, 4096, 4096, "a100")`` (as ``step_time`` takes a name) ended in "'str' object has
    no attribute 'require'"; ``tiled_traffic(..., element_bytes=-1)`` answered -30,000 bytes.  The
    preset's name gives the preset's kernel; an element size is positive and at most 16 bytes."""
    from symbolic_cost.timing.hardware import SYSTEMS
    from symbolic_cost.timing.kernels import gemm, tiled_traffic
    assert gemm(4096, 4096, 4096, "a100") == gemm(4096, 4096, 4096, SYSTEMS["a100"])
    refusal(lambda: gemm(4096, 4096, 4096, None), "system")
    for size in (-1, 0, 17):
        refusal(lambda: tiled_traffic(100, 100, 100, 512, size), "element_bytes")
    # one 512-tile covers each side of 100: every operand read once, 3 x 100 x 100 values of 4 bytes
    assert tiled_traffic(100, 100, 100, 512, 4) == 4 * 3 * 100 * 100


@pytest.mark.parametrize("text", [None, 5, ["1:8"]])
def test_grid_range_names_a_range_that_is_no_text(text):
    """``grid_range(None, "b")`` (``docs/fast.md``'s Python call) ended in "'NoneType' object has
    no attribute 'split'"."""
    from symbolic_cost.cli.parse import grid_range
    refusal(lambda: grid_range(text, "b"), "b")
    assert grid_range("1:8:x2", "b") == [1, 2, 4, 8]


@pytest.mark.parametrize("numbers, argument", [([1], "numbers"), (None, "numbers"), ("ab", "numbers"),
                                               (["1", 2], "b"), ([None, 2], "b"), ([Rational(3, 2), 1.5], "l")])
def test_an_exact_functions_numbers_are_one_exact_number_a_symbol(numbers, argument):
    """``exact_function({"t": b * l}).at([1])`` ended in "missing 1 required positional argument",
    ``at(["1", "2"])`` in "can't multiply sequence by non-int", and ``at([1.5, 2])`` answered the
    float 3.00000000000000 from the exact evaluation."""
    from fractions import Fraction
    from symbolic_cost.numeric.exact import exact_function
    from symbolic_cost.symbols import b, l
    f = exact_function({"t": b * l})
    refusal(lambda: f.at(numbers), argument)
    assert f.at([3, Fraction(1, 2)]) == {"t": Rational(3, 2)}


def test_loss_chunks_is_a_count_of_at_most_2_53():
    """``Training(loss_chunks=2**53 + 1)`` was taken where every other count stops at 2**53."""
    from symbolic_cost.checks import LARGEST_COUNT
    from symbolic_cost.models import Training
    assert "2**53" in str(refusal(lambda: Training(loss_chunks=LARGEST_COUNT + 1), "loss_chunks"))
    assert Training(loss_chunks=LARGEST_COUNT).loss_chunks == LARGEST_COUNT


@pytest.mark.parametrize("progress", ["no", 5, None])
def test_a_sweeps_progress_is_a_flag_or_a_callable(progress):
    """``sweep(..., progress="no")`` reported progress on stderr (any truthy value did)."""
    from symbolic_cost.numeric.sweep import sweep
    from symbolic_cost.symbols import b
    refusal(lambda: sweep({"t": 2 * b}, grid={"b": [1, 2]}, progress=progress), "progress")
    lines = []
    assert list(sweep({"t": 2 * b}, grid={"b": [1, 2]}, progress=lines.append)["t"]) == [2, 4] and len(lines) == 1


def test_a_sweep_never_reads_text_among_objects():
    """A table column of text (``pd.DataFrame({"b": ["1"]})``, dtype object) was read as the number 1,
    where a grid of text is refused; objects that are numbers (Fractions, SymPy integers) stay."""
    from fractions import Fraction
    import pandas as pd
    from sympy import Integer
    from symbolic_cost.numeric.sweep import sweep
    from symbolic_cost.symbols import b
    refusal(lambda: sweep({"t": 2 * b}, table=pd.DataFrame({"b": ["1"]})), "b")
    assert list(sweep({"t": 2 * b}, grid={"b": [Fraction(2), Integer(4)]})["t"]) == [4, 8]
