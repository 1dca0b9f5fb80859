"""The model families a ``config.json`` may name (``model_type``), one reader each.

=============== ===============================================================================
group           ``model_type``
=============== ===============================================================================
``decoders``    ``gpt2``, ``gpt_neox``, ``gptj``, ``opt``, ``bloom``, ``falcon``, ``phi``, ``starcoder2``
``llama``       ``llama``, ``mistral``, ``qwen2``, ``qwen3``, ``gemma``, ``gemma2``, ``gemma3_text``,
                ``phi3``, ``olmo``, ``olmo2``, ``olmo3``, ``granite``, ``seed_oss``, ``ernie4_5``,
                ``exaone4``, ``smollm3``, ``arcee``, ``cohere``, ``cohere2``, ``nemotron``
``encoders``    ``bert``, ``roberta``, ``t5``
``moe``         ``mixtral``, ``qwen2_moe``, ``qwen3_moe``, ``olmoe``, ``gpt_oss``, ``glm4_moe``,
                ``granitemoe``, ``granitemoeshared``, ``llama4_text``, ``phimoe``,
                ``minimax_m2``
``deepseek``    ``deepseek_v2``, ``deepseek_v3``
=============== ===============================================================================

A reader takes a ``keys.Keys`` and a name and returns an ``Architecture``; ``keys`` holds what
all of them share (typed values, the keys that never change the cost, the head that
``architectures`` names, sliding-window layer patterns), ``common`` what the Llama-style ones
share (``common.llama_style``: their sizes, heads and head).
"""

from symbolic_cost.models.families.decoders import FAMILIES as _DECODERS
from symbolic_cost.models.families.deepseek import FAMILIES as _DEEPSEEK
from symbolic_cost.models.families.encoders import FAMILIES as _ENCODERS
from symbolic_cost.models.families.keys import Keys
from symbolic_cost.models.families.llama import FAMILIES as _LLAMA
from symbolic_cost.models.families.moe import FAMILIES as _MOE

FAMILIES = {**_DECODERS, **_LLAMA, **_ENCODERS, **_MOE, **_DEEPSEEK}

__all__ = ["FAMILIES", "Keys"]
