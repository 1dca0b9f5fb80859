"""Serving a model: memory per device (weights, KV cache, activations), prefill and decode time,
TTFT, TPOT, throughput, the largest batch that fits and the batch where decode turns
compute-bound.

Without ``--field`` the serving symbols take their ``--set`` values or the defaults (b=1,
l_in=512, l_out=128, one device; the mean decode step of the generation).  ``--field`` prints
fields as exact formulas in whichever of ``b, l_in, l_out`` are not set (``--set l_ctx=l_ctx``
asks for one decode step over a symbolic context, ``--set B=B`` for symbolic pages);
``--grid`` evaluates them over a grid of values, as CSV in base units.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from fractions import Fraction

from sympy import Rational, oo, simplify, sympify

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, listed_once, shown
from symbolic_cost.cli import options
from symbolic_cost.cli.parser import ascii_only
from symbolic_cost.cli.bookkeeping import numbers_needed
from symbolic_cost.cli.building import model_config, refuse_expert_degrees
from symbolic_cost.cli.values import (amount, architecture, assignments, conventions, grid_option, grid_values, number,
                                      resolve)
from symbolic_cost.inference import KV_FORMATS, Serving, kv_bytes_per_token
from symbolic_cost.inference.kv_cache import MLA_FORMS
from symbolic_cost.inference.engines import ENGINES
from symbolic_cost.inference.lengths import SHAPES, Lengths
from symbolic_cost.inference.load import ALLOCATIONS, LIMITS, MAX_REQUESTS, MIN_RATE
from symbolic_cost.inference.peak import serving_peak, serving_timeline
from symbolic_cost.inference.serving import check_context, check_context_parallel, check_decode_context, final_tokens
from symbolic_cost.inference.speculative import MAX_DRAFT, draft_beside, speculative_fields
from symbolic_cost.models import config as hf
from symbolic_cost.models.overheads import get_overheads
from symbolic_cost.inference.weight_formats import WEIGHT_FORMATS, check_weights, weight_format, widened_on
from symbolic_cost.blocks.context import VARIANTS as CP_VARIANTS
from symbolic_cost.inference.throughput import (FIELDS, PREFILL_FIELDS, ROOFLINES, crossover_batch, fields,
                                                inference_cost, max_batch, prefill_fields)
from symbolic_cost.numeric.sweep import sweep
from symbolic_cost.timing.hardware import get_system

SERVING_SYMBOLS = (S.b, S.l_in, S.l_out, S.l_ctx, S.m1, S.p, S.d, S.ep, S.etp, S.B, S.cp)
DEFAULTS = {S.b: 1, S.l_in: 512, S.l_out: 128, S.m1: 1, S.p: 1, S.d: 1, S.ep: 1, S.cp: 1}
"""The serving defaults (``l_ctx``: the mean context of the generation; ``B``: no paging;
``etp``: ``m1/ep``, ``Serving``'s)."""

EXTRA = ("peak_bytes", "max_batch", "crossover_batch", "kv_bytes_per_token")
ALL_FIELDS = FIELDS + EXTRA
"""What ``--field`` may name: ``inference.throughput.FIELDS``, the peak of a generation
(``inference.peak``), the largest batch whose peak fits, the crossover batch and the cache's
bytes per token."""

EXAMPLES = [
    "symbolic-cost inference --preset llama-2-7b --set b=8 l_in=2048 l_out=256 --system h100",
    "symbolic-cost inference --preset llama-2-7b --set b=32 l_in=4000 l_out=96 m1=2 --kv-dtype fp8 --set B=16",
    "symbolic-cost inference --preset mistral-7b --field kv_cache_bytes,tpot_s --set l_out=1",
    "symbolic-cost inference --preset llama-2-7b --grid b=1,8,64 l_in=512,3968 --field tpot_s,tokens_per_s",
    "symbolic-cost inference --preset llama-2-7b --set l_in=467 l_out=256 --system h100 --rate 8",
    "symbolic-cost inference --preset mistral-7b --set l_in=16384 cp=4 --flash --cp-variant ring",
]


grid_type = grid_option((S.b, S.l_in, S.l_out, S.l_ctx, S.B))
"""``--grid``'s check: ``NAME=V1,V2,...`` with NAME one of ``b, l_in, l_out, l_ctx, B``, read by the
safe reader (``values.grid_option``)."""


def add_arguments(parser) -> None:
    options.model(parser)
    options.settings(parser, help="NAME=VALUE pairs for b, l_in, l_out, l_ctx (the decode step's cached tokens), "
                                  "m1, p, d (replicas), ep and etp (expert parallelism), cp (context parallelism of "
                                  "the prefill: the prefill alone is reported) and B (tokens per KV-cache page) "
                                  "(defaults: b=1, l_in=512, l_out=128, every degree 1 but etp=m1/ep, no paging; "
                                  "without l_ctx the mean decode step)")
    group = parser.add_argument_group("serving")
    options.precision(group)
    options.option(group, "--kv-dtype", choices=list(KV_FORMATS),
                   help="format of the KV cache (default: --precision's)")
    options.option(group, "--weights", choices=list(WEIGHT_FORMATS),
                   help="format of the layers' matrix weights: fp8, fp8-block and mxfp8 multiply on FP8 tensor "
                        "cores (weight-only where there are none: a100), nvfp4 on FP4 ones (b200, b300, gb200, gb300), "
                        "int4, mxfp4-experts and bitsandbytes' nf4 and nf4-double are weight-only "
                        "(default: the format the config.json's quantization_config stores, else --precision's)")
    options.flash(group)
    options.option(group, "--mla", choices=MLA_FORMS, default=MLA_FORMS[0], action=options.Given,
                   help="multi-head latent attention: the latent cache decoded absorbed, or up-projected again "
                        "at each step (transformers), or decompressed keys and values cached")
    options.option(group, "--roofline", choices=ROOFLINES, default=ROOFLINES[0],
                   help="with --ideal: one roofline for the whole phase, or one per operation (the calibrated "
                        "model takes one per operation)")
    options.option(group, "--allow-long", action="store_true",
                   help="allow more tokens than the model's context")
    options.option(group, "--cp-variant", choices=CP_VARIANTS, default=CP_VARIANTS[0], action=options.Given,
                   help="with --set cp=N, how the prefill's attention sees the whole prompt: ring (K, V passed "
                        "point to point, Megatron-LM; default), all-gather (Llama 3) or ulysses (all-to-all of "
                        "heads); decode under CP is not modelled")
    speculation = parser.add_argument_group("speculative decoding")
    options.option(speculation, "--speculative", type=options.integer(1, MAX_DRAFT), metavar="K",
                   help="K draft tokens a step, verified by the model in one step (inference.speculative; with "
                        "--acceptance and a draft model; under --rate and --slo-* too, with KV blocks reserved)")
    options.option(speculation, "--acceptance", type=_share("--acceptance", zero=True), metavar="A",
                   help="the probability that the model accepts a draft token (0 to 1; measured on your traffic)")
    draft = speculation.add_mutually_exclusive_group()
    options.option(draft, "--draft-preset", choices=options.MODELS, metavar="NAME",
                   help="the draft model, a bundled one (its vocabulary must be the model's)")
    options.option(draft, "--draft-hf-config", metavar="PATH", help="the draft model's Hugging Face config.json")
    options.option(draft, "--draft-mtp", action="store_true", default=None,
                   help="the model's own multi-token-prediction module as the draft, run K times a step "
                        "(DeepSeek-V3's; SGLang's and TensorRT-LLM's MTP speculative decoding)")
    load = parser.add_argument_group("under load")
    options.option(load, "--rate", type=_rate, metavar="R",
                   help="simulate in-flight batching of requests arriving at R per second (Poisson; 'inf': all at "
                        "once), each of l_in prompt and l_out output tokens, on the calibrated system with the "
                        "fitted runtime overheads: mean TTFT, mean inter-token latency, request and token throughput")
    options.option(load, "--requests", type=options.integer(1, MAX_REQUESTS), default=500, metavar="N", action=options.Given,
                   help="requests in the --rate simulation, as many as TensorRT-LLM's published load tests send; "
                        "at most 100,000 (about 20-30 s of the 120 s budget); --devices sends this many to each copy "
                        "of a layout")
    options.option(load, "--output-lengths", choices=list(SHAPES), default="fixed", action=options.Given,
                   help="fixed: every request generates l_out tokens (a synthetic benchmark's max_tokens); "
                        "geometric: each request's length drawn with mean l_out, as a dataset's answers end where "
                        "they end (inference.lengths; cut at the model's context)")
    options.option(load, "--prompt-lengths", choices=list(SHAPES), default="fixed", action=options.Given,
                   help="fixed: every prompt l_in tokens; geometric: each drawn with mean l_in, as a dataset's "
                        "(inference.lengths)")
    options.option(load, "--engine", choices=list(ENGINES), default="trtllm", action=options.Given,
                   help="the serving engine whose defaults the simulation starts from (inference.engines: limits, "
                        "KV-cache pool and pages, chunked prefill; the fitted overheads are the same for each): "
                        "trtllm (TensorRT-LLM since 0.14, the default), vllm (V1, vllm serve) or sglang")
    options.option(load, "--max-batch", type=options.integer(1, LIMITS["max_batch"]), metavar="N",
                   action=options.Given,
                   help="the engine's most sequences in flight (TensorRT-LLM's max_batch_size, vLLM's max_num_seqs, "
                        "SGLang's max_running_requests; default: the --engine's)")
    options.option(load, "--max-tokens", type=options.integer(1, LIMITS["max_tokens"]), metavar="N",
                   action=options.Given,
                   help="the engine's most tokens a step (max_num_tokens, vLLM's max_num_batched_tokens, SGLang's "
                        "chunked_prefill_size; default: the --engine's); without chunked prefill a longer prompt is "
                        "refused, as the engines refuse it")
    options.option(load, "--chunked-prefill", action=argparse.BooleanOptionalAction, default=None,
                   help="prefill prompts in chunks beside the decodes, within --max-tokens a step (TensorRT-LLM's "
                        "enable_chunked_context; default: the --engine's: off for trtllm, on for vllm and sglang)")
    options.option(load, "--memory-fraction", type=_fraction, metavar="F", action=options.Given,
                   help="share of the memory the engine gives the KV cache (after the weights): of the memory the "
                        "weights leave for trtllm (free_gpu_memory_fraction), of the device's whole memory for vllm "
                        "(gpu_memory_utilization) and sglang (mem_fraction_static); default: the --engine's")
    options.option(load, "--kv-allocation", choices=list(ALLOCATIONS), metavar="HOW", action=options.Given,
                   help="how a request gets KV-cache blocks: reserve (the blocks of its whole length when admitted: "
                        "TensorRT-LLM's GUARANTEED_NO_EVICT), on-demand (as its tokens come, the request scheduled "
                        "last preempted and recomputed when they run out: vLLM) or estimate (as its tokens come, "
                        "admitted by an estimate of what the running requests will still write, prefill before "
                        "decode, retracted when short: SGLang); default: the --engine's")
    options.option(load, "--block-tokens", type=options.integer(1, LIMITS["block_tokens"]), metavar="N",
                   action=options.Given,
                   help="tokens per KV-cache block (TensorRT-LLM's tokens_per_block 32, vLLM's block_size 16, "
                        "SGLang's page_size 1; default: --set B's page, else the --engine's)")
    options.option(load, "--disaggregate", type=_pools, metavar="P:D", action=options.Given,
                   help="serve on P prefill and D decode instances of the deployment (each m1 x p devices), the KV "
                        "cache sent between them over the system's InfiniBand (inference.disaggregated); the rate is "
                        "the whole deployment's")
    options.option(load, "--devices", type=options.integer(1, 4096), metavar="N", action=options.Given,
                   help="rank the serving layouts of N devices (tensor degree 1, 2, 4 or 8; replicas, or prefill:decode "
                        "splits) by the request rate the SLO allows (inference.serving_search); needs --slo-ttft or "
                        "--slo-itl")
    options.option(load, "--batch-limits", type=options.integer(1, LIMITS["max_batch"]), nargs="+", metavar="N",
                   action=options.Given,
                   help="with --devices: try every layout under each of these caps on the sequences an engine runs "
                        "at once (its --max-batch; at most 8 caps), besides the engine's own: a lower cap queues "
                        "requests to keep each step short, where the ITL objective binds")
    options.option(load, "--slo-ttft", type=_seconds("--slo-ttft"), metavar="S",
                   help="a service-level objective on the time to first token, seconds: with --rate, the goodput "
                        "(requests/s meeting every --slo-*); without it, the highest rate whose --slo-percentile "
                        "TTFT and ITL meet them")
    options.option(load, "--slo-itl", type=_seconds("--slo-itl"), metavar="S",
                   help="a service-level objective on the inter-token latency, seconds (as --slo-ttft)")
    options.option(load, "--slo-percentile", type=int, choices=(50, 90, 99), default=90, action=options.Given,
                   help="the percentile of TTFT and ITL the highest sustained rate keeps within the SLO")
    options.counting(parser)
    options.time_model(parser)
    options.units(parser)
    options.overheads(parser)
    options.option(parser, "--field", type=options.field_list(ALL_FIELDS), metavar="F1,F2,...",
                   help="print these as formulas (or, with --grid, as CSV columns): " + ", ".join(ALL_FIELDS))
    options.option(parser, "--grid", type=grid_type, action="extend", nargs="+", metavar="NAME=V1,V2,...",
                   help="evaluate --field over these values of b, l_in, l_out, l_ctx, B, as CSV; "
                   "listed or as ranges (b=1:64:x2 doubles, l_in=512:4096:+512 adds 512)")
    options.option(parser, "--json", action="store_true", help="JSON in bytes, FLOPs and seconds instead of text")


def _pools(text: str):
    """``P:D`` prefill and decode instances (``disaggregated.Pools``)."""
    from symbolic_cost.inference.disaggregated import Pools
    try:
        return Pools.parse(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _rate(text: str):
    """A request rate: a positive number of requests/s, or ``"inf"`` (all at once)."""
    if text.strip().lower() in ("inf", "infinity"):
        return "inf"
    try:
        value = float(ascii_only(text))
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"--rate must be a positive number of requests/s or 'inf', got {shown(text)}")
    if value < MIN_RATE:
        raise argparse.ArgumentTypeError(f"--rate must be at least {MIN_RATE} requests/s (a slower clock passes what "
                                         f"a double resolves), got {shown(text)}")
    return value


def _share(flag: str, zero: bool = False):
    """An option type: a share in (0, 1] (``[0, 1]`` with ``zero``), exact (``0.9`` is 9/10)."""
    def read(text: str) -> Fraction:
        try:
            value = Fraction(ascii_only(text).strip())
        except (ValueError, ZeroDivisionError):
            value = None
        if value is None or not (0 <= value if zero else 0 < value) or value > 1:
            raise argparse.ArgumentTypeError(f"{flag} must be a number in {'[0' if zero else '(0'}, 1], got "
                                             f"{shown(text)}")
        return value
    return read


_fraction = _share("--memory-fraction")


def _seconds(flag: str):
    """An option type: a positive, finite number of seconds."""
    def read(text: str) -> float:
        try:
            value = float(ascii_only(text))
        except ValueError:
            value = float("nan")
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"{flag} must be a positive number of seconds, got {shown(text)}")
        return value
    return read


