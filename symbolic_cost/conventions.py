"""How to count: one ``Conventions`` value with named presets.

Sources disagree on how to count the same operation.  Each disagreement is a
field here with a documented default (the physically right choice); each tool
we reproduce is a preset.  Layers and blocks read these fields; they never
test which preset is active.

=============================== ============== ===========================================
field                           default        alternatives
=============================== ============== ===========================================
``matmul_flops``                ``"exact"``    ``"2mnk"``: a (m,k)x(k,n) product costs
                                               ``2mnk`` instead of ``mn(2k-1)``
``sequence_shard``              ``"s1"``       ``"m1"``: shard ``l`` by the tensor degree
                                               (``s1`` is ignored and tied to ``m1``)
``collective_volume``           ``"ring"``     ``"tensor"``: report the whole tensor
``reduction_flops``             ``True``       ``False``: reduce-scatters and allreduces
                                               add no FLOPs
``norm_placement``              ``"pre"``      ``"attention"``: the attention block also
                                               holds the MLP's norm; the MLP has none
``comm_time``                   ``"alpha-beta"`` ``"hierarchical"``: two-level across NVLink
                                               domains; ``"bandwidth"``: ``volume /
                                               bandwidth``, kind and group ignored
``overlap_comm``                ``False``      ``True``: time is ``max(compute, comm)``
``causal_flops``                ``"full"``     ``"exact"``: causal attention counts only the
                                               ``l(l+1)/2`` key <= query scores
``window_count``                ``"windowed"`` ``"dense"``: sliding-window attention computes
                                               and stores every score, then masks (eager
                                               attention) instead of ``min(w, l)`` per query
``mixed_precision``             ``"zero"``     ``"megatron"``: bytes per parameter of
                                               Megatron's optimizer (see ``model``)
``qkv_bias_elements``           ``"3e"``       ``"e"``: the fused QKV bias stored as ``e``
                                               elements (Megatron training-info quirk)
``pointwise_grad_both``         ``True``       ``False``: GELU and dropout backward touch
                                               only one ``(b,l,x)`` gradient
``attend_grad_both_operands``   ``True``       ``False``: ``AV`` backward counts ``dV`` but
                                               not the incoming ``dY``
``layer_norm_keeps_stats``      ``True``       ``False``: mean and 1/std are not stored
``layer_norm_bwd_reads_weights`` ``True``      ``False``: backward traffic omits gamma, beta
``kernel_time``                 ``"roofline"`` ``"tiled"``: each kernel's time from tiled GEMM
                                               traffic, memory latency and launch overhead
                                               (DeepFlow; see ``kernels``)
``mlp_activation_dropout``      ``False``      ``True``: a dropout follows the MLP activation
                                               (the LBNL 2024 layout; GPT-2, BERT, Llama and
                                               Megatron-LM have none)
``sequence_parallel_inputs``    ``"shard"``    under sequence parallelism the first matmul of
                                               the tensor region keeps its ``l/s1`` input
                                               shard and allgathers it again in backward
                                               (Megatron-LM); ``"gathered"``: it keeps the
                                               gathered ``l`` (the LBNL 2024 code)
``loss_precision``              ``"fp32"``     the loss keeps its logits in fp32 (Megatron-LM
                                               without ``--fp16-lm-cross-entropy``; Hugging
                                               Face's loss upcasts too); ``"activations"``:
                                               in the activations' precision
``deallocate_pipeline_outputs`` ``True``       ``False``: a pipeline stage keeps the data of
                                               the output it sent for every micro-batch in
                                               flight (Megatron-LM frees it)
``pipeline_sends``              ``"full"``     each rank of a tensor group sends the ``b l/s1 e``
                                               it holds to the next stage (Megatron-Core);
                                               ``"scatter-gather"``: it sends ``1/m1`` of
                                               the hidden states and the next stage
                                               all-gathers them over ``m1/s1`` ranks
                                               (Megatron-LM before sequence parallelism,
                                               Narayanan et al. 2021, section 4.1)
``gemm_output_overhead``        ``False``      ``True``: a tiled GEMM also costs
                                               ``15 + 5 ceil(k/X)`` operations per output
``gated_activation``            ``"fused"``    what a gated MLP activation keeps: the fused
                                               ``[G, U]`` input (Megatron-LM's fused SwiGLU,
                                               Transformer Engine); ``"eager"``: ``G``, ``U``
                                               and ``act(G)`` (PyTorch eager; ``ops.pointwise.gated``)
``embedding_reads``             ``"rows"``     a lookup reads the ``b l`` rows it gathers
                                               (its share of a vocabulary-split table);
                                               ``"table"``: the whole table
``gradient_lifetime``           ``"buffer"``   gradients live all step in a persistent buffer
                                               (Megatron-LM's ``DistributedDataParallel``
                                               grad buffer); ``"step"``: made during backward
                                               and freed by ``zero_grad(set_to_none=True)``
                                               (PyTorch's default; ``models.peak``)
``loss_backward``               ``"in-place"`` the loss's backward writes the gradient into
                                               its saved fp32 softmax (Megatron-LM's
                                               vocabulary-parallel cross entropy);
                                               ``"eager"``: ``log_softmax``/``nll_loss`` make
                                               two fresh gradients (``models.peak``)
``optimizer_step``              ``"fused"``    the optimizer updates in place with no
                                               temporaries (Apex / Transformer Engine
                                               ``FusedAdam``); ``"single-tensor"``:
                                               ``torch.optim.AdamW(foreach=False)``'s two
                                               temporaries per parameter (``models.peak``)
``lstm_grad_accumulate_bytes``  ``True``       ``False``: the LSTM weight-gradient sum's
                                               traffic is counted in elements (DeepFlow quirk)
``lstm_softmax_weight_rows``    ``"input"``    ``"projection"``: softmax weight memory uses
                                               ``Pj + 1`` rows even without a projection
``lstm_count_disabled_projection`` ``False``   ``True``: a disabled projection still counts
                                               in parameters and memory (DeepFlow quirk)
=============================== ============== ===========================================
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from symbolic_cost.checks import InputError
from symbolic_cost.named_conventions import PRESETS as NAMED

_CHOICES = {
    "matmul_flops": ("exact", "2mnk"),
    "sequence_shard": ("s1", "m1"),
    "collective_volume": ("ring", "tensor"),
    "norm_placement": ("pre", "attention"),
    "comm_time": ("alpha-beta", "hierarchical", "bandwidth"),
    "causal_flops": ("full", "exact"),
    "window_count": ("windowed", "dense"),
    "mixed_precision": ("zero", "megatron"),
    "qkv_bias_elements": ("3e", "e"),
    "kernel_time": ("roofline", "tiled"),
    "sequence_parallel_inputs": ("shard", "gathered"),
    "loss_precision": ("fp32", "activations"),
    "lstm_softmax_weight_rows": ("input", "projection"),
    "pipeline_sends": ("full", "scatter-gather"),
    "gated_activation": ("fused", "eager"),
    "embedding_reads": ("rows", "table"),
    "gradient_lifetime": ("buffer", "step"),
    "loss_backward": ("in-place", "eager"),
    "optimizer_step": ("fused", "single-tensor"),
}


@dataclass(frozen=True)
class Conventions:
    """Counting conventions; see the module docstring for every field."""

    matmul_flops: str = "exact"
    sequence_shard: str = "s1"
    collective_volume: str = "ring"
    reduction_flops: bool = True
    norm_placement: str = "pre"
    comm_time: str = "alpha-beta"
    overlap_comm: bool = False
    causal_flops: str = "full"
    window_count: str = "windowed"
    mixed_precision: str = "zero"
    qkv_bias_elements: str = "3e"
    pointwise_grad_both: bool = True
    attend_grad_both_operands: bool = True
    layer_norm_keeps_stats: bool = True
    layer_norm_bwd_reads_weights: bool = True
    kernel_time: str = "roofline"
    mlp_activation_dropout: bool = False
    sequence_parallel_inputs: str = "shard"
    loss_precision: str = "fp32"
    deallocate_pipeline_outputs: bool = True
    pipeline_sends: str = "full"
    gemm_output_overhead: bool = False
    gated_activation: str = "fused"
    embedding_reads: str = "rows"
    gradient_lifetime: str = "buffer"
    loss_backward: str = "in-place"
    optimizer_step: str = "fused"
    lstm_grad_accumulate_bytes: bool = True
    lstm_softmax_weight_rows: str = "input"
    lstm_count_disabled_projection: bool = False

    def __post_init__(self):
        for item in fields(self):
            value = getattr(self, item.name)
            allowed = _CHOICES.get(item.name, (True, False))
            if value not in allowed or type(value) is not type(allowed[0]):
                raise InputError(f"conventions field {item.name} must be one of "
                                 f"{', '.join(map(repr, allowed))}, got {value!r}", item.name)

    def but(self, **changes) -> "Conventions":
        """A copy with some fields changed: ``DEFAULT.but(matmul_flops="2mnk")``."""
        unknown = set(changes) - {item.name for item in fields(self)}
        if unknown:
            raise InputError(f"unknown conventions field(s): {', '.join(sorted(unknown))}", sorted(unknown)[0])
        return replace(self, **changes)


DEFAULT = Conventions()

PRESETS = {"default": DEFAULT, **{name: DEFAULT.but(**{k: v for k, v in changes.items() if k != "source"})
                                  for name, changes in NAMED.items()}}
"""Every named preset: the default, each reproduced tool's (``named_conventions``), and those a
user adds (``register``)."""


def register(name: str, conventions: Conventions) -> Conventions:
    """Make ``conventions`` available as ``get(name)`` (and ``--conventions name``)."""
    if not isinstance(conventions, Conventions):
        raise InputError(f"preset {name!r} must be a Conventions value, got {conventions!r}", "conventions")
    PRESETS[name] = conventions
    return conventions


def get(name: str | Conventions) -> Conventions:
    """Look up a preset by name (a ``Conventions`` value passes through)."""
    if isinstance(name, Conventions):
        return name
    if not isinstance(name, str) or name not in PRESETS:
        raise InputError(f"unknown conventions {name!r}; known: {', '.join(PRESETS)} (or a Conventions value)",
                         "conventions")
    return PRESETS[name]
