"""The control plane itself: version, identities, RBAC with ServiceAccount tokens, the deploy/
manifests, the quickstart's manifests, and its own start and stop."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from kubernetes import client

from controller.testbed.cluster import READY_PREFIX, ControlPlane, Namespace

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
HACK_GO_MOD = REPO / "hack" / "cluster" / "go.mod"


def pinned_version() -> str:
    for line in HACK_GO_MOD.read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["k8s.io/kubernetes"] or parts[:2] == ["require", "k8s.io/kubernetes"]:
            return parts[-1]
    raise AssertionError("go.mod pins no k8s.io/kubernetes")


def test_server_and_kubectl_report_the_pinned_release(control_plane: ControlPlane) -> None:
    versions = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert versions["serverVersion"]["gitVersion"] == pinned_version()
    assert versions["clientVersion"]["gitVersion"] == pinned_version()


def test_apis_the_project_uses_are_served(control_plane: ControlPlane) -> None:
    served = set(control_plane.kubectl("api-versions").stdout.split())
    for group_version in (
        "events.k8s.io/v1",
        "coordination.k8s.io/v1",
        "discovery.k8s.io/v1",
        "networking.k8s.io/v1",
        "admissionregistration.k8s.io/v1",
        "apiextensions.k8s.io/v1",
        "haproxy-template.dev/v1alpha1",
    ):
        assert group_version in served


def test_a_service_account_token_is_refused_until_rbac_grants_it(kube: Namespace) -> None:
    token = kube.mint_token("reader")
    api = kube.plane.api_client(token=token)
    core = client.CoreV1Api(api)
    try:
        with pytest.raises(client.ApiException) as refused:
            core.list_namespaced_config_map(kube.name)
        assert refused.value.status == 403
        assert f"system:serviceaccount:{kube.name}:reader" in str(refused.value.body)
        kube.apply(
            f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: read-configmaps}}
rules: [{{apiGroups: [""], resources: [configmaps], verbs: [list]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-configmaps}}
subjects: [{{kind: ServiceAccount, name: reader, namespace: {kube.name}}}]
"""
        )
        deadline = time.monotonic() + 10
        while True:  # RBAC reaches the authorizer through an informer: allow it a moment
            try:
                core.list_namespaced_config_map(kube.name)
                break
            except client.ApiException as exc:
                assert exc.status == 403 and time.monotonic() < deadline
                time.sleep(0.2)
        with pytest.raises(client.ApiException) as still:
            core.list_namespaced_secret(kube.name)
        assert still.value.status == 403
    finally:
        api.close()


def test_namespaces_get_a_default_service_account(kube: Namespace) -> None:
    """The controller manager runs: without it, Pods would be refused by ServiceAccount admission."""
    deadline = time.monotonic() + 20
    while "default" not in kube.plane.kubectl("get", "sa", "-n", kube.name, "-o", "name").stdout:
        assert time.monotonic() < deadline, "no default ServiceAccount"
        time.sleep(0.2)
    kube.apply(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {containers: [{name: c, image: example.invalid/none}]}\n"
    )


def test_deploy_kustomization_is_accepted_by_server_dry_run(control_plane: ControlPlane) -> None:
    # A server-side dry run creates nothing, so the namespace the kustomization's objects live
    # in must exist first (a real `kubectl apply -k` creates it in the same call).
    control_plane.kubectl("apply", "-f", str(REPO / "deploy" / "namespace.yaml"))
    out = control_plane.kubectl("apply", "--dry-run=server", "-k", str(REPO / "deploy")).stdout
    assert "serviceaccount/" in out and "(server dry run)" in out


def test_quickstart_manifests_apply(control_plane: ControlPlane) -> None:
    quickstart = REPO / "examples" / "quickstart"
    out = control_plane.kubectl(
        "apply", "-f", str(quickstart / "config.yaml"), "-f", str(quickstart / "resources")
    ).stdout
    assert "haproxytemplateconfig.haproxy-template.dev/quickstart" in out
    slices = control_plane.kubectl("get", "endpointslices", "-n", "default", "-o", "json").stdout
    addresses = {
        a for s in json.loads(slices)["items"] for e in s["endpoints"] for a in e["addresses"]
    }
    assert addresses and not any(a.startswith("127.") for a in addresses)


@pytest.mark.slow
def test_started_and_stopped_like_make_cluster(control_plane: ControlPlane, tmp_path: Path) -> None:
    """A second instance: ready within 15 s, one export line, and a double SIGTERM still
    removes its data (make forwards a group signal to the recipe too)."""
    data = tmp_path / "plane"
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(control_plane.binary), "-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        ready = time.monotonic() - started
        assert line == f"{READY_PREFIX}{data / 'kubeconfig'}\n"
        assert ready <= 15, f"ready after {ready:.1f} s"
        assert (data / "etcd").is_dir()
    finally:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0
    assert rest == ""  # exactly one line on stdout
    assert not data.exists()
