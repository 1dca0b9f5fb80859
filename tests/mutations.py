"""One-line mutations of the model layer that the tests must kill.

Each mutation replaces one line, found by a text anchor that must occur exactly once, in a
temporary copy of ``symbolic_cost/`` (never in the working tree), then runs
``tests/test_simulations.py`` and ``tests/test_model.py`` against the copy in a subprocess;
the mutation is killed when they fail.  The first five are the mutations that survived the
whole suite before issue 15; the others guard the expressions added with it, the calibrated time
model and serving under load (issue 27, ``tests/test_time_model.py``, ``tests/test_serving_load.py``),
and the last four the backward split into activation and weight gradients (issue 26,
``tests/test_grad_split.py``).

Run from the repository root (``tests/test_mutations.py`` runs the same in the suite)::

    python tests/mutations.py            # every mutation, two at a time
    python tests/mutations.py -j 1 bubble zero3-allgathers

It prints one line per mutation and exits with 1 if one survives or an anchor is missing.

Each mutation runs its recorded *killer* first (``tests/mutation_killers.json``: the test that
failed first when it was last run in full, ``file::function``) alone, then, if that test passes, every
file in one ``pytest -x``, the killer's own file first: a killed mutation stops at the test that kills
it, in a second or two instead of after every test before it.  The order never changes the verdict
(the same files run, and any failure kills); a stale or missing entry only costs time.
``python tests/mutations.py --record`` (or the suite's mutation test with ``RECORD_MUTATION_KILLERS=1``)
rewrites the file.  The unmutated copy runs last, on the tests whose failures killed a mutation: a
kill counts only where that test passes without it.

On Linux each run is a child forked from a process that has pytest, hypothesis, SymPy, NumPy and
pandas imported already (``tests/mutation_zygote.py``, one for each of the ``-j`` runs at once), not a
fresh interpreter that imports them again: about a second less a run; the child imports the
package from the copy, and refuses to run otherwise.  ``MUTATION_ZYGOTE=0`` runs fresh interpreters.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# cheapest first (seconds of the unmutated run, one core): a mutation without a recorded killer
# stops at the first file that fails, so the cheap files go before test_serving_load and test_moe
TESTS = ("tests/test_serving_lengths.py", "tests/test_serving_lockstep.py", "tests/test_low_precision.py",
         "tests/test_fp8_layers.py", "tests/test_torchtitan.py",
         "tests/test_deepspeed_rules.py", "tests/test_zero_bubble.py", "tests/test_mutation_oracles.py",
         "tests/test_utilisation.py", "tests/test_op_recompute.py", "tests/test_block_recompute.py",
         "tests/test_pipeline_splits.py", "tests/test_fsdp.py", "tests/test_serving_cp.py",
         "tests/test_framework_memory.py", "tests/test_model.py", "tests/test_dualpipe.py",
         "tests/test_context_parallel.py", "tests/test_serving_peak.py", "tests/test_moe_context.py",
         "tests/test_inference.py", "tests/test_simulations.py", "tests/test_memory_fixes.py",
         "tests/test_grad_split.py", "tests/test_time_model.py", "tests/test_peak_memory.py",
         "tests/test_serving_load.py", "tests/test_moe.py", "tests/test_fast_numbers.py",
         "tests/test_exact_backends.py", "tests/test_attention_kernels.py", "tests/test_serving_engines.py",
         "tests/test_serving_disaggregated.py", "tests/test_trl_recipes.py", "tests/test_serving_search.py",
         "tests/test_serving_pipeline.py", "tests/test_weight_formats.py", "tests/test_serving_jump.py",
         "tests/test_fp8_gather.py", "tests/test_bridge_recipes.py", "tests/test_torchtitan_python.py",
         "tests/test_speculative.py", "tests/test_megatron_examples.py", "tests/test_serving_paged.py",
         "tests/test_bridge_workloads.py", "tests/test_torchao_float8.py",
         "tests/test_megatron_scripts.py", "tests/test_mtp_draft.py", "tests/test_framework_inputs.py",
         "tests/test_recompute_modules.py", "tests/test_shared_expert_overlap.py", "tests/test_serving_sglang.py",
         "tests/test_op_recompute_moe.py", "tests/test_expert_dispatch.py", "tests/test_planning.py",
         "tests/test_compressed_exchange.py", "tests/test_recipes.py", "tests/test_preference.py",
         "tests/test_trainer_deepspeed.py", "tests/test_llamafactory.py", "tests/test_fused_loss.py",
         "tests/test_budget.py", "tests/test_extrema.py", "tests/test_collective_kinds.py",
         "tests/test_pipeline_sends.py", "tests/test_bridge_peft.py",
         "tests/test_serving_kv_copies.py", "tests/test_tensor_parallel_ends.py", "tests/test_cuda_graphs.py",
         "tests/test_overlap_pairs.py")
NO_SHRINK = """
from hypothesis import Phase, settings as _settings
_settings.register_profile("mutations", max_examples=20, deadline=None, database=None,
                           phases=[Phase.explicit, Phase.reuse, Phase.generate])
