"""Normalisation layers.

Layer-norm counts (9 FLOPs per element forward, ``13n - 4bl`` backward) are
the LBNL 2024 primitives' (arXiv 2410.00273); the stored statistics follow
their later fix (commit 5a89ee8) unless ``layer_norm_keeps_stats`` is off.
"""

from __future__ import annotations

from functools import partial

from symbolic_cost import conventions as conv
from symbolic_cost.cost import Cost, exact, make_cost


def layer_norm(b, l, e, *, weight=True, bias=True, es=2, conventions=conv.DEFAULT, name="layer_norm") -> Cost:
    """Layer norm over the last axis of ``X (b, l, e)`` with ``gamma, beta (e)``.

    Per element (``n = b*l*e``), forward: mean 2, variance 3, normalise 2,
    affine 2, so ``9n`` FLOPs.  Backward: ``dgamma``/``dbeta`` 4 per element,
    ``dX`` 5 per element plus ``4(e - 1)`` adds per row for its two row sums,
    so ``13n - 4*b*l``.  Keeps ``X`` and, by default, the per-row mean and
    ``1/std`` (``2*b*l`` elements, ``layer_norm_keeps_stats``).  Without a
    ``bias`` (``beta``) its add and its gradient go (``-n`` forward, ``-2n``
    backward); without a ``weight`` (``gamma``) its multiply, its gradient and
    its multiply inside ``dX`` go (``-n``, ``-3n``).

    Split of the backward: the weight gradients are ``dgamma`` ``2n`` (``dY * x_hat``
    and the sum over tokens) and ``dbeta`` ``2n``, ``flops_wgrad = 4n`` (``2n`` with
    only one of them, 0 with neither); the activation gradient ``dX`` is the rest,
    ``4n + 4*b*l*(e - 1)`` plus ``n`` for the multiply by ``gamma``: ``5n + 4*b*l*(e - 1)``.

    >>> from symbolic_cost.symbols import b, l, e
    >>> layer_norm(b, l, e).flops_bwd.expand()
    13*b*e*l - 4*b*l
    >>> layer_norm(b, l, e).flops_wgrad
    4*b*e*l
    >>> layer_norm(b, l, e, weight=False, bias=False).weights
    0
    """
    b, l, e, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (e, "e"), (es, "es")))
    conventions = conv.get(conventions)
    n = b * l * e
    stats = 2 * b * l * es if conventions.layer_norm_keeps_stats else 0
    params = (int(bool(weight)) + int(bool(bias))) * e * es
    return _norm_cost(
        name, conventions, flops_fwd=7 * n + (n if weight else 0) + (n if bias else 0),
        flops_bwd=4 * n + 4 * b * l * (e - 1) + (3 * n if weight else 0) + (2 * n if bias else 0),
        flops_wgrad=(2 * n if weight else 0) + (2 * n if bias else 0),
        act_in=n * es, act_in_other=stats, act_out=n * es, act_buffer=n * es + stats,
        weights=params, act_grads=2 * n * es)


def rms_norm(b, l, e, *, weight=True, es=2, conventions=conv.DEFAULT, name="rms_norm") -> Cost:
    """RMS norm over the last axis of ``X (b, l, e)`` with a gain ``g (e)`` (LLaMA).

    ``n = b*l*e``, ``r = b*l`` rows.  Forward: square ``n``, row sums
    ``r(e-1)``, mean and reciprocal root ``2r``, normalise ``n``, gain ``n``:
    ``3n + r(e+1)``.  Backward: ``dg`` (multiply and sum over tokens) ``2n``;
    ``dX = rstd (g dY - x_hat mean(g dY x_hat))``: ``5n + r(e-1)``.  Keeps ``X``
    and, by default, ``1/rms`` per row.  Without a ``weight`` (gain) its multiply,
    its gradient and its multiply inside ``dX`` go (``-n`` forward, ``-3n`` backward).

    Split of the backward: the weight gradient ``dg`` is ``flops_wgrad = 2n`` (0 without a
    gain); the activation gradient ``dX`` is the ``5n + r(e-1)`` above (``4n + r(e-1)``
    without a gain, whose multiply ``g dY`` goes).

    >>> from symbolic_cost.symbols import b, l, e
    >>> rms_norm(b, l, e).flops_wgrad, rms_norm(b, l, e).flops_agrad.expand()
    (2*b*e*l, 6*b*e*l - b*l)
    """
    b, l, e, es = (exact(v, n) for v, n in ((b, "b"), (l, "l"), (e, "e"), (es, "es")))
    conventions = conv.get(conventions)
    n, rows = b * l * e, b * l
    stats = rows * es if conventions.layer_norm_keeps_stats else 0
    gain = e * es if weight else 0
    return _norm_cost(
        name, conventions, flops_fwd=2 * n + rows * (e + 1) + (n if weight else 0),
        flops_bwd=4 * n + rows * (e - 1) + (3 * n if weight else 0),
        flops_wgrad=2 * n if weight else 0,
        act_in=n * es, act_in_other=stats, act_out=n * es, act_buffer=n * es + stats,
        weights=gain, act_grads=2 * n * es)


def _norm_cost(name, conventions, **fields) -> Cost:
    """``make_cost`` for a norm, whose backward reads its gain (and shift) as every operation reads
    its weights, unless ``conventions.layer_norm_bwd_reads_weights`` is false (a named preset's
    count: ``named_conventions``)."""
    cost = make_cost(name, "vector", **fields)
    return cost if conventions.layer_norm_bwd_reads_weights else cost.plus(mem_bwd=-cost.weights)


NORMS = {"layer": layer_norm, "layer_nobias": partial(layer_norm, bias=False),
         "layer_noaffine": partial(layer_norm, weight=False, bias=False),
         "rms": rms_norm, "rms_noaffine": partial(rms_norm, weight=False)}
"""Norm kinds by name: layer norm with ``gamma`` and ``beta``, without ``beta`` (bias-free), without
either (OLMo, OPT's ``layer_norm_elementwise_affine=False``); RMS norm with a gain or without one."""
