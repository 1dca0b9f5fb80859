"""Round eleven of hostile input (issue 66): what a fresh adversarial pass over the Python API and the
command line found, each refused by the module that owns the rule, naming the argument."""

import random
import shlex

import pytest
from sympy import Function, Symbol

from symbolic_cost.checks import InputError, InputTypeError
from symbolic_cost.symbols import b, l


# --- compiled and exact kernels: an undefined function is no formula a kernel can compute ---

@pytest.mark.parametrize("call", ["sweep", "compile", "exact"])
def test_an_undefined_function_is_refused_naming_the_expression(call):
    from symbolic_cost.numeric.compile import compile_exprs
    from symbolic_cost.numeric.exact import exact_function
    from symbolic_cost.numeric.sweep import sweep
    exprs = {"work": Function("g")(b) * l}
    run = {"sweep": lambda: sweep(exprs, grid={"b": [1, 2], "l": [3]}),
           "compile": lambda: compile_exprs(exprs)({"b": 1, "l": 3}),
           "exact": lambda: exact_function(exprs)({"b": 1, "l": 3})}[call]
    with pytest.raises(InputError, match="undefined function g") as refused:
        run()
    assert "work" in refused.value.argument


# --- a run's plan: the amounts it prices are positive numbers, as the command line's plan takes them ---

@pytest.mark.parametrize("given, argument", [
    (dict(price=-1), "price"),                       # printed a negative cost
    (dict(flops_per_token="x"), "flops_per_token"),  # ValueError from float()
    (dict(flops_per_token=Symbol("F")), "flops_per_token"),   # TypeError from float()
    (dict(flops_per_token=0), "flops_per_token"),    # an MFU of 0 for any run
    (dict(global_batch=0), "global_batch"),          # taken as the default batch
    (dict(tokens=True), "tokens"),
])
def test_run_plan_refuses_amounts_that_are_not_positive_numbers(given, argument):
    from symbolic_cost.models.config import preset
    from symbolic_cost.numeric.training_run import run_plan
    kwargs = {"flops_per_token": 10**9, "devices": 8, "seq": 1024, "tokens": 10**9, **given}
    with pytest.raises(InputError) as refused:
        run_plan(preset("gpt2"), **kwargs)
    assert refused.value.argument == argument and argument in str(refused.value)


@pytest.mark.parametrize("given, argument", [(dict(days="3"), "days"), (dict(price=-1), "price"),
                                             (dict(global_batch=0), "global_batch")])
def test_plan_for_days_refuses_text_and_negative_amounts(given, argument):
    from symbolic_cost.numeric.training_run import plan_for_days
    with pytest.raises(InputError) as refused:
        plan_for_days(**{"devices": 64, "days": 1, **given})
    assert refused.value.argument == argument


# --- serving: the lengths drawn and the layouts ranked ---

def test_drawn_lengths_are_bounded_as_a_simulation_is():
    from symbolic_cost.inference.lengths import MAX_REQUESTS, drawn
    with pytest.raises(InputError, match="requests") as refused:
        drawn(32, 10**9, "geometric")                # built a list of 10^9 until it ran out of time
    assert refused.value.argument == "requests"
    assert len(drawn(32, MAX_REQUESTS, "geometric")) == MAX_REQUESTS


def test_the_simulations_bound_on_requests_is_the_lengths_one():
    from symbolic_cost.inference import lengths, load
    assert load.MAX_REQUESTS is lengths.MAX_REQUESTS


def test_layouts_refuse_tensor_degrees_none_of_which_divides_the_devices():
    from symbolic_cost.inference.serving_search import layouts
    with pytest.raises(InputError, match="divides devices=2") as refused:
        layouts(2, tensor=(16,))
    assert refused.value.argument == "tensor"
    assert [x.m1 for x in layouts(2, tensor=(2, 16))] == [2]     # one that divides: its layouts, as before


def test_rank_says_why_no_layout_is_ranked_instead_of_an_empty_answer():
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.serving_search import Effort, rank
    from symbolic_cost.models.config import preset
    with pytest.raises(InputError) as refused:
        rank(preset("gpt2"), Serving(l_in=128, l_out=32), "h100", 2, (1, 0.1), effort=Effort(20, 2000), tensor=(3,))
    assert refused.value.argument == "tensor"


# --- launch scripts: words read in linear time, as shlex reads them ---

def test_split_words_is_shlex_split_on_random_text():
    from symbolic_cost.models.launch_script import split_words
    draw = random.Random(11)
    pieces = ["a", "b", " ", "\t", "\n", '"', "'", "\\", "#", "$", "x y"]

    def outcome(split, text, comments):
        try:
            return split(text, comments=comments)
        except ValueError as error:
            return ("ValueError", str(error))
    for _ in range(20_000):
        text = "".join(draw.choice(pieces) for _ in range(draw.randint(0, 12)))
        for comments in (False, True):
            assert outcome(split_words, text, comments) == outcome(shlex.split, text, comments), text


def test_a_launch_script_of_one_long_word_is_refused_for_its_content():
    from symbolic_cost.models.launch_script import read_launch, split_words
    assert split_words('x "' + "a b" * 100_000 + '"') == ["x", "a b" * 100_000]
    with pytest.raises(InputError, match="no line runs"):
        read_launch("a" * 2_000_000, "script.sh")    # shlex's n^2/2 copies: over a minute


# --- Megatron-Bridge recipes: the override YAML ---