"""


@dataclass(frozen=True)
class Mutation:
    """Replace ``anchor`` (exactly one occurrence in ``path``) by ``replacement``."""

    name: str
    path: str
    anchor: str
    replacement: str
    required: bool = True        # one of the five that survived before issue 15

    def apply(self, root: Path) -> None:
        """Mutate the copy under ``root``; ``ValueError`` if the anchor is missing or repeated."""
        file = root / self.path
        text = file.read_text()
        count = text.count(self.anchor)
        if count != 1:
            raise ValueError(f"mutation {self.name}: anchor found {count} times in {self.path} "
                             f"(expected once): {self.anchor!r}")
        file.unlink()               # a link to the template's file (``_clone``): never written through
        file.write_text(text.replace(self.anchor, self.replacement))
        for compiled in (file.parent / "__pycache__").glob(f"{file.stem}.*.pyc"):
            compiled.unlink()       # its bytecode, copied with it: never run the unmutated module


PIPELINE, ZERO = "symbolic_cost/parallel/pipeline.py", "symbolic_cost/parallel/zero.py"
OPTIMIZERS = "symbolic_cost/models/optimizers.py"
SPLITS = "symbolic_cost/parallel/splits.py"
TOTALS, MEMORY = "symbolic_cost/models/totals.py", "symbolic_cost/models/memory.py"
RANKS, STACK = "symbolic_cost/models/ranks.py", "symbolic_cost/models/stack.py"
PLACEMENT = "symbolic_cost/models/placement.py"
EFFICIENCY, STEP = "symbolic_cost/timing/efficiency.py", "symbolic_cost/timing/step.py"
NCCL, NVLS = "symbolic_cost/timing/nccl.py", "symbolic_cost/timing/nccl_nvls.py"
KINDS = "symbolic_cost/collective_kinds.py"
PEAK, SERVING_PEAK = "symbolic_cost/models/peak.py", "symbolic_cost/inference/peak.py"
LOAD, PAGED = "symbolic_cost/inference/load.py", "symbolic_cost/inference/paged.py"
BATCHING = "symbolic_cost/inference/batching.py"
FORMATS = "symbolic_cost/inference/weight_formats.py"
MATMUL, NORM = "symbolic_cost/ops/matmul.py", "symbolic_cost/ops/norm.py"
MUTATIONS = (
    Mutation("wave-quantisation", EFFICIENCY, "Mul(round_up(round_up(m / t_m) * round_up(n / t_n) * count / sms), sms,",
             "Mul(round_up(m / t_m) * round_up(n / t_n) * count / sms, sms,", required=False),
    Mutation("wave-slots-full-tile-only", EFFICIENCY, "return unevaluated(Min, slots)",
             "return unevaluated(Min, slots[:1])", required=False),
    Mutation("narrow-tile", EFFICIENCY, "return minimum(tile, MMA_ROWS * round_up(size / MMA_ROWS))", "return tile",
             required=False),
    Mutation("tile-halves", EFFICIENCY, "return [(tile_m, tile_n), (tile_m, tile_n / 2), (tile_m / 2, tile_n)]",
             "return [(tile_m, tile_n)]", required=False),
    Mutation("crossover-batch-rounds-down", "symbolic_cost/inference/throughput.py",
             "(Max(1, ceiling(gap / slope)), slope > 0)", "(Max(1, floor(gap / slope)), slope > 0)",
             required=False),
    Mutation("fused-step-reads-weights-once", "symbolic_cost/inference/throughput.py",
             "m -= weights_read(row) / bandwidth", "m -= 0", required=False),
    Mutation("load-context-grows", BATCHING, "return (prompt + steps - admitted_sum / decoding) if decoding",
             "return (prompt + 0 * admitted_sum / decoding) if decoding", required=False),
    # engines, chunked prefill, disaggregation and TRL recipes (issues 63 and 65)
    Mutation("chunked-decodes-first", BATCHING, "room, chunk, chunks = self.runtime.max_tokens - decoding, 0, []",
             "room, chunk, chunks = self.runtime.max_tokens, 0, []", required=False),
    Mutation("engine-pool-of-total", LOAD, "else memory_fraction * capacity - weights",
             "else memory_fraction * (capacity - weights)", required=False),
    # the MoE rows' all-to-all overlap as the workloads that ran them set it (issue 62)
    Mutation("bridge-overlap-from-later-recipes", "symbolic_cost/reproduce/measured.py",
             "workload = bridge_workload(row)", "workload = None", required=False),
    # KV blocks on demand with preemption (issue 63: vLLM's scheduler)
    Mutation("paged-admits-after-preempting", PAGED, "if self.preempted or (not chunked and",
             "if (not chunked and", required=False),
    Mutation("paged-preempts-the-oldest", PAGED, "request = self.running.order.pop()",
             "request = self.running.order.popleft()", required=False),
    Mutation("paged-block-phase", PAGED, "phase = (-steps) % self.block",
             "phase = steps % self.block", required=False),
    Mutation("paged-sliding-layers-open-every-block", PAGED, "self.pages.sliding * self.young_phases[phase]",
             "self.pages.sliding * self.phases[phase]", required=False),
    Mutation("paged-sliding-layers-never-age", PAGED, "while self.ageing and self.ageing[0][0] <= steps:",
             "while False:", required=False),
    Mutation("benchmark-clock-without-the-front-end", LOAD, "    span = last + front - times[0]",
             "    span = last - times[0]", required=False),
    Mutation("sustained-at-the-capacity", LOAD, "    for _ in range(rounds):     # below the capacity only",
             "    if meets(load := simulate(step, output_tokens, high, requests, runtime, seed, slo)):\n"
             "        return high, load\n    for _ in range(rounds):     # below the capacity only", required=False),
    Mutation("lengths-uncapped", "symbolic_cost/inference/lengths.py",
             "return prompts, [min(o, context - p + 1) for p, o in zip(prompts, outputs)]", "return prompts, outputs",
             required=False),
    Mutation("lengths-end-together", BATCHING, "(steps + self.outputs[request] - 1, steps, request)",
             "(steps + max(self.outputs) - 1, steps, request)", required=False),
    Mutation("lengths-reserve-the-longest", BATCHING, "and self.reserved + self.needs[request] <= self.blocks",
             "and self.reserved + max(self.needs) <= self.blocks", required=False),
    Mutation("lengths-throughput-of-the-first", LOAD, "output_token_throughput=generated / span,",
             "output_token_throughput=requests * outputs[0] / span,", required=False),
    Mutation("lengths-context-of-one-prompt", BATCHING, "mean_context(self.prompt_sum / len(self.heap), steps,",
             "mean_context(self.prompts[0], steps,", required=False),
    Mutation("lengths-prefill-of-the-mean-prompt", BATCHING, "whole + [(0, prompts[nxt + self.admitted])]",
             "whole + [(0, self.size)]", required=False),
    Mutation("lockstep-fastest-replica", BATCHING, "duration = timed(max(engine.plan(now) for engine in live)",
             "duration = timed(min(engine.plan(now) for engine in live)", required=False),
    Mutation("mxfp4-every-row", FORMATS, "MXFP4, None, rows=EXPERT_ROWS)", "MXFP4, None, rows=None)",
             required=False),
    Mutation("fp8-block-router-converted", FORMATS, 'FP8_128, "fp8", kept=("router",))', 'FP8_128, "fp8", kept=())',
             required=False),
    Mutation("formats-quantise-biases", FORMATS, "saved = row.matrix_elements * (es - fmt.element_bytes)",
             "saved = row.weights / es * (es - fmt.element_bytes)", required=False),
    Mutation("engine-stages-extra-to-the-last", "symbolic_cost/parallel/splits.py",
             "for i in range(2, depth % p + 2):", "for i in range(1, depth % p + 1):", required=False),
    Mutation("pipeline-even-shares-always", BATCHING,
             "shares = [float(x) for x in shares] if shares is not None else [1 / stages] * stages",
             "shares = [1 / stages] * stages", required=False),
    Mutation("kv-uneven-stage-the-smallest", "symbolic_cost/inference/kv_cache.py",
             "return value(tuple(replace(g, layers=Integer(max(sizes))) for g in groups), Integer(1))",
             "return value(tuple(replace(g, layers=Integer(min(sizes))) for g in groups), Integer(1))", required=False),
    Mutation("pipeline-no-stage-wait", BATCHING, "end = max(end, free[stage]) + seconds * shares[stage]",
             "end = end + seconds * shares[stage]", required=False),
    Mutation("pipeline-whole-step-a-stage", BATCHING, "[1 / stages] * stages", "[1] * stages", required=False),
    Mutation("pipeline-one-batch-at-a-time", LOAD, "    flight = in_flight(step)\n", "    flight = 1\n",
             required=False),
    Mutation("lockstep-never", LOAD, 'return replicas > 1 and getattr(step, "lockstep", False)',
             'return False and getattr(step, "lockstep", False)', required=False),
    Mutation("lengths-paged-end-together", PAGED, "(start + self.outputs[request] - 1, start, request)",
             "(start + self.outputs[0] - 1, start, request)", required=False),
    Mutation("paged-recompute-prompt-only", PAGED, "todo = self.prompts[request] + before",
             "todo = self.prompts[request]",
             required=False),
    Mutation("disaggregated-transfer", "symbolic_cost/inference/disaggregated.py",
             "[first[i] + transfer * (prompts[i] / step.prompt) for i in mine]", "[first[i] for i in mine]",
             required=False),
    Mutation("launched-precision", "symbolic_cost/models/hf_trainer.py",
             'if args.get("bf16") or args.get("fp16"):', "if False:", required=False),
    Mutation("serving-layouts-best-first", "symbolic_cost/inference/serving_search.py",
             'ranked.sort(key=lambda row: -row["rate"])', 'ranked.sort(key=lambda row: row["rate"])', required=False),
    Mutation("recipe-16-bit-master", "symbolic_cost/models/trl_recipe.py",
             'return {"master_weights": False,', 'return {"master_weights": True,', required=False),
    Mutation("flash-recomputed-scores", "symbolic_cost/ops/attention.py",
             "return tuple(forward + again + backward)", "return tuple(forward + backward)", required=False),
    Mutation("fused-row-one-kernel", EFFICIENCY, "if cost.fused:\n        return attention_kernels",
             "if False:\n        return attention_kernels", required=False),
    # fused attention by its executed tiles, and the kernel floor (issue 62, tests/test_attention_kernels.py)
    Mutation("causal-tiles-whole-square", "symbolic_cost/timing/attention_kernels.py",
             "tiles = rows * (rows + 1) / 2", "tiles = rows * rows", required=False),
    Mutation("query-tile-overhead-dropped", "symbolic_cost/timing/attention_kernels.py",
             " * (1 + overhead * TILE / executed_keys(cost.scores))", "", required=False),
    # the head dimension's softmax share (tests/test_attention_kernels.py)
    Mutation("short-head-no-slower", "symbolic_cost/timing/attention_kernels.py",
             "    return 1 + share * (HEAD_DIM / minimum(", "    return 1 + 0 * (HEAD_DIM / minimum(", required=False),
    Mutation("wide-head-unclamped", "symbolic_cost/timing/attention_kernels.py",
             "minimum(exact(head_dim, \"head_dim\"), HEAD_DIM)", "exact(head_dim, \"head_dim\")", required=False),
    Mutation("score-width-query-head-only", "symbolic_cost/ops/attention.py",
             "conventions, (q + v) / 2))", "conventions, q))", required=False),
    Mutation("context-rank-square-of-its-own", "symbolic_cost/blocks/context.py",
             "causal_length=l * cp, window=window)", "causal_length=l, window=window)", required=False),
    # windows and latent attention under context parallelism (tests/test_context_parallel.py)
    Mutation("gathered-window-keys-unwindowed", "symbolic_cost/blocks/context.py",
             "else scored_keys(l * cp, l * cp, causal, conventions, window))",
             "else context_keys(l * cp, cp, context.variant, causal, conventions))", required=False),
    Mutation("gathered-window-tiles-unwindowed", "symbolic_cost/blocks/context.py",
             "causal_length=l * cp, window=window)", "causal_length=l * cp)", required=False),
    Mutation("ulysses-window-dropped", "symbolic_cost/blocks/context.py",
             "Keys(kv_heads=kv / cp, v_dim=v, causal=causal, window=window)",
             "Keys(kv_heads=kv / cp, v_dim=v, causal=causal)", required=False),
    Mutation("sinks-run-under-the-ring", "symbolic_cost/blocks/context.py",
             '"attention sinks": ("ulysses",', '"attention sinks": ("ring",', required=False),
    Mutation("windows-run-under-the-ring", "symbolic_cost/blocks/context.py",
             '"a sliding window": ("all-gather", "ulysses",', '"a sliding window": ("ring", "all-gather",',
             required=False),
    Mutation("a-window-past-the-context-kept", "symbolic_cost/models/families/llama.py",
             'if window and window >= k.int("max_position_embeddings", 4096):', "if False:", required=False),
    Mutation("latent-ring-values-as-wide-as-keys", "symbolic_cost/blocks/latent_attention.py",
             "Keys(kv_heads=heads, v_dim=v, causal=scores.causal), run.context",
             "Keys(kv_heads=heads, v_dim=qk, causal=scores.causal), run.context", required=False),
    Mutation("all-to-all-every-byte-over-the-network", "symbolic_cost/parallel/collectives.py",
             "        return (n - n / domains) / n", "        return (n - 1) / n", required=False),
    Mutation("one-kernel-a-row", EFFICIENCY, "    if products:\n        return products", "    if products:\n        return 1",
             required=False),
    # the peak of a step (issue 31, tests/test_peak_memory.py against a measured PyTorch step)
    Mutation("peak-loss-two-gradients", PEAK, "return head.act_out + 2 * loss.act_in", "return head.act_out + loss.act_in",
             required=False),
    Mutation("peak-adam-two-temporaries", PEAK, "return 2 * OPTIMIZER_FP32 * largest", "return OPTIMIZER_FP32 * largest",
             required=False),
    Mutation("peak-tied-sum-out-of-place", PEAK, "return held + (2 * table.weights if", "return held + (table.weights if",
             required=False),
    Mutation("peak-gradients-made-in-backward", PEAK, "made = Integer(0) if buffer else cost.gradient_bytes",
             "made = Integer(0)", required=False),
    # the peak of serving (issue 31, tests/test_serving_peak.py against a measured generate)
    Mutation("serving-previous-scores", SERVING_PEAK, "return s.b * vocab * s.es + (2 if previous else 1) * s.b",
             "return s.b * vocab * s.es + (1 if previous else 1) * s.b", required=False),
    Mutation("serving-final-cache", SERVING_PEAK, "cache = _cache(arch, s, final_tokens(arch, s))",
             "cache = _cache(arch, s, prompt_tokens(arch, s))", required=False),
    Mutation("peak-ddp-buckets", PEAK, "if conv.get(conventions).gradient_lifetime == \"buffer\" or sympify(t.d) == 1",
             "if True or sympify(t.d) == 1", required=False),
    # the data-parallel overlap: a collective repeated every micro-batch hides behind each one's pass
    Mutation("overlap-each-micro-batch", STEP,
             "exposed += (n - 1) * maximum(0, each[group] - window) + maximum(0, each[group] + once[group] - window)",
             "exposed += maximum(0, n * each[group] + once[group] - window)", required=False),
    Mutation("zb-h1-one-w-saved", STEP, "bubble = (p - 1) * (per_micro - w - minimum(", "bubble = (p - 1) * (per_micro - minimum(",
             required=False),
    Mutation("zb-h1-in-flight", "symbolic_cost/parallel/pipeline.py", """if self.name == "zb-h1":
            return minimum(p, n)""", """if self.name == "zb-h1":
            return minimum(p - rank, n)""", required=False),
    Mutation("dualpipe-bubble-table-2", PIPELINE, "maximum(2 * q * t_f, (q - 1) * t_f + q * t_b)",
             "(q - 1) * t_f + q * t_b + t_f", required=False),
    Mutation("dualpipe-in-flight", PIPELINE, "return p + 1", "return p", required=False),
    Mutation("dualpipe-one-copy", TOTALS, '(place.paired, Rational(1, 2)) if schedule.name == "dualpipe"',
             '(place.busiest, 1) if schedule.name == "dualpipe"', required=False),
    Mutation("dualpipe-ends-apart", RANKS, "    if rank == 0 or rank == p - 1:", "    if rank == 0:", required=False),
    Mutation("dualpipe-head-once", RANKS, '+ cost.head.total("act_buffer")\n    return kept',
             '+ p * cost.head.total("act_buffer")\n    return kept', required=False),
    Mutation("serving-cp-cache-shard", "symbolic_cost/inference/throughput.py", "else (tokens / s.cp, m1)",
             "else (tokens, m1)", required=False),
    Mutation("serving-cp-ulysses-cache", "symbolic_cost/inference/throughput.py", "(tokens, m1 * s.cp) if",
             "(tokens, m1) if", required=False),
    Mutation("serving-cp-local-tokens", "symbolic_cost/inference/phases.py", "local = s.l_in / s.cp", "local = s.l_in",
             required=False),
    Mutation("serving-cp-rank-stack", "symbolic_cost/inference/phases.py", "s.l_in, conventions, context=True)",
             "s.l_in, conventions, context=False)", required=False),
    Mutation("nccl-ll-share", KINDS, 'tree=True, ll_share=Rational(1, 4),', "tree=True,", required=False),
    Mutation("nccl-tree-levels", NCCL, "+ levels * TREE_HOP[", "+ TREE_HOP[", required=False),
    Mutation("nccl-tree-correction", NCCL, "/ 2 * tree_correction(protocol, volume)", "/ 2", required=False),
    Mutation("nccl-ll128-channel-cap", NCCL, "minimum(Rational(92, 100), kind_of(kind).ll128_channel / NVLINK_CHANNEL[arch])",
             "Rational(92, 100)", required=False),
    Mutation("nccl-ll128-one-per-node", NCCL, "LL128_NET = (Rational(7, 10), Rational(92, 100))",
             "LL128_NET = (Rational(92, 100), Rational(92, 100))", required=False),
    Mutation("nccl-ll128-net-inverse", NCCL, "return _by_nic(tuple(1 / v for v in LL128_NET), n, nodes)",
             "return _by_nic(LL128_NET, n, nodes)", required=False),
    Mutation("choice-arms-swapped", "symbolic_cost/extrema.py",
             "return Basic.__new__(Piecewise, Basic.__new__(ExprCondPair, sympify(then), condition),",
             "return Basic.__new__(Piecewise, Basic.__new__(ExprCondPair, sympify(otherwise), condition),",
             required=False),
    Mutation("nccl-ll128-tree-share", NCCL, '"LL128": Rational(915, 1000)', '"LL128": Integer(1)', required=False),
    Mutation("nccl-ll128-off-on-hopper", NCCL, 'LL128_ARCHS = ("volta", "ampere", "hopper")',
             'LL128_ARCHS = ("volta", "ampere")', required=False),
    Mutation("nccl-nvls-on-a100", "symbolic_cost/timing/system_files/a100.json", '"arch": "ampere",',
             '"arch": "ampere", "nvls": true,', required=False),
    Mutation("nccl-nvls-ratio", NVLS, "NVLS_RATIO = Rational(5, 6)", "NVLS_RATIO = Rational(1, 2)", required=False),
    Mutation("nccl-nvls-two-gpus", NVLS, "at_least(n, 3 * sympify(nodes))", "at_least(n, 2 * sympify(nodes))",
             required=False),
    Mutation("nccl-nvls-tree-net-halved", NVLS, "net_bus * (1 + few) / 2", "net_bus", required=False),
    Mutation("reshard-priced-as-the-pair", "symbolic_cost/timing/hardware.py",
             "return choice(Eq(c.reshard, 1), Add(*(comm_time(r, system, conventions, link) for r in allreduce)), alone)",
             "return alone", required=False),
    Mutation("nccl-spread-intra-hop", "symbolic_cost/timing/hardware.py", 'nodes, intra="nvlink"))', "nodes))",
             required=False),
    Mutation("overlap-window", STEP, '("grad", t.overlap.grad_reduce, compute["bwd"])',
             '("grad", t.overlap.grad_reduce, compute["fwd"] + compute["bwd"])',
             required=False),
    Mutation("scatter-gather-share", TOTALS, "boundary = boundary * s1 / m1", "boundary = boundary", required=False),
    Mutation("bubble", PIPELINE, "(self.v * sympify(n) + p - 1)", "(self.v * sympify(n))"),
    Mutation("1f1b-in-flight", PIPELINE, "return minimum(p - rank, n)", "return p - rank"),
    Mutation("full-recompute-collectives", TOTALS, "again = redone if", "again = 0 if"),
    Mutation("zero3-allgathers", ZERO, 'within("allgather", weight_bytes, "fwd", micro_batches)',
             'within("allgather", weight_bytes, "fwd", 1)'),
    Mutation("selective-keeps-qkv", "symbolic_cost/models/recompute_modules.py",
             "core_input_bytes(layer) if tagged.rebuilt else Integer(0)", "Integer(0)"),
    Mutation("zero3-backward-allgathers", ZERO, 'within("allgather", weight_bytes, "bwd", micro_batches)',
             'within("allgather", weight_bytes, "bwd", 1)', required=False),
    Mutation("interleaved-in-flight", PIPELINE, "(self.v - 1) * p + 1, n * self.v)",
             "(self.v - 1) * p, n * self.v)", required=False),
    # FSDP2 / HSDP (issue 28, tests/test_fsdp.py against tests/simulate_fsdp.py)
    Mutation("hsdp-allreduce-shard", ZERO, 'collective("allreduce", parameters / shard, grad_bytes',
             'collective("allreduce", parameters, grad_bytes', required=False),
    Mutation("hsdp-replica-stride", ZERO, "repeats=micro_batches, stride=stride * shard)",
             "repeats=micro_batches, stride=stride)", required=False),
    Mutation("fsdp-reshard-gathers-again", ZERO, "    if reshard_after_forward:  ", "    if True:  ", required=False),
    Mutation("hsdp-shard-degree", ZERO, "return d if shard is None else shard", "return d", required=False),
    Mutation("hsdp-cp-shard-group", TOTALS, 'exact(t.shard, "shard") * cp', 'exact(t.shard, "shard")',
             required=False),
    Mutation("fsdp-unresharded-layers", PEAK, "return cost_placement(cost).busiest(Integer(0), Integer(0), layers)",
             "return GATHERED_LAYERS * maximum(*layers)", required=False),
    Mutation("fsdp-held-until-backward", PEAK, "held = gather_bytes(cost, kept=True) - gather_bytes(cost)",
             "held = Integer(0)", required=False),
    Mutation("zero2-reduce-scatters", ZERO, "repeats=micro_batches if zero >= 2 else 1", "repeats=1",
             required=False),
    Mutation("distributed-optimizer", ZERO, 'or (state == "optimizer" and distributed_optimizer)', "",
             required=False),
    Mutation("uniform-groups", MEMORY, '/ exact(group, "recompute_layers") * tokens_bytes', "* tokens_bytes",
             required=False),
    Mutation("block-redone-layers", MEMORY, "return redone * tokens_bytes + (layers - redone)",
             "return training.recompute_layers * tokens_bytes + (layers - training.recompute_layers)", required=False),
    Mutation("recompute-flops-rank-by-rank", TOTALS, "[recompute_flops(blk, t.recomputation) for blk, _ in layers]",
             "[0 * recompute_flops(blk, t.recomputation) for blk, _ in layers]", required=False),
    Mutation("sends-per-chunk", TOTALS, "p, n * t.virtual_stages,", "p, n,", required=False),
    Mutation("sequence-parallel-input-shard", "symbolic_cost/blocks/layout.py",
             "cost.plus(act_buffer=-cost.act_buffer * (1 - 1 / self.s))", "cost", required=False),
    Mutation("outputs-per-chunk", RANKS, "        return held * v\n", "        return held\n", required=False),
    Mutation("uneven-middle-rank", PLACEMENT, "            rows.append((r, *kind[:3]))",
             "            rows.append((r, *kind[:3])) if r in (0, p - 1) else None", required=False),
    Mutation("activation-recompute-drops-fc2-input", "symbolic_cost/blocks/mlp.py",
             'name="fc2", **at.kw), rebuilt="activation")', 'name="fc2", **at.kw))', required=False),
    Mutation("layers-placed-in-order", PLACEMENT, "held = rank_layers(t, depth, int(p))",
             "held = list(reversed(rank_layers(t, depth, int(p))))", required=False),
    Mutation("chunk-offset-by-rounds", SPLITS, "starts = [c * rounds + sum(chunk[:r]) for c in range(v)]",
             "starts = [c * rounds + r * chunk[r] for c in range(v)]", required=False),
    Mutation("embedding-takes-a-slot", SPLITS, "rounds, skip = sum(chunk), int(bool(embedding))",
             "rounds, skip = sum(chunk), 0", required=False),
    Mutation("layout-stage-order", SPLITS, "[range(starts[c * p + r], starts[c * p + r] + stages[c * p + r].count(",
             "[range(starts[r * v + c], starts[r * v + c] + stages[r * v + c].count(", required=False),
    Mutation("chunk-in-flight", PIPELINE, "minimum(rounds * p + min(max(rest - c * p, 0), p), n)",
             "minimum(rounds * p + min(max(rest - c, 0), p), n)", required=False),
    Mutation("placed-ends", PLACEMENT, "(first if is_first else 0)", "(first if is_last else 0)", required=False),
    Mutation("activation-recompute-drops-expert-fc2-input", "symbolic_cost/blocks/moe.py",
             '                                    **at.kw), rebuilt="activation", kernel_per_group=megatron)]',
             '                                    **at.kw), kernel_per_group=megatron)]', required=False),
    Mutation("chunk-pairs", "symbolic_cost/ops/matmul.py", "rest * (rest + 1) / 2) / l", "rest * rest / 2) / l",
             required=False),
    Mutation("layer-kinds-order", STACK, "key=lambda key: (not key[0], key[1], not key[2])",
             "key=lambda key: (key[0], key[1], not key[2])", required=False),
    Mutation("rotary-per-group", STACK, "rotary=bool(arch.rotary and rotary),", "rotary=bool(arch.rotary),",
             required=False),
    Mutation("linear-wgrad-marking", MATMUL, "[(tokens, f, e)], es, wgrad=[(e, tokens, f)])",
             "[(e, tokens, f)], es, wgrad=[(tokens, f, e)])", required=False),
    Mutation("layer-norm-gamma-split", NORM, "flops_wgrad=(2 * n if weight else 0) + (2 * n if bias else 0),",
             "flops_wgrad=(3 * n if weight else 0) + (2 * n if bias else 0),", required=False),
    Mutation("embedding-wgrad", "symbolic_cost/ops/embedding.py", "flops_bwd=n, flops_wgrad=n,",
             "flops_bwd=n, flops_wgrad=0,", required=False),
    Mutation("grid-weight-reductions", "symbolic_cost/parallel/grid_linear.py",
             "return cost, panels_fwd + panels_bwd + input_sums, weight_sums + shared",
             "return cost, panels_fwd + panels_bwd + input_sums + weight_sums + shared, []", required=False),
    # issue 31's four counting fixes (tests/test_memory_fixes.py)
    Mutation("gated-keeps-fused-input", "symbolic_cost/ops/pointwise.py", "kept = 2 * n if", "kept = 3 * n if",
             required=False),
    Mutation("flash-output-once", "symbolic_cost/blocks/attention.py",
             "out = reads_flash_output(out) if reads_flash else out", "out = out", required=False),
    Mutation("lookup-reads-rows", "symbolic_cost/ops/embedding.py",
             'return cost.plus(mem_fwd=minimum(exact(share, "share") * n * es, table) - table)', "return cost",
             required=False),
    Mutation("decode-reads-window", "symbolic_cost/blocks/attention.py",
             "return keys if span is None else minimum(span, keys)", "return keys", required=False),
    # context parallelism (issue 28, tests/test_context_parallel.py)
    Mutation("cp-ring-keys", "symbolic_cost/blocks/context.py",
             "return l * (cp + 1) / (2 * cp) if variant", "return l / 2 if variant", required=False),
    Mutation("cp-ring-backward", "symbolic_cost/blocks/context.py",
             'collective("p2p", 2 * kv_elements, es, cp, "bwd"', 'collective("p2p", kv_elements, es, cp, "bwd"',
             required=False),
    Mutation("cp-data-group", "symbolic_cost/models/totals.py",
             'return replace(t, d=exact(t.d, "d") * cp, shard=shard)', "return t", required=False),
    Mutation("cp-boundary", "symbolic_cost/models/ranks.py",
             '(exact(t.s1, "s1") * exact(getattr(t, "cp", 1), "cp"))', 'exact(t.s1, "s1")', required=False),
    # context parallelism with experts (issue 28, tests/test_moe_context.py)
    Mutation("cp-expert-data-degree", "symbolic_cost/parallel/expert.py",
             'ranks, grid = exact(m1, "m1") * cp * exact(d, "d"),', 'ranks, grid = exact(m1, "m1") * exact(d, "d"),',
             required=False),
    Mutation("hsdp-expert-shard-degree", "symbolic_cost/parallel/expert.py",
             'ranks = exact(m1, "m1") * exact(cp, "cp") * exact(shard, "shard")',
             'ranks = exact(cp, "cp") * exact(shard, "shard")', required=False),
    # issue 32 item 3: mutations that survived, and their oracles (tests/test_mutation_oracles.py)
    Mutation("tensor-overlap-hides-all-to-alls", KINDS, 'Kind("alltoall", "pairwise", tensor_overlap=False)',
             'Kind("alltoall", "pairwise")', required=False),
    Mutation("fsdp-regather-in-forward", STEP, 'group = "regather"      #', 'group = "param"      #', required=False),
    Mutation("step-time-recompute", STEP, "[w[i] for w in layers], [r[i] for r in redo])",
             "[w[i] for w in layers], [0 for r in redo])",
             required=False),
    Mutation("busiest-layer-recompute", PLACEMENT, "[w + r for w, r in zip(per_layer, redo)]", "per_layer", required=False),
    Mutation("busiest-block-recompute", PLACEMENT, "+ _dot(self.redone(r), redo) for r, *_ in self.rows)",
             "+ 0 for r, *_ in self.rows)", required=False),
    Mutation("hfu-block-recompute", "symbolic_cost/models/utilisation.py",
             "total += place.all_redone(g) * per_layer", "total += place.groups[g] * per_layer", required=False),
    # the block method chunk by chunk and kind by kind (tests/test_block_recompute.py)
    Mutation("block-per-chunk", PLACEMENT, "redone_even=tuple(v * per_chunk * c / depth", "redone_even=tuple(per_chunk * c / depth",
             required=False),
    Mutation("block-chunk-cap", PLACEMENT, "counts[g] += minimum(maximum(n - run[0][0], 0), len(run))",
             "counts[g] += maximum(n - run[0][0], 0)", required=False),
    Mutation("block-run-offset", PLACEMENT, "counts[g] += minimum(maximum(n - run[0][0], 0), len(run))",
             "counts[g] += minimum(n, len(run))", required=False),
    Mutation("block-even-cap", PLACEMENT, 'per_chunk = minimum(exact(t.recompute_layers, "recompute_layers"), depth / (p * v))',
             'per_chunk = exact(t.recompute_layers, "recompute_layers")', required=False),
    Mutation("block-collectives-redone", TOTALS, "redone = 0 if end else place.most_redone(i - 1)",
             "redone = 0 if end else times", required=False),
    Mutation("block-most-redone", PLACEMENT, "return maximum(*(self.redone(r)[group] for r, *_ in self.rows))",
             "return self.most(group)", required=False),
    Mutation("megatron-bf16-fp32-grads", "symbolic_cost/models/optimizers.py",
             "(Integer(2), Integer(4), master + moments)", "(Integer(2), Integer(2), master + moments)", required=False),
    Mutation("hierarchical-a2a-far-latency", "symbolic_cost/parallel/collectives.py",
             "far = network_share(n, n / k, routing) * volume / ib[0] + (n / k - 1) * ib[1]",
             "far = network_share(n, n / k, routing) * volume / ib[0]",
             required=False),
    Mutation("hierarchical-a2a-near-latency", "symbolic_cost/parallel/collectives.py",
             "near = (k - 1) / n * volume / nvlink[0] + (k - 1) * nvlink[1]",
             "near = (k - 1) / n * volume / nvlink[0]", required=False),
    Mutation("topk-normalise", "symbolic_cost/ops/routing.py", "fwd = (2 * k - 1 if normalise else 0)",
             "fwd = (k if normalise else 0)", required=False),
    Mutation("latent-cache-one-scale", "symbolic_cost/inference/kv_cache.py", '(1 if self.kind == "latent" else 2)', "2",
             required=False),
    Mutation("ulysses-backward-output", "symbolic_cost/blocks/context.py",
             'return before, a2a(out, "fwd") + a2a(out, "bwd")', 'return before, a2a(out, "fwd")', required=False),
    # issue 26: the scheme reaches the all-to-alls through the attention block; q, k, v's mirror images
    Mutation("ulysses-backward-qkv", "symbolic_cost/blocks/context.py",
             'before = [c for pass_ in ("fwd", "bwd") for n in qkv for c in a2a(n, pass_)]',
             'before = [c for pass_ in ("fwd",) for n in qkv for c in a2a(n, pass_)]', required=False),
    Mutation("search-kv-heads", "symbolic_cost/numeric/layouts.py", "return dict(h=arch.h, kv_heads=arch.kv, f=arch.f,",
             "return dict(h=arch.h, f=arch.f,", required=False),
    Mutation("torchtitan-ffn-multiplier", "symbolic_cost/models/torchtitan.py",
             "hidden = int(Fraction(multiplier) * hidden)", "hidden = hidden", required=False),
    Mutation("torchtitan-cut-embedding-weight", "symbolic_cost/models/torchtitan.py", "counts[0] -= first_less",
             "counts[-1] -= first_less", required=False),
    Mutation("deepspeed-derived-accumulation", "symbolic_cost/models/deepspeed.py",
             "micro, accum = (micro, train // share) if", "micro, accum = (micro, 1) if", required=False),
    # issue 27 item 4: the low-precision training recipes (tests/test_low_precision.py)
    Mutation("mxfp8-scale-per-16", "symbolic_cost/models/number_formats.py", "MXFP8 = block_scaled(8, 32)",
             "MXFP8 = block_scaled(8, 16)", required=False),
    Mutation("mxfp8-one-weight-copy", OPTIMIZERS, '"mxfp8", MXFP8, 2 * MXFP8,', '"mxfp8", MXFP8, MXFP8,', required=False),
    Mutation("nvfp4-one-weight-copy", OPTIMIZERS, '"nvfp4", NVFP4, 2 * NVFP4,', '"nvfp4", NVFP4, NVFP4,', required=False),
    Mutation("nvfp4-no-tensor-scale", OPTIMIZERS, "2 * NVFP4, scales=1,", "2 * NVFP4, scales=0,", required=False),
    Mutation("nvfp4-products-at-fp8", OPTIMIZERS, 'products="fp4"', 'products="fp8"', required=False),
    Mutation("tensorwise-amax-history", OPTIMIZERS, '"tensorwise", Integer(1), Integer(1), amax_history=0',
             '"tensorwise", Integer(1), Integer(1), amax_history=1024', required=False),
    Mutation("low-precision-kept-bytes", "symbolic_cost/models/recipes.py", "kept = r.act_buffer * recipe.kept_bytes / es",
             "kept = r.act_buffer / es", required=False),
    Mutation("mxfp8-off-blackwell", "symbolic_cost/timing/systems.py", "    if fmt not in system.block_formats:\n        runs =",
             "    if False:\n        runs =", required=False),
    # the cast kernels of a low-precision product (tests/test_low_precision.py, by hand)
    Mutation("cast-writes-one-copy", "symbolic_cost/ops/quantise.py", "per_element = (2 if amax_pass else 1) * es + 2 * quantised",
             "per_element = (2 if amax_pass else 1) * es + quantised", required=False),
    Mutation("cast-without-amax-pass", "symbolic_cost/ops/quantise.py", "per_element = (2 if amax_pass else 1) * es + 2 * quantised",
             "per_element = es + 2 * quantised", required=False),
    Mutation("cast-every-input", "symbolic_cost/models/recipes.py", "inputs = 0 if r.name in NORM_FUSED else",
             "inputs = 0 if False else", required=False),
    # torchao's float8 (tests/test_torchao_float8.py, against torchao's Float8Linear run on the CPU)
    Mutation("torchao-converts-grouped-experts", "symbolic_cost/models/recipes.py",
             "if recipe.dynamic and any(g.groups != 1 for g in forward):", "if False:", required=False),
    Mutation("torchao-cast-two-copies", "symbolic_cost/ops/quantise.py",
             "per_element = (2 if amax_pass else 1) * es + quantised",
             "per_element = (2 if amax_pass else 1) * es + 2 * quantised", required=False),
    Mutation("torchao-one-output-gradient-cast", "symbolic_cost/models/recipes.py",
             "2 * outputs + weight_bwd + inputs", "outputs + weight_bwd + inputs", required=False),
    Mutation("torchao-weights-not-cast-in-forward", "symbolic_cost/models/recipes.py",
             "dynamic_casts(inputs + weight_fwd, ", "dynamic_casts(inputs, ", required=False),
    Mutation("torchao-keeps-fp8-input", "symbolic_cost/models/recipes.py", "kept, cast = r.act_buffer, ",
             "kept, cast = r.act_buffer / 2, ", required=False),
    Mutation("torchao-gather-casts-whole-weight", "symbolic_cost/models/recipes.py",
             "weight_fwd = weights / shard_degree(", "weight_fwd = weights + 0 * shard_degree(", required=False),
    Mutation("torchao-gather-recast-backward", "symbolic_cost/models/recipes.py",
             "weight_bwd = weight_fwd if t.reshard_after_forward else Integer(0)", "weight_bwd = weight_fwd",
             required=False),
    Mutation("torchao-rowwise-gathers", "symbolic_cost/models/training_values.py",
             'FP8_GATHERS = ("torchao-tensorwise", "tensorwise", "delayed")',
             'FP8_GATHERS = ("torchao-tensorwise", "torchao-rowwise", "tensorwise", "delayed")', required=False),
    Mutation("torchao-weight-copy-cached", OPTIMIZERS, '"torchao-tensorwise", Integer(2), Integer(0)',
             '"torchao-tensorwise", Integer(2), Integer(1)', required=False),
    # Megatron-LM scripts as published (tests/test_megatron_scripts.py: the corpus's scripts and publishers' counts)
    Mutation("argument-loop-runs", "symbolic_cost/models/launch_script.py",
             "shell.frames.append([False if over_arguments else None, None])", "shell.frames.append([None, None])",
             required=False),
    Mutation("heredoc-read-as-commands", "symbolic_cost/models/launch_script.py", "document = heredoc.group(2)",
             "document = None", required=False),
    Mutation("undecided-value-refused", "symbolic_cost/models/launch_script.py",
             'if value.startswith("(") or any(w.startswith("-") for w in _substituted(value)', "if True or any((",
             required=False),
    Mutation("srun-tasks-unread", "symbolic_cost/models/megatron_words.py",
             'if launcher[0] == "srun" and not any(', 'if False and not any(', required=False),
    Mutation("srun-per-node-times-one", "symbolic_cost/models/megatron_words.py",
             'return values["per_node"] * values.get("nodes", 1) if "per_node" in values else None',
             'return values["per_node"] if "per_node" in values else None', required=False),
    Mutation("launch-string-not-opened", "symbolic_cost/models/launch_script.py",
             "words = None if assignment else _inline_shell(_words(shell, line))",
             "words = None if assignment else _words(shell, line)", required=False),
    Mutation("null-tokenizer-eod-always-added", "symbolic_cost/models/megatron_args.py",
             'if not o.flag("null-tokenizer-vocab-includes-eod"):', 'if True:', required=False),
    Mutation("launch-string-any-message", "symbolic_cost/models/launch_script.py",
             'if start < 0 and words[i - 1:i] not in (["-c"], ["eval"]):', "if False:", required=False),
    Mutation("script-arguments-left", "symbolic_cost/models/launch_script.py",
             'return _VARIABLE.sub(put, _ARGUMENTS.sub("", text))', "return _VARIABLE.sub(put, text)", required=False),
    Mutation("older-names-unread", "symbolic_cost/models/megatron_args.py", "for old, new in OLDER.items():",
             "for old, new in ():", required=False),
    Mutation("launch-pipe-kept", "symbolic_cost/models/launch_script.py",
             "end = next((i for i, w in enumerate(words) if _CONTROL.fullmatch(w)), len(words))", "end = len(words)",
             required=False),
    Mutation("yarn-positions-refused", "symbolic_cost/models/megatron_args.py",
             '("learned_absolute", "rope", "yarn", "none")', '("learned_absolute", "rope", "none")', required=False),
    Mutation("undecided-command-text-as-options", "symbolic_cost/models/launch_script.py",
             "for w in _substituted(value).replace", "for w in value.replace", required=False),
    Mutation("read-keeps-old-values", "symbolic_cost/models/launch_script.py", "if _read_into(shell, line):",
             "if False:", required=False),
    Mutation("inert-unknown-option-values-refused", "symbolic_cost/models/launch_script.py",
             'UNKNOWN in w and (i == 0 or not words[i - 1].startswith("-") or w.startswith("-"))', "UNKNOWN in w",
             required=False),
    Mutation("inert-unknown-anywhere", "symbolic_cost/models/launch_script.py",
             'UNKNOWN in w and (i == 0 or not words[i - 1].startswith("-") or w.startswith("-"))', "False",
             required=False),
    Mutation("inert-self-append-whole", "symbolic_cost/models/launch_script.py",
             "value = re.sub(rf'^(\")?\\$(?:{name}\\b|\\{{{name}\\}})', r\"\\1\", value)", "pass",
             required=False),
    Mutation("then-command-dropped", "symbolic_cost/models/launch_script.py",
             'if keyword in ("then", "else", "do") and rest.strip() else [part]', "if False else [part]",
             required=False),
    Mutation("scalar-as-array-empty", "symbolic_cost/models/launch_script.py",
             "if array is not None and array not in self.arrays and array in self.scalars:", "if False:",
             required=False),
    Mutation("test-v-undecided", "symbolic_cost/models/launch_script.py",
             'words[0] == "-v" and (words[1] in self.scalars',
             'words[0] == "-v" and False and (words[1] in self.scalars', required=False),
    Mutation("moe-layer-list-inner-dense", "symbolic_cost/models/megatron_args.py",
             '"dense_layers": tuple(i for i, v in enumerate(pattern) if not v and i >= first)', '"dense_layers": ()',
             required=False),
    Mutation("megatron-sigmoid-not-normalised", "symbolic_cost/models/megatron_args.py",
             'normalise=score == "sigmoid" and top_k > 1', "normalise=False", required=False),
    Mutation("megatron-latent-default-rank", "symbolic_cost/models/megatron_args.py", 'o.integer("kv-lora-rank", 32)',
             'o.integer("kv-lora-rank", 512)', required=False),
    Mutation("batch-schedule-first-size", "symbolic_cost/models/megatron_args.py",
             'last = text.split()[-1].rpartition(":")[2]', 'last = text.split()[0].rpartition(":")[2]', required=False),
    Mutation("arithmetic-braced-names-unknown", "symbolic_cost/models/launch_script.py",
             r'r"\$\{(\w+)\}|\$?\b([A-Za-z_]\w*)\b"', r'r"\$\{(\w+)\}-|\$?\b([A-Za-z_]\w*)\b"',
             required=False),
    # the MTP module as a draft (tests/test_mtp_draft.py, by hand on DeepSeek-V3's config)
    Mutation("mtp-draft-word-table-counted", "symbolic_cost/inference/drafts.py",
             'return count * layer.total("weights") + ', 'return reading.stack[0][0].total("weights") + count * layer.total("weights") + ',
             required=False),
    Mutation("mtp-eh-proj-one-width", "symbolic_cost/blocks/mtp.py", "linear(at.b, at.l, 2 * at.e, at.e / at.m1,",
             "linear(at.b, at.l, at.e, at.e / at.m1,", required=False),
    Mutation("mtp-layer-dense", "symbolic_cost/inference/drafts.py",
             "moe = replace(moe, first_dense=0, dense_layers=()) if moe.is_moe(last) else None", "moe = None",
             required=False),
    Mutation("absorbed-verification-one-token", "symbolic_cost/inference/latent.py",
             "grouped_linear(b * heads * tokens, nope, rank", "grouped_linear(b * heads, nope, rank", required=False),
    # torchtitan's context parallelism (tests/test_framework_inputs.py)
    Mutation("torchtitan-cp-rotations-swapped", "symbolic_cost/models/torchtitan.py",
             'CP_ROTATIONS = {"allgather": "all-gather", "alltoall": "ring"}',
             'CP_ROTATIONS = {"allgather": "ring", "alltoall": "all-gather"}', required=False),
    Mutation("torchtitan-cp-ranks-left-out-of-the-world", "symbolic_cost/models/torchtitan.py",
             "    others = replicate * cp * tp * pp", "    others = replicate * tp * pp", required=False),
    # the products and layers a recipe reaches (tests/test_fp8_layers.py, by hand)
    Mutation("expert-matrices-once", "symbolic_cost/cost.py",
             "return sum((g.groups * g.k * g.n for g in self.gemms", "return sum((g.k * g.n for g in self.gemms",
             required=False),
    Mutation("router-runs-the-recipe", "symbolic_cost/models/recipes.py", 'KEPT_16BIT = ("router", "shared_gate")',
             'KEPT_16BIT = ("shared_gate",)', required=False),
    Mutation("16bit-layers-at-the-start-only", "symbolic_cost/models/recipes.py",
             "t.first_layers_16bit <= i < depth - t.last_layers_16bit", "t.first_layers_16bit <= i", required=False),
    Mutation("megatron-16bit-layers-default", "symbolic_cost/models/megatron_precision.py",
             "o.integer(option, 1, minimum=0)", "o.integer(option, 0, minimum=0)", required=False),
    # torchtitan's op-level policy (tests/test_op_recompute.py): the odd products saved, not the even
    Mutation("op-recompute-saves-even-products", "symbolic_cost/models/op_recompute.py",
             "out.append((product, counted % 2 == 0))", "out.append((product, counted % 2 == 1))",
             required=False),
    # delayed scaling's amax history: Megatron-LM's default is 1 (tests/test_low_precision.py)
    Mutation("megatron-amax-history-default", "symbolic_cost/models/megatron_precision.py",
             'o.integer("fp8-amax-history-len", 1)', 'o.integer("fp8-amax-history-len", 1024)', required=False),
    Mutation("amax-history-ignored", "symbolic_cost/models/recipes.py", "fp8.scale_bytes(t.fp8_amax_history)",
             "fp8.scale_bytes()", required=False),
    # Megatron-LM's recomputed modules (tests/test_recompute_modules.py, counted by hand): the rotary key
    # kept by the up-projections' checkpoint, the whole-MoE checkpoint's kept input, a norm redone
    # without its gather, the dense MLP's fused norm, the experts' activation rebuilding fc2's input
    Mutation("mla-up-proj-drops-rotary-key", "symbolic_cost/models/recompute_modules.py",
             "kept = latents + rotary_key_bytes(layer) - kernel.act_in", "kept = latents - kernel.act_in",
             required=False),
    Mutation("moe-checkpoint-keeps-nothing", "symbolic_cost/models/recompute_modules.py",
             'Integer(0) if "layernorm" in units else layer["router"].act_in', "Integer(0)", required=False),
    Mutation("layernorm-regathers", "symbolic_cost/models/recompute_modules.py",
             "Selection(norms, _at(layer, consumers), quiet=norms)", "Selection(norms, _at(layer, consumers))",
             required=False),
    Mutation("mlp-without-its-norm", "symbolic_cost/models/recompute_modules.py",
             'rows = _at(layer, MLP_ROWS) | _norm(layer, "_norm_2")', "rows = _at(layer, MLP_ROWS)",
             required=False),
    # the shared-expert overlap hides the smaller of the all-to-alls and the shared experts
    # (tests/test_shared_expert_overlap.py, each timed on its own)
    Mutation("shared-overlap-hides-every-all-to-all", "symbolic_cost/timing/step.py",
             "tensor_all - minimum(alltoall, _shared_expert_seconds(cost, place, system, conventions))",
             "tensor_all - alltoall", required=False),
    Mutation("shared-overlap-forward-only", "symbolic_cost/timing/step.py",
             'return Add(*(s[f"t_total_{p_}"] for s in seconds for p_ in ("fwd", "bwd")))',
             'return Add(*(s["t_total_fwd"] for s in seconds))', required=False),
    # SGLang's scheduler (tests/test_serving_sglang.py, worked by hand): the running requests charged
    # at the ratio, the fewest-generated retracted first, decoders waiting for the prefill rounds
    Mutation("sglang-charges-running-in-full", "symbolic_cost/inference/estimated.py",
             "return self.free - ahead * self.ratio", "return self.free - ahead", required=False),
    Mutation("sglang-retracts-the-eldest", "symbolic_cost/inference/estimated.py",
             "request = max(self.running.start, key=lambda r: (self.running.start[r], r))",
             "request = min(self.running.start, key=lambda r: (self.running.start[r], r))", required=False),
    Mutation("sglang-decodes-never-wait", "symbolic_cost/inference/estimated.py",
             "self.gaps += waited(self.stalls, self.decoding, duration)",
             "self.gaps.append((duration, self.decoding))", required=False),
    # GPT-OSS in Megatron-LM's arguments (tests/test_megatron_scripts.py, the published count and by hand)
    Mutation("megatron-window-without-the-token", "symbolic_cost/models/megatron_args.py",
             "return dict(window=int(left) + 1,", "return dict(window=int(left),", required=False),
    Mutation("megatron-window-skips-from-layer-0", "symbolic_cost/models/megatron_args.py",
             "pattern = tuple((i + 1) % int(freq) != 0 for i in range(n))",
             "pattern = tuple(i % int(freq) != 0 for i in range(n))", required=False),
    Mutation("megatron-moe-without-biases", "symbolic_cost/models/megatron_args.py",
             "router_bias=bias, expert_bias=bias,", "router_bias=False, expert_bias=False,", required=False),
    Mutation("moe-act-keeps-fc2-input", "symbolic_cost/models/recompute_modules.py",
             'return Selection(_at(layer, ("expert_clamp", "expert_act")), _at(layer, ("expert_fc2",)))',
             'return Selection(_at(layer, ("expert_clamp", "expert_act")), frozenset())', required=False),
    # the flash kernel's log-sum-exp is fp32 whatever the element size (tests/test_op_recompute.py, bf16)
    Mutation("flash-lse-at-element-size", "symbolic_cost/ops/attention.py", "b * h * l * LSE_BYTES,",
             "b * h * l * es,", required=False),
    # a ranked sweep's tasks (tests/test_fast_numbers.py against the plain sweep): every output into
    # one column, and the chosen rows rebuilt one value along each axis
    Mutation("best-of-one-column", "symbolic_cost/numeric/grid_tasks.py",
             "return [outputs[spare[0] if k in spare else k] for k in range(len(names))]",
             "return [outputs[0] for k in range(len(names))]", required=False),
    Mutation("rows-at-next-value", "symbolic_cost/numeric/grid_tasks.py",
             "axis[(numbers // stride) % len(axis)]", "axis[(numbers // stride + 1) % len(axis)]", required=False),
    # floor and ceiling of whole ratios in every backend (issue 64, tests/test_exact_backends.py against
    # exact substitution): no margin, and the floor's margin on the ceiling
    Mutation("rounding-without-margin", "symbolic_cost/numeric/rounding_margin.py",
             "return (top + (Rational(1, 2) if isinstance(call, floor) else Rational(-1, 2))) / bottom",
             "return top / bottom", required=False),
    Mutation("ceiling-margin-upwards", "symbolic_cost/numeric/rounding_margin.py",
             "return (top + (Rational(1, 2) if isinstance(call, floor) else Rational(-1, 2))) / bottom",
             "return (top + Rational(1, 2)) / bottom", required=False),
    # float8 products under torchtitan's op policy (aten._scaled_mm on the save list: PyTorch's own
    # selective checkpointing, tests/test_op_recompute.py); FSDP's FP8 gathers (tests/test_fp8_gather.py);
    # a NullTokenizer's end-of-document id in a Bridge recipe's vocabulary (tests/test_bridge_recipes.py)
    Mutation("core-attn-fused-redoes-nothing", "symbolic_cost/models/recompute_modules.py",
             "if tagged.rebuilt or not fused:", "if True:", required=False),
    Mutation("core-attn-fused-frees-o", "symbolic_cost/models/recompute_modules.py",
             "kept = sum((row.act_in + row.act_in_other + row.act_out for i",
             "kept = sum((row.act_in + row.act_in_other for i", required=False),
    Mutation("op-topk-not-kept", "symbolic_cost/models/op_recompute.py", "return choices * (4 + 8) + exchanged",
             "return choices * 0 + exchanged", required=False),
    Mutation("op-exchanges-not-kept", "symbolic_cost/models/op_recompute.py",
             'exchanged * Min(1, dims.get("ep", 1) - 1)', "0", required=False),
    Mutation("op-exchanges-sent-again", "symbolic_cost/models/op_recompute.py",
             "replace(row, collectives=()) if row.name in EXCHANGES else row", "row", required=False),
    Mutation("op-exchanges-rows-whole", "symbolic_cost/models/op_recompute.py",
             "if row.name in layer.names and row.name not in EXCHANGES]", "if row.name in layer.names]",
             required=False),
    Mutation("op-grouped-products-kept", "symbolic_cost/models/op_recompute.py",
             "for row in layer if row.name not in PRODUCTS + (KERNEL, TOPK)]",
             "for row in layer if row.name not in PRODUCTS + GROUPED + (KERNEL, TOPK)]", required=False),
    Mutation("op-gate-in-the-count", "symbolic_cost/models/op_recompute.py",
             'PRODUCTS = ("qkv_proj", "q_proj",', 'PRODUCTS = ("router", "qkv_proj", "q_proj",', required=False),
    Mutation("op-gated-by-width-never", "symbolic_cost/models/op_recompute.py",
             "if simplify(n - 2 * layer[after].gemms[0].k) == 0:", "if False:", required=False),
    Mutation("op-recompute-float8-counted", "symbolic_cost/models/op_recompute.py",
             "if row.fp8 or row.fp4:          # aten._scaled_mm", "if False:", required=False),
    Mutation("fp8-gather-at-16-bit", "symbolic_cost/models/recipes.py",
             'return es_w - sympify(states["fp8_matrix_elements"]) / parameters * (es_w - 1)', "return es_w",
             required=False),
    Mutation("bridge-null-tokenizer-no-eod", "symbolic_cost/models/bridge_recipes.py",
             'size = tokenizer["vocab_size"] + (tokenizer.get("tokenizer_type") == "NullTokenizer")',
             'size = tokenizer["vocab_size"]', required=False),
    # torchtitan's Python configurations (tests/test_torchtitan_python.py: typed layouts, torchtitan's token
    # arithmetic by hand): a pipeline step's micro-batches, experts split over the tensor ranks beside EP, the
    # float8 recipe each generation defaults to
    Mutation("torchtitan-pipeline-step-one-forward", "symbolic_cost/models/torchtitan_python.py",
             "t.update(seq_len=context, local_batch_size=rows * pipelined)",
             "t.update(seq_len=context, local_batch_size=rows)", required=False),
    Mutation("torchtitan-experts-over-tensor-ranks", "symbolic_cost/models/torchtitan.py",
             "return {S.ep: ep, S.etp: 1 if ep > 1 else tp}", "return {S.ep: ep, S.etp: tp}", required=False),
    # speculative decoding (tests/test_speculative.py: a Monte-Carlo run of the acceptance rule, the step by hand)
    Mutation("speculative-no-bonus-token", "symbolic_cost/inference/speculative.py",
             "return (1 - alpha ** (k + 1)) / (1 - alpha)", "return (1 - alpha ** k) / (1 - alpha)", required=False),
    Mutation("speculative-verify-k-tokens", "symbolic_cost/inference/speculative.py",
             "return mean_decode(arch, s, conventions, tokens=k + 1)",
             "return mean_decode(arch, s, conventions, tokens=k)", required=False),
    # Megatron-LM's older and newer options (tests/test_megatron_examples.py: its arguments.py by hand)
    Mutation("megatron-activations-checkpoint-method-ignored", "symbolic_cost/models/megatron_args.py",
             'method = "uniform" if o.flag("checkpoint-activations") else \\', 'method = "uniform" if True else \\',
             required=False),
    Mutation("megatron-gpt2-vocabulary-off-by-one", "symbolic_cost/models/megatron_args.py",
             "GPT2_VOCAB = 50257", "GPT2_VOCAB = 50256", required=False),
    Mutation("megatron-llama2-vocabulary-off-by-one", "symbolic_cost/models/megatron_args.py",
             "LLAMA2_VOCAB = 32000", "LLAMA2_VOCAB = 32001", required=False),
    Mutation("megatron-mtp-layers-not-read", "symbolic_cost/models/megatron_args.py",
             'mtp_layers=o.integer("mtp-num-layers", 0)', 'mtp_layers=0', required=False),
    Mutation("launch-quoted-array-one-word", "symbolic_cost/models/launch_script.py",
             "return '\" \"'.join(", "return ' '.join(", required=False),
    Mutation("launch-empty-quoted-array-a-word", "symbolic_cost/models/launch_script.py",
             'lambda m: "" if self.arrays.get(m.group(1)) == [] else m.group(0)', 'lambda m: m.group(0)',
             required=False),
    Mutation("launch-sbatch-document-is-data", "symbolic_cost/models/launch_script.py",
             "return not heredoc.group(1) and bool(before)", "return False and bool(before)", required=False),
    Mutation("megatron-bert-causal", "symbolic_cost/models/megatron_args.py",
             "return dict(causal=False, token_types=2 if binary else 0",
             "return dict(causal=True, token_types=2 if binary else 0",
             required=False),
    Mutation("megatron-bert-token-types-always", "symbolic_cost/models/megatron_args.py",
             "token_types=2 if binary else 0", "token_types=2", required=False),
    Mutation("megatron-bert-tokens-added-dropped", "symbolic_cost/models/megatron_args.py",
             "BERT_ADDED = 2", "BERT_ADDED = 0", required=False),
    Mutation("megatron-t5-head-without-bias", "symbolic_cost/models/megatron_args.py",
             "return dict(decoder_layers=n, head_bias=tied,", "return dict(decoder_layers=n, head_bias=False,",
             required=False),
    Mutation("megatron-t5-relative-buckets-fixed", "symbolic_cost/models/megatron_args.py",
             "relative_buckets=buckets if relative else 0", "relative_buckets=16 if relative else 0", required=False),
    Mutation("megatron-t5-decoder-tokens-the-encoder's", "symbolic_cost/models/megatron_args.py",
             "values[S.l_dec] = _t5_decoder(o, pp)", "values[S.l_dec] = seq", required=False),
    Mutation("megatron-torchrun-without-a-default", "symbolic_cost/models/megatron_words.py",
             'values.get("per_node", 1 if torchrun_default(launcher) else None)', 'values.get("per_node")',
             required=False),
    Mutation("launch-held-launcher-options", "symbolic_cost/models/launch_script.py",
             'and any(w.split("=")[0] in _MODEL_WORDS for w in words)', '', required=False),
    Mutation("megatron-squared-relu-as-gelu", "symbolic_cost/models/megatron_args.py",
             'mlp="swiglu" if swiglu else "relu" if o.flag("squared-relu") else "gelu",',
             'mlp="swiglu" if swiglu else "gelu" if o.flag("squared-relu") else "gelu",', required=False),
    Mutation("deepspeed-lamb-refused", "symbolic_cost/models/deepspeed.py",
             'OPTIMIZERS = {"adam": "adam", "adamw": "adamw", "lamb": "adam"}',
             'OPTIMIZERS = {"adam": "adam", "adamw": "adamw"}', required=False),
    Mutation("deepspeed-one-bit-adam-as-adam", "symbolic_cost/models/deepspeed.py",
             'COMPRESSED = {"onebitadam": "onebit-adam", "onebitlamb": "onebit-lamb"}',
             'COMPRESSED = {"onebitadam": "adam", "onebitlamb": "onebit-lamb"}', required=False),
    Mutation("deepspeed-zero-one-adam-as-one-bit", "symbolic_cost/models/deepspeed.py",
             'LOCAL_STEPS = "zerooneadam"', 'LOCAL_STEPS = "zeroone"', required=False),
    Mutation("one-bit-signs-a-byte", "symbolic_cost/parallel/zero.py", 'SIGN_BYTES = Rational(1, 8)',
             'SIGN_BYTES = Rational(1, 1)', required=False),
    Mutation("one-bit-scales-left-out", "symbolic_cost/parallel/zero.py",
             'return (one("alltoall", parameters, SIGN_BYTES) + one("allgather", d, 4)',
             'return (one("alltoall", parameters, SIGN_BYTES) + []', required=False),
    Mutation("one-bit-server-error-left-out", "symbolic_cost/models/optimizers.py",
             'return 4 + Integer(4) / d if get_optimizer(optimizer).compressed else Integer(0)',
             'return 4 + Integer(0) / d if get_optimizer(optimizer).compressed else Integer(0)',
             required=False),
    Mutation("one-bit-lamb-fresh-moment-left-out", "symbolic_cost/models/optimizers.py",
             '"onebit-lamb": Optimizer("onebit-lamb", 3, compressed=True),',
             '"onebit-lamb": Optimizer("onebit-lamb", 2, compressed=True),', required=False),
    Mutation("one-bit-exchange-hidden", "symbolic_cost/timing/step.py",
             '+ _dimension_time(cost, "optimizer", system, conventions)}',
             '+ 0 * _dimension_time(cost, "optimizer", system, conventions)}', required=False),
    Mutation("weight-offload-steps-on-the-host", "symbolic_cost/models/recipes.py",
             '    return offload in ("optimizer", "parameters")', '    return offload != "none"', required=False),
    Mutation("weight-offload-writes-back-nothing", "symbolic_cost/models/recipes.py",
             'device_to_host=weight_shard, weight_bytes=Integer(0))', 'device_to_host=0, weight_bytes=Integer(0))',
             required=False),
    Mutation("deepspeed-weight-offload-as-both", "symbolic_cost/models/deepspeed.py",
             '("none", "cpu"): "weights"}', '("none", "cpu"): "parameters"}', required=False),
    Mutation("unused-head-settings-accepted", "symbolic_cost/models/architecture.py",
             '        for name, value, why in unused:\n            raise InputError(',
             '        for name, value, why in unused[:0]:\n            raise InputError(', required=False),
    Mutation("dense-etp-accepted", "symbolic_cost/models/training.py",
             '("etp", sympify(etp), sympify(t.m1)),', '("etp", sympify(etp), sympify(etp)),', required=False),
    Mutation("accelerate-cp-ranks-as-data", "symbolic_cost/models/accelerate.py",
             'out = {"values": {S.d: size["dp_replicate"] * size["dp_shard"], S.cp: size["cp"]}}',
             'out = {"values": {S.d: size["dp_replicate"] * size["dp_shard"] * size["cp"], S.cp: 1}}', required=False),
    Mutation("accelerate-hsdp-unsharded", "symbolic_cost/models/accelerate.py",
             '        out["shard"] = size["dp_shard"]', '        out["shard"] = size["dp_shard"] * size["dp_replicate"]',
             required=False),
    Mutation("bf16-load-drops-the-launchers-master", "symbolic_cost/models/hf_trainer.py",
             '    return launcher in FP32_COPY', '    return False', required=False),
    Mutation("lora-fp32-base-as-16-bit", "symbolic_cost/models/recipes.py",
             'frozen = 4 if t.lora is not None and t.lora.base == "fp32" else es',
             'frozen = es', required=False),
    Mutation("trl-lora-base-16-bit-by-default", "symbolic_cost/models/trl_recipe.py",
             'else "fp32"\n', 'else "16-bit"\n', required=False),
    Mutation("chunked-loss-whole-logits", "symbolic_cost/blocks/heads.py",
             'return replace(row, **{f: getattr(row, f) / chunks for f in fields})',
             'return replace(row, **{f: getattr(row, f) for f in fields})', required=False),
    Mutation("torchtitan-chunked-loss-unread", "symbolic_cost/models/torchtitan_python.py",
             'chunks = value.fields.get("num_chunks", 8)', 'chunks = value.fields.get("num_chunks", 1)',
             required=False),
    Mutation("one-bit-with-zero-accepted", "symbolic_cost/models/training.py",
             'if get_optimizer(t.optimizer).compressed and (t.zero != 0 or t.distributed_optimizer):',
             'if get_optimizer(t.optimizer).compressed and (t.zero > 3 or t.distributed_optimizer):', required=False),
    Mutation("launch-open-quote-a-value-error", "symbolic_cost/models/launch_script.py",
             "    except ValueError:\n        raise InputError(f\"{what}: a quote in",
             "    except ImportError:\n        raise InputError(f\"{what}: a quote in", required=False),
    Mutation("accelerate-unhashable-looked-up", "symbolic_cost/models/accelerate.py",
             "    return value if isinstance(value, (str, int, float, bool, type(None))) else ()",
             "    return value", required=False),
    Mutation("trl-target-modules-unchecked", "symbolic_cost/models/trl_recipe.py",
             "    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):",
             "    if False:", required=False),
    Mutation("deepspeed-offload-section-unchecked", "symbolic_cost/models/deepspeed.py",
             "        if not isinstance(section, dict):\n            raise InputError(f\"zero_optimization.{key} must",
             "        if False:\n            raise InputError(f\"zero_optimization.{key} must", required=False),
    Mutation("torchtitan-filter-names-unchecked", "symbolic_cost/models/torchtitan.py",
             "    if not all(isinstance(name, str) for name in filtered) or not set(filtered) <= KEPT_BY_THE_LIBRARY:",
             "    if not set(filtered) <= KEPT_BY_THE_LIBRARY:", required=False),
    Mutation("llama3-rows-under-the-librarys-count", "symbolic_cost/reproduce/measured.py",
             "    return Fraction(int(tokens * palm_flops(architecture, training.l, parameters)))",
             "    return Fraction(int(tokens * 6 * parameters))", required=False),
    Mutation("launch-group-after-or-runs-where-the-test-holds", "symbolic_cost/models/launch_script.py",
             '    runs = decided if group["join"] in (None, "&&") or decided is None else not decided',
             "    runs = decided", required=False),
    Mutation("launch-group-not-opened", "symbolic_cost/models/launch_script.py",
             "        if _group(shell, line, number, todo):\n            continue\n", "", required=False),
    Mutation("deepspeed-own-keys-ignored-too", "symbolic_cost/models/deepspeed.py",
             "                if not section and key not in DEEPSPEED_KEYS:",
             "                if not section:", required=False),
    Mutation("deepspeed-foreign-key-refused", "symbolic_cost/models/deepspeed.py",
             '                    notes.append(f"{key}: not a key DeepSpeed reads; DeepSpeed ignores it, and so does this reading")\n                    continue\n',
             "", required=False),
    Mutation("launch-default-idiom-for-any-name", "symbolic_cost/models/launch_script.py",
             "    return (inner is not None and len(inner) == 3 and inner[0] is None and inner[2] == name\n",
             "    return (inner is not None and len(inner) == 3 and inner[0] is None\n", required=False),
    Mutation("launch-default-idiom-of-a-set-variable", "symbolic_cost/models/launch_script.py",
             "        return name if name.isidentifier() and name not in self.scalars and name not in self.arrays else None",
             "        return name if name.isidentifier() else None", required=False),
    Mutation("flex-dispatch-per-copy", "symbolic_cost/parallel/collectives.py",
             "    return (domains - 1) * (1 - missed) / k", "    return (domains - 1) * (1 - missed)", required=False),
    Mutation("flex-dispatch-unpriced", "symbolic_cost/timing/nccl.py",
             "        sent = network_share(n, nodes, routing) * volume", "        sent = network_share(n, nodes) * volume",
             required=False),
    Mutation("flex-dispatch-unmarked", "symbolic_cost/blocks/moe.py",
             '        routing = (experts, k) if placed.dispatcher == "flex" else None', "        routing = None",
             required=False),
    Mutation("torchtitan-float8-defaults-swapped", "symbolic_cost/models/torchtitan_python.py",
             'recipe = f.get("recipe_name") or ("rowwise" if second else "tensorwise")',
             'recipe = f.get("recipe_name") or ("tensorwise" if second else "rowwise")', required=False),
    # a grouped GEMM timed as its experts' products (issue 62)
    Mutation("grouped-gemm-one-product", EFFICIENCY, "    gemms = [(g, g.launched()) for g in cost.gemms if g.pass_ == pass_]",
             "    gemms = [(g, g) for g in cost.gemms if g.pass_ == pass_]", required=False),
    Mutation("grouped-gemm-weights-read-once", "symbolic_cost/timing/kernels.py",
             "    each = [product_times(g.launched(), system, conventions, cost.name, engine) for g in products]",
             "    each = [product_times(g, system, conventions, cost.name, engine) for g in products]", required=False),
    Mutation("dispatcher-sorts-one-expert", "symbolic_cost/blocks/moe.py", "    runs = 1 - round_down(1 / local)",
             "    runs = 1", required=False),
    Mutation("dispatcher-sorts-unpriced", "symbolic_cost/blocks/moe.py",
             '    sorts = [] if placed.replicated or placed.dispatcher != "alltoall" else _sorts(at, through, experts / ep)',
             "    sorts = []", required=False),
    Mutation("dispatcher-sorts-flex-too", "symbolic_cost/blocks/moe.py",
             '    sorts = [] if placed.replicated or placed.dispatcher != "alltoall" else _sorts(at, through, experts / ep)',
             "    sorts = [] if placed.replicated else _sorts(at, through, experts / ep)", required=False),
    Mutation("runs-of-a-row-ignored-by-launches", EFFICIENCY,
             "    return count if cost.runs is None else cost.runs * count", "    return count", required=False),
    Mutation("runs-of-a-row-ignored-by-tiles", "symbolic_cost/timing/kernels.py",
             "    return times if cost.runs is None else tuple(cost.runs * t for t in times)", "    return times",
             required=False),
    Mutation("grouped-gemm-wgrad-rows-not-shared", "symbolic_cost/cost.py",
             '        share = {"k": self.k / self.groups} if self.grad == "weight" else {"m": self.m / self.groups}',
             '        share = {"m": self.m / self.groups}', required=False),
    # a mixture of experts planned from a budget (tests/test_planning.py)
    Mutation("expert-shape-width-alone", "symbolic_cost/analysis/planning.py",
             "                **{key: base[key] * e // width for key in self.scaled}}", "                }",
             required=False),
    Mutation("expert-plan-first-depth-past-target", "symbolic_cost/analysis/planning.py",
             "    near = [depths[i] for i in (low - 1, low) if 0 <= i < len(depths)]", "    near = [depths[low]]",
             required=False),
    # Blackwell's windowed bars, counted as cuDNN's benchmark counts them (tests/test_attention_kernels.py)
    Mutation("windowed-bar-counted-as-square", "symbolic_cost/timing/attention_kernels.py",
             "    if window is not None and causal:      # min(i + 1, w) keys", "    if False:      #", required=False),
    # the B300 chip's kernel, and a system's own kernel of the library named (tests/test_attention_kernels.py)
    Mutation("ultra-at-b200-s-levels", "symbolic_cost/timing/attention_kernels.py",
             "        return level * paired_ratio(name, pass_), overhead, share",
             "        return level, overhead, share", required=False),
    Mutation("system-s-own-kernel-ignored", "symbolic_cost/timing/attention_kernels.py",
             "    if library is None or eff is None or library_of(eff.attention_kernel) == library:",
             "    if library is None or eff is None:", required=False),
    # the attention library a training names (tests/test_attention_kernels.py)
    Mutation("training-kernel-ignored-by-the-step", "symbolic_cost/timing/step.py",
             "    system = attention_kernels.for_training(system, t)\n", "", required=False),
    Mutation("training-kernel-ignored-by-the-layer", "symbolic_cost/timing/step.py",
             "    system = attention_kernels.for_training(system, cost.training)\n", "", required=False),
    Mutation("fa2-on-hopper-as-on-ampere", "symbolic_cost/timing/attention_kernels.py",
             '"hopper": "flash-attention-2-hopper",', '"hopper": "flash-attention-2",', required=False),
    Mutation("torchtitan-sdpa-cudnn-on-hopper", "symbolic_cost/models/torchtitan.py",
             '"hopper": "flash-attention-2", "ampere"', '"hopper": "cudnn", "ampere"', required=False),
    # DPO's reference model (tests/test_preference.py)
    Mutation("reference-copy-holds-the-adapters", "symbolic_cost/models/recipes.py",
             "    return (per_device - (train if t.lora is not None else 0)) * REFERENCE_BYTES[t.reference]",
             "    return per_device * REFERENCE_BYTES[t.reference]", required=False),
    Mutation("reference-copy-unsharded", "symbolic_cost/models/recipes.py",
             'weight_bytes=(weights + reference) / shard["weights"]',
             'weight_bytes=weights / shard["weights"] + reference', required=False),
    Mutation("reference-runs-the-adapters", "symbolic_cost/models/recipes.py",
             "    return [r for r in blk if not is_adapter(r)]", "    return list(blk)", required=False),
    Mutation("reference-gather-bytes-doubled", "symbolic_cost/models/recipes.py",
             'return collective("allgather", states["reference_bytes"], 1, t.shard_group, "fwd", conventions, repeats=n,',
             'return collective("allgather", states["reference_bytes"], 2, t.shard_group, "fwd", conventions, repeats=n,',
             required=False),
    Mutation("reference-forward-not-timed", "symbolic_cost/timing/step.py",
             "    return n * (compute + tensor) + exposed", "    return n * tensor + exposed", required=False),
    Mutation("optimizer-writes-the-reference", "symbolic_cost/models/recipes.py",
             'step = (2 * optimizer + train * (g + w)) / shard["optimizer"]',
             'step = (2 * optimizer + train * (g + w) + reference) / shard["optimizer"]', required=False),
    Mutation("dpo-examples-counted-once", "symbolic_cost/models/hf_trainer.py",
             'count_field(args, "per_device_train_batch_size") * (2 if pairs else 1)',
             'count_field(args, "per_device_train_batch_size")', required=False),
    Mutation("deepspeed-leaves-the-reference-fp32", "symbolic_cost/models/hf_trainer.py",
             '        policy["reference"] = "16-bit"      # TRL prepares', '        pass  # TRL prepares',
             required=False),
    Mutation("reward-model-keeps-the-lm-head", "symbolic_cost/models/hf_trainer.py",
             "        arch = reward_model(arch)", "        pass", required=False),
    # a Trainer with a DeepSpeed config (tests/test_trainer_deepspeed.py)
    Mutation("trainer-deepspeed-mismatch-accepted", "symbolic_cost/models/trainer_deepspeed.py",
             "        if launch.values[symbol] != fills[symbol]:", "        if False:", required=False),
    # LLaMA-Factory's YAML (tests/test_llamafactory.py)
    Mutation("llamafactory-lora-rank-default-16", "symbolic_cost/models/llamafactory.py",
             '"lora_r": _count(own, "lora_rank", 8)', '"lora_r": _count(own, "lora_rank", 16)', required=False),
    Mutation("llamafactory-simpo-keeps-a-reference", "symbolic_cost/models/llamafactory.py",
             'reference_free = pairs and loss in ("orpo", "simpo")', 'reference_free = pairs and loss in ("orpo",)',
             required=False),
    Mutation("llamafactory-nested-quant-off", "symbolic_cost/models/llamafactory.py",
             '"use_bnb_nested_quant": _flag(own, "double_quantization", True)',
             '"use_bnb_nested_quant": _flag(own, "double_quantization", False)', required=False),
    Mutation("trainer-deepspeed-optimizer-section-ignored", "symbolic_cost/models/trainer_deepspeed.py",
             '    if "optimizer" in launch.policy:', "    if False:", required=False),
    # Liger's fused linear cross-entropy (tests/test_fused_loss.py)
    Mutation("fused-loss-keeps-no-weight-gradient", "symbolic_cost/ops/embedding.py",
             "act_buffer=(tokens + v) * e * es", "act_buffer=tokens * e * es", required=False),
    Mutation("fused-loss-chunk-not-a-power-of-two", "symbolic_cost/ops/embedding.py",
             "return minimum(2 ** ceiling(log(share, 2)), tokens)", "return minimum(share, tokens)", required=False),
    Mutation("fused-loss-two-products", "symbolic_cost/ops/embedding.py",
             'Gemm("fwd", v, tokens, e, element_bytes=es, grad="weight"))',
             'Gemm("fwd", v, tokens, e, element_bytes=es, grad="weight"))[:2]', required=False),
    # torchtitan's GPT-OSS flavours (tests/test_torchtitan_python.py)
    Mutation("torchtitan-gpt-oss-120b-experts", "symbolic_cost/models/torchtitan_models.py",
             '"120b": _gpt_oss(36, 2880, 201088, 128)', '"120b": _gpt_oss(36, 2880, 201088, 64)', required=False),
    Mutation("torchtitan-gpt-oss-no-varlen-note", "symbolic_cost/models/torchtitan_python.py",
             'ATTENTION_DEFAULT = {"gpt_oss": "varlen"}', 'ATTENTION_DEFAULT = {}', required=False),
    Mutation("torchtitan-toml-gpt-oss-debug-vocabulary", "symbolic_cost/models/torchtitan_models.py",
             "debugmodel=_gpt_oss(4, 256, 201088, 8)", "debugmodel=_gpt_oss(4, 256, 2048, 8)", required=False),
    Mutation("torchtitan-llama4-128e-every-layer-moe", "symbolic_cost/models/torchtitan_models.py",
             '"17bx128e": _llama4(48, 5120, 40, 8, LLAMA4_VOCAB, 128, 2, 8192, 16384)',
             '"17bx128e": _llama4(48, 5120, 40, 8, LLAMA4_VOCAB, 128, 1, 8192, 16384)', required=False),
    Mutation("accelerate-fp8-history-default-1", "symbolic_cost/models/accelerate.py",
             'history = section.get("amax_history_len", 1024)', 'history = section.get("amax_history_len", 1)',
             required=False),
    Mutation("accelerate-fp8-ao-no-gather", "symbolic_cost/models/accelerate.py",
             'gather = _fp8_switch(section, "enable_fsdp_float8_all_gather", True)',
             'gather = _fp8_switch(section, "enable_fsdp_float8_all_gather", False)', required=False),
    # DeepSpeed's sequence parallelism through accelerate (tests/test_framework_inputs.py)
    Mutation("alst-data-ranks-not-divided", "symbolic_cost/models/accelerate.py",
             '"values": {S.d: world // sp, S.cp: sp}', '"values": {S.d: world, S.cp: sp}', required=False),
    # bitsandbytes' 4-bit checkpoints served, FP8 weights without FP8 tensor cores (tests/test_weight_formats.py)
    Mutation("nf4-double-second-scale-dropped", "symbolic_cost/models/number_formats.py",
             "NF4_DOUBLE = block_scaled(4, 64) + Rational(32, 8 * 64 * 256)", "NF4_DOUBLE = block_scaled(4, 64)",
             required=False),
    Mutation("bnb-double-quant-ignored", "symbolic_cost/models/config.py",
             'return ("nf4-double" if double else "nf4")', 'return ("nf4")', required=False),
    Mutation("fp8-widened-everywhere", FORMATS, 'if fmt is None or fmt.products != "fp8" or system.fp8_flops:',
             'if fmt is None or fmt.products != "fp8":', required=False),
    # a limit inside another (tests/test_budget.py)
    Mutation("nested-limit-outer-lost", "symbolic_cost/budget.py", "        if outer and not (expired and capped):",
             "        if False:", required=False),
    Mutation("nested-limit-not-capped", "symbolic_cost/budget.py",
             "capped = bool(outer) and outer <= seconds", "capped = False", required=False),
    Mutation("interval-infinity-sign", "symbolic_cost/bounds.py",
             "return _INFINITE if (x > 0) == (y > 0) else -_INFINITE",
             "return _INFINITE if (x > 0) != (y > 0) else -_INFINITE", required=False),
    Mutation("ceiling-of-anything-at-least-one", "symbolic_cost/bounds.py",
             "return RATIONAL(1 if rounded < 1 and _positive(expr.args[0]) else rounded)",
             "return RATIONAL(1 if rounded < 1 else rounded)", required=False),
    Mutation("upper-bound-of-min-is-largest", "symbolic_cost/bounds.py",
             "        return min(parts) if parts else None\n    if isinstance(expr, (Add, Max, Piecewise)):",
             "        return max(parts) if parts else None\n    if isinstance(expr, (Add, Max, Piecewise)):",
             required=False),
    Mutation("reciprocal-bound-of-the-wrong-end", "symbolic_cost/bounds.py",
             "return base ** int(expr.exp)        # 1/x**k is at most 1/L**k where x >= L > 0",
             "return base ** int(-expr.exp)        # 1/x**k is at most 1/L**k where x >= L > 0",
             required=False),
    Mutation("own-ceiling-share-any-size", "symbolic_cost/bounds.py",
             "if integer and share.is_Rational and 0 < share <= 1 else None",
             "if integer and share.is_Rational and 0 < share else None", required=False),
    Mutation("allreduce-one-ring-pass", KINDS, 'Kind("allreduce", "ring", passes=2,', 'Kind("allreduce", "ring", passes=1,',
             required=False),
    Mutation("reduce-adds-nothing", KINDS, 'Kind("reduce", "rooted", reduces=True,', 'Kind("reduce", "rooted",',
             required=False),
    Mutation("allgather-behind-the-backward", KINDS, 'nvls=True, window="param"', 'nvls=True, window="grad"',
             required=False),
    Mutation("recomputed-layer-saves-its-input-again", "symbolic_cost/models/memory.py",
             "return group * whole - tokens_bytes", "return group * whole", required=False),
    Mutation("recomputed-backward-without-its-gradient", "symbolic_cost/models/peak.py",
             "return rebuilt + tokens_bytes - freed + also", "return rebuilt - freed + also", required=False),
    Mutation("block-recompute-frees-nothing", "symbolic_cost/models/peak.py",
             "    rebuilt -= _kept_whole_and_freed(cost, conventions)\n", "", required=False),
    Mutation("speculative-prefill-communicates-k-tokens", "symbolic_cost/inference/load.py",
             "single = dec if speculation is None else decode(arch, one, S.l_ctx, conventions)", "single = dec",
             required=False),
    Mutation("draft-decodes-launched-on-every-step", "symbolic_cost/inference/load.py",
             "launches = (decodes if decoding else 0) + (prefill if prompts else 0)", "launches = decodes + prefill",
             required=False),
    Mutation("peak-of-each-categorys-busiest-rank", "symbolic_cost/models/peak.py",
             'if not p.is_number or p == 1 or place.rows is None or cost.training.schedule == "dualpipe":',
             "if True:", required=False),
    Mutation("optimizer-step-updates-every-parameter", "symbolic_cost/models/recipes.py",
             'step = (2 * optimizer + train * (g + w)) / shard["optimizer"]',
             'step = 2 * optimizer / shard["optimizer"] + train * (g + w)', required=False),
    Mutation("block-recompute-makes-no-gradients", "symbolic_cost/models/peak.py",
             'blk.total("act_buffer") - (blk.total("weight_grads") if step else 0)', 'blk.total("act_buffer")',
             required=False),
    Mutation("pipeline-sends-linked-by-one-pair", PIPELINE, "reach=sympify(p) * stride)]", "reach=None)]",
             required=False),
    Mutation("interleaved-sends-never-hidden", "symbolic_cost/timing/step.py",
             "return maximum(0, sends - compute) if overlaps_sends(cost.training) else sends", "return sends",
             required=False),
    Mutation("bridge-lora-fc1-half-of-a-gated-mlp", "symbolic_cost/models/megatron_bridge_peft.py",
             'return "gate_up" if arch.gated else "up"', 'return "up"', required=False),
    Mutation("bridge-peft-ignored", "symbolic_cost/models/megatron_bridge.py",
             '    policy.update(peft_policy(c.data.get("peft"), arch, notes))\n', "", required=False),
    Mutation("capacity-of-the-first-burst", "symbolic_cost/inference/load.py",
             "    while 2 * burst <= MAX_BURST:", "    while False:", required=False),
    Mutation("capacity-stops-at-one-small-gain", "symbolic_cost/inference/load.py",
             "rates[burst] <= rates[burst // 4] * (1 + float(CONVERGED))",
             "rates[burst] <= rates[burst // 2] * (1 + float(CONVERGED))", required=False),
    Mutation("serving-ranks-never-copy-kv-heads", "symbolic_cost/inference/kv_cache.py",
             "    return bool(kv.is_Integer and m1.is_Integer and m1 > kv and m1 % kv == 0)", "    return False",
             required=False),
    Mutation("chunks-priced-at-the-mean-share", "symbolic_cost/inference/batching.py",
             "+ (shift(chunks) if shift is not None and chunks else 0.0)", "+ 0.0", required=False),
    Mutation("serving-sends-all-on-one-link", "symbolic_cost/timing/hardware.py",
             "    links = chain_links(c, system) if link is None else None", "    links = None", required=False),
    Mutation("pipeline-job-of-the-stages-alone", "symbolic_cost/models/totals.py",
             'chain = exact(cost.training.p, "p") * exact(cost.training.virtual_stages, "virtual_stages")',
             'chain = exact(cost.training.p, "p")', required=False),
    Mutation("ends-collectives-on-every-device", "symbolic_cost/models/totals.py",
             "    world = world_size(cost.training) * collective.ranks", "    world = world_size(cost.training)",
             required=False),
    Mutation("moe-state-of-each-parts-busiest-rank", "symbolic_cost/models/totals.py",
             'if place.rows is None or t.schedule == "dualpipe" or not sympify(t.p).is_Integer or cost.architecture.moe is None:',
             "if True:", required=False),
    Mutation("sends-hidden-in-every-schedule", "symbolic_cost/models/training.py",
             'return t.overlap.pipeline and t.schedule == "interleaved"', "return t.overlap.pipeline",
             required=False),
    # torchtitan's first TOML generation (tests/test_framework_inputs.py)
    Mutation("torchtitan-first-generation-float8-ignored", "symbolic_cost/models/torchtitan_keys.py",
             '        if value:\n            data.setdefault("model", {})["converters"] = ["float8"]',
             '        if False:\n            data.setdefault("model", {})["converters"] = ["float8"]', required=False),
    Mutation("torchtitan-first-generation-fsdp-degree-replicated", "symbolic_cost/models/torchtitan_keys.py",
             '("training", "data_parallel_degree"): "data_parallel_shard_degree",',
             '("training", "data_parallel_degree"): "data_parallel_replicate_degree",', required=False),
    Mutation("torchtitan-first-generation-bf16-without-fsdp", "symbolic_cost/models/torchtitan.py",
             'if job.first and zero == 0 and value == "bfloat16":', "if False:", required=False),
    # Megatron-Core's precision-aware optimizer (tests/test_framework_inputs.py, tests/test_bridge_recipes.py)
    Mutation("precision-aware-masters-always-held", "symbolic_cost/models/megatron_precision.py",
             'held = main_params != "fp32" or fp8 is None or fp8 in DELAYED', "held = True", required=False),
    Mutation("precision-aware-moments-fp32", "symbolic_cost/models/megatron_precision.py",
             "return ADAM_STATES[master, STATE_BYTES[exp_avg]]", "return ADAM_STATES[master, 4]", required=False),
    Mutation("16bit-master-counted-fp32", "symbolic_cost/models/optimizers.py",
             "master = Integer(4) if opt.master_bytes is None else sympify(opt.master_bytes)", "master = Integer(4)",
             required=False),
    Mutation("bridge-run-time-layout-unread", "symbolic_cost/models/bridge_recipes.py",
             '    model["pipeline_model_parallel_layout"] = layout\n', "", required=False),
    Mutation("dft-beside-liger-counted", "symbolic_cost/models/llamafactory.py",
             '    if out.get("enable_liger_kernel"):\n        raise InputError("use_dft_loss',
             '    if False:\n        raise InputError("use_dft_loss', required=False),
    Mutation("deepspeed-launcher-nodes-left-out", "symbolic_cost/models/megatron_words.py",
             '    return values["per_node"] * values.get("nodes", 1)\n\n\ndef _counts',
             '    return values["per_node"]\n\n\ndef _counts', required=False),
    Mutation("batch-first-drops-the-cache", "symbolic_cost/inference/load.py",
             "return self.fixed(batch) + self.moving(batch, context)", "return self.fixed(batch)", required=False),
    Mutation("kept-cse-shows-every-extremum-a-max", "symbolic_cost/extrema.py",
             "return unevaluated(kind, args) if kind in (Max, Min) else kind(*args)",
             "return unevaluated(Max, args) if kind in (Max, Min) else kind(*args)", required=False),
    Mutation("deepspeed-bf16-states-unread", "symbolic_cost/models/deepspeed.py",
             'chosen = "adam-16bit-master-bf16-moments" if states else "adam-16bit-master"',
             'chosen = "adam-16bit-master"', required=False),
    Mutation("torchao-mxfp8-casts-one-byte", "symbolic_cost/models/recipes.py",
             "es=es, quantised=recipe.cast_bytes,", "es=es, quantised=1,", required=False),
    Mutation("step-prices-negative-work", "symbolic_cost/inference/load.py",
             "valid = 0 <= prompts < math.inf and 0 <= decoding < math.inf and 0 <= context < math.inf",
             "valid = True", required=False),
    Mutation("length-context-unchecked", "symbolic_cost/inference/lengths.py",
             'None if context is None else _count(context, "context")', "context", required=False),
    # tensor parallelism with other ends (tp_ends): transformers' tp_plan, DeepSpeed's AutoTP
    Mutation("gathered-logits-left-split", "symbolic_cost/blocks/heads.py",
             'head = at.attach(head, at.collective("allgather", b * l * vocab, m1, "fwd"))', 'head = head',
             required=False),
    Mutation("split-inputs-reduced-once", "symbolic_cost/blocks/layout.py",
             'collectives = self.reduce_to_shards("bwd") * products', 'collectives = self.reduce_to_shards("bwd")',
             required=False),
    Mutation("whole-table-split-by-vocabulary", "symbolic_cost/blocks/heads.py",
             'return ends in ("whole-table", "whole")', 'return ends == "whole"', required=False),
    Mutation("autotp-ranks-as-data", "symbolic_cost/models/deepspeed.py",
             "S.d: dp // tp,", "S.d: dp,", required=False),
    # the serving simulator's fast paths (tests/test_serving_jump.py)
    Mutation("decode-run-past-an-arrival", BATCHING, "if ran + 1 >= steps or arrival <= now:", "if ran + 1 >= steps:",
             required=False),
    Mutation("decode-run-at-a-later-arrival", BATCHING, "if ran + 1 >= steps or arrival <= now:",
             "if ran + 1 >= steps or arrival < now:", required=False),
    Mutation("lockstep-run-without-the-idle-replicas", BATCHING,
             "min([engine.next_arrival() for engine in engines if engine not in busy]",
             "min([math.inf for engine in engines if engine not in busy]", required=False),
    Mutation("pipeline-waits-for-the-last-stage", BATCHING, "            at = max(at, free[0])",
             "            at = max(at, free[-1])", required=False),
    Mutation("decoder-context-in-tokens", LOAD, "            if speculative:\n",
             "            if False:\n", required=False),
    Mutation("graph-replay-free", EFFICIENCY, 'return int(cost.graph == "replay")', "return 0", required=False),
    Mutation("graphed-rows-launch", EFFICIENCY, "    if cost.graph is not None:\n        return int(",
             "    if False:\n        return int(", required=False),
    Mutation("one-kernel-a-grouped-gemm", EFFICIENCY, "    if not cost.kernel_per_group or cost.graph is not None:",
             "    if True:", required=False),
    Mutation("graphs-ignored", "symbolic_cost/blocks/layer.py",
             "return _graphed(layer, blocks, ffn, run) if run.graphs else layer", "return layer", required=False),
    Mutation("preprocess-captures-no-permute", "symbolic_cost/blocks/moe.py", "        last += 1\n",
             "        last += 0\n", required=False),
    # TP overlap collective by collective (tests/test_overlap_pairs.py, paired by hand)
    Mutation("tensor-overlap-product-hides-nothing", STEP,
             'exposed.append(maximum(0, Add(*pending, *ring) - row_time[f"t_{pass_}"]))',
             "exposed.append(Add(*pending, *ring))", required=False),
    Mutation("tensor-overlap-backward-paired-forward", STEP, "        order.reverse()\n", "        pass\n",
             required=False),
    Mutation("tensor-overlap-hides-an-unpaired-collective", STEP, "    return Add(*exposed, *pending, *whole)",
             "    return Add(*exposed, *whole)", required=False),
    Mutation("ring-sends-hidden-only-under-tensor-overlap", STEP,
             '        if row.engine == "matrix" and (pending or ring):',
             '        if row.engine == "matrix" and (pending or ring) and overlap:', required=False),
    # the MoE all-to-alls' 1F1B overlap, slot by slot (tests/test_overlap_pairs.py, phases named by hand)
    Mutation("expert-overlap-combine-under-its-own-pass", STEP,
             'slot(comm(last, "bwd"), phase(attention, "fwd"))',
             'slot(comm(last, "bwd"), phase(attention, "bwd"))', required=False),
    Mutation("flex-dispatch-holds-no-sms", STEP, "    return Rational(FLEX_DISPATCH_SMS, efficiency.sms)",
             "    return Integer(0)", required=False),
    Mutation("expert-overlap-behind-the-micro-batch", STEP,
             '(expert["bwd"] if t.overlap.expert else alltoall)',
             '(maximum(0, alltoall - compute_all) if t.overlap.expert else alltoall)', required=False),
)


def _copy(tmp: Path) -> Path:
    """The package, the tests and pyproject.toml copied under ``tmp``, with a hypothesis profile
    that reports the first failing example without shrinking it."""
    ignore = shutil.ignore_patterns(".hypothesis")
    for name in ("symbolic_cost", "tests"):
        shutil.copytree(ROOT / name, tmp / name, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp / "pyproject.toml")
    with open(tmp / "tests" / "conftest.py", "a") as conftest:
        conftest.write(NO_SHRINK)
    return tmp


_TEMPLATE: list = []
_TEMPLATE_LOCK = threading.Lock()


def template() -> Path:
    """One ``_copy`` for every run of this process, its bytecode written once: each module of the
    package compiled, and each file of ``TESTS`` as pytest rewrites its asserts (a collection of
    them).  A run links to its files (``_clone``), and the sources' times come along, which the
    bytecode is checked against; compiling and rewriting anew took most of a cheap kill.  It is
    removed when the process ends."""
    with _TEMPLATE_LOCK:
        if not _TEMPLATE:
            folder = tempfile.TemporaryDirectory(prefix="mutation-template-")
            root = _copy(Path(folder.name))
            env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
            env.update(PYTHONPATH=str(root), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
            # only bytecode comes of these two runs: a failure here shows again in the runs themselves
            subprocess.run([sys.executable, "-m", "compileall", "-q", "symbolic_cost"], cwd=root, env=env,
                           capture_output=True)
            subprocess.run([sys.executable, "-m", "pytest", "--collect-only", *pytest_args(TESTS)], cwd=root,
                           env=env, capture_output=True)
            _TEMPLATE.append(folder)
        return Path(_TEMPLATE[0].name)


def _clone(tmp: Path) -> Path:
    """``template()`` under ``tmp``, each file a hard link to the template's (its bytecode, and the
    sources' times it is checked against, with it): a copy of some thousand files cost a cheap kill
    a third of its time.  A run only reads them; ``Mutation.apply`` replaces the file it mutates
    by a new one, and unlinks its bytecode."""
    for name in ("symbolic_cost", "tests", "pyproject.toml"):
        source = template() / name
        if source.is_dir():
            shutil.copytree(source, tmp / name, copy_function=_link)
        else:
            _link(source, tmp / name)
    return tmp


def _link(source, target) -> None:
    """A hard link, or a copy (with its time) where the file system has none."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


