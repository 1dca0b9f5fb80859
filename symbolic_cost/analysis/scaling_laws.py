"""Scaling laws as SymPy expressions, and the compute-optimal model size and tokens they imply.

A parametric loss (Hoffmann et al. 2022, "Approach 3")::

    L(N, D) = E + A / N^alpha + B / D^beta

in the parameters ``N`` and training tokens ``D``, under a budget ``C = k N D`` (``k`` FLOPs per
parameter per token: 6 in the papers, or the library's exact count, ``flops_per_token``), is
least where the Lagrangian's gradient vanishes.  SymPy solves it (``lagrangian_optimum``)::

    N*(C) = G (C/k)^a,   D*(C) = (C/k)^b / G,
    G = (alpha A / (beta B))^(1/(alpha + beta)),   a = beta/(alpha + beta),   b = alpha/(alpha + beta)

Other papers publish the optimum itself as power laws of ``C`` (``PowerLaws``): Llama 3 the
tokens (``D*(C) = 0.299 C^0.537``, section 3.2.1), DeepSeek LLM the non-embedding FLOPs per
token ``M`` and the tokens (``M*(C) = 0.1715 C^0.5243``, ``D*(C) = 5.8316 C^0.4757``, with
``C = M D``; section 3.1).

Every constant is the printed decimal as an exact Rational; expressions stay exact until a user
substitutes a budget.

>>> law = LAWS["hoffmann-2022"]
>>> law.loss().subs({N: 70 * 10**9, D: 14 * 10**11}).evalf(4)      # Chinchilla's own size and tokens
1.937
>>> opt = law.optimum()
>>> opt.exponents
(14/31, 17/31)
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from dataclasses import dataclass

from sympy import Expr, Rational, Symbol, diff, lambdify, log, simplify, solve, symbols, sympify

from symbolic_cost.checks import InputError, InputTypeError, exact, shown

__all__ = ["N", "D", "C", "k", "LossLaw", "PowerLaws", "Optimum", "LAWS", "lagrangian_optimum", "get_law",
           "elasticity"]

N, D, C, k = symbols("N D C k", positive=True)
"""Parameters, training tokens, training FLOPs, FLOPs per parameter per token."""


@functools.cache
def lagrangian_optimum() -> dict:
    """``{N: N*, D: D*, lambda: ...}`` minimising ``E + A/N^alpha + B/D^beta`` subject to
    ``k N D = C``, solved by SymPy from the Lagrangian's stationarity conditions, all constants
    symbols (positive).  Solved once; a ``LossLaw`` substitutes its constants."""
    E, A, B, alpha, beta, lam = symbols("E A B alpha beta lambda", positive=True)
    lagrangian = E + A / N**alpha + B / D**beta + lam * (k * N * D - C)
    (found,) = solve([diff(lagrangian, x) for x in (N, D, lam)], [N, D, lam], dict=True)
    return {"constants": (E, A, B, alpha, beta), N: found[N], D: found[D]}


@dataclass(frozen=True)
class Optimum:
    """The compute-optimal size ``n`` (parameters, or the FLOPs per token where ``size_is`` says
    ``"flops_per_token"``), tokens ``d`` and loss ``loss`` (``None`` where the law gives none) as
    expressions in ``C`` (and ``k``, FLOPs per parameter per token, where they need it), with the
    exponents of ``C`` in ``n`` and ``d``."""

    n: Expr
    d: Expr
    loss: Expr | None
    exponents: tuple
    size_is: str = "parameters"

    def at(self, budget, per_token=6) -> dict:
        """The optimum at ``budget`` FLOPs and ``per_token`` FLOPs per parameter per token, to 15
        digits (SymPy's ``evalf`` at those values: substituting them exactly would have it factor
        large integers for their rational powers).

        >>> {name: f"{float(v):.3g}" for name, v in LAWS["llama-3"].optimum().at(10**24).items() if v}
        {'parameters': '7.21e+10', 'tokens': '2.31e+12'}
        """
        at = {C: exact_positive(budget, "budget"), k: exact_positive(per_token, "per_token")}
        value = lambda x: x.evalf(15, subs=at)  # noqa: E731
        found = {self.size_is: value(self.n), "tokens": value(self.d),
                 "loss": None if self.loss is None else value(self.loss)}
        if found[self.size_is] < 1 or found["tokens"] < 1:     # 1e-300 FLOPs bought 2e-136 parameters
            raise InputError(f"a budget of {float(at[C]):.3g} FLOPs buys an optimum of under one token or a size "
                             f"({self.size_is}) under 1: no model trains on it", "budget")
        return found


def positive(value, name: str, infinite: bool = False) -> float:
    """``value`` as a positive finite float (``infinite``: or ``inf``), refused by ``name`` (a count
    of parameters or tokens, a loss, a budget: a zero divided, a negative gave a complex loss)."""
    if isinstance(value, (bool, str)) or not isinstance(value, (int, float, Fraction, Expr)):
        raise InputTypeError(f"{name} must be a number, got {shown(value)}", name)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a real number, got {shown(value)}", name) from None
    if not number > 0 or (math.isinf(number) and not infinite):
        raise InputError(f"{name} must be positive and finite, got {shown(value)}", name)
    return number


def exact_positive(value, name: str) -> Expr:
    """``value`` (a positive finite number) exactly: a float as the decimal it prints (``1e25``)."""
    positive(value, name)
    return Rational(repr(value)) if isinstance(value, float) else sympify(value)


@dataclass(frozen=True)
class LossLaw:
    """``L(N, D) = E + A/N^alpha + B/D^beta``, fitted by ``source``."""

    name: str
    E: Expr
    A: Expr
    B: Expr
    alpha: Expr
    beta: Expr
    source: str

    def loss(self, n=N, d=D) -> Expr:
        """The predicted loss at ``n`` parameters and ``d`` tokens."""
        return self.E + self.A / sympify(n)**self.alpha + self.B / sympify(d)**self.beta

    def at(self, n, d) -> float:
        """The loss at numbers ``n`` and ``d``, in floats: ``loss()`` evaluated by ``lambdify`` (an
        exact rational power of a large integer would have SymPy factor it); ``d`` may be
        infinite (the loss ``n`` parameters tend to)."""
        return _numeric(self, "loss")(positive(n, "n"), positive(d, "d", infinite=True))

    def tokens_for(self, loss, n) -> float:
        """The tokens at which ``n`` parameters reach ``loss``: ``loss()`` solved for ``D``,
        ``(B / (loss - E - A/N^alpha))^(1/beta)``; infinite where ``n`` parameters never reach it
        (``loss - E - A/N^alpha <= 0``)."""
        loss, n = positive(loss, "loss"), positive(n, "n")
        rest = loss - self.at(n, math.inf)
        return _numeric(self, "tokens")(loss, n) if rest > 0 else math.inf

    def optimum(self) -> Optimum:
        """``N*(C)``, ``D*(C)`` and ``L(N*, D*)`` under ``C = k N D`` (``lagrangian_optimum``)."""
        solved = lagrangian_optimum()
        names = dict(zip(solved["constants"], (self.E, self.A, self.B, self.alpha, self.beta)))
        n, d = (simplify(solved[x].subs(names)) for x in (N, D))
        total = self.alpha + self.beta
        return Optimum(n, d, self.loss(n, d), (self.beta / total, self.alpha / total))


@functools.cache
def _numeric(law: LossLaw, what: str):
    """``law``'s loss in ``(N, D)``, or the tokens that reach a loss in ``(loss, N)`` (``loss()``
    solved for ``D`` by SymPy), as float functions: built once a law."""
    if what == "loss":
        return lambdify([N, D], law.loss(), "math")
    target, u = Symbol("L", positive=True), Symbol("u", positive=True)     # u = D^-beta: the loss is linear in it
    (share,) = solve(law.loss(N, u ** (-1 / law.beta)) - target, u)
    return lambdify([target, N], share ** (-1 / law.beta), "math")


@dataclass(frozen=True)
class PowerLaws:
    """An optimum published as power laws of the budget ``C``: ``tokens = (coefficient, exponent)``
    of ``D*(C)``; ``size`` the same of ``N*(C)`` when ``size_is`` is ``"parameters"``, of the
    non-embedding FLOPs per token ``M*(C)`` when it is ``"flops_per_token"`` (DeepSeek LLM),
    ``None`` where only the tokens are published (the size is then ``C / (k D*)``)."""

    name: str
    tokens: tuple
    size: tuple | None
    size_is: str
    source: str

    def optimum(self) -> Optimum:
        """``N*(C)`` (parameters; for ``"flops_per_token"`` the size ``M*(C)``) and ``D*(C)``."""
        d = self.tokens[0] * C**self.tokens[1]
        n = C / (k * d) if self.size is None else self.size[0] * C**self.size[1]
        exponent = 1 - self.tokens[1] if self.size is None else self.size[1]
        return Optimum(n, d, None, (exponent, self.tokens[1]), self.size_is)


GOPHER_TOKENS_PER_FLOP_ROOT = (Rational("5.76e23") ** Rational(1, 2) / (6 * 67 * 10**9))
"""``D*(C) / C^(1/2)`` of Hoffmann et al.'s Approach 1 (exponent 0.50, Table 2) through its optimum at
Gopher's budget (Table 3: 5.76e23 FLOPs, 67B parameters, ``D = C / (6 N)``)."""

