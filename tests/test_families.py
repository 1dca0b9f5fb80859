"""Dense model families (issue 13): each architecture feature by hand counts, and config loading
(defaults, every key accounted for, refusals naming the key).

Expected values are counted here from the shapes of the modules (as the Hugging Face model code
builds them) or enumerated, never read back from the library."""

import json

import pytest
from sympy import Min, Symbol

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.blocks import Feedforward, Heads, Projections, Scores, attention, transformer_layer
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.blocks.wiring import Residual, Run, Wiring

DENSE = conv.DEFAULT.but(window_count="dense")


def _params(arch):
    """Parameters as transformers builds the model (no multi-token-prediction module)."""
    return model_cost(arch, Training(b=1, l=8, mtp=False)).parameters


def _arch(**fields):
    base = dict(name="x", n_layers=2, e=64, h=4, f=256, vocab=100, tied=False, dropouts=False)
    return Architecture(**{**base, **fields})


def _llama_layer(e, f, h, kv, hd, qkv_bias=0, out_bias=0, mlp_bias=0, norms=2, qk=0):
    """A Llama-style layer counted from its modules: q, k, v, o, gate, up, down, RMS norms."""
    attn = e * h * hd + 2 * e * kv * hd + h * hd * e + qkv_bias * (h + 2 * kv) * hd + out_bias * e
    return attn + 3 * e * f + mlp_bias * (2 * f + e) + norms * e + qk


# --- 1. head_dim, multi-query, biases, norms, partial rotary, tied heads, positions ---------

def test_head_dim_apart_from_e_over_h_mistral_nemo():
    """Mistral-NeMo-12B: 5120 wide, 32 heads of 128 (not 160): 12.25 B as published."""
    v, e, L, f, h, kv, hd = 131072, 5120, 40, 14336, 32, 8, 128
    arch = Architecture("nemo", L, e, h, f, v, kv_heads=kv, head_dim=hd, mlp="swiglu", norm="rms",
                        rotary=True, tied=False, qkv_bias=False, bias=False, dropouts=False)
    assert _params(arch) == 2 * v * e + L * _llama_layer(e, f, h, kv, hd) + e == 12_247_782_400


def test_value_head_size_apart_from_query_key():
    block = attention(1, 8, 64, Heads(4, head_dim=16, v_head_dim=8), projections=Projections(False, False),
                      residual=Residual(dropouts=False))
    assert block["qkv_proj"].weights / 2 == 64 * (4 * 16 + 4 * 16 + 4 * 8)
    assert block["v_proj"].weights / 2 == 4 * 8 * 64
    assert block["attend"].act_out / 2 == 4 * 8 * 8           # (b, h, l, v_head_dim)


def test_multi_query_attention_has_one_key_value_head():
    e, h, q = 64, 4, 16
    block = attention(1, 8, e, Heads(h, kv_heads=1), projections=Projections(False, False))
    assert block["qkv_proj"].weights / 2 == e * (h * q + 2 * q)
    assert block["logits"].act_in_other / 2 == 8 * q           # one K head of (l, q)


@pytest.mark.parametrize("qkv_bias, bias, mlp_bias", [(True, True, True), (True, False, False),
                                                      (False, False, True), (True, True, False)])
