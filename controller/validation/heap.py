"""Handing the heap a judgement freed back to the system.

Rendering and judging a large candidate is a burst: a 10,000-Ingress configuration is parsed,
tokenised, checked and handed to ``haproxy -c``, and most of what that builds is garbage once
the verdict is out. Python frees it, but glibc's allocator keeps freed pages mapped wherever a
live block sits above them, so each verdict leaves some tens of megabytes resident that only
the next burst reuses (measured with ``htc local`` at 10,000 Ingresses, Services and
EndpointSlices: the resident set climbed from 396 to 440 MB over the first changes and stayed
there, of which ``malloc_trim`` gave back 20-45 MB at 2-4 ms a call).

So after a verdict whose stages ran, :func:`release_soon` trims in a worker thread (ctypes
releases the interpreter lock for the call) — at most once per :data:`MIN_INTERVAL_S`, so a
burst of admission reviews does not trim after each. Elsewhere than glibc (musl, macOS) there
is no ``malloc_trim`` and this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import threading
import time
from collections.abc import Callable
from functools import cache

__all__ = [
    "MIN_INTERVAL_S",
    "MMAP_THRESHOLD",
    "fix_mmap_threshold",
    "limit_arenas",
    "release_soon",
    "trim_heap",
]

MIN_INTERVAL_S = 1.0
"""The shortest time between two trims started by :func:`release_soon`."""

_lock = threading.Lock()
_last = float("-inf")
_running = False


MMAP_THRESHOLD = 256 * 1024
"""Blocks from this size up get pages of their own (see :func:`fix_mmap_threshold`)."""
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
"""glibc's mallopt parameter numbers (malloc.h)."""


@cache
def _libc(name: str) -> Callable[..., int] | None:
    lib = ctypes.util.find_library("c")
    if lib is None:
        return None
    try:
        function: Callable[..., int] = getattr(ctypes.CDLL(lib), name)
    except (OSError, AttributeError):
        return None
    return function


def trim_heap() -> bool:
    """Return the allocator's free pages to the kernel now; False where there is no
    ``malloc_trim``."""
    trim = _libc("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True


def fix_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Give every block of ``size`` bytes or more pages of its own, for good; True if glibc
    could be told.

    glibc starts by mapping blocks of 128 kB and up separately, and unmaps them when they are
    freed. But freeing such a block raises that threshold to the block's size, so from the
    first freed rendering on, each ``haproxy.cfg`` text (2.6 MB at 10,000 Ingresses), its
    encoded copy and the large tables of a render land in the heap, where whatever small
    block is allocated above them keeps their pages resident. A fixed threshold keeps them
    mapped and unmapped: ``htc local`` at 10,000 Ingresses, Services and EndpointSlices peaks
    some 25 MB lower. The cost is a system call and fresh pages per large block, a few per
    render."""
    mallopt = _libc("mallopt")
    return mallopt is not None and bool(mallopt(_M_MMAP_THRESHOLD, size))


def limit_arenas(count: int = 2) -> bool:
    """Let glibc keep at most ``count`` malloc arenas; True if it could be told.

    glibc gives threads arenas of their own (up to eight per core). kopf's watch threads and
    the thread pool each fill one during the startup burst, and what outlives the burst in
    each keeps that arena's pages resident. Two arenas cost no measurable speed here (the
    interpreter lock serialises the allocating threads anyway). Called before the threads
    start; arenas made earlier stay."""
    mallopt = _libc("mallopt")
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, count))


def release_soon() -> bool:
    """Start a trim in the running loop's default executor, unless one runs or the last began
    less than :data:`MIN_INTERVAL_S` ago; True if one was started."""
    global _last, _running
    now = time.monotonic()
    with _lock:
        if _running or now - _last < MIN_INTERVAL_S:
            return False
        _running, _last = True, now
    try:
        asyncio.get_running_loop().run_in_executor(None, _trim_and_finish)
    except RuntimeError:  # no running loop (or it is closing): nothing to schedule on
        with _lock:
            _running = False
        return False
    return True


def _trim_and_finish() -> None:
    global _running
    try:
        trim_heap()
    finally:
        with _lock:
            _running = False
