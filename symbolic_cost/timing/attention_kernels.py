"""Fused attention by the work it executes: the tiles a flash kernel runs, at the rate published
kernel benchmarks show.

A flash kernel (FlashAttention-2/3, cuDNN's fused attention) cuts the ``l x L`` score matrix
into square tiles of ``TILE`` queries by ``TILE`` keys.  One thread block takes a query tile and
walks its key tiles; under a causal mask it stops at the diagonal, so of a causal square of
``n = ceiling(L/T)`` tile rows it runs ``n (n + 1)/2`` tiles, the diagonal ones whole
(``executed_keys``).  Each query tile also pays a fixed cost (loading ``Q``, the softmax's
final rescale, writing ``O``: the prologue and epilogue of the pipeline), worth ``c`` key tiles.
So a kernel runs at

    ``time = executed FLOPs / (rate x A) x (1 + c T / executed keys a query)``

with two constants a pass, ``A`` (the fraction of the matrix rate its inner loop sustains) and
``c`` (the fixed work of a query tile, in key tiles).  The same two constants explain the causal
and the unmasked bars: at 512 tokens a causal query tile has on average 2.5 key tiles, of which
the diagonal one is half wasted, against 4 whole ones unmasked.

A third constant carries the head dimension ``d``.  A score costs ``4 d`` FLOPs of products
forward (``Q K^T`` and ``P V``) but one exponential and its rescaling whatever ``d`` is, and the
exponential unit is far slower than the tensor cores (on H100, 3.9 against 989 TFLOP/s), so a
short head spends more of the inner loop on the softmax.  With ``s`` the share of a head-128 key
tile's time that does not scale with ``d``::

    ``time x (1 + s (128 / min(d, 128) - 1))``

(``head_factor``; ``d`` the mean of the query and value head dimensions, whose products each
score runs; heads wider than 128 are taken at 128's rate, the widest the bars of both head
dimensions give).  ``fit`` takes the three constants of a pass from the kernel's published
TFLOP/s by sequence length, with and without the causal mask, at head dimensions 64 and 128
(``attention_kernels.json``: the FlashAttention-3 paper's bars for cuDNN, FlashAttention-3 and
FlashAttention-2); no measured training run enters them.

Counting conventions are untouched: a model's FLOPs (and its MFU) stay as
``conventions.causal_flops`` counts them; only the time follows the executed tiles.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import NamedTuple

from sympy import Expr, Integer, Rational

from symbolic_cost.checks import InputError, exact
from symbolic_cost.extrema import minimum
from symbolic_cost.ops.matmul import Chunk
from symbolic_cost.rounding import round_down, round_up

PASSES = ("forward", "backward")


def _load() -> dict:
    return json.loads(resources.files("symbolic_cost.timing").joinpath("attention_kernels.json").read_text())


BENCHMARKS = _load()
"""The published kernel throughputs and the constants fitted on them (``attention_kernels.json``)."""

HEAD_DIM = 128
"""Head dimension of the kernels' main bars (``forward``, ``backward``); ``head_dim_64`` holds the
bars at 64."""

TILE = BENCHMARKS["tile"]
"""Side of a score tile, queries and keys: 128 in FlashAttention-2's and -3's and cuDNN's kernels
for head dimension 128 (FlashAttention-2 forward: 128 x 64 key tiles, two to a 128-key step)."""


def executed_keys(shape, tile=TILE) -> Expr:
    """Keys a query's share of the executed tiles covers, on average, for a ``cost.ScoreShape``.

    Without a causal square (``causal_length`` None): the ``counted`` keys.  On a causal square
    of ``L`` tokens, ``n = ceiling(L/T)`` tile rows: the kernel runs ``n (n + 1)/2`` tiles,
    ``n (n + 1) T^2 / (2 L)`` keys a query; within a causal window of ``w`` keys, row ``i`` runs
    ``min(i + 1, k)`` tiles with ``k = min(ceiling((w - 1)/T) + 1, n)``, ``k n - k (k - 1)/2``
    in all; in chunks of ``c`` (``ops.matmul.Chunk``) each whole chunk is a causal square of
    ``t = ceiling(c/T)`` rows and the rest one of ``u = ceiling((L - floor(L/c) c)/T)``.

    >>> from symbolic_cost.cost import ScoreShape
    >>> executed_keys(ScoreShape(512, 512, causal_length=512))        # 10 tiles of 128 x 128
    320
    >>> executed_keys(ScoreShape(1, 4096))                             # a decode step: every key
    4096
    """
    if shape.causal_length is None:
        return shape.counted
    length, tile = exact(shape.causal_length, "causal_length"), exact(tile, "tile")
    rows = round_up(length / tile)
    window = shape.window
    if window is None:
        tiles = rows * (rows + 1) / 2
    elif isinstance(window, Chunk):
        size = exact(window.size, "window")
        whole = round_down(length / size)
        t, u = round_up(size / tile), round_up((length - whole * size) / tile)
        tiles = whole * t * (t + 1) / 2 + u * (u + 1) / 2
    else:
        k = minimum(round_up((exact(window, "window") - 1) / tile) + 1, rows)
        tiles = k * rows - k * (k - 1) / 2
    return tiles * tile**2 / length


def head_factor(head_dim, share) -> Expr:
    """How much longer a kernel's inner loop takes a FLOP at head dimension ``head_dim`` than at
    ``HEAD_DIM`` (128), when ``share`` of a head-128 key tile's time does not scale with the head
    (the softmax): ``1 + share (128 / min(d, 128) - 1)``; 1 for a shape built without one.

    >>> head_factor(64, Rational(1, 4)), head_factor(128, Rational(1, 4)), head_factor(192, Rational(1, 4))
    (5/4, 1, 1)
    """
    if head_dim is None:
        return Integer(1)
    return 1 + share * (HEAD_DIM / minimum(exact(head_dim, "head_dim"), HEAD_DIM) - 1)


@dataclass(frozen=True)
class AttentionKernel:
    """The three constants of a fused attention kernel a pass (see the module docstring):
    ``forward``/``backward``, the fraction of the matrix rate its inner loop sustains at head
    dimension 128; ``forward_overhead``/``backward_overhead``, a query tile's fixed work in key
    tiles; ``forward_softmax``/``backward_softmax``, the share of a head-128 key tile's time that
    does not scale with the head dimension (``head_factor``)."""

    name: str
    forward: Expr
    backward: Expr
    forward_overhead: Expr
    backward_overhead: Expr
    forward_softmax: Expr = Integer(0)
    backward_softmax: Expr = Integer(0)

    def time(self, cost, pass_: str, rate) -> Expr:
        """Seconds of a fused row's ``pass_`` (``"fwd"``/``"bwd"``) at ``rate`` FLOP/s: its
        ``executed_flops`` at ``A`` of the rate, slower by ``head_factor`` for a head narrower
        than 128, plus the query tiles' fixed work."""
        name = "forward" if pass_ == "fwd" else "backward"
        level, overhead, share = (getattr(self, f"{name}{part}") for part in ("", "_overhead", "_softmax"))
        seconds = executed_flops(cost, pass_) / (rate * level)
        if cost.scores is None:
            return seconds
        return seconds * head_factor(cost.scores.head_dim, share) * (1 + overhead * TILE / executed_keys(cost.scores))


