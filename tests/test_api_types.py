"""The Python API refuses an argument of the wrong kind by name, as the command line does.

A preset's name, a dict or ``None`` passed where a model, a training, a model's totals, a serving
or a file's text belongs used to end in an ``AttributeError`` or ``TypeError`` from deep inside
(``'str' object has no attribute 'encoder_decoder'``).  Each entry point below now raises
``InputTypeError`` (an ``InputError`` and a ``TypeError``) whose ``argument`` is the parameter's
name, before it builds anything.
"""

from __future__ import annotations

import re

import pytest
from sympy import Rational

from symbolic_cost.checks import InputError, InputTypeError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset

WRONG = [None, "gpt2", {}, 3, [1]]


@pytest.fixture(scope="module")
def gpt2():
    return preset("gpt2")


@pytest.fixture(scope="module")
def cost(gpt2):
    return model_cost(gpt2, Training(b=2, l=128))


def refused(call, argument):
    with pytest.raises(InputTypeError) as raised:
        call()
    assert raised.value.argument == argument, str(raised.value)
    return str(raised.value)


@pytest.mark.parametrize("wrong", WRONG)
def test_training_entry_points(wrong, gpt2, cost):
    from symbolic_cost.numeric.exact import model_function
    from symbolic_cost.numeric.search import search
    from symbolic_cost.models.peak import peak_bytes
    from symbolic_cost.timing.step import layer_time, step_time_breakdown
    assert "preset('gpt2')" in refused(lambda: model_cost(wrong, Training()), "arch")
    refused(lambda: model_cost(gpt2, wrong), "training")
    refused(lambda: model_function(wrong), "arch")
    refused(lambda: search(wrong, 8), "arch")
    assert "model_cost(arch, training)" in refused(lambda: step_time_breakdown(wrong, "h100"), "cost")
    refused(lambda: layer_time(wrong, "h100"), "cost")
    refused(lambda: peak_bytes(wrong), "cost")


@pytest.mark.parametrize("wrong", [None, {}, 3, [1]])
def test_systems(wrong, cost):
    from symbolic_cost.timing.step import step_time_breakdown
    refused(lambda: step_time_breakdown(cost, wrong), "system")


@pytest.mark.parametrize("wrong", [None, 3, "b", [1]])
def test_sweeps_and_rows(wrong):
    from symbolic_cost.numeric.sweep import sweep
    from symbolic_cost.timing.hardware import step_time
    refused(lambda: sweep(wrong, {"b": [1, 2]}), "exprs")
    if not isinstance(wrong, list):
        refused(lambda: step_time(wrong, "h100"), "costs")


def test_step_time_rows_are_costs():
    from symbolic_cost.timing.hardware import step_time
    refused(lambda: step_time(["mlp"], "h100"), "costs' rows")


@pytest.mark.parametrize("wrong", WRONG)
def test_serving_entry_points(wrong):
    from symbolic_cost.inference import Serving, kv_bytes_per_token, kv_cache_bytes
    from symbolic_cost.inference.load import StepModel
    from symbolic_cost.inference.throughput import inference_cost, max_batch
    llama = preset("llama-2-7b")
    serving = Serving(b=1, l_in=128, l_out=16)
    refused(lambda: kv_bytes_per_token(wrong), "arch")
    refused(lambda: kv_cache_bytes(wrong, 1, 128), "arch")
    refused(lambda: inference_cost(wrong, serving, "h100"), "arch")
    refused(lambda: inference_cost(llama, wrong, "h100"), "serving")
    refused(lambda: max_batch(wrong, serving, "h100"), "arch")
    refused(lambda: StepModel(llama, wrong, "h100"), "serving")
    from symbolic_cost.inference.peak import serving_peak
    refused(lambda: serving_peak(llama, wrong), "s")


def test_a_prompt_past_the_context_is_refused_whatever_the_output():
    """A fuzz of the Python API: ``Serving(l_in=10**9)`` with its symbolic ``l_out`` passed, since
    ``l_in + l_out - 1`` is no number; the prompt alone is past Llama 2's 4,096 tokens."""
    from symbolic_cost.inference import Serving
    from symbolic_cost.inference.throughput import inference_cost
    with pytest.raises(InputError, match="l_in = 1000000000 tokens exceed the context of llama-2-7b"):
        inference_cost(preset("llama-2-7b"), Serving(l_in=10**9))
    assert inference_cost(preset("llama-2-7b"), Serving(l_in=10**9, allow_long=True)).serving.l_in == 10**9


