"""Replicas of an attention-data-parallel deployment stepping in lockstep (inference.batching,
issue 63): a schedule worked by hand against the same replicas at their own pace, and which
deployments step together."""

import json
import math
from pathlib import Path

import pytest

from serving_steps import NO_OVERHEAD
from symbolic_cost.cli import main
from symbolic_cost.inference.batching import ChunkedPrompts, WholePrompts, alone, lockstep
from symbolic_cost.inference.estimated import Estimated
from symbolic_cost.inference.paged import OnDemand
from symbolic_cost.inference.load import Runtime, StepModel, in_lockstep
from symbolic_cost.inference.serving import Serving
from symbolic_cost.models.config import from_config, preset

HF_CONFIGS = Path(__file__).parent / "hf_configs"


class Priced:
    """A step of one second when it prefills anything, a tenth of a second when it only decodes."""

    prompt = 10

    def __call__(self, prompts, decoding, context):
        return 1.0 if prompts else 0.1


ENGINES = {"reserved": lambda outputs, times: WholePrompts(Priced(), outputs, times, NO_OVERHEAD, math.inf, [0], [10]),
           "chunked": lambda outputs, times: ChunkedPrompts(Priced(), outputs, times, Runtime(0, 0, chunked=True),
                                                            math.inf, [0], [10]),
           "on demand": lambda outputs, times: OnDemand(Priced(), outputs, times,
                                                        Runtime(0, 0, allocation="on-demand"), 10**6, [0], [10]),
           "estimate": lambda outputs, times: Estimated(Priced(), outputs, times,
                                                        Runtime(0, 0, allocation="estimate"), 10**6, [0], [10])}
"""The engines that step in lockstep, each with room for everything (blocks, tokens a step)."""


def _replicas(kind="reserved"):
    # replica A: a request at t = 0 of 4 tokens; replica B: a request at t = 0.25 of 1 token
    return [ENGINES[kind]([4], [0.0]), ENGINES[kind]([1], [0.25])]


@pytest.mark.parametrize("kind", ENGINES)
def test_a_prompt_on_one_replica_holds_up_the_decodes_of_the_other(kind):
    """At its own pace, A prefills at [0, 1] and decodes its other three tokens by 1.3 s; B prefills
    at [0.25, 1.25].  In lockstep, B's prefill runs in the second step, beside A's first decode:
    that step lasts B's second, so A's second token comes at 2.0 s (a gap of a second) and its
    last at 2.2 s; B's first token at 2.0 s."""
    a, b = _replicas(kind)
    assert alone(a, 0.0)[:2] == ([1.0], [pytest.approx(1.3)]) and alone(b, 0.0)[:2] == ([1.25], [1.25])
    (first_a, last_a, gaps_a, _), (first_b, last_b, _, _) = lockstep(_replicas(kind), 0.0)
    assert (first_a, last_a, first_b, last_b) == ([1.0], [pytest.approx(2.2)], [2.0], [2.0])
    assert [gap for gap, decoding in gaps_a if decoding] == [1.0, 0.1, 0.1]


def test_one_replica_in_lockstep_is_the_replica_alone():
    alone_run, = [alone(engine, 0.002) for engine in _replicas()[:1]]
    assert lockstep(_replicas()[:1], 0.002) == [alone_run]


def test_replicas_that_share_their_experts_step_together():
    olmoe = from_config(json.loads((HF_CONFIGS / "OLMoE-1B-7B-0924.json").read_text()))
    shared = StepModel(olmoe, Serving(l_in=128, l_out=8, flash=True, d=4, ep=4, etp=1), "h100")
    own = StepModel(olmoe, Serving(l_in=128, l_out=8, flash=True, d=4), "h100")       # every replica every expert
    dense = StepModel(preset("llama-2-7b"), Serving(l_in=128, l_out=8, d=4), "h100")
    assert (shared.lockstep, own.lockstep, dense.lockstep) == (True, False, False)
    assert in_lockstep(shared, 4) and not in_lockstep(shared, 1) and not in_lockstep(own, 4)


def test_the_command_line_says_when_replicas_step_together(capsys):
    words = ["inference", "--hf-config", str(HF_CONFIGS / "OLMoE-1B-7B-0924.json"), "--system", "h100", "--set",
             "l_in=128", "l_out=8", "d=4", "ep=4", "etp=1", "--rate", "20", "--requests", "40", "--json"]
    assert main(words) == 0
    assert json.loads(capsys.readouterr().out)["load"]["lockstep"] is True
    assert main(words[:6] + ["l_in=128", "l_out=8", "d=4", "--rate", "20", "--requests", "40", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["load"]["lockstep"] is False
