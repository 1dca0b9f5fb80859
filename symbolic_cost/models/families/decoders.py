"""GPT-style decoders: ``gpt2``, ``gpt_neox``, ``gptj``, ``opt``, ``bloom``, ``falcon``, ``phi``,
``starcoder2`` (LayerNorm, mostly biased projections, learned, rotary or ALiBi positions).

Each reads the keys of its ``transformers`` config class with that class's defaults
(``transformers`` 5.23) and the module shapes of its model code.
"""

from __future__ import annotations

from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.families.keys import (Keys, check_heads, head_fields, lm_head_of, plain_mlp, rotary_dim,
                                                window_fields)

GPT2_KNOWN = ("layer_norm_epsilon", "n_ctx", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
              "reorder_and_upcast_attn", "summary_type", "summary_use_proj", "summary_activation",
              "summary_proj_to_labels", "summary_first_dropout")


def gpt2(k: Keys, name: str) -> Architecture:
    """GPT-2: fused ``c_attn`` and ``c_proj`` with biases, ``c_fc`` (``n_inner``, default ``4e``),
    learned positions, two LayerNorms a layer, tied head."""
    e, h, L = k.int("n_embd", 768), k.int("n_head", 12), k.int("n_layer", 12)
    check_heads(k, e, h, None, None, ("n_embd", "n_head", ""))
    k.refuse_if("add_cross_attention", bool, "cross-attention layers", False)
    k.known(*GPT2_KNOWN)
    positions = k.int("n_positions", 1024)
    return Architecture(name, L, e, h, k.int("n_inner", None, nullable=True) or 4 * e, k.int("vocab_size", 50257),
                        positions=positions, mlp=plain_mlp(k.activation("activation_function", "gelu_new")),
                        tied=k.flag("tie_word_embeddings", True), context=positions,
                        **k.dropout_fields([("resid_pdrop", 0.1)], [("attn_pdrop", 0.1)], [("embd_pdrop", 0.1)]),
                        **head_fields(k))


