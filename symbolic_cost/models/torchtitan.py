"""A torchtitan job TOML (``train_configs/*.toml``) as an ``Architecture`` and a ``Training``.

``torchtitan_setup`` reads the file with ``tomllib`` and torchtitan's own defaults (its
``torchtitan/config/job_config.py``; the model flavours of ``torchtitan/models/llama3/__init__.py``):

============================================ =====================================================
torchtitan key (default)                     library field
============================================ =====================================================
``[model] name`` (llama3), ``flavor``        the bundled ``TransformerModelArgs`` (``FLAVORS``):
(debugmodel)                                 ``n_layers``, ``e`` = dim, ``h``, ``kv_heads``; ``f``
                                             by torchtitan's ``FeedForward``: ``int(2 (4 dim)/3)``,
                                             times ``ffn_dim_multiplier`` (``int``), rounded up to
                                             ``multiple_of``; SwiGLU, RMSNorm, rotary, no biases,
                                             no dropout, untied output; ``llama2``
                                             (until 2024-12): ``LLAMA2_FLAVORS``
``[model] tokenizer_path``                   ``vocab``: Llama 3's tokenizer (128,256) for 8B, 70B
                                             and 405B (Llama 2's, 32,000, for llama2's); the debug
                                             model's test tokenizer needs ``vocab`` given
                                             (``--vocab-size``)
``[training] local_batch_size`` or           ``b`` (without pipeline parallelism)
``batch_size`` (8)
``[training] seq_len`` (2048)                ``l`` and the model's ``context`` (``max_seq_len``)
``[training] global_batch_size``             ``micro_batches`` = ``global / (local d)`` gradient-
(``local x d``)                              accumulation steps (x ``local / b`` with pipelining)
``[training] mixed_precision_param``         ``precision``: bf16 or fp32
(bfloat16)
``[parallelism] data_parallel_shard_degree`` ``d`` = replicate x shard; shard x cp > 1: ``zero``
(-1: the rest of the world),                 3 (FSDP2 over torchtitan's ``dp_shard_cp`` mesh),
``data_parallel_replicate_degree`` (1)       gradients reduce-scattered and weights gathered
                                             behind compute (``overlap`` grad, param); replicate
                                             > 1 alone: DDP, ``zero`` 0, gradient all-reduce
                                             behind compute; replicate > 1 beside FSDP: HSDP,
                                             ``shard`` (shard 1 with cp > 1: the cp ranks shard)
``[parallelism] fsdp_reshard_after_forward`` ``reshard_after_forward``: always; never (False);
(default)                                    default: False with pipelining, else True (torchtitan
                                             keeps the last block gathered: noted)
``[parallelism] tensor_parallel_degree`` (1) ``m1`` = ``s1`` (torchtitan's norms run sequence-
                                             parallel; the loss is vocabulary-parallel)
``[parallelism] enable_async_tensor_parallel`` ``overlap`` tensor (with ``compile``; without it
                                             torchtitan ignores it, and so does the reader)
``[parallelism] context_parallel_degree``    ``cp``, each sequence split head-tail; ``cp_variant``
(1), ``context_parallel_rotate_method``      ``all-gather`` (``allgather``) or ``ring``
(allgather)                                  (``alltoall``); FSDP over shard x context ranks
``[parallelism] pipeline_parallel_degree``   ``p``; its stages as torchtitan's
(1), ``pipeline_parallel_first_stage_less_   ``generate_llm_fqn_per_model_part`` cuts them (the
layers``, ``..._last_stage_less_layers``     embedding and the output each weigh one layer):
(1, 1)                                       ``first/last_stage_layers`` (a cut with unequal
                                             middle stages is refused)
``[parallelism] pipeline_parallel_schedule`` ``schedule``: 1F1B or GPipe (looped schedules
(1F1B), ``pipeline_parallel_microbatch_size`` refused); ``b`` = the micro-batch size
(1)
``[activation_checkpoint] mode`` (selective) ``recompute``: none; full (every layer); selective
``selective_ac_option`` (2)                  with a layer frequency ``N``: full recomputation of
                                             every ``N``-th layer, ``floor(stage layers / N)`` of
                                             a stage (``recompute_method`` block); ``op``:
                                             ``recompute`` op (``models.op_recompute``: the
                                             outputs of every other matrix product and of the
                                             attention kernel saved, the rest recomputed)
``[optimizer] name`` (AdamW)                 ``optimizer``: adamw, adam
``[optimizer] implementation`` (fused)       fused, foreach, for-loop: noted (no count changes);
                                             ``fused_opt_states_bf16`` (bf16 moments) refused
world size (``--devices``)                   the product of the degrees (torchtitan's
                                             ``ParallelDims`` rule); needed when the shard degree
                                             is -1
============================================ =====================================================

Flash attention is on (``scaled_dot_product_attention`` and FlexAttention keep no ``l^2`` scores).
FSDP2 keeps fp32 sharded parameters and reduces gradients in fp32 (``mixed_precision_reduce``):
the library counts the 16-bit recipe with an fp32 master copy, the same 16 bytes per parameter
(noted in the output).  Keys that change no count are accepted (``NO_COST``: logging, profiling,
checkpoints, data, learning rate, the optimizer's hyper-parameters, compilation, the float8 and
quantisation sections but the keys ``float8`` reads when its converter applies them); any other key
is refused, naming it (converters other than float8, CPU offload, context and expert parallelism,
split points).  ``[model] converters = ["float8"]`` is ``fp8="tensorwise"`` (``float8``).
"""

from __future__ import annotations

from fractions import Fraction
from functools import partial
from math import ceil

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, InputTypeError, given_counts
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.megatron_args import Setup
from symbolic_cost.models.torchtitan_keys import Job
from symbolic_cost.models.training import Overlap

LLAMA3_VOCAB = 128256
"""Llama 3's tokenizer: 128,000 byte-pair tokens and 256 special ones (the 8B, 70B and 405B flavours)."""

FLAVORS = {
    "debugmodel": dict(dim=256, n_layers=6, n_heads=16, n_kv_heads=None, ffn_dim_multiplier=None, multiple_of=256,
                       vocab=None),
    "8B": dict(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim_multiplier="1.3", multiple_of=1024,
               vocab=LLAMA3_VOCAB),
    "70B": dict(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim_multiplier="1.3", multiple_of=4096,
                vocab=LLAMA3_VOCAB),
    "405B": dict(dim=16384, n_layers=126, n_heads=128, n_kv_heads=8, ffn_dim_multiplier="1.2", multiple_of=4096,
                 vocab=LLAMA3_VOCAB),
}
"""torchtitan's ``llama3_configs`` of its TOML generation (``TransformerModelArgs``; ``multiple_of``
defaults to 256; the debug model's vocabulary is its tokenizer's: ``None``, given on the command line)."""

