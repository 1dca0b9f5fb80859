"""``symbolic-cost serve`` (issue 30): the page's requests become the command line's own command
lines (refused with its messages, nothing evaluated), and, in a real headless Chromium, the page
shows the numbers ``summary --json`` prints for the configuration typed into it.

The oracle is the command line run here with the options written out by hand (``--set b=2 d=4``,
``--zero 1``, ...), not the page's own command.  The browser test needs Debian's ``chromium``
and Playwright's Python package (``.ci/run`` installs both where it can); without either it is
skipped, saying which is missing (``page_driver``).  It saves the page as ``app.png`` in the folder
``SYMBOLIC_COST_ARTEFACTS`` names (else its temporary folder), and also where
``SYMBOLIC_COST_SCREENSHOT`` names (``reports/app.png`` when the docs' picture is renewed): a test
writes nothing into the tree by itself."""

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from page_driver import ROOT, cli, opened, screenshot, searched, served_page, settle
from symbolic_cost.app import commands
from symbolic_cost.app.server import loopback
from symbolic_cost.cli import main


def test_a_request_gets_what_the_command_prints():
    request = {"model": "preset", "preset": "gpt2", "set": {"b": "2", "d": "2", "p": ""}, "zero": "1",
               "flash": True}
    answer = commands.answer("summary", request, main)
    status, out, _ = cli("summary", "--preset", "gpt2", "--set", "b=2", "d=2", "--zero", "1", "--flash", "--json")
    assert answer["status"] == status == 0 and answer["output"] == json.loads(out)
    assert answer["command"] == "symbolic-cost summary --preset=gpt2 --set b=2 d=2 --zero=1 --flash --json"


def test_a_pasted_config_that_is_not_text_is_refused():
    """A fuzz of the server: a lone surrogate (``"\\ud800"`` in the request's JSON) cannot be written
    to the config file; it ended in an internal error."""
    answer = commands.answer("summary", {"model": "config", "config": "\ud800"}, main)
    assert answer["status"] == 2 and "config must be text" in answer["error"]


def test_the_attention_kernel_chosen_on_the_page_is_the_command_lines():
    """The page's menu of fused attention libraries is ``summary --attention-kernel``'s (none
    chosen: the system's own), and a summary and a search asked with one are the command line's."""
    from symbolic_cost.app.server import choices
    from symbolic_cost.cli import build_parser
    offered = choices(build_parser)["attention_kernel"]
    assert offered == {"choices": ["cudnn", "flash-attention-2", "flash-attention-3"], "default": None}
    request = {"model": "preset", "preset": "llama-2-7b", "system": "h100", "set": {"l": "4096"}, "flash": True,
               "attention_kernel": "flash-attention-2"}
    answer = commands.answer("summary", request, main)
    status, out, _ = cli("summary", "--preset", "llama-2-7b", "--set", "l=4096", "--system", "h100",
                         "--attention-kernel", "flash-attention-2", "--flash", "--json")
    assert answer["status"] == status == 0 and answer["output"] == json.loads(out)
    assert answer["output"]["layout"]["attention_kernel"] == "flash-attention-2"
    searched = commands.answer("search", {**request, "devices": "8", "global_batch": "64", "top": "1"}, main)
    assert "--attention-kernel=flash-attention-2" in searched["command"].split()
    refused = commands.answer("summary", {**request, "flash": False}, main)     # a fused kernel without flash
    assert refused["status"] == 2 and "attention_kernel" in refused["error"]


@pytest.mark.parametrize("request_, words", [
    ({"set": {"b": "__import__('os').system('true')"}}, ["--set", "b=__import__('os').system('true')"]),
    ({"set": {"b": "0"}}, ["--set", "b=0"]),
    ({"zero": "--ideal"}, ["--zero", "--ideal"]),     # a value never becomes an option
    ({"system": "tpu"}, ["--system", "tpu"]),
])
def test_bad_input_is_refused_with_the_command_lines_message(request_, words):
    answer = commands.answer("summary", {"model": "preset", "preset": "gpt2", **request_}, main)
    status, _, error = cli("summary", "--preset", "gpt2", *words, "--json")
    assert answer["status"] == status == 2 and answer["output"] is None
    if words[1] != "--ideal":      # typed as two words the shell hands argparse another error
        assert answer["error"] == error
    assert answer["error"].startswith("symbolic-cost")


