"""Output heads: the (vocabulary-parallel) LM head and loss, BERT's pooler, masked-LM and
pre-training heads, and sequence-classification heads.

Every head returns rows on one device.  The LM head and the masked-LM decoder split the
vocabulary over ``m1`` (Megatron-LM); the small heads (pooler, transform, classifiers) are
replicated on every device of the tensor group.  Row names follow Hugging Face's modules.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr

from symbolic_cost.blocks.layout import NORMS, Layout
from symbolic_cost.blocks.specs import one_of
from symbolic_cost.cost import Cost, exact
from symbolic_cost.checks import InputError
from symbolic_cost.ops import cross_entropy, dropout, gelu, linear
from symbolic_cost.ops.embedding import fused_linear_cross_entropy
from symbolic_cost.ops.scores import softcap as softcap_row

TP_ENDS = ("vocab", "gathered", "whole-table", "whole")
"""How the ends of the model lie over the ``m1`` tensor ranks (``Degrees.ends``, ``tp_ends``):

* ``"vocab"``: Megatron-LM's: the word table split by vocabulary (``VocabParallelEmbedding``), the LM
  head split by vocabulary, its logits left split and the loss vocabulary-parallel;
* ``"gathered"``: transformers' ``tp_plan`` as transformers 5.23 applies it (``init_parallel_plans``
  in ``transformers/distributed/mixin.py`` adds ``{"embed_tokens": "embedding_rowwise"}``;
  ``LlamaForCausalLM._tp_plan``: ``{"lm_head": "colwise_gather_output"}``): the word table split by
  vocabulary, the partial lookups allreduced, the LM head split by vocabulary with its logits
  all-gathered and the loss on the whole vocabulary on every rank; a tied head shares the table's
  shard;
* ``"whole-table"``: DeepSpeed's AutoTP on a Hugging Face ``tp_plan`` (0.19.4 and later, an untied
  head), and transformers' ``tp_plan`` before it named the embedding: the word table whole on every
  rank, the LM head as ``"gathered"``;
* ``"whole"``: DeepSpeed's AutoTP with a tied head (and before 0.19.4 with any head): the word table
  and the LM head whole on every rank, no collective at either end.

