"""The reconcile trigger's scheduling and its one rule: only a valid verdict deploys.

These tests use the real store and the real ``Pipeline`` class (with no stages, so a verdict
takes microseconds and timing is the scheduler's alone). The renderer is a small stand-in
that lists the snapshot's objects, and the target records what it was handed; both sit
exactly at the protocol boundary the trigger talks to. Real HAProxy runs are covered in
``tests/runtime``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

import pytest

from controller.deploy.target import DeployOutcome, DeployResult
from controller.diagnostics import Phase, make
from controller.observability.metrics import Metrics
from controller.publish import Event, EventKind, Publisher
from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.resources import Store, StoreView
from controller.spec.models import HAProxyTemplateConfigSpec, WatchedResource
from controller.triggers.reconcile import Engine, ReconcileTrigger
from controller.validation import Pipeline, ValidatedFileSet

WATCHED = {"ingresses": WatchedResource(api_version="networking.k8s.io/v1", kind="Ingress")}


def spec(
    debounce: str = "50ms", min_interval: str = "200ms", resync: str = "300s", tag: str = "v1"
):
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

    def render(self, view: StoreView) -> RenderResult:
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


@dataclass
class RecordingTarget:
    name: str = "rec"
    deployed: list[str] = field(default_factory=list)
    checksum: str | None = None

    async def deploy(self, validated: ValidatedFileSet) -> DeployResult:
        assert isinstance(validated, ValidatedFileSet)
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
        return self.deployed[-1]


def factory(s: HAProxyTemplateConfigSpec) -> Engine:
    return Engine(s, ListingRenderer(s), Pipeline([], haproxy_version=None, cache=None))


@pytest.fixture
def store() -> Store:
    return Store(WATCHED)


@pytest.fixture
def events() -> list[Event]:
    return []


@pytest.fixture
async def make_trigger(store: Store, events: list[Event]):
    made: list[ReconcileTrigger] = []

    async def make(s: HAProxyTemplateConfigSpec | None = None, engine_factory=factory):
        target = RecordingTarget()
        trig = ReconcileTrigger(
            store,
            [target],
            Publisher(metrics=Metrics(), sinks=[events.append]),
            engine_factory,
            metrics=Metrics(),
            drift_interval=None,
        )
        store.subscribe(trig)
        await trig.start(s or spec())
        made.append(trig)
        return trig, target

    yield make
    for t in made:
        await t.stop()


async def test_startup_renders_everything_loaded_before_it(make_trigger, store: Store) -> None:
    for i in range(5):
        store.apply("ingresses", ingress(f"i{i}"))
    trig, target = await make_trigger()
    assert target.deployed == ["v1: i0=0 i1=0 i2=0 i3=0 i4=0"]
    assert trig.runs == 1


async def test_a_burst_collapses_and_converges_on_the_final_state(
    make_trigger, store: Store
) -> None:
    trig, target = await make_trigger()
    runs0 = trig.runs
    for gen in range(200):
        store.apply("ingresses", ingress(f"i{gen % 10}", gen=str(gen)))
    await trig.wait_idle()
    assert trig.runs - runs0 <= 3
    expected = " ".join(f"i{k}={190 + k}" for k in range(10))
    assert target.last == f"v1: {expected}"


async def test_a_stream_from_another_thread_is_not_starved(make_trigger, store: Store) -> None:
    trig, target = await make_trigger(spec(debounce="100ms", min_interval="100ms"))
    runs0 = trig.runs

    def writer() -> None:
        for gen in range(60):  # ~0.6 s of steady changes, never 100 ms quiet
            store.apply("ingresses", ingress("a", gen=str(gen)))
            time.sleep(0.01)

    thread = threading.Thread(target=writer)
    thread.start()
    await asyncio.sleep(0.45)
    assert trig.runs - runs0 >= 2  # runs happen while the stream goes on
    await asyncio.to_thread(thread.join)
    await trig.wait_idle()
    assert target.last == "v1: a=59"
    assert trig.runs - runs0 <= 8


async def test_leading_edge_runs_at_once_after_a_quiet_period(make_trigger, store: Store) -> None:
    _trig, target = await make_trigger(spec(debounce="400ms", min_interval="50ms"))
    await asyncio.sleep(0.1)
    t0 = time.monotonic()
    store.apply("ingresses", ingress("x"))
    while target.last != "v1: x=0":
        await asyncio.sleep(0.005)
    assert time.monotonic() - t0 < 0.3  # well below the 400 ms debounce


async def test_min_interval_spaces_runs(make_trigger, store: Store) -> None:
    trig, target = await make_trigger(spec(debounce="10ms", min_interval="300ms"))
    t0 = time.monotonic()
    store.apply("ingresses", ingress("a"))
    await asyncio.sleep(0.05)
    store.apply("ingresses", ingress("b"))
    await trig.wait_idle()
    assert target.last == "v1: a=0 b=0"
    assert time.monotonic() - t0 >= 0.28  # startup run at t0 - ε, then not before +300 ms


async def test_invalid_verdict_keeps_the_last_good_and_says_why(
    make_trigger, store: Store, events: list[Event]
) -> None:
    store.apply("ingresses", ingress("good"))
    trig, target = await make_trigger()
    store.apply("ingresses", ingress("evil", bad="yes"))
    await trig.wait_idle()
    assert target.deployed == ["v1: good=0"]
    rejected = [e for e in events if e.kind is EventKind.REJECTED]
    assert rejected and "E1004" in {d.rule_id for d in rejected[-1].diagnostics}
    assert rejected[-1].objects == ("Ingress/default/evil",)
    # Fixing the object deploys again.
    store.apply("ingresses", ingress("evil"))
    await trig.wait_idle()
    assert target.last == "v1: evil=0 good=0"
    kinds = [e.kind for e in events if e.kind in (EventKind.DEPLOYED, EventKind.REJECTED)]
    assert kinds == [EventKind.DEPLOYED, EventKind.REJECTED, EventKind.DEPLOYED]


async def test_delete_takes_the_same_path(make_trigger, store: Store) -> None:
    store.apply("ingresses", ingress("a"))
    store.apply("ingresses", ingress("b"))
    trig, target = await make_trigger()
    store.delete("ingresses", ("default", "a"))
    await trig.wait_idle()
    assert target.last == "v1: b=0"


async def test_resync_runs_without_changes(make_trigger) -> None:
    trig, target = await make_trigger(spec(resync="150ms", min_interval="10ms"))
    runs0 = trig.runs
    await asyncio.sleep(0.5)
    assert trig.runs - runs0 >= 2
    assert len(target.deployed) == 1  # identical output is not redeployed


async def test_a_spec_that_cannot_be_built_is_rejected(make_trigger, events: list[Event]) -> None:
    trig, _target = await make_trigger()

    def broken(s: HAProxyTemplateConfigSpec) -> Engine:
        raise RuntimeError("no such haproxy binary")

    trig.engine_factory = broken
    decision = await trig.propose_spec(spec(tag="v2"))
    assert not decision.accepted
    assert decision.diagnostics[0].rule_id == "E7010"
    assert "no such haproxy binary" in decision.diagnostics[1].message
    assert trig.engine is not None and trig.engine.spec == spec()
    assert any(e.kind is EventKind.SPEC_REJECTED for e in events)


async def test_a_spec_that_renders_invalid_is_rejected(make_trigger, store: Store) -> None:
    store.apply("ingresses", ingress("a"))
    trig, target = await make_trigger()

    def strict(s: HAProxyTemplateConfigSpec) -> Engine:
        engine = factory(s)
        if s.haproxy_config.template == "v2":
            renderer = engine.renderer
            original = renderer.render

            def failing(view: StoreView) -> RenderResult:
                r = original(view)
                bad = make("E1002", Phase.RENDER, "undefined value in the new template")
                return RenderResult(r.files, diagnostics=(bad,))

            renderer.render = failing  # type: ignore[method-assign]
        return engine

    trig.engine_factory = strict
    decision = await trig.propose_spec(spec(tag="v2"))
    assert not decision.accepted and decision.report is not None
    assert "E1002" in decision.report.rule_ids()
    store.apply("ingresses", ingress("b"))
    await trig.wait_idle()
    assert target.last == "v1: a=0 b=0"  # the running spec still renders

    ok = await trig.propose_spec(spec(tag="v3"))
    assert ok.accepted
    await trig.wait_idle()
    assert target.last == "v3: a=0 b=0"


async def test_success_cannot_be_published_without_a_validated_set() -> None:
    files = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, b"x")])
    with pytest.raises(TypeError):
        Event.deployed("change", files, [])  # type: ignore[arg-type]
    verdict = await Pipeline([], haproxy_version=None, cache=None).check(
        RenderResult(files, diagnostics=(make("E1001", Phase.RENDER, "broken"),))
    )
    assert verdict.validated is None
    with pytest.raises(ValueError):
        Event.rejected("change", verdict.report.model_copy(update={"valid": True}))


async def test_a_spec_with_lint_errors_is_rejected_before_it_renders(make_trigger) -> None:
    trig, target = await make_trigger()
    built: list[Engine] = []

    def linted(s: HAProxyTemplateConfigSpec) -> Engine:
        engine = factory(s)
        engine = Engine(
            s,
            engine.renderer,
            engine.pipeline,
            lint=lambda _: [make("E1007", Phase.LINT, "snippet 'nope' is not defined")],
        )
        built.append(engine)
        return engine

    trig.engine_factory = linted
    decision = await trig.propose_spec(spec(tag="v2"))
    assert not decision.accepted
    assert [d.rule_id for d in decision.diagnostics] == ["E7010", "E1007"]
    assert built[0].renderer.calls == 0  # type: ignore[attr-defined]
    assert target.last == "v1:"  # the running spec still rules
