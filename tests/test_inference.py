"""Inference (issue 19): the KV cache, prefill and decode, time and throughput against hand counts
from published model shapes, KV caching's own identity, and the roofline's definitions.

The transformers oracle (cache tensors and FlopCounterMode on real generation) is
``test_inference_hf.py``; these checks need neither torch nor transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sympy import Integer, Rational, ceiling, oo, simplify
from sympy.parsing.sympy_parser import parse_expr

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.inference import (KVFormat, Serving, decode, kv_bytes_per_token, kv_cache_bytes, kv_format,
                                     paging_waste, prefill)
from symbolic_cost.inference.phases import mean_decode
from symbolic_cost.inference.serving import cached_before, final_tokens
from symbolic_cost.inference.throughput import crossover_batch, inference_cost, max_batch, phase_time
from symbolic_cost.models.config import from_config, preset
from symbolic_cost.timing.hardware import SYSTEMS

HF = Path(__file__).parent / "hf_configs"
GIB = 2**30
TORCH = conv.DEFAULT.but(matmul_flops="2mnk", reduction_flops=False)


def published(name: str):
    return from_config(json.loads((HF / f"{name}.json").read_text()), name)


# Llama 3 70B as published (config.json of meta-llama/Meta-Llama-3.1-70B)
LLAMA_3_70B = from_config(dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=8192,
                               num_attention_heads=64, num_key_value_heads=8, num_hidden_layers=80,
                               intermediate_size=28672, vocab_size=128256, max_position_embeddings=131072),
                          "llama-3-70b")


# --- the cache: sizes of published models by hand --------------------------------------------

def test_llama_3_70b_at_128k_context_and_batch_32_takes_1280_gib():
    # 80 layers x (K + V) x 8 heads x 128 dims x 2 bytes = 320 KiB a token
    assert kv_bytes_per_token(LLAMA_3_70B) == 80 * 2 * 8 * 128 * 2 == 320 * 2**10
    assert kv_cache_bytes(LLAMA_3_70B, 32, 131072) == 320 * 2**10 * 131072 * 32 == 1280 * GIB


def test_multi_head_multi_query_and_grouped_query_per_token():
    assert kv_bytes_per_token(preset("llama-2-7b")) == 32 * 2 * 32 * 128 * 2          # MHA: 512 KiB
    assert kv_bytes_per_token(published("falcon-7b")) == 32 * 2 * 1 * 64 * 2         # MQA: one K/V head
    assert kv_bytes_per_token(published("Mistral-7B-v0.1")) == 32 * 2 * 8 * 128 * 2  # GQA: 8 of 32 heads


def test_sliding_window_layers_keep_the_window_less_one_token():
    mistral = published("Mistral-7B-v0.1")              # window 4096 on all 32 layers
    per_layer_token = 2 * 8 * 128 * 2
    assert kv_cache_bytes(mistral, 1, 1000) == 32 * 1000 * per_layer_token
    assert kv_cache_bytes(mistral, 1, 32768) == 32 * 4095 * per_layer_token
    gemma = published("gemma-2-2b")                     # 13 sliding (4096) and 13 full layers, 4 x 256
    per_layer_token = 2 * 4 * 256 * 2
    assert kv_cache_bytes(gemma, 2, 8192) == 2 * (13 * 4095 + 13 * 8192) * per_layer_token


def test_cross_attention_caches_the_encoder_output_in_every_decoder_layer():
    t5 = published("flan-t5-small")                     # 8 decoder layers, 6 heads of 64
    assert kv_cache_bytes(t5, 3, 20, encoder=100, kv_dtype="fp32") == 3 * 8 * (20 + 100) * 2 * 6 * 64 * 4
    assert kv_bytes_per_token(t5) == 8 * 2 * 6 * 64 * 2                     # the decoder's own tokens


def test_formats_per_element_and_their_scales():
    llama = preset("llama-2-7b")
    elements = 32 * 2 * 4096 * 10
    assert kv_cache_bytes(llama, 1, 10, kv_dtype="fp8") == elements + 2 * 32 * 4     # one fp32 scale a tensor
    assert kv_cache_bytes(llama, 1, 10, kv_dtype="int4") == elements // 2 + elements // 64 * 4
    assert kv_cache_bytes(llama, 1, 10, kv_dtype="fp32") == 2 * kv_cache_bytes(llama, 1, 10)
    custom = KVFormat("int2-g32", 2, group=32, group_bytes=2)
    assert kv_cache_bytes(llama, 1, 10, kv_dtype=custom) == elements // 4 + elements // 32 * 2


def test_paged_allocation_rounds_up_to_whole_pages():
    llama = preset("llama-2-7b")
    per_token = kv_bytes_per_token(llama)
    assert kv_cache_bytes(llama, 4, 17, page=16) == 4 * 32 * per_token
    assert paging_waste(llama, 4, 17, 16) == 4 * 15 * per_token
    assert paging_waste(llama, 4, 32, 16) == 0
    assert kv_cache_bytes(llama, S.b, S.l_ctx, page=S.B) == S.b * S.B * ceiling(S.l_ctx / S.B) * per_token


def test_tensor_and_pipeline_parallelism_split_the_cache():
    llama = preset("llama-2-7b")
    whole = kv_cache_bytes(llama, 8, 1024)
    assert kv_cache_bytes(llama, 8, 1024, m1=4, p=2) == whole / 8
    # 16 ranks past Mistral's 8 key/value heads copy them, one a rank: the cache of 8 ranks
    mistral = published("Mistral-7B-v0.1")
    assert kv_cache_bytes(mistral, 8, 1024, m1=16) == kv_cache_bytes(mistral, 8, 1024, m1=8) == \
        kv_cache_bytes(mistral, 8, 1024) / 8


# --- prefill and decode ------------------------------------------------------------------------

def products(phase) -> Integer:
    """Forward matrix products of a phase, ``2mnk`` each, over the transformer layers only."""
    return sum((n * 2 * g.m * g.n * g.k * g.count for blk, n in phase.stack[1:-1] for r in blk for g in r.gemms
                if g.pass_ == "fwd"), Integer(0))


@pytest.mark.parametrize("name", ["Llama-3.2-1B", "gemma-2-2b", "gpt2"])
def test_a_decode_step_does_the_work_one_more_prompt_token_adds(name):
    """KV caching's identity: a prefill of ``n + 1`` tokens minus one of ``n`` (every layer,
    causal pairs counted exactly) is the decode step over ``n`` cached tokens."""
    arch = published(name)
    exact = TORCH.but(causal_flops="exact")
    for n in (7, 5000 if arch.window is not None else 300):
        more, fewer = (prefill(arch, Serving(b=2, l_in=k, l_out=1, allow_long=True), exact) for k in (n + 1, n))
        step = decode(arch, Serving(b=2, l_in=n, l_out=2, allow_long=True), n, exact)
        assert products(more) - products(fewer) == products(step)


def test_a_decode_layer_by_hand():
    """Llama 2 7B, one token over 99 cached ones, 2mnk: Q, K, V, O (4 e^2), the gated MLP
    (3 e f), and Q K^T and A V over 100 keys (2 x 2 e keys)."""
    e, f, keys = 4096, 11008, 100
    step = decode(preset("llama-2-7b"), Serving(b=1, l_in=50, l_out=100), 99, TORCH)
    assert sum(g.count * 2 * g.m * g.n * g.k for r in step.layer for g in r.gemms if g.pass_ == "fwd") == \
        2 * (4 * e * e + 3 * e * f) + 2 * 2 * e * keys
    assert step.cache_bytes_read == 32 * 2 * e * keys * 2
    # every parameter once (published count), but of the untied 32000-row table only the row looked up
    assert step.weight_bytes_read == 2 * (6738415616 - 32000 * e + e)


def test_latent_attention_decodes_in_three_forms_by_hand():
    """DeepSeek-V3 (128 heads, r_kv 512, d_r 64, d_n 128, d_v 128), one token over 99 cached:
    absorbed, the heads attend the 576-wide latent (one key head, values its first 512) where
    the decompressed form attends 192-wide keys and 128-wide values per head, and the absorbed
    q and o products hold kv_b_proj's weights; recompute up-projects the 99 cached latents again."""
    v3 = published("DeepSeek-V3")
    keys, h, r = 100, 128, 512
    forms = {form: decode(v3, Serving(b=1, l_in=50, l_out=60, mla=form), 99, TORCH) for form in
             ("absorbed", "recompute", "decompressed")}
    flops = {form: products(step) / 61 for form, step in forms.items()}        # per layer
    assert flops["absorbed"] - flops["decompressed"] == 2 * h * keys * ((576 + 512) - (192 + 128))
    assert flops["recompute"] - flops["decompressed"] == 2 * (keys - 1) * r * h * (128 + 128)
    assert forms["absorbed"].cache_bytes_read == 61 * keys * 576 * 2
    assert forms["recompute"].cache_bytes_read == 61 * keys * 512 * 2      # the latents kv_b_proj reads
    assert forms["decompressed"].cache_bytes_read == 61 * keys * h * (192 + 128) * 2
    weights = {form: step.weight_bytes_read for form, step in forms.items()}
    assert weights["absorbed"] == weights["recompute"] == weights["decompressed"]
    assert kv_bytes_per_token(v3) == 61 * 576 * 2 and kv_bytes_per_token(v3, m1=8) == 61 * 576 * 2
    assert kv_bytes_per_token(v3, mla="decompressed", m1=8) == 61 * 16 * 320 * 2


