"""Activation memory a layer keeps for backward, and the work recomputation redoes.

Per micro-batch, for the ``k`` layers of one pipeline stage:

============== ============================================= =================================
``recompute``  kept                                          forward redone in backward
============== ============================================= =================================
none           ``k x`` every row's ``act_buffer``            nothing
selective      the attention core dropped, Q, K, V kept      the core (Korthikanti et al.
               instead; with Megatron-LM's modules, what     2022); with modules, theirs
               each frees (``models.recompute_modules``)
activation     each activation's output (the input of        the activations (and ``dpr1``)
               ``fc2``, ``expert_fc2``, ``shared_fc2``)
               dropped (and ``dpr1``'s mask)
full, uniform  the input of every group of ``N`` layers:     every layer
               ``k/N x`` the layer input
full, block    the inputs of the first ``N`` layers of each  those layers
               model chunk, all of the others
op             the layer input, the outputs of every other   the other products, every
               product (``wq, wv, w1, w2``) and the          element-wise row
               attention kernel's ``O`` and log-sum-exp
============== ============================================= =================================

``N`` is ``Training.recompute_layers`` (Megatron-LM's ``--recompute-num-layers``); which
layers the block method redoes on each pipeline rank is ``models.placement.Placement.redone``
(all of a chunk's where it holds fewer than ``N``; DeepSeek's dense layers before its experts).
Each row says what a recomputation does to it: ``Cost.recompute``, the recomputation that
redoes its forward (``"selective"``: the core's rows, ``ops.attention.attention_core``;
``"activation"``: the activation functions and ``dpr1``), and ``Cost.rebuilt``, the one
that rebuilds what it keeps instead of keeping it (the core's rows; ``dpr1``, ``fc2``,
``expert_fc2``, ``shared_fc2``: ``blocks.mlp``, ``blocks.moe``).
``op`` is torchtitan's op-level policy (``models.op_recompute``, which owns which products it
saves and refuses the blocks it is not defined on).
``activation`` redoes every activation function of the layer: on a mixture of experts the
routed experts' (Megatron-LM's ``--recompute-modules moe_act``) and the shared experts', each
rebuilding its second product's input.
"""

from __future__ import annotations

from dataclasses import replace

from sympy import Expr, Integer

from symbolic_cost.blocks import Block
from symbolic_cost.cost import Cost, exact
from symbolic_cost.models import op_recompute
from symbolic_cost.models.recompute_modules import selection
from symbolic_cost.models.training_values import Recompute


def policy(recompute) -> Recompute:
    """A recomputation as its value: a ``Recompute``, or a mode's name (selective: ``core_attn``)."""
    return recompute if isinstance(recompute, Recompute) else Recompute(recompute)


def recomputed_rows(layer: Block, recompute) -> list[str]:
    """Names of the rows whose forward runs again in backward, collectives and all, in a
    recomputed layer: all of them (``full``), those ``op`` redoes whole
    (``op_recompute.whole_rows``), or those the policy's units redo
    (``models.recompute_modules``; not a ``quiet`` one).  ``recompute``: a ``Recompute`` or a mode."""
    recompute = policy(recompute)
    if recompute.mode == "full":
        return layer.names
    if recompute.mode == "op":
        return op_recompute.whole_rows(layer)
    chosen = selection(layer, recompute.units)
    return [name for i, name in enumerate(layer.names) if i in chosen.redone - chosen.quiet]


def kept_bytes(layer: Block, recompute, tokens_bytes) -> Expr:
    """Activation bytes one layer keeps for backward under a recomputation policy
    (``full``: the layer's input, ``tokens_bytes``, as one group of one layer)."""
    recompute = policy(recompute)
    if recompute.mode == "full":
        return tokens_bytes                                    # only the layer's input
    if recompute.mode == "op":
        return op_recompute.kept_bytes(layer, tokens_bytes)
    chosen = selection(layer, recompute.units)
    rebuilt = [row.act_buffer for i, row in enumerate(layer) if i in chosen.rebuilt]
    # what each unit keeps instead (Q, K, V to redo the core, a checkpoint's input) is its
    # Selection.kept; activation: fc2's input is rebuilt from the activation's input, and a
    # dropout between them draws its mask again from the saved random state
    # (torch.utils.checkpoint), so it keeps none
    return layer.total("act_buffer") - sum(rebuilt, Integer(0)) + chosen.kept


def stage_kept_bytes(layer: Block, training, layers, tokens_bytes, redone) -> Expr:
    """Bytes the ``layers`` layers of one stage keep for one micro-batch (see the table),
    ``redone`` of them recomputed under the block method."""
    if training.recompute != "full":
        return layers * kept_bytes(layer, training.recomputation, tokens_bytes)
    group = training.recompute_layers
    if training.recompute_method == "uniform":
        return exact(layers, "layers") / exact(group, "recompute_layers") * tokens_bytes    # a rank's count: ints
    return redone * tokens_bytes + (layers - redone) * kept_bytes(layer, "none", tokens_bytes)


def rebuilt_bytes(layer: Block, training, tokens_bytes) -> Expr:
    """Bytes a recomputation rebuilds at once in backward, beyond what the layers keep: the
    forward redone before a checkpointed unit's backward saves, for one micro-batch, what the
    unit would have kept without recomputation, alive until that backward frees it.

    * ``full``, ``uniform``: a group of ``N`` layers is one checkpoint
      (Megatron-LM's ``_checkpointed_forward`` runs ``N`` layers under one
      ``tensor_parallel.checkpoint``), so ``N x`` every row's ``act_buffer``, less the group's
      input (``tokens_bytes``), which the checkpoint holds already and the first row saves again
      as the same storage;
    * ``full``, ``block``: one layer at a time, ``act_buffer - tokens_bytes``;
    * the others redo part of one layer: what it keeps without recomputation less what it keeps
      under the policy (``kept_bytes``), e.g. the attention core's scores and probabilities less
      the Q, K and V the checkpoint kept (they are the same storage as the core's inputs).

    0 without recomputation."""
    recompute = training.recomputation
    if recompute.mode == "none":
        return Integer(0)
    whole = layer.total("act_buffer")
    if recompute.mode != "full":
        return whole - kept_bytes(layer, recompute, tokens_bytes)
    group = exact(training.recompute_layers, "recompute_layers") if training.recompute_method == "uniform" else 1
    return group * whole - tokens_bytes


def recomputed_costs(layer: Block, recompute) -> list[Cost]:
    """The forward work a recomputed layer redoes in backward, as Costs: its recomputed rows,
    or under ``op`` the element-wise rows and the unsaved products (``op_recompute.redone``)."""
    recompute = policy(recompute)
    if recompute.mode == "op":
        return op_recompute.redone(layer)
    if recompute.mode == "full":
        return list(layer)
    chosen = selection(layer, recompute.units)
    return [replace(row, collectives=()) if i in chosen.quiet else row
            for i, row in enumerate(layer) if i in chosen.redone]


def recompute_flops(layer: Block, recompute) -> Expr:
    """FLOPs one recomputed layer redoes in backward."""
    return sum((c.flops_fwd for c in recomputed_costs(layer, recompute)), Integer(0))
