"""Tensor parallelism whose ends are not Megatron-LM's (``Training.tp_ends``): transformers' ``tp_plan``
under accelerate's ``parallelism_config_tp_size`` and DeepSpeed's AutoTP (``"tensor_parallel":
{"autotp_size": N}``).

Every expected number is counted here by hand from the tensor shapes of the layout the frameworks
document (transformers' ``LlamaConfig.base_model_tp_plan`` and ``LlamaForCausalLM._tp_plan``; DeepSpeed's
``docs/_tutorials/autotp-training.md``): ``q/k/v``, ``gate``, ``up`` split by output columns and
``o``, ``down`` by input rows over the ``m1`` ranks, norms whole, the word table whole, an untied LM head
split by vocabulary with its logits all-gathered, a tied one (DeepSpeed) whole with the table.
"""

import json
import pathlib

import pytest

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import from_config
from summary_calls import summary_error, summary_json

HERE = pathlib.Path(__file__).resolve().parent
INPUTS = HERE / "framework_inputs"
LLAMA31 = str(HERE / "hf_configs" / "Llama-3.1-8B.json")      # untied, 32 heads, 8 key/value heads
LLAMA32 = str(HERE / "hf_configs" / "Llama-3.2-1B.json")      # tied
AUTOTP = str(INPUTS / "llamafactory_ds_z2_autotp_config.json")

TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
        "tie_word_embeddings": False, "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "hidden_act": "silu"}


def _layer_parameters(e, f, h, kv, m1):
    """A Llama layer's parameters on one of ``m1`` tensor ranks: q and o ``e x e``, k and v ``e x kv*hd``,
    gate, up and down ``e x f``, each split ``m1`` ways; the two RMS norms (``e`` each) whole."""
    hd = e // h
    return (2 * e * e + 2 * e * kv * hd + 3 * e * f) // m1 + 2 * e


