"""One home per rule: each test fails if a second copy of a rule drifts from the first.

The expected values are written here from each rule's definition (or counted by
hand), never read back from the function that owns the rule.
"""

import ast
import pathlib
from dataclasses import replace
from fractions import Fraction

import pytest
from sympy import Integer, Rational, simplify

from symbolic_cost import conventions as conv
from symbolic_cost.blocks import Heads, Scores, attention, embedding_block, head_block, mlp, transformer_layer
from symbolic_cost.checks import MODEL_RULES
from symbolic_cost.cost import Collective
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.ops import Keys, attention_core, flash_attention
from symbolic_cost.parallel.sequence import megatron_sp, ring_attention, ulysses
from symbolic_cost.symbols import b, e, f, h, l, m1, s1
from symbolic_cost.timing.hardware import SYSTEMS, System, comm_time
from symbolic_cost.timing.kernels import Kernel, kernel_time
from symbolic_cost.timing.step import step_time_breakdown
from symbolic_cost.tools import deepspeed_profiler as ds
from symbolic_cost.tools import lstm
from symbolic_cost.blocks.ends import Embeddings
from symbolic_cost.blocks.wiring import Residual, Run

RING, TENSOR = conv.DEFAULT, conv.DEFAULT.but(collective_volume="tensor")
PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "symbolic_cost"


# ---------------------------------------------------------------- the collective volume rule

def expected_volume(c: Collective, conventions) -> object:
    """The volume rule from its definition: a ring moves (n-1)/n of the tensor per device for
    allgather, reduce-scatter and all-to-all, 2(n-1)/n for allreduce, all of it for p2p;
    ``"tensor"`` reports the whole tensor.  Times the repeats."""
    n = c.group
    share = {"allgather": (n - 1) / n, "reducescatter": (n - 1) / n, "alltoall": (n - 1) / n,
             "allreduce": 2 * (n - 1) / n, "p2p": Integer(1)}[c.kind]
    whole = c.repeats * c.elements * c.element_bytes
    return share * whole if conventions.collective_volume == "ring" else whole


def _block_cases(conventions, dims):
    B, L, E, F, H, M, S = dims
    run = Run(conventions=conventions)
    return {
        "mlp": mlp(B, L, E, F, M, S, run=run),
        "mlp gated": mlp(B, L, E, F, M, 1, gated_act=True, run=run),
        "attention": attention(B, L, E, H, M, S, run=run),
        "attention flash": attention(B, L, E, H, M, S, run=replace(run, flash=True)),
        "attention GQA": attention(B, L, E, Heads(H, kv_heads=M), M, S, run=run),
        "layer": transformer_layer(B, L, E, F, H, M, S, run=run),
        "layer flash GQA": transformer_layer(B, L, E, F, Heads(H, kv_heads=M), M, 1, run=replace(run, flash=True)),
        "embedding": embedding_block(B, L, E, 1024, M, S, embeddings=Embeddings(positions=L), run=run),
        "head": head_block(B, L, E, 1024, M, S, run=run),
    }


NUMERIC = (2, 64, 128, 512, 8, 4, 2)


@pytest.mark.parametrize("conventions", [RING, TENSOR], ids=["ring", "tensor"])
def test_every_block_collective_has_the_rule_volume(conventions):
    kinds = set()
    for name, block in _block_cases(conventions, NUMERIC).items():
        assert block.collectives, f"{name} has no collective to check"
        for c in block.collectives:
            kinds.add(c.kind)
            assert c.volume == expected_volume(c, conventions), (name, c)
    assert {"allgather", "reducescatter", "allreduce"} <= kinds


def test_symbolic_block_collectives_have_the_ring_volume():
    for name, block in _block_cases(RING, (b, l, e, f, h, m1, s1)).items():
        for c in block.collectives:
            assert simplify(c.volume - expected_volume(c, RING)) == 0, (name, c)


@pytest.mark.parametrize("conventions", [RING, TENSOR], ids=["ring", "tensor"])
@pytest.mark.parametrize("zero, distributed", [(0, False), (0, True), (1, False), (2, False), (3, False)])
def test_every_model_collective_has_the_rule_volume(conventions, zero, distributed):
    training = Training(b=2, l=128, m1=2, s1=2, d=4, p=2, micro_batches=4, zero=zero,
                        distributed_optimizer=distributed)
    cost = model_cost(preset("gpt2"), training, conventions)
    dims = {dim for dim, _ in cost.collectives}
    assert dims == {"tensor", "pipeline", "data"}
    for dim, c in cost.collectives:
        assert c.volume == expected_volume(c, conventions), (dim, c)


