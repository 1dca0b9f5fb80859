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
* ``full_iteration`` (``--cuda-graph-impl full_iteration``): every row of the step, the embedding
  and the head too, one graph (``whole_step``).

A graph can only replay fixed shapes, which is why ``moe`` needs a capacity factor.
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.checks import InputError, listed_once, shown

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
        raise InputError(f"cuda_graphs must be a tuple of scopes ({', '.join(SCOPES)}), got {shown(scopes)}",
                         "cuda_graphs")
    scopes = tuple(scopes)
    for scope in scopes:
        if scope not in SCOPES:
            raise InputError(f"cuda_graphs scope must be one of {', '.join(SCOPES)}, got {shown(scope)}",
                             "cuda_graphs")
    listed_once(scopes, "cuda_graphs", "named", "name each scope once")     # each repeat once, not the list
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


def check_recompute(scopes: tuple, recompute, names=("cuda_graphs", "recompute='full'"), modules=(),
                    impl=None) -> None:
    """Refuse per-layer graphs (any scope but ``full_iteration``) beside full recomputation, as
    Megatron-Core's ``TransformerConfig`` asserts ("full recompute is only supported with full
    iteration CUDA graph"): a layer recomputed whole in the backward is not replayed from its
    graph.  Where the implementation ``impl`` is known (the readers), also Transformer Engine's
    router graph beside the recomputed MoE module (``modules``, selective): a recomputed module
    must lie inside a graph or outside it, not around one ("moe recompute is not supported with
    moe_router CUDA graph").  ``names``: the graphs' and the recomputation's settings as the
    caller's input says them.

    >>> check_recompute(("full_iteration",), "full"), check_recompute(("attn",), "selective")
    (None, None)
    >>> check_recompute(("attn",), "full")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: cuda_graphs (capturing attn) with recompute='full': Megatron-Core recomputes whole layers only under the whole step's graph (full_iteration: 'full recompute is only supported with full iteration CUDA graph')
    """
    if recompute == "full" and scopes and tuple(scopes) != ("full_iteration",):
        raise InputError(f"{names[0]} (capturing {' '.join(scopes)}) with {names[1]}: Megatron-Core recomputes "
                         f"whole layers only under the whole step's graph (full_iteration: 'full recompute is only "
                         f"supported with full iteration CUDA graph')", names[0])
    if impl == "transformer_engine" and "moe_router" in scopes and "moe" in (modules or ()):
        raise InputError(f"{names[0]} transformer_engine capturing moe_router, with the MoE module recomputed "
                         f"(recompute modules: moe): the recomputed module would hold the router's graph; "
                         f"Megatron-Core refuses it ('moe recompute is not supported with moe_router CUDA graph')",
                         names[0])


def check_dropout(scopes: tuple, units, attention: bool, hidden: bool, name: str = "cuda_graphs") -> None:
    """Refuse a graph that holds a selectively recomputed module drawing dropout's random numbers
    (``units``: the modules recomputed, ``Recompute.units``; ``attention``, ``hidden``: the model's
    attention and residual dropouts), as Megatron-Core's ``TransformerConfig`` asserts ("attention
    dropout is not supported with graphed attention recomputation", "hidden dropout is not
    supported with graphed MLP/MoE recomputation"): ``core_attn`` under an ``attn`` graph, ``mlp``
    or ``moe`` under theirs, or any of them under the whole layer's or the whole step's graph.

    >>> check_dropout(("attn",), {"core_attn"}, False, True), check_dropout(("mlp",), {"core_attn"}, True, True)
    (None, None)
    >>> check_dropout(("attn",), {"core_attn"}, True, False)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: cuda_graphs attn with the attention core recomputed (core_attn) and attention dropout: a graph holds no recomputation's random numbers (Megatron-Core: 'attention dropout is not supported with graphed attention recomputation')
    """
    whole = "full_iteration" in scopes or tuple(scopes) == WHOLE_LAYER
    held = [(unit, scope) for unit, scope, on in (("core_attn", "attn", attention), ("mlp", "mlp", hidden),
                                                  ("moe", "moe", hidden))
            if on and unit in units and (whole or scope in scopes)]
    if held:
        unit, scope = held[0]
        what = "attention" if unit == "core_attn" else "hidden"
        raise InputError(f"{name} {' '.join(scopes)} with the {'attention core' if what == 'attention' else unit} "
                         f"recomputed ({unit}) and {what} dropout: a graph holds no recomputation's random numbers "
                         f"(Megatron-Core: '{what} dropout is not supported with graphed "
                         f"{'attention' if what == 'attention' else 'MLP/MoE'} recomputation')", name)


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


