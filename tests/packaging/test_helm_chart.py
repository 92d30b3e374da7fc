"""charts/haproxy-template-controller with Helm's own Go SDK (PyPI helm-python-sdk).

Offline: lint, renders with several value combinations, values.schema.json refusing bad
values, the webhook equal to controller/spec/webhook_config.py's, the CRD and the default
config equal to their sources. On the real control plane: install, upgrade, uninstall.
"""

from __future__ import annotations

import json
from typing import Any

import helm_python as helm
import pytest
import yaml

from controller.spec.models import HAProxyTemplateConfigSpec
from controller.spec.webhook_config import CONFIG_WEBHOOK, RESOURCES_WEBHOOK, webhook_configuration
from controller.testbed.cluster import ControlPlane, Namespace
from tests.packaging.chart_kit import CHART, Release, render
from tests.packaging.manifests import REPO

ADMISSION_SPEC: dict[str, Any] = yaml.safe_load((CHART / "files" / "config.yaml").read_text())[
    "spec"
]
for _name in ("ingresses", "services", "endpointslices", "ingressclasses"):
    if _name in ADMISSION_SPEC["watchedResources"]:
        ADMISSION_SPEC["watchedResources"][_name]["admission"] = True

COMBINATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "cert-manager": {"webhook": {"tls": {"mode": "certManager"}}},
    "cert-manager-issuer": {
        "webhook": {
            "tls": {
                "mode": "certManager",
                "certManager": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}},
            }
        }
    },
    "provided-secret": {
        "webhook": {"tls": {"mode": "secret", "secretName": "tls", "caBundle": "PEM"}}
    },
    "no-webhook": {"webhook": {"enabled": False}},
    "monitoring": {
        "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}
    },
    "admission-collections": {"config": {"spec": ADMISSION_SPEC}},
    "minimal": {
        "networkPolicy": {"enabled": False},
        "podDisruptionBudget": {"enabled": False},
        "ingressClass": {"create": False},
        "metrics": {"dashboard": {"enabled": False}},
        "replicaCount": 1,
    },
}


def kinds(docs: list[dict[str, Any]]) -> set[str]:
    return {d["kind"] for d in docs}


def test_lint_is_clean() -> None:
    for values in COMBINATIONS.values():
        report = helm.lint(CHART, values, strict=True, kube_version="v1.34.2")
        assert report["errors"] == []
        serious = [m for m in report["messages"] if m["severity"] >= 2]
        assert serious == [], serious


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_renders(combination: str) -> None:
    docs = render(COMBINATIONS[combination])
    assert {"Deployment", "ServiceAccount", "ClusterRole", "HAProxyTemplateConfig"} <= kinds(docs)
    webhook = "ValidatingWebhookConfiguration" in kinds(docs)
    assert webhook == (combination != "no-webhook")
    assert ("Certificate" in kinds(docs)) == combination.startswith("cert-manager")
    assert ("Issuer" in kinds(docs)) == (combination == "cert-manager")
    assert ("PrometheusRule" in kinds(docs)) == (combination == "monitoring")


@pytest.mark.parametrize(
    "values",
    [
        {"replicaCount": "two"},
        {"replicaCount": 0},
        {"webhook": {"failurePolicy": "Sometimes"}},
        {"webhook": {"tls": {"mode": "none"}}},
        {"unknownKey": 1},
        {"controller": {"listenPort": 80}},
    ],
)
def test_bad_values_fail(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmError):
        helm.Chart.load(CHART).validate_schema(values)
    with pytest.raises(helm.HelmError):
        render(values)


def test_secret_mode_needs_its_secret_and_ca() -> None:
    with pytest.raises(helm.HelmError, match="secretName"):
        render({"webhook": {"tls": {"mode": "secret", "caBundle": "PEM"}}})


