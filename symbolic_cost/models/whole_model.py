"""``ModelCost``: every whole-model total of ``models.model_cost``, as a value.

Its own module, below ``models.totals`` (which builds it) and ``models.ranks`` (which reads it
rank by rank), so that every function that takes one can refuse anything else by name
(``model_cost_of``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sympy import Expr, Integer

from symbolic_cost.blocks import Block
from symbolic_cost.checks import instance
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.training import Training


def model_cost_of(cost, name: str = "cost") -> "ModelCost":
    """``cost`` if it is a ``ModelCost``, else ``InputTypeError`` naming ``name``: what the
    functions that read a whole model's totals (step time, peak memory) take."""
    return instance(cost, ModelCost, name, " (models.model_cost(arch, training))")


@dataclass(frozen=True)
class ModelCost:
    """Every whole-model total, as expressions (bytes, FLOPs, per device unless named).

    A per-device field is its own busiest pipeline rank's: ``flops_wgrad`` and ``flops_agrad``
    sum to ``flops_bwd`` when one rank is the busiest for all three (always with ``p = 1``);
    ``model_flops_wgrad + model_flops_agrad == model_flops_bwd`` always."""

    architecture: Architecture
    training: Training
    embedding: Block
    layer: Block
    head: Block
    parameters: Expr
    parameters_per_device: Expr
    flops_fwd: Expr
    flops_bwd: Expr
    flops_recompute: Expr
    model_flops_fwd: Expr
    model_flops_bwd: Expr
    flops_wgrad: Expr            # the weight-gradient part of flops_bwd (Cost.flops_wgrad), busiest device
    flops_agrad: Expr            # its activation-gradient part (Cost.flops_agrad), busiest device
    model_flops_wgrad: Expr      # the two parts of model_flops_bwd: they sum to it
    model_flops_agrad: Expr
    weight_bytes: Expr
    gradient_bytes: Expr
    optimizer_bytes: Expr
    activation_bytes: Expr
    bubble: Expr
    collectives: tuple = field(default=())   # (dimension, Collective) pairs per iteration
    stack: tuple = field(default=())         # (Block, count) for every block in model order
    trainable_parameters: Expr = None        # the whole model's (LoRA: the adapters'); None: parameters
    host_bytes: Expr = Integer(0)            # offloaded state in host memory, per device
    optimizer_step_bytes: Expr = Integer(0)  # what the busiest device's optimizer step reads and writes
    host_to_device: Expr = Integer(0)        # offload traffic per step, bytes per device
    device_to_host: Expr = Integer(0)
    active_parameters: Expr = None           # parameters a token goes through (MoE: k of E experts)
    expert_parameters_per_device: Expr = Integer(0)   # routed experts' (sharded over edp, models.experts)
    flops_reference: Expr = Integer(0)       # a reference model's forwards (Trainable.reference), busiest device
    reference_bytes: Expr = Integer(0)       # its copy's share of weight_bytes, busiest device

    @property
    def blocks(self) -> tuple:
        """``(block, count)`` for every block of the model in order (``models.stack``): the
        embedding, each group of identical layers, the head (T5: also the encoder's end and
        the decoder's start).  ``layer`` is the first layer group's block."""
        return self.stack

    @property
    def memory_bytes(self) -> Expr:
        return self.weight_bytes + self.gradient_bytes + self.optimizer_bytes + self.activation_bytes
