"""Published measured training runs, as cases the time model can be checked against.

``measured/calibration-training.json`` holds the calibration rows of the project's measured set
(Narayanan et al. 2021 Table 1, Korthikanti et al. 2022 Tables 4 and 5, the Megatron-LM README's
A100 and H100 tables, Llama 3's Table 4), copied unchanged, with their provenance; its README says
what each field means.  ``cases()`` turns each row into an ``Architecture``, a ``Training``, a
system and one measured time in seconds; ``excluded()`` names the rows that cannot be expressed
and why.  What a source leaves unstated is filled with a named assumption, printed in the report.
``serving_cases()`` does the same for the serving rows (``measured/calibration-inference.json``:
TensorRT-LLM's online load tests), as ``ServingCase``.

How a measured time is read from a row:

* ``step_time`` (seconds per iteration) and Table 4's per-layer forward + backward time: as printed;
* ``tflops_per_gpu``, a throughput under the source's own FLOP count: back to seconds with that
  count, ``F / (X x GPUs)`` (Narayanan Eq. 3, which counts the recomputed forward,
  ``96 B s l h^2 (1 + s/6h + V/16lh)``; Megatron-LM's model count for its README's H100 table,
  ``12 B s L h^2 [(1 + g/a + s/h) + f/h + V/(2Lh)]`` for an ungated GPT).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from importlib import resources

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError
from symbolic_cost.inference.serving import Serving
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.totals import model_cost
from symbolic_cost.models.training import MEGATRON_OVERLAP, Overlap, Training
from symbolic_cost.models.utilisation import model_flops


@dataclass(frozen=True)
class Case:
    """One measured run: what ran (``architecture``, ``training`` on ``system``), what was
    measured (``quantity``: ``step`` seconds per iteration or ``layer`` seconds of one layer's
    forward and backward) and the ``assumptions`` that fill what the source leaves unstated."""

    id: str
    group: str
    system: str
    architecture: Architecture
    training: Training
    quantity: str
    seconds: Fraction
    conventions: conv.Conventions
    how: str
    assumptions: tuple[str, ...]


def rows(name: str = "calibration-training.json") -> list[dict]:
    """The calibration rows of ``measured/<name>`` as published."""
    return json.loads(resources.files("symbolic_cost.reproduce").joinpath("measured", name).read_text())["rows"]


def _reason(row) -> str | None:
    """Why a row cannot be expressed, or None."""
    layout, arch = row["layout"], row["model"]["arch"]
    if layout.get("tp") is None or layout.get("dp") is None:
        return "layout not printed (only the GPU count)"
    if "microbatch-level" in str(layout.get("recompute")):
        return "recomputation skipped per micro-batch where memory allows: not expressible"
    slots = arch["layers"] + 2 * _ends_take_slots(layout)
    if slots % layout["pp"]:
        return f"{arch['layers']} layers over {layout['pp']} pipeline stages: uneven stages with interleaving (issue 28)"
    return None


def _ends_take_slots(layout) -> bool:
    """Whether the first and the last stage each hold one transformer layer fewer (Llama 3, Section
    3.3.2): the embedding and the loss each take a layer's slot (Megatron-LM's
    ``--account-for-embedding/loss-in-pipeline-split``, ``Training.embedding_in_split``/``loss_in_split``)."""
    return "one fewer transformer layer" in str(layout.get("pipeline_notes"))


NOT_FITTED = ("llama3_table4",)
"""Groups whose rows became expressible after the committed fit (issue 28's pipeline splits): timed
and reported, but left out of ``fit_cases`` so the fitted factors stay those of ``calibration.json``."""


def excluded() -> list[tuple[str, str]]:
    """``(id, reason)`` of every row ``cases`` leaves out."""
    return [(r["id"], _reason(r)) for r in rows() if _reason(r) is not None]


def cases() -> list[Case]:
    """Every row that can be expressed, as a ``Case``."""
    return [_case(r) for r in rows() if _reason(r) is None]


def fit_cases() -> list[Case]:
    """The cases ``timing.calibrate`` fits on: ``cases`` but the groups of ``NOT_FITTED``."""
    return [c for c in cases() if c.group not in NOT_FITTED]


def _architecture(row) -> Architecture:
    """A GPT (learned positions, LayerNorm, GELU, biases, dropout, tied) or, for a SwiGLU model, a
    Llama (rotary, RMSNorm, no biases or dropout); Megatron pads the vocabulary to 128 x TP."""
    a, seq = row["model"]["arch"], row["layout"].get("seq_len")
    llama = a["ffn_type"] == "swiglu"
    return Architecture(row["id"], a["layers"], a["hidden"], a["heads"], a["ffn"], a["vocab"],
                        kv_heads=a["kv_heads"], positions=0 if llama else seq, mlp="swiglu" if llama else "gelu",
                        norm="rms" if llama else "layer", rotary=llama, tied=a["tied_embeddings"],
                        qkv_bias=not llama, bias=not llama, dropouts=not llama, vocab_multiple=128)


_RECOMPUTE = (("full", "full"), ("selective", "selective"), ("none", "none"))


def _training(row, assume: list) -> Training:
    layout, group = row["layout"], row["group"]
    h100_readme = group == "megatron_lm_readme_h100"
    micro = layout.get("micro_batch")
    if micro is None:
        micro = 1
        assume.append("micro-batch 1 (not printed)")
    text = str(layout.get("recompute") or "")
    recompute = next((ours for word, ours in _RECOMPUTE if text.startswith(word)), None)
    if recompute is None:     # not printed: the Megatron-LM A100 example runs full recomputation
        recompute = "full" if group == "megatron_lm_readme_a100" else "none"
        assume.append(f"recompute {recompute} (not printed)")
    sequence_parallel = layout.get("sequence_parallel")
    if sequence_parallel is None:
        sequence_parallel = h100_readme and layout["tp"] > 1
        if h100_readme:
            assume.append("sequence parallelism with TP (Megatron-Core's recipes; not printed)")
    precision = "fp16" if "fp16" in str(layout.get("precision")) or group.startswith(("narayanan", "korthikanti")) \
        or group == "megatron_lm_readme_a100" else "bf16"
    vp = layout.get("vp") if isinstance(layout.get("vp"), int) else 1
    dp, extra = layout["dp"], {}
    if h100_readme:
        extra = dict(distributed_optimizer=True, flash=True, overlap=MEGATRON_OVERLAP)
        assume.append("distributed optimizer and flash attention (Megatron-Core r0.8 defaults of its recipes)")
    if group == "llama3_table4":
        dp, vp, extra = _llama3(row, assume)
        sequence_parallel = True
    global_batch = layout.get("global_batch") or micro * dp * layout.get("batch_per_dp", 1)
    return Training(b=micro, l=layout["seq_len"], m1=layout["tp"], s1=layout["tp"] if sequence_parallel else 1,
                    d=dp, p=layout["pp"], micro_batches=global_batch // (micro * dp),
                    recompute=recompute, schedule="interleaved" if vp > 1 else "1f1b", virtual_stages=vp,
                    precision=precision, **extra)


def _llama3(row, assume: list) -> tuple[int, int, dict]:
    """Llama 3's Table 4 layout (Section 3.3.2): the embedding and the loss each take a layer's slot
    of the first and the last stage (126 + 2 = 128 slots, 8 a rank), FSDP sharding optimizer states
    and gradients but not the parameters after forward (ZeRO-2 over the data-parallel ranks),
    all-gather context parallelism; ``(dp, v, fields)``."""
    layout = row["layout"]
    tp, pp, cp, dp = layout["tp"], layout["pp"], layout.get("cp", 1), layout["dp"]
    if tp * pp * cp * dp != row["hardware"]["count"]:      # the 128K row prints DP=4: 8 x 16 x 16 x 4 = 8,192
        dp = row["hardware"]["count"] // (tp * pp * cp)
        assume.append(f"DP={dp} (printed {layout['dp']}: {tp}x{pp}x{cp}x{layout['dp']} GPUs is not "
                      f"{row['hardware']['count']}; DP={dp} gives both the GPUs and the 16M tokens)")
    assume += ["interleaved with v=4 (not printed; Megatron accepts 2, 4 or 8 for 8 slots a rank)",
               "sequence parallelism with TP, flash attention (not printed)",
               "FSDP's gradient reduce-scatter and parameter all-gather overlapped with compute (not printed)"]
    fields = dict(zero=2, flash=True, embedding_in_split=_ends_take_slots(layout),
                  loss_in_split=_ends_take_slots(layout), overlap=Overlap(grad_reduce=True, param_gather=True))
    if cp > 1:
        fields.update(cp=cp, cp_variant="all-gather")
    return dp, 4, fields


def source_flops(row) -> Fraction:
    """FLOPs of one iteration under the source's own count (see the module docstring)."""
    a, layout = row["model"]["arch"], row["layout"]
    B, s, L, h, V = layout["global_batch"], layout["seq_len"], a["layers"], a["hidden"], a["vocab"]
    if row["group"] == "narayanan2021_table1":
        return 96 * B * s * L * h * h * (1 + Fraction(s, 6 * h) + Fraction(V, 16 * L * h))
    if row["group"] == "megatron_lm_readme_h100":
        attention = 1 + Fraction(a["kv_heads"], a["heads"]) + Fraction(s, h)
        return 12 * B * s * L * h * h * (attention + Fraction(a["ffn"], h) + Fraction(V, 2 * L * h))
    raise InputError(f"no FLOP count for group {row['group']}", "group")


def _measured(row, architecture=None, training=None) -> tuple[str, Fraction, str]:
    """(quantity, seconds, how) of a row; Llama 3's TFLOP/s under the library's model FLOPs of
    ``architecture`` and ``training`` (the paper does not print its count)."""
    by = {m["quantity"]: m for m in row["measured"]}
    if row["group"] == "llama3_table4":
        flops = model_flops(model_cost(architecture, training))
        rate = Fraction(str(by["tflops_per_gpu"]["value"])) * 10**12
        return "step", Fraction(int(flops)) / (rate * row["hardware"]["count"]), \
            "TFLOP/s per GPU under the library's model FLOPs (the paper's count not printed)"
    if "step_time" in by:
        return "step", Fraction(str(by["step_time"]["value"])), "step time as printed"
    if "layer_fwd_bwd_time" in by:
        return "layer", Fraction(str(by["layer_fwd_bwd_time"]["value"])) / 1000, "one layer's forward + backward, as printed"
    rate = Fraction(str(by["tflops_per_gpu"]["value"])) * 10**12
    return "step", source_flops(row) / (rate * row["hardware"]["count"]), "TFLOP/s per GPU under the source's count"


def _case(row) -> Case:
    assume: list[str] = []
    training, architecture = _training(row, assume), _architecture(row)
    quantity, seconds, how = _measured(row, architecture, training)
    system = "a100" if "A100" in row["hardware"]["gpu"] else "h100"
    return Case(row["id"], row["group"], system, architecture, training, quantity, seconds,
                _conventions(row), how, tuple(assume))


def _conventions(row) -> conv.Conventions:
    """Megatron-LM of 2021-2022 (Narayanan, Korthikanti, the A100 example) scatters the pipeline's
    sends over the tensor group and gathers them on arrival; Megatron-Core sends what it holds."""
    legacy = row["group"].startswith(("narayanan", "korthikanti")) or row["group"] == "megatron_lm_readme_a100"
    return conv.DEFAULT.but(pipeline_sends="scatter-gather") if legacy else conv.DEFAULT


@dataclass(frozen=True)
class ServingCase:
    """One measured load test: ``requests`` requests of ``serving.l_in`` prompt and
    ``output_tokens`` output tokens arriving at ``rate`` per second (``None``: all at once) on
    ``system``, and what was measured (``measured``: mean TTFT and ITL in seconds, request/s,
    total and output tokens/s)."""

    id: str
    system: str
    architecture: Architecture
    serving: Serving
    output_tokens: int
    rate: Fraction | None
    requests: int
    measured: dict
    assumptions: tuple[str, ...]


_SECONDS = {"mean_ttft", "mean_itl"}


def serving_cases() -> list[ServingCase]:
    """The serving rows (``measured/calibration-inference.json``: TensorRT-LLM 0.14 online
    serving on H100, BF16, in-flight batching) as ``ServingCase``: Poisson arrivals (the source
    does not state its arrival process) and flash (fused) attention, as TensorRT-LLM runs it."""
    out = []
    for row in rows("calibration-inference.json"):
        layout = row["layout"]
        rate = layout["request_rate_qps"]
        measured = {m["quantity"]: Fraction(str(m["value"])) / (1000 if m["quantity"] in _SECONDS else 1)
                    for m in row["measured"]}
        out.append(ServingCase(row["id"], "h100", _architecture(row),
                               Serving(m1=layout["tp"], p=layout["pp"], l_in=layout["isl"], flash=True),
                               layout["osl"], None if rate == "INF" else Fraction(rate), layout["num_requests"],
                               measured, ("Poisson arrivals (not stated)",)))
    return out
