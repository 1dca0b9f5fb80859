"""One transformer layer: attention then MLP (sequential), or both on one input (parallel)."""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.blocks.attention import attention
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.graphs import captured
from symbolic_cost.blocks.layout import Layout
from symbolic_cost.blocks.mlp import mlp
from symbolic_cost.blocks.moe import MoE, graphed_rows, moe as moe_block
from symbolic_cost.blocks.specs import Feedforward, Heads, Projections, Scores, as_heads, objects
from symbolic_cost.blocks.wiring import NORMS_PER_LAYER, PARTS, Run, Wiring
from symbolic_cost.checks import InputError
from symbolic_cost.ops import add
from symbolic_cost.trees import remembered_call

__all__ = ["transformer_layer", "NORMS_PER_LAYER", "PARTS"]


def transformer_layer(b, l, e, f, heads, m1=1, s1=1, *, scores: Scores | None = None,
                      projections: Projections | None = None, ffn: Feedforward | None = None,
                      wiring: Wiring | None = None, run: Run | None = None) -> Block:
    """One transformer layer: ``x + attn(norm(x))`` then ``x + mlp(norm(x))``.

    What the attention is: ``heads``, ``scores``, ``projections`` (``blocks.specs``, as in
    ``attention``; ``Heads.latent``: multi-head latent attention).  What the MLP is: ``ffn``
    (a ``Feedforward``: gated, biases, activation dropout, or a mixture of experts); its
    biases default to the attention's output projection's.  How they run: ``run`` (a ``Run``,
    shared by every block: flash, context parallelism, element sizes, conventions).  How they
    are wired: ``wiring`` (a ``Wiring``).  ``Wiring.dropouts`` are the closing (residual)
    dropouts and, unless ``Scores.dropout`` or ``Feedforward.activation_dropout`` say
    otherwise, those of the attention probabilities and after the activation;
    ``Wiring.norm`` the kind of every norm.

    Sequential (default): the attention rows, then (with ``Wiring.cross``, T5's decoder) the
    cross-attention rows ``cross_*`` over ``cross`` encoder tokens, then the MLP rows;
    ``norms=4`` adds a norm after each of the two (Gemma 2 and 3).
    ``Wiring.parallel``: ``y = x + attention(n1(x)) + mlp(n2(x))`` (GPT-J, GPT-NeoX, Falcon, Phi):
    with ``norms=1`` both branches read the one norm's output (``n2 = n1``: one allgather in,
    one reduction of the input gradient); the two partial outputs are summed (``branch_sum``)
    and reduced once, then the residual add.  With dropouts each branch keeps its own closing
    dropout (so its own reduction).  Neither latent attention nor experts in a parallel layer.
    ``Wiring.part``: the whole ``"layer"``, or only its ``"attention"`` (self-attention) or its
    ``"mlp"`` (the MLP or mixture of experts) block.

    >>> from symbolic_cost.symbols import b, l, e, h
    >>> transformer_layer(b, l, e, 4 * e, h).names[:4]
    ['layer_norm_1', 'qkv_proj', 'logits', 'softmax']
    >>> transformer_layer(b, l, e, 4 * e, h, wiring=Wiring(parallel=True, norms=1, dropouts=False)).names[-3:]
    ['fc2', 'branch_sum', 'residual']
    """
    objects(scores=(scores, Scores), projections=(projections, Projections), ffn=(ffn, Feedforward),
            wiring=(wiring, Wiring), run=(run, Run))
    objects(moe=(getattr(ffn, "moe", None), MoE))
    heads, projections, ffn = as_heads(heads), projections or Projections(), ffn or Feedforward()
    wiring, run = wiring or Wiring(), run or Run()
    _check(heads, ffn, wiring)
    joined = wiring.parallel and not wiring.dropouts            # branches summed before one reduction
    blocks = []
    if wiring.part != "mlp":
        blocks.append(_built(attention, b, l, e, heads, m1, s1, scores=scores, projections=projections, run=run,
                             residual=wiring.residual(post_norm=wiring.norms == 4, branch=joined)))
    if wiring.part != "attention":
        if wiring.cross is not None:
            blocks.append(attention(b, l, e, heads.plain, m1, s1, run=replace(run, context=None),
                                    scores=Scores(dropout=(scores or Scores()).dropout, keys=wiring.cross),
                                    projections=replace(projections, clip=False, cross=True),
                                    residual=wiring.residual()))
        blocks.append(_built(_feedforward, b, l, e, f, m1, s1, ffn, projections.out_bias, wiring, run))
    layer = blocks[0] if len(blocks) == 1 else _joined(blocks, joined, run)
    return _graphed(layer, blocks, ffn, run) if run.graphs else layer


