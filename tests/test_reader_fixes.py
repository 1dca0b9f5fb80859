"""Framework readers against published files a tester found misread: torchtitan's replicate beside
context parallelism and its bf16 optimizer states (``torchtitan_recipes/tests/features.py``), its
fault-tolerance experiment (``torchtitan/experiments/torchft``), Megatron-Bridge's ``model.moe_*``
keys, and a launch script that appends logging options to a command string under a test the reader
cannot decide.  The torchtitan files are pytorch/torchtitan's at b5bcd76c66d0acb1a08b176d9639425bc55e0b2a
(``tests/framework_inputs/torchtitan_python/b5bcd76/``, the paths of the checkout); the script carries its
provenance in its header; the Megatron-Bridge recipe is ``bridge_recipes.json``'s (Megatron-Bridge
067f987df).  Oracles: counts worked out by hand from the frameworks' rules, and refusals by the
construct they name."""

import pathlib

import pytest

from summary_calls import summary_error, summary_json
from tests.test_framework_inputs import _llama3_parameters

INPUTS = pathlib.Path(__file__).resolve().parent / "framework_inputs"
CHECKOUT = INPUTS / "torchtitan_python" / "b5bcd76"
FEATURES = str(CHECKOUT / "torchtitan_recipes" / "tests" / "features.py")
TORCHFT = str(CHECKOUT / "torchtitan" / "experiments" / "torchft" / "llama3" / "config_registry.py")
DEBUG = 6 * (4 * 256 ** 2 + 3 * 256 * 768 + 2 * 256) + 2 * 2048 * 256 + 256
"""torchtitan's llama3 debug model: 6 layers of dim 256, FFN 768, 2,048 words, untied (test_torchtitan_python)."""


def _features(capsys, config: str, *words):
    return summary_json(capsys, "--torchtitan", FEATURES, "--torchtitan-config", config, *words)


def _data(got) -> list:
    return sorted((c["kind"], c["group"], c["pass"]) for c in got["collectives"] if c["dimension"] == "data")


