"""JSON format: camelCase model dump, valid against the committed docs/report.schema.json,
which must equal what the models generate."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from controller.diagnostics import Phase
from controller.validation import ValidationReport, format_report
from controller.validation.formats.json_report import report_json_schema, schema_text
from controller.validation.report import BudgetExhaustion
from tests.validation.formats.formats_kit import Says, finding, report_with, typical

SCHEMA_FILE = Path(__file__).resolve().parents[3] / "docs" / "report.schema.json"


def test_committed_schema_matches_the_models() -> None:
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "docs/report.schema.json is stale: run "
        "`python -m controller.validation.formats schema > docs/report.schema.json`"
    )


def test_schema_is_a_valid_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(report_json_schema())


def reports() -> list[ValidationReport]:
    failing, _ = typical()
    budget = report_with(
        Says(
            Phase.HAPROXY,
            budget=BudgetExhaustion(phase=Phase.HAPROXY, budget="timeout", limit=1.0, used=1.0),
        ),
        Says(Phase.EXTERNAL),
    )
    ok = report_with(Says(Phase.SYNTAX, [finding("W2001", Phase.SYNTAX, line=1)]))
    return [failing, budget, ok]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_output_validates_against_the_schema(index: int) -> None:
    doc = json.loads(format_report(reports()[index], "json"))
    jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text())).validate(doc)


def test_output_is_camel_case_and_round_trips() -> None:
    report, _ = typical()
    doc = json.loads(format_report(report, "json"))
    assert set(doc) == {"valid", "status", "diagnostics", "metadata", "timings"}
    assert {"stagesRun", "stagesSkipped", "cacheHit", "haproxyVersion"} <= set(doc["metadata"])
    assert all("ruleId" in d for d in doc["diagnostics"])
    assert any("templateLocation" in d for d in doc["diagnostics"])
    assert ValidationReport.model_validate(doc) == report


def test_schema_rejects_what_the_model_rejects() -> None:
    doc = json.loads(format_report(reports()[2], "json"))
    doc["status"] = "fine"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(report_json_schema()).validate(doc)
    doc["status"] = "ok"
    doc["diagnostics"][0]["rule_id"] = "W2001"  # snake_case is not the wire form
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(report_json_schema()).validate(doc)


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError):
        format_report(reports()[2], "yaml")
