"""The value objects of ``blocks.specs``: what they refuse (naming the field and the rule), the
sizes they derive, and that a block built from them is the block built from their defaults."""

import inspect

import pytest

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.blocks import (Feedforward, Heads, Projections, Residual, Run, Scores, Wiring, attention, mlp,
                                  transformer_layer)
from symbolic_cost.blocks.context import Context
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
                     projections=Projections(out_bias=False), residual=Residual(norm="rms"))
    assert ours == latent_attention(2, 8, 128, 4, latent, 2, bias=False)


def test_the_mlp_follows_the_output_projections_bias_unless_told():
    plain = transformer_layer(1, 8, 64, 256, 4, projections=Projections(out_bias=False))
    told = transformer_layer(1, 8, 64, 256, 4, projections=Projections(out_bias=False), ffn=Feedforward(bias=True))
    assert plain["fc1"].weights == 64 * 256 * 2 and told["fc1"].weights == (64 * 256 + 256) * 2


BUILDERS = [attention, mlp, transformer_layer, latent_attention]
"""The builders of ``blocks`` that take the value objects."""


@pytest.mark.parametrize("build", BUILDERS, ids=lambda build: build.__name__)
def test_no_builder_takes_more_than_twelve_parameters(build):
    assert len(inspect.signature(build).parameters) <= 12


def test_plain_values_build_the_default_blocks():
    b, l, e, f, h = S.b, S.l, S.e, S.f, S.h
    assert attention(b, l, e, h, residual=Residual(), run=Run()).rows == attention(b, l, e, h).rows
    assert mlp(b, l, e, f, residual=Residual(), run=Run()).rows == mlp(b, l, e, f).rows
    assert transformer_layer(b, l, e, f, h, wiring=Wiring(), run=Run()).rows == transformer_layer(b, l, e, f, h).rows


def test_the_wiring_places_each_block():
    b, l, e, f, h = S.b, S.l, S.e, S.f, S.h
    joined = transformer_layer(b, l, e, f, h, wiring=Wiring(parallel=True, norms=1, dropouts=False))
    branch = dict(residual=Residual(dropouts=False, branch=True))
    assert joined.rows[:len(attention(b, l, e, h, **branch).rows)] == attention(b, l, e, h, **branch).rows
    shared = mlp(b, l, e, f, residual=Residual(dropouts=False, branch=True, shared_input=True))
    assert shared.names == ["fc1", "act", "fc2"] and set(shared.names) < set(joined.names)
    sandwich = transformer_layer(b, l, e, f, h, wiring=Wiring(norm="rms", norms=4, part="mlp"))
    assert sandwich.rows == mlp(b, l, e, f, residual=Residual(norm="rms", post_norm=True)).rows


def test_latent_attention_refuses_what_it_does_not_model():
    latent = Latent(kv_rank=64, rope_dim=8, nope_dim=16, v_dim=16)
    with pytest.raises(InputError, match="context parallelism"):
        latent_attention(2, 8, 128, 4, latent, run=Run(context=Context(2)))
    with pytest.raises(InputError, match="parallel layer"):
        latent_attention(2, 8, 128, 4, latent, residual=Residual(norm="rms", branch=True))


def test_the_run_carries_the_element_sizes_and_conventions():
    b, l, e, f = S.b, S.l, S.e, S.f
    megatron = conv.get("megatron-training-info")
    block = mlp(b, l, e, f, run=Run(es=4, es_mask=2, conventions=megatron))
    assert block.conventions == megatron and block["fc1"].weights == 4 * (e * f + f)
