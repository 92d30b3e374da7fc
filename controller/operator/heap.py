"""Giving the memory of a finished burst back to the system.

Startup lists every watched object twice (our own list, then kopf's) and kopf hands each
listed object to a handler of its own: at 10,000 objects per collection that is a transient
peak of several hundred megabytes. Python frees those objects, but glibc's allocator keeps
the freed pages mapped, so the resident size stays at the peak for the life of the process,
and a pod's memory limit has to be sized for a moment that never comes back.
``malloc_trim(0)`` returns the free pages at the top and inside the heap to the kernel.
Elsewhere (musl, macOS) there is nothing to call and this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from functools import cache

__all__ = ["limit_arenas", "release_free_memory"]

_M_ARENA_MAX = -8
"""glibc's mallopt parameter for the number of malloc arenas (malloc.h)."""


@cache
def _libc_function(name: str) -> ctypes._NamedFuncPointer | None:
    lib = ctypes.util.find_library("c")
    if lib is None:
        return None
    try:
        return getattr(ctypes.CDLL(lib), name)  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


def limit_arenas(count: int = 2) -> bool:
    """Let glibc keep at most ``count`` malloc arenas; True if it could be told.

    glibc gives threads arenas of their own (up to eight per core). kopf's watch threads and
    the thread pool each fill one during the startup burst, and what outlives the burst in
    each keeps that arena's pages resident. Two arenas cost no measurable speed here (the
    interpreter lock serialises the allocating threads anyway). Called before the threads
    start; arenas made earlier stay."""
    mallopt = _libc_function("mallopt")
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, count))


def release_free_memory() -> bool:
    """Collect cyclic garbage, then hand free heap pages back; True if the allocator could."""
    gc.collect()
    trim = _libc_function("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True
