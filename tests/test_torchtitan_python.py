"""torchtitan's Python configurations (``--torchtitan FILE.py --torchtitan-config NAME``), read from the
files as published (``tests/framework_inputs/torchtitan_python/<commit>/``, the paths of pytorch/torchtitan at
the commit named by the folder: b5bcd76c66d0acb1a08b176d9639425bc55e0b2a, the second generation,
9810191bbb0385d8ac91cd31abbc7f4156a0d462, the first, and 114151ad4d3cbe71464f9d709f910fc4cd332027, the first
after its selective mode lost the layer frequency).  Oracles: the same layout typed with ``--set`` beside a
config.json of the same Llama 3 (``test_framework_inputs._llama3``), and degrees, batches and parameter counts
worked out by hand from torchtitan's rules (``Trainer.__init__``: a data-parallel rank's forward takes
``num_tokens_per_microbatch_per_dp_rank`` tokens, ``num_pp_microbatches`` of them a pipeline step, and
``num_tokens_per_train_step`` / (those tokens x pipeline micro-batches x DP) accumulation steps)."""

import json
import pathlib

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.models.torchtitan_python import python_setup
from summary_calls import summary_error, summary_json
from tests.test_framework_inputs import _llama3, _llama3_parameters, _same

ROOT = pathlib.Path(__file__).resolve().parent / "framework_inputs" / "torchtitan_python"
SECOND, FIRST, OP_ONLY = ROOT / "b5bcd76", ROOT / "9810191", ROOT / "114151a"
LLAMA3 = "torchtitan/models/llama3/config_registry.py"
H100 = str(SECOND / "torchtitan_recipes/tests/h100.py")
PLAIN = ["--precision", "bf16", "--flash", "--overlap", "grad,param", "--optimizer", "adamw"]


def _config(capsys, path, function, *words):
    return summary_json(capsys, "--torchtitan", str(path), "--torchtitan-config", function, *words)


def test_second_generation_70b_as_published(tmp_path, capsys):
    """llama3_70b(): 8 x 8192 tokens a forward in rows of 8192 (b 8), TP 8, FullAC; on 64 processes the shard
    degree -1 takes 64 / 8 = 8 (FSDP); one accumulation step."""
    got = _config(capsys, SECOND / LLAMA3, "llama3_70b", "--devices", "64")
    f = 28672
    assert got["parameters"] == _llama3_parameters(8192, f, 80) == 70_553_706_496
    typed = summary_json(capsys, "--loss-chunks", "8", "--hf-config", _llama3(tmp_path, 8192, f, 80, 64), "--set", "b=8", "l=8192", "m1=8", "s1=8",
                  "d=8", "n_micro=1", "--zero", "3", "--recompute", "full", *PLAIN)
    _same(got, typed)


def test_second_generation_8b_selective_ac_is_op_level(tmp_path, capsys):
    """llama3_8b(): 1 x 8192 tokens (b 1), SelectiveAC (torchtitan's per-op policy: recompute op), 64 processes."""
    got = _config(capsys, SECOND / LLAMA3, "llama3_8b", "--devices", "64")
    assert got["parameters"] == _llama3_parameters(4096, 14336, 32) == 8_030_261_248
    typed = summary_json(capsys, "--loss-chunks", "8", "--hf-config", _llama3(tmp_path, 4096, 14336, 32, 32), "--set", "b=1", "l=8192", "d=64",
                  "n_micro=1", "--zero", "3", "--recompute", "op", *PLAIN)
    _same(got, typed)
    assert any("fuse_qkv" in note for note in got["notes"])


def test_debug_model_states_its_vocabulary(capsys):
    """The debug model: 6 layers of dim 256, 16 heads (no GQA), FFN 768, 2,048 tokens (stated since the Python
    configurations): 6 x (4 x 256^2 + 3 x 256 x 768 + 2 x 256) + 2 x 2048 x 256 + 256 = 6,163,712 parameters;
    8 x 2048 tokens a forward (b 8, l 2048); the Interleaved1F1B schedule without pipelining changes nothing."""
    for root in (SECOND, FIRST):
        got = _config(capsys, root / LLAMA3, "llama3_debugmodel", "--devices", "8")
        assert got["parameters"] == 6 * (4 * 256 ** 2 + 3 * 256 * 768 + 2 * 256) + 2 * 2048 * 256 + 256 == 6_163_712
        assert (got["layout"]["b"], got["layout"]["l"], got["layout"]["d"], got["layout"]["p"]) == (8, 2048, 8, 1)


def test_first_generation_selective_frequency_and_float8(capsys):
    """The first generation states the TOML's keys as fields: the debug model's ActivationCheckpointConfig(mode=
    "selective", selective_ac_option="2") recomputes every second of its 6 layers (3); llama3_405b's
    model_converters hold Float8LinearConverter(enable_fsdp_float8_all_gather=True, filter_fqns=["output"]), whose
    recipe unnamed is tensor-wise, beside TP 8 with async TP under compile; local batch 2 of 8192."""
    text = (FIRST / LLAMA3).read_text()
    debug = python_setup(text, FIRST / LLAMA3, LLAMA3, "llama3_debugmodel", world=8).policy
    assert (debug["recompute"], debug["recompute_method"], debug["recompute_layers"]) == ("full", "block", 3)
    big = _config(capsys, FIRST / LLAMA3, "llama3_405b", "--devices", "128")["layout"]
    assert (big["fp8"], big["fp8_gather"], big["m1"], big["d"], big["b"], big["l"], big["recompute"]) == (
        "torchao-tensorwise", True, 8, 16, 2, 8192, "full")
    assert python_setup(text, FIRST / LLAMA3, LLAMA3, "llama3_405b", world=128).policy["overlap"].tensor


