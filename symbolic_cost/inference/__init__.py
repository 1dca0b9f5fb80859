"""Inference: prefill and decode as costs, the KV cache, and serving time and throughput, as formulas.

``serving`` says how a model is served (``Serving``: batch, prompt and output lengths, degrees,
number formats, paging) and counts the tokens of generation; ``kv_cache`` holds the cache as
expressions (per token, per sequence, for the batch; its formats; paged allocation);
``phases`` builds the prefill and a decode step from the library's blocks; ``throughput`` turns
them into roofline time, time to first token, time per output token, tokens per second, memory
per device, the largest batch that fits and the batch where decode turns compute-bound;
``peak`` follows a generation through its moments (prefill, sampling, the last decode step) to
the bytes a device holds at the worst of them, which decides the largest batch.
"""

from symbolic_cost.inference.kv_cache import (KV_FORMATS, CacheGroup, KVFormat, cache_groups, kv_bytes_per_token,
                                              kv_cache_bytes, kv_format, paging_waste)
from symbolic_cost.inference.phases import Phase, decode, evaluation, prefill
from symbolic_cost.inference.serving import Serving, final_tokens, mean_context

__all__ = ["KV_FORMATS", "KVFormat", "CacheGroup", "cache_groups", "kv_cache_bytes", "kv_bytes_per_token",
           "kv_format", "paging_waste", "Phase", "prefill", "decode", "evaluation", "Serving", "final_tokens",
           "mean_context"]
