"""A warm process: command lines answered by a process that has the formulas loaded already.

A fresh ``symbolic-cost summary`` spends most of its time importing (SymPy above all), and the answers on disk (``answers``) serve only a command line seen before.  With
``SYMBOLIC_COST_WARM=on`` (Linux), the first command line of ``commands()`` runs as usual and
starts a process in the background that imports the package once; every later one is sent to
that process, which forks a child for it.  The child runs ``cli.main`` on the same words, in the
caller's working directory and environment, and sends back its output and exit status, which
the caller prints: the same code as the full path, so the same answer for any values, where a
formula compiled ahead of time would have to prove that the lines it prints (which collectives,
which pipeline ranks) do not change with them.  The process ends after ``IDLE`` seconds without a
command line, or when asked (``stop``).

It is named after ``answers.code_digest`` (the package's text, the Python, the libraries) and the
``SYMBOLIC_COST_*`` settings it was started with, so an edited package or another setting starts
another one: a warm process never answers with other code.  Its socket sits in the kernel cache
(``numeric.kernel_cache.cache_dir()``), readable by its user only.  ``SYMBOLIC_COST_WARM_REPORT``,
when set, names a file the caller appends the child's CPU seconds to (for ``benchmarks/bench.py``).

This module imports only the standard library (and ``answers``, which does too): the caller
runs it before the package's formulas load.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
from os import _exit as exit_at_once        # a forked child's exit: no atexit, no flush of the parent's streams
from pathlib import Path

from symbolic_cost.cli import answers

SETTING = "SYMBOLIC_COST_WARM"
"""The environment variable that turns the warm process on (``on``, ``1``, ``true`` or ``yes``)."""

def commands() -> tuple[str, ...]:
    """The commands a warm process answers: ``cli.LIMITED``, those whose output is held until they
    end and whose work has a time budget; ``sweep`` (rows by the gigabyte), ``search`` and ``plan``
    (worker processes, progress as it goes) and the commands that write the package's files run as
    usual.  Read when asked: ``cli`` imports this module before it defines them."""
    from symbolic_cost.cli import LIMITED
    return LIMITED


IDLE = 900
"""Seconds a warm process waits for a command line before it ends."""

CONNECT = 2.0
"""Seconds the caller waits to reach a warm process before it runs the command itself."""

REQUEST_BYTES = 2**24
"""The largest request a warm process reads (a command line and an environment: kilobytes)."""

LONGEST_ADDRESS = 100
"""The longest socket path used (Linux takes 107 bytes): a longer cache folder means no warm process."""


def enabled() -> bool:
    """Whether ``SETTING`` asks for a warm process, on a system that has one (Linux: ``fork`` and
    Unix sockets; a forked child is what makes the answer cheap)."""
    return os.environ.get(SETTING, "").lower() in ("on", "1", "true", "yes") and sys.platform.startswith("linux")


def address() -> Path | None:
    """The socket of the warm process for this code and these settings, or ``None`` (no cache
    folder, or its path too long for a socket)."""
    from symbolic_cost.numeric.kernel_cache import cache_dir
    folder = cache_dir()
    if folder is None:
        return None
    settings = sorted((k, v) for k, v in os.environ.items() if k.startswith("SYMBOLIC_COST_") and k != SETTING
                      and not k.startswith(SETTING + "_"))
    path = folder / f"warm_{answers.digest(answers.code_digest(), *settings)[:20]}.sock"
    return path if len(str(path)) <= LONGEST_ADDRESS else None


def answer(words) -> int | None:
    """The exit status of ``words`` (without the program name) as a warm process answered it, its
    output printed; ``None`` (nothing printed) where none answers: the setting is off, the command
    is not one of ``commands()``, or no process is listening yet (one is started for the next)."""
    if not (words and enabled() and words[0] in commands()):
        return None
    try:
        path = address()
    except OSError:
        return None
    if path is None:
        return None
    env = dict(os.environ)
    size = shutil.get_terminal_size()       # what argparse's help wraps to here, not at the child's /dev/null
    env.setdefault("COLUMNS", str(size.columns))
    env.setdefault("LINES", str(size.lines))
    place = answers.answer_path(words) if answers.cacheable(words) else None    # keyed before the run
    try:
        reply = _ask(path, {"words": list(words), "cwd": os.getcwd(), "env": env})
        status, out, err = int(reply["status"]), str(reply["stdout"]), str(reply["stderr"])
    except (OSError, ValueError, KeyError, TypeError):      # none listening, or it went away: start one
        _start(path)
        return None
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.stdout.flush()
    if status == 0 and place is not None:        # as the full path would file it
        answers.file_answer(place, out, err)
    _report(reply.get("cpu"))
    return status


def stop(path: Path | None = None) -> bool:
    """Ask the warm process at ``path`` (default: this code's, ``address``) to end; whether one
    was reached."""
    path = path or address()
    if path is None:
        return False
    try:
        _ask(path, {"stop": True})
        return True
    except (OSError, ValueError):
        return False


def _ask(path: Path, message: dict) -> dict:
    """Send ``message`` to the warm process at ``path`` and return its reply (``OSError`` where
    none is listening within ``CONNECT`` seconds; the reply itself may take as long as the command)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(CONNECT)
        connection.connect(str(path))
        connection.settimeout(None)             # a command runs under its own time budget
        _send(connection, message)
        return _receive(connection)


def _start(path: Path) -> None:
    """Start a warm process for ``path`` in the background, detached from the caller (its own
    session; no standard streams)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.Popen(command(path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        pass


def command(path: Path) -> list[str]:
    """The command line of a warm process listening at ``path``."""
    return [sys.executable, "-c", "import sys; from symbolic_cost.cli import warm; warm.serve(sys.argv[1])", str(path)]


def _report(cpu) -> None:
    target = os.environ.get(SETTING + "_REPORT")
    if target and cpu is not None:
        try:
            with open(target, "a", encoding="utf-8") as file:
                file.write(f"{float(cpu)}\n")
        except (OSError, ValueError):
            pass


def _send(connection, message: dict) -> None:
    data = json.dumps(message).encode()
    connection.sendall(struct.pack(">Q", len(data)) + data)


def _receive(connection, largest: int = 2**40) -> dict:
    size = struct.unpack(">Q", _exactly(connection, 8))[0]
    if size > largest:
        raise ConnectionError(f"a message of {size} bytes, past the {largest} this end reads")
    return json.loads(_exactly(connection, size).decode())


def _exactly(connection, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = connection.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the connection closed mid-message")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# the process itself


def serve(path, idle: float = IDLE) -> None:
    """Listen at ``path`` until ``idle`` seconds pass without a command line or one asks to stop;
    each command line is answered by a forked child (``_run``)."""
    path = Path(path)
    if _listening(path):                            # another one is there already
        return
    # a child forked from here must not inherit a BLAS thread pool: one thread, set before NumPy loads
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from symbolic_cost.cli import main
    _warm_up(main)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staged = path.with_name(f"{path.name}.{os.getpid()}")
    listener.bind(str(staged))
    os.chmod(staged, 0o600)
    os.replace(staged, path)                        # whole, or not at all, for a caller
    mine = os.stat(path).st_ino
    listener.listen(64)
    listener.settimeout(idle)
    stop_requested = False
    try:
        while not stop_requested:
            try:
                connection, _ = listener.accept()
            except socket.timeout:
                break
            stop_requested = _dispatch(connection, listener, main)
            _reap()
    finally:
        listener.close()
        try:
            if os.stat(path).st_ino == mine:        # not a newer process's socket
                os.unlink(path)
        except OSError:
            pass


def _listening(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(CONNECT)
            probe.connect(str(path))
        return True
    except OSError:
        return False


def _warm_up(main) -> None:
    """Run one command so that what the first call of each loads (data files, caches) is loaded
    here once, and shared with every child."""
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    try:
        main(["summary", "--preset", "gpt2", "--json"])
    finally:
        sys.stdout, sys.stderr = real


def _dispatch(connection, listener, main) -> bool:
    """Answer one connection: a stop request here (``True``), a command line in a child."""
    try:
        connection.settimeout(CONNECT)
        request = _receive(connection, REQUEST_BYTES)
        connection.settimeout(None)
    except (OSError, ValueError):
        connection.close()
        return False
    if request.get("stop"):
        try:
            _send(connection, {"stopped": True})
        except OSError:
            pass
        connection.close()
        return True
    if os.fork() == 0:
        listener.close()
        _run(connection, request, main)             # never returns
    connection.close()
    return False


def _run(connection, request: dict, main) -> None:
    """In the child: run ``request``'s words where and as the caller would, send back what they
    printed and their status, and exit."""
    out, err, status = io.StringIO(), io.StringIO(), 3
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        words = [str(w) for w in request["words"]]
        sys.argv = ["symbolic-cost", *words]
        sys.stdout, sys.stderr = out, err
        status = main(words)
    except BaseException as error:                  # noqa: BLE001  reported to the caller, never lost
        err.write(f"symbolic-cost: internal error in the warm process: {type(error).__name__}: {error}\n")
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        try:
            import resource
            usage = resource.getrusage(resource.RUSAGE_SELF)
            _send(connection, {"status": status, "stdout": out.getvalue(), "stderr": err.getvalue(),
                               "cpu": usage.ru_utime + usage.ru_stime})
        except (OSError, ValueError):
            pass
        exit_at_once(0)


def _reap() -> None:
    """Collect the children that have ended (none is waited for)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
