"""Shared ``htc local`` sites for the Ingress library's end-to-end tests (see ``ingress_kit``).

A start of ``htc local`` with a real HAProxy costs seconds, a scenario's requests far less:
so a test module puts the manifests of many scenarios (distinct hosts, Ingress and Service
names) into one site and serves it once per HAProxy binary, from a module-scoped fixture
that enters :func:`shared_site`.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from controller.local.app import LocalApp, LocalOptions
from tests.conftest import HAPROXY
from tests.ingress.ingress_kit import TLS, Cluster, Echoes


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


@dataclass
class Site:
    """A served cluster, ``htc local``'s console output, and the certificates its setup made
    (by name) for clients that verify them."""

    cluster: Cluster
    out: io.StringIO
    certs: dict[str, TLS] = field(default_factory=dict)


@contextlib.asynccontextmanager
async def shared_site(
    family: str, setup: Callable[[Cluster, dict[str, TLS]], None]
) -> AsyncIterator[Site]:
    """``htc local`` with the HAProxy of ``family`` ("2.6", "2.8") serving what ``setup``
    put into a fresh cluster (it may also record certificates), until the block ends."""
    if family not in HAPROXY:
        pytest.fail(f"haproxy {family} not installed (found {sorted(HAPROXY)})")
    root = Path(tempfile.mkdtemp(prefix="htc-ing-"))
    echoes = Echoes()
    try:
        cluster = Cluster(root / "site", echoes)
        certs: dict[str, TLS] = {}
        setup(cluster, certs)
        app, out = await run_local(cluster, HAPROXY[family])
        try:
            yield Site(cluster, out, certs)
        finally:
            await app.stop()
    finally:
        echoes.close()
        shutil.rmtree(root, ignore_errors=True)
