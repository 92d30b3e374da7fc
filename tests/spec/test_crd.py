"""The generated CRD: committed copies are current, the schema is structural, and it accepts and
refuses the same documents as the loader."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from controller.cli.crd import crd_paths
from controller.spec import generate_crd, openapi_schema, parse_config, read_documents
from controller.spec.crd import render_crd_yaml
from tests.spec.spec_apiserver import admit, compile_rule

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
QUICKSTART = REPO / "examples" / "quickstart" / "config.yaml"

# The field names of the Kubernetes type apiextensions.k8s.io/v1 JSONSchemaProps, from the API
# reference: whatever the generator emits must be one of them, or the API server drops or
# refuses it. Deliberately the whole type, not the generator's own list of kept keywords:
# comparing the output with a copy of that list could only ever agree with it. Keywords the
# type has but a structural schema must not use are checked separately below.
JSON_SCHEMA_PROPS = {
    "$ref", "$schema", "additionalItems", "additionalProperties", "allOf", "anyOf", "default",
    "definitions", "dependencies", "description", "enum", "example", "exclusiveMaximum",
    "exclusiveMinimum", "externalDocs", "format", "id", "items", "maxItems", "maxLength",
    "maxProperties", "maximum", "minItems", "minLength", "minProperties", "minimum",
    "multipleOf", "not", "nullable", "oneOf", "pattern", "patternProperties", "properties",
    "required", "title", "type", "uniqueItems", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type",
    "x-kubernetes-map-type", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations",
}  # fmt: skip


def nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path or ".", node
    for name, sub in node.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from nodes(node["additionalProperties"], f"{path}.*")
    if isinstance(node.get("items"), dict):
        yield from nodes(node["items"], f"{path}[]")


SCHEMA = openapi_schema()
ALL_NODES = list(nodes(SCHEMA))


@pytest.mark.parametrize("path", crd_paths(REPO), ids=lambda p: str(p.relative_to(REPO)))
def test_committed_crd_is_current(path: Path) -> None:
    assert path.exists(), f"{path} is missing: run `htc crd --write`"
    assert path.read_text(encoding="utf-8") == render_crd_yaml(), (
        f"{path.relative_to(REPO)} differs from the models: run `htc crd --write`"
    )


def test_crd_identity() -> None:
    crd = generate_crd()
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "haproxytemplateconfigs.haproxy-template.dev"
    assert spec["group"] == "haproxy-template.dev" and spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "HAProxyTemplateConfig",
        "listKind": "HAProxyTemplateConfigList",
        "plural": "haproxytemplateconfigs",
        "singular": "haproxytemplateconfig",
        "shortNames": ["htc"],
        "categories": ["haproxy"],
    }
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert list(columns) == ["Valid", "Deployed", "Checksum", "HAProxy", "Age"]
    assert columns["Age"] == {
        "name": "Age",
        "type": "date",
        "jsonPath": ".metadata.creationTimestamp",
    }


def test_printer_columns_point_at_schema_fields() -> None:
    [version] = generate_crd()["spec"]["versions"]
    paths = {p for p, _ in ALL_NODES}
    for column in version["additionalPrinterColumns"]:
        json_path = re.sub(r"\[\?\(.*?\)\]", "[]", column["jsonPath"])
        if json_path.startswith(".metadata."):
            continue
        assert json_path.removesuffix(".status") in paths or json_path in paths, json_path


@pytest.mark.parametrize(("path", "node"), ALL_NODES, ids=[p for p, _ in ALL_NODES])
def test_schema_node_is_structural(path: str, node: dict[str, Any]) -> None:
    unknown = set(node) - JSON_SCHEMA_PROPS
    assert not unknown, f"{path}: not a JSONSchemaProps field: {unknown}"
    if not node.get("x-kubernetes-preserve-unknown-fields"):
        assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}
    assert not ("properties" in node and "additionalProperties" in node), path
    assert node.get("additionalProperties") is not False, path
    if node.get("type") == "array":
        assert isinstance(node.get("items"), dict), f"{path}: arrays need an items schema"
    if "required" in node:
        assert set(node["required"]) <= set(node.get("properties", {})), path
    if path not in (".metadata",) and node.get("type") == "object":
        assert node.get("description") or path.endswith(("*", "[]")), f"{path} is undocumented"


def test_no_keyword_a_structural_schema_must_not_use() -> None:
    # References and combinators make a schema non-structural; title, const and $defs are
    # JSON Schema only. Node keys, not the JSON text, so a field may be named like a keyword.
    banned = {"$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf", "not", "title", "const"}
    assert [(p, set(n) & banned) for p, n in ALL_NODES if set(n) & banned] == []


def test_every_field_has_a_description() -> None:
    undocumented = [
        f"{path}.{name}"
        for path, node in ALL_NODES
        for name, sub in node.get("properties", {}).items()
        if path != "." or name != "metadata"
        if not sub.get("description")
    ]
    assert undocumented == []


@pytest.mark.parametrize(
    ("path", "node"),
    [(p, n) for p, n in ALL_NODES if "default" in n],
    ids=[p for p, n in ALL_NODES if "default" in n],
)
def test_defaults_satisfy_their_own_schema(path: str, node: dict[str, Any]) -> None:
    assert admit(node["default"], node) == [], path
    assert not isinstance(node["default"], dict), "object defaults would be stored in every CR"


@pytest.mark.parametrize(
    ("path", "node"),
    [(p, n) for p, n in ALL_NODES if "x-kubernetes-list-type" in n],
    ids=[p for p, n in ALL_NODES if "x-kubernetes-list-type" in n],
)
def test_map_lists_have_required_keys(path: str, node: dict[str, Any]) -> None:
    assert node["x-kubernetes-list-type"] == "map"
    items = node["items"]
    assert items["type"] == "object" and not items.get("nullable")
    for key in node["x-kubernetes-list-map-keys"]:
        assert key in items["required"], f"{path}: list-map key {key} must be required"


def test_cel_rules_compile_and_have_messages() -> None:
    rules = [r for _, n in ALL_NODES for r in n.get("x-kubernetes-validations", [])]
    assert len(rules) >= 6
    for rule in rules:
        compile_rule(rule["rule"])
        assert rule["message"] and set(rule) == {"rule", "message"}


def _cardinality(path_nodes: list[dict[str, Any]]) -> int | None:
    total = 1
    for node in path_nodes:
        if node.get("type") == "array":
            bound = node.get("maxItems")
        elif isinstance(node.get("additionalProperties"), dict):
            bound = node.get("maxProperties")
        else:
            continue
        if bound is None:
            return None
        total *= bound
    return total


def test_cel_rules_sit_below_bounded_containers_only() -> None:
    """The API server estimates a rule's cost times how often it can run; an unbounded list or
    map above a rule makes that estimate explode and the CRD is refused at install time."""

    def walk(node: dict[str, Any], above: list[dict[str, Any]], path: str) -> Iterator[str]:
        if node.get("x-kubernetes-validations"):
            n = _cardinality(above)
            if n is None or n > 100_000:
                yield f"{path}: runs up to {n or 'unbounded'} times"
        for name, sub in node.get("properties", {}).items():
            yield from walk(sub, above, f"{path}.{name}")
        if isinstance(node.get("additionalProperties"), dict):
            yield from walk(node["additionalProperties"], [*above, node], f"{path}.*")
        if isinstance(node.get("items"), dict):
            yield from walk(node["items"], [*above, node], f"{path}[]")

    assert list(walk(SCHEMA, [], "")) == []


def test_enum_strings_carry_a_length_bound() -> None:
    for path, node in ALL_NODES:
        if node.get("type") == "string" and "enum" in node:
            assert node["maxLength"] == max(len(v) for v in node["enum"]), path


def test_crd_is_a_valid_apiextensions_object() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    crd = generate_crd()
    kubernetes_validate.validate(crd, "1.30.0", strict=True)
    broken = copy.deepcopy(crd)
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.30.0", strict=True)


# --- the CRD and the loader agree on what a document means -----------------------------------


def read_config_doc(path: Path) -> dict[str, Any]:
    docs, diags = read_documents(path.read_text(), str(path))
    assert not diags
    [doc] = [d for d, _ in docs if d.get("kind") == "HAProxyTemplateConfig"]
    assert isinstance(doc, dict)
    return doc


def test_the_full_sample_is_admitted() -> None:
    doc = read_config_doc(DATA / "full.yaml")
    assert admit(doc, SCHEMA) == []
    assert parse_config(doc)[1] == []


def test_the_quickstart_example_is_admitted() -> None:
    if not QUICKSTART.exists():
        pytest.skip("examples/quickstart/config.yaml is not written yet")
    doc = read_config_doc(QUICKSTART)
    assert admit(doc, SCHEMA) == []
    config, diags = parse_config(doc, file=str(QUICKSTART))
    assert diags == [] and config is not None


def _mutations() -> list[tuple[str, Any]]:
    """(dotted path, new value) applied to the full sample; None deletes the field."""
    return [
        ("spec.bogus", 1),
        ("spec.haproxyConfig", None),
        ("spec.haproxyConfig.template", 5),
        ("spec.reconcile.debounce", "soon"),
        ("spec.reconcile.debounce", 5),
        ("spec.watchedResources.ingresses.indexBy", []),
        ("spec.watchedResources.ingresses.admission", "yes"),
        ("spec.httpSources.blocklist.url", "ftp://x"),
        ("spec.httpSources.blocklist.maxBytes", 0),
        ("spec.validation.haproxyVersion", "2"),
        ("spec.validation.severityLevel", "debug"),
        ("spec.validation.externalValidators.0.command", []),
        ("spec.validation.externalValidators.1.name", "lint"),
        ("spec.deploy.targets.0.socket", None),
        ("spec.haproxyConfig.validate.rules.0.name", "Bad_Name"),
        ("spec.haproxyConfig.validate.rules.0.message", "both"),
        ("spec.tests.renders-global.assertions", []),
        ("spec.tests.renders-global.assertions.0.count", -1),
        ("spec.watchedResources.ingresses.labelSelector.matchExpressions.0.values", ["x"]),
        ("status.conditions.0.reason", "not camel case"),
        ("status.conditions.1.type", "Valid"),
        ("status.lastValidated.checksum", "abc"),
        ("status.diagnosticsSummary.errors", "many"),
        # accepted variants
        ("spec.maps", None),
        ("spec.reconcile.debounce", "1h2m3.5s"),
        ("spec.extraContext.anything", {"deep": [None, {"x": 1}]}),
        ("spec.validation.externalValidators.0.url", None),
        ("spec.reconcile", None),
    ]


def _apply(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    target: Any = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    key: Any = int(last) if isinstance(target, list) else last
    if value is None and not isinstance(target, list):
        target.pop(key, None)
    else:
        target[key] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value"), _mutations(), ids=[f"{p}={v!r}" for p, v in _mutations()]
)
def test_crd_and_loader_agree(path: str, value: Any) -> None:
    doc = _apply(read_config_doc(DATA / "full.yaml"), path, value)
    refused_by_crd = admit(doc, SCHEMA)
    _, diags = parse_config(doc)
    assert bool(refused_by_crd) == bool(diags), (
        f"CRD: {refused_by_crd or 'accepted'}; loader: {[d.message for d in diags] or 'accepted'}"
    )


def test_mutations_include_refusals_and_acceptances() -> None:
    base = read_config_doc(DATA / "full.yaml")
    verdicts = [not parse_config(_apply(base, p, v))[1] for p, v in _mutations()]
    assert verdicts.count(False) >= 20 and verdicts.count(True) >= 4


def test_jsonschema_translation_refuses_unknown_fields() -> None:
    # Guards the offline API server itself: strict field validation must be on.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"spec": {"nope": 1}},
            {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {}, "additionalProperties": False}
                },
            },
        )
    assert admit(
        {"metadata": {"name": "x"}, "spec": {"haproxyConfig": {"template": ""}, "nope": 1}}, SCHEMA
    )
