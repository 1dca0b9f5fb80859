"""torchao's float8 training (torchtitan's ``[float8]``) against torchao itself.

The oracle is torchao's ``Float8Linear`` run on the CPU (torchao pinned in ``.ci/run``): a
``TorchDispatchMode`` records, in forward and in backward, every tensor cast to a float8 dtype
(its elements) and whether each matrix product reads float8 operands; autograd's saved-tensor hooks
record what the layer keeps for backward.  Nothing here reads the library's numbers to make an
expected value: the products are GPT-2's (768 wide, 3,072 in the MLP, 2,304 for q, k and v), by hand.

What torchao does, and the library must count (``models.optimizers``, ``ops.quantise.dynamic_casts``):

* it keeps the 16-bit input of every product (activation memory as without float8) and no quantised
  weight copy;
* forward casts the input and the weight, backward the output gradient twice (along each axis), the
  weight and the input again; each cast of ``n`` elements is timed as ``n (2 x 2 + 1)`` bytes (a pass
  to find the scale, a pass to cast, one byte written): the bytes per element are the library's stated
  assumption, the casts and their sizes torchao's;
* every product of ``tensorwise`` and ``rowwise`` reads float8 operands in both passes, while
  ``rowwise_with_gw_hp``'s weight gradient is a 16-bit product, which the torchtitan reader refuses.
"""

import pytest

torch = pytest.importorskip("torch")
torchao_float8 = pytest.importorskip("torchao.float8")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from pathlib import Path  # noqa: E402

from symbolic_cost.checks import InputError  # noqa: E402
from symbolic_cost.cli import main  # noqa: E402
from symbolic_cost.models import Training, model_cost  # noqa: E402
from symbolic_cost.models import config  # noqa: E402
from symbolic_cost.models.config import preset  # noqa: E402

TOKENS = 32                                     # b=2 sequences of l=16
PRODUCTS = {"qkv_proj": (768, 2304), "v_proj": (768, 768), "fc1": (768, 3072), "fc2": (3072, 768)}
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)


class _Record(TorchDispatchMode):
    """The elements of each tensor cast to float8, and for each matrix product whether it reads float8."""

    def __init__(self):
        super().__init__()
        self.casts, self.products = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.dtype in FLOAT8:
            self.casts.append(out.numel())
        if func is torch.ops.aten.mm.default:
            self.products.append(all(type(a).__name__ == "Float8TrainingTensor" for a in args[:2]))
        return out


def _torchao(recipe: str, k: int, n: int):
    """One ``Float8Linear(k, n)`` in bf16 under ``recipe``, forward and backward over ``TOKENS`` rows:
    (forward's record, backward's record, bytes kept for backward other than the weight)."""
    layer = torch.nn.Sequential(torch.nn.Linear(k, n, bias=False).to(torch.bfloat16))
    torchao_float8.convert_to_float8_training(layer, config=torchao_float8.Float8LinearConfig.from_recipe_name(recipe))
    return _traced(layer, layer[0].weight, k, _Record)


def _traced(layer, weight, k: int, record):
    """``layer`` forward and backward over ``TOKENS`` rows of ``k`` bf16 features, each pass under a
    ``record()`` dispatch mode: (forward's record, backward's, bytes kept for backward but the weight)."""
    x = torch.randn(TOKENS, k, dtype=torch.bfloat16, requires_grad=True)
    kept = []

    def pack(t):
        if t.untyped_storage().data_ptr() != weight.untyped_storage().data_ptr():
            kept.append(t.numel() * t.element_size())
        return t

    forward, backward = record(), record()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), forward:
        y = layer(x)
    with backward:
        y.backward(torch.randn_like(y))
    return forward, backward, sum(kept)


def _layer(fp8):
    cost = model_cost(preset("gpt2"), Training(b=2, l=16, precision="bf16", fp8=fp8))
    return {r.name: r for r in cost.stack[1][0]}


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_casts_kept_inputs_and_products_as_torchao_runs_them(recipe):
    rows, plain = _layer(f"torchao-{recipe}"), _layer(None)
    for name, (k, n) in PRODUCTS.items():
        forward, backward, kept = _torchao(recipe, k, n)
        assert rows[name].act_buffer == kept == TOKENS * k * 2 == plain[name].act_buffer, name   # the bf16 input
        assert forward.products == [True] and backward.products == [True, True], name
        assert rows[name].fp8 and not rows[name].fp4, name
        cast = rows[f"{name}_cast"]
        assert (cast.mem_fwd, cast.mem_bwd) == (sum(forward.casts) * 5, sum(backward.casts) * 5), name
        assert cast.flops_fwd == cast.flops_bwd == 0, name


def test_no_quantised_weight_copy_and_no_scaling_state():
    """torchao casts its weights where they are used: no cached copy (the weights' bytes as in bf16) and
    no amax history (dynamic scales)."""
    plain = model_cost(preset("gpt2"), Training(b=2, l=16, precision="bf16"))
    for fp8 in ("torchao-tensorwise", "torchao-rowwise"):
        cost = model_cost(preset("gpt2"), Training(b=2, l=16, precision="bf16", fp8=fp8))
        assert cost.weight_bytes == plain.weight_bytes, fp8


