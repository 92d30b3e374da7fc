"""htc local's glibc mmap threshold: blocks of a render's per-object tables leave the resident
set when freed, even with small blocks allocated after them (controller.local.app)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from controller.local.app import MMAP_THRESHOLD
from controller.validation import heap

_TABLES_FREED = """
import json, sys
from controller.validation import heap
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
assert heap.fix_mmap_threshold(int(sys.argv[1])) is True
before = rss()
tables, pins = [], []
for i in range(200):
    tables.append([None] * 12_000)  # one slot per object: 96 kB
    pins.append(bytes(700 + i % 7))  # a small heap block allocated after it
grown = rss() - before
del tables
print(json.dumps([grown, rss() - before]))
"""


def _rss_growth(threshold: int) -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, "-c", _TABLES_FREED, str(threshold)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    grown, kept = json.loads(done.stdout.strip().splitlines()[-1])
    return float(grown), float(kept)


@pytest.mark.skipif(heap._libc("mallopt") is None, reason="no mallopt (not glibc)")
def test_freed_tables_leave_the_resident_set() -> None:
    """In fresh interpreters (the setting is for the whole process): 200 tables of 96 kB,
    each followed by a small block, then freed. With the heap module's 256 KiB they stay
    resident (the small blocks pin them); with htc local's threshold they go back."""
    assert MMAP_THRESHOLD < 96_000 < heap.MMAP_THRESHOLD
    grown, kept = _rss_growth(heap.MMAP_THRESHOLD)
    assert grown > 15 and kept > 15
    grown, kept = _rss_growth(MMAP_THRESHOLD)
    assert grown > 15 and kept < 3
