"""Peak memory of one training step: the bytes live on the busiest device at the moments
where one step's memory is highest, as the allocator sees them.

``model_cost`` gives what a device *keeps*: weights, gradients, optimizer state and the
activations autograd saves. The peak is higher, because of short-lived tensors (transients)
that exist only at one point of the step. ``step_timeline`` lists six moments, each the state
that exists then plus that moment's transients:

================== =============================================================================
moment             live bytes
================== =============================================================================
``forward``        state + kept activations + the logits (the head's output, alive while the
                   loss reads them)
``loss backward``  state + kept activations + the loss's gradients (``loss_transient``)
``head backward``  state + kept activations except the loss's + the gradient of the logits +
                   the head's weight gradients (a tied word table's included) + the gradient of
                   the head's input
``recomputed       state + kept activations except the head's + what the recomputation of the
backward``         last checkpointed unit rebuilds (``recompute_transient``); without
                   recomputation it is below the forward's
``embedding         state + all gradients (activations freed) + the word table's gradient being
backward``         accumulated (``embedding_transient``)
``optimizer step`` state + all gradients + the optimizer's temporaries (``optimizer_temporaries``)
================== =============================================================================

State is weights and optimizer state; the gradients are part of it all step long under
``gradient_lifetime="buffer"`` (Megatron-LM's contiguous gradient buffer, the default), and
under ``"step"`` they appear during backward (PyTorch with ``zero_grad(set_to_none=True)``,
its default since 2.0): then the first three moments have only the head's. PyTorch's DDP
adds its reduce buckets, a second copy of the gradients (``bucket_bytes``); ZeRO-3 adds
``GATHERED_LAYERS`` layers' gathered weights to every moment (``gather_bytes``); without
resharding after forward (``Training.reshard_after_forward=False``) every layer of the stage
is gathered in the first three moments instead, and none in the last two.

``peak_bytes`` is the largest; with numbers ``peak_moment`` names where it falls.

The moments follow one micro-batch through the busiest rank. Where the pipeline's ranks are
enumerated (uneven stages, a pipeline layout; numbers), each rank's moments are its own (its
state, its kept activations, the head's transients on the last rank, the embedding's on the
first) and the peak is the largest rank's (``peak_rank``). Otherwise (an even split, closed form
in ``p``) each category is its busiest rank's: the kept activations the first stage's while the
loss is on the last, so the loss and head moments are an upper bound there.

Left out by default, because they are not tensors of the model: the CUDA context, NCCL's
buffers, cuBLAS's workspace and the caching allocator's fragmentation (``models.overheads``:
named, with their sources; ``largest_micro_batch`` takes them).

Checked against a step of PyTorch eager (``tests/test_peak_memory.py``): live storage bytes
measured over forward, backward and ``AdamW.step`` of small ``transformers`` models on the CPU
equal ``peak_bytes`` under the ``pytorch-eager`` preset, plus the bookkeeping terms named there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Eq, Expr, Integer, Piecewise, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError, count, exact, instance
from symbolic_cost.models.architecture import MADE_BY, Architecture
from symbolic_cost.extrema import maximum, minimum
from symbolic_cost.models.overheads import OVERHEADS, Overheads, get_overheads  # noqa: F401 (Overheads: its old home)
from symbolic_cost.models.memory import rebuilt_bytes
from symbolic_cost.models.ranks import cost_placement, layer_input_bytes, layer_tokens_bytes, rank_activation_bytes
from symbolic_cost.models.training import TRAINING_MADE_BY, Training, element_bytes
from symbolic_cost.models.whole_model import model_cost_of

GATHERED_LAYERS = 2
"""Layers whose ZeRO-3 weights are gathered at once: the one computing and the next one,
prefetched (FSDP's default ``forward_prefetch``/``BACKWARD_PRE`` of one module; DeepSpeed's
prefetch bucket holds at least the next layer)."""

OPTIMIZER_FP32 = 4
"""Bytes per element of the tensors an optimizer step works on (fp32 master weights/states)."""

MOMENTS = ("forward", "loss backward", "head backward", "recomputed backward", "embedding backward",
           "optimizer step")


@dataclass(frozen=True)
class Moment:
    """One moment of a step: its name and the bytes live on the busiest device then."""

    name: str
    bytes: Expr


def _row(block, name):
    return block[name] if name in block.names else None


def loss_transient(cost, conventions=conv.DEFAULT) -> Expr:
    """Bytes the loss's backward adds to what is kept, for logits ``Z`` of ``n`` elements per
    device (``b l v/m1``) in the activations' element size ``es`` and a loss computed in
    ``es_loss`` (``loss_precision``):

    * ``"in-place"`` (Megatron-LM's ``_VocabParallelCrossEntropy``: the backward writes the
      gradient into the saved fp32 softmax, then casts it to the logits' type): ``n es``;
    * ``"eager"`` (``log_softmax`` + ``nll_loss``): the gradient of the log-probabilities and
      that of the logits, ``2 n es_loss``, while the model's output still holds ``Z``, ``n es``.

    0 without a language-model loss."""
    cost, conventions = model_cost_of(cost), conv.get(conventions)
    loss, head = _row(cost.head, "loss"), _row(cost.head, "lm_head")
    if loss is None or head is None:
        return Integer(0)
    if conventions.loss_backward == "in-place":
        return head.act_out
    return head.act_out + 2 * loss.act_in


def head_transient(cost, conventions=conv.DEFAULT) -> Expr:
    """Bytes the head's backward adds to what is kept: the gradient of the logits
    (``n es``) and of the head's input (``b l e es``), less the loss's kept tensor, freed once
    its backward ran; under ``"eager"`` the model's output still holds the logits (``n es``);
    under ``gradient_lifetime="step"`` the head's weight gradients (a tied word table's too)
    are made here. 0 without a language-model loss."""
    cost, conventions = model_cost_of(cost), conv.get(conventions)
    loss, head = _row(cost.head, "loss"), _row(cost.head, "lm_head")
    if loss is None or head is None:
        return Integer(0)
    held = head.act_out if conventions.loss_backward == "eager" else Integer(0)
    made = head.weight_grads + _tied_table(cost) if conventions.gradient_lifetime == "step" else Integer(0)
    return held + head.act_out - loss.act_buffer + head.act_in + made


def recompute_transient(cost, conventions=conv.DEFAULT, holds_head=None) -> Expr:
    """Bytes the backward of the last checkpointed unit adds to what is kept, once its forward
    has run again: what the recomputation rebuilds (``models.memory.rebuilt_bytes``, the largest
    of the layer groups) and the gradient of the unit's output (``b l/s1 e`` elements, as the
    head's backward left it), less the head's kept activations where the head is on this device
    (one stage: its backward ran first and freed them; with a pipeline the busiest rank is taken
    as keeping them, an upper bound; ``holds_head``: whether this rank holds the head, where the
    ranks are told apart).  Under ``gradient_lifetime="step"`` the head's weight
    gradients made before count too, and under ``loss_backward="eager"`` the logits the model's
    output holds.  0 without recomputation.

    This is the peak of a long sequence under full recomputation: the checkpoints are a layer's
    input each, but the layer recomputed before its backward holds everything it saves, the
    attention scores of ``b h l^2`` elements included when attention is not fused.  Under the block
    method the layers of a chunk past its first ``recompute_layers`` keep everything and run their
    backward first: they are freed by then, their weight gradients made (``_kept_whole_and_freed``)."""
    cost, conventions = model_cost_of(cost), conv.get(conventions)
    t = cost.training
    if t.recomputation.mode == "none":
        return Integer(0)
    tokens_bytes = layer_tokens_bytes(cost)
    rebuilt = maximum(*(rebuilt_bytes(blk, t, layer_input_bytes(blk, tokens_bytes, t.l))
                        for blk, _ in cost.stack[1:-1]))
    rebuilt -= _kept_whole_and_freed(cost, conventions)
    p = exact(t.p, "p")
    head = cost.head.total("act_buffer")
    if holds_head is None:      # one stage holds the head; with a pipeline the busiest rank is taken to keep it
        freed = head if p == 1 else (Integer(0) if p.is_number else Piecewise((head, Eq(p, 1)), (0, True)))
    else:
        freed = head if holds_head else Integer(0)
    lm_head, also = _row(cost.head, "lm_head"), Integer(0)
    if lm_head is not None and conventions.loss_backward == "eager" and holds_head is not False:
        also += lm_head.act_out
    if conventions.gradient_lifetime == "step" and holds_head is not False:
        also += cost.head.total("weight_grads") + _tied_table(cost)
    return rebuilt + tokens_bytes - freed + also


def _kept_whole_and_freed(cost, conventions) -> Expr:
    """Under full recomputation's block method, the bytes one micro-batch keeps in the layers of a
    model chunk that are not recomputed (those past its first ``recompute_layers``, every row's
    ``act_buffer``): their backward runs before the chunk's checkpointed layers are redone, so
    they are freed at that moment, less the weight gradients that backward made where they are
    made in backward (``gradient_lifetime="step"``).  The least over the chunks of the ranks
    that can be the busiest (an even split: a rank's share over its ``v`` chunks); 0 otherwise."""
    t = cost.training
    if t.recompute != "full" or t.recompute_method != "block":
        return Integer(0)
    step = conventions.gradient_lifetime == "step"
    whole = [blk.total("act_buffer") - (blk.total("weight_grads") if step else 0) for blk, _ in cost.stack[1:-1]]
    place = cost_placement(cost)
    kept = lambda counts, redone: sum((w * (c - r) for w, c, r in zip(whole, counts, redone)), Integer(0))  # noqa: E731
    if place.rows is None:
        return kept(place.counts(0), place.redone(0)) / exact(t.virtual_stages, "virtual_stages")
    return minimum(*(kept(counts, redone) for rank, *_ in place.rows
                     for counts, redone in zip(place.chunks[rank], place.chunk_redone(rank))))


def embedding_transient(cost, conventions=conv.DEFAULT) -> Expr:
    """Bytes the word embedding's backward adds, last in backward, to the state and every
    gradient: under ``gradient_lifetime="buffer"`` the lookup's dense gradient of the table
    (``v/m1 x e``), made before it is added into the buffer; under ``"step"`` with a tied head,
    that gradient and its sum with the head's (autograd's ``AccumulateGrad`` adds out of
    place), two tables, and none untied (the new gradient becomes ``.grad``).  Under
    ``loss_backward="eager"`` the model's output still holds the logits."""
    conventions = conv.get(conventions)
    table = _row(cost.embedding, "word_embeddings")
    head = _row(cost.head, "lm_head")
    held = head.act_out if head is not None and conventions.loss_backward == "eager" else Integer(0)
    if table is None:
        return held
    if conventions.gradient_lifetime == "buffer":
        return held + table.weights
    return held + (2 * table.weights if sympify(_tied_table(cost)) != 0 else Integer(0))


def optimizer_temporaries(cost, conventions=conv.DEFAULT) -> Expr:
    """Bytes an optimizer step allocates and frees: 0 under ``"fused"`` (Apex's and Transformer
    Engine's ``FusedAdam``, Megatron-LM's: one multi-tensor kernel updates in place); under
    ``"single-tensor"`` (``torch.optim.AdamW(foreach=False)``) ``exp_avg_sq.sqrt()`` and its
    division by the bias correction are two fp32 tensors the size of the parameter, so the
    largest parameter tensor sets it: ``2 x 4 x`` its elements, taken as the largest row's
    weights.  Measured (``tests/test_peak_memory.py``), the loop also still holds the previous
    parameter's ``denom``, left out here; a row's bias counts with its matrix and a fused row
    (``qkv_proj``, a gated ``fc1``) as one tensor, so that the estimate was above the measured
    step, by at most 0.2 %, in the cases tested."""
    conventions = conv.get(conventions)
    if conventions.optimizer_step == "fused":
        return Integer(0)
    es = element_bytes(cost.training.precision)
    largest = maximum(*(row.weights for blk, _ in cost.stack for row in blk)) / es
    return 2 * OPTIMIZER_FP32 * largest


def gather_bytes(cost, kept: bool = False) -> Expr:
    """ZeRO-3/FSDP's gathered (unsharded) weights on this tensor rank, in the weights' element
    size, at a moment while the activations are ``kept`` (forward, loss, head) or after they
    are freed; 0 below ZeRO-3.  The shard group (``Training.shard``, HSDP) does not change them:
    every rank gathers whole layers.

    * ``reshard_after_forward=True`` (FSDP2's default, DeepSpeed's ZeRO-3): each layer's weights
      are freed after its forward and gathered again in backward, so ``GATHERED_LAYERS`` of the
      largest layer (the one computing and the next, prefetched) at any moment, kept or not;
    * ``reshard_after_forward=False``: a layer gathered in forward stays gathered until its
      backward has run, so while the activations are kept every layer of the busiest stage
      is (``sum count x layer weights``, the most a stage holds), and none after backward.

    The ends (embedding, head) are left out, as their gathered tables are."""
    t = cost.training
    if t.zero != 3:
        return Integer(0)
    layers = [blk.total("weights") for blk, _ in cost.stack[1:-1]]
    if t.reshard_after_forward:
        return GATHERED_LAYERS * maximum(*layers)
    if not kept:
        return Integer(0)
    return cost_placement(cost).busiest(Integer(0), Integer(0), layers)


def bucket_bytes(cost, conventions=conv.DEFAULT) -> Expr:
    """Bytes of the data-parallel gradient-reduce buckets beyond the gradients, live all step.

    * ``gradient_lifetime="buffer"`` (Megatron-LM's ``DistributedDataParallel``): 0.  Its buckets
      (``bucket_size``, by default ``max(40,000,000, 1,000,000 x dp)`` parameters,
      ``distributed_data_parallel_config.py``) are views of the contiguous gradient buffer, and
      the reduce-scatter or all-reduce of a bucket works in place;
    * ``"step"`` (``torch.nn.parallel.DistributedDataParallel`` with ``d > 1`` below ZeRO-2): the
      reducer allocates, when the model is wrapped, flat buckets (``bucket_cap_mb`` 25 MiB, the
      first 1 MiB) that together hold every gradient, and with ``gradient_as_bucket_view=False``,
      its default, the ``.grad`` tensors are separate: the buckets are the gradients' bytes again
      (PyTorch's documentation of ``gradient_as_bucket_view``: setting it saves "the total
      gradients size").  The bucket sizes set how many reduces there are, not the bytes.

    With one replica, or under ZeRO-2/3 (sharded gradients, their own reduce), 0."""
    t = cost.training
    if conv.get(conventions).gradient_lifetime == "buffer" or sympify(t.d) == 1 or t.zero >= 2:
        return Integer(0)
    return cost.gradient_bytes


def step_terms(cost, conventions=conv.DEFAULT) -> tuple:
    """``(state, kept, made, during, after)``: the state all step long, the kept activations, the
    gradients backward makes, and the transients of the moments while activations are kept
    (forward, loss, head, a recomputed layer's backward) and after they are freed (embedding,
    optimizer), in ``MOMENTS`` order, on the busiest device.  Where the pipeline's ranks are
    enumerated (uneven stages, a layout; numbers only), that is the rank whose peak is the
    largest, each rank with its own state, activations and ends (``_rank_terms``); otherwise
    each category is its busiest rank's, the ends' transients included: a bound."""
    cost, c = model_cost_of(cost), conv.get(conventions)
    ranked = _ranked_terms(cost, c)
    rank = _largest(ranked)
    return ranked[rank] if rank is not None else _busiest_terms(cost, c)


def _busiest_terms(cost, c) -> tuple:
    """``step_terms`` with each category its busiest rank's, both ends' transients on it."""
    return _terms(cost, c, cost.activation_bytes, True, True, None)


def _terms(cost, c, kept, first, last, holds_head) -> tuple:
    """``step_terms`` of a device holding ``cost``'s state and ``kept`` activations, the
    embedding's transients if it is the ``first`` rank and the head's if the ``last``."""
    buffer = c.gradient_lifetime == "buffer"
    state = (cost.weight_bytes + cost.optimizer_bytes + gather_bytes(cost) + bucket_bytes(cost, c)
             + (cost.gradient_bytes if buffer else 0))
    made = Integer(0) if buffer else cost.gradient_bytes        # the gradients backward made
    head = _row(cost.head, "lm_head")
    logits = head.act_out if head is not None and last else Integer(0)
    ends = (loss_transient(cost, c), head_transient(cost, c)) if last else (Integer(0), Integer(0))
    held = gather_bytes(cost, kept=True) - gather_bytes(cost)   # layers gathered from forward to backward
    during = tuple(held + x for x in (logits, *ends, recompute_transient(cost, c, holds_head)))
    after = (embedding_transient(cost, c) if first else Integer(0), optimizer_temporaries(cost, c))
    return state, kept, made, during, after


def peak_rank(cost, conventions=conv.DEFAULT) -> int | None:
    """The pipeline rank whose peak ``step_terms`` takes where the ranks are enumerated and every
    size is a number (the lowest of equals), else ``None``: each category is then its busiest
    rank's."""
    cost, c = model_cost_of(cost), conv.get(conventions)
    return _largest(_ranked_terms(cost, c))


def _ranked_terms(cost, c) -> dict:
    """``{rank: its step_terms}`` of the ranks that can be the busiest where the placement
    enumerates them (``Placement.rows``, a number ``p``; not DualPipe's paired stages), else ``{}``."""
    p, place = exact(cost.training.p, "p"), cost_placement(cost)
    if not p.is_number or p == 1 or place.rows is None or cost.training.schedule == "dualpipe":
        return {}
    return {rank: _rank_terms(cost, c, rank, first, last) for rank, first, last, _ in place.rows}


def _largest(ranked: dict) -> int | None:
    """The rank of ``ranked`` whose peak is the largest (the lowest of equals) where every peak is
    a number, else ``None``."""
    peaks = {rank: sympify(_peak_of(*terms)) for rank, terms in ranked.items()}
    if not peaks or not all(peak.is_number for peak in peaks.values()):
        return None
    return max(peaks, key=lambda rank: (peaks[rank], -rank))


def _rank_terms(cost, c, rank, first, last) -> tuple:
    """``step_terms`` of pipeline rank ``rank``: its own weights, gradients and optimizer state
    (``totals.rank_state_bytes``) and kept activations (``ranks.rank_activation_bytes``), the
    head's transients on the last rank only, the embedding's on the first."""
    from symbolic_cost.models.totals import rank_state_bytes    # totals builds on this module's callers
    states = rank_state_bytes(cost, rank)
    own = replace(cost, **{k: states[k] for k in ("weight_bytes", "gradient_bytes", "optimizer_bytes")})
    return _terms(own, c, rank_activation_bytes(cost, rank), first, last, last)


def _peak_of(state, kept, made, during, after) -> Expr:
    """The largest moment of ``step_terms``: ``state + Max(kept + Max(during), made + Max(after))``."""
    return state + maximum(kept + maximum(*during), made + maximum(*after))


def step_timeline(cost, conventions=conv.DEFAULT) -> tuple[Moment, ...]:
    """The ``MOMENTS`` of one step on the busiest device (see the module docstring).

    >>> from symbolic_cost.models import Training, model_cost
    >>> from symbolic_cost.models.config import preset
    >>> cost = model_cost(preset("gpt2"), Training(b=8, l=1024))
    >>> [m.name for m in step_timeline(cost)]
    ['forward', 'loss backward', 'head backward', 'recomputed backward', 'embedding backward', 'optimizer step']
    """
    state, kept, made, during, after = step_terms(cost, conventions)
    values = [state + kept + t for t in during] + [state + made + t for t in after]
    return tuple(Moment(name, value) for name, value in zip(MOMENTS, values))


def _tied_table(cost) -> Expr:
    """The word table a tied head's backward accumulates into (its bytes), else 0."""
    if not (cost.architecture.tied and cost.architecture.lm_head):
        return Integer(0)
    return cost.embedding["word_embeddings"].weights


def peak_bytes(cost, conventions=conv.DEFAULT) -> Expr:
    """The largest moment of ``step_timeline``: the step's peak on the busiest device, written
    ``state + Max(kept + Max(during), made + Max(after))`` so that the large terms appear once,
    with ``extrema.maximum`` (SymPy's ``Max`` would try to order the moments by their
    assumptions, seconds per model in a search).  Where the pipeline's ranks are enumerated and a
    size is a symbol (a search's layouts of uneven stages), the largest of the ranks' own peaks."""
    cost, c = model_cost_of(cost), conv.get(conventions)
    ranked = _ranked_terms(cost, c)
    if ranked:          # with numbers, the largest rank's, step_timeline's; with symbols, a Max of them
        return maximum(*(_peak_of(*terms) for terms in ranked.values()))
    return _peak_of(*_busiest_terms(cost, c))


def peak_moment(cost, conventions=conv.DEFAULT) -> Moment:
    """The moment at which the peak falls (the first of equals); needs numbers."""
    moments = step_timeline(cost, conventions)
    values = [sympify(m.bytes) for m in moments]
    if not all(v.is_number for v in values):
        raise InputError("peak_moment needs numbers for every symbol; peak_bytes gives the formula", "cost")
    return moments[max(range(len(values)), key=lambda i: (values[i], -i))]


def largest_micro_batch(arch, training, capacity, conventions=conv.DEFAULT, limit: int | None = None,
                        overheads=OVERHEADS["none"]) -> int:
    """The largest micro-batch ``b`` (sequences) whose step peak fits ``capacity`` bytes with
    everything else in ``training`` unchanged, less the device's ``overheads``
    (``models.overheads``; none by default); 0 when not even one sequence fits.  The peak
    grows with ``b`` (kept activations and transients are per sequence; the state is not).

    The peak is nearly always affine in ``b``: the peaks at ``b = 1, 2`` give a guess ``n``, kept
    where builds show ``n`` fits and ``n + 1`` does not (four builds with numbers cost a tenth
    of one with ``b`` a symbol); else a bisection on the formula in ``b``, between 1 and the first
    power of two that does not fit.  ``limit``: the largest answer wanted (``None``: none; a peak
    that does not grow with ``b`` fits every ``b``, and then ``MAX_MICRO_BATCH`` is the answer).

    >>> from symbolic_cost.models import Training
    >>> from symbolic_cost.models.config import preset
    >>> from symbolic_cost.models import model_cost
    >>> n = largest_micro_batch(preset("gpt2"), Training(l=1024), 80 * 10**9)
    >>> peak = lambda b: peak_bytes(model_cost(preset("gpt2"), Training(b=b, l=1024)))
    >>> n > 1 and peak(n) <= 80 * 10**9 < peak(n + 1)
    True
    """
    instance(arch, Architecture, "arch", MADE_BY)
    instance(training, Training, "training", TRAINING_MADE_BY)
    capacity = exact(capacity, "capacity")
    if not (capacity.is_number and capacity > 0):
        raise InputError(f"capacity must be a positive number of bytes, got {capacity}", "capacity")
    capacity = get_overheads(overheads).room(capacity)
    if limit is not None:
        limit = count(limit, "limit")
    left = sorted(str(s) for s in _peak_at(arch, training, conventions, 1).free_symbols)
    if left:
        raise InputError(f"largest_micro_batch needs every size but b as a number: the peak still holds "
                         f"{', '.join(left)}", "training")
    guess = _affine_guess(arch, training, capacity, conventions, limit)
    return guess if guess is not None else _bisection(arch, training, capacity, conventions, limit)


MAX_MICRO_BATCH = 2**53
"""The largest micro-batch ``largest_micro_batch`` tells (a double counts every sequence up to it)."""


def _peak_at(arch, training, conventions, n):
    from symbolic_cost.models.totals import model_cost   # totals builds on this module's callers
    return sympify(peak_bytes(model_cost(arch, replace(training, b=n), conventions), conventions))


def _affine_guess(arch, training, capacity, conventions, limit):
    """``largest_micro_batch`` from the peaks at ``b = 1, 2`` extended as a line, where builds at the
    guess and one past it confirm it; ``None`` where they do not (or a build needs a symbol)."""
    try:
        fits = lambda n: bool(_peak_at(arch, training, conventions, n) <= capacity)  # noqa: E731
        one, two = (_peak_at(arch, training, conventions, n) for n in (1, 2))
        if not (one.is_number and two.is_number):
            return None
        if one > capacity:
            return 0
        if two <= one:
            return None
        n = min(limit or MAX_MICRO_BATCH, 1 + int((capacity - one) // (two - one)))
        if n == 1:
            return 1 if two > capacity else None
        return n if fits(n) and (n == (limit or MAX_MICRO_BATCH) or not fits(n + 1)) else None
    except InputError:          # a rule that refuses one of these sizes: the bisection decides
        return None


def _bisection(arch, training, capacity, conventions, limit) -> int:
    from symbolic_cost.models.totals import model_cost
    from symbolic_cost.symbols import b as batch
    formula = peak_bytes(model_cost(arch, replace(training, b=batch), conventions), conventions)
    fits = lambda n: bool(formula.subs(batch, n) <= capacity)  # noqa: E731
    if not fits(1):
        return 0
    low, high = 1, 2
    while fits(high):                           # the first power of two past the answer
        if high >= (limit or MAX_MICRO_BATCH):
            return limit or MAX_MICRO_BATCH
        low, high = high, 2 * high
    while high - low > 1:                       # fits(low), not fits(high)
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low
