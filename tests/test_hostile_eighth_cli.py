"""Issue 66, an eighth probe: the training commands of the command line (summary, sweep, search,
plan, crossover, formula, profile) with hostile values of their newer options: MoE (capacity
factor, imbalance, dispatcher, ``ep``/``etp``), precision (FP8 recipes and their 16-bit layers),
the systems and ``--system-file``, pipeline layouts and uneven stages, tensor grids, LoRA,
offload, ``--loss-chunks``, ``--step-time`` and ``--json``.  What was accepted and should not
have been, or refused without naming the option, is tested here, each test saying what happened
before; the expectations follow from the rule (Megatron-Core's, or the option's own), not from the
library's output."""

from fractions import Fraction

import pytest

from symbolic_cost.checks import InputError
from test_refusals import refused

MIXTRAL = "tests/hf_configs/Mixtral-8x7B-v0.1.json"
"""8 experts, top-2: a capacity factor may be at most 8 / 2 = 4."""


def refusal(call, argument: str) -> InputError:
    """``call()`` refused with an ``InputError`` whose ``argument`` and message name ``argument``."""
    with pytest.raises(InputError) as error:
        call()
    assert error.value.argument == argument and argument in str(error.value), (error.value.argument, str(error.value))
    return error.value


# MoE


def test_a_capacity_factor_past_experts_over_top_k_is_refused(capsys):
    """``--capacity-factor 1e30`` on Mixtral (8 experts, top-2) printed activations of 1.15e31 GiB
    and an all-to-all of 3.5e30 GiB: a capacity ``ceil(C t k / E)`` past the ``t`` tokens routed,
    where an expert receives each token at most once (Megatron-Core's ``torch.topk`` of
    ``capacity`` among the ``t`` tokens refuses it).  ``C = E / k = 4`` is the most."""
    from symbolic_cost.blocks.moe import routed_rows
    base = ["summary", "--hf-config", MIXTRAL, "--set", "l=4096", "m1=2", "s1=2", "d=32", "ep=8", "etp=1"]
    refused(capsys, base + ["--capacity-factor", "1e30"], "--capacity-factor", "experts / top_k")
    refused(capsys, base + ["--capacity-factor", "4.01"], "--capacity-factor")
    refusal(lambda: routed_rows(100, 8, 2, capacity_factor=Fraction(9, 2)), "capacity_factor")
    # at the bound every expert holds t rows: E t, each of the t tokens' k copies padded up to it
    assert routed_rows(100, 8, 2, capacity_factor=4) == 8 * 100
