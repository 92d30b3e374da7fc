"""The time and size budget of one render.

The sandbox bounds single operations (``range``, ``*``, ``**``), but not their combination:
two nested loops over ``range(100000)`` run for hours, and ``{{ 'x' * 1000000 }}`` inside a
loop fills memory a megabyte per iteration. Both would stall the reconcile loop and the
admission webhook, which share the controller. So every render carries a :class:`Meter`,
charged from the hooks the generated template code already calls:

* every ``{{ expression }}`` output (``environment.htc_text``) — its length;
* every buffer join (``environment.concat``: macro bodies, ``caller()``, ``{% set %}`` and
  ``{% filter %}`` blocks) — the joined length;
* every loop iteration (``environment.htc_loop``, wrapped around each ``for`` iterable by
  the code generator) — the literal text of the loop body, known at compile time.

Text is counted where it is produced, so a macro's result is counted when it is built and
again when it is output; the limit is on the work done, not on the final size (which the
renderer checks exactly, in bytes, before joining an output). The clock is read on every
256th charge, and before every chunk of a long loop (see :func:`metered_loop`): cheap enough
for renders of 10,000 Ingresses, frequent enough to stop a loop within milliseconds of its
deadline.

The limits are ``spec.render`` (defaults: 30 s and 64 MiB; the quickstart over 10,000
Ingresses takes about 2 s and 4.4 MB counted, for 3.9 MB of files).

The meter lives in a context variable, so renders in different threads (reconcile and
admission) each see their own; outside a render the hooks charge nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import chain, islice

from controller.render.grown import GrownList
from controller.resources import FrozenDict

__all__ = [
    "BudgetExceeded",
    "Meter",
    "current",
    "metered_loop",
]

_CHECK_EVERY = 256


class BudgetExceeded(Exception):
    """Raised inside a template when the render's budget is spent.

    Templates have no ``try``, and no filter of ours catches a broad ``Exception``, so it
    travels straight up to the renderer, which turns it into a budget record.
    """

    def __init__(self, budget: str, limit: float, used: float) -> None:
        self.budget, self.limit, self.used = budget, limit, used
        if budget == "renderTime":
            text = f"the render ran longer than its budget of {limit:g}s (spec.render.timeout)"
        else:
            text = (
                f"the render produced more than its budget of {int(limit):,} bytes of text "
                "(spec.render.maxOutputBytes)"
            )
        super().__init__(text)


@dataclass(slots=True)
class Meter:
    """What one render may still spend: text (``max_chars``) and time (``deadline``)."""

    timeout: float
    max_chars: int
    used_chars: int = 0
    spent: float = 0.0
    """Seconds of template execution of the outputs already finished."""
    deadline: float = float("inf")
    started: float = 0.0
    _ticks: int = 0

    def start(self) -> None:
        """Begin (or resume) charging time, for the next output."""
        self.started = time.perf_counter()
        self.deadline = self.started + self.timeout - self.spent

    def stop(self) -> None:
        """Stop charging time (hooks and rules run between outputs on their own budgets)."""
        self.spent += time.perf_counter() - self.started
        self.deadline = float("inf")

    def charge(self, chars: int) -> None:
        used = self.used_chars + chars
        self.used_chars = used
        if used > self.max_chars:
            raise BudgetExceeded("outputBytes", self.max_chars, used)
        self._ticks += 1
        if not self._ticks % _CHECK_EVERY:
            self.check_time()

    def check_time(self) -> None:
        now = time.perf_counter()
        if now > self.deadline:
            raise BudgetExceeded("renderTime", self.timeout, self.spent + now - self.started)


_CURRENT: ContextVar[Meter | None] = ContextVar("htc_render_meter", default=None)


def current() -> ContextVar[Meter | None]:
    """The context variable the renderer sets for the duration of a render."""
    return _CURRENT


_SMALL = 64
"""Loops over at most this many items are charged up front (see :func:`metered_loop`)."""

_SIZED = frozenset({list, tuple, range, dict, FrozenDict, GrownList})


def metered_loop(iterable: Iterable[object], chars: int) -> Iterable[object]:
    """``for`` over ``iterable``, charging ``chars`` (the body's literal text) per item.

    Most loops of a configuration template are short (the ports of a Service, the endpoints
    of a slice) and run thousands of times: those are charged once, up front, and iterate
    natively. A long loop over a container is charged a chunk of :data:`_SMALL` items at a
    time, each chunk before its first item, with the clock read at every chunk, so that
    even a body without output (a ``{% set %}`` growing a string) meets the clock. Any other
    iterable (a generator, whose items may depend on what the body did) is charged item by
    item.
    """
    meter = _CURRENT.get()
    if meter is None:
        return iterable
    if type(iterable) in _SIZED:
        n = len(iterable)  # type: ignore[arg-type]
        if n <= _SMALL:
            # meter.charge(n * chars), written out: a full render at 10,000 Ingresses
            # starts some 30,000 loops, and the call cost more than the charge.
            used = meter.used_chars = meter.used_chars + n * chars
            if used > meter.max_chars:
                raise BudgetExceeded("outputBytes", meter.max_chars, used)
            ticks = meter._ticks = meter._ticks + 1
            if not ticks % _CHECK_EVERY:
                meter.check_time()
            return iterable
        return chain.from_iterable(_chunks(iter(iterable), n, chars, meter))
    return _each(iterable, chars, meter)


def _chunks(
    items: Iterator[object], n: int, chars: int, meter: Meter
) -> Iterator[Iterable[object]]:
    """The ``n`` items of a container, as lazy slices of :data:`_SMALL` items, each charged
    (and the clock read) before it is handed out; ``chain.from_iterable`` runs through them
    without a Python call per item (at 10,000 Ingresses, the 10,000 backends of haproxy.cfg
    pass here on every render, the render after a one-Ingress change included).

    The slices take the items from the one iterator, as the loop would, one at a time, when
    the loop asks for them. Should the container yield more than its length said (a
    template cannot change one), the rest is charged item by item."""
    for start in range(0, n, _SMALL):
        size = min(_SMALL, n - start)
        used = meter.used_chars = meter.used_chars + size * chars
        if used > meter.max_chars:
            raise BudgetExceeded("outputBytes", meter.max_chars, used)
        meter._ticks += 1
        meter.check_time()
        yield islice(items, size)
    yield _each(items, chars, meter)


def _each(iterable: Iterable[object], chars: int, meter: Meter) -> Iterator[object]:
    charge = meter.charge
    for item in iterable:
        charge(chars)
        yield item
