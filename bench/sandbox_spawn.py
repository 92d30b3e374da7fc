"""What one sandboxed ``haproxy -c`` costs the controller's own process, by its size.

    python bench/sandbox_spawn.py [--haproxy BIN] [--rss 70,400,800] [--runs 25] --json

Grows this process to each resident size in turn (Python objects, as a controller's store
is) and runs a small configuration through ``run_sandboxed`` ``--runs`` times, once with the
process forking its checks itself (``spawner`` mode ``never``) and once with the spawn helper
(mode ``always``; started and ready before the runs). Reports per mode and size the medians of
the calling process's CPU time (``time.process_time``: what holds the interpreter lock, the
fork's page-table copy included) and wall time, for the whole run and for its parts:
``build_plan``, ``spawn`` (pipes and fork, or the request to the helper) and ``kill_all``
(the clean-up's scan of ``/proc``). The two modes alternate per size, in one process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # measure this checkout, whatever is installed

CONFIG = (
    b"global\n    maxconn 10\ndefaults\n    mode http\n    timeout client 1s\n"
    b"    timeout server 1s\n    timeout connect 1s\nbackend b\n    server s 127.0.0.1:80\n"
)


def _rss_mb() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // (1 << 20)


def _timed(parts: dict[str, list[tuple[float, float]]], module: Any, name: str) -> None:
    inner: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            parts.setdefault(name, []).append(
                ((time.process_time() - cpu) * 1e3, (time.perf_counter() - wall) * 1e3)
            )

    setattr(module, name, wrapper)


def _medians(samples: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "cpuMs": round(statistics.median(s[0] for s in samples), 2),
        "wallMs": round(statistics.median(s[1] for s in samples), 2),
    }


async def _measure(haproxy: str, sizes: list[int], runs: int) -> list[dict[str, Any]]:
    from controller.render import FileEntry, FileKind, FileSet
    from controller.validation.sandbox import SANDBOX_DIR, spawner
    from controller.validation.sandbox import run as sandbox_run

    parts: dict[str, list[tuple[float, float]]] = {}
    for name in ("build_plan", "spawn", "_kill_all"):
        _timed(parts, sandbox_run, name)
    files = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, CONFIG)])
    argv = [haproxy, "-c", "-f", SANDBOX_DIR + "/haproxy.cfg"]
    ballast: list[list[dict[str, Any]]] = []
    rows = []
    for size in sizes:
        while _rss_mb() < size:
            ballast.append([{"k": i, "v": str(i) * 3} for i in range(20_000)])
        for mode in ("never", "always"):
            spawner.set_mode(mode)
            if mode == "always" and not spawner.start_helper(timeout=30):
                raise SystemExit("the spawn helper did not start")
            await sandbox_run.run_sandboxed(argv, files, timeout=10)  # warm
            parts.clear()
            whole = []
            for _ in range(runs):
                cpu, wall = time.process_time(), time.perf_counter()
                result = await sandbox_run.run_sandboxed(argv, files, timeout=10)
                whole.append(
                    ((time.process_time() - cpu) * 1e3, (time.perf_counter() - wall) * 1e3)
                )
                if result.returncode not in (0, 2):  # 2: valid, but no listener
                    raise SystemExit(f"haproxy -c failed: {result.stderr}")
            rows.append(
                {
                    "rssMb": _rss_mb(),
                    "mode": mode,
                    "run": _medians(whole),
                    **{name.strip("_"): _medians(s) for name, s in parts.items()},
                }
            )
    spawner.set_mode("auto")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--haproxy", default=None, help="haproxy binary (default: detected)")
    parser.add_argument("--rss", default="70,400,800", help="resident sizes in MB, ascending")
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    from controller.observability.logging import configure
    from controller.validation.haproxy import HaproxyBinary

    configure(level="warning", stream=sys.stderr)  # stdout carries exactly one JSON object

    haproxy = os.path.abspath(HaproxyBinary.detect(args.haproxy).path)
    sizes = sorted(int(x) for x in args.rss.split(","))
    rows = asyncio.run(_measure(haproxy, sizes, args.runs))
    out = {"cpus": len(os.sched_getaffinity(0)), "runs": args.runs, "results": rows}
    if args.json:
        print(json.dumps(out))
    else:
        for r in rows:
            print(
                f"{r['rssMb']:>5} MB {r['mode']:>6}: run {r['run']['cpuMs']:>6} ms CPU, "
                f"spawn {r['spawn']['cpuMs']:>6} ms CPU"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
