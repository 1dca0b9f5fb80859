"""Issue 66, a seventh probe: the Python API's helpers and value objects called with hostile values
(0, -1, 2**53 + 1, 10**400, NaN, text, ``None``) ended in a ``ZeroDivisionError``, a ``TypeError``, a
SymPy error, a hang, or an answer.  Each is now an ``InputError`` naming the argument, from the one
validation layer (``checks``): a size is a positive integer (a count, non-negative) of at most
2**53, what the command line takes.  The expectations follow from that rule, not from the library's
output."""

from fractions import Fraction

import pytest
from sympy import Rational, Symbol

from symbolic_cost.checks import LARGEST_COUNT, InputError
from test_refusals import refused

HUGE = 2**53 + 1
"""Past the largest size a double holds exactly (``checks.LARGEST_COUNT``)."""


def refusal(call, argument: str) -> InputError:
    """``call()`` refused with an ``InputError`` whose ``argument`` and message name ``argument``."""
    with pytest.raises(InputError) as error:
        call()
    assert error.value.argument == argument and argument in str(error.value), (error.value.argument, str(error.value))
    assert "Traceback" not in str(error.value)
    return error.value


# named by the session: a hang, a ZeroDivisionError, a cap passed, sizes past 2**53


def test_chunk_in_flight_refuses_a_huge_pipeline_instead_of_walking_it():
    """``chunk_in_flight(10**400, ...)`` walked ``2(p - r - 1) + (v - 1) p + 1`` forwards one by one."""
    from symbolic_cost.parallel.pipeline import chunk_in_flight
    assert "2**53" in str(refusal(lambda: chunk_in_flight(10**400, 8, 2, 0), "p"))
    refusal(lambda: chunk_in_flight(4, 8, 2, 4), "rank")              # ranks are 0 to p - 1
    refusal(lambda: chunk_in_flight(4, 0, 2, 0), "micro_batches")
    refusal(lambda: chunk_in_flight(4, 8, 0, 0), "virtual_stages")