def test_a_decode_step_reads_the_experts_its_tokens_reach():
    """Mixtral 8x7B (32 layers, 8 experts of 3 x 4096 x 14336, top 2): one token reads 2 of 8
    experts; two tokens miss an expert with probability (6/8)^2; all prompt tokens reach all."""
    mixtral = published("Mixtral-8x7B-v0.1")
    experts = 32 * 8 * 3 * 4096 * 14336 * 2
    unread = lambda b: (32000 - b) * 4096 * 2        # of the word table only the b rows looked up  # noqa: E731
    one = decode(mixtral, Serving(b=1, l_in=8, l_out=2), 8)
    assert one.weight_bytes_read == one.total("weights") - experts + experts // 4 - unread(1)
    two = decode(mixtral, Serving(b=2, l_in=8, l_out=2), 8)
    assert two.weight_bytes_read == two.total("weights") - experts * Rational(9, 16) - unread(2)
    assert prefill(mixtral, Serving(b=1, l_in=512, l_out=2)).expert_share == 1 - Rational(3, 4) ** 512
    # expert parallelism over 8 replicas: one expert a layer on each device, 8 tokens routed to it
    spread = inference_cost(mixtral, Serving(b=1, l_in=8, l_out=2, ep=8, d=8))
    assert spread.decode.expert_share == 1 - Rational(3, 4) ** 8
    assert spread.weight_bytes == inference_cost(mixtral, Serving(b=1, l_in=8, l_out=2)).weight_bytes - experts * 7 // 8


