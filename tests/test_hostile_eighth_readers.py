"""Issue 66, an eighth probe: the framework file readers (``--megatron-args``, ``--torchtitan`` TOML
and Python, ``--deepspeed``, ``--nemo-recipe``, ``--hf-training-args``, ``--accelerate``) and their
Python functions, fed the published files of ``tests/framework_inputs`` with one value replaced at a
time (0, -1, "auto", null, "false"/"False"/"0" as text, 1e400, 2**70, 8.5, a list or a mapping where a
scalar belongs, an empty, truncated or doubled file; about 25,000 runs).  No reader hung; NeMo 1.x
ended in an internal error on a list where a name belongs.  The rest were silent or misnamed: switches
read by a rule other than the framework's (a value the framework reads as on counted as off, or the
reverse), a torchtitan Python section the reader could not evaluate left at its defaults, a dropout of
8.5 counted as one that runs, and sizes past 2**53 refused under the symbol they feed (``e``, ``b``,
``micro_batches``) rather than the file's key.  Each is now read as the framework reads it, or refused
naming the key and the rule.  The expectations follow from the frameworks' rules (quoted in each
test), not from the library's output."""

import json
import pathlib

import pytest

from summary_calls import summary_error, summary_json
from test_hostile_seventh import refusal

INPUTS = pathlib.Path(__file__).resolve().parent / "framework_inputs"
LLAMA32 = str(pathlib.Path(__file__).resolve().parent / "hf_configs" / "Llama-3.2-1B.json")


def _edited(tmp_path, source: str, old: str, new: str, name: str | None = None) -> str:
    """``source`` (a published file) with its one ``old`` replaced by ``new``, in ``tmp_path``."""
    text = (INPUTS / source).read_text()
    assert text.count(old) == 1, old
    path = tmp_path / (name or source)
    path.write_text(text.replace(old, new))
    return str(path)


# --deepspeed: ZeRO's deprecated offload switches


@pytest.mark.parametrize("value", ["true", "True", 1])
def test_deepspeed_old_cpu_offload_switch_read_as_pydantic_reads_it(tmp_path, capsys, value):
    """``zero_optimization.cpu_offload`` is ``Optional[bool]`` in DeepSpeed's pydantic config, which
    reads ``"true"`` and 1 as true; the reader tested ``is True`` and counted no offload for them
    (and took -1 or a list silently).  Every form of true offloads the optimizer as ``true`` does."""
    source = json.loads((INPUTS / "ds_zero2_cpu_offload_config.json").read_text())
    assert source["zero_optimization"]["cpu_offload"] is True
    words = ["--hf-config", LLAMA32, "--devices", "8", "--deepspeed"]
    plain = summary_json(capsys, *words, str(INPUTS / "ds_zero2_cpu_offload_config.json"))
    source["zero_optimization"]["cpu_offload"] = value
    (tmp_path / "ds.json").write_text(json.dumps(source))
    got = summary_json(capsys, *words, str(tmp_path / "ds.json"))
    assert got["layout"]["offload"] == plain["layout"]["offload"] == "optimizer"
    assert got["memory_bytes"] == plain["memory_bytes"]


@pytest.mark.parametrize("key", ["cpu_offload", "cpu_offload_param", "cpu_offload_params"])
@pytest.mark.parametrize("value", [-1, [1], "sometimes"])
def test_deepspeed_old_offload_switch_that_is_no_boolean_is_refused(key, value):
    """DeepSpeed's pydantic config refuses -1, a list or other text for a boolean; the reader took them
    as off.  Refused, naming the key; null (the field's default) stays off."""
    from symbolic_cost.models.config import preset
    from symbolic_cost.models.deepspeed import deepspeed_setup

    def setup(switch):
        config = {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3, key: switch}}
        return deepspeed_setup(json.dumps(config), "ds.json", preset("gpt2"), 8, {}, {})
    refusal(lambda: setup(value), f"zero_optimization.{key}")
    assert setup(None).policy["offload"] == "none"


