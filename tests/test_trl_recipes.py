"""TRL and alignment-handbook recipes (issue 65): a ``TrainingArguments`` YAML holding TRL's model,
data and SFT fields, launched with an accelerate config, as the handbook's README launches them
(``accelerate launch --config_file recipes/accelerate_configs/fsdp.yaml scripts/sft.py
recipes/zephyr-7b-beta/sft/config_full.yaml``).  The files are the handbook's, unchanged
(``framework_inputs/PROVENANCE.md``); each reading must equal the same training typed on the
command line by hand from the recipe's fields and the rules of ``models.trl_recipe`` and
``models.hf_trainer.launched``."""

import json
import pathlib

import pytest

from symbolic_cost.cli import main

INPUTS = pathlib.Path(__file__).resolve().parent / "framework_inputs"
HF = pathlib.Path(__file__).resolve().parent / "hf_configs"
FULL = str(INPUTS / "handbook_sft_config_full.yaml")
QLORA = str(INPUTS / "handbook_sft_config_qlora.yaml")
FSDP = str(INPUTS / "handbook_fsdp.yaml")
pytest.importorskip("yaml", reason="the recipes are YAML (pip install 'symbolic_cost[yaml]')")


def _json(capsys, *words):
    assert main(["summary", "--preset", "mistral-7b", *words, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _error(capsys, *words):
    assert main(["summary", "--preset", "mistral-7b", *words]) == 2
    return capsys.readouterr().err


def _json_model(capsys, model: list, *words):
    assert main(["summary", *model, *words, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _same(got, typed):
    assert {k: v for k, v in got.items() if k not in ("model", "notes")} == \
        {k: v for k, v in typed.items() if k not in ("model", "notes")}


def test_full_sft_under_the_handbooks_fsdp_launch(capsys):
    """config_full.yaml: per_device_train_batch_size 16, gradient_accumulation_steps 1,
    max_seq_length 2048, gradient_checkpointing, bf16, flash_attention_2 (timed by
    FlashAttention-2's bars), torch_dtype bfloat16; fsdp.yaml: 8 processes, FULL_SHARD, bf16, the
    gathers and the gradient reduction behind compute.  Under mixed precision accelerate upcasts
    FSDP's trainable parameters to fp32 whatever dtype the model loads in (accelerate 16cb6eb,
    ``fsdp2_prepare_model``: "Upcast to fp32 master weights"), so the bf16 load keeps an fp32
    master: 16 bytes a parameter with AdamW, sharded 8 ways."""
    got = _json(capsys, "--accelerate", FSDP, "--hf-training-args", FULL)
    typed = _json(capsys, "--set", "b=16", "n_micro=1", "l=2048", "d=8", "--zero", "3", "--recompute", "full",
                  "--flash", "--attention-kernel", "flash-attention-2", "--precision", "bf16",
                  "--overlap", "grad,param", "--optimizer", "adamw")
    _same(got, typed)
    assert got["weight_bytes"] * 8 == 2 * 7_241_732_096
    assert got["optimizer_bytes"] * 8 == 12 * 7_241_732_096         # fp32 master and two fp32 moments
    assert any("fp32 sharded parameters" in note for note in got["notes"])
    assert not any("16-bit moments" in note for note in got["notes"])


def test_a_bf16_load_keeps_deepspeeds_fp32_master_and_ddp_none(capsys, tmp_path):
    """The same recipe under a ZeRO-3 launch: DeepSpeed builds fp32 partitions of the trainable
    parameters whatever their dtype (``stage3.py``'s ``_create_fp32_partitions``; stage 1 and 2's
    ``weights_partition ... .to(master_weights_and_grads_dtype)``), with Adam's state on them:
    12 bytes a parameter over 8 ranks.  Under DDP (``MULTI_GPU``) nothing upcasts: torch's AdamW
    keeps bf16 moments of the bf16 parameters, 4 bytes a parameter, and no master."""
    zero3 = tmp_path / "zero3.yaml"
    zero3.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n"
                     "  zero_stage: 3\n  offload_optimizer_device: none\n  offload_param_device: none\n"
                     "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\n")
    ddp = tmp_path / "ddp.yaml"
    ddp.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmixed_precision: bf16\n"
                   "num_machines: 1\nnum_processes: 8\n")
    sharded = _json(capsys, "--accelerate", str(zero3), "--hf-training-args", FULL)
    assert sharded["optimizer_bytes"] * 8 == 12 * 7_241_732_096
    assert any("DeepSpeed keeps fp32 partitions" in note for note in sharded["notes"])
    plain = _json(capsys, "--accelerate", str(ddp), "--hf-training-args", FULL)
    assert plain["optimizer_bytes"] == 4 * 7_241_732_096
    assert any("16-bit moments and no fp32 master" in note for note in plain["notes"])


def test_qlora_sft_on_one_device(capsys):
    """config_qlora.yaml alone: rank 16 on the seven projections, an NF4 base without nested
    quantisation, 4 sequences of 2048 tokens, 2 accumulated; the adapters in fp32 (PEFT)."""
    got = _json(capsys, "--hf-training-args", QLORA, "--devices", "1")
    typed = _json(capsys, "--set", "b=4", "n_micro=2", "l=2048", "--recompute", "full", "--flash",
                  "--attention-kernel", "flash-attention-2", "--precision",
                  "bf16", "--lora-rank", "16", "--lora-targets", "q,k,v,o,gate,up,down", "--lora-base", "nf4",
                  "--no-double-quant", "--optimizer", "adamw")
    _same(got, typed)
    # 32 layers x rank 16 x (q 4096+4096, k 4096+1024, v 4096+1024, o 4096+4096, gate, up 4096+14336, down 14336+4096)
    per_layer = 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2 + (4096 + 14336) * 3)
    assert got["trainable_parameters"] == 32 * per_layer == 41_943_040


def test_the_training_arguments_precision_replaces_the_launch_configs(tmp_path, capsys):
    """TrainingArguments.__post_init__ sets ACCELERATE_MIXED_PRECISION from its own fp16/bf16."""
    recipe = tmp_path / "fp16.yaml"
    recipe.write_text("per_device_train_batch_size: 2\nfp16: true\nmax_length: 1024\n")
    got = _json(capsys, "--accelerate", FSDP, "--hf-training-args", str(recipe))
    assert got["layout"]["precision"] == "fp16"
    assert any("replaces the launch config's mixed_precision bf16" in note for note in got["notes"])


@pytest.mark.parametrize("text, refused", [
    ("beta: 0.01\n", "beta: a preference recipe's field (DPO, ORPO, reward); give the trainer"),
    ("lora_r: 8\n", "lora_r without use_peft"),
    ("attn_implementation: flex_attention\n", "attn_implementation 'flex_attention'"),
    ("use_peft: true\nlora_target_modules: [qkv]\n", "lora_target_modules 'qkv'"),
    ("use_peft: true\nuse_dora: true\n", "use_dora: DoRA"),
    ("- bf16\n", "a mapping of field names"),
    ("max_length: 0\n", "max_length must be a positive integer"),
    # a number, a nested list or a mapping where names are taken (found by fuzzing: internal TypeErrors)
    ("use_peft: true\nlora_target_modules: -1\n", "lora_target_modules must be a name or a list of names"),
    ("use_peft: true\nlora_target_modules: [q_proj, [1, 2]]\n", "lora_target_modules must be a name or a list"),
    ("attn_implementation: {}\n", "attn_implementation {}"),
])
def test_recipe_fields_not_modelled_are_refused_by_name(tmp_path, capsys, text, refused):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(text)
    assert refused in _error(capsys, "--hf-training-args", str(recipe))


def test_the_recipe_decides_flash_attention(capsys):
    assert "--flash: the TrainingArguments" in _error(capsys, "--hf-training-args", FULL, "--no-flash")
    assert "--attention-kernel: the TrainingArguments" in _error(capsys, "--hf-training-args", FULL,
                                                                 "--attention-kernel", "cudnn")


@pytest.mark.parametrize("implementation, kernel", [("flash_attention_2", "flash-attention-2"),
                                                    ("sdpa", "flash-attention-2"),
                                                    ("flash_attention_3", "flash-attention-3")])
def test_the_recipe_s_attention_is_timed_by_the_library_it_runs(tmp_path, capsys, implementation, kernel):
    """PyTorch's scaled_dot_product_attention tries its FlashAttention-2 backend first; the
    recipe's run is timed as the same run typed with that library (FlashAttention-2 is what a recipe
    naming none runs already, where typing it is refused)."""
    recipe, plain = tmp_path / "recipe.yaml", tmp_path / "plain.yaml"
    plain.write_text("per_device_train_batch_size: 2\nmax_length: 4096\n")
    recipe.write_text(plain.read_text() + f"attn_implementation: {implementation}\n")
    words = ("--devices", "1", "--system", "h100")
    got = _json(capsys, "--hf-training-args", str(recipe), *words)
    library = () if kernel == "flash-attention-2" else ("--attention-kernel", kernel)
    typed = _json(capsys, "--hf-training-args", str(plain), *words, *library)
    assert typed["layout"]["attention_kernel"] == kernel and typed["layout"]["flash"] is True
    cudnn = _json(capsys, "--hf-training-args", str(plain), *words, "--attention-kernel", "cudnn")
    _same(got, typed)
    assert got["step_time_s"] != cudnn["step_time_s"]


def test_without_attn_implementation_transformers_runs_sdpa(tmp_path, capsys):
    """transformers picks sdpa when nothing names an attention: PyTorch's fused kernel keeps no score
    matrix (flash on) and tries FlashAttention-2 first; --no-flash counts eager (the l x l scores kept)."""
    recipe = tmp_path / "recipe.yaml"
    # no checkpointing (TRL's default recomputes every layer, whose scores are then not kept)
    recipe.write_text("per_device_train_batch_size: 2\nmax_length: 4096\ngradient_checkpointing: false\n")
    words = ("--hf-training-args", str(recipe), "--devices", "1")
    sdpa, eager = _json(capsys, *words), _json(capsys, *words, "--no-flash")
    assert (sdpa["layout"]["flash"], sdpa["layout"]["attention_kernel"]) == (True, "flash-attention-2")
    assert any("sdpa" in note for note in sdpa["notes"])
    assert (eager["layout"]["flash"], eager["layout"]["attention_kernel"]) == (False, None)
    # eager keeps every layer's 4096 x 4096 scores: at least a byte each, 2 sequences x 32 heads x 32 layers
    assert eager["activation_bytes"] > sdpa["activation_bytes"] + 2 * 32 * 32 * 4096**2


def test_the_training_arguments_fsdp_replaces_the_launch_configs_even_unsharded(tmp_path, capsys):
    """FSDP1's no_shard in the TrainingArguments (transformers writes its plugin into the
    environment) replaces the launch config's FULL_SHARD: nothing is sharded."""
    recipe = tmp_path / "no_shard.yaml"
    recipe.write_text("per_device_train_batch_size: 2\nbf16: true\nfsdp: no_shard\nfsdp_config:\n  version: 1\n")
    got = _json(capsys, "--accelerate", FSDP, "--hf-training-args", str(recipe), "--set", "l=1024")
    assert got["layout"]["zero"] == 0 and got["world_size"] == 8
    assert any("fsdp replaces the launch config's" in note for note in got["notes"])


@pytest.mark.parametrize("recipe,layout", [
    # TRL's SFTConfig (huggingface/trl at f2cd577, trl/trainer/base_config.py and sft_config.py):
    # gradient_checkpointing True, max_length 1024, bf16 = not fp16, where TrainingArguments has none
    ("per_device_train_batch_size: 2\n", {"precision": "bf16", "recompute": "full", "l": 1024}),
    ("per_device_train_batch_size: 2\nfp16: true\n", {"precision": "fp16", "recompute": "full", "l": 1024}),
    ("per_device_train_batch_size: 2\nbf16: false\ngradient_checkpointing: false\nmax_length: 512\n",
     {"precision": "fp32", "recompute": "none", "l": 512}),
])
def test_a_recipe_takes_trls_defaults_where_it_leaves_fields_out(tmp_path, capsys, recipe, layout):
    path = tmp_path / "recipe.yaml"
    path.write_text(recipe)
    got = _json(capsys, "--hf-training-args", str(path), "--devices", "1")
    assert {key: got["layout"][key] for key in layout} == layout
    assert any(note.startswith("TRL's defaults") for note in got["notes"]) == ("max_length" not in recipe)


def test_a_trainingarguments_json_keeps_transformers_defaults(tmp_path, capsys):
    """A JSON (``to_json_string()``, or typed as a dictionary) is TrainingArguments alone: no TRL."""
    path = tmp_path / "args.json"
    path.write_text('{"per_device_train_batch_size": 2}')
    got = _json(capsys, "--hf-training-args", str(path), "--devices", "1", "--set", "l=512")
    assert (got["layout"]["precision"], got["layout"]["recompute"]) == ("fp32", "none")


@pytest.mark.parametrize("flag,flash", [("true", True), ("false", None)])
def test_the_handbooks_older_flash_flag_is_its_attn_implementation(tmp_path, capsys, flag, flash):
    """The alignment handbook's ``ModelArguments.use_flash_attention_2`` (its recipes of 2023-24,
    e.g. ``recipes/zephyr-7b-beta/sft/config_full.yaml``) loads the model with
    ``attn_implementation="flash_attention_2"`` when true; false leaves transformers' own choice."""
    older, newer = tmp_path / "older.yaml", tmp_path / "newer.yaml"
    older.write_text(f"per_device_train_batch_size: 2\nmax_length: 2048\nuse_flash_attention_2: {flag}\n"
                     f"dataset_configs:\n- all\n")
    newer.write_text("per_device_train_batch_size: 2\nmax_length: 2048\n" +
                     ("attn_implementation: flash_attention_2\n" if flash else ""))
    got = _json(capsys, "--hf-training-args", str(older), "--devices", "1")
    assert got == _json(capsys, "--hf-training-args", str(newer), "--devices", "1")
    assert got["layout"]["attention_kernel"] == "flash-attention-2" and got["layout"]["flash"] is True
    older.write_text("per_device_train_batch_size: 2\nuse_flash_attention_2: true\nattn_implementation: eager\n")
    assert "use_flash_attention_2" in _error(capsys, "--hf-training-args", str(older), "--devices", "1")


def test_the_hub_fields_of_transformers_4_change_no_count(tmp_path, capsys):
    """The alignment handbook's 2023 recipes name their hub repository with transformers 4.x's
    ``push_to_hub_model_id`` (retired since): a name, no count."""
    plain, older = tmp_path / "plain.yaml", tmp_path / "older.yaml"
    plain.write_text("per_device_train_batch_size: 2\nmax_length: 1024\n")
    older.write_text("per_device_train_batch_size: 2\nmax_length: 1024\npush_to_hub_model_id: zephyr-7b-sft\n")
    assert _json(capsys, "--hf-training-args", str(older), "--devices", "1") == \
        _json(capsys, "--hf-training-args", str(plain), "--devices", "1")


def test_a_lora_recipe_without_a_dtype_keeps_its_base_in_fp32(capsys):
    """TRL's SKILL.md recipe: use_peft, lora_r 16 on PEFT's default q_proj and v_proj, no dtype: TRL's
    ModelConfig.dtype defaults to "float32" (trl/trainer/model_config.py at f2cd577), so the frozen base is
    4 bytes a parameter, embeddings and norms too, while bf16 autocast runs its products; the typed layout
    with --lora-base fp32.  Qwen2.5-7B: 28 layers x 16 x (q 3584+3584, v 3584+512) adapters."""
    recipe = str(pathlib.Path(__file__).parent / "framework_inputs" / "trl_skill_sft_config.yaml")
    model = ["--hf-config", str(pathlib.Path(__file__).parent / "hf_configs" / "Qwen2.5-7B.json")]
    got = _json_model(capsys, model, "--hf-training-args", recipe)
    typed = _json_model(capsys, model, "--set", "b=8", "n_micro=2", "l=1024", "--recompute", "full", "--flash",
                        "--attention-kernel", "flash-attention-2", "--precision", "bf16", "--lora-rank", "16",
                        "--lora-targets", "q,v", "--lora-base", "fp32", "--optimizer", "adamw")
    assert (got["weight_bytes"], got["memory_bytes"]) == (typed["weight_bytes"], typed["memory_bytes"])
    adapters = 28 * 16 * ((3584 + 3584) + (3584 + 512))
    assert got["weight_bytes"] == 2 * adapters + 4 * (got["parameters"] - adapters)


def test_deepspeed_casts_an_fp32_lora_base_to_16_bits(capsys, tmp_path):
    """The same recipe under a DeepSpeed launch in bf16: its engine casts every floating parameter to bf16
    (DeepSpeed edaa722, ``_cast_module_mixed_precision``), the frozen base too: 2 bytes a parameter."""
    recipe = str(pathlib.Path(__file__).parent / "framework_inputs" / "trl_skill_sft_config.yaml")
    model = ["--hf-config", str(pathlib.Path(__file__).parent / "hf_configs" / "Qwen2.5-7B.json")]
    launch = tmp_path / "zero2.yaml"
    launch.write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\nmixed_precision: bf16\n"
                      "num_machines: 1\nnum_processes: 8\n")
    got = _json_model(capsys, model, "--hf-training-args", recipe, "--accelerate", str(launch))
    assert got["weight_bytes"] == 2 * got["parameters"]
    assert any("DeepSpeed casts the model's parameters" in n for n in got["notes"])


