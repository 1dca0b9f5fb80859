"""A tenth probe of the command line: lists typed with a value twice (``search --cp 1,1``), a
symbol ``optimize --over`` cannot choose (``--over es``), and the ``--accelerate`` reader's
switches written as text (``fsdp_offload_params: "true"``).  Each test says what happened
before; the expectations follow from the rule (each value once; a count to choose; accelerate's
own reading of a switch), not from the library's output."""

import argparse

import pytest

from test_refusals import refused
from test_hostile_seventh import refusal


# a value listed twice: one rule, checks.listed_once


def test_listed_once_names_each_repeat_once_in_the_order_listed():
    from symbolic_cost.checks import listed_once
    listed_once([1, 2, 4, 8], "--cp")
    error = refusal(lambda: listed_once([4, 1, 4, 2, 1, 4], "--cp"), "--cp")
    assert "4, 1 listed twice" in str(error)
    assert "[1] listed twice" in str(refusal(lambda: listed_once([[1], [2], [1]], "tensor"), "tensor"))
    listed_once(range(10**5), "b")          # a long list: linear, no refusal


@pytest.mark.parametrize("option, degrees, twice", [
    ("--cp", "1,1", "1"),            # was read as --cp 1, the repeat dropped unsaid
    ("--cp", "1,2,4,2", "2"),
    ("--cp", "1,1:8:x2", "1"),       # a list that overlaps a range (1, 2, 4, 8)
    ("--shard", "2,2", "2"),
])
def test_search_refuses_a_degree_listed_twice(capsys, option, degrees, twice):
    """``--cp 1,1`` (and ``--shard 2,2``) searched as if each degree were listed once."""
    extra = ["--zero", "3"] if option == "--shard" else []
    refused(capsys, ["search", "--preset", "gpt2", "--devices", "8", "--global-batch", "64", *extra, option, degrees],
            f"argument {option}", f"{twice} listed twice", "list each value once")


def test_search_degrees_still_read_lists_and_ranges():
    """``1,2:8:x2`` is 1, then 2 doubled to 8: 1, 2, 4, 8 (by hand), each once."""
    from symbolic_cost.cli.search import degrees
    assert degrees("1,2:8:x2") == [1, 2, 4, 8]
    assert degrees(" 8 , 2") == [8, 2]
    with pytest.raises(argparse.ArgumentTypeError, match="8 listed twice"):
        degrees("8,2:8:x2")


@pytest.mark.parametrize("argv, says", [
    (["sweep", "--preset", "gpt2", "--grid", "b=1,2,1"], ["argument --grid", "b: 1 listed twice"]),
    (["sweep", "--preset", "gpt2", "--grid", "b=1", "--field", "total,total_s"],   # total_s is total's column
     ["argument --field", "total named twice"]),
    (["formula", "--leading", "e,l,e"], ["--leading: e named twice: name each once"]),
    (["search", "--preset", "gpt2", "--devices", "8", "--global-batch", "64", "--tensor", "1d", "2d", "1d"],
     ["tensor: 1d listed twice", "--tensor"]),
])
def test_the_other_lists_keep_the_same_rule(capsys, argv, says):
    refused(capsys, argv, *says)


def test_a_search_space_field_listed_twice_is_refused_by_the_same_rule():
    from symbolic_cost.numeric.search import Space
    assert "1 listed twice" in str(refusal(lambda: Space(cp=(1, 2, 1)), "cp"))
    assert "1f1b listed twice" in str(refusal(lambda: Space(schedules=("1f1b", "1f1b")), "schedules"))
    assert Space(cp=(1, 2, 4)).cp == (1, 2, 4)


# optimize --over: a count of the block to choose


DENSE_LAYER = "b, l, e, f, h, m1, s1"
"""The symbols of a dense layer's cost (``symbols.DIMENSIONS``: batch, sequence, width, MLP width,
heads, tensor and sequence degrees), all whole numbers; the element sizes ``es`` and ``es_mask``
are bytes that ``--precision`` sets."""


@pytest.mark.parametrize("over", ["es", "es_mask"])
def test_optimize_refuses_an_element_size(capsys, over):
    """``optimize --over es`` tried element sizes of 1 to 64 bytes and printed ``es = 1`` as the
    optimum; the command chooses a degree (or another count), and ``--precision`` sets ``es``."""
    refused(capsys, ["optimize", "--over", over], f"--over {over}", "--precision",
            f"--over takes one of {DENSE_LAYER}")


def test_optimize_refuses_a_dimension_of_a_named_model_as_over(capsys):
    """``--preset gpt2 --over e`` was refused as ``--set e: not settable here``, a ``--set`` the
    command line did not hold; a named model fixes e, f, h, so b, l, m1, s1 are left to choose."""
    refused(capsys, ["optimize", "--preset", "gpt2", "--over", "e"], "--over e", "gpt2",
            "--over takes one of b, l, m1, s1")


