"""Hugging Face ``config.json`` files as ``Architecture`` values.

``from_config`` reads a parsed ``config.json`` with the reader of its ``model_type``
(``models.families``): gpt2, gpt_neox, gptj, opt, bloom, falcon, llama, mistral, qwen2, qwen3,
gemma, gemma2, gemma3_text, phi, phi3, olmo, olmo2, olmo3, granite, seed_oss, ernie4_5,
exaone4, smollm3, arcee, cohere, cohere2, starcoder2, bert, roberta, t5, mixtral, qwen2_moe,
qwen3_moe, olmoe, gpt_oss, glm4_moe, granitemoe, granitemoeshared, llama4_text, phimoe,
minimax_m2, deepseek_v2, deepseek_v3.

* A missing key takes the default of that type's ``transformers`` config class (5.23).
* Every key is read, or declared not to change the cost (token ids, initialisation, output
  switches, rope frequencies, ...), or is a key the family's ``transformers`` classes never read
  (``families.ignored``: accepted, with a note in ``Architecture.notes``); any other key is
  refused, naming it.  Dropout probabilities
  are read: any nonzero one counts the model's dropouts.
* A value of the wrong type (``"false"`` for a boolean, ``1`` for ``true``, ``true`` for a
  size) is refused, naming the key.
* ``architectures`` picks the head: the LM head (decoders), the base model (``...Model``; BERT
  and RoBERTa with the pooler, also without ``architectures``), a masked-LM or pre-training
  head, or a sequence classifier (``id2label`` gives the classes).
"""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from pathlib import Path

from symbolic_cost.checks import InputError, InputTypeError, file_text, repeated_keys, shown
from symbolic_cost.files import input_file
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.families import FAMILIES, Keys

MULTIMODAL = {"llama4": "llama4_text", "gemma3": "gemma3_text", "mistral3": "mistral"}
"""Multimodal ``model_type``s and the family of their language model (their ``text_config``), where
the ``text_config`` the file publishes does not name it.  Any config with a ``text_config`` and a
``vision_config`` object is multimodal too (LLaVA and its kin), its language model named by its
``text_config``'s own ``model_type``."""

PRESETS = ("gpt2", "gpt3-175b", "bert-base-uncased", "llama-2-7b", "mistral-7b", "llama-3-8b", "llama-3-70b")
"""The bundled models: each a published ``config.json`` (``models/configs``); the two Llama 3 ones are
Meta-Llama-3-8B's and -70B's (8,192 tokens of context, grouped-query attention with 8 KV heads)."""


def _refuse_multimodal(config: dict, family) -> None:
    """Refuse a multimodal model's config by name, pointing to its language model: the library
    costs a language model, and a vision tower is not one."""
    text = config.get("text_config")
    if not (isinstance(family, str) and family in MULTIMODAL or isinstance(text, dict)
            and isinstance(config.get("vision_config"), dict)):
        return
    inner = text.get("model_type") if isinstance(text, dict) else None
    inner = inner if isinstance(inner, str) else MULTIMODAL.get(family)
    then = ("save that object as its own config.json (the vision tower is then not counted)"
            if inner in FAMILIES else "that family is not supported either")
    raise InputError(f"config.json: model_type {family!r} is a multimodal model; the language model is its "
                     f"text_config (model_type {inner!r}): {then}", "model_type")


def from_config(config: dict, name: str = "model") -> Architecture:
    """An ``Architecture`` from a parsed ``config.json``.

    >>> arch = from_config({"model_type": "mistral", "hidden_size": 5120, "head_dim": 128,
    ...                     "num_hidden_layers": 40, "vocab_size": 131072, "sliding_window": None})
    >>> arch.head_dim, arch.kv_heads, arch.window
    (128, 8, None)
    """
    if not isinstance(config, dict):
        raise InputTypeError(f"config.json must be a JSON object, got {type(config).__name__} "
                             f"{shown(config)}", "config.json")
    family = config.get("model_type")
    _refuse_multimodal(config, family)
    if not isinstance(family, str) or family not in FAMILIES:
        raise InputError(f"config.json: model_type {family!r} is not supported; "
                         f"supported: {', '.join(FAMILIES)}", "model_type")
    keys = Keys(config, family)
    if family != "t5":
        keys.refuse_if("is_encoder_decoder", lambda x: x is True, "an encoder-decoder of this family", False)
    arch = FAMILIES[family](keys, name)
    keys.done()
    return replace(arch, notes=tuple(keys.notes)) if keys.notes else arch


