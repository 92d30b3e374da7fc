"""The time line a trigger schedules on: reading it, and waiting on it.

The reconcile trigger decides *when* to run from this clock (debounce, min interval, resync,
retry back-off) and waits on the same clock, so a test can substitute a clock whose time moves
only when told to (``controller.testing.ManualClock``) and check every schedule exactly,
without sleeping and without a margin for a slow machine.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["Clock"]


class Clock:
    """Monotonic seconds of the real world (the default)."""

    def now(self) -> float:
        return time.monotonic()

    async def wait(self, wake: asyncio.Event, timeout: float | None) -> bool:
        """Until ``wake`` is set (True) or ``timeout`` seconds of this clock passed (False);
        None waits for ``wake`` only."""
        try:
            await asyncio.wait_for(wake.wait(), timeout)
        except TimeoutError:
            return False
        return True
