"""The warm process (``cli.warm``): what it prints is what the full path prints, status included.

The oracle is ``cli.main`` itself, run in this process on the same words: the warm process must
be indistinguishable from it (output, error, exit status), in the caller's folder and
environment, for refusals as for answers."""

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from symbolic_cost.cli import answers, main, warm

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a warm process needs Linux")

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
          "intermediate_size": 2816, "num_attention_heads": 16, "num_hidden_layers": 4, "num_key_value_heads": 4,
          "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": False}

LINES = [
    ["summary", "--hf-config", "config.json", "--set", "b=3", "l=2048", "d=8"],
    ["summary", "--hf-config", "config.json", "--set", "b=5", "l=1024", "d=4", "m1=2", "s1=2", "--json"],
    ["summary", "--hf-config", "config.json", "--set", "m1=3"],              # refused: m1 must divide h
    ["summary", "--preset", "gpt2", "--set", "b=8", "d=8", "--zero", "1", "--step-time", "0.5"],
    ["table", "--block", "mlp", "--set", "m1=2", "b=4"],
    ["inference", "--preset", "llama-2-7b", "--set", "b=8", "l_in=512", "l_out=64", "--json"],
    ["formula", "--block", "mlp", "--field", "flops_fwd", "--set", "m1=1", "s1=1"],
    ["summary", "--help"],                                                # wrapped to the caller's width
]


def _wait_for(predicate, seconds=120.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def warm_env(tmp_path, monkeypatch):
    """A cache folder of its own with the setting on, the folder holding ``config.json`` as the
    working directory; any warm process started in it is stopped at the end.  The cache is a short
    folder of the system's temporary one, not under ``tmp_path``: a socket's path is bounded
    (``warm.LONGEST_ADDRESS``), and pytest-xdist's workers nest ``tmp_path`` a level deeper."""
    cache = Path(tempfile.mkdtemp(prefix="warm"))
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(cache))
    monkeypatch.setenv(warm.SETTING, "on")
    monkeypatch.delenv(warm.SETTING + "_REPORT", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    yield cache
    warm.stop()
    shutil.rmtree(cache, ignore_errors=True)


def _started(path):
    process = subprocess.Popen(warm.command(path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    assert _wait_for(lambda: path.exists() or process.poll() is not None), "no warm process came up"
    assert path.exists(), process.stderr.read().decode()
    return process


def test_a_warm_process_answers_as_the_full_path_does(warm_env, capsys):
    path = warm.address()
    process = _started(path)
    try:
        for words in LINES:
            status = warm.answer(words)
            warmed = capsys.readouterr()
            assert status == main(words), words
            full = capsys.readouterr()
            assert (warmed.out, warmed.err) == (full.out, full.err), words
        assert main(LINES[2]) == 2                   # the refusal is one, with its status
    finally:
        assert warm.stop(path)
        process.wait(timeout=60)
    assert not path.exists()                         # it removed its socket


def test_an_answer_from_a_warm_process_is_filed_as_the_full_path_files_it(warm_env, capsys):
    path = warm.address()
    process = _started(path)
    try:
        words = LINES[0]
        assert answers.cacheable(words) and not answers.answer(words)
        assert warm.answer(words) == 0
        first = capsys.readouterr().out
        assert answers.answer(words)                 # the same words again: from the answers on disk
        assert capsys.readouterr().out == first
    finally:
        warm.stop(path)
        process.wait(timeout=60)


def test_without_a_process_the_caller_runs_in_full_and_starts_one(warm_env):
    path = warm.address()
    assert warm.answer(LINES[0]) is None             # nothing listening: the caller answers itself
    try:
        assert _wait_for(path.exists), "no warm process was started"
    finally:
        assert _wait_for(lambda: warm.stop(path))


def test_off_by_default_and_only_for_its_commands(warm_env, monkeypatch, tmp_path):
    assert warm.answer(["sweep", "--preset", "gpt2", "--grid", "b=1,2"]) is None
    assert warm.answer([]) is None
    monkeypatch.delenv(warm.SETTING)
    assert not warm.enabled() and warm.answer(LINES[0]) is None
    time.sleep(0.5)
    assert not list(warm_env.glob("warm_*"))         # and nothing was started


def test_its_name_follows_the_code_and_the_settings(warm_env, monkeypatch):
    first = warm.address()
    monkeypatch.setenv("SYMBOLIC_COST_BACKEND", "numpy")
    assert warm.address() != first                   # another setting: another process
    monkeypatch.delenv("SYMBOLIC_COST_BACKEND")
    monkeypatch.setenv(warm.SETTING + "_REPORT", "cpu.txt")
    assert warm.address() == first                   # its own settings are not the code's


def test_the_caller_of_a_warm_process_imports_no_formula(warm_env, tmp_path, monkeypatch):
    """The point of it: a new ``--set`` value through the program as typed (``main()`` reading
    ``sys.argv``) prints the full path's answer, status included, without SymPy in the caller."""
    from test_answers import command
    path = warm.address()
    process = _started(path)
    try:
        for words in (LINES[0][:-1] + ["d=16"], LINES[2]):
            words = [str(tmp_path / w) if w == "config.json" else w for w in words]
            monkeypatch.setenv(warm.SETTING, "off")
            full = command(words, tmp_path / "full-cache", tmp_path / "full")
            monkeypatch.setenv(warm.SETTING, "on")
            warmed = command(words, warm_env, tmp_path / "warm")
            assert warmed[:3] == full[:3]
            assert (full[3], warmed[3]) == ("True", "False")
    finally:
        warm.stop(path)
        process.wait(timeout=60)


def test_a_request_it_cannot_read_is_dropped_and_the_process_goes_on(warm_env, capsys):
    """Half a message, a size past ``REQUEST_BYTES``, or bytes that are no JSON: the connection is
    closed, and the next command line is answered."""
    import socket
    import struct
    path = warm.address()
    process = _started(path)
    try:
        for payload in (b"\x00\x00", struct.pack(">Q", warm.REQUEST_BYTES + 1) + b"{}",
                        struct.pack(">Q", 3) + b"{{{"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.settimeout(30)
                connection.connect(str(path))
                connection.sendall(payload)
                connection.shutdown(socket.SHUT_WR)
                try:
                    assert connection.recv(1) == b""       # closed without an answer
                except ConnectionResetError:               # closed with bytes it never read
                    pass
        assert warm.answer(LINES[0]) == 0
        assert capsys.readouterr().out
    finally:
        warm.stop(path)
        process.wait(timeout=60)
