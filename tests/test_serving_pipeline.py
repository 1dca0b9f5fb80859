"""Serving over pipeline stages (``inference.load.serve`` with ``StepModel.in_flight`` = p,
``inference.batching.pipelined``): one batch in each stage at a time, as vLLM's virtual engines
and TensorRT-LLM's micro-batches run them.  Every expected value is worked by hand from that
schedule (a stage holds one batch at a time; a batch holds each of the p even stages 1/p of its
step), never read from the simulator."""

from fractions import Fraction
from pathlib import Path

import pytest

from serving_steps import NO_OVERHEAD, Constant
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.inference.batching import pipelined
from symbolic_cost.inference.load import Runtime, serve


class Staged(Constant):
    """A constant step over ``stages`` pipeline stages, its engine paging ``blocks`` KV blocks."""

    def __init__(self, seconds, stages, blocks=10**9, prompt=100):
        super().__init__(seconds, prompt)
        self.in_flight, self.blocks = stages, blocks

    def cache_blocks(self, block_tokens, memory_fraction, memory_of="free"):
        return self.blocks


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_full_batches_enter_a_stage_apart_and_step_at_the_pipeline_s_pace(stages):
    """p B requests at once, B to a batch, O tokens each, a step of T seconds: batch k enters the
    first stage at k T / p, yields token j (j = 1 .. O) at j T + k T / p, and re-enters as it leaves
    (the first stage is free by then), so every gap is T and the last token comes at
    O T + (p - 1) T / p."""
    T, B, O = Fraction(1, 10), 3, 5
    load = serve(Staged(float(T), stages), O, None, requests=stages * B,
                 runtime=Runtime(step_overhead=0, request_overhead=0, max_batch=B))
    ttft = [T + k * T / stages for k in range(stages)]
    assert load.mean_ttft == pytest.approx(float(sum(ttft) / stages))
    assert load.mean_itl == pytest.approx(float(T))
    span = O * T + (stages - 1) * T / stages
    assert load.request_throughput == pytest.approx(stages * B / float(span))
    # one batch at a time would take p O T for the same requests
    alone = serve(Staged(float(T), 1), O, None, requests=stages * B,
                  runtime=Runtime(step_overhead=0, request_overhead=0, max_batch=B))
    assert alone.request_throughput == pytest.approx(stages * B / float(stages * O * T))


class Batch:
    """An engine of ``seconds`` steps, ``steps`` of them, recording when each ended and its gap."""

    def __init__(self, *seconds):
        self.seconds, self.ends = list(seconds), []

    def done(self):
        return len(self.ends) == len(self.seconds)

    def idle(self, now):
        return False

    def plan(self, now):
        return self.seconds[len(self.ends)]

    def apply(self, now, duration):
        self.ends.append((now, duration))

    def result(self):
        return self.ends


def test_a_short_batch_behind_a_long_one_waits_at_each_stage():
    """Two stages; A steps 4 s then 4 s, B 2 s then 2 s.  A: stage 1 [0, 2], stage 2 [2, 4].
    B enters at 2, stage 1 [2, 3], then waits for A to leave stage 2: [4, 5], a gap of 3.
    A is ready at 4 and the first stage free since 3: [4, 6], [6, 8].  B, ready at 5, waits for
    the first stage until 6: [6, 7], then [8, 9] behind A: ends at 9, a gap of 3."""
    a, b = Batch(4.0, 4.0), Batch(2.0, 2.0)
    assert pipelined([a, b], 0.0) == [[(4.0, 4.0), (8.0, 4.0)], [(5.0, 3.0), (9.0, 3.0)]]


def test_overhead_is_part_of_what_each_stage_holds():
    # 3 s of plan and 1 s of overhead over 2 stages: 2 s a stage; the second batch leaves at 6
    assert pipelined([Batch(3.0), Batch(3.0)], 1.0) == [[(4.0, 4.0)], [(6.0, 4.0)]]


