"""Megatron-Bridge's performance summary (26.04.01 container) as measured cases
(``reproduce.measured``): step seconds worked by hand from the printed figures, every row a case
or excluded with its reason, the parameters of each built model against its published count, and
the B300/GB300 presets against the constants of the measured set's ``hardware.json``."""

from dataclasses import replace
from fractions import Fraction

import pytest

from symbolic_cost.models.totals import model_cost
from symbolic_cost.reproduce import measured
from symbolic_cost.timing.hardware import get_system

GROUP = "megatron_bridge_perf_summary"
ROWS = [r for r in measured.rows() if r["group"] == GROUP]
CASES = {c.id: c for c in measured.cases() if c.group == GROUP}
ID = "mbridge-26.04.01-pre-training-{}-primary"
G, T = 10**9, 10**12


def test_the_step_of_two_rows_worked_by_hand():
    # Llama 3 70B on 64 GB300 in FP8: 256 sequences of 8,192 tokens at 5,248 tokens/s on each of
    # 64 GPUs is 2,097,152 / 335,872 s = 256/41 s; FSDP 64 over TP 1 x PP 1, micro-batch 2
    llama = CASES[ID.format("LLAMA3_70B-DGX-GB300-FP8-64-gbs256")]
    assert llama.seconds == Fraction(256 * 8192, 5248 * 64) == Fraction(256, 41)
    assert (llama.system, llama.quantity, llama.training.zero, llama.training.d) == ("gb300", "step", 3, 64)
    # its recipe, llama3_70b_pretrain_64gpu_gb300_fp8cs_config, takes bf16_with_fp8_current_scaling_mixed
    # (training/mixed_precision.py:284-303 at 067f987df: fp8_recipe "tensorwise", fp8_param_gather = True)
    assert (llama.training.b, llama.training.micro_batches, llama.training.fp8) == (2, 2, "tensorwise-params")
    # DeepSeek-V3 on 256 GB300 in MXFP8: 4,096 sequences of 4,096 tokens at 4,992 tokens/s a GPU
    # is 16,777,216 / 1,277,952 s = 512/39 s; TP 1, PP 2, VP 8, EP 32, DP 128, micro-batch 2:
    # 4,096 / (2 x 128) = 16 micro-batches
    deepseek = CASES[ID.format("DeepSeekV3-DGX-GB300-MXFP8-256-gbs4096")]
    assert deepseek.seconds == Fraction(4096 * 4096, 4992 * 256) == Fraction(512, 39)
    t = deepseek.training
    assert (t.p, t.virtual_stages, t.schedule, t.ep, t.etp, t.d, t.micro_batches) == (2, 8, "interleaved", 32, 1, 128, 16)
    assert (deepseek.system, t.fp8, deepseek.architecture.mtp_layers, t.mtp) == ("gb300", "mxfp8", 1, True)


def test_every_row_is_a_case_or_excluded_with_a_reason():
    excluded = dict(measured.excluded())
    assert len(ROWS) == 47 and sum(r["in_scope"] for r in ROWS) == 33
    for row in ROWS:
        assert (row["id"] in CASES) != (row["id"] in excluded), row["id"]
        if not row["in_scope"]:
            assert excluded[row["id"]] == "not in scope of the measured set (in_scope false)"
        elif row["id"] in excluded:
            assert excluded[row["id"]].strip(), row["id"]


SYSTEMS = {"B200": "b200", "B300": "b300", "GB200": "gb200", "GB300": "gb300", "H100-SXM-80GB": "h100"}


def test_each_case_is_its_rows_gpu_and_its_printed_rate():
    for row in ROWS:
        case = CASES.get(row["id"])
        if case is None:
            continue
        layout, gpus = row["layout"], row["hardware"]["count"]
        tokens = next(m["value"] for m in row["measured"] if m["quantity"] == "tokens_per_sec_per_gpu")
        assert case.system == SYSTEMS[row["hardware"]["gpu"]]
        assert case.seconds * tokens * gpus == layout["global_batch"] * layout["seq_len"]
        t = case.training
        assert t.m1 * t.p * t.cp * t.d == gpus and t.b * t.d * t.micro_batches == layout["global_batch"]


