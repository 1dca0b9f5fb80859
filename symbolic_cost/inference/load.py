"""Serving under load: in-flight (continuous) batching of requests arriving at a rate.

``throughput`` answers for a fixed batch; a server under load mixes, step by step, the prompts it
admits with the sequences it is decoding, and requests queue when it is busy.  ``serve`` runs that
as an event simulation whose every step is priced by the library's own expressions:

* ``StepModel``: seconds of one engine step that prefills ``k`` prompts of ``P`` tokens and
  decodes one token of ``B`` sequences over a mean context ``c``, on a calibrated system
  (``timing.hardware.calibrated``): every row of the ``phases.prefill`` and ``phases.decode``
  phases on the calibrated roofline, the weights read once when both run in one step, and the
  step's tensor-parallel collectives at NCCL's price (see the class);
* ``Runtime``: the engine's limits (``max_batch`` sequences in flight, ``max_tokens`` per step:
  a prompt is admitted whole, first come first served, while both allow (a prompt longer than
  ``max_tokens`` is refused without chunked prefill, as the engines refuse it: ``check_budget``); and the KV cache: a
  pool of ``memory_fraction`` of the memory the weights leave, in blocks of ``block_tokens``,
  from which each request reserves the blocks of its whole length when it is admitted, as
  TensorRT-LLM's ``GUARANTEED_NO_EVICT`` scheduler does, ``StepModel.cache_blocks``) and its fixed costs,
  ``step_overhead`` per step (scheduling, sampling), ``kernel_overhead`` per operation a step
  launches (``StepModel.kernels``: the gaps between kernels) and ``request_overhead`` per request
  (the front end and tokenisation, added to its time to first token); both fitted on the
  TensorRT-LLM 0.14 load tests (``fit_serving``: least squares on the log errors of mean TTFT and
  mean ITL, each load test simulated; stored in ``timing/calibration.json``);
* ``serve``: Poisson arrivals at ``rate`` requests/s (a seeded generator; ``rate=None`` sends
  them all at once), every request ``P`` prompt and ``O`` output tokens; it returns mean time to
  first token, mean inter-token latency (over every gap between two tokens of a request; ``None``
  when no request has two tokens), and request, total-token and output-token throughput from the
  first arrival to the last token.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from fractions import Fraction
from functools import partial
from itertools import accumulate

from sympy import Add, Basic, Integer, Rational, Symbol, ceiling, floor, lambdify, sympify

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, InputTypeError, count, instance, positive, shown
from symbolic_cost.extrema import kept_cse
from symbolic_cost.inference import estimated, paged
from symbolic_cost.inference.batching import ChunkedPrompts, WholePrompts, alone, lockstep, pipelined
from symbolic_cost.inference.kv_cache import kv_cache_bytes
from symbolic_cost.inference.lengths import FIXED, MAX_REQUESTS, Lengths, requests_of
from symbolic_cost.inference.per_device import busiest_weights
from symbolic_cost.inference.latent import CORE
from symbolic_cost.inference.phases import decode, mean_step, prefill
from symbolic_cost.inference.drafts import draft_cache_bytes, draft_decode, draft_prefill, draft_weights
from symbolic_cost.inference.throughput import calibrated_run
from symbolic_cost.inference.serving import SERVING_MADE_BY, Serving, encoder_tokens
from symbolic_cost.inference.speculative import Speculation, check_speculation, expected_tokens
from symbolic_cost.inference.weight_formats import check_weights, weight_format
from symbolic_cost.models.training import check_context, context_limit
from symbolic_cost.parallel.splits import uneven_stages
from symbolic_cost.timing import efficiency
from symbolic_cost.timing.hardware import calibrated, comm_time


SERVING = ("step_overhead", "kernel_overhead", "request_overhead")
"""The serving runtime's fitted overheads (``Runtime``), in seconds."""

MEMORY_OF = ("free", "total")
"""What an engine's memory fraction is a share of (``Runtime.memory_of``)."""

ALLOCATIONS = ("reserve", "on-demand", "estimate")
"""How an engine gives KV-cache blocks to a request (``Runtime.allocation``)."""


LIMITS = {"max_batch": 10**6, "max_tokens": 10**7, "block_tokens": 4096}
"""The most each of an engine's limits may be (``Runtime``; the command line's ``--max-batch``,
``--max-tokens`` and ``--block-tokens`` read them): a million sequences, ten million tokens a step
and blocks of 4,096 tokens, past any engine's settings (vLLM's block sizes go to 256 and SGLang's
running requests to 4,096) by orders of magnitude; a block of 2**60 tokens ended in a refusal of
``tokens``, an argument no caller gave."""


@dataclass(frozen=True)
class Runtime:
    """An in-flight batching engine (see the module docstring).  ``max_batch`` and ``max_tokens``
    are TensorRT-LLM's engine-build defaults since its 0.14 release (``trtllm-build``'s
    ``max_batch_size`` 2,048, 256 in 0.11 to 0.13, and ``max_num_tokens`` 8,192; its 0.14 release
    notes; ``trtllm-serve`` keeps both): an assumption where a benchmark does not print them, under
    which the KV cache, not the count of sequences, bounds a batch; ``memory_fraction`` and ``block_tokens``
    are TensorRT-LLM's ``KvCacheConfig`` defaults (``free_gpu_memory_fraction`` 0.9 of the memory
    left free, ``tokens_per_block`` 32); the overheads are seconds (``None``: the fitted value of
    ``timing/calibration.json``).  ``chunked``: chunked prefill (``serve``), TensorRT-LLM's
    ``enable_chunked_context``, always on in vLLM's V1 engine and SGLang; ``memory_of``: what
    ``memory_fraction`` is a share of, ``"free"`` (the memory the weights leave: TensorRT-LLM) or
    ``"total"`` (the device's memory, the weights' included: vLLM's ``gpu_memory_utilization``,
    SGLang's ``mem_fraction_static``).  ``allocation``: ``"reserve"``, the blocks of a request's
    whole length when it is admitted (TensorRT-LLM's ``GUARANTEED_NO_EVICT``),
    ``"on-demand"``, the blocks of the tokens it has, preempting by recomputation when they run
    out (vLLM: ``inference.paged``), or ``"estimate"``, slots as tokens come, requests admitted by
    an estimate of the tokens the running ones will still write and retracted when short
    (SGLang: ``inference.estimated``).  ``engines`` holds each engine's defaults."""

    step_overhead: object = None
    request_overhead: object = None
    max_batch: int = 2048
    max_tokens: int = 8192
    kernel_overhead: object = None
    memory_fraction: object = Rational(9, 10)
    block_tokens: int = 32
    chunked: bool = False
    memory_of: str = "free"
    allocation: str = "reserve"

    def __post_init__(self):
        fitted = efficiency.CALIBRATION.get("serving", {})
        for name in SERVING:
            if getattr(self, name) is None:
                object.__setattr__(self, name, Rational(fitted.get(name, "0")))
            if not 0 <= seconds(getattr(self, name), name) < math.inf:
                raise InputError(f"{name} must be a finite number of seconds, at least 0, got "
                                 f"{shown(getattr(self, name))}", name)
        for name, most in LIMITS.items():
            if isinstance(getattr(self, name), bool) or not isinstance(getattr(self, name), int) \
                    or not 1 <= getattr(self, name) <= most:
                raise InputError(f"{name} must be an integer from 1 to {most:,}, got {getattr(self, name)!r}", name)
        fraction = positive(self.memory_fraction, "memory_fraction")      # exact: a float is refused
        if not (fraction.is_number and fraction <= 1):
            raise InputError(f"memory_fraction must be a number in (0, 1], got {fraction}", "memory_fraction")
        object.__setattr__(self, "memory_fraction", fraction)
        if self.memory_of not in MEMORY_OF:
            raise InputError(f"memory_of must be one of {', '.join(MEMORY_OF)}, got {self.memory_of!r}", "memory_of")
        if not isinstance(self.chunked, bool):
            raise InputError(f"chunked must be True or False, got {self.chunked!r}", "chunked")
        if self.allocation not in ALLOCATIONS:
            raise InputError(f"allocation must be one of {', '.join(ALLOCATIONS)}, got {self.allocation!r}",
                             "allocation")


