"""Every option acts or is refused (issue 32, "one refusal rule, applied everywhere"): for each
command and model kind, every option of the command's parser is given a value away from its
default; the command must either refuse it (exit 2) or print something else than without it.
Exit 0 with the very same output means the option was silently ignored.  The oracle is the
command's own output with and without the option, so it needs no list of where options apply;
``HARMLESS`` names the few that legitimately change nothing here, with the reason."""

import argparse
import contextlib
import io
from pathlib import Path

import pytest

from symbolic_cost.cli import build_parser, main

HF = Path(__file__).parent / "hf_configs"
INPUTS = Path(__file__).parent / "framework_inputs"
MIXTRAL, T5, DEEPSEEK = (str(HF / f"{name}.json") for name in ("Mixtral-8x7B-v0.1", "t5-small", "DeepSeek-V2-Lite"))
LAYOUT = ["d=4", "p=2", "n_micro=4", "m1=2", "s1=2"]
BASES = {
    ("summary", "dense"): ["--preset", "gpt2", "--set", "b=2", "l=512", *LAYOUT],
    ("summary", "moe"): ["--hf-config", MIXTRAL, "--set", "b=1", "l=1024", "ep=2", *LAYOUT],
    ("summary", "encoder-decoder"): ["--hf-config", T5, "--set", "b=2", "l=512", *LAYOUT],
    ("summary", "latent"): ["--hf-config", DEEPSEEK, "--set", "b=1", "l=1024", "ep=2", "d=4", "p=3", "n_micro=6",
                            "m1=2", "s1=2"],     # 27 layers: p = 3; latent attention and routed experts
    ("sweep", "dense"): ["--preset", "gpt2", "--grid", "b=1,2", "--set", "l=512", *LAYOUT],
    ("inference", "dense"): ["--preset", "gpt2", "--set", "b=2", "l_in=512", "l_out=64"],
    ("table", "dense"): ["--preset", "gpt2", "--set", "m1=2", "s1=2"],
    ("formula", "symbols"): ["--block", "layer", "--field", "act_buffer"],
    ("crossover", "symbols"): ["--set", "m1=2", "s1=2"],
    ("optimize", "dense"): ["--preset", "gpt2", "--set", "b=2", "l=512"],
    ("scheme", "symbols"): ["--set", "b=2", "l=4096", "e=1024", "h=16"],
    ("profile", "dense"): ["--preset", "gpt2", "--set", "b=2", "l=512", "m1=2", "s1=2"],   # d, p, n_micro: refused
    ("lstm", "numbers"): ["--batch", "4", "--steps", "3", "--hidden", "64", "--vocab", "100", "--layers", "3"],
    ("search", "dense"): ["--preset", "gpt2", "--devices", "4", "--global-batch", "8", "--seq", "256", "--top", "1"],
    # beside each framework file (issue 66): an option the file decides is refused, any other acts
    ("summary", "megatron-args"): ["--megatron-args", str(INPUTS / "train_gpt3_175b_distributed.sh"),
                                   "--devices", "1024", "--vocab-size", "50257"],
    ("summary", "torchtitan"): ["--torchtitan", str(INPUTS / "debug_model.toml"), "--devices", "8",
                                "--vocab-size", "2000"],
    ("summary", "nemo-recipe"): ["--nemo-recipe", str(INPUTS / "megatron_bridge_llama32_1b.yaml"), "--devices", "8"],
    ("summary", "deepspeed"): ["--preset", "gpt2", "--deepspeed", str(INPUTS / "ds_config_fp16_z3.json"),
                               "--devices", "8", "--set", "b=2", "l=512"],
    ("summary", "accelerate"): ["--preset", "gpt2", "--accelerate", str(INPUTS / "accelerate_fsdp.yaml"),
                                "--set", "b=2", "l=512"],
    ("summary", "hf-training-args"): ["--preset", "gpt2", "--hf-training-args", str(INPUTS / "alpaca_training_args.json"),
                                      "--set", "l=512"],
    ("sweep", "megatron-args"): ["--megatron-args", str(INPUTS / "train_gpt3_175b_distributed.sh"), "--devices",
                                 "1024", "--vocab-size", "50257", "--grid", "b=1,2"],
}
"""``search`` builds and compiles its kernels anew for most options (about 20 CPU-s a run for gpt2
on four devices), so its base is small; ``--everything`` is left to ``tests/test_search_space.py``.
``reproduce`` takes only where to write (``--reports``) and which tables; ``report`` only where
to write (``--out``) and ``--small``, which ``tests/test_reports.py`` covers: neither is here."""
VALUES = {("search", "--tensor"): ["--tensor", "1d", "2d"],
          ("summary", "accelerate", "--devices"): ["--devices", "4"],       # the file launches 2 processes
          **{(command, "--attention-kernel"): ["--attention-kernel", "flash-attention-2"]
             for command in ("summary", "sweep", "search", "profile")},
          **{(command, "--cuda-graphs"): ["--cuda-graphs", "attn"] for command in ("summary", "sweep", "search",
                                                                                   "profile")}}
