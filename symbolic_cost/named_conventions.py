"""The named presets of the conventions, as data: each reproduced tool's counting (``tools``) or a
runtime's (PyTorch eager), written as the fields it changes from ``conventions.DEFAULT`` with
the source it was read from.  ``conventions.PRESETS`` builds them; the order here is the order
messages and ``--help`` list them.
"""

PRESETS = {
    "lbnl-2024": dict(
        source="The LBNL transformer-perf-estimates notebook (arXiv 2410.00273) as printed in seed 003: "
               "commit 0ecb63e of ShashankSubramanian/transformer-perf-estimates",
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
    ),
    "megatron-training-info": dict(
        source="Megatron-LM's tools/get_training_info (seed 000): Megatron's bytes per parameter, its quirk "
               "of a QKV bias of e elements, and volumes as whole tensors",
        mixed_precision="megatron", qkv_bias_elements="e", collective_volume="tensor",
    ),
    "deepflow-2019": dict(
        source="DeepFlow's LSTM performance model (arXiv 2211.03309) as it printed seed 002: perf.py of "
               "nanocad-lab/DeepFlow at commit e6a5da02d1d6 (2019)",
        matmul_flops="2mnk", kernel_time="tiled", gemm_output_overhead=True,
        # quirks of perf.py at e6a5da02d1d6, visible in seed 002's numbers
        lstm_grad_accumulate_bytes=False, lstm_softmax_weight_rows="projection",
        lstm_count_disabled_projection=True,
    ),
    "deepspeed-profiler": dict(
        source="DeepSpeed's flops profiler (seed 004): a multiply-add is one MAC, reported as 2 FLOPs",
        matmul_flops="2mnk",
    ),
    "pycomm-prefill": dict(
        source="PyComm's prefill.py (seed 001): a product of (m, k) x (k, n) is 2mnk FLOPs, summed over GPUs",
        matmul_flops="2mnk",
    ),
    "pytorch-eager": dict(
        source="What PyTorch eager autograd keeps for Hugging Face models (tools.pytorch_eager)",
        mlp_activation_dropout=False,   # GPT-2, BERT, Llama: fc2 reads the activation directly
        causal_flops="full",            # eager attention multiplies every query by every key
        window_count="dense",           # and a sliding window masks a full l x l score matrix
        layer_norm_keeps_stats=True,    # native_layer_norm saves mean and rstd
        gated_activation="eager",       # silu(G) * U: silu keeps G, the product act(G) and U
        gradient_lifetime="step",       # zero_grad(set_to_none=True): gradients made in backward
        loss_backward="eager",          # log_softmax + nll_loss, the logits held by the model's output
        optimizer_step="single-tensor",  # AdamW(foreach=False), the CPU default (models.peak)
    ),
}
"""``{name: {"source": where it was read, field: value, ...}}``."""
