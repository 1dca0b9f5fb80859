"""Starting from a framework's settings: Megatron-LM launch scripts as published (tests/framework_inputs/,
each with its provenance in a header comment) read by ``summary --megatron-args``.

Oracles: the same layout typed by hand with ``--preset ... --set`` (the issue's "done when"), and
world sizes, micro-batches and parameter counts worked out by hand below from the scripts' numbers
and Megatron-LM's rules (``megatron/training/arguments.py``: ``data_parallel_size = world // (tp pp cp)``,
``num_microbatches = global // (micro dp)``, vocabulary padded to ``128 tp``; NullTokenizer's vocabulary
is ``--vocab-size + 1``)."""

import json
from fractions import Fraction
import pathlib
from dataclasses import replace

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models import config
from symbolic_cost.models.launch_script import read_launch
from symbolic_cost.models.megatron_args import megatron_setup
from summary_calls import summary_error, summary_json

INPUTS = pathlib.Path(__file__).resolve().parent / "framework_inputs"
GPT3 = str(INPUTS / "train_gpt3_175b_distributed.sh")
LLAMA = str(INPUTS / "train_llama3_8b_h100_fp8.sh")


def test_gpt3_script_needs_what_it_does_not_say(capsys):
    # torchrun starts 8 processes, and tp x pp = 8 x 16 = 128
    err = summary_error(capsys, "--megatron-args", GPT3, "--vocab-size", "50257")
    assert "world size 8 is not a multiple of" in err and "128" in err and len(err.strip().splitlines()) == 1
    # GPT2BPETokenizer's file is the script's third argument: GPT-2's own 50,257 tokens, said in a note
    got = summary_json(capsys, "--megatron-args", GPT3, "--devices", "1024")
    assert any("GPT2BPETokenizer: --vocab-file is not decided by the script; read as 50,257 tokens (GPT-2's" in note
               for note in got["notes"])
    assert got["parameters"] == summary_json(capsys, "--megatron-args", GPT3, "--devices", "1024",
                                      "--vocab-size", "50257")["parameters"]


def test_gpt3_script_equals_the_same_layout_given_with_set(capsys, monkeypatch):
    """1024 devices: d = 1024 / (8 x 16) = 8, micro-batches = 1536 / (1 x 8) = 192; --fp16, 1F1B, no
    sequence parallelism, --attention-backend auto (flash).  The preset's GPT-3 is the same network but
    pads no vocabulary; Megatron pads to 128 x tp (vocab_multiple=128)."""
    got = summary_json(capsys, "--megatron-args", GPT3, "--vocab-size", "50257", "--devices", "1024")
    original = config.preset
    monkeypatch.setattr(config, "preset", lambda name: replace(original(name), vocab_multiple=128))
    typed = summary_json(capsys, "--preset", "gpt3-175b", "--set", "b=1", "l=2048", "m1=8", "s1=1", "d=8", "p=16",
                  "n_micro=192", "--precision", "fp16", "--flash")
    assert got["notes"][1:] == ["--devices 1024 replaces the 8 processes the launch starts"]
    assert got["notes"][0].startswith("--rampup-batch-size")          # the script ramps its batch (line 43)
    assert {k: v for k, v in got.items() if k not in ("model", "notes")} == \
        {k: v for k, v in typed.items() if k != "model"}
    assert got["world_size"] == 1024
    e, layers = 12288, 96
    layer = 12 * e * e + 13 * e       # QKV 3e^2+3e, output e^2+e, MLP 8e^2+5e (f = 4e), two LayerNorms 4e
    # the model's parameters: the vocabulary padded to 128 x tp (50257 -> 51200: Megatron-LM's
    # _vocab_size_with_padding, one padded vocabulary for the model); learned positions 2048 x e; tied head
    assert got["parameters"] == layers * layer + 51200 * e + 2048 * e + 2 * e == 174_615_846_912
    # first pipeline rank of tp 8: 96/16 = 6 layers, each (12e^2 + 3e + 4e)/8 split + 6e replicated (the output
    # projection's and fc2's biases, two LayerNorms); the word table padded to 1024 (51200 rows) split in 8,
    # the position table whole
    rank0 = 6 * ((12 * e * e + 7 * e) // 8 + 6 * e) + 51200 * e // 8 + 2048 * e
    assert got["parameters_per_device"] == rank0


def test_gpt3_script_with_set_replaces_a_value_and_says_so(capsys):
    got = summary_json(capsys, "--megatron-args", GPT3, "--vocab-size", "50257", "--devices", "1024", "--set", "n_micro=96")
    assert "--set n_micro=96 replaces the file's n_micro=192" in got["notes"]


def test_llama3_script_as_published(capsys):
    """Mock data: NullTokenizer with --vocab-size 128256 (+1 end-of-document id = 128257, padded to 128
    x tp 1: 128384); 8 processes, tp = pp = cp = 1: d = 8, micro-batches = 128 / (1 x 8) = 16."""
    got = summary_json(capsys, "--megatron-args", LLAMA)
    assert got["world_size"] == 8
    e, f, layers, vocab = 4096, 14336, 32, 128384
    attention = 2 * e * e + 2 * e * 8 * 128        # Q and output e x e; K, V of 8 groups of 128 channels
    layer = attention + 3 * e * f + 2 * 2 * e       # SwiGLU's three products; two LayerNorms with biases
    assert got["parameters"] == layers * layer + 2 * vocab * e + 2 * e == 8_031_576_064
    assert got["parameters_per_device"] == got["parameters"]
    data = [c for c in got["collectives"] if c["dimension"] == "data"]
    assert data and all(c["group"] == 8 for c in data)
    assert any("grad-reduce-in-bf16" in note for note in got["notes"])
    assert main(["summary", "--megatron-args", LLAMA]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "b=1 l=8192 m1=1 s1=1 d=8 p=1 micro-batches=16 bf16" in head and "flash=True" in head


def test_llama3_script_policy(capsys):
    from symbolic_cost.cli import build_parser
    from symbolic_cost.cli.summary import whole_model
    _, training, _, _ = whole_model(build_parser().parse_args(["summary", "--megatron-args", LLAMA]))
    assert (training.fp8, training.distributed_optimizer, training.precision) == ("fp8-params", True, "bf16")
    assert (training.overlap.grad_reduce, training.overlap.param_gather, training.overlap.tensor) == (True, True, False)
    assert training.s1 == 1        # --sequence-parallel with tp 1: Megatron turns it off


@pytest.mark.parametrize("extra,refused", [
    (["--recompute", "full"], "--recompute"), (["--precision", "fp32"], "--precision"), (["--flash"], "--flash"),
    (["--preset", "gpt2"], "not allowed"), (["--overlap", "grad"], "--overlap")])
def test_options_the_file_decides_are_refused(capsys, extra, refused):
    assert refused in summary_error(capsys, "--megatron-args", LLAMA, *extra)


def test_devices_and_vocab_size_need_the_file(capsys):
    assert "--devices applies to a framework file (--megatron-args" in summary_error(capsys, "--preset", "gpt2", "--devices", "8")


def _program(tmp_path, text):
    path = tmp_path / "args.txt"
    path.write_text(text)
    return str(path)


def test_an_arguments_file_and_megatron_rules(tmp_path, capsys):
    base = ("--num-layers 4 --hidden-size 240 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 "
            "--micro-batch-size 2 --tokenizer-type NullTokenizer --vocab-size 999 --swiglu ")
    got = summary_json(capsys, "--megatron-args", _program(tmp_path, base), "--devices", "2")
    # ffn = int(4 x 240 x 2/3 / 64) x 64 = 10 x 64 = 640; vocab 999 + 1 = 1000 padded to 1024; biases on
    e, f = 240, 640
    layer = (3 * e * e + 3 * e) + (e * e + e) + (e * 2 * f + 2 * f) + (f * e + e) + 2 * 2 * e
    assert got["parameters"] == 4 * layer + 1024 * e + 64 * e + 2 * e
    assert got["world_size"] == 2 and got["predicted"]
    for words, refused in (("--context-parallel-size 4", "world size 2 is not a multiple of"),
                           ("--is-hybrid-model", "--is-hybrid-model"),
                           ("--global-batch-size 6", "--global-batch-size"), ("--seq-length 128", "--seq-length")):
        text = base.replace("--seq-length 64 ", "") + words if "seq-length" in words else base + words
        assert refused in summary_error(capsys, "--megatron-args", _program(tmp_path, text), "--devices", "2")


def test_context_parallelism_from_the_arguments(tmp_path, capsys):
    """--context-parallel-size 2 on 8 devices: d = 8 / (1 x 1 x 2) = 4 and micro-batches = 16 / (2 x 4) = 2
    (Megatron-LM's rules), the same run as the file without it given cp=2 d=4 by hand; --cp-comm-type
    picks the variant (p2p: ring, the default; a2a: Ulysses' all-to-alls; all_gather), a2a+p2p and mixed
    kinds are refused by name."""
    fp32 = ("--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 "
            "--micro-batch-size 2 --global-batch-size 16 --tokenizer-type NullTokenizer --vocab-size 999 --swiglu ")
    # in fp32 Transformer Engine has no attention for context parallelism (flash and fused take 16-bit inputs,
    # its unfused one no context parallelism: get_attention_backend's filters)
    assert "in fp32" in summary_error(capsys, "--megatron-args", _program(tmp_path, fp32 + "--context-parallel-size 2"),
                               "--devices", "8")
    base = fp32 + "--bf16 "
    plain = summary_json(capsys, "--megatron-args", _program(tmp_path, base), "--devices", "8", "--set", "cp=2", "d=4",
                  "n_micro=2")
    ring = summary_json(capsys, "--megatron-args", _program(tmp_path, base + "--context-parallel-size 2"), "--devices", "8")
    assert ring["world_size"] == 8
    assert {k: v for k, v in ring.items() if k != "notes"} == {k: v for k, v in plain.items() if k != "notes"}
    assert main(["summary", "--megatron-args", _program(tmp_path, base + "--context-parallel-size 2"),
                 "--devices", "8"]) == 0
    assert "cp=2 (ring) d=4 p=1 micro-batches=2 " in capsys.readouterr().out
    for kind, variant in (("a2a", "ulysses"), ("all_gather", "all-gather"), ("p2p p2p p2p p2p", "ring")):
        text = base + "--context-parallel-size 2 --cp-comm-type " + kind
        assert main(["summary", "--megatron-args", _program(tmp_path, text), "--devices", "8"]) == 0
        assert f"cp=2 ({variant}) d=4" in capsys.readouterr().out
    for kind, refused in (("a2a+p2p", "--cp-comm-type a2a+p2p"), ("p2p a2a", "one kind for every layer")):
        text = base + "--context-parallel-size 2 --cp-comm-type " + kind
        assert refused in summary_error(capsys, "--megatron-args", _program(tmp_path, text), "--devices", "8")
    err = summary_error(capsys, "--megatron-args", _program(tmp_path, base + "--context-parallel-size 2"), "--devices", "8",
                 "--cp-variant", "ulysses")
    assert "--cp-variant" in err


def test_script_reader_refuses_an_undecidable_launch():
    script = 'if [ -f x ]; then\n  torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2\nfi\n'
    with pytest.raises(InputError, match="cannot decide"):
        read_launch(script, "s")
    script = 'A=(--x 1)\nif [[ "${B:-}" == "" ]]; then\n  A+=("--y 2")\nelse\n  A+=(--z)\nfi\npython pretrain_gpt.py ${A[@]}\n'
    launch = read_launch(script, "s")
    assert (launch.launcher, launch.program) == (["python"], ["--x", "1", "--y", "2"])


# search and sweep start from the file.  Oracle for the model: transformers' GPT-2 of the same shape (LayerNorm,
# GELU, biases, learned positions, tied head, dropout 0.1) read from a config.json: NullTokenizer's 1023 + 1 = 1024
# rows, a multiple of 128 x m1 for every m1 <= 8, so Megatron pads nothing (summary equal, checked below).
SMALL = ("--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 "
         "--micro-batch-size 2 --global-batch-size 16 --tokenizer-type NullTokenizer --vocab-size 1023 --bf16 ")
GPT2 = {"model_type": "gpt2", "n_embd": 256, "n_layer": 4, "n_head": 4, "n_positions": 64, "vocab_size": 1024,
        "activation_function": "gelu"}


def _gpt2(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT2))
    return str(path)


def _out(capsys, *words):
    assert main(list(words)) == 0
    return capsys.readouterr().out


def test_small_arguments_equal_gpt2_of_the_same_shape(tmp_path, capsys):
    """4 devices: d = 4, micro-batches = 16 / (2 x 4) = 2; --bf16, attention backend auto (flash)."""
    got = summary_json(capsys, "--megatron-args", _program(tmp_path, SMALL), "--devices", "4")
    typed = summary_json(capsys, "--hf-config", _gpt2(tmp_path), "--set", "b=2", "l=64", "d=4", "n_micro=2",
                  "--precision", "bf16", "--flash")
    assert {k: v for k, v in got.items() if k not in ("model", "notes")} == \
        {k: v for k, v in typed.items() if k != "model"}


def test_search_starts_from_the_file(tmp_path, capsys):
    """The file gives the model, 4 devices, the global batch 2 x 4 x 2 = 16, the sequence 64, bf16 and flash:
    the same search as those typed beside a GPT-2 of the same shape."""
    got = json.loads(_out(capsys, "search", "--megatron-args", _program(tmp_path, SMALL), "--devices", "4", "--json"))
    typed = json.loads(_out(capsys, "search", "--hf-config", _gpt2(tmp_path), "--devices", "4", "--global-batch",
                            "16", "--seq", "64", "--precision", "bf16", "--flash", "--json"))
    assert (got["devices"], got["global_batch"], got["seq"]) == (4, 16, 64)
    assert got["evaluated"] == typed["evaluated"] > 0 and len(got["best"]) == len(typed["best"]) == 10
    for row, same in zip(got["best"], typed["best"]):      # the padded vocabulary's formula rounds apart
        assert row.keys() == same.keys()
        assert all(row[k] == same[k] if isinstance(row[k], str) else row[k] == pytest.approx(same[k], rel=1e-12)
                   for k in row)
    replaced = json.loads(_out(capsys, "search", "--megatron-args", _program(tmp_path, SMALL), "--devices", "4",
                               "--global-batch", "32", "--json"))
    assert replaced["global_batch"] == 32 and "--global-batch 32 replaces the file's 16" in replaced["notes"]


def test_search_keeps_the_files_policy(tmp_path, capsys):
    """--use-distributed-optimizer, --overlap-grad-reduce and FP8 stay in every layout searched: the same as
    the library's search given them as its fixed policy."""
    from symbolic_cost.models.training import Overlap
    from symbolic_cost.numeric.search import search
    from symbolic_cost.models.megatron_args import megatron_setup
    from symbolic_cost.models.launch_script import read_launch
    text = SMALL + "--use-distributed-optimizer --overlap-grad-reduce --fp8-format hybrid"
    got = json.loads(_out(capsys, "search", "--megatron-args", _program(tmp_path, text), "--devices", "4", "--ideal",
                          "--json"))
    arch = megatron_setup(read_launch(text, "x"), "x", world=4).arch
    found = search(arch, 4, "h100", global_batch=16, seq=64, flash=True, precision="bf16", zero=0,
                   micro_batch_sizes=(1, 2, 4, 8), policy=dict(distributed_optimizer=True, fp8="delayed",
                                                               overlap=Overlap(grad_reduce=True)))
    plain = json.loads(_out(capsys, "search", "--megatron-args", _program(tmp_path, SMALL), "--devices", "4", "--ideal",
                            "--json"))
    # JSON writes 10 decimals: the step time (some 1e-5 s) to 1e-10
    assert [r["total"] for r in got["best"]] == pytest.approx(list(found.best["total"]), rel=0, abs=1e-10)
    assert [r["memory"] for r in got["best"]] == pytest.approx(list(found.best["memory"]), rel=1e-12)
    assert [r["memory"] for r in got["best"]] != [r["memory"] for r in plain["best"]]


def test_search_without_a_file_needs_devices(capsys):
    assert main(["search", "--preset", "gpt2"]) == 2
    assert "--devices" in capsys.readouterr().err


def test_sweep_defaults_are_the_files_values(tmp_path, capsys):
    """The grid replaces the file's b; every other value (l=64, d=4, n_micro=2) and the policy (bf16, flash,
    the distributed optimizer, overlapped gradient reduction) are the file's: the same CSV as typed with --set."""
    text = SMALL + "--use-distributed-optimizer --overlap-grad-reduce"
    assert main(["sweep", "--megatron-args", _program(tmp_path, text), "--devices", "4", "--grid", "b=1,2,4"]) == 0
    got, err = capsys.readouterr()
    assert err == "note: --grid b replaces the file's b=2\n"
    typed = _out(capsys, "sweep", "--hf-config", _gpt2(tmp_path), "--set", "l=64", "d=4", "n_micro=2", "--precision",
                 "bf16", "--flash", "--distributed-optimizer", "--overlap", "grad", "--grid", "b=1,2,4")
    assert got == typed and len(got.splitlines()) == 4


def test_sweep_row_of_the_files_layout_equals_summary(tmp_path, capsys):
    """FP8 (which sweep has no option for) comes from the file: the row at the file's own b equals summary."""
    text = SMALL + "--fp8-format hybrid"
    path = _program(tmp_path, text)
    row = _out(capsys, "sweep", "--megatron-args", path, "--devices", "4", "--grid", "b=2",
               "--field", "memory_bytes,weight_bytes").splitlines()[1].split(",")
    whole = summary_json(capsys, "--megatron-args", path, "--devices", "4")
    assert [float(x) for x in row] == [2, whole["memory_bytes"], whole["weight_bytes"]]
    plain = summary_json(capsys, "--megatron-args", _program(tmp_path, SMALL), "--devices", "4")
    assert plain["weight_bytes"] != whole["weight_bytes"]


# torchtitan job TOMLs as published (tests/framework_inputs/*.toml, provenance in their headers).  Oracles: the
# same layout typed with --set beside a Hugging Face config.json of the same Llama 3 (transformers' LlamaForCausalLM
# has torchtitan's modules: wq/wk/wv/wo, w1/w2/w3, two RMSNorms a layer, a final norm, an untied output), and
# world sizes, micro-batches, widths and parameter counts worked out by hand from torchtitan's rules
# (ParallelDims: replicate x shard x tp x pp = world, shard -1 the rest; gradient accumulation
# global / (local x dp); FeedForward: int(2 x 4 dim / 3), x ffn_dim_multiplier, rounded up to multiple_of).
TITAN = {name: str(INPUTS / f"{name}.toml") for name in ("llama3_8b", "llama3_70b", "llama3_405b", "debug_model")}


def _llama3(tmp_path, e, f, layers, heads, kv=8, vocab=128256, context=8192):
    """The config.json of meta-llama/Meta-Llama-3-{8B,70B} (their published keys; other sizes for the debug
    model)."""
    path = tmp_path / f"llama3-{e}.json"
    path.write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": e,
        "initializer_range": 0.02, "intermediate_size": f, "max_position_embeddings": context, "model_type": "llama",
        "num_attention_heads": heads, "num_hidden_layers": layers, "num_key_value_heads": kv, "pretraining_tp": 1,
        "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 500000.0, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": vocab}))
    return str(path)


