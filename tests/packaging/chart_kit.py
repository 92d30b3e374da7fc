"""The chart and its rendering with Helm's Go SDK, for the chart's tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

from controller.testbed.cluster import ControlPlane
from tests.packaging.manifests import REPO

CHART = REPO / "charts" / "haproxy-template-controller"


def render(
    values: dict[str, Any], namespace: str = "htc", name: str = "rel"
) -> list[dict[str, Any]]:
    chart = helm.Chart.load(CHART)
    out = chart.render(values, name=name, namespace=namespace, is_install=True)
    docs: list[dict[str, Any]] = []
    for text in out.values():
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


@dataclass
class Release:
    """A release of the chart in one test namespace of the shared API server."""

    plane: ControlPlane
    namespace: str
    name: str = ""
    full: str = ""
    config: helm.Config = field(init=False)

    def __post_init__(self) -> None:
        self.name = f"htc-{self.namespace}"
        self.full = f"{self.name}-haproxy-template-controller"
        kubeconfig = Path(str(self.plane.kubeconfig))
        self.config = helm.Config(kubeconfig_path=kubeconfig, namespace=self.namespace)

    def values(self, **more: Any) -> dict[str, Any]:
        """The values every install here needs: failurePolicy Ignore (no kubelet runs the
        pods, and other tests share this API server) and an IngressClass of its own."""
        return {
            "webhook": {"failurePolicy": "Ignore"},
            "ingressClass": {"name": f"haproxy-{self.namespace}"},
            **more,
        }