@pytest.mark.parametrize("conventions", [RING, TENSOR], ids=["ring", "tensor"])
def test_every_sequence_scheme_collective_has_the_rule_volume(conventions):
    schemes = {"megatron-sp": megatron_sp(2, 64, 128, 8, 4, conventions=conventions),
               "ulysses": ulysses(2, 64, 128, 8, 4, conventions=conventions),
               "ulysses with m1": ulysses(2, 64, 128, 8, 2, m1=2, flash=True, conventions=conventions),
               "ring": ring_attention(2, 64, 128, 8, 4, conventions=conventions),
               "ring with m1": ring_attention(2, 64, 128, 8, 4, m1=2, causal=False, conventions=conventions)}
    kinds = set()
    for name, scheme in schemes.items():
        assert scheme.block.collectives, name
        for c in scheme.block.collectives:
            kinds.add(c.kind)
            assert c.volume == expected_volume(c, conventions), (name, c)
    assert {"alltoall", "p2p", "allgather", "reducescatter"} <= kinds


# ---------------------------------------------------------------- the attention core

def _fields(cost):
    return cost.fields()


def _same_rows(rows, core):
    assert [r.name for r in rows] == [c.name for c in core]
    for row, want in zip(rows, core):
        assert _fields(row) == _fields(want), row.name


CORE = ("logits", "softmax", "dropout_softmax", "attend")


@pytest.mark.parametrize("options", [dict(), dict(kv_heads=2), dict(causal=True), dict(dropouts=False)],
                         ids=["plain", "gqa", "causal", "no-dropout"])
