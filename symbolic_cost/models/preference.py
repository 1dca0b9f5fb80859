"""Preference training as TRL runs it: the fields a DPO or ORPO recipe adds to its
``TrainingArguments`` (TRL's ``DPOConfig`` and ``ORPOConfig``, huggingface/trl at f2cd577) and
what they change in a step.

Both trainers feed each example as two sequences, the chosen and the rejected completion of one
prompt, padded to one length and run as one batch (``DPOTrainer`` stacks them, "batch is
[chosen, rejected]"; ``ORPOTrainer.concatenated_forward``): a micro-batch of
``per_device_train_batch_size`` examples is ``b = 2 x per_device_train_batch_size`` sequences.

=========== ========================================================================================
trainer     what a step runs beside the trained model's forward and backward
=========== ========================================================================================
``dpo``     a frozen reference model's forward over the same sequences (``Training.reference``):
            a copy loaded as the trained model is (``"16-bit"`` where the recipe loads 16-bit
            weights, else ``"fp32"``, TRL's ``ModelConfig.dtype``; a DeepSpeed launch casts it to
            16 bits, ``models.hf_trainer.launched``); under LoRA the base with the adapters off
            (``"adapters"``, no copy); none with ``precompute_ref_log_probs`` (the log-probabilities
            are computed once before training) or the older ``reference_free``
``orpo``    nothing: the odds-ratio loss needs no reference model (Hong et al. 2024)
``reward``  nothing, on the model as a sequence classifier of one label (``RewardTrainer`` loads
            it with ``AutoModelForSequenceClassification``, ``num_labels=1``): its LM head
            replaced by a score projection (``reward_model``), the pairs' rewards compared
            (Ouyang et al. 2022); under LoRA refused (PEFT trains the score head whole beside the
            adapters)
=========== ========================================================================================

The loss's own fields (``beta``, ``loss_type``, ...) change no count (``NO_COST``); a reference
model synchronised with the trained one (``sync_ref_model``) is copied every
``ref_model_sync_steps`` steps, not in a step (noted).
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.checks import InputError, flag

TRAINERS = ("sft", "dpo", "orpo", "reward")
"""The TRL trainers a recipe can be run with (``--trl-trainer``): ``trl sft``/``dpo``/``orpo``/``reward``,
or the alignment handbook's ``scripts/sft.py``, ``dpo.py``, ``orpo.py``."""

NO_COST = {
    "beta", "max_prompt_length", "max_completion_length", "loss_type", "loss_weights", "label_smoothing",
    "rpo_alpha", "f_divergence_type", "f_alpha_divergence_coef", "use_weighting", "ld_alpha", "discopop_tau",
    "truncation_mode", "disable_dropout", "generate_during_eval", "label_pad_token_id", "padding_value",
    "precompute_ref_batch_size", "ref_model_mixup_alpha", "ref_model_sync_steps", "center_rewards_coefficient",
}
"""Preference fields that change no count of a step: the loss's shape and temperature, how the
prompt is truncated (every sequence is counted at ``max_length`` either way), evaluation, and the
batch size of a precomputation that runs before training."""

READ = {"precompute_ref_log_probs", "reference_free", "sync_ref_model"}
"""Preference fields read (the module's table)."""

FIELDS = NO_COST | READ
"""Every preference field: a recipe of ``trl sft`` holding one is refused (``preference_fields``)."""

REWARD = {"center_rewards_coefficient"}
"""Fields of ``RewardConfig`` alone."""

DPO_ONLY = READ | {"rpo_alpha", "f_divergence_type", "f_alpha_divergence_coef", "use_weighting", "ld_alpha",
                   "discopop_tau", "loss_weights", "precompute_ref_batch_size", "ref_model_mixup_alpha",
                   "ref_model_sync_steps"}
"""Fields of ``DPOConfig`` that ``ORPOConfig`` does not have."""


