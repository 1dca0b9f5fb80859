"""torchtitan job TOMLs of 2024-05 to 2025-04 as published (``framework_inputs/PROVENANCE.md``: each
file's header names its commit): the keys of the spring 2024 ``[training]`` section
(``pipeline_parallel_degree``, ``fp8_linear``), the first generation's ``[training]
fsdp_reshard_after_forward``, and the debug model's 8 layers before torchtitan f64cf3c18 (2025-04-15).

Oracles: torchtitan's sources at those commits (named with each test) and counts by hand."""

import pathlib

from summary_calls import summary_error, summary_json

INPUTS = pathlib.Path(__file__).resolve().parent / "framework_inputs"


def _debug_parameters(layers: int, vocab: int = 2000) -> int:
    """torchtitan's Llama debug model by hand: dim 256, 16 heads, as many key/value heads (n_kv_heads
    None), the MLP int(2 x 4 x 256 / 3) = 682 rounded up to 256's multiple, 768; RMSNorm weights, no
    biases, an untied head."""
    dim, mlp = 256, 768
    block = 4 * dim * dim + 3 * dim * mlp + 2 * dim
    return layers * block + 2 * vocab * dim + dim


def test_llama3_8b_of_2024_05_reads_its_training_keys(capsys):
    """llama3_8b.toml at 5e84866e3: [training] data_parallel_degree -1 (64 processes: FSDP over 64),
    tensor_parallel_degree 1, pipeline_parallel_degree 1 ("1 means disabled", torchtitan/config_manager.py
    there) and fp8_linear "" (its default: no float8); batch 1 of 8,192 tokens; selective op."""
    got = summary_json(capsys, "--torchtitan", str(INPUTS / "llama3_8b_2024-05.toml"), "--devices", "64")
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["d"], layout["m1"], layout["p"]) == (1, 8192, 64, 1, 1)
    assert (layout["zero"], layout["fp8"], layout["recompute"]) == (3, None, "op")
    assert got["parameters"] == 8030261248           # Llama 3 8B, as the later files count it
    assert "[training] pipeline_parallel_degree, [training] fp8_linear" in got["notes"][0]


def test_fp8_linear_dynamic_and_a_pipeline_of_2024_05_are_refused(capsys, tmp_path):
    """fp8_linear "dynamic" swapped every linear layer, the output head too (torchtitan/float8_linear.py at
    5e84866e3: swap_linear_with_float8_linear(model, Float8DynamicLinear), nothing skipped); a pipeline degree
    above 1 raised "PP not implemented yet" (parallelize_llama.py there)."""
    text = (INPUTS / "llama3_8b_2024-05.toml").read_text()
    dynamic = tmp_path / "dynamic.toml"
    dynamic.write_text(text.replace('fp8_linear = ""', 'fp8_linear = "dynamic"'))
    err = summary_error(capsys, "--torchtitan", str(dynamic), "--devices", "64")
    assert "[training] fp8_linear 'dynamic'" in err and "output head" in err
    piped = tmp_path / "piped.toml"
    piped.write_text(text.replace("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 2"))
    assert "[training] pipeline_parallel_degree 2: a pipeline of torchtitan's first TOML generation" in summary_error(
        capsys, "--torchtitan", str(piped), "--devices", "64")


def test_first_generation_debug_model_has_eight_layers(capsys):
    """debug_model.toml at 82afc842e (2025-02-21): [training] fsdp_reshard_after_forward "default" (5940ddeb5's
    key, the later one's values); llama2_configs' and llama3_configs' debugmodel had n_layers=8 there
    (torchtitan/models/llama/__init__.py), selective_ac_option '2' recomputes every second layer: 4 of 8."""
    got = summary_json(capsys, "--torchtitan", str(INPUTS / "debug_model_2025-02.toml"), "--devices", "8",
                "--vocab-size", "2000")
    assert got["parameters"] == _debug_parameters(8) == 7844096
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["d"], layout["zero"]) == (8, 2048, 8, 3)
    assert (layout["recompute"], layout["recompute_layers"], layout["reshard_after_forward"]) == ("full", 4, True)
    assert "[training] fsdp_reshard_after_forward" in got["notes"][0]


