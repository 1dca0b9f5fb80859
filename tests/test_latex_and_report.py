"""LaTeX output and the report command."""

import importlib.util
import subprocess
import sys

import pytest
from sympy import Symbol, simplify

from symbolic_cost import attention, mlp, transformer_layer
from symbolic_cost.cli import main
from symbolic_cost.latex import formula_markdown, formula_table, latex, paper_form
from symbolic_cost.symbols import b, e, f, h, l, m1, s1

EXPRESSIONS = [mlp(b, l, e, f, m1, s1).total("flops_fwd"), attention(b, l, e, h, m1, m1).total("flops_bwd"),
               transformer_layer(b, l, e, f, h, m1, s1).total("mem_bwd"), 2*b*l*e*(m1 - 1)/m1]


def balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_latex_is_balanced_and_names_symbols_as_papers_do(expr):
    text = latex(expr)
    assert balanced(text) and "m_{1}" in text and "m1" not in text


def test_formula_tables():
    table = formula_table(attention(b, l, e, h, m1, s1))
    assert table.startswith(r"\begin{tabular}") and table.rstrip().endswith(r"\end{tabular}")
    assert balanced(table) and "qkv\\_proj" in table and "s_{1}" in table
    md = formula_markdown(mlp(b, l, e, f))
    assert md.splitlines()[0].startswith("| operation |") and "| total |" in md


def test_paper_form_by_hand():
    # b l e (34 + 5 h l / e) is 34 b l e + 5 b h l^2
    form = paper_form(34*b*l*e + 5*b*h*l**2, by=b*l*e)
    assert latex(form) == r"b e l \left(34 + \frac{5 h l}{e}\right)"
    assert simplify(form - (34*b*l*e + 5*b*h*l**2)) == 0


@pytest.mark.skipif(importlib.util.find_spec("lark") is None, reason="sympy's LaTeX parser needs lark")
@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_latex_round_trips_through_sympy_parser(expr):
    from sympy.parsing.latex import parse_latex
    parsed = parse_latex(latex(expr, mul_symbol="dot"), backend="lark")
    names = {Symbol("m_{1}"): m1, Symbol("s_{1}"): s1, **{Symbol(str(x)): x for x in (b, l, e, f, h)}}
    assert simplify(parsed.subs(names) - expr) == 0


def test_jupyter_renders_latex():
    row = mlp(b, l, e, f)["fc1"]
    assert row._repr_latex_().startswith("$\\begin{aligned}") and balanced(row._repr_latex_())
    assert mlp(b, l, e, f)._repr_latex_().startswith(r"\begin{tabular}")
    assert list(mlp(b, l, e, f).to_frame().columns[:2]) == ["operation", "flops_fwd"]


def test_library_does_not_import_matplotlib():
    code = "import sys, symbolic_cost, symbolic_cost.cli, symbolic_cost.report; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")
def test_report_command_small(tmp_path, capsys):
    assert main(["report", "--out", str(tmp_path), "--small"]) == 0
    names = {p.name for p in tmp_path.iterdir()}
    assert {"lbnl-2024.md", "ulysses-prefill.md", "formulas.md", "formulas.tex", "analysis.md",
            "sequence-parallel.md", "kernel-model.md", "gpt-2-small.png"} <= names
    assert (tmp_path / "gpt-2-small.png").read_bytes()[:4] == b"\x89PNG"
    out = capsys.readouterr().out
    assert "lbnl-2024: matched 454/454 (" in out and "ulysses-prefill: matched 94/94 (" in out
    assert "when $s_1 > 2$" in (tmp_path / "sequence-parallel.md").read_text()
    assert "Step time 302.888176 s" in (tmp_path / "kernel-model.md").read_text()   # seed 002, rounded


def test_cli_analysis_commands(capsys):
    assert main(["formula", "--block", "layer", "--set", "f=4*e", "--set", "m1=1", "--set", "s1=1",
                 "--leading", "e,l"]) == 0
    assert simplify(_parse(capsys.readouterr().out) - (24*b*e**2*l + 4*b*e*l**2)) == 0
    assert main(["crossover", "--set", "f=4*e", "--set", "m1=1", "--set", "s1=1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert simplify(_parse(out[1]) - (8*e**2 + 5*e + h) / (4*e + 3*h)) == 0
    assert main(["formula", "--block", "attention", "--field", "act_buffer", "--set", "m1=1",
                 "--set", "s1=1", "--elasticity", "l", "--flash"]) == 0
    assert capsys.readouterr().out.strip() == "1"
    assert main(["optimize", "--system", "h100", "--max", "16"]) == 0
    assert "<- best" in capsys.readouterr().out


def _parse(text):
    from sympy import sympify
    from symbolic_cost.symbols import BY_NAME
    return sympify(text.strip().splitlines()[0], locals=BY_NAME)
