"""heap: a verdict's freed blocks leave the resident set, and trims are spaced out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller.validation import heap


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(heap._malloc_trim() is None, reason="no malloc_trim (not glibc)")
def test_trimming_gives_freed_blocks_back() -> None:
    # 1 KiB blocks come from glibc's heap (Python's own arenas take only small objects), and
    # a block allocated after them pins the heap's top: only a trim inside the heap helps.
    burst = [bytes(1024) + i.to_bytes(4, "big") for i in range(150_000)]
    pin = bytes(2048)
    peak = _rss_mb()
    del burst
    assert heap.trim_heap() is True
    assert peak - _rss_mb() > 100
    assert pin


def test_release_soon_runs_once_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_last", float("-inf"))  # as if none ran in this process yet

    async def twice() -> tuple[bool, bool]:
        first = heap.release_soon()
        second = heap.release_soon()  # within MIN_INTERVAL_S: skipped
        await asyncio.sleep(0.2)
        return first, second

    assert asyncio.run(twice()) == (True, False)
    assert not heap._running  # the trim ran and finished
    assert heap.release_soon() is False  # no running loop: nothing is scheduled