def test_weight_gradient_in_16_bit_is_refused_by_the_reader(tmp_path, capsys):
    """``rowwise_with_gw_hp`` runs its weight gradient as a bf16 product (torchao: a product without float8
    operands in backward), which the library does not model: the torchtitan reader refuses it by name."""
    _, backward, _ = _torchao("rowwise_with_gw_hp", 768, 3072)
    assert backward.products == [True, False]
    text = (Path(__file__).parent / "framework_inputs" / "llama3_8b.toml").read_text()
    path = tmp_path / "gw_hp.toml"
    path.write_text(text.replace('# converters = ["float8"]', 'converters = ["float8"]').replace(
        "[float8]", '[float8]\nrecipe_name = "rowwise_with_gw_hp"'))
    assert main(["summary", "--torchtitan", str(path), "--devices", "8"]) == 2
    assert "rowwise_with_gw_hp" in capsys.readouterr().err


def test_float8_gathers_are_tensor_wise_only():
    with pytest.raises(InputError, match="fp8_gather"):
        Training(b=1, l=16, d=8, zero=3, precision="bf16", fp8="torchao-rowwise", fp8_gather=True)
    Training(b=1, l=16, d=8, zero=3, precision="bf16", fp8="torchao-tensorwise", fp8_gather=True)


@pytest.mark.parametrize("reshard, gathers", [(True, 2), (False, 1)])
def test_float8_gathers_cast_only_each_rank_s_shard(reshard, gathers):
    """torchao's float8 all-gather (``WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather``) casts each
    rank's shard before FSDP gathers it, so the product's weight arrives in float8: GPT-2's fc1 weight
    (768 x 3,072) sharded over 8 ranks is cast 294,912 elements at a time, once a gather (forward, and
    backward where FSDP gathers again), beside the input (32 x 768) and the output gradient (32 x 3,072,
    twice) at 5 bytes an element."""
    cost = model_cost(preset("gpt2"), Training(b=2, l=16, d=8, zero=3, precision="bf16", fp8="torchao-tensorwise",
                                               fp8_gather=True, reshard_after_forward=reshard))
    cast = {r.name: r for r in cost.stack[1][0]}["fc1_cast"]
    shard, x, dy = 768 * 3072 // 8, TOKENS * 768, TOKENS * 3072
    assert cast.mem_fwd == (x + shard) * 5
    assert cast.mem_bwd == (2 * dy + (shard if gathers == 2 else 0) + x) * 5


def test_grouped_experts_stay_16_bit():
    """torchao's ``Float8Linear`` replaces linear layers; torchtitan converts its ``GroupedExperts`` only with a
    converter of their own (``Float8GroupedExpertsConverter``).  Transformer Engine's recipes run the grouped
    experts in FP8 too."""
    moe = config.load(str(Path(__file__).parent / "hf_configs" / "Mixtral-8x7B-v0.1.json"))
    for fp8, experts in (("torchao-rowwise", False), ("tensorwise", True)):
        layer = {r.name: r for r in model_cost(moe, Training(b=1, l=64, precision="bf16", fp8=fp8)).stack[1][0]}
        grouped = [r for r in layer.values() if any(g.groups != 1 for g in r.gemms)]
        assert grouped and all(r.fp8 == experts for r in grouped), fp8
        assert layer["qkv_proj"].fp8 and not any(name.startswith(r.name) and name.endswith("_cast") and not experts
                                                for r in grouped for name in layer), fp8


def _mxfp8(k: int, n: int):
    """torchao's ``MXFP8Linear(k, n)`` (torchtitan's ``MXFP8LinearConverter``) in bf16, its MX casts emulated on
    the CPU, forward and backward over ``TOKENS`` rows: (elements cast to float8 in forward, in backward; the
    products reading MX operands, forward and backward; bytes kept for backward other than the weight)."""
    from torchao.prototype.moe_training.mxfp8_linear import MXFP8Linear
    from torchao.quantization.quantize_.common import KernelPreference

    class Casts(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.cast, self.products = 0, []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten._to_copy.default and out.dtype == torch.float8_e4m3fn:
                self.cast += out.numel()
            if func is torch.ops.aten.mm.default:
                self.products.append(all(type(a).__name__ == "MXTensor" for a in args[:2]))
            return out

    layer = MXFP8Linear(k, n, bias=False, kernel_preference=KernelPreference.EMULATED).to(torch.bfloat16)
    return _traced(layer, layer.weight, k, Casts)


def test_mxfp8_casts_kept_inputs_and_products_as_torchao_runs_them():
    """``mx_mm`` keeps the bf16 input and the weight, and casts to MXFP8 where each product reads: forward the
    input and the weight, backward the output gradient along each axis, the weight and the input again; every
    product reads MX operands.  A cast of ``n`` elements is timed as reading its 2-byte tensor once (each
    32-block's scale found in the same kernel) and writing ``1 + 1/32`` bytes (an E8M0 scale a block of 32):
    the bytes are the library's stated assumption, the casts and their sizes torchao's."""
    from sympy import Rational
    pytest.importorskip("torchao.prototype.moe_training.mxfp8_linear")
    rows, plain = _layer("torchao-mxfp8"), _layer(None)
    for name, (k, n) in PRODUCTS.items():
        forward, backward, kept = _mxfp8(k, n)
        assert rows[name].act_buffer == kept == TOKENS * k * 2 == plain[name].act_buffer, name   # the bf16 input
        assert forward.products == [True] and backward.products == [True, True], name
        assert forward.cast == TOKENS * k + k * n and backward.cast == 2 * TOKENS * n + k * n + TOKENS * k, name
        cast, per_element = rows[f"{name}_cast"], 2 + 1 + Rational(1, 32)
        assert (cast.mem_fwd, cast.mem_bwd) == (forward.cast * per_element, backward.cast * per_element), name
        assert rows[name].fp8 and cast.flops_fwd == cast.flops_bwd == 0, name