def test_experts_served_under_tensor_parallelism_are_split_over_the_tensor_ranks():
    """Mixtral 8x7B on 4 tensor ranks (vLLM): every expert sliced 4 ways by default (etp = m1),
    or 2 whole experts a rank with ep = 4; the same bytes per rank either way.  One token a
    step: each layer allreduces the attention output and the summed expert outputs, 4096
    bf16 values each, 2 (4 - 1)/4 of them sent per rank (ring)."""
    mixtral = published("Mixtral-8x7B-v0.1")
    experts = 32 * 8 * 3 * 4096 * 14336 * 2
    whole = decode(mixtral, Serving(b=1, l_in=8, l_out=2), 8)
    for serving in (Serving(b=1, l_in=8, l_out=2, m1=4), Serving(b=1, l_in=8, l_out=2, m1=4, ep=4)):
        step = decode(mixtral, serving, 8)
        layer = step.layer
        assert 32 * (layer["expert_fc1"].weights + layer["expert_fc2"].weights) == experts // 4
        reduced = [(r.name, c.volume) for r in layer.rows for c in r.collectives if c.pass_ == "fwd" and c.volume]
        assert reduced == [("v_proj", 12288), ("combine", 12288)]     # v_proj: the output projection
        # one token reaches 2 of the 8 experts, whichever rank holds them
        assert step.expert_share == whole.expert_share == Rational(1, 4)


def test_the_generation_head_runs_the_lm_head_on_the_last_token_only():
    gpt2 = preset("gpt2")
    head = prefill(gpt2, Serving(b=3, l_in=100, l_out=2), TORCH).stack[-1][0]
    assert head.names == ["final_layer_norm", "lm_head"]
    assert head["final_layer_norm"].act_in == 3 * 100 * 768 * 2
    assert head["lm_head"].flops_fwd == 2 * 3 * 768 * 50257


