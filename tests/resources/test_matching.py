"""Collection matching and selectors, as the API server would decide them."""

from __future__ import annotations

from typing import Any

import pytest

from controller.resources import SelectorError, check_watched, collections_for, selector_matches
from controller.resources.matching import check_label_selector, parse_field_selector
from controller.spec.models import LabelSelector, WatchedResource


def obj(
    kind: str = "Ingress",
    api: str = "networking.k8s.io/v1",
    name: str = "a",
    ns: str | None = "default",
    **labels: str,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if ns is not None:
        meta["namespace"] = ns
    return {"apiVersion": api, "kind": kind, "metadata": meta}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, {}, True),
        ({}, {"a": "1"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "api"}, False),
        ({"matchLabels": {"app": "web"}}, {}, False),
        (
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            {"tier": "b"},
            True,
        ),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}, {}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        (
            {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]},
            {"tier": "a"},
            False,
        ),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": "x"}, False),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}],
            },
            {"app": "web", "tier": "b"},
            False,
        ),
        ({"matchExpressions": [{"key": "k", "operator": "Bogus"}]}, {"k": "v"}, False),
    ],
)
def test_selector_semantics(
    selector: dict[str, Any] | None, labels: dict[str, str], expected: bool
) -> None:
    assert selector_matches(selector, labels) is expected
    if selector is not None and all(
        e.get("operator") != "Bogus" for e in selector.get("matchExpressions", [])
    ):
        assert selector_matches(LabelSelector.model_validate(selector), labels) is expected


def test_field_selector_parsing() -> None:
    reqs = parse_field_selector(
        "metadata.name!=default,metadata.namespace==kube-system,spec.x=a\\,b\\=c,spec.y=="
    )
    assert [(r.op, r.value) for r in reqs] == [
        ("!=", "default"),
        ("=", "kube-system"),
        ("=", "a,b=c"),
        ("=", ""),
    ]
    assert parse_field_selector("") == ()
    # the API server takes the key verbatim (a space is part of it) and refuses an unescaped
    # '=' in a value; a key must also be a field path the store can look up
    for bad in ("metadata.name", "a=b,,c=d", "a..b=c", "a=b, c=d", "a=b=c", "a=x\\y", "=a"):
        with pytest.raises(SelectorError):
            parse_field_selector(bad)


def test_collections_for_matches_api_version_kind_and_selectors() -> None:
    watched = {
        "ingresses": WatchedResource(api_version="networking.k8s.io/v1", kind="Ingress"),
        "web": WatchedResource(
            api_version="networking.k8s.io/v1",
            kind="Ingress",
            label_selector=LabelSelector(match_labels={"app": "web"}),
        ),
        "not-default": WatchedResource(
            api_version="networking.k8s.io/v1",
            kind="Ingress",
            field_selector="metadata.namespace!=default",
        ),
        "named-a": WatchedResource(
            api_version="networking.k8s.io/v1", kind="Ingress", field_selector="metadata.name=a"
        ),
        "old": WatchedResource(api_version="extensions/v1beta1", kind="Ingress"),
        "broken": WatchedResource(
            api_version="networking.k8s.io/v1", kind="Ingress", field_selector="spec..x=1"
        ),
    }
    assert collections_for(obj(app="web"), watched) == ["ingresses", "named-a", "web"]
    assert collections_for(obj(name="b", ns="x"), watched) == ["ingresses", "not-default"]
    assert collections_for(obj(kind="Service", api="v1"), watched) == []
    assert [d.rule_id for d in check_watched(watched)] == ["E8012"]


def test_namespace_selector_applies_only_when_labels_are_known() -> None:
    watched = {
        "team": WatchedResource(
            api_version="v1",
            kind="Service",
            namespace_selector=LabelSelector(match_labels={"team": "a"}),
        ),
        "by-name": WatchedResource(
            api_version="v1",
            kind="Service",
            namespace_selector=LabelSelector(match_labels={"kubernetes.io/metadata.name": "prod"}),
        ),
    }
    svc = obj(kind="Service", api="v1", ns="prod")
    assert collections_for(svc, watched) == ["by-name", "team"]  # nothing known: not judged
    assert collections_for(svc, watched, {"prod": {"team": "b"}}) == ["by-name"]
    assert collections_for(svc, watched, {"prod": {"team": "a"}}) == ["by-name", "team"]
    assert collections_for(svc, watched, {}) == [
        "by-name"
    ]  # unknown namespace: only its name label
    cluster = obj(kind="Service", api="v1", ns=None)
    assert collections_for(cluster, watched, {}) == ["by-name", "team"]  # no namespace to judge


def test_label_selector_checks_on_the_wire_form() -> None:
    """The spec models refuse these too; the wire form reaches the matcher from elsewhere."""
    check_label_selector({"matchLabels": {"a": "b"}})
    with pytest.raises(SelectorError, match="In needs values"):
        check_label_selector({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    with pytest.raises(SelectorError, match="Exists takes no values"):
        check_label_selector(
            {"matchExpressions": [{"key": "b", "operator": "Exists", "values": ["x"]}]}
        )
    with pytest.raises(SelectorError, match="unknown operator"):
        check_label_selector({"matchExpressions": [{"key": "b", "operator": "Near"}]})


def test_check_watched_reports_bad_paths_and_selectors_with_their_field() -> None:
    watched = {
        "x": WatchedResource(
            api_version="v1",
            kind="Service",
            index_by=["metadata.labels[app]"],
            ignore_fields=["status", "spec..x"],
            field_selector="metadata..name=a",
        )
    }
    diags = check_watched(watched)
    assert [d.rule_id for d in diags] == ["E8010", "E8010", "E8012"]
    assert "spec.watchedResources.x.indexBy[0]" in diags[0].message
    assert "spec.watchedResources.x.ignoreFields[1]" in diags[1].message
    assert "spec.watchedResources.x.fieldSelector" in diags[2].message