def whole_step(stack) -> tuple:
    """``stack`` (``(block, count)`` in model order, ``models.stack.model_stack``'s) as one graph of
    the whole step (``full_iteration``: Megatron-LM's ``FullCudaGraphWrapper`` captures the forward
    and backward of every micro-batch, the optimizer outside): every row captured, the embedding's
    first row paying the replay.  Each layer paid a replay of its own before, and the embedding,
    the head and the loss launched their kernels from the host, as without graphs.  The rows count
    launches a pass, so the replay is paid in each pass of each micro-batch (one a step in
    Megatron-LM: a launch or two a micro-batch more; a pipeline stage without the embedding pays
    none: a launch or two fewer; an approximation).

    >>> from symbolic_cost.blocks import Block
    >>> from symbolic_cost.ops import gelu
    >>> stack = [(Block(n, tuple(gelu(1, 2, 3, name=f"{n}{i}") for i in range(2)), {}), 1) for n in "ab"]
    >>> [r.graph for block, _ in whole_step(stack) for r in block]
    ['replay', 'captured', 'captured', 'captured']
    """
    return tuple((replace(block, rows=tuple(replace(row, graph="replay" if (i, j) == (0, 0) else "captured")
                                            for j, row in enumerate(block.rows))), count)
                 for i, (block, count) in enumerate(stack))


IMPLEMENTATIONS = ("none", "transformer_engine", "local", "full_iteration")
"""Megatron-Core's ``--cuda-graph-impl`` values: none, Transformer Engine's per-layer graphs,
Megatron-Core's own per-layer graphs, one graph of the whole step."""

WHOLE_LAYER = ("attn", "mlp", "moe")
"""What a per-layer graph without a scope captures: the whole layer (Megatron-Core's
``cuda_graph_scope`` empty, or ``"full"`` in Megatron-Bridge's recipes)."""


