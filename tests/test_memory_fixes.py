"""The four counting fixes of issue 31, each against an outside oracle.

1. A gated MLP activation keeps the fused ``[G, U]`` input only (Megatron-LM's
   ``SwiGLUFunction`` in ``megatron/core/fusions/fused_bias_swiglu.py`` saves ``input``;
   Transformer Engine's ``LayerNormMLP`` the fc1 output), ``G``, ``U`` and ``act(G)`` under the
   ``pytorch-eager`` preset: hand counts, and autograd's saved tensors of both forms.
2. With flash attention the output projection's input is the kernel's kept ``O``: counted once.
   Hand count, and autograd's saved tensors of a Hugging Face Llama under PyTorch's CPU flash
   kernel (``attn_implementation="sdpa"``).
3. A lookup reads the rows it gathers, not the whole table: hand counts of a decode step.
4. A sliding-window layer's decode step reads the window its cache keeps, not the whole
   context: hand count, and the keys and values transformers' cache hands the attention.

Every expected value is derived here by hand or measured; none is copied from the library.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from sympy import Rational

from symbolic_cost import conventions as conv
from symbolic_cost.inference import Serving, decode, kv_cache_bytes
from symbolic_cost.inference.serving import cached_before
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import from_config
from symbolic_cost.models.ranks import rank_activation_bytes
from symbolic_cost.ops import embedding, gated
from symbolic_cost.tools import pytorch_eager as eager
from symbolic_cost.blocks.wiring import Residual, Run

MiB = 2 ** 20
LLAMA3_70B = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
              "num_key_value_heads": 8, "num_hidden_layers": 80, "vocab_size": 128256,
              "max_position_embeddings": 131072}
LLAMA3_8B = {**LLAMA3_70B, "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
             "num_hidden_layers": 32}


# -- 1. gated activations --------------------------------------------------------------------

def test_gated_activation_keeps_the_fused_input_or_eager_three():
    n = 2 * 3 * 5                                   # b l f
    assert gated(2, 3, 5, es=2).act_buffer == 2 * n * 2                              # [G, U]
    assert gated(2, 3, 5, es=2, conventions="pytorch-eager").act_buffer == 3 * n * 2  # G, U, act(G)
    assert conv.DEFAULT.gated_activation == "fused" and conv.get("pytorch-eager").gated_activation == "eager"
    with pytest.raises(ValueError, match="gated_activation"):
        conv.DEFAULT.but(gated_activation="megatron")


def _llama3_70b_first_rank(conventions=conv.DEFAULT):
    t = Training(b=1, l=8192, m1=8, s1=8, p=4, micro_batches=16, recompute="selective")
    return rank_activation_bytes(model_cost(from_config(LLAMA3_70B), t, conventions), 0)


def test_llama3_70b_first_rank_hand_count():
    """Llama-3-70B (e 8192, f 28672, 64 heads, 8 K/V heads of 128), bf16, b = 1, l = 8192,
    TP 8 with sequence parallelism, 4 stages of 20 layers under 1F1B (the first rank holds
    4 micro-batches), selective recomputation.  Bytes a layer keeps per token of the sequence:

    ======================================= ====================================
    rms_norm_1: input shard, 2 e / 8        2048, and its 1/rms, 2 / 8 = 1/4
    qkv_proj: input shard, 2 e / 8          2048
    Q, K, V (selective keeps them)          (64 + 2 x 8) x 128 / 8 x 2 = 2560
    v_proj: input, 64 / 8 x 128 x 2         2048
    rms_norm_2                              2048 + 1/4
    fc1: input shard                        2048
    act, fused: [G, U], 2 x 28672 / 8 x 2   14336   (eager: + act(G), 7168)
    fc2: input, 28672 / 8 x 2               7168
    ======================================= ====================================

    34304.5 bytes a token a layer (eager 41472.5); times 8192 tokens and 80 layer-micro-
    batches: 21,440 MiB + 80 x 4096 bytes of statistics (eager 25,920 MiB + the same)."""
    per_token = 5 * 2048 + 2560 + 14336 + 7168 + Rational(1, 2)
    assert per_token == 34304 + Rational(1, 2)
    assert _llama3_70b_first_rank() == 80 * 8192 * per_token == 21440 * MiB + 80 * 4096
    eager_layout = conv.DEFAULT.but(gated_activation="eager")
    assert _llama3_70b_first_rank(eager_layout) == 80 * 8192 * (per_token + 7168) == 25920 * MiB + 80 * 4096


def _torch():
    return pytest.importorskip("torch"), pytest.importorskip("transformers")


def test_gated_mlp_saved_tensors_fused_and_eager():
    """fc1 (e -> 2f) -> SwiGLU -> fc2 (f -> e), without biases, in fp32: autograd saves the fc1
    input, then either Megatron-LM's fused form (``SwiGLUFunction``: it saves its input, the
    ``[G, U]`` output of fc1, and recomputes ``silu(G)`` in backward) or eager ``silu(G) * U``
    (silu saves ``G``, a view of fc1's output; the product saves ``silu(G)`` and ``U``), and
    fc2's input.  The library's ``fc1``, ``act`` and ``fc2`` rows keep the same bytes."""
    torch, _ = _torch()
    from torch_reference import saved_storages
    silu = torch.nn.functional.silu

    class SwiGLUFunction(torch.autograd.Function):       # as megatron/core/fusions/fused_bias_swiglu.py
        @staticmethod
        def forward(ctx, y):
            ctx.save_for_backward(y)
            y1, y2 = torch.chunk(y, 2, -1)
            return silu(y1) * y2

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            y1, y2 = torch.chunk(y, 2, -1)
            s = torch.sigmoid(y1)
            return torch.cat((g * s * (1 + y1 * (1 - s)) * y2, g * silu(y1)), -1)

    def eager_swiglu(y):
        gate, up = torch.chunk(y, 2, -1)
        return silu(gate) * up

    b, l, e, f = 2, 3, 4, 5
    fc1, fc2 = torch.nn.Linear(e, 2 * f, bias=False), torch.nn.Linear(f, e, bias=False)
    x = torch.randn(b, l, e, requires_grad=True)
    for activation, convention, saved in ((SwiGLUFunction.apply, "fused", e + 2 * f + f),
                                          (eager_swiglu, "eager", e + 2 * f + f + f)):
        with saved_storages(list(fc1.parameters()) + list(fc2.parameters())) as kept:
            fc2(activation(fc1(x))).sum().backward()
        assert sum(kept.values()) == b * l * saved * 4
        ours = _mlp_rows(b, l, e, f, conv.DEFAULT.but(gated_activation=convention))
        assert ours == sum(kept.values())


def _mlp_rows(b, l, e, f, conventions):
    from symbolic_cost.blocks import mlp
    block = mlp(b, l, e, f, bias=False, gated_act=True, residual=Residual(dropouts=False, norm="rms"),
                run=Run(es=4, conventions=conventions))
    return sum(block[name].act_buffer for name in ("fc1", "act", "fc2"))


# -- 2. flash attention's output ---------------------------------------------------------------

def test_flash_keeps_o_once_llama3_8b_hand_count():
    """Llama-3-8B (e 4096, 32 heads, 8 K/V heads of 128), bf16, b = 1, l = 8192, TP 8 and SP:
    the attention block with flash keeps per token: the norm's input shard 2 e / 8 = 1024 and
    its 1/rms 2 / 8; ``qkv_proj``'s input shard 1024; the kernel's Q (4 x 128 x 2 = 1024),
    K and V (1 x 128 x 2 each), O (1024) and log-sum-exp (4 heads x 4, fp32); ``v_proj`` nothing more
    (its input is O).  Before the fix O was counted again: + 8 MiB a layer."""
    t = Training(b=1, l=8192, m1=8, s1=8, flash=True)
    layer = model_cost(from_config(LLAMA3_8B), t).layer
    attention = sum(r.act_buffer for r in layer.rows[:layer.names.index("residual") + 1])
    per_token = 1024 + Rational(1, 4) + 1024 + 1024 + 256 + 256 + 1024 + 16
    assert layer["v_proj"].act_buffer == 0
    assert attention == 8192 * per_token
    # flash keeps exactly the log-sum-exp more than selective recomputation without it
    selective = model_cost(from_config(LLAMA3_8B), replace(t, flash=False, recompute="selective"))
    flash = model_cost(from_config(LLAMA3_8B), t)
    assert flash.activation_bytes - selective.activation_bytes == 32 * 4 * 8192 * 4


def _llama_hand_terms(config, b, l):
    """What a Hugging Face Llama's autograd saves beyond the library's rows, fp32 (as in
    ``tests/test_saved_tensors_hf.py``): ``LlamaRMSNorm``'s normalised ``x`` (2 a layer and the
    final one, ``b l e`` each), the rotary ``cos`` and ``sin`` (``(1, l, q)`` each), int64 token
    ids and targets (``8 b l`` each; one sequence's targets view the labels padded to ``l + 1``)
    and the loss's 0-d total weight (4).  SDPA takes grouped K/V heads as they are
    (``enable_gqa``): no ``repeat_kv`` copies."""
    e, h, layers = config["hidden_size"], config["num_attention_heads"], config["num_hidden_layers"]
    q = e // h
    targets = 8 * (l + 1) if b == 1 else 8 * b * l
    return (2 * layers + 1) * b * l * e * 4 + 2 * l * q * 4 + 8 * b * l + targets + 4


@pytest.mark.parametrize("b, l, kv", [(2, 5, 3), (1, 4, 3), (3, 7, 1), (2, 6, 1)])
def test_flash_saved_tensors_of_a_llama_on_the_cpu_flash_kernel(b, l, kv):
    """A 2-layer Llama run with ``attn_implementation="sdpa"`` (PyTorch's CPU flash kernel
    saves Q, K, V, the output and the log-sum-exp; ``o_proj`` saves a view of that output):
    the saved storages, each counted once, are the library's flash layer under the
    ``pytorch-eager`` preset plus the hand terms.  The eager gated MLP is checked on the way."""
    torch, transformers = _torch()
    from torch_reference import saved_storages
    config = dict(model_type="llama", hidden_size=12, num_attention_heads=3, num_key_value_heads=kv,
                  num_hidden_layers=2, intermediate_size=20, vocab_size=11, max_position_embeddings=16)
    torch.manual_seed(0)
    hf = transformers.AutoConfig.for_model("llama", **{k: v for k, v in config.items() if k != "model_type"})
    model = transformers.AutoModelForCausalLM.from_config(hf, attn_implementation="sdpa").float().train()
    ids = torch.randint(0, 11, (b, l))
    with saved_storages(model.parameters()) as kept:
        model(input_ids=ids, labels=ids)
    ours = model_cost(from_config(config), replace(eager.training(b, l), flash=True), "pytorch-eager")
    assert sum(kept.values()) == ours.activation_bytes + _llama_hand_terms(config, b, l)


# -- 3. embedding lookups ----------------------------------------------------------------------

def _llama3_70b_parameters():
    """By hand: the untied 128256 x 8192 embedding and LM head, 80 layers of Q and O (8192^2
    each), K and V (8192 x 1024 each), the gated MLP (3 x 8192 x 28672) and two norms, and the
    final norm: 70,553,706,496 (the published count)."""
    e, f, kv, vocab = 8192, 28672, 1024, 128256
    layer = 2 * e * e + 2 * e * kv + 3 * e * f + 2 * e
    total = 2 * vocab * e + 80 * layer + e
    assert total == 70_553_706_496
    return total


def test_a_decode_step_reads_the_rows_it_looks_up():
    """Llama-3-70B, bf16, on one device: a decode step of b sequences reads every parameter
    once, but of the embedding only the b rows it looks up (2.1 GB less at b = 1); on 8
    tensor-parallel devices each holds 1/8 of every matrix and of the vocabulary, and looks up
    its share, b/8 of the rows."""
    arch, e, vocab = from_config(LLAMA3_70B), 8192, 128256
    weights = 2 * _llama3_70b_parameters()
    for b in (1, 16):
        step = decode(arch, Serving(b=b, l_in=16, l_out=2), 16)
        assert step.weight_bytes_read == weights - 2 * vocab * e + 2 * b * e
        table = decode(arch, Serving(b=b, l_in=16, l_out=2), 16, conv.DEFAULT.but(embedding_reads="table"))
        assert table.weight_bytes_read == weights
    assert weights - decode(arch, Serving(b=1, l_in=16, l_out=2), 16).weight_bytes_read == 2 * (vocab - 1) * e
    matrices = 80 * (2 * e * e + 2 * e * 1024 + 3 * e * 28672)
    norms = 80 * 2 * e + e                                                       # replicated
    tp = decode(arch, Serving(b=16, l_in=16, l_out=2, m1=8), 16)
    assert tp.weight_bytes_read == 2 * (matrices // 8 + norms + vocab * e // 8 + 16 * e // 8)   # LM head, rows


def test_lookup_reads_at_most_the_table():
    """More lookups than rows (a relative-position table of 32 buckets looked up l^2 times)
    read the table at most once; the output is written in full."""
    row = embedding(1, 100, 32, 4, es=2)
    assert row.mem_fwd == 32 * 4 * 2 + 100 * 4 * 2
    assert embedding(3, 1, 1000, 4, share=Rational(1, 4), es=2).mem_fwd == Rational(3, 4) * 4 * 2 + 3 * 4 * 2


# -- 4. sliding windows in decode --------------------------------------------------------------

def test_mistral_7b_reads_the_window_it_keeps():
    """Mistral-7B v0.1 (32 layers, 8 K/V heads of 128, window 4096), bf16, one sequence at
    8,192 tokens: transformers keeps the last w - 1 = 4095 tokens of each layer, and a step
    reads them and the new token's: 4096 tokens x 32 layers x 2 x 8 x 128 x 2 bytes = 128 KiB a
    token, 0.5 GiB (not 8193 tokens, 1 GiB)."""
    mistral = from_config({"model_type": "mistral", "vocab_size": 32000, "hidden_size": 4096,
                           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
                           "num_key_value_heads": 8, "sliding_window": 4096})
    per_token = 32 * 2 * 8 * 128 * 2
    assert per_token == 128 * 2 ** 10
    assert kv_cache_bytes(mistral, 1, 8192) == 4095 * per_token
    assert decode(mistral, Serving(b=1, l_in=8192, l_out=2), 8192).cache_bytes_read == 4096 * per_token == 2 ** 29


@pytest.mark.parametrize("name", ["mistral-sliding", "gemma2-alternating", "llama4-chunked", "llama-gqa"])
def test_decode_reads_the_keys_and_values_transformers_hands_the_attention(name):
    """Generate with transformers (``tests/test_inference_hf.py``'s tiny models, fp32): every
    decode step's attention gets its keys and values from ``cache.update``; their bytes, summed
    over the layers, are the library's ``cache_bytes_read`` of that step."""
    torch, transformers = _torch()
    from test_inference_hf import B, CASES, L_IN, L_OUT, hf_model
    model = hf_model(CASES[name])
    cache, reads = transformers.DynamicCache(config=model.config), []
    update = cache.update

    def recording(keys, values, *args, **kwargs):
        keys, values = update(keys, values, *args, **kwargs)
        reads.append(keys.numel() * keys.element_size() + values.numel() * values.element_size())
        return keys, values

    cache.update = recording
    ids = torch.randint(3, 60, (B, L_IN))
    with torch.no_grad():
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=L_OUT, min_new_tokens=L_OUT,
                       do_sample=False, pad_token_id=0, past_key_values=cache)
    layers = model.config.num_hidden_layers
    steps = [sum(reads[i:i + layers]) for i in range(0, len(reads), layers)][1:]     # after the prefill
    arch, s = from_config(CASES[name], name), Serving(b=B, l_in=L_IN, l_out=L_OUT, precision="fp32")
    assert steps == [decode(arch, s, cached_before(arch, s, j)).cache_bytes_read for j in range(1, L_OUT)]
    if name == "mistral-sliding":        # 2 sequences x 2 layers x (2 kept + 1 new) x 2 heads x (10 + 10) x 4
        assert steps == [2 * 2 * 3 * 2 * 20 * 4] * (L_OUT - 1)
