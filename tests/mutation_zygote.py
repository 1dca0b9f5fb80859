"""A process that imports the test suite's libraries once, then forks one test run for each request.

The mutation check (``tests/mutations.py``) runs ``pytest`` on a mutated copy of the package some
three hundred times. A fresh interpreter spends about a second of each run importing pytest,
hypothesis, SymPy, NumPy and pandas before the first test; a child forked from this process starts
with them imported, and imports only the package itself, from the copy. The package is never
imported here: the check is about the copy, and a child refuses to run if the package is already
loaded, or loads from anywhere but the copy.

Protocol, one JSON object a line: a request ``{"root", "args", "env", "stdout", "stderr"}`` runs
``pytest.main(args)`` in ``root`` with ``env`` set and its output written to the two files; the answer
is ``{"returncode": ...}`` (pytest's exit status, or ``CRASHED`` when the child could not run the
tests; negative for a signal). The process ends when its standard input closes. Unix only
(``os.fork``); ``mutations.run_tests`` falls back to a fresh interpreter elsewhere.
"""

from __future__ import annotations

import os
import sys

# a forked child must not inherit a BLAS thread pool (forking one can hang the child): one thread
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == HERE:
    sys.path.pop(0)         # this folder is the working tree's tests: a child imports the copy's

import gc  # noqa: E402
import json  # noqa: E402
import traceback  # noqa: E402

import hypothesis  # noqa: E402,F401  (imported once, here: what each run would import again)
import numpy  # noqa: E402,F401
import pandas  # noqa: E402,F401
import pytest  # noqa: E402
import sympy  # noqa: E402,F401

CRASHED = 3
"""The status of a child that could not run the tests (pytest's own internal-error status)."""

PACKAGE = "symbolic_cost"


def _loaded() -> bool:
    return any(name == PACKAGE or name.startswith(PACKAGE + ".") for name in sys.modules)


def run(request: dict) -> None:
    """In a forked child: the tests of ``request``, then exit with pytest's status (never returns)."""
    code = CRASHED
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        root = request["root"]
        os.chdir(root)
        os.environ.update(request["env"])
        sys.path.insert(0, root)
        sys.dont_write_bytecode = True
        if _loaded():
            raise RuntimeError(f"{PACKAGE} was imported before the run: the run would not test the copy")
        import symbolic_cost
        if not os.path.abspath(symbolic_cost.__file__).startswith(os.path.abspath(root)):
            raise RuntimeError(f"{PACKAGE} loads from {symbolic_cost.__file__}, not from the copy under {root}")
        code = int(pytest.main(request["args"]))
    except BaseException:           # noqa: BLE001 (a child reports every failure as its status)
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    """Answer requests from standard input, one child at a time, until it closes."""
    if _loaded():
        raise RuntimeError(f"{PACKAGE} is imported in the zygote itself")
    answers = sys.stdout
    # what is imported now lives as long as every child: kept out of the collector's reach, so a
    # child's collections (pytest forces some at its end) do not walk SymPy's and pandas' objects again
    gc.freeze()
    for line in sys.stdin:
        request = json.loads(line)
        answers.flush()
        pid = os.fork()
        if pid == 0:
            run(request)
        _, status = os.waitpid(pid, 0)
        answers.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve()
