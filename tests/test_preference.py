"""Preference training (DPO, ORPO) as TRL runs it: the alignment handbook's published recipes read with
``--trl-trainer`` (``models.preference``), and the reference model's cost (``Training.reference``)
against hand counts and a rank-by-rank simulation of its ZeRO-3 gathers.

The recipes are the handbook's, unchanged (``framework_inputs/PROVENANCE.md``); their numbers are
counted here by hand from the recipe's fields, Mistral-7B's 7,241,732,096 parameters and the rules
TRL follows (huggingface/trl at f2cd577: ``DPOTrainer`` runs ``[chosen, rejected]`` as one batch, loads
the reference as the trained model, prepares it with the same DeepSpeed engine, and under PEFT takes
the base with the adapters off)."""

import json
import pathlib

import pytest

import simulate_fsdp as sim
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import from_config, preset
from symbolic_cost.models.lora import LoRA
from symbolic_cost.models.preference import TRAINERS
from symbolic_cost.timing.step import step_time_breakdown

INPUTS = pathlib.Path(__file__).resolve().parent / "framework_inputs"
DPO_FULL, DPO_QLORA, ORPO, ZERO3 = (str(INPUTS / name) for name in (
    "handbook_dpo_config_full.yaml", "handbook_dpo_config_qlora.yaml", "handbook_orpo_141b_config_full.yaml",
    "handbook_zero3.yaml"))
MIXTRAL = str(pathlib.Path(__file__).resolve().parent / "hf_configs" / "Mixtral-8x7B-v0.1.json")
QWEN3 = str(pathlib.Path(__file__).resolve().parent / "hf_configs" / "Qwen3-0.6B.json")
MISTRAL = 7_241_732_096
pytest.importorskip("yaml", reason="the recipes are YAML (pip install 'symbolic_cost[yaml]')")


