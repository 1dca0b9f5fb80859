"""LoRA parameter counts against the ``peft`` library (pinned in CI) applied to ``transformers``
models built on the meta device: trainable (the adapters) and frozen (the base) parameters,
exactly, for several families, ranks and target modules.

Each case names peft's target modules (the model's own module names) and the library's
targets for the same layers (``models.lora.TARGETS``: fused products are sliced by name).
The models are built at two layers (``test_hf_families.scaled``); the counts are per model.
"""

import pytest

peft = pytest.importorskip("peft")

from test_hf_families import CONFIGS, hf_model, scaled  # noqa: E402

from symbolic_cost.models import Training, model_cost  # noqa: E402
from symbolic_cost.models.config import from_config  # noqa: E402
from symbolic_cost.models.lora import LoRA  # noqa: E402

LLAMA = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
CASES = [
    ("Llama-3.2-1B", 8, ["q_proj", "v_proj"], ("q", "v")),
    ("Llama-3.2-1B", 16, LLAMA, ("q", "k", "v", "o", "gate", "up", "down")),
    ("Qwen2.5-7B", 4, ["q_proj", "k_proj", "v_proj", "o_proj"], ("q", "k", "v", "o")),
    ("Mistral-7B-v0.1", 64, ["k_proj", "down_proj"], ("k", "down")),
    ("gpt2", 8, ["c_attn"], ("qkv",)),
    ("gpt2", 4, ["c_attn", "c_proj", "c_fc"], ("qkv", "o", "down", "up")),
    ("Phi-3-mini-4k-instruct", 8, ["qkv_proj", "gate_up_proj", "o_proj", "down_proj"],
     ("qkv", "gate_up", "o", "down")),
]


def peft_counts(config: dict, rank: int, modules: list[str]) -> tuple[int, int]:
    """(trainable, frozen) parameters of ``peft.get_peft_model`` on the meta-device model."""
    model = peft.get_peft_model(hf_model(config), peft.LoraConfig(r=rank, target_modules=modules))
    trainable, total = model.get_nb_trainable_parameters()
    return trainable, total - trainable


@pytest.mark.parametrize("name, rank, modules, targets", CASES,
                         ids=[f"{c[0]}-r{c[1]}-{'-'.join(c[3])}" for c in CASES])
def test_lora_parameters_equal_peft(name, rank, modules, targets):
    config = scaled(CONFIGS[name], 2)
    trainable, frozen = peft_counts(config, rank, modules)
    cost = model_cost(from_config(config), Training(b=1, l=16, lora=LoRA(rank, targets)))
    assert cost.trainable_parameters == trainable
    assert cost.parameters - cost.trainable_parameters == frozen