class TenMs:
    """A step of 10 ms whatever it runs: the load simulator needs nothing more."""
    prompt = 100

    def __call__(self, prompts, decoding, context):
        return 0.010


@pytest.mark.parametrize("slo, kind", [(None, InputTypeError), (0.5, InputTypeError), ((1, 2, 3), InputTypeError),
                                       (("1", 0.1), InputTypeError), ((True, 0.1), InputTypeError),
                                       ((0, 0.1), InputError), ((1, float("nan")), InputError),
                                       ((-1, 0.1), InputError)])
def test_slo_is_two_positive_seconds(slo, kind):
    from symbolic_cost.inference.load import serve, sustained_rate
    with pytest.raises(kind) as raised:
        sustained_rate(TenMs(), 10, slo, 90)
    assert raised.value.argument == "slo"
    if slo is not None:
        with pytest.raises(kind):
            serve(TenMs(), 10, 1.0, requests=2, slo=slo)


def test_slo_as_given():
    from symbolic_cost.inference.load import serve
    load = serve(TenMs(), 5, None, requests=1, slo=(0.02, 0.02))
    assert load.slo_attained == 1          # 10 ms to the first token and between tokens: within 20 ms


def test_the_simulator_and_its_helpers_refuse_by_name():
    """A fuzz of the Python API: a symbolic prompt ended in ``TypeError`` (int of a symbol), a
    symbolic degree was accepted and failed at the first step, a seed of text was hashed into the
    arrivals, ``percentile`` of nothing raised ``IndexError``, and ``Speculation(draft=None)``
    failed only when priced."""
    from symbolic_cost import symbols as S
    from symbolic_cost.inference import Serving
    from symbolic_cost.inference.load import StepModel, percentile, serve
    from symbolic_cost.inference.speculative import Speculation
    llama = preset("llama-2-7b")
    for serving, name in ((Serving(b=1, l_in=S.l_in, l_out=10), "l_in"), (Serving(b=1, l_in=100, l_out=10, m1=S.m1),
                                                                          "m1")):
        with pytest.raises(InputError, match=f"needs a number for {name}") as raised:
            StepModel(llama, serving, "h100")
        assert raised.value.argument == name
    for seed in ("x", 1.5, True):
        with pytest.raises(InputTypeError, match="seed must be an integer"):
            serve(TenMs(), 5, 1.0, requests=2, seed=seed)
    with pytest.raises(InputError, match="at least one value"):
        percentile([(2.0, 0)], 50)
    with pytest.raises(InputError, match="from 0 to 100"):
        percentile([(2.0, 1)], 101)
    with pytest.raises(InputTypeError, match="draft must be an Architecture"):
        Speculation(None, 2, 0)


@pytest.mark.parametrize("text", [None, b"{}", {}, 3])
def test_framework_readers_take_text(text, gpt2):
    from symbolic_cost.models.accelerate import accelerate_setup
    from symbolic_cost.models.deepspeed import deepspeed_setup
    from symbolic_cost.models.hf_trainer import trainer_setup
    from symbolic_cost.models.launch_script import read_launch
    from symbolic_cost.models.megatron_bridge import megatron_bridge_setup
    from symbolic_cost.models.torchtitan import torchtitan_setup
    assert "read_text()" in refused(lambda: accelerate_setup(text, "a.yaml", gpt2, 8), "--accelerate a.yaml's text")
    refused(lambda: deepspeed_setup(text, "ds.json", gpt2, 8, {}, {}), "--deepspeed ds.json's text")
    refused(lambda: trainer_setup(text, "t.json", gpt2, 8), "--hf-training-args t.json's text")
    refused(lambda: megatron_bridge_setup(text, "b.yaml", 8), "--nemo-recipe b.yaml's text")
    refused(lambda: torchtitan_setup(text, "t.toml", 8), "--torchtitan t.toml's text")
    refused(lambda: read_launch(text, "x.sh"), "--megatron-args x.sh's text")


@pytest.mark.parametrize("wrong", WRONG[1:])     # None: the layout alone (docs/frameworks.md)
def test_framework_readers_take_a_model(wrong):
    from symbolic_cost.models.accelerate import accelerate_setup
    from symbolic_cost.models.bridge_recipes import recipe_setup
    from symbolic_cost.models.deepspeed import deepspeed_setup
    from symbolic_cost.models.megatron_args import megatron_setup
    ds = '{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1}'
    refused(lambda: accelerate_setup("distributed_type: FSDP\n", "a.yaml", wrong, 8), "arch")
    refused(lambda: deepspeed_setup(ds, "ds.json", wrong, 8, {}, {}), "arch")
    refused(lambda: recipe_setup("llama3_8b_pretrain_config", wrong, 8), "arch")
    refused(lambda: megatron_setup(wrong, "x.sh", 8), "launch")


