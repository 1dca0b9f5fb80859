"""Peak memory of serving: the bytes one device holds at the worst moment of a generation.

What a device keeps while serving is its weights and the KV cache; the peak adds the short-lived
tensors of one moment.  ``serving_timeline`` lists four moments, each on the busiest device:

==================== ==========================================================================
moment               live bytes
==================== ==========================================================================
``prefill``          weights + the cache of the ``P`` prompt tokens + the prefill's working set
                     (``Phase.working_bytes``: the hidden states ``b P e`` and the largest
                     operation's input and output; the whole prompt is one chunk, as
                     ``generate`` feeds it)
``prefill sampling`` weights + the prompt's cache + the first token's logits and their fp32
                     copy (``sampling_bytes``)
``decode``           weights + the cache at the end of generation (``P + l_out - 1`` tokens: the
                     last step's own key and value are stored before it attends) + the last
                     step's working set
``decode sampling``  weights + that cache + the step's logits, their fp32 copy and the previous
                     step's fp32 scores, not yet rebound
==================== ==========================================================================

With ``l_out = 1`` there is no decode step and the last two moments are left out.  The cache
only grows, so a decode step's peak is the last one's.  ``serving_peak`` is the largest moment;
``peak_moment`` names it.  With ``p > 1`` the weights and cache are the busiest stage's while
the logits are the last stage's: the sampling moments are an upper bound there.

Checked against ``transformers``' ``generate`` (``tests/test_serving_peak.py``): live storage
bytes measured op by op over a greedy generation of small GPT-2 and Llama models on the CPU peak
at the last step's fp32 copy of the logits, and equal ``decode sampling`` plus ``generate``'s
token bookkeeping (ids, attention mask and positions, int64 per token).
"""

from __future__ import annotations

from dataclasses import replace

from sympy import Expr, Integer, Max, Min, floor, sympify

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, instance, positive
from symbolic_cost.extrema import maximum
from symbolic_cost.inference.kv_cache import kv_cache_bytes
from symbolic_cost.inference.phases import decode, prefill
from symbolic_cost.inference.serving import Serving, encoder_tokens, final_tokens, prompt_tokens
from symbolic_cost.inference.per_device import affine_in_batch, busiest_weights
from symbolic_cost.models.peak import Moment

SCORES_FP32 = 4
"""Bytes per element of the scores ``generate`` samples from: it copies the last token's
logits to fp32 (``outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32)`` in
``GenerationMixin._sample``, transformers 4.45 and later), as vLLM's sampler does."""

MOMENTS = ("prefill", "prefill sampling", "decode", "decode sampling")


def sampling_bytes(arch, s: Serving, previous: bool = False) -> Expr:
    """Bytes of one sampling moment for ``b`` sequences over the padded vocabulary ``V``: the
    head's logits of the last token ``b V es`` (allgathered under ``m1``, as the generation
    head does), their fp32 copy ``4 b V``, and with ``previous`` (a decode step) the previous
    step's fp32 scores, ``4 b V`` more: ``_sample`` rebinds ``next_token_scores`` only after
    the new copy is made.  Greedy decoding without logits processors; each processor that
    returns a new tensor (temperature, top-k/top-p masking) adds another ``4 b V``.

    >>> from symbolic_cost.models.config import preset
    >>> sampling_bytes(preset("gpt2"), Serving(b=2, l_in=8, l_out=4), previous=True) == 2 * 50257 * (2 + 4 + 4)
    True
    """
    vocab = arch.padded_vocab(s.m1)
    return s.b * vocab * s.es + (2 if previous else 1) * s.b * vocab * SCORES_FP32


def _cache(arch, s: Serving, tokens) -> Expr:
    return kv_cache_bytes(arch, s.b, tokens, encoder=encoder_tokens(arch, s), m1=s.m1, p=s.p, kv_dtype=s.kv,
                          page=s.page, mla=s.mla)


