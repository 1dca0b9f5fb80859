"""Low-precision training recipes by hand: FP8 tensorwise (current) scaling, MXFP8 and NVFP4.

Every expected byte is counted here from the formats' definitions: MXFP8 stores an 8-bit E4M3
element and one 8-bit E8M0 scale per 32 elements (OCP Microscaling v1.0); NVFP4 a 4-bit E2M1
element and one 8-bit E4M3 scale per 16 elements, plus one fp32 scale per tensor (NVIDIA's NVFP4
pretraining paper, 2025).  Transformer Engine caches a row-wise and a column-wise quantised copy of
each weight for the block-scaled recipes (its MXFP8 page: the two are different tensors).  The
model is GPT-2 small: L = 12 layers of width E = 768 and F = 3072, four linear products per layer
(QKV, output, fc1, fc2), whose kept inputs are 3E + F wide per token."""

import json
from fractions import Fraction

import pytest
from sympy import Rational

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.timing.hardware import SYSTEMS, times
from symbolic_cost.timing.step import step_time_breakdown

GPT2 = preset("gpt2")
L, E, F, TOKENS = 12, 768, 3072, 1024
MATRICES = L * (4 * E * E + 2 * E * F)            # the layers' weight-matrix elements
PRODUCTS = 4 * L                                   # linear products, each with 3 scaled tensors
KEPT = L * TOKENS * (3 * E + F)                    # elements the products keep for backward

MXFP8 = Rational(8 + Fraction(8, 32), 8)           # bits per element / 8
NVFP4 = Rational(4 + Fraction(8, 16), 8)


def _cost(**kw):
    return model_cost(GPT2, Training(b=1, l=TOKENS, **kw))


PLAIN = _cost()


@pytest.mark.parametrize("recipe, kept, copies, state", [
    ("tensorwise", 1, 1, 2),            # one FP8 copy; a scale and an amax per tensor, no history
    ("mxfp8", MXFP8, 2 * MXFP8, 0),     # row-wise and column-wise copies; the scales are in the elements
    ("nvfp4", NVFP4, 2 * NVFP4, 1),     # both copies; the fp32 per-tensor scale
])
def test_kept_inputs_weight_copies_and_scales_by_hand(recipe, kept, copies, state):
    """Weights: the 16-bit weights plus ``copies`` bytes per matrix element plus ``state`` fp32
    values per scaled tensor; activations: each kept input in ``kept`` bytes instead of 2."""
    got = _cost(fp8=recipe)
    assert got.weight_bytes - PLAIN.weight_bytes == MATRICES * copies + PRODUCTS * 3 * state * 4
    assert PLAIN.activation_bytes - got.activation_bytes == KEPT * (2 - kept)
    assert (got.gradient_bytes, got.optimizer_bytes) == (PLAIN.gradient_bytes, PLAIN.optimizer_bytes)


@pytest.mark.parametrize("history", [None, 1, 16])
def test_delayed_scaling_state_by_hand(history):
    """Delayed scaling keeps, per scaled tensor, a scale, its inverse and ``history`` amax values
    in fp32 (Transformer Engine's ``DelayedScaling``: 1024 by default; Megatron-LM passes its
    ``--fp8-amax-history-len``, default 1), and one FP8 copy of each weight."""
    got = _cost(fp8="delayed", fp8_amax_history=history)
    values = 2 + (1024 if history is None else history)
    assert got.weight_bytes - PLAIN.weight_bytes == MATRICES * 1 + PRODUCTS * 3 * values * 4


@pytest.mark.parametrize("given", [dict(fp8_amax_history=4), dict(fp8="tensorwise", fp8_amax_history=4),
                                   dict(fp8="delayed", fp8_amax_history=0)])
def test_an_amax_history_needs_delayed_scaling(given):
    with pytest.raises(InputError, match="fp8_amax_history"):
        Training(b=1, l=TOKENS, precision="bf16", **given)


def test_the_formats_element_sizes_are_the_serving_ones():
    """One home: the serving weight formats take the same bytes per element."""
    from symbolic_cost.inference.weight_formats import weight_format
    assert weight_format("mxfp8").element_bytes == MXFP8 == Rational(33, 32)
    assert weight_format("nvfp4").element_bytes == NVFP4 == Rational(9, 16)


