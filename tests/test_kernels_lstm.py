"""Kernel-level time model, power-budget systems and the LSTM model (issue 8, seed 002).

Expected values come from the seed's printout, from hand counts of the
formulas in the reference note, and from ``reference.tile_walk_loads``, a
simulation of a blocked matmul loop.
"""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy import Rational

from reference import tile_walk_loads
from symbolic_cost import conventions as conv
from symbolic_cost.cli import main
from symbolic_cost.timing.hardware import SYSTEMS, System, comm_time, times
from symbolic_cost.cost import Collective
from symbolic_cost.timing.kernels import gemm, gemm_orientations, kernel_time, tile_edge, tiled_traffic
from symbolic_cost.ops import linear
from symbolic_cost.tools.lstm import LSTM, parameters, recurrent_time
from symbolic_cost.timing.power import PowerBudget, Technology, system_from_power
from symbolic_cost.reproduce import deepflow_lstm
from symbolic_cost.reproduce import deepflow_lstm_printed as printed
from symbolic_cost.symbols import b, e, f, l

TILED = conv.DEFAULT.but(kernel_time="tiled")


# --- seed 002 ---------------------------------------------------------------------------------

def _numbers_printed() -> int:
    """Numbers in the seed outside the two lines that echo the inputs, counted by a regex
    after identifiers (``L2``, ``Cb_act``, ``(gr)``) are blanked."""
    count = 0
    for line in printed.SUMMARY.splitlines():
        if not line.startswith("dp:"):
            count += len(re.findall(r"\d[\d,]*(?:\.\d+)?", re.sub(r"[#(]?[A-Za-z_][\w()]*", " ", line)))
    return count


def test_every_number_of_seed_002_is_reproduced():
    cells = deepflow_lstm.compare()
    assert len(cells) == _numbers_printed()
    assert [c for c in cells if not c.match] == []


def test_seed_002_hand_counts_from_the_reference_note():
    """The worked examples of the reference note, as written there."""
    by_label = {}
    for label, value in deepflow_lstm.ours():
        by_label.setdefault(label, value)
    assert by_label["Cf GEMM_flop"] == 512 * 79872 * (2 * 39936 + 115)
    assert by_label["Embedding_mem"] == 2 * 512 * 19968 * 20 * 4
    V, D, L, G, Pj = 800_000, 19_968, 2, 4, 2048
    assert parameters(deepflow_lstm.MODEL, conv.get("deepflow-2019")) == V * D + L * (2 * D + 1) * G * D + D * Pj + (D + 1) * V
    # the default conventions drop the disabled projection
    assert parameters(deepflow_lstm.MODEL) == V * D + L * (2 * D + 1) * G * D + (D + 1) * V


