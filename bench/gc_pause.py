"""The collector pause of the pipeline vs the rest of the process (webhook, watches).

    python bench/gc_pause.py --ingresses 100 --seconds 30 --rounds 2 --json

``controller.validation.gcpause`` switches the cyclic collector off, process-wide, while a
validation runs (at most ``MAX_PAUSE_S``). ``htc run`` shares its process with kopf's watch
threads and the admission webhook; this benchmark measures what the pause does to them.

Each (mode, round) runs in a fresh process laid out like ``htc run``: the controller's event
loop holds the webhook server (the real ``WebhookServer`` and ``AdmissionJudge`` over HTTPS on
loopback) and a steady stream of validations (one Ingress changed, rendered, ``Pipeline.check``;
a new candidate each time, so no verdict-cache hit); a watch thread with its own loop reads a
stream of object events and hands each to the controller's loop with ``call_soon_threadsafe``,
as the kopf watch sets do, where it goes into the store. A driver subprocess (standing for the
API server; its own collector is not ours) streams the watch events and posts AdmissionReviews
at a fixed rate, and times both.

Modes:

- ``validate``: as built — one pause over each ``validate`` call, plus the syntax stage's own;
- ``stage``: only the syntax stage's pauses (parse and gate), none over the whole call;
- ``off``: no pause at all.

Figures per mode (medians over rounds of each round's percentile): ``webhookP50Ms``/``P99Ms``
(an AdmissionReview the templates ignore: rendered, then a verdict-cache hit; one at a time,
so queueing is not counted), ``watchP50Ms``/
``P99Ms`` (sent by the driver → applied to the store in the controller's loop),
``validateP50Ms`` (change → verdict in the validation stream), ``gcMaxMs`` (longest single
collection seen by ``gc.callbacks``), ``gcCollections``. Timing figures are noisy on a shared
machine: compare modes within one run, rounds interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # measure this checkout, whatever is installed

import aiohttp  # noqa: E402
import yaml  # noqa: E402
from aiohttp import web  # noqa: E402

from bench.pipeline import _fill, ingress, objects  # noqa: E402
from controller.operator.webhook import WebhookServer, WebhookSettings  # noqa: E402
from controller.resources import Store  # noqa: E402
from controller.spec import parse_config  # noqa: E402
from controller.testbed.tls import serving_certs  # noqa: E402
from controller.triggers import AdmissionJudge, default_engine, evaluate  # noqa: E402
from controller.validation import gcpause  # noqa: E402

QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"
MODES = ("validate", "stage", "off")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


# --- the driver (the API server's part) ------------------------------------------------------


def review(uid: str, obj: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
                "namespace": obj["metadata"]["namespace"],
                "name": obj["metadata"]["name"],
                "operation": "CREATE",
                "object": obj,
                "oldObject": None,
            },
        }
    ).encode()


async def drive(args: argparse.Namespace) -> dict[str, Any]:
    """Serve a watch stream on ``--watch-port`` and post reviews to ``--webhook``; print the
    webhook latencies (the watch latencies are taken on the receiving side)."""
    started = asyncio.Event()
    done = asyncio.Event()

    async def watch(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        started.set()
        k = 0
        interval = 1.0 / args.watch_rate
        next_at = time.monotonic()
        while not done.is_set():
            obj = ingress(k % args.ingresses, variant=100_000 + k)
            line = json.dumps({"sent": time.monotonic(), "object": obj}) + "\n"
            await resp.write(line.encode())
            k += 1
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        with contextlib.suppress(ConnectionError):
            await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/watch", watch)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.watch_port).start()
    print("ready", flush=True)
    await asyncio.wait_for(started.wait(), 60)
    ctx = ssl.create_default_context(cafile=args.ca)
    latencies: list[float] = []
    denied = 0

    async def one(session: aiohttp.ClientSession, k: int) -> None:
        nonlocal denied
        other = ingress(args.ingresses + 10_000 + k)
        other["spec"]["ingressClassName"] = "someone-else"
        t0 = time.perf_counter()
        async with session.post(args.webhook, data=review(f"u{k}", other)) as resp:
            doc = await resp.json()
        latencies.append((time.perf_counter() - t0) * 1000)
        denied += not doc["response"]["allowed"]

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
        await one(session, -1)  # warm: TLS session, first render
        latencies.clear()
        # Closed loop: one review at a time, on a fixed tick (a tick that passed while a review
        # ran is skipped), so a latency is the webhook's answer time, never time in our queue.
        interval = 1.0 / args.webhook_rate
        end = time.monotonic() + args.seconds
        next_at = time.monotonic()
        k = 0
        while time.monotonic() < end:
            await one(session, k)
            k += 1
            next_at += interval
            while next_at < time.monotonic():
                next_at += interval
            await asyncio.sleep(next_at - time.monotonic())
    done.set()
    await runner.cleanup()
    return {"webhook": latencies, "denied": denied}


# --- the controller's part ---------------------------------------------------------------


def set_mode(mode: str) -> None:
    """Switch pauses off by replacing :meth:`GcPause.begin` (all pauses) or the pipeline's
    reference to the module (its whole-call pause only)."""

    class _NoPause:
        def begin(self) -> _NoPause:
            return self

        def end(self) -> None:
            return None

    if mode == "off":
        gcpause.GcPause.begin = _NoPause.begin  # type: ignore[assignment,method-assign]
    elif mode == "stage":
        import types

        from controller.validation import pipeline

        stub = types.SimpleNamespace(GcPause=_NoPause, MAX_PAUSE_S=gcpause.MAX_PAUSE_S)
        pipeline.gcpause = stub  # type: ignore[attr-defined, assignment]


class GcTimer:
    """Durations of the collections that ran, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.durations.append((time.perf_counter() - self._start) * 1000)