def _llama_per_rank(e, f, h, kv, vocab, layers, m1, table, head):
    """Parameters on one tensor rank: the layers, the word table (``table``: ``"split"`` by vocabulary or
    ``"whole"``), the final norm, and the LM head (``head``: ``"split"``, ``"whole"`` or ``"tied"``, the
    table's own)."""
    rows = {"split": vocab // m1, "whole": vocab}
    return layers * _layer_parameters(e, f, h, kv, m1) + rows[table] * e + e + (0 if head == "tied" else rows[head] * e)


def _tensor_counts(collectives) -> dict:
    """``(kind, pass) -> count`` of a summary's tensor-parallel collectives."""
    out = {}
    for c in collectives:
        if c["dimension"] == "tensor":
            out[(c["kind"], c["pass"])] = out.get((c["kind"], c["pass"]), 0) + c["count"]
    return out


def test_the_ends_of_a_tiny_llama_counted_by_hand():
    """b=2, l=16, e=64, V=1000, m1=2.  ``gathered`` (transformers): the table split, its partial lookups
    allreduced (b l e = 2,048 elements); the head holds 500 x 64 weights, allreduces its input's gradient
    (2,048) and all-gathers the logits (b l V = 32,000 elements); the loss keeps all 32,000 logits in fp32 on
    every rank.  ``whole-table`` (DeepSpeed): the table whole, no collective at the lookup.  ``whole``: both
    ends whole, no collective at either."""
    arch = from_config(TINY, "tiny")
    b, l, e, vocab, m1, es = 2, 16, 64, 1000, 2, 2
    gathered = model_cost(arch, Training(b=b, l=l, m1=m1, tp_ends="gathered"))
    assert gathered.parameters_per_device == _llama_per_rank(64, 128, 4, 2, vocab, 2, m1, "split", "split") == 101184
    head, loss, word = gathered.head["lm_head"], gathered.head["loss"], gathered.embedding["word_embeddings"]
    assert head.weights == e * vocab // m1 * es
    assert sorted((c.kind, c.pass_, c.elements, c.group) for c in head.collectives) == \
        [("allgather", "fwd", b * l * vocab, m1), ("allreduce", "bwd", b * l * e, m1)]
    assert head.act_out == b * l * vocab * es                       # the gathered logits are the head's output
    assert conv.DEFAULT.loss_precision == "fp32"
    assert (loss.act_buffer, loss.collectives) == (b * l * vocab * 4, ())
    assert word.weights == vocab // m1 * e * es
    assert [(c.kind, c.pass_, c.elements) for c in word.collectives] == [("allreduce", "fwd", b * l * e)]
    table = model_cost(arch, Training(b=b, l=l, m1=m1, tp_ends="whole-table"))
    assert table.parameters_per_device == _llama_per_rank(64, 128, 4, 2, vocab, 2, m1, "whole", "split") == 133184
    assert (table.embedding["word_embeddings"].weights, table.embedding["word_embeddings"].collectives) == \
        (vocab * e * es, ())
    whole = model_cost(arch, Training(b=b, l=l, m1=m1, tp_ends="whole"))
    assert whole.parameters_per_device == _llama_per_rank(64, 128, 4, 2, vocab, 2, m1, "whole", "whole") == 165184
    assert whole.head["lm_head"].collectives == () and whole.head["lm_head"].weights == e * vocab * es
    megatron = model_cost(arch, Training(b=b, l=l, m1=m1))
    assert megatron.parameters_per_device == _llama_per_rank(64, 128, 4, 2, vocab, 2, m1, "split", "split")
    # the model's FLOPs do not depend on where its ends lie, only what one rank runs does
    assert gathered.model_flops_fwd == megatron.model_flops_fwd == whole.model_flops_fwd


def test_each_projection_reduces_its_own_input_gradient():
    """transformers' tp_plan and DeepSpeed's AutoTP split q, k, v, gate and up as five modules, each
    allreducing its (b, l, e) input gradient in backward: 3 at the attention's input and 2 at the MLP's,
    where Megatron-LM's fused qkv and fc1 reduce once each."""
    arch = from_config(TINY, "tiny")
    b, l, e = 2, 16, 64
    for ends, attention, mlp in (("vocab", 1, 1), ("gathered", 3, 2), ("whole-table", 3, 2), ("whole", 3, 2)):
        layer = model_cost(arch, Training(b=b, l=l, m1=2, tp_ends=ends)).layer
        assert [(c.kind, c.pass_, c.elements) for c in layer["qkv_proj"].collectives] == \
            [("allreduce", "bwd", b * l * e)] * attention
        assert [(c.kind, c.pass_, c.elements) for c in layer["fc1"].collectives] == [("allreduce", "bwd", b * l * e)] * mlp


@pytest.mark.parametrize("given, field", [
    (dict(m1=2, s1=2, tp_ends="gathered"), "tp_ends"),
    (dict(m1=2, tp_ends="replicated"), "tp_ends"),
    (dict(m1=2, tp_ends="gathered", loss_chunks=2), "tp_ends"),
])
def test_ends_that_are_not_modelled_are_refused_by_name(given, field):
    arch = from_config(TINY, "tiny")
    with pytest.raises(InputError) as caught:
        model_cost(arch, Training(b=2, l=16, **given))
    assert caught.value.argument == field


def test_a_tied_head_is_split_with_its_table_or_not_at_all():
    """transformers 5.23 splits a tied table and head along the same vocabulary (one shard, held once);
    a head split beside a whole table cannot be tied to it."""
    arch = from_config({**TINY, "tie_word_embeddings": True}, "tiny")
    tied = model_cost(arch, Training(b=2, l=16, m1=2, tp_ends="gathered"))
    assert tied.parameters_per_device == _llama_per_rank(64, 128, 4, 2, 1000, 2, 2, "split", "tied") == 69184
    with pytest.raises(InputError, match="tied to the word table") as caught:
        model_cost(arch, Training(b=2, l=16, m1=2, tp_ends="whole-table"))
    assert caught.value.argument == "tp_ends"


def test_accelerate_tp_hsdp_as_published(capsys):
    """accelerate's tp_hsdp.yaml (8 processes: 2 replicas x 2 shards x 2 tensor ranks) on Llama 3 8B, once
    refused: m1 = 2, d = 4, HSDP shards of 2, no sequence parallelism. Per tensor rank: 32 layers of
    (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) / 2 + 2 x 4096, half the word table (128,256 x 4096),
    the final norm and half the head. The tensor collectives of a step: forward, each layer's two row-split
    outputs and the lookup's partial sums allreduced (65), the logits of a micro-batch (1 x 8,192 x 128,256
    bf16) all-gathered once, a rank sending half of them; backward, five input gradients a layer (q, k, v,
    gate, up) and the head's (161)."""
    got = summary_json(capsys, "--preset", "llama-3-8b", "--accelerate", str(INPUTS / "accelerate_tp_hsdp.yaml"))
    layout = got["layout"]
    assert (layout["m1"], layout["s1"], layout["d"], layout["shard"], layout["zero"], layout["tp_ends"]) == \
        (2, 1, 4, 2, 3, "gathered")
    assert got["parameters_per_device"] == \
        _llama_per_rank(4096, 14336, 32, 8, 128256, 32, 2, "split", "split") == 4015263744
    assert _tensor_counts(got["collectives"]) == {("allreduce", "fwd"): 2 * 32 + 1, ("allreduce", "bwd"): 5 * 32 + 1,
                                                  ("allgather", "fwd"): 1}
    gathers = [c for c in got["collectives"] if c["dimension"] == "tensor" and c["kind"] == "allgather"]
    assert [c["volume_bytes"] for c in gathers] == [1 * 8192 * 128256 * 2 // 2]
    assert any(n.startswith("parallelism_config_tp_size 2: transformers' tp_plan") for n in got["notes"])


def test_accelerate_tensor_parallelism_of_a_tied_model(tmp_path, capsys):
    """Llama 3.2 1B ties its head to its word table: under transformers' plan the shared table is split once,
    so a rank holds 16 layers split 2 ways, half the table and the final norm."""
    got = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", _accelerate_tp(tmp_path, 1, 2, 2), "--set",
                "l=1024")
    assert (got["layout"]["m1"], got["layout"]["d"], got["layout"]["tp_ends"]) == (2, 2, "gathered")
    assert got["parameters_per_device"] == _llama_per_rank(2048, 8192, 32, 8, 128256, 16, 2, "split", "tied") == \
        617940992


def _accelerate_tp(tmp_path, replicate, shard, tp):
    text = (INPUTS / "accelerate_tp_hsdp.yaml").read_text()
    for name, size in (("dp_replicate", replicate), ("dp_shard", shard), ("tp", tp)):
        text = text.replace(f"parallelism_config_{name}_size: 2", f"parallelism_config_{name}_size: {size}")
    text = text.replace("num_processes: 8", f"num_processes: {replicate * shard * tp}")
    path = tmp_path / "tp.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("model, sizes, said", [
    (("--hf-config", LLAMA31), (1, 2, 3), "does not divide Llama-3.1-8B's 32 attention heads"),
    (("--hf-config", LLAMA31), (2, 1, 2), "accelerate refuses tensor parallelism beside pure replicas"),
    (("--hf-config", LLAMA31), (1, 1, 2), "accelerate refuses FSDP with no dimension to shard over"),
])
def test_accelerate_tensor_parallelism_refusals_name_the_key(tmp_path, capsys, model, sizes, said):
    err = summary_error(capsys, *model, "--accelerate", _accelerate_tp(tmp_path, *sizes))
    assert "parallelism_config_tp_size" in err and said in err


