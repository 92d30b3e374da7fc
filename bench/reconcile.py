"""Benchmark of the reconcile loop in local mode: store change → confirmed HAProxy reload.

    python bench/reconcile.py [--objects 1000] [--haproxy BIN] [--samples 20] --json

Runs the real ``htc local`` stack (directory adapter, store, reconcile trigger, the full
pipeline, the master-socket target, a supervised HAProxy) over a scratch copy of the
quickstart with N generated Ingresses, N Services and N EndpointSlices (five endpoints each,
loopback addresses: nothing is contacted). Then:

* **latency** — ``--samples`` single changes to one Ingress written straight to the store,
  each after the loop has been quiet for ``minInterval`` (so the leading edge applies); the
  time from the ``store.apply`` call to the moment the target has HAProxy's confirmation of
  the reload. Reported as p50/p99, and ``cpuMs``: the median CPU time this process spent
  over a sample (render, judgement, deploy; not the ``haproxy`` processes), which a loaded
  machine changes far less than the wall time.
* **burst** — 1,000 changes spread evenly over one second from another thread (as an
  adapter would deliver them); the number of renders the trigger made for them and the time
  from the first change until the final state is deployed and confirmed.

* **memory** — the process's resident set once the first deploy is confirmed
  (``startRssMb``) and after the latency samples (``rssMb``: this process is the ``htc local``
  stack, holding N Ingresses, N Services and N EndpointSlices, the engine and its caches),
  again once the loop has been idle for ``minInterval`` after them (``idleRssMb``: what it
  holds between changes, less dependent on when a heap trim ran), and its peak
  (``maxRssMb``). Where it goes: docs/local.md, "Memory".

Prints ``p50Ms, p99Ms, burstRenders, burstConvergeMs, rssMb, haproxyVersion`` (and some
context) as one JSON object with ``--json``, or as a short table.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import resource
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.local.app import LocalApp, LocalOptions  # noqa: E402
from controller.observability.logging import configure  # noqa: E402
from controller.observability.metrics import Metrics  # noqa: E402
from controller.publish import Event, EventKind  # noqa: E402

QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"
ENDPOINTS = 5
BURST = 1000


def ingress(i: int, marker: str = "v0") -> dict[str, Any]:
    backend = {"service": {"name": f"svc-{i}", "port": {"number": 80}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": f"app-{i}", "namespace": "default"},
        "spec": {
            "ingressClassName": "haproxy",
            "rules": [
                {
                    "host": f"app-{i}.bench.test",
                    "http": {
                        "paths": [
                            {"path": "/", "pathType": "Prefix", "backend": backend},
                            {"path": f"/{marker}", "pathType": "Exact", "backend": backend},
                        ]
                    },
                }
            ],
        },
    }


def service(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"svc-{i}", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }


def endpoint_slice(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"svc-{i}-1",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": f"svc-{i}"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [
            {"addresses": [f"127.{1 + i // 250}.{i % 250}.{e + 1}"], "conditions": {"ready": True}}
            for e in range(ENDPOINTS)
        ],
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_site(root: Path, n: int) -> None:
    (root / "resources").mkdir(parents=True)
    doc = yaml.safe_load(QUICKSTART.read_text())
    doc["spec"]["extraContext"]["listen"] = f"127.0.0.1:{free_port()}"
    (root / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    for name, make in (("ingresses", ingress), ("services", service), ("slices", endpoint_slice)):
        docs = [make(i) for i in range(n)]
        (root / "resources" / f"{name}.yaml").write_text(yaml.safe_dump_all(docs))


class Confirmations:
    """A publisher sink: the time each deployed checksum was confirmed by a reload."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.parts: list[tuple[float, float, float]] = []
        """(render, validate, deploy) milliseconds of each confirmed deploy."""
        self.changed = asyncio.Event()

    def __call__(self, event: Event) -> None:
        if event.kind is EventKind.DEPLOYED and any(r.reloaded for r in event.results):
            assert event.checksum is not None and event.report is not None
            self.times[event.checksum] = time.perf_counter()
            t = event.report.timings
            render = t.get("renderMs", 0.0)
            self.parts.append(
                (
                    render,
                    t.get("totalMs", render) - render,
                    sum(r.duration_ms for r in event.results),
                )
            )
            self.changed.set()

    async def next(self, after: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.times) <= after:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), max(deadline - time.monotonic(), 0.01))


