"""The MLP, attention and transformer layer on one device of a 2-D, 2.5-D or 3-D tensor grid.

Every activation ``(b, l, e)`` lives as a block ``(b/rows, l, e/cols)`` (``parallel.grid``), so
every row of a block works on whole sequences and whole heads and needs no communication of its
own, except:

* the linear layers (``grid_linear``): ``qkv_proj``, ``v_proj``, ``fc1``, ``fc2``;
* a norm: its row statistics are partial over the device's ``e/cols`` columns, so each pass
  allreduces them along the columns' axis, two per token for a layer norm (the sums of ``x``
  and ``x^2``; backward: of ``g dY`` and ``g dY x_hat``), one for an RMS norm;
* a vector (a norm's gain and shift, a bias) is kept on every device holding its columns, and
  its gradient is allreduced along the other axes (``grid_linear.shared_gradients``).

The attention core (``ops.attention_core`` or flash) runs on ``b/rows`` sequences and ``h/cols``
heads; softmax is along a row of scores, all local.  Rows are named as in ``blocks`` (so
recomputation and tables read them the same way).  A grid carries no separate sequence
parallelism (every activation is already split ``rows x cols`` ways).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Block, Feedforward, Heads, Projections, Residual, Run, Scores, Wiring
from symbolic_cost.blocks.layout import attach
from symbolic_cost.blocks.specs import as_heads
from symbolic_cost.checks import InputError, instance
from symbolic_cost.cost import Cost, exact
from symbolic_cost.ops import Keys, add, attention_core, dropout, flash_attention, gated, gelu, rotary
from symbolic_cost.ops.norm import NORMS
from symbolic_cost.parallel.grid import Grid, check_grid, panels
from symbolic_cost.parallel.grid_linear import grid_linear, shared_gradients
from symbolic_cost.symbols import resolve_names


@dataclass(frozen=True)
class GridBlock(Block):
    """A ``Block`` on a tensor grid: substituting numbers re-checks the grid's rules."""

    grid: Grid | None = None

    def subs(self, values) -> "GridBlock":
        values = {k: exact(v, str(k)) for k, v in resolve_names(values).items()}
        dims = {name: exact(value, name).subs(values) for name, value in self.dims.items()}
        grid = self.grid.subs(values)
        dims = check_grid(dims, grid)
        for width in ("e", "f"):
            if width in dims and grid.kind != "3d":
                panels(grid, dims[width], width)
        return replace(self, rows=tuple(row.subs(values) for row in self.rows), dims=dims, grid=grid)


def columns_axis(grid: Grid) -> str:
    """The axis that splits a layer's input and output columns (3-D: ``k``)."""
    return "k" if grid.kind == "3d" else "cols"


def grid_norm(grid: Grid, b, l, e, kind="layer", *, es=2, conventions=conv.DEFAULT, name="layer_norm") -> Cost:
    """A norm of ``(b, l, e)`` on ``(b/rows, l, e/cols)``: ``ops.norm`` on the block, its row
    statistics allreduced along the columns' axis in each pass, its vector's gradient summed
    (its backward adds are weight gradient, as the norm's ``gamma``/``beta`` sums are; the
    statistics' are activation gradient).

    >>> from symbolic_cost.parallel.grid import make_grid
    >>> [c.elements for c in grid_norm(make_grid("2d", m1=2, m2=4), 4, 8, 64).collectives]
    [32, 32, 32]
    """
    if kind not in NORMS:
        raise InputError(f"norm must be one of {', '.join(NORMS)}, got {kind!r}", "norm")
    conventions = conv.get(conventions)
    rows, axis = exact(b, "b") / grid.rows, columns_axis(grid)
    cost = NORMS[kind](rows, l, exact(e, "e") / grid.cols, name=name, es=es, conventions=conventions)
    stats = (2 if kind.startswith("layer") else 1) * rows * exact(l, "l")
    collectives = [c for pass_ in ("fwd", "bwd") for c in grid.along(axis, "allreduce", stats, es, pass_, conventions)]
    return attach(cost, collectives, conventions,
                  shared_gradients(grid, axis, cost.weights / exact(es, "es"), es, conventions))


def _local(grid: Grid, b, width):
    """``(sequences, columns)`` of a ``(b, l, width)`` activation on one device."""
    return b / grid.rows, width / grid.cols


