"""1-bit Adam and 1-bit LAMB (DeepSpeed's ``deepspeed/runtime/fp16/onebit``) after their warm-up.

The exchange is simulated rank by rank from DeepSpeed's ``NcclBackend.compressed_allreduce``
(``deepspeed/runtime/comm/nccl.py``): each rank packs the signs of its error-compensated momentum
(``packbits``), sends chunk ``j`` to rank ``j`` (``all_to_all_single``), gathers every rank's scale
(``all_gather``), averages its chunk, packs that average's signs and gathers them and their scales
(``all_gather``; NCCL runs an all-gather as a ring, each rank forwarding ``d - 1`` blocks).  The
bytes each rank sends are counted from that simulation, not from ``parallel.zero``.  The state is
counted from the optimizer's own ``state`` dictionary (``onebit/adam.py``, ``onebit/lamb.py``)."""

from pathlib import Path

import numpy as np
import pytest
from sympy import Rational

from symbolic_cost.checks import InputError
from symbolic_cost.conventions import DEFAULT
from symbolic_cost.models import Training
from symbolic_cost.models.config import load, preset
from symbolic_cost.models.totals import model_cost
from symbolic_cost.models.training import Overlap
from symbolic_cost.parallel.zero import compressed_exchange
from symbolic_cost.timing.hardware import calibrated, comm_time
from symbolic_cost.timing.step import step_time_breakdown

HF_CONFIGS = Path(__file__).parent / "hf_configs"


def _simulated_sends(momenta: list) -> tuple[list[int], list]:
    """Bytes each rank sends in one ``compressed_allreduce`` of ``momenta`` (one array a rank,
    its length a multiple of ``8 d``), and each rank's averaged momentum."""
    d, n = len(momenta), momenta[0].size
    chunk = n // d
    sent = [0] * d
    packed = [np.packbits(m >= 0) for m in momenta]
    scales = [np.float32(np.linalg.norm(m) / np.sqrt(n)) for m in momenta]
    for i in range(d):                                  # all_to_all_single: chunk j of rank i to rank j
        sent[i] += sum(packed[i][j * chunk // 8:(j + 1) * chunk // 8].nbytes for j in range(d) if j != i)
    for i in range(d):                                  # all_gather of the scales, a ring
        sent[i] += (d - 1) * scales[i].nbytes
    averaged = []
    for j in range(d):                                  # rank j averages chunk j
        signs = [np.unpackbits(packed[i][j * chunk // 8:(j + 1) * chunk // 8]).astype(np.float32) * 2 - 1
                 for i in range(d)]
        averaged.append(sum(s * scales[i] for i, s in enumerate(signs)) / d)
    server_packed = [np.packbits(a >= 0) for a in averaged]
    server_scales = [np.float32(np.linalg.norm(a) / np.sqrt(chunk)) for a in averaged]
    for i in range(d):                                  # all_gather of the averaged chunks' signs and scales
        sent[i] += (d - 1) * (server_packed[i].nbytes + server_scales[i].nbytes)
    result = np.concatenate([(np.unpackbits(server_packed[j]).astype(np.float32) * 2 - 1) * server_scales[j]
                             for j in range(d)])
    return sent, [result] * d


@pytest.mark.parametrize("d, n", [(2, 64), (4, 1024), (8, 4096), (16, 8192)])
def test_the_exchange_sends_what_the_algorithm_sends(d, n):
    rng = np.random.default_rng(d)
    sent, results = _simulated_sends([rng.standard_normal(n).astype(np.float32) for _ in range(d)])
    assert len(set(sent)) == 1                          # every rank sends alike
    assert all(np.array_equal(r, results[0]) for r in results)
    ours = sum(c.volume for c in compressed_exchange(n, d, 1, DEFAULT))
    assert ours == sent[0]


def _cost(optimizer, **training):
    return model_cost(preset("gpt2"), Training(b=4, l=1024, d=8, precision="fp16", optimizer=optimizer, **training))


@pytest.mark.parametrize("optimizer, fp32_tensors", [
    ("onebit-adam", 2 + 1 + 1),      # exp_avg, exp_avg_sq; FP16_Optimizer's fp32 master; worker_error
    ("onebit-lamb", 3 + 1 + 1),      # and exp_avg_sq_fresh
])
def test_the_state_holds_the_error_feedback(optimizer, fp32_tensors):
    """fp32 tensors the size of the parameters, and ``server_error``, the ``1/d`` chunk a rank
    averages (``d = 8``)."""
    cost = _cost(optimizer)
    assert cost.optimizer_bytes == cost.parameters * (4 * fp32_tensors + Rational(4, 8))


def test_no_gradient_all_reduce_and_no_overlap_hides_the_exchange():
    system = calibrated("a100")
    adam, onebit = _cost("adam"), _cost("onebit-adam")
    assert [c.kind for dim, c in adam.collectives if dim == "data"] == ["allreduce"]
    assert not [c for dim, c in onebit.collectives if dim == "data"]
    exchange = [c for dim, c in onebit.collectives if dim == "optimizer"]
    assert [c.kind for c in exchange] == ["alltoall", "allgather", "allgather", "allgather"]
    alone = sum(comm_time(c, system, DEFAULT) for c in exchange)
    for overlap in (Overlap(), Overlap(grad_reduce=True, param_gather=True)):
        times = step_time_breakdown(_cost("onebit-adam", overlap=overlap), system)
        assert times["data_comm"] == alone


@pytest.mark.parametrize("training, rule", [
    (dict(zero=1), "not compatible with ZeRO"), (dict(zero=3), "not compatible with ZeRO"),
    (dict(distributed_optimizer=True), "not compatible with ZeRO"),
])
def test_a_sharded_optimizer_state_is_refused(training, rule):
    with pytest.raises(InputError, match=rule):
        Training(d=8, optimizer="onebit-adam", **training)


def test_routed_experts_are_refused():
    with pytest.raises(InputError, match="routed experts"):
        model_cost(load(HF_CONFIGS / "Mixtral-8x7B-v0.1.json"), Training(b=1, l=1024, d=8, optimizer="onebit-adam"))