def test_the_2023_lora_recipe_with_torch_dtype_auto(capsys):
    """recipes/zephyr-7b-beta/sft/config_lora.yaml of 2023 (e2e8ab945): torch_dtype auto, use_flash_attention_2,
    rank 64 on q, k, v, o; 4 sequences of 2048 tokens, 128 accumulated, on 8 devices.  auto loads the checkpoint's
    dtype (transformers' _get_dtype: the config.json's; TRL's ModelConfig: "derive the dtype from the model's
    weights"), which the preset does not state: the note says so and the base is counted in bfloat16, as
    LLaMA-Factory's reader counts it (tests/test_llamafactory.py), not in TRL's default float32."""
    got = _json(capsys, "--hf-training-args", str(INPUTS / "handbook_sft_config_lora_2023.yaml"), "--devices", "8")
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["d"], layout["micro_batches"]) == (4, 2048, 8, 128)
    assert layout["flash"] is True and layout["recompute"] == "full"
    # 32 layers x rank 64 x (q 4096+4096, k 4096+1024, v 4096+1024, o 4096+4096)
    assert got["trainable_parameters"] == 32 * 64 * ((4096 + 4096) * 2 + (4096 + 1024) * 2) == 54_525_952
    assert any(note.startswith("torch_dtype auto loads the checkpoint's dtype, which the model given does not state")
               for note in got["notes"])
    assert not any("TRL's ModelConfig.dtype" in note for note in got["notes"])
    assert got["weight_bytes"] == 2 * got["parameters"]      # the base in 16 bits (the adapters' weights too)


