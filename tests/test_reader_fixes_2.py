"""Framework readers against published files a second audit found misread: Megatron-Bridge's
NVFP4 recipes (``fp4_param_gather``: FP4 primary weights), an accelerate DeepSpeed launch whose
``gradient_accumulation_steps`` disagrees with the TrainingArguments', torchtitan's DeepSeek-V3 TOMLs
(FlexAttention with a block-causal mask), a DeepSpeed config's ``stage3_param_persistence_threshold`` 0,
LLaMA-Factory's QLoRA (the 4-bit base named) and PiSSA (LoRA's step).

The files are copied unchanged (``framework_inputs/PROVENANCE.md``); the Bridge recipes are
``bridge_recipes.json``'s (Megatron-Bridge 067f987df); the torchtitan TOMLs are those of 477784a^.  Oracles:
the frameworks' sources at those commits (file and line with each test), counts by hand, refusals by the
construct they name."""

import json
import pathlib

import pytest

from symbolic_cost.models import bridge_recipes
from symbolic_cost.models.megatron_bridge_keys import Container
from symbolic_cost.models.megatron_precision import fp4_primary_weights, precision
from symbolic_cost.checks import InputError
from summary_calls import summary_error, summary_json

pytest.importorskip("yaml", reason="the configurations are YAML (pip install 'symbolic_cost[yaml]')")

TESTS = pathlib.Path(__file__).resolve().parent
INPUTS = TESTS / "framework_inputs"
HF = TESTS / "hf_configs"
TOML = INPUTS / "torchtitan_toml_477784a"


# 1. Megatron-Bridge: fp4_param_gather sets fp4_param (src/megatron/bridge/training/mixed_precision.py at 067f987df:
# __setattr__ keeps the two equal, lines 89-95; finalize sets fp4_param from fp4_param_gather when None, 102-104;
# bf16_with_nvfp4_mixed sets fp4_param_gather=True, 405-417), and Megatron-Core's fp4_param keeps the weights in FP4.

def _gathered(name: str) -> bool:
    """Whether recipe ``name``'s ``mixed_precision`` sets ``fp4_param_gather`` true (read from the data file)."""
    mixed = bridge_recipes.recipe(name)["config"].get("mixed_precision")
    return isinstance(mixed, dict) and mixed.get("fp4_param_gather") is True


@pytest.mark.parametrize("name, model", [("llama3_8b_pretrain_8gpu_b200_nvfp4_config", "Llama-3.1-8B.json"),
                                         ("qwen3_30b_a3b_pretrain_8gpu_b200_nvfp4_config", "Qwen3-30B-A3B.json")])
def test_a_bridge_nvfp4_recipe_keeping_fp4_weights_is_refused(capsys, name, model):
    """Both recipes build bf16_with_nvfp4_mixed() (perf_recipes/llama/b200/llama3.py, qwen/b200/qwen3_moe.py): FP4
    primary weights, which the library does not model; it counted bf16 weights and FP4 copies before."""
    assert _gathered(name)
    err = summary_error(capsys, "--megatron-bridge-recipe", name, "--hf-config", str(HF / model), "--system", "b200")
    assert "mixed_precision.fp4_param_gather = True" in err and "FP4 primary weights are not modelled" in err


def test_the_41_recipes_with_fp4_param_gather_are_the_ones_refused():
    """41 recipes of bridge_recipes.json set fp4_param_gather true (the audit's count); each is refused by the rule,
    and a recipe that sets it false with fp4 e2m1 (deepseek_v3_pretrain_256gpu_b200_nvfp4_config:
    perf_recipes/deepseek/b200/deepseek_v3.py:181-182 set fp4_param and fp4_param_gather False) reads as nvfp4."""
    gathered = [n for n in bridge_recipes.names() if _gathered(n)]
    assert len(gathered) == 41
    for name in gathered:
        with pytest.raises(InputError, match="fp4_param_gather"):
            fp4_primary_weights(Container({"mixed_precision": bridge_recipes.recipe(name)["config"]["mixed_precision"]},
                                          name))
    kept = bridge_recipes.recipe("deepseek_v3_pretrain_256gpu_b200_nvfp4_config")["config"]["mixed_precision"]
    assert (kept["fp4"], kept["fp4_param_gather"], kept.get("fp4_param")) == ("e2m1", False, False)
    c = Container({"mixed_precision": kept}, "deepseek")
    fp4_primary_weights(c)
    assert precision(c)["fp8"] == "nvfp4"