def test_optimize_names_over_and_max_when_no_value_fits(capsys):
    """The default model (gpt3-175b, 96 heads) takes ``--set e=``, so ``--over e`` is a choice; but
    ``h | e`` leaves no width from 1 to 64.  It ended in ``optimum over e takes 1 to 4,096
    candidate values ..., got 0``, naming neither option."""
    refused(capsys, ["optimize", "--over", "e"], "--over e", "--max 64")


def test_optimize_still_lists_the_symbols_of_the_block(capsys):
    refused(capsys, ["optimize", "--over", "d"], "--over d", "does not depend on d", DENSE_LAYER)
    refused(capsys, ["optimize", "--over", "m1", "--set", "m1=2"], "--set m1", "give it one way")


def test_crossover_names_for_when_the_roots_are_not_one(capsys):
    """``crossover --for e`` (the MLP's FLOPs are quadratic in e) ended in "expected one positive
    crossover in e" without naming ``--for``."""
    refused(capsys, ["crossover", "--for", "e"], "--for e", "one positive crossover")


# the --accelerate reader's switches, read as accelerate launch hands them to its plugins


SWITCHES = [True, False, "true", "false", "True", "FALSE", "yes", "No", "on", "off", "y", "n", "t", "f", "1", "0",
            1, 0, 2, -1, 1.0, None, "", " true", "true ", "maybe", [True], {"a": 1}]
"""YAML values of a switch: booleans, the text ``accelerate config`` users type, numbers, ``null``,
padded text and containers; which of them accelerate takes is its own launcher's and plugin's say
(``launched``)."""


def _launch_env(tmp_path, config: dict) -> tuple:
    """``accelerate launch --config_file`` of ``config`` up to the training script's environment:
    accelerate's own parser and its copy of the file's values onto the launch arguments."""
    yaml = pytest.importorskip("yaml")
    launch = pytest.importorskip("accelerate.commands.launch")
    path = tmp_path / "launch.yaml"
    path.write_text(yaml.safe_dump({"compute_environment": "LOCAL_MACHINE", "num_processes": 2, **config}))
    args, *_ = launch._validate_launch_command(launch.launch_command_parser().parse_args(
        ["--config_file", str(path), "train.py"]))
    return args, path


def launched_fsdp(tmp_path, monkeypatch, key: str, value):
    """What accelerate makes of ``fsdp_config.key: value`` (FSDP2): the environment
    ``prepare_multi_gpu_env`` exports, read by ``FullyShardedDataParallelPlugin()`` in the script;
    ``(offload, checkpointing, reshard)``, or ``None`` where the plugin raises."""
    args, _ = _launch_env(tmp_path, {"distributed_type": "FSDP", "mixed_precision": "bf16",
                                     "fsdp_config": {"fsdp_version": 2, key: value}})
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env
    for name, text in prepare_multi_gpu_env(args).items():
        if name.startswith("FSDP_"):
            monkeypatch.setenv(name, text)
    try:
        plugin = FullyShardedDataParallelPlugin()
    except ValueError:          # str_to_bool's "invalid truth value"
        return None
    offload = type(plugin.cpu_offload).__name__ == "CPUOffloadPolicy"        # FSDP2's policy, or the empty one
    return offload, plugin.activation_checkpointing, plugin.reshard_after_forward


@pytest.mark.parametrize("key", ["fsdp_offload_params", "fsdp_activation_checkpointing", "fsdp_reshard_after_forward"])
@pytest.mark.parametrize("value", SWITCHES, ids=repr)
def test_fsdp_switches_are_read_as_accelerate_reads_them(tmp_path, monkeypatch, key, value):
    """``fsdp_offload_params: "true"`` (and ``"false"``) were refused ("must be true or false"),
    and so were 1 and 0; accelerate launch exports ``str(value).lower()`` and its plugin reads it
    with ``str_to_bool``, so it takes them, and refuses ``" true"``, 2, 1.0 and ``null``."""
    from symbolic_cost.models.accelerate import fsdp_policy
    theirs = launched_fsdp(tmp_path, monkeypatch, key, value)
    section = {"fsdp_version": 2, key: value}
    if theirs is None:
        refusal(lambda: fsdp_policy(section, 2, 2, []), f"fsdp_config.{key}")
        return
    ours = fsdp_policy(section, 2, 2, [])
    assert (ours.get("offload") == "parameters", ours.get("recompute") == "full",
            ours.get("reshard_after_forward", True)) == theirs


def test_a_text_switch_in_an_accelerate_file_is_read_on_the_command_line(tmp_path, capsys):
    """The file as a user writes it, through ``summary --accelerate``: ``"true"`` offloads the
    parameters as ``true`` does, ``"True "`` (a space accelerate's str_to_bool keeps) is refused."""
    import json
    from symbolic_cost.cli import main
    head = "distributed_type: FSDP\nnum_processes: 8\nmixed_precision: bf16\nfsdp_config:\n  fsdp_version: 2\n"
    answers = []
    for written in ("true", '"true"', "'on'"):
        (tmp_path / "a.yaml").write_text(head + f"  fsdp_offload_params: {written}\n")
        assert main(["summary", "--preset", "llama-2-7b", "--set", "l=2048", "--accelerate", str(tmp_path / "a.yaml"),
                     "--json"]) == 0
        answers.append(json.loads(capsys.readouterr().out))
    assert answers[0] == answers[1] == answers[2] and answers[0]["layout"]["offload"] == "parameters"
    (tmp_path / "a.yaml").write_text(head + "  fsdp_offload_params: 'True '\n")
    refused(capsys, ["summary", "--preset", "llama-2-7b", "--set", "l=2048", "--accelerate", str(tmp_path / "a.yaml")],
            "fsdp_config.fsdp_offload_params", "'True '")


