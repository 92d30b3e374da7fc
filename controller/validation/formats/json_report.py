"""The machine format: the report's own model, camelCase, as JSON.

``docs/report.schema.json`` documents it; :func:`report_json_schema` generates that file from
the models so the document cannot drift from the code (a test compares them). Regenerate with
``python -m controller.validation.formats schema > docs/report.schema.json``.
"""

from __future__ import annotations

import json
from typing import Any

from controller.validation.report import ValidationReport

__all__ = ["SCHEMA_ID", "format_json", "report_json_schema", "schema_text"]

SCHEMA_ID = "https://haproxy-template.dev/schemas/validation-report.schema.json"


def format_json(report: ValidationReport) -> str:
    return json.dumps(report.to_json_dict(), indent=2, ensure_ascii=False) + "\n"


def report_json_schema() -> dict[str, Any]:
    schema = ValidationReport.model_json_schema(by_alias=True, mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "ValidationReport",
        "description": (
            "Verdict of the haproxy-template-controller validation pipeline for one candidate "
            "file set (haproxy.cfg plus maps, certificates and files). See docs/report.md."
        ),
        **{k: v for k, v in schema.items() if k not in {"title", "description"}},
    }


def schema_text() -> str:
    return json.dumps(report_json_schema(), indent=2, sort_keys=False) + "\n"