Every layout but ``"vocab"`` keeps the sequence whole (``s1 = 1``) and reduces the input gradient of
each column-split module on its own (``blocks.wiring.Run.split_inputs``)."""


def whole_table(at: Layout, ends: str) -> bool:
    """Whether ``ends`` (``TP_ENDS``) keeps the word table whole on every tensor rank, refusing a name
    not in ``TP_ENDS`` and sequence shards beside any but ``"vocab"`` (neither transformers' ``tp_plan``
    for Llama and Qwen nor DeepSpeed's AutoTP shards the sequence)."""
    one_of(ends, "tp_ends", TP_ENDS)
    if ends != "vocab" and at.s != 1:
        raise InputError(f"tp_ends {ends!r} keeps the activations between the layers whole on every tensor rank; "
                         f"a sequence split over s={at.s} ranks beside it is not modelled", "tp_ends")
    return ends in ("whole-table", "whole")


TASKS = ("", "masked_lm", "pretraining", "classification")
CLASSIFIERS = ("pooled", "dense", "score")
"""Sequence classifiers: on BERT's pooler output (``pooled``), RoBERTa's ``dense -> tanh ->
out_proj`` on the first token (``dense``), a decoder's ``score`` projection of every token
(the last token's logits are the prediction)."""


def lm_rows(at: Layout, width, vocab, *, tied=True, bias=False, softcap=False, name="lm_head",
            chunks: int = 1, fused: bool = False, ends: str = "vocab") -> list[Cost]:
    """``width -> vocab`` logits split by vocabulary over ``m1`` (no weight matrix of its own
    when tied to the word embedding; a bias stays its own), an optional ``tanh`` soft cap, and
    the cross-entropy loss, whose vocabulary-parallel form allreduces a max, a sum and the
    target logit per token.

    ``chunks``: the head and the loss run on ``chunks`` pieces of the sequence one after the
    other, each piece's backward before the next piece (torchtitan's ``ChunkedLossWrapper``:
    "reduces peak memory from O(T*V) to O(T/N*V)"): the same FLOPs and bytes moved, but only one
    piece's logits, their loss's tensors and their gradients alive at once, ``1/chunks`` of
    each (``chunked``); the head's input, the hidden states, stays whole.

    ``fused``: the head and the loss as one row, Liger-Kernel's fused linear cross-entropy
    (``ops.fused_linear_cross_entropy``: both gradients formed in the forward, the logits a chunk
    at a time), on the whole vocabulary (no split over ``m1``, no bias: refused).

    ``ends`` (``TP_ENDS``), for ``"vocab"`` all of the above; otherwise (``gathered_rows``) the head
    and the loss of transformers' ``tp_plan`` and DeepSpeed's AutoTP, run whole (no chunks, no
    fused loss: refused)."""
    b, l, m1 = at.b, at.l, at.m1
    whole_table(at, ends)
    if ends != "vocab":
        if chunks != 1 or fused:
            raise InputError(f"tp_ends {ends!r} with {'fused_loss' if fused else f'loss_chunks={chunks}'}: a head "
                             f"run a piece at a time beside that layout is not modelled", "tp_ends")
        return gathered_rows(at, width, vocab, tied=tied, bias=bias, softcap=softcap, name=name,
                             gathered=ends != "whole", table_split=ends == "gathered")
    if fused:       # a tied table is the embedding's; the row still reads it (its bytes moved stay)
        row, table = fused_rows(at, width, vocab, bias, softcap, name), width * vocab * at.es
        return [replace(row, weights=row.weights - table, weight_grads=row.weight_grads - table) if tied else row]
    head = _untied(at.entering(linear(b, l, width, vocab / m1, bias=bias, name=name, **at.kw)),
                   width * vocab / m1 * at.es, tied)
    caps = [softcap_row(b, l, vocab / m1, es=at.es, name="logit_softcap")] if softcap else []
    stats = at.collective("allreduce", 3 * b * l, m1, "fwd")
    loss = at.attach(cross_entropy(b, l, vocab / m1, es=loss_bytes(at)), stats)
    if chunks == 1:
        return [head, *caps, loss]
    return [chunked(head, chunks, ("act_out",)), *(chunked(c, chunks) for c in caps), chunked(loss, chunks)]


def gathered_rows(at: Layout, width, vocab, *, tied, bias, softcap, name, gathered: bool,
                  table_split: bool) -> list[Cost]:
    """The LM head and its loss where the logits end up whole on every tensor rank.

    ``gathered`` (transformers' ``"colwise_gather_output"``, ``colwise_rep`` before transformers 5:
    ``ColwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())`` in
    ``transformers/distributed/tensor_parallel.py``; DeepSpeed's ``LinearLayer(gather_output=True)``
    in ``deepspeed/module_inject/layers.py``, since DeepSpeed 0.19.4, commit 48d54e05b): the weight
    ``(vocab/m1, width)`` on each rank (the largest rank's share of a vocabulary padded to ``m1``
    rows), its input ``(b, l, width)`` whole on every rank, so the backward sums the ``m1`` partial
    input gradients (an allreduce of ``b*l*width``, ``Layout.entering``); its output ``(b, l,
    vocab/m1)`` all-gathered along the vocabulary to ``(b, l, vocab)`` on every rank (forward; the
    backward takes each rank's slice of the gradient, no collective), the row's output (``act_out``,
    and the bytes the gather writes in ``mem_fwd``) that gathered tensor; the cross-entropy then on all
    ``vocab`` logits on every rank, keeping them (``b*l*vocab`` elements), with no statistics to
    reduce.  Otherwise (DeepSpeed's AutoTP leaving the head alone: a head tied to the word table, and
    any head before 0.19.4, whose ``set_lm_head`` returns at once in training) the whole weight
    ``(vocab, width)`` on every rank and no collective.  A tied head's weight is the word table's
    (``_untied``): split with it where the table is split (``table_split``: transformers 5.23's
    ``embedding_rowwise`` and ``colwise_gather_output`` both shard the shared ``(vocab, width)`` weight
    along the vocabulary), refused where only the head would be (DeepSpeed leaves a tied head whole)."""
    b, l, m1 = at.b, at.l, at.m1
    if not gathered:
        head = _untied(linear(b, l, width, vocab, bias=bias, name=name, **at.kw), width * vocab * at.es, tied)
    elif tied and not table_split:
        raise InputError("tp_ends 'whole-table' splits the LM head's weight by vocabulary and leaves the word table "
                         "whole, so a head tied to the word table cannot be split that way (DeepSpeed leaves both "
                         "whole: tp_ends 'whole')", "tp_ends")
    else:
        head = _untied(at.entering(linear(b, l, width, vocab / m1, bias=bias, name=name, **at.kw)),
                       width * vocab / m1 * at.es, tied)
        head = at.attach(head, at.collective("allgather", b * l * vocab, m1, "fwd"))
        grown = b * l * (vocab - vocab / m1) * at.es     # its output: the gathered logits, written by the gather
        head = head.plus(act_out=grown, mem_fwd=grown)
    caps = [softcap_row(b, l, vocab, es=at.es, name="logit_softcap")] if softcap else []
    return [head, *caps, cross_entropy(b, l, vocab, es=loss_bytes(at))]


def loss_bytes(at: Layout):
    """The bytes of an element of the loss's own logits: 4 where the conventions run the loss in
    fp32 (``loss_precision``), else the model's element size."""
    return 4 if at.conventions.loss_precision == "fp32" else at.es


LOGIT_TENSORS = ("act_in", "act_out", "act_buffer", "act_grads")
"""The live tensors of a row over the logits (``Cost``'s activation fields; the bytes moved,
``mem_fwd`` and ``mem_bwd``, are the whole sequence's either way)."""


def _untied(head: Cost, table, tied: bool) -> Cost:
    """``head`` without the word table it shares when ``tied`` (its weights are the embedding's;
    a bias stays its own)."""
    if not tied:
        return head
    return replace(head, weights=head.weights - table, weight_grads=head.weight_grads - table,
                   mem_fwd=head.mem_fwd - table, mem_bwd=head.mem_bwd - table)


def fused_rows(at: Layout, width, vocab, bias, softcap, name) -> Cost:
    """The fused linear cross-entropy row of ``lm_rows``, a soft cap of the logits applied in its
    loss kernel (the cap's forward and backward arithmetic in its forward, as Liger-Kernel's
    ``HAS_SOFTCAPPING``); refusing a vocabulary split over ``m1`` ranks and a bias."""
    for on, what in ((exact(at.m1, "m1") != 1, "a vocabulary split over m1 tensor ranks (it runs the whole "
                      "vocabulary on one device)"), (bias, "a bias on the LM head")):
        if on:
            raise InputError(f"the fused linear cross-entropy (fused_loss, Liger-Kernel's) with {what} is not "
                             f"modelled", "fused_loss")
    row = fused_linear_cross_entropy(at.b, at.l, width, vocab, name=name, **at.kw)
    if not softcap:
        return row
    cap = softcap_row(at.b, at.l, vocab, es=at.es)
    return row.plus(flops_fwd=cap.flops_fwd + cap.flops_bwd)


def chunked(row: Cost, chunks: int, fields=LOGIT_TENSORS) -> Cost:
    """``row`` run in ``chunks`` pieces one after the other: its tensors ``fields`` alive one
    piece at a time, ``1/chunks`` of them."""
    return replace(row, **{f: getattr(row, f) / chunks for f in fields})


def pooler_rows(at: Layout) -> list[Cost]:
    """BERT's pooler: ``linear (e -> e)`` on the first token of each sequence, then ``tanh``."""
    return [linear(at.b, 1, at.e, at.e, name="pooler_dense", **at.kw),
            gelu(at.b, 1, at.e, name="pooler_activation", **at.kw)]


@dataclass(frozen=True)
class Task:
    """A task head after the last layer: ``kind`` (``TASKS``; ``""``: none), ``num_labels``
    classes of a classification head and its ``classifier`` (``CLASSIFIERS``).

    >>> Task("ner")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: kind must be one of ('', 'masked_lm', 'pretraining', 'classification'), got 'ner'
    """

    kind: str = ""
    num_labels: Expr = 2
    classifier: str = "pooled"

    def __post_init__(self):
        one_of(self.kind, "kind", TASKS)
        one_of(self.classifier, "classifier", CLASSIFIERS)


def task_rows(at: Layout, task: Task, vocab, *, norm="layer", dropouts=True, tied=True) -> list[Cost]:
    """The rows of a ``task`` head after the last layer (``Task.kind``, ``TASKS``):

    * ``masked_lm``: BERT's transform ``linear (e -> e)``, activation and norm on every token,
      then the decoder (``lm_rows``, tied, with a bias of ``vocab``) and the loss;
    * ``pretraining``: the pooler, the masked-LM head, and next-sentence prediction
      (``linear (e -> 2)`` on the pooled token, its loss);
    * ``classification``: ``num_labels`` classes by ``classifier`` (``CLASSIFIERS``), with a
      dropout before each classifier projection when ``dropouts``; its loss on one row per
      sequence.
    """
    b, l, e = at.b, at.l, at.e
    if task.kind in ("masked_lm", "pretraining"):
        mlm = [linear(b, l, e, e, name="transform_dense", **at.kw), gelu(b, l, e, name="transform_act", **at.kw),
               NORMS[norm](b, l, e, name=f"transform_{norm}_norm", **at.kw),
               *lm_rows(at, e, vocab, tied=tied, bias=True, name="decoder")]
        if task.kind == "masked_lm":
            return mlm
        nsp = [linear(b, 1, e, 2, name="seq_relationship", **at.kw), cross_entropy(b, 1, 2, es=at.es, name="nsp_loss")]
        return pooler_rows(at) + mlm + nsp
    if task.kind == "classification":
        return _classifier(at, exact(task.num_labels, "num_labels"), task.classifier, dropouts)
    return []


def _classifier(at: Layout, labels, classifier, dropouts) -> list[Cost]:
    """A sequence classifier and its loss (see ``CLASSIFIERS``)."""
    b, l, e = at.b, at.l, at.e
    drop = lambda name: [dropout(b, 1, e, es_mask=at.es_mask, name=name, **at.kw)] if dropouts else []  # noqa: E731
    if classifier == "score":
        rows = [linear(b, l, e, labels, bias=False, name="score", **at.kw)]
    elif classifier == "pooled":
        rows = pooler_rows(at) + drop("classifier_dropout") + [linear(b, 1, e, labels, name="classifier", **at.kw)]
    else:
        rows = drop("classifier_dropout_1") + [linear(b, 1, e, e, name="classifier_dense", **at.kw),
                                               gelu(b, 1, e, name="classifier_activation", **at.kw)] + \
            drop("classifier_dropout_2") + [linear(b, 1, e, labels, name="out_proj", **at.kw)]
    return rows + [cross_entropy(b, 1, labels, es=at.es, name="classification_loss")]
