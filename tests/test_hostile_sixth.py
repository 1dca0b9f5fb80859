"""Issue 66, a sixth probe: inputs answered silently or refused without naming the rule, one
test each.  A refusal is exit status 2 with one line naming the option (or an ``InputError``
naming the argument); a value is counted by hand or read from ``transformers``' own classes."""

import json
import re
from pathlib import Path

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models.config import from_config
from test_refusals import refused


MIXTRAL_FILE = str(Path(__file__).parent / "hf_configs" / "Mixtral-8x7B-v0.1.json")


MIXTRAL = {"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "num_local_experts": 4,
           "num_experts_per_tok": 2}


@pytest.mark.parametrize("key, default", [("num_local_experts", 8), ("num_experts_per_tok", 2),
                                          ("intermediate_size", 14336)])
def test_a_mixture_of_experts_file_that_leaves_out_an_expert_size_says_which_default_it_took(key, default):
    """A Mixtral file without ``num_local_experts`` was read as 8 experts with no word (as
    ``MixtralConfig()`` reads it: the oracle, by hand here); each size left out is noted."""
    config = {k: v for k, v in MIXTRAL.items() if k != key}
    arch = from_config(config)
    assert arch.notes == (f"config.json leaves out {key}: taken at the defaults of transformers' config class "
                          f"for model_type 'mixtral' ({key}={default})",)
    assert from_config(MIXTRAL).notes == ()


def test_an_expert_count_stated_under_another_spelling_is_not_noted():
    """Mixtral reads ``num_local_experts``, else ``num_experts``: a file that states either is
    not told that it left the other out; one that states neither is told once."""
    config = {k: v for k, v in MIXTRAL.items() if k != "num_local_experts"}
    arch = from_config({**config, "num_experts": 4})
    assert arch.notes == () and arch.moe.experts == 4
    qwen = {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "num_experts": 4,
            "num_experts_per_tok": 2, "moe_intermediate_size": 32}
    assert from_config(qwen).notes == ()
    del qwen["moe_intermediate_size"]
    assert from_config(qwen).notes == ("config.json leaves out moe_intermediate_size: taken at the defaults of "
                                       "transformers' config class for model_type 'qwen3_moe' "
                                       "(moe_intermediate_size=768)",)


@pytest.mark.parametrize("argv", [["plan", "--budget-flops", "1e25", "--seq", "200000"],
                                  ["plan", "--devices", "64", "--days", "1", "--seq", "200000"]])
def test_a_plan_past_its_shapes_context_names_seq_and_no_option_plan_lacks(capsys, argv):
    """``plan --seq`` past llama-3's 131,072 tokens was refused after the depth search as
    "allow_long=True (--allow-long) goes beyond it": plan has no such option."""
    err = refused(capsys, argv, "seq = 200000 tokens exceed the context", "131072 tokens", "(--seq)")
    assert "allow" not in err


def test_a_plan_past_its_shapes_context_is_refused_from_python_by_name():
    from symbolic_cost.analysis.planning import plan
    with pytest.raises(InputError, match="a plan keeps to the llama-3 shape's context") as refusal:
        plan(10**25, seq=131073)
    assert refusal.value.argument == "seq"


@pytest.mark.parametrize("argv, option", [(["optimize", "--preset", "gpt2", "--over", "m1,s1"], "--over"),
                                          (["crossover", "--for", "l,b"], "--for"),
                                          (["formula", "--preset", "gpt2", "--diff", "b,l"], "--diff"),
                                          (["formula", "--preset", "gpt2", "--elasticity", "b,l"], "--elasticity")])
def test_an_option_of_one_symbol_refuses_a_list_by_name(capsys, argv, option):
    """``--over m1,s1`` and ``--for l,b`` ended in "too many values to unpack (expected 1)", and
    ``--diff b,l`` in "unknown symbol name 'b,l'" without the option: each names its option now."""
    refused(capsys, argv, f"{option} takes one symbol, got '{argv[-1]}'")


def test_leading_refuses_a_symbol_named_twice(capsys):
    """``--leading b,b`` was answered as ``--leading b``, as ``--field`` and ``--at`` refuse theirs."""
    refused(capsys, ["formula", "--preset", "gpt2", "--leading", "b,l,b"], "--leading: b named twice: name each once")


@pytest.mark.parametrize("argv", [["sweep", "--preset", "gpt2", "--grid", "b=1,1"],
                                  ["sweep", "--preset", "gpt2", "--grid", "b=1:4,2"],
                                  ["inference", "--preset", "gpt2", "--grid", "b=2,4/2", "--field", "ttft_s"]])
def test_a_grid_value_listed_twice_is_refused(capsys, argv):
    """``sweep --grid b=1,1`` printed the same row twice, as if two configurations were asked."""
    refused(capsys, argv, "--grid", "listed twice: list each value once")