def _llama3_parameters(e, f, layers):
    """Hand count: 2 e^2 (wq, wo) + 2 e x 8 x 128 (wk, wv) + 3 e f + 2 e norms a layer; embedding and output
    128256 x e each; the final norm e."""
    return layers * (2 * e * e + 2 * e * 1024 + 3 * e * f + 2 * e) + 2 * 128256 * e + e


TITAN_FLASH = ("--flash", "--attention-kernel", "flash-attention-2")
"""torchtitan's attention on the default system, H100: PyTorch's SDPA, FlashAttention-2 first."""


def _same(got, typed):
    assert {k: v for k, v in got.items() if k not in ("model", "notes")} == \
        {k: v for k, v in typed.items() if k != "model"}


def test_torchtitan_70b_as_published(tmp_path, capsys):
    """64 processes (the file's "preset for 64 A100 GPUs"): tp 8, shard -1 = 64 / 8 = 8 (FSDP: ZeRO-3 over d = 8);
    local batch 8, global 8 x 8 = 64: one micro-batch of 8; full recomputation; bf16 parameters."""
    got = summary_json(capsys, "--torchtitan", TITAN["llama3_70b"], "--devices", "64")
    f = 28672       # 4 x 8192 = 32768; int(2/3 x) = 21845; int(1.3 x) = 28398; up to a multiple of 4096
    assert got["world_size"] == 64
    assert got["parameters"] == _llama3_parameters(8192, f, 80) == 70_553_706_496
    typed = summary_json(capsys, "--hf-config", _llama3(tmp_path, 8192, f, 80, 64), "--set", "b=8", "l=8192", "m1=8",
                  "s1=8", "d=8", "n_micro=1", "--zero", "3", "--recompute", "full", "--precision", "bf16", *TITAN_FLASH,
                  "--overlap", "grad,param", "--optimizer", "adamw")
    _same(got, typed)
    assert any("mixed_precision_reduce" in note for note in got["notes"])
    assert main(["summary", "--torchtitan", TITAN["llama3_70b"], "--devices", "64"]) == 0
    assert "b=8 l=8192 m1=8 s1=8 d=8 p=1 micro-batches=1 bf16 zero=3 recompute=full" in capsys.readouterr().out


def test_torchtitan_8b(tmp_path, capsys):
    """As published: op-level selective recomputation (recompute op), 64 processes, shard 64, local batch 1: one
    micro-batch of 1; and with mode "full" in its place, full recomputation."""
    f = 14336       # 16384 -> 10922 -> int(1.3 x) = 14198 -> up to a multiple of 1024
    plain = ["--set", "b=1", "l=8192", "d=64", "n_micro=1", "--zero", "3", "--precision", "bf16", *TITAN_FLASH,
             "--overlap", "grad,param", "--optimizer", "adamw"]
    got = summary_json(capsys, "--torchtitan", TITAN["llama3_8b"], "--devices", "64")
    assert got["parameters"] == _llama3_parameters(4096, f, 32) == 8_030_261_248
    _same(got, summary_json(capsys, "--hf-config", _llama3(tmp_path, 4096, f, 32, 32), *plain, "--recompute", "op"))
    assert any("selective_ac_option op" in note for note in got["notes"])
    assert main(["summary", "--torchtitan", TITAN["llama3_8b"], "--devices", "64"]) == 0
    assert "recompute=op" in capsys.readouterr().out
    text = pathlib.Path(TITAN["llama3_8b"]).read_text().replace('mode = "selective"', 'mode = "full"')
    path = tmp_path / "llama3_8b_full.toml"
    path.write_text(text)
    got = summary_json(capsys, "--torchtitan", str(path), "--devices", "64")
    _same(got, summary_json(capsys, "--hf-config", _llama3(tmp_path, 4096, f, 32, 32), *plain, "--recompute", "full"))
    # under tensor parallelism torchtitan's policy also keeps the reduce-scatter outputs: refused by name
    path.write_text(pathlib.Path(TITAN["llama3_8b"]).read_text().replace("tensor_parallel_degree = 1",
                                                                          "tensor_parallel_degree = 8"))
    assert "recompute='op'" in summary_error(capsys, "--torchtitan", str(path), "--devices", "64")
    # search varies m1, where the policy is counted on one rank only: refused, saying what to do instead
    assert main(["search", "--torchtitan", TITAN["llama3_8b"], "--devices", "64", "--top", "1"]) == 2
    assert "search with recompute 'full' or 'selective'" in capsys.readouterr().err


@pytest.mark.parametrize("system, library", [("h100", "flash-attention-2"), ("a100", "flash-attention-2"),
                                             ("b200", "cudnn")])
def test_torchtitan_times_the_attention_its_sdpa_runs_on_the_gpu(tmp_path, capsys, system, library):
    """torchtitan's ScaledDotProductAttention keeps PyTorch's backend order, FlashAttention-2 first, below
    compute capability 10.0 and puts cuDNN first from it (torchtitan/models/attention.py, _init_backend)."""
    plain = ["--set", "b=1", "l=8192", "d=64", "n_micro=1", "--zero", "3", "--precision", "bf16", "--flash",
             "--overlap", "grad,param", "--optimizer", "adamw", "--recompute", "op", "--system", system]
    got = summary_json(capsys, "--torchtitan", TITAN["llama3_8b"], "--devices", "64", "--system", system)
    model = _llama3(tmp_path, 4096, 14336, 32, 32)
    _same(got, summary_json(capsys, "--hf-config", model, *plain, "--attention-kernel", library))
    assert any(f"attention timed as {library}" in note for note in got["notes"])
    if system == "h100":          # H100's own kernel is cuDNN's: the torchtitan run is slower than that
        assert got["step_time_s"]["total"] > summary_json(capsys, "--hf-config", model, *plain)["step_time_s"]["total"]


def test_torchtitan_debug_model(tmp_path, capsys):
    """dim 256, 6 layers, 16 heads (no GQA), f = int(2 x 1024 / 3) = 682 up to 768; selective_ac_option '2':
    every second layer recomputed whole, 3 of 6; local batch 8 on 8 processes."""
    got = summary_json(capsys, "--torchtitan", TITAN["debug_model"], "--devices", "8", "--vocab-size", "2000")
    e, f = 256, 768
    assert got["parameters"] == 6 * (4 * e * e + 3 * e * f + 2 * e) + 2 * 2000 * e + e
    typed = summary_json(capsys, "--hf-config", _llama3(tmp_path, e, f, 6, 16, kv=16, vocab=2000, context=2048), "--set",
                  "b=8", "l=2048", "d=8", "n_micro=1", "--zero", "3", "--recompute", "full", "--recompute-method",
                  "block", "--recompute-layers", "3", "--precision", "bf16", *TITAN_FLASH, "--overlap", "grad,param",
                  "--optimizer", "adamw")
    _same(got, typed)
    assert main(["summary", "--torchtitan", TITAN["debug_model"], "--devices", "8", "--vocab-size", "2000"]) == 0
    out = capsys.readouterr().out
    assert "b=8 l=2048 m1=1 s1=1 d=8 p=1 micro-batches=1 bf16 zero=3 recompute=full" in out
    assert "every 2th layer, 3 of a stage" in out
    from symbolic_cost.cli import build_parser
    from symbolic_cost.cli.summary import whole_model
    _, training, _, _ = whole_model(build_parser().parse_args(
        ["summary", "--torchtitan", TITAN["debug_model"], "--devices", "8", "--vocab-size", "2000"]))
    assert (training.recompute, training.recompute_method, training.recompute_layers) == ("full", "block", 3)
    assert "--vocab-size" in summary_error(capsys, "--torchtitan", TITAN["debug_model"], "--devices", "8")


def test_torchtitan_pipeline_stages(tmp_path, capsys):
    """torchtitan's cut (generate_llm_fqn_per_model_part, embedding and output weighing one layer each): 32
    layers on 3 stages are 34 weighted, 11 + 1 extra on the first: [12 - 1, 11, 11 - 1] = [11, 11, 10]; on 4
    stages [9 - 1, 9, 8, 8 - 1] = [8, 9, 8, 7], whose unequal middle stages are Megatron's layout string of the
    same stages.  Local batch 8 in micro-batches of 2: 4 a step; 24 processes: shard 24 / 3 = 8."""
    from symbolic_cost.models.torchtitan import stage_layers
    assert stage_layers(32, 3, 1, 1) == [11, 11, 10] and stage_layers(32, 4, 1, 1) == [8, 9, 8, 7]
    assert stage_layers(32, 2, 1, 1) == [16, 16]
    text = pathlib.Path(TITAN["llama3_8b"]).read_text().replace('mode = "selective"', 'mode = "none"').replace(
        "batch_size = 1", "batch_size = 8").replace("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 3\n"
                                                   "pipeline_parallel_microbatch_size = 2\n"
                                                   'fsdp_reshard_after_forward = "always"')
    path = tmp_path / "pp.toml"
    path.write_text(text)
    got = summary_json(capsys, "--torchtitan", str(path), "--devices", "24")
    typed = summary_json(capsys, "--hf-config", _llama3(tmp_path, 4096, 14336, 32, 32), "--set", "b=2", "l=8192", "d=8",
                  "p=3", "n_micro=4", "--zero", "3", "--precision", "bf16", *TITAN_FLASH, "--overlap", "grad,param",
                  "--optimizer", "adamw", "--first-stage-layers", "11", "--last-stage-layers", "10")
    _same(got, typed)
    # 4 stages, unequal in the middle: Megatron's layout string of the same stages
    path.write_text(text.replace("pipeline_parallel_degree = 3", "pipeline_parallel_degree = 4"))
    typed4 = ["--set", "b=2", "l=8192", "d=8", "p=4", "n_micro=4", "--zero", "3", "--precision", "bf16", *TITAN_FLASH,
              "--overlap", "grad,param", "--optimizer", "adamw"]
    _same(summary_json(capsys, "--torchtitan", str(path), "--devices", "32"),
          summary_json(capsys, "--hf-config", _llama3(tmp_path, 4096, 14336, 32, 32), *typed4,
                "--pipeline-layout", "E" + "t" * 8 + "|" + "t" * 9 + "|" + "t" * 8 + "|" + "t" * 7 + "L"))
    # Interleaved1F1B: two stages a rank by default, 34 weighted layers over 8 stages = [5, 5, 4, 4, 4, 4, 4, 4]
    # less the embedding's and the output's weight, stage s on rank s mod 4
    path.write_text(text.replace("pipeline_parallel_degree = 3", 'pipeline_parallel_degree = 4\n'
                                 'pipeline_parallel_schedule = "Interleaved1F1B"'))
    stages = [4, 5, 4, 4, 4, 4, 4, 3]
    layout = "|".join(("E" if i == 0 else "") + "t" * c + ("L" if i == 7 else "") for i, c in enumerate(stages))
    _same(summary_json(capsys, "--torchtitan", str(path), "--devices", "32"),
          summary_json(capsys, "--hf-config", _llama3(tmp_path, 4096, 14336, 32, 32), *typed4, "--schedule", "interleaved",
                "--virtual-stages", "2", "--pipeline-layout", layout))
    # torchtitan's default with pipelining keeps the gathered weights from forward to backward
    path.write_text(text.replace('fsdp_reshard_after_forward = "always"', ""))
    kept = summary_json(capsys, "--torchtitan", str(path), "--devices", "24")
    typed = summary_json(capsys, "--hf-config", _llama3(tmp_path, 4096, 14336, 32, 32), "--set", "b=2", "l=8192", "d=8",
                  "p=3", "n_micro=4", "--zero", "3", "--precision", "bf16", *TITAN_FLASH, "--overlap", "grad,param",
                  "--optimizer", "adamw", "--first-stage-layers", "11", "--last-stage-layers", "10",
                  "--no-reshard-after-forward")
    _same(kept, typed)
    assert kept["peak"] != got["peak"]


def test_torchtitan_hsdp(tmp_path, capsys):
    """data_parallel_replicate_degree 2 with shard -1 on 64 processes: shard 64 / 2 = 32, d = 2 x 32 = 64 (HSDP:
    the state sharded over groups of 32, replicated twice), the same as --zero 3 --shard 32 typed."""
    text = pathlib.Path(TITAN["llama3_8b"]).read_text().replace('mode = "selective"', 'mode = "none"').replace(
        "data_parallel_replicate_degree = 1", "data_parallel_replicate_degree = 2")
    path = tmp_path / "hsdp.toml"
    path.write_text(text)
    got = summary_json(capsys, "--torchtitan", str(path), "--devices", "64")
    typed = summary_json(capsys, "--hf-config", _llama3(tmp_path, 4096, 14336, 32, 32), "--set", "b=1", "l=8192", "d=64",
                  "n_micro=1", "--zero", "3", "--shard", "32", "--precision", "bf16", *TITAN_FLASH, "--overlap",
                  "grad,param", "--optimizer", "adamw")
    _same(got, typed)
    assert "--shard" in summary_error(capsys, "--torchtitan", str(path), "--devices", "64", "--shard", "8")


@pytest.mark.parametrize("change,refused", [
    (("context_parallel_degree = 1", "context_parallel_degree = 2\ncontext_parallel_load_balancer = \"none\""),
     "context_parallel_load_balancer"),
    (("dataset = \"c4\"", "dataset = \"c4\"\nenable_cpu_offload = true"), "enable_cpu_offload"),
    (("dataset = \"c4\"", "dataset = \"c4\"\nunknown_knob = 3"), "[training] unknown_knob"),
    (("[job]", "[mystery]\nx = 1\n\n[job]"), "[mystery] x"),
    (("flavor = \"8B\"", "flavor = \"3B\""), "[model] flavor '3B'"),
    (("name = \"AdamW\"", "name = \"Muon\""), "[optimizer] name 'Muon'"),
    (("batch_size = 1", "batch_size = 1\nglobal_batch_size = 100"), "global_batch_size 100"),
])
def test_torchtitan_refusals(tmp_path, capsys, change, refused):
    text = pathlib.Path(TITAN["llama3_8b"]).read_text().replace('mode = "selective"', 'mode = "none"')
    path = tmp_path / "job.toml"
    path.write_text(text.replace(*change))
    assert refused in summary_error(capsys, "--torchtitan", str(path), "--devices", "64")


