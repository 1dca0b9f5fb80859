"""The value objects of ``blocks.specs``: what they refuse (naming the field and the rule), the
sizes they derive, and that a block built from them is the block built from their defaults."""

import importlib
import inspect
import pkgutil

import pytest
from sympy import Rational

import symbolic_cost
from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.blocks import (Experts, Feedforward, Heads, Projections, Residual, Run, Scores, Wiring, attention,
                                  embedding_block, head_block, mlp, transformer_layer)
from symbolic_cost.blocks.context import Context
from symbolic_cost.blocks.ends import Embeddings, Head
from symbolic_cost.blocks.heads import Task
from symbolic_cost.blocks.moe import MoE, moe
from symbolic_cost.parallel.grid import make_grid
from symbolic_cost.parallel.grid_blocks import grid_attention, grid_layer, grid_mlp
from symbolic_cost.blocks.latent_attention import Latent, latent_attention
from symbolic_cost.checks import InputError
from symbolic_cost.ops.matmul import Chunk


GRID = make_grid("2d", m1=2, m2=2)


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
    (lambda: Experts(ep=0), "ep", "ep must be a positive integer"),
    (lambda: Experts(etp=Rational(3, 2)), "etp", "etp must be a positive integer"),
    (lambda: Experts(capacity_factor=-1), "capacity_factor", "capacity_factor must be positive"),
    (lambda: Experts(imbalance=Rational(1, 2)), "imbalance", "imbalance must be at least 1"),
    (lambda: Experts(replicated=1), "replicated", "replicated must be True or False"),
    (lambda: moe(1, 8, 16, MoE(4, 2, 8), experts={"ep": 2}), "experts", "experts must be a blocks.wiring.Experts"),
    (lambda: moe(1, 8, 16, MoE(4, 2, 8), residual=Residual(post_norm=True)), "post_norm", "not modelled"),
    (lambda: Embeddings(norm="batch"), "norm", "norm must be one of"),
    (lambda: Embeddings(dropout=None), "dropout", "dropout must be True or False"),
    (lambda: Embeddings(shared="yes"), "shared", "shared must be True or False"),
    (lambda: Embeddings(relative=32), "relative", "relative must be"),
    (lambda: Head(final_norm="group"), "final_norm", "final_norm must be one of"),
    (lambda: Head(tied=None), "tied", "tied must be True or False"),
    (lambda: Head(softcap=30), "softcap", "softcap must be True or False"),
    (lambda: Task("ner"), "kind", "kind must be one of"),
    (lambda: Task("classification", classifier="mean"), "classifier", "classifier must be one of"),
    (lambda: grid_attention(4, 8, 64, Heads(8, qk_norm="head"), GRID), "qk_norm", "grid does not model Heads.qk_norm"),
    (lambda: grid_attention(4, 8, 64, 8, GRID, run=Run(context=Context(2))), "context", "does not model Run.context"),
    (lambda: grid_mlp(4, 8, 64, 256, GRID, residual=Residual(post_norm=True)), "post_norm", "Residual.post_norm"),
    (lambda: grid_layer(4, 8, 64, 256, 8, GRID, ffn=Feedforward(moe=MoE(4, 2, 8))), "moe", "Feedforward.moe"),
    (lambda: grid_layer(4, 8, 64, 256, 8, GRID, wiring=Wiring(parallel=True, norms=1)), "norms", "Wiring.norms"),
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


BUILDERS = [attention, mlp, transformer_layer, latent_attention, moe, embedding_block, head_block, grid_mlp,
            grid_attention, grid_layer]
"""The builders of ``blocks`` that take the value objects."""


@pytest.mark.parametrize("build", BUILDERS, ids=lambda build: build.__name__)
def test_no_builder_takes_more_than_twelve_parameters(build):
    assert len(inspect.signature(build).parameters) <= 12


def _signatures():
    """``{qualified name: parameter count}`` of every public function of the package and every
    public method of its public classes (a dataclass's generated ``__init__`` is its fields)."""
    counts = {}
    for found in pkgutil.walk_packages(symbolic_cost.__path__, "symbolic_cost."):
        if found.name.endswith("__main__"):          # runs the command line when imported
            continue
        module = importlib.import_module(found.name)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != found.name:
                continue
            if inspect.isclass(getattr(obj, "__wrapped__", None)):    # a value class under a decorator
                obj = obj.__wrapped__
            if inspect.isfunction(obj):
                counts[f"{found.name}.{name}"] = len(inspect.signature(obj).parameters)
            elif inspect.isclass(obj):
                counts.update({f"{found.name}.{name}.{m}": len(inspect.signature(f).parameters) - 1
                               for m, f in vars(obj).items() if inspect.isfunction(f) and not m.startswith("_")})
    return counts