def test_an_fp4_gather_in_a_dumped_configuration_is_refused(tmp_path, capsys):
    """A dump (the 1B tutorial's, framework_inputs/megatron_bridge_llama32_1b.yaml) with fp4 e2m1: fp4_param_gather
    true alone is refused, as is ddp.fp4_param_gather (Megatron-Core's DistributedDataParallelConfig, set by the
    mixed precision's setup); fp4_param and fp4_param_gather that disagree are refused naming both."""
    text = (INPUTS / "megatron_bridge_llama32_1b.yaml").read_text().replace("  fp4: null\n", "  fp4: e2m1\n", 1)
    mixed = "mixed_precision:\n"
    assert text.count(mixed) == 1 and text.count("\nddp:\n") == 1
    path = tmp_path / "run.yaml"
    for inserted, where in (("  fp4_param_gather: true\n", mixed), ("  fp4_param_gather: true\n", "\nddp:\n")):
        path.write_text(text.replace(where, where + inserted, 1))
        err = summary_error(capsys, "--nemo-recipe", str(path), "--devices", "8", "--system", "b200")
        assert "fp4_param_gather" in err and "FP4 primary weights" in err
    path.write_text(text.replace(mixed, mixed + "  fp4_param: false\n  fp4_param_gather: true\n", 1))
    assert "fp4_param False and fp4_param_gather True" in summary_error(capsys, "--nemo-recipe", str(path), "--devices", "8")
    path.write_text(text.replace(mixed, mixed + "  fp4_param_gather: false\n", 1))
    assert summary_json(capsys, "--nemo-recipe", str(path), "--devices", "8", "--system", "b200")["layout"]["fp8"] == "nvfp4"


# 2. An accelerate DeepSpeed launch and TrainingArguments: accelerate launch exports deepspeed_config's
# gradient_accumulation_steps (utils/launch.py:570); DeepSpeedPlugin() writes it, the micro-batch "auto" and
# set_mixed_precision's section into its config (utils/dataclasses.py:1229-1231, 1302-1323, 1415-1427, accelerate
# 1.15); transformers' trainer_config_process fills "auto" and records every other mismatch, which
# trainer_config_finalize refuses (integrations/deepspeed.py:108-186, 258-263, transformers 5.23).

SMOLLM = str(INPUTS / "handbook_smollm2_dpo_config.yaml")
ZERO1 = INPUTS / "trl_zero1.yaml"
LLAMA_1B = ["--hf-config", str(HF / "Llama-3.2-1B.json")]


def _launch(tmp_path, old: str, new: str) -> str:
    text = ZERO1.read_text()
    assert text.count(old) == 1
    path = tmp_path / "zero1.yaml"
    path.write_text(text.replace(old, new))
    return str(path)


def test_the_launch_configs_accumulation_against_the_recipes_is_refused(capsys):
    """TRL's zero1.yaml (gradient_accumulation_steps 1) with the handbook's SmolLM2 DPO recipe (8): transformers
    refuses the pair, so 8 never runs; the refusal names the key, both values and both files."""
    err = summary_error(capsys, *LLAMA_1B, "--hf-training-args", SMOLLM, "--trl-trainer", "dpo", "--accelerate", str(ZERO1))
    assert "gradient_accumulation_steps 1 of the accelerate config trl_zero1" in err
    assert "gradient_accumulation_steps 8 of the TrainingArguments handbook_smollm2_dpo_config" in err


