"""Megatron-LM / Megatron-Core command-line arguments as an ``Architecture`` and a ``Training``.

``megatron_setup`` reads the words after ``pretrain_gpt.py``, ``pretrain_bert.py`` or
``pretrain_t5.py`` (``models.launch_script`` finds them in a launch script, or reads an arguments
file) with Megatron-LM's own defaults (its ``megatron/training/arguments.py``, ``validate_args``):

=========================================== =========================================================
Megatron-LM option (default)                library field
=========================================== =========================================================
``--num-layers``, ``--hidden-size``,        ``n_layers``, ``e``, ``h`` (required)
``--num-attention-heads``
``--ffn-hidden-size`` (``4 e``; with        ``f``
``--swiglu`` ``int(4 e 2/3 / 64) 64``,
that is ``floor(e/24) 64``)
``--group-query-attention``,                ``kv_heads`` (``--num-query-groups`` counts only with
``--num-query-groups`` (1)                  ``--group-query-attention``, as in Megatron)
``--kv-channels`` (``e/h``)                 ``head_dim``
``--swiglu`` (GELU MLP)                     ``mlp``: ``swiglu`` (``gelu`` without it; ``--openai-gelu``
                                            is the same GELU's count)
``--normalization`` (LayerNorm)             ``norm``: ``layer``; RMSNorm: ``rms``
``--qk-layernorm``                          ``qk_norm``: ``head``
``--untie-embeddings-and-output-weights``   ``tied`` (tied without it)
``--position-embedding-type``               learned_absolute: ``positions`` = max positions;
(learned_absolute),                         rope, yarn: ``rotary`` (``--rotary-percent``: ``rotary_dim``);
``--use-rotary-position-embeddings``        none: no positions
``--max-position-embeddings`` (required)    ``context`` (``--seq-length`` must not exceed it)
``--disable-bias-linear``,                  ``bias``, ``qkv_bias`` (biases on every linear layer
``--add-qkv-bias``                          unless disabled; ``--add-qkv-bias`` keeps Q, K, V's)
``--hidden-dropout``,                       ``dropouts``, ``attention_dropout``: counted when
``--attention-dropout`` (0.1, 0.1)          nonzero
``--vocab-size``,                           ``vocab``, ``vocab_multiple`` (the library pads to
``--make-vocab-size-divisible-by`` (128)    ``vocab_multiple x m1`` as Megatron does); NullTokenizer:
                                            ``--vocab-size`` + 1 (its end-of-document id); a
                                            tokenizer with files (GPT2BPETokenizer, the default,
                                            HuggingFaceTokenizer, ...) needs ``vocab`` given
``--num-experts``, ``--moe-router-topk``    ``moe``: ``experts``, ``top_k``, ``expert_f``, ``shared_f``,
(2), ``--moe-ffn-hidden-size`` (``f``),     ``every`` (an integer), or ``first_dense`` and
``--moe-shared-expert-intermediate-size``,  ``dense_layers`` (a list, ``([0]+[1]*26)``); router
``--moe-layer-freq`` (1),                   ``topk_softmax`` (``softmax`` with ``--moe-router-pre-
``--moe-router-score-function`` (softmax),  softmax``; ``sigmoid``, normalised over the k chosen);
``--moe-router-topk-scaling-factor``        ``scale``; the router's and the experts' biases are
                                            ``add_bias_linear``'s (Megatron-Core's)
``--window-size`` (LEFT,0),                 ``window`` ``LEFT + 1`` on every layer, or where
``--window-attn-skip-freq``                 ``is_layer_window_attention`` puts it (``_windows``)
``--softmax-type`` (vanilla)                ``sinks`` with ``learnable`` (off-by-one refused)
``--quick-geglu``                           ``mlp``: ``swiglu`` (GPT-OSS's gated unit; its clamp
                                            and offset noted, not counted)
``--padded-vocab-size``                     ``vocab`` as given, padded already (``vocab_multiple`` 1)
``--enable-gpt-oss``                        rotary (YaRN) positions, as the model builder sets them
``--multi-latent-attention``,               ``latent`` (``Latent(kv_rank, rope_dim, nope_dim, v_dim,
``--q-lora-rank`` (none),                   q_rank)``); needs ``--qk-layernorm`` (the latent
``--kv-lora-rank`` (32), ``--qk-head-dim``  norms)
(128), ``--qk-pos-emb-head-dim`` (64),
``--v-head-dim`` (128)
``--step-batch-size-schedule``              the global batch it ends at (noted); refused beside
                                            ``--global-batch-size``, as Megatron-LM refuses it
``--micro-batch-size``, ``--seq-length``    ``b``, ``l``
``--tensor-model-parallel-size`` (1)        ``m1``; ``s1 = m1`` with ``--sequence-parallel``
                                            (Megatron turns it off at ``m1 = 1``)
``--pipeline-model-parallel-size`` (1)      ``p``; ``--decoder-first/last-pipeline-num-layers``:
                                            ``first/last_stage_layers``;
``--account-for-embedding-in-pipeline-      ``embedding_in_split``, ``loss_in_split`` (a layer's slot
split``, ``--account-for-loss-in-...``      each; ``parallel.splits.chunk_layers``)
``--num-layers-per-virtual-pipeline-stage``, schedule ``interleaved``, ``virtual_stages`` =
``--num-virtual-stages-per-pipeline-rank``, ``slots/p/N``, slots ``n_layers`` + the embedding's and
                                            the loss's (refused with first/last sizes, as
                                            Megatron); 1F1B without them
``--virtual-pipeline-model-parallel-size``
``--pipeline-model-parallel-layout``        ``pipeline_layout``; ``virtual_stages``: its stages over ``p``
``--expert-model-parallel-size`` (1),       ``ep``, ``etp``; ``--moe-expert-capacity-factor``:
``--expert-tensor-parallel-size`` (``m1``)  ``capacity_factor``
``--moe-token-dispatcher-type`` (allgather) ``dispatcher``: ``flex`` and ``alltoall`` as such;
                                            ``allgather``, ``alltoall_seq`` timed as ``alltoall`` (noted)
world size (the launcher's                  ``d = world/(m1 p cp)``; ``--global-batch-size``
``--nproc_per_node x --nnodes``, or given)  (``b d``): ``micro_batches = global/(b d)``
``--bf16``, ``--fp16`` (fp32)               ``precision``
``--fp8-format`` (e4m3 or hybrid),          ``fp8``: the ``--fp8-recipe`` (delayed, tensorwise,
``--fp8-recipe`` (delayed),                 mxfp8; blockwise refused); with ``--fp8-param-gather``
``--fp8-param-gather``                      ``fp8-params``, ``tensorwise-params``, ``mxfp8-params``
``--fp8-amax-history-len`` (delayed only)   ``fp8_amax_history`` (Megatron-LM's default, 1)
``--fp4-format`` (e2m1), ``--fp4-recipe``   ``fp8``: ``nvfp4`` (one recipe field: Megatron-LM takes
(nvfp4)                                     FP8 or FP4)
``--first-last-layers-bf16``,               ``first_layers_16bit``, ``last_layers_16bit`` (not with
``--num-layers-at-start-in-bf16`` (1),      delayed scaling, as Megatron-LM)
``--num-layers-at-end-in-bf16`` (1)         (each of these without the option it needs: noted,
                                            as Megatron-LM runs without it)
``--use-distributed-optimizer``             ``distributed_optimizer``
``--recompute-granularity``,                ``recompute`` (selective, full; ``--recompute-activations``
``--recompute-method``,                     is selective), ``recompute_method`` (uniform, block),
``--recompute-num-layers`` (1)              ``recompute_layers``
``--recompute-modules`` (core_attn),        ``recompute_modules`` (``models.recompute_modules``);
``--moe-layer-recompute``                   the latter adds ``moe`` (selective), as Megatron-Core
``--checkpoint-activations``,               the same before 2022: full, uniform chunks of
``--checkpoint-num-layers`` (1);            ``--checkpoint-num-layers`` layers; from August 2021
``--activations-checkpoint-method``,        the method and its layers under these names
``--activations-checkpoint-num-layers`` (1)
``--use-megatron-fsdp`` (``--use-custom-    ``zero`` 0 to 3 of the strategy (no_shard, optim,
fsdp``), ``--data-parallel-sharding-        optim_grads, optim_grads_params), in place of the
strategy`` (no_shard); ``--use-torch-fsdp2`` distributed optimizer; FSDP2: ``zero`` 3
``--optimizer`` (adam)                      ``optimizer``: adam (Megatron's decoupled weight decay),
                                            sgd (with momentum)
``--use-precision-aware-optimizer`` with    ``optimizer`` by the state's dtypes
``--main-params-dtype``, ``--exp-avg-dtype``, (``megatron_precision.precision_aware_adam``); without
``--exp-avg-sq-dtype`` (fp32)               it each dtype fp32 (else refused); ``--main-grads-dtype``
                                            the gradients' (their bytes follow ``--conventions``)
``--no-position-embedding`` (2023)          no learned position table (``positions`` 0)
``--tokenizer-type GPT2BPETokenizer`` with  ``vocab`` 50,257 (GPT-2's ``gpt2-vocab.json``, noted);
``--vocab-file .../gpt2-vocab.json``        any other tokenizer file needs ``--vocab-size``; a file
                                            the script leaves undecided is the tokenizer's own
``--tokenizer-type Llama2Tokenizer``        ``vocab`` 32,000 (Llama 2's ``tokenizer.model``, noted)
``--tokenizer-type NullTokenizer``          ``vocab``: ``--vocab-size`` + 1 (its end-of-document id),
                                            or as given with ``--null-tokenizer-vocab-includes-eod``
launched by ``python`` alone                one process (world size 1, noted)
``--model-parallel-size``, ``--batch-size`` ``--tensor-model-parallel-size`` and ``--micro-batch-size``
(``pretrain_gpt2.py``, 2019-2020)           under their names of then (no accumulated micro-batches)
``srun`` (without torchrun)                 ``--ntasks`` (``-n``), or ``--ntasks-per-node`` x
                                            ``--nodes`` (``-N``) processes
``--overlap-grad-reduce``,                  ``overlap``: ``grad_reduce``, ``param_gather``, ``tensor``,
``--overlap-param-gather``,                 ``expert``, ``shared_expert`` (the last only with shared
``--tp-comm-overlap``,                      experts: elsewhere noted as ignored, as Megatron-Core
``--overlap-moe-expert-parallel-comm``,     ignores it)
``--moe-shared-expert-overlap``
``--no-overlap-p2p-communication``          ``overlap``: ``pipeline`` off (on by default: the
                                            interleaved schedule's sends behind compute)
``--attention-backend`` (auto),             ``flash``: auto, flash and fused keep no ``l^2`` scores
``--use-flash-attn``                        (Transformer Engine's fused kernels; auto in fp32: its
                                            unfused attention); unfused, local do
``--cuda-graph-impl`` (none),               ``cuda_graphs`` (``blocks.graphs.graph_scopes``): the
``--cuda-graph-modules`` (``--cuda-graph-   scopes given, the whole layer without one, the whole
scope`` before 0.18), ``--enable-cuda-      step for full_iteration; the switches are local and
graph``, ``--external-cuda-graph``          transformer_engine; refused where Megatron-Core refuses
                                            them (an MoE scope without experts, ...)
``--context-parallel-size`` (1),            ``cp``; ``cp_variant`` from ``CP_COMM_TYPES``: p2p is
``--cp-comm-type`` (p2p)                    ``ring``, all_gather ``all-gather``, a2a ``ulysses``
``--mtp-num-layers`` (0)                    ``mtp_layers``, on the last stage
``pretrain_bert.py``,                       ``causal`` off; ``task`` ``pretraining`` (the pooler and
``--bert-no-binary-head``                   the binary head, 2 ``token_types``), or ``masked_lm``;
                                            the tokenizer ``BertWordPieceLowerCase`` unless given
``--tokenizer-type BertWordPieceLowerCase`` ``vocab`` 30,522 or 28,996 (BERT's uncased or cased
(or ``BertWordPieceCase``)                  files) + 2 ([BOS], [EOS]) + ``--vocab-extra-ids``
``pretrain_t5.py``: ``--num-layers``         ``n_layers`` and ``decoder_layers`` (the same: Megatron-
(or ``--encoder-num-layers``),              Core builds the decoder with ``num_layers``); ``l``,
``--encoder-seq-length`` (or                ``l_dec``; ``head_bias`` with the tied head;
``--seq-length``), ``--decoder-seq-length``  ``score_bias`` ``relative`` with ``relative_buckets``;
``--position-embedding-type relative``,     one pipeline stage (``pretrain_t5.py`` refuses more)
``--relative-attention-num-buckets`` (32)
torchrun without ``--nproc_per_node``       one process a node (its default; noted)
=========================================== =========================================================

Options that change no count are accepted (``megatron_words.IGNORED`` and ``IGNORED_PREFIXES``:
data, tokenizer files, learning rate and optimizer hyper-parameters, initialisation, logging,
checkpoints, kernels' fusions); any other option is refused, naming it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from fractions import Fraction

from symbolic_cost import symbols as S
from symbolic_cost.blocks.graphs import (IMPLEMENTATIONS, check_recompute, for_model, graph_scopes,
                                         switched_implementation)
from symbolic_cost.blocks.moe import MoE
from symbolic_cost.blocks.specs import Latent
from symbolic_cost.checks import InputError, given_counts, instance
from symbolic_cost.parallel.splits import layout_stages
from symbolic_cost.models.architecture import MADE_BY, Architecture
from symbolic_cost.models.launch_script import UNKNOWN, Launch, known
from symbolic_cost.models.megatron_precision import megatron_low_precision, precision_aware_adam
from symbolic_cost.models.megatron_words import (NOTED, Options, parse, single_process, torchrun_default,
                                                 world_size)
from symbolic_cost.models.training import Overlap

CP_COMM_TYPES = {"p2p": "ring", "all_gather": "all-gather", "a2a": "ulysses"}
"""Megatron-LM's ``--cp-comm-type`` (Transformer Engine's ``cp_comm_type``) as ``Training.cp_variant``;
``a2a+p2p`` (Ulysses inside ring groups, with ``--hierarchical-context-parallel-sizes``) is not modelled."""

@dataclass
class Setup:
    """What the arguments say: the model, the ``--set`` values, the ``Training`` policy, notes."""

    arch: Architecture
    values: dict
    policy: dict
    notes: list = field(default_factory=list)
    launcher: str = ""          # accelerate's distributed_type of an accelerate config (hf_trainer.launched)
    plugin: dict | None = None  # the DeepSpeed values accelerate's plugin writes (models.accelerate.plugin_config)


def model_for(arch) -> Architecture | None:
    """``arch`` checked as the model a framework file's layout is read for, by the readers that
    take the model beside the file (accelerate, DeepSpeed, TrainingArguments): an
    ``Architecture``, or ``None`` to read the layout alone."""
    return arch if arch is None else instance(arch, Architecture, "arch", MADE_BY + " or None")


def megatron_setup(launch: Launch, name: str, world: int | None = None, vocab: int | None = None) -> Setup:
    """The model, values and policy of Megatron arguments; ``world`` and ``vocab`` (from the command
    line) replace the launcher's world size and give a vocabulary read from a tokenizer file."""
    world, vocab = given_counts(world=world, vocab=vocab)
    notes = list(instance(launch, Launch, "launch", " (models.launch_script.read_launch(text, name))").notes)
    o = Options(_older_names(parse(launch.program, notes), notes))
    notes += [NOTED[n] for n in NOTED if n in o.options and NOTED[n]]
    try:
        stated = world_size(launch.launcher)
    except InputError:
        if world is None:
            raise
        stated = None                   # a count the launch computes (`python -c ...`): --devices gives it
    if stated == 1 and single_process(launch.launcher) and world is None:
        notes.append(f"{' '.join(launch.launcher)} {launch.entry} starts one process (no launcher)")
    if stated is not None and torchrun_default(launch.launcher) and world is None:
        notes.append(f"torchrun without --nproc_per_node starts one process a node (its default): {stated} in all")
    if world is not None and stated is not None and world != stated:
        notes.append(f"--devices {world} replaces the {stated} processes the launch starts")
    world = world or stated
    if world is None:
        raise InputError("the launch does not say how many processes it starts (torchrun's --nproc_per_node and "
                         "--nnodes, srun's --ntasks); give --devices", "--devices")
    program = PROGRAMS.get(launch.entry, "gpt")
    arch = _architecture(o, name, vocab, notes, program)
    tp, pp = o.integer("tensor-model-parallel-size", 1), o.integer("pipeline-model-parallel-size", 1)
    cp = o.integer("context-parallel-size", 1)
    if world % (tp * pp * cp):
        raise InputError(f"world size {world} is not a multiple of tensor x pipeline x context parallel = "
                         f"{tp * pp * cp} (Megatron-LM's rule); give --devices", "--devices")
    d, micro = world // (tp * pp * cp), o.integer("micro-batch-size")
    batch = _scheduled_batch(o, notes) or o.integer("global-batch-size", micro * d)
    if batch % (micro * d):
        raise InputError(f"--global-batch-size {batch} is not a multiple of --micro-batch-size x data-parallel "
                         f"size = {micro} x {d} (Megatron-LM's rule)", "--global-batch-size")
    seq = _encoder_length(o) if program == "t5" else o.integer("seq-length")
    if seq > arch.context:
        raise InputError(f"--seq-length {seq} exceeds --max-position-embeddings {arch.context} (Megatron-LM's rule)",
                         "--seq-length")
    sequence = o.flag("sequence-parallel") and tp > 1
    values = {S.b: micro, S.l: seq, S.m1: tp, S.s1: tp if sequence else 1, S.d: d, S.p: pp,
              S.n_micro: batch // (micro * d), S.cp: cp, S.ep: o.integer("expert-model-parallel-size", 1),
              S.etp: o.integer("expert-tensor-parallel-size", tp)}
    if program == "t5":
        values[S.l_dec] = _t5_decoder(o, pp)
    if arch.moe is None and values[S.ep] != 1:
        raise InputError("--expert-model-parallel-size needs --num-experts", "--expert-model-parallel-size")
    if arch.moe is None:        # no expert layer to split: the expert degree follows m1 (a --set m1 too)
        if values[S.etp] != tp:
            notes.append(f"--expert-tensor-parallel-size {values[S.etp]}: the model has no experts; ignored, as "
                         f"Megatron-LM ignores it")
        values[S.etp] = S.m1
    policy = _policy(o, arch, pp, sequence, notes)
    graphs = _graphs(o, arch, policy, notes)
    if graphs:
        policy["cuda_graphs"] = graphs
    if cp > 1:
        policy["cp_variant"] = _cp_variant(o)
        if policy["precision"] == "fp32" and not policy["flash"]:
            raise InputError(f"--context-parallel-size {cp} in fp32: Transformer Engine's context-parallel attention "
                             f"runs only its flash and fused kernels (its unfused one takes no context parallelism), "
                             f"which take fp16 and bf16 (get_attention_backend's filters): add --bf16 or --fp16",
                             "--context-parallel-size")
    return Setup(arch, values, policy, notes)


