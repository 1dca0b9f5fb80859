"""Reading one ``config.json`` strictly: every key is read, or declared not to change the cost,
or refused by name; every value has the type its ``transformers`` config class gives it.

``Keys`` hands out typed values with that class's defaults and remembers what it read;
``Keys.done`` notes the keys the family's ``transformers`` classes never read (``ignored``) and
refuses whatever else was neither read nor declared (an ``InputError`` naming the keys).  ``COMMON`` lists the keys of
every ``PreTrainedConfig`` (and of generation, tokenizers, the hub) that never change the cost
of training the model.
"""

from __future__ import annotations

import re

from fractions import Fraction

from symbolic_cost.checks import InputError, shown
from symbolic_cost.models.families.ignored import ignored, note

MISSING = object()

COMMON = frozenset("""
    model_type transformers_version architectures _name_or_path name_or_path torch_dtype dtype
    _commit_hash _attn_implementation attn_implementation _attn_implementation_autoset
    use_cache bos_token_id eos_token_id pad_token_id sep_token_id cls_token_id mask_token_id
    unk_token_id decoder_start_token_id forced_bos_token_id forced_eos_token_id suppress_tokens
    begin_suppress_tokens tokenizer_class initializer_range init_std initializer_factor
    output_hidden_states output_attentions output_scores return_dict return_dict_in_generate
    torchscript pruned_heads chunk_size_feed_forward id2label label2id num_labels problem_type
    finetuning_task task_specific_params prefix max_length min_length do_sample early_stopping
    num_beams num_beam_groups diversity_penalty temperature top_k top_p typical_p
    repetition_penalty length_penalty no_repeat_ngram_size encoder_no_repeat_ngram_size
    bad_words_ids num_return_sequences remove_invalid_values exponential_decay_length_penalty
    tf_legacy_loss use_bfloat16 tie_encoder_decoder cross_attention_hidden_size
    gradient_checkpointing auto_map custom_pipelines keys_to_ignore_at_inference
""".split())
"""Keys no family's cost depends on (identifiers, initialisation, output and generation
switches, label names: the number of labels is read from ``id2label`` where a task needs it)."""

STORED = ("quantization_config: how the checkpoint stores its weights, which the model's shapes do not change; "
          "inference serves them so unless --weights says otherwise (models.config.stored_weights), training "
          "counts its --precision")
"""The note of a ``config.json`` of any family that states a ``quantization_config``."""

ROPE_KEYS = frozenset("""
    rope_type type rope_theta factor original_max_position_embeddings low_freq_factor
    high_freq_factor short_factor long_factor beta_fast beta_slow mscale mscale_all_dim
    attention_factor truncate short_mscale long_mscale partial_rotary_factor
""".split())
"""Keys of ``rope_parameters`` / ``rope_scaling``: only ``partial_rotary_factor`` changes the
cost (the frequencies and their scaling are computed once, outside the layers)."""

PLAIN_ACTIVATIONS = frozenset("""
    gelu gelu_new gelu_fast gelu_pytorch_tanh gelu_python gelu_accurate gelu_10 quick_gelu
    relu relu2 relu6 leaky_relu silu swish mish tanh sigmoid
""".split())
"""Element-wise activations, each counted one FLOP per element (``ops.gelu``)."""


LAYER_COUNTS = ("num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers")
MAX_LAYERS = 1_000_000
"""Layer counts above this are refused: the readers record each layer's kind (windows,
experts, rotary positions), and no model comes near it."""

MTP_COUNTS = ("num_nextn_predict_layers", "num_mtp_layers")
MAX_MTP = 64
"""Multi-token-prediction modules above this are refused: each is a layer with its own model
cost (DeepSeek-V3 and GLM-4.5 have one; a million ran past the time budget, unnamed)."""

EXPERT_COUNTS = ("num_local_experts", "num_experts", "n_routed_experts")
"""The spellings of the routed experts' count: a family reads the one its file states, the others
in its place (Mixtral's ``num_local_experts``, else ``num_experts``)."""

SIZES = frozenset("""
hidden_size n_embd d_model num_hidden_layers n_layer num_layers num_attention_heads n_head num_heads vocab_size
intermediate_size moe_intermediate_size num_experts_per_tok
""".split()) | frozenset(EXPERT_COUNTS)
"""The keys that make a model's size: every published ``config.json`` states them, so one left out is
taken at its ``transformers`` default with a note (``Keys.done``); ``{"model_type": "llama"}`` alone is
the 6.7B model of ``LlamaConfig()``, which nothing in the file asked for, and a Mixtral file without
``num_local_experts`` has 8 experts.  The experts' count is noted once, and not where the file
states it under another of its spellings (``EXPERT_COUNTS``)."""