PYTHON_FLAVORS = {
    **FLAVORS,
    "debugmodel": dict(FLAVORS["debugmodel"], vocab=2048),
    "debugmodel_flex_attn": dict(FLAVORS["debugmodel"], vocab=2048),
    "debugmodel_varlen_attn": dict(FLAVORS["debugmodel"], vocab=2048),
    "debugmodel_fused_qkv": dict(FLAVORS["debugmodel"], vocab=2048),
    "1B": dict(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, ffn_dim_multiplier="1.5", multiple_of=1024,
               vocab=LLAMA3_VOCAB, tied=True),
    "3B": dict(dim=3072, n_layers=28, n_heads=24, n_kv_heads=8, ffn_dim_multiplier="1.0", multiple_of=1024,
               vocab=LLAMA3_VOCAB, tied=True),
}
"""The flavours of the Python configurations (``torchtitan/models/llama3/__init__.py`` at 9810191
and b5bcd76): the debug model states its 2,048 tokens (the first generation also has it with flex
and varlen attention under its own names), and the 1B and 3B (Llama 3.2's sizes, the second
generation) tie the head to the word table (``enable_weight_tying``).  ``debugmodel_fused_qkv`` (to
2026-05; at 7cec16600) is the debug model with one product for Q, K and V (``fuse_qkv=True``): the same
weights and work, counted as the three."""

LLAMA2_VOCAB = 32000
"""Llama 2's SentencePiece tokenizer (``tokenizer.model``): 32,000 tokens."""

LLAMA2_FLAVORS = {
    "debugmodel": dict(FLAVORS["debugmodel"], n_layers=8),
    "271M": dict(dim=1024, n_layers=16, n_heads=8, n_kv_heads=None, ffn_dim_multiplier=None, multiple_of=256,
                 vocab=LLAMA2_VOCAB),
    "1B": dict(dim=2048, n_layers=18, n_heads=16, n_kv_heads=None, ffn_dim_multiplier=None, multiple_of=256,
               vocab=LLAMA2_VOCAB),
    "7B": dict(dim=4096, n_layers=32, n_heads=32, n_kv_heads=None, ffn_dim_multiplier=None, multiple_of=256,
               vocab=LLAMA2_VOCAB),
    "13B": dict(dim=5120, n_layers=40, n_heads=40, n_kv_heads=None, ffn_dim_multiplier=None, multiple_of=256,
                vocab=LLAMA2_VOCAB),
    "26B": dict(dim=5120, n_layers=80, n_heads=40, n_kv_heads=None, ffn_dim_multiplier=None, multiple_of=256,
                vocab=LLAMA2_VOCAB),
    "70B": dict(FLAVORS["70B"], vocab=LLAMA2_VOCAB),
}
"""torchtitan's ``llama2_configs`` (``torchtitan/models/llama/__init__.py`` at 6a6f755d2, the parent of
4d88a8a44, 2024-12-03, which removed them; ``[model] name = "llama2"``): the same ``Transformer`` as
llama3's flavours (``ModelArgs``: ``multiple_of`` 256, ``n_kv_heads`` None, as many as the heads),
the vocabulary Llama 2's tokenizer's (the debug model's its test tokenizer's, given on the command
line)."""

LLAMA_FLAVORS = {
    "debugmodel": dict(FLAVORS["debugmodel"], n_layers=2),
    "7B": LLAMA2_FLAVORS["7B"],
    "13B": LLAMA2_FLAVORS["13B"],
    "26B": LLAMA2_FLAVORS["26B"],
    "40B": LLAMA2_FLAVORS["26B"],
    "271M": LLAMA2_FLAVORS["271M"],
    "70B": LLAMA2_FLAVORS["70B"],
}
"""torchtitan's first ``llama_configs`` (``[model] name = "llama"``, from its first files, then named
torchtrain, 2024-02, until df2dcc746, 2024-04-19, which renamed the model ``llama2`` beside the new
``llama3``; ``torchtitan/models/llama/__init__.py`` at bfe999877, ``torchtrain/models/llama/__init__.py``
at d5c27a94c): Llama 2's ``ModelArgs`` and SentencePiece tokenizer, the flavours of ``LLAMA2_FLAVORS``
(``40B``, the name of d5c27a94c, the same arguments as ``26B``), but a debug model of 2 layers.  ``1B``
is refused (``LLAMA_AMBIGUOUS``): it named two models in those weeks."""

LLAMA_AMBIGUOUS = {"1B": "dim 1024, 16 layers, 8 heads until 2024-03 (torchtrain d5c27a94c) and dim 2048, 18 "
                         "layers, 16 heads after (torchtitan bfe999877, where the first is 271M)"}
"""Flavours of ``[model] name = "llama"`` whose arguments changed while the name stood, with the two
meanings: a file holds no date to tell them apart."""

EARLY_DEBUG_LAYERS = 8
"""The debug model's layers until torchtitan f64cf3c18 (2025-04-15) made them 6 (``llama3_configs``
of ``torchtitan/models/llama3/__init__.py`` at its parent; 8 since the first flavours, and in
``llama2_configs``).  A TOML holds no date: one of the first generation, or one with ``[model]
norm_type`` (removed in 5078e92e4, 2025-04-17), is taken as older than f64cf3c18 (``debug_layers``)."""

SCHEDULES = {"1F1B": "1f1b", "GPipe": "gpipe"}
"""torchtitan's single-stage pipeline schedules as ``Training.schedule``."""

LOOPED = {"Interleaved1F1B": "interleaved"}
"""torchtitan's looped schedules read (stage ``s`` on rank ``s mod p``: PyTorch's
``ScheduleInterleaved1F1B``) as ``Training.schedule``; the V-shaped ones (ZBVZeroBubble,
DualPipeV) place stages otherwise and are refused."""


def hidden_dim(dim: int, multiplier, multiple_of: int) -> int:
    """torchtitan's ``FeedForward`` width: ``int(2 (4 dim) / 3)``, times ``ffn_dim_multiplier``
    (then ``int``), rounded up to a multiple of ``multiple_of`` (exact: the multiplier a decimal)."""
    hidden = 2 * 4 * dim // 3
    if multiplier is not None:
        hidden = int(Fraction(multiplier) * hidden)
    return multiple_of * ceil(Fraction(hidden, multiple_of))


def check_model(job: Job) -> str:
    """The model's name, llama3 or llama2 (``LLAMA2_FLAVORS``); another is refused first, by its name,
    before any key that only it would explain (``torchtitan_setup`` reads the other bundled models
    before this)."""
    model = job.get("model", "name", "llama3", str)
    if model not in ("llama3", "llama2", "llama"):
        raise InputError(f"[model] name {model!r}: the reader bundles torchtitan's llama3 and llama2 (llama) flavours "
                         f"here; give that model's config.json with --hf-config and its layout with --set", "[model] name")
    return model


