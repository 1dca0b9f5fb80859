"""DeepSpeed's batch rule as ``models.deepspeed.batch`` writes it, against cases worked by hand from
DeepSpeed's ``_set_batch_related_parameters`` (``deepspeed/runtime/config.py``): ``train_batch_size
= micro x accumulation x world``; given two, the third is derived; given one, the accumulation is 1.
Fast: ``tests/mutations.py`` runs it."""

import re

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.models.deepspeed import batch


@pytest.mark.parametrize("config,world,expected", [
    ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2}, None, (8, 2, 4)),
    ({"train_batch_size": 16, "gradient_accumulation_steps": 1}, 8, (2, 1, 8)),       # micro = 16 / (1 x 8)
    ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4}, 8, (4, 2, 8)),    # accum = 64 / (4 x 8)
    ({"train_batch_size": 32}, 8, (4, 1, 8)),                                          # micro = 32 / 8
    ({"train_micro_batch_size_per_gpu": 4}, 8, (4, 1, 8)),
    ({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 3}, 2, (4, 3, 2)),
])
def test_batch_rule(config, world, expected):
    assert batch(config, world, {}) == expected


def test_batch_rule_refusals():
    with pytest.raises(InputError, match="DeepSpeed's rule"):
        batch({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2}, 8, {})
    with pytest.raises(InputError, match="--devices"):
        batch({"train_micro_batch_size_per_gpu": 8}, None, {})


# DeepSpeed's own reading of a config (deepspeed/runtime/config.py, its pydantic models), worked by hand

import json  # noqa: E402
import pathlib  # noqa: E402

from symbolic_cost import symbols as S  # noqa: E402

from symbolic_cost.models.config import preset  # noqa: E402
from symbolic_cost.models.deepspeed import _boolean, deepspeed_setup  # noqa: E402

COMMAND = dict(zero=0, precision="bf16", precision_given=False, zero_given=False)


def _setup(config: dict, **command):
    base = {"train_micro_batch_size_per_gpu": 2, **config}
    return deepspeed_setup(json.dumps(base), "ds.json", preset("gpt2"), 8, {}, {**COMMAND, **command})


@pytest.mark.parametrize("value,on", [("false", False), ("False", False), ("0", False), (0, False), (False, False),
                                      ("off", False), ("no", False), ("true", True), ("TRUE", True), (1, True),
                                      ("on", True), ("yes", True), (True, True)])
def test_booleans_read_as_deepspeeds_pydantic_reads_them(value, on):
    # "false" is a non-empty string: read as truth it turned fp16 on, a wrong number
    assert _setup({"fp16": {"enabled": value}}).policy["precision"] == ("fp16" if on else "fp32")
    pydantic = pytest.importorskip("pydantic")
    assert pydantic.TypeAdapter(bool).validate_python(value) is on


@pytest.mark.parametrize("value", ["maybe", 2, None, 0.5])
def test_what_pydantic_refuses_as_a_boolean_is_refused(value):
    with pytest.raises(InputError, match="fp16.enabled must be a boolean"):
        _setup({"fp16": {"enabled": value}})
    pydantic = pytest.importorskip("pydantic")
    with pytest.raises(pydantic.ValidationError):
        pydantic.TypeAdapter(bool).validate_python(value)


def test_an_auto_stage_needs_the_command_lines_zero():
    with pytest.raises(InputError, match="give --zero"):
        _setup({"zero_optimization": {"stage": "auto"}})
    assert _setup({"zero_optimization": {"stage": "auto"}}, zero=2, zero_given=True).policy["zero"] == 2


@pytest.mark.parametrize("name,ours", [("Adam", "adam"), ("adam", "adam"), ("AdamW", "adamw"), ("adamw", "adamw"),
                                       ("ADAMW", "adamw")])
def test_optimizer_names_in_any_case_as_deepspeed_lowercases_them(name, ours):
    assert _setup({"optimizer": {"type": name}}).policy["optimizer"] == ours


def test_an_optimizer_the_reader_does_not_model_is_refused_by_name():
    with pytest.raises(InputError, match="optimizer.type 'Adagrad'"):
        _setup({"optimizer": {"type": "Adagrad"}})
    # 0/1 Adam (DeepSpeedExamples' bing_bert): its local steps skip the exchange at a varying interval
    with pytest.raises(InputError, match="optimizer.type 'ZeroOneAdam': 0/1 Adam skips the momentum exchange"):
        _setup({"optimizer": {"type": "ZeroOneAdam", "params": {"var_freeze_step": 1000}}})


