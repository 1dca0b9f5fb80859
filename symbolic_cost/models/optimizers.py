"""Optimizers and precision recipes as values: the bytes each trainable parameter costs.

Bytes per trainable parameter, ``(weights, gradients, optimizer)``; the optimizer part is
``master + main gradient + moments x moment bytes``:

============== ======== ========== ===========================================================
precision      weights  gradients  optimizer
============== ======== ========== ===========================================================
fp32           4        4          moments x 4
16-bit, master 2        2          4 (fp32 master copy) + moments x 4 (Micikevicius et al.
                                   2018; Rajbhandari et al. 2020: Adam 2 + 2 + 12)
16-bit, no     2        2          moments x 2: ``torch.optim`` makes each state
master                             ``zeros_like(param)``, in the parameter's precision
Megatron fp16  2        2          4 (master) + 4 (fp32 main gradient) + moments x 4
Megatron bf16  2        4          4 (master) + moments x 4 (gradients accumulate in fp32)
============== ======== ========== ===========================================================

Optimizers (``OPTIMIZERS``), their state per parameter:

============== =================================================================================
``adam``,      two moments (Kingma & Ba 2015; Loshchilov & Hutter 2019's decoupled decay adds
``adamw``      no state)
``sgd``        one momentum buffer (``torch.optim.SGD(momentum>0)``)
``rmsprop``    one running average of the squared gradient (``torch.optim.RMSprop`` at its
               defaults, ``momentum=0`` and ``centered=False``: ``square_avg`` alone)
``adafactor``  no first moment (``beta1=0``, Shazeer & Stern 2018's default) and a factored
               second moment: a row and a column accumulator per weight matrix (``r + c``
               fp32 values for an ``r x c`` matrix), the full second moment of every vector;
               the matrices are those of the library's products (``factored_elements``)
``adam-8bit``  two moments of one byte each with an fp32 absolute maximum per block of
               2048 values (Dettmers et al. 2022, block-wise quantisation): ``1 + 4/2048``
               bytes per moment (blocks assumed full)
``onebit-adam`` Adam's two moments, exchanged compressed (``compressed``, below): 1-bit Adam
               (Tang et al. 2021), DeepSpeed's ``OnebitAdam``
``onebit-lamb`` LAMB's two moments and a third, ``exp_avg_sq_fresh`` (the second moment kept
               fresh after the freeze), exchanged compressed: 1-bit LAMB (Li et al. 2022),
               DeepSpeed's ``OnebitLamb``
``adam-bf16-   Adam with its two moments in bf16 (2 bytes each) beside an fp32 master: Megatron-
moments``      Core's precision-aware optimizer (Transformer Engine's ``FusedAdam``) under an FP8
               recipe other than delayed scaling, where Megatron-Core keeps the fp32 masters
``adam-16bit-  Adam with a 2-byte master (``master_bytes``): Transformer Engine's ``FusedAdam``
master``       holding the fp32 master of a bf16 weight as its low 16 bits
               (``store_param_remainders``: the weight is the high half), or an fp16 master
``adam-16bit-  both: a 2-byte master and bf16 moments (Megatron-Bridge's large pre-training
master-bf16-   recipes)
moments``
============== =================================================================================

The last three are what ``models.megatron_precision.precision_aware_adam`` reads Megatron-Core's
``use_precision_aware_optimizer`` and its state dtypes as; they need bf16 training with a master.

A ``compressed`` optimizer (DeepSpeed's ``deepspeed/runtime/fp16/onebit``) stops the gradient
all-reduce once its warm-up (``freeze_step`` steps of plain Adam or LAMB) is over: each rank
updates its momentum from its own gradient and the momentum is averaged by
``compressed_allreduce`` (``deepspeed/runtime/comm/nccl.py``) in the optimizer step, one sign bit
per element with an fp32 scale per rank, its rounding error fed back into the next step.  The
step is the one after the warm-up.  The error feedback costs fp32 state
(``error_feedback_bytes``): ``worker_error``, the size of the momentum, and ``server_error``, the
``1/d`` chunk this rank averages.  The exchange itself is ``parallel.zero.compressed_exchange``.

Low-precision recipes (``FP8_RECIPES``; Micikevicius et al. 2022; NVIDIA Transformer Engine,
TE): the linear products of the transformer layers (attention's projections, latent attention's
too, the MLP's, the routed experts' grouped GEMM and the shared experts'; not the word table, the
head, attention's score products, the MoE router or a shared-expert gate, ``recipes.KEPT_16BIT``)
run on low-precision tensor cores in forward and backward (fprop, dgrad and wgrad), on every
layer but the first and last ones ``Training`` keeps in 16-bit (``recipes.precision_groups``).
One field, ``Training.fp8``, names the recipe, FP4 included: Megatron-LM takes
``--fp8-recipe`` and ``--fp4-recipe`` as exclusive choices of the same thing, and the names are
Megatron-LM's (``--fp8-recipe delayed|tensorwise|mxfp8``, ``--fp4-recipe nvfp4``).  Per recipe:
the bytes per element of the input each product keeps for backward (``kept_bytes``, instead of the
16-bit ``es``), the bytes per weight element of the quantised weight copies cached beside the
16-bit weight (``weight_copies``), the fp32 scaling state per product (``scale_bytes``: 3 scaled
tensors, input, weight and output gradient, x ``scales + amax_history`` values x 4 bytes) and the
product rate (``products``).  Block scales live in the element sizes (``models.number_formats``):

============== ========== ====================== ============== ==================================
recipe         kept input weight copies (bytes   fp32 state per products
               (bytes)    per weight element)    scaled tensor
============== ========== ====================== ============== ==================================
``delayed``    1          1 (the FP8 copy)       2 + 1024       FP8 (``System.fp8_flops``); TE
                                                                ``DelayedScaling``: a scale, its
                                                                inverse, 1024 amax values
``fp8-params`` 1          none: the weight is    2 + 1024       FP8; ``fp8_model_init``, Megatron
                          stored only in FP8                    ``--fp8-param-gather``: ``- (w -
                          (1 byte; needs the                    1)`` bytes per weight element, the
                          fp32 master)                          fp32 master in the optimizer
``tensorwise`` 1          1                      2              FP8; TE ``Float8CurrentScaling``
                                                                (Megatron ``--fp8-recipe
                                                                tensorwise``): the scale from the
                                                                tensor's own amax, no history
``tensorwise-  1          none: stored only in   2              FP8; ``tensorwise`` with Megatron's
params``                  FP8, as ``fp8-params``                ``--fp8-param-gather``
                                                                (Megatron-Bridge's FP8-CS recipes)
``mxfp8``      1 + 1/32   2 (1 + 1/32): a row-   0 (the E8M0    FP8, on block-scaled (MX) tensor
                          wise and a column-     scales are in  cores only (Blackwell, CDNA 4;
                          wise copy              the elements)  refused elsewhere by name); TE
                                                                ``MXFP8BlockScaling``
``mxfp8-      1 + 1/32   1 + 1/16: the row-wise 0              as ``mxfp8``, with Megatron's
params``                  copy stored in place                  ``--fp8-param-gather``: per weight
                          of the 16-bit weight,                 element the two copies, 2 (1 +
                          the column-wise one                   1/32), and no 16-bit weight
                          cached
``nvfp4``      1/2 + 1/16 2 (1/2 + 1/16)         1 (the fp32    FP4 (``System.fp4_flops``) on
                                                 per-tensor     NVFP4 tensor cores only
                                                 scale)         (Blackwell; refused elsewhere);
                                                                TE ``NVFP4BlockScaling``,
                                                                Megatron ``--fp4-recipe nvfp4``
``torchao-     2 (the     none: cast where used  0 (scales made FP8; torchao's ``Float8Linear``,
tensorwise``   16-bit                            where used)    recipe ``tensorwise`` (torchtitan's
               input)                                           ``[float8]``): one scale a tensor
``torchao-     2          none                   0              FP8; torchao's ``rowwise``: one
rowwise``                                                       scale a row of each operand
``torchao-     2          none                   0 (E8M0 block  FP8 on block-scaled tensor cores
mxfp8``                                          scales in each (Blackwell); torchao's
                                                 cast's 1 +     ``MXFP8Linear`` (torchtitan's
                                                 1/32 bytes)    ``MXFP8LinearConverter``)
============== ========== ====================== ============== ==================================

Sources.  The kept input of a product is what its weight gradient reads, quantised once in
forward; under MXFP8 the column-wise copy (blocks of 32 along the tokens), under NVFP4 the
column-wise 1x16-block copy (NVIDIA, "Pretraining Large Language Models with NVFP4", 2025, which
runs fprop, dgrad and wgrad in NVFP4).  Weights: TE's MXFP8 documentation ("Handling transposes",
docs/features/low_precision_training/mxfp8) states that the row-wise (1x32 blocks, read by fprop)
and the column-wise (32x1 blocks, read by dgrad) quantisations are numerically different tensors,
each made from the high-precision weight, so both are cached.  TE's NVFP4 documentation
(docs/features/low_precision_training/nvfp4) quantises weights in 2-D 16x16 blocks by default "to
ensure that rowwise and columnwise quantized tensors are numerically equivalent"; the two usages
are still two stored tensors (TE's 2-D quantisation writes the row-wise and the transposed
column-wise data), and the tensor cores read one E4M3 scale per 16 elements along the
contraction, so each copy is counted at ``1/2 + 1/16`` bytes (a 16x16 block's scale repeated over
its 16 rows; one scale per 256 elements would be ``1/2 + 1/256``: an assumption of this count).
The cast kernels that quantise each product's input and output gradient are rows of their own
(``ops.quantise``); ``amax_pass``: the recipe takes each scale from the tensor's own absolute
maximum, found in a pass before the cast (``tensorwise``; ``nvfp4``'s fp32 per-tensor scale).
``dynamic``: torchao's recipes keep no quantised tensor at all.  Its ``matmul_with_hp_or_float8_args``
saves the 16-bit input and weight for backward and casts every operand where a product reads it
(forward: the input and the weight; backward: the output gradient twice, once along each axis, the
weight and the saved input), so the cast rows are ``ops.quantise.dynamic_casts``, not TE's
cast-transposes.  ``MXFP8Linear``'s ``mx_mm`` (torchao ``prototype/moe_training/mxfp8_linear.py``) does
the same with MX casts along dim 0 and dim 1 (``cast_bytes``: an element and its share of a 32-block's
E8M0 scale), each block's scale found in the kernel that casts it (no ``amax_pass``).  Not modelled: the ``blockwise`` (128x128) FP8 recipe, and torchao's
``rowwise_with_gw_hp`` (its weight gradient is a 16-bit product).
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Integer, Rational, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError, count, positive_dims
from symbolic_cost.models.number_formats import MXFP8, NVFP4


@dataclass(frozen=True)
class Optimizer:
    """An optimizer's state: ``moments`` tensors the size of the parameters, of
    ``moment_bytes`` each (``None``: the state precision, fp32 with a master copy), a master copy
    of ``master_bytes`` (``None``: fp32) where it keeps one, and whether it keeps a factored second
    moment (Adafactor)."""

    name: str
    moments: int
    moment_bytes: Expr | None = None
    factored: bool = False
    compressed: bool = False      # the momentum exchanged in signs after the warm-up (module docstring)
    master_bytes: Expr | None = None    # the master copy's bytes (None: fp32, 4)


OPTIMIZERS = {
    "adam": Optimizer("adam", 2),
    "adamw": Optimizer("adamw", 2),
    "sgd": Optimizer("sgd", 1),
    "rmsprop": Optimizer("rmsprop", 1),
    "adafactor": Optimizer("adafactor", 0, factored=True),
    "adam-8bit": Optimizer("adam-8bit", 2, moment_bytes=1 + Rational(4, 2048)),
    "onebit-adam": Optimizer("onebit-adam", 2, compressed=True),
    "onebit-lamb": Optimizer("onebit-lamb", 3, compressed=True),
    "adam-bf16-moments": Optimizer("adam-bf16-moments", 2, moment_bytes=2),
    "adam-16bit-master": Optimizer("adam-16bit-master", 2, master_bytes=2),
    "adam-16bit-master-bf16-moments": Optimizer("adam-16bit-master-bf16-moments", 2, moment_bytes=2, master_bytes=2),
}


@dataclass(frozen=True)
class Fp8Recipe:
    """What a low-precision recipe keeps and how its products run (see the module docstring)."""

    name: str
    kept_bytes: Expr               # bytes per element of each product's input kept for backward
    weight_copies: Expr            # bytes per weight element of the cached quantised copies
    primary_weights: bool = False  # the weight itself is stored in FP8 (fp8-params)
    scales: int = 2                # fp32 scale values per scaled tensor (scale and inverse or amax)
    amax_history: int = 1024       # fp32 amax values per scaled tensor (delayed scaling)
    scaled_tensors: int = 3        # input, weight, output gradient of each product
    products: str = "fp8"          # "fp8" (System.fp8_flops) or "fp4" (System.fp4_flops)
    block_format: str | None = None  # the block-scaled format its products need (timing.systems.BLOCK_FORMATS)
    amax_pass: bool = False        # the scale comes from the tensor's own amax: a pass before the cast
    dynamic: bool = False          # torchao: 16-bit operands kept, each cast where a product reads it
    cast_bytes: Expr = Integer(1)  # bytes per element of a dynamic cast's low-precision copy (its block scales too)

    def scale_bytes(self, history: int | None = None) -> Expr:
        """fp32 bytes of one product's scaling state: ``tensors x (scales + history) x 4``;
        ``history`` replaces the recipe's amax history length (delayed scaling only: Megatron-LM's
        ``--fp8-amax-history-len``, ``Training.fp8_amax_history``).

        >>> FP8_RECIPES["delayed"].scale_bytes(), FP8_RECIPES["delayed"].scale_bytes(1)
        (12312, 36)
        """
        history = self.amax_history if history is None else count(history, "fp8_amax_history")
        return Integer(self.scaled_tensors * (self.scales + history) * 4)


FP8_RECIPES = {
    "delayed": Fp8Recipe("delayed", Integer(1), Integer(1)),
    "fp8-params": Fp8Recipe("fp8-params", Integer(1), Integer(0), primary_weights=True),
    "tensorwise": Fp8Recipe("tensorwise", Integer(1), Integer(1), amax_history=0, amax_pass=True),
    "tensorwise-params": Fp8Recipe("tensorwise-params", Integer(1), Integer(0), primary_weights=True, amax_history=0,
                                   amax_pass=True),
    "mxfp8": Fp8Recipe("mxfp8", MXFP8, 2 * MXFP8, scales=0, amax_history=0, block_format="mxfp8"),
    "mxfp8-params": Fp8Recipe("mxfp8-params", MXFP8, 2 * MXFP8 - 1, primary_weights=True, scales=0, amax_history=0,
                              block_format="mxfp8"),
    "nvfp4": Fp8Recipe("nvfp4", NVFP4, 2 * NVFP4, scales=1, amax_history=0, products="fp4", block_format="nvfp4",
                      amax_pass=True),
    "torchao-tensorwise": Fp8Recipe("torchao-tensorwise", Integer(2), Integer(0), scales=0, amax_history=0,
                                    amax_pass=True, dynamic=True),
    "torchao-rowwise": Fp8Recipe("torchao-rowwise", Integer(2), Integer(0), scales=0, amax_history=0,
                                 amax_pass=True, dynamic=True),
    "torchao-mxfp8": Fp8Recipe("torchao-mxfp8", Integer(2), Integer(0), scales=0, amax_history=0, block_format="mxfp8",
                               dynamic=True, cast_bytes=MXFP8),
}


PRECISION_AWARE = ("adam-bf16-moments", "adam-16bit-master", "adam-16bit-master-bf16-moments")
"""The optimizers of Megatron-Core's precision-aware Adam (module docstring): bf16 training with a master."""