@pytest.mark.parametrize("wrong", [None, {}, [1], True])
def test_planner(wrong):
    from symbolic_cost.analysis.planning import plan
    from symbolic_cost.analysis.scaling_laws import get_law
    refused(lambda: plan(wrong), "budget")
    with pytest.raises(InputError):
        get_law(wrong)
    with pytest.raises(InputError):
        plan(1e21, shape=wrong)


@pytest.mark.parametrize("depths", [[], [0], [12, -1], -1, "x", 1.5, range(0)])
def test_planner_depths(depths):
    from symbolic_cost.analysis.planning import plan
    with pytest.raises(InputError) as raised:
        plan(1e21, depths=depths)
    assert "depths" in str(raised.value)


@pytest.mark.parametrize("field, wrong", [("flash", "x"), ("flash", 1), ("allow_long", None), ("kv_dtype", ["fp8"]),
                                          ("weights", {}), ("kv_dtype", 8)])
def test_serving_values(field, wrong):
    from symbolic_cost.inference import Serving
    with pytest.raises(InputError):
        Serving(**{field: wrong})


@pytest.mark.parametrize("wrong", ["x", [1], -1, 0, float("nan"), 1.5])
def test_sharding_group(wrong):
    from symbolic_cost.models.training_values import Sharding
    with pytest.raises(InputError) as raised:
        Sharding(zero=3, shard=wrong)
    assert raised.value.argument == "shard"


@pytest.mark.parametrize("field", ["step_overhead", "request_overhead", "kernel_overhead"])
@pytest.mark.parametrize("wrong", ["x", [1], -1, float("nan"), float("inf"), True])
def test_runtime_overheads(field, wrong):
    from symbolic_cost.inference.load import Runtime
    with pytest.raises(InputError) as raised:
        Runtime(**{field: wrong})
    assert raised.value.argument == field
    assert Runtime(**{field: 0.001}) == Runtime(**{field: 0.001})       # seconds as a float are taken


@pytest.mark.parametrize("wrong", WRONG)
def test_more_entry_points(wrong, gpt2, cost):
    from symbolic_cost.conventions import DEFAULT
    from symbolic_cost.cost import collective
    from symbolic_cost.models.peak import largest_micro_batch, loss_transient
    from symbolic_cost.models.ranks import rank_activation_bytes, rank_parameters
    from symbolic_cost.numeric.compile import compile_exprs
    from symbolic_cost.parallel.grid_blocks import grid_attention, grid_mlp
    from symbolic_cost.symbols import b, e, f, l
    from symbolic_cost.timing.hardware import calibrated
    from symbolic_cost.timing.nccl import collective_time
    from symbolic_cost.timing.power import system_from_power
    refused(lambda: largest_micro_batch(wrong, Training(), 80 * 2**30), "arch")
    refused(lambda: largest_micro_batch(gpt2, wrong, 80 * 2**30), "training")
    refused(lambda: loss_transient(wrong), "cost")
    refused(lambda: rank_parameters(wrong, 0), "cost")
    refused(lambda: rank_activation_bytes(wrong, 0), "cost")
    if wrong != {}:                 # an empty mapping compiles to nothing
        refused(lambda: compile_exprs(wrong), "exprs")
    refused(lambda: grid_mlp(b, l, e, f, wrong), "grid")
    refused(lambda: grid_attention(b, l, e, 12, wrong), "grid")
    refused(lambda: system_from_power("chip", wrong, None), "budget")
    ring = collective("allreduce", 2**20, 2, 8, "bwd", DEFAULT)[0]
    refused(lambda: collective_time(wrong, calibrated("h100"), "nvlink"), "c")
    refused(lambda: collective_time(ring, wrong, "nvlink"), "system")
    with pytest.raises(InputError):
        collective_time(ring, calibrated("h100"), wrong)


@pytest.mark.parametrize("depth, p, v", [(None, 2, 1), ("24", 2, 1), (24, 0, 1), (24, 2, 1.5), (24, [2], 1)])
def test_chunk_layers_counts(depth, p, v):
    from symbolic_cost.parallel.splits import chunk_layers
    with pytest.raises(InputError):
        chunk_layers(depth, p, v)


