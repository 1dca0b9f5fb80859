"""Issue 66, an eighth probe: the training commands of the command line (summary, sweep, search,
plan, crossover, formula, profile) with hostile values of their newer options: MoE (capacity
factor, imbalance, dispatcher, ``ep``/``etp``), precision (FP8 recipes and their 16-bit layers),
the systems and ``--system-file``, pipeline layouts and uneven stages, tensor grids, LoRA,
offload, ``--loss-chunks``, ``--step-time`` and ``--json``, and beside framework files the
options those decide, typed at their defaults.  What was accepted and should not
have been, or refused without naming the option, is tested here, each test saying what happened
before; the expectations follow from the rule (Megatron-Core's, or the option's own), not from the
library's output."""

from fractions import Fraction
from pathlib import Path

import pytest

from test_refusals import refused
from test_hostile_seventh import refusal

HF = Path(__file__).parent / "hf_configs"
MIXTRAL = str(HF / "Mixtral-8x7B-v0.1.json")
"""8 experts, top-2: a capacity factor may be at most 8 / 2 = 4."""


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


# pipeline layouts: Megatron-Core's PipelineParallelLayerLayout.validate_layer_layout


@pytest.mark.parametrize("layout, says", [
    ("Et*8|t*8|t*8|t*8", "end with the loss (L)"),          # no loss: accepted, as if it ended L
    ("Et*8|t*8|t*8|t*8LL", "end with the loss (L)"),        # the loss twice
    ("Et*8|t*8|t*8|t*7Lt", "end with the loss (L)"),        # a layer after the loss
    ("EEt*8|t*8|t*8|t*8L", "begin with the embedding (E)"),  # the embedding twice
    ("tEt*7|t*8|t*8|t*8L", "begin with the embedding (E)"),  # a layer before the embedding
])
def test_a_layout_without_one_embedding_first_and_one_loss_last_is_refused(capsys, layout, says):
    """Each layout was accepted (placed as if it began E and ended L, once each); Megatron-Core
    asserts the flattened layout's first entry is the embedding and its last the loss, each once."""
    from symbolic_cost.models import Training
    refused(capsys, ["summary", "--preset", "llama-2-7b", "--set", "p=4", "n_micro=8", "--pipeline-layout", layout],
            "--pipeline-layout", says)
    refusal(lambda: Training(p=4, pipeline_layout=layout), "pipeline_layout")


def test_multi_token_prediction_modules_in_a_layout_are_the_models_count(capsys):
    """``...t*8mL`` on llama-2-7b (no multi-token prediction) was accepted and the ``m`` ignored;
    two ``m`` on DeepSeek-V3 (one module) were too, and a layer after the ``m``.  Megatron-Core
    asserts the layout's ``m``s number ``mtp_num_layers`` and come after every layer."""
    refused(capsys, ["summary", "--preset", "llama-2-7b", "--set", "p=4", "n_micro=8", "--pipeline-layout",
                     "Et*8|t*8|t*8|t*8mL"], "--pipeline-layout", "has 0", "ignored")
    v3 = ["summary", "--hf-config", str(HF / "DeepSeek-V3.json"), "--set", "l=4096", "p=4", "n_micro=8",
          "ep=8", "etp=1", "d=8", "--pipeline-layout"]
    refused(capsys, v3 + ["Et*16|t*15|t*15|t*15mmL"], "--pipeline-layout", "places 2", "has 1")
    refused(capsys, v3 + ["Et*16|t*15|t*15|t*14mtL"], "--pipeline-layout", "after a multi-token-prediction")


# options whose refusals did not name them, or that were ignored


@pytest.mark.parametrize("argv", [
    ["--fp8-16bit-layers", "1", "1"],                             # no FP8 recipe
    ["--fp8", "delayed", "--fp8-16bit-layers", "1", "1"],        # delayed scaling keeps none
    ["--fp8", "tensorwise", "--fp8-16bit-layers", "33", "0"],    # 33 of 32 layers
    ["--fp8", "tensorwise", "--fp8-16bit-layers", "0", "33"],
])
def test_refused_sixteen_bit_layers_name_their_option(capsys, argv):
    """Each refusal named ``first_layers_16bit`` (or ``last_...``), the ``Training`` field, and not
    the option typed, ``--fp8-16bit-layers``: the command line added the option only where its
    name is the field's with dashes."""
    refused(capsys, ["summary", "--preset", "llama-2-7b", "--set", "d=8", *argv], "--fp8-16bit-layers")


