"""Published framework files the readers had not seen (issue 65), each copied unchanged into
``framework_inputs/`` (``PROVENANCE.md`` names its repository, path and commit), read as a user would
(``summary``), with the values read off the file by hand.

torchtitan's first model name: until df2dcc746 (2024-04-19) its job TOMLs said ``[model] name =
"llama"``, the Llama 2 ``ModelArgs`` that df2dcc746 renamed ``llama2`` (``torchtitan/models/llama/__init__.py``
at bfe999877; ``torchtrain/models/llama/__init__.py`` before the rename of the repository), with a debug
model of 2 layers."""

import pathlib

from summary_calls import summary_error, summary_json

INPUTS = pathlib.Path(__file__).resolve().parent / "framework_inputs"
LLAMA_7B = INPUTS / "llama_7b_2024-04.toml"
DEBUG_2D = INPUTS / "debug_model_2d_2024-03.toml"


def test_torchtitan_llama_7b_of_2024_04_is_llama_2_7b(capsys):
    """train_configs/llama_7b.toml at bfe999877: flavor 7B (dim 4096, 32 layers, 32 heads, Llama 2's 32,000
    tokens), batch_size 8 of seq_len 2048, data_parallel_degree -1 (FSDP over the 8 processes), TP 1, PP 1,
    selective_ac_option 'op'; Llama 2 7B's published 6,738,415,616 parameters."""
    got = summary_json(capsys, "--torchtitan", str(LLAMA_7B), "--devices", "8")
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["d"], layout["m1"], layout["p"]) == (8, 2048, 8, 1, 1)
    assert (layout["zero"], layout["recompute"], layout["fp8"], layout["precision"]) == (3, "op", None, "bf16")
    assert got["parameters"] == 6738415616
    assert any("first generation" in note for note in got["notes"])


def _debug_parameters(layers: int, vocab: int) -> int:
    """The debug model by hand: dim 256, 16 heads (as many key/value heads), the MLP int(2 x 4 x 256 / 3)
    = 682 rounded up to 256's multiple, 768; two RMSNorm weights a layer and the final one; an untied head."""
    dim, mlp = 256, 768
    return layers * (4 * dim * dim + 3 * dim * mlp + 2 * dim) + 2 * vocab * dim + dim


def test_torchtrain_debug_model_2d_of_2024_03_has_two_layers(capsys):
    """train_configs/debug_model_2d.toml at f6d9de752 (the repository still named torchtrain): flavor
    debugmodel (2 layers then, ModelArgs(dim=256, n_layers=2, n_heads=16)), its test tokenizer's vocabulary
    given, tensor_parallel_degree 2 and data_parallel_degree -1 on 8 processes (d = 4), batch 8 of 2048,
    selective_ac_option '2' (every second layer recomputed: 1 of the 2)."""
    got = summary_json(capsys, "--torchtitan", str(DEBUG_2D), "--devices", "8", "--vocab-size", "32000")
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["m1"], layout["d"], layout["p"]) == (8, 2048, 2, 4, 1)
    assert (layout["recompute"], layout["recompute_layers"]) == ("full", 1)
    assert got["parameters"] == _debug_parameters(2, 32000) == 18089216


def test_the_debug_model_needs_its_tokenizer_vocabulary(capsys):
    assert "--vocab-size" in summary_error(capsys, "--torchtitan", str(DEBUG_2D), "--devices", "8")


def test_a_flavour_the_name_llama_gave_two_models_is_refused(capsys, tmp_path):
    """"1B" was dim 1024, 16 layers, 8 heads at d5c27a94c (torchtrain) and dim 2048, 18 layers, 16 heads at
    bfe999877 (where the first had become "271M"): the file cannot say which."""
    path = tmp_path / "llama_1b.toml"
    path.write_text(LLAMA_7B.read_text().replace('flavor = "7B"', 'flavor = "1B"'))
    said = summary_error(capsys, "--torchtitan", str(path), "--devices", "8")
    assert "[model] flavor '1B'" in said and "two models" in said