# --torchtitan: compile


@pytest.mark.parametrize("value", ['"true"', '"false"', "1"])
def test_torchtitan_compile_that_is_no_boolean_is_refused(tmp_path, capsys, value):
    """``[training] compile = "false"`` is truthy to torchtitan (its config is a dataclass filled from
    the TOML, tested as ``if compile``), while the reader tested ``is True`` and read it as off:
    async tensor parallelism was then noted as not taking effect.  A switch that is not a TOML
    boolean is refused, naming it."""
    path = _edited(tmp_path, "llama3_8b.toml", "compile = false", f"compile = {value}")
    assert "[training] compile" in summary_error(capsys, "--torchtitan", path, "--devices", "64")


def test_torchtitan_compile_true_still_turns_async_tensor_parallelism_on():
    """The boolean itself is read as before: ``compiled`` is true with ``compile = true``."""
    from symbolic_cost.models.torchtitan import compiled
    from symbolic_cost.models.torchtitan_keys import Job
    assert compiled(Job("", "", data={"training": {"compile": True}}))
    assert compiled(Job("", "", data={"compile": {"enable": True}}))
    assert not compiled(Job("", "", data={"training": {"compile": False}}))
    refusal(lambda: compiled(Job("", "", data={"compile": {"enable": "yes"}})), "[compile] enable")


# --nemo-recipe (NeMo 1.x): switches

NEMO1 = "nemo1_megatron_baichuan2_config.yaml"
BAICHUAN_VOCAB = "125696"


def _nemo1(tmp_path, old: str, new: str) -> str:
    """Baichuan2's NeMo 1.x config without its bf16 gradient exchange (read as test_nemo1 reads it),
    one line changed."""
    text = (INPUTS / NEMO1).read_text().replace("    grad_sync_dtype: bf16\n", "")
    assert text.count(old) == 1, old
    path = tmp_path / NEMO1
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.parametrize("old, key", [("  bias: False", "model.bias"),
                                      ("  sequence_parallel: False", "model.sequence_parallel"),
                                      ("  share_embeddings_and_output_weights: False",
                                       "model.share_embeddings_and_output_weights"),
                                      ("  megatron_amp_O2: False", "model.megatron_amp_O2"),
                                      ("  mcore_gpt: True", "model.mcore_gpt")])
def test_nemo1_switch_that_is_no_boolean_is_refused(tmp_path, capsys, old, key):
    """NeMo tests these by their truth (``self.cfg.get('bias', True)``): ``bias: 0`` builds no bias,
    while the reader tested ``is False`` and counted the biases (7,507,333,120 parameters where
    ``bias: False`` gives 7,505,973,248); ``sequence_parallel: 1`` read as off, ``mcore_gpt: 1`` was
    refused as the legacy model.  A switch that is not a YAML boolean is refused, naming it."""
    path = _nemo1(tmp_path, old, old.split(":")[0] + ": 0")
    err = summary_error(capsys, "--nemo-recipe", path, "--vocab-size", BAICHUAN_VOCAB)
    assert key in err and "true or false" in err, err


def test_nemo1_bias_false_still_drops_the_biases(tmp_path, capsys):
    """``bias: False`` and ``bias: True`` are read as before: the biases of 32 layers of hidden 4096
    (q, k, v: 3 x 4096; o: 4096; the SwiGLU's fc1 of 2 x 11008 and fc2 of 4096) are the difference."""
    off = summary_json(capsys, "--nemo-recipe", _nemo1(tmp_path, "  bias: False", "  bias: False"),
                       "--vocab-size", BAICHUAN_VOCAB)
    on = summary_json(capsys, "--nemo-recipe", _nemo1(tmp_path, "  bias: False", "  bias: True"),
                      "--vocab-size", BAICHUAN_VOCAB)
    assert on["parameters"] - off["parameters"] == 32 * (3 * 4096 + 4096 + 2 * 11008 + 4096)


