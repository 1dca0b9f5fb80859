"""The blocks of a whole model, in order, each with how many times it occurs.

A decoder (or encoder) is ``embedding, layers..., head``; its layers come in groups of
identical ones (full and sliding-window attention; dense and mixture-of-experts MLPs).  An encoder-decoder (T5) is
``embedding, encoder layers, encoder_end, decoder_start, decoder layers, head``; the
decoder's start reads the encoder's word table (no weights of its own).  Both stacks use
the training sequence length ``l``.
"""

from __future__ import annotations

from dataclasses import replace

from sympy import Expr, sympify

from symbolic_cost.blocks import Block, embedding_block, head_block, transformer_layer
from symbolic_cost.blocks.context import Context
from symbolic_cost.blocks.graphs import whole_step
from symbolic_cost.blocks.ends import Embeddings, Head, Task, stack_end
from symbolic_cost.blocks.mtp import mtp_rows
from symbolic_cost.blocks.specs import Feedforward, Heads, Projections, Scores
from symbolic_cost.blocks.wiring import Experts, Residual, Run, Wiring
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.families.keys import MAX_LAYERS
from symbolic_cost.models.grid_stack import grid_stack
from symbolic_cost.checks import InputError
from symbolic_cost.ops.matmul import Chunk


READS = ("b", "l", "l_dec", "mask_bytes", "flash", "capacity_factor", "expert_imbalance", "dispatcher", "mtp", "cp",
         "cp_variant", "loss_chunks", "fused_loss", "tp_ends", "cuda_graphs")
"""The ``Training`` fields the blocks depend on: stacks that agree on these (and on the
degrees) are the same, whatever the memory policy, ZeRO stage, schedule or offload."""
_STACKS: dict = {}
_KEPT = 64


def model_stack(arch: Architecture, t, m1, s1, es, conventions, ep=1, etp=1, grid=None,
                replicated=False, kernels="megatron-core") -> tuple[tuple[Block, Expr], ...]:
    """``(block, count)`` for every block of ``arch`` on one device, in model order; the first
    is the embedding, the last the head, every other one is a layer group (or, for T5, the
    encoder's end and the decoder's start).  ``ep`` and ``etp`` are the expert-parallel and
    expert tensor-parallel degrees of the MoE layers (``blocks.moe``; ``replicated``: the tensor
    ranks share their tokens, as in serving without sequence parallelism; ``kernels``: what runs
    around the experts' products, ``blocks.wiring.Experts.kernels``, ``"fused"`` in serving); with a tensor ``grid`` the
    layers run on it and ``m1 = s1`` are its devices (``models.grid_stack``).  The last
    ``_KEPT`` stacks are remembered (a layout search builds the same stack for every ZeRO
    stage, schedule and offload it compares)."""
    key = (arch, *(getattr(t, name, None) for name in READS), m1, s1, es, conventions, ep, etp, grid, replicated,
           kernels)
    try:
        return _STACKS[key]
    except TypeError:                        # an unhashable part: build without remembering
        return _build_stack(arch, t, m1, s1, es, conventions, ep, etp, grid, replicated, kernels)
    except KeyError:
        pass
    if len(_STACKS) >= _KEPT:
        _STACKS.pop(next(iter(_STACKS)))
    stack = _STACKS[key] = _build_stack(arch, t, m1, s1, es, conventions, ep, etp, grid, replicated, kernels)
    return stack


def _build_stack(arch: Architecture, t, m1, s1, es, conventions, ep, etp, grid, replicated=False,
                 kernels="megatron-core"):
    stack = _built_stack(arch, t, m1, s1, es, conventions, ep, etp, grid, replicated, kernels)
    return whole_step(stack) if "full_iteration" in getattr(t, "cuda_graphs", ()) else stack


