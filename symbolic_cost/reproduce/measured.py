"""Published measured training runs, as cases the time model can be checked against.

``measured/calibration-training.json`` holds the calibration rows of the project's measured set
(Narayanan et al. 2021 Table 1, Korthikanti et al. 2022 Tables 4 and 5, the Megatron-LM README's
A100 and H100 tables, Llama 3's Table 4, Megatron-Bridge's performance summary of its 26.04.01
container), copied unchanged, with their provenance; its README says
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
  ``12 B s L h^2 [(1 + g/a + s/h) + f/h + V/(2Lh)]`` for an ungated GPT);
* Llama 3's Table 4 ``TFLOPs/GPU``: back to seconds with the model FLOPs of the MFU it cites,
  PaLM's ``6N + 12 L H Q T`` a token (``llama3_flops``);
* ``tokens_per_sec_per_gpu`` (Megatron-Bridge): the tokens of a step over the job's rate,
  ``global batch x sequence / (tokens/s/GPU x GPUs)``.

Megatron-Bridge's rows (``BRIDGE``) hold dense Llamas and mixtures of experts: the architecture is
the row's numbers written as a Hugging Face ``config.json`` of the model's family and read by
``models.config.from_config`` (``BRIDGE_MODELS``), the training the row's layout under the
settings of Megatron-Bridge's performance recipes (``_bridge_training``).  A row the library
refuses is excluded with the refusal's text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from importlib import resources

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.graphs import graph_scopes
from symbolic_cost.checks import InputError
from symbolic_cost.inference.lengths import FIXED, Lengths
from symbolic_cost.inference.serving import Serving
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.bridge_recipes import DEEPSEEK_V3_LAYOUTS
from symbolic_cost.models.closed_forms import palm_flops
from symbolic_cost.models.config import from_config
from symbolic_cost.models.totals import model_cost
from symbolic_cost.models.megatron_precision import PARAM_RECIPES, precision_aware_adam
from symbolic_cost.models.training import MEGATRON_OVERLAP, Overlap, Training
from symbolic_cost.timing.systems import check_block_scaling, get_system


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
    if row["group"] == BRIDGE:
        built = _bridge_built(row["id"])
        return built if isinstance(built, str) else None
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


BRIDGE = "megatron_bridge_perf_summary"
"""The group of Megatron-Bridge's performance summary (26.04.01 container: tokens/s per GPU)."""

NOT_FITTED = ("llama3_table4", BRIDGE)
"""Groups whose rows became expressible after the fit of A100's and H100's factors (issue 28's
pipeline splits; Megatron-Bridge's rows, added with the B300/GB300 systems): timed and reported, but
left out of their fit, so that those factors stay fitted on Megatron-LM's runs.  Megatron-Bridge's
dense rows on Blackwell are the only dense runs on those chips: they fit Blackwell's matrix fractions
(``timing.calibrate.MATRIX_ONLY``), and nothing else."""


def excluded() -> list[tuple[str, str]]:
    """``(id, reason)`` of every row ``cases`` leaves out."""
    return [(r["id"], _reason(r)) for r in rows() if _reason(r) is not None]


def cases() -> list[Case]:
    """Every row that can be expressed, as a ``Case``."""
    return [_case(r) for r in rows() if _reason(r) is None]


def fit_cases() -> list[Case]:
    """The cases ``timing.calibrate`` fits on: ``cases`` but the groups of ``NOT_FITTED``, and
    Megatron-Bridge's dense rows on the systems of ``timing.calibrate.MATRIX_ONLY``'s families (a chip's
    rate is measured where the model holds every cost of the run; its mixtures of experts miss costs
    of their own, which a chip's factor would absorb)."""
    from symbolic_cost.timing.calibrate import MATRIX_ONLY
    from symbolic_cost.timing.efficiency import family
    return [c for c in cases() if c.group not in NOT_FITTED
            or c.group == BRIDGE and family(c.system) in MATRIX_ONLY and c.architecture.moe is None]


def grouped_cases() -> list[Case]:
    """The cases whose layers run grouped GEMMs (the mixtures of experts, every one of them
    Megatron-Bridge's): ``timing.calibrate.fit_group_kernel`` fits on them the cost of a grouped
    product's further launches, and nothing else."""
    return [c for c in cases() if c.architecture.moe is not None]


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
    if _legacy(row) and vp > 1:
        extra["overlap"] = Overlap(pipeline=False)
        assume.append("the interleaved schedule's stage sends exposed (Megatron-LM of 2021-22; overlap_p2p_comm "
                      "came in 2023-05, f9283c5a8a, and was made the default in 2023-10, 4eeff55d1f)")
    global_batch = layout.get("global_batch") or micro * dp * layout.get("batch_per_dp", 1)
    return Training(b=micro, l=layout["seq_len"], m1=layout["tp"], s1=layout["tp"] if sequence_parallel else 1,
                    d=dp, p=layout["pp"], micro_batches=global_batch // (micro * dp),
                    recompute=recompute, schedule="interleaved" if vp > 1 else "1f1b", virtual_stages=vp,
                    precision=precision, **extra)