def architecture(job: Job, name: str, seq: int, vocab: int | None, notes: list, flavors=FLAVORS) -> Architecture:
    """The Llama 3 of ``[model] flavor`` (of ``flavors``; a llama2 model's of ``LLAMA2_FLAVORS``), its
    vocabulary and context."""
    model = check_model(job)
    flavors = {"llama2": LLAMA2_FLAVORS, "llama": LLAMA_FLAVORS}.get(model, flavors)
    flavor = job.get("model", "flavor", "debugmodel", str)
    if model == "llama" and flavor in LLAMA_AMBIGUOUS:
        raise InputError(f"[model] flavor {flavor!r} of [model] name 'llama': torchtitan's first llama flavours gave "
                         f"that name two models, {LLAMA_AMBIGUOUS[flavor]}, and the file does not say which; give "
                         f"the model with --hf-config and its layout with --set", "[model] flavor")
    if flavor not in flavors:
        raise InputError(f"[model] flavor {flavor!r}: the reader bundles {', '.join(flavors)}", "[model] flavor")
    a = flavors[flavor]
    stated = a["vocab"]
    if vocab is not None and stated is not None and vocab != stated:
        notes.append(f"--vocab-size {vocab} (command line) replaces the tokenizer's {stated} ({model} {flavor})")
    vocab = vocab or stated
    if vocab is None:
        raise InputError("the debug model's vocabulary comes from its tokenizer files, which the reader does not "
                         "open; give --vocab-size", "--vocab-size")
    heads = a["n_heads"]
    layers = debug_layers(job, notes) if flavors is FLAVORS and flavor == "debugmodel" else a["n_layers"]
    return Architecture(
        f"{name} ({model} {flavor})", layers, a["dim"], heads,
        hidden_dim(a["dim"], a["ffn_dim_multiplier"], a["multiple_of"]), vocab, kv_heads=a["n_kv_heads"],
        mlp="swiglu", norm="rms", rotary=True, tied=a.get("tied", False), qkv_bias=False, bias=False, dropouts=False, context=seq)


def debug_layers(job: Job, notes: list) -> int:
    """The TOML debug model's layers: ``EARLY_DEBUG_LAYERS`` in a file of the first generation or
    with ``[model] norm_type`` (noted: the same text served two days of the 6-layer model, until
    5078e92e4), else the 6 of ``FLAVORS``."""
    if not (job.first or "norm_type" in job.data.get("model", {})):
        return FLAVORS["debugmodel"]["n_layers"]
    notes.append(f"debugmodel: {EARLY_DEBUG_LAYERS} layers, as torchtitan built it until f64cf3c18 (2025-04-15; 6 "
                 f"after), the file being "
                 + ("of the first generation" if job.first else "one with [model] norm_type (removed 2025-04-17)"))
    return EARLY_DEBUG_LAYERS


def stage_layers(layers: int, stages: int, first_less: int, last_less: int) -> list[int]:
    """The transformer layers of each pipeline stage as torchtitan's ``generate_llm_fqn_per_model_part``
    cuts them: ``layers + first_less + last_less`` weighted layers spread evenly (the first stages
    one more when they do not divide), the embedding weighing ``first_less`` on the first stage and
    the norm and output ``last_less`` on the last."""
    weighted = layers + first_less + last_less
    each, extra = divmod(weighted, stages)
    if each == 0 or first_less > each or last_less > each:
        raise InputError(f"torchtitan cannot cut {layers} layers (+{first_less} +{last_less}) into {stages} stages",
                         "[parallelism] pipeline_parallel_degree")
    counts = [each + (i < extra) for i in range(stages)]
    counts[0] -= first_less
    counts[-1] -= last_less
    return counts


SDPA_LIBRARY = {"blackwell": "cudnn", "hopper": "flash-attention-2", "ampere": "flash-attention-2"}
"""The fused attention torchtitan's SDPA attention runs by GPU generation (``Training.attention_kernel``):
its ``ScaledDotProductAttention`` puts PyTorch's cuDNN backend first from compute capability 10.0
(Blackwell) and otherwise keeps PyTorch's order, FlashAttention-2 first
(``torchtitan/models/attention.py``, ``_init_backend``)."""


FLEX_ONLY = ("gpt_oss",)
"""Models whose attention the last TOML generation runs by FlexAttention alone (``GptOssModelArgs``:
``attn_type = "flex"``, "gpt-oss only support FlexAttention"), not SDPA; so do Llama 4's ``_irope``
flavours (``attn_type="flex"``: ``flex_attention``) and the flavours of ``FLEX_FLAVORS``."""

FLEX_FLAVORS = {"deepseek_v3": {"16B": "f738a03, 2025-08-22", "236B": "f738a03, 2025-08-22",
                                "671B": "f738a03, 2025-08-22"}}
"""Flavours the last TOML generation (9810191^, 2026-02) runs by FlexAttention with a block-causal mask
beside models that run SDPA (``torchtitan/models/deepseek_v3/__init__.py``: ``attn_type="flex"``,
``attn_mask_type="block_causal"``; ``use_flex_attn=True`` from the commit named, "Switch DeepSeekV3 to Use
FlexAttention by Default"; a TOML of before it ran them by SDPA, causal).  Their debug model and Qwen3's
flavours keep ``ModelArgs``' ``attn_type="sdpa"``, ``attn_mask_type="causal"``."""

DOCUMENT_MASK = ("attention within each packed document (varlen, or a block-causal mask): counted as causal "
                 "attention over the whole sequence (an upper bound)")
"""The note of a model whose attention stops at each document's end (torchtitan's ``block_causal`` mask,
or varlen attention): the library counts causal attention over the whole sequence."""


def flex_attention(model: str, flavor: str) -> bool:
    """Whether the last TOML generation runs ``model``'s ``flavor`` by FlexAttention (``FLEX_ONLY``,
    ``FLEX_FLAVORS``, Llama 4's ``_irope``)."""
    return model in FLEX_ONLY or flavor.endswith("_irope") or flavor in FLEX_FLAVORS.get(model, {})


def block_causal(model: str, flavor: str) -> bool:
    """Whether the last TOML generation masks ``model``'s ``flavor`` block-causally (each packed
    document apart: ``attn_mask_type="block_causal"``): ``FLEX_FLAVORS`` and Llama 4's ``_irope``;
    GPT-OSS's flavours are ``causal`` (``GptOssModelArgs``)."""
    return flavor.endswith("_irope") or flavor in FLEX_FLAVORS.get(model, {})


