"""A Hugging Face Trainer run with a DeepSpeed config (``TrainingArguments.deepspeed``, or
``--deepspeed`` beside ``--hf-training-args``), as transformers joins the two.

transformers (``integrations/deepspeed.py``, ``HfTrainerDeepSpeedConfig``) fills every ``"auto"``
value of the DeepSpeed config from the TrainingArguments and refuses a value that is set in both
and differs ("Please correct the following DeepSpeed config values that mismatch
TrainingArguments values"):

====================================== =========================================================
DeepSpeed key                          TrainingArguments
====================================== =========================================================
``train_micro_batch_size_per_gpu``     ``per_device_train_batch_size``
``gradient_accumulation_steps``        ``gradient_accumulation_steps``
``train_batch_size``                   their product with the world size
``fp16.enabled``, ``bf16.enabled``     ``fp16``, ``bf16`` (accelerate adds the section where the
                                       config has neither: ``DeepSpeedPlugin.set_mixed_precision``)
====================================== =========================================================

The ZeRO stage, offload and overlap are the DeepSpeed config's; the optimizer is its
``optimizer`` section's where it has one (DeepSpeed builds it), else ``optim``'s; the rest merges
as under an accelerate launch (``hf_trainer.launched``: a DeepSpeed launch keeps an fp32 master).
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError
from symbolic_cost.models.config import read_json
from symbolic_cost.models.deepspeed import deepspeed_setup
from symbolic_cost.models.hf_trainer import count_field, precision, read_arguments, trainer_setup
from symbolic_cost.models.megatron_args import Setup

FILLED = (("train_micro_batch_size_per_gpu", S.b, "per_device_train_batch_size"),
          ("gradient_accumulation_steps", S.n_micro, "gradient_accumulation_steps"))
"""The DeepSpeed keys the Trainer fills from its own fields, with the library's symbol."""


def trainer_with_deepspeed(text: str, name: str, ds_text: str, ds_name: str, arch, world: int | None,
                           per_node: int | None = None, trainer: str | None = None,
                           model_type: str | None = None, checkpoint: str | None = None) -> Setup:
    """The ``Setup`` of TrainingArguments (``text``) run with the DeepSpeed config ``ds_text`` on
    ``world`` devices (``None``: the config's ``train_batch_size`` decides), for ``arch`` (its
    ``config.json`` type ``model_type``, for Liger: ``models.liger``); ``trainer``: the TRL trainer
    of a recipe (``models.preference``); ``checkpoint``: the dtype of the model's ``config.json``
    (``models.trl_recipe.auto_dtype``)."""
    args, _ = read_arguments(text, name)
    if args.get("fsdp") not in (None, False, "", []):
        raise InputError(f"fsdp {args['fsdp']!r} with a DeepSpeed config: transformers' Trainer refuses both "
                         f"(\"Using --fsdp xxx together with --deepspeed is not possible\"); drop one", "fsdp")
    fills = {symbol: count_field(args, field) for _, symbol, field in FILLED}
    mixed = precision(args)
    launch = deepspeed_setup(ds_text, ds_name, arch, world, fills,
                             dict(precision=mixed, precision_given=True, zero=0, zero_given=False))
    for key, symbol, field in FILLED:
        if launch.values[symbol] != fills[symbol]:
            raise InputError(f"{key} {launch.values[symbol]} of the DeepSpeed config and {field} {fills[symbol]} of "
                             f"the TrainingArguments differ (transformers refuses the mismatch; \"auto\" takes the "
                             f"TrainingArguments')", key)
    if not {"fp16", "bf16"} & set(read_json(ds_text, ds_name, "--deepspeed", "a DeepSpeed config")):
        launch.policy["precision"] = mixed     # accelerate adds the section (DeepSpeedPlugin.set_mixed_precision)
    elif launch.policy["precision"] != mixed:
        raise InputError(f"the DeepSpeed config runs {launch.policy['precision']} and the TrainingArguments {mixed} "
                         f"(fp16.enabled/bf16.enabled against fp16/bf16: transformers refuses the mismatch)",
                         "bf16.enabled")
    launch = replace(launch, launcher="DEEPSPEED")
    found = trainer_setup(text, name, arch, int(launch.values[S.d]), per_node, launch=launch, trainer=trainer,
                          deepspeed=ds_name, model_type=model_type, checkpoint=checkpoint)
    if "optimizer" in launch.policy:        # DeepSpeed builds the optimizer of its own section
        found.policy["optimizer"] = launch.policy["optimizer"]
        if "optim" in args:
            found.notes.append(f"optim {args['optim']}: the DeepSpeed config's optimizer section replaces it "
                               f"(DeepSpeed builds the optimizer)")
    return found

