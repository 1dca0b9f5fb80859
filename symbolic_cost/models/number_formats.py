"""Block-scaled number formats: the bytes one element takes with its share of the block scales.

The one home of these sizes: the training recipes (``models.optimizers.FP8_RECIPES``) and the
served weights (``inference.weight_formats``) both read them.  A block-scaled format stores
``element_bits`` per element and one ``scale_bits`` scale per ``block`` elements:
``element_bits/8 + scale_bits/(8 block)`` bytes per element.

========== =========================================================== ===================
format     layout (source)                                             bytes/elem.
========== =========================================================== ===================
MXFP8      E4M3, one E8M0 scale per 32 elements (OCP Microscaling      1 + 1/32
           Formats v1.0; Transformer Engine's ``MXFP8BlockScaling``)
NVFP4      E2M1, one E4M3 scale per 16 elements (NVIDIA, "Pretraining  1/2 + 1/16
           LLMs with NVFP4", 2025; Transformer Engine's
           ``NVFP4BlockScaling``); the fp32 per-tensor scale is not
           part of an element
MXFP4      E2M1, one E8M0 scale per 32 elements (OCP Microscaling      1/2 + 1/32
           Formats v1.0; GPT-OSS's experts as OpenAI ships them)
FP8_128    E4M3, one fp32 scale per 128 x 128 block of a weight        1 + 1/4096
           matrix (DeepSeek-V3's checkpoint, ``weight_block_size``)
INT4_128   4-bit integers, one fp16 scale and one 4-bit zero point     1/2 + 5/256
           per 128 elements (AWQ's and GPTQ's W4A16 packing)
NF4        bitsandbytes' 4-bit NormalFloat (or its 4-bit float), one   1/2 + 1/16
           fp32 absmax per block of 64 (Dettmers et al. 2023, QLoRA)
NF4_DOUBLE the same with double quantisation: the absmax 8-bit per     1/2 + 1/64 + 1/4096
           block of 64, one fp32 scale per 256 blocks (QLoRA Sec. 3:
           0.127 bits of scales a parameter; blocks assumed full)
========== =========================================================== ===================
"""

from __future__ import annotations

from sympy import Expr, Rational


def block_scaled(element_bits: int, block: int, scale_bits: int = 8) -> Expr:
    """Bytes per element of a format of ``element_bits`` with one ``scale_bits`` scale per
    ``block`` elements.

    >>> block_scaled(8, 32), block_scaled(4, 16)
    (33/32, 9/16)
    """
    return Rational(element_bits, 8) + Rational(scale_bits, 8 * block)


MXFP8 = block_scaled(8, 32)
NVFP4 = block_scaled(4, 16)
MXFP4 = block_scaled(4, 32)
FP8_128 = block_scaled(8, 128 * 128, scale_bits=32)
INT4_128 = block_scaled(4, 128, scale_bits=16 + 4)
NF4 = block_scaled(4, 64, scale_bits=32)
NF4_DOUBLE = block_scaled(4, 64) + Rational(32, 8 * 64 * 256)
