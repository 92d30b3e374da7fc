"""Keeping the cyclic garbage collector out of the syntax stage.

A cold parse of a 7,000-line configuration allocates some 40,000 container objects (tokens,
directives, sections, tuples) that all survive: they *are* the result, and none of them forms
a reference cycle. The collector, triggered every 700 allocations, walks them again and again
and frees nothing — measured: about 2.5 ms of a 30 ms stage, occasionally a full collection of
the whole heap — and the syntax stage is on the path every candidate must clear before
``haproxy -c`` may start. Paused, the young objects are examined once, later, by the first
collection after the pause; correctness and memory are unaffected (memory is still freed by
reference counting; cycles are only collected later). The pipeline holds one pause over a whole
validate call (for :data:`MAX_PAUSE_S` at most), so that this first collection comes after the
verdict rather than on its critical path.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["GcPause", "paused_gc"]

_lock = threading.Lock()
_depth = 0
_resume = False
_since = 0.0

MAX_PAUSE_S = 2.0
"""The longest the collector stays off for one pause holder: the pipeline ends its pause after
this long even if its stages are still running, and overlapping pauses (validations back to
back on two CPUs), which may keep the depth above zero indefinitely, make the next pause to
begin collect first once the collector has been off this long."""


class GcPause:
    """One pause that can end at a point of the caller's choosing (the pipeline ends its
    pause once ``haproxy -c`` has been spawned, so the deferred collection runs while the
    check does). :meth:`end` is idempotent. Pauses nest and may overlap across threads:
    collection is enabled again only when the last one ends, and only if it was enabled
    when the first one began."""

    __slots__ = ("_active",)

    def __init__(self) -> None:
        self._active = False

    def begin(self) -> GcPause:
        global _depth, _resume, _since
        with _lock:
            if not self._active:
                self._active = True
                if _depth == 0:
                    _resume = gc.isenabled()
                    _since = time.monotonic()
                    gc.disable()
                elif _resume and time.monotonic() - _since > MAX_PAUSE_S:
                    gc.collect()
                    _since = time.monotonic()
                _depth += 1
        return self

    def end(self) -> None:
        global _depth
        with _lock:
            if not self._active:
                return
            self._active = False
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable automatic collection for the block (see :class:`GcPause`)."""
    pause = GcPause().begin()
    try:
        yield
    finally:
        pause.end()
