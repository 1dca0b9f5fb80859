"""Answers on disk: a second ``summary`` or ``sweep`` with the same command line prints the
first one's output without importing SymPy or building a formula.

Only a command line the program typed (``main()`` reading ``sys.argv``) of a command in
``COMMANDS`` is answered from or written to the cache, and only when every option it gives is
in ``OPTIONS`` (or, for ``sweep``, ``SWEEP_OPTIONS``), options that read nothing but their own
value, or in ``FILE_OPTIONS``, options that read one file and nothing else (the hub or the
environment would make the same words mean different inputs).
An answer is filed under the SHA-256 of everything its output depends on: ``FORMAT``, the
Python and the platform, the versions of ``DEPENDENCIES``, the backend a sweep was told to use
(``SYMBOLIC_COST_BACKEND``), the text of every file of this package (so an edited formula,
preset or calibration is a new key, never a stale answer), the command's words and the bytes of
the files its ``FILE_OPTIONS`` name (an edited config is a new key too).  Only a run
that succeeded is kept, its standard output and error as printed, so a refused input is
refused again by the full path with the same message; and only up to ``ANSWER_BYTES`` of
them (a sweep's rows can run to gigabytes).

Where: ``numeric.kernel_cache.cache_dir()`` (``SYMBOLIC_COST_CACHE=off`` turns it off).
This module imports only the standard library (and ``numeric.kernel_cache``, which does too): it
runs before the package's formulas load.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import platform
import stat
import sys
from contextlib import contextmanager
from pathlib import Path

from symbolic_cost.numeric.kernel_cache import package_digest

FORMAT = 1
"""Bumped whenever what an answer file holds changes."""

COMMANDS = ("summary", "sweep")
"""The commands answered from the cache."""

OPTIONS = frozenset((
    "--set", "--tensor", "--panel", "--grid-order", "--units", "--overheads", "--ideal", "--step-time", "--json",
    "--preset", "--precision", "--zero", "--shard", "--reshard-after-forward", "--distributed-optimizer",
    "--recompute", "--recompute-modules", "--recompute-method", "--recompute-layers", "--schedule", "--virtual-stages",
    "--first-stage-layers", "--last-stage-layers", "--embedding-in-split", "--loss-in-split", "--pipeline-layout",
    "--pipeline-model-parallel-layout", "--allow-long", "--cp-variant", "--overlap", "--flash", "--optimizer",
    "--no-master-weights", "--fp8", "--fp8-amax-history", "--fp8-16bit-layers", "--offload", "--lora-rank",
    "--lora-targets", "--lora-base", "--no-double-quant",
    "--capacity-factor", "--expert-imbalance", "--dispatcher", "--no-mtp", "--conventions", "--system", "--kernel-time",
    "--devices", "--vocab-size"))
"""The options whose value is the whole input; ``FILE_OPTIONS`` name a file instead, ``--hf-model`` the hub
cache and ``--help`` nothing to keep: the last two are left to the full path."""

FILE_OPTIONS = frozenset(("--hf-config", "--system-file", "--deepspeed", "--megatron-args"))
"""The options naming a file whose text is the whole input (a ``config.json``, a system file, a DeepSpeed
config, a launch script: none of their readers opens another file or the environment), answered from the
cache under a key that holds the file's bytes, so the same words over an edited file are a new key.  The
other readers are left to the full path: a torchtitan Python config reads the files beside it, an
accelerate or TrainingArguments recipe may name a DeepSpeed file, a Megatron-Bridge recipe the hub."""

LARGEST_FILE = 2**20
"""The largest file (bytes) ``FILE_OPTIONS`` may name for an answer from the cache; a larger one, or
anything but a regular file (a FIFO, a device), goes to the full path, whose reader refuses it by name."""

SWEEP_OPTIONS = OPTIONS | {"--grid", "--field", "--where", "--chunk", "--top", "--by"}
"""``sweep``'s options answered from the cache: not ``--out`` (a file written), ``--progress`` (its
rates change from run to run) or ``--dask``."""

ANSWER_BYTES = 2**20
"""The most characters of output (standard output and error together) an answer keeps."""

DEPENDENCIES = ("sympy", "mpmath", "symengine", "numpy", "pandas", "llvmlite", "numba")
"""The libraries whose version can change a printed number or formula (a sweep's numbers are
evaluated by numpy, LLVM's or numba's kernels and printed by pandas)."""


def cacheable(words) -> bool:
    """Whether the command line ``words`` (without the program name) may be answered from the cache:
    a command of ``COMMANDS`` whose every option is spelled out in full in ``OPTIONS`` (a sweep's
    in ``SWEEP_OPTIONS``).

    >>> cacheable(["summary", "--preset", "gpt2", "--set", "b=8", "d=8", "--zero=1"])
    True
    >>> cacheable(["sweep", "--preset", "gpt2", "--grid", "b=1,2"]), cacheable(["summary", "--grid", "b=1,2"])
    (True, False)
    >>> cacheable(["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--out", "rows.csv"])
    False
    >>> cacheable(["summary", "--hf-config", "no-such-config.json"]), cacheable(["summary", "--pre", "gpt2"])
    (False, False)
    >>> cacheable(["summary", "--hf-model", "gpt2"]), cacheable(["table", "--preset", "gpt2"]), cacheable([])
    (False, False, False)

    A file option counts only where it names a regular file of at most ``LARGEST_FILE`` bytes.
    """
    if not words or words[0] not in COMMANDS:
        return False
    allowed = (SWEEP_OPTIONS if words[0] == "sweep" else OPTIONS) | FILE_OPTIONS
    if not all(word.split("=", 1)[0] in allowed for word in words[1:] if word.startswith("-")):
        return False
    try:
        return all(_small_file(path) for path in files(words))
    except OSError:
        return False


def files(words) -> list[str]:
    """The paths the ``FILE_OPTIONS`` of ``words`` name (``--opt PATH`` or ``--opt=PATH``), in order.

    >>> files(["summary", "--hf-config", "a.json", "--system-file=h.toml", "--set", "b=2"])
    ['a.json', 'h.toml']
    """
    found = []
    for i, word in enumerate(words):
        name, _, value = word.partition("=")
        if name in FILE_OPTIONS:
            found.append(value if value else words[i + 1] if i + 1 < len(words) else "")
    return found


def _small_file(path: str) -> bool:
    """Whether ``path`` is a regular file of at most ``LARGEST_FILE`` bytes (``OSError`` where it
    cannot be looked at)."""
    info = os.stat(path)
    return stat.S_ISREG(info.st_mode) and info.st_size <= LARGEST_FILE


def key(words) -> str:
    """The name an answer is filed under: a hash of everything its output depends on.

    >>> key(["summary", "--preset", "gpt2"]) == key(["summary", "--preset", "gpt2"])
    True
    >>> key(["summary", "--preset", "gpt2"]) == key(["summary", "--preset", "gpt2", "--json"])
    False
    """
    contents = [hashlib.sha256(_read(path)).hexdigest() for path in files(words)]
    return digest(code_digest(), "|", *words, "|", *contents)


def code_digest() -> str:
    """A hash of the code an answer comes from: ``FORMAT``, the Python and the platform, the
    versions of ``DEPENDENCIES``, the backend a sweep was told to use and the text of every file of
    this package (``cli.warm`` names its process by it too)."""
    told = os.environ.get("SYMBOLIC_COST_BACKEND", "")
    return digest(FORMAT, sys.version, sys.platform, platform.machine(), *map(_installed, DEPENDENCIES), told,
                   package_digest())


def digest(*parts) -> str:
    """The first 32 hexadecimal digits of the SHA-256 of ``parts``, each as text."""
    hashed = hashlib.sha256()
    for part in parts:
        hashed.update(str(part).encode())
        hashed.update(b"\0")
    return hashed.hexdigest()[:32]


def _read(path: str) -> bytes:
    """The bytes of a file ``FILE_OPTIONS`` name, read only where it is a small regular file
    (``OSError`` otherwise: no key, so no answer from the cache and none kept)."""
    if not _small_file(path):
        raise OSError(f"{path} is not a regular file of at most {LARGEST_FILE} bytes")
    with open(path, "rb") as file:
        return file.read(LARGEST_FILE + 1)


def _installed(name: str) -> str:
    """Which ``name`` an import would load, without importing it: its location, its files' times and its
    ``*.dist-info`` (which names the version); empty when it is not installed."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return ""
    if spec is None or spec.origin is None:
        return ""
    origin = Path(spec.origin)
    stat = origin.stat()
    site = origin.parent.parent
    try:
        infos = sorted(entry for entry in os.listdir(site) if entry.startswith(f"{name}-") and entry.endswith("-info"))
    except OSError:
        infos = []
    return f"{origin} {stat.st_mtime_ns} {stat.st_size} {' '.join(infos)}"


