"""Llama-style decoders: ``llama``, ``mistral``, ``qwen2``, ``qwen3``, ``gemma``, ``gemma2``,
``gemma3_text``, ``phi3``, ``olmo``, ``olmo2``, ``olmo3``, ``granite``, ``seed_oss``, ``ernie4_5``,
``exaone4``, ``smollm3``, ``arcee``, ``cohere``, ``cohere2``, ``nemotron`` (RMS or parameter-free
norms, gated MLP, rotary positions, grouped K/V, a head size of their own; Arcee's MLP ungated,
Nemotron's too, with LayerNorm).

Each reads the keys of its ``transformers`` config class with that class's defaults
(``transformers`` 5.23) and the module shapes of its model code.  Not counted: Gemma's
``sqrt(e)`` embedding scale and its ``(1 + w)`` norm gain (element-wise, a few FLOPs per token).
"""

from __future__ import annotations

from fractions import Fraction

from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.families.common import GRANITE_SCALES, attention_biases, llama_style, rotating_layers
from symbolic_cost.models.families.keys import Keys, window_fields


def llama(k: Keys, name: str) -> Architecture:
    """Llama: q, k, v, o biased by ``attention_bias``, the MLP by ``mlp_bias``."""
    k.known("pretraining_tp")                  # slices the same products
    return llama_style(k, name, {}, **{**attention_biases(k), "mlp_bias": k.flag("mlp_bias", False)})


def granite(k: Keys, name: str) -> Architecture:
    """Granite (3.x): Llama with ``GRANITE_SCALES``."""
    k.known(*GRANITE_SCALES)
    return llama_style(k, name, {}, **{**attention_biases(k), "mlp_bias": k.flag("mlp_bias", False)})


def mistral(k: Keys, name: str) -> Architecture:
    """Mistral: no biases; ``sliding_window`` (default 4096) on every layer."""
    k.known("layer_types")                      # the Mistral model code ignores it
    depth = k.int("num_hidden_layers", 32)
    window = k.int("sliding_window", 4096, nullable=True)
    fields = dict(window=window, windowed_layers=depth) if window else {}
    return llama_style(k, name, dict(intermediate_size=14336, num_key_value_heads=8, max_position_embeddings=4096 * 32),
                       qkv_bias=False, bias=False, **fields)


def _qwen_window(k: Keys, depth: int) -> dict:
    """Qwen2/3: ``sliding_window`` only with ``use_sliding_window``, on the layers from
    ``max_window_layers`` on (or as ``layer_types`` lists them)."""
    use = k.flag("use_sliding_window", False)
    window = k.int("sliding_window", 4096, nullable=True)
    start = k.int("max_window_layers", 28, zero=True)
    return window_fields(k, depth, window if use else None, lambda i: i >= start)


def qwen2(k: Keys, name: str) -> Architecture:
    """Qwen2 (2.5): q, k, v biased, o and the MLP not."""
    k.known("use_mrope")
    depth = k.int("num_hidden_layers", 32)
    return llama_style(k, name, dict(vocab_size=151936, intermediate_size=22016, num_key_value_heads=32,
                                     max_position_embeddings=32768), qkv_bias=True, bias=False, **_qwen_window(k, depth))


def qwen3(k: Keys, name: str) -> Architecture:
    """Qwen3: head size 128 by default, per-head q/k RMS norms, ``attention_bias`` on q, k, v, o."""
    depth = k.int("num_hidden_layers", 32)
    attention = k.flag("attention_bias", False)
    return llama_style(k, name, dict(vocab_size=151936, intermediate_size=22016, num_key_value_heads=32, head_dim=128,
                                     max_position_embeddings=32768), qkv_bias=attention, bias=attention, mlp_bias=False,
                       qk_norm="head", **_qwen_window(k, depth))


GEMMA = dict(vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28,
             num_attention_heads=16, num_key_value_heads=16, head_dim=256, hidden_act="gelu_pytorch_tanh",
             max_position_embeddings=8192, tie_word_embeddings=True)


def gemma(k: Keys, name: str) -> Architecture:
    """Gemma: GeGLU, head size 256, tied head; bidirectional with ``use_bidirectional_attention``."""
    k.known("hidden_activation")                # Gemma 1 reads hidden_act
    causal = not k.flag("use_bidirectional_attention", False, nullable=True)    # transformers' default: null
    return llama_style(k, name, GEMMA, causal=causal, **attention_biases(k))


