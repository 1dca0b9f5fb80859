"""Planning from a budget (issue 68) against what nobody here wrote: the Lagrangian optimum solved
by hand and by a numeric minimiser, Chinchilla's Table 3, Llama 3's published compute-optimal tokens, DeepSeek LLM's
published FLOPs-per-token formula, Llama 3 8B's published parameter count, and the command line."""

import json
import math
from pathlib import Path

import pytest
from scipy.optimize import minimize_scalar
from sympy import Rational, simplify, symbols

from symbolic_cost import conventions as conv
from symbolic_cost.analysis.planning import SHAPES, per_token, plan
from symbolic_cost.analysis.scaling_laws import LAWS, C, D, N, elasticity, k
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.config import from_config

CHINCHILLA = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)   # Hoffmann et al. 2022, eq. (10)


def test_the_loss_law_is_chinchillas_equation_ten():
    law = LAWS["hoffmann-2022"]
    n, d = 70e9, 1.4e12
    by_hand = CHINCHILLA["E"] + CHINCHILLA["A"] / n**CHINCHILLA["alpha"] + CHINCHILLA["B"] / d**CHINCHILLA["beta"]
    assert law.at(n, d) == pytest.approx(by_hand, rel=1e-15)
    assert float(law.loss().subs({N: n, D: d})) == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("budget", [1e19, 5.76e23, 1e25, 1e28])
def test_the_optimum_is_the_lagrangian_solved_by_hand_and_a_numeric_minimiser(budget):
    """N* = G (C/6)^(beta/(alpha+beta)), G = (alpha A / (beta B))^(1/(alpha+beta)), D* = C/(6 N*):
    solved on paper; and the least of L(N, C/(6N)) found by scipy over log N."""
    E, A, B, a, b = CHINCHILLA.values()
    G = (a * A / (b * B)) ** (1 / (a + b))
    n_hand = G * (budget / 6) ** (b / (a + b))
    found = LAWS["hoffmann-2022"].optimum().at(budget)
    assert float(found["parameters"]) == pytest.approx(n_hand, rel=1e-12)
    assert float(found["tokens"]) == pytest.approx(budget / (6 * n_hand), rel=1e-12)
    loss = lambda log_n: E + A / math.exp(log_n) ** a + B / (budget / (6 * math.exp(log_n))) ** b  # noqa: E731
    numeric = minimize_scalar(loss, bounds=(math.log(1e6), math.log(1e15)), method="bounded",
                              options={"xatol": 1e-10})
    assert float(found["parameters"]) == pytest.approx(math.exp(numeric.x), rel=1e-4)
    assert float(found["loss"]) == pytest.approx(numeric.fun, rel=1e-9)


def test_the_optimum_spends_the_budget_and_grows_as_the_exponents_say():
    opt = LAWS["besiroglu-2024"].optimum()
    assert simplify(k * opt.n * opt.d / C) == 1                    # the constraint, for every C and k
    a, b = Rational("0.3478"), Rational("0.3658")                  # Besiroglu et al. 2024, Table 1
    assert elasticity(opt.n) == b / (a + b) and elasticity(opt.d) == a / (a + b)


def test_llama_3_compute_optimal_tokens_within_the_printed_precision():
    """Dubey et al. 2024, section 3.2.1: (alpha, A) = (0.537, 0.299) extrapolated to 3.8e25 FLOPs gives
    16.55T tokens.  The constants are printed to three decimals: the published tokens must lie
    within what half a unit of the last printed digit of each moves the result."""
    budget = 3.8e25
    tokens = float(LAWS["llama-3"].optimum().at(budget)["tokens"])
    slack = 0.0005 * math.log(budget) + 0.0005 / 0.299
    assert abs(math.log(tokens / 16.55e12)) <= slack


CHINCHILLA_TABLE_3 = [                 # Hoffmann et al. 2022, Table 3: parameters, FLOPs, tokens
    (400e6, 1.92e19, 8.0e9), (1e9, 1.21e20, 20.2e9), (10e9, 1.23e22, 205.1e9), (67e9, 5.76e23, 1.5e12),
    (175e9, 3.85e24, 3.7e12), (280e9, 9.90e24, 5.9e12), (520e9, 3.43e25, 11.0e12), (1e12, 1.27e26, 21.2e12),
    (10e12, 1.30e28, 216.2e12),
]


