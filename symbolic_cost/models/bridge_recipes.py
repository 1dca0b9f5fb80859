"""Megatron-Bridge's published recipes by name (``--megatron-bridge-recipe NAME``).

Megatron-Bridge ships its training setups as Python functions (``llama31_405b_pretrain_config``,
``llama3_70b_pretrain_64gpu_gb200_fp8cs_config``, ...), and its YAML files only override one of them.
``bridge_recipes.json`` holds each function's ``ConfigContainer`` as data: the Hugging Face model it
builds, the fields of its cost sections, the GPUs and system its name states, and the statements it
could not evaluate (``skipped``), with the repository and commit it was read from
(``models.bridge_recipes_extract`` wrote it, reading the source without running it).

``recipe_setup`` builds the ``Setup`` of a recipe: its sections, deep-merged with the overrides of a
YAML given with ``--nemo-recipe`` (as Megatron-Bridge's ``--config-file`` applies one), read by
``models.megatron_bridge.container_setup`` like a dumped configuration, on the model the recipe names
(or the one given beside it).

>>> r = recipe("llama3_70b_pretrain_64gpu_gb200_fp8cs_config")
>>> r["hf_model"], r["devices"], r["system"]
('meta-llama/Meta-Llama-3-70B', 64, 'gb200')
>>> r["config"]["model"]["cpu_offloading_num_layers"]
40
"""

from __future__ import annotations

import difflib
import json
from dataclasses import replace
from functools import cache
from pathlib import Path

from symbolic_cost.checks import InputError, InputTypeError, given_counts, instance, shown
from symbolic_cost.models.architecture import MADE_BY, Architecture
from symbolic_cost.models.megatron_args import Setup
from symbolic_cost.models.megatron_bridge import container_setup
from symbolic_cost.models.megatron_bridge_keys import Container

DATA = Path(__file__).with_name("bridge_recipes.json")
FLAG = "--megatron-bridge-recipe"


@cache
def _data() -> dict:
    return json.loads(DATA.read_text())


def source() -> dict:
    """Where the recipes were read: ``{"repo", "commit", "folders", "written_by"}``."""
    return _data()["source"]


def names() -> list:
    """Every recipe's name (function names and the aliases Megatron-Bridge exports)."""
    return list(_data()["recipes"])


def recipe(name: str) -> dict:
    """The recipe ``name``: ``function``, ``module``, ``hf_model``, ``hf_revision``, ``devices``,
    ``system``, ``config`` (its cost sections) and ``skipped``; an unknown name is refused with the
    closest known ones."""
    recipes = _data()["recipes"]
    if not isinstance(name, str):
        raise InputTypeError(f"{FLAG} takes a recipe's name (a str), got {shown(name)}", FLAG)
    if name not in recipes:
        close = difflib.get_close_matches(name, recipes, n=3, cutoff=0.6)
        hint = f"; closest: {', '.join(close)}" if close else \
            f" ({len(recipes)} are known, named in symbolic_cost/models/{DATA.name})"
        raise InputError(f"{FLAG} {name!r}: not a recipe of Megatron-Bridge {source()['commit'][:9]}{hint}", FLAG)
    return recipes[name]


def merged(base: dict, overrides: dict, where: str = "") -> dict:
    """``base`` with ``overrides`` written over it, mapping into mapping (Megatron-Bridge's YAML
    overrides: a key given replaces the recipe's, a section given adds to it); a section of ``base``
    is overridden by a mapping only (``where``: the dotted path of ``base``, for the refusal).

    >>> merged({"model": {"a": 1, "b": 2}}, {"model": {"b": 3}, "train": {"c": 4}})
    {'model': {'a': 1, 'b': 3}, 'train': {'c': 4}}
    """
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(out.get(key), dict) and not isinstance(value, dict):   # dict("x") ended in a ValueError
            raise InputError(f"{FLAG}: the override of {_path(where, key)} must be a mapping, as the recipe's section "
                             f"is (a key given replaces the recipe's, a section adds to it), got {shown(value)}",
                             _path(where, key))
        out[key] = merged(out[key], value, _path(where, key)) if isinstance(value, dict) \
            and isinstance(out.get(key), dict) else value
    return out


def _path(where: str, key) -> str:
    return f"{where}.{key}" if where else str(key)


