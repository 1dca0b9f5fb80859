"""LLaMA-Factory's training YAMLs (``models.llamafactory``), read with ``--hf-training-args`` as
``llamafactory-cli train`` runs them.  The files are LLaMA-Factory's examples, unchanged
(``framework_inputs/PROVENANCE.md``), read here for Qwen3-0.6B's published config (the examples
name Qwen3-4B; the reader counts the model given beside the file).  Every number is counted by hand
from the file's fields, LLaMA-Factory's defaults (hparams at ff6d4d1: ``lora_rank`` 8, ``lora_target``
all, ``cutoff_len`` 2048, gradient checkpointing on) and Qwen3-0.6B's sizes: hidden 1,024, 28
layers, 16 query and 8 key/value heads of 128, MLP 3,072, 151,936 tied embeddings, so
28 x 15,730,944 + 155,582,464 + 1,024 = 596,049,920 parameters."""

import json
import pathlib

import pytest

from symbolic_cost.cli import main

INPUTS = pathlib.Path(__file__).resolve().parent / "framework_inputs"
QWEN3 = ["--hf-config", str(pathlib.Path(__file__).resolve().parent / "hf_configs" / "Qwen3-0.6B.json")]
P = 596_049_920
PROJECTIONS = [(1024, 2048), (1024, 1024), (1024, 1024), (2048, 1024), (1024, 3072), (1024, 3072), (3072, 1024)]
"""Qwen3-0.6B's seven linear layers of a block, ``in -> out``: what LoRA's ``all`` adapts."""
pytest.importorskip("yaml", reason="the configurations are YAML (pip install 'symbolic_cost[yaml]')")


def _file(name: str) -> str:
    return str(INPUTS / f"llamafactory_{name}.yaml")


