"""Mixture-of-experts decoders with Llama-style attention: ``mixtral``, ``qwen2_moe``,
``qwen3_moe``, ``olmoe``, ``gpt_oss``, ``glm4_moe``, ``granitemoe``, ``granitemoeshared``,
``llama4_text``, ``phimoe``, ``minimax_m2``, as ``transformers`` 5.23 builds them (DeepSeek's,
with latent attention: ``families.deepseek``).

* The experts: ``num_local_experts`` / ``num_experts`` / ``n_routed_experts`` of width
  ``moe_intermediate_size`` (Mixtral: ``intermediate_size``), ``num_experts_per_tok`` per token,
  gated by ``hidden_act``; shared experts: Qwen2-MoE's one of ``shared_expert_intermediate_size``
  behind a sigmoid gate, GLM's ``n_shared_experts x moe_intermediate_size``.
* Which layers: Qwen's layer ``i`` is MoE when ``(i + 1) % decoder_sparse_step == 0`` and
  ``i`` is not in ``mlp_only_layers``; GLM's from ``first_k_dense_replace`` on; Llama 4's those
  of ``moe_layers``; the other layers are dense MLPs.
* Router: each family's scores (``ops.routing.ROUTERS``), renormalised and scaled as its model
  code does.

Not counted (declared): the auxiliary balance loss (``router_aux_loss_coef``,
``aux_loss_alpha``, ``seq_aux``, ``output_router_logits``: element-wise on the router's
scores).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from symbolic_cost.blocks.moe import MoE
from symbolic_cost.checks import repeated_keys
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.families.keys import Keys, lm_head_of, window_fields
from symbolic_cost.models.families.common import GRANITE_SCALES, attention_biases, llama_style, rotating_layers

AUX_LOSS = ("router_aux_loss_coef", "output_router_logits", "aux_loss_alpha", "seq_aux")


def _experts_list(k: Keys, key: str, depth: int) -> tuple:
    """``mlp_only_layers``: layer indices, as a list of non-negative integers (null: none), each
    named once, those of the ``depth`` the model has (``_layer_indices``)."""
    value = k.raw(key, None, True)
    if value is None:
        return ()
    if not (isinstance(value, list) and all(type(i) is int and i >= 0 for i in value)):
        raise k.error(f"{key} must be a list of layer indices, got {value!r}")
    return _layer_indices(k, key, value, depth)


def _layer_indices(k: Keys, key: str, indices: list, depth: int) -> tuple:
    """The layers of ``indices`` (the list ``key``) that the model's ``depth`` has, each named once
    (one named twice is refused: a slip).  One past the model is left out with a note, as
    ``transformers`` leaves it (its decoder asks each of its ``num_hidden_layers`` whether it is
    listed: a config cut to fewer layers keeps the full model's list); counted, it would take a
    layer off a symbolic depth's count."""
    twice = sorted(repeated_keys((i, None) for i in indices))
    if twice:
        raise k.error(f"{key} names layer {', '.join(map(str, twice))} twice: name each once")
    past = sorted(i for i in indices if i >= depth)
    if past:
        k.notes.append(f"config.json: {key} names layer {', '.join(map(str, past))}, past the model's {depth} "
                       f"layers (0 to {depth - 1}): left out, as transformers builds only the layers the model has")
    return tuple(i for i in indices if i < depth)


def experts_per_token(k: Keys, default) -> int:
    """``num_experts_per_tok``; null is refused (the model cannot route)."""
    value = k.int("num_experts_per_tok", default, nullable=True)
    if value is None:
        raise k.error("num_experts_per_tok is null: the model routes no token (set the experts per token)")
    return value


def mixtral(k: Keys, name: str) -> Architecture:
    """Mixtral: Mistral's attention (no biases, ``sliding_window`` on every layer when set) and
    ``num_local_experts`` gated experts of ``intermediate_size`` on every layer, top-k
    renormalised; ``router_jitter_noise`` other than 0 is refused (not counted)."""
    k.refuse_if("router_jitter_noise", lambda x: x not in (None, 0, 0.0), "input jitter is not counted", 0)
    k.known(*AUX_LOSS)
    depth = k.int("num_hidden_layers", 32)
    experts = k.int("num_local_experts", k.int("num_experts", 8))
    window = k.int("sliding_window", None, nullable=True)
    moe = MoE(experts, experts_per_token(k, 2), k.int("intermediate_size", 14336), normalise=True)
    fields = dict(window=window, windowed_layers=depth) if window else {}
    return llama_style(k, name, dict(intermediate_size=14336, num_key_value_heads=8, max_position_embeddings=4096 * 32),
                       qkv_bias=False, bias=False, mlp_bias=False, moe=moe, **fields)


def _qwen_moe(k: Keys, experts: int, width: int, top_k: int, shared: int, gate: bool, depth: int) -> MoE | None:
    """The Qwen MoE layers (none with 0 experts): every ``decoder_sparse_step``-th layer but
    those of ``mlp_only_layers`` (each a layer of the ``depth``); ``width``, ``top_k`` are the
    class's defaults."""
    step = k.int("decoder_sparse_step", 1)
    dense = _experts_list(k, "mlp_only_layers", depth)
    k.known(*AUX_LOSS)
    width, top_k, normalise = k.int("moe_intermediate_size", width), experts_per_token(k, top_k), k.flag("norm_topk_prob", False)
    if experts == 0:
        return None
    return MoE(experts, top_k, width, shared_f=shared, shared_gate=gate, normalise=normalise, every=step,
               phase=step - 1, dense_layers=dense)


def qwen2_moe(k: Keys, name: str) -> Architecture:
    """Qwen2-MoE (Qwen1.5-MoE): Qwen2's attention (``qkv_bias`` on q, k, v), 60 experts of 1408
    and a gated shared expert of ``shared_expert_intermediate_size`` by default; with
    ``use_sliding_window`` a window on the even layers below ``max_window_layers``."""
    depth = k.int("num_hidden_layers", 24)
    use = k.flag("use_sliding_window", False)
    window = k.int("sliding_window", 4096, nullable=True, zero=True)
    start = k.int("max_window_layers", 28, zero=True)
    windows = window_fields(k, depth, window if use and window else None, lambda i: i < start and i % 2 == 0)
    moe = _qwen_moe(k, k.int("num_experts", 60, zero=True), 1408, 4,
                    k.int("shared_expert_intermediate_size", 5632), True, depth)
    return llama_style(k, name, dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24,
                                     num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=32768),
                       qkv_bias=k.flag("qkv_bias", True), bias=False, mlp_bias=False, moe=moe, **windows)


