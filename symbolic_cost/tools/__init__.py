"""One module per reproduced tool: its quirks and what it prints, never a copy of a formula.

Each tool's conventions preset is data (``symbolic_cost.named_conventions``), available as
``conventions.get(name)`` without importing this package: ``lbnl-2024`` (seed 003),
``megatron-training-info`` (seed 000), ``deepflow-2019`` (seed 002; its LSTM model is
``tools.lstm``), ``deepspeed-profiler`` (seed 004), ``pycomm-prefill`` (seed 001) and
``pytorch-eager`` (what PyTorch autograd saves).
"""
