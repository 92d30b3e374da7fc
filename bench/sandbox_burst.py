"""What the sandbox adds to a burst of checks, by layer, counting the kernel's own work too.

    python bench/sandbox_burst.py [--haproxy BIN] [--ingresses 1000] [--runs 150] [--rounds 2] --json

Runs ``--runs`` checks two at a time (the admission webhook's run slots on two CPUs), in
alternating modes, ``--rounds`` times:

- ``plain``: ``haproxy -c`` on the quickstart's rendered configuration for ``--ingresses``
  Ingresses (the pipeline benchmark's objects), started directly, no sandbox;
- ``sandboxed``: the same file set through ``run_sandboxed`` with the haproxy stage's argv and
  policy, the spawn helper started first (as a controller of that size has it);
- ``version-*``: ``haproxy -v`` (same program, same allow-list, no parsing), so that what is
  left is the sandbox alone: ``version-plain`` without one, ``version-full`` with every layer
  this host offers, ``version-shared-net`` with network allowed (no network namespace of its
  own), ``version-no-namespaces`` (Landlock and the uid drop), ``version-landlock`` (Landlock
  only), ``version-none`` (no kernel layer: the run's directory, helper, limits, sweep).

Per run: ``wallMs``; ``childCpuMs`` (reaped children: the checked programs); ``selfCpuMs``
(this process: preparing, spawning, sweeping, cleaning); ``helperCpuMs`` (the spawn helper);
``kernelThreadsCpuMs`` (every kernel thread of the host: namespace teardown is done there,
asynchronously, and shows in no process's own time); ``hostBusyMs`` (all CPUs of the host from
``/proc/stat``: on a shared machine it includes others' work, but it is what the burst had to
share). Kernel-thread and host figures are host-wide: read them as upper bounds.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # measure this checkout, whatever is installed

import yaml  # noqa: E402

from bench.pipeline import _fill, objects  # noqa: E402
from controller.render.fileset import FileEntry, FileKind, FileSet  # noqa: E402
from controller.resources import Store  # noqa: E402
from controller.spec.loader import parse_config  # noqa: E402
from controller.triggers import default_engine  # noqa: E402
from controller.validation import Pipeline  # noqa: E402
from controller.validation.haproxy.stage import HaproxyStage  # noqa: E402
from controller.validation.sandbox import (  # noqa: E402
    SandboxPolicy,
    run_sandboxed,
    spawner,
)

QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"
_TICK = os.sysconf("SC_CLK_TCK")


def _kernel_threads_s() -> float:
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[1] == "2":  # a child of kthreadd
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


def _host_busy_s() -> float:
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:9]]
    return (sum(values) - values[3] - values[4]) / _TICK


def _pid_cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _usage_s(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


async def _plain(argv: list[str], cwd: str, runs: int) -> None:
    slots = asyncio.Semaphore(2)

    async def one() -> None:
        async with slots:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            if await proc.wait() != 0:
                raise RuntimeError(f"{argv} failed")

    await asyncio.gather(*(one() for _ in range(runs)))


async def _sandboxed(
    argv: list[str],
    files: FileSet,
    policy: SandboxPolicy,
    runs: int,
    extra: Mapping[str, bytes] | None = None,
) -> None:
    async def one() -> None:  # run_sandboxed's own semaphore: the CPUs this process may use
        result = await run_sandboxed(argv, files, timeout=10.0, policy=policy, extra_files=extra)
        if result.returncode != 0:
            raise RuntimeError(f"{argv} failed: {result.stderr[-300:]}")

    await asyncio.gather(*(one() for _ in range(runs)))


async def _measure(runs: int, burst: Callable[[], Awaitable[None]]) -> dict[str, float]:
    helper = spawner.helper_pid()
    k0, h0, c0, s0 = _kernel_threads_s(), _host_busy_s(), _usage_s(-1), _usage_s(0)
    p0, t0 = _pid_cpu_s(helper), time.perf_counter()
    await burst()
    wall = time.perf_counter() - t0
    await asyncio.sleep(0.3)  # namespace teardown queued by the last runs
    per = 1000.0 / runs
    return {
        "wallMs": round(wall * per, 2),
        "childCpuMs": round((_usage_s(-1) - c0) * per, 2),
        "selfCpuMs": round((_usage_s(0) - s0) * per, 2),
        "helperCpuMs": round((_pid_cpu_s(helper) - p0) * per, 2),
        "kernelThreadsCpuMs": round((_kernel_threads_s() - k0) * per, 2),
        "hostBusyMs": round((_host_busy_s() - h0) * per, 2),
    }


def _rendered(haproxy: str, n: int) -> tuple[FileSet, HaproxyStage, str]:
    doc = yaml.safe_load(QUICKSTART.read_text())
    spec = parse_config(doc)[0].spec  # type: ignore[union-attr]
    store = Store(spec.watched_resources)
    _fill(store, objects(n), spec.watched_resources)
    engine = default_engine(haproxy)(spec)
    render = engine.renderer.render(store.snapshot())
    assert isinstance(engine.pipeline, Pipeline)
    stage = next(s for s in engine.pipeline.stages if isinstance(s, HaproxyStage))
    out = Path(tempfile.mkdtemp(prefix="htc-bench-sbx-"))
    for entry in render.files:
        path = out / entry.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(entry.content)
    return render.files, stage, str(out)


async def main_async(haproxy: str, n: int, runs: int, rounds: int) -> dict[str, Any]:
    files, stage, out = _rendered(haproxy, n)
    if not spawner.start_helper(10.0):
        raise RuntimeError("the spawn helper did not start")
    pol = stage.policy
    check_argv, check_extra = stage.invocation(files)
    tiny = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, b"global\n")])
    version = [haproxy, "-v"]
    layers = {
        "version-full": pol,
        "version-shared-net": dataclasses.replace(pol, network=True),
        "version-no-namespaces": dataclasses.replace(pol, namespaces=False),
        "version-landlock": dataclasses.replace(pol, namespaces=False, drop_privileges=False),
        "version-none": dataclasses.replace(
            pol, namespaces=False, drop_privileges=False, landlock=False
        ),
    }
    modes: dict[str, Callable[[], Awaitable[None]]] = {
        "plain": lambda: _plain([haproxy, "-c", "-q", "-f", "haproxy.cfg"], out, runs),
        "sandboxed": lambda: _sandboxed(check_argv, files, pol, runs, check_extra),
        "version-plain": lambda: _plain(version, out, runs),
    }
    for name, policy in layers.items():
        modes[name] = lambda p=policy: _sandboxed(version, tiny, p, runs)  # type: ignore[misc]
    found: dict[str, list[dict[str, float]]] = {name: [] for name in modes}
    for _ in range(rounds):
        for name, burst in modes.items():
            found[name].append(await _measure(runs, burst))
    return {
        "ingresses": n,
        "runs": runs,
        "rounds": rounds,
        "loadAverage": round(os.getloadavg()[0], 2),
        "modes": found,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--haproxy", default="/usr/sbin/haproxy")
    parser.add_argument("--ingresses", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    doc = asyncio.run(main_async(args.haproxy, args.ingresses, args.runs, args.rounds))
    print(json.dumps(doc) if args.json else json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