def refuse_itl_without_gaps(args, serving) -> None:
    """Refuse ``--slo-itl`` for requests of one output token: they have no gap between tokens to
    bound (``load.check_gaps``, the Python API's rule, named by its option)."""
    from symbolic_cost.inference.load import check_gaps
    check_gaps((args.slo_ttft or float("inf"), args.slo_itl or float("inf")), serving.l_out, "--slo-itl", "--slo-itl",
               "give --slo-ttft alone")


def load_test(args, arch, serving) -> dict:
    """``inference.load.serve`` of the configuration at ``--rate`` with the ``--engine``'s limits
    (``inference.engines``; ``--max-batch``, ``--max-tokens``, ``--memory-fraction``,
    ``--block-tokens``, ``--chunked-prefill`` over them) and the SLO (``--slo-ttft``,
    ``--slo-itl``): ``{quantity: value}`` in seconds, requests/s and tokens/s (``None`` where no
    request has two tokens to time a gap between), with the engine, whether it chunks its
    prefills, and its sequence and token limits.  Without ``--rate``, the
    highest rate the SLO allows (``load.sustained_rate``) as ``sustained_rate``, and the test at it."""
    from dataclasses import asdict
    from functools import partial
    from symbolic_cost.inference.disaggregated import kv_transfer_seconds, serve_disaggregated
    from symbolic_cost.inference.load import StepModel, in_flight, in_lockstep, serve, sustained_rate
    if not (serving.l_in.is_Integer and serving.l_out.is_Integer):
        raise InputError("--rate and --slo-* need numeric l_in and l_out (--set l_in=... l_out=...)", "rate")
    refuse_itl_without_gaps(args, serving)
    drafting = speculation(args, arch)
    step = StepModel(arch, serving, args.system, conventions(args), speculation=drafting)
    runtime = engine_runtime(args, arch, serving)(step, serving.m1)
    slo = None if args.slo_ttft is None and args.slo_itl is None else \
        (args.slo_ttft or float("inf"), args.slo_itl or float("inf"))
    engine = {"engine": args.engine, "chunked_prefill": runtime.chunked, "max_batch": runtime.max_batch,
              "max_tokens": runtime.max_tokens, "kv_allocation": runtime.allocation,
              "block_tokens": runtime.block_tokens}
    replicas = int(serving.d) if serving.d.is_Integer else 1
    simulate, engine["replicas"] = partial(serve, replicas=replicas), replicas
    engine["lockstep"] = in_lockstep(step, replicas)
    engine["in_flight"] = in_flight(step)        # batches a replica runs at once: one a pipeline stage
    engine["prompt_lengths"], engine["output_lengths"] = args.prompt_lengths, args.output_lengths
    lengths = Lengths(args.prompt_lengths, args.output_lengths)
    if drafting is not None:
        engine["speculative"] = {"k": drafting.k, "acceptance": number(drafting.acceptance),
                                 "draft": drafting.draft.name, "tokens_per_step": number(step.tokens_per_step)}
    if args.disaggregate is not None:
        if replicas > 1:
            raise InputError("--disaggregate gives the instances (P prefill, D decode); d replicas of each would be "
                             "the same copies: leave d=1", "disaggregate")
        pools = args.disaggregate
        simulate = partial(serve_disaggregated, pools=pools)
        engine["pools"] = {"prefill": pools.prefill, "decode": pools.decode,
                           "devices": int((pools.prefill + pools.decode) * serving.m1 * serving.p),
                           "kv_transfer_s": kv_transfer_seconds(step)}
    if args.rate is None:
        rate, at = sustained_rate(step, int(serving.l_out), slo, args.slo_percentile, args.requests, runtime,
                                  simulate=simulate, lengths=lengths)
        return {"sustained_rate": rate, **(asdict(at) if at else {}), **engine}
    rate = None if args.rate == "inf" else args.rate
    return {**asdict(simulate(step, int(serving.l_out), rate, args.requests, runtime, slo=slo,
                              lengths=lengths)), **engine}


