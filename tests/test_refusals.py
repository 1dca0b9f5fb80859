"""Issue 32's bugs, one test each: inputs that hung, options that were silently ignored, rules
that were skipped and impossible numbers.  Every refusal is exit status 2 with one line that
names the option (or an ``InputError`` naming the argument), within a few seconds."""

import contextlib
import json
import os
import pathlib
import types

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main


def refused(capsys, argv, *named):
    """Run the command line: exit status 2, one line on stderr naming each of ``named``."""
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for name in named:
        assert name in err, err
    return err


# hangs and memory blow-ups

@pytest.mark.parametrize("option", ["--set", "--at"])
def test_a_formula_that_expands_too_far_is_refused_before_any_work(capsys, option):
    err = refused(capsys, ["formula", option, "l=(e+f+h+b)**64"], option, "47,905 terms")
    assert "at most 100 terms" in err


def test_a_set_value_that_grows_through_another_is_refused(capsys):
    refused(capsys, ["formula", "--set", "l=(e+b+h)**4", "f=(l+e)**3"], "--set f", "terms")


def test_a_small_formula_is_still_read():
    from symbolic_cost.reader import read, size
    assert size(read("(e+f)**8")) == (8, 9)
    with pytest.raises(InputError, match="--where"):
        read("memory**70 <= 8", argument="--where", names={"memory": read("2*b")}, condition=True)


def test_a_power_of_a_number_is_bounded_as_the_number_written_out():
    """``2**70`` is the 22-digit number it is, as ``1180591620717411303424`` typed is; a power past
    10**30 is refused as that number typed is (it used to be refused for its exponent alone)."""
    from symbolic_cost.reader import read
    assert read("2**70") == read("1180591620717411303424") == 2**70
    for text in ("2**100", "10**31", "1180591620717411303424**2"):
        with pytest.raises(InputError, match="larger than 10\\*\\*30"):
            read(text, argument="--set b")
    with pytest.raises(InputError, match="exponent 70 is larger than 64"):
        read("b**70", argument="--set b", names={"b": read("2")})


@pytest.mark.parametrize("text", ["\u212f", "\uff42", "2*\u212f"])
def test_a_name_is_ascii(text):
    """Python's parser folds the script e (U+212F) and the full-width b (U+FF42) into the names e
    and b (NFKC); the reader refuses them instead of reading another symbol than the one shown."""
    from symbolic_cost.reader import read
    with pytest.raises(InputError, match="--set f: the non-ASCII character .* at position"):
        read(text, argument="--set f")


def test_a_name_given_as_a_plain_int_is_read_as_its_number():
    """``sweep --where 'e > 5'`` names the model's width, an ``int``: the condition is true, not
    refused as "a comparison outside a condition" (it was)."""
    from sympy import S as sympy_S
    from symbolic_cost.reader import read
    assert read("e > 5", argument="--where", names={"e": 768}, condition=True) is sympy_S.true
    assert read("2*e", argument="--set f", names={"e": 768}) == 1536


def test_hf_config_on_a_fifo_is_refused(capsys, tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    refused(capsys, ["summary", "--hf-config", str(fifo)], "--hf-config", "not a regular file")


def test_hf_config_on_a_link_to_dev_zero_is_refused(capsys, tmp_path):
    link = tmp_path / "config.json"
    link.symlink_to("/dev/zero")
    refused(capsys, ["summary", "--hf-config", str(link)], "--hf-config", "not a regular file")


def test_hf_config_naming_a_key_twice_is_refused(capsys, tmp_path):
    """Two hidden sizes in one config.json: JSON keeps the last without a word (found by a fuzz)."""
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2, "hidden_size": 8192}')
    for command in ("summary", "inference"):
        refused(capsys, [command, "--hf-config", str(config)], "--hf-config", "names 'hidden_size' twice in one object")


def test_a_yaml_naming_a_key_twice_is_refused(capsys, tmp_path):
    """accelerate's num_processes twice: its own loader keeps the last, without a word."""
    config = tmp_path / "accelerate.yaml"
    config.write_text("distributed_type: MULTI_GPU\nnum_processes: 8\nnum_processes: 16\nmixed_precision: bf16\n")
    refused(capsys, ["summary", "--preset", "llama-3-8b", "--accelerate", str(config)], "--accelerate",
            "names 'num_processes' twice in one mapping")


def test_an_output_through_a_symbolic_link_is_refused(capsys, tmp_path):
    """A link to a file that does not exist yet passed as "no file", and the sweep was written where it
    pointed, without --overwrite."""
    link = tmp_path / "rows.csv"
    link.symlink_to(tmp_path / "elsewhere.csv")
    refused(capsys, ["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--field", "total", "--out", str(link)],
            "--out", "is a symbolic link")
    assert not (tmp_path / "elsewhere.csv").exists()


