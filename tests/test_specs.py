"""The value objects of ``blocks.specs``: what they refuse (naming the field and the rule), the
sizes they derive, and that a block built from them is the block built from their defaults."""

import pytest

from symbolic_cost import symbols as S
from symbolic_cost.blocks import Feedforward, Heads, Projections, Scores, attention, transformer_layer
from symbolic_cost.blocks.latent_attention import Latent, latent_attention
from symbolic_cost.checks import InputError
from symbolic_cost.ops.matmul import Chunk


@pytest.mark.parametrize("build, argument, words", [
    (lambda: Heads(8, qk_norm="rms"), "qk_norm", "qk_norm must be one of"),
    (lambda: Heads(8, rotary=1.0), "rotary", "rotary must be True or False"),
    (lambda: Heads(8, latent=(512, 64)), "latent", "latent must be a blocks.latent_attention.Latent"),
    (lambda: Scores(bias="rotary"), "bias", "bias must be one of"),
    (lambda: Scores(causal=None), "causal", "causal must be True or False"),
    (lambda: Scores(dropout="yes"), "dropout", "dropout must be True or False or None"),
    (lambda: Projections(qkv_bias="yes"), "qkv_bias", "qkv_bias must be True or False"),
    (lambda: Projections(cross=None), "cross", "cross must be True or False"),
    (lambda: Feedforward(gated="swiglu"), "gated", "gated must be True or False"),
    (lambda: Feedforward(experts={"ep": 2}), "experts", "they need moe"),
])
def test_values_refuse_with_the_field_named(build, argument, words):
    with pytest.raises(InputError, match=words) as caught:
        build()
    assert caught.value.argument == argument


def test_derived_sizes():
    heads = Heads(S.h, kv_heads=2, head_dim=64)
    assert (heads.kv, heads.size(S.e), heads.value_size(S.e)) == (2, 64, 64)
    assert (Heads(S.h).kv, Heads(S.h).size(S.e)) == (S.h, S.e / S.h)
    assert Heads(8, v_head_dim=16).value_size(256) == 16
    assert Scores(window=Chunk(S.l / 4)).span == S.l / 4 and Scores().span is None
    assert Heads(8, 2, qk_norm="head", rotary=True).plain == Heads(8, 2)


def test_a_number_of_heads_is_plain_heads():
    b, l, e, h, m1 = S.b, S.l, S.e, S.h, S.m1
    assert attention(b, l, e, h, m1, m1).rows == attention(b, l, e, Heads(h), m1, m1, scores=Scores(),
                                                            projections=Projections()).rows
    assert transformer_layer(b, l, e, 4 * e, h).rows == transformer_layer(b, l, e, 4 * e, Heads(h),
                                                                          ffn=Feedforward()).rows


def test_latent_heads_build_latent_attention():
    latent = Latent(kv_rank=64, rope_dim=8, nope_dim=16, v_dim=16, q_rank=32)
    ours = attention(2, 8, 128, Heads(4, latent=latent), 2, scores=Scores(causal=True),
                     projections=Projections(out_bias=False), norm="rms")
    assert ours == latent_attention(2, 8, 128, 4, latent, 2, bias=False, causal=True, norm="rms")


def test_the_mlp_follows_the_output_projections_bias_unless_told():
    plain = transformer_layer(1, 8, 64, 256, 4, projections=Projections(out_bias=False))
    told = transformer_layer(1, 8, 64, 256, 4, projections=Projections(out_bias=False), ffn=Feedforward(bias=True))
    assert plain["fc1"].weights == 64 * 256 * 2 and told["fc1"].weights == (64 * 256 + 256) * 2
