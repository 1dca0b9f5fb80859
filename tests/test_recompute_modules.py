"""Megatron-LM's ``--recompute-modules`` (``models.recompute_modules``), counted by hand.

Every expected value is a count of tensors from Megatron-Core's code (``megatron/core/transformer``
at d98e8a64dd: ``moe/experts.py`` wraps the experts' activation in ``CheckpointWithoutOutput``,
``multi_latent_attention.py`` the up-projections and rotary row, ``transformer_layer.py`` the
non-``IdentityOp`` norms and the dense MLP, ``moe/moe_layer.py`` the whole MoE layer) and DeepSeek-V3's
published sizes (``tests/hf_configs/DeepSeek-V3.json``): 7,168 wide, 128 heads of 128 + 64 query/key
dims and 128 value dims, query and key/value latents of 1,536 and 512, 256 experts of 2,048 (8 a
token) with one shared expert of 2,048, the first 3 of 61 layers dense MLPs of 18,432.
"""

from __future__ import annotations

import pytest

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import load
from symbolic_cost.models.memory import kept_bytes, recompute_flops, recomputed_rows
from symbolic_cost.models.training_values import Recompute
from test_megatron_scripts import _model, _setup

L, ES = 1024, 2                                  # tokens of one sequence, bf16 bytes
E, H, QK, V, ROPE, RQ, RKV = 7168, 128, 192, 128, 64, 1536, 512
TOP_K, EXPERT_F, SHARED_F, DENSE_F = 8, 2048, 2048, 18432
STATS = L * ES if conv.DEFAULT.layer_norm_keeps_stats else 0     # an RMS norm's 1/rms a token, by the conventions


@pytest.fixture(scope="module")
def deepseek():
    return load("tests/hf_configs/DeepSeek-V3.json")


def _layers(arch, modules=(), m1=1, **kw):
    recompute = "selective" if modules else "none"
    cost = model_cost(arch, Training(b=1, l=L, m1=m1, s1=m1, flash=True, recompute=recompute,
                                     recompute_modules=modules, **kw))
    (dense, _), (moe, _) = cost.stack[1], cost.stack[2]
    return cost, dense, moe


def _freed(layer, modules, m1=1):
    """Bytes a layer no longer keeps under ``modules`` (the layer's input: ``L/m1`` tokens)."""
    tokens = L * E * ES // m1
    return kept_bytes(layer, "none", tokens) - kept_bytes(layer, Recompute("selective", modules=modules), tokens)


def test_moe_act_frees_the_second_expert_products_input(deepseek):
    _, dense, moe = _layers(deepseek)
    assert _freed(moe, ("moe_act",)) == L * TOP_K * EXPERT_F * ES       # the activation's output, every routed copy
    assert recomputed_rows(moe, Recompute("selective", modules=("moe_act",))) == ["expert_act"]
    assert _freed(dense, ("moe_act",)) == 0


def test_mla_up_proj_keeps_the_latents_and_frees_q_k_v(deepseek):
    """Freed: the two latent norms' outputs (the up-projections' inputs) and their statistics, the
    kernel's Q (128 x 192), K (128 x 192, the rotary key spread over the heads) and V (128 x 128);
    kept instead: the rotary key before it is spread (64 a token), an input of the checkpoint."""
    _, dense, moe = _layers(deepseek)
    freed = L * ES * (RQ + RKV + H * QK + H * (QK + V) - ROPE) + 2 * STATS
    assert _freed(moe, ("mla_up_proj",)) == _freed(dense, ("mla_up_proj",)) == freed
    assert recomputed_rows(moe, Recompute("selective", modules=("mla_up_proj",))) == [
        "q_a_norm", "q_b_proj", "kv_a_norm", "kv_b_proj", "rotary"]