def sdpa_attention(setup: Setup, arch: str | None) -> Setup:
    """``setup`` (a job TOML's: SDPA attention) with the library torchtitan runs on ``arch``
    (``SDPA_LIBRARY``), noted; as it is on a generation the table leaves out."""
    if arch is not None and not isinstance(arch, str):
        raise InputTypeError(f"gpu must be a GPU generation's name ({', '.join(SDPA_LIBRARY)}, ...) or None, got "
                             f"{arch!r}", "gpu")
    library = SDPA_LIBRARY.get(arch.lower() if arch else arch)       # "Hopper" is hopper
    if library is None or not setup.policy.get("flash"):
        return setup
    setup.policy["attention_kernel"] = library
    setup.notes.append(f"attention timed as {library}: torchtitan's scaled_dot_product_attention runs it first on "
                       f"{arch} GPUs")
    return setup


def torchtitan_setup(text: str, name: str, world: int | None = None, vocab: int | None = None,
                     gpu: str | None = None) -> Setup:
    """The model, values and policy of a torchtitan job TOML; ``world`` is the number of
    processes (``--devices``), ``vocab`` a tokenizer's vocabulary, ``gpu`` the GPU generation the
    attention is timed on (``sdpa_attention``; a FlexAttention model's, ``flex_attention``, is
    timed as the system's own fused kernel, noted).  A ``[model] name`` other than llama3 that
    ``models.torchtitan_models`` bundles (deepseek_v3, qwen3, gpt_oss, llama4) is that model's
    flavour as the last TOML generation defined it (``TOML_FLAVORS``)."""
    job = Job(text, name)
    model = job.get("model", "name", "llama3", str)
    if model in ("llama3", "llama2", "llama"):
        return sdpa_attention(job_setup(job, name, world, vocab), gpu)
    from symbolic_cost.models.torchtitan_models import toml_architecture
    flavor = job.get("model", "flavor", "debugmodel", str)
    notes = []
    sized = tokenizer_vocab(job, model, vocab, notes)
    if vocab is not None and sized is None:
        notes.append(f"--vocab-size {vocab}: {model}'s flavours state their vocabulary (ModelArgs.vocab_size), which "
                     f"torchtitan uses; the option changes nothing")
    setup = job_setup(job, name, world, None, notes=notes, model=partial(toml_architecture, model, flavor, vocab=sized))
    if not flex_attention(model, flavor):
        return sdpa_attention(setup, gpu)
    since = FLEX_FLAVORS.get(model, {}).get(flavor)
    setup.notes.insert(0, f"{model} {flavor} attends by FlexAttention (this generation's"
                          + (f"; torchtitan's flavour since {since}, SDPA before" if since else "")
                          + "): timed as the system's fused attention kernel")
    if block_causal(model, flavor):
        setup.notes.insert(1, DOCUMENT_MASK)
    return setup


def tokenizer_vocab(job: Job, model: str, vocab: int | None, notes: list) -> int | None:
    """The vocabulary of a llama4 TOML that names its tokenizer (``[model] tokenizer_path``, from e4e48349c,
    2025-04-07, until b5b7ffbd6, 2025-08-19, which put ``hf_assets_path`` in its place): until 177b295d2
    (2025-07-22) torchtitan sized Llama 4's vocabulary by that tokenizer (``ModelArgs.vocab_size = -1``,
    "defined later by tokenizer": a TikTokenizer's ranks and its 256 reserved tokens,
    ``torchtitan/datasets/tokenizer/tiktoken.py`` at e0d2de682; from 681df506a, 2025-07-10, the Hugging
    Face tokenizer's ``get_vocab_size()``), which the reader does not open.  ``vocab`` (``--vocab-size``)
    when given; else ``None``, the stated vocabulary, noted.  ``None`` for other files and models."""
    if model != "llama4" or "tokenizer_path" not in job.data.get("model", {}):
        return None
    if vocab is not None:
        notes.append(f"--vocab-size {vocab}: the vocabulary of the tokenizer [model] tokenizer_path names, as "
                     f"torchtitan sized llama4 until 177b295d2 (2025-07-22)")
        return vocab
    notes.append("[model] tokenizer_path: until 177b295d2 (2025-07-22) torchtitan sized llama4's vocabulary by that "
                 "tokenizer, which the reader does not open; counted with the flavour's stated vocabulary (the "
                 "later files'): give --vocab-size for a file of before")
    return None


def job_setup(job: Job, name: str, world: int | None, vocab: int | None, flavors=FLAVORS,
              notes: list | None = None, model=None) -> Setup:
    """``torchtitan_setup`` of the sections ``job`` holds (a TOML's, or a Python configuration's:
    ``models.torchtitan_python``, with its ``flavors``; ``model``, a function of the sequence length
    giving another model than llama3's flavours, ``models.torchtitan_models``)."""
    world, vocab = given_counts(world=world, vocab=vocab)
    notes = [] if notes is None else notes
    notes.extend(job.notes)
    if model is None:
        check_model(job)
        for key in ("expert_parallel_degree", "expert_tensor_parallel_degree"):
            job.refuse("parallelism", key, 1, f"{job.get('model', 'name', 'llama3', str)} has no experts")
    for section, key, inert, why in (
            ("training", "enable_cpu_offload", False, "FSDP's CPU offload of parameters, gradients and optimizer "
             "state is not modelled"),
            ("optimizer", "early_step_in_backward", False, "the optimizer step in backward is not modelled"),
            ("fault_tolerance", "enable", False, "torchft's replica groups are not modelled"),
            ("parallelism", "disable_loss_parallel", False, "the library keeps the logits split over the tensor "
             "ranks (loss parallel)"),
            ("parallelism", "pipeline_parallel_split_points", None, "the reader cuts stages as torchtitan's default"),
            ("parallelism", "module_fqns_per_model_part", None, "the reader cuts stages as torchtitan's default"),
            ("parallelism", "pipeline_parallel_schedule_csv", None, "a schedule from a file is not modelled")):
        job.refuse(section, key, inert, why)
    seq = job.get("training", "seq_len", 2048, minimum=1)
    arch = architecture(job, name, seq, vocab, notes, flavors) if model is None else model(seq)
    values, policy = layout(job, arch, world, notes)
    policy.update(precision=_precision(job, policy["zero"], notes), flash=True, optimizer=_optimizer(job, notes),
                  **float8(job, notes))
    if policy.get("fp8_gather") and world_and_data(job, world)[2] == 1:
        # torchtitan's Float8Converter: enable_fsdp_float8_all_gather = parallel_dims.dp_shard_enabled and ...
        policy["fp8_gather"] = False
        notes.append("[float8] enable_fsdp_float8_all_gather: the data-parallel shard degree is 1, so torchtitan's "
                     "float8 converter gathers no weight in float8 (it asks dp_shard_enabled): no effect")
    policy.update(recompute(job, arch.n_layers, values[S.p], policy, notes))
    if job.first and policy.get("fp8") and policy.get("recompute") == "op":
        raise InputError("[activation_checkpoint] selective_ac_option 'op' beside float8 in torchtitan's first TOML "
                         "generation: its save list did not hold aten._scaled_mm, so float8's products ran again in "
                         "backward, where the library's op-level policy (the later list) saves them",
                         "[activation_checkpoint] selective_ac_option")
    values[S.l] = seq
    if policy["precision"] == "bf16":
        notes.append("FSDP2 keeps fp32 sharded parameters and reduces gradients in fp32 (torchtitan's "
                     "mixed_precision_reduce): counted as the 16-bit recipe with an fp32 master copy, the same 16 "
                     "bytes per parameter; the gradients' bytes follow --conventions")
    return Setup(arch, values, policy, notes)


