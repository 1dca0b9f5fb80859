"""``Training`` as a tree of values (issue 61): each old flat keyword lands in exactly one value,
reads back under its flat name, and a value given whole equals the same settings given flat.
The settings below are written by hand from the fields' documentation, not from ``FLAT``."""

from dataclasses import fields, replace

import pytest

from symbolic_cost.blocks.context import Context
from symbolic_cost.blocks.wiring import Experts
from symbolic_cost.checks import InputError
from symbolic_cost.models import Training
from symbolic_cost.models.training import FLAT
from symbolic_cost.models.lora import LoRA
from symbolic_cost.models.training_values import (Batch, Degrees, Execution, Overlap, Pipeline, Precision,
                                                  Recompute, Sharding, Trainable)
from symbolic_cost.numeric.search import Space, search
from symbolic_cost.models.config import preset

# (flat keyword, a value other than its default, the value field, the attribute there)
SETTINGS = [
    ("p", 4, "pipeline", "p"), ("schedule", "gpipe", "pipeline", "schedule"),
    ("recompute", "selective", "recomputation", "mode"), ("zero", 2, "sharding", "zero"),
    ("distributed_optimizer", True, "sharding", "distributed_optimizer"),
    ("offload", "optimizer", "sharding", "offload"), ("precision", "fp16", "numerics", "dtype"),
    ("optimizer", "sgd", "numerics", "optimizer"), ("master_weights", False, "numerics", "master_weights"),
    ("fp8", "delayed", "numerics", "fp8"), ("ep", 2, "experts", "ep"), ("etp", 1, "experts", "etp"),
    ("capacity_factor", 2, "experts", "capacity_factor"), ("expert_imbalance", 2, "experts", "imbalance"),
    ("cp", 2, "context", "cp"), ("flash", True, "execution", "flash"), ("mask_bytes", 4, "execution", "mask_bytes"),
    ("overlap", Overlap(tensor=True), "execution", "overlap"), ("b", 8, "batch", "b"), ("l", 4096, "batch", "l"),
    ("micro_batches", 4, "batch", "micro_batches"), ("allow_long", True, "batch", "allow_long"),
    ("l_dec", 128, "batch", "l_dec"), ("m1", 2, "degrees", "m1"), ("s1", 2, "degrees", "s1"), ("d", 8, "degrees", "d"),
    ("lora", LoRA(8), "trainable", "lora"), ("mtp", False, "trainable", "mtp"),
    ("tp_ends", "gathered", "degrees", "ends"),
]


