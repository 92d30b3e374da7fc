"""HTTP sources in ``htc local``: the same fetcher and the same proposal semantics as ``htc run``.

A loopback aiohttp server of the test is the source; the site is the quickstart with a block
list written into haproxy.cfg and an output rule that refuses ``0.0.0.0`` (so "invalid content"
does not depend on what the library accepts). A real HAProxy runs each deployed set.

* a refresh is validated before it is used: valid content is deployed, invalid content is
  rejected (console, /status, metrics), validated once, and the last good content keeps serving;
* a critical source that is down at start holds the first render, and /status says why;
* a non-critical source that is down at start renders with empty content and a warning, and
  its content is deployed once the source answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import shutil
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from controller.local.app import LocalApp, LocalOptions
from controller.observability.metrics import Metrics
from tests.operator.operator_kit import with_blocklist

pytestmark = pytest.mark.haproxy

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Source:
    body: str = "10.0.0.1\n"
    status: int = 200
    url: str = ""
    token: str | None = None
    """When set, only ``Authorization: <token>`` is answered (401 otherwise)."""
    second: str = "10.0.0.9\n"
    """What the URL with ``?list=second`` answers (a source whose spec changed)."""


@pytest.fixture
async def source() -> AsyncIterator[Source]:
    s = Source()

    async def answer(request: web.Request) -> web.Response:
        if s.token is not None and request.headers.get("Authorization") != s.token:
            return web.Response(status=401)
        if s.status != 200:
            return web.Response(status=s.status)
        return web.Response(text=s.second if request.query.get("list") == "second" else s.body)

    app = web.Application()
    app.router.add_get("/blocklist", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    s.url = f"http://127.0.0.1:{runner.addresses[0][1]}/blocklist"
    yield s
    await runner.cleanup()


def site(root: Path, url: str, **source: Any) -> Path:
    shutil.copytree(QUICKSTART / "resources", root / "resources")
    doc = yaml.safe_load((QUICKSTART / "config.yaml").read_text())
    spec = doc["spec"]
    spec["reconcile"] = {"debounce": "50ms", "minInterval": "100ms"}
    with_blocklist(spec, url, **{"refreshInterval": "300ms", "timeout": "1s", **source})
    (root / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


@dataclass
class Local:
    app: LocalApp
    out: io.StringIO
    metrics: Metrics

    def deployed(self) -> str:
        path = self.app.deploy_dir / "haproxy.cfg"
        return path.read_text() if path.exists() else ""

    def http_status(self) -> dict[str, Any]:
        (line,) = self.app.board.snapshot()["httpSources"]
        return dict(line)

    def rule_events(self, rule: str) -> list[dict[str, Any]]:
        return [e for e in self.app.board.snapshot()["events"] if rule in e["ruleIds"]]

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    async def until(self, check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
        async with asyncio.timeout(timeout):
            while not check():
                await asyncio.sleep(0.05)
        assert check(), what


@pytest.fixture
def make_local(tmp_path: Path) -> Callable[..., Local]:
    made = 0

    def make(url: str, secrets_dir: Path | None = None, **source: Any) -> Local:
        nonlocal made
        made += 1
        out, metrics = io.StringIO(), Metrics()
        options = LocalOptions(
            directory=site(tmp_path / f"site{made}", url, **source),
            haproxy="/usr/sbin/haproxy",
            listen=f"127.0.0.1:{free_port()}",
            status_addr=None,
            work_dir=tmp_path / f"run{made}",
            out=out,
            adapter_options={"debounce_ms": 30, "step_ms": 10},
            secrets_dir=secrets_dir,
        )
        return Local(LocalApp(options, metrics=metrics), out, metrics)

    return make


async def test_a_refresh_is_validated_before_it_is_used(
    source: Source, make_local: Callable[..., Local]
) -> None:
    local = make_local(source.url)
    await local.app.start()
    try:
        assert "# deny 10.0.0.1" in local.deployed()
        assert local.http_status()["acceptedChecksum"] == sha("10.0.0.1\n")
        source.body = "10.0.0.2\n"  # valid: promoted, then deployed
        await local.until(lambda: "# deny 10.0.0.2" in local.deployed(), "the new list deployed")
        assert local.http_status()["acceptedChecksum"] == sha("10.0.0.2\n")
        source.body = "0.0.0.0\n"  # invalid: rejected, the accepted content keeps serving
        await local.until(
            lambda: local.http_status()["pendingRejected"] == sha("0.0.0.0\n"), "the rejection"
        )
        known = {"source": "blocklist", "reason": "known"}
        await local.until(
            lambda: local.sample("htc_http_rejections_total", **known) >= 3,
            "three refreshes of the same bad content, never validated again",
        )
        assert local.sample("htc_http_rejections_total", source="blocklist", reason="invalid") == 1
        text = local.deployed()
        assert "# deny 10.0.0.2" in text and "0.0.0.0" not in text
        assert local.http_status()["acceptedChecksum"] == sha("10.0.0.2\n")
        console = local.out.getvalue()
        assert "new content of HTTP source(s) blocklist rejected" in console
        assert "the block list must not block every address" in console
        assert local.app.board.ready
    finally:
        await local.app.stop()


async def test_a_critical_source_down_at_start_holds_the_first_render(
    source: Source, make_local: Callable[..., Local]
) -> None:
    source.status = 503
    local = make_local(source.url, critical=True)
    starting = asyncio.create_task(local.app.start())
    try:
        await local.until(lambda: bool(local.rule_events("E7016")), "the wait reported", 20)
        (event,) = local.rule_events("E7016")
        assert (
            "nothing renders until the critical HTTP source(s) blocklist are fetched"
            in (event["message"])
        )
        assert f"HTTP 503 from {source.url}" in event["message"]
        assert "E7016" in local.out.getvalue()  # the console says it too
        assert local.http_status()["lastError"] == f"HTTP 503 from {source.url}"
        assert not starting.done() and local.deployed() == "" and not local.app.board.ready
        source.status = 200
        async with asyncio.timeout(20):
            await starting
        assert "# deny 10.0.0.1" in local.deployed() and local.app.board.ready
    finally:
        if not starting.done():
            local.app.request_stop()
            await starting
        await local.app.stop()


async def test_a_non_critical_source_down_at_start_renders_without_it(
    source: Source, make_local: Callable[..., Local]
) -> None:
    source.status = 503
    local = make_local(source.url)
    await local.app.start()
    try:
        assert local.app.board.ready and local.deployed()
        assert "# deny" not in local.deployed()  # empty content
        (event,) = local.rule_events("W7015")
        assert "templates read empty content until it is fetched" in event["message"]
        assert local.http_status().get("acceptedChecksum") is None
        source.status = 200
        await local.until(lambda: "# deny 10.0.0.1" in local.deployed(), "the list deployed")
        assert local.http_status()["acceptedChecksum"] == sha("10.0.0.1\n")
    finally:
        await local.app.stop()


async def test_a_stop_while_a_critical_source_is_awaited_ends_cleanly(
    source: Source, make_local: Callable[..., Local]
) -> None:
    source.status = 503
    local = make_local(source.url, critical=True)
    starting = asyncio.create_task(local.app.start())
    await local.until(lambda: bool(local.rule_events("E7016")), "the wait reported", 20)
    local.app.request_stop()
    async with asyncio.timeout(10):
        await starting
    await local.app.stop()
    assert local.deployed() == "" and not local.app.supervisor.running()


async def test_credentials_come_from_a_secrets_directory(
    source: Source, make_local: Callable[..., Local], tmp_path: Path
) -> None:
    source.token = "Bearer s3cret"
    secrets = tmp_path / "secrets"
    (secrets / "lists").mkdir(parents=True)
    (secrets / "lists" / "token").write_text("Bearer s3cret\n")
    local = make_local(source.url, secrets, secretRef={"name": "lists", "key": "token"})
    await local.app.start()
    try:
        assert "# deny 10.0.0.1" in local.deployed()
    finally:
        await local.app.stop()
    unauthorised = make_local(source.url, secretRef={"name": "lists", "key": "token"})
    await unauthorised.app.start()  # no secrets directory: nothing is sent, the server says 401
    try:
        assert "# deny" not in unauthorised.deployed()
        assert unauthorised.http_status()["lastError"] == f"HTTP 401 from {source.url}"
    finally:
        await unauthorised.app.stop()


async def test_a_changed_source_in_an_adopted_spec_is_fetched_and_validated(
    source: Source, make_local: Callable[..., Local]
) -> None:
    local = make_local(source.url)
    await local.app.start()
    try:
        assert "# deny 10.0.0.1" in local.deployed()
        config = local.app.options.directory / "config.yaml"
        doc = yaml.safe_load(config.read_text())
        doc["spec"]["httpSources"]["blocklist"]["url"] = source.url + "?list=second"
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
        await local.until(
            lambda: "# deny 10.0.0.9" in local.deployed(), "the new source's list deployed", 30
        )
        assert local.http_status()["acceptedChecksum"] == sha("10.0.0.9\n")
        assert local.sample("htc_http_promotions_total", source="blocklist") >= 1
        source.second = "0.0.0.0\n"  # the new source refreshes and is judged like any other
        await local.until(
            lambda: local.http_status()["pendingRejected"] == sha("0.0.0.0\n"), "the rejection"
        )
        assert "# deny 10.0.0.9" in local.deployed()
    finally:
        await local.app.stop()
