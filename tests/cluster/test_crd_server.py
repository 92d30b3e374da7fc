"""The generated CRD on a real API server: it applies, explains itself, prints our columns, and
every ``x-kubernetes-validations`` rule compiles and refuses what it should, with our message."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.testbed.cluster import ControlPlane, Namespace

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
CRD_PATH = REPO / "deploy" / "crds" / "haproxytemplateconfigs.haproxy-template.dev.yaml"
QUICKSTART = REPO / "examples" / "quickstart" / "config.yaml"
CRD = yaml.safe_load(CRD_PATH.read_text())
SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _rules(node: Any) -> Iterator[dict[str, str]]:
    if isinstance(node, dict):
        yield from node.get("x-kubernetes-validations", [])
        for value in node.values():
            yield from _rules(value)
    elif isinstance(node, list):
        for value in node:
            yield from _rules(value)


def _words(text: str) -> str:
    return " ".join(text.split())


def quickstart_in(namespace: str) -> dict[str, Any]:
    doc = yaml.safe_load(QUICKSTART.read_text())
    doc["metadata"]["namespace"] = namespace
    return dict(doc)


def test_crd_applies_server_side_and_is_established(control_plane: ControlPlane) -> None:
    out = control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_PATH))
    assert "serverside-applied" in out.stdout
    name = CRD["metadata"]["name"]
    status = control_plane.kubectl(
        "get", "crd", name, "-o", "jsonpath={.status.conditions[?(@.type=='Established')].status}"
    ).stdout
    assert status == "True"


def test_explain_shows_our_field_descriptions(control_plane: ControlPlane) -> None:
    validation = SCHEMA["properties"]["spec"]["properties"]["validation"]
    out = _words(control_plane.kubectl("explain", "haproxytemplateconfig.spec.validation").stdout)
    assert _words(validation["description"]) in out
    # and one field below it, so that the whole subtree reached the server
    field, props = next(iter(sorted(validation["properties"].items())))
    assert field in out
    assert _words(props["description"])[:60] in out


def test_get_shows_our_printer_columns(kube: Namespace) -> None:
    kube.apply(yaml.safe_dump(quickstart_in(kube.name)))
    out = kube.plane.kubectl("get", "haproxytemplateconfigs", "-n", kube.name).stdout
    header, row = out.splitlines()[:2]
    columns = CRD["spec"]["versions"][0]["additionalPrinterColumns"]
    assert header.split() == ["NAME"] + [c["name"].upper() for c in columns]
    assert row.split()[0] == "quickstart"
    # the short name is served too
    assert "quickstart" in kube.plane.kubectl("get", "htc", "-n", kube.name).stdout


Mutation = Callable[[dict[str, Any]], None]


def _labels(selector: dict[str, Any]) -> Mutation:
    def edit(spec: dict[str, Any]) -> None:
        spec["watchedResources"]["ingresses"]["labelSelector"] = selector

    return edit


def _set(key: str, value: Any) -> Mutation:
    def edit(spec: dict[str, Any]) -> None:
        spec[key] = value

    return edit


def _both_messages(spec: dict[str, Any]) -> None:
    spec["watchedResources"]["ingresses"]["validate"]["rules"][0]["messageExpression"] = "'x'"


def _bad_map_name(spec: dict[str, Any]) -> None:
    spec["maps"]["-bad name"] = {"template": "x"}


def _validators(*validators: dict[str, Any]) -> Mutation:
    def edit(spec: dict[str, Any]) -> None:
        spec.setdefault("validation", {})["externalValidators"] = list(validators)

    return edit


def _targets(*targets: dict[str, Any]) -> Mutation:
    def edit(spec: dict[str, Any]) -> None:
        spec["deploy"] = {"targets": list(targets)}

    return edit


# One spec per CEL rule of the CRD (by message) that breaks exactly that rule.
BREAKS: dict[str, Mutation] = {
    "matchLabels keys must be label keys": _labels({"matchLabels": {"bad key!": "x"}}),
    "values must be non-empty for In and NotIn": _labels(
        {"matchExpressions": [{"key": "tier", "operator": "In"}]}
    ),
    "the prefix of a label key must not exceed 253 characters": _labels(
        {"matchExpressions": [{"key": "a" * 254 + "/tier", "operator": "Exists"}]}
    ),
    "set message or messageExpression, not both": _both_messages,
    "output names must be file names": _bad_map_name,
    "type command needs a non-empty command": _validators({"name": "v", "type": "command"}),
    "type http needs a url": _validators({"name": "v", "type": "http"}),
    "minInterval must be at least 10ms": _set("reconcile", {"minInterval": "1ms"}),
    "resyncInterval must be 0s (disabled) or at least 1s": _set(
        "reconcile", {"resyncInterval": "500ms"}
    ),
    "type masterSocket needs socket and configDir": _targets({"name": "t", "type": "masterSocket"}),
    "type dataplaneApi needs url": _targets({"name": "t", "type": "dataplaneApi"}),
}


def test_every_cel_rule_has_a_case() -> None:
    messages = {rule["message"] for rule in _rules(SCHEMA)}
    covered = {m for m in messages if any(m.startswith(prefix) for prefix in BREAKS)}
    assert covered == messages, f"CEL rules without a refusal test: {messages - covered}"
    unused = [p for p in BREAKS if not any(m.startswith(p) for m in messages)]
    assert not unused, f"cases for rules the CRD no longer has: {unused}"


def test_the_unbroken_spec_is_accepted(kube: Namespace) -> None:
    out = kube.plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(quickstart_in(kube.name))
    )
    assert "created (server dry run)" in out.stdout


@pytest.mark.parametrize("message", sorted(BREAKS))
def test_server_refuses_a_spec_breaking_the_rule(kube: Namespace, message: str) -> None:
    doc = quickstart_in(kube.name)
    spec = copy.deepcopy(doc["spec"])
    BREAKS[message](spec)
    doc["spec"] = spec
    proc = kube.plane.kubectl("create", "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert proc.returncode != 0, proc.stdout
    assert "is invalid" in proc.stderr
    assert message in _words(proc.stderr), proc.stderr
    # nothing was stored
    listed = kube.plane.kubectl("get", "haproxytemplateconfigs", "-n", kube.name, "-o", "name")
    assert not re.search(r"\S", listed.stdout)