def _built_stack(arch: Architecture, t, m1, s1, es, conventions, ep, etp, grid, replicated, kernels):
    chunked = [name for name, on in (("loss_chunks", getattr(t, "loss_chunks", 1) != 1),
                                     ("fused_loss", getattr(t, "fused_loss", False))) if on]
    if chunked and not arch.lm_head:
        raise InputError(f"{chunked[0]} runs the LM head and its loss a piece at a time, and {arch.name} has no LM "
                         f"head ({'its ' + arch.task + ' head' if arch.task else 'an encoder alone'}); it would be "
                         f"ignored", chunked[0])
    t = context_shard(t)
    kw = dict(es=es, es_mask=t.mask_bytes, conventions=conventions)
    experts = None if arch.moe is None else Experts(ep, etp, getattr(t, "capacity_factor", None),
                                                    getattr(t, "expert_imbalance", 1), replicated,
                                                    getattr(t, "dispatcher", "alltoall"), kernels)
    vocab = arch.padded_vocab(m1)
    relative = (arch.relative_buckets, arch.h) if arch.score_bias == "relative" else None
    run = Run(es=es, es_mask=t.mask_bytes, conventions=conventions)
    start, end = _ends(arch, t, m1, s1, vocab, run)
    mtp = sympify(arch.mtp_layers) if getattr(t, "mtp", False) else sympify(0)
    ends = getattr(t, "tp_ends", "vocab")
    unmodelled = [what for what, on in (("multi-token-prediction modules", mtp != 0),
                                        ("an encoder-decoder", arch.encoder_decoder), ("experts", arch.moe is not None),
                                        ("latent attention", arch.latent is not None)) if on]
    if ends != "vocab" and unmodelled:
        raise InputError(f"tp_ends {ends!r} (transformers' tp_plan, DeepSpeed's AutoTP) with {unmodelled[0]} is not "
                         f"modelled", "tp_ends")
    if grid is not None:
        if mtp != 0:
            raise InputError(f"{arch.name}'s multi-token-prediction modules on a tensor grid are not modelled "
                             f"(Training(mtp=False) leaves them out)", "mtp")
        return grid_stack(arch, t, grid, start, end, kw)
    if not arch.encoder_decoder:
        if mtp != 0:      # on the last stage, with the head (Megatron-LM)
            options, _ = group_options(arch, t, m1, s1, experts)[-1]
            module = mtp_rows(t.b, t.l, arch.e, vocab, build_layer(options, kw), m1, s1, norm=arch.norm,
                              **kw)
            end = replace(end, rows=end.rows + module * int(mtp))
        return ((start, sympify(1)), *layer_groups(arch, t, m1, s1, kw, experts), (end, sympify(1)))
    (encoder, n_encoder), (decoder, n_decoder) = layer_groups(arch, t, m1, s1, kw, experts)
    l_dec = _decoder_tokens(arch, t)
    closing = stack_end(t.b, t.l, arch.e, m1, s1, norm=arch.norm, dropouts=arch.dropouts, **kw)
    second = embedding_block(t.b, l_dec, arch.e, vocab, m1, s1, run=run, name="decoder_start",
                             embeddings=Embeddings(dropout=_embedding_dropout(arch), shared=True, relative=relative))
    one = sympify(1)
    return ((start, one), (encoder, n_encoder), (closing, one), (second, one), (decoder, n_decoder), (end, one))


def _ends(arch: Architecture, t, m1, s1, vocab, run: Run) -> tuple[Block, Block]:
    """The embedding and the head of ``arch`` (``blocks.ends``), as its fields say, laid over the
    tensor ranks as ``t.tp_ends`` says (``blocks.heads.TP_ENDS``): a whole word table has the
    vocabulary's own rows (``Architecture.padded_vocab(1)``), a head split by vocabulary ``vocab``,
    padded to ``m1``; a whole head, the vocabulary's own."""
    ends = getattr(t, "tp_ends", "vocab")
    whole = arch.padded_vocab(1) if ends in ("whole-table", "whole") else vocab
    relative = (arch.relative_buckets, arch.h) if arch.score_bias == "relative" else None
    tables = Embeddings(arch.positions, arch.token_types, arch.norm if arch.embedding_norm else None,
                        _embedding_dropout(arch), arch.embedding_projection, relative=relative)
    head = Head(final_norm=arch.norm if arch.final_norm else None,
                final_dropout=bool(arch.encoder_decoder and arch.dropouts), projection=arch.embedding_projection,
                loss=bool(arch.lm_head), tied=bool(arch.tied), bias=bool(arch.head_bias),
                softcap=bool(arch.logit_softcap), pooler=bool(arch.pooler), loss_chunks=getattr(t, "loss_chunks", 1),
                fused_loss=getattr(t, "fused_loss", False))
    return (embedding_block(t.b, t.l, arch.e, whole, m1, s1, embeddings=tables, run=run, ends=ends),
            head_block(t.b, _decoder_tokens(arch, t), arch.e, whole if ends == "whole" else vocab, m1, s1, head=head,
                       task=Task(arch.task, arch.num_labels, arch.classifier),
                       residual=Residual(arch.norm, arch.dropouts), run=run, ends=ends))


def context_shard(t):
    """The training one rank of a context-parallel group of ``cp`` runs: its ``l/cp`` tokens of
    each sequence (every block's own ``l``; the attention core sees the whole sequence,
    ``blocks.context``), ``t`` itself without CP."""
    cp = sympify(getattr(t, "cp", 1))
    return t if cp == 1 else replace(t, l=t.l / cp)


def _context(t):
    """The ``blocks.context.Context`` of a training with ``cp != 1``, else ``None``."""
    cp = sympify(getattr(t, "cp", 1))
    return None if cp == 1 else Context(cp, t.cp_variant)