SHORT_RUN = 0.9
"""A load test whose throughput is under this share of the rate it was sent ended before a
queue could build (the engine never held what a long run at that rate would hand it)."""


def served_weights(args, arch):
    """``(arch, weights)``: ``--weights``, or where it is not given the format the model's
    checkpoint stores (``models.config.stored_weights``: DeepSeek-V3's block-scaled FP8,
    GPT-OSS's MXFP4 experts), which an engine loads as it is; said in a note on ``arch`` either way
    the config states one."""
    if args.weights is not None:
        weights, said = args.weights, None
    else:
        weights, remark = hf.stored_weights(model_config(args))
        said = remark if weights is None else (f"weights as the checkpoint stores them (config.json's "
                                               f"quantization_config): {weights}{f' ({remark})' if remark else ''}; "
                                               f"--weights chooses another format")
    check_weights(weight_format(weights), get_system(args.system))
    said = [n for n in (said, widened_on(weight_format(weights), get_system(args.system))) if n]
    return replace(arch, notes=(*arch.notes, *said)), weights


def configuration(args, keep=()):
    """The model, the ``Serving`` value and the decode step's ``l_ctx`` (``None``: the mean
    step) from the options; the symbols in ``keep`` stay symbols unless set."""
    arch = architecture(args)
    if options.given(args, "mla") and arch.latent is None:
        raise InputError(f"--mla chooses how latent attention caches and decodes, and {arch.name} has none; "
                         f"it would be ignored", "--mla")
    base = {k: v for k, v in DEFAULTS.items() if k not in keep}
    values = resolve(base, args.set, allowed=SERVING_SYMBOLS)
    refuse_expert_degrees(arch, resolve({}, args.set, allowed=SERVING_SYMBOLS))
    value = lambda symbol: values.get(symbol, symbol)  # noqa: E731
    page = values.get(S.B, S.B if S.B in keep else None)
    arch, weights = served_weights(args, arch)
    serving = Serving(b=value(S.b), l_in=value(S.l_in), l_out=value(S.l_out), m1=value(S.m1), p=value(S.p),
                      d=value(S.d), ep=value(S.ep), etp=values.get(S.etp, S.etp if S.etp in keep else None), precision=args.precision,
                      kv_dtype=args.kv_dtype, page=page, flash=args.flash, allow_long=args.allow_long, mla=args.mla,
                      weights=weights, cp=value(S.cp), cp_variant=args.cp_variant)
    if options.given(args, "cp_variant") and serving.cp == 1:
        raise InputError("--cp-variant chooses how context parallelism splits the prefill; set cp=N too (--set "
                         "cp=N), or it would be ignored", "--cp-variant")
    if serving.cp != 1 and (l_ctx := values.get(S.l_ctx)) is not None:
        raise InputError(f"l_ctx={l_ctx} sets a decode step, and decode under context parallelism is not "
                         f"modelled (cp={serving.cp}): the prefill alone is reported", "l_ctx")
    return arch, serving, values.get(S.l_ctx, S.l_ctx if S.l_ctx in keep else None)


