"""DeepSeek's decoders with multi-head latent attention: ``deepseek_v2``, ``deepseek_v3``, as
``transformers`` 5.23 builds them.

* Experts: ``n_routed_experts`` of ``moe_intermediate_size``, ``num_experts_per_tok`` a token,
  ``n_shared_experts x moe_intermediate_size`` shared, from layer ``first_k_dense_replace`` on
  (the model code places one on every later layer, so a ``moe_layer_freq`` other than 1 is
  refused); the other layers are dense MLPs of ``intermediate_size``.
* Router: V2's softmax (its model code never renormalises; ``norm_topk_prob`` is not read),
  V3's sigmoid with the chosen weights renormalised when ``norm_topk_prob``; both scaled by
  ``routed_scaling_factor`` (when not 1).

Not counted (declared): the auxiliary balance loss, how experts are chosen (``topk_method``,
``n_group``, ``topk_group``: comparisons), the published expert-parallel size (``ep_size``: the
degree is the user's ``ep``); the published checkpoint's FP8 storage (``quantization_config``) is
noted as every family's is (``keys.STORED``).  DeepSeek-V3's
multi-token-prediction modules (``num_nextn_predict_layers``) are read into
``Architecture.mtp_layers``: training runs them (``blocks.mtp``), ``transformers`` builds none,
so its parameter count is the model's without them (``Training(mtp=False)``).
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.blocks.latent_attention import Latent
from symbolic_cost.blocks.moe import MoE
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.families.keys import Keys, gated_mlp, head_fields
from symbolic_cost.models.families.moe import AUX_LOSS, experts_per_token


DEEPSEEK_KNOWN = ("rms_norm_eps", "rope_theta", "pretraining_tp", "head_dim", "qk_head_dim", "topk_method", "n_group",
                  "topk_group", "ep_size", "rope_interleave") + AUX_LOSS


def _deepseek(k: Keys, name: str, defaults: dict, scoring: str, normalise: bool) -> Architecture:
    """The DeepSeek reading: sizes, latent attention, the MoE layers from ``first_k_dense_replace``."""
    k.known(*DEEPSEEK_KNOWN)
    k.refuse_if("moe_layer_freq", lambda x: x not in (None, 1), "transformers places an MoE layer on every "
                "layer from first_k_dense_replace", 1)
    k.refuse_if("scoring_func", lambda x: x not in (None, scoring), f"the model code scores with a {scoring}", None)
    e, h = k.int("hidden_size", defaults["hidden_size"]), k.int("num_attention_heads", defaults["num_attention_heads"])
    kv = k.int("num_key_value_heads", defaults.get("num_key_value_heads"), nullable=True)
    if kv not in (None, h):
        raise k.error(f"num_key_value_heads={kv} must equal num_attention_heads={h}: latent attention makes "
                      f"keys and values for every head")
    k.rotary_fraction(1)                                  # checks the rope keys (no partial rotary)
    latent = Latent(k.int("kv_lora_rank", 512), k.int("qk_rope_head_dim", 64), k.int("qk_nope_head_dim", 128),
                    k.int("v_head_dim", 128), k.int("q_lora_rank", 1536, nullable=True))
    scale = k.number("routed_scaling_factor", defaults["routed_scaling_factor"]) != 1
    expert_f = k.int("moe_intermediate_size", defaults["moe_intermediate_size"])
    moe = MoE(k.int("n_routed_experts", defaults["n_routed_experts"]), experts_per_token(k, defaults["num_experts_per_tok"]),
              expert_f, shared_f=k.int("n_shared_experts", defaults["n_shared_experts"], zero=True) * expert_f,
              router=scoring, normalise=normalise, scale=scale,
              first_dense=k.int("first_k_dense_replace", defaults["first_k_dense_replace"], zero=True))
    bias = k.flag("attention_bias", False)
    return Architecture(name, k.int("num_hidden_layers", defaults["num_hidden_layers"]), e, h,
                        k.int("intermediate_size", defaults["intermediate_size"]),
                        k.int("vocab_size", defaults["vocab_size"]), mlp=gated_mlp(k.activation("hidden_act", "silu")),
                        norm="rms", rotary=True, tied=k.flag("tie_word_embeddings", False), qkv_bias=bias, bias=bias,
                        mlp_bias=defaults.get("mlp_bias", False) and k.flag("mlp_bias", False),
                        context=k.int("max_position_embeddings", defaults["max_position_embeddings"]),
                        **k.dropout_fields(attention=[("attention_dropout", 0)]), moe=moe, latent=latent,
                        **head_fields(k))


def deepseek_v2(k: Keys, name: str) -> Architecture:
    """DeepSeek-V2: latent attention, a softmax router (top-k not renormalised by the model
    code; ``norm_topk_prob`` is not read), ``mlp_bias`` on the dense and shared MLPs."""
    k.known("norm_topk_prob")
    return _deepseek(k, name, dict(vocab_size=102400, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                                   num_attention_heads=32, max_position_embeddings=2048, moe_intermediate_size=1407,
                                   n_routed_experts=64, n_shared_experts=2, num_experts_per_tok=None,
                                   first_k_dense_replace=0, routed_scaling_factor=1.0, mlp_bias=True),
                     "softmax", normalise=False)


def deepseek_v3(k: Keys, name: str) -> Architecture:
    """DeepSeek-V3: latent attention, a sigmoid router with group-limited selection, the chosen
    weights renormalised (``norm_topk_prob``) and scaled, the first 3 layers dense by default."""
    k.known("num_mtp_layers")
    mtp = k.int("num_nextn_predict_layers", 0, zero=True)
    return replace(_deepseek(k, name, dict(vocab_size=129280, hidden_size=7168, intermediate_size=18432, num_hidden_layers=61,
                                   num_attention_heads=128, num_key_value_heads=128, max_position_embeddings=4096,
                                   moe_intermediate_size=2048, n_routed_experts=256, n_shared_experts=1,
                                   num_experts_per_tok=8, first_k_dense_replace=3, routed_scaling_factor=2.5),
                             "sigmoid", normalise=k.flag("norm_topk_prob", True)), mtp_layers=mtp)


FAMILIES = {"deepseek_v2": deepseek_v2, "deepseek_v3": deepseek_v3}
