"""The model layer's pipeline, ZeRO and recomputation expressions against step-by-step
simulations (``tests/simulate.py``) over hypothesis-drawn layouts.

Compared: ``parallel.pipeline`` (``GPIPE``, ``ONE_F_ONE_B``, ``interleaved(v)``: ``in_flight(p, n,
rank)``, ``bubble(p, n)``; ``per_stage``), ``parallel.zero`` (``shard_degree``,
``data_parallel_collectives``), and ``model_cost`` (activation, weight, gradient and optimizer
bytes, ``rank_activation_bytes``, the bubble, ``flops_recompute``, and the tensor, pipeline and
data collectives with their repeats and volumes).  Activations are compared through differences
(one recomputation policy against another, one convention against another) so that the ends of
the model cancel and only what the simulations describe remains.

Every disagreement the simulations found has been resolved in the library (no xfail remains).
"""

from fractions import Fraction

from hypothesis import assume, example, given, strategies as st

import reference as ref
import simulate as sim
from symbolic_cost import conventions as conv
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.models.ranks import rank_activation_bytes
from symbolic_cost.parallel import pipeline, zero

GPT2 = 124_439_808                      # GPT-2 small's published parameter count
PAPER_BYTES = {"fp32": (4, 4, 8), "fp16": (2, 2, 12), "bf16": (2, 2, 12)}
"""Bytes per parameter of weights, gradients and Adam state (Rajbhandari et al. 2020, section 3.1:
fp16 weights and gradients, an fp32 master copy, momentum and variance, K = 12)."""
MEGATRON = conv.DEFAULT.but(mlp_activation_dropout=False, sequence_parallel_inputs="shard")
CONVENTIONS = st.sampled_from([conv.DEFAULT, MEGATRON, MEGATRON.but(layer_norm_keeps_stats=False),
                               conv.DEFAULT.but(sequence_parallel_inputs="shard")])
SCHEDULES = {"gpipe": lambda v: pipeline.GPIPE, "1f1b": lambda v: pipeline.ONE_F_ONE_B,
             "interleaved": pipeline.interleaved}


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


# ----------------------------------------------------------------------------- pipelines

def test_simulated_1f1b_by_hand():
    """p = 2, n = 2: rank 0 runs F0 F1 B0 B1 and waits for rank 1's B0; six slots, two idle."""
    t = sim.simulate_pipeline("1f1b", 2, 2)
    F, B = sim.F, sim.B
    assert t.starts == {(F, 0, 0): 0, (F, 1, 0): 1, (F, 0, 1): 1, (B, 0, 1): 2, (B, 0, 0): 3,
                        (F, 1, 1): 3, (B, 1, 1): 4, (B, 1, 0): 5}
    assert (t.length, t.idle, t.peak, t.sends) == (6, [2, 2], [2, 1], [(2, 0), (0, 2)])


@st.composite
def schedules(draw, max_p=6):
    """A schedule name, ``p``, ``n`` (a multiple of ``p`` when interleaved) and ``v``."""
    name = draw(st.sampled_from(sorted(SCHEDULES)))
    p = draw(st.integers(1, max_p))
    if name == "interleaved":
        return name, p, p * draw(st.integers(1, 4)), draw(st.integers(2, 4))
    return name, p, draw(st.integers(1, 12)), 1


@given(case=schedules(), backward=st.sampled_from([1, 2]))
@example(case=("1f1b", 4, 8, 1), backward=1)
@example(case=("1f1b", 2, 5, 1), backward=2)
@example(case=("1f1b", 5, 2, 1), backward=1)
@example(case=("interleaved", 4, 8, 2), backward=1)
def test_schedules_are_the_simulated_timelines(case, backward):
    """Per rank: the peak activations held (in micro-batches through the rank's layers, model
    chunks / v) and the idle share of the step (forward one slot, backward one or two)."""
    name, p, n, v = case
    t = sim.simulate_pipeline(name, p, n, v, backward=backward)
    schedule = SCHEDULES[name](v)
    for rank in range(p):
        assert schedule.in_flight(p, n, rank) == Fraction(t.peak[rank], v), rank
        assert schedule.bubble(p, n) == t.bubble(rank), rank
    if name == "1f1b":
        assert pipeline.in_flight(p, n) == t.peak[0]
        assert pipeline.bubble(p, n) == t.bubble(0)


@given(case=schedules())
def test_simulated_schedules_do_the_same_work(case):
    """Every rank runs each forward and backward of its chunks once, so the busy time does not
    depend on the schedule; a stage starts no earlier than the one before it."""
    name, p, n, v = case
    t = sim.simulate_pipeline(name, p, n, v, backward=2)
    assert t.busy == [3 * n * v] * p
    assert all(t.starts[(sim.F, 0, s)] >= s for s in range(p * v))


