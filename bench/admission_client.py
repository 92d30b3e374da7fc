"""The burst's HTTPS client, in a process of its own, as the API server is.

    python bench/admission_client.py URL CA_FILE BODIES_FILE

``BODIES_FILE`` holds one AdmissionReview per line. The client opens its session, prints
``ready``, waits for a line on stdin, then posts every review at once (one connection each,
as many as there are reviews) and prints one JSON object: each review's latency in ms and
whether it was allowed, in the order of the file, and this process's CPU time during the
burst (``burstCpuMs``) and in all (``totalCpuMs``).

``bench/admission.py`` runs it so that the client's work (its TLS handshakes, building the
requests, reading the answers) is not done on the controller's event loop and interpreter,
which an API server's is not either; it still runs on the same cores.
"""

from __future__ import annotations

import asyncio
import json
import resource
import ssl
import sys
import time

import aiohttp


def _cpu_ms() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return (own.ru_utime + own.ru_stime) * 1000


async def post(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[float, bool]:
    t0 = time.perf_counter()
    async with session.post(url, data=body) as resp:
        doc = await resp.json()
    answer = doc["response"]
    if not answer["allowed"]:
        print("denied:", answer["status"]["message"][:300], file=sys.stderr)
    return (time.perf_counter() - t0) * 1000, bool(answer["allowed"])


async def _main(url: str, ca: str, bodies: list[bytes]) -> dict[str, object]:
    ctx = ssl.create_default_context(cafile=ca)
    connector = aiohttp.TCPConnector(ssl=ctx, limit=len(bodies))
    async with aiohttp.ClientSession(connector=connector) as session:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        cpu0 = _cpu_ms()
        results = await asyncio.gather(*(post(session, url, body) for body in bodies))
        burst_cpu = _cpu_ms() - cpu0
    return {
        "ms": [round(ms, 3) for ms, _ in results],
        "allowed": [ok for _, ok in results],
        "burstCpuMs": round(burst_cpu, 3),
        "totalCpuMs": round(_cpu_ms(), 3),
    }


def main() -> int:
    url, ca, path = sys.argv[1:4]
    with open(path, "rb") as f:
        bodies = [line.rstrip(b"\n") for line in f if line.strip()]
    print(json.dumps(asyncio.run(_main(url, ca, bodies))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
