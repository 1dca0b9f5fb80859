"""Issue 66, a ninth probe: the symbolic commands (formula, crossover, optimize, scheme, table,
profile) with symbolic input: ``--set`` values that are formulas in other symbols (``b=2*l``,
``l=e/h``, ``m1=h``), a symbol set to itself (``b=b``), cycles (``b=l l=b``), values that refer
to what the model or ``--precision`` fixes (``l=es``, ``l=e`` with a model named), names the
block does not hold, ``--over``/``--for``/``--by``/``--field`` choices that do not apply, a
crossover of a block with itself, ``--latex`` and ``--format json/csv``.  Most of it was already
refused by name or answered right; what was not is tested here, each test saying what happened
before; the expectations follow from the rule, not from the library's output."""

import pytest

from test_refusals import refused
from test_hostile_seventh import refusal


# a --set value that refers to what the command fixes


@pytest.mark.parametrize("command", [["table"], ["formula"], ["scheme"], ["optimize"], ["summary"], ["profile"]])
def test_a_set_value_naming_the_element_size_is_refused_alike(capsys, command):
    """``table --set l=es`` printed a table at ``l=2`` (``es``, the 2 bytes of bf16, put in) and
    ``formula --set l=es`` a formula in ``2*b`` where ``l`` was asked to follow ``es``, while
    ``summary`` and ``profile`` refused the same value ("refers to es, which the model fixes
    here").  The rule (docs/errors.md) is that of the whole-model commands: a value refers only to
    what the command lets you set, so that the value shown is the value used; every command now
    refuses it, naming ``--set l`` and ``es``."""
    refused(capsys, command + ["--set", "l=es"], "--set l=es", "refers to es")


def test_a_set_value_naming_the_element_size_it_also_sets_is_kept(capsys):
    """Setting ``es`` too makes the reference the user's own: ``l=es es=4`` is ``l=4``, the
    same formula as ``--set l=4 es=4``."""
    from symbolic_cost.cli import main
    assert main(["formula", "--field", "mem_fwd", "--set", "l=es", "es=4"]) == 0
    referred = capsys.readouterr().out
    assert main(["formula", "--field", "mem_fwd", "--set", "l=4", "es=4"]) == 0
    assert referred == capsys.readouterr().out


def test_a_set_value_naming_a_named_models_width_is_refused_as_summary_does(capsys):
    """``formula --preset gpt2 --set l=e`` answered at ``l = 768`` (gpt2's ``e`` put in) where
    ``summary --preset gpt2 --set l=2*h`` refuses (tests/test_corpus.py): with a model named, ``e``
    is not settable in either, and a value may refer only to what is."""
    refused(capsys, ["formula", "--preset", "gpt2", "--set", "l=e"], "--set l=e", "refers to e")
    refused(capsys, ["table", "--preset", "gpt2", "--set", "b=2*h"], "--set b=2*h", "refers to h")


def test_a_set_value_naming_a_settable_dimension_is_still_answered(capsys):
    """The documented ``--set f=4*e`` (docs/scaling.md) stays: ``e`` is a symbol there, or the
    default model's width which ``--set`` may change.  The MLP's weights are ``2 e f`` elements
    and the layer norm's gain and bias ``2 e``, at 2 bytes (bf16): at ``e = 8``, ``f = 32``, that
    is ``2 (2 * 8 * 32 + 2 * 8) = 1056`` bytes."""
    from symbolic_cost.cli import main
    assert main(["formula", "--field", "weights", "--no-bias", "--set", "f=4*e", "--at", "e=8", "m1=1"]) == 0
    assert capsys.readouterr().out.strip() == "1056"


# the Python API's paper_form and the command line's --by


def test_paper_form_refuses_a_by_that_is_not_a_monomial():
    """``paper_form(b*l*e + l, by=l + e)`` answered ``(e + l)*(b*e*l/(e + l) + l/(e + l))`` where
    ``formula --by l+e`` refuses ("--by factors out a monomial"): the rule now lives in
    ``latex.monomial``, which both call, so the API refuses it naming ``by``."""
    from symbolic_cost.latex import paper_form
    from symbolic_cost.symbols import b, e, l
    assert "monomial" in str(refusal(lambda: paper_form(b * l * e + l, by=l + e), "by"))
    # a monomial, numbers and powers included, is still factored out: b e l (1 + 1/(b e))
    assert paper_form(b * l * e + l, by=b * l * e).expand() == b * l * e + l


