"""DeepSpeed's batch rule as ``models.deepspeed.batch`` writes it, against cases worked by hand from
DeepSpeed's ``_set_batch_related_parameters`` (``deepspeed/runtime/config.py``): ``train_batch_size
= micro x accumulation x world``; given two, the third is derived; given one, the accumulation is 1.
Fast: ``tests/mutations.py`` runs it."""

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.models.deepspeed import batch


@pytest.mark.parametrize("config,world,expected", [
    ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2}, None, (8, 2, 4)),
    ({"train_batch_size": 16, "gradient_accumulation_steps": 1}, 8, (2, 1, 8)),       # micro = 16 / (1 x 8)
    ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4}, 8, (4, 2, 8)),    # accum = 64 / (4 x 8)
    ({"train_batch_size": 32}, 8, (4, 1, 8)),                                          # micro = 32 / 8
    ({"train_micro_batch_size_per_gpu": 4}, 8, (4, 1, 8)),
    ({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 3}, 2, (4, 3, 2)),
])
def test_batch_rule(config, world, expected):
    assert batch(config, world, {}) == expected


def test_batch_rule_refusals():
    with pytest.raises(InputError, match="DeepSpeed's rule"):
        batch({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2}, 8, {})
    with pytest.raises(InputError, match="--devices"):
        batch({"train_micro_batch_size_per_gpu": 8}, None, {})