def test_attention_block_core_is_attention_core(options):
    exact = conv.DEFAULT.but(causal_flops="exact")
    kv = options.get("kv_heads")
    block = attention(2, 64, 128, Heads(8, kv_heads=kv), 2, 2, scores=Scores(causal=options.get("causal", False)),
                      residual=Residual(dropouts=options.get("dropouts", True)), run=Run(conventions=exact))
    keys = Keys(kv_heads=None if kv is None else kv // 2, causal=options.get("causal", False))
    core = attention_core(2, 64, 16, 4, keys, dropouts=options.get("dropouts", True), conventions=exact)
    _same_rows([row for row in block if row.name in CORE], core)


def test_flash_rows_are_flash_attention():
    block = attention(2, 64, 128, Heads(8, kv_heads=2), 2, 1, run=Run(flash=True))
    assert _fields(block["flash_attention"]) == _fields(flash_attention(2, 64, 16, 4, Keys(kv_heads=1)))


def test_ulysses_and_ring_cores():
    plain = ulysses(2, 64, 128, 8, 4)
    _same_rows([row for row in plain.block if row.name in CORE], attention_core(2, 64, 16, 2))
    fused = ulysses(2, 64, 128, 8, 2, m1=2, flash=True)
    assert _fields(fused.block["flash_attention"]) == _fields(flash_attention(2, 64, 16, 2))
    ring = ring_attention(2, 64, 128, 8, 4, causal=False)
    assert _fields(ring.block["ring_flash_attention"]) == _fields(flash_attention(2, 16, 16, 8, Keys(l_kv=64)))
    # causal, zig-zag balanced: every query sees (l + 1)/2 keys on average
    ring = ring_attention(2, 64, 128, 8, 4, causal=True)
    assert _fields(ring.block["ring_flash_attention"]) == _fields(
        flash_attention(2, 16, 16, 8, Keys(l_kv=Rational(65, 2))))


def test_flash_flops_by_hand():
    """b = h = 1, l = 4, q = 2, exact products.  Forward: QK^T 16 outputs x 3 = 48; softmax
    2 x 16 + 4 x 3 = 44; dropout 16; AV 8 outputs x 7 = 56: 164.  Backward: dQ, dK 56 + 56;
    softmax 3 x 16 + 12 = 60; dropout 16; dA 16 x 3 = 48, dV 56: 292, plus the recomputed
    forward of scores, softmax and dropout (108): 400."""
    flash = flash_attention(1, 4, 2, 1)
    assert (flash.flops_fwd, flash.flops_bwd) == (164, 400)


@pytest.mark.parametrize("options", [dict(), dict(kv_heads=2), dict(l_kv=32), dict(causal=True)],
                         ids=["plain", "gqa", "cross", "causal"])
def test_flash_flops_are_the_core_forward_recompute_and_backward(options):
    exact = conv.DEFAULT.but(causal_flops="exact")
    flash = flash_attention(2, 32, 16, 4, Keys(**options), conventions=exact)
    core = attention_core(2, 32, 16, 4, Keys(**options), fused=True, conventions=exact)
    forward = sum(r.flops_fwd for r in core)
    recompute = sum(r.flops_fwd for r in core if r.name != "attend")
    assert flash.flops_fwd == forward
    assert flash.flops_bwd == recompute + sum(r.flops_bwd for r in core)


# ---------------------------------------------------------------- communication time

TOY = System("toy", 10**12, 10**12, 10**12, 10**11, 10**10, 8, nvlink_latency=Rational(1, 10**7),
             ib_latency=Rational(1, 10**6), launch_overhead=Rational(1, 10**5))


def test_lstm_allreduce_is_comm_time_on_infiniband():
    """dp = 4 fits TOY's NVLink domain of 8, but DeepFlow sends over InfiniBand: the LSTM's
    transfer is ``comm_time`` of the allreduce pinned to ``ib``."""
    model, n = lstm.LSTM(4, 1, 1, 1, 1, dp=4), 10**9
    reduce = Kernel("reduce", Fraction(n, 4), 3 * 4 * Fraction(n, 4), engine="vector")
    transfer = lstm.allreduce_time(n, model, TOY) - 3 * kernel_time(reduce, TOY)
    c = Collective("allreduce", n, 4, 4, "bwd", volume=6 * 10**9)
    assert transfer == comm_time(c, TOY, link="ib")
    assert transfer != comm_time(c, TOY)          # the span alone would choose NVLink
    # by hand: 2 (dp - 1) steps of 1 us; 2 (dp - 1)/dp of 4e9 bytes at 10 GB/s; three
    # reduction kernels of 2.5e8 adds moving 3e9 bytes at 1 TB/s, memory bound, plus a launch
    by_hand = 6 * Fraction(1, 10**6) + Fraction(6 * 10**9, 10**10) + 3 * (Fraction(3 * 10**9, 10**12)
                                                                         + Fraction(1, 10**5))
    assert lstm.allreduce_time(n, model, TOY) == by_hand


def test_lstm_layer_transfer_is_comm_time_by_bandwidth():
    """One (B, D) hidden state of fp32 values over InfiniBand, no latency: 4 B D / B_ib."""
    model = lstm.LSTM(8, 1, 1024, 1, 2, lp=2)
    assert lstm.layer_transfer_time(model, TOY) == Fraction(4 * 8 * 1024, 10**10)
    send = Collective("p2p", 8 * 1024, 4, 2, "fwd", volume=4 * 8 * 1024)
    assert lstm.layer_transfer_time(model, TOY) == comm_time(send, TOY, conv.DEFAULT.but(comm_time="bandwidth"),
                                                             link="ib")


def test_comm_time_link_names_are_checked():
    c = Collective("allreduce", 10, 2, 4, "bwd", volume=10)
    with pytest.raises(ValueError, match="link must be one of nvlink, ib"):
        comm_time(c, TOY, link="pcie")
    with pytest.raises(ValueError, match="has no ib link for a allreduce over 4 devices"):
        comm_time(c, TOY.but(ib_bandwidth=0), link="ib")


# ---------------------------------------------------------------- divisibility rules

GOOD = dict(b=2, l=16, e=64, f=256, h=8, m1=4, s1=2, kv_heads=4)
BREAK = {   # each breaks exactly one rule, so the order in which a builder checks does not matter
    ("h", "e"): dict(e=60), ("m1", "h"): dict(h=2, kv_heads=None), ("m1", "f"): dict(f=254),
    ("s1", "l"): dict(l=15), ("s1", "m1"): dict(s1=8), ("kv_heads", "h"): dict(kv_heads=12),
    ("m1", "kv_heads"): dict(kv_heads=2)}


def test_each_broken_dimension_breaks_one_rule():
    for rule, change in BREAK.items():
        dims = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
        broken = [(x, y) for x, y in MODEL_RULES if x in dims and y in dims and dims[y] % dims[x]]
        assert broken == [rule], (rule, broken)


def _model(d):
    arch = Architecture("toy", 2, d["e"], d["h"], d["f"], 1000, kv_heads=d["kv_heads"], positions=d["l"])
    return model_cost(arch, Training(b=d["b"], l=d["l"], m1=d["m1"], s1=d["s1"]))


BUILDERS = {   # builder, the dimensions of MODEL_RULES it takes
    "mlp": (lambda d: mlp(d["b"], d["l"], d["e"], d["f"], d["m1"], d["s1"]), "b l e f m1 s1"),
    "attention": (lambda d: attention(d["b"], d["l"], d["e"], Heads(d["h"], d["kv_heads"]), d["m1"], d["s1"]),
                  "b l e h m1 s1 kv_heads"),
    "layer": (lambda d: transformer_layer(d["b"], d["l"], d["e"], d["f"], Heads(d["h"], d["kv_heads"]),
                                          d["m1"], d["s1"]), "b l e f h m1 s1 kv_heads"),
    # Ulysses' s1 and ring attention's c are sequence degrees outside any tensor group: (s1, m1) is not theirs
    "ulysses": (lambda d: ulysses(d["b"], d["l"], d["e"], d["h"], d["s1"], m1=d["m1"]), "b l e h m1"),
    "ring": (lambda d: ring_attention(d["b"], d["l"], d["e"], d["h"], d["s1"], m1=d["m1"]), "b e h m1"),
    "model_cost": (_model, "b l e f h m1 s1 kv_heads"),
}


def test_good_dimensions_build():
    for name, (build, _) in BUILDERS.items():
        build(GOOD)


@pytest.mark.parametrize("rule", MODEL_RULES, ids=lambda r: f"{r[0]}|{r[1]}")
def test_each_divisibility_rule_is_enforced_alike(rule):
    divisor, dividend = rule
    dims = {**GOOD, **BREAK[rule]}
    message = f"{divisor} must divide {dividend} (got {divisor}={dims[divisor]}, {dividend}={dims[dividend]})"
    seen = {}
    for name, (build, takes) in BUILDERS.items():
        if not {divisor, dividend} <= set(takes.split()):
            continue
        with pytest.raises(ValueError) as raised:
            build(dims)
        seen[name] = str(raised.value)
    assert seen, f"no builder takes both {divisor} and {dividend}"
    assert all(text.startswith(message) for text in seen.values()), seen
    assert len(set(seen.values())) == 1, seen


# ---------------------------------------------------------------- parameter trees

def test_bert_tree_parameters_by_hand():
    """BERT-base with its pooler: embeddings (30522 + 512 + 2) x 768 and a norm 2 x 768;
    12 layers of 4 e^2 + 4e (attention) + 2 e f + f + e (MLP) + 4e (two norms); the
    pooler e^2 + e: 109,482,240."""
    e_, f_ = 768, 3072
    layer = 4 * e_ * e_ + 4 * e_ + 2 * e_ * f_ + f_ + e_ + 4 * e_
    by_hand = (30522 + 512 + 2) * e_ + 2 * e_ + 12 * layer + e_ * e_ + e_
    assert by_hand == 109_482_240
    bert = preset("bert-base-uncased")
    assert ds.hf_bert(bert, 4, 128).total("params") == model_cost(bert).parameters == by_hand


def test_gpt2_trees_parameters_by_hand():
    """GPT-2: (50257 + 1024) x 768 embeddings, 12 layers as BERT's, a final norm; the head is
    tied: 124,439,808."""
    e_, f_ = 768, 3072
    layer = 4 * e_ * e_ + 4 * e_ + 2 * e_ * f_ + f_ + e_ + 4 * e_
    by_hand = (50257 + 1024) * e_ + 12 * layer + 2 * e_
    assert by_hand == 124_439_808
    gpt2 = preset("gpt2")
    cost = model_cost(gpt2, Training(b=4, l=128))
    assert ds.model_tree(cost).total("params") == cost.parameters == by_hand
    megatron = Architecture("gpt2-megatron", 12, 768, 12, 3072, 50257, positions=1024)
    assert ds.megatron_gpt2(megatron, 4, 128).total("params") == by_hand


@pytest.mark.parametrize("name", ["gpt2", "bert-base-uncased", "llama-2-7b", "mistral-7b"])
def test_every_tree_totals_the_model_parameters(name):
    arch = preset(name)
    cost = model_cost(arch, Training(b=1, l=64, precision="fp32"))
    assert ds.model_tree(cost).total("params") == cost.parameters
    if name == "bert-base-uncased":
        assert ds.hf_bert(arch, 1, 64).total("params") == cost.parameters


def test_megatron_tree_totals_the_model_parameters():
    arch = Architecture("gpt2-megatron", 2, 256, 4, 1024, 50257, positions=128, vocab_multiple=128)
    assert ds.megatron_gpt2(arch, 2, 128).total("params") == model_cost(arch).parameters


def test_bert_tree_macs_are_the_products():
    """Per layer and token: Q, K, V and the output e^2 each, the MLP 2 e f; per sequence and
    head: QK^T and AV l^2 q each; the pooler e^2 per sequence."""
    B, L, E, F, H = 2, 16, 64, 256, 4
    arch = Architecture("bert-toy", 3, E, H, F, 100, positions=L, token_types=2, causal=False,
                        embedding_norm=True, final_norm=False, lm_head=False, pooler=True, tied=False)
    per_layer = B * L * (4 * E * E + 2 * E * F) + 2 * B * H * L * L * (E // H)
    assert ds.hf_bert(arch, B, L).total("macs") == 3 * per_layer + B * E * E


# ---------------------------------------------------------------- LSTM weights, pipeline bubble, report

def test_lstm_memory_weights_are_the_parameters():
    """Memory counts the parameters, plus a projection bias of Pj (DeepFlow's memory rule)."""
    model = lstm.LSTM(4, 3, 32, 100, 2, projection=16, projected=True)
    weights = sum(kinds["weights"] for kinds in lstm.memory(model).values())
    assert weights == model.element_bytes * (lstm.parameters(model) + 16)
    # by hand: 100 x 32 + 2 x 65 x 4 x 32 + 32 x 16 + 17 x 100
    assert lstm.parameters(model) == 3200 + 16640 + 512 + 1700


@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)])
def test_step_time_bubble_is_the_schedule_bubble(schedule, v):
    """The step-time breakdown's idle share equals the schedule's bubble ``(p - 1)/(v n + p - 1)``."""
    training = Training(b=1, l=128, p=2, micro_batches=4, schedule=schedule, virtual_stages=v)
    cost = model_cost(preset("gpt2"), training)
    t = step_time_breakdown(cost, "h100")
    busy = t["compute"] + t["tensor_comm"]
    assert simplify(t["bubble"] / (busy + t["bubble"]) - cost.bubble) == 0
    assert cost.bubble == Rational(1, v * 4 + 1)


