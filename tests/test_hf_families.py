"""The model families against Hugging Face ``transformers``: the outside oracle of issue 13.

Every ``tests/hf_configs/*.json`` is the ``config.json`` a model publishes on the hub.  Each is
built with ``transformers`` (the class its ``architectures`` names, eager attention) on the meta
device, at the smallest depth that keeps its per-layer structure (two layers, or one period of an
alternating sliding-window pattern), and compared with ``from_config`` + ``model_cost``:

* parameters: ``numel`` of the model's parameters (a tied weight is one parameter, counted
  once), exactly, at that depth and, extrapolated layer by layer, at the published depth;
* matrix-product FLOPs forward and backward from ``FlopCounterMode`` (``2mnk`` per product) at a
  short and a long sequence, exactly, against the sum of the library's ``Cost.gemms``.

Where the two count differently by design, the difference is derived here from the Hugging Face
model and asserted exactly:

* eager attention multiplies every (query, key) pair and masks afterwards; the library's
  ``causal_flops="exact"`` counts only the pairs the mask keeps (``l (l + 1) / 2`` causal, a window
  of ``w`` keys per query with sliding-window attention: ``allowed_pairs``), checked against the
  attention probabilities of small real models;
* ``FlopCounterMode`` counts no bias add; the library counts ``b l n`` forward and ``b l n``
  backward (``dB``) for each biased product (read from the model with forward hooks: the
  output of each biased linear module, GPT-OSS's router logits, and its experts' routed rows
  times the widths of their two biases);
* grouped-query attention: the counter sees the K and V heads expanded to every query head; the
  library counts the sum of the ``h/kv`` query heads' ``dK`` and ``dV``, ``2 b (h - kv) l d``;
* transformers 5 ties every T5 head to the embedding (``T5Config`` forces ``tie_word_embeddings``)
  while untied checkpoints (flan-t5) publish their own ``lm_head``: the library counts it.

Mixture-of-experts models (issue 14: Mixtral, Qwen-MoE, DeepSeek-V2/V3) run their experts with
``transformers``' ``batched_mm`` implementation, the only one that runs on the meta device: every
(token, chosen expert) pair goes through its expert's two products, so the products do not
depend on which experts the router picks (on the meta device it picks none in particular) and
equal those of the library's token-balanced, dropless count exactly.  Their depth is the
smallest that holds every kind of layer the full model has (DeepSeek-V3: three dense layers,
then an MoE one), read from the modules of the full-depth model, and their parameters are
counted on the full-depth model itself.  Latent attention multiplies queries and keys of
``qk_head_dim`` but values of ``v_head_dim``.  Llama 4's code runs every token through all
``E`` experts (a score of 0 where not chosen): the products of the ``E - k`` it is not routed
to are subtracted (``idle_experts``), the library counting what the training frameworks run.

``Nemotron-Mini-4B`` is NVIDIA's Nemotron-4 4B ``config.json`` as NVIDIA/TensorRT-LLM quotes it
(``tests/unittest/_torch/modeling/test_modeling_nemotron.py`` at 8cb8331, ``Nemotron_4_4B_CONFIG``).

Families the library does not load yet are strict ``xfail``: when one lands the case passes,
strict-xfail fails, and the mark must go.  Skipped without torch or transformers (CI pins both).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from symbolic_cost import conventions as conv  # noqa: E402
from symbolic_cost.models import Training, model_cost  # noqa: E402
from symbolic_cost.models.config import from_config  # noqa: E402

CONFIGS = {path.stem: json.loads(path.read_text())
           for path in sorted((Path(__file__).parent / "hf_configs").glob("*.json"))}
DEPTH_KEYS = ("n_layer", "num_hidden_layers", "num_layers", "num_decoder_layers")
# PyTorch counts a product as 2mnk; ``EXACT`` counts only the attention pairs the mask keeps
TORCH = conv.DEFAULT.but(matmul_flops="2mnk", reduction_flops=False)
EXACT = TORCH.but(causal_flops="exact")
# eager attention: every score of a sliding window too, masked afterwards
EAGER = TORCH.but(window_count="dense")
ENCODERS = {"bert", "roberta"}       # model_types whose attention is bidirectional
MOE = {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "gpt_oss", "glm4_moe", "granitemoe", "llama4_text",
       "deepseek_v2", "deepseek_v3"}   # layers of two kinds
SHORT, LONG = (2, 96), (1, 8192)     # (b, l); the long one is cut to the model's position table

# What the library does not do yet: strict xfail, so each mark must go when it lands.  Every
# family of issue 13 has landed; a new family's config goes in with its mark until it loads.
NOT_LOADED: set[str] = set()                              # model_types from_config refuses
MISSING: dict[str, dict[str, str]] = {}                   # config -> {check: reason}


def _marks(name: str, check: str):
    family = CONFIGS[name]["model_type"]
    reason = f"model_type {family} is not loaded yet" if family in NOT_LOADED else MISSING.get(name, {}).get(check)
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def _cases(checks):
    return [pytest.param(name, check, id=f"{name}-{check}", marks=_marks(name, check))
            for name in CONFIGS for check in checks]


# --- the Hugging Face side ------------------------------------------------------------------

def hf_config(config: dict):
    """The ``transformers`` config object of a ``config.json`` dict."""
    values = dict(config)
    return transformers.AutoConfig.for_model(values.pop("model_type"), **values)


def depth_of(config: dict) -> int:
    """Two layers, or up to the first layer whose attention differs from the first one's
    (Gemma 3: five sliding-window layers, then a global one; SmolLM3: three rotating layers,
    then one without rotary positions); for MoE models, up to the first
    layer of each kind (attention and MLP module) of the full-depth model."""
    if config["model_type"] in MOE:
        mlps = ("mlp", "block_sparse_moe", "feed_forward")     # Granite: block_sparse_moe; Llama 4: feed_forward
        kinds = [(type(next(getattr(layer, n) for n in mlps if hasattr(layer, n))).__name__,
                  getattr(layer.self_attn, "sliding_window", None), getattr(layer.self_attn, "use_rope", None))
                 for layer in hf_model(config).model.layers]
        return max(2, max(kinds.index(kind) for kind in set(kinds)) + 1)
    kinds = getattr(hf_config(config), "layer_types", None) or []
    if "no_rope_layers" in config:                       # SmolLM3: layers without rotary positions too
        kinds = list(zip(kinds, config["no_rope_layers"]))
    changes = [i for i, kind in enumerate(kinds) if kind != kinds[0]]
    return max(2, changes[0] + 1 if changes else 0)


def scaled(config: dict, depth: int) -> dict:
    """The same config with ``depth`` layers (encoder and decoder alike)."""
    out = {key: (depth if key in DEPTH_KEYS else value) for key, value in config.items()}
    for key in ("layer_types", "no_rope_layers"):       # one entry per layer
        if key in out:
            out[key] = out[key][:depth]
    return out


def hf_model(config: dict, device="meta"):
    """The model class the config names, built (not loaded) with eager attention."""
    cls = getattr(transformers, config["architectures"][0])
    with torch.device(device):
        return cls._from_config(hf_config(config), attn_implementation="eager", experts_implementation="batched_mm")


def parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())    # unique tensors: a tied weight once


def batch(model, b: int, l: int, device="meta") -> dict:
    """Token ids and labels (tokens, or one class per sequence) for one training step."""
    ids = torch.zeros(b, l, dtype=torch.long, device=device)
    classes = type(model).__name__.endswith("ForSequenceClassification")
    inputs = dict(input_ids=ids, labels=torch.zeros(b, dtype=torch.long, device=device) if classes else ids)
    if not (model.config.is_encoder_decoder or _bidirectional(model.config)):
        # an explicit all-ones mask: the packed-sequence check reads values, which meta tensors lack
        inputs.update(attention_mask=torch.ones_like(ids), use_cache=False)
    return inputs


def _bidirectional(hf) -> bool:
    return hf.model_type in ENCODERS


def counted(model, b: int, l: int):
    """(forward, backward) FlopCounterMode FLOPs of one step, and the bias adds of the forward."""
    adds = []

    def hook(module, args, out):
        if getattr(module, "bias", None) is not None:
            adds.append(out.numel())

    def router_hook(module, args, out):                  # GPT-OSS: F.linear with a bias
        if getattr(module, "bias", None) is not None:
            adds.append(out[0].numel())

    def experts_hook(module, args, out):                 # GPT-OSS: each routed (token, expert) row
        adds.append(args[1].numel() * (module.gate_up_proj_bias.shape[-1] + module.down_proj_bias.shape[-1]))

    linears = (torch.nn.Linear, transformers.pytorch_utils.Conv1D)
    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, linears)]
    for m in model.modules():
        if hasattr(m, "experts") and hasattr(m, "router"):
            handles.append(m.router.register_forward_hook(router_hook))
        if hasattr(m, "gate_up_proj_bias"):
            handles.append(m.register_forward_hook(experts_hook))
    try:
        with FlopCounterMode(display=False) as forward:
            loss = model(**batch(model, b, l)).loss
    finally:
        for handle in handles:
            handle.remove()
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    return forward.get_total_flops(), backward.get_total_flops(), sum(adds)


def positions(hf) -> int | None:
    """Rows of a learned position table (RoBERTa's first ``pad + 1`` rows are never used)."""
    rows = getattr(hf, "max_position_embeddings", None) or getattr(hf, "n_positions", None)
    if rows and hf.model_type == "roberta":
        rows -= hf.pad_token_id + 1
    return rows


def allowed_pairs(kind: str, l_q: int, l_k: int, window: int | None) -> int:
    """(query, key) pairs the attention mask keeps: all of them, ``l (l + 1) / 2`` causal,
    ``min(t + 1, w)`` keys for the query at position ``t`` under a sliding window of ``w``, or
    ``t mod w + 1`` in chunks of ``w`` (Llama 4)."""
    if kind in ("bidirectional", "cross"):
        return l_q * l_k
    if kind == "causal":
        return l_q * (l_q + 1) // 2
    if kind == "chunked":
        return sum(t % window + 1 for t in range(l_q))
    return sum(min(t + 1, window) for t in range(l_q))


def attention_modules(hf, depth: int, l: int):
    """(kind, window, heads, key/value heads, (query/key, value) head dims, query length, key
    length) per attention."""
    heads = hf.num_attention_heads
    dim = getattr(hf, "head_dim", None) or getattr(hf, "d_kv", None) or hf.hidden_size // heads
    dims = (hf.qk_head_dim, hf.v_head_dim) if hasattr(hf, "kv_lora_rank") else (dim, dim)
    if hf.model_type == "falcon":       # multi-query unless the new decoder architecture
        kv = hf.num_kv_heads if hf.new_decoder_architecture or not hf.multi_query else 1
    else:
        kv = getattr(hf, "num_key_value_heads", None) or heads
    if hf.is_encoder_decoder:           # T5: the encoder, then decoder self- and cross-attention
        one = [("bidirectional", None)] * depth + [("causal", None), ("cross", None)] * depth
    elif _bidirectional(hf):
        one = [("bidirectional", None)] * depth
    else:
        window = getattr(hf, "sliding_window", None)
        kinds = getattr(hf, "layer_types", None) or ["sliding_attention" if window else "full_attention"] * depth
        chunk = getattr(hf, "attention_chunk_size", None)
        one = [("sliding", window) if kind == "sliding_attention" else ("chunked", chunk)
               if kind == "chunked_attention" and chunk else ("causal", None) for kind in kinds]
    return [(kind, window, heads, kv, dims, l, l) for kind, window in one]


# --- the library side -----------------------------------------------------------------------

def library(config: dict, name: str, b: int, l: int, conventions):
    """The library's model as ``transformers`` builds it: without DeepSeek-V3's
    multi-token-prediction module (training runs it; ``test_multi_token_prediction_...``)."""
    return model_cost(from_config(config, name), Training(b=b, l=l, precision="fp32", mtp=False), conventions)


def rows(cost):
    """Every row of the model, once per time it runs (``ModelCost.blocks``: ``(block, count)``)."""
    return [row for block, count in cost.blocks for row in list(block) * int(count)]


def products(cost, pass_: str) -> int:
    """The library's matrix products of ``pass_``, ``2 m n k`` each."""
    return sum(2 * g.m * g.n * g.k * g.count for r in rows(cost) for g in r.gemms if g.pass_ == pass_)


def matrix_rows(cost, pass_: str) -> int:
    return sum(getattr(r, f"flops_{pass_}") for r in rows(cost) if r.engine == "matrix")


def idle_experts(model, tokens: int) -> int:
    """Forward products of the experts a token is not routed to: Llama 4's ``transformers`` code
    runs every token through all ``E`` experts (scaled by a score of 0 where not chosen), the
    library and the training frameworks through its ``k``: ``(E - k) t 6 e f`` a MoE layer."""
    hf = model.config
    if hf.model_type != "llama4_text":
        return 0
    layers = sum(1 for layer in model.model.layers if layer.is_moe_layer)
    return layers * (hf.num_local_experts - hf.num_experts_per_tok) * tokens * 6 * hf.hidden_size * hf.intermediate_size


def untied_t5_head(config: dict) -> int:
    """The ``lm_head`` an untied T5 checkpoint publishes and transformers 5 ties away
    (flan-t5-small: 60,511,616 parameters in transformers 5.23, 76,961,152 in the checkpoint)."""
    if config["model_type"] == "t5" and config.get("tie_word_embeddings") is False:
        return config["vocab_size"] * config["d_model"]
    return 0


# --- the checks -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, check", _cases(["parameters"]))
def test_parameters(name, check):
    config = CONFIGS[name]
    depth = depth_of(config)
    small = parameters(hf_model(scaled(config, depth)))
    assert library(scaled(config, depth), name, 1, 8, TORCH).parameters == small + untied_t5_head(config)
    # the published depth: the embedding and head once, then one layer's parameters per layer
    one, two = (parameters(hf_model(scaled(config, d))) for d in (1, 2))
    layers = next(config[key] for key in DEPTH_KEYS if key in config)
    published = one + (layers - 1) * (two - one)
    if config["model_type"] in MOE:                     # layers of two kinds: count them all
        published = parameters(hf_model(config))
    assert library(config, name, 1, 8, TORCH).parameters == published + untied_t5_head(config)


@pytest.mark.parametrize("name, check", _cases(["flops-short", "flops-long"]))
def test_matrix_flops(name, check):
    b, l = SHORT if check == "flops-short" else LONG
    _check_products(CONFIGS[name], name, b, l)


def test_llama4_chunks_shorter_than_the_sequence():
    """8192 tokens in chunks of 3000 (two whole chunks and 2192 left): the library's pairs
    (``ops.matmul.scored_keys``) are the products eager attention does less those its chunked
    mask drops."""
    _check_products(dict(CONFIGS["Llama-4-Scout-17B-16E-text"], attention_chunk_size=3000), "chunks", 1, 8192)


def _check_products(config, name, b, l):
    """Products forward and backward against ``FlopCounterMode`` (the module docstring)."""
    depth = depth_of(config)
    model = hf_model(scaled(config, depth))
    l = min(l, positions(model.config) or l)
    forward, backward, bias_adds = counted(model, b, l)
    attention = attention_modules(model.config, depth, l)
    # eager attention multiplies every pair: 2 d_qk for Q K^T and 2 d_v for A V forward, twice that backward
    masked = sum(b * h * (lq * lk - allowed_pairs(kind, lq, lk, w)) * 2 * (dq + dv)
                 for kind, w, h, kv, (dq, dv), lq, lk in attention)
    idle = idle_experts(model, b * l)
    exact = library(scaled(config, depth), name, b, l, EXACT)
    assert (products(exact, "fwd"), products(exact, "bwd")) == (forward - masked - idle,
                                                                backward - 2 * (masked + idle))

    eager = library(scaled(config, depth), name, b, l, EAGER)
    assert (products(eager, "fwd"), products(eager, "bwd")) == (forward - idle, backward - 2 * idle)
    # by design: the library's matrix rows also count bias adds, and the grouped-query sums
    group_sums = sum(b * (h - kv) * lk * (dq + dv) for kind, w, h, kv, (dq, dv), lq, lk in attention if kind != "cross")
    windowed = library(scaled(config, depth), name, b, l, TORCH)
    assert matrix_rows(windowed, "fwd") - products(windowed, "fwd") == bias_adds
    assert matrix_rows(windowed, "bwd") - products(windowed, "bwd") == bias_adds + group_sums


@pytest.mark.parametrize("name", [name for name in CONFIGS if CONFIGS[name]["model_type"] == "t5"])
@pytest.mark.parametrize("l, l_dec", [(96, 24), (32, 80)])
def test_encoder_decoder_with_its_own_decoder_length(name, l, l_dec):
    """T5 reads ``l`` tokens and predicts ``l_dec`` (span corruption: 512 in, 114 out): the
    decoder's self-attention is ``l_dec x l_dec``, its cross-attention ``l_dec x l``, its
    head and loss over ``l_dec`` tokens.  Eager products, forward and backward, exactly."""
    config = scaled(CONFIGS[name], 2)
    model = hf_model(config)
    b = 2
    ids = torch.zeros(b, l, dtype=torch.long, device="meta")
    targets = torch.zeros(b, l_dec, dtype=torch.long, device="meta")
    with FlopCounterMode(display=False) as forward:
        loss = model(input_ids=ids, labels=targets).loss
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    cost = model_cost(from_config(config, name), Training(b=b, l=l, l_dec=l_dec, precision="fp32"), EAGER)
    assert (products(cost, "fwd"), products(cost, "bwd")) == (forward.get_total_flops(), backward.get_total_flops())
    assert cost.parameters == parameters(model) + untied_t5_head(config)


def test_multi_token_prediction_is_one_more_layer_with_its_projection_and_norms():
    """DeepSeek-V3 trains one MTP module (``num_nextn_predict_layers``) that transformers does
    not build: its parameters are those of the model's last decoder layer as transformers
    builds it (an MoE layer), the 2e x e projection and three norms of e; its forward products
    one more such layer, the projection of t tokens and the shared head's t x e x V logits."""
    config = scaled(CONFIGS["DeepSeek-V3"], 4)
    e, vocab, b, l = config["hidden_size"], config["vocab_size"], 1, 8
    layer = sum(p.numel() for p in hf_model(config).model.layers[-1].parameters())
    arch = from_config(config, "DeepSeek-V3")
    with_mtp, without = (model_cost(arch, Training(b=b, l=l, precision="fp32", mtp=m), EAGER) for m in (True, False))
    assert arch.mtp_layers == 1
    assert with_mtp.parameters - without.parameters == layer + 2 * e * e + 3 * e
    moe_layer = without.stack[-2][0]
    extra = sum(2 * g.m * g.n * g.k * g.count for r in moe_layer for g in r.gemms if g.pass_ == "fwd")
    t = b * l
    assert products(with_mtp, "fwd") - products(without, "fwd") == extra + 2 * t * 2 * e * e + 2 * t * e * vocab


# --- MoE: the experts' products under a routing the test fixes --------------------------------

def fixed_router(gate):
    """Wrap a router so that token ``i`` goes to experts ``i k, ..., i k + k - 1`` (mod ``E``):
    its own products and weights run as before, only the chosen experts are replaced."""
    forward = gate.forward

    def routed(hidden_states):
        logits, weights, indices = forward(hidden_states)
        tokens, k = indices.shape
        experts = logits.shape[-1]
        chosen = (torch.arange(tokens)[:, None] * k + torch.arange(k)[None, :]) % experts
        return logits, weights, chosen.to(indices.dtype)
    gate.forward = routed


@pytest.mark.parametrize("name", [name for name in CONFIGS if CONFIGS[name]["model_type"] in MOE - {"llama4_text"}])
def test_experts_under_a_fixed_router(name):
    """The eager expert loop of ``transformers`` (each expert on the tokens routed to it) on the
    CPU, at toy widths, with a fixed router: forward and backward products equal the library's.
    (Llama 4's code has no such loop: it runs every expert on every token, ``idle_experts``.)"""
    torch.manual_seed(0)
    config = tiny(CONFIGS[name])
    cls = getattr(transformers, config["architectures"][0])
    model = cls._from_config(hf_config(config), attn_implementation="eager", experts_implementation="eager")
    gates = [getattr(module, "gate", None) or module.router for module in model.modules()
             if hasattr(module, "experts") and (hasattr(module, "gate") or hasattr(module, "router"))]
    assert gates
    for gate in gates:
        fixed_router(gate)
    b, l = 2, 8
    inputs = batch(model, b, l, device="cpu")
    with FlopCounterMode(display=False) as forward:
        loss = model(**inputs).loss
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    eager = library(config, name, b, l, EAGER)
    assert (products(eager, "fwd"), products(eager, "bwd")) == (forward.get_total_flops(),
                                                                backward.get_total_flops())


# --- the oracle's own assumption: which pairs each family's mask keeps ----------------------

TINY = dict(hidden_size=40, num_attention_heads=4, intermediate_size=48, n_inner=48, ffn_dim=48, d_ff=48,
            head_dim=10, d_kv=10, rotary_dim=4, num_key_value_heads=2, num_kv_heads=2, moe_intermediate_size=24,
            shared_expert_intermediate_size=24)


def tiny(config: dict) -> dict:
    """The same family and depth at toy widths, with any sliding window cut to 3 keys."""
    names = getattr(transformers.CONFIG_MAPPING[config["model_type"]], "attribute_map", {})
    out = dict(config)
    for key, value in TINY.items():
        key = names.get(key, key)
        if out.get(key) is not None:
            out[key] = value
    if out.get("word_embed_proj_dim"):     # OPT: keep a projection where the model has one
        out["word_embed_proj_dim"] = 40 if config["word_embed_proj_dim"] == config["hidden_size"] else 24
    for key in ("sliding_window", "attention_chunk_size"):
        if out.get(key):
            out[key] = 3
    if "kv_lora_rank" in out:              # latent attention: keys and values for every head
        out["num_key_value_heads"] = out["num_attention_heads"]
    return scaled(out, depth_of(config))


@pytest.mark.parametrize("name", CONFIGS)
def test_masks_keep_the_pairs_the_oracle_assumes(name):
    torch.manual_seed(0)
    config = tiny(CONFIGS[name])
    model = hf_model(config, device="cpu").eval()     # no dropout on the probabilities
    l = 8
    inputs = batch(model, 1, l, device="cpu")
    inputs["input_ids"] = torch.randint(3, 30, (1, l))
    out = model(**inputs, output_attentions=True)
    maps = (out.encoder_attentions + out.decoder_attentions + out.cross_attentions
            if model.config.is_encoder_decoder else out.attentions)
    expected = [h * allowed_pairs(kind, lq, lk, w)
                for kind, w, h, kv, d, lq, lk in attention_modules(model.config, depth_of(config), l)]
    # T5 lists every encoder layer, then every decoder layer's self-, then cross-attention
    if model.config.is_encoder_decoder:
        depth = depth_of(config)
        expected = expected[:depth] + expected[depth::2] + expected[depth + 1::2]
    assert [int(m[0].ne(0).sum()) for m in maps] == expected


@pytest.mark.parametrize("model_type, settings", [
    ("gemma2", {}), ("gemma3_text", {}), ("gemma3_text", {"num_hidden_layers": 14}),
    ("qwen2", {"use_sliding_window": True, "max_window_layers": 5, "num_hidden_layers": 9}),
    ("qwen2_moe", {"use_sliding_window": True, "max_window_layers": 5, "num_hidden_layers": 9}),
    ("olmo3", {}), ("olmo3", {"num_hidden_layers": 10}),
])
def test_window_pattern_is_the_config_classs_layer_types(model_type, settings):
    """Which layers slide: the library's ``window_pattern`` equals the ``layer_types`` that the
    transformers config class derives by default (a config without ``layer_types``)."""
    cls = transformers.CONFIG_MAPPING[model_type]
    expected = tuple(kind == "sliding_attention" for kind in cls(**settings).layer_types)
    config = {"model_type": model_type, **settings}
    arch = from_config(config, model_type)
    assert 0 < sum(expected) < len(expected)
    assert arch.window_pattern == expected


@pytest.mark.parametrize("name", [name for name in CONFIGS if CONFIGS[name]["model_type"] == "t5"])
def test_encoder_decoder_pipeline_stages_hold_the_encoder_then_the_decoder(name):
    """A T5 on two pipeline stages (Megatron-LM places layers in order): the first holds the word
    table, the encoder's layers and its final norm; the second the decoder's layers, its final
    norm and the head (an untied checkpoint's own lm_head, or its own copy of the tied word
    table), as transformers builds those parts."""
    from symbolic_cost.models.ranks import rank_parameters
    config = CONFIGS[name]
    model = hf_model(config)
    count = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    table = model.shared.weight.numel()
    first = table + count(model.encoder.block) + count(model.encoder.final_layer_norm)
    last = count(model.decoder.block) + count(model.decoder.final_layer_norm) + (untied_t5_head(config) or table)
    cost = model_cost(from_config(config, name), Training(b=1, l=64, l_dec=16, p=2, micro_batches=4,
                                                          precision="fp32"))
    assert [rank_parameters(cost, r) for r in range(2)] == [first, last]
    assert cost.parameters_per_device == max(first, last)
    # the decoder stage receives the encoder's 64 tokens with the decoder's 16, each of width e
    sends = [c for dimension, c in cost.collectives if dimension == "pipeline"]
    assert [c.elements for c in sends] == [(64 + 16) * config["d_model"]] * 2


def test_granite_shared_expert_beside_the_routed_ones():
    """``granitemoeshared``: Granite MoE with a shared gated expert (``shared_intermediate_size``)
    summed with the routed output: parameters and forward and backward products equal those of
    the model ``transformers`` builds (no such checkpoint is among the published configs here)."""
    config = scaled(dict(CONFIGS["granite-3.1-3b-a800m-instruct"], model_type="granitemoeshared",
                         architectures=["GraniteMoeSharedForCausalLM"], shared_intermediate_size=1024), 2)
    model = hf_model(config)
    plain = library(dict(config, shared_intermediate_size=0), "plain", 1, 8, TORCH).parameters
    assert library(config, "shared", 1, 8, TORCH).parameters == parameters(model) == plain + 2 * 3 * 1536 * 1024
    forward, backward, _ = counted(model, *SHORT)
    eager = library(config, "shared", *SHORT, EAGER)
    assert (products(eager, "fwd"), products(eager, "bwd")) == (forward, backward)


@pytest.mark.parametrize("window", [4096, None])
def test_exaone4_rotates_what_its_attention_rotates(window):
    """EXAONE 4's global layers take no rotary positions when the model has windows (its
    attention rotates ``if sliding_window is None or is_sliding``): the library's layer groups,
    in layer order, rotate exactly the layers the ``transformers`` modules do."""
    from symbolic_cost.models.stack import group_options, layer_kinds
    config = scaled(dict(CONFIGS["EXAONE-4.0-32B"], sliding_window=window), 8)
    if window is None:
        config["layer_types"] = ["full_attention"] * 8
    attentions = [layer.self_attn for layer in hf_model(config).model.layers]
    expected = [a.sliding_window is None or a.is_sliding for a in attentions]
    arch = from_config(config)
    groups = group_options(arch, Training(b=1, l=64), 1, 1)
    kinds = layer_kinds(arch) or (0,) * 8
    assert [groups[kind][0]["heads"].rotary for kind in kinds] == expected
    assert (False in expected) == (window is not None)


def small_config_matches(config: dict, b=2, l=32):
    """The model ``transformers`` builds from a small ``config``: its parameters, forward and
    backward products and bias adds equal the library's (the model, for more checks)."""
    model = hf_model(config)
    assert library(config, "small", 1, 8, TORCH).parameters == parameters(model)
    forward, backward, bias_adds = counted(model, b, l)
    eager = library(config, "small", b, l, EAGER)
    assert (products(eager, "fwd"), products(eager, "bwd")) == (forward, backward)
    rows_ = library(config, "small", b, l, TORCH)
    assert matrix_rows(rows_, "fwd") - products(rows_, "fwd") == bias_adds
    return model


def test_arcee_ungated_relu2_mlp():
    """``arcee``: an ungated MLP (``up_proj``, ``down_proj``): parameters and forward and
    backward products equal those of the model ``transformers`` builds from a small config."""
    config = dict(model_type="arcee", architectures=["ArceeForCausalLM"], hidden_size=64, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=96, num_hidden_layers=2, vocab_size=128,
                  max_position_embeddings=64, pad_token_id=0, bos_token_id=0, eos_token_id=0)
    small_config_matches(config)
    assert from_config(config).mlp == "relu"


def test_windows_on_some_layers_and_experts_on_others_placed_per_layer():
    """Qwen2-MoE with windows on its even layers below ``max_window_layers`` and experts on every
    second layer: the library records each layer's (window, experts) as the ``transformers``
    modules are built, and on 3 pipeline ranks each rank holds the parameters of its own
    layers (with the embedding first and the head last)."""
    from symbolic_cost.models.ranks import rank_parameters
    from symbolic_cost.models.stack import layer_keys
    config = dict(model_type="qwen2_moe", architectures=["Qwen2MoeForCausalLM"], hidden_size=64,
                  num_attention_heads=4, num_key_value_heads=2, intermediate_size=96, moe_intermediate_size=32,
                  shared_expert_intermediate_size=48, num_experts=4, num_experts_per_tok=2, num_hidden_layers=9,
                  vocab_size=128, max_position_embeddings=64, use_sliding_window=True, sliding_window=8,
                  max_window_layers=5, decoder_sparse_step=2)
    model = hf_model(config)
    layers = model.model.layers
    expected = [(getattr(layer.self_attn, "sliding_window", None) is not None,
                 type(layer.mlp).__name__ == "Qwen2MoeSparseMoeBlock") for layer in layers]
    arch = from_config(config)
    assert [key[:2] for key in layer_keys(arch)] == expected and len(set(expected)) == 3
    cost = model_cost(arch, Training(b=1, l=16, p=3, micro_batches=3, precision="fp32"))
    ends = [parameters(model.model.embed_tokens), parameters(model.model.norm) + parameters(model.lm_head)]
    for rank in range(3):
        held = sum(parameters(layer) for layer in layers[3 * rank:3 * rank + 3])
        assert rank_parameters(cost, rank) == held + (ends[0] if rank == 0 else 0) + (ends[1] if rank == 2 else 0)


def test_smollm3_rotates_what_its_attention_rotates():
    """SmolLM3's layers without rotary positions (``no_rope_layers``): the library's layer
    groups, in layer order, rotate exactly the layers whose ``transformers`` modules do
    (``use_rope``), and only those have a ``rotary`` row."""
    from symbolic_cost.models.stack import layer_kinds, layer_groups
    config = scaled(CONFIGS["SmolLM3-3B"], 8)
    expected = [bool(layer.self_attn.use_rope) for layer in hf_model(config).model.layers]
    arch = from_config(config)
    groups = layer_groups(arch, Training(b=1, l=64), 1, 1, {})
    assert [("rotary" in groups[kind][0].names) for kind in layer_kinds(arch)] == expected
    assert expected.count(False) == 2


def test_phimoe_from_a_small_config():
    """``phimoe`` (Phi-3.5-MoE; its published config's LongRoPE factors are not copied here):
    parameters, forward and backward products and bias adds (the LM head's included) equal
    those of the model ``transformers`` builds from a small config."""
    config = dict(model_type="phimoe", architectures=["PhimoeForCausalLM"], hidden_size=64, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=96, num_hidden_layers=2, vocab_size=128,
                  max_position_embeddings=64, num_local_experts=4, num_experts_per_tok=2, attention_bias=True,
                  lm_head_bias=True, sliding_window=16, pad_token_id=0, bos_token_id=0, eos_token_id=0)
    small_config_matches(config)


def test_cohere2_rotates_only_its_windowed_layers():
    """Command R7B's attention rotates only where it has a window (``sliding_window`` set on
    the module): the library's groups, in layer order, rotate the same layers."""
    from symbolic_cost.models.stack import layer_kinds, layer_groups
    config = scaled(CONFIGS["c4ai-command-r7b-12-2024"], 8)
    expected = [layer.self_attn.sliding_window is not None for layer in hf_model(config).model.layers]
    arch = from_config(config)
    groups = layer_groups(arch, Training(b=1, l=64), 1, 1, {})
    assert [("rotary" in groups[kind][0].names) for kind in layer_kinds(arch)] == expected
    assert expected.count(False) == 2


def test_minimax_m2_from_a_small_config():
    """``minimax_m2`` (its released configs carry keys of its own remote code, not copied here):
    parameters and products equal the model ``transformers`` builds from a small config, and
    the legacy ``rotary_dim`` rotates as many dims as its rotary embedding makes frequencies for."""
    config = dict(model_type="minimax_m2", architectures=["MiniMaxM2ForCausalLM"], hidden_size=64, head_dim=16,
                  num_attention_heads=4, num_key_value_heads=2, intermediate_size=48, num_hidden_layers=2,
                  vocab_size=128, max_position_embeddings=64, num_local_experts=8, num_experts_per_tok=2,
                  rotary_dim=8, pad_token_id=0, bos_token_id=0, eos_token_id=0)
    model = small_config_matches(config)
    assert from_config(config).rotary_dim == 2 * model.model.rotary_emb.inv_freq.shape[0] == 8


def _widths(model) -> tuple[int, ...] | int:
    """The output widths of the first attention's Q, K, V projections, or of its fused QKV one."""
    def width(module):
        return module.out_features if isinstance(module, torch.nn.Linear) else module.nf   # GPT-2's Conv1D
    for module in model.modules():
        children = dict(module.named_children())
        for names in (("q_proj", "k_proj", "v_proj"), ("query", "key", "value"), ("q", "k", "v")):
            if set(names) <= set(children):
                return tuple(width(children[n]) for n in names)
        for fused in ("query_key_value", "c_attn", "qkv_proj"):
            if fused in children:
                return width(children[fused])
    return ()


@pytest.mark.parametrize("name", CONFIGS)
def test_derived_head_sizes_are_the_projections_transformers_builds(name):
    """``Architecture.kv``, ``head_size`` and ``value_size`` (the one home of their defaults)
    against the attention ``transformers`` builds: Q, K, V projections of ``h``, ``kv`` and
    ``kv`` heads (``h + 2 kv`` fused), and ``h / num_key_value_groups`` key/value heads.  Latent
    attention (DeepSeek) projects through its own ranks: only its key/value heads are checked."""
    config = scaled(CONFIGS[name], 2)
    arch, model = from_config(CONFIGS[name], name), hf_model(config)
    groups = next((m.num_key_value_groups for m in model.modules() if hasattr(m, "num_key_value_groups")), None)
    if groups is not None:
        assert arch.kv == arch.h // groups
    widths = _widths(model)
    if arch.latent is not None:
        assert arch.kv == arch.h and groups == 1 and widths == ()
    elif isinstance(widths, int):
        assert widths == (arch.h + 2 * arch.kv) * arch.head_size == (arch.h + 2 * arch.kv) * arch.value_size
    else:
        assert widths == (arch.h * arch.head_size, arch.kv * arch.head_size, arch.kv * arch.value_size)


@pytest.mark.parametrize("model_type, language", [("llama4", "llama4_text"), ("gemma3", "gemma3_text"),
                                                  ("mistral3", "mistral"), ("llava", "llama"),
                                                  ("qwen2_5_vl", None)])
def test_a_multimodal_config_is_refused_naming_its_language_model(model_type, language):
    """A vision-language model's ``config.json`` (as ``transformers`` writes its defaults) is refused by
    name, pointing to its ``text_config``; where that language model is a supported family, the
    ``text_config`` saved alone reads."""
    from symbolic_cost.checks import InputError
    config = transformers.AutoConfig.for_model(model_type).to_dict()
    with pytest.raises(InputError, match=f"model_type '{model_type}' is a multimodal model") as refused:
        from_config(config)
    if language is None:
        assert "not supported either" in str(refused.value)
    else:
        assert f"(model_type '{language}'): save that object" in str(refused.value)
        assert from_config(config["text_config"]).n_layers == config["text_config"]["num_hidden_layers"]