def test_first_generation_selective_after_the_layer_frequency_went_is_op_level(tmp_path, capsys):
    """At 114151a (2026-03-23) torchtitan removed selective_ac_option: ActivationCheckpointConfig(mode="selective")
    is its op-level policy.  The same commit's llama3_8b() dropped the selective_ac_option="op" that 9810191's
    stated, so both read the same; its debug model, which stated "2" (every second layer), is op-level now.  A
    selective_ac_option written in that checkout is refused, as torchtitan's own class would refuse it."""
    text = (OP_ONLY / LLAMA3).read_text()
    debug = python_setup(text, OP_ONLY / LLAMA3, LLAMA3, "llama3_debugmodel", world=8).policy
    assert debug["recompute"] == "op"
    now, before = (_config(capsys, root / LLAMA3, "llama3_8b", "--devices", "64") for root in (OP_ONLY, FIRST))
    typed = summary_json(capsys, "--hf-config", _llama3(tmp_path, 4096, 14336, 32, 32), "--set", "b=1", "l=8192", "d=64",
                  "n_micro=1", "--zero", "3", "--recompute", "op", *PLAIN)
    _same(now, typed)
    _same(before, typed)
    stated = tmp_path / "torchtitan" / "models" / "llama3" / "config_registry.py"
    stated.parent.mkdir(parents=True)
    (tmp_path / "torchtitan" / "config").mkdir()
    (tmp_path / "torchtitan" / "config" / "configs.py").write_text((OP_ONLY / "torchtitan/config/configs.py").read_text())
    stated.write_text(text.replace('mode="selective",', 'mode="selective", selective_ac_option="2",', 1))
    err = summary_error(capsys, "--torchtitan", str(stated), "--torchtitan-config", "llama3_debugmodel", "--devices", "8")
    assert "selective_ac_option" in err and "114151a" in err


def test_recipes_follow_imports_into_the_checkout(capsys):
    """torchtitan_recipes/tests/h100.py builds on llama3_debugmodel() imported from the llama3 registry of the
    same checkout (symmetric-memory FSDP changes no count: 8 processes, shard 8, the debug model's b 8 and op-level
    SAC); its TP runs keep that SAC, which the library counts on one tensor rank only, refused by name; its float8
    of the second generation is row-wise (torchao's rowwise recipe)."""
    got = _config(capsys, H100, "llama3_debugmodel_fsdp_symm_mem", "--devices", "8")["layout"]
    assert (got["m1"], got["d"], got["b"], got["l"], got["recompute"], got["zero"]) == (1, 8, 8, 2048, "op", 3)
    assert "recompute='op'" in summary_error(capsys, "--torchtitan", H100, "--torchtitan-config",
                                      "llama3_debugmodel_tp2_asynctp_compile", "--devices", "8")
    float8 = _config(capsys, SECOND / LLAMA3, "llama3_debugmodel_float8", "--devices", "8")["layout"]
    assert (float8["fp8"], float8["fp8_gather"]) == ("torchao-rowwise", False)
    assert "recompute='op'" in summary_error(capsys, "--torchtitan", H100, "--torchtitan-config",
                                      "llama3_debugmodel_float8_fsdp2_tp2_pp2_asynctp_compile", "--devices", "8")


def _write(tmp_path, body: str, name="my_runs.py") -> str:
    """A user's configuration module inside a copy of the checkout's layout (so its imports resolve)."""
    root = tmp_path / "checkout"
    for part in ("torchtitan/config/configs.py", LLAMA3):
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        (root / part).write_text((SECOND / part).read_text())
    (root / "torchtitan_recipes").mkdir(exist_ok=True)
    path = root / "torchtitan_recipes" / name
    path.write_text("from torchtitan.models.llama3.config_registry import llama3_debugmodel, llama3_8b\n"
                    "from torchtitan.distributed.activation_checkpoint import FullAC\n" + body)
    return str(path)


