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

The pause is process-wide: CPython has one collector, so it cannot be scoped to a thread or a
task. ``htc run`` shares its process with kopf's watch threads and the admission webhook, so
``bench/gc_pause.py`` measures what the pause does to them: the controller's loop serves
AdmissionReviews over HTTPS (the real webhook server and judge, quickstart, 100 Ingresses) and
runs a steady stream of validations (a new candidate every 0.25 s after the last verdict), while
a watch thread receives 50 object events per second and hands them to that loop; a driver
process posts one review per second (one at a time) and streams the events. Three modes, 30 s
each in a fresh process, 2 rounds per run, 2 runs; each cell: the two runs' medians.

==============================  =============  =============  =============
figure                          whole call     stage only     no pause
==============================  =============  =============  =============
webhook p99 (ms)                2,287 / 3,077  3,298 / 4,871  4,030 / 4,594
watch event to store p99 (ms)   213 / 397      1,014 / 1,580  823 / 1,102
longest single collection (ms)  119 / 147      1,331 / 1,843  1,074 / 1,057
==============================  =============  =============  =============

Collections per 30 s round (gen 0, 1, 2): whole call 54-73, 4-6, 0; stage only 126-157,
11-14, 1; no pause 115-145, 10-13, 0-1. ("Whole call" is this design; "stage only" keeps just
the syntax stage's own pauses.) The pause does not hurt the webhook or the watches; it helps
them. Without it the collector runs twice as often during validation, promotes the stages'
short-lived objects, and reaches a full collection of the whole heap (7 of 8 rounds), which
held the GIL for 0.8-2.9 s here while every thread of the process waited; with it, no round saw
a full collection. The whole-call pause had the lowest watch p99 and the shortest longest
collection in every round, and the lowest webhook p99 in 3 of 4. The machine's two cores were
shared with other work (load average above 10): absolute latencies are inflated several times.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["GcPause", "collect_young", "paused_gc"]

_lock = threading.Lock()
_depth = 0
_resume = False
_since = 0.0

ONE_EVALUATION = 2
"""Pauses one evaluation holds at most: :func:`controller.validation.service.evaluate`'s
from the render to the verdict and the pipeline's own over its stages. More held at once
means another validation is in flight (see :func:`collect_young`)."""

MAX_PAUSE_S = 2.0
"""The longest the collector stays off for one pause holder: the pipeline ends its pause after
this long even if its stages are still running, and overlapping pauses (validations back to
back on two CPUs), which may keep the depth above zero indefinitely, make the next pause to
begin collect first once the collector has been off this long: what the collector's own counts
make due (:func:`_due`), as it would have collected had it been on. It used to collect the
whole heap there: a burst of 150 admission proposals at 1,000 Ingresses keeps the pauses
overlapping for its whole length, and paid 9 such collections of 164 ms each, about 10 ms of
CPU per proposal (after the change: young collections, the middle one and the oldest when
their counts come due)."""


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
                    gc.collect(_due(2))
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


def collect_young() -> None:
    """Examine, once, the young objects the pauses kept from the collector, now: the
    pipeline calls this once ``haproxy -c`` runs, when this thread would otherwise wait.

    A render of the quickstart at 10,000 Ingresses with one Ingress changed leaves only some
    750 new containers alive, but they hold 1.2 million references (its lists and tables of
    10,000-20,000 entries), and the first collection after the render walks them all: 20-30
    ms. :func:`controller.validation.service.evaluate` holds one pause from the render to the
    verdict, so that walk happens here, beside ``haproxy -c`` on the other CPU, instead of at
    the end of the render, on the way to the verdict. Nothing happens when no pause is held,
    or when the collector was off before the first one began (then it stays off).

    The middle generation is collected with the youngest when its own collection is due (it
    would come at the first allocation after the pause, on the way to the deployment); the
    oldest is left to the collector's own rule.

    Only while no other validation holds a pause (at most :data:`ONE_EVALUATION` pauses are
    held, the ones of the caller's own evaluation). When others are in flight — a burst of
    admission proposals, renders and checks overlapping on two CPUs — there is no idle CPU
    for this walk to hide on, and its objects are still alive in the other validations: a
    collection per proposal walked them again and again and promoted them, and the
    promotions brought whole-heap collections at the catch-ups. Measured (``bench/admission``
    1,000 Ingresses, 150 proposals at once, 6 runs alternated with the walk at every
    proposal, load 7-11): the burst's collections 756-1,707 ms with 2 whole-heap ones ->
    357-635 ms with 1 (in a burst of 40, 38 of the 40 calls found 3 or 4 pauses held); the
    process's own CPU per proposal 31.6-42.4 -> 31.0-39.3 ms. The young objects are then
    examined by the catch-ups (:data:`MAX_PAUSE_S`) or once the last pause ends, as the
    collector would."""
    with _lock:
        due = 0 < _depth <= ONE_EVALUATION and _resume
    if due:
        gc.collect(_due(1))


def _due(oldest: int) -> int:
    """The oldest generation, up to ``oldest``, whose collection the collector's own counts
    make due (a generation's count of collections of the one below reached its threshold);
    the youngest when none is. A collection of a generation includes the younger ones. The
    collector itself also skips the oldest while it grew by less than a quarter since its
    last collection; that figure is not visible from Python, so this collects it as often or
    more often, never less."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    for generation in range(oldest, 0, -1):
        if counts[generation] >= thresholds[generation]:
            return generation
    return 0