@pytest.mark.parametrize("table", ["no-such-table.csv", 3, [1, 2], {"b": [1]}])
def test_sweep_tables_by_kind(table):
    from symbolic_cost.numeric.sweep import sweep
    from symbolic_cost.symbols import b, l
    with pytest.raises(InputError) as raised:
        sweep({"t": b * l}, table=table)
    assert raised.value.argument == "table"


@pytest.mark.parametrize("column, rule", [(["x"], "numbers"), ([-1], "positive integers"), ([1.5], "positive integers"),
                                          ([float("nan")], "positive integers")])
def test_sweep_table_columns_as_grid_axes(column, rule):
    """A table's column named after a symbol holds what the symbol admits, as a grid's axis must."""
    import pandas as pd
    from symbolic_cost.numeric.sweep import sweep
    from symbolic_cost.symbols import b, l
    with pytest.raises(InputError) as raised:
        sweep({"t": b * l}, table=pd.DataFrame({"b": column, "l": [2]}))
    assert raised.value.argument == "b" and rule in str(raised.value)


@pytest.mark.parametrize("constraints", [None, 3, "b <= 2", [None], [1.5], [True]])
def test_sweep_constraints_by_kind(constraints):
    from symbolic_cost.numeric.sweep import sweep
    from symbolic_cost.symbols import b, l
    with pytest.raises(InputTypeError) as raised:
        sweep({"t": b * l}, {"b": [1, 2], "l": [2]}, constraints=constraints)
    assert raised.value.argument == "constraints"


@pytest.mark.parametrize("field, wrong", [("micro_batch_sizes", None), ("micro_batch_sizes", 3), ("zero", None),
                                          ("offload", "none"), ("schedules", 3), ("recompute", 3), ("tensor", None),
                                          ("cp", None), ("cp", ()), ("policy", "x"), ("policy", [1])])
def test_search_space_by_kind(field, wrong):
    from symbolic_cost.numeric.search import Space
    with pytest.raises(InputTypeError) as raised:
        Space(**{field: wrong})
    assert raised.value.argument == field


def test_model_function_values_by_kind(gpt2):
    from symbolic_cost.numeric.exact import model_function
    with pytest.raises(InputTypeError) as raised:
        model_function(gpt2)(b=[1])
    assert raised.value.argument == "b"


@pytest.mark.parametrize("wrong", WRONG)
def test_utilisation_and_collectives(wrong, cost):
    from symbolic_cost.models.utilisation import hardware_flops, hfu, mfu, model_flops
    from symbolic_cost.timing.hardware import comm_time
    for f in (model_flops, hardware_flops):
        refused(lambda: f(wrong), "cost")
    refused(lambda: mfu(wrong, 1, "h100"), "cost")
    refused(lambda: hfu(wrong, 1, "h100"), "cost")
    refused(lambda: comm_time(wrong, "h100"), "c")


@pytest.mark.parametrize("wrong", [None, {}, [1], "4*l"])
def test_scaling_analysis_expressions(wrong):
    """Text is read by ``reader.read``, never parsed here (SymPy's own parser evaluates it)."""
    from symbolic_cost.analysis.scaling import crossover, derivative, leading_terms, share
    from symbolic_cost.symbols import e, l
    refused(lambda: derivative(wrong, l), "expr")
    refused(lambda: leading_terms(wrong, l), "expr")
    refused(lambda: crossover(l * e, wrong, l), "b")
    refused(lambda: share(l, wrong), "whole")


@pytest.mark.parametrize("wrong", [None, {}, [1], 3, []])
def test_scaling_analysis_symbols(wrong):
    from symbolic_cost.analysis.scaling import elasticity, leading_terms, limit, optimum
    from symbolic_cost.symbols import e, l
    refused(lambda: elasticity(l * e, wrong), "x")
    refused(lambda: limit(l * e, wrong), "x")
    refused(lambda: leading_terms(l * e, wrong), "grow")
    if not isinstance(wrong, list):
        refused(lambda: optimum(l + 1 / l, wrong, [1, 2]), "x")


def test_text_is_never_evaluated_by_the_speculation_api(tmp_path):
    """A fuzz of the Python API: ``Speculation``'s acceptance went through ``sympify``, which
    evaluates text as Python; a string that wrote a file wrote it.  Text is refused, unread."""
    from symbolic_cost.inference.speculative import Speculation, expected_tokens
    marker = tmp_path / "written"
    code = f"__import__('pathlib').Path({str(marker)!r}).write_text('x') and 0"
    refused(lambda: Speculation(preset("gpt2"), 4, code), "acceptance")
    refused(lambda: expected_tokens(4, code), "alpha")
    assert not marker.exists()
    with pytest.raises(InputError, match="alpha"):
        expected_tokens(4, 2)           # no acceptance rate above 1
    with pytest.raises(InputError, match="from 1 to"):    # at least one draft token, at most MAX_DRAFT
        expected_tokens(-3, Rational(1, 2))


