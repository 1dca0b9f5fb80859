"""CUDA graphs as the framework readers find them, and ``--cuda-graphs`` on the command line.

The expected scopes are written here from the frameworks' own code, not from the library's output:

* Megatron-LM (``megatron/training/arguments.py``, ``validate_args``; Megatron-Core's
  ``TransformerConfig.__post_init__`` and ``cuda_graph_config.py``): ``--enable-cuda-graph`` becomes
  ``--cuda-graph-impl local`` and ``--external-cuda-graph`` ``transformer_engine`` (asserted beside
  another implementation, or together); an empty ``--cuda-graph-modules`` (``--cuda-graph-scope``,
  its deprecated name since 0.18; both together asserted) captures the whole layer; ``local`` adds
  ``moe_preprocess`` to ``moe_router`` and the reverse; the deprecated scope ``full_iteration``
  migrates to ``--cuda-graph-impl full_iteration``, whose scope must be empty; ``moe``/``moe_router``
  are asserted without experts and ``mlp`` where every layer is an MoE layer.
* Megatron-Bridge 067f987df (``src/megatron/bridge/utils/cuda_graph.py``,
  ``validate_cuda_graph_configuration``, called by ``ConfigContainer.validate`` before the model's
  ``finalize`` runs Megatron-Core's ``__post_init__``): a ``cuda_graph_impl`` of ``none`` has its
  scope cleared first, so ``enable_cuda_graph``/``external_cuda_graph`` capture the whole layer;
  ``local`` is refused except for the whole step.  The recipes' own settings are quoted with their
  file and line.
* The whole layer is ``attn``, ``mlp`` and ``moe`` (Megatron-Core's ``_te_cuda_graph_capture``
  with no module named runs ``_forward_attention`` and ``_forward_mlp``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from summary_calls import summary_error, summary_json
from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, bridge_recipes
from symbolic_cost.models.config import from_config
from symbolic_cost.models.launch_script import read_launch
from symbolic_cost.models.megatron_args import megatron_setup
from symbolic_cost.models.megatron_bridge import megatron_bridge_setup
from symbolic_cost.models.megatron_words import inert

HF = Path(__file__).resolve().parent / "hf_configs"
WHOLE_LAYER = {"attn", "mlp", "moe"}

DENSE = ("--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
         "--micro-batch-size 1 --global-batch-size 8 --tokenizer-type NullTokenizer --vocab-size 1000 --swiglu ")
MOE = DENSE + "--num-experts 8 --moe-ffn-hidden-size 64 --moe-router-topk 2 "


def _megatron(words: str):
    return megatron_setup(read_launch(f"torchrun --nproc_per_node 8 pretrain_gpt.py {words}", "s", inert=inert), "s")


def _graphs(words: str) -> tuple:
    """The ``Training`` the reader's policy builds: its ``cuda_graphs``."""
    return Training(cuda_graphs=_megatron(words).policy.get("cuda_graphs", ())).cuda_graphs


def test_transformer_engine_graphs_of_the_attention_and_the_router():
    assert _graphs(MOE + "--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router") == (
        "attn", "moe_router")
    assert _graphs(MOE + "--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router") == (
        "attn", "moe_router")
    # '=' form, as argparse takes it
    assert _graphs(MOE + "--cuda-graph-impl=transformer_engine --cuda-graph-scope=moe_router") == ("moe_router",)


def test_the_deprecated_switches_capture_the_whole_layer():
    assert set(_graphs(DENSE + "--enable-cuda-graph")) == WHOLE_LAYER
    assert set(_graphs(DENSE + "--external-cuda-graph")) == WHOLE_LAYER
    assert set(_graphs(DENSE + "--cuda-graph-impl local --cuda-graph-scope full")) == WHOLE_LAYER
    # with a scope, the switch is only the implementation
    assert _graphs(DENSE + "--external-cuda-graph --cuda-graph-scope attn") == ("attn",)


def test_no_implementation_no_graph():
    assert _graphs(DENSE) == ()
    assert _graphs(MOE + "--cuda-graph-impl none --cuda-graph-scope attn moe_router") == ()


def test_local_graphs_take_the_router_and_its_preprocessing_together():
    assert set(_graphs(MOE + "--cuda-graph-impl local --cuda-graph-scope moe_router")) == {
        "moe_router", "moe_preprocess"}
    assert set(_graphs(MOE + "--cuda-graph-impl local --cuda-graph-scope attn moe_preprocess")) == {
        "attn", "moe_router", "moe_preprocess"}


def test_the_whole_step():
    assert _graphs(DENSE + "--cuda-graph-impl full_iteration") == ("full_iteration",)
    assert _graphs(DENSE + "--enable-cuda-graph --cuda-graph-scope full_iteration") == ("full_iteration",)
    setup = _megatron(DENSE + "--cuda-graph-scope full_iteration")
    assert setup.policy["cuda_graphs"] == ("full_iteration",)
    assert any("full_iteration" in n and "0.18" in n for n in setup.notes)


