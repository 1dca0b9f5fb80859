"""Compiled kernels on disk, so that a second process skips the compilation.

A kernel is filed under the SHA-256 of its backend, the versions of the
compilers, its argument names and the text of its expressions: a changed
formula is a new key, never a stale kernel.  The numpy backend stores the
generated Python source (``<key>.py``, loaded as a module); the LLVM backend
stores symengine's pickled ``Lambdify`` (``<key>.pickle``); the numba backend its generated
loop (``<key>.py``), and numba its machine code beside it (``__pycache__``).

A search's kernels are also filed under what they were built from (``built``): the model, the
training, the system, the conventions and the text of every file of this package, so that a
second search skips building the formulas as well.

Where: ``SYMBOLIC_COST_CACHE`` if set (``off`` disables the cache), else the
platform's user cache directory (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux,
``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows) under
``symbolic_cost``.  A cache that cannot be read or written is skipped.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import pickle
import sys
from pathlib import Path

FORMAT = 11
"""Bumped whenever the code a backend generates, or a key's text, changes."""
PACKAGE = Path(__file__).resolve().parent.parent
_DIGEST: list[str] = []


def cache_dir() -> Path | None:
    """The directory kernels are kept in, or ``None`` when the cache is off."""
    chosen = os.environ.get("SYMBOLIC_COST_CACHE")
    if chosen:
        return None if chosen.lower() in ("off", "0", "false", "no") else Path(chosen)
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "symbolic_cost"


