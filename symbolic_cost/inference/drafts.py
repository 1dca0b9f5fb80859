"""The draft of speculative decoding (``inference.speculative``): another model, or the served
model's own multi-token-prediction module (``MtpDraft``).

A draft model (an ``Architecture`` of the same vocabulary) decodes as any model, with its own
weights and cache beside the served model's.

DeepSeek-V3's MTP module (``blocks.mtp``; DeepSeek-V3 report §2.2, and §5.4.3 on using it for
speculative decoding) predicts the token after the next from the served model's last hidden state
and the embedding of the token just emitted::

    h (the served model's last hidden state) -- RMSNorm (hnorm) --\\
                                                                   cat (2e) -- eh_proj (2e -> e) -- layer -- norm -- head
    the last token -- word table (shared) -- RMSNorm (enorm) -----/

SGLang's and TensorRT-LLM's MTP speculative decoding run that one module ``k`` times a step, each
time on its own last hidden state (the EAGLE way), so a draft step is the module at one token a
sequence: the lookup, the two norms and ``eh_proj``, one layer like the served model's last (its
latent attention over the module's own cache, its experts), the final norm and the shared head.
The word table and the head are the served model's: the draft adds only the module's own weights
(the layer, ``eh_proj`` and three norms) and one layer's cache.  Under tensor parallelism
``eh_proj`` is split by its output columns (``e/m1`` a rank); gathering its output over the ranks
is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, Integer, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.layout import Layout
from symbolic_cost.blocks.mtp import module_inputs
from symbolic_cost.checks import InputError, instance
from symbolic_cost.inference.kv_cache import kv_cache_bytes
from symbolic_cost.inference.per_device import busiest_weights
from symbolic_cost.inference.phases import Phase, decode, prefill
from symbolic_cost.inference.serving import Serving
from symbolic_cost.models.architecture import MADE_BY, Architecture


@dataclass(frozen=True)
class MtpDraft:
    """The served ``model``'s first multi-token-prediction module as its draft (module docstring)."""

    model: Architecture

    def __post_init__(self):
        instance(self.model, Architecture, "model", MADE_BY)      # MtpDraft(0) ended in an AttributeError
        if not self.model.mtp_layers:
            raise InputError(f"{self.model.name} has no multi-token-prediction module (mtp_layers is 0): give a draft "
                             f"model instead", "draft")
        if self.model.encoder_decoder:
            raise InputError(f"{self.model.name}: multi-token prediction is modelled for decoders", "draft")
        if self.model.moe is not None and not sympify(self.model.n_layers).is_Integer:
            raise InputError(f"{self.model.name}: the MTP module's layer is like the last, which a symbolic depth "
                             f"({self.model.n_layers}) does not name; give the layers as a number", "n_layers")

    @property
    def name(self) -> str:
        return f"{self.model.name}'s MTP module"

    @property
    def vocab(self):
        return self.model.vocab

    @property
    def layer_model(self) -> Architecture:
        """The module's layer as a one-layer model: the served model's last layer (MoE where that is)."""
        model, moe = self.model, self.model.moe
        if moe is not None:
            last = int(model.n_layers) - 1
            moe = replace(moe, first_dense=0, dense_layers=()) if moe.is_moe(last) else None
        return replace(model, name=self.name, n_layers=1, mtp_layers=0, moe=moe)


def draft_serving(draft, s: Serving) -> Serving:
    """How the draft runs beside the served model: on the same ranks, but a draft model without
    experts takes none of the served model's expert split (``ep``, ``etp``), as the engines run a
    dense draft beside an expert-parallel target; an MTP module is a layer of the served model."""
    if isinstance(draft, MtpDraft) or draft.moe is not None or (s.ep == 1 and s.etp is None):
        return s
    return replace(s, ep=1, etp=None)


def draft_decode(draft, s: Serving, l_ctx, conventions=conv.DEFAULT) -> Phase:
    """One decode step of the draft (one token a sequence over ``l_ctx`` cached tokens)."""
    if isinstance(draft, MtpDraft):
        return _with_module(draft, decode(draft.layer_model, s, l_ctx, conventions), conventions)
    return decode(draft, draft_serving(draft, s), l_ctx, conventions)


def draft_prefill(draft, s: Serving, conventions=conv.DEFAULT) -> Phase:
    """The draft's reading of the prompts (an MTP module reads them as the served model does)."""
    if isinstance(draft, MtpDraft):
        return _with_module(draft, prefill(draft.layer_model, s, conventions), conventions)
    return prefill(draft, draft_serving(draft, s), conventions)


def draft_weights(draft, s: Serving, conventions=conv.DEFAULT) -> Expr:
    """Weight bytes the draft adds on the busiest device: a draft model's own (``busiest_weights``);
    an MTP module's layer, ``eh_proj`` and norms, its final norm among them (the word table and the
    head's matrix are the served model's)."""
    reading = draft_prefill(draft, replace(s, b=1, l_out=2), conventions)
    if isinstance(draft, MtpDraft):
        (layer, count), head = reading.stack[1], reading.stack[-1][0]
        return count * layer.total("weights") + sum((r.weights for r in head if "norm" in r.name), Integer(0))
    return busiest_weights(draft, reading)


def draft_cache_bytes(draft, s: Serving, b, tokens, page=None) -> Expr:
    """Bytes of the draft's own cache on a device: ``b`` sequences of ``tokens`` tokens, in pages of
    ``page`` tokens where given (an MTP module caches for its one layer, in the served model's
    latent form)."""
    model = draft.layer_model if isinstance(draft, MtpDraft) else draft
    mla = {"mla": s.mla} if isinstance(draft, MtpDraft) else {}
    return kv_cache_bytes(model, b, tokens, m1=s.m1, kv_dtype=s.kv, page=page, **mla)


def _with_module(draft: MtpDraft, phase: Phase, conventions) -> Phase:
    """``phase`` of the module's one-layer model with the module's own rows before its layer: the
    two norms and ``eh_proj`` over the phase's tokens."""
    model, s = draft.model, phase.serving
    at = Layout.of(dict(b=s.b, l=phase.tokens, e=model.e, m1=s.m1, s1=1), s.es, 1, conv.get(conventions))
    rows = module_inputs(at, model.norm)
    (layer, count), = phase.stack[1:-1]
    return replace(phase, stack=(phase.stack[0], (replace(layer, rows=rows + layer.rows), count), phase.stack[-1]))
