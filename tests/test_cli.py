"""The command line: help, shared options and their defaults, units, multi-pair --set, the
summary's step-time breakdown, one-line errors, and no seed in ``symbolic_cost/cli``."""

import json
import math
import pathlib
import re
import shlex

import pandas as pd
import pytest

from symbolic_cost import conventions as conv
from symbolic_cost import reproduce
from symbolic_cost.cli import COMMANDS, build_parser, main
from symbolic_cost.cli.options import UsageError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import load as load_config, preset
from symbolic_cost.timing.step import step_time_breakdown
from symbolic_cost.timing.hardware import calibrated

CLI = pathlib.Path(__file__).resolve().parent.parent / "symbolic_cost" / "cli"
NAMES = [module.__name__.rsplit(".", 1)[-1] for module in COMMANDS]
MINIMAL = {"search": ["--devices", "8"], "sweep": ["--grid", "b=1"]}   # their required options


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    """Help text unwrapped (argparse wraps at the terminal's width, also at hyphens)."""
    monkeypatch.setenv("COLUMNS", "10000")


def _help(name, capsys):
    assert main([name, "--help"]) == 0
    return " ".join(capsys.readouterr().out.split())


def _defaults(name):
    """The parsed defaults of a command (its minimal valid command line)."""
    args = vars(build_parser().parse_args([name, *MINIMAL.get(name, [])]))
    return {k: v for k, v in args.items() if k not in ("run", "command") and not k.startswith("given_")}


def test_every_command_is_listed():
    assert NAMES == ["table", "formula", "crossover", "optimize", "reproduce", "scheme", "summary", "profile",
                     "sweep", "search", "inference", "lstm", "report", "calibrate", "serve", "plan"]


@pytest.mark.parametrize("name", NAMES)
def test_help_has_a_description_examples_and_the_defaults(name, capsys):
    module = COMMANDS[NAMES.index(name)]
    text = _help(name, capsys)
    description = " ".join(module.__doc__.strip().split("\n\n")[0].split())
    assert description in text
    assert "examples:" in text and f"symbolic-cost {name} " in text.split("examples:")[1]
    for example in module.EXAMPLES:                  # every example is a valid command line
        words = shlex.split(example)
        assert words[:2] == ["symbolic-cost", name]
        build_parser().parse_args(words[1:])
    given = {flag.lstrip("-").replace("-", "_") for flag in MINIMAL.get(name, [])}
    for dest, value in _defaults(name).items():
        if value not in (None, False, []) and not isinstance(value, list) and dest not in given:
            assert f"(default: {value})" in text, f"{name} --{dest}: default {value!r} not shown"


RUN_ELSEWHERE = ("reproduce", "report", "calibrate", "serve")
"""Commands whose examples rewrite the reports or start a server: their own tests run them."""
FILE = re.compile(r"\.(json|sh|toml|ya?ml|csv|parquet)$")


@pytest.mark.parametrize("name", [n for n in NAMES if n not in RUN_ELSEWHERE])
def test_every_example_that_names_no_file_runs(name, capsys):
    """An example in ``--help`` is what a new user types first: each one that reads or writes no
    file of the user's runs and exits 0 (two asked a context the model refuses, unnoticed)."""
    module = COMMANDS[NAMES.index(name)]
    runnable = [shlex.split(example)[1:] for example in module.EXAMPLES
                if not any(FILE.search(word) for word in shlex.split(example))]
    assert runnable, f"{name} has no example that runs without files"
    for words in runnable:
        assert main(words) == 0, f"{shlex.join(words)}: {capsys.readouterr().err.strip()}"
        capsys.readouterr()