@pytest.mark.parametrize("parameters, budget, tokens", CHINCHILLA_TABLE_3)
def test_chinchillas_table_3_within_the_printed_precision(parameters, budget, tokens):
    """Table 3 projects Approach 1 (N* and D* as C^0.50, Table 2) from the optimum at Gopher's
    budget (67B at 5.76e23 FLOPs) to model sizes from 400M to 10T, with C = 6ND.  At each printed
    budget the library's optimum must give the row's size and tokens within what the printed digits
    allow: half a unit of the exponent's last digit over ``ln(C / 5.76e23)``, of the budget's (its
    square root moves N), of the anchor's 67, and of the printed tokens.  The Gopher row's 1.5T is
    not compared: 5.76e23 / (6 x 67e9) is 1.43T, the one row whose printed tokens do not give its
    FLOPs."""
    found = LAWS["hoffmann-2022-approach-1"].optimum().at(budget)
    mantissa = budget / 10 ** math.floor(math.log10(budget))
    slack = 0.005 * abs(math.log(budget / 5.76e23)) + 0.5 * 0.005 / mantissa + math.log(67.5 / 67)
    assert abs(math.log(float(found["parameters"]) / parameters)) <= slack
    if parameters != 67e9:
        digit = 0.05e9 if tokens < 1e12 else 0.05e12
        assert abs(math.log(float(found["tokens"]) / tokens)) <= slack + digit / tokens


def test_deepseek_llms_flops_per_token_are_the_librarys_products():
    """DeepSeek LLM (2024), section 3.1: M = 72 n_layer d_model^2 + 12 n_layer d_model l_seq, the
    non-embedding FLOPs per token of forward and backward, products counted 2mnk, the whole
    causal score matrix.  The library's product rows of a layer (q/k/v, scores, attend, output,
    both MLP matrices of a 4d MLP) at 2mnk give the same, for every depth, width and length."""
    n, e, h, l = symbols("n_layers e h l", positive=True, integer=True)
    arch = Architecture("m", n, e, h, 4 * e, 32000, bias=False, qkv_bias=False, dropouts=False)
    cost = model_cost(arch, Training(b=1, l=l), conv.DEFAULT.but(matmul_flops="2mnk"))
    (layer, depth), = [(blk, count) for blk, count in cost.blocks if blk.name == "layer"]
    products = ("qkv_proj", "logits", "attend", "v_proj", "fc1", "fc2")
    per_token = sum(r.flops_fwd + r.flops_bwd for r in layer.rows if r.name in products) * depth / l
    assert simplify(per_token - (72 * n * e**2 + 12 * n * e * l)) == 0


def test_a_llama_3_shape_is_llama_3_8b_with_its_published_parameters():
    """The shape rule at 32 layers is Llama 3 8B (Meta's model card: 8.03B; transformers' count of
    the config: 8,030,261,248)."""
    config = SHAPES["llama-3"].config(32)
    assert (config["hidden_size"], config["num_attention_heads"], config["intermediate_size"]) == (4096, 32, 14336)
    params, flops, _ = per_token(SHAPES["llama-3"].architecture(32), 8192)
    assert params == 8030261248
    assert flops > 6 * params                      # attention and the head on top of 6N


def test_the_plan_spends_the_budget_on_a_buildable_model():
    chosen = plan(10**25)
    n, f, _ = per_token(chosen.architecture, chosen.seq)
    assert chosen.parameters == n and chosen.flops_per_token == f
    assert chosen.tokens * chosen.flops_per_token == 10**25                # exact: the budget, all spent
    neighbours = [plan(10**25, depths=range(d, d + 1)) for d in (chosen.depth - 1, chosen.depth + 1)]
    assert all(other.loss > chosen.loss for other in neighbours)


