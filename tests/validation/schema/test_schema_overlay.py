"""``validation.schemaOverlays``: each merge rule, and each way an overlay is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from controller.validation.schema import (
    SchemaEngine,
    SchemaOverlayError,
    SchemaStage,
    apply_overlays,
)
from controller.validation.schema.generate import shared_document
from controller.validation.syntax import ParsedConfig

Parse = Callable[[str], ParsedConfig]


def kw(section: str, keyword: str, schema: Any) -> dict[str, Any]:
    """The overlay addressing: definitions.<section>.properties.<keyword>."""
    return {"definitions": {section: {"properties": {keyword: schema}}}}


def option(
    name: str, schema: Any, keyword: str = "server", section: str = "backend"
) -> dict[str, Any]:
    return kw(section, keyword, {"properties": {"options": {"properties": {name: schema}}}})


def found(engine: SchemaEngine, text: str, parse: Parse) -> list[tuple[str, str]]:
    return [(d.rule_id, d.message) for d in engine.diagnostics(parse(text), "haproxy.cfg")]


# --- merge rules -----------------------------------------------------------------------------


def test_keyed_maps_deep_merge_and_constraints_replace(cfg: Parse) -> None:
    engine = SchemaEngine("2.8", [option("weight", {"maximum": 100})])
    weight = engine.document["definitions"]["backend"]["properties"]["server"]["properties"][
        "options"
    ]["properties"]["weight"]
    assert weight == {"type": "integer", "minimum": 0, "maximum": 100, "x-checked": True}
    options = engine.document["definitions"]["backend"]["properties"]["server"]["properties"][
        "options"
    ]["properties"]
    assert "check" in options and "inter" in options  # siblings survive the merge
    assert found(engine, "backend b\n    server s 127.0.0.1:1 weight 100\n", cfg) == []
    ((rule, message),) = found(engine, "backend b\n    server s 127.0.0.1:1 weight 150\n", cfg)
    assert rule == "E3013" and "<= 100" in message and "schemaOverlays" in message
    # the bundled schema elsewhere is untouched: listen servers still allow 256
    assert found(engine, "listen l\n    server s 127.0.0.1:1 weight 150\n", cfg) == []
    base = shared_document("2.8")["definitions"]["backend"]["properties"]["server"]
    assert base["properties"]["options"]["properties"]["weight"]["maximum"] == 256


def test_enum_is_replaced_not_unioned(cfg: Parse) -> None:
    engine = SchemaEngine(
        "2.8", [kw("backend", "mode", {"properties": {"value": {"enum": ["http"]}}})]
    )
    assert found(engine, "backend b\n    mode http\n", cfg) == []
    ((rule, message),) = found(engine, "backend b\n    mode tcp\n", cfg)
    assert rule == "E3013" and "one of http" in message


def test_required_is_replaced_when_stated_and_each_removal_logged(cfg: Parse) -> None:
    with capture_logs() as logs:
        engine = SchemaEngine("2.8", [kw("backend", "server", {"required": ["name"]})])
    assert engine.overlay_result is not None
    assert engine.overlay_result.removed_requirements == [
        "/definitions/backend/properties/server: address"
    ]
    assert any(
        e["event"] == "overlay removes a requirement" and e["name"] == "address" for e in logs
    )
    assert found(engine, "backend b\n    server s\n", cfg) == []


def test_required_is_kept_when_omitted_and_extended_when_stated(cfg: Parse) -> None:
    kept = SchemaEngine("2.8", [option("weight", {"maximum": 100})])
    assert [r for r, _ in found(kept, "backend b\n    server s\n", cfg)] == ["E3005"]
    stricter = SchemaEngine(
        "2.8", [kw("backend", "server", {"required": ["name", "address", "options"]})]
    )
    ((rule, message),) = found(stricter, "backend b\n    server s 127.0.0.1:1\n", cfg)
    assert rule == "E3013" and "<options>" in message
    assert found(stricter, "backend b\n    server s 127.0.0.1:1 check\n", cfg) == []


def test_composition_keywords_are_replaced_whole() -> None:
    first = kw(
        "backend",
        "timeout server",
        {"properties": {"value": {"anyOf": [{"maximum": 1000}, {"minimum": 5000}]}}},
    )
    second = kw(
        "backend", "timeout server", {"properties": {"value": {"anyOf": [{"maximum": 60000}]}}}
    )
    result = apply_overlays(shared_document("2.8"), [first, second])
    value = result.document["definitions"]["backend"]["properties"]["timeout server"]["properties"][
        "value"
    ]
    assert value["anyOf"] == [{"maximum": 60000}]
    assert value["type"] == "number"  # the bundled constraints stay


def test_an_overlay_can_forbid_a_keyword(cfg: Parse) -> None:
    engine = SchemaEngine("2.8", [kw("frontend", "http-request use-service", False)])
    ((rule, message),) = found(
        engine, "frontend f\n    http-request use-service prometheus-exporter\n", cfg
    )
    assert rule == "E3013" and "forbidden" in message
    assert found(engine, "frontend f\n    http-request deny\n", cfg) == []


def test_an_overlay_can_forbid_an_option(cfg: Parse) -> None:
    engine = SchemaEngine("2.8", [option("send-proxy", False)])
    ((rule, message),) = found(
        engine, "backend b\n    server s 127.0.0.1:1 check send-proxy\n", cfg
    )
    assert rule == "E3013" and "option 'send-proxy' is forbidden" in message
    assert found(engine, "backend b\n    server s 127.0.0.1:1 check\n", cfg) == []


def test_loosening_is_allowed_but_logged(cfg: Parse) -> None:
    with capture_logs() as logs:
        engine = SchemaEngine("2.8", [option("weight", {"maximum": 1000})])
    assert engine.overlay_result is not None and engine.overlay_result.loosened
    assert any(e["event"] == "overlay loosens a bundled constraint" for e in logs)
    assert found(engine, "backend b\n    server s 127.0.0.1:1 weight 500\n", cfg) == []


def test_fingerprint_covers_family_and_overlays() -> None:
    plain = SchemaEngine("2.8").fingerprint
    assert plain == SchemaEngine("2.8").fingerprint
    assert plain != SchemaEngine("2.6").fingerprint
    tightened = SchemaEngine("2.8", [option("weight", {"maximum": 100})]).fingerprint
    assert tightened not in (
        plain,
        SchemaEngine("2.8", [option("weight", {"maximum": 99})]).fingerprint,
    )


# --- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overlay", "kind", "where"),
    [
        ([], "malformed", ""),
        (
            kw("backend", "server", {"type": 5}),
            "malformed",
            "/definitions/backend/properties/server/type",
        ),
        (option("sni", {"pattern": "("}), "malformed", "pattern"),
        (option("weight", {"minimum": 300}), "contradictory", "weight"),
        (option("weight", {"minimum": 10, "maximum": 5}), "contradictory", "weight"),
        (
            option("weight", {"exclusiveMinimum": 5, "exclusiveMaximum": 5}),
            "contradictory",
            "weight",
        ),
        (
            kw("backend", "mode", {"properties": {"value": {"enum": [1, 2]}}}),
            "contradictory",
            "value",
        ),
        (kw("backend", "mode", {"properties": {"value": {"enum": []}}}), "contradictory", "value"),
        (
            kw("backend", "mode", {"properties": {"value": {"enum": ["http"], "const": "tcp"}}}),
            "contradictory",
            "value",
        ),
        (
            kw(
                "backend",
                "mode",
                {"properties": {"value": {"enum": ["http", "tcp"], "pattern": "^h"}}},
            ),
            "contradictory",
            "value",
        ),
        (
            kw("backend", "mode", {"properties": {"value": {"type": "integer"}}}),
            "contradictory",
            "value/type",
        ),
        (kw("backnd", "server", {}), "unenforceable", "did you mean 'backend'"),
        (kw("backend", "srver", {}), "unenforceable", "did you mean 'server'"),
        (option("wieght", {"maximum": 1}), "unenforceable", "did you mean 'weight'"),
        ({"definitions": {"backend": {"maxProperties": 3}}}, "unenforceable", "section-level"),
        ({"properties": {"backend": {"maxItems": 10}}}, "unenforceable", "top-level"),
        (
            kw("backend", "server", {"properties": {"name": {"prefixItems": [{}]}}}),
            "unenforceable",
            "prefixItems",
        ),
        (
            kw("backend", "server", {"properties": {"name": {"format": "hostnamez"}}}),
            "unenforceable",
            "format",
        ),
        (
            kw("backend", "server", {"properties": {"name": {"$ref": "#/definitions/x"}}}),
            "unenforceable",
            "$ref",
        ),
    ],
)
def test_bad_overlays_fail_construction(overlay: Any, kind: str, where: str) -> None:
    with pytest.raises(SchemaOverlayError) as info:
        SchemaEngine("2.8", [option("weight", {"maximum": 100}), overlay])
    err = info.value
    assert err.kind == kind
    assert err.index == 1
    assert where in err.message
    diagnostic = err.diagnostic
    assert diagnostic.rule_id == "E3012" and "validation.schemaOverlays[1]" in diagnostic.message


def test_stage_construction_fails_on_a_bad_overlay() -> None:
    with pytest.raises(SchemaOverlayError):
        SchemaStage("2.8.25", [kw("backend", "srver", {})])


def test_the_documented_overlay_example_works(cfg: Parse) -> None:
    import re
    from pathlib import Path

    import yaml

    doc = (Path(__file__).resolve().parents[3] / "docs" / "schema.md").read_text()
    block = re.search(r"```yaml\n(validation:.*?)```", doc, re.S)
    assert block is not None
    overlays = yaml.safe_load(block.group(1))["validation"]["schemaOverlays"]
    engine = SchemaEngine("2.8", overlays)
    text = (
        "defaults\n    timeout server 2m\n"
        "frontend f\n    http-request use-service prometheus-exporter\n"
        "backend b\n    server s1 10.0.0.1:80 check weight 150\n    server s2 10.0.0.2:80\n"
        "    server s3 10.0.0.3:80 weight 5 check\n"
    )
    got = [
        (d.rule_id, d.location.line if d.location else 0)
        for d in engine.diagnostics(cfg(text), "haproxy.cfg")
    ]
    assert got == [("E3013", 2), ("E3013", 4), ("E3013", 6), ("E3013", 7)]


def test_constraining_a_free_string_turns_its_memo_masking_off(cfg: Parse) -> None:
    """Server names are masked in the memo while any name is valid; an overlay pattern must
    make each name count again."""
    engine = SchemaEngine(
        "2.8", [kw("backend", "server", {"properties": {"name": {"pattern": "^srv"}}})]
    )
    text = "backend b\n    server srv1 10.0.0.1:80 check\n    server web1 10.0.0.2:80 check\n"
    assert found(engine, text, cfg) == [
        (
            "E3013",
            "'server' argument <name>: 'web1' is not an accepted value [constraint from validation.schemaOverlays]",
        )
    ]
