"""pytest fixtures for the test bed (``pytest_plugins = ["controller.testbed.fixtures"]``).

- ``control_plane`` (session): one real control plane for the whole run, our CRD applied.
- ``kube``: a fresh namespace per test, with the admin client and a token minter.
- ``pod_network`` (session): the bridge and its unreachable route; tests add pods to it.

A test that needs one of them skips only when this machine cannot provide it (no Go toolchain;
not root) and says why. With ``HTC_REQUIRE_CLUSTER=1`` (CI sets it) the same condition fails
the test instead: CI must never skip them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NoReturn

import pytest

from controller.testbed import cluster, podnet

REQUIRE_ENV = "HTC_REQUIRE_CLUSTER"


def unavailable(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1: these tests must run here)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[cluster.ControlPlane]:
    reason = cluster.can_build()
    if reason:
        unavailable(reason)
    with cluster.ControlPlane(cluster.build()) as plane:
        yield plane


@pytest.fixture
def kube(control_plane: cluster.ControlPlane) -> Iterator[cluster.Namespace]:
    with cluster.namespace(control_plane) as ns:
        yield ns


@pytest.fixture(scope="session")
def pod_network() -> Iterator[podnet.PodNetwork]:
    reason = podnet.can_run()
    if reason:
        unavailable(reason)
    with podnet.PodNetwork() as net:
        yield net


@pytest.fixture
def pod(pod_network: podnet.PodNetwork) -> Iterator[podnet.Pod]:
    """One pod for this test, removed (processes, link, route) after it, failed or not."""
    made = pod_network.add_pod()
    try:
        yield made
    finally:
        pod_network.remove_pod(made)
