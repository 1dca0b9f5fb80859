"""The system presets against their datasheets (the numbers restated here from the sources named
in ``timing/systems.py``), and the calibrated model on each."""

import pytest
from sympy import Rational

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError
from symbolic_cost.ops.matmul import linear
from symbolic_cost.timing import efficiency as eff
from symbolic_cost.timing.hardware import SYSTEMS, calibrated, get_system

T, G = 10**12, 10**9
DATASHEETS = {   # dense bf16, FP8 FLOP/s; HBM bytes/s and bytes (as nvidia-smi reports them where known); devices
    # per NVLink domain
    "h100": (Rational("989.4") * T, Rational("1978.9") * T, 3350 * G, 81559 * 2**20, 8),
    "h100-pcie": (756 * T, 1513 * T, 2000 * G, 80 * G, 2),
    "b200": (2250 * T, 4500 * T, 7700 * G, 183359 * 2**20, 8),
    "gb200": (2450 * T, 4900 * T, 8000 * G, 189471 * 2**20, 72),
    "mi300x": (Rational("1307.4") * T, Rational("2614.9") * T, 5300 * G, 192 * G, 8),
}


@pytest.mark.parametrize("name", list(DATASHEETS))
def test_a_preset_states_its_datasheet(name):
    s = get_system(name)
    assert (s.matrix_flops, s.fp8_flops, s.hbm_bandwidth, s.hbm_capacity, s.nvlink_size) == DATASHEETS[name]


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_every_preset_has_a_calibrated_model(name):
    system = calibrated(name)
    assert system.efficiency.matrix <= 1 and system.efficiency.memory <= 1
    assert system.efficiency.matrix == Rational(eff.CALIBRATION["fitted"][eff.family(name)]["matrix"])


def test_a_full_wave_product_on_b200_runs_at_its_peak_times_the_factor():
    s = calibrated("b200")
    m, k, n = 128 * 37, 4096, 256 * 8          # 37 x 8 = 296 = 2 x 148 tiles of 128 x 256
    assert eff.wave_efficiency(m, n, 1, 148, 128, 256) == 1
    # the product's m n (2k - 1) FLOPs and the bias's m n adds: 2 m k n at the sustained rate
    seconds = 2 * m * k * n / (2250 * T * s.efficiency.matrix)
    compute, _ = eff.pass_times(linear(1, m, k, n), "fwd", s, conv.DEFAULT)
    assert compute == seconds


def test_an_unknown_system_lists_the_new_ones():
    with pytest.raises(InputError, match="b200.*gb200.*mi300x"):
        get_system("b100")


H100_BY_HAND = {
    # NVIDIA's H100 SXM datasheet (dense bf16 989.4 TFLOP/s, FP8 1,978.9; 3.35 TB/s; NVLink 900 GB/s both ways
    # in a domain of 8, so 450 a direction; its 80 GB as nvidia-smi's 81,559 MiB), a 400 Gb/s NIC a GPU, PCIe
    # Gen5 to the host; Hopper's chip as the preset assumes
    "name": "h100-typed", "matrix_flops": "989.4e12", "vector_flops": "133.8e12", "hbm_bandwidth": "3.35e12",
    "nvlink_bandwidth": "450e9", "ib_bandwidth": "50e9", "nvlink_size": 8, "hbm_capacity": 81559 * 2**20,
    "host_bandwidth": "64e9", "fp8_flops": "1978.9e12", "host_memory_bandwidth": 2 * 8 * 4800 * 10**6 * 8,
    "l2_capacity": 50 * 2**20, "shared_memory_capacity": 132 * 228 * 2**10, "l2_bandwidth": "10137.6e9",
    "memory_latency": 0.5e-6, "launch_overhead": "4e-6",
    # 132 SMs, 128 x 256 tiles, NCCL's ring at 235/600 of NVLink, the NIC's 50 GB/s, NVLS; H100's fitted factors
    "calibrated": {"family": "h100", "sms": 132, "tile_m": 128, "tile_n": 256, "nvlink_bus": "352.5e9", "ib_bus": "50e9", "arch": "hopper", "nvls": True},
}


@pytest.fixture
def forgets_added_systems():
    """Leave the presets as they were (a system file adds one for the rest of the process)."""
    from symbolic_cost.timing.systems import CALIBRATED
    before, calibrated = dict(SYSTEMS), dict(CALIBRATED)
    yield
    for added in set(SYSTEMS) - set(before):
        del SYSTEMS[added]
    for added in set(CALIBRATED) - set(calibrated):
        del CALIBRATED[added]


