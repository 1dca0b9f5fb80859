"""symbolic_cost: the cost of training a transformer as exact SymPy formulas.

>>> from symbolic_cost import mlp
>>> from symbolic_cost.symbols import b, l, e, f
>>> mlp(b, l, e, f).total("flops_fwd").expand().coeff(e * f)
4*b*l
"""

import importlib
import os
import sys

SYMPY_CACHE_SIZE = "32768"
"""Entries of each of SymPy's caches (its ``SYMPY_CACHE_SIZE``, 1,000 by default) where the
environment sets none and SymPy is not yet imported.  A search builds the same sums and
products again for every variant and layout kind; at 1,000 the constructors' cache forgets
them, and equal trees built apart are compared node by node wherever they meet.  A large
search keeps some 16,000 entries in ``Add`` and ``Mul``'s cache, so the larger cache spares that
work at no cost in peak memory (``benchmarks/bench.py`` measures the search)."""
if "sympy" not in sys.modules:
    os.environ.setdefault("SYMPY_CACHE_SIZE", SYMPY_CACHE_SIZE)

REPORT = "this is a bug in symbolic_cost, not in your input: please report it with the command line"
"""Where an unexpected internal error asks to be reported (the command line's and the page's);
here, where reading it imports nothing (the command line answers from its cache without SymPy)."""

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