@pytest.mark.parametrize("name, value, field, attribute", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_a_flat_keyword_lands_in_its_value_and_reads_back(name, value, field, attribute):
    base = dict(zero=1) if name == "offload" else {}
    t = Training(**base, **{name: value})
    assert getattr(getattr(t, field), attribute) == value
    assert getattr(t, name) == value
    others = Training(**base)
    changed = [f.name for f in fields(Training) if getattr(t, f.name) != getattr(others, f.name)]
    assert changed == [field]


def test_training_has_ten_values():
    assert [f.name for f in fields(Training)] == ["batch", "degrees", "pipeline", "context", "experts",
                                                  "recomputation", "sharding", "numerics", "execution", "trainable"]


def test_values_given_whole_equal_the_same_settings_given_flat():
    whole = Training(batch=Batch(b=2, l=1024, micro_batches=8), degrees=Degrees(d=8),
                     pipeline=Pipeline(p=2, schedule="interleaved", virtual_stages=2),
                     recomputation=Recompute("full", "block", 2), sharding=Sharding(zero=3, shard=4),
                     numerics=Precision(dtype="fp16"), experts=Experts(ep=2, etp=None), context=Context(2, "ulysses"),
                     execution=Execution(flash=True), trainable=Trainable(mtp=True))
    flat = Training(b=2, l=1024, d=8, micro_batches=8, p=2, schedule="interleaved", virtual_stages=2,
                    recompute="full", recompute_method="block", recompute_layers=2, zero=3, shard=4,
                    precision="fp16", ep=2, cp=2, cp_variant="ulysses", flash=True)
    assert whole == flat and hash(whole) == hash(flat)
    assert Training(**flat.flat()) == flat
    assert replace(flat, cp=1, cp_variant="ring") == replace(flat, context=Context(1))


@pytest.mark.parametrize("keywords, named", [
    (dict(expert_imbalance=0), "expert_imbalance"), (dict(recompute_layers=2), "recompute_layers"),
    (dict(pipeline_layout="Et|tL"), "pipeline_layout"), (dict(reshard_after_forward=False), "reshard_after_forward"),
    (dict(zero=5), "zero"), (dict(precision="fp64"), "precision"), (dict(p=0), "p"), (dict(mask_bytes=0), "mask_bytes"),
    (dict(pipeline=4), "pipeline"), (dict(depth=2), "depth"), (dict(shard=3, d=4, zero=3), "shard"),
    (dict(b=0), "b"), (dict(m1=-2), "m1"), (dict(mtp=1), "mtp"), (dict(overlap=True), "overlap"), (dict(lora="r8"), "lora"),
])
def test_a_bad_setting_is_refused_under_the_name_a_user_typed(keywords, named):
    with pytest.raises(InputError) as refused:
        Training(**keywords)
    assert refused.value.argument == named


def test_search_takes_a_space_and_its_fields_as_keywords():
    gpt2 = preset("gpt2")
    by_value = search(gpt2, 8, "h100", Space(global_batch=32, seq=1024, zero=(1, 3)), top=3)
    by_keywords = search(gpt2, 8, "h100", global_batch=32, seq=1024, zero=(1, 3), top=3)
    assert by_value.best.equals(by_keywords.best) and by_value.evaluated == by_keywords.evaluated > 0
    with pytest.raises(InputError, match="unexpected keyword argument 'zeros'"):
        search(gpt2, 8, "h100", zeros=(1,))


# Architecture's settings: (flat keyword, a value other than its default, the value field, the attribute)
ARCH_SETTINGS = [
    ("kv_heads", 2, "attention", "kv_heads"), ("qk_norm", "head", "attention", "qk_norm"),
    ("rotary", True, "positional", "rotary"), ("context", 4096, "positional", "context"),
    ("window", 128, "windows", "window"), ("mlp", "swiglu", "feedforward", "mlp"), ("norm", "rms", "normalization", "norm"),
    ("dropouts", False, "dropout", "dropouts"), ("tied", False, "ends", "tied"), ("vocab_multiple", 128, "ends", "vocab_multiple"),
]


@pytest.mark.parametrize("name, value, field, attribute", ARCH_SETTINGS, ids=[s[0] for s in ARCH_SETTINGS])
def test_an_architecture_keyword_lands_in_its_value(name, value, field, attribute):
    from symbolic_cost.models import Architecture
    plain = Architecture("toy", 2, 64, 4, 256, 1000)
    arch = Architecture("toy", 2, 64, 4, 256, 1000, **{name: value})
    assert getattr(getattr(arch, field), attribute) == value and getattr(arch, name) == value
    assert [f.name for f in fields(arch) if getattr(arch, f.name) != getattr(plain, f.name)] == [field]
    assert replace(plain, **{name: value}) == arch


def test_an_architecture_given_by_values_equals_the_same_given_flat():
    from symbolic_cost.models import Architecture
    from symbolic_cost.models.architecture_values import Attention, Ends, Feedforward, Positions
    whole = Architecture("toy", 2, 64, attention=Attention(h=4, kv_heads=2, qkv_bias=False),
                         feedforward=Feedforward(f=256, mlp="swiglu"), positional=Positions(rotary=True),
                         ends=Ends(vocab=1000, tied=False), bias=False)
    flat = Architecture("toy", 2, 64, 4, 256, 1000, kv_heads=2, qkv_bias=False, mlp="swiglu", rotary=True, tied=False,
                        bias=False)
    assert whole == flat and hash(whole) == hash(flat) and len(fields(flat)) == 15
    with pytest.raises(InputError, match="unexpected keyword argument 'heads'"):
        Architecture("toy", 2, 64, 4, 256, 1000, heads=4)
