"""One transformer layer: attention then MLP (sequential), or both on one input (parallel)."""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.attention import attention
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.layout import Layout
from symbolic_cost.blocks.mlp import mlp
from symbolic_cost.blocks.moe import moe as moe_block
from symbolic_cost.blocks.specs import Feedforward, Heads, Projections, Scores, as_heads
from symbolic_cost.ops import add
from symbolic_cost.checks import InputError

NORMS_PER_LAYER = {False: (2, 4), True: (1, 2)}
"""Norms a layer may have: sequential 2 (pre- or post-norm) or 4 (Gemma 2 and 3's sandwich);
parallel 1 (GPT-J, Falcon-7B, Phi) or 2 (GPT-NeoX, Falcon-40B)."""
PARTS = ("layer", "attention", "mlp")
"""What ``transformer_layer`` builds: the whole layer or one of its blocks."""


def transformer_layer(b, l, e, f, heads, m1=1, s1=1, *, scores: Scores | None = None,
                      projections: Projections | None = None, ffn: Feedforward | None = None, flash=False,
                      context=None, norm="layer", norms=2, parallel=False, dropouts=True, cross=None, part="layer",
                      es=2, es_mask=1, conventions=conv.DEFAULT) -> Block:
    """One transformer layer: ``x + attn(norm(x))`` then ``x + mlp(norm(x))``.

    What the attention is: ``heads``, ``scores``, ``projections`` (``blocks.specs``, as in
    ``attention``; ``Heads.latent``: multi-head latent attention); ``flash`` and ``context``
    as in ``attention``.  What the MLP is: ``ffn`` (a ``Feedforward``: gated, biases,
    activation dropout, or a mixture of experts); its biases default to the attention's
    output projection's.  ``dropouts`` are the closing (residual) dropouts and, unless
    ``Scores.dropout`` or ``Feedforward.activation_dropout`` say otherwise, those of the
    attention probabilities and after the activation; ``norm`` the kind of every norm.

    Sequential (default): the attention rows, then (with ``cross``, T5's decoder) the
    cross-attention rows ``cross_*`` over ``cross`` encoder tokens, then the MLP rows;
    ``norms=4`` adds a norm after each of the two (Gemma 2 and 3).
    ``parallel``: ``y = x + attention(n1(x)) + mlp(n2(x))`` (GPT-J, GPT-NeoX, Falcon, Phi):
    with ``norms=1`` both branches read the one norm's output (``n2 = n1``: one allgather in,
    one reduction of the input gradient); the two partial outputs are summed (``branch_sum``)
    and reduced once, then the residual add.  With dropouts each branch keeps its own closing
    dropout (so its own reduction).  Neither latent attention nor experts in a parallel layer.
    ``part``: the whole ``"layer"``, or only its ``"attention"`` (self-attention) or its
    ``"mlp"`` (the MLP or mixture of experts) block.

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> transformer_layer(b, l, e, 4 * e, h).names[:4]
    ['layer_norm_1', 'qkv_proj', 'logits', 'softmax']
    >>> transformer_layer(b, l, e, 4 * e, h, parallel=True, norms=1, dropouts=False).names[-3:]
    ['fc2', 'branch_sum', 'residual']
    """
    heads, projections, ffn = as_heads(heads), projections or Projections(), ffn or Feedforward()
    _check(heads, ffn, norms, parallel, part)
    common = dict(es=es, es_mask=es_mask, conventions=conventions, dropouts=dropouts, norm=norm)
    joined = parallel and not dropouts            # branches summed before one reduction
    attend = lambda of, **options: attention(b, l, e, of, m1, s1, flash=flash, **options, **common)  # noqa: E731
    blocks = []
    if part != "mlp":
        blocks.append(attend(heads, scores=scores, projections=projections, context=context,
                             post_norm=norms == 4, branch=joined))
    if part == "attention":
        return blocks[0]
    if cross is not None:
        blocks.append(attend(heads.plain, scores=Scores(dropout=(scores or Scores()).dropout, keys=cross),
                             projections=replace(projections, clip=False, cross=True)))
    blocks.append(_feedforward(b, l, e, f, m1, s1, ffn, projections.out_bias, norms, parallel, joined, common))
    if part == "mlp":
        return blocks[-1]
    return _joined(blocks, joined, es, es_mask, conventions)


def _check(heads: Heads, ffn: Feedforward, norms, parallel, part) -> None:
    """Refuse a ``part`` the layer does not have, a number of norms its kind does not have, and
    latent attention or experts in a parallel layer."""
    if part not in PARTS:
        raise InputError(f"part must be one of {', '.join(PARTS)}, got {part!r}", "part")
    if norms not in NORMS_PER_LAYER[bool(parallel)]:
        raise InputError(f"norms must be one of {NORMS_PER_LAYER[bool(parallel)]} for a "
                         f"{'parallel' if parallel else 'sequential'} layer, got {norms!r}")
    if parallel and (heads.latent is not None or ffn.moe is not None):
        raise InputError("a parallel layer has neither latent attention nor a mixture of experts")


def _feedforward(b, l, e, f, m1, s1, ffn: Feedforward, out_bias, norms, parallel, joined, common) -> Block:
    """The layer's MLP, or its mixture of experts (biased only when ``ffn.bias`` says)."""
    if ffn.moe is not None:
        return moe_block(b, l, e, ffn.moe, m1, s1, gated_act=ffn.gated, bias=bool(ffn.bias), **(ffn.experts or {}),
                         **common)
    return mlp(b, l, e, f, m1, s1, bias=out_bias if ffn.bias is None else ffn.bias, gated_act=ffn.gated,
               activation_dropout=ffn.activation_dropout, post_norm=norms == 4,
               shared_input=parallel and norms == 1, branch=joined, **common)


def _joined(blocks: list, joined, es, es_mask, conventions) -> Block:
    """The layer from its blocks, with (for parallel branches without dropouts) the sum of the
    two partial outputs, reduced once, and the residual add."""
    rows = tuple(row for blk in blocks for row in blk.rows)
    dims = {k: v for blk in blocks for k, v in blk.dims.items()}
    if joined:
        at = Layout.of(dict(dims), es, es_mask, conventions)
        rows += (at.leaving(add(at.b, at.l, at.e, name="branch_sum", es=at.es)),
                 at.closing_dropout("residual", False))
    return Block("layer", rows, dims, blocks[0].conventions)