def test_field_lists_the_valid_fields_and_each_one_works(capsys):
    from symbolic_cost.cost import EXPRESSION_FIELDS
    from symbolic_cost.numeric.tables import COST_COLUMNS
    from symbolic_cost.timing.hardware import TIME_FIELDS
    text = _help("formula", capsys)
    listed = text.split("one of: ")[1].split(" (default")[0].split(", ")
    expected = [*EXPRESSION_FIELDS, *COST_COLUMNS, "comm_fwd", "comm_bwd", "time", *TIME_FIELDS]
    assert listed == list(dict.fromkeys(expected))
    ratios = {"intensity", "frac_t_comm_fwd", "frac_t_comm_bwd"}
    for field in listed:
        row = ["--row", "fc1"] if field in ratios else []
        assert main(["formula", "--preset", "gpt2", "--field", field, *row]) == 0, field
        capsys.readouterr()
    assert main(["formula", "--field", "flops"]) == 2
    assert "unknown --field 'flops'" in capsys.readouterr().err
    sweep_fields = _help("sweep", capsys).split("any of: ")[1].split(" (default")[0].split(", ")
    assert sweep_fields == ["parameters", "flops_fwd", "flops_bwd", "weight_bytes", "gradient_bytes",
                            "optimizer_bytes", "activation_bytes", "memory_bytes", "total", "compute",
                            "tensor_comm", "bubble", "pipeline_comm", "data_comm", "peak_bytes",
                            "active_parameters", "alltoall_bytes"]


def test_several_pairs_after_one_set_equal_repeated_flags(capsys):
    one = build_parser().parse_args(["formula", "--set", "m1=1", "s1=1", "f=4*e", "--at", "e=8", "l=4"])
    repeated = build_parser().parse_args(["formula", "--set", "m1=1", "--set", "s1=1", "--set", "f=4*e",
                                          "--at", "e=8", "--at", "l=4"])
    assert one.set == repeated.set == ["m1=1", "s1=1", "f=4*e"] and one.at == repeated.at == ["e=8", "l=4"]
    printed = []
    for words in (["--set", "m1=1", "s1=1", "f=4*e", "--at", "e=8", "l=4"],
                  ["--set", "m1=1", "--set", "s1=1", "--set", "f=4*e", "--at", "e=8", "--at", "l=4"]):
        assert main(["formula", "--block", "mlp", *words]) == 0
        printed.append(capsys.readouterr().out)
    # b l (4 e f + 10 e + f) at e = 8, f = 32, l = 4: 4 b (1024 + 80 + 32)
    assert printed[0] == printed[1] == "4544*b\n"


def test_defaults_are_the_same_across_commands():
    plain = Training()
    expected = {"system": "h100", "conventions": "default", "precision": plain.precision, "zero": plain.zero,
                "recompute": plain.recompute, "flash": plain.flash, "units": "gib"}
    seen = {key: {} for key in expected}
    for name in NAMES:
        for key, value in _defaults(name).items():
            if key in seen:
                seen[key][name] = value
    # profile counts MACs: its default is the registered deepspeed-profiler preset, shown in its help
    assert seen["conventions"].pop("profile") in conv.PRESETS
    for key, value in expected.items():
        assert set(seen[key].values()) == {value}, (key, seen[key])
    assert len(seen["system"]) >= 9 and len(seen["precision"]) >= 9
    presets = {name: _defaults(name)["preset"] for name in NAMES if "preset" in _defaults(name)}
    assert set(presets.values()) - {None} == {"gpt3-175b"}     # formula, crossover: symbolic unless given


def test_sequence_length_follows_the_model(capsys, tmp_path):
    assert main(["summary", "--preset", "gpt2"]) == 0       # GPT-2: n_positions 1024
    assert " l=1024 " in capsys.readouterr().out
    assert main(["table", "--preset", "gpt2"]) == 0
    assert " l=1024," in capsys.readouterr().out
    config = tmp_path / "tiny.json"              # no context length stated: LlamaConfig's 2048 (null is refused)
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                                  "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100}))
    assert main(["summary", "--hf-config", str(config)]) == 0
    assert " l=2048 " in capsys.readouterr().out
    assert main(["table", "--hf-config", str(config)]) == 0
    assert " l=2048," in capsys.readouterr().out


