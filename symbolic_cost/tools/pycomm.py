"""PyComm's ``prefill.py`` (seed 001: Ulysses attention and a 2-D MLP) as a preset of the conventions."""

from __future__ import annotations

from symbolic_cost.conventions import PRESETS

PRESET = PRESETS["pycomm-prefill"]
"""The script counts a product of ``(m, k) x (k, n)`` as ``2mnk`` FLOPs, summed over GPUs."""
