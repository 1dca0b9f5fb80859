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


def dynamic_casts(forward, backward, *, es=2, quantised=1, amax_pass=True, name="cast") -> Cost:
    """torchao's casts of one product (``Float8Linear``): ``forward`` and ``backward`` are the
    elements cast in each pass, every cast of ``n`` elements reading its 16-bit tensor ``r`` times
    and writing one quantised copy: ``mem = n (r es + q)``, ``r = 2`` under ``amax_pass`` (one
    kernel reduces the scale, a tensor's or a row's, the next casts; torch.compile's fusion of
    each cast, and none across casts).

    torchao's ``matmul_with_hp_or_float8_args`` casts where each product reads: forward, the input
    ``X`` and the weight ``W``; backward, the output gradient ``dY`` twice (one copy scaled along
    each axis, for the input's and the weight's gradients), ``W`` again and the saved 16-bit ``X``.
    Unlike ``quantise`` nothing is cached from one micro-batch to the next.  The per-row scales of
    a row-wise recipe (one fp32 a row) are not counted.

    >>> c = dynamic_casts(10 + 6, 2 * 20 + 6 + 10)          # X 10, W 6, dY 20 elements
    >>> c.mem_fwd, c.mem_bwd, c.act_out                    # 16 (2 x 2 + 1), 56 (2 x 2 + 1)
    (80, 280, 16)
    """
    forward, backward, es, quantised = (exact(v, n) for v, n in
                                        ((forward, "forward"), (backward, "backward"), (es, "es"),
                                         (quantised, "quantised")))
    per_element = (2 if amax_pass else 1) * es + quantised
    zero = exact(0)
    return Cost(name=name, engine="vector", flops_fwd=zero, flops_bwd=zero,
                act_in=forward * es, act_in_other=zero, act_out=forward * quantised, act_buffer=zero,
                weights=zero, weight_grads=zero, act_grads=backward * (es + quantised),
                mem_fwd=forward * per_element, mem_bwd=backward * per_element)
