"""Field paths: the spelling users write in indexBy / ignoreFields / field selectors."""

from __future__ import annotations

import pytest

from controller.resources.paths import (
    MISSING,
    FieldPathError,
    format_path,
    lookup,
    parse_path,
    scalar_text,
    strip_tree,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("metadata.name", ("metadata", "name")),
        (
            "metadata.labels['kubernetes.io/service-name']",
            ("metadata", "labels", "kubernetes.io/service-name"),
        ),
        ('metadata.annotations["a.b/c"]', ("metadata", "annotations", "a.b/c")),
        ("spec.ports[0].port", ("spec", "ports", 0, "port")),
        ("['odd.key'].x", ("odd.key", "x")),
        (r"a['it\'s']", ("a", "it's")),
        ("a['x'][1]['y']", ("a", "x", 1, "y")),
    ],
)
def test_parse(text: str, expected: tuple[object, ...]) -> None:
    assert parse_path(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "must not be empty"),
        ("a..b", "empty segment"),
        (".a", "empty segment"),
        ("a.", "ends with a dot"),
        ("a['b'", "expected ']'"),
        ("a['b", "unterminated quote"),
        ("a[b]", "quoted key or a list index"),
        ("a[0", "unterminated '['"),
        ("a]b", "unbalanced"),
        ("a['b']c", "expected '.' or '['"),
    ],
)
def test_parse_errors_name_the_path_and_reason(text: str, reason: str) -> None:
    with pytest.raises(FieldPathError) as info:
        parse_path(text)
    assert reason in str(info.value)
    assert repr(text) in str(info.value)


def test_format_round_trips() -> None:
    for text in [
        "metadata.name",
        "metadata.labels['kubernetes.io/service-name']",
        "a[0].b",
        "a['it\\'s']",
    ]:
        path = parse_path(text)
        assert parse_path(format_path(path)) == path


def test_lookup_and_missing() -> None:
    obj = {"spec": {"ports": [{"port": 80}]}, "metadata": {"labels": {"a.b": "x"}}}
    assert lookup(obj, ("spec", "ports", 0, "port")) == 80
    assert lookup(obj, ("metadata", "labels", "a.b")) == "x"
    assert lookup(obj, ("spec", "ports", 1, "port")) is MISSING
    assert lookup(obj, ("metadata", "name")) is MISSING
    assert lookup(obj, ("metadata", "labels", "a.b", "deeper")) is MISSING
    assert lookup({"s": "text"}, ("s", 0)) is MISSING  # strings are not lists


def test_scalar_text() -> None:
    assert scalar_text("a") == "a"
    assert scalar_text(True) == "true"
    assert scalar_text(8080) == "8080"
    assert scalar_text({"a": 1}) is None
    assert scalar_text(None) is None


def test_strip_tree_merges_and_shorter_path_wins() -> None:
    tree = strip_tree(
        [("metadata", "managedFields"), ("metadata",), ("status", "x"), ("status", "y")]
    )
    assert tree == {"metadata": None, "status": {"x": None, "y": None}}
    with pytest.raises(FieldPathError, match="list indexes"):
        strip_tree([("spec", 0)])