def _rss_mb() -> float:
    """Resident set of this process now, in MiB (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return round(pages * resource.getpagesize() / (1 << 20), 1)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


async def measure(n: int, haproxy: str | None, samples: int) -> dict[str, Any]:
    configure(level="error", stream=io.StringIO())
    work = Path(tempfile.mkdtemp(prefix="htc-bench-"))
    try:
        site = work / "site"
        write_site(site, n)
        confirmed = Confirmations()
        console = io.StringIO()
        app = LocalApp(
            LocalOptions(
                directory=site,
                haproxy=haproxy,
                status_addr=None,
                work_dir=work / "run",
                out=console,
                drift_interval=3600.0,
            ),
            metrics=Metrics(),
        )
        app.publisher.add_sink(confirmed)
        t0 = time.perf_counter()
        await app.start()
        startup_ms = (time.perf_counter() - t0) * 1000
        start_rss_mb = _rss_mb()
        try:
            if not app.board.ready:
                raise SystemExit("the first deploy failed:\n" + console.getvalue())
            settings = app.trigger.settings
            table = await app.supervisor.cli.show_proc()

            latencies: list[float] = []
            cpu: list[float] = []
            first_sample = len(confirmed.parts)
            for k in range(samples):
                await asyncio.sleep(settings.min_interval + 0.05)
                before = len(confirmed.times)
                start, start_cpu = time.perf_counter(), time.process_time()
                app.store.apply("ingresses", ingress(k % n, marker=f"s{k}"))
                await confirmed.next(before)
                latencies.append((time.perf_counter() - start) * 1000)
                cpu.append((time.process_time() - start_cpu) * 1000)

            parts = confirmed.parts[first_sample:]
            rss_mb = _rss_mb()
            await asyncio.sleep(settings.min_interval + 0.05)
            await app.trigger.wait_idle()
            idle_rss_mb = _rss_mb()
            runs_before = app.trigger.runs
            done = threading.Event()
            started = time.perf_counter()

            def burst() -> None:
                for j in range(BURST):
                    wait = started + j / BURST - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
                    app.store.apply("ingresses", ingress(j % n, marker=f"b{j}"))
                done.set()

            thread = threading.Thread(target=burst)
            thread.start()
            await asyncio.to_thread(done.wait)
            sent_ms = (time.perf_counter() - started) * 1000
            await app.trigger.wait_idle(timeout=120)
            thread.join()
            final = app.target.active_checksum
            converged_at = confirmed.times.get(final or "", time.perf_counter())
            paths_map = (app.deploy_dir / "maps" / "paths.map").read_text()
            if f"/b{BURST - 1}" not in paths_map:
                raise SystemExit("the burst did not converge on its final state")
            return {
                "objects": n,
                "samples": samples,
                "p50Ms": round(statistics.median(latencies), 1),
                "p99Ms": round(percentile(latencies, 0.99), 1),
                "cpuMs": round(statistics.median(cpu), 1),
                "renderMs": round(statistics.median(p[0] for p in parts), 1),
                "validateMs": round(statistics.median(p[1] for p in parts), 1),
                "deployMs": round(statistics.median(p[2] for p in parts), 1),
                "burstChanges": BURST,
                "burstSentMs": round(sent_ms, 1),
                "burstRenders": app.trigger.runs - runs_before,
                "burstConvergeMs": round((converged_at - started) * 1000, 1),
                "startupMs": round(startup_ms, 1),
                "startRssMb": start_rss_mb,
                "rssMb": rss_mb,
                "idleRssMb": idle_rss_mb,
                "maxRssMb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "debounceMs": round(settings.debounce * 1000),
                "minIntervalMs": round(settings.min_interval * 1000),
                "haproxyVersion": table.version,
            }
        finally:
            await app.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--objects",
        "--ingresses",
        type=int,
        default=1000,
        help="Ingresses (and as many Services and EndpointSlices)",
    )
    parser.add_argument("--haproxy", help="haproxy binary (default: the one htc local finds)")
    parser.add_argument("--samples", type=int, default=20, help="latency samples")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.objects, args.haproxy, args.samples))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>16}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
