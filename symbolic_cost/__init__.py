"""symbolic_cost: the cost of training a transformer as exact SymPy formulas.

>>> from symbolic_cost import mlp
>>> from symbolic_cost.symbols import b, l, e, f
>>> mlp(b, l, e, f).total("flops_fwd").expand().coeff(e * f)
4*b*l
"""

from symbolic_cost import conventions
from symbolic_cost import symbols
from symbolic_cost.blocks import (Block, Feedforward, Heads, Projections, Residual, Run, Scores, Wiring, attention,
                                  mlp, transformer_layer)
from symbolic_cost.conventions import Conventions
from symbolic_cost.cost import Collective, Cost
from symbolic_cost import tools  # noqa: F401  (registers every tool's conventions preset)

__all__ = ["Block", "Collective", "Conventions", "Cost", "Feedforward", "Heads", "Projections", "Residual", "Run",
           "Scores", "Wiring", "attention", "conventions", "mlp", "symbols", "transformer_layer"]
__version__ = "0.1.0"
