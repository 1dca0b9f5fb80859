"""NeMo 1.x training configurations (NVIDIA/NeMo's examples/nlp/language_modeling/conf/, provenance in
tests/framework_inputs/PROVENANCE.md) read by ``summary --nemo-recipe`` (``models.nemo1``).

Oracles: parameter counts worked out by hand below from the files' numbers and Megatron-Core's GPT
(the vocabulary padded to ``make_vocab_size_divisible_by x tensor-parallel size``, NeMo's
``_vocab_size_with_padding``); micro-batches by NeMo's rule ``global / (micro x data-parallel)``; and
NeMo's own refusals (``MegatronGPTModel.__init__``, ``build_transformer_config`` at NeMo fec8221)."""

import pathlib

import pytest

from summary_calls import summary_error, summary_json

INPUTS = pathlib.Path(__file__).resolve().parent / "framework_inputs"
BAICHUAN = INPUTS / "nemo1_megatron_baichuan2_config.yaml"
GPT = INPUTS / "nemo1_megatron_gpt_config.yaml"
BAICHUAN_VOCAB = 125_696
"""Baichuan2's tokenizer (125,696 pieces: a multiple of 128, so NeMo pads nothing on one tensor rank)."""


def _edited(tmp_path, source, *changes):
    text = source.read_text()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / source.name
    path.write_text(text)
    return str(path)


NO_GRAD_SYNC_DTYPE = ("    grad_sync_dtype: bf16\n", "")


def _baichuan_parameters(vocab):
    """32 layers of hidden 4096: q, k, v and o of 4096 x 4096 (32 query groups of 32 heads: no
    sharing), a SwiGLU MLP of 3 x 4096 x 11008, two RMSNorm weights; no biases (bias: False); the
    embedding and the untied output layer of vocab x 4096; the final RMSNorm."""
    e, f, layers = 4096, 11008, 32
    return layers * (4 * e * e + 3 * e * f + 2 * e) + 2 * vocab * e + e


def test_baichuan2_as_published_refuses_the_bf16_gradient_exchange(capsys):
    """Its distributed Adam reduces the gradients in bf16 (optim.grad_sync_dtype) under fp32 training,
    which no layout the library reads expresses: refused by name."""
    err = summary_error(capsys, "--nemo-recipe", str(BAICHUAN), "--vocab-size", str(BAICHUAN_VOCAB))
    assert "model.optim.grad_sync_dtype" in err and len(err.strip().splitlines()) == 1


def test_baichuan2_config_read_as_megatron_core_gpt(tmp_path, capsys):
    """trainer 1 device x 1 node, precision 32; micro 4, global 8: 8 / (4 x 1) = 2 micro-batches;
    distributed_fused_adam: the distributed optimizer, with Apex's gradient overlap (overlap_grad_sync
    true) and the parameter gather overlapped (overlap_param_sync true); fp32: Transformer Engine runs
    its unfused attention (no flash)."""
    path = _edited(tmp_path, BAICHUAN, NO_GRAD_SYNC_DTYPE)
    got = summary_json(capsys, "--nemo-recipe", path, "--vocab-size", str(BAICHUAN_VOCAB))
    assert got["parameters"] == _baichuan_parameters(BAICHUAN_VOCAB) == 7_505_973_248
    layout = got["layout"]
    assert (layout["b"], layout["l"], layout["d"], layout["m1"], layout["p"], layout["micro_batches"]) == \
        (4, 4096, 1, 1, 1, 2)
    assert (layout["precision"], layout["distributed_optimizer"], layout["optimizer"], layout["flash"],
            layout["recompute"]) == ("fp32", True, "adam", False, "none")
    assert set(layout["overlap"]) == {"grad", "param"}
    assert any("NeMo 1.x" in note for note in got["notes"])
    # --devices replaces trainer.devices x num_nodes, with a note: 2 devices, 8 / (4 x 2) = 1 micro-batch
    two = summary_json(capsys, "--nemo-recipe", path, "--vocab-size", str(BAICHUAN_VOCAB), "--devices", "2")
    assert (two["layout"]["d"], two["layout"]["micro_batches"]) == (2, 1)
    assert any("--devices 2 replaces trainer.devices" in note for note in two["notes"])