def test_replicate_beside_context_parallelism_is_hsdp_over_shard_x_context(capsys):
    """llama3_debugmodel_ddp2_cp2 (features.py:294-300): replicate 2, shard 1, CP 2 on 4 ranks.  torchtitan's
    ``resolve_fsdp_mesh`` shards over (dp_shard, cp) = 1 x 2 = 2 ranks and replicates over dp_replicate = 2
    (HSDP): each rank holds half the bf16 weights and gradients (2 x P / 2 bytes) and half the 12 bytes of fp32
    master and moments (12 x P / 2); the gradients are reduce-scattered and the weights gathered in groups of 2,
    then all-reduced over the 2 replicas.  llama3_debugmodel_fsdp2_cp2 (shard 2 x CP 2, no replicate) shards over
    4 ranks: a quarter each, no all-reduce."""
    got = _features(capsys, "llama3_debugmodel_ddp2_cp2")
    assert got["parameters"] == DEBUG == 6_163_712 and got["world_size"] == 4
    assert (got["layout"]["d"], got["layout"]["cp"], got["layout"]["zero"], got["layout"]["shard"]) == (2, 2, 3, 1)
    assert (got["weight_bytes"], got["gradient_bytes"], got["optimizer_bytes"]) == (
        2 * DEBUG // 2, 2 * DEBUG // 2, 12 * DEBUG // 2) == (6_163_712, 6_163_712, 36_982_272)
    assert _data(got) == [("allgather", 2, "bwd"), ("allgather", 2, "fwd"), ("allreduce", 2, "bwd"),
                          ("reducescatter", 2, "bwd")]
    full = _features(capsys, "llama3_debugmodel_fsdp2_cp2")
    assert (full["weight_bytes"], full["optimizer_bytes"]) == (2 * DEBUG // 4, 12 * DEBUG // 4)
    assert _data(full) == [("allgather", 4, "bwd"), ("allgather", 4, "fwd"), ("reducescatter", 4, "bwd")]


def _toml(tmp_path, replicate: int, shard: int, cp: int) -> str:
    """Llama 3 8B's TOML (``framework_inputs/llama3_8b.toml``, torchtitan f3534d7) with its degrees changed, and
    full recomputation for its op-level SAC (which the library counts without context parallelism only)."""
    text = (INPUTS / "llama3_8b.toml").read_text()
    for key, value in (("data_parallel_replicate_degree = 1", replicate), ("data_parallel_shard_degree = -1", shard),
                       ("context_parallel_degree = 1", cp), ('mode = "selective"', '"full"')):
        assert key in text
        text = text.replace(key, f"{key.split(' = ')[0]} = {value}")
    path = tmp_path / f"llama3_8b_r{replicate}_s{shard}_cp{cp}.toml"
    path.write_text(text)
    return str(path)


def test_a_toml_with_replicate_shard_1_and_context_parallelism_is_hsdp(tmp_path, capsys):
    """The TOML reader's same rule: replicate 2, shard 1, CP 2 on 4 ranks shards Llama 3 8B's P parameters over
    shard x CP = 2 ranks (P bytes of bf16 weights, 6 P of optimizer state a rank), as HSDP; shard 2, CP 2 without
    replicate over 4 (P / 2, 3 P)."""
    p = _llama3_parameters(4096, 14336, 32)
    hsdp = summary_json(capsys, "--torchtitan", _toml(tmp_path, 2, 1, 2), "--devices", "4")
    assert (hsdp["weight_bytes"], hsdp["optimizer_bytes"]) == (p, 6 * p) == (8_030_261_248, 48_181_567_488)
    assert ("allreduce", 2, "bwd") in _data(hsdp)
    fsdp = summary_json(capsys, "--torchtitan", _toml(tmp_path, 1, 2, 2), "--devices", "4")
    assert (fsdp["weight_bytes"], fsdp["optimizer_bytes"]) == (p // 2, 3 * p)
    assert not any(kind == "allreduce" for kind, _, _ in _data(fsdp))


def test_bf16_optimizer_states_are_refused_by_name(tmp_path, capsys):
    """llama3_debugmodel_optimizer_bf16_states (features.py:250-254) sets optimizer.implementation =
    "fused_opt_states_bf16": Adam's moments in bf16 beside fp32 parameters (torchtitan's
    docs/bf16_optimizer_states.md), 4 bytes of moments a parameter, not a recipe the library counts: refused,
    in a TOML too.  The other implementations (fused, foreach, for-loop) only choose kernels: the same 12 bytes a
    parameter (12 P / 8 on the debug model's 8 FSDP ranks), noted."""
    err = summary_error(capsys, "--torchtitan", FEATURES, "--torchtitan-config", "llama3_debugmodel_optimizer_bf16_states",
                 "--devices", "8")
    assert "[optimizer] implementation 'fused_opt_states_bf16'" in err and "bf16" in err
    text = (INPUTS / "llama3_8b.toml").read_text()
    assert 'name = "AdamW"\n' in text
    for implementation, refused in (("fused_opt_states_bf16", True), ("foreach", False)):
        path = tmp_path / f"{implementation}.toml"
        path.write_text(text.replace('name = "AdamW"\n', f'name = "AdamW"\nimplementation = "{implementation}"\n', 1))
        if refused:
            assert "fused_opt_states_bf16" in summary_error(capsys, "--torchtitan", str(path), "--devices", "8")
        else:
            got = summary_json(capsys, "--torchtitan", str(path), "--devices", "8")
            assert got["optimizer_bytes"] == 12 * _llama3_parameters(4096, 14336, 32) // 8
            assert any("implementation 'foreach'" in note for note in got["notes"])
    plain = _features(capsys, "llama3_debugmodel_fsdp_reshard_always", "--devices", "8")
    assert plain["optimizer_bytes"] == 12 * DEBUG // 8


def test_torchft_is_refused_as_fault_tolerance(capsys):
    """torchtitan/experiments/torchft/llama3/config_registry.py builds its model with the experiment's own
    model_registry (``from . import model_registry``, line 21) for a FaultTolerantTrainer: the refusal names
    fault tolerance (torchft), not where the file sits."""
    err = summary_error(capsys, "--torchtitan", TORCHFT, "--torchtitan-config", "llama3_torchft_debugmodel", "--devices", "8")
    assert "torchft" in err and "fault tolerance" in err and "(line 26)" in err
    assert "not in a torchtitan checkout" not in err


QWEN3_MOE = ("--megatron-bridge-recipe", "qwen3_30b_a3b_pretrain_16gpu_h100_fp8cs_config", "--hf-config",
             str(INPUTS.parent / "hf_configs" / "Qwen3-30B-A3B.json"))
QWEN3_30B = 48 * 623_120_640 + 2 * 151936 * 2048 + 2048
"""Qwen3-30B-A3B's parameters (test_torchtitan_python's hand count): 128 experts of width 768, 8 a token."""


def _bridge(tmp_path, capsys, yaml: str | None = None, refused: bool = False):
    words = list(QWEN3_MOE)
    if yaml is not None:
        path = tmp_path / "override.yaml"
        path.write_text(yaml)
        words += ["--nemo-recipe", str(path)]
    return summary_error(capsys, *words) if refused else summary_json(capsys, *words)


def test_a_bridge_recipe_s_flex_dispatcher_is_read(tmp_path, capsys):
    """perf_recipes/qwen/h100/qwen3_moe.py (Megatron-Bridge 067f987df, lines 204-206): the HybridEP backend with
    moe_token_dispatcher_type flex: the flex dispatcher (a token sent once to each node holding one of its
    experts), said in a note.  An override back to alltoall leaves the backend without effect (Megatron-Core
    reads it with flex only), noted; flex with no backend falls back to alltoall (Megatron-Bridge's
    validate_flex_dispatcher_backend); NCCL-EP's exchange is refused by name."""
    got = _bridge(tmp_path, capsys)
    assert got["layout"]["dispatcher"] == "flex" and got["parameters"] == QWEN3_30B == 30_532_122_624
    assert any("moe_flex_dispatcher_backend hybridep" in note for note in got["notes"])
    back = _bridge(tmp_path, capsys, "model:\n  moe_token_dispatcher_type: alltoall\n")
    assert back["layout"]["dispatcher"] == "alltoall"
    assert any("acts with the flex dispatcher only" in note for note in back["notes"])
    cleared = _bridge(tmp_path, capsys, "model:\n  moe_flex_dispatcher_backend: null\n")
    assert cleared["layout"]["dispatcher"] == "alltoall"
    assert any("falls back to alltoall" in note for note in cleared["notes"])
    assert "ncclep" in _bridge(tmp_path, capsys, "model:\n  moe_flex_dispatcher_backend: ncclep\n", refused=True)


@pytest.mark.parametrize("key, value, model", [
    ("moe_router_topk", 2, 8), ("moe_ffn_hidden_size", 1024, 768), ("num_moe_experts", 64, 128),
    ("moe_shared_expert_intermediate_size", 512, 0), ("moe_layer_freq", 2, None)])
def test_bridge_moe_keys_that_disagree_with_the_model_are_refused(tmp_path, capsys, key, value, model):
    """Qwen3-30B-A3B's config.json: 128 experts, 8 a token, moe_intermediate_size 768, no shared expert, every
    one of its 48 layers an MoE layer.  An override that states another value would make Megatron-Bridge build
    another model: refused, naming the key."""
    err = _bridge(tmp_path, capsys, f"model:\n  {key}: {value}\n", refused=True)
    assert f"model.{key}" in err and (model is None or f"has {model}" in err)


def test_bridge_moe_keys_that_agree_with_the_model_are_taken(tmp_path, capsys):
    """The same values as the model's (and moe_layer_freq 1: every layer) change nothing: the parameters stay
    Qwen3-30B-A3B's; a moe_* key the reader does not classify (the router's score function) is refused by name."""
    same = ("model:\n  moe_router_topk: 8\n  moe_ffn_hidden_size: 768\n  num_moe_experts: 128\n"
            "  moe_layer_freq: 1\n  moe_shared_expert_intermediate_size: null\n")
    assert _bridge(tmp_path, capsys, same)["parameters"] == QWEN3_30B
    err = _bridge(tmp_path, capsys, "model:\n  moe_router_score_function: sigmoid\n", refused=True)
    assert "model.moe_router_score_function" in err


EPFL = str(INPUTS / "epfl_submit_llama3_8b.sh")


def test_logging_appended_to_a_command_string_under_an_undecided_test_is_taken(capsys):
    """The EPFL script's line 238 (234 upstream) appends --wandb-save-dir $LOGGING_DIR (a path holding $USER and
    $SLURM_NNODES), --wandb-project and --wandb-exp-name $EXP_NAME-$SLURM_JOB_ID to TRAINING_CMD under
    ``if [ -n "$WANDB_API_KEY" ]``: logging only, taken with a note, each unknown value one word after its
    option.  The script's precision-aware optimizer is read; its blocker is then --trigger-path, an option of
    the EPFL fork that Megatron-LM does not have."""
    err = summary_error(capsys, "--megatron-args", EPFL, "--devices", "8")
    assert "sits under a test" not in err
    assert "--trigger-path" in err


def test_the_string_append_reads_as_the_plain_script(tmp_path, capsys):
    """A minimal excerpt of the EPFL construct (a command string, logging appended under the WANDB test) reads
    as the same script without the test: the same layout and counts, and a note naming the line."""
    head = ("#!/bin/bash\nLOGGING_DIR=/scratch/$USER/logs-$SLURM_NNODES-nodes\n"
            'TRAINING_CMD="python3 pretrain_gpt.py --num-layers 2 --hidden-size 256 --num-attention-heads 4 '
            "--seq-length 512 --max-position-embeddings 512 --micro-batch-size 1 --global-batch-size 8 "
            '--vocab-size 1024 --bf16"\n')
    logging = ('if [ -n "$WANDB_API_KEY" ]; then\n  TRAINING_CMD="$TRAINING_CMD \\\n    --wandb-save-dir $LOGGING_DIR '
               '\\\n    --wandb-exp-name run-$SLURM_JOB_ID"\nfi\n')
    launch = 'srun bash -c "$TRAINING_CMD"\n'
    plain, appended = tmp_path / "plain.sh", tmp_path / "appended.sh"
    plain.write_text(head + launch)
    appended.write_text(head + logging + launch)
    want = summary_json(capsys, "--megatron-args", str(plain), "--devices", "8")
    got = summary_json(capsys, "--megatron-args", str(appended), "--devices", "8")
    assert {k: v for k, v in got.items() if k not in ("notes", "model")} == \
        {k: v for k, v in want.items() if k not in ("notes", "model")}
    assert any(note.startswith("line 5: TRAINING_CMD is set under a test") for note in got["notes"])
    assert (got["layout"]["d"], got["layout"]["micro_batches"]) == (8, 1)       # 8 / (1 x 8)
