"""Issue 32's corpus: bad and edge inputs across every subcommand and the public API, each
required to end in exit status 2 with one line naming the option (or the
library's ``InputError`` naming the argument), or in a number derived here by hand.

Every command line runs in this process (``cli.main``), so the corpus takes seconds, not a
start-up per line.  ``tests/test_bad_input.py`` holds issue 17's corpus; this one adds the
limits of issue 32 (sizes before expansion, the time budget, files that are not regular files,
impossible numbers, ``--grid`` ranges) and tables built as option x bad value x command.
"""

import json
import math
import os
import pathlib
import re
import shlex
import time
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sympy import Integer, Rational, Symbol, oo

from symbolic_cost import analysis, attention, cli, mlp, transformer_layer
from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.inference import kv_cache, throughput
from symbolic_cost.inference.serving import Serving
from symbolic_cost.models.config import preset
from symbolic_cost.models import utilisation
from symbolic_cost.parallel import collectives, pipeline, sequence, zero
from symbolic_cost.reader import read, read_number
from symbolic_cost.timing import kernels

ROOT = pathlib.Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------------------------
# Command lines refused with exit status 2: (line, a fragment of the one-line message naming the
# option).  {fifo} is a FIFO, {zero} a link to /dev/zero, {dir} a folder, {big} a sparse file of
# 17 MiB, {binary} bytes that are not UTF-8, {text} a file that is not JSON, {list} a JSON list,
# {missing} a file that does not exist (see the ``places`` fixture).
# ---------------------------------------------------------------------------------------------

BAD_NUMBERS = {"0": "0", "-1": "-1", "1.5": "1.5", "x": "x", "nan": "nan", "inf": "inf", "1e400": "1e400",
               "empty": ""}
"""Values no option that counts something accepts."""

COUNT_OPTIONS = [
    ("search --preset gpt2 --devices {}", "--devices"),
    ("search --preset gpt2 --devices 8 --global-batch {}", "--global-batch"),
    ("search --preset gpt2 --devices 8 --seq {}", "--seq"),
    ("search --preset gpt2 --devices 8 --top {}", "--top"),
    ("search --preset gpt2 --devices 8 --workers {}", "--workers"),
    ("profile --preset gpt2 --top {}", "--top"),
    ("sweep --preset gpt2 --grid b=1 --chunk {}", "--chunk"),
    ("optimize --max {}", "--max"),
    ("lstm --batch {} --steps 2 --hidden 64 --vocab 100 --layers 2", "--batch"),
    ("lstm --batch 4 --steps {} --hidden 64 --vocab 100 --layers 2", "--steps"),
    ("lstm --batch 4 --steps 2 --hidden {} --vocab 100 --layers 2", "--hidden"),
    ("lstm --batch 4 --steps 2 --hidden 64 --vocab {} --layers 2", "--vocab"),
    ("lstm --batch 4 --steps 2 --hidden 64 --vocab 100 --layers {}", "--layers"),
]
"""Options that count something, each with every value of ``BAD_NUMBERS``."""

SET_COMMANDS = ["table", "formula", "summary --preset gpt2", "inference --preset llama-2-7b",
                "profile --preset gpt2", "scheme", "crossover"]
BAD_SETS = ["b=0", "b=-3", "b=nan", "b=inf", "b=1/0", "b=1.5", "b=(e+f+h+b)**64", "b=x", "b='8'", "b=2**b",
            "b=True", "b=", "b=1e400", "b=log(0)"]
"""``--set b=...`` values every command that takes ``b`` refuses, naming ``--set b``."""

GRID_COMMANDS = ["sweep --preset gpt2 --field parameters --grid", "inference --preset llama-2-7b --field tpot_s --grid"]
BAD_GRIDS = ["b=0", "b=-2", "b=1.5", "b=nan", "b=(e+f+h+b)**64", "b=1:64:x1", "b=1:64:x0", "b=0:64:x2",
             "b=64:1", "b=1:4:+0", "b=1:4:-1", "b=1::", "b=:4", "b=1:2:3:4", "b=1.5:4", "b=1:4:x1.5",
             "b=1:10**12", "b=1:4:y2", "b=1:4:x", "b=a:4", "q=1:4"]
"""``--grid`` values and ranges refused, naming ``--grid``."""

PATH_COMMANDS = ["summary", "table", "formula", "inference", "profile", "sweep --grid b=1 --field parameters",
                 "search --devices 8"]
BAD_PATHS = [("{fifo}", "not a regular file"), ("{zero}", "not a regular file"), ("{dir}", "folder"),
             ("{missing}", "does not exist"), ("''", "expects a value, got ''"),
             ("{big}", "more than 16,777,216 bytes"), ("{binary}", "--hf-config"), ("{text}", "--hf-config"),
             ("{list}", "JSON object")]
"""Config files no command reads: each refused by name before (or instead of) being read."""

