"""Zero-downtime reloads: a steady request loop loses nothing while 20 changed
configurations are deployed, in both topologies and on both HAProxy binaries.

Embedded: MasterSocketTarget and the local supervisor (HAProxy beside the controller).
Fleet: two pods of the test pod network, each a HAProxy with its dataplaneapi.
The counts are printed as JSON (``-s`` shows them); ``bench/deploy.py --zero-downtime``
prints the same numbers outside pytest.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import pytest

from controller.deploy.fleet import Fleet
from controller.deploy.master_socket import MasterSocketTarget
from controller.deploy.supervisor import HAProxySupervisor
from controller.deploy.target import DeployResult
from controller.observability.metrics import Metrics
from controller.validation import ValidatedFileSet
from tests.fleet.dataplane_kit import PodFactory, free_port, target_for
from tests.fleet.fleet_helpers import config_set, validated
from tests.fleet.request_loop import LoopCounts, request_loop

pytestmark = pytest.mark.slow

DEPLOYS = 20


async def deploy_under_load(
    deploy: Callable[[ValidatedFileSet], Awaitable[DeployResult]],
    endpoints: Sequence[tuple[str, int]],
    addr: str,
    port: int,
) -> tuple[LoopCounts, list[DeployResult]]:
    first = await deploy(await validated(config_set(addr, port, "gen-0")))
    assert first.ok, first.diagnostics
    stop = asyncio.Event()
    loop = asyncio.create_task(request_loop(endpoints, stop))
    results = []
    try:
        await asyncio.sleep(0.2)
        for n in range(1, DEPLOYS + 1):
            results.append(await deploy(await validated(config_set(addr, port, f"gen-{n}"))))
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
    finally:
        stop.set()
        counts = await loop
    return counts, results


def check(counts: LoopCounts, results: list[DeployResult], topology: str) -> None:
    print(json.dumps({"topology": topology, "deploys": len(results), **counts.to_dict()}))
    assert all(r.ok and r.reloaded for r in results), [r.diagnostics for r in results]
    assert counts.requests > 100 and counts.ok == counts.requests, counts.samples
    assert counts.non_2xx == 0 and counts.errors == 0, counts.samples
    assert f"gen-{DEPLOYS}" in counts.bodies  # the loop saw the last configuration


@pytest.fixture
def short_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="htc-zd-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


async def test_embedded_master_socket(haproxy_bin: str, short_dir: Path) -> None:
    metrics = Metrics()
    sup = HAProxySupervisor(
        haproxy_bin, short_dir / "cfg", short_dir / "master.sock", metrics=metrics
    )
    target = MasterSocketTarget(
        short_dir / "cfg", short_dir / "master.sock", process=sup, metrics=metrics
    )
    port = free_port()
    try:
        counts, results = await deploy_under_load(
            target.deploy, [("127.0.0.1", port)], "127.0.0.1", port
        )
    finally:
        await sup.stop()
    check(counts, results, "embedded")


@pytest.mark.cluster
async def test_fleet_dataplane_api(fleet_pods: PodFactory) -> None:
    pods = [fleet_pods(), fleet_pods()]
    fleet = Fleet()
    try:
        for pod in pods:
            await fleet.join(target_for(pod))
        counts, results = await deploy_under_load(
            fleet.deploy, [(p.addr, p.port) for p in pods], "", 8080
        )
    finally:
        await fleet.close()
    check(counts, results, "fleet")
