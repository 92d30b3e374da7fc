"""kopf's watches against the real API server: two collections of one kind each get their own
server-side selectors (so a Secret neither selects never reaches the process), and the end of
kopf's initial lists is found without kopf indexes: by the count of our own list, or by the
first event that is not a listing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import yaml

from controller.operator.kube import connect
from controller.operator.watchset import Delivery, WatchSet, field_selector_string, layers
from controller.spec import WatchedResource
from controller.testbed.cluster import Namespace
from tests.operator.operator_kit import config_doc, free_port

pytestmark = pytest.mark.cluster


def _collections(ns: str) -> dict[str, WatchedResource]:
    return {
        "tls": WatchedResource.model_validate(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "fieldSelector": f"type=kubernetes.io/tls,metadata.namespace={ns}",
            }
        ),
        "auth": WatchedResource.model_validate(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "fieldSelector": f"type=Opaque,metadata.namespace={ns}",
                "labelSelector": {"matchLabels": {"example.test/auth": "true"}},
            }
        ),
        "services": WatchedResource.model_validate(
            {"apiVersion": "v1", "kind": "Service", "fieldSelector": f"metadata.namespace={ns}"}
        ),
    }


def _secret(ns: str, name: str, kind: str, labels: dict[str, str] | None = None) -> str:
    data: dict[str, Any] = (
        {"tls.crt": "eA==", "tls.key": "eA=="} if kind == "kubernetes.io/tls" else {"x": "eA=="}
    )
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    return yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Secret", "type": kind, "metadata": meta, "data": data}
    )


def test_collections_of_one_kind_are_split_and_secrets_are_selected_by_type() -> None:
    parts = layers(_collections("n"))
    assert [sorted(p) for p in parts] == [["services", "tls"], ["auth"]]
    assert field_selector_string(_collections("n")["auth"]) == "type=Opaque,metadata.namespace=n"
    ingress = WatchedResource.model_validate(
        {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "fieldSelector": "type=x"}
    )
    assert field_selector_string(ingress) is None  # not a field Ingresses have: the store's


async def _watch(
    kube: Namespace,
    expected: dict[str, int] | None,
    quiet: float,
    held: Callable[[str, Mapping[str, Any]], bool] | None = None,
) -> tuple[WatchSet, list[Delivery]]:
    seen: list[Delivery] = []
    watch_set = WatchSet(
        connect(str(kube.plane.kubeconfig)),
        _collections(kube.name),
        (kube.name, "quickstart"),
        lambda _ws, item: seen.append(item),
        label="test",
        expected=expected,
        quiet=quiet,
        held=held,
    )
    watch_set.start()
    return watch_set, seen


async def test_each_collection_gets_only_what_its_selectors_select(kube: Namespace) -> None:
    kube.apply(yaml.safe_dump(config_doc(kube.name, free_port())))
    kube.apply(_secret(kube.name, "cert", "kubernetes.io/tls"))
    kube.apply(_secret(kube.name, "htpasswd", "Opaque", {"example.test/auth": "true"}))
    kube.apply(_secret(kube.name, "stranger", "Opaque"))
    # The counts our own list would have found: the lists end by count, long before 60 s.
    # The store is said to hold htpasswd as listed already: it counts, and is not delivered.
    watch_set, seen = await _watch(
        kube,
        {"tls": 1, "auth": 1, "services": 0},
        quiet=60.0,
        held=lambda _c, body: bool(body["metadata"]["name"] == "htpasswd"),
    )
    try:
        started = time.monotonic()
        await asyncio.wait_for(watch_set.synced.wait(), 30)
        assert time.monotonic() - started < 30
        kube.apply(_secret(kube.name, "later", "Opaque"))  # selected by neither
        kube.apply(_secret(kube.name, "cert2", "kubernetes.io/tls"))
        for _ in range(100):  # bounded: 20 s
            if any(d.body["metadata"]["name"] == "cert2" for d in seen):
                break
            await asyncio.sleep(0.2)
        got = {(d.collection, d.body["metadata"]["name"], d.event) for d in seen if d.collection}
        assert got == {("tls", "cert", None), ("tls", "cert2", "ADDED")}
    finally:
        await watch_set.stop()


async def test_a_watch_event_ends_a_list_whose_count_is_unknown(kube: Namespace) -> None:
    kube.apply(yaml.safe_dump(config_doc(kube.name, free_port())))
    watch_set, seen = await _watch(kube, None, quiet=120.0)
    try:
        for _ in range(100):  # bounded: 20 s, until the config was seen
            if any(d.what == "config" for d in seen):
                break
            await asyncio.sleep(0.2)
        assert not watch_set.synced.is_set()  # nothing tells the lists ended yet
        kube.apply(_secret(kube.name, "cert", "kubernetes.io/tls"))
        kube.apply(_secret(kube.name, "htpasswd", "Opaque", {"example.test/auth": "true"}))
        kube.apply(
            "apiVersion: v1\nkind: Service\n"
            f"metadata: {{name: web, namespace: {kube.name}}}\n"
            "spec: {ports: [{port: 80}]}\n"
        )
        await asyncio.wait_for(watch_set.synced.wait(), 30)
    finally:
        await watch_set.stop()
