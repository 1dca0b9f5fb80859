"""The command line's answers from the cache (``cli.answers``): a second ``summary`` or ``sweep``
with the same words prints what the full path printed, byte for byte, without importing SymPy; a
refused input, an explicit ``argv``, a file the readers would refuse and a long output are never
answered from it; a file's bytes are part of the key."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from symbolic_cost.cli import answers, main
from symbolic_cost.numeric import kernel_cache

ROOT = Path(__file__).resolve().parent.parent

RUN = ("import sys; from symbolic_cost.cli import main; sys.argv = ['symbolic-cost', *sys.argv[1:]]; status = main(); "
       "open(MARK, 'w').write(str('sympy' in sys.modules)); sys.exit(status)")

LINES = [
    ["summary", "--preset", "gpt2", "--set", "b=8", "d=8", "--zero", "1"],
    ["summary", "--preset", "llama-2-7b", "--set", "m1=8", "s1=8", "d=16", "p=4", "n_micro=32", "--zero", "1",
     "--flash", "--json"],
    ["summary", "--preset", "gpt3-175b", "--set", "m1=8", "s1=8", "p=16", "d=8", "n_micro=64", "--step-time", "12.5",
     "--units", "si"],
    ["summary", "--preset", "llama-2-7b", "--set", "d=8", "--zero", "3", "--offload", "optimizer", "--lora-rank", "16",
     "--lora-base", "nf4", "--system", "a100"],
    ["sweep", "--preset", "gpt2", "--grid", "b=1,2,4", "m1=1,2", "--where", "memory_bytes <= 4e9",
     "--field", "memory_bytes,total"],
    ["sweep", "--preset", "gpt3-175b", "--set", "b=1", "l=2048", "d=8", "n_micro=64", "--zero", "1",
     "--grid", "m1=1:8:x2", "p=1:32:x2", "--field", "memory_bytes,total", "--top", "3", "--by", "total"],
]


def command(words, cache, mark):
    """Run ``symbolic-cost WORDS`` as the program would (``main()`` reading ``sys.argv``) in a fresh
    process; its status, output, error and whether it imported SymPy."""
    code = RUN.replace("MARK", repr(str(mark)))
    env = {**os.environ, "SYMBOLIC_COST_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, *words], capture_output=True, env=env, cwd=ROOT,
                          timeout=300)
    return done.returncode, done.stdout, done.stderr, Path(mark).read_text() if Path(mark).exists() else None


@pytest.mark.parametrize("words", LINES, ids=lambda w: f"{w[0]}-{w[2]}")
def test_a_cached_answer_is_the_full_paths_output_without_sympy(words, tmp_path):
    full = command(words, tmp_path / "cache", tmp_path / "full")
    assert full[0] == 0 and full[3] == "True"           # an empty cache: the formulas were built
    assert len(list((tmp_path / "cache").glob("answer_*.json"))) == 1
    cached = command(words, tmp_path / "cache", tmp_path / "cached")
    assert cached[:3] == full[:3]                       # status, stdout and stderr, byte for byte
    assert cached[3] == "False"                         # answered without importing SymPy


def test_a_damaged_answer_runs_the_full_path(tmp_path):
    words = LINES[0]
    full = command(words, tmp_path / "cache", tmp_path / "full")
    for path in (tmp_path / "cache").glob("answer_*.json"):
        path.write_text("{not json")
    again = command(words, tmp_path / "cache", tmp_path / "again")
    assert again[:3] == full[:3] and again[3] == "True"


def test_a_refused_input_is_never_kept(tmp_path):
    words = ["summary", "--preset", "gpt2", "--set", "m1=5"]     # GPT-2's 12 heads are not divisible by 5
    status, out, err, _ = command(words, tmp_path / "cache", tmp_path / "mark")
    assert status == 2 and out == b"" and b"m1" in err
    assert not list((tmp_path / "cache").glob("answer_*"))


def test_an_explicit_argv_always_runs_in_full(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path))
    assert main(["summary", "--preset", "gpt2"]) == 0
    assert "parameters" in capsys.readouterr().out
    assert not list(tmp_path.glob("answer_*"))         # tests call main(argv) and monkeypatch the library


def test_an_edited_package_file_is_a_new_key(tmp_path, monkeypatch):
    (tmp_path / "formula.py").write_text("FLOPS = 2\n")
    monkeypatch.setattr(kernel_cache, "PACKAGE", tmp_path)
    monkeypatch.setattr(kernel_cache, "_DIGEST", [])
    before = answers.key(["summary", "--preset", "gpt2"])
    (tmp_path / "formula.py").write_text("FLOPS = 3\n")
    monkeypatch.setattr(kernel_cache, "_DIGEST", [])
    assert answers.key(["summary", "--preset", "gpt2"]) != before


def test_the_cache_off_answers_nothing_and_keeps_nothing(monkeypatch, capsys):
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", "off")
    words = ["summary", "--preset", "gpt2"]
    assert not answers.answer(words)
    with answers.recording(words) as keep:
        print("an answer")
        keep(0)
    assert capsys.readouterr().out == "an answer\n"
    assert answers._path(words) is None


def test_a_tool_preset_is_found_without_importing_the_package_first(tmp_path):
    """The package loads ``tools`` lazily: ``conventions.get`` registers the tools' presets itself."""
    code = ("from symbolic_cost import conventions; "
            "print(conventions.get('lbnl-2024') is conventions.PRESETS['lbnl-2024'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.stdout.strip() == "True", done.stderr


def test_a_long_answer_is_not_kept(tmp_path, monkeypatch, capsys):
    """A sweep's rows can run to gigabytes: an output past ``ANSWER_BYTES`` is printed, not kept."""
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path))
    monkeypatch.setattr(answers, "ANSWER_BYTES", 100)
    words = ["sweep", "--preset", "gpt2", "--grid", "b=1,2"]
    with answers.recording(words) as keep:
        print("x" * 60)
        print("y" * 60)
        keep(0)
    assert capsys.readouterr().out == "x" * 60 + "\n" + "y" * 60 + "\n"
    assert not list(tmp_path.glob("answer_*"))
    with answers.recording(words) as keep:
        print("x" * 60)
        keep(0)
    assert len(list(tmp_path.glob("answer_*"))) == 1


