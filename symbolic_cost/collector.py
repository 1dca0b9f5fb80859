"""``paused``: the interpreter's cycle collector held off while the library builds formulas.

A build allocates tens of thousands of objects that stay alive (SymPy's nodes, the keys of its
caches) and almost no garbage in cycles: a cold ``search`` runs over a thousand collections,
some of them full passes over hundreds of thousands of objects, and frees a few thousand
objects in all.  The collector is triggered by allocations, not by garbage, so it keeps walking
objects that are still in use.

Inside ``paused`` the collector is off; on leaving it is on again if it was on when the
outermost ``paused`` began (a process that turned it off keeps it off).  Reference counting
frees everything else as usual; the objects allocated meanwhile meet the collector at its
next pass, once, instead of at every pass of the build.  Threads share the collector, so the
pauses nest across threads: it comes back when the last of them ends.  A process forked inside
a pause (a search's worker processes) keeps the collector off: it ends with the search.

>>> import gc
>>> with paused():
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import contextlib
import gc
import threading

_LOCK = threading.Lock()
_state = {"depth": 0, "was_on": False}


@contextlib.contextmanager
def paused():
    """Hold the cycle collector off for the ``with`` block (or the decorated function's call)."""
    with _LOCK:
        if _state["depth"] == 0:
            _state["was_on"] = gc.isenabled()
            gc.disable()
        _state["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _state["depth"] -= 1
            if _state["depth"] == 0 and _state["was_on"]:
                gc.enable()