class Keys:
    """The keys of one parsed ``config.json`` as the family ``family`` reads them."""

    def __init__(self, config, family: str):
        if not isinstance(config, dict):
            raise InputError(f"config.json must be a JSON object, got {type(config).__name__}", "config.json")
        self.config, self.family, self.used = config, family, set(COMMON)
        self.notes: list[str] = []     # keys accepted without effect (``families.ignored``)
        self.defaulted: dict = {}      # keys of ``SIZES`` left out, at the family's default
        labels, count = config.get("id2label"), config.get("num_labels")
        if isinstance(labels, dict) and count is not None and len(labels) != count:
            raise self.error(f"num_labels={shown(count)} contradicts id2label, which names {len(labels)} labels "
                             f"(transformers refuses it)")

    def error(self, message: str, argument: str | None = None) -> InputError:
        """The refusal of ``message``, naming ``argument``: by default the key the message starts
        with (``"num_experts_per_tok is null: ..."``), else the file itself."""
        if argument is None:
            head = re.match(r"[A-Za-z_][A-Za-z0-9_]*", message)
            word = head.group(0) if head else ""
            argument = word if word in self.config or "_" in word else "config.json"
        return InputError(f"config.json ({self.family}): {message}", argument)

    def raw(self, key, default=MISSING, nullable=True):
        """The value of ``key`` as written (``default`` when absent; ``MISSING``: refused),
        unchecked but for null (refused unless ``nullable``); ``key`` counts as read."""
        self.used.add(key)
        if key not in self.config:
            if default is MISSING:
                raise self.error(f"missing key {key!r}", key)
            if key in SIZES:
                self.defaulted[key] = default
            return default
        if self.config[key] is None and not nullable:     # transformers' typed fields refuse null too
            raise self.error(f"{key} must not be null (leave the key out for its default)")
        return self.config[key]

    def int(self, key, default=MISSING, *, nullable=False, zero=False):
        """A positive integer (``zero``: or 0); ``None`` when ``nullable`` and null (or absent
        with a ``None`` default)."""
        value = self.raw(key, default, nullable)
        if value is None and nullable:
            return None
        if type(value) is not int or value < 0 or (value == 0 and not zero):
            raise self.error(f"{key} must be a {'non-negative' if zero else 'positive'} integer, got {shown(value)}")
        if value > 2**53:
            raise self.error(f"{key} must be at most 2**53 (a size a float holds exactly), got {shown(value)}")
        if key in LAYER_COUNTS and value > MAX_LAYERS:
            raise self.error(f"{key} must be at most {MAX_LAYERS:,} (each layer's kind is recorded), got {shown(value)}")
        if key in MTP_COUNTS and value > MAX_MTP:
            raise self.error(f"{key} must be at most {MAX_MTP} (each multi-token-prediction module is built as a "
                             f"layer of its own; published models have 1 to 3), got {shown(value)}")
        return value

    def flag(self, key, default=MISSING, *, nullable=False):
        """A boolean (JSON ``true``/``false``; null only where ``nullable``: then the default)."""
        value = self.raw(key, default, nullable)
        if value is None and nullable:
            return default
        if type(value) is not bool:
            raise self.error(f"{key} must be true or false, got {value!r}")
        return value

    def text(self, key, default=MISSING, choices=None):
        """A string, one of ``choices`` when given."""
        value = self.raw(key, default, False)
        if not isinstance(value, str) or (choices is not None and value not in choices):
            allowed = f"one of {', '.join(sorted(choices))}" if choices is not None else "a string"
            raise self.error(f"{key} must be {allowed}, got {value!r}")
        return value

    def number(self, key, default=MISSING, *, nullable=False):
        """A non-negative number as an exact ``Fraction`` (``0.1`` is ``1/10``, as written)."""
        value = self.raw(key, default, nullable)
        if value is None and nullable:
            return None
        if type(value) not in (int, float) or not value >= 0 or value == float("inf"):
            raise self.error(f"{key} must be a non-negative number, got {shown(value)}")
        return Fraction(str(value))

    def dropouts(self, *keys_and_defaults) -> bool:
        """Whether any of the dropout probabilities ``(key, default), ...`` is nonzero."""
        values = [self.number(key, default, nullable=True) for key, default in keys_and_defaults]
        for (key, _), value in zip(keys_and_defaults, values):
            if value is not None and value > 1:
                raise self.error(f"{key} is a probability, from 0 to 1, got {float(value):g}")
        return any(value not in (None, 0) for value in values)

    def dropout_fields(self, residual=(), attention=(), embedding=()) -> dict:
        """``Architecture`` dropout fields from the probabilities that govern each site:
        ``(key, default)`` pairs for the residual (closing) dropouts, those of the attention
        probabilities and of the embeddings; a site with no key has no dropout."""
        return dict(dropouts=self.dropouts(*residual), attention_dropout=self.dropouts(*attention),
                    embedding_dropout=self.dropouts(*embedding))

    def known(self, *keys):
        """Declare keys that do not change the cost (their values are not checked)."""
        self.used.update(keys)

    def refuse_if(self, key, bad, why, default=MISSING):
        """Refuse a value of ``key`` for which ``bad(value)`` holds: the family cannot count it."""
        value = self.raw(key, default, True)
        if bad(value):
            raise self.error(f"{key}={value!r} is not supported ({why})")

    def rotary_fraction(self, default, *top_level):
        """The rotated share of each head: ``partial_rotary_factor`` of ``rope_parameters`` (or
        the legacy ``rope_scaling``), else the first of the ``top_level`` keys, else ``default``.
        Unknown keys inside the rope dictionaries are refused by their path."""
        found = None
        for key in ("rope_parameters", "rope_scaling"):
            rope = self.raw(key, None, True)
            if rope is None:
                continue
            if not isinstance(rope, dict):
                raise self.error(f"{key} must be an object, got {rope!r}")
            nested = all(isinstance(v, dict) for v in rope.values()) and rope
            for part, params in (rope.items() if nested else [(None, rope)]):
                for name in params:
                    if name not in ROPE_KEYS:
                        raise self.error(f"unknown key {key}.{f'{part}.' if part else ''}{name}")
                if "partial_rotary_factor" in params and found is None:
                    found = self._fraction(f"{key}.partial_rotary_factor", params["partial_rotary_factor"])
        for key in top_level:
            value = self.number(key, None, nullable=True)
            if found is None and value is not None:
                found = value
        fraction = Fraction(default) if found is None else found
        if not 0 < fraction <= 1:
            raise self.error(f"partial_rotary_factor must be in (0, 1], got {fraction}")
        return fraction

    def _fraction(self, key, value):
        if type(value) not in (int, float) or value != value or abs(value) == float("inf"):
            raise self.error(f"{key} must be a finite number, got {shown(value)}")
        return Fraction(str(value))

    def activation(self, key, default=MISSING) -> str:
        """An element-wise activation name (``PLAIN_ACTIVATIONS``)."""
        return self.text(key, default, PLAIN_ACTIVATIONS)

    def _defaulted(self) -> dict:
        """The sizes left out and taken at their defaults (``SIZES``): the experts' count once (the
        spelling read last, the one the family's count came from), and not at all where the file
        states it under another spelling."""
        counts = [key for key in self.defaulted if key in EXPERT_COUNTS]
        stated = any(key in self.config for key in EXPERT_COUNTS)
        return {key: value for key, value in self.defaulted.items()
                if key not in EXPERT_COUNTS or (not stated and key == counts[-1])}

    def done(self):
        """Note the keys the family's ``transformers`` classes never read (``families.ignored``) and a
        quantised checkpoint's ``quantization_config`` (``STORED``), and refuse every other key that
        was neither read nor declared, naming them."""
        if "quantization_config" in self.config and "quantization_config" not in self.used:
            self.used.add("quantization_config")
            self.notes.append(STORED)
        for key in sorted(set(self.config) - self.used):
            why = ignored(self.family, key)
            if why is not None:
                self.notes.append(note(key, self.config[key], why))
                self.used.add(key)
        defaulted = self._defaulted()
        if defaulted:
            taken = ", ".join(f"{key}={shown(value)}" for key, value in defaulted.items())
            self.notes.append(f"config.json leaves out {', '.join(defaulted)}: taken at the defaults of "
                              f"transformers' config class for model_type {self.family!r} ({taken})")
        unknown = sorted(set(self.config) - self.used)
        if unknown:
            raise self.error(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: "
                             f"it may change the cost, and this family does not read it (accepted without effect are only "
                             f"keys its transformers classes never read: models.families.ignored)")