def test_torchtitan_405b_reads_float8_with_fp8_gathers(capsys, tmp_path):
    """The published llama3_405b.toml: converters = ["float8"] with enable_fsdp_float8_all_gather = true,
    TP 8 over 128 processes, FSDP over the other 16.  Gathered in FP8, each of the FSDP all-gathers moves
    one byte less for every element of a rank's weight matrices: per layer q and o 16384^2, k and v
    16384 x 1024, gate, up and down 16384 x 53248 (126 layers), an eighth of them on a tensor rank; a
    rank receives the other 15 of the 16 shards (``volume_bytes``)."""
    got = json.loads(_out(capsys, "summary", "--torchtitan", TITAN["llama3_405b"], "--devices", "128", "--json"))
    layout = got["layout"]
    assert (layout["fp8"], layout["fp8_gather"], layout["zero"], layout["m1"], layout["d"]) == (
        "torchao-tensorwise", True, 3, 8, 16)
    path = tmp_path / "no_fp8_gather.toml"
    path.write_text(pathlib.Path(TITAN["llama3_405b"]).read_text().replace(
        "enable_fsdp_float8_all_gather = true", "enable_fsdp_float8_all_gather = false"))
    plain = json.loads(_out(capsys, "summary", "--torchtitan", str(path), "--devices", "128", "--json"))
    gathers = [c for c in got["collectives"] if c["dimension"] == "data" and c["kind"] == "allgather"]
    bf16 = [c for c in plain["collectives"] if c["dimension"] == "data" and c["kind"] == "allgather"]
    matrices = 126 * (2 * 16384 ** 2 + 2 * 16384 * 1024 + 3 * 16384 * 53248) // 8 * 15 // 16
    assert len(gathers) == len(bf16) == 2
    assert all(b["volume_bytes"] - g["volume_bytes"] == matrices for g, b in zip(gathers, bf16))
    # torchtitan before e0d2de6 (2025-04-18) split a string on commas (config_manager's string_list): 785c34c's
    # llama3_405b.toml writes converters = "float8", the same run
    (tmp_path / "string.toml").write_text(pathlib.Path(TITAN["llama3_405b"]).read_text().replace(
        'converters = ["float8"]', 'converters = "float8"'))
    written = json.loads(_out(capsys, "summary", "--torchtitan", str(tmp_path / "string.toml"), "--devices", "128",
                              "--json"))
    assert (written["layout"], written["memory_bytes"]) == (got["layout"], got["memory_bytes"])


def test_torchtitan_file_refusals(capsys, tmp_path):
    text = pathlib.Path(TITAN["llama3_405b"]).read_text()
    for change, refused in ((('converters = ["float8"]', 'converters = ["mx"]'), "[model] converters"),
                            (("[float8]", '[float8]\nrecipe_name = "rowwise"'), "tensor-wise scaling only"),
                            (("[float8]", '[float8]\nrecipe_name = "rowwise_with_gw_hp"'), "weight gradients"),
                            (("[float8]", "[float8]\nemulate = true"), "emulate"),
                            # a list in the list (found by fuzzing: it ended in a TypeError)
                            (('filter_fqns = ["output"]', "filter_fqns = [[]]"), "[float8] filter_fqns [[]]"),
                            (('converters = ["float8"]', "converters = [[]]"), "[model] converters [[]]")):
        (tmp_path / "job.toml").write_text(text.replace(*change))
        assert refused in summary_error(capsys, "--torchtitan", str(tmp_path / "job.toml"), "--devices", "128")
    assert "give the number of processes with --devices" in summary_error(capsys, "--torchtitan", TITAN["llama3_70b"])
    assert "--zero" in summary_error(capsys, "--torchtitan", TITAN["llama3_70b"], "--devices", "64", "--zero", "1")
    assert "--optimizer" in summary_error(capsys, "--torchtitan", TITAN["llama3_70b"], "--devices", "64", "--optimizer", "sgd")
    assert "world size 60 is not a multiple" in summary_error(capsys, "--torchtitan", TITAN["llama3_70b"], "--devices", "60")


def test_torchtitan_search_and_sweep(capsys):
    """search starts from the debug model's 8 processes, global batch 64 and sequence 2048, FSDP (its --zero);
    sweep's row at the file's own values equals summary."""
    words = ["--torchtitan", TITAN["debug_model"], "--vocab-size", "2000", "--devices", "8"]
    found = json.loads(_out(capsys, "search", *words, "--json"))
    assert (found["devices"], found["global_batch"], found["seq"]) == (8, 64, 2048)
    assert found["best"] and {row["zero"] for row in found["best"]} == {3}
    row = _out(capsys, "sweep", *words, "--grid", "b=8", "--field", "memory_bytes,weight_bytes").splitlines()[1]
    whole = summary_json(capsys, *words)
    assert [float(x) for x in row.split(",")] == [8, whole["memory_bytes"], whole["weight_bytes"]]


# DeepSpeed configs from DeepSpeedExamples (tests/framework_inputs/*.json, provenance in PROVENANCE.md) beside a
# model given apart.  Oracles: the same training typed with --set and the options, and DeepSpeed's batch rule worked
# by hand (deepspeed/runtime/config.py: train_batch_size = micro x accumulation x world, the missing one derived).
DS = {name: str(INPUTS / f"{name}.json") for name in ("ds_zero_stage_3_config", "ds_zero2_cpu_offload_config",
                                                      "ds_config_fp16_z3", "ds_zero_stage_infinity_config")}


def test_deepspeed_zero3_equals_the_typed_layout(tmp_path, capsys):
    """micro 8, accumulation 1, 8 devices given: train batch 64; ZeRO-3 with overlap_comm (DeepSpeed's default
    at stage 3: gathers and reduce-scatters behind compute), fp16."""
    model = _llama3(tmp_path, 4096, 14336, 32, 32)
    got = summary_json(capsys, "--hf-config", model, "--deepspeed", DS["ds_zero_stage_3_config"], "--devices", "8",
                "--set", "l=2048")
    typed = summary_json(capsys, "--hf-config", model, "--set", "b=8", "l=2048", "d=8", "n_micro=1", "--zero", "3",
                  "--precision", "fp16", "--overlap", "grad,param")
    _same(got, typed)
    assert got["world_size"] == 8 and any("stage3_param_persistence_threshold" in n for n in got["notes"])
    assert main(["summary", "--hf-config", model, "--deepspeed", DS["ds_zero_stage_3_config"], "--devices", "8"]) == 0
    assert "b=8 l=8192 m1=1 s1=1 d=8 p=1 micro-batches=1 fp16 zero=3" in capsys.readouterr().out


def test_deepspeed_offload_and_derived_micro_batch(capsys):
    """train_batch_size 16, accumulation 1 on 8 devices: micro = 16 / (1 x 8) = 2; stage 2 with the older
    cpu_offload (the optimizer on the host), Adam, fp16; on 3 devices 16 is not a multiple of 3."""
    got = summary_json(capsys, "--preset", "gpt2", "--deepspeed", DS["ds_zero2_cpu_offload_config"], "--devices", "8")
    typed = summary_json(capsys, "--preset", "gpt2", "--set", "b=2", "d=8", "n_micro=1", "--zero", "2", "--offload",
                  "optimizer", "--optimizer", "adam", "--precision", "fp16")     # overlap_comm: false below stage 3
    _same(got, typed)
    assert "host" in got
    assert "not a multiple of 3" in summary_error(capsys, "--preset", "gpt2", "--deepspeed", DS["ds_zero2_cpu_offload_config"],
                                           "--devices", "3")


def test_deepspeed_auto_values_come_from_the_command_line(capsys):
    """The Trainer's "auto" micro-batch is --set b=; without it the key is refused by name."""
    assert "train_micro_batch_size_per_gpu is \"auto\"" in summary_error(capsys, "--preset", "gpt2", "--deepspeed",
                                                                   DS["ds_config_fp16_z3"], "--devices", "8")
    got = summary_json(capsys, "--preset", "gpt2", "--deepspeed", DS["ds_config_fp16_z3"], "--devices", "8", "--set", "b=4")
    typed = summary_json(capsys, "--preset", "gpt2", "--set", "b=4", "d=8", "n_micro=1", "--zero", "3", "--precision", "fp16",
                  "--overlap", "grad,param")
    _same(got, typed)
    assert not any("replaces" in n for n in got["notes"])


@pytest.mark.parametrize("words,refused", [
    (["--deepspeed", DS["ds_zero_stage_infinity_config"], "--devices", "8"], "'nvme'"),
    (["--deepspeed", DS["ds_zero_stage_3_config"], "--devices", "8", "--zero", "1"], "--zero"),
    (["--deepspeed", DS["ds_zero_stage_3_config"], "--devices", "8", "--precision", "bf16"], "--precision"),
    (["--deepspeed", DS["ds_zero_stage_3_config"]], "--devices"),
    (["--deepspeed", DS["ds_zero_stage_3_config"], "--megatron-args", LLAMA], "give one framework file"),
])
def test_deepspeed_refusals(capsys, words, refused):
    assert refused in summary_error(capsys, "--preset", "gpt2", *words) if "--megatron-args" not in words else \
        refused in summary_error(capsys, *words)


def test_deepspeed_batch_rule_and_unknown_keys(tmp_path, capsys):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 8,
                                "gradient_accumulation_steps": 1}))
    assert "DeepSpeed's rule" in summary_error(capsys, "--preset", "gpt2", "--deepspeed", str(path))
    path.write_text(json.dumps({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8,
                                "gradient_accumulation_steps": 2}))
    assert summary_json(capsys, "--preset", "gpt2", "--deepspeed", str(path))["world_size"] == 4    # 64 / (8 x 2)
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 8, "zero_optimization": {"stage": 1,
                                                                                            "zero_hpz_partition_size": 8}}))
    assert "zero_optimization.zero_hpz_partition_size" in summary_error(capsys, "--preset", "gpt2", "--deepspeed", str(path),
                                                                 "--devices", "8")



@pytest.mark.parametrize("extra, said", [
    # the survey of published files: each was refused as "a key this reader does not read", without its reason
    ({"compile": {"disable": False, "backend": "inductor"}}, "fuses and moves kernels"),       # axolotl
    ({"quantize_training": {"enabled": True}}, "quantisation-aware training (MoQ)"),
    ({"fp16": {"enabled": True, "fp16_master_weights_and_grads": True}}, "fp16 master weights"),
    ({"zero_optimization": {"stage": 2, "zenflow": {"topk_ratio": 0.1}}}, "ZenFlow's optimizer steps"),
])
def test_deepspeed_sections_the_library_does_not_model_say_why(tmp_path, capsys, extra, said):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, **extra}))
    assert said in summary_error(capsys, "--preset", "gpt2", "--deepspeed", str(path), "--devices", "8")


def test_deepspeed_keys_that_act_on_nothing_the_file_runs_are_noted(tmp_path, capsys):
    """accelerate's sp-alst.ds-config.json states seq_parallel_communication_data_type without sequence
    parallelism, and compile with disable true runs no compiler: each reads as the file without it."""
    base = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    (tmp_path / "base.json").write_text(json.dumps(base))
    plain = summary_json(capsys, "--preset", "gpt2", "--deepspeed", str(tmp_path / "base.json"), "--devices", "8")
    for extra in ({"seq_parallel_communication_data_type": "bf16"}, {"compile": {"disable": True}}):
        (tmp_path / "ds.json").write_text(json.dumps({**base, **extra}))
        got = summary_json(capsys, "--preset", "gpt2", "--deepspeed", str(tmp_path / "ds.json"), "--devices", "8")
        assert got["layout"] == plain["layout"] and got["step_time_s"] == plain["step_time_s"]
        assert any(note.startswith(next(iter(extra))) for note in got["notes"])


@pytest.mark.parametrize("name, optimizer, micro, freeze", [
    ("ds_onebitadam_bert_seq128.json", "onebit-adam", 16, 23000),      # 4096 = 16 x 8 x 32
    ("ds_onebitlamb_bert_seq128.json", "onebit-lamb", 64, 1000),       # 65536 = 64 x 32 x 32
])
def test_one_bit_optimizers_of_bing_bert(capsys, name, optimizer, micro, freeze):
    """DeepSpeedExamples' BERT pre-training with 1-bit Adam and 1-bit LAMB on 32 GPUs: no gradient
    all-reduce; BERT-base's 109,482,240 parameters' signs, 1/8 byte each, 31/32 of them leave a rank
    in the all-to-all and again in the all-gather."""
    got = summary_json(capsys, "--preset", "bert-base-uncased", "--deepspeed", str(INPUTS / name), "--devices", "32",
                "--set", "l=128")
    layout = got["layout"]
    assert (layout["optimizer"], layout["b"], layout["zero"], layout["precision"]) == (optimizer, micro, 0, "fp16")
    assert any(f"freeze_step {freeze} steps" in note for note in got["notes"])
    moved = [(c["dimension"], c["kind"], c["volume_bytes"]) for c in got["collectives"]
             if c["dimension"] in ("data", "optimizer")]
    signs, scales = 109482240 // 8 * 31 // 32, 32 * 4 * 31 // 32
    assert moved == [("optimizer", "alltoall", signs), ("optimizer", "allgather", scales),
                     ("optimizer", "allgather", signs), ("optimizer", "allgather", scales)]


def test_a_section_with_everything_off_changes_nothing(tmp_path, capsys):
    """DeepSpeedExamples' compression/bert/config/ds_config.json lists every compression technique with
    enabled false (DeepSpeed runs a technique only where its shared_parameters.enabled, or layer_reduction's
    enabled, is true): it reads as the same file without the section, with a note; one technique on is
    refused, and so is progressive_layer_drop on, while it is accepted off."""
    published = INPUTS / "ds_compression_bert_off.json"
    config = json.loads(published.read_text())
    got = summary_json(capsys, "--preset", "gpt2", "--deepspeed", str(published), "--devices", "1")
    assert any(note.startswith("compression_training: every part of it off") for note in got["notes"])
    without = tmp_path / "without.json"
    without.write_text(json.dumps({k: v for k, v in config.items() if k != "compression_training"}))
    plain = summary_json(capsys, "--preset", "gpt2", "--deepspeed", str(without), "--devices", "1")
    assert (got["layout"], got["step_time_s"], got["memory_bytes"]) == (plain["layout"], plain["step_time_s"],
                                                                        plain["memory_bytes"])
    on = json.loads(published.read_text())
    on["compression_training"]["weight_quantization"]["shared_parameters"]["enabled"] = True
    for name, changed, why in (("on.json", on, "changes the model's work"),
                               ("pld_on.json", {**config, "progressive_layer_drop": {"enabled": True}}, "skipped")):
        (tmp_path / name).write_text(json.dumps(changed))
        assert why in summary_error(capsys, "--preset", "gpt2", "--deepspeed", str(tmp_path / name), "--devices", "1")
    (tmp_path / "pld_off.json").write_text(json.dumps({**config, "progressive_layer_drop": {"enabled": False}}))
    assert summary_json(capsys, "--preset", "gpt2", "--deepspeed", str(tmp_path / "pld_off.json"), "--devices", "1")


@pytest.mark.parametrize("text, refused", [("{", "is not valid JSON (Expecting property name"), ("[1]", "is a JSON object"),
                                           ("[" * 100_000, "nested too deeply")])
def test_a_file_that_is_not_a_json_object_is_refused(tmp_path, capsys, text, refused):
    path = tmp_path / "args.json"
    path.write_text(text)
    for option, words in (("--deepspeed", ["--preset", "gpt2"]), ("--hf-training-args", ["--hf-config", LLAMA32])):
        err = summary_error(capsys, *words, option, str(path))
        assert option in err and refused in err


def test_a_file_nested_too_deeply_is_refused(tmp_path, capsys):
    """PyYAML and tomllib recurse per level: a deep file is refused by name, not a RecursionError."""
    deep = {"job.yaml": "a: " + "[" * 100_000, "job.toml": "a = " + "[" * 100_000}
    for name, text in deep.items():
        (tmp_path / name).write_text(text)
    for option, file, words in (("--accelerate", "job.yaml", ["--hf-config", LLAMA32]), ("--nemo-recipe", "job.yaml", []),
                                ("--torchtitan", "job.toml", [])):
        err = summary_error(capsys, *words, option, str(tmp_path / file))
        assert f"{option}: job is nested too deeply" in err, err


def test_deepspeed_search_and_sweep(capsys):
    """search keeps the config's ZeRO stage, CPU offload and precision in every layout (8 devices, global batch
    16, the model's context); sweep's row at the config's own values equals summary."""
    words = ["--preset", "gpt2", "--deepspeed", DS["ds_zero2_cpu_offload_config"], "--devices", "8"]
    found = json.loads(_out(capsys, "search", *words, "--json"))
    assert (found["devices"], found["global_batch"], found["seq"]) == (8, 16, 1024)
    assert {(row["zero"], row["offload"]) for row in found["best"]} == {(2, "optimizer")}
    row = _out(capsys, "sweep", *words, "--grid", "b=2", "--field", "memory_bytes,optimizer_bytes").splitlines()[1]
    whole = summary_json(capsys, *words)
    assert [float(x) for x in row.split(",")] == [2, whole["memory_bytes"], whole["optimizer_bytes"]]