def graph_scopes(impl, scope, names=("cuda_graph_impl", "cuda_graph_scope")) -> tuple[str, ...]:
    """``Execution.cuda_graphs`` for Megatron-Core's ``cuda_graph_impl`` and ``cuda_graph_scope``
    (``cuda_graph_modules`` since Megatron-Core 0.18; a list, a comma-separated name, or ``None``),
    as ``TransformerConfig.__post_init__`` reads them: nothing without an implementation (``None`` or
    ``"none"``), the whole step for ``full_iteration`` (whose scope must be empty), else the scopes
    given, or the whole layer where none is (``"full"`` too).  ``local`` captures the router and the
    dispatcher's preprocessing together (it does not tell them apart); ``full_iteration`` as a scope
    is the older spelling of the whole step, Megatron-Core's own graph (refused beside Transformer
    Engine's); ``mamba`` captures Mamba layers, which no model the library counts has (a scope of
    ``mamba`` alone captures nothing here, as ``_layer_is_graphable`` graphs no other layer; it is
    no empty scope, the whole layer); a scope named twice is the same scope.  ``names``: the two
    settings as the reader's file names them, for its refusals.

    >>> graph_scopes("transformer_engine", ["attn", "moe_router"]), graph_scopes("none", "full")
    (('attn', 'moe_router'), ())
    >>> graph_scopes("local", "full"), graph_scopes("local", ["moe_router"])
    (('attn', 'mlp', 'moe'), ('moe_router', 'moe_preprocess'))
    """
    impl_name, scope_name = names
    if impl not in IMPLEMENTATIONS + (None,):
        raise InputError(f"{impl_name} must be one of {', '.join(IMPLEMENTATIONS)}, got {shown(impl)}", impl_name)
    scopes = _scope_names(scope, scope_name)
    unknown = [s for s in scopes if s not in SCOPES + ("full_iteration_inference", "mamba")]
    if unknown:
        raise InputError(f"{scope_name} {shown(unknown[0])}: Megatron-Core's scopes are {', '.join(SCOPES)} (and mamba, "
                         f"full, full_iteration_inference)", scope_name)
    if impl in (None, "none"):
        return ()
    if "full_iteration_inference" in scopes:        # without an implementation it changes nothing (above)
        raise InputError(f"{scope_name} full_iteration_inference: an inference engine's graph, which the library "
                         f"does not time beside a training step's", scope_name)
    if impl == "full_iteration":
        if scopes:
            raise InputError(f"{scope_name} {' '.join(scopes)} beside {impl_name} full_iteration: the whole step is "
                             f"one graph, and Megatron-Core asks for no scope with it", scope_name)
        return ("full_iteration",)
    given, scopes = scopes, [s for s in scopes if s != "mamba"]
    if given and not scopes:                        # Mamba layers only: none in the models counted
        return ()
    if "full_iteration" in scopes and impl == "transformer_engine":
        raise InputError(f"{scope_name} full_iteration with {impl_name} transformer_engine: the whole step's graph is "
                         f"Megatron-Core's own (local, or full_iteration), as Megatron-Core asserts", scope_name)
    if impl == "local" and {"moe_router", "moe_preprocess"} & set(scopes):
        scopes += [s for s in ("moe_router", "moe_preprocess") if s not in scopes]
    try:
        return check_scopes(tuple(scopes)) if scopes else WHOLE_LAYER
    except InputError as error:
        raise InputError(f"{scope_name}: {error.args[0]}", scope_name) from None


def _scope_names(scope, name: str) -> list:
    """``scope`` as a list of names: split at commas where it is one text (as Megatron-Core splits
    it), each once, ``"full"`` (alone) as none."""
    if scope is not None and not isinstance(scope, (str, list, tuple)):
        raise InputError(f"{name} must be a list of scopes or their names, got {shown(scope)}", name)
    given = (scope.split(",") if scope else []) if isinstance(scope, str) else list(scope or [])
    if not all(isinstance(s, str) for s in given):
        raise InputError(f"{name} must name its scopes, got {shown(scope)}", name)
    given = list(dict.fromkeys(s.strip() for s in given))
    if "full" in given:
        if given != ["full"]:
            raise InputError(f"{name}: 'full' (the whole layer) cannot be given with other scopes (Megatron-Core's "
                             f"rule)", name)
        return []
    return given