LLAMA3_KERNEL = "flash-attention-2"
LLAMA3_KERNEL_WHY = ("Meta's PyTorch stack, whose scaled_dot_product_attention runs FlashAttention-2 as its "
                     "flash backend from PyTorch 2.2 (January 2024); FlashAttention-3 was published in "
                     "July 2024, with the paper")
"""The fused attention Llama 3's Table 4 runs are timed with (``Training.attention_kernel``; the
paper names no kernel)."""


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
               f"attention by {LLAMA3_KERNEL} (not printed): {LLAMA3_KERNEL_WHY}",
               "FSDP's gradient reduce-scatter and parameter all-gather overlapped with compute (not printed)"]
    fields = dict(zero=2, flash=True, attention_kernel=LLAMA3_KERNEL, embedding_in_split=_ends_take_slots(layout),
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


def llama3_flops(architecture, training) -> Fraction:
    """FLOPs of one iteration as Llama 3's Table 4 counts them: its TFLOPs/GPU and MFU are "BF16
    Model FLOPs Utilization (MFU; Chowdhery et al. (2023))" (Dubey et al. 2024, Section 3.3.2), the
    model FLOPs PaLM defines (App. B): ``6N + 12 L H Q T`` a token, ``N`` every parameter, the
    attention products forward and backward over the whole ``T x T`` square (no causal halving,
    no recomputation), times the tokens of an iteration."""
    parameters = model_cost(architecture, training).parameters
    tokens = training.b * training.l * training.micro_batches * training.d
    return Fraction(int(tokens * palm_flops(architecture, training.l, parameters)))


def _measured(row, architecture=None, training=None) -> tuple[str, Fraction, str]:
    """(quantity, seconds, how) of a row; Llama 3's TFLOP/s under the count its paper cites
    (``llama3_flops``)."""
    by = {m["quantity"]: m for m in row["measured"]}
    if row["group"] == BRIDGE:
        return "step", _bridge_seconds(row), \
            "tokens/s per GPU as printed: global batch x sequence / (tokens/s/GPU x GPUs)"
    if row["group"] == "llama3_table4":
        rate = Fraction(str(by["tflops_per_gpu"]["value"])) * 10**12
        return "step", llama3_flops(architecture, training) / (rate * row["hardware"]["count"]), \
            "TFLOP/s per GPU under PaLM's model FLOPs, the MFU Llama 3 cites (6N + 12 L H Q T a token)"
    if "step_time" in by:
        return "step", Fraction(str(by["step_time"]["value"])), "step time as printed"
    if "layer_fwd_bwd_time" in by:
        return "layer", Fraction(str(by["layer_fwd_bwd_time"]["value"])) / 1000, "one layer's forward + backward, as printed"
    rate = Fraction(str(by["tflops_per_gpu"]["value"])) * 10**12
    return "step", source_flops(row) / (rate * row["hardware"]["count"]), "TFLOP/s per GPU under the source's count"


def _case(row) -> Case:
    if row["group"] == BRIDGE:
        return _bridge_built(row["id"])
    assume: list[str] = []
    training, architecture = _training(row, assume), _architecture(row)
    if row["group"] == "llama3_table4":     # Meta's stack, not Megatron's: 128,256 rows split 8 ways whole
        architecture = replace(architecture, vocab_multiple=1)
        assume.append("vocabulary unpadded (Meta's stack; 128,256 rows divide by TP 8)")
    quantity, seconds, how = _measured(row, architecture, training)
    system = "a100" if "A100" in row["hardware"]["gpu"] else "h100"
    return Case(row["id"], row["group"], system, architecture, training, quantity, seconds,
                _conventions(row), how, tuple(assume))


def _conventions(row) -> conv.Conventions:
    """Megatron-LM of 2021-2022 (Narayanan, Korthikanti, the A100 example) scatters the pipeline's
    sends over the tensor group and gathers them on arrival; Megatron-Core sends what it holds."""
    return conv.DEFAULT.but(pipeline_sends="scatter-gather") if _legacy(row) else conv.DEFAULT


def _legacy(row) -> bool:
    """Whether the row ran Megatron-LM of 2021-2022 (Narayanan, Korthikanti, the A100 example)."""
    return row["group"].startswith(("narayanan", "korthikanti")) or row["group"] == "megatron_lm_readme_a100"


# Megatron-Bridge's performance summary (``BRIDGE``) ---------------------------------------------

BRIDGE_SYSTEMS = {"B200": "b200", "B300": "b300", "GB200": "gb200", "GB300": "gb300", "H100-SXM-80GB": "h100"}
"""The system preset of a row's ``hardware.gpu``: DGX B200, B300 and H100 (8 GPUs a host), one GPU
of a GB200 or GB300 NVL72 rack."""

BRIDGE_PRECISIONS = {"BF16": None, "FP8": "tensorwise", "MXFP8": "mxfp8", "NVFP4": "nvfp4"}
"""``layout.precision`` as ``Training.fp8`` over bf16.  "FP8" is current (per-tensor) scaling,
``tensorwise``: the default ``fp8_recipe`` of Megatron-Bridge's ``MixedPrecisionConfig``
(``models.megatron_bridge``; its recipes write ``fp8_recipe = "tensorwise"  # default``), and the
summary of the 25.11 container prints the same runs (Llama 3 70B on 64 GB300 with FSDP, 405B on
GB200 at TP 4 PP 16, the H100 runs) as "FP8-CS"."""

SLOT_SPLITS = ("llama3.1-405b", "qwen3-235b-a22b")
"""Models whose Megatron-Bridge recipes count the embedding and the loss as a layer's slot of the
first and the last stage (``account_for_embedding_in_pipeline_split``,
``account_for_loss_in_pipeline_split``: ``llama31_405b_pretrain_config`` in
``src/megatron/bridge/recipes/llama/llama3.py``, ``qwen3_235b_a22b_pretrain_256gpu_h100_bf16_config``
in ``src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py``): 126 + 2 and 94 + 2 slots."""



def _deepseek_v3(a: dict) -> dict:
    """DeepSeek-V3's ``config.json`` from the row: latent attention (NeMo's ``qk_head_dim`` is the
    part of a query/key head without rotary positions, ``qk_nope_head_dim``), ``dense_layers_first``
    dense layers of ``ffn_dense`` then ``moe_layers`` layers of ``experts`` routed experts
    (``top_k`` a token) and ``shared_experts`` shared ones of ``moe_ffn``, ``mtp_layers``
    multi-token-prediction modules.  Not in the row, as the model's published ``config.json``
    (deepseek-ai/DeepSeek-V3) and the reader's defaults give them: SiLU gates, a sigmoid router
    renormalised over the chosen experts and scaled (2.5), no attention biases, an untied head."""
    if a["dense_layers_first"] + a["moe_layers"] != a["layers"]:
        raise InputError(f"deepseek-v3: {a['dense_layers_first']} dense and {a['moe_layers']} MoE layers are not "
                         f"its {a['layers']} layers", "arch")
    return dict(model_type="deepseek_v3", num_hidden_layers=a["layers"], hidden_size=a["hidden"],
                num_attention_heads=a["heads"], num_key_value_heads=a["heads"], q_lora_rank=a["q_lora_rank"],
                kv_lora_rank=a["kv_lora_rank"], qk_nope_head_dim=a["qk_head_dim"],
                qk_rope_head_dim=a["qk_rope_head_dim"], v_head_dim=a["v_head_dim"], intermediate_size=a["ffn_dense"],
                first_k_dense_replace=a["dense_layers_first"], n_routed_experts=a["experts"],
                num_experts_per_tok=a["top_k"], n_shared_experts=a["shared_experts"],
                moe_intermediate_size=a["moe_ffn"], vocab_size=a["vocab"], num_nextn_predict_layers=a["mtp_layers"],
                hidden_act="silu", scoring_func="sigmoid", norm_topk_prob=True, moe_layer_freq=1,
                attention_bias=False, tie_word_embeddings=False, max_position_embeddings=163840)


def _qwen3_moe(a: dict) -> dict:
    """A Qwen3-MoE ``config.json`` from the row: grouped-query attention with per-head q/k RMS norms
    (the row's ``qk_norm``), ``experts`` experts of ``moe_ffn`` (``top_k`` a token) on every layer.
    Not in the row, as the published ``config.json`` of Qwen/Qwen3-30B-A3B and Qwen3-235B-A22B give
    them: ``decoder_sparse_step`` 1 and no ``mlp_only_layers`` (every layer MoE), the chosen
    experts' weights renormalised, no attention biases, an untied head, 40,960 positions."""
    if a.get("qk_norm") is not True or a.get("norm") != "rmsnorm":
        raise InputError("qwen3-moe: the family has RMS norms and per-head q/k norms; the row says "
                         f"norm={a.get('norm')!r}, qk_norm={a.get('qk_norm')!r}", "arch")
    return dict(model_type="qwen3_moe", num_hidden_layers=a["layers"], hidden_size=a["hidden"],
                num_attention_heads=a["heads"], num_key_value_heads=a["kv_heads"], head_dim=a["head_dim"],
                intermediate_size=a["ffn_dense"], num_experts=a["experts"], num_experts_per_tok=a["top_k"],
                moe_intermediate_size=a["moe_ffn"], vocab_size=a["vocab"], decoder_sparse_step=1, mlp_only_layers=[],
                norm_topk_prob=True, attention_bias=False, tie_word_embeddings=False, max_position_embeddings=40960,
                use_sliding_window=False)


_WINDOW = re.compile(r"sliding (\d+) on alternate layers")


def _gpt_oss(a: dict) -> dict:
    """GPT-OSS's ``config.json`` from the row: grouped-query attention of ``head_dim``, a window of
    the row's size on every other layer from the first (the reader's default pattern, as the
    published ``layer_types``), ``experts`` experts of ``moe_ffn`` (``top_k`` a token) on every
    layer.  Not in the row, as openai/gpt-oss-120b's published ``config.json`` gives them:
    biases on q, k, v, o, an untied head, 131,072 positions (the family's sinks and expert biases
    are the reader's)."""
    window = _WINDOW.fullmatch(str(a.get("window")))
    if window is None:
        raise InputError(f"gpt-oss: window {a.get('window')!r} is not 'sliding N on alternate layers'", "arch")
    return dict(model_type="gpt_oss", num_hidden_layers=a["layers"], hidden_size=a["hidden"],
                num_attention_heads=a["heads"], num_key_value_heads=a["kv_heads"], head_dim=a["head_dim"],
                num_local_experts=a["experts"], num_experts_per_tok=a["top_k"], intermediate_size=a["moe_ffn"],
                vocab_size=a["vocab"], sliding_window=int(window.group(1)), attention_bias=True,
                tie_word_embeddings=False, max_position_embeddings=131072)


BRIDGE_MODELS = {"deepseek-v3": (_deepseek_v3, "deepseek-ai/DeepSeek-V3's config.json"),
                 "qwen3-30b-a3b": (_qwen3_moe, "Qwen/Qwen3-30B-A3B's config.json"),
                 "qwen3-235b-a22b": (_qwen3_moe, "Qwen/Qwen3-235B-A22B's config.json"),
                 "gpt-oss-120b": (_gpt_oss, "openai/gpt-oss-120b's config.json")}
"""The mixtures of experts of the summary: the ``config.json`` each row's numbers are written into,
and where what the row leaves out comes from."""


def _bridge_architecture(row, assume: list) -> Architecture:
    """A mixture of experts from ``BRIDGE_MODELS``, or a dense Llama (``_architecture``) with its
    vocabulary unpadded: Megatron-Bridge pads it only with ``should_pad_vocab``, off by default
    (``models.megatron_bridge``)."""
    name, arch = row["model"]["name"], row["model"]["arch"]
    if arch is None:
        raise InputError(f"{name}: the row holds no architecture", "arch")
    if name in BRIDGE_MODELS:
        config, published = BRIDGE_MODELS[name]
        assume.append(f"{name}: the row's sizes; activations, router, biases, untied head from {published}")
        if arch.get("mtp_layers"):
            assume.append("MTP module trained (Megatron-Bridge's DeepSeek-V3 recipe: mtp_num_layers 1; not printed)")
        return from_config(config(arch), name)
    if arch.get("ffn_type") != "swiglu" or "experts" in arch:
        raise InputError(f"{name}: neither a dense Llama nor one of the mixtures of experts read "
                         f"({', '.join(BRIDGE_MODELS)})", "arch")
    assume.append("vocabulary unpadded (Megatron-Bridge's should_pad_vocab, off by default)")
    return replace(_architecture(row), vocab_multiple=1)


def _bridge_split(row, assume: list) -> dict:
    """How the layers sit on the pipeline stages: ``SLOT_SPLITS``, ``DEEPSEEK_V3_LAYOUTS``, else
    evenly (Megatron-Core's default)."""
    name, layout = row["model"]["name"], row["layout"]
    pp, vp = layout["pp"], layout["vp"] or 1
    if pp == 1:
        return {}
    if name in SLOT_SPLITS:
        assume.append("embedding and loss each a layer's slot of the end stages (Megatron-Bridge's recipe)")
        return dict(embedding_in_split=True, loss_in_split=True)
    if name == "deepseek-v3":
        if (pp, vp) not in DEEPSEEK_V3_LAYOUTS:
            raise InputError(f"deepseek-v3: no pipeline layout of Megatron-Bridge's for PP {pp} x VP {vp} read "
                             f"(known: {', '.join(f'{p} x {v}' for p, v in DEEPSEEK_V3_LAYOUTS)})", "pipeline_layout")
        assume.append(f"pipeline layout {DEEPSEEK_V3_LAYOUTS[pp, vp]} (Megatron-Bridge's for PP {pp} x VP {vp}; "
                      "not printed)")
        return dict(pipeline_layout=DEEPSEEK_V3_LAYOUTS[pp, vp])
    return {}


def _bridge_degrees(row) -> dict:
    """The row's degrees and batch as ``Training`` fields, refused where they do not add up:
    TP x PP x CP x DP must be the GPUs, the global batch whole micro-batches of every
    data-parallel rank (``micro_batches = global / (micro x DP)``), VP > 1 interleaved."""
    layout, count = row["layout"], row["hardware"]["count"]
    tp, pp, cp, dp = layout["tp"], layout["pp"], layout["cp"], layout["dp"]
    micro, batch, vp = layout["micro_batch"], layout["global_batch"], layout["vp"] or 1
    if tp * pp * cp * dp != count:
        raise InputError(f"TP {tp} x PP {pp} x CP {cp} x DP {dp} is not the row's {count} GPUs", "layout")
    if batch % (micro * dp):
        raise InputError(f"global batch {batch} is not whole micro-batches of {micro} on {dp} data-parallel ranks",
                         "layout")
    return dict(b=micro, l=layout["seq_len"], m1=tp, s1=tp, d=dp, p=pp, micro_batches=batch // (micro * dp),
                schedule="interleaved" if vp > 1 else "1f1b", virtual_stages=vp)


def _bridge_precision(row, assume: list) -> dict:
    """``precision`` bf16 and the recipe of ``BRIDGE_PRECISIONS``, every layer in it."""
    printed = row["layout"]["precision"]
    if printed not in BRIDGE_PRECISIONS:
        raise InputError(f"precision {printed!r} is not one of {', '.join(BRIDGE_PRECISIONS)}", "precision")
    if printed == "FP8":
        assume.append("FP8 as current scaling, tensorwise (Megatron-Bridge's default fp8_recipe; 25.11 prints FP8-CS)")
    if printed != "BF16":
        assume.append(f"{printed} on every layer, none kept in bf16 (not printed)")
    return dict(precision="bf16", fp8=BRIDGE_PRECISIONS[printed])


def _bridge_training(row, moe: bool, assume: list) -> Training:
    """The row's layout under the settings of Megatron-Bridge's performance recipes: sequence
    parallelism with TP, fused attention, the distributed optimizer, gradient reduction, parameter
    gathers and TP collectives overlapped (``MEGATRON_OVERLAP``), the recomputation of the workload or
    recipe that ran it (``_bridge_recompute``; none where neither says),
    ring (p2p) context parallelism (Megatron-Core's default ``cp_comm_type``), experts over EP
    ranks with expert TP 1 (the MoE presets' ``expert_tensor_parallel_size``), and ``fsdp`` > 0 as
    Megatron-FSDP: ZeRO-3 over the data-parallel ranks (the summary: sharding group GPUs/(TP x PP)).
    The MoE all-to-all overlap is that of the workload that ran the row (``bridge_workload``), else
    the later recipe's where it is read (``bridge_recipe``), else off (Megatron-Core's default); the
    token dispatcher is the workload's (``flex`` where it names a DeepEP or HybridEP backend, as
    Megatron-Bridge's ``apply_flex_dispatcher_backend`` sets it), else the all-to-all one.  A bf16
    run without FSDP runs the precision-aware optimizer at its default dtypes (v0.4.2's
    ``set_post_overrides``: ``adam-16bit-master``).  CUDA graphs are the workload's
    (``cuda_graph_impl``, ``cuda_graph_scope``), never the later recipe's, which changed them (its
    Llama 3 70B GB200 NVFP4 recipe graphs each layer, where v0.4.2's
    ``LLAMA3_70B_PRETRAIN_CONFIG_GB200_NVFP4_V2`` sets ``cuda_graph_impl="none"``): none for the dense
    rows, whose v0.4.2 workloads set none or keep the recipes' none."""
    layout = row["layout"]
    fields = dict(_bridge_degrees(row), recompute="none", flash=True, distributed_optimizer=True,
                  overlap=MEGATRON_OVERLAP, **_bridge_precision(row, assume), **_bridge_split(row, assume))
    assume.append("fused attention, grad-reduce/param-gather/TP overlap" + ("" if layout["fsdp"] else
                  ", distributed optimizer") + " (Megatron-Bridge's recipes; not printed)")
    if layout["tp"] > 1:
        assume.append("sequence parallelism with TP (Megatron-Bridge's recipes; not printed)")
    if layout["cp"] > 1:
        fields.update(cp=layout["cp"], cp_variant="ring")
        assume.append("context parallelism as ring exchange (Megatron-Core's cp_comm_type p2p default; not printed)")
    recipe = bridge_recipe(row, assume)
    read = _recipe_settings(recipe) if recipe is not None else {}
    fields.update(overlap=_recipe_overlap(recipe, fields["overlap"], layout["tp"] > 1, assume))
    if fields["fp8"] is not None and read.get("fp8") == PARAM_RECIPES.get(fields["fp8"]):
        fields.update(fp8=read["fp8"])
        assume.append(f"weights stored and gathered in FP8, {fields['fp8']} ({recipe['function']}: fp8_param_gather)")
    workload = bridge_workload(row) if moe else None
    fields.update(_bridge_recompute(workload, recipe, assume))
    if moe:
        fields.update(ep=layout["ep"] or 1, etp=1)
        if workload is not None:
            name, settings = workload
            fields.update(overlap=replace(fields["overlap"], expert=settings["moe_a2a_overlap"]))
            assume.append(f"MoE all-to-alls {'behind compute' if settings['moe_a2a_overlap'] else 'exposed'} "
                          f"(Megatron-Bridge v0.4.2's {name}: moe_a2a_overlap)")
            graphs = graph_scopes(settings.get("cuda_graph_impl"), settings.get("cuda_graph_scope"))
            fields.update(cuda_graphs=graphs)
            assume.append(f"CUDA graphs: {', '.join(graphs) or 'none'} (Megatron-Bridge v0.4.2's {name}: "
                          f"cuda_graph_impl {settings.get('cuda_graph_impl') or 'the recipe default, none'}"
                          + (f", cuda_graph_scope {', '.join(settings['cuda_graph_scope'])})" if graphs else ")"))
            if settings.get("moe_flex_dispatcher_backend"):      # apply_flex_dispatcher_backend: type "flex"
                fields.update(dispatcher="flex")
                assume.append(f"the flex token dispatcher, {settings['moe_flex_dispatcher_backend']}: a token sent "
                              f"once a node (Megatron-Bridge v0.4.2's {name}: moe_flex_dispatcher_backend)")
        elif read.get("overlap") is not None and read["overlap"].expert:
            fields.update(overlap=replace(fields["overlap"], expert=True))
            assume.append(f"MoE all-to-alls behind compute ({recipe['function']}: overlap_moe_expert_parallel_comm)")
        assume.append("expert TP 1 (Megatron-Bridge's MoE presets); tokens evenly over the experts (forced, as noted)")
    if layout["fsdp"]:
        if layout["fsdp"] != layout["dp"] * layout["cp"]:
            raise InputError(f"FSDP {layout['fsdp']}: a sharding group other than the {layout['dp'] * layout['cp']} "
                             "data-parallel ranks is not read", "fsdp")
        fields.update(zero=3, distributed_optimizer=False)
        assume.append("Megatron-FSDP as ZeRO-3 over the data-parallel ranks, gathers and reductions overlapped")
    elif fields["fp8"] is None:
        fields.update(optimizer=precision_aware_adam("adam", "bf16", None, "fp32", "fp32", "fp32"))
        assume.append("the precision-aware optimizer, fp32 masters as 16-bit remainders (Megatron-Bridge v0.4.2's "
                      "set_post_overrides for bf16 with adam, off under FSDP; not printed)")
    return Training(**fields)


def _recipe_overlap(recipe, overlap, tensor_ranks: bool, assume: list):
    """``overlap`` with what the row's recipe turns off in its ``comm_overlap``: the TP overlap
    (``tp_comm_overlap`` false: the NVFP4 recipes, Qwen3-235B's on H100) where the row has tensor
    ranks, and the parameter gathers' (``overlap_param_gather`` false); ``overlap`` as it is where no
    recipe of the row's layout is read (``bridge_recipe``) or it says nothing."""
    given = (recipe or {}).get("config", {}).get("comm_overlap") or {}
    off = {}
    if tensor_ranks and given.get("tp_comm_overlap") is False:
        off["tensor"] = False
    if given.get("overlap_param_gather") is False:
        off["param_gather"] = False
    if off:
        names = {"tensor": "tp_comm_overlap", "param_gather": "overlap_param_gather"}
        assume.append(f"{' and '.join(names[k] for k in off)} off ({recipe['function']}: comm_overlap), not the "
                      f"other recipes' overlap")
    return replace(overlap, **off)


def _bridge_recompute(workload, recipe, assume: list) -> dict:
    """The recomputation that ran the row: the modules of its v0.4.2 workload (which make the
    granularity selective, ``utils/overrides.py``), else the selective modules of the later recipe
    where it is read, else none (not printed)."""
    if workload is not None and workload[1].get("recompute_modules"):
        name, modules = workload[0], tuple(workload[1]["recompute_modules"])
        assume.append(f"recompute {', '.join(modules)} (Megatron-Bridge v0.4.2's {name}: recompute_modules)")
        return dict(recompute="selective", recompute_modules=modules)
    model = recipe["config"]["model"] if recipe is not None else {}
    if model.get("recompute_granularity") == "selective" and model.get("recompute_modules"):
        modules = tuple(model["recompute_modules"])
        assume.append(f"recompute {', '.join(modules)} ({recipe['function']}: recompute_modules)")
        return dict(recompute="selective", recompute_modules=modules)
    assume.append("recompute: not printed; none assumed")
    return dict(recompute="none")


BRIDGE_RECIPE_MODELS = {"llama3-70b": "llama3_70b", "llama3.1-405b": "llama31_405b", "deepseek-v3": "deepseek_v3",
                        "gpt-oss-120b": "gpt_oss_120b", "qwen3-30b-a3b": "qwen3_30b_a3b",
                        "qwen3-235b-a22b": "qwen3_235b_a22b"}
BRIDGE_RECIPE_PRECISIONS = {"BF16": "bf16", "FP8": "fp8cs", "MXFP8": "fp8mx", "NVFP4": "nvfp4"}
"""How Megatron-Bridge names its performance recipes:
``{model}_pretrain_{GPUs}gpu_{system}_{precision}_config`` (``src/megatron/bridge/perf_recipes/``)."""


BRIDGE_WORKLOAD_MODELS = {"deepseek-v3": "DEEPSEEK_V3", "gpt-oss-120b": "GPT_OSS_120B",
                          "qwen3-30b-a3b": "QWEN3_30B_A3B", "qwen3-235b-a22b": "QWEN3_235B_A22B"}
BRIDGE_WORKLOAD_PRECISIONS = {"BF16": "BF16", "FP8": "FP8_CS", "MXFP8": "FP8_MX", "NVFP4": "NVFP4"}
"""How Megatron-Bridge v0.4.2's performance scripts name a workload:
``{MODEL}_PRETRAIN_CONFIG_{GPU}_{PRECISION}_V{1|2}`` (``scripts/performance/configs/``)."""


@lru_cache(maxsize=None)
def _workloads() -> dict:
    return json.loads(resources.files("symbolic_cost.reproduce").joinpath(
        "measured", "bridge-workloads-v0.4.2.json").read_text())["configs"]


def bridge_workload(row) -> tuple[str, dict] | None:
    """``(name, settings)`` of the workload of Megatron-Bridge v0.4.2's performance scripts that ran
    the row (``measured/bridge-workloads-v0.4.2.json``: the release whose performance summary
    prints the 26.04.01 container's rows): the one named for the row's model, GPU and precision
    whose layout (GPUs, TP, PP, VP, EP, micro-batch and global batch) is the row's; ``None``
    where none is (a model or a layout the file does not hold)."""
    model, layout = BRIDGE_WORKLOAD_MODELS.get(row["model"]["name"]), row["layout"]
    precision = BRIDGE_WORKLOAD_PRECISIONS.get(layout["precision"])
    ours = (row["hardware"]["count"], layout["tp"], layout["pp"], layout["vp"], layout["ep"],
            layout["micro_batch"], layout["global_batch"])
    for version in (1, 2):
        gpu = row["hardware"]["gpu"].split("-")[0]          # H100-SXM-80GB: the scripts' H100
        name = f"{model}_PRETRAIN_CONFIG_{gpu}_{precision}_V{version}"
        settings = _workloads().get(name)
        if settings and tuple(settings[k] for k in ("gpus", "tp", "pp", "vp", "ep", "micro_batch",
                                                    "global_batch")) == ours:
            return name, settings
    return None


def bridge_recipe(row, assume: list) -> dict | None:
    """The performance recipe of ``models.bridge_recipes`` the row names, where its layout is the
    row's (TP, PP, CP, VP, EP, micro-batch and global batch): the settings the summary leaves
    unprinted are then read from it; ``None`` (noted) where it is missing or differs (the recipe
    changed after the container that ran the row).  What the recipe does and the library does not
    model (activations offloaded to the host) is listed in ``assume``."""
    from symbolic_cost.models import bridge_recipes
    layout, model, commit = row["layout"], row["model"]["name"], bridge_recipes.source()["commit"][:9]
    name = (f"{BRIDGE_RECIPE_MODELS.get(model, model)}_pretrain_{row['hardware']['count']}gpu_"
            f"{BRIDGE_SYSTEMS[row['hardware']['gpu']]}_{BRIDGE_RECIPE_PRECISIONS.get(layout['precision'])}_config")
    if name not in bridge_recipes.names():
        assume.append(f"no recipe {name} at Megatron-Bridge {commit}: its unprinted settings assumed")
        return None
    recipe = bridge_recipes.recipe(name)
    m, t = recipe["config"]["model"], recipe["config"]["train"]
    keys = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
            "virtual_pipeline_model_parallel_size", "expert_model_parallel_size")
    theirs = tuple(m.get(k) or 1 for k in keys) + (t.get("micro_batch_size"), t.get("global_batch_size"))
    ours = tuple(layout[k] or 1 for k in ("tp", "pp", "cp", "vp", "ep")) + (layout["micro_batch"],
                                                                             layout["global_batch"])
    if theirs != ours:
        assume.append(f"{name} at Megatron-Bridge {commit} has another layout (TP, PP, CP, VP, EP, micro-batch, "
                      f"global batch {theirs}) than the row's {ours}: its unprinted settings assumed")
        return None
    if m.get("cpu_offloading"):
        assume.append(f"{name} offloads {m.get('cpu_offloading_num_layers')} layers' activations to the host: not "
                      f"modelled, counted as kept")
    return recipe


