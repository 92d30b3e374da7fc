"""Benchmark of the validation pipeline over the quickstart templates.

    python bench/pipeline.py --ingresses 1000 [--haproxy BIN] [--repeat 5] [--sequential] --json

Generates N Ingresses (one host, two paths each), N Services and N EndpointSlices with five
ready endpoints each (loopback addresses: nothing is contacted, ``haproxy -c`` only parses),
renders the quickstart library over them as every render path of the controller does (with the
spec's inline rules: objects judged before the render is used, outputs right after) and
validates:

* **first run** (``firstRunOverheadRatio``, breakdown ``firstRun``) — the first validation in
  this fresh process by a pipeline that was *not* warmed up: it also pays the one-time costs
  (compiling schema validators, probing the sandbox's isolation). ``htc validate`` sees this;
  a running controller does not.
* **cold** (``coldOverheadRatio``, breakdown ``cold``) — the first validation of a never-seen
  candidate by a warmed-up pipeline: what a running controller sees when a candidate unlike
  anything before arrives. Each of ``--repeat`` samples builds a new pipeline, calls
  :meth:`Pipeline.warm_up` and validates a candidate of the same size in which every name and
  address differs from all earlier ones, so no per-section, per-line or per-directive cache of
  any stage can hit; only what ``warm_up`` prepares (compiled validators, the isolation
  probe) and the interpreter itself are warm. Median over the samples.
* **render** — ``renderMs`` is the median full render of the first-run and cold candidates
  by the templates alone (sandboxed, as in production), each by a new renderer: nothing to
  reuse and nothing to let go, as at start-up or after a new spec. ``renderReplacedMs`` is
  the cold candidates rendered by one renderer that rendered the candidate before: every
  object replaced, so the render also lets go of all it kept of the previous one (at
  10,000 Ingresses freeing that costs about 0.2 s). ``ruledRenderMs`` the same candidates
  rendered as the controller does, with the spec's inline rules, every object new to the
  renderer so that every object rule runs (``rulesInlineMs`` is the rules' share);
  ``ruledRenderWarmMs`` that of the warm candidates (one Ingress changed: the other
  objects' verdicts are remembered);
* **cache hit** — the same bytes again from a fresh render (median of ``--repeat`` calls);
* **warm** — candidates that each differ from an already validated one in one Ingress, the
  admission and reconcile case (median of ``--repeat`` candidates).

Overhead ratio = (pipeline time - haproxy time) / haproxy time, where pipeline time is the
validate call's wall time (``totalMs - renderMs``) and haproxy time ``haproxyAloneMs``: the
same haproxy stage (sandbox set-up, ``haproxy -c``, clean-up) run again on its own right after,
because in an overlapped run the stages share the CPUs and the run's own ``haproxyMs`` may be
longer than haproxy alone takes. The pipeline overlaps the schema and rules stages with
``haproxy -c`` (``--sequential`` turns that off for comparison); per-phase times stay each
stage's own, ``overlapMs`` is the wall time of the overlapped stages together, and
``pipelineOwnMs`` what is left: checksum, cache, finalization, report. Prints one JSON object
(``--json``) or a short table.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # measure this checkout, whatever is installed

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
    # Distinct for every i below 250 * 254: no two candidates share a server address.
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


async def _measure(n: int, haproxy: str | None, repeat: int, overlap: bool) -> dict[str, Any]:
    from controller.diagnostics import Phase
    from controller.resources import Store
    from controller.spec.loader import load_config
    from controller.validation import Pipeline, StageContext
    from controller.validation.gcpause import GcPause

    if (repeat + 1) * n > 250 * 254:
        raise SystemExit("--ingresses x (--repeat + 1) is too large for distinct addresses")
    config, problems = load_config(QUICKSTART)
    if config is None:
        raise SystemExit("cannot load the quickstart: " + "; ".join(d.message for d in problems))
    spec = config.spec
    from controller.render import Renderer
    from controller.validation.rules import RuledRenderer

    renderer = RuledRenderer.from_spec(spec)
    templates = Renderer(spec)  # the same templates without the rules, for renderReplacedMs
    watched = Store.from_spec(spec).watched()
    template_renders: list[float] = []
    replaced_renders: list[float] = []

    def candidate(start: int) -> tuple[Any, Any]:
        store = Store.from_spec(spec)
        _fill(store, objects(n, start=start), watched)
        template_renders.append(Renderer(spec).render(store.snapshot()).render_ms)
        replaced_renders.append(templates.render(store.snapshot()).render_ms)
        render = renderer.render(store.snapshot())
        if not render.ok:
            raise SystemExit("render failed: " + "; ".join(d.message for d in render.diagnostics))
        return store, render

    def pipeline() -> Pipeline:
        p = Pipeline.from_spec(spec, haproxy_binary=haproxy)
        if not overlap:
            p.overlap = False  # otherwise the pipeline's own choice (on with a second CPU)
        return p

    async def judged(p: Pipeline, render: Any, held: Any = None) -> dict[str, float]:
        """The report's timings, plus ``haproxyAloneMs``: the same haproxy stage run again on
        its own right after, the denominator of the overhead ratio (an overlapped run shares
        the CPUs, so its own ``haproxyMs`` may be longer than haproxy alone takes). ``held``:
        a pause of the collector begun before the render, ended at the verdict."""
        try:
            report = await p.validate(render)
        finally:
            if held is not None:
                held.end()
        if not report.valid:
            from controller.validation import format_report

            sys.stderr.write(format_report(report, "text", render=render))
            raise SystemExit("a generated candidate is not valid")
        if report.metadata.cache_hit:
            raise SystemExit("a new candidate was unexpectedly cached")
        stage = next(s for s in p.stages if s.phase is Phase.HAPROXY)
        # The pipeline leaves the collector's pass over what the run built until after the
        # verdict: it must not land in the denominator either.
        gc.collect()
        t = time.perf_counter()
        await stage.run(StageContext(render=render, haproxy_version=p.haproxy_version))
        alone = round((time.perf_counter() - t) * 1000.0, 3)
        return {**report.timings, "haproxyAloneMs": alone}

    # First run: fresh process, no warm-up.
    _, first_render = candidate(0)
    first_pipeline = pipeline()
    first = await judged(first_pipeline, first_render)

    # Cold: a new, warmed-up pipeline per sample; every candidate unlike all before it.
    cold: list[Mapping[str, float]] = []
    warm_ups: list[float] = []
    renders: list[float] = [first_render.render_ms]  # every object new to the renderer
    inline: list[float] = [_inline_ms(first_render)]
    warm_renders: list[float] = []  # one Ingress changed since the last render
    p = pipeline()
    store: Any = None
    for k in range(repeat):
        p = pipeline()
        t = time.perf_counter()
        p.warm_up()
        warm_ups.append((time.perf_counter() - t) * 1000.0)
        store, render = candidate((k + 1) * n)
        renders.append(render.render_ms)
        inline.append(_inline_ms(render))
        cold.append(await judged(p, render))

    hits: list[float] = []
    for _ in range(repeat):
        again = renderer.render(store.snapshot())  # new objects, identical bytes
        t = time.perf_counter()
        report = await p.validate(again)
        hits.append((time.perf_counter() - t) * 1000.0)
        assert report.metadata.cache_hit

    warm: list[Mapping[str, float]] = []
    start = repeat * n
    for k in range(repeat):
        store.apply("ingresses", ingress(start + k % n, variant=k + 1))
        # As the controller's evaluate() does: one pause of the collector from the render to
        # the verdict (the pipeline has what the render left examined while haproxy -c runs).
        held = GcPause().begin()
        changed = renderer.render(store.snapshot())
        warm_renders.append(changed.render_ms)
        warm.append(await judged(p, changed, held))

    med = _median(cold)
    return {
        "ingresses": n,
        "haproxyVersion": first_pipeline.haproxy_version,
        "overlap": p.overlap,
        "files": len(first_render.files),
        "configLines": first_render.files.main.content.count(b"\n"),
        "renderMs": round(statistics.median(template_renders), 2),
        "renderReplacedMs": round(statistics.median(replaced_renders[1:] or [0.0]), 2),
        "ruledRenderMs": round(statistics.median(renders), 2),
        "rulesInlineMs": round(statistics.median(inline), 2),
        "ruledRenderWarmMs": round(statistics.median(warm_renders), 2),
        "syntaxMs": med.get("syntaxMs"),
        "schemaMs": med.get("schemaMs"),
        "haproxyMs": med.get("haproxyMs"),
        "haproxyAloneMs": med.get("haproxyAloneMs"),
        "rulesMs": med.get("rulesMs"),
        "totalMs": med.get("totalMs"),
        "cacheHitMs": round(statistics.median(hits), 3),
        "coldOverheadRatio": round(statistics.median(_overhead(x) for x in cold), 3),
        "firstRunOverheadRatio": round(_overhead(first), 3),
        "warmOverheadRatio": round(statistics.median(_overhead(x) for x in warm), 3),
        "warmPipelineMs": round(statistics.median(_wall(x) for x in warm), 2),
        "firstWarmUpMs": round(warm_ups[0], 1),
        "laterWarmUpMs": round(statistics.median(warm_ups[1:]), 1) if repeat > 1 else None,
        "firstRun": _breakdown(first),
        "cold": {k: v for k, v in med.items() if k not in {"renderMs", "totalMs"}},
        "warm": {k: v for k, v in _median(warm).items() if k not in {"renderMs", "totalMs"}},
    }


def _inline_ms(render: Any) -> float:
    """The inline rules' share of ``render_ms``."""
    return float(render.inline_rules.ms) if render.inline_rules is not None else 0.0


