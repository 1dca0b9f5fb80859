"""pytest at the repository root: the PyTorch cross-check module is collected only with torch."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("torch") else ["tests/torch_reference.py"]
collect_ignore.append("docs/hooks")    # an MkDocs hook (needs markdown), not library code