def test_an_auto_or_equal_accumulation_takes_the_recipes(tmp_path, capsys):
    """Without the key accelerate writes "auto", which transformers fills with the recipe's 8; 8 in both agrees.  The
    recipe's per_device_train_batch_size 2, two sequences an example under DPO: b = 4."""
    for launch in (_launch(tmp_path, "  gradient_accumulation_steps: 1\n", ""),
                   _launch(tmp_path, "gradient_accumulation_steps: 1", "gradient_accumulation_steps: 8")):
        got = summary_json(capsys, *LLAMA_1B, "--hf-training-args", SMOLLM, "--trl-trainer", "dpo", "--accelerate", launch)
        assert (got["layout"]["micro_batches"], got["layout"]["b"], got["layout"]["zero"]) == (8, 4, 1)


def test_a_bf16_launch_under_arguments_without_bf16_is_refused(tmp_path, capsys):
    """TrainingArguments (JSON, no TRL defaults) with bf16 unset: mixed_precision comes from the launch's
    ACCELERATE_MIXED_PRECISION (training_args.py:1614), set_mixed_precision writes bf16.enabled true, and fill_match
    compares it with bf16|bf16_full_eval false: refused.  bf16_full_eval true matches it (the run trains in bf16)."""
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"per_device_train_batch_size": 2}))
    err = summary_error(capsys, *LLAMA_1B, "--hf-training-args", str(args), "--accelerate", str(ZERO1))
    assert "bf16.enabled true of the accelerate config trl_zero1" in err and "bf16_full_eval false" in err
    args.write_text(json.dumps({"per_device_train_batch_size": 2, "bf16_full_eval": True}))
    got = summary_json(capsys, *LLAMA_1B, "--hf-training-args", str(args), "--accelerate", str(ZERO1))
    assert (got["layout"]["precision"], got["layout"]["micro_batches"]) == ("bf16", 1)


def test_a_clipping_mismatch_is_noted(tmp_path, capsys):
    """gradient_clipping 0.5 in the launch config against max_grad_norm's default 1.0: transformers refuses it too,
    but no count changes: a note."""
    launch = _launch(tmp_path, "  gradient_accumulation_steps: 1\n", "  gradient_accumulation_steps: 8\n"
                     "  gradient_clipping: 0.5\n")
    got = summary_json(capsys, *LLAMA_1B, "--hf-training-args", SMOLLM, "--trl-trainer", "dpo", "--accelerate", launch)
    assert any(n.startswith("gradient_clipping 0.5 of the accelerate config zero1") and "max_grad_norm 1.0" in n
               for n in got["notes"])


# 3. torchtitan's last TOML generation (9810191^): deepseek_v3's 16B, 236B and 671B are attn_type="flex",
# attn_mask_type="block_causal" (torchtitan/models/deepseek_v3/__init__.py:100-101, 127-128, 154-155; use_flex_attn
# since f738a03, 2025-08-22), its debug model and Qwen3's flavours ModelArgs' sdpa and causal
# (deepseek_v3/model/args.py:76-77, qwen3/model/args.py:39-40), GPT-OSS flex and causal (gpt_oss/model/args.py:66-67),
# Llama 4's _irope flex and block_causal (llama4/__init__.py:70-71, 86-87, 99-100).

MASK = "attention within each packed document"


def _flavour(tmp_path, model: str, flavor: str) -> str:
    path = tmp_path / f"{model}_{flavor}.toml"
    path.write_text(f'[model]\nname = "{model}"\nflavor = "{flavor}"\n[training]\nlocal_batch_size = 1\n'
                    'seq_len = 4096\n')
    return str(path)