def test_search_takes_the_files_context_parallelism(tmp_path, capsys):
    """A file's --context-parallel-size 2 joins the degrees searched (cp 1 and 2, Megatron's ring): the same search
    as the one typed with --cp 1,2 beside a GPT-2 of the same shape."""
    got = json.loads(_out(capsys, "search", "--megatron-args", _program(tmp_path, SMALL + "--context-parallel-size 2"),
                          "--devices", "4", "--ideal", "--top", "3", "--json"))
    typed = json.loads(_out(capsys, "search", "--hf-config", _gpt2(tmp_path), "--devices", "4", "--global-batch",
                            "16", "--seq", "64", "--precision", "bf16", "--flash", "--cp", "1,2", "--ideal", "--top",
                            "3", "--json"))
    assert got["evaluated"] == typed["evaluated"] > 0
    assert [r["cp"] for r in got["best"]] == [r["cp"] for r in typed["best"]]
    assert [r["total"] for r in got["best"]] == pytest.approx([r["total"] for r in typed["best"]], rel=1e-12)


# NeMo Framework / Megatron-Bridge: a ConfigContainer YAML printed by a real run (Llama 3.2 1B) and NeMo's
# Llama-3-70B recipe transcribed into the same layout (provenance in each file's header).
BRIDGE_1B = str(INPUTS / "megatron_bridge_llama32_1b.yaml")
BRIDGE_70B = str(INPUTS / "megatron_bridge_llama3_70b.yaml")


def test_nemo_llama3_70b_recipe_equals_the_typed_layout(tmp_path, capsys):
    """NeMo's default 4 nodes x 8 GPUs: d = 32 / (tp 4 x pp 4 x cp 2) = 1, micro-batches 512 / (1 x 1) = 512;
    interleaved with 5 chunks of 80 / (4 x 5) = 4 layers; distributed optimizer with gradient reduction and
    parameter gathers behind compute; tensor-parallel overlap (tp_comm_overlap, sequence parallel on); bf16;
    AttnBackend auto (flash); no recomputation."""
    got = summary_json(capsys, "--nemo-recipe", BRIDGE_70B, "--devices", "32")
    assert got["world_size"] == 32
    assert got["parameters"] == _llama3_parameters(8192, 28672, 80) == 70_553_706_496
    typed = summary_json(capsys, "--hf-config", _llama3(tmp_path, 8192, 28672, 80, 64), "--set", "b=1", "l=8192", "m1=4",
                  "s1=4", "d=1", "p=4", "cp=2", "n_micro=512", "--precision", "bf16", "--schedule", "interleaved",
                  "--virtual-stages", "5", "--distributed-optimizer", "--overlap", "grad,param,tensor", "--flash",
                  "--optimizer", "adam")
    _same(got, typed)
    assert any("grad_reduce_in_fp32" in note for note in got["notes"])


def test_nemo_printed_configuration_of_a_run(tmp_path, capsys):
    """The 1B run's own dump on its 8 processes: tp = pp = cp = 1, d = 8, micro-batches 512 / (1 x 8) = 64, the
    dataset's sequence 1024; tied embeddings, vocabulary not padded (should_pad_vocab false).  The run's log
    prints 0.26 billion embedding parameters (128,256 x 2,048) and 1.24 billion in all."""
    got = summary_json(capsys, "--nemo-recipe", BRIDGE_1B, "--devices", "8")
    e, f = 2048, 8192
    layer = 2 * e * e + 2 * e * 512 + 3 * e * f + 2 * e      # wq, wo; wk, wv of 8 x 64; SwiGLU; two RMSNorms
    assert got["parameters"] == 16 * layer + 128256 * e + e == 1_235_814_400
    assert round(128256 * e / 1e9, 2) == 0.26 and round(got["parameters"] / 1e9, 2) == 1.24
    config = tmp_path / "llama32-1b.json"
    config.write_text(json.dumps({
        "model_type": "llama", "hidden_size": e, "intermediate_size": f, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256,
        "max_position_embeddings": 131072, "tie_word_embeddings": True, "hidden_act": "silu",
        "attention_bias": False, "mlp_bias": False, "rms_norm_eps": 1e-05, "rope_theta": 500000.0}))
    typed = summary_json(capsys, "--hf-config", str(config), "--set", "b=1", "l=1024", "d=8", "n_micro=64", "--precision",
                  "bf16", "--distributed-optimizer", "--overlap", "grad,param", "--flash", "--optimizer", "adam")
    _same(got, typed)
    assert any("sequence length 1024" in note for note in got["notes"])


@pytest.mark.parametrize("old,new,refused", [
    ("  cpu_offloading: false", "  cpu_offloading: true", "model.cpu_offloading"),
    ("  num_moe_experts: null", "  num_moe_experts: 8", "model.num_moe_experts"),
    ("  data_parallel_sharding_strategy: no_shard", "  data_parallel_sharding_strategy: everything",
     "ddp.data_parallel_sharding_strategy 'everything'"),
    ("  rampup_batch_size: null", "  rampup_batch_size: [32, 32, 1000]", "train.rampup_batch_size"),
    ("peft: null", "peft:\n  dim: 8", "peft"),
    ("  window_size: null", "  window_size: null\n  mystery_knob: 3", "model.mystery_knob"),
    ("  window_size: null", "  window_size: null\n  teacher:\n    num_layers: 28", "knowledge distillation"),
    ("  global_batch_size: 512", "  global_batch_size: 500", "train.global_batch_size"),
    ("  recompute_granularity: null", "  recompute_granularity: selective\n  recompute_modules_x: 1",
     "model.recompute_modules_x"),
    ("  micro_batch_size: 1", "  micro_batch_size: 0", "train.micro_batch_size must be at least 1"),
    ("  rotary_percent: 1.0", "  rotary_percent: abc", "model.rotary_percent must be a number"),
    ("  sequence_parallel: false", "  sequence_parallel: 'yes'", "model.sequence_parallel must be bool"),
    ("    - 5\n    _call_: true", "    - 9\n    _call_: true", "model.attention_backend 9"),
])
def test_nemo_refusals_name_the_key(tmp_path, capsys, old, new, refused):
    text = pathlib.Path(BRIDGE_1B).read_text()
    assert old in text
    path = tmp_path / "changed.yaml"
    path.write_text(text.replace(old, new, 1))
    err = summary_error(capsys, "--nemo-recipe", str(path), "--devices", "8")
    assert refused in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("strategy, zero", [("optim", 1), ("optim_grads", 2), ("optim_grads_params", 3)])
@pytest.mark.parametrize("flag", ["  use_megatron_fsdp: false\ndist:", "  use_megatron_fsdp: false\n  use_sharp:"])
def test_nemo_megatron_fsdp_shards_as_its_strategy_says(tmp_path, capsys, strategy, zero, flag):
    """Megatron-FSDP (``ddp.use_megatron_fsdp``, or ``dist.use_megatron_fsdp``: Megatron-Bridge's
    ``ConfigContainer.validate`` turns both on when either is) shards the optimizer state, then the
    gradients, then the parameters over the data-parallel ranks (Megatron-Core's
    ``data_parallel_sharding_strategy``): the weights per device are the parameters / 8 only when the
    parameters are sharded."""
    text = pathlib.Path(BRIDGE_1B).read_text()
    assert flag in text
    path = tmp_path / "fsdp.yaml"
    path.write_text(text.replace(flag, flag.replace("false", "true"), 1)
                    .replace("  data_parallel_sharding_strategy: no_shard", f"  data_parallel_sharding_strategy: "
                             f"{strategy}", 1))
    got = summary_json(capsys, "--nemo-recipe", str(path), "--devices", "8")
    assert (got["layout"]["zero"], got["layout"]["distributed_optimizer"]) == (zero, False)
    assert (got["weight_bytes"] * 8 == 2 * got["parameters"]) == (zero == 3)


def test_nemo_attention_backend_unfused_keeps_scores(tmp_path, capsys):
    """Megatron-Core's AttnBackend 3 is unfused: the l^2 scores are kept (as --no-flash)."""
    path = tmp_path / "unfused.yaml"
    text = pathlib.Path(BRIDGE_1B).read_text()
    path.write_text(text.replace("    - 5\n    _call_: true", "    - 3\n    _call_: true"))
    got = summary_json(capsys, "--nemo-recipe", str(path), "--devices", "8")
    flash = summary_json(capsys, "--nemo-recipe", BRIDGE_1B, "--devices", "8")
    assert got["activation_bytes"] > flash["activation_bytes"]


def test_nemo_recipe_reads_recomputation_and_fp8(tmp_path, capsys):
    text = pathlib.Path(BRIDGE_1B).read_text()
    for key, value in (("recompute_granularity", "full"), ("recompute_method", "block"), ("recompute_num_layers", "4")):
        text = text.replace(f"  {key}: null", f"  {key}: {value}")
    text = text.replace("  fp8: null\n  fp8_amax_compute_algo", "  fp8: hybrid\n  fp8_amax_compute_algo", 1)
    path = tmp_path / "full.yaml"
    path.write_text(text.replace("  fp8_recipe: tensorwise\n  fp8_wgrad: true\n  grad_reduce_in_fp32",
                                 "  fp8_recipe: delayed\n  fp8_wgrad: true\n  grad_reduce_in_fp32", 1))
    assert main(["summary", "--nemo-recipe", str(path), "--devices", "8"]) == 0
    assert "recompute=full" in capsys.readouterr().out
    got = summary_json(capsys, "--nemo-recipe", str(path), "--devices", "8")
    plain = summary_json(capsys, "--nemo-recipe", BRIDGE_1B, "--devices", "8")
    assert got["flops_recompute"] > 0 == plain["flops_recompute"]
    path.write_text(text.replace("  fp8_recipe: tensorwise\n  fp8_wgrad: true\n  grad_reduce_in_fp32",
                                 "  fp8_recipe: blockwise\n  fp8_wgrad: true\n  grad_reduce_in_fp32", 1))
    assert "mixed_precision.fp8_recipe" in summary_error(capsys, "--nemo-recipe", str(path), "--devices", "8")   # 128x128


@pytest.mark.parametrize("words,refused", [
    ((), "--devices"),
    (("--devices", "8", "--vocab-size", "1000"), "--vocab-size"),
    (("--devices", "8", "--precision", "fp16"), "--precision"),
    (("--devices", "8", "--optimizer", "sgd"), "--optimizer"),
    (("--devices", "12"), "train.global_batch_size 512 is not a multiple of micro_batch_size x data-parallel size "
                          "= 1 x 12"),
])
def test_nemo_command_line_refusals(capsys, words, refused):
    assert refused in summary_error(capsys, "--nemo-recipe", BRIDGE_1B, *words)
    # 48 processes are not a multiple of tp 4 x pp 4 x cp 2 = 32
    assert "world size 48" in summary_error(capsys, "--nemo-recipe", BRIDGE_70B, "--devices", "48")


def test_nemo_without_pyyaml_says_what_to_install(capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "yaml", None)
    assert "symbolic_cost[yaml]" in summary_error(capsys, "--nemo-recipe", BRIDGE_1B, "--devices", "8")


