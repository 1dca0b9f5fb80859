"""Megatron-Bridge's fine-tuning recipes and YAML ``peft`` sections (``models.megatron_bridge_peft``).

A Bridge PEFT recipe (``llama32_1b_peft_config`` at 067f987df: ``recipes/llama/h100/llama3.py``,
``peft_cfg = default_peft_config(peft_scheme)`` with ``peft_scheme="lora"``) trains Megatron-Bridge's
``LoRA`` (``peft/lora.py``: ``dim`` 32 on ``linear_qkv``, ``linear_proj``, ``linear_fc1``,
``linear_fc2``), one adapter pair per fused product.  The counts are by hand from the models'
published sizes: an adapter of rank ``r`` on a product ``in -> out`` trains ``r (in + out)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from symbolic_cost.cli import main
from test_bridge_recipes import extracted

HF = Path(__file__).parent / "hf_configs"
LLAMA_32_1B = 1_235_814_400


def llama32_1b_adapters(r):
    """Llama 3.2 1B: 16 layers of 2,048, 32 query heads and 8 key-value heads of 64, MLP 8,192 gated."""
    qkv, o, gate_up, down = 2048 + (2048 + 2 * 512), 2048 + 2048, 2048 + 2 * 8192, 8192 + 2048
    return 16 * r * (qkv + o + gate_up + down)


def qwen3_30b_a3b_attention_adapters(r):
    """Qwen3-30B-A3B: 48 layers of 2,048, 32 query heads and 4 key-value heads of 128."""
    qkv, o = 2048 + (4096 + 2 * 512), 4096 + 2048
    return 48 * r * (qkv + o)


def _json(capsys, *args):
    assert main(["summary", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _error(capsys, *args):
    assert main(["summary", *args]) == 2
    return capsys.readouterr().err


def test_a_peft_recipe_trains_its_adapters_only(capsys):
    got = _json(capsys, "--megatron-bridge-recipe", "llama32_1b_peft_config", "--hf-config",
                str(HF / "Llama-3.2-1B.json"), "--devices", "8")
    assert got["trainable_parameters"] == llama32_1b_adapters(32) == 19_398_656
    assert got["parameters"] == LLAMA_32_1B + llama32_1b_adapters(32)


def test_the_tutorials_override_sets_the_rank(tmp_path, capsys):
    # Megatron-Bridge's tutorials/recipes/llama/conf/llama32_1b_finetune.yaml sets peft: dim 8, alpha 16
    override = tmp_path / "finetune.yaml"
    override.write_text("peft:\n  dim: 8\n  alpha: 16\n")
    got = _json(capsys, "--megatron-bridge-recipe", "llama32_1b_peft_config", "--nemo-recipe", str(override),
                "--hf-config", str(HF / "Llama-3.2-1B.json"), "--devices", "8")
    assert got["trainable_parameters"] == llama32_1b_adapters(8)


def test_a_moe_recipe_adapts_its_attention(capsys):
    # qwen3_30b_a3b_peft_4gpu_h100_bf16_config (recipes/qwen/h100/qwen3_moe.py): dim 8, linear_qkv, linear_proj
    got = _json(capsys, "--megatron-bridge-recipe", "qwen3_30b_a3b_peft_config", "--hf-config",
                str(HF / "Qwen3-30B-A3B.json"))
    assert got["trainable_parameters"] == qwen3_30b_a3b_attention_adapters(8) == 5_111_808


@pytest.mark.parametrize("peft, refused", [
    ("_target_: megatron.bridge.peft.dora.DoRA", "DoRA"),
    ("_target_: megatron.bridge.peft.lora.LoRA\n  dropout: 0.1", "peft.dropout"),
    ("_target_: megatron.bridge.peft.lora.LoRA\n  target_modules: [linear_qkv, in_proj]", "'in_proj'"),
    ("_target_: megatron.bridge.peft.lora.LoRA\n  exclude_modules: [linear_fc2]", "peft.exclude_modules"),
    ("_target_: megatron.bridge.peft.lora.LoRA\n  mystery: 1", "peft.mystery"),
    ("dim: 8", "peft._target_ missing"),
    # a fuzz of the reader: these ended in a TypeError or named no key
    ("_target_: megatron.bridge.peft.lora.LoRA\n  target_modules: 5", "peft.target_modules must be a list"),
    ("_target_: megatron.bridge.peft.lora.LoRA\n  target_modules: [[linear_qkv]]", "peft.target_modules must be a list"),
    ("_target_: megatron.bridge.peft.lora.LoRA\n  target_modules: linear_qkv", "peft.target_modules must be a list"),
    ("_target_: megatron.bridge.peft.lora.LoRA\n  dropout: abc", "peft.dropout must be a number"),
    ("_target_: megatron.bridge.peft.lora.LoRA\n  dropout: {}", "peft.dropout must be a number"),
])
def test_what_is_not_modelled_is_refused_by_name(tmp_path, capsys, peft, refused):
    override = tmp_path / "o.yaml"
    override.write_text(f"peft:\n  {peft}\n")
    err = _error(capsys, "--megatron-bridge-recipe", "llama32_1b_pretrain_config", "--nemo-recipe", str(override),
                 "--hf-config", str(HF / "Llama-3.2-1B.json"), "--devices", "8")
    assert refused in err


def test_adapters_on_experts_are_refused(tmp_path, capsys):
    override = tmp_path / "o.yaml"
    override.write_text("peft:\n  target_modules: [linear_qkv, linear_fc1]\n")
    err = _error(capsys, "--megatron-bridge-recipe", "qwen3_30b_a3b_peft_config", "--nemo-recipe", str(override),
                 "--hf-config", str(HF / "Qwen3-30B-A3B.json"))
    assert "linear_fc1" in err and "experts" in err


def test_the_command_lines_lora_beside_the_files_is_refused(capsys):
    err = _error(capsys, "--megatron-bridge-recipe", "llama32_1b_peft_config", "--hf-config",
                 str(HF / "Llama-3.2-1B.json"), "--devices", "8", "--lora-rank", "4")
    assert err.startswith("symbolic-cost: error: --lora-rank: the LoRA of --megatron-bridge-recipe decides it")


PACKAGE = {
    "training/__init__.py": "",
    "training/mixed_precision.py": "",
    "recipes/__init__.py": "",
    "recipes/utils.py": """
        def default_peft_config(peft_scheme, **kwargs):
            if peft_scheme is None:
                return None
            return LoRA(**kwargs)
        """,
    "recipes/fam.py": """
        from megatron.bridge.recipes.utils import default_peft_config

        def fam_1b_peft_1gpu_h100_bf16_config(peft_scheme="lora"):
            cfg = ConfigContainer()
            cfg.model = AutoBridge.from_hf_pretrained("org/Fam-1B").to_megatron_provider(load_weights=False)
            if isinstance(peft_scheme, str) and peft_scheme.lower() in ["lora", "dora"]:
                peft_cfg = default_peft_config(peft_scheme)
                peft_cfg.dim = 8
                cfg.peft = peft_cfg
            return cfg

        def fam_1b_sft_1gpu_h100_bf16_config():
            cfg = ConfigContainer()
            cfg.model = AutoBridge.from_hf_pretrained("org/Fam-1B").to_megatron_provider(load_weights=False)
            cfg.peft = default_peft_config(None)
            return cfg
        """,
}


def test_the_extractor_records_the_adapter_a_recipe_sets(tmp_path):
    recipes = extracted(tmp_path, PACKAGE)
    assert recipes["fam_1b_peft_1gpu_h100_bf16_config"]["config"]["peft"] == {
        "_target_": "megatron.bridge.peft.lora.LoRA", "dim": 8}
    assert "peft" not in recipes["fam_1b_sft_1gpu_h100_bf16_config"]["config"]