def test_the_cache_is_read_at_its_format():
    llama = preset("llama-2-7b")
    bf16, fp8 = (decode(llama, Serving(b=4, l_in=8, l_out=2, kv_dtype=k), 999) for k in ("bf16", "fp8"))
    assert bf16.cache_bytes_read == 4 * 32 * 2 * 4096 * 1000 * 2 == 2 * fp8.cache_bytes_read
    assert bf16.bytes_moved - fp8.bytes_moved == fp8.cache_bytes_read


def test_tensor_parallel_decode_reduces_twice_a_layer_and_gathers_the_logits():
    step = decode(preset("llama-2-7b"), Serving(b=4, l_in=8, l_out=2, m1=2), 10)
    kinds = [(c.kind, c.elements, n) for c, n in step.collectives]
    # the vocabulary-parallel embedding sums its partial lookups; attention and MLP reduce their
    # outputs in each of the 32 layers; the logits' vocabulary shards are gathered for sampling
    assert kinds == [("allreduce", 4 * 4096, 1), ("allreduce", 4 * 4096, 32), ("allreduce", 4 * 4096, 32),
                     ("allgather", 4 * 32000, 1)]


def test_the_mean_step_is_the_mean_of_every_step_for_full_attention():
    llama, s = preset("llama-2-7b"), Serving(b=2, l_in=100, l_out=9)
    steps = [decode(llama, s, cached_before(llama, s, j)) for j in range(1, 9)]
    mean = mean_decode(llama, s)
    for field in ("flops", "bytes_moved", "cache_bytes_read"):
        assert getattr(mean, field) == sum(getattr(x, field) for x in steps) / 8
    times = [phase_time(x, "h100")["total"] for x in steps]
    assert simplify(inference_cost(llama, s).generation_time - phase_time(prefill(llama, s), "h100")["total"]
                    - sum(times)) == 0


# --- time, memory and the two batches --------------------------------------------------------

def test_decode_is_bandwidth_bound_at_small_batch_and_the_bytes_per_token_show():
    cost = inference_cost(preset("llama-2-7b"), Serving(b=1, l_in=512, l_out=128))
    h100 = SYSTEMS["h100"]
    assert cost.decode_time["total"] == cost.decode_time["memory"] == cost.decode.bytes_moved / h100.hbm_bandwidth
    symbolic = inference_cost(preset("llama-2-7b"), Serving(b=S.b, l_in=S.l_in, l_out=2))
    # each cached token costs a sequence 512 KiB of cache read, and in each of the 32 layers its
    # 32 heads' scores (2 bytes) written by Q K^T, read and written by softmax, read by A V
    assert symbolic.decode.bytes_moved.expand().coeff(S.l_in).coeff(S.b) == 2**19 + 32 * 32 * 2 * 4


def test_the_crossover_batch_is_the_smallest_whole_batch_by_hand():
    """Llama 3.2 1B on an H100, flash attention, the one decode step after a 1-token prompt:
    the roofline's two terms at b = 1 and b = 2 give compute ``c b`` (FLOPs scale with the
    batch) and memory ``m_0 + m b`` (the weights once, then each sequence's cache and
    activations); compute-bound from ``m_0 / (c - m)`` on, so the smallest whole batch is its
    ceiling: the step is memory-bound one batch below it and compute-bound at it."""
    arch, s = published("Llama-3.2-1B"), Serving(l_in=1, l_out=2, flash=True)
    one, two = (inference_cost(arch, Serving(b=b, l_in=1, l_out=2, flash=True)).decode_time for b in (1, 2))
    c = one["compute"]
    assert two["compute"] == 2 * c
    m = two["memory"] - one["memory"]
    m0 = one["memory"] - m
    threshold = m0 / (c - m)
    assert 382 < threshold < 383            # not whole: the batch asked for is the next one
    assert crossover_batch(arch, s) == 383
    t = inference_cost(arch, Serving(b=S.b, l_in=1, l_out=2, flash=True)).decode_time
    assert t["compute"].subs(S.b, 382) < t["memory"].subs(S.b, 382)
    assert t["compute"].subs(S.b, 383) >= t["memory"].subs(S.b, 383)
    assert crossover_batch(preset("llama-2-7b"), Serving(l_in=1000, l_out=2)) == oo    # never compute-bound