def test_nemo_search_and_sweep(capsys):
    assert main(["search", "--nemo-recipe", BRIDGE_1B, "--devices", "8", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["global_batch"], found["seq"], found["devices"]) == (512, 1024, 8)
    assert main(["sweep", "--nemo-recipe", BRIDGE_1B, "--devices", "8", "--grid", "b=1,2", "--field",
                 "memory_bytes"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) == 3


# Hugging Face accelerate: its own config templates (tests/framework_inputs/PROVENANCE.md) beside a model.
# accelerate's rules, re-stated: num_processes is the world (every machine's); FSDP's FULL_SHARD shards
# parameters, gradients and optimizer state (ZeRO-3), SHARD_GRAD_OP keeps the gathered parameters from forward to
# backward, NO_SHARD is DDP, HYBRID_SHARD shards within a machine and replicates across machines; FSDP2's
# fsdp_reshard_after_forward true/false is FULL_SHARD/SHARD_GRAD_OP; FSDP prefetches its gathers and
# reduce-scatters, DDP reduces its buckets during backward.
ACCEL_FSDP = INPUTS / "accelerate_fsdp.yaml"
ACCEL_DDP = str(INPUTS / "accelerate_multi_gpu.yaml")
LLAMA32 = str(pathlib.Path(__file__).resolve().parent / "hf_configs" / "Llama-3.2-1B.json")


def _accelerate(tmp_path, old="", new=""):
    text = ACCEL_FSDP.read_text()
    assert old in text
    path = tmp_path / "accelerate.yaml"
    path.write_text(text.replace(old, new, 1))
    return str(path)


@pytest.mark.parametrize("old,new,typed", [
    ("", "", ["--set", "d=2", "--zero", "3", "--overlap", "grad,param"]),
    ("fsdp_sharding_strategy: FULL_SHARD", "fsdp_sharding_strategy: SHARD_GRAD_OP",
     ["--set", "d=2", "--zero", "3", "--no-reshard-after-forward", "--overlap", "grad,param"]),
    ("fsdp_sharding_strategy: FULL_SHARD", "fsdp_sharding_strategy: 3", ["--set", "d=2", "--overlap", "grad"]),
    ("num_processes: 2", "num_processes: 16\nnum_machines: 2", ["--set", "d=16", "--zero", "3", "--overlap",
                                                                "grad,param"]),
    ("num_processes: 2\n", "num_processes: 16\nnum_machines: 2\n", None),      # HYBRID_SHARD below
    ("fsdp_offload_params: false", "fsdp_offload_params: true",
     ["--set", "d=2", "--zero", "3", "--offload", "parameters", "--overlap", "grad,param"]),
    ("fsdp_activation_checkpointing: false", "fsdp_activation_checkpointing: true",
     ["--set", "d=2", "--zero", "3", "--recompute", "full", "--overlap", "grad,param"]),
    ("  fsdp_sharding_strategy: FULL_SHARD\n", "  fsdp_version: 2\n  fsdp_reshard_after_forward: false\n",
     ["--set", "d=2", "--zero", "3", "--no-reshard-after-forward", "--overlap", "grad,param"]),
])
def test_accelerate_fsdp_equals_the_typed_training(tmp_path, capsys, old, new, typed):
    if typed is None:           # HYBRID_SHARD on 2 machines of 8: sharded over the 8 of a machine, replicated twice
        old, new = "fsdp_sharding_strategy: FULL_SHARD", "fsdp_sharding_strategy: HYBRID_SHARD"
        text = ACCEL_FSDP.read_text().replace("num_processes: 2\n", "num_processes: 16\nnum_machines: 2\n")
        path = tmp_path / "hybrid.yaml"
        path.write_text(text.replace(old, new))
        config, typed = str(path), ["--set", "d=16", "--zero", "3", "--shard", "8", "--overlap", "grad,param"]
    else:
        config = _accelerate(tmp_path, old, new)
    got = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", config, "--set", "b=4", "l=2048")
    plain = summary_json(capsys, "--hf-config", LLAMA32, "--set", "b=4", "l=2048", "--precision", "bf16", *typed)
    _same(got, plain)
    assert any("fp32 sharded parameters" in note for note in got["notes"])


def test_accelerate_ddp_template(capsys):
    got = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", ACCEL_DDP, "--set", "b=4", "l=2048")
    typed = summary_json(capsys, "--hf-config", LLAMA32, "--set", "b=4", "l=2048", "d=2", "--precision", "bf16",
                  "--overlap", "grad")
    _same(got, typed)
    assert got["world_size"] == 2


@pytest.mark.parametrize("old,new,refused", [
    ("distributed_type: FSDP", "distributed_type: MULTI_XPU", "distributed_type"),
    ("mixed_precision: 'bf16'", "mixed_precision: 'fp8'", "fp8_config.backend None: give TE or AO"),
    ("fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP", "fsdp_auto_wrap_policy: SIZE_BASED_WRAP",
     "fsdp_config.fsdp_auto_wrap_policy"),
    ("fsdp_sharding_strategy: FULL_SHARD", "fsdp_sharding_strategy: HYBRID_SHARD_ZERO2",
     "fsdp_config.fsdp_sharding_strategy"),
    ("fsdp_use_orig_params: true", "fsdp_use_orig_params: true\n  fsdp_mystery: 1", "fsdp_config.fsdp_mystery"),
    ("num_processes: 2", "num_processes: 2\nparallelism_config:\n  parallelism_config_tp_size: 2",
     "parallelism_config"),
    # a list or a mapping where accelerate takes a name (found by fuzzing: they ended in a TypeError)
    ("mixed_precision: 'bf16'", "mixed_precision:\n  a: 1", "mixed_precision {'a': 1}"),
    ("fsdp_sharding_strategy: FULL_SHARD", "fsdp_sharding_strategy: [1, 2]", "fsdp_config.fsdp_sharding_strategy"),
    ("fsdp_sharding_strategy: FULL_SHARD", "fsdp_version: 2\n  fsdp_reshard_after_forward: [1]",
     "fsdp_config.fsdp_reshard_after_forward must be true or false"),
    # accelerate's own MPI test config (tests/test_configs/0_28_0_mpi.yaml): the host is what is not modelled
    ("distributed_type: FSDP", "distributed_type: MULTI_CPU\nmpirun_config:\n  mpirun_ccl: '1'",
     "distributed_type MULTI_CPU: training on the host"),
    # 10^20 processes printed a job of 10^21 GiB, where --devices refuses past 2**53
    ("num_processes: 2", "num_processes: 100000000000000000000", "num_processes must be an integer from 1 to 2**53"),
])
def test_accelerate_refusals(tmp_path, capsys, old, new, refused):
    err = summary_error(capsys, "--hf-config", LLAMA32, "--accelerate", _accelerate(tmp_path, old, new))
    assert refused in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("optim, state_bytes", [
    ("adamw_8bit", 4 + 2 * (1 + Fraction(4, 2048))), ("adamw_bnb_8bit", 4 + 2 * (1 + Fraction(4, 2048))),
    ("paged_adamw_8bit", 4 + 2 * (1 + Fraction(4, 2048))), ("paged_adamw_32bit", 4 + 2 * 4),
    ("rmsprop", 4 + 4),       # torch's RMSprop at its defaults: square_avg alone, fp32
])
def test_trainer_bitsandbytes_optimizers(tmp_path, capsys, optim, state_bytes):
    """bitsandbytes' AdamW and torch's RMSprop through ``optim`` (names of the installed transformers'
    ``OptimizerNames``):
    the fp32 master (bf16 mixed precision) and two moments, of one byte and an fp32 absolute maximum
    per block of 2048 (Dettmers et al. 2022) in the 8-bit ones, fp32 in the 32-bit one; "paged"
    memory stays on the device until it runs out (noted).  Llama-3.2-1B: 1,235,814,400 parameters."""
    transformers = pytest.importorskip("transformers")
    assert optim in {name.value for name in transformers.training_args.OptimizerNames}
    got = summary_json(capsys, "--hf-config", LLAMA32, "--hf-training-args", _trainer_args(tmp_path, optim=optim))
    assert Fraction(got["optimizer_bytes"]) == 1_235_814_400 * state_bytes
    assert any("paged" in note for note in got["notes"]) == optim.startswith("paged")


@pytest.mark.parametrize("words,refused", [
    (("--zero", "2"), "--zero"), (("--precision", "fp16"), "--precision"), (("--offload", "optimizer"), "--offload"),
])
def test_accelerate_decides_its_options(capsys, words, refused):
    assert refused in summary_error(capsys, "--hf-config", LLAMA32, "--accelerate", str(ACCEL_FSDP), *words)


def test_accelerate_devices_replace_and_search_sweep(capsys):
    got = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", str(ACCEL_FSDP), "--devices", "8", "--set", "b=1")
    assert got["world_size"] == 8 and "--devices 8 replaces the 2 processes of num_processes" in got["notes"]
    assert main(["sweep", "--hf-config", LLAMA32, "--accelerate", str(ACCEL_FSDP), "--grid", "b=1,2", "--field",
                 "memory_bytes"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    assert main(["search", "--hf-config", LLAMA32, "--accelerate", str(ACCEL_FSDP), "--global-batch", "16", "--seq",
                 "2048", "--top", "3", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["devices"], found["global_batch"]) == (2, 16)
    assert {row["zero"] for row in found["best"]} == {3} and not any("replaces" in n for n in found["notes"])


# Hugging Face Trainer: TrainingArguments as JSON (tests/framework_inputs/PROVENANCE.md) beside a model.
# transformers' rules, re-stated: per_device_train_batch_size is each device's micro-batch, accumulated
# gradient_accumulation_steps times, on the launcher's processes (--devices); bf16/fp16 choose autocast's
# 16-bit format; fsdp "full_shard" (FSDP2's reshard_after_forward true) is ZeRO-3, "shard_grad_op" keeps the
# gathered weights until backward, FSDP1's "no_shard" is DDP and "hybrid_shard" shards within a machine;
# "offload" moves the parameters and the optimizer step to the host; adamw_torch(_fused) is torch's AdamW.
ALPACA = str(INPUTS / "alpaca_training_args.json")
DUMP = INPUTS / "trainer_to_json_string.json"
LLAMA2 = str(pathlib.Path(__file__).resolve().parent / "hf_configs" / "Llama-2-7b-hf.json")


def _trainer_args(tmp_path, **changes):
    fields = json.loads(DUMP.read_text())
    fields.update(changes)
    path = tmp_path / "training_args.json"
    path.write_text(json.dumps(fields))
    return str(path)


def test_trainer_defaults_are_transformers_own():
    """The reader's defaults are the dataclass's (the outside oracle: the installed transformers)."""
    transformers = pytest.importorskip("transformers")
    import dataclasses

    from symbolic_cost.models import hf_trainer
    fields = {f.name: f.default for f in dataclasses.fields(transformers.TrainingArguments) if f.init}
    read = {**hf_trainer.DEFAULTS, **hf_trainer.MUST_BE}
    assert {k: fields[k] for k in read} == read
    # every field of the installed TrainingArguments is read, accepted or refused away from its default
    assert set(fields) == set(read) | hf_trainer.NO_COST
    assert not hf_trainer.RETIRED & set(fields)


SDPA = ("--flash", "--attention-kernel", "flash-attention-2")
"""transformers' attention when a Trainer's run names none: sdpa (models.hf_trainer.default_attention)."""


def test_trainer_alpaca_equals_the_typed_training(capsys):
    """Stanford Alpaca's LLaMA-7B fine-tuning on 4 GPUs: 4 x 8 accumulation x 4 devices = its README's batch 128;
    FSDP full_shard (ZeRO-3, gathers and reduce-scatters overlapped), bf16, torch's AdamW (the default optim)."""
    got = summary_json(capsys, "--hf-config", LLAMA2, "--hf-training-args", ALPACA, "--devices", "4", "--set", "l=512")
    typed = summary_json(capsys, "--hf-config", LLAMA2, "--set", "b=4", "n_micro=8", "d=4", "l=512", "--zero", "3",
                  "--optimizer", "adamw", "--overlap", "grad,param", *SDPA)
    _same(got, typed)
    assert got["world_size"] == 4 and 4 * 8 * 4 == 128


@pytest.mark.parametrize("changes,typed", [
    ({}, ["--zero", "3", "--recompute", "full", "--overlap", "grad,param"]),
    ({"fsdp": None, "fsdp_config": None}, ["--recompute", "full", "--overlap", "grad"]),
    ({"fsdp_config": {"reshard_after_forward": False}},
     ["--zero", "3", "--no-reshard-after-forward", "--recompute", "full", "--overlap", "grad,param"]),
    ({"fsdp": "shard_grad_op", "fsdp_config": {}},
     ["--zero", "3", "--no-reshard-after-forward", "--recompute", "full", "--overlap", "grad,param"]),
    ({"fsdp": "no_shard", "fsdp_config": {"version": 1}}, ["--recompute", "full", "--overlap", "grad"]),
    ({"fsdp": "full_shard offload"}, ["--zero", "3", "--offload", "parameters", "--recompute", "full", "--overlap",
                                      "grad,param"]),
    ({"activation_checkpointing": False, "gradient_checkpointing": False,
      "fsdp_config": {"fsdp_activation_checkpointing": True}}, ["--zero", "3", "--recompute", "full", "--overlap",
                                                                "grad,param"]),
    ({"bf16": False, "fp16": True, "optim": "adafactor"},
     ["--zero", "3", "--recompute", "full", "--overlap", "grad,param", "--precision", "fp16", "--optimizer",
      "adafactor"]),
    ({"bf16": False}, ["--zero", "3", "--recompute", "full", "--overlap", "grad,param", "--precision", "fp32"]),
])
def test_trainer_dump_equals_the_typed_training(tmp_path, capsys, changes, typed):
    """transformers' own to_json_string() (2 x 4 accumulation, bf16, checkpointing, FSDP2 full_shard) and its
    variants on 8 devices."""
    got = summary_json(capsys, "--hf-config", LLAMA32, "--hf-training-args", _trainer_args(tmp_path, **changes),
                "--devices", "8", "--set", "l=2048")
    optimizer = [] if "--optimizer" in typed else ["--optimizer", "adamw"]      # an option is given once
    plain = summary_json(capsys, "--hf-config", LLAMA32, "--set", "b=2", "n_micro=4", "d=8", "l=2048", *optimizer, *typed,
                  *SDPA)
    _same(got, plain)
    regathers = "--zero" in typed and "--no-reshard-after-forward" not in typed and "fsdp_config" not in changes
    assert any("gathers the weights once more" in n for n in got["notes"]) == regathers


def test_trainer_hybrid_shard_takes_a_machine_from_shard(tmp_path, capsys):
    path = _trainer_args(tmp_path, fsdp="hybrid_shard", fsdp_config={"version": 1})
    assert "--shard" in summary_error(capsys, "--hf-config", LLAMA32, "--hf-training-args", path, "--devices", "16")
    got = summary_json(capsys, "--hf-config", LLAMA32, "--hf-training-args", path, "--devices", "16", "--shard", "8")
    plain = summary_json(capsys, "--hf-config", LLAMA32, "--set", "b=2", "n_micro=4", "d=16", "--optimizer", "adamw", *SDPA,
                  "--zero", "3", "--shard", "8", "--recompute", "full", "--overlap", "grad,param")
    _same(got, plain)


@pytest.mark.parametrize("changes,refused", [
    ({"fp16": True}, "fp16"), ({"optim": "sgd"}, "optim"), ({"optim": "lion_32bit"}, "optim"),
    ({"deepspeed": "ds_config.json"}, "deepspeed"), ({"fsdp": "hybrid_shard"}, "fsdp"),
    ({"fsdp": "hybrid_shard_zero2", "fsdp_config": {"version": 1}}, "fsdp hybrid_shard_zero2"),
    ({"fsdp_config": {"mystery": 1}}, "fsdp_config.mystery"), ({"mystery_knob": 1}, "mystery_knob"),
    ({"use_liger_kernel": "yes"}, "use_liger_kernel must be true or false"),
    ({"use_liger_kernel": True, "liger_kernel_config": {"cross_entropy": True}}, "both on; Liger refuses them"),
    ({"use_liger_kernel": True, "liger_kernel_config": {"fused": True}}, "liger_kernel_config.fused"),
    ({"parallelism_config": {"tp_size": 2}}, "parallelism_config"),
    ({"activation_checkpointing_kwargs": {"every_n_layers": 2}}, "activation_checkpointing_kwargs"),
    ({"bf16": False, "tf32": True}, "tf32"), ({"accelerator_config": {"split_batches": True}}, "split_batches"),
    ({"fsdp_config": {"fsdp_auto_wrap_policy": "SIZE_BASED_WRAP"}}, "fsdp_config.auto_wrap_policy"),
    ({"fsdp_config": "fsdp_config.json"}, "fsdp_config"), ({"gradient_accumulation_steps": 0}, "gradient_accumulation"),
])
def test_trainer_refusals(tmp_path, capsys, changes, refused):
    err = summary_error(capsys, "--hf-config", LLAMA32, "--hf-training-args", _trainer_args(tmp_path, **changes))
    assert refused in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("words,refused", [
    (("--zero", "2"), "--zero"), (("--precision", "fp16"), "--precision"), (("--optimizer", "sgd"), "--optimizer"),
    (("--recompute", "selective"), "--recompute"), (("--shard", "2"), "--shard"),
])
def test_trainer_decides_its_options(capsys, words, refused):
    assert refused in summary_error(capsys, "--hf-config", LLAMA32, "--hf-training-args", str(DUMP), *words)


def test_trainer_devices_set_search_sweep(capsys):
    got = summary_json(capsys, "--hf-config", LLAMA32, "--hf-training-args", str(DUMP), "--set", "b=1")
    assert got["world_size"] == 1 and any("give --devices" in n for n in got["notes"])
    assert "--set b=1 replaces the file's b=2" in got["notes"]
    assert main(["sweep", "--hf-config", LLAMA32, "--hf-training-args", str(DUMP), "--devices", "8", "--grid",
                 "b=1,2", "--field", "memory_bytes"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    assert main(["search", "--hf-config", LLAMA32, "--hf-training-args", str(DUMP), "--devices", "8", "--seq",
                 "2048", "--top", "3", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["devices"], found["global_batch"]) == (8, 2 * 4 * 8)


QUOTED = str(INPUTS / "pretrain_gpt_345m_quoted_args.sh")


def test_a_script_whose_options_sit_in_multi_line_quoted_variables(capsys):
    """Megatron-LM's examples until 2024 gather options in ``GPT_ARGS="`` ... ``"`` over many lines.
    The "345M" model by hand: 24 layers of ``12 h^2 + 13 h`` at h = 1024, GPT-2's 50,257 tokens
    padded to 50,304 (128 x tp), 1,024 learned positions, the final LayerNorm, the output layer
    tied to the embedding (Megatron's default)."""
    got = summary_json(capsys, "--megatron-args", QUOTED, "--devices", "1", "--vocab-size", "50257")
    h = 1024
    assert got["parameters"] == 24 * (12 * h * h + 13 * h) + 50304 * h + 1024 * h + 2 * h == 354_871_296


def test_integer_tests_of_known_values_are_decided():
    text = ("N=2\nif [[ $N -eq 2 ]]; then\n  A=--fp16\nelse\n  A=--bf16\nfi\nif [ $N -gt 5 ]; then\n  B=x\nfi\n"
            "torchrun --nproc_per_node 8 pretrain_gpt.py $A --num-layers 2\n")
    assert read_launch(text, "x.sh").program == ["--fp16", "--num-layers", "2"]


def test_a_2021_script_with_checkpoint_activations_and_the_nccl_backend(capsys):
    """Megatron-LM's examples/pretrain_gpt.sh of 2021: ``--checkpoint-activations`` is the full
    recomputation of one-layer chunks (``--checkpoint-num-layers`` 1), ``--distributed-backend
    nccl`` changes no count.  The recomputed forward is at least the 24 layers' products, twice
    (two micro-batches of 4): ``24 b l h^2 + 4 b l^2 h`` a layer; the rest is element-wise work."""
    got = summary_json(capsys, "--megatron-args", str(INPUTS / "pretrain_gpt_345m_2021.sh"), "--devices", "1",
                "--vocab-size", "50257")
    assert got["parameters"] == 354_871_296
    b, l, h = 4, 1024, 1024
    products = 2 * 24 * (24 * b * l * h * h + 4 * b * l * l * h)
    assert products < got["flops_recompute"] < 1.01 * products


def test_checkpoint_activations_beside_its_successor_is_refused(tmp_path, capsys):
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 1 pretrain_gpt.py --num-layers 2 --hidden-size 64 "
                      "--num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 1 "
                      "--checkpoint-activations --recompute-granularity full\n")
    assert "--checkpoint-activations (Megatron-LM before 2022) and --recompute-granularity" in \
        summary_error(capsys, "--megatron-args", str(script), "--vocab-size", "100")


CASE_SCRIPT = """#!/bin/bash
MODEL_SIZE=${MODEL_SIZE:-small}
case $MODEL_SIZE in
  tiny|small)
    NUM_LAYERS=2
    HIDDEN=64
    ;;
  large) NUM_LAYERS=24; HIDDEN=1024;;
  *)
    echo "unknown size"; exit 1
    ;;
esac
if [ -n "$WANDB_API_KEY" ]; then
  LOGGING_ARGS="--wandb-project test --wandb-exp-name x --log-interval 10"
fi
run_cmd="torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers $NUM_LAYERS --hidden-size $HIDDEN \\
  --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 \\
  --global-batch-size 8 --tokenizer-type NullTokenizer --vocab-size 1000 ${LOGGING_ARGS}"
eval ${run_cmd}
"""


def test_case_on_a_known_value_takes_its_branch():
    # MODEL_SIZE defaults to small: the tiny|small branch, as bash takes it
    from symbolic_cost.models.megatron_words import inert
    launch = read_launch(CASE_SCRIPT, "s", inert=inert)
    words = launch.program
    assert words[words.index("--num-layers") + 1] == "2" and words[words.index("--hidden-size") + 1] == "64"
    large = read_launch(CASE_SCRIPT.replace("${MODEL_SIZE:-small}", "large"), "s", inert=inert).program
    assert large[large.index("--num-layers") + 1] == "24" and large[large.index("--hidden-size") + 1] == "1024"
    assert launch.launcher == ["torchrun", "--nproc_per_node", "8"]      # eval ${run_cmd}: the command's words
    # eval "${run_cmd}": eval reads the one string as words again (the launcher was lost, and the devices with it)
    quoted = read_launch(CASE_SCRIPT.replace("eval ${run_cmd}", 'eval "${run_cmd}"'), "s", inert=inert)
    assert quoted.launcher == ["torchrun", "--nproc_per_node", "8"] and quoted.program == words


def test_a_case_on_an_unknown_value_leaves_what_it_assigns_unknown():
    """``case $1 in``: the script's argument decides the branch, so the sizes it sets are unknown, and
    the first option that needs one is refused naming it; options set under such a test stay refused."""
    from symbolic_cost.models.megatron_words import inert
    launch = read_launch(CASE_SCRIPT.replace("${MODEL_SIZE:-small}", "$1"), "s", inert=inert)
    with pytest.raises(InputError, match=r"--hidden-size is \$HIDDEN, whose value the script does not decide"):
        megatron_setup(launch, "s")
    with pytest.raises(InputError, match="line 14: an assignment sits under a test"):
        read_launch(CASE_SCRIPT.replace("${MODEL_SIZE:-small}", "$1"), "s")
    tiny = CASE_SCRIPT.replace("${MODEL_SIZE:-small}", "$1").replace("NUM_LAYERS=2", "NUM_LAYERS=2; GPT_ARGS=(--fp16)")
    with pytest.raises(InputError, match="line 5: an assignment sits under a test"):
        read_launch(tiny, "s", inert=inert)                 # an array under it: which options run is unknown


def test_logging_under_an_unknown_test_is_taken_with_a_note_and_nothing_else_is(capsys, tmp_path):
    from symbolic_cost.models.megatron_words import inert
    launch = read_launch(CASE_SCRIPT, "s", inert=inert)
    assert launch.notes == ["line 14: LOGGING_ARGS is set under a test the reader cannot decide; its options change "
                            "no count, so the cost is the same either way"]
    costly = CASE_SCRIPT.replace("--wandb-project test", "--recompute-granularity full")
    with pytest.raises(InputError, match="line 14: an assignment sits under a test"):
        read_launch(costly, "s", inert=inert)
    path = tmp_path / "train.sh"
    path.write_text(CASE_SCRIPT)
    assert main(["summary", "--megatron-args", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # 2 layers of 64 (12 x 64^2 + 13 x 64 each), the 1,000 words padded to 1,024, 128 positions, the
    # final norm; tied: the parameters by hand
    assert report["parameters"] == 1024 * 64 + 128 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64
    assert report["world_size"] == 8 and report["notes"][0].startswith("line 14: LOGGING_ARGS")


@pytest.mark.parametrize("reshard", ["true", "false"])
def test_an_fsdp1_file_with_reshard_after_forward_is_read_as_accelerates_plugin_reads_it(tmp_path, capsys, reshard,
                                                                                       monkeypatch):
    """Issue 65: TRL's FSDP1 configs set fsdp_reshard_after_forward; accelerate's plugin takes an FSDP1
    strategy from fsdp_sharding_strategy (FULL_SHARD by default), which wins over it."""
    config = _accelerate(tmp_path, "fsdp_sharding_strategy: FULL_SHARD",
                         f"fsdp_sharding_strategy: FULL_SHARD\n  fsdp_reshard_after_forward: {reshard}")
    got = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", config, "--set", "b=4", "l=2048")
    plain = summary_json(capsys, "--hf-config", LLAMA32, "--set", "b=4", "l=2048", "--precision", "bf16", "--set", "d=2",
                  "--zero", "3", "--overlap", "grad,param")
    _same(got, plain)
    assert any(note.startswith("fsdp_config.fsdp_reshard_after_forward") for note in got["notes"])
    # what `accelerate launch` hands the plugin from this file: its fsdp_config keys as FSDP_* variables
    accelerate = pytest.importorskip("accelerate")
    monkeypatch.setenv("FSDP_SHARDING_STRATEGY", "FULL_SHARD")
    monkeypatch.setenv("FSDP_RESHARD_AFTER_FORWARD", reshard)
    assert accelerate.utils.FullyShardedDataParallelPlugin().sharding_strategy.name == "FULL_SHARD"


def test_the_empty_sections_accelerate_config_writes_are_accepted(tmp_path, capsys):
    """Issue 65: accelerate's documented ``accelerate config`` output holds ``deepspeed_config: {}``
    and ``megatron_lm_config: {}`` beside an FSDP setup; empty, they change nothing."""
    config = _accelerate(tmp_path, "distributed_type: FSDP", "deepspeed_config: {}\nmegatron_lm_config: {}\n"
                                                             "distributed_type: FSDP")
    got = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", config, "--set", "b=4", "l=2048")
    plain = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", _accelerate(tmp_path), "--set", "b=4", "l=2048")
    assert got == plain


def test_accelerate_megatron_plugin_is_refused_with_what_to_give_instead(tmp_path, capsys):
    """distributed_type MEGATRON_LM, with its settings or without, as accelerate's Megatron-LM guide
    (docs/source/usage_guides/megatron_lm.md) writes it: refused naming the plugin and the options that state its
    layout (it was told to give a Megatron-LM launch, which such a user does not have)."""
    for extra in ("megatron_lm_config: {}", "megatron_lm_config:\n  megatron_lm_tp_degree: 2"):
        config = _accelerate(tmp_path, "distributed_type: FSDP", f"distributed_type: MEGATRON_LM\n{extra}")
        err = summary_error(capsys, "--preset", "gpt2", "--accelerate", config)
        assert "accelerate's Megatron-LM plugin is not read" in err and "--set m1=TP p=PP" in err


def test_an_inline_deepspeed_config_is_the_json_accelerate_builds(tmp_path, capsys):
    """TRL's trl/accelerate_configs/zero3.yaml: distributed_type DEEPSPEED with an inline deepspeed_config (ZeRO-3,
    no offload), bf16, 8 processes.  Without a config file accelerate's DeepSpeedPlugin builds the DeepSpeed
    JSON itself (utils/dataclasses.py: train_batch_size and the micro-batch "auto", gradient_accumulation_steps
    "auto", zero_optimization's stage and offload devices), with bf16 from mixed_precision: written here by
    hand, with the Trainer's "auto" values the script's (--set b=2 n_micro=4), it reads the same.  An offload
    and an accumulation stated in the YAML are read; a deepspeed_config_file is sent to --deepspeed."""
    yaml_path = str(INPUTS / "trl_zero3.yaml")
    got = summary_json(capsys, "--preset", "gpt2", "--accelerate", yaml_path, "--set", "b=2", "n_micro=4")
    plugin = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
              "gradient_accumulation_steps": "auto", "bf16": {"enabled": True},
              "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "none"},
                                    "offload_param": {"device": "none"}}}
    (tmp_path / "plugin.json").write_text(json.dumps(plugin))
    typed = summary_json(capsys, "--preset", "gpt2", "--deepspeed", str(tmp_path / "plugin.json"), "--devices", "8",
                  "--set", "b=2", "n_micro=4")
    _same(got, {k: v for k, v in typed.items() if k != "notes"})
    text = (INPUTS / "trl_zero3.yaml").read_text()
    offload = tmp_path / "offload.yaml"
    offload.write_text(text.replace("offload_optimizer_device: none", "offload_optimizer_device: cpu").replace(
        "zero3_init_flag: true", "zero3_init_flag: true\n  gradient_accumulation_steps: 4"))
    read = summary_json(capsys, "--preset", "gpt2", "--accelerate", str(offload))["layout"]
    assert (read["zero"], read["offload"], read["micro_batches"]) == (3, "optimizer", 4)
    assert "accelerate refuses two values" in summary_error(capsys, "--preset", "gpt2", "--accelerate", str(offload),
                                                      "--set", "n_micro=2")
    with_file = tmp_path / "file.yaml"
    with_file.write_text(text.replace("zero_stage: 3", "zero_stage: 3\n  deepspeed_config_file: ds.json"))
    assert "give that DeepSpeed JSON with --deepspeed" in summary_error(capsys, "--preset", "gpt2", "--accelerate",
                                                                 str(with_file))


ACCELERATE_WITH_FILE = """distributed_type: DEEPSPEED
deepspeed_config:
  deepspeed_config_file: ds.json
  zero3_init_flag: false
num_processes: 4
"""
"""The layout of accelerate's examples/config_yaml_templates/deepspeed.yaml, written by hand: a DeepSpeed launch
whose settings are a DeepSpeed JSON, the processes the YAML's."""


def test_accelerate_with_the_deepspeed_json_its_config_file_names(tmp_path, capsys):
    """accelerate 1.15's DeepSpeedPlugin.__post_init__ with a deepspeed_config_file passes DeepSpeed the JSON as
    written; the YAML gives the processes (4 here).  So the pair reads as the JSON alone on 4 devices.  Its "auto"
    precision is filled from accelerate's mixed precision, "no" when the YAML gives none (set_mixed_precision:
    fp16.enabled and bf16.enabled false): fp32.  accelerate refuses the plugin's own keys and mixed_precision
    beside the file (_deepspeed_config_checks), and so does the reader."""
    yaml_path = tmp_path / "accelerate.yaml"
    yaml_path.write_text(ACCELERATE_WITH_FILE)
    pair = ("--preset", "gpt2", "--accelerate", str(yaml_path), "--deepspeed", DS["ds_config_fp16_z3"])
    got = summary_json(capsys, *pair, "--set", "b=4")
    alone = summary_json(capsys, "--preset", "gpt2", "--deepspeed", DS["ds_config_fp16_z3"], "--devices", "4",
                  "--set", "b=4")
    typed = summary_json(capsys, "--preset", "gpt2", "--set", "b=4", "d=4", "n_micro=1", "--zero", "3", "--precision", "fp16",
                  "--overlap", "grad,param")
    _same(got, {k: v for k, v in typed.items() if k != "notes"})
    _same(got, {k: v for k, v in alone.items() if k != "notes"})
    assert got["world_size"] == 4 and any("deepspeed_config_file ds.json" in n for n in got["notes"])
    assert summary_json(capsys, *pair, "--set", "b=4", "--devices", "8")["world_size"] == 8
    auto = tmp_path / "auto.json"
    auto.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2},
                                "bf16": {"enabled": "auto"}}))
    layout = summary_json(capsys, "--preset", "gpt2", "--accelerate", str(yaml_path), "--deepspeed", str(auto))["layout"]
    assert (layout["precision"], layout["zero"], layout["b"], layout["d"]) == ("fp32", 2, 2, 4)
    assert "--precision" in summary_error(capsys, *pair, "--set", "b=4", "--precision", "bf16")
    for old, new, refused in [("zero3_init_flag: false", "zero_stage: 2", "deepspeed_config.zero_stage beside"),
                              ("num_processes: 4", "num_processes: 4\nmixed_precision: bf16", "mixed_precision beside"),
                              ("zero3_init_flag: false", "mystery: 1", "deepspeed_config.mystery")]:
        changed = tmp_path / "changed.yaml"
        changed.write_text(ACCELERATE_WITH_FILE.replace(old, new))
        assert refused in summary_error(capsys, "--preset", "gpt2", "--accelerate", str(changed), "--deepspeed",
                                 DS["ds_config_fp16_z3"], "--set", "b=4")
    stage_auto = tmp_path / "stage_auto.json"
    stage_auto.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": "auto"}}))
    assert "nothing fills it" in summary_error(capsys, "--preset", "gpt2", "--accelerate", str(yaml_path), "--deepspeed",
                                        str(stage_auto))
    assert "must be distributed_type DEEPSPEED with a deepspeed_config.deepspeed_config_file" in summary_error(
        capsys, "--preset", "gpt2", "--accelerate", str(INPUTS / "trl_zero3.yaml"), "--deepspeed",
        DS["ds_config_fp16_z3"], "--set", "b=4")


def test_distributed_type_no_runs_one_process_whatever_the_count(capsys):
    """TRL's packaged trl/accelerate_configs/single_gpu.yaml says distributed_type "NO" beside num_processes 8:
    accelerate launch then takes its simple launcher, one process (launch.py: multi_gpu stays false for NO), so
    the file reads as one device with a note; --devices 8 beside it is refused."""
    path = str(INPUTS / "trl_single_gpu.yaml")
    got = summary_json(capsys, "--preset", "gpt2", "--accelerate", path)
    assert got["layout"]["d"] == 1 and any("distributed_type NO runs one process" in n for n in got["notes"])
    assert "distributed_type NO runs one process, not 8" in summary_error(capsys, "--preset", "gpt2", "--accelerate", path,
                                                                    "--devices", "8")


@pytest.mark.parametrize("name, cp", [("accelerate_cp.yaml", 8), ("trl_context_parallel_2gpu.yaml", 2)])
def test_parallelism_config_context_parallel_as_typed(capsys, name, cp):
    """accelerate's torch_native_parallelism cp.yaml (8 processes, cp_size 8) and TRL's
    context_parallel_2gpu.yaml (2, cp_size 2), FSDP2 with activation checkpointing: one sequence split over
    the cp ranks, FSDP over the shard x cp ranks (accelerate's dp_shard_cp mesh), keys and values
    all-gathered (cp_comm_strategy's default), SDPA's fused kernels: the layout typed by hand."""
    model = ["--preset", "llama-3-8b", "--set", "l=8192"]
    got = summary_json(capsys, *model, "--accelerate", str(INPUTS / name))
    layout = got["layout"]
    assert (layout["d"], layout["cp"], layout["cp_variant"], layout["zero"], layout["flash"]) == \
        (1, cp, "all-gather", 3, True)
    typed = summary_json(capsys, *model, "d=1", f"cp={cp}", "--zero", "3", "--precision", "bf16", "--flash", "--cp-variant",
                  "all-gather", "--recompute", "full", "--overlap", "grad,param")
    assert (got["step_time_s"], got["memory_bytes"]) == (typed["step_time_s"], typed["memory_bytes"])


def test_parallelism_config_replicas_shard_within_their_group(tmp_path, capsys):
    """dp_replicate 2 x dp_shard 2 x cp 2 on 8 processes: HSDP, FSDP over each replica's 2 x 2 shard and
    context ranks, the gradient shards all-reduced over the 2 replicas (``--shard 2`` of the 4 data ranks)."""
    text = (INPUTS / "accelerate_cp.yaml").read_text()
    text = text.replace("parallelism_config_cp_size: 8", "parallelism_config_cp_size: 2").replace(
        "parallelism_config_dp_replicate_size: 1", "parallelism_config_dp_replicate_size: 2").replace(
        "parallelism_config_dp_shard_size: 1", "parallelism_config_dp_shard_size: 2")
    (tmp_path / "hsdp.yaml").write_text(text)
    model = ["--preset", "llama-3-8b", "--set", "l=8192"]
    got = summary_json(capsys, *model, "--accelerate", str(tmp_path / "hsdp.yaml"))
    assert (got["layout"]["d"], got["layout"]["cp"], got["layout"]["shard"]) == (4, 2, 2)
    typed = summary_json(capsys, *model, "d=4", "cp=2", "--zero", "3", "--shard", "2", "--precision", "bf16", "--flash",
                  "--cp-variant", "all-gather", "--recompute", "full", "--overlap", "grad,param")
    assert (got["step_time_s"], got["memory_bytes"]) == (typed["step_time_s"], typed["memory_bytes"])
    (tmp_path / "eight.yaml").write_text(text.replace("num_processes: 8", "num_processes: 16"))
    assert "dp_replicate x dp_shard x tp x cp x sp = 8 is not the 16 processes" in summary_error(
        capsys, *model, "--accelerate", str(tmp_path / "eight.yaml"))


@pytest.mark.parametrize("name, devices", [("accelerate_fp8.yaml", 1)])
def test_accelerate_fp8_with_transformer_engine_as_typed(capsys, name, devices):
    """accelerate's fp8 template: mixed_precision fp8 with backend TE is Transformer Engine's DelayedScaling (an
    amax history of 1,024, the file's) under bf16 autocast, as typed by hand; the LM head, which accelerate's
    convert_model swaps too, noted as counted in 16 bits."""
    model = ["--preset", "llama-3-8b", "--set", "l=2048"]
    got = summary_json(capsys, *model, "--accelerate", str(INPUTS / name))
    assert (got["layout"]["precision"], got["layout"]["fp8"], got["layout"]["d"]) == ("bf16", "delayed", devices)
    typed = summary_json(capsys, *model, f"d={devices}", "--precision", "bf16", "--fp8", "delayed", "--fp8-amax-history",
                  "1024", *(["--overlap", "grad"] if devices > 1 else []))
    assert (got["step_time_s"], got["memory_bytes"]) == (typed["step_time_s"], typed["memory_bytes"])
    assert any(n.startswith("fp8_config backend TE") and "the LM head too" in n for n in got["notes"])


def test_accelerate_0_34_fp8_config_refused_as_accelerate_refuses_it(capsys):
    """accelerate's 0.34 test config writes ``override_linear_precision: (false, false, false)``, which YAML
    reads as text.  accelerate 1.x refuses it under TE: ``accelerate launch`` copies fp8_config into
    ``args.fp8_override_linear_precision``, ``utils/launch.py``'s ``setup_fp8_env`` exports ``str(value[0])``
    (the character ``(``) as ACCELERATE_FP8_OVERRIDE_FPROP, and ``TERecipeKwargs.__post_init__`` reads it with
    ``parse_flag_from_env``, whose ``str_to_bool`` raises ``invalid truth value (``.  (This file was read as
    all-FP8 before; the framework does not run it, so neither does the reader.)"""
    said = summary_error(capsys, "--preset", "llama-3-8b", "--accelerate", str(INPUTS / "accelerate_0_34_0_fp8.yaml"))
    assert "override_linear_precision must be three flags" in said and "str_to_bool" in said


def test_accelerate_fp8_te_history_defaults_to_its_recipe_s(tmp_path, capsys):
    """An fp8_config naming only its backend takes TERecipeKwargs' amax history, 1,024; the history under the
    name ``accelerate config`` writes (amax_history_length) does not reach the recipe (noted), so 1,024 again."""
    model = ["--preset", "llama-3-8b", "--set", "l=2048"]
    typed = summary_json(capsys, *model, "--precision", "bf16", "--fp8", "delayed", "--fp8-amax-history", "1024")
    for extra in ("", "  amax_history_length: 16\n"):
        (tmp_path / "te.yaml").write_text('distributed_type: "NO"\nmixed_precision: fp8\nfp8_config:\n  backend: TE\n'
                                          + extra)
        got = summary_json(capsys, *model, "--accelerate", str(tmp_path / "te.yaml"))
        assert got["memory_bytes"] == typed["memory_bytes"]
    assert any(n.startswith("fp8_config.amax_history_length: accelerate passes it as") for n in got["notes"])


def test_accelerate_fp8_with_torchao_and_what_it_refuses(tmp_path, capsys):
    """backend AO under FSDP2: torchao's tensor-wise float8 with FSDP2's FP8 all-gather (AORecipeKwargs'
    default), as typed; MS-AMP, a config naming no backend and products kept in 16 bits are refused by name;
    a Trainer's bf16 replaces the launch config's fp8 (ACCELERATE_MIXED_PRECISION)."""
    (tmp_path / "ao.yaml").write_text("distributed_type: FSDP\nmixed_precision: fp8\nnum_processes: 8\nfsdp_config:\n"
                                      "  fsdp_version: 2\nfp8_config:\n  backend: AO\n")
    model = ["--preset", "llama-3-8b", "--set", "l=2048"]
    got = summary_json(capsys, *model, "--accelerate", str(tmp_path / "ao.yaml"))
    assert (got["layout"]["fp8"], got["layout"]["fp8_gather"], got["layout"]["zero"]) == ("torchao-tensorwise", True, 3)
    typed = summary_json(capsys, *model, "d=8", "--zero", "3", "--precision", "bf16", "--fp8", "torchao-tensorwise",
                  "--fp8-gather", "--overlap", "grad,param")
    assert (got["step_time_s"], got["memory_bytes"]) == (typed["step_time_s"], typed["memory_bytes"])
    for section, said in (("  backend: MSAMP\n", "MS-AMP's FP8 weights"), ("  margin: 0\n", "give TE or AO"),
                          ("  backend: TE\n  override_linear_precision: [true, false, false]\n", "kept in 16 bits"),
                          # accelerate's TERecipeKwargs: a format of its three, three override flags, switches
                          # str_to_bool reads (it raises on anything else)
                          ("  backend: TE\n  fp8_format: E3M4\n", "fp8_format must be one of HYBRID, E4M3, E5M2"),
                          ("  backend: TE\n  override_linear_precision: [false]\n", "must be three flags"),
                          ("  backend: TE\n  use_mxfp8_block_scaling: maybe\n", "must be true or false, got 'maybe'"),
                          ("  backend: AO\n  enable_fsdp_float8_all_gather: 2\n", "must be true or false, got 2")):
        (tmp_path / "bad.yaml").write_text("distributed_type: MULTI_GPU\nmixed_precision: fp8\nnum_processes: 8\n"
                                           "fp8_config:\n" + section)
        assert said in summary_error(capsys, *model, "--accelerate", str(tmp_path / "bad.yaml"))
    both = summary_json(capsys, "--preset", "llama-3-8b", "--accelerate", str(INPUTS / "accelerate_fp8.yaml"),
                 "--hf-training-args", str(INPUTS / "handbook_sft_config_full.yaml"))
    assert both["layout"]["fp8"] is None and any("replaces the launch config's mixed_precision fp8" in n
                                                  for n in both["notes"])


def test_alst_sequence_parallelism_as_typed(capsys):
    """TRL's alst_ulysses_4gpu.yaml: DeepSpeed ZeRO-3 on 4 processes, sp_size 2 (DeepSpeed's Ulysses
    sequence parallelism, ALST): each sequence split over 2 ranks with q, k, v and the output exchanged
    all-to-all around FlashAttention-2's core (sp_attn_implementation), 4 / 2 = 2 data-parallel ranks,
    ZeRO over all 4: the layout typed by hand; the key accelerate does not pass on (the sequence-parallel
    data type) and DeepSpeed's fp32 gradient reductions noted."""
    model = ["--preset", "llama-3-8b", "--set", "l=8192"]
    got = summary_json(capsys, *model, "--accelerate", str(INPUTS / "trl_alst_ulysses_4gpu.yaml"))
    layout = got["layout"]
    assert (layout["d"], layout["cp"], layout["cp_variant"], layout["zero"], layout["attention_kernel"]) == \
        (2, 2, "ulysses", 3, "flash-attention-2")
    typed = summary_json(capsys, *model, "d=2", "cp=2", "--zero", "3", "--precision", "bf16", "--flash", "--cp-variant",
                  "ulysses", "--attention-kernel", "flash-attention-2", "--overlap", "grad,param")
    assert (got["step_time_s"], got["memory_bytes"]) == (typed["step_time_s"], typed["memory_bytes"])
    assert any(n.startswith("deepspeed_config.seq_parallel_communication_data_type: accelerate launch passes")
               for n in got["notes"])
    assert any(n.startswith("DeepSpeed reduces the gradients in fp32") for n in got["notes"])


@pytest.mark.parametrize("change, said", [
    (("distributed_type: DEEPSPEED", "distributed_type: FSDP"), "runs under distributed_type DEEPSPEED, not FSDP"),
    (("parallelism_config_tp_size: 1", "parallelism_config_tp_size: 2"), "tensor parallelism is not modelled"),
    (("parallelism_config_sp_size: 2", "parallelism_config_sp_size: 3"), "sp_size 3 does not divide the 4"),
    (("flash_attention_2", "eager"), "sp_attn_implementation 'eager'"),
])
def test_alst_layouts_deepspeed_does_not_run_are_refused(tmp_path, capsys, change, said):
    """ALST outside DeepSpeed, beside tensor parallelism, over a group that does not divide the processes, or
    around an attention core accelerate's DeepSpeedSequenceParallelConfig does not take: refused by name."""
    (tmp_path / "alst.yaml").write_text((INPUTS / "trl_alst_ulysses_4gpu.yaml").read_text().replace(*change))
    assert said in summary_error(capsys, "--preset", "llama-3-8b", "--set", "l=8192", "--accelerate",
                          str(tmp_path / "alst.yaml"))


def test_alst_keeps_its_attention_beside_a_recipe(tmp_path, capsys):
    """ALST with a handbook recipe turned to eager attention (``attn_implementation: eager``):
    DeepSpeed's UlyssesSPAttentionHF replaces the model's attention and runs sp_attn_implementation's
    core, so the launch config's FlashAttention-2 stays, noted."""
    recipe = (INPUTS / "handbook_sft_config_full.yaml").read_text()
    (tmp_path / "eager.yaml").write_text(recipe.replace("attn_implementation: flash_attention_2",
                                                        "attn_implementation: eager"))
    got = summary_json(capsys, "--preset", "llama-3-8b", "--accelerate", str(INPUTS / "trl_alst_ulysses_4gpu.yaml"),
                "--hf-training-args", str(tmp_path / "eager.yaml"))
    assert (got["layout"]["cp_variant"], got["layout"]["flash"], got["layout"]["attention_kernel"]) == \
        ("ulysses", True, "flash-attention-2")
    assert any(n.startswith("the recipe's attn_implementation gives way") for n in got["notes"])


def test_a_trl_recipe_names_its_processes_and_its_launch(capsys, tmp_path):
    """TRL's CLI page: ``num_processes: 4`` goes to ``accelerate launch`` (4 devices), ``accelerate_config:
    zero2`` to its packaged ``trl/accelerate_configs/zero2.yaml`` (DeepSpeed ZeRO-2 on 8 processes, bf16), a
    dataset mixture changes nothing; the typed layout of each."""
    model = ["--preset", "llama-3-8b"]
    four = summary_json(capsys, *model, "--hf-training-args", str(INPUTS / "trl_clis_sft_num_processes.yaml"))
    assert four["layout"]["d"] == 4 and any(n.startswith("num_processes 4") for n in four["notes"])
    zero2 = summary_json(capsys, *model, "--hf-training-args", str(INPUTS / "trl_clis_sft_accelerate_config.yaml"))
    assert (zero2["layout"]["d"], zero2["layout"]["zero"], zero2["layout"]["precision"]) == (8, 2, "bf16")
    (tmp_path / "zero2.yaml").write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\n"
                                        "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text((INPUTS / "trl_clis_sft_accelerate_config.yaml").read_text().replace(
        "accelerate_config: zero2", "accelerate_config: " + str(tmp_path / "zero2.yaml")))
    by_file = summary_json(capsys, *model, "--hf-training-args", str(recipe))
    given = summary_json(capsys, *model, "--hf-training-args", str(INPUTS / "trl_clis_sft_accelerate_config.yaml"),
                  "--accelerate", str(tmp_path / "zero2.yaml"))
    for other in (by_file, given):
        assert (other["layout"], other["step_time_s"], other["memory_bytes"]) == \
            (zero2["layout"], zero2["step_time_s"], zero2["memory_bytes"])
    mixture = summary_json(capsys, *model, "--hf-training-args", str(INPUTS / "trl_clis_sft_datasets.yaml"))
    assert mixture["layout"]["d"] == 1
    recipe.write_text("accelerate_config: zero4\n")
    assert "accelerate_config 'zero4': neither a file nor one of TRL's packaged configs" in summary_error(
        capsys, *model, "--hf-training-args", str(recipe))


def test_tpu_pod_commands_change_no_count(tmp_path, capsys):
    """accelerate's tests/test_configs/latest.yaml holds commands and command_file, what `accelerate tpu-config`
    runs on a TPU pod's hosts: read as the file without them (they were refused as unread keys)."""
    plain = summary_json(capsys, "--preset", "gpt2", "--accelerate", _accelerate(tmp_path))
    pod = _accelerate(tmp_path, "distributed_type: FSDP", "commands: null\ncommand_file: run.sh\ndistributed_type: FSDP")
    assert summary_json(capsys, "--preset", "gpt2", "--accelerate", pod)["layout"] == plain["layout"]


def test_an_unquoted_no_is_told_apart_from_the_word(tmp_path, capsys):
    """YAML reads ``distributed_type: NO`` and ``mixed_precision: no`` unquoted as false, which accelerate's own
    ``DistributedType`` refuses; the refusal said "distributed_type False" without the cause."""
    for old, new, key in (("distributed_type: FSDP", "distributed_type: NO", "distributed_type"),
                          ("mixed_precision: 'bf16'", "mixed_precision: no", "mixed_precision")):
        err = summary_error(capsys, "--preset", "gpt2", "--accelerate", _accelerate(tmp_path, old, new))
        assert f"{key} False: YAML reads an unquoted NO or no as false; quote it" in err


def test_unset_ignored_modules_are_accepted_and_set_ones_refused(tmp_path, capsys):
    """accelerate's own ``tests/test_configs/latest_fsdp.yaml`` (the file ``accelerate config`` writes)
    holds ``fsdp_ignored_modules: null``; the plugin acts only on a value that is not ``None``
    (``FullyShardedDataParallelPlugin.__post_init__``), so null changes nothing, and modules left
    unsharded are refused by name."""
    unset = _accelerate(tmp_path, "fsdp_use_orig_params: true",
                        "fsdp_use_orig_params: true\n  fsdp_ignored_modules: null")
    got = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", unset, "--set", "b=4", "l=2048")
    assert got == summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", _accelerate(tmp_path), "--set", "b=4", "l=2048")
    given = _accelerate(tmp_path, "fsdp_use_orig_params: true",
                        "fsdp_use_orig_params: true\n  fsdp_ignored_modules: lm_head")
    err = summary_error(capsys, "--hf-config", LLAMA32, "--accelerate", given)
    assert "fsdp_config.fsdp_ignored_modules 'lm_head'" in err and len(err.strip().splitlines()) == 1


def test_a_file_without_num_processes_needs_the_devices(tmp_path, capsys):
    """accelerate's ``examples/slurm/fsdp_config.yaml`` has no ``num_processes``: ``ClusterConfig``
    defaults it to -1 and ``accelerate launch`` raises "You need to manually pass in --num_processes"
    (``commands/launch.py``), so the reader asks for ``--devices`` instead of reading one process."""
    config = _accelerate(tmp_path, "num_processes: 2\n", "")
    assert "give --devices" in summary_error(capsys, "--hf-config", LLAMA32, "--accelerate", config)
    got = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", config, "--devices", "16", "--set", "b=4", "l=2048")
    assert got["world_size"] == 16 and not any("replaces" in note for note in got["notes"])
    accelerate = pytest.importorskip("accelerate")
    assert accelerate.commands.config.config_args.ClusterConfig.num_processes == -1


def test_an_inline_deepspeed_config_beside_fsdp_is_ignored_as_accelerate_ignores_it(tmp_path, capsys):
    """accelerate reads deepspeed_config under distributed_type DEEPSPEED only (its launch builds the
    DeepSpeedPlugin there alone): beside FSDP it changes nothing, and is noted (it was refused)."""
    config = _accelerate(tmp_path, "distributed_type: FSDP", "deepspeed_config:\n  zero_stage: 2\n"
                                                             "distributed_type: FSDP")
    got = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", config)
    plain = summary_json(capsys, "--hf-config", LLAMA32, "--accelerate", _accelerate(tmp_path))
    assert got["layout"] == plain["layout"] and got["step_time_s"] == plain["step_time_s"]
    assert any(note.startswith("deepspeed_config: accelerate reads it under distributed_type DEEPSPEED only")
               for note in got["notes"])


def test_fsdp_offload_alone_is_read_as_the_pinned_transformers_reads_it(tmp_path):
    """Issue 65 said transformers refuses ``fsdp: "offload"`` alone; the pinned transformers (5.23)
    accepts it as FSDP (version 2, resharding after forward) with the parameters on the host."""
    from symbolic_cost.models.hf_trainer import fsdp_options
    ours = fsdp_options("offload", {})
    assert ours == {"fsdp_version": 2, "fsdp_reshard_after_forward": True, "fsdp_offload_params": True}
    transformers = pytest.importorskip("transformers")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), fsdp="offload")
    assert args.fsdp and args.fsdp_config["cpu_offload"] is True and args.fsdp_config.get("version", 2) == 2