def _recipe_settings(recipe: dict) -> dict:
    """The low-precision recipe (``fp8``) and the ``overlap`` a recipe's ``mixed_precision``,
    ``comm_overlap`` and MoE overlap field say, read by the Megatron-Bridge reader's own functions
    (``models.megatron_precision.precision``, ``models.megatron_bridge.overlap``): its other fields
    are the row's printed layout, or are listed by ``bridge_recipe``."""
    from symbolic_cost.models.megatron_bridge import overlap
    from symbolic_cost.models.megatron_bridge_keys import Container
    from symbolic_cost.models.megatron_precision import precision
    config = recipe["config"]
    model = {k: v for k, v in config["model"].items() if k == "overlap_moe_expert_parallel_comm"}
    c = Container({**{k: config[k] for k in ("mixed_precision", "comm_overlap") if k in config}, "model": model},
                  recipe["function"])
    return {"fp8": precision(c).get("fp8"), "overlap": overlap(c, True, True, [])}


def _bridge_seconds(row) -> Fraction:
    """Seconds of a step from the printed tokens/s per GPU: ``global batch x sequence / (rate x GPUs)``."""
    layout = row["layout"]
    rate = next(Fraction(str(m["value"])) for m in row["measured"] if m["quantity"] == "tokens_per_sec_per_gpu")
    return Fraction(layout["global_batch"] * layout["seq_len"]) / (rate * row["hardware"]["count"])