KILLERS = ROOT / "tests" / "mutation_killers.json"


def killers() -> dict:
    """``{mutation: test}`` as last recorded (``--record``): ``tests/x.py::test_function``, or a
    file alone in records older than test-level ones; empty when there is none."""
    return json.loads(KILLERS.read_text()) if KILLERS.exists() else {}


def batches(first: str | None, tests=TESTS) -> list[tuple]:
    """The runs of ``tests`` for one mutation: ``first`` (its recorded killer, a test or a file of
    ``tests``) alone, then every file not yet run in full, the killer's file first; without a
    recorded killer, all at once.  The killer runs alone because collecting every file costs more
    than most kills take."""
    file = first.split("::")[0] if first else None
    if file not in tests:
        return [tests]
    rest = tuple(test for test in tests if test != file)
    return [(first,), rest] if first == file else [(first,), (file,) + rest]


HYPOTHESIS_PLUGIN = "_hypothesis_pytestplugin"
"""The one pytest plugin the runs load (hypothesis's own entry point): loading every installed
plugin from its entry point (anyio's, platformdirs') took half of a run of one test."""


def pytest_args(tests) -> list[str]:
    """The arguments of one run of ``tests``: stop at the first failure, hypothesis's plugin alone,
    and none of the suite's ``addopts`` (its ``-n`` needs pytest-xdist's plugin, which these runs do
    not load: one process a run, the runs themselves spread over ``jobs``)."""
    return ["-x", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts=", "-p", HYPOTHESIS_PLUGIN,
            "--hypothesis-profile=mutations", *tests]


