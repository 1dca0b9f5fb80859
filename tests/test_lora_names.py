"""LoRA targets written as peft's ``target_modules`` (the models' module names: ``q_proj``, ...,
GPT-2's ``c_attn``, ``c_proj``, ``c_fc``) count what peft itself adapts: the oracle is
``peft.get_peft_model`` on the same models (``test_lora_peft.peft_counts``), given the same names."""

import pytest

peft = pytest.importorskip("peft")

from test_hf_families import CONFIGS, scaled  # noqa: E402
from test_lora_peft import CASES, peft_counts  # noqa: E402

from symbolic_cost.checks import InputError  # noqa: E402
from symbolic_cost.cli import main  # noqa: E402
from symbolic_cost.models import Training, model_cost  # noqa: E402
from symbolic_cost.models.config import from_config  # noqa: E402
from symbolic_cost.models.lora import LoRA  # noqa: E402


@pytest.mark.parametrize("name, rank, modules", [c[:3] for c in CASES], ids=[f"{c[0]}-{'-'.join(c[2])}" for c in CASES])
def test_peft_module_names_count_as_peft(name, rank, modules):
    config = scaled(CONFIGS[name], 2)
    trainable, frozen = peft_counts(config, rank, modules)
    cost = model_cost(from_config(config), Training(b=1, l=16, lora=LoRA(rank, tuple(modules))))
    assert (cost.trainable_parameters, cost.parameters - cost.trainable_parameters) == (trainable, frozen)


def test_peft_names_beside_short_names_and_refusals(capsys):
    assert LoRA(8, ("q_proj", "v")).targets == ("q", "v")
    assert LoRA(8, ("c_proj",)).targets == ("o", "down")      # peft matches both of GPT-2's c_proj
    with pytest.raises(InputError, match="twice"):
        LoRA(8, ("c_proj", "o_proj"))
    with pytest.raises(InputError, match="peft's module names"):
        LoRA(8, ("query",))
    assert main(["summary", "--preset", "llama-2-7b", "--lora-rank", "8", "--lora-targets", "q_proj,v_proj"]) == 0
    assert "lora rank 8 on q,v" in capsys.readouterr().out


def test_one_target_named_as_text_is_that_target():
    """``LoRA(8, "qkv")``: the fused projection, as ``("qkv",)`` names it, not its three letters."""
    from symbolic_cost.models.lora import LoRA
    assert LoRA(8, "qkv").targets == LoRA(8, ("qkv",)).targets == ("qkv",)
