"""What a layer's parts are, as frozen values: ``Heads``, ``Scores`` and ``Projections`` (the
attention block) and ``Feedforward`` (the MLP or mixture of experts of a layer); how they are
put together and run is ``blocks.wiring``'s.

``blocks.attention`` and ``blocks.transformer_layer`` take them instead of a keyword per
feature: a new attention feature is one field in one value.  Each value checks its own kinds
(``InputError`` naming the field and the rule); the sizes (heads, dims, windows) stay
expressions, checked with the block's other dimensions (``blocks.block.check_dims``).

>>> Heads(32, kv_heads=8).kv, Heads(32).kv
(8, 32)
>>> Heads(32, head_dim=128).size(4096), Heads(32).value_size(4096)
(128, 128)
>>> Scores(window=Chunk(8192)).span
8192
>>> Scores(bias="rotary")
Traceback (most recent call last):
...
symbolic_cost.checks.InputError: bias must be one of (None, 'alibi', 'relative'), got 'rotary'
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from sympy import Expr

from symbolic_cost.checks import InputError, counts, instance, positive_dims
from symbolic_cost.cost import exact
from symbolic_cost.ops.matmul import Chunk

SCORE_BIASES = (None, "alibi", "relative")
"""``Scores.bias``: none, ALiBi's fixed bias, T5's learned relative bias."""
QK_NORMS = (None, "head", "projection", "l2", "head_each")
"""``Heads.qk_norm``: none, per head (Qwen3, Gemma 3), over the whole projections (OLMo 2),
an RMS norm without weights (Llama 4), per head with weights for every head (Cohere)."""

__all__ = ["Heads", "Scores", "Projections", "Feedforward", "Chunk", "Latent", "SCORE_BIASES", "QK_NORMS",
           "as_heads", "one_of", "flags"]


def one_of(value, name: str, allowed: tuple) -> None:
    """Refuse ``value`` outside ``allowed``."""
    if value not in allowed:
        raise InputError(f"{name} must be one of {allowed}, got {value!r}", name)


def objects(**given) -> None:
    """Refuse each of ``given`` (``name=(value, kind)``) that is neither ``None`` nor a ``kind``: a
    block's specs passed in each other's places (``run=Wiring()``) or as text (``run="flash"``)
    ended in an ``AttributeError`` deep inside."""
    for name, (value, kind) in given.items():
        if value is not None:
            instance(value, kind, name, f" (symbolic_cost.blocks: {kind.__name__}(...))")


def flags(value, *names: str, none: bool = False) -> None:
    """Refuse fields of ``value`` that are not ``True`` or ``False`` (or ``None`` with ``none``)."""
    for name in names:
        flag = getattr(value, name)
        if not (isinstance(flag, bool) or (none and flag is None)):
            raise InputError(f"{name} must be True or False{' or None' if none else ''}, got {flag!r}", name)


def _given(value, names) -> dict:
    """The fields ``names`` of ``value`` that are set (not ``None``), in that order."""
    return {name: getattr(value, name) for name in names if getattr(value, name) is not None}


@dataclass(frozen=True)
class Latent:
    """The sizes of multi-head latent attention: ``kv_rank`` (``r_kv``), ``q_rank`` (``r_q``;
    ``None``: a full-rank query projection), ``nope_dim`` (``d_n``), ``rope_dim`` (``d_r``),
    ``v_dim`` (``d_v``)."""

    kv_rank: Expr
    rope_dim: Expr
    nope_dim: Expr
    v_dim: Expr
    q_rank: Expr | None = None

    def __post_init__(self):
        positive_dims(**_given(self, ("kv_rank", "v_dim", "q_rank")))
        counts(rope_dim=self.rope_dim, nope_dim=self.nope_dim)

    @property
    def qk_dim(self) -> Expr:
        """The query/key head size ``d_n + d_r``."""
        return exact(self.nope_dim, "nope_dim") + exact(self.rope_dim, "rope_dim")


@dataclass(frozen=True)
class Heads:
    """The heads of an attention block.

    * ``h`` query heads; ``kv_heads`` key/value heads (default ``h``; fewer: grouped-query
      attention, 1: multi-query);
    * ``head_dim`` the query/key head size ``q`` (default ``e/h``), ``v_head_dim`` the value
      head size (default ``q``);
    * ``qk_norm`` (``QK_NORMS``): normalise each query and key head (``"head"``, ``"l2"``,
      ``"head_each"``) or the whole Q and K projections (``"projection"``);
    * ``rotary``: rotary positions on Q and K over ``rotary_dim`` of each head's ``q`` dims
      (partial rotary; default all);
    * ``latent`` (a ``latent_attention.Latent``): multi-head latent attention (DeepSeek-V2
      and V3), whose sizes come from the latent (the other fields are not read).
    """

    h: Expr
    kv_heads: Expr | None = None
    head_dim: Expr | None = None
    v_head_dim: Expr | None = None
    qk_norm: str | None = None
    rotary: bool = False
    rotary_dim: Expr | None = None
    latent: Latent | None = None

    def __post_init__(self):
        positive_dims(h=self.h, **_given(self, ("kv_heads", "head_dim", "v_head_dim", "rotary_dim")))
        one_of(self.qk_norm, "qk_norm", QK_NORMS)
        flags(self, "rotary")
        if self.latent is not None and not isinstance(self.latent, Latent):
            raise InputError(f"latent must be a blocks.latent_attention.Latent, got {self.latent!r}", "latent")

    @property
    def kv(self) -> Expr:
        """Key/value heads: ``kv_heads``, default ``h``."""
        return self.h if self.kv_heads is None else self.kv_heads

    def size(self, e) -> Expr:
        """The query/key head size: ``head_dim``, default ``e/h``."""
        return positive_dims(e=e)["e"] / self.h if self.head_dim is None else self.head_dim

    def value_size(self, e) -> Expr:
        """The value head size: ``v_head_dim``, default the query/key head size."""
        return self.size(e) if self.v_head_dim is None else self.v_head_dim

    @property
    def sizes(self) -> dict:
        """The sizes a block checks with its dimensions (``kv_heads``, ``head_dim``,
        ``v_head_dim``), those that are set."""
        return _given(self, ("kv_heads", "head_dim", "v_head_dim"))

    def checked(self, dims: dict) -> "Heads":
        """These heads with their sizes as ``dims`` holds them once checked (exact)."""
        return replace(self, h=dims["h"], **{name: dims[name] for name in self.sizes})

    @property
    def plain(self) -> "Heads":
        """The same heads without norms, positions or latents: those of a cross-attention."""
        return Heads(self.h, self.kv_heads, self.head_dim, self.v_head_dim)


def as_heads(heads) -> Heads:
    """``heads`` as ``Heads``: itself, or a number (or expression) of query heads."""
    return heads if isinstance(heads, Heads) else Heads(heads)


@dataclass(frozen=True)
class Scores:
    """What the scores of an attention block are.

    * ``causal``: a causal mask (matters under ``causal_flops="exact"``);
    * ``window``: a sliding window of ``window`` keys (``ops.matmul.stored_keys``), or a
      ``Chunk`` (attention within aligned chunks, Llama 4);
    * ``bias`` (``SCORE_BIASES``): ``"alibi"`` a fixed bias, ``"relative"`` a learned one (T5;
      its table belongs to the model, ``ends.relative_bias``);
    * ``softcap``: ``tanh`` caps the scores (Gemma 2); ``sinks``: a learned sink logit per
      head (GPT-OSS);
    * ``dropout``: the dropout of the attention probabilities (``None``: the block's
      ``dropouts``);
    * ``keys``: the keys each query attends when they are not the block's own ``l`` tokens:
      decoding one token over a cache, or a cross-attention's encoder tokens (``None``: ``l``).
    """

    causal: bool = False
    window: Expr | Chunk | None = None
    bias: str | None = None
    softcap: bool = False
    sinks: bool = False
    dropout: bool | None = None
    keys: Expr | None = None

    def __post_init__(self):
        one_of(self.bias, "bias", SCORE_BIASES)
        flags(self, "causal", "softcap", "sinks")
        flags(self, "dropout", none=True)

    @property
    def span(self) -> Expr | None:
        """The keys a window (or chunk) spans; ``None`` without one."""
        return self.window.size if isinstance(self.window, Chunk) else self.window

    @property
    def sizes(self) -> dict:
        """The sizes a block checks with its dimensions: ``window`` (its span), when set."""
        return {} if self.span is None else {"window": self.span}

    def checked(self, dims: dict) -> "Scores":
        """These scores with the window as ``dims`` holds it once checked (exact)."""
        if self.window is None:
            return self
        return replace(self, window=Chunk(dims["window"]) if isinstance(self.window, Chunk) else dims["window"])


@dataclass(frozen=True)
class Projections:
    """The projections around the attention core.

    * ``qkv_bias`` biases the Q, K, V projection(s), ``out_bias`` the output projection;
    * ``clip``: the Q, K, V projection's output is clamped element-wise (OLMo's
      ``clip_qkv``: a ``qkv_clip`` row, one FLOP an element);
    * ``cross``: cross-attention (T5's decoder): ``q_proj`` on this stream, ``kv_proj`` on the
      encoder's output of ``Scores.keys`` tokens.
    """

    qkv_bias: bool = True
    out_bias: bool = True
    clip: bool = False
    cross: bool = False

    def __post_init__(self):
        flags(self, *(field.name for field in fields(self)))


@dataclass(frozen=True)
class Feedforward:
    """The MLP of a layer, or its mixture of experts.

    * ``gated``: ``fc1`` makes a gate and a value (SwiGLU, GeGLU);
    * ``bias``: the MLP's biases (``None``: as the attention's output projection; a mixture
      of experts is biased only when this says so);
    * ``activation_dropout``: the dropout after the activation (``None``: the layer's
      ``dropouts``);
    * ``moe`` (a ``blocks.moe.MoE``): a mixture of experts instead of the MLP, placed and fed
      as ``experts`` says (a ``blocks.wiring.Experts``: ``ep``, ``etp``, ``capacity_factor``,
      ``imbalance``, ``replicated``; ``None``: one rank holds every expert).
    """

    gated: bool = False
    bias: bool | None = None
    activation_dropout: bool | None = None
    moe: object | None = None
    experts: object | None = None

    def __post_init__(self):
        flags(self, "gated")
        flags(self, "bias", "activation_dropout", none=True)
        if self.experts is not None and self.moe is None:
            raise InputError("experts are the keywords of a mixture of experts: they need moe", "experts")

