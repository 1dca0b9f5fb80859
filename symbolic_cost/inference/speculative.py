"""Speculative decoding: a draft model proposes ``k`` tokens, the served model verifies them in one
step, and a sequence keeps the longest accepted prefix and one token of the served model's own.

Each step of a sequence (Leviathan, Kalman and Matias 2023, "Fast Inference from Transformers via
Speculative Decoding", §3; Chen et al. 2023) runs:

* ``k`` draft steps: the draft model decodes ``k`` tokens one after another, each over the cache
  it has so far (``phases.decode`` of the draft);
* one verification: the served model over ``k + 1`` new tokens a sequence (the last token it
  emitted and the ``k`` proposals) and its cache, the logits of all ``k + 1`` positions
  (``phases.decode`` with ``tokens = k + 1``).

With each proposal accepted with probability ``alpha`` independently of the others (the paper's
simplifying assumption; ``alpha`` is the expected acceptance rate, a named input measured on the
user's own traffic), a step yields on average (the paper's equation 1)::

    E(k, alpha) = (1 - alpha^(k + 1)) / (1 - alpha)        (k + 1 when alpha = 1)

tokens a sequence.  Time per output token is then ``(k T_draft + T_verify) / E``; a replica emits
``b E / step`` tokens a second while decoding.  Steps are priced as decode steps are
(``throughput.phase_time``), each over the mean context of the generation: the verification's
first and last steps at half weight, as ``phases.mean_decode``, and the draft's over the ``k - 1``
tokens further its steps run on average (the draft also caches the proposals it makes).

The draft is another model of the same vocabulary, or the served model's own multi-token-prediction
module (``inference.drafts.MtpDraft``: DeepSeek-V3's, run ``k`` times a step).  It runs on the same
devices as the served model, split over the same ``m1`` tensor ranks (vLLM's default
``draft_tensor_parallel_size``), with its own weights and cache beside the served model's
(``draft_bytes``; an MTP module shares the word table and the head), and reads each prompt once
before its first proposal (``draft_prefill_s``, added to the time to first token).  Not modelled
(refused): pipeline stages, context parallelism and encoder-decoders in the verification; the
draft's catching up on tokens it did not propose (one token a step: one more draft token's cost at
most) is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Integer

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError, InputTypeError, exact, instance, shown
from symbolic_cost.inference.drafts import MtpDraft, draft_cache_bytes, draft_decode, draft_prefill, draft_weights
from symbolic_cost.inference.phases import Phase, mean_decode, mean_step
from symbolic_cost.inference.serving import SERVING_MADE_BY, Serving, final_tokens, prompt_tokens
from symbolic_cost.inference.throughput import phase_time
from symbolic_cost.models.architecture import Architecture


MAX_DRAFT = 64
"""Most draft tokens a step (``--speculative`` takes up to it): engines propose a handful (vLLM's
and TensorRT-LLM's examples 1-8); each is a step of the draft, and ``alpha^(k+1)`` of a larger
``k`` is a rational of as many digits."""


@dataclass(frozen=True)
class Speculation:
    """``k`` proposals a step from the ``draft`` model, each accepted with probability
    ``acceptance`` (see the module docstring)."""

    draft: Architecture | MtpDraft
    k: int
    acceptance: Expr

    def __post_init__(self):
        if not isinstance(self.draft, (Architecture, MtpDraft)):
            raise InputTypeError(f"draft must be an Architecture (a draft model) or an MtpDraft (the served model's "
                                 f"MTP heads), got {type(self.draft).__name__}", "draft")
        k = exact(self.k, "k")
        if not (isinstance(k, Integer) and 1 <= k <= MAX_DRAFT):
            raise InputError(f"k (draft tokens a step) must be a whole number from 1 to {MAX_DRAFT}, got {self.k!r}",
                             "k")
        alpha = exact(self.acceptance, "acceptance")      # never text: SymPy would evaluate it
        if not alpha.is_number or alpha.is_real is not True or alpha < 0 or alpha > 1 or alpha.is_Float:
            raise InputError(f"acceptance must be an exact number from 0 to 1 (a Rational), got {self.acceptance!r}",
                             "acceptance")
        object.__setattr__(self, "k", int(k))
        object.__setattr__(self, "acceptance", alpha)


def expected_tokens(k, alpha) -> Expr:
    """Tokens a sequence gains in one step: ``(1 - alpha^(k+1)) / (1 - alpha)``, ``k + 1`` at
    ``alpha = 1`` (Leviathan et al. 2023, eq. 1).

    >>> from sympy import Rational
    >>> expected_tokens(4, Rational(4, 5))
    2101/625
    >>> expected_tokens(3, 1), expected_tokens(3, 0)
    (4, 1)
    """
    k, alpha = exact(k, "k"), exact(alpha, "alpha")      # never text: SymPy would evaluate it
    if k.is_number and not (k.is_Integer and 1 <= k <= MAX_DRAFT):     # as Speculation's k
        raise InputError(f"k (draft tokens a step) must be a whole number from 1 to {MAX_DRAFT}, got {shown(k)}", "k")
    if alpha.is_number and not 0 <= alpha <= 1:
        raise InputError(f"alpha (the acceptance rate) must be from 0 to 1, got {alpha}", "alpha")
    if alpha == 1:
        return Integer(k) + 1
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def check_speculation(arch: Architecture, s: Serving, spec: Speculation) -> None:
    """Refuse what speculative decoding is not modelled with: pipeline stages, context parallelism,
    and a draft of another vocabulary."""
    instance(arch, Architecture, "arch", " (models.config.preset or load)")
    instance(s, Serving, "s", SERVING_MADE_BY)
    instance(spec, Speculation, "spec", " (inference.speculative.Speculation(draft, k, acceptance))")
    if s.p != 1 or s.cp != 1:
        raise InputError(f"speculative decoding is modelled on one pipeline stage without context parallelism "
                         f"(got p={s.p}, cp={s.cp})", "p" if s.p != 1 else "cp")
    if spec.draft.vocab != arch.vocab:
        raise InputError(f"the draft model's vocabulary ({spec.draft.vocab}) is not the served model's "
                         f"({arch.vocab}): its proposals must be the served model's tokens", "draft")


def verification(arch: Architecture, s: Serving, k: int, conventions=conv.DEFAULT) -> Phase:
    """The served model's step over ``k + 1`` tokens a sequence, at the generation's mean context."""
    return mean_decode(arch, s, conventions, tokens=k + 1)


def draft_step(spec: Speculation, s: Serving, conventions=conv.DEFAULT) -> Phase:
    """One of the draft's ``k`` steps, at the mean of its contexts over the generation and the step:
    ``P`` to ``P + l_out + k - 3`` (the verification's last context and ``k - 1`` proposals more)."""
    prompt = prompt_tokens(arch_of(spec.draft), s)
    return mean_step(draft_decode(spec.draft, s, prompt, conventions),
                     draft_decode(spec.draft, s, prompt + s.l_out + spec.k - 3, conventions))


def speculative_fields(arch: Architecture, s: Serving, spec: Speculation, system="h100",
                       conventions=conv.DEFAULT, roofline: str = "phase") -> dict[str, Expr]:
    """The speculative decoder's numbers: ``tokens_per_step`` (``expected_tokens``), the seconds of
    one ``draft_step_s``, of the ``verify_s`` and of the whole ``step_s`` (``k`` drafts and one
    verification), ``tpot_s`` (``step / E``), ``tokens_per_s`` a replica (``b E / step``), the
    draft's prefill (``draft_prefill_s``), and the bytes of its weights and cache a device holds
    (``draft_bytes``)."""
    conventions = conv.get(conventions)
    check_speculation(arch, s, spec)
    draft_s = phase_time(draft_step(spec, s, conventions), system, conventions, roofline)["total"]
    verify_s = phase_time(verification(arch, s, spec.k, conventions), system, conventions, roofline)["total"]
    reading = draft_prefill(spec.draft, s, conventions)
    step = spec.k * draft_s + verify_s
    tokens = expected_tokens(spec.k, spec.acceptance)
    return {"tokens_per_step": tokens, "draft_step_s": draft_s, "verify_s": verify_s, "step_s": step,
            "tpot_s": step / tokens, "tokens_per_s": s.b * tokens / step,
            "draft_prefill_s": phase_time(reading, system, conventions, roofline)["total"],
            "draft_bytes": draft_bytes(spec, s, conventions)}


def draft_bytes(spec: Speculation, s: Serving, conventions=conv.DEFAULT, tokens=None) -> Expr:
    """Bytes the draft holds on a device beside the served model: its weights
    (``drafts.draft_weights``) and the cache of ``s.b`` sequences of ``tokens`` tokens (default:
    at their last step, the final tokens and the ``k`` proposals; ``drafts.draft_cache_bytes``,
    in pages where ``s.page`` is given).  Affine in ``s.b``."""
    tokens = final_tokens(arch_of(spec.draft), s) + spec.k if tokens is None else tokens
    return draft_weights(spec.draft, s, conventions) + draft_cache_bytes(spec.draft, s, s.b, tokens, s.page)


def draft_beside(spec: Speculation, s: Serving, conventions=conv.DEFAULT) -> dict:
    """The draft's bytes at each moment of the served model's generation (``inference.peak``'s
    ``MOMENTS``), what ``throughput.max_batch`` holds beside its peak: its weights and, while the
    prompt is read, the cache of the prompt it reads too; while decoding, that of the last step
    (``draft_bytes``)."""
    prompt = draft_bytes(spec, s, conventions, prompt_tokens(arch_of(spec.draft), s))
    last = draft_bytes(spec, s, conventions)
    return {"prefill": prompt, "prefill sampling": prompt, "decode": last, "decode sampling": last}


def arch_of(draft) -> Architecture:
    """The model a draft's steps run: a draft model, or an MTP module's one-layer model."""
    return draft.layer_model if isinstance(draft, MtpDraft) else draft
