"""``htc run --deploy dataplane`` end to end: the fleet topology.

Everything is real: the control plane, ``htc run`` as a user starts it, and HAProxy pods of
the test pod network, each a real HAProxy managed by a real dataplaneapi (tests/fleet's
kit). Their Pod objects live in the real API server; with no kubelet, the test patches their
status to Ready with the pod's address, as a kubelet would. A backend pod answers behind
them. Traffic goes only to addresses of those pods.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes import client

from controller.testbed.cluster import Namespace
from controller.testbed.podnet import PodNetwork
from tests.operator.fleet_kit import (
    HAProxyPods,
    answer,
    dataplaneapi,
    fleet_config,
    haproxy_ns,
    haproxy_pods,
    metric,
    pod_object,
    set_ready,
    start_fleet_run,
    targets,
)
from tests.operator.operator_kit import (
    backend_manifests,
    config_status,
    eventually,
    ingress,
    start_echo,
)

pytestmark = pytest.mark.cluster
__all__ = ["dataplaneapi", "haproxy_ns", "haproxy_pods"]  # fixtures


@pytest.mark.parametrize("haproxy_bin", ["2.8"], indirect=True)
def test_htc_run_deploys_to_the_haproxy_pods(
    kube: Namespace,
    haproxy_ns: Namespace,
    haproxy_bin: str,
    haproxy_pods: HAProxyPods,
    pod_network: PodNetwork,
    tmp_path: Path,
) -> None:
    web, api = pod_network.add_pod(), pod_network.add_pod()
    try:
        start_echo(web, "web-1")
        start_echo(api, "api-1")
        a, b = haproxy_pods(), haproxy_pods()
        fleet_config(kube)
        kube.apply(backend_manifests(kube.name, "web", web.ip))
        kube.apply(backend_manifests(kube.name, "api", api.ip))
        kube.apply(ingress(kube.name, "web", "web.test", "web"))
        pod_object(haproxy_ns, "haproxy-0", a.addr)
        pod_object(haproxy_ns, "haproxy-1", b.addr)
        # A pod the selector does not pick, and one that is not ready: neither is deployed to.
        pod_object(haproxy_ns, "other-0", "10.244.0.250", labels="app=other")
        pod_object(haproxy_ns, "haproxy-pending", None)

        run = start_fleet_run(kube, haproxy_ns, haproxy_bin, tmp_path / "run")
        try:
            run.wait_serving()
            # A request through each HAProxy pod reaches the backend pod.
            for pod in (a, b):
                eventually(lambda p=pod: answer(p, "web.test") == "web-1", f"{pod.addr} serving")  # type: ignore[misc]
            assert not (tmp_path / "run" / "master.sock").exists()  # no local HAProxy

            # status.targets: one line per pod, each on the validated set.
            def both_listed() -> bool:
                t = targets(kube)
                return set(t) == {"haproxy-0", "haproxy-1"} and all(
                    x.get("checksum") for x in t.values()
                )

            eventually(both_listed, "status.targets with both pods")
            status = config_status(kube)
            checksum = status["lastValidated"]["checksum"]
            for line in status["targets"]:
                assert line["checksum"] == checksum and line["lastDeployed"]
                assert "error" not in line
            assert metric(run, "htc_fleet_pods") == {
                '{state="found"}': 3.0,
                '{state="ready"}': 2.0,
                '{state="joined"}': 2.0,
            }

            # A pod removed is dropped: gone from status.targets, and the next change does not
            # reach it (its processes still run; only its Pod object went away).
            client.CoreV1Api(haproxy_ns.api).delete_namespaced_pod(
                "haproxy-1", haproxy_ns.name, grace_period_seconds=0
            )
            eventually(lambda: set(targets(kube)) == {"haproxy-0"}, "haproxy-1 dropped")
            kube.apply(ingress(kube.name, "api", "api.test", "api"))
            eventually(lambda: answer(a, "api.test") == "api-1", "the change on haproxy-0")
            time.sleep(1.0)
            assert answer(b, "api.test") is None  # haproxy-1 kept the set before the change
            assert answer(b, "web.test") == "web-1"

            # A new pod gets the current set at once, without another change.
            c = haproxy_pods()
            assert answer(c, "api.test") is None  # its boot configuration
            pod_object(haproxy_ns, "haproxy-2", None)
            t0 = time.monotonic()
            set_ready(haproxy_ns, "haproxy-2", c.addr, True)
            while answer(c, "api.test") != "api-1":  # polled every 10 ms: this is the figure
                assert time.monotonic() - t0 < 20, "haproxy-2 never served the current set"
                time.sleep(0.01)
            joined_s = time.monotonic() - t0
            print(f"\nReady -> serving the current set: {joined_s * 1000:.0f} ms")
            assert answer(c, "web.test") == "web-1"
            current = config_status(kube)["lastValidated"]["checksum"]
            eventually(
                lambda: (
                    {k: v.get("checksum") for k, v in targets(kube).items()}
                    == {"haproxy-0": current, "haproxy-2": current}
                ),
                "status.targets with haproxy-0 and haproxy-2 on the current set",
            )

            # A pod that stops being ready leaves too.
            set_ready(haproxy_ns, "haproxy-0", a.addr, False)
            eventually(lambda: set(targets(kube)) == {"haproxy-2"}, "haproxy-0 dropped")
            # ... and joins again when it is ready again.
            set_ready(haproxy_ns, "haproxy-0", a.addr, True)
            eventually(lambda: set(targets(kube)) == {"haproxy-0", "haproxy-2"}, "rejoined")
            assert run.readyz() == 200
        except AssertionError as exc:
            logs = "".join(run.errors[-40:])
            raise AssertionError(f"{exc}\n--- htc run's last log lines:\n{logs}") from None
        finally:
            run.stop()
        assert run.proc.returncode == 0, "".join(run.errors[-30:])
    finally:
        pod_network.remove_pod(web)
        pod_network.remove_pod(api)
