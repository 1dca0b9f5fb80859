"""Encoders and encoder-decoders: ``bert``, ``roberta``, ``t5``.

Each reads the keys of its ``transformers`` config class with that class's defaults
(``transformers`` 5.23) and the module shapes of its model code.
"""

from __future__ import annotations

from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.families.keys import Keys, check_heads, gated_mlp, head_fields, plain_mlp


def _bert_like(k: Keys, name: str, defaults: dict, classifier: str, offset=lambda keys: 0) -> Architecture:
    """BERT and RoBERTa: learned positions and token types, a LayerNorm on the embeddings,
    biased projections, post-norm layers; the base model with its pooler, or the head the
    ``architectures`` names (masked LM, pre-training, sequence classification).  ``offset``: the
    position rows a sequence cannot reach (RoBERTa's, past its padding index)."""
    e, h = k.int("hidden_size", 768), k.int("num_attention_heads", 12)
    check_heads(k, e, h, None, None)
    k.refuse_if("position_embedding_type", lambda x: x not in (None, "absolute"), "absolute positions only", None)
    for key in ("is_decoder", "add_cross_attention"):
        k.refuse_if(key, bool, "a decoder with cross-attention", False)
    k.known("layer_norm_eps", "gradient_checkpointing")
    positions = k.int("max_position_embeddings", 512)
    hidden = [("hidden_dropout_prob", 0.1), ("classifier_dropout", None)]
    dropouts = k.dropout_fields(hidden, [("attention_probs_dropout_prob", 0.1)], hidden)
    return Architecture(name, k.int("num_hidden_layers", 12), e, h, k.int("intermediate_size", 3072),
                        k.int("vocab_size", defaults["vocab_size"]), positions=positions,
                        token_types=k.int("type_vocab_size", 2, zero=True),
                        mlp=plain_mlp(k.activation("hidden_act", "gelu")), causal=False, embedding_norm=True,
                        final_norm=False, tied=k.flag("tie_word_embeddings", True), **dropouts,
                        context=positions - offset(k), **{"lm_head": False, **head_fields(k, encoder=True,
                                                                                          classifier=classifier)})


def bert(k: Keys, name: str) -> Architecture:
    """BERT (classifier on the pooled first token)."""
    return _bert_like(k, name, dict(vocab_size=30522), "pooled")


def roberta(k: Keys, name: str) -> Architecture:
    """RoBERTa (BERT's shapes; its classifier is ``dense -> tanh -> out_proj`` on the first token;
    its positions start past the padding index, ``create_position_ids_from_input_ids``, so a
    sequence holds ``max_position_embeddings - pad_token_id - 1`` tokens: 512 of 514)."""
    return _bert_like(k, name, dict(vocab_size=50265), "dense", offset=lambda keys: keys.int("pad_token_id", 1) + 1)


def t5(k: Keys, name: str) -> Architecture:
    """T5: an encoder and a decoder (with cross-attention) of ``d_model``, ``num_heads`` heads of
    ``d_kv``, no biases, RMS norms (with a gain), a learned relative attention bias of
    ``relative_attention_num_buckets`` per head in each stack, ``feed_forward_proj`` ``relu`` or
    gated (``gated-gelu``), dropout after the activation too; the head shares the word table
    unless ``tie_word_embeddings`` is false (T5 v1.1, flan-t5 publish their own ``lm_head``)."""
    e, h, hd = k.int("d_model", 512), k.int("num_heads", 8), k.int("d_kv", 64)
    check_heads(k, e, h, None, hd)
    proj = k.text("feed_forward_proj", "relu")
    parts = proj.split("-")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated"):
        raise k.error(f"feed_forward_proj must be ACT or gated-ACT, got {proj!r}")
    act = parts[-1]
    if act not in ("relu", "gelu", "silu", "gelu_new", "gelu_pytorch_tanh"):
        raise k.error(f"feed_forward_proj activation {act!r} is not supported")
    if not k.flag("is_encoder_decoder", True):
        raise k.error("is_encoder_decoder=false (an encoder or decoder alone) is not supported")
    k.known("layer_norm_epsilon", "relative_attention_max_distance", "dense_act_fn", "is_gated_act", "n_positions",
            "output_past", "is_decoder", "classifier_dropout", "scale_decoder_outputs")
    layers = k.int("num_layers", 6)
    fields = head_fields(k)
    if fields:
        raise k.error(f"architectures {k.config['architectures'][0]!r}: only T5ForConditionalGeneration")
    return Architecture(name, layers, e, h, k.int("d_ff", 2048), k.int("vocab_size", 32128), head_dim=hd,
                        mlp=gated_mlp(act) if len(parts) == 2 else plain_mlp(act), norm="rms",
                        tied=k.flag("tie_word_embeddings", True), qkv_bias=False, bias=False,
                        dropouts=k.dropouts(("dropout_rate", 0.1)), activation_dropout=True,
                        score_bias="relative", relative_buckets=k.int("relative_attention_num_buckets", 32),
                        decoder_layers=k.int("num_decoder_layers", None, nullable=True) or layers)


FAMILIES = {"bert": bert, "roberta": roberta, "t5": t5}
