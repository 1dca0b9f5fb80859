"""The search's table helpers against pandas doing the same by its own means: ``groups`` against
``DataFrame.groupby(sort=False)``, ``by_stage`` against a concatenation of each group's rows
repeated once per option (on a frame and on a dict of numpy columns), and a variant's top rows
against a search that keeps them all."""

import numpy as np
import pandas as pd
from hypothesis import given, settings, strategies as st

from symbolic_cost import conventions as conv
from symbolic_cost.models.config import preset
from symbolic_cost.numeric.layouts import by_stage, groups, layouts
from symbolic_cost.numeric.search import run_variant, variants
from symbolic_cost.timing.hardware import calibrated

keys = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.sampled_from([1, 2, 4, 8, 1024])),
                min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(keys)
def test_groups_are_pandas_groups_in_order_of_first_appearance(rows):
    table = pd.DataFrame(rows, columns=["a", "b", "c"])
    expected = [(tuple(int(v) for v in key), list(at)) for key, at in
                ((key, table.index[table[["a", "b", "c"]].apply(tuple, axis=1) == key].tolist())
                 for key in dict.fromkeys(map(tuple, rows)))]
    got = [(key, at.tolist()) for key, at in groups([table[c].to_numpy() for c in "abc"])]
    assert got == expected
    pandas_order = [tuple(int(v) for v in key) for key, _ in table.groupby(["a", "b", "c"], sort=False)]
    assert [key for key, _ in got] == pandas_order


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**20)), max_size=30))
def test_groups_of_keys_past_16_bits_and_of_no_rows_are_pandas_groups(rows):
    """Keys spanning more than 2^16 combinations (sorted by rank, not as 16-bit codes), and no rows."""
    table = pd.DataFrame(rows, columns=["a", "b"], dtype=np.int64)
    got = [(key, at.tolist()) for key, at in groups([table["a"].to_numpy(), table["b"].to_numpy()])]
    assert got == [(tuple(int(v) for v in key), part.index.tolist())
                   for key, part in table.groupby(["a", "b"], sort=False)]


@settings(max_examples=200, deadline=None)
@given(keys, st.integers(0, 4))
def test_by_stage_repeats_each_row_once_per_option_group_after_group(rows, most):
    table = pd.DataFrame(rows, columns=["x", "flag", "p"])
    options = lambda p: list(range(1, min(most, p) + 1))  # noqa: E731 (none for most = 0)
    parts = [part.iloc[np.repeat(np.arange(len(part)), len(options(int(p))))].assign(
             n=np.tile(np.asarray(options(int(p)), dtype=np.int64), len(part)))
             for p, part in table.groupby("p", sort=False) if options(int(p))]
    expected = pd.concat(parts, ignore_index=True) if parts else table.iloc[:0].assign(n=[])
    pd.testing.assert_frame_equal(by_stage(table, "n", options), expected)
    columns = by_stage({c: table[c].to_numpy() for c in table.columns}, "n", options)     # the search's form
    assert list(columns) == list(expected.columns)
    assert all(v.dtype == np.int64 and v.tolist() == expected[c].astype(np.int64).tolist() for c, v in columns.items())


def test_a_variants_top_rows_are_the_fastest_of_all_its_fitting_rows():
    """``run_variant`` keeps its 10 fastest rows; asked for every row, the same variant's fitting
    rows sorted by total (stable, pandas) start with those 10, column for column."""
    arch, system = preset("gpt2"), calibrated("h100")
    base = layouts(arch, 16, 64, 1024, (1, 2, 4), ("none", "full"), "all", cp=(1, 2))
    for variant in variants((1, 3), ("none",), ("1f1b", "interleaved"), ("none", "full"), shard="all"):
        task = lambda top: (arch, variant, base, 1024, system, conv.DEFAULT, dict(precision="bf16", flash=True),  # noqa: E731
                            "all", top)
        _, fitting, best = run_variant(task(10))
        _, _, every = run_variant(task(10**9))
        assert len(every) == fitting
        expected = every.sort_values("total", kind="stable").head(10).reset_index(drop=True)
        pd.testing.assert_frame_equal(best.reset_index(drop=True), expected, check_exact=True)
