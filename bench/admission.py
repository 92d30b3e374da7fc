"""Admission latency: AdmissionReviews posted over HTTPS, as the API server sends them.

    python bench/admission.py --ingresses 1000 --concurrency 150 [--haproxy BIN] --json

The webhook server of ``htc run`` (the same ``WebhookServer`` and ``AdmissionJudge``) runs in
this process over a store of N Ingresses, Services and EndpointSlices (the pipeline benchmark's
objects) with the quickstart library. Figures:

- ``singleP50Ms`` / ``singleP99Ms``: one distinct proposal at a time (an Ingress update whose
  output changes), end to end through HTTPS;
- ``concurrentP50Ms`` / ``concurrentP99Ms``: ``--concurrency`` distinct creates at once;
- ``unchangedP99Ms``: proposals the templates ignore (another ingress class): the output
  checksum is unchanged, so the verdict cache answers;
- ``haproxyMs``: ``haproxy -c`` alone on the rendered configuration (median); ``cores``;
  ``floorMs = concurrency * haproxyMs / cores``, the least any design could take for the
  concurrent burst.

``kubectlApplyP50Ms`` (through the real API server) is measured by
``tests/operator/test_admission.py``'s setting, not here: this benchmark needs no cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "operator"))

import aiohttp  # noqa: E402
import yaml  # noqa: E402
from pipeline import _fill, ingress, objects  # noqa: E402
from test_admission import write_certs  # noqa: E402

from controller.operator.webhook import WebhookServer, WebhookSettings  # noqa: E402
from controller.resources import Store  # noqa: E402
from controller.spec.loader import parse_config  # noqa: E402
from controller.triggers import default_engine  # noqa: E402
from controller.triggers.admission import AdmissionJudge  # noqa: E402

QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"


def review(uid: str, op: str, obj: dict[str, Any], old: dict[str, Any] | None) -> bytes:
    group, _, version = obj["apiVersion"].rpartition("/")
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": group, "version": version, "kind": obj["kind"]},
                "namespace": obj["metadata"]["namespace"],
                "name": obj["metadata"]["name"],
                "operation": op,
                "object": obj,
                "oldObject": old,
            },
        }
    ).encode()


async def post(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[float, bool]:
    t0 = time.perf_counter()
    async with session.post(url, data=body) as resp:
        doc = await resp.json()
    answer = doc["response"]
    if not answer["allowed"]:
        print("denied:", answer["status"]["message"][:300], file=sys.stderr)
    return (time.perf_counter() - t0) * 1000, bool(answer["allowed"])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


async def measure(n: int, concurrency: int, haproxy: str) -> dict[str, Any]:
    doc = yaml.safe_load(QUICKSTART.read_text())
    doc["spec"]["watchedResources"]["ingresses"]["admission"] = True
    spec = parse_config(doc)[0].spec  # type: ignore[union-attr]
    store = Store(spec.watched_resources)
    _fill(store, objects(n), spec.watched_resources)
    engine = default_engine(haproxy)(spec)
    judge = AdmissionJudge(
        engine=lambda: engine,
        view=store.snapshot,
        baseline_valid=lambda: True,
        engine_factory=default_engine(haproxy),
        concurrency=max(2, os.cpu_count() or 2),
    )
    work = Path(tempfile.mkdtemp(prefix="htc-bench-adm-"))
    ca, cert, key = write_certs(work)
    server = WebhookServer(
        WebhookSettings("127.0.0.1:0", cert, key, default_timeout=30),
        judge,
        watched=lambda: dict(spec.watched_resources),
        config_ref=("default", "quickstart"),
        spec_override=lambda s: s,
    )
    await server.start()
    url = f"https://127.0.0.1:{server.port}/validate?timeout=30s"
    ctx = ssl.create_default_context(cafile=str(ca))
    try:
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=concurrency)
        ) as session:
            # warm: the baseline verdict is cached, as it is in a running controller
            await post(session, url, review("w", "UPDATE", ingress(0), ingress(0)))
            single = []
            for k in range(30):
                new = ingress(k % n, variant=k + 1)
                ms, ok = await post(session, url, review(f"s{k}", "UPDATE", new, ingress(k % n)))
                assert ok, "a valid proposal was denied"
                single.append(ms)
            creates = [ingress(n + k) for k in range(concurrency)]
            for c in creates:  # route to an existing Service: the create stays valid
                c["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] = "svc-0"
                c["spec"]["rules"][0]["http"]["paths"][1]["backend"]["service"]["name"] = "svc-0"
            results = await asyncio.gather(
                *(post(session, url, review(f"c{k}", "CREATE", c, None))
                  for k, c in enumerate(creates))
            )  # fmt: skip
            concurrent = [ms for ms, _ in results]
            unchanged = []
            for k in range(50):
                other = ingress(n + 10_000 + k)
                other["spec"]["ingressClassName"] = "someone-else"
                ms, ok = await post(session, url, review(f"u{k}", "CREATE", other, None))
                assert ok
                unchanged.append(ms)
    finally:
        await server.stop()
    render = engine.renderer.render(store.snapshot())
    out = work / "check"
    out.mkdir()
    for entry in render.files:
        path = out / entry.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(entry.content)
    haproxy_ms = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([haproxy, "-c", "-q", "-f", "haproxy.cfg"], cwd=out, check=False,
                       capture_output=True)  # fmt: skip
        haproxy_ms.append((time.perf_counter() - t0) * 1000)
    cores = os.cpu_count() or 1
    hms = statistics.median(haproxy_ms)
    return {
        "ingresses": n,
        "concurrency": concurrency,
        "haproxy": haproxy,
        "singleP50Ms": pct(single, 0.5),
        "singleP99Ms": pct(single, 0.99),
        "concurrentP50Ms": pct(concurrent, 0.5),
        "concurrentP99Ms": pct(concurrent, 0.99),
        "unchangedP99Ms": pct(unchanged, 0.99),
        "haproxyMs": round(hms, 1),
        "cores": cores,
        "floorMs": round(concurrency * hms / cores, 1),
        "targets": {"singleP50Ms": 250, "concurrentP99Ms": "1.3 x floorMs", "unchangedP99Ms": 50},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ingresses", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=150)
    parser.add_argument("--haproxy", default="/usr/sbin/haproxy")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.ingresses, args.concurrency, args.haproxy))
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
