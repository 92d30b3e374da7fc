"""Per-run identities for the privilege drop."""

from __future__ import annotations

import os
import threading

from controller.validation.sandbox.policy import SandboxError

__all__ = ["SANDBOX_UID_BASE", "UID_SLOTS", "uids"]

SANDBOX_UID_BASE = 1_000_000_000
"""First uid of the per-run identities (an unassigned range; no passwd entry is needed).

Each controller process owns the block ``BASE + pid * UID_SLOTS`` and hands its slots to
concurrent runs, so two controllers (or test runs) on one host never share a uid: the sweep
that kills a run's leftovers by uid can only ever hit that run. With the largest pid_max
(2^22) the range stays below 2^31, which some tools treat as a signed number."""

UID_SLOTS = 64


class _UidPool:
    """Per-run uids, unique across threads, loops and processes of this host."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: set[int] = set()

    def take(self) -> int:
        base = SANDBOX_UID_BASE + os.getpid() * UID_SLOTS
        with self._lock:
            for i in range(UID_SLOTS):
                if i not in self._used:
                    self._used.add(i)
                    return base + i
        raise SandboxError(f"more than {UID_SLOTS} concurrent sandboxes in one process")

    def give(self, uid: int) -> None:
        with self._lock:
            self._used.discard((uid - SANDBOX_UID_BASE) % UID_SLOTS)


uids = _UidPool()
