"""``budget.time_limit`` nested: the formula command bounds SymPy's ``simplify`` inside the command's
own CPU budget (``cli.formula.simplified``)."""

import time

import pytest

from symbolic_cost.budget import time_limit
from symbolic_cost.checks import InputError


def compute(cpu_seconds):
    start = time.process_time()
    while time.process_time() - start < cpu_seconds:
        pass


def test_a_limit_inside_another_leaves_the_outer_one_running():
    """An inner limit that expires is the inner one's refusal; the outer limit goes on with what
    was left of it and still stops a body that runs past it (the formula command bounds SymPy's
    simplify inside the command's own budget)."""
    reached = []
    with pytest.raises(InputError, match="gave up after 0.4 s of CPU time: outer"):
        with time_limit(0.4, "outer"):
            with pytest.raises(InputError, match="gave up after 0.05 s of CPU time: inner"):
                with time_limit(0.05, "inner"):
                    compute(3)
            reached.append("after the inner limit")
            compute(3)
            reached.append("the end of the body")
    assert reached == ["after the inner limit"]
    with time_limit(0.4, "outer"):              # an inner limit that does not expire changes nothing
        with time_limit(0.2, "inner"):
            compute(0.01)
        compute(0.05)
    with pytest.raises(InputError, match="gave up after 0.1 s of CPU time: outer"):
        with time_limit(0.1, "outer"):          # an inner limit longer than what is left: the outer refuses
            try:
                with time_limit(5, "inner"):
                    compute(3)
            except InputError:
                reached.append("the inner limit's refusal")
    assert reached == ["after the inner limit"]