def test_an_expert_imbalance_on_one_expert_parallel_rank_is_refused(capsys):
    """``--expert-imbalance 100`` at ep=1 was answered as no imbalance at all (the same step time
    to the digit): one rank holding every expert receives every routed token.  A sweep over ep
    keeps its ep=1 point (the imbalance names the busiest of several ranks there only)."""
    mixtral = MIXTRAL_FILE
    refused(capsys, ["summary", "--hf-config", mixtral, "--set", "l=1024", "--expert-imbalance", "100"],
            "expert_imbalance=100", "ep=1 keeps every expert on one rank", "it would be ignored", "(--expert-imbalance)")
    from symbolic_cost.models import Training, model_cost
    from symbolic_cost.models.config import from_config
    arch = from_config(json.loads(open(mixtral).read()))
    with pytest.raises(InputError, match="it would be ignored") as refusal:
        model_cost(arch, Training(b=1, l=1024, expert_imbalance=2))
    assert refusal.value.argument == "expert_imbalance"


QWEN3_MOE = {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "num_experts": 4,
             "num_experts_per_tok": 2, "moe_intermediate_size": 32}


LLAMA4_TEXT = {**{k: v for k, v in QWEN3_MOE.items() if k not in ("num_experts", "moe_intermediate_size")},
               "model_type": "llama4_text", "num_local_experts": 4, "intermediate_size_mlp": 96}


@pytest.mark.parametrize("key, base", [("mlp_only_layers", QWEN3_MOE), ("moe_layers", LLAMA4_TEXT)])
def test_a_layer_list_naming_a_layer_twice_is_refused(key, base):
    """A layer named twice in ``mlp_only_layers`` (or Llama 4's ``moe_layers``) was read without a
    word, and a symbolic depth's count of MoE layers subtracted it twice."""
    with pytest.raises(InputError, match=re.escape(f"{key} names layer 2 twice: name each once")) as refusal:
        from_config({**base, key: [1, 2, 2]})
    assert refusal.value.argument == key


@pytest.mark.parametrize("key, base", [("mlp_only_layers", QWEN3_MOE), ("moe_layers", LLAMA4_TEXT)])
def test_a_layer_past_the_model_is_left_out_with_a_note(key, base):
    """A layer past the model (999 of 4) is left out, as ``transformers`` leaves it (its decoder asks
    each of its layers whether it is listed: a config cut to fewer layers keeps the full list), and
    noted; the model is the one of the list without it (counted, it took a layer off a symbolic
    depth's count of MoE layers)."""
    past, within = from_config({**base, key: [0, 1, 999]}), from_config({**base, key: [0, 1]})
    assert past.notes == (f"config.json: {key} names layer 999, past the model's 4 layers (0 to 3): left out, as "
                          "transformers builds only the layers the model has",)
    assert within.notes == () and past.moe == within.moe


def test_dense_layers_listed_within_the_model_are_counted_by_hand():
    """4 layers, layers 0 and 3 dense: 2 MoE layers' 4 experts (3 x 64 x 32 each) and router (64 x 4)
    become 2 dense MLPs (3 x 64 x 96), by hand against the model with no dense layer."""
    from symbolic_cost.models import Training, model_cost
    plain = model_cost(from_config(QWEN3_MOE), Training(b=1, l=8)).parameters
    mixed = model_cost(from_config({**QWEN3_MOE, "mlp_only_layers": [3, 0]}), Training(b=1, l=8)).parameters
    assert plain - mixed == 2 * (4 * 3 * 64 * 32 + 64 * 4 - 3 * 64 * 96)


@pytest.mark.parametrize("depths", [[3, 2], [2, 2, 3]])
def test_plan_refuses_depths_out_of_order(depths):
    """``plan(1e25, depths=[3, 2])`` said the optimum lay below the depths tried and asked for a
    larger budget: the first was taken for the least (Llama 3's optimum at 1e25 is near 80)."""
    from symbolic_cost.analysis.planning import plan
    with pytest.raises(InputError, match="depths must be layer counts in increasing order, each once") as refusal:
        plan(10**25, depths=depths)
    assert refusal.value.argument == "depths"
    with pytest.raises(InputError, match="so the optimum is above them: choose a smaller budget"):
        plan(10**25, depths=[2, 3])