def test_table_units_are_in_every_header(capsys):
    # the GPT-3 175B MLP at b = 1, l = 2048, m1 = 1: fc1 is a (2048 x 12288)(12288 x 49152) product with bias
    fc1_flops = 2 * 2048 * 12288 * 49152
    fc1_weight_bytes = 2 * (12288 * 49152 + 49152)
    assert main(["table", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split(",")
    assert header[:3] == ["layer", "flops_fwd (TFLOP)", "activation_in_mem (GiB)"]
    assert "t_fwd (s)" in header and "comm_fwd (GiB)" in header and "weights_mem (GiB)" in header
    fc1 = dict(zip(header, next(line for line in lines if line.startswith("fc1,")).split(",")))
    assert math.isclose(float(fc1["flops_fwd (TFLOP)"]), fc1_flops / 1e12, rel_tol=1e-12)
    assert math.isclose(float(fc1["weights_mem (GiB)"]), fc1_weight_bytes / 2**30, rel_tol=1e-12)
    assert main(["table", "--format", "csv", "--units", "si"]) == 0
    lines = capsys.readouterr().out.splitlines()
    fc1 = dict(zip(lines[0].split(","), next(line for line in lines if line.startswith("fc1,")).split(",")))
    assert float(fc1["flops_fwd (FLOP)"]) == fc1_flops and float(fc1["weights_mem (B)"]) == fc1_weight_bytes
    assert main(["table"]) == 0
    text = capsys.readouterr().out
    assert "units TFLOP, GiB, s" in text and "flops_fwd (TFLOP)" in text and "t_total_fwd (s)" in text


def test_summary_prints_the_step_time_breakdown(capsys):
    settings = ["--preset", "gpt2", "--set", "b=2", "l=128", "d=2", "p=2", "n_micro=4"]
    cost = model_cost(preset("gpt2"), Training(b=2, l=128, d=2, p=2, micro_batches=4))
    expected = {k: float(v) for k, v in step_time_breakdown(cost, calibrated("h100")).items()}
    assert main(["summary", *settings, "--json", "--ideal"]) == 0       # the peak-only bound, as named
    ideal = json.loads(capsys.readouterr().out)
    assert ideal["time_model"] == "ideal" and ideal["step_time_s"] == pytest.approx(
        {k: float(v) for k, v in step_time_breakdown(cost, "h100").items()}, rel=1e-12)
    assert main(["summary", *settings, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    parts = report["step_time_s"]
    assert report["time_model"] == "calibrated" and parts["total"] > ideal["step_time_s"]["total"]
    assert list(parts) == ["compute", "tensor_comm", "bubble", "pipeline_comm", "data_comm", "optimizer", "framework",
                           "total"]
    # predicted MFU by hand: model FLOPs over (devices x peak x step time)
    flops = float(cost.model_flops_fwd + cost.model_flops_bwd)
    assert math.isclose(report["predicted"]["mfu"], flops / (4 * 989.4e12 * parts["total"]), rel_tol=1e-9)
    for part, value in expected.items():
        assert math.isclose(parts[part], value, rel_tol=1e-12), part
    # by hand: the parts add up; 1F1B with p = 2 idles (p - 1) slots of one micro-batch (n = 4)
    assert math.isclose(parts["total"], sum(v for k, v in parts.items() if k != "total"), rel_tol=1e-12)
    assert math.isclose(parts["bubble"], (parts["compute"] + parts["tensor_comm"]) / 4, rel_tol=1e-12)
    assert parts["data_comm"] > 0 and parts["pipeline_comm"] > 0 and parts["tensor_comm"] == 0
    assert main(["summary", *settings]) == 0
    lines = capsys.readouterr().out.splitlines()
    memory = next(i for i, line in enumerate(lines) if line.startswith("memory per device"))
    assert lines[memory + 1].startswith("activations per pipeline rank: 0: ")
    assert lines[memory + 2].startswith("parameters per device of each pipeline rank: 0: ")
    assert lines[memory + 3].startswith("peak memory per device: ")    # models.peak, tests/test_peak_memory.py
    step = lines[memory + 4]                          # the breakdown next to the memory
    assert step.startswith("step time per iteration on h100: ")
    for part, value in expected.items():
        printed = re.search(rf"\b{part} ([0-9.e+-]+) s\b", step)
        assert printed and math.isclose(float(printed.group(1)), value, rel_tol=1e-3), part


def test_profile_default_conventions_are_shown_and_an_explicit_choice_is_honoured(capsys):
    assert "(default: deepspeed-profiler)" in _help("profile", capsys)
    outputs = []
    for extra in ([], ["--conventions", "default"]):
        assert main(["profile", "--preset", "gpt2", "--set", "b=1", "l=8", "--depth", "1", *extra]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] != outputs[1]      # exact products (mn(2k-1)) make fewer MACs than 2mnk


def test_lstm_takes_a_named_starting_point_and_explicit_options(capsys):
    sizes = ["--batch", "8", "--steps", "4", "--hidden", "1000", "--vocab", "1000", "--layers", "2"]
    assert main(["lstm", *sizes]) == 0
    out = capsys.readouterr().out
    # by hand: embedding V D = 10^6, cells L (2D + 1) G D = 2 x 2001 x 4 x 1000, softmax (D + 1) V = 1001 x 1000
    assert out.startswith("LSTM language model on h100: 0.01801 billion parameters")
    assert "stage times (s):" in out and "memory per data shard (GiB)" in out
    named = [name for name in reproduce.names() if main(["lstm", "--from", name]) == 0]
    assert len(named) == 1                       # one reproduction defines an LSTM model
    capsys.readouterr()
    assert main(["lstm", "--from", named[0], "--system", "h100"]) == 0      # an explicit option wins
    assert capsys.readouterr().out.startswith("LSTM language model on h100: ")


@pytest.mark.parametrize("argv,named", [
    (["table", "--system", "tpu"], "--system"),
    (["table", "--set", "q=3"], "unknown name 'q'"),
    (["table", "--set", "m1"], "--set expects name=value"),
    (["formula", "--field", "nope"], "--field"),
    (["summary", "--set", "e=3"], "--set e"),
    (["summary", "--zero", "4"], "--zero"),
    (["sweep", "--grid", "q=1"], "--grid"),
    (["lstm"], "--batch"),
    (["table", "--units", "furlongs"], "--units"),
    (["table", "--bogus"], "--bogus"),
])
def test_bad_input_is_one_line_and_status_2(argv, named, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and named in err and "Traceback" not in err and not captured.out


def test_parser_errors_do_not_exit():
    with pytest.raises(UsageError):
        build_parser().parse_args(["table", "--format", "yaml"])


def test_no_seed_and_no_private_argparse_in_cli():
    """Seeds are named only through registries (conventions presets, the reproductions)."""
    text = {path.name: path.read_text() for path in CLI.glob("*.py")}
    forbidden = ["lbnl", "seed", "deepflow", "perlmutter", "pycomm", "ulysses-prefill", "ulysses_prefill", "training-info",
                 "training_info", "symbolic_cost.reproduce."]
    forbidden += [name for name in reproduce.names() if name not in conv.PRESETS]
    for name, source in text.items():
        for word in forbidden:
            assert word not in source.lower(), f"cli/{name} mentions {word!r}"
        assert not re.search(r"\._[A-Za-z]", source), f"cli/{name} uses a private attribute"
    assert "deepspeed-profiler" not in "".join(s for n, s in text.items() if n != "profile.py")


HF = pathlib.Path(__file__).parent / "hf_configs"


def test_block_commands_build_the_models_own_layer(capsys):
    """Mistral-NeMo's head_dim 128 (not 5120/32 = 160): Q, K, V of 32 + 2 x 8 heads of 128 over
    5120 inputs, the output projection 4096 -> 5120, one RMS norm, in bf16 (by hand)."""
    nemo = str(HF / "Mistral-Nemo-Base-2407.json")
    assert main(["formula", "--hf-config", nemo, "--block", "attention", "--field", "weights",
                 "--row", "qkv_proj", "--set", "m1=1", "s1=1"]) == 0
    assert capsys.readouterr().out.split()[0] == str(5120 * 48 * 128 * 2)
    assert main(["formula", "--hf-config", nemo, "--block", "attention", "--field", "weights",
                 "--set", "m1=1", "s1=1"]) == 0
    assert capsys.readouterr().out.split()[0] == str((5120 * 48 * 128 + 4096 * 5120 + 5120) * 2)


def test_table_shows_each_layer_group_with_its_count(capsys):
    """Gemma 2 2B alternates 13 sliding-window layers (4096 keys) with 13 global ones: at l = 8192
    a query's scores are (2 x 256 - 1) FLOPs for each of 4096 or 8192 keys, 8 heads; the MLPs
    of the two kinds are alike, one group of 26."""
    gemma = str(HF / "gemma-2-2b.json")
    pairs = {1: 8192 * 4096, 2: 8192 * 8192}
    for group, keys in pairs.items():
        assert main(["table", "--hf-config", gemma, "--block", "attention", "--layer-group", str(group),
                     "--units", "si", "--format", "csv"]) == 0
        rows = {line.split(",")[0]: line.split(",") for line in capsys.readouterr().out.splitlines()}
        assert float(rows["logits"][1]) == 511 * 8 * keys
    assert main(["table", "--hf-config", gemma, "--block", "attention", "--layer-group", "2"]) == 0
    out = capsys.readouterr().out
    assert "(layer group 2 of 2: 13 layers)" in out and "sum x the layers of group 2 of 2 (13)" in out
    assert main(["table", "--hf-config", gemma, "--block", "mlp"]) == 0
    assert "sum x depth (26)" in capsys.readouterr().out
    assert main(["table", "--hf-config", gemma, "--block", "mlp", "--layer-group", "2"]) == 2
    assert "--layer-group 2: gemma-2-2b has 1 layer group" in capsys.readouterr().err


def test_profile_shows_each_run_of_identical_layers(capsys):
    """DeepSeek-V2-Lite: one dense layer, then 26 MoE layers; the tree prints layer 0, layer 1
    and '(2..26): layer as above', not the dense layer 'as above' for all 27."""
    assert main(["profile", "--hf-config", str(HF / "DeepSeek-V2-Lite.json"), "--depth", "2"]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    layers = lines[lines.index(next(x for x in lines if x.startswith("layers"))) + 1:][:3]
    assert [x.split(":")[0] for x in layers] == ["0 (layer)", "1 (layer)", "(2..26)"]
    assert layers[0] != layers[1].replace("1 (layer)", "0 (layer)")        # different parameters


def test_search_and_sweep_time_on_the_calibrated_model_unless_ideal(capsys):
    # the sweep's step time is the calibrated model's, as the library computes it for that layout;
    # --ideal gives the peak-only bound
    cost = model_cost(preset("gpt2"), Training(b=2, l=128, d=2))
    for flags, system in (([], calibrated("h100")), (["--ideal"], "h100")):
        assert main(["sweep", "--preset", "gpt2", "--set", "l=128", "d=2", "--grid", "b=2", "--field", "total",
                     *flags]) == 0
        total = float(capsys.readouterr().out.strip().splitlines()[-1].split(",")[-1])
        assert math.isclose(total, float(step_time_breakdown(cost, system)["total"]), rel_tol=1e-9)
    assert main(["search", "--preset", "gpt2", "--devices", "2", "--global-batch", "4", "--seq", "128",
                 "--top", "1"]) == 0
    assert "(calibrated time model)" in capsys.readouterr().out
    assert main(["search", "--preset", "gpt2", "--devices", "2", "--global-batch", "4", "--seq", "128",
                 "--top", "1", "--ideal"]) == 0
    assert "(peak-only bound)" in capsys.readouterr().out
    assert main(["summary", "--preset", "gpt2", "--kernel-time", "tiled"]) == 2
    assert "add --ideal" in capsys.readouterr().err


def test_search_predicts_the_mfu_summary_predicts_for_its_best_layout(capsys):
    assert main(["search", "--preset", "gpt2", "--devices", "2", "--global-batch", "8", "--seq", "128",
                 "--top", "1"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()[1:3]
    best = dict(zip(header.replace(" (s)", "").replace(" (GiB)", "").split(), row.split()))
    layout = [f"{k}={best[k]}" for k in ("m1", "s1", "d", "p", "b", "n_micro")]
    flags = [] if best["recompute"] == "none" else ["--recompute", best["recompute"]]
    assert main(["summary", "--preset", "gpt2", "--set", "l=128", *layout, "--zero", best["zero"], *flags,
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert float(best["mfu"]) == pytest.approx(report["predicted"]["mfu"], abs=1e-4)
    assert float(best["tokens/s/device"]) == pytest.approx(report["predicted"]["tokens_per_s_per_device"], rel=1e-3)



def test_summary_prints_counts_with_thousands_separators(capsys):
    """GPT-2 small's 124,439,808 parameters (Hugging Face's count), all on the one device: both
    lines print the count the same way."""
    assert main(["summary", "--preset", "gpt2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "parameters: 124,439,808" in lines and "parameters per device: 124,439,808" in lines


def test_crossover_and_derivatives_over_l_leave_a_models_l_free(capsys):
    """A model's context fixes ``l`` for a block's numbers, but ``crossover --for l`` and
    ``formula --diff l`` ask about ``l``: it stays a symbol unless ``--set`` fixes it.  GPT-3 175B
    (e = 12,288, h = 96, f = 4e), by the hand counts of ``tests/test_analysis.py``: attention's
    forward FLOPs equal the MLP's at l = (8e^2 + 5e + h) / (4e + 3h); the MLP's grow by
    16e^2 + 14e a token."""
    from sympy import Rational, sympify
    e, h = 12288, 96
    assert main(["crossover", "--preset", "gpt3-175b"]) == 0
    assert sympify(capsys.readouterr().out.splitlines()[1]) == Rational(8 * e**2 + 5 * e + h, 4 * e + 3 * h)
    assert main(["formula", "--preset", "gpt3-175b", "--block", "mlp", "--diff", "l"]) == 0
    assert capsys.readouterr().out.strip() == str(16 * e**2 + 14 * e)
    assert main(["crossover", "--preset", "gpt3-175b", "--set", "l=2048"]) == 2       # nothing left to solve for
    assert "--for l: the formula has no l" in capsys.readouterr().err

def test_version_is_the_installed_distributions(capsys):
    from importlib.metadata import version
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"symbolic-cost {version('symbolic_cost')}"


def test_search_json_gives_every_layout_with_its_prediction(capsys):
    argv = ["search", "--preset", "gpt2", "--devices", "2", "--global-batch", "8", "--seq", "128", "--top", "3"]
    assert main(argv + ["--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["time_model"] == "calibrated" and 3 == len(found["best"]) <= found["fitting"] <= found["evaluated"]
    first = found["best"][0]
    # tokens/s per device: 8 sequences of 128 tokens over 2 devices in one step
    assert first["tokens_per_s_per_device"] == pytest.approx(8 * 128 / 2 / first["total"])
    assert [b["total"] for b in found["best"]] == sorted(b["total"] for b in found["best"])


def test_a_search_that_no_split_pipelines_says_so(capsys):
    """gpt2's 12 layers over 11 devices: 11 stages would need nine middle stages of
    ``ceil(12/11) = 2`` layers, 18 in all, and 11 is the only degree between 2 and 11 that divides
    11; over 5 devices p = 5 splits them unevenly (three middle stages of 3, ends of 1 and 2), and
    nothing is noted."""
    argv = ["search", "--preset", "gpt2", "--seq", "128", "--json"]
    assert main(argv + ["--global-batch", "22", "--devices", "11", "--top", "1"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert len(notes) == 1 and "gpt2's 12 layers over 11 devices as search splits them" in notes[0]
    assert "--first-stage-layers" in notes[0]
    assert main(argv + ["--global-batch", "20", "--devices", "5", "--top", "100"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert "notes" not in printed
    assert {(row["first_stage_layers"], row["last_stage_layers"]) for row in printed["best"] if row["p"] == 5} == {(1, 2)}


def test_sweep_over_p_places_the_layers_of_each_p(capsys):
    """DeepSeek-V2-Lite's dense first layer sits on the first rank, so the busiest rank's
    weights and activations depend on p beyond 1/p: a sweep over p equals model_cost at each p."""
    arch_file = str(HF / "DeepSeek-V2-Lite.json")
    assert main(["sweep", "--hf-config", arch_file, "--set", "l=4096", "n_micro=9", "b=1", "--grid", "p=1,3,9",
                 "--field", "weight_bytes,activation_bytes"]) == 0
    rows = [line.split(",") for line in capsys.readouterr().out.split()[1:]]
    arch = load_config(arch_file)
    for p, weights, activations in rows:
        cost = model_cost(arch, Training(b=1, l=4096, p=int(float(p)), micro_batches=9))
        assert (float(weights), float(activations)) == (float(cost.weight_bytes), float(cost.activation_bytes))


def test_a_search_where_nothing_fits_says_so(capsys):
    """GPT-3 175B's 16 bytes a parameter of weights, gradients and Adam's states (2.8 TB) over at
    most 8 shards (m1 x p = 8, ZeRO-0) are 350 GB a device: nothing fits an H100's 80 GB
    (79.6 GiB), and the search says so instead of printing an empty table."""
    assert main(["search", "--preset", "gpt3-175b", "--devices", "8", "--global-batch", "64"]) == 0
    out = capsys.readouterr().out
    assert "0 fit" in out and "none of the" in out and "79.6 GiB of one h100; --everything also tries" in out
    assert "Empty DataFrame" not in out



def test_search_in_si_units_prints_whole_bytes(capsys):
    """``--units si``: memory in bytes is a whole number (no ``.0000``), equal to the GiB default's
    column times 2^30 to the four decimals that one prints."""
    argv = ["search", "--preset", "gpt2", "--devices", "2", "--global-batch", "8", "--seq", "128", "--top", "2"]
    tables = {}
    for units in ("si", "gib"):
        assert main(argv + ["--units", units]) == 0
        header, *rows = capsys.readouterr().out.strip().splitlines()[1:-1]     # the last: the expected error
        names = header.replace(" (s)", "").replace(" (GiB)", "").replace(" (B)", "").split()
        tables[units] = [row.split()[names.index("memory")] for row in rows]
    assert all(x.isdigit() for x in tables["si"]), tables
    assert [round(int(x) / 2**30, 4) for x in tables["si"]] == [float(x) for x in tables["gib"]]

def test_a_sweep_holds_its_grid_to_the_models_context_as_summary_does(capsys):
    """RoBERTa reads 514 positions: ``summary`` refuses l = 1024, and a sweep whose grid holds it
    once evaluated that row (symbolic ``l`` passed the check); ``--allow-long`` lets both go on."""
    roberta = ["--hf-config", str(pathlib.Path(__file__).parent / "hf_configs" / "roberta-base.json")]
    assert main(["summary", *roberta, "--set", "l=1024"]) == 2
    capsys.readouterr()
    assert main(["sweep", *roberta, "--grid", "l=512,1024", "--field", "memory_bytes"]) == 2
    assert "--grid at l=1024: l = 1024 tokens exceed the context of roberta-base" in capsys.readouterr().err
    assert main(["sweep", *roberta, "--grid", "l=512,1024", "--field", "memory_bytes", "--allow-long"]) == 0
    assert main(["sweep", *roberta, "--grid", "l=256,512", "--field", "memory_bytes"]) == 0


@pytest.mark.parametrize("top", [[], ["--top", "3", "--by", "total"]])
def test_a_sweep_that_keeps_nothing_says_so(capsys, top):
    """GPT-3 175B's 175 billion parameters take 350 GB in 16-bit on one device (m1 = p = 1): no
    row fits 80 GB, and beside the header-only CSV a note names the grid's size and the rule."""
    assert main(["sweep", "--preset", "gpt3-175b", "--grid", "b=1,2", "l=1024,2048", "--where", "memory_bytes <= 80e9",
                 "--field", "memory_bytes,total", *top]) == 0
    out, err = capsys.readouterr()
    assert out.split() == ["b,l,memory_bytes,total_s"]
    assert "none of the 4 configurations meets memory_bytes <= 80e9" in err


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_sweep_into_a_file_that_keeps_nothing_says_so(capsys, tmp_path, suffix):
    """The same with ``--out``: the file holds no row, and the note says why; a file with rows
    (the rule ``memory_bytes > 80e9``) gets no note."""
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    for rule, rows in (("memory_bytes <= 80e9", 0), ("memory_bytes > 80e9", 4)):
        out = tmp_path / f"{rows}{suffix}"
        assert main(["sweep", "--preset", "gpt3-175b", "--grid", "b=1,2", "l=1024,2048", "--where", rule,
                     "--field", "memory_bytes,total", "--out", str(out)]) == 0
        written = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
        assert len(written) == rows
        assert ("none of the 4 configurations meets" in capsys.readouterr().err) == (rows == 0)


@pytest.mark.parametrize("dask", [False, True])
def test_sweep_top_gives_the_plain_sweeps_rows_of_least_by(capsys, dask):
    """``--top N --by FIELD`` prints what the plain sweep prints, sorted by FIELD (stable: ties in
    the grid's order) and cut to N: GPT-2 in one build (here, and on a Dask cluster of one
    worker), and DeepSeek-V2-Lite over p, one build a p, the best of each ranked together."""
    import io
    import pandas as pd
    if dask:
        pytest.importorskip("distributed")
    def table(argv):
        assert main(argv) == 0
        return pd.read_csv(io.StringIO(capsys.readouterr().out))
    cases = [(["--preset", "gpt2", "--grid", "b=1,2,4,8", "m1=1,2,4", "d=1,2,4,8", "--where", "memory_bytes <= 2e9",
               "--field", "memory_bytes,total"], "total", "total_s")]
    if not dask:
        cases.append((["--hf-config", str(HF / "DeepSeek-V2-Lite.json"), "--set", "l=4096", "n_micro=9",
                       "--grid", "p=1,3,9", "b=1,2,3", "--field", "weight_bytes,activation_bytes"],
                      "activation_bytes", "activation_bytes"))
    for argv, by, name in cases:
        plain = table(["sweep", *argv])
        expected = plain.sort_values(name, kind="stable").head(4).reset_index(drop=True)
        assert len(plain) > 4
        top = table(["sweep", *argv, "--top", "4", "--by", by, *(["--dask", "1"] if dask else [])])
        pd.testing.assert_frame_equal(top, expected, check_exact=True)


def test_the_command_list_answers_without_loading_a_command():
    """``--help`` (and a command line naming no command) lists every command with the summary its
    module's docstring gives, read from the source: neither SymPy, pandas nor a command module is
    imported (the benchmark times it; here only what it imports is checked)."""
    import subprocess
    import sys
    code = ("import contextlib, io, sys\nfrom symbolic_cost.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])\n"
            "print(sorted(m for m in sys.modules if m in ('sympy', 'pandas', 'numpy') or m.startswith('symbolic_cost.cli.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    # answers and warm serve a command line before any command loads: the standard library only
    assert loaded == "['symbolic_cost.cli.answers', 'symbolic_cost.cli.parser', 'symbolic_cost.cli.warm']"


@pytest.mark.parametrize("name", __import__("symbolic_cost.cli", fromlist=["NAMES"]).NAMES)
def test_each_listed_summary_is_its_commands_description(name):
    import importlib
    from symbolic_cost.cli import build_parser, commands_parser
    listed = next(a for a in commands_parser()._actions if a.dest == "command")._choices_actions
    shown = {action.dest: action.help for action in listed}
    full = build_parser(name)
    described = next(a for a in full._actions if a.dest == "command").choices[name].description
    assert shown[name] == described
    assert importlib.import_module(f"symbolic_cost.cli.{name}").__doc__.strip().startswith(described.split()[0])


def test_summary_json_carries_the_layout_a_framework_file_decodes_to(capsys):
    # DeepSpeedExamples' ZeRO-3 config on 8 devices: micro-batch 8, accumulation 1, ZeRO-3, fp16
    # (tests/framework_inputs/PROVENANCE.md), as docs/frameworks.md works it by hand
    here = pathlib.Path(__file__).parent
    assert main(["summary", "--hf-config", str(here / "hf_configs" / "Llama-3.2-1B.json"), "--deepspeed",
                 str(here / "framework_inputs" / "ds_zero_stage_3_config.json"), "--devices", "8", "--set", "l=2048",
                 "--json"]) == 0
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert {k: layout[k] for k in ("b", "l", "d", "micro_batches", "m1", "p", "zero", "precision", "recompute")} == \
        dict(b=8, l=2048, d=8, micro_batches=1, m1=1, p=1, zero=3, precision="fp16", recompute="none")


def test_a_sweep_field_may_be_named_as_its_column_is_headed(capsys):
    """The CSV heads the step time ``total_s``; ``--field total_s`` names it as ``--field total``
    does (it was refused as unknown)."""
    assert main(["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--field", "total_s"]) == 0
    by_column = capsys.readouterr().out
    assert main(["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--field", "total"]) == 0
    assert by_column == capsys.readouterr().out and by_column.splitlines()[0] == "b,total_s"


def test_a_where_of_one_swept_symbol_cuts_its_axis_before_the_rules(capsys):
    """``--where 'Eq(Mod(96, m1), 0)'`` (the help's own example) keeps the tensor degrees that
    divide GPT-3's 96 heads: 1, 2, 3, 4, 6, 8 of 1..8, counted by hand; the others are never built,
    so the rule they break refuses nothing (m1=5 used to stop the sweep)."""
    assert main(["sweep", "--preset", "gpt3-175b", "--grid", "m1=1:8:+1", "--where", "Eq(Mod(96, m1), 0)",
                 "--field", "total"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [int(float(r.split(",")[0])) for r in rows] == [1, 2, 3, 4, 6, 8]
