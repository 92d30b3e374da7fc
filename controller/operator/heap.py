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

__all__ = ["release_free_memory"]


@cache
def _malloc_trim() -> ctypes._NamedFuncPointer | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None


def release_free_memory() -> bool:
    """Collect cyclic garbage, then hand free heap pages back; True if the allocator could."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