def build_layer(options: dict, kw: dict, part="layer") -> Block:
    """``transformer_layer`` of ``layer_options``' keywords ``options``, with the element sizes
    and conventions ``kw`` (``es``, ``es_mask``, ``conventions``) and the ``part`` it builds."""
    return transformer_layer(**{**options, "wiring": replace(options["wiring"], part=part),
                                "run": replace(options["run"], **kw)})


def layer_groups(arch: Architecture, t, m1, s1, kw, experts=None, part="layer",
                 attended=None) -> list[tuple[Block, Expr]]:
    """The layers as ``(block, count)`` groups (``group_options``), each the whole layer or
    the ``part`` of it ``blocks.transformer_layer`` names; groups whose blocks cost the same
    (a dense-counted window; the MLPs of full and windowed layers) are one.  ``attended``: the
    keys a query reads, when not its own tokens (``layer_options``' ``keys``)."""
    groups = []
    for options, count in group_options(arch, t, m1, s1, experts, attended):
        block = build_layer(options, kw, part)
        same = [i for i, (other, _) in enumerate(groups) if other.rows == block.rows]
        if same:
            groups[same[0]] = (groups[same[0]][0], groups[same[0]][1] + count)
        else:
            groups.append((block, count))
    return groups


def group_options(arch: Architecture, t, m1, s1, experts=None, attended=None) -> list[tuple[dict, Expr]]:
    """``(transformer_layer keywords, count)`` of each kind of layer, in model order: sliding-
    window layers and full ones, dense MLPs (first) and mixtures of experts; a T5's encoder
    and decoder layers.  Windows on some layers and experts on some others, or rotary positions
    on some layers only, are counted per combination from the layers' records
    (``layer_keys``), and refused where the model does not record which window layer is an MoE
    layer.  ``attended``: as in ``layer_groups``."""
    if arch.encoder_decoder:
        decoder = layer_options(arch, t, m1, s1, cross=t.l, l=_decoder_tokens(arch, t), keys=attended)
        return [(layer_options(arch, t, m1, s1, causal=False, keys=attended), sympify(arch.n_layers)),
                (decoder, sympify(arch.decoder_layers))]
    depth = sympify(arch.n_layers)
    windowed = depth if arch.windowed_layers is None else sympify(arch.windowed_layers)
    kinds = ((arch.window, windowed), (None, depth - windowed)) if arch.window is not None else ((None, depth),)
    attentions = [(window, n) for window, n in kinds if n != 0]
    routed = arch.moe.layers(depth) if arch.moe is not None else sympify(0)
    mlps = [(moe, n) for moe, n in ((None, depth - routed), (arch.moe, routed)) if n != 0]
    if (len(attentions) > 1 and len(mlps) > 1) or _some(arch.rope_pattern):
        keys = layer_keys(arch)
        if keys is None:
            raise InputError(f"architecture {arch.name}: its layers differ (windows, experts, rotary positions) "
                             f"and which layer is which is not recorded (which window layer is an MoE layer: "
                             f"window_pattern)", "window_pattern")
        return [(layer_options(arch, t, m1, s1, window=arch.window if windowed_ else None,
                               moe=arch.moe if routed_ else None, experts=experts, rotary=rotates, keys=attended),
                 sympify(keys.count(key))) for key in _ordered(keys) for windowed_, routed_, rotates in [key]]
    rotates = arch.rope_pattern is None or all(arch.rope_pattern)
    return [(layer_options(arch, t, m1, s1, window=window, moe=moe, experts=experts, rotary=rotates, keys=attended),
             m if len(mlps) > 1 else n) for window, n in attentions for moe, m in mlps]


def layer_keys(arch: Architecture) -> list[tuple[bool, bool, bool]] | None:
    """``(windowed, MoE, rotates)`` of each layer in layer order, where the model records them
    (``window_pattern``, ``MoE.is_moe``, ``rope_pattern``); ``None`` for windows on some layers
    without their pattern, an encoder-decoder, a symbolic depth or ``first_dense``, or more
    than ``MAX_LAYERS`` layers (not enumerated)."""
    depth = sympify(arch.n_layers)
    if arch.encoder_decoder or not depth.is_number or depth > MAX_LAYERS:
        return None
    n = int(depth)
    some = (arch.window is not None and arch.windowed_layers is not None
            and sympify(arch.windowed_layers) not in (0, depth))
    if some and arch.window_pattern is None:
        return None
    windows = arch.window_pattern if some else (arch.window is not None and arch.windowed_layers != 0,) * n
    if arch.moe is not None and not sympify(arch.moe.first_dense).is_number:
        return None
    routed = [arch.moe is not None and arch.moe.is_moe(i) for i in range(n)]
    return list(zip(windows, routed, arch.rope_pattern or (True,) * n))