def _unique_keys(option: str, name: str, why: str):
    """A ``json.loads`` hook that builds each object, refusing a key named twice in it (``why``)."""
    def build(pairs):
        twice = sorted(repeated_keys(pairs))
        if twice:
            raise InputError(f"{option}: {name} names {', '.join(map(repr, twice))} twice in one object; {why}",
                             option)
        return dict(pairs)
    return build


DEEPSPEED_DUPLICATES = "DeepSpeed refuses duplicate keys"
"""Why a DeepSpeed config may not name a key twice (``dict_raise_error_on_duplicate_keys``)."""
CONFIG_DUPLICATES = "transformers would read the last, and which one the file meant is not known"
"""Why a ``config.json`` may not: plain JSON keeps the last value, silently."""


def read_json(text: str, name: str, option: str, what: str | None = None, unique: str = ""):
    """``text`` (the file ``name``, given with ``option``) read as JSON, refused by name when it
    is not JSON, is nested too deeply to read, or (given ``what``, the kind of file) is not an
    object; given ``unique`` (why), when an object names a key twice (plain JSON keeps the last).

    >>> read_json('{"zero_optimization": {"stage": 3}}', "ds.json", "--deepspeed", "a DeepSpeed config")
    {'zero_optimization': {'stage': 3}}
    >>> read_json('[1]', "ds.json", "--deepspeed", "a DeepSpeed config")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: --deepspeed: ds.json: a DeepSpeed config is a JSON object
    """
    text = file_text(text, option, name)
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys(option, name, unique) if unique else None)
    except InputError:          # a key named twice (an InputError is a ValueError too)
        raise
    except RecursionError:
        raise InputError(f"{option}: {name} is nested too deeply to be {what or 'a config.json'}", option) from None
    except json.JSONDecodeError as error:
        raise InputError(f"{option}: {name} is not valid JSON ({error.msg}, line {error.lineno})", option) from None
    except ValueError:      # beyond JSONDecodeError: an integer of more than 4,300 digits (sys.get_int_max_str_digits)
        raise InputError(f"{option}: {name} holds a number of more than 4,300 digits, which no size or count "
                         f"needs", option) from None
    if what is not None and not isinstance(value, dict):
        raise InputError(f"{option}: {name}: {what} is a JSON object", option)
    return value


def load(path) -> Architecture:
    """An ``Architecture`` from a ``config.json`` file (a regular file: ``files.input_file``)."""
    config = read_json(input_file(path, "--hf-config"), Path(path).name, "--hf-config", unique=CONFIG_DUPLICATES)
    return from_config(config, Path(path).stem)


def preset(name: str) -> Architecture:
    """A bundled model, one of ``PRESETS``.

    >>> preset("llama-3-8b").kv_heads
    8
    """
    return from_config(preset_config(name), name)


def preset_config(name: str) -> dict:
    """The bundled ``config.json`` of the preset ``name``."""
    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}", "preset")
    return json.loads(resources.files("symbolic_cost.models").joinpath("configs", f"{name}.json").read_text())


def config_type(config) -> str | None:
    """A ``config.json``'s ``model_type`` (the model's ``config.model_type``), ``None`` where it
    names none.

    >>> config_type({"model_type": "llama"}), config_type({"hidden_size": 8})
    ('llama', None)
    """
    family = config.get("model_type") if isinstance(config, dict) else None
    return family if isinstance(family, str) else None


UNCONVERTED = ("self_attn", "router", "embed_tokens", "lm_head")
"""What GPT-OSS's MXFP4 checkpoint leaves unconverted (``modules_to_not_convert``): with nothing
else left out, only the routed experts are MXFP4."""

HEADS = ("lm_head", "output")
"""Modules a quantised checkpoint may leave unconverted that ``inference.weight_formats`` keeps
in the precision anyway (the LM head)."""