def test_requests_the_page_never_sends_are_refused():
    assert "unknown request field(s) command" in commands.answer("summary", {"command": "rm"}, main)["error"]
    assert "unknown layout field(s) e" in commands.answer("summary", {"set": {"e": "64"}}, main)["error"]
    assert "keep: unknown layout field(s) x" in commands.answer("formula", {"field": "parameters",
                                                                            "keep": "x"}, main)["error"]
    assert "set.b must be text or a finite number, got a list" in commands.answer(
        "summary", {"set": {"b": [1]}}, main)["error"]
    assert "serve.l_in must be text or a finite number, got null" in commands.answer(
        "inference", {"serve": {"l_in": None}}, main)["error"]
    assert "grid is missing" in commands.answer("sweep", {"preset": "gpt2"}, main)["error"]
    assert "model must be one of" in commands.answer("summary", {"model": "file"}, main)["error"]
    assert "set must be an object" in commands.answer("search", {"set": 5, "devices": 4}, main)["error"]
    assert "flash must be true or false" in commands.answer("summary", {"flash": "yes"}, main)["error"]


def test_search_and_formula_refuse_as_the_command_line_does():
    answer = commands.answer("search", {"model": "preset", "preset": "gpt2", "global_batch": "64"}, main)
    assert answer["error"] == cli("search", "--preset", "gpt2", "--global-batch", "64", "--json")[2]
    assert "search needs --devices" in answer["error"]
    answer = commands.answer("formula", {"model": "preset", "preset": "gpt2", "field": "flops"}, main)
    assert answer["status"] == 2 and "--total" in answer["error"] and "invalid choice: 'flops'" in answer["error"]


def test_the_formula_is_timed_on_the_chosen_system():
    """The page's formula of the step time is the command line's on the system chosen (it used to be
    H100's whatever the choice), and a choice formula --total does not take is refused by name."""
    request = {"model": "preset", "preset": "gpt2", "field": "total", "system": "b200",
               "set": {"b": "2", "l": "512", "d": "1", "p": ""}}
    answer = commands.answer("formula", request, main)
    status, out, _ = cli("formula", "--preset", "gpt2", "--total", "total", "--set", "b=2", "l=512", "d=1",
                         "--system", "b200", "--latex")
    assert answer["status"] == status == 0 and answer["output"] == out
    h100 = commands.answer("formula", {**request, "system": "h100"}, main)
    assert h100["output"] != answer["output"]
    refused = commands.answer("formula", {**request, "zero": "1"}, main)
    assert refused["status"] == 2 and "zero: formula --total builds the totals under the training defaults" in \
        refused["error"]