def executed_flops(cost, pass_: str) -> Expr:
    """FLOPs a fused row's kernel runs in ``pass_``: its counted FLOPs scaled from the counted keys
    to the executed ones (``cost.scores``; as counted for a row built without a shape).  The
    peak-only roofline times these too, so that it stays a lower bound of the calibrated time."""
    flops = getattr(cost, f"flops_{pass_}")
    shape = cost.scores
    return flops if shape is None else flops * executed_keys(shape) / shape.counted


def kernel(name: str) -> AttentionKernel:
    """The fitted ``AttentionKernel`` of ``name`` (``KERNELS``).

    >>> kernel("cudnn-hopper").name
    'cudnn-hopper'
    """
    fitted = BENCHMARKS.get("fitted", {}).get(name)
    if fitted is None:
        raise InputError(f"attention_kernel must be one of {', '.join(KERNELS)}, got {name!r}", "attention_kernel")
    return AttentionKernel(name, **{k: Rational(v) for k, v in fitted.items()})


KERNELS = tuple(BENCHMARKS["kernels"])
"""The kernels with published benchmarks: ``cudnn-hopper``, ``flash-attention-3``,
``flash-attention-2-hopper`` (FlashAttention-2 as it runs on H100), ``flash-attention-2`` (on A100),
``cudnn-blackwell`` (cuDNN 9.19 on GB200), ``cudnn-blackwell-ultra`` (the B300 chip: its curve at the
ratio of same-day GB300 and GB200 bars) and ``flash-attention-2-blackwell`` (on B200)."""

