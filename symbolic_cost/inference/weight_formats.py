"""Number formats of a served model's weights: FP8, MXFP8, NVFP4 and weight-only INT4 and NF4.

A serving engine quantises the matrix weights of the transformer layers (the projections and the
experts; not the word table, the LM head or the norms, which TensorRT-LLM's and ModelOpt's
default recipes keep in the model's precision).  A format states

* ``element_bytes``: bytes a weight element takes with its share of the scales,
* ``products``: the tensor-core format the products run in: ``"fp8"`` (activations quantised
  too, ``System.fp8_flops``), ``"fp4"`` (``System.fp4_flops``) or ``None`` (weight-only: the
  weights are widened in the kernel and the product runs at the 16-bit rate),
* ``rows``: the rows it applies to (``None``: every matrix row holding weights), and ``kept``:
  rows left in the model's precision.

========== ====================================================== ============ ========
format     layout (source)                                        bytes/elem.  products
========== ====================================================== ============ ========
``fp8``    E4M3, one fp32 scale per tensor (TensorRT-LLM and       1            fp8
           vLLM "fp8"; the per-tensor scale is not counted)
``mxfp8``  E4M3, one E8M0 scale per 32 elements (OCP MX v1.0;       1 + 1/32     fp8
           ``models.number_formats.MXFP8``)
``nvfp4``  E2M1, one E4M3 scale per 16 elements (NVIDIA NVFP4;     1/2 + 1/16   fp4
           the per-tensor fp32 scale is not counted;
           ``models.number_formats.NVFP4``)
``int4``   4-bit integers, one fp16 scale and one 4-bit zero       1/2 + 5/256  none
           point per 128 elements (AWQ/GPTQ W4A16 packing,
           group size 128)
========== ====================================================== ============ ========

Two more are the formats checkpoints ship in, which a serving engine loads as they are
(``models.config.stored_weights`` reads them from ``config.json``'s ``quantization_config``):

================= ============================================== ============ ========
format            layout (source)                                bytes/elem.  products
================= ============================================== ============ ========
``fp8-block``     E4M3, one fp32 scale per 128 x 128 block; the   1 + 1/4096   fp8
                  router kept (DeepSeek-V3's checkpoint,
                  ``weight_block_size [128, 128]``; DeepGEMM)
``mxfp4-experts`` E2M1, one E8M0 scale per 32 elements, the       1/2 + 1/32   none
                  routed experts only (GPT-OSS's checkpoint:
                  attention, router, word table and head not
                  converted); widened to 16 bits in the kernel
``nf4``           bitsandbytes' 4-bit checkpoints (NF4, or its    1/2 + 1/16   none
                  4-bit float of the same layout): one fp32
                  absmax per block of 64 (``NF4``); widened to
                  16 bits in the kernel (vLLM's and
                  transformers' loading; the head kept)
``nf4-double``    the same with double quantisation               1/2 + 1/64   none
                  (``bnb_4bit_use_double_quant``:                 + 1/4096
                  ``NF4_DOUBLE``)
================= ============================================== ============ ========

A format stores a row's weight matrices (``cost.Cost.matrix_elements``); its biases keep the precision.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, Rational

from symbolic_cost.checks import InputError
from symbolic_cost.timing.systems import require_block_format
from symbolic_cost.blocks.moe import EXPERT_ROWS
from symbolic_cost.models.number_formats import FP8_128, INT4_128, MXFP4, MXFP8, NF4, NF4_DOUBLE, NVFP4


@dataclass(frozen=True)
class WeightFormat:
    """How the layers' matrix weights are stored and multiplied (see the module docstring)."""

    name: str
    element_bytes: Expr
    products: str | None
    rows: tuple[str, ...] | None = None
    kept: tuple[str, ...] = ()
    block_format: str | None = None   # the block-scaled format its products need (timing.systems.BLOCK_FORMATS)

    def applies(self, row) -> bool:
        """Whether ``row`` (a ``cost.Row``) holds weights this format stores."""
        return row.engine == "matrix" and row.weights != 0 and row.name not in self.kept \
            and (self.rows is None or row.name in self.rows)


