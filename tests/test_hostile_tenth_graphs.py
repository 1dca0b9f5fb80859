"""A tenth probe: CUDA graphs (``Training(cuda_graphs=...)``, ``--cuda-graphs``, the Megatron-LM and
Megatron-Bridge readers' ``cuda_graph_impl``/``cuda_graph_scope``), ``Efficiency.group_kernel`` and
``Cost.graph`` given hostile values (wrong types, empty, unknown, repeated and huge lists, symbols,
negative and unset factors) and combinations Megatron-Core refuses, on every model kind.  Most were
refused as the rules ask; what was not is tested here, one test per finding, each saying what
happened before.  The expectations follow from Megatron-Core's own rules (``TransformerConfig.
__post_init__`` and ``_layer_is_graphable`` in ``megatron/core/transformer``), not from the
library's output."""

import json
from pathlib import Path

import pytest
from sympy import Rational

from test_hostile_seventh import refusal
from test_refusals import refused

HF = Path(__file__).parent / "hf_configs"
MIXTRAL, T5, DEEPSEEK = (HF / f"{name}.json" for name in ("Mixtral-8x7B-v0.1", "t5-small", "DeepSeek-V2-Lite"))
"""Mixtral: every layer an MoE layer; T5: dense, encoder-decoder; DeepSeek-V2-Lite: its first layer
dense (``first_k_dense_replace`` 1), the other 26 MoE."""
DENSE = ("--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
         "--micro-batch-size 1 --global-batch-size 8 --tokenizer-type NullTokenizer --vocab-size 1000 --swiglu ")


def _arch(path):
    from symbolic_cost.models.config import from_config
    return from_config(json.loads(Path(path).read_text()))


def _seconds(arch, training) -> float:
    from symbolic_cost.models import model_cost
    from symbolic_cost.timing.hardware import calibrated
    from symbolic_cost.timing.step import step_time_breakdown
    return float(step_time_breakdown(model_cost(arch, training), calibrated("h100"))["total"])


def _megatron_graphs(words: str) -> tuple:
    from symbolic_cost.models.launch_script import read_launch
    from symbolic_cost.models.megatron_args import megatron_setup
    from symbolic_cost.models.megatron_words import inert
    setup = megatron_setup(read_launch(f"torchrun --nproc_per_node 8 pretrain_gpt.py {words}", "s", inert=inert), "s")
    return setup.policy.get("cuda_graphs", ())


# scopes and the model


def test_an_moe_module_captured_whole_with_a_capacity_factor_is_timed():
    """``Training(capacity_factor=5/4, cuda_graphs=("moe",))`` on Mixtral (and ``--cuda-graphs moe
    --capacity-factor 1.25``) was refused as "dropless routing ... give a capacity_factor", the
    capacity factor given: the model's own counts (``Training.own_counts``, dropless) kept the
    graphs.  Megatron-Core captures a drop-and-pad MoE module whole; the graphs change launches
    only, so the parameters are the same and the step shorter."""
    from symbolic_cost.models import Training, model_cost
    arch = _arch(MIXTRAL)
    plain = Training(b=1, l=4096, ep=8, etp=1, d=8, capacity_factor=Rational(5, 4))
    graphed = Training(b=1, l=4096, ep=8, etp=1, d=8, capacity_factor=Rational(5, 4), cuda_graphs=("moe",))
    assert model_cost(arch, graphed).parameters == model_cost(arch, plain).parameters
    assert _seconds(arch, graphed) < _seconds(arch, plain)


@pytest.mark.parametrize("path, scopes", [
    (None, ("moe_router",)),                       # GPT-2: no experts
    (None, ("moe",)),
    (None, ("attn", "moe_router", "moe_preprocess")),
    (T5, ("moe_router",)),                         # an encoder-decoder without experts
    (MIXTRAL, ("mlp",)),                           # every layer MoE: no dense MLP
])
def test_graphs_of_a_part_the_model_lacks_are_refused(capsys, path, scopes):
    """Each was accepted and changed nothing (``--cuda-graphs moe_router`` on GPT-2 printed GPT-2's
    step time without graphs): the scope names a part the model does not have.  Megatron-Core
    asserts "moe cuda graph is only supported for MoE" and "mlp cuda graph is only supported for
    dense layers"; the readers refused them already, ``Training`` now does too."""
    from symbolic_cost.models import Training, model_cost
    from symbolic_cost.models.config import preset
    arch = preset("gpt2") if path is None else _arch(path)
    degrees = dict(ep=8, etp=1, d=8) if path == MIXTRAL else {}
    refusal(lambda: model_cost(arch, Training(b=1, l=512, cuda_graphs=scopes, **degrees)), "cuda_graphs")
    model = ["--preset", "gpt2"] if path is None else ["--hf-config", str(path)]
    refused(capsys, ["summary", *model, "--set", "b=1", "l=512", *[f"{k}={v}" for k, v in degrees.items()],
                     "--cuda-graphs", ",".join(scopes)], "--cuda-graphs")


