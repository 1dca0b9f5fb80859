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

Hybrid sharding (HSDP: PyTorch FSDP2 on a 2-D device mesh ``(d/shard, shard)``, FSDP1's
``HYBRID_SHARD``, torchtitan's ``data_parallel_shard_degree``): ZeRO-3 over a shard group of
``shard`` ranks (``shard`` divides ``d``), each group a full replica of the model, so each rank
keeps ``1/shard`` of the weights, gradients and optimizer state.  Per micro-batch, ``P`` the
parameters, ``r = d/shard`` the replica groups:

=================== ============= ======================= =====================================
collective          group         tensor                  when
=================== ============= ======================= =====================================
allgather           ``shard``     ``P`` weights           forward; backward again unless
                                                          ``reshard_after_forward=False``
reducescatter       ``shard``     ``P`` gradients         backward
allreduce           ``r``         ``P/shard`` gradients   backward, after the reduce-scatter
                                                          (the gradient shard across replicas)
=================== ============= ======================= =====================================

The replica groups are ``shard`` data-parallel ranks apart (torchtitan's mesh puts
``dp_replicate`` outside ``dp_shard``).  Each micro-batch reduces (FSDP2's default
``set_requires_gradient_sync(True)``, ``set_requires_all_reduce(True)``).  ``shard = d`` is
plain ZeRO-3/FSDP: no all-reduce.  ``reshard_after_forward=False`` (FSDP2's, FSDP1's
``SHARD_GRAD_OP``) keeps each layer's gathered weights from its forward to its backward, so the
backward gathers nothing.
"""

from __future__ import annotations

from sympy import Expr, Rational, sympify

from symbolic_cost.cost import Collective, collective
from symbolic_cost.checks import InputError, divides, positive_dims

STATES = ("weights", "gradients", "optimizer")


def shard_degree(state: str, zero: int, d, distributed_optimizer: bool = False, shard=None) -> Expr:
    """Ranks that one copy of a model state is spread over: when sharded, ``d`` (the shard
    group ``shard`` under HSDP), else 1.

    >>> shard_degree("gradients", 2, 8), shard_degree("weights", 2, 8), shard_degree("weights", 3, 8, shard=4)
    (8, 1, 4)
    """
    if state not in STATES:
        raise InputError(f"state must be one of {', '.join(STATES)}, got {state!r}", "state")
    if zero not in (0, 1, 2, 3) or isinstance(zero, bool):
        raise InputError(f"zero must be a ZeRO stage 0, 1, 2 or 3, got {zero!r}", "zero")
    dims = positive_dims(d=d, **({} if shard is None else {"shard": shard}))
    if shard is not None:
        divides(dims, "shard", "d", "HSDP shards each copy over a group of the data-parallel ranks")   # 16 of 8 ranks
    d = dims["d"]
    first = {"weights": 3, "gradients": 2, "optimizer": 1}[state]
    sharded = zero >= first or (state == "optimizer" and distributed_optimizer)
    if not sharded:
        return 1
    return d if shard is None else shard


def data_parallel_collectives(parameters, weight_bytes, grad_bytes, d, zero, distributed_optimizer,
                              micro_batches, stride, conventions, shard=None,
                              reshard_after_forward=True) -> list[Collective]:
    """The data-parallel collectives of one step over ``d`` replicas ``stride`` ranks apart
    (ZeRO-3 over a ``shard`` group: ``fsdp_collectives``)."""
    def dp(kind, nbytes, pass_, repeats=1):
        return collective(kind, parameters, nbytes, d, pass_, conventions, repeats=repeats, stride=stride)
    if zero == 3:
        return fsdp_collectives(parameters, weight_bytes, grad_bytes, d, d if shard is None else shard,
                                micro_batches, stride, conventions, reshard_after_forward)
    if not (zero >= 1 or distributed_optimizer):
        return dp("allreduce", grad_bytes, "bwd")              # DDP: once per step
    # ZeRO-2 keeps only a gradient shard, so it reduce-scatters every micro-batch
    out = dp("reducescatter", grad_bytes, "bwd", repeats=micro_batches if zero >= 2 else 1)
    return out + dp("allgather", weight_bytes, "bwd")           # updated shards gathered after the step


def fsdp_collectives(parameters, weight_bytes, grad_bytes, d, shard, micro_batches, stride, conventions,
                     reshard_after_forward=True) -> list[Collective]:
    """ZeRO-3 / FSDP over shard groups of ``shard`` ranks (``stride`` apart), replicated over
    ``d/shard`` groups (HSDP; ``shard = d``: plain ZeRO-3), per micro-batch: the ``parameters``
    gathered in forward (and backward, unless ``reshard_after_forward`` is off), their gradients
    reduce-scattered in the group, then each rank's gradient shard, ``parameters/shard``,
    all-reduced across the replicas, ``shard stride`` ranks apart (module docstring)."""
    d, shard = sympify(d), sympify(shard)
    def within(kind, nbytes, pass_, repeats):
        return collective(kind, parameters, nbytes, shard, pass_, conventions, repeats=repeats, stride=stride)
    out = within("reducescatter", grad_bytes, "bwd", micro_batches) + within("allgather", weight_bytes, "fwd", micro_batches)
    if reshard_after_forward:                      # freed after forward, so gathered again for backward
        out += within("allgather", weight_bytes, "bwd", micro_batches)
    return out + collective("allreduce", parameters / shard, grad_bytes, d / shard, "bwd", conventions,
                            repeats=micro_batches, stride=stride * shard)


SIGN_BYTES = Rational(1, 8)
"""Bytes of one element sent as its sign: eight to a byte (``cupy.packbits``)."""


def compressed_exchange(parameters, d, stride, conventions) -> list[Collective]:
    """A compressed optimizer's momentum exchange over ``d`` ranks ``stride`` apart, once a step
    in the optimizer step (DeepSpeed's ``NcclBackend.compressed_allreduce``, after its warm-up:
    ``models.optimizers``), the momentum of ``parameters`` elements:

    ========== ======================= ==================================================
    collective tensor                  what moves
    ========== ======================= ==================================================
    alltoall   ``parameters`` signs    each rank's signs, chunk ``j`` to rank ``j``
    allgather  ``d`` fp32              each rank's scale
    allgather  ``parameters`` signs    each rank's averaged chunk, its signs, to all
    allgather  ``d`` fp32              each averaged chunk's scale
    ========== ======================= ==================================================

    The signs are ``SIGN_BYTES`` each, so a rank sends ``2 (d - 1)/d x parameters / 8`` bytes
    and the scales: a ring all-reduce of the same elements at one bit.  Pass ``"bwd"`` (it
    follows the backward; no overlap hides it: ``timing.step`` counts it whole).

    >>> from symbolic_cost.conventions import DEFAULT
    >>> [(c.kind, c.volume) for c in compressed_exchange(1024, 4, 1, DEFAULT)]
    [('alltoall', 96), ('allgather', 12), ('allgather', 96), ('allgather', 12)]
    """
    def one(kind, elements, nbytes):
        return collective(kind, elements, nbytes, d, "bwd", conventions, stride=stride)
    return (one("alltoall", parameters, SIGN_BYTES) + one("allgather", d, 4)
            + one("allgather", parameters, SIGN_BYTES) + one("allgather", d, 4))
