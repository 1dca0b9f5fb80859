"""Offload traffic on the host link: seconds per step and host memory per node.

An offloaded step moves ``ModelCost.device_to_host`` bytes (gradient shards) and
``host_to_device`` bytes (updated or fetched weight shards) per device over
``System.host_bandwidth`` (PCIe or NVLink-C2C, per direction).  The two directions run
at different moments of the step (gradients during backward, weights after the
optimizer step or on use), so their times add::

    t_host = (device_to_host + host_to_device) / host_bandwidth

Each node's host holds the offloaded state of its devices: ``host_bytes x`` devices per
node, taken as the NVLink domain (``System.nvlink_size``: 8 on a DGX, 4 on Perlmutter).

Where the optimizer is offloaded (``models.recipes.optimizer_on_host``; not under ``offload =
"weights"``, whose step runs on the device), its step runs on the host (DeepSpeed's CPU Adam),
streaming its state through host memory: every offloaded byte (the optimizer shard, the gradient buffer, the weights when
they live there) read and written once, plus the transfers themselves (the gradients arriving
are written, the weights leaving are read), for every device of the node at once over the
node's ``System.host_memory_bandwidth``::

    t_step = (2 host_bytes + device_to_host + host_to_device) x devices per node / B_host_memory

(memory bound: Adam's dozen FLOPs per parameter take a fraction of the time on a node's cores).
"""

from __future__ import annotations

from sympy import Expr, Integer

from symbolic_cost.extrema import minimum
from symbolic_cost.models import ModelCost, world_size
from symbolic_cost.models.recipes import optimizer_on_host
from symbolic_cost.timing.hardware import System, get_system


def host_traffic(cost: ModelCost) -> Expr:
    """Bytes one device moves to and from its host per step."""
    return cost.device_to_host + cost.host_to_device


def host_time(cost: ModelCost, system: System | str) -> Expr:
    """Seconds per step on the host link (see the module docstring); 0 without offload."""
    system = get_system(system)
    traffic = host_traffic(cost)
    if traffic == 0:
        return Integer(0)
    system.require("offload traffic", "host_bandwidth")
    return traffic / system.host_bandwidth


def host_step_time(cost: ModelCost, system: System | str) -> Expr:
    """Seconds of the optimizer step on the host (see the module docstring); 0 without offload."""
    system = get_system(system)
    if cost.host_bytes == 0 or not optimizer_on_host(cost.training.offload):
        return Integer(0)
    system.require("the optimizer step on the host", "host_memory_bandwidth")
    streamed = 2 * cost.host_bytes + host_traffic(cost)
    return streamed * minimum(system.nvlink_size, world_size(cost.training)) / system.host_memory_bandwidth


def host_bytes_per_node(cost: ModelCost, system: System | str) -> Expr:
    """Host memory the offloaded state takes on one node: per device x devices per node
    (the job's devices when it is smaller than a node)."""
    system = get_system(system)
    return cost.host_bytes * minimum(system.nvlink_size, world_size(cost.training))