@pytest.mark.parametrize("data", [None, 5])
def test_nemo1_setup_refuses_data_that_is_no_mapping(data):
    """``nemo1_setup(None, ...)`` ended in ``TypeError: 'NoneType' object is not iterable``."""
    from symbolic_cost.models.nemo1 import nemo1_setup
    refusal(lambda: nemo1_setup(data, "job.yaml", 8), "data")


# --hf-training-args (TRL recipes): the quantisation switches


def test_trl_recipe_switch_given_as_text_false_is_off(tmp_path, capsys):
    """TRL's parser reads a recipe's YAML through argparse with ``string_to_bool``: ``load_in_4bit:
    "false"`` is off.  The reader tested the value's truth and loaded the base in NF4 anyway: the
    file counted as the 4-bit one.  Now ``"false"`` gives what ``false`` gives."""
    source = "handbook_sft_config_qlora.yaml"
    words = ["--hf-config", LLAMA32, "--devices", "1", "--hf-training-args"]
    text = summary_json(capsys, *words, _edited(tmp_path, source, "load_in_4bit: true", 'load_in_4bit: "false"'))
    plain = summary_json(capsys, *words, _edited(tmp_path, source, "load_in_4bit: true", "load_in_4bit: false",
                                                 "plain.yaml"))
    four = summary_json(capsys, *words, str(INPUTS / source))
    assert text["weight_bytes"] == plain["weight_bytes"] > four["weight_bytes"]


def test_trl_recipe_nested_quant_given_as_text_false_is_off(tmp_path, capsys):
    """``use_bnb_nested_quant: "false"`` was read by ``bool()``, so on: the absmax constants counted
    quantised a second time.  Now it weighs what ``false`` weighs; 1 is refused, naming the key."""
    source = "handbook_sft_config_qlora.yaml"
    words = ["--hf-config", LLAMA32, "--devices", "1", "--hf-training-args"]
    weights = {}
    for value in ('"false"', "false", "true"):
        text = (INPUTS / source).read_text() + f"\nuse_bnb_nested_quant: {value}\n"
        (tmp_path / "recipe.yaml").write_text(text)
        weights[value] = summary_json(capsys, *words, str(tmp_path / "recipe.yaml"))["weight_bytes"]
    assert weights['"false"'] == weights["false"] > weights["true"]
    (tmp_path / "recipe.yaml").write_text((INPUTS / source).read_text() + "\nuse_bnb_nested_quant: 1\n")
    assert "use_bnb_nested_quant" in summary_error(capsys, *words, str(tmp_path / "recipe.yaml"))


@pytest.mark.parametrize("old, new, key", [("  precision: 32", "  precision: [32]", "trainer.precision"),
                                           ("  activation: 'swiglu'", "  activation: {a: 1}", "model.activation"),
                                           ("    name: distributed_fused_adam", "    name: [adam]",
                                            "model.optim.name")])
def test_nemo1_name_given_as_a_list_or_mapping_is_refused(tmp_path, capsys, old, new, key):
    """``trainer.precision: [32]`` (and a list or mapping as the activation or the optimizer's name)
    ended in an internal error (``TypeError: unhashable type``, exit 3) where the reader looks the
    name up; refused like any other name it does not read."""
    err = summary_error(capsys, "--nemo-recipe", _nemo1(tmp_path, old, new), "--vocab-size", BAICHUAN_VOCAB)
    assert key in err and "the reader reads" in err and len(err.strip().splitlines()) == 1, err


# --nemo-recipe (Megatron-Bridge): probabilities


@pytest.mark.parametrize("old, new, key", [("  hidden_dropout: 0.0", "  hidden_dropout: -1", "model.hidden_dropout"),
                                           ("  attention_dropout: 0.0", "  attention_dropout: 8.5",
                                            "model.attention_dropout"),
                                           ("  rotary_percent: 1.0", "  rotary_percent: 2", "model.rotary_percent")])
