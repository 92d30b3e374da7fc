"""Helpers for testing code built on this controller (like ``kopf.testing`` and
``structlog.testing``): public, typed, and used by this project's own tests.

* :class:`ManualClock` — a :class:`~controller.triggers.Clock` whose time moves only when a
  test advances it, so debounce, min-interval, resync and retry schedules are checked exactly
  and without sleeping.
"""

from __future__ import annotations

import asyncio

from controller.triggers import Clock

__all__ = ["ManualClock"]


class ManualClock(Clock):
    """Time that stands still until :meth:`advance` moves it.

    Waiters whose deadline the new time reaches are woken, and :meth:`advance` then yields to
    the event loop until the code it woke has settled (started its run, or gone back to
    waiting), so a test can assert right after it.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._due: list[tuple[float, asyncio.Event]] = []

    def now(self) -> float:
        return self._now

    async def wait(self, wake: asyncio.Event, timeout: float | None) -> bool:
        if wake.is_set():
            return True
        if timeout is not None and timeout <= 0:
            return False
        due = asyncio.Event()
        entry = (self._now + timeout, due) if timeout is not None else None
        if entry is not None:
            self._due.append(entry)
        woken = asyncio.ensure_future(wake.wait())
        elapsed = asyncio.ensure_future(due.wait())
        try:
            await asyncio.wait({woken, elapsed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            elapsed.cancel()
            if entry is not None and entry in self._due:
                self._due.remove(entry)
        return wake.is_set()

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and let what falls due run its first steps."""
        if seconds < 0:
            raise ValueError("time does not run backwards")
        self._now += seconds
        for deadline, due in list(self._due):
            if deadline <= self._now:
                due.set()
        await settle()


async def settle(rounds: int = 20) -> None:
    """Yield to the event loop ``rounds`` times: enough for woken tasks to take their next
    steps up to their next real wait."""
    for _ in range(rounds):
        await asyncio.sleep(0)