def test_torchtitan_context_parallelism(capsys, tmp_path):
    """llama3_8b.toml with context_parallel_degree = 2 on 8 processes: torchtitan's rule replicate x shard x cp x
    tp x pp = world leaves a shard degree of 4; FSDP shards (and reduces gradients) over the shard x context ranks,
    8; each sequence of 8,192 split over 2 ranks, the keys and values all-gathered (PyTorch's default rotation)
    or passed round the ring (``alltoall``)."""
    text = pathlib.Path(TITAN["llama3_8b"]).read_text().replace("context_parallel_degree = 1",
                                                                   "context_parallel_degree = 2")
    text = text.replace('selective_ac_option = "op"', 'selective_ac_option = "2"')
    path = tmp_path / "cp.toml"
    path.write_text(text)
    got = json.loads(_out(capsys, "summary", "--torchtitan", str(path), "--devices", "8", "--json"))
    layout = got["layout"]
    assert (layout["cp"], layout["cp_variant"], layout["d"], layout["zero"], layout["l"]) == (2, "all-gather", 4, 3,
                                                                                             8192)
    assert {c["group"] for c in got["collectives"] if c["dimension"] == "data"} == {8}
    assert {c["group"] for c in got["collectives"] if c["dimension"] == "context"} == {2}
    ring = tmp_path / "ring.toml"
    ring.write_text(text.replace("[parallelism]", '[parallelism]\ncontext_parallel_rotate_method = "alltoall"'))
    got = json.loads(_out(capsys, "summary", "--torchtitan", str(ring), "--devices", "8", "--json"))
    assert got["layout"]["cp_variant"] == "ring"
    for change, refused in ((('[parallelism]', '[parallelism]\ncontext_parallel_load_balancer = "ptrr"'),
                             "head-tail"),
                            (('[parallelism]', '[parallelism]\ncontext_parallel_rotate_method = "ring"'),
                             "allgather and alltoall")):
        (tmp_path / "bad.toml").write_text(text.replace(*change))
        assert refused in summary_error(capsys, "--torchtitan", str(tmp_path / "bad.toml"), "--devices", "8")
    assert "replicate x context x tensor x pipeline = 2" in summary_error(capsys, "--torchtitan", str(path), "--devices", "7")