def float8(job: Job, notes: list) -> dict:
    """The low-precision recipe of ``[model] converters``: ``["float8"]`` is torchao's ``Float8Linear``
    on every linear layer of the blocks (``[float8] filter_fqns``, default ``["output"]``, keeps the
    head out, as the library's recipes do) with dynamic scaling (``TORCHAO_RECIPES``: ``recipe_name``
    unset or ``"tensorwise"``, ``fp8="torchao-tensorwise"``; ``"rowwise"``, ``"torchao-rowwise"``);
    ``enable_fsdp_float8_all_gather`` gathers those weights in FP8 (``fp8_gather``, tensor-wise
    only).  Other converters (MX, quantisation), ``rowwise_with_gw_hp``, delayed scaling (the
    ``scaling_type_*`` of 2024), other filters and emulation are refused by name."""
    converters = job.data.get("model", {}).get("converters", [])
    if isinstance(converters, str):     # torchtitan's string_list: a TOML string split on commas (to e0d2de6)
        converters = [word.strip() for word in converters.split(",") if word.strip()]
    converters = Job("", "", data={"model": {"converters": converters}}).get("model", "converters", [], list)
    if not converters:
        return {}
    if converters == ["mx"]:
        return mxfp8(job, notes)
    if len(converters) != 1 or not isinstance(converters[0], str) or converters[0] not in FLOAT8_SECTIONS:
        raise InputError(f"[model] converters {converters}: the reader reads [\"float8\"] (torchao's float8 "
                         f"training; \"quantize.linear.float8\" from 2025-09-26 to 2026-02-23); MX and other "
                         f"quantisation converters are not modelled", "[model] converters")
    path = FLOAT8_SECTIONS[converters[0]]
    for other, where in FLOAT8_SECTIONS.items():
        if where != path and _table(job, where):
            raise InputError(f"[model] converters {converters} beside a [{'.'.join(where)}] section: torchtitan of "
                             f"the file's generation registers its float8 converter as {other!r} (the section's name), "
                             f"and would not run {converters[0]!r}", "[model] converters")
    whole = job             # its [compile] says whether the casts are compiled
    job = Job("", "", data={"float8": _table(job, path)})       # the converter's settings, wherever they sit
    recipe = job.get("float8", "recipe_name", "tensorwise", str)
    if recipe not in TORCHAO_RECIPES:
        raise InputError(f"[float8] recipe_name {recipe!r}: the reader reads torchao's "
                         f"{' and '.join(map(repr, TORCHAO_RECIPES))}; rowwise_with_gw_hp's weight gradients, "
                         f"16-bit products beside FP8 ones, are not modelled", "[float8] recipe_name")
    filtered = job.get("float8", "filter_fqns", ["output"], list)
    if not all(isinstance(name, str) for name in filtered) or not set(filtered) <= KEPT_BY_THE_LIBRARY:
        raise InputError(f"[float8] filter_fqns {filtered}: the library keeps the output head and the MoE router "
                         f"in 16-bit and converts every other linear layer of the blocks; other filters are not "
                         f"modelled", "[float8] filter_fqns")
    if "output" not in filtered:
        notes.append(f"[float8] filter_fqns {filtered} converts the output head too; the library keeps it in 16-bit")
    for kind in ("input", "weight", "grad_output"):      # torchtitan 91f075ae2 (2024-07) to 2271b6386 (2025-01)
        if job.get("float8", f"scaling_type_{kind}", "dynamic", str) != "dynamic":
            raise InputError(f"[float8] scaling_type_{kind} {job.data['float8'][f'scaling_type_{kind}']!r}: delayed "
                             f"scaling (a history of maxima, synchronised every step) is not modelled; the reader "
                             f"reads dynamic scaling", f"[float8] scaling_type_{kind}")
    if job.get("float8", "emulate", False, bool):
        raise InputError("[float8] emulate = true runs float8 in 16-bit arithmetic (for testing): its time is "
                         "not FP8's; remove it", "[float8] emulate")
    gather = job.get("float8", "enable_fsdp_float8_all_gather", False, bool)
    if gather and recipe != "tensorwise":
        raise InputError(f"[float8] enable_fsdp_float8_all_gather with recipe_name {recipe!r}: torchao gathers "
                         f"weights in float8 under tensor-wise scaling only", "[float8] enable_fsdp_float8_all_gather")
    if not compiled(whole):
        notes.append("float8 without compile: its casts are timed as torch.compile fuses them (one kernel finds "
                     "the scale, one casts); eager runs several kernels a cast")
    return dict(fp8=TORCHAO_RECIPES[recipe], fp8_gather=gather)


def mxfp8(job: Job, notes: list) -> dict:
    """The MX converter of torchtitan's Python configs, ``MXFP8LinearConverter`` (``components/quantization/
    mx.py``): torchao's ``MXFP8Linear`` on every ``Linear`` whose name holds one of ``fqns`` (every one
    when empty, the output head too), ``fp8="torchao-mxfp8"`` (Blackwell only, as torchtitan asserts
    ``has_cuda_capability(10, 0)``).  The library converts the linear layers of the blocks and keeps the
    head in 16-bit (noted); other ``fqns`` are refused, and so is the TOML generation's ``[mx]`` (its
    ``MXLinear`` of ``mx_formats``, another class)."""
    section = job.data.get("mx", {})
    if not isinstance(section, dict) or section.get("converter") != "MXFP8LinearConverter":
        raise InputError("[model] converters [\"mx\"] of a TOML: its [mx] section (torchao's mx_formats MXLinear) is "
                         "not modelled; the reader reads MXFP8LinearConverter of torchtitan's Python configs",
                         "[model] converters")
    if "fqns" not in section or section["fqns"]:
        raise InputError(f"MXFP8LinearConverter fqns {section.get('fqns', '(not read)')!r}: the library converts every "
                         f"linear layer of the blocks; a selection of them is not modelled", "MXFP8LinearConverter fqns")
    notes.append("MXFP8LinearConverter with fqns [] converts every Linear, the output head too; the library keeps the "
                 "head in 16-bit")
    if not compiled(job):
        notes.append("MXFP8 without compile: its casts are timed as torch.compile fuses them (one kernel a cast)")
    return dict(fp8="torchao-mxfp8", fp8_gather=False)