def watch_thread(
    port: int, loop: asyncio.AbstractEventLoop, arrive: Any, stop: threading.Event
) -> threading.Thread:
    async def read() -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/watch", timeout=aiohttp.ClientTimeout()) as resp,
        ):
            async for line in resp.content:
                if stop.is_set():
                    return
                event = json.loads(line)
                loop.call_soon_threadsafe(arrive, event["sent"], event["object"])

    def run() -> None:
        with contextlib.suppress(aiohttp.ClientError, ConnectionError):
            asyncio.run(read())

    thread = threading.Thread(target=run, name="watch", daemon=True)
    thread.start()
    return thread


async def controller(args: argparse.Namespace) -> dict[str, Any]:
    set_mode(args.mode)
    doc = yaml.safe_load(QUICKSTART.read_text())
    doc["spec"]["watchedResources"]["ingresses"]["admission"] = True
    spec = parse_config(doc)[0].spec  # type: ignore[union-attr]
    store = Store(spec.watched_resources)
    _fill(store, objects(args.ingresses), spec.watched_resources)
    engine = default_engine(args.haproxy)(spec)
    judge = AdmissionJudge(
        engine=lambda: engine,
        view=store.snapshot,
        baseline_valid=lambda: True,
        engine_factory=default_engine(args.haproxy),
        concurrency=max(2, os.cpu_count() or 2),
    )
    work = Path(tempfile.mkdtemp(prefix="htc-bench-gc-"))
    ca, cert, key = serving_certs(work)
    server = WebhookServer(
        WebhookSettings("127.0.0.1:0", cert, key, default_timeout=30),
        judge,
        watched=lambda: dict(spec.watched_resources),
        config_ref=("default", "quickstart"),
        spec_override=lambda s: s,
    )
    await server.start()
    await evaluate(engine, store.snapshot())  # warm: the first render and verdict
    watch_ms: list[float] = []

    def arrive(sent: float, obj: dict[str, Any]) -> None:
        store.apply("ingresses", obj)
        watch_ms.append((time.monotonic() - sent) * 1000)

    with socket_port() as watch_port:
        pass
    driver = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--role=driver",
            f"--watch-port={watch_port}",
            f"--webhook=https://127.0.0.1:{server.port}/validate?timeout=30s",
            f"--ca={ca}",
            f"--ingresses={args.ingresses}",
            f"--seconds={args.seconds}",
            f"--watch-rate={args.watch_rate}",
            f"--webhook-rate={args.webhook_rate}",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert driver.stdout is not None
    ready = await asyncio.to_thread(driver.stdout.readline)
    assert ready.strip() == "ready", ready
    stop = threading.Event()
    timer = GcTimer()
    gc.collect()
    gc.callbacks.append(timer)
    counts0 = [s["collections"] for s in gc.get_stats()]
    thread = watch_thread(watch_port, asyncio.get_running_loop(), arrive, stop)
    validate_ms: list[float] = []
    invalid = 0
    end = time.monotonic() + args.seconds
    k = 0
    try:
        while time.monotonic() < end:
            store.apply("ingresses", ingress(k % args.ingresses, variant=1 + k))
            t0 = time.perf_counter()
            _, verdict = await evaluate(engine, store.snapshot())
            validate_ms.append((time.perf_counter() - t0) * 1000)
            invalid += verdict.validated is None
            k += 1
            await asyncio.sleep(args.gap)
        out, _ = await asyncio.to_thread(driver.communicate, timeout=120)
    finally:
        stop.set()
        gc.callbacks.remove(timer)
        driver.kill()
        await server.stop()
    counts = [s["collections"] - c for s, c in zip(gc.get_stats(), counts0, strict=True)]
    thread.join(5)
    result = json.loads(out.strip().splitlines()[-1])
    return {
        "mode": args.mode,
        "webhookP50Ms": pct(result["webhook"], 0.5),
        "webhookP99Ms": pct(result["webhook"], 0.99),
        "webhookMaxMs": pct(result["webhook"], 1.0),
        "webhookRequests": len(result["webhook"]),
        "webhookDenied": result["denied"],
        "watchP50Ms": pct(watch_ms, 0.5),
        "watchP99Ms": pct(watch_ms, 0.99),
        "watchMaxMs": pct(watch_ms, 1.0),
        "watchEvents": len(watch_ms),
        "validateP50Ms": pct(validate_ms, 0.5),
        "validateP99Ms": pct(validate_ms, 0.99),
        "validations": len(validate_ms),
        "invalid": invalid,
        "gcMaxMs": pct(timer.durations, 1.0),
        "gcTotalMs": round(sum(timer.durations), 1),
        "gcCollections": counts,
    }


