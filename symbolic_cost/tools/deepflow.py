"""DeepFlow's LSTM performance model (seed 002) as a preset of the conventions; its LSTM
language model is ``tools.lstm``."""

from __future__ import annotations

from symbolic_cost.conventions import PRESETS

PRESET = PRESETS["deepflow-2019"]
"""DeepFlow's LSTM performance model (arXiv 2211.03309) as it printed seed 002:
``perf.py`` of nanocad-lab/DeepFlow at commit e6a5da02d1d6 (2019) (``named_conventions``)."""