def test_a_report_through_a_symbolic_link_is_refused(capsys, tmp_path):
    """``reproduce --reports`` wrote a report through a link in the folder, to wherever it pointed."""
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "lbnl-2024.md").symlink_to(tmp_path / "elsewhere.md")
    refused(capsys, ["reproduce", "lbnl-2024", "--reports", str(folder)], "reports", "is a symbolic link")
    assert not (tmp_path / "elsewhere.md").exists()


def test_hf_config_larger_than_the_cap_is_refused(tmp_path):
    from symbolic_cost.files import input_file
    big = tmp_path / "config.json"
    big.write_text("{}" + " " * 100)
    with pytest.raises(InputError, match="more than 10 bytes"):
        input_file(big, "--hf-config", limit=10)


def test_search_forks_no_more_processes_than_kernels(monkeypatch):
    import concurrent.futures
    from symbolic_cost.numeric import search
    started = []

    class Pool:
        def __init__(self, workers):
            started.append(workers)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def map(self, f, tasks):
            return map(f, tasks)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(search, "run_family", lambda task: [(1, 1, task[0])])
    monkeypatch.setattr(search, "CORES", 64)
    tasks = [("a", ("variant",)), ("b", ("variant",))]          # a task: (..., its family of variants, ...)
    assert [r[0][2] for r in search._run_all(tasks, False, 40, False)] == ["a", "b"]
    assert started == [2]
    assert list(search._run_all(tasks[:1], False, 40, False)) == [[(1, 1, "a")]] and started == [2]  # one: in process


# options silently ignored

def test_empty_hf_config_is_refused(capsys):
    refused(capsys, ["summary", "--hf-config", ""], "--hf-config", "expects a value")


def test_last_stage_layers_without_a_pipeline_is_refused(capsys):
    refused(capsys, ["summary", "--preset", "llama-2-7b", "--last-stage-layers", "4"], "--last-stage-layers", "p=1")


def test_lora_base_without_lora_rank_is_refused(capsys):
    refused(capsys, ["summary", "--preset", "gpt2", "--lora-base", "nf4"], "--lora-base", "--lora-rank")


def test_capacity_factor_on_a_dense_model_is_refused(capsys):
    refused(capsys, ["summary", "--preset", "gpt2", "--capacity-factor", "1.25"], "--capacity-factor", "experts")


@pytest.mark.parametrize("flag", ["--capacity-factor", "--expert-imbalance"])
@pytest.mark.parametrize("value", ["1/0", "nan", "-2", "1e400"])
def test_an_expert_factor_that_is_no_positive_number_is_refused_by_name(capsys, flag, value):
    refused(capsys, ["summary", "--preset", "gpt2", flag, value], flag, value)


def test_expert_parallelism_on_a_dense_model_is_refused(capsys):
    refused(capsys, ["summary", "--preset", "gpt2", "--set", "ep=2"], "ep applies to a mixture of experts")


def test_mla_on_a_model_without_latent_attention_is_refused(capsys):
    refused(capsys, ["inference", "--preset", "gpt2", "--mla", "recompute"], "--mla", "latent attention")


def test_inference_json_with_field_is_refused(capsys):
    refused(capsys, ["inference", "--preset", "gpt2", "--json", "--field", "ttft_s"], "--json", "--field")


def test_empty_out_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refused(capsys, ["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--out", ""], "--out", "expects a value")
    assert list(tmp_path.iterdir()) == []


# rules skipped

def test_at_applies_the_dimension_rules(capsys):
    refused(capsys, ["formula", "--block", "attention", "--set", "m1=1", "s1=1", "--at", "h=3", "e=100"],
            "--at", "h must divide e")


def test_training_refuses_sequences_beyond_the_context_as_serving_does(capsys):
    refused(capsys, ["summary", "--preset", "bert-base-uncased", "--set", "l=1024"], "512 tokens", "--allow-long")
    assert main(["summary", "--preset", "bert-base-uncased", "--set", "l=1024", "--allow-long"]) == 0
    capsys.readouterr()
    refused(capsys, ["inference", "--preset", "llama-2-7b", "--set", "l_in=5000"], "4096 tokens", "--allow-long")


def test_an_inference_grid_keeps_to_the_context_as_set_does(capsys):
    """llama-2-7b's context is 4,096 tokens: a grid's longest prompt with the default 128 tokens out
    (4,096 + 128 - 1 = 4,223), a decode step over 5,000 cached tokens, and one over 100 tokens after a
    512-token prompt are refused at that point, as --set refuses each; --allow-long lets the first go on."""
    line = ["inference", "--preset", "llama-2-7b", "--field", "tpot_s", "--grid"]
    refused(capsys, [*line, "l_in=512,4096"], "--grid at l_in=4096", "4223 tokens exceed the context")
    refused(capsys, [*line, "l_ctx=600,5000"], "--grid at l_ctx=5000", "5001 tokens exceed the context")
    refused(capsys, [*line, "l_ctx=100,1000"], "--grid at l_in=512, l_ctx=100", "fewer cached tokens")
    assert main([*line, "l_in=512,4096", "--allow-long"]) == 0
    assert "4096.0," in capsys.readouterr().out


