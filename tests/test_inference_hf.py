"""Inference against Hugging Face ``transformers`` generating for real: the oracle of issue 19.

Small configs of each attention kind the library caches (multi-head: GPT-2; grouped-query:
Llama, and with experts, Mixtral; multi-query: Falcon; sliding windows on every layer: Mistral;
alternating sliding and full layers: Gemma 2; chunked layers, whose cache transformers keeps as
a sliding window's: Llama 4 (one expert, which its code runs on every token as the library
does); windows on every other layer, experts on all and attention sinks: GPT-OSS; cross-attention: T5; multi-head latent attention: DeepSeek-V3) are built on the CPU with eager attention and run
through ``generate`` (greedy, a fixed number of new tokens).  Compared exactly:

Latent attention (DeepSeek-V3, with its mixture of experts) runs as transformers runs it: the
latent and the rotary key cached, every cached latent up-projected again at each step
(``mla="recompute"``; the experts through ``batched_mm``, every routed pair once).

* the KV cache: the bytes of every tensor the returned cache holds (``numel x element_size``)
  against ``kv_cache_bytes`` at the generation's final token count, in fp32, in bf16, and with
  transformers' fp8 cache (one byte an element and one fp32 scale per K or V tensor);
* the matrix FLOPs of every forward ``generate`` runs, each under its own ``FlopCounterMode``
  (``2mnk`` per product): the first (with T5's encoder) against ``prefill``, step ``j`` against
  ``decode`` over the ``P + j - 1`` tokens then cached, summing the products of the library's
  rows (``Cost.gemms``, ``2mnk``).

By design: eager prefill scores every key of a sliding window and masks afterwards (the
``window_count="dense"`` convention counts that; decode reads only the ``w - 1`` cached tokens
and its own), and the library's matrix rows also count bias adds, which the counter leaves out:
the products are compared, as in ``test_hf_families``.  Skipped without torch or transformers.
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from symbolic_cost import conventions as conv  # noqa: E402
from symbolic_cost.inference import Serving, decode, final_tokens, kv_cache_bytes, prefill  # noqa: E402
from symbolic_cost.inference.serving import cached_before, encoder_tokens  # noqa: E402
from symbolic_cost.models.config import from_config  # noqa: E402

TINY = dict(hidden_size=40, num_attention_heads=4, num_key_value_heads=2, head_dim=10, intermediate_size=48,
            num_hidden_layers=2, vocab_size=64)
CASES = {
    "gpt2-mha": dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_embd=40, n_head=4, n_layer=2,
                     n_inner=48, vocab_size=64, n_positions=32),
    "llama-gqa": dict(model_type="llama", architectures=["LlamaForCausalLM"], max_position_embeddings=64, **TINY),
    "falcon-mqa": dict(model_type="falcon", architectures=["FalconForCausalLM"], hidden_size=40,
                       num_attention_heads=4, multi_query=True, new_decoder_architecture=False,
                       num_hidden_layers=2, vocab_size=64),
    "mistral-sliding": dict(model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=3, **TINY),
    "gemma2-alternating": dict(model_type="gemma2", architectures=["Gemma2ForCausalLM"], sliding_window=3, **TINY),
    "llama4-chunked": dict(model_type="llama4_text", architectures=["Llama4ForCausalLM"], attention_chunk_size=3,
                           num_local_experts=1, num_experts_per_tok=1, intermediate_size_mlp=48,
                           max_position_embeddings=64, **{**TINY, "num_hidden_layers": 4}),   # 3 chunked, 1 full
    "gpt-oss-sinks": dict(model_type="gpt_oss", architectures=["GptOssForCausalLM"], sliding_window=3,
                          num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64, **TINY),
    "mixtral-moe": dict(model_type="mixtral", architectures=["MixtralForCausalLM"], num_local_experts=4,
                        num_experts_per_tok=2, max_position_embeddings=64, **TINY),
    "t5-cross": dict(model_type="t5", architectures=["T5ForConditionalGeneration"], d_model=40, num_heads=4,
                     d_kv=10, d_ff=48, num_layers=2, num_decoder_layers=2, vocab_size=64, decoder_start_token_id=0),
    "deepseek-v3-latent": dict(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], hidden_size=40,
                               num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2, vocab_size=64,
                               intermediate_size=48, moe_intermediate_size=16, n_routed_experts=4,
                               num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=12,
                               q_lora_rank=20, qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=8, n_group=1,
                               topk_group=1, max_position_embeddings=64),
}
B, L_IN, L_OUT = 2, 5, 4          # the prompt is longer than the sliding windows of 3 keys
EAGER = conv.DEFAULT.but(matmul_flops="2mnk", reduction_flops=False, window_count="dense")


def hf_model(config: dict, dtype=torch.float32):
    values = dict(config)
    hf = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    torch.manual_seed(0)
    model = getattr(transformers, config["architectures"][0])._from_config(
        hf, attn_implementation="eager", experts_implementation="batched_mm")
    return model.to(dtype).eval()


def counting(module, calls: list) -> None:
    """Run every forward of ``module`` under its own ``FlopCounterMode``; append its total to
    ``calls`` (``functools.wraps`` keeps the signature ``generate`` inspects)."""
    original = module.forward

    @functools.wraps(original)
    def forward(*args, **kwargs):
        with FlopCounterMode(display=False) as counter:
            out = original(*args, **kwargs)
        calls.append(counter.get_total_flops())
        return out

    module.forward = forward


def generate(model, cache=None):
    """Greedy generation of ``L_OUT`` tokens for ``B`` prompts of ``L_IN``: (the returned cache,
    the FLOPs of every forward in order, T5's encoder first)."""
    calls = []
    if model.config.is_encoder_decoder:
        counting(model.get_encoder(), calls)
    counting(model, calls)
    ids = torch.randint(3, 60, (B, L_IN))
    extra = {} if model.config.is_encoder_decoder else dict(attention_mask=torch.ones_like(ids))
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=L_OUT, min_new_tokens=L_OUT, do_sample=False, pad_token_id=0,
                             return_dict_in_generate=True, past_key_values=cache, **extra)
    return out.past_key_values, calls