def stored_weights(config) -> tuple[str | None, str | None]:
    """``(format, note)``: the ``inference.weight_formats`` format a ``config.json``'s
    ``quantization_config`` stores its weights in, as a serving engine loads them (``None``:
    unquantised, or a format not modelled, which ``note`` then says):

    * ``quant_method: fp8`` (E4M3): ``fp8-block`` with DeepSeek-V3's ``weight_block_size [128, 128]``
      (one fp32 scale a block), ``fp8`` with one scale a tensor;
    * ``quant_method: mxfp4`` converting all but attention, router, word table and head
      (GPT-OSS): ``mxfp4-experts``;
    * ``awq`` and ``gptq`` of 4 bits in groups of 128 (a scale and a packed zero point a group):
      ``int4``;
    * ``compressed-tensors`` (llm-compressor) of one group over every linear layer but the head:
      8-bit floats ``fp8`` (one scale a tensor; one a channel noted as not counted), 4-bit
      integers in groups of 128 ``int4`` (a symmetric group stores no zero point: noted), NVFP4
      (4-bit floats in groups of 16) ``nvfp4``;
    * ``modelopt`` (NVIDIA Model Optimizer) ``quant_algo`` FP8 or NVFP4: ``fp8``, ``nvfp4``;
    * ``bitsandbytes`` 4-bit (``load_in_4bit``, NF4 or its 4-bit float): ``nf4``, or ``nf4-double``
      with ``bnb_4bit_use_double_quant``.

    >>> stored_weights({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})
    ('fp8-block', None)
    >>> stored_weights({"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}})
    ('mxfp4-experts', None)
    >>> stored_weights({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}})
    ('int4', None)
    >>> stored_weights({"hidden_size": 8})
    (None, None)
    """
    section = config.get("quantization_config") if isinstance(config, dict) else None
    if section is None:
        return None, None
    method = section.get("quant_method") if isinstance(section, dict) else None
    method = method.lower() if isinstance(method, str) else method
    found = None
    if method == "fp8" and section.get("fmt", "e4m3") == "e4m3":
        blocks = section.get("weight_block_size")
        found = ("fp8", None) if blocks is None else ("fp8-block", None) if blocks == [128, 128] else None
    elif method == "mxfp4":
        left = section.get("modules_to_not_convert") or []
        if isinstance(left, list) and all(isinstance(m, str) and any(u in m for u in UNCONVERTED) for m in left):
            found = "mxfp4-experts", None
    elif method in ("awq", "gptq") and section.get("bits", section.get("w_bit")) == 4 \
            and section.get("group_size", section.get("q_group_size")) == 128:
        found = "int4", None
    elif method == "compressed-tensors":
        found = _compressed_tensors(section)
    elif method == "modelopt":
        found = {"FP8": ("fp8", None), "NVFP4": ("nvfp4", None)}.get(section.get("quant_algo"))
    elif method == "bitsandbytes":
        found = _bitsandbytes(section)
    return found or (None, f"config.json's quantization_config ({method!r}) is not a modelled weight format: the "
                           f"weights are counted in --precision (--weights chooses one)")


def _bitsandbytes(section: dict) -> tuple[str, str | None] | None:
    """``stored_weights`` of a bitsandbytes checkpoint: 4-bit (``load_in_4bit``) NF4 or 4-bit float
    in blocks of 64, its absmax double-quantised or not, the head at most left out
    (``llm_int8_skip_modules``); 8-bit (LLM.int8, whose products run in int8 beside 16-bit
    outlier columns) is not modelled."""
    left = section.get("llm_int8_skip_modules") or []
    if section.get("load_in_4bit") is not True or section.get("load_in_8bit") is True or not isinstance(left, list) \
            or not all(isinstance(m, str) and m.rsplit(".", 1)[-1] in HEADS for m in left):
        return None
    kind = section.get("bnb_4bit_quant_type", "fp4")      # BitsAndBytesConfig's default
    double = section.get("bnb_4bit_use_double_quant", False)
    if kind not in ("nf4", "fp4") or not isinstance(double, bool):
        return None
    return ("nf4-double" if double else "nf4"), None if kind == "nf4" else \
        "bitsandbytes' 4-bit float, stored as NF4 is: 4 bits and an absmax a block of 64"


def _compressed_tensors(section: dict) -> tuple[str, str | None] | None:
    """``stored_weights`` of an llm-compressor checkpoint: one group of every ``Linear``, the head
    left out at most."""
    groups = section.get("config_groups")
    ignored = section.get("ignore") or []
    if not isinstance(groups, dict) or len(groups) != 1 or not isinstance(ignored, list) \
            or not all(isinstance(m, str) and m.rsplit(".", 1)[-1] in HEADS for m in ignored):
        return None
    group = next(iter(groups.values()))
    weights = group.get("weights") if isinstance(group, dict) else None
    if not isinstance(weights, dict) or group.get("targets") != ["Linear"]:
        return None
    kind = (weights.get("num_bits"), weights.get("type"), weights.get("strategy"), weights.get("group_size"))
    if kind[:3] == (8, "float", "tensor"):
        return "fp8", None
    if kind[:3] == (8, "float", "channel"):
        return "fp8", "its fp32 scale per output channel (4 bytes a row) is not counted"
    if kind == (4, "int", "group", 128):
        return "int4", None if not weights.get("symmetric") else \
            "counted with a zero point per group of 128 (AWQ's packing): 1/256 byte an element more than its " \
            "symmetric groups store"
    if kind[:2] == (4, "float") and kind[3] == 16:
        return "nvfp4", None
    return None
