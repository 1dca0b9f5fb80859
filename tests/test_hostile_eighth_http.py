"""Issue 66, an eighth probe: the page's HTTP API (``symbolic-cost serve``, ``POST /api/KIND`` for
each of ``summary``, ``sweep``, ``layers``, ``search``, ``formula`` and ``inference``) sent hostile
values in every field (0, -1, 2**60, ``1e400`` and ``NaN``/``Infinity`` as JSON numbers, text,
objects, lists, ``null``, unknown keys, strings of a megabyte, JSON nested 100,000 deep), the
reader every value the page forwards goes through (a decimal of more digits than a double, a
number past its range, a space after a comma), and the maintenance commands (``calibrate``,
``report``, ``reproduce``) given hostile options and paths (a folder that does not exist, a file
where a folder belongs, an unknown or repeated name).

Most were refused as the rules ask (a 4xx, JSON, the field named).  What was not is tested here,
one test per finding.  The servers bind 127.0.0.1 on a free port, each test sends a handful of
requests, each bounded by ``WAIT`` seconds (a bound on a hung test, never a timing assertion), and
nothing is written outside ``tmp_path``."""

import json

import pytest

from symbolic_cost.cli import main
from test_refusals import refused
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


# the reader behind every value the page forwards: a literal rounded to a float


def test_a_number_is_read_as_written_not_as_the_float_nearest_it(capsys):
    """``--set b=1.0000000000000001`` (and the page's ``{"set": {"b": 1.0000000000000001}}``, now
    forwarded as written) was read through a float, rounded to 1 and answered as ``b = 1``;
    ``1e-400`` was read as 0 ("b must be a positive integer, got 0").  A literal is now the exact
    number its digits write: 10**16 + 1 over 10**16 is no integer, and 10**-400 is finer than the
    reader's 10**-30."""
    from sympy import Integer, Rational

    from symbolic_cost.reader import read
    assert read("1.0000000000000001") == Rational(10**16 + 1, 10**16)
    assert read("0.30000000000000001") == Rational(30000000000000001, 10**17)
    assert read("1.5e3") == Integer(1500) and read("1e-30") == Rational(1, 10**30)
    refused(capsys, ["summary", "--preset", "gpt2", "--set", "b=1.0000000000000001"], "--set b", "positive integer",
            "10000000000000001/10000000000000000")
    refused(capsys, ["summary", "--preset", "gpt2", "--set", "b=1e-400"], "--set b", "finer than 10**-30")


def test_a_literal_of_a_huge_exponent_is_refused_before_its_digits_are_made(capsys):
    """Read exactly, ``1e999999999`` would be an integer of a billion digits: refused by its
    exponent, as ``1e400`` is (it was "not a finite number", a float's infinity)."""
    refused(capsys, ["summary", "--preset", "gpt2", "--set", "b=1e999999999"], "--set b", "larger than 10**30")
    refused(capsys, ["summary", "--preset", "gpt2", "--set", "b=1e-999999999"], "--set b", "finer than 10**-30")


# the maintenance commands


@pytest.mark.parametrize("names, named", [(["deepflow-lstm", "nosuch"], "'nosuch'"),
                                          (["deepflow-lstm", "deepflow-lstm"], "named twice")])
def test_reproduce_checks_every_name_before_it_runs_any(capsys, tmp_path, names, named):
    """``reproduce deepflow-lstm nosuch --reports DIR`` ran deepflow-lstm and wrote its report into
    DIR, then refused ``nosuch``; ``deepflow-lstm deepflow-lstm`` ran it twice.  Both are refused
    before any reproduction runs: nothing is written."""
    reports = tmp_path / "reports"
    refused(capsys, ["reproduce", *names, "--reports", str(reports)], named)
    assert not reports.exists()


# refusals that quoted a value of a megabyte whole


