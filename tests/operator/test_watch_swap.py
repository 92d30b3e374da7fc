"""Config changes and the watch set: a template change lists nothing again; a change of
``watchedResources`` starts new watches, and they replace the old ones only once synced and
adopted, so objects of a newly watched kind reach the render.

No traffic here: the checks read what ``htc run`` deployed (its work directory) and its metrics;
EndpointSlices name a pod-network address no pod holds, which nothing is sent to."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
import yaml

from controller.testbed.cluster import Namespace
from tests.operator.operator_kit import (
    Run,
    backend_manifests,
    config_doc,
    config_status,
    eventually,
    free_port,
    ingress,
    start_run,
)

pytestmark = pytest.mark.cluster

NOBODY = "10.244.200.201"


def metric(run: Run, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{run.status}/metrics", timeout=3) as resp:
        text = resp.read().decode()
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def deployed(work: Path, name: str = "haproxy.cfg") -> str:
    path = work / "config" / name
    return path.read_text() if path.exists() else ""


def test_template_change_keeps_the_watches_and_a_new_kind_is_watched(
    kube: Namespace, tmp_path: Path
) -> None:
    listen = free_port()
    doc = config_doc(kube.name, listen)
    kube.apply(yaml.safe_dump(doc))
    kube.apply(backend_manifests(kube.name, "web", NOBODY))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    kube.apply(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: banner}\ndata: {text: hello-from-cm}\n"
    )
    work = tmp_path / "run"
    run = start_run(kube, "/usr/sbin/haproxy", work, listen=listen)
    try:
        run.wait_serving()
        assert metric(run, "htc_watch_starts_total") == 1
        # templates only: adopted without new watches
        spec = doc["spec"]
        spec["haproxyConfig"]["template"] += "\n# templates only\n"
        kube.apply(yaml.safe_dump(doc))
        eventually(lambda: "# templates only" in deployed(work), "the template change deployed")
        assert metric(run, "htc_watch_starts_total") == 1
        # a new collection: ConfigMaps, read by the template
        spec["watchedResources"]["configmaps"] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "fieldSelector": f"metadata.namespace={kube.name}",
        }
        spec["haproxyConfig"]["template"] += (
            "{% for cm in resources.configmaps.list() if cm.metadata.name == 'banner' %}# cm {{ cm.data.text | haproxy_arg }}\n{% endfor %}"
        )
        kube.apply(yaml.safe_dump(doc))
        eventually(lambda: "# cm hello-from-cm" in deployed(work), "the new kind rendered", 30)
        assert metric(run, "htc_watch_starts_total") == 2
        # the status is written after the deploy, by the leader's writer: wait for it
        eventually(
            lambda: config_status(kube).get("observedGeneration") == 3, "generation 3 in status"
        )
        # the new watch set is live: a change of a ConfigMap reaches the render
        kube.apply(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: banner}\ndata: {text: changed}\n"
        )
        eventually(lambda: "# cm changed" in deployed(work), "the ConfigMap change rendered")
        # and the old one still watches nothing it should not: Ingress changes still arrive
        kube.apply(ingress(kube.name, "late", "late.test", "web"))
        eventually(
            lambda: "late.test" in deployed(work, "maps/hosts.map"), "a later Ingress rendered"
        )
    finally:
        run.stop()