# crossover


def test_a_crossover_in_a_size_below_one_is_refused(capsys):
    """``crossover --preset gpt2 --field flops_bwd --for b`` printed ``b = 64/86123 = 0.000743``:
    a batch of less than one sequence, so the two blocks cost the same at no batch size at all
    (every size is a positive integer, ``symbols.b`` says so).  The same formula left symbolic was
    printed too, although it is below 1 at every real width tried.  Both are refused naming
    ``--for``; a crossover between two sizes, or past 1, is still printed."""
    refused(capsys, ["crossover", "--preset", "gpt2", "--field", "flops_bwd", "--for", "b"], "--for", "b of 1 or more")
    refused(capsys, ["crossover", "--field", "flops_bwd", "--for", "b"], "--for", "below 1")
    from symbolic_cost.cli import main
    assert main(["crossover", "--preset", "gpt2", "--field", "act_out", "--for", "l"]) == 0
    assert "at l =" in capsys.readouterr().out


# optimize --latex


def test_optimize_latex_prints_the_relaxed_optimum_as_latex(capsys):
    """``optimize --over m1 --latex`` printed the derivative as LaTeX but the relaxed optimum as
    SymPy text (``128*sqrt(168145269259155)/41431125``): --latex was honoured for one formula of
    two.  Now no formula it prints holds SymPy's ``sqrt(`` or ``*``, and the root is a ``\\sqrt``."""
    from symbolic_cost.cli import main
    assert main(["optimize", "--over", "m1", "--latex"]) == 0
    relaxed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("relaxed optimum")]
    assert relaxed, "no relaxed optimum printed"
    formula = relaxed[0].split(" = ")[1]
    assert "sqrt(" not in formula and "*" not in formula and "\\sqrt" in formula, relaxed[0]


# formula --at with values that refer to others


def test_an_at_value_referring_to_another_is_the_same_point(capsys):
    """``formula --at l=2*b b=3`` printed ``6*b*(...)``: SymPy put ``b = 3`` in first and then
    ``l = 2*b``, bringing ``b`` back, so the point ``l = 6, b = 3`` was lost.  Now the values are
    resolved as ``--set`` resolves them: the same formula as ``--at l=6 b=3``."""
    from symbolic_cost.cli import main
    assert main(["formula", "--at", "l=2*b", "b=3"]) == 0
    referred = capsys.readouterr().out
    assert main(["formula", "--at", "l=6", "b=3"]) == 0
    assert referred == capsys.readouterr().out
    assert "b" not in referred and "l" not in referred, referred


def test_an_at_cycle_is_refused_as_set_refuses_it(capsys):
    """``formula --at b=l l=b`` printed ``b**2*(...)`` (one after the other, where the formula is
    ``b*l*(...)``); ``--set b=l l=b`` refuses the cycle.  Now ``--at`` refuses it too."""
    refused(capsys, ["formula", "--at", "b=l", "l=b"], "--at", "refer to each other")


def test_an_at_value_naming_a_symbol_the_formula_does_not_hold_is_refused(capsys):
    """``formula --at l=es`` printed a formula in ``es`` although ``--precision`` had put ``es = 2``
    in it (``--field mem_fwd`` then held both ``es`` and the 2 it stands for).  Now refused naming
    ``--at`` and ``es``; ``--at b=l`` (the formula's own ``l``) is still answered."""
    refused(capsys, ["formula", "--at", "l=es"], "--at l=es", "refers to es")
    from symbolic_cost.cli import main
    assert main(["formula", "--at", "b=l"]) == 0
    assert "b" not in capsys.readouterr().out


def test_crossover_of_an_expression_with_itself_says_they_are_equal_everywhere():
    """``analysis.crossover(l*e, l*e, l)`` said "expected one positive crossover in l; found
    none", where the two are equal at every ``l`` (the command line refuses ``--a mlp --b mlp``
    for that reason).  Now the API says so, naming ``b``."""
    from symbolic_cost.analysis.scaling import crossover
    from symbolic_cost.symbols import e, l
    assert "every l" in str(refusal(lambda: crossover(l * e, e * l, l), "b"))
    assert crossover(4 * l**2 * e, 24 * l * e**2, l) == 6 * e      # 4 l e = 24 e**2 at l = 6 e