def test_mla_up_proj_redoes_the_up_projections(deepseek):
    """The products redone: 1,536 -> 128 x 192 and 512 -> 128 x (128 + 128), each output ``k``
    multiplies and ``k - 1`` adds (the default ``matmul_flops``)."""
    _, dense, _ = _layers(deepseek)
    redone = recompute_flops(dense, Recompute("selective", modules=("mla_up_proj",)))
    products = L * ((2 * RQ - 1) * H * QK + (2 * RKV - 1) * H * (QK - ROPE + V))
    elementwise = redone - products                      # the two norms and the rotary row, a few per element
    assert 0 < elementwise < 20 * L * (RQ + RKV + (H + 1) * ROPE)


def test_mlp_redoes_the_dense_mlp_only(deepseek):
    """The dense MLP checkpointed whole: its norm (fused into fc1 by Transformer Engine), fc1, the
    gated activation, fc2; the checkpoint keeps the MLP's input.  Freed: the norm's input and
    statistics, fc1's input (7,168), the activation's two inputs (2 x 18,432) and fc2's input; kept:
    the input (7,168)."""
    _, dense, moe = _layers(deepseek)
    assert _freed(dense, ("mlp",)) == STATS + L * ES * (E + 2 * DENSE_F + DENSE_F)
    assert recomputed_rows(dense, Recompute("selective", modules=("mlp",))) == ["rms_norm_2", "fc1", "act", "fc2"]
    assert _freed(moe, ("mlp",)) == 0


def test_shared_experts_keep_nothing_of_their_own(deepseek):
    _, _, moe = _layers(deepseek)
    assert _freed(moe, ("shared_experts",)) == L * ES * (E + 2 * SHARED_F + SHARED_F)
    assert recomputed_rows(moe, Recompute("selective", modules=("shared_experts",))) == [
        "shared_fc1", "shared_act", "shared_fc2"]


def test_layernorm_frees_the_separate_norms_outputs_on_the_shard(deepseek):
    """Under TP 2 with sequence parallelism: the MoE layer's norm feeds the router and the shared
    experts' first product, latent attention's input norm feeds the query down-projection; each keeps
    the 512-token shard.  Only the norms run again: their gathers into the tensor region do not."""
    _, dense, moe = _layers(deepseek, m1=2, ep=2, d=2)
    shard = L // 2 * E * ES
    assert _freed(moe, ("layernorm",), m1=2) == 3 * shard
    assert _freed(dense, ("layernorm",), m1=2) == shard
    assert recomputed_rows(moe, Recompute("selective", modules=("layernorm",))) == []


def test_moe_reruns_the_all_to_alls(deepseek):
    """The whole MoE layer checkpointed: its forward runs again in backward, the dispatch and combine
    all-to-alls with it: six all-to-alls a layer and micro-batch instead of four (the 58 MoE layers;
    the multi-token-prediction module's, counted with the head, is left out)."""
    plain = model_cost(deepseek, Training(b=1, l=L, ep=8, d=8, flash=True, mtp=False))
    redone = model_cost(deepseek, Training(b=1, l=L, ep=8, d=8, flash=True, mtp=False, recompute="selective",
                                           recompute_modules=("moe",)))
    count = lambda cost: sum(c.repeats for _, c in cost.collectives if c.kind == "alltoall")  # noqa: E731
    assert (count(plain), count(redone)) == (4 * 58, 6 * 58)


def test_the_moe_checkpoint_keeps_its_input_unless_layernorm_frees_it(deepseek):
    """``moe`` keeps the layer's input, the norm's output (7,168 a token); with ``layernorm`` that
    output is discarded too and rebuilt from the norm's own input before the MoE layer's backward,
    and so is latent attention's input norm's output, which the query down-projection kept."""
    _, _, moe = _layers(deepseek)
    assert _freed(moe, ("moe", "layernorm")) - _freed(moe, ("moe",)) == 2 * L * E * ES


@pytest.mark.parametrize("modules, field", [
    (("moe_act",), "recompute_modules"), (("core_attn", "core_attn"), "recompute_modules"),
    (("gdn_norm_out",), "recompute_modules"), (("bogus",), "recompute_modules"), ("moe_act", "recompute_modules")])
def test_bad_modules_are_refused(modules, field):
    recompute = "full" if modules == ("moe_act",) else "selective"
    with pytest.raises(InputError) as info:
        Training(recompute=recompute, recompute_modules=modules)
    assert info.value.argument == field