def cache_tensors(cache):
    """Every tensor a returned cache holds: keys and values per layer (self- and
    cross-attention), the quantized ones with their scales."""
    caches = [cache.self_attention_cache, cache.cross_attention_cache] if hasattr(cache, "cross_attention_cache") \
        else [cache]
    for one in caches:
        for layer in one.layers:
            yield layer.keys
            yield layer.values
            for quantized in (getattr(layer, "_quantized_keys", None), getattr(layer, "_quantized_values", None)):
                yield from (quantized or ())


def cache_bytes(cache) -> int:
    return sum(t.numel() * t.element_size() for t in cache_tensors(cache))


def products(phase) -> int:
    """The library's forward matrix products in a phase, ``2mnk`` each (``Cost.gemms``)."""
    return sum(count * 2 * g.m * g.n * g.k * g.count for row, count in phase.rows() for g in row.gemms
               if g.pass_ == "fwd")


def serving(precision="fp32", kv_dtype=None) -> Serving:
    """The generation of ``generate``; latent attention as transformers runs it (``"recompute"``)."""
    return Serving(b=B, l_in=L_IN, l_out=L_OUT, precision=precision, kv_dtype=kv_dtype, mla="recompute")


@pytest.mark.parametrize("name", CASES)
def test_kv_cache_bytes_equal_the_tensors_transformers_allocates(name):
    arch, s = from_config(CASES[name], name), serving()
    cache, _ = generate(hf_model(CASES[name]))
    expected = kv_cache_bytes(arch, B, final_tokens(arch, s), encoder=encoder_tokens(arch, s), kv_dtype="fp32",
                              mla=s.mla)
    assert cache_bytes(cache) == expected


@pytest.mark.parametrize("name", CASES)
def test_prefill_and_decode_matrix_flops_equal_flop_counter(name):
    arch, s = from_config(CASES[name], name), serving()
    _, calls = generate(hf_model(CASES[name]))
    encoder = 1 if arch.encoder_decoder else 0             # T5's encoder ran apart, first
    first, steps = sum(calls[:encoder + 1]), calls[encoder + 1:]
    assert len(steps) == L_OUT - 1
    assert products(prefill(arch, s, EAGER)) == first
    assert [products(decode(arch, s, cached_before(arch, s, j), EAGER)) for j in range(1, L_OUT)] == steps


def test_bf16_cache_is_two_bytes_an_element():
    arch = from_config(CASES["llama-gqa"], "llama-gqa")
    cache, _ = generate(hf_model(CASES["llama-gqa"], torch.bfloat16))
    s = serving("bf16")
    # 2 sequences x 8 tokens x 2 layers x (K + V) x 2 heads x 10 dims x 2 bytes
    assert cache_bytes(cache) == kv_cache_bytes(arch, B, final_tokens(arch, s), kv_dtype="bf16") == 2 * 8 * 2 * 2 * 2 * 10 * 2


def test_fp8_cache_is_one_byte_an_element_and_a_scale_per_tensor():
    arch, model = from_config(CASES["llama-gqa"], "llama-gqa"), hf_model(CASES["llama-gqa"])
    cache, _ = generate(model, transformers.QuantizedCache("fp8", model.config))
    s = serving("fp32", "fp8")
    elements = B * final_tokens(arch, s) * 2 * 2 * 2 * 10
    assert cache_bytes(cache) == kv_cache_bytes(arch, B, final_tokens(arch, s), kv_dtype="fp8") == elements + 2 * 2 * 4


def test_latent_attention_caches_the_latent_and_the_rotary_key():
    """By design: transformers' DeepSeek cache is the library's latent cache (``r_kv + d_r`` a
    token); decompressed keys and values would take ``h (d_n + d_r + d_v)``."""
    arch = from_config(CASES["deepseek-v3-latent"], "deepseek-v3-latent")
    cache, _ = generate(hf_model(CASES["deepseek-v3-latent"]))
    tokens = final_tokens(arch, serving())
    assert cache_bytes(cache) == B * tokens * 2 * (12 + 4) * 4 == kv_cache_bytes(arch, B, tokens, kv_dtype="fp32")
    assert kv_cache_bytes(arch, B, tokens, kv_dtype="fp32", mla="decompressed") == B * tokens * 2 * 4 * (10 + 8) * 4
