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

__all__ = ["MIN_INTERVAL_S", "release_soon", "trim_heap"]

MIN_INTERVAL_S = 1.0
"""The shortest time between two trims started by :func:`release_soon`."""

_lock = threading.Lock()
_last = float("-inf")
_running = False


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def trim_heap() -> bool:
    """Return the allocator's free pages to the kernel now; False where there is no
    ``malloc_trim``."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


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