def for_model(scopes: tuple, arch, capacity, name: str, padded: bool = True, dispatcher: str | None = None) -> tuple:
    """``scopes`` (``graph_scopes``'s) for the model ``arch`` with the experts' ``capacity`` factor
    (``None``: dropless), refused where Megatron-Core's ``TransformerConfig`` refuses them for it
    (an MoE scope without experts; ``mlp`` where every layer is an MoE layer, having no dense MLP;
    ``moe`` named with a capacity factor whose inputs are not ``padded`` to it, "moe cuda graph is
    only supported with drop-padding MoE": the library's own capacity factor pads, a reader's file
    may not; ``moe_preprocess`` there under Megatron-Core's ``dispatcher`` ``alltoall``, whose
    preprocessing then copies to the host: "moe_preprocess cuda graph is not supported when there
    are DtoH copies"), or where a graph would replay an MoE module of dropless routing, whose shapes
    change every step (``moe``, or the whole layer of an MoE model: ``blocks.moe``'s rule).
    ``name``: the setting the reader reads them from."""
    if not scopes or "full_iteration" in scopes:
        return scopes
    moe, whole = arch.moe, scopes == WHOLE_LAYER        # the whole layer: its MLP or its MoE module, as it has
    if moe is None and {"moe", "moe_router"} & set(scopes) and not whole:
        raise InputError(f"{name} {' '.join(s for s in scopes if s.startswith('moe'))}: the model has no experts "
                         f"(Megatron-Core: 'moe cuda graph is only supported for MoE')", name)
    if moe is not None and "mlp" in scopes and not whole and all(moe.is_moe(i) for i in range(arch.n_layers)):
        raise InputError(f"{name} mlp: every layer of the model is an MoE layer, with no dense MLP to capture "
                         f"(Megatron-Core refuses it)", name)
    if moe is not None and "moe" in scopes and not whole and capacity is not None and not padded:
        raise InputError(f"{name} moe with a capacity factor whose expert inputs are not padded to it: tokens "
                         f"dropped, not padded, change the shapes; Megatron-Core captures an MoE module only with "
                         f"drop-and-pad ('moe cuda graph is only supported with drop-padding MoE')", name)
    if moe is not None and "moe_preprocess" in scopes and capacity is not None and not padded \
            and dispatcher == "alltoall":
        raise InputError(f"{name} moe_preprocess with the alltoall dispatcher and a capacity factor whose inputs are "
                         f"not padded to it: its preprocessing copies to the host, which a graph cannot hold "
                         f"(Megatron-Core: 'moe_preprocess cuda graph is not supported when there are DtoH copies')",
                         name)
    if moe is not None:
        check_fixed_shapes(scopes, capacity, name, " (no scope: the whole layer, its MoE module too)" if whole else "")
    return scopes


def check_fixed_shapes(scopes, capacity, name: str = "cuda_graphs", said: str = "") -> None:
    """Refuse a graph of a whole MoE module (``moe``) over dropless routing (``capacity`` ``None``):
    a graph replays fixed shapes, and dropless routing sends each expert another number of tokens
    every step.  ``name``: the setting the scopes came from; ``said``: how they say ``moe``.

    >>> check_fixed_shapes(("moe",), 1.25), check_fixed_shapes(("attn", "moe_router"), None)
    (None, None)
    """
    if "moe" in scopes and capacity is None:
        raise InputError(f"{name}{said} 'moe': a graph replays fixed shapes, and dropless routing sends each expert "
                         f"a different number of tokens every step; give a capacity factor, or capture 'attn' and "
                         f"'moe_router'", name)


def switched_implementation(enable: bool, external: bool, impl: str, names: tuple, framework: str) -> str:
    """The ``cuda_graph_impl`` that Megatron-Core's deprecated switches stand for: ``enable_cuda_graph``
    is ``local``, ``external_cuda_graph`` ``transformer_engine`` (``TransformerConfig.__post_init__``);
    ``impl`` where neither is on.  Both on, or one beside an implementation other than ``none``, is
    refused as ``framework`` refuses it.  ``names``: the two switches' and the implementation's
    settings as the caller's input names them.

    >>> switched_implementation(True, False, "none", ("e", "x", "i"), "Megatron-LM")
    'local'
    """
    enable_name, external_name, impl_name = names
    if enable and external:
        raise InputError(f"{enable_name} and {external_name} together ({framework} refuses them: one "
                         f"implementation)", external_name)
    if not (enable or external):
        return impl
    switch = enable_name if enable else external_name
    if impl != "none":
        raise InputError(f"{switch} with {impl_name} {impl!r}: the switch is the deprecated spelling of an "
                         f"implementation, and {framework} refuses both", switch)
    return "local" if enable else "transformer_engine"
