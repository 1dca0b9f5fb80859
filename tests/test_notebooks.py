"""The notebooks of ``docs/notebooks/`` (issue 30): each is committed without outputs and runs
from top to bottom in a fresh kernel without an error (nbclient, pinned in ``.ci/run``; without
it, or without ipykernel, the test is skipped and says so).  Each notebook checks its own
numbers where it states a rule (the MoE all-to-all's ``(ep - 1)/ep``); this test checks that they
run, that they stay without stale outputs, and that a plot is drawn where one is asked for."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks_and_the_docs_link_each():
    assert len(NOTEBOOKS) == 7
    page = (ROOT / "docs" / "notebooks.md").read_text()
    for path in NOTEBOOKS:
        assert f"notebooks/{path.name}" in page, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_is_committed_without_outputs(path):
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install '.[notebooks]')")
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip the outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_runs_without_an_error(path):
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install '.[notebooks]')")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip install '.[notebooks]')")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install '.[notebooks]')")
    notebook = nbformat.read(path, as_version=4)
    environment = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                   "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    previous = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)          # the kernel inherits them: this checkout's package, inline plots
    try:
        nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    if any("plt.show()" in cell.source for cell in notebook.cells):
        assert any("image/png" in o.get("data", {}) for o in outputs), "a plot was asked for and none drawn"
