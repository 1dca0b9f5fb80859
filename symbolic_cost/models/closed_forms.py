"""The closed-form FLOP and parameter counts papers quote, each a named function beside the
library's exact count, and the differences between them as expressions.

Symbols: ``L`` layers, ``e`` width (``d_model``), ``d_attn = h x head_dim``, ``f`` MLP width,
``V`` vocabulary, ``l`` sequence (``n_ctx``, ``T``, ``s``), ``B`` sequences per iteration.

=============================== ================================================================
``kaplan_parameters``           Kaplan et al. 2020 (Table 1): non-embedding ``N = 2 e L (2 d_attn
                                + f)``, biases and norms ignored
``kaplan_forward_flops``        per token forward ``C = 2N + 2 L l d_attn`` (the attention scores
                                of a causal context of ``l``, on average ``l/2`` keys, both
                                products); the de-embedding ``2 e V`` left out
``six_n``                       ``6N`` per token of training (forward ``2N``, backward ``4N``)
``palm_flops``                  Chowdhery et al. 2022 (PaLM, App. B): ``6N + 12 L H Q T`` per token,
                                ``H Q = d_attn``, ``T = l``: the attention products forward and
                                backward without causal halving
``narayanan_flops``             Narayanan et al. 2021, Eq. 3: ``96 B l L e^2 (1 + l/(6e) +
                                V/(16 L e))`` per iteration of a GPT (``f = 4e``, ``d_attn = e``)
                                with full recomputation (four passes of every layer)
``korthikanti_model_flops``     Korthikanti et al. 2022: ``72 B l L e^2 (1 + l/(6e) + V/(12 L e))``,
                                the same without recomputation (model FLOPs)
``korthikanti_selective_flops`` Korthikanti et al. 2022, Eq. 8: ``72 B l L e^2 (1 + l/(3e) +
                                V/(12 L e))``, hardware FLOPs with selective recomputation: the
                                recomputed attention core counted as ``12 B l^2 e`` per layer
=============================== ================================================================

Against the library (``matrix_flops`` of ``models.utilisation``, 2mnk products): Eq. 3 and
the model FLOPs of Korthikanti et al. are exact for a GPT's matrix products; ``6N`` leaves out
the attention products and counts the embedding lookup's and the norms' parameters as if they
were products; Eq. 8 counts ``8 B l^2 e`` per layer more than the library's selective
recomputation, which redoes ``QK^T`` and ``AV`` forward once (``4 B l^2 e``): the paper counts
the recomputed core's backward too (``korthikanti_selective_overhead``).
"""

from __future__ import annotations

from sympy import Expr, sympify

from symbolic_cost.models.architecture import Architecture


def attention_width(arch: Architecture) -> Expr:
    """``d_attn``: query heads x head size (``e`` when the heads split the width)."""
    return sympify(arch.h) * arch.head_size


def kaplan_parameters(arch: Architecture) -> Expr:
    """Kaplan et al. 2020's non-embedding parameters ``N = 2 e L (2 d_attn + f)``: the four
    attention projections and the two MLP matrices of each layer."""
    return 2 * sympify(arch.e) * arch.n_layers * (2 * attention_width(arch) + arch.f)


def kaplan_forward_flops(arch: Architecture, l) -> Expr:
    """Kaplan et al. 2020's forward FLOPs per token, ``2N + 2 L l d_attn``."""
    return 2 * kaplan_parameters(arch) + 2 * sympify(arch.n_layers) * l * attention_width(arch)


def six_n(parameters) -> Expr:
    """Training FLOPs per token, ``6N`` (Kaplan et al. 2020, Hoffmann et al. 2022)."""
    return 6 * sympify(parameters)


def palm_flops(arch: Architecture, l, parameters) -> Expr:
    """PaLM's model FLOPs per token, ``6N + 12 L H Q T`` (Chowdhery et al. 2022, App. B)."""
    return six_n(parameters) + 12 * sympify(arch.n_layers) * attention_width(arch) * l


def _gpt(arch: Architecture):
    return sympify(arch.n_layers), sympify(arch.e), sympify(arch.vocab)


def narayanan_flops(arch: Architecture, B, l) -> Expr:
    """Narayanan et al. 2021, Eq. 3: FLOPs per iteration of ``B`` sequences with full
    recomputation, ``96 B l L e^2 (1 + l/(6e) + V/(16 L e))``."""
    L, e, V = _gpt(arch)
    return 96 * B * l * L * e**2 * (1 + l / (6 * e) + V / (16 * L * e))


def korthikanti_model_flops(arch: Architecture, B, l) -> Expr:
    """Korthikanti et al. 2022's model FLOPs per iteration, ``72 B l L e^2 (1 + l/(6e) +
    V/(12 L e))``: forward and backward (twice the forward) of every product."""
    L, e, V = _gpt(arch)
    return 72 * B * l * L * e**2 * (1 + l / (6 * e) + V / (12 * L * e))


def korthikanti_selective_flops(arch: Architecture, B, l) -> Expr:
    """Korthikanti et al. 2022, Eq. 8: hardware FLOPs per iteration with selective
    recomputation, ``72 B l L e^2 (1 + l/(3e) + V/(12 L e))``."""
    L, e, V = _gpt(arch)
    return 72 * B * l * L * e**2 * (1 + l / (3 * e) + V / (12 * L * e))


def korthikanti_selective_overhead(arch: Architecture, B, l) -> Expr:
    """The recomputation Eq. 8 adds to the model FLOPs: ``12 B l^2 e L``, three times the
    attention core's forward (``4 B l^2 e`` per layer), i.e. its forward and backward again."""
    return korthikanti_selective_flops(arch, B, l) - korthikanti_model_flops(arch, B, l)
