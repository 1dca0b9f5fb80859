"""A whole model on a 2-D, 2.5-D or 3-D tensor grid: its layers on the grid, its two ends in
Megatron's layout over the grid's devices, and the all-to-all between the two layouts.

The transformer layers run on the grid (``parallel.grid_blocks.grid_layer``).  The embedding and
the head stay vocabulary-parallel and sequence-parallel over all ``G`` devices of the grid
(``blocks.ends`` with ``m1 = s1 = G``): their activations are ``(b, l/G, e)`` per device, the
grid's are ``(b/rows, l, e/cols)``, the same number of elements, and one all-to-all over the
``G`` devices turns one into the other (``to_grid`` after the embedding, ``from_grid`` before
the head; backward the same for the gradients).  Everything that reads the degrees of a
``Training`` (pipeline sends of ``b l e / s1`` elements ``m1 d`` ranks apart, data parallelism
``m1`` ranks apart, the world ``m1 d p``) then holds for the grid with ``m1 = s1 = G``, which
``on_grid`` sets.
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.blocks import Block, Feedforward, Heads, Projections, Run, Scores, Wiring
from symbolic_cost.blocks.layout import attach
from symbolic_cost.checks import InputError
from symbolic_cost.cost import collective, exact, make_cost
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.parallel.grid import Grid
from symbolic_cost.parallel.grid_blocks import grid_layer

UNSUPPORTED = ("head_dim", "v_head_dim", "rotary_dim", "qk_norm", "clip_qkv", "parallel", "window", "score_bias",
               "softcap", "sinks", "moe", "latent")
"""Architecture features the grid layer does not model (refused by name)."""


def unsupported(arch: Architecture) -> list[str]:
    """The features of ``arch`` a grid layer does not model (``UNSUPPORTED``, four norms, a decoder stack)."""
    refused = [name for name in UNSUPPORTED if getattr(arch, name) not in (None, False)]
    return refused + (["norms"] if arch.norms != 2 else []) + (["decoder_layers"] if arch.decoder_layers else [])


def on_grid(training, grid: Grid):
    """``training`` on ``grid``: ``tensor = grid`` and ``m1 = s1 =`` its devices (see the module)."""
    return replace(training, m1=grid.devices, s1=grid.devices, tensor=grid)


def grid_stack(arch: Architecture, t, grid: Grid, start: Block, end: Block, kw: dict) -> tuple:
    """``(block, count)`` for the embedding ``start`` (``to_grid`` appended), the layers on ``grid``
    and the head ``end`` (``from_grid`` first); ``kw``: ``es``, ``es_mask``, ``conventions``."""
    if getattr(t, "cuda_graphs", ()):     # Megatron-Core's scopes are its 1-D layers'; a grid's would be ignored
        raise InputError(f"cuda_graphs {', '.join(t.cuda_graphs)} on a {grid.kind} tensor grid is not modelled "
                         f"(Megatron-Core's graphs capture its own layers); use 1-D tensor parallelism (m1)",
                         "cuda_graphs")
    refused = unsupported(arch)
    if refused:
        raise InputError(f"architecture {arch.name}: a {grid.kind} tensor grid does not model "
                         f"{', '.join(refused)}; use 1-D tensor parallelism (m1)", "tensor")
    layer = grid_layer(t.b, t.l, arch.e, arch.f, Heads(arch.h, arch.kv_heads, rotary=bool(arch.rotary)), grid,
                       scores=Scores(causal=bool(arch.causal), dropout=arch.attention_dropout),
                       projections=Projections(arch.qkv_bias, arch.bias),
                       ffn=Feedforward(gated=arch.gated, bias=arch.mlp_bias, activation_dropout=arch.activation_dropout),
                       wiring=Wiring(arch.norm, arch.dropouts), run=Run(t.flash, **kw))
    args = (grid, t.b, t.l, arch.e, kw["es"], kw["conventions"])
    first = Block(start.name, start.rows + (relayout(*args, "to_grid"),), start.dims, start.conventions)
    last = Block(end.name, (relayout(*args, "from_grid"),) + end.rows, end.dims, end.conventions)
    one = exact(1)
    return (first, one), (layer, exact(arch.n_layers, "n_layers")), (last, one)


def relayout(grid: Grid, b, l, e, es, conventions, name: str):
    """The all-to-all over the ``G`` devices between ``(b, l/G, e)`` and ``(b/rows, l, e/cols)``
    blocks of ``n = b l e / G`` elements (forward; backward the gradients'): nothing computed
    (no FLOPs of either backward part), the block read and written."""
    n = exact(b, "b") * exact(l, "l") * exact(e, "e") / grid.devices
    cost = make_cost(name, "vector", flops_fwd=0, flops_bwd=0, act_in=n * es, act_out=n * es, act_buffer=0,
                     act_grads=2 * n * es)
    moves = [c for pass_ in ("fwd", "bwd") for c in collective("alltoall", n, es, grid.devices, pass_, conventions)]
    return attach(cost, moves, conventions)
