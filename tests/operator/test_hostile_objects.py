"""Hostile and malformed watched objects: whatever a watch hands over, the delivery path stores
it or refuses it, and the render and pipeline that follow give a report, never an exception.

The objects go through ``apply_delivery`` (what the kopf handlers call) into a store built from
the quickstart spec, then through the engine service ``htc run`` uses, with a real haproxy."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.operator.watchset import Delivery, apply_delivery
from controller.resources import Store
from controller.triggers import default_engine, evaluate
from tests.operator.hostile_kit import SPEC, objects


@pytest.fixture(scope="module")
def engine_for() -> Any:
    return default_engine("/usr/sbin/haproxy")(SPEC)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(objects(), min_size=1, max_size=6), st.booleans())
def test_no_object_makes_the_watch_or_the_render_raise(
    engine_for: Any, batch: list[tuple[str, dict[str, Any]]], then_delete: bool
) -> None:
    store = Store(SPEC.watched_resources)
    for collection, obj in batch:
        apply_delivery(store, Delivery("apply", collection, obj))
        if then_delete:
            apply_delivery(store, Delivery("delete", collection, obj))
    _render, verdict = asyncio.run(evaluate(engine_for, store.snapshot()))
    report = verdict.report
    if not report.valid:
        # a refusal is a report with rule ids, never an empty failure
        assert report.diagnostics and all(d.rule_id for d in report.diagnostics)
    assert verdict.validated is None or verdict.validated.checksum == report.metadata.checksum
