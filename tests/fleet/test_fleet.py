"""Fleet: pods join and leave at run time; deploys run concurrently; a dead pod is retried.

The pods are pods of the test pod network (controller/testbed/podnet.py): each HAProxy and
its dataplaneapi run in a network namespace of their own, so every pod binds the same port
from the same configuration, as in a cluster.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from controller.deploy.fleet import Fleet, FleetDetail
from controller.deploy.target import DeployOutcome
from tests.fleet.dataplane_kit import PodFactory, second_writer, target_for
from tests.fleet.fleet_helpers import config_set, eventually, validated

pytestmark = pytest.mark.cluster


async def test_a_dead_api_fails_only_its_pod_and_is_retried(fleet_pods: PodFactory) -> None:
    """Kill one pod's dataplaneapi while its push is in flight: the other pod takes the new
    set, the dead one keeps serving the last good one, and the retry brings it level."""
    a = fleet_pods()
    # A slow reload on b leaves time to kill its API between the push and the confirmation.
    b = fleet_pods(reload_delay_ms=1500)
    fleet = Fleet(concurrency=2)
    try:
        assert await fleet.join(target_for(a)) is None  # nothing validated yet
        await fleet.join(target_for(b, reload_timeout=10.0))
        v1 = await validated(config_set("", 8080, "v1"))
        first = await fleet.deploy(v1)
        assert first.outcome is DeployOutcome.DEPLOYED, first.diagnostics
        assert (a.get(), b.get()) == ("v1", "v1")

        v2 = await validated(config_set("", 8080, "v2"))
        push = asyncio.create_task(fleet.deploy(v2))
        deadline = time.monotonic() + 10
        while b'"v2"' not in (b.base / "haproxy.cfg").read_bytes():
            assert time.monotonic() < deadline, "b never received the push"
            await asyncio.sleep(0.01)
        b.kill_api()
        result = await push
        assert result.outcome is DeployOutcome.FAILED
        assert isinstance(result.detail, FleetDetail)
        by_pod = {r.target: r for r in result.detail.members}
        assert by_pod[a.name].outcome is DeployOutcome.DEPLOYED
        assert by_pod[b.name].outcome is DeployOutcome.FAILED
        assert by_pod[b.name].diagnostics[0].rule_id == "E7013"
        assert (a.get(), b.get()) == ("v2", "v1")  # the last good config keeps serving on b
        status = {s.pod: s for s in fleet.status()}
        assert status[b.name].error and status[b.name].checksum is None
        assert status[a.name].checksum == v2.checksum and status[a.name].error is None

        b.start_api()
        retry = await fleet.deploy(v2)  # what the reconcile trigger's retry does
        assert retry.outcome is DeployOutcome.DEPLOYED, retry.diagnostics
        assert isinstance(retry.detail, FleetDetail)
        outcomes = {r.target: r.outcome for r in retry.detail.members}
        assert outcomes == {a.name: DeployOutcome.UNCHANGED, b.name: DeployOutcome.DEPLOYED}
        assert (a.get(), b.get()) == ("v2", "v2")
        assert retry.active_checksum == v2.checksum
        assert {s.error for s in fleet.status()} == {None}
    finally:
        await fleet.close()


async def test_pods_join_with_the_current_set_and_leave(fleet_pods: PodFactory) -> None:
    a, b = fleet_pods(), fleet_pods()
    fleet = Fleet()
    try:
        await fleet.join(target_for(a))
        v1 = await validated(config_set("", 8080, "current"))
        assert (await fleet.deploy(v1)).ok
        joined = await fleet.join(target_for(b))  # a pod became ready
        assert joined is not None and joined.outcome is DeployOutcome.DEPLOYED
        assert b.get() == "current"
        assert set(fleet.members) == {a.name, b.name}
        assert await fleet.leave(b.name) and not await fleet.leave(b.name)
        v2 = await validated(config_set("", 8080, "next"))
        result = await fleet.deploy(v2)
        assert isinstance(result.detail, FleetDetail)
        assert [r.target for r in result.detail.members] == [a.name]
        assert (a.get(), b.get()) == ("next", "current")

        # Drift on one pod: the fleet repairs it with the last validated set.
        assert await fleet.check_drift() is None
        (a.base / "maps").joinpath("stray.map").write_bytes(b"ignored\n")  # not ours: no drift
        hand = config_set("", 8080, "by hand").main
        assert hand is not None
        await second_writer(a, hand.content, reload=True)
        assert await eventually(a.get, "by hand") == "by hand"
        repaired = await fleet.check_drift()
        assert repaired is not None and repaired.drift == (f"{a.name}:haproxy.cfg",)
        assert repaired.diagnostics[0].rule_id == "W7007"
        assert a.get() == "next"
    finally:
        await fleet.close()