RUN_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
"""What every run sets besides the copy on ``sys.path``."""


def run_tests(root: Path, tests=TESTS) -> subprocess.CompletedProcess:
    """``tests`` (in that order) against the package under ``root`` (first on ``sys.path``),
    stopping at the first failure: in a child of this thread's ``Zygote`` where one runs (Linux),
    else in a fresh interpreter."""
    zygote = Zygote.of_this_thread()
    if zygote is not None:
        return zygote.run(root, tests)
    env = {**os.environ, "PYTHONPATH": str(root), **RUN_ENV}
    check = "import symbolic_cost, sys; sys.exit(not symbolic_cost.__file__.startswith(sys.argv[1]))"
    if subprocess.run([sys.executable, "-c", check, str(root)], cwd=root, env=env).returncode:
        raise RuntimeError(f"the copy under {root} is not the package the tests import")
    command = [sys.executable, "-m", "pytest", *pytest_args(tests)]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)


class Zygote:
    """A ``tests/mutation_zygote.py`` process this thread sends its runs to: each run forks from
    an interpreter that has the suite's libraries imported, instead of importing them again
    (about a second a run, some three hundred runs a check).  One a thread, started on first use
    and stopped by ``Zygote.close_all``; none where ``os.fork`` is missing or not Linux, or with
    ``MUTATION_ZYGOTE=0``."""

    _local = threading.local()
    _all: list = []
    _lock = threading.Lock()

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, str(ROOT / "tests" / "mutation_zygote.py")],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)

    @classmethod
    def of_this_thread(cls) -> "Zygote | None":
        if sys.platform != "linux" or not hasattr(os, "fork") or os.environ.get("MUTATION_ZYGOTE") == "0":
            return None
        zygote = getattr(cls._local, "zygote", None)
        if zygote is None or zygote.process.poll() is not None:
            zygote = cls._local.zygote = cls()
            with cls._lock:
                cls._all.append(zygote)
        return zygote

    def run(self, root: Path, tests) -> subprocess.CompletedProcess:
        args = pytest_args(tests)
        with tempfile.TemporaryDirectory(prefix="mutation-run-") as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            request = {"root": str(root), "args": args, "env": RUN_ENV, "stdout": str(out), "stderr": str(err)}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline()
            if not answer:
                raise RuntimeError(f"the mutation zygote stopped (exit status {self.process.poll()})")
            code = json.loads(answer)["returncode"]
            return subprocess.CompletedProcess(["pytest", *args], code, out.read_text(), err.read_text())

    @classmethod
    def close_all(cls) -> None:
        """Stop every zygote (each ends when its standard input closes)."""
        with cls._lock:
            zygotes, cls._all[:] = list(cls._all), []
        for zygote in zygotes:
            zygote.process.stdin.close()
            zygote.process.wait(timeout=60)


