"""Every data file the package reads ships in its wheel.

An editable install reads files from the clone, so a data file missing from ``package-data`` passes every
test here and fails only where the package is installed as a wheel (CI's ``pip install .``): the rule is
checked on the tree itself, read as setuptools reads the globs: relative to the
package's folder, where ``*`` does not cross a ``/``.
"""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "symbolic_cost"
CODE = {".py", ".pyc"}


def _patterns():
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    return {name.replace(".", "/"): globs for name, globs in table.items()}


def _shipped(path, patterns):
    for folder, globs in patterns.items():
        base = ROOT / folder
        if any(path in base.glob(g) for g in globs):
            return True
    return False


def test_every_data_file_of_the_package_is_in_package_data():
    patterns = _patterns()
    data = [p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in CODE and "__pycache__" not in p.parts]
    assert data, "the package has data files (configs, calibration, the page)"
    missing = [str(p.relative_to(ROOT)) for p in data if not _shipped(p, patterns)]
    assert not missing, f"not in pyproject's [tool.setuptools.package-data]: {missing}"