def test_norm_type_file_of_2025_04_has_eight_layers(capsys):
    """debug_model.toml at e4e48349c (2025-04-07, the [parallelism] section and norm_type): 8 layers until
    f64cf3c18 (2025-04-15) made them 6; the file of 2025-06 (no norm_type, removed in 5078e92e4) keeps 6."""
    got = summary_json(capsys, "--torchtitan", str(INPUTS / "debug_model_2025-04-07.toml"), "--devices", "8",
                "--vocab-size", "2000")
    assert got["parameters"] == _debug_parameters(8)
    assert any("debugmodel: 8 layers" in note and "norm_type" in note for note in got["notes"])
    later = summary_json(capsys, "--torchtitan", str(INPUTS / "debug_model.toml"), "--devices", "8", "--vocab-size", "2000")
    assert later["parameters"] == _debug_parameters(6) == 6139136


def test_llama2_7b_of_2024_is_torchtitans_llama2_flavour(capsys):
    """llama2_7b.toml at 6a6f755d2 (name "llama2", flavor "7B": torchtitan/models/llama/__init__.py there,
    ModelArgs(dim=4096, n_layers=32, n_heads=32), multiple_of 256, Llama 2's 32,000-token tokenizer): the MLP
    int(2 x 4 x 4096 / 3) = 10,922 rounded up to 11,008; by hand 32 x (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096)
    + 2 x 32000 x 4096 + 4096 = 6,738,415,616, Llama 2 7B's count; batch 8 of 2,048, FSDP over 8."""
    got = summary_json(capsys, "--torchtitan", str(INPUTS / "llama2_7b_2024-12.toml"), "--devices", "8")
    assert got["parameters"] == 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 2 * 32000 * 4096 + 4096
    assert got["parameters"] == 6738415616
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["d"], layout["zero"], layout["recompute"]) == (8, 2048, 8, 3, "op")
    assert "(llama2 7B)" in got["model"]


def test_another_model_name_is_refused_by_name(capsys, tmp_path):
    """A [model] name the reader does not bundle is refused naming it (flux, say), and the TOMLs' llama2 is listed."""
    other = tmp_path / "flux.toml"
    other.write_text((INPUTS / "llama2_7b_2024-12.toml").read_text().replace('name = "llama2"', 'name = "flux"'))
    err = summary_error(capsys, "--torchtitan", str(other), "--devices", "8")
    assert "[model] name 'flux'" in err and "llama3, llama2, deepseek_v3" in err


def test_a_llama4_toml_naming_its_tokenizer_takes_the_vocabulary_given(capsys):
    """llama4_17bx16e.toml at e0d2de682 (2025-04-18) names tokenizer_path; torchtitan then sized Llama 4's
    vocabulary by that tokenizer (torchtitan/experiments/llama4/model/args.py there: vocab_size = -1, "defined
    later by tokenizer", update_from_config sets tokenizer.n_words), stated as 202,048 only from 177b295d2
    (2025-07-22).  Without --vocab-size: the stated one, as the last TOML (hf_assets_path) counts, noted; with it:
    the word table and the untied head, 2 x 5120 x (words), follow."""
    path = str(INPUTS / "llama4_17bx16e_2025-04.toml")
    stated = summary_json(capsys, "--torchtitan", path, "--devices", "64")
    later = summary_json(capsys, "--torchtitan", str(INPUTS / "torchtitan_toml_477784a" / "llama4_17bx16e.toml"),
                  "--devices", "64")
    assert stated["parameters"] == later["parameters"]
    assert any(note.startswith("[model] tokenizer_path: until 177b295d2") for note in stated["notes"])
    assert not any("tokenizer_path" in note for note in later["notes"])
    given = summary_json(capsys, "--torchtitan", path, "--devices", "64", "--vocab-size", "200256")
    assert stated["parameters"] - given["parameters"] == 2 * 5120 * (202048 - 200256)
    assert any(note.startswith("--vocab-size 200256: the vocabulary of the tokenizer") for note in given["notes"])