def key(backend: str, texts, arguments) -> str:
    """The file name of a kernel: a hash of everything its code depends on."""
    import numpy                        # here, not above: ``cache_dir`` serves the CLI before either loads
    import sympy
    digest = hashlib.sha256()
    for part in (backend, FORMAT, sympy.__version__, numpy.__version__, _symengine_version(),
                 *map(str, arguments), "|", *texts):
        digest.update(str(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _symengine_version() -> str:
    module = sys.modules.get("symengine")
    return getattr(module, "__version__", "")


def package_digest() -> str:
    """The SHA-256 of the names and text of every file of this package (compiled files aside)."""
    if not _DIGEST:
        digest = hashlib.sha256()
        for root, folders, files in os.walk(PACKAGE):
            folders[:] = sorted(f for f in folders if f != "__pycache__")
            for name in sorted(files):
                path = Path(root, name)
                digest.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
        _DIGEST.append(digest.hexdigest())
    return _DIGEST[0]


def built(inputs, make):
    """The compiled kernel (``numeric.compile.Compiled``) that ``make()`` builds from ``inputs``
    (everything its formulas depend on, each with a ``repr`` that names its value): unpickled
    from disk, or made and pickled there.  The file name hashes the ``repr``s with the package's
    text (``package_digest``), so an edited formula is a new key.  Kept only where the kernel
    pickles (symengine's LLVM one) and every input's ``repr`` is its value (no ``at 0x...``)."""
    text = "\0".join(map(_named, inputs))
    path = None if " at 0x" in text else _path("build_" + key("build", [text], [package_digest()]), ".pickle")
    kept = _unpickled(path)
    if kept is not None:
        return kept
    compiled = make()
    if path is not None and compiled.backend == "llvm":
        _write(path, pickle.dumps(compiled))
    return compiled


def _named(value) -> str:
    """``repr(value)``, remembered for the same frozen dataclass: a search files its 990 kernels
    under the same model, system and conventions, whose ``repr``s took a twentieth of a search
    from disk."""
    params = getattr(value, "__dataclass_params__", None)
    if params is None or not params.frozen:
        return repr(value)
    kept = _NAMES.get(id(value))
    if kept is None or kept[0] is not value:
        if len(_NAMES) >= 256:
            _NAMES.clear()
        kept = _NAMES[id(value)] = (value, repr(value))
    return kept[1]


_NAMES: dict = {}
"""``repr``s already written, by the object's ``id`` (the object kept beside it, so the ``id`` is not reused)."""


def numpy_kernel(make, values, symbols):
    """The numpy kernel of ``values``: loaded from its source on disk, or made by ``make()``
    and its source written there."""
    path = _path(key("numpy", dag_digests(values), symbols), ".py")
    if path is not None and path.exists():
        try:
            return _load_source(path)
        except Exception:               # a damaged file: compile again
            pass
    function = make()
    if path is not None:
        _write(path, ("import numpy\n\n" + inspect.getsource(function)).encode())
    return function


def llvm_kernel(make, digests, arguments, level: str = "optimized"):
    """The LLVM kernel of the symengine expressions whose ``dag_digests`` are ``digests``, compiled at
    ``level`` (``"optimized"``, or ``"quick"``: without LLVM's optimisations, filed apart):
    unpickled from disk, or made by ``make()`` and pickled there (``make=None``: only looked up)."""
    from symbolic_cost.numeric.vector_kernel import host        # its machine code is this CPU's
    path = _path(key(f"llvm{'' if level == 'optimized' else '-quick'}|{host()}", digests, arguments), ".pickle")
    kept = _unpickled(path)
    if kept is not None or make is None:
        return kept
    function = make()
    if path is not None:
        _write(path, pickle.dumps(function))
    return function


def _unpickled(path: Path | None):
    """The object pickled in ``path``; ``None`` when there is none or it cannot be read (then
    the caller makes it again)."""
    if path is None or not path.exists():
        return None
    try:
        return pickle.loads(path.read_bytes())
    except Exception:
        return None


PARTS_LIMIT = 1 << 18
"""Parts whose digests ``dag_digests`` remembers before it starts again (a process stays bounded)."""
_PARTS: dict = {}


def dag_digests(exprs) -> list[str]:
    """What a kernel's key hashes for the SymPy or symengine ``exprs``: one digest per expression,
    the SHA-256 of its node's kind and its arguments' digests (a leaf's: its kind and ``str``), so
    equal trees give equal digests whatever parts they share.  Each distinct part is digested
    once, and remembered across calls (``trees.remembered``): a search's kernels are built from
    the same parts, and writing each kernel's whole text had cost a tenth of compiling it (``str``
    writes a part once per path to it).  The order of a node's arguments is symengine's or
    SymPy's, the same in every process (neither salts its hashes).

    >>> import symengine
    >>> b, l = symengine.symbols("b l")
    >>> first = dag_digests([(b + l) * (b + l) + 1])
    >>> len(first), len(first[0])
    (1, 64)
    >>> dag_digests([(l + b) ** 2 + 1]) == first, dag_digests([(b + l) ** 2 + 2]) == first
    (True, False)
    """
    from symbolic_cost.trees import remembered     # here: ``cache_dir`` serves the CLI before SymPy loads

    def made(node) -> str:
        text = f"{type(node).__name__}({','.join(map(digest, node.args))})" if node.args else \
            f"{type(node).__name__}:{node}"
        return hashlib.sha256(text.encode()).hexdigest()

    def digest(node) -> str:
        return remembered(_PARTS, node, made, kept=PARTS_LIMIT)
    return [digest(e) for e in exprs]


def source_path(name: str) -> Path | None:
    """Where the generated source of a kernel filed under ``name`` goes (``None``: cache off)."""
    return _path(name, ".py")


def write_text(path: Path, text: str) -> bool:
    """``text`` in ``path`` (kept if already there: the name is a hash of it); whether it is there."""
    if not path.exists():
        _write(path, text.encode())
    return path.exists()


def _path(name: str, suffix: str) -> Path | None:
    folder = cache_dir()
    return None if folder is None else folder / f"kernel_{name}{suffix}"


def _load_source(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._lambdifygenerated


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; a cache that cannot be written is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.part")
        partial.write_bytes(data)
        os.replace(partial, path)
    except OSError:
        pass