@given(p=st.integers(2, 6), rounds=st.integers(2, 4), v=st.integers(2, 4))
def test_simulated_interleaving_is_korthikanti_factor(p, rounds, v):
    """Korthikanti et al. 2022, section 4.2.3: interleaved, the first stage holds the activations of
    ``L (1 + (p - 1)/(p v))`` layers; its idle share is ``(p - 1)/(v n + p - 1)`` (Narayanan et al.
    2021: a bubble of ``(p - 1)/(v n)`` of the work)."""
    n = p * rounds
    t = sim.simulate_pipeline("interleaved", p, n, v)
    assert t.peak[0] * Fraction(1, p * v) == 1 + Fraction(p - 1, p * v)
    assert t.bubble(0) == Fraction(p - 1, v * n) / (1 + Fraction(p - 1, v * n))


@given(p=st.integers(1, 6), k=st.integers(1, 4), first=st.integers(0, 50), last=st.integers(0, 50),
       per_layer=st.integers(0, 20), copy=st.integers(0, 30))
def test_per_stage_is_the_busiest_stage(p, k, first, last, per_layer, copy):
    loads = sim.stage_loads(p, p * k, first, last, per_layer, copy)
    assert pipeline.per_stage(p, first, last, p * k * per_layer, copy) == max(loads)


def _arch(n_layers, e, h, f, **kw):
    return Architecture("sim", n_layers, e, h, f, 64, positions=64, **kw)


def _pipelined(case, k, heads, m1, recompute, conventions=conv.DEFAULT):
    name, p, n, v = case
    arch = _arch(p * v * k, 2 * heads, heads, 4 * m1)
    return model_cost(arch, Training(b=2, l=8, m1=m1, p=p, micro_batches=n, recompute=recompute,
                                     schedule=name, virtual_stages=v), conventions)


@given(case=schedules(max_p=4), k=st.integers(1, 2), heads=st.sampled_from([1, 2, 4]), m1=st.sampled_from([1, 2]))
@example(case=("1f1b", 2, 3, 1), k=1, heads=2, m1=1)
@example(case=("1f1b", 3, 8, 1), k=1, heads=2, m1=2)
@example(case=("interleaved", 2, 4, 2), k=1, heads=2, m1=1)
def test_model_activations_hold_the_simulated_peak(case, k, heads, m1):
    """Full recomputation frees all but each layer's input: on each rank the saving is its peak
    micro-batches (chunks / v) x its ``L/p`` layers x what one layer no longer keeps.  The bubble is the simulated idle share, and each rank sends
    one activation forward and one gradient back per micro-batch and chunk (the busiest rank's
    count is booked)."""
    name, p, n, v = case
    assume(v == 1 or p > 1)         # virtual stages without a pipeline: refused (nothing to interleave)
    m1 = m1 if heads % m1 == 0 else 1
    costs = {rc: _pipelined(case, k, heads, m1, rc) for rc in ("none", "full")}
    ops, size = _layer(costs["none"], 2, 8, 2 * heads, heads, 4 * m1, m1, 1)
    saved = sim.kept(ops, size, []) - sim.kept(ops, size, sim.policy(ops, "full"))
    t = sim.simulate_pipeline(name, p, n, v)
    for rank in range(p):
        difference = rank_activation_bytes(costs["none"], rank) - rank_activation_bytes(costs["full"], rank)
        assert difference == t.peak[rank] * k * saved, rank      # chunks x k layers each
    for cost in costs.values():                      # the model's activations: the busiest rank's
        assert cost.activation_bytes == max(rank_activation_bytes(cost, rank) for rank in range(p))
    assert costs["none"].bubble == t.bubble(0)
    sends = [c.repeats for dim, c in costs["none"].collectives if dim == "pipeline"]
    assert sends == ([max(s[0] for s in t.sends), max(s[1] for s in t.sends)] if p > 1 else [])


def _kept_outputs(case):
    name, p, n, v = case
    t = sim.simulate_pipeline(name, p, n, v)
    cv = conv.DEFAULT.but(deallocate_pipeline_outputs=False)
    for rank in range(p):
        extra = rank_activation_bytes(_pipelined(case, 1, 2, 1, "none", cv), rank) - \
            rank_activation_bytes(_pipelined(case, 1, 2, 1, "none"), rank)
        assert extra == t.sent[rank] * 2 * 8 * 4 * 2, rank        # b l e x 2 bytes per output