def _graphed(layer: Block, blocks: list, ffn: Feedforward, run: Run) -> Block:
    """``layer`` (built from ``blocks``) with the rows ``run.graphs`` captures replayed from CUDA
    graphs (``blocks.graphs``): a self-attention block's rows (its norm, core, projections and
    residual) under ``attn``, a dense MLP's under ``mlp``, an MoE block's as
    ``blocks.moe.graphed_rows`` says, every row under ``full_iteration``; a cross-attention's
    never (Megatron-Core's scopes are a GPT layer's); a parallel layer's closing sum and
    residual with both its branches."""
    flags = []
    for i, block in enumerate(blocks):
        if "full_iteration" in run.graphs:
            flags += [True] * len(block.rows)
        elif block.name == "moe":
            flags += graphed_rows(block, run.graphs, ffn.experts.dispatcher if ffn.experts else "alltoall")
        else:
            scope = "mlp" if block.name == "mlp" else "attn" if i == 0 else None
            flags += [scope in run.graphs] * len(block.rows)
    flags += [all(flags)] * (len(layer.rows) - len(flags))
    return replace(layer, rows=captured(layer.rows, flags))


def _built(builder, *args, **keywords) -> Block:
    """``builder(*args, **keywords)``, remembered by its arguments (``_BLOCKS``): a model's dense
    and MoE layers share one attention block, and a multi-token-prediction module repeats the
    last layer.  Blocks are frozen, so one object serves every layer that asks for it."""
    return remembered_call(_BLOCKS, builder, *args, kept=_BLOCKS_KEPT, **keywords)


_BLOCKS: dict = {}
"""Attention and MLP blocks already built, by their builder and arguments."""
_BLOCKS_KEPT = 256
"""Blocks ``_BLOCKS`` holds before it starts again (each a few dozen rows of expressions)."""


def _check(heads: Heads, ffn: Feedforward, wiring: Wiring) -> None:
    """Refuse latent attention or experts in a parallel layer (``Wiring`` refuses the rest)."""
    if wiring.parallel and (heads.latent is not None or ffn.moe is not None):
        raise InputError("a parallel layer has neither latent attention nor a mixture of experts")


def _feedforward(b, l, e, f, m1, s1, ffn: Feedforward, out_bias, wiring: Wiring, run: Run) -> Block:
    """The layer's MLP, or its mixture of experts (biased only when ``ffn.bias`` says)."""
    if ffn.moe is not None:
        return moe_block(b, l, e, ffn.moe, m1, s1, experts=ffn.experts, gated_act=ffn.gated, bias=bool(ffn.bias),
                         residual=wiring.residual(), run=run)
    placement = dict(post_norm=wiring.norms == 4, shared_input=wiring.parallel and wiring.norms == 1,
                     branch=wiring.parallel and not wiring.dropouts)
    return mlp(b, l, e, f, m1, s1, bias=out_bias if ffn.bias is None else ffn.bias, gated_act=ffn.gated,
               activation_dropout=ffn.activation_dropout, residual=wiring.residual(**placement), run=run)


def _joined(blocks: list, joined, run: Run) -> Block:
    """The layer from its blocks, with (for parallel branches without dropouts) the sum of the
    two partial outputs, reduced once, and the residual add."""
    rows = tuple(row for blk in blocks for row in blk.rows)
    dims = {k: v for blk in blocks for k, v in blk.dims.items()}
    if joined:
        at = Layout.of(dict(dims), run.es, run.es_mask, run.conventions)
        rows += (at.leaving(add(at.b, at.l, at.e, name="branch_sum", es=at.es)),
                 at.closing_dropout("residual", False))
    return Block("layer", rows, dims, blocks[0].conventions)
