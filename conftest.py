"""pytest at the repository root: the PyTorch cross-check module is collected only with torch."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("torch") else ["symbolic_cost/validation.py"]