SHAPE_KEYS = ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "num_query_groups", "kv_channels",
              "vocab_size", "activation_func", "gated_linear_unit", "normalization", "add_bias_linear", "add_qkv_bias",
              "qk_layernorm", "share_embeddings_and_output_weights", "position_embedding_type", "rotary_percent",
              "hidden_dropout", "attention_dropout")
"""The ``model`` keys ``megatron_bridge.architecture`` builds a model of: a recipe's model is the Hugging Face
model it names (or ``--hf-config``), so an override of one of them, which Megatron-Bridge applies to its model
provider, would be ignored here (``num_layers: 5`` printed the 32 layers of Llama 3 8B)."""


def check_overrides(overrides) -> dict:
    """``overrides`` (a recipe's override YAML, read) checked: a mapping (or ``None``: none), whose
    ``model`` section sets none of ``SHAPE_KEYS``."""
    if overrides is None:
        return {}
    instance(overrides, dict, "overrides", " of sections (the override YAML, read)")
    shaped = sorted(set(SHAPE_KEYS) & set(overrides.get("model") or {})) \
        if isinstance(overrides.get("model"), dict) else []
    if shaped:
        raise InputError(f"{FLAG}: the override sets model.{shaped[0]}, which shapes the model; the recipe's model is "
                         f"the Hugging Face model it names, read from its config.json, so the override would be "
                         f"ignored: give the model you mean with --hf-config instead", f"model.{shaped[0]}")
    return overrides


def recipe_setup(name: str, arch: Architecture, world: int | None = None, overrides: dict | None = None,
                 model_given: str | None = None) -> Setup:
    """The ``Setup`` of recipe ``name`` on ``world`` processes (the recipe's own GPU count when
    ``None``) for ``arch``: the recipe's model, or the one ``model_given`` names (noted)."""
    world, arch = given_counts(world=world)[0], instance(arch, Architecture, "arch", MADE_BY)
    r = recipe(name)
    where = f"{r['module']}.{r['function']} of {source()['repo']} {source()['commit'][:9]}"
    notes = [f"{FLAG} {name}: {where}; model {r['hf_model']}"
             + (f", built here from {model_given}" if model_given else "")]
    if world is None:
        if r["devices"] is None:
            raise InputError(f"{FLAG} {name} does not say how many GPUs run it; give --devices", "--devices")
        world = r["devices"]
    elif r["devices"] is not None and world != r["devices"]:
        notes.append(f"--devices {world} replaces the recipe's {r['devices']} GPUs")
    if r["system"]:
        notes.append(f"the recipe is tuned for {r['system']} (--system chooses the GPU the time is for)")
    if r["skipped"]:
        notes.append(f"the recipe has {len(r['skipped'])} statement(s) that set values at run time, not read "
                     f"(conditions on other fields): see bridge_recipes.json")
    config = merged(r["config"], check_overrides(overrides))
    model = dict(config.get("model") or {})
    _layout_built_at_run_time(r, model, name, notes)
    arch = vocabulary(arch, config.get("tokenizer") or {}, model, notes)
    mtp = model.pop("mtp_num_layers", None)
    trains_mtp = _multi_token_prediction(mtp, arch, name)
    found = container_setup(Container(dict(config, model=model), name, experts=arch.moe is not None), arch, world,
                            notes, etp_default=1)
    if arch.moe is not None and "expert_tensor_parallel_size" not in model:
        found.notes.append("expert_tensor_parallel_size not set by the recipe: 1, as Megatron-Bridge's MoE model "
                           "providers set it")
    if not trains_mtp:
        found.policy["mtp"] = False
        found.notes.append(f"the recipe sets no mtp_num_layers: the model's {arch.mtp_layers} multi-token-prediction "
                           f"layer(s) are not trained")
    return found


