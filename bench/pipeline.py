"""Benchmark of the validation pipeline over the quickstart templates.

    python bench/pipeline.py --ingresses 1000 [--haproxy BIN] [--repeat 5] --json

Generates N Ingresses (one host, two paths each), N Services and N EndpointSlices with five
ready endpoints each (loopback addresses: nothing is contacted, ``haproxy -c`` only parses),
renders the quickstart library over them and validates:

* **cold** — the first validation in this process (per-section caches empty);
* **cold, unseen** — then a candidate of the same size in which every name differs, so every
  per-section cache misses but the interpreter and sandbox are warm;
* **cache hit** — the same bytes again (median of ``--repeat`` calls);
* **warm** — candidates that each differ from an already validated one in one Ingress, the
  admission and reconcile case (median of ``--repeat`` candidates).

Overhead ratio = (pipeline time - haproxy time) / haproxy time, where pipeline time is the
validate call's ``totalMs - renderMs`` and haproxy time its ``haproxyMs``. Prints one JSON
object (``--json``) or a short table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"

ENDPOINTS = 5


def ingress(i: int, *, variant: int = 0) -> dict[str, Any]:
    svc = f"svc-{i}"
    paths: list[dict[str, Any]] = [
        {
            "path": "/",
            "pathType": "Prefix",
            "backend": {"service": {"name": svc, "port": {"number": 80}}},
        },
        {
            "path": f"/api/v{1 + variant}",
            "pathType": "Exact",
            "backend": {"service": {"name": svc, "port": {"number": 80}}},
        },
    ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": f"app-{i}", "namespace": "default"},
        "spec": {
            "ingressClassName": "haproxy",
            "rules": [{"host": f"app-{i}.example.test", "http": {"paths": paths}}],
        },
    }


def service(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"svc-{i}", "namespace": "default"},
        "spec": {
            "selector": {"app": f"app-{i}"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        },
    }


def endpoint_slice(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"svc-{i}-abcde",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": f"svc-{i}"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [
            {
                "addresses": [f"127.{1 + i // 250}.{i % 250}.{e + 1}"],
                "conditions": {"ready": True},
            }
            for e in range(ENDPOINTS)
        ],
    }


def objects(n: int, start: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(start, start + n):
        out += [ingress(i), service(i), endpoint_slice(i)]
    return out


def _fill(store: Any, objs: list[dict[str, Any]], watched: Mapping[str, Any]) -> None:
    from controller.resources import collections_for

    for obj in objs:
        for name in collections_for(obj, watched):
            store.apply(name, obj)


async def _measure(n: int, haproxy: str | None, repeat: int) -> dict[str, Any]:
    from controller.render import Renderer
    from controller.resources import Store
    from controller.spec.loader import load_config
    from controller.validation import Pipeline

    config, problems = load_config(QUICKSTART)
    if config is None:
        raise SystemExit("cannot load the quickstart: " + "; ".join(d.message for d in problems))
    spec = config.spec
    store = Store.from_spec(spec)
    watched = store.watched()
    _fill(store, objects(n), watched)
    renderer = Renderer(spec)
    pipeline = Pipeline.from_spec(spec, haproxy_binary=haproxy)

    render = renderer.render(store.snapshot())
    if not render.ok:
        raise SystemExit("render failed: " + "; ".join(d.message for d in render.diagnostics))
    cold = await pipeline.validate(render)
    if not cold.valid:
        from controller.validation import format_report

        sys.stderr.write(format_report(cold, "text", render=render))
        raise SystemExit("the generated candidate is not valid")

    # Same size, every name different: all per-section caches miss, but the interpreter
    # and the sandbox are warmed up (separates cache coldness from process start-up).
    other = Store.from_spec(spec)
    _fill(other, objects(n, start=n), watched)
    unseen = await pipeline.validate(renderer.render(other.snapshot()))
    if not unseen.valid:
        raise SystemExit("the unseen candidate is not valid")

    hits: list[float] = []
    for _ in range(repeat):
        again = renderer.render(store.snapshot())  # new objects, identical bytes
        t = time.perf_counter()
        report = await pipeline.validate(again)
        hits.append((time.perf_counter() - t) * 1000.0)
        assert report.metadata.cache_hit

    warm_ratios: list[float] = []
    warm_totals: list[float] = []
    warm_phases: dict[str, list[float]] = {}
    renders: list[float] = [render.render_ms]
    for k in range(repeat):
        store.apply("ingresses", ingress(k % n, variant=k + 1))
        candidate = renderer.render(store.snapshot())
        renders.append(candidate.render_ms)
        report = await pipeline.validate(candidate)
        if not report.valid or report.metadata.cache_hit:
            raise SystemExit("a warm candidate was invalid or unexpectedly cached")
        warm_ratios.append(_overhead(report.timings))
        warm_totals.append(report.timings["totalMs"] - report.timings["renderMs"])
        for key, value in _breakdown(report.timings).items():
            warm_phases.setdefault(key, []).append(value)

    t = cold.timings
    return {
        "ingresses": n,
        "haproxyVersion": cold.metadata.haproxy_version,
        "files": len(render.files),
        "configLines": render.files.main.content.count(b"\n"),
        "renderMs": round(statistics.median(renders), 2),
        "syntaxMs": t.get("syntaxMs"),
        "schemaMs": t.get("schemaMs"),
        "haproxyMs": t.get("haproxyMs"),
        "totalMs": t.get("totalMs"),
        "cacheHitMs": round(statistics.median(hits), 3),
        "coldOverheadRatio": round(_overhead(t), 3),
        "coldUnseenOverheadRatio": round(_overhead(unseen.timings), 3),
        "warmOverheadRatio": round(statistics.median(warm_ratios), 3),
        "warmPipelineMs": round(statistics.median(warm_totals), 2),
        "cold": _breakdown(t),
        "coldUnseen": _breakdown(unseen.timings),
        "warm": {k: round(statistics.median(v), 3) for k, v in warm_phases.items()},
    }


def _breakdown(timings: Mapping[str, float]) -> dict[str, float]:
    """Stage times, their own sub-timings, and the pipeline's own share (checksum, cache,
    finalize, report) = total - render - stages."""
    from controller.diagnostics import Phase

    phases = {f"{p.value}Ms" for p in Phase} - {"renderMs"}
    out = {k: v for k, v in timings.items() if k not in {"renderMs", "totalMs"}}
    stages = sum(v for k, v in timings.items() if k in phases)
    out["pipelineOwnMs"] = round(timings["totalMs"] - timings["renderMs"] - stages, 3)
    return out


def _overhead(timings: Mapping[str, float]) -> float:
    haproxy_ms = timings["haproxyMs"]
    pipeline_ms = timings["totalMs"] - timings["renderMs"]
    return (pipeline_ms - haproxy_ms) / haproxy_ms


def _logs_to_stderr() -> None:
    # stdout carries exactly one JSON object.
    from controller.observability.logging import configure

    configure(level="warning", stream=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingresses", type=int, default=1000)
    parser.add_argument("--haproxy", default=None, help="haproxy binary (default: detected)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.ingresses < 1 or args.repeat < 1:
        parser.error("--ingresses and --repeat must be at least 1")
    _logs_to_stderr()
    result = asyncio.run(_measure(args.ingresses, args.haproxy, args.repeat))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>20}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
