"""The ends of a model: embeddings at the start, the end of an encoder stack, and the head
(final norm, then the LM head and loss, BERT's pooler or a task head: ``heads``)."""

from __future__ import annotations

from dataclasses import replace

from sympy import sympify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.heads import lm_rows, pooler_rows, task_rows
from symbolic_cost.blocks.layout import NORMS, Layout
from symbolic_cost.cost import exact
from symbolic_cost.ops import add, dropout, embedding, linear


def embedding_block(b, l, e, vocab, m1=1, s1=1, *, positions=0, token_types=0, norm=None, dropouts=True,
                    projection=None, shared=False, relative=None, es=2, es_mask=1,
                    conventions=conv.DEFAULT, name="embedding") -> Block:
    """Token embedding split over ``m1`` by vocabulary (Megatron's VocabParallelEmbedding:
    each device looks up its rows, the partial outputs are summed and sequence-sharded),
    plus learned ``positions`` and BERT ``token_types`` tables, an optional norm and dropout.

    ``projection`` (OPT's ``word_embed_proj_dim``): the word table is ``(vocab, projection)``
    and ``project_in`` (``projection -> e``, no bias) follows it.  ``shared``: the word table
    belongs to another block (T5's decoder reads the encoder's), so it has no weights here.
    ``relative=(buckets, heads)``: T5's relative attention bias table ``(buckets, heads)``,
    looked up once for the ``l x l`` query/key pairs of the stack (heads split over ``m1``).
    """
    dims = dict(b=b, l=l, e=e, m1=m1, s1=s1)
    at = Layout.of(dims, es, es_mask, conventions)
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    tokens = l / at.s
    width = e if projection is None else exact(projection, "projection")
    word = at.leaving(embedding(b, l, exact(vocab, "vocab") / m1, width, share=1 / m1, name="word_embeddings",
                                **at.kw))
    if shared:
        word = replace(word, weights=sympify(0), weight_grads=sympify(0))
    rows = [word]
    if projection is not None:
        rows.append(linear(b, tokens, width, e, bias=False, name="project_in", **at.kw))
    for table, label in ((positions, "position_embeddings"), (token_types, "token_type_embeddings")):
        if table != 0:
            rows += [embedding(b, tokens, table, e, name=label, **at.kw),
                     add(b, tokens, e, name=f"{label}_add", es=at.es)]
    if norm:
        rows.append(NORMS[norm](b, tokens, e, name=f"embedding_{norm}_norm", **at.kw))
    if dropouts:
        rows.append(dropout(b, tokens, e, es_mask=at.es_mask, name="embedding_dropout", **at.kw))
    if relative is not None:
        buckets, heads = relative
        rows.append(embedding(1, l * l, buckets, exact(heads, "heads") / m1, name="relative_attention_bias",
                              **at.kw))
    return Block(name, tuple(rows), dims, at.conventions)


def stack_end(b, l, e, m1=1, s1=1, *, norm="rms", dropouts=True, es=2, es_mask=1,
              conventions=conv.DEFAULT) -> Block:
    """The end of an encoder whose output feeds cross-attention (T5): its final norm and
    dropout on the sequence shard (each cross-attention gathers the output itself)."""
    dims = dict(b=b, l=l, e=e, m1=m1, s1=s1)
    at = Layout.of(dims, es, es_mask, conventions)
    rows = [NORMS[norm](at.b, at.l / at.s, at.e, name=f"encoder_final_{norm}_norm", **at.kw)]
    if dropouts:
        rows.append(dropout(at.b, at.l / at.s, at.e, es_mask=at.es_mask, name="encoder_dropout", **at.kw))
    return Block("encoder_end", tuple(rows), dims, at.conventions)


def head_block(b, l, e, vocab, m1=1, s1=1, *, tied=True, final_norm="layer", loss=True, pooler=False,
               head_bias=False, projection=None, softcap=False, final_dropout=False, task="", num_labels=2,
               classifier="pooled", norm="layer", dropouts=True, es=2, es_mask=1,
               conventions=conv.DEFAULT) -> Block:
    """The end of the model: final norm (and, for T5, a dropout), OPT's ``project_out``
    (``e -> projection``, no bias), then the LM head (``heads.lm_rows``: ``head_bias`` as in
    GPT-J and Phi, ``softcap`` as in Gemma 2) and its loss when ``loss``; or, for BERT, the
    pooler; or a ``task`` head (``heads.task_rows``, whose norm kind is ``norm``)."""
    dims = dict(b=b, l=l, e=e, m1=m1, s1=s1)
    at = Layout.of(dims, es, es_mask, conventions)
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    vocab = exact(vocab, "vocab")
    rows = [at.norm(f"final_{final_norm}_norm", final_norm)] if final_norm else []
    if final_dropout:
        rows.append(dropout(b, l, e, es_mask=at.es_mask, name="final_dropout", **at.kw))
    width = e
    if projection is not None:
        width = exact(projection, "projection")
        rows.append(linear(b, l, e, width, bias=False, name="project_out", **at.kw))
    if loss:
        rows += lm_rows(at, width, vocab, tied=tied, bias=head_bias, softcap=softcap)
    if pooler:
        rows += pooler_rows(at)
    rows += task_rows(at, task, vocab, num_labels=num_labels, classifier=classifier, norm=norm,
                      dropouts=dropouts, tied=tied)
    return Block("head", tuple(rows), dims, at.conventions)
