"""The models of torchtitan's Python configurations besides llama3, as the ``config.json`` of the
Hugging Face family with the same modules, read by that family's reader (``models.families``).

The sizes are torchtitan's flavours at b5bcd76 (``torchtitan/models/deepseek_v3/__init__.py``,
``torchtitan/models/qwen3/__init__.py``, ``torchtitan/models/gpt_oss/__init__.py``), written here
as facts:

* ``deepseek_v3``: latent attention (``kv_lora_rank`` 512, 128 + 64 query/key head dimensions, 128
  for values), ``n_dense_layers`` dense SwiGLU layers then MoE layers with shared experts.  The
  debug, 16B and 236B flavours route with a softmax, not renormalised (``route_norm`` False, a
  ``route_scale`` of 1, 1 and 16): DeepSeek-V2's router, ``deepseek_v2``; the 671B with a sigmoid
  renormalised and scaled by 2.5: ``deepseek_v3``.  ``q_lora_rank`` 0 is no query compression.
  The head is untied, the MLPs have no biases.
* ``qwen3``: grouped-query attention of head dimension 128 with per-head q/k RMS norms; the dense
  flavours' FFN widths as stated; the 0.6B, 1.7B, 4B and the dense debug model tie the head to the
  word table; the MoE flavours route with a softmax renormalised over the chosen experts, no shared
  experts, every layer MoE (``qwen3_moe``).
* ``gpt_oss``: 64 query and 8 key/value heads of 64 with biases and learned sinks, a sliding
  window of 128 on the even layers (``layer_id % 2 == 0``), YaRN positions (factor 32 over 4,096),
  every layer MoE of 2,880-wide experts with biases, top 4 of 8 (debug), 32 (20b) or 128 (120b),
  the router a biased softmax renormalised over the chosen; the head untied.  As OpenAI's
  ``config.json`` for the 20b and 120b (``gpt_oss``), the debug model 4 layers of width 256 over
  2,048 words.

How experts are chosen (groups, limited groups) and the balancing bias are comparisons and adds
the families' readers do not count either.
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.checks import InputError, InputTypeError
from symbolic_cost.models.architecture import Architecture


def _deepseek(layers, dim, vocab, heads, q_lora, ffn, experts, shared, moe_ffn, top_k, dense, scale=1.0,
              v3=False) -> dict:
    v2_only = {} if v3 else dict(mlp_bias=False)         # V2's reader defaults its MLP biases on
    return dict(v2_only, model_type="deepseek_v3" if v3 else "deepseek_v2", num_hidden_layers=layers, hidden_size=dim,
                vocab_size=vocab, num_attention_heads=heads, num_key_value_heads=heads, q_lora_rank=q_lora or None,
                kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, intermediate_size=ffn,
                n_routed_experts=experts, n_shared_experts=shared, moe_intermediate_size=moe_ffn,
                num_experts_per_tok=top_k, first_k_dense_replace=dense, routed_scaling_factor=scale,
                hidden_act="silu", moe_layer_freq=1, attention_bias=False, tie_word_embeddings=False,
                norm_topk_prob=v3, scoring_func="sigmoid" if v3 else "softmax")


def _qwen3(layers, dim, vocab, heads, kv, ffn, tied) -> dict:
    return dict(model_type="qwen3", num_hidden_layers=layers, hidden_size=dim, vocab_size=vocab,
                num_attention_heads=heads, num_key_value_heads=kv, head_dim=128, intermediate_size=ffn,
                tie_word_embeddings=tied, attention_bias=False, hidden_act="silu")


def _qwen3_moe(layers, dim, vocab, heads, kv, moe_ffn, experts) -> dict:
    return dict(model_type="qwen3_moe", num_hidden_layers=layers, hidden_size=dim, vocab_size=vocab,
                num_attention_heads=heads, num_key_value_heads=kv, head_dim=128, intermediate_size=moe_ffn,
                moe_intermediate_size=moe_ffn, num_experts=experts, num_experts_per_tok=8, norm_topk_prob=True,
                decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False, attention_bias=False,
                hidden_act="silu")


def _gpt_oss(layers, dim, vocab, experts) -> dict:
    return dict(model_type="gpt_oss", num_hidden_layers=layers, hidden_size=dim, vocab_size=vocab,
                num_attention_heads=64, num_key_value_heads=8, head_dim=64, intermediate_size=2880,
                num_local_experts=experts, num_experts_per_tok=4, experts_per_token=4, sliding_window=128,
                layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)],
                attention_bias=True, tie_word_embeddings=False, hidden_act="silu", swiglu_limit=7.0,
                rope_theta=150000, rope_scaling=dict(rope_type="yarn", factor=32.0, beta_fast=32.0, beta_slow=1.0,
                                                      original_max_position_embeddings=4096, truncate=False))


QWEN3_VOCAB = 151936

CONFIGS = {
    "deepseek_v3": {
        "debugmodel": _deepseek(6, 256, 2048, 16, 0, 1024, 8, 2, 256, 3, 1),
        "16B": _deepseek(27, 2048, 102400, 16, 0, 10944, 64, 2, 1408, 6, 1),
        "236B": _deepseek(60, 5120, 102400, 128, 1536, 12288, 160, 2, 1536, 6, 1, scale=16.0),
        "671B": _deepseek(61, 7168, 129280, 128, 1536, 18432, 256, 1, 2048, 8, 3, scale=2.5, v3=True),
    },
    "qwen3": {
        "debugmodel": _qwen3(8, 256, 2048, 16, 8, 3072, True),
        "debugmodel_non_fused_qkv": _qwen3(8, 256, 2048, 16, 8, 3072, True),
        "debugmodel_fused_qkv": _qwen3(8, 256, 2048, 16, 8, 3072, True),      # its name until fused was the default
        "0.6B": _qwen3(28, 1024, QWEN3_VOCAB, 16, 8, 3072, True),
        "1.7B": _qwen3(28, 2048, QWEN3_VOCAB, 16, 8, 6144, True),
        "4B": _qwen3(36, 2560, QWEN3_VOCAB, 32, 8, 9728, True),
        "8B": _qwen3(36, 4096, QWEN3_VOCAB, 32, 8, 12288, False),
        "14B": _qwen3(40, 5120, QWEN3_VOCAB, 40, 8, 17408, False),
        "32B": _qwen3(64, 5120, QWEN3_VOCAB, 64, 8, 25600, False),
        "debugmodel_moe": _qwen3_moe(8, 256, 2048, 16, 8, 768, 64),
        "30B-A3B": _qwen3_moe(48, 2048, QWEN3_VOCAB, 32, 4, 768, 128),
        "235B-A22B": _qwen3_moe(94, 4096, QWEN3_VOCAB, 64, 4, 1536, 128),
    },
    "gpt_oss": {
        "debugmodel": _gpt_oss(4, 256, 2048, 8),
        "20b": _gpt_oss(24, 2880, 201088, 32),
        "120b": _gpt_oss(36, 2880, 201088, 128),
    },
}
"""torchtitan's flavours by model and name, as ``config.json`` dicts (see the module docstring)."""


