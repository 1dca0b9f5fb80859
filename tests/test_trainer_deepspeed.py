"""A Hugging Face Trainer run with a DeepSpeed config (``--hf-training-args`` with ``--deepspeed``;
``models.trainer_deepspeed``): the config's ``"auto"`` values are the TrainingArguments', a value
set in both must agree, as transformers' ``HfTrainerDeepSpeedConfig.trainer_config_process`` rules
(the oracle: the installed transformers fills the same config the same way).  The DeepSpeed config
is LLaMA-Factory's published ZeRO-3 file, unchanged (``framework_inputs/PROVENANCE.md``)."""

import json
import pathlib

import pytest

from symbolic_cost.cli import main

INPUTS = pathlib.Path(__file__).resolve().parent / "framework_inputs"
Z3 = INPUTS / "llamafactory_ds_z3_config.json"
LLAMA3_8B = 8_030_261_248


def _args(tmp_path, **fields) -> str:
    path = tmp_path / "training_args.json"
    path.write_text(json.dumps({"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4, "bf16": True,
                                "gradient_checkpointing": True, **fields}))
    return str(path)


def _config(tmp_path, **changes) -> str:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({**json.loads(Z3.read_text()), **changes}))
    return str(path)


def _run(capsys, *words):
    code = main(["summary", "--preset", "llama-3-8b", "--set", "l=2048", *words, "--json"])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err)


def test_the_autos_are_the_training_arguments(tmp_path, capsys):
    """2 sequences a micro-batch, 4 accumulated, bf16 from the TrainingArguments; ZeRO-3 without
    overlap_comm from the config: the 16-bit weights and gradients and Adam's 12 bytes of fp32
    state sharded 8 ways, and the gathers and reductions exposed."""
    code, got = _run(capsys, "--hf-training-args", _args(tmp_path, deepspeed="examples/deepspeed/ds_z3_config.json"),
                     "--deepspeed", str(Z3), "--devices", "8")
    assert code == 0, got
    layout = got["layout"]
    assert (layout["b"], layout["micro_batches"], layout["d"], layout["zero"], layout["precision"]) == (2, 4, 8, 3, "bf16")
    assert layout["recompute"] == "full" and layout["overlap"] == [] and layout["optimizer"] == "adamw"
    assert got["weight_bytes"] * 8 == 2 * LLAMA3_8B and got["optimizer_bytes"] * 8 == 12 * LLAMA3_8B
    assert any("--deepspeed's llamafactory_ds_z3_config" in note for note in got["notes"])


def test_transformers_fills_the_config_the_same_way():
    """The outside oracle: transformers' own filling (``HfTrainerDeepSpeedConfig.trainer_config_process``
    and ``fill_match``, over accelerate's ``HfDeepSpeedConfig``) from the same arguments gives the
    micro-batch, accumulation and precision the reader took.  transformers builds that class on
    accelerate's only where DeepSpeed is installed (its build needs a GPU toolchain), so the same
    methods are put on accelerate's class here."""
    pytest.importorskip("accelerate")
    transformers = pytest.importorskip("transformers")
    from accelerate.utils.deepspeed import HfDeepSpeedConfig
    from transformers.integrations import deepspeed as integration
    trainer_config = vars(integration.HfTrainerDeepSpeedConfig)

    class Filled(HfDeepSpeedConfig):
        fill_match, fill_only = trainer_config["fill_match"], trainer_config["fill_only"]
        trainer_config_process = trainer_config["trainer_config_process"]
        mismatches = []

    class Args:                 # the fields trainer_config_process reads, as the JSON above gives them
        world_size, per_device_train_batch_size, gradient_accumulation_steps = 8, 2, 4
        max_grad_norm, learning_rate, adam_beta1, adam_beta2, adam_epsilon, weight_decay = 1.0, 1e-5, 0.9, 0.999, 1e-8, 0.0
        save_on_each_node, fp16, fp16_full_eval, bf16, bf16_full_eval = False, False, False, True, False
    config = Filled(json.loads(Z3.read_text()))
    config.trainer_config_process(Args())
    assert transformers.__version__ and not config.mismatches
    filled = config.config
    assert (filled["train_micro_batch_size_per_gpu"], filled["gradient_accumulation_steps"],
            filled["train_batch_size"]) == (2, 4, 64)
    assert (filled["bf16"]["enabled"], filled["fp16"]["enabled"]) == (True, False)


@pytest.mark.parametrize("changes, refused", [
    (dict(train_micro_batch_size_per_gpu=4), "train_micro_batch_size_per_gpu 4"),
    (dict(gradient_accumulation_steps=1), "gradient_accumulation_steps 1"),
    (dict(bf16={"enabled": False}, fp16={"enabled": True}), "the DeepSpeed config runs fp16"),
])
def test_a_mismatch_is_refused_as_transformers_refuses_it(tmp_path, capsys, changes, refused):
    code, err = _run(capsys, "--hf-training-args", _args(tmp_path), "--deepspeed", _config(tmp_path, **changes),
                     "--devices", "8")
    assert code == 2 and refused in err


def test_a_config_without_a_precision_section_runs_the_trainers(tmp_path, capsys):
    """accelerate adds ``bf16: {enabled: true}`` to a config that has neither section
    (``DeepSpeedPlugin.set_mixed_precision``)."""
    config = json.loads(Z3.read_text())
    del config["fp16"], config["bf16"]
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(config))
    code, got = _run(capsys, "--hf-training-args", _args(tmp_path), "--deepspeed", str(path), "--devices", "8")
    assert code == 0 and got["layout"]["precision"] == "bf16"


def test_the_configs_optimizer_section_builds_the_optimizer(tmp_path, capsys):
    """With an ``optimizer`` section DeepSpeed builds the optimizer, not the Trainer's ``optim``."""
    code, got = _run(capsys, "--hf-training-args", _args(tmp_path, optim="adafactor"), "--deepspeed",
                     _config(tmp_path, optimizer={"type": "AdamW", "params": {"lr": "auto"}}), "--devices", "8")
    assert code == 0 and got["layout"]["optimizer"] == "adamw"
    assert any("optimizer section replaces it" in note for note in got["notes"])


def test_a_named_config_without_the_file_is_refused(tmp_path, capsys):
    code, err = _run(capsys, "--hf-training-args", _args(tmp_path, deepspeed="ds_z3.json"), "--devices", "8")
    assert code == 2 and "give that DeepSpeed config with --deepspeed beside --hf-training-args" in err


def test_fsdp_beside_a_deepspeed_config_is_refused(tmp_path, capsys):
    code, err = _run(capsys, "--hf-training-args", _args(tmp_path, fsdp="full_shard"), "--deepspeed", str(Z3),
                     "--devices", "8")
    assert code == 2 and "transformers' Trainer refuses both" in err
