"""A steady request loop through HAProxy, counting what a reload costs clients.

Each request is a new TCP connection (``Connection: close``): that is the case a reload can
break (a listener handed from the old worker to the new one), and a keep-alive client would
hide it behind its own retries. Bounded in requests and in time; the addresses are the
caller's, and must be loopback or test pods (docs/development.md).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class LoopCounts:
    requests: int = 0
    ok: int = 0
    non_2xx: int = 0
    errors: int = 0
    bodies: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)
    """The first few failures, for the assertion message."""

    def to_dict(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "ok": self.ok,
            "non_2xx": self.non_2xx,
            "connection_errors": self.errors,
            "distinct_bodies": len(self.bodies),
        }


async def _one(addr: str, port: int, timeout: float) -> tuple[int, str]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection(addr, port), timeout)
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: loop.test\r\nConnection: close\r\n\r\n")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ConnectionError(f"no HTTP answer ({len(data)} bytes)")
    return int(parts[1]), body.decode(errors="replace")


async def request_loop(
    endpoints: Sequence[tuple[str, int]],
    stop: asyncio.Event,
    *,
    workers: int = 4,
    max_requests: int = 200_000,
    max_seconds: float = 120.0,
    timeout: float = 5.0,
) -> LoopCounts:
    """Send requests round-robin over ``endpoints`` until ``stop`` is set (or a bound hits)."""
    counts = LoopCounts()
    deadline = time.monotonic() + max_seconds

    async def worker(n: int) -> None:
        i = n
        while not stop.is_set() and counts.requests < max_requests:
            if time.monotonic() >= deadline:
                return
            addr, port = endpoints[i % len(endpoints)]
            i += 1
            counts.requests += 1
            try:
                status, body = await _one(addr, port, timeout)
            except (OSError, TimeoutError, ConnectionError) as exc:
                counts.errors += 1
                if len(counts.samples) < 5:
                    counts.samples.append(f"{addr}:{port} {exc!r}")
                continue
            if 200 <= status < 300:
                counts.ok += 1
                counts.bodies[body] += 1
            else:
                counts.non_2xx += 1
                if len(counts.samples) < 5:
                    counts.samples.append(f"{addr}:{port} HTTP {status}")

    await asyncio.gather(*(worker(n) for n in range(workers)))
    return counts