def test_a_mamba_scope_captures_nothing_here():
    assert _graphs(DENSE + "--cuda-graph-impl transformer_engine --cuda-graph-scope attn mamba") == ("attn",)


@pytest.mark.parametrize("words, argument, said", [
    (DENSE + "--enable-cuda-graph --external-cuda-graph", "--external-cuda-graph", "together"),
    (DENSE + "--enable-cuda-graph --cuda-graph-impl transformer_engine", "--enable-cuda-graph", "refuses both"),
    (DENSE + "--cuda-graph-impl transformer_engine --cuda-graph-scope attn --cuda-graph-modules attn",
     "--cuda-graph-scope", "together"),
    (DENSE + "--cuda-graph-impl transformer_engine --cuda-graph-scope full_iteration", "--cuda-graph-scope",
     "full_iteration"),
    (DENSE + "--cuda-graph-impl full_iteration --cuda-graph-modules attn", "--cuda-graph-modules", "no scope"),
    (DENSE + "--cuda-graph-impl transformer_engine --cuda-graph-scope moe_router", "--cuda-graph-scope",
     "no experts"),
    (MOE + "--cuda-graph-impl transformer_engine --cuda-graph-scope mlp", "--cuda-graph-scope", "MoE layer"),
    (MOE + "--enable-cuda-graph", "--enable-cuda-graph", "dropless"),
    (MOE + "--cuda-graph-impl transformer_engine --cuda-graph-scope moe", "--cuda-graph-scope", "dropless"),
    (DENSE + "--cuda-graph-impl transformer_engine --cuda-graph-scope moe_preprocess", "--cuda-graph-scope",
     "moe_router"),
    (DENSE + "--cuda-graph-impl transformer_engine --cuda-graph-scope atn", "--cuda-graph-scope", "atn"),
    (DENSE + "--cuda-graph-impl cudagraph", "--cuda-graph-impl", "cudagraph"),
    (DENSE + "--cuda-graph-impl transformer_engine --cuda-graph-scope", "--cuda-graph-scope", "names"),
    (DENSE + "--cuda-graph-impl local --cuda-graph-scope full attn", "--cuda-graph-scope", "full"),
])
def test_refusals_name_the_option(words, argument, said):
    with pytest.raises(InputError) as caught:
        _megatron(words)
    assert caught.value.argument == argument and said in str(caught.value)


def test_graphs_of_a_capacity_factor_moe_module():
    """With a capacity factor the MoE module's shapes are fixed: the whole layer replays, MoE too.
    Named, ``moe`` needs the inputs padded to capacity too (Megatron-Core: "moe cuda graph is only
    supported with drop-padding MoE"), which this reader does not read: refused."""
    assert set(_graphs(MOE + "--moe-expert-capacity-factor 1 --enable-cuda-graph")) == WHOLE_LAYER
    with pytest.raises(InputError, match="drop-padding"):
        _graphs(MOE + "--moe-expert-capacity-factor 1 --cuda-graph-impl transformer_engine --cuda-graph-scope attn moe")


def test_the_warmup_steps_change_no_count():
    assert set(_graphs(DENSE + "--cuda-graph-impl transformer_engine --cuda-graph-warmup-steps 2")) == WHOLE_LAYER


BRIDGE = dict(model=dict(num_layers=4, hidden_size=256, num_attention_heads=4, ffn_hidden_size=1024, vocab_size=1000,
                         seq_length=128), train=dict(micro_batch_size=1, global_batch_size=8))


def _bridge(**model):
    text = yaml.safe_dump(dict(BRIDGE, model=dict(BRIDGE["model"], **model)))
    return megatron_bridge_setup(text, "x", 8)


def _bridge_graphs(**model) -> tuple:
    return Training(cuda_graphs=_bridge(**model).policy.get("cuda_graphs", ())).cuda_graphs


def test_a_bridge_config_reads_the_implementation_and_the_scope():
    assert _bridge_graphs(cuda_graph_impl="transformer_engine", cuda_graph_scope=["attn", "mlp"]) == ("attn", "mlp")
    assert _bridge_graphs(cuda_graph_impl="transformer_engine", cuda_graph_modules=["mlp"]) == ("mlp",)
    assert set(_bridge_graphs(cuda_graph_impl="transformer_engine", cuda_graph_scope="full")) == WHOLE_LAYER
    assert _bridge_graphs(cuda_graph_impl="full_iteration", cuda_graph_scope=[]) == ("full_iteration",)
    assert _bridge_graphs(cuda_graph_impl="local", cuda_graph_scope=["full_iteration"]) == ("full_iteration",)
    assert _bridge_graphs(cuda_graph_impl="local", cuda_graph_modules="full_iteration") == ("full_iteration",)
    # validate_cuda_graph_configuration clears the scope of "none" before Megatron-Core could migrate it
    assert _bridge_graphs(cuda_graph_impl="none", cuda_graph_scope=["full_iteration"]) == ()
    assert _bridge_graphs() == ()