def test_refused_no_reshard_after_forward_names_its_option(capsys):
    """``--no-reshard-after-forward`` with ZeRO-1 was refused naming ``reshard_after_forward=False``
    only."""
    refused(capsys, ["summary", "--preset", "gpt2", "--set", "d=8", "--zero", "1", "--no-reshard-after-forward"],
            "(--no-reshard-after-forward)")


def test_no_double_quant_beside_a_base_that_is_not_nf4_is_refused(capsys):
    """``--lora-rank 8 --no-double-quant`` (a 16-bit base, the default) ran as if the option were
    not there: double quantisation quantises an nf4 base's block scales, and no other base has
    them.  With ``--lora-base nf4`` it still changes the base's bytes."""
    from symbolic_cost.cli import main
    base = ["summary", "--preset", "llama-2-7b", "--set", "d=8", "--lora-rank", "8"]
    for other in ("16-bit", "fp32", "int8"):
        refused(capsys, base + ["--lora-base", other, "--no-double-quant"], "--no-double-quant", "nf4")
    refused(capsys, base + ["--no-double-quant"], "--no-double-quant")
    assert main(base + ["--lora-base", "nf4", "--no-double-quant", "--json"]) == 0
    capsys.readouterr()


# systems


@pytest.mark.parametrize("field", ["hbm_capacity", "nvlink_size"])
def test_a_system_file_past_2_53_bytes_or_devices_is_refused(capsys, tmp_path, field):
    """A system file of ``hbm_capacity`` 2**60 (an exbibyte a device) or ``nvlink_size`` 2**60 (an
    NVLink domain of 10**18 devices) was accepted and a summary printed: a count is at most 2**53,
    as every size the command line takes (``checks.LARGEST_COUNT``)."""
    import json
    from symbolic_cost.timing.hardware import SYSTEMS
    import symbolic_cost.timing
    data = json.loads((Path(symbolic_cost.timing.__file__).parent / "system_files" / "h100.json").read_text())
    data.update(name="huge", **{field: 2**60})
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(data))
    refused(capsys, ["summary", "--preset", "gpt2", "--set", "d=8", "--system-file", str(path)], field, "2**53")
    refusal(lambda: SYSTEMS["h100"].but(**{field: 2**53 + 1}), field)
    assert SYSTEMS["h100"].but(**{field: 2**53}).hbm_capacity > 0


def test_the_flex_dispatcher_on_one_expert_rank_is_refused(capsys):
    """``--dispatcher flex`` on Mixtral with ``ep = etp = 1`` (the default) ran as the all-to-all
    dispatcher would, nothing dispatched; a sweep over ``ep=1,2,4,8`` took it at ``ep = 1`` too.
    Megatron-Core's flex dispatcher asserts ``TPxEP > 1`` (its expert tensor-parallel group times
    the expert-parallel one)."""
    from symbolic_cost.blocks.wiring import Experts, check_dispatcher
    base = ["--hf-config", MIXTRAL, "--set", "l=4096", "d=8", "--dispatcher", "flex"]
    refused(capsys, ["summary", *base], "--dispatcher", "TPxEP > 1")
    refused(capsys, ["sweep", *base, "--set", "etp=1", "--grid", "ep=1,2,4,8"], "--grid at ep=1", "--dispatcher")
    refusal(lambda: check_dispatcher(Experts(ep=1, etp=1, dispatcher="flex")), "dispatcher")
    check_dispatcher(Experts(ep=1, etp=2, dispatcher="flex"))
    check_dispatcher(Experts(ep=2, dispatcher="flex"))


