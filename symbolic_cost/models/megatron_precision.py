"""The precision a Megatron run trains in, as ``Training`` fields: the low-precision recipe
and the layers it leaves in 16-bit, from Megatron-LM's arguments (``megatron_low_precision``, the
table of ``models.megatron_args``) and from Megatron-Bridge's ``mixed_precision`` section, with the
``optimizer`` and ``ddp`` keys that decide the state (``precision``, the table of
``models.megatron_bridge``).
"""

from __future__ import annotations

from symbolic_cost.checks import InputError
from symbolic_cost.models.megatron_bridge_keys import FP4_PARAMS, Container
from symbolic_cost.models.megatron_words import Options

PRECISION_RECIPES = {"bf16_mixed": "bf16", "fp16_mixed": "fp16"}
"""``mixed_precision`` given by a recipe name (Megatron-Bridge's ``mixed_precision`` presets)."""


PARAM_RECIPES = {"delayed": "fp8-params", "tensorwise": "tensorwise-params", "mxfp8": "mxfp8-params"}
"""A recipe with its weights stored in FP8 and gathered so (Megatron-Core's ``fp8_param_gather``,
``fp8_model_init``), by the recipe it scales with (``models.optimizers.FP8_RECIPES``)."""


def precision(c: Container) -> dict:
    """``precision``, ``fp8`` and ``distributed_optimizer`` of ``mixed_precision``, ``ddp`` and ``optimizer``."""
    mixed = c.data.get("mixed_precision")
    if isinstance(mixed, str):
        if mixed not in PRECISION_RECIPES:
            raise InputError(f"mixed_precision {mixed!r}: the reader reads {', '.join(PRECISION_RECIPES)} by name",
                             "mixed_precision")
        policy = dict(precision=PRECISION_RECIPES[mixed])
    else:
        bf16, fp16 = c.get("mixed_precision", "bf16", False, bool), c.get("mixed_precision", "fp16", False, bool)
        if bf16 and fp16:
            raise InputError("mixed_precision.bf16 and fp16 together", "mixed_precision.fp16")
        policy = dict(precision="bf16" if bf16 else "fp16" if fp16 else "fp32")
        policy.update(low_precision(c))
    kind = c.get("optimizer", "optimizer", "adam", str)
    if kind not in ("adam", "sgd"):
        raise InputError(f"optimizer.optimizer {kind!r}: Megatron-Core's optimizers are adam and sgd",
                         "optimizer.optimizer")
    policy.update(optimizer=kind, distributed_optimizer=c.get("ddp", "use_distributed_optimizer", False, bool))
    if c.get("optimizer", "use_precision_aware_optimizer", False, bool):
        dtypes = [_dtype(c, key) for key in ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")]
        policy["optimizer"] = precision_aware_adam(kind, policy["precision"], policy.get("fp8"), *dtypes,
                                                   c.get("optimizer", "store_param_remainders", True, bool),
                                                   "optimizer.use_precision_aware_optimizer")
    else:
        for key in ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "main_grads_dtype"):
            if _dtype(c, key) != "fp32":
                raise InputError(f"optimizer.{key} {_dtype(c, key)} without use_precision_aware_optimizer: "
                                 f"Megatron-Core keeps it fp32 then (it asserts so)", f"optimizer.{key}")
    return policy


BRIDGE_DTYPES = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}
"""Megatron-Bridge's dtypes (``torch.float32``, as its dumps write them) by Megatron-LM's names."""


def _dtype(c: Container, key: str) -> str:
    """``optimizer.key``, a dtype written as a name or as a run log's serialised object
    (``{_target_: torch.float32, _call_: false}``), by Megatron-LM's name (fp32 when absent or null)."""
    value = c.target("optimizer", key) or "torch.float32"
    return BRIDGE_DTYPES.get(value, value)



