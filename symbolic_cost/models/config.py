"""Hugging Face ``config.json`` files as ``Architecture`` values.

Families and the keys read (a missing key, or keys that contradict each
other, is a ``ValueError`` naming the key):

=============== ===================================================================
``gpt2``        ``n_embd``, ``n_head``, ``n_layer``, ``vocab_size``, ``n_positions``,
                ``n_inner`` (default ``4 n_embd``), ``activation_function``,
                ``tie_word_embeddings`` (default true)
``bert``        ``hidden_size``, ``num_attention_heads``, ``num_hidden_layers``,
                ``intermediate_size``, ``vocab_size``, ``max_position_embeddings``,
                ``type_vocab_size`` (default 2); the base model with its pooler
``llama``,      ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``
``mistral``     (default: heads), ``num_hidden_layers``, ``intermediate_size``,
                ``vocab_size``, ``hidden_act``, ``tie_word_embeddings`` (default false),
                ``attention_bias``/``mlp_bias`` (default false); RMS norm, rotary
=============== ===================================================================
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from symbolic_cost.models.architecture import Architecture

PRESETS = ("gpt2", "gpt3-175b", "bert-base-uncased", "llama-2-7b", "mistral-7b")


def _get(config: dict, key: str, family: str, default=...):
    value = config.get(key, default)
    if value is ... or (value is None and default is ...):
        raise ValueError(f"config.json ({family}): missing key {key!r}")
    if value is not None and key != "activation_function" and not isinstance(value, (bool, str)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"config.json ({family}): {key} must be a positive integer, got {value!r}")
    return value


def _heads(e, h, family, hidden_key, heads_key):
    if e % h:
        raise ValueError(f"config.json ({family}): {heads_key}={h} does not divide {hidden_key}={e}")


def _gpt2(c: dict, name: str) -> Architecture:
    e, h = _get(c, "n_embd", "gpt2"), _get(c, "n_head", "gpt2")
    _heads(e, h, "gpt2", "n_embd", "n_head")
    act = _get(c, "activation_function", "gpt2", "gelu_new")
    if not act.startswith("gelu"):
        raise ValueError(f"config.json (gpt2): activation_function {act!r} is not a GELU")
    return Architecture(name, _get(c, "n_layer", "gpt2"), e, h, _get(c, "n_inner", "gpt2", None) or 4 * e,
                        _get(c, "vocab_size", "gpt2"), positions=_get(c, "n_positions", "gpt2"),
                        tied=_get(c, "tie_word_embeddings", "gpt2", True),
                        context=_get(c, "n_positions", "gpt2"))


def _bert(c: dict, name: str) -> Architecture:
    e, h = _get(c, "hidden_size", "bert"), _get(c, "num_attention_heads", "bert")
    _heads(e, h, "bert", "hidden_size", "num_attention_heads")
    return Architecture(name, _get(c, "num_hidden_layers", "bert"), e, h, _get(c, "intermediate_size", "bert"),
                        _get(c, "vocab_size", "bert"), positions=_get(c, "max_position_embeddings", "bert"),
                        token_types=_get(c, "type_vocab_size", "bert", 2), causal=False,
                        embedding_norm=True, final_norm=False, lm_head=False, pooler=True, tied=False,
                        context=_get(c, "max_position_embeddings", "bert"))


def _llama(c: dict, name: str) -> Architecture:
    family = c.get("model_type", "llama")
    e, h = _get(c, "hidden_size", family), _get(c, "num_attention_heads", family)
    _heads(e, h, family, "hidden_size", "num_attention_heads")
    kv = _get(c, "num_key_value_heads", family, h)
    if h % kv:
        raise ValueError(f"config.json ({family}): num_key_value_heads={kv} does not divide "
                         f"num_attention_heads={h}")
    act = _get(c, "hidden_act", family, "silu")
    if act not in ("silu", "swish", "gelu", "gelu_pytorch_tanh"):
        raise ValueError(f"config.json ({family}): hidden_act {act!r} is not a SwiGLU or GeGLU gate")
    return Architecture(name, _get(c, "num_hidden_layers", family), e, h, _get(c, "intermediate_size", family),
                        _get(c, "vocab_size", family), kv_heads=kv,
                        mlp="swiglu" if act in ("silu", "swish") else "geglu", norm="rms", rotary=True,
                        tied=_get(c, "tie_word_embeddings", family, False),
                        qkv_bias=_get(c, "attention_bias", family, False),
                        bias=_get(c, "mlp_bias", family, False), dropouts=False,
                        context=_get(c, "max_position_embeddings", family, 0) or 0)


FAMILIES = {"gpt2": _gpt2, "bert": _bert, "llama": _llama, "mistral": _llama}


def from_config(config: dict, name: str = "model") -> Architecture:
    """An ``Architecture`` from a parsed ``config.json``."""
    family = config.get("model_type")
    if family not in FAMILIES:
        raise ValueError(f"config.json: model_type {family!r} is not supported; "
                         f"supported: {', '.join(FAMILIES)}")
    return FAMILIES[family](config, name)


def load(path) -> Architecture:
    """An ``Architecture`` from a ``config.json`` file."""
    path = Path(path)
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"--hf-config: no such file {str(path)!r}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"--hf-config: {path.name} is not valid JSON ({error.msg}, line {error.lineno})") from None
    return from_config(config, path.stem)


def preset(name: str) -> Architecture:
    """A bundled model: ``gpt2``, ``gpt3-175b``, ``bert-base-uncased``, ``llama-2-7b``, ``mistral-7b``."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    text = resources.files("symbolic_cost.models").joinpath("configs", f"{name}.json").read_text()
    return from_config(json.loads(text), name)
