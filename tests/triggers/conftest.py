"""Fixtures of the trigger tests: a real store, an event log, and triggers built on demand."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.observability.metrics import Metrics
from controller.publish import Event, Publisher
from controller.resources import Store
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.triggers import EngineFactory
from controller.triggers.reconcile import ReconcileTrigger
from tests.triggers.trigger_kit import WATCHED, MakeTrigger, RecordingTarget, factory, spec


@pytest.fixture
def store() -> Store:
    return Store(WATCHED)


@pytest.fixture
def events() -> list[Event]:
    return []


@pytest.fixture
async def make_trigger(store: Store, events: list[Event]) -> AsyncIterator[MakeTrigger]:
    made: list[ReconcileTrigger] = []

    async def make(
        s: HAProxyTemplateConfigSpec | None = None,
        engine_factory: EngineFactory = factory,
        target: RecordingTarget | None = None,
        **kw: Any,
    ) -> tuple[ReconcileTrigger, RecordingTarget]:
        target = target or RecordingTarget()
        trig = ReconcileTrigger(
            store,
            [target],
            Publisher(metrics=Metrics(), sinks=[events.append]),
            engine_factory,
            metrics=Metrics(),
            drift_interval=None,
            **kw,
        )
        store.subscribe(trig)
        await trig.start(s or spec())
        made.append(trig)
        return trig, target

    yield make
    for t in made:
        await t.stop()
