"""docs/contributing.md's recipe "Add a model family", followed on a scratch family (issue 61): a
reader written against ``Keys``, added to ``FAMILIES``, is read by ``from_config`` at once; a key it
does not read is refused, not ignored; and its parameters are the ones counted by hand."""

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.models import Architecture
from symbolic_cost.models.config import from_config
from symbolic_cost.models.families import FAMILIES, Keys


def tinygpt(k: Keys, name: str) -> Architecture:
    """A scratch family, as the recipe's step 1 writes one: GPT-2's shape under other key names."""
    e, h, layers = k.int("width", 64), k.int("heads", 4), k.int("depth", 2)
    return Architecture(name, layers, e, h, k.int("mlp_width", 4 * e), k.int("vocab", 100), positions=k.int("ctx", 32),
                        context=k.int("ctx", 32), mlp="gelu", tied=True)


@pytest.fixture
def with_tinygpt(monkeypatch):
    monkeypatch.setitem(FAMILIES, "tinygpt", tinygpt)      # step 2: the family's entry


def test_a_family_added_by_its_reader_is_read_and_counted_by_hand(with_tinygpt):
    arch = from_config({"model_type": "tinygpt", "width": 64, "heads": 4, "depth": 2, "vocab": 100, "ctx": 32})
    from symbolic_cost.models import Training, model_cost
    # by hand, a layer: QKV 64 x 192 + 192, output 64 x 64 + 64, fc1 64 x 256 + 256, fc2 256 x 64 + 64,
    # two LayerNorms 2 x 128; once: the word table 100 x 64, the positions 32 x 64, the final norm 128
    layer = 64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64 + 2 * 128
    assert model_cost(arch, Training(b=1, l=8)).parameters == 2 * layer + 100 * 64 + 32 * 64 + 128


def test_a_key_the_reader_does_not_read_is_refused(with_tinygpt):
    with pytest.raises(InputError, match="rope_theta"):
        from_config({"model_type": "tinygpt", "width": 64, "heads": 4, "rope_theta": 10000.0})