def _last_failure(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith(("FAILED", "ERROR"))]
    if lines:
        return lines[0].split(" ", 1)[1]
    printed = output.strip().splitlines()
    return printed[-1] if printed else "(nothing printed)"


CRASHED = (3, 4)
"""pytest's exit statuses for its own internal error and a usage error: the harness failed, not
the mutant's tests (a negative status, a signal, is a crash too)."""


def crashed(result: subprocess.CompletedProcess) -> bool:
    """Whether a test run ended without pytest's verdict: killed by a signal, an internal or a
    usage error, or nothing printed at all."""
    return result.returncode < 0 or result.returncode in CRASHED or not (result.stdout + result.stderr).strip()


def failed_file(failure: str) -> str | None:
    """The test file of ``TESTS`` a failure line names (``tests/x.py::test - ...``); ``None``
    when it names none (the copy did not import, say)."""
    file = failure.split("::")[0].split(" ")[0]
    return file if file in TESTS else None


def failed_test(failure: str) -> str | None:
    """The test function a failure line names, without its parameters (``tests/x.py::test``, or
    ``tests/x.py::Class::test``); the file alone where the line names no test (an error while
    collecting it), ``None`` where it names no file of ``TESTS``."""
    if failed_file(failure) is None:
        return None
    return failure.split(" ")[0].split("[")[0]