def test_modules_the_model_lacks_are_refused(deepseek):
    llama = load("tests/hf_configs/Llama-3.1-8B.json")
    for module in ("moe_act", "mla_up_proj", "moe", "shared_experts", "layernorm"):
        with pytest.raises(InputError, match="applies to no layer"):
            model_cost(llama, Training(b=1, l=L, flash=True, recompute="selective", recompute_modules=(module,)))
    with pytest.raises(InputError, match="flash"):
        model_cost(deepseek, Training(b=1, l=L, recompute="selective", recompute_modules=("mla_up_proj",)))


def _megatron(words: str):
    return _setup(_model(f"--moe-grouped-gemm {words}"))


def test_megatron_arguments_name_the_modules():
    s = _megatron("--recompute-granularity selective --recompute-modules moe_act layernorm")
    assert (s.policy["recompute"], s.policy["recompute_modules"]) == ("selective", ("moe_act", "layernorm"))
    # arguments.py: --moe-layer-recompute is deprecated; transformer_config.py makes the granularity
    # selective and appends "moe" to the modules (["core_attn"] when none are given)
    s = _megatron("--moe-layer-recompute")
    assert (s.policy["recompute"], s.policy["recompute_modules"]) == ("selective", ("core_attn", "moe"))
    # modules without selective granularity: Megatron-LM never reads them
    s = _megatron("--recompute-modules moe_act")
    assert s.policy["recompute"] == "none" and "recompute_modules" not in s.policy
    assert any("--recompute-modules moe_act" in note and "ignored" in note for note in s.notes)


@pytest.mark.parametrize("words, argument", [
    ("--moe-layer-recompute --recompute-granularity full", "--moe-layer-recompute"),
    ("--recompute-granularity selective --recompute-modules", "--recompute-modules")])
def test_megatron_arguments_refused(words, argument):
    with pytest.raises(InputError) as info:
        _megatron(words)
    assert info.value.argument == argument


