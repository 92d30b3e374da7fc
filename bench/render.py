"""Benchmark of rendering the quickstart over generated objects.

    python bench/render.py --ingresses 1000 [--repeat 7] [--tls] [--json]

Generates N Ingresses (one host, a Prefix and an Exact path each), N Services and N
EndpointSlices with five endpoints each (four ready, one not), stores them, compiles the
quickstart once and renders it ``--repeat`` times. Reports the median render time (sandboxed,
as in production), the time to build the complete source map of every file (done lazily, on
the first lookup, in production), the compile time, and the size of the output.

The repeated renders reuse the first one (nothing changed). What the reconcile loop and the
admission webhook pay is reported in CPU time (the machine may be shared):
``fullRenderCpuMs``, the first render of a fresh renderer; ``changedRenderCpuMs``, the next
render after one Ingress of ours changed its host; ``tlsHostRenderCpuMs``, the next, after
that Ingress added TLS for its host (a new key of the routing table's TLS hosts, which every
Ingress's routes look up); ``ignoredRenderCpuMs``, the one after that, with an Ingress of
another class added (its output is unchanged). Each of these renders runs as
``controller.validation.service.evaluate`` runs it, inside one pause of the cyclic collector;
the collector's first pass over what the render built, which the pipeline makes while
``haproxy -c`` runs (``gcpause.collect_young``), is reported beside it as ``…GcCpuMs`` (the
full render's is 0.1-0.2 s at 10,000 Ingresses: a render leaves millions of young objects). ``--tls`` gives every
Ingress a TLS Secret of its own (only 256 fit the certificate slots; the rest are reported).
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"
sys.path.insert(0, str(ROOT))

ENDPOINTS = 5


_PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
_KEY = b"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"


def tls_secrets(objects: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """``objects`` with a TLS Secret of its own for every Ingress (PEM framing only: the
    render checks no more, and nothing here runs haproxy)."""
    out: list[tuple[str, dict[str, Any]]] = []
    data = {"tls.crt": base64.b64encode(_PEM).decode(), "tls.key": base64.b64encode(_KEY).decode()}
    for collection, obj in objects:
        if collection == "ingresses":
            obj = copy.deepcopy(obj)
            name = "tls-" + obj["metadata"]["name"]
            obj["spec"]["tls"] = [{"hosts": [obj["spec"]["rules"][0]["host"]], "secretName": name}]
            meta = {"name": name, "namespace": "default"}
            secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls"}
            out.append(("secrets", {**secret, "metadata": meta, "data": data}))
        out.append((collection, obj))
    return out


def generate(n: int) -> list[tuple[str, dict[str, Any]]]:
    """(collection, object) pairs for the quickstart's three collections."""
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(n):
        svc = f"svc-{i}"
        backend = {"service": {"name": svc, "port": {"number": 80}}}
        out.append(
            (
                "ingresses",
                {
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "Ingress",
                    "metadata": {"name": f"app-{i}", "namespace": "default"},
                    "spec": {
                        "ingressClassName": "haproxy",
                        "rules": [
                            {
                                "host": f"app-{i}.example.test",
                                "http": {
                                    "paths": [
                                        {"path": "/", "pathType": "Prefix", "backend": backend},
                                        {"path": "/api", "pathType": "Exact", "backend": backend},
                                    ]
                                },
                            }
                        ],
                    },
                },
            )
        )
        out.append(
            (
                "services",
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": svc, "namespace": "default"},
                    "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
                },
            )
        )
        out.append(
            (
                "endpointslices",
                {
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {
                        "name": f"{svc}-x1y2z",
                        "namespace": "default",
                        "labels": {"kubernetes.io/service-name": svc},
                    },
                    "addressType": "IPv4",
                    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                    "endpoints": [
                        {
                            "addresses": [f"10.{i // 250}.{i % 250}.{e + 1}"],
                            "conditions": {"ready": e != ENDPOINTS - 1},
                        }
                        for e in range(ENDPOINTS)
                    ],
                },
            )
        )
    return out


