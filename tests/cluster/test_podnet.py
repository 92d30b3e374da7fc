"""The test pod network: pods answer, nothing addressed into the CIDR leaves the machine, an
overlapping route is refused, and nothing it made outlives it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request

import pytest

from controller.testbed import podnet
from controller.testbed.fixtures import unavailable

pytestmark = pytest.mark.cluster


def echo_in(pod: podnet.Pod, name: str, port: int = 8080) -> None:
    proc = pod.start(
        [sys.executable, "-m", "controller.testbed.echo", "--name", name, "--bind", pod.ip,
         "--port", str(port)],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    assert b"listening" in proc.stdout.readline()


def fetch(url: str, timeout: float = 3.0) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return dict(json.loads(resp.read()))


def test_a_pod_answers_from_its_own_address(pod: podnet.Pod) -> None:
    echo_in(pod, "web-1")
    got = fetch(f"http://{pod.ip}:8080/hello")
    assert got["pod"] == "web-1" and got["path"] == "/hello"


def test_pods_reach_each_other(pod_network: podnet.PodNetwork, pod: podnet.Pod) -> None:
    echo_in(pod, "server")
    other = pod_network.add_pod()
    try:
        url = f"http://{pod.ip}:8080/"
        code = "import json,sys,urllib.request;print(json.load(urllib.request.urlopen(sys.argv[1],timeout=3))['pod'])"
        out = subprocess.run(
            other.command([sys.executable, "-c", code, url]), capture_output=True, text=True
        )
        assert out.stdout.strip() == "server", out.stderr
    finally:
        pod_network.remove_pod(other)


def test_an_address_no_pod_holds_is_unreachable_here(pod_network: podnet.PodNetwork) -> None:
    """The route lookup itself fails: the packet is never sent anywhere."""
    unused = str(pod_network.cidr.network_address + 4000)
    route = subprocess.run(["ip", "route", "get", unused], capture_output=True, text=True)
    assert route.returncode != 0 and "No route to host" in route.stderr
    with socket.socket() as s, pytest.raises(OSError) as refused:
        s.settimeout(3)
        s.connect((unused, 80))
    assert refused.value.errno in (113, 101)  # EHOSTUNREACH / ENETUNREACH


def test_the_whole_cidr_has_an_unreachable_route(pod_network: podnet.PodNetwork) -> None:
    routes = json.loads(subprocess.run(["ip", "-j", "route"], capture_output=True).stdout)
    ours = [r for r in routes if r.get("dst") == str(pod_network.cidr)]
    assert ours and ours[0]["type"] == "unreachable"


def test_overlapping_route_is_refused() -> None:
    reason = podnet.can_run()
    if reason:
        unavailable(reason)
    subprocess.run(["ip", "link", "add", "ovltest0", "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "link", "set", "ovltest0", "up"], check=True)
        subprocess.run(["ip", "route", "add", "10.250.3.0/24", "dev", "ovltest0"], check=True)
        with pytest.raises(podnet.PodNetError, match="overlaps the pod CIDR"):
            podnet.PodNetwork("10.250.0.0/16").check_overlap()
    finally:
        subprocess.run(["ip", "link", "del", "ovltest0"], check=False)


def test_leftovers_of_a_killed_run_are_removed_and_down_removes_all(
    pod_network: podnet.PodNetwork,
) -> None:
    """Takes the session's network down (no pod outlives its test) and brings it back."""
    pod_network.down()
    try:
        subprocess.run(["ip", "netns", "add", f"{podnet.NETNS_PREFIX}stale"], check=True)
        with podnet.PodNetwork("10.251.0.0/16") as net:
            names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            assert f"{podnet.NETNS_PREFIX}stale" not in names
            pod = net.add_pod()
            echo_in(pod, "x")
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        links = subprocess.run(["ip", "link"], capture_output=True, text=True).stdout
        routes = subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
        assert podnet.NETNS_PREFIX not in names
        assert podnet.BRIDGE not in links and podnet.VETH_PREFIX not in links
        assert "10.251." not in routes
        assert not podnet.LOCK.exists()
    finally:
        pod_network.up()
