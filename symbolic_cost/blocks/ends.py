"""The ends of a model: embeddings at the start, the end of an encoder stack, and the head
(final norm, then the LM head and loss, BERT's pooler or a task head: ``heads``).

What each end is: ``Embeddings`` (the tables, norm and dropout of the start) and ``Head``
(the final norm, projection, LM head and pooler), with ``heads.Task`` for a task head; how it
runs: ``blocks.wiring.Run`` (element sizes, conventions).

>>> Head(final_dropout="yes")
Traceback (most recent call last):
...
symbolic_cost.checks.InputError: final_dropout must be True or False, got 'yes'
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.heads import TP_ENDS, Task, lm_rows, pooler_rows, task_rows, whole_table
from symbolic_cost.blocks.layout import NORMS, Layout
from symbolic_cost.blocks.specs import flags, one_of
from symbolic_cost.blocks.wiring import Residual, Run
from symbolic_cost.checks import InputError, counts, positive_dims
from symbolic_cost.cost import exact
from symbolic_cost.ops import add, dropout, embedding, linear

__all__ = ["Embeddings", "Head", "Task", "TP_ENDS", "embedding_block", "stack_end", "head_block"]


@dataclass(frozen=True)
class Embeddings:
    """What the start of a model looks up and does besides the word table.

    * ``positions``: rows of a learned position table (0: none); ``token_types``: rows of
      BERT's token-type table (0: none); each is looked up and added;
    * ``norm``: a norm kind (``ops.norm.NORMS``) after the sum (``None``: none);
    * ``dropout``: the embedding dropout;
    * ``projection`` (OPT's ``word_embed_proj_dim``): the word table is ``(vocab, projection)``
      and ``project_in`` (``projection -> e``, no bias) follows it (``None``: ``(vocab, e)``);
    * ``shared``: the word table belongs to another block (T5's decoder reads the encoder's);
    * ``relative``: ``(buckets, heads)`` of T5's relative attention bias table (``None``: none).
    """

    positions: Expr = 0
    token_types: Expr = 0
    norm: str | None = None
    dropout: bool = True
    projection: Expr | None = None
    shared: bool = False
    relative: tuple | None = None

    def __post_init__(self):
        counts(positions=self.positions, token_types=self.token_types)
        if self.projection is not None:
            positive_dims(projection=self.projection)
        one_of(self.norm, "norm", (None, *NORMS))
        flags(self, "dropout", "shared")
        if self.relative is not None and not (isinstance(self.relative, tuple) and len(self.relative) == 2):
            raise InputError(f"relative must be (buckets, heads) or None, got {self.relative!r}", "relative")


@dataclass(frozen=True)
class Head:
    """What ends a model after its last layer.

    * ``final_norm``: the kind of the final norm (``ops.norm.NORMS``; ``None``: none), and
      ``final_dropout`` after it (T5);
    * ``projection``: OPT's ``project_out`` (``e -> projection``, no bias; ``None``: none);
    * ``loss``: the LM head and its loss, ``tied`` to the word table (no weights of its own),
      with a ``bias`` (GPT-J, Phi) and a ``softcap`` of the logits (Gemma 2), run in
      ``loss_chunks`` pieces of the sequence, or as one ``fused_loss`` row (Liger-Kernel's fused
      linear cross-entropy) (``heads.lm_rows``);
    * ``pooler``: BERT's pooler.
    """

    final_norm: str | None = "layer"
    final_dropout: bool = False
    projection: Expr | None = None
    loss: bool = True
    tied: bool = True
    bias: bool = False
    softcap: bool = False
    pooler: bool = False
    loss_chunks: int = 1
    fused_loss: bool = False

    def __post_init__(self):
        one_of(self.final_norm, "final_norm", (None, *NORMS))
        flags(self, "final_dropout", "loss", "tied", "bias", "softcap", "pooler", "fused_loss")


def embedding_block(b, l, e, vocab, m1=1, s1=1, *, embeddings: Embeddings | None = None, run: Run | None = None,
                    name="embedding", ends: str = "vocab") -> Block:
    """Token embedding split over ``m1`` by vocabulary (Megatron's VocabParallelEmbedding:
    each device looks up its rows, the partial outputs are summed and sequence-sharded),
    then what ``embeddings`` (an ``Embeddings``) adds: learned ``positions`` and BERT
    ``token_types`` tables, a norm and a dropout; OPT's ``project_in``; T5's relative
    attention bias table ``(buckets, heads)``, looked up once for the ``l x l`` query/key pairs
    of the stack (heads split over ``m1``).  A ``shared`` word table has no weights here.
    ``run`` (a ``Run``): the element sizes and conventions.  ``ends`` (``TP_ENDS``) ``"whole-table"``
    or ``"whole"``: the word table ``(vocab, e)`` whole on every tensor rank (DeepSpeed's AutoTP
    leaves ``nn.Embedding`` outside its plan alone), each rank looking up every token itself: no
    collective, the output ``(b, l, e)`` the same on every rank; ``"gathered"`` (transformers'
    ``embedding_rowwise``, ``EmbeddingParallel(shard_dim=0)``) splits it as Megatron-LM does, the
    partial lookups allreduced (no sequence parallelism).

    >>> embedding_block(1, 8, 16, 100, embeddings=Embeddings(positions=8)).names
    ['word_embeddings', 'position_embeddings', 'position_embeddings_add', 'embedding_dropout']
    """
    spec, run = embeddings or Embeddings(), run or Run()
    dims = dict(b=b, l=l, e=e, m1=m1, s1=s1)
    at = Layout.of(dims, run.es, run.es_mask, run.conventions)
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    tokens = l / at.s
    width = e if spec.projection is None else exact(spec.projection, "projection")
    if whole_table(at, ends):
        word = embedding(b, l, exact(vocab, "vocab"), width, name="word_embeddings", **at.kw)
    else:
        word = at.leaving(embedding(b, l, exact(vocab, "vocab") / m1, width, share=1 / m1, name="word_embeddings",
                                    **at.kw))
    if spec.shared:
        word = replace(word, weights=sympify(0), weight_grads=sympify(0))
    rows = [word]
    if spec.projection is not None:
        rows.append(linear(b, tokens, width, e, bias=False, name="project_in", **at.kw))
    for table, label in ((spec.positions, "position_embeddings"), (spec.token_types, "token_type_embeddings")):
        if table != 0:
            rows += [embedding(b, tokens, table, e, name=label, **at.kw),
                     add(b, tokens, e, name=f"{label}_add", es=at.es)]
    if spec.norm:
        rows.append(NORMS[spec.norm](b, tokens, e, name=f"embedding_{spec.norm}_norm", **at.kw))
    if spec.dropout:
        rows.append(dropout(b, tokens, e, es_mask=at.es_mask, name="embedding_dropout", **at.kw))
    if spec.relative is not None:
        buckets, heads = spec.relative
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


def head_block(b, l, e, vocab, m1=1, s1=1, *, head: Head | None = None, task: Task | None = None,
               residual: Residual | None = None, run: Run | None = None, ends: str = "vocab") -> Block:
    """The end of the model, as ``head`` (a ``Head``) says: final norm (and, for T5, a
    dropout), OPT's ``project_out`` (``e -> projection``, no bias), then the LM head
    (``heads.lm_rows``: a bias as in GPT-J and Phi, a soft cap as in Gemma 2) and its loss when
    ``loss``; or, for BERT, the pooler; or a ``task`` head (a ``heads.Task``: ``heads.task_rows``,
    its norm kind and dropouts ``residual``'s).  ``run`` (a ``Run``): the element sizes and
    conventions; ``ends`` (``TP_ENDS``): how the LM head lies over the tensor ranks (``lm_rows``).

    >>> head_block(1, 8, 16, 100, head=Head(final_norm="rms", tied=False)).names
    ['final_rms_norm', 'lm_head', 'loss']
    """
    head, task, residual, run = head or Head(), task or Task(), residual or Residual(), run or Run()
    dims = dict(b=b, l=l, e=e, m1=m1, s1=s1)
    at = Layout.of(dims, run.es, run.es_mask, run.conventions)
    b, l, e, m1 = dims["b"], dims["l"], dims["e"], dims["m1"]
    vocab = exact(vocab, "vocab")
    rows = [at.norm(f"final_{head.final_norm}_norm", head.final_norm)] if head.final_norm else []
    if head.final_dropout:
        rows.append(dropout(b, l, e, es_mask=at.es_mask, name="final_dropout", **at.kw))
    width = e
    if head.projection is not None:
        width = exact(head.projection, "projection")
        rows.append(linear(b, l, e, width, bias=False, name="project_out", **at.kw))
    if head.loss:
        rows += lm_rows(at, width, vocab, tied=head.tied, bias=head.bias, softcap=head.softcap,
                        chunks=head.loss_chunks, fused=head.fused_loss, ends=ends)
    if ends != "vocab" and (head.pooler or task.kind or head.projection is not None):
        raise InputError(f"tp_ends {ends!r} is the layout of a causal LM's head (transformers' tp_plan, DeepSpeed's "
                         f"AutoTP); a pooler, a task head or OPT's projection beside it is not modelled", "tp_ends")
    if head.pooler:
        rows += pooler_rows(at)
    rows += task_rows(at, task, vocab, norm=residual.norm, dropouts=residual.dropouts, tied=head.tied)
    return Block("head", tuple(rows), dims, at.conventions)
