"""Serving time and throughput as expressions: roofline time per phase, time to first token,
time per output token, tokens per second, memory per device, the largest batch that fits and
the batch where decode turns compute-bound.

Roofline per phase on a ``timing.hardware.System`` (``roofline="phase"``, the default)::

    t_compute = matrix FLOPs / their product rate + other FLOPs / vector FLOP/s
    t_memory  = bytes moved / HBM bandwidth      (weights once per step, the cache, activations)
    t         = max(t_compute, t_memory) + t_comm           (max of the two with overlap_comm)

``roofline="operation"`` sums each operation's own roofline instead (``timing.hardware.times``,
also under ``kernel_time="tiled"``).  On a calibrated system (``timing.hardware.calibrated``)
every operation takes its own calibrated roofline whatever ``roofline`` says (``calibrated_run``:
wave-quantised products at the fitted share of peak, bytes at the fitted share of HBM).  The
phase's collectives take ``timing.hardware.comm_time``.

* TTFT: the prefill's time.  TPOT: the mean decode step of the generation
  (``phases.mean_decode``: its first and last steps at half weight); generation takes
  ``TTFT + (l_out - 1) TPOT``, exactly so when a step's costs are linear in its context and
  every step sits on the same side of the roofline.
* Tokens per second: ``b / TPOT`` per replica while decoding, ``/ (m1 p)`` per device,
  ``x d`` for the job; end to end ``b l_out / (TTFT + (l_out - 1) TPOT)``.
* Memory per device at the end of generation: weights (the busiest pipeline stage), the KV
  cache of ``P + l_out - 1`` tokens (``kv_cache``), and the larger working set of the two phases.
  Under context parallelism (``Serving.cp``) only the prefill is modelled: ``prefill_fields``,
  with the cache each CP rank holds when it ends (``inference_cost`` refuses ``cp``).
* The largest batch: the most sequences whose peak (``inference.peak``: the worst moment of the
  generation, transients included) fits, ``floor((capacity - fixed) / per_sequence)`` at the
  tightest moment (0 if none fits), each moment being ``fixed + b per_sequence``; the crossover batch: ``t_compute(b) = t_memory(b)`` of a decode step,
  ``b* = (m_0 - c_0) / (c_1 - m_1)`` for times ``c_0 + b c_1`` and ``m_0 + b m_1``; where that is
  not positive, ``oo``: the step stays memory-bound at every batch (the cache's bytes grow with
  the batch as fast as its FLOPs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, Integer, Max, Piecewise, ceiling, oo

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.extrema import maximum
from symbolic_cost.inference.kv_cache import kv_cache_bytes
from symbolic_cost.inference.peak import fitting_batch
from symbolic_cost.inference.per_device import affine_in_batch, busiest_weights
from symbolic_cost.inference.phases import Phase, decode, mean_decode, prefill, weights_read
from symbolic_cost.inference.weight_formats import check_weights, weight_format
from symbolic_cost.inference.serving import (Serving, check_decode_context, encoder_tokens, final_tokens,
                                             prompt_tokens)
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.overheads import get_overheads
from symbolic_cost.timing import efficiency
from symbolic_cost.timing.hardware import comm_time, get_system, product_rate, step_time
from symbolic_cost.checks import InputError, exact

ROOFLINES = ("phase", "operation")


def phase_time(phase: Phase, system, conventions=conv.DEFAULT, roofline: str = "phase") -> dict[str, Expr]:
    """Seconds of one phase: ``compute``, ``memory``, ``comm`` and ``total`` (see the module docstring)."""
    if roofline not in ROOFLINES:
        raise InputError(f"roofline must be one of {', '.join(ROOFLINES)}, got {roofline!r}", "roofline")
    system, conventions = get_system(system), conv.get(conventions)
    compute = sum((n * r.flops_fwd / (product_rate(r, system) if r.engine == "matrix" else system.vector_flops)
                   for r, n in phase.rows()), Integer(0))
    memory = phase.bytes_moved / system.hbm_bandwidth
    comm = sum((n * comm_time(c, system, conventions) for c, n in phase.collectives), Integer(0))
    if system.efficiency is not None:
        compute, memory, run = calibrated_run(phase, system, conventions)
    elif roofline == "phase":
        run = maximum(compute, memory)
    else:       # each operation's roofline; its collectives are the comm term
        run = sum((n * (step_time([row], system, conventions, ("fwd",))
                        - sum((comm_time(c, system, conventions) for c in row.collectives if c.pass_ == "fwd"),
                              Integer(0))) for row, n in phase.rows()), Integer(0))
    total = maximum(run, comm) if conventions.overlap_comm else run + comm
    return {"compute": compute, "memory": memory, "comm": comm, "total": total}


def calibrated_run(phase: Phase, system, conventions, with_weights: bool = True, keep=None) -> tuple[Expr, Expr, Expr]:
    """``(compute, memory, run)`` seconds of a phase on a calibrated system: each row's
    ``timing.efficiency.pass_times``, summed, and ``run = sum max(compute, memory)`` over the rows.
    ``with_weights=False`` leaves the weight bytes each row reads (``phases.weights_read``) out of
    its memory time (a step whose weights another phase of the same pass already streams);
    ``keep``: the row names to price (``None``: every row)."""
    bandwidth = system.hbm_bandwidth * system.efficiency.memory
    compute = memory = run = Integer(0)
    for row, n in phase.rows():
        if keep is not None and row.name not in keep:
            continue
        c, m = efficiency.pass_times(row, "fwd", system, conventions)
        if not with_weights:
            m -= weights_read(row) / bandwidth
        compute, memory, run = compute + n * c, memory + n * m, run + n * maximum(c, m)
    return compute, memory, run


@dataclass(frozen=True)
class InferenceCost:
    """Every serving number of one configuration as expressions (bytes, seconds, tokens/s)."""

    architecture: Architecture
    serving: Serving
    prefill: Phase
    decode: Phase
    prefill_time: dict
    decode_time: dict
    weight_bytes: Expr
    kv_cache_bytes: Expr
    activation_bytes: Expr

    @property
    def memory_bytes(self) -> Expr:
        return self.weight_bytes + self.kv_cache_bytes + self.activation_bytes

    @property
    def ttft(self) -> Expr:
        """Time to first token (s): the prefill."""
        return self.prefill_time["total"]

    @property
    def tpot(self) -> Expr:
        """Time per output token (s): one decode step over the mean context."""
        return self.decode_time["total"]

    @property
    def generation_time(self) -> Expr:
        """Seconds for the whole request: ``TTFT + (l_out - 1) TPOT``."""
        return self.ttft + (self.serving.l_out - 1) * self.tpot

    @property
    def tokens_per_second(self) -> Expr:
        """Decode tokens per second of one replica: ``b / TPOT``."""
        return self.serving.b / self.tpot

    @property
    def tokens_per_second_per_device(self) -> Expr:
        return self.tokens_per_second / self.serving.replica_devices

    @property
    def tokens_per_second_per_job(self) -> Expr:
        return self.tokens_per_second * self.serving.d

    @property
    def end_to_end_tokens_per_second(self) -> Expr:
        """Generated tokens per second of one replica, prefill included: ``b l_out / generation_time``."""
        return self.serving.b * self.serving.l_out / self.generation_time


FIELDS = ("weight_bytes", "kv_cache_bytes", "activation_bytes", "memory_bytes", "prefill_flops", "prefill_bytes",
          "prefill_compute_s", "prefill_memory_s", "prefill_comm_s", "ttft_s", "decode_flops", "decode_bytes",
          "decode_weight_bytes", "decode_cache_bytes", "decode_compute_s", "decode_memory_s", "decode_comm_s",
          "tpot_s", "generation_s", "tokens_per_s", "tokens_per_s_per_device", "tokens_per_s_per_job",
          "end_to_end_tokens_per_s")
"""The serving numbers ``fields`` names: bytes per device, FLOPs and bytes moved of the prefill
and of a decode step, seconds (``_s``), tokens per second."""


def fields(cost: InferenceCost) -> dict[str, Expr]:
    """Every ``FIELDS`` entry of ``cost`` as an expression."""
    out = {name: getattr(cost, name) for name in ("weight_bytes", "kv_cache_bytes", "activation_bytes",
                                                  "memory_bytes")}
    for name, phase, time in (("prefill", cost.prefill, cost.prefill_time), ("decode", cost.decode, cost.decode_time)):
        out.update({f"{name}_flops": phase.flops, f"{name}_bytes": phase.bytes_moved})
        if name == "decode":
            out.update(decode_weight_bytes=phase.weight_bytes_read, decode_cache_bytes=phase.cache_bytes_read)
        out.update({f"{name}_{part}_s": time[part] for part in ("compute", "memory", "comm")})
    out.update(ttft_s=cost.ttft, tpot_s=cost.tpot, generation_s=cost.generation_time,
               tokens_per_s=cost.tokens_per_second, tokens_per_s_per_device=cost.tokens_per_second_per_device,
               tokens_per_s_per_job=cost.tokens_per_second_per_job,
               end_to_end_tokens_per_s=cost.end_to_end_tokens_per_second)
    return {name: out[name] for name in FIELDS}


def inference_cost(arch: Architecture, serving: Serving = Serving(), system="h100", conventions=conv.DEFAULT,
                   roofline: str = "phase", l_ctx=None) -> InferenceCost:
    """The serving numbers of ``arch`` under ``serving`` on ``system``; the decode step runs over
    ``l_ctx`` cached tokens (default: the mean step of the generation, ``phases.mean_decode``).

    >>> from symbolic_cost.models.config import preset
    >>> cost = inference_cost(preset("llama-2-7b"), Serving(b=1, l_in=512, l_out=128))
    >>> cost.decode_time["memory"] > cost.decode_time["compute"]    # decode is bandwidth-bound
    True
    """
    conventions = conv.get(conventions)
    first = prefill(arch, serving, conventions)          # checks the model and the serving first
    check_weights(weight_format(serving.weights), get_system(system))
    if l_ctx is not None:
        l_ctx = exact(l_ctx, "l_ctx")          # never a boolean, a list or NaN into the comparisons
        check_decode_context(arch, serving, l_ctx)
    step = mean_decode(arch, serving, conventions) if l_ctx is None else decode(arch, serving, l_ctx, conventions)
    cache = kv_cache_bytes(arch, serving.b, final_tokens(arch, serving), encoder=encoder_tokens(arch, serving),
                           m1=serving.m1, p=serving.p, kv_dtype=serving.kv, page=serving.page,
                           mla=serving.mla)
    return InferenceCost(arch, serving, first, step, phase_time(first, system, conventions, roofline),
                         phase_time(step, system, conventions, roofline), busiest_weights(arch, first), cache,
                         maximum(first.working_bytes, step.working_bytes))


PREFILL_FIELDS = ("weight_bytes", "kv_cache_bytes", "activation_bytes", "memory_bytes", "prefill_flops",
                  "prefill_bytes", "prefill_compute_s", "prefill_memory_s", "prefill_comm_s", "ttft_s")
"""The ``FIELDS`` of the prefill alone (``prefill_fields``), what context parallelism serves."""


def prefill_fields(arch: Architecture, serving: Serving = Serving(), system="h100", conventions=conv.DEFAULT,
                   roofline: str = "phase") -> dict[str, Expr]:
    """``PREFILL_FIELDS`` of the prefill on one device (under ``serving.cp``, one rank of the CP
    group): its weights, the cache of the ``P`` prompt tokens it holds when the prefill ends
    (``prefill_cache_bytes``), its working set, FLOPs, bytes, seconds and TTFT.

    >>> from symbolic_cost.models.config import preset
    >>> llama = preset("llama-2-7b")
    >>> one, four = (prefill_fields(llama, Serving(b=1, l_in=4096, l_out=1, flash=True, cp=cp)) for cp in (1, 4))
    >>> one["kv_cache_bytes"] == 4 * four["kv_cache_bytes"] == 4096 * 524288    # a rank caches its own tokens
    True
    """
    conventions = conv.get(conventions)
    first = prefill(arch, serving, conventions)
    time = phase_time(first, system, conventions, roofline)
    out = dict(weight_bytes=busiest_weights(arch, first), kv_cache_bytes=prefill_cache_bytes(arch, serving),
               activation_bytes=first.working_bytes, prefill_flops=first.flops, prefill_bytes=first.bytes_moved,
               ttft_s=time["total"], **{f"prefill_{part}_s": time[part] for part in ("compute", "memory", "comm")})
    out["memory_bytes"] = out["weight_bytes"] + out["kv_cache_bytes"] + out["activation_bytes"]
    return {name: out[name] for name in PREFILL_FIELDS}


def prefill_cache_bytes(arch: Architecture, s: Serving) -> Expr:
    """Cache bytes on one device when the prefill ends (``kv_cache.kv_cache_bytes`` of the ``P``
    prompt tokens).  Under ``cp`` each rank keeps the keys and values it made: ring and
    all-gather those of its ``l_in/cp`` tokens (the gathered ones are transient), Ulysses those
    of all ``l_in`` tokens for its ``1/cp`` of the key/value heads (as ``m1 cp`` tensor ranks)."""
    tokens, m1 = prompt_tokens(arch, s), s.m1
    if s.cp != 1:
        tokens, m1 = (tokens, m1 * s.cp) if s.cp_variant == "ulysses" else (tokens / s.cp, m1)
    return kv_cache_bytes(arch, s.b, tokens, encoder=encoder_tokens(arch, s), m1=m1, p=s.p, kv_dtype=s.kv,
                          page=s.page, mla=s.mla)


def max_batch(arch: Architecture, serving: Serving = Serving(), system="h100", conventions=conv.DEFAULT,
              overheads="none", beside=Integer(0)) -> Expr:
    """The most sequences whose serving peak (``inference.peak``: the worst moment of the
    prefill, the last decode step and their sampling) fits one device's memory
    (``System.hbm_capacity``) less the device's ``overheads`` (``models.overheads``; none by
    default), with ``beside`` bytes held too (in the symbol ``b``: a speculative draft's weights
    and cache, ``speculative.draft_beside``, by moment): ``peak.fitting_batch``.

    >>> from symbolic_cost.models.config import preset
    >>> llama = preset("llama-2-7b")          # 13.5 GB of weights; 2 GiB of bf16 cache a sequence
    >>> max_batch(llama, Serving(l_in=4000, l_out=96, flash=True)), max_batch(llama, Serving(
    ...     l_in=4000, l_out=96, flash=True, kv_dtype="fp8"))
    (30, 53)
    """
    system = get_system(system)
    system.require("the largest batch", "hbm_capacity")
    return fitting_batch(arch, serving, get_overheads(overheads).room(system.hbm_capacity), conventions, beside)


def crossover_batch(arch: Architecture, serving: Serving = Serving(), system="h100", conventions=conv.DEFAULT,
                    l_ctx=None) -> Expr:
    """The smallest whole batch at which a decode step over ``l_ctx`` cached tokens (default:
    the mean step) is compute-bound, ``t_compute(b) >= t_memory(b)``; ``oo`` where none is.

    Both times are affine in ``b``, ``c_0 + c_1 b`` and ``m_0 + m_1 b``: where ``c_1 > m_1``
    the step is compute-bound from the threshold ``(m_0 - c_0) / (c_1 - m_1)`` on, so the
    batch is its ceiling (at least 1); otherwise the cache's bytes grow with ``b`` at least as
    fast as its FLOPs and no batch crosses (``oo``, "never"), unless ``b = 1`` already does.
    With a symbol left in (``l_ctx``) the answer is that choice as a ``Piecewise``.

    >>> from symbolic_cost.models.config import preset
    >>> llama = preset("llama-2-7b")     # the ridge: 989.4 TFLOP/s / 3.35 TB/s = 295 FLOP per byte
    >>> crossover_batch(llama, Serving(l_in=1, l_out=2))    # unfused activations add bytes
    399
    >>> crossover_batch(llama, Serving(l_in=1000, l_out=2))    # 0.5 MiB of cache a token
    oo
    """
    cost = inference_cost(arch, replace(serving, b=S.b), system, conventions, l_ctx=l_ctx)
    c0, c1 = affine_in_batch(cost.decode_time["compute"], S.b, "a decode step's compute time")
    m0, m1 = affine_in_batch(cost.decode_time["memory"], S.b, "a decode step's memory time")
    slope, gap = c1 - m1, m0 - c0       # compute-bound at b where slope * b >= gap
    return Piecewise((Max(1, ceiling(gap / slope)), slope > 0), (1, gap <= slope), (oo, True))
