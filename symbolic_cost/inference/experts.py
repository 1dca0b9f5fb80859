"""Serving a mixture of experts: the routed experts' weights a step reads.

A step reads an expert's weights only when one of its tokens reaches it (grouped expert kernels
load the experts that have rows).  The ``T`` tokens an expert-parallel group routes in a step
(``ep`` ranks, each routing its ``b`` sequences' ``t`` tokens: ``T = ep b t``) each choose ``k``
of the ``E`` experts; under uniform routing an expert receives none of them with probability
``(1 - k/E)^T``, so a step reads on average ``1 - (1 - k/E)^T`` of the routed experts' weights
(``touched_share``): ``k/E`` for one decoded token, all of them for any sizeable prefill.  A
router that prefers some experts touches fewer; the capacity of every expert is unchanged.
"""

from __future__ import annotations

from dataclasses import replace

import mpmath
from sympy import Expr, Float, Function, Rational

from symbolic_cost.blocks import Block
from symbolic_cost.blocks.moe import EXPERT_ROWS, MoE
from symbolic_cost.cost import exact
from symbolic_cost.checks import counts


def touched_share(spec: MoE, tokens) -> Expr:
    """The expected share of routed experts that ``tokens`` routed tokens reach: ``1 - (1 - k/E)^T``.

    >>> touched_share(MoE(8, 2, 14336), 1), touched_share(MoE(8, 2, 14336), 2)
    (1/4, 7/16)
    """
    k, experts = exact(spec.top_k, "top_k"), exact(spec.experts, "experts")
    return 1 - Missed(1 - k / experts, counts(tokens=tokens)["tokens"])


class Missed(Function):
    """``q**T``, the chance that none of ``T`` routed tokens reaches an expert, kept whole for a
    large number ``T``: as a rational it has about ``T log10(1/q)`` digits (millions for a
    prefill), which SymPy would carry through every sum.  Kept whole it is still exact, and a
    printed number evaluates it once, in floats (``evalf``); for ``T <= LARGE`` and for a
    symbolic ``T`` it is the power itself.

    >>> Missed(Rational(1, 2), 3), Missed(Rational(31, 32), 10**6).evalf(3)
    (1/8, 5.19e-13789)
    """

    def _power(cls, q, tokens):
        if not (tokens.is_Integer and tokens > LARGE and q.is_Rational):
            return q ** tokens
        return None

    eval = classmethod(_power)   # SymPy's hook for a Function's value at its arguments (no text)

    def _eval_evalf(self, prec):
        q, tokens = self.args
        with mpmath.workprec(prec):
            return Float(mpmath.power(mpmath.mpf(q.p) / q.q, int(tokens)), precision=prec)

    def _numpycode(self, printer):
        return f"numpy.power({printer._print(self.args[0])}, {printer._print(self.args[1])})"

    def _pythoncode(self, printer):
        return f"({printer._print(self.args[0])})**({printer._print(self.args[1])})"


LARGE = 4096
"""Routed tokens above which ``Missed`` keeps ``(1 - k/E)^T`` whole."""


def routed_reads(block: Block, spec: MoE, tokens) -> Block:
    """``block`` with its routed experts' weights read in the ``touched_share`` of ``tokens``
    routed tokens: ``mem_fwd`` of the expert rows less ``weights x (1 - k/E)^T``."""
    untouched = 1 - touched_share(spec, tokens)
    rows = tuple(r.plus(mem_fwd=-r.weights * untouched) if r.name in EXPERT_ROWS else r for r in block.rows)
    return replace(block, rows=rows)