def test_a_file_option_is_answered_under_its_bytes(tmp_path):
    """Issue 64: ``summary --hf-config`` always ran in full.  The same words over the same bytes are
    answered from the cache without SymPy; the same words over an edited file are a new key, run in
    full, and print the edited model (12 layers, then 2: hand-made configs)."""
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257}')
    words = ["summary", "--hf-config", str(config), "--set", "b=2", "l=512", "d=4", "--zero", "1"]
    full = command(words, tmp_path / "cache", tmp_path / "full")
    cached = command(words, tmp_path / "cache", tmp_path / "cached")
    assert full[0] == 0 and full[3] == "True" and cached[:3] == full[:3] and cached[3] == "False"
    assert b"parameters: 124,439,808" in full[1]            # GPT-2 small, as GPT2Config counts it
    config.write_text('{"model_type": "gpt2", "n_layer": 2, "n_embd": 768, "n_head": 12, "vocab_size": 50257}')
    edited = command(words, tmp_path / "cache", tmp_path / "edited")
    assert edited[0] == 0 and edited[3] == "True" and edited[1] != full[1]
    assert b"parameters: 53,561,088" in edited[1]          # 124,439,808 - 10 layers x 7,087,872
    assert len(list((tmp_path / "cache").glob("answer_*.json"))) == 2


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_file_option_that_is_no_small_regular_file_is_left_to_the_full_path(tmp_path, monkeypatch):
    fifo, big = tmp_path / "fifo.json", tmp_path / "big.json"
    os.mkfifo(fifo)                     # reading it would block: it is never opened for the key
    big.write_text(" " * (answers.LARGEST_FILE + 1))
    for path in (fifo, big, tmp_path / "missing.json"):
        assert not answers.cacheable(["summary", "--hf-config", str(path)])
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path / "cache"))
    with pytest.raises(OSError):
        answers.key(["summary", f"--hf-config={fifo}"])


def test_an_answer_is_filed_under_the_file_the_run_read(tmp_path, monkeypatch, capsys):
    """A config edited while the command ran: the answer is filed under the bytes the run read, not the new
    ones (keyed after the run, the 12-layer answer was filed under the 48-layer file and served from then on)."""
    import json
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path / "cache"))
    config = tmp_path / "r.json"
    config.write_text((ROOT / "symbolic_cost" / "models" / "configs" / "gpt2.json").read_text())
    words = ["summary", "--hf-config", str(config), "--set", "b=8", "--json"]
    with answers.recording(words) as keep:
        assert main(words) == 0
        twelve = capsys.readouterr().out
        data = json.loads(config.read_text())
        config.write_text(json.dumps({**data, "n_layer": 48}))       # edited before the answer is filed
        keep(0)
    assert not answers.answer(words)                 # the 48-layer file has no answer yet
    assert main(words) == 0 and capsys.readouterr().out != twelve


@pytest.mark.parametrize("kept", ['{"stdout": 5, "stderr": ""}', '{"stdout": "x\\n", "stderr": null}'])
def test_an_answer_file_of_the_wrong_types_runs_the_full_path_and_is_replaced(kept, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path / "cache"))
    words = LINES[0]
    place = answers.answer_path(words)
    place.parent.mkdir(parents=True, exist_ok=True)
    place.write_text(kept)
    assert not answers.answer(words) and capsys.readouterr() == ("", "")     # printed nothing, raised nothing
    with answers.recording(words) as keep:
        assert main(words) == 0
        keep(0)
    full = capsys.readouterr().out
    assert answers.answer(words) and capsys.readouterr().out == full          # the damaged file replaced
