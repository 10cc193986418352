"""Start-up tuning of glibc's malloc, so the operator's RSS stays near what Python really holds."""

from __future__ import annotations

import ctypes
import os

# glibc's mallopt() parameter numbers, and the environment variables that set them instead
M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8
MALLOC_TUNING = ((M_ARENA_MAX, 2, "MALLOC_ARENA_MAX"), (M_MMAP_THRESHOLD, 128 * 1024, "MALLOC_MMAP_THRESHOLD_"))


def tune_malloc() -> None:
    """Keep the operator's RSS near what Python really holds.

    Two arenas instead of glibc's up to 8 per core: every thread that allocates
    (informers, executors, subprocess watchers) may get its own, and freed
    memory stays behind in each. A fixed 128 KiB mmap threshold: glibc
    otherwise raises it after each large free, so transient buffers (Helm's
    JSON output, list and watch bodies) stay in a heap that is rarely trimmed.
    The measurements are in docs/benchmarks.md (memory). The environment
    variables win."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return  # not glibc: musl and others tune differently
    for param, value, variable in MALLOC_TUNING:
        if not os.environ.get(variable):
            libc.mallopt(param, value)