def _median(samples: list[Mapping[str, float]]) -> dict[str, float]:
    """Per-key medians of the samples' breakdowns (so ``pipelineOwnMs`` is a median too)."""
    broken = [{**s, **_breakdown(s)} for s in samples]
    keys = [k for k in broken[0] if all(k in s for s in broken)]
    return {k: round(statistics.median(s[k] for s in broken), 3) for k in keys}


def _breakdown(timings: Mapping[str, float]) -> dict[str, float]:
    """Stage times, their own sub-timings, and the pipeline's own share (checksum, cache,
    finalize, report): wall time minus the stages, counting overlapped stages once."""
    from controller.diagnostics import Phase
    from controller.validation.pipeline import SPECULATIVE_PHASES

    phases = {f"{p.value}Ms" for p in Phase} - {"renderMs"}
    skip = {"renderMs", "totalMs", "pipelineOwnMs"}
    overlapped = {f"{p.value}Ms" for p in SPECULATIVE_PHASES} if "overlapMs" in timings else set()
    out = {k: v for k, v in timings.items() if k not in skip}
    stages = sum(v for k, v in timings.items() if k in phases - overlapped)
    stages += timings.get("overlapMs", 0.0)
    out["pipelineOwnMs"] = round(_wall(timings) - stages, 3)
    return out


def _wall(timings: Mapping[str, float]) -> float:
    return timings["totalMs"] - timings["renderMs"]


def _overhead(timings: Mapping[str, float]) -> float:
    """(pipeline wall time - haproxy time) / haproxy time, haproxy time being the stage run
    alone: what the pipeline adds to a bare sandboxed ``haproxy -c``."""
    haproxy_ms = timings["haproxyAloneMs"]
    return (_wall(timings) - haproxy_ms) / haproxy_ms


def _logs_to_stderr() -> None:
    # stdout carries exactly one JSON object.
    from controller.observability.logging import configure

    configure(level="warning", stream=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingresses", type=int, default=1000)
    parser.add_argument("--haproxy", default=None, help="haproxy binary (default: detected)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--sequential", action="store_true", help="run every stage after the one before"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.ingresses < 1 or args.repeat < 1:
        parser.error("--ingresses and --repeat must be at least 1")
    _logs_to_stderr()
    result = asyncio.run(
        _measure(args.ingresses, args.haproxy, args.repeat, overlap=not args.sequential)
    )
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>22}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
