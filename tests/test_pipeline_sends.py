"""The stage sends of a pipeline: the link they run on, and what the interleaved schedule hides.

The link is checked against a placement written here from Megatron-Core's rank order (tensor,
context, data, then pipeline: rank ``r`` of stage ``s`` is ``s x m1 cp d + r``), hosts of
``nvlink_size`` consecutive ranks, and the rule that every boundary sends at once, so that the
slowest boundary paces the step: one boundary between two hosts puts the sends on the network.
"""

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.models.training import Overlap
from symbolic_cost.timing.hardware import calibrated, comm_time
from symbolic_cost.timing.step import step_time_breakdown


def crossing_boundaries(m1, cp, d, p, host):
    """Stage boundaries ``s -> s + 1`` of which some pair of partner ranks sits on two hosts."""
    per_stage = m1 * cp * d
    return [s for s in range(p - 1)
            if any((s * per_stage + r) // host != ((s + 1) * per_stage + r) // host for r in range(per_stage))]


@pytest.mark.parametrize("m1, d, p", [(4, 1, 16), (2, 1, 4), (4, 2, 2), (8, 1, 4), (1, 1, 8), (1, 1, 16), (2, 2, 8), (1, 4, 2)])
def test_the_sends_run_on_the_network_where_one_boundary_crosses_hosts(m1, d, p):
    system = calibrated("h100")
    t = Training(b=1, l=1024, m1=m1, s1=m1, d=d, p=p, micro_batches=2 * p)
    sends = [c for dim, c in model_cost(preset("llama-2-7b"), t).collectives if dim == "pipeline"]
    link = "ib" if crossing_boundaries(m1, 1, d, p, system.nvlink_size) else "nvlink"
    assert sends and all(comm_time(c, system) == comm_time(c, system, link=link) for c in sends)


def test_the_placement_crosses_hosts_as_counted_by_hand():
    # Llama-3-70B's m1=4 over 16 stages on 8-GPU hosts: stages 0-1 on host 0, 2-3 on host 1, ...:
    # the boundaries 1->2, 3->4, ..., 13->14 cross, seven of fifteen
    assert crossing_boundaries(4, 1, 1, 16, 8) == [1, 3, 5, 7, 9, 11, 13]
    assert crossing_boundaries(2, 1, 1, 4, 8) == []


def _interleaved(overlap):
    return Training(b=1, l=2048, m1=2, s1=2, p=4, micro_batches=8, schedule="interleaved", virtual_stages=2,
                    overlap=overlap)


def test_the_interleaved_schedule_hides_its_sends_behind_compute():
    system, arch = calibrated("h100"), preset("llama-2-7b")
    exposed = step_time_breakdown(model_cost(arch, _interleaved(Overlap(pipeline=False))), system)
    hidden = step_time_breakdown(model_cost(arch, _interleaved(Overlap())), system)
    sends = sum(comm_time(c, system) for dim, c in model_cost(arch, _interleaved(Overlap())).collectives
                if dim == "pipeline")
    assert exposed["pipeline_comm"] == sends > 0
    assert 0 < sends < hidden["compute"] and hidden["pipeline_comm"] == 0     # all of it behind the compute
    assert {k: v for k, v in hidden.items() if k not in ("pipeline_comm", "total")} == \
        {k: v for k, v in exposed.items() if k not in ("pipeline_comm", "total")}


def test_one_f_one_b_never_overlaps_its_sends():
    # Megatron-LM turns overlap_p2p_comm off outside the interleaved schedule
    system, arch = calibrated("h100"), preset("llama-2-7b")
    t = Training(b=1, l=2048, m1=2, s1=2, p=4, micro_batches=8)
    sends = sum(comm_time(c, system) for dim, c in model_cost(arch, t).collectives if dim == "pipeline")
    assert step_time_breakdown(model_cost(arch, t), system)["pipeline_comm"] == sends > 0


def test_no_p2p_outside_the_interleaved_schedule_is_refused(capsys):
    code = main(["summary", "--preset", "llama-2-7b", "--set", "b=1", "l=2048", "p=4", "n_micro=8",
                 "--system", "h100", "--overlap", "no-p2p"])
    assert code == 2 and "only the interleaved schedule" in capsys.readouterr().err


@pytest.mark.parametrize("chunks, off", [("--num-layers-per-virtual-pipeline-stage 2", False), ("", True)])
def test_megatron_scripts_turn_the_overlap_off_by_its_option(chunks, off):
    # the option counts only with virtual stages: Megatron-LM turns the overlap off without them
    from symbolic_cost.models.launch_script import read_launch
    from symbolic_cost.models.megatron_args import megatron_setup
    words = ("torchrun --nproc_per_node 2 pretrain_gpt.py --num-layers 8 --hidden-size 1024 "
             "--num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 "
             f"--global-batch-size 16 --pipeline-model-parallel-size 2 {chunks} --bf16 --vocab-size 1000 "
             "--tokenizer-type NullTokenizer")
    on = megatron_setup(read_launch(words, "x"), "x")
    given = megatron_setup(read_launch(words + " --no-overlap-p2p-communication", "x"), "x")
    assert on.policy["overlap"].pipeline and given.policy["overlap"].pipeline == off


def test_bridge_overlaps_by_its_comm_overlap_section():
    from symbolic_cost.models.megatron_bridge import overlap_p2p_comm
    from symbolic_cost.models.megatron_bridge_keys import Container
    # CommOverlapConfig.setup turns it on under virtual stages unless the section says otherwise;
    # without the section the model's config keeps Megatron-Core's default, off
    assert overlap_p2p_comm(Container({"comm_overlap": {"tp_comm_overlap": False}, "model": {}}, "x"))
    assert overlap_p2p_comm(Container({"comm_overlap": {}, "model": {}}, "x"))
    assert not overlap_p2p_comm(Container({"comm_overlap": {"overlap_p2p_comm": False}, "model": {}}, "x"))
    assert not overlap_p2p_comm(Container({"model": {}}, "x"))
    assert overlap_p2p_comm(Container({"model": {"overlap_p2p_comm": True}}, "x"))


def test_a_no_p2p_word_round_trips():
    assert Overlap.of_words(Overlap(pipeline=False, grad_reduce=True).words()) == \
        Overlap(pipeline=False, grad_reduce=True)
    with pytest.raises(InputError, match="pipeline"):
        Overlap(pipeline="yes")


@pytest.mark.parametrize("m1, p", [(4, 4), (2, 8), (8, 2), (1, 8), (8, 4), (16, 2)])
def test_a_served_requests_sends_each_take_the_link_of_their_boundary(m1, p):
    """Serving sends the hidden states through the stages one after another, so each boundary
    pays its own link: TP 4 over 4 stages on 8-GPU hosts sends twice on NVLink and once over the
    network (the placement above, one stage of m1 ranks after another)."""
    from dataclasses import replace as replaced
    from symbolic_cost.inference import Serving
    from symbolic_cost.inference.phases import decode
    system = calibrated("h100")
    sends = decode(preset("llama-3-70b"), Serving(b=1, l_in=100, l_out=10, m1=m1, p=p)).sends
    crossing = len(crossing_boundaries(m1, 1, 1, p, system.nvlink_size))
    one = replaced(sends[0], repeats=1, volume=sends[0].volume / (p - 1), chain=False)
    expected = crossing * comm_time(one, system, link="ib") + (p - 1 - crossing) * comm_time(one, system, link="nvlink")
    assert len(sends) == 1 and comm_time(sends[0], system) == expected


@pytest.mark.parametrize("schedule, v, sends", [("1f1b", 1, 3 * 8), ("interleaved", 2, 7 * 8)])
def test_the_jobs_stage_sends_by_hand(capsys, schedule, v, sends):
    """Llama-3-70B, 8,192 tokens, TP 8 without sequence parallelism over 4 stages, 2 replicas, 8
    micro-batches: each send is 8,192 x 8,192 bf16 values (128 MiB) from each of the 16 devices of
    a stage; the chain of 4 stages (8 chunks interleaved) crosses 3 (7) boundaries a micro-batch."""
    import json
    from symbolic_cost.cli import main
    words = ["summary", "--preset", "llama-3-70b", "--set", "m1=8", "p=4", "d=2", "n_micro=8", "--system", "h100",
             "--json"] + (["--schedule", "interleaved", "--virtual-stages", "2"] if v > 1 else [])
    assert main(words) == 0
    sent = [c for c in json.loads(capsys.readouterr().out)["collectives"] if c["dimension"] == "pipeline"]
    assert [c["cluster_volume_bytes"] for c in sent] == [16 * sends * 8192 * 8192 * 2] * 2


def test_the_ends_collectives_run_on_their_stage_alone(capsys):
    """Llama-3-8B, 4,096 tokens, TP 2 with sequence parallelism, 2 replicas, 4 stages, 8 micro-batches:
    the embedding's reduce-scatter of 4,096 x 4,096 bf16 values (a rank sends half: 16 MiB) runs on
    the first stage's 4 devices only, 8 times: 512 MiB in the job, not 16 devices' 2 GiB."""
    import json
    from symbolic_cost.cli import main
    assert main(["summary", "--preset", "llama-3-8b", "--set", "b=1", "l=4096", "m1=2", "s1=2", "d=2", "p=4",
                 "n_micro=8", "--system", "h100", "--flash", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["collectives"][0]
    assert (first["dimension"], first["kind"], first["volume_bytes"]) == ("tensor", "reducescatter", 8 * 2**24)
    assert first["cluster_volume_bytes"] == 4 * 8 * 2**24