"""Where the first choice away from the default is the default itself (search's ``--tensor``
defaults to the list ``[1d]``; ``--attention-kernel cudnn`` is H100's own kernel, the default
system's), or where an option takes a list argparse does not name the choices of (``--cuda-graphs``)."""
ELSEWHERE = {"search --everything": "every choice the library expresses: minutes a run; "
                                    "tests/test_search_space.py checks the space it searches"}
NOT_VALUES = {"--help", "--out", "--overwrite", "--chunk", "--workers", "--progress", "--dask", "--preset",
              "--hf-config", "--hf-model", "--revision", "--megatron-args", "--torchtitan", "--deepspeed",
              "--accelerate", "--hf-training-args", "--nemo-recipe", "--set", "--grid", "--at", "--where", "--field", "--block"}
"""Options whose value is the input itself (the model, the values, the output file) or how the work
is run (workers, chunks, progress), not a choice that changes the answer."""
HARMLESS = {
    "--allow-long": "a permission: the sequence is within the model's context here",
    "--kernel-time roofline": "the default conventions' own time model typed out (tiled is the override)",
    "--cp-variant ring": "the default variant typed out (the ring is what cp > 1 runs without it)",
    "--no-bias": "formula's act_buffer: a bias keeps nothing for backward",
    "--no-qkv-bias": "formula's act_buffer: a bias keeps nothing for backward",
    "--trl-trainer sft": "the default trainer typed out (a recipe runs under TRL's SFTTrainer unless one is named)",
}


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue()


def other_value(action):
    """The words that set ``action`` away from its default, or None when there is none to pick."""
    flag = next(f for f in action.option_strings if f.startswith("--"))
    if isinstance(action, argparse.BooleanOptionalAction):
        return [flag if not action.default else next(f for f in action.option_strings if f.startswith("--no-"))]
    if isinstance(action, argparse._StoreTrueAction):
        return [flag]
    if action.choices:
        picked = next((c for c in action.choices if c != action.default), None)
        return None if picked is None else [flag, str(picked)]
    if action.type in (int, float):
        return [flag, str((action.default or 1) * 2)]
    return None


def cases():
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for (command, kind), base in BASES.items():
        for action in commands[command]._actions:
            flags = [f for f in action.option_strings if f.startswith("--")]
            if flags and flags[0] not in NOT_VALUES:
                words = VALUES.get((command, kind, flags[0])) or VALUES.get((command, flags[0])) or other_value(action)
                if words:
                    yield pytest.param(command, base, words, id=f"{command}-{kind}-{' '.join(words)}")


@pytest.mark.parametrize("command,base,words", list(cases()))
def test_an_option_acts_or_is_refused(command, base, words):
    given = " ".join(words)
    reason = (HARMLESS.get(f"{command} {given}") or HARMLESS.get(given) or HARMLESS.get(words[0])
              or ELSEWHERE.get(f"{command} {given}"))
    if reason:
        pytest.skip(reason)
    plain = run([command, *base])
    assert plain[0] == 0
    code, out = run([command, *base, *words])
    assert code == 2 or (code == 0 and out != plain[1]), f"{command} {given}: exit 0 and the same output"


def test_grid_order_without_a_grid_is_refused(capsys):
    assert main(["table", "--preset", "gpt2", "--grid-order", "rows,cols"]) == 2
    assert "--grid-order shapes a tensor grid" in capsys.readouterr().err