def test_pipeline_tokens_and_accumulation(tmp_path, capsys):
    """PP 2 (1F1B) with 4 pipeline micro-batches of 2 x 2048 tokens, and a step of 2 x 2048 x 4 x DP x 3 tokens: 3
    accumulation steps, so 4 x 3 = 12 micro-batches of b 2 a step (8 processes: DP 4); by default one
    accumulation step, 4."""
    path = _write(tmp_path, """
def pp_run():
    config = llama3_debugmodel()
    config.parallelism.pipeline_parallel_degree = 2
    config.parallelism.pipeline_parallel_schedule = "1F1B"
    config.parallelism.num_pp_microbatches = 4
    config.training.num_tokens_per_microbatch_per_dp_rank = 2 * 2048
    config.training.num_tokens_per_train_step = 2 * 2048 * 4 * 4 * 3
    config.activation_checkpoint = FullAC.Config()
    return config
""")
    got = _config(capsys, path, "pp_run", "--devices", "8")["layout"]
    assert (got["p"], got["d"], got["b"], got["micro_batches"], got["recompute"]) == (2, 4, 2, 12, "full")
    # without num_tokens_per_train_step, a step is one pipeline step on every data-parallel rank: 4 micro-batches
    pathlib.Path(path).write_text(pathlib.Path(path).read_text().replace(
        "    config.training.num_tokens_per_train_step = 2 * 2048 * 4 * 4 * 3\n", ""))
    assert _config(capsys, path, "pp_run", "--devices", "8")["layout"]["micro_batches"] == 4


def test_tensor_parallelism_without_sequence_parallelism(tmp_path, capsys):
    path = _write(tmp_path, """
def no_sp():
    config = llama3_debugmodel()
    config.parallelism.tensor_parallel_degree = 2
    config.parallelism.enable_sequence_parallel = False
    config.activation_checkpoint = FullAC.Config()
    return config
""")
    got = _config(capsys, path, "no_sp", "--devices", "8")
    assert (got["layout"]["m1"], got["layout"]["s1"]) == (2, 1)
    assert any("enable_sequence_parallel False" in note for note in got["notes"])


@pytest.mark.parametrize("body, refused", [
    ("def f():\n    config = llama3_8b()\n    if config.training.steps > 5:\n        config.training.steps = 1\n"
     "    return config\n", "if config.training.steps > 5: (line 5)"),
    ("def f():\n    config = elsewhere()\n    config.training.steps = 1\n    return config\n",
     "elsewhere() (line 4): a value the reader does not follow"),
    ("def f():\n    return f()\n", "more than 16 deep"),
    ("def f(x):\n    return llama3_8b()\n", "its parameter x has no value"),
    ("def f():\n    config = llama3_8b()\n    config.training.max_context_length = compute()\n    return config\n",
     "max_context_length = compute()"),
    ("def f():\n    config = llama3_8b()\n    config.training.num_tokens_per_microbatch_per_dp_rank = 1000\n"
     "    return config\n", "not whole rows"),
    ("def f():\n    config = llama3_8b()\n    config.parallelism.tensor_parallel_degree = degree()\n    return config\n",
     "tensor_parallel_degree = degree()"),
    ("def f():\n    config = llama3_8b()\n    config.loss = MTPLoss.Config()\n    return config\n", "MTPLoss.Config"),
    ("def f():\n    config = llama3_8b()\n    config.fault_tolerance = FT.Config(enable=True)\n    return config\n",
     "fault_tolerance"),
    ("def f():\n    return 3\n", "not a Trainer.Config"),
    ("def f():\n    return " + "(" * 400 + "1" + ")" * 400 + "\n", "not Python"),
    ("def f():\n    return " + " + ".join(["1"] * 20000) + "\n", "nested too deeply"),
])
def test_refusals_name_the_construct(tmp_path, capsys, body, refused):
    err = summary_error(capsys, "--torchtitan", _write(tmp_path, body), "--torchtitan-config", "f", "--devices", "8")
    assert refused in err and len(err.strip().splitlines()) == 1


def test_refusals_of_the_file_and_options(tmp_path, capsys):
    registry = str(SECOND / LLAMA3)
    assert "llama3_8b" in summary_error(capsys, "--torchtitan", registry, "--devices", "8")      # no function named
    assert "no function 'llama3_9b'" in summary_error(capsys, "--torchtitan", registry, "--torchtitan-config", "llama3_9b")
    other = _write(tmp_path, "from torchtitan.models.qwen3_5 import model_registry\n\n"
                   "def f():\n    config = llama3_8b()\n    config.model_spec = model_registry('27B')\n    return config\n")
    assert "[model] name 'qwen3_5'" in summary_error(capsys, "--torchtitan", other, "--torchtitan-config", "f",
                                              "--devices", "8")
    toml = str(pathlib.Path(__file__).resolve().parent / "framework_inputs" / "llama3_8b.toml")
    assert "is a job TOML" in summary_error(capsys, "--torchtitan", toml, "--torchtitan-config", "llama3_8b")
    assert "give the file" in summary_error(capsys, "--preset", "gpt2", "--torchtitan-config", "llama3_8b")
    lone = tmp_path / "lone.py"           # outside a checkout: its import cannot be followed
    lone.write_text("from torchtitan.models.llama3.config_registry import llama3_8b\n\n"
                    "def f():\n    return llama3_8b()\n")
    assert "not in one" in summary_error(capsys, "--torchtitan", str(lone), "--torchtitan-config", "f", "--devices", "8")
    # the first generation's llama3 registry copied out of its checkout: `from . import model_registry`
    # names the package the file sits in, here tmp_path's folder, which no model is named after
    moved = tmp_path / "files" / "config_registry.py"
    moved.parent.mkdir()
    moved.write_text((FIRST / LLAMA3).read_text())
    err = summary_error(capsys, "--torchtitan", str(moved), "--torchtitan-config", "llama3_8b", "--devices", "8")
    assert "not in a torchtitan checkout's torchtitan/models/<model>/ folder" in err and "'files'" not in err


