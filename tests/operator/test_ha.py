"""Two ``htc run`` replicas share one Lease: both serve, only the leader writes status; after
``kill -9`` of the leader the other takes over within the lease duration plus one reconcile."""

from __future__ import annotations

import re
import signal
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from controller.testbed.cluster import Namespace
from controller.testbed.podnet import Pod
from tests.operator.operator_kit import (
    Run,
    backend_manifests,
    config_doc,
    eventually,
    free_port,
    ingress,
    start_echo,
    start_run,
)

pytestmark = pytest.mark.cluster

LEASE = ("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5")


def metric(run: Run, name: str, labels: str = "") -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{run.status}/metrics", timeout=3) as resp:
        text = resp.read().decode()
    match = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def writes(run: Run) -> float:
    return metric(run, "htc_status_writes_total", '{result="ok"}')


def test_one_leader_writes_and_the_other_takes_over(
    kube: Namespace, pod: Pod, tmp_path: Path
) -> None:
    start_echo(pod, "web-1")
    listen_a, listen_b = free_port(), free_port()
    kube.apply(yaml.safe_dump(config_doc(kube.name, listen_a)))
    kube.apply(backend_manifests(kube.name, "web", pod.ip))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    a = start_run(kube, "/usr/sbin/haproxy", tmp_path / "a", listen=listen_a,
                  extra=(*LEASE, "--identity", "replica-a"))  # fmt: skip
    a.wait_serving()
    eventually(lambda: metric(a, "htc_leader") == 1, "replica a to lead")
    b = start_run(kube, "/usr/sbin/haproxy", tmp_path / "b", listen=listen_b,
                  extra=(*LEASE, "--identity", "replica-b"))  # fmt: skip
    try:
        b.wait_serving()
        # both serve through their own HAProxy
        assert a.get("web.test")[0] == 200 and b.get("web.test")[0] == 200
        eventually(lambda: writes(a) >= 1, "the leader to write status")
        # a change: both deploy it, only the leader writes
        before = writes(a)
        kube.apply(ingress(kube.name, "two", "two.test", "web"))
        eventually(lambda: a.get("two.test")[0] == 200 and b.get("two.test")[0] == 200, "both")
        eventually(lambda: writes(a) > before, "the leader to write the new status")
        assert metric(b, "htc_leader") == 0
        assert writes(b) == 0

        killed = time.monotonic()
        a.stop(signal.SIGKILL)
        eventually(lambda: metric(b, "htc_leader") == 1, "replica b to take the Lease", 15)
        eventually(lambda: writes(b) >= 1, "the new leader to write status", 15)
        failover = time.monotonic() - killed
        print(f"failover: {failover:.2f} s")
        assert failover <= 4 + 3, f"failover took {failover:.1f} s"
        holder = kube.plane.kubectl(
            "get", "lease", "haproxy-template-controller", "-n", kube.name,
            "-o", "jsonpath={.spec.holderIdentity}",
        ).stdout  # fmt: skip
        assert holder == "replica-b"
        assert b.get("web.test")[0] == 200
    finally:
        a.stop()
        b.stop()