def test_a_system_added_by_a_file_alone_answers_as_the_preset_it_restates(tmp_path, capsys, forgets_added_systems):
    """The recipe of docs/contributing.md on a scratch file: H100's datasheet typed by hand as a
    system file gives, through --system-file, every number the h100 preset gives, on the calibrated
    model and on the peak-only one (``--ideal``, which prices NVLink at the file's bandwidth)."""
    import json
    from symbolic_cost.cli import main
    path = tmp_path / "h100-typed.json"
    path.write_text(json.dumps(H100_BY_HAND))
    for ideal in ([], ["--ideal"]):
        answers = []
        for words in (["--system-file", str(path)], ["--system", "h100"]):
            assert main(["summary", "--preset", "gpt2", "--set", "b=4", "d=4", "m1=2", "--zero", "1", *words,
                         *ideal, "--json"]) == 0
            answers.append(json.loads(capsys.readouterr().out))
        typed, preset = answers
        assert typed == preset and typed["parameters"] > 0


@pytest.mark.parametrize("change, message", [
    ({"matrix_flop": 1}, "unknown field(s) matrix_flop"),
    ({"matrix_flops": [1]}, "matrix_flops must be a number"),
    ({"matrix_flops": "fast"}, "matrix_flops must be a number, got 'fast'"),
    ({"calibrated": {"family": "h100", "clock": 2}}, "calibrated holds family"),
    ({"name": "h100", "matrix_flops": "1e15"}, "a system named 'h100' is a preset already"),
    ({"name": "h100\u200b"}, "name must be ASCII letters, digits and . _ + - (as --system names are), got 'h100\\u200b'"),
    ({"name": "my gpu"}, "name must be ASCII letters"),
    ({"calibrated": {"sms": 132}}, "calibrated needs family, tile_m"),
    ({"calibrated": {**H100_BY_HAND["calibrated"], "family": "v100"}}, "calibrated.family must be one of a100, h100, b200, b300"),
    # a stated 0 read as "not stated" skipped the memory check; 1.5 bytes printed a verdict of 1.4e-09 GiB
    ({"hbm_capacity": 0}, "hbm_capacity must be a positive whole number of bytes, got 0"),
    ({"hbm_capacity": 1.5}, "hbm_capacity must be a positive whole number of bytes, got 3/2"),
    # the string "no" turned NVLink SHARP on; a list met a dict lookup (an internal error)
    ({"calibrated": {**H100_BY_HAND["calibrated"], "nvls": "no"}}, "calibrated.nvls must be true or false, got 'no'"),
    ({"calibrated": {**H100_BY_HAND["calibrated"], "nvls": 0}}, "calibrated.nvls must be true or false, got 0"),
    ({"calibrated": {**H100_BY_HAND["calibrated"], "family": ["h100"]}}, "calibrated.family must be text"),
    ({"calibrated": {**H100_BY_HAND["calibrated"], "attention_kernel": ["a"]}}, "calibrated.attention_kernel must be text"),
    # Fraction(1, 0) was an internal error
    ({"matrix_flops": "1/0"}, "matrix_flops must be a number, got '1/0'"),
    ({"calibrated": {**H100_BY_HAND["calibrated"], "nvlink_bus": "0/0"}}, "calibrated.nvlink_bus must be a number"),
    # a figure below a double's smallest: every time read from it printed as a 400-digit number
    ({"hbm_bandwidth": "1e-400"}, "hbm_bandwidth must be within a double's range"),
    # a third of a streaming multiprocessor, a tile of 10^30 rows: each moved the answer
    ({"calibrated": {**H100_BY_HAND["calibrated"], "sms": "1/3"}}, "sms counts streaming multiprocessors: a whole number"),
    ({"calibrated": {**H100_BY_HAND["calibrated"], "tile_m": "1e30"}}, "tile_m counts a tile's rows: a whole number up to 1,024"),
])
def test_a_system_file_is_refused_naming_the_field(tmp_path, capsys, change, message, forgets_added_systems):
    import json
    from symbolic_cost.cli import main
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**H100_BY_HAND, **change}))
    assert main(["summary", "--preset", "gpt2", "--system-file", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_a_result_past_a_double_is_refused_in_json_as_in_text(capsys):
    """An exact integer beyond a double's range (a step time from an absurdly small figure, here
    10^400 TFLOP/s-seconds by hand) was printed in --json as its 400 digits, exit 0, where the text
    output refused it: a JSON reader's doubles take it as inf."""
    from sympy import Integer
    from symbolic_cost.checks import InputError
    from symbolic_cost.cli.units import number
    assert number(Integer(2) ** 1000) == 2 ** 1000          # within a double: printed exactly
    with pytest.raises(InputError, match="in floating point"):
        number(Integer(10) ** 400)


# The systems of issues 62 and 63, each figure restated from its vendor's page (not read from the JSON):
# dense bf16, FP8 and FP4 FLOP/s (0: no such tensor cores), 16-bit vector FLOP/s, HBM bytes/s and bytes,
# devices per scale-up domain, a link's bytes/s a direction, the host link's bytes/s a direction, board watts
NEW_DATASHEETS = {
    # AMD Instinct MI325X datasheet: MI300X's CDNA 3 compute (1,307.4 TFLOP/s dense bf16, 2,614.9 FP8, 163.4
    # FP32 vector), 256 GB HBM3E at 6 TB/s, 7 Infinity Fabric links of 128 GB/s (896 GB/s), PCIe Gen5 x16,
    # 1,000 W; CDNA 3 has no FP4
    "mi325x": (Rational("1307.4") * T, Rational("2614.9") * T, 0, Rational("163.4") * T, 6000 * G, 256 * G, 8,
               448 * G, 64 * G, 1000),
    # AMD Instinct MI355X spec page: 256 CUs at 2.4 GHz, 2.5 PFLOP/s dense bf16 (2,516.6), 5.0 FP8 (5,033.2),
    # MXFP4 10.1 (10,066.3: 16,384 FLOPs a CU a clock; CDNA 4's FP4 is MXFP4, not NVFP4), 157.3 TFLOP/s FP32
    # vector, 288 GB HBM3E at 8 TB/s, 7 Infinity Fabric links of 153.6 GB/s (1,075.2 GB/s), 1,400 W
    "mi355x": (Rational("2516.6") * T, Rational("5033.2") * T, Rational("10066.3") * T, Rational("157.3") * T,
               8000 * G, 288 * G, 8, Rational("537.6") * G, 64 * G, 1400),
    # AMD Instinct MI350X spec page: MI355X's chip at 2.2 GHz: 2,306.9 TFLOP/s dense bf16, 4,613.7 FP8,
    # MXFP4 9.2 PFLOP/s (9,227.5), 144.2 FP32 vector, 288 GB HBM3E at 8 TB/s, 1,000 W
    "mi350x": (Rational("2306.9") * T, Rational("4613.7") * T, Rational("9227.5") * T, Rational("144.2") * T,
               8000 * G, 288 * G, 8, Rational("537.6") * G, 64 * G, 1000),
    # NVIDIA H20 product brief: 148 TFLOP/s dense bf16, 296 FP8, 44 FP32 (16-bit vector twice it, assumed),
    # 96 GB HBM3 at 4.0 TB/s, NVLink 900 GB/s both ways (8 on NVSwitch), PCIe Gen5 x16 (128 GB/s), 400 W
    "h20": (148 * T, 296 * T, 0, 88 * T, 4000 * G, 96 * G, 8, 450 * G, 64 * G, 400),
    # NVIDIA GH200 datasheet, the 96 GB part: H100's 989.4 TFLOP/s dense bf16 and 1,978.9 FP8 (sparse halved),
    # 96 GB HBM3 at 4 TB/s, NVLink-C2C to Grace 900 GB/s both ways, NVLink 900 GB/s both ways; four a node
    # (quad GH200 nodes, assumed); the module's power covers the CPU: not stated (0)
    "gh200": (Rational("989.4") * T, Rational("1978.9") * T, 0, Rational("133.8") * T, 4000 * G, 96 * G, 4,
              450 * G, 450 * G, 0),
    # NVIDIA L40S datasheet: 362.05 TFLOP/s dense bf16 (733 with sparsity), 733 FP8 (1,466), 91.6 FP32 (16-bit
    # vector 1:1), 48 GB GDDR6 at 864 GB/s, no NVLink (a domain of one, no such link: 0), PCIe Gen4 x16 at
    # 64 GB/s both ways, 350 W
    "l40s": (Rational("362.05") * T, 733 * T, 0, Rational("91.6") * T, 864 * G, 48 * G, 1, 0, 32 * G, 350),
}
FAMILIES = {"l40s": "a100"}     # whose fitted factors each borrows (the others H100's)


@pytest.mark.parametrize("name", list(NEW_DATASHEETS))
def test_a_new_preset_states_its_datasheet(name):
    s = get_system(name)
    assert (s.matrix_flops, s.fp8_flops, s.fp4_flops, s.vector_flops, s.hbm_bandwidth, s.hbm_capacity,
            s.nvlink_size, s.nvlink_bandwidth, s.host_bandwidth, s.board_power) == NEW_DATASHEETS[name]


@pytest.mark.parametrize("name", list(NEW_DATASHEETS))
def test_a_new_preset_borrows_a_fitted_family_saying_so(name):
    """No run on these parts is in the calibration set: each takes H100's fitted factors (L40S,
    Ampere-style kernels, A100's), and its file says that it assumes so."""
    from symbolic_cost.timing.systems import CALIBRATED
    family = FAMILIES.get(name, "h100")
    assert eff.family(name) == family
    assert f"family {family}" in CALIBRATED[name]["source"] and "assumed" in CALIBRATED[name]["source"]


@pytest.mark.parametrize("name", list(NEW_DATASHEETS))
def test_a_new_preset_answers_a_summary_and_an_inference(name, capsys):
    from symbolic_cost.cli import main
    assert main(["summary", "--preset", "gpt2", "--system", name]) == 0
    assert f"step time per iteration on {name}" in capsys.readouterr().out
    assert main(["inference", "--preset", "llama-2-7b", "--system", name, "--set", "b=1", "l_in=512",
                 "l_out=128"]) == 0
    assert capsys.readouterr().out


@pytest.mark.parametrize("name", ["mi325x", "h20", "gh200", "l40s"])
def test_a_new_preset_refuses_4_bit_and_block_scaled_products(name):
    """CDNA 3, Hopper and Ada have neither FP4 nor block-scaled tensor cores: NVFP4 training and MXFP8
    are refused, not timed."""
    from symbolic_cost.models.optimizers import get_fp8
    from symbolic_cost.timing.systems import check_block_scaling, product_rate

    class Fp4Row:
        fp4, fp8 = True, True
    with pytest.raises(InputError, match=f"system {name} has no FP4 tensor cores"):
        product_rate(Fp4Row(), get_system(name))
    with pytest.raises(InputError, match="fp8='mxfp8' needs block-scaled"):
        check_block_scaling("mxfp8", get_system(name))
    assert get_fp8("tensorwise") is not None
    check_block_scaling("tensorwise", get_system(name))          # FP8 with a scale per tensor: each runs it


# AMD's CDNA 4 ISA and its MI355X datasheet: the matrix cores run the OCP microscaling formats MXFP8, MXFP6
# and MXFP4 (E8M0 scales per 32 elements), not NVIDIA's NVFP4 (E4M3 scales per 16, an fp32 one per tensor);
# FP8 at 5,033.2 TFLOP/s dense on MI355X, 4,613.7 on MI350X
CDNA4_FP8 = {"mi355x": Rational("5033.2") * T, "mi350x": Rational("4613.7") * T}


@pytest.mark.parametrize("name", list(CDNA4_FP8))
def test_cdna4_runs_mxfp8_at_its_fp8_rate_and_refuses_nvfp4(name):
    """MXFP8 was refused on CDNA 4 (the block-scaling rule read fp4_flops); it runs there, at the FP8
    rate, in training and in served weights.  NVFP4 is refused naming the system and the rule."""
    from symbolic_cost.inference.weight_formats import check_weights, weight_format
    from symbolic_cost.timing.systems import check_block_scaling, product_rate
    system = get_system(name)
    assert set(system.block_formats) == {"mxfp8", "mxfp4"}
    for recipe in ("mxfp8", "mxfp8-params", "torchao-mxfp8", "tensorwise"):
        check_block_scaling(recipe, system)
    check_weights(weight_format("mxfp8"), system)

    class Fp8Row:
        fp4, fp8 = False, True

    class Fp4Row:
        fp4, fp8 = True, True
    assert product_rate(Fp8Row(), system) == CDNA4_FP8[name]
    rule = (rf"needs block-scaled \(NVFP4\) tensor cores, and system {name} runs mxfp8, mxfp4 only "
            rf"\(System.block_formats\)")
    with pytest.raises(InputError, match="fp8='nvfp4' " + rule) as refused:
        check_block_scaling("nvfp4", system)
    assert refused.value.argument == "fp8"
    with pytest.raises(InputError, match=r"weights nvfp4 \(--weights\) " + rule) as refused:
        check_weights(weight_format("nvfp4"), system)
    assert refused.value.argument == "weights"
    with pytest.raises(InputError, match=rule):
        product_rate(Fp4Row(), system)


@pytest.mark.parametrize("name", ["b200", "b300", "gb200", "gb300"])
def test_blackwell_runs_every_block_scaled_format(name):
    """Blackwell's fifth-generation tensor cores run MXFP8, MXFP4 and NVFP4 (Transformer Engine: MXFP8 and
    NVFP4 from SM 10.0 on)."""
    from symbolic_cost.timing.systems import check_block_scaling
    assert set(get_system(name).block_formats) == {"mxfp8", "mxfp4", "nvfp4"}
    for recipe in ("mxfp8", "nvfp4"):
        check_block_scaling(recipe, get_system(name))


def test_block_formats_are_known_names(tmp_path, forgets_added_systems):
    """A system states its block-scaled formats by name; a misspelt one is refused naming the field,
    and a file without the field runs none (as Hopper)."""
    import json
    from symbolic_cost.timing.systems import load_system_file
    with pytest.raises(InputError, match="block_formats must be a list of distinct names among mxfp8, mxfp4, nvfp4"):
        get_system("h100").but(block_formats=("mxfp6",))
    with pytest.raises(InputError, match="block_formats must be a list"):
        get_system("h100").but(block_formats="mxfp8")
    assert get_system("h100").block_formats == ()
    assert get_system("h100").but(block_formats=["nvfp4", "mxfp8"]).block_formats == ("mxfp8", "nvfp4")
    data = {"name": "cdna4-like", "matrix_flops": "2e15", "vector_flops": "1e14", "hbm_bandwidth": "8e12",
            "nvlink_bandwidth": "5e11", "ib_bandwidth": "5e10", "nvlink_size": 8, "fp8_flops": "4e15",
            "block_formats": ["mxfp8", "mxfp4"]}
    path = tmp_path / "cdna4-like.json"
    path.write_text(json.dumps(data))
    assert get_system(load_system_file(path)).block_formats == ("mxfp8", "mxfp4")
    path.write_text(json.dumps({**data, "block_formats": ["fp4"]}))
    with pytest.raises(InputError, match="block_formats must be a list of distinct names"):
        load_system_file(path)


def test_fp8_runs_at_each_new_presets_fp8_rate():
    from symbolic_cost.timing.systems import product_rate

    class Fp8Row:
        fp4, fp8 = False, True
    assert product_rate(Fp8Row(), get_system("h20")) == 296 * T
    assert product_rate(Fp8Row(), get_system("mi355x")) == Rational("5033.2") * T


def test_an_unknown_system_lists_the_parts_of_issues_62_and_63():
    with pytest.raises(InputError, match="h20.*gh200.*l40s.*mi300x.*mi325x.*mi350x.*mi355x"):
        get_system("mi400")


@pytest.mark.parametrize("link", ["nvlink_bandwidth", "ib_bandwidth"])
def test_a_system_file_without_a_links_bandwidth_is_refused_naming_it(tmp_path, capsys, link, forgets_added_systems):
    """A file leaving out a link's bandwidth (which has no default: 0 states that there is no such
    link, as l40s.json's NVLink) was an internal error, System's constructor missing an argument."""
    import json
    from symbolic_cost.cli import main
    path = tmp_path / "no_link.json"
    path.write_text(json.dumps({k: v for k, v in H100_BY_HAND.items() if k != link}))
    assert main(["summary", "--preset", "gpt2", "--system-file", str(path)]) == 2
    assert f"{link} must be given" in capsys.readouterr().err


def test_a_system_without_nvlink_prices_its_collectives_on_the_network(capsys):
    """L40S has no NVLink: a domain of one, so two GPUs' gradient all-reduce crosses the 25 GB/s
    link (PCIe and the NIC alike, assumed) and answers."""
    from symbolic_cost.cli import main
    assert main(["summary", "--preset", "gpt2", "--system", "l40s", "--set", "d=2"]) == 0
    assert "data     allreduce     group 2" in capsys.readouterr().out