LIBRARIES = {
    "cudnn": {"hopper": "cudnn-hopper", "blackwell": "cudnn-blackwell"},
    "flash-attention-2": {"ampere": "flash-attention-2", "hopper": "flash-attention-2-hopper",
                          "blackwell": "flash-attention-2-blackwell"},
    "flash-attention-3": {"hopper": "flash-attention-3"},
}
"""The kernel a training's attention library (``models.training_values.ATTENTION_KERNELS``) runs
as, by the GPU generation (``Efficiency.arch``), each with its own published bars; a generation a
library is missing from is refused (``UNAVAILABLE``).  A system whose own kernel is of the library
named runs its own (``for_training``): the B300 chip's cuDNN, ``CHIP_KERNELS``."""

CHIP_KERNELS = {"cudnn-blackwell-ultra": "cudnn"}
"""Kernels of one chip of a generation (the system files name them), by the library they are."""


def library_of(kernel: str) -> str | None:
    """The attention library ``kernel`` is (``LIBRARIES``, ``CHIP_KERNELS``); ``None`` for none.

    >>> library_of("cudnn-blackwell-ultra"), library_of("flash-attention-2-hopper")
    ('cudnn', 'flash-attention-2')
    """
    return CHIP_KERNELS.get(kernel) or next((lib for lib, by in LIBRARIES.items() if kernel in by.values()), None)


UNAVAILABLE = {
    "flash-attention-3": "FlashAttention-3 runs on Hopper (sm90) only",
    "cudnn": "no published benchmark of cuDNN's fused attention on this generation is read",
    "flash-attention-2": "no published benchmark of FlashAttention-2 on this generation is read",
}
"""Why ``LIBRARIES`` leaves a library out on a generation, as ``for_training`` refuses it."""


def for_training(system, training):
    """``system`` running the fused attention ``training`` names (``Training.attention_kernel``,
    through ``LIBRARIES``); ``system`` itself where the training names none or the system has no
    calibrated efficiencies (the peak-only time runs every kernel at peak).

    >>> from symbolic_cost.models.training import Training
    >>> from symbolic_cost.timing.hardware import calibrated
    >>> sdpa = Training(flash=True, attention_kernel="flash-attention-2")
    >>> for_training(calibrated("h100"), sdpa).efficiency.attention_kernel
    'flash-attention-2-hopper'
    """
    library, eff = training.attention_kernel, system.efficiency
    if library is None or eff is None or library_of(eff.attention_kernel) == library:
        return system
    name = LIBRARIES[library].get(eff.arch)
    if name is None:
        raise InputError(f"attention_kernel {library!r} cannot time on {system.name} ({eff.arch}): "
                         f"{UNAVAILABLE[library]}; leave it unset for the system's own kernel, "
                         f"{eff.attention_kernel}", "attention_kernel")
    return system.but(efficiency=eff.but(attention_kernel=name))


def benchmark_rate(level, overhead, length, causal, peak, tile=TILE, head_dim=HEAD_DIM, share=0,
                   window=None) -> float:
    """TFLOP/s the model gives for a benchmark point of ``length`` tokens under FlashAttention's
    count (causal: half the scores; within a causal ``window``, the pairs inside it, as
    cuDNN's benchmarks count them), for constants ``level``, ``overhead`` and ``share`` at
    ``head_dim``: ``peak x level x counted keys / ((executed keys + overhead x T) x head_factor)``."""
    from symbolic_cost.conventions import DEFAULT
    from symbolic_cost.cost import ScoreShape
    from symbolic_cost.ops.matmul import scored_keys
    shape = ScoreShape(length, length, causal_length=length if causal else None, window=window if causal else None)
    if window is not None and causal:      # min(i + 1, w) keys a query: the count's own exact mean
        counted = scored_keys(length, length, True, DEFAULT.but(causal_flops="exact"), window)
    else:
        counted = length / 2 if causal else length
    slower = float(head_factor(head_dim, Rational(share)))
    return float(peak * level * counted / (executed_keys(shape, tile) + overhead * tile)) / slower