def _cp_variant(o: Options) -> str:
    """``Training.cp_variant`` of ``--cp-comm-type``: one value, or one per layer (all the same)."""
    kinds = set(o.options.get("cp-comm-type") or ["p2p"])
    if len(kinds) != 1:
        raise InputError(f"--cp-comm-type {' '.join(sorted(kinds))}: the library reads one kind for every layer",
                         "--cp-comm-type")
    kind = kinds.pop()
    if kind not in CP_COMM_TYPES:
        raise InputError(f"--cp-comm-type {kind}: the library reads {', '.join(CP_COMM_TYPES)}", "--cp-comm-type")
    return CP_COMM_TYPES[kind]



GRAPH_SCOPES = ("cuda-graph-modules", "cuda-graph-scope")
"""Megatron-LM's option of the CUDA graphs' capture scope: ``--cuda-graph-modules`` since 0.18,
where ``--cuda-graph-scope`` (its name before) is a deprecated spelling of it."""


def _graphs(o: Options, arch: Architecture, policy: dict, notes: list) -> tuple:
    """``cuda_graphs`` of ``--cuda-graph-impl`` (none) and ``--cuda-graph-modules`` or
    ``--cuda-graph-scope`` (``GRAPH_SCOPES``), read by ``blocks.graphs.graph_scopes`` and checked for
    the model (``for_model``) and the recomputation in ``policy`` (``check_recompute``), as
    ``validate_args`` reads them: the deprecated switches
    ``--enable-cuda-graph`` and ``--external-cuda-graph`` are ``--cuda-graph-impl local`` and
    ``transformer_engine`` (refused together, or beside an implementation other than none); the
    older scope ``full_iteration`` is ``--cuda-graph-impl full_iteration`` (the migration of 0.18,
    noted: before it, without an implementation, it captured nothing)."""
    enable, external = o.flag("enable-cuda-graph"), o.flag("external-cuda-graph")
    impl = switched_implementation(enable, external, o.choice("cuda-graph-impl", "none", IMPLEMENTATIONS),
                                   ("--enable-cuda-graph", "--external-cuda-graph", "--cuda-graph-impl"), "Megatron-LM")
    switch = "--enable-cuda-graph" if enable else "--external-cuda-graph" if external else "--cuda-graph-impl"
    if all(name in o.options for name in GRAPH_SCOPES):
        raise InputError("--cuda-graph-scope and --cuda-graph-modules together: the first is the second's deprecated "
                         "name (Megatron-LM refuses both)", "--cuda-graph-scope")
    option = next((name for name in GRAPH_SCOPES if name in o.options), GRAPH_SCOPES[0])
    words = [known(word, f"--{option}") for word in o.options.get(option, [])]
    if option in o.options and not words:
        raise InputError(f"--{option} takes the scopes' names (attn, mlp, moe, moe_router, moe_preprocess)",
                         f"--{option}")
    if impl == "none" and "full_iteration" in words:
        impl, words = "full_iteration", [word for word in words if word != "full_iteration"]
        notes.append(f"--{option} full_iteration: Megatron-LM (since 0.18) runs it as --cuda-graph-impl "
                     f"full_iteration, the whole step one graph (before 0.18, without --cuda-graph-impl, no graph)")
    named = f"--{option}" if option in o.options else switch       # what was typed: a refusal names it
    scopes = for_model(graph_scopes(impl, words, names=("--cuda-graph-impl", f"--{option}")), arch,
                       policy.get("capacity_factor"), named, padded=False,   # --moe-pad-expert-input-...: not read
                       dispatcher=o.choice("moe-token-dispatcher-type", "allgather", DISPATCHER_TYPES))
    check_recompute(scopes, policy.get("recompute"), ("--cuda-graph-impl", "--recompute-granularity full"),
                    policy.get("recompute_modules"), impl)
    return scopes


