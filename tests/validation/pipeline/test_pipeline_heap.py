"""heap: a verdict's freed blocks leave the resident set, and trims are spaced out."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.validation import heap


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(heap._libc("malloc_trim") is None, reason="no malloc_trim (not glibc)")
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


_LARGE_BLOCK_FREED = """
import json, sys
from controller.validation import heap
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
if sys.argv[1] == "fixed":
    assert heap.fix_mmap_threshold() is True
first = b"x" * (8 << 20)
del first  # glibc maps a block this large, and raises its threshold when it is freed
before = rss()
second = b"y" * (8 << 20)
pin = [bytes(600 + i) for i in range(64)]  # heap blocks allocated after it
del second
print(json.dumps(rss() - before))
"""


def _kept_mb(mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _LARGE_BLOCK_FREED, mode],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.skipif(heap._libc("mallopt") is None, reason="no mallopt (not glibc)")
def test_a_fixed_mmap_threshold_returns_a_freed_large_block() -> None:
    """In a fresh interpreter (the setting is for the whole process): once a freed large
    block raised glibc's threshold, the next one of that size stays resident after it is
    freed, unless the threshold was fixed."""
    assert _kept_mb("default") > 6
    assert _kept_mb("fixed") < 1
