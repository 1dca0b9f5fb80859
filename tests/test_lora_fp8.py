"""LoRA over a base run in FP8 (Megatron-Bridge publishes 13 such PEFT recipes at 067f987df, e.g.
``llama3_70b_peft_8gpu_h100_fp8cs_config``): the frozen base's products at the recipe's rate, keeping
no input, with their quantised weight copies; the adapters in 16-bit.

Counted by hand for GPT-2 (12 layers of 768; products qkv 768 x 2304, o 768 x 768, fc1 768 x 3072,
fc2 3072 x 768) and LoRA of rank 8 on ``qkv``: 8 x (768 + 2304) trainable parameters a layer.
"""

import json

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.models.lora import LoRA
from symbolic_cost.timing.hardware import calibrated
from symbolic_cost.timing.step import step_time_breakdown

GPT2 = preset("gpt2")
ADAPTERS = 12 * 8 * (768 + 2304)
MATRICES = 12 * (768 * 2304 + 768 * 768 + 768 * 3072 + 3072 * 768)      # the base's weight-matrix elements
BASE = dict(b=4, l=1024, precision="bf16")


def _cost(**kw):
    return model_cost(GPT2, Training(**BASE, **kw))


def test_the_adapters_train_and_the_base_keeps_fp8_copies_and_no_inputs():
    lora, both, fp8 = _cost(lora=LoRA(8, ("qkv",))), _cost(lora=LoRA(8, ("qkv",)), fp8="tensorwise"), \
        _cost(fp8="tensorwise")
    assert lora.trainable_parameters == both.trainable_parameters == ADAPTERS
    # a frozen product keeps no input for a weight gradient it does not compute: the quantised copies
    # FP8 alone keeps are not kept, so the activations are LoRA's own
    assert both.activation_bytes == lora.activation_bytes < fp8.activation_bytes
    # the recipe's copies of the base's matrices are there whether the base trains or not: under current
    # scaling one byte an element, and each product's scaling state, 3 tensors (input, weight, output
    # gradient) x 2 fp32 values (Transformer Engine's Float8CurrentScaling), 4 products a layer
    copies = both.weight_bytes - lora.weight_bytes
    assert copies == fp8.weight_bytes - _cost().weight_bytes == MATRICES + 12 * 4 * 3 * 2 * 4


def test_the_base_runs_at_the_fp8_rate():
    """FP8 doubles H100's matrix peak (1,979 against 989 TFLOP/s): on Llama 3 8B, whose products
    dominate its step, the frozen base's products take less time and the adapters (16-bit) the same,
    so the step's compute falls, by less than half.  FP8 alone saves more: its weight gradients are
    FP8 products too, which a frozen base does not run."""
    h100, arch, lora = calibrated("h100"), preset("llama-3-8b"), LoRA(16, ("q", "k", "v", "o"))

    def compute(**kw):
        return step_time_breakdown(model_cost(arch, Training(b=2, l=4096, precision="bf16", flash=True, **kw)),
                                   h100)["compute"]
    adapted, both = compute(lora=lora), compute(lora=lora, fp8="tensorwise")
    assert adapted / 2 < both < adapted
    assert compute(fp8="tensorwise") / compute() < both / adapted


@pytest.mark.parametrize("kw, words", [
    (dict(lora=LoRA(8, ("qkv",), base="nf4"), fp8="tensorwise"), "quantised base"),
    (dict(lora=LoRA(8, ("qkv",)), fp8="fp8-params"), "fp8-params"),
])
def test_what_is_not_modelled_is_refused(kw, words):
    with pytest.raises(InputError, match=words):
        Training(**BASE, **kw)


def test_from_the_command_line(capsys):
    assert main(["summary", "--preset", "gpt2", "--set", "b=4", "l=1024", "--precision", "bf16", "--lora-rank", "8",
                 "--lora-targets", "qkv", "--fp8", "tensorwise", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trainable_parameters"] == ADAPTERS and out["layout"]["fp8"] == "tensorwise"