def _bridge_case(row) -> Case:
    """A row of ``BRIDGE`` as a ``Case``; refused (``InputError``) where the library cannot express
    it: out of scope, no architecture, a layout it does not place (``model_cost`` builds it), a
    recipe the GPU's tensor cores do not run (``timing.systems.check_block_scaling``)."""
    if not row.get("in_scope"):
        raise InputError("not in scope of the measured set (in_scope false)", "in_scope")
    gpu = row["hardware"]["gpu"]
    if gpu not in BRIDGE_SYSTEMS:
        raise InputError(f"GPU {gpu!r} is not one of the systems ({', '.join(BRIDGE_SYSTEMS)})", "system")
    assume: list[str] = []
    architecture = _bridge_architecture(row, assume)
    training = _bridge_training(row, architecture.moe is not None, assume)
    model_cost(architecture, training, conv.DEFAULT)
    check_block_scaling(training.fp8, get_system(BRIDGE_SYSTEMS[gpu]))
    quantity, seconds, how = _measured(row)
    return Case(row["id"], row["group"], BRIDGE_SYSTEMS[gpu], architecture, training, quantity, seconds,
                conv.DEFAULT, how, tuple(assume))


@lru_cache(maxsize=None)
def _bridge_built(row_id: str) -> Case | str:
    """The ``Case`` of the ``BRIDGE`` row ``row_id``, or why it is excluded (the refusal's text);
    built once, for ``cases`` and ``excluded`` alike."""
    row = next(r for r in rows() if r["id"] == row_id)
    try:
        return _bridge_case(row)
    except InputError as error:
        return str(error)


