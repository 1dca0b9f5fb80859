"""Honest counts and negative controls of the five reproductions (issue 12, item 5).

* Each reproduction matches every cell under its tool's preset, and its count of distinct
  numeric values equals a count made here, independently, from its ``*_printed`` data.
* Negative controls: changing ONE field of the preset gives mismatches (a lower bound derived
  by hand for each) and never an exception, for every field and every alternative value.
* Every compared cell is a printed value (no internal check counted as a match), and the
  Megatron training-info bytes per parameter follow the library's precision rule.
"""

import csv
import io
import re
from dataclasses import fields
from decimal import Decimal, InvalidOperation

import pytest

from symbolic_cost import conventions as conv
from symbolic_cost import reproduce
from symbolic_cost.reproduce import (deepflow_lstm_printed, deepspeed_profiler_printed, lbnl_2024_printed,
                                     megatron_training_info_printed, ulysses_prefill_printed)

PRESETS = {"lbnl-2024": "lbnl-2024", "ulysses-prefill": "pycomm-prefill",
           "megatron-training-info": "megatron-training-info", "deepspeed-profiler": "deepspeed-profiler",
           "deepflow-lstm": "deepflow-2019"}
CELLS = {"lbnl-2024": 454, "ulysses-prefill": 94, "megatron-training-info": 50, "deepspeed-profiler": 219,
         "deepflow-lstm": 271}


def _mismatched(name, **change):
    """The cells that do not match once one field of the reproduction's preset is changed."""
    changed = conv.get(PRESETS[name]).but(**change)
    return [c for c in reproduce.module(name).compare(conventions=changed) if not c.match]


# ---------------------------------------------------------------- full match under the preset

@pytest.mark.parametrize("name", list(PRESETS))
def test_every_cell_matches_under_the_tools_preset(name):
    cells = reproduce.module(name).compare(conventions=conv.get(PRESETS[name]))
    assert len(cells) == CELLS[name]
    assert [c for c in cells if not c.match] == []


# ---------------------------------------------------------------- negative controls

def _alternatives():
    """(field, value) for every value a field may take other than the preset's."""
    for item in fields(conv.Conventions):
        yield from ((item.name, value) for value in conv._CHOICES.get(item.name, (True, False)))


@pytest.mark.parametrize("name", list(PRESETS))
def test_no_single_convention_change_raises(name):
    """Every one-field change of the preset compares (matching or not) without an exception,
    cell for cell."""
    preset = conv.get(PRESETS[name])
    for field, value in _alternatives():
        if getattr(preset, field) != value:
            cells = reproduce.module(name).compare(conventions=preset.but(**{field: value}))
            assert len(cells) == CELLS[name], (field, value)


def _printed_rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def test_lbnl_ring_volumes_change_every_printed_volume():
    """Ring volumes are (m1 - 1)/m1 = 3/4 of the whole tensor the notebook prints (0.050332 GB
    -> 0.037749 GB), so every non-empty printed comm_fwd/comm_bwd volume must mismatch:
    3 in the MLP table and 5 in the SA table, counted here from the printed CSV."""
    volumes = {(table, row["layer"], column)
               for table, text in (("MLP", lbnl_2024_printed.MLP_TABLE), ("SA", lbnl_2024_printed.SA_TABLE))
               for row in _printed_rows(text) for column in ("comm_fwd", "comm_bwd") if row[column]}
    assert len(volumes) == 8
    mismatched = {(c.table, c.row, c.column) for c in _mismatched("lbnl-2024", collective_volume="ring")}
    assert volumes <= mismatched


