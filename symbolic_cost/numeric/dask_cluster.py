"""Where Dask's tasks run: a ``LocalCluster`` this process starts, or a running scheduler.

``numeric.dask_sweep`` writes the tasks; ``cluster`` gives them a ``distributed.Client`` for
the length of a ``with`` block (``symbolic-cost sweep --dask``).
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from symbolic_cost.checks import InputError
from symbolic_cost.digits import whole_number


def need_dask():
    """The ``dask`` module, or an error that says how to install it."""
    try:
        import dask
        import dask.dataframe  # noqa: F401
    except ImportError:
        raise InputError("Dask sweeps need dask: python -m pip install 'symbolic_cost[dask]'") from None
    return dask


QUIET = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
         "distributed.worker.memory.monitor-interval": "1s"}
"""Dask settings of the clusters ``cluster`` starts: no statistical profiler of the workers' tasks
(a sample of every thread's stack every 10 ms, for a dashboard these clusters do not serve), and
the event loops' blocked-loop check (every 20 ms) and the memory monitors of every worker and
nanny (every 100 ms) once a second.  With Dask's defaults an idle two-worker cluster spends a
tenth of a core on this bookkeeping, which a sweep's tasks then lack."""


def local_cores() -> int:
    """The cores this process may run on (its affinity where the system says it, else the CPU
    count): the most worker processes a local cluster starts (two on a machine of one, as the
    documentation's ``--dask 2`` asks)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@contextmanager
def cluster(where: str, argument: str = "where"):
    """A ``distributed.Client`` for the body: on a ``LocalCluster`` of ``where`` worker
    processes of one thread each (a count, started and stopped here), or on the running
    scheduler at the address ``where`` (``tcp://host:8786``).  Dask's tasks go to it while it
    is open."""
    where = str(where).strip()
    if whole_number(where) and int(where) > max(2, local_cores()):
        raise InputError(f"{argument} {where}: a LocalCluster of more worker processes than this machine's "
                         f"{local_cores()} cores only shares them (each process a Python interpreter and its memory); "
                         f"give at most {max(2, local_cores())}, or a scheduler's address such as tcp://host:8786",
                         argument)
    dask = need_dask()
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("Dask clusters need distributed: python -m pip install 'symbolic_cost[dask]'", argument) from None
    if whole_number(where) and int(where) >= 1:
        with dask.config.set(QUIET):     # read as each server and worker starts
            local = LocalCluster(n_workers=int(where), threads_per_worker=1, processes=True, dashboard_address=None)
        with local, Client(local) as client:
            yield client
    elif "://" in where:
        with _connected(Client, where, argument) as client:
            yield client
    else:
        raise InputError(f"{argument} must be a number of local worker processes (at least 1) or a scheduler's "
                         f"address such as tcp://host:8786, got {where!r}", argument)


SCHEDULER_SECONDS = 30
"""How long ``cluster`` waits for a scheduler at an address to answer."""


def _connected(client_class, where: str, argument: str):
    """A client of the scheduler at ``where``; ``InputError`` where nothing there answers as one
    (a closed port, or a server of another protocol, whose reply Dask's framing once read as a
    message of 3 EiB and tried to allocate)."""
    try:
        return client_class(where, timeout=SCHEDULER_SECONDS)
    except (OSError, TimeoutError, MemoryError, ValueError, TypeError) as error:
        raise InputError(f"{argument} {where}: no Dask scheduler answered there ({type(error).__name__}); "
                         f"give the address of a running scheduler (dask scheduler prints it) or a count of local "
                         f"worker processes", argument) from None