def test_deepseek_v3_tomls_attend_by_flex_attention_block_causally(tmp_path, capsys):
    got = summary_json(capsys, "--torchtitan", str(TOML / "deepseek_v3_16b.toml"), "--devices", "8")
    assert got["layout"]["attention_kernel"] is None
    assert any("deepseek_v3 16B attends by FlexAttention" in n and "f738a03" in n for n in got["notes"])
    assert any(n.startswith(MASK) for n in got["notes"])
    assert not any("timed as flash-attention-2" in n for n in got["notes"])
    for flavor in ("236B", "671B"):
        notes = summary_json(capsys, "--torchtitan", _flavour(tmp_path, "deepseek_v3", flavor), "--devices", "512")["notes"]
        assert any(f"{flavor} attends by FlexAttention" in n for n in notes) and any(n.startswith(MASK) for n in notes)


def test_the_sdpa_and_causal_flavours_stay_so(tmp_path, capsys):
    """deepseek_v3's debug model and Qwen3 0.6B run SDPA (FlashAttention-2 first on Hopper, the default h100);
    GPT-OSS's debug model FlexAttention with a causal mask; Llama 4's debug _irope flex block-causally."""
    for path in (_flavour(tmp_path, "deepseek_v3", "debugmodel"), str(TOML / "qwen3_0.6b.toml")):
        got = summary_json(capsys, "--torchtitan", path, "--devices", "8")
        assert got["layout"]["attention_kernel"] == "flash-attention-2"
        assert not any(n.startswith(MASK) for n in got["notes"])
    oss = summary_json(capsys, "--torchtitan", str(TOML / "gpt_oss_debug_model.toml"), "--devices", "8")["notes"]
    assert any("attends by FlexAttention" in n for n in oss) and not any(n.startswith(MASK) for n in oss)
    irope = summary_json(capsys, "--torchtitan", _flavour(tmp_path, "llama4", "debugmodel_irope"), "--devices", "8")["notes"]
    assert any("attends by FlexAttention" in n for n in irope) and any(n.startswith(MASK) for n in irope)


# 4. Notes.  DeepSpeed's stage3_param_persistence_threshold (ZeRO config's param_persistence_threshold, default
# 1e5): DeepSpeedExamples 45b4b71's bf16_master_weight baseline sets 0.  LLaMA-Factory's quantization_bit 4 with
# bitsandbytes (model/model_utils/quantization.py at ff6d4d1: BitsAndBytesConfig with bnb_4bit_quant_type
# quantization_type, bnb_4bit_use_double_quant double_quantization).

BASELINE = INPUTS / "ds_bf16_master_weight_baseline.json"


def test_the_persistence_threshold_note_follows_the_file(tmp_path, capsys):
    words = (*LLAMA_1B, "--devices", "8", "--set", "l=2048")
    notes = summary_json(capsys, *words, "--deepspeed", str(BASELINE))["notes"]
    assert any("stage3_param_persistence_threshold 0: DeepSpeed keeps no parameter whole" in n for n in notes)
    assert not any("100,000" in n for n in notes)
    config = json.loads(BASELINE.read_text())
    path = tmp_path / "ds.json"
    for value, said in ((None, "100,000 elements by default"), (1e4, "10,000 elements, the file's")):
        if value is None:
            del config["zero_optimization"]["stage3_param_persistence_threshold"]
        else:
            config["zero_optimization"]["stage3_param_persistence_threshold"] = value
        path.write_text(json.dumps(config))
        assert any(said in n for n in summary_json(capsys, *words, "--deepspeed", str(path))["notes"])


QWEN3 = ["--hf-config", str(HF / "Qwen3-0.6B.json")]
BNB = INPUTS / "llamafactory_qwen3_lora_sft_bnb_npu.yaml"