def _gemma_window(k: Keys, depth: int, pattern: int) -> dict:
    """Gemma 2 and 3: ``sliding_window`` on every layer but each ``pattern``-th (``layer_types``)."""
    k.refuse_if("use_bidirectional_attention", bool, "a bidirectional window", None)
    k.known("query_pre_attn_scalar", "cache_implementation", "hidden_act", "rope_local_base_freq")
    window = k.int("sliding_window", 4096, nullable=True)
    return window_fields(k, depth, window, lambda i: (i + 1) % pattern != 0)


def gemma2(k: Keys, name: str) -> Architecture:
    """Gemma 2: four norms a layer, alternating sliding-window and global layers, ``tanh`` caps
    on the attention scores (``attn_logit_softcapping``) and the logits."""
    depth = k.int("num_hidden_layers", 26)
    caps = dict(softcap=k.number("attn_logit_softcapping", 50.0, nullable=True) is not None,
                logit_softcap=k.number("final_logit_softcapping", 30.0, nullable=True) is not None)
    defaults = dict(GEMMA, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
                    num_key_value_heads=4)
    return llama_style(k, name, defaults, act_key="hidden_activation", norms=4, **caps, **attention_biases(k),
                       **_gemma_window(k, depth, 2))


def gemma3_text(k: Keys, name: str) -> Architecture:
    """Gemma 3 (text): Gemma 2 with per-head q/k norms, a global layer every
    ``sliding_window_pattern`` (6) layers, no caps by default."""
    depth = k.int("num_hidden_layers", 26)
    pattern = k.int("sliding_window_pattern", k.int("_sliding_window_pattern", 6))
    caps = dict(softcap=k.number("attn_logit_softcapping", None, nullable=True) is not None,
                logit_softcap=k.number("final_logit_softcapping", None, nullable=True) is not None)
    defaults = dict(GEMMA, vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                    num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=131072)
    return llama_style(k, name, defaults, act_key="hidden_activation", norms=4, qk_norm="head", **caps,
                       **attention_biases(k), **_gemma_window(k, depth, pattern))


def phi3(k: Keys, name: str) -> Architecture:
    """Phi-3: fused ``qkv_proj`` and ``gate_up_proj`` without biases, rotary on
    ``partial_rotary_factor`` of each head, ``sliding_window`` on every layer when set and shorter
    than the context: Phi-3-128K's and Phi-4-mini's 262,144 over 131,072 positions masks no key of
    any sequence the model takes, so it is no window (context parallelism then runs as without one)."""
    k.refuse_if("attention_bias", bool, "Phi-3's projections have no bias", False)
    k.known("original_max_position_embeddings")
    depth = k.int("num_hidden_layers", 32)
    window = k.int("sliding_window", None, nullable=True)
    if window and window >= k.int("max_position_embeddings", 4096):
        window = None
    fields = dict(window=window, windowed_layers=depth) if window else {}
    dropouts = k.dropout_fields([("resid_pdrop", 0)], [("attention_dropout", 0)], [("embd_pdrop", 0)])
    return llama_style(k, name, dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, max_position_embeddings=4096,
                                     rotary_keys=("partial_rotary_factor",)),
                       qkv_bias=False, bias=False, **dropouts, **fields)


def olmo(k: Keys, name: str) -> Architecture:
    """OLMo: LayerNorm without parameters, ``attention_bias`` on q, k, v, o, and ``clip_qkv``
    (an element-wise clamp of Q, K, V)."""
    clip = k.number("clip_qkv", None, nullable=True) is not None
    return llama_style(k, name, dict(vocab_size=50304), norm="layer_noaffine", clip_qkv=clip, **attention_biases(k))


def olmo2(k: Keys, name: str) -> Architecture:
    """OLMo 2: RMS norms of the whole Q and K projections (``q_norm``, ``k_norm``), and each
    sublayer's output normalised before the residual add instead of its input.  That moves
    the two norms of a layer but not their shapes: each runs on ``(b, l/s1, e)`` and keeps
    one such tensor, so the layer costs what a pre-norm layer with the same norms costs."""
    return llama_style(k, name, dict(vocab_size=50304), qk_norm="projection", **attention_biases(k))


