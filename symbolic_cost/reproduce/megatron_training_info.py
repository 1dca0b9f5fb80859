"""Seed 000: Megatron-LM's ``tools/get_training_info`` report for a 36-layer GPT.

Parameters per module and in total come from our blocks and ``model_cost``
under the ``megatron-training-info`` conventions (Megatron's bytes per
parameter, its QKV bias of ``e`` elements), with the tool's model choices:
padded vocabulary (multiple of 128), learned positions, SwiGLU, no final norm
counted.  Activation and peak memory use the tool's own traced coefficients
(``megatron_info``).  MB and GB are ``2**20`` and ``2**30`` bytes, one decimal,
Python's ``round`` as the tool prints.
"""

from __future__ import annotations

from symbolic_cost import conventions as conv
from symbolic_cost.tools import megatron_info as mi
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.reproduce import Cell

TITLE = "Seed 000: Megatron-LM get_training_info (GPT, 36 layers, hidden 1280, fp16, 2-way DP)"
CONFIG = dict(layers=36, hidden=1280, vocab=50257, seq=1024, micro_batch=4, data=2, accumulation=2,
              gpus_per_node=2)
"""Recovered inputs (shared/reference): GPT-2 vocabulary, micro-batch 4, 2 GPUs on one node,
gradient accumulation 2, fp16, flash attention, SwiGLU, distributed optimizer."""

PREAMBLE = """
Inputs recovered from the printout: L=36, h=1280, s=1024, micro-batch 4, vocabulary 50257
padded to 50304, SwiGLU with f = 3392, fp16, t = p = 1, d = 2, accumulation 2, distributed
optimizer. Heads are not printed and no printed number depends on them.
"""

PRINTED = [  # (section, row, column, as printed)
    ("full model", "word_embeddings", "Param MB", "122.8"),
    ("full model", "position_embeddings", "Param MB", "2.5"),
    ("full model", "Embedding", "Act MB", "15.0"),
    ("full model", "ParallelTransformer", "Act MB/layer", "206.0"),
    ("full model", "input_layernorm", "Param MB", "0.0"),
    ("full model", "input_layernorm", "Act MB", "10.0"),
    ("full model", "self_attention", "Act MB", "60.0"),
    ("full model", "query_key_value", "Param MB", "9.4"),
    ("full model", "rearrange_qkv", "Act MB", "30.0"),
    ("full model", "core_attention_flash", "Act MB", "10.0"),
    ("full model", "rearrange_out", "Act MB", "10.0"),
    ("full model", "dense", "Param MB", "3.1"),
    ("full model", "dense", "Act MB", "10.0"),
    ("full model", "post_attention_layernorm", "Param MB", "0.0"),
    ("full model", "post_attention_layernorm", "Act MB", "10.0"),
    ("full model", "mlp", "Act MB", "116.0"),
    ("full model", "dense_h_to_4h", "Param MB", "16.6"),
    ("full model", "bias_glue", "Act MB", "106.0"),
    ("full model", "dense_4h_to_h", "Param MB", "8.3"),
    ("full model", "dense_4h_to_h", "Act MB", "10.0"),
    ("full model", "drop_add_fusion", "Act MB", "15.0"),
    ("full model", "Amount of Parameters", "count", "771,106,304"),
    ("full model", "Parameters", "GB", "1.4"),
    ("full model", "Gradients", "GB", "1.4"),
    ("full model", "Optimizers(Adam) States", "GB", "11.5"),
    ("full model", "Activations", "GB", "9.0"),
    ("full model", "Total memory demand", "GB", "23.3"),
    ("cluster communication", "Pipeline Parallelism", "frequency", "0"),
    ("cluster communication", "Pipeline Parallelism", "volume GB", "0.0"),
    ("cluster communication", "Data Parallelism", "frequency", "2"),
    ("cluster communication", "Data Parallelism", "volume GB", "2.9"),
    ("cluster communication", "Tensor Parallelism", "frequency", "0"),
    ("cluster communication", "Tensor Parallelism", "volume GB", "0.0"),
    ("cluster communication", "All Communication", "frequency", "2"),
    ("cluster communication", "All Communication", "volume GB", "2.9"),
    ("each GPU", "Amount of Parameters", "count", "771,106,304"),
    ("each GPU", "Parameters", "GB", "1.4"),
    ("each GPU", "Gradients", "GB", "1.4"),
    ("each GPU", "Optimizers(Adam) States", "GB", "5.7"),
    ("each GPU", "Activations", "GB", "7.3"),
    ("each GPU", "Memory Requirement", "GB", "16.6"),
    ("data parallel", "Data Parallel Groups", "count", "1"),
    ("data parallel", "Data Parallel Groups", "members", "[n0_g0 n0_g1]"),
    ("data parallel", "synchronize_gradient (reduce_scatter)", "volume GB", "1.4"),
    ("data parallel", "synchronize_gradient (reduce_scatter)", "frequency", "1"),
    ("data parallel", "synchronize_gradient", "times/iteration", "2"),
    ("data parallel", "gather_model_param (all_gather)", "volume GB", "1.4"),
    ("data parallel", "gather_model_param (all_gather)", "frequency", "1"),
    ("data parallel", "All Communication", "frequency", "2"),
    ("data parallel", "All Communication", "volume GB", "2.9"),
]