def test_the_renamed_flavours_are_the_same_model(capsys, tmp_path):
    """d5c27a94c's "40B" has the arguments bfe999877 calls "26B" (dim 5120, 80 layers, 40 heads)."""
    counts = []
    for flavor in ("40B", "26B"):
        path = tmp_path / f"llama_{flavor}.toml"
        path.write_text(LLAMA_7B.read_text().replace('flavor = "7B"', f'flavor = "{flavor}"'))
        counts.append(summary_json(capsys, "--torchtitan", str(path), "--devices", "8")["parameters"])
    assert counts[0] == counts[1]


# torchtitan's float8 switch under [training] in July 2024 (torchtitan/config_manager.py): enable_fp8_linear
# from a4b2ee3c0 (2024-07-16), renamed enable_float8_linear by 69fe8defc (2024-07-17), moved to [float8] by
# 40f79d79f (2024-07-31).  Its true swapped every nn.Linear, the output head too (maybe_build_fp8_linear of
# torchtitan/float8_linear.py at 69fe8defc: swap_linear_with_float8_linear(model, ...), nothing skipped).
LLAMA2_70B = INPUTS / "llama2_70b_2024-07.toml"
DEBUG_2024_07 = INPUTS / "debug_model_2024-07.toml"


def test_torchtitan_llama2_70b_of_2024_07_reads_its_float8_switch(capsys):
    """train_configs/llama2_70b.toml at 69fe8defc: llama2 70B (Llama 2 70B's 68,976,648,192 parameters),
    batch_size 16 of seq_len 4096, tensor_parallel_degree 8 and data_parallel_degree -1 on 64 processes (d = 8),
    [experimental] pipeline_parallel_degree 1, enable_float8_linear false (no float8), mode 'full'."""
    got = summary_json(capsys, "--torchtitan", str(LLAMA2_70B), "--devices", "64")
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["m1"], layout["d"], layout["p"]) == (16, 4096, 8, 8, 1)
    assert (layout["fp8"], layout["recompute"], layout["zero"]) == (None, "full", 3)
    assert got["parameters"] == 68976648192
    assert "[training] enable_float8_linear" in got["notes"][0]


def test_torchtitan_debug_model_of_2024_07(capsys):
    """train_configs/debug_model.toml at 0ee573cdd: the llama3 debug model (8 layers then), batch 8 of 2048,
    FSDP over the 8 processes, enable_float8_linear false, selective_ac_option '2' (4 of the 8 layers)."""
    got = summary_json(capsys, "--torchtitan", str(DEBUG_2024_07), "--devices", "8", "--vocab-size", "2000")
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["d"], layout["m1"], layout["fp8"]) == (8, 2048, 8, 1, None)
    assert (layout["recompute"], layout["recompute_layers"]) == ("full", 4)
    assert got["parameters"] == _debug_parameters(8, 2000)


def test_the_july_2024_float8_switch_on_is_refused(capsys, tmp_path):
    """On, it put the output head in float8 too, which the reader's float8 (head kept in 16-bit) does not model;
    the spelling of its first day, enable_fp8_linear, is read the same way."""
    for key in ("enable_float8_linear", "enable_fp8_linear"):
        path = tmp_path / f"{key}.toml"
        path.write_text(LLAMA2_70B.read_text().replace("enable_float8_linear = false", f"{key} = true"))
        said = summary_error(capsys, "--torchtitan", str(path), "--devices", "64")
        assert f"[training] {key} = true" in said and "output head" in said
        path.write_text(LLAMA2_70B.read_text().replace("enable_float8_linear = false", f"{key} = false"))
        assert summary_json(capsys, "--torchtitan", str(path), "--devices", "64")["layout"]["fp8"] is None


# NeMo 1.x (NVIDIA/NeMo at 9a268dd6c): megatron_llama_config.yaml states restore_from_path: null and
# restore_from_ckpt: null, no checkpoint restored.
NEMO1_LLAMA = INPUTS / "nemo1_megatron_llama_config.yaml"


def test_nemo1_llama_config_is_llama_2_7b(capsys):
    """Its model: 32 layers, hidden 4096, FFN 11008, 32 heads (32 query groups), no bias, fast-swiglu, rmsnorm,
    untied head; micro-batch 4, global batch 8 on trainer.devices 1 (2 micro-batches), TP 1, PP 1,
    trainer.precision 32 (fp32).  With Llama 2's 32,000 tokens: Llama 2 7B's 6,738,415,616 parameters."""
    got = summary_json(capsys, "--nemo-recipe", str(NEMO1_LLAMA), "--vocab-size", "32000")
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["m1"], layout["p"], layout["d"]) == (4, 4096, 1, 1, 1)
    assert (layout["micro_batches"], layout["precision"]) == (2, "fp32")
    assert got["parameters"] == 6738415616


