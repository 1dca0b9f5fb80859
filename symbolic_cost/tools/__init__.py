"""One module per reproduced tool: its conventions preset and quirks, never a copy of a formula.

Importing this package registers the presets (``conventions.get("lbnl-2024")``):
``lbnl-2024`` (seed 003), ``megatron-training-info`` (seed 000), ``deepflow-2019``
(seed 002; its LSTM model is ``tools.lstm``), ``deepspeed-profiler`` (seed 004),
``pycomm-prefill`` (seed 001) and ``pytorch-eager`` (what PyTorch autograd saves).
"""

# the order of registration is the order presets are listed in messages and help
from symbolic_cost.tools import lbnl_2024  # noqa: F401
from symbolic_cost.tools import megatron_info  # noqa: F401
from symbolic_cost.tools import deepflow  # noqa: F401
from symbolic_cost.tools import deepspeed_profiler  # noqa: F401
from symbolic_cost.tools import pycomm  # noqa: F401
from symbolic_cost.tools import pytorch_eager  # noqa: F401
