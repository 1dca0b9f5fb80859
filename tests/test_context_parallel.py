"""Whole-model context parallelism (``Training.cp``, ``blocks.context``) against the step-by-step
simulation of ``tests/simulate_cp.py``, a hand count and the invariant that ``cp = 1`` is today's
model."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from sympy import Integer, Rational

import simulate_cp as sim
from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Heads, Scores, attention
from symbolic_cost.blocks.specs import Latent
from symbolic_cost.blocks.context import Context
from symbolic_cost.checks import InputError
from symbolic_cost.models import Architecture, Training, model_cost, world_size
from symbolic_cost.models.config import from_config, preset
from symbolic_cost.models.utilisation import model_flops
from symbolic_cost.ops import Keys, flash_attention, matmul_flops
from symbolic_cost.symbols import cp as CP
from symbolic_cost.blocks.wiring import Run

EXACT = conv.DEFAULT.but(causal_flops="exact")
B, E, H, KV, M1 = 1, 64, 8, 2, 2            # q = v = 8; per tensor rank 4 query and 1 key/value heads
Q = E // H
ES = 2


def _core(l, cp, variant, conventions):
    """The library's per-rank attention block of one layer (rank tokens ``l/cp``)."""
    return attention(B, l // cp, E, Heads(H, kv_heads=KV), M1, 1, scores=Scores(causal=True),
                     run=Run(flash=True, context=Context(cp, variant), conventions=conventions))


def _sent(block, pass_):
    return sum((c.volume for row in block for c in row.collectives
                if row.name.startswith("context") and c.pass_ == pass_), Integer(0))