def _check_grid_context(args, grid: dict, keep) -> None:
    """Refuse a grid whose longest generation (the largest ``l_in`` and ``l_out``), or largest
    ``l_ctx``, passes the model's context, whose least ``l_ctx`` is fewer tokens than its largest
    prompt, or (under ``cp``) a prompt the context-parallel chunks do not divide: the rules ``--set``
    applies (``serving.check_context``, ``check_decode_context``, ``check_context_parallel``), named
    at the grid's point that breaks them."""
    arch, serving, _ = configuration(args, keep)
    most = {name: int(max(grid[name])) for name in ("l_in", "l_out") if name in grid}
    at = replace(serving, **most)
    checks = [(", ".join(f"{name}={value}" for name, value in most.items()), lambda: check_context(arch, at))]
    if "l_ctx" in grid:
        high, low = int(max(grid["l_ctx"])), int(min(grid["l_ctx"]))
        checks += [(f"l_ctx={high}", lambda: check_decode_context(arch, at, high)),
                   (f"l_in={at.l_in}, l_ctx={low}", lambda: check_decode_context(arch, at, low))]
    if serving.cp != 1:         # each prompt cut into the context-parallel chunks, as --set cuts one
        checks += [(f"l_in={int(v)}", lambda v=v: check_context_parallel(arch, replace(serving, l_in=int(v))))
                   for v in grid.get("l_in", [])]
    for point, check in checks:
        try:
            check()
        except InputError as error:
            raise InputError(f"--grid at {point or 'its values'}: {error}", "--grid") from None


def expressions(args, names, keep=()) -> dict:
    """``{field: expression}`` for ``names``."""
    arch, serving, l_ctx = configuration(args, keep)
    chosen, system = conventions(args), get_system(args.system)     # the peak: memory and the crossover
    if serving.cp != 1:
        return _prefill_expressions(args, arch, serving, names)
    out = {}
    if set(names) & set(FIELDS):
        timed = options.timed_system(args)
        out.update(fields(inference_cost(arch, serving, timed, chosen, args.roofline, l_ctx)))
    if "peak_bytes" in names:
        out["peak_bytes"] = serving_peak(arch, serving, chosen)
    if "max_batch" in names:
        spec = speculation(args, arch)
        beside = 0 if spec is None else draft_beside(spec, replace(serving, b=S.b), chosen)
        out["max_batch"] = max_batch(arch, serving, system, chosen, args.overheads, beside)
    if "crossover_batch" in names:
        out["crossover_batch"] = crossover_batch(arch, serving, system, chosen, l_ctx)
    if "kv_bytes_per_token" in names:
        out["kv_bytes_per_token"] = kv_bytes_per_token(arch, m1=serving.m1, kv_dtype=serving.kv, mla=serving.mla)
    return {name: out[name] for name in names}


def _prefill_expressions(args, arch, serving, names) -> dict:
    """``{field: expression}`` under context parallelism: the prefill's fields only
    (``throughput.prefill_fields``); a decode field is refused by name."""
    decode = [name for name in names if name not in PREFILL_FIELDS]
    if decode:
        raise InputError(f"{', '.join(decode)}: decode under context parallelism (cp={serving.cp}) is not modelled; "
                         f"with cp the fields are {', '.join(PREFILL_FIELDS)}", "field")
    out = prefill_fields(arch, serving, options.timed_system(args), conventions(args), args.roofline)
    return {name: out[name] for name in names}


def kind(field: str) -> str | None:
    """What a field measures, for ``--units``."""
    if field.endswith("_bytes") or field == "kv_bytes_per_token":
        return "bytes"
    return {"flops": "flops", "s": "seconds"}.get(field.rsplit("_", 1)[-1])


