"""Megatron-Bridge recipes by name (``--megatron-bridge-recipe``, ``models.bridge_recipes``).

The expected values are read by hand from Megatron-Bridge's source at commit 067f987df (the commit
``bridge_recipes.json`` names), file and line given with each, not from the extractor's output; the
counts are derived by hand from published sizes.  The extractor itself is checked on a small package
written here in the recipes' own forms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.models import bridge_recipes
from symbolic_cost.models.bridge_recipes_extract import Package, extract

ROOT = Path(__file__).resolve().parents[1]
LLAMA_2_7B = 6_738_415_616     # Llama 2 7B's parameters (its model card: 6.74 B; 4,096 wide, 32,000 tokens)
PER_DEVICE = 32 * ((4 * 4096 ** 2 + 3 * 4096 * 11008) // 2 + 2 * 4096) + 2 * 16128 * 4096 + 4096


def run(*args, env=None):
    done = subprocess.run([sys.executable, "-m", "symbolic_cost", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env)
    return done.returncode, done.stdout, done.stderr


def summary(*args):
    code, out, err = run("summary", "--json", *args)
    assert code == 0, err
    return json.loads(out)


def test_the_data_names_its_source():
    assert bridge_recipes.source()["repo"] == "NVIDIA-NeMo/Megatron-Bridge"
    assert bridge_recipes.source()["commit"] == "067f987df03b8355b03192d88d70f1709fedf51a"


def test_a_base_recipe_as_published():
    # src/megatron/bridge/recipes/llama/h100/llama2.py:25-57: from_hf_pretrained("meta-llama/Llama-2-7b-hf"),
    # TP 2, PP 1, CP 1, seq_length 4096, global batch 512, micro-batch 1; the alias llama2_7b_pretrain_config
    # (recipes/llama/llama2.py) names the same function
    r = bridge_recipes.recipe("llama2_7b_pretrain_config")
    model = r["config"]["model"]
    assert (r["function"], r["hf_model"], r["devices"], r["system"]) == (
        "llama2_7b_pretrain_2gpu_h100_bf16_config", "meta-llama/Llama-2-7b-hf", 2, "h100")
    assert (model["tensor_model_parallel_size"], model["pipeline_model_parallel_size"],
            model["context_parallel_size"], model["seq_length"]) == (2, 1, 1, 4096)
    assert r["config"]["train"] == {"global_batch_size": 512, "micro_batch_size": 1}
    # recipes/common.py:80-88 (_pretrain_common's DistributedDataParallelConfig), 124-130 (bf16_mixed),
    # 116-120 (TokenizerConfig: use_tokenizer_vocab_size=True); the recipe's NullTokenizer of
    # DEFAULT_NULL_TOKENIZER_VOCAB_SIZE (recipes/utils/tokenizer_utils.py:15: 32000)
    ddp = r["config"]["ddp"]
    assert (ddp["overlap_grad_reduce"], ddp["overlap_param_gather"], ddp["use_distributed_optimizer"]) == (
        True, True, True)
    assert r["config"]["mixed_precision"]["bf16"] is True
    assert r["config"]["tokenizer"] == {"tokenizer_type": "NullTokenizer", "vocab_size": 32000,
                                        "use_tokenizer_vocab_size": True}


def test_a_performance_recipe_through_its_base_and_helpers():
    # src/megatron/bridge/perf_recipes/llama/gb200/llama3.py:257-307: built on llama3_70b_pretrain_config
    # (Meta-Llama-3-70B), _perf_precision("fp8_cs") (perf_recipes/_common.py:99-118: current scaling,
    # first/last layers not kept in bf16), TP 1 PP 1 CP 1, global batch 256, micro-batch 2, Megatron-FSDP
    # "optim_grads_params", CPU offload of 40 layers' activations
    r = bridge_recipes.recipe("llama3_70b_pretrain_64gpu_gb200_fp8cs_config")
    c = r["config"]
    assert (r["hf_model"], r["devices"], r["system"]) == ("meta-llama/Meta-Llama-3-70B", 64, "gb200")
    assert (c["model"]["tensor_model_parallel_size"], c["model"]["pipeline_model_parallel_size"]) == (1, 1)
    assert c["train"] == {"global_batch_size": 256, "micro_batch_size": 2}
    assert (c["ddp"]["use_megatron_fsdp"], c["ddp"]["data_parallel_sharding_strategy"]) == (True, "optim_grads_params")
    assert (c["model"]["cpu_offloading"], c["model"]["cpu_offloading_num_layers"]) == (True, 40)
    # training/mixed_precision.py:284-298 (bf16_with_fp8_current_scaling_mixed: fp8 hybrid, tensorwise)
    assert (c["mixed_precision"]["fp8"], c["mixed_precision"]["fp8_recipe"]) == ("hybrid", "tensorwise")
    assert c["mixed_precision"]["first_last_layers_bf16"] is False
    # perf_recipes/_common.py:38 (_benchmark_common: use_tokenizer_vocab_size False); the recipe's 128256
    assert c["tokenizer"]["use_tokenizer_vocab_size"] is False and c["tokenizer"]["vocab_size"] == 128256


def test_a_moe_recipe_as_published():
    # src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py:32-132: TP 4, PP 2, EP 4, expert TP 1,
    # seq_length 4096, full recomputation, uniform, 1 layer
    m = bridge_recipes.recipe("qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config")["config"]["model"]
    assert (m["tensor_model_parallel_size"], m["pipeline_model_parallel_size"], m["expert_model_parallel_size"],
            m["expert_tensor_parallel_size"], m["seq_length"]) == (4, 2, 4, 1, 4096)
    assert (m["recompute_granularity"], m["recompute_method"], m["recompute_num_layers"]) == ("full", "uniform", 1)


def test_llama_2_7b_recipe_from_the_command_line():
    """The recipe's layout on 2 GPUs, and the vocabulary its tokenizer sets: 32,000 + 1 (the
    NullTokenizer's end-of-document id) padded to 128 x TP 2 = 256: 32,256 rows, 16,128 on each tensor
    rank.  By hand, per device: 32 layers of (4 x 4096^2 + 3 x 4096 x 11008) / 2 + two norms of 4096
    = 101,195,776; the embedding and the untied head 2 x 16,128 x 4,096; the final norm 4,096."""
    out = summary("--megatron-bridge-recipe", "llama2_7b_pretrain_config", "--preset", "llama-2-7b")
    layout = out["layout"]
    assert (layout["b"], layout["l"], layout["m1"], layout["d"], layout["p"], layout["micro_batches"]) == (
        1, 4096, 2, 1, 1, 512)
    assert (layout["distributed_optimizer"], layout["zero"]) == (True, 0)
    assert out["parameters_per_device"] == PER_DEVICE
    assert any("built here from --preset llama-2-7b" in n for n in out["notes"])


def test_megatron_fsdp_reads_as_zero_3():
    # perf_recipes/llama/b300/llama3.py:196-230: 64 B300, TP 1 PP 1, global batch 256, micro-batch 1,
    # Megatron-FSDP optim_grads_params (optimizer state, gradients and parameters sharded); the tokenizer
    # vocabulary not forced, so the model's own 128,256 unpadded
    out = summary("--megatron-bridge-recipe", "llama3_70b_pretrain_64gpu_b300_bf16_config", "--preset", "llama-3-70b")
    layout = out["layout"]
    assert (layout["d"], layout["micro_batches"], layout["zero"], layout["distributed_optimizer"]) == (64, 4, 3, False)
    assert out["parameters"] == 70_553_706_496        # Llama 3 70B's 70.55 B (its config; test_hf_families)


def test_a_yaml_overrides_the_recipe(tmp_path):
    """Megatron-Bridge's override YAML: the keys it gives replace the recipe's."""
    override = tmp_path / "override.yaml"
    override.write_text("model:\n  tensor_model_parallel_size: 1\ntrain:\n  global_batch_size: 256\n")
    out = summary("--megatron-bridge-recipe", "llama2_7b_pretrain_config", "--preset", "llama-2-7b",
                  "--nemo-recipe", str(override), "--devices", "8")
    layout = out["layout"]
    assert (layout["m1"], layout["d"], layout["micro_batches"]) == (1, 8, 256 // 8)
    assert out["parameters"] == LLAMA_2_7B + 2 * (32128 - 32000) * 4096     # padded to 128 x TP 1


def test_an_override_yaml_of_comments_only_overrides_nothing(tmp_path):
    """Megatron-Bridge's ``examples/recipes/llama/conf/template_overrides.yaml`` is every key commented
    out: OmegaConf.load reads a YAML of no value as an empty config, so the recipe runs as published."""
    override = tmp_path / "template_overrides.yaml"
    override.write_text("# model:\n#   tensor_model_parallel_size: 1\n# train:\n#   global_batch_size: 256\n")
    words = ("--megatron-bridge-recipe", "llama2_7b_pretrain_config", "--preset", "llama-2-7b")
    assert summary(*words, "--nemo-recipe", str(override)) == summary(*words)


def test_a_performance_scripts_override_merges_its_config_container(tmp_path):
    """Megatron-Bridge's ``scripts/performance/configs/*.yaml`` (2025) nest their overrides under
    ``ConfigContainer``, the subtree ``run_script.py`` merges; ``ddp.use_torch_fsdp2: false`` is
    the default, inert."""
    plain, wrapped = tmp_path / "plain.yaml", tmp_path / "wrapped.yaml"
    plain.write_text("model:\n  tensor_model_parallel_size: 1\ntrain:\n  global_batch_size: 256\n")
    wrapped.write_text("ConfigContainer:\n  model:\n    tensor_model_parallel_size: 1\n  train:\n"
                       "    global_batch_size: 256\n  ddp:\n    use_torch_fsdp2: false\n")
    words = ("--megatron-bridge-recipe", "llama2_7b_pretrain_config", "--preset", "llama-2-7b", "--devices", "8")
    assert summary(*words, "--nemo-recipe", str(wrapped)) == summary(*words, "--nemo-recipe", str(plain))


def test_the_recipe_model_through_the_hub_cache(tmp_path):
    pytest.importorskip("huggingface_hub")
    from tests.test_hub import write_cache
    cache = write_cache(tmp_path / "hub")
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    code, out, err = run("summary", "--json", "--megatron-bridge-recipe", "llama2_7b_pretrain_config", env=env)
    assert code == 0, err
    assert json.loads(out)["parameters_per_device"] == PER_DEVICE


@pytest.mark.parametrize("args, words", [
    (["--megatron-bridge-recipe", "llama2_7b_pretrain_confg"], ["not a recipe", "llama2_7b_pretrain_config"]),
    (["--megatron-bridge-recipe", "llama3_70b_pretrain_64gpu_gb200_fp8cs_config", "--preset", "llama-3-70b"],
     ["model.cpu_offloading", "not modelled"]),
    (["--megatron-bridge-recipe", "llama2_7b_pretrain_config", "--preset", "llama-2-7b", "--precision", "fp16"],
     ["--precision", "decide"]),
    (["--megatron-bridge-recipe", "llama2_7b_pretrain_config", "--preset", "llama-2-7b", "--vocab-size", "5"],
     ["--vocab-size"]),
    (["--megatron-bridge-recipe", "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config", "--preset", "llama-3-70b"],
     ["expert_model_parallel_size"]),
])
def test_refusals_name_what_and_why(args, words):
    code, out, err = run("summary", *args)
    assert code != 0 and "Traceback" not in err
    for word in words:
        assert word in err


def test_a_moe_recipe_on_its_model():
    out = summary("--megatron-bridge-recipe", "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config", "--hf-config",
                  str(ROOT / "tests" / "hf_configs" / "Qwen3-30B-A3B.json"))
    layout = out["layout"]
    # 8 GPUs / (TP 4 x PP 2): d 1; _pretrain_common's global batch 32 of micro-batch 2 (common.py:67-69)
    assert (layout["m1"], layout["p"], layout["d"], layout["ep"], layout["etp"], layout["micro_batches"]) == (
        4, 2, 1, 4, 1, 16)
    assert layout["recompute"] == "full"


WALKED = {
    "training/__init__.py": "",
    "training/mixed_precision.py": """
        def register(f):
            return f

        @register
        def bf16_mixed():
            return MixedPrecisionConfig(bf16=True)

        @register
        def bf16_with_fp8_mixed():
            cfg = bf16_mixed()
            cfg.fp8 = "hybrid"
            return cfg
        """,
    "recipes/__init__.py": "",
    "recipes/common.py": """
        import os

        def _pretrain_common():
            out = os.path.join(os.getcwd(), "x")
            return ConfigContainer(ddp=DistributedDataParallelConfig(overlap_grad_reduce=True, path=out),
                                   train=TrainingConfig(micro_batch_size=2, global_batch_size=32),
                                   mixed_precision="bf16_mixed")
        """,
    "recipes/fam/__init__.py": "",
    "recipes/fam/h100.py": """
        from megatron.bridge.recipes.common import _pretrain_common

        LONG: int = 8192

        def fam_7b_pretrain_8gpu_h100_bf16_config():
            cfg = _pretrain_common()
            cfg.model = AutoBridge.from_hf_pretrained("org/Fam-7B").to_megatron_provider(load_weights=False)
            cfg.model.tensor_model_parallel_size = 2
            cfg.dataset.seq_length = LONG
            cfg.model.mystery = compute_at_run_time()
            return cfg
        """,
    "recipes/fam/aliases.py": """
        from megatron.bridge.recipes.fam.h100 import fam_7b_pretrain_8gpu_h100_bf16_config as fam_7b_pretrain_config
        """,
    "perf_recipes/__init__.py": "",
    "perf_recipes/fam.py": """
        from megatron.bridge.recipes.fam.aliases import fam_7b_pretrain_config
        from megatron.bridge.training.mixed_precision import bf16_mixed, bf16_with_fp8_mixed

        def _precision(kind):
            if kind == "bf16":
                cfg = bf16_mixed()
            elif kind == "fp8":
                cfg = bf16_with_fp8_mixed()
            cfg.grad_reduce_in_fp32 = False
            return cfg

        def _common(cfg):
            cfg.train.micro_batch_size = 1
            if cfg.model.tensor_model_parallel_size > 1:
                cfg.model.sequence_parallel = True

        def fam_7b_pretrain_16gpu_gb200_fp8_config():
            cfg = fam_7b_pretrain_config()
            cfg.mixed_precision = _precision("fp8")
            _common(cfg)
            return cfg
        """,
}


def extracted(tmp_path, files: dict) -> dict:
    """The recipes ``extract`` finds in a package of ``files`` (path under ``megatron/bridge``: text)."""
    root = tmp_path / "src" / "megatron" / "bridge"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    (root / "__init__.py").write_text("")
    return extract(Package(root))


def test_the_walk_follows_the_recipes_forms(tmp_path):
    """A package written in the recipes' forms: a base that builds dataclasses with keywords, a model
    from a Hugging Face id, a module constant, an alias re-exported, a helper applied to ``cfg`` with a
    condition on a field it knows, a precision chosen by an ``if`` on its argument and a registered
    recipe; what it cannot evaluate is listed, not guessed."""
    recipes = extracted(tmp_path, WALKED)
    assert set(recipes) == {"fam_7b_pretrain_8gpu_h100_bf16_config", "fam_7b_pretrain_config",
                            "fam_7b_pretrain_16gpu_gb200_fp8_config"}
    base = recipes["fam_7b_pretrain_config"]
    assert (base["function"], base["hf_model"], base["devices"], base["system"]) == (
        "fam_7b_pretrain_8gpu_h100_bf16_config", "org/Fam-7B", 8, "h100")
    assert base["config"]["model"] == {"tensor_model_parallel_size": 2}
    assert base["config"]["dataset"] == {"seq_length": 8192}
    assert base["config"]["ddp"] == {"overlap_grad_reduce": True}           # path: not known here, left out
    assert base["config"]["mixed_precision"] == {"bf16": True}              # the registered recipe, by name
    assert any("cfg.model.mystery" in s for s in base["skipped"])
    perf = recipes["fam_7b_pretrain_16gpu_gb200_fp8_config"]["config"]
    assert perf["train"] == {"micro_batch_size": 1, "global_batch_size": 32}
    assert perf["model"]["sequence_parallel"] is True
    assert perf["mixed_precision"] == {"bf16": True, "fp8": "hybrid", "grad_reduce_in_fp32": False}


def test_merged_overrides_reach_into_sections():
    assert bridge_recipes.merged({"model": {"a": 1}, "x": 1}, {"model": {"b": 2}, "x": {"y": 3}}) == {
        "model": {"a": 1, "b": 2}, "x": {"y": 3}}


def test_an_unknown_recipe_from_python():
    with pytest.raises(InputError, match="not a recipe"):
        bridge_recipes.recipe("no_such_recipe_config")


TUTORIAL = ROOT / "tests" / "framework_inputs" / "bridge_tutorial_llama32_1b_pretrain.yaml"


def test_a_published_override_yaml_on_its_recipe():
    """Megatron-Bridge's tutorial YAML (tutorials/recipes/llama/conf/llama32_1b_pretrain.yaml: sequence
    4,096 for the data and the model, global batch 8, micro-batch 1, TP 1, PP 1, CP 1) over llama32_1b_pretrain_config (TP 1, PP 1), under its
    README's torchrun --nproc_per_node=2: d = 2 and 8 / (1 x 2) = 4 micro-batches."""
    out = summary("--megatron-bridge-recipe", "llama32_1b_pretrain_config", "--nemo-recipe", str(TUTORIAL),
                  "--hf-config", str(ROOT / "tests" / "hf_configs" / "Llama-3.2-1B.json"), "--devices", "2")
    layout = out["layout"]
    assert (layout["l"], layout["b"], layout["m1"], layout["d"], layout["micro_batches"]) == (4096, 1, 1, 2, 4)
    assert any("replaces the recipe's 1 GPUs" in n for n in out["notes"])


