"""Fleet membership from pod events, without a cluster: who joins, who leaves, and that only
the leader holds members. (tests/operator/test_fleet_run.py runs the same against the real
control plane and real HAProxy pods.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kubernetes import client

from controller.deploy import DataplaneTarget, Fleet
from controller.observability.metrics import Metrics
from controller.operator import fleet_pods
from controller.operator.fleet_pods import DataplaneSettings, FleetPods, PodState, pod_state


def body(name: str, ip: str | None, ready: bool, *, deleting: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    return {
        "metadata": meta,
        "status": {
            **({"podIP": ip} if ip else {}),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_pod_state_reads_name_address_and_readiness() -> None:
    assert pod_state(body("a", "10.244.0.5", True)) == PodState("a", "10.244.0.5", True)
    assert not pod_state(body("a", "10.244.0.5", False)).serving
    assert not pod_state(body("a", None, True)).serving  # ready without an address
    assert not pod_state(body("a", "10.244.0.5", True, deleting=True)).serving
    assert not pod_state({"metadata": {"name": "a"}}).serving


def test_urls() -> None:
    s = DataplaneSettings("ns", "app=haproxy")
    assert s.url("10.244.0.5") == "http://10.244.0.5:5555"
    assert (
        DataplaneSettings("ns", "x", port=6000, ca="PEM").url("fd00::5") == "https://[fd00::5]:6000"
    )


@pytest.fixture
async def pods(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[FleetPods, Fleet, Metrics]]:
    async def credentials(self: FleetPods) -> object:
        return fleet_pods._Credentials("u", "p")

    monkeypatch.setattr(FleetPods, "_credentials", credentials)
    fleet = Fleet("haproxy")
    metrics = Metrics()
    api = client.ApiClient()
    tracker = FleetPods(api, fleet, DataplaneSettings("haproxy", "app=haproxy"), metrics=metrics)
    # The watch thread is not started: pod events are handed in as it would hand them.
    tracker._task = asyncio.get_running_loop().create_task(tracker._sync_loop())
    try:
        yield tracker, fleet, metrics
    finally:
        tracker._task.cancel()
        await fleet.close()
        api.close()  # type: ignore[no-untyped-call]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)


def urls(fleet: Fleet) -> dict[str, str]:
    out = {}
    for name, target in fleet.members.items():
        assert isinstance(target, DataplaneTarget)
        out[name] = target.client.url
    return out


async def test_only_the_leader_holds_members(pods: tuple[FleetPods, Fleet, Metrics]) -> None:
    tracker, fleet, metrics = pods
    tracker._deliver(
        "reset",
        [
            pod_state(body("haproxy-0", "10.244.0.5", True)),
            pod_state(body("haproxy-1", "10.244.0.6", True)),
            pod_state(body("haproxy-2", None, False)),
        ],
    )
    await settle()
    assert tracker.synced.is_set()
    assert len(fleet) == 0  # a follower tracks the pods and joins none
    assert metrics.sample("htc_fleet_pods", {"state": "ready"}) == 2

    tracker.lead()
    await settle()
    assert urls(fleet) == {
        "haproxy-0": "http://10.244.0.5:5555",
        "haproxy-1": "http://10.244.0.6:5555",
    }
    assert metrics.sample("htc_fleet_pods", {"state": "joined"}) == 2

    tracker.follow()  # the Lease went elsewhere: every member leaves at once
    await settle()
    assert len(fleet) == 0
    assert metrics.sample("htc_fleet_pods", {"state": "joined"}) == 0


async def test_pods_leave_and_join_with_their_changes(
    pods: tuple[FleetPods, Fleet, Metrics],
) -> None:
    tracker, fleet, _ = pods
    changes = []
    tracker.on_change = lambda: changes.append(len(fleet))
    tracker.lead()
    tracker._deliver("reset", [pod_state(body("haproxy-0", "10.244.0.5", True))])
    await settle()
    assert set(fleet.members) == {"haproxy-0"}

    tracker._deliver("ADDED", pod_state(body("haproxy-1", None, False)))
    await settle()
    assert set(fleet.members) == {"haproxy-0"}  # not ready yet
    tracker._deliver("MODIFIED", pod_state(body("haproxy-1", "10.244.0.6", True)))
    await settle()
    assert set(fleet.members) == {"haproxy-0", "haproxy-1"}

    tracker._deliver("MODIFIED", pod_state(body("haproxy-0", "10.244.0.5", False)))
    await settle()
    assert set(fleet.members) == {"haproxy-1"}  # unready: left

    # Recreated with the same name and a new address: joins again, with the new address.
    tracker._deliver("MODIFIED", pod_state(body("haproxy-1", "10.244.0.9", True)))
    await settle()
    assert urls(fleet) == {"haproxy-1": "http://10.244.0.9:5555"}

    tracker._deliver("DELETED", pod_state(body("haproxy-1", "10.244.0.9", True, deleting=True)))
    await settle()
    assert len(fleet) == 0
    assert changes, "status.targets was never asked to refresh"