def run(args) -> int:
    options.honour_json_units(args)
    if (args.field or args.grid) and options.given(args, "units"):
        raise InputError(f"--units does not apply to {'--grid (CSV in base units)' if args.grid else '--field'}: its "
                         f"formulas are in FLOPs, bytes and seconds; it would be ignored", "--units")
    if args.roofline != ROOFLINES[0] and not args.ideal:
        raise InputError("--roofline chooses between peak-only rooflines; add --ideal (the calibrated model "
                         "prices every operation on its own roofline)", "roofline")
    if getattr(args, "kernel_time", None) == "tiled" and args.roofline == ROOFLINES[0]:
        raise InputError(f"--kernel-time tiled prices each operation's kernel: add --roofline {ROOFLINES[1]} (one "
                         f"roofline for the whole {ROOFLINES[0]} would ignore it)", "kernel-time")
    if args.rate is not None and (args.grid or args.field):
        raise InputError("--rate prints a load test; it does not combine with --field or --grid", "rate")
    if args.json and (args.grid or args.field):
        other = "--grid prints CSV" if args.grid else "--field prints formulas"
        raise InputError(f"--json applies to the report; {other} (it would be ignored)", "--json")
    if options.given(args, "overheads") and (args.grid or args.field) and "max_batch" not in (args.field or []):
        raise InputError("--overheads changes the largest batch that fits; with --field or --grid name max_batch "
                         "(the other fields count the tensors only)", "--overheads")
    simulated = args.rate is not None or args.slo_ttft is not None or args.slo_itl is not None
    if options.given(args, "slo_percentile") and args.slo_ttft is None and args.slo_itl is None:
        raise InputError("--slo-percentile sets the percentile --slo-ttft and --slo-itl hold to; give one of them "
                         "(the load test reports p50, p90 and p99 anyway): it would be ignored", "--slo-percentile")
    if options.given(args, "slo_percentile") and args.rate is not None and args.devices is None:
        raise InputError("--slo-percentile sets the percentile the highest sustained rate (no --rate) keeps within "
                         "the SLO; at a given --rate the goodput counts each request against the SLO: it would be "
                         "ignored", "--slo-percentile")
    for name in ("requests", "output_lengths", "prompt_lengths", "engine", "max_batch", "max_tokens", "memory_fraction", "block_tokens",
                 "slo_percentile", "chunked_prefill", "disaggregate", "kv_allocation"):
        if (options.given(args, name) or (name == "chunked_prefill" and args.chunked_prefill is not None)) \
                and not simulated:
            raise InputError(f"--{name.replace('_', '-')} sets the --rate simulation; give --rate (or --slo-ttft, "
                             f"--slo-itl) too", name)
    if simulated and (args.grid or args.field):
        raise InputError("--slo-* runs load tests; it does not combine with --field or --grid", "slo_ttft")
    _check_speculation(args)
    if not (args.grid or args.field):       # the report and the layout search print numbers
        given = resolve({}, args.set, allowed=SERVING_SYMBOLS)     # a symbol the model fixes: refused by name
        numbers_needed(given, set(given), "inference (its report; --field prints formulas)")
    if args.devices is not None:
        return layout_search(args)
    if args.batch_limits is not None:
        raise InputError("--batch-limits sets the layout search's caps; give --devices (or one cap with "
                         "--max-batch)", "--batch-limits")
    if args.grid:
        grid = {str(k): v for k, v in grid_values(args.grid, assignments(args.set)).items()}
        plain = ["ttft_s", "tpot_s", "tokens_per_s", "memory_bytes"]
        names = args.field or (plain if resolve({}, args.set, allowed=SERVING_SYMBOLS).get(S.cp, 1) == 1
                               else ["ttft_s", "memory_bytes"])
        keep = tuple(S.BY_NAME[name] for name in grid)
        _check_grid_context(args, grid, keep)
        result = sweep(expressions(args, names, keep), grid=grid)
        print(result.to_csv(index=False), end="")
        return 0
    if args.field:
        keep = (S.b, S.l_in, S.l_out)
        for name, expr in expressions(args, args.field, keep).items():
            expr = simplify(expr)
            print(f"{name} = none: decode never turns compute-bound" if name == "crossover_batch" and expr == oo
                  else f"{name} = {expr}")
        return 0
    return report(args)


SPECULATIVE = ("speculative", "acceptance", "draft_preset", "draft_hf_config", "draft_mtp")
DRAFTS = ("draft_preset", "draft_hf_config", "draft_mtp")


def _check_speculation(args) -> None:
    """Refuse speculative decoding's options given in part, or beside what does not model it (a
    layout search, formulas and grids: the report and the load test answer it)."""
    given = [name for name in SPECULATIVE if getattr(args, name, None) is not None]
    if not given:
        return
    missing = [f"--{name.replace('_', '-')}" for name in ("speculative", "acceptance") if name not in given]
    if missing or not (set(DRAFTS) & set(given)):
        raise InputError(f"speculative decoding needs --speculative K, --acceptance A and a draft (--draft-preset, "
                         f"--draft-hf-config or --draft-mtp); missing {', '.join(missing) or 'the draft'}",
                         missing[0] if missing else "--draft-preset")
    beside = next((flag for flag, on in (("--grid", bool(args.grid)), ("--field", bool(args.field))) if on), None)
    cp = resolve({}, args.set, allowed=SERVING_SYMBOLS).get(S.cp, 1)
    if cp != 1:
        raise InputError(f"--speculative drafts decode tokens, and under context parallelism (cp={cp}) the prefill "
                         f"alone is reported; it would be ignored", "--speculative")
    if beside:
        raise InputError(f"--speculative is reported for one configuration; {beside} does not model it (it would "
                         f"be ignored)", "--speculative")
    if resolve(dict(DEFAULTS), args.set, allowed=SERVING_SYMBOLS).get(S.l_out) == 1:
        raise InputError("--speculative drafts the tokens after the first, and l_out=1 has none (a prefill-only "
                         "request); it would be ignored", "--speculative")


def speculation(args, arch):
    """The ``inference.speculative.Speculation`` of the options, or None."""
    if args.speculative is None:
        return None
    from symbolic_cost.inference.speculative import Speculation
    from symbolic_cost.models import config as hf
    if args.draft_mtp:
        from symbolic_cost.inference.drafts import MtpDraft
        draft = MtpDraft(arch)
    else:
        draft = hf.load(args.draft_hf_config) if args.draft_hf_config else hf.preset(args.draft_preset)
    return Speculation(draft, args.speculative, Rational(args.acceptance.numerator, args.acceptance.denominator))


