"""A tenth probe of the command line: lists typed with a value twice (``search --cp 1,1``), a
symbol ``optimize --over`` cannot choose (``--over es``), and the ``--accelerate`` reader's
switches written as text (``fsdp_offload_params: "true"``).  Each test says what happened
before; the expectations follow from the rule (each value once; a count to choose; accelerate's
own reading of a switch), not from the library's output."""

import argparse

import pytest

from test_refusals import refused
from test_hostile_seventh import refusal


# a value listed twice: one rule, checks.listed_once


def test_listed_once_names_each_repeat_once_in_the_order_listed():
    from symbolic_cost.checks import listed_once
    listed_once([1, 2, 4, 8], "--cp")
    error = refusal(lambda: listed_once([4, 1, 4, 2, 1, 4], "--cp"), "--cp")
    assert "4, 1 listed twice" in str(error)
    assert "[1] listed twice" in str(refusal(lambda: listed_once([[1], [2], [1]], "tensor"), "tensor"))
    listed_once(range(10**5), "b")          # a long list: linear, no refusal


@pytest.mark.parametrize("option, degrees, twice", [
    ("--cp", "1,1", "1"),            # was read as --cp 1, the repeat dropped unsaid
    ("--cp", "1,2,4,2", "2"),
    ("--cp", "1,1:8:x2", "1"),       # a list that overlaps a range (1, 2, 4, 8)
    ("--shard", "2,2", "2"),
])
def test_search_refuses_a_degree_listed_twice(capsys, option, degrees, twice):
    """``--cp 1,1`` (and ``--shard 2,2``) searched as if each degree were listed once."""
    extra = ["--zero", "3"] if option == "--shard" else []
    refused(capsys, ["search", "--preset", "gpt2", "--devices", "8", "--global-batch", "64", *extra, option, degrees],
            f"argument {option}", f"{twice} listed twice", "list each value once")


def test_search_degrees_still_read_lists_and_ranges():
    """``1,2:8:x2`` is 1, then 2 doubled to 8: 1, 2, 4, 8 (by hand), each once."""
    from symbolic_cost.cli.search import degrees
    assert degrees("1,2:8:x2") == [1, 2, 4, 8]
    assert degrees(" 8 , 2") == [8, 2]
    with pytest.raises(argparse.ArgumentTypeError, match="8 listed twice"):
        degrees("8,2:8:x2")


@pytest.mark.parametrize("argv, says", [
    (["sweep", "--preset", "gpt2", "--grid", "b=1,2,1"], ["argument --grid", "b: 1 listed twice"]),
    (["sweep", "--preset", "gpt2", "--grid", "b=1", "--field", "total,total_s"],   # total_s is total's column
     ["argument --field", "total named twice"]),
    (["formula", "--leading", "e,l,e"], ["--leading: e named twice: name each once"]),
    (["search", "--preset", "gpt2", "--devices", "8", "--global-batch", "64", "--tensor", "1d", "2d", "1d"],
     ["tensor: 1d listed twice", "--tensor"]),
])
def test_the_other_lists_keep_the_same_rule(capsys, argv, says):
    refused(capsys, argv, *says)


def test_a_search_space_field_listed_twice_is_refused_by_the_same_rule():
    from symbolic_cost.numeric.search import Space
    assert "1 listed twice" in str(refusal(lambda: Space(cp=(1, 2, 1)), "cp"))
    assert "1f1b listed twice" in str(refusal(lambda: Space(schedules=("1f1b", "1f1b")), "schedules"))
    assert Space(cp=(1, 2, 4)).cp == (1, 2, 4)


# optimize --over: a count of the block to choose


DENSE_LAYER = "b, l, e, f, h, m1, s1"
"""The symbols of a dense layer's cost (``symbols.DIMENSIONS``: batch, sequence, width, MLP width,
heads, tensor and sequence degrees), all whole numbers; the element sizes ``es`` and ``es_mask``
are bytes that ``--precision`` sets."""


@pytest.mark.parametrize("over", ["es", "es_mask"])
def test_optimize_refuses_an_element_size(capsys, over):
    """``optimize --over es`` tried element sizes of 1 to 64 bytes and printed ``es = 1`` as the
    optimum; the command chooses a degree (or another count), and ``--precision`` sets ``es``."""
    refused(capsys, ["optimize", "--over", over], f"--over {over}", "--precision",
            f"--over takes one of {DENSE_LAYER}")


def test_optimize_refuses_a_dimension_of_a_named_model_as_over(capsys):
    """``--preset gpt2 --over e`` was refused as ``--set e: not settable here``, a ``--set`` the
    command line did not hold; a named model fixes e, f, h, so b, l, m1, s1 are left to choose."""
    refused(capsys, ["optimize", "--preset", "gpt2", "--over", "e"], "--over e", "gpt2",
            "--over takes one of b, l, m1, s1")


def test_optimize_names_over_and_max_when_no_value_fits(capsys):
    """The default model (gpt3-175b, 96 heads) takes ``--set e=``, so ``--over e`` is a choice; but
    ``h | e`` leaves no width from 1 to 64.  It ended in ``optimum over e takes 1 to 4,096
    candidate values ..., got 0``, naming neither option."""
    refused(capsys, ["optimize", "--over", "e"], "--over e", "--max 64")


def test_optimize_still_lists_the_symbols_of_the_block(capsys):
    refused(capsys, ["optimize", "--over", "d"], "--over d", "does not depend on d", DENSE_LAYER)
    refused(capsys, ["optimize", "--over", "m1", "--set", "m1=2"], "--set m1", "give it one way")


def test_crossover_names_for_when_the_roots_are_not_one(capsys):
    """``crossover --for e`` (the MLP's FLOPs are quadratic in e) ended in "expected one positive
    crossover in e" without naming ``--for``."""
    refused(capsys, ["crossover", "--for", "e"], "--for e", "one positive crossover")