def test_reproduce_command_prints_a_full_match(tmp_path, capsys):
    assert main(["reproduce", "deepflow-lstm", "--reports", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "deepflow-lstm: matched 271/271 (113 distinct numeric values)"
    assert (tmp_path / "deepflow-lstm.md").exists()


# --- tiled traffic ----------------------------------------------------------------------------

@settings(max_examples=80)
@given(st.integers(1, 160), st.integers(1, 160), st.integers(1, 160), st.sampled_from([4, 8, 16, 32, 64]),
       st.sampled_from([1, 2, 4]))
def test_tiled_traffic_counts_the_loads_of_a_blocked_loop(m, k, n, tile, es):
    assert tiled_traffic(m, k, n, tile, es) == es * sum(tile_walk_loads(m, k, n, tile))


@given(st.integers(1, 10**9), st.sampled_from([1, 2, 4]))
def test_tile_edge_is_the_largest_power_of_two_whose_three_tiles_fit(capacity, es):
    if capacity < 3 * es:
        with pytest.raises(ValueError, match="holds no 3 tiles"):
            tile_edge(capacity, es)
        return
    edge = int(tile_edge(capacity, es))
    assert edge & (edge - 1) == 0
    assert 3 * es * edge**2 <= capacity < 3 * es * (2 * edge) ** 2


SHAPES = st.integers(1, 1 << 16)


@settings(max_examples=80)
@given(SHAPES, SHAPES, SHAPES, st.sampled_from(["a100", "h100"]))
def test_the_chosen_orientation_is_never_slower(m, k, n, name):
    system = SYSTEMS[name]
    chosen = kernel_time(gemm(m, k, n, system), system)
    original, transposed = (kernel_time(g, system) for g in gemm_orientations(m, k, n, system))
    assert chosen == min(original, transposed)
    if original == transposed:
        assert gemm(m, k, n, system) == gemm_orientations(m, k, n, system)[0]


def test_tiled_linear_by_hand():
    """``linear(2, 2048, 4096, 4096)`` on an A100 under ``kernel_time="tiled"``: tiles
    X1 = 2048 (3 * 2 * 2048**2 <= 40 MiB < 3 * 2 * 4096**2) and X2 = 1024 (of 108 * 164 KiB);
    the square product is compute bound, so forward = (4096**2 * 8191 + 4096**2 bias adds)
    / 312e12 + one 4 us launch."""
    a100 = SYSTEMS["a100"]
    t = times(linear(2, 2048, 4096, 4096), a100, TILED)
    assert t["t_fwd"] == Fraction(4096**2 * 8192, 312 * 10**12) + Fraction(4, 10**6)
    dram, l2 = (2 * sum(tile_walk_loads(4096, 4096, 4096, x)) for x in (2048, 1024))
    assert t["t_mem_fwd"] == Fraction(dram, 2039 * 10**9) + Fraction(l2, 5120 * 141 * 10**7)


def test_tiled_times_of_a_symbolic_layer_evaluate_like_the_numeric_layer():
    symbolic = times(linear(b, l, e, f), "a100", TILED)
    for values in ({b: 1, l: 8, e: 64, f: 256}, {b: 4, l: 2048, e: 12288, f: 49152}):
        numeric = times(linear(*values.values()), "a100", TILED)
        for name in ("t_mem_fwd", "t_bwd", "t_total_bwd"):
            assert symbolic[name].xreplace(values) == numeric[name]


def test_the_default_model_is_unchanged_by_the_kernel_fields():
    """Roofline times ignore the memory hierarchy: an A100 without it gives the same table."""
    bare = SYSTEMS["a100"].but(l2_capacity=0, l2_bandwidth=0, shared_memory_capacity=0,
                               memory_latency=0, launch_overhead=0)
    row = linear(4, 2048, 12288, 49152)
    assert times(row, bare) == times(row, "a100")


# --- the LSTM time composition ----------------------------------------------------------------

@pytest.mark.parametrize("cf, cb, r, w, layers, steps, hlp, expected", [
    (1, 2, 1, 0, 2, 3, 1, 6 * 1 + 6 * 2 + 1),           # transfers hidden, Cb >= R: M1 = 6
    (1, 2, 3, 0, 2, 3, 1, 6 * 1 + 5 * 2 + 2 * 3),       # Cb < R: M2 = 5, L/hlp = 2 updates
    (1, 2, 1, 5, 2, 3, 2, 2 + 15 + 4 + 15 + 1),         # W >= Cb L/hlp: (S + hlp - 2) W = 15
    (1, 2, 3, 5, 2, 3, 2, 2 + 15 + 2 * 2 + 15 + 3),     # ... and Cb < R: (L - L/hlp + 1) Cb
    (1, 10, 1, 5, 2, 3, 2, 2 + 15 + 4 * 10 + 5 + 1),    # in between: M1 = 4, W (hlp - 1) = 5
    (1, 10, 20, 5, 2, 3, 2, 2 + 15 + 4 * 10 + 20),      # in between, Cb < R: M2 = 4
])
def test_recurrent_time_six_cases(cf, cb, r, w, layers, steps, hlp, expected):
    assert recurrent_time(cf, cb, r, w, layers, steps, hlp) == expected


# --- bad input --------------------------------------------------------------------------------

TECH = Technology(**printed.TECHNOLOGY)


@pytest.mark.parametrize("make, message", [
    (lambda: PowerBudget(300, Rational(1, 2), Rational(1, 2), Rational(1, 10), Rational(1, 10)),
     "power shares must sum to at most 1"),
    (lambda: PowerBudget(0, Rational(1, 4), Rational(1, 4), Rational(1, 4), Rational(1, 4)), "tdp must be positive"),
    (lambda: PowerBudget(300, Rational(1, 4), Rational(1, 4), Rational(1, 4), Rational(1, 4), compute_derate=2),
     "compute_derate must lie in"),
    (lambda: Technology(**{**printed.TECHNOLOGY, "dram_bit_energy": -1}), "dram_bit_energy must be positive"),
    (lambda: PowerBudget(300, 0.25, 0.25, 0.25, 0.25), "core must be exact"),
    (lambda: times(linear(1, 8, 8, 8), SYSTEMS["a100"].but(l2_capacity=0), TILED),
     "the tiled GEMM model needs l2_capacity"),
    (lambda: comm_time(Collective("allreduce", 10, 2, 4, "bwd", 10), System("chip", 1, 1, 1, 0, 0, 1)),
     "no link for a allreduce over 4 devices"),
    (lambda: LSTM(batch=0), "batch must be a positive integer"),
    (lambda: LSTM(projected=True), "projection must be a positive width"),
    (lambda: conv.DEFAULT.but(kernel_time="fast"), "kernel_time must be one of"),
])
def test_bad_hardware_and_model_descriptions_are_refused(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_power_budget_builds_the_seed_chip_by_hand():
    """The reference note's derivation: 77.76 W / 11.9 pJ * 0.7 FLOP/s, 77.76 W / 48 pJ * 0.7 B/s,
    capacity = 1.62e12 / (225 GiB/s) * 4 GiB."""
    chip = deepflow_lstm.SYSTEM
    assert chip.matrix_flops == Fraction(7776, 100) / Fraction(119, 10**13) * Fraction(7, 10)
    assert chip.hbm_bandwidth == Fraction(7776, 100) / Fraction(48, 10**12) * Fraction(7, 10)
    assert chip.hbm_capacity == Fraction(162 * 10**10, 225) * 4
    assert system_from_power("x", PowerBudget(**printed.POWER), TECH).ib_bandwidth == 0


def test_a_symbolic_lstm_evaluates_to_the_seed_time():
    """The step time with batch and steps symbolic, at the seed's values, is the printed 302.88817584 s."""
    from dataclasses import replace
    from symbolic_cost.tools.lstm import step_time
    symbolic = step_time(replace(deepflow_lstm.MODEL, batch=b, steps=l), deepflow_lstm.SYSTEM, conv.get("deepflow-2019"))
    assert symbolic.free_symbols == {b, l}
    assert f"{float(symbolic.xreplace({b: 512, l: 20})):.8f}" == "302.88817584"


def test_lstm_and_kernel_time_commands(capsys):
    assert main(["lstm", "--from", "deepflow-lstm"]) == 0     # the seed's model, chip and conventions, named
    out = capsys.readouterr().out
    assert "38.37 billion parameters, step time 302.888 s" in out
    assert main(["table", "--kernel-time", "tiled", "--system", "h100"]) == 0
    assert "kernel_time='tiled'" in capsys.readouterr().out


_SYMBOLIC_LSTM = {}


def _symbolic_step_time():
    from symbolic_cost.tools.lstm import step_time
    if not _SYMBOLIC_LSTM:
        model = LSTM(layers=3, hlp=3, lp=2)   # batch, steps, hidden, vocab symbolic; transfers between groups
        _SYMBOLIC_LSTM["t"] = step_time(model, SYSTEMS["h100"], conv.get("deepflow-2019"))
    return _SYMBOLIC_LSTM["t"]


@settings(max_examples=25)
@given(st.integers(1, 4096), st.integers(1, 64), st.integers(1, 8192), st.integers(2, 10**6))
def test_symbolic_lstm_step_time_equals_the_numeric_model(batch, steps, hidden, vocab):
    """Every Piecewise and Heaviside choice of the symbolic step time lands where the numeric
    model's decided comparisons do."""
    from symbolic_cost.tools.lstm import step_time
    from symbolic_cost.symbols import v
    numeric = step_time(LSTM(batch, steps, hidden, vocab, layers=3, hlp=3, lp=2), SYSTEMS["h100"], conv.get("deepflow-2019"))
    assert _symbolic_step_time().xreplace({b: batch, l: steps, e: hidden, v: vocab}) == numeric


def test_data_parallel_allreduce_by_hand():
    """Ring allreduce of 1e9 fp32 gradients over dp = 2 on a toy chip (IB 10 GB/s, 1 us per step):
    transfers 2 (dp - 1)(4e9 / 2 / 1e10 + 1e-6) s; one reduction kernel of 5e8 adds moving
    3 * 4 * 5e8 bytes at 1 TB/s, memory bound, plus a 10 us launch."""
    from symbolic_cost.tools.lstm import allreduce_time
    chip = System("toy", 10**12, 10**12, 10**12, 10**11, 10**10, 1, ib_latency=Rational(1, 10**6),
                  launch_overhead=Rational(1, 10**5))
    model = LSTM(2, 1, 1, 1, 1, dp=2)           # a sequence a replica: the gradients do not depend on it
    expected = 2 * (Fraction(4 * 10**9, 2 * 10**10) + Fraction(1, 10**6)) + Fraction(6 * 10**9, 10**12) + Fraction(1, 10**5)
    assert allreduce_time(10**9, model, chip) == expected
    assert allreduce_time(10**9, LSTM(1, 1, 1, 1, 1), chip) == 0