def test_llamafactory_qlora_names_the_quantisation_it_counts(tmp_path, capsys):
    """qwen3_lora_sft_bnb_npu.yaml: quantization_bit 4, double_quantization false, on Qwen3-0.6B.  Its 28 blocks'
    linear weights (1024x2048 + 2 x 1024x1024 + 2048x1024 + 3 x 1024x3072 = 15,728,640 each) in NF4 with an fp32
    absmax per 64 (9/16 byte), the tied 151,936 x 1,024 table and the norms (28 x (2 x 1,024 + 2 x 128) + 1,024) in
    bf16, the rank-8 adapters (5,046,272) at 2 bytes: 569,114,624 bytes.  The note names the 4-bit base; without
    double_quantization (LLaMA-Factory's default true) it names the double quantisation."""
    got = summary_json(capsys, *QWEN3, "--hf-training-args", str(BNB), "--devices", "1")
    linear, norms = 28 * 15_728_640, 28 * (2 * 1024 + 2 * 128) + 1024
    assert got["trainable_parameters"] == 5_046_272
    assert got["weight_bytes"] == linear * 9 // 16 + 2 * (151936 * 1024 + norms) + 2 * 5_046_272 == 569_114_624
    assert any(n.startswith("quantization_bit 4 (bitsandbytes, nf4)") and "double_quantization false" in n
               for n in got["notes"])
    assert not any("frozen base taken as 16-bit" in n for n in got["notes"])
    path = tmp_path / "nested.yaml"
    path.write_text(BNB.read_text().replace("double_quantization: false\n", ""))
    notes = summary_json(capsys, *QWEN3, "--hf-training-args", str(path), "--devices", "1")["notes"]
    assert any("with double quantisation" in n for n in notes)


# 5. PiSSA (LLaMA-Factory ff6d4d1: hparams/finetuning_args.py:107-118 pissa_init, pissa_iter 16, pissa_convert;
# model/adapter.py:288-294 PEFT's init_lora_weights "pissa_niter_16"; train/callbacks.py:132-170 the conversion when
# saving; refusals at finetuning_args.py:621-622, 634-635 and hparams/parser.py:239-240, 495-496).

PISSA = INPUTS / "llamafactory_llama3_lora_sft_pissa.yaml"
LLAMA_8B = ["--hf-config", str(HF / "Llama-3.1-8B.json")]


def test_pissa_is_lora_with_its_initialisation_noted(tmp_path, capsys):
    """examples/extras/pissa/llama3_lora_sft.yaml: rank 8 on every linear layer of Llama 3.1 8B's 32 blocks,
    8 x (q 4096+4096, k 4096+1024, v 4096+1024, o 4096+4096, gate/up/down 3 x (4096+14336)) = 655,360 each:
    20,971,520 trainable, as the same file without the PiSSA keys."""
    got = summary_json(capsys, *LLAMA_8B, "--hf-training-args", str(PISSA), "--devices", "1")
    assert got["trainable_parameters"] == 32 * 8 * (8192 + 5120 + 5120 + 8192 + 3 * 18432) == 20_971_520
    plain = tmp_path / "plain.yaml"
    plain.write_text(PISSA.read_text().replace("pissa_init: true\npissa_iter: 16\npissa_convert: true\n", ""))
    other = summary_json(capsys, *LLAMA_8B, "--hf-training-args", str(plain), "--devices", "1")
    for key in ("weight_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes", "model_flops_fwd"):
        assert got[key] == other[key]
    assert any(n.startswith("pissa_init: PiSSA initialises the adapters") and "16 fast-SVD iterations" in n
               and "pissa_convert" in n and "not counted" in n for n in got["notes"])


def test_pissa_where_llamafactory_refuses_it(tmp_path, capsys):
    text = PISSA.read_text()
    cases = {"quantization_bit: 4\n": "for a quantized model", "pref_beta: 0.1\n": "Cannot use PiSSA"}
    for extra, said in cases.items():
        path = tmp_path / "case.yaml"
        changed = text + extra if "quant" in extra else text.replace("stage: sft", "stage: dpo") + extra
        path.write_text(changed)
        assert said in summary_error(capsys, *LLAMA_8B, "--hf-training-args", str(path), "--devices", "1")
    zero3 = str(INPUTS / "llamafactory_ds_z3_config.json")
    assert "PiSSA in DeepSpeed ZeRO-3" in summary_error(capsys, *LLAMA_8B, "--hf-training-args", str(PISSA), "--deepspeed",
                                                 zero3, "--devices", "8")
