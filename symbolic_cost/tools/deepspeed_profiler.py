"""Models as trees of modules, with parameters, MACs and FLOPs per module (DeepSpeed's
flops-profiler view), aggregated per depth.

A ``Module`` holds its own parameters, MACs and FLOPs (what it computes that
no child does, e.g. the ``QK^T`` of a self-attention module) and its
children; totals add up the subtree.  Every tree is a view of the blocks
(``models.model_blocks`` with 1-byte elements, so a row's ``weights`` are its
parameters): a module takes its parameters and MACs from the row it stands
for, never from a count of its own.  ``macs`` of a row is the
multiply-accumulates of its forward products, half their ``2mnk`` FLOPs.

``model_tree`` draws any ``model_cost`` result with our counts.  The
``hf_bert`` and ``megatron_gpt2`` trees follow the module layouts and
counting rules of DeepSpeed's profiler (seed 004), whose rules are:

* ``Linear``: MACs of its product, FLOPs twice that (bias not counted);
* functional ``matmul`` (``QK^T``, ``AV``): MACs of the product;
* functional ``softmax``: ``numel`` FLOPs; a fused softmax *module* (Megatron's
  ``FusedScaleMaskSoftmax``) books ``numel`` as MACs;
* ``layer_norm``: ``5 numel`` FLOPs (affine); embeddings, dropout: nothing;
* HF's ``GELUActivation`` and ``Tanh`` modules: nothing (they call functions
  DeepSpeed did not patch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from sympy import Expr, Integer, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.cost import Cost
from symbolic_cost.models import Training, element_bytes, model_blocks
from symbolic_cost.models.stack import layer_kinds
from symbolic_cost.ops.matmul import product_flops
from symbolic_cost.checks import InputError

PRESET = conv.PRESETS["deepspeed-profiler"]
"""The profiler counts a multiply-add as one MAC and reports 2 FLOPs per MAC: ``2mnk``."""


@dataclass
class Module:
    """One module: its own parameters, MACs and FLOPs, and its children."""

    name: str
    kind: str
    params: Expr = Integer(0)
    macs: Expr = Integer(0)
    flops: Expr = Integer(0)
    children: list = field(default_factory=list)

    def total(self, what: str) -> Expr:
        return sympify(getattr(self, what)) + sum((c.total(what) for c in self.children), Integer(0))

    def walk(self, depth: int = 0):
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)


def macs(row: Cost, conventions=PRESET) -> Expr:
    """Multiply-accumulates of a row's forward products: ``count x m x k x n`` each, half
    their ``2mnk`` FLOPs (``product_flops`` under ``conventions``, the tool's ``PRESET``
    unless another is given); bias adds and pointwise work are none."""
    return product_flops(row.gemms, "fwd", conventions) / 2


def numel(row: Cost) -> Expr:
    """Elements of a row's output (the rows of a 1-byte view: ``act_out`` counts elements)."""
    return row.act_out


def view_blocks(arch, b, l, conventions=PRESET):
    """The embedding, one layer and the head of ``arch`` at ``b x l`` tokens on one
    device, under ``conventions`` (``PRESET``) with 1-byte elements: ``weights`` are parameters."""
    return model_blocks(arch, Training(b=b, l=l), 1, 1, 1, conventions)


def _linear(name, row: Cost, kind="Linear", share=1, conventions=PRESET) -> Module:
    """A linear module standing for ``share`` of block row ``row``: its parameters and
    MACs, FLOPs twice the MACs."""
    count = macs(row, conventions) * share
    return Module(name, kind, params=row.weights * share, macs=count, flops=2 * count)


def _norm(name, row: Cost, kind="LayerNorm", flops=True) -> Module:
    """A layer-norm module standing for ``row``: its parameters, ``5 numel`` FLOPs (or none)."""
    return Module(name, kind, params=row.weights, flops=5 * numel(row) if flops else 0)


def _embedding(name, row: Cost, kind="Embedding") -> Module:
    return Module(name, kind, params=row.weights)


def leaf(name, kind, params=0) -> Module:
    return Module(name, kind, params=params)


def aggregate(root: Module, depth: int, what: str) -> list[tuple[str, Expr]]:
    """Modules at ``depth`` grouped by kind and summed, largest first (DeepSpeed's view)."""
    sums: dict[str, Expr] = {}
    for d, module in root.walk():
        if d == depth:
            sums[module.kind] = sums.get(module.kind, Integer(0)) + module.total(what)
    return sorted(sums.items(), key=lambda kv: -float(kv[1]))


