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

import gc

from controller.validation import fix_mmap_threshold, limit_arenas, trim_heap

__all__ = ["fix_mmap_threshold", "limit_arenas", "release_free_memory"]


def release_free_memory() -> bool:
    """Collect cyclic garbage, then hand free heap pages back; True if the allocator could."""
    gc.collect()
    return trim_heap()