def test_report_takes_reproductions_only_in_generate():
    """Report modules other than ``generate``'s ``__init__`` import no reproduction."""
    for path in sorted((PACKAGE / "report").glob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("symbolic_cost.reproduce"), (path.name, node.module)


def test_kernel_report_shows_the_case_it_is_given():
    from symbolic_cost.report.kernel_model import LSTMCase, kernel_markdown
    from symbolic_cost.report.scaling import LayerShape
    case = LSTMCase("A toy LSTM", lstm.LSTM(8, 4, 64, 1000, 2), SYSTEMS["h100"], "deepflow-2019", "n/a")
    text = kernel_markdown(case, shape=LayerShape("tiny", 64, 8, 256, 32))
    assert "## A toy LSTM" in text and "(printed: n/a)" in text and "Seed 002" not in text


# ---------------------------------------------------------------- derived sizes of an architecture

DERIVED = {"kv_heads", "head_dim", "v_head_dim"}     # blocks.specs.Heads owns their defaults
HOME = PACKAGE / "blocks" / "specs.py"              # Architecture.kv, head_size, value_size read it


def _derivations(tree) -> list[int]:
    """Lines that derive a default of ``DERIVED`` from an attribute: ``x.kv_heads or ...`` or
    ``... if x.head_dim is None else x.head_dim`` (``is not None`` alike; a branch reads it)."""
    def derived(node):
        return isinstance(node, ast.Attribute) and node.attr in DERIVED

    def reads(node, attr):
        return any(isinstance(n, ast.Attribute) and n.attr == attr for n in ast.walk(node))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and derived(node.values[0]):
            lines.append(node.lineno)
        elif isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare) and derived(node.test.left) \
                and isinstance(node.test.ops[0], (ast.Is, ast.IsNot)) \
                and (reads(node.body, node.test.left.attr) or reads(node.orelse, node.test.left.attr)):
            lines.append(node.lineno)
    return lines