def _pairs_flops(l, cp, pairs):
    """The flash kernel's forward FLOPs for ``pairs`` (query, key) pairs of the rank's queries."""
    queries = l // cp
    return flash_attention(B, queries, Q, H // M1, Keys(l_kv=Rational(pairs, queries), kv_heads=KV // M1)).flops_fwd


LAYOUTS = [(cp, chunk) for cp in (2, 3, 4) for chunk in (1, 2, 3)]


@pytest.mark.parametrize("variant,simulate", [("ring", sim.ring), ("all-gather", sim.all_gather)])
@pytest.mark.parametrize("cp,chunk", LAYOUTS)
def test_ring_and_all_gather_match_the_simulation(variant, simulate, cp, chunk):
    l = 2 * cp * chunk
    kv_local = B * (l // cp) * (KV // M1) * 2 * Q         # a rank's own K and V
    ranks = simulate(l, cp, kv_local)
    every = {(t, s) for t in range(l) for s in range(t + 1)}
    assert set().union(*(r["covered"] for r in ranks)) == every          # the causal pairs, all of them
    assert sum(len(r["covered"]) for r in ranks) == len(every)           # ... each once
    for convention, key in ((EXACT, "unmasked"), (conv.DEFAULT, "tile")):
        assert len({r[key] for r in ranks}) == 1                          # the causal balance
        row = _core(l, cp, variant, convention)["context_attention"]
        assert row.flops_fwd == _pairs_flops(l, cp, ranks[0][key])
    block = _core(l, cp, variant, conv.DEFAULT)
    assert _sent(block, "fwd") == ranks[0]["fwd"] * ES
    assert _sent(block, "bwd") == ranks[0]["bwd"] * ES


@pytest.mark.parametrize("cp", [2, 4])
def test_ulysses_matches_the_simulation(cp):
    l = 8 * cp
    block = attention(B, l // cp, E, Heads(H, kv_heads=KV * cp), M1, 1, scores=Scores(causal=True),
                      run=Run(flash=True, context=Context(cp, "ulysses")))
    expected = sim.ulysses(l, cp, B, H // M1, KV * cp // M1, Q, Q)
    assert (_sent(block, "fwd"), _sent(block, "bwd")) == (expected["fwd"] * ES, expected["bwd"] * ES)


@pytest.mark.parametrize("cp,chunk,window", [(2, 4, 3), (3, 4, 5), (4, 3, 7), (2, 8, 40)])
def test_a_sliding_window_under_all_gather_is_every_ranks_share_of_the_simulation(cp, chunk, window):
    """All-gather CP with a causal window of ``w`` keys against the simulation: the ranks together
    keep each windowed pair once; the library gives every rank the mean of their kept pairs (the
    balanced chunks' share, exact under ``causal_flops="exact"``), which a window leaves a little
    uneven (rank 0's first chunk starts the sequence); the whole sequence's K and V still gathered."""
    l = 2 * cp * chunk
    kv_local = B * (l // cp) * (KV // M1) * 2 * Q
    ranks = sim.all_gather(l, cp, kv_local, window=window)
    every = {(t, s) for t in range(l) for s in range(max(0, t - window + 1), t + 1)}
    assert set().union(*(r["covered"] for r in ranks)) == every and sum(len(r["covered"]) for r in ranks) == len(every)
    mean = Rational(sum(r["unmasked"] for r in ranks), cp)
    assert max(r["unmasked"] for r in ranks) - min(r["unmasked"] for r in ranks) <= window * window
    block = attention(B, l // cp, E, Heads(H, kv_heads=KV), M1, 1, scores=Scores(causal=True, window=window),
                      run=Run(flash=True, context=Context(cp, "all-gather"), conventions=EXACT))
    row = block["context_attention"]
    assert row.flops_fwd == _pairs_flops(l, cp, mean)
    assert (row.scores.causal_length, row.scores.window) == (l, window)    # timed by the window's tiles
    assert _sent(block, "fwd") == ranks[0]["fwd"] * ES and _sent(block, "bwd") == ranks[0]["bwd"] * ES


@pytest.mark.parametrize("cp", [2, 4])
def test_a_sliding_window_under_ulysses_is_the_windowed_core_of_a_ranks_heads(cp):
    """Ulysses with a window: each rank runs the windowed kernel over the whole sequence for its
    ``1/cp`` of the heads (pairs ``t - w < s <= t`` counted by hand), and exchanges what it does
    without one."""
    l, window = 16 * cp, 6
    block = attention(B, l // cp, E, Heads(H, kv_heads=KV * cp), M1, 1, scores=Scores(causal=True, window=window),
                      run=Run(flash=True, context=Context(cp, "ulysses"), conventions=EXACT))
    pairs = sum(min(t + 1, window) for t in range(l))
    heads, keys = H // M1 // cp, Rational(pairs, l)     # a query's mean kept keys
    by_hand = B * heads * (matmul_flops(l, Q, keys, EXACT) + matmul_flops(l, keys, Q, EXACT))   # Q K^T, P V
    row = block["flash_attention"]
    products = sum(g.count * matmul_flops(g.m, g.k, g.n, EXACT) for g in row.gemms if g.pass_ == "fwd")
    assert products == by_hand
    assert row.scores.window == window and row.scores.causal_length == l
    expected = sim.ulysses(l, cp, B, H // M1, KV * cp // M1, Q, Q)
    assert (_sent(block, "fwd"), _sent(block, "bwd")) == (expected["fwd"] * ES, expected["bwd"] * ES)


@pytest.mark.parametrize("cp,chunk", [(2, 3), (4, 2)])
def test_latent_attention_under_the_ring_passes_every_heads_keys_and_values(cp, chunk):
    """Multi-head latent attention under ring CP (Transformer Engine's ``p2p``, the one exchange it
    runs for query and value heads of different sizes): each ring step passes the rank's heads'
    decompressed keys (``d_n + d_r`` wide) and values (``d_v``), the simulation's K, V, and the core
    scores the simulation's pairs at those widths."""
    latent, heads = Latent(kv_rank=16, rope_dim=4, nope_dim=12, v_dim=8), H // M1
    l = 2 * cp * chunk
    kv_local = B * (l // cp) * heads * (16 + 8)              # K: d_n + d_r = 16 wide, V: 8
    ranks = sim.ring(l, cp, kv_local)
    block = attention(B, l // cp, E, Heads(H, latent=latent), M1, 1, scores=Scores(causal=True),
                      run=Run(flash=True, context=Context(cp, "ring"), conventions=EXACT))
    assert _sent(block, "fwd") == ranks[0]["fwd"] * ES and _sent(block, "bwd") == ranks[0]["bwd"] * ES
    row = block["context_attention"]
    pairs = Rational(ranks[0]["unmasked"], l // cp)
    products = sum(g.count * matmul_flops(g.m, g.k, g.n, EXACT) for g in row.gemms if g.pass_ == "fwd")
    assert products == B * heads * (matmul_flops(l // cp, 16, pairs, EXACT) + matmul_flops(l // cp, pairs, 8, EXACT))


@pytest.mark.parametrize("arch,variant,needle", [
    ("latent", "all-gather", "latent attention .*: Transformer Engine runs it under ring only"),
    ("latent", "ulysses", "latent attention .*: Transformer Engine runs it under ring only"),
    ("window", "ring", "a sliding window .*: Transformer Engine runs it under all-gather or ulysses only"),
])
def test_context_parallel_variants_transformer_engine_refuses(arch, variant, needle):
    """Refused as Transformer Engine refuses them, naming the variant to use."""
    config = (dict(model_type="deepseek_v2", hidden_size=256, intermediate_size=512, moe_intermediate_size=64,
                   num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2, vocab_size=1000,
                   kv_lora_rank=32, q_lora_rank=None, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                   n_routed_experts=4, num_experts_per_tok=2, first_k_dense_replace=1, max_position_embeddings=4096)
              if arch == "latent" else
              dict(model_type="mistral", hidden_size=256, intermediate_size=512, num_attention_heads=4,
                   num_key_value_heads=4, num_hidden_layers=2, vocab_size=1000, sliding_window=64,
                   max_position_embeddings=4096))
    with pytest.raises(InputError, match=needle) as refused:
        model_cost(from_config(config, arch), Training(l=1024, cp=2, cp_variant=variant, flash=True))
    assert refused.value.argument == "cp_variant"


@pytest.mark.parametrize("cp", [2, 4])
def test_attention_sinks_under_ulysses_run_a_ranks_heads_over_the_whole_sequence(cp):
    """GPT-OSS's sinks under Ulysses (Transformer Engine's learnable softmax offset runs under its
    ``a2a`` CP only): the sink column of the ``h/(m1 cp)`` heads' softmax rows over all ``L`` tokens,
    ``2 b L h/(m1 cp)`` FLOPs each way; the logits of every head of the tensor rank (replicated over
    CP); refused under the ring and all-gather."""
    l = 16 * cp
    scores = Scores(causal=True, window=6, sinks=True)
    block = attention(B, l // cp, E, Heads(H, kv_heads=KV * cp), M1, 1, scores=scores,
                      run=Run(flash=True, context=Context(cp, "ulysses")))
    sinks = block["attention_sinks"]
    assert sinks.flops_fwd == sinks.flops_bwd == 2 * B * l * (H // M1 // cp)
    assert sinks.weights == (H // M1) * ES
    for variant in ("ring", "all-gather"):
        with pytest.raises(InputError, match="sinks"):
            attention(B, l // cp, E, Heads(H, kv_heads=KV * cp), M1, 1, scores=Scores(causal=True, sinks=True),
                      run=Run(flash=True, context=Context(cp, variant)))


def test_a_window_longer_than_the_context_is_no_window():
    """Phi-4-mini's ``sliding_window`` (262,144) exceeds its 131,072 positions: it masks nothing, so the
    model has no window, and ring context parallelism (which Transformer Engine refuses beside a window)
    runs; Phi-3-mini-4k's 2,047 over 4,096 is a window, and refused under the ring."""
    here = Path(__file__).parent
    published = json.loads((here / "published_configs" / "Phi-4-mini-instruct.json").read_text())
    assert published["sliding_window"] > published["max_position_embeddings"]
    phi4 = from_config(published, "phi-4-mini")
    assert phi4.window is None
    model_cost(phi4, Training(l=8192, cp=2, flash=True))
    phi3 = from_config(json.loads((here / "hf_configs" / "Phi-3-mini-4k-instruct.json").read_text()), "phi-3")
    assert (phi3.window, phi3.windowed_layers) == (2047, phi3.n_layers)
    with pytest.raises(InputError, match="sliding window"):
        model_cost(phi3, Training(l=4096, cp=2, flash=True))


TOY = Architecture("toy", 2, E, H, 4 * E, 256, kv_heads=KV, rotary=True, mlp="swiglu", norm="rms", bias=False,
                   dropouts=False, tied=False)


@pytest.mark.parametrize("variant", ["ring", "all-gather"])
def test_whole_model_collectives_activations_and_world(variant):
    cp, l, n = 4, 64, 2
    t = Training(b=B, l=l, m1=M1, s1=M1, d=3, cp=cp, cp_variant=variant, micro_batches=n, flash=True, zero=1)
    cost, plain = model_cost(TOY, t), model_cost(TOY, Training(b=B, l=l, m1=M1, s1=M1, d=3, micro_batches=n,
                                                                flash=True, zero=1))
    kv_local = B * (l // cp) * (KV // M1) * 2 * Q
    ranks = (sim.ring if variant == "ring" else sim.all_gather)(l, cp, kv_local)
    for pass_ in ("fwd", "bwd"):
        sent = sum(c.volume for dim, c in cost.collectives if dim == "context" and c.pass_ == pass_)
        assert sent == ranks[0][pass_] * ES * TOY.n_layers * n
    assert cost.activation_bytes == plain.activation_bytes / cp     # flash: every kept tensor is l/cp of it
    assert cost.layer["fc1"].flops_fwd == plain.layer["fc1"].flops_fwd / cp
    assert (cost.weight_bytes, cost.gradient_bytes) == (plain.weight_bytes, plain.gradient_bytes)
    assert cost.optimizer_bytes == plain.optimizer_bytes / cp      # ZeRO-1 over d cp
    data = [c for dim, c in cost.collectives if dim == "data"]
    assert data and {c.group for c in data} == {3 * cp}
    assert world_size(t) == M1 * cp * 3
    assert cost.model_flops_fwd == plain.model_flops_fwd
    assert model_flops(cost) == model_flops(plain)                   # MFU's numerator: the model's own


def test_pipeline_stages_send_a_ranks_tokens():
    """Neighbouring stages exchange the hidden states of the rank's ``l/cp`` tokens (``b (l/cp)/s1 e``)."""
    kw = dict(b=B, l=64, m1=M1, s1=M1, p=2, micro_batches=4, flash=True)
    sends = lambda cost: [c for dim, c in cost.collectives if dim == "pipeline"]  # noqa: E731
    with_cp, plain = sends(model_cost(TOY, Training(cp=4, **kw))), sends(model_cost(TOY, Training(**kw)))
    assert with_cp and [c.elements for c in with_cp] == [B * (64 // 4) // M1 * E] * len(with_cp)
    assert [c.volume * 4 for c in with_cp] == [c.volume for c in plain]


LLAMA_3_8B = dict(model_type="llama", hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                  num_key_value_heads=8, num_hidden_layers=32, vocab_size=128256, max_position_embeddings=131072,
                  tie_word_embeddings=False)


def test_llama_3_8b_at_128k_by_hand():
    """One layer of Llama-3-8B at l = 131072, TP 8 with sequence parallelism, CP 8, flash, bf16:
    a rank holds T = 16384 tokens, T/8 = 2048 of them outside the tensor region."""
    arch = from_config(LLAMA_3_8B, "llama-3-8b")
    cost = model_cost(arch, Training(b=1, l=131072, m1=8, s1=8, cp=8, flash=True))
    T, e, f, es = 16384, 4096, 14336, 2
    heads, kv, q = 32 // 8, 8 // 8, 128
    norm = (T // 8) * e * es + (T // 8) * es               # input shard and 1/rms of each token
    shard = (T // 8) * e * es                              # qkv_proj's and fc1's kept input shard
    flash = T * heads * q * es * 2 + T * kv * q * es * 2 + heads * T * 4      # Q, O; K, V; fp32 log-sum-exp
    mlp = T * 2 * (f // 8) * es + T * (f // 8) * es        # the fused [G, U] and fc2's input
    by_hand = 2 * norm + 2 * shard + flash + mlp
    assert by_hand == 285_483_008
    assert cost.layer.total("act_buffer") == by_hand


@settings(max_examples=8, deadline=None)
@given(name=st.sampled_from(["llama-2-7b", "gpt2"]), m1=st.sampled_from([1, 2, 4]), sp=st.booleans(),
       p=st.sampled_from([1, 2, 4]), zero=st.sampled_from([0, 1, 3]),
       recompute=st.sampled_from(["none", "selective", "full"]), exact=st.booleans())
def test_a_symbolic_ring_cp_at_one_is_todays_model(name, m1, sp, p, zero, recompute, exact):
    arch = preset(name)
    chosen = EXACT if exact else conv.DEFAULT
    kw = dict(b=2, l=1024, m1=m1, s1=m1 if sp else 1, p=p, d=2, micro_batches=4, zero=zero, recompute=recompute,
              flash=True)
    today, symbolic = model_cost(arch, Training(**kw), chosen), model_cost(arch, Training(cp=CP, **kw), chosen)
    for field in ("flops_fwd", "flops_bwd", "flops_recompute", "activation_bytes", "weight_bytes",
                  "gradient_bytes", "optimizer_bytes", "model_flops_fwd"):
        assert getattr(symbolic, field).subs(CP, 1) == getattr(today, field), field
    volume = lambda cost: sum(c.volume for _, c in cost.collectives)  # noqa: E731
    assert volume(symbolic).subs(CP, 1) == volume(today)


@pytest.mark.parametrize("kw,needle", [
    (dict(l=4092, cp=4), "8 chunks"),                                   # ring: 2 cp | l
    (dict(l=4090, cp=4, cp_variant="all-gather"), "8 chunks"),
    (dict(l=4096, cp=8, m1=8, cp_variant="ulysses"), "h/m1"),          # 32 heads over 8 x 8
    (dict(l=4096, cp=2, flash=False), "flash"),
    (dict(l=4096, cp=1, cp_variant="ulysses"), "cp_variant"),
    (dict(l=4096, cp=2, cp_variant="zigzag"), "cp_variant"),
])
def test_refusals(kw, needle):
    with pytest.raises(InputError, match=needle):
        model_cost(preset("llama-2-7b"), Training(**{"flash": True, **kw}))


def test_refuses_an_encoder_decoder():
    t5 = Architecture("t5", 2, 64, 4, 256, 100, decoder_layers=2, causal=False)
    with pytest.raises(InputError, match="with an encoder-decoder"):
        model_cost(t5, Training(l=64, cp=2, flash=True))


def test_summary_prints_the_context_collectives(capsys):
    from symbolic_cost.cli import main
    assert main(["summary", "--preset", "llama-2-7b", "--set", "l=8192", "m1=8", "s1=8", "cp=2", "--flash",
                 "--allow-long", "--cp-variant", "all-gather"]) == 0
    out = capsys.readouterr().out
    assert "cp=2 (all-gather)" in out and "context  allgather" in out and "context  reducescatter" in out
    assert "data     allreduce     group 2 bwd" in out          # the gradients over d cp = 2