def test_chunk_in_flight_counts_what_megatrons_chunk_ids_walk():
    """The closed count equals the walk over the first ``W`` forwards, forward ``j`` on chunk
    ``(j mod p v) // p`` (Megatron's ``get_model_chunk_id``), capped at ``n``: written here."""
    from symbolic_cost.parallel.pipeline import chunk_in_flight
    for p in range(1, 6):
        for v in range(1, 4):
            for n in (p, 2 * p, 3 * p):
                for rank in range(p):
                    warm = 2 * (p - rank - 1) + (v - 1) * p + 1
                    walked = [min(sum(1 for j in range(warm) if (j % (p * v)) // p == c), n) for c in range(v)]
                    assert chunk_in_flight(p, n, v, rank) == walked, (p, n, v, rank)
    n = Symbol("n", positive=True, integer=True)                    # n may stay a symbol
    assert len(chunk_in_flight(4, n, 2, 0)) == 2


@pytest.mark.parametrize("depth, p, argument", [(0, 0, "depth"), (27, 0, "p"), (27, "x", "p"), (27, None, "p")])
def test_uneven_stages_refuses_a_size_that_is_not_one(depth, p, argument):
    """``uneven_stages(0, 0)`` ended in ``ZeroDivisionError``."""
    from symbolic_cost.parallel.splits import uneven_stages
    refusal(lambda: uneven_stages(depth, p), argument)
    assert uneven_stages(27, 2) == [14, 13] and uneven_stages(Symbol("L", positive=True, integer=True), 2) is None


def test_served_tokens_are_bounded_as_a_budget_is(capsys):
    """``--served-tokens 1e40`` printed 3e50 FLOPs over a life, where a budget stops at 1e40 FLOPs:
    serving that many tokens on the compute-optimal model costs more than any budget plan takes."""
    refused(capsys, ["plan", "--budget-flops", "1e25", "--served-tokens", "1e40"], "--served-tokens", "1e40 FLOPs")


@pytest.mark.parametrize("block, dims", [("mlp", ("b", "l", "e", "f")), ("attention", ("b", "l", "e", "h")),
                                         ("transformer_layer", ("b", "l", "e", "f", "h"))])
def test_block_sizes_past_2_53_are_refused_as_every_other_size(block, dims):
    """The blocks took ``b = 2**53 + 1`` (and any size past it) where ``Architecture``, ``Training``
    and the command line refuse it: each dimension is named."""
    import symbolic_cost
    make = getattr(symbolic_cost, block)
    good = dict(b=2, l=8, e=64, f=256, h=8)
    for name in dims:
        error = refusal(lambda: make(*[HUGE if k == name else good[k] for k in dims]), name)
        assert "2**53" in str(error)
    make(*[LARGEST_COUNT if k == "b" else good[k] for k in dims])      # 2**53 itself is a size


# value objects: each checks its own sizes where it is made


@pytest.mark.parametrize("make, argument", [
    (lambda s: s.Heads(float("nan")), "h"),
    (lambda s: s.Heads(32, kv_heads="x"), "kv_heads"),
    (lambda s: s.Heads(32, head_dim=0), "head_dim"),
    (lambda s: s.Heads(32, rotary_dim=None, v_head_dim=-1), "v_head_dim"),
    (lambda s: s.Latent(512, 64, 128, -1), "v_dim"),
    (lambda s: s.Latent("x", 64, 128, 128), "kv_rank"),
    (lambda s: s.Latent(512, -1, 128, 128), "rope_dim"),
    (lambda s: s.Chunk(0), "size"),
    (lambda s: s.Chunk(float("nan")), "size"),
])
def test_an_attention_spec_refuses_a_size_where_it_is_made(make, argument):
    """``Heads(32, kv_heads='x')`` and ``Latent(..., v_dim=nan)`` were kept, to fail (or not) later."""
    from symbolic_cost.blocks import specs
    refusal(lambda: make(specs), argument)
    h = Symbol("h", positive=True, integer=True)
    assert specs.Heads(h).kv == h                                       # symbols stay sizes


@pytest.mark.parametrize("kwargs, argument", [(dict(positions=-1), "positions"), (dict(token_types="x"), "token_types"),
                                              (dict(projection=0), "projection")])
def test_embeddings_refuse_a_table_size_where_they_are_made(kwargs, argument):
    from symbolic_cost.blocks.ends import Embeddings
    refusal(lambda: Embeddings(**kwargs), argument)


@pytest.mark.parametrize("kwargs, argument", [(dict(phase="x"), "phase"), (dict(every=2, phase=2), "phase"),
                                              (dict(expert_f=None), "expert_f"), (dict(first_dense=-1), "first_dense"),
                                              (dict(shared_f="x"), "shared_f")])
def test_a_mixture_of_experts_refuses_its_layer_pattern_and_widths_by_name(kwargs, argument):
    """``MoE(8, 2, 64, phase='x')`` ended in "'<=' not supported between instances of 'int' and 'str'"."""
    from symbolic_cost.blocks.moe import MoE
    refusal(lambda: MoE(**{**dict(experts=8, top_k=2, expert_f=64), **kwargs}), argument)


@pytest.mark.parametrize("call, argument", [(lambda P: P(0), "block"), (lambda P: P(16, full=-1), "full"),
                                            (lambda P: P(16, cap="x"), "cap"), (lambda P: P(16).of("x"), "tokens"),
                                            (lambda P: P(16).of(-1), "tokens")])
def test_pages_refuse_what_is_not_a_count(call, argument):
    """``Pages(16).of('x')`` ended in "bad operand type for unary -"; ``Pages(nan)`` was kept."""
    from symbolic_cost.inference.paged import Pages
    refusal(lambda: call(Pages), argument)


# helpers of the library's formulas


@pytest.mark.parametrize("call, argument", [
    (lambda c, D: c.collective("allreduce", None, 2, 4, "fwd", D), "elements"),
    (lambda c, D: c.collective("allreduce", 100, "x", 4, "fwd", D), "es"),
    (lambda c, D: c.ring_share("allreduce", None), "group"),
    (lambda c, D: c.ring_share("allreduce", 0), "group"),
])
def test_a_collective_refuses_a_group_or_size_that_is_not_one(call, argument):
    """``collective(..., elements=None)`` ended in "unsupported operand type(s) for *" and
    ``ring_share("allreduce", 0)`` gave a share of ``zoo``."""
    from symbolic_cost import cost
    from symbolic_cost.conventions import DEFAULT
    refusal(lambda: call(cost, DEFAULT), argument)


@pytest.mark.parametrize("call, argument", [
    (lambda: __import__("symbolic_cost.parallel.expert", fromlist=["x"]).expert_data_degree(2, 0, 8, 1), "d"),
    (lambda: __import__("symbolic_cost.parallel.expert", fromlist=["x"]).expert_data_degree(2, 8, 8, 1, cp=0), "cp"),
    (lambda: __import__("symbolic_cost.parallel.expert", fromlist=["x"]).expert_shard_degree(2, 0, 8, 1), "shard"),
    (lambda: __import__("symbolic_cost.parallel.splits", fromlist=["x"]).layout_layers("Et|tt|t,L", 4, 0), "p"),
    (lambda: __import__("symbolic_cost.parallel.splits", fromlist=["x"]).layout_layers("Et|tt|t,L", 1.5, 3), "n_layers"),
    (lambda: __import__("symbolic_cost.parallel.grid", fromlist=["x"]).grid_for("3d", -1), "devices"),
    (lambda: __import__("symbolic_cost.parallel.collectives", fromlist=["x"]).network_share(0, 2), "n"),
    (lambda: __import__("symbolic_cost.parallel.collectives", fromlist=["x"]).network_share(16, None), "domains"),
])
def test_a_parallel_helper_refuses_a_degree_that_is_not_one(call, argument):
    """A 0 ended in ``ZeroDivisionError`` (expert degrees, layout layers), -1 in SymPy's "iroot() of
    negative number" (``grid_for``)."""
    refusal(call, argument)


def test_a_grid_block_names_a_size_left_out():
    """``grid_mlp(None, ...)`` ended in ``KeyError: 'b'`` (the unset sizes were dropped)."""
    from symbolic_cost.parallel.grid import make_grid
    from symbolic_cost.parallel.grid_blocks import grid_attention, grid_mlp
    grid = make_grid("3d", mq=2)
    refusal(lambda: grid_mlp(None, 16, 64, 256, grid), "b")
    refusal(lambda: grid_attention(8, 16, None, 8, grid), "e")


@pytest.mark.parametrize("call, argument", [
    (lambda: __import__("symbolic_cost.ops.embedding", fromlist=["x"]).flce_chunk(0, 4096, 32000), "tokens"),
    (lambda: __import__("symbolic_cost.ops.embedding", fromlist=["x"]).flce_chunk(100, -1, 32000), "width"),
    (lambda: __import__("symbolic_cost.ops.matmul", fromlist=["x"]).scored_keys(None, 10, True, None), "l"),
    (lambda: __import__("symbolic_cost.models.overheads", fromlist=["x"]).nccl_buffers(None, 2), "communicators"),
    (lambda: __import__("symbolic_cost.models.optimizers", fromlist=["x"]).error_feedback_bytes("onebit-adam", 0), "d"),
    (lambda: __import__("symbolic_cost.models.optimizers", fromlist=["x"]).FP8_RECIPES["delayed"].scale_bytes("x"),
     "fp8_amax_history"),
    (lambda: __import__("symbolic_cost.inference.speculative", fromlist=["x"]).expected_tokens(HUGE, Rational(4, 5)),
     "k"),
])
def test_a_formula_helper_refuses_a_size_that_is_not_one(call, argument):
    """``flce_chunk(0, ...)`` ended in SymPy's "Invalid NaN comparison"; ``expected_tokens(2**53 + 1,
    4/5)`` raised 4/5 to that power (it hung): a step drafts at most ``MAX_DRAFT`` tokens."""
    refusal(call, argument)


def test_topology_names_its_group():
    from symbolic_cost.timing.hardware import SYSTEMS, topology
    refusal(lambda: topology(None, SYSTEMS["a100-perlmutter"]), "group")
    refusal(lambda: topology(0, SYSTEMS["a100-perlmutter"]), "group")


def test_touched_share_counts_tokens():
    from symbolic_cost.blocks.moe import MoE
    from symbolic_cost.inference.experts import touched_share
    refusal(lambda: touched_share(MoE(8, 2, 14336), -1), "tokens")
    refusal(lambda: touched_share(MoE(8, 2, 14336), None), "tokens")


@pytest.mark.parametrize("tensor, context, argument", [(0, 8192, "tensor"), (1, None, "context"),
                                                       (float("nan"), 8192, "tensor"), (1, "x", "context")])
def test_an_engines_defaults_refuse_a_degree_or_context_that_is_not_one(tensor, context, argument):
    """``sglang(None, "h100", 0, 8192)`` ended in ``StopIteration``; ``runtime(..., context=None)``
    in ``int()``'s ``TypeError``."""
    from symbolic_cost.inference.engines import runtime, sglang
    refusal(lambda: sglang(None, "h100", tensor, context), argument)
    refusal(lambda: runtime("vllm", None, "h100", tensor, context), argument)


def test_an_engines_defaults_take_sympy_integers():
    """A degree read through ``positive_dims`` is a SymPy ``Integer``: still a count."""
    from sympy import Integer
    from symbolic_cost.inference.engines import runtime
    assert runtime("vllm", None, "h100", Integer(2), Integer(8192)).max_batch == 1024


@pytest.mark.parametrize("args, argument", [((-1, 64, 1024), "devices"), ((8, None, 1024), "global_batch"),
                                            ((8, 64, "x"), "seq")])
def test_why_no_layout_names_its_count(args, argument):
    """``why_no_layout(arch, -1, ...)`` ended in "int() argument must be ... not 'complex'"."""
    from symbolic_cost.models.config import preset
    from symbolic_cost.numeric.layouts import uneven_split, why_no_layout
    refusal(lambda: why_no_layout(preset("gpt2"), *args), argument)
    refusal(lambda: uneven_split(61, "x"), "p")
    assert uneven_split(61, 16) == (2, 3)


def test_accelerates_sequence_parallel_names_the_world_size():
    from symbolic_cost.models.accelerate import sequence_parallel
    size = dict(dp_replicate=1, dp_shard=1, tp=1, cp=1, sp=2)
    refusal(lambda: sequence_parallel({"parallelism_config_sp_size": 2}, size, "DEEPSPEED", None, []), "world")


def test_a_count_may_be_a_sympy_integer_but_not_a_fraction():
    """``checks.count`` takes an exact integer in any of its types, and nothing else."""
    from sympy import Integer
    from symbolic_cost.checks import count
    assert count(Integer(4), "devices") == 4 and type(count(Integer(4), "devices")) is int
    refusal(lambda: count(Fraction(1, 2), "devices"), "devices")
    refusal(lambda: count(Rational(1, 2), "devices"), "devices")


def test_moe_layers_counts_a_deep_stack_instead_of_walking_it():
    """``MoE(...).layers(2**53 + 1)`` walked every layer (it hung); it counts them now, as the
    pattern's rule says (``i >= first_dense``, ``i % every == phase``, not in ``dense_layers``),
    here walked for small stacks."""
    from symbolic_cost.blocks.moe import MoE
    refusal(lambda: MoE(8, 2, 64).layers(HUGE), "n_layers")
    refusal(lambda: MoE(8, 2, 64).layers(0), "n_layers")
    for depth in range(1, 10):
        for first in range(0, 11):
            for every, phase, dense in ((1, 0, ()), (2, 1, (3,)), (3, 2, (2, 5, 5, 30))):
                moe = MoE(8, 2, 64, first_dense=first, every=every, phase=phase, dense_layers=dense)
                walked = sum(1 for i in range(depth) if i >= first and i % every == phase and i not in dense)
                assert moe.layers(depth) == walked, (depth, first, every, phase, dense)


def test_a_head_size_and_a_stage_split_name_their_argument():
    """``Heads(32).value_size(None)`` ended in "unsupported operand type(s) for /", and
    ``stage_layers(30, 4, first='9' * 100000)`` in SymPy's parser."""
    from symbolic_cost.blocks.specs import Heads
    from symbolic_cost.parallel.pipeline import stage_layers
    refusal(lambda: Heads(32).value_size(None), "e")
    refusal(lambda: stage_layers(30, 4, first="9" * 100000), "first_stage_layers")
    refusal(lambda: stage_layers(30, 4, last=-1), "last_stage_layers")


def test_shard_groups_names_the_data_parallel_degree():
    """``shard_groups(arch, 10**400, "all")`` listed the divisors of 10**400 (it hung)."""
    from symbolic_cost.models.config import preset
    from symbolic_cost.numeric.layouts import shard_groups
    refusal(lambda: shard_groups(preset("gpt2"), 10**400, "all"), "d")
    refusal(lambda: shard_groups(preset("gpt2"), 0, "all"), "d")
    assert shard_groups(preset("gpt2"), 8, "all") == [1, 2, 4, 8]


def test_a_sweep_s_tasks_and_rows_are_bounded_before_they_are_made():
    """``row_ranges(10**12, 1)`` built a list of a trillion tasks (a hang); ``grid_rows`` made a
    column of any length asked, past its grid or negative; ``grid_size`` took numpy's product of
    64-bit integers, which wraps: four axes of a million values gave 2,003,764,205,206,896,640
    rows, not 10**24."""
    from symbolic_cost.numeric.grid_tasks import row_ranges
    from symbolic_cost.numeric.sweep import grid_rows, grid_size
    assert "1,000,000,000,000 tasks" in str(refusal(lambda: row_ranges(10**12, 1), "chunk_size"))
    refusal(lambda: row_ranges(10, 0), "chunk_size")
    refusal(lambda: row_ranges(-1, 4), "rows")
    assert row_ranges(0, 4) == [] and row_ranges(5, 5) == [(0, 5)]
    grid = {"b": [1, 2], "m1": [1, 2, 4]}
    for start, stop in ((0, 7), (3, 2), (-1, 2), (0, 10**18), (0.5, 2)):
        refusal(lambda: grid_rows(grid, start, stop), "start")
    assert grid_size({f"x{i}": range(10**6) for i in range(4)}) == 10**24
