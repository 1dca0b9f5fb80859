"""``symbolic-cost summary`` called in-process, as the framework-file tests call it: its JSON, or
the refusal it printed (exit status 2)."""

import json

from symbolic_cost.cli import main


def summary_json(capsys, *words) -> dict:
    """``summary WORDS --json``, which must succeed, read back."""
    assert main(["summary", *words, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def summary_error(capsys, *words) -> str:
    """What ``summary WORDS`` printed to stderr when it refused (exit status 2)."""
    assert main(["summary", *words]) == 2
    return capsys.readouterr().err
