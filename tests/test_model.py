"""Whole models: parameter counts derived by hand from the configs, properties, bad configs."""

import json

import pytest
from hypothesis import given, strategies as st
from sympy import simplify

from symbolic_cost import analysis
from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models.config import from_config, load, preset
from symbolic_cost.models import Architecture, Training, model_cost, stage_parameters


def _config(name):
    from importlib import resources
    return json.loads(resources.files("symbolic_cost.models").joinpath("configs", f"{name}.json").read_text())


def test_gpt2_parameters_by_hand():
    c = _config("gpt2")
    e, v, n, L = c["n_embd"], c["vocab_size"], c["n_positions"], c["n_layer"]
    layer = (2 * e) + (e * 3 * e + 3 * e) + (e * e + e) + (2 * e) + (e * 4 * e + 4 * e) + (4 * e * e + e)
    assert model_cost(preset("gpt2"), Training(b=1, l=8)).parameters == v * e + n * e + L * layer + 2 * e
    assert v * e + n * e + L * layer + 2 * e == 124_439_808          # as published for GPT-2 small


def test_bert_base_parameters_by_hand():
    c = _config("bert-base-uncased")
    e, f, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    embeddings = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * e + 2 * e
    layer = 4 * (e * e + e) + 2 * e + (e * f + f) + (f * e + e) + 2 * e
    pooler = e * e + e
    assert model_cost(preset("bert-base-uncased"), Training(b=1, l=8)).parameters == \
        embeddings + L * layer + pooler == 109_482_240                 # seed 004: 109.48 M


@pytest.mark.parametrize("name, published", [("llama-2-7b", 6_738_415_616), ("mistral-7b", 7_241_732_096),
                                             ("llama-3-8b", 8_030_261_248), ("llama-3-70b", 70_553_706_496)])
def test_llama_family_parameters_by_hand(name, published):
    c = _config(name)
    e, f, L, h = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"]
    kv_width = c["num_key_value_heads"] * (e // h)
    layer = e * e + 2 * e * kv_width + e * e + 3 * e * f + 2 * e       # q, k, v, o; gate, up, down; 2 RMS
    total = 2 * c["vocab_size"] * e + L * layer + e                    # untied embedding and head
    assert model_cost(preset(name), Training(b=1, l=8)).parameters == total == published


def test_parameters_do_not_depend_on_batch_or_sequence():
    arch = Architecture("x", S.n_layers, S.e, S.h, S.f, S.v, positions=1024)
    params = model_cost(arch, Training(b=S.b, l=S.l)).parameters
    assert not params.free_symbols & {S.b, S.l}


def test_tied_embeddings_count_once():
    tied = Architecture("x", S.n_layers, S.e, S.h, S.f, S.v)
    untied = Architecture("x", S.n_layers, S.e, S.h, S.f, S.v, tied=False)
    assert simplify(model_cost(untied).parameters - model_cost(tied).parameters - S.v * S.e) == 0


@given(d=st.integers(1, 64), name=st.sampled_from(["gpt2", "llama-2-7b", "bert-base-uncased"]),
       precision=st.sampled_from(["fp32", "fp16", "bf16"]))
def test_zero3_model_state_is_the_unsharded_state_over_d(d, name, precision):
    plain = model_cost(preset(name), Training(b=1, l=128, precision=precision))
    zero3 = model_cost(preset(name), Training(b=1, l=128, d=d, zero=3, precision=precision))
    state = lambda c: c.weight_bytes + c.gradient_bytes + c.optimizer_bytes  # noqa: E731
    assert state(zero3) * d == state(plain)
    assert zero3.activation_bytes == plain.activation_bytes


@given(p=st.integers(1, 6), name=st.sampled_from(["gpt2", "llama-2-7b", "mistral-7b"]))
def test_pipeline_stages_add_up_to_the_model(p, name):
    """Whole layers a stage: a ``p`` that does not divide the depth (gpt2's 12 by 5, Llama's 32
    by 3, 5, 6) is refused by ``stage_parameters`` as by ``model_cost``, with the same error."""
    arch = preset(name)
    if arch.n_layers % p:
        refusals = []
        for call in (lambda: stage_parameters(arch, p, 0), lambda: model_cost(arch, Training(b=1, l=8, p=p))):
            with pytest.raises(InputError) as raised:
                call()
            refusals.append(str(raised.value))
        assert refusals[0] == refusals[1] and refusals[0].startswith(f"p must divide n_layers (got p={p},")
        return
    stages = sum(stage_parameters(arch, p, i) for i in range(p))
    copy = arch.vocab * arch.e if (p > 1 and arch.tied) else 0          # the last stage's tied copy
    assert stages == model_cost(arch, Training(b=1, l=8)).parameters + copy


def test_model_flops_leading_order_by_hand():
    """2mnk, f = 4e, tied head: per token forward 24 L e^2 + 4 L l e + 2 e v (Kaplan et al. 2020,
    plus the attention scores), backward twice that."""
    arch = Architecture("x", S.n_layers, S.e, S.h, 4 * S.e, S.v, rotary=True)
    cost = model_cost(arch, Training(b=1, l=S.l), conv.DEFAULT.but(matmul_flops="2mnk"))
    per_token = cost.model_flops_fwd / S.l
    assert simplify(analysis.leading_terms(per_token, [S.e, S.l, S.v])
                    - (24 * S.n_layers * S.e**2 + 4 * S.n_layers * S.l * S.e + 2 * S.e * S.v)) == 0


def test_zero_stages_shard_what_they_say():
    base = Training(b=1, l=128, d=8)
    costs = {z: model_cost(preset("gpt2"), Training(b=1, l=128, d=8, zero=z)) for z in (0, 1, 2, 3)}
    assert costs[1].optimizer_bytes * 8 == costs[0].optimizer_bytes
    assert costs[1].gradient_bytes == costs[0].gradient_bytes
    assert costs[2].gradient_bytes * 8 == costs[0].gradient_bytes
    assert costs[3].weight_bytes * 8 == costs[0].weight_bytes == model_cost(preset("gpt2"), base).weight_bytes
    kinds = lambda z: [(c.kind, c.pass_) for dim, c in costs[z].collectives if dim == "data"]  # noqa: E731
    assert kinds(0) == [("allreduce", "bwd")]
    assert kinds(3) == [("reducescatter", "bwd"), ("allgather", "fwd"), ("allgather", "bwd")]


@pytest.mark.parametrize("config, message", [
    ({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "moe_layers": 4}, "unknown key 'moe_layers'"),
    ({"model_type": "gpt2", "n_embd": 768, "n_head": 10, "n_layer": 12, "vocab_size": 9, "n_positions": 8},
     "n_head=10 does not divide n_embd=768"),
    ({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 5,
      "num_hidden_layers": 2, "intermediate_size": 8, "vocab_size": 8}, "num_key_value_heads=5 does not divide"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 0,
      "intermediate_size": 8, "vocab_size": 8}, "num_hidden_layers must be a positive integer, got 0"),
    ({"model_type": "mamba"}, "model_type 'mamba' is not supported"),
    ({"model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 1, "vocab_size": 9, "n_positions": 8,
      "activation_function": "softmax"}, "activation_function must be one of"),
])
def test_bad_configs(config, message):
    with pytest.raises(ValueError) as error:
        from_config(config)
    assert message in str(error.value)