def _llama4(layers, dim, heads, kv, vocab, experts, step, moe_ffn, ffn, block=None) -> dict:
    """torchtitan's Llama 4 (TOML generation) as Llama 4's ``config.json``: no q/k norms, untied; with
    ``block`` (the ``_irope`` flavours) no rotation on the layers ``i % 4 == 0`` and attention within
    blocks of ``block`` tokens on the others."""
    rotating = [0 if block and i % 4 == 0 else 1 for i in range(layers)]
    return dict(model_type="llama4_text", num_hidden_layers=layers, hidden_size=dim, vocab_size=vocab,
                num_attention_heads=heads, num_key_value_heads=kv, head_dim=dim // heads, num_local_experts=experts,
                num_experts_per_tok=1, interleave_moe_layer_step=step, intermediate_size=moe_ffn,
                intermediate_size_mlp=ffn, use_qk_norm=False, no_rope_layers=rotating, attention_chunk_size=block,
                attention_bias=False, tie_word_embeddings=False, hidden_act="silu")


LLAMA4_VOCAB = 202048

TOML_FLAVORS = {**CONFIGS, "gpt_oss": dict(CONFIGS["gpt_oss"], debugmodel=_gpt_oss(4, 256, 201088, 8)),
                "llama4": {
                    "debugmodel": _llama4(6, 256, 16, 16, 2048, 8, 2, 512, 768),
                    "17bx16e": _llama4(48, 5120, 40, 8, LLAMA4_VOCAB, 16, 1, 8192, 16384),
                    "17bx128e": _llama4(48, 5120, 40, 8, LLAMA4_VOCAB, 128, 2, 8192, 16384),
                    "debugmodel_irope": _llama4(6, 256, 16, 16, 2048, 8, 2, 512, 768, block=256),
                    "17bx16e_irope": _llama4(48, 5120, 40, 8, LLAMA4_VOCAB, 16, 1, 8192, 16384, block=8192),
                    "17bx128e_irope": _llama4(48, 5120, 40, 8, LLAMA4_VOCAB, 128, 2, 8192, 16384, block=8192)}}
