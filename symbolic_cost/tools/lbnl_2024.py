"""The LBNL transformer-perf-estimates notebook (seed 003) as a preset of the conventions."""

from __future__ import annotations

from symbolic_cost.conventions import Conventions, register

PRESET = Conventions(
    sequence_shard="m1",          # the printed tables come from code with l // m1
    collective_volume="tensor",   # volumes are the full b*l*e tensor, no (n-1)/n
    reduction_flops=False,        # added only in a later commit than the printout
    norm_placement="attention",   # SA holds layer_norm_1 and layer_norm_2; MLP none
    comm_time="bandwidth",        # time = volume / link bandwidth, kind ignored
    mlp_activation_dropout=True,  # its MLP has a dropout after the GELU (dpr1)
    sequence_parallel_inputs="gathered",   # fc1 and the QKV projection keep their gathered input
    # quirks of the primitives at 0ecb63e; upstream fixed them in 5a89ee8 (2024-02-02)
    pointwise_grad_both=False,
    attend_grad_both_operands=False,
    layer_norm_keeps_stats=False,
    layer_norm_bwd_reads_weights=False,
)
"""The LBNL transformer-perf-estimates notebook (arXiv 2410.00273) as printed in
seed 003: commit 0ecb63e of ShashankSubramanian/transformer-perf-estimates."""

register("lbnl-2024", PRESET)
