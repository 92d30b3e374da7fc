"""End-to-end fixtures; see ``e2e_helpers`` for what a test gets."""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from controller.local.app import LocalApp
from controller.observability.metrics import Metrics
from tests.runtime.e2e_helpers import QUICKSTART, Running, Site, free_port, local_options


@pytest.fixture
async def backends() -> AsyncIterator[dict[str, int]]:
    """echo, api and docs on free loopback ports; each answers ``<name> <path>``."""
    runners: list[web.AppRunner] = []
    ports: dict[str, int] = {}
    for name in ("echo", "api", "docs"):

        async def hello(request: web.Request, name: str = name) -> web.Response:
            return web.Response(text=f"{name} {request.path}")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", hello)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ports[name] = int(runner.addresses[0][1])
        runners.append(runner)
    yield ports
    for r in runners:
        await r.cleanup()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="htc-e2e-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def site(short_dir: Path, backends: dict[str, int]) -> Site:
    root = short_dir / "site"
    (root / "resources").mkdir(parents=True)
    doc = yaml.safe_load(QUICKSTART.read_text())
    listen = free_port()
    doc["spec"]["extraContext"]["listen"] = f"127.0.0.1:{listen}"
    # Fast loop timings keep the tests short; the product defaults are tested elsewhere.
    doc["spec"]["reconcile"] = {"debounce": "50ms", "minInterval": "100ms"}
    (root / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    s = Site(root, listen, backends)
    for name in backends:
        s.service(name)
    s.ingress("echo", "echo.local", {"/": "echo", "=/version": "api"})
    s.ingress("api", "api.local", {"/v1/": "api", "/docs": "docs"})
    return s


@pytest.fixture
async def running(haproxy_bin: str, site: Site, short_dir: Path) -> AsyncIterator[Running]:
    out = io.StringIO()
    metrics = Metrics()
    app = LocalApp(
        local_options(
            site,
            haproxy_bin,
            short_dir / "run",
            out,
            drift_interval=0.5,
            # Deploy retries have their own test; here a refused reload must stay the last
            # deploy while the test inspects it.
            retry_initial=30.0,
        ),
        metrics=metrics,
    )
    await app.start()
    try:
        yield Running(app, site, out, metrics)
    finally:
        await app.stop()