def get_optimizer(name: str) -> Optimizer:
    """The optimizer named ``name``."""
    if not isinstance(name, str) or name not in OPTIMIZERS:     # a list is no key: refused, not a TypeError
        raise InputError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}", "optimizer")
    return OPTIMIZERS[name]


def get_fp8(name: str | None) -> Fp8Recipe | None:
    """The FP8 recipe named ``name`` (``None``: no FP8)."""
    if name is None:
        return None
    if not isinstance(name, str) or name not in FP8_RECIPES:
        raise InputError(f"fp8 must be one of {', '.join(FP8_RECIPES)} or None, got {name!r}", "fp8")
    return FP8_RECIPES[name]


def check_recipe(precision: str, optimizer: str, master_weights: bool, fp8: str | None,
                 conventions=conv.DEFAULT, amax_history: int | None = None) -> None:
    """Refuse combinations no framework runs, naming the rule."""
    get_optimizer(optimizer)
    recipe = get_fp8(fp8)
    if amax_history is not None:
        if isinstance(amax_history, bool) or not isinstance(amax_history, int) or amax_history < 1:
            raise InputError(f"fp8_amax_history must be a whole number of steps >= 1, got {amax_history!r}",
                             "fp8_amax_history")
        if recipe is None or not recipe.amax_history:
            raise InputError(f"fp8_amax_history applies to delayed scaling (fp8='delayed' or 'fp8-params'), got "
                             f"fp8={fp8!r}; it would be ignored", "fp8_amax_history")
    if recipe and precision == "fp32":
        raise InputError("fp8 needs 16-bit training (precision bf16 or fp16): its products' other "
                         "tensors stay 16-bit", "fp8")
    if recipe and recipe.primary_weights and not master_weights:
        raise InputError(f"fp8={fp8!r} needs master_weights: the fp32 master is the only high-"
                         "precision copy of the weights", "fp8")
    if optimizer in PRECISION_AWARE and (precision != "bf16" or not master_weights):
        raise InputError(f"optimizer {optimizer!r} is Megatron-Core's precision-aware Adam (Transformer Engine's "
                         f"FusedAdam beside bf16 weights): it needs precision bf16 with master_weights, got "
                         f"precision {precision!r}, master_weights {master_weights}", "optimizer")
    if not master_weights and conv.get(conventions).mixed_precision == "megatron":
        raise InputError("master_weights=False is not a Megatron-LM optimizer (it always keeps fp32 "
                         "main parameters); use the 'zero' mixed_precision convention", "master_weights")


