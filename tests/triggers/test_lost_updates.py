"""No change is lost while a render is under way, for a run and for a spec candidate alike.

Each test holds a render at a gate *after* it read its snapshot, changes the store, then lets
the render finish: the final deployed set must contain the change. Nothing here depends on
timing; a trigger that drops the change (the audit's finding for spec adoption) fails every
time, not now and then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from controller.diagnostics import Phase, make
from controller.render import RenderResult
from controller.resources import Store, StoreView
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.triggers.reconcile import Engine
from tests.triggers.trigger_kit import Gate, MakeTrigger, gated_factory, ingress, spec

FAST = {"debounce": "10ms", "min_interval": "10ms"}


async def test_a_change_during_a_run_causes_one_more_run(
    make_trigger: MakeTrigger, store: Store
) -> None:
    gate = Gate()
    trig, target = await make_trigger(spec(**FAST), engine_factory=gated_factory(gate))
    gate.close()
    store.apply("ingresses", ingress("a"))
    await asyncio.to_thread(gate.entered.wait, 5)  # the run has its snapshot: a only
    store.apply("ingresses", ingress("late"))
    gate.open()
    await trig.wait_idle()
    assert target.last == "v1: a=0 late=0"


async def test_a_change_during_spec_adoption_is_not_lost(
    make_trigger: MakeTrigger, store: Store
) -> None:
    gate = Gate()
    trig, target = await make_trigger(spec(**FAST), engine_factory=gated_factory(gate, only="v2"))
    gate.close()
    decision = trig.propose_spec(spec(tag="v2", **FAST))
    await asyncio.to_thread(gate.entered.wait, 5)  # the candidate has its snapshot: empty
    store.apply("ingresses", ingress("late"))
    gate.open()
    assert (await decision).accepted
    await trig.wait_idle()
    assert target.last == "v2: late=0"


async def test_a_change_during_a_rejected_candidate_still_deploys(
    make_trigger: MakeTrigger, store: Store
) -> None:
    """What the candidate had taken off the pending list goes back when it is rejected: the
    running spec has not rendered those changes either."""
    gate = Gate()

    def failing_v2(s: HAProxyTemplateConfigSpec) -> Engine:
        engine = gated_factory(gate, only="v2")(s)
        if s.haproxy_config.template != "v2":
            return engine
        original = engine.renderer.render

        def render(view: StoreView, *, http: Mapping[str, str] | None = None) -> RenderResult:
            r = original(view)
            return RenderResult(r.files, diagnostics=(make("E1002", Phase.RENDER, "undefined"),))

        engine.renderer.render = render  # type: ignore[method-assign]
        return engine

    store.apply("ingresses", ingress("a"))
    trig, target = await make_trigger(spec(**FAST), engine_factory=failing_v2)
    gate.close()
    store.apply("ingresses", ingress("before"))  # pending when the candidate starts
    decision = trig.propose_spec(spec(tag="v2", **FAST))
    await asyncio.to_thread(gate.entered.wait, 5)
    store.apply("ingresses", ingress("during"))
    gate.open()
    assert not (await decision).accepted
    await trig.wait_idle()
    assert target.last == "v1: a=0 before=0 during=0"
