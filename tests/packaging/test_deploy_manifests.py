"""deploy/ (kustomize): what the built manifests promise, checked against the real parts.

The kustomization is built by the pinned release's kubectl and sent to the real API server
(server-side dry run: nothing is created, so no webhook is registered for the other tests);
the Deployment's pod passes the API server's own `restricted` Pod Security admission; its
arguments parse with `htc run`'s real command line; the webhook is the generator's output.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from controller.cli.run import command as run_command
from controller.testbed.cluster import ControlPlane, Namespace
from tests.packaging.manifests import REPO, deploy_webhook, main

DEPLOY = REPO / "deploy"
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def built(control_plane: ControlPlane) -> list[dict[str, Any]]:
    out = control_plane.kubectl("kustomize", str(DEPLOY)).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def containers(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield from one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]


def test_webhook_yaml_is_the_generators_output() -> None:
    assert main([]) == 0, "run: python -m tests.packaging.manifests --write"
    on_disk = yaml.safe_load((DEPLOY / "webhook.yaml").read_text())
    assert on_disk == deploy_webhook()
    client = on_disk["webhooks"][0]["clientConfig"]
    assert "url" not in client and client["service"]["path"] == "/validate"


def test_server_accepts_every_object_in_a_dry_run(
    control_plane: ControlPlane, built: list[dict[str, Any]]
) -> None:
    control_plane.kubectl("apply", "-f", str(DEPLOY / "namespace.yaml"))
    out = control_plane.kubectl("apply", "--dry-run=server", "-k", str(DEPLOY)).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == len(built), out
    assert all(line.endswith("(server dry run)") for line in lines), out
    for kind in (
        "deployment.apps/haproxy-template-controller",
        "service/haproxy-template-controller-webhook",
        "service/haproxy-template-controller-metrics",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/haproxy-template-controller",
        "networkpolicy.networking.k8s.io/haproxy-template-controller",
        "poddisruptionbudget.policy/haproxy-template-controller",
    ):
        assert f"{kind} " in out, kind


def test_pod_passes_restricted_pod_security(
    control_plane: ControlPlane, kube: Namespace, built: list[dict[str, Any]]
) -> None:
    control_plane.kubectl(
        "label", "namespace", kube.name, "pod-security.kubernetes.io/enforce=restricted"
    )
    control_plane.kubectl(
        "create", "serviceaccount", "-n", kube.name, "haproxy-template-controller"
    )
    template = copy.deepcopy(one(built, "Deployment")["spec"]["template"])
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "htc", **template["metadata"]},
    }
    pod["spec"] = template["spec"]
    proc = control_plane.kubectl(
        "apply", "--dry-run=server", "-n", kube.name, "-f", "-", input=yaml.safe_dump(pod)
    )
    assert "pod/htc created (server dry run)" in proc.stdout, proc.stdout + proc.stderr
    # The check can fail: the same pod as root is refused by the same admission.
    pod["spec"]["securityContext"] = {"runAsNonRoot": False}
    refused = control_plane.kubectl(
        "apply", "--dry-run=server", "-n", kube.name, "-f", "-", input=yaml.safe_dump(pod),
        check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and 'violates PodSecurity "restricted' in refused.stderr


def test_deployment_shape(built: list[dict[str, Any]]) -> None:
    deployment = one(built, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["affinity"]["podAntiAffinity"]
    (container,) = containers(built)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "status"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "status"}
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/tmp" in mounts, "the only writable place with a read-only root filesystem"


def test_arguments_parse_with_htc_run(built: list[dict[str, Any]]) -> None:
    (container,) = containers(built)
    args = container["args"]
    assert args[0] == "run"
    ctx = run_command.make_context("htc run", list(args[1:]))
    status = ctx.params["status_addr"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert status.endswith(f":{ports['status']}") and not status.startswith("127.")
    assert ctx.params["webhook_addr"].endswith(f":{ports['webhook']}")
    assert ctx.params["listen"].endswith(f":{ports['http']}")
    assert str(ctx.params["work_dir"]).startswith("/tmp/")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert str(ctx.params["webhook_cert"]).startswith(mounts["webhook-tls"] + "/")
    with pytest.raises(click.UsageError):  # the check can fail
        run_command.make_context("htc run", [*args[1:], "--no-such-flag"])


def test_selectors_and_ports_meet(built: list[dict[str, Any]]) -> None:
    labels = one(built, "Deployment")["spec"]["template"]["metadata"]["labels"]
    (container,) = containers(built)
    port_names = {p["name"] for p in container["ports"]}

    def selects(selector: dict[str, str]) -> bool:
        return bool(selector) and all(labels.get(k) == v for k, v in selector.items())

    services = [d for d in built if d["kind"] == "Service"]
    assert len(services) == 3
    for service in services:
        assert selects(service["spec"]["selector"]), service["metadata"]["name"]
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in port_names
    policy = one(built, "NetworkPolicy")
    assert selects(policy["spec"]["podSelector"]["matchLabels"])
    allowed = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert allowed == port_names
    pdb = one(built, "PodDisruptionBudget")
    assert selects(pdb["spec"]["selector"]["matchLabels"]) and pdb["spec"]["minAvailable"] == 1
    service = one(built, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["service"]
    webhook = one(built, "Service", service["name"])
    assert webhook["metadata"]["namespace"] == service["namespace"]
    assert service["port"] in {p["port"] for p in webhook["spec"]["ports"]}


def test_rbac_is_kept_as_proven() -> None:
    """deploy/rbac.yaml is proven by tests/operator/test_rbac.py; the kustomization uses it."""
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert "rbac.yaml" in kustomization["resources"]
    assert all((DEPLOY / r).exists() for r in kustomization["resources"])


# --- deploy/fleet/: the fleet topology's HAProxy side -------------------------------------

FLEET = DEPLOY / "fleet"


def patched(plane: ControlPlane, doc: dict[str, Any], patch: str, tmp: Path) -> dict[str, Any]:
    """``doc`` after deploy/fleet/'s JSON patch, applied by kubectl itself (--local)."""
    src = tmp / f"{doc['kind']}.yaml"
    src.write_text(yaml.safe_dump(doc))
    out = plane.kubectl("patch", "--local", "-f", str(src), "--type=json",
                        "--patch-file", str(FLEET / patch), "-o", "yaml").stdout  # fmt: skip
    result: dict[str, Any] = yaml.safe_load(out)
    return result