def test_only_the_dense_blackwell_rows_fit_and_only_blackwells_matrix_fraction():
    """H100's factors stay those of Megatron-LM's runs: the summary's H100 rows are timed, not fitted;
    its dense Blackwell rows fit the matrix fraction of the B200 and B300 chips and nothing else."""
    from symbolic_cost.timing import calibrate, efficiency
    assert GROUP in measured.NOT_FITTED
    fitted = [c for c in measured.fit_cases() if c.group == GROUP]
    assert {c.system for c in fitted} == {"gb200", "gb300"} and len(fitted) == 12
    assert all(c.architecture.moe is None for c in fitted)
    committed = efficiency.CALIBRATION["fitted"]
    for chip in calibrate.MATRIX_ONLY:
        assert {k: v for k, v in committed[chip].items() if k != "matrix"} == \
            {k: v for k, v in committed["h100"].items() if k != "matrix"}


def _parameters(name: str, mtp: bool = True):
    """Total and active parameters of the model ``name`` as a case builds it."""
    case = next(c for c in CASES.values() if c.architecture.name == name)
    cost = model_cost(case.architecture, replace(case.training, mtp=mtp), case.conventions)
    return cost.parameters, cost.active_parameters, case.architecture


def _near(value, published, tolerance):
    return abs(Fraction(int(value), published) - 1) <= tolerance


ONE, TWO = Fraction(1, 100), Fraction(2, 100)
"""Totals within 1 %; active counts, which the model cards print to two significant figures
(3.3B, 22B, 5.1B), within 2 %."""


def test_deepseek_v3_has_its_671b_and_685b_with_the_mtp_module():
    # DeepSeek-V3's model card: 671B of the main model (embeddings included), 685B with the 14B
    # multi-token-prediction module
    without, _, _ = _parameters("deepseek-v3", mtp=False)
    with_mtp, _, _ = _parameters("deepseek-v3")
    assert _near(without, 671 * G, ONE) and _near(with_mtp, 685 * G, ONE)


@pytest.mark.parametrize("name, total, active", [
    ("qwen3-30b-a3b", Fraction(305, 10) * G, Fraction(33, 10) * G),     # Qwen3-30B-A3B: 30.5B, 3.3B activated
    ("qwen3-235b-a22b", 235 * G, 22 * G),                               # Qwen3-235B-A22B: 235B, 22B activated
])
def test_qwen3_moe_has_its_published_total_and_active_parameters(name, total, active):
    got, routed, _ = _parameters(name)
    assert _near(got, total, ONE) and _near(routed, active, TWO)


def test_gpt_oss_120b_has_its_published_total_and_active_parameters():
    # OpenAI's gpt-oss-120b model card: 116.8B total, 5.1B active a token, counting the
    # unembedding but not the embedding table (a lookup), which the library's active count holds:
    # vocab x hidden = 201,088 x 2,880 taken off
    got, routed, arch = _parameters("gpt-oss-120b")
    assert _near(got, Fraction(1168, 10) * G, ONE)
    assert _near(routed - arch.vocab * arch.e, Fraction(51, 10) * G, TWO)


@pytest.mark.parametrize("model, total", [("LLAMA3_70B", Fraction(706, 10) * G), ("LLAMA3.1_405B", 405 * G)])
def test_the_dense_llamas_have_their_published_parameters(model, total):
    # Llama 3 70B: 70.6B (Meta's model card); Llama 3.1 405B: 405B
    case = next(c for c in CASES.values() if c.id.startswith(f"mbridge-26.04.01-pre-training-{model}-"))
    assert _near(model_cost(case.architecture, case.training, case.conventions).parameters, total, ONE)


HARDWARE = {   # hardware.json's B300/GB300 rows (dgxc-benchmarking: dense bf16, FP8, NVFP4), the HBM,
    # NVLink domain, NIC and board power of NVIDIA's aiconfigurator system files
    "b300": (2250 * T, 4500 * T, 13500 * T, Fraction(775, 100) * T, 275040 * 2**20, 8, 100 * G, 1100),
    "gb300": (2450 * T, 4900 * T, 14700 * T, 8 * T, 284208 * 2**20, 72, 100 * G, 1400),
}