def test_an_override_yaml_alone_is_told_to_name_its_recipe():
    code, out, err = run("summary", "--nemo-recipe", str(TUTORIAL), "--devices", "2")
    assert code != 0 and "--megatron-bridge-recipe" in err and "overrides a recipe" in err


def test_a_recipe_model_missing_from_an_offline_cache_is_named(tmp_path):
    env = dict(os.environ, HF_HUB_CACHE=str(tmp_path / "empty"), HF_HUB_OFFLINE="1")
    code, out, err = run("summary", "--megatron-bridge-recipe", "llama2_7b_pretrain_config", env=env)
    assert code == 2 and "meta-llama/Llama-2-7b-hf" in err and "--hf-config" in err and err.count("\n") == 1


@pytest.mark.parametrize("override, state_bytes", [
    ("", 2 + 4 + 4),
    ("optimizer:\n  exp_avg_dtype: torch.bfloat16\n  exp_avg_sq_dtype: torch.bfloat16\n", 2 + 2 + 2),
    ("optimizer:\n  use_precision_aware_optimizer: false\n", 4 + 4 + 4)])
def test_a_precision_aware_recipe_keeps_its_optimizer_states_in_their_dtypes(tmp_path, override, state_bytes):
    """qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config (src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py at
    067f987) sets use_precision_aware_optimizer with fp32 masters and moments: Transformer Engine's FusedAdam
    keeps each bf16 weight's fp32 master as its low 16 bits (store_param_remainders), 2 + 4 + 4 bytes; bf16
    moments make it 2 + 2 + 2, and the plain distributed optimizer 4 + 4 + 4.  Over 16 GPUs, experts 16 ways
    (EP 16) and everything else sharded 16 ways by the distributed optimizer: a sixteenth of the model's."""
    yaml = tmp_path / "override.yaml"
    yaml.write_text(override or "# the recipe as published\n")
    out = summary("--megatron-bridge-recipe", "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config", "--hf-config",
                  str(ROOT / "tests" / "hf_configs" / "Qwen3-30B-A3B.json"), "--nemo-recipe", str(yaml))
    assert (out["layout"]["d"], out["layout"]["ep"], out["layout"]["m1"], out["layout"]["p"]) == (16, 16, 1, 1)
    assert out["optimizer_bytes"] * 16 == state_bytes * out["parameters"]


