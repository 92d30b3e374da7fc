"""``htc run`` with a ServiceAccount token that only ``deploy/rbac.yaml`` authorizes, RBAC
enforced by the real API server; then the rules compared with the calls it really made (the
control plane's audit log records every request with its user, verb and resource)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.testbed.cluster import Namespace
from controller.testbed.podnet import Pod
from tests.operator.fleet_kit import (
    dataplaneapi,
    fleet_config,
    haproxy_ns,
    haproxy_pods,
    pod_object,
    start_fleet_run,
    targets,
)
from tests.operator.operator_kit import (
    backend_manifests,
    condition,
    config_doc,
    eventually,
    free_port,
    ingress,
    start_echo,
    start_run,
)

pytestmark = pytest.mark.cluster
__all__ = ["dataplaneapi", "haproxy_ns", "haproxy_pods"]  # fixtures of the fleet test

REPO = Path(__file__).resolve().parents[2]
SA_NAMESPACE = "haproxy-template-controller"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:haproxy-template-controller"


def token_kubeconfig(kube: Namespace, path: Path) -> None:
    """The admin kubeconfig's server and CA, with the controller ServiceAccount's token."""
    from kubernetes import client

    core = client.CoreV1Api(kube.api)
    spec = client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    made = core.create_namespaced_service_account_token(
        "haproxy-template-controller", SA_NAMESPACE, client.AuthenticationV1TokenRequest(spec=spec)
    )
    admin = yaml.safe_load(Path(str(kube.plane.kubeconfig)).read_text())
    assert made.status is not None
    admin["users"] = [{"name": "sa", "user": {"token": made.status.token}}]
    admin["contexts"][0]["context"]["user"] = "sa"
    path.write_text(yaml.safe_dump(admin))


FLEET_ROLE = "haproxy-template-controller-fleet"
"""Granted in the HAProxy namespace, used by ``--deploy dataplane`` only."""


def apply_prerequisites(kube: Namespace) -> None:
    """The namespace, CRD, ServiceAccount and RBAC of deploy/, not its webhook registration:
    that would send every later test's writes to a controller that does not run here."""
    deploy = REPO / "deploy"
    files = [deploy / "namespace.yaml", deploy / "serviceaccount.yaml", deploy / "rbac.yaml"]
    args = [a for f in files for a in ("-f", str(f))]
    kube.plane.kubectl(
        "apply", "--server-side", "--force-conflicts", *args, "-f", str(deploy / "crds")
    )