def olmo3(k: Keys, name: str) -> Architecture:
    """OLMo 3: OLMo 2 with ``sliding_window`` (4096) on three layers of every four
    (``layer_types``)."""
    depth = k.int("num_hidden_layers", 32)
    window = k.int("sliding_window", 4096, nullable=True)
    return llama_style(k, name, dict(vocab_size=50304), qk_norm="projection", **attention_biases(k),
                       **window_fields(k, depth, window, lambda i: (i + 1) % 4 != 0))


def seed_oss(k: Keys, name: str) -> Architecture:
    """Seed-OSS: biases on q, k, v (``attention_bias``) and on o apart (``attention_out_bias``),
    ``head_dim`` 128, and dropouts that its config class turns on: ``residual_dropout`` after
    the output projection and the MLP, ``attention_dropout`` on the probabilities."""
    k.known("pretraining_tp")
    dropouts = k.dropout_fields([("residual_dropout", 0.1)], [("attention_dropout", 0.1)])
    return llama_style(k, name, dict(vocab_size=155136, intermediate_size=27648, num_hidden_layers=64, num_attention_heads=80,
                                     num_key_value_heads=8, head_dim=128, max_position_embeddings=524288),
                       qkv_bias=k.flag("attention_bias", True), bias=k.flag("attention_out_bias", False),
                       mlp_bias=k.flag("mlp_bias", False), **dropouts)


def ernie4_5(k: Keys, name: str) -> Architecture:
    """ERNIE 4.5 (dense): ``use_bias`` on every projection of attention and MLP, ``head_dim``
    128, a tied head by default."""
    bias = k.flag("use_bias", False)
    return llama_style(k, name, dict(vocab_size=103424, hidden_size=1024, intermediate_size=3072, num_hidden_layers=18,
                                     num_attention_heads=16, num_key_value_heads=2, head_dim=128,
                                     max_position_embeddings=131072, tie_word_embeddings=True),
                       qkv_bias=bias, bias=bias, mlp_bias=bias)


def _all_but_every(k: Keys, window):
    """The config classes' default sliding layers (EXAONE 4, Cohere 2): all but every
    ``sliding_window_pattern``-th (4).  Without ``layer_types`` the pattern must be a positive
    integer (the classes compute ``(i + 1) % pattern``); a text such as ``"LLLG"`` needs them."""
    period = k.raw("sliding_window_pattern", 4, True)
    if window is None or k.raw("layer_types", None, True) is not None:
        return lambda i: False                       # no window, or the layers are listed
    if not (type(period) is int and period > 0):
        raise k.error(f"sliding_window_pattern must be a positive integer without layer_types, got {period!r}")
    return lambda i: (i + 1) % period != 0


def exaone4(k: Keys, name: str) -> Architecture:
    """EXAONE 4: OLMo 2's norms of each sublayer's output with per-head q/k RMS norms; with a
    ``sliding_window``, windows on the layers ``layer_types`` names (the config class: all but
    every ``sliding_window_pattern``-th) and no rotary positions on the others (global NoPE)."""
    depth = k.int("num_hidden_layers", 32)
    window = k.int("sliding_window", 4096, nullable=True)
    windows = window_fields(k, depth, window, _all_but_every(k, window))
    return llama_style(k, name, dict(vocab_size=102400, intermediate_size=16384, num_key_value_heads=32), qkv_bias=False,
                       bias=False, mlp_bias=False, qk_norm="head", rope_pattern=windows.get("window_pattern"), **windows)


def smollm3(k: Keys, name: str) -> Architecture:
    """SmolLM3: Llama without rotary positions on every ``no_rope_layer_interval``-th layer
    (``no_rope_layers``: 1 where a layer rotates, 0 where it does not); with
    ``use_sliding_window``, windows on the layers ``layer_types`` names (by default those
    without rotary positions).  ``max_window_layers`` and ``pretraining_tp`` in published
    configs are not read by its model code."""
    k.known("max_window_layers", "pretraining_tp")
    depth = k.int("num_hidden_layers", 36)
    rotates = rotating_layers(k, depth)
    window = k.int("sliding_window", None, nullable=True) if k.flag("use_sliding_window", False) else None
    if window is None:
        k.known("sliding_window", "layer_types")       # the model code ignores them without use_sliding_window
    windows = window_fields(k, depth, window, lambda i: not rotates[i])
    return llama_style(k, name, dict(vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                                     num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=32768,
                                     tie_word_embeddings=True),
                       **{**attention_biases(k), "mlp_bias": k.flag("mlp_bias", False)},
                       rope_pattern=None if all(rotates) else rotates, **windows)