def launched_fp8(tmp_path, monkeypatch, key: str, value, default: bool):
    """What accelerate makes of ``fp8_config.key: value``: ``setup_fp8_env``'s variable (none for
    ``null``) read by the recipe's ``parse_flag_from_env(name, default)``; ``None`` where it raises."""
    args, _ = _launch_env(tmp_path, {"distributed_type": "MULTI_GPU", "mixed_precision": "fp8",
                                     "fp8_config": {"backend": "AO", key: value}})
    from accelerate.utils.environment import parse_flag_from_env
    from accelerate.utils.launch import setup_fp8_env
    name = f"ACCELERATE_FP8_{key.upper()}"
    monkeypatch.delenv(name, raising=False)
    for variable, text in setup_fp8_env(args, {}).items():
        monkeypatch.setenv(variable, text)
    try:
        return parse_flag_from_env(name, default)
    except ValueError:
        return None


@pytest.mark.parametrize("key, default", [("use_mxfp8_block_scaling", False), ("enable_fsdp_float8_all_gather", True)])
@pytest.mark.parametrize("value", SWITCHES, ids=repr)
def test_fp8_switches_are_read_as_accelerate_reads_them(tmp_path, monkeypatch, key, default, value):
    """The FP8 recipes' switches: ``null`` was refused, where accelerate exports nothing and the
    recipe's default holds; ``" true"`` was read as true (stripped), where str_to_bool refuses it;
    1 and 0 were refused, where accelerate takes them."""
    from symbolic_cost.models.accelerate import fp8_policy
    theirs = launched_fp8(tmp_path, monkeypatch, key, value, default)
    backend = "TE" if key == "use_mxfp8_block_scaling" else "AO"
    section = {"backend": backend, key: value}
    if theirs is None:
        refusal(lambda: fp8_policy(section, [], fsdp_sharded=True), f"fp8_config.{key}")
        return
    policy = fp8_policy(section, [], fsdp_sharded=True)
    assert (policy["fp8"] == "mxfp8" if backend == "TE" else policy["fp8_gather"]) == theirs


def test_switch_is_str_to_bool_of_the_text_accelerate_exports():
    """The rule itself against accelerate's ``str_to_bool`` on ``str(value)``, the text its
    launcher writes into the environment."""
    str_to_bool = pytest.importorskip("accelerate.utils.environment").str_to_bool
    from symbolic_cost.models.accelerate import switch
    for value in SWITCHES:
        try:
            theirs = bool(str_to_bool(str(value)))
        except ValueError:
            refusal(lambda: switch(value, "fsdp_config.fsdp_offload_params"), "fsdp_config.fsdp_offload_params")
            continue
        assert switch(value, "fsdp_config.fsdp_offload_params") is theirs


@pytest.mark.parametrize("value", [1, 2, "1", "2", " 2", "+2", True, False, 1.0, 2.0, None, 0, 3, "two", [2]], ids=repr)
def test_fsdp_version_is_read_as_accelerate_reads_it(tmp_path, monkeypatch, value):
    """``fsdp_version: "2"`` was refused and ``true`` read as FSDP1, ``2.0`` as FSDP2; accelerate
    launch exports ``FSDP_VERSION=str(value)`` and the plugin takes ``int()`` of it (its first line),
    so "2" is FSDP2 and ``true``, ``2.0`` are refused.  FSDP2's plugin is built on this machine;
    FSDP1's looks for a GPU first, so its version is taken as the plugin takes it, from the text."""
    from symbolic_cost.models.accelerate import fsdp_version
    args, _ = _launch_env(tmp_path, {"distributed_type": "FSDP", "mixed_precision": "bf16",
                                     "fsdp_config": {"fsdp_version": value}})
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env
    exported = prepare_multi_gpu_env(args)["FSDP_VERSION"]
    try:
        theirs = int(exported)
    except ValueError:
        theirs = None
    if theirs == 2:
        monkeypatch.setenv("FSDP_VERSION", exported)
        assert FullyShardedDataParallelPlugin().fsdp_version == 2
    if theirs not in (1, 2):
        refusal(lambda: fsdp_version({"fsdp_version": value}), "fsdp_config.fsdp_version")
    else:
        assert fsdp_version({"fsdp_version": value}) == theirs


def test_inference_refuses_a_batch_cap_listed_twice(capsys):
    """``inference --devices 8 --batch-limits 8 16 8`` tried the cap 8 once and said nothing."""
    refused(capsys, ["inference", "--preset", "llama-2-7b", "--devices", "8", "--slo-ttft", "1",
                     "--batch-limits", "8", "16", "8"], "--batch-limits: 8 listed twice")