def bars_of(name: str) -> str:
    """The kernel whose published bars give ``name``'s curve: its own, or those of ``shape_of``
    (FlashAttention-2 on A100 takes its shape from the same kernel's bars on H100) or of
    ``scaled_of`` (cuDNN on the B300 chip: B200's curve at its paired ratio, ``paired_ratio``)."""
    record = BENCHMARKS["kernels"][name]
    return record.get("shape_of", record.get("scaled_of", name))


class Bar(NamedTuple):
    """One published benchmark point: ``length`` tokens, ``causal`` or not, at head dimension
    ``head`` within a causal ``window`` (``None``: the whole square), ``tflops`` under the
    benchmark's count (``benchmark_rate``)."""

    length: int
    causal: bool
    head: int
    window: int | None
    tflops: float


def points(name: str, pass_: str) -> list[Bar]:
    """The published bars of ``bars_of(name)`` for ``pass_``, at head dimension 128 and, where
    published, 64 (``head_dim_64``, within its ``window`` where it gives one), at the record's
    ``sequence_lengths`` (the file's unless the record names its own)."""
    record = BENCHMARKS["kernels"][bars_of(name)]
    lengths = record.get("sequence_lengths", BENCHMARKS["sequence_lengths"])
    short = record.get("head_dim_64", {})
    by_head = [(HEAD_DIM, None, record[pass_]), (64, short.get("window"), short.get(pass_, {}))]
    return [Bar(length, mask == "causal", head, window, float(v)) for head, window, bars in by_head
            for mask, values in bars.items() for length, v in zip(lengths, values)]


def fit(name: str, pass_: str) -> tuple[float, float, float]:
    """``(level, overhead, softmax share)`` minimising the squared log errors of ``benchmark_rate``
    over the kernel's bars (``points``; scipy's ``least_squares``); the share stays 0 for a kernel
    with bars at one head dimension only, which cannot tell it apart.  A kernel whose level on its
    own GPU is published apart (``asymptote``: FlashAttention-2 on A100) keeps that level, and its
    overhead and share are the fit's on the bars it borrows (``shape_of``); a kernel another chip's
    curve times (``scaled_of``) takes that kernel's constants, each level times ``paired_ratio``."""
    import numpy as np
    from scipy.optimize import least_squares
    record = BENCHMARKS["kernels"][name]
    if "scaled_of" in record:
        level, overhead, share = fit(record["scaled_of"], pass_)
        return level * paired_ratio(name, pass_), overhead, share
    peak = BENCHMARKS["kernels"][bars_of(name)]["peak"]
    data = points(name, pass_)
    heads = len({bar.head for bar in data}) > 1

    def residuals(x):
        share = x[2] if heads else 0
        return [np.log(benchmark_rate(x[0], x[1], bar.length, bar.causal, peak, head_dim=bar.head, share=share,
                                      window=bar.window) / bar.tflops) for bar in data]

    x = least_squares(residuals, [0.6, 1.0, 0.2], bounds=([0.05, 0.0, 0.0], [1.0, 20.0, 0.95])).x
    level, overhead, share = x[0], x[1], (x[2] if heads else 0.0)
    published = record.get("asymptote", {}).get(pass_)
    return (float(published) if published else level), overhead, share


def paired_ratio(name: str, pass_: str) -> float:
    """The median ratio of ``name``'s bars to those of the kernel it scales (``scaled_of``), measured
    the same day with the same code on the two chips (``paired``: ``[this chip, the other]`` a
    point): how much faster the same kernel runs there, at the same peak."""
    import statistics
    pairs = BENCHMARKS["kernels"][name]["paired"][pass_]
    return statistics.median(mine / theirs for bars in pairs.values() for mine, theirs in bars)


def fit_all() -> dict:
    """``{kernel: {forward, forward_overhead, forward_softmax, backward, ...}}`` of every kernel
    (``fit``)."""
    out = {}
    for name in KERNELS:
        for pass_ in PASSES:
            level, overhead, share = fit(name, pass_)
            out.setdefault(name, {}).update({pass_: level, f"{pass_}_overhead": overhead, f"{pass_}_softmax": share})
    return out


def write(values: dict, path=None):
    """Store ``fit_all``'s constants, three significant digits, in ``attention_kernels.json``."""
    from pathlib import Path
    path = Path(path or Path(__file__).with_name("attention_kernels.json"))
    record = json.loads(path.read_text())
    record["fitted"] = {name: {k: f"{v:.3g}" for k, v in fitted.items()} for name, fitted in values.items()}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path