@pytest.mark.parametrize("name", list(HARDWARE))
def test_the_blackwell_ultra_presets_state_their_sources(name):
    s = get_system(name)
    assert (s.matrix_flops, s.fp8_flops, s.fp4_flops, s.hbm_bandwidth, s.hbm_capacity, s.nvlink_size,
            s.ib_bandwidth, s.board_power) == HARDWARE[name]


def test_the_matrix_fit_recovers_a_factor_it_was_given():
    """``calibrate.fit_matrix`` on runs whose 'measured' seconds are the model's own at a matrix
    fraction chosen here (0.55) finds that fraction, whatever the committed one is; one run made 40 %
    slower (a miss of the model's own) moves the soft-L1 fit far less than it moves a plain mean."""
    pytest.importorskip("scipy")
    from sympy import Rational
    from symbolic_cost.timing import calibrate, efficiency
    from symbolic_cost.timing.hardware import calibrated
    others = {k: Rational(v) for k, v in efficiency.CALIBRATION["fitted"]["h100"].items()}
    chosen = dict(others, matrix=Rational(55, 100))
    picked = [c for c in measured.fit_cases() if c.system == "gb300"][:4]

    def at(case, values, slower=1):
        system = calibrated(case.system)
        seconds = calibrate.predict(case, system.but(efficiency=system.efficiency.but(**values)))
        return replace(case, seconds=Fraction(str(float(seconds * slower))))
    assert calibrate.fit_matrix([at(c, chosen) for c in picked], others) == pytest.approx(0.55, rel=1e-3)
    skewed = [at(c, chosen, 1.4 if i == 0 else 1) for i, c in enumerate(picked)]
    import numpy as np
    from scipy.optimize import minimize_scalar
    from sympy import Symbol, lambdify
    m = Symbol("m", positive=True)
    times = [(lambdify([m], calibrate.predict(c, calibrated(c.system).but(efficiency=calibrated(c.system).efficiency.but(
        matrix=m, **{k: v for k, v in others.items() if k != "matrix"}))), "math"), float(c.seconds)) for c in skewed]
    plain = minimize_scalar(lambda x: sum(np.log(f(x) / t) ** 2 for f, t in times), bounds=(0.3, 0.8),
                            method="bounded").x
    robust = calibrate.fit_matrix(skewed, others)
    assert plain < robust < 0.55 and 0.55 - robust < (0.55 - plain) * 0.75


def test_a_rows_recipe_decides_what_the_summary_leaves_unprinted():
    """The DeepSeek-V3 row on 256 B200 at MXFP8 has the layout of
    ``deepseek_v3_pretrain_256gpu_b200_fp8mx_config`` (perf_recipes/deepseek/b200/deepseek_v3.py:124-155
    at Megatron-Bridge 067f987df: micro-batch 1, and ``comm_overlap.overlap_moe_expert_parallel_comm = True``),
    and its recomputed modules are modelled (the workload's: ``tests/test_bridge_workloads.py``); the GB300 row
    prints micro-batch 2 where its recipe now has 1 (perf_recipes/deepseek/gb300/deepseek_v3.py:146), so nothing is read from that recipe.  Both
    rows' all-to-all overlap is the workload's that ran them, which agrees here
    (``tests/test_bridge_workloads.py``)."""
    rows = {r["id"]: r for r in measured.rows()}
    b200 = next(i for i in rows if "DeepSeekV3-DGX-B200-MXFP8" in i)
    gb300 = next(i for i in rows if "DeepSeekV3-DGX-GB300-MXFP8" in i)
    notes: list = []
    assert measured.bridge_recipe(rows[b200], notes)["function"] == "deepseek_v3_pretrain_256gpu_b200_fp8mx_config"
    assert CASES[b200].training.overlap.expert is True
    assert not any("recompute" in n for n in notes)     # its modules are modelled: the workload's are taken
    notes = []
    assert measured.bridge_recipe(rows[gb300], notes) is None and "another layout" in notes[0]
    assert CASES[gb300].training.overlap.expert is False


def test_a_16_bit_row_claims_no_fp8_weights():
    """A BF16 row whose recipe gathers no FP8 parameters says nothing of FP8 weights (the recipe's
    missing FP8 recipe once matched the row's missing one, and the row printed "stored and gathered
    in FP8, None")."""
    for case in CASES.values():
        if case.training.fp8 is None:
            assert not any("gathered in FP8" in note for note in case.assumptions), case.id
