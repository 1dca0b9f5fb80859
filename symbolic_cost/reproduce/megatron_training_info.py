"""Seed 000: Megatron-LM's ``tools/get_training_info`` report for a 36-layer GPT.

Parameters per module and in total, bytes per parameter (the precision rule
``models.bytes_per_parameter``), bytes per activation element
(``models.element_bytes``) and the data-parallel collectives come from our
blocks and ``model_cost`` under the ``megatron-training-info`` conventions
(Megatron's bytes per parameter, its QKV bias of ``e`` elements, whole-tensor
volumes), with the tool's model choices: padded vocabulary (multiple of 128),
learned positions, SwiGLU, no final norm counted.  Activation and peak memory
use the tool's own traced coefficients and peak rule (``megatron_info``).  MB
and GB are ``2**20`` and ``2**30`` bytes, one decimal, Python's ``round`` as
the tool prints.  A quantity that cannot be computed under other conventions
(a module row or collective that is not there) is reported as ``(missing)``.
"""

from __future__ import annotations

from symbolic_cost.models import Architecture, ModelCost, Training, bytes_per_parameter, element_bytes, model_cost
from symbolic_cost.reproduce import Cell
from symbolic_cost.reproduce.megatron_training_info_printed import PRINTED
from symbolic_cost.tools import megatron_info as mi

TITLE = "Seed 000: Megatron-LM get_training_info (GPT, 36 layers, hidden 1280, fp16, 2-way DP)"
CONVENTIONS = mi.PRESET
CONFIG = dict(layers=36, hidden=1280, heads=20, vocab=50257, seq=1024, micro_batch=4, data=2, accumulation=2,
              gpus_per_node=2, precision="fp16")
"""Recovered inputs (shared/reference): GPT-2 vocabulary, micro-batch 4, 2 GPUs on one node,
gradient accumulation 2, fp16, flash attention, SwiGLU, distributed optimizer.  The heads are
not printed and no printed number depends on them."""

PREAMBLE = f"""
Inputs recovered from the printout: L=36, h=1280, s=1024, micro-batch 4, vocabulary 50257
padded to 50304, SwiGLU with f = 3392, fp16, t = p = 1, d = 2, accumulation 2, distributed
optimizer. Heads are not printed and no printed number depends on them. Bytes per parameter
(weights, gradients, optimizer) come from the precision rule:
`bytes_per_parameter("{CONFIG['precision']}", "megatron-training-info")` =
{", ".join(map(str, bytes_per_parameter(CONFIG["precision"], CONVENTIONS)))}.
"""

_LAYER_ROWS = (("input_layernorm", "layer_norm_1"), ("query_key_value", "qkv_proj"), ("dense", "v_proj"),
               ("post_attention_layernorm", "layer_norm_2"), ("dense_h_to_4h", "fc1"), ("dense_4h_to_h", "fc2"))
"""The tool's module -> our row of the transformer layer."""
_DIMENSIONS = {"pipeline": "Pipeline Parallelism", "data": "Data Parallelism", "tensor": "Tensor Parallelism"}
_DATA_PARALLEL = {"reducescatter": "synchronize_gradient (reduce_scatter)",
                  "allgather": "gather_model_param (all_gather)"}


def _mb(nbytes) -> str:
    return str(round(float(nbytes) / 2**20, 1))


def _gb(nbytes) -> str:
    return str(round(float(nbytes) / 2**30, 1))


def setup() -> tuple[Architecture, Training]:
    """The seed's model and training setup."""
    c = CONFIG
    arch = Architecture("gpt-seed000", c["layers"], c["hidden"], c["heads"], mi.swiglu_ffn(c["hidden"]),
                        c["vocab"], positions=c["seq"], mlp="swiglu", final_norm=False, vocab_multiple=128)
    training = Training(b=c["micro_batch"], l=c["seq"], d=c["data"], micro_batches=c["accumulation"],
                        precision=c["precision"], distributed_optimizer=True, flash=True)
    return arch, training