@pytest.mark.parametrize("line, named", [
    # a survey of 450 command lines (issue 66): each was accepted and changed nothing, or sped the step up
    ("lstm --batch 64 --steps 20 --hidden 4096 --vocab 50000 --layers 2 --hlp 100", "hlp must be at most layers"),
    ("lstm --batch 64 --steps 20 --hidden 1024 --vocab 10000 --layers 2 --dp 128 --system h100",
     "dp must be at most batch (got dp=128, batch=64)"),
    ("summary --preset gpt2 --set b=8 --overlap expert", "overlap expert hides the MoE all-to-alls"),
    ("search --preset gpt2 --devices 8 --global-batch 64 --everything --zero 3", "--everything tries every ZeRO"),
    ("inference --preset llama-2-7b --speculative 4 --acceptance 0.7 --draft-preset llama-2-7b --set cp=2 --flash",
     "under context parallelism (cp=2) the prefill alone"),
    ("inference --preset llama-2-7b --field tpot_s --units si", "--units does not apply to --field"),
    ("optimize --preset gpt2 --field intensity", "choose a time or a count"),
    # other scripts' digits: int() reads "٨" as 8, and --set refuses it
    ("search --preset gpt2 --devices \u0668", "expects a number in ASCII digits"),
    ("inference --preset llama-2-7b --rate \u0663", "expects a number in ASCII digits"),
    ("plan --budget-flops \u0661e25", "expects a number in ASCII digits"),
    ("plan --preset llama-2-7b --seq 4096 --devices 8 --tokens 0.5", "--tokens 0.5 is fewer than one sequence"),
    ("optimize --preset gpt2 --over l --max 1100", "1100 tokens exceed the context of gpt2 (1024 tokens)"),
    ("summary --preset gpt2 --zero 1 --distributed-optimizer", "which --zero 1 and above do already"),
    ("search --preset gpt2 --devices 8 --zero 3 --shard 3", "--shard 3 divides no data-parallel degree of 8 devices"),
    # the messages named an internal symbol (_memory_bytes) and told --conventions of --lp's transfers
    ("sweep --preset gpt2 --grid b=1,2 --where memory_bytes", "--where: memory_bytes is not a condition"),
    ("lstm --batch 64 --steps 20 --hidden 4096 --vocab 50000 --layers 2 --conventions pytorch-eager",
     "--conventions does not change the step time or the memory here; it would be ignored"),
])
def test_options_that_would_be_ignored_or_misread_are_refused(line, named, capsys):
    refused(capsys, line.encode().decode("unicode_escape").split(), named)