def test_every_published_function_is_read_or_refused_by_name():
    """Each public function of the stored files either reads or is refused with a one-line message; none raises
    anything but ``InputError``."""
    files = [SECOND / LLAMA3, FIRST / LLAMA3, OP_ONLY / LLAMA3, pathlib.Path(H100), SECOND / "torchtitan_recipes/tests/models.py",
             SECOND / "torchtitan/models/deepseek_v3/config_registry.py", SECOND / "torchtitan/models/qwen3/config_registry.py",
             GPT_OSS]
    read = 0
    for path in files:
        text = path.read_text()
        for function in [n for n in python_functions(text) if not n.startswith(("_", "enable_"))]:
            try:
                python_setup(text, path, path.name, function, world=64)
                read += 1
            except InputError as error:
                assert "\n" not in error.args[0].strip(), (function, error)
    assert read >= 24


def python_functions(text: str) -> list[str]:
    import ast
    return [node.name for node in ast.parse(text).body if isinstance(node, ast.FunctionDef)]


QWEN3 = SECOND / "torchtitan/models/qwen3/config_registry.py"
DEEPSEEK = SECOND / "torchtitan/models/deepseek_v3/config_registry.py"
GPT_OSS = SECOND / "torchtitan/models/gpt_oss/config_registry.py"


def _gpt_oss_layer(experts: int) -> int:
    """One GPT-OSS layer's parameters, by hand from torchtitan's flavour (``gpt_oss/__init__.py``): fused QKV
    2880 -> (64 + 2 x 8) x 64 with its bias, the output 4096 -> 2880 with its bias, 64 sinks, two norms, the
    router 2880 -> experts with a bias, and each expert's 2880 -> 2 x 2880 and 2880 -> 2880 with their biases."""
    attention = 2880 * 5120 + 5120 + 4096 * 2880 + 2880 + 64
    expert = 2880 * 5760 + 5760 + 2880 * 2880 + 2880
    return attention + 2 * 2880 + 2880 * experts + experts + experts * expert


@pytest.mark.parametrize("function, layers, experts, published", [("gpt_oss_20b", 24, 32, 20.91e9),
                                                                   ("gpt_oss_120b", 36, 128, 116.83e9)])
def test_gpt_oss_as_published(capsys, function, layers, experts, published):
    """gpt_oss_20b() and gpt_oss_120b(): one sequence of 8,192 tokens (b 1), FullAC, the varlen attention noted;
    the parameters by hand (``_gpt_oss_layer``, an untied 201,088-token vocabulary and the final norm), which are
    OpenAI's model card's totals to its two decimals (20.91B, 116.83B)."""
    got = _config(capsys, GPT_OSS, function, "--devices", "8")
    assert got["parameters"] == layers * _gpt_oss_layer(experts) + 2 * 201088 * 2880 + 2880
    assert round(got["parameters"] / 1e7) * 1e7 == published
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["d"], layout["recompute"]) == (1, 8192, 8, "full")
    assert any(n.startswith("attention within each packed document (varlen") for n in got["notes"])


def test_qwen3_30b_a3b_as_published(capsys):
    """qwen3_30b_a3b(): 2 x 4096 tokens (b 2), FullAC, no expert parallelism (each expert over the tensor ranks,
    here 1). Parameters by hand from the flavour (48 layers of dim 2048; 32 query and 4 key/value heads of 128;
    128 experts of 768, SwiGLU; untied 151,936-token vocabulary): a layer 2048 x (4096 + 512 + 512) + 4096 x 2048
    (attention) + 2 x 128 (q/k norms) + 2048 x 128 (router) + 128 x 3 x 2048 x 768 (experts) + 2 x 2048 (norms) =
    623,120,640; x 48, + 2 x 151936 x 2048 + 2048 = 30,532,122,624 (the published 30.5B)."""
    got = _config(capsys, QWEN3, "qwen3_30b_a3b", "--devices", "64")
    assert got["parameters"] == 48 * 623_120_640 + 2 * 151936 * 2048 + 2048 == 30_532_122_624
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["d"], layout["ep"], layout["recompute"]) == (2, 4096, 64, 1, "full")


def _deepseek_v2_lite(tmp_path) -> str:
    """deepseek-ai/DeepSeek-V2-Lite's published config.json (its sizes; torchtitan's 16B flavour is this model)."""
    path = tmp_path / "deepseek-v2-lite.json"
    path.write_text(json.dumps({
        "model_type": "deepseek_v2", "architectures": ["DeepseekV2ForCausalLM"], "hidden_size": 2048,
        "intermediate_size": 10944, "moe_intermediate_size": 1408, "num_hidden_layers": 27, "num_attention_heads": 16,
        "num_key_value_heads": 16, "n_shared_experts": 2, "n_routed_experts": 64, "routed_scaling_factor": 1.0,
        "kv_lora_rank": 512, "q_lora_rank": None, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
        "topk_method": "greedy", "n_group": 1, "topk_group": 1, "num_experts_per_tok": 6, "moe_layer_freq": 1,
        "first_k_dense_replace": 1, "norm_topk_prob": False, "scoring_func": "softmax", "aux_loss_alpha": 0.001,
        "seq_aux": True, "hidden_act": "silu", "max_position_embeddings": 4096, "initializer_range": 0.02,
        "rms_norm_eps": 1e-06, "use_cache": True, "tie_word_embeddings": False, "rope_theta": 10000,
        "attention_bias": False, "attention_dropout": 0.0, "vocab_size": 102400, "bos_token_id": 100000,
        "eos_token_id": 100001}))
    return str(path)