def serving_timeline(arch, s: Serving = Serving(), conventions=conv.DEFAULT) -> tuple[Moment, ...]:
    """The ``MOMENTS`` of a generation on the busiest device (see the module docstring).

    >>> from symbolic_cost.models.config import preset
    >>> [m.name for m in serving_timeline(preset("gpt2"), Serving(b=1, l_in=8, l_out=1))]
    ['prefill', 'prefill sampling']
    """
    conventions = conv.get(conventions)
    if s.cp != 1:
        raise InputError(f"the serving peak follows a whole generation, and decode under context parallelism "
                         f"(cp={s.cp}) is not modelled: throughput.prefill_fields gives the prefill's memory", "cp")
    first = prefill(arch, s, conventions)
    weights, prompt = busiest_weights(arch, first), _cache(arch, s, prompt_tokens(arch, s))
    moments = [Moment("prefill", weights + prompt + first.working_bytes),
               Moment("prefill sampling", weights + prompt + sampling_bytes(arch, s))]
    if sympify(s.l_out) == 1:
        return tuple(moments)
    last = decode(arch, s, final_tokens(arch, s) - 1, conventions)
    cache = _cache(arch, s, final_tokens(arch, s))
    return tuple(moments + [Moment("decode", weights + cache + last.working_bytes),
                            Moment("decode sampling", weights + cache + sampling_bytes(arch, s, previous=True))])


def serving_peak(arch, s: Serving = Serving(), conventions=conv.DEFAULT) -> Expr:
    """The largest moment of ``serving_timeline`` (``extrema.maximum``: one formula).

    >>> from symbolic_cost.models.config import preset
    >>> from symbolic_cost.inference.throughput import inference_cost
    >>> s = Serving(b=8, l_in=2048, l_out=256, flash=True)
    >>> peak = serving_peak(preset("llama-2-7b"), s)
    >>> cost = inference_cost(preset("llama-2-7b"), s)
    >>> cost.weight_bytes + cost.kv_cache_bytes < peak      # the kept bytes and a transient
    True
    """
    instance(s, Serving, "s", " (inference.serving.Serving(...))")
    return maximum(*(m.bytes for m in serving_timeline(arch, s, conventions)))


def peak_moment(arch, s: Serving = Serving(), conventions=conv.DEFAULT) -> Moment:
    """The moment at which the serving peak falls (the first of equals); needs numbers."""
    moments = serving_timeline(arch, s, conventions)
    values = [sympify(m.bytes) for m in moments]
    if not all(v.is_number for v in values):
        raise InputError("peak_moment needs numbers for every serving symbol; serving_peak gives the formula",
                         "serving")
    return moments[max(range(len(values)), key=lambda i: (values[i], -i))]


def fitting_batch(arch, s: Serving, capacity, conventions=conv.DEFAULT, beside=Integer(0)) -> Expr:
    """The most sequences whose serving peak fits ``capacity`` bytes: every moment is affine in
    ``b`` (``fixed + b per_sequence``), so the batch is the smallest of
    ``floor((capacity - fixed) / per_sequence)`` over the moments, and 0 when not even one fits.
    The batch is the answer: ``s.b`` is replaced by the symbol ``b``.  ``capacity``: exact, finite
    and positive bytes.  ``beside``: bytes held besides the served model's, affine in the symbol
    ``b``, at every moment, or by moment name (``{name: bytes}``: a speculative draft's weights
    and cache, ``speculative.draft_beside``).
    A mixture of experts (the experts read grow with ``b``) is refused by ``per_device.affine_in_batch``."""
    capacity = positive(capacity, "capacity")
    bounds = []
    for moment in serving_timeline(arch, replace(s, b=S.b), conventions):
        extra = beside.get(moment.name, Integer(0)) if isinstance(beside, dict) else beside
        fixed, per_sequence = affine_in_batch(moment.bytes + extra, S.b, f"the memory at {moment.name}")
        bounds.append(floor((capacity - fixed) / per_sequence))
    return Max(Integer(0), Min(*bounds))
