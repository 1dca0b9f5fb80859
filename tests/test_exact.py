"""``numeric.exact``: one configuration at a time, exactly, against a model built with the numbers."""

import pathlib
from fractions import Fraction

import pytest
from hypothesis import example, given, settings, strategies as st
from sympy import Rational

from symbolic_cost.checks import InputTypeError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import load, preset
from symbolic_cost.numeric.exact import FIELDS, exact_function, model_function
from symbolic_cost.symbols import b, l, m1
from symbolic_cost.timing.step import step_time_breakdown

CONFIGS = pathlib.Path(__file__).parent / "hf_configs"
MODELS = {"gpt2": preset("gpt2"), "llama-gqa": load(CONFIGS / "Llama-3.2-1B.json"),
          "mixtral": load(CONFIGS / "Mixtral-8x7B-v0.1.json"), "t5": load(CONFIGS / "t5-small.json"),
          # the layers a pipeline rank holds depend on p: a dense layer first, a global layer every sixth
          "deepseek-lite": load(CONFIGS / "DeepSeek-V2-Lite.json"), "gemma3": load(CONFIGS / "gemma-3-1b-pt.json")}
POLICIES = [dict(zero=1, flash=True), dict(zero=3, recompute="selective"), dict(zero=0, recompute="full"),
            dict(zero=2, schedule="interleaved", virtual_stages=2),
            dict(zero=1, recompute="full", recompute_method="block", recompute_layers=1)]   # the first of each chunk
EVALUATORS = {}


def _evaluator(model, index):
    if (model, index) not in EVALUATORS:
        EVALUATORS[model, index] = model_function(MODELS[model], "h100", **POLICIES[index])
    return EVALUATORS[model, index]


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(sorted(MODELS)), index=st.integers(0, len(POLICIES) - 1),
       values=st.fixed_dictionaries({"b": st.integers(1, 4), "l": st.sampled_from([256, 512, 768, 2048]),
                                     "m1": st.sampled_from([1, 2, 3, 4, 8]), "s1": st.sampled_from([1, 2, 4]),
                                     "d": st.sampled_from([1, 2, 3, 8]), "p": st.sampled_from([1, 2, 3, 4]),
                                     "n_micro": st.sampled_from([1, 2, 4, 8])}),
       experts=st.fixed_dictionaries({"ep": st.sampled_from([1, 2, 4, 3]), "etp": st.sampled_from([1, 2])}))
@example(model="deepseek-lite", index=0, values=dict(b=1, l=512, m1=1, s1=1, d=2, p=3, n_micro=4),
         experts=dict(ep=2, etp=1))
@example(model="gemma3", index=0, values=dict(b=2, l=512, m1=1, s1=1, d=1, p=13, n_micro=16), experts=dict(ep=1, etp=1))
# full recomputation where a rank holds 1 global and 1 windowed layer, or 2 windowed: once counted
# as the most of each group (1 + 2 layers a rank) where l <= window merges the two groups (2)
@example(model="gemma3", index=2, values=dict(b=1, l=512, m1=1, s1=1, d=1, p=13, n_micro=16), experts=dict(ep=1, etp=1))
def test_model_function_equals_a_model_built_with_the_numbers(model, index, values, experts):
    arch = MODELS[model]
    if arch.moe is not None:
        values.update(experts)
    training = dict(b=values["b"], l=values["l"], m1=values["m1"], s1=values["s1"], d=values["d"], p=values["p"],
                    micro_batches=values["n_micro"], **{k: values[k] for k in ("ep", "etp") if k in values})
    try:
        cost = model_cost(arch, Training(**training, **POLICIES[index]))
        want = {**{f: getattr(cost, f) for f in FIELDS},
                **{f"step_{k}": v for k, v in step_time_breakdown(cost, "h100").items()}}
    except ValueError:
        with pytest.raises(ValueError):
            _evaluator(model, index)(**values)
        return
    got = _evaluator(model, index)(**values)
    assert got == want, {k: (got[k], want[k]) for k in want if got[k] != want[k]}


def test_exact_values_in_and_out():
    f = exact_function({"x": b * l / 3 + m1 ** -2})
    assert f({"b": 2, "l": Rational(1, 2), "m1": Fraction(1, 3)})["x"] == Rational(1, 3) + 9
    with pytest.raises(InputTypeError, match="b must be an exact number"):
        f({"b": 2.0, "l": 1, "m1": 1})
    with pytest.raises(ValueError, match="needs values for m1"):
        f({"b": 2, "l": 1})


def test_model_function_refuses_unknown_names_and_bad_numbers():
    evaluate = model_function(preset("gpt2"))
    with pytest.raises(TypeError, match="got ep"):
        evaluate(ep=2)
    with pytest.raises(ValueError, match="m1 must divide h"):
        evaluate(m1=5)