def test_plan_on_the_command_line(capsys):
    assert main(["plan", "--budget-flops", "1e23", "--devices", "64", "--system", "h100", "--price", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    run = out["run"]
    assert run["gpu_hours"] == pytest.approx(64 * run["days"] * 24, rel=1e-12)
    assert run["cost_usd"] == pytest.approx(2 * run["gpu_hours"], rel=1e-12)
    assert run["energy_kwh"] == pytest.approx(0.7 * run["gpu_hours"], rel=1e-12)     # 700 W an H100 SXM
    assert run["tokens"] == pytest.approx(out["tokens"], rel=1e-12)


def test_the_planned_layout_is_the_one_summary_times(capsys):
    """The plan's layout runs fused attention (it says so), and ``summary`` of that layout with
    ``--flash`` gives the plan's step time: the same model timed, not a look-alike."""
    assert main(["plan", "--preset", "llama-2-7b", "--seq", "4096", "--devices", "64", "--days", "3", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    lay = run["layout"]
    assert lay["flash"] is True
    words = [f"{k}={lay[k]}" for k in ("m1", "s1", "d", "p", "b", "n_micro")] + ["l=4096"]
    assert main(["summary", "--preset", "llama-2-7b", "--set", *words, "--zero", str(lay["zero"]), "--flash",
                 "--recompute", lay["recompute"], "--json"]) == 0
    timed = json.loads(capsys.readouterr().out)
    assert timed["step_time_s"]["total"] == pytest.approx(run["step_time_s"], rel=1e-9)


@pytest.mark.parametrize("words, named", [
    (["plan"], "--budget-flops"),
    (["plan", "--budget-flops", "1e24", "--days", "3"], "--days"),
    (["plan", "--budget-flops", "1e24", "--tokens", "1e12"], "--tokens"),
    (["plan", "--preset", "gpt2", "--devices", "8"], "--devices"),
    (["plan", "--budget-flops", "1e24", "--price", "2"], "--devices"),
    (["plan", "--budget-flops", "1/0"], "--budget-flops"),       # an exact number, not ZeroDivisionError
    (["plan", "--budget-flops", "1e400"], "--budget-flops"),     # past a double: every figure would print inf
    (["plan", "--devices", "1024", "--days", "1e300"], "--days"),
    (["plan", "--preset", "gpt2", "--seq", "1024", "--devices", "8", "--tokens", "1e300"], "--tokens"),
])
def test_plan_refuses_what_it_cannot_answer(words, named, capsys):
    assert main(words) == 2
    assert named in capsys.readouterr().err


def test_a_bad_law_or_budget_is_refused():
    with pytest.raises(InputError, match="scaling law must be one of"):
        plan(1e24, law="kaplan")
    with pytest.raises(InputError, match="budget"):
        plan(-1)
    with pytest.raises(InputError, match="edge of the depths tried"):      # a 1,024-wide, 2-layer model is too big
        plan(1e15)


def test_serving_aware_planning_holds_the_loss_and_costs_less_over_a_life():
    """Sardana et al. 2023: at the loss of the compute-optimal model, a smaller model trained longer
    costs fewer FLOPs over a life that serves many tokens.  By duality, the model of least training
    FLOPs at that loss (nothing served) is the compute-optimal model itself."""
    from symbolic_cost.analysis.planning import serving_aware
    chosen = plan(1e24)
    assert serving_aware(chosen, 1).depth == chosen.depth
    served = serving_aware(chosen, 1e14)
    assert served.parameters < chosen.parameters and served.tokens > chosen.tokens
    law = LAWS["hoffmann-2022"]
    assert law.at(served.parameters, served.tokens) == pytest.approx(chosen.loss, rel=1e-12)
    life = served.serving
    forward = per_token(served.architecture, served.seq).forward
    assert life["lifetime_flops"] == pytest.approx(life["training_flops"] + float(forward) * 1e14, rel=1e-9)
    assert life["lifetime_flops"] < life["compute_optimal_lifetime_flops"]


def test_the_isoflop_plot_is_written(tmp_path, capsys):
    path = tmp_path / "iso.png"
    assert main(["plan", "--budget-flops", "1e23", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


DEEPSEEK_V3 = json.loads((Path(__file__).parent / "hf_configs" / "DeepSeek-V3.json").read_text())


def test_the_deepseek_v3_shape_at_61_layers_is_deepseek_v3():
    """The shape rule at 61 layers is deepseek-ai/DeepSeek-V3's config.json, key by key, and its
    published size (the technical report: 671B parameters, 37B activated a token; the main model,
    without the multi-token-prediction module)."""
    shape = SHAPES["deepseek-v3"]
    config = shape.config(61)
    assert {k: v for k, v in config.items() if DEEPSEEK_V3.get(k, v) != v} == {}
    cost = model_cost(from_config({**config, "num_nextn_predict_layers": 0}), Training(b=1, l=4096))
    assert int(cost.parameters) // 10**9 == 671 and int(cost.active_parameters) // 10**9 == 37


@pytest.mark.parametrize("depth", [4, 7, 16, 33, 61, 100, 257, 512])
def test_a_deepseek_v3_shape_keeps_its_ratios_whole(depth):
    """Every size the width carries stays V3's fraction of it and whole: heads width/56, experts
    2/7 of it, the dense layers' MLP 18/7; the width a multiple of 896 near 7168/61 a layer."""
    c = SHAPES["deepseek-v3"].config(depth)
    e = c["hidden_size"]
    assert e % 896 == 0 and abs(e - 7168 * depth / 61) <= 448
    assert (c["num_attention_heads"] * 56, c["moe_intermediate_size"] * 7, c["intermediate_size"] * 7) == \
        (e, 2 * e, 18 * e)
    assert c["n_routed_experts"] == 256 and c["num_experts_per_tok"] == 8 and c["kv_lora_rank"] == 512


@pytest.mark.parametrize("budget, law", [(1e23, "deepseek-llm"), (3e24, "llama-3")])
def test_a_mixture_of_experts_plan_is_the_depth_whose_flops_are_nearest_the_law(budget, law):
    """Every depth tried counted one by one: the chosen one's exact FLOPs a token are the nearest,
    in ratio, to C / D*(C); the budget is spent on its tokens."""
    depths = range(20, 140)
    chosen = plan(budget, law, "deepseek-v3", 4096, depths=depths)
    target = budget / float(LAWS[law].optimum().at(budget)["tokens"])
    shape = SHAPES["deepseek-v3"]
    flops = {d: float(per_token(shape.architecture(d), 4096).train) for d in depths}
    assert chosen.depth == min(depths, key=lambda d: abs(math.log(flops[d] / target)))
    assert float(chosen.tokens * chosen.flops_per_token) == pytest.approx(budget, rel=1e-12)
    assert chosen.active_parameters < chosen.parameters / 10


def test_a_mixture_of_experts_is_planned_under_a_compute_law_only(capsys):
    with pytest.raises(InputError, match="compute law") as raised:
        plan(1e24, "hoffmann-2022", "deepseek-v3")
    assert raised.value.argument == "law"
    assert main(["plan", "--budget-flops", "1e23", "--law", "deepseek-llm", "--shape", "deepseek-v3",
                 "--seq", "4096", "--devices", "512", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["experts"] == 256 and out["active_parameters"] < out["parameters"]
    assert out["six_n_ratio"] == pytest.approx(out["flops_per_token"] / (6 * out["active_parameters"]), rel=1e-12)
    assert out["run"]["layout"]["ep"] > 1


def test_a_plan_that_counts_recomputation_runs_it_and_reports_the_model_flops(capsys):
    """``--recompute full`` sizes the model with full recomputation's forward counted (hardware
    FLOPs), so its layout recomputes every layer, and its MFU counts the model's own FLOPs a token
    (forward and backward, ``per_token`` without recomputation) over the devices' 989.4 TFLOP/s
    (H100 SXM, dense bf16) for the step it prints: ``F b l / (step x devices x peak)``."""
    assert main(["plan", "--budget-flops", "1e23", "--devices", "64", "--recompute", "full", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    run = out["run"]
    assert run["layout"]["recompute"] == "full"
    _, model, _ = per_token(SHAPES["llama-3"].architecture(out["layers"]), 8192)
    assert out["flops_per_token"] > float(model)
    mfu = float(model) * run["global_batch"] * 8192 / (run["step_time_s"] * 64 * 989.4e12)
    assert run["mfu"] == pytest.approx(mfu, rel=1e-9)


def test_a_given_mixture_of_experts_gets_no_dense_loss(capsys):
    """A given DeepSeek-V3 (its config.json) under Chinchilla's loss law: no predicted loss (the
    law's N is a dense model's) and the ratio to 6N taken over the parameters a token runs through,
    as the budget mode takes it; tokens past 1e40 FLOPs are refused as a budget is."""
    config = str(Path(__file__).parent / "hf_configs" / "DeepSeek-V3.json")
    assert main(["plan", "--hf-config", config, "--seq", "4096", "--devices", "2048", "--tokens", "1e12",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["loss"] is None and "mixture of experts" in out["note"]
    assert out["active_parameters"] < out["parameters"] / 10
    assert out["six_n_ratio"] == pytest.approx(out["flops_per_token"] / (6 * out["active_parameters"]), rel=1e-12)
    assert main(["plan", "--preset", "llama-3-8b", "--devices", "8", "--tokens", "1e40"]) == 2
    assert "pass 1e40" in capsys.readouterr().err


def test_the_latex_table_carries_the_run_and_its_cost(capsys):
    """``--latex`` holds what the text holds: the chosen shape, the run's devices, energy and
    cost (2 USD an H100-hour: twice the GPU-hours) beside the model's numbers."""
    words = ["plan", "--budget-flops", "1e23", "--devices", "64", "--price", "2"]
    assert main([*words, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    assert main([*words, "--latex"]) == 0
    rows = dict(line.rstrip(" \\").split(" & ") for line in capsys.readouterr().out.splitlines() if " & " in line)
    mantissa, power = rows["cost (USD)"].strip("$").split(" \\times 10^")
    assert float(mantissa) * 10 ** int(power.strip("{}")) == pytest.approx(2 * run["gpu_hours"], rel=1e-3)
    assert rows["energy (MWh)"] == f"{0.7 * run['gpu_hours'] / 1000:,.1f}"
    assert rows["devices"] == "64 h100" and rows["shape"].endswith("heads")