@pytest.mark.parametrize("overrides, argument", [
    ("x", "overrides"),                       # AttributeError
    ([], "overrides"),                        # taken as no override
    ({"model": "x"}, "model"),                # ValueError from dict("x")
    ({"model": None}, "model"),               # dropped the recipe's layout (cp=2 became 1)
    ({"tokenizer": "x"}, "tokenizer"),        # AttributeError
])
def test_a_recipe_override_is_a_mapping_of_sections(overrides, argument):
    from symbolic_cost.models.bridge_recipes import recipe_setup
    from symbolic_cost.models.config import preset
    with pytest.raises(InputError) as refused:
        recipe_setup("llama3_8b_pretrain_config", preset("llama-3-8b"), overrides=overrides)
    assert refused.value.argument == argument


@pytest.mark.parametrize("key", ["num_layers", "hidden_size", "num_query_groups", "share_embeddings_and_output_weights"])
def test_a_recipe_override_of_the_models_shape_is_refused_not_ignored(key):
    from symbolic_cost.models.bridge_recipes import recipe_setup
    from symbolic_cost.models.config import preset
    with pytest.raises(InputError, match="--hf-config") as refused:
        recipe_setup("llama3_8b_pretrain_config", preset("llama-3-8b"), overrides={"model": {key: 5}})
    assert refused.value.argument == f"model.{key}"


def test_a_recipe_override_of_the_layout_is_still_read():
    from symbolic_cost.models.bridge_recipes import recipe_setup
    from symbolic_cost.models.config import preset
    setup = recipe_setup("llama3_8b_pretrain_config", preset("llama-3-8b"), world=8,
                         overrides={"model": {"tensor_model_parallel_size": 2}})
    assert {str(k): v for k, v in setup.values.items()}["m1"] == 2


# --- value objects and helpers of the time and memory models ---

@pytest.mark.parametrize("given, argument", [(dict(workspace=-5), "workspace"),          # gave memory back
                                             (dict(context="1GB"), "context"),           # kept as text
                                             (dict(nccl=2.5), "nccl"),
                                             (dict(fragmentation=float("nan")), "fragmentation")])  # TypeError
def test_overheads_are_whole_bytes_and_a_factor_of_at_least_one(given, argument):
    from symbolic_cost.models.overheads import Overheads
    with pytest.raises(InputError) as refused:
        Overheads(**given)
    assert refused.value.argument == argument


def test_overheads_still_take_bytes_and_a_factor():
    from sympy import Rational
    from symbolic_cost.models.overheads import Overheads
    # the allocator reserves 11/10 of what cuBLAS's workspace and the tensors allocate; CUDA's context beside
    held = Overheads(workspace=2**20, context=500, fragmentation=Rational(11, 10)).device_bytes(1000)
    assert held == Rational(11, 10) * (1000 + 2**20) + 500


def test_an_even_pipeline_split_of_numbers_is_whole_layers():
    from symbolic_cost.parallel.pipeline import stage_layers
    with pytest.raises(InputError, match="p must divide n_layers") as refused:
        stage_layers(12, 13)                            # 12/13 of a layer on each rank
    assert refused.value.argument == "p"
    assert stage_layers(12, 4) == (3, 3, 3)


def test_an_hsdp_shard_group_divides_the_data_parallel_ranks():
    from symbolic_cost.parallel.zero import shard_degree
    for shard in (16, 3):                               # 16 of 8 ranks; 3 does not divide 8
        with pytest.raises(InputError) as refused:
            shard_degree("weights", 3, 8, shard=shard)
        assert refused.value.argument == "shard"
    assert shard_degree("weights", 3, 8, shard=4) == 4


@pytest.mark.parametrize("call, argument", [
    (lambda pc: pc.network_share(16, 2, "bogus"), "routing"),             # ValueError: unpacking
    (lambda pc: pc.network_share(16, 2, (8, 9)), "routing"),              # 9 distinct experts of 8
    (lambda pc: pc.hierarchical_time("allreduce", 16, 8, 100, "x", (10**10, 0)), "nvlink"),   # IndexError
    (lambda pc: pc.hierarchical_time("allreduce", 16, 8, 100, (10**11, 0), (10**10,)), "ib"),
])
def test_collective_helpers_name_a_malformed_pair(call, argument):
    from symbolic_cost.parallel import collectives
    with pytest.raises(InputError) as refused:
        call(collectives)
    assert refused.value.argument == argument


def test_latex_names_an_integer_python_will_not_print():
    import sympy
    from symbolic_cost.latex import latex
    with pytest.raises(InputError, match="digits") as refused:
        latex(sympy.Integer(10) ** 5000 * b)            # ValueError from int's string conversion
    assert refused.value.argument == "expr"


# --- Megatron-Bridge YAML: an expert degree of a dense model is still a degree ---

@pytest.mark.parametrize("value", ["x", -1, 0, 2.5])
def test_a_dense_models_expert_tensor_degree_is_still_checked(value):
    import yaml
    from pathlib import Path
    from symbolic_cost.models.megatron_bridge import megatron_bridge_setup
    config = yaml.safe_load((Path(__file__).parent / "framework_inputs" / "megatron_bridge_llama32_1b.yaml").read_text())
    config["model"]["expert_tensor_parallel_size"] = value      # taken silently: no expert layer reads it
    with pytest.raises(InputError) as refused:
        megatron_bridge_setup(yaml.safe_dump(config), "run.yaml", 8)
    assert refused.value.argument == "model.expert_tensor_parallel_size"
