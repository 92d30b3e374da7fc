"""A deploy that fails for a runtime reason heals by itself, and readiness tells the truth.

The frontend port is held by another socket when ``htc local`` starts, so HAProxy cannot
start; the port is released a moment later and the retry (not a new edit) brings HAProxy up.
"""

from __future__ import annotations

import asyncio
import io
import socket
from pathlib import Path

import aiohttp

from controller.local.app import LocalApp
from controller.observability.metrics import Metrics
from tests.runtime.e2e_helpers import Site, local_options


async def test_a_start_refused_for_a_taken_port_is_retried(
    haproxy_bin: str, site: Site, short_dir: Path
) -> None:
    out = io.StringIO()
    app = LocalApp(
        local_options(site, haproxy_bin, short_dir / "run", out, retry_initial=0.5),
        metrics=Metrics(),
    )
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", site.listen))
    holder.listen()
    try:
        await app.start()
        async with aiohttp.ClientSession() as http:
            assert app.status_url is not None
            ready = app.status_url + "/readyz"
            text = out.getvalue()
            assert "failed (startup); no validated configuration is serving yet; retrying in " in (
                text
            ), text
            assert "keeps serving" not in text
            async with http.get(ready) as resp:
                assert resp.status == 503
            await asyncio.sleep(0.7)  # one retry has failed by now
            holder.close()
            for _ in range(100):
                if app.board.ready:
                    break
                await asyncio.sleep(0.05)
            assert app.board.ready, out.getvalue()
            assert "deployed " in out.getvalue().split("retrying in", 1)[1]
            assert app.trigger.retry_attempts == 0
            async with http.get(ready) as resp:
                assert (resp.status, await resp.text()) == (200, "ready\n")
            await app.supervisor.stop()  # HAProxy gone: a confirmed deploy is not enough
            async with http.get(ready) as resp:
                assert (resp.status, await resp.text()) == (503, "HAProxy is not running\n")
    finally:
        holder.close()
        await app.stop()
