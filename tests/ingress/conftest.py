"""Fixtures for the Ingress library's end-to-end tests (see ``ingress_kit``)."""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.local.app import LocalApp, LocalOptions
from tests.ingress.ingress_kit import Cluster, Echoes, Start


async def run_local(
    cluster: Cluster, haproxy_bin: str, **extra_context: Any
) -> tuple[LocalApp, io.StringIO]:
    """Write the cluster's manifests and start ``htc local`` on them; the caller stops the
    app. Returns it and its console output (the first deploy is in it)."""
    cluster.write(**extra_context)
    out = io.StringIO()
    app = LocalApp(
        LocalOptions(
            directory=cluster.root,
            haproxy=haproxy_bin,
            work_dir=cluster.root.parent / "run",
            out=out,
            status_addr=None,
            adapter_options={"debounce_ms": 30, "step_ms": 10},
        )
    )
    await app.start()
    assert "deployed" in out.getvalue(), out.getvalue()
    return app, out


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="htc-ing-"))
    e = Echoes()
    try:
        yield Cluster(root / "site", e)
    finally:
        e.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def serve(cluster: Cluster, haproxy_bin: str) -> AsyncIterator[Start]:
    """``await serve(**extraContext)`` writes the cluster's manifests and runs ``htc local`` on
    them with ``haproxy_bin`` until the test ends; it returns the console output."""
    apps: list[LocalApp] = []

    async def start(**extra_context: Any) -> io.StringIO:
        app, out = await run_local(cluster, haproxy_bin, **extra_context)
        apps.append(app)
        return out

    yield start
    for app in apps:
        await app.stop()
