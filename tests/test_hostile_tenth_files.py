"""Reader findings settled by what the framework itself does: accelerate's own launch functions as the
oracle for ``fp8_config.override_linear_precision``, and NeMo 1.x's GPT config for ``--cuda-graphs``."""
import argparse
import pathlib

import pytest
import yaml

from symbolic_cost.checks import InputError
from summary_calls import summary_error, summary_json
from symbolic_cost.models.accelerate import fp8_policy
from symbolic_cost.models.nemo1 import nemo1_setup

accelerate_launch = pytest.importorskip("accelerate.utils.launch")
accelerate_kwargs = pytest.importorskip("accelerate.utils.dataclasses")

OVERRIDES = ["[false, false, false]", "(false, false, false)", "[false, false]", "[false]", "'false,false,false'",
             "[False, 'no', 0]", "['false', 'off', 'n']", "[false, false, false, true]", "[true, false, false]",
             "[false, false, 1]", "'fff'", "'(f, f, f)'", "null", "7", "{a: false}", "[false, maybe, false]",
             "[1.0, 0, 0]", "[null, false, false]", "[' false', false, false]"]


def accelerate_reads(value, monkeypatch):
    """The three flags accelerate's TE recipe ends with for this fp8_config value, or None where it raises:
    ``setup_fp8_env`` as ``accelerate launch`` calls it, then ``TERecipeKwargs`` in that environment (its
    check that Transformer Engine is installed stubbed, as this machine has none)."""
    monkeypatch.setattr(accelerate_kwargs, "is_transformer_engine_available", lambda: True)
    for name in ("FPROP", "DGRAD", "WGRAD"):
        monkeypatch.delenv(f"ACCELERATE_FP8_OVERRIDE_{name}", raising=False)
    try:
        env = accelerate_launch.setup_fp8_env(argparse.Namespace(fp8_override_linear_precision=value), {})
        with monkeypatch.context() as scoped:
            for key, text in env.items():
                scoped.setenv(key, text)
            return list(accelerate_kwargs.TERecipeKwargs().override_linear_precision)
    except (ValueError, IndexError, KeyError, TypeError):
        return None


@pytest.mark.parametrize("text", OVERRIDES)
def test_override_linear_precision_accepted_exactly_where_accelerate_accepts_it(text, monkeypatch):
    """Whatever accelerate refuses, the reader refuses naming the key and the rule; what accelerate reads as
    all three passes in FP8 the reader accepts; a pass kept in 16 bits it refuses as unmodelled."""
    value = yaml.safe_load(text)
    flags = accelerate_reads(value, monkeypatch)
    section = {"backend": "TE", "override_linear_precision": value}
    if flags == [False, False, False]:
        assert fp8_policy(section, [])["fp8"] == "delayed"
        return
    with pytest.raises(InputError) as refused:
        fp8_policy(section, [])
    assert refused.value.argument == "fp8_config.override_linear_precision"
    said = str(refused.value)
    assert ("kept in 16 bits" in said) if flags is not None else ("three flags" in said and "str_to_bool" in said)


def test_oracle_splits_the_cases():
    """The table holds cases accelerate accepts and cases it refuses, so the test above checks both ways."""
    with pytest.MonkeyPatch.context() as patch:
        seen = [accelerate_reads(yaml.safe_load(text), patch) for text in OVERRIDES]
    assert seen[0] == [False, False, False] and seen[1] is None and seen[8] == [True, False, False]


NEMO1_GPT = pathlib.Path(__file__).parent / "framework_inputs" / "nemo1_megatron_gpt_config.yaml"
WHOLE_LAYER = {"attn", "mlp", "moe"}
"""Megatron-Core's local graph without a scope: the whole layer (its attention, MLP and MoE parts)."""


def _nemo1(**model) -> dict:
    """NeMo's megatron_gpt_config.yaml on Megatron-Core's GPT with O2 (what the reader reads), ``model`` keys set."""
    data = yaml.safe_load(NEMO1_GPT.read_text())
    data["model"].update(mcore_gpt=True, megatron_amp_O2=True, **model)
    return data


def test_nemo1_enable_cuda_graph_is_the_whole_layer_local_graph():
    """NeMo 1.x's MegatronGPTModel.build_transformer_config copies model.enable_cuda_graph onto Megatron-Core's
    TransformerConfig (asserting use_te_rng_tracker): the deprecated switch for the local graph of each whole
    layer.  Off (NeMo's default, and the published file's absence of the key) captures nothing."""
    got = nemo1_setup(_nemo1(enable_cuda_graph=True, use_te_rng_tracker=True), "gpt.yaml").policy
    assert set(got["cuda_graphs"]) == WHOLE_LAYER
    for off in ({}, dict(enable_cuda_graph=False, use_te_rng_tracker=True)):
        assert not nemo1_setup(_nemo1(**off), "gpt.yaml").policy.get("cuda_graphs")


@pytest.mark.parametrize("model, key", [(dict(enable_cuda_graph=True), "model.use_te_rng_tracker"),
                                        (dict(enable_cuda_graph=True, use_te_rng_tracker=False),
                                         "model.use_te_rng_tracker"),
                                        (dict(enable_cuda_graph="yes", use_te_rng_tracker=True),
                                         "model.enable_cuda_graph")])
def test_nemo1_cuda_graph_refusals_name_the_key(model, key):
    """NeMo asserts the RNG tracker is on beside CUDA graphs; a switch that is no boolean is refused."""
    with pytest.raises(InputError) as refused:
        nemo1_setup(_nemo1(**model), "gpt.yaml")
    assert refused.value.argument == key and key in str(refused.value)


def test_cuda_graphs_option_still_refused_beside_a_nemo1_file(tmp_path, capsys):
    """The NeMo 1.x file decides its CUDA graphs (model.enable_cuda_graph), so --cuda-graphs beside it is refused,
    as beside a Megatron-Bridge recipe."""
    path = tmp_path / "gpt.yaml"
    path.write_text(yaml.safe_dump(_nemo1(enable_cuda_graph=True, use_te_rng_tracker=True)))
    assert summary_json(capsys, "--nemo-recipe", str(path))["parameters"] > 0
    said = summary_error(capsys, "--nemo-recipe", str(path), "--cuda-graphs", "attn")
    assert "--cuda-graphs" in said