@pytest.mark.parametrize("name, ours", [("OneBitAdam", "onebit-adam"), ("OnebitAdam", "onebit-adam"),
                                        ("OneBitLamb", "onebit-lamb")])
def test_one_bit_optimizers_are_read_after_their_warm_up(name, ours):
    """DeepSpeed's names (``ONEBIT_ADAM_OPTIMIZER = 'onebitadam'``, any case); the note names the
    warm-up, ``freeze_step`` (100000 when unset, ``OnebitAdam.__init__``)."""
    given = _setup({"optimizer": {"type": name, "params": {"freeze_step": 23000}}})
    assert given.policy["optimizer"] == ours
    assert any("freeze_step 23000" in n for n in given.notes)
    assert any("freeze_step 100000" in n for n in _setup({"optimizer": {"type": name}}).notes)
    mpi = _setup({"optimizer": {"type": name, "params": {"comm_backend_name": "mpi"}}})
    assert any("timed as NCCL's (comm_backend_name 'mpi')" in n for n in mpi.notes)


def test_one_bit_adam_with_zero_is_refused_as_deepspeed_asserts():
    # engine.py: assert not self.zero_optimization(), "1bit-Adam is not compatible with ZeRO"
    with pytest.raises(InputError, match="OneBitAdam' with zero_optimization.stage 1: DeepSpeed asserts"):
        _setup({"optimizer": {"type": "OneBitAdam"}, "zero_optimization": {"stage": 1}})


def test_lamb_keeps_adams_two_moments():
    """DeepSpeed's FusedLamb keeps ``exp_avg`` and ``exp_avg_sq`` per parameter, as Adam does."""
    lamb = _setup({"optimizer": {"type": "Lamb"}})
    assert lamb.policy["optimizer"] == "adam" and any("Lamb: Adam's two moments" in n for n in lamb.notes)


@pytest.mark.parametrize("section, why", [("compression_training", "quantizes, prunes or removes layers"),
                                          ("sparse_attention", "block layouts"), ("autotuning", "--set b=, --zero"),
                                          ("progressive_layer_drop", "layers skipped")])
def test_sections_that_change_the_work_are_refused_with_the_reason(section, why):
    with pytest.raises(InputError, match=re.escape(f"{section}: ") + ".*" + re.escape(why)):
        _setup({section: {"enabled": True}})


def test_torch_autocast_off_is_accepted_and_on_is_refused():
    assert _setup({"torch_autocast": {"enabled": False}, "bf16": {"enabled": True}}).policy["precision"] == "bf16"
    with pytest.raises(InputError, match="torch_autocast.enabled"):
        _setup({"torch_autocast": {"enabled": "true"}})


def test_fp16_auto_cast_changes_no_count():
    """DeepSpeedExamples' ``training/imagenet/config/ds_fp16_config.json`` sets ``"auto_cast"`` in its fp16 section;
    DeepSpeed casts only floating-point inputs (``FP16_AUTO_CAST``), so the count is the same either way."""
    plain = _setup({"fp16": {"enabled": True}})
    for value in (False, True):
        cast = _setup({"fp16": {"enabled": True, "auto_cast": value}})
        assert cast.policy == plain.policy and cast.values == plain.values


def test_an_offload_section_that_is_not_an_object_is_refused():
    """Found by fuzzing DeepSpeedExamples' files: ``"offload_optimizer": 2`` ended in a TypeError."""
    with pytest.raises(InputError, match="zero_optimization.offload_optimizer must be an object, got 2"):
        _setup({"zero_optimization": {"stage": 3, "offload_optimizer": 2}})


