"""config.json files as published (issue 29, item 3): keys their own ``transformers`` class never reads
are accepted with a note; keys it reads that the library cannot count are still refused by name; the
multi-token-prediction modules say in the output whether they are counted.

The oracle is ``transformers`` itself (5.23, on the meta device, through ``test_hf_families``'
helpers): the parameters of the model it builds from each file, its source (no module of the family
reads an ignored key) and the model it builds with each ignored key set to a value that would change
it if it were read.

``tests/published_configs/`` holds published files the hub serves and ``tests/hf_configs/`` does not
(each was refused before this item); found with the code search of this project's tools, copied as
quoted there:

=================================== ==========================================================================
file                                provenance
=================================== ==========================================================================
gemma-2-27b                         google/gemma-2-27b, as NVIDIA-NeMo/Megatron-Bridge quotes it in
                                    tests/unit_tests/models/gemma/test_gemma2_bridge.py (re-saved by
                                    transformers 5: ``rope_theta`` inside ``rope_parameters``)
SmolLM2-135M                        HuggingFaceTB/SmolLM2-135M, as ``print(config)`` of transformers 4.48 shows
                                    it in a SmolLM2 training write-up (nanotron's export keys kept)
SmolLM2-1.7B-Instruct               HuggingFaceTB/SmolLM2-1.7B-Instruct, from a dump of hub config.json files
                                    with their parameter shapes (Transformers.js settings kept)
Phi-4-mini-instruct                 microsoft/Phi-4-mini-instruct, from the same dump
Qwen3-Coder-480B-A35B-Instruct      Qwen/Qwen3-Coder-480B-A35B-Instruct, as a vLLM-Kunlun tutorial (Multi XPU,
                                    W8A8) quotes it, without the two quantisation objects it says it added
=================================== ==========================================================================
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_hf_families import CONFIGS, hf_model, parameters, scaled  # noqa: E402

from symbolic_cost.checks import InputError  # noqa: E402
from symbolic_cost.cli import main  # noqa: E402
from symbolic_cost.models import Training, model_cost  # noqa: E402
from symbolic_cost.models.config import from_config, load  # noqa: E402
from symbolic_cost.models.families.ignored import IGNORED  # noqa: E402

HERE = Path(__file__).parent / "published_configs"
PUBLISHED = {path.stem: json.loads(path.read_text()) for path in sorted(HERE.glob("*.json"))}
SOURCE = Path(transformers.__file__).parent
NOTED = {                                   # the keys each file carries that its class never reads
    "gemma-2-27b": {"sliding_window_size"},
    "SmolLM2-135M": {"is_llama_config", "rope_interleaved"},
    "SmolLM2-1.7B-Instruct": {"transformers.js_config"},
    "Phi-4-mini-instruct": {"full_attn_mod", "interpolate_factor", "lm_head_bias", "mlp_bias"},
    "Qwen3-Coder-480B-A35B-Instruct": {"qkv_bias", "shared_expert_intermediate_size", "use_qk_norm"},
}
# each ignored key set to a value that would change the model if its class read it
CHANGED = {"sliding_window_size": 16, "is_llama_config": False, "rope_interleaved": True, "full_attn_mod": 2,
           "interpolate_factor": 4, "lm_head_bias": True, "mlp_bias": True, "qkv_bias": True,
           "shared_expert_intermediate_size": 512, "use_qk_norm": False, "transformers.js_config": {"dtype": "fp32"},
           "kv_channels": 64}
BASE = {"gemma2": "gemma-2-27b", "llama": "SmolLM2-135M", "phi3": "Phi-4-mini-instruct",
        "qwen3_moe": "Qwen3-Coder-480B-A35B-Instruct", "*": "SmolLM2-1.7B-Instruct", "nemotron": "Nemotron-Mini-4B"}
"""The published file each family's ignored keys are tried on (``*``: keys of every family), here or
in ``tests/hf_configs/``."""


def library_parameters(config: dict, mtp: bool = False) -> int:
    return model_cost(from_config(config), Training(b=1, l=8, precision="fp32", mtp=mtp)).parameters


def shapes(config: dict) -> dict:
    """Each parameter's name and shape in the model ``transformers`` builds (two layers)."""
    return {name: tuple(p.shape) for name, p in hf_model(scaled(config, 2)).named_parameters()}


def test_every_file_holds_what_its_table_says():
    assert set(PUBLISHED) == set(NOTED)
    for name, keys in NOTED.items():
        assert keys <= set(PUBLISHED[name]), name


@pytest.mark.parametrize("name", sorted(NOTED))
def test_published_file_loads_with_one_note_per_ignored_key(name):
    arch = load(HERE / f"{name}.json")
    assert len(arch.notes) == len(NOTED[name])
    for key in NOTED[name]:
        family = PUBLISHED[name]["model_type"]
        why = IGNORED.get(family, {}).get(key) or IGNORED["*"][key]
        assert sum(f"config.json: {key}=" in note and why in note for note in arch.notes) == 1


