"""Seed 003 reproduced cell by cell, and the command line."""

import json
import subprocess
import sys

from sympy import simplify, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.cli import main
from symbolic_cost.reproduce import lbnl_2024
from symbolic_cost.symbols import BY_NAME


def test_every_printed_cell_of_seed_003_matches():
    cells = lbnl_2024.compare()
    assert len(cells) == 454   # 155 MLP + 279 SA table cells, 18 sums, 2 comm lines
    assert [c for c in cells if not c.match] == []


def test_the_comparison_can_fail():
    """The same comparison under the default conventions disagrees with the seed."""
    mismatched = [c for c in lbnl_2024.compare(conventions=conv.DEFAULT) if not c.match]
    assert len(mismatched) > 50


def test_reproduce_command_writes_report_and_exits_zero(tmp_path, capsys):
    assert main(["reproduce", "lbnl-2024", "--reports", str(tmp_path)]) == 0
    # 127 distinct numbers among the printed cells: counted from the printed tables in
    # tests/test_reproduce_honesty.py
    assert capsys.readouterr().out.strip() == "lbnl-2024: matched 454/454 (127 distinct numeric values)"
    assert "matched 454/454 (127 distinct numeric values)" in (tmp_path / "lbnl-2024.md").read_text()


def test_formula_prints_the_mlp_forward_flops(capsys):
    assert main(["formula", "--block", "mlp", "--field", "flops_fwd", "--set", "m1=1",
                 "--set", "s1=1"]) == 0
    printed = sympify(capsys.readouterr().out, locals=BY_NAME)
    b, l, e, f = (BY_NAME[n] for n in "blef")
    # norm 9e, fc1 2ef + f (bias), GELU f, fc2 2ef + e, dropout e per token
    assert simplify(printed - b * l * (4 * e * f + 10 * e + f)) == 0


def test_formula_latex_uses_paper_symbols(capsys):
    assert main(["formula", "--block", "attention", "--field", "flops_bwd",
                 "--latex"]) == 0
    out = capsys.readouterr().out
    assert "m_{1}" in out and out.count("{") == out.count("}")


def test_table_formats(capsys):
    # the seed's configuration, named: the GPT-3 175B layer with m1 = 4, its conventions and system
    common = ["table", "--preset", "gpt3-175b", "--set", "m1=4", "--block", "attention", "--conventions",
              "lbnl-2024", "--system", "a100-perlmutter", "--no-qkv-bias"]
    assert main(common + ["--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["layer"] for r in rows][:2] == ["layer_norm_1", "qkv_proj"]
    assert round(rows[1]["flops_fwd"], 6) == 0.463838      # printed in seed 003
    assert main(common + ["--format", "latex"]) == 0
    assert capsys.readouterr().out.startswith("\\begin{tabular}")
    assert main(common + ["--format", "csv", "--set", "l=4096", "--allow-long"]) == 0     # past its 2,048 tokens
    assert capsys.readouterr().out.splitlines()[0].startswith("layer,flops_fwd")


def test_cli_errors_exit_2(capsys):
    assert main(["table", "--set", "m1"]) == 2
    assert "--set expects name=value" in capsys.readouterr().err
    assert main(["table", "--set", "q=3"]) == 2
    assert "unknown name 'q'" in capsys.readouterr().err
    assert main(["table", "--set", "e=100", "--set", "h=3", "--block", "attention"]) == 2
    assert "h must divide e" in capsys.readouterr().err
    assert main(["formula", "--field", "nope"]) == 2
    assert "unknown --field 'nope'" in capsys.readouterr().err
    assert main(["table", "--system", "tpu"]) == 2


def test_module_entry_point():
    done = subprocess.run([sys.executable, "-m", "symbolic_cost", "formula", "--set", "m1=1",
                           "--set", "s1=1", "--field", "weights"], capture_output=True, text=True)
    assert done.returncode == 0 and "e" in done.stdout