STALE = "not found"
"""What pytest prints (exit status 4) for a test that is no longer there: a recorded killer that
was renamed or removed, which only costs the run of every file."""


def _stale(result: subprocess.CompletedProcess) -> bool:
    """Whether a run of one recorded test found no such test (``STALE``)."""
    return result.returncode == 4 and STALE in result.stdout + result.stderr


def check(mutation: Mutation | None, first: str | None = None, tests=TESTS) -> tuple[bool, str]:
    """(killed, what failed) for one mutation, running ``first`` (a recorded test or test file)
    before the files of ``tests`` (``batches``); for ``None`` (the unmutated copy): (failed, what
    failed)."""
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        root = _clone(Path(tmp))
        if mutation is not None:
            mutation.apply(root)
        for files in filter(None, batches(first, tests)):
            result = run_tests(root, files)
            if files == (first,) and _stale(result):
                continue
            if crashed(result):
                raise RuntimeError(f"the test run of mutation {mutation.name if mutation else '(none)'} crashed "
                                   f"(exit status {result.returncode}): {_last_failure(result.stdout + result.stderr)}")
            if result.returncode:
                break
    return result.returncode != 0, _last_failure(result.stdout + result.stderr)


def run(mutations=MUTATIONS, jobs=2) -> dict:
    """Every mutation, then the unmutated copy: ``{name: (killed, what failed)}``.

    Every anchor is checked against the working tree first, so a missing one fails at once.  A
    run stops at its first failure (``-x``), in files that passed before it, so a verdict rests on
    one file: the unmutated copy must pass each file that failed (all of ``TESTS`` when a failure
    names none), else no verdict stands and ``RuntimeError`` says why."""
    results = judge(mutations, jobs)
    check_baseline(results)
    return results


