"""The documentation site (issue 30): ``mkdocs build --strict`` with Material and mkdocstrings
builds every page of ``docs/`` and the API reference from the docstrings without a warning
(a broken link, a page left out of the navigation, an unreadable docstring).  CI installs the
pinned packages (``.ci/run``); without them the test is skipped."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strict(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        pytest.importorskip(module)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                                         "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    api = (tmp_path / "api" / "blocks" / "index.html").read_text()
    assert "symbolic_cost.blocks.attention" in api and '<span class="gp">&gt;&gt;&gt; ' in api   # doctests as code
    assert (tmp_path / "time-model" / "index.html").exists()