def test_each_batch_in_flight_holds_its_share_of_the_kv_blocks():
    # 100 + 28 tokens: 4 blocks of 32 a request; 10 blocks over 2 batches in flight leave 5 each
    serve(Staged(0.01, 2, blocks=10), 28, None, requests=4, runtime=NO_OVERHEAD)
    with pytest.raises(InputError, match="needs 6 KV-cache blocks of 32 tokens, and the memory left by the weights "
                                         "holds 5 \\(its share of a pool split among 2 batches in flight\\)"):
        serve(Staged(0.01, 2, blocks=10), 92, None, requests=2, runtime=NO_OVERHEAD)


def test_replicas_keep_their_requests_and_each_runs_its_own_pipeline():
    """Two replicas of two stages, 4 requests at once, one token each: requests 0 and 2 go to
    replica 0 (its two batches in flight, entering at 0 and T/2), 1 and 3 to replica 1 (the same):
    first tokens at T, T, 3T/2, 3T/2."""
    T = 0.2
    load = serve(Staged(T, 2), 1, None, requests=4, runtime=NO_OVERHEAD, replicas=2)
    assert load.mean_ttft == pytest.approx((T + T + 1.5 * T + 1.5 * T) / 4)


def test_the_command_line_refuses_stages_it_does_not_model(capsys):
    base = ["inference", "--preset", "llama-2-7b", "--set", "l_in=256", "l_out=16", "p=2", "--rate", "4",
            "--requests", "20"]
    assert main([*base, "--disaggregate", "1:1"]) == 2
    assert "pipeline stages in disaggregated pools are not modelled" in capsys.readouterr().err
    olmoe = str(Path(__file__).parent / "hf_configs" / "OLMoE-1B-7B-0924.json")
    assert main(["inference", "--hf-config", olmoe, "--set", "l_in=128", "l_out=8", "d=4", "ep=4", "etp=1", "p=2",
                 "--flash", "--rate", "20", "--requests", "20"]) == 2
    assert "pipeline stages beside attention data parallelism are not modelled" in capsys.readouterr().err


@pytest.mark.parametrize("flight", [0, -2, 1.5, "2", True, 10**9])
def test_a_step_s_batches_in_flight_are_checked(flight):
    with pytest.raises(InputError, match="step.in_flight .* must be an integer from 1 to 1,024"):
        serve(Staged(0.01, flight), 2, None, requests=2, runtime=NO_OVERHEAD)


@pytest.mark.parametrize("words, said", [((), "positive integer degrees"), ((0, 2), "positive integer degrees"),
                                         ("24", "a tuple of degrees")])
def test_the_search_s_pipeline_degrees_are_checked(words, said):
    from symbolic_cost.inference.serving_search import layouts
    with pytest.raises(InputError, match=said):
        layouts(8, pipeline=words)


def test_batches_in_flight_past_the_requests_get_none():
    # a billion replicas of 4 stages for 3 requests: three engines, each its own request, one a replica
    T = 0.1
    load = serve(Staged(T, 4), 1, None, requests=3, runtime=NO_OVERHEAD, replicas=10**9)
    assert load.mean_ttft == pytest.approx(T)
    two = serve(Staged(T, 4), 1, None, requests=2, runtime=NO_OVERHEAD)       # one replica: entering T/4 apart
    assert two.mean_ttft == pytest.approx((T + 1.25 * T) / 2)


# --- stages of unequal layers, as vLLM splits them (vllm/distributed/utils.py, get_pp_indices) ---