LAWS = {
    "hoffmann-2022": LossLaw(
        "hoffmann-2022", Rational("1.69"), Rational("406.4"), Rational("410.7"), Rational("0.34"), Rational("0.28"),
        "Hoffmann et al. 2022, Training Compute-Optimal Large Language Models, section 3.3 (Approach 3), "
        "eq. (10): E = 1.69, A = 406.4, B = 410.7, alpha = 0.34, beta = 0.28"),
    "besiroglu-2024": LossLaw(
        "besiroglu-2024", Rational("1.8172"), Rational("482.01"), Rational("2085.43"), Rational("0.3478"), Rational("0.3658"),
        "Besiroglu et al. 2024, Chinchilla Scaling: A replication attempt, Table 1 (the refit of Approach 3 on "
        "the data read off Hoffmann et al.'s Figure 4): E = 1.8172, A = 482.01, B = 2085.43, alpha = 0.3478, "
        "beta = 0.3658"),
    "hoffmann-2022-approach-1": PowerLaws(
        "hoffmann-2022-approach-1", (GOPHER_TOKENS_PER_FLOP_ROOT, Rational(1, 2)), None, "parameters",
        "Hoffmann et al. 2022, Table 2 (Approach 1: N* and D* grow as C^0.50), through Table 3's row at "
        "Gopher's budget (5.76e23 FLOPs: 67B parameters), with C = 6ND: N*(C) = 67e9 (C / 5.76e23)^(1/2), "
        "the projections of Table 3"),
    "llama-3": PowerLaws(
        "llama-3", (Rational("0.299"), Rational("0.537")), None, "parameters",
        "Dubey et al. 2024, The Llama 3 Herd of Models, section 3.2.1: D*(C) = A C^alpha tokens with "
        "(alpha, A) = (0.537, 0.299); the paper reads 16.55T tokens and a 402B model at 3.8e25 FLOPs from its fit, "
        "and these printed constants give 16.29T there"),
    "deepseek-llm": PowerLaws(
        "deepseek-llm", (Rational("5.8316"), Rational("0.4757")), (Rational("0.1715"), Rational("0.5243")), "flops_per_token",
        "DeepSeek-AI 2024, DeepSeek LLM, section 3.1, eq. (4): M_opt = 0.1715 C^0.5243, D_opt = 5.8316 C^0.4757, "
        "M the non-embedding FLOPs per token (72 n_layer d_model^2 + 12 n_layer d_model l_seq), C = M D"),
}
"""Published fits, by name, each with its source."""


def get_law(name: str):
    """The law ``name`` of ``LAWS``, or a clear refusal."""
    if not isinstance(name, str) or name not in LAWS:
        raise InputError(f"scaling law must be one of {', '.join(LAWS)}, got {name!r}", "law")
    return LAWS[name]


def elasticity(expr: Expr, x: Symbol = C) -> Expr:
    """``d log expr / d log x``: the exponent of a power law (``N*(C)``'s is ``a``)."""
    return simplify(diff(log(exact(expr, "expr")), x) * x)