def rbac_rules(*, fleet: bool = True) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) the shipped RBAC grants the controller."""
    granted = set()
    for doc in yaml.safe_load_all((REPO / "deploy" / "rbac.yaml").read_text()):
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        if not fleet and doc["metadata"]["name"] == FLEET_ROLE:
            continue
        for rule in doc.get("rules") or []:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        granted.add((group, resource, verb))
    return granted


def audited_calls(kube: Namespace) -> list[dict[str, Any]]:
    log = Path(str(kube.plane.kubeconfig)).parent / "audit.log"
    calls = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("user", {}).get("username") != SA_USER:
            continue
        ref = entry.get("objectRef") or {}
        if not ref.get("resource"):
            continue  # discovery (/api, /apis): open to every authenticated user
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        calls.append(
            {
                "call": (ref.get("apiGroup", ""), resource, entry["verb"]),
                "code": entry.get("responseStatus", {}).get("code"),
            }
        )
    return calls


def test_htc_run_works_with_only_the_shipped_rbac(
    kube: Namespace, pod: Pod, tmp_path: Path
) -> None:
    apply_prerequisites(kube)
    sa_config = tmp_path / "sa.kubeconfig"
    token_kubeconfig(kube, sa_config)

    start_echo(pod, "web-1")
    listen = free_port()
    kube.apply(yaml.safe_dump(config_doc(kube.name, listen)))
    kube.apply(backend_manifests(kube.name, "web", pod.ip))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    run = start_run(
        kube,
        "/usr/sbin/haproxy",
        tmp_path / "run",
        listen=listen,
        kubeconfig=sa_config,
        extra=(
            "--lease-namespace",
            SA_NAMESPACE,
            "--lease-name",
            f"rbac-{kube.name}",
            "--publish-address",
            "10.244.0.1",
        ),
    )
    try:
        run.wait_serving()
        assert run.get("web.test")[0] == 200
        # status (patch) and Events (create) went through: the leader's writes are allowed
        eventually(lambda: condition(kube, "Deployed").get("status") == "True", "status written")
        eventually(
            lambda: any(c["call"] == ("events.k8s.io", "events", "create") and c["code"] == 201
                        for c in audited_calls(kube)),
            "an Event posted",
        )  # fmt: skip
        lease = kube.plane.kubectl(
            "get", "lease", f"rbac-{kube.name}", "-n", SA_NAMESPACE, "-o", "json"
        ).stdout
        assert json.loads(lease)["spec"]["holderIdentity"]
        # the Ingress status write is allowed
        eventually(
            lambda: any(c["call"] == ("networking.k8s.io", "ingresses/status", "patch")
                        and c["code"] == 200 for c in audited_calls(kube)),
            "the Ingress status written",
        )  # fmt: skip
        # renewals (update) succeed too
        eventually(
            lambda: any(c["call"] == ("coordination.k8s.io", "leases", "update")
                        and c["code"] == 200 for c in audited_calls(kube)),
            "a renewal of the Lease",
        )  # fmt: skip
    finally:
        run.stop()

    calls = audited_calls(kube)
    refused = sorted({c["call"] for c in calls if c["code"] == 403})
    assert not refused, f"htc run was refused: {refused}"
    made = {c["call"] for c in calls}
    granted = rbac_rules(fleet=False)
    # Read grants for kinds this config does not watch are for other configs: not checked.
    watched = {
        w["kind"].lower() + "s"
        for w in config_doc(kube.name, 0)["spec"]["watchedResources"].values()
    }
    unused = sorted(g for g in granted - made if g[2] not in ("list", "watch") or g[1] in watched)
    assert not unused, f"rbac.yaml grants what htc run never uses: {unused}"
    assert made <= granted, f"calls outside the rules: {sorted(made - granted)}"


@pytest.mark.parametrize("haproxy_bin", ["2.8"], indirect=True)
def test_htc_run_dataplane_works_with_only_the_shipped_rbac(
    kube: Namespace,
    haproxy_ns: Namespace,
    haproxy_bin: str,
    haproxy_pods: Callable[[], Any],
    tmp_path: Path,
) -> None:
    """--deploy dataplane: the fleet's grants (pods list/watch and the credentials Secret in
    the HAProxy namespace), bound there as deploy/rbac.yaml says, are enough and all used."""
    apply_prerequisites(kube)
    haproxy_ns.apply(
        f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {FLEET_ROLE}, namespace: {haproxy_ns.name}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {FLEET_ROLE}}}
subjects: [{{kind: ServiceAccount, name: haproxy-template-controller, namespace: {SA_NAMESPACE}}}]
"""
    )
    sa_config = tmp_path / "sa.kubeconfig"
    token_kubeconfig(kube, sa_config)
    fleet_config(kube)
    pod = haproxy_pods()
    pod_object(haproxy_ns, "haproxy-0", pod.addr)
    run = start_fleet_run(
        kube,
        haproxy_ns,
        haproxy_bin,
        tmp_path / "run",
        "--lease-namespace",
        SA_NAMESPACE,
        kubeconfig=sa_config,
    )
    try:
        run.wait_serving()
        eventually(
            lambda: bool(targets(kube).get("haproxy-0", {}).get("checksum")),
            "a deploy to haproxy-0 in status.targets",
        )
    finally:
        run.stop()

    calls = audited_calls(kube)
    refused = sorted({c["call"] for c in calls if c["code"] == 403})
    assert not refused, f"htc run --deploy dataplane was refused: {refused}"
    made = {c["call"] for c in calls}
    fleet = {("", "pods", "list"), ("", "pods", "watch"), ("", "secrets", "get")}
    assert fleet <= made, f"the fleet's grants not used: {sorted(fleet - made)}"
    granted = rbac_rules()
    assert made <= granted, f"calls outside the rules: {sorted(made - granted)}"