def _path(words) -> Path | None:
    from symbolic_cost.numeric.kernel_cache import cache_dir
    folder = cache_dir()
    return None if folder is None else folder / f"answer_{key(words)}.json"


def answer(words) -> bool:
    """Print the kept answer of ``words`` and say ``True``; ``False`` (printing nothing) when there is
    none or the cache is off or cannot be read."""
    if not cacheable(words):
        return False
    try:
        path = _path(words)
        if path is None or not path.exists():
            return False
        kept = json.loads(path.read_text(encoding="utf-8"))
        out, err = kept["stdout"], kept["stderr"]
    except (OSError, ValueError, KeyError, TypeError):     # a damaged or unreadable file: run again
        return False
    if not (isinstance(out, str) and isinstance(err, str)):    # valid JSON, not an answer: run again
        return False
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.stdout.flush()
    return True


class _Tee(io.TextIOBase):
    """A text stream that writes to ``stream`` and keeps a copy of up to ``ANSWER_BYTES``
    characters (``copy`` is ``None`` past them)."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text):
        if self.copy is not None:
            self.copy.write(text)
            if self.copy.tell() > ANSWER_BYTES:
                self.copy = None
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()

    def fileno(self):
        return self.stream.fileno()

    def isatty(self):
        return self.stream.isatty()

    @property
    def encoding(self):
        return self.stream.encoding

    @property
    def errors(self):
        return self.stream.errors


@contextmanager
def recording(words):
    """Run the body with its output copied; ``kept(status)`` (what it yields) files the answer when the
    command succeeded (status 0) and ``words`` may be answered from the cache."""
    if not cacheable(words):
        yield lambda status: None
        return
    place = answer_path(words)          # the files it reads as they are now, before the run reads them
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        yield lambda status: _keep(place, out.copy, err.copy) if status == 0 else None
    finally:
        sys.stdout, sys.stderr = real


def answer_path(words) -> Path | None:
    """Where the answer of ``words`` is filed, keyed by the files it reads as they are when this is
    called: before the run, so that a file edited while the command ran files the answer it gave
    under the file it read (keyed after the run, the old file's answer was filed under the new
    file's contents, and served from then on); ``None`` where the cache is off or cannot be read."""
    try:
        return _path(words)
    except OSError:
        return None


def file_answer(place: Path | None, out: str, err: str) -> None:
    """File ``out`` and ``err`` at ``place`` (``answer_path``, taken before the command ran): the
    answer of a command that succeeded elsewhere (a warm process, ``cli.warm``)."""
    _keep(place, io.StringIO(out), io.StringIO(err))


def _keep(place: Path | None, out: io.StringIO | None, err: io.StringIO | None) -> None:
    """File an answer at ``place`` (its output and error as copied, ``None`` when too long); a cache
    that cannot be written is skipped, and a damaged answer there is replaced."""
    from symbolic_cost.numeric.kernel_cache import write_text
    if place is not None and out is not None and err is not None and out.tell() + err.tell() <= ANSWER_BYTES:
        text = json.dumps({"stdout": out.getvalue(), "stderr": err.getvalue()})
        try:
            if place.exists() and place.read_text(encoding="utf-8") != text:
                place.unlink()          # a damaged file (write_text keeps what is there)
        except OSError:
            return
        write_text(place, text)