def bytes_per_parameter(precision: str, conventions=conv.DEFAULT, optimizer: str = "adam",
                        master_weights: bool = True) -> tuple[Expr, Expr, Expr]:
    """``(weights, gradients, optimizer)`` bytes per trainable parameter; see the module
    docstring (a factored second moment is counted apart, by ``factored_elements``).

    >>> bytes_per_parameter("bf16"), bytes_per_parameter("fp32", optimizer="sgd")
    ((2, 2, 12), (4, 4, 4))
    >>> bytes_per_parameter("bf16", optimizer="adam", master_weights=False)
    (2, 2, 4)
    >>> bytes_per_parameter("bf16", optimizer="adam-16bit-master-bf16-moments")
    (2, 2, 6)
    """
    opt = get_optimizer(optimizer)
    full = precision == "fp32"
    state = 4 if (full or master_weights) else 2
    moments = sympify(opt.moments * (state if opt.moment_bytes is None else opt.moment_bytes))
    master = Integer(4) if opt.master_bytes is None else sympify(opt.master_bytes)
    if full:
        return Integer(4), Integer(4), moments
    if not master_weights:
        return Integer(2), Integer(2), moments
    if conv.get(conventions).mixed_precision == "megatron":
        return (Integer(2), Integer(2), master + 4 + moments) if precision == "fp16" else \
            (Integer(2), Integer(4), master + moments)
    return Integer(2), Integer(2), master + moments


def error_feedback_bytes(optimizer: str, d) -> Expr:
    """fp32 bytes per trainable parameter of a compressed optimizer's error feedback over ``d``
    data-parallel ranks (module docstring): ``worker_error``, 4, and ``server_error``, ``4/d``
    (DeepSpeed pads both to a multiple of ``d lcm(d, 8)`` elements, fewer than 4,096 more at
    ``d = 64``: not counted); 0 for other optimizers.

    >>> error_feedback_bytes("onebit-adam", 8), error_feedback_bytes("adam", 8)
    (9/2, 0)
    """
    d = positive_dims(d=d)["d"]
    return 4 + Integer(4) / d if get_optimizer(optimizer).compressed else Integer(0)


def factored_state_bytes(optimizer: str) -> Expr:
    """Bytes of one element of a factored second moment (fp32), 0 for other optimizers."""
    return Integer(4) if get_optimizer(optimizer).factored else Integer(0)