def qwen3_moe(k: Keys, name: str) -> Architecture:
    """Qwen3-MoE: Qwen3's attention (per-head q/k RMS norms, ``attention_bias``, ``head_dim``
    when given), 128 experts of 768, 8 a token, no shared expert by default; ``sliding_window``
    on every layer with ``use_sliding_window``.  ``max_window_layers`` is not read by its code."""
    depth = k.int("num_hidden_layers", 24)
    use = k.flag("use_sliding_window", False)
    window = k.int("sliding_window", 4096, nullable=True)
    k.known("max_window_layers")
    fields = dict(window=window, windowed_layers=depth) if use and window else {}
    experts = k.int("num_local_experts", k.int("num_experts", 128, zero=True), zero=True)
    attention = k.flag("attention_bias", False)
    return llama_style(k, name, dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=24,
                                     num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=32768),
                       qkv_bias=attention, bias=attention, mlp_bias=False, qk_norm="head",
                       moe=_qwen_moe(k, experts, 768, 8, 0, False, depth),
                       **fields)


def olmoe(k: Keys, name: str) -> Architecture:
    """OLMoE: OLMo 2's norms of the whole Q and K projections before the attention (pre-norm
    layers), ``clip_qkv``, and ``num_experts`` (64) gated experts of ``intermediate_size`` on
    every layer, 8 a token, renormalised with ``norm_topk_prob``."""
    k.known(*AUX_LOSS)
    moe = MoE(k.int("num_local_experts", k.int("num_experts", 64)), experts_per_token(k, 8), k.int("intermediate_size", 2048),
              normalise=k.flag("norm_topk_prob", False))
    clip = k.number("clip_qkv", None, nullable=True) is not None
    return llama_style(k, name, dict(vocab_size=50304, hidden_size=2048, intermediate_size=2048, num_hidden_layers=16,
                                     num_attention_heads=16, max_position_embeddings=4096),
                       qk_norm="projection", clip_qkv=clip, qkv_bias=k.flag("attention_bias", False),
                       bias=k.flag("attention_bias", False), mlp_bias=False, moe=moe)