def test_deepspeed_autotp_as_published(capsys):
    """LLaMA-Factory's ds_z2_autotp_config.json (autotp_size 2, ZeRO-2, its batch and precision "auto") on 8
    devices with Llama 3.1 8B: m1 = 2, d = 4; the word table whole (AutoTP leaves nn.Embedding alone), the
    head split; the logits of 1 x 2,048 tokens all-gathered, the head's input gradient (1 x 2,048 x 4,096)
    allreduced, and no collective at the lookup."""
    got = summary_json(capsys, "--hf-config", LLAMA31, "--deepspeed", AUTOTP, "--devices", "8", "--set", "b=1", "n_micro=1",
                "l=2048", "--precision", "bf16")
    layout = got["layout"]
    assert (layout["m1"], layout["s1"], layout["d"], layout["zero"], layout["tp_ends"]) == \
        (2, 1, 4, 2, "whole-table")
    assert got["parameters_per_device"] == \
        _llama_per_rank(4096, 14336, 32, 8, 128256, 32, 2, "whole", "split") == 4277932032
    assert _tensor_counts(got["collectives"]) == {("allreduce", "fwd"): 2 * 32, ("allreduce", "bwd"): 5 * 32 + 1,
                                                  ("allgather", "fwd"): 1}
    ends = sorted((c["kind"], c["pass"], c["volume_bytes"]) for c in got["collectives"]
                  if c["dimension"] == "tensor" and c["count"] == 1)
    assert ends == [("allgather", "fwd", 2048 * 128256 * 2 // 2), ("allreduce", "bwd", 2048 * 4096 * 2)]
    assert any(n.startswith("tensor_parallel.autotp_size 2: AutoTP over 2 ranks") for n in got["notes"])


def test_deepspeed_autotp_leaves_a_tied_head_whole(tmp_path, capsys):
    """Llama 3.2 1B ties its head to the word table: DeepSpeed leaves both whole ("does not reduce the embedding
    or output-layer memory footprint"), so a rank holds 16 layers split 4 ways, the whole table, the final
    norm, and the only tensor collectives are the layers' allreduces."""
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                "zero_optimization": {"stage": 1}, "tensor_parallel": {"autotp_size": 4}}))
    got = summary_json(capsys, "--hf-config", LLAMA32, "--deepspeed", str(path), "--devices", "8", "--set", "l=1024")
    assert (got["layout"]["m1"], got["layout"]["d"], got["layout"]["tp_ends"]) == (4, 2, "whole")
    assert got["parameters_per_device"] == \
        _llama_per_rank(2048, 8192, 32, 8, 128256, 16, 4, "whole", "tied") == 506005504
    assert _tensor_counts(got["collectives"]) == {("allreduce", "fwd"): 2 * 16, ("allreduce", "bwd"): 5 * 16}