def test_summary_command_on_configs(tmp_path, capsys):
    for name in ("gpt2", "llama-2-7b"):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(_config(name)))
        assert main(["summary", "--hf-config", str(path), "--json", "--set", "d=8", "--zero", "1"]) == 0
        out = json.loads(capsys.readouterr().out)
        for key in ("parameters", "flops_fwd", "flops_bwd", "weight_bytes", "gradient_bytes",
                    "optimizer_bytes", "activation_bytes", "collectives"):
            assert key in out
        assert out["parameters"] == model_cost(load(path)).parameters
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["summary", "--hf-config", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["summary", "--preset", "gpt5"]) == 2


def test_cluster_volume_by_hand():
    """A 2-stage pipeline on 2 x 4 devices: one boundary, one send each way per micro-batch,
    replicated over m1 = 2 and d = 2: 4 x 2 x n x (b l e / s1 x 2 bytes)."""
    from symbolic_cost.models import cluster_volume
    t = Training(b=1, l=128, m1=2, d=2, p=2, micro_batches=3)
    cost = model_cost(preset("gpt2"), t)
    pipe = [c for dim, c in cost.collectives if dim == "pipeline"]
    boundary = 1 * 128 * 768 * 2
    assert [c.volume for c in pipe] == [3 * boundary, 3 * boundary]
    assert sum(cluster_volume(cost, "pipeline", c) for c in pipe) == 2 * 2 * 2 * 3 * boundary


def test_step_time_sums_every_layer_group():
    """A model whose layers differ (half of them sliding-window, as Gemma 2) spends, per
    micro-batch, each group's time times its count: replacing the windowed group by full
    layers changes the compute by (number windowed) x (full layer - windowed layer)."""
    from dataclasses import replace

    from symbolic_cost.timing.hardware import times
    from symbolic_cost.timing.step import step_time_breakdown
    base = Architecture("alt", 4, 256, 4, 1024, 1000, window=64, windowed_layers=2)
    full = replace(base, window=None, windowed_layers=None)
    t = Training(b=1, l=512)
    alt, dense = model_cost(base, t), model_cost(full, t)
    (windowed, two), (whole, _) = alt.stack[1], alt.stack[2]
    assert two == 2 and windowed.rows != whole.rows
    seconds = lambda blk: sum(times(r, "h100")["t_fwd"] + times(r, "h100")["t_bwd"] for r in blk)  # noqa: E731
    difference = step_time_breakdown(dense, "h100")["compute"] - step_time_breakdown(alt, "h100")["compute"]
    assert difference == 2 * (seconds(whole) - seconds(windowed)) != 0


