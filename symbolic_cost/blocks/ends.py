"""The ends of a model: embeddings at the start, the LM head, loss or pooler at the end."""

from __future__ import annotations

from dataclasses import replace

from sympy import sympify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.layout import NORMS, Layout
from symbolic_cost.cost import exact
from symbolic_cost.ops import add, cross_entropy, dropout, embedding, gelu, linear

def embedding_block(b, l, e, vocab, m1=1, s1=1, *, positions=0, token_types=0, norm=None,
                    dropouts=True, es=2, es_mask=1, conventions=conv.DEFAULT) -> Block:
    """Token embedding split over ``m1`` by vocabulary (Megatron's VocabParallelEmbedding:
    each device looks up its rows, the partial outputs are summed and sequence-sharded),
    plus learned ``positions`` and BERT ``token_types`` tables, an optional norm and dropout."""
    dims = dict(b=b, l=l, e=e, m1=m1, s1=s1)
    at = Layout.of(dims, es, es_mask, conventions)
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    tokens = l / at.s
    rows = [at.leaving(embedding(b, l, exact(vocab, "vocab") / m1, e, name="word_embeddings", es=at.es))]
    for table, name in ((positions, "position_embeddings"), (token_types, "token_type_embeddings")):
        if table != 0:
            rows += [embedding(b, tokens, table, e, name=name, es=at.es),
                     add(b, tokens, e, name=f"{name}_add", es=at.es)]
    if norm:
        rows.append(NORMS[norm](b, tokens, e, name=f"embedding_{norm}_norm", **at.kw))
    if dropouts:
        rows.append(dropout(b, tokens, e, es_mask=at.es_mask, name="embedding_dropout", **at.kw))
    return Block("embedding", tuple(rows), dims, at.conventions)

def head_block(b, l, e, vocab, m1=1, s1=1, *, tied=True, final_norm="layer", loss=True, pooler=False,
               es=2, es_mask=1, conventions=conv.DEFAULT) -> Block:
    """The end of the model: final norm, the LM head ``e -> vocab`` split over ``m1`` by
    vocabulary (no weights of its own when tied to the embedding) and the cross-entropy
    loss, whose vocabulary-parallel form allreduces a max, a sum and the target logit
    per token; or, for BERT, the pooler (``linear`` on the first token and ``tanh``)."""
    dims = dict(b=b, l=l, e=e, m1=m1, s1=s1)
    at = Layout.of(dims, es, es_mask, conventions)
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    vocab = exact(vocab, "vocab")
    rows = [at.norm(f"final_{final_norm}_norm", final_norm)] if final_norm else []
    if loss:
        head = at.entering(linear(b, l, e, vocab / m1, bias=False, name="lm_head", **at.kw))
        if tied:
            head = replace(head, weights=sympify(0), weight_grads=sympify(0),
                           mem_fwd=head.mem_fwd - head.weights, mem_bwd=head.mem_bwd - head.weights)
        stats = at.collective("allreduce", 3 * b * l, m1, "fwd")
        rows += [head, at.attach(cross_entropy(b, l, vocab / m1, es=at.es), stats)]
    if pooler:
        rows += [linear(b, 1, e, e, name="pooler_dense", **at.kw), gelu(b, 1, e, name="pooler_activation", **at.kw)]
    return Block("head", tuple(rows), dims, at.conventions)
