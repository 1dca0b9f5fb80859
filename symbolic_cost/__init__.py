"""symbolic_cost: the cost of training a transformer as exact SymPy formulas.

>>> from symbolic_cost import mlp
>>> from symbolic_cost.symbols import b, l, e, f
>>> mlp(b, l, e, f).total("flops_fwd").expand().coeff(e * f)
4*b*l
"""

import importlib

_HOMES = {**dict.fromkeys(("Block", "Feedforward", "Heads", "Projections", "Residual", "Run", "Scores", "Wiring",
                           "attention", "mlp", "transformer_layer"), "symbolic_cost.blocks"),
          "Conventions": "symbolic_cost.conventions", "Collective": "symbolic_cost.cost", "Cost": "symbolic_cost.cost"}
"""Where each public name lives: loaded on first use (PEP 562), so that the command line can
answer from its cache (``cli.answers``) without importing SymPy."""


def __getattr__(name):
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    if name in ("conventions", "symbols", "tools"):
        return importlib.import_module(f"symbolic_cost.{name}")
    raise AttributeError(f"module 'symbolic_cost' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_HOMES, "conventions", "symbols", "tools"})


__all__ = ["Block", "Collective", "Conventions", "Cost", "Feedforward", "Heads", "Projections", "Residual", "Run",
           "Scores", "Wiring", "attention", "conventions", "mlp", "symbols", "transformer_layer"]
__version__ = "0.1.0"
