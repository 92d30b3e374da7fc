"""What the store refuses to be configured with: ignore paths that would strip the fields objects
are keyed by, and findings placed on the config's lines when a locator is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.diagnostics import Location
from controller.resources import (
    InvalidObject,
    Store,
    StoreConfigError,
    check_raw_watched,
    check_watched,
)
from controller.resources.manifests import load_manifests
from controller.spec.loader import load_config_located
from controller.spec.models import WatchedResource

LABEL = "metadata.labels['kubernetes.io/service-name']"


def watched(**kw: object) -> dict[str, WatchedResource]:
    return {"x": WatchedResource.model_validate({"apiVersion": "v1", "kind": "Service", **kw})}


@pytest.mark.parametrize(
    ("ignore", "index_by", "hits"),
    [
        (["metadata"], None, "metadata.name"),
        (["metadata.name"], None, "metadata.name"),
        (["metadata.namespace"], None, "metadata.namespace"),
        (["metadata.labels"], ["metadata.namespace", LABEL], LABEL),
        (["spec"], ["spec.clusterIP"], "spec.clusterIP"),
    ],
)
def test_ignoring_a_key_field_is_refused(
    ignore: list[str], index_by: list[str] | None, hits: str
) -> None:
    kw: dict[str, object] = {"ignoreFields": ignore}
    if index_by is not None:
        kw["indexBy"] = index_by
    [diag] = check_watched(watched(**kw))
    assert diag.rule_id == "E8010"
    assert diag.message.startswith("spec.watchedResources.x.ignoreFields[0]: ignoring")
    assert f"would remove {hits}" in diag.message
    with pytest.raises(StoreConfigError):
        Store(watched(**kw))


def test_narrower_and_unrelated_ignore_paths_are_fine() -> None:
    ok = watched(
        ignoreFields=["metadata.managedFields", "metadata.labels['other']", "status"],
        indexBy=["metadata.namespace", LABEL],
    )
    assert check_watched(ok) == []
    store = Store(ok)
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "a", "namespace": "n", "labels": {"other": "1"}},
        "status": {"x": 1},
    }
    change = store.apply("x", svc)
    assert change is not None and change.new is not None
    assert "status" not in change.new and "other" not in change.new["metadata"]["labels"]


def test_raw_documents_are_checked_the_same_way_with_the_default_index() -> None:
    doc = {
        "spec": {
            "watchedResources": {
                "x": {"apiVersion": "v1", "kind": "Service", "ignoreFields": ["metadata"]},
                "y": {"indexBy": [LABEL], "ignoreFields": ["metadata.labels"]},
                "z": {"ignoreFields": ["metadata.annotations"]},
            }
        }
    }
    found = [d.message.split(":")[0] for d in check_raw_watched(doc)]
    assert found == [
        "spec.watchedResources.x.ignoreFields[0]",
        "spec.watchedResources.y.ignoreFields[0]",
    ]


def test_a_locator_puts_findings_on_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "apiVersion: haproxy-template.dev/v1alpha1\nkind: HAProxyTemplateConfig\n"
        "metadata: {name: x}\nspec:\n  haproxyConfig: {template: g}\n  watchedResources:\n"
        "    svc:\n      apiVersion: v1\n      kind: Service\n"
        "      indexBy: [metadata.namespace, 'metadata..name']\n"
        "      ignoreFields:\n        - status\n        - metadata\n"
    )
    config, diags, locate = load_config_located(path)
    assert config is not None and diags == []
    found = check_watched(config.spec.watched_resources, locate)
    assert [(d.rule_id, d.location) for d in found] == [
        ("E8010", Location(file=str(path), line=10)),
        ("E8010", Location(file=str(path), line=13)),
    ]
    # without a locator the message still names the field
    assert [d.location for d in check_watched(config.spec.watched_resources)] == [None, None]


def test_a_name_that_is_not_a_string_says_so(tmp_path: Path) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: 123, namespace: default}\n")
    manifests, diags = load_manifests([path])
    assert manifests == []
    [d] = diags
    assert d.rule_id == "E8003"
    assert d.message == "metadata.name must be a string, not the number 123"
    store = Store(watched())
    with pytest.raises(InvalidObject, match="must be a string"):
        store.apply("x", {"metadata": {"name": 123}})
    with pytest.raises(InvalidObject, match=r"no metadata\.name"):
        store.apply("x", {"metadata": {}})