def plain_mlp(activation: str) -> str:
    """``Architecture.mlp`` of an ungated MLP with this activation."""
    if activation.startswith("relu") or activation == "leaky_relu":
        return "relu"
    return "silu" if activation in ("silu", "swish") else "gelu"


def gated_mlp(activation: str) -> str:
    """``Architecture.mlp`` of a gated MLP (gate and value) with this activation."""
    return {"relu": "reglu", "silu": "swiglu", "gelu": "geglu"}[plain_mlp(activation)]


def rotary_dim(head_dim: int, fraction: Fraction) -> int:
    """Rotated dims per head, as ``int(head_dim * factor)`` in the model code."""
    return int(head_dim * fraction)


def num_labels(k: Keys) -> int:
    """Classes of a classification head: the length of ``id2label``, else ``num_labels``, else 2."""
    labels = k.config.get("id2label")
    if isinstance(labels, dict) and labels:
        return len(labels)
    value = k.config.get("num_labels", 2)
    if type(value) is not int or value < 1:
        raise k.error(f"num_labels must be a positive integer, got {value!r}")
    return value


LM_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")


def lm_head_of(k: Keys) -> bool:
    """Whether the config's model has its LM head (``head_fields`` of a decoder): a bias of that
    head (GPT-J's, Phi-2's, ``lm_head_bias``) exists only then."""
    return head_fields(k).get("lm_head", True)