FLOAT8_SECTIONS = {"float8": ("float8",), "quantize.linear.float8": ("quantize", "linear", "float8"),
                   "quantize.dense.float8": ("quantize", "dense", "float8")}
"""Each float8 converter's name in ``[model] converters`` and the section of its settings: ``[float8]``
until 2025-09, ``[quantize.linear.float8]`` after (``[quantize.dense.float8]`` briefly, at 5b5d468),
torchtitan's ``components/quantization/float8.py`` registering the converter under that name."""


def _table(job: Job, path: tuple) -> dict:
    """The (nested) TOML table at ``path``, empty when absent."""
    table = job.data
    for key in path:
        table = table.get(key, {}) if isinstance(table, dict) else {}
    return table if isinstance(table, dict) else {}


def compiled(job: Job) -> bool:
    """Whether the job runs under torch.compile (``[compile] enable``; ``[training] compile`` before it):
    a boolean, as torchtitan's field is (``"false"``, truthy to torchtitan, is refused, not read as off)."""
    return job.get("training", "compile", False, bool) or job.get("compile", "enable", False, bool)


KEPT_BY_THE_LIBRARY = {"output", "router.gate"}
"""Layers a float8 filter may leave out that the library keeps in 16-bit anyway: the head, and the
MoE router (``models.recipes.KEPT_16BIT``)."""


TORCHAO_RECIPES = {"tensorwise": "torchao-tensorwise", "rowwise": "torchao-rowwise"}
"""torchao's float8 recipe names (``Float8LinearRecipeName``) and the library's FP8 recipe of each."""


def _precision(job: Job, zero: int, notes: list) -> str:
    """``[training] mixed_precision_param`` (bfloat16 or float32).  The first TOML generation cast to
    it only through FSDP's ``MixedPrecisionPolicy`` (torchtitan's mixed precision without FSDP came on
    2025-06-16, 0b44d4c43): without FSDP such a file trains in fp32, noted."""
    value = job.get("training", "mixed_precision_param", "bfloat16", str)
    if value not in ("bfloat16", "float32"):
        raise InputError(f"[training] mixed_precision_param {value!r}: torchtitan takes bfloat16 or float32",
                         "[training] mixed_precision_param")
    if job.first and zero == 0 and value == "bfloat16":
        notes.append("torchtitan's first TOML generation cast to bfloat16 only through FSDP's mixed precision: "
                     "without FSDP (one shard) this file trains in fp32")
        return "fp32"
    return {"bfloat16": "bf16", "float32": "fp32"}[value]


IMPLEMENTATIONS = ("fused", "foreach", "for-loop")
"""``[optimizer] implementation`` values that only choose how the update's kernels run (fused, grouped or
one tensor at a time): the same state and the same count.  torchtitan's fourth,
``fused_opt_states_bf16`` (its ``docs/bf16_optimizer_states.md``), keeps Adam's two moments in bf16
beside fp32 parameters: a state the library's recipes do not express, refused."""


def _optimizer(job: Job, notes: list) -> str:
    """``[optimizer] name`` (AdamW or Adam), and its ``implementation`` (``IMPLEMENTATIONS``) checked."""
    chosen = job.get("optimizer", "name", "AdamW", str)
    if chosen not in ("AdamW", "Adam"):
        raise InputError(f"[optimizer] name {chosen!r}: the reader reads AdamW and Adam", "[optimizer] name")
    implementation = job.get("optimizer", "implementation", "fused", str)
    if implementation == "fused_opt_states_bf16":
        raise InputError("[optimizer] implementation 'fused_opt_states_bf16': Adam's moments kept in bf16 beside "
                         "fp32 parameters (4 bytes a parameter instead of 8) are not a recipe the library counts",
                         "[optimizer] implementation")
    if implementation not in IMPLEMENTATIONS:
        raise InputError(f"[optimizer] implementation {implementation!r}: torchtitan's are "
                         f"{', '.join(IMPLEMENTATIONS)}, fused_opt_states_bf16", "[optimizer] implementation")
    if "implementation" in job.data.get("optimizer", {}):
        notes.append(f"[optimizer] implementation {implementation!r}: how the update's kernels run; the same "
                     f"optimizer state, no count changes")
    return chosen.lower()


def world_and_data(job: Job, world: int | None) -> tuple[int, int, int]:
    """``(world, replicate, shard)``: torchtitan's ``ParallelDims`` rule ``replicate x shard x cp x
    tp x pp = world``, the shard degree -1 taking the rest."""
    replicate, cp, tp, pp = (job.degree(k) for k in ("data_parallel_replicate_degree", "context_parallel_degree",
                                                      "tensor_parallel_degree", "pipeline_parallel_degree"))
    others = replicate * cp * tp * pp
    shard = job.get("parallelism", "data_parallel_shard_degree", -1)
    if shard == -1:
        if world is None:
            raise InputError("[parallelism] data_parallel_shard_degree = -1 takes the rest of the world; give the "
                             "number of processes with --devices", "--devices")
        if world % others:
            raise InputError(f"world size {world} is not a multiple of replicate x context x tensor x pipeline = "
                             f"{others} (torchtitan's rule)", "--devices")
        shard = world // others
    elif shard < 1:
        raise InputError(f"[parallelism] data_parallel_shard_degree must be -1 or at least 1, got {shard}",
                         "[parallelism] data_parallel_shard_degree")
    product = shard * others
    if world is not None and world != product:
        raise InputError(f"world size {world} is not replicate x shard x context x tensor x pipeline = {product} "
                         f"(torchtitan's rule)", "--devices")
    return product, replicate, shard


