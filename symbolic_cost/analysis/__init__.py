"""Scaling analysis of the formulas (leading terms, derivatives, elasticities, crossovers,
optima: ``scaling``); their typesetting is ``symbolic_cost.latex``."""

from symbolic_cost.analysis.scaling import (MAX_CANDIDATES, Optimum, crossover, derivative, elasticity,
                                            leading_terms, limit, optimum, share, smooth_at, valid_values)

__all__ = ["Optimum", "crossover", "derivative", "elasticity", "leading_terms", "limit", "optimum", "share",
           "smooth_at", "valid_values", "MAX_CANDIDATES"]