def test_the_dense_mlp_of_a_model_with_some_dense_layers_is_still_captured():
    """The other side of the rule: DeepSeek-V2-Lite's first layer is dense, so ``mlp`` captures it
    (Megatron-Core refuses ``mlp`` only where no layer is dense) and the step is shorter."""
    from symbolic_cost.models import Training
    arch = _arch(DEEPSEEK)
    assert _seconds(arch, Training(b=1, l=1024, cuda_graphs=("mlp",))) < _seconds(arch, Training(b=1, l=1024))


def test_a_scope_of_mamba_alone_captures_nothing_of_a_transformer():
    """``--cuda-graph-impl transformer_engine --cuda-graph-modules mamba`` on a GPT model was read
    as the whole layer (attn, mlp, moe): ``mamba`` was dropped and the empty scope left was read as
    Megatron-Core's empty scope.  Megatron-Core's ``_layer_is_graphable`` graphs a transformer
    layer under a non-empty scope only for attn, mlp or an MoE scope: none is graphed.  Beside
    ``full_iteration``, whose scope Megatron-Core asserts is empty, ``mamba`` is refused."""
    from symbolic_cost.blocks.graphs import graph_scopes
    assert graph_scopes("transformer_engine", ["mamba"]) == () and graph_scopes("local", "mamba") == ()
    assert graph_scopes("transformer_engine", ["mamba", "attn"]) == ("attn",)
    assert _megatron_graphs(DENSE + "--cuda-graph-impl transformer_engine --cuda-graph-modules mamba") == ()
    refusal(lambda: graph_scopes("full_iteration", ["mamba"]), "cuda_graph_scope")


# graphs beside recomputation


def test_per_layer_graphs_beside_full_recomputation_are_refused(tmp_path, capsys):
    """``--recompute full --cuda-graphs attn``, ``Training(recompute="full", cuda_graphs=("attn",))``,
    a Megatron-LM script of ``--cuda-graph-impl transformer_engine --recompute-granularity full`` and
    a Megatron-Bridge dump of ``external_cuda_graph: true`` with ``recompute_granularity: full`` were
    each accepted and timed.  Megatron-Core asserts "full recompute is only supported with full
    iteration CUDA graph"; the whole step's graph stays allowed beside it."""
    from symbolic_cost.models import Training
    refusal(lambda: Training(recompute="full", cuda_graphs=("attn",)), "cuda_graphs")
    assert Training(recompute="full", cuda_graphs=("full_iteration",)).cuda_graphs == ("full_iteration",)
    refused(capsys, ["summary", "--preset", "gpt2", "--set", "b=1", "l=512", "--recompute", "full",
                     "--cuda-graphs", "attn"], "--cuda-graphs", "full recompute")
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {DENSE} --bf16 --cuda-graph-impl transformer_engine "
                      f"--recompute-granularity full --recompute-method uniform --recompute-num-layers 1\n")
    refused(capsys, ["summary", "--megatron-args", str(script), "--devices", "8"], "--cuda-graph-impl",
            "--recompute-granularity full")
    dump = (Path(__file__).parent / "framework_inputs" / "megatron_bridge_llama32_1b.yaml").read_text()
    for old, new in (("  external_cuda_graph: false\n", "  external_cuda_graph: true\n"),
                     ("  recompute_granularity: null\n", "  recompute_granularity: full\n"),
                     ("  recompute_method: null\n", "  recompute_method: uniform\n")):
        assert dump.count(old) == 1
        dump = dump.replace(old, new)
    (tmp_path / "run.yaml").write_text(dump)
    refused(capsys, ["summary", "--nemo-recipe", str(tmp_path / "run.yaml"), "--devices", "8"],
            "model.cuda_graph_impl", "recompute_granularity 'full'")


# refusals of a size a reader can read


