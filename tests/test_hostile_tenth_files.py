"""Reader findings settled by what the framework itself does: accelerate's own launch functions as the
oracle for ``fp8_config.override_linear_precision``, and NeMo 1.x's GPT config for ``--cuda-graphs``."""
import argparse

import pytest
import yaml

from symbolic_cost.checks import InputError
from symbolic_cost.models.accelerate import fp8_policy

accelerate_launch = pytest.importorskip("accelerate.utils.launch")
accelerate_kwargs = pytest.importorskip("accelerate.utils.dataclasses")

OVERRIDES = ["[false, false, false]", "(false, false, false)", "[false, false]", "[false]", "'false,false,false'",
             "[False, 'no', 0]", "['false', 'off', 'n']", "[false, false, false, true]", "[true, false, false]",
             "[false, false, 1]", "'fff'", "'(f, f, f)'", "null", "7", "{a: false}", "[false, maybe, false]",
             "[1.0, 0, 0]", "[null, false, false]", "[' false', false, false]"]


def accelerate_reads(value, monkeypatch):
    """The three flags accelerate's TE recipe ends with for this fp8_config value, or None where it raises:
    ``setup_fp8_env`` as ``accelerate launch`` calls it, then ``TERecipeKwargs`` in that environment (its
    check that Transformer Engine is installed stubbed, as this machine has none)."""
    monkeypatch.setattr(accelerate_kwargs, "is_transformer_engine_available", lambda: True)
    for name in ("FPROP", "DGRAD", "WGRAD"):
        monkeypatch.delenv(f"ACCELERATE_FP8_OVERRIDE_{name}", raising=False)
    try:
        env = accelerate_launch.setup_fp8_env(argparse.Namespace(fp8_override_linear_precision=value), {})
        with monkeypatch.context() as scoped:
            for key, text in env.items():
                scoped.setenv(key, text)
            return list(accelerate_kwargs.TERecipeKwargs().override_linear_precision)
    except (ValueError, IndexError, KeyError, TypeError):
        return None


@pytest.mark.parametrize("text", OVERRIDES)
def test_override_linear_precision_accepted_exactly_where_accelerate_accepts_it(text, monkeypatch):
    """Whatever accelerate refuses, the reader refuses naming the key and the rule; what accelerate reads as
    all three passes in FP8 the reader accepts; a pass kept in 16 bits it refuses as unmodelled."""
    value = yaml.safe_load(text)
    flags = accelerate_reads(value, monkeypatch)
    section = {"backend": "TE", "override_linear_precision": value}
    if flags == [False, False, False]:
        assert fp8_policy(section, [])["fp8"] == "delayed"
        return
    with pytest.raises(InputError) as refused:
        fp8_policy(section, [])
    assert refused.value.argument == "fp8_config.override_linear_precision"
    said = str(refused.value)
    assert ("kept in 16 bits" in said) if flags is not None else ("three flags" in said and "str_to_bool" in said)


def test_oracle_splits_the_cases():
    """The table holds cases accelerate accepts and cases it refuses, so the test above checks both ways."""
    with pytest.MonkeyPatch.context() as patch:
        seen = [accelerate_reads(yaml.safe_load(text), patch) for text in OVERRIDES]
    assert seen[0] == [False, False, False] and seen[1] is None and seen[8] == [True, False, False]