def _json(capsys, *words, model=("--preset", "mistral-7b")):
    assert main(["summary", *model, *words, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _error(capsys, *words):
    assert main(["summary", "--preset", "mistral-7b", *words]) == 2
    return capsys.readouterr().err


def test_dpo_full_recipe_holds_a_16bit_reference_copy_sharded_by_zero3(capsys):
    """config_full.yaml: per_device_train_batch_size 8 examples, so 16 sequences (chosen and
    rejected), gradient_accumulation_steps 2, max_length 1024, gradient checkpointing; zero3.yaml:
    8 processes, ZeRO-3, bf16.  The reference is a second copy of the model, cast to bf16 by its
    DeepSpeed engine and sharded 8 ways like the trained weights: 2 + 2 bytes a parameter over 8
    ranks.  Gradients and the optimizer are the trained model's alone."""
    got = _json(capsys, "--accelerate", ZERO3, "--hf-training-args", DPO_FULL, "--trl-trainer", "dpo")
    layout = got["layout"]
    assert (layout["b"], layout["micro_batches"], layout["l"], layout["d"], layout["zero"]) == (16, 2, 1024, 8, 3)
    assert layout["reference"] == "16-bit"
    assert got["weight_bytes"] * 8 == (2 + 2) * MISTRAL
    assert got["gradient_bytes"] * 8 == 2 * MISTRAL
    assert got["optimizer_bytes"] * 8 == 12 * MISTRAL
    assert got["flops_reference"] == got["flops_fwd"]       # the same forward, no adapters to leave out
    assert got["step_time_s"]["reference"] > 0
    typed = _json(capsys, "--set", "b=16", "n_micro=2", "l=1024", "d=8", "--zero", "3", "--recompute", "full",
                  "--precision", "bf16", "--overlap", "grad,param", "--flash", "--attention-kernel",
                  "flash-attention-2", "--reference", "16-bit")
    assert typed["weight_bytes"] == got["weight_bytes"] and typed["flops_reference"] == got["flops_reference"]


def test_dpo_reference_copy_follows_the_recipes_load_under_ddp(capsys, tmp_path):
    """Launched under DDP the reference is loaded as the recipe loads the model, torch_dtype null:
    fp32, 4 bytes a parameter on every rank (no engine casts it), beside the trained model's."""
    ddp = tmp_path / "ddp.yaml"
    ddp.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmixed_precision: bf16\n"
                   "num_machines: 1\nnum_processes: 8\n")
    got = _json(capsys, "--accelerate", str(ddp), "--hf-training-args", DPO_FULL, "--trl-trainer", "dpo")
    sft_like = _json(capsys, "--set", "b=16", "n_micro=2", "l=1024", "d=8", "--recompute", "full",
                     "--precision", "bf16", "--overlap", "grad")
    assert got["layout"]["reference"] == "fp32"
    assert got["weight_bytes"] - sft_like["weight_bytes"] == 4 * MISTRAL


def test_dpo_qlora_recipe_takes_the_base_with_its_adapters_off(capsys, tmp_path):
    """config_qlora.yaml: LoRA rank 128 on the seven projections of every layer over a 4-bit base,
    4 examples (8 sequences) a micro-batch, 4 micro-batches of 1024 tokens.  The reference is
    the base with the adapters off: no copy (the weights are those of the same LoRA without a
    reference), and its forward is the trained model's less the adapters'.  Counted by hand with
    the default conventions (an (m,k)x(k,n) product is m n (2k - 1) FLOPs; the adapter's output
    scaled by alpha/r and added to the base's, 2 out a token, ``models.lora``): per token and
    layer, each adapter in -> out costs r (2 in - 1) + out (2r - 1) + 2 out."""
    got = _json(capsys, "--hf-training-args", DPO_QLORA, "--trl-trainer", "dpo", "--devices", "1")
    assert got["layout"]["reference"] == "adapters" and got["layout"]["b"] == 8
    precomputed = tmp_path / "dpo_qlora.yaml"          # the same recipe with no reference in its step
    precomputed.write_text(pathlib.Path(DPO_QLORA).read_text() + "\nprecompute_ref_log_probs: true\n")
    plain = _json(capsys, "--hf-training-args", str(precomputed), "--trl-trainer", "dpo", "--devices", "1")
    assert "reference" not in plain["layout"]
    assert got["weight_bytes"] == plain["weight_bytes"] and got["flops_fwd"] == plain["flops_fwd"]
    r, projections = 128, [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096),
                           (4096, 14336), (4096, 14336), (14336, 4096)]
    per_token_layer = sum(r * (2 * k - 1) + n * (2 * r - 1) + 2 * n for k, n in projections)
    assert got["flops_fwd"] - got["flops_reference"] == per_token_layer * 32 * (8 * 1024 * 4)


def test_orpo_runs_pairs_without_a_reference(capsys):
    """The handbook's ORPO recipe (zephyr-141b-A35b; read here on Mixtral-8x7B's config): one example
    a micro-batch is two sequences of 2048 tokens, and ORPO's loss has no reference model."""
    got = _json(capsys, "--accelerate", ZERO3, "--hf-training-args", ORPO, "--trl-trainer", "orpo",
                model=("--hf-config", MIXTRAL))
    assert (got["layout"]["b"], got["layout"]["l"]) == (2, 2048)
    assert "reference" not in got["layout"] and "reference" not in got["step_time_s"]
    assert any(note.startswith("ORPO: each example") for note in got["notes"])


SMALL = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 512}
"""A small Llama (its config as transformers writes one): few enough weights to move one by one."""


