"""The time budget: ``time_limit`` runs a piece of work for at most so many seconds of CPU time and
then refuses it with the library's ``InputError``, as any other bad input (a formula SymPy would
take minutes to simplify).  CPU time, not wall time: on a machine busy with other work a command
gets the same budget as on an idle one.  It imports only ``checks``, so every module may use it."""

from __future__ import annotations

import signal
import sys
import threading
import time
from contextlib import contextmanager

from symbolic_cost.checks import InputError


class _Expired(BaseException):
    """The timer of ``time_limit`` ran out.  Not an ``Exception``: SymPy catches those inside
    ``simplify`` and would go on where it should stop."""


AGAIN = 0.25
"""CPU seconds between further expiries once the budget is spent.  The one that ends the body can be
swallowed: Python reports and ignores an exception raised inside a finalizer (``__del__``, a weakref
callback the garbage collector runs in the middle of SymPy's work), and a single expiry lost there
let the body run on unlimited."""


@contextmanager
def time_limit(seconds, what: str, argument: str | None = None):
    """Run the body for at most ``seconds`` of the process's CPU time (user and system, every
    thread), then refuse with an ``InputError`` naming ``argument``: ``what`` says what took too
    long and how to make it smaller.

    A ``SIGPROF`` timer (``ITIMER_PROF``), so it limits only the main thread of a process on a
    system that has one (elsewhere, or with ``seconds`` None, the body runs unlimited); a body
    that waits without computing spends none of it.  Limits nest: inside another, the body gets
    at most what is left of the outer one (and where that ends first, the refusal is the outer
    one's), and on the way out the outer one goes on with what the body left of it.

    >>> with time_limit(0.05, "counting"):
    ...     while True:
    ...         pass
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: gave up after 0.05 s of CPU time: counting
    """
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    running = True

    def expire(signum, frame):
        if running:
            raise _Expired

    hook = sys.unraisablehook

    def quiet(unraisable):
        """An expiry that lands in a finalizer is lost there (``AGAIN`` fires another): say nothing of it,
        where Python would print its traceback on stderr beside the one-line refusal."""
        if not isinstance(unraisable.exc_value, _Expired):
            hook(unraisable)

    outer, _ = signal.getitimer(signal.ITIMER_PROF)        # 0: no limit around this one
    capped = bool(outer) and outer <= seconds              # the outer limit ends first
    started = time.process_time()
    previous = signal.signal(signal.SIGPROF, expire)
    sys.unraisablehook = quiet
    expired = False
    try:
        signal.setitimer(signal.ITIMER_PROF, outer if capped else seconds, AGAIN)
        try:
            yield
        finally:        # expiring on the way out (before ``running`` is cleared) is caught below
            running = False
            signal.setitimer(signal.ITIMER_PROF, 0)
    except _Expired:
        expired = True
        if capped:      # the outer limit's time ran out: its refusal, not this one's
            raise
        raise InputError(f"gave up after {seconds} s of CPU time: {what}", argument) from None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
        sys.unraisablehook = hook
        if outer and not (expired and capped):
            left = outer - (time.process_time() - started)
            signal.setitimer(signal.ITIMER_PROF, max(left, 1e-6), AGAIN)
