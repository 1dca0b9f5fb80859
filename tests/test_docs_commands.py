"""Every shell example of ``docs/`` runs as written (issue 67: three failed and fourteen named files
that were not there).  Each ``symbolic-cost`` line of a ``sh`` block runs through ``cli.main`` in a
temporary folder, the repository's ``tests/`` files at their paths, and must exit 0.  Left out:
``serve`` (a server that runs until stopped; ``tests/test_app.py`` starts it), ``--everything``
(a search of millions of layouts; ``benchmarks/bench.py`` times it) and ``--hf-model`` (the hub)."""

import re
import shlex
from pathlib import Path

import pytest

from symbolic_cost.cli import main

ROOT = Path(__file__).resolve().parent.parent
LEFT_OUT = ("symbolic-cost serve", "--everything", "--hf-model")


def _examples() -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        for block in re.findall(r"```(?:sh|bash|shell)\n(.*?)```", path.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #")[0].strip()
                if line.startswith("symbolic-cost") and not any(x in line for x in LEFT_OUT):
                    found.append((path.name, line))
    return found


EXAMPLES = _examples()


def test_the_docs_hold_examples():
    assert len(EXAMPLES) >= 40


@pytest.mark.parametrize("page, line", EXAMPLES, ids=[f"{p}: {l[14:70]}" for p, l in EXAMPLES])
def test_a_shell_example_of_the_docs_runs_as_written(page, line, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYMBOLIC_COST_CACHE", str(tmp_path / "cache"))
    words = [str(ROOT / w) if w.startswith("tests/") else w for w in shlex.split(line)[1:]]
    status = main(words)
    assert status == 0, (page, line, capsys.readouterr().err)


def test_the_home_page_lists_every_framework_reader():
    from symbolic_cost.cli.frameworks import FILES
    home = (ROOT / "docs" / "index.md").read_text()
    assert [flag for flag in FILES.values() if f"`{flag}`" not in home] == []
