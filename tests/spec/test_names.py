"""Names the API refuses up front: output (file) names, label keys and values, field selectors.

Each case runs through the loader (E8001 at the key's line) and through the CRD as the API
server would judge it, so the two cannot drift apart.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from controller.render.fileset import check_name
from controller.spec import load_config, openapi_schema, parse_config
from controller.spec.names import (
    check_label_key,
    check_label_value,
    check_output_name,
    field_selector_error,
)
from tests.spec.spec_apiserver import admit

SCHEMA = openapi_schema()

BASE: dict[str, Any] = {
    "apiVersion": "haproxy-template.dev/v1alpha1",
    "kind": "HAProxyTemplateConfig",
    "metadata": {"name": "x"},
    "spec": {
        "haproxyConfig": {"template": "global\n"},
        "watchedResources": {"svc": {"apiVersion": "v1", "kind": "Service"}},
    },
}


def _verdicts(doc: dict[str, Any]) -> tuple[bool, bool]:
    """(refused by the loader, refused by the CRD)."""
    return bool(parse_config(doc)[1]), bool(admit(doc, SCHEMA))


GOOD_NAMES = ["hosts.map", "a", "0", "a..b", "A_b-c.pem", "x" * 253]
BAD_NAMES = [".", "..", ".hidden", "", "a/b", "a b", "a\nb.map", "-x", "_x", "é.map", "x" * 254]


@pytest.mark.parametrize("name", GOOD_NAMES + BAD_NAMES, ids=repr)
@pytest.mark.parametrize("field", ["maps", "files", "certificates"])
def test_output_names_loader_crd_and_fileset_agree(field: str, name: str) -> None:
    doc = copy.deepcopy(BASE)
    doc["spec"][field] = {name: {"template": "x\n"}}
    refused = name in BAD_NAMES
    assert _verdicts(doc) == (refused, refused)
    try:
        check_name(name)
    except ValueError:
        assert refused
    else:
        assert not refused


def test_a_bad_output_name_is_e8001_at_the_key_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "apiVersion: haproxy-template.dev/v1alpha1\nkind: HAProxyTemplateConfig\n"
        "metadata: {name: x}\nspec:\n  haproxyConfig: {template: g}\n  maps:\n"
        '    ok.map: {template: ""}\n    ".tmp": {template: ""}\n'
    )
    config, diags = load_config(path)
    assert config is None
    [d] = diags
    assert d.rule_id == "E8001" and d.location is not None
    assert (d.location.file, d.location.line) == (str(path), 8)
    assert d.message.startswith('spec.maps[".tmp"]: invalid output name')


GOOD_KEYS = ["app", "a.b", "kubernetes.io/service-name", "x/" + "n" * 63, "d" * 253 + "/n"]
BAD_KEYS = [
    "bad key!",
    "-a",
    "a/b/c",
    "/a",
    "Example.com/a",
    "n" * 64,
    "d" * 254 + "/n",
    "a/",
]
GOOD_VALUES = ["", "v", "a-b_c.d", "V" * 63]
BAD_VALUES = ["bad value!", "-v", "v-", "V" * 64, "a b"]


def _with_selector(selector: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["spec"]["watchedResources"]["svc"]["labelSelector"] = selector
    return doc


@pytest.mark.parametrize("key", GOOD_KEYS + BAD_KEYS, ids=lambda k: repr(k[:20]))
def test_label_keys_in_match_labels_and_expressions(key: str) -> None:
    refused = key in BAD_KEYS
    as_label = _with_selector({"matchLabels": {key: "v"}})
    as_expression = _with_selector({"matchExpressions": [{"key": key, "operator": "Exists"}]})
    assert _verdicts(as_label) == (refused, refused)
    assert _verdicts(as_expression) == (refused, refused)
    with pytest.raises(ValueError) if refused else _nothing():
        check_label_key(key)


@pytest.mark.parametrize("value", GOOD_VALUES + BAD_VALUES, ids=repr)
def test_label_values_in_match_labels_and_expressions(value: str) -> None:
    refused = value in BAD_VALUES
    as_label = _with_selector({"matchLabels": {"app": value}})
    as_expression = _with_selector(
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["ok", value]}]}
    )
    assert _verdicts(as_label) == (refused, refused)
    assert _verdicts(as_expression) == (refused, refused)
    with pytest.raises(ValueError) if refused else _nothing():
        check_label_value(value)


GOOD_SELECTORS = [
    "",
    "metadata.name=a",
    "metadata.name==a",
    "metadata.name!=default",
    "metadata.name=a,metadata.namespace!=b",
    "spec.x=",
    r"spec.x=a\,b\=c\\d",
    "status.phase=Running!",
    "a==",  # key "a", operator "==", empty value
]
BAD_SELECTORS = [
    "metadata.name",
    "=a",
    "a=b=c",
    "a=b,",
    "a=b,,c=d",
    "a=b, c=d",
    r"a=x\y",
    "a!b=c",
]


@pytest.mark.parametrize("selector", GOOD_SELECTORS + BAD_SELECTORS, ids=repr)
def test_field_selector_syntax(selector: str) -> None:
    refused = selector in BAD_SELECTORS
    doc = copy.deepcopy(BASE)
    doc["spec"]["watchedResources"]["svc"]["fieldSelector"] = selector
    assert _verdicts(doc) == (refused, refused)
    assert (field_selector_error(selector) is not None) is refused


def test_selector_errors_name_the_field_and_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "apiVersion: haproxy-template.dev/v1alpha1\nkind: HAProxyTemplateConfig\n"
        "metadata: {name: x}\nspec:\n  haproxyConfig: {template: g}\n  watchedResources:\n"
        "    svc:\n      apiVersion: v1\n      kind: Service\n"
        "      labelSelector:\n        matchLabels:\n          'bad key!': v\n"
        "      fieldSelector: a=b=c\n"
    )
    _, diags = load_config(path)
    found = [(d.location.line if d.location else None, d.message.split(":")[0]) for d in diags]
    assert found == [
        (12, 'spec.watchedResources.svc.labelSelector.matchLabels["bad key!"]'),
        (13, "spec.watchedResources.svc.fieldSelector"),
    ]
    assert "cannot understand 'a=b=c'" in diags[1].message


def test_check_functions_return_their_input() -> None:
    assert check_output_name("hosts.map") == "hosts.map"
    assert check_label_key("a/b") == "a/b"
    assert check_label_value("") == ""
    assert field_selector_error("a=b") is None


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