def test_nemo1_a_restored_checkpoint_is_refused(capsys, tmp_path):
    """A checkpoint or .nemo file restored into the model brings its own configuration: refused, named."""
    for key in ("restore_from_path", "restore_from_ckpt"):
        path = tmp_path / f"{key}.yaml"
        path.write_text(NEMO1_LLAMA.read_text().replace(f"{key}: null", f"{key}: /ckpt/model.nemo"))
        said = summary_error(capsys, "--nemo-recipe", str(path), "--vocab-size", "32000")
        assert f"model.{key}" in said and "its own configuration" in said


# torchtitan's fault-tolerant Llama 3 (torchtitan/models/llama3_ft/train_configs/debug_model.toml at
# 7c1048075): [fault_tolerance] enable = true with torchft's settings (sync_steps, num_fragments,
# semi_sync_method "diloco", ...).
LLAMA3_FT = INPUTS / "llama3_ft_debug_model_2025-10.toml"


def test_a_torchft_file_is_refused_for_torchft_not_for_its_settings(capsys, tmp_path):
    said = summary_error(capsys, "--torchtitan", str(LLAMA3_FT), "--devices", "8")
    assert "[fault_tolerance] enable = True" in said and "torchft" in said and "sync_steps" not in said
    path = tmp_path / "off.toml"
    path.write_text(LLAMA3_FT.read_text().replace("[fault_tolerance]\nenable = true",
                                                  "[fault_tolerance]\nenable = false"))
    layout = summary_json(capsys, "--torchtitan", str(path), "--devices", "8", "--vocab-size", "2000")["layout"]
    assert (layout["d"], layout["b"], layout["l"]) == (8, 8, 2048)


# DeepSpeedExamples' training/bf16_master_weight/configs/bf16_full.json (45b4b71): bf16 on, with bf16 master
# weights and gradients and bf16 optimizer states, ZeRO-3, micro-batch 4, accumulation 1, and torch_autocast
# enabled (bfloat16); its README runs it with deepspeed --num_gpus=4.
BF16_FULL = INPUTS / "ds_bf16_master_weight_bf16_full.json"
LLAMA_1B = ["--hf-config", str(pathlib.Path(__file__).resolve().parent / "hf_configs" / "Llama-3.2-1B.json")]


def test_deepspeed_autocast_beside_bf16_is_refused_naming_both(capsys):
    said = summary_error(capsys, *LLAMA_1B, "--deepspeed", str(BF16_FULL), "--devices", "4")
    assert "torch_autocast.enabled" in said and "bf16.enabled too" in said
    assert "give the precision with bf16 or fp16" not in said


def test_deepspeed_bf16_full_without_autocast(capsys, tmp_path):
    """The same file without its torch_autocast section: micro 4 x accumulation 1 on 4 processes, ZeRO-3, bf16,
    the 16-bit masters with bf16 moments."""
    import json
    config = json.loads(BF16_FULL.read_text())
    del config["torch_autocast"]
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config))
    layout = summary_json(capsys, *LLAMA_1B, "--deepspeed", str(path), "--devices", "4", "--set", "l=512")["layout"]
    assert (layout["b"], layout["micro_batches"], layout["d"], layout["zero"]) == (4, 1, 4, 3)
    assert (layout["precision"], layout["optimizer"]) == ("bf16", "adam-16bit-master-bf16-moments")


# Megatron-Bridge's scripts/performance/configs/llama3/llama3_8b_llm_pretrain.yaml (at bf75c658c's parent, which
# deleted it): a ConfigContainer subtree and a perf_matrix, whose entry for the command line's GPU, GPU count
# and compute dtype scripts/performance/run_script.py applies over it (apply_perf_matrix_overrides: for h100,
# 8 GPUs, bf16 it sets cp 2, for fp8 cp 1 and Megatron-FSDP; global batch 128, micro-batch 1, sequence 8192).
BRIDGE_PERF = INPUTS / "bridge_perf_llama3_8b_llm_pretrain.yaml"
LLAMA_8B = ["--hf-config", str(pathlib.Path(__file__).resolve().parent / "hf_configs" / "Llama-3.1-8B.json")]


