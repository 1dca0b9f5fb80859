"""Pipeline splits as Megatron-Core makes them: which transformer layers each model chunk of each
pipeline rank builds (``chunk_layers``: even, first/last stage sizes, the embedding and the loss
counted as layers, virtual stages; ``layout_layers``: ``--pipeline-model-parallel-layout``); and
as a serving engine splits layers that do not divide evenly (``engine_stages``).
``models.placement.placement`` counts each rank's layers of each kind from them.
"""

from __future__ import annotations

import re

from symbolic_cost.checks import InputError, count, positive_dims
from symbolic_cost.parallel.pipeline import stage_layers


def chunk_layers(depth: int, p: int, v: int = 1, first=None, last=None, embedding=False, loss=False) -> list:
    """The transformer layers (0-based global indices) of model chunk ``c`` on pipeline rank ``r``,
    ``out[r][c]`` a ``range``, as Megatron-Core places them (numbers only; its
    ``transformer_block.get_num_layers_to_build`` and ``transformer_layer.get_transformer_layer_offset``):

    * a rank holds ``stage_layers`` slots (``first``/``last``: Megatron's
      ``--decoder-first/last-pipeline-num-layers``, the other layers even over the other ranks), or,
      with ``embedding``/``loss`` (``--account-for-embedding/loss-in-pipeline-split``) counted as
      layers, ``(n_layers + embedding + loss)/p`` slots each;
    * a rank's slots split evenly into its ``v`` chunks (Megatron asserts ``v`` divides them);
    * chunk ``c`` of rank ``r`` starts after ``c`` whole rounds (a round: one chunk of every rank)
      and the chunks of ranks ``0 .. r-1`` in its round;
    * the embedding takes the first slot (rank 0's chunk 0 builds one layer fewer), the loss the
      last (rank ``p - 1``'s chunk ``v - 1``).

    >>> [[list(c) for c in rank] for rank in chunk_layers(6, 2, 2, embedding=True, loss=True)]
    [[[0], [3, 4]], [[1, 2], [5]]]
    """
    # plain ints, or SymPy Integers (a Training's degrees)
    depth, p, v = (count(int(x) if getattr(x, "is_Integer", False) else x, name)
                   for x, name in ((depth, "depth"), (p, "p"), (v, "v")))
    if (embedding or loss) and (first, last) != (None, None):
        raise InputError("embedding_in_split and loss_in_split cannot go with first_stage_layers or "
                         "last_stage_layers (Megatron-Core asserts: no embedding or loss slot with uneven stages)",
                         "embedding_in_split" if embedding else "loss_in_split")
    if first is not None or last is not None:
        a, m, z = (int(x) for x in stage_layers(depth, p, first, last))
        sizes = [a] + [m] * (p - 2) + [z] if p > 1 else [depth]
    else:
        slots = depth + int(bool(embedding)) + int(bool(loss))
        if slots % p:
            counted = ("one slot each for the embedding and the loss counted as layers" if embedding and loss else
                       f"one slot for the {'embedding' if embedding else 'loss'} counted as a layer")
            raise InputError(f"p={p} must divide n_layers={depth}" + (f" plus {counted} ({slots} slots)" if embedding
                             or loss else " (Megatron splits them evenly; first_stage_layers and last_stage_layers "
                             "make an uneven split)"), "p")
        sizes = [slots // p] * p
    for r, size in enumerate(sizes):
        if size % v:
            raise InputError(f"virtual_stages={v} must divide the {size} layers of pipeline rank {r} (Megatron "
                             "asserts each rank's layers split evenly into its model chunks)", "virtual_stages")
    chunk = [size // v for size in sizes]
    rounds, skip = sum(chunk), int(bool(embedding))          # layer index = slot - the embedding's slot
    out = []
    for r in range(p):
        starts = [c * rounds + sum(chunk[:r]) for c in range(v)]
        out.append([range(max(s - skip, 0), min(s + chunk[r], depth + skip) - skip) for s in starts])
    return out


def engine_stages(depth: int, p: int) -> list[int]:
    """The layers each of ``p`` pipeline stages of a serving engine holds, as vLLM splits them
    (``vllm/distributed/utils.py``, ``get_pp_indices``): ``depth // p`` each, and the remainder one
    a stage from the last but one backwards (the last stage keeps the head, the first the word
    table, which the middle stages take a remaining layer before).

    >>> engine_stages(61, 4), engine_stages(27, 2), engine_stages(26, 4), engine_stages(80, 4)
    ([15, 15, 16, 15], [14, 13], [6, 7, 7, 6], [20, 20, 20, 20])
    """
    depth, p = count(depth, "depth"), count(p, "p")
    if p > depth:
        raise InputError(f"p must be at most n_layers (got p={p}, n_layers={depth}): a stage would hold no layer", "p")
    sizes = [depth // p] * p
    for i in range(2, depth % p + 2):
        sizes[-i] += 1
    return sizes


def uneven_stages(depth, p) -> list[int] | None:
    """``engine_stages`` where ``p`` and ``depth`` are numbers and ``p`` does not divide ``depth``;
    ``None`` where the stages are even, or a symbol leaves it open (the even split's ``1/p``).

    >>> uneven_stages(27, 2), uneven_stages(28, 2)
    ([14, 13], None)
    """
    depth, p = positive_dims(depth=depth, p=p).values()
    known = depth.is_number and p.is_number
    return engine_stages(int(depth), int(p)) if known and int(depth) % int(p) else None


def engine_layout(depth: int, p: int) -> str:
    """``engine_stages`` as a ``--pipeline-model-parallel-layout`` (``layout_layers``): the word
    table on the first stage, the head on the last.

    >>> engine_layout(5, 2)
    'Ettt|ttL'
    """
    return "|".join(("E" if i == 0 else "") + "t" * n + ("L" if i == p - 1 else "")
                    for i, n in enumerate(engine_stages(depth, p)))


def layout_stages(layout: str) -> list[str]:
    """The stages of Megatron-Core's ``--pipeline-model-parallel-layout`` string, in order (its
    ``PipelineParallelLayerLayout.parse_str_to_list``): commas are cosmetic, ``(group)*n`` and then
    ``x*n`` repeat, ``|`` ends a stage; ``E`` the embedding, ``t`` a transformer layer, ``m`` a
    multi-token-prediction module, ``L`` the loss.

    >>> layout_stages("Et*3|(tt|)*2,L")
    ['Ettt', 'tt', 'tt', 'L']
    """
    if not isinstance(layout, str):
        raise InputError(f"pipeline_layout must be a string, got {layout!r}", "pipeline_layout")
    text = _expanded(r"\(([^)]+)\)\*(\d+)", layout.replace(",", ""), layout)
    text = _expanded(r"(.)\*(\d+)", text, layout)
    unknown = sorted(set(text) - set("EtmL|"))
    if unknown:
        raise InputError(f"pipeline_layout {layout!r}: {''.join(unknown)!r} is not a layer (E, t, m, L, "
                         "stages split by |, (group)*n and x*n repeats)", "pipeline_layout")
    return text.split("|")


def check_layout_ends(stages: list[str]) -> None:
    """Refuse the stages of a layout (``layout_stages``) that Megatron-Core's
    ``PipelineParallelLayerLayout.validate_layer_layout`` refuses: the embedding (``E``) other than
    once and first of the first stage, the loss (``L``) other than once and last of the last stage
    (the stages flattened in their order), a transformer layer (``t``) after a
    multi-token-prediction module (``m``).

    >>> check_layout_ends(["Ett", "ttL"])
    >>> check_layout_ends(["Ett", "tt"])
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: pipeline_layout must end with the loss (L), once, last of the last stage (Megatron-Core asserts it), got 0 L, the last stage 'tt'
    """
    flat = "".join(stages)
    for what, char, ok, where, stage in (
            ("begin with the embedding (E)", "E", flat.startswith("E"), "first", stages[0]),
            ("end with the loss (L)", "L", flat.endswith("L"), "last", stages[-1])):
        if not ok or flat.count(char) != 1:
            raise InputError(f"pipeline_layout must {what}, once, {where} of the {where} stage (Megatron-Core asserts "
                             f"it), got {flat.count(char)} {char}, the {where} stage {stage!r}", "pipeline_layout")
    if "m" in flat and "t" in flat[flat.index("m"):]:
        raise InputError("pipeline_layout places a transformer layer (t) after a multi-token-prediction module (m); "
                         "Megatron-Core asserts the decoder's layers come before them", "pipeline_layout")


LAYOUT_LENGTH = 1_000_000
"""Most characters a pipeline layout may expand to: a model's layers and stages are thousands at
most, and ``(t|)*1000000000`` would take gigabytes before any check could see it."""


def _expanded(pattern: str, text: str, layout: str) -> str:
    """``text`` with each ``pattern`` match (a group and a count) written out that many times,
    refused when the result would pass ``LAYOUT_LENGTH`` characters: the length is summed before
    anything is written."""
    matches = list(re.finditer(pattern, text))
    length = len(text) + sum(len(m.group(1)) * int(m.group(2)) - len(m.group(0)) for m in matches)
    if length > LAYOUT_LENGTH:
        raise InputError(f"pipeline_layout {layout[:60]!r} expands to {length:,} characters (at most "
                         f"{LAYOUT_LENGTH:,}); a layout names each stage of the model", "pipeline_layout")
    return re.sub(pattern, lambda m: m.group(1) * int(m.group(2)), text)


def layout_layers(layout: str, depth: int, p: int) -> list:
    """``out[r][c]``: the transformer layers of model chunk ``c`` of rank ``r`` under a layout
    (``layout_stages``): stage ``s`` is chunk ``s // p`` of rank ``s mod p`` (Megatron-Core's
    ``layout[vpp_rank * p + pp_rank]``), its ``t``s the next layers in order.  Refused as
    Megatron refuses: a stage count ``p`` does not divide, ``t``s other than ``n_layers``, the
    embedding outside the first stage or the loss outside the last; ``m`` (multi-token-prediction
    modules) is taken on the last stage, where the library keeps them with the head
    (Megatron-Bridge's DeepSeek-V3 layouts end ``...tmL``), and refused before it.

    >>> [[list(c) for c in rank] for rank in layout_layers("Et|tt|t,L", 4, 3)]
    [[[0]], [[1, 2]], [[3]]]
    >>> layout_layers("Et|tt|tmL", 4, 3) == layout_layers("Et|tt|tL", 4, 3)
    True
    """
    stages, depth, p = layout_stages(layout), count(depth, "n_layers"), count(p, "p")
    if len(stages) % p:
        raise InputError(f"pipeline_layout has {len(stages)} stages, not a multiple of p={p}", "pipeline_layout")
    if sum(stage.count("t") for stage in stages) != depth:
        raise InputError(f"pipeline_layout places {sum(s.count('t') for s in stages)} transformer layers, "
                         f"the model has n_layers={depth}", "pipeline_layout")
    check_layout_ends(stages)
    if "m" in "".join(stages[:-1]):
        raise InputError("pipeline_layout: multi-token-prediction modules (m) before the last stage are not "
                         "modelled (the library keeps them on the last stage, with the head)", "pipeline_layout")
    starts = [sum(stage.count("t") for stage in stages[:s]) for s in range(len(stages))]
    v = len(stages) // p
    return [[range(starts[c * p + r], starts[c * p + r] + stages[c * p + r].count("t")) for c in range(v)]
            for r in range(p)]