def test_a_refusal_quotes_a_huge_value_cut(page, capsys):
    """A preset name of 100,000 characters came back in a refusal of 100,000 characters (a hub id,
    twice: 200,000), and 20,000 unknown keys were listed one by one; a refusal now quotes a value
    cut to a few dozen characters and lists at most five names, and still names the field."""
    status, answer = sent(page, 'summary {"preset": "' + "x" * 100_000 + '"}')
    assert status == 422 and "--preset" in answer["error"] and "invalid choice" in answer["error"]
    assert len(answer["error"]) < 1000
    keys = ", ".join(f'"k{i}": 1' for i in range(20_000))
    status, answer = sent(page, "summary {" + keys + "}")
    assert status == 422 and "unknown request field(s) k0, k1, k10, k100, k1000 and 19,995 more" in answer["error"]
    err = refused(capsys, ["summary", "--hf-model", "x" * 100_000], "--hf-model", "not a valid model id")
    assert len(err) < 1000
    err = refused(capsys, ["summary", "--zero", "9" * 5000], "--zero", "expects an integer")
    assert len(err) < 1000


@pytest.mark.parametrize("body, status, said", [
    ('summary {"model": 1.5}', 422, "model must be one of preset, config, hub, got a number"),
    ('summary {"model": true}', 422, "got a boolean"),
    ('summary {"model": NaN}', 422, "got NaN"),
    ('summary {"model": null, "preset": "gpt2"}', 200, ""),
])
def test_the_model_field_is_named_as_json_names_it_and_its_null_is_not_given(page, body, status, said):
    """``{"model": 1.5}`` was refused as "got Decimal('1.5')" (``True``, ``nan``: Python's names,
    not the request's), and ``{"model": null}`` as "got None", where a null in every other field
    is a field not given; a null model is now the default (a preset)."""
    got, answer = sent(page, body)
    assert got == status and said in answer["error"] and "Decimal" not in answer["error"], answer
    if status == 200:
        assert answer["output"]["model"] == "gpt2"


def test_an_answer_holding_nan_is_an_internal_error_in_json(monkeypatch):
    """No request of the probe got NaN or Infinity back, but nothing kept one out: ``json.dumps``
    writes them, and the page's ``JSON.parse`` fails on them (the page showed "no answer").  A
    command that printed one (a stand-in here) is now answered ``500``, in JSON, saying so."""
    import threading

    from symbolic_cost.app import server
    from symbolic_cost.cli import build_parser

    def printing_nan(words):
        print('{"model": "gpt2", "memory_bytes": NaN}')
        return 0
    httpd = server.Server(("127.0.0.1", 0), server.Handler)
    port, jobs = httpd.server_address[1], server.Jobs()
    httpd.RequestHandlerClass = type("Handler", (server.Handler,), {
        "main": staticmethod(printing_nan), "build_parser": staticmethod(build_parser), "jobs": jobs,
        "origins": server.origins("127.0.0.1", port)})
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    threading.Thread(target=jobs.run_forever, daemon=True).start()
    try:
        status, answer = sent(port, 'summary {"preset": "gpt2"}')
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert status == 500 and "NaN or Infinity" in answer["error"]


def test_a_value_after_a_space_is_read(capsys):
    """``--grid "b=1, 2"`` and ``--set "b= 2"`` were refused, "cannot read it (not a formula) at
    position 1 of \\" 2\\"" (Python's parser takes no leading space), where a list written with a
    space after its commas is what users type.  The reader skips leading white space, and a refusal
    still counts positions in the text as typed."""
    from sympy import Rational

    from symbolic_cost.reader import read
    assert read(" 2") == 2 and read("\t0.25") == Rational(1, 4)
    assert main(["sweep", "--preset", "gpt2", "--grid", "b=1, 2", "--field", "peak_bytes"]) == 0
    rows = capsys.readouterr().out.split()
    assert rows[0] == "b,peak_bytes" and [row.split(",")[0] for row in rows[1:]] == ["1.0", "2.0"]
    refused(capsys, ["summary", "--preset", "gpt2", "--set", "b=  b +* 2"], "--set b", "at position 6")
