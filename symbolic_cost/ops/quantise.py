"""Quantisation (cast) kernels of a low-precision linear product: memory-bound work its tensor
cores do not do.

Under an FP8 or FP4 recipe (``models.optimizers.FP8_RECIPES``) a product reads quantised
operands, so the 16-bit tensors must be cast first.  Transformer Engine (TE) does it in
separate kernels: a cast-transpose writes both the row-wise copy one product reads and the
column-wise copy the other reads (fprop and wgrad read ``X`` along different axes; dgrad and
wgrad read ``dY`` so).  Per product of input ``X`` (``inputs`` elements) and output gradient
``dY`` (``outputs`` elements), with ``es`` the 16-bit element, ``q`` the quantised bytes per
element (block scales included) and ``r`` the passes over the 16-bit tensor (1; 2 where the
scale comes from the tensor's own absolute maximum, ``amax_pass``: one kernel finds it, the next
casts)::

    mem_fwd = inputs  x (r es + 2 q)        quantise X: read it r times, write two copies
    mem_bwd = outputs x (r es + 2 q)        quantise dY likewise

An input that arrives quantised (TE's ``LayerNormLinear``: the norm before the product writes
its output quantised) costs no forward cast: pass ``inputs = 0``.  The weights are cast once a
step, not per micro-batch (TE caches the quantised weight from the first micro-batch on); their
copies are part of the model state the optimizer step writes (``timing.step.optimizer_time``).
"""

from __future__ import annotations

from symbolic_cost.cost import Cost, exact


def quantise(inputs, outputs, *, es=2, quantised=1, amax_pass=False, name="cast") -> Cost:
    """The cast kernels of one low-precision product (module docstring): ``mem_fwd = inputs (r es
    + 2 q)``, ``mem_bwd = outputs (r es + 2 q)`` with ``r = 2`` under ``amax_pass``, else 1.

    No FLOPs: a scale and a rounding per element are no arithmetic of the model (PyTorch's
    ``FlopCounterMode`` counts none), and the kernel is bound by its traffic.  It keeps nothing:
    the column-wise copy of ``X`` the weight gradient reads is the product's own ``act_buffer``
    (``models.recipes``).

    >>> c = quantise(2048 * 12288, 2048 * 49152)          # delayed FP8: read 2 B, write 1 + 1
    >>> c.mem_fwd == 2048 * 12288 * 4, c.mem_bwd == 2048 * 49152 * 4, c.flops_fwd
    (True, True, 0)
    >>> quantise(10, 20, quantised=1, amax_pass=True).mem_fwd          # current scaling: 10 (2 x 2 + 2)
    60
    """
    inputs, outputs, es, quantised = (exact(v, n) for v, n in
                                      ((inputs, "inputs"), (outputs, "outputs"), (es, "es"), (quantised, "quantised")))
    per_element = (2 if amax_pass else 1) * es + 2 * quantised
    zero = exact(0)
    return Cost(name=name, engine="vector", flops_fwd=zero, flops_bwd=zero,
                act_in=inputs * es, act_in_other=zero, act_out=2 * inputs * quantised, act_buffer=zero,
                weights=zero, weight_grads=zero, act_grads=outputs * (es + 2 * quantised),
                mem_fwd=inputs * per_element, mem_bwd=outputs * per_element)