def layout(job: Job, arch: Architecture, world: int | None, notes: list) -> tuple[dict, dict]:
    """The ``--set`` values (degrees, micro-batch, micro-batches) and the sharding and pipeline policy."""
    world, replicate, shard = world_and_data(job, world)
    tp, pp = job.degree("tensor_parallel_degree"), job.degree("pipeline_parallel_degree")
    d = replicate * shard
    training = job.data.get("training", {})
    if "local_batch_size" in training and "batch_size" in training:
        raise InputError("[training] local_batch_size and batch_size (its older name) together; give one",
                         "[training] batch_size")
    local = job.get("training", "local_batch_size" if "local_batch_size" in training else "batch_size", 8, minimum=1)
    batch = job.get("training", "global_batch_size", -1)
    batch = local * d if batch == -1 else batch
    if batch < 1 or batch % (local * d):
        raise InputError(f"[training] global_batch_size {batch} is not a multiple of local batch x data-parallel "
                         f"degree = {local} x {d} (torchtitan's rule)", "[training] global_batch_size")
    micro = job.get("parallelism", "pipeline_parallel_microbatch_size", 1, minimum=1) if pp > 1 else local
    if local % micro:
        raise InputError(f"[parallelism] pipeline_parallel_microbatch_size {micro} does not divide the local batch "
                         f"{local} (torchtitan's rule)", "[parallelism] pipeline_parallel_microbatch_size")
    cp = job.degree("context_parallel_degree")
    values = {S.b: micro, S.m1: tp, S.s1: tp, S.d: d, S.p: pp, S.n_micro: batch // (local * d) * (local // micro),
              S.cp: cp, **experts(job, arch, shard, tp, cp)}
    policy = dict(zero=3 if shard * cp > 1 else 0, overlap=overlap(job, d * cp, shard * cp, tp, notes),
                  **context(job, cp))     # FSDP shards (and gradients reduce) over the shard x context ranks
    if replicate > 1 and shard * cp > 1:    # HSDP: FSDP2 on the mesh (dp_replicate, dp_shard x cp)
        policy["shard"] = shard             # the data ranks of a shard group; Training multiplies in cp
    policy.update(pipeline(job, arch.n_layers, pp, arch.mtp_layers or 0))
    policy.update(dispatcher(job, arch, notes))
    if shard * cp > 1:
        policy.update(resharding(job, pp, notes))
    return values, policy


CP_ROTATIONS = {"allgather": "all-gather", "alltoall": "ring"}
"""PyTorch's ``context_parallel`` exchanges of keys and values (``_RotateMethod``): all-gathered (its
default) or passed round the ring (``alltoall``), as ``Training.cp_variant`` names them."""


def context(job: Job, cp: int) -> dict:
    """torchtitan's context parallelism (PyTorch's ``context_parallel``): each sequence split over
    ``cp`` ranks head-tail (the load balancer by default; two chunks a rank, as Megatron-LM's), the
    keys and values all-gathered or passed round a ring (``[parallelism] context_parallel_rotate_method``,
    ``CP_ROTATIONS``); FSDP shards the parameters over the shard x context ranks.  Another balancer
    (none, or ``ptrr`` for FlexAttention) is refused."""
    if cp == 1:
        return {}
    balancer = job.get("parallelism", "context_parallel_load_balancer", "headtail", str)
    if balancer != "headtail":
        raise InputError(f"[parallelism] context_parallel_load_balancer {balancer!r}: the library splits each "
                         f"sequence head-tail (torchtitan's default)", "[parallelism] context_parallel_load_balancer")
    method = job.get("parallelism", "context_parallel_rotate_method", "allgather", str)
    if method not in CP_ROTATIONS:
        raise InputError(f"[parallelism] context_parallel_rotate_method {method!r}: PyTorch's are "
                         f"{' and '.join(CP_ROTATIONS)}", "[parallelism] context_parallel_rotate_method")
    return {"cp_variant": CP_ROTATIONS[method]}


def experts(job: Job, arch: Architecture, shard: int, tp: int, cp: int = 1) -> dict:
    """``ep`` and ``etp``: with expert parallelism the experts whole on ``ep`` ranks borrowed from the
    shard and tensor ranks (torchtitan's mesh rule ``dp_shard x cp x tp = efsdp x ep``; the tokens
    stay split over the tensor ranks), without it each expert split over the tensor ranks (its
    ``MOE_SHARDING.md``).  The TOML generation's ``expert_tensor_parallel_degree`` (ETP) has "no
    effect ... when ep = 1" (its ``job_config.py``), and 1 beside expert parallelism is the rule read
    ("partial dp + all tp -> ep"); ETP = TP beside it (experts split over the tensor ranks, EP from the
    data ranks alone) is refused."""
    ep = job.degree("expert_parallel_degree")
    if arch.moe is None:
        return {S.ep: 1, S.etp: S.m1}           # no expert layer: the degree follows m1, a --set m1 too
    if ep > 1:
        job.refuse("parallelism", "expert_tensor_parallel_degree", 1, "experts split over the tensor ranks beside "
                   "expert parallelism taken from the data ranks alone (etp = tp) are not read")
    if cp > 1 and ep > 1:
        raise InputError("[parallelism] expert_parallel_degree with context_parallel_degree: experts borrowing "
                         "context ranks (dp_shard x cp x tp = efsdp x ep) are not read", "[parallelism] "
                         "context_parallel_degree")
    if (shard * tp) % ep:
        raise InputError(f"[parallelism] expert_parallel_degree {ep} does not divide data_parallel_shard_degree x "
                         f"tensor_parallel_degree = {shard * tp} (torchtitan's rule dp_shard x cp x tp = efsdp x ep)",
                         "[parallelism] expert_parallel_degree")
    return {S.ep: ep, S.etp: 1 if ep > 1 else tp}


COMM_BACKENDS = ("standard", "deepep", "hybridep", "minimal_async_ep")
"""How torchtitan's experts exchange their tokens: ``standard`` all-to-alls, DeepEP's or HybridEP's
kernels, or its own asynchronous all-to-alls (``[parallelism] expert_parallel_comm_backend``; a Python
configuration's ``model_registry(moe_comm_backend=...)``)."""
FLEX_BACKENDS = ("deepep", "hybridep")
"""The backends that send a token once to each node holding one of its experts."""


def dispatcher(job: Job, arch: Architecture, notes: list) -> dict:
    """``dispatcher``: ``flex`` (a token sent once to each node holding one of its experts,
    ``blocks.wiring.Experts``) under DeepEP or HybridEP, the all-to-all one under ``standard`` and
    ``minimal_async_ep`` (its overlap noted as not modelled); a model without experts ignores the
    backend, as torchtitan does, and is told so."""
    found = {f"[{section}] {key}": job.get(section, key, "standard", str)
             for section, key in (("parallelism", "expert_parallel_comm_backend"), ("model", "moe_comm_backend"))}
    for where, backend in found.items():
        if backend not in COMM_BACKENDS:
            raise InputError(f"{where} {backend!r}: torchtitan's are {', '.join(COMM_BACKENDS)}", where)
    chosen = {where: backend for where, backend in found.items() if backend != "standard"}
    if not chosen:
        return {}
    if arch.moe is None:
        notes.append(f"{', '.join(chosen)}: {arch.name} has no experts; ignored, as torchtitan ignores it")
        return {}
    if not set(chosen.values()) & set(FLEX_BACKENDS):
        notes.append(f"{', '.join(chosen)} minimal_async_ep: the tokens' all-to-alls counted as the standard "
                     f"ones, exposed (their overlap with compute is not modelled)")
        return {}
    return {"dispatcher": "flex"}