@pytest.mark.parametrize("depth, p, sizes", [
    (61, 4, [15, 15, 16, 15]),      # DeepSeek-V3: the one left over to the last but one stage
    (27, 2, [14, 13]),              # DeepSeek-V2-Lite: to the first (the last but one of two)
    (26, 4, [6, 7, 7, 6]),          # Gemma 2 2B: two left over, the middle stages
    (126, 4, [31, 32, 32, 31]),     # Llama 3.1 405B
    (94, 8, [11, 12, 12, 12, 12, 12, 12, 11]),
    (80, 4, [20, 20, 20, 20]),
])
def test_an_engine_s_stages_by_vllm_s_rule(depth, p, sizes):
    """depth // p layers a stage, and the depth % p left over one a stage from the last but one
    backwards (range(2, remainder + 2) of partitions[-i] in vLLM's get_pp_indices)."""
    from symbolic_cost.parallel.splits import engine_stages
    assert engine_stages(depth, p) == sizes and sum(sizes) == depth


def test_the_busiest_uneven_stage_s_weights_are_transformers_own():
    """DeepSeek-V2-Lite's 27 layers over 2 and 4 stages: the bytes of the busiest stage are those of
    the transformers model's parameters on it (built on the meta device), its layers of vLLM's split,
    the word table on the first stage, the final norm and the head on the last."""
    import json
    import torch
    import transformers
    from symbolic_cost.inference.throughput import inference_cost
    from symbolic_cost.models.config import from_config
    from symbolic_cost.parallel.splits import engine_stages
    from symbolic_cost.inference.serving import Serving
    config = json.loads((Path(__file__).parent / "hf_configs" / "DeepSeek-V2-Lite.json").read_text())
    values = {k: v for k, v in config.items() if k not in ("architectures", "auto_map", "transformers_version")}
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**values))
    count = lambda module: sum(x.numel() for x in module.parameters())  # noqa: E731
    layers = [count(layer) for layer in model.model.layers]
    arch = from_config(config, "DeepSeek-V2-Lite")
    for p in (2, 4):
        sizes = engine_stages(len(layers), p)
        starts = [sum(sizes[:i]) for i in range(p)]
        stages = [sum(layers[a:a + n]) for a, n in zip(starts, sizes)]
        stages[0] += count(model.model.embed_tokens)
        stages[-1] += count(model.model.norm) + count(model.lm_head)
        served = inference_cost(arch, Serving(b=1, l_in=64, l_out=2, p=p), "h100")
        assert served.weight_bytes == 2 * max(stages)


def test_the_busiest_uneven_stage_s_cache():
    """DeepSeek-V2-Lite caches 512 + 64 latent elements a layer a token: over 2 stages the first holds
    14 of its 27 layers.  Gemma 2 2B's 26 layers alternate a 4,096-token window (even layers) and the
    whole context, 2 x 4 x 256 elements a layer a token: over 4 stages (6, 7, 7, 6 layers) the
    third (layers 13 to 19) holds 4 whole-context layers and 3 windowed, the most."""
    import json
    from symbolic_cost.inference.kv_cache import kv_cache_bytes
    from symbolic_cost.models.config import from_config
    hf = Path(__file__).parent / "hf_configs"
    lite = from_config(json.loads((hf / "DeepSeek-V2-Lite.json").read_text()), "lite")
    assert kv_cache_bytes(lite, 2, 1000, p=2) == 14 * (512 + 64) * 2 * 2 * 1000
    gemma = from_config(json.loads((hf / "gemma-2-2b.json").read_text()), "gemma")
    per_token = 2 * 4 * 256 * 2
    window = 4095            # transformers' sliding cache: the window less the token it adds
    assert kv_cache_bytes(gemma, 1, 10000, p=4) == per_token * (4 * 10000 + 3 * window)


def test_unequal_stages_hold_a_batch_for_their_share():
    """Two stages holding 3/4 and 1/4 of a step of 4 s: A holds them [0, 3] and [3, 4]; B enters at 3,
    when the first stage frees, and leaves at 7 (a gap of 4)."""
    assert pipelined([Batch(4.0), Batch(4.0)], 0.0, 2, (Fraction(3, 4), Fraction(1, 4))) == \
        [[(4.0, 4.0)], [(7.0, 4.0)]]
