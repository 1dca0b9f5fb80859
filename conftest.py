"""pytest at the repository root: the PyTorch cross-check modules are collected only with torch."""

import importlib.util
import re
from pathlib import Path


def _needs_torch(path: Path) -> bool:
    return re.search(r"(?m)^(import torch|from torch)", path.read_text()) is not None


# without torch, the modules that import it at the top (the PyTorch cross-checks and their helpers) are left out
collect_ignore = [] if importlib.util.find_spec("torch") else [
    str(path.relative_to(Path(__file__).parent)) for path in sorted(Path(__file__).parent.glob("tests/*.py"))
    if _needs_torch(path)]
collect_ignore.append("docs/hooks")    # an MkDocs hook (needs markdown), not library code
collect_ignore.append("tests/framework_inputs")     # published configuration files read as text, never imported
