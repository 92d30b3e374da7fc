"""Fixtures for deploy tests: a supervised HAProxy and its master-socket target."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from controller.deploy.master_socket import MasterSocketTarget
from controller.deploy.supervisor import HAProxySupervisor
from controller.observability.metrics import Metrics
from tests.deploy.deploy_helpers import free_port


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """Unix socket paths must stay under 108 bytes; pytest's tmp_path can be longer."""
    d = Path(tempfile.mkdtemp(prefix="htc-dep-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
async def local(
    haproxy_bin: str, short_dir: Path
) -> AsyncIterator[tuple[MasterSocketTarget, HAProxySupervisor, Metrics]]:
    metrics = Metrics()
    sup = HAProxySupervisor(
        haproxy_bin,
        short_dir / "cfg",
        short_dir / "master.sock",
        metrics=metrics,
        check_interval=0.2,
    )
    target = MasterSocketTarget(
        short_dir / "cfg", short_dir / "master.sock", process=sup, metrics=metrics
    )
    try:
        yield target, sup, metrics
    finally:
        await sup.stop()