def test_architecture_derived_sizes_have_one_home():
    """Only ``blocks.specs.Heads`` turns ``kv_heads``, ``head_dim``, ``v_head_dim`` of ``None``
    into a size; every other module reads ``heads.kv`` or ``arch.kv``, ``arch.head_size``,
    ``arch.value_size`` (``Architecture`` asks ``Heads``).  Caught: ``arch.kv_heads or arch.h``
    and ``arch.h if arch.kv_heads is None else arch.kv_heads``."""
    copies = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
              if path != HOME for line in _derivations(ast.parse(path.read_text()))]
    assert not copies, copies
    assert len(_derivations(ast.parse(HOME.read_text()))) == 3
    caught = "a = arch.kv_heads or arch.h\nb = arch.h if arch.kv_heads is None else arch.kv_heads"
    assert _derivations(ast.parse(caught)) == [1, 2]


def test_architecture_derived_sizes_by_hand():
    arch = Architecture("toy", 2, 64, 8, 256, 100)
    assert (arch.kv, arch.head_size, arch.value_size) == (8, 8, 8)
    arch = Architecture("toy", 2, 64, 8, 256, 100, kv_heads=2, head_dim=16, v_head_dim=4)
    assert (arch.kv, arch.head_size, arch.value_size) == (2, 16, 4)
    assert Architecture("toy", 2, 64, 8, 256, 100, head_dim=16).value_size == 16