@pytest.mark.parametrize("call", [
    lambda laws: laws["hoffmann-2022"].at(0, 1e12),        # divided by zero
    lambda laws: laws["hoffmann-2022"].at(-1, 1e12),       # a complex loss
    lambda laws: laws["hoffmann-2022"].at(float("nan"), 1e12),
    lambda laws: laws["hoffmann-2022"].tokens_for(2.0, -1),
    lambda laws: laws["hoffmann-2022"].optimum().at(0),
    lambda laws: laws["hoffmann-2022"].optimum().at(1e25, per_token=0),
])
def test_scaling_laws_refuse_counts_that_are_not_positive(call):
    """A fuzz of the Python API: a zero ended in ZeroDivisionError, a negative in a complex loss."""
    from symbolic_cost.analysis.scaling_laws import LAWS
    with pytest.raises(InputError, match="must be positive"):
        call(LAWS)


def test_a_budget_given_as_text_is_refused_unread():
    from symbolic_cost.analysis.scaling_laws import LAWS
    refused(lambda: LAWS["hoffmann-2022"].optimum().at("__import__('os')"), "budget")


def _refuses(call, argument, words):
    """``call`` raises an ``InputError`` naming ``argument`` and saying ``words``."""
    with pytest.raises(InputError) as raised:
        call()
    assert raised.value.argument == argument and words in str(raised.value), (argument, str(raised.value))


def test_load_tests_check_what_they_run():
    """A fuzz of the Python API (issue 66): a negative transfer time gave negative latencies and a NaN one
    hung; 5,000 tokens out of gpt2's 1,024-token context ran; a billion replicas hung on 5 requests; a
    mapping was read as an SLO by its keys, a boolean as a rate, infinity as "all at once"."""
    import math
    from symbolic_cost.inference import Serving
    from symbolic_cost.inference.disaggregated import Pools, serve_disaggregated
    from symbolic_cost.inference.load import StepModel, serve
    step = StepModel(preset("gpt2"), Serving(b=1, l_in=128, l_out=16), "h100")
    pools = Pools(1, 1)
    for transfer in (-100.0, math.nan, math.inf):
        _refuses(lambda: serve_disaggregated(step, 16, 1.0, requests=5, pools=pools, transfer=transfer), "transfer",
                 "at least 0")
    _refuses(lambda: serve_disaggregated(step, -5, 1.0, requests=5, pools=pools), "output_tokens", "from 1 to")
    _refuses(lambda: serve_disaggregated(step, 16, 1.0, requests=0, pools=pools), "requests", "from 1 to")
    refused(lambda: serve_disaggregated(step, 16, 1.0, requests=5, pools=(1, 1)), "pools")
    refused(lambda: serve_disaggregated(step, 16, 1.0, requests=5, pools=pools, seed="x"), "seed")
    for call in (lambda: serve(step, 5000, 1.0, requests=2),
                 lambda: serve_disaggregated(step, 5000, 1.0, requests=2, pools=pools)):
        _refuses(call, "output_tokens", "l_in + output_tokens - 1 = 5127 tokens exceed the context of gpt2 (1024")
    long = StepModel(preset("gpt2"), Serving(b=1, l_in=128, l_out=16, allow_long=True), "h100")
    assert serve(long, 5000, None, requests=1).mean_ttft > 0
    one = serve(step, 16, 1.0, requests=5, replicas=5)
    assert serve(step, 16, 1.0, requests=5, replicas=10**9) == one      # the replicas past the requests get none
    refused(lambda: serve(step, 16, 1.0, requests=5, slo={1: 2, 3: 4}), "slo")
    for rate, kind in ((True, InputTypeError), ("x", InputTypeError), (math.inf, InputError), (-1.0, InputError)):
        with pytest.raises(kind) as raised:
            serve(step, 16, rate, requests=5)
        assert raised.value.argument == "rate"
    refused(lambda: serve(None, 16, 1.0), "step")
    refused(lambda: serve(step, 16, 1.0, runtime=None), "runtime")