def layout_search(args) -> int:
    """``--devices N``: the serving layouts of N devices ranked by the rate the SLO allows
    (``inference.serving_search.rank``), as a table or ``--json``."""
    from symbolic_cost.inference import serving_search
    if args.slo_ttft is None and args.slo_itl is None:
        raise InputError("--devices ranks layouts by the rate an SLO allows: give --slo-ttft or --slo-itl", "devices")
    for flag, name in (("--rate", "rate"), ("--disaggregate", "disaggregate")):
        if getattr(args, name) is not None:
            raise InputError(f"{flag}: --devices tries every layout and finds each one's rate; it would be ignored",
                             name)
    if args.batch_limits is not None:       # a cap twice was tried once, unsaid
        listed_once(args.batch_limits, "--batch-limits")
    if args.batch_limits is not None and len(args.batch_limits) > serving_search.BATCH_LIMITS:
        raise InputError(f"--batch-limits takes at most {serving_search.BATCH_LIMITS} caps (each a load test of every "
                         f"layout), got {len(args.batch_limits)}", "--batch-limits")
    if args.batch_limits is not None and args.max_batch is not None:
        raise InputError("--max-batch fixes the engine's cap and --batch-limits tries several: give one",
                         "--batch-limits")
    typed = {str(k) for k in assignments(args.set)}
    if typed - {"l_in", "l_out"}:       # b, the page B, l_ctx: a load test's requests and engine set them
        raise InputError(f"--devices chooses the tensor degree and the replicas, and its load tests the batches; "
                         f"--set gives the request (l_in, l_out) only, got {', '.join(sorted(typed - {'l_in', 'l_out'}))}",
                         "--set")
    arch, serving, _ = configuration(args)
    if not (serving.l_in.is_Integer and serving.l_out.is_Integer):
        raise InputError("--devices needs numeric l_in and l_out (--set l_in=... l_out=...)", "devices")
    refuse_itl_without_gaps(args, serving)
    slo = (args.slo_ttft or float("inf"), args.slo_itl or float("inf"))
    runtime_of = serving_search.capped(engine_runtime(args, arch, serving), args.batch_limits or ())
    ranked, left = serving_search.rank(arch, serving, args.system, args.devices, slo, args.slo_percentile,
                                       serving_search.Effort(args.requests), runtime_of, conventions(args),
                                       speculation=speculation(args, arch),
                                       lengths=Lengths(args.prompt_lengths, args.output_lengths))
    if args.json:
        print(json.dumps({"model": arch.name, "devices": args.devices, "system": args.system, "engine": args.engine,
                          "prompt_lengths": args.prompt_lengths, "output_lengths": args.output_lengths,
                          "slo": {"ttft": args.slo_ttft, "itl": args.slo_itl, "percentile": args.slo_percentile},
                          "layouts": ranked, "left_out": left}, indent=1))
        return 0
    q = args.slo_percentile
    print(f"{arch.name} on {args.devices} {args.system} devices, l_in={serving.l_in} l_out={serving.l_out}, "
          f"{args.engine}; ranked by the highest rate whose p{q} TTFT and ITL meet the SLO")
    if ranked and all(row["rate"] == 0 for row in ranked):
        print(f"no layout meets the SLO: a lone request misses its p{q} TTFT or ITL on every one; the layouts "
              f"below are ranked by nothing")
    capped = args.batch_limits is not None
    for row in ranked:
        row["shown"] = row["layout"] + (f", max batch {row['max_batch']:,}" if capped else "")
    width = max([34] + [len(row["shown"]) for row in ranked])       # the aggregated layouts fit 34
    for i, row in enumerate(ranked, 1):
        ttft, itl = row[f"p{q}_ttft"], row[f"p{q}_itl"]
        print(f"{i:3}. {row['shown']:{width}} {row['rate']:10.4g} requests/s ({row['rate_per_device']:.4g} a device); "
              f"p{q} TTFT {'-' if ttft is None else f'{ttft:.4g} s'}, ITL {'-' if itl is None else f'{itl:.4g} s'}")
    for row in left:
        cap = f", max batch {row['max_batch']:,}" if capped and "max_batch" in row else ""
        if not row.get("not_tried"):
            print(f"left out: {row.get('layout') or 'TP' + str(row['m1'])}{cap}: {row['reason']}")
    _print_not_tried([row for row in left if row.get("not_tried")], capped)
    return 0


def _print_not_tried(rows: list, capped: bool) -> None:
    """The layouts past the search's budget (``serving_search.SEARCH_STEPS``), on one line with the
    reason and what tries them."""
    if rows:
        names = "; ".join(row["layout"] + (f", max batch {row['max_batch']:,}" if capped else "") for row in rows)
        print(f"{rows[0]['reason']}; fewer --requests a copy, or fewer --devices or --batch-limits, try more: "
              f"{names}")


def engine_runtime(args, arch, serving):
    """``runtime_of(step, m1)``: the ``load.Runtime`` of ``--engine`` for a deployment of tensor
    degree ``m1`` (``inference.engines.runtime``), with the limits given on the command line over
    the engine's defaults."""
    from symbolic_cost.inference import engines
    fraction = None if args.memory_fraction is None else \
        Rational(args.memory_fraction.numerator, args.memory_fraction.denominator)
    context = arch.context or int(serving.l_in + serving.l_out)     # none stated: the request's length
    block = load_block(args, serving)

    def runtime_of(step, m1):
        return engines.runtime(args.engine, step, args.system, m1, context, max_batch=args.max_batch,
                               max_tokens=args.max_tokens, block_tokens=block, memory_fraction=fraction,
                               chunked=args.chunked_prefill, allocation=args.kv_allocation)
    return runtime_of


def load_block(args, serving) -> int | None:
    """The load test's KV-cache block: ``--block-tokens``, else the page ``--set B`` gives (the
    report's pages and the engine's blocks are one setting; before, the load test kept the
    engine's block beside a report paged in B), else ``None`` (the engine's).  The two given
    apart, or a page past a ``Runtime``'s largest block, are refused."""
    page = serving.page
    if page is None or not page.is_Integer:
        return args.block_tokens
    if args.block_tokens is not None and args.block_tokens != int(page):
        raise InputError(f"--set B={page} pages the KV cache in {page} tokens and --block-tokens {args.block_tokens} "
                         f"in {args.block_tokens}: give one", "--block-tokens")
    if int(page) > LIMITS["block_tokens"]:
        raise InputError(f"--set B={page}: a load test's KV-cache blocks (B, --block-tokens) are at most "
                         f"{LIMITS['block_tokens']:,} tokens", "B")
    return int(page)


def _why_none_fits(out: dict, overheads, capacity) -> str:
    """Why not even one sequence fits a device: the weights alone exceed its memory, or they fit and
    one sequence's cache and activations beside them do not (a page of a million tokens)."""
    if float(overheads.device_bytes(out["weight_bytes"])) > float(capacity):
        return "the weights alone exceed the device's memory"
    return "the weights fit, but not one sequence's KV cache and activations beside them"