# ---------------------------------------------------------------- the search's rules are model_cost's

def _ends(layers: int, p: int) -> dict:
    """Megatron-LM's uneven split as the search tries it, written out: where ``p`` does not divide
    the layers, ``p - 2`` middle stages of ``ceil(layers / p)`` and the rest to the ends (the last
    the larger half), each end between 1 and a middle stage; nothing else to set where it divides."""
    if p == 1 or layers % p == 0:
        return {}
    middle = -(-layers // p)
    first = (layers - (p - 2) * middle) // 2
    last = layers - (p - 2) * middle - first
    return dict(first_stage_layers=first, last_stage_layers=last) if first >= 1 and last <= middle else {}


def _accepted(arch, devices, seq, expert=False) -> set:
    """Every ``(m1, s1, d, p, ep, etp)`` with ``s1`` 1 or ``m1`` (``m1`` with experts) and ``b = 1``
    that ``numeric.exact.check_numbers`` (the rules ``model_cost`` applies) accepts, a pipeline
    that does not divide the layers split unevenly (``_ends``)."""
    from symbolic_cost.checks import InputError
    from symbolic_cost.numeric.exact import check_numbers
    out = set()
    for m1 in (k for k in range(1, devices + 1) if devices % k == 0):
        for p in (k for k in range(1, devices // m1 + 1) if (devices // m1) % k == 0):
            d = devices // (m1 * p)
            grids = [(ep, etp) for ep in range(1, m1 * d + 1) for etp in sorted({1, m1})] if expert else [(1, 1)]
            for s1, (ep, etp) in ((s1, g) for s1 in ({m1} if expert else {1, m1}) for g in grids):
                t = Training(b=1, l=seq, m1=m1, s1=s1, d=d, p=p, micro_batches=64 // d or 1,
                             **(dict(ep=ep, etp=etp) if expert else {}), **_ends(int(arch.n_layers), p))
                try:
                    check_numbers(arch, t)
                except InputError:
                    continue
                out.add((m1, s1, d, p, ep, etp))
    return out


@pytest.mark.parametrize("name, devices", [("Llama-3.2-1B", 64), ("Mixtral-8x7B-v0.1", 16), ("gemma-2-2b", 32)])
def test_search_layouts_are_what_model_cost_accepts(name, devices):
    """The search (``numeric.layouts``) keeps exactly the degrees ``model_cost``'s rules accept
    (``numeric.exact.check_numbers``): a rule dropped or added on one side shows (Llama-3.2-1B's
    8 key/value heads refuse m1 = 16; Mixtral's 8 experts and its expert grid)."""
    from symbolic_cost.models.config import load
    from symbolic_cost.numeric.layouts import layouts
    arch = load(PACKAGE.parent / "tests" / "hf_configs" / f"{name}.json")
    expert = arch.moe is not None
    table = layouts(arch, devices, 64, 2048, micro_batch_sizes=(1,), recompute=("none",))
    columns = ["m1", "s1", "d", "p"] + (["ep", "etp"] if expert else [])
    found = {tuple(row) + ((1, 1) if not expert else ()) for row in table[columns].itertuples(index=False)}
    assert found == _accepted(arch, devices, 2048, expert) and found


# ---------------------------------------------------------------- refusals written once

def _sources() -> str:
    return "\n".join(path.read_text() for path in sorted(PACKAGE.rglob("*.py")))


@pytest.mark.parametrize("text", ["is a bidirectional encoder", "ep x etp must equal m1",
                                  "the expert grid folds onto the tensor-{"])
def test_refusal_written_once(text):
    """The encoder refusal (``inference.kv_cache.check_decoder``), the expert grid that must be
    the tensor group (``blocks.moe.check_tensor_group_grid``) and the grid that must fold onto
    the ranks (``parallel.expert.expert_data_degree``) each have one home."""
    assert _sources().count(text) == 1


def test_refusals_read_alike_at_each_entrance():
    from symbolic_cost.blocks.moe import MoE, moe
    from symbolic_cost.blocks.wiring import Experts
    from symbolic_cost.inference.kv_cache import kv_cache_bytes
    from symbolic_cost.inference.phases import prefill
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.parallel.expert import expert_data_degree

    def message(call):
        with pytest.raises(ValueError) as raised:
            call()
        return str(raised.value)
    bert = preset("bert-base-uncased")
    assert message(lambda: kv_cache_bytes(bert, 1, 8)) == message(lambda: prefill(bert, Serving(b=1, l_in=8, l_out=2)))
    assert message(lambda: Serving(ep=4, d=2)) == message(lambda: expert_data_degree(1, 2, 4, 1))
    replicated = message(lambda: moe(1, 4, 8, MoE(8, 2, 64), 4, 1, experts=Experts(ep=2, etp=1, replicated=True)))
    assert replicated.startswith("ep x etp must equal m1 when the tensor ranks share their tokens")


# ---------------------------------------------------------------- the forward recomputation redoes

@pytest.mark.parametrize("recompute, extra", [("selective", {}), ("activation", {}), ("full", {}),
                                               ("full", dict(recompute_method="block", recompute_layers=2))],
                         ids=["selective", "activation", "full", "full-block"])
def test_recomputed_forward_alike_in_totals_and_utilisation(recompute, extra):
    """``models.placement.Placement.redone`` and ``recomputed_rows`` decide which layers and rows redo
    their forward for ``model_cost`` (per device), ``models.utilisation`` (over the job) and step
    time: on ``p`` even stages of one device each, the job's recomputation is ``p`` times the
    busiest stage's; the collectives a redone forward repeats exist under full recomputation
    only (no row that selective or activation recomputation redoes has one)."""
    from dataclasses import replace

    from symbolic_cost.models.utilisation import recompute_flops
    t = Training(b=2, l=128, p=2, micro_batches=4, recompute=recompute, **extra)
    cost = model_cost(preset("gpt2"), t)
    assert recompute_flops(cost) == 2 * cost.flops_recompute != 0          # p stages
    tensor = replace(t, m1=2, s1=2)
    plain = replace(tensor, recompute="none", recompute_method="uniform", recompute_layers=1)
    again = sum(c.repeats for _, c in model_cost(preset("gpt2"), tensor).collectives) \
        - sum(c.repeats for _, c in model_cost(preset("gpt2"), plain).collectives)
    assert (again != 0) == (recompute == "full")
