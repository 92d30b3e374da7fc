"""`htc webhook-config` and its generator: which entry judges what, in which namespaces.

The HAProxyTemplateConfig lives in the controller's namespace (deploy/ and the chart put it
there), so its entry must not carry the selector that leaves that namespace out; the watched
collections' entry must. Both skip the controller's own ServiceAccount.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from controller.cli import main
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.spec.webhook_config import (
    CONFIG_WEBHOOK,
    RESOURCES_WEBHOOK,
    webhook_configuration,
)

CONFIG = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata: {name: w}
spec:
  watchedResources:
    ingresses: {apiVersion: networking.k8s.io/v1, kind: Ingress, admission: true}
    services: {apiVersion: v1, kind: Service, admission: true}
    endpoints: {apiVersion: discovery.k8s.io/v1, kind: EndpointSlice}
  haproxyConfig:
    template: |
      global
          maxconn 10
"""
SA = "system:serviceaccount:ctl:htc"


def spec(text: str = CONFIG) -> HAProxyTemplateConfigSpec:
    return HAProxyTemplateConfigSpec.model_validate(yaml.safe_load(text)["spec"])


def generate(text: str = CONFIG, **kw: Any) -> dict[str, Any]:
    return webhook_configuration(
        spec(text), ca_bundle=b"CA", url="https://127.0.0.1:8443/", controller_namespace="ctl",
        service_account="htc", **kw,
    )  # fmt: skip


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in doc["webhooks"]}


def test_the_config_entry_reaches_the_controllers_namespace() -> None:
    webhooks = by_name(generate())
    assert list(webhooks) == [RESOURCES_WEBHOOK, CONFIG_WEBHOOK]
    config = webhooks[CONFIG_WEBHOOK]
    assert "namespaceSelector" not in config
    assert config["rules"] == [
        {"apiGroups": ["haproxy-template.dev"], "apiVersions": ["v1alpha1"],
         "operations": ["CREATE", "UPDATE"], "resources": ["haproxytemplateconfigs"],
         "scope": "Namespaced"}
    ]  # fmt: skip
    resources = webhooks[RESOURCES_WEBHOOK]
    assert resources["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["ctl", "kube-system"]}
        ]
    }  # fmt: skip
    assert [r["resources"] for r in resources["rules"]] == [["ingresses"], ["services"]]
    assert all("haproxytemplateconfigs" not in r["resources"] for r in resources["rules"])
    for webhook in webhooks.values():
        assert webhook["matchConditions"] == [
            {"name": "not-the-controller-itself",
             "expression": f"request.userInfo.username != '{SA}'"}
        ]  # fmt: skip
        assert webhook["clientConfig"] == {
            "caBundle": "Q0E=",
            "url": "https://127.0.0.1:8443/validate",
        }
        assert webhook["sideEffects"] == "None" and webhook["admissionReviewVersions"] == ["v1"]


def test_failure_policies_are_separate_and_the_config_one_ignores_by_default() -> None:
    webhooks = by_name(generate())
    assert webhooks[RESOURCES_WEBHOOK]["failurePolicy"] == "Fail"
    assert webhooks[CONFIG_WEBHOOK]["failurePolicy"] == "Ignore"
    webhooks = by_name(generate(failure_policy="Ignore", config_failure_policy="Fail"))
    assert webhooks[RESOURCES_WEBHOOK]["failurePolicy"] == "Ignore"
    assert webhooks[CONFIG_WEBHOOK]["failurePolicy"] == "Fail"


def test_without_admission_collections_only_the_config_entry_is_left() -> None:
    doc = generate(CONFIG.replace(", admission: true", ""))
    assert [w["name"] for w in doc["webhooks"]] == [CONFIG_WEBHOOK]


def test_the_command_prints_it_without_yaml_aliases(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    (tmp_path / "ca.crt").write_bytes(b"CA")
    result = CliRunner().invoke(
        main,
        ["webhook-config", str(config), "--url", "https://127.0.0.1:8443", "--ca-file",
         str(tmp_path / "ca.crt"), "--controller-namespace", "ctl", "--service-account", "htc",
         "--config-failure-policy", "Fail"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "&id" not in result.output and "*id" not in result.output
    printed = yaml.safe_load(result.output)
    assert printed == generate(config_failure_policy="Fail")
