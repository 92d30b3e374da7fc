"""``htc run`` end to end: a real API server, a real HAProxy, backends in pods.

Startup with existing objects serves traffic; ``kubectl apply`` create, update and delete
change traffic, status and Events; an invalid change keeps the last good configuration serving
and says why; one spec change is adopted and another rejected."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from controller.testbed.cluster import Namespace
from controller.testbed.podnet import Pod, PodNetwork
from tests.operator.operator_kit import (
    Run,
    backend_manifests,
    condition,
    config_doc,
    config_status,
    events,
    eventually,
    free_port,
    ingress,
    start_echo,
    start_run,
)

pytestmark = pytest.mark.cluster


@pytest.fixture
def two_pods(pod_network: PodNetwork) -> Iterator[tuple[Pod, Pod]]:
    a, b = pod_network.add_pod(), pod_network.add_pod()
    try:
        yield a, b
    finally:
        pod_network.remove_pod(a)
        pod_network.remove_pod(b)


@pytest.fixture
def running(
    kube: Namespace, two_pods: tuple[Pod, Pod], tmp_path: Path
) -> Iterator[tuple[Run, Namespace]]:
    web, api = two_pods
    start_echo(web, "web-1")
    start_echo(api, "api-1")
    listen = free_port()
    kube.apply(yaml.safe_dump(config_doc(kube.name, listen)))
    kube.apply(backend_manifests(kube.name, "web", web.ip))
    kube.apply(backend_manifests(kube.name, "api", api.ip))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    run = start_run(kube, "/usr/sbin/haproxy", tmp_path / "run", listen=listen)
    try:
        run.wait_serving()
        yield run, kube
    finally:
        run.stop()


def answered_by(run: Run, host: str, path: str = "/") -> str | None:
    status, body = run.get(host, path)
    return str(json.loads(body)["pod"]) if status == 200 else None


def test_startup_with_existing_objects_serves_and_publishes(
    running: tuple[Run, Namespace],
) -> None:
    run, kube = running
    assert answered_by(run, "web.test") == "web-1"
    eventually(lambda: condition(kube, "Deployed").get("status") == "True", "Deployed=True")
    status = config_status(kube)
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Valid": "True",
        "Deployed": "True",
        "Ready": "True",
    }, status
    assert status["observedGeneration"] == 1
    checksum = status["lastValidated"]["checksum"]
    assert status["lastValidated"]["haproxyVersion"].startswith("2.")
    eventually(
        lambda: any(e.get("reason") == "Deployed" and checksum[:12] in e.get("note", "")
                    for e in events(kube)),
        "a Normal Deployed Event naming the checksum",
    )  # fmt: skip
    assert run.readyz() == 200


def test_create_update_delete_change_the_traffic(running: tuple[Run, Namespace]) -> None:
    run, kube = running
    # Serving comes first; the status write that announces it follows.
    eventually(lambda: "lastValidated" in config_status(kube), "the first status")
    first = config_status(kube)["lastValidated"]["checksum"]
    kube.apply(ingress(kube.name, "api", "api.test", "api"))
    eventually(lambda: answered_by(run, "api.test") == "api-1", "the new Ingress to serve")
    eventually(lambda: config_status(kube)["lastValidated"]["checksum"] != first, "a new checksum")
    # update: the same Ingress now routes to the other Service
    kube.apply(ingress(kube.name, "api", "api.test", "web"))
    eventually(lambda: answered_by(run, "api.test") == "web-1", "the updated Ingress to serve")
    # delete: the host is gone (the quickstart answers 404)
    kube.plane.kubectl("delete", "ingress", "api", "-n", kube.name)
    eventually(lambda: run.get("api.test")[0] == 404, "the deleted Ingress to stop serving")
    # the same objects as at the start: the same bytes, the same checksum
    eventually(
        lambda: config_status(kube)["lastValidated"]["checksum"] == first, "the first checksum"
    )
    assert answered_by(run, "web.test") == "web-1"


def test_an_invalid_change_keeps_the_last_good_config_serving(
    running: tuple[Run, Namespace],
) -> None:
    run, kube = running
    eventually(lambda: condition(kube, "Valid").get("status") == "True", "Valid=True")
    good = config_status(kube)["lastValidated"]["checksum"]
    # The name breaks the test config's inline rule no-forbidden-names.
    kube.apply(ingress(kube.name, "forbidden", "bad.test", "web"))
    eventually(lambda: condition(kube, "Valid").get("status") == "False", "Valid=False")
    valid = condition(kube, "Valid")
    assert valid["reason"] == "ValidationFailed"
    assert "keeps serving" in valid["message"]
    status = config_status(kube)
    assert status["lastValidated"]["checksum"] == good
    assert status["lastRejection"]["ruleIds"]
    assert answered_by(run, "web.test") == "web-1"  # the last good set still serves
    eventually(
        lambda: any(e.get("type") == "Warning" and e.get("reason") == "Rejected"
                    and e["regarding"]["kind"] == "Ingress" and e["regarding"]["name"] == "forbidden"
                    for e in events(kube)),
        "a Warning Event on the offending Ingress",
    )  # fmt: skip
    assert run.get("bad.test")[0] == 404  # nothing of the rejected change was deployed
    kube.plane.kubectl("delete", "ingress", "forbidden", "-n", kube.name)
    eventually(lambda: condition(kube, "Valid").get("status") == "True", "Valid=True again")


def test_one_spec_change_is_adopted_and_another_rejected(running: tuple[Run, Namespace]) -> None:
    run, kube = running
    eventually(lambda: condition(kube, "Valid").get("status") == "True", "Valid=True")
    doc = json.loads(
        kube.plane.kubectl("get", "htc", "quickstart", "-n", kube.name, "-o", "json").stdout
    )
    spec = doc["spec"]
    cfg = spec["haproxyConfig"]["template"]
    assert "frontend " in cfg
    # adopted: every answer now carries a header the new template adds
    marked = cfg.replace("frontend ", "frontend ", 1)
    lines = marked.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("frontend "))
    lines.insert(at + 1, "    http-response set-header X-Spec adopted")
    spec["haproxyConfig"]["template"] = "\n".join(lines) + "\n"
    patch = json.dumps({"spec": {"haproxyConfig": spec["haproxyConfig"]}})
    kube.plane.kubectl("patch", "htc", "quickstart", "-n", kube.name, "--type=merge", "-p", patch)
    eventually(lambda: config_status(kube).get("observedGeneration") == 2, "generation 2 adopted")
    adopted = config_status(kube)["lastValidated"]["checksum"]
    # rejected: a template that does not render
    broken = json.dumps({"spec": {"haproxyConfig": {"template": "{% if %}\n"}}})
    kube.plane.kubectl("patch", "htc", "quickstart", "-n", kube.name, "--type=merge", "-p", broken)
    eventually(lambda: condition(kube, "Valid").get("reason") == "SpecRejected", "SpecRejected")
    status = config_status(kube)
    assert status["observedGeneration"] == 2
    assert status["lastValidated"]["checksum"] == adopted
    assert answered_by(run, "web.test") == "web-1"