def _some(pattern) -> bool:
    """Whether a per-layer pattern holds both values."""
    return pattern is not None and len(set(pattern)) > 1


def _ordered(keys) -> list[tuple[bool, bool, bool]]:
    """The kinds among ``keys`` in ``group_options``'s order: windowed, dense, rotating first."""
    return sorted(set(keys), key=lambda key: (not key[0], key[1], not key[2]))


def layer_kinds(arch: Architecture) -> tuple[int, ...] | None:
    """The group of each layer in layer order (its index among ``layer_groups``'s), where the
    model records it (``layer_keys``): windowed before full layers, dense before
    mixture-of-experts layers.

    >>> from symbolic_cost.blocks.moe import MoE
    >>> layer_kinds(Architecture("toy", 4, 64, 4, 256, 100, moe=MoE(8, 2, 64, first_dense=1)))
    (0, 1, 1, 1)
    """
    keys = layer_keys(arch)
    if keys is None:
        return None
    order = _ordered(keys)
    return tuple(order.index(key) for key in keys)


def units(arch) -> list[tuple[int, int]] | None:
    """``(group, layer)`` for every unit the stack's middle blocks count, in model order: each
    layer in its group (``models.stack.layer_kinds``); an encoder-decoder's encoder layers,
    its encoder end with the last of them, its decoder start with the first decoder layer,
    then the decoder layers (the four middle blocks of ``models.stack.model_stack``).  ``None``
    where the model does not record which layer is which."""
    kinds = layer_kinds(arch)
    if kinds is not None:
        return [(g, i) for i, g in enumerate(kinds)]
    encoder, decoder = sympify(arch.n_layers), sympify(arch.decoder_layers)
    if not (arch.encoder_decoder and encoder.is_number and decoder.is_number):
        return None
    n, m = int(encoder), int(decoder)
    return [(0, i) for i in range(n)] + [(1, n - 1), (2, n)] + [(3, n + j) for j in range(m)]


def _decoder_tokens(arch: Architecture, t):
    """Tokens per sequence through the decoder: ``t.l_dec`` for an encoder-decoder (default
    ``l``); a decoder-only model is its decoder, over ``l``."""
    l_dec = getattr(t, "l_dec", None)
    if l_dec is not None and not arch.encoder_decoder:
        raise InputError(f"l_dec is the decoder length of an encoder-decoder, and {arch.name} is not one "
                         f"(its sequence length is l)", "l_dec")
    return t.l if l_dec is None else l_dec


def layer_options(arch: Architecture, t, m1, s1, *, causal=None, cross=None, window=None, moe=None,
                  experts=None, l=None, rotary=True, keys=None) -> dict:
    """The keywords of ``transformer_layer`` for one layer of ``arch`` over ``l`` tokens (default
    ``t.l``): ``moe``, an MoE layer placed as ``experts`` says (a ``blocks.wiring.Experts``);
    ``rotary``, it rotates (when the model does); ``cross``, the encoder tokens its cross-attention reads;
    ``keys``, the keys its queries read (decoding over a cache; default its own tokens)."""
    qk_norm = None if arch.qk_norm == "l2" and not rotary else arch.qk_norm     # Llama 4: rotating layers only
    heads = Heads(arch.h, arch.kv_heads, arch.head_dim, arch.v_head_dim, qk_norm=qk_norm,
                  rotary=bool(arch.rotary and rotary), rotary_dim=arch.rotary_dim, latent=arch.latent)
    scores = Scores(causal=bool(arch.causal if causal is None else causal),
                    window=Chunk(window) if window is not None and arch.chunked else window, bias=arch.score_bias,
                    softcap=bool(arch.softcap), sinks=bool(arch.sinks), dropout=arch.attention_dropout, keys=keys)
    ffn = Feedforward(gated=arch.gated, bias=arch.mlp_bias, activation_dropout=arch.activation_dropout, moe=moe,
                      experts=experts if moe is not None else None)
    return dict(b=t.b, l=t.l if l is None else l, e=arch.e, f=arch.f, heads=heads, m1=m1, s1=s1, scores=scores,
                projections=Projections(arch.qkv_bias, arch.bias, clip=bool(arch.clip_qkv)), ffn=ffn,
                wiring=Wiring(arch.norm, arch.dropouts, arch.norms, arch.parallel, cross),
                run=Run(t.flash, _context(t), split_inputs=getattr(t, "tp_ends", "vocab") != "vocab",
                        graphs=getattr(t, "cuda_graphs", ())))


def _embedding_dropout(arch: Architecture) -> bool:
    return bool(arch.dropouts if arch.embedding_dropout is None else arch.embedding_dropout)
