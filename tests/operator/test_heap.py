"""release_free_memory: what a startup burst freed leaves the resident set; limit_arenas:
threads share a bounded number of malloc arenas (glibc)."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path

from controller.operator.heap import release_free_memory


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class _Node:
    def __init__(self) -> None:
        self.other: object = self


def test_a_freed_burst_leaves_the_resident_set() -> None:
    # 1 KiB blocks come from glibc's heap (Python's own arenas take only small objects), and
    # a block kept after them pins the heap's top, so only trimming inside the heap helps.
    burst = [bytes(1024) + i.to_bytes(4, "big") for i in range(150_000)]
    pin = bytes(2048)
    peak = _rss_mb()
    del burst
    assert release_free_memory() is True
    after = _rss_mb()
    assert peak - after > 100, f"only {peak - after:.1f} MB of a 150 MB burst were given back"
    assert pin


def test_cyclic_garbage_is_collected_first() -> None:
    gc.disable()
    try:
        node = _Node()
        ref = weakref.ref(node)
        del node
        assert ref() is not None  # a cycle: reference counting alone does not free it
        release_free_memory()
        assert ref() is None
    finally:
        gc.enable()


_ARENAS = """
import sys, threading, ctypes, ctypes.util
from controller.operator.heap import limit_arenas
if sys.argv[1] == "limit":
    assert limit_arenas(1)
def work():
    blocks = [bytes(1024) + i.to_bytes(4, "big") for i in range(2000)]
    done.wait(10)
done = threading.Event()
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
import time; time.sleep(0.5)
ctypes.CDLL(ctypes.util.find_library("c")).malloc_stats()
done.set()
for t in threads:
    t.join()
"""


def _arenas(mode: str) -> int:
    """Arenas glibc made while four threads allocated (malloc_stats names each on stderr)."""
    run = subprocess.run(
        [sys.executable, "-c", _ARENAS, mode], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    return sum(1 for line in run.stderr.splitlines() if line.startswith("Arena "))


def test_threads_share_the_limited_arenas() -> None:
    assert _arenas("free") > 1  # without the limit, threads get arenas of their own
    assert _arenas("limit") == 1