def test_pycomm_exact_products_change_two_flop_lines():
    """Under ``mn(2k-1)`` instead of ``2mnk`` (summed over the 16 GPUs, in TFLOPs at 2
    decimals): QKV 3 N d (2d - 1) and QK^T h N^2 (2 d/h - 1) differ from the printed 96.64 and
    117.96; AV h N (d/h) (2N - 1) and the output N d (2d - 1) round as printed."""
    N, d, h = 60000, 16384, 128
    exact = {"qkv_proj": 3 * N * d * (2 * d - 1), "logits": h * N * N * (2 * (d // h) - 1),
             "attend": h * N * (d // h) * (2 * N - 1), "out_proj": N * d * (2 * d - 1)}
    printed = dict(zip(exact, re.findall(r"^flops: ([\d.]+)", ulysses_prefill_printed.LINES, re.M)))
    changed = {row for row, value in exact.items() if f"{value / 1e12:.2f}" != printed[row]}
    assert changed == {"qkv_proj", "logits"}
    assert {c.row for c in _mismatched("ulysses-prefill", matmul_flops="exact")} == changed


def test_megatron_optimizer_bytes_follow_the_precision_rule():
    """ZeRO's 12 optimizer bytes per parameter instead of Megatron's 16 (fp16): the whole
    model's 771,106,304 parameters x 12 B = 8.6 GiB (printed 11.5), half of it per GPU under
    the distributed optimizer = 4.3 GiB (printed 5.7), and the total demand drops by 4 B per
    parameter (2.9 GiB) from 23.3."""
    mismatched = {(c.table, c.row): c.ours for c in _mismatched("megatron-training-info",
                                                                  mixed_precision="zero")}
    P = 771_106_304
    assert mismatched[("full model", "Optimizers(Adam) States")] == str(round(P * 12 / 2**30, 1)) == "8.6"
    assert mismatched[("each GPU", "Optimizers(Adam) States")] == str(round(P * 6 / 2**30, 1)) == "4.3"
    assert ("full model", "Total memory demand") in mismatched
    assert len(mismatched) >= 3


def test_deepspeed_exact_products_change_every_768_by_768_linear():
    """Under ``mn(2k-1)`` a BERT Linear of 768 -> 768 over 4 x 128 tokens books
    512 x 768 x 1535 / 2 = 301.79 M MACs instead of 512 x 768 x 768 = 301.99 M: every printed
    "301.99 MMACs" (query, key, value, the self-output dense and its module) must mismatch."""
    assert f"{512 * 768 * 768 / 1e6:.2f}" == "301.99" and f"{512 * 768 * 1535 / 2 / 1e6:.2f}" == "301.79"
    printed = deepspeed_profiler_printed.BERT.count("301.99 MMACs")
    assert printed == 5
    mismatched = [c for c in _mismatched("deepspeed-profiler", matmul_flops="exact") if c.printed == "301.99 MMACs"]
    assert len(mismatched) == printed and all(c.ours == "301.79 MMACs" for c in mismatched)


def test_deepflow_uncounted_projection_is_a_mismatch_not_a_crash():
    """Without the disabled projection (default conventions), the parameters lose D x Pj:
    V D + L (2D + 1) G D + (D + 1) V = 38.33 billion (printed 38.37), and the two printed
    "Projection Memory" lines have nothing to compare with: at least 3 mismatches."""
    V, D, L, G = 800_000, 19_968, 2, 4
    mismatched = _mismatched("deepflow-lstm", lstm_count_disabled_projection=False)
    by_label = {}
    for c in mismatched:
        by_label.setdefault(c.column, []).append(c.ours)
    assert by_label["#Parameters"] == [f"{(V * D + L * (2 * D + 1) * G * D + (D + 1) * V) / 1e9:.2f}"] == ["38.33"]
    assert by_label["Projection Memory"] == ["(missing)", "(missing)"]
    assert len(mismatched) >= 3


# ---------------------------------------------------------------- honest counts

def _number(text):
    """A printed number as a Decimal (thousands commas dropped), or None."""
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def _lbnl_printed():
    texts = [value for text in (lbnl_2024_printed.MLP_TABLE, lbnl_2024_printed.SA_TABLE)
             for row in _printed_rows(text) for column, value in row.items() if column != "Unnamed: 0"]
    texts += [line.split()[1] for sums in (lbnl_2024_printed.MLP_SUMS, lbnl_2024_printed.SA_SUMS)
              for line in sums.splitlines()]
    return texts + [lbnl_2024_printed.MLP_COMM_FRACTION, lbnl_2024_printed.SA_COMM_FRACTION]


def _ulysses_printed():
    texts = []
    for line in ulysses_prefill_printed.LINES.splitlines():
        if line.startswith("head per GPU") or line.startswith("P: "):
            texts += re.findall(r"\d+", line)
        elif "torch.Size" in line:          # shape (a list), elements, size
            texts += [re.search(r"Size\(\[(.*)\]\)", line).group(1), re.search(r"elements: (\d+)", line).group(1),
                      re.search(r"size:? ([\d.]+) [MG]B", line).group(1)]
        elif line.startswith("flops:") or "memory allocation" in line:
            texts.append(re.search(r"([\d.]+) (?:TFLOPs|GB)$", line).group(1))
    return texts


def _megatron_printed():
    return [text for *_, text in megatron_training_info_printed.PRINTED]


def _deepspeed_printed():
    """The compared numbers of both profiles: summary lines, params and MACs per depth, and
    params, % params, MACs, % MACs of every module (the Megatron example: MACs only; its
    parameters are ZeRO-3 placeholders)."""
    texts = []
    summaries = {"BERT": ["params per device", "params of model = params per device * mp_size",
                          "fwd MACs per device", "fwd flops per device",
                          "fwd flops of model = fwd flops per device * mp_size", "Number of flops",
                          "Number of MACs", "Number of parameters"],
                 "MEGATRON": ["fwd MACs per device", "fwd flops per device",
                              "fwd flops of model = fwd flops per device * mp_size"]}
    module = re.compile(r"([\d.]+)(?: [kMG])?, ([\d.]+)% Params, ([\d.]+)(?: [GMK]?MACs| MACs), ([\d.]+)% MACs")
    for name, labels in summaries.items():
        text = getattr(deepspeed_profiler_printed, name)
        with_params = name == "BERT"
        for line in text.splitlines():
            label, _, value = line.partition(":")
            if label in labels:
                texts.append(value.split()[0])
            elif line.strip().startswith(("params ", "MACs ")) and (with_params or "MACs" in line):
                texts += re.findall(r"': '([\d.]+)", line)
            for found in module.findall(line):
                texts += list(found) if with_params else list(found[2:])
    return texts


def _deepflow_printed():
    texts = []
    for line in deepflow_lstm_printed.SUMMARY.splitlines():
        if not line.startswith("dp:"):
            texts += re.findall(r"\d[\d,]*(?:\.\d+)?", re.sub(r"[#(]?[A-Za-z_][\w()]*", " ", line))
    return texts


PRINTED = {"lbnl-2024": _lbnl_printed, "ulysses-prefill": _ulysses_printed,
           "megatron-training-info": _megatron_printed, "deepspeed-profiler": _deepspeed_printed,
           "deepflow-lstm": _deepflow_printed}


@pytest.mark.parametrize("name", list(PRESETS))
def test_distinct_numeric_values_counted_from_the_printed_data(name, tmp_path):
    texts = PRINTED[name]()
    assert len(texts) == CELLS[name]       # the same cells the reproduction compares
    distinct = len({value for value in map(_number, texts) if value is not None})
    assert 0 < distinct < CELLS[name]
    outcome = reproduce.run(name, tmp_path)
    assert outcome.distinct == distinct
    line = f"matched {CELLS[name]}/{CELLS[name]} ({distinct} distinct numeric values)"
    assert outcome.line == f"{name}: {line}"
    assert f"**{line}**" in (tmp_path / f"{name}.md").read_text()


@pytest.mark.parametrize("text, value", [
    ("0.0", Decimal(0)), ("0", Decimal(0)), ("2.5e-05", Decimal("0.000025")), ("771,106,304", Decimal(771106304)),
    ("122.88 MB", Decimal("122.88")), ("44.7 GMACs", Decimal("44.7")), ("", None), ("-", None),
    ("nvlink", None), ("3750, 16384", None), ("[n0_g0 n0_g1]", None), ("non-empty", None), ("1.5 2", None)])
def test_what_counts_as_a_printed_number(text, value):
    assert reproduce.printed_number(text) == value


def test_equal_numbers_count_once():
    cells = [reproduce.Cell("t", "r", "c", text, "", True) for text in ("0", "0.0", "0.00 MB", "1", "x", "")]
    assert reproduce.distinct_numbers(cells) == 2


# ---------------------------------------------------------------- every cell is a printed value

DATA = {"lbnl-2024": lambda: "".join([lbnl_2024_printed.MLP_TABLE, lbnl_2024_printed.SA_TABLE,
                                      lbnl_2024_printed.MLP_SUMS, lbnl_2024_printed.SA_SUMS,
                                      lbnl_2024_printed.MLP_COMM_FRACTION, lbnl_2024_printed.SA_COMM_FRACTION]),
        "ulysses-prefill": lambda: ulysses_prefill_printed.LINES,
        "deepspeed-profiler": lambda: deepspeed_profiler_printed.BERT + deepspeed_profiler_printed.MEGATRON,
        "deepflow-lstm": lambda: deepflow_lstm_printed.SUMMARY}


@pytest.mark.parametrize("name", list(DATA))
def test_every_compared_cell_is_printed_by_the_seed(name):
    """No internal check (such as PyComm's fitted allocator constant) poses as a printed cell."""
    text = DATA[name]()
    assert [c for c in reproduce.module(name).compare() if c.printed not in text] == []


def test_pycomm_fitted_transient_is_not_a_cell_but_stated():
    cells = reproduce.module("ulysses-prefill").compare()
    assert not any("transient" in c.row for c in cells)
    assert "not compared" in reproduce.module("ulysses-prefill").PREAMBLE
