"""Disaggregated serving: prompts prefilled on one pool of instances, tokens decoded on another,
the KV cache sent between them (DistServe, Splitwise, NVIDIA Dynamo, the layouts aiconfigurator
searches).

A request arrives (Poisson, at the deployment's whole rate), goes to a prefill instance (round
robin), which prefills it as ``load.serve``'s engine does (whole prompts, or chunked under
``runtime.chunked``) and yields its first token: its time to first token ends there.  Its KV
cache is then sent to a decode instance (round robin), over the system's inter-node link: each
of the instance's ``m1 p`` devices sends its share in parallel (``kv_transfer_seconds``).  The
decode instance admits it when the cache has arrived and its limits allow (``max_batch``
sequences, the KV-cache blocks of the request's whole length), and decodes its other
``output_tokens - 1`` tokens with no prefill in its steps: a decode step is never held up by a
prompt, which is the point of disaggregating.  The gap from the first token to the second holds
the transfer and the wait for admission.

Every step is priced by the same ``load.StepModel`` and the same fitted overheads as an
aggregated engine's, so the two can be compared per GPU: a deployment of ``P`` prefill and
``D`` decode instances holds ``(P + D) m1 p`` devices.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from symbolic_cost.checks import InputError, InputTypeError, instance, shown, timed
from symbolic_cost.cost import Collective
from symbolic_cost.digits import whole_number
from symbolic_cost.inference.batching import chunked_steps, decoder, mean_context, whole_prompt_steps
from symbolic_cost.inference.lengths import FIXED, Lengths
from symbolic_cost.inference.load import (Load, Runtime, arrivals, check_budget, check_run, checked_step, in_flight,
                                          measured_load, request_blocks, request_lengths, seconds)
from symbolic_cost.timing.hardware import comm_time


MAX_INSTANCES = 4096
"""Most instances of a pool: as many as ``inference --devices`` takes devices (each instance holds
at least one); ten million ran past the time budget, blamed on a formula."""


@dataclass(frozen=True)
class Pools:
    """``prefill`` and ``decode`` instances, each a copy of the deployment (``m1 p`` devices)."""

    prefill: int
    decode: int

    def __post_init__(self):
        for name in ("prefill", "decode"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{name} instances (Pools.{name}; --disaggregate P:D) must be a positive integer, "
                                 f"got {value!r}", "disaggregate")
            if value > MAX_INSTANCES:
                raise InputError(f"{name} instances (Pools.{name}; --disaggregate P:D) must be at most "
                                 f"{MAX_INSTANCES:,} (each is a copy of the deployment, simulated one by one), got "
                                 f"{value:,}", "disaggregate")

    @classmethod
    def parse(cls, text: str) -> "Pools":
        """``"P:D"``, as ``--disaggregate`` takes it.

        >>> Pools.parse("1:3")
        Pools(prefill=1, decode=3)
        """
        prefill, colon, decode = str(text).partition(":")
        if not (colon and whole_number(prefill) and whole_number(decode)):
            raise InputError(f"--disaggregate takes P:D, the prefill and decode instances (1:3), got {text!r}",
                             "disaggregate")
        return cls(int(prefill), int(decode))


def kv_transfer_seconds(step) -> float:
    """Seconds to send one request's KV cache (its ``P`` prompt tokens) from a prefill instance to
    a decode instance: the busiest device's share (``step.kv_bytes(P)``) as one point-to-point
    send over InfiniBand, priced as the system prices any p2p (``timing.hardware.comm_time``;
    every device of the instance sends its shard at once, over its own link)."""
    if not callable(getattr(step, "kv_bytes", None)) or not hasattr(getattr(step, "system", None), "require"):
        raise InputTypeError(f"step must be a StepModel (inference.load: its system and the bytes of its KV cache), "
                             f"got {shown(step)}", "step")
    step.system.require("the KV-cache transfer of disaggregated serving", "ib_bandwidth")
    shard = step.kv_bytes(step.prompt)
    send = Collective("p2p", shard, 1, 2, "fwd", volume=shard)
    return float(comm_time(send, step.system, link="ib"))


def _decode_steps(step, tokens: list[int], ready: list[float], runtime: Runtime, overhead: float, blocks, needs,
                  prompts: list[int]):
    """A decode-only instance serving requests of ``prompts`` tokens whose caches arrive at
    ``ready`` (sorted), each decoding its ``tokens`` tokens (at least one) and reserving its
    ``needs`` blocks: ``(time of each request's first decoded token, of its last, [(step seconds,
    sequences past their first decoded token)])``.  A request admitted before step ``a`` decodes in
    steps ``a`` to ``a + tokens - 1``: the running ones are kept by that last step (a heap), so a
    step costs its admissions and departures, not a pass over the batch."""
    count = len(ready)
    second, last = [0.0] * count, [0.0] * count
    running, admitted_sum, prompt_sum, steps_run = [], 0, 0, []   # running: heap of (last step, step admitted, request)
    now, steps, nxt, reserved, prices = 0.0, 0, 0, 0, {}     # prices: batching.decoder of each batch
    while nxt < count or running:
        if not running and ready[nxt] > now:
            now = ready[nxt]
        admitted = []
        while nxt < count and ready[nxt] <= now and len(running) + len(admitted) < runtime.max_batch \
                and reserved + needs[nxt] <= blocks:
            admitted.append(nxt)
            admitted_sum, prompt_sum, reserved = admitted_sum + steps, prompt_sum + prompts[nxt], reserved + needs[nxt]
            nxt += 1
        for request in admitted:
            heapq.heappush(running, (steps + tokens[request] - 1, steps, request))
        decoding = len(running)
        # the mean prompt and its first token
        context = mean_context(prompt_sum / decoding + 1, steps, admitted_sum, decoding) if decoding else 0.0
        price = prices.get(decoding) or prices.setdefault(decoding, decoder(step, decoding, 0))
        duration = timed(price(context) + overhead)
        now = now + duration
        steps_run.append((duration, decoding - len(admitted)))
        for request in admitted:
            second[request] = now
        while running and running[0][0] == steps:
            _, started, request = heapq.heappop(running)
            last[request] = now
            admitted_sum, reserved = admitted_sum - started, reserved - needs[request]
            prompt_sum -= prompts[request]
        steps += 1
    return second, last, steps_run


def serve_disaggregated(step, output_tokens: int, rate, requests: int = 500, runtime: Runtime = Runtime(),
                        seed: int = 0, slo: tuple | None = None, *, pools: Pools, transfer: float | None = None,
                        lengths: Lengths = FIXED) -> Load:
    """``load.serve`` of a disaggregated deployment of ``pools`` (see the module docstring);
    ``transfer``: seconds to send a request's cache of ``P`` prompt tokens (``None``:
    ``kv_transfer_seconds``; a prompt of its own length sends in proportion); ``lengths``: the
    requests' prompt and output lengths, as ``load.serve`` draws them.  Every
    instance reserves a request's whole length (``Runtime.allocation="reserve"``); blocks on demand
    (``inference.paged``) are not modelled in the pools and are refused."""
    slo = check_run(step, output_tokens, requests, runtime, seed, slo, lengths)
    instance(pools, Pools, "pools", " (inference.disaggregated.Pools: Pools(prefill, decode))")
    step = checked_step(step)
    if getattr(step, "extra_tokens", 0) or getattr(step, "tokens_per_step", 1) != 1:   # a draft runs (at alpha = 0 too)
        raise InputError("speculative decoding in disaggregated pools is not modelled (the decode instances' "
                         "steps would run the draft); serve it aggregated", "speculation")
    if in_flight(step) > 1:
        raise InputError("pipeline stages in disaggregated pools are not modelled (an instance's batches in flight, "
                         "one a stage, as load.serve runs them aggregated): give the pools p=1", "p")
    if runtime.allocation != "reserve":
        raise InputError("disaggregated pools are modelled with the KV blocks of a request's whole length reserved "
                         "at admission (allocation 'reserve', --kv-allocation reserve), not on demand",
                         "allocation")
    times = arrivals(requests, rate, seed)
    prompts, outputs = request_lengths(step, output_tokens, requests, lengths, seed)
    check_budget(prompts, runtime)
    overhead = float(runtime.step_overhead + getattr(step, "kernels", 0) * runtime.kernel_overhead)
    transfer = kv_transfer_seconds(step) if transfer is None else seconds(transfer, "transfer")
    if not 0 <= transfer < math.inf:
        raise InputError(f"transfer must be a finite number of seconds, at least 0, got {transfer!r}", "transfer")
    run = chunked_steps if runtime.chunked else whole_prompt_steps
    first, finished = [0.0] * requests, [0.0] * requests
    # a prefill instance holds the prompt's cache
    blocks, needs = request_blocks(step, runtime, [p + 1 for p in prompts])
    for k in range(pools.prefill):
        mine = range(k, requests, pools.prefill)
        yielded = run(step, [1] * len(mine), [times[i] for i in mine], runtime, overhead, blocks,
                      [needs[i] for i in mine], [prompts[i] for i in mine])[0]
        for request, at in zip(mine, yielded):
            first[request] = finished[request] = at
    gaps = []
    decoded = [i for i in range(requests) if outputs[i] > 1]    # a one-token request ends at its prefill
    if decoded:
        blocks, needs = request_blocks(step, runtime, [p + o for p, o in zip(prompts, outputs)])
        for k in range(pools.decode):
            mine = sorted(decoded[k::pools.decode], key=lambda i: first[i])
            second, last, steps_run = _decode_steps(step, [outputs[i] - 1 for i in mine],
                                                    [first[i] + transfer * (prompts[i] / step.prompt) for i in mine],
                                                    runtime, overhead, blocks, [needs[i] for i in mine],
                                                    [prompts[i] for i in mine])
            gaps += steps_run + [(second[j] - first[i], 1) for j, i in enumerate(mine)]
            for j, i in enumerate(mine):
                finished[i] = last[j]
    return measured_load(times, first, finished, gaps, prompts, outputs, float(runtime.request_overhead),
                         max(finished), slo)