def test_fleet_side_meets_the_controller_and_the_server_accepts_it(
    control_plane: ControlPlane, kube: Namespace, built: list[dict[str, Any]], tmp_path: Path
) -> None:
    fleet = [
        d for d in yaml.safe_load_all(control_plane.kubectl("kustomize", str(FLEET)).stdout) if d
    ]
    assert sorted(d["kind"] for d in fleet) == [
        "ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget"]  # fmt: skip
    control_plane.kubectl("apply", "-f", str(DEPLOY / "namespace.yaml"))
    out = control_plane.kubectl("apply", "--dry-run=server", "-k", str(FLEET)).stdout
    assert out.count("(server dry run)") == len(fleet), out

    controller = patched(control_plane, one(built, "Deployment"), "controller-patch.yaml", tmp_path)
    (container,) = controller["spec"]["template"]["spec"]["containers"]
    ctx = run_command.make_context("htc run", list(container["args"][1:]))
    assert ctx.params["deploy"] == "dataplane"
    haproxy = one(fleet, "Deployment")["spec"]["template"]
    labels = haproxy["metadata"]["labels"]
    selector = dict(p.split("=", 1) for p in ctx.params["haproxy_selector"].split(","))
    assert all(labels.get(k) == v for k, v in selector.items())
    controller_labels = controller["spec"]["template"]["metadata"]["labels"]
    assert not all(controller_labels.get(k) == v for k, v in selector.items())
    # The Secret the controller reads is the one the pods' init container mounts as files.
    secrets = {v["secret"]["secretName"] for v in haproxy["spec"]["volumes"] if "secret" in v}
    assert secrets == {ctx.params["dataplane_secret"]}
    rbac = [
        d for d in built if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-fleet")
    ]
    assert rbac[0]["rules"][1]["resourceNames"] == [ctx.params["dataplane_secret"]]

    service = patched(control_plane, one(built, "Service", "haproxy-template-controller-haproxy"),
                      "service-patch.yaml", tmp_path)  # fmt: skip
    assert all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
    (api_rule,) = [r for r in one(fleet, "NetworkPolicy")["spec"]["ingress"] if "from" in r]
    source = api_rule["from"][0]["podSelector"]["matchLabels"]
    assert all(controller_labels.get(k) == v for k, v in source.items())

    control_plane.kubectl(
        "label", "namespace", kube.name, "pod-security.kubernetes.io/enforce=restricted"
    )
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "haproxy", **haproxy["metadata"]}, "spec": haproxy["spec"]}  # fmt: skip
    proc = control_plane.kubectl("apply", "--dry-run=server", "-n", kube.name, "-f", "-",
                                 input=yaml.safe_dump(pod))  # fmt: skip
    assert "pod/haproxy created (server dry run)" in proc.stdout, proc.stdout + proc.stderr