def vocabulary(arch: Architecture, tokenizer: dict, model: dict, notes: list) -> Architecture:
    """The model's vocabulary as Megatron-Bridge sets it up (``training.setup``'s
    ``_validate_and_set_vocab_size``): with ``tokenizer.use_tokenizer_vocab_size`` (the recipes that
    pretrain from scratch on mock data) the tokenizer's, padded to ``make_vocab_size_divisible_by`` x
    TP (a ``NullTokenizer`` of ``vocab_size`` V holds V + 1 ids: Megatron-Core's adds its end-of-document
    id); otherwise the model's own, unpadded (a model vocabulary at least the tokenizer's is kept as it
    is, and padding turned off).

    >>> from symbolic_cost.models.config import preset
    >>> arch = vocabulary(preset("llama-2-7b"), {"tokenizer_type": "NullTokenizer", "vocab_size": 32000,
    ...                   "use_tokenizer_vocab_size": True}, {}, [])
    >>> arch.vocab, arch.padded_vocab(m1=2)
    (32001, 32256)
    """
    if not tokenizer.get("use_tokenizer_vocab_size") or tokenizer.get("vocab_size") is None:
        return replace(arch, vocab_multiple=1)
    size = tokenizer["vocab_size"] + (tokenizer.get("tokenizer_type") == "NullTokenizer")
    multiple = model.get("make_vocab_size_divisible_by") or 128
    notes.append(f"the recipe's tokenizer sets the vocabulary: {size} ids (tokenizer.vocab_size "
                 f"{tokenizer['vocab_size']}{' + the NullTokenizer end-of-document id' if size > tokenizer['vocab_size'] else ''}), "
                 f"padded to a multiple of {multiple} x TP, in place of the model's {arch.vocab}")
    return replace(arch, vocab=size, vocab_multiple=multiple)


DEEPSEEK_V3_LAYOUTS = {(4, 1): "Et*16|t*16|t*16|t*13mL", (8, 1): "Et*8|(t*8|)*6t*5mL", (4, 2): "Et*8|(t*8|)*6t*5mL",
                       (16, 1): "Et*4|(t*4|)*14tmL", (8, 2): "Et*4|(t*4|)*14tmL", (4, 4): "Et*4|(t*4|)*14tmL",
                       (2, 8): "Et*4|(t*4|)*14tmL"}
"""DeepSeek-V3's pipeline layouts by ``(pp, vp)`` (Megatron-LM's layout strings), as Megatron-Bridge
places its 61 layers and one MTP module: ``layout_map`` of ``_get_deepseek_v3_pipeline_layout``
(``src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py`` at 067f987), and the GB300 preset's
``pp_layout`` of ``scripts/performance/configs/deepseek/deepseek_workload_base_configs.py`` for
(2, 8)."""

LAYOUT_BUILDERS = {"_get_deepseek_v3_pipeline_layout": DEEPSEEK_V3_LAYOUTS}
"""Functions a recipe names to build its pipeline layout at run time, by their layouts."""


def _layout_built_at_run_time(r: dict, model: dict, name: str, notes: list) -> None:
    """A recipe whose pipeline layout a function builds at run time (a ``skipped`` statement setting
    ``_pipeline_model_parallel_layout_builder``, DeepSeek-V3's ``_get_deepseek_v3_pipeline_layout``)
    where no layout is given: the function's layout for the recipe's ``(pp, vp)`` (``LAYOUT_BUILDERS``,
    noted); refused for another function, or a ``(pp, vp)`` it has none for (Megatron-Bridge then
    leaves the layout unset, and Megatron-Core's even split of 61 layers fails)."""
    built = [line for line in r["skipped"] if "pipeline_model_parallel_layout" in line.split("=")[0]]
    pp, vp = model.get("pipeline_model_parallel_size") or 1, model.get("virtual_pipeline_model_parallel_size") or 1
    if not built or pp == 1 or model.get("pipeline_model_parallel_layout") is not None:
        return
    builder = built[0].split("=", 1)[1].split("(")[0].strip()
    layout = LAYOUT_BUILDERS.get(builder, {}).get((pp, vp))
    if layout is None:
        raise InputError(f"{FLAG} {name} builds its pipeline layout at run time ({builder}), and the reader holds "
                         f"none of it for PP {pp} x VP {vp}; give model.pipeline_model_parallel_layout in a "
                         f"--nemo-recipe YAML beside it", FLAG)
    model["pipeline_model_parallel_layout"] = layout
    notes.append(f"pipeline layout {layout}: {builder}'s for PP {pp} x VP {vp} (the recipe builds it at run time)")


def _multi_token_prediction(layers, arch: Architecture, name: str) -> bool:
    """Whether the recipe trains the model's multi-token-prediction layers: ``model.mtp_num_layers``
    must be the model's count (the provider builds that many) or unset (none trained)."""
    if layers in (None, 0):
        return not arch.mtp_layers
    if layers != arch.mtp_layers:
        raise InputError(f"{FLAG} {name}: model.mtp_num_layers {layers}, but the model has {arch.mtp_layers} "
                         f"multi-token-prediction layer(s)", "model.mtp_num_layers")
    return True