def test_baichuan2_layout_keys_are_read(tmp_path, capsys):
    """Tensor parallelism 2 with sequence parallelism on 2 devices (NeMo pads the vocabulary to 128 x 2:
    125,696 = 491 x 256, no padding), bf16 with megatron_amp_O2 (Megatron's 16-bit weights: TE's flash
    attention), full recomputation of every layer, and the data's sequence length."""
    path = _edited(tmp_path, BAICHUAN, NO_GRAD_SYNC_DTYPE,
                   ("  precision: 32", "  precision: bf16"),
                   ("  megatron_amp_O2: False", "  megatron_amp_O2: True"),
                   ("  tensor_model_parallel_size: 1", "  tensor_model_parallel_size: 2"),
                   ("  sequence_parallel: False", "  sequence_parallel: True"),
                   ("  activations_checkpoint_granularity: null", "  activations_checkpoint_granularity: full"),
                   ("  activations_checkpoint_method: null", "  activations_checkpoint_method: uniform"),
                   ("  activations_checkpoint_num_layers: null", "  activations_checkpoint_num_layers: 1"),
                   ("    seq_length: ${model.encoder_seq_length}", "    seq_length: 2048"))
    got = summary_json(capsys, "--nemo-recipe", path, "--vocab-size", str(BAICHUAN_VOCAB), "--devices", "2")
    layout = got["layout"]
    assert got["parameters"] == _baichuan_parameters(BAICHUAN_VOCAB)
    assert (layout["m1"], layout["s1"], layout["d"], layout["l"], layout["micro_batches"]) == (2, 2, 1, 2048, 2)
    assert (layout["precision"], layout["flash"], layout["recompute"]) == ("bf16", True, "full")


@pytest.mark.parametrize("changes, refused", [
    ((("  fp8: False", "  fp8: True"),), "model.fp8 = True"),
    ((("  precision: 32", "  precision: bf16"),), "without model.megatron_amp_O2"),
    ((("  virtual_pipeline_model_parallel_size: null", "  virtual_pipeline_model_parallel_size: 2"),),
     "NeMo refuses it"),
    ((("  mcore_gpt: True", "  mcore_gpt: True\n  name: megatron_falcon_gpt"),), "model.name"),
    ((("  accumulate_grad_batches: 1", "  accumulate_grad_batches: 4"),), "trainer.accumulate_grad_batches"),
    ((("  activation: 'swiglu'", "  activation: 'reglu'"),), "model.activation 'reglu'"),
    ((("  encoder_seq_length: 4096", "  encoder_seq_length: ${oc.env:SEQ}"),), "an OmegaConf interpolation"),
])
def test_nemo1_refusals_name_the_key(tmp_path, capsys, changes, refused):
    path = _edited(tmp_path, BAICHUAN, NO_GRAD_SYNC_DTYPE, *changes)
    err = summary_error(capsys, "--nemo-recipe", path, "--vocab-size", str(BAICHUAN_VOCAB))
    assert refused in err and len(err.strip().splitlines()) == 1


def test_the_tokenizer_file_needs_vocab_size(tmp_path, capsys):
    path = _edited(tmp_path, BAICHUAN, NO_GRAD_SYNC_DTYPE)
    assert "give --vocab-size" in summary_error(capsys, "--nemo-recipe", path)


def test_gpt_config_legacy_model_refused_and_megatron_core_read(tmp_path, capsys):
    """megatron_gpt_config.yaml as published builds NeMo's legacy (Apex) GPT (mcore_gpt: False): refused.
    With Megatron-Core's and O2: GPT-2 small (12 layers of 768, 12 heads, 3,072 MLP, biases, LayerNorm,
    GELU, 512 learned positions, tied embedding), GPT-2's BPE of 50,257 tokens padded to 50,304 (128):
    each layer 12 e^2 + 13 e (QKV and output with biases, the MLP with biases, two LayerNorms of weight
    and bias), the embedding 50,304 e, the positions 512 e, the final LayerNorm 2 e."""
    assert "model.mcore_gpt False" in summary_error(capsys, "--nemo-recipe", str(GPT))
    path = _edited(tmp_path, GPT, ("  mcore_gpt: False", "  mcore_gpt: True"),
                   ("  megatron_amp_O2: False", "  megatron_amp_O2: True"))
    got = summary_json(capsys, "--nemo-recipe", path)
    e = 768
    assert got["parameters"] == 12 * (12 * e * e + 13 * e) + 50_304 * e + 512 * e + 2 * e == 124_082_688
    layout = got["layout"]
    assert (layout["precision"], layout["l"], layout["b"], layout["micro_batches"]) == ("fp16", 512, 4, 2)