CHOICES = [
    ("table --system tpu", "--system"), ("formula --system tpu", "--system"), ("summary --preset gpt2 --system tpu",
                                                                                  "--system"),
    ("inference --preset gpt2 --system tpu", "--system"), ("search --preset gpt2 --devices 8 --system tpu", "--system"),
    ("table --conventions nope", "--conventions"), ("summary --preset gpt2 --conventions nope", "--conventions"),
    ("sweep --preset gpt2 --grid b=1 --conventions nope", "--conventions"),
    ("table --precision fp7", "--precision"), ("summary --preset gpt2 --precision fp7", "--precision"),
    ("formula --field nope", "--field"), ("sweep --preset gpt2 --grid b=1 --field nope", "--field"),
    ("inference --preset gpt2 --field nope", "--field"), ("summary --preset gpt2 --units furlongs", "--units"),
    ("table --format yaml", "--format"), ("table --block nope", "--block"), ("formula --block nope", "--block"),
    ("summary --preset nope", "--preset"), ("inference --preset nope", "--preset"),
    ("search --preset nope --devices 8", "--preset"), ("table --kernel-time magic", "--kernel-time"),
    ("summary --preset gpt2 --schedule zigzag", "--schedule"), ("summary --preset gpt2 --recompute some",
                                                                "--recompute"),
    ("inference --preset llama-2-7b --kv-dtype fp2", "--kv-dtype"), ("scheme --scheme nope", "--scheme"),
    ("reproduce nope", "nope"), ("crossover --a nope", "--a"), ("optimize --over nope", "--over"),
    ("summary --preset gpt2 --zero 9", "--zero"), ("table --tensor 5d", "--tensor"),
]
"""Named choices: an unknown one is refused, naming the option."""

STEP_TIMES = [("nan", "--step-time"), ("inf", "--step-time"), ("-inf", "--step-time"), ("-1", "--step-time"),
              ("0", "--step-time"), ("1e-9", "--step-time"), ("x", "--step-time"), ("1e400", "--step-time"),
              ("1/0", "--step-time"), ("0.0001", "--step-time")]
"""``summary --step-time``: a finite time no shorter than the busiest device's compute at peak."""

IGNORED = [
    # issue 32: options that would be ignored are refused by name
    ("summary --preset llama-2-7b --set p=1 --last-stage-layers 4", "--last-stage-layers"),
    ("summary --preset llama-2-7b --lora-base nf4", "--lora-base"),
    ("summary --preset llama-2-7b --lora-targets q_proj", "--lora-targets"),
    ("summary --preset llama-2-7b --capacity-factor 1.5", "--capacity-factor"),
    ("summary --preset llama-2-7b --expert-imbalance 2", "--expert-imbalance"),
    ("summary --preset llama-2-7b --set ep=2", "ep"),
    ("inference --preset llama-2-7b --mla absorbed", "--mla"),
    ("inference --preset llama-2-7b --json --field tpot_s", "--json"),
    ("inference --preset llama-2-7b --json --grid b=1,2", "--json"),
    ("sweep --preset gpt2 --grid b=1 --out ''", "--out"),
    ("formula --at h=3 e=100", "--at"),
    ("formula --block attention --at h=3 e=100", "--at"),
    ("summary --preset gpt2 --json --units si", "--units"),
    ("summary --preset gpt2 --recompute-layers 2", "--recompute-layers"),
    ("summary --preset gpt2 --first-stage-layers 3", "--first-stage-layers"),
    ("summary --preset gpt2 --revision main", "--revision"),
    ("formula --block mlp --field flops_fwd --system a100", "--system"),
    ("crossover --field flops_fwd --system a100", "--system"),
    ("table --block mlp --flash", "--flash"),
    ("formula --remainder", "--remainder"),
    # issue 32: training and serving share the model's limits
    ("summary --preset bert-base-uncased --set l=1024", "l"),
    ("summary --preset llama-2-7b --set l=1048576", "l"),
    ("inference --preset llama-2-7b --set l_in=1048576", "l_in"),
    ("inference --preset llama-2-7b --set p=64", "p must be at most n_layers"),
    ("summary --preset llama-2-7b --set p=64", "p must divide n_layers"),
    ("inference --preset bert-base-uncased", "bert"),
    ("inference --preset llama-2-7b --rate 10 --requests 100001", "--requests"),    # load.MAX_REQUESTS
    # issue 32: sizes before expansion
    ("formula --set 'l=(e+f+h+b)**64'", "--set l"),
    ("formula --at 'l=(e+f+h+b)**64'", "--at l"),
    ("table --set 'l=(e+f+h+b)**64'", "--set l"),
    ("formula --set 'l=(e+b+h)**4' 'f=(l+e)**3'", "--set"),
    ("formula --by '(e+f+h+b)**64'", "--by"),
    ("sweep --preset gpt2 --grid b=1 --where '(memory_bytes+b)**99 <= 1'", "--where"),
    ("sweep --preset gpt2 --grid b=1 --where 'memory_bytes <= (b+l+d+p)**64'", "--where"),
    ("crossover --set 'f=(e+h+b+l)**64'", "--set f"),
    ("optimize --set 'l=(e+f+h+b)**64'", "--set l"),
    ("scheme --set 'l=(e+f+h+b)**64'", "--set l"),
    ("formula --set e=" + "9" * 40, "--set e"),
    ("formula --set b=" + "+".join(f"l**{i}" for i in range(1, 70)), "--set b"),
    # a whole-model value may not refer to what the model fixes (it would stay a symbol, not the
    # model's size), nor grow past 10**30 through what it refers to
    ("summary --preset gpt2 --set b=e", "--set b=e refers to e"),
    ("summary --preset gpt2 --set 'b=(e+f)**64'", "refers to e, f"),
    ("summary --preset gpt2 --set l=2*h", "refers to h"),
    ("inference --preset gpt2 --set b=e", "refers to e"),
    ("inference --preset llama-2-7b --set 'l_in=(e+f)**8'", "refers to e, f"),
    ("sweep --preset gpt2 --grid b=1,2 --set l=v", "refers to v"),
    ("profile --preset gpt2 --set b=e", "--set"),
    ("table --preset gpt2 --set 'b=(e+f)**64'", "larger than 10**30"),
    ("formula --preset gpt2 --set 'b=(e+f)**16'", "larger than 10**30"),
    ("table --preset gpt2 --set 'l=e**11'", "larger than 10**30"),     # 768**11 > 10**31
    # an empty text value would read as not given, and the option be ignored
    ("summary --hf-model ''", "--hf-model"), ("summary --hf-model x --revision ''", "--revision"),
    ("formula --row ''", "--row"), ("formula --leading ''", "--leading"), ("formula --diff ''", "--diff"),
    ("formula --elasticity ' '", "--elasticity"), ("formula --by ''", "--by"), ("optimize --over ''", "--over"),
    ("crossover --for ''", "--for"), ("sweep --preset gpt2 --grid b=1 --where ' '", "--where"),
    ("summary --preset gpt2 --lora-rank 4 --lora-targets ''", "--lora-targets"), ("report --out ''", "--out"),
    ("reproduce --reports ''", "--reports"), ("table --set ''", "--set"), ("inference --preset gpt2 --grid ''", "--grid"),
    # work that grows with a number: bounded before it starts
    ("optimize --max 99999999999", "--max"),
    ("optimize --max 4097", "--max"),
    ("search --preset gpt2 --devices 1048577", "devices"),
    # the top level
    ("--bogus", "COMMAND"), ("table --bogus", "--bogus"), ("summary --bogus", "--bogus"), ("nope", "nope"),
    ("summary --preset", "--preset"),
]
"""Options a command cannot honour, rules shared by training and serving, and sizes refused before
any expansion."""


