"""``Architecture``: what the network is (sizes and the choices that change its cost)."""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, ceiling, sympify


@dataclass(frozen=True)
class Architecture:
    """A transformer: sizes and the choices that change its cost."""

    name: str
    n_layers: Expr
    e: Expr
    h: Expr
    f: Expr
    vocab: Expr
    kv_heads: Expr | None = None
    positions: Expr = 0          # rows of a learned position table (0: none, e.g. rotary)
    token_types: Expr = 0        # BERT segment embeddings
    mlp: str = "gelu"            # "gelu", "swiglu", "geglu"
    norm: str = "layer"          # "layer", "rms"
    rotary: bool = False
    tied: bool = True
    qkv_bias: bool = True
    bias: bool = True
    dropouts: bool = True
    causal: bool = True
    embedding_norm: bool = False
    final_norm: bool = True
    lm_head: bool = True         # LM head and loss; False for an encoder's base model
    pooler: bool = False
    vocab_multiple: int = 1      # Megatron pads the vocabulary to a multiple of this x m1
    context: Expr = 0            # the context length the model was trained for (0: not stated)

    def __post_init__(self):
        for name, allowed in (("mlp", ("gelu", "swiglu", "geglu")), ("norm", ("layer", "rms"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"architecture {self.name}: {name} must be one of "
                                 f"{', '.join(allowed)}, got {getattr(self, name)!r}")

    def padded_vocab(self, m1=1) -> Expr:
        """Vocabulary rounded up to a multiple of ``vocab_multiple * m1`` (numbers only)."""
        vocab, unit = sympify(self.vocab), sympify(self.vocab_multiple) * sympify(m1)
        if vocab.is_number and unit.is_number:
            return ceiling(vocab / unit) * unit
        return vocab