def test_a_bridge_perf_matrix_is_refused_not_dropped(capsys, tmp_path):
    words = ("--megatron-bridge-recipe", "llama3_8b_pretrain_config", *LLAMA_8B, "--devices", "8")
    said = summary_error(capsys, *words, "--nemo-recipe", str(BRIDGE_PERF))
    assert "perf_matrix" in said and "compute dtype" in said
    other = tmp_path / "other.yaml"
    other.write_text("ConfigContainer:\n  train:\n    global_batch_size: 256\nsomething_else: 1\n")
    assert "something_else beside ConfigContainer" in summary_error(capsys, *words, "--nemo-recipe", str(other))
    alone = tmp_path / "alone.yaml"
    alone.write_text(BRIDGE_PERF.read_text().split("perf_matrix:")[0])
    assert summary_json(capsys, *words, "--nemo-recipe", str(alone))["layout"]["l"] == 8192


# Megatron-Bridge's scripts/performance/llm/configs/llama3_70b_pretrain_overrides.yaml (at 8cec56d38's parent,
# 2025-09-09): TP 4, PP 4, CP 2, virtual pipeline 5, global batch 128, micro-batch 1, CUDA graphs off, and
# mixed_precision.grad_reduce_in_fp32 false, which MixedPrecisionConfig.setup copies onto the DDP config
# (update_config_with_precision_overrides), over the recipe's ddp.grad_reduce_in_fp32 true.
BRIDGE_PERF_70B = INPUTS / "bridge_perf_llama3_70b_pretrain_overrides.yaml"


def test_bridge_perf_overrides_of_2025_09_on_llama3_70b(capsys):
    """On 64 processes: d = 64 / (4 x 4 x 2) = 2, 128 / (1 x 2) = 64 micro-batches, the interleaved schedule
    with 5 virtual stages; the note says the gradients are reduced in 16 bits, not in fp32."""
    got = summary_json(capsys, "--megatron-bridge-recipe", "llama3_70b_pretrain_config", "--nemo-recipe",
                       str(BRIDGE_PERF_70B), "--preset", "llama-3-70b", "--devices", "64")
    layout = got["layout"]
    assert (layout["m1"], layout["p"], layout["cp"], layout["d"], layout["b"]) == (4, 4, 2, 2, 1)
    assert (layout["micro_batches"], layout["virtual_stages"], layout["schedule"]) == (64, 5, "interleaved")
    assert layout["cuda_graphs"] == []
    assert any("mixed_precision.grad_reduce_in_fp32 false replaces" in n for n in got["notes"])
    assert not any(n.startswith("ddp.grad_reduce_in_fp32") for n in got["notes"])


# LLaMA-Factory's examples/train_lora/qwen3_lora_sft_ray.yaml: ray_num_workers 4 ("Number of GPUs to use"),
# which LLaMA-Factory reads only under USE_RAY=1 (train/tuner.py: _ray_training_function starts that many
# workers, one a device); per_device_train_batch_size 1, gradient_accumulation_steps 8, cutoff_len 2048, LoRA.
RAY = INPUTS / "llamafactory_qwen3_lora_sft_ray.yaml"
QWEN3_06B = ["--hf-config", str(pathlib.Path(__file__).resolve().parent / "hf_configs" / "Qwen3-0.6B.json")]


def test_llamafactory_ray_workers_need_the_devices(capsys):
    said = summary_error(capsys, *QWEN3_06B, "--hf-training-args", str(RAY))
    assert "ray_num_workers 4" in said and "--devices" in said and "USE_RAY" in said


def test_llamafactory_ray_recipe_on_its_four_devices(capsys):
    got = summary_json(capsys, *QWEN3_06B, "--hf-training-args", str(RAY), "--devices", "4")
    layout = got["layout"]
    assert (layout["b"], layout["micro_batches"], layout["d"], layout["l"]) == (1, 8, 4, 2048)
    assert any(n.startswith("ray_num_workers 4") and "--devices 4" in n for n in got["notes"])
    other = summary_json(capsys, *QWEN3_06B, "--hf-training-args", str(RAY), "--devices", "2")
    assert other["layout"]["d"] == 2
    assert any("the launch without Ray" in n for n in other["notes"])