def gpt_oss(k: Keys, name: str) -> Architecture:
    """GPT-OSS: grouped-query attention with biases on q, k, v, o (``attention_bias``), a
    learned sink logit per head, a 128-key window on every other layer (``layer_types``), and
    ``num_local_experts`` (128) experts of ``intermediate_size`` on every layer, 4 a token, with
    biases on the router and on both products of every expert; the router takes a softmax of
    the 4 largest logits.  The experts' activation is a SwiGLU with its gate and value clamped
    (``swiglu_limit``; ``MoE.clamp``, whose passes a training counts, ``blocks.moe``), the gate
    scaled (``swiglu_alpha``) and 1 added to the value: counted as a SwiGLU (the clamps compare;
    the scale and the add are two more FLOPs an element, not counted).  ``experts_per_token`` and
    ``initial_context_length`` (written by OpenAI's own code) are not read by ``transformers``."""
    k.known(*AUX_LOSS, "swiglu_alpha", "experts_per_token", "initial_context_length")
    depth = k.int("num_hidden_layers", 36)
    window = k.int("sliding_window", 128, nullable=True)
    moe = MoE(k.int("num_local_experts", 128), experts_per_token(k, 4), k.int("intermediate_size", 2880), router="topk_softmax",
              router_bias=True, expert_bias=True, clamp=k.number("swiglu_limit", 7.0, nullable=True) is not None)
    attention = k.flag("attention_bias", True)
    return llama_style(k, name, dict(vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=36,
                                     num_attention_heads=64, num_key_value_heads=8, head_dim=64,
                                     max_position_embeddings=131072),
                       qkv_bias=attention, bias=attention, mlp_bias=False, moe=moe, sinks=True,
                       **window_fields(k, depth, window, lambda i: i % 2 == 0))


def glm4_moe(k: Keys, name: str) -> Architecture:
    """GLM-4.5: grouped-query attention (``head_dim``), biases on q, k, v only
    (``attention_bias``), per-head q/k RMS norms with ``use_qk_norm``, rotary positions on
    ``partial_rotary_factor`` (half) of each head; DeepSeek-V3's experts: a sigmoid router
    (its ``e_score_correction_bias`` is a buffer, not a parameter), ``n_routed_experts`` of
    ``moe_intermediate_size`` and ``n_shared_experts`` shared ones from layer
    ``first_k_dense_replace`` on, the chosen weights renormalised (``norm_topk_prob``) and
    scaled; ``num_nextn_predict_layers`` multi-token-prediction modules like DeepSeek-V3's
    (the published checkpoints hold them; ``transformers`` builds none).  Without ``head_dim``
    a head has ``hidden_size // num_attention_heads`` dims, as the model code reads it."""
    k.known(*AUX_LOSS, "n_group", "topk_group")
    mtp = k.int("num_nextn_predict_layers", k.int("num_mtp_layers", 1, zero=True), zero=True)
    expert_f = k.int("moe_intermediate_size", 1408)
    moe = MoE(k.int("n_routed_experts", 128), experts_per_token(k, 8), expert_f,
              shared_f=k.int("n_shared_experts", 1, zero=True) * expert_f, router="sigmoid",
              normalise=k.flag("norm_topk_prob", True), scale=k.number("routed_scaling_factor", 1.0) != 1,
              first_dense=k.int("first_k_dense_replace", 1, zero=True))
    e, h = k.int("hidden_size", 4096), k.int("num_attention_heads", 96)
    arch = llama_style(k, name, dict(vocab_size=151552, intermediate_size=10944, num_hidden_layers=46, num_attention_heads=96,
                                     num_key_value_heads=8, max_position_embeddings=131072, head_dim=e // h,
                                     rotary_keys=("partial_rotary_factor",), rotary_share=Fraction(1, 2)),
                       qkv_bias=k.flag("attention_bias", False), bias=False, mlp_bias=False,
                       qk_norm="head" if k.flag("use_qk_norm", False) else None, moe=moe)
    return replace(arch, mtp_layers=mtp)