def test_the_cache_and_the_batch_keep_the_serving_rules():
    """``kv_cache_bytes`` took splits ``Serving`` refuses (half a layer a stage at p = 24 on gpt2's 12 layers;
    12 key/value heads over 5 devices) and an encoder gpt2 does not have; ``fitting_batch`` answered 0 for a
    complex or negative capacity and an infinite batch for an infinite one."""
    from sympy import I
    from symbolic_cost.inference import Serving
    from symbolic_cost.inference.kv_cache import kv_cache_bytes
    from symbolic_cost.inference.peak import fitting_batch
    gpt2 = preset("gpt2")
    assert kv_cache_bytes(gpt2, 1, 100, p=4, m1=4) == 2 * 12 * 768 * 2 * 100 // 16    # K and V, 12 layers, bf16
    _refuses(lambda: kv_cache_bytes(gpt2, 1, 100, p=24), "p", "p must be at most n_layers")
    _refuses(lambda: kv_cache_bytes(gpt2, 1, 100, m1=5), "m1", "m1 must divide kv_heads")
    _refuses(lambda: kv_cache_bytes(gpt2, 1, 100, encoder=50), "encoder", "has no encoder")
    for capacity in (-1, I, float("inf")):
        with pytest.raises(InputError):
            fitting_batch(gpt2, Serving(l_in=128, l_out=16), capacity)


def test_values_that_would_be_ignored_or_break_later_are_refused_where_given():
    """A list where a name is taken raised
    ``TypeError: unhashable``; ``moe=5`` failed in ``model_cost``; a decidably negative symbolic rate
    (``-F``) dropped the compute time out of the step; ``layer_time`` of group 7 of one group raised
    ``IndexError``; ``Speculation(k=10**30)`` hung; ``l_ctx=True`` raised a SymPy ``TypeError``."""
    from sympy import Symbol
    from symbolic_cost.inference import Serving
    from symbolic_cost.inference.speculative import Speculation
    from symbolic_cost.inference.throughput import inference_cost
    from symbolic_cost.models import Architecture
    from symbolic_cost.timing.hardware import step_time
    from symbolic_cost.timing.step import layer_time
    from symbolic_cost.timing.systems import get_system
    dense = Architecture("t", 2, 64, 4, 256, 100)
    _refuses(lambda: Training(b=1, l=16, optimizer=["adam"]), "optimizer", "optimizer must be one of")
    _refuses(lambda: Training(b=1, l=16, fp8=["delayed"]), "fp8", "fp8 must be one of")
    _refuses(lambda: model_cost(dense, Training(b=1, l=16), conventions=["megatron"]), "conventions", "unknown")
    _refuses(lambda: Architecture("t", 2, 64, 4, 256, 100, moe=5), "moe", "moe must be a blocks.moe.MoE")
    _refuses(lambda: get_system("h100").but(matrix_flops=-Symbol("F", positive=True)), "matrix_flops",
             "must be positive")
    cost = model_cost(dense, Training(b=1, l=16))
    _refuses(lambda: layer_time(cost, "h100", group=7), "group", "0 to 0")
    _refuses(lambda: step_time(cost.stack[1][0], "h100", passes=("zz",)), "passes", "'fwd' and/or 'bwd'")
    _refuses(lambda: Speculation(dense, 10**30, Rational(1, 2)), "k", "from 1 to 64")
    refused(lambda: inference_cost(preset("gpt2"), Serving(b=1, l_in=128, l_out=16), l_ctx=True), "l_ctx")


def test_analysis_refuses_what_has_no_answer():
    """``optimum`` chose m1 = -1; ``share`` of a whole of 0 and ``elasticity`` of 0 returned zoo and NaN;
    ``limit(to="x")`` parsed the text; ``smooth_at`` at a point that decides nothing raised SymPy's
    ``TypeError``; a million candidates ran for minutes."""
    from sympy import Max
    from symbolic_cost.analysis import elasticity, limit, optimum, share, smooth_at
    from symbolic_cost.symbols import e, l, m1
    _refuses(lambda: optimum(64 / m1 + m1, m1, [-1, 1]), "each of candidates (m1)", "positive integer")
    _refuses(lambda: optimum(64 / m1 + m1, m1, list(range(1, 10**6))), "candidates", "1 to 4,096")
    _refuses(lambda: share(l, 0), "whole", "a share of nothing")
    _refuses(lambda: elasticity(0, l), "expr", "an elasticity of nothing")
    refused(lambda: limit(l, l, to="x"), "to")
    _refuses(lambda: smooth_at(Max(l, e), {l: 2}), "point", "does not decide")
    assert optimum(64 / m1 + m1, m1, [1, 2, 4, 8, 16]).best == 8          # 8 + 8 = 16, the least of the five


