"""The status endpoint: ``/metrics``, ``/healthz``, ``/readyz`` and ``/status``.

``/healthz`` answers as long as the event loop runs (a wedged loop cannot answer at all).
``/readyz`` turns 200 only after the first confirmed deployment, so a load balancer or a
Kubernetes readiness probe never sends traffic to an HAProxy that has no validated config.
Where the controller runs HAProxy itself (local mode) it also passes ``alive``: a confirmed
deployment says nothing once that process has died and not come back.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from aiohttp import web

from controller.observability import CONTENT_TYPE_LATEST, Metrics
from controller.publish.status import StatusBoard

__all__ = ["StatusServer", "parse_addr"]


def parse_addr(addr: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) → (host, port); port 0 picks a free port."""
    host, sep, port = addr.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ValueError(f"invalid address {addr!r}: use host:port, e.g. 127.0.0.1:9180")
    return host.strip("[]") or "127.0.0.1", int(port)


class StatusServer:
    def __init__(
        self,
        board: StatusBoard,
        metrics: Metrics,
        addr: str = "127.0.0.1:0",
        *,
        alive: Callable[[], bool] | None = None,
        not_ready: Callable[[], str | None] | None = None,
    ) -> None:
        self.board = board
        self.metrics = metrics
        self.alive = alive
        """Whether the HAProxy this controller runs is up; None when it runs elsewhere."""
        self.not_ready = not_ready
        """Why the adapter is not ready yet (watches still listing), or None."""
        self.host, self.port = parse_addr(addr)
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/status", self._status)
        return app

    async def start(self) -> None:
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        addresses = runner.addresses  # the real port when 0 was asked for
        if addresses:
            self.port = int(addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(
            body=self.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        reason = self.not_ready() if self.not_ready is not None else None
        if reason:
            return web.Response(status=503, text=reason + "\n")
        if not self.board.ready:
            return web.Response(status=503, text="no validated configuration deployed yet\n")
        if self.alive is not None and not self.alive():
            return web.Response(status=503, text="HAProxy is not running\n")
        return web.Response(text="ready\n")

    async def _status(self, _: web.Request) -> web.Response:
        return web.Response(
            text=json.dumps(self.board.snapshot(), indent=2, sort_keys=True) + "\n",
            content_type="application/json",
        )
