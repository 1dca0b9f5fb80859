"""DeepSeek-V3's multi-token prediction (MTP) modules, as Megatron-LM trains them
(``--mtp-num-layers``; DeepSeek-V3 report, Sec. 2.2).

Module ``k`` predicts the token ``k + 1`` places ahead.  It reads the previous module's (or
the main model's) last hidden states ``h`` and the embeddings of the tokens ``k`` places
ahead (the main word table, no weights of its own), normalises both, projects their
concatenation back to the width and runs one more transformer layer, then the shared LM
head and its own loss::

    (b, l, e) h ----------- RMSNorm (hnorm) -----\\
                                                 cat (b, l, 2e) -- eh_proj (2e -> e) -- layer -- norm -- head -- loss
    tokens + k -- word table (shared) -- RMSNorm (enorm) --/

Parameters of a module: ``enorm``, ``hnorm`` and the final norm (``e`` each), ``eh_proj``
(``2 e x e``, no bias) and the layer's; the word table and the LM head are the main
model's (their gradients add into its).  Every module runs over all ``l`` positions
(Megatron-LM rolls the tokens and masks the loss of the last ``k``).

Under tensor parallelism ``eh_proj`` is column-parallel: its input is gathered from the
sequence shards (and its input gradient reduce-scattered back), each rank computes
``e/m1`` of the output, which is allgathered over the ``m1`` ranks and re-sharded by
sequence for the layer (whose output gradient is allgathered over the shards in backward).
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.ends import Embeddings, Head, embedding_block, head_block
from symbolic_cost.blocks.layout import Layout
from symbolic_cost.blocks.wiring import Residual, Run
from symbolic_cost.ops import linear
from symbolic_cost.ops.norm import NORMS


def mtp_rows(b, l, e, vocab, layer: Block, m1=1, s1=1, *, norm="rms", es=2, es_mask=1,
             conventions=conv.DEFAULT) -> tuple:
    """The rows of one MTP module (module docstring): ``mtp_word_embeddings`` (a lookup in the
    shared table), ``mtp_enorm``, ``mtp_hnorm``, ``mtp_eh_proj``, the rows of ``layer`` (one
    transformer layer of the model, under their own names), ``mtp_final_{norm}_norm``,
    ``mtp_lm_head`` (the shared head) and ``mtp_loss``.

    >>> from symbolic_cost.blocks import Projections, Wiring, transformer_layer
    >>> layer = transformer_layer(1, 8, 4, 16, 2, projections=Projections(qkv_bias=False, out_bias=False),
    ...                           wiring=Wiring(norm="rms"))
    >>> rows = mtp_rows(1, 8, 4, 10, layer)
    >>> [r.name for r in rows[:4]]
    ['mtp_word_embeddings', 'mtp_enorm', 'mtp_hnorm', 'mtp_eh_proj']
    >>> sum(r.weights for r in rows) // 2 == 3 * 4 + 2 * 4 * 4 + (2 * 4 + 4 * 4 * 4 + 2 * 4 * 16)   # norms, eh_proj, layer
    True
    """
    run = Run(es=es, es_mask=es_mask, conventions=conventions)
    at = Layout.of(dict(b=b, l=l, e=e, m1=m1, s1=s1), es, es_mask, conventions)
    lookup = embedding_block(b, l, e, vocab, m1, s1, embeddings=Embeddings(dropout=False, shared=True), run=run)
    *norms, project = module_inputs(at, norm)
    width = at.b * at.l * at.e
    project = at.attach(project, at.collective("allgather", 2 * width, at.s, "fwd")
                        + at.collective("reducescatter", 2 * width, at.m1, "bwd")
                        + at.collective("allgather", width, at.m1, "fwd")
                        + at.collective("allgather", width, at.s, "bwd"))
    head = head_block(b, l, e, vocab, m1, s1, head=Head(final_norm=norm), residual=Residual(norm, dropouts=False),
                      run=run)
    start, end = ([replace(r, name=f"mtp_{r.name}") for r in blk.rows] for blk in (lookup, head))
    return (*start, *norms, project, *layer.rows, *end)


def module_inputs(at: Layout, norm: str = "rms") -> tuple:
    """The rows a module runs before its layer: ``mtp_enorm`` and ``mtp_hnorm`` (``e`` each, over
    the sequence shard) and ``mtp_eh_proj`` (``2e -> e/m1``, no bias), without the collectives
    tensor parallelism adds around the projection (``mtp_rows`` attaches them; serving's MTP draft,
    ``inference.drafts``, leaves them out)."""
    norms = [NORMS[norm](at.b, at.l / at.s, at.e, name=f"mtp_{side}", **at.kw) for side in ("enorm", "hnorm")]
    return (*norms, linear(at.b, at.l, 2 * at.e, at.e / at.m1, bias=False, name="mtp_eh_proj", **at.kw))
