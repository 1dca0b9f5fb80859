"""The documentation site (issue 30): ``mkdocs build --strict`` with Material and mkdocstrings
builds every page of ``docs/`` and the API reference from the docstrings without a warning
(a broken link, a page left out of the navigation, an unreadable docstring).  The notebooks are
run and rendered into it by mkdocs-jupyter, each page with its plots (issue 67), and no page
loads a font, a script or a style sheet from elsewhere: the site reads offline.  CI installs the
pinned packages (``.ci/run``); without them the test is skipped."""

import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BORDER = re.compile(r"={3,} +={3,}")
"""Two runs of equals signs on a line: a reStructuredText table's border, left unrendered."""


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
        assert not BORDER.search(page.read_text()), page.relative_to(tmp_path)    # a table left as run-on text
    # every simple table of the API reference's docstrings is a table of the built pages
    expected = sum(len(_tables(_docstring(module))) for module in _api_modules())
    assert sum((tmp_path / "api" / page.stem / "index.html").read_text().count("<table>")
               for page in (ROOT / "docs" / "api").glob("*.md")) == expected > 10


def _api_modules() -> list[str]:
    return [line[4:].strip() for page in sorted((ROOT / "docs" / "api").glob("*.md"))
            for line in page.read_text().splitlines() if line.startswith("::: ")]


def _docstring(module: str) -> str:
    """The docstrings the API reference shows of ``module``: its own and its public classes' and
    functions' (a class's methods too)."""
    found = importlib.import_module(module)
    objects = [o for n, o in vars(found).items() if not n.startswith("_") and getattr(o, "__module__", None) == module
               and (inspect.isclass(o) or inspect.isfunction(o))]
    methods = [o for c in objects if inspect.isclass(c) for n, o in vars(c).items()
               if not n.startswith("_") and inspect.isfunction(o)]
    return "\n\n".join([found.__doc__ or ""] + [inspect.getdoc(o) or "" for o in objects + methods])


def _tables(text: str) -> list[int]:
    """Lines that open a reStructuredText simple table (a border whose twin follows), by hand."""
    lines = text.splitlines()
    opened, i = [], 0
    while i < len(lines):
        if re.fullmatch(r"\s*=+( +=+)+\s*", lines[i]):
            twins = [j for j in range(i + 1, len(lines)) if lines[j].strip() == lines[i].strip()]
            header = len(twins) > 1 and twins[0] + 1 < len(lines) and lines[twins[0] + 1].strip()
            opened.append(i)
            i = (twins[1] if header else twins[0]) + 1
            continue
        i += 1
    return opened


def test_simple_tables_become_markdown_tables():
    """The hook that renders the docstrings' reStructuredText simple tables (``docs/hooks/rst_tables.py``):
    a table of a header and two rows, the second row's cell continued on a line whose first column
    is blank, and a table of rows only."""
    pytest.importorskip("markdown")
    spec = importlib.util.spec_from_file_location("rst_tables", ROOT / "docs" / "hooks" / "rst_tables.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    text = ["Sizes:", "", "===== =========", "name  meaning", "===== =========", "``b`` batch", "``l`` length,",
            "      in tokens", "===== =========", "", "== ===", "a  one | two", "== ===", "after"]
    assert hook.convert(text) == ["Sizes:", "", "| name | meaning |", "|---|---|", "| ``b`` | batch |",
                                  "| ``l`` | length, in tokens |", "", "", "|  |  |", "|---|---|",
                                  "| a | one \\| two |", "", "after"]
    assert len(_tables("\n".join(text))) == 2