GPT2_VOCAB = 50257
"""GPT-2's byte-pair vocabulary, as its ``gpt2-vocab.json`` holds it (OpenAI's encoder: 256 byte tokens,
50,000 merges and ``<|endoftext|>``): what Megatron-LM's ``GPT2BPETokenizer`` reads from that file."""
BERT_UNCASED_VOCAB, BERT_CASED_VOCAB = 30522, 28996
"""The WordPiece vocabularies of Google's BERT (``bert-large-uncased-vocab.txt``,
``bert-large-cased-vocab.txt``), which Megatron-LM's ``BertWordPieceLowerCase`` and
``BertWordPieceCase`` read."""
BERT_ADDED = 2
"""The ``[BOS]`` and ``[EOS]`` that Megatron-LM's ``_BertWordPieceTokenizer`` adds to the file's
tokens (since 2021; before it, none: padded to 128 the table is the same)."""
LLAMA2_VOCAB = 32000
"""The SentencePiece model of Llama 2 (``tokenizer.model``, 32,000 pieces; Mistral's and Mixtral's
hold as many), which Megatron-LM's ``Llama2Tokenizer`` was written for."""
TOKENIZER_FILES = {
    "GPT2BPETokenizer": ("vocab-file", ("gpt2-vocab.json",), GPT2_VOCAB, "GPT-2's"),
    "Llama2Tokenizer": ("tokenizer-model", None, LLAMA2_VOCAB, "Llama 2's"),
    "BertWordPieceLowerCase": ("vocab-file", ("bert-vocab.txt", "bert-vocab.json", "bert-large-uncased-vocab.txt",
                                              "bert-base-uncased-vocab.txt", "t5-vocab.txt"),
                               BERT_UNCASED_VOCAB + BERT_ADDED, "uncased BERT's 30,522, [BOS] and [EOS]"),
    "BertWordPieceCase": ("vocab-file", ("bert-large-cased-vocab.txt", "bert-base-cased-vocab.txt"),
                          BERT_CASED_VOCAB + BERT_ADDED, "cased BERT's 28,996, [BOS] and [EOS]")}