def _cases():
    """Every refused command line as ``(line, fragment)``."""
    cases = [(form.format(shlex.quote(value)), flag) for form, flag in COUNT_OPTIONS for value in BAD_NUMBERS.values()]
    cases += [(f"{command} --set {shlex.quote(value)}", "--set b" if value != "b=" else "--set expects name=value")
              for command in SET_COMMANDS for value in BAD_SETS]
    cases += [(f"formula --at {shlex.quote(value)}", "--at b") for value in BAD_SETS if value != "b="]
    cases += [(f"{command} {shlex.quote(value)}", "--grid") for command in GRID_COMMANDS for value in BAD_GRIDS]
    cases += [(f"{command} --hf-config {path}", fragment) for command in PATH_COMMANDS for path, fragment in BAD_PATHS]
    cases += [(f"summary --megatron-args {path}", fragment) for path, fragment in BAD_PATHS[:6]]
    cases += CHOICES
    cases += [(f"summary --preset gpt2 --step-time {value}", flag) for value, flag in STEP_TIMES]
    return cases + IGNORED


REFUSED = _cases()


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """The files the corpus names (a FIFO, a link to /dev/zero, ...)."""
    folder = tmp_path_factory.mktemp("corpus")
    os.mkfifo(folder / "fifo.json")
    (folder / "zero.json").symlink_to("/dev/zero")
    (folder / "dir").mkdir()
    with open(folder / "big.json", "wb") as big:       # sparse: 17 MiB of nothing on disk
        big.truncate(17 * 2**20)
    (folder / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    (folder / "text.json").write_text("hidden_size: 4096\n")
    (folder / "list.json").write_text("[1, 2]")
    names = ("fifo", "zero", "dir", "big", "binary", "text", "list", "missing")
    return {name: str(folder / (name if name == "dir" else f"{name}.json")) for name in names}


def run(argv):
    """``main(argv)``'s exit status, stdout and stderr.  How long it took is not asserted: a
    test holds on a loaded machine, and a hang ends the run through pytest's faulthandler."""
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def test_the_corpus_is_large():
    assert len(REFUSED) + len(NUMBERS) + len(API_REFUSED) + len(API_NUMBERS) >= 300


@pytest.mark.parametrize("line, fragment", REFUSED, ids=[line[:80] for line, _ in REFUSED])
def test_refused_in_one_line_naming_the_option(line, fragment, places):
    status, out, err = run(shlex.split(line.format(**places)))
    assert status == 2, (line, status, out[-300:], err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert fragment.format(**places) in err, (line, err)


# ---------------------------------------------------------------------------------------------
# Command lines that print a number derived here by hand.
# ---------------------------------------------------------------------------------------------

GPT2_PARAMETERS = (50257 * 768 + 1024 * 768                 # token and position tables
                   + 12 * (2 * 768 + 768 * 2304 + 2304      # per layer: ln_1, c_attn (q, k, v with biases),
                           + 768 * 768 + 768 + 2 * 768      # attn.c_proj, ln_2,
                           + 768 * 3072 + 3072 + 3072 * 768 + 768)   # mlp.c_fc, mlp.c_proj
                   + 2 * 768)                               # ln_f; the head is tied to wte
LLAMA2_7B_PARAMETERS = (2 * 32000 * 4096                    # embed_tokens and an untied lm_head
                        + 32 * (4 * 4096 * 4096             # q, k, v, o without biases
                                + 3 * 4096 * 11008          # gate, up, down
                                + 2 * 4096)                 # two RMSNorm weights
                        + 4096)                             # the final norm
LLAMA_KV_PER_TOKEN = 2 * 32 * 4096 * 2      # keys and values, 32 layers, 32 heads x 128, bf16
MISTRAL_KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # grouped-query: 8 key/value heads of 128
GPT2_KV_PER_TOKEN = 2 * 12 * 768 * 2


def _json(key):
    return lambda out: json.loads(out)[key]


def _column(name):
    """The values of one CSV column, as integers."""
    def read_column(out):
        rows = [line.split(",") for line in out.strip().splitlines()]
        index = rows[0].index(name)
        return [int(float(row[index])) for row in rows[1:]]
    return read_column


NUMBERS = [
    ("--version", lambda out: out.strip(),
     "symbolic-cost " + tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]),
    ("summary --preset gpt2 --json", _json("parameters"), GPT2_PARAMETERS),
    ("summary --preset llama-2-7b --json", _json("parameters"), LLAMA2_7B_PARAMETERS),
    ("inference --preset llama-2-7b --json", _json("kv_bytes_per_token"), LLAMA_KV_PER_TOKEN),
    ("inference --preset mistral-7b --json", _json("kv_bytes_per_token"), MISTRAL_KV_PER_TOKEN),
    ("inference --preset gpt2 --json", _json("kv_bytes_per_token"), GPT2_KV_PER_TOKEN),
    ("inference --preset llama-2-7b --json", _json("weight_bytes"), 2 * LLAMA2_7B_PARAMETERS),
    # 512 prompt and 128 output tokens: the last output token is never fed back, so 639 are cached
    ("inference --preset llama-2-7b --json", _json("kv_cache_bytes"), 639 * LLAMA_KV_PER_TOKEN),
    ("inference --preset llama-2-7b --json --set b=3 l_in=100 l_out=1", _json("kv_cache_bytes"),
     3 * 100 * LLAMA_KV_PER_TOKEN),
    ("inference --preset llama-2-7b --json --set m1=2", _json("kv_bytes_per_token"), LLAMA_KV_PER_TOKEN // 2),
    # 175 billion bf16 weights (350 GB) do not fit an 80 GB H100: not one sequence, never negative
    ("inference --preset gpt3-175b --json", _json("max_batch"), 0),
    # --grid ranges: the values written out by hand
    ("sweep --preset gpt2 --field parameters --grid b=1:64:x2", _column("b"), [1, 2, 4, 8, 16, 32, 64]),
    ("sweep --preset gpt2 --field parameters --grid b=1:64:*4", _column("b"), [1, 4, 16, 64]),
    ("sweep --preset gpt2 --field parameters --grid b=3:100:x3", _column("b"), [3, 9, 27, 81]),
    ("sweep --preset gpt2 --field parameters --grid p=2:6:+2", _column("p"), [2, 4, 6]),
    ("sweep --preset gpt2 --field parameters --grid p=1:4", _column("p"), [1, 2, 3, 4]),
    ("sweep --preset gpt2 --field parameters --grid d=1:12:5", _column("d"), [1, 6, 11]),
    ("sweep --preset gpt2 --field parameters --grid b=5:5", _column("b"), [5]),
    ("sweep --preset gpt2 --field parameters --grid b=1,3,8:32:x2", _column("b"), [1, 3, 8, 16, 32]),
    ("sweep --preset gpt2 --field parameters --grid 'l=2**8:2**10:x2'", _column("l"), [256, 512, 1024]),
    ("sweep --preset gpt2 --field parameters --grid b=1:2 p=1:2", _column("parameters"),
     [GPT2_PARAMETERS] * 4),
    ("inference --preset llama-2-7b --field kv_cache_bytes --grid b=1:4:x2 --set l_in=10 l_out=1",
     _column("kv_cache_bytes"), [10 * LLAMA_KV_PER_TOKEN, 20 * LLAMA_KV_PER_TOKEN, 40 * LLAMA_KV_PER_TOKEN]),
]
"""``(line, what to read from stdout, the number worked out by hand)``."""


@pytest.mark.parametrize("line, pick, expected", NUMBERS, ids=[line[:80] for line, _, _ in NUMBERS])
def test_prints_the_number_worked_out_by_hand(line, pick, expected):
    status, out, err = run(shlex.split(line))
    assert status == 0, (line, err)
    assert pick(out) == expected


def test_the_step_time_at_its_bound_is_accepted_and_below_refused():
    """The bound ``--step-time`` is checked against is the ``--ideal`` compute part: a time at
    twice it is accepted (MFU at most 100 %), half of it refused."""
    status, out, err = run(["summary", "--preset", "gpt2", "--step-time", "0.0001"])
    bound = float(re.search(r"fastest this step can run on \S+: ([0-9.e-]+) s", err).group(1))
    assert run(["summary", "--preset", "gpt2", "--step-time", str(2 * bound)])[0] == 0
    assert run(["summary", "--preset", "gpt2", "--step-time", str(bound / 2)])[0] == 2


def test_inference_json_prints_never_as_null():
    """Where the text says the decode never turns compute-bound, ``--json`` says null (not a
    negative batch): a 1,000-token context's cache reads grow with the batch as the FLOPs do."""
    status, out, err = run(["inference", "--preset", "llama-2-7b", "--json", "--set", "l_in=1000", "l_out=2"])
    text = run(["inference", "--preset", "llama-2-7b", "--set", "l_in=1000", "l_out=2"])[1]
    assert status == 0 and json.loads(out)["crossover_batch"] is None and "never" in text


def test_a_formula_past_the_time_budget_is_refused_in_one_line(monkeypatch):
    """A value within the reader's bounds can still make a block SymPy takes minutes over: the
    command gives up after ``cli.TIME_LIMIT`` seconds with one line."""
    monkeypatch.setattr(cli, "TIME_LIMIT", 1)
    status, out, err = run(shlex.split("formula --block layer --field t_total_fwd --system h100 "
                                                "--set 'l=(e+f+h+b)**3' --elasticity e"))
    assert status == 2 and err.count("\n") == 1 and "gave up after 1 s of CPU time" in err and "--set" in err


def test_a_command_past_its_budget_prints_no_part_of_an_answer(monkeypatch):
    """``scheme`` prints its tensors before it simplifies the collectives' times: refused midway (here
    after a second of CPU time), it must leave stdout empty, as the drawn command lines expect
    (``scheme --set b=(e+f)**64`` once printed half a table above the refusal on a loaded machine)."""
    monkeypatch.setattr(cli, "TIME_LIMIT", 1)
    status, out, err = run(shlex.split("scheme --set 'b=(e+f)**64'"))
    assert status == 2 and out == "" and err.count("\n") == 1 and "gave up after 1 s" in err


def test_the_time_budget_is_restored_and_spares_quick_commands(monkeypatch):
    import signal
    monkeypatch.setattr(cli, "TIME_LIMIT", 1)
    before = signal.getsignal(signal.SIGPROF)
    assert run(["formula", "--block", "mlp"])[0] == 0
    assert signal.getsignal(signal.SIGPROF) is before and signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_expiry_swallowed_by_a_finalizer_fires_again():
    """The expiry that lands inside a finalizer is lost (Python prints "Exception ignored" and goes
    on): the budget must expire again, else the body runs unlimited (CI hung here, stop 39)."""
    import gc
    from symbolic_cost.budget import time_limit

    def compute(cpu_seconds):
        start = time.process_time()
        while time.process_time() - start < cpu_seconds:
            pass

    class Finalized:
        def __del__(self):
            compute(0.3)                # the first expiry, at 0.05 CPU-s, lands here and is ignored

    reached = []
    with pytest.raises(InputError, match="gave up after 0.05 s of CPU time"):
        with time_limit(0.05, "computing"):
            Finalized()
            gc.collect()
            compute(3)
            reached.append("the end of the body")     # an expiry lost for good lets the body finish
    assert not reached


# ---------------------------------------------------------------------------------------------
# The public API: impossible inputs raise InputError naming the argument.
# ---------------------------------------------------------------------------------------------

LLAMA = preset("llama-2-7b")
SIZES = [0, -1, Rational(3, 2), "4", None, True, float("nan"), oo]
"""Sizes no count accepts."""


def _api_refused():
    cases = []
    for value in SIZES:
        cases += [
            (f"traffic(n={value!r})", lambda v=value: collectives.traffic("allreduce", v, 100), "n"),
            (f"time(n={value!r})", lambda v=value: collectives.time("allgather", v, 100, 10, 1), "n"),
            (f"hierarchical_time(k={value!r})",
             lambda v=value: collectives.hierarchical_time("allreduce", 8, v, 100, (10, 1), (1, 5)), "k"),
            (f"ring_attention(c={value!r})", lambda v=value: sequence.ring_attention(1, 8, 8, 2, v), "c"),
            (f"ring_attention(b={value!r})", lambda v=value: sequence.ring_attention(v, 8, 8, 2, 2), "b"),
            (f"ulysses(s1={value!r})", lambda v=value: sequence.ulysses(1, 8, 8, 2, v), "s1"),
            (f"megatron_sp(m1={value!r})", lambda v=value: sequence.megatron_sp(1, 8, 8, 2, v), "m1"),
            (f"kv_cache_bytes(b={value!r})", lambda v=value: kv_cache.kv_cache_bytes(LLAMA, v, 100), "b"),
            (f"kv_cache_bytes(m1={value!r})", lambda v=value: kv_cache.kv_cache_bytes(LLAMA, 1, 100, m1=v), "m1"),
            (f"kv_cache_bytes(p={value!r})", lambda v=value: kv_cache.kv_cache_bytes(LLAMA, 1, 100, p=v), "p"),
            (f"kv_bytes_per_token(m1={value!r})", lambda v=value: kv_cache.kv_bytes_per_token(LLAMA, m1=v), "m1"),
            (f"tiled_traffic(tile={value!r})", lambda v=value: kernels.tiled_traffic(8, 8, 8, v, 2), "tile"),
            (f"mlp(l={value!r})", lambda v=value: mlp(1, v, 8, 32), "l"),
            (f"attention(h={value!r})", lambda v=value: attention(1, 8, 8, v), "h"),
            (f"transformer_layer(e={value!r})", lambda v=value: transformer_layer(1, 8, v, 32, 2), "e"),
        ]
    for value in (v for v in SIZES if v is not None):       # None is no paging
        cases += [(f"kv_cache_bytes(page={value!r})",
                   lambda v=value: kv_cache.kv_cache_bytes(LLAMA, 1, 100, page=v), "page")]
    for value in (-1, "8", None, float("nan"), oo):     # half a byte is a size (4-bit values)
        cases += [(f"traffic(tensor_bytes={value!r})", lambda v=value: collectives.traffic("allgather", 4, v),
                   "tensor_bytes")]
    for value in (-1, Rational(1, 2), "8", None, float("nan")):
        cases += [
            (f"kv_cache_bytes(tokens={value!r})", lambda v=value: kv_cache.kv_cache_bytes(LLAMA, 1, v), "tokens"),
            (f"reloads(m={value!r})", lambda v=value: kernels.reloads(v, 8, 8, 4), "m"),
            (f"gemm(k={value!r})", lambda v=value: kernels.gemm(8, v, 8, "h100"), "k"),
        ]
    for value in (0, -1, "10", float("nan")):
        cases += [(f"time(bandwidth={value!r})", lambda v=value: collectives.time("allreduce", 4, 100, v, 1),
                   "bandwidth")]
    for value in (-1, "1", float("inf")):
        cases += [(f"time(latency={value!r})", lambda v=value: collectives.time("allreduce", 4, 100, 10, v),
                   "latency")]
    for value in (0, -2, float("nan"), "2"):
        cases += [(f"tile_edge(element_bytes={value!r})", lambda v=value: kernels.tile_edge(2**20, v),
                   "element_bytes"),
                  (f"tile_edge(capacity={value!r})", lambda v=value: kernels.tile_edge(v, 2), "capacity")]
    for degree, rank in ((0, 0), (-2, 0), (4, 4), (4, -1), (2, 1.0)):    # SymPy's Integer(2) is a count (below)
        name = "degree" if not isinstance(degree, int) or degree < 1 else "rank"
        cases += [(f"sequence_shard(degree={degree!r}, rank={rank!r})",
                   lambda d=degree, r=rank: sequence.sequence_shard(16, d, r), name),
                  (f"head_shard(degree={degree!r}, rank={rank!r})",
                   lambda d=degree, r=rank: sequence.head_shard(8, d, r), name)]
    cases += [
        ("traffic(kind='gossip')", lambda: collectives.traffic("gossip", 4, 100), None),
        ("traffic(algorithm='mesh')", lambda: collectives.traffic("allreduce", 4, 100, "mesh"), None),
        ("kv_cache_bytes(kv_dtype='fp2')", lambda: kv_cache.kv_cache_bytes(LLAMA, 1, 100, kv_dtype="fp2"), None),
        ("kv_cache_bytes(mla='both')", lambda: kv_cache.kv_cache_bytes(LLAMA, 1, 100, mla="both"), "mla"),
        ("kv_cache_bytes(bert)", lambda: kv_cache.kv_cache_bytes(preset("bert-base-uncased"), 1, 100), None),
        ("paged(page=0)", lambda: kv_cache.paged(10, 0), "page"),
        ("max_batch(l_in=0)", lambda: throughput.max_batch(LLAMA, Serving(l_in=0)), None),
        ("Serving(b=-1)", lambda: Serving(b=-1), "b"),
        ("read('(e+f+h+b)**64')", lambda: read("(e+f+h+b)**64", argument="x"), "x"),
        ("read('1/0')", lambda: read("1/0", argument="x"), "x"),
        ("read('__import__')", lambda: read("__import__('os')", argument="x"), "x"),
        ("read_number('e')", lambda: read_number("e", argument="x"), "x"),
        ("read_number('nan')", lambda: read_number("nan", argument="x"), "x"),
        ("read('9**9**9')", lambda: read("9**9**9", argument="x"), "x"),
        ("stage_layers(p=0)", lambda: pipeline.stage_layers(12, 0), "p"),
        ("stage_layers(n_layers=-12)", lambda: pipeline.stage_layers(-12, 2), "n_layers"),
        ("in_flight(p=0)", lambda: pipeline.in_flight(0, 4), "p"),
        ("in_flight(micro_batches=-1)", lambda: pipeline.in_flight(2, -1), "micro_batches"),
        ("bubble(p=0)", lambda: pipeline.bubble(0, 4), "p"),
        ("bubble(micro_batches=0)", lambda: pipeline.bubble(2, 0), "micro_batches"),
        ("zb-h1 bubble(micro_batches=1/2)", lambda: pipeline.Schedule("zb-h1").bubble(2, Rational(1, 2)),
         "micro_batches"),
        ("dualpipe_bubble(p=0)", lambda: pipeline.dualpipe_bubble(0, 1, 1, 1), "p"),
        ("dualpipe_bubble(t_f=-1)", lambda: pipeline.dualpipe_bubble(4, -1, 1, 1), "t_f"),
        ("dualpipe_bubble(t_w=nan)", lambda: pipeline.dualpipe_bubble(4, 1, 1, float("nan")), "t_w"),
        ("shard_degree(d=0)", lambda: zero.shard_degree("optimizer", 1, 0), "d"),
        ("shard_degree(shard=0)", lambda: zero.shard_degree("weights", 3, 8, shard=0), "shard"),
        ("shard_degree(zero=5)", lambda: zero.shard_degree("optimizer", 5, 8), "zero"),
        ("shard_degree(zero=True)", lambda: zero.shard_degree("optimizer", True, 8), "zero"),
        ("utilisation(devices=0)", lambda: utilisation.utilisation(100, 1, 0, 10), "devices"),
        ("utilisation(peak=0)", lambda: utilisation.utilisation(100, 1, 1, 0), "peak"),
        ("utilisation(flops=-100)", lambda: utilisation.utilisation(-100, 1, 1, 10), "flops"),
        ("utilisation(step_time=0)", lambda: utilisation.utilisation(100, 0, 1, 10), "step_time"),
        ("utilisation(step_time='nan')", lambda: utilisation.utilisation(100, "nan", 1, 10), "step_time"),
        ("valid_values(upto=10**9)", lambda: analysis.valid_values(attention(1, 64, 64, 4, S.m1, 1), S.m1, 10**9),
         "upto"),
        ("valid_values(upto=0)", lambda: analysis.valid_values(attention(1, 64, 64, 4, S.m1, 1), S.m1, 0), "upto"),
    ]
    return cases


API_REFUSED = _api_refused()


@pytest.mark.parametrize("what, call, argument", API_REFUSED, ids=[what for what, _, _ in API_REFUSED])
def test_the_api_refuses_naming_the_argument(what, call, argument):
    with pytest.raises(InputError) as refused:
        call()
    if argument is not None:
        assert refused.value.argument == argument or argument in str(refused.value), (what, refused.value)


API_NUMBERS = [
    # a ring all-reduce sends 2 (n-1)/n of the tensor in 2 (n-1) rounds (reduce-scatter, all-gather)
    ("ring allreduce, 4 devices", lambda: collectives.traffic("allreduce", 4, 100), (150, 150, 6)),
    ("ring allgather, 4 devices", lambda: collectives.traffic("allgather", 4, 100), (75, 75, 3)),
    ("one device sends nothing", lambda: collectives.traffic("allreduce", 1, 100), (0, 0, 0)),
    ("broadcast of nothing", lambda: collectives.traffic("broadcast", 8, 0), (0, 0, 3)),
    # kernels: three 2-byte tiles of 1024 x 1024 fill 6 MiB exactly
    ("tile_edge", lambda: kernels.tile_edge(6 * 2**20, 2), 1024),
    ("tile_edge just short", lambda: kernels.tile_edge(6 * 2**20 - 1, 2), 512),
    ("paged", lambda: kv_cache.paged(10, 4), 12),
    ("paged exact", lambda: kv_cache.paged(12, 4), 12),
    ("sequence_shard", lambda: sequence.sequence_shard(12, 3, 2), [(8, 12)]),
    ("sequence_shard zigzag", lambda: sequence.sequence_shard(12, 3, 0, zigzag=True), [(0, 2), (10, 12)]),
    ("head_shard", lambda: sequence.head_shard(8, 4, 3), (6, 8)),
    # a degree read through positive_dims is SymPy's Integer: a whole number as numpy's are (checks.count)
    ("sequence_shard, SymPy's degree", lambda: sequence.sequence_shard(16, Integer(2), 0), [(0, 8)]),
    ("head_shard, SymPy's degree", lambda: sequence.head_shard(8, Integer(2), 1), (4, 8)),
    ("kv_cache_bytes", lambda: kv_cache.kv_cache_bytes(LLAMA, 2, 10), 2 * 10 * LLAMA_KV_PER_TOKEN),
    ("kv_cache_bytes, no tokens", lambda: kv_cache.kv_cache_bytes(LLAMA, 2, 0), 0),
    ("kv_cache_bytes, pages of 16", lambda: kv_cache.kv_cache_bytes(LLAMA, 1, 17, page=16), 32 * LLAMA_KV_PER_TOKEN),
    ("kv_cache_bytes, p=4", lambda: kv_cache.kv_cache_bytes(LLAMA, 1, 8, p=4), 8 * LLAMA_KV_PER_TOKEN // 4),
    ("kv_bytes_per_token", lambda: kv_cache.kv_bytes_per_token(LLAMA), LLAMA_KV_PER_TOKEN),
    ("max_batch gpt3 on h100", lambda: throughput.max_batch(preset("gpt3-175b"), Serving(l_in=512, l_out=128)), 0),
    ("read exact decimal", lambda: read("0.5 + 80e9", argument="x"), Rational(1, 2) + 80 * 10**9),
    ("read_number power", lambda: read_number("2**10", argument="x"), 1024),
    # m1 must divide the 4 heads: 1, 2, 4
    # 1F1B: (p - 1)/(n + p - 1) of the step idle; the first stage holds min(p, n) micro-batches
    ("bubble", lambda: pipeline.bubble(4, 8), Rational(3, 11)),
    ("in_flight", lambda: pipeline.in_flight(4, 2), 2),
    ("stage_layers", lambda: pipeline.stage_layers(12, 3), (4, 4, 4)),
    ("utilisation", lambda: utilisation.utilisation(50, 2, 5, 10), Rational(1, 2)),   # 50 / (2 s x 5 x 10)
    ("shard_degree", lambda: zero.shard_degree("gradients", 2, 8), 8),
    ("valid_values", lambda: analysis.valid_values(attention(1, 64, 64, 4, S.m1, 1), S.m1, 4096), [1, 2, 4]),
]
"""``(what, call, the value worked out by hand)``."""


def _plain(value):
    """A collective's traffic as a tuple; anything else as it is."""
    return (value.sent, value.received, value.steps) if isinstance(value, collectives.Traffic) else value


@pytest.mark.parametrize("what, call, expected", API_NUMBERS, ids=[what for what, _, _ in API_NUMBERS])
def test_the_api_gives_the_number_worked_out_by_hand(what, call, expected):
    assert _plain(call()) == expected


# ---------------------------------------------------------------------------------------------
# Hypothesis: command lines drawn from every command's options and edge values end in 0 or 2,
# within a few seconds, with one line on error and no negative or non-finite number printed.
# ---------------------------------------------------------------------------------------------

EDGE = ["1", "2", "0", "-1", "1.5", "nan", "inf", "x", "", "1e400", "2**60", "(e+f)**64", "1:8:x2", "8:1", "1:4:+0"]
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])|\bnan\b|\binf\b", re.IGNORECASE)


def _lines():
    value = st.sampled_from(EDGE)
    name = st.sampled_from(["b", "l", "d", "p", "n_micro", "m1", "s1", "l_in", "l_out", "q"])
    pairs = st.lists(st.tuples(name, value).map(lambda p: f"{p[0]}={p[1]}"), max_size=2)
    summary = st.tuples(st.sampled_from(["gpt2", "llama-2-7b", "mistral-7b"]), pairs,
                        st.sampled_from([[], ["--step-time", "1"], ["--step-time", "nan"], ["--json"]])).map(
        lambda t: ["summary", "--preset", t[0], *(["--set", *t[1]] if t[1] else []), *t[2]])
    inference = st.tuples(st.sampled_from(["gpt2", "llama-2-7b", "mistral-7b"]), pairs, st.booleans()).map(
        lambda t: ["inference", "--preset", t[0], *(["--set", *t[1]] if t[1] else []), *(["--json"] if t[2] else [])])
    sweep = st.tuples(st.sampled_from(["b", "p", "l", "d"]), value).map(
        lambda t: ["sweep", "--preset", "gpt2", "--field", "parameters,memory_bytes", "--grid", f"{t[0]}={t[1]}"])
    counted = st.tuples(st.sampled_from(["--batch", "--steps", "--hidden", "--vocab", "--layers"]), value).map(
        lambda t: ["lstm", "--batch", "4", "--steps", "2", "--hidden", "64", "--vocab", "100", "--layers", "2", *t])
    blocks = st.tuples(st.sampled_from(["table", "formula", "profile --preset gpt2", "crossover", "scheme"]),
                       st.sampled_from([[], ["--preset", "gpt2"]]), pairs).map(
        lambda t: [*t[0].split(), *(t[1] if t[0] in ("table", "formula") else []),
                   *(["--set", *t[2]] if t[2] else [])])
    return summary | inference | sweep | counted | blocks   # search compiles kernels: its refusals are in REFUSED


def _printed_numbers_are_possible(out: str) -> None:
    for match in NUMBER.finditer(out):
        number = float(match.group(0))
        assert math.isfinite(number) and number >= 0, (match.group(0), out[:400])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=_lines())
