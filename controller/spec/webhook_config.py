"""The ValidatingWebhookConfiguration for a spec, from one generator.

``htc webhook-config`` prints it for URL clients (development, out of cluster); the chart and
``deploy/`` use the same function with a Service reference. Rules come from the collections
with ``admission: true`` plus the HAProxyTemplateConfig itself, so what the API server sends
is exactly what the webhook judges.

Two webhook entries, because they need different namespace selectors:

* ``validate.haproxy-template.dev``, the watched collections, leaves out ``kube-system`` and
  the controller's own namespace (the controller's own objects must never wait on its webhook);
  it is omitted when no collection has ``admission: true``;
* ``config.haproxy-template.dev``, the HAProxyTemplateConfig, has no namespace selector: the
  config CR lives in the controller's namespace (deploy/ and the chart put it there), which the
  first entry's selector excludes, so under that selector no CR was ever judged.

Both skip requests by the controller's own ServiceAccount (``matchConditions``).

The config entry has its own failure policy, ``Ignore`` by default: a replica is ready (and so
behind the webhook Service) only once it deployed a set validated under its config, so with
``Fail`` the first config of a fresh install, and the fix of a config under which nothing
validates, would be refused for want of an answering replica. Nothing is lost by admitting a
spec unjudged: the controller validates every spec before adopting it and keeps serving the
last good one.
"""

from __future__ import annotations

import base64
import copy
from typing import Any, Literal

from controller.spec.models import HAProxyTemplateConfigSpec

__all__ = [
    "CONFIG_WEBHOOK",
    "RESOURCES_WEBHOOK",
    "WEBHOOK_PATH",
    "plural_of",
    "webhook_configuration",
]

WEBHOOK_PATH = "/validate"
GROUP = "haproxy-template.dev"
RESOURCES_WEBHOOK = f"validate.{GROUP}"
CONFIG_WEBHOOK = f"config.{GROUP}"


def plural_of(kind: str) -> str:
    """The resource name of a kind, as the API server derives it for most kinds."""
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lower[:-1] + "ies"
    return lower + "s"


def webhook_configuration(
    spec: HAProxyTemplateConfigSpec,
    *,
    ca_bundle: bytes,
    url: str | None = None,
    service: tuple[str, str, int] | None = None,
    name: str = "haproxy-template-controller",
    failure_policy: Literal["Fail", "Ignore"] = "Fail",
    config_failure_policy: Literal["Fail", "Ignore"] = "Ignore",
    timeout_seconds: int = 10,
    controller_namespace: str = "haproxy-template-controller",
    service_account: str = "haproxy-template-controller",
) -> dict[str, Any]:
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url and service")
    rules: list[dict[str, Any]] = []
    for watched in sorted(spec.watched_resources.values(), key=lambda w: (w.api_version, w.kind)):
        if not watched.admission:
            continue
        group, _, version = watched.api_version.rpartition("/")
        rule = {
            "apiGroups": [group],
            "apiVersions": [version],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": [plural_of(watched.kind)],
            "scope": "*",
        }
        if rule not in rules:
            rules.append(rule)
    config_rule = {
        "apiGroups": [GROUP],
        "apiVersions": ["v1alpha1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["haproxytemplateconfigs"],
        "scope": "Namespaced",
    }
    client: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode()}
    if url is not None:
        client["url"] = url.rstrip("/") + WEBHOOK_PATH
    else:
        assert service is not None
        namespace, svc, port = service
        client["service"] = {"namespace": namespace, "name": svc, "port": port,
                             "path": WEBHOOK_PATH}  # fmt: skip
    sa = f"system:serviceaccount:{controller_namespace}:{service_account}"

    def entry(
        webhook_name: str,
        entry_rules: list[dict[str, Any]],
        policy: str,
        selector: dict[str, Any] | None,
    ) -> dict[str, Any]:
        webhook: dict[str, Any] = {
            "name": webhook_name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": policy,
            "timeoutSeconds": timeout_seconds,
            "clientConfig": copy.deepcopy(client),  # no YAML aliases between the entries
            "rules": entry_rules,
        }
        if selector is not None:
            webhook["namespaceSelector"] = selector
        webhook["matchConditions"] = [
            {
                "name": "not-the-controller-itself",
                "expression": f"request.userInfo.username != '{sa}'",
            }
        ]
        return webhook

    not_ours = {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": sorted({"kube-system", controller_namespace}),
            }
        ]
    }
    webhooks = [entry(RESOURCES_WEBHOOK, rules, failure_policy, not_ours)] if rules else []
    webhooks.append(entry(CONFIG_WEBHOOK, [config_rule], config_failure_policy, None))
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    }
