"""Publication: /metrics, /healthz, /readyz, /status over a real socket, and the status file."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import structlog

from controller.deploy.target import DeployOutcome, DeployResult, MasterSocketDetail
from controller.diagnostics import Diagnostic, Phase, make
from controller.observability.metrics import Metrics
from controller.publish import Event, EventKind, Publisher, StatusBoard, StatusServer, parse_addr
from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.validation import Pipeline, Verdict
from controller.validation.report import ReportStatus, ValidationReport

Served = tuple[Publisher, StatusBoard, StatusServer, aiohttp.ClientSession, Metrics]


def files(text: str) -> FileSet:
    return FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, text.encode())])


async def verdict(text: str, *diags: Diagnostic) -> Verdict:
    return await Pipeline([], haproxy_version=None, cache=None, allow_partial=True).check(
        RenderResult(files(text), diagnostics=tuple(diags))
    )


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    metrics = Metrics()
    board = StatusBoard(tmp_path / "status.json")
    publisher = Publisher(metrics=metrics, sinks=[board])
    server = StatusServer(board, metrics, "127.0.0.1:0")
    await server.start()
    async with aiohttp.ClientSession() as http:
        yield publisher, board, server, http, metrics
    await server.stop()


async def fetch(http: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with http.get(url) as resp:
        return resp.status, await resp.text()


async def test_ready_only_after_a_confirmed_deploy(served: Served, tmp_path: Path) -> None:
    publisher, _board, server, http, _metrics = served
    assert await fetch(http, server.url + "/healthz") == (200, "ok\n")
    assert (await fetch(http, server.url + "/readyz"))[0] == 503

    bad = await verdict("x", make("E1004", Phase.RENDER, "boom"))
    publisher.record_verdict("startup", bad.report)
    publisher.publish(Event.rejected("startup", bad.report))
    assert (await fetch(http, server.url + "/readyz"))[0] == 503
    status = json.loads((await fetch(http, server.url + "/status"))[1])
    assert status["ready"] is False and status["running"] is None
    assert status["lastVerdict"]["valid"] is False
    assert "E1004" in status["lastVerdict"]["summary"]["ruleIds"]

    good = await verdict("y")
    assert good.validated is not None
    failed = DeployResult(
        "local",
        DeployOutcome.ROLLED_BACK,
        good.validated.checksum,
        None,
        diagnostics=(make("E7001", Phase.DEPLOY, "refused"),),
    )
    publisher.publish(Event.deployed("change", good.validated, [failed]))
    assert (await fetch(http, server.url + "/readyz"))[0] == 503  # refused by HAProxy: not ready

    done = DeployResult(
        "local",
        DeployOutcome.DEPLOYED,
        good.validated.checksum,
        good.validated.checksum,
        reloaded=True,
        detail=MasterSocketDetail(haproxy_log="Loading success."),
    )
    publisher.publish(Event.deployed("change", good.validated, [done]))
    assert await fetch(http, server.url + "/readyz") == (200, "ready\n")
    status = json.loads((await fetch(http, server.url + "/status"))[1])
    assert status["running"]["checksum"] == good.validated.checksum
    assert status["lastDeploy"]["targets"][0]["outcome"] == "deployed"
    assert status["lastDeploy"]["targets"][0]["detail"] == {
        "kind": "masterSocket",
        "haproxyLog": "Loading success.",
    }
    assert [e["kind"] for e in status["events"]] == ["rejected", "deploy_failed", "deployed"]
    assert status["events"][1]["ruleIds"] == ["E7001"]
    on_disk = json.loads((tmp_path / "status.json").read_text())
    assert on_disk == status


async def test_metrics_endpoint_serves_the_registry(served: Served) -> None:
    publisher, _, server, http, _metrics = served
    v = await verdict("z")
    publisher.record_verdict("change", v.report)
    async with http.get(server.url + "/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
    assert 'htc_pipeline_runs_total{result="valid",trigger="change"} 1.0' in text
    assert "htc_pipeline_cache_misses_total 0.0" in text  # no stages ran: neither hit nor miss


async def test_spec_rejection_is_published(served: Served) -> None:
    publisher, board, *_ = served
    diag = make("E8001", Phase.SPEC, "spec.haproxyConfig: field required")
    publisher.publish(Event(EventKind.SPEC_REJECTED, "config", diagnostics=(diag,), message="no"))
    snap = board.snapshot()
    assert snap["spec"]["lastRejection"]["summary"]["ruleIds"] == ["E8001"]
    assert snap["ready"] is False


def test_a_failing_sink_does_not_stop_the_others() -> None:
    seen: list[Event] = []

    def broken(_: Event) -> None:
        raise RuntimeError("sink down")

    publisher = Publisher(metrics=Metrics(), sinks=[broken, seen.append])
    publisher.publish(Event(EventKind.RUNTIME, "drift", message="x"))
    assert len(seen) == 1


async def test_readyz_needs_the_local_haproxy_to_be_up(tmp_path: Path) -> None:
    board = StatusBoard()
    up = [True]
    server = StatusServer(board, Metrics(), "127.0.0.1:0", alive=lambda: up[0])
    await server.start()
    try:
        good = await verdict("y")
        assert good.validated is not None
        done = DeployResult(
            "local", DeployOutcome.DEPLOYED, good.validated.checksum, good.validated.checksum
        )
        board(Event.deployed("startup", good.validated, [done]))
        async with aiohttp.ClientSession() as http:
            assert await fetch(http, server.url + "/readyz") == (200, "ready\n")
            up[0] = False
            assert await fetch(http, server.url + "/readyz") == (503, "HAProxy is not running\n")
    finally:
        await server.stop()


def test_phase_histogram_only_uses_pipeline_phases() -> None:
    """Reports time more than phases (the overlap window, a stage's sub-steps); none of those
    may become a ``phase`` series."""
    metrics = Metrics()
    report = ValidationReport(
        valid=True,
        status=ReportStatus.OK,
        timings={
            "renderMs": 2.0,
            "syntaxMs": 1.0,
            "syntaxParseMs": 0.5,
            "overlapMs": 40.0,
            "haproxyMs": 39.0,
            "haproxyProcessMs": 35.0,
            "rulesMs": 3.0,
            "totalMs": 45.0,
        },
    )
    Publisher(metrics=metrics).record_verdict("change", report)
    text = metrics.exposition().decode()
    phases = set(re.findall(r'htc_pipeline_phase_duration_seconds_count\{phase="([^"]+)"\}', text))
    assert phases == {"render", "syntax", "haproxy", "rules"}


def test_logs_do_not_claim_a_serving_config_before_the_first_deploy() -> None:
    report = ValidationReport(valid=False, status=ReportStatus.ERROR)
    publisher = Publisher(metrics=Metrics())
    with structlog.testing.capture_logs() as logs:
        publisher.publish(Event.rejected("startup", report))
        publisher.publish(Event.rejected("change", report, serving="a" * 64))
    assert [e["event"] for e in logs] == [
        "configuration rejected; no validated configuration is serving yet",
        "configuration rejected; last good configuration keeps serving",
    ]
    assert [e["serving"] for e in logs] == [None, "a" * 64]


@pytest.mark.parametrize(
    ("addr", "expected"),
    [
        ("127.0.0.1:9180", ("127.0.0.1", 9180)),
        ("[::1]:0", ("::1", 0)),
        (":8080", ("127.0.0.1", 8080)),
    ],
)
def test_parse_addr(addr: str, expected: tuple[str, int]) -> None:
    assert parse_addr(addr) == expected


@pytest.mark.parametrize(
    "addr", ["localhost", "garbage", "127.0.0.1:99999", "127.0.0.1:\uff18\uff10"]
)
def test_parse_addr_rejects_garbage(addr: str) -> None:
    with pytest.raises(ValueError, match="invalid address"):
        parse_addr(addr)
