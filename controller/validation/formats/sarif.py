"""SARIF 2.1.0, for code-scanning UIs and editors.

A result points at the template source when the source map knows which template line
produced the finding — that is where an author fixes it — and keeps the rendered file:line as
a related location. Without a template location the result points at the rendered file.
Template names and rendered paths are relative URIs under two base ids, ``TEMPLATES`` and
``RENDERED``, because neither lives at a fixed place on disk.

``runs[0].tool.driver.rules`` lists the rules the results use (from the registry, in id
order), so a viewer can show the title, description and fix hint of each, and ``ruleIndex``
points into it. A finding that stands for several rendered lines lists the others as related
locations and their number as the ``occurrences`` property.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from controller import __version__
from controller.diagnostics import RULES, Diagnostic, Location, Severity
from controller.validation.report import ReportStatus, ValidationReport

__all__ = ["SARIF_SCHEMA", "SARIF_VERSION", "format_sarif", "sarif_log"]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
TOOL_NAME = "haproxy-template-controller"

INTERNAL_ERROR = "F0001"

_LEVEL = {
    Severity.FATAL: "error",
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFO: "note",
}


def _uri(path: str) -> str:
    # ":" is escaped too: "snippet:x" would otherwise read as a URI scheme.
    return quote(path, safe="/@-._~")


def _descriptor(rid: str) -> dict[str, Any]:
    r = RULES[rid]
    out: dict[str, Any] = {
        "id": r.id,
        "name": r.title,
        "shortDescription": {"text": r.title},
        "fullDescription": {"text": r.description},
        "help": {"text": r.fix},
        "defaultConfiguration": {"level": _LEVEL[r.severity]},
    }
    if "://" in r.documentation_url:
        out["helpUri"] = r.documentation_url
    else:
        # helpUri must be an absolute URI; the rule pages live in the repository, so the
        # link goes where a viewer renders it relative to the checkout: the Markdown help.
        out["help"]["markdown"] = f"{r.fix} ([{r.id}]({r.documentation_url}))"
    return out


def _rendered(loc: Location) -> dict[str, Any]:
    physical: dict[str, Any] = {
        "artifactLocation": {"uri": _uri(loc.file), "uriBaseId": "RENDERED"}
    }
    if loc.line is not None and loc.line >= 1:
        region: dict[str, Any] = {"startLine": loc.line}
        if loc.column is not None and loc.column >= 1:
            region["startColumn"] = loc.column
            end_line = loc.end_line or loc.line
            if loc.end_column is not None and loc.end_column >= loc.column - 1:
                # Ours is inclusive; SARIF's endColumn is the column after the region.
                region["endLine"] = end_line
                region["endColumn"] = loc.end_column + 1
        elif loc.end_line is not None and loc.end_line >= loc.line:
            region["endLine"] = loc.end_line
        physical["region"] = region
    return {"physicalLocation": physical}


def _result(d: Diagnostic, rule_index: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ruleId": d.rule_id,
        "level": _LEVEL[d.severity],
        "message": {"text": d.message},
    }
    if d.rule_id in rule_index:
        out["ruleIndex"] = rule_index[d.rule_id]
    locations: list[dict[str, Any]] = []
    related: list[dict[str, Any]] = []
    t = d.template_location
    if t is not None:
        physical: dict[str, Any] = {
            "artifactLocation": {"uri": _uri(t.template), "uriBaseId": "TEMPLATES"}
        }
        if t.line is not None and t.line >= 1:
            physical["region"] = {"startLine": t.line}
        if t.file is not None:
            # The file the template is written in: a real relative URI a code-scanning UI
            # resolves in the checkout, and the template name as a related location.
            uri = "file://" + _uri(t.file) if t.file.startswith("/") else _uri(t.file)
            in_file: dict[str, Any] = {"artifactLocation": {"uri": uri}}
            if t.file_line is not None and t.file_line >= 1:
                in_file["region"] = {"startLine": t.file_line}
            locations.append({"physicalLocation": in_file})
            related.append({"physicalLocation": physical, "message": {"text": "template"}})
        else:
            locations.append({"physicalLocation": physical})
        if d.location is not None:
            rendered = _rendered(d.location)
            rendered["message"] = {"text": "rendered output"}
            related.append(rendered)
    elif d.location is not None:
        locations.append(_rendered(d.location))
    if d.occurrences is not None:
        own = (d.location.file, d.location.line) if d.location is not None else None
        for loc in d.occurrences.locations:
            if (loc.file, loc.line) == own:
                continue
            also = _rendered(loc)
            also["message"] = {"text": "also rendered here"}
            related.append(also)
    if locations:
        out["locations"] = locations
    if related:
        for i, x in enumerate(related, start=1):
            x["id"] = i
        out["relatedLocations"] = related
    props: dict[str, Any] = {"phase": d.phase.value, "severity": d.severity.value}
    if d.suggested_fix:
        props["suggestedFix"] = d.suggested_fix
    if d.object is not None:
        props["object"] = d.object.model_dump(by_alias=True, exclude_none=True)
    if d.occurrences is not None:
        props["occurrences"] = d.occurrences.count
    out["properties"] = props
    return out


def sarif_log(report: ValidationReport) -> dict[str, Any]:
    m = report.metadata
    used = sorted({d.rule_id for d in report.diagnostics if d.rule_id in RULES})
    rule_index = {rid: i for i, rid in enumerate(used)}
    run_props: dict[str, Any] = {
        "valid": report.valid,
        "status": report.status.value,
        "stagesRun": [p.value for p in m.stages_run],
        "stagesSkipped": [p.value for p in m.stages_skipped],
        "cacheHit": m.cache_hit,
    }
    for key, value in (
        ("checksum", m.checksum),
        ("fingerprint", m.fingerprint),
        ("haproxyVersion", m.haproxy_version),
    ):
        if value is not None:
            run_props[key] = value
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL_NAME,
                        "version": __version__,
                        "rules": [_descriptor(rid) for rid in used],
                    }
                },
                "invocations": [
                    {
                        # The analysis finished unless a budget ran out, we crashed, or the
                        # inputs could not be read (a report that names no stage at all).
                        "executionSuccessful": report.status is not ReportStatus.ANALYSIS_INCOMPLETE
                        and INTERNAL_ERROR not in {d.rule_id for d in report.diagnostics}
                        and bool(m.stages_run or m.stages_skipped),
                    }
                ],
                "results": [_result(d, rule_index) for d in report.diagnostics],
                "properties": run_props,
            }
        ],
    }


def format_sarif(report: ValidationReport) -> str:
    return json.dumps(sarif_log(report), indent=2, ensure_ascii=False) + "\n"
