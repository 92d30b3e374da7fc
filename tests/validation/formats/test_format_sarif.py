"""SARIF 2.1.0 output.

``SARIF_FACTS`` is our own JSON Schema written from the facts of the OASIS SARIF 2.1.0 schema
for every object this formatter emits: property names (closed objects, so a misspelt property
fails), required properties, enums and minimums. It does not cover objects we never emit.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from controller.diagnostics import RULES, Phase
from controller.validation import ValidationReport, format_report
from tests.validation.formats.formats_kit import Says, finding, report_with, typical


def names(text: str) -> list[str]:
    return text.split()


def closed(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": props}
    if required:
        out["required"] = required
    return out


ANY: dict[str, Any] = {}
LEVEL = {"enum": ["none", "note", "warning", "error"]}
BAG = {"$ref": "#/definitions/propertyBag"}
MSG = {"$ref": "#/definitions/message"}
MMS = {"$ref": "#/definitions/multiformatMessageString"}
INDEX = {"type": "integer", "minimum": -1}
LINE = {"type": "integer", "minimum": 1}

SARIF_FACTS: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    **closed(
        {
            "$schema": {"type": "string", "format": "uri"},
            "version": {"enum": ["2.1.0"]},
            "runs": {"type": "array", "items": {"$ref": "#/definitions/run"}},
            "inlineExternalProperties": {"type": "array"},
            "properties": BAG,
        },
        ["version", "runs"],
    ),
    "definitions": {
        "propertyBag": {"type": "object"},
        "message": closed(
            {
                "text": {"type": "string"},
                "markdown": {"type": "string"},
                "id": {"type": "string"},
                "arguments": {"type": "array", "items": {"type": "string"}},
                "properties": BAG,
            },
            ["text"],
        ),
        "multiformatMessageString": closed(
            {"text": {"type": "string"}, "markdown": {"type": "string"}, "properties": BAG},
            ["text"],
        ),
        "run": closed(
            {
                k: ANY
                for k in names(
                    "conversion language versionControlProvenance originalUriBaseIds artifacts "
                    "logicalLocations graphs automationDetails runAggregates baselineGuid "
                    "redactionTokens defaultEncoding defaultSourceLanguage newlineSequences "
                    "columnKind externalPropertyFileReferences threadFlowLocations taxonomies "
                    "addresses translations policies webRequests webResponses specialLocations"
                )
            }
            | {
                "tool": {"$ref": "#/definitions/tool"},
                "invocations": {"type": "array", "items": {"$ref": "#/definitions/invocation"}},
                "results": {"type": "array", "items": {"$ref": "#/definitions/result"}},
                "properties": BAG,
            },
            ["tool"],
        ),
        "tool": closed(
            {
                "driver": {"$ref": "#/definitions/toolComponent"},
                "extensions": {"type": "array", "uniqueItems": True},
                "properties": BAG,
            },
            ["driver"],
        ),
        "toolComponent": closed(
            {
                k: ANY
                for k in names(
                    "guid organization product productSuite fullName semanticVersion "
                    "dottedQuadFileVersion releaseDateUtc downloadUri globalMessageStrings "
                    "notifications taxa locations language contents isComprehensive "
                    "localizedDataSemanticVersion minimumRequiredLocalizedDataSemanticVersion "
                    "associatedComponent translationMetadata supportedTaxonomies"
                )
            }
            | {
                "name": {"type": "string"},
                "version": {"type": "string"},
                "informationUri": {"type": "string", "format": "uri"},
                "shortDescription": MMS,
                "fullDescription": MMS,
                "rules": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"$ref": "#/definitions/reportingDescriptor"},
                },
                "properties": BAG,
            },
            ["name"],
        ),
        "reportingDescriptor": closed(
            {
                k: ANY
                for k in names(
                    "deprecatedIds guid deprecatedGuids deprecatedNames messageStrings relationships"
                )
            }
            | {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "shortDescription": MMS,
                "fullDescription": MMS,
                "help": MMS,
                "helpUri": {"type": "string", "format": "uri"},
                "defaultConfiguration": closed(
                    {
                        "enabled": {"type": "boolean"},
                        "level": LEVEL,
                        "rank": {"type": "number", "minimum": -1, "maximum": 100},
                        "parameters": BAG,
                        "properties": BAG,
                    }
                ),
                "properties": BAG,
            },
            ["id"],
        ),
        "invocation": {
            "type": "object",
            "required": ["executionSuccessful"],
            "properties": {
                "executionSuccessful": {"type": "boolean"},
                "exitCode": {"type": "integer"},
            },
        },
        "result": closed(
            {
                k: ANY
                for k in names(
                    "rule kind analysisTarget guid correlationGuid occurrenceCount "
                    "partialFingerprints fingerprints stacks codeFlows graphs graphTraversals "
                    "suppressions baselineState rank attachments hostedViewerUri workItemUris "
                    "provenance fixes taxa webRequest webResponse"
                )
            }
            | {
                "ruleId": {"type": "string"},
                "ruleIndex": INDEX,
                "level": LEVEL,
                "message": MSG,
                "locations": {"type": "array", "items": {"$ref": "#/definitions/location"}},
                "relatedLocations": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"$ref": "#/definitions/location"},
                },
                "properties": BAG,
            },
            ["message"],
        ),
        "location": closed(
            {
                "id": INDEX,
                "physicalLocation": {"$ref": "#/definitions/physicalLocation"},
                "logicalLocations": {"type": "array"},
                "message": MSG,
                "annotations": {"type": "array"},
                "relationships": {"type": "array"},
                "properties": BAG,
            }
        ),
        "physicalLocation": closed(
            {
                "address": ANY,
                "artifactLocation": {"$ref": "#/definitions/artifactLocation"},
                "region": {"$ref": "#/definitions/region"},
                "contextRegion": {"$ref": "#/definitions/region"},
                "properties": BAG,
            }
        ),
        "artifactLocation": closed(
            {
                "uri": {"type": "string", "format": "uri-reference"},
                "uriBaseId": {"type": "string"},
                "index": INDEX,
                "description": MSG,
                "properties": BAG,
            }
        ),
        "region": closed(
            {
                "startLine": LINE,
                "startColumn": LINE,
                "endLine": LINE,
                "endColumn": LINE,
                "charOffset": INDEX,
                "charLength": {"type": "integer", "minimum": 0},
                "byteOffset": INDEX,
                "byteLength": {"type": "integer", "minimum": 0},
                "snippet": ANY,
                "message": MSG,
                "sourceLanguage": {"type": "string"},
                "properties": BAG,
            }
        ),
    },
}


def sarif_of(report: ValidationReport) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(format_report(report, "sarif"))
    return doc


def test_structure_matches_sarif_2_1_0_facts() -> None:
    jsonschema.Draft7Validator.check_schema(SARIF_FACTS)
    report, _ = typical()
    log = sarif_of(report)
    jsonschema.Draft7Validator(SARIF_FACTS).validate(log)
    # The checker itself is not toothless: a misspelt property and a bad level fail it.
    broken = json.loads(json.dumps(log))
    broken["runs"][0]["results"][0]["lvl"] = "error"
    assert not jsonschema.Draft7Validator(SARIF_FACTS).is_valid(broken)
    broken = json.loads(json.dumps(log))
    broken["runs"][0]["results"][0]["level"] = "fatal"
    assert not jsonschema.Draft7Validator(SARIF_FACTS).is_valid(broken)


def test_rules_come_from_the_registry_and_rule_index_points_into_them() -> None:
    log = sarif_of(typical()[0])
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    # only the rules the results use, not the whole registry
    used = {r["ruleId"] for r in log["runs"][0]["results"]} & set(RULES)
    assert [r["id"] for r in rules] == sorted(used) and len(rules) < len(RULES)
    for r in rules:
        assert r["help"]["text"] == RULES[r["id"]].fix
        assert "helpUri" not in r  # the rule pages are repository-relative, not a site
        assert r["help"]["markdown"].endswith(f"({RULES[r['id']].documentation_url}))")
    for result in log["runs"][0]["results"]:
        if result["ruleId"] in RULES:
            assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        else:
            assert "ruleIndex" not in result


def test_locations_point_at_templates_when_known() -> None:
    log = sarif_of(typical()[0])
    by_id = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    e = by_id["E4001"]
    physical = e["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {"uri": "haproxy.cfg", "uriBaseId": "TEMPLATES"}
    assert physical["region"] == {"startLine": 24}
    rendered = e["relatedLocations"][0]["physicalLocation"]
    assert rendered["artifactLocation"]["uriBaseId"] == "RENDERED"
    # Inclusive end column 31 becomes SARIF's exclusive 32.
    assert rendered["region"] == {"startLine": 5, "startColumn": 29, "endLine": 5, "endColumn": 32}
    # No source map for certificate files: the rendered file is the location.
    cert = by_id["E4002"]["locations"][0]["physicalLocation"]
    assert cert["artifactLocation"] == {"uri": "certs/site.pem", "uriBaseId": "RENDERED"}
    assert "relatedLocations" not in by_id["E4002"]


def test_levels_and_run_properties() -> None:
    log = sarif_of(typical()[0])
    levels = {r["ruleId"]: r["level"] for r in log["runs"][0]["results"]}
    assert levels == {"E4001": "error", "E4002": "error", "W3001": "warning", "I0003": "note"}
    props = log["runs"][0]["properties"]
    assert props["valid"] is False and props["status"] == "error"
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True}]
    obj = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "W3001")["properties"][
        "object"
    ]
    assert obj == {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "namespace": "default",
        "name": "echo",
    }


def test_template_names_become_relative_uris() -> None:
    from controller.diagnostics import TemplateLocation

    d = finding("W3001", Phase.SCHEMA, line=None).model_copy(
        update={"template_location": TemplateLocation(template="snippet: backends #1", line=3)}
    )
    log = sarif_of(report_with(Says(Phase.SCHEMA, [d])))
    jsonschema.Draft7Validator(SARIF_FACTS).validate(log)
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"][
        "uri"
    ]
    assert uri == "snippet%3A%20backends%20%231"
