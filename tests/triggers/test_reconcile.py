"""The reconcile trigger's scheduling and its one rule: only a valid verdict deploys.

These tests use the real store and the real ``Pipeline`` class; the renderer and the target
are the stand-ins of ``trigger_kit``. Real HAProxy runs are covered in ``tests/runtime``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import pytest
from pydantic import ValidationError

from controller.diagnostics import Phase, make
from controller.publish import Event, EventKind
from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.resources import Store, StoreView
from controller.spec.models import HAProxyTemplateConfigSpec, ReconcileSettings
from controller.testing import ManualClock
from controller.triggers.reconcile import Engine
from controller.validation import Pipeline
from tests.triggers.trigger_kit import MakeTrigger, factory, ingress, spec


async def test_startup_renders_everything_loaded_before_it(
    make_trigger: MakeTrigger, store: Store
) -> None:
    for i in range(5):
        store.apply("ingresses", ingress(f"i{i}"))
    trig, target = await make_trigger()
    assert target.deployed == ["v1: i0=0 i1=0 i2=0 i3=0 i4=0"]
    assert trig.runs == 1
    assert trig.metrics.sample("htc_reconcile_runs_total", {"trigger": "startup"}) == 1


async def test_a_burst_collapses_and_converges_on_the_final_state(
    make_trigger: MakeTrigger, store: Store
) -> None:
    trig, target = await make_trigger()
    runs0 = trig.runs
    for gen in range(200):
        store.apply("ingresses", ingress(f"i{gen % 10}", gen=str(gen)))
    await trig.wait_idle()
    assert trig.runs - runs0 <= 3
    expected = " ".join(f"i{k}={190 + k}" for k in range(10))
    assert target.last == f"v1: {expected}"


async def test_a_stream_from_another_thread_is_not_starved(
    make_trigger: MakeTrigger, store: Store
) -> None:
    clock = ManualClock()
    trig, target = await make_trigger(spec(debounce="100ms", min_interval="100ms"), clock=clock)
    runs0 = trig.runs
    for gen in range(60):  # 0.6 s of steady changes, never 100 ms quiet
        if gen == 45:
            assert trig.runs - runs0 >= 2  # runs happen while the stream goes on
        await asyncio.to_thread(store.apply, "ingresses", ingress("a", gen=str(gen)))
        await clock.advance(0.01)
    await clock.advance(0.2)
    await trig.wait_idle(timeout=5)
    assert target.last == "v1: a=59"
    assert trig.runs - runs0 <= 8


async def test_leading_edge_runs_at_once_after_a_quiet_period(
    make_trigger: MakeTrigger, store: Store
) -> None:
    clock = ManualClock()
    trig, target = await make_trigger(spec(debounce="400ms", min_interval="50ms"), clock=clock)
    await clock.advance(0.1)
    store.apply("ingresses", ingress("x"))
    await trig.wait_idle(timeout=5)  # without any time passing: no 400 ms debounce
    assert target.last == "v1: x=0"


async def test_min_interval_spaces_runs(make_trigger: MakeTrigger, store: Store) -> None:
    clock = ManualClock()
    trig, target = await make_trigger(spec(debounce="10ms", min_interval="300ms"), clock=clock)
    runs0 = trig.runs  # the startup run, at the clock's present
    store.apply("ingresses", ingress("a"))
    await clock.advance(0.05)
    store.apply("ingresses", ingress("b"))
    await clock.advance(0.249)  # debounced long ago, but not 300 ms after the startup run
    assert trig.runs == runs0
    await clock.advance(0.001)
    await trig.wait_idle(timeout=5)
    assert trig.runs == runs0 + 1 and target.last == "v1: a=0 b=0"


async def test_invalid_verdict_keeps_the_last_good_and_says_why(
    make_trigger: MakeTrigger, store: Store, events: list[Event]
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


async def test_delete_takes_the_same_path(make_trigger: MakeTrigger, store: Store) -> None:
    store.apply("ingresses", ingress("a"))
    store.apply("ingresses", ingress("b"))
    trig, target = await make_trigger()
    store.delete("ingresses", ("default", "a"))
    await trig.wait_idle()
    assert target.last == "v1: b=0"


async def test_resync_runs_without_changes(make_trigger: MakeTrigger) -> None:
    clock = ManualClock()
    trig, target = await make_trigger(spec(resync="1s", min_interval="10ms"), clock=clock)
    runs0 = trig.runs
    await clock.advance(0.999)
    assert trig.runs == runs0
    await clock.advance(0.301)
    await trig.wait_idle(timeout=5)
    assert trig.runs - runs0 == 1
    assert len(target.deployed) == 1  # identical output is not redeployed
    assert trig.metrics.sample("htc_reconcile_runs_total", {"trigger": "resync"}) == 1


async def test_resync_zero_disables_it(make_trigger: MakeTrigger) -> None:
    """0s means "no resync", not "resync continuously" (which rendered as fast as minInterval
    allowed: the audit counted thousands of runs a second)."""
    clock = ManualClock()
    trig, _target = await make_trigger(spec(resync="0s", min_interval="10ms"), clock=clock)
    runs0 = trig.runs
    for _ in range(30):
        await clock.advance(3600)
    assert trig.runs == runs0
    await trig.wait_idle(timeout=1)


def test_durations_that_would_spin_the_loop_are_refused() -> None:
    for reconcile in ({"minInterval": "0s"}, {"minInterval": "5ms"}, {"resyncInterval": "1ms"}):
        with pytest.raises(ValidationError, match="at least"):
            ReconcileSettings.model_validate_json(json.dumps(reconcile))
    ok = ReconcileSettings.model_validate_json('{"minInterval": "10ms", "debounce": "0s"}')
    assert ok.min_interval == 0.01 and ok.debounce == 0


async def test_a_spec_that_cannot_be_built_is_rejected(
    make_trigger: MakeTrigger, events: list[Event]
) -> None:
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


async def test_a_spec_that_renders_invalid_is_rejected(
    make_trigger: MakeTrigger, store: Store
) -> None:
    store.apply("ingresses", ingress("a"))
    trig, target = await make_trigger()

    def strict(s: HAProxyTemplateConfigSpec) -> Engine:
        engine = factory(s)
        if s.haproxy_config.template == "v2":
            renderer = engine.renderer
            original = renderer.render

            def failing(view: StoreView, *, http: Mapping[str, str] | None = None) -> RenderResult:
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
    # Both candidates rendered and validated: each is a run of trigger "config".
    assert trig.metrics.sample("htc_reconcile_runs_total", {"trigger": "config"}) == 2


async def test_success_cannot_be_published_without_a_validated_set() -> None:
    files = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, b"x")])
    with pytest.raises(TypeError):
        Event.deployed("change", files, [])  # type: ignore[arg-type]
    verdict = await Pipeline([], haproxy_version=None, cache=None, allow_partial=True).check(
        RenderResult(files, diagnostics=(make("E1001", Phase.RENDER, "broken"),))
    )
    assert verdict.validated is None
    with pytest.raises(ValueError):
        Event.rejected("change", verdict.report.model_copy(update={"valid": True}))


async def test_a_spec_with_lint_errors_is_rejected_before_it_renders(
    make_trigger: MakeTrigger,
) -> None:
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
