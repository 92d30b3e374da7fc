"""Fixtures for the fleet tests: real dataplaneapi instances managing real HAProxy processes.

The dataplaneapi binary comes from hack/dataplaneapi/build.sh (cached outside the
repository; CI builds it before the tests). Without one the tests skip and say how to get
it; with ``HTC_REQUIRE_CLUSTER=1`` (CI) they fail instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack

import pytest

from controller.deploy.dataplane import DataplaneTarget
from controller.testbed.fixtures import unavailable
from controller.testbed.podnet import PodNetwork
from tests.fleet.dataplane_kit import (
    HAProxyPod,
    PodFactory,
    dataplaneapi_binary,
    target_for,
    why_no_dataplaneapi,
)


@pytest.fixture(scope="session")
def dataplaneapi_bin() -> str:
    path = dataplaneapi_binary()
    if path is None:
        unavailable(why_no_dataplaneapi())
    return path


@pytest.fixture
def haproxy_pods(haproxy_bin: str, dataplaneapi_bin: str) -> Iterator[PodFactory]:
    """Start HAProxy + dataplaneapi instances (on loopback unless a pod is given); all are
    stopped after the test."""
    with ExitStack() as stack:

        def make(**kw: object) -> HAProxyPod:
            return stack.enter_context(HAProxyPod(haproxy_bin, dataplaneapi_bin, **kw))  # type: ignore[arg-type]

        yield make


@pytest.fixture
def fleet_pods(
    haproxy_bin: str, dataplaneapi_bin: str, pod_network: PodNetwork
) -> Iterator[Callable[..., HAProxyPod]]:
    """HAProxy pods on the pod network: each its own network namespace and address, HAProxy
    on port 8080 and dataplaneapi on 5555 as in a cluster, so one configuration
    (``bind :8080``) serves every pod. Removed after the test."""
    with ExitStack() as stack:

        def make(**kw: object) -> HAProxyPod:
            pod = pod_network.add_pod()
            stack.callback(pod_network.remove_pod, pod)
            return stack.enter_context(
                HAProxyPod(haproxy_bin, dataplaneapi_bin, pod=pod, port=8080, **kw)  # type: ignore[arg-type]
            )

        yield make


@pytest.fixture
async def one(haproxy_pods: PodFactory) -> AsyncIterator[tuple[HAProxyPod, DataplaneTarget]]:
    pod = haproxy_pods()
    target = target_for(pod)
    try:
        yield pod, target
    finally:
        await target.close()