@pytest.mark.parametrize("name", sorted(NOTED))
def test_parameters_equal_what_transformers_builds(name):
    config = PUBLISHED[name]
    assert library_parameters(config) == parameters(hf_model(config))


@pytest.mark.parametrize("family, key", [(f, k) for f, keys in IGNORED.items() for k in keys])
def test_no_module_of_the_family_reads_an_ignored_key(family, key):
    """The key appears in no configuration or modeling module of the family (for keys of every
    family: in no module of transformers), and the model transformers builds with the key set to a
    value that would change it equals the model without it; so does the library's count."""
    files = (SOURCE.rglob("*.py") if family == "*" else
             [p for p in (SOURCE / "models" / family).glob("*.py") if p.name.startswith(("configuration", "modeling"))])
    files = list(files)
    assert files
    word = re.compile(rf"(?<![\w.]){re.escape(key)}(?![\w.])")
    assert not [p for p in files if word.search(p.read_text(errors="ignore"))]
    config = PUBLISHED.get(BASE[family]) or CONFIGS[BASE[family]]
    without = {k: v for k, v in config.items() if k != key}
    changed = {**config, key: CHANGED[key]}
    assert shapes(changed) == shapes(without)
    small = lambda c: library_parameters(scaled(c, 2))  # noqa: E731
    assert small(changed) == small(without) == parameters(hf_model(scaled(without, 2)))


def test_a_key_the_class_reads_is_still_refused():
    """Mixtral's router multiplies its input by uniform noise of ``router_jitter_noise`` when
    training; the library does not count it, so a nonzero value is refused by name."""
    assert "config.router_jitter_noise" in (SOURCE / "models" / "mixtral" / "modeling_mixtral.py").read_text()
    config = {**CONFIGS["Mixtral-8x7B-v0.1"], "router_jitter_noise": 0.01}
    with pytest.raises(InputError, match="router_jitter_noise=0.01 is not supported"):
        from_config(config)


def test_a_key_ignored_by_one_family_is_refused_by_another(tmp_path, capsys):
    """The table is per family: nanotron's ``is_llama_config`` is unread by Llama's classes only."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**PUBLISHED["gemma-2-27b"], "is_llama_config": True}))
    assert main(["summary", "--hf-config", str(path)]) == 2
    assert "unknown key 'is_llama_config'" in capsys.readouterr().err


def test_notes_in_json_and_text(capsys):
    path = str(HERE / "Phi-4-mini-instruct.json")
    assert main(["summary", "--hf-config", path, "--set", "l=4096", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert notes == list(load(path).notes)
    assert main(["summary", "--hf-config", path, "--set", "l=4096"]) == 0
    text = capsys.readouterr().out
    assert [line[len("note: "):] for line in text.splitlines() if line.startswith("note: ")] == notes
    assert main(["inference", "--hf-config", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == notes
    assert main(["summary", "--hf-config", str(Path(__file__).parent / "hf_configs" / "gpt2.json"), "--json"]) == 0
    assert "notes" not in json.loads(capsys.readouterr().out)          # nothing to say: no notes


@pytest.mark.parametrize("name", ["DeepSeek-V3", "GLM-4.5-Air"])
def test_multi_token_prediction_says_whether_it_is_counted(name, capsys):
    """DeepSeek-V3's and GLM-4.5's MTP module, which transformers does not build: counted by default
    (and said so, with its parameters: the last decoder layer as transformers builds it, the 2e x e
    projection and three norms of e), left out with ``--no-mtp`` (said so too), where the count is
    what transformers builds."""
    config = CONFIGS[name]
    e = config["hidden_size"]
    layer = sum(p.numel() for p in hf_model(scaled(config, 4)).model.layers[-1].parameters())
    mtp = layer + 2 * e * e + 3 * e
    path = str(Path(__file__).parent / "hf_configs" / f"{name}.json")
    for flags, counted in (([], True), (["--no-mtp"], False)):
        assert main(["summary", "--hf-config", path, "--set", "l=4096", "--json", *flags]) == 0
        out = json.loads(capsys.readouterr().out)
        (note,) = [n for n in out["notes"] if "multi-token-prediction" in n]
        assert f"{mtp:,} parameters" in note
        if counted:
            assert note.startswith("multi-token-prediction modules counted") and "--no-mtp leaves them out" in note
            assert out["mtp_parameters"] == mtp
        else:
            assert note.startswith("multi-token-prediction modules left out (--no-mtp)")
            assert out["parameters"] == parameters(hf_model(config))