def test_plan_keeps_a_given_model_within_its_context(capsys):
    """Llama 2 7B states 4,096 positions: plan's default of 8,192 tokens a sequence refused it unless --seq was
    given; a given model now plans at its context where that is shorter."""
    import json
    assert main(["plan", "--preset", "llama-2-7b", "--devices", "8", "--tokens", "1e12", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["seq"] == 4096


def test_a_crossover_batch_that_never_comes_is_said_in_words(capsys):
    """llama-2-7b's decode step at 512 + 128 tokens never turns compute-bound: SymPy's oo was printed."""
    assert main(["inference", "--preset", "llama-2-7b", "--field", "crossover_batch", "--set", "l_in=512",
                 "l_out=128"]) == 0
    assert capsys.readouterr().out.strip() == "crossover_batch = none: decode never turns compute-bound"


def test_a_layout_past_the_memory_says_so_before_its_times(capsys):
    """Llama 3 70B on one H100: 70.6 B parameters of 16 bytes each (bf16 weights and gradients, fp32 master
    and two Adam moments) are 1.13 TB against 80 GB; summary printed its step time and MFU with only "the
    largest micro-batch that fits: 0" to tell.  GPT-2 (124 M) fits and is not told so."""
    assert main(["summary", "--preset", "llama-3-70b"]) == 0
    assert "does not fit: the peak of" in capsys.readouterr().out
    assert main(["summary", "--preset", "gpt2"]) == 0
    assert "does not fit" not in capsys.readouterr().out
    # serving alike: Llama 2 7B's 13.5 GB of bf16 weights fit; a batch of 10,000 sequences of 640 tokens
    # (0.5 MiB of cache a token: 2 x 32 layers x 4096 x 2 bytes) needs 3.3 TB
    assert main(["inference", "--preset", "llama-2-7b"]) == 0
    assert "does not fit" not in capsys.readouterr().out
    assert main(["inference", "--preset", "llama-2-7b", "--set", "b=10000"]) == 0
    assert "does not fit: the peak of" in capsys.readouterr().out


def test_a_serving_search_no_layout_of_which_meets_the_slo_says_so(capsys):
    """A time to first token of 1 us: no step of Llama 2 7B is that short, so every layout sustains 0 requests/s;
    the ranked list said nothing more."""
    assert main(["inference", "--preset", "llama-2-7b", "--set", "l_in=467", "l_out=256", "--devices", "8",
                 "--slo-ttft", "1e-6"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("no layout meets the SLO")


def test_the_default_models_changed_shape_is_said(capsys):
    """table's default model is a shape --set may change; its header named it "gpt3-175b" at another width."""
    assert main(["table", "--block", "mlp", "--set", "e=8192"]) == 0
    assert capsys.readouterr().out.startswith("mlp of gpt3-175b with e set: ")
    assert main(["table", "--block", "mlp"]) == 0
    assert capsys.readouterr().out.startswith("mlp of gpt3-175b: ")


def test_block_commands_keep_to_the_model_they_name(capsys):
    """A block of a named model at a sequence past its context (bert-base-uncased: 512 tokens,
    max_position_embeddings) is refused as summary refuses it, and --allow-long lets it go on; the model's
    own dimensions are not --set (gpt2 is e 768, h 12: another width is another model)."""
    for command in (["table"], ["optimize"], ["formula", "--block", "mlp"], ["formula", "--total", "flops_fwd"]):
        line = [*command, "--preset", "bert-base-uncased", "--set", "l=1024"]
        refused(capsys, line, "1024 tokens exceed the context of bert-base-uncased (512 tokens)", "--allow-long")
        assert main([*line, "--allow-long"]) == 0
        capsys.readouterr()
    for fixed in ("n_layers=2", "f=4*e"):
        refused(capsys, ["table", "--preset", "gpt2", "--set", fixed], f"--set {fixed.split('=')[0]}",
                "not settable here")
    for command in (["table"], ["crossover"], ["formula", "--block", "attention"]):
        for fixed in ("e=1024", "h=7"):
            refused(capsys, [*command, "--preset", "gpt2", "--set", fixed], f"--set {fixed.split('=')[0]}",
                    "not settable here")


def test_serving_refuses_more_stages_than_whole_layers(capsys):
    refused(capsys, ["inference", "--preset", "llama-2-7b", "--set", "p=64"], "p must be at most n_layers")


def test_an_mlp_table_does_not_check_the_attention_heads(capsys):
    assert main(["table", "--block", "mlp", "--set", "e=8192"]) == 0
    assert "e=8192" in capsys.readouterr().out


# impossible numbers

def test_a_step_time_below_the_peak_bound_is_refused(capsys):
    refused(capsys, ["summary", "--preset", "gpt2", "--step-time", "0.0001"], "--step-time", "below the fastest")


def test_a_step_time_of_nan_is_refused(capsys):
    refused(capsys, ["summary", "--preset", "gpt2", "--step-time", "nan"], "--step-time", "not a finite number")


def test_an_unwritable_output_path_is_bad_input(capsys):
    refused(capsys, ["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--out", "/proc/no-such.csv"], "/proc/no-such.csv")


def test_max_batch_is_zero_when_the_weights_do_not_fit():
    from symbolic_cost.inference import Serving
    from symbolic_cost.inference.throughput import max_batch
    from symbolic_cost.models.config import preset
    assert max_batch(preset("gpt3-175b"), Serving(b=1, l_in=512, l_out=128)) == 0    # 350 GB of weights, 80 GB


def test_inference_json_says_null_where_the_text_says_never(capsys):
    assert main(["inference", "--preset", "gpt2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["crossover_batch"] is None and out["max_batch"] > 0
    assert main(["inference", "--preset", "gpt2"]) == 0
    assert "decode never turns compute-bound (" in capsys.readouterr().out
    assert main(["inference", "--preset", "gpt3-175b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_batch"] == 0


def test_kv_cache_bytes_refuses_a_negative_batch():
    from symbolic_cost.inference.kv_cache import kv_cache_bytes
    from symbolic_cost.models.config import preset
    with pytest.raises(InputError, match="b must be a positive integer"):
        kv_cache_bytes(preset("llama-2-7b"), -1, 10)
    with pytest.raises(InputError, match="tokens must be a non-negative integer"):
        kv_cache_bytes(preset("llama-2-7b"), 1, -10)


@pytest.mark.parametrize("call,name", [
    (lambda c, k, s: c.traffic("allreduce", 0, 8), "n"),
    (lambda c, k, s: c.traffic("allgather", 4, -8), "tensor_bytes"),
    (lambda c, k, s: c.time("allreduce", 4, 8, -1, 0), "bandwidth"),
    (lambda c, k, s: c.time("allreduce", 4, 8, 1, -1), "latency"),
    (lambda c, k, s: c.hierarchical_time("allreduce", 0, 8, 1, (1, 0), (1, 0)), "n"),
    (lambda c, k, s: k.gemm(-4, 4, 4, s), "m"),
    (lambda c, k, s: k.tiled_traffic(4, -4, 4, 128, 2), "k"),
    (lambda c, k, s: k.reloads(4, 4, 4, 0), "tile"),
    (lambda c, k, s: s, None),
])
def test_collectives_kernels_and_ring_attention_refuse_empty_and_negative_sizes(call, name):
    from symbolic_cost.parallel import collectives
    from symbolic_cost.parallel.sequence import ring_attention
    from symbolic_cost.timing import kernels
    from symbolic_cost.timing.hardware import get_system
    if name is None:                      # ring attention: sequence, shards, batch
        for args, bad in (((1, 0, 64, 8, 2), "l"), ((1, 64, 64, 8, 0), "c"), ((-1, 64, 64, 8, 2), "b")):
            with pytest.raises(InputError) as error:
                ring_attention(*args)
            assert error.value.argument == bad
        return
    with pytest.raises(InputError) as error:
        call(collectives, kernels, get_system("h100"))
    assert error.value.argument == name


# config values transformers refuses

def _config(tmp_path, **changes):
    config = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
              "intermediate_size": 128, "vocab_size": 100, **changes}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.mark.parametrize("key,value,said", [
    ("hidden_size", None, "hidden_size must not be null"),
    ("tie_word_embeddings", None, "tie_word_embeddings must not be null"),
    ("attention_dropout", 2.0, "attention_dropout is a probability"),
])
def test_config_values_transformers_refuses(capsys, tmp_path, key, value, said):
    refused(capsys, ["summary", "--hf-config", _config(tmp_path, **{key: value})], said)


def test_id2label_contradicting_num_labels_is_refused(capsys, tmp_path):
    path = _config(tmp_path, architectures=["LlamaForSequenceClassification"], num_labels=2,
                   id2label={"0": "a", "1": "b", "2": "c"})
    refused(capsys, ["summary", "--hf-config", path], "num_labels=2", "id2label")


def test_the_command_line_splits_a_search_of_many_variants_over_every_core(monkeypatch):
    """``search`` on the command line passes ``workers=None``: every core from ``AUTO_TASKS``
    variants (seven stay in this process, eight fork one process per core, at most one a task)."""
    import concurrent.futures
    from symbolic_cost.cli import search as command
    from symbolic_cost.numeric import search
    asked = {}

    def record(*args, **kwargs):
        asked.update(kwargs)
        raise InputError("recorded")

    monkeypatch.setattr(command, "search", record)
    main(["search", "--preset", "gpt2", "--devices", "8"])
    assert asked["workers"] is None
    started = []
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor",
                        lambda workers: started.append(workers) or contextlib.nullcontext(types.SimpleNamespace(map=map)))
    monkeypatch.setattr(search, "run_family", lambda task: [(1, 1, task)])
    monkeypatch.setattr(search, "CORES", 64)
    tasks = [(name, ("variant",)) for name in "abcdefgh"]
    assert len(list(search._run_all(tasks[:7], False, search.auto_workers(7), False))) == 7 and started == []
    assert len(list(search._run_all(tasks, False, search.auto_workers(8), False))) == 8 and started == [8]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
def test_a_process_pinned_to_one_core_searches_and_sweeps_on_one(tmp_path):
    """A batch scheduler or ``taskset`` gives a process fewer cores than the machine has: the
    search forks one process a core it may use, and ``top_rows`` one thread a core, not one
    a core of the machine (``os.cpu_count``)."""
    import subprocess
    import sys
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from symbolic_cost.numeric import search, vector_kernel; "
            "print(search.auto_workers(120), vector_kernel.CORES)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "SYMBOLIC_COST_CACHE": str(tmp_path)})
    assert done.stdout.split() == ["1", "1"]


def test_silent_answers_of_issue_66_are_refusals(capsys):
    """FP8 on a part with no FP8 tensor cores was timed at the 16-bit rate; a decode step past the
    model's context (4,096 tokens for Llama 2) was answered without --allow-long."""
    refused(capsys, ["summary", "--preset", "gpt2", "--system", "a100", "--fp8", "delayed"],
            "fp8='delayed' runs FP8 products, and system a100 has no FP8 tensor cores", "(--fp8)")
    refused(capsys, ["inference", "--preset", "llama-2-7b", "--set", "l_ctx=4096"],
            "l_ctx + 1 = 4097 tokens exceed the context of llama-2-7b (4096 tokens)")
    assert main(["inference", "--preset", "llama-2-7b", "--set", "l_ctx=4095"]) == 0
    assert main(["inference", "--preset", "llama-2-7b", "--set", "l_ctx=4096", "--allow-long"]) == 0


def test_a_symbol_where_the_inference_report_needs_a_number_is_refused(capsys):
    """Issue 66: ``inference --set b=b`` ran for a minute and ended in a TypeError; the report
    prints numbers, so a symbol is refused at once, and ``--field`` still prints its formula."""
    for value in ("b", "2*l_in"):
        refused(capsys, ["inference", "--preset", "llama-3-8b", "--set", f"b={value}"],
                "needs numbers; b has none", "--field prints formulas")
    refused(capsys, ["inference", "--preset", "llama-3-8b", "--set", "b=b", "--devices", "8"], "needs numbers")
    assert main(["inference", "--preset", "llama-3-8b", "--set", "b=b", "--field", "kv_cache_bytes"]) == 0
    assert "kv_cache_bytes = 131072*b*" in capsys.readouterr().out       # 32 layers x 2 x 8 KV heads x 128 x 2 bytes


@pytest.mark.parametrize("argv", [["summary", "--set", "etp=2"], ["summary", "--set", "etp=1"],
                                  ["sweep", "--grid", "etp=1,2", "--field", "total"]])
def test_an_expert_tensor_degree_on_a_dense_model_is_refused_as_ep_is(capsys, argv):
    refused(capsys, [argv[0], "--preset", "gpt2", *argv[1:]], "etp applies to a mixture of experts, and gpt2 has none")


def test_a_config_that_leaves_out_its_sizes_says_which_defaults_it_took(capsys, tmp_path):
    """Issue 66: ``{"model_type": "llama"}`` alone silently became a 6.7B model.  transformers
    reads it too (``LlamaConfig()``'s sizes, the oracle here), so it is answered, with a note
    naming every size left out; published configs state them all (``tests/hf_configs``)."""
    transformers = pytest.importorskip("transformers")
    from symbolic_cost.models.config import from_config
    arch = from_config({"model_type": "llama"})
    plain = transformers.LlamaConfig()
    assert (arch.e, arch.h, arch.n_layers, arch.vocab) == (plain.hidden_size, plain.num_attention_heads,
                                                           plain.num_hidden_layers, plain.vocab_size)
    assert arch.f == plain.intermediate_size
    assert arch.notes == ("config.json leaves out hidden_size, num_attention_heads, num_hidden_layers, intermediate_size, "
                          "vocab_size: taken at the defaults of transformers' config class for model_type 'llama' "
                          "(hidden_size=4096, num_attention_heads=32, num_hidden_layers=32, intermediate_size=11008, "
                          "vocab_size=32000)",)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2}))
    assert main(["summary", "--hf-config", str(config)]) == 0
    assert "note: config.json leaves out vocab_size: taken at" in capsys.readouterr().out
    config.write_text(json.dumps({"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 99}))
    assert main(["summary", "--hf-config", str(config)]) == 0
    assert "leaves out" not in capsys.readouterr().out


def test_a_reader_called_from_python_refuses_what_the_command_line_refuses():
    """The world size and vocabulary given beside a file are checked in the reader, not only by the
    command line's parser (issue 66: from Python, ``world=-2`` had been blamed on the layout and
    ``world=0`` silently replaced by the launcher's 8)."""
    from pathlib import Path
    from symbolic_cost.checks import InputError
    from symbolic_cost.models.launch_script import read_launch
    from symbolic_cost.models.megatron_args import megatron_setup
    from symbolic_cost.models.torchtitan import torchtitan_setup
    inputs = Path(__file__).parent / "framework_inputs"
    launch = read_launch((inputs / "train_gpt3_175b_distributed.sh").read_text(), "gpt3.sh")
    for world, vocab, message in ((-2, 50257, "world must be an integer between 1 and 2\\*\\*53, got -2"),
                                  (0, 50257, "world must be an integer between 1 and 2\\*\\*53, got 0"),
                                  (1024, 0, "vocab must be an integer between 1 and 2\\*\\*53, got 0"),
                                  (True, 50257, "world")):
        with pytest.raises(InputError, match=message):
            megatron_setup(launch, "gpt3.sh", world, vocab)
    with pytest.raises(InputError, match="world must be an integer between 1 and 2\\*\\*53, got -2"):
        torchtitan_setup((inputs / "llama3_8b.toml").read_text(), "llama3_8b.toml", -2)


@pytest.mark.parametrize("system, generation", [("a100", "ampere"), ("mi300x", "no generation stated"),
                                                ("b200", "blackwell")])
def test_overheads_measured_on_hopper_are_refused_elsewhere(capsys, system, generation):
    refused(capsys, ["summary", "--preset", "gpt2", "--system", system, "--overheads", "hopper"],
            f"overheads 'hopper' were measured on Hopper GPUs, and system {system} is not one ({generation})")
    assert main(["summary", "--preset", "gpt2", "--system", "h200", "--overheads", "hopper"]) == 0


def test_options_a_framework_file_would_override_are_refused_even_at_their_default(capsys):
    """``--no-flash`` is the default, so it could not be told from nothing; beside a torchtitan
    file (whose model runs flash attention) it was ignored.  ``--vocab-size`` beside a DeepSpeed
    config, whose model comes from --preset, was ignored too."""
    toml = "tests/framework_inputs/llama3_8b.toml"
    refused(capsys, ["summary", "--torchtitan", toml, "--no-flash", "--devices", "8", "--vocab-size", "128256"],
            "--flash: the settings of --torchtitan decide it")
    refused(capsys, ["summary", "--preset", "gpt2", "--deepspeed", "tests/framework_inputs/ds_zero_stage_3_config.json",
                     "--devices", "8", "--vocab-size", "50000"], "--vocab-size gives the vocabulary of a Megatron-LM")


def test_a_sweep_refuses_the_context_parallel_points_summary_refuses(capsys):
    """gpt2 is causal: ring attention cuts a sequence into 2 cp chunks; 1,024 tokens are not cut
    into 6, so cp = 3 is refused in the sweep as summary refuses it (the sweep had printed a row)."""
    refused(capsys, ["summary", "--preset", "gpt2", "--set", "cp=3", "l=1024", "--flash"], "6 chunks (cp=3, ring)")
    refused(capsys, ["sweep", "--preset", "gpt2", "--grid", "cp=2,3", "--set", "l=1024", "--flash", "--field", "total"],
            "--grid at cp=3: 6 chunks (cp=3, ring) must divide l")
    assert main(["sweep", "--preset", "gpt2", "--grid", "cp=1,2,4", "l=512,1024", "--flash", "--field", "total"]) == 0


def test_set_degrees_that_change_the_devices_beside_a_framework_file_are_refused(capsys):
    """GPT-3 175B's script runs tp 8 x pp 16 over 1,024 devices (d = 8); ``--set m1=2`` alone had
    answered for 2 x 16 x 8 = 256 devices without a word."""
    script = ["summary", "--megatron-args", "tests/framework_inputs/train_gpt3_175b_distributed.sh",
              "--vocab-size", "50257", "--devices", "1024"]
    refused(capsys, script + ["--set", "m1=2"], "--set m1=2 makes the layout m1 x cp x p x d = 256 devices, and "
                                                "--devices 1024 runs 1024")
    assert main(script + ["--set", "m1=2", "d=32"]) == 0


@pytest.mark.parametrize("argv, named", [
    (["formula", "--preset", "gpt2", "--block", "mlp", "--total", "flops_fwd"], "--block chooses a block's formula"),
    (["formula", "--preset", "gpt2", "--layer-group", "1", "--total", "flops_fwd"], "--layer-group chooses"),
    (["inference", "--preset", "gpt2", "--json", "--units", "si"], "--units does not apply to --json"),
    (["search", "--preset", "gpt2", "--devices", "8", "--json", "--units", "si"], "--units does not apply to --json"),
])
def test_options_another_option_makes_moot_are_refused(capsys, argv, named):
    refused(capsys, argv, named)


@pytest.mark.parametrize("key,value", [("local_batch_size", 0), ("pipeline_parallel_microbatch_size", 0)])
def test_a_torchtitan_count_of_zero_is_refused_by_name(capsys, tmp_path, key, value):
    """Issue 65: a count of 0 in a torchtitan file ended in ZeroDivisionError."""
    section = "training" if key == "local_batch_size" else "parallelism"
    body = {"training": {"local_batch_size": 8, "seq_len": 2048}, "parallelism": {"pipeline_parallel_degree": 2}}
    body[section][key] = value
    text = '[model]\nname = "llama3"\nflavor = "8B"\n' + "".join(
        f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items()) for name, keys in body.items())
    path = tmp_path / "train.toml"
    path.write_text(text)
    refused(capsys, ["summary", "--torchtitan", str(path), "--devices", "8"], f"[{section}] {key}", "at least 1")


def test_a_capacity_factor_of_one_over_zero_is_refused_by_name(capsys, tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                    "--seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 "
                    "--num-experts 4 --moe-router-topk 2 --moe-expert-capacity-factor 1/0 --tokenizer-type NullTokenizer "
                    "--vocab-size 1000\n")
    refused(capsys, ["summary", "--megatron-args", str(path), "--devices", "8"], "--moe-expert-capacity-factor",
            "must be a number")


def test_heads_that_do_not_divide_the_hidden_size_are_refused_as_megatron_refuses_them(capsys, tmp_path):
    """Issue 65: hidden 100 over 16 heads was read with a head size of 1; Megatron-LM asserts
    ``hidden_size % num_attention_heads == 0`` before it derives ``kv_channels``."""
    path = tmp_path / "run.sh"
    path.write_text("torchrun pretrain_gpt.py --num-layers 2 --hidden-size 100 --num-attention-heads 16 "
                    "--seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 "
                    "--tokenizer-type NullTokenizer --vocab-size 1000\n")
    refused(capsys, ["summary", "--megatron-args", str(path), "--devices", "8"], "--num-attention-heads 16",
            "--hidden-size 100")


def test_a_batch_size_ramp_is_noted_not_ignored(capsys, tmp_path):
    """Issue 65: ``--rampup-batch-size`` was read and dropped without a word."""
    from symbolic_cost.cli import main as run
    path = tmp_path / "run.sh"
    path.write_text("torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                    "--seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 "
                    "--rampup-batch-size 2 2 1000 --tokenizer-type NullTokenizer --vocab-size 1000\n")
    assert run(["summary", "--megatron-args", str(path), "--devices", "8", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(note.startswith("--rampup-batch-size") and "--global-batch-size" in note for note in notes), notes


def test_a_nemo_1_yaml_is_named_for_what_it_is(capsys, tmp_path):
    """Issue 65: NeMo 1.x's megatron_gpt_config.yaml was refused with a message about a
    Megatron-Bridge section; its trainer and exp_manager sections say what it is."""
    path = tmp_path / "megatron_gpt_config.yaml"
    path.write_text("name: megatron_gpt\ntrainer:\n  devices: 8\n  num_nodes: 1\nexp_manager:\n  explicit_log_dir: null\n"
                    "model:\n  micro_batch_size: 4\n  global_batch_size: 8\n  tensor_model_parallel_size: 1\n")
    refused(capsys, ["summary", "--nemo-recipe", str(path), "--devices", "8"], "NeMo 1.x", "trainer")


def test_a_torchtitan_model_other_than_llama3_is_named_before_its_experts(capsys, tmp_path):
    """Issue 65: torchtitan's DeepSeek-V3 file was told "llama3 has no experts", blaming the wrong model.  It is
    read now (its flavour, ``models.torchtitan_models``), with its experts; a model the reader does not bundle
    (Mixtral) is still named before its experts."""
    path = tmp_path / "deepseek_v3_671b.toml"
    path.write_text('[model]\nname = "deepseek_v3"\nflavor = "671B"\n[training]\nlocal_batch_size = 8\n'
                    'seq_len = 4096\n[parallelism]\nexpert_parallel_degree = 8\n')
    assert main(["summary", "--torchtitan", str(path), "--devices", "64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"]["ep"] == 8
    path.write_text(path.read_text().replace('"deepseek_v3"', '"mixtral"').replace('"671B"', '"8x7b"'))
    err = refused(capsys, ["summary", "--torchtitan", str(path), "--devices", "64"], "[model] name 'mixtral'")
    assert "experts" not in err


def test_a_spring_2025_torchtitan_toml_writes_out_its_norm(capsys, tmp_path):
    """torchtitan's Llama 3 70B TOML of 2025-04-07 (the [parallelism] section, and ``norm_type =
    "rmsnorm"`` until 2025-04-17): the norm the flavour is built with, so the file is read; 70B's
    published 70,553,706,496 parameters, 8-way tensor parallel over 64 devices leaving 8 shards."""
    path = pathlib.Path(__file__).parent / "framework_inputs" / "llama3_70b_2025-04.toml"
    assert main(["summary", "--torchtitan", str(path), "--devices", "64", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["parameters"] == 70_553_706_496 and (got["layout"]["m1"], got["layout"]["d"]) == (8, 8)
    layernorm = tmp_path / "layernorm.toml"       # another norm than the flavour's: refused as the older key
    layernorm.write_text(path.read_text().replace('norm_type = "rmsnorm"', 'norm_type = "layernorm"'))
    refused(capsys, ["summary", "--torchtitan", str(layernorm), "--devices", "64"], "[model] norm_type",
            "built with RMSNorm")


def test_the_float8_section_of_autumn_2025_is_read_where_its_converter_names_it(capsys, tmp_path):
    """torchtitan moved float8's settings to [quantize.linear.float8] on 2025-09-26, registering the
    converter under that name (components/quantization/float8.py); its own 405B TOML of 2025-09-30
    kept converters = ["float8"], which that torchtitan does not run: refused, not counted without
    its FP8 gathers as the section was passed over."""
    path = pathlib.Path(__file__).parent / "framework_inputs" / "llama3_405b.toml"
    older = path.read_text()
    moved = older.replace("[float8]", "[quantize.linear.float8]")
    newer = moved.replace('converters = ["float8"]', 'converters = ["quantize.linear.float8"]')
    assert moved != older and newer != moved
    files = {name: tmp_path / f"{name}.toml" for name in ("older", "moved", "newer")}
    for name, text in (("older", older), ("moved", moved), ("newer", newer)):
        files[name].write_text(text)
    layouts = []
    for name in ("older", "newer"):
        assert main(["summary", "--torchtitan", str(files[name]), "--devices", "128", "--json"]) == 0
        layouts.append(json.loads(capsys.readouterr().out)["layout"])
    assert layouts[0] == layouts[1] and layouts[0]["fp8_gather"] is True
    refused(capsys, ["summary", "--torchtitan", str(files["moved"]), "--devices", "128"],
            "beside a [quantize.linear.float8] section", "would not run 'float8'")