@given(l=st.integers(1, 300), chunk=st.integers(1, 64))
def test_chunked_attention_pairs_are_counted_query_by_query(l, chunk):
    """Causal attention within aligned chunks of ``c`` (Llama 4): query ``t`` sees the ``t mod c + 1``
    keys of its own chunk; the library's mean keys per query times ``l`` is that sum."""
    from symbolic_cost.ops.matmul import Chunk, scored_keys
    counted = scored_keys(l, l, True, conv.DEFAULT.but(causal_flops="exact"), Chunk(chunk)) * l
    assert counted == sum(t % chunk + 1 for t in range(l))


def test_layers_without_rotary_positions_are_a_group_of_their_own():
    """``rope_pattern`` (SmolLM3, EXAONE 4, Llama 4): the layers that do not rotate form their own
    group, without a ``rotary`` row, and count as many layers as the pattern says."""
    arch = Architecture("toy", 4, 64, 4, 256, 100, rotary=True, rope_pattern=(True, True, False, True))
    groups = model_cost(arch, Training(b=1, l=16)).blocks[1:-1]
    assert [int(n) for _, n in groups] == [3, 1]
    assert ["rotary" in block.names for block, _ in groups] == [True, False]


def test_a_model_too_deep_to_enumerate_keeps_its_closed_form():
    """A trillion layers built directly (not from a config.json, whose readers refuse more than a
    million): one kind of layer, counted in closed form, never enumerated layer by layer."""
    deep = model_cost(Architecture("toy", 10**12, 64, 4, 256, 100), Training(b=1, l=8)).parameters
    # by hand, per layer: QKV 64 x 192 + 192, output 64 x 64 + 64, fc1 64 x 256 + 256,
    # fc2 256 x 64 + 64, two LayerNorms 2 x 128; once: the word table 100 x 64, the final norm 128
    layer = 64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64 + 2 * 128
    assert deep == 10**12 * layer + 100 * 64 + 128


def test_layer_kinds_share_their_blocks_and_equal_a_build_that_remembers_none(monkeypatch):
    """DeepSeek-V3's dense and MoE layers run the same latent attention, and its MTP module runs
    one more MoE layer (the last one's): the stack builds each block once, so the layers' attention
    rows and the module's layer rows are the very objects of the layer groups.  A stack built with
    nothing remembered (every block built anew) has rows equal to these, field by field."""
    from pathlib import Path
    from symbolic_cost.blocks import layer as layer_module
    from symbolic_cost.models import stack as stack_module
    arch = load(str(Path(__file__).parent / "hf_configs" / "DeepSeek-V3.json"))
    training = Training(b=S.b, l=S.l, m1=S.m1, s1=S.s1, ep=S.ep, flash=True, mtp=True)
    stack_module._STACKS.clear()
    layer_module._BLOCKS.clear()     # a table the tests before left nearly full would start again mid-build
    shared = model_cost(arch, training).stack
    (dense, _), (routed, _), (head, _) = shared[1], shared[2], shared[-1]
    attention = dense.names.index("residual") + 1                  # the rows up to the first residual add
    # its config's q_lora_rank and kv_lora_rank: queries and keys/values through low-rank projections
    assert {"q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "flash_attention"} <= set(dense.names[:attention])
    assert all(a is b for a, b in zip(dense.rows[:attention], routed.rows[:attention]))
    assert dense.rows[attention] is not routed.rows[attention]
    start = next(i for i, row in enumerate(head.rows) if row is routed.rows[0])      # after the module's eh_proj
    assert all(a is b for a, b in zip(head.rows[start:start + len(routed.rows)], routed.rows))
    stack_module._STACKS.clear()
    monkeypatch.setattr(layer_module, "_built", lambda builder, *args, **keywords: builder(*args, **keywords))
    anew = model_cost(arch, training).stack
    assert [[row.name for row in blk] for blk, _ in anew] == [[row.name for row in blk] for blk, _ in shared]
    assert all(new == old and all(n is not o for n, o in zip(new.rows, old.rows))
               for (new, _), (old, _) in zip(anew[1:-1], shared[1:-1]))
    stack_module._STACKS.clear()


@pytest.mark.parametrize("fields, named", [
    (dict(num_labels=3), "num_labels=3 applies to the sequence classifier"),
    (dict(classifier="dense"), "classifier='dense' applies to the sequence classifier"),
    (dict(lm_head=False, head_bias=True), "head_bias=True applies to the LM head"),
])
def test_a_head_setting_without_its_head_is_refused(fields, named):
    """A decoder with its LM head has no classifier, and one without an LM head no bias on it: the
    setting would change no count."""
    from dataclasses import replace
    with pytest.raises(InputError, match=named):
        replace(preset("gpt2"), **fields)
    assert replace(preset("gpt2"), lm_head=False, pooler=False, task="classification", num_labels=3).num_labels == 3