def _mb(nbytes) -> str:
    return str(round(float(nbytes) / 2**20, 1))


def _gb(nbytes) -> str:
    return str(round(float(nbytes) / 2**30, 1))


def ours() -> dict:
    """Every printed quantity, computed: ``{(section, row, column): text}``."""
    c = CONFIG
    arch = Architecture("gpt-seed000", c["layers"], c["hidden"], 20, mi.swiglu_ffn(c["hidden"]), c["vocab"],
                        positions=c["seq"], mlp="swiglu", final_norm=False, vocab_multiple=128)
    training = Training(b=c["micro_batch"], l=c["seq"], d=c["data"], micro_batches=c["accumulation"],
                        precision="fp16", distributed_optimizer=True, flash=True)
    cost = model_cost(arch, training, conv.get("megatron-training-info"))
    s, b, h, f, v = c["seq"], c["micro_batch"], c["hidden"], arch.f, arch.padded_vocab()
    act = lambda module: 2 * mi.module_elements(module, s, b, h, f)  # noqa: E731  (2-byte elements)
    layer, emb = cost.layer, cost.embedding
    out = {("full model", "word_embeddings", "Param MB"): _mb(emb["word_embeddings"].weights),
           ("full model", "position_embeddings", "Param MB"): _mb(emb["position_embeddings"].weights),
           ("full model", "ParallelTransformer", "Act MB/layer"): _mb(act("layer"))}
    for row, ours_row in (("input_layernorm", "layer_norm_1"), ("query_key_value", "qkv_proj"),
                          ("dense", "v_proj"), ("post_attention_layernorm", "layer_norm_2"),
                          ("dense_h_to_4h", "fc1"), ("dense_4h_to_h", "fc2")):
        out["full model", row, "Param MB"] = _mb(layer[ours_row].weights)
    for module in mi.TRACED:
        out["full model", module, "Act MB"] = _mb(act(module))
    P, w, g, o = cost.parameters, 2, 2, 16               # fp16 under Megatron: 2 + 2 + 16 bytes
    full_acts = 2 * mi.activations(s, b, h, f, v, c["layers"])
    for section, count, sizes in (("full model", P, (P * w, P * g, P * o, full_acts)),
                                  ("each GPU", cost.parameters_per_device,
                                   (cost.weight_bytes, cost.gradient_bytes, cost.optimizer_bytes,
                                    2 * mi.activations_per_gpu(s, b, h, f, c["layers"], 1, 1)))):
        out[section, "Amount of Parameters", "count"] = f"{int(count):,}"
        for name, value in zip(("Parameters", "Gradients", "Optimizers(Adam) States", "Activations"), sizes):
            out[section, name, "GB"] = _gb(value)
    out["full model", "Total memory demand", "GB"] = _gb(P * (w + g + o) + full_acts)
    peak = mi.peak_elements(cost.parameters_per_device, mi.activations_per_gpu(s, b, h, f, c["layers"], 1, 1),
                            s, b, v, 1, c["data"], "fp16")
    out["each GPU", "Memory Requirement", "GB"] = _gb(2 * peak)
    by_dim = {dim: [col for d_, col in cost.collectives if d_ == dim] for dim in ("pipeline", "data", "tensor")}
    names = {"pipeline": "Pipeline Parallelism", "data": "Data Parallelism", "tensor": "Tensor Parallelism"}
    for dim, cols in by_dim.items():
        out["cluster communication", names[dim], "frequency"] = str(sum(int(x.repeats) for x in cols))
        out["cluster communication", names[dim], "volume GB"] = _gb(sum(x.volume for x in cols))
    every = [x for cols in by_dim.values() for x in cols]
    for section in ("cluster communication", "data parallel"):
        out[section, "All Communication", "frequency"] = str(sum(int(x.repeats) for x in every))
        out[section, "All Communication", "volume GB"] = _gb(sum(x.volume for x in every))
    groups = mi.data_parallel_groups(1, 1, c["data"], c["gpus_per_node"])
    out["data parallel", "Data Parallel Groups", "count"] = str(len(groups))
    out["data parallel", "Data Parallel Groups", "members"] = "[" + " ".join(groups[0]) + "]"
    (rs,) = [x for x in by_dim["data"] if x.kind == "reducescatter"]
    (ag,) = [x for x in by_dim["data"] if x.kind == "allgather"]
    for row, col in (("synchronize_gradient (reduce_scatter)", rs), ("gather_model_param (all_gather)", ag)):
        out["data parallel", row, "volume GB"] = _gb(col.volume)
        out["data parallel", row, "frequency"] = str(int(col.repeats))
    out["data parallel", "synchronize_gradient", "times/iteration"] = str(training.micro_batches)
    return out


def compare() -> list[Cell]:
    found = ours()
    return [Cell(section, row, column, printed, found.get((section, row, column), "(missing)"),
                 found.get((section, row, column)) == printed)
            for section, row, column, printed in PRINTED]