def test_bias_variants(qkv_bias, bias, mlp_bias):
    """Qwen2 biases only q, k, v; Llama's attention_bias biases q, k, v and o; mlp_bias the MLP."""
    e, f, h, kv = 64, 256, 4, 2
    arch = _arch(kv_heads=kv, mlp="swiglu", norm="rms", final_norm=False, qkv_bias=qkv_bias, bias=bias,
                 mlp_bias=mlp_bias, n_layers=1)
    layer = _llama_layer(e, f, h, kv, e // h, qkv_bias=qkv_bias, out_bias=bias, mlp_bias=mlp_bias)
    assert _params(arch) == 2 * 100 * e + layer


@pytest.mark.parametrize("norm, per_norm", [("layer", 2), ("layer_nobias", 1), ("layer_noaffine", 0),
                                            ("rms", 1), ("rms_noaffine", 0)])
def test_norm_kinds_parameters(norm, per_norm):
    e = 64
    with_norms, without = _arch(norm=norm), _arch(norm=norm, final_norm=False)
    assert _params(with_norms) - _params(without) == per_norm * e          # the final norm
    layer = transformer_layer(1, 8, e, 256, 4, projections=Projections(False, False), wiring=Wiring(norm=norm))
    assert layer.total("weights") / 2 == 4 * e * e + 2 * e * 256 + 2 * per_norm * e


def test_bias_free_layer_norm_flops_by_element():
    from symbolic_cost.ops.norm import layer_norm
    n = 2 * 3 * 5
    full, free = layer_norm(2, 3, 5), layer_norm(2, 3, 5, bias=False)
    assert full.flops_fwd - free.flops_fwd == n and full.flops_bwd - free.flops_bwd == 2 * n


@pytest.mark.parametrize("qk_norm, extra", [("head", 2 * 16), ("projection", (4 + 2) * 16), ("l2", 0),
                                            ("head_each", (4 + 2) * 16)])
def test_query_key_norms(qk_norm, extra):
    """Qwen3 / Gemma 3: one RMS weight per head size for q and k; OLMo 2: over the projections;
    Llama 4: none; Cohere: one per head size for every head.  The weights are read forward and
    backward and their gradients written (``ops.norm``)."""
    plain = attention(1, 8, 64, Heads(4, kv_heads=2), projections=Projections(False, False),
                      residual=Residual(norm="rms"))
    normed = attention(1, 8, 64, Heads(4, kv_heads=2, qk_norm=qk_norm), projections=Projections(False, False),
                       residual=Residual(norm="rms"))
    assert (normed.total("weights") - plain.total("weights")) / 2 == extra
    assert normed.names[2:4] == ["q_norm", "k_norm"]
    if qk_norm == "head_each":
        once = attention(1, 8, 64, Heads(4, kv_heads=2, qk_norm="head"), projections=Projections(False, False),
                         residual=Residual(norm="rms"))
        more = (normed.total("weights") - once.total("weights"))
        assert normed.total("mem_fwd") - once.total("mem_fwd") == more
        assert normed.total("mem_bwd") - once.total("mem_bwd") == 2 * more


def test_projection_qk_norm_reduces_its_statistics_over_the_tensor_group():
    block = attention(1, 8, 64, Heads(4, kv_heads=2, qk_norm="projection"), 2, residual=Residual(norm="rms"))
    kinds = [(c.kind, c.pass_, c.elements) for c in block["q_norm"].collectives]
    assert kinds == [("allreduce", "fwd", 8), ("allreduce", "bwd", 8)]


def test_attention_sinks_one_logit_per_head_split_over_the_tensor_group():
    """GPT-OSS: 64 heads on 2 ranks hold 32 sink logits each; every one of the b l queries of a
    head adds its sink's exponential to the row sum (2 FLOPs); eager attention keeps the sink
    column of the probabilities, flash attention nothing more."""
    b, l, e, h = 2, 8, 128, 64
    plain = attention(b, l, e, h, 2, projections=Projections(False, False))
    eager = attention(b, l, e, h, 2, projections=Projections(False, False), scores=Scores(sinks=True))
    flash = attention(b, l, e, h, 2, projections=Projections(False, False), scores=Scores(sinks=True),
                      run=Run(flash=True))
    assert (eager.total("weights") - plain.total("weights")) / 2 == 32
    assert eager.total("flops_fwd") - plain.total("flops_fwd") == 2 * b * l * 32
    assert eager["attention_sinks"].act_buffer / 2 == b * l * 32 and flash["attention_sinks"].act_buffer == 0


def test_partial_rotary_rotates_a_fraction_of_each_head():
    """GPT-NeoX: rotary_pct 0.25 of 64 dims: 16 dims of every q and k head, 3 FLOPs each."""
    b, l, h, e = 2, 8, 4, 256
    block = attention(b, l, e, Heads(h, rotary=True, rotary_dim=16))
    assert block["rotary"].flops_fwd == 3 * b * l * (h + h) * 16


def test_tied_head_and_learned_positions():
    v, e = 100, 64
    tied, untied = _arch(tied=True), _arch(tied=False)
    assert _params(untied) - _params(tied) == v * e
    assert _params(_arch(positions=2050)) - _params(_arch()) == 2050 * e


# --- 2. parallel attention and MLP ------------------------------------------------------

def test_parallel_block_parameters_gpt_j():
    """GPT-J layer: q, k, v, out without bias, fc_in and fc_out with bias, one LayerNorm."""
    e, f, h = 64, 256, 4
    layer = transformer_layer(1, 8, e, f, h, projections=Projections(False, False), ffn=Feedforward(bias=True),
                              wiring=Wiring(parallel=True, norms=1, dropouts=False))
    assert layer.total("weights") / 2 == 4 * e * e + (e * f + f) + (f * e + e) + 2 * e


def test_parallel_block_collectives_one_reduction_each_way():
    """Both branches read one gathered input and their partial outputs are summed first:
    one allreduce of (b, l, e) forward (the sum) and one backward (the input gradient)."""
    b, l, e, m1 = 2, 8, 64, 4
    layer = transformer_layer(b, l, e, 256, 4, m1, wiring=Wiring(parallel=True, norms=1, dropouts=False))
    assert sorted((c.kind, c.pass_, c.elements) for c in layer.collectives) == \
        [("allreduce", "bwd", b * l * e), ("allreduce", "fwd", b * l * e)]
    sequential = transformer_layer(b, l, e, 256, 4, m1, wiring=Wiring(dropouts=False))
    assert len(sequential.collectives) == 4


def test_parallel_block_with_two_norms_gathers_each_branch_input():
    layer = transformer_layer(2, 8, 64, 256, 4, 4, 4, wiring=Wiring(parallel=True, norms=2, dropouts=False))
    gathers = [c for c in layer.collectives if c.kind == "allgather" and c.pass_ == "fwd"]
    assert len(gathers) == 2 + 0                   # one per norm output (s1 = m1: no extra gather)
    with pytest.raises(ValueError, match="norms must be one of"):
        transformer_layer(2, 8, 64, 256, 4, wiring=Wiring(parallel=True, norms=4))


def test_sandwich_norms_gemma2():
    layer = transformer_layer(1, 8, 64, 256, 4, ffn=Feedforward(gated=True), projections=Projections(False, False),
                              wiring=Wiring(norm="rms", norms=4, dropouts=False))
    assert [n for n in layer.names if "norm" in n] == ["rms_norm_1", "rms_norm_post_attention", "rms_norm_2",
                                                        "rms_norm_post_mlp"]


# --- 3. sliding windows -----------------------------------------------------------------

def _scores_by_enumeration(l, w, causal):
    """Count (query, key) pairs a windowed kernel scores by walking every query."""
    return sum(min(t + 1, w) if causal else min(w, l) for t in range(l))


@pytest.mark.parametrize("l, w", [(8, 3), (8, 8), (5, 9)])
def test_window_scores_by_enumeration(l, w):
    h, q = 2, 4
    for causal_flops in ("full", "exact"):
        conventions = conv.DEFAULT.but(causal_flops=causal_flops)
        block = attention(1, l, h * q, h, scores=Scores(causal=True, window=w), residual=Residual(dropouts=False),
                          run=Run(conventions=conventions))
        pairs = _scores_by_enumeration(l, w, causal_flops == "exact")
        assert block["logits"].flops_fwd == h * pairs * (2 * q - 1)
        assert block["softmax"].act_buffer == 2 * h * l * min(w, l)      # the band is stored
    dense = attention(1, l, h * q, h, scores=Scores(causal=True, window=w), run=Run(conventions=DENSE))
    assert dense["logits"].flops_fwd == h * l * l * (2 * q - 1)


def test_window_is_symbolic():
    w = Symbol("w", positive=True, integer=True)
    block = attention(S.b, S.l, S.e, S.h, scores=Scores(window=w))
    assert block["softmax"].act_buffer == 2 * S.b * S.h * S.l * Min(S.l, w)
    full = attention(S.b, S.l, S.e, S.h)["logits"].flops_fwd
    assert block["logits"].flops_fwd.subs({w: 4, S.l: 16}) == full.subs(S.l, 16) / 4     # 4 of 16 keys
    assert block["logits"].flops_fwd.subs({w: 32, S.l: 16}) == full.subs(S.l, 16)        # window >= l


def test_alternating_windows_gemma2():
    """Half the layers windowed: the model's FLOPs are half windowed, half full layers."""
    base = dict(mlp="geglu", norm="rms", norms=4, window=4, qkv_bias=False, bias=False, n_layers=4)
    training = Training(b=1, l=16)
    every = model_cost(_arch(**base), training)
    half = model_cost(_arch(**base, windowed_layers=2), training)
    none = model_cost(_arch(**{k: v for k, v in base.items() if k != "window"}), training)
    assert 2 * half.flops_fwd == every.flops_fwd + none.flops_fwd
    assert [count for _, count in half.blocks] == [1, 2, 2, 1]
    dense = model_cost(_arch(**base, windowed_layers=2), training, DENSE)
    assert [count for _, count in dense.blocks] == [1, 4, 1] and dense.flops_fwd == none.flops_fwd


# --- 4. config loading: the config class's defaults, every key accounted for, refusals -------

def _load(**config):
    from symbolic_cost.models.config import from_config
    return from_config(config)


def _neox_20b_by_hand():
    """GPT-NeoX-20B (GPTNeoXConfig's defaults): biased fused qkv and dense, biased MLP, two
    LayerNorms a layer, an untied head: 20,554,567,680 as published."""
    e, f, v, L = 6144, 24576, 50432, 44
    layer = (3 * e * e + 3 * e) + (e * e + e) + (e * f + f) + (f * e + e) + 4 * e
    return 2 * v * e + L * layer + 2 * e


@pytest.mark.parametrize("model_type, published", [
    ("gpt2", 124_439_808), ("llama", 6_738_415_616), ("mistral", 7_241_732_096), ("t5", 60_506_624),
    ("bert", 109_482_240), ("gpt_neox", _neox_20b_by_hand()), ("gemma2", 2_614_341_888)])
def test_missing_keys_take_the_config_class_defaults(model_type, published):
    """Each class's defaults are a published model: GPT-2 small, Llama-2-7B, Mistral-7B, t5-small,
    bert-base (base model and pooler), GPT-NeoX-20B, Gemma-2-2B."""
    assert _params(_load(model_type=model_type)) == published


def test_mistral_defaults_to_a_window_on_every_layer():
    arch = _load(model_type="mistral")
    assert (arch.window, arch.windowed_layers) == (4096, 32)
    assert _load(model_type="mistral", sliding_window=None).window is None


@pytest.mark.parametrize("config, count", [
    (dict(model_type="gemma2", num_hidden_layers=26), 13),                 # every other layer
    (dict(model_type="gemma3_text", num_hidden_layers=26), 26 - 26 // 6),  # five of every six
    (dict(model_type="gemma3_text", num_hidden_layers=12, sliding_window_pattern=4), 9),
    (dict(model_type="qwen2", num_hidden_layers=8, use_sliding_window=True, max_window_layers=3), 5),
    (dict(model_type="qwen2", num_hidden_layers=3, use_sliding_window=True,
          layer_types=["sliding_attention", "full_attention", "sliding_attention"]), 2)])
def test_sliding_window_layer_patterns(config, count):
    assert _load(**config).windowed_layers == count


def test_qwen2_without_use_sliding_window_has_no_window():
    assert _load(model_type="qwen2", sliding_window=4096).window is None


@pytest.mark.parametrize("name, published", [
    ("BertForMaskedLM", 109_514_298), ("BertForPreTraining", 110_106_428),
    ("BertForSequenceClassification", 109_483_778), ("BertModel", 109_482_240)])
def test_bert_heads_named_by_architectures(name, published):
    """bert-base-uncased with each head, as Hugging Face reports them: the masked-LM transform
    (768 x 768 + 768, LayerNorm 2 x 768) and decoder bias (30522) on a tied decoder; NSP
    768 x 2 + 2 on top of the pooler; a 2-class classifier on the pooler."""
    assert _params(_load(model_type="bert", architectures=[name])) == published


def test_classification_heads_by_hand():
    e, v = 768, 50265
    labels = {"0": "negative", "1": "neutral", "2": "positive"}
    roberta = _load(model_type="roberta", architectures=["RobertaForSequenceClassification"], id2label=labels,
                    max_position_embeddings=514, type_vocab_size=1)
    masked = _load(model_type="roberta", architectures=["RobertaForMaskedLM"], max_position_embeddings=514,
                   type_vocab_size=1)
    # RoBERTa's classifier: dense (e x e + e) and out_proj (e x 3 + 3); the masked-LM head:
    # dense (e x e + e), LayerNorm (2e), a decoder bias (v) on the tied table
    assert _params(roberta) - _params(masked) == (e * e + e + 3 * e + 3) - (e * e + e + 2 * e + v)
    llama = _load(model_type="llama", architectures=["LlamaForSequenceClassification"])
    assert _params(_load(model_type="llama")) - _params(llama) == 32000 * 4096 - 2 * 4096   # score: e x 2


def test_encoder_decoder_blocks_t5():
    cost = model_cost(_load(model_type="t5"), Training(b=1, l=8))
    assert [(blk.name, count) for blk, count in cost.blocks] == [
        ("embedding", 1), ("layer", 6), ("encoder_end", 1), ("decoder_start", 1), ("layer", 6), ("head", 1)]
    decoder = cost.blocks[4][0]
    assert {"cross_q_proj", "cross_kv_proj", "cross_logits"} <= set(decoder.names)
    assert cost.blocks[3][0]["word_embeddings"].weights == 0           # the encoder's table, shared


def test_t5_untied_head_counts_its_own_table():
    tied, untied = _load(model_type="t5"), _load(model_type="t5", tie_word_embeddings=False)
    assert _params(untied) - _params(tied) == 32128 * 512


@pytest.mark.parametrize("config, message", [
    (dict(model_type="llama", tie_word_embeddings="false"), "tie_word_embeddings must be true or false, got 'false'"),
    (dict(model_type="llama", attention_bias=1), "attention_bias must be true or false, got 1"),
    (dict(model_type="llama", num_hidden_layers=True), "num_hidden_layers must be a positive integer, got True"),
    (dict(model_type="llama", hidden_size=4096.0), "hidden_size must be a positive integer"),
    (dict(model_type="llama", attention_dropout="0.1"), "attention_dropout must be a non-negative number"),
    (dict(model_type="llama", num_experts=8), "unknown key 'num_experts'"),
    (dict(model_type="llama", rope_scaling={"rope_type": "linear", "factor": 2.0, "scale": 1}),
     "unknown key rope_scaling.scale"),
    (dict(model_type="qwen2", num_hidden_layers=2, use_sliding_window=True, layer_types=["full_attention"]),
     "layer_types must list 2"),
    (dict(model_type="bert", architectures=["BertForTokenClassification"]), "this head is not supported"),
    (dict(model_type="bert", position_embedding_type="relative_key"), "position_embedding_type='relative_key'"),
    (dict(model_type="falcon", multi_query=False, num_kv_heads=8), "num_kv_heads=8 needs new_decoder_architecture"),
    (dict(model_type="opt", layerdrop=0.1), "layerdrop=0.1 is not supported"),
    (dict(model_type="gpt2", add_cross_attention=True), "add_cross_attention=True is not supported"),
    (dict(model_type="t5", feed_forward_proj="gated-gelu-new"), "feed_forward_proj must be ACT or gated-ACT"),
    (dict(model_type="gemma2", use_bidirectional_attention=True), "use_bidirectional_attention=True"),
    (dict(model_type="mistral", num_attention_heads=32, num_key_value_heads=5), "num_key_value_heads=5 does not divide"),
    (dict(model_type="cohere2", sliding_window_pattern="LLLG"), "sliding_window_pattern must be a positive integer"),
    (dict(model_type="exaone4", sliding_window_pattern=0), "sliding_window_pattern must be a positive integer"),
    ("not a dict", "config.json must be a JSON object, got str"),
])
def test_refusals_name_the_key(config, message):
    from symbolic_cost.models.config import from_config
    with pytest.raises(ValueError) as error:
        from_config(config if isinstance(config, dict) else config)
    assert message in str(error.value)


def test_keys_that_do_not_change_the_cost_are_accepted():
    plain = _load(model_type="llama")
    noisy = _load(model_type="llama", bos_token_id=1, eos_token_id=[2, 3], torch_dtype="bfloat16",
                  initializer_range=0.01, rms_norm_eps=1e-5, rope_theta=5e5, pretraining_tp=2,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                  architectures=["LlamaForCausalLM"], transformers_version="4.45.0", use_cache=True)
    assert _params(noisy) == _params(plain)


def test_partial_rotary_from_the_config():
    """GPT-NeoX's rotary_pct (0.25 of 64 = 16 dims), Phi's partial_rotary_factor (0.4 of 80 = 32),
    a rope_parameters entry winning over the top-level key (as transformers' standardisation does)."""
    assert _load(model_type="gpt_neox", hidden_size=1024, num_attention_heads=16).rotary_dim == 16
    assert _load(model_type="phi", hidden_size=2560, num_attention_heads=32, partial_rotary_factor=0.4).rotary_dim == 32
    assert _load(model_type="phi", hidden_size=2560, num_attention_heads=32, partial_rotary_factor=0.4,
                 rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}).rotary_dim == 40


def test_dropout_probabilities_switch_each_site():
    sites = lambda a: (a.dropouts, a.attention_dropout, a.embedding_dropout)  # noqa: E731
    assert sites(_load(model_type="llama")) == (False, False, False)
    assert sites(_load(model_type="llama", attention_dropout=0.1)) == (False, True, False)
    assert sites(_load(model_type="gpt2", resid_pdrop=0, embd_pdrop=0, attn_pdrop=0.0)) == (False, False, False)
    assert sites(_load(model_type="phi", resid_pdrop=0.1)) == (True, False, False)        # phi-2
    assert sites(_load(model_type="bloom", hidden_dropout=0.1)) == (True, False, False)   # no embedding dropout


def test_attention_probability_dropout_alone():
    """Only the probabilities' dropout: its mask (b h l l bytes) is kept, no closing dropout."""
    b, l, h = 2, 8, 4
    arch = _arch(attention_dropout=True, n_layers=1)
    layer = model_cost(arch, Training(b=b, l=l)).layer
    assert layer["dropout_softmax"].act_buffer == b * h * l * l
    assert "dropout" not in layer.names and "residual" in layer.names


def test_every_key_of_each_config_class_is_accounted_for():
    """The whole ``config.json`` that each ``transformers`` config class writes with its defaults
    loads (no key of the class is unknown), and its parameter count is the ``numel`` of the model
    ``transformers`` builds from it (on the meta device)."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from symbolic_cost.models.config import from_config
    from symbolic_cost.models.families import FAMILIES
    for model_type in FAMILIES:
        config = transformers.AutoConfig.for_model(model_type)
        if model_type == "deepseek_v2":     # its default num_experts_per_tok (null) routes no token
            config.num_experts_per_tok = 6
        if model_type == "nemotron":        # its default num_key_value_heads (null) builds no attention
            config.num_key_value_heads = config.num_attention_heads
        arch = from_config(json.loads(config.to_json_string(use_diff=False)), model_type)
        auto = (transformers.AutoModel if model_type in ("bert", "roberta") else
                transformers.AutoModelForSeq2SeqLM if model_type == "t5" else transformers.AutoModelForCausalLM)
        with torch.device("meta"):
            model = auto.from_config(config)
        assert _params(arch) == sum(p.numel() for p in model.parameters()), model_type


@pytest.mark.parametrize("name", ["gemma-2-2b", "DeepSeek-V2-Lite", "t5-small", "Qwen3-30B-A3B"])
def test_profile_tree_holds_every_layer_group(name):
    """The ``profile`` tree lists every layer of every group (sliding-window and full, dense and
    MoE, T5's encoder and decoder): its parameters add up to the model's."""
    import pathlib
    from symbolic_cost.models.config import load
    from symbolic_cost.tools.deepspeed_profiler import model_tree
    arch = load(pathlib.Path(__file__).parent / "hf_configs" / f"{name}.json")
    cost = model_cost(arch, Training(b=1, l=128))
    tree = model_tree(cost)
    layers = tree.children[1].children
    assert len(layers) == sum(int(count) for _, count in cost.stack[1:-1])
    assert tree.total("params") == cost.parameters


def test_a_roberta_sequence_stops_two_rows_short_of_its_position_table():
    """RoBERTa numbers its positions from ``padding_idx + 1`` (transformers'
    ``create_position_ids_from_input_ids``): 514 rows hold 512 tokens, and 514 tokens are refused."""
    import json
    from pathlib import Path
    from symbolic_cost.models.config import from_config
    config = json.loads((Path(__file__).parent / "hf_configs" / "roberta-base.json").read_text())
    assert config["max_position_embeddings"] == 514 and config["pad_token_id"] == 1
    arch = from_config(config)
    assert arch.context == 512 and arch.positions == 514
