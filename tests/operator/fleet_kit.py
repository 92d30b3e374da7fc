"""What the fleet-topology tests of ``htc run`` share: HAProxy pods (HAProxy + dataplaneapi in
pods of the pod network, tests/fleet's kit), their Pod objects in a namespace of their own,
made Ready with the pod's address as a kubelet would, and ``htc run --deploy dataplane``.

The fixtures are imported by the test modules that use them.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from controller.testbed.cluster import Namespace, namespace
from controller.testbed.fixtures import unavailable
from controller.testbed.podnet import PodNetwork
from tests.fleet.dataplane_kit import PASSWORD, USER, HAProxyPod, dataplaneapi_binary
from tests.operator.operator_kit import (
    Run,
    config_doc,
    config_status,
    free_port,
    start_run,
)

__all__ = ["PASSWORD", "USER", "HAProxyPod"]

SELECTOR = "app.kubernetes.io/name=haproxy"


@pytest.fixture(scope="module")
def dataplaneapi() -> str:
    path = dataplaneapi_binary()
    if path is None:
        unavailable("no dataplaneapi binary: run `make dataplaneapi-build` (hack/dataplaneapi)")
    return str(path)


HAProxyPods = Callable[[], HAProxyPod]


@pytest.fixture
def haproxy_pods(
    haproxy_bin: str, dataplaneapi: str, pod_network: PodNetwork
) -> Iterator[HAProxyPods]:
    """HAProxy + dataplaneapi in pods of the pod network, HAProxy's port 8080 as the config
    binds it; removed after the test."""
    with ExitStack() as stack:

        def make() -> HAProxyPod:
            pod = pod_network.add_pod()
            stack.callback(pod_network.remove_pod, pod)
            return stack.enter_context(HAProxyPod(haproxy_bin, dataplaneapi, pod=pod, port=8080))

        yield make


@pytest.fixture
def haproxy_ns(kube: Namespace) -> Iterator[Namespace]:
    """The HAProxy pods' namespace (not the config's): their Pod objects and the Data Plane
    API credentials."""
    with namespace(kube.plane, "haproxy") as ns:
        ns.apply(
            f"""
apiVersion: v1
kind: Secret
metadata: {{name: dataplane-credentials, namespace: {ns.name}}}
stringData: {{username: {USER}, password: {PASSWORD}}}
"""
        )
        yield ns


def pod_object(kube: Namespace, name: str, ip: str | None, *, labels: str = SELECTOR) -> None:
    """A Pod object for a pod of the pod network: created, then (with an ``ip``) its status
    patched to Ready with that address, as a kubelet would."""
    key, _, value = labels.partition("=")
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={key: value}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="haproxy", image="haproxy")]),
    )
    client.CoreV1Api(kube.api).create_namespaced_pod(kube.name, pod)
    if ip is not None:
        set_ready(kube, name, ip, True)


def set_ready(kube: Namespace, name: str, ip: str, ready: bool) -> None:
    status = "True" if ready else "False"
    client.CoreV1Api(kube.api).patch_namespaced_pod_status(
        name,
        kube.name,
        {
            "status": {
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "conditions": [
                    {"type": "Ready", "status": status},
                    {"type": "ContainersReady", "status": status},
                ],
            }
        },
    )


def answer(pod: HAProxyPod, host: str) -> str | None:
    """The backend pod that answered a request through this HAProxy pod, or None."""
    req = urllib.request.Request(f"http://{pod.addr}:8080/", headers={"Host": host})
    try:
        with urllib.request.urlopen(req, timeout=3) as resp:
            return str(json.loads(resp.read())["pod"])
    except (OSError, urllib.error.URLError, ValueError, KeyError):
        return None


def targets(kube: Namespace) -> dict[str, dict[str, Any]]:
    return {t["pod"]: t for t in config_status(kube).get("targets", [])}


def metric(run: Run, name: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{run.status}/metrics", timeout=3) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line.rpartition(" ")
            out[labels[len(name) :]] = float(value)
    return out


def fleet_config(kube: Namespace) -> None:
    doc = config_doc(kube.name, 0)
    doc["spec"]["extraContext"]["listen"] = ":8080"  # every HAProxy pod, on its own address
    kube.apply(yaml.safe_dump(doc))


def start_fleet_run(
    kube: Namespace,
    haproxy_ns: Namespace,
    haproxy: str,
    work: Path,
    *extra: str,
    kubeconfig: Path | None = None,
) -> Run:
    return start_run(
        kube,
        haproxy,
        work,
        listen=free_port(),
        kubeconfig=kubeconfig,
        extra=(
            "--listen", ":8080",
            "--deploy", "dataplane",
            "--haproxy-selector", SELECTOR,
            "--haproxy-namespace", haproxy_ns.name,
            "--lease-name", f"fleet-{kube.name}",
            *extra,
        ),
    )  # fmt: skip