def report(args) -> int:
    """The text (or ``--json``) report of one configuration."""
    arch, s, l_ctx = configuration(args)
    if s.cp != 1:
        return _prefill_report(args, arch, s)
    names = [name for name in ALL_FIELDS if arch.moe is None or name != "crossover_batch"]
    out = {name: None if value == oo else number(value) for name, value in expressions(args, names).items()}
    never = arch.moe is None and out["crossover_batch"] is None     # JSON: null, as the text's "never"
    load = load_test(args, arch, s) if args.rate is not None or args.slo_ttft or args.slo_itl else None
    spec = speculation(args, arch)
    speculative = None if spec is None else {
        name: number(value) for name, value in speculative_fields(arch, s, spec, options.timed_system(args),
                                                                  conventions(args), args.roofline).items()}
    moments = {m.name: number(m.bytes) for m in serving_timeline(arch, s, conventions(args))}
    at = max(moments, key=moments.get)                  # the first of equals, as peak.peak_moment
    overheads = get_overheads(args.overheads)
    capacity = get_system(args.system).hbm_capacity
    if speculative is not None:
        _draft_fits(spec, speculative["draft_bytes"], out["peak_bytes"], capacity, args.system)
    if l_ctx is not None:
        arch = _past_the_request(arch, s, l_ctx)
    if s.p != 1 and load is None:        # the report prices one batch; an engine keeps one in each stage
        arch = replace(arch, notes=(*arch.notes, f"the b={s.b} sequences pass the p={s.p} stages as one batch, one "
                                                 f"stage at work at a time; an engine keeps a batch in each stage "
                                                 f"(--rate simulates that)"))
    if args.json:
        notes = {"notes": list(arch.notes)} if arch.notes else {}   # config.json keys accepted without effect
        extra = {"device_bytes": number(overheads.device_bytes(out["peak_bytes"]))} if overheads.counted else {}
        print(json.dumps({"model": arch.name, **out, "peak_at": at, "peak_moments": moments,
                          "capacity_bytes": number(capacity), "overheads": args.overheads, **extra,
                          **({"load": load} if load else {}),
                          **({"speculative": dict(k=spec.k, acceptance=number(spec.acceptance), draft=spec.draft.name,
                                                  **speculative)} if spec else {}), **notes}, indent=1))
        return 0
    size = lambda name: amount(out[name], "bytes", args.units)  # noqa: E731
    flops = lambda name: amount(out[name], "flops", args.units)  # noqa: E731
    seconds = lambda name: amount(out[name], "seconds", args.units)  # noqa: E731
    kv = s.kv.name
    weights = f" (layer weights {s.weights})" if s.weights else ""
    print(f"{arch.name}: b={s.b} l_in={s.l_in} l_out={s.l_out} m1={s.m1} p={s.p} d={s.d} {s.precision}{weights}, "
          f"KV cache {kv}{f' in pages of {s.page} tokens' if s.page is not None else ''}, on {args.system}")
    print(f"memory per device: weights {size('weight_bytes')}, KV cache {size('kv_cache_bytes')} "
          f"({out['kv_bytes_per_token'] / 2**10:.4g} KiB per token), activations {size('activation_bytes')}; total "
          f"{size('memory_bytes')} of {amount(capacity, 'bytes', args.units)}")
    device = amount(overheads.device_bytes(out["peak_bytes"]), "bytes", args.units)
    print(f"peak per device: {size('peak_bytes')} at the {at} ("
          + ", ".join(f"{name} {amount(value, 'bytes', args.units)}" for name, value in moments.items()) + "); "
          + (f"with the {args.overheads} GPU overheads {device}" if overheads.counted
             else "GPU overheads not counted (--overheads hopper)"))
    held = overheads.device_bytes(out["peak_bytes"])
    if capacity and float(held) > float(capacity):
        print(f"does not fit: the peak of {amount(held, 'bytes', args.units)} is past {args.system}'s "
              f"{amount(capacity, 'bytes', args.units)}; the times below are what the steps would take with the memory")
    print(f"prefill: {flops('prefill_flops')}, {size('prefill_bytes')} moved; compute {seconds('prefill_compute_s')}, "
          f"memory {seconds('prefill_memory_s')}, comm {seconds('prefill_comm_s')}: TTFT {seconds('ttft_s')}")
    context = "mean decode step" if l_ctx is None else f"decode step over l_ctx={l_ctx}"
    decodes = l_ctx is not None or sympify(s.l_out) != 1      # one token out is the prefill's alone
    if decodes:
        print(f"{context}: {flops('decode_flops')}, {size('decode_bytes')} moved (weights "
              f"{size('decode_weight_bytes')}, KV cache {size('decode_cache_bytes')}); compute "
              f"{seconds('decode_compute_s')}, memory {seconds('decode_memory_s')}, comm {seconds('decode_comm_s')}: "
              f"TPOT {seconds('tpot_s')}")
    rates = (f"; tokens/s while decoding: {out['tokens_per_s']:.6g} per replica, {out['tokens_per_s_per_device']:.6g} "
             f"per device, {out['tokens_per_s_per_job']:.6g} per job") if decodes else " (l_out=1: no decode step)"
    print(f"generation: {seconds('generation_s')}{rates}; end to end {out['end_to_end_tokens_per_s']:.6g} per replica")
    crossover = out.get("crossover_batch")
    turns = "decode never turns compute-bound (the cache's bytes grow with b as fast as its FLOPs)" if never \
        else f"decode turns compute-bound at b = {crossover}" if crossover is not None \
        else "where decode turns compute-bound is not solved (the experts a step reads grow with b; see --grid)"
    most = out["max_batch"] if out["max_batch"] > 0 else f"none ({_why_none_fits(out, overheads, capacity)})"
    print(f"largest batch whose peak fits: {most}; {turns}")
    if spec:
        _print_speculation(args, spec, speculative, out)
    if load:
        _print_load(args, load)
    for note in arch.notes:
        print(f"note: {note}")
    return 0



def _past_the_request(arch, s, l_ctx):
    """``arch`` with a note where the decode step is priced over more cached tokens than the
    request's last step reads (``l_in + l_out - 2``): memory, the peak and the largest batch still
    describe the request's own cache."""
    last = final_tokens(arch, s) - 1
    if not (sympify(l_ctx) - last).is_positive:
        return arch
    return replace(arch, notes=(*arch.notes, f"the decode step is priced over l_ctx={l_ctx} cached tokens, past "
                                             f"this request's last step ({last}); memory, the peak and the largest "
                                             f"batch describe the request's cache of {last + 1} tokens (raise l_out "
                                             f"to size them at l_ctx)"))


def _draft_fits(spec, draft_bytes, peak_bytes, capacity, system: str) -> None:
    """Refuse a draft whose weights and cache, beside a served model's peak that fits, pass the
    device's memory: the peak and the largest batch are the served model's alone, and would read
    as if the draft took nothing (a model that does not fit alone is reported so already)."""
    if capacity and peak_bytes <= capacity < draft_bytes + peak_bytes:
        raise InputError(f"the draft {spec.draft.name} holds {draft_bytes / 2**30:.4g} GiB a device beside the served "
                         f"model's peak of {peak_bytes / 2**30:.4g} GiB: more than {system}'s "
                         f"{float(capacity) / 2**30:.4g} GiB (a smaller draft, or more devices: --set m1=)",
                         "--draft-preset")


