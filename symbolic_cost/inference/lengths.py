"""How long each request of a load test is: all the same, or drawn around the printed lengths.

A benchmark that prints one prompt length and one output length ran one of two workloads.  A
synthetic one gives every request that many prompt tokens and sets its ``max_tokens`` to the
output length, the end-of-sequence token ignored (TensorRT-LLM's and vLLM's random datasets):
every request is the same (``"fixed"``).  A dataset of real conversations (ShareGPT) has prompts
of every length and lets each answer stop where it ends, and the printed lengths are then means
of very different ones.  Their spread matters under load: the short answers leave early and the
long ones hold the engine at a small batch for the end of the run, so throughput falls and the
inter-token gaps shrink, although the means are the same; a long prompt holds up the prompts
behind it.

Knowing only a mean, ``"geometric"`` draws each length from the geometric distribution on
1, 2, 3, ... with that mean, ``P(L = k) = q (1 - q)^(k - 1)`` with ``q = 1 / mean``: of all
distributions on the positive integers with a given mean, the one of largest entropy (the
discrete counterpart of the exponential), so it assumes nothing the mean does not say.  The
lengths of ``n`` requests are the distribution's quantiles at ``(i + 1/2) / n``, in a seeded random
order: the run holds the distribution's spread without the luck of one draw (the longest of 500
requests decides when a saturated run ends).  A prompt past the model's context is cut to it, and
an output to what the context leaves after its prompt, as an engine ends a sequence at its
``max_seq_len``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from sympy import Integer

from symbolic_cost.checks import InputError, count, shown

SHAPES = ("fixed", "geometric")
"""How a request's length spreads around the printed one (``Lengths``; ``--prompt-lengths``,
``--output-lengths``)."""


@dataclass(frozen=True)
class Lengths:
    """How the requests' ``prompts`` and ``outputs`` spread around the printed lengths, each one of
    ``SHAPES`` (see the module docstring).

    >>> Lengths(outputs="geometric")
    Lengths(prompts='fixed', outputs='geometric')
    >>> Lengths(prompts="normal")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: lengths' prompts must be one of fixed, geometric, got 'normal'
    """

    prompts: str = "fixed"
    outputs: str = "fixed"

    def __post_init__(self):
        for name in ("prompts", "outputs"):
            shape = getattr(self, name)
            if not isinstance(shape, str) or shape not in SHAPES:
                raise InputError(f"lengths' {name} must be one of {', '.join(SHAPES)}, got {shown(shape)}", name)


MAX_REQUESTS = 100_000
"""Most requests one simulation takes: 100,000 (Llama 2 7B, 128 tokens out each) run in 20-30
CPU-seconds, within the command line's 120 s budget with room for slower machines; the load
tests published (TensorRT-LLM's) send 500 to a few thousand.  ``drawn`` draws at most as many
lengths (asked for 10^9, it built the list until it ran out of time); ``inference.load`` keeps
its simulations to it."""

FIXED = Lengths()
"""Every request of the printed lengths."""

STREAMS = ("prompt", "output")
"""The draws ``drawn`` seeds apart: the prompts' and the outputs' lengths."""


def drawn(mean: int, requests: int, shape: str = "fixed", seed: int = 0, stream: str = "output") -> list[int]:
    """Lengths of ``requests`` requests whose mean is ``mean`` (see the module docstring), in
    arrival order; ``seed`` and ``stream`` (``"prompt"``, ``"output"``) seed the order, each
    stream apart from the others and from the arrivals.

    >>> drawn(3, 4)
    [3, 3, 3, 3]
    >>> lengths = drawn(200, 20_000, "geometric", seed=1)
    >>> min(lengths), round(sum(lengths) / len(lengths) / 200, 2)
    (1, 1.0)
    """
    if not isinstance(shape, str) or shape not in SHAPES:
        raise InputError(f"a length's shape must be one of {', '.join(SHAPES)}, got {shown(shape)}", "shape")
    mean, requests, seed = _count(mean, "mean"), _count(requests, "requests", 0, MAX_REQUESTS), _count(seed, "seed", 0)
    if stream not in STREAMS:
        raise InputError(f"stream must be one of {', '.join(STREAMS)}, got {shown(stream)}", "stream")
    if shape == "fixed" or mean == 1:
        return [mean] * requests
    log_stay = math.log1p(-1 / mean)
    # the inverse of the distribution function 1 - (1 - q)^k at the midpoints (i + 1/2) / n
    lengths = [max(1, math.ceil(math.log1p(-(i + 0.5) / requests) / log_stay)) for i in range(requests)]
    random.Random(f"{stream} lengths {seed}").shuffle(lengths)
    return lengths


def _count(value, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    """``checks.count`` of a token or request count, a SymPy integer taken as the ``int`` it is."""
    return count(int(value) if isinstance(value, Integer) else value, name, minimum, maximum)


def requests_of(prompt: int, output: int, requests: int, lengths: Lengths = FIXED, seed: int = 0,
                context: int | None = None) -> tuple[list[int], list[int]]:
    """``(prompts, outputs)``: each request's prompt and output tokens around ``prompt`` and
    ``output`` as ``lengths`` spreads them, a prompt cut at ``context`` tokens and an output at
    ``context - prompt + 1`` (``None``: no limit).

    >>> requests_of(100, 20, 3)
    ([100, 100, 100], [20, 20, 20])
    >>> prompts, outputs = requests_of(100, 50, 500, Lengths("geometric", "geometric"), context=300)
    >>> max(prompts), max(p + o - 1 for p, o in zip(prompts, outputs))
    (300, 300)
    """
    if not isinstance(lengths, Lengths):
        raise InputError(f"lengths must be an inference.lengths.Lengths, got {shown(lengths)}", "lengths")
    prompt, output, context = _count(prompt, "prompt"), _count(output, "output"), \
        None if context is None else _count(context, "context")
    prompts = drawn(prompt, requests, lengths.prompts, seed, "prompt")
    outputs = drawn(output, requests, lengths.outputs, seed, "output")
    if context is None:
        return prompts, outputs
    prompts = [min(p, context) for p in prompts]
    return prompts, [min(o, context - p + 1) for p, o in zip(prompts, outputs)]