def hf_bert(arch, b, l, conventions=PRESET) -> Module:
    """Hugging Face ``BertModel`` as DeepSpeed's profiler sees it: query, key and value
    are a third each of the block's ``qkv_proj``; the self-attention module's own MACs
    are ``logits`` and ``attend``, its FLOPs twice those plus the softmax's ``numel``."""
    if arch.kv != arch.h:
        raise InputError(f"hf_bert: kv_heads must equal h (BERT has one key and value head per query head), "
                         f"got kv_heads {arch.kv_heads} with h {arch.h}", "kv_heads")
    start, block, end = view_blocks(arch, b, l, conventions)
    linear = partial(_linear, conventions=conventions)

    def layer(i):
        own = macs(block["logits"], conventions) + macs(block["attend"], conventions)
        self_attn = Module("self", "BertSelfAttention", macs=own, flops=2 * own + numel(block["softmax"]),
                           children=[linear(n, block["qkv_proj"], share=Integer(1) / 3)
                                     for n in ("query", "key", "value")] + [leaf("dropout", "Dropout")])

        def out(name, kind, dense, norm):
            return Module(name, kind, children=[linear("dense", block[dense]), _norm("LayerNorm", block[norm]),
                                                leaf("dropout", "Dropout")])
        return Module(str(i), "BertLayer", children=[
            Module("attention", "BertAttention",
                   children=[self_attn, out("output", "BertSelfOutput", "v_proj", "layer_norm_1")]),
            Module("intermediate", "BertIntermediate",
                   children=[linear("dense", block["fc1"]), leaf("intermediate_act_fn", "GELUActivation")]),
            out("output", "BertOutput", "fc2", "layer_norm_2")])

    embeddings = Module("embeddings", "BertEmbeddings", children=[
        *(_embedding(name, start[name]) for name in ("word_embeddings", "position_embeddings",
                                                      "token_type_embeddings")),
        _norm("LayerNorm", start["embedding_layer_norm"]), leaf("dropout", "Dropout")])
    encoder = Module("encoder", "BertEncoder", children=[
        Module("layer", "ModuleList", children=[layer(i) for i in range(arch.n_layers)])])
    pooler = Module("pooler", "BertPooler", children=[linear("dense", end["pooler_dense"]),
                                                      leaf("activation", "Tanh")])
    return Module("", "BertModel", children=[embeddings, encoder, pooler])


def megatron_gpt2(arch, b, l, conventions=PRESET) -> Module:
    """The Megatron-LM GPT-2 of DeepSpeed's example, each layer split in two modules
    (``ParallelTransformerLayerPart1``: norm and attention; ``Part2``: norm and MLP).
    Attention's batched matmuls are not counted (that profiler did not patch them); the
    fused softmax books ``numel`` MACs; the LM head is a functional product of the model."""
    start, block, end = view_blocks(arch, b, l, conventions)
    linear = partial(_linear, conventions=conventions)

    def part1(i):
        scores = numel(block["softmax"])
        softmax = Module("scale_mask_softmax", "FusedScaleMaskSoftmax", macs=scores, flops=2 * scores)
        return Module(str(2 * i), "ParallelTransformerLayerPart1", children=[
            _norm("input_layernorm", block["layer_norm_1"], kind="FusedLayerNorm", flops=False),
            Module("attention", "ParallelSelfAttention", children=[
                linear("query_key_value", block["qkv_proj"], kind="ColumnParallelLinear"), softmax,
                leaf("attention_dropout", "Dropout"), linear("dense", block["v_proj"], kind="RowParallelLinear")])])

    def part2(i):
        return Module(str(2 * i + 1), "ParallelTransformerLayerPart2", children=[
            _norm("post_attention_layernorm", block["layer_norm_2"], kind="FusedLayerNorm", flops=False),
            Module("mlp", "ParallelMLP", children=[
                linear("dense_h_to_4h", block["fc1"], kind="ColumnParallelLinear"),
                linear("dense_4h_to_h", block["fc2"], kind="RowParallelLinear")])])

    layers = [m for i in range(arch.n_layers) for m in (part1(i), part2(i))]
    transformer = Module("transformer", "ParallelTransformer", children=[
        Module("layers", "ModuleList", children=layers),
        _norm("final_layernorm", end["final_layer_norm"], kind="FusedLayerNorm", flops=False)])
    embedding = Module("embedding", "Embedding", children=[
        _embedding("word_embeddings", start["word_embeddings"], "VocabParallelEmbedding"),
        _embedding("position_embeddings", start["position_embeddings"]), leaf("embedding_dropout", "Dropout")])
    head = macs(end["lm_head"], conventions)
    return Module("", "GPT2Model", macs=head, flops=2 * head, children=[
        Module("language_model", "TransformerLanguageModel", children=[embedding, transformer])])


