"""Ingress status in ``htc run``: the served Ingresses get the published address once HAProxy
serves them; an Ingress of another class gets none, and one that leaves the class loses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from controller.testbed.cluster import Namespace
from tests.operator.operator_kit import (
    backend_manifests,
    config_doc,
    eventually,
    free_port,
    ingress,
    start_run,
)

pytestmark = pytest.mark.cluster

NOBODY = "10.244.200.203"
ADDRESS = "10.244.0.1"


def lb(kube: Namespace, name: str) -> list[dict[str, str]]:
    out = kube.plane.kubectl("get", "ingress", name, "-n", kube.name, "-o", "json").stdout
    return list(
        ((json.loads(out).get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    )


def with_class(manifest: str, cls: str) -> str:
    doc = yaml.safe_load(manifest)
    doc["spec"]["ingressClassName"] = cls
    return yaml.safe_dump(doc)


def test_served_ingresses_get_the_address(kube: Namespace, tmp_path: Path) -> None:
    listen = free_port()
    kube.apply(yaml.safe_dump(config_doc(kube.name, listen)))
    kube.apply(backend_manifests(kube.name, "web", NOBODY))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    kube.apply(with_class(ingress(kube.name, "other", "other.test", "web"), "nginx"))
    run = start_run(
        kube, "/usr/sbin/haproxy", tmp_path / "run", listen=listen,
        extra=("--publish-address", ADDRESS, "--ingress-class", "haproxy"),
    )  # fmt: skip
    try:
        run.wait_serving()
        eventually(lambda: lb(kube, "web") == [{"ip": ADDRESS}], "the address on the served one")
        assert lb(kube, "other") == []
        kube.apply(with_class(ingress(kube.name, "web", "web.test", "web"), "nginx"))
        eventually(lambda: lb(kube, "web") == [], "the address taken away", 30)
    finally:
        run.stop()
