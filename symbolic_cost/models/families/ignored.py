"""Keys that published ``config.json`` files carry and their own ``transformers`` class never reads.

Checkpoints are exported by other tools (nanotron, the original training code, Transformers.js) that
leave their own keys behind.  A key listed here is read by no module of the family's ``transformers``
classes (configuration and modeling, 5.23): the model ``transformers`` builds is the same with or
without it, so it changes no cost.  Such a key is accepted, and the output says so in a note
(``notes``); every other key a family does not read is still refused by name (``keys.Keys.done``).

``IGNORED[family]`` maps each key to the reason; ``IGNORED["*"]`` holds keys of every family.
``tests/test_published_configs.py`` checks each entry against ``transformers`` itself: the key is
absent from the family's configuration and modeling source, and the model built with it has the
parameters of the model built without it.
"""

from __future__ import annotations

import json

IGNORED: dict[str, dict[str, str]] = {
    "*": {
        "transformers.js_config": "settings of Transformers.js, the JavaScript library; no module of "
                                  "transformers reads it",
    },
    "gemma2": {
        "sliding_window_size": "read by no module of transformers' Gemma2 classes; sliding_window sets the window",
    },
    "llama": {
        "is_llama_config": "nanotron's export marker, read by no module of transformers' Llama classes",
        "rope_interleaved": "nanotron's rotary layout, read by no module of transformers' Llama classes",
    },
    "nemotron": {
        "kv_channels": "Megatron-LM's name of the head size, left by NeMo's export; read by no module of "
                       "transformers' Nemotron classes (head_dim, else hidden_size / num_attention_heads, sets it)",
    },
    "phi3": {
        "full_attn_mod": "read by no module of transformers' Phi3 classes",
        "interpolate_factor": "read by no module of transformers' Phi3 classes",
        "lm_head_bias": "read by no module of transformers' Phi3 classes; their LM head has no bias",
        "mlp_bias": "read by no module of transformers' Phi3 classes; their MLP has no bias",
    },
    "qwen3_moe": {
        "qkv_bias": "read by no module of transformers' Qwen3Moe classes; attention_bias sets the projections' biases",
        "shared_expert_intermediate_size": "read by no module of transformers' Qwen3Moe classes; they have no "
                                           "shared expert",
        "use_qk_norm": "read by no module of transformers' Qwen3Moe classes; every layer has its query and key "
                       "norms",
    },
}
"""Keys accepted without effect, per ``model_type``, with the reason (see the module docstring)."""


def ignored(family: str, key: str) -> str | None:
    """Why ``key`` changes no cost of ``family`` (``None``: it is not listed, and may)."""
    return IGNORED.get(family, {}).get(key) or IGNORED["*"].get(key)


def note(key: str, value, why: str) -> str:
    """The note a key accepted without effect leaves in the output (its value as JSON writes it)."""
    shown = {dict: "{...}", list: "[...]"}.get(type(value)) or json.dumps(value)
    return f"config.json: {key}={shown} accepted without effect: {why}"