def _beside_deepseek(tmp_path, body: str) -> str:
    """A user's module (``_write``) importing ``deepseek_v3_16b`` from a copy of the published DeepSeek registry."""
    path = _write(tmp_path, "from torchtitan.models.deepseek_v3.config_registry import deepseek_v3_16b\n" + body)
    root = pathlib.Path(path).parents[1]
    (root / "torchtitan/models/deepseek_v3").mkdir(parents=True)
    (root / "torchtitan/models/deepseek_v3/config_registry.py").write_text(DEEPSEEK.read_text())
    return path


def test_deepseek_16b_with_experts_over_fsdp_ranks(tmp_path, capsys):
    """deepseek_v3_16b() keeps torchtitan's per-op SAC (recompute op, on its latent attention and experts:
    models.op_recompute); as published, and with FullAC in its place, it equals DeepSeek-V2-Lite's published
    config.json typed with the same layout: 4 x 4096 tokens (b 4), expert parallelism 8 borrowed from the 64
    shard ranks (experts whole, etp 1), ZeRO-3."""
    published = _config(capsys, str(DEEPSEEK), "deepseek_v3_16b", "--devices", "64")
    _same(published, summary_json(capsys, "--loss-chunks", "8", "--hf-config", _deepseek_v2_lite(tmp_path), "--set", "b=4", "l=4096", "d=64",
                           "n_micro=1", "ep=8", "etp=1", "--zero", "3", "--recompute", "op", *PLAIN))
    path = _beside_deepseek(tmp_path, "def full():\n    config = deepseek_v3_16b()\n"
                                      "    config.activation_checkpoint = FullAC.Config()\n    return config\n")
    got = _config(capsys, path, "full", "--devices", "64")
    typed = summary_json(capsys, "--loss-chunks", "8", "--hf-config", _deepseek_v2_lite(tmp_path), "--set", "b=4", "l=4096", "d=64", "n_micro=1",
                  "ep=8", "etp=1", "--zero", "3", "--recompute", "full", *PLAIN)
    _same(got, typed)
    assert got["parameters"] == 15_706_484_224        # DeepSeek-V2-Lite's 15.7B
    assert "does not divide" in summary_error(capsys, "--torchtitan", path, "--torchtitan-config", "full", "--devices", "12")


def test_deepseek_16b_over_hybridep_is_the_flex_dispatcher(tmp_path, capsys):
    """deepseek_v3_16b() with ``model_registry("16B", moe_comm_backend="hybridep")`` (as the published
    deepseek_v3_16b_hybridep(), without its fixed-capacity buffers, which the reader refuses) is the layout typed
    with ``--dispatcher flex`` (a token sent once a node); the published ``minimal_async_ep`` variant is the
    standard all-to-all layout, with a note."""
    path = _beside_deepseek(tmp_path, "from torchtitan.models.deepseek_v3 import model_registry\n\n"
                                      "def hybrid():\n    config = deepseek_v3_16b()\n    config.model_spec = "
                                      "model_registry(\"16B\", moe_comm_backend=\"hybridep\")\n    return config\n")
    got = _config(capsys, path, "hybrid", "--devices", "64")
    assert got["layout"]["dispatcher"] == "flex"
    _same(got, summary_json(capsys, "--loss-chunks", "8", "--hf-config", _deepseek_v2_lite(tmp_path), "--set", "b=4", "l=4096", "d=64",
                     "n_micro=1", "ep=8", "etp=1", "--zero", "3", "--recompute", "op", "--dispatcher", "flex", *PLAIN))
    plain = _config(capsys, str(DEEPSEEK), "deepseek_v3_16b_minimal_async_ep", "--devices", "1")
    assert plain["layout"]["dispatcher"] == "alltoall" and any("minimal_async_ep" in n for n in plain["notes"])