@dataclass(frozen=True)
class ServingCase:
    """One measured load test: ``requests`` requests of ``serving.l_in`` prompt and
    ``output_tokens`` output tokens (each, or their means: ``lengths``, ``inference.lengths``)
    arriving at ``rate`` per second (``None``: all at once) on ``system``, and what was measured
    (``measured``: mean TTFT and ITL in seconds, request/s, total and output tokens/s)."""

    id: str
    system: str
    architecture: Architecture
    serving: Serving
    output_tokens: int
    rate: Fraction | None
    requests: int
    measured: dict
    assumptions: tuple[str, ...]
    lengths: Lengths = FIXED


_SECONDS = {"mean_ttft", "mean_itl"}


def serving_cases() -> list[ServingCase]:
    """The serving rows (``measured/calibration-inference.json``: TensorRT-LLM 0.14 online
    serving on H100, BF16, in-flight batching) as ``ServingCase``: Poisson arrivals (the source
    does not state its arrival process) and flash (fused) attention, as TensorRT-LLM runs it; the
    lengths as ``_lengths`` reads the printed ones."""
    out = []
    for row in rows("calibration-inference.json"):
        layout = row["layout"]
        rate = layout["request_rate_qps"]
        measured = {m["quantity"]: Fraction(str(m["value"])) / (1000 if m["quantity"] in _SECONDS else 1)
                    for m in row["measured"]}
        outputs, why = _lengths(layout["osl"])
        out.append(ServingCase(row["id"], "h100", _architecture(row),
                               Serving(m1=layout["tp"], p=layout["pp"], l_in=layout["isl"], flash=True),
                               layout["osl"], None if rate == "INF" else Fraction(rate), layout["num_requests"],
                               measured, ("Poisson arrivals (not stated)", why,
                                          f"every prompt {layout['isl']} tokens (not stated)"),
                               Lengths(outputs=outputs)))
    return out


def _lengths(printed: int) -> tuple[str, str]:
    """``(shape, why)`` for a load test whose output length is printed as ``printed`` (the source
    does not say whether every request ran to it): a power of two is a ``max_tokens`` setting,
    every request generating it (``"fixed"``, a synthetic benchmark's); any other is the mean of a
    dataset whose answers end where they end, drawn ``"geometric"`` with that mean
    (``inference.lengths``: the largest-entropy lengths with that mean).  TensorRT-LLM 0.14's
    output lengths 256 and 16 are settings; its 214, with the 202-token prompts and a request
    throughput below the rate sent from 16 requests/s, is a dataset's mean.  The prompts stay at
    their printed lengths: nothing shows they spread (drawn geometric too, the 36 tests' TTFT error
    grew, median 4.7 % to 9.0 %)."""
    if printed & (printed - 1) == 0:
        return "fixed", f"every request {printed} output tokens (a power of two: a max_tokens setting; not stated)"
    return "geometric", (f"output lengths geometric with mean {printed} (not a power of two: a dataset's mean, "
                         f"its answers ending where they end; the distribution not stated)")