def _print_speculation(args, spec, got: dict, out: dict) -> None:
    seconds = lambda value: amount(value, "seconds", args.units)  # noqa: E731
    print(f"speculative decoding: {spec.k} tokens a step from {spec.draft.name}, each accepted with probability "
          f"{float(spec.acceptance):.4g}: {got['tokens_per_step']:.4g} tokens a step; step {seconds(got['step_s'])} "
          f"({spec.k} draft steps of {seconds(got['draft_step_s'])}, verification {seconds(got['verify_s'])}); "
          f"TPOT {seconds(got['tpot_s'])} (without: {seconds(out['tpot_s'])}), {got['tokens_per_s']:.6g} tokens/s "
          f"per replica; the draft's prefill adds {seconds(got['draft_prefill_s'])} to TTFT and its weights and "
          f"cache {amount(got['draft_bytes'], 'bytes', args.units)} a device")


def _prefill_report(args, arch, s) -> int:
    """The report under context parallelism: one CP rank's prefill (``throughput.prefill_fields``)."""
    if args.rate is not None:
        raise InputError(f"--rate simulates decoding, and decode under context parallelism (cp={s.cp}) is not "
                         f"modelled", "rate")
    if options.given(args, "overheads"):
        raise InputError(f"--overheads counts against the peak of a whole generation, and under context "
                         f"parallelism (cp={s.cp}) the prefill alone is reported", "--overheads")
    out = {name: number(value) for name, value in _prefill_expressions(args, arch, s, PREFILL_FIELDS).items()}
    if args.json:
        print(json.dumps({"model": arch.name, "cp": number(s.cp), "cp_variant": s.cp_variant, **out}, indent=1))
        return 0
    size = lambda name: amount(out[name], "bytes", args.units)  # noqa: E731
    seconds = lambda name: amount(out[name], "seconds", args.units)  # noqa: E731
    print(f"{arch.name}: b={s.b} l_in={s.l_in} m1={s.m1} cp={s.cp} ({s.cp_variant}) p={s.p} d={s.d} {s.precision}, "
          f"KV cache {s.kv.name}, on {args.system}; the prefill only (decode under CP is not modelled)")
    print(f"memory per device when the prefill ends: weights {size('weight_bytes')}, KV cache "
          f"{size('kv_cache_bytes')} (its own 1/cp of the prompt's), activations {size('activation_bytes')}; total "
          f"{size('memory_bytes')}")
    print(f"prefill on one CP rank: {amount(out['prefill_flops'], 'flops', args.units)}, {size('prefill_bytes')} "
          f"moved; compute {seconds('prefill_compute_s')}, memory {seconds('prefill_memory_s')}, comm "
          f"{seconds('prefill_comm_s')}: TTFT {seconds('ttft_s')}")
    for note in arch.notes:
        print(f"note: {note}")
    return 0


def _print_load(args, load: dict) -> None:
    """The load test's lines: the means and throughputs, the percentiles, the SLO's answer."""
    def ms(name):
        return amount(load[name], "seconds", args.units) if load[name] is not None else "none (one token a request)"
    objectives = " and ".join(f"{what} <= {limit} s" for what, limit in (("TTFT", args.slo_ttft),
                                                                           ("ITL", args.slo_itl)) if limit)
    if "sustained_rate" in load and not load["sustained_rate"]:
        print(f"no rate meets the SLO: a lone request misses p{args.slo_percentile} {objectives}")
        return
    rate = f"{load['sustained_rate']:.4g} (the highest whose p{args.slo_percentile} TTFT and ITL meet the SLO)" \
        if "sustained_rate" in load else args.rate
    chunked = f", chunked prefill of {load['max_tokens']:,} tokens a step" if load["chunked_prefill"] else ""
    chunked += {"on-demand": ", KV blocks on demand (preemption by recomputation)",
                "estimate": ", KV slots admitted by SGLang's estimate (retraction by recomputation)"}.get(
        load["kv_allocation"], "")
    if "speculative" in load:
        drafting = load["speculative"]
        chunked += (f", speculative decoding of {drafting['k']} tokens from {drafting['draft']} "
                    f"({drafting['tokens_per_step']:.4g} a step)")
    over = f" over {load['replicas']} replicas (round robin)" if load["replicas"] > 1 else ""
    if load.get("lockstep"):
        over += " stepping in lockstep (their experts shared: each step the slowest replica's)"
    if load.get("in_flight", 1) > 1:
        over += f", {load['in_flight']} batches in flight a replica (one a pipeline stage)"
    drawn = [(what, mean) for what, mean, key in (("prompt", "l_in", "prompt_lengths"),
                                                   ("output", "l_out", "output_lengths")) if load.get(key) == "geometric"]
    if drawn:
        over += (f", {' and '.join(what for what, _ in drawn)} lengths geometric with mean "
                 f"{' and '.join(mean for _, mean in drawn)}")
    print(f"under load ({args.requests} requests at {rate} per second{over}, {load['engine']}'s in-flight batching "
          f"of up to {load['max_batch']:,} sequences{chunked}, calibrated {args.system}): mean TTFT {ms('mean_ttft')}, mean ITL {ms('mean_itl')}; "
          f"{load['request_throughput']:.4g} requests/s, {load['output_token_throughput']:.6g} output tokens/s, "
          f"{load['total_token_throughput']:.6g} tokens/s in all")
    if "pools" in load:
        pools = load["pools"]
        print(f"disaggregated: {pools['prefill']} prefill and {pools['decode']} decode instances, {pools['devices']} "
              f"devices in all; each request's KV cache sent in {amount(pools['kv_transfer_s'], 'seconds', args.units)}")
    print("percentiles (p50, p90, p99): " + "; ".join(
        f"{what} {', '.join(ms(f'p{q}_{key}') for q in (50, 90, 99))}"
        for what, key in (("TTFT", "ttft"), ("ITL", "itl"), ("end to end", "e2e"))))
    if load.get("goodput") is not None:
        print(f"goodput: {load['goodput']:.4g} requests/s meet {objectives} "
              f"({100 * load['slo_attained']:.1f} % of requests)")
    if load.get("sustained_rate") and load["request_throughput"] < SHORT_RUN * load["sustained_rate"]:
        print(f"note: the run of {args.requests} requests served {load['request_throughput']:.4g} of the "
              f"{load['sustained_rate']:.4g} requests/s it was sent: too short for a queue to build, so a longer "
              f"run at that rate may miss the SLO; raise --requests")
