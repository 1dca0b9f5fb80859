"""Models as trees of modules, with parameters, MACs and FLOPs per module (DeepSpeed's
flops-profiler view), aggregated per depth.

A ``Module`` holds its own parameters, MACs and FLOPs (what it computes that
no child does, e.g. the ``QK^T`` of a self-attention module) and its
children; totals add up the subtree.  MACs of a product are half its
``2mnk`` FLOPs, taken from the primitives.

``model_tree`` draws any ``model_cost`` result with our counts.  The
``hf_bert`` and ``megatron_gpt2`` trees follow the module layouts and
counting rules of DeepSpeed's profiler (seed 004), whose rules are:

* ``Linear``: MACs ``tokens x in x out``, FLOPs twice that (bias not counted);
* functional ``matmul`` (``QK^T``, ``AV``): MACs of the product;
* functional ``softmax``: ``numel`` FLOPs; a fused softmax *module* (Megatron's
  ``FusedScaleMaskSoftmax``) books ``numel`` as MACs;
* ``layer_norm``: ``5 numel`` FLOPs (affine); embeddings, dropout: nothing;
* HF's ``GELUActivation`` and ``Tanh`` modules: nothing (they call functions
  DeepSpeed did not patch).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sympy import Expr, Integer, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.ops import linear, logits, attend

PRESET = conv.register("deepspeed-profiler", conv.DEFAULT.but(matmul_flops="2mnk"))
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


def linear_macs(tokens, n_in, n_out) -> Expr:
    return linear(1, tokens, n_in, n_out, bias=False, conventions=PRESET).flops_fwd / 2


def Linear(name, tokens, n_in, n_out, bias=True, kind="Linear") -> Module:
    macs = linear_macs(tokens, n_in, n_out)
    return Module(name, kind, params=n_in * n_out + (n_out if bias else 0), macs=macs, flops=2 * macs)


def LayerNorm(name, numel, width, kind="LayerNorm", flops=True) -> Module:
    return Module(name, kind, params=2 * width, flops=5 * numel if flops else 0)


def leaf(name, kind, params=0) -> Module:
    return Module(name, kind, params=params)


def aggregate(root: Module, depth: int, what: str) -> list[tuple[str, Expr]]:
    """Modules at ``depth`` grouped by kind and summed, largest first (DeepSpeed's view)."""
    sums: dict[str, Expr] = {}
    for d, module in root.walk():
        if d == depth:
            sums[module.kind] = sums.get(module.kind, Integer(0)) + module.total(what)
    return sorted(sums.items(), key=lambda kv: -float(kv[1]))


def hf_bert(arch, b, l) -> Module:
    """Hugging Face ``BertModel`` as DeepSpeed's profiler sees it."""
    e, f, h, tokens = arch.e, arch.f, arch.h, b * l
    q, numel = e // h, tokens * e

    def layer(i):
        scores = b * h * l * l
        self_attn = Module("self", "BertSelfAttention",
                           macs=(logits(b, l, q, h, conventions=PRESET).flops_fwd
                                 + attend(b, l, q, h, conventions=PRESET).flops_fwd) / 2,
                           flops=0, children=[Linear(n, tokens, e, e) for n in ("query", "key", "value")]
                           + [leaf("dropout", "Dropout")])
        self_attn.flops = 2 * self_attn.macs + scores                     # matmuls and softmax
        def out(name, kind, n_in):
            return Module(name, kind, children=[Linear("dense", tokens, n_in, e), LayerNorm("LayerNorm", numel, e),
                                                leaf("dropout", "Dropout")])
        return Module(str(i), "BertLayer", children=[
            Module("attention", "BertAttention", children=[self_attn, out("output", "BertSelfOutput", e)]),
            Module("intermediate", "BertIntermediate",
                   children=[Linear("dense", tokens, e, f), leaf("intermediate_act_fn", "GELUActivation")]),
            out("output", "BertOutput", f)])

    embeddings = Module("embeddings", "BertEmbeddings", children=[
        leaf("word_embeddings", "Embedding", arch.vocab * e),
        leaf("position_embeddings", "Embedding", arch.positions * e),
        leaf("token_type_embeddings", "Embedding", arch.token_types * e),
        LayerNorm("LayerNorm", numel, e), leaf("dropout", "Dropout")])
    encoder = Module("encoder", "BertEncoder", children=[
        Module("layer", "ModuleList", children=[layer(i) for i in range(arch.n_layers)])])
    pooler = Module("pooler", "BertPooler", children=[Linear("dense", b, e, e), leaf("activation", "Tanh")])
    return Module("", "BertModel", children=[embeddings, encoder, pooler])


def megatron_gpt2(arch, b, l) -> Module:
    """The Megatron-LM GPT-2 of DeepSpeed's example, each layer split in two modules
    (``ParallelTransformerLayerPart1``: norm and attention; ``Part2``: norm and MLP).
    Attention's batched matmuls are not counted (that profiler did not patch them); the
    fused softmax books ``numel`` MACs; the LM head is a functional product of the model."""
    e, f, h, tokens = arch.e, arch.f, arch.h, b * l
    vocab = arch.padded_vocab()

    def part1(i):
        scores = b * h * l * l
        softmax = Module("scale_mask_softmax", "FusedScaleMaskSoftmax", macs=scores, flops=2 * scores)
        return Module(str(2 * i), "ParallelTransformerLayerPart1", children=[
            LayerNorm("input_layernorm", tokens * e, e, kind="FusedLayerNorm", flops=False),
            Module("attention", "ParallelSelfAttention", children=[
                Linear("query_key_value", tokens, e, 3 * e, kind="ColumnParallelLinear"), softmax,
                leaf("attention_dropout", "Dropout"), Linear("dense", tokens, e, e, kind="RowParallelLinear")])])

    def part2(i):
        return Module(str(2 * i + 1), "ParallelTransformerLayerPart2", children=[
            LayerNorm("post_attention_layernorm", tokens * e, e, kind="FusedLayerNorm", flops=False),
            Module("mlp", "ParallelMLP", children=[
                Linear("dense_h_to_4h", tokens, e, f, kind="ColumnParallelLinear"),
                Linear("dense_4h_to_h", tokens, f, e, kind="RowParallelLinear")])])

    layers = [m for i in range(arch.n_layers) for m in (part1(i), part2(i))]
    transformer = Module("transformer", "ParallelTransformer", children=[
        Module("layers", "ModuleList", children=layers),
        LayerNorm("final_layernorm", tokens * e, e, kind="FusedLayerNorm", flops=False)])
    embedding = Module("embedding", "Embedding", children=[
        leaf("word_embeddings", "VocabParallelEmbedding", vocab * e),
        leaf("position_embeddings", "Embedding", arch.positions * e), leaf("embedding_dropout", "Dropout")])
    head = linear_macs(tokens, e, vocab)
    return Module("", "GPT2Model", macs=head, flops=2 * head, children=[
        Module("language_model", "TransformerLanguageModel", children=[embedding, transformer])])


def model_tree(cost) -> Module:
    """Any ``model_cost`` result as a tree: embedding, the layers, the head; each row a
    module whose MACs are half its FLOPs when it is a matrix product."""
    from symbolic_cost.models import element_bytes
    es = element_bytes(cost.training.precision)

    def rows(blk):
        return [Module(r.name, r.name, params=r.weights / es,
                       macs=r.flops_fwd / 2 if r.engine == "matrix" else 0, flops=r.flops_fwd) for r in blk]
    depth = int(cost.architecture.n_layers)
    return Module("", cost.architecture.name, children=[
        Module("embedding", "embedding", children=rows(cost.embedding)),
        Module("layers", "ModuleList", children=[Module(str(i), "layer", children=rows(cost.layer))
                                                 for i in range(depth)]),
        Module("head", "head", children=rows(cost.head))])


# ---------------------------------------------------------------- DeepSpeed's number formats

def params_text(n) -> str:
    n = float(n)
    if n // 10**6 > 0:
        return f"{round(n / 10**6, 2)} M"
    if n // 10**3 > 0:
        return f"{round(n / 10**3, 2)} k"
    return str(int(n))


def macs_text(n) -> str:
    n = float(n)
    for power, unit in ((9, "GMACs"), (6, "MMACs"), (3, "KMACs")):
        if n // 10**power > 0:
            return f"{round(n / 10**power, 2)} {unit}"
    return f"{int(n)} MACs"


def flops_text(n) -> str:
    n = float(n)
    for power, unit in ((9, "G"), (6, "M"), (3, "K")):
        if n // 10**power > 0:
            return f"{round(n / 10**power, 2)} {unit}"
    return str(int(n))


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
        repeated = len(m.children) > 2 and len({c.kind for c in m.children}) == 1
        for child in (m.children[:1] if repeated else m.children):
            show(child, depth + 1)
        if repeated:
            lines.append(f"{'  ' * (depth + 1)}({m.children[1].name}..{m.children[-1].name}): "
                         f"{m.children[0].kind} as above")
    show(root, 0)
    depths = max(d for d, _ in root.walk())
    lines.append("")
    for depth in range(depths + 1):
        best = lambda what, fmt: ", ".join(f"{k}: {fmt(v)}" for k, v in aggregate(root, depth, what)[:top])  # noqa: E731
        lines.append(f"depth {depth}: params {{{best('params', params_text)}}}; MACs {{{best('macs', macs_text)}}}")
    return "\n".join(lines)