@given(case=schedules(max_p=4).filter(lambda c: c[0] != "interleaved"))
def test_outputs_kept_without_deallocation_are_the_simulated_ones(case):
    """Without output deallocation a rank keeps every output it sent until that micro-batch's
    backward comes back: its peak of sent outputs x ``b l e`` elements."""
    _kept_outputs(case)


@given(case=schedules(max_p=4).filter(lambda c: c[0] == "interleaved" and c[1] > 1))
def test_outputs_kept_without_deallocation_interleaved(case):
    _kept_outputs(case)


# ----------------------------------------------------------------------------- ZeRO

def _by_kind(comms):
    """Simulated collectives grouped as the library books them: (kind, pass) -> (count, tensor bytes,
    ring bytes); what runs after the last backward is booked in the backward pass."""
    out = {}
    for c in comms:
        key = (c.kind, "fwd" if c.when == "fwd" else "bwd")
        count, tensor, ring = out.get(key, (0, 0, 0))
        out[key] = (count + 1, c.elements * c.element_bytes, ring + c.sent)
    return out


@given(d=st.integers(1, 64), stage=st.integers(0, 3), dist=st.booleans(),
       precision=st.sampled_from(["fp32", "fp16", "bf16"]))
@example(d=4, stage=0, dist=True, precision="bf16")
@example(d=8, stage=3, dist=False, precision="fp32")
def test_zero_bytes_per_rank_are_the_simulated_shards(d, stage, dist, precision):
    cost = model_cost(preset("gpt2"), Training(b=1, l=8, d=d, zero=stage, distributed_optimizer=dist,
                                               precision=precision))
    per_rank, _ = sim.zero_step(GPT2, d, stage, dist, 1, PAPER_BYTES[precision])
    for state, field in (("weights", "weight_bytes"), ("gradients", "gradient_bytes"),
                         ("optimizer", "optimizer_bytes")):
        assert all(getattr(cost, field) == held for held in per_rank[state]), state
        assert zero.shard_degree(state, stage, d, dist) * per_rank[state][0] == GPT2 * \
            PAPER_BYTES[precision][sim.STATES.index(state)]


@given(d=st.integers(1, 12), stage=st.integers(0, 3), dist=st.booleans(), n=st.integers(1, 8),
       parameters=st.integers(1, 10**6))
@example(d=4, stage=3, dist=False, n=3, parameters=120)
@example(d=2, stage=2, dist=True, n=2, parameters=7)
def test_zero_collectives_are_the_simulated_ones(d, stage, dist, n, parameters):
    _, comms = sim.zero_step(parameters, d, stage, dist, n, (2, 4, 12))
    lib = zero.data_parallel_collectives(parameters, 2, 4, d, stage, dist, n, 1, conv.DEFAULT)
    expected = _by_kind(comms) if d > 1 else {}
    assert {(c.kind, c.pass_): (c.repeats, c.tensor_bytes, c.volume) for c in lib} == expected
    assert len(lib) == len(expected)


@given(d=st.integers(2, 16), stage=st.integers(0, 3), dist=st.booleans(), n=st.integers(1, 6))
@example(d=8, stage=3, dist=False, n=4)
def test_model_data_collectives_are_the_simulated_ones(d, stage, dist, n):
    cost = model_cost(preset("gpt2"), Training(b=1, l=8, d=d, zero=stage, distributed_optimizer=dist,
                                               micro_batches=n))
    _, comms = sim.zero_step(GPT2, d, stage, dist, n, PAPER_BYTES["bf16"])
    booked = {(c.kind, c.pass_): (c.repeats, c.tensor_bytes, c.volume) for dim, c in cost.collectives
              if dim == "data"}
    assert booked == _by_kind(comms)


# ----------------------------------------------------------------------------- recomputation

@st.composite
def layers(draw, sequence=True):
    """A small numeric layer layout: heads split by ``m1``, sequence shards ``s1 | m1``."""
    heads = draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
    m1 = draw(st.sampled_from(divisors(heads)))
    s1 = draw(st.sampled_from(divisors(m1))) if sequence else 1
    return dict(b=draw(st.integers(1, 3)), l=s1 * draw(st.integers(1, 4)), e=heads * draw(st.integers(1, 3)),
                h=heads, f=m1 * draw(st.integers(1, 6)), m1=m1, s1=s1)