def _closing(grid: Grid, b, l, e, keep, es, es_mask, conventions, name) -> Cost:
    """The closing dropout on the device's block, or the residual add without dropouts."""
    rows, cols = _local(grid, b, e)
    if keep:
        return dropout(rows, l, cols, es=es, es_mask=es_mask, conventions=conventions, name=name)
    return add(rows, l, cols, name="residual", es=es)


def _dims(grid: Grid, **dims) -> dict:
    """The block's dimensions with the grid's degrees, checked (``check_grid``); ``kv_heads`` may
    be ``None`` (as many as the query heads), any other size is refused by name."""
    dims = check_grid({k: v for k, v in dims.items() if v is not None or k != "kv_heads"}, grid)
    return {**dims, **grid.degrees}


def _modelled(value, what: str, *names: str) -> None:
    """Refuse the fields ``names`` of ``value`` set away from their defaults: a grid does not
    model them (``models.grid_stack.unsupported`` refuses them for a whole model)."""
    for name in names:
        if getattr(value, name) != getattr(type(value)(*_REQUIRED.get(type(value), ())), name):
            raise InputError(f"a tensor grid does not model {what}.{name} (got {getattr(value, name)!r}); "
                             f"use 1-D tensor parallelism (m1)", name)


_REQUIRED = {Heads: (1,)}
"""The required fields of a value whose defaults ``_modelled`` compares with."""


GRID_MADE_BY = " (parallel.grid.make_grid(kind, ...))"
"""Where a ``Grid`` comes from, for the refusal of anything else where one belongs."""


def grid_mlp(b, l, e, f, grid: Grid, *, bias=True, gated_act=False, activation_dropout=None,
             residual: Residual | None = None, run: Run | None = None) -> GridBlock:
    """The MLP ``dropout(fc2(act(fc1(norm(x)))))`` on one device of ``grid``; options as in
    ``blocks.mlp`` (``activation_dropout`` adds ``dpr1``; ``residual``: the norm kind and the
    dropouts; ``run``: element sizes and conventions).

    >>> from symbolic_cost.parallel.grid import make_grid
    >>> grid_mlp(8, 16, 64, 256, make_grid("3d", mq=2)).names
    ['layer_norm_2', 'fc1', 'act', 'fc2', 'dpr2']
    """
    instance(grid, Grid, "grid", GRID_MADE_BY)
    residual, run = residual or Residual(), run or Run()
    _modelled(residual, "Residual", "post_norm", "branch", "shared_input")
    norm, dropouts, es, es_mask = residual.norm, residual.dropouts, run.es, run.es_mask
    conventions = conv.get(run.conventions)
    dims = _dims(grid, b=b, l=l, e=e, f=f)
    b, l, e, f = dims["b"], dims["l"], dims["e"], dims["f"]
    kw = dict(es=es, conventions=conventions)
    rows = [] if conventions.norm_placement == "attention" else [grid_norm(grid, b, l, e, norm, name=f"{norm}_norm_2", **kw)]
    seqs, cols = _local(grid, b, f)
    after_act = conventions.mlp_activation_dropout if activation_dropout is None else activation_dropout
    rows += [grid_linear(grid, b * l, e, 2 * f if gated_act else f, bias=bias, name="fc1", **kw),
             replace((gated if gated_act else gelu)(seqs, l, cols, name="act", **kw), recompute="activation"),
             *([replace(dropout(seqs, l, cols, es_mask=es_mask, name="dpr1", **kw), recompute="activation",
                        rebuilt="activation")] if dropouts and after_act else []),
             replace(grid_linear(grid, b * l, f, e, bias=bias, flip=True, name="fc2", **kw), rebuilt="activation"),
             _closing(grid, b, l, e, dropouts, es, es_mask, conventions, "dpr2")]
    return GridBlock("mlp", tuple(rows), dims, conventions, grid)


