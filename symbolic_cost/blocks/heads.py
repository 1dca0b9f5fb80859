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

TASKS = ("", "masked_lm", "pretraining", "classification")
CLASSIFIERS = ("pooled", "dense", "score")
"""Sequence classifiers: on BERT's pooler output (``pooled``), RoBERTa's ``dense -> tanh ->
out_proj`` on the first token (``dense``), a decoder's ``score`` projection of every token
(the last token's logits are the prediction)."""


def lm_rows(at: Layout, width, vocab, *, tied=True, bias=False, softcap=False, name="lm_head",
            chunks: int = 1, fused: bool = False) -> list[Cost]:
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
    at a time), on the whole vocabulary (no split over ``m1``, no bias: refused)."""
    b, l, m1 = at.b, at.l, at.m1
    if fused:       # a tied table is the embedding's; the row still reads it (its bytes moved stay)
        row, table = fused_rows(at, width, vocab, bias, softcap, name), width * vocab * at.es
        return [replace(row, weights=row.weights - table, weight_grads=row.weight_grads - table) if tied else row]
    head = _untied(at.entering(linear(b, l, width, vocab / m1, bias=bias, name=name, **at.kw)),
                   width * vocab / m1 * at.es, tied)
    caps = [softcap_row(b, l, vocab / m1, es=at.es, name="logit_softcap")] if softcap else []
    stats = at.collective("allreduce", 3 * b * l, m1, "fwd")
    loss_es = 4 if at.conventions.loss_precision == "fp32" else at.es     # the loss's own logits
    loss = at.attach(cross_entropy(b, l, vocab / m1, es=loss_es), stats)
    if chunks == 1:
        return [head, *caps, loss]
    return [chunked(head, chunks, ("act_out",)), *(chunked(c, chunks) for c in caps), chunked(loss, chunks)]


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
