"""The ValidatingWebhookConfiguration for a spec, from one generator.

``htc webhook-config`` prints it for URL clients (development, out of cluster); the chart and
``deploy/`` use the same function with a Service reference. Rules come from the collections
with ``admission: true`` plus the HAProxyTemplateConfig itself, so what the API server sends
is exactly what the webhook judges.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

from controller.spec.models import HAProxyTemplateConfigSpec

__all__ = ["WEBHOOK_PATH", "plural_of", "webhook_configuration"]

WEBHOOK_PATH = "/validate"
GROUP = "haproxy-template.dev"


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
    rules.append(
        {
            "apiGroups": [GROUP],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["haproxytemplateconfigs"],
            "scope": "Namespaced",
        }
    )
    client: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode()}
    if url is not None:
        client["url"] = url.rstrip("/") + WEBHOOK_PATH
    else:
        assert service is not None
        namespace, svc, port = service
        client["service"] = {"namespace": namespace, "name": svc, "port": port,
                             "path": WEBHOOK_PATH}  # fmt: skip
    sa = f"system:serviceaccount:{controller_namespace}:{service_account}"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"validate.{GROUP}",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": failure_policy,
                "timeoutSeconds": timeout_seconds,
                "clientConfig": client,
                "rules": rules,
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": sorted({"kube-system", controller_namespace}),
                        }
                    ]
                },
                "matchConditions": [
                    {
                        "name": "not-the-controller-itself",
                        "expression": f"request.userInfo.username != '{sa}'",
                    }
                ],
            }
        ],
    }
