"""Hostile and malformed watched objects: whatever a watch hands over, the delivery path stores
it or refuses it, and the render and pipeline that follow give a report, never an exception.

The objects go through ``apply_delivery`` (what the kopf handlers call) into a store built from
the quickstart spec, then through the engine service ``htc run`` uses, with a real haproxy."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.operator.watchset import Delivery, apply_delivery
from controller.resources import Store
from controller.spec.loader import parse_config
from controller.triggers import default_engine, evaluate

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = yaml.safe_load((REPO / "examples" / "quickstart" / "config.yaml").read_text())
SPEC = parse_config(QUICKSTART)[0].spec  # type: ignore[union-attr]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(["\n", "a\nb", "${HOME}", "#x", "\u2028", "x" * 5000, "*.example.com", "\0"]),
)
json_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
names = st.one_of(st.text(max_size=20), st.integers(), st.none(), st.just("ok-name"))


@st.composite
def objects(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    collection = draw(st.sampled_from(sorted(SPEC.watched_resources)))
    watched = SPEC.watched_resources[collection]
    meta: dict[str, Any] = {"name": draw(names), "namespace": draw(names)}
    if draw(st.booleans()):
        meta["labels"] = draw(json_like)
    if draw(st.booleans()):
        meta["annotations"] = draw(json_like)
    obj: dict[str, Any] = {"apiVersion": watched.api_version, "kind": watched.kind}
    if draw(st.booleans()):
        obj["metadata"] = meta
    for key in draw(st.sets(st.sampled_from(["spec", "status", "data", "endpoints", "ports"]))):
        obj[key] = draw(json_like)
    if collection == "ingresses" and draw(st.booleans()):
        obj["spec"] = {
            "ingressClassName": "haproxy",
            "rules": [{"host": draw(st.text(max_size=40)), "http": draw(json_like)}],
        }
    return collection, obj


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