def granitemoe(k: Keys, name: str) -> Architecture:
    """Granite MoE (3.x): Granite's attention and scalings (``GRANITE_SCALES``) with
    ``num_local_experts`` gated experts of ``intermediate_size`` on every layer, the router
    taking a softmax of its ``num_experts_per_tok`` largest logits."""
    return _granite_moe(k, name, 0)


def granitemoeshared(k: Keys, name: str) -> Architecture:
    """Granite MoE with a shared gated expert of ``shared_intermediate_size`` (0: none),
    added to the routed output without a gate."""
    return _granite_moe(k, name, k.int("shared_intermediate_size", 0, zero=True))


def _granite_moe(k: Keys, name: str, shared) -> Architecture:
    k.known(*AUX_LOSS, *GRANITE_SCALES)
    moe = MoE(k.int("num_local_experts", 8), experts_per_token(k, 2), k.int("intermediate_size", 11008), shared_f=shared,
              router="topk_softmax")
    return llama_style(k, name, {}, **attention_biases(k), moe=moe)


def llama4_text(k: Keys, name: str) -> Architecture:
    """Llama 4 (text): attention within chunks of ``attention_chunk_size`` (8192) tokens on the
    layers that rotate and full attention without rotary positions on every fourth
    (``no_rope_layers``, ``layer_types``), an RMS norm without weights on each query and key head
    of the rotating layers (``use_qk_norm``), ``attention_bias`` on q, k, v, o;
    ``num_local_experts`` (16) experts of ``intermediate_size`` with one shared expert of the
    same width on the layers ``moe_layers`` lists (else every ``interleave_moe_layer_step``-th),
    dense MLPs of ``intermediate_size_mlp`` on the others; the router takes a sigmoid of its
    ``num_experts_per_tok`` largest logits and scales each token before its experts (as many
    multiplies as weighting their outputs).  Not counted: the query scaling of the layers
    without rotary positions (``attn_temperature_tuning``, element-wise)."""
    k.known(*AUX_LOSS, "attn_temperature_tuning", "floor_scale", "attn_scale")
    k.refuse_if("router_jitter_noise", lambda x: x not in (None, 0, 0.0), "input jitter is not counted", 0)
    depth = k.int("num_hidden_layers", 48)
    rotates = rotating_layers(k, depth)
    chunk = k.int("attention_chunk_size", 8192, nullable=True)
    windows = window_fields(k, depth, chunk, lambda i: rotates[i], kind="chunked_attention")
    listed = k.raw("moe_layers", None, True)
    step = k.int("interleave_moe_layer_step", 1)
    routed = range(step - 1, depth, step) if listed is None else listed
    if not (isinstance(routed, (list, range)) and all(type(i) is int and i >= 0 for i in routed)):
        raise k.error(f"moe_layers must list layer indices, got {listed!r}")
    if listed is not None:
        routed = _layer_indices(k, "moe_layers", listed, depth)
    width = k.int("intermediate_size", 8192)
    moe = MoE(k.int("num_local_experts", 16), experts_per_token(k, 1), width, shared_f=width, router="topk_sigmoid",
              dense_layers=tuple(i for i in range(depth) if i not in set(routed)))
    return llama_style(k, name, dict(vocab_size=202048, hidden_size=5120, intermediate_size_mlp=16384, num_hidden_layers=48,
                                     num_attention_heads=40, num_key_value_heads=8, head_dim=128,
                                     max_position_embeddings=4096 * 32, f_key="intermediate_size_mlp"),
                       **attention_biases(k), qk_norm="l2" if k.flag("use_qk_norm", True) else None, moe=moe,
                       rope_pattern=None if all(rotates) else rotates, chunked=bool(windows), **windows)


