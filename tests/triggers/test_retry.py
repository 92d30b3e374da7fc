"""A valid set that a target failed to deploy is tried again, with a growing back-off."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from controller.publish import Event, EventKind
from controller.resources import Store
from controller.testing import ManualClock
from tests.triggers.trigger_kit import FlakyTarget, MakeTrigger, ingress, spec

FAST = {"debounce": "10ms", "min_interval": "10ms"}


async def until(check: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_a_failed_deploy_is_retried_until_it_succeeds(
    make_trigger: MakeTrigger, store: Store, events: list[Event]
) -> None:
    store.apply("ingresses", ingress("a"))
    clock = ManualClock()
    target = FlakyTarget(failures=2, clock=clock)
    trig, _ = await make_trigger(
        spec(**FAST), target=target, retry_initial=0.1, retry_max=0.15, clock=clock
    )
    assert target.deployed == [] and trig.serving is None
    await clock.advance(0.099)
    assert len(target.attempts) == 1  # not before the back-off
    await clock.advance(0.001)
    await until(lambda: len(target.attempts) == 2)
    await trig.wait_idle(timeout=5)
    await clock.advance(0.149)
    assert len(target.attempts) == 2
    await clock.advance(0.001)
    await until(lambda: bool(target.deployed))
    assert target.deployed == ["v1: a=0"]
    assert len(target.attempts) == 3
    first, second = (b - a for a, b in zip(target.attempts, target.attempts[1:], strict=False))
    assert (first, second) == pytest.approx((0.1, 0.15))  # doubled, capped
    failed = [e for e in events if e.kind is EventKind.DEPLOY_FAILED]
    assert [e.retry_in for e in failed] == [0.1, 0.15]
    assert [e.trigger for e in failed] == ["startup", "retry"]
    assert all(e.serving is None for e in failed)  # nothing was ever confirmed
    assert trig.retry_attempts == 0 and trig.serving == target.checksum
    assert trig.metrics.sample("htc_reconcile_runs_total", {"trigger": "retry"}) == 2
    await clock.advance(0.3)  # two back-offs' worth, well before a resync
    assert len(target.attempts) == 3  # success ends the retries


async def test_no_retry_for_a_state_that_does_not_validate(
    make_trigger: MakeTrigger, store: Store
) -> None:
    clock = ManualClock()
    target = FlakyTarget(failures=1, clock=clock)
    trig, _ = await make_trigger(spec(**FAST), target=target, retry_initial=0.3, clock=clock)
    store.apply("ingresses", ingress("evil", bad="yes"))  # the state no longer validates
    await clock.advance(0.01)
    await trig.wait_idle(timeout=5)
    await clock.advance(0.5)
    await trig.wait_idle(timeout=5)
    assert len(target.attempts) == 1  # nothing valid to retry
    store.apply("ingresses", ingress("evil"))
    await clock.advance(0.01)
    await until(lambda: bool(target.deployed))
    assert target.last == "v1: evil=0"
