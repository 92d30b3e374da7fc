"""Admission latency: AdmissionReviews posted over HTTPS, as the API server sends them.

    python bench/admission.py --ingresses 1000 --concurrency 150 [--haproxy BIN] [--slots N]
        [--rounds R] --json

The webhook server of ``htc run`` (the same ``WebhookServer`` and ``AdmissionJudge``) runs in
this process over a store of N Ingresses, Services and EndpointSlices (the pipeline benchmark's
objects) with the quickstart library. Figures:

- ``singleP50Ms`` / ``singleP99Ms``: one distinct proposal at a time (an Ingress update whose
  output changes), end to end through HTTPS;
- ``concurrentP50Ms`` / ``concurrentP99Ms``: ``--concurrency`` distinct creates at once,
  posted by a client in a process of its own (``bench/admission_client.py``), as the API
  server posts them: one connection each, on the same cores, but not on this process's
  event loop; ``--rounds`` such bursts (3 by default), each of creates of its own, and the
  medians of their p50s and p99s (``concurrentRounds``: each burst's p99, CPU per proposal,
  garbage collection and floor; ``concurrentDenied``: how many were denied in all, by the
  deadline when overloaded; ``concurrentClientCpuMsPerProposal``: the client's CPU, not
  counted below);
- ``unchangedP50Ms`` / ``unchangedP99Ms``: proposals the templates ignore (another ingress
  class), one at a time: the output checksum is unchanged, so the stages that judge the bytes
  answer from the cache and only the rules stage judges the new object (of 50 samples,
  the p99 is the slowest);
- ``unchangedCpuP50Ms``: CPU time per ignored proposal, of this process, its reaped children
  and the rule evaluation worker; ``unchangedRuleBatches``: rule batches of those proposals
  run by the worker (``jobs``) or forked (``fallbacks``; ``--rule-workers 0`` forks them
  all); ``unchangedLongestGcMs``: the longest collection of the cyclic garbage collector
  meanwhile; ``loadAverage`` at the end (the figures are wall times);
- ``transportP50Ms``: a review of a kind this controller does not judge, answered without a
  render: what HTTPS, aiohttp and JSON cost every answer;
- ``runSlots``: judgements in flight at once (``--slots``, by default one more than the CPUs
  this process may use, as in ``htc run``); ``droppedRuns``: queued judgements of the bursts
  dropped unstarted because their requests had been answered (denied) by the deadline;
- ``haproxyMs``: ``haproxy -c`` alone on the rendered configuration (median wall time of
  plain runs, no sandbox, the environment of this process; five before the first burst,
  between bursts and after the last, whose medians are ``haproxyMsBetweenBursts``);
  ``cores``;
  ``floorMs = concurrency * haproxyMs / cores``, the least any design could take for the
  concurrent burst. ``haproxyCpuMs``: the CPU time of those plain runs (median); on a busy
  machine the wall time is the larger;
- ``haproxyCheckMs`` / ``haproxyCheckCpuMs``: the same file set checked with the haproxy
  stage's own argv (``checkPrelude``: with the prelude that spares HAProxy loading the system
  CA store, see ``controller/validation/haproxy/prelude.py``), plain, empty environment, and
  ``checkFloorMs``, the floor computed from it: what the burst would take if a proposal cost
  no more than the check the pipeline runs;
- ``haproxySandboxedMs`` / ``haproxySandboxedCpuMs``: the same file set checked the way the
  pipeline checks it (the haproxy stage's argv and sandbox policy, through
  ``run_sandboxed``), wall and CPU (medians, alternated with the plain runs), so that the
  floor and what a proposal really pays can be told apart;
- ``concurrentCpuMsPerProposal``: the CPU of the burst (this process, its reaped children,
  the rule evaluation worker) divided by ``--concurrency``. On ``cores`` fully used, the
  burst meets ``1.3 x floorMs`` only if this is at most about ``1.3 x haproxyMs``;
  ``concurrentGcMs``: the cyclic garbage collector's time during the burst (wall, summed),
  ``concurrentFullGcs``: how many of its collections took the whole heap.

and, for context, through the real API server (the test bed's control plane, started here;
``--kubectl-applies 0`` skips it, and it is null with a reason where the control plane cannot
be built):

- ``kubectlApplyP50Ms``: ``kubectl apply`` of a new Ingress into ``default`` with this webhook
  registered by the same generator as ``htc webhook-config`` (URL on loopback, ``caBundle``);
  the API server calls the webhook, which judges the Ingress against its store of N;
- ``kubectlApplyWithoutWebhookP50Ms``: the same applies before the webhook is registered, so
  the difference is what admission adds to a user's ``kubectl apply`` (kubectl's own start,
  about a hundred milliseconds, is in both).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # measure this checkout, whatever is installed

import aiohttp  # noqa: E402
import yaml  # noqa: E402

from bench.admission_client import post  # noqa: E402
from bench.pipeline import _fill, ingress, objects  # noqa: E402
from controller.operator.webhook import WebhookServer, WebhookSettings  # noqa: E402
from controller.resources import Store  # noqa: E402
from controller.spec.loader import parse_config  # noqa: E402
from controller.spec.models import HAProxyTemplateConfigSpec  # noqa: E402
from controller.spec.webhook_config import webhook_configuration  # noqa: E402
from controller.testbed import cluster  # noqa: E402
from controller.testbed.tls import serving_certs  # noqa: E402
from controller.triggers import default_engine  # noqa: E402
from controller.triggers.admission import AdmissionJudge  # noqa: E402
from controller.validation import Pipeline  # noqa: E402
from controller.validation.haproxy.prelude import PRELUDE_NAME  # noqa: E402
from controller.validation.haproxy.stage import HaproxyStage  # noqa: E402
from controller.validation.rules import pool as rules_pool  # noqa: E402
from controller.validation.sandbox import SANDBOX_DIR, run_sandboxed  # noqa: E402

QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"


def review(uid: str, op: str, obj: dict[str, Any], old: dict[str, Any] | None) -> bytes:
    group, _, version = obj["apiVersion"].rpartition("/")
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": group, "version": version, "kind": obj["kind"]},
                "namespace": obj["metadata"]["namespace"],
                "name": obj["metadata"]["name"],
                "operation": op,
                "object": obj,
                "oldObject": old,
            },
        }
    ).encode()


gc_pauses: list[float] = []
gc_generations: list[int] = []
_gc_started = [0.0]


def _gc_timer(phase: str, info: dict[str, Any]) -> None:
    """Times each collection: one full collection of the controller's heap is a p99 of
    its own among 50 samples."""
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        gc_pauses.append((time.perf_counter() - _gc_started[0]) * 1000)
        gc_generations.append(info["generation"])


def cpu_seconds() -> float:
    """CPU time of this process and of its reaped children (forked rule workers, haproxy)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def children_seconds() -> float:
    """CPU time of this process's reaped children (``haproxy -c``, plain or sandboxed)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def kubectl_applies(
    spec: HAProxyTemplateConfigSpec,
    url: str,
    ca: Path,
    calls: Callable[[], int],
    first: int,
    count: int,
) -> dict[str, Any]:
    """``kubectl apply`` of ``count`` new Ingresses, without and then with the webhook
    registered (blocking: run it off the loop that serves the webhook). ``calls``: how many
    reviews the webhook has received."""
    why = cluster.can_build()
    if why is not None:
        return {"kubectlApplyP50Ms": None, "kubectlApplySkipped": why}
    with cluster.ControlPlane(cluster.build()) as plane:

        def applies(start: int) -> list[float]:
            took = []
            for k in range(start, start + count):
                obj = ingress(k)
                for path in obj["spec"]["rules"][0]["http"]["paths"]:
                    path["backend"]["service"]["name"] = "svc-0"  # exists in the judged store
                t0 = time.perf_counter()
                proc = plane.kubectl("apply", "-f", "-", input=json.dumps(obj), check=False)
                took.append((time.perf_counter() - t0) * 1000)
                if proc.returncode != 0:
                    raise cluster.ClusterError(f"kubectl apply refused: {proc.stderr[-500:]}")
            return took

        plain = applies(first)
        hook = webhook_configuration(
            spec, ca_bundle=ca.read_bytes(), url=url, name="htc-bench", timeout_seconds=30
        )
        plane.kubectl("apply", "-f", "-", input=json.dumps(hook))
        # the API server reads webhook configurations through an informer: wait until it calls
        deadline = time.monotonic() + 30
        before = calls()
        while calls() == before:
            if time.monotonic() > deadline:
                raise cluster.ClusterError("the API server never called the registered webhook")
            probe = ingress(first + count)
            plane.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(probe),
                          check=False)  # fmt: skip
            time.sleep(0.2)
        with_hook = applies(first + count + 1)
    return {
        "kubectlApplyP50Ms": pct(with_hook, 0.5),
        "kubectlApplyWithoutWebhookP50Ms": pct(plain, 0.5),
        "kubectlApplies": count,
    }


FLOOR_ROUNDS = 5  # plain runs of haproxy -c on each side of a burst


class Floor:
    """``haproxy -c`` of the live file set, plain and as the pipeline runs it.

    Its plain runs are sampled before the first burst, between bursts and after the last, and
    ``haproxyMs`` is their median: this machine's speed drifts over minutes (a check's CPU by a
    quarter and more), and a floor taken only after one burst compared that burst with
    whatever phase of the machine followed it.
    """

    def __init__(self, engine: Any, store: Store, work: Path, haproxy: str) -> None:
        self.haproxy = haproxy
        self.render = engine.renderer.render(store.snapshot())
        self.out = work / "check"
        for entry in self.render.files:
            path = self.out / entry.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(entry.content)
        assert isinstance(engine.pipeline, Pipeline)
        self.stage = next(s for s in engine.pipeline.stages if isinstance(s, HaproxyStage))
        self.argv, self.extra = self.stage.invocation(self.render.files)
        for rel, content in self.extra.items():
            (self.out / rel).write_bytes(content)
        self.plain_check = [a.replace(SANDBOX_DIR, str(self.out)) for a in self.argv]
        self.times: dict[str, list[tuple[float, float]]] = {
            k: [] for k in ("plain", "check", "sandboxed")
        }

    async def sample(self, rounds: int, alternated: bool = False) -> list[float]:
        """Plain runs (alternated with the pipeline's argv, plain and sandboxed); their walls."""
        walls = []
        for _ in range(rounds):
            walls.append(await self._timed("plain", lambda: subprocess.run(
                [self.haproxy, "-c", "-q", "-f", "haproxy.cfg"],
                cwd=self.out, check=False, capture_output=True,
            )))  # fmt: skip
            if alternated:
                await self._timed("check", lambda: subprocess.run(
                    self.plain_check, cwd=self.out, env={}, check=False, capture_output=True
                ))  # fmt: skip
                await self._timed("sandboxed", lambda: run_sandboxed(
                    self.argv, self.render.files, timeout=self.stage.timeout,
                    policy=self.stage.policy, extra_files=self.extra,
                ))  # fmt: skip
        return walls

    def walls(self, kind: str) -> list[float]:
        return [wall for wall, _ in self.times[kind]]

    def cpus(self, kind: str) -> list[float]:
        return [cpu for _, cpu in self.times[kind]]

    async def _timed(self, kind: str, run: Callable[[], Any]) -> float:
        cpu0, t0 = children_seconds(), time.perf_counter()
        if asyncio.iscoroutine(done := run()):
            await done
        wall = (time.perf_counter() - t0) * 1000
        self.times[kind].append((wall, (children_seconds() - cpu0) * 1000))
        return wall


def creates(first: int, count: int) -> list[dict[str, Any]]:
    """Distinct new Ingresses that stay valid (they route to an existing Service)."""
    made = [ingress(first + k) for k in range(count)]
    for c in made:
        c["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] = "svc-0"
        c["spec"]["rules"][0]["http"]["paths"][1]["backend"]["service"]["name"] = "svc-0"
    return made


@dataclass(frozen=True)
class Burst:
    """One burst's latencies, and the CPU it cost (seconds): ``cpu`` is this process, its
    reaped children and the rules worker, without the client, whose own is ``client``."""

    ms: list[float]
    denied: int
    cpu: float
    children: float
    worker: float
    client: float
    gc_ms: float
    full_gcs: int


async def post_burst(url: str, ca: Path, work: Path, proposals: list[dict[str, Any]]) -> Burst:
    """Every proposal created at once by ``bench/admission_client.py``, in a process of its own."""
    bodies = work / "burst.jsonl"
    bodies.write_bytes(
        b"".join(review(f"c{k}", "CREATE", c, None) + b"\n" for k, c in enumerate(proposals))
    )
    client = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bench" / "admission_client.py"), url, str(ca),
        str(bodies), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert client.stdin is not None and client.stdout is not None
    assert await client.stdout.readline() == b"ready\n", "the burst client did not start"
    cpu0, worker0 = cpu_seconds(), rules_pool.stats()["cpuUs"]
    children0 = children_seconds()
    gc_pauses.clear()
    gc_generations.clear()
    client.stdin.write(b"go\n")
    await client.stdin.drain()
    burst = json.loads(await client.stdout.readline())
    await client.wait()
    worker = (rules_pool.stats()["cpuUs"] - worker0) / 1e6
    client_total = burst["totalCpuMs"] / 1000  # a reaped child too: counted on its own
    return Burst(
        ms=burst["ms"],
        denied=sum(1 for ok in burst["allowed"] if not ok),
        cpu=cpu_seconds() - cpu0 - client_total + worker,
        children=children_seconds() - children0 - client_total,
        worker=worker,
        client=burst["burstCpuMs"] / 1000,
        gc_ms=sum(gc_pauses),
        full_gcs=gc_generations.count(2),
    )


async def settle(judge: AdmissionJudge, limit: float = 120.0) -> None:
    """Waits for judgements still running after their answers (denied by the deadline), so
    that they do not load what is measured next; bounded by ``limit`` seconds."""
    end = time.monotonic() + limit
    while (judge.slots.busy or judge.slots.waiting) and time.monotonic() < end:
        await asyncio.sleep(0.05)


async def measure(
    n: int,
    concurrency: int,
    haproxy: str,
    applies: int,
    slots: int | None = None,
    rule_workers: int | None = None,
    rounds: int = 3,
) -> dict[str, Any]:
    if rule_workers is not None:
        rules_pool.configure(size=rule_workers)
    gc.callbacks.append(_gc_timer)
    doc = yaml.safe_load(QUICKSTART.read_text())
    doc["spec"]["watchedResources"]["ingresses"]["admission"] = True
    spec = parse_config(doc)[0].spec  # type: ignore[union-attr]
    store = Store(spec.watched_resources)
    _fill(store, objects(n), spec.watched_resources)
    engine = default_engine(haproxy)(spec)
    judge = AdmissionJudge(  # run slots as htc run has them
        engine=lambda: engine,
        view=store.snapshot,
        baseline_valid=lambda: True,
        engine_factory=default_engine(haproxy),
        concurrency=slots,
    )
    work = Path(tempfile.mkdtemp(prefix="htc-bench-adm-"))
    ca, cert, key = serving_certs(work)
    server = WebhookServer(
        WebhookSettings("127.0.0.1:0", cert, key, default_timeout=30),
        judge,
        watched=lambda: dict(spec.watched_resources),
        config_ref=("default", "quickstart"),
        spec_override=lambda s: s,
    )
    await server.start()
    url = f"https://127.0.0.1:{server.port}/validate?timeout=30s"
    ctx = ssl.create_default_context(cafile=str(ca))
    try:
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=concurrency)
        ) as session:
            # warm: the baseline verdict is cached, as it is in a running controller
            await post(session, url, review("w", "UPDATE", ingress(0), ingress(0)))
            single = []
            for k in range(30):
                new = ingress(k % n, variant=k + 1)
                ms, ok = await post(session, url, review(f"s{k}", "UPDATE", new, ingress(k % n)))
                assert ok, "a valid proposal was denied"
                single.append(ms)
            unchanged, unchanged_cpu = [], []
            before = rules_pool.stats()
            gc_pauses.clear()
            gc_generations.clear()
            for k in range(50):
                other = ingress(n + 10_000 + k)
                other["spec"]["ingressClassName"] = "someone-else"
                cpu0, worker0 = cpu_seconds(), rules_pool.stats()["cpuUs"]
                ms, ok = await post(session, url, review(f"u{k}", "CREATE", other, None))
                assert ok
                unchanged.append(ms)
                worker = (rules_pool.stats()["cpuUs"] - worker0) / 1e6
                unchanged_cpu.append((cpu_seconds() - cpu0 + worker) * 1000)
            after = rules_pool.stats()
            worker_batches = {k: after[k] - before[k] for k in ("jobs", "fallbacks")}
            unchanged_gc = max(gc_pauses, default=0.0)
            # HTTPS, aiohttp and JSON alone: a kind this controller does not judge is answered
            # without a render, so this is what every answer pays before any judgement.
            transport = []
            for k in range(50):
                other = {**ingress(k), "apiVersion": "example.com/v1", "kind": "Unjudged"}
                ms, ok = await post(session, url, review(f"t{k}", "CREATE", other, None))
                assert ok
                transport.append(ms)
            through_api: dict[str, Any] = {}
            if applies > 0:
                base = f"https://127.0.0.1:{server.port}"
                through_api = await asyncio.to_thread(
                    kubectl_applies, spec, base, ca, lambda: server.requests, n + 20_000, applies
                )
            # The bursts come last: judgements that miss their deadline are answered (denied)
            # but keep running, and would queue any request measured after them.
            floor = Floor(engine, store, work, haproxy)
            brackets = [await floor.sample(FLOOR_ROUNDS)]
            bursts: list[Burst] = []
            for r in range(rounds):
                bursts.append(
                    await post_burst(url, ca, work, creates(n + r * concurrency, concurrency))
                )
                await settle(judge)
                if r + 1 < rounds:
                    brackets.append(await floor.sample(FLOOR_ROUNDS))
    finally:
        await server.stop()
    brackets.append(await floor.sample(FLOOR_ROUNDS, alternated=True))
    cores = os.cpu_count() or 1
    hms = statistics.median(floor.walls("plain"))
    check_ms = statistics.median(floor.walls("check"))

    def per_proposal(seconds: Iterable[float]) -> float:
        return round(sum(seconds) * 1000 / (rounds * concurrency), 1)

    return {
        "ingresses": n,
        "concurrency": concurrency,
        "haproxy": haproxy,
        "singleP50Ms": pct(single, 0.5),
        "singleP99Ms": pct(single, 0.99),
        "concurrentP50Ms": round(statistics.median(pct(b.ms, 0.5) for b in bursts), 1),
        "concurrentP99Ms": round(statistics.median(pct(b.ms, 0.99) for b in bursts), 1),
        "concurrentDenied": sum(b.denied for b in bursts),
        "concurrentRounds": [
            {
                "p99Ms": pct(b.ms, 0.99),
                "cpuMsPerProposal": round(b.cpu * 1000 / concurrency, 1),
                "gcMs": round(b.gc_ms, 1),
                "floorMs": round(
                    concurrency * statistics.median(brackets[r] + brackets[r + 1]) / cores, 1
                ),
            }
            for r, b in enumerate(bursts)
        ],
        "runSlots": judge.slots.size,
        "droppedRuns": judge.dropped,
        "transportP50Ms": pct(transport, 0.5),
        "unchangedP50Ms": pct(unchanged, 0.5),
        "unchangedP99Ms": pct(unchanged, 0.99),
        "unchangedCpuP50Ms": pct(unchanged_cpu, 0.5),
        "unchangedRuleBatches": worker_batches,
        "unchangedLongestGcMs": round(unchanged_gc, 1),
        "loadAverage": round(os.getloadavg()[0], 2),
        "haproxyMs": round(hms, 1),
        "haproxyMsBetweenBursts": [round(statistics.median(b), 1) for b in brackets],
        "haproxyCpuMs": round(statistics.median(floor.cpus("plain")), 1),
        "checkPrelude": PRELUDE_NAME in floor.extra,
        "haproxyCheckMs": round(check_ms, 1),
        "haproxyCheckCpuMs": round(statistics.median(floor.cpus("check")), 1),
        "haproxySandboxedMs": round(statistics.median(floor.walls("sandboxed")), 1),
        "haproxySandboxedCpuMs": round(statistics.median(floor.cpus("sandboxed")), 1),
        "cores": cores,
        "floorMs": round(concurrency * hms / cores, 1),
        "checkFloorMs": round(concurrency * check_ms / cores, 1),
        "concurrentCpuMsPerProposal": per_proposal(b.cpu for b in bursts),
        # its parts: this process (the controller), its children (the sandboxed haproxy -c,
        # forked rule batches), the rules worker; the burst's client is not in it
        "concurrentSelfCpuMsPerProposal": per_proposal(
            b.cpu - b.children - b.worker for b in bursts
        ),
        "concurrentChildCpuMsPerProposal": per_proposal(b.children for b in bursts),
        "concurrentWorkerCpuMsPerProposal": per_proposal(b.worker for b in bursts),
        "concurrentClientCpuMsPerProposal": per_proposal(b.client for b in bursts),
        "concurrentGcMs": round(sum(b.gc_ms for b in bursts) / len(bursts), 1),
        "concurrentFullGcs": sum(b.full_gcs for b in bursts),
        **through_api,
        "targets": {"singleP50Ms": 250, "concurrentP99Ms": "1.3 x floorMs", "unchangedP99Ms": 50},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ingresses", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=150)
    parser.add_argument("--haproxy", default="/usr/sbin/haproxy")
    parser.add_argument(
        "--kubectl-applies",
        type=int,
        default=20,
        help="kubectl applies through the real API server, per setting (0: none)",
    )
    parser.add_argument(
        "--slots", type=int, default=None, help="judgements in flight (default: the CPUs + 1)"
    )
    parser.add_argument(
        "--rule-workers",
        type=int,
        default=None,
        help="evaluation workers for rule batches (0: every isolated batch forks, as before)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="concurrent bursts, each with plain haproxy -c runs on both sides",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from controller.observability.logging import configure

    configure(level="warning", stream=sys.stderr)  # stdout carries exactly one JSON object
    haproxy = shutil.which(args.haproxy) or args.haproxy
    result = asyncio.run(
        measure(
            args.ingresses,
            args.concurrency,
            str(Path(haproxy).resolve()),  # haproxy -c runs in a directory of its own
            args.kubectl_applies,
            args.slots,
            args.rule_workers,
            max(1, args.rounds),
        )
    )
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