def test_qwen3_flavours_are_the_published_models(tmp_path, capsys):
    """Qwen/Qwen3-8B's published config.json (36 layers of 4096, 32 heads over 8 key/value heads of 128, FFN
    12,288, untied, 151,936 tokens) typed with the layout of qwen3_8b-sized runs equals the flavour read from a
    configuration; the count by hand: 36 x (4096 x (4096 + 2 x 1024) + 4096 x 4096 + 2 x 128 + 3 x 4096 x 12288 +
    2 x 4096) + 2 x 151936 x 4096 + 4096 = 8,190,735,360."""
    path = _write(tmp_path, "from torchtitan.models.qwen3 import model_registry\n\n"
                  "def eight():\n    config = llama3_8b()\n    config.model_spec = model_registry('8B')\n"
                  "    config.activation_checkpoint = FullAC.Config()\n    return config\n")
    got = _config(capsys, path, "eight", "--devices", "8")
    config = tmp_path / "qwen3-8b.json"
    config.write_text(json.dumps({
        "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096, "intermediate_size": 12288,
        "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "hidden_act": "silu", "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
        "tie_word_embeddings": False, "attention_bias": False, "attention_dropout": 0.0, "vocab_size": 151936,
        "use_sliding_window": False, "bos_token_id": 151643, "eos_token_id": 151645}))
    typed = summary_json(capsys, "--loss-chunks", "8", "--hf-config", str(config), "--set", "b=1", "l=8192", "d=8", "n_micro=1", "--zero", "3",
                  "--recompute", "full", *PLAIN)
    assert got["parameters"] == typed["parameters"] == (36 * (4096 * 6144 + 4096 * 4096 + 256 + 3 * 4096 * 12288
                                                              + 8192) + 2 * 151936 * 4096 + 4096) == 8_190_735_360
    _same(got, typed)


def test_expert_parallelism_beside_tensor_parallelism(tmp_path, capsys):
    """Qwen3-30B-A3B on 8 processes with TP 2 and EP 4: shard 8 / 2 = 4, and EP 4 borrows ranks of the shard x
    tensor = 8 (torchtitan's mesh rule); the experts whole on each EP rank (etp 1, MOE_SHARDING.md's "EP on":
    Shard(0) on EP), as the same layout typed."""
    path = _write(tmp_path, "from torchtitan.models.qwen3 import model_registry\n\n"
                  "def moe():\n    config = llama3_8b()\n    config.model_spec = model_registry('30B-A3B')\n"
                  "    config.parallelism.tensor_parallel_degree = 2\n    config.parallelism.expert_parallel_degree = 4\n"
                  "    config.activation_checkpoint = FullAC.Config()\n    return config\n")
    got = _config(capsys, path, "moe", "--devices", "8")
    assert (got["layout"]["m1"], got["layout"]["d"], got["layout"]["ep"], got["layout"]["etp"]) == (2, 4, 4, 1)
    architecture = str(tmp_path / "qwen3-30b-a3b.json")
    from symbolic_cost.models.torchtitan_models import CONFIGS
    pathlib.Path(architecture).write_text(json.dumps(dict(CONFIGS["qwen3"]["30B-A3B"], max_position_embeddings=8192)))
    typed = summary_json(capsys, "--loss-chunks", "8", "--hf-config", architecture, "--set", "b=1", "l=8192", "m1=2", "s1=2", "d=4", "n_micro=1",
                  "ep=4", "etp=1", "--zero", "3", "--recompute", "full", *PLAIN)
    _same(got, typed)