class StepModel:
    """Seconds of one engine step, ``step(k, B, c)`` (see the module docstring).

    Every row of the phase is priced on the roofline of the calibrated model,
    ``max(compute, memory)`` with ``timing.efficiency.pass_times``, and the rows are summed:

    * ``prefill(k)``: the prefill phase of ``k`` prompts (``b = k``), each ``P = l_in`` tokens;
    * ``decode(B, c)``: one decode step of ``B`` sequences over ``c`` cached tokens;
    * a step with both runs them in one pass over the weights (in-flight batching fuses the
      prompts' and the decoded tokens' products), so its decode rows read no weights:
      ``prefill(k) + decode_fused(B, c)``, where each decode row's memory time leaves out its
      ``weights`` bytes;
    * plus the forward collectives of the step's ``k P + B`` tokens (NCCL's cost, ``comm_time``).

    With a ``speculation`` (``inference.speculative.Speculation``: a draft model proposing ``k``
    tokens a step, each accepted with probability ``alpha``), a decode step is the draft's ``k``
    decode steps (over ``c`` to ``c + k - 1`` tokens: its cache also holds the proposals of the
    step so far) and the served model's verification of ``k + 1`` tokens a
    sequence (``phases.decode(tokens=k + 1)``, the part fused with prefills); a prefill also runs
    the draft's prefill of the prompts; a sequence gains ``tokens_per_step`` =
    ``speculative.expected_tokens(k, alpha)`` tokens a step, and ``context`` is then in steps (see
    ``__call__``).  The cache holds both models' keys and values, and ``k`` proposals more a
    request (``extra_tokens``).

    ``lockstep``: whether replicas of this deployment step together, as they do where its routed
    experts are split among them (``ep x etp > m1``: attention data parallelism, each step's
    token dispatch an all-to-all across the replicas; ``serve``'s ``in_lockstep``).
    ``in_flight``: the batches the deployment runs at once, one a pipeline stage (``p``; ``serve``
    runs each as an engine of its own); ``stage_shares``: each stage's share of a step where the
    stages hold unequal layers (``stage_shares``; ``None``: even).
    """

    def __init__(self, arch, serving: Serving, system, conventions=None, speculation=None):
        from symbolic_cost import conventions as conv
        conventions = conv.get(conventions or conv.DEFAULT)
        instance(serving, Serving, "serving", SERVING_MADE_BY)
        if speculation is not None:
            instance(speculation, Speculation, "speculation", " (inference.speculative.Speculation(draft, k, acceptance))")
        symbolic = sorted({f.name for f in fields(serving)
                           if isinstance(getattr(serving, f.name), Basic) and getattr(serving, f.name).free_symbols}
                          - {"b", "l_out"})
        if symbolic:        # the simulator runs numbers: all but the batch and the output it runs step by step
            raise InputError(f"the load simulator needs a number for {', '.join(symbolic)} of the serving (its steps "
                             f"set only the batch b and the tokens out, l_out)", symbolic[0])
        self.system, self.prompt = calibrated(system), int(serving.l_in)
        check_weights(weight_format(serving.weights), self.system)
        self._memory = (arch, serving, speculation)
        check_context(arch, (("l_in", serving.l_in),), serving.allow_long, argument="l_in")
        one = as_stepped(serving, b=S.b)
        k, tokens = Symbol("k", positive=True), Symbol("tokens", positive=True)
        pre = prefill(arch, as_stepped(serving, b=k), conventions)
        dec = decode(arch, one, S.l_ctx, conventions, tokens=1 if speculation is None else speculation.k + 1)
        args = (S.b, S.l_ctx)
        pre_s, dec_s, fused_s = (self._roofline(pre, conventions), self._roofline(dec, conventions),
                                 self._roofline(dec, conventions, with_weights=False))
        self.tokens_per_step, self.extra_tokens, self.draft_launches, self._cache_of = 1, 0, None, None
        self._blocks, self._decoders = {}, {}
        self._core, self._conventions = None, conventions
        # replicas whose experts are split among them (attention data parallelism) step together
        self.lockstep = arch.moe is not None and bool(serving.ep * serving.expert_tensor > serving.m1)
        self.in_flight = int(serving.p)     # one batch a pipeline stage (see ``serve``)
        self.stage_shares = stage_shares(arch, self.in_flight)
        self.kernels = _operations(arch, serving, conventions)
        if speculation is not None:
            check_speculation(arch, serving, speculation)
            prefills, drafts = self._drafting(speculation, serving, k, conventions)
            pre_s, dec_s, fused_s = pre_s + prefills, dec_s + drafts, fused_s + drafts
            self.tokens_per_step = expected_tokens(speculation.k, speculation.acceptance)
            self.extra_tokens = speculation.k
            draft = _operations(speculation.draft, serving, conventions)
            self.draft_launches = (speculation.k * draft, draft)
        self._per_step = float(self.tokens_per_step)
        self._prefill = Remembered(lambdify([k], pre_s, "math", cse=kept_cse))
        self._decode, self._decode_fused = BatchFirst(dec_s, *args), BatchFirst(fused_s, *args)
        # the tensor collectives of a step, by the tokens it runs (a decode of one token a sequence:
        # a speculative step's sequences each carry k + 1)
        single = dec if speculation is None else decode(arch, one, S.l_ctx, conventions)
        comm = sum((n * comm_time(c, self.system, conventions) for c, n in single.collectives), Integer(0))
        self._comm = Remembered(lambdify([tokens], comm.subs(S.b, tokens), "math"))
        self._tokens_a_sequence = 1 if speculation is None else speculation.k + 1

    def check_context(self, output_tokens: int) -> None:
        """Refuse a generation of ``output_tokens`` past the model's context after the prompt, as
        ``inference_cost`` refuses ``l_in + l_out - 1`` (unless the serving's ``allow_long``)."""
        arch, serving, _ = self._memory
        check_context(arch, (("l_in + output_tokens - 1", self.prompt + output_tokens - 1),), serving.allow_long,
                      argument="output_tokens")

    def context_tokens(self) -> int | None:
        """The model's context in tokens, where an engine ends a drawn length
        (``inference.lengths.requests_of``); ``None`` where the serving allows longer or the model
        states none."""
        arch, serving, _ = self._memory
        limit = context_limit(arch)
        return None if serving.allow_long or limit == 0 or not limit.is_number else int(limit)

    def _drafting(self, speculation, serving: Serving, prompts, conventions):
        """Seconds the draft adds: its prefill of ``prompts`` prompts, and its ``k`` decode steps of
        ``b`` sequences, over ``l_ctx`` to ``l_ctx + k - 1`` tokens (its cache holds the step's
        proposals so far): ``k`` times their mean (``phases.mean_step``)."""
        draft, k, one = speculation.draft, speculation.k, replace(serving, b=S.b, l_out=2)
        steps = mean_step(draft_decode(draft, one, S.l_ctx, conventions),
                          draft_decode(draft, one, S.l_ctx + k - 1, conventions))
        reading = self._roofline(draft_prefill(draft, replace(serving, b=prompts, l_out=2), conventions), conventions)
        return reading, k * self._roofline(steps, conventions)

    def cache_blocks(self, block_tokens: int, memory_fraction, memory_of: str = "free") -> int:
        """KV-cache blocks of ``block_tokens`` tokens the engine pages on the busiest device:
        ``floor(memory_fraction (capacity - weights) / block bytes)`` (``memory_of="free"``,
        TensorRT-LLM) or ``floor((memory_fraction capacity - weights) / block bytes)``
        (``"total"``, vLLM and SGLang), the weights those of the busiest device
        (``per_device.busiest_weights``), a block's bytes those of ``kv_cache_bytes`` for one
        sequence of ``block_tokens`` tokens.  The engine's activation workspace is taken to fit in
        the memory the fraction leaves (TensorRT-LLM measures the free memory after allocating it;
        vLLM subtracts its profiled peak, which this leaves out)."""
        arch, serving, speculation = self._memory
        self.system.require("the KV-cache pool of a load test", "hbm_capacity")
        weights = busiest_weights(arch, prefill(arch, as_stepped(serving, b=1))) + \
            (draft_weights(speculation.draft, serving) if speculation else 0)
        block = self.kv_bytes(block_tokens)
        capacity = self.system.hbm_capacity
        free = memory_fraction * (capacity - weights) if memory_of == "free" else memory_fraction * capacity - weights
        return max(int(floor(free / block)), 0)

    def blocks_for(self, tokens: int, block_tokens: int) -> int:
        """KV-cache blocks of ``block_tokens`` tokens (each every layer's, ``kv_bytes(block_tokens)``)
        a sequence of ``tokens`` tokens fills: its cache's bytes over a block's, whole blocks;
        ``ceil(tokens / block_tokens)`` where every layer caches every token, fewer where
        sliding-window layers hold at most their window (the pool's bytes are what it holds)."""
        key = (tokens, block_tokens)        # a load test asks the same few lengths for every request
        if key not in self._blocks:
            if self._cache_of is None:
                n = Symbol("n", positive=True, integer=True)
                self._cache_of = lambdify([n], self.kv_bytes(n), "math")
            self._blocks[key] = math.ceil(self._cache_of(tokens) / self._cache_of(block_tokens))
        return self._blocks[key]

    def pages(self, block_tokens: int) -> paged.Pages:
        """How a sequence fills the pool of an engine that pages its sliding-window layers apart
        (vLLM's hybrid KV-cache manager, ``paged.Pages``): the busiest device's full layers' share of
        its cache, read from ``kv_bytes`` itself (a token past the window adds only the full layers'
        bytes; one within it, every layer's), so pipeline stages and layer patterns count as they
        hold.  ``Pages(block_tokens)`` without a window, with a draft's cache beside it, or with a
        window shorter than a block (each layer then pages a block of its own)."""
        arch, _, speculation = self._memory
        window = None if arch.window is None else sympify(arch.window)
        if window is None or speculation is not None or not window.is_number or block_tokens > window - 1:
            return paged.Pages(block_tokens)
        window = int(window)
        every_layer = Rational(self.kv_bytes(block_tokens)) / block_tokens
        full_share = Rational(self.kv_bytes(window) - self.kv_bytes(window - 1)) / every_layer
        return paged.Pages(block_tokens, full=int(full_share.p), sliding=int(full_share.q - full_share.p),
                           cap=-(-(window - 1) // block_tokens) + 1)

    def kv_bytes(self, tokens: int):
        """Bytes of the KV cache one sequence of ``tokens`` tokens holds on the busiest device
        (``kv_cache_bytes`` under the deployment's tensor and pipeline split and cache format), the
        draft's beside it under speculation."""
        arch, serving, speculation = self._memory
        served = kv_cache_bytes(arch, 1, tokens, encoder=encoder_tokens(arch, replace(serving, b=1)),
                                m1=serving.m1, p=serving.p, kv_dtype=serving.kv, mla=serving.mla)
        if speculation is None:
            return served
        return served + draft_cache_bytes(speculation.draft, serving, 1, tokens)

    def _roofline(self, phase, conventions, with_weights=True, keep=None):
        """Seconds of a phase: ``sum max(compute, memory)`` over its rows (``calibrated_run``)."""
        return calibrated_run(phase, self.system, conventions, with_weights, keep)[2]

    def attention_shift(self, chunks) -> float:
        """Seconds to add to ``step(t / P, ...)`` for the prompt tokens a step prefills, ``chunks``
        of ``(offset, take)``: that price gives every token a whole ``P``-token prompt's mean share of
        its attention, where a chunk of ``t`` tokens after ``a`` cached ones attends ``a + 1`` to
        ``a + t`` keys (fewer in a sliding window): its attention core takes ``core(a + t) -
        core(a)``, ``core(L)`` being the core rows (``latent.CORE``) of one ``L``-token prompt's
        prefill on the roofline, against ``core(P) t / P``.  A whole prompt of ``P`` tokens adds
        nothing; a first chunk of a long prompt less, a late one more.  0 for a model whose prefill
        is not built at a symbolic length."""
        core = self._core_time()
        if core is None:
            return 0.0
        mean = core(self.prompt) / self.prompt
        return sum(core(a + t) - (core(a) if a else 0.0) - mean * t
                   for a, t in chunks if t and (a, t) != (0, self.prompt))

    def _core_time(self):
        """``core(L)`` of ``attention_shift``, built on first use; ``None`` where the prefill at a
        symbolic length cannot be built."""
        if self._core is None:
            arch, serving, _ = self._memory
            length = Symbol("L", positive=True, integer=True)
            try:
                phase = prefill(arch, replace(serving, b=1, l_in=length, l_out=2), self._conventions)
                core = self._roofline(phase, self._conventions, keep=CORE)
                self._core = lambdify([length], core, "math")
            except (InputError, TypeError, ValueError):
                self._core = False
        return self._core or None

    def decoder(self, decoding: int, prompts=0.0):
        """``lambda context: self(prompts, decoding, context)`` for a step of no prompts
        (``prompts``: the zero the caller passes, ``0.0`` or ``0``) and ``decoding`` sequences,
        the same to the bit, for the steps that only decode (``batching.decoder``): the terms that
        read the batch alone (``BatchFirst``'s ``fixed``) and the collectives computed once, and
        the function kept for the next run of steps at that batch."""
        key = (decoding, prompts, type(prompts))
        price = self._decoders.get(key)
        if price is None:
            if prompts != 0:
                raise InputError(f"a decoder prices steps of no prompts: prompts must be 0, got {shown(prompts)}",
                                 "prompts")
            self(prompts, decoding, 0.0)        # refused as a step of any kind is
            price = self._decoders[key] = self._decoding_price(decoding, prompts)
        return price

    def _decoding_price(self, decoding: int, prompts):
        fixed, moving = self._decode.fixed(decoding), self._decode.moving
        comm = self._comm(prompts * self.prompt + decoding * self._tokens_a_sequence)
        speculative = bool(decoding) and self.tokens_per_step != 1

        def price(context: float) -> float:
            if not 0 <= context < math.inf:
                self(prompts, decoding, context)        # refused as a step of any kind is
            if speculative:
                context = self._in_steps(context)
            return fixed + moving(decoding, context) + comm
        return price

    def _in_steps(self, context: float) -> float:
        """A speculative step's ``context``, ``P`` plus the mean steps run since the first token,
        as the cached tokens its price reads: ``P + E (context - P)`` (``E``: ``tokens_per_step``)."""
        return self.prompt + self._per_step * (context - self.prompt)

    def __call__(self, prompts: int, decoding: int, context: float) -> float:
        """Seconds of a step with ``prompts`` prefills and ``decoding`` sequences over ``context``
        cached tokens on average (before the step's fixed overhead).  Under speculation ``context``
        is ``P`` and the mean steps run since the first token, each of ``tokens_per_step`` tokens
        (``serve`` runs the engines in steps)."""
        try:                # a step of no work is priced (its fixed costs); a negative or NaN one is refused
            valid = 0 <= prompts < math.inf and 0 <= decoding < math.inf and 0 <= context < math.inf
        except TypeError:
            valid = False
        if not valid:
            raise InputError(f"a step's prompts, decoding and context must be finite numbers at least 0, got "
                             f"{shown(prompts)}, {shown(decoding)}, {shown(context)}", "step")
        if decoding and self.tokens_per_step != 1:
            context = self._in_steps(context)
        if prompts and decoding:
            seconds = self._prefill(prompts) + self._decode_fused(decoding, context)
        elif prompts:
            seconds = self._prefill(prompts)
        else:
            seconds = self._decode(decoding, context)
        return seconds + self._comm(prompts * self.prompt + decoding * self._tokens_a_sequence)


def as_stepped(serving: Serving, **changes) -> Serving:
    """``serving`` as a step prices its phases: one decode step after the prompt (``l_out=2``), the
    context not checked again: the prompt is checked where the ``StepModel`` is made and each
    request's length where it is served (``StepModel.check_context``).  Before, the copy's
    ``l_out=2`` refused a prompt of the whole context generating one token (GPT-2's 1,024 + 1),
    which the report and ``inference_cost`` take."""
    return replace(serving, l_out=2, allow_long=True, **changes)


class Remembered:
    """A function of one number, each value computed once: a simulation asks a step's price for the
    same few batch sizes and token counts again and again (a million steps a serving search)."""

    def __init__(self, function):
        self.function, self.known = function, {}

    def __call__(self, x):
        value = self.known.get(x)
        if value is None:
            value = self.known[x] = self.function(x)
        return value


class BatchFirst:
    """A step's seconds ``f(b, c)`` over ``b`` sequences of ``c`` cached tokens on average, split
    into the terms that read ``b`` alone, computed once for each ``b`` (``Remembered``: a decode
    step's products, norms and weights, whose tile and wave counts are most of its arithmetic), and
    the terms that also read ``c`` (the attention over the cache), computed every step.

    >>> from symbolic_cost.symbols import b, l_ctx
    >>> BatchFirst(3 * b + b * l_ctx, b, l_ctx)(2, 10.0)
    26.0
    """

    def __init__(self, expr, b, c):
        terms = Add.make_args(expr)
        self.fixed = Remembered(lambdify([b], Add(*(t for t in terms if c not in t.free_symbols)), "math",
                                         cse=kept_cse))
        self.moving = lambdify([b, c], Add(*(t for t in terms if c in t.free_symbols)), "math", cse=kept_cse)

    def __call__(self, batch, context):
        return self.fixed(batch) + self.moving(batch, context)


def _operations(arch, serving: Serving, conventions) -> int:
    """The operations one decode step of ``arch`` (a model, or a draft: ``drafts.draft_decode``)
    launches (every row of the phase): what ``Runtime.kernel_overhead`` counts."""
    return int(sum(n for _, n in draft_decode(arch, as_stepped(serving, b=1), 1, conventions).rows()))


@dataclass(frozen=True)
class Load:
    """What a load test measures (seconds, requests/s, tokens/s): the means, and the 50th, 90th
    and 99th percentiles of the time to first token, the inter-token latency (over every gap
    between two tokens of a request) and the end-to-end latency (arrival to last token), each
    linear between the order statistics as numpy's ``percentile`` (and vLLM's and TensorRT-LLM's
    benchmarks) take them; ``None`` where no request has two tokens.  With a service-level
    objective (``serve``'s ``slo``): ``slo_attained``, the share of requests whose time to first
    token and mean inter-token latency meet it, and ``goodput``, those requests per second."""

    mean_ttft: float
    mean_itl: float | None
    request_throughput: float
    total_token_throughput: float
    output_token_throughput: float
    p50_ttft: float
    p90_ttft: float
    p99_ttft: float
    p50_itl: float | None
    p90_itl: float | None
    p99_itl: float | None
    mean_e2e: float
    p50_e2e: float
    p90_e2e: float
    p99_e2e: float
    slo_attained: float | None = None
    goodput: float | None = None


PERCENTILES = (50, 90, 99)
"""The percentiles a load test reports."""


def percentile(pairs, q: float) -> float:
    """The ``q``-th percentile of values given as ``(value, count)`` pairs, as numpy's
    ``percentile`` takes it over the values written out ``count`` times each (linear between
    the two order statistics around rank ``q/100 (n - 1)``).

    >>> percentile([(3.0, 1), (1.0, 1), (2.0, 2)], 50), percentile([(1.0, 1), (2.0, 1)], 90)
    (2.0, 1.9)
    """
    return percentiles(pairs, (q,))[q]


def percentiles(pairs, qs) -> dict:
    """``{q: percentile(pairs, q)}`` for each of ``qs``, the pairs sorted once (a load test's
    hundred thousand steps, three percentiles each).

    >>> percentiles([(3.0, 1), (1.0, 1), (2.0, 2)], (0, 50, 100))
    {0: 1.0, 50: 2.0, 100: 3.0}
    """
    if isinstance(qs, (str, bytes)) or not isinstance(qs, Iterable):
        raise InputTypeError(f"qs must be percentiles from 0 to 100, got {shown(qs)}", "qs")
    for q in qs:
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:
            raise InputError(f"q must be a percentile from 0 to 100, got {q!r}", "q")
    try:
        ordered = sorted((value, count) for value, count in pairs if count > 0)
    except (TypeError, ValueError):
        raise InputTypeError(f"pairs must be (value, count) pairs of numbers, got {shown(pairs)}", "pairs") from None
    seen = list(accumulate(count for _, count in ordered))     # values up to and with each
    if not seen:
        raise InputError("a percentile needs at least one value (pairs holds none with a positive count)", "pairs")

    def at(position):           # the value at 0-based ``position`` of the values written out
        return ordered[min(bisect_right(seen, position), len(ordered) - 1)][0]
    out = {}
    for q in qs:
        rank = q / 100 * (seen[-1] - 1)
        below, above = math.floor(rank), math.ceil(rank)
        low = at(below)
        out[q] = low + (at(above) - low) * (rank - below)
    return out


def arrivals(requests: int, rate, seed: int = 0) -> list[float]:
    """Arrival times of ``requests`` requests: a Poisson process of ``rate`` per second (``None``:
    all at 0), from a seeded generator so that a run is reproducible."""
    import random
    requests = count(requests, "requests", maximum=MAX_REQUESTS)
    if rate is None:
        return [0.0] * requests
    if isinstance(rate, (bool, str, bytes, complex)) or not isinstance(rate, (int, float, Fraction, Rational)):
        raise InputTypeError(f"rate must be a number of requests/s or None (all at once), got {shown(rate)}", "rate")
    if not 0 < rate < math.inf:
        raise InputError(f"rate must be positive and finite requests/s or None (all at once), got {rate!r}", "rate")
    if rate < MIN_RATE:
        raise InputError(f"rate {rate!r} is below {MIN_RATE} requests/s: the simulation's clock would run past "
                         f"1e9 s, where a double no longer resolves a step's microseconds (give a rate of at least "
                         f"{MIN_RATE}; one request at a time is what it simulates anyway)", "rate")
    draw, t, out = random.Random(seed), 0.0, []
    for _ in range(requests):
        t += draw.expovariate(float(rate))
        out.append(t)
    return out


MIN_RATE = 1e-4
"""Least rate ``arrivals`` takes, requests/s: ``MAX_REQUESTS`` requests at it span 10^9 s, where a
double still resolves 0.1 us (a rate of 1e-15 put arrivals near 10^18 s, where it resolves 128 s:
a TTFT came out below the lone request's)."""



def check_run(step, output_tokens: int, requests: int, runtime, seed: int, slo,
              lengths: Lengths = FIXED) -> tuple | None:
    """Refuse what a load test cannot run, and return ``slo`` as ``check_slo`` reads it: ``step``
    without its prompt, ``runtime`` not a ``Runtime``, ``output_tokens`` from 1 to ``MAX_OUTPUT``
    (and within the model's context, for a ``StepModel``, unless its serving allows longer),
    ``requests`` from 1 to ``MAX_REQUESTS``, a ``seed`` that is not an integer, ``lengths`` not a
    ``inference.lengths.Lengths``, a bound on the inter-token latency for one output token
    (``check_gaps``)."""
    if not callable(step) or not isinstance(getattr(step, "prompt", None), int):
        raise InputTypeError(f"step must be a StepModel (a step's seconds, called, and its prompt), got {shown(step)}",
                             "step")
    instance(runtime, Runtime, "runtime", " (inference.load.Runtime)")
    if isinstance(output_tokens, bool) or not isinstance(output_tokens, int) or not 1 <= output_tokens <= MAX_OUTPUT:
        raise InputError(f"output_tokens must be an integer from 1 to {MAX_OUTPUT:,}, got {output_tokens!r}",
                         "output_tokens")
    if isinstance(step, StepModel):
        step.check_context(output_tokens)
    if isinstance(requests, bool) or not isinstance(requests, int) or not 1 <= requests <= MAX_REQUESTS:
        raise InputError(f"requests must be an integer from 1 to {MAX_REQUESTS:,}, got {requests!r}", "requests")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputTypeError(f"seed must be an integer (the arrivals' generator), got {shown(seed)}", "seed")
    instance(lengths, Lengths, "lengths", " (inference.lengths.Lengths: Lengths(prompts, outputs))")
    slo = None if slo is None else check_slo(slo)
    check_gaps(slo, output_tokens)
    return slo


def check_budget(prompts: list[int], runtime: Runtime) -> None:
    """Refuse a prompt longer than ``runtime.max_tokens`` without chunked prefill, as the engines
    refuse it: TensorRT-LLM needs ``max_num_tokens`` at least ``max_input_len`` unless
    ``enable_chunked_context`` is on, and vLLM without chunked prefill needs
    ``max_num_batched_tokens`` at least ``max_model_len``; a prompt is never split otherwise.

    >>> check_budget([100, 200], Runtime(max_tokens=100, chunked=True))
    >>> check_budget([100, 200], Runtime(max_tokens=100))
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: a prompt of 200 tokens is longer than max_tokens=100 ...
    """
    longest = max(prompts, default=0)
    if not runtime.chunked and longest > runtime.max_tokens:
        raise InputError(f"a prompt of {longest:,} tokens is longer than max_tokens={runtime.max_tokens:,} "
                         f"(--max-tokens) without chunked prefill, which no engine runs: TensorRT-LLM needs "
                         f"max_num_tokens >= max_input_len unless enable_chunked_context, vLLM needs "
                         f"max_num_batched_tokens >= max_model_len without chunked prefill; give --chunked-prefill "
                         f"or --max-tokens of at least {longest:,}", "max_tokens")


def seconds(value, name: str, argument: str | None = None) -> float:
    """``value`` as a float of seconds: an int, a float, a ``Fraction`` or a SymPy ``Rational`` (the
    simulator keeps its clock in floats); anything else is an ``InputTypeError`` naming ``argument``
    (default ``name``).  The range is the caller's rule."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, Rational)):
        raise InputTypeError(f"{name} must be a number of seconds, got {shown(value)}", argument or name)
    try:
        return float(value)
    except OverflowError:
        raise InputError(f"{name} must be within a double's range (about 1.8e308 seconds), got a number of "
                         f"{len(str(int(value))):,} digits", argument or name) from None


def check_slo(slo) -> tuple[float, float]:
    """``slo`` as ``(seconds to first token, seconds between tokens)``, two positive numbers
    (``math.inf``: no bound on that one).

    >>> check_slo((0.5, 0.05)), check_slo([1, 0.1])
    ((0.5, 0.05), (1.0, 0.1))
    >>> check_slo(0.5)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputTypeError: slo must be a pair (seconds to first token, seconds between tokens), got 0.5
    """
    if not isinstance(slo, (tuple, list)) or len(slo) != 2:     # a mapping or a set has no order of its own
        raise InputTypeError(f"slo must be a pair (seconds to first token, seconds between tokens), got {shown(slo)}",
                             "slo")
    limits = []
    for limit, name in zip(slo, ("slo's time to first token", "slo's time between tokens")):
        if not seconds(limit, name, "slo") > 0:          # NaN fails too; infinity is no bound
            raise InputError(f"{name} must be a positive number of seconds (inf: no bound), got {shown(limit)}", "slo")
        limits.append(float(limit))
    return tuple(limits)


def check_gaps(slo, output_tokens, name: str = "slo's time between tokens", argument: str = "slo",
               instead: str = "bound the time to first token alone, slo=(ttft, math.inf)") -> None:
    """Refuse a bound on the inter-token latency (``slo``'s second, as ``check_slo`` reads it,
    finite) for requests of one output token (``output_tokens`` 1; every length ``lengths`` draws
    around a mean of 1 is 1): there is no gap to bound, and a bound no gap is measured against
    would pass unread (``None`` ITL, a layout ranked by the first token alone).  The one home of
    the rule: the command line names it by its option (``name`` and ``argument`` ``--slo-itl``,
    ``instead`` its alternative).

    >>> check_gaps((1.0, math.inf), 1), check_gaps((1.0, 0.05), 2)
    (None, None)
    >>> check_gaps((1.0, 0.05), 1)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: slo's time between tokens bounds the gaps between a request's output tokens, and requests of l_out=1 have none (one output token: a prefill-only test): bound the time to first token alone, slo=(ttft, math.inf)
    """
    if slo is not None and slo[1] != math.inf and output_tokens == 1:
        raise InputError(f"{name} bounds the gaps between a request's output tokens, and requests of l_out=1 have "
                         f"none (one output token: a prefill-only test): {instead}", argument)


def serve(step: StepModel, output_tokens: int, rate, requests: int = 500, runtime: Runtime = Runtime(),
          seed: int = 0, slo: tuple | None = None, replicas: int = 1, lengths: Lengths = FIXED) -> Load:
    """Simulate the engine over ``requests`` requests (see the module docstring).

    Each step admits waiting requests that have arrived, first come first served, while the
    engine has room: ``max_batch`` sequences, ``max_tokens`` tokens (a prompt's ``P`` and one
    per sequence decoding), and the KV cache's blocks (``step.cache_blocks``, where the step
    states it: each request reserves ``ceil((P + O) / block_tokens)`` blocks until it leaves).
    The step then runs ``step(k, B, c) + step_overhead + kernels x kernel_overhead``
    (``kernels``: ``step.kernels``, 0 for a step that does not state it): the admitted prompts
    yield their first token at its end (their time to first token, plus ``request_overhead``)
    and every sequence already running yields its next (one inter-token gap of the step's
    duration).  A prompt that does not fit beside the decodes waits, and the prompts behind it,
    until it does (first come first served); one longer than ``max_tokens`` is refused without
    chunked prefill (``check_budget``).  A sequence leaves after
    ``output_tokens`` tokens.  ``lengths`` (``inference.lengths.Lengths``) may draw each request's
    prompt and output around ``P`` and ``output_tokens`` instead, as a dataset's (its prompts
    admitted and priced by their tokens, ``step(tokens / P, B, c)``; each request reserving the
    blocks of its own length).  A chunk, or a prompt of another length than ``P``, adds the
    attention of its place in its prompt (``batching.priced``, ``StepModel.attention_shift``).
    The mean context is the sequences' mean prompt plus the mean steps run since their admission,
    kept as running sums.  With ``runtime.chunked`` the prompts are
    prefilled instead in chunks beside the decodes, within the step's token budget
    (``batching.ChunkedPrompts``).  ``slo``: ``(seconds to first token,
    seconds between tokens)`` a request must meet to count in the goodput (``Load``).
    ``replicas``: engines that share the arrivals (``rate`` is theirs together), each request sent
    to the next in turn (round robin), each engine as above (``d`` replicas of a deployment), at
    its own pace, or in lockstep where they share their experts (``in_lockstep``: every step
    lasts as long as the slowest replica's).
    A deployment over ``p`` pipeline stages (``in_flight``) runs ``p`` batches at once, one in each
    stage, as vLLM's virtual engines and TensorRT-LLM's micro-batches do: each batch passes through
    every stage (a step lasts the whole pipeline's ``step``, its stages one after another) while
    the other stages run the other batches, so a replica is ``p`` engines, each with its share of
    the requests (in turn) and ``1/p`` of the KV-cache blocks (vLLM's rule, ``num_gpu_blocks //=
    pipeline_parallel_size``; a pool shared by alike batches, as TensorRT-LLM keeps it, gives each
    the same), run through the stages by ``batching.pipelined``: the stages are taken as even
    (each holds a batch ``1/p`` of its step), one batch a stage at a time.
    A speculative step (``StepModel.tokens_per_step`` = E > 1) runs a request for its first token
    and ``ceil((O - 1) / E)`` decode steps, each a gap of its duration over E tokens (the mean
    gap a streamed token waits; the acceptance's spread from step to step is not simulated), and
    reserves ``P + O + k`` tokens (``extra_tokens``)."""
    slo = check_run(step, output_tokens, requests, runtime, seed, slo, lengths)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise InputError(f"replicas must be a positive integer, got {replicas!r}", "replicas")
    step = checked_step(step)
    flight = in_flight(step)
    if flight > 1 and in_lockstep(step, replicas):
        raise InputError("pipeline stages beside attention data parallelism are not modelled (how the replicas' "
                         "batches in flight would meet at each all-to-all): serve it with p=1", "p")
    times = arrivals(requests, rate, seed)
    prompts, outputs = request_lengths(step, output_tokens, requests, lengths, seed)
    check_budget(prompts, runtime)
    overhead = float(runtime.step_overhead + getattr(step, "kernels", 0) * runtime.kernel_overhead)
    if getattr(step, "draft_launches", None):
        step = WithDraftLaunches(step, float(runtime.kernel_overhead))
    extra = getattr(step, "extra_tokens", 0)
    blocks, needs = request_blocks(step, runtime, [p + o + extra for p, o in zip(prompts, outputs)], flight)
    per_step = getattr(step, "tokens_per_step", 1)
    if per_step != 1 and runtime.allocation != "reserve":
        raise InputError("speculative decoding under load is modelled with the KV blocks of a request's whole "
                         "length reserved at admission (allocation 'reserve', --kv-allocation reserve): on demand, "
                         "blocks follow whole tokens and a step gains a mean of fractional ones", "allocation")
    if per_step != 1 and lengths.prompts != "fixed":
        raise InputError("speculative decoding under load is modelled with prompts of one length (its steps count "
                         "the context from the prompt): give lengths' prompts 'fixed' (--prompt-lengths fixed)",
                         "lengths")
    slots = [_steps_for(o, per_step) for o in outputs]
    # engine e: replica e mod replicas, batch in flight e // replicas (requests in turn: to the replicas as before)
    stride = replicas * flight
    groups = [range(engine, requests, stride) for engine in range(min(stride, requests))]   # none past them
    def of(values, mine):
        return [values[i] for i in mine]
    kind = engine_kind(runtime)
    engines = [kind(step, of(slots, mine), of(times, mine), runtime, blocks, of(needs, mine), of(prompts, mine))
               for mine in groups]
    runs = _run(engines, overhead, replicas, flight, in_lockstep(step, replicas),
                getattr(step, "stage_shares", None))
    first, finished, steps_run, last = [0.0] * requests, [0.0] * requests, [], 0.0
    for mine, (yielded, done, gaps, end) in zip(groups, runs):
        for request, at, leaves in zip(mine, yielded, done):
            first[request], finished[request] = at, leaves
        steps_run, last = steps_run + gaps, max(last, end)
    if per_step != 1:                              # each step's gap holds that many tokens of a sequence
        steps_run = [(duration / float(per_step), count) for duration, count in steps_run]
    return measured_load(times, first, finished, steps_run, prompts, outputs,
                         float(runtime.request_overhead), last, slo)


def checked_step(step):
    """``step`` as a simulation runs it: a ``StepModel`` as it is, the caller's own callable
    wrapped in ``CheckedStep`` (``serve`` and ``inference.disaggregated.serve_disaggregated``)."""
    return step if isinstance(step, StepModel) else CheckedStep(step)


class CheckedStep:
    """A step model of the caller's own (any callable with a ``prompt``) whose every price is
    checked to be a number before the simulation adds to it (a text or ``None`` met the step's
    overhead as a ``TypeError``); its range is ``checks.timed``'s.  Every other attribute is the
    step's."""

    def __init__(self, step):
        self.step = step

    def __call__(self, prompts, decoding, context) -> float:
        price = self.step(prompts, decoding, context)
        if isinstance(price, bool) or not isinstance(price, (int, float, Fraction, Rational)):
            raise InputError(f"step: a step's price must be a number of seconds, got {shown(price)}", "step")
        return float(price)

    def __getattr__(self, name):
        return getattr(self.step, name)

    def __repr__(self):                 # a refusal that shows the step shows the caller's
        return repr(self.step)


class WithDraftLaunches:
    """``step`` (a speculative ``StepModel``) with its draft's kernel launches priced where they
    run, ``kernel_overhead`` seconds each (``Runtime.kernel_overhead``): a step that decodes runs
    the draft's ``k`` decode steps (``k`` times its operations), a step that prefills runs its
    prefill once (its operations once), so a prefill alone no longer pays for ``k`` decodes.
    Every other attribute is the step's."""

    def __init__(self, step, kernel_overhead: float):
        self.step, self.kernel_overhead = step, kernel_overhead

    def __call__(self, prompts, decoding, context) -> float:
        decodes, prefill = self.step.draft_launches
        launches = (decodes if decoding else 0) + (prefill if prompts else 0)
        return self.step(prompts, decoding, context) + launches * self.kernel_overhead

    def __getattr__(self, name):
        return getattr(self.step, name)


def engine_kind(runtime: Runtime):
    """The engine ``runtime`` describes, as a state ``inference.batching`` drives: vLLM's blocks on
    demand (``paged.OnDemand``), SGLang's admission by estimate (``estimated.Estimated``), or blocks
    reserved with prompts prefilled whole or in chunks (``batching.WholePrompts``,
    ``batching.ChunkedPrompts``)."""
    return {"on-demand": paged.OnDemand, "estimate": estimated.Estimated}.get(runtime.allocation) \
        or (ChunkedPrompts if runtime.chunked else WholePrompts)


def _run(engines: list, overhead: float, replicas: int, flight: int, together: bool, shares=None) -> list[tuple]:
    """The ``result`` of each of ``serve``'s engines (engine ``e`` of replica ``e mod replicas``):
    ``together`` in lockstep, else each replica's ``flight`` batches through its pipeline (its
    stages' ``shares`` of a step), or each engine alone."""
    if together:
        return lockstep(engines, overhead)
    if flight == 1:
        return [alone(engine, overhead) for engine in engines]
    runs = [None] * len(engines)
    for replica in range(min(replicas, len(engines))):
        mine = range(replica, len(engines), replicas)
        for engine, run in zip(mine, pipelined([engines[e] for e in mine], overhead, flight, shares)):
            runs[engine] = run
    return runs


def stage_shares(arch, p: int) -> tuple | None:
    """Each of ``p`` stages' share of a step where they hold unequal layers, as an engine splits them
    (``parallel.splits.engine_stages``): its layers over the model's (the ends not counted apart);
    ``None`` where ``p`` divides the layers.

    >>> from symbolic_cost.models.config import preset
    >>> stage_shares(preset("gpt2"), 5), stage_shares(preset("gpt2"), 4)
    ((Fraction(1, 6), Fraction(1, 6), Fraction(1, 4), Fraction(1, 4), Fraction(1, 6)), None)
    """
    sizes = uneven_stages(arch.depth, p)
    return None if sizes is None else tuple(Fraction(n, sum(sizes)) for n in sizes)


def in_flight(step) -> int:
    """Batches a deployment runs at once (``StepModel.in_flight``: one a pipeline stage; 1 for a
    step that states none)."""
    flight = getattr(step, "in_flight", 1)
    if isinstance(flight, bool) or not isinstance(flight, int) or not 1 <= flight <= MAX_STAGES:
        raise InputError(f"step.in_flight (the batches a deployment runs at once, one a pipeline stage) must be an "
                         f"integer from 1 to {MAX_STAGES:,}, got {flight!r}", "in_flight")
    return flight


MAX_STAGES = 1024
"""Most pipeline stages a load test runs (each a batch in flight): past any model's layers."""


def in_lockstep(step, replicas: int) -> bool:
    """Whether ``serve`` runs its ``replicas`` in lockstep (``inference.batching.lockstep``): more
    than one, sharing their experts (``StepModel.lockstep``: attention data parallelism), whatever
    the engine (reserved blocks, vLLM's on demand, SGLang's rounds)."""
    return replicas > 1 and getattr(step, "lockstep", False)


def request_lengths(step, output_tokens: int, requests: int, lengths: Lengths, seed: int) -> tuple[list, list]:
    """``(prompts, outputs)``: each request's tokens (``inference.lengths.requests_of``), a drawn
    length cut where the model's context ends (``StepModel.context_tokens``), an output at
    ``MAX_OUTPUT`` tokens in any case (each is a step simulated)."""
    context = step.context_tokens() if isinstance(step, StepModel) else None
    prompts, outputs = requests_of(step.prompt, output_tokens, requests, lengths, seed, context)
    return prompts, [min(o, MAX_OUTPUT) for o in outputs]


def blocks_for(step, tokens: int, block_tokens: int) -> int:
    """Blocks a sequence of ``tokens`` tokens fills in ``step``'s pool (``StepModel.blocks_for``),
    ``ceil(tokens / block_tokens)`` for a step that does not say."""
    own = getattr(step, "blocks_for", None)
    return own(tokens, block_tokens) if own else -(-tokens // block_tokens)


def request_blocks(step, runtime: Runtime, lengths: list[int], share: int = 1) -> tuple[float, list[int]]:
    """``(blocks in an engine's pool, the blocks each request of ``lengths`` tokens reserves)``
    (``cache_limit``, which refuses the longest where the pool cannot hold it); ``share``: the
    engines the pool is split among (``serve``'s batches in flight)."""
    blocks, _ = cache_limit(step, runtime, max(lengths), share)
    return blocks, [0 if blocks == math.inf else blocks_for(step, n, runtime.block_tokens) for n in lengths]


MAX_OUTPUT = 2**20
"""Most tokens a request generates in a simulation: each is a step simulated; a million is past
every model's context (a billion ran for ever)."""


def _steps_for(output_tokens: int, per_step) -> int:
    """Steps a request runs for its ``output_tokens``: the first token from its prefill, then
    ``per_step`` tokens a decode step (one; a speculative decoder's expected tokens, exact).

    >>> _steps_for(11, 1), _steps_for(11, Rational(5, 2)), _steps_for(12, Rational(5, 2))
    (11, 5, 6)
    """
    return output_tokens if per_step == 1 else 1 + int(ceiling(Rational(output_tokens - 1) / per_step))


def measured_load(times, first, finished, steps_run, prompts, outputs, front, last, slo) -> Load:
    """The ``Load`` of a simulated run of requests of ``prompts`` and ``outputs`` tokens each: each
    request's time to first token (plus the front end's ``front``) and end-to-end latency, the
    steps' inter-token gaps, and, with ``slo`` (seconds of time to first token and of mean
    inter-token latency), the requests that meet it.  The throughputs are over the benchmark's
    clock, from the first request's arrival to the last token's delivery, ``last + front``
    (``last``: the engine's last token; vLLM's ``benchmark_serving`` and TensorRT-LLM's benchmark
    stop their clock when the last response is in), so no request's latency outlasts the run."""
    if not times:
        raise InputError("a load test measures at least one request, got none", "times")
    requests, generated = len(times), sum(outputs)
    span = last + front - times[0]
    ttft = [f - t + front for f, t in zip(first, times)]
    e2e = [f - t + front for f, t in zip(finished, times)]
    gaps = [(duration, count) for duration, count in steps_run if count]
    itl = percentiles(gaps, PERCENTILES) if gaps else dict.fromkeys(PERCENTILES)
    whole = [(value, 1) for value in ttft]
    out = dict(mean_ttft=sum(ttft) / requests,
               mean_itl=sum(d * c for d, c in gaps) / sum(c for _, c in gaps) if gaps else None,
               request_throughput=requests / span, total_token_throughput=(sum(prompts) + generated) / span,
               output_token_throughput=generated / span, mean_e2e=sum(e2e) / requests,
               **{f"p{q}_ttft": v for q, v in percentiles(whole, PERCENTILES).items()},
               **{f"p{q}_itl": itl[q] for q in PERCENTILES},
               **{f"p{q}_e2e": v for q, v in percentiles([(value, 1) for value in e2e], PERCENTILES).items()})
    if slo is not None:
        limit_ttft, limit_itl = slo
        per_token = [(end - start) / (tokens - 1) if tokens > 1 else 0.0
                     for start, end, tokens in zip(first, finished, outputs)]
        met = sum(1 for t, i in zip(ttft, per_token) if t <= limit_ttft and i <= limit_itl)
        out.update(slo_attained=met / requests, goodput=met / span)
    return Load(**out)


def check_level(level) -> int:
    """The SLO's percentile, one of ``PERCENTILES``, or ``InputError``."""
    if isinstance(level, bool) or not isinstance(level, int) or level not in PERCENTILES:
        raise InputError(f"the SLO's percentile must be one of {', '.join(map(str, PERCENTILES))}, got {level!r}",
                         "level")
    return level


def sustained_rate(step: StepModel, output_tokens: int, slo: tuple, level: int = 90, requests: int = 500,
                   runtime: Runtime = Runtime(), seed: int = 0, rounds: int = 16,
                   simulate=None, lengths: Lengths = FIXED) -> tuple[float, Load | None]:
    """The highest request rate (requests/s, Poisson) whose load test keeps the ``level``-th
    percentile (one of ``PERCENTILES``) of the time to first token and of the inter-token latency within ``slo``
    (seconds: ``(ttft, itl)``), and the test at that rate; ``(0, None)`` where even a lone
    request misses it.  The rate is at most the engine's capacity (the rate it serves when every
    request arrives at once, ``capacity``): above it the queue, and the time to first token, grow without end,
    although a finite run of ``requests`` requests may still meet a loose bound on the time to
    first token (a search that doubled past the capacity answered 2^16 times it).  The interval
    below the capacity is halved ``rounds`` times (the capacity itself is never the answer: a
    finite run at it may meet the bound only because it ends before its queue has grown); the seeded arrivals of a rate
    ``r`` are those of rate 1 scaled by ``1/r`` (``arrivals``), so the tests along the way differ
    by the rate alone, as are their output lengths (``lengths``, ``serve``'s).  ``simulate``: the load test,
    called as ``serve`` is (``None``: ``serve``; a disaggregated deployment passes
    ``disaggregated.serve_disaggregated`` with its pools)."""
    check_level(level)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 64:
        raise InputError(f"rounds (halvings of the rate's interval) must be an integer from 1 to 64, got {rounds!r}",
                         "rounds")
    limit_ttft, limit_itl = slo = check_slo(slo)
    check_gaps(slo, output_tokens)
    simulate = partial(simulate or serve, lengths=lengths)

    def meets(load: Load) -> bool:
        itl = getattr(load, f"p{level}_itl")
        return getattr(load, f"p{level}_ttft") <= limit_ttft and (itl is None or itl <= limit_itl)

    lone = simulate(step, output_tokens, None, 1, runtime, seed, slo)
    if not meets(lone):
        return 0.0, None
    low, best = 0.0, None
    # the engine's capacity bounds the rate: above it the queue grows without end, however loose
    # the bound on the time to first token that a finite run of requests still meets
    high = capacity(lambda burst: simulate(step, output_tokens, None, burst, runtime, seed, slo).request_throughput)
    for _ in range(rounds):     # below the capacity only: at it the queue of a long run grows without end
        middle = (low + high) / 2
        if middle < MIN_RATE:               # slower than arrivals' clock resolves: alone, as the lone request
            break
        load = simulate(step, output_tokens, middle, requests, runtime, seed, slo)
        if meets(load):
            low, best = middle, load
        else:
            high = middle
    return low, best


CONVERGED = Rational(1, 10)
"""How little a burst four times as large may add to the throughput of all-at-once requests before
it is taken as the engine's capacity (``capacity``): under the drain model ``B / (B / c + T)`` the
doubling stops within about 3 % of ``c`` (at 5 %, within 1.7 %, simulating twice the requests)."""
FIRST_BURST = 128
"""The burst ``capacity`` starts from, whatever the load test's own count of requests (from that
count, a run of 50 requests and one of 1,000 found capacities 10 % apart)."""
MAX_BURST = 2**16
"""The largest burst ``capacity`` simulates (each of its requests' tokens a step of some batch)."""


def capacity(burst_throughput) -> float:
    """The engine's capacity, requests/s: the throughput of ``FIRST_BURST`` requests arriving at
    once (``burst_throughput(n)``, a load test of ``n`` such requests), doubled while a burst four
    times as large adds more than ``CONVERGED`` of it, up to ``MAX_BURST``.  A burst no larger than
    the sequences an engine holds at once runs them as one batch, and its throughput is that
    batch's, not the engine's: Qwen3-30B-A3B on 8 H100 (TP4, PP2) serves 35 requests/s of 100 at
    once and 155 of 8,000.  A burst of ``B`` requests on an engine of capacity ``c`` whose last
    requests take ``T`` to drain serves about ``B / (B / c + T)``, so the doubling stops within a
    few per cent of ``c``.  Four times, not two: the throughput of a burst grows in steps as its
    batches fill (Llama 2 7B on one H100, 512 + 128 tokens: 26.2, 26.5, 28.2 and 29.1 requests/s for
    100 to 800 requests), so one small gain does not show the top.

    >>> capacity(lambda n: 40 * n / (n + 8))        # c = 40, T = 0.2 s: 128, 256, 512 (+4.6 % over 128)
    39.38461538461539
    >>> capacity(lambda n: 10 if n < 512 else 12)   # a plateau, then a step: 12, not 10
    12
    """
    if not callable(burst_throughput):
        raise InputTypeError(f"burst_throughput must be a function of a burst's requests giving its requests/s, "
                             f"got {shown(burst_throughput)}", "burst_throughput")
    rates = {FIRST_BURST: _rate(burst_throughput, FIRST_BURST)}
    burst = FIRST_BURST
    while 2 * burst <= MAX_BURST:
        burst *= 2
        rates[burst] = _rate(burst_throughput, burst)
        if burst >= 4 * FIRST_BURST and rates[burst] <= rates[burst // 4] * (1 + float(CONVERGED)):
            break
    return max(rates.values())


def _rate(burst_throughput, burst: int) -> float:
    """``burst_throughput(burst)``, refused unless a positive, finite number of requests/s."""
    rate = burst_throughput(burst)
    if isinstance(rate, bool) or not isinstance(rate, (int, float, Fraction, Rational)) or not 0 < rate < math.inf:
        raise InputError(f"burst_throughput({burst}) must be a positive, finite number of requests/s, got "
                         f"{shown(rate)}", "burst_throughput")
    return rate


def cache_limit(step, runtime: Runtime, length: int, share: int = 1) -> tuple[float, int]:
    """``(blocks in the pool, blocks a request reserves)``; ``(inf, 0)`` for a step that states no
    cache (``cache_blocks``); the pool split evenly among ``share`` engines (``floor``).  A request
    longer than the pool is refused: it would wait forever."""
    if not hasattr(step, "cache_blocks"):
        return math.inf, 0
    blocks = step.cache_blocks(runtime.block_tokens, runtime.memory_fraction, runtime.memory_of) // share
    need = blocks_for(step, length, runtime.block_tokens)
    if need > blocks:
        shared = f" (its share of a pool split among {share} batches in flight)" if share > 1 else ""
        raise InputError(f"a request of {length:,} tokens needs {need:,} KV-cache blocks of {runtime.block_tokens} "
                         f"tokens, and the memory left by the weights holds {blocks:,}{shared} at memory_fraction="
                         f"{float(runtime.memory_fraction):g}: a larger tensor or pipeline degree, a smaller KV "
                         f"format (--kv-dtype) or a shorter request", "memory_fraction")
    return blocks, need


_SCALES = (Rational(1, 10**3), Rational(1, 10**6), Rational(1, 10**3))
"""The units the fit searches in: milliseconds, microseconds, milliseconds."""
ROBUST = Rational(1, 10)
"""``f_scale`` of the fit's soft-L1 loss: residuals (log errors) beyond about 10 % count less
than squared, so the saturated load tests, whose time to first token depends on how the
benchmark's client admits requests (not stated), do not decide the fit alone."""


def robust_loss(residuals) -> float:
    """scipy's ``soft_l1`` cost with ``f_scale = ROBUST``: ``sum f^2 (sqrt(1 + (r/f)^2) - 1)``."""
    f = float(ROBUST)
    return sum(f * f * ((1 + (r / f) ** 2) ** 0.5 - 1) for r in residuals)


def serve_case(case, runtime, models: dict | None = None):
    """``inference.load.serve`` of a ``reproduce.measured.ServingCase`` on its calibrated system
    (``models`` caches the ``StepModel`` of each architecture and layout)."""
    models = {} if models is None else models
    key = (case.architecture, case.serving, case.system)
    if key not in models:
        models[key] = StepModel(case.architecture, case.serving, case.system)
    return serve(models[key], case.output_tokens, case.rate, case.requests, runtime, lengths=case.lengths)


def serving_residuals(cases, values, models: dict | None = None) -> list[float]:
    """``log(predicted / measured)`` of mean TTFT and mean ITL of every case under the overheads
    ``values`` (seconds, in ``SERVING`` order)."""
    import math
    runtime = Runtime(**{k: Rational(str(float(v))) for k, v in zip(SERVING, values)})
    out = []
    for case in cases:
        load = serve_case(case, runtime, models)
        out += [math.log(load.mean_ttft / case.measured["mean_ttft"]),
                math.log(load.mean_itl / case.measured["mean_itl"])]
    return out


def fit_serving(cases, progress=None) -> dict:
    """``{overhead: seconds}`` minimising ``robust_loss`` of the TTFT and ITL log errors over
    ``cases`` (``least_squares``, soft-L1, in ``_SCALES`` units bounded to [0, 100], finite
    differences of 5 %)."""
    import numpy as np
    from scipy.optimize import least_squares
    models: dict = {}
    scales = np.array([float(x) for x in _SCALES])

    def residuals(x):
        if progress:
            progress(x)
        return serving_residuals(cases, x * scales, models)

    result = least_squares(residuals, np.array([0.5, 3.0, 3.0]), bounds=(0.0, 100.0), diff_step=0.05, max_nfev=25,
                           loss="soft_l1", f_scale=float(ROBUST))
    return {k: v * s for k, v, s in zip(SERVING, result.x, scales)}