def test_a_system_without_a_network_times_no_collective_across_domains():
    """An H100 system stating no network (ib_bandwidth 0) kept its calibrated block's fitted bus, and the
    calibrated model timed a 16-device all-reduce over two 8-GPU domains on it; the peak model refused it.
    Within one domain (d = 8) it times as before."""
    from symbolic_cost.timing.hardware import calibrated
    from symbolic_cost.timing.step import step_time_breakdown
    alone = calibrated("h100").but(ib_bandwidth=0)
    gpt2 = preset("gpt2")
    _refuses(lambda: step_time_breakdown(model_cost(gpt2, Training(b=8, l=1024, d=16)), alone), "ib_bandwidth",
             "has no network (ib_bandwidth 0) for a allreduce over 16 devices")
    inside = model_cost(gpt2, Training(b=8, l=1024, d=8))
    assert step_time_breakdown(inside, alone)["total"] == step_time_breakdown(inside, calibrated("h100"))["total"]


def test_architecture_values_that_would_be_ignored_or_cannot_be():
    """rotary_dim without rotary positions changed nothing, rotary_dim past the head's 16 dimensions was priced,
    chunked attention without a window was ignored, and 16 tokens ran through an 8-row learned position table
    (no context stated): each refused, as the Training and Serving values refuse theirs."""
    from symbolic_cost.models import Architecture
    _refuses(lambda: Architecture("t", 2, 64, 4, 256, 100, rotary_dim=8), "rotary_dim", "it would be ignored")
    _refuses(lambda: Architecture("t", 2, 64, 4, 256, 100, rotary=True, rotary_dim=1000), "rotary_dim",
             "at most a head's 16 dimensions")
    _refuses(lambda: Architecture("t", 2, 64, 4, 256, 100, chunked=True), "chunked", "it would be ignored")
    table = Architecture("t", 2, 64, 4, 256, 100, positions=8)
    _refuses(lambda: model_cost(table, Training(b=1, l=16)), "l", "16 tokens exceed the context of t (8 tokens)")
    assert model_cost(table, Training(b=1, l=8)).parameters > 0


@pytest.mark.parametrize("wrong", [[], {}, 3])
def test_torchtitan_s_model_names_and_gpu_are_names(wrong):
    """A list, a mapping or a number where torchtitan's readers take a name ended in "unhashable type"."""
    from pathlib import Path
    from symbolic_cost.models.torchtitan import torchtitan_setup
    from symbolic_cost.models.torchtitan_models import toml_architecture
    toml = (Path(__file__).parent / "framework_inputs" / "torchtitan_toml_477784a" / "qwen3_0.6b.toml").read_text()
    refused(lambda: torchtitan_setup(toml, "qwen3", world=8, gpu=wrong), "gpu")
    refused(lambda: toml_architecture("qwen3", wrong, 4096), "[model] flavor")
    refused(lambda: toml_architecture(wrong, "0.6B", 4096), "[model] name")


def test_whole_floats_and_numpy_integers_are_the_integers_they_are():
    """``12.0`` layers or ``numpy.int64(2)`` data-parallel ranks are 12 and 2: the totals are the
    exact ones of the int-built model, with no Float in them, and the float-built model does not
    leave a Float in SymPy's cache for the int-built one built after it (it used to)."""
    import numpy as np
    from sympy import Float
    from symbolic_cost.models import Architecture
    floats = Architecture("whole", 12.0, 768.0, np.int64(12), 3072.0, 50257)
    given = model_cost(floats, Training(b=2.0, l=512.0, cp=2.0, d=np.int64(2), zero=np.int64(1), m1=2.0,
                                        loss_chunks=np.int64(2), micro_batches=4.0, flash=True))
    ints = model_cost(Architecture("whole", 12, 768, 12, 3072, 50257),
                      Training(b=2, l=512, cp=2, d=2, zero=1, m1=2, loss_chunks=2, micro_batches=4, flash=True))
    for total in ("memory_bytes", "model_flops_fwd", "weight_bytes"):
        assert not getattr(given, total).has(Float) and not getattr(ints, total).has(Float)
        assert getattr(given, total) == getattr(ints, total)
    assert type(floats.n_layers) is int and type(floats.h) is int
    with pytest.raises(InputError, match="cp must be exact .* got the float 1.5"):
        Training(cp=1.5, flash=True)


