"""Serving engines as named profiles: the defaults each engine starts with when a deployment
states none, as ``load.Runtime`` values for ``load.serve``.

Only limits and policies are named here (sequences in flight, tokens a step, the KV-cache pool
and its pages, chunked prefill), each read from the engine's own source at the release named.
The per-step, per-kernel and per-request overheads are not: they stay the fitted values of
``timing/calibration.json`` (``load.fit_serving``, on ``../shared/measured/``'s TensorRT-LLM load
tests) for every engine, so a difference between engines here is a difference of scheduling
and memory alone.

==========  ===========  ============  ==============================  ======  =======  =========
engine      sequences    tokens/step   KV-cache pool                   block   chunked  blocks
==========  ===========  ============  ==============================  ======  =======  =========
``trtllm``  2,048        8,192         0.9 of the memory left free     32      no       reserve
``vllm``    1,024 (256)  8,192 (2,048) 0.9 of the device's memory      16      yes      on demand
``sglang``  from memory  8,192         0.88 ... 0.79 of the device's   1       yes      estimate
==========  ===========  ============  ==============================  ======  =======  =========

(vLLM's smaller pair on a device under 70 GiB or an A100; SGLang's budget is 2,048 under 35 GiB
and 16,384 from 160 GiB, and its fraction falls with the tensor-parallel degree.  "blocks": a
request's whole length reserved at admission, or blocks as tokens come with preemption
(``load.Runtime.allocation``), or, SGLang's, slots as tokens come, a request admitted by an
estimate of the tokens the running ones will still write, prefill run before decode, and requests
retracted when it runs short (``inference.estimated``).)
"""

from __future__ import annotations

from dataclasses import fields as fields_of

from sympy import Rational

from symbolic_cost.checks import InputError, count
from symbolic_cost.inference.load import Runtime

GIB = 2**30


def trtllm(step, system: str, tensor: int, context: int) -> dict:
    """TensorRT-LLM since 0.14: ``trtllm-build``'s ``max_batch_size`` 2,048 (256 in 0.11 to 0.13;
    the 0.14 release notes) and ``max_num_tokens`` 8,192,
    ``KvCacheConfig``'s ``free_gpu_memory_fraction`` 0.9 of the memory free after the weights and
    ``tokens_per_block`` 32, ``enable_chunked_context`` off: the engine the overheads were fitted
    on, so ``load.Runtime``'s own defaults.

    >>> trtllm(None, "h100", 1, 8192)
    {}
    """
    return {}


def vllm(step, system: str, tensor: int, context: int) -> dict:
    """vLLM's V1 engine under ``vllm serve`` (``EngineArgs.get_batch_defaults``, the
    ``OPENAI_API_SERVER`` usage context): ``max_num_batched_tokens`` 8,192 and ``max_num_seqs``
    1,024 on a device of at least 70 GiB that is not an A100, else 2,048 and 256;
    ``gpu_memory_utilization`` 0.9 of the device's whole memory (the weights inside it);
    ``block_size`` 16; chunked prefill always on in V1; KV blocks on demand, a request preempted
    and recomputed when they run out (``inference.paged``).

    >>> vllm(None, "h100", 1, 8192)["max_batch"], vllm(None, "a100", 1, 8192)["max_tokens"]
    (1024, 2048)
    """
    large = _capacity(step, system) >= 70 * GIB and "a100" not in _name(system)
    return dict(max_batch=1024 if large else 256, max_tokens=8192 if large else 2048,
                memory_fraction=Rational(9, 10), memory_of="total", block_tokens=16, chunked=True,
                allocation="on-demand")


def sglang(step, system: str, tensor: int, context: int) -> dict:
    """SGLang 0.4 (``ServerArgs.__post_init__``, ``ModelRunner.init_memory_pool``):
    ``chunked_prefill_size`` 2,048 under 35 GiB of device memory, 8,192 under 160 GiB, else
    16,384; ``mem_fraction_static`` of the device's whole memory 0.88 at tensor degree 1, 0.87 at
    2, 0.85 at 4, 0.81 at 8 and 0.79 from 16; pages of one token; at most
    ``min(max(floor(pool tokens / context x 512), 2048), 4096)`` requests running (the request
    pool's size); chunked prefill on, prefill rounds before decode rounds; admission by the
    estimate of ``inference.estimated`` (``allocation="estimate"``).

    >>> sglang(None, "h100", 8, 8192)["memory_fraction"]
    81/100
    """
    tensor, context = count(tensor, "tensor"), count(context, "context")
    memory = _capacity(step, system)
    budget = 2048 if memory < 35 * GIB else 8192 if memory < 160 * GIB else 16384
    fraction = next(f for least, f in ((16, "0.79"), (8, "0.81"), (4, "0.85"), (2, "0.87"), (1, "0.88"))
                    if tensor >= least)
    fields = dict(max_tokens=budget, memory_fraction=Rational(fraction), memory_of="total", block_tokens=1,
                  chunked=True, allocation="estimate")
    if step is not None and hasattr(step, "cache_blocks"):
        tokens = step.cache_blocks(1, fields["memory_fraction"], "total")
        fields["max_batch"] = min(max(tokens * 512 // context, 2048), 4096)
    return fields


ENGINES = {"trtllm": trtllm, "vllm": vllm, "sglang": sglang}
"""The engines with named defaults (``runtime``)."""


def _name(system) -> str:
    """The name of ``system``, a preset's name or a ``System`` (``timing.systems.get_system``
    refuses anything else)."""
    from symbolic_cost.timing.hardware import get_system
    return get_system(system).name


def _capacity(step, system: str) -> int:
    """The device's memory in bytes: the step's calibrated system's (or, without a step, the
    named system's)."""
    if step is not None:
        return int(step.system.hbm_capacity)
    from symbolic_cost.timing.hardware import get_system
    return int(get_system(system).hbm_capacity)


def runtime(engine: str, step, system: str, tensor: int, context: int, **given) -> Runtime:
    """The ``Runtime`` of ``engine`` (one of ``ENGINES``) serving ``step`` (a ``load.StepModel``)
    on ``system`` at tensor-parallel degree ``tensor`` for a model of ``context`` tokens, with the
    fields in ``given`` (``None`` values left out) set over the engine's defaults.  ``system`` (a
    preset's name or a ``System``) is the step's own where a step is given: its name decides
    vLLM's limits, and another would be silently ignored beside the step's memory; a name in
    ``given`` that is no field of ``Runtime`` is refused.

    >>> runtime("vllm", None, "h100", 1, 8192, max_batch=64).max_batch
    64
    """
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}", "engine")
    settings = [field.name for field in fields_of(Runtime)]
    for name in given:
        if name not in settings:
            raise InputError(f"{name} is not a setting of an engine's Runtime (one of {', '.join(settings)})", name)
    named = _name(system)
    own = getattr(getattr(step, "system", None), "name", named)       # a step's calibrated system
    if own != named:
        raise InputError(f"system {named!r} is not the step's system ({own!r}): the engine's defaults are those of "
                         f"the device the step runs on", "system")
    fields = ENGINES[engine](step, system, count(tensor, "tensor"), count(context, "context"))
    fields.update({name: value for name, value in given.items() if value is not None})
    return Runtime(**fields)
