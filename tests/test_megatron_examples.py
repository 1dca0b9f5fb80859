"""Every version of Megatron-LM's ``examples/**/*.sh`` in its public history (1,177 distinct files from
NVIDIA/Megatron-LM up to d98e8a64ddf34856e74b24714e3bedb2f5a39553, 2026-08-22; ``MANIFEST.tsv`` names each
file's blob, a commit that holds it and its path; the files, unchanged, in ``examples.tar.xz``), read by
``--megatron-args``: each is read or refused with one line naming what it cannot read (programs other
than pretrain_gpt.py, options it does not read, values a script leaves to its caller), and nothing
raises anything else.  Some, read, are checked by hand against what they say."""

from __future__ import annotations

import csv
import lzma
import pathlib
import tarfile
from functools import lru_cache

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.models.launch_script import read_launch
from symbolic_cost.models.megatron_args import megatron_setup
from symbolic_cost.models.megatron_words import inert
from symbolic_cost import symbols as S

CORPUS = pathlib.Path(__file__).resolve().parent / "framework_inputs" / "megatron_lm_examples"


@lru_cache(maxsize=None)
def scripts() -> dict:
    """``{blob: (commit, path, text)}`` of the corpus."""
    with open(CORPUS / "MANIFEST.tsv", newline="") as manifest:
        rows = {row["blob"]: (row["commit"], row["path"]) for row in csv.DictReader(manifest, delimiter="\t")}
    with lzma.open(CORPUS / "examples.tar.xz") as packed, tarfile.open(fileobj=packed) as archive:
        texts = {member.name.removesuffix(".sh"): archive.extractfile(member).read().decode("utf-8", "replace")
                 for member in archive.getmembers()}
    assert set(texts) == set(rows)
    return {blob: (*rows[blob], texts[blob]) for blob in rows}


def setup(blob: str, world=None, vocab=None):
    commit, path, text = scripts()[blob]
    return megatron_setup(read_launch(text, f"--megatron-args {pathlib.Path(path).name}", inert=inert),
                          pathlib.Path(path).stem, world=world, vocab=vocab)


def test_every_script_reads_or_is_refused_in_one_line():
    read = 0
    for blob in scripts():
        try:
            setup(blob)
            read += 1
        except InputError as error:
            assert error.args[0].strip() and "\n" not in error.args[0].strip(), (scripts()[blob][1], error)
            assert "\x00" not in error.args[0], (scripts()[blob][1], error)     # the reader's unknown-value marker
    assert read >= 50, read


def test_the_345m_example_of_august_2021():
    """examples/pretrain_gpt.sh at c1e0689d9: 24 layers of 1024, 16 heads, micro-batch 4 of global 8 on the one
    process ``python pretrain_gpt.py`` starts (2 micro-batches), fp16, ``--activations-checkpoint-method
    uniform`` (1 layer a chunk), GPT-2's 50,257 tokens padded to 50,304 (a multiple of 128).  Parameters by hand:
    24 x (12 x 1024^2 + 13 x 1024) + 50304 x 1024 + 1024 x 1024 (positions) + 2 x 1024 (final norm)."""
    got = setup("c85527166b16f7c381302aa622b0cfaeb0b0bbc9")
    assert (got.values[S.b], got.values[S.d], got.values[S.n_micro], got.values[S.l]) == (4, 1, 2, 1024)
    assert (got.policy["recompute"], got.policy["recompute_method"], got.policy["recompute_layers"]) == \
        ("full", "uniform", 1)
    assert got.policy["precision"] == "fp16" and got.arch.vocab == 50257
    from symbolic_cost.models.totals import model_cost
    from symbolic_cost.models.training import Training
    parameters = model_cost(got.arch, Training(b=4, l=1024)).parameters
    assert parameters == 24 * (12 * 1024 ** 2 + 13 * 1024) + 50304 * 1024 + 1024 * 1024 + 2 * 1024 == 354_871_296
    assert any("starts one process" in note for note in got.notes)


