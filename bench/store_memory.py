"""Memory per stored object, and the cost of snapshots and overlays.

    python bench/store_memory.py [--objects N] --json

Builds N Ingresses, N Services and N EndpointSlices shaped like real API responses (uid,
resourceVersion, labels, annotations including kubectl's last-applied-configuration,
ownerReferences, status, and managedFields entries that the store strips), each decoded from
its own JSON text as a watch event would deliver it. For each kind it reports:

* ``raw`` — bytes the decoded object occupies (tracemalloc, the object alone);
* ``stored`` — bytes the store retains per object after ``apply`` (frozen, managedFields
  stripped, keys interned, small leaves shared, index entries and the table of shared
  leaves included) once the decoded input is dropped.

Timings (tracemalloc off, median of many calls, µs): ``snapshot``, the first write to a
collection after a snapshot (the copy-on-write copy of that collection), a write without a
snapshot in between, and for an overlay over a snapshot: construction, an exact
``get_single`` through it, and a full ``list()`` of the overlaid collection next to the same
``list()`` on the plain snapshot. Prints one JSON object (``--json``) or a short table.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.resources import Overlay, Store  # noqa: E402
from controller.resources.frozen import forget_shared  # noqa: E402
from controller.spec.models import WatchedResource  # noqa: E402

SERVICE_NAME = "metadata.labels['kubernetes.io/service-name']"


def _meta(kind: str, i: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": f"app-{i}",
        "namespace": f"team-{i % 20}",
        "uid": f"5f0c{i:08x}-1c2d-4e5f-8a9b-{i:012x}",
        "resourceVersion": str(4_000_000 + i),
        "generation": 3,
        "creationTimestamp": "2024-05-01T12:00:00Z",
        "labels": {
            "app.kubernetes.io/name": f"app-{i}",
            "app.kubernetes.io/part-of": "shop",
            "tier": "web",
        },
        "managedFields": [
            {
                "manager": "kubectl-client-side-apply",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2024-05-01T12:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {
                        "f:annotations": {
                            ".": {},
                            "f:kubectl.kubernetes.io/last-applied-configuration": {},
                        },
                        "f:labels": {".": {}, "f:app.kubernetes.io/name": {}, "f:tier": {}},
                    },
                    "f:spec": {f"f:field{j}": {} for j in range(12)},
                },
            },
            {
                "manager": f"{kind.lower()}-controller",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2024-05-01T12:00:05Z",
                "fieldsType": "FieldsV1",
                "subresource": "status",
                "fieldsV1": {"f:status": {f"f:cond{j}": {} for j in range(6)}},
            },
        ],
        **extra,
    }


def ingress(i: int) -> dict[str, Any]:
    svc = f"app-{i}"
    paths = [
        {"path": p, "pathType": t, "backend": {"service": {"name": svc, "port": {"number": 80}}}}
        for p, t in (("/", "Prefix"), (f"/api/v{i % 3}", "Exact"))
    ]
    spec = {
        "ingressClassName": "haproxy",
        "tls": [{"hosts": [f"app-{i}.example.test"], "secretName": f"app-{i}-tls"}],
        "rules": [{"host": f"app-{i}.example.test", "http": {"paths": paths}}],
    }
    annotations = {
        "haproxy.org/timeout-server": "30s",
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"spec": spec}),
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": _meta("Ingress", i, annotations=annotations),
        "spec": spec,
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}},
    }


def service(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta("Service", i),
        "spec": {
            "type": "ClusterIP",
            "clusterIP": f"10.96.{i // 250 % 250}.{i % 250}",
            "clusterIPs": [f"10.96.{i // 250 % 250}.{i % 250}"],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
            "sessionAffinity": "None",
            "selector": {"app.kubernetes.io/name": f"app-{i}"},
            "ports": [
                {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
                {"name": "metrics", "port": 9090, "protocol": "TCP", "targetPort": 9090},
            ],
        },
        "status": {"loadBalancer": {}},
    }


def endpoint_slice(i: int, endpoints: int = 5) -> dict[str, Any]:
    meta = _meta(
        "EndpointSlice",
        i,
        ownerReferences=[
            {
                "apiVersion": "v1",
                "kind": "Service",
                "name": f"app-{i}",
                "uid": f"7a1b{i:08x}-0000-4000-8000-{i:012x}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )
    meta["name"] = f"app-{i}-x7k2p"
    meta["labels"] = {
        "kubernetes.io/service-name": f"app-{i}",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
    }
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": meta,
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": [f"10.244.{i % 250}.{e + 10}"],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "nodeName": f"node-{e}",
                "zone": f"zone-{e % 3}",
                "targetRef": {
                    "kind": "Pod",
                    "name": f"app-{i}-6d9f8c7b5-{e:05d}",
                    "namespace": meta["namespace"],
                    "uid": f"9c2d{i:08x}-{e:04x}-4000-8000-{i:012x}",
                },
            }
            for e in range(endpoints)
        ],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


KINDS: dict[str, tuple[str, Callable[[int], dict[str, Any]], WatchedResource]] = {
    "Ingress": (
        "ingresses",
        ingress,
        WatchedResource(api_version="networking.k8s.io/v1", kind="Ingress"),
    ),
    "Service": ("services", service, WatchedResource(api_version="v1", kind="Service")),
    "EndpointSlice": (
        "endpointslices",
        endpoint_slice,
        WatchedResource(
            api_version="discovery.k8s.io/v1",
            kind="EndpointSlice",
            index_by=["metadata.namespace", SERVICE_NAME],
        ),
    ),
}


def _traced(fn: Callable[[], Any]) -> tuple[Any, int]:
    """(result, bytes still allocated by fn once it returned and garbage was collected)."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    result = fn()
    gc.collect()
    return result, tracemalloc.get_traced_memory()[0] - before