def test_a_key_deepspeed_does_not_read_is_ignored_as_deepspeed_ignores_it():
    """DeepSpeedExamples' ImageNet config (``training/imagenet/config/ds_config.json``) carries
    ``"cuda_visible_devices": 0``, a key DeepSpeed's config never reads: DeepSpeed runs the file, so
    the reader takes it, ZeRO-0 and fp32 as the file says (on 8 devices, a micro-batch of 256 / (1 x 8)),
    and notes the key."""
    text = (pathlib.Path(__file__).parent / "framework_inputs" / "ds_config_imagenet.json").read_text()
    setup = deepspeed_setup(text, "ds_config.json", preset("gpt2"), 8, {}, COMMAND)
    assert (setup.values[S.b], setup.values[S.n_micro], setup.values[S.d]) == (32, 1, 8)
    assert setup.policy["zero"] == 0 and setup.policy["precision"] == "fp32"
    assert any(n.startswith("cuda_visible_devices: not a key DeepSpeed reads") for n in setup.notes)


def test_a_misspelt_section_is_ignored_and_noted_and_an_unread_deepspeed_key_refused():
    # DeepSpeed reads "zero_optimization" and nothing else for ZeRO: a misspelt section runs ZeRO-0
    misspelt = _setup({"zero_optimisation": {"stage": 3}})
    assert misspelt.policy["zero"] == 0 and any(n.startswith("zero_optimisation: not a key") for n in misspelt.notes)
    # "elasticity" is DeepSpeed's (it picks the batch and the world size itself): refused, not ignored
    with pytest.raises(InputError, match="elasticity: a DeepSpeed key this reader does not read"):
        _setup({"elasticity": {"enabled": True}})


@pytest.mark.parametrize("flag,stage", [(True, 1), (False, 0)])
def test_the_old_boolean_zero_is_read_as_deepspeed_reads_it(flag, stage):
    """DeepSpeed's ``read_zero_config_deprecated`` (``zero/config.py``, kept to this day) turns a
    boolean ``zero_optimization`` into ``{"stage": 1 if it else 0}``, its bucket from the top-level
    ``allgather_size``; DeepSpeedExamples' Megatron-LM configs of 2020 write ``true``."""
    setup = _setup({"zero_optimization": flag, "allgather_size": 500000000})
    assert setup.policy["zero"] == stage and setup.policy["offload"] == "none"
    assert any("deprecated boolean form" in n and f"stage {stage}" in n for n in setup.notes)


@pytest.mark.parametrize("key", ["cpu_offload_params", "cpu_offload_param"])
def test_the_older_names_of_parameter_offload_offload_the_parameters(key):
    """DeepSpeed 0.3's ``cpu_offload_params`` (its ``ZERO_FORMAT`` documents it) and today's
    deprecated ``cpu_offload_param`` both become ``offload_param: {device: cpu}``; beside the old
    ``cpu_offload`` (the optimizer's), both are on the host: the library's ``offload=parameters``;
    alone, the weights only (``offload=weights``: the optimizer stays on the device)."""
    both = _setup({"zero_optimization": {"stage": 3, "cpu_offload": True, key: True}})
    assert both.policy["offload"] == "parameters"
    assert _setup({"zero_optimization": {"stage": 3, "cpu_offload": True, key: False}}).policy["offload"] == "optimizer"
    assert _setup({"zero_optimization": {"stage": 3, key: True}}).policy["offload"] == "weights"
    assert _setup({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}).policy["offload"] == "weights"


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_parameter_offload_below_stage_3_is_what_deepspeed_does_with_it(stage):
    """DeepSpeed's engine hands ``offload_param`` to the ZeRO-3 optimizer alone (its config docs:
    "Available only with ZeRO stage 3"): below stage 3 the parameters stay on the device, and the
    reader says so instead of refusing a value the file never wrote (``offload='weights'``)."""
    setup = _setup({"zero_optimization": {"stage": stage, "offload_param": {"device": "cpu"}}})
    assert setup.policy["offload"] == "none"
    assert any("offloads parameters under ZeRO stage 3 only" in n and f"stage {stage}" in n for n in setup.notes)
    if stage:                   # the optimizer's offload beside it is ZeRO-Offload's, as without it
        both = _setup({"zero_optimization": {"stage": stage, "offload_optimizer": {"device": "cpu"},
                                             "offload_param": {"device": "cpu"}}})
        assert both.policy["offload"] == "optimizer"