WEIGHT_FORMATS = {
    "fp8": WeightFormat("fp8", Rational(1), "fp8"),
    "mxfp8": WeightFormat("mxfp8", MXFP8, "fp8", block_format="mxfp8"),
    "nvfp4": WeightFormat("nvfp4", NVFP4, "fp4", block_format="nvfp4"),
    "int4": WeightFormat("int4", INT4_128, None),
    "fp8-block": WeightFormat("fp8-block", FP8_128, "fp8", kept=("router",)),
    "mxfp4-experts": WeightFormat("mxfp4-experts", MXFP4, None, rows=EXPERT_ROWS),
    "nf4": WeightFormat("nf4", NF4, None),
    "nf4-double": WeightFormat("nf4-double", NF4_DOUBLE, None),
}


def weight_format(name: str | None) -> WeightFormat | None:
    """The format named ``name`` (``None``: the model's precision, no quantisation).

    >>> weight_format("nvfp4").element_bytes
    9/16
    """
    if name is None:
        return None
    if not isinstance(name, str) or name not in WEIGHT_FORMATS:
        raise InputError(f"weights must be one of {', '.join(WEIGHT_FORMATS)} or None (the precision), "
                         f"got {name!r}", "weights")
    return WEIGHT_FORMATS[name]


def widened_on(fmt: WeightFormat | None, system) -> str | None:
    """A note where ``fmt`` multiplies in FP8 and ``system`` has no FP8 tensor cores (A100): its
    products are timed at the 16-bit rate (``timing.systems.product_rate``), the weights widened in
    the kernel, as vLLM's FP8 Marlin kernel serves an FP8 checkpoint there; ``None`` otherwise.

    >>> from symbolic_cost.timing.systems import get_system
    >>> widened_on(weight_format("fp8"), get_system("h100")) is None
    True
    """
    if fmt is None or fmt.products != "fp8" or system.fp8_flops:
        return None
    return (f"weights {fmt.name} on {system.name}, which has no FP8 tensor cores: the products run at the 16-bit "
            f"rate, the weights widened in the kernel (vLLM's FP8 Marlin kernel; TensorRT-LLM runs FP8 from Ada "
            f"and Hopper on)")


def check_weights(fmt: WeightFormat | None, system) -> None:
    """Refuse block-scaled weights (``mxfp8``, ``nvfp4``) on a system whose tensor cores do not run
    their format (``timing.systems.require_block_format``, training's rule too): MXFP8 runs on
    Blackwell and CDNA 4 (MI350X, MI355X), NVFP4 on Blackwell only; priced at the FP8 rate on a
    Hopper, MXFP8 were a product no Hopper runs.

    >>> from symbolic_cost.timing.systems import get_system
    >>> check_weights(weight_format("mxfp8"), get_system("b200"))
    >>> check_weights(weight_format("mxfp8"), get_system("h100"))
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: weights mxfp8 (--weights) needs block-scaled (MX) tensor cores, and system h100 has none ...
    """
    if fmt is not None and fmt.block_format is not None:
        require_block_format(system, fmt.block_format, f"weights {fmt.name} (--weights)", "weights")


def quantized(block, fmt: WeightFormat, es) -> object:
    """``block`` with its matrix rows' weights in ``fmt``: each row the format applies to (a
    projection, an expert) keeps its weight matrices in ``element_bytes`` an element instead of
    ``es`` (``Cost.matrix_elements``; a bias stays in ``es``, as engines keep it) and moves that much
    less in the forward pass, and its products take ``fmt.products``'s rate.  Rows without
    weights (attention's score products, norms, pointwise work) are as they were."""
    def at_format(row):
        if not fmt.applies(row):
            return row
        saved = row.matrix_elements * (es - fmt.element_bytes)
        return replace(row, weights=row.weights - saved, mem_fwd=row.mem_fwd - saved,
                       fp8=fmt.products == "fp8", fp4=fmt.products == "fp4")

    return replace(block, rows=tuple(at_format(r) for r in block.rows))