def preference_fields(recipe: dict, trainer: str, lora: bool, sixteen_bit: bool) -> tuple[dict, list]:
    """``(policy, notes)`` of a recipe's preference fields (``recipe``: the fields
    ``models.trl_recipe`` took out of the file) run by ``trainer`` (``TRAINERS``): ``reference``
    for DPO (``lora``: the recipe trains LoRA adapters; ``sixteen_bit``: it loads the model in 16
    bits), ``pairs`` true for DPO, ORPO and reward models (each example is two sequences),
    ``reward_model`` for the last (``reward_model``: the model as a classifier of one label).

    >>> preference_fields({"beta": 0.01}, "dpo", lora=False, sixteen_bit=True)[0]
    {'pairs': True, 'reference': '16-bit'}
    >>> preference_fields({"beta": 0.01}, "dpo", lora=True, sixteen_bit=True)[0]
    {'pairs': True, 'reference': 'adapters'}
    >>> preference_fields({"beta": 0.05}, "orpo", lora=False, sixteen_bit=False)[0]
    {'pairs': True}
    """
    if trainer not in TRAINERS:
        raise InputError(f"--trl-trainer must be one of {', '.join(TRAINERS)}, got {trainer!r}", "--trl-trainer")
    given = [key for key in recipe if key in FIELDS]
    if trainer == "sft":
        if given:
            raise InputError(f"{given[0]}: a preference recipe's field (DPO, ORPO, reward); give the trainer that "
                             f"runs the recipe with --trl-trainer dpo, orpo or reward (trl dpo, the handbook's "
                             f"scripts/dpo.py)", given[0])
        return {}, []
    foreign = [key for key in given if not _belongs(key, trainer)]
    if foreign:
        owner = "a DPO" if foreign[0] in DPO_ONLY else "a RewardConfig" if foreign[0] in REWARD else "a DPO or ORPO"
        raise InputError(f"{foreign[0]}: {owner} field, which the {trainer} trainer's configuration does not have "
                         f"(--trl-trainer {trainer})", foreign[0])
    if trainer == "reward" and lora:
        raise InputError("use_peft with --trl-trainer reward: PEFT trains the score head whole beside the adapters "
                         "(SEQ_CLS modules_to_save), which is not modelled", "use_peft")
    notes = [f"{trainer.upper()}: each example is its chosen and its rejected sequence, run as one batch: b = 2 x "
             f"per_device_train_batch_size sequences"]
    policy = {"pairs": True}
    if trainer == "reward":
        policy["reward_model"] = True
        notes.append("TRL's RewardTrainer: the model as a sequence classifier of one label (AutoModelForSequence"
                     "Classification, num_labels 1), its LM head replaced by a score projection")
    if trainer == "dpo":
        reference, why = _reference(recipe, lora, sixteen_bit)
        if reference is not None:
            policy["reference"] = reference
        notes.append(why)
        if _flag(recipe, "sync_ref_model"):
            notes.append("sync_ref_model: the reference is updated from the trained model every "
                         f"{recipe.get('ref_model_sync_steps', 512)} steps, not in a step")
    return policy, notes


def _belongs(key: str, trainer: str) -> bool:
    """Whether ``trainer``'s configuration has the preference field ``key``: ``REWARD`` the reward
    trainer's alone, ``DPO_ONLY`` DPO's, the rest DPO's and ORPO's."""
    if trainer == "reward":
        return key in REWARD
    return key not in REWARD and (trainer == "dpo" or key not in DPO_ONLY)


def _reference(recipe: dict, lora: bool, sixteen_bit: bool) -> tuple[str | None, str]:
    """DPO's reference (``Training.reference``) and the note saying which."""
    if _flag(recipe, "precompute_ref_log_probs"):
        return None, ("precompute_ref_log_probs: the reference's log-probabilities are computed once before "
                      "training: no reference model in a step")
    if _flag(recipe, "reference_free"):
        return None, "reference_free: DPO against a uniform reference, no reference model"
    if lora:
        return "adapters", ("DPO under LoRA: the reference is the frozen base with the adapters off (TRL's "
                            "use_adapter), one more forward a micro-batch and no copy")
    dtype = "16-bit" if sixteen_bit else "fp32"
    return dtype, (f"{COPY_NOTE} ({dtype}, as the recipe loads the model), one forward a micro-batch without "
                   f"gradients")


COPY_NOTE = "DPO: a frozen copy of the model as the reference"
"""The start of the note of DPO's reference copy (``_reference``), which a DeepSpeed launch that
casts an fp32 copy to 16 bits replaces (``models.hf_trainer.launched``)."""


def _flag(recipe: dict, key: str) -> bool:
    return flag(recipe.get(key, False), key)


def reward_model(arch):
    """``arch`` as ``AutoModelForSequenceClassification`` builds it with ``num_labels=1`` (a reward
    model): the LM head (and any pooler) replaced by a decoder's ``score`` projection of one label."""
    return replace(arch, lm_head=False, pooler=False, task="classification", classifier="score", num_labels=1)