def test_bridge_probability_past_0_to_1_is_refused_as_megatron_args_refuses_it(tmp_path, capsys, old, new, key):
    """``model.attention_dropout: 8.5`` (or a hidden dropout of -1) was counted as a dropout that runs
    (its masks kept), where PyTorch's ``Dropout`` refuses a probability outside 0 to 1, and
    ``--megatron-args`` refuses ``--attention-dropout 8.5``; a ``rotary_percent`` of 2 was refused as
    ``rotary_dim``, a name the file does not hold.  Each is refused naming the key, as the launch
    script reader does (``from 0 to 1``)."""
    path = _edited(tmp_path, "megatron_bridge_llama32_1b.yaml", old, new)
    err = summary_error(capsys, "--nemo-recipe", path, "--devices", "8")
    assert key in err and "from 0 to 1" in err, err
    script = ["--megatron-args", _edited(tmp_path, "pretrain_gpt_345m_2021.sh", "--num-layers 24",
                                         "--num-layers 24 --attention-dropout 8.5")]
    assert "--attention-dropout must be from 0 to 1" in summary_error(capsys, *script)


# --torchtitan FILE.py: a section the reader cannot evaluate

TITAN_PYTHON = pathlib.Path(__file__).resolve().parent / "framework_inputs" / "torchtitan_python" / "b5bcd76"
TITAN_LLAMA3 = "torchtitan/models/llama3/config_registry.py"
TRAINING = "        training=TrainingConfig(\n            num_tokens_per_microbatch_per_dp_rank=1 * 8192,"


@pytest.mark.parametrize("new", [TRAINING.replace("TrainingConfig(", "make_training("),          # outside the file
                                 TRAINING.replace("TrainingConfig(\n", "TrainingConfig(\n            8192, "),
                                 TRAINING.replace("=1 * 8192,", "=1 * 8192, max_context_length=4096,")])
def test_torchtitan_python_training_section_it_cannot_read_is_refused(tmp_path, capsys, new):
    """``llama3_8b()`` with ``training=make_training(...)`` (a function the reader does not follow),
    ``TrainingConfig`` with an argument by position, or ``max_context_length`` given twice (Python's
    compiler refuses it: "keyword argument repeated") was read with the section left out: the
    defaults' 16,384 tokens in rows of 2,048 (b 8, l 2048) where the file says 8,192 tokens of 8,192
    (b 1, l 8192), silently.  Refused, naming the section."""
    import shutil
    shutil.copytree(TITAN_PYTHON, tmp_path / "checkout")
    path = tmp_path / "checkout" / TITAN_LLAMA3
    text = path.read_text()
    start = text.index("def llama3_8b()")
    assert text[start:].count(TRAINING) == 1
    path.write_text(text[:start] + text[start:].replace(TRAINING, new))
    err = summary_error(capsys, "--torchtitan", str(path), "--torchtitan-config", "llama3_8b", "--devices", "64")
    assert "training = " in err and "does not evaluate it" in err and len(err.strip().splitlines()) == 1, err
    plain = summary_json(capsys, "--torchtitan", str(TITAN_PYTHON / TITAN_LLAMA3), "--torchtitan-config", "llama3_8b",
                         "--devices", "64")
    assert (plain["layout"]["b"], plain["layout"]["l"]) == (1, 8192)


def test_empty_nemo_recipe_is_refused_for_its_emptiness_not_for_vocab_size(tmp_path, capsys):
    """An empty ``--nemo-recipe`` file with ``--vocab-size`` (as a NeMo 1.x file takes it) was refused
    for ``--vocab-size`` ("a Megatron-Bridge configuration states model.vocab_size"), a file that
    states nothing; now the file is named, as without ``--vocab-size``."""
    (tmp_path / "job.yaml").write_text("# nothing yet\n")
    err = summary_error(capsys, "--nemo-recipe", str(tmp_path / "job.yaml"), "--vocab-size", "32000")
    assert "job: a Megatron-Bridge ConfigContainer YAML is a mapping" in err and "--vocab-size" not in err, err