def head_fields(k: Keys, *, encoder=False, classifier="score") -> dict:
    """``Architecture`` fields of the head the config's ``architectures`` names: an LM head
    (decoders, and the default without ``architectures``), the base model (``...Model``; BERT's
    and RoBERTa's with their pooler, also the default without ``architectures``), a masked-LM
    or pre-training head (encoders) or a sequence classifier.  Any other head is refused."""
    names = k.config.get("architectures")
    base = dict(lm_head=False, pooler=True) if encoder else {}
    if names is None:
        return base
    if not (isinstance(names, list) and len(names) == 1 and isinstance(names[0], str)):
        raise k.error(f"architectures must name one model class, got {names!r}")
    name = names[0]
    task = dict(lm_head=False, pooler=False)
    if name.endswith("ForSequenceClassification"):
        return dict(task, task="classification", classifier=classifier, num_labels=num_labels(k))
    if encoder and name.endswith("ForMaskedLM"):
        return dict(task, task="masked_lm")
    if encoder and name.endswith("ForPreTraining"):
        return dict(task, task="pretraining")
    if not encoder and name.endswith(LM_SUFFIXES):
        return {}
    if name.endswith("Model") and "For" not in name and "Head" not in name:
        return dict(lm_head=False, pooler=encoder)
    raise k.error(f"architectures {name!r}: this head is not supported (supported: "
                  f"{'ForMaskedLM, ForPreTraining' if encoder else ', '.join(LM_SUFFIXES)}, "
                  f"ForSequenceClassification, the base Model)")


def check_heads(k: Keys, e, h, kv, head_dim, names=("hidden_size", "num_attention_heads", "num_key_value_heads")):
    """Without a head size of its own, ``h`` must divide ``e``; ``kv`` must divide ``h``."""
    hidden, heads, kv_name = names
    if head_dim is None and e % h:
        raise k.error(f"{heads}={h} does not divide {hidden}={e}")
    if kv is not None and h % kv:
        raise k.error(f"{kv_name}={kv} does not divide {heads}={h}")


def window_fields(k: Keys, depth: int, window, default_sliding, kind="sliding_attention") -> dict:
    """``Architecture`` fields of sliding-window attention (or, with ``kind="chunked_attention"``,
    of chunked attention): the window, how many of the ``depth`` layers use it and which
    (``window_pattern``, when some do not), from ``layer_types`` when given, else
    ``default_sliding(i)`` for layer ``i`` (the config class's pattern)."""
    kinds = k.raw("layer_types", None, True)
    if kinds is None:
        pattern = tuple(bool(default_sliding(i)) and window is not None for i in range(depth))
    else:
        allowed = ("full_attention", kind)
        if not (isinstance(kinds, list) and len(kinds) == depth and all(x in allowed for x in kinds)):
            raise k.error(f"layer_types must list {depth} of {', '.join(allowed)}, got {kinds!r}")
        pattern = tuple(x == kind for x in kinds)
    sliding = sum(pattern)
    if sliding and window is None:
        raise k.error(f"layer_types names {kind} layers but its size is null")
    if not sliding:
        return {}
    return dict(window=window, windowed_layers=sliding, **({"window_pattern": pattern} if sliding < depth else {}))