def resharding(job: Job, pp: int, notes: list) -> dict:
    """FSDP2's ``reshard_after_forward``: always, never, or torchtitan's default (not with pipelining;
    without it every block but the last, whose backward follows at once)."""
    reshard = job.get("parallelism", "fsdp_reshard_after_forward", "default", str)
    if reshard not in ("default", "always", "never"):
        raise InputError(f"[parallelism] fsdp_reshard_after_forward {reshard!r}: torchtitan takes default, always, "
                         f"never", "[parallelism] fsdp_reshard_after_forward")
    if reshard == "default" and pp == 1:
        notes.append("fsdp_reshard_after_forward default: torchtitan keeps the last block's gathered weights for "
                     "backward (one all-gather fewer); counted as resharding every block")
    return {} if reshard == "always" or (reshard == "default" and pp == 1) else dict(reshard_after_forward=False)


def overlap(job: Job, d: int, shard: int, tp: int, notes: list) -> Overlap:
    """FSDP2 and DDP run their collectives behind compute (prefetched gathers, reduce-scatters and
    bucketed all-reduces on their own streams); async tensor parallelism needs ``compile``."""
    asked, on = job.get("parallelism", "enable_async_tensor_parallel", False, bool), compiled(job)
    if asked and not (on and tp > 1):
        notes.append("enable_async_tensor_parallel takes effect with compile and tensor parallelism only "
                     "(torchtitan); not counted")
    return Overlap(grad_reduce=d > 1, param_gather=shard > 1, tensor=asked and on and tp > 1)


def pipeline(job: Job, layers: int, pp: int, mtp: int = 0) -> dict:
    """The schedule and torchtitan's cut of the layers into stages (``stage_layers``): one stage a
    rank (1F1B, GPipe) or, under a looped schedule (``LOOPED``), ``v`` a rank, stage ``s`` on rank
    ``s mod p`` (torchtitan's ``_get_pipeline_metadata``: ``v`` = 2 by default, or the stages
    ``pipeline_parallel_layers_per_stage`` makes).  Uneven end stages are ``first/last_stage_layers``;
    any other cut (unequal middle stages, model chunks) is written as Megatron's layout string of the
    same stages (``parallel.splits.layout_layers`` places stage ``s`` the same way), the embedding on
    the first and the head, after the MTP modules, on the last."""
    name = job.get("parallelism", "pipeline_parallel_schedule", "1F1B", str)
    if pp == 1:
        return {}
    if name not in SCHEDULES and name not in LOOPED:
        raise InputError(f"[parallelism] pipeline_parallel_schedule {name!r}: the reader reads "
                         f"{', '.join(SCHEDULES)} (one stage per rank) and {', '.join(LOOPED)} (looped)",
                         "[parallelism] pipeline_parallel_schedule")
    first = job.get("parallelism", "pipeline_parallel_first_stage_less_layers", 1)
    last = job.get("parallelism", "pipeline_parallel_last_stage_less_layers", 1)
    stages = _stages(job, layers + first + last, pp, name in LOOPED)
    counts = stage_layers(layers, stages, first, last)
    v = stages // pp
    if v == 1 and len(set(counts[1:-1])) <= 1:
        policy = dict(schedule=SCHEDULES[name])
        if len(set(counts)) > 1:
            policy.update(first_stage_layers=counts[0], last_stage_layers=counts[-1])
        return policy
    ends = {0: ("E", ""), len(counts) - 1: ("", "m" * mtp + "L")}
    layout = "|".join(ends.get(i, ("", ""))[0] + "t" * c + ends.get(i, ("", ""))[1] for i, c in enumerate(counts))
    return dict(schedule=LOOPED.get(name, SCHEDULES.get(name)), virtual_stages=v, pipeline_layout=layout)


def _stages(job: Job, weighted: int, pp: int, looped: bool) -> int:
    """The number of pipeline stages: ``p`` (one a rank) or ``2 p`` (looped), or
    ``ceil(weighted layers / pipeline_parallel_layers_per_stage)``, a multiple of ``p`` with one stage
    a rank for a single-stage schedule and two or more for a looped one (torchtitan's checks)."""
    per_stage = job.get("parallelism", "pipeline_parallel_layers_per_stage", None, object)
    if per_stage is None:
        return pp * (2 if looped else 1)
    if isinstance(per_stage, bool) or not isinstance(per_stage, int) or per_stage < 1:
        raise InputError(f"[parallelism] pipeline_parallel_layers_per_stage must be a positive integer, got "
                         f"{per_stage!r}", "[parallelism] pipeline_parallel_layers_per_stage")
    stages = -(-weighted // per_stage)
    if stages % pp or (stages // pp != 1 if not looped else stages // pp < 2):
        raise InputError(f"[parallelism] pipeline_parallel_layers_per_stage {per_stage} makes {stages} stages on "
                         f"{pp} ranks: torchtitan needs a multiple of the ranks, one a rank for a single-stage "
                         f"schedule and two or more for a looped one", "[parallelism] pipeline_parallel_layers_per_stage")
    return stages


def recompute(job: Job, layers: int, pp: int, policy: dict, notes: list) -> dict:
    """``[activation_checkpoint]``: none, full, or full recomputation of every ``N``-th layer of a
    stage (selective with a layer frequency), or torchtitan's op-level policy (``op``)."""
    mode = job.get("activation_checkpoint", "mode", "selective", str)
    if mode == "none":
        return dict(recompute="none")
    if mode == "full":
        return dict(recompute="full")
    option = job.get("activation_checkpoint", "selective_ac_option", "2", str)
    if mode != "selective" or not (option == "op" or option.isdigit() and int(option) > 0):
        raise InputError(f"[activation_checkpoint] mode {mode!r}, selective_ac_option {option!r}: the reader reads "
                         f"none, full, and selective with 'op' or a layer frequency", "[activation_checkpoint] mode")
    if option == "op":
        notes.append("selective_ac_option op: torchtitan's op-level policy, counted as recompute op (the outputs "
                     "of every other product, the attention kernel and the router's topk kept; the router's gate "
                     "and the experts' grouped products run again; models.op_recompute)")
        return dict(recompute="op")
    stage = layers // pp
    if any(policy.get(k) is not None for k in ("first_stage_layers", "last_stage_layers", "pipeline_layout")):
        raise InputError("[activation_checkpoint] selective_ac_option: a layer frequency with uneven pipeline "
                         "stages is not modelled", "[activation_checkpoint] selective_ac_option")
    count = stage // int(option)
    notes.append(f"selective_ac_option {option}: torchtitan recomputes every {option}th layer, {count} of a stage; "
                 f"counted as the first {count} (recompute_method block; the layers are identical)")
    return dict(recompute="full", recompute_method="block", recompute_layers=count) if count else \
        dict(recompute="none")