STATE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
"""Bytes of a state kept in each dtype Megatron-Core's precision-aware optimizer takes for it
(``--main-params-dtype``, ``--exp-avg-dtype``, ``--exp-avg-sq-dtype``); fp8 moments (scaled bytes)
are refused."""

ADAM_STATES = {(4, 4): "adam", (4, 2): "adam-bf16-moments", (2, 4): "adam-16bit-master",
               (2, 2): "adam-16bit-master-bf16-moments"}
"""``(master bytes, bytes a moment)`` to the library's Adam (``models.optimizers.OPTIMIZERS``)."""

DELAYED = ("delayed", "fp8-params")
"""The library's delayed-scaling recipes: Transformer Engine's FusedAdam casts their FP8 weights in its
kernel, so it holds the masters as without FP8."""


def precision_aware_adam(optimizer: str, precision: str, fp8: str | None, main_params: str, exp_avg: str,
                         exp_avg_sq: str, remainders: bool = True,
                         where: str = "--use-precision-aware-optimizer") -> str:
    """The library's optimizer for Megatron-Core's precision-aware optimizer (Transformer Engine's
    ``FusedAdam``, ``megatron/core/optimizer``): the two moments in ``exp_avg`` and ``exp_avg_sq``
    (equal: the library keeps one size a moment); the master weights held by ``FusedAdam`` where
    ``main_params`` is 16-bit or the run has no FP8 recipe but delayed scaling
    (``use_precision_aware_optimizer_no_fp8_or_ds_fp8``) -- an fp32 master of a bf16 weight as its
    low 16 bits (``store_param_remainders``, on by default: ``torch.int16`` shards in
    ``distrib_optimizer.py``), else in ``main_params`` -- and otherwise Megatron-Core's own fp32
    masters.  Adam (``optimizer``, Megatron-Core's name) and bf16 training only (the remainders are
    bf16's)."""
    if optimizer != "adam":
        raise InputError(f"{where} with optimizer {optimizer!r}: Megatron-Core runs it with adam only", where)
    if precision != "bf16":
        raise InputError(f"{where} with {precision} training: the reader reads it beside bf16", where)
    for name, dtype in (("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq), ("main_params", main_params)):
        if dtype not in STATE_BYTES:
            raise InputError(f"{where}: {name} in {dtype}: the reader reads {', '.join(STATE_BYTES)} states (fp8 "
                             f"moments keep scaled bytes it does not count)", where)
    if STATE_BYTES[exp_avg] != STATE_BYTES[exp_avg_sq]:
        raise InputError(f"{where}: exp_avg in {exp_avg} and exp_avg_sq in {exp_avg_sq}: the library keeps one "
                         f"size a moment", where)
    held = main_params != "fp32" or fp8 is None or fp8 in DELAYED
    master = 2 if main_params != "fp32" or (held and remainders) else 4
    return ADAM_STATES[master, STATE_BYTES[exp_avg]]


def fp4_primary_weights(c: Container) -> None:
    """Refuse FP4 primary weights (``FP4_PARAMS``): ``mixed_precision.fp4_param``, or where it is unset
    ``fp4_param_gather``, as Megatron-Bridge's ``MixedPrecisionConfig`` resolves them
    (``training/mixed_precision.py``: ``__setattr__`` sets each of the two from the other, ``finalize``
    sets an unset ``fp4_param`` from ``fp4_param_gather``), and Megatron-Core's ``fp4_param`` keeps the
    weights in FP4.  The recipes of ``bf16_with_nvfp4_mixed`` set ``fp4_param_gather`` alone.  Given
    both and different (a YAML's override over a recipe), the one set last wins, which the merged
    file does not say: refused, naming both.  A recipe's name (``bf16_mixed``) keeps neither."""
    if not isinstance(c.data.get("mixed_precision"), dict):
        return
    param = c.get("mixed_precision", "fp4_param", None, bool)
    gather = c.get("mixed_precision", "fp4_param_gather", None, bool)
    if None not in (param, gather) and param != gather:
        raise InputError(f"mixed_precision.fp4_param {param} and fp4_param_gather {gather}: Megatron-Bridge keeps "
                         f"the two equal (MixedPrecisionConfig.__setattr__ sets each from the other; the one set "
                         f"last wins); give one value", "mixed_precision.fp4_param_gather")
    if param or gather:
        key = "fp4_param" if param else "fp4_param_gather"
        raise InputError(f"mixed_precision.{key} = True: Megatron-Bridge sets fp4_param from fp4_param_gather "
                         f"(MixedPrecisionConfig), and Megatron-Core's fp4_param keeps the weights in FP4; "
                         f"{FP4_PARAMS}", f"mixed_precision.{key}")


def low_precision(c: Container) -> dict:
    """``fp8`` of ``mixed_precision``'s ``fp8`` and ``fp8_recipe`` (default tensorwise), or its ``fp4``
    and ``fp4_recipe`` (default nvfp4; the ``model`` section's where ``mixed_precision`` has no
    ``fp4``: older dumps), as ``FP8_RECIPES`` names them; delayed's ``fp8_amax_history_len`` (default 1)."""
    fp8, fp4 = (c.get("mixed_precision", k, None, str) for k in ("fp8", "fp4"))
    where = "mixed_precision" if fp4 is not None else "model"     # the model's own, where the mixed precision has none
    fp4 = c.get(where, "fp4", None, str)
    if fp8 is not None and fp4 is not None:
        raise InputError("mixed_precision.fp8 and fp4 together: Megatron-Core takes one of them", f"{where}.fp4")
    if fp4 is not None:
        recipe = c.get(where, "fp4_recipe", "nvfp4", str)
        if (fp4, recipe) != ("e2m1", "nvfp4"):
            raise InputError(f"mixed_precision.fp4_recipe {recipe!r} with fp4 {fp4!r}: the library models NVFP4 "
                             f"training (fp4: e2m1, fp4_recipe: nvfp4)", "mixed_precision.fp4_recipe")
        return {"fp8": "nvfp4", **sixteen_bit_layers(c, "nvfp4")}
    recipe = c.get("mixed_precision", "fp8_recipe", "tensorwise", str)
    if fp8 is None:
        return sixteen_bit_layers(c, None)
    if fp8 not in ("hybrid", "e4m3") or recipe not in ("delayed", "tensorwise", "mxfp8"):
        raise InputError(f"mixed_precision.fp8_recipe {recipe!r} with fp8 {fp8!r}: the library models Transformer "
                         f"Engine's delayed, tensorwise and mxfp8 recipes of the hybrid or e4m3 formats", "mixed_precision.fp8_recipe")
    fields = {"fp8_amax_history": c.get("mixed_precision", "fp8_amax_history_len", 1, int)} if recipe == "delayed" else {}
    if any(c.get("mixed_precision", k, False, bool) for k in ("fp8_param", "fp8_param_gather")):
        stored = PARAM_RECIPES[recipe]
        return {"fp8": stored, **fields, **sixteen_bit_layers(c, stored)}
    return {"fp8": recipe, **fields, **sixteen_bit_layers(c, recipe)}


def sixteen_bit_layers(c: Container, recipe: str | None) -> dict:
    """``first_layers_16bit``, ``last_layers_16bit`` of ``mixed_precision.first_last_layers_bf16`` and its
    ``num_layers_at_start_in_bf16``, ``num_layers_at_end_in_bf16`` (Megatron-Bridge's default 0 each)."""
    if not c.get("mixed_precision", "first_last_layers_bf16", False, bool):
        return {}
    if recipe is None:
        raise InputError("mixed_precision.first_last_layers_bf16 needs fp8 or fp4 (it would be ignored)",
                         "mixed_precision.first_last_layers_bf16")
    if recipe in ("delayed", "fp8-params"):
        raise InputError("mixed_precision.first_last_layers_bf16 with delayed scaling: Megatron-Core refuses it "
                         "('Delayed scaling does not support first / last layer in BF16')",
                         "mixed_precision.first_last_layers_bf16")
    return {f"{end}_layers_16bit": c.get("mixed_precision", f"num_layers_at_{at}_in_bf16", 0, int, minimum=0)
            for end, at in (("first", "start"), ("last", "end"))}


def megatron_low_precision(o: Options, notes: list) -> dict:
    """``fp8`` from ``--fp8-format``/``--fp8-recipe`` (default delayed) or ``--fp4-format``/``--fp4-recipe``
    (default nvfp4), as ``models.optimizers.FP8_RECIPES`` names them; ``--fp8-param-gather``: delayed's
    ``fp8-params``.  Options Megatron-LM reads only beside another (a recipe without its format, the
    amax history of a recipe without one, bf16 layer counts without ``--first-last-layers-bf16``) run
    without effect there: ``notes`` names them."""
    fp8, fp4 = "fp8-format" in o.options, "fp4-format" in o.options
    if fp8 and fp4:
        raise InputError("--fp8-format and --fp4-format together: Megatron-LM takes one of them", "--fp4-format")
    if "fp8-param-gather" in o.options and not fp8:
        raise InputError("--fp8-param-gather needs --fp8-format", "--fp8-param-gather")
    _unused(o, notes, ("fp8-recipe", "fp8-amax-history-len") if not fp8 else (), "without --fp8-format")
    _unused(o, notes, ("fp4-recipe",) if not fp4 else (), "without --fp4-format")
    kept = _megatron_16bit_layers(o, fp8 or fp4, notes)
    if fp4:
        o.choice("fp4-format", "e2m1", ("e2m1",))
        return {"fp8": o.choice("fp4-recipe", "nvfp4", ("nvfp4",)), **kept}
    if not fp8:
        return {}
    o.choice("fp8-format", "hybrid", ("e4m3", "hybrid"))
    recipe = o.choice("fp8-recipe", "delayed", ("delayed", "tensorwise", "mxfp8"))
    _unused(o, notes, ("fp8-amax-history-len",) if recipe != "delayed" else (), f"beside --fp8-recipe {recipe} "
            f"(an amax history is delayed scaling's)")
    history = {"fp8_amax_history": o.integer("fp8-amax-history-len", 1)} if recipe == "delayed" else {}
    if kept and recipe == "delayed":
        raise InputError("--first-last-layers-bf16 with delayed scaling (Megatron-LM: 'Delayed scaling does not "
                         "support first / last layer in BF16'): give --fp8-recipe tensorwise or mxfp8",
                         "--first-last-layers-bf16")
    if o.flag("fp8-param-gather"):
        return {"fp8": PARAM_RECIPES[recipe], **history, **kept}
    return {"fp8": recipe, **history, **kept}


def _unused(o: Options, notes: list, options, why: str) -> None:
    """Note each of ``options`` the arguments give: Megatron-LM reads it without effect (``why``)."""
    for option in options:
        if option in o.options:
            notes.append(f"--{option} {why}: Megatron-LM runs without it (no count changes)")


def _megatron_16bit_layers(o: Options, recipe: bool, notes: list) -> dict:
    """``first_layers_16bit`` and ``last_layers_16bit`` from ``--first-last-layers-bf16`` with
    ``--num-layers-at-start-in-bf16`` and ``--num-layers-at-end-in-bf16`` (Megatron-LM's defaults,
    1 and 1)."""
    counts = ("num-layers-at-start-in-bf16", "num-layers-at-end-in-bf16")
    if not o.flag("first-last-layers-bf16"):
        _unused(o, notes, counts, "without --first-last-layers-bf16")
        return {}
    if not recipe:
        _unused(o, notes, ("first-last-layers-bf16",) + counts, "without --fp8-format or --fp4-format")
        return {}
    start, end = (o.integer(option, 1, minimum=0) for option in counts)
    return {"first_layers_16bit": start, "last_layers_16bit": end}