def test_a_scope_list_named_twice_or_huge_is_refused_in_a_line(capsys):
    """``Training(cuda_graphs=["attn"] * 10000)`` was refused with the whole tuple in the message
    (80,000 characters), ``cuda_graph_impl`` and a scope of a megabyte were echoed whole, and
    ``--cuda-graphs`` of a 100,000-letter name or 20,000 unknown names printed 100 to 150 kB on
    stderr; an empty name (``--cuda-graphs ""``) read "unknown ; known".  Each repeat is now named
    once, and names are cut as ``checks.listed`` cuts them."""
    from symbolic_cost.blocks.graphs import graph_scopes
    from symbolic_cost.models import Training
    error = refusal(lambda: Training(cuda_graphs=["attn"] * 10_000), "cuda_graphs")
    assert "attn named twice" in str(error) and len(str(error)) < 200
    for call, name in ((lambda: Training(cuda_graphs=["a" * 10**6]), "cuda_graphs"),
                       (lambda: graph_scopes("x" * 10**6, None), "cuda_graph_impl"),
                       (lambda: graph_scopes("transformer_engine", ["a" * 10**6]), "cuda_graph_scope"),
                       (lambda: graph_scopes("transformer_engine", {"a" * 10**6: 1}), "cuda_graph_scope")):
        assert len(str(refusal(call, name))) < 300
    base = ["summary", "--preset", "gpt2", "--cuda-graphs"]
    assert len(refused(capsys, base + ["a" * 100_000], "--cuda-graphs")) < 300
    assert "and 19,995 more" in refused(capsys, base + [",".join(f"x{i}" for i in range(20_000))], "--cuda-graphs")
    assert "unknown ''" in refused(capsys, base + [""], "--cuda-graphs")


# the time model's factors


@pytest.mark.parametrize("factor", ["group_kernel", "kernel", "step", "matrix", "nvlink_bus"])
def test_an_efficiency_factor_of_a_negative_symbol_is_refused(factor):
    """``efficiency.but(group_kernel=Symbol("g", negative=True))`` and ``-Symbol("g", positive=True)``
    were taken (only a number's sign was looked at), and the step time then shrank with every
    grouped product.  A symbol SymPy knows to be negative breaks "at least 0" as a number does; a
    positive one stays, and for a factor that must be positive a non-positive one is refused too."""
    from sympy import Symbol
    from symbolic_cost.timing.hardware import calibrated
    efficiency = calibrated("h100").efficiency
    g = Symbol("g", positive=True)
    refusal(lambda: efficiency.but(**{factor: Symbol("n", negative=True)}), factor)
    refusal(lambda: efficiency.but(**{factor: -g}), factor)
    assert getattr(efficiency.but(**{factor: g}), factor) == g
    if factor in ("matrix", "nvlink_bus"):
        refusal(lambda: efficiency.but(**{factor: Symbol("z", nonpositive=True)}), factor)


def test_an_unset_group_kernel_moves_with_kernel():
    """``Efficiency(..., kernel=4 us)`` without ``group_kernel`` (documented: ``None`` is
    ``kernel``), then ``.but(kernel=9 us)``: ``group_kernel`` stayed 4 us, a value nobody gave, so a
    grouped GEMM's further launches kept the old cost.  Unset, it follows ``kernel``; given (as the
    calibrated systems give it), it stays."""
    from symbolic_cost.timing.efficiency import Efficiency
    from symbolic_cost.timing.hardware import calibrated
    us = Rational(1, 10**6)
    own = Efficiency(matrix=Rational(1, 2), memory=Rational(1, 2), kernel=4 * us, step=0, sms=132, tile_m=128,
                     tile_n=128, nvlink_bus=10**11, ib_bus=10**10)
    assert own.group_kernel == 4 * us and own.but(kernel=9 * us).group_kernel == 9 * us
    assert own.but(kernel=9 * us, group_kernel=us).group_kernel == us
    assert own.but(group_kernel=2 * us).but(kernel=9 * us).group_kernel == 2 * us
    fitted = calibrated("h100").efficiency
    assert fitted.but(kernel=9 * us).group_kernel == fitted.group_kernel != 9 * us
    refusal(lambda: own.but(follows_kernel=False), "follows_kernel")


# the whole step's graph


def test_the_whole_steps_graph_captures_the_embedding_and_head_and_replays_once():
    """``--cuda-graphs full_iteration`` on GPT-2 gave the step time of ``attn,mlp`` to the last digit
    (7.46 ms on H100): each layer replayed a graph of its own, and the embedding, the LM head and
    the loss launched their kernels from the host.  Megatron-LM's ``full_iteration`` graph
    (``FullCudaGraphWrapper``) is one graph of the whole forward and backward: every row of the
    stack is now captured and one replays, so the step is shorter than with per-layer graphs by
    at least the 12 layers' further replays in each pass."""
    from symbolic_cost import conventions as conv
    from symbolic_cost.models import Training
    from symbolic_cost.models.config import preset
    from symbolic_cost.models.stack import model_stack
    from symbolic_cost.timing.hardware import calibrated
    gpt2 = preset("gpt2")
    stack = model_stack(gpt2, Training(b=1, l=1024, cuda_graphs=("full_iteration",)), 1, 1, 2, conv.DEFAULT)
    graphs = [row.graph for block, _ in stack for row in block]
    assert graphs[0] == "replay" and graphs[1:] == ["captured"] * (len(graphs) - 1)
    per_layer = _seconds(gpt2, Training(b=1, l=1024, cuda_graphs=("attn", "mlp")))
    whole = _seconds(gpt2, Training(b=1, l=1024, cuda_graphs=("full_iteration",)))
    assert per_layer - whole >= float((12 * 2 - 2) * calibrated("h100").efficiency.kernel)


