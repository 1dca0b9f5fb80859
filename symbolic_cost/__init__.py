"""symbolic_cost: the cost of training a transformer as exact SymPy formulas.

>>> from symbolic_cost import mlp
>>> from symbolic_cost.symbols import b, l, e, f
>>> mlp(b, l, e, f).total("flops_fwd").expand().coeff(e * f)
4*b*l
"""

from . import conventions, symbols
from .blocks import Block, attention, mlp, transformer_layer
from .conventions import Conventions
from .cost import Collective, Cost

__all__ = ["Block", "Collective", "Conventions", "Cost", "attention", "conventions", "mlp", "symbols",
           "transformer_layer"]
__version__ = "0.1.0"