def test_nvfp4_products_run_at_the_fp4_rate_on_b200_and_are_refused_on_h100():
    """B200: 9,000 TFLOP/s dense NVFP4 (NVIDIA's figure); every linear product of a layer, in forward
    and in backward (dgrad and wgrad), at that rate; the other rows as in 16 bits."""
    got, b200 = _cost(fp8="nvfp4"), SYSTEMS["b200"]
    assert [name for name in got.layer.names if not name.endswith("_cast")] == PLAIN.layer.names
    for before in PLAIN.layer:
        after = got.layer[before.name]
        t = times(after, b200)
        if after.name in ("qkv_proj", "v_proj", "fc1", "fc2"):
            assert t["t_comp_fwd"] == after.flops_fwd / (9000 * 10**12)
            assert t["t_comp_bwd"] == after.flops_bwd / (9000 * 10**12)
        else:
            assert t == times(before, b200)
    with pytest.raises(InputError, match="fp8='nvfp4' needs block-scaled .NVFP4. tensor cores, and system h100 has none"):
        step_time_breakdown(got, "h100")
    # CDNA 4 (AMD's MI355X datasheet): MXFP4 in its matrix cores, not NVFP4; refused naming the rule
    with pytest.raises(InputError, match="fp8='nvfp4' needs block-scaled .NVFP4. tensor cores, and system mi355x "
                                         "runs mxfp8, mxfp4 only"):
        step_time_breakdown(got, "mi355x")


def test_mxfp8_runs_at_the_fp8_rate_on_blackwell_only():
    """B200: 4,500 TFLOP/s dense FP8; Hopper and CDNA 3 have no MX block-scaled tensor cores: refused by name."""
    got = _cost(fp8="mxfp8")
    assert times(got.layer["fc1"], SYSTEMS["b200"])["t_comp_fwd"] == got.layer["fc1"].flops_fwd / (4500 * 10**12)
    assert step_time_breakdown(got, "b200")["total"] > 0
    for system in ("h100", "mi300x"):
        with pytest.raises(InputError, match="fp8='mxfp8' needs block-scaled"):
            step_time_breakdown(got, system)
    # CDNA 4 runs MXFP8 (AMD's CDNA 4 ISA, MI355X datasheet): at its FP8 rate, 5,033.2 TFLOP/s dense
    fc1 = got.layer["fc1"]
    assert times(fc1, SYSTEMS["mi355x"])["t_comp_fwd"] == fc1.flops_fwd / Rational("5033.2e12")
    assert step_time_breakdown(got, "mi355x")["total"] > 0
    for recipe in ("mxfp8", "delayed", "tensorwise"):     # Ampere: no FP8 tensor cores at all
        with pytest.raises(InputError, match=f"fp8='{recipe}' runs FP8 products, and system a100 has no FP8"):
            step_time_breakdown(_cost(fp8=recipe), "a100")
    tensorwise = _cost(fp8="tensorwise")           # per-tensor scales: Hopper's FP8 rate, 1978.9 TFLOP/s
    fc1 = tensorwise.layer["fc1"]
    assert times(fc1, SYSTEMS["h100"])["t_comp_bwd"] == fc1.flops_bwd / Rational("1978.9e12")


def test_the_tiled_kernel_model_refuses_fp4_products():
    from symbolic_cost import conventions as conv
    from symbolic_cost.timing.kernels import pass_times
    tiled = conv.DEFAULT.but(kernel_time="tiled")
    with pytest.raises(InputError, match="4-bit"):
        pass_times(_cost(fp8="nvfp4").layer["fc1"], "fwd", SYSTEMS["b200"], tiled)


SMALL = ("--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 "
         "--micro-batch-size 2 --global-batch-size 16 --tokenizer-type NullTokenizer --vocab-size 1023 --bf16 ")
SMALL_GPT2 = {"model_type": "gpt2", "n_embd": 256, "n_layer": 4, "n_head": 4, "n_positions": 64, "vocab_size": 1024,
              "activation_function": "gelu"}


