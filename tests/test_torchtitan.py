"""torchtitan's rules as ``models.torchtitan`` writes them, against counts by hand from torchtitan's
code (``FeedForward.__init__`` and ``generate_llm_fqn_per_model_part``) and Llama 3's published
widths (14,336, 28,672 and 53,248: the ``intermediate_size`` of meta-llama's 8B, 70B and 405B
config.json).  Fast: ``tests/mutations.py`` runs it."""

import pathlib
import re

import pytest

from symbolic_cost.models.torchtitan import FLAVORS, hidden_dim, stage_layers


def test_feedforward_widths():
    """4 dim, two thirds (int), times ffn_dim_multiplier (int), rounded up to multiple_of: 8B 16384 -> 10922 ->
    14198 -> 14336; 70B 32768 -> 21845 -> 28398 -> 28672; 405B 65536 -> 43690 -> 52428 -> 53248; the debug model
    1024 -> 682 -> (no multiplier) -> 768."""
    widths = {name: hidden_dim(a["dim"], a["ffn_dim_multiplier"], a["multiple_of"]) for name, a in FLAVORS.items()}
    assert widths == {"debugmodel": 768, "8B": 14336, "70B": 28672, "405B": 53248}


def test_pipeline_cut():
    """layers + 1 + 1 weighted layers over the stages, the first ``extra`` stages one more, the embedding's weight
    off the first stage and the output's off the last (worked out by hand for each)."""
    assert stage_layers(32, 2, 1, 1) == [16, 16]      # 34 = 17 + 17
    assert stage_layers(32, 3, 1, 1) == [11, 11, 10]  # 34 = 12 + 11 + 11
    assert stage_layers(32, 4, 1, 1) == [8, 9, 8, 7]  # 34 = 9 + 9 + 8 + 8
    assert stage_layers(80, 4, 1, 1) == [20, 21, 20, 19]  # 82 = 21 + 21 + 20 + 20
    assert stage_layers(32, 4, 0, 0) == [8, 8, 8, 8]
    assert stage_layers(30, 4, 2, 0) == [6, 8, 8, 8]  # 32 = 8 x 4


def torchtitan_checkpointed(layers: int, frequency: int) -> int:
    """torchtitan's ``_apply_ac_to_transformer_block`` with a layer frequency: a counter kept across
    the blocks it wraps, incremented before the test, wraps a block when ``count % frequency == 0``."""
    count = wrapped = 0
    for _ in range(layers):
        count += 1
        wrapped += count % frequency == 0
    return wrapped


def test_activation_checkpoint_frequency_counts_the_layers_torchtitan_wraps():
    """Issue 66's blind spot: the selective layer frequency ``N`` of ``[activation_checkpoint]`` (Llama 3
    8B's 32 layers, one stage) recomputes the blocks torchtitan's counter wraps, every ``N``-th."""
    from symbolic_cost.models.torchtitan import torchtitan_setup
    text = (pathlib.Path(__file__).parent / "framework_inputs" / "llama3_8b.toml").read_text()
    for frequency in (1, 2, 3, 5, 7, 32, 33):
        job = text.replace('selective_ac_option = "op"', f'selective_ac_option = "{frequency}"')
        policy = torchtitan_setup(job, "llama3-8b", world=8).policy
        wrapped = torchtitan_checkpointed(32, frequency)
        if wrapped:
            assert (policy["recompute"], policy["recompute_method"], policy["recompute_layers"]) == \
                ("full", "block", wrapped), frequency
        else:
            assert policy["recompute"] == "none", frequency


@pytest.mark.parametrize("line, message", [("seq_len = 0", "[training] seq_len must be at least 1, got 0"),
                                           ("batch_size = 100000000000000000000000",
                                            "[training] batch_size must be at most 2**53")])
def test_a_sequence_of_nothing_or_a_batch_past_a_double_is_refused_by_its_key(line, message):
    """The reader names the TOML's key (``l=0`` used to be refused later, naming ``l``; a batch of
    10^23 sequences was accepted), as ``from_config`` caps a config.json's fields at 2**53."""
    from symbolic_cost.checks import InputError
    from symbolic_cost.models.config import preset
    from symbolic_cost.models.torchtitan import torchtitan_setup
    text = (pathlib.Path(__file__).parent / "framework_inputs" / "debug_model.toml").read_text()
    key = line.split(" = ")[0]
    text = "\n".join(line if row.startswith(f"{key} = ") else row for row in text.splitlines())
    with pytest.raises(InputError, match=re.escape(message)):
        torchtitan_setup(text, "debug_model.toml", 8, vocab=2000)