def test_a_recipe_that_builds_its_pipeline_at_run_time_takes_that_functions_layout(tmp_path):
    """DeepSeek-V3's recipes set _pipeline_model_parallel_layout_builder to _get_deepseek_v3_pipeline_layout,
    which the extraction does not run (src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py at 067f987):
    at PP 16 its layout_map puts the embedding and 4 layers on the first stage, 4 layers on each of the next 14,
    and the last layer, the MTP module and the loss on the last: 4 + 14 x 4 + 1 = 61.  A PP of 2 is not in the
    map (Megatron-Bridge leaves the layout unset): refused."""
    args = ("--megatron-bridge-recipe", "deepseek_v3_pretrain_256gpu_b200_bf16_config", "--hf-config",
            str(ROOT / "tests" / "hf_configs" / "DeepSeek-V3.json"))
    out = summary(*args)
    assert (out["layout"]["p"], out["layout"]["pipeline_layout"]) == (16, "Et*4|(t*4|)*14tmL")
    yaml = tmp_path / "pp2.yaml"
    yaml.write_text("model:\n  pipeline_model_parallel_size: 2\n")
    code, _, err = run("summary", *args, "--nemo-recipe", str(yaml))
    assert code == 2 and "_get_deepseek_v3_pipeline_layout" in err and "PP 2 x VP 1" in err
