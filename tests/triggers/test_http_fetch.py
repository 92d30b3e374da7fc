"""The HTTP source fetcher against real loopback servers (aiohttp, plain and TLS).

What a fetch may bring is hostile: a body larger than ``maxBytes`` (even an endless one), a
server that accepts the connection and never answers, an error status, a certificate of a
private CA. Each case ends within its bounds, keeps the accepted content, and is reported
with W7015 (a critical source not yet fetched with E7016). No render is involved: these are
the fetcher's own promises; the proposal path is tested in tests/local and tests/operator.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from controller.observability.metrics import Metrics
from controller.publish import Event, Publisher
from controller.spec.models import HttpSource
from controller.testbed.tls import serving_certs
from controller.triggers.http_sources import HttpSources

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Server:
    """One loopback server whose answer the test swaps; counts the requests it got."""

    handler: Handler
    url: str = ""
    requests: int = 0
    runner: web.AppRunner | None = field(default=None, repr=False)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Server]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler, tls: Any = None) -> Server:
        server = Server(handler)

        async def route(request: web.Request) -> web.StreamResponse:
            server.requests += 1
            return await server.handler(request)

        app = web.Application()
        app.router.add_get("/list", route)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls).start()
        runners.append(runner)
        scheme = "https" if tls is not None else "http"
        server.url = f"{scheme}://127.0.0.1:{runner.addresses[0][1]}/list"
        server.runner = runner
        return server

    yield start
    for runner in runners:
        await runner.cleanup()


def text(body: str) -> Handler:
    async def answer(request: web.Request) -> web.StreamResponse:
        return web.Response(text=body)

    return answer


def sources(events: list[Event], **specs: dict[str, Any]) -> HttpSources:
    """Sources without a trigger: the fetcher alone (proposals need a running engine)."""
    return HttpSources(
        {name: HttpSource.model_validate(s) for name, s in specs.items()},
        engine=lambda: None,
        view=lambda: None,
        on_promote=lambda names: None,
        publisher=Publisher(metrics=Metrics(), sinks=[events.append]),
        metrics=Metrics(),
    )


def reported(events: list[Event], rule: str) -> list[str]:
    return [d.message for e in events for d in e.diagnostics if d.rule_id == rule]


async def test_an_endless_body_stops_at_max_bytes_and_the_accepted_content_stays(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    server = await serve(text("10.0.0.1\n"))
    events: list[Event] = []
    s = sources(events, blocklist={"url": server.url, "maxBytes": 4096, "timeout": "5s"})
    try:
        await s.start_initial()
        assert s.content() == {"blocklist": "10.0.0.1\n"}

        async def endless(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse()
            await resp.prepare(request)
            for _ in range(100_000):  # 6.5 GB if nobody stopped reading; bounded all the same
                await resp.write(b"10.1.2.3\n" * 7282)
            return resp

        server.handler = endless
        state = s.states["blocklist"]
        started = time.monotonic()
        with pytest.raises(Exception, match="maxBytes"):
            await s._fetch(state)
        assert time.monotonic() - started < 5
        assert server.requests == 2  # an oversize body is not fetched again in the same round
        s._report_fetch(state, "the accepted content stays")
        assert s.content() == {"blocklist": "10.0.0.1\n"}
        assert state.status()["lastError"] == "larger than maxBytes (4096 bytes); stopped reading"
        (message,) = reported(events, "W7015")
        assert "blocklist" in message and "maxBytes (4096" in message
        assert "the accepted content stays" in message
        s._report_fetch(state, "the accepted content stays")  # the same error: told once
        assert len(reported(events, "W7015")) == 1
    finally:
        await s.stop()


async def test_a_server_that_never_answers_is_bounded_by_the_timeout(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def stall(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response(text="too late")

    server = await serve(stall)
    events: list[Event] = []
    s = sources(events, slow={"url": server.url, "timeout": "300ms"})
    try:
        started = time.monotonic()
        await s.start_initial()
        took = time.monotonic() - started
        # three attempts of 0.3 s and two jittered back-offs of at most 0.75 s and 1.5 s, and
        # slack for a loaded machine: bounded, not a timing figure
        assert took < 0.9 + 2.25 + 3.0, took
        assert server.requests == 3
        assert s.content() == {"slow": ""}  # non-critical: renders with empty content
        (message,) = reported(events, "W7015")
        assert "no complete answer within the timeout (0.3 s)" in message
        assert "templates read empty content" in message
    finally:
        await s.stop()


async def test_an_error_status_is_retried_only_when_the_server_failed(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def missing(request: web.Request) -> web.StreamResponse:
        return web.Response(status=404)

    async def broken(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503)

    gone, failing = await serve(missing), await serve(broken)
    events: list[Event] = []
    s = sources(events, gone={"url": gone.url}, failing={"url": failing.url})
    try:
        await s.start_initial()
        assert (gone.requests, failing.requests) == (1, 3)
        assert s.states["gone"].last_error == f"HTTP 404 from {gone.url}"
        assert s.states["failing"].last_error == f"HTTP 503 from {failing.url}"
        assert len(reported(events, "W7015")) == 2
    finally:
        await s.stop()


async def test_a_ca_bundle_trusts_a_private_ca_and_nothing_else(
    serve: Callable[..., Awaitable[Server]], tmp_path: Path
) -> None:
    ca, cert, key = serving_certs(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server = await serve(text("10.9.9.9\n"), tls=tls)
    (tmp_path / "other").mkdir()
    other, _, _ = serving_certs(tmp_path / "other")
    events: list[Event] = []
    s = sources(
        events,
        trusted={"url": server.url, "caBundle": ca.read_text()},
        system={"url": server.url},
        wrong={"url": server.url, "caBundle": other.read_text()},
    )
    try:
        await s.start_initial()
        assert s.content()["trusted"] == "10.9.9.9\n"
        for name in ("system", "wrong"):  # the system store, or another CA: refused
            assert s.content()[name] == ""
            error = s.states[name].last_error or ""
            assert error.startswith("TLS: ") and "CERTIFICATE_VERIFY_FAILED" in error, error
        # a certificate that does not verify is not asked for again in the same round
        assert server.requests == 1
    finally:
        await s.stop()


async def test_a_critical_source_down_at_start_holds_everything_until_it_answers(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def down(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503)

    server = await serve(down)
    events: list[Event] = []
    s = sources(events, geo={"url": server.url, "critical": True, "timeout": "1s"})
    try:
        await s.start_initial()
        assert s.missing_critical() == ["geo"]
        assert reported(events, "W7015") == []  # a critical source is reported as E7016
        waiting = asyncio.create_task(s.wait_critical(retry=0.1))
        await asyncio.sleep(0.5)
        assert not waiting.done()
        (message,) = reported(events, "E7016")  # once per distinct reason, not per retry
        assert "nothing renders until the critical HTTP source(s) geo are fetched" in message
        assert f"HTTP 503 from {server.url}" in message
        server.handler = text("10.0.0.0/8\n")
        async with asyncio.timeout(10):
            await waiting
        assert s.content() == {"geo": "10.0.0.0/8\n"} and s.missing_critical() == []
    finally:
        await s.stop()