def test_search_keeps_fsdp_gathered_weights_when_asked_or_refuses(capsys):
    base = ["search", "--preset", "gpt2", "--devices", "8", "--global-batch", "32", "--seq", "512", "--top", "2",
            "--ideal", "--json"]
    assert main([*base, "--no-reshard-after-forward"]) == 2          # ZeRO-0 gathers nothing
    assert "--no-reshard-after-forward" in capsys.readouterr().err
    assert main([*base, "--zero", "3"]) == 0
    resharded = capsys.readouterr().out
    assert main([*base, "--zero", "3", "--no-reshard-after-forward"]) == 0
    assert capsys.readouterr().out != resharded       # one all-gather fewer a step, the gathered layers kept


def test_the_pipeline_split_options_act_or_are_refused():
    """The split options change the answer or are refused: gpt2's 12 layers cannot split over p=7, but
    14 slots with the embedding and the loss can (2 a rank, refused with 4 chunks); on p=2 a layout
    of 4 stages moves layers; set beside each other they are refused."""
    seven = ["summary", "--preset", "gpt2", "--set", "b=1", "l=512", "p=7", "n_micro=7"]
    assert run(seven)[0] == 2 and run([*seven, "--embedding-in-split", "--loss-in-split"])[0] == 0
    assert run([*seven, "--embedding-in-split", "--loss-in-split", "--schedule", "interleaved",
                "--virtual-stages", "4"])[0] == 2
    base = ["summary", "--preset", "gpt2", "--set", "b=1", "l=512", "p=2", "n_micro=4"]
    plain = run(base)
    code, out = run([*base, "--pipeline-layout", "Et*2|t*4|t*4|t*2,L", "--schedule", "interleaved",
                     "--virtual-stages", "2"])
    assert code == 0 and out != plain[1]
    assert run([*base, "--pipeline-layout", "Et*6|t*6,L"])[0] == 0
    assert run([*base, "--pipeline-layout", "Et*6|t*6,L", "--embedding-in-split"])[0] == 2
    assert run([*base, "--pipeline-layout", "Et*6|t*5,L"])[0] == 2


def test_recompute_op_acts_or_is_refused():
    """``--recompute op`` (not the first choice ``other_value`` picks): on a Llama with flash attention and
    one tensor-parallel rank it changes the answer; with the bases' m1=2 or gpt2's biased products it is
    refused by name."""
    llama = ["summary", "--hf-config", str(HF / "Llama-3.2-1B.json"), "--set", "b=1", "l=2048", "d=4", "--flash"]
    plain = run(llama)
    code, out = run([*llama, "--recompute", "op"])
    assert plain[0] == 0 and code == 0 and out != plain[1]
    assert run([*llama, "--recompute", "op", "--set", "m1=2", "s1=2"])[0] == 2
    assert run(["summary", *BASES[("summary", "dense")][1:], "--flash", "--recompute", "op"])[0] == 2
    assert run(["summary", "--preset", "gpt2", "--set", "b=2", "l=512", "--flash", "--recompute", "op"])[0] == 2


@pytest.mark.parametrize("word, idle, busy", [
    ("grad", ["d=1"], ["d=2"]),                              # one replica reduces no gradient
    ("param", ["d=2"], ["d=2", "--zero", "1"]),              # DDP gathers no parameter; ZeRO-1 its updated shards
    ("tensor", ["m1=1", "s1=1"], ["m1=2", "s1=2"]),          # one tensor rank sends nothing in its layers
])
def test_an_overlap_with_nothing_to_hide_is_refused(capsys, word, idle, busy):
    base = ["summary", "--preset", "gpt2", "--set", "b=2", "l=512"]
    split = lambda extra: ([w for w in extra if not w.startswith("--") and "=" in w],   # noqa: E731
                           [w for w in extra if w.startswith("--") or "=" not in w])
    values, flags = split(idle)
    assert main([*base, *values, *flags, "--overlap", word]) == 2
    assert f"--overlap {word}: this step has no" in capsys.readouterr().err
    values, flags = split(busy)
    assert main([*base, *values, *flags, "--overlap", word]) == 0


def test_allow_long_within_the_context_is_refused(capsys):
    # GPT-2 learned 1,024 positions: 1,024 tokens need no permission, 2,048 do
    assert main(["summary", "--preset", "gpt2", "--set", "l=1024", "--allow-long"]) == 2
    assert "--allow-long: l = 1024 is within the context of gpt2 (1024 tokens)" in capsys.readouterr().err
    assert main(["summary", "--preset", "gpt2", "--set", "l=2048", "--allow-long"]) == 0
