"""``Architecture``: what the network is (sizes and the choices that change its cost).

Every choice is a named setting, held in one of the architecture's values
(``models.architecture_values``: ``attention``, ``positional``, ``windows``, ``feedforward``,
``normalization``, ``dropout``, ``ends``) and readable under its flat name (``FLAT``);
``models.stack`` turns them into blocks.

====================== ======================================================================
setting                meaning (default)
====================== ======================================================================
``n_layers, e, h, f``  layers, width, query heads, MLP width; ``vocab`` the vocabulary
``kv_heads``           key/value heads (``None``: ``h``; 1 is multi-query; ``kv`` the derived count)
``head_dim``           query/key head size (``None``: ``e/h``); ``v_head_dim`` the value
                       head size (``None``: ``head_dim``); ``head_size``, ``value_size`` derived
``positions``          rows of a learned position table (0: none); ``token_types`` BERT's
``mlp``                ``gelu``, ``relu``, ``silu`` (one activation) or ``swiglu``,
                       ``geglu``, ``reglu`` (gated: ``fc1`` is ``e -> 2f``)
``norm``               a kind of ``ops.norm.NORMS``: ``layer``, ``layer_nobias``,
                       ``layer_noaffine``, ``rms``, ``rms_noaffine``
``norms``              norms per layer: 2; 4 (Gemma 2, 3: after each sublayer too); a
                       ``parallel`` layer has 1 (GPT-J, Falcon-7B, Phi) or 2 (GPT-NeoX)
``parallel``           attention and MLP read the same input and are summed
``rotary``             rotary positions on ``rotary_dim`` dims of each head (``None``: all);
                       ``rope_pattern``: which layers rotate, one boolean each (``None``:
                       all; SmolLM3's and EXAONE 4's layers without positions, NoPE)
``qk_norm``            ``None``, ``"head"`` (Qwen3, Gemma 3, Phi), ``"projection"`` (OLMo 2),
                       ``"l2"`` (Llama 4: per head without weights, on the layers that rotate),
                       ``"head_each"`` (Cohere: per head, with weights for every head)
``qkv_bias``           biases on Q, K, V; ``bias`` on the output projection and (unless
                       ``mlp_bias`` says otherwise) the MLP; ``clip_qkv``: Q, K, V clamped
``window``             sliding-window size of ``windowed_layers`` layers (``None``: all);
                       ``chunked``: the window is a chunk (attention within aligned blocks of
                       ``window`` tokens, Llama 4);
                       ``window_pattern``: which layers, one boolean each, where known
``score_bias``         ``None``, ``"alibi"`` (BLOOM, Falcon), ``"relative"`` (T5, with
                       ``relative_buckets`` rows per head)
``softcap``            ``tanh`` cap on attention scores; ``logit_softcap`` on the logits
``sinks``              a learned sink logit per attention head (GPT-OSS)
``dropouts``           the residual dropouts and, unless ``attention_dropout``,
                       ``embedding_dropout`` or ``activation_dropout`` say otherwise, those
                       of the attention probabilities, the embeddings, after the activation
``tied``               LM head shares the word table; ``head_bias``: the LM head has a bias
``embedding_projection`` OPT's ``word_embed_proj_dim`` when it differs from ``e``
``task``               ``""`` (LM head or base model), ``masked_lm``, ``pretraining``,
                       ``classification`` (``num_labels``, ``classifier``: ``blocks.heads``)
``decoder_layers``     encoder-decoder (T5): ``n_layers`` encoder layers, then this many
                       decoder layers with cross-attention
``moe``                a mixture of experts (``blocks.moe.MoE``) in the layers it names
                       (``None``: every MLP dense)
``latent``             multi-head latent attention (``blocks.latent_attention.Latent``;
                       DeepSeek-V2, V3) instead of ``h`` query and ``kv_heads`` K/V heads
``mtp_layers``         DeepSeek-V3's multi-token-prediction modules (``blocks.mtp``), each
                       one more layer like the last; trained unless ``Training.mtp`` is off
``notes``              what reading it accepted without effect (``models.families.ignored``);
                       not part of the model: equal models compare equal whatever their notes
====================== ======================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from sympy import Expr, ceiling, sympify

from symbolic_cost.blocks.heads import CLASSIFIERS, TASKS
from symbolic_cost.blocks.specs import Heads
from symbolic_cost.checks import (InputError, InputTypeError, check_rules, counts, exact, flag, positive_dims, shown,
                                  whole)
from symbolic_cost.blocks.layer import NORMS_PER_LAYER
from symbolic_cost.ops.norm import NORMS
from symbolic_cost.flat import FlatNames, with_flat
from symbolic_cost.models.architecture_values import (Attention, Dropouts, Ends, Feedforward, Normalization,
                                                      Positions, Windows)

PLAIN_MLPS, GATED_MLPS = ("gelu", "relu", "silu"), ("swiglu", "geglu", "reglu")

SIZES = ("n_layers", "e", "h", "f", "vocab", "num_labels", "vocab_multiple", "norms")
OPTIONAL_SIZES = ("kv_heads", "head_dim", "v_head_dim", "rotary_dim", "window", "windowed_layers",
                  "embedding_projection")
COUNTS = ("positions", "token_types", "context", "relative_buckets", "decoder_layers", "mtp_layers")
"""Positive integers; positive integers or ``None``; non-negative integers.  Every field
declared ``bool`` (or ``bool | None``) must be a boolean (or ``None``)."""


def check_sizes(arch) -> None:
    """Refuse sizes that are not (positive) integers, booleans that are not booleans, a name
    that is not text, and heads that do not divide what they split (``checks.check_rules``)."""
    if not isinstance(arch.name, str):
        raise InputTypeError(f"name must be text, got {shown(arch.name)}", "name")
    sizes = {k: getattr(arch, k) for k in SIZES}
    sizes.update({k: getattr(arch, k) for k in OPTIONAL_SIZES if getattr(arch, k) is not None})
    for name in ("decoder_layers", "mtp_layers"):       # the decoder's and MTP's layers are built one by one
        layers = exact(getattr(arch, name), name)       # the tighter bound first, before the sizes' 2**53
        if layers.is_number and layers > MAX_LAYERS:
            raise InputError(f"{name} must be at most {MAX_LAYERS:,} (no model stacks more), got "
                             f"{layers if layers < 10**30 else 'a number of more than 30 digits'}", name)
    positive_dims(**sizes)                  # each at most 2**53, as config.json's reader bounds them
    counts(**{k: getattr(arch, k) for k in COUNTS})
    for name in ("bias", "causal") + _BOOLS + tuple(n for n in _OPTIONAL_BOOLS if getattr(arch, n) is not None):
        flag(getattr(arch, name), name)
    dims = {k: sizes[k] for k in ("e", "h", "kv_heads") if k in sizes}
    check_rules(dims, rules=(("kv_heads", "h"),) + ((("h", "e"),) if arch.head_dim is None else ()))
    if not sympify(arch.mtp_layers).is_number:
        raise InputError(f"mtp_layers must be a number: each multi-token-prediction module is built as a layer of "
                         f"its own, got {arch.mtp_layers}", "mtp_layers")


MAX_LAYERS = 10**5
"""The most decoder layers and multi-token-prediction modules ``Architecture`` takes (the deepest
published stacks have a few hundred): each is built as a layer of its own, where a decoder-only
stack of one kind of layer is counted in closed form, however deep."""


_UNSET = object()
"""``h``, ``f`` and ``vocab`` not given in place (``None`` given is refused as a size)."""

_VALUES = {"attention": Attention, "positional": Positions, "windows": Windows, "feedforward": Feedforward,
           "normalization": Normalization, "dropout": Dropouts, "ends": Ends}
"""The value fields of ``Architecture`` and their types (``models.architecture_values``)."""

FLAT = {item.name: (name, item.name) for name, kind in _VALUES.items() for item in fields(kind)}
"""``Architecture``'s flat keywords (its fields before the tree): each names one attribute of one
of its values.  ``Architecture("gpt", 12, 768, 12, 3072, 50257, rotary=True)``,
``replace(arch, kv_heads=8)`` and ``arch.kv_heads`` go through it."""

_BOOLS, _OPTIONAL_BOOLS = (tuple(item.name for kind in _VALUES.values() for item in fields(kind) if item.type == t)
                           for t in ("bool", "bool | None"))
"""The flat names that hold a boolean, and a boolean or ``None``."""


MADE_BY = " (models.config.preset('gpt2'), models.config.from_config(...) or Architecture(...))"
"""Where an ``Architecture`` comes from, for the refusal of anything else where one belongs."""


@dataclass(frozen=True, init=False)
class Architecture(FlatNames):
    """A transformer: sizes and the choices that change its cost (see the module docstring),
    ``name``, ``n_layers`` layers of width ``e``, ``bias`` on the output projection (and the MLP
    unless ``mlp_bias``), ``causal``, an encoder-decoder's ``decoder_layers``, ``mtp_layers``, and
    one value per part (``models.architecture_values``): ``attention``, ``positional``, ``windows``,
    ``feedforward``, ``normalization``, ``dropout``, ``ends``.  Every attribute of a value is also
    a keyword and an attribute under its flat name (``FLAT``); ``h``, ``f`` and ``vocab`` may be
    given in place, after ``e``.

    >>> gpt = Architecture("gpt", 12, 768, 12, 3072, 50257, rotary=True)
    >>> gpt.attention.h, gpt.h, gpt.positional.rotary, gpt.ends.vocab
    (12, 12, True, 50257)
    """

    FLAT = FLAT                  # the flat names (FlatNames reads them)

    name: str
    n_layers: Expr
    e: Expr
    bias: bool
    causal: bool
    decoder_layers: Expr
    mtp_layers: Expr
    attention: Attention
    positional: Positions
    windows: Windows
    feedforward: Feedforward
    normalization: Normalization
    dropout: Dropouts
    ends: Ends
    notes: tuple = field(default=(), compare=False, repr=False)   # config.json keys accepted without effect

    def __init__(self, name: str, n_layers: Expr, e: Expr, h: Expr = _UNSET, f: Expr = _UNSET, vocab: Expr = _UNSET, *,
                 bias: bool = True, causal: bool = True, decoder_layers: Expr = 0, mtp_layers: Expr = 0,
                 attention: Attention = Attention(), positional: Positions = Positions(), windows: Windows = Windows(),
                 feedforward: Feedforward = Feedforward(), normalization: Normalization = Normalization(),
                 dropout: Dropouts = Dropouts(), ends: Ends = Ends(), notes: tuple = (), **flat):
        flat.update({k: v for k, v in dict(h=h, f=f, vocab=vocab).items() if v is not _UNSET})
        values = with_flat(dict(attention=attention, positional=positional, windows=windows, feedforward=feedforward,
                                normalization=normalization, dropout=dropout, ends=ends), flat, FLAT, _VALUES,
                           "Architecture")
        for key, value in dict(name=name, n_layers=n_layers, e=e, bias=bias, causal=causal,
                               decoder_layers=decoder_layers, mtp_layers=mtp_layers, notes=notes, **values).items():
            object.__setattr__(self, key, value)
        self.__post_init__()


    def __post_init__(self):
        self._settle_sizes()
        check_sizes(self)            # the same message as every other entrance of the same rule
        for name, allowed in (("mlp", PLAIN_MLPS + GATED_MLPS), ("norm", tuple(NORMS)), ("task", TASKS),
                              ("classifier", CLASSIFIERS), ("qk_norm", (None, "head", "projection", "l2", "head_each")),
                              ("score_bias", (None, "alibi", "relative")),
                              ("norms", NORMS_PER_LAYER[bool(self.parallel)])):
            if getattr(self, name) not in allowed:
                raise InputError(f"architecture {self.name}: {name} must be one of "
                                 f"{', '.join(map(str, allowed))}, got {getattr(self, name)!r}", name)
        if self.task and (self.lm_head or self.pooler):
            raise InputError(f"architecture {self.name}: a task head ({self.task}) replaces the LM head "
                             f"and the pooler (set lm_head=False, pooler=False)", "task")
        self._check_heads_used()
        if (self.score_bias == "relative") != (sympify(self.relative_buckets) != 0):
            raise InputError(f"architecture {self.name}: relative_buckets must be set exactly when "
                             f"score_bias is 'relative'", "relative_buckets")
        if self.windowed_layers is not None and self.window is None:
            raise InputError(f"architecture {self.name}: windowed_layers needs a window", "windowed_layers")
        pattern = self.window_pattern
        if pattern is not None and not (isinstance(pattern, tuple) and all(isinstance(x, bool) for x in pattern)
                                        and sympify(len(pattern)) == sympify(self.n_layers)
                                        and sympify(sum(pattern)) == sympify(self.windowed_layers)):
            raise InputError(f"architecture {self.name}: window_pattern must be one boolean per layer, as many "
                             f"true as windowed_layers", "window_pattern")
        rope = self.rope_pattern
        if rope is not None and not (self.rotary and isinstance(rope, tuple) and all(isinstance(x, bool) for x in rope)
                                     and sympify(len(rope)) == sympify(self.n_layers)):
            raise InputError(f"architecture {self.name}: rope_pattern must be one boolean per layer of a model with "
                             f"rotary positions", "rope_pattern")
        extra = sympify(self.n_layers) - sympify(0 if self.windowed_layers is None else self.windowed_layers)
        if extra.is_negative:
            raise InputError(f"architecture {self.name}: windowed_layers must not exceed n_layers", "windowed_layers")
        if (self.moe is not None or self.latent is not None) and (self.parallel or self.encoder_decoder):
            raise InputError(f"architecture {self.name}: experts and latent attention are modelled in "
                             f"sequential decoder layers only", "parallel" if self.parallel else "encoder_decoder")
        if self.latent is not None and sympify(self.kv) != sympify(self.h):
            raise InputError(f"architecture {self.name}: latent attention makes keys and values for every "
                             f"head (kv_heads must be h, got {self.kv_heads})", "kv_heads")
        self._check_rotary()
        if self.chunked and self.window is None:
            raise InputError(f"architecture {self.name}: chunked attention splits the sequence in chunks of the "
                             f"window, and there is none; it would be ignored", "chunked")

    def _settle_sizes(self) -> None:
        """Integral floats and numpy integers among the sizes stored as the ints they are
        (``checks.whole``), in the value that holds each."""
        for name in SIZES + OPTIONAL_SIZES + COUNTS:
            value = getattr(self, name)
            settled = whole(value)
            if settled is value:
                continue
            if name in FLAT:
                part, attribute = FLAT[name]
                object.__setattr__(self, part, replace(getattr(self, part), **{attribute: settled}))
            else:
                object.__setattr__(self, name, settled)

    def _check_heads_used(self) -> None:
        """Refuse a head's setting where that head is absent (it would be ignored): ``num_labels``
        and ``classifier`` belong to ``task="classification"``, ``head_bias`` to the LM head."""
        unused = [(name, getattr(self, name), why) for name, plain, why in (
            ("num_labels", 2, "the sequence classifier (task='classification')"),
            ("classifier", "pooled", "the sequence classifier (task='classification')"))
            if self.task != "classification" and getattr(self, name) != plain]
        if self.head_bias and not self.lm_head:
            unused.append(("head_bias", True, "the LM head (lm_head=True)"))
        for name, value, why in unused:
            raise InputError(f"architecture {self.name}: {name}={value!r} applies to {why}, which it has not; it "
                             f"would be ignored", name)

    def _check_rotary(self) -> None:
        """``rotary_dim``: given with rotary positions only, at most the head's dimensions (an odd
        count is taken as given: transformers builds GLM's ``head_dim x partial_rotary_factor`` so)."""
        if self.rotary_dim is None:
            return
        if not self.rotary:
            raise InputError(f"architecture {self.name}: rotary_dim applies to rotary positions (rotary=True); "
                             f"it would be ignored", "rotary_dim")
        if (sympify(self.rotary_dim) - self.head_size).is_positive:
            raise InputError(f"architecture {self.name}: rotary_dim must be at most a head's {self.head_size} "
                             f"dimensions, got {self.rotary_dim}", "rotary_dim")

    @property
    def kv(self) -> Expr:
        """Key/value heads: ``kv_heads``, or ``h`` (one per query head) when not given, as the
        attention block's ``blocks.specs.Heads`` derives them (the one home of the default)."""
        return self._heads.kv

    @property
    def head_size(self) -> Expr:
        """Query/key head size: ``head_dim``, or ``e/h`` (the heads split the width) when not given."""
        return self._heads.size(self.e)

    @property
    def value_size(self) -> Expr:
        """Value head size: ``v_head_dim``, or the query/key head size when not given."""
        return self._heads.value_size(self.e)

    @property
    def _heads(self) -> Heads:
        """The sizes of the heads as a ``blocks.specs.Heads``, which derives their defaults."""
        return Heads(self.h, self.kv_heads, self.head_dim, self.v_head_dim)

    @property
    def gated(self) -> bool:
        """Whether the MLP is gated (``fc1`` makes a gate and a value)."""
        return self.mlp in GATED_MLPS

    @property
    def encoder_decoder(self) -> bool:
        return sympify(self.decoder_layers) != 0

    @property
    def depth(self) -> Expr:
        """Transformer layers a pipeline splits: ``n_layers``, and an encoder-decoder's
        ``decoder_layers`` after them.

        >>> Architecture("t5-like", 6, 512, 8, 2048, 32128, decoder_layers=6).depth
        12
        """
        return sympify(self.n_layers) + sympify(self.decoder_layers)

    def padded_vocab(self, m1=1) -> Expr:
        """Vocabulary rounded up to a multiple of ``vocab_multiple * m1`` (Megatron-LM pads it so
        that each of the ``m1`` devices holds whole rows).  A given vocabulary is padded even for a
        symbolic ``m1`` (``ceiling(v/(k m1)) k m1``, exact once ``m1`` is a number); a symbolic
        vocabulary stands for the padded one."""
        vocab, unit = sympify(self.vocab), sympify(self.vocab_multiple) * sympify(m1)
        if vocab.is_number:      # unevaluated for a symbolic unit: SymPy cannot round it yet anyway
            return ceiling(vocab / unit, evaluate=unit.is_number) * unit
        return vocab