@pytest.mark.parametrize("dtype, base_bytes", [("bfloat16", 2), ("float16", 2), ("float32", 4), (None, 2)])
def test_torch_dtype_auto_loads_the_checkpoints_dtype(tmp_path, capsys, dtype, base_bytes):
    """torch_dtype auto beside a config.json that states the checkpoint's dtype loads that dtype (transformers
    5.23's _get_dtype reads the config's dtype): the frozen LoRA base of Llama-3.2-1B (1,235,814,400 parameters) in
    2 or 4 bytes, the adapters' weights counted in 2 (their fp32 copy is the optimizer's); a config.json stating
    none is counted in bfloat16, noted."""
    config = json.loads((HF / "Llama-3.2-1B.json").read_text())
    config.pop("torch_dtype", None)
    if dtype is not None:
        config["torch_dtype"] = dtype
    (tmp_path / "config.json").write_text(json.dumps(config))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("torch_dtype: auto\nuse_peft: true\nlora_r: 8\nper_device_train_batch_size: 1\n"
                      "max_length: 512\nbf16: true\n")
    got = _json_model(capsys, ["--hf-config", str(tmp_path / "config.json")], "--hf-training-args", str(recipe))
    adapters = got["trainable_parameters"]
    assert got["parameters"] - adapters == 1_235_814_400
    assert got["weight_bytes"] == base_bytes * 1_235_814_400 + 2 * adapters
    said = f"dtype, {dtype} (the model's config.json)" if dtype else "which the model given does not state"
    assert any(said in note for note in got["notes"])


def test_the_2023_lora_recipe_under_deepspeed_stays_16_bit(capsys):
    """Under the handbook's ZeRO-3 launch (recipes/accelerate_configs/zero3.yaml) DeepSpeed casts every floating
    parameter to bf16 (_cast_module_mixed_precision): the frozen base auto counted in bfloat16 stays so."""
    plain = _json(capsys, "--hf-training-args", str(INPUTS / "handbook_sft_config_lora_2023.yaml"), "--devices", "8")
    got = _json(capsys, "--accelerate", str(INPUTS / "handbook_zero3.yaml"), "--hf-training-args",
                str(INPUTS / "handbook_sft_config_lora_2023.yaml"))
    assert any(note.startswith("torch_dtype auto") for note in got["notes"])
    assert got["parameters"] == plain["parameters"]
