"""The documentation site (issue 30): ``mkdocs build --strict`` with Material and mkdocstrings
builds every page of ``docs/`` and the API reference from the docstrings without a warning
(a broken link, a page left out of the navigation, an unreadable docstring).  The notebooks are
run and rendered into it by mkdocs-jupyter, each page with its plots (issue 67), and no page
loads a font, a script or a style sheet from elsewhere: the site reads offline.  CI installs the
pinned packages (``.ci/run``); without them the test is skipped."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strict(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python", "mkdocs_jupyter", "nbclient", "ipykernel"):
        pytest.importorskip(module)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                                         "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    api = (tmp_path / "api" / "blocks" / "index.html").read_text()
    assert "symbolic_cost.blocks.attention" in api and '<span class="gp">&gt;&gt;&gt; ' in api   # doctests as code
    assert (tmp_path / "time-model" / "index.html").exists()
    notebooks = sorted(path.stem for path in (ROOT / "docs" / "notebooks").glob("*.ipynb"))
    for name in notebooks:                  # rendered with their outputs: each has a plot
        page = (tmp_path / "notebooks" / name / "index.html").read_text()
        assert re.search(r'<img\b[^>]*src="data:image/png;base64,', page), name
    fetched = re.compile(r'<(?:link|script)\b[^>]*(?:href|src)="(?:https?:)?//[^"]*"|fonts\.(?:googleapis|gstatic)\.com')
    for page in tmp_path.rglob("*.html"):
        assert not fetched.search(page.read_text()), page.relative_to(tmp_path)