def test_zero_3_fields_by_their_own_names_change_no_count():
    """DeepSpeed's ``DeepSpeedZeroConfig`` reads ``stage3_max_live_parameters`` also as
    ``max_live_parameters`` (its pydantic model populates fields by name as well as by alias);
    axolotl's ZeRO-3 configs write the short names.  Buckets and thresholds change no count."""
    short = {"max_live_parameters": 10**9, "max_reuse_distance": 10**9, "prefetch_bucket_size": 10**8,
             "param_persistence_threshold": 10**4, "gather_16bit_weights_on_model_save": True}
    long = {f"stage3_{k}": v for k, v in short.items()}
    plain = _setup({"zero_optimization": {"stage": 3, **long}})
    named = _setup({"zero_optimization": {"stage": 3, **short}})
    assert named.policy == plain.policy and named.values == plain.values


def test_a_key_named_twice_is_refused_as_deepspeed_refuses_it():
    """DeepSpeed reads its config with ``dict_raise_error_on_duplicate_keys``: a key named twice in
    one object is an error there, not the last value (which plain JSON keeps)."""
    text = '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1, "stage": 3}}'
    with pytest.raises(InputError, match="names 'stage' twice in one object; DeepSpeed refuses duplicate keys"):
        deepspeed_setup(text, "ds.json", preset("gpt2"), 8, {}, dict(COMMAND))


LLAMA_3_2_1B = 1_235_814_400
"""meta-llama/Llama-3.2-1B's parameters as transformers counts them (tests/test_hf_families.py builds it on the
meta device), its embedding tied to the head."""


def test_bf16_masters_and_states_are_two_bytes_each(tmp_path, capsys):
    """DeepSpeedExamples' ``training/bf16_master_weight/configs/bf16_full.json`` (at a43031e5c, without its
    torch_autocast section): ZeRO-3 over 8 ranks with bf16 master weights and bf16 Adam states
    (DeepSpeed's ``_configure_master_weights``): per parameter a 2-byte master and two 2-byte moments, an
    eighth of them on each rank, where fp32 would be 12 bytes."""
    from symbolic_cost.cli import main
    config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
              "bf16": {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True},
              "zero_optimization": {"stage": 3, "overlap_comm": True, "stage3_param_persistence_threshold": 0}}
    path = tmp_path / "bf16_full.json"
    path.write_text(json.dumps(config))
    hf = pathlib.Path(__file__).parent / "hf_configs" / "Llama-3.2-1B.json"
    assert main(["summary", "--hf-config", str(hf), "--deepspeed", str(path), "--devices", "8", "--set", "l=2048",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["parameters"] == LLAMA_3_2_1B
    assert got["optimizer_bytes"] == LLAMA_3_2_1B * (2 + 2 + 2) // 8


def test_bf16_masters_with_fp32_states_live_on_the_host():
    """Without ``bf16_optimizer_states`` DeepSpeed keeps fp32 moments in DeepSpeedCPUAdam and asserts the
    optimizer is offloaded (``_enforce_cpu_offload``): 2 + 4 + 4 bytes a parameter, on the host."""
    masters = {"bf16": {"enabled": True, "bf16_master_weights_and_grads": True}}
    offloaded = _setup({**masters, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})
    assert offloaded.policy["optimizer"] == "adam-16bit-master" and offloaded.policy["offload"] == "optimizer"
    with pytest.raises(InputError, match="requires zero_optimization.offload_optimizer"):
        _setup({**masters, "zero_optimization": {"stage": 2}})


@pytest.mark.parametrize("config, refusal", [
    # config.py: "Bf16_master_weights_and_grads is only supported with ZeRO Stage 1, 2, or 3"
    ({"bf16": {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}},
     "ZeRO stage 1, 2 or 3 only"),
    # config.py: "bf16_optimizer_states requires bf16_master_weights_and_grads to be enabled"
    ({"bf16": {"enabled": True, "bf16_optimizer_states": True}, "zero_optimization": {"stage": 1}},
     "require bf16 master weights"),
    ({"bf16": {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True},
      "zero_optimization": {"stage": 1}, "optimizer": {"type": "OneBitAdam"}}, "OneBitAdam"),
    ({"fp16": {"enabled": True}, "bf16": {"bf16_master_weights_and_grads": True, "bf16_optimizer_states": True},
      "zero_optimization": {"stage": 1}}, "with fp16 training"),
])
def test_bf16_masters_where_deepspeed_refuses_them_are_refused(config, refusal):
    with pytest.raises(InputError, match=refusal):
        _setup(config)