@contextlib.contextmanager
def socket_port() -> Any:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


# --- orchestration -----------------------------------------------------------------------


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    out: dict[str, Any] = {}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        if mine:
            out[mode] = {k: round(statistics.median(r[k] for r in mine), 1) for k in keys}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=("all", "controller", "driver"), default="all")
    parser.add_argument("--mode", choices=MODES, default="validate")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--ingresses", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--watch-rate", type=float, default=50.0, help="watch events per second")
    parser.add_argument("--webhook-rate", type=float, default=1.0, help="reviews per second")
    parser.add_argument("--gap", type=float, default=0.25, help="seconds between validations")
    parser.add_argument("--haproxy", default="/usr/sbin/haproxy")
    parser.add_argument("--watch-port", type=int, default=0)
    parser.add_argument("--webhook", default="")
    parser.add_argument("--ca", default="")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.role == "driver":
        print(json.dumps(asyncio.run(drive(args))), flush=True)
        return 0
    if args.role == "controller":
        print(json.dumps(asyncio.run(controller(args))), flush=True)
        return 0
    runs = []
    for _ in range(args.rounds):
        for mode in args.modes.split(","):
            child = [
                f"--ingresses={args.ingresses}",
                f"--seconds={args.seconds}",
                f"--watch-rate={args.watch_rate}",
                f"--webhook-rate={args.webhook_rate}",
                f"--gap={args.gap}",
                f"--haproxy={args.haproxy}",
            ]
            out = subprocess.run(
                [sys.executable, __file__, "--role=controller", f"--mode={mode}", *child],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
    result = {
        "ingresses": args.ingresses,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "watchRate": args.watch_rate,
        "webhookRate": args.webhook_rate,
        "cores": os.cpu_count(),
        "modes": summarize(runs),
        "runs": runs,
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