def test_transformer_engines_router_graph_beside_a_recomputed_moe_module_is_refused():
    """``--cuda-graph-impl transformer_engine --cuda-graph-modules moe_router --recompute-granularity
    selective --recompute-modules moe`` was read and timed; Megatron-Core asserts "moe recompute is
    not supported with moe_router CUDA graph" for Transformer Engine's graphs (a recomputed module
    must lie inside a graph or outside it).  Its own ``local`` graphs are allowed the same."""
    moe = DENSE + "--num-experts 8 --moe-ffn-hidden-size 64 --moe-router-topk 2 --cuda-graph-modules moe_router " \
                  "--recompute-granularity selective --recompute-modules moe "
    refusal(lambda: _megatron_graphs(moe + "--cuda-graph-impl transformer_engine"), "--cuda-graph-impl")
    assert _megatron_graphs(moe + "--cuda-graph-impl local") == ("moe_router", "moe_preprocess")


def test_a_whole_moe_module_graph_of_tokens_dropped_not_padded_is_refused(tmp_path, capsys):
    """``--cuda-graph-modules moe --moe-expert-capacity-factor 1.0`` (Megatron-LM, whose
    ``--moe-pad-expert-input-to-capacity`` the reader does not read) and a Megatron-Bridge dump of
    ``cuda_graph_scope: [moe]`` with a capacity factor and ``moe_pad_expert_input_to_capacity:
    false`` were read and timed as a captured MoE module.  Megatron-Core asserts "moe cuda graph is
    only supported with drop-padding MoE": tokens dropped without padding change the shapes.
    Padded (Bridge), or through ``Training``, whose capacity factor pads, it is taken."""
    moe = DENSE + "--num-experts 8 --moe-ffn-hidden-size 64 --moe-router-topk 2 --moe-expert-capacity-factor 1.0 " \
                  "--cuda-graph-impl transformer_engine "
    refusal(lambda: _megatron_graphs(moe + "--cuda-graph-modules moe"), "--cuda-graph-modules")
    assert _megatron_graphs(moe + "--cuda-graph-modules attn moe_router") == ("attn", "moe_router")
    from symbolic_cost.models.megatron_bridge import cuda_graphs
    from symbolic_cost.models.megatron_bridge_keys import Container
    for padded in (False, True):
        c = Container({"model": {"cuda_graph_impl": "transformer_engine", "cuda_graph_scope": ["moe"],
                                 "moe_expert_capacity_factor": 1.0, "moe_pad_expert_input_to_capacity": padded}},
                      "run.yaml")
        call = lambda: cuda_graphs(c, _arch(MIXTRAL), Rational(1), [])   # noqa: E731
        if padded:
            assert call() == ("moe",)
        else:
            refusal(call, "model.cuda_graph_scope")