def test_a_python_callers_wrong_values_are_refused_by_name():
    """The third probe's Python calls (issue 66): each ended in a TypeError, an OverflowError, a
    SymPy or YAML error, a hang, or a silent answer; each is now an ``InputError`` naming the
    argument and the rule."""
    import numpy as np
    from sympy import Symbol
    from symbolic_cost import mlp
    from symbolic_cost.analysis.planning import plan
    from symbolic_cost.analysis.scaling import elasticity
    from symbolic_cost.checks import count, exact
    from symbolic_cost.inference.load import StepModel, arrivals
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.latex import formula_table, paper_form
    from symbolic_cost.models import Architecture
    from symbolic_cost.models.megatron_bridge import load_yaml
    from symbolic_cost.models.peak import largest_micro_batch
    from symbolic_cost.numeric.compile import compile_exprs
    from symbolic_cost.numeric.search import search
    from symbolic_cost.numeric.sweep import sweep
    from symbolic_cost.symbols import b, e, l
    from symbolic_cost.timing.step import optimizer_time
    gpt2 = preset("gpt2")
    cases = [
        (lambda: Architecture("t", 2, 256, 8, 1024, 1000, decoder_layers=10**400), "decoder_layers must be at most 100,000"),
        (lambda: Architecture("t", 2, 256, 8, 1024, 1000, mtp_layers=Symbol("q")), "mtp_layers must be a number"),
        (lambda: count(10**400, "global_batch"), "global_batch must be an integer of at most"),
        (lambda: largest_micro_batch(gpt2, Training(b=1, l=l), 80 * 10**9), "needs every size but b as a number"),
        (lambda: largest_micro_batch(gpt2, Training(l=1024), 80 * 10**9, limit=-1), "limit must be an integer >= 1"),
        (lambda: load_yaml("\x00", "x.yaml", "--accelerate"), "x.yaml: not a YAML file"),
        (lambda: load_yaml("a: " + "9" * 5001, "x.yaml", "--accelerate"), "more than 4,300 digits"),
        (lambda: optimizer_time(None, "h100"), "cost must be a ModelCost"),
        (lambda: optimizer_time(model_cost(gpt2, Training(b=1, l=128)), "h100"), "times on the calibrated model"),
        (lambda: StepModel(gpt2, Serving(l_in=128, l_out=16), "h100", speculation="x"), "speculation must be"),
        (lambda: search(gpt2, 8, space="x"), "space must be a Space"),
        (lambda: formula_table(mlp(b, l, e, 4 * e), ["bogus"]), "fields: unknown bogus"),
        (lambda: formula_table(mlp(b, l, e, 4 * e), "flops_fwd"), "fields must be a list of field names"),
        (lambda: compile_exprs({"t": 2 * b})({"b": "1"}), "b must be numbers"),
        (lambda: compile_exprs({"t": b * l})({"b": [1, 2], "l": [1, 2, 3]}), "do not broadcast together"),
        (lambda: sweep({"t": 2 * b}, grid={"b": ["1"]}), "grid b must be a list of numbers"),
        (lambda: exact(1e-9, "memory_fraction"), "write Rational(1, 1000000000) instead"),
        (lambda: plan(10**400), "the budget must be at most 1e40 FLOPs"),
        (lambda: plan(1e24, seq=10**9), "seq must be an integer between 1 and 10,000,000"),
        (lambda: plan(1e24, recompute="yes"), "recompute must be True or False"),
        (lambda: arrivals(-1, 1.0), "requests must be an integer between 1 and 100,000"),
        (lambda: paper_form(2 * b, by=0), "by must not be 0"),
        (lambda: paper_form(2 * b, by="b"), "not text"),
        (lambda: Training(tensor="8"), "tensor must be a Grid"),
        (lambda: elasticity(l - 5, l, {"l": 5}), "the elasticity is not finite at"),
        (lambda: elasticity(l - 5, l, {"l": -4096}), "at[l] must be positive (l is a size)"),
    ]
    for call, message in cases:
        with pytest.raises(InputError, match=re.escape(message)):
            call()
    assert count(np.int64(16), "devices") == 16          # numpy's integers are integers, as Training takes them


def test_a_span_past_the_context_names_the_length_to_cut():
    """A prompt past the context names ``l_in``; a prompt that fits but whose answer runs past
    names ``l_out`` (the refusal named no argument)."""
    from symbolic_cost.inference.serving import Serving, check_context
    for serving, argument in ((Serving(b=1, l_in=1020, l_out=16), "l_out"), (Serving(b=1, l_in=2000, l_out=16), "l_in")):
        with pytest.raises(InputError) as refused:
            check_context(preset("gpt2"), serving)
        assert refused.value.argument == argument
