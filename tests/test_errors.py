"""Bad input gets a clear error naming the argument and the rule."""

import pathlib

import pytest
from sympy import Rational

from symbolic_cost import attention, conventions as conv, mlp
from symbolic_cost.timing.hardware import SYSTEMS, get_system
from symbolic_cost.symbols import b, e, f, h, l, m1, s1
from symbolic_cost.blocks.wiring import Run

CASES = [
    (lambda: mlp(0, 8, 8, 32), "b must be a positive integer, got 0"),
    (lambda: mlp(2, -8, 8, 32), "l must be a positive integer, got -8"),
    (lambda: mlp(2, 8, 8, Rational(7, 2)), "f must be a positive integer, got 7/2"),
    (lambda: attention(1, 8, 100, 3), "h must divide e (got h=3, e=100)"),
    (lambda: attention(1, 8, 96, 6, 4, 1), "m1 must divide h (got m1=4, h=6)"),
    (lambda: mlp(1, 8, 16, 10, 4, 1), "m1 must divide f (got m1=4, f=10)"),
    (lambda: mlp(1, 10, 16, 64, 4, 4), "s1 must divide l (got s1=4, l=10)"),
    (lambda: mlp(1, 12, 16, 64, 2, 3), "s1 must divide m1 (got s1=3, m1=2); sequence shards live"),
    (lambda: mlp(1, 6, 16, 64, 4, run=Run(conventions="lbnl-2024")), "m1 must divide l (got m1=4, l=6)"),
    (lambda: mlp(1, 8, 16, 64, run=Run(es=0.5)), "es must be exact"),
    (lambda: mlp(1, 8, 16, 64, run=Run(conventions="lbnl")), "unknown conventions 'lbnl'; known: default, lbnl-2024"),
    (lambda: conv.DEFAULT.but(matmul_flops="3mnk"), "matmul_flops must be one of 'exact', '2mnk'"),
    (lambda: conv.DEFAULT.but(causal=True), "unknown conventions field(s): causal"),
    (lambda: get_system("tpu"), "unknown system 'tpu'; known: a100-perlmutter"),
    (lambda: SYSTEMS["a100"].but(hbm_bandwidth=0), "hbm_bandwidth must be positive"),
    (lambda: mlp(b, l, e, f)["fc3"], "mlp has no row 'fc3'"),
]


@pytest.mark.parametrize("make, message", CASES)
def test_bad_input_is_named(make, message):
    with pytest.raises((ValueError, KeyError)) as error:
        make()
    assert message in str(error.value)


def test_undecidable_checks_wait_for_substitution():
    block = mlp(b, l, e, f, m1, s1)           # nothing decidable yet: builds
    assert block.subs({f: 64, m1: 4}).dims["f"] == 64
    with pytest.raises(ValueError, match=r"m1 must divide f \(got m1=4, f=10\)"):
        block.subs({f: 10, m1: 4})
    with pytest.raises(ValueError, match="h must divide e"):
        attention(b, l, e, h).subs({e: 10, h: 4})


def test_structure_decides_divisibility_with_symbols():
    attention(b, l, 128 * h, h)               # e = 128 h: h divides e for every h
    with pytest.raises(ValueError, match="h must divide e"):
        attention(b, l, 2 * h + 1, 2 * h)     # odd over even: never integral


def test_substitution_by_name_uses_our_symbols():
    by_name = mlp(b, l, e, f, m1, s1).subs({"m1": 4, "s1": 4, "f": 64, "l": 8})
    by_symbol = mlp(b, l, e, f, m1, s1).subs({m1: 4, s1: 4, f: 64, l: 8})
    assert by_name == by_symbol and not by_name.total("flops_fwd").has(m1)
    with pytest.raises(ValueError, match="unknown symbol name 'heads'"):
        mlp(b, l, e, f).subs({"heads": 4})


NO_ARGUMENT = {
    "blocks/layer.py": "an internal invariant: the layer builder's own dispatch, no input reaches it",
    "extrema.py": "an internal invariant: Max and Min of nothing, which no input builds",
    "cli/calibrate.py": "a missing package (scipy), not an input",
    "cli/report.py": "a missing package (matplotlib), not an input",
    "numeric/dask_cluster.py": "a missing package (dask), not an input",
    "numeric/sweep.py": "a missing package (pyarrow), not an input",
}
"""Modules whose refusals name no argument, with the reason (one refusal each)."""


def test_every_refusal_names_its_argument():
    """Every ``InputError`` the package raises names the argument it refuses (issue 66: "every
    refusal names the input and the rule"), but those of ``NO_ARGUMENT``: read from the source, so a
    new refusal without one fails here."""
    import ast
    package = pathlib.Path(__file__).resolve().parents[1] / "symbolic_cost"
    bare = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node, "func", None)
            name = getattr(name, "id", getattr(name, "attr", None))
            if isinstance(node, ast.Call) and name in ("InputError", "InputTypeError") and len(node.args) < 2 \
                    and not any(k.arg == "argument" for k in node.keywords):
                bare.append(str(path.relative_to(package)))
    assert sorted(bare) == sorted(NO_ARGUMENT), sorted(set(bare) ^ set(NO_ARGUMENT))
