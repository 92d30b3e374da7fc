"""The public test kit (controller/testing.py) does what its docstrings promise, through the
real pipeline, store and renderer it stands beside."""

from __future__ import annotations

import asyncio

import pytest

from controller.deploy import DeployOutcome
from controller.diagnostics import Phase, make
from controller.render import Renderer
from controller.resources import thaw
from controller.spec import HAProxyTemplateConfigSpec
from controller.testing import (
    FakeStage,
    ManualClock,
    RecordingTarget,
    endpoint_slice,
    ingress,
    render_of,
    service,
    settle,
    stageless_pipeline,
    store_of,
)
from controller.validation import Pipeline

CFG = "global\n    maxconn 10\n\ndefaults\n    mode http\n"


async def test_stageless_pipeline_issues_a_validated_set() -> None:
    verdict = await stageless_pipeline().check(render_of(CFG))
    assert verdict.validated is not None
    assert verdict.validated.files.main.content == CFG.encode()


async def test_recording_target_records_and_reports_unchanged() -> None:
    target = RecordingTarget()
    verdict = await stageless_pipeline().check(render_of(CFG))
    assert verdict.validated is not None
    first = await target.deploy(verdict.validated)
    again = await target.deploy(verdict.validated)
    assert (first.outcome, again.outcome) == (DeployOutcome.DEPLOYED, DeployOutcome.UNCHANGED)
    assert target.deployed == [CFG.strip()] and target.last == CFG.strip()
    assert target.received == [verdict.validated, verdict.validated]
    assert await target.check_drift() is None


async def test_recording_target_refuses_unvalidated_files() -> None:
    with pytest.raises(TypeError, match="ValidatedFileSet"):
        await RecordingTarget().deploy(render_of(CFG).files)  # type: ignore[arg-type]


async def test_fake_stages_run_in_order_and_their_findings_decide() -> None:
    log: list[str] = []
    finding = make("E2001", Phase.SCHEMA, "a finding the test chose")
    syntax = FakeStage(Phase.SYNTAX, log=log)
    schema = FakeStage(Phase.SCHEMA, diagnostics=[finding], log=log)
    pipeline = Pipeline([syntax, schema], haproxy_version=None, cache=None)
    render = render_of(CFG, template="main.j2", offset=3)
    verdict = await pipeline.check(render)
    assert log == ["syntax", "schema"]
    assert verdict.validated is None
    assert [d.rule_id for d in verdict.report.diagnostics] == ["E2001"]
    assert syntax.seen_checksums == [render.files.checksum]
    assert render.source_map.lookup("haproxy.cfg", 1).line == 4  # type: ignore[union-attr]


async def test_fake_stage_failure_becomes_a_report() -> None:
    stage = FakeStage(Phase.SYNTAX, raises=RuntimeError("boom"))
    verdict = await Pipeline([stage], haproxy_version=None, cache=None).check(render_of(CFG))
    assert verdict.validated is None and stage.calls == 1


def test_builders_fill_a_store_the_renderer_reads() -> None:
    spec = HAProxyTemplateConfigSpec.model_validate(
        {
            "watchedResources": {
                "ingresses": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"},
                "services": {"apiVersion": "v1", "kind": "Service"},
                "endpoints": {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice"},
            },
            "haproxyConfig": {
                "template": "{% for i in resources.ingresses.list() %}"
                "{{ i.metadata.name }} {{ i.spec.rules[0].http.paths[0].backend.service.name }}\n"
                "{% endfor %}{{ resources.endpoints.list() | length }}"
                " {{ resources.services.list()[0].spec.ports[0].port }}\n"
            },
        }
    )
    store = store_of(
        spec,
        {
            "ingresses": [ingress("web", "a.example", ("/", "Prefix", "svc", 80))],
            "services": [service("svc", 80)],
            "endpoints": [endpoint_slice("svc", 8080, ("10.0.0.1", True), ("10.0.0.2", None))],
        },
    )
    result = Renderer(spec).render(store.snapshot())
    assert result.files.main.content.decode() == "web svc\n1 80\n"
    pairs = store_of(spec.watched_resources, [("services", service("a", 1, port_name=None))])
    assert thaw(pairs.collection("services").list()[0]["spec"]["ports"]) == [
        {"port": 1, "targetPort": 1}
    ]


async def test_manual_clock_wakes_waiters_only_when_advanced() -> None:
    clock = ManualClock()
    wake = asyncio.Event()
    waiter = asyncio.ensure_future(clock.wait(wake, 5.0))
    await settle()
    await clock.advance(4.9)
    assert not waiter.done()
    await clock.advance(0.1)
    assert waiter.done() and waiter.result() is False