def phimoe(k: Keys, name: str) -> Architecture:
    """Phi-3.5-MoE: Mixtral's experts (``num_local_experts`` of ``intermediate_size``, 2 a
    token) chosen by SparseMixer (``ROUTERS``), LayerNorms with biases, ``attention_bias`` on
    q, k, v, o, a bias on the LM head (``lm_head_bias``), ``sliding_window`` on every layer when
    set.  Not counted: the multiplicative jitter of the experts' input in training
    (``input_jitter_noise``, element-wise) and SparseMixer's threshold (``router_jitter_noise``,
    comparisons)."""
    k.known(*AUX_LOSS, "router_jitter_noise", "input_jitter_noise")
    depth = k.int("num_hidden_layers", 32)
    window = k.int("sliding_window", None, nullable=True)
    fields = dict(window=window, windowed_layers=depth) if window else {}
    moe = MoE(k.int("num_local_experts", 16), experts_per_token(k, 2), k.int("intermediate_size", 6400), router="sparsemixer")
    return llama_style(k, name, dict(vocab_size=32064, intermediate_size=6400, num_key_value_heads=8,
                                     max_position_embeddings=4096 * 32),
                       norm="layer", **attention_biases(k), head_bias=k.flag("lm_head_bias", False) and lm_head_of(k),
                       moe=moe, **fields)


def minimax_m2(k: Keys, name: str) -> Architecture:
    """MiniMax-M2: grouped-query attention (``head_dim`` 128) with RMS norms of the whole Q and K
    projections, rotary positions on ``rotary_dim`` dims of each head (its released configs'
    key; else ``partial_rotary_factor``); ``num_local_experts`` (256) gated experts of
    ``intermediate_size`` on every layer, 8 a token, chosen by a sigmoid (its
    ``e_score_correction_bias`` is a buffer, not a parameter) and renormalised."""
    k.known(*AUX_LOSS)
    k.refuse_if("router_jitter_noise", lambda x: x not in (None, 0, 0.0), "input jitter is not counted", 0)
    head = k.int("head_dim", 128)
    legacy = k.int("rotary_dim", None, nullable=True)
    moe = MoE(k.int("num_local_experts", 256), experts_per_token(k, 8), k.int("intermediate_size", 1536), router="sigmoid",
              normalise=True)
    return llama_style(k, name, dict(vocab_size=200064, hidden_size=3072, intermediate_size=1536, num_hidden_layers=62,
                                     num_attention_heads=48, num_key_value_heads=8, head_dim=128,
                                     max_position_embeddings=196608, rotary_keys=("partial_rotary_factor",),
                                     rotary_share=Fraction(legacy, head) if legacy else 1),
                       qkv_bias=False, bias=False, mlp_bias=False, qk_norm="projection", moe=moe)


FAMILIES = {"mixtral": mixtral, "qwen2_moe": qwen2_moe, "qwen3_moe": qwen3_moe, "olmoe": olmoe, "gpt_oss": gpt_oss,
            "glm4_moe": glm4_moe, "granitemoe": granitemoe, "granitemoeshared": granitemoeshared,
            "llama4_text": llama4_text, "phimoe": phimoe, "minimax_m2": minimax_m2}
