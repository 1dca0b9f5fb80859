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
``adafactor``  no first moment (``beta1=0``, Shazeer & Stern 2018's default) and a factored
               second moment: a row and a column accumulator per weight matrix (``r + c``
               fp32 values for an ``r x c`` matrix), the full second moment of every vector;
               the matrices are those of the library's products (``factored_elements``)
``adam-8bit``  two moments of one byte each with an fp32 absolute maximum per block of
               2048 values (Dettmers et al. 2022, block-wise quantisation): ``1 + 4/2048``
               bytes per moment (blocks assumed full)
============== =================================================================================

FP8 recipes (``FP8_RECIPES``, Micikevicius et al. 2022; NVIDIA Transformer Engine): the
matrix products of the transformer layers run in FP8 (E4M3 in forward, E5M2 for gradients
under the ``HYBRID`` format) with one scale per tensor:

============== =================================================================================
``delayed``    Transformer Engine's delayed scaling: parameters stay 16-bit and each product's
               weight also has a cached FP8 copy (1 byte per weight element); the input each
               product keeps for backward is FP8 (1 byte); gradients and optimizer follow the
               precision rule; per product, 3 scaled tensors (input, weight, output gradient)
               each hold a scale, its inverse and an amax history of 1024 values (fp32)
``fp8-params`` the products' weights are kept only in FP8 (``fp8_model_init``, Megatron-LM's
               ``--fp8-param-gather``): 1 byte per weight element, the fp32 master in the
               optimizer (needs master weights); activations and scales as ``delayed``
============== =================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Integer, Rational, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError


@dataclass(frozen=True)
class Optimizer:
    """An optimizer's state: ``moments`` tensors the size of the parameters, of
    ``moment_bytes`` each (``None``: the state precision, fp32 with a master copy), and
    whether it keeps a factored second moment (Adafactor)."""

    name: str
    moments: int
    moment_bytes: Expr | None = None
    factored: bool = False


OPTIMIZERS = {
    "adam": Optimizer("adam", 2),
    "adamw": Optimizer("adamw", 2),
    "sgd": Optimizer("sgd", 1),
    "adafactor": Optimizer("adafactor", 0, factored=True),
    "adam-8bit": Optimizer("adam-8bit", 2, moment_bytes=1 + Rational(4, 2048)),
}


@dataclass(frozen=True)
class Fp8Recipe:
    """Which tensors an FP8 recipe keeps in FP8 (see the module docstring)."""

    name: str
    weight_copy: bool          # a cached FP8 copy beside the 16-bit weight
    primary_weights: bool      # the weight itself is stored in FP8
    amax_history: int = 1024
    scaled_tensors: int = 3    # input, weight, output gradient of each product

    def scale_bytes(self) -> Expr:
        """fp32 bytes of one product's scaling state: ``tensors x (scale, inverse, history)``."""
        return Integer(self.scaled_tensors * (2 + self.amax_history) * 4)


FP8_RECIPES = {
    "delayed": Fp8Recipe("delayed", weight_copy=True, primary_weights=False),
    "fp8-params": Fp8Recipe("fp8-params", weight_copy=False, primary_weights=True),
}


def get_optimizer(name: str) -> Optimizer:
    """The optimizer named ``name``."""
    try:
        return OPTIMIZERS[name]
    except KeyError:
        raise InputError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}") from None


def get_fp8(name: str | None) -> Fp8Recipe | None:
    """The FP8 recipe named ``name`` (``None``: no FP8)."""
    if name is None:
        return None
    try:
        return FP8_RECIPES[name]
    except KeyError:
        raise InputError(f"fp8 must be one of {', '.join(FP8_RECIPES)} or None, got {name!r}") from None


def check_recipe(precision: str, optimizer: str, master_weights: bool, fp8: str | None,
                 conventions=conv.DEFAULT) -> None:
    """Refuse combinations no framework runs, naming the rule."""
    get_optimizer(optimizer)
    recipe = get_fp8(fp8)
    if recipe and precision == "fp32":
        raise InputError("fp8 needs 16-bit training (precision bf16 or fp16): its products' other "
                         "tensors stay 16-bit")
    if recipe and recipe.primary_weights and not master_weights:
        raise InputError("fp8='fp8-params' needs master_weights: the fp32 master is the only high-"
                         "precision copy of the weights")
    if not master_weights and conv.get(conventions).mixed_precision == "megatron":
        raise InputError("master_weights=False is not a Megatron-LM optimizer (it always keeps fp32 "
                         "main parameters); use the 'zero' mixed_precision convention")


def bytes_per_parameter(precision: str, conventions=conv.DEFAULT, optimizer: str = "adam",
                        master_weights: bool = True) -> tuple[Expr, Expr, Expr]:
    """``(weights, gradients, optimizer)`` bytes per trainable parameter; see the module
    docstring (a factored second moment is counted apart, by ``factored_elements``).

    >>> bytes_per_parameter("bf16"), bytes_per_parameter("fp32", optimizer="sgd")
    ((2, 2, 12), (4, 4, 4))
    >>> bytes_per_parameter("bf16", optimizer="adam", master_weights=False)
    (2, 2, 4)
    """
    opt = get_optimizer(optimizer)
    full = precision == "fp32"
    state = 4 if (full or master_weights) else 2
    moments = sympify(opt.moments * (state if opt.moment_bytes is None else opt.moment_bytes))
    if full:
        return Integer(4), Integer(4), moments
    if not master_weights:
        return Integer(2), Integer(2), moments
    if conv.get(conventions).mixed_precision == "megatron":
        return (Integer(2), Integer(2), 4 + 4 + moments) if precision == "fp16" else \
            (Integer(2), Integer(4), 4 + moments)
    return Integer(2), Integer(2), 4 + moments


def factored_state_bytes(optimizer: str) -> Expr:
    """Bytes of one element of a factored second moment (fp32), 0 for other optimizers."""
    return Integer(4) if get_optimizer(optimizer).factored else Integer(0)
