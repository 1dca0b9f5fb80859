"""FSDP / HSDP (``Training.shard``, ``reshard_after_forward``) against the step-by-step
simulation of ``tests/simulate_fsdp.py`` (who holds which chunk, what every rank sends in the
rings), and the rules' refusals."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import simulate_fsdp as sim
from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import from_config, preset
from symbolic_cost.models.peak import gather_bytes, step_timeline
from symbolic_cost.parallel import zero

LLAMA = dict(model_type="llama", hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=2,
             num_hidden_layers=3, vocab_size=64, max_position_embeddings=64, tie_word_embeddings=False)
"""A tiny Llama whose units (embedding 1,024, layers 2,592, norm + head 1,040 parameters)
divide by 8 ranks."""

UNITS = [1024, 2592, 2592, 2592, 1040]


def layouts():
    """``(d, shard)`` with ``shard`` dividing ``d``."""
    return st.sampled_from([1, 2, 4, 8]).flatmap(
        lambda d: st.tuples(st.just(d), st.sampled_from([s for s in (1, 2, 4, 8) if d % s == 0])))


def simulated(step: sim.Step, replicas: int) -> dict:
    """The simulated step as the library books it: (kind, pass) -> (bytes a rank sends, group,
    spacing of its ranks)."""
    spacing = lambda ranks: ranks[1] - ranks[0] if len(ranks) > 1 else 1   # noqa: E731
    groups = {"allreduce": step.groups["replica"]}
    return {key: (sent, len(groups.get(key[0], step.groups["shard"])), spacing(groups.get(key[0], step.groups["shard"])))
            for key, sent in step.sent.items() if sent}


def library(collectives) -> dict:
    return {(c.kind, c.pass_): (c.volume, c.group, c.stride) for c in collectives}


@settings(max_examples=25, deadline=None)
@given(layout=layouts(), n=st.integers(1, 3), reshard=st.booleans(),
       units=st.lists(st.integers(1, 3), min_size=1, max_size=4))
@example(layout=(8, 2), n=2, reshard=True, units=[1, 3, 2])
@example(layout=(4, 4), n=1, reshard=False, units=[2])
def test_collectives_are_the_simulated_ones(layout, n, reshard, units):
    d, shard = layout
    sizes = [8 * k for k in units]
    step = sim.hsdp_step(sizes, d, shard, n, reshard, es_w=2, es_g=4)
    lib = zero.data_parallel_collectives(sum(sizes), 2, 4, d, 3, False, n, 1, conv.DEFAULT, shard=shard,
                                         reshard_after_forward=reshard)
    assert library(lib) == simulated(step, d // shard)


@pytest.mark.parametrize("d, shard, n, reshard", [(8, 2, 2, True), (8, 4, 1, False), (4, 4, 3, True),
                                                  (8, 8, 1, False), (2, 1, 1, True)])
def test_model_is_the_simulated_step(d, shard, n, reshard):
    """``model_cost`` of the tiny Llama: its data collectives, its shards and its gathered
    layers are the simulation's with the model's units (``m1 = 1``: data ranks 1 apart)."""
    arch = from_config(dict(LLAMA))
    cost = model_cost(arch, Training(b=1, l=8, d=d, zero=3, shard=shard, micro_batches=n, precision="fp32",
                                     reshard_after_forward=reshard))
    step = sim.hsdp_step(UNITS, d, shard, n, reshard, es_w=4, es_g=4, counted=range(1, len(UNITS) - 1))
    assert cost.parameters == sum(UNITS)
    assert library(c for dim, c in cost.collectives if dim == "data") == simulated(step, d // shard)
    assert cost.weight_bytes == cost.gradient_bytes == 4 * step.held
    assert cost.optimizer_bytes == 8 * step.held                      # fp32 Adam: two moments
    assert gather_bytes(cost, kept=True) == 4 * step.peak_kept        # the layers gathered at once
    if reshard:      # two layers at any moment: the simulation's none after backward is below it
        assert gather_bytes(cost) == 4 * step.peak_kept > 4 * step.peak_freed == 0
    else:
        assert gather_bytes(cost) == 4 * step.peak_freed == 0


def test_hsdp_states_and_collectives_scale_with_the_shard_group():
    """GPT-2 on 64 ranks: HSDP 8 x 8 keeps 8 times FSDP's shard and adds the all-reduce of
    the gradient shard over the 8 replica groups, 8 ranks apart."""
    gpt2 = preset("gpt2")
    full = model_cost(gpt2, Training(b=1, l=1024, d=64, zero=3))
    hybrid = model_cost(gpt2, Training(b=1, l=1024, d=64, zero=3, shard=8))
    assert hybrid.weight_bytes == 8 * full.weight_bytes
    assert hybrid.optimizer_bytes == 8 * full.optimizer_bytes
    allreduce = [c for dim, c in hybrid.collectives if dim == "data" and c.kind == "allreduce"]
    assert [(c.elements, c.group, c.stride) for c in allreduce] == [(full.parameters / 8, 8, 8)]
    assert not [c for dim, c in full.collectives if dim == "data" and c.kind == "allreduce"]
    same = model_cost(gpt2, Training(b=1, l=1024, d=64, zero=3, shard=64))
    assert same.collectives == full.collectives and same.weight_bytes == full.weight_bytes


def test_reshard_after_forward_off_drops_the_backward_gather_and_holds_every_layer():
    arch = from_config(dict(LLAMA))
    on = model_cost(arch, Training(b=1, l=8, d=4, zero=3))
    off = model_cost(arch, Training(b=1, l=8, d=4, zero=3, reshard_after_forward=False))
    kinds = lambda cost: sorted((c.kind, c.pass_) for dim, c in cost.collectives if dim == "data")  # noqa: E731
    assert set(kinds(on)) - set(kinds(off)) == {("allgather", "bwd")}
    layer = 2592 * 2                                                   # bf16 bytes of one layer
    assert [gather_bytes(off, kept=True), gather_bytes(off)] == [3 * layer, 0]
    # the four moments while activations are kept (forward, loss, head, a recomputed layer's
    # backward) hold every layer, three against two; the last two none, against two
    assert [m.bytes - n.bytes for m, n in zip(step_timeline(off), step_timeline(on))] == \
        [layer, layer, layer, layer, -2 * layer, -2 * layer]


def test_context_parallel_ranks_join_the_shard_group():
    """torchtitan shards over ``dp_shard x cp``: HSDP 2 with CP 2 gathers over 4 ranks."""
    gpt2 = preset("gpt2")
    cost = model_cost(gpt2, Training(b=1, l=1024, d=4, cp=2, shard=2, zero=3, flash=True))
    groups = {c.kind: c.group for dim, c in cost.collectives if dim == "data"}
    assert groups == {"allgather": 4, "reducescatter": 4, "allreduce": 2}


@pytest.mark.parametrize("kwargs, argument", [
    (dict(d=8, zero=3, shard=3), "shard"), (dict(d=8, zero=3, shard=16), "shard"),
    (dict(d=8, zero=1, shard=4), "shard"), (dict(d=8, zero=2, reshard_after_forward=False), "reshard_after_forward"),
    (dict(d=8, zero=3, shard=0), "shard")])
def test_refusals(kwargs, argument):
    with pytest.raises(InputError) as error:
        Training(**kwargs)
    assert error.value.argument == argument


def test_hsdp_with_an_expert_grid_that_does_not_fold_into_a_replica_group_is_refused():
    """HSDP with routed experts (``tests/test_moe_context.py``) needs ``ep etp | m1 cp shard``."""
    mixtral = from_config(dict(model_type="mixtral", sliding_window=None, max_position_embeddings=32768))
    with pytest.raises(InputError, match="m1 x cp x shard") as error:
        model_cost(mixtral, Training(b=1, l=4096, d=8, zero=3, shard=4, ep=8))
    assert error.value.argument == "ep x etp"


def test_summary_takes_the_shard_group(capsys):
    """``--shard`` and ``--no-reshard-after-forward`` reach ``Training``; a bad group is refused."""
    from symbolic_cost.cli import main
    assert main(["summary", "--preset", "gpt2", "--set", "d=8", "b=1", "l=1024", "--zero", "3", "--shard", "4",
                 "--no-reshard-after-forward", "--json"]) == 0
    printed = capsys.readouterr().out
    expected = model_cost(preset("gpt2"), Training(b=1, l=1024, d=8, zero=3, shard=4, reshard_after_forward=False))
    import json
    assert json.loads(printed)["weight_bytes"] == expected.weight_bytes
    assert main(["summary", "--preset", "gpt2", "--set", "d=8", "--zero", "3", "--shard", "3"]) != 0
    assert "shard must divide d" in capsys.readouterr().err