def test_the_inference_report_prints_the_same_whole_crossover_batch_as_text_and_json(capsys):
    from symbolic_cost.cli import main
    argv = ["inference", "--hf-config", str(HF / "Llama-3.2-1B.json"), "--set", "b=1", "l_in=1", "l_out=2",
            "--flash"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["crossover_batch"] == 383
    assert "decode turns compute-bound at b = 383\n" in text


def test_the_largest_batch_fits_and_one_more_does_not():
    """At the batch ``max_batch`` gives the serving peak (every moment) fits H100's 80 GB, and
    with one sequence more it does not."""
    from symbolic_cost.inference.peak import serving_peak
    llama = preset("llama-2-7b")
    for s in (Serving(l_in=4000, l_out=96, flash=True), Serving(l_in=1000, l_out=24, kv_dtype="fp8", page=16)):
        n = max_batch(llama, s)
        fits = lambda b: serving_peak(llama, Serving(**{**s.__dict__, "b": b}))  # noqa: E731
        assert fits(n) <= SYSTEMS["h100"].hbm_capacity < fits(n + 1)


def test_weights_on_the_busiest_pipeline_stage():
    gpt2 = preset("gpt2")                              # 124,439,808 parameters, tied head
    one = inference_cost(gpt2, Serving(b=1, l_in=8, l_out=2)).weight_bytes
    assert one == 124439808 * 2
    two = inference_cost(gpt2, Serving(b=1, l_in=8, l_out=2, p=2)).weight_bytes
    table = 50257 * 768 * 2                            # the last stage's own copy of the word table
    layers = 124439808 * 2 - table - 1024 * 768 * 2 - 2 * 768 * 2     # less both tables, the final norm
    assert two == layers // 2 + max(table + 1024 * 768 * 2, 2 * 768 * 2 + table)


def test_throughput_per_device_and_per_job():
    cost = inference_cost(preset("llama-2-7b"), Serving(b=8, l_in=128, l_out=32, m1=2, p=2, d=3))
    assert cost.tokens_per_second == 8 / cost.tpot
    assert cost.tokens_per_second_per_device == cost.tokens_per_second / 4
    assert cost.tokens_per_second_per_job == 3 * cost.tokens_per_second
    assert cost.end_to_end_tokens_per_second == 8 * 32 / (cost.ttft + 31 * cost.tpot)


# --- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(b=0), "b must be a positive integer, got 0"),
    (dict(l_in=0), "l_in must be a positive integer, got 0"),
    (dict(kv_dtype="fp4"), "kv_dtype must be one of fp32, bf16, fp16, fp8, int8, int4"),
    (dict(precision="fp64"), "precision must be one of"),
    (dict(page=0), "page must be a positive integer"),
])
def test_bad_serving_values_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Serving(**kwargs)


def test_context_beyond_the_model_is_refused_unless_allowed():
    with pytest.raises(ValueError, match=r"l_in \+ l_out - 1 = 4196 tokens exceed the context of llama-2-7b"):
        prefill(preset("llama-2-7b"), Serving(b=1, l_in=4000, l_out=197))
    assert prefill(preset("llama-2-7b"), Serving(b=1, l_in=4000, l_out=197, allow_long=True)).tokens == 4000


def test_models_that_do_not_generate_are_refused():
    with pytest.raises(ValueError, match="bidirectional encoder"):
        prefill(preset("bert-base-uncased"), Serving(b=1, l_in=8, l_out=2))
    with pytest.raises(ValueError, match="bidirectional encoder"):
        kv_cache_bytes(preset("bert-base-uncased"), 1, 8)
    classifier = published("twitter-roberta-base-sentiment-latest")
    with pytest.raises(ValueError, match="bidirectional encoder|no language-model head"):
        decode(classifier, Serving(b=1, l_in=8, l_out=2), 8)
    with pytest.raises(ValueError, match="pipeline stages of an encoder-decoder"):
        prefill(published("t5-small"), Serving(b=1, l_in=8, l_out=2, p=2))
    with pytest.raises(ValueError, match="ep and etp split experts, and llama-2-7b has none"):
        prefill(preset("llama-2-7b"), Serving(b=1, l_in=8, l_out=2, ep=2, d=2))
    with pytest.raises(ValueError, match="ep x etp must equal m1 for Mixtral-8x7B-v0.1 under tensor"):
        decode(published("Mixtral-8x7B-v0.1"), Serving(b=1, l_in=8, l_out=2, m1=4, ep=2, etp=1), 8)
    with pytest.raises(ValueError, match="ep must divide m1 under tensor parallelism"):
        Serving(m1=4, ep=3)
    with pytest.raises(ValueError, match="ep x etp must divide m1 x d"):
        Serving(ep=4, d=2)
    with pytest.raises(ValueError, match="not affine in the batch"):
        crossover_batch(published("Mixtral-8x7B-v0.1"), Serving(l_in=8, l_out=2))
    with pytest.raises(ValueError, match="roofline must be one of"):
        phase_time(prefill(preset("gpt2"), Serving(b=1, l_in=8, l_out=2)), "h100", roofline="kernel")
    with pytest.raises(ValueError, match="KV format q: group and group_bytes go together"):
        KVFormat("q", 4, group=64)
    assert kv_format("bf16").element_bytes == 2 and kv_format(KVFormat("x", 12)).element_bytes == Rational(3, 2)


