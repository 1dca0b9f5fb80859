"""CUDA graphs: the parts of a layer whose kernels replay from a captured graph.

A kernel launched from the host costs the step the host's time to issue it (the calibrated
model's ``Efficiency.kernel`` a launch, ``timing.efficiency.launches``).  Kernels captured in a
CUDA graph are issued by one replay of the graph: a run of captured rows pays one launch, on its
first row (``Cost.graph = "replay"``), the rest none (``"captured"``).  Only what is launched
changes: FLOPs, bytes and collectives stay the rows' own.

The scopes are Megatron-Core's ``--cuda-graph-scope`` values for its Transformer Engine
graphs (``--cuda-graph-impl transformer_engine``; ``megatron/core/transformer/enums.py``'s
``CudaGraphScope``), which capture each layer's forward and backward:

* ``attn``: the attention module with its input norm and residual (``_forward_attention``);
* ``mlp``: a dense layer's MLP with its norm and residual (not an MoE layer's);
* ``moe``: the whole MoE module (static shapes only: a capacity factor, never dropless);
* ``moe_router``: an MoE layer's norm and router, up to the top-k weights (Megatron-Core's
  partial capture, ``MoECudaGraphPartialCaptureSignal`` at ``route``);
* ``moe_preprocess``: with ``moe_router``, also the dispatcher's preprocessing, which for the
  all-to-all dispatcher permutes the tokens (the ``dispatch`` row's kernel; the exchange is not
  captured); the flex dispatchers' permute runs in their dispatch kernel, outside the graph;
* ``full_iteration`` (``--cuda-graph-impl full_iteration``): every row of every layer.

A graph can only replay fixed shapes, which is why ``moe`` needs a capacity factor.
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.checks import InputError

SCOPES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "full_iteration")
"""The capture scopes ``Execution.cuda_graphs`` takes (the module docstring)."""


def check_scopes(scopes) -> tuple[str, ...]:
    """``scopes`` as a tuple, refused where Megatron-Core refuses it or it says one thing twice.

    >>> check_scopes(["attn", "moe_router"])
    ('attn', 'moe_router')
    >>> check_scopes(("moe_preprocess",))
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: cuda_graphs 'moe_preprocess' extends the router's graph: give 'moe_router' with it
    """
    if isinstance(scopes, str) or not isinstance(scopes, (tuple, list)):
        raise InputError(f"cuda_graphs must be a tuple of scopes ({', '.join(SCOPES)}), got {scopes!r}",
                         "cuda_graphs")
    scopes = tuple(scopes)
    for scope in scopes:
        if scope not in SCOPES:
            raise InputError(f"cuda_graphs scope must be one of {', '.join(SCOPES)}, got {scope!r}", "cuda_graphs")
    if len(set(scopes)) != len(scopes):
        raise InputError(f"cuda_graphs names a scope twice: {scopes!r}", "cuda_graphs")
    if "full_iteration" in scopes and len(scopes) > 1:
        raise InputError("cuda_graphs 'full_iteration' captures the whole step: no other scope beside it",
                         "cuda_graphs")
    if "moe_preprocess" in scopes and "moe_router" not in scopes:
        raise InputError("cuda_graphs 'moe_preprocess' extends the router's graph: give 'moe_router' with it",
                         "cuda_graphs")
    if "moe" in scopes and "moe_router" in scopes:     # WHOLE_LAYER's "moe" is the only MoE scope there
        raise InputError("cuda_graphs 'moe' captures the whole MoE module, 'moe_router' a part of it: give one",
                         "cuda_graphs")
    return scopes


def captured(rows, flags) -> tuple:
    """``rows`` with those whose flag is true marked as replayed from a CUDA graph: each run of
    consecutive captured rows is one graph, its first row paying the replay.

    >>> from symbolic_cost.ops import gelu
    >>> rows = [gelu(1, 2, 3, name=n) for n in "abcd"]
    >>> [r.graph for r in captured(rows, [True, True, False, True])]
    ['replay', 'captured', None, 'replay']
    """
    marked, previous = [], False
    for row, flag in zip(rows, flags, strict=True):
        marked.append(replace(row, graph=("captured" if previous else "replay")) if flag else row)
        previous = flag
    return tuple(marked)


IMPLEMENTATIONS = ("none", "transformer_engine", "local", "full_iteration")
"""Megatron-Core's ``--cuda-graph-impl`` values: none, Transformer Engine's per-layer graphs,
Megatron-Core's own per-layer graphs, one graph of the whole step."""

WHOLE_LAYER = ("attn", "mlp", "moe")
"""What a per-layer graph without a scope captures: the whole layer (Megatron-Core's
``cuda_graph_scope`` empty, or ``"full"`` in Megatron-Bridge's recipes)."""


def graph_scopes(impl, scope) -> tuple[str, ...]:
    """``Execution.cuda_graphs`` for Megatron-Core's ``cuda_graph_impl`` and ``cuda_graph_scope``
    (a list, a name, or ``None``): nothing without an implementation (``None`` or ``"none"``), the
    whole step for ``full_iteration``, else the scopes given, or the whole layer where none is.

    >>> graph_scopes("transformer_engine", ["attn", "moe_router"]), graph_scopes("none", "full")
    (('attn', 'moe_router'), ())
    >>> graph_scopes("local", "full")
    ('attn', 'mlp', 'moe')
    """
    if impl not in IMPLEMENTATIONS + (None,):
        raise InputError(f"cuda_graph_impl must be one of {', '.join(IMPLEMENTATIONS)}, got {impl!r}",
                         "cuda_graph_impl")
    if impl in (None, "none"):
        return ()
    if impl == "full_iteration":
        return ("full_iteration",)
    scopes = [scope] if isinstance(scope, str) else list(scope or [])
    return check_scopes(tuple(scopes)) if scopes and scopes != ["full"] else WHOLE_LAYER
