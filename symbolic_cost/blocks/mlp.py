"""The transformer MLP block."""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.checks import flag
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.specs import objects
from symbolic_cost.blocks.layout import NORMS, Layout
from symbolic_cost.blocks.wiring import Residual, Run
from symbolic_cost.ops import dropout, gated, gelu, linear

def mlp(b, l, e, f, m1=1, s1=1, *, bias=True, gated_act=False, activation_dropout=None,
        residual: Residual | None = None, run: Run | None = None) -> Block:
    """The transformer MLP: ``dropout(fc2(dropout(gelu(fc1(norm(x))))))`` on one device.

    ``fc1 (e -> f)`` is split by columns and ``fc2 (f -> e)`` by rows over
    ``m1`` devices; the norm and the last dropout run on ``l/s1`` tokens.
    ``gated_act`` makes ``fc1`` produce a gate and a value (``e -> 2f``) for
    SwiGLU/GeGLU; ``activation_dropout`` says whether a dropout (``dpr1``)
    follows the activation (default: the ``mlp_activation_dropout`` convention).
    Where it sits (``residual``, a ``blocks.wiring.Residual``): ``dropouts=False`` drops both
    dropouts (the last row is then the residual add); ``norm="rms"`` uses RMS norm (any kind
    of ``ops.norm.NORMS``).  Parallel layers (``transformer_layer``): ``shared_input`` takes
    the attention branch's norm output (no norm row; the input gradient joins the attention's
    before its one reduction), ``branch`` leaves ``fc2`` unreduced and drops the closing row.
    ``post_norm`` adds a norm of the output on the sequence shard (Gemma 2 and 3).  ``run``
    (a ``Run``): the element sizes and conventions.

    >>> from symbolic_cost.symbols import b, l, e, f
    >>> mlp(b, l, e, f).names
    ['layer_norm_2', 'fc1', 'act', 'fc2', 'dpr2']
    """
    objects(residual=(residual, Residual), run=(run, Run))
    for name, value in (("bias", bias), ("gated_act", gated_act)):      # the string "no" read as true
        flag(value, name)
    if activation_dropout is not None:
        flag(activation_dropout, "activation_dropout")
    residual, run = residual or Residual(), run or Run()
    norm, dropouts, shared_input, branch = residual.norm, residual.dropouts, residual.shared_input, residual.branch
    dims = dict(b=b, l=l, e=e, f=f, m1=m1, s1=s1)
    at = Layout.of(dims, run.es, run.es_mask, run.conventions)
    b, l, e, f, m1 = dims["b"], dims["l"], dims["e"], dims["f"], dims["m1"]
    own_norm = at.conventions.norm_placement != "attention" and not shared_input
    rows = [at.norm(f"{norm}_norm_2", norm)] if own_norm else []
    width = 2 * f / m1 if gated_act else f / m1
    after_act = at.conventions.mlp_activation_dropout if activation_dropout is None else activation_dropout
    redone = dict(recompute="activation")             # activation recomputation redoes these
    fc1 = linear(b, l, e, width, bias=bias, name="fc1", **at.kw)      # gate and up: two modules, split_inputs
    fc2 = replace(linear(b, l, f / m1, e, bias=bias, name="fc2", **at.kw), rebuilt="activation")
    rows += [
        _same(fc1) if shared_input else at.entering(fc1, 2 if run.split_inputs and gated_act else 1),
        replace((gated if gated_act else gelu)(b, l, f / m1, name="act", **at.kw), **redone),
        *([replace(dropout(b, l, f / m1, es_mask=at.es_mask, name="dpr1", **at.kw), **redone, rebuilt="activation")]
          if dropouts and after_act else []),
        (_same if branch else at.leaving)(fc2),
        *([NORMS[norm](b, l / at.s, e, name=f"{norm}_norm_post_mlp", **at.kw)] if residual.post_norm else []),
        *([] if branch else [at.closing_dropout("dpr2", dropouts)]),
    ]
    return Block("mlp", tuple(rows), dims, at.conventions)


def _same(cost):
    """A row that joins no collective (inside a parallel block's shared region)."""
    return cost