"""The flavours of the last TOML generation (torchtitan at 477784a^, 2026-02, before its configurations
became Python): the Python ones, but GPT-OSS's debug model with its ``GptOssModelArgs``' default
vocabulary, 201,088 words (its 2,048 came with the Python registry), and Llama 4
(``torchtitan/models/llama4/__init__.py`` and ``model/model.py`` there): top-1 sigmoid routing with one
shared expert, the experts' width ``int(int(2·4·dim/3)·ffn_dim_multiplier / 2)`` rounded up to
``multiple_of`` (8,192; 512 for the debug model), the dense layers' by ``FeedForward`` (16,384; 768),
MoE on every ``interleave_moe_layer_step``-th layer (``(layer_id + 1) % step == 0``: 1 for 16 experts,
2 for 128 and the debug model's 8), Llama 4's 202,048 words (2,048 for the debug models)."""


def toml_architecture(model: str, flavor: str, context: int, vocab: int | None = None) -> Architecture:
    """``architecture`` of a job TOML's ``[model] name`` and ``flavor`` (``TOML_FLAVORS``), with
    ``vocab`` words in place of the stated ones when given (``models.torchtitan.tokenizer_vocab``)."""
    if vocab is None or model not in TOML_FLAVORS or flavor not in TOML_FLAVORS[model]:
        return architecture(model, flavor, context, flavors=TOML_FLAVORS)
    flavors = {model: {flavor: dict(TOML_FLAVORS[model][flavor], vocab_size=vocab)}}
    return architecture(model, flavor, context, flavors=flavors)


def architecture(model: str, flavor: str, context: int, mtp_layers: int = 0, flavors=CONFIGS) -> Architecture:
    """The ``Architecture`` of torchtitan's ``model`` flavour ``flavor`` at ``context`` positions,
    with ``mtp_layers`` multi-token-prediction modules (DeepSeek's ``num_mtp_layers``)."""
    from symbolic_cost.models.config import from_config
    for value, what in ((model, "[model] name"), (flavor, "[model] flavor")):
        if not isinstance(value, str):
            raise InputTypeError(f"{what} must be a str, got {value!r}", what)
    if model not in flavors:
        llamas = "llama3, llama2" if flavors is TOML_FLAVORS else "llama3"
        raise InputError(f"[model] name {model!r}: the reader bundles torchtitan's {llamas}, "
                         f"{', '.join(flavors)} flavours; give that model's config.json with --hf-config and its "
                         f"layout with --set", "[model] name")
    if flavor not in flavors[model]:
        raise InputError(f"[model] flavor {flavor!r} of {model}: the reader bundles {', '.join(flavors[model])}",
                         "[model] flavor")
    arch = from_config(dict(flavors[model][flavor], max_position_embeddings=context), f"{model} {flavor}")
    return replace(arch, mtp_layers=mtp_layers) if mtp_layers else arch