def _modules(cost: ModelCost) -> dict:
    """Parameter MB of the printed modules (our rows) and activation MB (traced)."""
    t, arch = cost.training, cost.architecture
    es = element_bytes(t.precision)
    act = lambda module: es * mi.module_elements(module, t.l, t.b, arch.e, arch.f)  # noqa: E731
    out = {("full model", "ParallelTransformer", "Act MB/layer"): _mb(act("layer"))}
    for block, rows in ((cost.embedding, (("word_embeddings",) * 2, ("position_embeddings",) * 2)),
                        (cost.layer, _LAYER_ROWS)):
        for module, row in rows:
            if row in block.names:
                out["full model", module, "Param MB"] = _mb(block[row].weights)
    for module in mi.TRACED:
        out["full model", module, "Act MB"] = _mb(act(module))
    return out


def _memory(cost: ModelCost, conventions) -> dict:
    """Parameters, gradients, optimizer states and activations of the whole model on one
    device and per GPU, and the tool's total and peak."""
    t, arch = cost.training, cost.architecture
    s, b, h, f, v, layers = t.l, t.b, arch.e, arch.f, arch.padded_vocab(), arch.n_layers
    es = element_bytes(t.precision)
    w, g, o = bytes_per_parameter(t.precision, conventions)
    P = cost.parameters
    gpu_elements = mi.activations_per_gpu(s, b, h, f, layers, t.m1, t.p)
    full = (P * w, P * g, P * o, es * mi.activations(s, b, h, f, v, layers))
    gpu = (cost.weight_bytes, cost.gradient_bytes, cost.optimizer_bytes, es * gpu_elements)
    out = {}
    for section, count, sizes in (("full model", P, full), ("each GPU", cost.parameters_per_device, gpu)):
        out[section, "Amount of Parameters", "count"] = f"{int(count):,}"
        for name, value in zip(("Parameters", "Gradients", "Optimizers(Adam) States", "Activations"), sizes):
            out[section, name, "GB"] = _gb(value)
    out["full model", "Total memory demand", "GB"] = _gb(sum(full))
    peak = mi.peak_bytes(cost.parameters_per_device, gpu_elements, s, b, v, t.m1, t.d, t.precision)
    out["each GPU", "Memory Requirement", "GB"] = _gb(peak)
    return out


def _communication(cost: ModelCost) -> dict:
    """Counts and volumes of the collectives of one iteration, by dimension and for the
    data-parallel group, and the data-parallel groups."""
    t = cost.training
    by_dim = {dim: [x for d_, x in cost.collectives if d_ == dim] for dim in _DIMENSIONS}
    out = {}
    for dim, found in by_dim.items():
        out["cluster communication", _DIMENSIONS[dim], "frequency"] = str(sum(int(x.repeats) for x in found))
        out["cluster communication", _DIMENSIONS[dim], "volume GB"] = _gb(sum(x.volume for x in found))
    every = [x for found in by_dim.values() for x in found]
    for section in ("cluster communication", "data parallel"):
        out[section, "All Communication", "frequency"] = str(sum(int(x.repeats) for x in every))
        out[section, "All Communication", "volume GB"] = _gb(sum(x.volume for x in every))
    groups = mi.data_parallel_groups(int(t.m1), int(t.p), int(t.d), CONFIG["gpus_per_node"])
    out["data parallel", "Data Parallel Groups", "count"] = str(len(groups))
    out["data parallel", "Data Parallel Groups", "members"] = "[" + " ".join(groups[0]) + "]"
    for kind, row in _DATA_PARALLEL.items():
        found = [x for x in by_dim["data"] if x.kind == kind]
        if len(found) == 1:
            out["data parallel", row, "volume GB"] = _gb(found[0].volume)
            out["data parallel", row, "frequency"] = str(int(found[0].repeats))
    out["data parallel", "synchronize_gradient", "times/iteration"] = str(t.micro_batches)
    return out


def ours(conventions=CONVENTIONS) -> dict:
    """Every printed quantity, computed under ``conventions``: ``{(section, row, column): text}``."""
    arch, training = setup()
    cost = model_cost(arch, training, conventions)
    return {**_modules(cost), **_memory(cost, conventions), **_communication(cost)}


def compare(conventions=CONVENTIONS) -> list[Cell]:
    """Every printed number of seed 000 against ours (50 cells), under ``conventions``."""
    found = ours(conventions)
    return [Cell(section, row, column, printed, found.get((section, row, column), "(missing)"),
                 found.get((section, row, column)) == printed)
            for section, row, column, printed in PRINTED]
