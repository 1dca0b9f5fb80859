"""Blocks: MLP, attention and the transformer layer (and a model's two ends) as ordered
lists of per-device Costs under 1-D tensor (``m1``) and sequence (``s1``) parallelism."""

from symbolic_cost.blocks.attention import attention
from symbolic_cost.blocks.block import Block
from symbolic_cost.blocks.ends import embedding_block, head_block
from symbolic_cost.blocks.layer import transformer_layer
from symbolic_cost.blocks.mlp import mlp
from symbolic_cost.blocks.specs import Feedforward, Heads, Projections, Scores
from symbolic_cost.blocks.wiring import Experts, Residual, Run, Wiring

BUILDERS = {"mlp": mlp, "attention": attention, "layer": transformer_layer}

__all__ = ["Block", "mlp", "attention", "transformer_layer", "embedding_block", "head_block", "BUILDERS",
           "Heads", "Scores", "Projections", "Feedforward", "Residual", "Wiring", "Run", "Experts"]