def timed(renderer: Any, snapshot: Any) -> tuple[Any, float, float]:
    """One render as evaluate() makes it: the render's CPU time inside a pause of the
    collector, then the CPU time of the collector's pass the pipeline makes beside
    ``haproxy -c`` (both in ms)."""
    from controller.validation.gcpause import GcPause, collect_young

    pause = GcPause().begin()
    try:
        cpu = time.process_time()
        result = renderer.render(snapshot)
        render_ms = (time.process_time() - cpu) * 1000
        cpu = time.process_time()
        collect_young()
        gc_ms = (time.process_time() - cpu) * 1000
    finally:
        pause.end()
    return result, render_ms, gc_ms


def measure(n: int, repeat: int, tls: bool = False) -> dict[str, Any]:
    from controller.render import Renderer
    from controller.render.sourcemap import LazyLines
    from controller.resources import Store
    from controller.spec.loader import load_config

    config, problems = load_config(QUICKSTART)
    if config is None:
        raise SystemExit("cannot load the quickstart: " + "; ".join(d.message for d in problems))
    store = Store.from_spec(config.spec)
    objects = generate(n)
    for collection, obj in tls_secrets(objects) if tls else objects:
        store.apply(collection, obj)
    snapshot = store.snapshot()

    t = time.perf_counter()
    renderer = Renderer(config.spec)
    compile_ms = (time.perf_counter() - t) * 1000
    first, full_cpu_ms, full_gc_ms = timed(renderer, snapshot)

    times: list[float] = []
    maps: list[float] = []
    result = None
    for _ in range(repeat):
        t = time.perf_counter()
        result = renderer.render(snapshot)
        times.append((time.perf_counter() - t) * 1000)
        lines = result.source_map.lines
        t = time.perf_counter()
        if isinstance(lines, LazyLines):
            lines.materialize()
        maps.append((time.perf_counter() - t) * 1000)
    assert result is not None
    for r in (first, result):
        if not r.ok:
            raise SystemExit("render failed: " + "; ".join(d.message for d in r.diagnostics))
    changed = copy.deepcopy(objects[0][1])
    changed["spec"]["rules"][0]["host"] = "changed.example.test"
    store.apply("ingresses", changed)
    _, changed_cpu_ms, changed_gc_ms = timed(renderer, store.snapshot())
    secured = copy.deepcopy(changed)
    secured["spec"]["tls"] = [{"hosts": ["changed.example.test"]}]
    store.apply("ingresses", secured)
    _, tls_host_cpu_ms, tls_host_gc_ms = timed(renderer, store.snapshot())
    other = copy.deepcopy(changed)
    other["metadata"]["name"] = "another-class"
    other["spec"]["ingressClassName"] = "another-class"
    store.apply("ingresses", other)
    _, ignored_cpu_ms, ignored_gc_ms = timed(renderer, store.snapshot())
    return {
        "ingresses": n,
        "files": len(result.files),
        "lines": sum(e.content.count(b"\n") for e in result.files),
        "bytes": sum(len(e.content) for e in result.files),
        "compileMs": round(compile_ms, 2),
        "renderMs": round(statistics.median(times), 2),
        "renderMsMin": round(min(times), 2),
        "sourceMapMs": round(statistics.median(maps), 2),
        "fullRenderCpuMs": round(full_cpu_ms, 2),
        "fullRenderGcCpuMs": round(full_gc_ms, 2),
        "changedRenderCpuMs": round(changed_cpu_ms, 2),
        "changedRenderGcCpuMs": round(changed_gc_ms, 2),
        "tlsHostRenderCpuMs": round(tls_host_cpu_ms, 2),
        "tlsHostRenderGcCpuMs": round(tls_host_gc_ms, 2),
        "ignoredRenderCpuMs": round(ignored_cpu_ms, 2),
        "ignoredRenderGcCpuMs": round(ignored_gc_ms, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingresses", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--tls", action="store_true", help="a TLS Secret per Ingress")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    out = measure(args.ingresses, args.repeat, args.tls)
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>12}  {v}")


if __name__ == "__main__":
    main()