def memory(n: int) -> dict[str, dict[str, float]]:
    texts = {kind: [json.dumps(make(i)) for i in range(n)] for kind, (_, make, _w) in KINDS.items()}
    out: dict[str, dict[str, float]] = {}
    tracemalloc.start()
    try:
        for kind, (coll, _make, watched) in KINDS.items():
            raw, raw_bytes = _traced(lambda t=texts[kind]: [json.loads(s) for s in t])  # type: ignore[misc]
            del raw
            forget_shared()  # this kind pays for its own table of shared leaves
            store = Store({coll: watched})

            def fill(s: Store = store, c: str = coll, t: list[str] = texts[kind]) -> None:
                for text in t:
                    s.apply(c, json.loads(text))

            _, stored_bytes = _traced(fill)
            assert len(store[coll]) == n
            out[kind] = {"raw": round(raw_bytes / n), "stored": round(stored_bytes / n)}
            del store
    finally:
        tracemalloc.stop()
    return out


def _median_us(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    return round(statistics.median(samples) / 1000, 2)


def timings(n: int) -> dict[str, float]:
    store = Store({coll: w for coll, _m, w in KINDS.values()})
    for coll, make, _w in KINDS.values():
        for i in range(n):
            store.apply(coll, make(i))
    variants = [endpoint_slice(n // 2), endpoint_slice(n // 2)]
    variants[1]["endpoints"][0]["conditions"]["ready"] = False
    toggle = [0]

    def changed_slice() -> dict[str, Any]:
        toggle[0] ^= 1
        return variants[toggle[0]]

    def write_after_snapshot() -> None:
        store.snapshot()
        store.apply("endpointslices", changed_slice())

    snapshot_us = _median_us(store.snapshot, 2000)
    write_us = _median_us(lambda: store.apply("endpointslices", changed_slice()), 500)
    write_after_us = _median_us(write_after_snapshot, 200)
    snap = store.snapshot()
    proposal = endpoint_slice(n // 2)
    proposal["endpoints"] = proposal["endpoints"][:2]
    target = snap["endpointslices"].get_single(proposal["metadata"]["namespace"], f"app-{n // 2}")
    assert target is not None
    over = Overlay(snap, "endpointslices", "update", proposal)
    ns = proposal["metadata"]["namespace"]
    return {
        "snapshot_us": snapshot_us,
        "write_us": write_us,
        "first_write_after_snapshot_us": round(write_after_us - snapshot_us, 2),
        "overlay_create_us": _median_us(
            lambda: Overlay(snap, "endpointslices", "update", proposal), 500
        ),
        "overlay_get_single_us": _median_us(
            lambda: over["endpointslices"].get_single(ns, f"app-{n // 2}"), 2000
        ),
        "snapshot_get_single_us": _median_us(
            lambda: snap["endpointslices"].get_single(ns, f"app-{n // 2}"), 2000
        ),
        "overlay_list_us": _median_us(lambda: over["endpointslices"].list(), 50),
        "snapshot_list_us": _median_us(lambda: snap["endpointslices"].list(), 50),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000, help="objects per kind")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    n = max(1, args.objects)
    memory_result = memory(n)
    result: dict[str, Any] = {
        "objects_per_kind": n,
        "python": sys.version.split()[0],
        "bytes_per_object": memory_result,
        **timings(n),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{n} objects per kind (python {result['python']})")
    for kind, b in memory_result.items():
        print(f"  {kind:14} raw {b['raw']:>7} B   stored {b['stored']:>7} B")
    for key, value in result.items():
        if key.endswith("_us"):
            print(f"  {key:32} {value:>10} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
