"""DeepFlow's LSTM performance model (seed 002) as a preset of the conventions; its LSTM
language model is ``tools.lstm``."""

from __future__ import annotations

from symbolic_cost.conventions import Conventions, register

PRESET = Conventions(
    matmul_flops="2mnk", kernel_time="tiled", gemm_output_overhead=True,
    # quirks of perf.py at e6a5da02d1d6, visible in seed 002's numbers
    lstm_grad_accumulate_bytes=False, lstm_softmax_weight_rows="projection",
    lstm_count_disabled_projection=True,
)
"""DeepFlow's LSTM performance model (arXiv 2211.03309) as it printed seed 002:
``perf.py`` of nanocad-lab/DeepFlow at commit e6a5da02d1d6 (2019)."""

register("deepflow-2019", PRESET)
