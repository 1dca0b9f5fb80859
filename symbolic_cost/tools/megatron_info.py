"""The accounting of Megatron-LM's ``tools/get_training_info`` (seed 000), as formulas.

Parameters, bytes per parameter and data-parallel traffic come from
``models.model_cost`` under the ``megatron-training-info`` conventions.  What
this module adds is the tool's own memory model, which is not a per-operation
count: activation coefficients that its README says were measured by tracing
``cudaMalloc``/``cudaFree`` (flash attention, SwiGLU, micro-batch ``b``,
sequence ``s``, hidden ``h``, FFN ``f``, vocabulary ``v``, all in 2-byte
elements), and its peak-memory rule.

======================== ====================
module                   elements kept
======================== ====================
Embedding                ``3/2 s b h``
input_layernorm          ``s b h``
self_attention           ``6 s b h``: rearrange ``3 s b h``, core_attention_flash
                         ``s b h``, rearrange ``s b h``, dense ``s b h``
post_attention_layernorm ``s b h``
mlp                      ``s b h + 4 s b f``: bias_glue ``4 s b f``, dense_4h_to_h ``s b h``
drop_add_fusion          ``3/2 s b h``
one layer                ``10 s b h + 4 s b f`` (the tool's header; its children
                         sum to ``10.5 s b h + 4 s b f``, a quirk it prints as is)
logits and loss          ``9/2 s b v`` (whole model only)
======================== ====================
"""

from __future__ import annotations

from sympy import Expr, Rational, sympify

from symbolic_cost.conventions import PRESETS
from symbolic_cost.extrema import maximum
from symbolic_cost.checks import InputError

PRESET = PRESETS["megatron-training-info"]
"""Megatron-LM's ``tools/get_training_info`` (seed 000): Megatron's bytes per parameter,
its quirk of a QKV bias of ``e`` elements, and volumes as whole tensors."""

TRACED = {
    "Embedding": (Rational(3, 2), 0),
    "input_layernorm": (1, 0),
    "self_attention": (6, 0),
    "rearrange_qkv": (3, 0),
    "core_attention_flash": (1, 0),
    "rearrange_out": (1, 0),
    "dense": (1, 0),
    "post_attention_layernorm": (1, 0),
    "mlp": (1, 4),
    "bias_glue": (0, 4),
    "dense_4h_to_h": (1, 0),
    "drop_add_fusion": (Rational(3, 2), 0),
    "layer": (10, 4),
}
"""Module -> (coefficient of ``s b h``, coefficient of ``s b f``)."""


def module_elements(module: str, s, b, h, f) -> Expr:
    """Activation elements the tool books for one module."""
    if module not in TRACED:
        raise InputError(f"unknown module {module!r}; known: {', '.join(TRACED)}", "module")
    per_h, per_f = TRACED[module]
    return sympify(per_h) * s * b * h + per_f * s * b * f


def activations(s, b, h, f, v, layers) -> Expr:
    """Whole model on one device: ``L (10 sbh + 4 sbf) + 3/2 sbh + 9/2 sbv`` elements."""
    return (layers * module_elements("layer", s, b, h, f) + module_elements("Embedding", s, b, h, f)
            + Rational(9, 2) * s * b * v)


def activations_per_gpu(s, b, h, f, layers, t, p) -> Expr:
    """Per device: ``p [(L/p)((5 sbh + 4 sbf)/t + 5 sbh) + 3/2 sbh]`` elements: half of the
    ``s b h`` terms are not split by tensor parallelism (no sequence parallelism), and the
    first stage holds ``p`` micro-batches under 1F1B.  Logits are left out."""
    s, b, h, f, layers, t, p = (sympify(x) for x in (s, b, h, f, layers, t, p))
    split = (5 * s * b * h + 4 * s * b * f) / t + 5 * s * b * h
    return p * (layers / p * split + Rational(3, 2) * s * b * h)


def peak_elements(params_per_gpu, activations_gpu, s, b, v, t, d, precision: str) -> Expr:
    """The tool's peak: the larger of the optimizer step and forward/backward, in 2-byte
    elements (fp32 counts as 2 elements of 2 bytes)."""
    P, A, logits = sympify(params_per_gpu), sympify(activations_gpu), sympify(s * b * v) / t
    if precision == "bf16":
        return maximum(P * (1 + 2 + Rational(2) / d + 2), P * (1 + 2 + Rational(6) / d) + A + 5 * logits)
    if precision == "fp16":
        return maximum(P * (1 + 1 + Rational(2) / d + 2), P * (1 + 1 + Rational(8) / d) + A + 2 * logits)
    return maximum(P * (1 + 1 + Rational(1) / d + 1), P * (1 + 1 + Rational(2) / d) + A + 2 * logits)


PEAK_ELEMENT_BYTES = 2
"""The tool's peak rule counts in 2-byte elements whatever the precision."""


def peak_bytes(params_per_gpu, activations_gpu, s, b, v, t, d, precision: str) -> Expr:
    """The tool's peak in bytes: ``peak_elements`` of ``PEAK_ELEMENT_BYTES`` bytes each."""
    return PEAK_ELEMENT_BYTES * peak_elements(params_per_gpu, activations_gpu, s, b, v, t, d, precision)


def swiglu_ffn(hidden: int) -> int:
    """Megatron's SwiGLU width: ``64 floor(floor(8h/3)/64)`` (2/3 of ``4h``, rounded to 64)."""
    return 64 * ((8 * hidden // 3) // 64)


def data_parallel_groups(t: int, p: int, d: int, gpus_per_node: int) -> list[list[str]]:
    """Megatron's data-parallel groups: inside each pipeline stage, ranks ``t`` apart,
    named ``n<node>_g<local rank>``."""
    world = t * p * d
    stage = world // p
    return [[f"n{r // gpus_per_node}_g{r % gpus_per_node}" for r in range(s * stage + j, (s + 1) * stage, t)]
            for s in range(p) for j in range(t)]
