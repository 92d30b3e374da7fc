"""Benchmark of rendering the quickstart over generated objects.

    python bench/render.py --ingresses 1000 [--repeat 7] [--json]

Generates N Ingresses (one host, a Prefix and an Exact path each), N Services and N
EndpointSlices with five endpoints each (four ready, one not), stores them, compiles the
quickstart once and renders it ``--repeat`` times. Reports the median render time (sandboxed,
as in production), the time to build the complete source map of every file (done lazily, on
the first lookup, in production), the compile time, and the size of the output.
"""

from __future__ import annotations

import argparse
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


def measure(n: int, repeat: int) -> dict[str, Any]:
    from controller.render import Renderer
    from controller.render.sourcemap import LazyLines
    from controller.resources import Store
    from controller.spec.loader import load_config

    config, problems = load_config(QUICKSTART)
    if config is None:
        raise SystemExit("cannot load the quickstart: " + "; ".join(d.message for d in problems))
    store = Store.from_spec(config.spec)
    for collection, obj in generate(n):
        store.apply(collection, obj)
    snapshot = store.snapshot()

    t = time.perf_counter()
    renderer = Renderer(config.spec)
    compile_ms = (time.perf_counter() - t) * 1000

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
    if not result.ok:
        raise SystemExit("render failed: " + "; ".join(d.message for d in result.diagnostics))
    return {
        "ingresses": n,
        "files": len(result.files),
        "lines": sum(e.content.count(b"\n") for e in result.files),
        "bytes": sum(len(e.content) for e in result.files),
        "compileMs": round(compile_ms, 2),
        "renderMs": round(statistics.median(times), 2),
        "renderMsMin": round(min(times), 2),
        "sourceMapMs": round(statistics.median(maps), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingresses", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    out = measure(args.ingresses, args.repeat)
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>12}  {v}")


if __name__ == "__main__":
    main()