def model_tree(cost) -> Module:
    """Any ``model_cost`` result as a tree: embedding, the layers of every layer group (sliding
    window and full, dense and mixture of experts, T5's encoder, its ends and decoder; in the
    model's order where it records which layer is which, ``models.stack.layer_kinds``, else
    group by group), the head; each row a
    module with its parameters (``weights`` over the element bytes) and forward FLOPs,
    and, when it is a matrix row, half its FLOPs as MACs (the ``profile`` command's view:
    unlike ``macs``, it keeps the bias adds and a fused attention kernel's pointwise work)."""
    es = element_bytes(cost.training.precision)

    def rows(blk):
        return [Module(r.name, r.name, params=r.weights / es,
                       macs=r.flops_fwd / 2 if r.engine == "matrix" else 0, flops=r.flops_fwd) for r in blk]
    groups = [(blk, int(count)) for blk, count in cost.stack[1:-1]]    # every layer group, in model order
    kinds = layer_kinds(cost.architecture)
    if kinds is not None and len(set(kinds)) == len(groups):      # the layers in the model's own order
        order = [groups[k][0] for k in kinds]
    else:                                                         # group by group
        order = [blk for blk, count in groups for _ in range(count)]
    layers = [Module(str(i), blk.name, children=rows(blk)) for i, blk in enumerate(order)]
    return Module("", cost.architecture.name, children=[
        Module("embedding", "embedding", children=rows(cost.embedding)),
        Module("layers", "ModuleList", children=layers),
        Module("head", "head", children=rows(cost.head))])


# ---------------------------------------------------------------- DeepSpeed's number formats

def _scaled(n, units, unit_one: str) -> str:
    """DeepSpeed's number format: ``n`` in the largest of ``units`` (``(power of ten,
    suffix)``, largest first) that fits, rounded to 2 decimals; else the integer."""
    n = float(n)
    for power, unit in units:
        if n // 10**power > 0:
            return f"{round(n / 10**power, 2)} {unit}"
    return f"{int(n)}{unit_one}"


def params_text(n) -> str:
    return _scaled(n, ((6, "M"), (3, "k")), "")


def macs_text(n) -> str:
    return _scaled(n, ((9, "GMACs"), (6, "MMACs"), (3, "KMACs")), " MACs")


def flops_text(n) -> str:
    return _scaled(n, ((9, "G"), (6, "M"), (3, "K")), "")


def _runs(children: list) -> list[list]:
    """Consecutive children that are the same module (kind, and their rows' names, parameters
    and MACs): a run of three or more prints once, then ``(first..last): as above``."""
    def same(c):
        return c.kind, tuple((g.name, g.params, g.macs) for g in c.children), c.params, c.macs
    runs = []
    for child in children:
        if runs and same(runs[-1][0]) == same(child):
            runs[-1].append(child)
        else:
            runs.append([child])
    return runs


def render(root: Module, max_depth: int = -1, top: int = 3) -> str:
    """The tree with parameters, MACs and their shares, then the top modules per depth."""
    params, macs = float(root.total("params")), float(root.total("macs"))
    lines = []

    def show(m, depth):
        if max_depth >= 0 and depth > max_depth:
            return
        p, k = float(m.total("params")), float(m.total("macs"))
        lines.append(f"{'  ' * depth}{m.name or m.kind} ({m.kind}): {params_text(p)}, "
                     f"{p / params if params else 0:.2%} params, {macs_text(k)}, {k / macs if macs else 0:.2%} MACs")
        for run in _runs(m.children):
            for child in (run[:1] if len(run) > 2 else run):
                show(child, depth + 1)
            if len(run) > 2:
                lines.append(f"{'  ' * (depth + 1)}({run[1].name}..{run[-1].name}): {run[0].kind} as above")
    show(root, 0)
    depths = max(d for d, _ in root.walk())
    if max_depth >= 0:          # DeepSpeed's aggregated profile stops at module_depth, as the tree does
        depths = min(depths, max_depth)
    lines.append("")
    for depth in range(depths + 1):
        best = lambda what, fmt: ", ".join(f"{k}: {fmt(v)}" for k, v in aggregate(root, depth, what)[:top])  # noqa: E731
        lines.append(f"depth {depth}: params {{{best('params', params_text)}}}; MACs {{{best('macs', macs_text)}}}")
    return "\n".join(lines)