def grid_attention(b, l, e, heads, grid: Grid, *, scores: Scores | None = None,
                   projections: Projections | None = None, residual: Residual | None = None,
                   run: Run | None = None) -> GridBlock:
    """Self-attention on one device of ``grid``: ``h/cols`` query heads and ``kv/cols`` key/value
    heads of ``b/rows`` whole sequences; rows and values as in ``blocks.attention``, of which a
    grid models ``Heads``' ``kv_heads`` and ``rotary``, ``Scores``' ``causal`` and ``dropout``,
    the projections' biases, ``Residual``'s norm and dropouts and ``Run``'s flash, element sizes
    and conventions (any other field set is refused, naming it).

    >>> from symbolic_cost.parallel.grid import make_grid
    >>> grid_attention(8, 16, 64, 8, make_grid("2.5d", mq=2, md=2)).names
    ['layer_norm_1', 'qkv_proj', 'logits', 'softmax', 'dropout_softmax', 'attend', 'v_proj', 'dropout']
    """
    instance(grid, Grid, "grid", GRID_MADE_BY)
    heads, scores, projections = as_heads(heads), scores or Scores(), projections or Projections()
    residual, run = residual or Residual(), run or Run()
    _modelled(heads, "Heads", "head_dim", "v_head_dim", "qk_norm", "rotary_dim", "latent")
    _modelled(scores, "Scores", "window", "bias", "softcap", "sinks", "keys")
    _modelled(projections, "Projections", "clip", "cross")
    _modelled(residual, "Residual", "post_norm", "branch", "shared_input")
    _modelled(run, "Run", "context")
    norm, dropouts, es, es_mask = residual.norm, residual.dropouts, run.es, run.es_mask
    conventions = conv.get(run.conventions)
    dims = _dims(grid, b=b, l=l, e=e, h=heads.h, kv_heads=heads.kv_heads)
    b, l, e, h = dims["b"], dims["l"], dims["e"], dims["h"]
    kv = dims.get("kv_heads", h)
    q = e / h
    kw = dict(es=es, conventions=conventions)
    seqs, local_heads = _local(grid, b, h)
    rows = [grid_norm(grid, b, l, e, norm, name=f"{norm}_norm_1", **kw),
            grid_linear(grid, b * l, e, (h + 2 * kv) * q, bias=projections.qkv_bias, name="qkv_proj", **kw)]
    if heads.rotary:
        rows.append(rotary(seqs, l, local_heads + kv / grid.cols, q, es=es))
    local = Keys(kv_heads=kv / grid.cols, causal=scores.causal)
    rows += ([flash_attention(seqs, l, q, local_heads, local, **kw)] if run.flash else
             attention_core(seqs, l, q, local_heads, local,
                            dropouts=dropouts if scores.dropout is None else scores.dropout, es_mask=es_mask, **kw))
    rows += [grid_linear(grid, b * l, h * q, e, bias=projections.out_bias, flip=True, name="v_proj", **kw),
             _closing(grid, b, l, e, dropouts, es, es_mask, conventions, "dropout")]
    if conventions.norm_placement == "attention":
        rows.append(grid_norm(grid, b, l, e, norm, name=f"{norm}_norm_2", **kw))
    return GridBlock("attention", tuple(rows), dims, conventions, grid)


def grid_layer(b, l, e, f, heads, grid: Grid, *, scores: Scores | None = None,
               projections: Projections | None = None, ffn: Feedforward | None = None,
               wiring: Wiring | None = None, run: Run | None = None) -> GridBlock:
    """One sequential transformer layer on ``grid``: ``grid_attention`` then ``grid_mlp``, with
    the values of ``blocks.transformer_layer`` (the MLP's biases default to the output
    projection's; a mixture of experts, a parallel layer, cross-attention, four norms or a part
    of the layer are refused).

    >>> from symbolic_cost.parallel.grid import make_grid
    >>> len(grid_layer(4, 16, 64, 256, 8, make_grid("2d", m1=2, m2=4)))
    13
    """
    projections, ffn, wiring = projections or Projections(), ffn or Feedforward(), wiring or Wiring()
    _modelled(ffn, "Feedforward", "moe")
    _modelled(wiring, "Wiring", "norms", "parallel", "cross", "part")
    first = grid_attention(b, l, e, heads, grid, scores=scores, projections=projections, residual=wiring.residual(),
                           run=run)
    second = grid_mlp(b, l, e, f, grid, bias=projections.out_bias if ffn.bias is None else ffn.bias,
                      gated_act=ffn.gated, activation_dropout=ffn.activation_dropout, residual=wiring.residual(),
                      run=run)
    return GridBlock("layer", first.rows + second.rows, {**first.dims, **second.dims}, first.conventions, grid)


GRID_BUILDERS = {"mlp": grid_mlp, "attention": grid_attention, "layer": grid_layer}
"""The block builders on a grid, by the names of ``blocks.BUILDERS``."""