@pytest.mark.parametrize("combination", ["defaults", "admission-collections"])
def test_webhook_equals_the_generators(combination: str) -> None:
    values = COMBINATIONS[combination]
    docs = render(values, namespace="ctl")
    (rendered,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    (config,) = [d for d in docs if d["kind"] == "HAProxyTemplateConfig"]
    spec = HAProxyTemplateConfigSpec.model_validate(config["spec"])
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    sa = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    expected = webhook_configuration(
        spec,
        ca_bundle=b"x",
        service=("ctl", "rel-haproxy-template-controller-webhook", 443),
        name="rel-haproxy-template-controller",
        controller_namespace="ctl",
        service_account=sa,
    )
    for webhook in rendered["webhooks"] + expected["webhooks"]:
        assert webhook["clientConfig"].pop("caBundle")
    assert rendered["webhooks"] == expected["webhooks"]
    names = [w["name"] for w in rendered["webhooks"]]
    if combination == "admission-collections":
        assert names == [RESOURCES_WEBHOOK, CONFIG_WEBHOOK]
        assert len(rendered["webhooks"][0]["rules"]) == 4
    else:  # the quickstart judges no collection: the config entry alone
        assert names == [CONFIG_WEBHOOK]
    # The config lives in the release namespace: its entry must not leave that namespace out.
    assert "namespaceSelector" not in rendered["webhooks"][-1]


def test_webhook_failure_policies_are_values() -> None:
    values = {"config": COMBINATIONS["admission-collections"]["config"],
              "webhook": {"failurePolicy": "Ignore", "configFailurePolicy": "Fail"}}  # fmt: skip
    (rendered,) = [d for d in render(values) if d["kind"] == "ValidatingWebhookConfiguration"]
    assert [w["failurePolicy"] for w in rendered["webhooks"]] == ["Ignore", "Fail"]


def test_crd_and_default_config_equal_their_sources() -> None:
    crd = "haproxytemplateconfigs.haproxy-template.dev.yaml"
    assert (CHART / "crds" / crd).read_bytes() == (REPO / "deploy" / "crds" / crd).read_bytes()
    quickstart = REPO / "examples" / "quickstart" / "config.yaml"
    assert (CHART / "files" / "config.yaml").read_bytes() == quickstart.read_bytes()
    (config,) = [d for d in render({}) if d["kind"] == "HAProxyTemplateConfig"]
    assert config["spec"] == yaml.safe_load(quickstart.read_text())["spec"]


def _get(plane: ControlPlane, *args: str) -> dict[str, Any]:
    return json.loads(plane.kubectl("get", *args, "-o", "json").stdout)  # type: ignore[no-any-return]


@pytest.mark.cluster
def test_install_upgrade_uninstall(control_plane: ControlPlane, kube: Namespace) -> None:
    rel = Release(control_plane, kube.name)
    release, full, config = rel.name, rel.full, rel.config
    values = rel.values()
    try:
        installed = config.install(CHART, release, values, namespace=kube.name, timeout=120)
        assert installed["status"] == "deployed" and installed["revision"] == 1, installed
        manifest = render(values, namespace=kube.name, name=release)
        assert len(manifest) >= 15
        for doc in manifest:  # every object was accepted and exists
            ns = ["-n", kube.name] if doc["kind"] not in CLUSTER_SCOPED else []
            _get(control_plane, doc["kind"].lower(), doc["metadata"]["name"], *ns)
        crd = _get(control_plane, "crd", "haproxytemplateconfigs.haproxy-template.dev")
        assert any(
            c["type"] == "Established" and c["status"] == "True"
            for c in crd["status"]["conditions"]
        )
        webhook = _get(control_plane, "validatingwebhookconfiguration", full)
        service = webhook["webhooks"][0]["clientConfig"]["service"]
        assert service == {"namespace": kube.name, "name": f"{full}-webhook", "port": 443,
                           "path": "/validate"}  # fmt: skip
        assert webhook["webhooks"][0]["clientConfig"]["caBundle"]

        upgraded = config.upgrade(
            CHART, release, {**values, "replicaCount": 3}, namespace=kube.name, timeout=120
        )
        assert upgraded["status"] == "deployed" and upgraded["revision"] == 2, upgraded
        deployment = _get(control_plane, "deployment", full, "-n", kube.name)
        assert deployment["spec"]["replicas"] == 3
        _config_in_the_release_namespace_is_sent_to_the_webhook(control_plane, kube, full)
    finally:
        config.uninstall(release, ignore_not_found=True, timeout=120)
    gone = control_plane.kubectl("get", "validatingwebhookconfiguration", full, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    left = control_plane.kubectl("get", "deployment", full, "-n", kube.name, check=False)
    assert left.returncode != 0
    with pytest.raises(helm.HelmError):
        config.status(release)
    config.close()


def _config_in_the_release_namespace_is_sent_to_the_webhook(
    plane: ControlPlane, kube: Namespace, full: str
) -> None:
    """With Fail and no replica to answer (no kubelet runs the pods), the API server refuses a
    change of the config in the release namespace: proof that it calls the webhook for it.
    The added condition keeps every other namespace's configs out of this moment."""
    webhooks = _get(plane, "validatingwebhookconfiguration", full)["webhooks"]
    i = [w["name"] for w in webhooks].index(CONFIG_WEBHOOK)
    only_here = {"name": "only-this-test", "expression": f"request.namespace == '{kube.name}'"}
    patch = [
        {"op": "add", "path": f"/webhooks/{i}/matchConditions/-", "value": only_here},
        {"op": "replace", "path": f"/webhooks/{i}/failurePolicy", "value": "Fail"},
    ]
    plane.kubectl("patch", "validatingwebhookconfiguration", full, "--type=json",
                  "-p", json.dumps(patch))  # fmt: skip
    refused = plane.kubectl("annotate", "haproxytemplateconfig", "haproxy-template-controller",
                            "-n", kube.name, "probe=1", check=False)  # fmt: skip
    assert refused.returncode != 0
    assert f'calling webhook "{CONFIG_WEBHOOK}"' in refused.stderr, refused.stderr
    # The webhook latency alert reads the API server's own histogram of that call.
    metrics = plane.kubectl("get", "--raw", "/metrics").stdout
    series = (
        f'apiserver_admission_webhook_admission_duration_seconds_bucket{{name="{CONFIG_WEBHOOK}"'
    )
    assert series in metrics, series


CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "IngressClass",
    "ValidatingWebhookConfiguration",
}