def test_a_llama_factory_configuration_is_read_as_such(tmp_path, capsys):
    """LLaMA-Factory's examples/train_lora/*.yaml (hiyouga/LLaMA-Factory at ff6d4d1) wrap the Trainer's fields
    in its own (stage, finetuning_type, cutoff_len): read as LLaMA-Factory runs them (models.llamafactory;
    tests/test_llamafactory.py), not refused at its first key."""
    path = tmp_path / "qwen3_lora_sft.yaml"
    path.write_text("model_name_or_path: Qwen/Qwen3-4B\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
                    "lora_rank: 8\nlora_target: all\ndataset: identity\ntemplate: qwen3\ncutoff_len: 2048\n"
                    "output_dir: saves/qwen3\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 8\n"
                    "bf16: true\n")
    got = summary_json(capsys, "--preset", "llama-3-8b", "--hf-training-args", str(path))
    assert (got["layout"]["b"], got["layout"]["micro_batches"], got["layout"]["l"]) == (1, 8, 2048)
    assert any("LLaMA-Factory's stage sft, lora fine-tuning" in note for note in got["notes"])


def test_an_axolotl_configuration_is_named_as_such(tmp_path, capsys):
    """axolotl's examples/llama-3/lora-1b.yml (axolotl-ai-cloud/axolotl at 067b021) names its fields its
    own way (base_model, micro_batch_size, sequence_len, adapter): refused saying whose format it is, not
    at a field TrainingArguments would misread (its lora_r beside no use_peft)."""
    path = tmp_path / "lora-1b.yml"
    path.write_text("base_model: NousResearch/Llama-3.2-1B\nadapter: lora\nsequence_len: 2048\nlora_r: 16\n"
                    "gradient_accumulation_steps: 2\nmicro_batch_size: 2\noptimizer: adamw_8bit\nbf16: auto\n")
    err = summary_error(capsys, "--preset", "llama-3-8b", "--hf-training-args", str(path))
    assert "an axolotl configuration" in err and "lora_r" not in err.split("(")[0]