"""Tokenizers written for one published vocabulary: ``{type: (file option, the file's own names or
None for any, tokens, whose they are)}``.  A script whose file is its publisher's, or a path the
script does not decide (an argument, a variable set elsewhere), is read with that vocabulary and a
note; a file of another name needs ``--vocab-size``."""


OLDER = {"model-parallel-size": "tensor-model-parallel-size", "batch-size": "micro-batch-size"}
"""Megatron-LM's names before pipeline parallelism (2019-2020, ``pretrain_gpt2.py``) and today's:
``--batch-size`` was each data-parallel rank's batch, with no accumulation of micro-batches."""


def _older_names(options: dict, notes: list) -> dict:
    """``options`` under today's names (``OLDER``); both names of one option are refused, as
    Megatron-LM refuses ``--batch-size`` since it has ``--micro-batch-size``."""
    for old, new in OLDER.items():
        if old in options:
            if new in options:
                raise InputError(f"--{old} and --{new} together: --{old} is Megatron-LM's name before 2021 "
                                 f"(it refuses it now)", f"--{old}")
            options[new] = options.pop(old)
            notes.append(f"--{old}: Megatron-LM's name of 2019-2020 for --{new}")
    return options


def _published_vocabulary(o, tokenizer: str, notes: list) -> int | None:
    """The size of the one vocabulary ``tokenizer`` was written for (``TOKENIZER_FILES``), where the
    script's file is that one or left undecided; None where the file is another.  The file's folder
    may be a variable the launch leaves unset: its name is what says which vocabulary it is."""
    if tokenizer not in TOKENIZER_FILES:
        return None
    option, own, size, whose = TOKENIZER_FILES[tokenizer]
    extra = o.integer("vocab-extra-ids", 0, minimum=0) if tokenizer.startswith("BertWordPiece") else 0
    if extra:
        size += extra                   # T5's sentinels, added after [BOS] and [EOS]
        whose = whose.replace(" and ", ", ") + f" and {extra} extra ids"
    values = o.options.get(option) or []
    path = values[0].strip().strip('"\'') if len(values) == 1 else ""
    name = path.rsplit("/", 1)[-1]
    if name and UNKNOWN not in name and (own is None or name in own):
        notes.append(f"{tokenizer} with {name}: {size:,} tokens ({whose}; --vocab-size replaces)")
    elif not path or UNKNOWN in path:
        notes.append(f"{tokenizer}: --{option} is {'not given' if not path else 'not decided by the script'}; "
                     f"read as {size:,} tokens ({whose}; --vocab-size replaces)")
    else:
        return None
    return size


PROGRAMS = {"pretrain_bert.py": "bert", "pretrain_t5.py": "t5", "pretrain_t5_core.py": "t5"}
"""Megatron-LM's programs other than GPT's (``examples/bert/pretrain_bert.py`` and
``examples/t5/pretrain_t5.py`` today, at the top of the repository before; Megatron-Core's T5 of
2023 as ``pretrain_t5_core.py``)."""


def _bert(o: Options) -> dict:
    """The ``Architecture`` fields of Megatron-LM's BERT (``megatron.core.models.bert.BertModel``,
    and the legacy ``megatron/model/bert_model.py`` before it): attention over the whole sequence;
    the masked-LM head (``dense e -> e``, GeLU, LayerNorm, then the decoder tied to the word table
    with a bias of its own); and, unless ``--bert-no-binary-head``, two token types and the binary
    head (the pooler's ``dense e -> e`` and tanh on the first token, ``linear e -> 2``).  Its
    layers are pre-norm, so the model ends in a final norm and its embeddings have none."""
    binary = not o.flag("bert-no-binary-head")
    return dict(causal=False, token_types=2 if binary else 0, lm_head=False,
                task="pretraining" if binary else "masked_lm")


def _t5(o: Options, n: int, tied: bool) -> dict:
    """The ``Architecture`` fields of Megatron-LM's T5 (``megatron.core.models.T5.T5Model``, and the
    legacy ``megatron/model/t5_model.py`` before it): ``n`` encoder layers and as many decoder
    layers, each with cross-attention over the encoder's output; one embedding (word and position
    tables) for both stacks; the LM head (``T5LMHead``) tied to the word table with a bias of its
    own.  Relative positions (``--position-embedding-type relative``) are a table of
    ``--relative-attention-num-buckets`` (32) per head in each stack."""
    relative = o.text("position-embedding-type") == "relative"
    buckets = o.integer("relative-attention-num-buckets", 32)
    return dict(decoder_layers=n, head_bias=tied, score_bias="relative" if relative else None,
                relative_buckets=buckets if relative else 0)


