"""The page's requests as command lines: a request (a JSON object from the page) names the
model, the layout and the choices; ``summary_words``, ``formula_words`` and ``search_words``
turn it into the words of a ``symbolic-cost`` command line, and ``answer`` runs that line
through ``cli.main`` and returns what it printed.  Every value stays a word of the command
line (``--flag=value``, so no value is read as an option): the CLI's parser and reader check it,
and refuse it with their own message."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import tempfile
from pathlib import Path

from symbolic_cost.checks import InputError

LAYOUT = ("b", "l", "m1", "s1", "p", "d", "cp", "n_micro")
"""The page's layout fields: ``summary --set`` values (the micro-batch, the sequence, the degrees)."""

CHOICES = ("zero", "recompute", "precision", "system")
"""The page's choices: ``summary --zero``, ``--recompute``, ``--precision``, ``--system``."""

MODELS = ("preset", "config", "hub")
"""Where the model comes from: a bundled preset, a pasted config.json, a hub id in the local cache."""

KNOWN = {"model", "preset", "config", "hub", "set", "flash", "keep", "field", "devices", "global_batch", "top",
         *CHOICES}
"""Every key a request may hold; any other is refused rather than ignored."""


def text(request: dict, key: str) -> str:
    """The value of ``key`` as a command-line word: text or an integer, never a structure."""
    value = request.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{key} must be text or an integer, got {type(value).__name__}", key)
    return str(value).strip()


def model_words(request: dict, folder: Path) -> list[str]:
    """``--preset=NAME``, ``--hf-config=FILE`` (the pasted config.json, written into ``folder``)
    or ``--hf-model=ID``.

    >>> model_words({"model": "preset", "preset": "gpt2"}, Path("."))
    ['--preset=gpt2']
    >>> model_words({"model": "url", "preset": "gpt2"}, Path("."))
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: model must be one of preset, config, hub, got 'url'
    """
    kind = request.get("model", "preset")
    if kind not in MODELS:
        raise InputError(f"model must be one of {', '.join(MODELS)}, got {kind!r}", "model")
    if kind == "config":
        path = folder / "config.json"
        path.write_text(text(request, "config"))
        return [f"--hf-config={path}"]
    if kind == "preset":                # none named: the command's default model
        return [f"--preset={text(request, 'preset')}"] if request.get("preset") not in (None, "") else []
    return [f"--hf-model={text(request, 'hub')}"]


def layout(request: dict) -> dict:
    """The request's layout values (``set``), an object."""
    values = request.get("set") or {}
    if not isinstance(values, dict):
        raise InputError("set must be an object of layout values", "set")
    return values


def layout_words(request: dict, leave=()) -> list[str]:
    """``--set NAME=VALUE ...`` for the layout fields filled in (an empty one keeps the command's
    default), less the names in ``leave``.

    >>> layout_words({"set": {"b": 2, "d": "8", "p": ""}})
    ['--set', 'b=2', 'd=8']
    """
    values = layout(request)
    unknown = sorted(set(values) - set(LAYOUT))
    if unknown:
        raise InputError(f"unknown layout field(s) {', '.join(unknown)}; known: {', '.join(LAYOUT)}", "set")
    pairs = [f"{name}={text(values, name)}" for name in LAYOUT
             if name in values and name not in leave and text(values, name)]
    return ["--set", *pairs] if pairs else []


def choice_words(request: dict, names=CHOICES) -> list[str]:
    """``--zero=1``, ``--system=h100`` ... for each choice given, and ``--flash`` or ``--no-flash``."""
    words = [f"--{name}={text(request, name)}" for name in names if request.get(name) not in (None, "")]
    if "flash" in request:
        words.append("--flash" if request["flash"] is True else "--no-flash")
    return words


def checked(request) -> dict:
    """The request itself, refused when it is not an object or holds a key the page never sends."""
    if not isinstance(request, dict):
        raise InputError("a request is a JSON object", "request")
    unknown = sorted(set(request) - KNOWN)
    if unknown:
        raise InputError(f"unknown request field(s) {', '.join(unknown)}", "request")
    return request


def summary_words(request: dict, folder: Path) -> list[str]:
    """``summary --json`` of the request's model, layout and choices."""
    return ["summary", *model_words(request, folder), *layout_words(request), *choice_words(request), "--json"]


def formula_words(request: dict, folder: Path) -> list[str]:
    """``formula --total FIELD --latex`` of the request's model with its layout, less the names in
    ``keep`` (comma-separated), which stay symbols; ``formula --total`` takes the precision and
    flash attention of the choices (its totals are under the training defaults otherwise)."""
    keep = [name.strip() for name in text(request, "keep").split(",") if name.strip()] if request.get("keep") else []
    unknown = sorted(set(keep) - set(LAYOUT))
    if unknown:
        raise InputError(f"keep: unknown layout field(s) {', '.join(unknown)}; known: {', '.join(LAYOUT)}", "keep")
    return ["formula", *model_words(request, folder), f"--total={text(request, 'field')}",
            *layout_words(request, leave=keep), *choice_words(request, ("precision",)), "--latex"]


def search_words(request: dict, folder: Path) -> list[str]:
    """``search --json`` of the request's model on ``devices`` with ``global_batch`` sequences of
    the layout's ``l`` (when given) per step, at its ZeRO stage, precision and system."""
    sequence = text(layout(request), "l") if layout(request).get("l") not in (None, "") else ""
    given = [(flag, key) for flag, key in (("--devices", "devices"), ("--global-batch", "global_batch"),
                                           ("--top", "top")) if request.get(key) not in (None, "")]
    words = ["search", *model_words(request, folder), *(f"{flag}={text(request, key)}" for flag, key in given)]
    return words + ([f"--seq={sequence}"] if sequence else []) + \
        choice_words(request, ("zero", "precision", "system")) + ["--json"]


WORDS = {"summary": summary_words, "formula": formula_words, "search": search_words}
"""The command each of the page's requests runs."""


def answer(kind: str, request, main) -> dict:
    """Run the command of ``kind`` for ``request`` through the command line's ``main``:
    ``{"command", "status", "output", "error"}``, the command line as typed in a shell, its exit
    status, what it printed (parsed when JSON) and its one-line refusal (empty when it ran)."""
    with tempfile.TemporaryDirectory(prefix="symbolic-cost-") as folder:
        try:
            words = WORDS[kind](checked(request), Path(folder))
        except InputError as error:
            return {"command": "", "status": 2, "output": None, "error": f"symbolic-cost: error: {error}"}
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(words)
    shown = ["symbolic-cost", *(w.replace(folder, ".") for w in words)]
    printed = out.getvalue()
    if status == 0 and kind != "formula":
        printed = json.loads(printed)
    return {"command": shlex.join(shown), "status": status, "output": printed if status == 0 else None,
            "error": err.getvalue().strip()}
