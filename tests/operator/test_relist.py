"""A delete made while the watches were away: with the API server down, an Ingress is deleted in
etcd and etcd is compacted, so a watch resuming from its old resourceVersion gets 410 Gone and
must list again. The Ingress must leave the store and the configuration. ``htc run`` also lists
every collection itself after a reconnect (and periodically), so that this holds whatever a
watch library reports after a 410; the test checks that list ran too. (Measured: with that
list switched off, kopf 1.45's own relist already removed the object here.)

etcd is reached directly (its endpoint is in the control plane's data directory): the API
server cannot delete while it is down, and compaction is etcd's own operation."""

from __future__ import annotations

import base64
import json
import urllib.request
from pathlib import Path
from typing import Any

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

NOBODY = "10.244.200.205"


def etcd(kube: Namespace, path: str, body: dict[str, Any]) -> dict[str, Any]:
    endpoint = (Path(str(kube.plane.kubeconfig)).parent / "etcd-endpoint").read_text().strip()
    req = urllib.request.Request(
        endpoint + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return dict(json.loads(resp.read()))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def maps(work: Path) -> str:
    return "".join(p.read_text() for p in sorted((work / "config" / "maps").glob("*.map")))


def test_a_delete_lost_to_a_410_still_leaves_the_store(kube: Namespace, tmp_path: Path) -> None:
    listen = free_port()
    kube.apply(yaml.safe_dump(config_doc(kube.name, listen)))
    kube.apply(backend_manifests(kube.name, "web", NOBODY))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    kube.apply(ingress(kube.name, "gone", "gone.test", "web"))
    work = tmp_path / "run"
    run = start_run(kube, "/usr/sbin/haproxy", work, listen=listen)
    try:
        run.wait_serving()
        assert "gone.test" in maps(work)
        kube.plane.stop_apiserver()
        try:
            keys = etcd(kube, "/v3/kv/range",
                        {"key": b64("/registry/"), "range_end": b64("/registry0"),
                         "keys_only": True})  # fmt: skip
            wanted = [
                k["key"] for k in keys.get("kvs", [])
                if base64.b64decode(k["key"]).decode().endswith(f"/{kube.name}/gone")
            ]  # fmt: skip
            assert len(wanted) == 1, "the Ingress's key in etcd"
            deleted = etcd(kube, "/v3/kv/deleterange", {"key": wanted[0]})
            assert deleted.get("deleted") == "1"
            revision = int(deleted["header"]["revision"])
            etcd(kube, "/v3/kv/compaction", {"revision": revision, "physical": True})
        finally:
            kube.plane.start_apiserver()
        gone = kube.plane.kubectl("get", "ingress", "gone", "-n", kube.name, check=False)
        assert gone.returncode != 0  # the server agrees it is gone
        eventually(lambda: "gone.test" not in maps(work), "the lost delete to reach the config", 60)
        assert "web.test" in maps(work)
        assert any('"relisted"' in line for line in run.errors)
    finally:
        run.stop()