def gpt_neox(k: Keys, name: str) -> Architecture:
    """GPT-NeoX (Pythia): fused ``query_key_value`` and ``dense`` (``attention_bias``), a biased
    MLP, rotary on ``rotary_pct`` of each head, parallel residual with two norms by default."""
    e, h = k.int("hidden_size", 6144), k.int("num_attention_heads", 64)
    check_heads(k, e, h, None, None)
    bias, parallel = k.flag("attention_bias", True), k.flag("use_parallel_residual", True)
    k.known("layer_norm_eps", "rotary_emb_base", "rope_theta", "classifier_dropout")
    k.known("is_decoder")
    return Architecture(name, k.int("num_hidden_layers", 44), e, h, k.int("intermediate_size", 24576),
                        k.int("vocab_size", 50432), mlp=plain_mlp(k.activation("hidden_act", "gelu")),
                        rotary=True, rotary_dim=rotary_dim(e // h, k.rotary_fraction("0.25", "rotary_pct")),
                        tied=k.flag("tie_word_embeddings", False), qkv_bias=bias, bias=bias, mlp_bias=True,
                        parallel=parallel, norms=2,
                        **k.dropout_fields([("hidden_dropout", 0)], [("attention_dropout", 0)],
                                           [("hidden_dropout", 0)]),
                        context=k.int("max_position_embeddings", 2048), **head_fields(k))


def gptj(k: Keys, name: str) -> Architecture:
    """GPT-J: q, k, v, out without bias, a biased MLP, one LayerNorm for the parallel branches,
    rotary on ``rotary_dim`` dims of each head, a biased untied head."""
    e, h = k.int("n_embd", 4096), k.int("n_head", 16)
    check_heads(k, e, h, None, None, ("n_embd", "n_head", ""))
    k.known(*GPT2_KNOWN, "rotary")
    part = k.int("rotary_dim", 64, nullable=True)
    return Architecture(name, k.int("n_layer", 28), e, h, k.int("n_inner", None, nullable=True) or 4 * e,
                        k.int("vocab_size", 50400), mlp=plain_mlp(k.activation("activation_function", "gelu_new")),
                        rotary=True, rotary_dim=part, tied=k.flag("tie_word_embeddings", False), qkv_bias=False,
                        bias=False, mlp_bias=True, parallel=True, norms=1, head_bias=lm_head_of(k),
                        **k.dropout_fields([("resid_pdrop", 0)], [("attn_pdrop", 0)], [("embd_pdrop", 0)]),
                        context=k.int("n_positions", 2048), **head_fields(k))


def opt(k: Keys, name: str) -> Architecture:
    """OPT: biased (``enable_bias``) q, k, v, out and MLP, learned positions with OPT's offset of
    2 rows, an optional word-embedding projection (``word_embed_proj_dim``), a final norm only
    with ``do_layer_norm_before``, tied head."""
    e, h = k.int("hidden_size", 768), k.int("num_attention_heads", 12)
    check_heads(k, e, h, None, None)
    k.refuse_if("layerdrop", lambda x: x not in (None, 0, 0.0), "layers skipped at random", 0)
    k.known("activation_dropout", "init_std")
    projection = k.int("word_embed_proj_dim", None, nullable=True)
    pre = k.flag("do_layer_norm_before", True)
    final = pre and not k.flag("_remove_final_layer_norm", False)
    bias, positions = k.flag("enable_bias", True), k.int("max_position_embeddings", 2048)
    norm = "layer" if k.flag("layer_norm_elementwise_affine", True) else "layer_noaffine"
    return Architecture(name, k.int("num_hidden_layers", 12), e, h, k.int("ffn_dim", 3072), k.int("vocab_size", 50272),
                        positions=positions + 2, mlp=plain_mlp(k.activation("activation_function", "relu")),
                        norm=norm, tied=k.flag("tie_word_embeddings", True), qkv_bias=bias, bias=bias,
                        final_norm=final, embedding_projection=None if projection in (None, e) else projection,
                        **k.dropout_fields([("dropout", 0.1)], [("attention_dropout", 0)], [("dropout", 0.1)]),
                        context=positions,
                        **head_fields(k))


def bloom(k: Keys, name: str) -> Architecture:
    """BLOOM: ALiBi, a LayerNorm on the word embeddings, biased fused ``query_key_value`` and
    dense, a ``4e`` biased MLP, tied head."""
    e = k.int("hidden_size", None, nullable=True) or k.int("n_embed", 64)
    h = k.int("n_head", 8)
    check_heads(k, e, h, None, None, ("hidden_size", "n_head", ""))
    k.known("layer_norm_epsilon", "apply_residual_connection_post_layernorm", "pretraining_tp", "slow_but_exact",
            "attention_softmax_in_fp32", "bias_dropout_fusion", "masked_softmax_fusion", "offset_alibi",
            "skip_bias_add", "skip_bias_add_qkv", "n_inner", "n_embed", "seq_length")
    return Architecture(name, k.int("n_layer", 2), e, h, 4 * e, k.int("vocab_size", 250880), mlp="gelu",
                        score_bias="alibi", embedding_norm=True, tied=k.flag("tie_word_embeddings", True),
                        **k.dropout_fields([("hidden_dropout", 0)], [("attention_dropout", 0)]), **head_fields(k))


def falcon(k: Keys, name: str) -> Architecture:
    """Falcon: ``new_decoder_architecture`` (grouped K/V, ``num_ln_in_parallel_attn`` norms,
    default 2) or the original one (multi-query by default, one norm for parallel branches,
    two for sequential ones); ``bias`` on every projection; ALiBi or rotary; tied head."""
    e, h = k.int("hidden_size", None, nullable=True) or k.int("n_embed", 4544), k.int("num_attention_heads", 71)
    new = k.flag("new_decoder_architecture", False)
    multi, parallel = k.flag("multi_query", True), k.flag("parallel_attn", True)
    kv = k.int("num_kv_heads", None, nullable=True)
    if new:
        kv, norms = kv or h, k.int("num_ln_in_parallel_attn", None, nullable=True) or 2
        if not parallel:
            raise k.error("new_decoder_architecture needs parallel_attn (the model code uses both norms)")
    else:
        norms = k.int("num_ln_in_parallel_attn", None, nullable=True) or (1 if parallel else 2)
        if parallel and norms != 1:
            raise k.error("num_ln_in_parallel_attn=2 needs new_decoder_architecture")
        if not multi and kv not in (None, h):
            raise k.error(f"num_kv_heads={kv} needs new_decoder_architecture (the fused projection is 3e)")
        kv = 1 if multi else h
    check_heads(k, e, h, kv, None, ("hidden_size", "num_attention_heads", "num_kv_heads"))
    alibi, bias = k.flag("alibi", False), k.flag("bias", False)
    k.known("layer_norm_epsilon", "apply_residual_connection_post_layernorm", "rope_theta", "n_embed")
    part = None if alibi else rotary_dim(e // h, k.rotary_fraction(1))
    return Architecture(name, k.int("num_hidden_layers", 32), e, h, k.int("ffn_hidden_size", None, nullable=True) or 4 * e,
                        k.int("vocab_size", 65024), kv_heads=kv, mlp=plain_mlp(k.activation("activation", "gelu")),
                        rotary=not alibi, rotary_dim=part, score_bias="alibi" if alibi else None, tied=k.flag("tie_word_embeddings", True),
                        qkv_bias=bias, bias=bias, parallel=parallel, norms=norms,
                        **k.dropout_fields([("hidden_dropout", 0)], [("attention_dropout", 0)]),
                        context=k.int("max_position_embeddings", 2048), **head_fields(k))


def phi(k: Keys, name: str) -> Architecture:
    """Phi-1, 1.5, 2: biased q, k, v, dense and MLP, one LayerNorm for the parallel branches,
    optional per-head q/k LayerNorms, rotary on ``partial_rotary_factor`` (0.5) of each head,
    a biased head."""
    e, h = k.int("hidden_size", 2048), k.int("num_attention_heads", 32)
    kv, hd = k.int("num_key_value_heads", None, nullable=True) or h, k.int("head_dim", None, nullable=True)
    check_heads(k, e, h, kv, hd)
    k.known("layer_norm_eps", "rope_theta")
    return Architecture(name, k.int("num_hidden_layers", 24), e, h, k.int("intermediate_size", 8192),
                        k.int("vocab_size", 51200), kv_heads=kv, head_dim=hd,
                        mlp=plain_mlp(k.activation("hidden_act", "gelu_new")), rotary=True,
                        rotary_dim=rotary_dim(hd or e // h, k.rotary_fraction("0.5", "partial_rotary_factor")),
                        qk_norm="head" if k.flag("qk_layernorm", False) else None,
                        tied=k.flag("tie_word_embeddings", False), parallel=True, norms=1, head_bias=lm_head_of(k),
                        **k.dropout_fields([("resid_pdrop", 0)], [("attention_dropout", 0)], [("embd_pdrop", 0)]),
                        context=k.int("max_position_embeddings", 2048), **head_fields(k))


def starcoder2(k: Keys, name: str) -> Architecture:
    """StarCoder2: q, k, v, o and MLP biased by ``use_bias``, grouped K/V, two LayerNorms,
    rotary, a sliding window on every layer when ``sliding_window`` is set, tied head."""
    e, h = k.int("hidden_size", 3072), k.int("num_attention_heads", 24)
    kv, hd = k.int("num_key_value_heads", 2), k.int("head_dim", None, nullable=True)
    check_heads(k, e, h, kv, hd)
    k.known("norm_epsilon", "layer_norm_epsilon", "rope_theta")
    k.refuse_if("norm_type", lambda x: x not in (None, "layer_norm"), "LayerNorm only", None)
    k.refuse_if("mlp_type", lambda x: x not in (None, "default"), "the plain MLP only", None)
    L, bias, window = k.int("num_hidden_layers", 30), k.flag("use_bias", True), k.int("sliding_window", None, nullable=True)
    part = rotary_dim(hd or e // h, k.rotary_fraction(1))
    return Architecture(name, L, e, h, k.int("intermediate_size", 12288), k.int("vocab_size", 49152), kv_heads=kv,
                        head_dim=hd, mlp=plain_mlp(k.activation("hidden_act", "gelu_pytorch_tanh")), rotary=True,
                        rotary_dim=part,
                        tied=k.flag("tie_word_embeddings", True), qkv_bias=bias, bias=bias,
                        **window_fields(k, L, window, lambda i: True),
                        **k.dropout_fields([("residual_dropout", 0)], [("attention_dropout", 0)],
                                           [("embedding_dropout", 0)]),
                        context=k.int("max_position_embeddings", 4096), **head_fields(k))


FAMILIES = {"gpt2": gpt2, "gpt_neox": gpt_neox, "gptj": gptj, "opt": opt, "bloom": bloom, "falcon": falcon,
            "phi": phi, "starcoder2": starcoder2}
