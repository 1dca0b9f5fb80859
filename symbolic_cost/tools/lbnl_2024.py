"""The LBNL transformer-perf-estimates notebook (seed 003) as a preset of the conventions."""

from __future__ import annotations

from symbolic_cost.conventions import PRESETS

PRESET = PRESETS["lbnl-2024"]
"""The LBNL transformer-perf-estimates notebook (arXiv 2410.00273) as printed in
seed 003: commit 0ecb63e of ShashankSubramanian/transformer-perf-estimates
(``named_conventions``)."""
