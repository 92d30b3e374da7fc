"""Fleet bookkeeping that needs no HAProxy: the concurrency bound, a raising target, status.

The targets here are fakes on purpose, and only here: what is measured is how many deploys
the fleet lets run at once, which needs targets that hold still on command; a real pod
finishes when it finishes. Everything a real target does is covered in test_fleet.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from controller.deploy.fleet import Fleet, FleetDetail
from controller.deploy.target import DeployOutcome, DeployResult
from controller.validation import ValidatedFileSet
from tests.fleet.fleet_helpers import config_set, validated


@dataclass
class Gate:
    running: int = 0
    peak: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class HeldTarget:
    name: str
    gate: Gate
    fail: bool = False

    async def deploy(self, validated: ValidatedFileSet) -> DeployResult:
        self.gate.running += 1
        self.gate.peak = max(self.gate.peak, self.gate.running)
        try:
            await self.gate.release.wait()
        finally:
            self.gate.running -= 1
        if self.fail:
            raise RuntimeError("bug in a target")
        return DeployResult(
            self.name, DeployOutcome.DEPLOYED, validated.checksum, validated.checksum, True
        )

    async def check_drift(self) -> DeployResult | None:
        return None


async def test_at_most_concurrency_deploys_run_at_once() -> None:
    gate = Gate()
    fleet = Fleet(concurrency=2)
    for n in range(5):
        await fleet.join(HeldTarget(f"pod-{n}", gate, fail=n == 4))
    v = await validated(config_set("127.0.0.1", 1, "x"))
    task = asyncio.create_task(fleet.deploy(v))
    for _ in range(20):
        await asyncio.sleep(0)
    assert gate.running == 2
    gate.release.set()
    result = await task
    assert gate.peak == 2
    assert result.outcome is DeployOutcome.FAILED and result.active_checksum is None
    assert isinstance(result.detail, FleetDetail)
    outcomes = [r.outcome for r in result.detail.members]
    assert outcomes == [DeployOutcome.DEPLOYED] * 4 + [DeployOutcome.FAILED]
    status = {s.pod: s.to_dict() for s in fleet.status()}
    assert status["pod-4"]["error"] == "deploy raised RuntimeError('bug in a target')"
    assert status["pod-0"]["checksum"] == v.checksum
    assert str(status["pod-0"]["lastDeployed"]).endswith("Z")


async def test_an_empty_fleet_keeps_the_set_for_the_first_pod() -> None:
    fleet = Fleet()
    v = await validated(config_set("127.0.0.1", 1, "x"))
    result = await fleet.deploy(v)
    assert result.outcome is DeployOutcome.UNCHANGED and result.active_checksum is None
    assert fleet.last is v
    gate = Gate()
    gate.release.set()
    joined = await fleet.join(HeldTarget("first", gate))
    assert joined is not None and joined.active_checksum == v.checksum
