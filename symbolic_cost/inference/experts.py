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

from sympy import Expr

from symbolic_cost.blocks import Block
from symbolic_cost.blocks.moe import EXPERT_ROWS, MoE
from symbolic_cost.cost import exact


def touched_share(spec: MoE, tokens) -> Expr:
    """The expected share of routed experts that ``tokens`` routed tokens reach: ``1 - (1 - k/E)^T``.

    >>> touched_share(MoE(8, 2, 14336), 1), touched_share(MoE(8, 2, 14336), 2)
    (1/4, 7/16)
    """
    k, experts = exact(spec.top_k, "top_k"), exact(spec.experts, "experts")
    return 1 - (1 - k / experts) ** exact(tokens, "tokens")


def routed_reads(block: Block, spec: MoE, tokens) -> Block:
    """``block`` with its routed experts' weights read in the ``touched_share`` of ``tokens``
    routed tokens: ``mem_fwd`` of the expert rows less ``weights x (1 - k/E)^T``."""
    untouched = 1 - touched_share(spec, tokens)
    rows = tuple(r.plus(mem_fwd=-r.weights * untouched) if r.name in EXPERT_ROWS else r for r in block.rows)
    return replace(block, rows=rows)
