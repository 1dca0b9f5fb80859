"""Recomputation as a property of a row (issue 26, item 3): each row says which recomputation
redoes its forward (``Cost.recompute``) and which rebuilds what it keeps (``Cost.rebuilt``);
``models.memory`` reads the marks, no list of names."""

from symbolic_cost import Feedforward, Projections, attention, transformer_layer
from symbolic_cost.blocks.moe import MoE, moe
from symbolic_cost.models.memory import kept_bytes, recomputed_rows
from symbolic_cost.blocks.wiring import Run

CORE = ["logits", "softmax", "dropout_softmax", "attend"]      # Korthikanti et al. 2022


def _marked(block, field, value):
    return [row.name for row in block if getattr(row, field) == value]


def test_the_attention_core_is_what_selective_recomputation_redoes_and_rebuilds():
    block = attention(2, 8, 64, 4)
    assert _marked(block, "recompute", "selective") == _marked(block, "rebuilt", "selective") == CORE
    assert _marked(attention(2, 8, 64, 4, run=Run(flash=True)), "recompute", "selective") == []   # the kernel keeps O
    cross = attention(2, 8, 64, 4, projections=Projections(cross=True))
    assert _marked(cross, "recompute", "selective") == []       # the self-attention core only


def test_activation_recomputation_redoes_the_activation_and_rebuilds_the_second_products_input():
    layer = transformer_layer(2, 8, 64, 256, 4, ffn=Feedforward(activation_dropout=True))
    assert recomputed_rows(layer, "activation") == ["act", "dpr1"]
    assert _marked(layer, "rebuilt", "activation") == ["dpr1", "fc2"]
    assert recomputed_rows(layer, "selective") == CORE
    dropped = layer["dpr1"].act_buffer + layer["fc2"].act_buffer
    assert kept_bytes(layer, "activation", 0) == layer.total("act_buffer") - dropped
    experts = moe(2, 8, 64, MoE(4, 2, 128, shared_f=128), 1, 1)
    assert recomputed_rows(experts, "activation") == ["expert_act", "shared_act"]
    assert _marked(experts, "rebuilt", "activation") == ["expert_fc2", "shared_fc2"]