def test_the_host_is_loopback_unless_told_and_a_busy_port_is_refused():
    assert loopback("127.0.0.1") and loopback("::1") and not loopback("0.0.0.0") and not loopback("example.org")
    server = subprocess.Popen([sys.executable, "-m", "symbolic_cost", "serve", "--port", "0"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = re.search(r"http://127\.0\.0\.1:(\d+)/", server.stdout.readline()).group(1)
        status, _, error = cli("serve", "--port", port)
        assert status == 2 and f"cannot listen on 127.0.0.1:{port}" in error and "(--port)" in error
        for body in (b"{", b"[" * 100_000):      # not JSON; nested deeper than the parser goes
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/summary", data=body, timeout=30)
            assert refused.value.code == 400 and b"a request is a JSON object" in refused.value.read()
    finally:
        server.terminate()
        server.wait(10)


LAYOUT = {"b": "2", "l": "512", "d": "4", "p": "2", "n_micro": "4"}
ORACLE = ["summary", "--preset", "gpt2", "--set", "b=2", "l=512", "m1=1", "s1=1", "p=2", "d=4", "cp=1",
          "n_micro=4", "--zero", "1", "--recompute", "selective", "--precision", "bf16", "--system", "a100",
          "--flash", "--json"]
"""The configuration typed into the page, and the same as a command line written out by hand."""


TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 4,
        "num_hidden_layers": 4, "vocab_size": 1000, "max_position_embeddings": 1024}
"""A config.json pasted into the page."""


def g4(value: float) -> str:
    """As the command line prints a number: four significant digits."""
    return f"{value:.4g}"


def test_the_page_shows_what_summary_json_prints(tmp_path):
    with served_page() as (page, url):
        opened(page, url)
        for name, value in LAYOUT.items():
            page.fill(f"#set-{name}", value)
        for name, value in (("zero", "1"), ("recompute", "selective"), ("system", "a100")):
            page.select_option(f"#{name}", value)
        page.check("#flash")                  # every change answers by itself: no button pressed
        settle(page)
        oracle = json.loads(cli(*ORACLE)[1])
        shown_bytes = lambda row: int(page.inner_text(f"#{row} td:nth-child(2)").replace(",", ""))  # noqa: E731
        for key in ("weight_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes", "memory_bytes"):
            assert shown_bytes(f"mem-{key}") == oracle[key], key
        assert shown_bytes("mem-peak") == oracle["peak"]["bytes"]
        for part, seconds in oracle["step_time_s"].items():
            cell = page.locator(f"#time-{part} td:nth-child(2) span")
            assert float(cell.get_attribute("data-value")) == seconds, part
            assert cell.inner_text() == f"{g4(seconds)} s", part
        assert float(page.get_attribute("#mfu", "data-value")) == oracle["predicted"]["mfu"]
        assert page.inner_text("#mfu") == f"{100 * oracle['predicted']['mfu']:.1f}%"
        assert page.inner_text("#tokens") == f"{oracle['predicted']['tokens_per_s_per_device']:,.0f}"
        assert page.locator("#memory-chart rect").count() == 4
        peak, capacity = oracle["peak"]["bytes"], oracle["peak"]["capacity_bytes"]
        assert page.inner_text("#verdict").startswith(f"fits: {g4(peak / 2**30)} GiB of {g4(capacity / 2**30)} GiB")

        page.select_option("#field", "memory_bytes")
        page.fill("#keep", "b")
        page.click("#formula-run")
        page.wait_for_function("document.getElementById('latex').textContent.length > 0")
        printed = cli("formula", "--preset", "gpt2", "--total", "memory_bytes", "--set", "l=512", "m1=1",
                      "s1=1", "p=2", "d=4", "cp=1", "n_micro=4", "--precision", "bf16", "--flash", "--latex")[1]
        assert page.inner_text("#latex") == printed.strip() and "b" in printed     # b kept as a symbol
        assert page.inner_text("#formula-error") == ""                             # bytes: no note
        page.select_option("#field", "total")
        page.click("#formula-run")
        page.wait_for_function("document.getElementById('formula-error').textContent.includes('peak rates')")
        noted = cli("formula", "--preset", "gpt2", "--total", "total", "--set", "l=512", "m1=1", "s1=1", "p=2",
                    "d=4", "cp=1", "n_micro=4", "--precision", "bf16", "--flash", "--latex")[2]
        assert page.inner_text("#formula-error") == noted.strip() and "datasheet's peak rates" in noted
        settle(page)
        screenshot(page, tmp_path, "app")
        if os.environ.get("SYMBOLIC_COST_SCREENSHOT"):       # the docs' picture, renewed on request
            page.screenshot(path=os.environ["SYMBOLIC_COST_SCREENSHOT"], full_page=True)

        searches = int(page.get_attribute("body", "data-searches") or 0)
        page.fill("#devices", "")
        page.click("#search-run")
        searched(page, searches)
        refused = cli("search", "--preset", "gpt2", "--global-batch", "64", "--seq", "512", "--json")[2]
        assert page.inner_text("#search-error") == refused and "search needs --devices" in refused

        config = tmp_path / "config.json"
        config.write_text(json.dumps(TINY))
        page.check("input[name=model][value=config]")
        page.fill("#config", config.read_text())
        settle(page)
        oracle = json.loads(cli("summary", "--hf-config", str(config), *ORACLE[3:])[1])
        assert shown_bytes("mem-memory_bytes") == oracle["memory_bytes"]
        total = page.locator("#time-total td:nth-child(2) span").get_attribute("data-value")
        assert float(total) == oracle["step_time_s"]["total"]

        page.fill("#config", json.dumps({"model_type": "gpt2", "n_layer": 2}))     # the rest at GPT2Config()'s
        settle(page)
        assert page.inner_text("#summary-error").startswith("note: config.json leaves out n_embd, n_head, vocab_size")
        page.fill("#config", config.read_text())
        settle(page)
        assert page.inner_text("#summary-error") == ""

        page.fill("#set-b", "2**120")
        settle(page)
        refused = cli("summary", "--hf-config", str(config), "--set", "b=2**120", "--json")[2]
        assert page.inner_text("#summary-error") == refused and "larger than 10**30" in refused
        assert page.inner_text("#memory-table") == "" and page.inner_text("#verdict") == ""


def test_a_host_off_loopback_is_warned_about_and_still_served(monkeypatch, capsys):
    from symbolic_cost.app import server

    class Stopped:
        """Binds nothing; serves nothing."""
        def __init__(self, address, handler):
            self.server_address, self.RequestHandlerClass = address, handler

        def serve_forever(self):
            pass

        def shutdown(self):
            pass

        def server_close(self):
            pass

    def interrupted(self):
        raise KeyboardInterrupt                # Ctrl-C in the main thread, which runs the answers
    monkeypatch.setattr(server, "Server", Stopped)
    monkeypatch.setattr(server.Jobs, "run_forever", interrupted)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")       # serve sets it; restored after the test
    assert main(["serve", "--host", "0.0.0.0", "--port", "8123"]) == 0
    printed = capsys.readouterr()
    assert "warning: --host 0.0.0.0 is not a loopback address" in printed.err
    assert "http://0.0.0.0:8123/" in printed.out
    assert main(["serve", "--port", "8123"]) == 0
    assert capsys.readouterr().err == ""


def test_the_serving_view_offers_how_an_engine_gives_kv_blocks():
    """The serving view's menu of KV-block allocation is the command line's ``--kv-allocation``
    (its choices read from ``inference``'s parser), and a load test asked with it is the command
    line's, written out by hand."""
    from symbolic_cost.app.server import choices
    from symbolic_cost.cli import build_parser
    assert choices(build_parser)["kv_allocation"]["choices"] == ["reserve", "on-demand", "estimate"]
    request = {"model": "preset", "preset": "llama-2-7b", "serve": {"l_in": "256", "l_out": "16"}, "engine": "vllm",
               "kv_allocation": "reserve", "rate": "4", "requests": "20"}
    answer = commands.answer("inference", request, main)
    status, out, _ = cli("inference", "--preset", "llama-2-7b", "--set", "l_in=256", "l_out=16", "--engine", "vllm",
                         "--kv-allocation", "reserve", "--rate", "4", "--requests", "20", "--json")
    assert answer["status"] == status == 0 and answer["output"] == json.loads(out)
    assert answer["output"]["load"]["kv_allocation"] == "reserve"


def test_the_serving_view_offers_requests_of_their_own_lengths():
    """The serving view's menus of prompt and output lengths are the command line's
    ``--prompt-lengths`` and ``--output-lengths``, and a load test asked with them is the command
    line's, written out by hand."""
    from symbolic_cost.app.server import choices
    from symbolic_cost.cli import build_parser
    offered = choices(build_parser)
    assert offered["output_lengths"] == offered["prompt_lengths"] == {"choices": ["fixed", "geometric"],
                                                                      "default": "fixed"}
    request = {"model": "preset", "preset": "llama-2-7b", "serve": {"l_in": "256", "l_out": "16"},
               "prompt_lengths": "fixed", "output_lengths": "geometric", "rate": "4", "requests": "20"}
    answer = commands.answer("inference", request, main)
    status, out, _ = cli("inference", "--preset", "llama-2-7b", "--set", "l_in=256", "l_out=16", "--prompt-lengths",
                         "fixed", "--output-lengths", "geometric", "--rate", "4", "--requests", "20", "--json")
    assert answer["status"] == status == 0 and answer["output"] == json.loads(out)
    assert answer["output"]["load"]["output_lengths"] == "geometric"
