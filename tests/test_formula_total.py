"""``formula --total``: a whole-model total as a formula (issue 32: elasticity of whole-model fields)."""

import json

import pytest
from sympy import Rational

from symbolic_cost.cli import main

ONE_DEVICE = ["b=1", "m1=1", "s1=1", "d=1", "p=1", "n_micro=1"]


def run(capsys, *words):
    code = main(["formula", *words])
    out = capsys.readouterr()
    return code, out.out.strip(), out.err.strip()


def test_gpt2_parameters_are_transformers_count(capsys):
    # GPT2LMHeadModel's parameter count (tied head): 124,439,808
    assert run(capsys, "--preset", "gpt2", "--total", "parameters") == (0, "124439808", "")


def test_a_total_at_a_point_is_what_summary_prints_for_that_layout(capsys):
    code, out, _ = run(capsys, "--preset", "gpt2", "--total", "memory_bytes", "--set", *ONE_DEVICE,
                       "--at", "l=1024")
    assert code == 0
    assert main(["summary", "--preset", "gpt2", "--set", *ONE_DEVICE, "l=1024", "--json"]) == 0
    assert int(out) == json.loads(capsys.readouterr().out)["memory_bytes"]


def test_the_elasticity_of_flops_in_l_lies_between_linear_and_quadratic(capsys):
    code, out, _ = run(capsys, "--preset", "gpt2", "--total", "flops_fwd", "--set", *ONE_DEVICE,
                       "--elasticity", "l", "--at", "l=1024")
    assert code == 0
    value = float(out.splitlines()[-1].removeprefix("= "))
    assert 1 < value < 2          # the products grow as l, the attention scores as l^2


def test_the_leading_term_in_l_is_the_attention_scores(capsys):
    # 12 layers x (Q K^T and the weighted sum of V: 2 x 2 l^2 e multiply-adds, e = 768) = 36,864 l^2 FLOPs
    # of products, plus the element-wise work on the 12 heads' l^2 scores
    code, out, _ = run(capsys, "--preset", "gpt2", "--total", "flops_fwd", "--set", *ONE_DEVICE, "--leading", "l")
    assert code == 0
    coefficient = int(out.removesuffix("*l**2"))
    assert 36_864 <= coefficient < 36_864 + 12 * 12 * 8


@pytest.mark.parametrize("words,flag", [
    (["--total", "parameters"], "--total"),                                         # no model
    (["--preset", "gpt2", "--total", "parameters", "--row", "fc1"], "--row"),
    (["--preset", "gpt2", "--total", "parameters", "--field", "act_buffer"], "--field"),
    (["--preset", "gpt2", "--total", "parameters", "--no-bias"], "--no-bias"),
    (["--preset", "gpt2", "--total", "parameters", "--system", "a100"], "--system"),  # a count, not a time
    (["--preset", "gpt2", "--total", "memory_bytes", "--set", "b=1", "d=1", "p=1", "n_micro=1",
      "--at", "l=1024", "m1=5", "s1=5"], "--at"),                                  # 5 does not divide 12 heads
    (["--preset", "gpt2", "--total", "parameters", "--elasticity", "b"], "--elasticity"),
])
def test_refusals_name_the_option(capsys, words, flag):
    code, _, err = run(capsys, *words)
    assert code == 2 and flag in err and len(err.splitlines()) == 1


def test_a_step_time_with_every_degree_a_symbol_answers_and_holds_at_a_point(capsys):
    """The whole step time of Llama 2 7B with b, l and every degree symbols, which SymPy's simplify
    would take minutes over: printed as built (a note says so), and at a layout it is the step time
    ``summary --ideal`` prints for that layout (formulas time at peak: said in a note too)."""
    layout = ["b=1", "l=2048", "m1=2", "s1=2", "d=4", "p=2", "n_micro=8"]
    code, out, err = run(capsys, "--preset", "llama-2-7b", "--total", "total", "--at", *layout)
    assert code == 0 and "printed as built" in err and "datasheet's peak rates" in err
    assert main(["summary", "--preset", "llama-2-7b", "--set", *layout, "--ideal", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    exact = Rational(out.splitlines()[-2])          # the exact value, then its decimal
    assert float(exact) == pytest.approx(summary["step_time_s"]["total"], rel=1e-12)


def test_a_derivative_at_a_point_given_whole_by_at_is_the_one_given_by_set(capsys):
    """``--diff b --at`` every symbol answers as ``--set`` the others and ``--at b`` does (it ran
    out of its CPU budget: the derivative was simplified with every symbol in it), and the
    derivative is the slope of the forward FLOPs between b = 3 and 5 (they are linear in b)."""
    layout = ["l=1024", "m1=2", "s1=2", "p=1", "n_micro=1"]
    code, whole, _ = run(capsys, "--preset", "gpt2", "--total", "flops_fwd", "--diff", "b", "--at", "b=4", *layout)
    assert code == 0
    code, by_set, _ = run(capsys, "--preset", "gpt2", "--total", "flops_fwd", "--set", *layout, "--diff", "b",
                          "--at", "b=4")
    assert code == 0 and whole.splitlines()[0] == by_set.splitlines()[0]
    slope = [run(capsys, "--preset", "gpt2", "--total", "flops_fwd", "--set", *layout, f"b={b}")[1] for b in (3, 5)]
    assert Rational(int(slope[1]) - int(slope[0]), 2) == Rational(whole.splitlines()[0])


def test_by_factors_each_piece_and_refuses_a_number(capsys):
    """``--by b*n_micro`` takes the monomial out of each piece of a whole-model total (it left the
    Piecewise as it was), and is refused on a number, where it would change nothing."""
    code, out, _ = run(capsys, "--preset", "gpt2", "--total", "flops_fwd", "--set", "l=1024", "m1=2", "s1=2",
                       "--by", "b*n_micro")
    assert code == 0 and "(b*n_micro)*(" in out
    code, _, err = run(capsys, "--preset", "gpt2", "--total", "parameters", "--by", "b")
    assert code == 2 and "--by factors a formula, and this one is the number 124439808" in err


def test_a_rounded_size_is_flat_between_its_steps(capsys):
    """The memory of Llama-3-8B holds ``ceiling(vocabulary / m1)`` rows of its tables; its
    derivative and elasticity in ``m1`` are those between the rounding's steps (SymPy alone
    printed ``Subs(Derivative(ceiling(...)))``): the derivative at ``m1 = 8``, with the rounding
    held at its value there (16,032 rows), is the slope of the formula, evaluated exactly, between
    ``m1 = 8 + 1/100000`` and ``8 + 2/100000``, where ``ceiling(128256/m1)`` is still 16,032 (it
    steps at 8 itself, where 128,256/8 is whole, and again past 8.0005)."""
    from sympy import sympify
    from symbolic_cost.symbols import m1
    layout = ["b=1", "s1=m1", "d=1", "p=1", "n_micro=1", "l=4096"]
    code, formula, _ = run(capsys, "--preset", "llama-3-8b", "--total", "memory_bytes", "--set", *layout)
    assert code == 0
    memory = sympify(formula.splitlines()[0], locals={"m1": m1})
    h = Rational(1, 100000)
    slope = (memory.subs(m1, 8 + 2 * h) - memory.subs(m1, 8 + h)) / h
    code, derivative, _ = run(capsys, "--preset", "llama-3-8b", "--total", "memory_bytes", "--set", *layout,
                              "--diff", "m1", "--at", "m1=8")
    assert code == 0 and "Derivative" not in derivative
    assert float(Rational(derivative.splitlines()[0])) == pytest.approx(float(slope), rel=1e-5)
