"""The page's requests as command lines: a request (a JSON object from the page) names the
model, the layout and the choices; the ``*_words`` functions turn it into the words of a
``symbolic-cost`` command line, and ``answer`` runs that line through ``cli.main`` and returns
what it printed.  Every value stays a word of the command line (``--flag=value``, so no value is
read as an option): the CLI's parser and reader check it, and refuse it with their own message.

The page's requests and the commands they run:

==============  =====================================================================
``summary``     ``summary --json``: the training verdict, memory and step time
``sweep``       ``sweep --grid b=...`` or ``l=...``: peak memory and step time along one axis
``layers``      ``table --block layer --format json --units si``: each operation's FLOPs,
                bytes and roofline time
``search``      ``search --json``: the fastest layouts that fit
``formula``     ``formula --total FIELD --latex``
``inference``   ``inference --json``: serving memory, latency and the rate an SLO allows
==============  =====================================================================
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import shlex
import tempfile
from decimal import Decimal
from pathlib import Path

from symbolic_cost.checks import InputError, listed, shown
from symbolic_cost.numeric.ranking import PARTS

LAYOUT = ("b", "l", "m1", "s1", "p", "d", "cp", "n_micro")
"""The page's layout fields: ``summary --set`` values (the micro-batch, the sequence, the degrees)."""

SERVING = ("b", "l_in", "l_out", "m1", "p", "d")
"""The serving view's fields: ``inference --set`` values (the batch of the one-request numbers, the
prompt and output lengths, the tensor- and pipeline-parallel degrees, the replicas)."""

ROOFLINE = ("b", "l", "m1", "s1")
"""The layout fields ``table`` takes: one layer on one tensor-parallel device."""

FIELDS = {"set": LAYOUT, "serve": SERVING}
"""The layout objects a request may hold, and the names each may hold."""

SWEPT = ("b", "l")
"""The axes the page sweeps: the micro-batch and the sequence length."""

CHOICES = ("zero", "recompute", "precision", "system", "attention_kernel")
"""The page's choices: ``summary --zero``, ``--recompute``, ``--precision``, ``--system`` and
``--attention-kernel`` (the fused attention library; none chosen: the system's own)."""

SERVING_OPTIONS = {"kv_dtype": "--kv-dtype", "weights": "--weights", "engine": "--engine",
                   "kv_allocation": "--kv-allocation", "prompt_lengths": "--prompt-lengths",
                   "output_lengths": "--output-lengths", "disaggregate": "--disaggregate", "rate": "--rate",
                   "requests": "--requests", "devices": "--devices", "slo_ttft": "--slo-ttft", "slo_itl": "--slo-itl",
                   "slo_percentile": "--slo-percentile"}
"""The serving view's options and the ``inference`` flags they become."""

SERVING_CHOICES = ("kv_dtype", "weights", "engine", "kv_allocation", "prompt_lengths", "output_lengths",
                   "slo_percentile")
"""The serving options the page offers as menus, read from ``inference``'s parser."""

MODELS = ("preset", "config", "hub")
"""Where the model comes from: a bundled preset, a pasted config.json, a hub id in the local cache."""

KNOWN = {"model", "preset", "config", "hub", "set", "serve", "flash", "keep", "field", "devices", "global_batch",
         "top", "grid", *CHOICES, *SERVING_OPTIONS}
"""Every key a request may hold; any other is refused rather than ignored."""
MODEL_KEYS = {"model", "preset", "config", "hub", "system", "precision", "flash"}
"""What every request of the page holds: the model and where it runs."""
TRAINING_KEYS = MODEL_KEYS | {"set", "zero", "recompute", "attention_kernel"}
"""What the page's training requests hold (``layers`` takes only the layout's ``ROOFLINE`` values and
the precision and system of them, ``search`` only the layout's ``l``: the page sends each no more)."""
USED = {"summary": TRAINING_KEYS, "formula": TRAINING_KEYS | {"field", "keep"},
        "search": MODEL_KEYS | {"set", "zero", "attention_kernel", "devices", "global_batch", "top"},
        "sweep": TRAINING_KEYS | {"grid"}, "layers": MODEL_KEYS | {"set"},
        "inference": MODEL_KEYS | {"serve", *SERVING_OPTIONS}}
"""The keys each kind of request reads; another one given a value is refused, not ignored."""


JSON_KINDS = {type(None): "null", bool: "a boolean", list: "a list", dict: "an object"}
"""How a refusal names a JSON value's kind (Python's type names are not the request's)."""


