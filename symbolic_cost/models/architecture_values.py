"""The values an ``Architecture`` is made of, one part of the network each.

- ``Attention``: the heads (``h``, ``kv_heads``, head sizes, latent attention), their biases, norms,
  clamps, score biases (ALiBi, T5's relative buckets), soft caps and sinks
- ``Positions``: learned position and token-type tables, rotary positions (which dims, which layers)
  and the context the model was trained for
- ``Windows``: sliding windows or chunks: their size, how many layers and which
- ``Feedforward``: the MLP: width ``f``, activation (plain or gated), its bias, a mixture of experts
- ``Normalization``: the kind of norm, norms a layer, parallel attention and MLP, the embedding's
  norm and the final one
- ``Dropouts``: the residual dropouts and those of the attention, the embeddings, the activation
- ``Ends``: the vocabulary (and Megatron's padding), the tied or untied LM head, its bias and soft
  cap, a pooler, OPT's embedding projection, a task head

Each field keeps the name of ``Architecture``'s keyword (``models.architecture.FLAT``), and the
rules stay ``Architecture``'s: a value is a part of a model, checked with the whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr

from symbolic_cost.blocks.latent_attention import Latent
from symbolic_cost.blocks.moe import MoE
from symbolic_cost.checks import InputError

__all__ = ["Attention", "Positions", "Windows", "Feedforward", "Normalization", "Dropouts", "Ends"]


@dataclass(frozen=True)
class Attention:
    """``h`` query heads and ``kv_heads`` key/value heads (``None``: ``h``) of ``head_dim``
    (``None``: ``e/h``; values ``v_head_dim``, ``None``: ``head_dim``), or ``latent`` attention
    (``blocks.latent_attention.Latent``); ``qkv_bias`` on Q, K, V; ``clip_qkv``; ``qk_norm``;
    ``score_bias`` (``"alibi"``, ``"relative"`` with ``relative_buckets`` rows per head);
    ``softcap`` on the scores; ``sinks``, a learned sink logit per head."""

    h: Expr = None
    kv_heads: Expr | None = None
    head_dim: Expr | None = None
    v_head_dim: Expr | None = None
    qkv_bias: bool = True
    clip_qkv: bool = False
    qk_norm: str | None = None
    score_bias: str | None = None
    relative_buckets: Expr = 0
    softcap: bool = False
    sinks: bool = False
    latent: Latent | None = None


@dataclass(frozen=True)
class Positions:
    """``positions`` rows of a learned position table (0: none), ``token_types`` (BERT's segments),
    ``rotary`` positions on ``rotary_dim`` dims of each head (``None``: all) on the layers
    ``rope_pattern`` marks (``None``: all), and ``context``, the length the model was trained for
    (0: not stated)."""

    positions: Expr = 0
    token_types: Expr = 0
    rotary: bool = False
    rotary_dim: Expr | None = None
    rope_pattern: tuple | None = None
    context: Expr = 0


@dataclass(frozen=True)
class Windows:
    """A sliding ``window`` (``chunked``: aligned chunks, Llama 4) on ``windowed_layers`` layers
    (``None``: all), ``window_pattern`` saying which, one boolean a layer, where known."""

    window: Expr | None = None
    windowed_layers: Expr | None = None
    window_pattern: tuple | None = None
    chunked: bool = False


@dataclass(frozen=True)
class Feedforward:
    """The MLP: width ``f``, activation ``mlp`` (plain: ``gelu``, ``relu``, ``silu``; gated:
    ``swiglu``, ``geglu``, ``reglu``), ``mlp_bias`` (``None``: ``Architecture.bias``), and ``moe``,
    a mixture of experts in the layers it names (``None``: every MLP dense)."""

    f: Expr = None
    mlp: str = "gelu"
    mlp_bias: bool | None = None
    moe: MoE | None = None

    def __post_init__(self):
        if self.moe is not None and not isinstance(self.moe, MoE):
            raise InputError(f"moe must be a blocks.moe.MoE, got {self.moe!r}", "moe")


@dataclass(frozen=True)
class Normalization:
    """``norm`` (``ops.norm.NORMS``), ``norms`` a layer (2; 4 after each sublayer too; a
    ``parallel`` layer 1 or 2), ``parallel`` attention and MLP on the same input, and the
    embedding's and the final norm."""

    norm: str = "layer"
    norms: int = 2
    parallel: bool = False
    embedding_norm: bool = False
    final_norm: bool = True


@dataclass(frozen=True)
class Dropouts:
    """``dropouts``: the residual dropouts, and those below unless they say otherwise (``None``):
    the attention probabilities', the embeddings', after the activation (``None`` there: the
    ``mlp_activation_dropout`` convention)."""

    dropouts: bool = True
    attention_dropout: bool | None = None
    embedding_dropout: bool | None = None
    activation_dropout: bool | None = None


@dataclass(frozen=True)
class Ends:
    """The model's two ends: ``vocab`` (padded to ``vocab_multiple x m1``, as Megatron-LM does), the
    LM head (``lm_head``; ``tied`` to the word table; ``head_bias``; ``logit_softcap``), a
    ``pooler``, OPT's ``embedding_projection``, and a ``task`` head (``num_labels``, ``classifier``:
    ``blocks.heads``)."""

    vocab: Expr = None
    vocab_multiple: int = 1
    tied: bool = True
    lm_head: bool = True
    pooler: bool = False
    head_bias: bool = False
    logit_softcap: bool = False
    embedding_projection: Expr | None = None
    task: str = ""
    num_labels: Expr = 2
    classifier: str = "pooled"