def _summary(capsys, *words):
    assert main(["summary", *words, "--system", "b200", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    return {k: v for k, v in out.items() if k not in ("model", "notes")}


@pytest.mark.parametrize("words, recipe", [
    ("--fp8-format e4m3 --fp8-recipe mxfp8", "mxfp8"),
    ("--fp8-format hybrid --fp8-recipe tensorwise", "tensorwise"),
    ("--fp4-format e2m1 --fp4-recipe nvfp4", "nvfp4"),
    ("--fp4-format e2m1", "nvfp4"),                  # Megatron-LM's default --fp4-recipe
    ("--fp8-format hybrid", "delayed --fp8-amax-history 1"),     # Megatron-LM's default recipe and history
    ("--fp8-format hybrid --fp8-amax-history-len 1024", "delayed"),
    ("--fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather", "mxfp8-params"),          # weights stored in FP8
    ("--fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather", "tensorwise-params"),
])
def test_megatron_arguments_equal_the_typed_recipe(tmp_path, capsys, words, recipe):
    args, config = tmp_path / "args.txt", tmp_path / "config.json"
    args.write_text(SMALL + words)
    config.write_text(json.dumps(SMALL_GPT2))
    got = _summary(capsys, "--megatron-args", str(args), "--devices", "4")
    typed = _summary(capsys, "--hf-config", str(config), "--set", "b=2", "l=64", "d=4", "n_micro=2",
                     "--precision", "bf16", "--flash", "--fp8", *recipe.split())
    assert got == typed


@pytest.mark.parametrize("words, refused", [
    ("--fp8-format e4m3 --fp8-recipe blockwise", "--fp8-recipe"),
    ("--fp8-format e4m3 --fp4-format e2m1", "--fp4-format"),
    ("--fp8-format e4m3 --first-last-layers-bf16", "--first-last-layers-bf16"),      # delayed scaling
    ("--fp8-param-gather", "--fp8-param-gather"),
])
def test_megatron_arguments_refusals(tmp_path, capsys, words, refused):
    args = tmp_path / "args.txt"
    args.write_text(SMALL + words)
    assert main(["summary", "--megatron-args", str(args), "--devices", "4", "--system", "b200"]) == 2
    assert refused in capsys.readouterr().err


@pytest.mark.parametrize("words, unused, base", [
    ("--fp4-recipe nvfp4", "--fp4-recipe", ""),
    ("--fp8-recipe mxfp8", "--fp8-recipe", ""),
    ("--first-last-layers-bf16", "--first-last-layers-bf16", ""),                     # no recipe
    ("--fp4-format e2m1 --num-layers-at-end-in-bf16 2", "--num-layers-at-end-in-bf16", "--fp4-format e2m1"),
    ("--fp8-format e4m3 --fp8-recipe tensorwise --fp8-amax-history-len 16", "--fp8-amax-history-len",
     "--fp8-format e4m3 --fp8-recipe tensorwise"),
    ("--fp8-amax-history-len 16", "--fp8-amax-history-len", ""),
])
def test_megatron_options_it_runs_without(tmp_path, capsys, words, unused, base):
    """Megatron-LM reads these only beside another option (``args.fp8`` is None without a format;
    an amax history is delayed scaling's; the bf16 layer counts follow ``--first-last-layers-bf16``)
    and runs without them otherwise: the layout is the one without them, and a note names each."""
    args, plain = tmp_path / "args.txt", tmp_path / "plain.txt"
    args.write_text(SMALL + words)
    plain.write_text(SMALL + base)
    got = _summary_json(capsys, args)
    assert got["notes"] and any(unused in note for note in got["notes"])
    without = _summary_json(capsys, plain)
    assert {k: v for k, v in got.items() if k not in ("notes", "model")} == \
        {k: v for k, v in without.items() if k not in ("notes", "model")}          # the model is named after its file


def _summary_json(capsys, path):
    import json
    assert main(["summary", "--megatron-args", str(path), "--devices", "4", "--system", "b200", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_bridge_fp4_and_mxfp8_keys(tmp_path, capsys):
    """Megatron-Bridge: ``mixed_precision.fp8_recipe: mxfp8`` and ``model.fp4: e2m1`` (the 1B dump's
    default ``fp4_recipe: nvfp4``) read as the typed recipes; BF16 first and last layers refused."""
    import pathlib
    bridge = pathlib.Path(__file__).resolve().parent / "framework_inputs" / "megatron_bridge_llama32_1b.yaml"
    text, path = bridge.read_text(), tmp_path / "run.yaml"
    plain = _summary(capsys, "--nemo-recipe", str(bridge), "--devices", "8")
    cases = {"mxfp8": text.replace("  fp8: null\n  fp8_amax_compute_algo", "  fp8: e4m3\n  fp8_amax_compute_algo", 1)
             .replace("  fp8_recipe: tensorwise\n  fp8_wgrad: true\n  grad_reduce_in_fp32",
                      "  fp8_recipe: mxfp8\n  fp8_wgrad: true\n  grad_reduce_in_fp32", 1),
             "nvfp4": text.replace("  fp4: null\n", "  fp4: e2m1\n", 1),
             "delayed": text.replace("  fp8: null\n  fp8_amax_compute_algo", "  fp8: hybrid\n  fp8_amax_compute_algo", 1)
             .replace("  fp8_recipe: tensorwise\n  fp8_wgrad: true\n  grad_reduce_in_fp32",
                      "  fp8_recipe: delayed\n  fp8_wgrad: true\n  grad_reduce_in_fp32", 1)}
    e, f, kv = 2048, 8192, 8 * 64           # Llama 3.2 1B: 16 layers, 8 KV heads of 64
    matrices = 16 * (2 * e * e + 2 * e * kv + 3 * e * f)
    for recipe, changed in cases.items():
        path.write_text(changed)
        got = _summary(capsys, "--nemo-recipe", str(path), "--devices", "8")
        # delayed: the dump's fp8_amax_history_len 1, so a scale, its inverse and one amax per tensor
        copies, state = {"mxfp8": (2 * MXFP8, 0), "nvfp4": (2 * NVFP4, 1), "delayed": (1, 3)}[recipe]
        assert got["weight_bytes"] - plain["weight_bytes"] == matrices * copies + 16 * 4 * 3 * state * 4
        assert got["activation_bytes"] < plain["activation_bytes"]
        assert main(["summary", "--nemo-recipe", str(path), "--devices", "8", "--system", "b200"]) == 0
        assert f"fp8={recipe}" in capsys.readouterr().out
    path.write_text(text.replace("  first_last_layers_bf16: false\n  fp16", "  first_last_layers_bf16: true\n  fp16", 1))
    assert main(["summary", "--nemo-recipe", str(path), "--devices", "8"]) == 2
    assert "mixed_precision.first_last_layers_bf16" in capsys.readouterr().err


# The cast kernels, by hand.  Per token of one layer: v_proj reads E inputs and fc2 F (qkv_proj's
# and fc1's inputs come quantised out of the norm before them); the output gradients are 3E (qkv),
# E (v_proj), F (fc1) and E (fc2) wide.  Each element is read in 16 bits (twice when the scale is
# the tensor's own amax: one pass finds it) and written as two quantised copies (row-wise and
# column-wise, Transformer Engine's cast-transpose).
CAST_IN, CAST_OUT = E + F, 3 * E + E + F + E


@pytest.mark.parametrize("recipe, reads, element", [
    ("delayed", 1, 1), ("fp8-params", 1, 1), ("tensorwise", 2, 1), ("mxfp8", 1, MXFP8), ("nvfp4", 2, NVFP4)])
def test_cast_kernels_move_their_tensors_by_hand(recipe, reads, element):
    layer = _cost(fp8=recipe).layer
    casts = [row for row in layer if row.name.endswith("_cast")]
    assert [row.name for row in casts] == ["qkv_proj_cast", "v_proj_cast", "fc1_cast", "fc2_cast"]
    per_element = reads * 2 + 2 * element
    assert sum(row.mem_fwd for row in casts) == TOKENS * CAST_IN * per_element
    assert sum(row.mem_bwd for row in casts) == TOKENS * CAST_OUT * per_element
    assert layer["qkv_proj_cast"].mem_fwd == layer["fc1_cast"].mem_fwd == 0
    assert all(row.flops_fwd == row.flops_bwd == row.act_buffer == row.weights == 0 for row in casts)


def test_cast_kernels_are_timed_at_the_calibrated_memory_rate_and_add_no_flops():
    """H100, delayed scaling: each cast is memory bound at ``memory`` x 3.35 TB/s, plus the
    kernel floor of each cast kernel that runs; a fused forward cast takes no time and its ratios
    are 0, not nan; the model's FLOPs do not change."""
    from symbolic_cost.timing.hardware import calibrated
    h100 = calibrated("h100")
    got = _cost(fp8="delayed")
    rate = 3350 * 10**9 * h100.efficiency.memory       # H100 SXM datasheet: 3.35 TB/s of HBM3
    casts = [r for r in got.layer if r.name.endswith("_cast")]
    seconds = [times(r, h100) for r in casts]
    launched = {p: sum(1 for r in casts if getattr(r, f"mem_{p}") != 0) for p in ("fwd", "bwd")}
    assert launched["fwd"] < len(casts)                 # the fused forward cast launches nothing
    floor = h100.efficiency.kernel
    assert sum(t["t_fwd"] for t in seconds) == TOKENS * CAST_IN * 4 / rate + launched["fwd"] * floor  # by hand
    assert sum(t["t_bwd"] for t in seconds) == TOKENS * CAST_OUT * 4 / rate + launched["bwd"] * floor
    fused = times(got.layer["qkv_proj_cast"], h100)
    assert (fused["t_fwd"], fused["intensity"], fused["frac_t_comm_fwd"]) == (0, 0, 0)
    assert (got.flops_fwd, got.flops_bwd) == (PLAIN.flops_fwd, PLAIN.flops_bwd)


def test_full_recomputation_redoes_the_forward_casts():
    """A fully recomputed layer runs its forward again, casts included: v_proj's and fc2's."""
    from symbolic_cost.models.memory import recomputed_costs
    layer = _cost(fp8="delayed", recompute="full").layer
    redone = {row.name: row.mem_fwd for row in recomputed_costs(layer, "full") if row.name.endswith("_cast")}
    assert sum(redone.values()) == TOKENS * CAST_IN * 4
