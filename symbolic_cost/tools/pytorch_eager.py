"""PyTorch eager autograd as a preset: the tensors a forward keeps for ``backward()``.

What autograd saves was measured with ``torch.autograd.graph.saved_tensors_hooks`` on
Hugging Face Transformers 5.23 models (``attn_implementation="eager"``, train mode, fp32,
CPU), each storage counted once and parameters left out (``tests/test_saved_tensors_hf.py``).
The library's kept activation bytes under ``PRESET`` and ``training()``, plus the terms
below, equal it exactly; ``saved_bytes`` adds them up.

* ``PRESET`` (conventions): no dropout after the MLP activation (GPT-2, BERT and Llama have
  none); causal and sliding-window scores computed and stored in full (eager attention masks a
  full ``l x l`` product); LayerNorm keeps its mean and ``1/std``; a gated MLP keeps ``G``,
  ``U`` and ``act(G)`` (``gated_activation="eager"``).
* ``training`` (the run): CPU dropout multiplies by a noise tensor of the activation's dtype
  and keeps it (``es_mask = es``); CUDA's fused ``native_dropout`` keeps a 1-byte bool mask.

Eager bookkeeping (``bookkeeping``): integers and scalars every PyTorch model keeps, which
the library's floating-point activation elements leave out (``b`` sequences of ``l``
tokens; ``INDEX_BYTES = 8``, int64):

================ ================ ==========================================================
term             bytes            kept by
================ ================ ==========================================================
token ids        ``8 b l``        the word embedding's backward (its indices)
table ids        ``8 b l`` each   the position and token-type lookups, one id per token
targets          ``8 b l``        ``nll_loss`` (the LM loss), its int64 targets
total weight     ``es``           ``nll_loss``: a 0-d tensor, the sum of the target weights
================ ================ ==========================================================

Hugging Face Transformers 5.23 (``hf_terms``): how these models are written (``e`` hidden,
``f`` MLP width, ``h`` heads, ``kv`` key/value heads, ``q = e/h``, ``P`` position rows):

====== ======================= ========================== ================================
model  term                    bytes                      why
====== ======================= ========================== ================================
gpt2   ``gelu_new`` composite  ``3 b l f es`` per layer   ``0.5 x (1 + tanh(...))`` in
                                                          Python: ``tanh`` keeps its
                                                          output, the product ``0.5 x`` and
                                                          ``1 + tanh`` (``pow`` keeps ``x``,
                                                          the GELU input we count)
gpt2   position ids            ``-8 (b - 1) l``           built once, ``(1, l)``, broadcast
gpt2   query view              ``2 b l e es`` per layer   with ``b = 1`` or ``h = 1`` the
                               when ``b = 1`` or          matmul reads Q as a view of the
                               ``h = 1``                  fused QKV output and pins all of
                                                          it (K and V are copied)
gpt2,  targets view            ``8`` when ``b = 1``       the labels padded to ``l + 1`` and
llama                                                     shifted: one sequence's slice is
                                                          contiguous, no copy, it pins the
                                                          padded row
bert   token-type ids          ``-8 (b - 1) l``           gathered once, ``(1, l)``, expanded
bert   position ids            ``8 P - 8 b l``            a slice of the ``(1, P)`` buffer
                                                          pins all of it
bert   pooler input            ``b (l - 1) e es``         ``hidden[:, 0]`` pins the whole
                                                          last hidden state
llama  ``LlamaRMSNorm``        ``b l e es`` per norm      ``weight * x_hat``: the product
                                                          keeps ``x_hat``
llama  rotary ``cos, sin``     ``2 l q es``               computed once for the batch, kept
                                                          by every layer's products
llama  ``repeat_kv``           ``2 b (h - kv) l q es``    K and V copied to every query head
                               per layer; none when       before the matmul (one sequence
                               ``b = kv = 1``             and one K/V head: a zero-stride
                                                          view, no copy)
====== ======================= ========================== ================================

HF's eager attention also materialises the scaled scores and the additive mask, but nothing
keeps them: they are transient forward memory, not saved tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Eq, Expr, Integer, Or, Piecewise, sympify

from symbolic_cost.conventions import PRESETS
from symbolic_cost.models import Training, element_bytes, model_cost
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.config import from_config
from symbolic_cost.checks import InputError

PRESET = PRESETS["pytorch-eager"]
"""What PyTorch eager autograd keeps for Hugging Face models (see the module docstring and
``named_conventions``)."""

INDEX_BYTES = 8
"""Bytes of one token id or target as PyTorch keeps it (int64)."""

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Term:
    """A named number of bytes autograd saves beyond the library's rows: ``bytes`` once per
    model, or once per layer when ``per_layer``."""

    name: str
    bytes: Expr
    per_layer: bool = False

    def total(self, layers) -> Expr:
        """``layers x bytes`` for a per-layer term, ``bytes`` otherwise."""
        return sympify(layers) * self.bytes if self.per_layer else self.bytes


def training(b, l, precision="fp32", device="cpu") -> Training:
    """An eager run of ``b`` sequences of ``l`` tokens: dropout masks of ``element_bytes(precision)``
    on the CPU (a noise tensor of the activation's dtype, measured), 1 byte on CUDA (the bool
    mask of PyTorch's fused ``native_dropout``; not measured here)."""
    if device not in DEVICES:
        raise InputError(f"device must be one of {', '.join(DEVICES)}, got {device!r}", "device")
    mask = element_bytes(precision) if device == "cpu" else 1
    return Training(b=b, l=l, precision=precision, mask_bytes=mask)


def bookkeeping(arch: Architecture, b, l, es) -> list[Term]:
    """Integer ids, targets and the loss's total weight (the first table of the module
    docstring); ``es`` is the loss's element size."""
    b, l = sympify(b), sympify(l)
    ids = INDEX_BYTES * b * l
    terms = [Term("token ids", ids)]
    terms += [Term(f"{name} ids", ids) for name, rows in (("position", arch.positions), ("token-type", arch.token_types))
              if rows != 0]
    if arch.lm_head:
        terms += [Term("targets", ids), Term("total weight", sympify(es))]
    return terms


def hf_terms(config: dict, b, l, es) -> list[Term]:
    """The terms of Hugging Face's implementation for this ``config.json`` (the second table
    of the module docstring); an unknown ``model_type`` is a ``ValueError``."""
    family = config.get("model_type")
    if family not in _FAMILIES:
        raise InputError(f"config.json: model_type {family!r} has no measured Hugging Face terms; "
                         f"measured: {', '.join(_FAMILIES)}", "model_type")
    return _FAMILIES[family](config, from_config(config), sympify(b), sympify(l), sympify(es))


def _one_sequence(b, bytes_, alone=False):
    """``bytes_`` when ``b = 1`` (or when ``alone`` holds), else nothing."""
    return Piecewise((bytes_, Or(Eq(b, 1), alone)), (0, True))


def _gpt2(config, arch, b, l, es):
    composite = config.get("activation_function", "gelu_new") == "gelu_new"
    e, h = sympify(arch.e), sympify(arch.h)
    return ([Term("gelu_new composite", 3 * b * l * arch.f * es, per_layer=True)] if composite else []) + [
        Term("query view pins the QKV output", _one_sequence(b, 2 * b * l * e * es, Eq(h, 1)), per_layer=True),
        Term("position ids (1, l)", -INDEX_BYTES * (b - 1) * l),
        Term("targets view the padded labels", _one_sequence(b, INDEX_BYTES))]


def _bert(config, arch, b, l, es):
    return [Term("token-type ids (1, l)", -INDEX_BYTES * (b - 1) * l),
            Term("position ids pin the buffer", INDEX_BYTES * (sympify(arch.positions) - b * l)),
            Term("pooler slice pins the hidden state", b * (l - 1) * arch.e * es)]


def _llama(config, arch, b, l, es):
    e, h = sympify(arch.e), sympify(arch.h)
    q, kv = arch.head_size, sympify(arch.kv)
    norms = 2 * b * l * e * es
    return [Term("LlamaRMSNorm keeps x_hat", norms, per_layer=True),
            Term("final LlamaRMSNorm keeps x_hat", norms / 2),
            Term("rotary cos, sin", 2 * l * q * es),
            Term("repeat_kv copies", Piecewise((0, Eq(b, 1) & Eq(kv, 1)), (2 * b * (h - kv) * l * q * es, True)),
                 per_layer=True),
            Term("targets view the padded labels", _one_sequence(b, INDEX_BYTES))]


_FAMILIES = {"gpt2": _gpt2, "bert": _bert, "llama": _llama}


def saved_bytes(config: dict, b, l) -> Expr:
    """Bytes autograd saves in an fp32 CPU forward of the Hugging Face model of ``config``
    (eager attention, train mode): the library's activation bytes under ``PRESET`` and
    ``training()``, the bookkeeping and the Hugging Face terms.  Only fp32 was measured: in
    half precision Hugging Face's loss upcasts the logits and LayerNorm keeps fp32 statistics,
    which these terms do not cover."""
    arch, es = from_config(config), element_bytes("fp32")
    kept = model_cost(arch, training(b, l), PRESET).activation_bytes
    terms = bookkeeping(arch, b, l, es) + hf_terms(config, b, l, es)
    return kept + sum((t.total(arch.n_layers) for t in terms), Integer(0))