# accelerate's tests/deepspeed/ds_config_zero3_model_only.json: ZeRO-3 with the parameters offloaded and
# stage3_param_persistence_threshold 1e9: DeepSpeed never partitions a parameter of fewer elements (it stays
# whole on every rank), here every weight matrix of Llama 3 8B (the smallest, a key/value projection,
# 4,096 x 8 x 128 = 4,194,304 elements; the embedding 525,336,576).
MODEL_ONLY = INPUTS / "accelerate_ds_config_zero3_model_only.json"


def test_a_persistence_threshold_above_the_weight_matrices_is_refused(capsys, tmp_path):
    import json
    words = ("--preset", "llama-3-8b", "--devices", "8", "--precision", "bf16")
    said = summary_error(capsys, *words, "--deepspeed", str(MODEL_ONLY))
    assert "stage3_param_persistence_threshold 1,000,000,000" in said and "4,194,304" in said
    config = json.loads(MODEL_ONLY.read_text())
    for threshold, accepted in ((4194304, False), (4194303, True), (100000, True)):
        config["zero_optimization"]["stage3_param_persistence_threshold"] = threshold
        path = tmp_path / f"{threshold}.json"
        path.write_text(json.dumps(config))
        if accepted:
            layout = summary_json(capsys, *words, "--deepspeed", str(path))["layout"]
            assert (layout["zero"], layout["offload"], layout["b"]) == (3, "weights", 1)
        else:
            assert "stage3_param_persistence_threshold" in summary_error(capsys, *words, "--deepspeed", str(path))


# Strings assigned as bash assigns them (models.launch_script): NAME+=" ..." appends to the string, and a string
# assigned to an array's name sets its element 0, which $NAME then gives (bash: ARGS=(a b); ARGS="x"; $ARGS is x,
# "${ARGS[@]}" is x b).  swiss-ai/Megatron-LM's submit-llama3-8b.sh builds DATA_ARGS=( --split ... --seq-length
# $SEQ_LEN ... ) and then DATA_ARGS="${DATA_ARGS[@]} --data-path $(...) --data-cache-path $DIR", and launches
# $DATA_ARGS; Megatron-LM's own examples hold neither (the corpus of test_megatron_examples reads the same).
SWISS = INPUTS / "swissai_submit_llama3_8b.sh"


def _program(text: str) -> list:
    from symbolic_cost.models.launch_script import read_launch
    return read_launch(text, "test").program


def test_a_string_appended_keeps_what_it_held():
    got = _program('B="--micro-batch-size 2"\nB+=" --global-batch-size 64"\npython pretrain_gpt.py $B --bf16\n')
    assert got == ["--micro-batch-size", "2", "--global-batch-size", "64", "--bf16"]


def test_a_string_assigned_to_an_array_sets_its_first_element():
    text = 'A=(\n  --seq-length 8192\n  --split 1\n)\nA="${A[@]} --mock-data"\n'
    assert _program(text + "python pretrain_gpt.py $A\n") == ["--seq-length", "8192", "--split", "1", "--mock-data"]
    assert _program(text + 'python pretrain_gpt.py "${A[@]}"\n') == [
        "--seq-length 8192 --split 1 --mock-data", "8192", "--split", "1"]


def test_swissai_llama3_8b_is_refused_for_its_fork_option(capsys):
    said = summary_error(capsys, "--megatron-args", str(SWISS), "--vocab-size", "131072")
    assert "--trigger-path" in said


def test_swissai_llama3_8b_without_its_fork_option(capsys, tmp_path):
    """Without the --trigger-path line (the fork's): #SBATCH --nodes=16 --ntasks-per-node=4 under srun (64
    processes), MBS 1 of GBS 128 (2 micro-batches), SEQ_LEN 8192 (given through DATA_ARGS' string), TP 1, PP 1,
    bf16, the distributed optimizer; 32 layers of 4,096, FFN 14,336, 32 heads in 8 groups, untied: with a
    131,072-token vocabulary, Llama 3 8B's 8,030,261,248 + 2 x (131,072 - 128,256) x 4,096 parameters."""
    path = tmp_path / "submit.sh"
    kept = [line for line in SWISS.read_text().splitlines(keepends=True) if "--trigger-path" not in line]
    path.write_text("".join(kept))
    got = summary_json(capsys, "--megatron-args", str(path), "--vocab-size", "131072")
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["m1"], layout["p"], layout["d"]) == (1, 8192, 1, 1, 64)
    assert (layout["micro_batches"], layout["precision"], layout["distributed_optimizer"]) == (2, "bf16", True)
    assert got["world_size"] == 64
    assert got["parameters"] == 8030261248 + 2 * (131072 - 128256) * 4096 == 8053329920