def test_reference_gathers_are_a_simulated_zero3_forward():
    """ZeRO-3's gathers of a reference copy over 4 ranks, 3 micro-batches: each forward gathers
    the whole copy once, in 16 bits, and it has no backward.  Simulated with the ring all-gather of
    ``tests/simulate_fsdp.py`` (every chunk really moved), bytes a rank sends."""
    d, n = 4, 3
    cost = model_cost(from_config(SMALL), Training(b=2, l=256, d=d, micro_batches=n, zero=3, reference="16-bit"))
    elements = int(cost.parameters)
    assert elements % d == 0
    chunks = [list(range(i * elements // d, (i + 1) * elements // d)) for i in range(d)]
    gathered, sent = sim.ring_allgather(chunks)
    assert all(len(held) == d for held in gathered)
    simulated = n * sent[0] * 2
    reference = [c for dim, c in cost.collectives if dim == "reference"]
    assert [(c.kind, c.pass_) for c in reference] == [("allgather", "fwd")]
    assert reference[0].volume == simulated


def test_reference_time_is_its_forward_and_nothing_without_one():
    """The reference's seconds are one forward a micro-batch: on the peak-only model, without
    recomputation or communication, the step's compute is forward + backward (backward twice the
    forward's products, Narayanan et al. 2021's 3 x forward for a step), so the reference adds about
    a third of the compute; without a reference the step has no such part."""
    arch = preset("gpt2")
    plain = step_time_breakdown(model_cost(arch, Training(b=4, l=1024)), "h100")
    with_reference = step_time_breakdown(model_cost(arch, Training(b=4, l=1024, reference="16-bit")), "h100")
    assert "reference" not in plain
    assert plain["compute"] == with_reference["compute"]
    assert 0.25 < float(with_reference["reference"] / with_reference["compute"]) < 0.45
    assert with_reference["total"] == plain["total"] + with_reference["reference"]


def test_the_optimizer_step_leaves_the_reference_alone():
    """The optimizer step reads and writes the trained model's state; the frozen reference copy,
    counted in the device's weights, is neither read nor written by it."""
    from symbolic_cost.timing.hardware import calibrated
    from symbolic_cost.timing.step import optimizer_time
    arch = preset("gpt2")
    plain = model_cost(arch, Training(b=2, l=512, d=4, zero=1))
    with_reference = model_cost(arch, Training(b=2, l=512, d=4, zero=1, reference="fp32"))
    assert with_reference.weight_bytes - plain.weight_bytes == 4 * plain.parameters == with_reference.reference_bytes
    assert optimizer_time(with_reference, calibrated("h100")) == optimizer_time(plain, calibrated("h100"))


@pytest.mark.parametrize("kwargs, argument", [
    (dict(reference="int8"), "reference"),
    (dict(reference="adapters"), "reference"),                  # no LoRA: nothing to switch off
    (dict(reference="16-bit", p=2), "reference"),
    (dict(reference="16-bit", zero=3, d=4, offload="parameters"), "reference"),
])
def test_refused_references(kwargs, argument):
    with pytest.raises(InputError) as error:
        Training(**kwargs)
    assert error.value.argument == argument


def test_a_reference_beside_routed_experts_is_refused():
    with pytest.raises(InputError, match="routed experts") as error:
        model_cost(from_config(json.loads(pathlib.Path(MIXTRAL).read_text())),
                   Training(b=1, l=1024, reference="16-bit"))
    assert error.value.argument == "reference"


def test_a_reference_copy_beside_lora_holds_the_base_alone():
    """A reference given as a copy beside LoRA (TRL with PEFT and an explicit ``ref_model``) holds
    the base model, not the adapters: Llama-2-7B's 6,738,415,616 parameters at 2 bytes more than
    the same LoRA without it, whatever the adapters' rank."""
    arch = preset("llama-2-7b")
    for rank in (8, 64):
        lora = LoRA(rank)
        without = model_cost(arch, Training(b=1, l=512, lora=lora))
        copy = model_cost(arch, Training(b=1, l=512, lora=lora, reference="16-bit"))
        assert copy.weight_bytes - without.weight_bytes == 2 * 6_738_415_616
        assert model_cost(arch, Training(b=1, l=512, lora=lora, reference="adapters")).weight_bytes \
            == without.weight_bytes


def test_recipe_refusals_name_the_field_and_the_trainer(capsys, tmp_path):
    assert "--trl-trainer dpo, orpo or reward" in _error(capsys, "--hf-training-args", DPO_FULL, "--devices", "8")
    precomputed = tmp_path / "dpo.yaml"
    precomputed.write_text(pathlib.Path(DPO_FULL).read_text() + "\nprecompute_ref_log_probs: true\n")
    assert "a DPO field" in _error(capsys, "--hf-training-args", str(precomputed), "--trl-trainer", "orpo",
                                   "--devices", "8")
    got = _json(capsys, "--hf-training-args", str(precomputed), "--trl-trainer", "dpo", "--devices", "8")
    assert "reference" not in got["layout"] and got["layout"]["b"] == 16
    err = _error(capsys, "--hf-training-args", DPO_FULL, "--trl-trainer", "dpo", "--devices", "8",
                 "--reference", "fp32")
    assert "--reference" in err
    assert "--trl-trainer" in _error(capsys, "--trl-trainer", "dpo")
    assert main(["summary", "--preset", "gpt2", "--deepspeed", str(INPUTS / "ds_config_fp16_z3.json"),
                 "--trl-trainer", "dpo"]) == 2
    assert "--hf-training-args recipe" in capsys.readouterr().err


def test_sweep_refuses_a_pipelined_point_of_a_dpo_recipe(capsys):
    assert main(["sweep", "--preset", "mistral-7b", "--hf-training-args", DPO_FULL, "--trl-trainer", "dpo",
                 "--accelerate", ZERO3, "--grid", "p=1,2", "--field", "total"]) == 2
    assert "--grid at p=2" in capsys.readouterr().err


REWARD_RECIPE = ("model_name_or_path: Qwen/Qwen3-0.6B\ndataset_name: trl-lib/ultrafeedback_binarized\n"
                 "output_dir: Qwen3-0.6B-Reward\nper_device_train_batch_size: 8\nnum_train_epochs: 1\n"
                 "gradient_checkpointing: true\nlearning_rate: 1.0e-5\nmax_length: 2048\n")
"""TRL's reward-modelling example (docs/source/reward_trainer.md's ``trl reward`` flags), as a recipe."""


def test_a_reward_model_is_transformers_sequence_classifier_of_one_label(tmp_path, capsys):
    """``--trl-trainer reward``: the model as ``AutoModelForSequenceClassification`` builds it with
    ``num_labels=1`` (the outside oracle: transformers' own class on the meta device, its parameters
    counted), two sequences an example, no reference."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = json.loads(pathlib.Path(QWEN3).read_text())
    hf = transformers.AutoConfig.for_model(config["model_type"], **{k: v for k, v in config.items()
                                                                      if k != "model_type"})
    hf.num_labels = 1
    with torch.device("meta"):
        model = transformers.AutoModelForSequenceClassification.from_config(hf)
    expected = sum(p.numel() for p in model.parameters())
    recipe = tmp_path / "reward.yaml"
    recipe.write_text(REWARD_RECIPE)
    got = _json(capsys, "--hf-training-args", str(recipe), "--trl-trainer", "reward", "--devices", "8",
                model=("--hf-config", QWEN3))
    assert got["parameters"] == expected
    assert got["layout"]["b"] == 16 and "reference" not in got["layout"]


def test_a_lora_reward_model_is_refused(tmp_path, capsys):
    recipe = tmp_path / "reward.yaml"
    recipe.write_text(REWARD_RECIPE + "use_peft: true\n")
    assert main(["summary", "--hf-config", QWEN3, "--hf-training-args", str(recipe), "--trl-trainer", "reward",
                 "--devices", "8"]) == 2
    assert "score head whole" in capsys.readouterr().err


def test_the_command_lines_trainers_are_the_readers():
    from symbolic_cost.cli import build_parser
    parser = build_parser()
    summary = next(a for a in parser._subparsers._group_actions[0].choices["summary"]._actions
                   if "--trl-trainer" in a.option_strings)
    assert tuple(summary.choices) == TRAINERS
