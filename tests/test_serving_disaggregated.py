"""Disaggregated serving (issue 63): prefill and decode pools with the KV cache sent between them,
against schedules worked by hand, and the transfer's seconds against a hand count of Llama 3
8B's cache over an H100's InfiniBand link."""

import pytest

from serving_steps import NO_OVERHEAD, Constant
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.cost import Collective
from symbolic_cost.inference.disaggregated import Pools, kv_transfer_seconds, serve_disaggregated
from symbolic_cost.inference.load import Runtime, StepModel, sustained_rate
from symbolic_cost.inference.serving import Serving
from symbolic_cost.models.config import preset
from symbolic_cost.timing.hardware import calibrated, comm_time




def test_one_request_by_hand():
    """Prefill 10 ms (token 1), transfer 5 ms, then decode steps of 10 ms (tokens 2 and 3):
    TTFT 10 ms; gaps 15 ms (transfer and a step) and 10 ms; last token at 35 ms."""
    step = Constant(0.01)
    load = serve_disaggregated(step, 3, None, requests=1, runtime=NO_OVERHEAD, pools=Pools(1, 1), transfer=0.005)
    assert load.mean_ttft == pytest.approx(0.010)
    assert load.mean_itl == pytest.approx(0.0125)
    assert load.mean_e2e == pytest.approx(0.035)
    assert step.calls == [(1, 0, 0.0), (0, 1, 101), (0, 1, 102)]     # the decode context: prompt + first token on


def test_two_decode_instances_take_a_request_each():
    """Two requests at once, one prefill instance (both prompts in one 10 ms step), two decode
    instances: each decodes its request alone, as the one-request case."""
    step = Constant(0.01)
    load = serve_disaggregated(step, 3, None, requests=2, runtime=NO_OVERHEAD, pools=Pools(1, 2), transfer=0.005)
    assert load.mean_ttft == pytest.approx(0.010) and load.mean_e2e == pytest.approx(0.035)
    assert step.calls[0] == (2, 0, 0.0) and step.calls[1:] == [(0, 1, 101), (0, 1, 102)] * 2


def test_one_decode_instance_batches_both():
    """The same two requests on one decode instance: both decode in the same steps."""
    step = Constant(0.01)
    load = serve_disaggregated(step, 3, None, requests=2, runtime=NO_OVERHEAD, pools=Pools(1, 1), transfer=0.005)
    assert step.calls[1:] == [(0, 2, 101), (0, 2, 102)]
    assert load.request_throughput == pytest.approx(2 / 0.035)


def test_two_prefill_instances_split_the_prompts():
    """Two requests at once on two prefill instances with room for one sequence each: each
    prefills its own prompt in the first 10 ms (max_batch 1 would make one wait on one instance)."""
    step = Constant(0.01)
    runtime = Runtime(step_overhead=0, request_overhead=0, max_batch=1)
    load = serve_disaggregated(step, 2, None, requests=2, runtime=runtime, pools=Pools(2, 2), transfer=0.0)
    assert load.mean_ttft == pytest.approx(0.010)
    alone = serve_disaggregated(Constant(0.01), 2, None, requests=2, runtime=runtime, pools=Pools(1, 2),
                                transfer=0.0)
    assert alone.mean_ttft == pytest.approx((0.010 + 0.020) / 2)


def test_the_transfer_of_llama_3_8b_by_hand():
    """A 2,048-token prompt of Llama 3 8B holds 2 (K, V) x 32 layers x 8 heads x 128 x 2 bytes =
    131,072 bytes a token, 268,435,456 bytes in all, sent as one p2p over one H100's InfiniBand
    link: at least those bytes at the link's bandwidth, and priced as any p2p of them."""
    step = StepModel(preset("llama-3-8b"), Serving(b=1, l_in=2048, l_out=128), "h100")
    h100, size = calibrated("h100"), 268_435_456
    send = Collective("p2p", size, 1, 2, "fwd", volume=size)
    assert kv_transfer_seconds(step) == pytest.approx(float(comm_time(send, h100, link="ib")))
    assert kv_transfer_seconds(step) >= size / float(h100.ib_bandwidth)


def test_pools_are_read_and_refused_by_name():
    assert Pools.parse("2:6") == Pools(2, 6)
    for bad in ("2", "0:1", "a:b", "1:-1"):
        with pytest.raises(InputError, match="disaggregate"):
            Pools.parse(bad)


def test_the_rate_an_slo_allows_runs_on_the_disaggregated_simulation():
    """A one-token decode step of 10 ms never waits for a prompt once the pools are apart: the ITL
    is the decode step, and the sustained rate is the one its test meets."""
    step = Constant(0.01)

    def simulate(*args, **kwargs):
        return serve_disaggregated(*args, pools=Pools(1, 1), transfer=0.0, **kwargs)
    rate, at = sustained_rate(step, 4, (1.0, 0.0101), 90, requests=50, runtime=NO_OVERHEAD, simulate=simulate)
    assert rate > 0 and at.p90_itl <= 0.0101


def test_the_command_line_prints_the_pools(capsys):
    words = ["inference", "--preset", "llama-3-8b", "--system", "h100", "--set", "l_in=1024", "l_out=64",
             "--rate", "4", "--requests", "40", "--disaggregate", "1:2", "--json"]
    assert main(words) == 0
    import json
    load = json.loads(capsys.readouterr().out)["load"]
    assert load["pools"] == {"prefill": 1, "decode": 2, "devices": 3, "kv_transfer_s": load["pools"]["kv_transfer_s"]}
    assert load["pools"]["kv_transfer_s"] > 0
    assert main(["inference", "--preset", "llama-3-8b", "--disaggregate", "1:2"]) == 2
    assert "--disaggregate sets the --rate simulation" in capsys.readouterr().err