def test_a_search_with_per_layer_graphs_tries_no_full_recomputation(capsys):
    """With the rules above, ``search --cuda-graphs attn`` must not try full recomputation, nor on
    GPT-2 (attention dropout) the selective one of its attention core (every layout was refused);
    a search of full recomputation alone beside them is refused."""
    from symbolic_cost.cli import main
    from symbolic_cost.models.config import preset
    from symbolic_cost.numeric.search import Space, search
    assert main(["search", "--preset", "gpt2", "--devices", "4", "--global-batch", "8", "--seq", "256", "--top",
                 "100", "--cuda-graphs", "attn", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert best and {row["recompute"] for row in best} == {"none"}
    space = Space(global_batch=8, seq=256, recompute=("full",), policy={"cuda_graphs": ("attn",)})
    refusal(lambda: search(preset("gpt2"), 4, space=space, top=1), "cuda_graphs")


def test_the_all_to_all_preprocess_graph_of_tokens_dropped_not_padded_is_refused():
    """``--cuda-graph-modules moe_router moe_preprocess --moe-token-dispatcher-type alltoall
    --moe-expert-capacity-factor 1.0`` was read and timed; Megatron-Core asserts "moe_preprocess cuda
    graph is not supported when there are DtoH copies and synchronizations in the preprocess step"
    for the all-to-all dispatcher with a capacity factor not padded to (the reader reads no
    padding).  Without the capacity factor, or with the flex dispatcher, it is read."""
    moe = DENSE + "--num-experts 8 --moe-ffn-hidden-size 64 --moe-router-topk 2 --cuda-graph-impl transformer_engine " \
                  "--cuda-graph-modules moe_router moe_preprocess "
    refusal(lambda: _megatron_graphs(moe + "--moe-token-dispatcher-type alltoall --moe-expert-capacity-factor 1.0"),
            "--cuda-graph-modules")
    for fine in ("--moe-token-dispatcher-type alltoall", "--moe-token-dispatcher-type flex --moe-expert-capacity-factor 1"):
        assert _megatron_graphs(moe + fine) == ("moe_router", "moe_preprocess")


def test_a_graph_around_a_recomputed_modules_dropout_is_refused(capsys):
    """``--recompute selective --cuda-graphs attn`` on GPT-2 (attention dropout 0.1) and
    ``--recompute selective --recompute-modules mlp --cuda-graphs mlp`` (residual dropout) were
    timed; Megatron-Core asserts "attention dropout is not supported with graphed attention
    recomputation" and "hidden dropout is not supported with graphed MLP/MoE recomputation".  A
    graph that holds none of the recomputed modules is taken, and so is a model without dropout."""
    from symbolic_cost.models import Training, model_cost
    from symbolic_cost.models.config import preset
    base = ["summary", "--preset", "gpt2", "--set", "b=1", "l=512", "--recompute", "selective"]
    refused(capsys, base + ["--cuda-graphs", "attn"], "--cuda-graphs", "attention dropout")
    refused(capsys, base + ["--recompute-modules", "mlp", "--cuda-graphs", "mlp"], "--cuda-graphs", "hidden dropout")
    assert model_cost(preset("gpt2"), Training(b=1, l=512, recompute="selective", cuda_graphs=("mlp",)))
    llama = _arch(HF / "Llama-3.2-1B.json")       # attention_dropout 0.0, no residual dropout
    assert model_cost(llama, Training(b=1, l=512, recompute="selective", cuda_graphs=("attn",)))


def test_a_products_cast_and_adapters_are_in_its_graph():
    """Under ``--cuda-graphs attn`` with an FP8 recipe, ``qkv_proj_cast`` (Transformer Engine's
    quantisation of the product's input, a kernel of the module the graph holds) launched from the
    host between two captured rows, and so did LoRA's ``qkv_proj.lora`` (Megatron-Bridge's adapter
    wraps the linear layer): both are now captured, as their product is; without graphs, neither."""
    from symbolic_cost import conventions as conv
    from symbolic_cost.models import Training
    from symbolic_cost.models.config import preset
    from symbolic_cost.models.lora import LoRA
    from symbolic_cost.models.recipes import recipe_stack
    from symbolic_cost.models.stack import model_stack
    gpt2 = preset("gpt2")

    def graphs(**given):
        t = Training(b=1, l=512, precision="bf16", **given)
        layer = recipe_stack(model_stack(gpt2, t, 1, 1, 2, conv.DEFAULT), t, 2, conv.DEFAULT, gpt2)[1][0]
        return {row.name: row.graph for row in layer}
    assert graphs(fp8="tensorwise", cuda_graphs=("attn",))["qkv_proj_cast"] == "captured"
    assert graphs(lora=LoRA(rank=8), cuda_graphs=("attn",))["qkv_proj.lora"] == "captured"
    assert graphs(lora=LoRA(rank=8), cuda_graphs=("full_iteration",))["qkv_proj.lora"] == "captured"
    assert graphs(fp8="tensorwise")["qkv_proj_cast"] is None and graphs(lora=LoRA(rank=8))["qkv_proj.lora"] is None


def test_a_megatron_implementation_of_a_megabyte_is_refused_in_a_line(tmp_path, capsys):
    """``--cuda-graph-impl`` followed by 100,000 letters was refused with all of them in the
    message (``Options.choice``, which every Megatron-LM option of named values goes through)."""
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {DENSE} --bf16 --cuda-graph-impl {'x' * 100_000}\n")
    err = refused(capsys, ["summary", "--megatron-args", str(script), "--devices", "8"], "--cuda-graph-impl",
                  "the library reads none, transformer_engine, local, full_iteration")
    assert len(err) < 400