COHERE = dict(vocab_size=256000, hidden_size=8192, intermediate_size=22528, num_hidden_layers=40,
              num_attention_heads=64, max_position_embeddings=8192, tie_word_embeddings=True)


def cohere(k: Keys, name: str) -> Architecture:
    """Command R (Cohere): attention and MLP in parallel on one LayerNorm without bias,
    ``attention_bias`` on q, k, v, o, a tied head scaled by ``logit_scale`` (element-wise, not
    counted); with ``use_qk_norm`` (Command R+) a LayerNorm of each query and key head with
    weights for every head."""
    k.known("logit_scale", "layer_norm_eps")
    qk_norm = "head_each" if k.flag("use_qk_norm", False) else None
    return llama_style(k, name, COHERE, norm="layer_nobias", parallel=True, norms=1, qk_norm=qk_norm,
                       **attention_biases(k))


def cohere2(k: Keys, name: str) -> Architecture:
    """Command R7B / Command A (Cohere 2): Command R's parallel layer, ``sliding_window`` on the
    layers ``layer_types`` names (by default three of every four) and rotary positions on
    those only (none without a window)."""
    k.known("logit_scale", "layer_norm_eps")
    depth = k.int("num_hidden_layers", 40)
    window = k.int("sliding_window", 4096, nullable=True)
    windows = window_fields(k, depth, window, _all_but_every(k, window))
    rope = windows.get("window_pattern")
    return llama_style(k, name, dict(COHERE, rotary=bool(windows)), norm="layer_nobias", parallel=True, norms=1,
                       **attention_biases(k), rope_pattern=rope, **windows)


def nemotron(k: Keys, name: str) -> Architecture:
    """Nemotron-4 and its pruned Minitron models (NVIDIA, trained with Megatron-LM): LayerNorm with
    a bias (``NemotronLayerNorm1P`` stores its gain less one: the same parameters), an ungated MLP
    with ReLU² (``relu2``), rotary positions on ``partial_rotary_factor`` (half) of each head,
    ``attention_bias`` and ``mlp_bias`` (off), an untied head; ``NemotronConfig``'s defaults."""
    k.known("norm_eps")
    return llama_style(k, name, dict(vocab_size=256000, hidden_size=6144, intermediate_size=24576,
                                     num_attention_heads=48, hidden_act="relu2", max_position_embeddings=4096,
                                     gated=False, rotary_keys=("partial_rotary_factor",),
                                     rotary_share=Fraction(1, 2)),
                       norm="layer", **{**attention_biases(k), "mlp_bias": k.flag("mlp_bias", False)})


def arcee(k: Keys, name: str) -> Architecture:
    """Arcee (AFM): an ungated MLP (``up_proj``, ``down_proj``) with ReLU² (``relu2``), counted
    one FLOP an element as every activation; ``attention_bias``, ``mlp_bias``."""
    return llama_style(k, name, dict(hidden_size=2560, intermediate_size=18432, hidden_act="relu2",
                                     max_position_embeddings=4096, gated=False),
                       **{**attention_biases(k), "mlp_bias": k.flag("mlp_bias", False)})


FAMILIES = {"llama": llama, "mistral": mistral, "qwen2": qwen2, "qwen3": qwen3, "gemma": gemma, "gemma2": gemma2,
            "gemma3_text": gemma3_text, "phi3": phi3, "olmo": olmo, "olmo2": olmo2, "olmo3": olmo3,
            "granite": granite, "seed_oss": seed_oss, "ernie4_5": ernie4_5, "exaone4": exaone4, "smollm3": smollm3,
            "arcee": arcee, "cohere": cohere, "cohere2": cohere2, "nemotron": nemotron}