def _t5_layers(o: Options) -> int:
    """The encoder's layers: ``--num-layers`` or ``--encoder-num-layers``, not both (Megatron-LM's
    ``validate_args``).  The decoder is built with as many (Megatron-Core's ``config.num_layers``):
    a different ``--decoder-num-layers`` is refused."""
    if "num-layers" in o.options and "encoder-num-layers" in o.options:
        raise InputError("--num-layers and --encoder-num-layers together (Megatron-LM: 'cannot have both')",
                         "--encoder-num-layers")
    n = o.integer("num-layers") if "num-layers" in o.options else o.integer("encoder-num-layers")
    if o.integer("decoder-num-layers", n) != n:
        raise InputError(f"--decoder-num-layers {o.integer('decoder-num-layers')} beside {n} encoder layers: "
                         f"pretrain_t5.py builds its decoder with the encoder's count (Megatron-Core's "
                         f"config.num_layers)", "--decoder-num-layers")
    return n


def _encoder_length(o: Options) -> int:
    """T5's encoder tokens: ``--seq-length`` or ``--encoder-seq-length``, not both."""
    if "seq-length" in o.options and "encoder-seq-length" in o.options:
        raise InputError("--seq-length and --encoder-seq-length together (Megatron-LM asserts one)",
                         "--encoder-seq-length")
    return o.integer("seq-length") if "seq-length" in o.options else o.integer("encoder-seq-length")


def _t5_decoder(o: Options, pp: int) -> int:
    """T5's decoder tokens (``--decoder-seq-length``, required); one pipeline stage, as
    ``pretrain_t5.py`` requires ('Pipeline parallelism is not supported for T5')."""
    if pp != 1:
        raise InputError(f"--pipeline-model-parallel-size {pp} with pretrain_t5.py: Megatron-LM's T5 runs on one "
                         f"pipeline stage", "--pipeline-model-parallel-size")
    return o.integer("decoder-seq-length")