def test_a_sweep_refuses_a_shard_group_that_does_not_divide_a_swept_d(capsys):
    """``sweep --grid d=1,2,4 --zero 3 --shard 2`` priced d=1 with a data-parallel time of -1.7 ms
    (and d=3 without a word): summary refuses the point, ``shard must divide d``."""
    refused(capsys, ["sweep", "--preset", "gpt2", "--grid", "d=1,2,4", "--zero", "3", "--shard", "2"],
            "--grid at d=1: shard must divide d (got shard=2, d=1)")
    refused(capsys, ["sweep", "--preset", "gpt2", "--grid", "d=2,3", "--zero", "3", "--shard", "2"],
            "--grid at d=3: shard must divide d")
    assert main(["sweep", "--preset", "gpt2", "--grid", "d=2,4", "--zero", "3", "--shard", "2",
                 "--field", "data_comm"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 3 and all(float(row.split(",")[1]) > 0 for row in rows[1:])


def test_a_sweep_refuses_an_imbalance_past_a_swept_ep(capsys):
    """``--expert-imbalance 3`` over ``--grid ep=2,4`` priced ep=2 with 1.5 times every routed token
    on one rank; summary refuses it at ep=2.  The ep=1 point stays (the imbalance is moot there)."""
    mixtral = ["sweep", "--hf-config", MIXTRAL_FILE, "--set", "l=1024", "d=4"]
    refused(capsys, [*mixtral, "--grid", "ep=2,4", "--expert-imbalance", "3"],
            "--grid at ep=2: expert_imbalance must be between 1 and ep", "(--expert-imbalance)")
    assert main([*mixtral, "--grid", "ep=1,2,4", "--expert-imbalance", "2", "--field", "compute"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4


def test_optimize_over_the_expert_degree_answers_without_a_relaxed_root(capsys):
    """``optimize --over ep`` of Mixtral ended in an internal error (the slope holds the derivative
    of ``floor(ep/8)``, which nsolve cannot print): the step function has no root to relax to."""
    assert main(["optimize", "--hf-config", MIXTRAL_FILE, "--over", "ep",
                 "--max", "8"]) == 0
    out = capsys.readouterr().out
    assert [line.split("=")[1].split(":")[0].strip() for line in out.splitlines() if line.startswith("  ep =")] == \
        ["1", "2", "4", "8"]
    assert "relaxed: no interior minimum on that branch" in out
    from symbolic_cost.analysis.scaling import optimum
    from symbolic_cost.symbols import ep
    from sympy import floor
    found = optimum(ep + 16 * floor(8 / ep), ep, [1, 2, 4, 8])         # 129, 66, 36, 24 by hand
    assert found.best == 8 and found.relaxed is None


def test_a_sweep_refuses_loss_chunks_that_do_not_divide_a_swept_points_tokens(capsys):
    """``sweep --grid b=1,3 --set l=512 --loss-chunks 3`` priced b=1 (512 tokens in 3 equal chunks),
    which summary refuses; b=3 (1,536 tokens, 512 a chunk) and b=6 stay."""
    base = ["sweep", "--preset", "gpt2", "--set", "l=512", "--loss-chunks", "3", "--field", "total"]
    refused(capsys, [*base, "--grid", "b=1,3"],
            "--grid at b=1: loss_chunks=3 must divide the 512 tokens of a micro-batch", "(--loss-chunks)")
    assert main([*base, "--grid", "b=3,6"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_a_sweep_refuses_an_expert_grid_that_does_not_fold_into_a_shard_group(capsys):
    """Mixtral on d=4 under ``--zero 3 --shard 2``: at ep=4 the 4 expert ranks do not fold into a
    replica group's 2 (summary refuses it); the sweep priced it with a data-parallel time of -0.43 s."""
    base = ["sweep", "--hf-config", MIXTRAL_FILE, "--set", "l=1024", "d=4", "--zero", "3",
            "--shard", "2", "--field", "data_comm"]
    refused(capsys, [*base, "--grid", "ep=1,2,4"],
            "--grid at ep=4: ep x etp must divide m1 x cp x shard (got ep x etp=4, m1 x cp x shard=2)")
    assert main([*base, "--grid", "ep=1,2"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 3 and all(float(row.split(",")[1]) > 0 for row in rows[1:])


def test_an_inference_grid_of_prompts_under_context_parallelism_cuts_each_into_its_chunks(capsys):
    """``--set cp=2 --grid l_in=512,514`` priced a prompt of 514 tokens in 4 ring chunks, which
    ``--set l_in=514`` refuses; 512 and 516 (4 x 129) are both cut whole."""
    base = ["inference", "--preset", "llama-2-7b", "--flash", "--set", "cp=2", "--field", "ttft_s"]
    refused(capsys, [*base, "--grid", "l_in=512,514"], "--grid at l_in=514: 4 chunks (cp=2, ring) must divide l")
    assert main([*base, "--grid", "l_in=512,516"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_a_sweep_refuses_block_recomputation_of_more_layers_than_a_swept_stage_holds(capsys):
    """GPT-2's 12 layers over p=4 hold 3 a stage: ``--recompute-method block --recompute-layers 4``
    is refused there by summary, and the sweep priced it (as 3 recomputed layers)."""
    base = ["sweep", "--preset", "gpt2", "--set", "l=512", "n_micro=4", "--recompute", "full",
            "--recompute-method", "block", "--field", "total"]
    refused(capsys, [*base, "--recompute-layers", "4", "--grid", "p=1,2,4"],
            "--grid at p=4: recompute_layers must be at most a stage's layers (got 4 and 3)", "(--recompute-layers)")
    assert main([*base, "--recompute-layers", "3", "--grid", "p=1,2,4"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4
