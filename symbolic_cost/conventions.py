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
``gemm_output_overhead``        ``False``      ``True``: a tiled GEMM also costs
                                               ``15 + 5 ceil(k/X)`` operations per output
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

_CHOICES = {
    "matmul_flops": ("exact", "2mnk"),
    "sequence_shard": ("s1", "m1"),
    "collective_volume": ("ring", "tensor"),
    "norm_placement": ("pre", "attention"),
    "comm_time": ("alpha-beta", "hierarchical", "bandwidth"),
    "causal_flops": ("full", "exact"),
    "mixed_precision": ("zero", "megatron"),
    "qkv_bias_elements": ("3e", "e"),
    "kernel_time": ("roofline", "tiled"),
    "lstm_softmax_weight_rows": ("input", "projection"),
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
    mixed_precision: str = "zero"
    qkv_bias_elements: str = "3e"
    pointwise_grad_both: bool = True
    attend_grad_both_operands: bool = True
    layer_norm_keeps_stats: bool = True
    layer_norm_bwd_reads_weights: bool = True
    kernel_time: str = "roofline"
    gemm_output_overhead: bool = False
    lstm_grad_accumulate_bytes: bool = True
    lstm_softmax_weight_rows: str = "input"
    lstm_count_disabled_projection: bool = False

    def __post_init__(self):
        for item in fields(self):
            value = getattr(self, item.name)
            allowed = _CHOICES.get(item.name, (True, False))
            if value not in allowed or type(value) is not type(allowed[0]):
                raise ValueError(f"conventions field {item.name} must be one of "
                                 f"{', '.join(map(repr, allowed))}, got {value!r}")

    def but(self, **changes) -> "Conventions":
        """A copy with some fields changed: ``DEFAULT.but(matmul_flops="2mnk")``."""
        unknown = set(changes) - {item.name for item in fields(self)}
        if unknown:
            raise ValueError(f"unknown conventions field(s): {', '.join(sorted(unknown))}")
        return replace(self, **changes)


DEFAULT = Conventions()

LBNL_2024 = Conventions(
    sequence_shard="m1",          # the printed tables come from code with l // m1
    collective_volume="tensor",   # volumes are the full b*l*e tensor, no (n-1)/n
    reduction_flops=False,        # added only in a later commit than the printout
    norm_placement="attention",   # SA holds layer_norm_1 and layer_norm_2; MLP none
    comm_time="bandwidth",        # time = volume / link bandwidth, kind ignored
    # quirks of the primitives at 0ecb63e; upstream fixed them in 5a89ee8 (2024-02-02)
    pointwise_grad_both=False,
    attend_grad_both_operands=False,
    layer_norm_keeps_stats=False,
    layer_norm_bwd_reads_weights=False,
)
"""The LBNL transformer-perf-estimates notebook (arXiv 2410.00273) as printed in
seed 003: commit 0ecb63e of ShashankSubramanian/transformer-perf-estimates."""

MEGATRON_TRAINING_INFO = Conventions(mixed_precision="megatron", qkv_bias_elements="e",
                                     collective_volume="tensor")
"""Megatron-LM's ``tools/get_training_info`` (seed 000): Megatron's bytes per parameter,
its quirk of a QKV bias of ``e`` elements, and volumes as whole tensors."""

DEEPFLOW_2019 = Conventions(
    matmul_flops="2mnk", kernel_time="tiled", gemm_output_overhead=True,
    # quirks of perf.py at e6a5da02d1d6, visible in seed 002's numbers
    lstm_grad_accumulate_bytes=False, lstm_softmax_weight_rows="projection",
    lstm_count_disabled_projection=True,
)
"""DeepFlow's LSTM performance model (arXiv 2211.03309) as it printed seed 002:
``perf.py`` of nanocad-lab/DeepFlow at commit e6a5da02d1d6 (2019)."""

PRESETS = {"default": DEFAULT, "lbnl-2024": LBNL_2024, "megatron-training-info": MEGATRON_TRAINING_INFO,
           "deepflow-2019": DEEPFLOW_2019}


def get(name: str | Conventions) -> Conventions:
    """Look up a preset by name (a ``Conventions`` value passes through)."""
    if isinstance(name, Conventions):
        return name
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown conventions {name!r}; known: {', '.join(PRESETS)}") from None