def _layer(cost, b, l, e, h, f, m1, s1):
    """The simulated layer laid out as the conventions of ``cost``'s layer say."""
    cv = cost.layer.conventions
    return sim.gpt_layer(b, l, e, h, f, m1, s1, es=2, mask=1, dropouts=cost.architecture.dropouts,
                         act_dropout=cost.architecture.dropouts and cv.mlp_activation_dropout,
                         keep_gathered=cv.sequence_parallel_inputs == "gathered", ln_stats=cv.layer_norm_keeps_stats)


def _costs(x, recomputes, conventions=conv.DEFAULT, n_layers=1, p=1, n=1, **arch):
    arch = _arch(n_layers, x["e"], x["h"], x["f"], **arch)
    return {rc: model_cost(arch, Training(b=x["b"], l=x["l"], m1=x["m1"], s1=x["s1"], p=p, micro_batches=n,
                                          recompute=rc), conventions) for rc in recomputes}


@given(x=layers(), conventions=CONVENTIONS, dropouts=st.booleans())
@example(x=dict(b=1, l=4, e=8, h=2, f=8, m1=2, s1=1), conventions=conv.DEFAULT, dropouts=True)
@example(x=dict(b=1, l=4, e=8, h=2, f=4, m1=2, s1=2), conventions=MEGATRON, dropouts=True)
def test_kept_activations_are_the_simulated_live_tensors(x, conventions, dropouts):
    """One more layer adds what the simulated layer keeps, under each policy: everything;
    selective frees the attention core but keeps Q, K, V; full keeps the layer's input;
    activation frees fc2's input."""
    recomputes = ("none", "selective", "full", "activation")
    one, two = (_costs(x, recomputes, conventions, n_layers=L, dropouts=dropouts) for L in (1, 2))
    ops, size = _layer(one["none"], **x)
    assert sim.kept(ops, size, sim.policy(ops, "full")) == size["x"]
    for rc in recomputes:
        assert two[rc].activation_bytes - one[rc].activation_bytes == sim.kept(ops, size, sim.policy(ops, rc)), rc


@given(x=layers())
def test_activation_recomputation_with_dropout(x):
    after_act = conv.DEFAULT.but(mlp_activation_dropout=True)       # the LBNL layout's dpr1
    one, two = (_costs(x, ("activation",), after_act, n_layers=L) for L in (1, 2))
    assert "dpr1" in one["activation"].layer.names
    ops, size = _layer(one["activation"], **x)
    kept = two["activation"].activation_bytes - one["activation"].activation_bytes
    assert kept == sim.kept(ops, size, sim.policy(ops, "activation"))


@given(x=layers(), conventions=CONVENTIONS)
@example(x=dict(b=1, l=4, e=8, h=2, f=4, m1=2, s1=2), conventions=conv.DEFAULT)
def test_selective_saving_is_the_attention_core_less_qkv(x, conventions):
    """What selective recomputation saves per layer, whatever the rest of the layer keeps."""
    costs = _costs(x, ("none", "selective"), conventions)
    ops, size = _layer(costs["none"], **x)
    saving = sim.kept(ops, size, []) - sim.kept(ops, size, sim.policy(ops, "selective"))
    assert costs["none"].activation_bytes - costs["selective"].activation_bytes == saving


def _reference_rows(x, conventions):
    """Each operation's forward FLOPs and forward collective bytes, from tests/reference.py."""
    flags, args = ref.Flags(), (x["b"], x["l"], x["e"])
    rows = {**ref.attention(*args, x["h"], x["m1"], x["s1"], 2, 1, flags),
            **ref.mlp(*args, x["f"], x["m1"], x["s1"], 2, 1, flags)}
    if conventions.sequence_parallel_inputs == "shard":   # the input gathered again is a backward collective
        assert all(c[0] == "bwd" for name in ("qkv_proj", "fc1") for c in rows[name]["comms"][1:])
    flops = {name: row["flops_fwd"] for name, row in rows.items()}
    comm = {name: sum(c[1] for c in row["comms"] if c[0] == "fwd") for name, row in rows.items()}
    return flops, comm


@given(x=layers(), p=st.sampled_from([1, 2]), n=st.integers(1, 4), k=st.integers(1, 2))
@example(x=dict(b=1, l=4, e=8, h=2, f=4, m1=2, s1=1), p=1, n=2, k=1)
def test_recomputation_redoes_the_simulated_work(x, p, n, k):
    """The extra forward FLOPs, and the forward collectives that run again, on the first stage:
    ``n`` micro-batches x its ``L/p`` layers x the recomputed operations."""
    recomputes = ("none", "selective", "full", "activation")
    costs = _costs(x, recomputes, n_layers=p * k, p=p, n=n)
    ops, _ = _layer(costs["none"], **x)
    flops, comm = _reference_rows(x, conv.DEFAULT)
    fwd = lambda c: sum(v.volume for dim, v in c.collectives if dim == "tensor" and v.pass_ == "fwd")  # noqa: E731
    for rc, cost in costs.items():
        segments = sim.policy(ops, rc)
        assert cost.flops_recompute == n * k * sim.redone(ops, segments, flops), rc
        assert fwd(cost) - fwd(costs["none"]) == n * k * sim.redone(ops, segments, comm), rc


