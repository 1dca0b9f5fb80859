"""Whole models: the architecture, the training setup, and every total per iteration.

A model is an ``Architecture`` (what the network is, ``architecture``) trained
under a ``Training`` setup (``training``: batch, sequence, precision, optimizer
sharding, recomputation and the degrees ``m1, s1, d, p``).  ``model_cost``
(``totals``) composes the embedding, ``n_layers`` transformer layers and the
head and returns every total as an expression; ``memory`` holds what a layer
keeps for backward; ``config`` reads Hugging Face ``config.json`` files.
"""

from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.training import PRECISIONS, RECOMPUTE, Training, bytes_per_parameter, element_bytes
from symbolic_cost.models.totals import (ModelCost, cluster_volume, model_blocks, model_cost, stage_parameters,
                                         world_size)

__all__ = ["Architecture", "Training", "ModelCost", "model_cost", "model_blocks", "stage_parameters",
           "world_size", "cluster_volume", "element_bytes", "bytes_per_parameter", "PRECISIONS", "RECOMPUTE"]
