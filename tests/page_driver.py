"""Driving the page of ``symbolic-cost serve`` in headless Chromium, for the browser tests
(``test_app.py``, ``test_app_questions.py``): the server on a free port, the browser, and waits
for the page to settle.

The browser needs Debian's ``chromium`` and Playwright's Python package (``.ci/run`` installs
both where it can); without either a test is skipped, saying which is missing.  Screenshots go to
the folder ``SYMBOLIC_COST_ARTEFACTS`` names (CI keeps it as an artefact), else to the test's
temporary folder: a test writes nothing into the tree."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from symbolic_cost.cli import main

ROOT = Path(__file__).resolve().parent.parent


def cli(*words):
    """The command line's exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(words))
    return status, out.getvalue(), err.getvalue().strip()


def browser():
    """Chromium's path and Playwright's ``sync_playwright``, or a skip that says which is missing."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it with apt-get where it can): "
                    "the page is not tested in a browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright's Python package is not installed (pip install playwright==1.65.2, as .ci/run does)")
    return chromium, sync_playwright


@contextlib.contextmanager
def served_page(width: int = 1280, height: int = 1100):
    """``(page, url)``: a Chromium page on ``symbolic-cost serve --port 0``, both stopped after."""
    chromium, sync_playwright = browser()
    server = subprocess.Popen([sys.executable, "-m", "symbolic_cost", "serve", "--port", "0"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/", server.stdout.readline()).group(0)
        with sync_playwright() as playwright:
            chrome = playwright.chromium.launch(executable_path=chromium, args=["--no-proxy-server"])
            try:
                page = chrome.new_page(viewport={"width": width, "height": height})
                errors = []
                page.on("pageerror", lambda error: errors.append(str(error)))
                yield page, url
                assert not errors, f"the page's script failed: {errors}"
            finally:
                chrome.close()
    finally:
        server.terminate()
        server.wait(10)


def opened(page, url: str) -> None:
    """Open ``url`` and wait until its first answers are shown."""
    page.goto(url)
    page.wait_for_selector("body[data-ready=yes]", timeout=60_000)
    settle(page)


def settle(page) -> None:
    """Wait until the page has answered its newest state (``data-idle``) with no request under way."""
    page.wait_for_function("document.body.dataset.idle === 'yes' && document.body.dataset.pending === '0'",
                           timeout=120_000)


def searched(page, before: int) -> None:
    """Wait until more than ``before`` searches have been answered."""
    page.wait_for_function(f"Number(document.body.dataset.searches || 0) > {before} && "
                           f"document.body.dataset.pending === '0'", timeout=120_000)


def screenshot(page, tmp_path: Path, name: str) -> None:
    """Save the whole page as ``name``.png in ``SYMBOLIC_COST_ARTEFACTS`` (else ``tmp_path``)."""
    folder = Path(os.environ.get("SYMBOLIC_COST_ARTEFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