def test_the_bubble_prints_as_the_other_figures_do(capsys):
    """``--set p=2 n_micro=100000`` printed the bubble as Python's float repr,
    ``9.99990000099999e-06``, beside figures of four significant digits: the 1F1B bubble
    ``(p - 1) / (n + p - 1)`` = 1/100001, shown as ``1e-05``."""
    from symbolic_cost.cli import main
    assert main(["summary", "--preset", "gpt2", "--set", "p=2", "n_micro=100000"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("pipeline bubble"))
    assert line.endswith(f": {1 / 100001:.4g}") and line.endswith(": 1e-05")


# a framework file beside the options it decides


def test_a_deepspeed_stage_auto_takes_the_zero_typed(capsys, tmp_path):
    """A DeepSpeed JSON of ``"stage": "auto"`` (the Trainer fills it) was refused with "give --zero"
    whatever ``--zero`` was given: ``--zero`` did not note that it was typed.  Now ``--zero 2``
    fills it."""
    import json
    from symbolic_cost.cli import main
    path = tmp_path / "auto.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": "auto"}}))
    base = ["summary", "--hf-config", str(HF / "Llama-3.2-1B.json"), "--deepspeed", str(path), "--devices", "8",
            "--set", "l=2048"]
    refused(capsys, base, "give --zero")
    assert main(base + ["--zero", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"]["zero"] == 2


@pytest.mark.parametrize("typed", [["--zero", "0"], ["--offload", "none"]])
def test_an_option_typed_at_its_default_beside_a_file_that_decides_it_is_refused(capsys, typed):
    """``--zero 0`` (or ``--offload none``) beside a ZeRO-2 DeepSpeed JSON with CPU offload, or
    beside a torchtitan TOML of FSDP, ran at the file's ZeRO-2 (ZeRO-3) as if it were not typed;
    away from the default (``--zero 1``) it was refused.  Typed, it is refused either way."""
    deepspeed = ["--hf-config", str(HF / "Llama-3.2-1B.json"), "--deepspeed",
                 str(HF.parent / "framework_inputs" / "ds_zero2_cpu_offload_config.json"), "--set", "l=2048"]
    titan = ["--torchtitan", str(HF.parent / "framework_inputs" / "llama3_8b.toml")]
    for files in (deepspeed, titan):
        refused(capsys, ["summary", *files, "--devices", "8", *typed], typed[0], "decide")


def test_an_imbalance_beside_a_capacity_factor_is_refused(capsys):
    """``--capacity-factor 1 --expert-imbalance 2`` on Mixtral (ep 8) printed the busiest device's
    all-to-all of the capacity alone (0.875 GiB a layer's pass, as without the imbalance) and a job
    total halved by the imbalance (28 GiB against 56): a capacity pads every expert's rows to
    ``ceil(C t k / E)``, so every rank receives the busiest rank's rows."""
    from symbolic_cost.models import Training
    refused(capsys, ["summary", "--hf-config", MIXTRAL, "--set", "l=4096", "m1=2", "s1=2", "d=32", "ep=8", "etp=1",
                     "--capacity-factor", "1", "--expert-imbalance", "2"], "--expert-imbalance", "capacity_factor")
    refusal(lambda: Training(ep=8, capacity_factor=1, expert_imbalance=2), "expert_imbalance")
    assert Training(ep=8, capacity_factor=1).expert_imbalance == 1


@pytest.mark.parametrize("typed", [["--recompute", "none"], ["--optimizer", "adam"], ["--loss-chunks", "1"],
                                   ["--schedule", "1f1b"]])
def test_a_torchtitan_setting_typed_at_its_default_is_refused(capsys, typed):
    """``--recompute none`` beside llama3_8b.toml (op-level recomputation) ran with the file's
    ``recompute=op``; ``--optimizer adam``, ``--loss-chunks 1`` and ``--schedule 1f1b`` were dropped
    the same way where the file says otherwise.  The TOML decides them: typed, they are refused."""
    refused(capsys, ["summary", "--torchtitan", str(HF.parent / "framework_inputs" / "llama3_8b.toml"), "--devices",
                     "64", *typed], typed[0], "decide")