def test_drawn_command_lines_end_in_0_or_2(argv):
    status, out, err = run(argv)
    assert status in (0, 2), (argv, status, err)
    assert "Traceback" not in out + err, (argv, err)
    if status == 2:
        assert err.count("\n") == 1 and not out, (argv, err)
    elif argv[0] in ("summary", "inference", "lstm"):   # tables and formulas may print a minus sign
        _printed_numbers_are_possible(out)


def test_an_expiry_lost_in_a_finalizer_prints_nothing():
    """The budget's expiry can land in a finalizer, where Python reports it through ``sys.unraisablehook``
    (printing a traceback beside the one-line refusal: the run behind the test above once did); inside
    ``time_limit`` that report is dropped for the budget's own expiry and passed on for anything else."""
    import signal
    import sys
    from symbolic_cost import budget
    if not hasattr(signal, "setitimer"):
        pytest.skip("the budget needs setitimer (it runs unlimited without)")
    seen, before = [], sys.unraisablehook
    sys.unraisablehook = seen.append

    class Expiring:
        def __del__(self):
            raise budget._Expired

    class Failing:
        def __del__(self):
            raise ValueError("a finalizer's own error")

    try:
        with budget.time_limit(600, "nothing"):
            assert sys.unraisablehook != seen.append       # the budget's own hook, while it runs
            Expiring()
            Failing()
        assert sys.unraisablehook == seen.append           # and the one before it, after
    finally:
        sys.unraisablehook = before
    assert [type(u.exc_value) for u in seen] == [ValueError]