def test_interleaved_schedule_of_the_debug_model(tmp_path, capsys):
    """The debug model's Interleaved1F1B on 2 ranks: two stages a rank, its 6 layers + the embedding's and the
    output's weight = 8 over 4 stages, 2 each, less the ends: [1, 2, 2, 1], stage s on rank s mod 2 (Megatron's
    layout "Et|tt|tt|tL"); 4 pipeline micro-batches of 8 rows; 8 processes: shard 4."""
    path = _write(tmp_path, """
def looped():
    config = llama3_debugmodel()
    config.parallelism.pipeline_parallel_degree = 2
    config.parallelism.num_pp_microbatches = 4
    config.activation_checkpoint = FullAC.Config()
    return config
""")
    got = _config(capsys, path, "looped", "--devices", "8")
    architecture = tmp_path / "debug.json"
    architecture.write_text(json.dumps({
        "model_type": "llama", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 6,
        "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 2048, "max_position_embeddings": 2048,
        "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "rms_norm_eps": 1e-05}))
    typed = summary_json(capsys, "--loss-chunks", "8", "--hf-config", str(architecture), "--set", "b=8", "l=2048", "d=4",
                  "p=2", "n_micro=4", "--zero", "3", "--recompute", "full", "--schedule", "interleaved",
                  "--virtual-stages", "2",
                  "--pipeline-layout", "Et|tt|tt|tL", "--no-reshard-after-forward", *PLAIN)
    _same(got, typed)


def test_the_chunked_loss_keeps_one_chunk_of_logits(capsys):
    """torchtitan's ChunkedLossWrapper (num_chunks 8 by default, every b5bcd76 configuration's loss): the LM head,
    the loss and their backward a chunk of the sequence at a time.  By hand, GPT-2 (vocabulary 50,257), 2
    sequences of 64 tokens, 4 chunks: of the n = 128 x 50,257 logits a quarter are alive at once, so the kept
    fp32 loss tensor (4 n bytes) keeps 3/4 less, and the forward's peak, which also holds the bf16 logits (2 n),
    3/4 of both less."""
    from symbolic_cost.models import Training
    from symbolic_cost.models.config import preset
    from symbolic_cost.models.peak import step_timeline
    from symbolic_cost.models.totals import model_cost
    whole, chunked = (model_cost(preset("gpt2"), Training(b=2, l=64, loss_chunks=k)) for k in (1, 4))
    n = 128 * 50257
    assert whole.activation_bytes - chunked.activation_bytes == 3 * n * 4 // 4
    forward = [next(m.bytes for m in step_timeline(c) if m.name == "forward") for c in (whole, chunked)]
    assert forward[0] - forward[1] == 3 * n * (4 + 2) // 4
    assert (whole.flops_fwd, whole.flops_bwd) == (chunked.flops_fwd, chunked.flops_bwd)
    got = _config(capsys, SECOND / "torchtitan/models/llama3/config_registry.py", "llama3_8b", "--devices", "64")
    assert got["layout"]["loss_chunks"] == 8


def test_a_compiled_float8_run_is_not_told_it_runs_without_compile(capsys):
    """llama3_405b() compiles (CompileConfig(enable=True)) beside its float8 converter: the note of an eager
    float8 run read the converter's own settings for the compile switch, and so appeared on every run."""
    got = _config(capsys, SECOND / "torchtitan/models/llama3/config_registry.py", "llama3_405b", "--devices", "128")
    assert got["layout"]["fp8"] and not any(n.startswith("float8 without compile") for n in got["notes"])


def test_a_python_configuration_s_attention_takes_the_kernel_you_name(capsys):
    """FlexAttention, the configurations' default, has no published bars the time model reads: the
    system's fused kernel times it, and --attention-kernel beside the file names another (a job
    TOML's SDPA decides it: tests/test_framework_inputs.py)."""
    words = (SECOND / LLAMA3, "llama3_70b", "--devices", "64", "--system", "h100")
    own = _config(capsys, *words)
    named = _config(capsys, *words, "--attention-kernel", "flash-attention-2")
    assert (own["layout"]["attention_kernel"], named["layout"]["attention_kernel"]) == (None, "flash-attention-2")
    assert named["step_time_s"]["total"] > own["step_time_s"]["total"]


TOML_MOE = pathlib.Path(__file__).resolve().parent / "framework_inputs" / "torchtitan_toml_477784a"


def test_the_last_toml_generation_of_the_other_bundled_models(capsys):
    """Job TOMLs of torchtitan's last TOML generation (477784a^, 2026-02) for qwen3, gpt_oss and deepseek_v3, as
    published: each read with its model's flavour, the parameters by hand.  Qwen3 0.6B: 28 layers of 1024 x (2048
    + 1024 + 1024) + 2048 x 1024 (attention) + 2 x 128 (q/k norms) + 3 x 1024 x 3072 (SwiGLU) + 2 x 1024 =
    15,730,944, and a tied 151,936-word table + the final norm: 596,049,920 (Qwen's 0.6B, 0.44B without the
    table).  GPT-OSS's debug model: 4 of ``_gpt_oss_layer``'s layers at width 256 (heads of 64: 4,096 query and
    512 + 512 key/value features), 8 experts, and its default 201,088 words (no vocabulary of its own then), by
    hand 183,397,920; its FlexAttention noted.  DeepSeek 16B: expert parallelism 8 over the 8 FSDP ranks, the
    op-level selective checkpointing, DeepSeek-V2-Lite's 15.7B."""
    qwen = summary_json(capsys, "--torchtitan", str(TOML_MOE / "qwen3_0.6b.toml"), "--devices", "8")
    layer = 1024 * 4096 + 2048 * 1024 + 2 * 128 + 3 * 1024 * 3072 + 2 * 1024
    assert qwen["parameters"] == 28 * layer + 151936 * 1024 + 1024 == 596_049_920
    assert (qwen["layout"]["b"], qwen["layout"]["l"], qwen["layout"]["recompute"]) == (4, 4096, "op")
    oss = summary_json(capsys, "--torchtitan", str(TOML_MOE / "gpt_oss_debug_model.toml"), "--devices", "8")
    attention = 256 * 5120 + 5120 + 4096 * 256 + 256 + 64
    expert = 256 * 5760 + 5760 + 2880 * 256 + 256
    layer = attention + 2 * 256 + 256 * 8 + 8 + 8 * expert
    assert oss["parameters"] == 4 * layer + 2 * 201088 * 256 + 256 == 183_397_920
    assert oss["layout"]["attention_kernel"] is None and any("attends by FlexAttention" in n for n in oss["notes"])
    deepseek = summary_json(capsys, "--torchtitan", str(TOML_MOE / "deepseek_v3_16b.toml"), "--devices", "8")
    assert (deepseek["layout"]["ep"], deepseek["layout"]["d"], deepseek["layout"]["recompute"]) == (8, 8, "op")
    assert round(deepseek["parameters"] / 1e8) == 157


def test_a_toml_of_a_model_the_reader_does_not_bundle_names_what_it_reads(tmp_path, capsys):
    (tmp_path / "mixtral.toml").write_text('[model]\nname = "mixtral"\nflavor = "8x7b"\n')
    err = summary_error(capsys, "--torchtitan", str(tmp_path / "mixtral.toml"), "--devices", "8")
    assert "[model] name 'mixtral': the reader bundles torchtitan" in err


@pytest.mark.parametrize("toml, published", [("llama4_17bx16e.toml", "Llama-4-Scout-17B-16E-text.json"),
                                             ("llama4_17bx128e.toml", "Llama-4-Maverick-17B-128E-text.json")])
def test_the_last_toml_generation_s_llama4_is_meta_s(capsys, toml, published):
    """torchtitan's Llama 4 TOMLs (477784a^, as published): their flavours hold the parameters of Meta's
    published text configs (Scout 107,769,861,120; Maverick 400,711,848,960, counted from those files, a reading
    tests/test_hf_families.py checks against transformers' own Llama 4 built on the meta device), the
    experts split over the 8 tensor ranks (expert_tensor_parallel_degree 8 with no expert parallelism, which
    torchtitan says has no effect then)."""
    got = summary_json(capsys, "--torchtitan", str(TOML_MOE / toml), "--devices", "64")
    meta = summary_json(capsys, "--hf-config", str(pathlib.Path(__file__).resolve().parent / "hf_configs" / published),
                 "--set", "l=8192")
    assert got["parameters"] == meta["parameters"]
    assert (got["layout"]["m1"], got["layout"]["ep"], got["layout"]["etp"]) == (8, 1, 8)


def test_the_last_toml_generation_s_llama4_debug_model_by_hand(capsys):
    """The debug model: 6 layers of width 256, 16 heads of 16; MoE on layers 1, 3, 5 (every second) with 8
    experts and one shared of 512 (``int(2·1024/3) / 2`` rounded up to 256) and a router 256 -> 8; dense SwiGLU
    of 768 on 0, 2, 4; an untied 2,048-word head: 3 x (4 x 256² + 512 + 256 x 8 + 9 x 3 x 256 x 512) +
    3 x (4 x 256² + 512 + 3 x 256 x 768) + 2 x 2048 x 256 + 256 = 15,017,216."""
    got = summary_json(capsys, "--torchtitan", str(TOML_MOE / "llama4_debug_model.toml"), "--devices", "8")
    moe = 4 * 256**2 + 512 + 256 * 8 + 9 * 3 * 256 * 512
    dense = 4 * 256**2 + 512 + 3 * 256 * 768
    assert got["parameters"] == 3 * moe + 3 * dense + 2 * 2048 * 256 + 256 == 15_017_216


def test_llama4_irope_flavours_chunk_and_drop_rotation(tmp_path, capsys):
    """An ``_irope`` flavour (torchtitan's every_n_layers_nope 4, fixed_attn_block_size 8,192, FlexAttention):
    the same parameters as the plain flavour; at 32,768 tokens three layers in four attend within blocks of
    8,192 keys, so fewer FLOPs; the FlexAttention noted, not timed as SDPA's library."""
    def run(flavor):
        (tmp_path / "l4.toml").write_text(f'[model]\nname = "llama4"\nflavor = "{flavor}"\n[training]\n'
                                          'local_batch_size = 1\nseq_len = 32768\n[parallelism]\n'
                                          'tensor_parallel_degree = 8\n')
        return summary_json(capsys, "--torchtitan", str(tmp_path / "l4.toml"), "--devices", "64")
    plain, irope = run("17bx16e"), run("17bx16e_irope")
    assert irope["parameters"] == plain["parameters"]
    assert irope["model_flops_fwd"] < plain["model_flops_fwd"]
    assert irope["layout"]["attention_kernel"] is None and any("attends by FlexAttention" in n for n in irope["notes"])


def test_the_mxfp8_converter_reads_as_torchao_mxfp8_on_blackwell(tmp_path, capsys):
    """``llama3_8b_mxfp8`` (at b5bcd76): ``llama3_8b`` with ``MXFP8LinearConverter.Config(model_compile_enabled=True)``,
    torchao's ``MXFP8Linear`` on every Linear (its ``fqns`` empty): the same layout as ``llama3_8b`` with
    ``fp8 torchao-mxfp8``, on Blackwell only (torchtitan asserts ``has_cuda_capability(10, 0)``)."""
    mx = _config(capsys, SECOND / LLAMA3, "llama3_8b_mxfp8", "--devices", "8", "--system", "b200")
    plain = _config(capsys, SECOND / LLAMA3, "llama3_8b", "--devices", "8", "--system", "b200")
    assert mx["layout"] == {**plain["layout"], "fp8": "torchao-mxfp8"}
    assert any("converts every Linear, the output head too" in note for note in mx["notes"])
    assert "block-scaled (MX) tensor cores" in summary_error(capsys, "--torchtitan", str(SECOND / LLAMA3), "--torchtitan-config",
                                                      "llama3_8b_mxfp8", "--devices", "8", "--system", "h100")
    some = _write(tmp_path, "from torchtitan.components.quantization.mx import MXFP8LinearConverter\n"
                  "from torchtitan.models.llama3 import model_registry\n\n"
                  "def f():\n    config = llama3_8b()\n    config.model_spec = model_registry('8B', converters=["
                  "MXFP8LinearConverter.Config(fqns=['feed_forward'])])\n    return config\n")
    assert "a selection of them is not modelled" in summary_error(capsys, "--torchtitan", some, "--torchtitan-config", "f",
                                                           "--devices", "8", "--system", "b200")
