"""Issue 66, an eighth probe: the page's HTTP API (``symbolic-cost serve``, ``POST /api/KIND`` for
each of ``summary``, ``sweep``, ``layers``, ``search``, ``formula`` and ``inference``) sent hostile
values in every field (0, -1, 2**60, ``1e400`` and ``NaN``/``Infinity`` as JSON numbers, text,
objects, lists, ``null``, unknown keys, strings of a megabyte, JSON nested 100,000 deep), and the
maintenance commands (``calibrate``, ``report``, ``reproduce``) given hostile options and paths.

Most were refused as the rules ask (a 4xx, JSON, the field named).  What was not is tested here,
one test per finding.  The servers bind 127.0.0.1 on a free port, each test sends a handful of
requests, each bounded by ``WAIT`` seconds (a bound on a hung test, never a timing assertion), and
nothing is written outside ``tmp_path``."""

import json

import pytest

from symbolic_cost.cli import main
from test_app_network import ask, page, post  # noqa: F401  (page: the served page's fixture)


def strict(body: dict) -> dict:
    """``body`` sent again through a reader that refuses ``NaN`` and ``Infinity``: the reply is JSON."""
    def refuse(token):
        raise AssertionError(f"{token} in a reply")
    return json.loads(json.dumps(body), parse_constant=refuse)


def sent(port, body: str) -> tuple[int, dict]:
    """``body`` posted as a summary, inference ... (its ``kind`` first: ``"inference {...}"``)."""
    kind, _, raw = body.partition(" ")
    status, answer = ask(port, post(raw, **{"Content-Length": str(len(raw.encode()))})
                         .replace("/api/summary", f"/api/{kind}"))
    return status, strict(answer)


def cli_error(capsys, argv) -> str:
    """The command line's one-line refusal of ``argv`` (exit status 2)."""
    assert main(argv) == 2
    return capsys.readouterr().err.strip()


# JSON numbers: what the command line reads as typed, the page refused as no whole number


def test_a_json_number_with_a_fraction_is_read_as_the_command_line_reads_it(page):
    """``{"slo_ttft": 0.5}`` and ``{"set": {"b": 2.0}}`` (what ``json.dumps`` writes for a float)
    were refused, "slo_ttft must be text or an integer (a whole number), got a number with a
    fraction", where the command line takes ``--slo-ttft 0.5`` and ``--set b=2.0``.  A JSON number
    is now the command line's word as the request wrote it, and the command line judges it."""
    status, answer = sent(page, 'inference {"preset": "gpt2", "slo_ttft": 0.5}')
    assert status == 200 and "--slo-ttft=0.5" in answer["command"] and answer["output"]["load"]
    status, answer = sent(page, 'summary {"preset": "gpt2", "set": {"b": 2.0}}')
    assert status == 200 and "b=2.0" in answer["command"] and answer["output"]["layout"]["b"] == 2


def test_a_number_past_a_double_is_refused_as_the_command_line_refuses_it(page, capsys):
    """``{"set": {"b": 1e400}}`` was read as a float's infinity and refused as "a number with a
    fraction"; its digits now reach the command line as written, and the page's refusal is the
    command line's own for the same value."""
    status, answer = sent(page, 'summary {"preset": "gpt2", "set": {"b": 1e400}}')
    assert status == 422 and answer["error"] == cli_error(capsys, ["summary", "--preset", "gpt2", "--set", "b=1E+400"])
    status, answer = sent(page, 'inference {"preset": "gpt2", "rate": 1e400}')
    assert status == 422 and answer["error"] == cli_error(capsys, ["inference", "--preset", "gpt2", "--rate=1E+400"])


@pytest.mark.parametrize("body, named", [
    ('inference {"preset": "gpt2", "rate": NaN}', ("rate", "NaN")),
    ('inference {"preset": "gpt2", "slo_ttft": -Infinity}', ("slo_ttft", "-Infinity")),
    ('summary {"preset": "gpt2", "flash": Infinity}', ("flash", "Infinity")),
])
def test_nan_and_infinity_are_refused_by_their_names(page, body, named):
    """``NaN`` and ``Infinity`` (tokens Python's JSON reader takes and JSON has not) were named "a
    number with a fraction"; each is refused naming the field and the token."""
    status, answer = sent(page, body)
    assert status == 422 and all(name in answer["error"] for name in named), answer
