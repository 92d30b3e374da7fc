"""Helpers for testing code built on this controller (like ``kopf.testing`` and
``structlog.testing``): public, typed, and used by this project's own tests.

* :class:`ManualClock` — a :class:`~controller.triggers.Clock` whose time moves only when a
  test advances it, so debounce, min-interval, resync and retry schedules are checked exactly
  and without sleeping;
* :class:`RecordingTarget` — a deploy target that keeps what it was handed (only a
  ``ValidatedFileSet`` can reach it, as for every target);
* :class:`FakeStage` — a pipeline stage whose findings, delay or failure a test chooses, and
  which records what it saw;
* :func:`stageless_pipeline` — the real ``Pipeline`` with no stages: a verdict in
  microseconds, so a trigger test times the scheduler, not ``haproxy -c``;
* :func:`render_of` — a ``RenderResult`` of one configuration text, with a source map;
* :func:`store_of`, :func:`ingress`, :func:`service`, :func:`endpoint_slice` — a store filled
  with objects, and the objects, shaped as the API server returns them.

These are stand-ins at protocol boundaries, real in everything behind them: a test of the
reconcile trigger still gets its verdicts from ``Pipeline``, and a ``FakeStage`` runs inside
the real pipeline's ordering, skipping and single-flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.deploy import DeployOutcome, DeployResult
from controller.diagnostics import Diagnostic, Phase, TemplateLocation
from controller.render import MAIN_CONFIG, FileEntry, FileKind, FileSet, RenderResult, SourceMap
from controller.resources import Store
from controller.spec import HAProxyTemplateConfigSpec, WatchedResource
from controller.triggers import Clock
from controller.validation import (
    BudgetExhaustion,
    Pipeline,
    Stage,
    StageContext,
    StageOutcome,
    ValidatedFileSet,
)

__all__ = [
    "FakeStage",
    "ManualClock",
    "RecordingTarget",
    "endpoint_slice",
    "ingress",
    "render_of",
    "service",
    "settle",
    "stageless_pipeline",
    "store_of",
]


class ManualClock(Clock):
    """Time that stands still until :meth:`advance` moves it.

    Waiters whose deadline the new time reaches are woken, and :meth:`advance` then yields to
    the event loop until the code it woke has settled (started its run, or gone back to
    waiting), so a test can assert right after it.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._due: list[tuple[float, asyncio.Event]] = []

    def now(self) -> float:
        return self._now

    async def wait(self, wake: asyncio.Event, timeout: float | None) -> bool:
        if wake.is_set():
            return True
        if timeout is not None and timeout <= 0:
            return False
        due = asyncio.Event()
        entry = (self._now + timeout, due) if timeout is not None else None
        if entry is not None:
            self._due.append(entry)
        woken = asyncio.ensure_future(wake.wait())
        elapsed = asyncio.ensure_future(due.wait())
        try:
            await asyncio.wait({woken, elapsed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            elapsed.cancel()
            if entry is not None and entry in self._due:
                self._due.remove(entry)
        return wake.is_set()

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and let what falls due run its first steps."""
        if seconds < 0:
            raise ValueError("time does not run backwards")
        self._now += seconds
        for deadline, due in list(self._due):
            if deadline <= self._now:
                due.set()
        await settle()


async def settle(rounds: int = 20) -> None:
    """Yield to the event loop ``rounds`` times: enough for woken tasks to take their next
    steps up to their next real wait."""
    for _ in range(rounds):
        await asyncio.sleep(0)


# --- deploy ---------------------------------------------------------------------------------


@dataclass
class RecordingTarget:
    """A :class:`~controller.deploy.DeployTarget` that deploys nowhere and remembers.

    ``received`` holds every validated set handed over; ``deployed`` the main configuration's
    text (stripped) of each one that changed the checksum: a set equal to the last one is
    ``UNCHANGED``, as a real target reports it.
    """

    name: str = "recording"
    received: list[ValidatedFileSet] = field(default_factory=list)
    deployed: list[str] = field(default_factory=list)
    checksum: str | None = None

    async def deploy(self, validated: ValidatedFileSet) -> DeployResult:
        if not isinstance(validated, ValidatedFileSet):
            raise TypeError(f"a deploy target takes a ValidatedFileSet, not {validated!r}")
        self.received.append(validated)
        if validated.checksum == self.checksum:
            return DeployResult(
                self.name, DeployOutcome.UNCHANGED, validated.checksum, self.checksum
            )
        self.checksum = validated.checksum
        self.deployed.append(validated.files.main.content.decode().strip())
        return DeployResult(
            self.name, DeployOutcome.DEPLOYED, validated.checksum, self.checksum, reloaded=True
        )

    async def check_drift(self) -> DeployResult | None:
        return None

    @property
    def last(self) -> str:
        """The main configuration of the last deploy."""
        return self.deployed[-1]


# --- validation -----------------------------------------------------------------------------


@dataclass
class FakeStage(Stage):
    """A stage that reports ``diagnostics`` (or ``budget``, or raises ``raises``, or returns
    ``returns`` as its outcome) after ``delay`` seconds, and records each call: ``calls``,
    its phase name appended to ``log`` (share one list between stages to see their order),
    and the checksum it judged in ``seen_checksums``."""

    phase: Phase
    diagnostics: list[Diagnostic] = field(default_factory=list)
    budget: BudgetExhaustion | None = None
    raises: BaseException | None = None
    delay: float = 0.0
    fp: str = "v1"
    log: list[str] = field(default_factory=list)
    calls: int = 0
    seen_checksums: list[str] = field(default_factory=list)
    returns: object = None
    """Returned as is, in place of an outcome: for tests of a stage that breaks its contract."""

    def fingerprint(self) -> str:
        return f"{self.phase.value}:{self.fp}"

    async def run(self, ctx: StageContext) -> StageOutcome:
        self.calls += 1
        self.log.append(self.phase.value)
        self.seen_checksums.append(ctx.files.checksum)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.raises is not None:
            raise self.raises
        if self.returns is not None:
            return self.returns  # type: ignore[return-value]
        return StageOutcome(list(self.diagnostics), budget=self.budget)


def stageless_pipeline() -> Pipeline:
    """The real pipeline without stages and without a cache. ``allow_partial`` is set: the one
    way a pipeline that ran no stage may hand out a ``ValidatedFileSet``."""
    return Pipeline([], haproxy_version=None, cache=None, allow_partial=True)


def render_of(
    cfg: str,
    *,
    extra: Sequence[FileEntry] = (),
    diagnostics: Sequence[Diagnostic] = (),
    template: str = MAIN_CONFIG,
    offset: int = 0,
    render_ms: float = 1.5,
) -> RenderResult:
    """A render of ``cfg`` as the main configuration (plus ``extra`` files), whose source map
    says rendered line N came from line N + ``offset`` of ``template``."""
    files = FileSet.of([FileEntry(MAIN_CONFIG, FileKind.CONFIG, cfg.encode()), *extra])
    lines = cfg.count("\n") + 1
    smap = SourceMap(
        {
            MAIN_CONFIG: tuple(
                TemplateLocation(template=template, line=i + 1 + offset) for i in range(lines)
            )
        }
    )
    return RenderResult(
        files=files, source_map=smap, diagnostics=tuple(diagnostics), render_ms=render_ms
    )


# --- resources ------------------------------------------------------------------------------


def store_of(
    watched: HAProxyTemplateConfigSpec | Mapping[str, WatchedResource],
    objects: Mapping[str, Iterable[Mapping[str, Any]]]
    | Iterable[tuple[str, Mapping[str, Any]]] = (),
) -> Store:
    """A store of a spec's (or a ``watchedResources`` mapping's) collections, with ``objects``
    applied: collection → objects, or (collection, object) pairs in order."""
    store = (
        Store.from_spec(watched)
        if isinstance(watched, HAProxyTemplateConfigSpec)
        else Store(watched)
    )
    pairs: Iterable[tuple[str, Mapping[str, Any]]] = (
        ((name, obj) for name, objs in objects.items() for obj in objs)
        if isinstance(objects, Mapping)
        else objects
    )
    for name, obj in pairs:
        store.apply(name, obj)
    return store


def ingress(
    name: str,
    host: str | None = None,
    *paths: tuple[str, str, str, int],
    cls: str | None = "haproxy",
    ns: str = "default",
    labels: Mapping[str, str] | None = None,
    **spec_extra: Any,
) -> dict[str, Any]:
    """An Ingress; with a ``host``, one rule whose paths are (path, pathType, service, port)."""
    spec: dict[str, Any] = {}
    if cls is not None:
        spec["ingressClassName"] = cls
    if host is not None:
        backends = [
            {"path": p, "pathType": t, "backend": {"service": {"name": s, "port": {"number": n}}}}
            for p, t, s, n in paths
        ]
        spec["rules"] = [{"host": host, "http": {"paths": backends}}]
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels is not None:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta,
        "spec": {**spec, **spec_extra},
    }


def service(
    name: str, port: int, *, port_name: str | None = "http", ns: str = "default"
) -> dict[str, Any]:
    """A Service with one port (targetPort the same number)."""
    entry: dict[str, Any] = {"port": port, "targetPort": port}
    if port_name is not None:
        entry["name"] = port_name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [entry]},
    }


def endpoint_slice(
    service_name: str,
    port: int,
    *addresses: tuple[str, bool | None],
    port_name: str = "http",
    ns: str = "default",
) -> dict[str, Any]:
    """An EndpointSlice of ``service_name``: one endpoint per (address, ready); a ready of
    None leaves the condition out, as the API server may."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service_name}-x1",
            "namespace": ns,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [a], **({"conditions": {"ready": r}} if r is not None else {})}
            for a, r in addresses
        ],
    }