def _architecture(o: Options, name: str, vocab: int | None, notes: list, program: str = "gpt") -> Architecture:
    e, h = o.integer("hidden-size"), o.integer("num-attention-heads")
    n = _t5_layers(o) if program == "t5" else o.integer("num-layers")
    swiglu = o.flag("swiglu") or o.flag("quick-geglu")        # GPT-OSS's gated unit, counted as SwiGLU
    o.flag("openai-gelu")
    if o.flag("squared-relu"):          # Nemotron's relu(x)^2: one element-wise product more than ReLU
        notes.append("--squared-relu: counted as ReLU (the square is one element-wise product more)")
    f = o.integer("ffn-hidden-size", e // 24 * 64 if swiglu else 4 * e)
    positions = "rope" if o.flag("use-rotary-position-embeddings") else \
        o.choice("position-embedding-type", "learned_absolute",
                 ("learned_absolute", "rope", "yarn", "none") + (("relative",) if program == "t5" else ()))
    if positions == "yarn":             # YaRN's rotary: other frequencies and a scale in its cos/sin, the same work
        notes.append("--position-embedding-type yarn: rotary positions (YaRN rescales their frequencies; the "
                     "count is rope's)")
        positions = "rope"
    if o.flag("no-position-embedding") and positions == "learned_absolute":     # 2023: no learned table
        positions = "none"
    if o.flag("enable-gpt-oss"):        # post_training/model_builder.py: YaRN rotary positions, as GPT-OSS's
        positions = "rope"
    context = o.integer("max-position-embeddings")
    groups = o.integer("num-query-groups", 1)
    if "kv-channels" not in o.options and e % h:        # Megatron-LM asserts it before deriving kv_channels
        raise InputError(f"--num-attention-heads {h} must divide --hidden-size {e} when --kv-channels is not given "
                         f"(Megatron-LM's rule)", "--num-attention-heads")
    head = o.integer("kv-channels", e // h)
    percent = o.fraction("rotary-percent", "1")
    rotary_dim = None if percent == 1 or positions != "rope" else percent * head
    if rotary_dim is not None and rotary_dim.denominator != 1:
        raise InputError(f"--rotary-percent {percent} of {head} channels is not a whole number", "--rotary-percent")
    bias = not o.flag("disable-bias-linear") or o.flag("add-bias-linear")
    tied = not o.flag("untie-embeddings-and-output-weights")
    # each program's own default (its initialize_megatron's args_defaults)
    tokenizer = o.text("tokenizer-type", "GPT2BPETokenizer" if program == "gpt" else "BertWordPieceLowerCase")
    stated = o.integer("vocab-size") if "vocab-size" in o.options else None
    padded = o.integer("padded-vocab-size") if "padded-vocab-size" in o.options else None
    if padded is not None and vocab is None:            # Megatron-LM takes it as the padded table, as it is
        vocab = padded
    if tokenizer == "NullTokenizer":
        if stated is None:
            raise InputError("--tokenizer-type NullTokenizer needs --vocab-size", "--vocab-size")
        if not o.flag("null-tokenizer-vocab-includes-eod"):
            stated += 1                 # Megatron's NullTokenizer adds its end-of-document id
    if vocab is not None and stated is not None and vocab != stated:
        notes.append(f"--vocab-size {vocab} (command line) replaces the {tokenizer}'s {stated}")
    vocab = vocab or (stated if tokenizer == "NullTokenizer" else None)
    vocab = vocab or _published_vocabulary(o, tokenizer, notes)
    if vocab is None:
        raise InputError(f"the vocabulary comes from the {tokenizer}'s files, which the reader does not open; give "
                         f"--vocab-size on the command line (the tokenizer's size before Megatron pads it)",
                         "--vocab-size")
    latent = _latent(o)
    return Architecture(
        name, n, e, h, f, vocab, kv_heads=groups if o.flag("group-query-attention") else None,
        positions=context if positions == "learned_absolute" else 0,
        mlp="swiglu" if swiglu else "relu" if o.flag("squared-relu") else "gelu",
        norm=o.choice("normalization", "LayerNorm", ("LayerNorm", "RMSNorm")).replace("LayerNorm", "layer")
        .replace("RMSNorm", "rms"), rotary=positions == "rope", rotary_dim=rotary_dim,
        tied=tied, qkv_bias=bias or o.flag("add-qkv-bias"), bias=bias,
        dropouts=o.fraction("hidden-dropout", "0.1") != 0, attention_dropout=o.fraction("attention-dropout", "0.1") != 0,
        vocab_multiple=1 if padded is not None else o.integer("make-vocab-size-divisible-by", 128), context=context,
        head_dim=None if head * h == e or latent else head, latent=latent,
        qk_norm="head" if o.flag("qk-layernorm") and not latent else None, moe=_moe(o, f, n, bias, notes),
        mtp_layers=o.integer("mtp-num-layers", 0), sinks=_sinks(o), **_windows(o, n),
        **(_bert(o) if program == "bert" else _t5(o, n, tied) if program == "t5" else {}))


def _sinks(o: Options) -> bool:
    """``--softmax-type``: vanilla, or ``learnable`` (a learned sink logit per head: GPT-OSS)."""
    kind = o.choice("softmax-type", "vanilla", ("vanilla", "learnable", "off-by-one"))
    if kind == "off-by-one":
        raise InputError("--softmax-type off-by-one (a fixed sink, no parameter) is not modelled; vanilla and "
                         "learnable are", "--softmax-type")
    return kind == "learnable"


def _windows(o: Options, n: int) -> dict:
    """Sliding-window attention: ``--window-size LEFT,RIGHT`` (a causal window of ``LEFT + 1`` keys,
    the token's own included: Transformer Engine's ``(left, 0)``) on every layer, or with
    ``--window-attn-skip-freq`` as Megatron-Core's ``is_layer_window_attention`` places it: an
    integer ``N``, a full-attention layer every ``N`` (layer ``i``, 0-based, windowed unless
    ``(i + 1) % N == 0``), or a list of 0 and 1 a layer (1: windowed).

    >>> from symbolic_cost.models.megatron_words import Options
    >>> _windows(Options({"window-size": ["127,0"], "window-attn-skip-freq": ["2"]}), 4)
    {'window': 128, 'windowed_layers': 2, 'window_pattern': (True, False, True, False)}
    """
    if "window-size" not in o.options:
        if "window-attn-skip-freq" in o.options:
            raise InputError("--window-attn-skip-freq applies to --window-size, which is not given",
                             "--window-attn-skip-freq")
        return {}
    text = o.text("window-size")
    left, _, right = text.strip("()").partition(",")
    if not (left.strip().isdigit() and right.strip() == "0"):
        raise InputError(f"--window-size {text!r}: a causal window LEFT,0 is read (keys LEFT back and the token's "
                         f"own)", "--window-size")
    freq = o.text("window-attn-skip-freq", None)
    if freq is None:
        pattern = (True,) * n
    elif freq.strip().isdigit() and int(freq) >= 1:
        pattern = tuple((i + 1) % int(freq) != 0 for i in range(n))
    else:
        pattern = tuple(bool(v) for v in layer_flags(freq, n, "--window-attn-skip-freq"))
    windowed = sum(pattern)
    if not windowed:
        return {}
    return dict(window=int(left) + 1, windowed_layers=windowed, **({"window_pattern": pattern} if windowed < n else {}))


def _scheduled_batch(o: Options, notes: list) -> int | None:
    """The global batch ``--step-batch-size-schedule`` ends at (``"0:16 2.4B:320 ... 12B:1536"``:
    from each step, or number of samples, a batch size), the batch the step is timed at; Megatron-LM
    refuses the schedule beside ``--global-batch-size``, and so does the reader."""
    text = o.text("step-batch-size-schedule")
    if text is None:
        return None
    if "global-batch-size" in o.options:
        raise InputError("--step-batch-size-schedule and --global-batch-size: Megatron-LM refuses both ('Cannot "
                         "specify both'); keep one", "--step-batch-size-schedule")
    last = text.split()[-1].rpartition(":")[2] if text.split() else ""
    if not last.isdigit() or int(last) < 1:
        raise InputError(f"--step-batch-size-schedule {text!r}: 'START:SIZE' pairs, each size a whole number",
                         "--step-batch-size-schedule")
    notes.append(f"--step-batch-size-schedule: the step is timed at the batch the schedule ends at, {last}; its "
                 f"earlier steps run smaller batches")
    return int(last)


def _latent(o: Options) -> Latent | None:
    """``--multi-latent-attention`` (Megatron-Core's ``MLASelfAttention``) as ``Latent``, with
    Megatron-LM's defaults: ``--kv-lora-rank`` 32, ``--q-lora-rank`` none (a full-rank query
    projection), ``--qk-head-dim`` 128, ``--qk-pos-emb-head-dim`` 64, ``--v-head-dim`` 128
    (``--kv-channels`` is not used).  Its latent norms exist with ``--qk-layernorm`` only, as in
    DeepSeek's models and the library's latent attention: without it the layout is refused."""
    if not o.flag("multi-latent-attention"):
        for option in LATENT_OPTIONS:
            if option in o.options:
                raise InputError(f"--{option} applies to --multi-latent-attention, which is not given", f"--{option}")
        return None
    if not o.flag("qk-layernorm"):
        raise InputError("--multi-latent-attention without --qk-layernorm has no latent norms; the library's latent "
                         "attention (DeepSeek's) normalises both latents: add --qk-layernorm", "--qk-layernorm")
    q_rank = o.integer("q-lora-rank") if "q-lora-rank" in o.options else None
    return Latent(o.integer("kv-lora-rank", 32), o.integer("qk-pos-emb-head-dim", 64), o.integer("qk-head-dim", 128),
                  o.integer("v-head-dim", 128), q_rank)


LATENT_OPTIONS = ("q-lora-rank", "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim")


def _moe(o: Options, f: int, n: int, bias: bool, notes: list) -> MoE | None:
    if "num-experts" not in o.options:
        for option in ("moe-router-topk", "moe-ffn-hidden-size", "moe-expert-capacity-factor"):
            if option in o.options:
                raise InputError(f"--{option} applies to --num-experts, which is not given", f"--{option}")
        return None
    score = o.choice("moe-router-score-function", "softmax", ("softmax", "sigmoid"))
    top_k, pre = o.integer("moe-router-topk", 2), o.flag("moe-router-pre-softmax")
    if score == "sigmoid" and pre:      # Megatron-Core's topk_routing_with_score_function reads it for softmax only
        notes.append("--moe-router-pre-softmax beside --moe-router-score-function sigmoid: Megatron-Core ignores it")
    router = "sigmoid" if score == "sigmoid" else "softmax" if pre else "topk_softmax"
    if "moe-router-topk-scaling-factor" in o.options:
        o.text("moe-router-topk-scaling-factor")
    return MoE(o.integer("num-experts"), top_k, o.integer("moe-ffn-hidden-size", f),
               shared_f=o.integer("moe-shared-expert-intermediate-size", 0, minimum=0), router=router,
               normalise=score == "sigmoid" and top_k > 1, scale="moe-router-topk-scaling-factor" in o.options,
               router_bias=bias, expert_bias=bias,      # Megatron-Core's router and experts take add_bias_linear
               clamp="activation-func-clamp-value" in o.options,
               **_moe_layers(o.text("moe-layer-freq", "1"), n))


def _moe_layers(text: str, n: int) -> dict:
    """``MoE`` fields of ``--moe-layer-freq``, read as Megatron-LM's ``moe_freq_type`` does: an
    integer ``N`` (an MoE layer every ``N``, from layer 0), or a Python list of 0 and 1 per layer
    (``([0]+[1]*26)``; lists added and repeated by an integer, nothing else evaluated), whose zeros
    are dense layers: the leading ones ``first_dense``, the rest ``dense_layers``.

    >>> _moe_layers("2", 4), _moe_layers("([0]+[1]*3)", 4), _moe_layers("[1,0,1,0]", 4)
    ({'every': 2}, {'first_dense': 1, 'dense_layers': ()}, {'first_dense': 0, 'dense_layers': (1, 3)})
    """
    if text.strip().isdigit() and int(text) >= 1:
        return {"every": int(text)}
    pattern = layer_flags(text, n, "--moe-layer-freq")
    first = next((i for i, v in enumerate(pattern) if v), n)
    return {"first_dense": first, "dense_layers": tuple(i for i, v in enumerate(pattern) if not v and i >= first)}


def layer_flags(text: str, n: int, option: str) -> list:
    """The list of 0 and 1 a layer that ``option`` gives as a Python list expression
    (``moe_freq_type``'s form: list literals added and repeated by an integer, nothing else
    evaluated), one a layer, or ``option`` refused by name."""
    refused = InputError(f"{option} {text!r}: an integer or a list of 0 and 1 per layer, as ([0]*3+[1]*58)",
                         option)
    try:
        pattern = _layer_list(ast.parse(text.strip().strip("'\""), mode="eval").body, refused)
    except SyntaxError:
        raise refused from None
    if len(pattern) != n or set(pattern) - {0, 1}:
        raise InputError(f"{option} {text!r}: {len(pattern)} values of 0 and 1 for --num-layers {n} "
                         f"(Megatron-LM's rule: one a layer)", option)
    return pattern


def _layer_list(node, refused: InputError) -> list:
    """A list expression of ``layer_flags``: list literals of integers, ``+`` and ``* N``
    (``refused`` raised for anything else)."""
    if isinstance(node, ast.List) and all(isinstance(v, ast.Constant) and type(v.value) is int for v in node.elts):
        return [v.value for v in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        joined = _layer_list(node.left, refused) + _layer_list(node.right, refused)
        if len(joined) <= MOST_LAYERS:
            return joined
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        times = node.right if isinstance(node.right, ast.Constant) else node.left
        listed = node.left if times is node.right else node.right
        if isinstance(times, ast.Constant) and type(times.value) is int and times.value >= 0:
            once = _layer_list(listed, refused)
            if len(once) * times.value <= MOST_LAYERS:           # counted before it is made
                return once * times.value
    raise refused


MOST_LAYERS = 100_000
"""The longest ``--moe-layer-freq`` list the reader builds (a model's layers are far fewer)."""


def _split(o: Options, policy: dict) -> None:
    """The pipeline split's options: stage sizes, the embedding and the loss counted as layers."""
    for option, key in (("decoder-first-pipeline-num-layers", "first_stage_layers"),
                        ("decoder-last-pipeline-num-layers", "last_stage_layers")):
        if option in o.options:
            policy[key] = o.integer(option)
    for option, key in (("account-for-embedding-in-pipeline-split", "embedding_in_split"),
                        ("account-for-loss-in-pipeline-split", "loss_in_split")):
        if o.flag(option):
            policy[key] = True


STATE_DTYPES = {"main-params-dtype": ("fp32", "fp16"), "exp-avg-dtype": ("fp32", "fp16", "bf16", "fp8"),
                "exp-avg-sq-dtype": ("fp32", "fp16", "bf16", "fp8"), "main-grads-dtype": ("fp32", "bf16")}
"""The state dtypes of Megatron-LM's precision-aware optimizer and the choices its parser takes."""


def _optimizer_state(o: Options, policy: dict) -> dict:
    """``--use-precision-aware-optimizer`` with its state dtypes as the library's Adam
    (``megatron_precision.precision_aware_adam``); without it Megatron-LM asserts each dtype is fp32.
    ``--main-grads-dtype`` decides the gradients' accumulation, whose bytes follow ``--conventions``."""
    dtypes = {name: o.choice(name, "fp32", choices) for name, choices in STATE_DTYPES.items()}
    if not o.flag("use-precision-aware-optimizer"):
        for name, dtype in dtypes.items():
            if dtype != "fp32":
                raise InputError(f"--{name} {dtype} without --use-precision-aware-optimizer (Megatron-LM asserts it "
                                 f"fp32 then)", f"--{name}")
        return {}
    return {"optimizer": precision_aware_adam(policy["optimizer"], policy["precision"], policy.get("fp8"),
                                              dtypes["main-params-dtype"], dtypes["exp-avg-dtype"],
                                              dtypes["exp-avg-sq-dtype"])}


def _policy(o: Options, arch: Architecture, pp: int, sequence: bool, notes: list) -> dict:
    policy = dict(precision="bf16" if o.flag("bf16") else "fp16" if o.flag("fp16") else "fp32",
                  distributed_optimizer=o.flag("use-distributed-optimizer"),
                  optimizer=o.choice("optimizer", "adam", ("adam", "sgd")))     # Megatron's adam is AdamW's
    if o.flag("bf16") and o.flag("fp16"):
        raise InputError("--bf16 and --fp16 together (Megatron-LM refuses them)", "--fp16")
    policy.update(megatron_low_precision(o, notes))
    policy.update(_optimizer_state(o, policy))
    policy.update(_fsdp(o))
    if o.flag("checkpoint-activations") or "activations-checkpoint-method" in o.options:
        return _checkpointed(o, policy, arch, pp, sequence, notes)
    if "checkpoint-num-layers" in o.options:
        raise InputError("--checkpoint-num-layers applies to --checkpoint-activations", "--checkpoint-num-layers")
    granularity = "selective" if o.flag("recompute-activations") else o.text("recompute-granularity", "none")
    if granularity not in ("none", "selective", "full"):
        raise InputError(f"--recompute-granularity {granularity}: the library reads selective and full",
                         "--recompute-granularity")
    granularity, modules = _modules(o, granularity, notes)
    policy["recompute"] = granularity
    if modules:
        policy["recompute_modules"] = modules
    if granularity == "full":
        policy["recompute_method"] = o.choice("recompute-method", "uniform", ("uniform", "block"))
        policy["recompute_layers"] = o.integer("recompute-num-layers", 1)
    else:
        for option in ("recompute-method", "recompute-num-layers"):
            if option in o.options:
                raise InputError(f"--{option} applies to --recompute-granularity full", f"--{option}")
    return _stages(o, policy, arch, pp, sequence, notes)


def _expert_overlap(o: Options, arch: Architecture, notes: list) -> dict:
    """``expert`` (``--overlap-moe-expert-parallel-comm``) and ``shared_expert``
    (``--moe-shared-expert-overlap``, which Megatron-Core applies only where there are shared
    experts: elsewhere noted as ignored) of ``Overlap``."""
    expert, shared = o.flag("overlap-moe-expert-parallel-comm"), o.flag("moe-shared-expert-overlap")
    if shared and (arch.moe is None or arch.moe.shared_f == 0):
        notes.append("--moe-shared-expert-overlap: the model has no shared experts; ignored, as Megatron-Core "
                     "ignores it")
        shared = False
    return dict(expert=expert, shared_expert=shared)


DISPATCHER_TYPES = ("allgather", "alltoall", "flex", "alltoall_seq")
"""``--moe-token-dispatcher-type``'s values (Megatron-LM's default: ``allgather``)."""


def _dispatcher(o: Options, arch: Architecture, notes: list) -> dict:
    """``dispatcher`` from ``--moe-token-dispatcher-type``: ``flex`` (DeepEP, HybridEP) and
    ``alltoall`` as themselves; ``allgather`` (Megatron-LM's default) and ``alltoall_seq`` timed
    as the all-to-all dispatcher, which ``notes`` says.  A model without experts reads none."""
    given = o.choice("moe-token-dispatcher-type", "allgather", DISPATCHER_TYPES)
    if arch.moe is None:
        return {}
    if given in ("allgather", "alltoall_seq"):
        default = "" if "moe-token-dispatcher-type" in o.options else " (Megatron-LM's default)"
        notes.append(f"--moe-token-dispatcher-type {given}{default}: the tokens' exchange is timed as the alltoall "
                     f"dispatcher's (its all-gather of the tokens over the expert ranks is not modelled)")
        return {}
    return {"dispatcher": given}


def _modules(o: Options, granularity: str, notes: list) -> tuple[str, tuple]:
    """The granularity and ``--recompute-modules`` (``Recompute.modules``), with the deprecated
    ``--moe-layer-recompute``, which Megatron-Core turns into selective recomputation of ``moe``
    added to the modules (refused beside full granularity, as Megatron-Core refuses it).  Modules
    without selective granularity are ignored by Megatron-LM, and said so in ``notes``."""
    modules = list(o.options.get("recompute-modules", []))
    if "recompute-modules" in o.options and not modules:
        raise InputError("--recompute-modules takes the modules' names", "--recompute-modules")
    if o.flag("moe-layer-recompute"):
        if granularity == "full":
            raise InputError("--moe-layer-recompute with --recompute-granularity full (Megatron-Core refuses them)",
                             "--moe-layer-recompute")
        granularity, modules = "selective", (modules or ["core_attn"]) + (["moe"] if "moe" not in modules else [])
    if modules and granularity != "selective":
        notes.append(f"--recompute-modules {' '.join(modules)}: Megatron-LM recomputes them only under "
                     f"--recompute-granularity selective; ignored, as it does")
        return granularity, ()
    return granularity, tuple(modules)


def _checkpointed(o: Options, policy: dict, arch: Architecture, pp: int, sequence: bool, notes: list) -> dict:
    """Megatron-LM's options before 2022: ``--checkpoint-activations``, the full recomputation of
    uniform chunks of ``--checkpoint-num-layers`` layers (1 by default), and from August 2021
    ``--activations-checkpoint-method uniform|block`` with ``--activations-checkpoint-num-layers``
    (1 by default; ``--checkpoint-activations`` then sets the method to uniform): what
    ``--recompute-granularity full --recompute-method`` names since; refused beside those."""
    given = "--checkpoint-activations" if o.flag("checkpoint-activations") else "--activations-checkpoint-method"
    newer = [f"--{name}" for name in ("recompute-activations", "recompute-granularity", "recompute-method",
                                      "recompute-num-layers") if name in o.options]
    if newer:
        raise InputError(f"{given} (Megatron-LM before 2022) and {newer[0]} (its successor) together: keep one",
                         newer[0])
    if "checkpoint-num-layers" in o.options and "activations-checkpoint-num-layers" in o.options:
        raise InputError("--checkpoint-num-layers and --activations-checkpoint-num-layers (its later name) together: "
                         "keep one", "--checkpoint-num-layers")
    method = "uniform" if o.flag("checkpoint-activations") else \
        o.choice("activations-checkpoint-method", "uniform", ("uniform", "block"))
    layers = o.integer("activations-checkpoint-num-layers" if "activations-checkpoint-num-layers" in o.options
                       else "checkpoint-num-layers", 1)
    policy.update(recompute="full", recompute_method=method, recompute_layers=layers)
    return _stages(o, policy, arch, pp, sequence, notes)


SHARDING = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
"""Megatron-FSDP's sharding strategy (``--data-parallel-sharding-strategy``; Megatron-Bridge's
``ddp.data_parallel_sharding_strategy``) as the ZeRO stage it shards to: the optimizer state, then
the gradients, then the parameters over the data-parallel ranks (Megatron-LM's default ``no_shard``)."""


def _fsdp(o: Options) -> dict:
    """Megatron-FSDP or PyTorch's FSDP2 (``--use-torch-fsdp2``: parameters, gradients and optimizer
    state sharded, ZeRO-3) over the data-parallel ranks, in place of the distributed optimizer."""
    megatron = o.flag("use-megatron-fsdp") or o.flag("use-custom-fsdp")
    torch = o.flag("use-torch-fsdp2")
    if megatron and torch:
        raise InputError("--use-megatron-fsdp and --use-torch-fsdp2 together: Megatron-LM takes one", "--use-torch-fsdp2")
    if not (megatron or torch):
        if "data-parallel-sharding-strategy" in o.options:
            raise InputError("--data-parallel-sharding-strategy applies to --use-megatron-fsdp",
                             "--data-parallel-sharding-strategy")
        return {}
    zero = 3 if torch else SHARDING[o.choice("data-parallel-sharding-strategy", "no_shard", tuple(SHARDING))]
    return dict(zero=zero, distributed_optimizer=False)


def _stages(o: Options, policy: dict, arch: Architecture, pp: int, sequence: bool, notes: list) -> dict:
    _split(o, policy)
    slots = arch.n_layers + policy.get("embedding_in_split", 0) + policy.get("loss_in_split", 0)
    per_stage, chunks = Fraction(slots, pp), None
    if "pipeline-model-parallel-layout" in o.options:      # Megatron-LM: the layout decides the chunks
        policy["pipeline_layout"] = o.text("pipeline-model-parallel-layout")
        chunks = Fraction(len(layout_stages(policy["pipeline_layout"])), pp)
        if chunks.denominator != 1:
            raise InputError(f"--pipeline-model-parallel-layout: its stages must be a multiple of "
                             f"--pipeline-model-parallel-size {pp} (Megatron-LM's rule)", "--pipeline-model-parallel-layout")
    if "num-layers-per-virtual-pipeline-stage" in o.options and "pipeline_layout" not in policy:
        if "decoder-first-pipeline-num-layers" in o.options or "decoder-last-pipeline-num-layers" in o.options:
            raise InputError("--num-layers-per-virtual-pipeline-stage with --decoder-first/last-pipeline-num-layers: "
                             "Megatron-LM asks for --num-virtual-stages-per-pipeline-rank with uneven stages",
                             "--num-layers-per-virtual-pipeline-stage")
        chunks = per_stage / o.integer("num-layers-per-virtual-pipeline-stage")
    for option in ("num-virtual-stages-per-pipeline-rank", "virtual-pipeline-model-parallel-size"):
        if option in o.options and "pipeline_layout" not in policy:
            chunks = Fraction(o.integer(option))
    if chunks is not None and chunks.denominator != 1:
        raise InputError(f"--num-layers-per-virtual-pipeline-stage must divide the {per_stage} layers of a stage",
                         "--num-layers-per-virtual-pipeline-stage")
    if chunks is not None and chunks > 1:
        policy.update(schedule="interleaved", virtual_stages=int(chunks))
    backend = o.choice("attention-backend", "auto", ("auto", "flash", "fused", "unfused", "local"))
    policy["flash"] = backend in ("flash", "fused") or o.flag("use-flash-attn") or \
        backend == "auto" and policy["precision"] != "fp32"
    if backend == "auto" and policy["precision"] == "fp32" and not o.flag("use-flash-attn"):
        notes.append("fp32 training: Transformer Engine's flash and fused attention take fp16 and bf16 only "
                     "(get_attention_backend's data-type filter), so auto runs its unfused attention, which keeps the "
                     "scores")
    grad, param, tensor = (o.flag(x) for x in ("overlap-grad-reduce", "overlap-param-gather", "tp-comm-overlap"))
    fsdp = any(o.flag(x) for x in ("use-megatron-fsdp", "use-custom-fsdp", "use-torch-fsdp2"))
    if param and not (grad and (policy["distributed_optimizer"] or fsdp)):
        raise InputError("--overlap-param-gather needs --overlap-grad-reduce and --use-distributed-optimizer or an "
                         "FSDP (Megatron-LM's rule)", "--overlap-param-gather")
    if tensor and not sequence:
        raise InputError("--tp-comm-overlap needs --sequence-parallel with a tensor-parallel size above 1 "
                         "(Megatron-LM's rule)", "--tp-comm-overlap")
    policy["overlap"] = Overlap(grad_reduce=grad, param_gather=param, tensor=tensor,
                                pipeline=policy.get("schedule") != "interleaved" or not o.flag("no-overlap-p2p-communication"),
                                **_expert_overlap(o, arch, notes))
    policy.update(_dispatcher(o, arch, notes))
    if "moe-expert-capacity-factor" in o.options:
        text = o.text("moe-expert-capacity-factor")
        try:
            policy["capacity_factor"] = Fraction(text)
        except (ValueError, ZeroDivisionError):        # "1/0": no number (Megatron's argparse reads a float)
            raise InputError(f"--moe-expert-capacity-factor must be a number, got {text!r}",
                             "--moe-expert-capacity-factor") from None
    return policy
