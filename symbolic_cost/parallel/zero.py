"""Data parallelism with ZeRO (Rajbhandari et al. 2020) and Megatron's distributed optimizer:
which model state is sharded over the ``d`` replicas, and the collectives that keep it in step.

=========== =========== =========== =========== =============================================
sharding    weights     gradients   optimizer   collectives per step (``n`` micro-batches)
=========== =========== =========== =========== =============================================
none (DDP)  full        full        full        allreduce of the gradients once
ZeRO-1 /    full        full        / d         reduce-scatter of the gradients once, then
dist. opt.                                      allgather of the updated weights
ZeRO-2      full        / d         / d         reduce-scatter every micro-batch, allgather
ZeRO-3      / d         / d         / d         reduce-scatter every micro-batch, allgather of
                                                the weights in forward and backward of each
=========== =========== =========== =========== =============================================
"""

from __future__ import annotations

from sympy import Expr

from symbolic_cost.cost import Collective, collective
from symbolic_cost.checks import InputError

STATES = ("weights", "gradients", "optimizer")


def shard_degree(state: str, zero: int, d, distributed_optimizer: bool = False) -> Expr:
    """Replicas that one copy of a model state is spread over (``d`` when sharded, else 1).

    >>> shard_degree("gradients", 2, 8), shard_degree("weights", 2, 8)
    (8, 1)
    """
    if state not in STATES:
        raise InputError(f"state must be one of {', '.join(STATES)}, got {state!r}")
    first = {"weights": 3, "gradients": 2, "optimizer": 1}[state]
    sharded = zero >= first or (state == "optimizer" and distributed_optimizer)
    return d if sharded else 1


def data_parallel_collectives(parameters, weight_bytes, grad_bytes, d, zero, distributed_optimizer,
                              micro_batches, stride, conventions) -> list[Collective]:
    """The data-parallel collectives of one step over ``d`` replicas ``stride`` ranks apart."""
    def dp(kind, nbytes, pass_, repeats=1):
        return collective(kind, parameters, nbytes, d, pass_, conventions, repeats=repeats, stride=stride)
    if not (zero >= 1 or distributed_optimizer):
        return dp("allreduce", grad_bytes, "bwd")              # DDP: once per step
    # ZeRO-2/3 keep only a gradient shard, so they reduce-scatter every micro-batch
    out = dp("reducescatter", grad_bytes, "bwd", repeats=micro_batches if zero >= 2 else 1)
    if zero == 3:                                                # parameters gathered on use
        return out + dp("allgather", weight_bytes, "fwd", micro_batches) + dp("allgather", weight_bytes, "bwd", micro_batches)
    return out + dp("allgather", weight_bytes, "bwd")           # updated shards gathered after the step