def test_an_fsdp_section_beside_another_distributed_type_is_noted(tmp_path, capsys):
    """accelerate's tests/test_configs/validate_launch_cmd.yaml holds an fsdp_config beside distributed_type NO:
    accelerate launch turns FSDP on only for distributed_type FSDP (launch.py: use_fsdp), so the section is
    ignored, as deepspeed_config is elsewhere; noted, not refused."""
    path = tmp_path / "mg.yaml"
    path.write_text("distributed_type: MULTI_GPU\nfsdp_config:\n  fsdp_version: 2\nmixed_precision: bf16\n"
                    "num_processes: 8\n")
    got = summary_json(capsys, "--preset", "gpt2", "--accelerate", str(path))
    assert got["layout"]["zero"] == 0 and any(n.startswith("fsdp_config: accelerate reads it under") for n in
                                              got["notes"])


def test_a_reader_setting_that_no_option_reads_is_an_error_not_silence(capsys, monkeypatch):
    # a misspelt policy key ("recompte") would otherwise be set on the arguments and never read
    import symbolic_cost.models.megatron_args as megatron_args
    real = megatron_args.megatron_setup

    def misspelt(*args, **kwargs):
        found = real(*args, **kwargs)
        return replace(found, policy={**found.policy, "recompte": "full"})
    monkeypatch.setattr(megatron_args, "megatron_setup", misspelt)
    assert main(["summary", "--megatron-args", LLAMA, "--devices", "8"]) != 0
    assert "internal error: RuntimeError: --megatron-args's reader gave recompte, which no option reads" in \
        capsys.readouterr().err


def test_flash_options_typed_as_transformers_default_are_refused(capsys):
    """Beside a TrainingArguments file that names no attention, transformers runs sdpa (fused, its
    FlashAttention-2 backend first): --flash and --attention-kernel flash-attention-2 would change
    nothing, so they are refused by name; --no-flash (eager) and another library act."""
    base = ["--preset", "gpt2", "--hf-training-args", str(INPUTS / "alpaca_training_args.json"), "--set", "l=512"]
    assert "--flash: transformers' default attention, sdpa, is fused already" in summary_error(capsys, *base, "--flash")
    assert "--attention-kernel flash-attention-2: transformers' default attention, sdpa, runs it already" in \
        summary_error(capsys, *base, "--attention-kernel", "flash-attention-2")
    plain = summary_json(capsys, *base)
    assert summary_json(capsys, *base, "--no-flash")["layout"]["flash"] is False and plain["layout"]["flash"] is True
    assert summary_json(capsys, *base, "--attention-kernel", "cudnn")["layout"]["attention_kernel"] == "cudnn"


def _refused(capsys, argv, *named):
    """Run the command line: exit status 2, one line on stderr naming each of ``named``."""
    status, err = main(argv), capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert all(name in err for name in named), err


def test_torchtitans_first_toml_generation_is_read_as_published(capsys, tmp_path):
    """Issue 65: torchtitan's TOMLs before its [parallelism] section (2024 to 2025-03-18) kept the
    layout under [training] and [experimental], and float8 as ``[float8] enable_float8_linear``; the
    same keys moved, so a file of that generation reads as its later spelling.  The 8B file of
    2024-08 (a preset for 64 GPUs) is Llama 3 8B (8,030,261,248 parameters, Meta's count) sharded
    over all 64 with one 8,192-token sequence a device and op-level recomputation; its float8 switch
    turned on (with full recomputation) is torchao's tensor-wise float8.  The 405B file of 2025-02
    (``converters = "float8"``, a comma list) runs 8-way tensor parallel over 128 GPUs, leaving 16
    shards, two sequences a device, full recomputation, FP8 weights gathered."""
    inputs = INPUTS

    def layout(path, devices):
        assert main(["summary", "--torchtitan", str(path), "--devices", str(devices), "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert any("first generation" in note for note in got["notes"])
        return got["parameters"], got["layout"]

    eight = inputs / "llama3_8b_2024-08.toml"
    parameters, got = layout(eight, 64)
    assert parameters == 8_030_261_248
    assert (got["b"], got["l"], got["m1"], got["d"], got["p"], got["zero"], got["recompute"], got["fp8"]) == \
        (1, 8192, 1, 64, 1, 3, "op", None)
    float8 = tmp_path / "float8.toml"
    float8.write_text(eight.read_text().replace("enable_float8_linear = false", "enable_float8_linear = true")
                      .replace("mode = 'selective'", "mode = 'full'"))    # that generation's op-level SAC: refused
    assert layout(float8, 64)[1]["fp8"] == "torchao-tensorwise"
    parameters, got = layout(inputs / "llama3_405b_2025-02.toml", 128)
    assert (got["b"], got["m1"], got["d"], got["recompute"], got["fp8"], got["fp8_gather"]) == \
        (2, 8, 16, "full", "torchao-tensorwise", True)


@pytest.mark.parametrize("change,edit,named,why", [
    ("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 2", "[experimental] pipeline_parallel_degree",
     "cut the layers evenly"),
    ("pipeline_parallel_degree = 1", 'pipeline_parallel_degree = "1"', "[experimental] pipeline_parallel_degree",
     "must be an integer"),
    ("\n[training]\n", "\n[training]\nenable_loss_parallel = false\n", "[training] enable_loss_parallel",
     "loss parallel"),
    ("\n[training]\n", "\n[training]\ndisable_loss_parallel = true\n", "[training] disable_loss_parallel",
     "loss parallel"),
    ("[checkpoint]", "[parallelism]\ntensor_parallel_degree = 2\n\n[checkpoint]", "[training] tensor_parallel_degree",
     "give one"),
    ("\n[training]\n", "\n[training]\ndata_parallel_shard_degree = 8\n", "[training] data_parallel_shard_degree",
     "beside [training] data_parallel_degree"),
    ("enable_float8_linear = false", 'enable_float8_linear = "true"', "[float8] enable_float8_linear",
     "true or false"),
    ("[float8]", '[float8]\nscaling_type_weight = "delayed"', "[float8] scaling_type_weight", "delayed scaling"),
    ("\n[model]\n", '\n[model]\nconverters = ["float8"]\n', "[float8] enable_float8_linear", "give one"),
    ("enable_float8_linear = false", "enable_float8_linear = true", "[activation_checkpoint] selective_ac_option",
     "did not hold aten._scaled_mm")])
def test_what_torchtitans_first_generation_meant_otherwise_is_refused(capsys, tmp_path, change, edit, named, why):
    """A first-generation pipeline (its even cut and its stage-count micro-batches are not read),
    loss parallelism turned off either way, one setting written twice, a key of the wrong kind
    (named as the file writes it), 2024's delayed float8 scaling, the float8 switch beside the next
    generation's converters, and float8 under the op-level policy (whose save list of 2024 to 2025-02,
    at 34fa017b8 and 57387af0e, lacks ``aten._scaled_mm``) are refused by name."""
    text = (INPUTS / "llama3_8b_2024-08.toml").read_text()
    if "scaling_type" in edit:              # delayed scaling matters where float8 runs
        text = text.replace("enable_float8_linear = false", "enable_float8_linear = true")
    assert change in text
    path = tmp_path / "edited.toml"
    path.write_text(text.replace(change, edit, 1))
    _refused(capsys, ["summary", "--torchtitan", str(path), "--devices", "64"], named, why)


def test_torchtitans_first_generation_trains_in_fp32_without_fsdp(capsys, tmp_path):
    """torchtitan cast to bfloat16 through FSDP's MixedPrecisionPolicy alone until 0b44d4c43
    (2025-06-16): the 2024-08 8B file on 8 devices with 8-way tensor parallelism (one shard, no FSDP)
    trains in fp32, noted; over 64 devices, FSDP's 64 shards cast to bf16."""
    path = tmp_path / "tp8.toml"
    path.write_text((INPUTS / "llama3_8b_2024-08.toml").read_text()     # full recomputation: op-level SAC has no TP
                    .replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 8")
                    .replace("mode = 'selective'", "mode = 'full'"))
    assert main(["summary", "--torchtitan", str(path), "--devices", "8", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["layout"]["precision"], got["layout"]["zero"], got["layout"]["m1"]) == ("fp32", 0, 8)
    assert any("trains in fp32" in note for note in got["notes"])
    assert main(["summary", "--torchtitan", str(INPUTS / "llama3_8b_2024-08.toml"), "--devices", "64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"]["precision"] == "bf16"


def test_a_deepspeed_launch_of_megatron_is_read_with_its_process_count(capsys):
    """DeepSpeedExamples' Megatron-LM v1.1.5 script: ``deepspeed --num_nodes 1 --num_gpus 16`` starts
    16 processes, and ``${@:2}`` (the script's arguments from the second) is nothing, as ``"$@"``.
    GPT-2 of 40 layers, width 1,600, 1,024 positions, the GPT-2 vocabulary of 50,257 padded to 50,304
    (a multiple of 128): 40 (12 x 1600^2 + 13 x 1600) + 50,304 x 1600 + 1024 x 1600 + 2 x 1600
    = 1,311,760,000 parameters, by hand; eight sequences a process, fp16, full recomputation
    (``--checkpoint-activations``)."""
    path = INPUTS / "deepspeed_megatron_run_gpt.sh"
    assert main(["summary", "--megatron-args", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["parameters"] == 40 * (12 * 1600**2 + 13 * 1600) + 50_304 * 1600 + 1024 * 1600 + 2 * 1600 \
        == 1_311_760_000
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["d"], layout["m1"], layout["precision"], layout["recompute"]) == \
        (8, 1024, 16, 1, "fp16", "full")


@pytest.mark.parametrize("launch,processes", [("deepspeed --num_gpus 4 --num_nodes 2", 8),
                                              ("deepspeed --num_accelerators=8", 8),
                                              ("deepspeed --hostfile hosts --num_gpus 4", None),
                                              ("deepspeed --include localhost:0,1", None),
                                              ("deepspeed", None)])
def test_deepspeeds_launcher_counts_gpus_a_node_times_nodes(launch, processes):
    """DeepSpeed's runner (``deepspeed/launcher/runner.py``): ``--num_gpus`` (or ``--num_accelerators``)
    a node on ``--num_nodes`` nodes, the local node alone without a hostfile; every GPU of a host, a
    hostfile's hosts, or the GPUs ``--include`` names are not known from the line; ``--include``
    beside a count is refused, as DeepSpeed refuses it."""
    from symbolic_cost.checks import InputError
    from symbolic_cost.models.megatron_words import world_size
    assert world_size(launch.split() + ["pretrain_gpt.py"]) == processes
    with pytest.raises(InputError, match="--include beside --num_gpus"):
        world_size("deepspeed --include localhost:0,1 --num_gpus 16 pretrain_gpt.py".split())


PRECISION_AWARE = ("python3 pretrain_gpt.py --num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 512 "
                   "--max-position-embeddings 512 --micro-batch-size 1 --global-batch-size 8 --vocab-size 1024 --bf16 "
                   "--use-precision-aware-optimizer")


@pytest.mark.parametrize("options, state_bytes", [
    ("", 2 + 4 + 4),                                        # fp32 masters as 16-bit remainders, fp32 moments
    ("--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16", 2 + 2 + 2),
    ("--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --fp8-format hybrid --fp8-recipe tensorwise", 4 + 2 + 2),
    ("--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --fp8-format hybrid --fp8-recipe delayed", 2 + 2 + 2),
    ("--main-params-dtype fp16 --fp8-format hybrid --fp8-recipe tensorwise", 2 + 4 + 4),
])
def test_megatrons_precision_aware_optimizer_keeps_its_states_in_their_dtypes(tmp_path, capsys, options, state_bytes):
    """Megatron-Core's precision-aware optimizer (Transformer Engine's FusedAdam; megatron/core/optimizer at
    d98e8a6): the moments in --exp-avg-dtype and --exp-avg-sq-dtype; the master weights held by FusedAdam
    where --main-params-dtype is 16-bit or the run has no FP8 recipe but delayed scaling
    (``use_precision_aware_optimizer_no_fp8_or_ds_fp8``), an fp32 master of a bf16 weight as its low 16 bits
    (``store_param_remainders``, on by default: int16 shards in distrib_optimizer.py), else Megatron-Core's
    fp32 masters.  One process, so the optimizer's bytes are the state bytes a parameter times all of them."""
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/bash\n{PRECISION_AWARE} {options}\n")
    assert main(["summary", "--megatron-args", str(script), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["optimizer_bytes"] == state_bytes * got["parameters"]


@pytest.mark.parametrize("options, refused", [
    ("--exp-avg-dtype fp8", "fp8 moments"),
    ("--exp-avg-dtype bf16", "one size a moment"),
    ("--optimizer sgd", "adam only")])
def test_precision_aware_states_the_library_does_not_count_are_refused(tmp_path, capsys, options, refused):
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/bash\n{PRECISION_AWARE} {options}\n")
    _refused(capsys, ["summary", "--megatron-args", str(script)], refused)
    plain = tmp_path / "plain.sh"
    plain.write_text(f"#!/bin/bash\n{PRECISION_AWARE.replace(' --use-precision-aware-optimizer', '')} "
                     f"--exp-avg-dtype bf16\n")
    _refused(capsys, ["summary", "--megatron-args", str(plain)], "--exp-avg-dtype bf16 without")
    from symbolic_cost.models.training import Training
    for precision, master in (("fp32", True), ("fp16", True), ("bf16", False)):   # from Python too
        with pytest.raises(InputError, match="precision-aware Adam .* needs precision bf16 with master_weights"):
            Training(optimizer="adam-bf16-moments", precision=precision, master_weights=master)


def test_a_size_past_a_double_is_refused_whatever_file_gives_it(tmp_path, capsys):
    """A NeMo/Megatron-Bridge YAML's hidden_size of 10^21 printed collectives of 10^17 GiB: every reader's
    sizes meet the bound of config.json's (``Architecture``: at most 2**53)."""
    path = tmp_path / "huge.yaml"
    text = (pathlib.Path(__file__).parent / "framework_inputs" / "megatron_bridge_llama32_1b.yaml").read_text()
    assert "\n  hidden_size: 2048\n" in text
    path.write_text(text.replace("\n  hidden_size: 2048\n", "\n  hidden_size: 1000000000000000000000\n"))
    assert "must be at most 2**53" in summary_error(capsys, "--nemo-recipe", str(path), "--devices", "8")