def judge(mutations=MUTATIONS, jobs=2) -> dict:
    """Every mutation, without the unmutated copy's run (``check_baseline``), which the verdicts
    need before they stand: ``{name: (killed, what failed)}``."""
    for mutation in mutations:
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / mutation.path
            target.parent.mkdir(parents=True)
            shutil.copy(ROOT / mutation.path, target)
            mutation.apply(Path(tmp))
    known = killers()
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return dict(zip((m.name for m in mutations), pool.map(lambda m: check(m, known.get(m.name)), mutations)))
    finally:
        Zygote.close_all()


def check_baseline(results: dict) -> None:
    """The unmutated copy on the tests whose failures killed a mutation of ``results`` (every file
    of ``TESTS`` when a failure names none); ``RuntimeError`` where it fails them too."""
    deciding = {failed_test(failure) for killed, failure in results.values() if killed}
    baseline = TESTS if None in deciding else tuple(sorted(deciding))
    try:
        failed, output = check(None, tests=baseline) if baseline else (False, "")
    finally:
        Zygote.close_all()
    if failed:
        raise RuntimeError(f"the tests fail without any mutation, so no mutation can be judged: {output}")


def record(results: dict) -> None:
    """Write each killed mutation's failing test to ``KILLERS`` (kept for the others)."""
    found = {name: failed_test(failure) for name, (killed, failure) in results.items()
             if killed and failed_test(failure)}
    KILLERS.write_text(json.dumps({**killers(), **found}, indent=1, sort_keys=True) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutations to run (default: all): "
                        + ", ".join(m.name for m in MUTATIONS))
    parser.add_argument("-j", "--jobs", type=int, default=2, help="mutations run at once (default 2)")
    parser.add_argument("--record", action="store_true", help=f"write each killer to {KILLERS.name}")
    args = parser.parse_args(argv)
    unknown = set(args.names) - {m.name for m in MUTATIONS}
    if unknown:
        parser.error(f"unknown mutation(s): {', '.join(sorted(unknown))}")
    chosen = [m for m in MUTATIONS if not args.names or m.name in args.names]
    with tempfile.TemporaryDirectory(prefix="symbolic_cost_kernels_") as cache:
        # one kernel cache for every run, removed at the end: a run leaves by os._exit, skipping the
        # clean-up tests/conftest.py registers for a cache of its own
        os.environ.setdefault("SYMBOLIC_COST_CACHE", cache)
        try:
            results = run(chosen, args.jobs)
        except (ValueError, RuntimeError) as error:
            print(error, file=sys.stderr)
            return 1
    for name, (killed, failure) in results.items():
        print(f"{'killed  ' if killed else 'SURVIVED'} {name:28} {failure if killed else ''}")
    if args.record:
        record(results)
    survivors = [name for name, (killed, _) in results.items() if not killed]
    print(f"{len(results) - len(survivors)} of {len(results)} mutations killed"
          + (f"; survived: {', '.join(survivors)}" if survivors else ""))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