# sizes past 2**53 (or not numbers at all), named by the file's key


@pytest.mark.parametrize("key", ["train_micro_batch_size_per_gpu", "train_batch_size", "gradient_accumulation_steps"])
def test_deepspeed_batch_past_2_53_is_refused_by_its_key(key):
    """``train_micro_batch_size_per_gpu: 2**70`` was refused as ``b must be at most 2**53``, a name
    the file does not hold (and, with ``--set b=``, the file's 2**70 passed behind the replacement);
    now the key is named, as the library's bound on a size (2**53) says."""
    from symbolic_cost.models.config import preset
    from symbolic_cost.models.deepspeed import deepspeed_setup
    config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, key: 2**70}
    error = refusal(lambda: deepspeed_setup(json.dumps(config), "ds.json", preset("gpt2"), 8, {}, {}), key)
    assert "2**53" in str(error)


@pytest.mark.parametrize("value, rule", [(str(2**70), "at most 2**53"), ("1" * 5000, "at most 2**53"),
                                         ("\u00b2", "an integer of at least 1")])
def test_megatron_option_past_2_53_or_not_ascii_digits_is_refused_by_its_name(tmp_path, capsys, value, rule):
    """``--hidden-size 2**70`` was refused as ``e must be at most 2**53`` (``--num-layers`` as
    ``n_layers``, ``--global-batch-size`` as ``micro_batches``: the symbols, not the options); 5,000
    digits, or a superscript two (a digit to ``str.isdigit``), were refused with Python's own words
    ("Exceeds the limit (4300 digits) for integer string conversion", "invalid literal for int()"),
    naming no option.  Each now names ``--hidden-size`` and the rule."""
    path = _edited(tmp_path, "pretrain_gpt_345m_2021.sh", "--hidden-size 1024", f"--hidden-size {value}")
    err = summary_error(capsys, "--megatron-args", path)
    assert f"--hidden-size must be {rule}" in err and len(err.strip().splitlines()) == 1, err


def test_bridge_size_past_2_53_is_refused_by_its_key(tmp_path, capsys):
    """``model.ffn_hidden_size: 2**70`` was refused as ``f must be at most 2**53``; now as the key."""
    path = _edited(tmp_path, "megatron_bridge_llama32_1b.yaml", "  ffn_hidden_size: 8192",
                   f"  ffn_hidden_size: {2**70}")
    err = summary_error(capsys, "--nemo-recipe", path, "--devices", "8")
    assert "model.ffn_hidden_size must be at most 2**53" in err, err


@pytest.mark.parametrize("old, key", [("  hidden_size: 4096", "model.hidden_size"),
                                      ("  num_layers: 32", "model.num_layers"),
                                      ("  global_batch_size: 8", "model.global_batch_size")])
def test_nemo1_size_past_2_53_is_refused_by_its_key(tmp_path, capsys, old, key):
    """NeMo 1.x ``hidden_size: 2**70`` was refused as ``e must be at most 2**53`` (``num_layers`` as
    ``n_layers``, ``global_batch_size`` as ``micro_batches``); now as the file's key."""
    err = summary_error(capsys, "--nemo-recipe", _nemo1(tmp_path, old, old.split(":")[0] + f": {2**70}"),
                        "--vocab-size", BAICHUAN_VOCAB)
    assert f"{key} must be at most 2**53" in err, err


def test_trl_max_length_past_2_53_is_refused_by_its_key(tmp_path, capsys):
    """A TRL recipe's ``max_length: 2**70`` was refused as ``l must be at most 2**53``; now as the key."""
    path = _edited(tmp_path, "handbook_sft_config_qlora.yaml", "max_length: 2048", f"max_length: {2**70}")
    err = summary_error(capsys, "--hf-config", LLAMA32, "--devices", "1", "--hf-training-args", path)
    assert "max_length must be a positive integer of at most 2**53" in err, err