def test_bridge_switches_run_whole_layer_graphs():
    assert set(_bridge_graphs(enable_cuda_graph=True)) == WHOLE_LAYER
    setup = _bridge(external_cuda_graph=True, cuda_graph_scope=["attn"])
    assert set(setup.policy["cuda_graphs"]) == WHOLE_LAYER
    assert any("model.external_cuda_graph" in n and "clears" in n for n in setup.notes)


@pytest.mark.parametrize("model, argument", [
    (dict(enable_cuda_graph=True, external_cuda_graph=True), "model.external_cuda_graph"),
    (dict(enable_cuda_graph=True, cuda_graph_impl="local"), "model.enable_cuda_graph"),
    (dict(cuda_graph_impl="local", cuda_graph_scope=["attn"]), "model.cuda_graph_impl"),
    (dict(cuda_graph_impl="transformer_engine", cuda_graph_scope=["attn"], cuda_graph_modules=["mlp"]),
     "model.cuda_graph_scope"),
    (dict(cuda_graph_impl="transformer_engine", cuda_graph_scope=["moe_router"]), "model.cuda_graph_scope"),
    (dict(cuda_graph_impl="cudagraph"), "model.cuda_graph_impl"),
    (dict(cuda_graph_impl="transformer_engine", cuda_graph_scope=["atn"]), "model.cuda_graph_scope"),
])
def test_bridge_refusals_name_the_key(model, argument):
    with pytest.raises(InputError) as caught:
        _bridge(**model)
    assert caught.value.argument == argument


def test_a_bridge_recipes_graphs():
    # perf_recipes/qwen/b200/qwen3_moe.py:202-203: transformer_engine, ["attn", "moe_router", "moe_preprocess"]
    qwen = from_config(json.loads((HF / "Qwen3-30B-A3B.json").read_text()), "qwen3")
    found = bridge_recipes.recipe_setup("qwen3_30b_a3b_pretrain_8gpu_b200_bf16_config", qwen)
    assert found.policy["cuda_graphs"] == ("attn", "moe_router", "moe_preprocess")
    # perf_recipes/llama/b200/llama3.py:47-48: local, ["full_iteration"]
    llama = from_config(json.loads((HF / "Llama-3.1-8B.json").read_text()), "llama")
    found = bridge_recipes.recipe_setup("llama3_8b_pretrain_8gpu_b200_bf16_config", llama)
    assert found.policy["cuda_graphs"] == ("full_iteration",)
    # an override YAML's scope over the recipe's, as Megatron-Bridge's --config-file merges it
    found = bridge_recipes.recipe_setup("qwen3_30b_a3b_pretrain_8gpu_b200_bf16_config", qwen,
                                        overrides={"model": {"cuda_graph_scope": ["attn", "moe_router"]}})
    assert found.policy["cuda_graphs"] == ("attn", "moe_router")


GPT2 = ["--preset", "gpt2", "--set", "b=1", "l=1024", "d=1"]


def test_the_command_line_option_reaches_the_step_time(capsys):
    plain = summary_json(capsys, *GPT2)
    graphed = summary_json(capsys, *GPT2, "--cuda-graphs", "attn")
    assert graphed["layout"]["cuda_graphs"] == ["attn"] and plain["layout"]["cuda_graphs"] == []
    assert graphed["step_time_s"]["total"] < plain["step_time_s"]["total"]
    assert graphed["flops_fwd"] == plain["flops_fwd"] and graphed["memory_bytes"] == plain["memory_bytes"]
    both = summary_json(capsys, *GPT2, "--cuda-graphs", "attn,mlp")
    assert both["step_time_s"]["total"] < graphed["step_time_s"]["total"]
    # GPT-2 is dense: the router's scope would capture nothing, and Megatron-Core refuses it
    assert "no experts" in summary_error(capsys, *GPT2, "--cuda-graphs", "moe_router")


def test_the_command_line_option_refused_where_it_cannot_act(capsys):
    assert "--cuda-graphs" in summary_error(capsys, *GPT2, "--cuda-graphs", "attn", "--ideal")
    assert "--cuda-graphs" in summary_error(capsys, *GPT2, "--cuda-graphs", "moe_preprocess")    # needs moe_router
    script = Path(__file__).resolve().parent / "framework_inputs" / "train_gpt3_175b_distributed.sh"
    err = summary_error(capsys, "--megatron-args", str(script), "--devices", "1024", "--vocab-size", "50257",
                        "--cuda-graphs", "attn")
    assert "--cuda-graphs" in err and "decide" in err


def test_a_megatron_script_carries_its_graphs_to_the_summary(tmp_path, capsys):
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {MOE} --bf16 "
                      f"--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router\n")
    got = summary_json(capsys, "--megatron-args", str(script))
    assert got["layout"]["cuda_graphs"] == ["attn", "moe_router"]