def test_final_tokens_count_the_last_token_out_once():
    llama, t5 = preset("llama-2-7b"), published("t5-small")
    assert final_tokens(llama, Serving(l_in=10, l_out=4)) == 13      # the 4th token is never fed back
    assert final_tokens(t5, Serving(l_in=10, l_out=4)) == 4          # the start token and 3 fed back


def test_the_report_tables_the_cache_of_its_models():
    from symbolic_cost.report.inference import _kv_table, models
    rows = _kv_table(models())
    # Llama 3.1 70B: 320 KiB a token; 4k, 32k, 128k tokens; 32 x 128k in bf16 and fp8 (GiB)
    assert "| llama-3.1-70b | GQA, 8 of 64 heads | 320 | 1.25 | 10 | 40 | 1280 | 640 |" in rows
    # Mistral 7B v0.1 keeps 4095 tokens a layer: 4095 x 128 KiB
    assert f"| mistral-7b-v0.1 | GQA, 8 of 32 heads, window 4096 | 128 | {4095 * 128 / 2**20:.4g} |" in rows[4]


# --- the command line --------------------------------------------------------------------------

def test_inference_command_reports_memory_times_and_throughput(capsys):
    from symbolic_cost.cli import main
    assert main(["inference", "--preset", "llama-2-7b", "--set", "b=1", "l_in=512", "l_out=128"]) == 0
    out = capsys.readouterr().out
    # 512 + 127 tokens x 512 KiB = 319.5 MiB; 6,738,415,616 parameters x 2 bytes
    assert f"KV cache {639 * 2**19 / 2**30:.4g} GiB (512 KiB per token)" in out
    assert f"weights {6738415616 * 2 / 2**30:.4g} GiB" in out
    assert "TTFT" in out and "TPOT" in out and "largest batch whose peak fits: " in out
    assert main(["inference", "--preset", "llama-2-7b", "--set", "b=4", "l_in=100", "l_out=11", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kv_cache_bytes"] == 4 * 110 * 2**19 and report["kv_bytes_per_token"] == 2**19


def test_inference_command_times_on_the_calibrated_model_unless_ideal(capsys):
    # a memory-bound decode step of one sequence: the weights and cache at the calibrated share of
    # HBM bandwidth; --ideal at all of it; and the calibrated prefill never beats the peak
    from symbolic_cost.cli import main
    from symbolic_cost.models.config import preset
    from symbolic_cost.timing.hardware import calibrated
    argv = ["inference", "--preset", "llama-2-7b", "--set", "b=1", "l_in=100", "l_out=11", "--json"]
    reports = {}
    for flags in ([], ["--ideal"]):
        assert main(argv + flags) == 0
        reports[bool(flags)] = json.loads(capsys.readouterr().out)
    calibrated_report, ideal = reports[False], reports[True]
    share = float(calibrated("h100").efficiency.memory)
    assert calibrated_report["decode_memory_s"] == pytest.approx(ideal["decode_memory_s"] / share, rel=1e-12)
    assert calibrated_report["ttft_s"] > ideal["ttft_s"]
    expected = inference_cost(preset("llama-2-7b"), Serving(b=1, l_in=100, l_out=11), calibrated("h100"))
    assert calibrated_report["tpot_s"] == pytest.approx(float(expected.tpot), rel=1e-12)
    assert main(argv + ["--roofline", "operation"]) == 2
    assert "add --ideal" in capsys.readouterr().err


def test_inference_command_prints_formulas_and_sweeps(capsys):
    from symbolic_cost.cli import main
    assert main(["inference", "--preset", "llama-2-7b", "--field", "kv_cache_bytes"]) == 0
    name, _, formula = capsys.readouterr().out.strip().partition(" = ")
    assert name == "kv_cache_bytes"
    assert simplify(parse_expr(formula, local_dict=S.BY_NAME) - 2**19 * S.b * (S.l_in + S.l_out - 1)) == 0
    assert main(["inference", "--preset", "llama-2-7b", "--grid", "b=1,2,4", "--field", "kv_cache_bytes",
                 "--set", "l_in=10", "l_out=1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "b,kv_cache_bytes" and [float(x.split(",")[1]) for x in lines[1:]] == \
        [n * 10 * 2**19 for n in (1, 2, 4)]


@pytest.mark.parametrize("argv, message", [
    (["--set", "b=0"], "b must be a positive integer"),
    (["--preset", "llama-2-7b", "--set", "l_in=4000", "l_out=200"], "exceed the context of llama-2-7b"),
    (["--kv-dtype", "fp4"], "invalid choice: 'fp4'"),
    (["--field", "flops"], "unknown flops"),
    (["--set", "e=8"], "not settable here"),
    (["--preset", "bert-base-uncased"], "bidirectional encoder"),
])
def test_inference_command_refuses_bad_input_in_one_line(argv, message, capsys):
    from symbolic_cost.cli import main
    assert main(["inference", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_inference_command_serves_experts_and_latent_attention(capsys):
    from symbolic_cost.cli import main
    config = str(HF / "DeepSeek-V3.json")
    assert main(["inference", "--hf-config", config, "--set", "ep=64", "d=64", "--kv-dtype", "fp8",
                 "--field", "kv_bytes_per_token"]) == 0
    assert capsys.readouterr().out.strip() == f"kv_bytes_per_token = {61 * 576}"     # one byte an element
    assert main(["inference", "--hf-config", config, "--set", "ep=64", "d=64", "b=16"]) == 0
    assert "where decode turns compute-bound is not solved (the experts" in capsys.readouterr().out
    assert main(["inference", "--hf-config", config, "--mla", "decompressed", "--field", "kv_bytes_per_token"]) == 0
    assert capsys.readouterr().out.strip() == f"kv_bytes_per_token = {61 * 128 * (192 + 128) * 2}"


def test_the_busiest_pipeline_stage_holds_a_global_layers_cache():
    """Gemma 3 1B: one global layer in six (layers 5, 11, 17, 23), the others keep a window of
    512 keys (511 cached).  On 13 stages of two layers, a stage with a global layer keeps
    32,768 + 511 tokens of one head of 256 + 256 in bf16 for a 32k context; on 2 stages each
    holds two global layers, half the model's cache."""
    gemma = published("gemma-3-1b-pt")
    assert kv_cache_bytes(gemma, 1, 32768, p=13) == (32768 + 511) * (256 + 256) * 2
    assert kv_cache_bytes(gemma, 1, 32768, p=2) == kv_cache_bytes(gemma, 1, 32768) / 2


def test_served_weights_per_device_follow_the_pipeline_placement():
    """DeepSeek-V2-Lite on 3 stages: its dense layer sits on the first, so the busiest device
    is the last (9 MoE layers and the head), as in training: the same bytes per device."""
    from symbolic_cost.models import Training, model_cost
    lite = published("DeepSeek-V2-Lite")
    served = inference_cost(lite, Serving(b=1, l_in=128, l_out=8, p=3), "h100").weight_bytes
    assert served == model_cost(lite, Training(b=1, l=128, p=3)).weight_bytes
    assert served > inference_cost(lite, Serving(b=1, l_in=128, l_out=8), "h100").weight_bytes / 3


def test_a_step_priced_past_the_request_says_what_memory_describes(capsys):
    """``--set l_ctx=`` past the request's last decode step (default ``l_in=512 l_out=128``: the
    step over ``512 + 128 - 2 = 638`` cached tokens is its last) prices that step, while memory
    describes the request's cache of 639 tokens: a note says so; within the request, none."""
    from symbolic_cost.cli import main

    def notes(at):
        assert main(["inference", "--preset", "llama-2-7b", "--set", f"l_ctx={at}", "--json"]) == 0
        return json.loads(capsys.readouterr().out).get("notes", [])
    assert notes(638) == []
    (note,) = notes(639)
    assert "l_ctx=639" in note and "last step (638)" in note and "cache of 639 tokens" in note