def json_kind(value) -> str:
    """The JSON kind of a request's ``value``, as a refusal names it: ``NaN`` and ``Infinity``
    (which Python's reader takes, and JSON has not) by their names.

    >>> json_kind(None), json_kind("b=2"), json_kind(3), json_kind(float("nan")), json_kind(float("-inf"))
    ('null', 'text', 'a number', 'NaN', '-Infinity')
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    return JSON_KINDS.get(type(value), "text" if isinstance(value, str) else "a number")


def word(value) -> str:
    """A JSON number as the command line's word: an integer's digits, a number with a fraction or
    an exponent as the request wrote it (a ``Decimal``, the server's reader keeps its digits) or as
    Python writes a float (``repr``: the shortest text that reads back as it); the command line
    then reads it as it reads the typed word (``--rate 2.5``, ``--set b=2.0``).

    >>> word(3), word(Decimal("2.50")), word(Decimal("1e400")), word(0.5)
    ('3', '2.50', '1E+400', '0.5')
    """
    return repr(value) if isinstance(value, float) else str(value)


def text(request: dict, key: str, within: str = "") -> str:
    """The value of ``key`` (under ``within``, ``set`` or ``serve``, where it is a layout value) as
    a command-line word: text or a number (``word``), never a structure, ``NaN`` or ``Infinity``;
    a missing one is named so."""
    value, name = request.get(key), f"{within}.{key}" if within else key
    if key not in request:
        raise InputError(f"{name} is missing: give it as text or a number", name)
    finite = not isinstance(value, float) or math.isfinite(value)
    if isinstance(value, bool) or not isinstance(value, (str, int, float, Decimal)) or not finite:
        raise InputError(f"{name} must be text or a finite number, got {json_kind(value)}", name)
    return word(value).strip()


def model_words(request: dict, folder: Path) -> list[str]:
    """``--preset=NAME``, ``--hf-config=FILE`` (the pasted config.json, written into ``folder``)
    or ``--hf-model=ID``; ``model`` not given (or ``null``, or empty) is a preset.

    >>> model_words({"model": "preset", "preset": "gpt2"}, Path("."))
    ['--preset=gpt2']
    >>> model_words({"model": "url", "preset": "gpt2"}, Path("."))
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: model must be one of preset, config, hub, got 'url'
    """
    kind = request.get("model")
    kind = "preset" if kind in (None, "") else kind         # not given, as every other field's null or ""
    if not isinstance(kind, str) or kind not in MODELS:     # named as JSON names it, not Python (Decimal('1.5'))
        got = shown(kind) if isinstance(kind, str) else json_kind(kind)
        raise InputError(f"model must be one of {', '.join(MODELS)}, got {got}", "model")
    if kind == "config":
        path = folder / "config.json"
        try:
            path.write_text(text(request, "config"), encoding="utf-8")
        except UnicodeEncodeError:          # a lone UTF-16 surrogate, which JSON can carry and no file can
            raise InputError("config must be text (it holds a lone UTF-16 surrogate, which no file can)",
                             "config") from None
        return [f"--hf-config={path}"]
    if kind == "preset":                # none named: the command's default model
        return [f"--preset={text(request, 'preset')}"] if request.get("preset") not in (None, "") else []
    return [f"--hf-model={text(request, 'hub')}"]


def layout(request: dict, key: str = "set") -> dict:
    """The request's values under ``key`` (``set``: the training layout; ``serve``: the serving
    one), an object."""
    values = request.get(key)
    if values is None:
        return {}
    if not isinstance(values, dict):        # 0, false or [] were read as no values
        raise InputError(f"{key} must be an object of layout values, got {json_kind(values)}", key)
    return values


def layout_words(request: dict, leave=(), key: str = "set", names=None) -> list[str]:
    """``--set NAME=VALUE ...`` for the fields under ``key`` (``FIELDS``) that are filled in (an
    empty one keeps the command's default), of ``names`` only when given, less those in ``leave``.

    >>> layout_words({"set": {"b": 2, "d": "8", "p": ""}})
    ['--set', 'b=2', 'd=8']
    >>> layout_words({"set": {"b": 2, "d": "8"}}, names=ROOFLINE)
    ['--set', 'b=2']
    >>> layout_words({"serve": {"l_in": "2048", "m1": 4}}, key="serve")
    ['--set', 'l_in=2048', 'm1=4']
    """
    values, known = layout(request, key), FIELDS[key]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise InputError(f"unknown layout field(s) {listed(unknown)}; known: {', '.join(known)}", key)
    pairs = [f"{name}={text(values, name, key)}" for name in (names or known)
             if name in values and name not in leave and text(values, name, key)]
    return ["--set", *pairs] if pairs else []


def choice_words(request: dict, names=CHOICES) -> list[str]:
    """``--zero=1``, ``--system=h100`` ... for each choice given, and ``--flash`` or ``--no-flash``.

    >>> choice_words({"zero": 1, "attention_kernel": "flash-attention-3", "recompute": ""})
    ['--zero=1', '--attention-kernel=flash-attention-3']
    """
    words = [f"--{name.replace('_', '-')}={text(request, name)}" for name in names
             if request.get(name) not in (None, "")]
    if "flash" in request:
        if not isinstance(request["flash"], bool):
            raise InputError(f"flash must be true or false, got {json_kind(request['flash'])}", "flash")
        words.append("--flash" if request["flash"] else "--no-flash")
    return words


def checked(request, kind: str) -> dict:
    """The request itself, refused when it is not an object, holds a key the page never sends, or
    gives a value to one its ``kind`` does not read (``USED``).

    >>> checked({"preset": "gpt2", "devices": ""}, "summary")
    {'preset': 'gpt2', 'devices': ''}
    >>> checked({"preset": "gpt2", "devices": "8"}, "summary")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: devices: a summary request has no devices; it would be ignored
    """
    if not isinstance(request, dict):
        raise InputError("a request is a JSON object", "request")
    unknown = sorted(set(request) - KNOWN)
    if unknown:
        raise InputError(f"unknown request field(s) {listed(unknown)}", "request")
    unused = sorted(key for key in set(request) - USED[kind] if request[key] not in (None, "", {}))
    if unused:
        raise InputError(f"{', '.join(unused)}: a {kind} request has no {' or '.join(unused)}; it would be ignored",
                         unused[0])
    return request


def summary_words(request: dict, folder: Path) -> list[str]:
    """``summary --json`` of the request's model, layout and choices."""
    return ["summary", *model_words(request, folder), *layout_words(request), *choice_words(request), "--json"]


def formula_words(request: dict, folder: Path) -> list[str]:
    """``formula --total FIELD --latex`` of the request's model with its layout, less the names in
    ``keep`` (comma-separated), which stay symbols; ``formula --total`` takes the precision, the
    system (of a time: ``numeric.ranking.PARTS``) and flash attention of the choices (its totals are under the training defaults
    otherwise: the other choices are refused)."""
    keep = [name.strip() for name in text(request, "keep").split(",") if name.strip()] if "keep" in request else []
    unknown = sorted(set(keep) - set(LAYOUT))
    if unknown:
        raise InputError(f"keep: unknown layout field(s) {listed(unknown)}; known: {', '.join(LAYOUT)}", "keep")
    for name in ("zero", "recompute", "attention_kernel"):
        if request.get(name) not in (None, ""):
            raise InputError(f"{name}: formula --total builds the totals under the training defaults and has no "
                             f"--{name.replace('_', '-')}; it would be ignored", name)
    timed = request.get("field") in PARTS           # a time depends on the system; FLOPs and bytes do not
    return ["formula", *model_words(request, folder), f"--total={text(request, 'field')}",
            *layout_words(request, leave=keep), *choice_words(request, ("precision", "system") if timed else
                                                               ("precision",)), "--latex"]


def search_words(request: dict, folder: Path) -> list[str]:
    """``search --json`` of the request's model on ``devices`` with ``global_batch`` sequences of
    the layout's ``l`` (when given) per step, at its ZeRO stage, precision, system and attention
    kernel."""
    others = sorted(k for k, v in layout(request).items() if k != "l" and v not in (None, ""))
    if others:          # the search chooses the layout: only the sequence is the request's
        raise InputError(f"set.{others[0]}: a search chooses the layout and takes only its l; it would be ignored",
                         f"set.{others[0]}")
    sequence = text(layout(request), "l") if layout(request).get("l") not in (None, "") else ""
    given = [(flag, key) for flag, key in (("--devices", "devices"), ("--global-batch", "global_batch"),
                                           ("--top", "top")) if request.get(key) not in (None, "")]
    words = ["search", *model_words(request, folder), *(f"{flag}={text(request, key)}" for flag, key in given)]
    return words + ([f"--seq={sequence}"] if sequence else []) + \
        choice_words(request, ("zero", "precision", "system", "attention_kernel")) + ["--json"]


def sweep_words(request: dict, folder: Path) -> list[str]:
    """``sweep --grid NAME=VALUES --field peak_bytes,total`` of the request's model, layout and
    choices: the peak memory and the step time along ``b`` or ``l`` (``grid``, the ``--grid`` word
    as typed: ``b=1:16:+1``), the other layout values held.

    >>> sweep_words({"preset": "gpt2", "set": {"b": 2, "l": 512}, "grid": "b=1:4:+1"}, Path("."))
    ['sweep', '--preset=gpt2', '--set', 'l=512', '--grid=b=1:4:+1', '--field=peak_bytes,total']
    """
    grid = text(request, "grid")
    axis = grid.partition("=")[0].strip()
    if axis not in SWEPT:
        raise InputError(f"grid sweeps one of {', '.join(SWEPT)} (NAME=V1,V2,... or a range), got {grid[:40]!r}",
                         "grid")
    return ["sweep", *model_words(request, folder), *layout_words(request, leave=(axis,)), *choice_words(request),
            f"--grid={grid}", "--field=peak_bytes,total"]


def layers_words(request: dict, folder: Path) -> list[str]:
    """``table --block layer --format json --units si``: each operation of one layer on one
    tensor-parallel device (the layout's ``b``, ``l``, ``m1``, ``s1``), its FLOPs, bytes and its
    time at the system's peak FLOP/s and bandwidth (the roofline), forward and backward."""
    others = sorted(k for k, v in layout(request).items() if k not in ROOFLINE and v not in (None, ""))
    if others:          # one layer on one tensor-parallel device: the rest of the layout is not its
        raise InputError(f"set.{others[0]}: a layers request is one layer on one tensor-parallel device and takes "
                         f"{', '.join(ROOFLINE)}; it would be ignored", f"set.{others[0]}")
    return ["table", *model_words(request, folder), "--block=layer", *layout_words(request, names=ROOFLINE),
            *choice_words(request, ("precision", "system")), "--format=json", "--units=si"]


def inference_words(request: dict, folder: Path) -> list[str]:
    """``inference --json`` of the request's model served with its ``serve`` values (``SERVING``)
    on its system and precision, with the serving options given (``SERVING_OPTIONS``: a rate to
    simulate, SLOs on TTFT and ITL, KV-cache and weight formats).

    >>> inference_words({"preset": "llama-3-8b", "serve": {"l_in": 1024}, "system": "h100",
    ...                  "slo_ttft": "0.5"}, Path("."))
    ['inference', '--preset=llama-3-8b', '--set', 'l_in=1024', '--system=h100', '--slo-ttft=0.5', '--json']
    """
    given = [f"{flag}={text(request, key)}" for key, flag in SERVING_OPTIONS.items()
             if request.get(key) not in (None, "")]
    return ["inference", *model_words(request, folder), *layout_words(request, key="serve"),
            *choice_words(request, ("precision", "system")), *given, "--json"]


WORDS = {"summary": summary_words, "formula": formula_words, "search": search_words, "sweep": sweep_words,
         "layers": layers_words, "inference": inference_words}
"""The command each of the page's requests runs."""


def rows(printed: str) -> dict:
    """A CSV table as ``{"columns": [...], "rows": [[number, ...], ...]}``.

    >>> rows("b,peak_bytes\\n1.0,2048\\n2.0,4096\\n")
    {'columns': ['b', 'peak_bytes'], 'rows': [[1.0, 2048.0], [2.0, 4096.0]]}
    """
    columns, *lines = list(csv.reader(io.StringIO(printed)))
    return {"columns": columns, "rows": [[float(cell) for cell in line] for line in lines]}


def parsed(kind: str, printed: str):
    """What a command printed, as the page reads it: the LaTeX of ``formula`` as text, the CSV of
    ``sweep`` as ``rows``, the others' JSON."""
    if kind == "formula":
        return printed
    return rows(printed) if kind == "sweep" else json.loads(printed)


def answer(kind: str, request, main) -> dict:
    """Run the command of ``kind`` for ``request`` through the command line's ``main``:
    ``{"command", "status", "output", "error"}``, the command line as typed in a shell, its exit
    status, what it printed (parsed: ``parsed``) and its one-line refusal (empty when it ran)."""
    with tempfile.TemporaryDirectory(prefix="symbolic-cost-") as folder:
        try:
            words = WORDS[kind](checked(request, kind), Path(folder))
        except InputError as error:
            return {"command": "", "status": 2, "output": None, "error": f"symbolic-cost: error: {error}"}
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(words)
    shown = ["symbolic-cost", *(w.replace(folder, ".") for w in words)]
    return {"command": shlex.join(shown), "status": status,
            "output": parsed(kind, out.getvalue()) if status == 0 else None, "error": err.getvalue().strip()}
