"""What a command says while it works: what it loaded, and steps that take a while.

A step that finishes within a second says nothing (most runs); one still running after a
second says so on stderr, and how long it took once done, so that 6,000 manifests or a large
render never look like a hang. Reports stay alone on stdout.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from controller.resources import Store

__all__ = ["SLOW_STEP_SECONDS", "loaded_summary", "step"]

SLOW_STEP_SECONDS = 1.0


@contextmanager
def step(label: str, *, after: float = SLOW_STEP_SECONDS) -> Iterator[None]:
    """``label…`` on stderr if the block is still running after ``after`` seconds, then
    ``label: done in N s``."""
    started = time.perf_counter()
    said = threading.Event()

    def say() -> None:
        said.set()
        print(f"{label}…", file=sys.stderr, flush=True)

    timer = threading.Timer(after, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if said.is_set():
            took = time.perf_counter() - started
            print(f"{label}: done in {took:.1f} s", file=sys.stderr, flush=True)


def loaded_summary(store: Store, files: int | None = None) -> str:
    """``loaded 6000 objects (2000 EndpointSlice, 2000 Ingress, 2000 Service) from 3 files``
    — per kind, what the store holds (an object two collections watch counts once)."""
    kinds: Counter[str] = Counter()
    seen: set[tuple[str, str, str, str]] = set()
    for name in store.names():
        for obj in store.collection(name).list():
            meta = obj.get("metadata") or {}
            key = (
                str(obj.get("apiVersion")),
                str(obj.get("kind")),
                str(meta.get("namespace") or ""),
                str(meta.get("name") or ""),
            )
            if key not in seen:
                seen.add(key)
                kinds[str(obj.get("kind"))] += 1
    total = sum(kinds.values())
    per_kind = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    out = f"loaded {total} object{'s' if total != 1 else ''}"
    if per_kind:
        out += f" ({per_kind})"
    if files is not None:
        out += f" from {files} file{'s' if files != 1 else ''}"
    return out