def test_an_array_appended_to_a_string_keeps_the_string_first():
    """bash: A="--a 1"; A+=(--b 2) makes A the array ("--a 1" --b 2)."""
    assert _program('A="--seq-length 64"\nA+=(--bf16)\npython pretrain_gpt.py ${A[@]}\n') == [
        "--seq-length", "64", "--bf16"]


# NeMo 1.x's megatron_qwen2_config.yaml (NVIDIA/NeMo at 9a268dd6c): its "4b" shape (40 layers of 2,560, FFN 6,912,
# 20 heads in 20 groups, fast-swiglu, rmsnorm, bias false with qkv_bias true, untied), override_vocab_size
# 151936 (MegatronGPTModel.model_provider_func builds the model with cfg.get('override_vocab_size',
# padded_vocab_size): that vocabulary, not padded), micro-batch 4 of global 8 on 1 device, encoder_seq_length
# 32768, trainer.precision bf16 with megatron_amp_O2.  megatron_bert_config.yaml (at 27de8458b) is NeMo's BERT.
NEMO1_QWEN2 = INPUTS / "nemo1_megatron_qwen2_config.yaml"
NEMO1_BERT = INPUTS / "nemo1_megatron_bert_config.yaml"


def test_nemo1_qwen2_config_reads_qkv_bias_and_the_override_vocabulary(capsys):
    """By hand: a layer 3 x 2560^2 + 3 x 2560 (Q, K, V and their biases) + 2560^2 + 3 x 2560 x 6912 + 2 x 2560;
    40 of them, two tables of 151,936 x 2,560 and the final norm: 3,950,369,280 (Qwen1.5-4B's count)."""
    got = summary_json(capsys, "--nemo-recipe", str(NEMO1_QWEN2))
    layout = got["layout"]
    assert (layout["b"], layout["micro_batches"], layout["l"], layout["d"], layout["precision"]) == (
        4, 2, 32768, 1, "bf16")
    layer = 3 * 2560 ** 2 + 3 * 2560 + 2560 ** 2 + 3 * 2560 * 6912 + 2 * 2560
    assert got["parameters"] == 40 * layer + 2 * 151936 * 2560 + 2560 == 3950369280
    assert any(n.startswith("model.override_vocab_size 151936") for n in got["notes"])
    again = summary_json(capsys, "--nemo-recipe", str(NEMO1_QWEN2), "--vocab-size", "32000")
    assert again["parameters"] == got["parameters"]


def test_nemo1_other_models_are_refused_by_what_they_are(capsys, tmp_path):
    said = summary_error(capsys, "--nemo-recipe", str(NEMO1_BERT), "--vocab-size", "30522")
    assert "NeMo's BERT" in said and "legacy (Apex) GPT" not in said
    mamba = tmp_path / "mamba.yaml"
    mamba.write_text(NEMO1_QWEN2.read_text().replace("name: megatron_qwen2", "name: megatron_mamba", 1))
    assert "NeMo's Mamba hybrid" in summary_error(capsys, "--nemo-recipe", str(mamba))


# torchtitan's llama3 config_registry.py at 7cec16600 (2026-04-17): llama3_405b() converts to float8 with
# enable_fsdp_float8_all_gather=True beside TP 8 (local batch 2 of 8,192, full recomputation).  torchtitan's
# Float8Converter gathers in float8 only where FSDP shards (enable_fsdp_float8_all_gather =
# parallel_dims.dp_shard_enabled and ...); on 8 processes the shard degree is 1, so the switch does nothing.
REGISTRY_7CEC166 = INPUTS / "torchtitan_python" / "7cec166" / "torchtitan" / "models" / "llama3" / "config_registry.py"


