"""Stand-ins at the trigger's protocol boundary: a renderer that lists the snapshot, a target
that records what it was handed, and a gate that holds a render until a test lets it go.

Verdicts still come from the real ``Pipeline`` class (with no stages, so a verdict takes
microseconds and timing is the scheduler's alone); it is built with ``allow_partial=True``,
the one way a stage-less pipeline may hand out a ValidatedFileSet.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.deploy.target import DeployOutcome, DeployResult
from controller.diagnostics import Phase, make
from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.resources import StoreView
from controller.spec.models import HAProxyTemplateConfigSpec, WatchedResource
from controller.testing import RecordingTarget, stageless_pipeline
from controller.triggers import Clock, EngineFactory, ReconcileTrigger
from controller.triggers.reconcile import Engine
from controller.validation import Pipeline, ValidatedFileSet

__all__ = [
    "WATCHED",
    "FlakyTarget",
    "Gate",
    "GatedRenderer",
    "ListingRenderer",
    "MakeTrigger",
    "RecordingTarget",
    "factory",
    "gated_factory",
    "ingress",
    "partial_pipeline",
    "spec",
]

WATCHED = {"ingresses": WatchedResource(api_version="networking.k8s.io/v1", kind="Ingress")}


def spec(
    debounce: str = "50ms", min_interval: str = "200ms", resync: str = "300s", tag: str = "v1"
) -> HAProxyTemplateConfigSpec:
    return HAProxyTemplateConfigSpec.model_validate(
        {
            "watchedResources": {
                "ingresses": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"}
            },
            "haproxyConfig": {"template": tag},
            "reconcile": {
                "debounce": debounce,
                "minInterval": min_interval,
                "resyncInterval": resync,
            },
        }
    )


def ingress(name: str, **labels: str) -> dict[str, object]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
    }


class ListingRenderer:
    """Renders ``<tag>: name=generation ...``; an object labelled bad=yes fails the render."""

    def __init__(self, s: HAProxyTemplateConfigSpec) -> None:
        self.tag = s.haproxy_config.template
        self.calls = 0

    def render(self, view: StoreView, *, http: Mapping[str, str] | None = None) -> RenderResult:
        self.calls += 1
        objs = view.collection("ingresses").list()
        names = [f"{o['metadata']['name']}={o['metadata']['labels'].get('gen', '0')}" for o in objs]
        diags = tuple(
            make("E1004", Phase.RENDER, f"bad object {o['metadata']['name']}")
            for o in objs
            if o["metadata"]["labels"].get("bad") == "yes"
        )
        text = f"{self.tag}: {' '.join(names)}\n".encode()
        return RenderResult(
            FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, text)]), diagnostics=diags
        )


def factory(s: HAProxyTemplateConfigSpec) -> Engine:
    return Engine(s, ListingRenderer(s), stageless_pipeline())


class Gate:
    """Holds renders (they run in a worker thread) until :meth:`open`; deterministic, no sleeps.

    ``entered`` is set when a render reaches the gate, so a test knows the snapshot has been
    taken and can change the store "while the render runs".
    """

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()
        self.entered = threading.Event()

    def close(self) -> None:
        self.entered.clear()
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    def wait(self) -> None:
        self.entered.set()
        if not self._open.wait(10):
            raise TimeoutError("the test never opened the gate")


class GatedRenderer(ListingRenderer):
    def __init__(self, s: HAProxyTemplateConfigSpec, gate: Gate) -> None:
        super().__init__(s)
        self.gate = gate

    def render(self, view: StoreView, *, http: Mapping[str, str] | None = None) -> RenderResult:
        result = super().render(
            view, http=http
        )  # the snapshot is read first, then the render stalls
        self.gate.wait()
        return result


def gated_factory(gate: Gate, *, only: str | None = None) -> EngineFactory:
    """Engines whose renders wait at ``gate`` (only for the spec tagged ``only``, if given)."""

    def build(s: HAProxyTemplateConfigSpec) -> Engine:
        if only is not None and s.haproxy_config.template != only:
            return factory(s)
        return Engine(s, GatedRenderer(s, gate), partial_pipeline())

    return build


def partial_pipeline() -> Pipeline:
    return stageless_pipeline()


@dataclass
class FlakyTarget(RecordingTarget):
    """Fails its first ``failures`` deploys the way HAProxy failing to start does."""

    failures: int = 0
    attempts: list[float] = field(default_factory=list)
    clock: Clock = field(default_factory=Clock)
    """Whose time the attempts are noted in (the trigger's)."""

    async def deploy(self, validated: ValidatedFileSet) -> DeployResult:
        self.attempts.append(self.clock.now())
        if len(self.attempts) <= self.failures:
            diag = make("E7008", Phase.DEPLOY, "HAProxy exited while starting")
            return DeployResult(
                self.name, DeployOutcome.FAILED, validated.checksum, None, diagnostics=(diag,)
            )
        return await super().deploy(validated)


class MakeTrigger(Protocol):
    """The ``make_trigger`` fixture: a started trigger over the test's store, and its target."""

    async def __call__(
        self,
        s: HAProxyTemplateConfigSpec | None = None,
        engine_factory: EngineFactory = ...,
        target: RecordingTarget | None = None,
        **kw: Any,
    ) -> tuple[ReconcileTrigger, RecordingTarget]: ...