@pytest.mark.parametrize("number", ["gmpy2", "fraction"])
def test_both_exact_number_types_give_sympy_numbers_equal_to_substitution(number, monkeypatch):
    """GMP's ``mpq`` (the fast extra) and ``Fraction`` (without it) give the same SymPy numbers as
    ``xreplace`` with the values, built the way SymPy builds them (equal, same hash, singletons)."""
    from sympy import Integer, Max, S, ceiling, floor
    from symbolic_cost import rationals
    from symbolic_cost.numeric import exact
    if number == "gmpy2":
        pytest.importorskip("gmpy2")
    else:
        monkeypatch.setattr(exact, "RATIONAL", Fraction)
    monkeypatch.setattr(exact, "_MEMORY", {})
    exprs = {"x": b * l / 3 + m1 ** -2, "zero": b - l + 1, "half": Max(b, l) / (2 * l), "one": ceiling(b / l),
             "big": b ** 40 * l / 7, "minus": 1 - m1,
             # a rational times the rest: printed as floor division, on ints and on rationals
             "up": ceiling(3 * b / 7), "down": floor(-5 * l * m1 / 3), "up_q": ceiling(-b * m1 / 4) + floor(m1 / 2)}
    f = exact.exact_function(exprs)
    for values in ({"b": 2, "l": 3, "m1": 4}, {"b": 5, "l": 6, "m1": 2}, {"b": 9, "l": 1, "m1": Fraction(1, 3)}):
        got = f(values)
        want = {k: e.xreplace({b: values["b"], l: values["l"], m1: Rational(values["m1"])}) for k, e in exprs.items()}
        assert got == want and all(hash(got[k]) == hash(want[k]) and type(got[k]) is type(want[k]) for k in want)
    assert f({"b": 2, "l": 3, "m1": 4})["zero"] is S.Zero and f({"b": 3, "l": 3, "m1": 2})["minus"] is S.NegativeOne
    assert rationals.to_sympy(rationals.RATIONAL(1, 2)) is S.Half and rationals.to_sympy(True) == Integer(1)


def test_a_sequence_beyond_the_context_is_refused_as_model_cost_refuses_it():
    """GPT-3's context is 2,048 tokens (Brown et al. 2020, Table 2.1): ``model_cost`` refuses 4,096
    without ``allow_long``, and so does ``model_function``, which once answered for it."""
    with pytest.raises(ValueError, match="exceed the context of gpt3-175b"):
        model_function(preset("gpt3-175b"), zero=1)(b=1, l=4096, m1=8, s1=8, p=16, n_micro=16)
    assert model_function(preset("gpt3-175b"), zero=1, allow_long=True)(l=4096)["parameters"] == model_cost(
        preset("gpt3-175b"), Training(l=4096, zero=1, allow_long=True)).parameters


def test_a_refused_configuration_is_refused_again():
    evaluate = model_function(preset("gpt2"))
    for _ in range(2):                       # the checks remember only the numbers that passed
        with pytest.raises(ValueError, match="m1 must divide h"):
            evaluate(m1=5)
    assert evaluate(m1=4)["parameters"] == evaluate(m1=4)["parameters"] == model_cost(
        preset("gpt2"), Training(b=1, l=1024, m1=4)).parameters



def test_a_new_combination_of_passed_numbers_is_checked_by_training_s_own_rules():
    """HSDP's shard group must divide ``d`` (``Training``'s rule across values): ``d=3`` with
    ``shard=2`` is refused although its batch and schedule were seen with ``d=2``, and a new
    batch size is checked although its grid passed."""
    evaluate = model_function(preset("gpt2"), zero=3, shard=2)
    assert evaluate(b=1, d=2)["parameters"] == 124439808
    with pytest.raises(ValueError, match="shard must divide d"):
        evaluate(b=1, d=3)
    with pytest.raises(ValueError, match="b must be a positive"):
        evaluate(b=0, d=2)
    with pytest.raises(ValueError, match="shard must divide d"):
        evaluate(b=2, d=3)


def test_parts_that_read_one_or_two_symbols_are_remembered_and_give_substitution_s_numbers():
    """Tile counts that read ``m1`` alone and token counts that read ``b`` and ``l`` are grouped
    and remembered by their numbers; every point of a grid that asks for each number many times,
    int and rational, equals ``xreplace``."""
    from sympy import Max, Min, ceiling, floor
    from symbolic_cost.numeric import exact
    tiles = ceiling(50257 / m1) * Min(256, 16 * ceiling(2304 / m1)) + floor(m1 / 3) + Max(1, 8 - m1)
    tokens = ceiling(b * l / 128) * Min(128, 16 * ceiling(b * l / 16)) + (b * l) ** 2
    exprs = {"time": tiles * tokens / (m1 + l), "tiles": tiles + 1 / m1, "mixed": Max(tiles, tokens / 7) - b}
    f = exact.exact_function(exprs)
    assert {("m1",), ("b", "l")} <= set(f.function.groups)                   # the grouped code runs here
    for bv in (1, 2, 3):
        for lv in (Rational(1, 2), 7, 128, 2048):
            for mv in (1, 2, 3, 8, Rational(3, 2)):
                got = f({"b": bv, "l": lv, "m1": mv})
                want = {k: e.xreplace({b: Rational(bv), l: Rational(lv), m1: Rational(mv)}) for k, e in exprs.items()}
                assert got == want, (bv, lv, mv)