def test_float8_gather_without_fsdp_does_nothing(capsys):
    words = ("--torchtitan", str(REGISTRY_7CEC166), "--torchtitan-config", "llama3_405b")
    got = summary_json(capsys, *words, "--devices", "8")
    layout = got["layout"]
    assert (layout["m1"], layout["d"], layout["zero"], layout["b"], layout["l"]) == (8, 1, 0, 2, 8192)
    assert (layout["fp8"], layout["fp8_gather"], layout["recompute"]) == ("torchao-tensorwise", False, "full")
    assert any("enable_fsdp_float8_all_gather: the data-parallel shard degree is 1" in n for n in got["notes"])
    sharded = summary_json(capsys, *words, "--devices", "64")["layout"]
    assert (sharded["d"], sharded["zero"], sharded["fp8_gather"]) == (8, 3, True)


# At 7cec16600 the llama3 and qwen3 registries name a debug flavour "debugmodel_fused_qkv" (one product for Q, K
# and V: fuse_qkv=True; the same shapes as "debugmodel" in torchtitan/models/*/__init__.py there).  Fusing
# changes no weight and no work.
REGISTRY_QWEN3_7CEC166 = REGISTRY_7CEC166.parents[1] / "qwen3" / "config_registry.py"


def test_the_fused_qkv_debug_flavours_are_the_debug_models(capsys):
    """llama3: 6 layers of dim 256 (16 heads, MLP 768), 2,048 tokens, untied: 6 x (4 x 256^2 + 3 x 256 x 768 +
    2 x 256) + 2 x 2048 x 256 + 256.  qwen3: 8 layers of dim 256, 16 query and 8 key/value heads of 128 with
    their norms, MLP 3,072, 2,048 tokens, tied: a layer Q (256 x 2,048), K and V (256 x 1,024 each), O
    (2,048 x 256), the two head norms (128 each), the MLP (3 x 256 x 3,072) and two norms (256 each)."""
    llama = summary_json(capsys, "--torchtitan", str(REGISTRY_7CEC166), "--torchtitan-config",
                         "llama3_debugmodel_fused_qkv", "--devices", "8")
    assert llama["parameters"] == 6 * (4 * 256 ** 2 + 3 * 256 * 768 + 2 * 256) + 2 * 2048 * 256 + 256 == 6163712
    qwen = summary_json(capsys, "--torchtitan", str(REGISTRY_QWEN3_7CEC166), "--torchtitan-config",
                        "qwen3_debugmodel_fused_qkv", "--devices", "8")
    layer = 256 * 2048 + 2 * 256 * 1024 + 2048 * 256 + 2 * 128 + 3 * 256 * 3072 + 2 * 256
    assert qwen["parameters"] == 8 * layer + 2048 * 256 + 256 == 31987968
    assert (qwen["layout"]["b"], qwen["layout"]["l"], qwen["layout"]["d"]) == (8, 2048, 8)


# NeMo 1.x's megatron_chatglm_config.yaml: ChatGLM2-6B's shape (28 layers of 4,096, FFN 13,696, 32 heads in 2
# query groups, qkv_bias, rotary over half of each head, rotary_interleaved: rotating adjacent channel pairs,
# not halves, the same work), micro-batch 4 of global 8, encoder_seq_length 32768, trainer.precision 32.
NEMO1_CHATGLM = INPUTS / "nemo1_megatron_chatglm_config.yaml"


def test_nemo1_chatglm_config_is_chatglm2_6b(capsys):
    """With ChatGLM2's 65,024 tokens (a multiple of 128): a layer Q 4,096^2 + 4,096 (bias), K and V 2 x (4,096
    x 256 + 256), O 4,096^2, the MLP 3 x 4,096 x 13,696, two norms; 28 of them, two tables and the final norm:
    ChatGLM2-6B's 6,243,584,000."""
    got = summary_json(capsys, "--nemo-recipe", str(NEMO1_CHATGLM), "--vocab-size", "65024")
    layer = 4096 ** 2 + 4096 + 2 * (4096 * 256 + 256) + 4096 ** 2 + 3 * 4096 * 13696 + 2 * 4096
    assert got["parameters"] == 28 * layer + 2 * 65024 * 4096 + 4096 == 6243584000
    layout = got["layout"]
    assert (layout["b"], layout["micro_batches"], layout["l"], layout["precision"]) == (4, 2, 32768, "fp32")
