"""Megatron-LM launch scripts and model files as published (issue 65): the shell they are written in
(loops over the script's own arguments, here-documents, ``${NAME}`` in arithmetic, repeated options,
values set under tests the reader cannot decide) and the options of Megatron-LM's latent-attention
and MoE models (``--multi-latent-attention``, ``--moe-layer-freq`` lists, sigmoid routers).

The published files are read from ``tests/framework_inputs/megatron_lm_examples`` (NVIDIA/Megatron-LM's
``examples/**/*.sh`` through its history, by blob; ``test_megatron_examples.py``).  Expected numbers
come from the models' publishers, not from the library: Llama-2-70B's 68,976,648,192 parameters
(Meta's release at 32,000 tokens) and DeepSeek-V2-Lite's 15,706,484,224 (its ``transformers`` model,
as ``tests/test_moe.py`` pins it); the rest are read off the scripts by hand.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

from symbolic_cost import symbols as S
from symbolic_cost.blocks.specs import Latent
from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.launch_script import read_launch
from symbolic_cost.models.megatron_args import megatron_setup
from symbolic_cost.models.megatron_words import inert, parse

from test_megatron_examples import scripts, setup

AMD_LLAMA2 = "01b81278f5b5dd61af6e27f8d5661a970c9a3c83"
"""examples/llama/train_llama2.sh at 98edb377 (AMD's): a ``for ARGUMENT in "$@"`` parser of KEY=VALUE
overrides, ``${NUM_HEADS} / ${NUM_KV_HEADS}`` in ``$(( ))``, GPUS_PER_NODE from ``python3 -c``."""
DEEPSEEK_V2_LITE = "fdaccbd9651c107c1e913096a18758f1d23bebb9"
"""examples/post_training/modelopt/conf/deepseek-ai/DeepSeek-V2-Lite.sh at bf687df047: ``MODEL_ARGS`` only."""
GPT3_SCHEDULE = "0b4977b42881e55d286815d96d51ec41f65e0d7f"
"""examples/gpt3/train_gpt3_175b_distributed.sh at 12db36f2fc: ``--step-batch-size-schedule`` beside
``--global-batch-size 1536``."""


def _parameters(s, l=1024) -> int:
    return int(model_cost(s.arch, Training(b=1, l=l)).parameters)


def test_amd_llama2_reads_at_its_defaults():
    """No arguments given, the loop over them does not run: MODEL_SIZE 70 (80 layers of 8192, 64 heads in
    8 groups, 28,672 wide), TP 8, sequences of 4,096, micro-batch 1 of a global batch of 8."""
    s = setup(AMD_LLAMA2, world=8, vocab=32000)
    a = s.arch
    assert (a.n_layers, a.e, a.h, a.kv_heads, a.f) == (80, 8192, 64, 8, 28672)
    assert (s.values[S.m1], s.values[S.l], s.values[S.b], s.values[S.n_micro]) == (8, 4096, 1, 8)
    assert _parameters(s) == 68_976_648_192
    assert any("loop over the script's arguments" in note for note in s.notes)


def test_the_deepseek_v2_lite_model_file():
    """MODEL_ARGS alone: latent attention (kv rank 512, no query latent, 128 + 64 query/key dims, 128
    value dims), 64 experts of 1,408 with 2,816 shared, the first of 27 layers dense (``([0]+[1]*26)``)."""
    s = setup(DEEPSEEK_V2_LITE, world=8, vocab=102400)
    a = s.arch
    assert a.latent == Latent(kv_rank=512, rope_dim=64, nope_dim=128, v_dim=128, q_rank=None)
    assert (a.moe.experts, a.moe.top_k, a.moe.expert_f, a.moe.shared_f) == (64, 6, 1408, 2816)
    assert (a.moe.first_dense, a.moe.dense_layers, a.moe.router) == (1, (), "softmax")
    assert _parameters(s) == 15_706_484_224
    assert any("MODEL_ARGS" in note for note in s.notes)


def _model(extra: str, layers: int = 4) -> str:
    return (f"--num-layers {layers} --hidden-size 256 --num-attention-heads 4 --seq-length 128 "
            f"--max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 --tokenizer-type NullTokenizer "
            f"--vocab-size 1000 --swiglu --num-experts 8 --moe-ffn-hidden-size 64 --moe-router-topk 2 {extra}")


def _setup(words: str, world=8):
    return megatron_setup(read_launch(f"torchrun --nproc_per_node {world} pretrain_gpt.py {words}", "s", inert=inert), "s")


@pytest.mark.parametrize("freq, first, dense", [("([0]*2+[1]*2)", 2, ()), ("[1,0,1,0]", 0, (1, 3)),
                                                ("'[0]+[1]*3'", 1, ())])
def test_moe_layer_lists(freq, first, dense):
    moe = _setup(_model(f"--moe-layer-freq {freq}")).arch.moe
    assert (moe.first_dense, moe.dense_layers, moe.every) == (first, dense, 1)
    assert moe.layers(4) == 4 - first - len(dense)


@pytest.mark.parametrize("freq", ["([0]+[1]*2)", "[0,1,2,1]", "__import__('os')", "[1]*10**9", "[1]*100000*100000"])
def test_moe_layer_lists_refused(freq):
    with pytest.raises(InputError, match="--moe-layer-freq"):
        _setup(_model(f"--moe-layer-freq {freq}"))


def test_routers_as_megatron_scores_them():
    """Megatron-Core's ``topk_routing_with_score_function``: softmax over the chosen k (default), softmax
    before the choice (``--moe-router-pre-softmax``), sigmoid then normalised over the k chosen (k > 1)."""
    assert _setup(_model("")).arch.moe.router == "topk_softmax"
    assert _setup(_model("--moe-router-pre-softmax")).arch.moe.router == "softmax"
    sigmoid = _setup(_model("--moe-router-score-function sigmoid --moe-router-topk-scaling-factor 2.5")).arch.moe
    assert (sigmoid.router, sigmoid.normalise, sigmoid.scale) == ("sigmoid", True, True)
    # the softmax before the choice is not read beside sigmoid scores (the softmax branch reads it)
    both = _setup(_model("--moe-router-score-function sigmoid --moe-router-pre-softmax"))
    assert both.arch.moe == _setup(_model("--moe-router-score-function sigmoid")).arch.moe
    assert any("Megatron-Core ignores it" in note for note in both.notes)


def test_latent_attention_needs_its_norms_and_its_switch():
    with pytest.raises(InputError, match="--qk-layernorm"):
        _setup(_model("--multi-latent-attention --kv-lora-rank 64"))
    with pytest.raises(InputError, match="--kv-lora-rank applies to --multi-latent-attention"):
        _setup(_model("--kv-lora-rank 64"))
    latent = _setup(_model("--multi-latent-attention --qk-layernorm --q-lora-rank 96")).arch.latent
    assert latent == Latent(kv_rank=32, rope_dim=64, nope_dim=128, v_dim=128, q_rank=96)   # Megatron's defaults


def test_an_option_given_again_replaces_it():
    """argparse (Megatron-LM's parser) keeps the last value; a read option's differing values are noted."""
    notes = []
    options = parse("--seq-length 64 --fp16 --seq-length 128 --fp16 --tokenizer-type A --tokenizer-type A".split(),
                    notes)
    assert options["seq-length"] == ["128"] and options["fp16"] == [] and options["tokenizer-type"] == ["A"]
    assert notes == ["--seq-length is given 2 times; the last stands, as in Megatron-LM's parser: --seq-length 128"]


def test_loops_over_arguments_here_documents_and_undecided_values():
    text = """#!/bin/bash
TP=2
for ARG in "$@"; do
  KEY=$(echo $ARG | cut -f1 -d=)
  TP=8
done
while [[ $# -gt 0 ]]; do
  case $1 in
    --tp) TP="$2"; shift 2;;
  esac
done
cat <<EOT > ds_config.json
{
  "zero_optimization": {
    "stage": 1
  },
  "x": 1 }
EOT
if [ ! -d "$TOKENIZER" ]; then
  export HF_TOKEN="hf_xxxx"
fi
HEADS=4; GROUPS_OF=2
torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP --num-layers 2 --hidden-size 64 \\
  --num-attention-heads ${HEADS} --group-query-attention --num-query-groups $(( ${HEADS} / ${GROUPS_OF} )) \\
  --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 4 \\
  --tokenizer-type NullTokenizer --vocab-size 1000
"""
    launch = read_launch(text, "s", inert=inert)
    words = launch.program
    assert words[words.index("--tensor-model-parallel-size") + 1] == "2"
    assert words[words.index("--num-query-groups") + 1] == "2"
    assert sum("loop over the script's arguments" in note for note in launch.notes) == 2
    with pytest.raises(InputError, match=r"--num-query-groups is \$\(\(\$\{HEADS\}/\$\{GROUPS_OF\}\)\), whose value"):
        _setup_text(text.replace("GROUPS_OF=2", "GROUPS_OF=3"))            # 4 / 3: the shell truncates; not read


UNDECIDED = """#!/bin/bash
MODEL_ARGS=" --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
if [[ -z "${MEGATRON_LM_ROOT}" ]]; then
    MEGATRON_LM_ROOT=$(realpath "$(dirname "$0")"/../../)
    NP=${NP:-$(cat "$HOSTFILE" | grep -v '^#' | awk '{s += $1} END {print s}')}
fi
OUTPUT_ARGS=" --log-interval 1 --seq-length 128 "
if [ -n "$SAVE_PATH" ]; then
    OUTPUT_ARGS="$OUTPUT_ARGS --save-interval 100 --save ${SAVE_PATH}"
    CKPT=( --load "$SAVE_PATH" --exit-on-missing-checkpoint )
fi
TP=1
if [ -v TP ]; then PP=1; else PP=2; fi
torchrun --nproc_per_node 8 pretrain_gpt.py ${MODEL_ARGS[@]} $OUTPUT_ARGS ${CKPT[@]} \\
  --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP \\
  --max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 \\
  --tokenizer-type NullTokenizer --vocab-size 1000
"""


def test_values_under_undecided_tests_as_bash_sets_them():
    """Under ``[ -n "$SAVE_PATH" ]`` (the environment's, unknown) a command's output is an unknown
    value, checkpoint and logging options change no count (their paths unknown), and ``-v`` of a
    variable the script sets is true; ``${MODEL_ARGS[@]}`` of a string is the string, as bash expands it."""
    launch = read_launch(UNDECIDED, "s", inert=inert)
    words = launch.program
    assert words[:7] == "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --log-interval".split()
    assert words[words.index("--pipeline-model-parallel-size") + 1] == "1"
    assert sum("set under a test the reader cannot decide" in note for note in launch.notes) == 2
    assert _setup_text(UNDECIDED).values[S.d] == 8


@pytest.mark.parametrize("change, refused", [
    ('--save ${SAVE_PATH}"', '--sequence-parallel"'),                  # an option that changes a count
    ('"$SAVE_PATH" --exit', '"$SAVE_PATH" $EXTRA --exit'),             # an unknown word in an option's place
    ("TP=1\n", 'TP=1\nIFS="," read -r TP PP <<< "$CONFIG"\n'),        # read sets what it reads: unknown
])
def test_values_under_undecided_tests_refused(change, refused):
    text = UNDECIDED.replace(change, refused, 1)
    assert text != UNDECIDED
    with pytest.raises(InputError, match=r"cannot decide|\$TP, whose value the script does not decide"):
        _setup_text(text)


def _setup_text(text):
    return megatron_setup(read_launch(text, "s", inert=inert), "s")


def test_a_batch_schedule():
    """The schedule alone times the batch it ends at; beside --global-batch-size Megatron-LM refuses it
    ('Cannot specify both'), and so does the reader.  The published GPT-3 example gives both, its schedule
    in an array expanded unquoted, six words where Megatron's option takes one: refused either way."""
    schedule = '--step-batch-size-schedule "0:16 2.4B:320 12B:1536"'
    s = _setup(_model(schedule).replace("--global-batch-size 8 ", ""), world=16)
    assert s.values[S.b] * s.values[S.d] * s.values[S.n_micro] == 1536
    assert any("the batch the schedule ends at, 1536" in note for note in s.notes)
    with pytest.raises(InputError, match="Cannot specify both"):
        _setup(_model(schedule), world=16)
    with pytest.raises(InputError, match="--step-batch-size-schedule"):
        setup(GPT3_SCHEDULE, world=1024, vocab=50257)


def test_devices_replace_a_count_the_launch_computes():
    text = ('GPUS=`python3 -c "import torch; print(torch.cuda.device_count())"`\n'
            "torchrun --nproc_per_node $GPUS pretrain_gpt.py " + _model(""))
    with pytest.raises(InputError, match="give --devices"):
        _setup_text(text)
    assert megatron_setup(read_launch(text, "s", inert=inert), "s", world=8).values[S.d] == 8


def test_options_that_change_no_count_are_read():
    """Megatron-LM's ``--rope-type`` (rope or yarn: the same rotary products), ``--enable-experimental``,
    ``--fp8-margin`` and ``--fp8-interval`` (delayed scaling's margin and update interval),
    ``--disable-gloo-process-groups`` and ``--export-force-local-attention`` (an export's) change no
    count: the layout is the one without them.  The flex dispatcher is read as the library's
    (``Experts.dispatcher``), its backend with a note; Megatron-LM's default dispatcher, ``allgather``
    (``arguments.py``), is timed as the all-to-all one, and said so."""
    plain = _setup(_model(""))
    quiet = _setup(_model("--rope-type yarn --enable-experimental --fp8-margin 0 --fp8-interval 1 "
                          "--disable-gloo-process-groups --export-force-local-attention"))
    assert (quiet.values, quiet.policy) == (plain.values, plain.policy)
    assert any("allgather (Megatron-LM's default)" in note for note in plain.notes)
    flex = _setup(_model("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"))
    assert flex.policy == {**plain.policy, "dispatcher": "flex"} and any("DeepEP" in note for note in flex.notes)
    assert not any("allgather" in note for note in flex.notes)
    alltoall = _setup(_model("--moe-token-dispatcher-type alltoall"))
    assert alltoall.policy == {**plain.policy, "dispatcher": "alltoall"} and alltoall.notes == [
        note for note in plain.notes if "allgather" not in note]
    with pytest.raises(InputError, match="--moe-token-dispatcher-type ring: the library reads allgather"):
        _setup(_model("--moe-token-dispatcher-type ring"))


GPT_OSS_120B = "9bc6142375d4c6b1503cc8198965d8697a473a76"
"""examples/post_training/modelopt/conf/openai/gpt-oss-120b.sh at 6ec369d4a1: ``MODEL_ARGS`` of
GPT-OSS-120B (``--quick-geglu``, ``--softmax-type learnable``, ``--window-size 127,0``,
``--window-attn-skip-freq 2``, ``--enable-gpt-oss``, ``--padded-vocab-size 201088``)."""
GPT_OSS_TRAIN = "2659b17cc19b4918015295601b68b6612006df1f"
"""examples/gptoss/02_train.sh at 12db36f2fc: a 12-layer GPT-OSS-style model of 512 for a benchmark."""


def test_gpt_oss_120b_as_its_model_file_gives_it():
    """116,829,156,672 parameters, GPT-OSS-120B's (OpenAI's model card: 116.8 B; the same count from
    its config.json, ``test_hf_families``): ``--enable-gpt-oss`` makes the positions YaRN's rotary
    ones (``post_training/model_builder.py``), no learned table; biases everywhere (Megatron-LM's
    ``add_bias_linear``: attention, router and experts); a sink per head; a 128-key window (127 back
    and the token) on layers 1, 3, 5, ... (1-based, ``is_layer_window_attention``: ``n % 2 != 0``)."""
    s = setup(GPT_OSS_120B, world=8)
    a = s.arch
    assert _parameters(s) == 116_829_156_672
    assert (a.windows.window, a.windows.windowed_layers, a.windows.window_pattern[:4]) == (128, 18, (True, False) * 2)
    assert a.attention.sinks and a.feedforward.moe.router_bias and a.feedforward.moe.expert_bias
    assert any("--glu-linear-offset" in note for note in s.notes)


def test_gpt_oss_benchmark_script_by_hand():
    """02_train.sh's model: 12 layers of 512, 64 heads of 8 in 8 groups, no biases
    (``--disable-bias-linear``), 4 experts of 2,048 (2 a token, gated), a sink per head, untied
    NullTokenizer vocabulary of 128,256 + 1 padded to 128,384."""
    e, heads, groups, head, experts, width, vocab = 512, 64, 8, 8, 4, 2048, 128_384
    attention = 2 * e * heads * head + 2 * e * groups * head + heads      # q, o; k, v; the sinks
    layer = attention + 2 * e + e * experts + experts * (e * 2 * width + width * e)
    assert _parameters(setup(GPT_OSS_TRAIN, world=8)) == 12 * layer + 2 * vocab * e + e == 289_576_192


def test_a_window_pattern_as_a_list():
    """``--window-attn-skip-freq`` as a list of 0 and 1 a layer (1: windowed), as ``moe_freq_type`` reads it."""
    a = _setup(_model("--window-size 63,0 --window-attn-skip-freq '[1,1,0,1]'")).arch
    assert (a.windows.window, a.windows.window_pattern) == (64, (True, True, False, True))


@pytest.mark.parametrize("words, argument", [("--window-size 128,64", "--window-size"),
                                             ("--window-attn-skip-freq 2", "--window-attn-skip-freq"),
                                             ("--window-size 127,0 --window-attn-skip-freq '[1,0]'",
                                              "--window-attn-skip-freq"),
                                             ("--softmax-type off-by-one", "--softmax-type")])
def test_gpt_oss_options_refused(words, argument):
    with pytest.raises(InputError) as info:
        _setup(_model(words))
    assert info.value.argument == argument


ROCM_LLAMA2 = "004bf7d5d0a117d8b82678014407db4f90e7d461"
"""examples/llama/train_llama2.sh at fe353fddf (ROCm's Llama-2 example): its launch kept in
``run_cmd``, then ``run_cmd="$run_cmd |& tee $TRAIN_LOG"`` and ``eval $run_cmd``."""


def test_a_launch_ends_at_its_pipe():
    """The program's words end where bash's command does, at ``|&``: ``--optimizer adam`` (the last
    option before it) keeps its one value; ``2>&1``, ``>`` and ``&&`` end it too."""
    s = setup(ROCM_LLAMA2, world=8, vocab=32000)
    assert s.policy["optimizer"] == "adam" and (s.arch.n_layers, s.arch.e) == (80, 8192)     # MODEL_SIZE 70
    for tail in ("2>&1 | tee log", "> log 2>&1", ">>$LOG", "&& echo done", "; echo done", "&> log"):
        words = read_launch("torchrun --nproc_per_node 8 pretrain_gpt.py " + _model("") + " " + tail, "s",
                            inert=inert).program
        assert words == read_launch("torchrun --nproc_per_node 8 pretrain_gpt.py " + _model(""), "s",
                                    inert=inert).program, tail


GPT_OSS_20B = "1eac4e5edd06e6f3605fc72cfae7b5f50e30c882"
"""examples/gptoss/training_gptoss_20b_h100_bf16_fp8.sh at f2ffcc5af: GPT-OSS-20B with
``--position-embedding-type yarn``, ``--padded-vocab-size 201088``."""


def test_gpt_oss_20b_script_with_yarn_positions():
    """YaRN's rotary positions are rope's work (other frequencies, a scale folded into cos and sin).
    Parameters by hand: 24 layers of attention (q 2880 x 4096, k and v 2880 x 512, o 4096 x 2880, their
    biases 4096 + 2 x 512 + 2880, 64 sinks), 32 experts (2880 x 5760 + 5760 and 2880 x 2880 + 2880), a
    router 2880 x 32 + 32 and two norms of 2880; the untied 201,088-token embedding and head, the final
    norm."""
    s = setup(GPT_OSS_20B, world=8)
    attention = 2 * 2880 * 4096 + 2 * 2880 * 512 + 4096 + 2 * 512 + 2880 + 64
    experts = 32 * (2880 * 5760 + 5760 + 2880 * 2880 + 2880)
    layer = attention + experts + 2880 * 32 + 32 + 2 * 2880
    assert _parameters(s) == 24 * layer + 2 * 201088 * 2880 + 2880 == 20_914_757_184
    assert any("yarn" in note for note in s.notes)
    assert s.arch.rotary


@pytest.mark.parametrize("launch, world", [
    ('srun --ntasks=8 --mpi=pmix bash -c "cd /w && python pretrain_gpt.py {words}" 2>&1 | tee log', 8),
    ('srun -N 2 --ntasks-per-node 4 sh -c "export A=1; python pretrain_gpt.py {words}"', 8),
    ('srun --ntasks-per-node=4 python pretrain_gpt.py {words}', 4),
])
def test_a_launch_given_as_a_string_under_srun(launch, world):
    """``srun`` starts its ``--ntasks`` (or ``--ntasks-per-node`` x ``--nodes``) processes, one
    each; a launch given to ``bash -c``/``sh -c`` as one string is that string's last command."""
    s = megatron_setup(read_launch(launch.format(words=_model("")), "s", inert=inert), "s")
    assert s.values[S.d] == world
    assert s.arch.n_layers == 4 and s.policy == _setup(_model("")).policy
    logged = 'log "starting python pretrain_gpt.py now"\n' + launch.format(words=_model(""))   # a message, no launch
    assert read_launch(logged, "s", inert=inert).program == read_launch(launch.format(words=_model("")), "s").program


def test_a_null_tokenizer_vocabulary_with_its_end_of_document():
    """Megatron-LM's NullTokenizer adds an end-of-document id to ``--vocab-size``, unless
    ``--null-tokenizer-vocab-includes-eod`` says the size holds it (``build_tokenizer.py``)."""
    assert _setup(_model("")).arch.vocab == 1001
    assert _setup(_model("--null-tokenizer-vocab-includes-eod")).arch.vocab == 1000


GPT2_2020 = "1d7462504c9c3f305cd1613599a7ae9794a64779"
"""examples/pretrain_gpt2_distributed.sh at 1f45adccd (2020): ``pretrain_gpt2.py`` with Megatron-LM's
names of then, ``--model-parallel-size 1`` and ``--batch-size 8`` (each data-parallel rank's), on
8 processes of ``torch.distributed.launch``, ``--checkpoint-activations``, GPT-2's vocabulary."""


def test_the_gpt2_program_of_2020_and_its_names():
    """24 layers of 1024 (GPT-2 medium, "345M"): parameters by hand as in the 2021 example, 8
    sequences a rank on 8 ranks, full recomputation; both names of one option are refused."""
    s = setup(GPT2_2020)
    assert _parameters(s) == 24 * (12 * 1024 ** 2 + 13 * 1024) + 50304 * 1024 + 1024 * 1024 + 2 * 1024
    assert (s.values[S.b], s.values[S.d], s.values[S.n_micro], s.values[S.m1]) == (8, 8, 1, 1)
    assert s.policy["recompute"] == "full" and any("--batch-size" in note for note in s.notes)
    with pytest.raises(InputError, match="--batch-size and --micro-batch-size together"):
        _setup(_model("--batch-size 1"))


GPT3_175B_SRUN = "1820ce21878322a95fb8b55a72fa671d274d1ca5"
"""examples/pretrain_gpt3_175B.sh at 090e141cc: ``run_cmd="python -u .../pretrain_gpt.py $@ ${options}"``
run by ``srun ... sh -c "${run_cmd}"`` (no task count: the SLURM job's)."""


def test_a_launch_string_with_the_scripts_arguments():
    """``$@`` is none of them (the script read as run without arguments); srun without
    ``--ntasks`` runs the tasks of the job's ``#SBATCH --nodes=128 --ntasks-per-node=8``: 1,024.
    GPT-3 175B by hand: 96 layers of 12,288, GPT-2's vocabulary padded to 50,304 (the model's own
    count pads to 128; a tensor rank's table to 128 x 8), 2,048 positions; tensor 8 x pipeline 16
    leaves 8 data-parallel ranks, 1,536 / (1 x 8) = 192 micro-batches."""
    s = setup(GPT3_175B_SRUN, vocab=50257)
    e = 12288
    assert _parameters(s) == 96 * (12 * e * e + 13 * e) + 50304 * e + 2048 * e + 2 * e
    assert (s.values[S.m1], s.values[S.p], s.values[S.d], s.values[S.n_micro]) == (8, 16, 8, 192)
    assert any("#SBATCH allocation (--nodes=128 --ntasks-per-node=8)" in note for note in s.notes)
    assert setup(GPT3_175B_SRUN, world=512, vocab=50257).values[S.d] == 4


@pytest.mark.parametrize("srun,world", [("srun", 32), ("srun -N 2", 16), ("srun --ntasks 4", 4)])
def test_srun_takes_the_allocation_unless_it_counts_its_own(srun, world):
    """``srun`` inside a job runs on the job's allocation; its own ``-N``/``--ntasks`` replace it."""
    text = (f"#!/bin/bash\n#SBATCH --nodes=4 --ntasks-per-node=8 --job-name=x\n"
            f"{srun} python pretrain_gpt.py {_model('--global-batch-size 64')}\n")
    assert _setup_text(text).values[S.d] == world
    if srun == "srun":
        with pytest.raises(InputError, match="srun's --ntasks"):
            _setup_text(text.replace("#SBATCH", "# SBATCH"))       # not a directive: no count


MIXTRAL = "c8d2c9f837c503e57d47c05ed32871f6d998bda3"
"""examples/mixtral/train_mixtral_8x7b_distributed.sh at 157006d6: ``--tokenizer-type Llama2Tokenizer``
with ``--tokenizer-model ${TOKENIZER_MODEL}``, the script's second argument."""


def test_a_tokenizer_written_for_one_vocabulary():
    """Llama2Tokenizer reads Llama 2's SentencePiece model (32,000 pieces, Mixtral's too): Mixtral-8x7B's
    46,702,792,704 parameters, as its ``transformers`` model counts them (32,000 tokens); a GPT-2 tokenizer
    given another vocabulary file needs the size."""
    s = setup(MIXTRAL, world=64)
    assert _parameters(s) == 46_702_792_704
    assert any("Llama2Tokenizer: --tokenizer-model is not decided by the script" in note for note in s.notes)
    assert _setup(_model("").replace("--tokenizer-type NullTokenizer --vocab-size 1000",
                                     "--vocab-file gpt2-vocab.json")).arch.vocab == 50257
    with pytest.raises(InputError, match="GPT2BPETokenizer's files"):
        _setup(_model("").replace("--tokenizer-type NullTokenizer --vocab-size 1000",
                                  "--vocab-file /data/gpt-neox-20b-tokenizer/vocab.json"))


SC21_SRUN = "52a9aff0c1294acb1e5527faad4f73fe5e027e21"
"""examples/sc21/SRUN.sh at 4076ab38: ``python -u .../pretrain_gpt.py ${MEGATRON_PARAMS}``, the options
left to the caller's environment."""


def test_options_the_script_leaves_to_its_caller_are_named():
    with pytest.raises(InputError, match=r"the first Megatron argument is \$MEGATRON_PARAMS, whose value the "
                                         r"script does not decide"):
        setup(SC21_SRUN, world=8)


def test_quoted_arrays_and_a_job_script_given_to_sbatch():
    """``"${A[@]}"`` is a word for each element (an array grown from itself keeps its options apart, an
    empty one gives no word); ``sbatch <<EOF`` runs its here-document as the job's script, whose
    ``srun ... bash -x -c "${CMD}"`` is the launch (examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh)."""
    model = _model("").split()
    text = ("ARGS=(\n" + "\n".join(model[:6]) + "\n)\nARGS=(\n\"${ARGS[@]}\"\n" + "\n".join(model[6:]) +
            "\n--tensorboard-dir \"a b\"\n)\nEMPTY=()\n"
            "CMD=\"\ncd /w;\nexport A=1;\npython pretrain_gpt.py ${ARGS[@]} \\\"${EMPTY[@]}\\\"\"\n"
            "sbatch <<EOF\n#!/bin/bash\n#SBATCH --nodes=1\nsrun --ntasks=8 bash -x -c \"${CMD}\" 2>&1 | tee log\nEOF\n"
            "echo submitted\n")
    launch = read_launch(text, "s", inert=inert)
    assert launch.program == model + ["--tensorboard-dir", "a", "b"]
    assert _setup_text(text).arch == _setup(_model("")).arch
    assert read_launch('A=(--x "p q")\nE=()\npython pretrain_gpt.py "${A[@]}" "${E[@]}" --y ""', "s").program \
        == ["--x", "p q", "--y", ""]
    document = "cat <<EOF > notes.txt\npython pretrain_gpt.py --num-layers 1\nEOF\n"
    assert read_launch(document + "python pretrain_gpt.py " + _model(""), "s").program == model


def test_multi_token_prediction_modules():
    """``--mtp-num-layers 1``: one module on the last stage, beside the head; its parameters by hand
    (Megatron-LM's MultiTokenPredictionLayer): enorm, hnorm and its final norm (RMSNorm: e each),
    eh_proj (2e x e, no bias), and one more layer of the model's (Q, K, V and output 4e^2, the MLP
    2ef, two norms 2e)."""
    words = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 256 --seq-length 1024 "
             "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8 --tokenizer-type "
             "NullTokenizer --vocab-size 1000 --disable-bias-linear --normalization RMSNorm ")
    plain, mtp = _setup(words), _setup(words + "--mtp-num-layers 1 --mtp-loss-scaling-factor 0.1")
    e, f = 64, 256
    assert mtp.arch.mtp_layers == 1
    assert _parameters(mtp) - _parameters(plain) == 3 * e + 2 * e * e + (4 * e * e + 2 * e * f + 2 * e)


BERT_WITH_MP = "3225d1d65db0f64f7145e026abab9472eb7e0365"
"""examples/pretrain_bert_distributed_with_mp.sh at 152aab30: BERT-large (24 layers of 1024, 16 heads,
512 tokens) on 8 processes, tensor and pipeline degree 2, micro-batch 2 of global 16, the uncased
vocabulary file ``bert-vocab.txt``."""


def _hf_bert_parameters(head: str, vocab: int, token_types: int) -> int:
    """Parameters of ``transformers``' BERT-large with ``head`` (``BertForPreTraining``,
    ``BertForMaskedLM``), built on the meta device.  Megatron-LM's BERT has the same tensors but
    one norm moved: a final norm after its pre-norm layers where BERT normalises its embeddings."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    config = transformers.BertConfig(vocab_size=vocab, hidden_size=1024, num_hidden_layers=24,
                                     num_attention_heads=16, intermediate_size=4096, type_vocab_size=token_types)
    with torch.device("meta"):
        model = getattr(transformers, head)(config)
    return sum(p.numel() for p in model.parameters())


def test_megatron_bert_as_transformers_counts_it():
    """``pretrain_bert.py``: bidirectional attention, two token types, the masked-LM head and the
    binary head over the pooler, the decoder tied to the word table; the uncased vocabulary's 30,522
    tokens and Megatron's [BOS] and [EOS] padded to 128 x 2 (30,720 on a tensor rank; 30,592 in the
    model's own count, padded to 128)."""
    s = setup(BERT_WITH_MP)
    assert (s.values[S.b], s.values[S.m1], s.values[S.p], s.values[S.d], s.values[S.n_micro]) == (2, 2, 2, 2, 4)
    assert not s.arch.causal and s.arch.vocab == 30524
    assert _parameters(s, 512) == _hf_bert_parameters("BertForPreTraining", 30592, 2) == 336_297_858
    words = ("--num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 512 "
             "--max-position-embeddings 512 --micro-batch-size 2 --global-batch-size 16 --vocab-file bert-vocab.txt ")
    launch = "torchrun --nproc_per_node 8 pretrain_bert.py "
    plain = megatron_setup(read_launch(launch + words + "--bert-no-binary-head", "s", inert=inert), "s")
    assert _parameters(plain, 512) == _hf_bert_parameters("BertForMaskedLM", 30592, 0)
    cased = megatron_setup(read_launch(launch + words.replace("bert-vocab.txt", "bert-large-cased-vocab.txt") +
                                       "--tokenizer-type BertWordPieceCase --vocab-extra-ids 100", "s"), "s")
    assert cased.arch.vocab == 28996 + 2 + 100


T5_WITH_MP = "23f1cd664e34f2b8e8ba33e4d246c9ce0c48e35a"
"""examples/pretrain_t5_distributed_with_mp.sh at ef5d4fca: T5 "base" (12 layers of 768, 12 heads of 64,
MLP 3,072), 512 encoder and 128 decoder tokens, tensor degree 2 on 8 processes, micro-batch 16 of global
128, ``t5-vocab.txt`` (BERT's uncased vocabulary, as Megatron-LM's README says) with 100 extra ids."""


def test_megatron_t5_by_hand():
    """Megatron-LM's T5 module by module: one word table (30,522 + [BOS], [EOS] + 100 extra ids =
    30,624 tokens, padded to 30,720) and one position table (512) for both stacks; 12 encoder layers
    (12e^2 + 13e each, as GPT's) and a final LayerNorm; 12 decoder layers (self-attention 4e^2 + 4e,
    cross-attention 4e^2 + 4e, MLP 8e^2 + 5e, three LayerNorms 6e) and a final LayerNorm; the head
    tied to the word table, with a bias of 30,720."""
    s = setup(T5_WITH_MP)
    assert (s.values[S.b], s.values[S.l], s.values[S.l_dec], s.values[S.m1], s.values[S.d], s.values[S.n_micro]) \
        == (16, 512, 128, 2, 4, 2)
    e, vocab = 768, 30720
    encoder, decoder = 12 * e * e + 13 * e, 16 * e * e + 19 * e
    hand = vocab * e + 512 * e + 12 * encoder + 2 * e + 12 * decoder + 2 * e + vocab
    assert s.arch.vocab == 30624 and int(model_cost(s.arch, Training(b=1, l=512, l_dec=128)).parameters) == hand


def _t5(words: str, decoder="--decoder-seq-length 32"):
    base = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --encoder-seq-length 128 --max-position-embeddings "
            "128 --micro-batch-size 1 --global-batch-size 8 --vocab-file bert-vocab.txt ")
    return megatron_setup(read_launch(f"torchrun --nproc_per_node 8 pretrain_t5.py {base}{decoder} {words}", "s",
                                      inert=inert), "s")


def test_megatron_t5_relative_positions_and_refusals():
    """Relative positions: no position table, a table of 32 buckets per head in each stack."""
    learned, relative = _t5(""), _t5("--position-embedding-type relative")
    parameters = lambda s: int(model_cost(s.arch, Training(b=1, l=128, l_dec=32)).parameters)  # noqa: E731
    assert parameters(relative) - parameters(learned) == 2 * 32 * 4 - 128 * 64
    with pytest.raises(InputError, match="--decoder-num-layers 3 beside 2 encoder layers"):
        _t5("--decoder-num-layers 3")
    with pytest.raises(InputError, match="T5 runs on one pipeline stage"):
        _t5("--pipeline-model-parallel-size 2")
    with pytest.raises(InputError, match="--seq-length and --encoder-seq-length together"):
        _t5("--seq-length 128")
    with pytest.raises(InputError, match="--decoder-seq-length is required"):
        _t5("", decoder="")


@pytest.mark.parametrize("launcher, world", [("torchrun", 1), ("torchrun --nnodes 2 --master-port 29600", 2),
                                             ("python -m torch.distributed.launch", 1)])
def test_torchrun_without_a_count_starts_one_process_a_node(launcher, world):
    """torchrun's ``--nproc-per-node`` is 1 unless given (as ``torch.distributed.launch``'s was):
    Megatron-LM's single-GPU T5 example runs ``torchrun pretrain_t5.py``."""
    s = megatron_setup(read_launch(f"{launcher} pretrain_gpt.py {_model('')}", "s", inert=inert), "s")
    assert (s.values[S.d], s.values[S.n_micro]) == (world, 8 // world)
    assert any("torchrun without --nproc_per_node starts one process a node" in note for note in s.notes)


def test_a_script_that_runs_another_program_is_named_so():
    """A launcher's options held in a variable are not a model's: the script runs another program."""
    text = 'DISTRIBUTED_ARGS="--nproc_per_node 8 --nnodes 1"\npython -m torch.distributed.launch $DISTRIBUTED_ARGS ' \
           'tasks/main.py --task RACE\n'
    with pytest.raises(InputError, match="no line runs pretrain_gpt.py"):
        read_launch(text, "s")
    model = 'MODEL_ARGS="--num-layers 2 --hidden-size 64"\n'
    assert read_launch(model, "s").program == ["--num-layers", "2", "--hidden-size", "64"]


def test_squared_relu_and_options_named_by_a_command():
    """``--squared-relu`` (Nemotron's) is a plain MLP of one activation, e -> f -> e with no gate,
    where SwiGLU's fc1 is e -> 2f (ef weights and f biases more a layer); an option whose name comes from a
    command's output is refused, naming the command."""
    words = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 256 --seq-length 128 "
             "--max-position-embeddings 128 --micro-batch-size 1 --tokenizer-type NullTokenizer --vocab-size 9 ")
    s = _setup(words + "--squared-relu --deterministic-mode --trust-remote-code")
    assert s.arch.mlp == "relu" and any("--squared-relu: counted as ReLU" in note for note in s.notes)
    assert _parameters(_setup(words + "--swiglu"), 128) - _parameters(s, 128) == 2 * (64 * 256 + 256)  # 2 layers
    text = 'G=$(nvidia-smi --query-gpu=name)\ntorchrun --nproc_per_node 8 pretrain_gpt.py ' + words + '--$G 1'
    with pytest.raises(InputError, match=r"an option's name is \$\(nvidia-smi\)"):
        _setup_text(text)


@pytest.mark.parametrize("words, named", [("--bf16 $X", "the word after --bf16 is $X"),
                                          ("--hidden-size $X", "--hidden-size is $X"),
                                          ("--hidden-size $(( $(nproc) - 2 ))", "--hidden-size is $")])
def test_undecided_values_are_named_without_the_readers_marker(words, named):
    text = "torchrun --nproc_per_node 8 pretrain_gpt.py " + _model(words)
    with pytest.raises(InputError, match=re.escape(named)) as refused:
        _setup_text(text)
    assert "\x00" not in refused.value.args[0]


def test_a_quote_an_expansion_leaves_open_is_named():
    """A value holding a quote, put into an array or a test unquoted, leaves shlex a quote it cannot
    close: refused naming the text, not a ValueError."""
    for text in ("Q='\"'\nA=(--x $Q)\npython pretrain_gpt.py ${A[@]}\n",
                 "Q='\"'\nif [ $Q == 1 ]; then\nB=1\nfi\npython pretrain_gpt.py --x\n"):
        with pytest.raises(InputError, match="is not closed"):
            read_launch(text, "s")


def test_megatron_fsdp_gradient_dtypes_are_noted():
    """Megatron-FSDP's gradient dtypes (examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh gives both as
    bf16) are noted, as --grad-reduce-in-bf16 is: the gradient bytes follow the conventions."""
    s = _setup(_model("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params "
                      "--megatron-fsdp-grad-comm-dtype bf16 --megatron-fsdp-main-grads-dtype bf16"))
    assert s.policy["zero"] == 3 and any("--megatron-fsdp-grad-comm-dtype" in note for note in s.notes)


GROUPS = """#!/bin/bash
L=4
X=1
for f in a b; do
  [ -e "$f" ] || { echo "missing $f" >&2; exit 1; }
done
if [ "$X" = 1 ]; then
  H=64
else
  H=32
fi
[ "$X" = 1 ] || { L=9; }
[ "$X" = 1 ] && { HEADS=4; }
{ SEQ=128; }
torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers $L --hidden-size $H --num-attention-heads $HEADS \\
  --seq-length $SEQ --max-position-embeddings $SEQ --micro-batch-size 1 --global-batch-size 8 \\
  --tokenizer-type NullTokenizer --vocab-size 1000
"""
"""Command groups ``{ ...; }`` after ``||`` and ``&&`` and on their own (examples/mamba/train_dsa_gqa.sh:
``[ -e "$f" ] || { echo "...: missing $f" >&2; exit 1; }`` inside a loop and an ``if``)."""


def test_command_groups_as_bash_runs_them(tmp_path):
    """bash itself is the oracle: the script run with a ``torchrun`` that prints its words (the
    files the loop tests exist), against the words the reader takes.  A group's ``}`` closes the
    group, not the loop or the ``if`` around it."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash on this machine")
    (tmp_path / "a").write_text(""), (tmp_path / "b").write_text("")
    stub = "torchrun() { printf '%s\\n' \"$@\"; exit 0; }\n"
    ran = subprocess.run([bash, "-c", stub + GROUPS], cwd=tmp_path, capture_output=True, text=True, check=True)
    launch = read_launch(GROUPS, "s", inert=inert)
    assert ran.stdout.split("\n")[:-1] == launch.launcher[1:] + [launch.entry] + launch.program
    assert _setup_text(GROUPS).arch.n_layers == 4


DEFAULTS = """#!/bin/bash
if [ -z "$NUM_LAYERS" ]; then
  NUM_LAYERS=4
fi
if [[ -z ${DATA_ARGS} ]]; then DATA_ARGS="--seq-length 128 --max-position-embeddings 128"; fi
HIDDEN=64
if [ -z "$HIDDEN" ]; then HIDDEN=32; fi
torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers $NUM_LAYERS --hidden-size $HIDDEN \\
  --num-attention-heads 4 $DATA_ARGS --micro-batch-size 1 --global-batch-size 8 \\
  --tokenizer-type NullTokenizer --vocab-size 1000
"""
"""``if [ -z "$NAME" ]; then NAME=...; fi``, the shell's spelling of ``NAME=${NAME:-...}``
(Megatron-LM's ``examples/post_training/modelopt/train.sh``: ``MLM_DATA_ARGS``, ``MLM_MODEL_SAVE``)."""


def test_a_default_set_where_the_script_finds_a_variable_unset_as_bash_runs_it(tmp_path):
    """bash, run with an empty environment, is the oracle: the reader takes the value the script
    gives a variable it finds unset, as it takes ``${NAME:-default}``, and says so in a note; a
    variable the script set before is not unset, so its branch does not run."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash on this machine")
    stub = "torchrun() { printf '%s\\n' \"$@\"; exit 0; }\n"
    ran = subprocess.run([bash, "-c", stub + DEFAULTS], cwd=tmp_path, capture_output=True, text=True, check=True,
                         env={"PATH": os.environ.get("PATH", "")})
    launch = read_launch(DEFAULTS, "s", inert=inert)
    assert ran.stdout.split("\n")[:-1] == launch.launcher[1:] + [launch.entry] + launch.program
    assert [n.split(" is given")[0] for n in launch.notes] == ["line 3: NUM_LAYERS", "line 5: DATA_ARGS"]
    # a variable the script reads (or computes) is not the environment's: its test stays undecided
    for sets in ("read -r NUM_LAYERS < layers.txt", "NUM_LAYERS=$(cat layers.txt)"):
        computed = read_launch(DEFAULTS.replace("#!/bin/bash\n", f"#!/bin/bash\n{sets}\n"), "s", inert=inert)
        assert computed.program[computed.program.index("--num-layers") + 1] != "4", sets
    # any other assignment under such a test stays undecided: its options are refused
    with pytest.raises(InputError, match="line 5: an assignment sits under a test the reader cannot decide"):
        read_launch(DEFAULTS.replace('then DATA_ARGS="', 'then OTHER_ARGS="'), "s", inert=inert)


def test_a_refusal_names_the_line_of_the_file():
    """Lines joined by a backslash, and a quote over three lines, above the ``if``: its assignment is on line 10
    of the file, counted by hand (continuation lines were joined before counting, so it was named line 8)."""
    script = ("#!/bin/bash\n# two\nA=1 \\\n  B=2\nC=\"x\ny\nz\"\n\nif [ -f /etc/foo ]; then\n"
              "  EXTRA=\"--num-layers 4\"\nfi\n" f"torchrun --nproc_per_node 8 pretrain_gpt.py {_model('')} $EXTRA\n")
    assert script.splitlines()[9] == '  EXTRA="--num-layers 4"'
    with pytest.raises(InputError, match="line 10: an assignment sits under a test the reader cannot decide"):
        read_launch(script, "s", inert=inert)


def test_assignments_before_the_launch_are_its_environment():
    """``CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun ...`` (Megatron-LM's cluster_scripts of 2023) runs
    torchrun with the variable set: the launch is read as without it (it hid the program)."""
    words = f"torchrun --nproc_per_node 8 pretrain_gpt.py {_model('')}"
    plain = _setup_text(f"#!/bin/bash\n{words}\n")
    prefixed = _setup_text(f"#!/bin/bash\nCUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_DEBUG=WARN {words}\n")
    assert (prefixed.values, prefixed.policy) == (plain.values, plain.policy)
    quoted = _setup_text(f'#!/bin/bash\nOPTS="--bf16"\n{words} $OPTS\n')       # a plain assignment stays one
    assert quoted.policy["precision"] == "bf16"


@pytest.mark.parametrize("value,logged", [("1", True), ("", False), (None, False)])
def test_an_alternate_value_is_the_word_where_its_variable_is_set(value, logged):
    """``${EXTRA:+--log-params-norm}`` (Megatron-LM's functional test scripts): bash puts the word
    where EXTRA is set and not empty, nothing otherwise; it was read as an option's value."""
    assignment = "" if value is None else f"EXTRA={value}\n"
    text = f"#!/bin/bash\n{assignment}torchrun --nproc_per_node 8 pretrain_gpt.py {_model('')} ${{EXTRA:+--bf16}}\n"
    assert (_setup_text(text).policy["precision"] == "bf16") == logged