def _changed(tmp_path, name: str, drop=(), **fields) -> str:
    import yaml
    config = yaml.safe_load(pathlib.Path(_file(name)).read_text())
    config.update(fields)
    for key in drop:
        del config[key]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _json(capsys, *words):
    assert main(["summary", *QWEN3, *words, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _error(capsys, *words) -> str:
    assert main(["summary", *QWEN3, *words]) == 2
    return capsys.readouterr().err


def test_lora_sft_is_the_typed_lora(capsys):
    """qwen3_lora_sft.yaml: one sequence a micro-batch, 8 accumulated, 2,048 tokens (cutoff_len),
    bf16, LoRA rank 8 on the seven projections over a 16-bit base, every layer recomputed; the
    adapters hold 28 x 8 x sum(in + out) = 5,046,272 parameters."""
    got = _json(capsys, "--hf-training-args", _file("qwen3_lora_sft"), "--devices", "8")
    assert got["trainable_parameters"] == 28 * sum(8 * (k + n) for k, n in PROJECTIONS) == 5_046_272
    assert got["parameters"] == P + 5_046_272
    typed = _json(capsys, "--set", "b=1", "n_micro=8", "l=2048", "d=8", "--recompute", "full", "--precision", "bf16",
                  "--overlap", "grad", "--optimizer", "adamw", "--flash", "--attention-kernel", "flash-attention-2",
                  "--lora-rank", "8", "--lora-targets", "q,k,v,o,gate,up,down")
    assert {k: v for k, v in got.items() if k != "notes"} == {k: v for k, v in typed.items() if k != "notes"}
    assert any("LLaMA-Factory's stage sft, lora fine-tuning" in note for note in got["notes"])


def test_left_out_fields_take_llamafactorys_defaults(tmp_path, capsys):
    """Without lora_rank, lora_target, cutoff_len and flash_attn the file trains what LLaMA-Factory's
    dataclasses default to (hparams at ff6d4d1: rank 8 on all, 2,048 tokens, transformers' sdpa):
    the same as the example that states them."""
    path = _changed(tmp_path, "qwen3_lora_sft", drop=("lora_rank", "lora_target", "cutoff_len"))
    stated = _json(capsys, "--hf-training-args", _file("qwen3_lora_sft"), "--devices", "8")
    got = _json(capsys, "--hf-training-args", path, "--devices", "8")
    assert got["trainable_parameters"] == 5_046_272 and got["layout"] == stated["layout"]


def test_lora_dpo_runs_pairs_and_the_base_as_reference(capsys):
    """qwen3_lora_dpo.yaml: stage dpo, pref_loss sigmoid, so a reference (use_ref_model); under LoRA
    it is the base with the adapters off (create_ref_model returns none).  Two sequences an example;
    the reference's forward is the trained one's less the adapters': per token and layer,
    r (2 in - 1) + out (2r - 1) + 2 out FLOPs an adapter (an m x k x n product is m n (2k - 1))."""
    got = _json(capsys, "--hf-training-args", _file("qwen3_lora_dpo"), "--devices", "8")
    layout = got["layout"]
    assert (layout["b"], layout["micro_batches"], layout["reference"]) == (2, 8, "adapters")
    adapters = sum(8 * (2 * k - 1) + n * (2 * 8 - 1) + 2 * n for k, n in PROJECTIONS)
    assert got["flops_fwd"] - got["flops_reference"] == adapters * 28 * (2 * 2048 * 8)


def test_full_sft_under_its_zero3_config(capsys):
    """qwen3_full_sft.yaml names examples/deepspeed/ds_z3_config.json (given with --deepspeed): ZeRO-3
    over 8, "auto" batch and bf16 from the YAML; the trainable parameters in fp32 under ZeRO-3
    (DeepSpeed's partitions), 2 + 2 + 12 bytes a parameter sharded 8 ways."""
    got = _json(capsys, "--hf-training-args", _file("qwen3_full_sft"), "--deepspeed",
                str(INPUTS / "llamafactory_ds_z3_config.json"), "--devices", "8")
    layout = got["layout"]
    assert (layout["b"], layout["micro_batches"], layout["zero"], layout["recompute"]) == (1, 2, 3, "full")
    assert got["weight_bytes"] * 8 == 2 * P and got["optimizer_bytes"] * 8 == 12 * P
    assert got["trainable_parameters"] == P


def test_full_dpo_holds_a_16bit_reference_copy(tmp_path, capsys):
    """The DPO example as a full fine-tune (finetuning_type full): the reference is a second model
    loaded as the first (the checkpoint's 16-bit dtype), sharded by ZeRO-3 as the weights are."""
    path = _changed(tmp_path, "qwen3_lora_dpo", finetuning_type="full")
    got = _json(capsys, "--hf-training-args", path, "--deepspeed", str(INPUTS / "llamafactory_ds_z3_config.json"),
                "--devices", "8")
    assert got["layout"]["reference"] == "16-bit"
    assert got["weight_bytes"] * 8 == (2 + 2) * P


@pytest.mark.parametrize("loss", ["orpo", "simpo"])
def test_reference_free_losses_have_no_reference(tmp_path, capsys, loss):
    got = _json(capsys, "--hf-training-args", _changed(tmp_path, "qwen3_lora_dpo", pref_loss=loss), "--devices", "8")
    assert got["layout"]["b"] == 2 and "reference" not in got["layout"]


def test_qlora_on_the_fly_is_nf4_with_double_quantization(capsys):
    """qwen3_lora_sft_otfq.yaml: quantization_bit 4, bitsandbytes, nf4 and double quantisation by
    LLaMA-Factory's defaults: the same as the typed QLoRA."""
    got = _json(capsys, "--hf-training-args", _file("qwen3_lora_sft_otfq"), "--devices", "8")
    typed = _json(capsys, "--set", "b=1", "n_micro=8", "l=2048", "d=8", "--recompute", "full", "--precision", "bf16",
                  "--overlap", "grad", "--optimizer", "adamw", "--flash", "--attention-kernel", "flash-attention-2",
                  "--lora-rank", "8", "--lora-targets", "q,k,v,o,gate,up,down", "--lora-base", "nf4")
    assert got["weight_bytes"] == typed["weight_bytes"] and got["trainable_parameters"] == typed["trainable_parameters"]


@pytest.mark.parametrize("name, changes, refused", [
    ("qwen3_lora_kto", {}, "stage kto"),
    ("llama3_lora_sft_awq", {}, "quantized with AWQ"),
    ("qwen3_lora_sft", {"do_train": False}, "not a training run"),
    ("qwen3_lora_sft", {"finetuning_type": "freeze"}, "finetuning_type freeze"),
    ("qwen3_lora_sft", {"tensor_model_parallel_size": 2}, "Megatron backends"),
    ("qwen3_lora_sft", {"image_max_pixels": 262144}, "vision or audio"),
    ("qwen3_lora_sft", {"use_galore": True}, "GaLore"),
    ("qwen3_lora_sft", {"use_eaft_loss": True}, "EAFT"),
    ("qwen3_lora_sft", {"use_dft_loss": True, "enable_liger_kernel": True}, "use_dft_loss with enable_liger_kernel"),
    ("qwen3_lora_sft", {"quantization_bit": 4, "quantization_method": "hqq"}, "only bitsandbytes"),
])
def test_refusals_name_the_field(tmp_path, capsys, name, changes, refused):
    path = _changed(tmp_path, name, **changes) if changes else _file(name)
    err = _error(capsys, "--hf-training-args", path, "--devices", "8")
    assert refused in err and len(err.strip().splitlines()) == 1


def test_the_stage_decides_the_trainer(capsys):
    assert "stage decides the trainer" in _error(capsys, "--hf-training-args", _file("qwen3_lora_sft"),
                                                 "--trl-trainer", "dpo", "--devices", "8")


@pytest.mark.parametrize("field, value", [
    ("cutoff_len", "abc"), ("lora_rank", -1), ("lora_target", ["q_proj", "v_proj"]), ("stage", ["sft"]),
    ("pref_loss", 5), ("pref_loss", "dpo"), ("finetuning_type", None), ("pure_bf16", "yes"),
    ("disable_gradient_checkpointing", 1), ("flash_attn", 3), ("quantization_bit", "4"),
])
def test_a_value_of_the_wrong_kind_is_refused_naming_its_field(tmp_path, capsys, field, value):
    """Values LLaMA-Factory's dataclasses would not hold end in a refusal naming the field, not in a
    wrong answer or a traceback."""
    err = _error(capsys, "--hf-training-args", _changed(tmp_path, "qwen3_lora_dpo", **{field: value}), "--devices", "8")
    assert field in err and len(err.strip().splitlines()) == 1


def test_the_v1_format_is_named_as_such(tmp_path, capsys):
    """LLaMA-Factory's examples/v1/train_lora/train_lora_sft.yaml (ff6d4d1): its second format, refused as
    a whole, naming it (not as an unknown TrainingArguments field, nor as axolotl's)."""
    path = tmp_path / "train_lora_sft.yaml"
    path.write_text("model: Qwen/Qwen3-4B\nmodel_class: llm\npeft_config:\n  name: lora\n  r: 16\n"
                    "dist_config:\n  name: fsdp2\ntrain_dataset: data/v1_sft_demo.yaml\noutput_dir: ./outputs\n"
                    "micro_batch_size: 1\ncutoff_len: 2048\nlearning_rate: 1.0e-4\nmax_steps: 10\n")
    assert "LLaMA-Factory's v1 configuration" in _error(capsys, "--hf-training-args", str(path), "--devices", "8")


def test_dfts_loss_is_transformers_loss_weighed_a_token(tmp_path, capsys):
    """``use_dft_loss`` (LLaMA-Factory's ``dft_loss_func`` at ff6d4d1: ``logits.float()`` and a
    token-wise ``cross_entropy``, as transformers' loss, then each token's loss times its
    probability without gradient): the same tensors as the default loss, so the same counts, noted;
    stage dpo's trainer does not run it (noted)."""
    plain = _json(capsys, "--hf-training-args", _file("qwen3_lora_sft"), "--devices", "8")
    dft = _json(capsys, "--hf-training-args", _changed(tmp_path, "qwen3_lora_sft", use_dft_loss=True), "--devices", "8")
    assert any(note.startswith("use_dft_loss: each token's loss") for note in dft["notes"])
    dft.pop("notes"), plain.pop("notes")
    assert dft == plain
    dpo = _json(capsys, "--hf-training-args", _changed(tmp_path, "qwen3_lora_dpo", use_dft_loss=True), "--devices", "8")
    assert any("stage dpo ignores it" in note for note in dpo["notes"])


@pytest.mark.parametrize("dtype, base_bytes", [("bfloat16", 2), ("float32", 4), (None, 2)])
def test_the_lora_base_loads_in_the_checkpoints_dtype(tmp_path, capsys, dtype, base_bytes):
    """LLaMA-Factory loads the model with torch_dtype "auto" (model/loader.py at ff6d4d1), so the frozen base is
    the checkpoint's dtype as the model's config.json states it, whatever bf16 says (that is the autocast's): 2 or
    4 bytes a parameter of Qwen3-0.6B, the adapters' weights in 2 (their fp32 copy is the optimizer's); a
    config.json stating none: bfloat16, noted.  TRL's reader counts torch_dtype auto the same way
    (tests/test_trl_recipes.py)."""
    config = json.loads(pathlib.Path(QWEN3[1]).read_text())
    config.pop("torch_dtype", None)
    if dtype is not None:
        config["torch_dtype"] = dtype
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["summary", "--hf-config", str(tmp_path / "config.json"), "--hf-training-args",
                 _file("qwen3_lora_sft"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    adapters = got["trainable_parameters"]
    assert got["parameters"] - adapters == P
    assert got["weight_bytes"] == base_bytes * P + 2 * adapters
    said = f"dtype, {dtype} (the model's config.json)" if dtype else "which the model given does not state"
    assert any(said in note for note in got["notes"])


def test_a_full_dpo_reference_of_an_fp32_checkpoint_is_fp32(tmp_path, capsys):
    """The reference copy loads with torch_dtype "auto" as well: an fp32 checkpoint gives an fp32 reference."""
    config = json.loads(pathlib.Path(QWEN3[1]).read_text())
    config["torch_dtype"] = "float32"
    (tmp_path / "config.json").write_text(json.dumps(config))
    path = _changed(tmp_path, "qwen3_lora_dpo", finetuning_type="full")
    assert main(["summary", "--hf-config", str(tmp_path / "config.json"), "--hf-training-args", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"]["reference"] == "fp32"


def test_a_reward_stage_is_refused_for_its_lm_head_without_backward(tmp_path, capsys):
    """stage rm loads TRL's AutoModelForCausalLMWithValueHead (LLaMA-Factory's model/loader.py at ff6d4d1): the
    causal LM's forward with its logits, which the pairwise loss of rm/trainer.py does not use, beside a value
    head; the refusal says so."""
    err = _error(capsys, "--hf-training-args", _changed(tmp_path, "qwen3_lora_sft", stage="rm"))
    assert "stage rm" in err and "AutoModelForCausalLMWithValueHead" in err and len(err.strip().splitlines()) == 1