@given(s=st.integers(1, 64), b=st.integers(1, 4), heads=st.sampled_from([1, 2, 4, 8]),
       width=st.integers(1, 8), t=st.sampled_from([1, 2, 4]), sequence=st.booleans())
def test_simulated_layer_is_korthikanti_table_2(s, b, heads, width, t, sequence):
    """Korthikanti et al. 2022, Table 2 (2-byte activations, 1-byte masks, no LayerNorm statistics):
    the simulated Megatron-LM layer (no dropout after the activation, shards kept)."""
    t = t if heads % t == 0 else 1
    sp = t if sequence else 1
    s = s * sp
    h, a = heads * width, heads
    ops, size = sim.gpt_layer(b, s, h, a, 4 * h, t, sp, act_dropout=False, ln_stats=False, keep_gathered=False)
    keep = {rc: sim.kept(ops, size, sim.policy(ops, rc)) for rc in ("none", "selective", "full")}
    sbh, core = Fraction(s * b * h), Fraction(5 * a * s, h)
    if sequence:
        assert keep == {"none": sbh / t * (34 + core), "selective": sbh / t * 34, "full": 2 * sbh / t}
    else:
        assert keep == {"none": sbh * (10 + Fraction(24, t) + core / t), "selective": sbh * (10 + Fraction(24, t)),
                        "full": 2 * sbh}


@given(n_layers=st.integers(1, 6), k=st.integers(1, 6), method=st.sampled_from(["uniform", "block"]))
def test_simulated_partial_recomputation(n_layers, k, method):
    """Checkpointing whole layers keeps one input per recomputed group; the other layers keep all."""
    x = dict(b=1, l=4, e=4, h=2, f=8)
    ops, size, segments = sim.stage(n_layers, method, k, **x)
    one, one_size = sim.gpt_layer(**x)
    whole, layer_input = sim.kept(one, one_size, []), one_size["x"]
    groups = -(-n_layers // k) if method == "uniform" else min(k, n_layers)
    plain = 0 if method == "uniform" else n_layers - groups
    assert sim.kept(ops, size, segments) == groups * layer_input + plain * whole


@given(p=st.sampled_from([1, 2]), per_stage=st.integers(1, 4), k=st.integers(1, 4),
       method=st.sampled_from(["uniform", "block"]), n=st.integers(1, 3), conventions=CONVENTIONS)
@example(p=1, per_stage=4, k=2, method="uniform", n=1, conventions=conv.DEFAULT)
@example(p=2, per_stage=2, k=1, method="block", n=3, conventions=MEGATRON)
def test_partial_recomputation_is_the_simulated_stage(p, per_stage, k, method, n, conventions):
    """Full recomputation of ``k`` layers (Megatron-LM's ``--recompute-method`` and
    ``--recompute-num-layers``) on the first stage's ``L/p`` layers."""
    k = k if per_stage % k == 0 else 1           # the library asks k | L/p, even for block
    x = dict(b=1, l=4, e=4, h=2, f=8, m1=1, s1=1)
    arch = _arch(p * per_stage, 4, 2, 8)
    base = dict(b=1, l=4, p=p, micro_batches=n)
    none = model_cost(arch, Training(**base), conventions)
    part = model_cost(arch, Training(**base, recompute="full", recompute_method=method, recompute_layers=k),
                      conventions)
    cv = none.layer.conventions
    ops, size, segments = sim.stage(per_stage, method, k, b=1, l=4, e=4, h=2, f=8,
                                    act_dropout=cv.mlp_activation_dropout, ln_stats=cv.layer_norm_keeps_stats)
    flops = _reference_rows(x, conventions)[0]
    flops = {f"L{i}.{name}": v for i in range(per_stage) for name, v in flops.items()}
    peak = sim.simulate_pipeline("1f1b", p, n).peak[0]
    saved = sim.kept(ops, size, []) - sim.kept(ops, size, segments)
    assert rank_activation_bytes(none, 0) - rank_activation_bytes(part, 0) == peak * saved
    assert part.flops_recompute == n * sim.redone(ops, segments, flops)
