"""``htc run`` against the real control plane: startup, update and burst latencies, RSS.

    python bench/operator_e2e.py --objects 1000 [--haproxy BIN] [--json]

Creates N Ingresses, N Services and N EndpointSlices through the API (the test bed's control
plane), then starts ``htc run`` as a user would. "Serving" means a request through HAProxy
reached the echo backend in a pod of the test pod network; the other EndpointSlices name
pod-network addresses that no pod holds, and nothing checks them, so no traffic goes there.

Figures:
- ``startupToServingMs``: ``htc run`` started → the probe host answered by the pod;
- ``updateToServingP50Ms`` / ``P99Ms``: one Ingress moved to a new host → that host answers
  (single updates on a quiet system);
- ``burstRenders`` / ``burstConvergeMs``: 1,000 Ingress updates as fast as the API takes them
  (``burstSeconds`` says how fast that was); renders the controller ran for them, and the time
  until the last one serves;
- ``watchesSyncedMs``: ``htc run`` started → kopf's watches have handled their initial lists
  (the first render does not wait for them);
- ``stopMs``: SIGTERM → the process has exited (None: not within 60 s);
- ``rssAtSyncMb``: resident memory of the ``htc run`` process at that moment; ``rssMb``: once
  it has settled (under 2 MB of change over 5 s, at most 60 s later).

Needs root (pod network) and Go (control plane). Named ``operator_e2e``, not ``operator``: a
``bench/operator.py`` would shadow the standard library's ``operator`` module for every script
here (Python puts the script's directory first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "operator"))

from operator_kit import config_doc, free_port, start_echo  # noqa: E402

from controller.testbed import cluster, podnet  # noqa: E402


def objects(ns: str, n: int, pod_ip: str) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for i in range(n):
        svc = f"svc-{i}"
        address = pod_ip if i == 0 else f"10.244.{100 + i // 250}.{i % 250 + 1}"
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": svc, "namespace": ns},
                # Headless: the test bed's service range (a /20) holds 4,096 cluster IPs, and
                # the controller routes to EndpointSlices, never to a cluster IP.
                "spec": {
                    "clusterIP": "None",
                    "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
                },
            }
        )
        docs.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{svc}-x",
                    "namespace": ns,
                    "labels": {"kubernetes.io/service-name": svc},
                },
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            }
        )
        docs.append(ingress(ns, f"ing-{i}", f"host-{i}.test", "svc-0" if i == 0 else svc))
    return docs  # fmt: skip


def ingress(ns: str, name: str, host: str, svc: str) -> dict[str, Any]:
    path = {
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": svc, "port": {"number": 80}}},
    }
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"ingressClassName": "haproxy",
                     "rules": [{"host": host, "http": {"paths": [path]}}]}}  # fmt: skip


def status_of(port: int, host: str) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", headers={"Host": host})
    try:
        with urllib.request.urlopen(req, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def wait_serving(port: int, host: str, timeout: float) -> float:
    start = time.monotonic()
    while status_of(port, host) != 200:
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{host} not served within {timeout} s")
        time.sleep(0.005)
    return time.monotonic()


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as resp:
        total = 0.0
        for line in resp.read().decode().splitlines():
            if line.startswith(name):
                total += float(line.rsplit(" ", 1)[1])
        return total


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def settled_rss_mb(pid: int, window: int = 5, limit_s: float = 60.0) -> float:
    """The resident size once it stopped moving (under 2 MB over ``window`` seconds): right
    after the handover, kopf's idle per-object tasks and the freed startup heap are still
    being let go. Bounded at ``limit_s``."""
    samples = [rss_mb(pid)]
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(1.0)
        samples.append(rss_mb(pid))
        recent = samples[-window - 1 :]
        if len(recent) > window and max(recent) - min(recent) < 2.0:
            break
    return samples[-1]


def bench(
    plane: cluster.ControlPlane,
    pod: podnet.Pod,
    n: int,
    haproxy: str,
    rule_timeout: float | None = None,
) -> dict[str, Any]:
    start_echo(pod, "bench")
    with cluster.namespace(plane, "bench") as ns:
        listen, status = free_port(), free_port()
        doc = config_doc(ns.name, listen)
        doc["spec"]["reconcile"] = {"debounce": "100ms", "minInterval": "200ms"}
        if rule_timeout is not None:
            doc["spec"].setdefault("validation", {})["ruleTimeout"] = f"{rule_timeout}s"
        ns.apply(yaml.safe_dump(doc))
        docs = objects(ns.name, n, pod.ip)
        for chunk in range(0, len(docs), 600):
            plane.kubectl("create", "-f", "-", input=yaml.safe_dump_all(docs[chunk : chunk + 600]))
        work = Path(tempfile.mkdtemp(prefix="htc-bench-op-"))
        argv = [str(Path(sys.executable).with_name("htc")), "run",
                "--kubeconfig", str(plane.kubeconfig), "--namespace", ns.name,
                "--config", "quickstart", "--haproxy", haproxy,
                "--listen", f"127.0.0.1:{listen}", "--status-addr", f"127.0.0.1:{status}",
                "--work-dir", str(work), "--no-leader-election", "--log-level", "warning"]  # fmt: skip
        started = time.monotonic()
        log = (work / "htc-run.log").open("w")  # kept for a run that fails: its last lines say why
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
        result: dict[str, Any] = {}
        try:
            served = wait_serving(listen, "host-0.test", 600)
            startup_ms = (served - started) * 1000
            # kopf's watches list too and handle every listed object after the first render
            # (see OperatorApp._watch_filled); memory is measured once they are done.
            deadline = time.monotonic() + 900
            while metric(status, 'htc_resyncs_total{reason="handover"}') < 1:
                if time.monotonic() > deadline:
                    raise TimeoutError("the watches did not sync within 900 s")
                time.sleep(0.2)
            watches_ms = (time.monotonic() - started) * 1000
            rss_at_sync = rss_mb(proc.pid)
            rss = settled_rss_mb(proc.pid)
            from kubernetes import client

            net = client.NetworkingV1Api(ns.api)
            samples = []
            for k in range(20):
                time.sleep(0.6)  # quiet system: past debounce and minInterval
                body = ingress(ns.name, "ing-0", f"moved-{k}.test", "svc-0")
                t0 = time.monotonic()
                net.replace_namespaced_ingress("ing-0", ns.name, body)
                samples.append((wait_serving(listen, f"moved-{k}.test", 60) - t0) * 1000)
            samples.sort()
            time.sleep(1.0)
            runs_before = metric(status, "htc_reconcile_runs_total")
            count = min(1000, n)

            def touch(i: int) -> None:
                host = "burst-last.test" if i == 0 else f"host-{i}.test"
                svc = "svc-0" if i == 0 else f"svc-{i}"
                body = ingress(ns.name, f"ing-{i}", host, svc)
                body["metadata"]["annotations"] = {"bench/round": "burst"}
                net.replace_namespaced_ingress(f"ing-{i}", ns.name, body)

            t0 = time.monotonic()
            with ThreadPoolExecutor(max_workers=16) as pool:
                list(pool.map(touch, range(count - 1, -1, -1)))  # ing-0 last
            burst_s = time.monotonic() - t0
            converged = wait_serving(listen, "burst-last.test", 120)
            time.sleep(1.0)
            renders = metric(status, "htc_reconcile_runs_total") - runs_before
            result.update(
                {
                    "objects": n,
                    "haproxy": haproxy,
                    "startupToServingMs": round(startup_ms, 1),
                    "watchesSyncedMs": round(watches_ms, 1),
                    "updateToServingP50Ms": round(statistics.median(samples), 1),
                    "updateToServingP99Ms": round(samples[-1], 1),
                    "burstUpdates": count,
                    "burstSeconds": round(burst_s, 2),
                    "burstRenders": int(renders),
                    "burstConvergeMs": round((converged - t0) * 1000, 1),
                    "rssAtSyncMb": round(rss_at_sync, 1),
                    "rssMb": round(rss, 1),
                    "ruleTimeoutS": rule_timeout,  # None: the spec's default
                    "targets": {
                        "updateToServingP50Ms": 500,
                        "burstRenders": 5,
                        "rssMbAt10000": 300,
                    },
                }
            )
        except Exception:
            log.flush()
            tail = (work / "htc-run.log").read_text().splitlines()[-15:]
            print("htc run's last log lines:", *tail, sep="\n", file=sys.stderr)
            raise
        finally:
            stopping = time.monotonic()
            proc.terminate()
            try:
                proc.wait(timeout=60)
                result["stopMs"] = round((time.monotonic() - stopping) * 1000, 1)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                result["stopMs"] = None  # did not stop within 60 s of SIGTERM
            log.close()
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--haproxy", default="/usr/sbin/haproxy")
    parser.add_argument(
        "--rule-timeout",
        type=float,
        help="spec.validation.ruleTimeout in seconds (default: the spec's); reported",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with cluster.ControlPlane(cluster.build()) as plane, podnet.PodNetwork() as net:
        pod = net.add_pod()
        result = bench(plane, pod, args.objects, args.haproxy, args.rule_timeout)
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
