"""A compiled kernel as text another process loads: a Dask worker's (``numeric.grid_tasks``).

``text`` gives the key and bytes of a kernel: numba's generated module, under its cache name so
that the worker finds numba's machine code beside it; the numpy module's source; or the LLVM
backend's pickled kernel (the vector kernel's object code and IR, or symengine's).  ``load`` makes the kernel function from them again, through the kernel
cache where there is one (``numeric.kernel_cache``), else from a temporary file: imported, never
``exec``'d.
"""

from __future__ import annotations

import hashlib
import inspect
import pickle
import sys
import tempfile
from pathlib import Path

from symbolic_cost.numeric import kernel_cache, loop_kernel
from symbolic_cost.numeric.compile import Compiled
from symbolic_cost.numeric.portable import portable_all


def text(compiled: Compiled, values) -> tuple[str, bytes]:
    """The key and text a worker loads ``compiled``'s kernel (of ``values``) from: the numba
    module (under its cache name, so numba's machine code is found beside it), the numpy
    module's source, or symengine's pickle; keys other than the cached numba module's are the
    text's hash."""
    if compiled.backend == "llvm":
        code = pickle.dumps(compiled.function)
    elif compiled.backend == "numba":
        path = Path(sys.modules[compiled.function.py_func.__module__].__file__)
        if path.stem.startswith("kernel_") and path.exists():
            return path.stem, path.read_bytes()
        source = loop_kernel.module_text(portable_all(values), compiled.symbols)   # the cache is off
        code = source.replace("CACHE", "False", 1).encode()
    else:
        code = ("import numpy\n\n" + inspect.getsource(compiled.function)).encode()
    return _hash(code), code


def _hash(code: bytes) -> str:
    return "kernel_" + hashlib.sha256(code).hexdigest()[:32]


def load(backend: str, key: str, code: bytes):
    """The kernel function of ``text``'s ``key`` and ``code``: symengine's unpickled, or the
    module's (the numba kernel imported under the name numba caches it by; the numpy function
    loaded from its file)."""
    if backend == "llvm":
        return pickle.loads(code)
    folder = kernel_cache.cache_dir()
    if folder is not None:
        path = folder / f"{key}.py"
        if kernel_cache.write_text(path, code.decode()):
            return _import(path, backend)
    with tempfile.TemporaryDirectory(prefix="symbolic-cost-kernel-") as temporary:   # cache off: imported, never exec'd
        path = Path(temporary) / f"{key}.py"
        path.write_bytes(code)
        return _import(path, backend)


def _import(path: Path, backend: str):
    module = loop_kernel.import_module(path)
    return module.kernel if backend == "numba" else module._lambdifygenerated
