"""Plan a training run from a budget: the compute-optimal model among buildable shapes, with the
library's exact FLOPs per token, then its layout, days, GPU-hours, energy and cost.

The papers' optimum assumes ``C = 6 N D``.  The FLOPs a model really runs per token, forward and
backward, are ``F = 6 N`` plus attention (``~12 n_layers e l``), the head, norms and softmax
(``models.model_cost``'s model FLOPs): more than ``6 N`` by a share that grows with the sequence.
``plan`` takes the optimum over real shapes of a family (``Shape``: width ``aspect x depth``,
heads of ``head_dim``, an MLP width rounded up as the family rounds it), each shape's exact ``N``
and ``F``, and ``D = C / F``:

* under a parametric loss (``scaling_laws.LossLaw``): the depth whose ``L(N, C/F)`` is least;
* under published power laws (``scaling_laws.PowerLaws``): the depth whose ``F`` is nearest
  ``C / D*(C)`` (DeepSeek LLM: ``M*(C)``; here ``F`` also counts the head, which ``M`` leaves out).

``numeric.training_run.run_plan`` then searches the fastest layout that fits on a cluster and
turns its step time into days, GPU-hours, energy and cost.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import NamedTuple

from sympy import Expr, Rational, lambdify, sympify

from symbolic_cost import symbols as S
from symbolic_cost.analysis.scaling_laws import LAWS, LossLaw, get_law
from symbolic_cost.checks import InputError, InputTypeError, count, flag, instance, shown
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.training import check_context
from symbolic_cost.models.config import from_config

__all__ = ["Shape", "ExpertShape", "SHAPES", "get_shape", "PerToken", "per_token", "Plan", "plan", "serving_aware", "per_depth_table"]


@dataclass(frozen=True)
class Shape:
    """How a family grows with depth ``n``: width about ``aspect n`` (``config``), ``e / head_dim``
    heads in ``kv_heads`` groups, MLP width ``ffn e`` rounded up to a multiple of ``ffn_multiple``;
    every other key from ``base``, a ``config.json`` of the family read by
    ``models.config.from_config``."""

    name: str
    base: dict | tuple
    source: str
    aspect: int = 128
    head_dim: int = 128
    kv_heads: int = 8
    ffn: Rational = Rational(52, 15)
    ffn_multiple: int = 1024

    def __post_init__(self):      # a dict's items, so that the shape is hashable (built once a shape)
        object.__setattr__(self, "base", tuple(sorted(dict(self.base).items())))
        for name in ("aspect", "head_dim", "kv_heads", "ffn_multiple"):
            count(getattr(self, name), name)

    min_depth = 2

    def config(self, depth: int) -> dict:
        """The ``config.json`` of the shape ``depth`` layers deep: width ``aspect x depth`` to the
        nearest multiple of ``head_dim x kv_heads`` (whole heads, whole groups of them)."""
        count(depth, "depth")
        unit = self.head_dim * self.kv_heads
        e = max(unit, (2 * self.aspect * depth + unit) // (2 * unit) * unit)
        f = -(-self.ffn * e // self.ffn_multiple) * self.ffn_multiple
        return {**dict(self.base), "num_hidden_layers": depth, "hidden_size": e, "num_attention_heads": e // self.head_dim,
                "intermediate_size": int(f), "num_key_value_heads": self.kv_heads}

    def values(self, depth: int, l) -> tuple:
        """``(n_layers, e, h, f, l)`` of the shape ``depth`` layers deep: what ``_per_depth``'s
        functions take."""
        c = self.config(depth)
        return depth, c["hidden_size"], c["num_attention_heads"], c["intermediate_size"], l

    def architecture(self, depth: int) -> Architecture:
        return from_config(self.config(depth), name=f"{self.name}-{depth}L")


@dataclass(frozen=True)
class ExpertShape:
    """A mixture-of-experts family grown with depth from one published model: ``base`` (its
    ``config.json``, read by ``models.config.from_config``) is ``base_depth`` layers of width
    ``hidden_size``; ``depth`` layers have the width ``hidden_size x depth / base_depth`` rounded
    to a multiple of ``unit``, and each key of ``scaled`` the base's value times the same
    ratio (``unit`` is chosen so that every one stays whole); the rest (experts, experts a
    token, head sizes, latent ranks, the dense layers first) is the base's.  The parameters a
    token runs through (active) and the parameters held part, so a law of ``N`` does not say
    which to take: only the compute laws, of FLOPs or tokens a budget, plan for it."""

    name: str
    base: dict | tuple
    source: str
    base_depth: int
    unit: int
    scaled: tuple = ()
    min_depth: int = 2

    experts = True

    def __post_init__(self):
        object.__setattr__(self, "base", tuple(sorted(dict(self.base).items())))
        for name in ("base_depth", "unit", "min_depth"):
            count(getattr(self, name), name)

    def config(self, depth: int) -> dict:
        """The ``config.json`` of the shape ``depth`` layers deep (the base's at ``base_depth``)."""
        count(depth, "depth")
        base = dict(self.base)
        width = base["hidden_size"]
        e = max(self.unit, (2 * width * depth + self.unit * self.base_depth) // (2 * self.unit * self.base_depth)
                * self.unit)
        return {**base, "num_hidden_layers": depth, "hidden_size": e,
                **{key: base[key] * e // width for key in self.scaled}}

    def architecture(self, depth: int) -> Architecture:
        return from_config(self.config(depth), name=f"{self.name}-{depth}L")


_DEEPSEEK_V3 = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
    "num_key_value_heads": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
    "moe_layer_freq": 1, "n_group": 8, "topk_group": 4, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid", "topk_method": "noaux_tc", "q_lora_rank": 1536, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "num_nextn_predict_layers": 1,
    "hidden_act": "silu", "vocab_size": 129280, "max_position_embeddings": 163840, "tie_word_embeddings": False,
    "attention_bias": False, "rms_norm_eps": 1e-06, "rope_theta": 10000}
"""DeepSeek-V3's ``config.json`` (deepseek-ai/DeepSeek-V3), the keys that shape a count."""

SHAPES = {
    "llama-3": Shape(
        "llama-3", {"model_type": "llama", "vocab_size": 128256, "max_position_embeddings": 131072,
                    "tie_word_embeddings": False, "rope_theta": 500000.0},
        "Llama 3's shapes (Dubey et al. 2024, Table 3; Meta's reference model.py): head size 128, 8 key/value "
        "heads, SwiGLU width 8/3 x 1.3 x e rounded up to 1024, vocabulary 128,256, untied head; width 128 a "
        "layer (Llama 3 8B's 4096/32; 70B is 8192/80, 405B 16384/126)"),
    "deepseek-v3": ExpertShape(
        "deepseek-v3", _DEEPSEEK_V3,
        "DeepSeek-V3's shape (DeepSeek-AI 2024, the technical report's section 4.2; deepseek-ai/DeepSeek-V3's "
        "config.json): 61 layers of 7,168 (671B parameters, 37B a token, 682.6B and 38.2B with its MTP module), "
        "grown with the width 7,168/61 a layer "
        "rounded to a multiple of 896, the attention heads (128 of 128 + 64 query/key and 128 value dimensions), "
        "the expert width (2/7 of the width) and the first three dense layers' MLP (18/7) with it; 256 routed "
        "experts and one shared, 8 a token, latent ranks 1,536 (queries) and 512 (keys and values), one "
        "multi-token-prediction module, vocabulary 129,280, kept",
        base_depth=61, unit=896, min_depth=4,
        scaled=("num_attention_heads", "num_key_value_heads", "intermediate_size", "moe_intermediate_size")),
}
"""Depth/width rules of families, by name."""


def get_shape(name: str) -> Shape:
    if not isinstance(name, str) or name not in SHAPES:
        raise InputError(f"shape must be one of {', '.join(SHAPES)}, got {name!r}", "shape")
    return SHAPES[name]


class PerToken(NamedTuple):
    """A model's ``parameters``, its training FLOPs a token (``train``: forward and backward) and
    its forward FLOPs a token (``forward``: what serving a token costs, prefill's count)."""

    parameters: Expr
    train: Expr
    forward: Expr


def per_token(arch: Architecture, l, recompute: bool = False) -> PerToken:
    """The parameters of ``arch`` and its FLOPs per token over sequences of ``l``: forward and
    backward (``ModelCost.model_flops_fwd + model_flops_bwd`` of one sequence, over ``l``; with
    ``recompute``, full recomputation's forward again: hardware FLOPs), and forward alone.

    >>> n, f, _ = per_token(SHAPES["llama-3"].architecture(32), 8192)
    >>> n, round(float(f / (6 * n)), 3)          # Llama 3 8B's parameters; F over 6N at 8K tokens
    (8030261248, 1.203)
    """
    cost = model_cost(arch, Training(b=1, l=l, recompute="full" if recompute else "none"))
    flops = cost.model_flops_fwd + cost.model_flops_bwd + (cost.flops_recompute if recompute else 0)
    return PerToken(cost.parameters, sympify(flops) / l, sympify(cost.model_flops_fwd) / l)


@functools.cache
def _per_depth(shape: Shape, recompute: bool):
    """``per_token`` of ``shape`` as functions of ``(n_layers, e, h, f, l)``: built once on the
    shape's architecture with those symbols, which each depth then fills (a build a depth would
    take seconds over a few hundred depths)."""
    symbolic = replace(shape.architecture(shape.min_depth), n_layers=S.n_layers, e=S.e, h=S.h, f=S.f,
                       head_dim=None, rotary_dim=None, context=0)
    made = per_token(symbolic, S.l, recompute)
    return PerToken(*(lambdify([S.n_layers, S.e, S.h, S.f, S.l], x, "math") for x in made))


@dataclass(frozen=True)
class Plan:
    """The chosen shape (``depth`` layers of ``architecture``), its exact ``parameters`` and
    ``flops_per_token``, the ``tokens`` the budget buys (exact; a float where the serving-aware
    plan solves the law for them), the law's ``loss`` there (a float, ``None`` for power laws),
    and the law's own optimum under ``C = 6 N D`` (``six_nd``, floats) to compare with."""

    law: object
    shape: Shape
    budget: Expr
    seq: int
    depth: int
    architecture: Architecture
    parameters: int
    flops_per_token: Expr
    tokens: Expr | float
    loss: float | None
    six_nd: dict
    serving: dict | None = None
    active_parameters: int | None = None


MAX_BUDGET = 10**40
"""The most FLOPs a plan spends: past any cluster's budget, and near where the laws' powers leave a double."""

MAX_SEQ = 10**7
"""The longest sequence a plan takes, tokens (the longest trained contexts are a few million)."""


def plan(budget, law: str = "hoffmann-2022", shape: str = "llama-3", seq: int = 8192, recompute: bool = False,
         depths: range | None = None) -> Plan:
    """The compute-optimal model for ``budget`` FLOPs among ``shape``'s depths (default: from its
    least to 512 layers) under ``law``, with exact FLOPs per token at ``seq`` tokens a sequence."""
    chosen_law, family = get_law(law), get_shape(shape)
    total = _budget(budget)
    count(seq, "seq", maximum=MAX_SEQ)
    check_context(family.architecture(family.min_depth), [("seq", seq)], False, argument="seq",
                  remedy=f"a plan keeps to the {family.name} shape's context: give a shorter seq")
    flag(recompute, "recompute")
    depths = _depths(depths, family)
    if getattr(family, "experts", False):
        return _expert_plan(chosen_law, family, total, seq, recompute, depths)
    made = _per_depth(family, recompute)

    def at(depth):
        x = family.values(depth, seq)
        return made.parameters(*x), made.train(*x)

    if isinstance(chosen_law, LossLaw):
        best = min(depths, key=lambda depth: chosen_law.at(*_n_d(at(depth), total)))
    else:
        target = math.log(float(total) / float(chosen_law.optimum().at(total)["tokens"]))   # C / D*(C)
        best = min(depths, key=lambda depth: abs(math.log(at(depth)[1]) - target))
    _inside(best, depths, family, total)
    arch = family.architecture(best)
    n, f, _ = per_token(arch, seq, recompute)                # the chosen model's exact counts
    optimum = chosen_law.optimum()
    return Plan(chosen_law, family, total, seq, best, arch, int(n), f, total / f,
                chosen_law.at(n, total / f) if isinstance(chosen_law, LossLaw) else None,
                {k: None if v is None else float(v) for k, v in optimum.at(total).items()})


def _expert_plan(law, family: ExpertShape, total, seq: int, recompute: bool, depths) -> Plan:
    """``plan`` for a mixture-of-experts family: under a compute law only (``ExpertShape``), the
    depth whose exact FLOPs a token are nearest ``C / D*(C)``, found by halving the depths (the
    FLOPs a token grow with the depth); each depth's counts are built with numbers."""
    if isinstance(law, LossLaw):
        compute = ", ".join(name for name, value in LAWS.items() if not isinstance(value, LossLaw))
        raise InputError(f"{law.name} is a loss in N, fitted on dense models; a mixture of experts such as "
                         f"{family.name} holds more parameters than a token runs through, and the law does not say "
                         f"which N is: plan it under a compute law ({compute})", "law")
    target = float(total) / float(law.optimum().at(total)["tokens"])              # C / D*(C), FLOPs a token
    made = functools.lru_cache(maxsize=None)(lambda depth: per_token(family.architecture(depth), seq, recompute))
    low, high = 0, len(depths) - 1
    while low < high:                                       # the first depth whose FLOPs reach the target
        middle = (low + high) // 2
        low, high = (middle + 1, high) if float(made(depths[middle]).train) < target else (low, middle)
    near = [depths[i] for i in (low - 1, low) if 0 <= i < len(depths)]
    best = min(near, key=lambda depth: abs(math.log(float(made(depth).train) / target)))
    _inside(best, depths, family, total)
    n, f, _ = made(best)
    arch = family.architecture(best)
    return Plan(law, family, total, seq, best, arch, int(n), f, total / f, None,
                {k: None if v is None else float(v) for k, v in law.optimum().at(total).items()},
                active_parameters=int(model_cost(arch, Training(b=1, l=seq)).active_parameters))


def _inside(best: int, depths, family, total) -> None:
    """Refuse an optimum at either end of the depths tried: the true one lies beyond them."""
    if best in (depths[0], depths[-1]) and len(depths) > 1:
        side, more = ("below", "larger") if best == depths[0] else ("above", "smaller")
        raise InputError(f"the compute-optimal {family.name} shape for {float(total):.3g} FLOPs lies at the edge of "
                         f"the depths tried ({depths[0]} to {depths[-1]} layers), so the optimum is {side} them: "
                         f"choose a {more} budget (from a cluster: {'more' if more == 'larger' else 'fewer'} "
                         f"devices or days)", "budget")


def serving_aware(chosen: Plan, served_tokens, depths: range | None = None) -> Plan:
    """The model of ``chosen``'s loss that costs the fewest FLOPs over its life when it also
    serves ``served_tokens`` tokens (Sardana et al. 2023, Beyond Chinchilla-Optimal: training
    ``F D`` plus serving ``F_fwd D_served``, the loss held at the compute-optimal model's): for
    each depth, the tokens ``D`` that reach the loss, ``(B / (L - E - A/N^alpha))^(1/beta)``, and
    the least lifetime FLOPs.  A smaller model trained longer: ``budget`` stays the one given,
    ``serving`` holds the training FLOPs the model needs (more than the budget) and what the
    compute-optimal model's life would have cost."""
    law, family = instance(chosen, Plan, "chosen", " (analysis.planning.plan(budget))").law, chosen.shape
    if not isinstance(law, LossLaw):
        raise InputError(f"serving-aware planning holds the loss fixed: {law.name} gives no loss (use a loss law: "
                         f"{', '.join(n for n, v in LAWS.items() if isinstance(v, LossLaw))})", "law")
    served = float(_budget(served_tokens, "served_tokens", "tokens"))
    serving = float(per_token(chosen.architecture, chosen.seq)[2]) * served
    if serving > MAX_BUDGET:       # the lifetime's FLOPs are bounded as a budget is
        raise InputError(f"the served_tokens must cost at most 1e40 FLOPs to serve (as a budget: no plan spends "
                         f"more), got {served:.3g} tokens, {serving:.3g} FLOPs on the compute-optimal "
                         f"{chosen.parameters / 1e9:.4g} B model", "served_tokens")
    made = _per_depth(family, False)

    def life(depth):
        n, train, forward = (g(*family.values(depth, chosen.seq)) for g in made)
        tokens = law.tokens_for(chosen.loss, n)
        return train * tokens + forward * served

    best = min(_depths(depths, family), key=life)
    arch = family.architecture(best)
    n, train, forward = per_token(arch, chosen.seq)           # the chosen model's exact counts
    tokens = law.tokens_for(chosen.loss, n)
    return replace(chosen, depth=best, architecture=arch, parameters=int(n), flops_per_token=train, tokens=tokens,
                   loss=law.at(n, tokens),
                   serving={"served_tokens": served, "training_flops": float(train) * tokens,
                            "lifetime_flops": float(train) * tokens + float(forward) * served,
                            "compute_optimal_lifetime_flops": life(chosen.depth),
                            "compute_optimal_parameters": chosen.parameters})


def per_depth_table(chosen: Plan, budget, depths: range | None = None) -> list[tuple[int, float]]:
    """``(parameters, loss)`` of each depth of ``chosen``'s shape trained on ``budget`` FLOPs with
    its exact FLOPs per token: an isoFLOP curve (``report.planning.isoflop_plot``)."""
    instance(chosen, Plan, "chosen", " (analysis.planning.plan's answer)")
    budget = _budget(budget)
    made = _per_depth(chosen.shape, False)
    rows = []
    for depth in _depths(depths, chosen.shape):
        x = chosen.shape.values(depth, chosen.seq)
        n, train = made.parameters(*x), made.train(*x)
        rows.append((int(n), chosen.law.at(n, float(budget) / train)))
    return rows


def _n_d(n_f, total):
    n, f = n_f
    return n, float(total) / f


MAX_DEPTHS = 4096
"""Most depths ``plan`` weighs (its default, a family's least to 512 layers, is under 512)."""


def _depths(depths, family: Shape):
    """The depths to try: ``family``'s least to 512 layers, or those given (a range or a sequence of
    layer counts, none of them 0, in increasing order)."""
    if depths is None:
        return range(family.min_depth, 513)
    if isinstance(depths, (str, bytes)) or not hasattr(depths, "__getitem__") or len(depths) == 0:
        raise InputTypeError(f"depths must be a range or a non-empty sequence of layer counts, got {shown(depths)}",
                             "depths")
    if len(depths) > MAX_DEPTHS:        # each is a model built and weighed: a billion ran for hours
        raise InputError(f"depths must hold at most {MAX_DEPTHS:,} layer counts, got {len(depths):,}", "depths")
    for depth in depths:
        count(depth, "each of depths")
    if any(later <= earlier for earlier, later in zip(depths, depths[1:])):
        raise InputError(f"depths must be layer counts in increasing order, each once (an optimum at the first or "
                         f"the last is said to lie below or above them), got {shown(list(depths))}", "depths")
    return depths


def _budget(budget, name: str = "budget", unit: str = "FLOPs") -> Expr:
    """``budget`` as a positive SymPy number (a float is taken: budgets are written ``1e25``)."""
    rule = f"the {name} must be a positive number of {unit}, got {shown(budget)}"
    if isinstance(budget, bool) or not isinstance(budget, (int, float, Fraction, Expr)):
        raise InputTypeError(rule, name)
    value = sympify(budget)
    if not value.is_number or not value.is_positive or not value.is_finite:
        raise InputError(rule, name)
    if value > MAX_BUDGET:
        raise InputError(f"the {name} must be at most 1e40 {unit} (no run spends more), got {float(value):.3g}", name)
    return value