@pytest.mark.parametrize("section, devices, said, key", [
    ({"autotp_size": 3}, "6", "does not divide Llama-3.1-8B's 32 attention heads", "tensor_parallel.autotp_size"),
    ({"autotp_size": 4}, "6", "does not divide the 6 ranks", "tensor_parallel.autotp_size"),
    ({"autotp_size": 2, "preset_model": "llama"}, "8", "is not modelled", "tensor_parallel.preset_model"),
    ({"autotp_size": 2, "partition_config": {}}, "8", "is not modelled", "tensor_parallel.partition_config"),
    ({"autotp_size": 2, "tp": {"tp_size": 4}}, "8", "DeepSpeed refuses it", "tensor_parallel.tp.tp_size"),
])
def test_deepspeed_autotp_refusals_name_the_key(tmp_path, capsys, section, devices, said, key):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                "tensor_parallel": section}))
    err = summary_error(capsys, "--hf-config", LLAMA31, "--deepspeed", str(path), "--devices", devices)
    assert key in err and said in err


def test_deepspeed_autotp_off_is_the_file_without_it(tmp_path, capsys):
    """autotp_size 0 (DeepSpeed's default) or 1 runs no tensor parallelism: the layout of the file without the
    section, noted."""
    base = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}}
    (tmp_path / "base.json").write_text(json.dumps(base))
    plain = summary_json(capsys, "--hf-config", LLAMA31, "--deepspeed", str(tmp_path / "base.json"), "--devices", "8")
    (tmp_path / "off.json").write_text(json.dumps({**base, "tensor_parallel": {"autotp_size": 1}}))
    off = summary_json(capsys, "--hf-config", LLAMA31, "--deepspeed", str(tmp_path / "off.json"), "--devices", "8")
    assert off["layout"] == plain["layout"] and off["memory_bytes"] == plain["memory_bytes"]
    assert any(n.startswith("tensor_parallel.autotp_size 1: AutoTP off") for n in off["notes"])