def test_a_bridge_recipe_with_modules_reads(tmp_path):
    """A Megatron-Bridge recipe whose model section selects modules (Megatron-Bridge's own override
    YAML, as ``scripts/performance`` writes them: ``utils/overrides.py``, ``_set_recompute_overrides``)
    reads as those modules, once refused; modules beside no granularity are noted as ignored."""
    import json
    import subprocess
    import sys

    def layout(yaml: str):
        override = tmp_path / "override.yaml"
        override.write_text(yaml)
        done = subprocess.run([sys.executable, "-m", "symbolic_cost", "summary", "--json", "--megatron-bridge-recipe",
                               "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config", "--hf-config",
                               "tests/hf_configs/Qwen3-30B-A3B.json", "--nemo-recipe", str(override)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        return out["layout"], out["notes"]
    chosen, _ = layout("model:\n  recompute_granularity: selective\n  recompute_modules: [moe_act, layernorm]\n")
    assert (chosen["recompute"], chosen["recompute_modules"]) == ("selective", ["moe_act", "layernorm"])
    chosen, notes = layout("model:\n  recompute_granularity: null\n  recompute_modules: [moe, moe_act]\n")
    assert (chosen["recompute"], chosen["recompute_modules"]) == ("none", [])
    assert any("recompute_modules moe, moe_act" in note and "ignored" in note for note in notes)
    # the deprecated moe_layer_recompute: selective, "moe" added to the default core_attn
    chosen, _ = layout("model:\n  recompute_granularity: null\n  moe_layer_recompute: true\n")
    assert (chosen["recompute"], chosen["recompute_modules"]) == ("selective", ["core_attn", "moe"])


def test_a_shared_stack_is_timed_under_each_policy(deepseek):
    """A search times many trainings on one stack, remembering a stage's seconds by its placement
    and recomputation: two module lists are two policies, timed apart (equal to a fresh build)."""
    from dataclasses import replace

    from symbolic_cost.timing.step import step_time_breakdown
    layout = dict(b=1, l=L, ep=8, d=8, flash=True)
    modules = dict(recompute="selective", recompute_modules=("moe",))
    plain = model_cost(deepseek, Training(**layout, recompute="selective", recompute_modules=("moe_act",)))
    step_time_breakdown(plain, "h100")
    shared = replace(plain, training=Training(**layout, **modules))
    fresh = model_cost(deepseek, Training(**layout, **modules))
    assert step_time_breakdown(shared, "h100")["compute"] == step_time_breakdown(fresh, "h100")["compute"]
    assert step_time_breakdown(shared, "h100")["compute"] != step_time_breakdown(plain, "h100")["compute"]


def test_search_says_the_files_modules_are_not_searched(tmp_path):
    """``search`` varies the recomputation by mode; a file's module list is said not to be among them."""
    import subprocess
    import sys
    override = tmp_path / "override.yaml"
    override.write_text("model:\n  recompute_granularity: selective\n  recompute_modules: [moe_act, layernorm]\n")
    done = subprocess.run([sys.executable, "-m", "symbolic_cost", "search", "--megatron-bridge-recipe",
                           "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config", "--hf-config",
                           "tests/hf_configs/Qwen3-30B-A3B.json", "--nemo-recipe", str(override), "--devices", "8"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "modules moe_act, layernorm; the search tries recompute none, full, selective" in done.stdout + done.stderr


def test_core_attn_reruns_a_fused_kernel_as_pytorch_does(monkeypatch):
    """Megatron-Core checkpoints the core attention whatever it runs (``checkpoint_core_attention``):
    with a fused kernel, backward runs it again, and the checkpoint keeps its inputs Q, K, V, while
    ``linear_proj`` keeps its output O; the kernel's fp32 log-sum-exp, ``(b, h, l)``, is what it frees.
    The re-run against PyTorch: a small Hugging Face Llama (CPU, ``sdpa``) whose
    ``scaled_dot_product_attention`` runs inside ``torch.utils.checkpoint`` (reentrant, as Megatron's
    ``tensor_parallel.checkpoint``); the kernel's products counted from the shapes of each call of
    ``aten._scaled_dot_product_flash_attention_for_cpu`` (``2 l_q l_k d`` for the scores and for
    the values, per batch row and head), with and without it."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from dataclasses import replace
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import checkpoint

    from symbolic_cost.models.config import from_config
    kernel_op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default

    class KernelFlops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.flops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func == kernel_op:
                q, k, v = args[:3]
                batch, heads, lq, d = q.shape
                self.flops += 2 * batch * heads * lq * k.shape[2] * (d + v.shape[3])
            return func(*args, **(kwargs or {}))

    config = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
              "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 100, "max_position_embeddings": 64,
              "tie_word_embeddings": False}
    b, l, heads, layers = 2, 16, 4, 2

    def kernel_flops(wrapped):
        torch.manual_seed(0)
        hf = transformers.LlamaConfig(**{k: v for k, v in config.items() if k != "model_type"})
        model = transformers.LlamaForCausalLM._from_config(hf, attn_implementation="sdpa")
        plain = torch.nn.functional.scaled_dot_product_attention
        if wrapped:
            monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                                lambda *a, **kw: checkpoint(lambda *t: plain(*t, **kw), *a, use_reentrant=True))
        ids = torch.randint(0, 100, (b, l))
        with KernelFlops() as counter:
            model(ids, labels=ids, use_cache=False).loss.backward()
        monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", plain)
        return counter.flops

    two_mnk = replace(conv.DEFAULT, matmul_flops="2mnk")
    arch = from_config(config)
    none, core = (model_cost(arch, Training(b=b, l=l, flash=True, recompute=r), two_mnk) for r in ("none", "selective"))
    kernel = core.stack[1][0]["flash_attention"]
    assert core.flops_recompute == layers * kernel.flops_fwd
    products = sum(g.count * 2 * g.m * g.k * g.n for g in kernel.gemms if g.pass_ == "fwd")
    assert layers * products == kernel_flops(True) - kernel_flops(False) > 0
    assert none.activation_bytes - core.activation_bytes == layers * b * heads * l * 4