def test_no_public_function_takes_more_than_twelve_parameters():
    counts = _signatures()
    assert len(counts) > 500                         # the walk found the package, not a corner of it
    assert {name: n for name, n in counts.items() if n > 12} == {}


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


def test_plain_values_build_the_default_ends_and_experts():
    """``None`` is the default value of each: the same rows as the values spelled out."""
    b, l, e, v = S.b, S.l, S.e, S.v
    assert embedding_block(b, l, e, v, embeddings=Embeddings(), run=Run()).rows == embedding_block(b, l, e, v).rows
    assert head_block(b, l, e, v, head=Head(), task=Task(), residual=Residual(), run=Run()).rows == \
        head_block(b, l, e, v).rows
    spec = MoE(8, 2, S.f)
    assert moe(b, l, e, spec, experts=Experts(), residual=Residual(norm="rms"), run=Run()).rows == \
        moe(b, l, e, spec).rows


def test_the_ends_read_their_values():
    """Rows by hand: T5's decoder start (a shared table, no weights; the relative bias table of
    32 buckets x 8 heads, 4 a rank), OPT's projections, a classification head's dropouts."""
    start = embedding_block(2, 8, 16, 100, 2, 2, embeddings=Embeddings(dropout=False, shared=True, relative=(32, 8)),
                            run=Run(es=4))
    assert start.names == ["word_embeddings", "relative_attention_bias"]
    assert start["word_embeddings"].weights == 0 and start["relative_attention_bias"].weights == 32 * 4 * 4
    opt = embedding_block(1, 8, 16, 100, embeddings=Embeddings(positions=8, projection=4))
    assert opt["project_in"].weights == 4 * 16 * 2 and opt["word_embeddings"].weights == 100 * 4 * 2
    end = head_block(1, 8, 16, 100, head=Head(final_norm=None, loss=False), task=Task("classification", 3, "dense"),
                     residual=Residual(dropouts=False))
    assert end.names == ["classifier_dense", "classifier_activation", "out_proj", "classification_loss"]
    assert end["out_proj"].weights == (16 * 3 + 3) * 2


def test_the_experts_place_the_moe_block():
    """Two experts a rank of eight on four ranks: the experts' weights by hand (gated: 2 f_x
    e + f_x e each, no biases); a capacity factor of 5/4 pads each expert's rows to
    ceil(5/4 x 8 x 2 / 8) = 3, so 8 x 3 rows reach the rank's experts."""
    block = moe(1, 8, 16, MoE(8, 2, 32), experts=Experts(ep=4, capacity_factor=Rational(5, 4)), run=Run(es=1))
    assert block["expert_fc1"].weights == 2 * 2 * 32 * 16 and block["expert_fc2"].weights == 2 * 32 * 16
    assert block["expert_fc2"].flops_fwd == 8 * 3 * 16 * (2 * 32 - 1)


def test_a_grid_layer_reads_the_values_of_a_layer():
    """The grid layer from values is its attention then its MLP, each from the same values; the
    MLP's biases follow the output projection's unless the feed-forward value says."""
    layer = grid_layer(4, 8, 64, 256, Heads(8, kv_heads=4, rotary=True), GRID, scores=Scores(causal=True),
                       projections=Projections(qkv_bias=False, out_bias=False), ffn=Feedforward(gated=True),
                       wiring=Wiring(norm="rms", dropouts=False), run=Run(flash=True))
    first = grid_attention(4, 8, 64, Heads(8, kv_heads=4, rotary=True), GRID, scores=Scores(causal=True),
                           projections=Projections(qkv_bias=False, out_bias=False),
                           residual=Residual(norm="rms", dropouts=False), run=Run(flash=True))
    second = grid_mlp(4, 8, 64, 256, GRID, bias=False, gated_act=True, residual=Residual(norm="rms", dropouts=False))
    assert layer.rows == first.rows + second.rows and "rotary" in first.names
    assert second["fc1"].weights == 64 * 512 // 4 * 2            # gated: e x 2f, a quarter a device, no bias
