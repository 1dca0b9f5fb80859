"""Keep freed memory for the next chunk: the allocator settings of a chunked sweep.

A sweep evaluates a grid in chunks, and each chunk allocates its columns again: megabytes each.
glibc's ``malloc`` serves a block over its mmap threshold (128 KiB to start) with a fresh
``mmap`` and unmaps it when freed, so every chunk touches new pages: one page fault per 4 KiB.
glibc raises the threshold when such blocks are freed, but not once ``M_TRIM_THRESHOLD`` or
``M_MMAP_THRESHOLD`` has been set, and Dask's nanny sets ``MALLOC_TRIM_THRESHOLD_`` in every
worker.  A sweep of 10^8 rows in chunks of 10^6 then spends seconds of system time in
hundreds of thousands of page faults.

``keep_freed_pages`` serves blocks up to 32 MiB (glibc's largest mmap threshold on 64 bits)
from the heap and returns freed heap memory to the system only beyond 1 GiB, so the next
chunk reuses the same pages.  It changes the whole process's allocator; it is called by the
sweep loops and by each Dask task, and does nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3          # glibc's malloc.h
MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 2**30


@functools.cache
def keep_freed_pages() -> bool:
    """Set glibc's mmap and trim thresholds (module docstring), once per process; whether it
    did (``False`` off glibc, e.g. on macOS or musl)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