@pytest.mark.parametrize("blob", ["6e0a2fecd085", "ddd3f160fa75"])
def test_megatron_fsdp_examples(blob):
    """examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh (two versions): 8 processes on one node,
    micro-batch 1 of global 128 (16 micro-batches), 8192 tokens, ``--use-megatron-fsdp`` with the strategy
    optim_grads_params (ZeRO-3, no distributed optimizer), FP8 weights gathered in FP8 (delayed scaling:
    Megatron-LM's default recipe with ``--fp8-param-gather``); its tokenizer is the caller's (``--vocab-size``)."""
    full = next(b for b in scripts() if b.startswith(blob))
    got = setup(full, vocab=128256)
    assert (got.values[S.d], got.values[S.b], got.values[S.n_micro], got.values[S.l]) == (8, 1, 16, 8192)
    assert (got.policy["zero"], got.policy["distributed_optimizer"], got.policy["fp8"]) == (3, False, "fp8-params")


BASE = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --micro-batch-size 1 --global-batch-size 4 "
        "--seq-length 32 --max-position-embeddings 32 --tokenizer-type NullTokenizer --vocab-size 99 ")


@pytest.mark.parametrize("words, field, expected", [
    ("--activations-checkpoint-method block --activations-checkpoint-num-layers 1", "recompute_method", "block"),
    ("--checkpoint-activations --activations-checkpoint-num-layers 2", "recompute_layers", 2),
    ("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads", "zero", 2),
    ("--use-custom-fsdp --data-parallel-sharding-strategy optim", "zero", 1),
    ("--use-megatron-fsdp", "zero", 0),
    ("--use-torch-fsdp2", "zero", 3),
    ("--optimizer sgd", "optimizer", "sgd"),
    ("", "optimizer", "adam"),
])
def test_older_and_newer_options_as_megatron_reads_them(words, field, expected):
    """Megatron-LM's arguments.py: from August 2021 ``--activations-checkpoint-method`` (uniform, block) with
    ``--activations-checkpoint-num-layers``, ``--checkpoint-activations`` then meaning uniform; Megatron-FSDP's
    ``--data-parallel-sharding-strategy`` (default no_shard) sharding the optimizer, then the gradients, then
    the parameters; FSDP2 all three; ``--optimizer`` adam by default."""
    got = megatron_setup(read_launch(BASE + words, "args"), "args", world=4)
    assert got.policy[field] == expected


def test_no_position_embedding_drops_the_learned_table():
    learned = megatron_setup(read_launch(BASE, "args"), "args", world=4).arch
    dropped = megatron_setup(read_launch(BASE + "--no-position-embedding", "args"), "args", world=4).arch
    assert learned.positions == 32 and dropped.positions == 0


def test_zero_beside_a_script_that_shards_is_refused(tmp_path, capsys):
    from symbolic_cost.cli import main
    path = tmp_path / "args.txt"
    path.write_text(BASE + "--use-torch-fsdp2")
    assert main(["summary", "--megatron-args", str(path), "--devices", "4", "--zero", "1"]) == 2
    assert "the script's FSDP decides it" in capsys.readouterr().err
    assert main(["summary", "--megatron-args", str(path), "--devices", "4", "--json"]) == 0


def test_a_comment_ending_in_a_backslash_continues_nothing():
    """Megatron-LM's examples/llama/train_llama3.sh (2024) comments an option out between two quoted blocks,
    ``#--data-path $DATA_PATH \\``: bash continues no comment, so the next line (``OUTPUT_ARGS="``) opens its
    quote as a line of its own (read as a continuation, the quote was left open)."""
    text = ('GPT_ARGS="\n --num-layers 2 \\\n"\n#--data-path $DATA_PATH \\\nOUT="\n --log-interval 1\n"\n'
            'torchrun --nproc_per_node 1 pretrain_gpt.py $GPT_ARGS $OUT\n')
    assert read_launch(text, "x").program == ["--num-layers", "2", "--log-interval", "1"]