def test_search_beside_such_a_file_is_refused(tmp_path, capsys):
    """The search varies Megatron-LM's layouts (sequence parallelism among them), which such ends do not run."""
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                "tensor_parallel": {"autotp_size": 2}}))
    assert main(["search", "--hf-config", LLAMA31, "--deepspeed", str(path), "--devices", "8"]) == 2
    assert "tp_ends 'whole-table'" in capsys.readouterr().err


def test_autotp_through_a_trainer_run(tmp_path, capsys):
    """LLaMA-Factory names its AutoTP config in the TrainingArguments (``deepspeed``); the Trainer fills its
    "auto" values (2 sequences a micro-batch, 4 accumulated, bf16), and the tensor layout is the config's:
    m1 = 2 of the 8 ranks, d = 4."""
    args = tmp_path / "training_args.json"
    args.write_text(json.dumps({"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4, "bf16": True,
                                "deepspeed": "examples/deepspeed/ds_z2_autotp_config.json"}))
    got = summary_json(capsys, "--preset", "llama-3-8b", "--set", "l=2048", "--hf-training-args", str(args), "--deepspeed",
                AUTOTP, "--devices", "8")
    layout = got["layout"]
    assert (layout["b"], layout["micro_batches"], layout["m1"], layout["d"], layout["zero"], layout["tp_ends"]) == \
        (2, 4, 2, 4, 2, "whole-table")
    assert got["parameters_per_device"] == _llama_per_rank(4096, 14336, 32, 8, 128256, 32, 2, "whole", "split")


def test_transformers_own_tensor_parallelism_books_what_the_library_books():
    """The oracle: ``tests/tp_plan_gloo.py`` runs transformers' tp_plan itself over 2 gloo processes on a
    tiny Llama (untied and tied) and records what rank 0 holds and PyTorch's count of the collectives of one
    forward and backward.  The library's ``gathered`` layout of the same model must hold as many parameters
    and book as many collectives of each kind and pass; the logits come back whole on the rank."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import subprocess
    import sys
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    sys.path.insert(0, str(HERE))
    from tp_plan_gloo import BATCH, CASES, CONFIG, TOKENS, WORLD
    done = subprocess.run([sys.executable, str(HERE / "tp_plan_gloo.py")], capture_output=True, text=True,
                          timeout=300, cwd=HERE.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(runs) == len(CASES)
    hf = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": CONFIG["hidden_size"],
          "intermediate_size": CONFIG["intermediate_size"], "num_attention_heads": CONFIG["num_attention_heads"],
          "num_key_value_heads": CONFIG["num_key_value_heads"], "num_hidden_layers": CONFIG["num_hidden_layers"],
          "vocab_size": CONFIG["vocab_size"], "max_position_embeddings": CONFIG["max_position_embeddings"],
          "rms_norm_eps": 1e-6, "hidden_act": "silu"}
    for tied, run in zip(CASES, runs):
        assert run["plan"]["model.embed_tokens"] == "embedding_rowwise" and run["plan"]["lm_head"] == \
            "colwise_gather_output"
        cost = model_cost(from_config({**hf, "tie_word_embeddings": tied}, "tiny"),
                          Training(b=BATCH, l=TOKENS, m1=WORLD, precision="fp32", tp_ends="gathered"))
        assert cost.parameters_per_device == sum(run["local"].values())
        booked = {}
        for block, count in cost.stack:
            for row in block.rows:
                for c in row.collectives:
                    key = {"allreduce": "all_reduce", "allgather": "all_gather_into_tensor"}[c.kind]
                    side = "forward" if c.pass_ == "fwd" else "backward"
                    booked.setdefault(side, {})[key] = booked.get(side, {}).get(key, 0) + int(count)
        assert booked == {"forward": run["forward"], "backward": {k: v for k, v in run["backward"].items() if v}}
        assert run["logits"] == [BATCH, TOKENS, CONFIG["vocab_size"]]
        assert cost.head["lm_head"].act_out == BATCH * TOKENS * CONFIG["vocab_size"] * 4
